//! The control loop: every 20 ms it applies the shards' events, carries out operator commands,
//! publishes the API's snapshot, flushes progress and beats liveness when due, runs the
//! heartbeat, offsets and topic duties, and assigns what topic management found.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;
use strait_dataplane::shard::{FlowId, PartitionKey, ShardCommand, ShardEvent, ShardStats};

use super::api_link::ApiLink;
use super::assign::Partitions;
use super::discovery::{Pass, assign, topic_duties};
use super::events::drain_events;
use super::group::GroupLink;
use super::outbox::Shards;
use super::progress::LiveProgress;
use super::reload::{self, Loop, Reloader};
use super::{FlowRuntime, RunError, RunOptions, now_ms};
use crate::duties::exactly_once::AfterCommit;
use crate::duties::heartbeats::Heartbeats;
use crate::duties::topics::TopicChange;

/// How often the control loop turns.
pub const TICK: Duration = Duration::from_millis(20);

/// The longest one duty's cluster work (a progress flush, a liveness beat, heartbeats, offsets,
/// topic sync) may hold the loop. Past it the duty's work is dropped, logged, and runs again
/// when next due: every duty here is safe to cancel (progress stays dirty until a write
/// succeeded; the others retry at their next interval). Between duties the loop publishes the
/// status and carries out API commands, so one unreachable cluster delays those by at most
/// this much, not by an admin call's whole retry budget.
pub const DUTY_DEADLINE: Duration = Duration::from_secs(2);

/// Runs one duty's cluster work with [`DUTY_DEADLINE`]; `None` (logged) when it took longer.
async fn with_deadline<T>(
    duty: &'static str,
    work: impl std::future::Future<Output = T>,
) -> Option<T> {
    match tokio::time::timeout(DUTY_DEADLINE, work).await {
        Ok(v) => Some(v),
        Err(_) => {
            tracing::warn!(
                duty,
                deadline_ms = DUTY_DEADLINE.as_millis() as u64,
                "duty missed its deadline (a cluster does not answer); it runs again when next due"
            );
            None
        }
    }
}

/// Duties of the whole process (not of one flow).
pub(super) struct ProcessDuties<'a> {
    pub(super) heartbeats: &'a mut Heartbeats,
    pub(super) api: &'a mut ApiLink,
    /// Configuration reloads (API, SIGHUP).
    pub(super) reloader: &'a mut Reloader,
    /// Live progress (terminal or log lines), when asked for.
    pub(super) progress: Option<&'a mut LiveProgress>,
    /// The group this run is a member of, if any.
    pub(super) group: Option<&'a mut GroupLink>,
}

/// What the group allows this turn (everything, outside a group).
#[derive(Debug, Clone, Copy)]
struct GroupGate {
    /// Progress may be written (the member is within its local session deadline).
    may_write: bool,
    /// This member runs the singleton duties (MM2's heartbeats here).
    singleton: bool,
}

/// The first discovery of every flow (the same pass topic management runs every
/// `refresh.topics.interval.seconds`, but its errors stop the run), then the assignment of
/// what it found.
pub(super) async fn first_discovery(
    flows: &mut [FlowRuntime],
    shards: &Shards,
    parts: &mut Partitions,
    opts: &RunOptions,
    group: Option<&mut GroupLink>,
) -> Result<(), RunError> {
    let mut changes = Vec::new();
    for (fid, flow) in flows.iter_mut().enumerate() {
        changes.extend(topic_duties(flow, fid as FlowId, opts, Pass::Discover).await?);
    }
    assign(changes, flows, shards, parts, opts, group).await
}

/// Runs until `stop` resolves, a shard dies, or (`--until-caught-up`) every partition reached
/// the end it had at start.
pub(super) async fn control_loop(
    flows: &mut Vec<FlowRuntime>,
    shards: &Shards,
    ev_rx: &Receiver<ShardEvent>,
    parts: &mut Partitions,
    opts: &RunOptions,
    duties: &mut ProcessDuties<'_>,
    stop: impl std::future::Future<Output = ()>,
) -> Result<(), RunError> {
    let ProcessDuties {
        heartbeats,
        api,
        group,
        reloader,
        progress,
    } = duties;
    tokio::pin!(stop);
    let mut stats: HashMap<usize, ShardStats> = HashMap::new();
    let mut last_flush = Instant::now();
    let mut tick = tokio::time::interval(TICK);
    loop {
        tokio::select! {
            _ = &mut stop => {
                tracing::info!("stopping");
                return Ok(());
            }
            _ = tick.tick() => {}
        }
        drain_events(ev_rx, flows, parts, &mut stats, shards, opts).await?;
        // A flow's offset syncs and checkpoints load in the background while it replicates;
        // their load's error stops the run, as it did when the run waited for it at start.
        for f in flows.iter_mut().filter(|f| !f.retired) {
            f.offsets.poll_load().await?;
        }
        if let Some(dead) = shards.handles().iter().find(|s| s.thread.is_finished()) {
            return Err(RunError::ShardDied { shard: dead.index });
        }
        // What the shards' channels did not take last turn; never a blocking send.
        shards.flush(parts.len())?;
        api.shard_backlogs = shards.check_stalls(Duration::from_millis(opts.stall_timeout_ms));
        api.apply_commands(flows, parts, shards).await;
        let mut changes = Vec::new();
        if let Some(g) = group.as_deref_mut() {
            let restart = g.tick(flows, parts, shards, &stats, Instant::now()).await?;
            changes = restart_discovery(flows, &restart, opts).await;
            note_group(g, api);
        }
        let mut cx = Loop {
            flows,
            shards,
            ev_rx,
            parts,
            stats: &mut stats,
            opts,
            heartbeats,
            api,
            group: group.as_deref_mut(),
        };
        reload::if_requested(reloader, &mut cx).await;
        api.publish_if_due(flows, parts, &stats, opts);
        if let Some(p) = progress.as_deref_mut() {
            p.tick(flows, parts, &stats, Instant::now());
        }
        let gate = GroupGate {
            may_write: group.as_deref().is_none_or(|g| g.may_write(Instant::now())),
            singleton: group.as_deref().is_none_or(GroupLink::singleton),
        };
        // The duties' cluster work races the stop signal: a SIGTERM is honoured at once, not
        // after the admin calls in flight gave up.
        changes.extend(tokio::select! {
            _ = &mut stop => {
                tracing::info!("stopping (duties in flight abandoned)");
                return Ok(());
            }
            c = run_duties(flows, heartbeats, api, parts, &stats, shards, opts, &mut last_flush, gate) => c,
        });
        if !changes.is_empty() {
            // What the shards reported while the duties ran predates these changes: a failure
            // that a change resolves (a restart on a recreated topic) must come first.
            drain_events(ev_rx, flows, parts, &mut stats, shards, opts).await?;
        }
        assign(changes, flows, shards, parts, opts, group.as_deref_mut()).await?;
        if opts.until_caught_up && caught_up(flows, parts, group.as_deref()) {
            tracing::info!("every partition reached the end it had at start");
            return Ok(());
        }
    }
}

/// `--until-caught-up`: whether the run is done ([`copied_all`]). Flows removed by a reload
/// start nothing more.
fn caught_up(flows: &[FlowRuntime], parts: &Partitions, group: Option<&GroupLink>) -> bool {
    let unstarted = flows
        .iter()
        .filter(|f| !f.retired)
        .map(|f| f.topics.unstarted())
        .sum();
    copied_all(unstarted, group.is_none_or(GroupLink::settled), parts)
}

/// Whether every partition to copy was started and reached the source end it had at start (or
/// stopped with an error, or vanished): discovery left none for its next pass (`unstarted`: a
/// remote partition not shown yet, source offsets not read), and the group, if any, `settled`
/// (this member started its latest assignment, and that assignment covers every unit).
fn copied_all(unstarted: usize, settled: bool, parts: &Partitions) -> bool {
    unstarted == 0
        && settled
        && parts
            .values()
            .all(|p| p.failed.is_some() || p.vanished || p.next_offset >= p.target_end)
}

/// The group's status for the API and the unheld partitions. Taken only when a snapshot is due
/// or the member is out of its group: it names every unit held (10 001 strings at 10 000
/// partitions), and cloning it at every 20 ms turn was most of an idle run's CPU.
fn note_group(g: &GroupLink, api: &mut ApiLink) {
    let lost = g.lost();
    if lost || api.publish_due(Instant::now()) {
        let status = g.status();
        api.unheld.note_group(lost, &status);
        api.group = Some(status);
    } else {
        api.unheld.note_in_group();
    }
}

/// Discovery of the flows where this member was assigned partitions, so that they start now
/// rather than at the next refresh.
async fn restart_discovery(
    flows: &mut [FlowRuntime],
    restart: &std::collections::BTreeSet<FlowId>,
    opts: &RunOptions,
) -> Vec<TopicChange> {
    let mut changes = Vec::new();
    for &fid in restart {
        // A flow removed by a reload keeps its place but starts nothing again.
        let Some(f) = flows.get_mut(fid as usize).filter(|f| !f.retired) else {
            continue;
        };
        // No deadline: like the first discovery, it may read records for crash recovery.
        match topic_duties(f, fid, opts, Pass::Assigned(Instant::now())).await {
            Ok(c) => changes.extend(c),
            Err(e) => tracing::warn!("discovery of newly assigned partitions failed: {e}"),
        }
    }
    changes
}

/// Writes progress and beats liveness every `progress_flush_ms`. Failures are logged and the
/// next flush retries; each write has [`DUTY_DEADLINE`].
async fn flush_if_due(
    flows: &mut [FlowRuntime],
    opts: &RunOptions,
    last_flush: &mut Instant,
    may_write: bool,
) {
    if last_flush.elapsed() < Duration::from_millis(opts.progress_flush_ms) {
        return;
    }
    *last_flush = Instant::now();
    for f in flows.iter_mut().filter(|f| !f.retired) {
        if !may_write {
            // A member that lost its membership writes no progress (another member may
            // replicate these partitions by now).
        } else if let Some(Err(e)) = with_deadline("progress flush", f.flush_progress()).await {
            tracing::warn!(error = %e, "cannot write progress; will retry");
        }
        let _ = with_deadline(
            "liveness",
            f.liveness.beat_if_due(&f.target, *last_flush, now_ms()),
        )
        .await;
    }
}

/// Runs the flush, heartbeat, offsets and topic duties that are due, each with
/// [`DUTY_DEADLINE`], publishing the status and carrying out API commands between them;
/// returns what topic management found.
#[allow(clippy::too_many_arguments)]
async fn run_duties(
    flows: &mut [FlowRuntime],
    heartbeats: &mut Heartbeats,
    api: &mut ApiLink,
    parts: &mut Partitions,
    stats: &HashMap<usize, ShardStats>,
    shards: &Shards,
    opts: &RunOptions,
    last_flush: &mut Instant,
    gate: GroupGate,
) -> Vec<TopicChange> {
    flush_if_due(flows, opts, last_flush, gate.may_write).await;
    let mut changes = exactly_once_round(flows, parts, shards, opts, gate.may_write).await;
    let _ = with_deadline(
        "source ends of unassigned partitions",
        api.unheld.read_ends_if_due(flows, parts, Instant::now()),
    )
    .await;
    api.apply_commands(flows, parts, shards).await;
    let _ = with_deadline(
        "failover state",
        api.failover
            .apply_if_due(flows, parts, shards, &mut api.holds, Instant::now()),
    )
    .await;
    api.publish_if_due(flows, parts, stats, opts);
    let now = Instant::now();
    if gate.singleton {
        let _ = with_deadline("heartbeats", heartbeats.tick(now, now_ms())).await;
    }
    api.heartbeats = heartbeats.counters();
    api.publish_if_due(flows, parts, stats, opts);
    for f in flows.iter_mut().filter(|f| !f.retired) {
        let _ = with_deadline("offsets", f.offsets.tick(now, now_ms())).await;
    }
    api.apply_commands(flows, parts, shards).await;
    api.publish_if_due(flows, parts, stats, opts);
    for (fid, f) in flows.iter_mut().enumerate().filter(|(_, f)| !f.retired) {
        // tick() logs its own errors and retries at the next interval.
        if let Some(Ok(c)) = with_deadline(
            "topic sync",
            topic_duties(f, fid as FlowId, opts, Pass::Due(now)),
        )
        .await
        {
            changes.extend(c);
        }
    }
    changes
}

/// Exactly-once flows: seals the partitions whose transaction is due, commits the sealed ones
/// (unsealing them), revokes those whose commit failed or that were fenced, and discovers again
/// the flows whose revoked partitions are to be taken over anew. Not under [`DUTY_DEADLINE`]:
/// each call is bounded by the client's retries, and a commit dropped half-way would be
/// repeated with a sequence number already used. A member that lost its membership neither
/// seals nor commits (its partitions are being revoked).
async fn exactly_once_round(
    flows: &mut [FlowRuntime],
    parts: &mut Partitions,
    shards: &Shards,
    opts: &RunOptions,
    may_write: bool,
) -> Vec<TopicChange> {
    let now = Instant::now();
    let mut changes = Vec::new();
    for (fid, f) in flows.iter_mut().enumerate().filter(|(_, f)| !f.retired) {
        let Some(eos) = f.eos.as_mut() else {
            continue;
        };
        if may_write {
            let running = |k: &PartitionKey| {
                parts
                    .get(k)
                    .is_some_and(|st| st.assigned && st.failed.is_none())
            };
            // An idle partition (committed, sealed) opens its next transaction once its shard
            // has records to copy: until then it writes nothing, not even commit markers.
            eos.due_opens(|k| {
                parts.get(k).is_some_and(|st| {
                    st.assigned
                        && !st.paused
                        && st.failed.is_none()
                        && st.end_offset > st.next_offset
                })
            });
            for key in eos.due_seals(now, running) {
                if let Some(st) = parts.get(&key)
                    && let Err(e) = shards.send(st.shard, ShardCommand::Seal(key.clone()))
                {
                    tracing::warn!(partition = %key, error = %e, "cannot seal the partition for its commit");
                }
            }
            let after = eos
                .commit_round(&f.target, &mut f.progress, &mut f.offsets, now_ms(), now)
                .await;
            for a in after {
                let (key, command) = match a {
                    AfterCommit::Unseal { key, producer } => {
                        (key.clone(), ShardCommand::Unseal { key, producer })
                    }
                    AfterCommit::Restart(key) => {
                        if let Some(st) = parts.get_mut(&key) {
                            st.assigned = false;
                        }
                        (key.clone(), ShardCommand::Revoke(key))
                    }
                    AfterCommit::Fenced { key, error } => {
                        if let Some(st) = parts.get_mut(&key) {
                            st.assigned = false;
                            st.failed = Some(error);
                        }
                        (key.clone(), ShardCommand::Revoke(key))
                    }
                };
                if let Some(st) = parts.get(&key)
                    && let Err(e) = shards.send(st.shard, command)
                {
                    tracing::warn!(partition = %key, error = %e, "cannot reach the partition's shard after its commit");
                }
            }
        }
        if std::mem::take(&mut f.eos_restarts) {
            match topic_duties(f, fid as FlowId, opts, Pass::Discover).await {
                Ok(c) => changes.extend(c),
                Err(e) => {
                    tracing::warn!(
                        "exactly-once: discovery to take partitions over again failed: {e}"
                    );
                }
            }
        }
    }
    changes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::assign::PartitionState;

    fn state(next_offset: i64, target_end: i64) -> PartitionState {
        PartitionState {
            shard: 0,
            flow: 0,
            topic_id: [1; 16],
            next_offset,
            target_end,
            failed: None,
            assigned: true,
            vanished: false,
            end_offset: target_end,
            paused: false,
            records_copied: 0,
            released: false,
            seek_generation: 0,
        }
    }

    #[test]
    fn copied_all_waits_for_partitions_not_started_and_for_the_group() {
        let mut parts = Partitions::new();
        parts.insert(PartitionKey::new(0, "t", 0), state(10, 10));
        parts.insert(PartitionKey::new(0, "t", 1), state(0, 0));
        assert!(copied_all(0, true, &parts));
        // A partition discovery left for its next pass (its remote partition not shown yet).
        assert!(!copied_all(1, true, &parts));
        assert!(!copied_all(0, false, &parts), "the group has not settled");
        // Behind: not done, unless it stopped with an error or its source is gone.
        parts.insert(PartitionKey::new(0, "t", 2), state(3, 10));
        assert!(!copied_all(0, true, &parts));
        let behind = parts.get_mut(&PartitionKey::new(0, "t", 2)).unwrap();
        behind.failed = Some("stopped".into());
        assert!(copied_all(0, true, &parts));
        // Nothing started yet and nothing left either (no topic matches): done.
        assert!(copied_all(0, true, &Partitions::new()));
        assert!(!copied_all(2, true, &Partitions::new()));
    }
}
