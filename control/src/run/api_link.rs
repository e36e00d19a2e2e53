//! The control loop's side of the REST API: status snapshots out, operator commands in.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use strait_dataplane::shard::{PartitionKey, ShardStats};
use tokio::sync::mpsc;

use super::assign::Partitions;
use super::commands::{Ctx, Hold, Holds, handle};
use super::outbox::{Backlog, Shards};
use super::status::status;
use super::unheld::{NOT_ASSIGNED, Unheld};
use super::{FlowRuntime, RunOptions, now_ms};
use crate::api::{ApiCommand, ApiState, Published, Request};
use crate::model::counters::HeartbeatCounters;

/// The control loop's side of the REST API: it publishes status snapshots and carries out
/// operator commands.
pub(super) struct ApiLink {
    pub(super) published: Published,
    pub(super) commands: mpsc::Receiver<ApiCommand>,
    pub(super) last_publish: Option<Instant>,
    /// What operators paused or stopped.
    pub(super) holds: Holds,
    /// Each partition's last published state and since when (ms since the epoch).
    pub(super) since: HashMap<PartitionKey, (ApiState, i64)>,
    /// The heartbeat emitters' counters after their last round.
    pub(super) heartbeats: Vec<HeartbeatCounters>,
    /// The group's view, set by the control loop (`None` outside a group).
    pub(super) group: Option<crate::api::status::GroupStatus>,
    /// Reload requests, for the control loop (`reload::if_requested`).
    pub(super) reloads: Vec<ApiCommand>,
    /// Shards with commands waiting for them, set by the control loop every turn.
    pub(super) shard_backlogs: Vec<Backlog>,
    /// The partitions of a member out of its group, listed as not assigned.
    pub(super) unheld: Unheld,
    /// Continuous verification, when on: what it found goes into every snapshot.
    pub(super) verifier: Option<super::verifier::Verifier>,
    /// The stored failover state, read every few seconds.
    pub(super) failover: super::failover::FailoverWatch,
}

/// How often the API's snapshot is refreshed when no reader asks for a fresh one
/// (`Published::fresh`): it is also when a partition's state change gets its `since_ms`.
const PUBLISH_INTERVAL: Duration = Duration::from_secs(10);

/// At most this many commands per turn of the control loop (the rest wait in the bounded
/// queue; when it is full, the API answers 503).
const COMMANDS_PER_TURN: usize = 16;

impl ApiLink {
    pub(super) fn new(published: Published, commands: mpsc::Receiver<ApiCommand>) -> ApiLink {
        ApiLink {
            published,
            commands,
            last_publish: None,
            holds: Holds::new(),
            since: HashMap::new(),
            heartbeats: Vec::new(),
            group: None,
            reloads: Vec::new(),
            shard_backlogs: Vec::new(),
            unheld: Unheld::default(),
            verifier: None,
            failover: super::failover::FailoverWatch::default(),
        }
    }

    /// Carries out the operator commands received since the last turn, and answers each.
    pub(super) async fn apply_commands(
        &mut self,
        flows: &mut [FlowRuntime],
        parts: &mut Partitions,
        shards: &Shards,
    ) {
        let mut done = 0;
        while done < COMMANDS_PER_TURN
            && let Ok(cmd) = self.commands.try_recv()
        {
            done += 1;
            if cmd.request == Request::Reload {
                self.reloads.push(cmd);
                continue;
            }
            let mut ctx = Ctx {
                flows,
                parts,
                shards,
                holds: &mut self.holds,
                client: &cmd.client,
            };
            let result = handle(cmd.request, &mut ctx).await;
            if let Err(e) = &result {
                tracing::info!(client = %cmd.client, "operator request refused: {e}");
            }
            // The caller may have given up waiting; nothing to do then.
            let _ = cmd.reply.send(result);
            // A state change shows at once.
            self.last_publish = None;
        }
    }

    /// Whether [`ApiLink::publish_if_due`] would publish now.
    pub(super) fn publish_due(&self, now: Instant) -> bool {
        self.published.wanted()
            || self
                .last_publish
                .is_none_or(|t| now.duration_since(t) >= PUBLISH_INTERVAL)
    }

    /// Publishes a new snapshot when a reader waits for one or the last one is
    /// [`PUBLISH_INTERVAL`] old.
    pub(super) fn publish_if_due(
        &mut self,
        flows: &[FlowRuntime],
        parts: &Partitions,
        stats: &HashMap<usize, ShardStats>,
        opts: &RunOptions,
    ) {
        let now = Instant::now();
        if !self.publish_due(now) {
            return;
        }
        self.last_publish = Some(now);
        // A reader asking from here on waits for the next one; whoever asked before gets this.
        self.published.take_wanted();
        let mut snapshot = status(flows, parts, &self.unheld, stats, opts);
        snapshot.group.clone_from(&self.group);
        let now_ms = now_ms();
        snapshot.heartbeats = self.heartbeats.clone();
        for b in &self.shard_backlogs {
            let pos = match snapshot.shards.iter().position(|s| s.shard == b.shard) {
                Some(p) => p,
                // A shard that never reported (stuck from the start) is shown all the same.
                None => {
                    snapshot.shards.push(crate::api::ShardStatus {
                        shard: b.shard,
                        ..Default::default()
                    });
                    snapshot.shards.len() - 1
                }
            };
            let s = &mut snapshot.shards[pos];
            s.commands_waiting = b.waiting as u64;
            let idle_ms = now.saturating_duration_since(b.since).as_millis();
            s.commands_taken_none_since_ms =
                Some(now_ms.saturating_sub(i64::try_from(idle_ms).unwrap_or(i64::MAX)));
        }
        snapshot.shards.sort_by_key(|s| s.shard);
        if let Some(v) = &self.verifier {
            v.fill(&mut snapshot);
        }
        let mut listed = std::collections::HashSet::new();
        for (fid, f) in snapshot.flows.iter_mut().enumerate() {
            for p in &mut f.partitions {
                let key = PartitionKey::new(fid as _, &p.topic, p.partition);
                let state = match (self.holds.get(&key), p.error.is_some()) {
                    // Nothing of it runs here, whatever an operator asked of it.
                    _ if p.state == NOT_ASSIGNED => ApiState::NotAssigned,
                    (Some(Hold::Stopped), _) => ApiState::Stopped,
                    (_, true) => ApiState::Failed,
                    (Some(Hold::Paused), _) => ApiState::Paused,
                    (None, _) if p.state == "paused" => ApiState::Paused,
                    (None, _) => ApiState::Running,
                };
                let entry = self.since.entry(key.clone()).or_insert((state, now_ms));
                if entry.0 != state {
                    *entry = (state, now_ms);
                }
                p.api_state = state;
                p.since_ms = entry.1;
                listed.insert(key);
            }
        }
        self.since.retain(|k, _| listed.contains(k));
        // A flow a reload removed is no longer shown.
        let mut fid = 0;
        snapshot.flows.retain(|_| {
            fid += 1;
            flows.get(fid - 1).is_none_or(|f| !f.retired)
        });
        self.published.publish(snapshot, now);
    }
}
