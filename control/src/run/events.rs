//! What the control loop does with the shards' events: progress and mapping segments go to the
//! partition table, the progress store and the offsets duty; a failed partition is stopped, or
//! restarted from the earliest offset when its position was lost and the config says so.

use std::collections::HashMap;
use std::time::Instant;

use crossbeam_channel::{Receiver, TryRecvError};
use strait_dataplane::shard::{
    FailureKind, MappingSegment, PartitionKey, PartitionProgress, ShardEvent, ShardStats,
};

use super::assign::Partitions;
use super::outbox::Shards;
use super::{FlowRuntime, RunError, RunOptions};
use crate::cluster::authz::{self, explain_rejected_produce};
use crate::duties::exactly_once::OnFailed;
use crate::model::TopicPartition;
use crate::store::progress;

/// Applies every event the shards have sent so far.
pub(super) async fn drain_events(
    ev_rx: &Receiver<ShardEvent>,
    flows: &mut [FlowRuntime],
    parts: &mut Partitions,
    stats: &mut HashMap<usize, ShardStats>,
    shards: &Shards,
    opts: &RunOptions,
) -> Result<(), RunError> {
    loop {
        match ev_rx.try_recv() {
            Ok(ev) => apply_event(ev, flows, parts, stats, shards, opts).await,
            Err(TryRecvError::Empty) => return Ok(()),
            Err(TryRecvError::Disconnected) => {
                return Err(RunError::ShardsStopped);
            }
        }
    }
}

/// Applies one shard event.
pub(super) async fn apply_event(
    ev: ShardEvent,
    flows: &mut [FlowRuntime],
    parts: &mut Partitions,
    stats: &mut HashMap<usize, ShardStats>,
    shards: &Shards,
    opts: &RunOptions,
) {
    match ev {
        ShardEvent::Report {
            shard,
            progress,
            mappings,
            stats: s,
        } => {
            stats.insert(shard, s);
            apply_report(shard, progress, &mappings, flows, parts);
        }
        ShardEvent::PartitionFailed {
            key,
            kind,
            error,
            next_offset,
            seek_generation,
            ..
        } => {
            // Stopped before control's latest seek of it, which restarted it in the shard.
            if super::assign::before_last_seek(&key, seek_generation, parts) {
                tracing::debug!(partition = %key, %error, "a failure from before the partition's latest seek, ignored");
                return;
            }
            let failure = Failure {
                key,
                kind,
                error,
                next_offset,
            };
            on_failure(failure, flows, parts, shards, opts);
        }
        ShardEvent::Revoked {
            key,
            next_offset,
            mappings,
            ..
        } => {
            apply_revoked(&key, next_offset, &mappings, flows, parts);
            // Exactly-once: the partition's open transaction ends with it here; its next
            // holder copies again from the committed progress.
            if let Some(st) = parts.get(&key).filter(|st| !st.assigned)
                && let Some(f) = flows.get_mut(st.flow as usize)
                && let Some(eos) = f.eos.as_mut()
            {
                let tp = TopicPartition::new(&*key.topic, key.partition);
                let restart = eos.release(&f.target, &mut f.progress, &tp).await;
                f.offsets.drop_uncommitted(&tp);
                if restart {
                    // A failed commit: taken over again (a new epoch) by the next discovery,
                    // which the exactly-once round runs at once.
                    f.topics.restart_partition(&tp.topic, tp.partition);
                    f.eos_restarts = true;
                }
            }
        }
        // Exactly-once: the progress of a sealed partition is what its transaction holds.
        ShardEvent::Sealed {
            shard,
            progress,
            mappings,
        } => {
            let key = progress.key.clone();
            apply_report(
                shard,
                vec![*progress],
                &[(key.clone(), mappings)],
                flows,
                parts,
            );
            if let Some(st) = parts.get(&key).filter(|st| st.shard == shard)
                && let Some(eos) = flows.get_mut(st.flow as usize).and_then(|f| f.eos.as_mut())
            {
                eos.on_sealed(&TopicPartition::new(&*key.topic, key.partition));
            }
        }
        ShardEvent::Stopped { .. } => {}
    }
}

/// A shard's periodic report: mapping segments, acknowledged ends, positions and lag.
fn apply_report(
    shard: usize,
    progress: Vec<PartitionProgress>,
    mappings: &[(PartitionKey, Vec<MappingSegment>)],
    flows: &mut [FlowRuntime],
    parts: &mut Partitions,
) {
    // Offsets: the segments first, then the acknowledged ends they cover; only from the shard
    // that holds (or last held) the partition, so that they arrive in order.
    for (key, segments) in mappings {
        if let Some(st) = parts.get(key).filter(|st| st.shard == shard)
            && let Some(f) = flows.get_mut(st.flow as usize)
        {
            f.offsets.on_segments(&key.topic, key.partition, segments);
        }
    }
    for (key, segments) in mappings {
        if let Some(st) = parts.get_mut(key).filter(|st| st.shard == shard) {
            st.records_copied += segments.iter().map(|s| u64::from(s.count)).sum::<u64>();
        }
    }
    let progress = super::assign::after_last_seek(progress, parts);
    for p in &progress {
        if let Some(st) = parts.get(&p.key).filter(|st| st.shard == shard)
            && let Some(f) = flows.get_mut(st.flow as usize)
        {
            f.offsets
                .on_progress(&p.key.topic, p.key.partition, p.next_offset);
        }
    }
    let (now, wall_ms) = (std::time::Instant::now(), super::now_ms());
    for p in progress {
        if let Some(st) = parts.get_mut(&p.key).filter(|st| st.shard == shard) {
            st.end_offset = p.end_offset;
            if let Some(f) = flows.get_mut(st.flow as usize) {
                f.observed.on_progress(shard, &p, now, wall_ms);
            }
        }
        if let Some(st) = parts.get_mut(&p.key) {
            st.next_offset = p.next_offset;
            if let Some(f) = flows.get_mut(st.flow as usize) {
                f.progress.update(
                    &TopicPartition::new(&*p.key.topic, p.key.partition),
                    progress::Entry {
                        next_offset: p.next_offset,
                        topic_id: st.topic_id,
                        target_offset: p.target_next_offset,
                        leader_epoch: p.last_fetched_epoch,
                    },
                );
            }
        }
    }
}

/// A partition its shard stopped (`ShardEvent::PartitionFailed`).
struct Failure {
    key: PartitionKey,
    kind: FailureKind,
    error: String,
    /// Replicated up to here.
    next_offset: i64,
}

/// A partition stopped in its shard: exactly-once may hold it back (its round asks the
/// coordinator first), otherwise `apply_failure`.
fn on_failure(
    mut failure: Failure,
    flows: &mut [FlowRuntime],
    parts: &mut Partitions,
    shards: &Shards,
    opts: &RunOptions,
) {
    if let Some(st) = parts.get(&failure.key)
        && let Some(eos) = flows.get_mut(st.flow as usize).and_then(|f| f.eos.as_mut())
    {
        let tp = TopicPartition::new(&*failure.key.topic, failure.key.partition);
        let fenced = failure.kind == FailureKind::Fenced;
        match eos.on_failed(&tp, fenced, &failure.error, Instant::now()) {
            // A refused epoch that may be the coordinator's timeout: the exactly-once round
            // asks the coordinator, then restarts the partition or stops it.
            OnFailed::HeldBack => return,
            OnFailed::Stop(Some(e)) => failure.error = e,
            OnFailed::Stop(None) => {}
        }
    }
    apply_failure(failure, flows, parts, shards, opts);
}

/// A partition stopped in its shard: record why, or restart it from the log start when its
/// position was lost and `strait.on.lost.position=earliest`.
fn apply_failure(
    failure: Failure,
    flows: &mut [FlowRuntime],
    parts: &mut Partitions,
    shards: &Shards,
    opts: &RunOptions,
) {
    let Failure {
        key,
        kind,
        error,
        next_offset,
    } = failure;
    let Some(st) = parts.get_mut(&key) else {
        return;
    };
    st.next_offset = next_offset;
    let error = match (&kind, flows.get(st.flow as usize)) {
        (FailureKind::TargetRejected, Some(f)) => explain_rejected_produce(
            error,
            &(f.plan.remote_name)(&key.topic),
            authz::principal(&f.plan.target_produce).as_deref(),
            &f.plan.target,
        ),
        _ => error,
    };
    if let (
        FailureKind::PositionLost {
            log_start_offset, ..
        },
        true,
    ) = (&kind, opts.reset_lost_positions)
    {
        if *log_start_offset >= 0 {
            tracing::warn!(partition = %key, "{error}; RESTARTING FROM THE EARLIEST OFFSET {log_start_offset} (strait.on.lost.position=earliest)");
            let seek = st.seek(&key, *log_start_offset);
            if let Err(e) = shards.send(st.shard, seek) {
                tracing::error!(partition = %key, "{error}; cannot restart it: {e}");
                st.failed = Some(format!("{error}; cannot restart it: {e}"));
                return;
            }
            st.next_offset = *log_start_offset;
            if let Some(f) = flows.get_mut(st.flow as usize) {
                f.lost_position_resets += 1;
                f.offsets.on_seek(
                    &TopicPartition::new(&*key.topic, key.partition),
                    *log_start_offset,
                );
            }
            return;
        }
        // No log start: the partition is being deleted (and perhaps created again). Topic
        // discovery restarts it when the topic is back, with its new id.
        tracing::error!(partition = %key, "{error}; the source partition is being deleted: it restarts when topic discovery sees the topic again");
        st.failed = Some(error);
        return;
    }
    tracing::error!(partition = %key, "{error}");
    st.failed = Some(error);
}

/// A revoked partition is drained: its final position and segments.
fn apply_revoked(
    key: &PartitionKey,
    next_offset: i64,
    mappings: &[MappingSegment],
    flows: &mut [FlowRuntime],
    parts: &mut Partitions,
) {
    // Only control revokes, and it marks the state unassigned when it does; an assigned state
    // under the same key is a newer assignment, which this event must not touch.
    if let Some(st) = parts.get_mut(key)
        && !st.assigned
    {
        st.next_offset = next_offset;
        st.released = true;
        st.records_copied += mappings.iter().map(|s| u64::from(s.count)).sum::<u64>();
        if let Some(f) = flows.get_mut(st.flow as usize) {
            f.offsets.on_segments(&key.topic, key.partition, mappings);
            f.offsets
                .on_progress(&key.topic, key.partition, next_offset);
            // The final position, so that whoever replicates the partition next resumes there.
            // The target's end for it is not known here: recovery then trusts the position.
            let tp = TopicPartition::new(&*key.topic, key.partition);
            let (target_offset, leader_epoch) = f
                .progress
                .get(&tp)
                .filter(|e| e.next_offset == next_offset)
                .map_or((-1, -1), |e| (e.target_offset, e.leader_epoch));
            f.progress.update(
                &tp,
                progress::Entry {
                    next_offset,
                    topic_id: st.topic_id,
                    target_offset,
                    leader_epoch,
                },
            );
        }
    }
}
