//! Topic management's passes for the control loop and a reload: one flow's discovery (or the
//! duties that are due), and the assignment of what it found to the shards.

use std::time::Instant;

use strait_dataplane::shard::FlowId;

use super::assign::{Effect, Partitions, apply_topic_changes};
use super::group::GroupLink;
use super::outbox::Shards;
use super::{FlowRuntime, RunError, RunOptions};
use crate::cluster::TopicPartition;
use crate::duties::topics::{FlowIo, TopicChange, TopicError};

/// Which topic-management pass [`topic_duties`] runs.
#[derive(Debug, Clone, Copy)]
pub(super) enum Pass {
    /// A full discovery pass (at start, after a reload, for exactly-once take-overs).
    Discover,
    /// The discovery that starts partitions the group just assigned to this member: it may
    /// reuse what a pass shortly before read of the source
    /// ([`crate::duties::topics::TopicSync::discover_assigned`]).
    Assigned(Instant),
    /// Whatever is due at this instant (the control loop).
    Due(Instant),
}

/// Runs a flow's topic management pass `pass`.
pub(super) async fn topic_duties(
    flow: &mut FlowRuntime,
    fid: FlowId,
    opts: &RunOptions,
    pass: Pass,
) -> Result<Vec<TopicChange>, TopicError> {
    let FlowRuntime {
        plan,
        source,
        target,
        source_ep,
        target_ep,
        progress,
        topics,
        ..
    } = flow;
    let io = FlowIo {
        fid,
        plan,
        source,
        target,
        source_ep,
        target_ep,
        progress,
        reset_lost_positions: opts.reset_lost_positions,
    };
    match pass {
        Pass::Discover => topics.discover(&io).await,
        Pass::Assigned(now) => topics.discover_assigned(&io, now).await,
        Pass::Due(now) => Ok(topics.tick(&io, now).await),
    }
}

/// Acts on topic management's findings ([`apply_topic_changes`]) and carries out its effects.
/// In a group, only this member's partitions start.
pub(super) async fn assign(
    changes: Vec<TopicChange>,
    flows: &mut [FlowRuntime],
    shards: &Shards,
    parts: &mut Partitions,
    opts: &RunOptions,
    group: Option<&mut GroupLink>,
) -> Result<(), RunError> {
    let changes = match group {
        Some(g) if !changes.is_empty() => {
            let mine = g.filter(changes, flows);
            g.note_units(flows, parts);
            mine
        }
        _ => changes,
    };
    let mut changes = changes;
    take_over_transactional(&mut changes, flows).await;
    // Where the partitions this member starts begin, and what crash recovery found on the
    // target past their stored progress, join their exact mappings.
    for c in &changes {
        if let TopicChange::Start(np) = c
            && np.failed.is_none()
            && let Some(f) = flows.get_mut(np.key.flow as usize)
        {
            let first = np
                .recovered
                .first()
                .map_or(np.assignment.start_offset, |s| s.upstream);
            f.offsets.on_start(&np.key.topic, np.key.partition, first);
            if np.recovered.is_empty() {
                continue;
            }
            f.offsets
                .on_segments(&np.key.topic, np.key.partition, &np.recovered);
            f.offsets
                .on_progress(&np.key.topic, np.key.partition, np.assignment.start_offset);
        }
    }
    let effects = apply_topic_changes(changes, parts, shards.len(), opts.reset_lost_positions);
    // The bound of what may wait for a shard counts the partitions just added.
    shards.flush(parts.len())?;
    for effect in effects {
        match effect {
            // Never blocks: what a shard's channel does not take waits for the next turn.
            Effect::Send { shard, command } => shards.send(shard, command)?,
            Effect::Reset { flow, tp, entry } => {
                if let Some(f) = flows.get_mut(flow as usize) {
                    f.lost_position_resets += 1;
                    // A new topic: the old one's offset history means nothing for it.
                    f.offsets.forget_partition(&tp);
                    f.progress.update(&tp, entry);
                }
            }
        }
    }
    Ok(())
}

/// Exactly-once flows: the partitions this member starts are taken over first (their earlier
/// holders fenced, their committed progress read again, a transaction opened), and start from
/// the committed progress with their transactional producer; a partition that cannot be taken
/// over starts failed, saying why.
async fn take_over_transactional(changes: &mut [TopicChange], flows: &mut [FlowRuntime]) {
    let now = Instant::now();
    for (fid, f) in flows.iter_mut().enumerate() {
        let Some(eos) = f.eos.as_mut() else {
            continue;
        };
        let mut starts = Vec::new();
        for c in changes.iter() {
            if let TopicChange::Start(np) = c
                && np.failed.is_none()
                && np.key.flow as usize == fid
            {
                let remote = TopicPartition::new(&*np.assignment.target_topic, np.key.partition);
                starts.push((np.key.clone(), remote));
            }
        }
        if starts.is_empty() {
            continue;
        }
        let taken = eos
            .take_over(&f.target, &mut f.progress, &starts, now)
            .await;
        let mut taken: std::collections::BTreeMap<_, _> = taken.into_iter().collect();
        for c in changes.iter_mut() {
            let TopicChange::Start(np) = c else {
                continue;
            };
            let Some(result) = taken.remove(&np.key) else {
                continue;
            };
            match result {
                Ok(t) => {
                    let tp = TopicPartition::new(&*np.key.topic, np.key.partition);
                    if let Some(e) = t.committed.filter(|e| e.topic_id == np.topic_id) {
                        np.assignment.start_offset = e.next_offset;
                        np.assignment.start_leader_epoch = e.leader_epoch;
                        np.assignment.start_target_offset = e.target_offset;
                    }
                    np.recovered.clear();
                    f.offsets.hold_syncs_until_commit(&tp);
                    if let Some(m) = t.mapping {
                        f.offsets
                            .restore_partitions([(tp, m)].into_iter().collect());
                    }
                    np.assignment.transactional = Some(t.transactional);
                }
                Err(e) => {
                    let why = format!("exactly-once: cannot take the partition over: {e}");
                    tracing::error!(partition = %np.key, "{why}");
                    np.failed = Some(why);
                }
            }
        }
    }
}
