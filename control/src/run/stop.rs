//! Shutdown of `strait run`: the shards stop and send their final reports, the offsets duty
//! publishes its last syncs (and, with `--until-caught-up`, a last round of checkpoints), the
//! progress is flushed and the clean stop recorded.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, TryRecvError};
use strait_dataplane::shard::{ShardCommand, ShardEvent, ShardStats};

use super::assign::Partitions;
use super::events::apply_event;
use super::outbox::Shards;
use super::status::add_stats;
use super::{FlowRuntime, RunError, RunOptions, now_ms};

/// How long the shards get to stop and send their final reports. With the group's
/// `LEAVE_TIMEOUT` (3 s) a stop takes at most 9 s plus the final writes' deadline, whatever
/// the clusters do (the bar: 10 s plus the progress flush; 8 s here once made 23 s in all).
const SHARD_STOP_TIMEOUT: Duration = Duration::from_secs(6);

/// How long the flows' last writes (exactly-once's last commits, offset syncs, progress, the
/// clean stop) may take in all. Past it strait exits, logging what was not written: the
/// partitions resume from the last stored progress at the next start (records copied since are
/// copied again).
const FINAL_WRITES_DEADLINE: Duration = Duration::from_secs(10);

/// The longest `strait run` takes to stop once the control loop has seen SIGTERM: the shards'
/// stop, the final writes and LeaveGroup run one after the other (`run`), each bounded, whatever
/// the clusters do. README quotes it (19 s); the fault suite asserts every SIGTERM's exit
/// against it plus a stated margin (`tests/src/faults.rs`, `SHUTDOWN_BOUND`).
pub const SHUTDOWN_DEADLINE: Duration = SHARD_STOP_TIMEOUT
    .saturating_add(FINAL_WRITES_DEADLINE)
    .saturating_add(super::group::LEAVE_TIMEOUT);

/// How long a stop waits for the shards to settle the exactly-once partitions it sealed.
const FINAL_SEAL_WAIT: Duration = Duration::from_secs(3);

/// How long a stop's exactly-once seals and last commits take at most, together: a part of
/// [`FINAL_WRITES_DEADLINE`], which the final writes get the rest of.
const FINAL_COMMITS_DEADLINE: Duration = Duration::from_secs(5);

/// Exactly-once flows at a stop, before the shards stop: seals every partition, waits (at
/// most [`FINAL_SEAL_WAIT`]) until the shards report them settled, and commits them, so that
/// the stop stores the progress of everything acknowledged. What does not settle or commit
/// within [`FINAL_COMMITS_DEADLINE`] (a target that does not answer) is left to the next start,
/// which fences it and copies again from the committed progress.
async fn final_commits(
    shards: &Shards,
    ev_rx: &Receiver<ShardEvent>,
    flows: &mut [FlowRuntime],
    parts: &mut Partitions,
    stats: &mut HashMap<usize, ShardStats>,
    opts: &RunOptions,
) {
    if flows.iter().all(|f| f.eos.is_none()) {
        return;
    }
    let now = Instant::now();
    for f in flows.iter_mut().filter(|f| !f.retired) {
        let Some(eos) = f.eos.as_mut() else {
            continue;
        };
        let running = |k: &strait_dataplane::shard::PartitionKey| {
            parts
                .get(k)
                .is_some_and(|st| st.assigned && st.failed.is_none())
        };
        for key in eos.seal_all(now, running) {
            if let Some(st) = parts.get(&key) {
                let _ = shards.send(st.shard, ShardCommand::Seal(key.clone()));
            }
        }
    }
    let seal_deadline = now + FINAL_SEAL_WAIT;
    while Instant::now() < seal_deadline
        && flows
            .iter()
            .any(|f| f.eos.as_ref().is_some_and(|e| e.sealing()))
    {
        let _ = shards.flush(parts.len());
        if super::events::drain_events(ev_rx, flows, parts, stats, shards, opts)
            .await
            .is_err()
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let commits = async {
        for f in flows.iter_mut().filter(|f| !f.retired) {
            if let Some(eos) = f.eos.as_mut() {
                // Stopping: nothing is unsealed, and what failed is aborted by the final writes.
                eos.commit_round(
                    &f.target,
                    &mut f.progress,
                    &mut f.offsets,
                    now_ms(),
                    Instant::now(),
                )
                .await;
            }
        }
    };
    // A round cut short leaves each partition in the phase its last finished call left.
    let deadline = tokio::time::Instant::from_std(now + FINAL_COMMITS_DEADLINE);
    if tokio::time::timeout_at(deadline, commits).await.is_err() {
        tracing::error!(
            "exactly-once: the last commits did not finish within {FINAL_COMMITS_DEADLINE:?} (a target does not answer); \
             the next start takes the partitions over and copies again from the committed progress"
        );
    }
}

/// Stops the shards, applies their final reports, and waits for their threads. Returns every
/// shard's last counters and how long exactly-once's last commits took (a part of the final
/// writes' deadline, [`finish_flows`]'s `spent`).
pub(super) async fn stop_shards(
    shards: Shards,
    ev_rx: &Receiver<ShardEvent>,
    flows: &mut [FlowRuntime],
    parts: &mut Partitions,
    opts: &RunOptions,
) -> (HashMap<usize, ShardStats>, Duration) {
    // Exactly-once partitions commit what the shards acknowledged before the shards stop.
    let started = Instant::now();
    final_commits(&shards, ev_rx, flows, parts, &mut HashMap::new(), opts).await;
    let commits_took = started.elapsed();
    // Behind what still waits for each shard, never blocking: a shard that takes no commands
    // costs this wait's deadline, not a hang.
    for i in 0..shards.len() {
        let _ = shards.send(i, ShardCommand::Shutdown);
    }
    let mut stopped = 0;
    let mut stats: HashMap<usize, ShardStats> = HashMap::new();
    let deadline = Instant::now() + SHARD_STOP_TIMEOUT;
    while stopped < shards.len() && Instant::now() < deadline {
        shards.flush_stopping();
        match ev_rx.try_recv() {
            Ok(ev) => {
                if let ShardEvent::Stopped { shard, error } = &ev {
                    stopped += 1;
                    if let Some(e) = error {
                        tracing::error!(shard, error = %e, "shard stopped with an error");
                    }
                }
                apply_event(ev, flows, parts, &mut stats, &shards, opts).await;
            }
            Err(TryRecvError::Empty) => tokio::time::sleep(Duration::from_millis(10)).await,
            Err(TryRecvError::Disconnected) => break,
        }
    }
    for (i, waiting) in (0..shards.len()).map(|i| (i, shards.waiting(i))) {
        if waiting > 0 {
            tracing::warn!(
                shard = i,
                waiting,
                "shard {i} did not take its last {waiting} commands (the shutdown among them)"
            );
        }
    }
    for s in shards.into_handles() {
        // A shard sends `Stopped` just before its thread returns: give it the rest of the
        // deadline to return (CI once warned 23 ms after the stop, for a shard that had stopped).
        while !s.thread.is_finished() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        if s.thread.is_finished() {
            let _ = s.thread.join();
        } else {
            // Its thread ends with the process; waiting could take as long as the cluster
            // stays silent.
            tracing::warn!(
                shard = s.index,
                "shard did not stop within {SHARD_STOP_TIMEOUT:?}; not waiting for it"
            );
        }
    }
    (stats, commits_took)
}

/// The flows' last writes, after the shards stopped, in what is left of
/// [`FINAL_WRITES_DEADLINE`] once exactly-once's last commits `spent` their part.
pub(super) async fn finish_flows(
    flows: &mut [FlowRuntime],
    opts: &RunOptions,
    spent: Duration,
) -> Result<(), RunError> {
    let deadline = tokio::time::Instant::now() + FINAL_WRITES_DEADLINE.saturating_sub(spent);
    match tokio::time::timeout_at(deadline, final_writes(flows, opts)).await {
        Ok(r) => r,
        Err(_) => {
            let unflushed: usize = flows.iter().map(|f| f.progress.dirty_len()).sum();
            tracing::error!(
                unflushed_partitions = unflushed,
                "final writes did not finish within {FINAL_WRITES_DEADLINE:?} (a target does not answer): \
                 progress of {unflushed} partitions not stored, clean stop not recorded; \
                 exiting anyway, the next start resumes from the last stored progress"
            );
            Ok(())
        }
    }
}

async fn final_writes(flows: &mut [FlowRuntime], opts: &RunOptions) -> Result<(), RunError> {
    // The last offset syncs; with --until-caught-up, a final round of checkpoints and group
    // sync over the final mapping. Before the clean stop is recorded: they write too.
    // A flow a reload removed has done its last writes.
    // A load still running that fails now fails the run, after the progress is written.
    let mut load_error = None;
    for f in flows.iter_mut().filter(|f| !f.retired) {
        if let Err(e) = f.offsets.finish(opts.until_caught_up, now_ms()).await {
            load_error.get_or_insert(e);
        }
    }
    for f in flows.iter_mut().filter(|f| !f.retired) {
        // Exactly-once: what no commit holds is aborted (copied again at the next start).
        if let Some(eos) = f.eos.as_mut() {
            for tp in eos.held() {
                eos.release(&f.target, &mut f.progress, &tp).await;
                f.offsets.drop_uncommitted(&tp);
            }
        }
        f.flush_progress().await?;
        // Import and export may run from now on.
        if let Err(e) = f.liveness.stopped(&f.target, now_ms()).await {
            tracing::warn!("cannot record the clean stop: {e}");
        }
    }
    match load_error {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}

/// The shards' counters summed.
pub(super) fn total_stats(stats: &HashMap<usize, ShardStats>) -> ShardStats {
    let mut total = ShardStats::default();
    for s in stats.values() {
        add_stats(&mut total, s);
    }
    total
}

/// Partitions that stopped with an error, as `(topic-partition, error)`.
pub(super) fn failed_partitions(parts: &Partitions) -> Vec<(String, String)> {
    parts
        .iter()
        .filter_map(|(k, p)| {
            p.failed
                .clone()
                .map(|e| (format!("{}-{}", k.topic, k.partition), e))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// README's figure ("19 s in all") is the sum of the deadlines; change both together.
    #[test]
    fn shutdown_deadline_is_the_readmes_19_s() {
        assert_eq!(SHUTDOWN_DEADLINE, Duration::from_secs(19));
    }
}
