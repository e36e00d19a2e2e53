//! Topic management's passes for the control loop and a reload: one flow's discovery (or the
//! duties that are due), and the assignment of what it found to the shards.

use std::time::Instant;

use strait_dataplane::shard::FlowId;

use super::assign::{Effect, Partitions, apply_topic_changes};
use super::group::GroupLink;
use super::outbox::Shards;
use super::{FlowRuntime, RunError, RunOptions};
use crate::duties::topics::{FlowIo, TopicChange, TopicError};

/// Runs a flow's topic management: the first discovery (`now = None`), or whatever is due.
pub(super) async fn topic_duties(
    flow: &mut FlowRuntime,
    fid: FlowId,
    opts: &RunOptions,
    now: Option<Instant>,
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
    match now {
        None => topics.discover(&io).await,
        Some(now) => Ok(topics.tick(&io, now).await),
    }
}

/// Acts on topic management's findings ([`apply_topic_changes`]) and carries out its effects.
/// In a group, only this member's partitions start.
pub(super) fn assign(
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
