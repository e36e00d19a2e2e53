//! What `strait run` does with the stored failover state (`store::failover`): at start a
//! flow's failed-over topics are left out of its topic filter, so they are never assigned;
//! while it runs, every [`WATCH_INTERVAL`] the state is read again and the partitions of
//! newly failed-over topics that this member holds are stopped like an operator's stop
//! (progress flushed, listed `STOPPED`). Every member of a group reads it, so whichever holds a
//! partition stops it.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use strait_dataplane::shard::{FlowId, ShardCommand};

use super::FlowRuntime;
use super::assign::Partitions;
use super::commands::{Hold, Holds};
use super::outbox::Shards;
use crate::duties::offsets::cluster_for;
use crate::plan::FlowPlan;
use crate::store::failover;

/// How often a running strait reads the failover state.
pub const WATCH_INTERVAL: Duration = Duration::from_secs(2);
/// After a read that failed or timed out (the target does not answer), the next waits this
/// long: the control loop must not spend its turns on a cluster that is away.
const AFTER_FAILURE: Duration = Duration::from_secs(15);
/// The read at start gives up after this long (the target does not answer: nothing is copied
/// then anyway).
const START_READ_TIMEOUT: Duration = Duration::from_secs(5);
/// A read gives up after this long.
const READ_TIMEOUT: Duration = Duration::from_secs(1);

/// Leaves the topics a stored failover stopped out of `plan`'s filter. A state that cannot be
/// read is logged and the plan kept (the watch stops them once it reads it).
pub(super) async fn exclude_failed_over(plan: FlowPlan) -> FlowPlan {
    let name = format!("{}->{}", plan.source, plan.target);
    let client = &plan.config.clients.target_admin.client;
    let cluster = match cluster_for(&name, "target admin", client) {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(flow = %name, error = %e, "cannot read the failover state");
            return plan;
        }
    };
    let read = tokio::time::timeout(START_READ_TIMEOUT, failover::read_all(&cluster)).await;
    let topics = match read {
        Ok(Ok(mut all)) => match all.remove(&name) {
            Some(rec) => rec.topics,
            None => return plan,
        },
        Err(_) => {
            tracing::warn!(flow = %name, "reading {} timed out; failed-over topics are stopped once it answers", failover::TOPIC);
            return plan;
        }
        Ok(Err(e)) => {
            tracing::warn!(flow = %name, error = %e, "cannot read {}; failed-over topics are stopped once it answers", failover::TOPIC);
            return plan;
        }
    };
    tracing::warn!(flow = %name, topics = ?topics, "these topics were failed over (strait failover): not replicated");
    leave_out(plan, topics)
}

/// `plan` without `topics`: its filter refuses them.
fn leave_out(mut plan: FlowPlan, topics: BTreeSet<String>) -> FlowPlan {
    let inner = std::mem::replace(&mut plan.should_replicate, Box::new(|_| false));
    plan.should_replicate = Box::new(move |t| !topics.contains(t) && inner(t));
    plan
}

/// Under `IdentityReplicationPolicy`, a flow whose opposite flow failed topics over from this
/// flow's target is the reverse flow of a failback: on such a topic (the copy, under the same
/// name) it would copy from the start the records that came from this flow's target, back to
/// it. Until `strait failback` has stored where it starts, those topics are left out, with an
/// error naming the command. A state that cannot be read is logged and the plan kept.
pub(super) async fn exclude_unprepared_reverse(plan: FlowPlan) -> FlowPlan {
    if !plan.config.replication_policy.is_identity() {
        return plan;
    }
    let name = format!("{}->{}", plan.source, plan.target);
    let opposite = format!("{}->{}", plan.target, plan.source);
    let clients = &plan.config.clients;
    let (source, target) = match (
        cluster_for(&name, "source admin", &clients.source_admin.client),
        cluster_for(&name, "target consumer", &clients.target_consumer.client),
    ) {
        (Ok(s), Ok(t)) => (s, t),
        (Err(e), _) | (_, Err(e)) => {
            tracing::warn!(flow = %name, error = %e, "cannot read the opposite flow's failover state");
            return plan;
        }
    };
    let read = tokio::time::timeout(START_READ_TIMEOUT, failover::read_all(&source)).await;
    let Ok(Ok(mut all)) = read else {
        tracing::warn!(flow = %name, "cannot read {} on the source; if {opposite} was failed over, run strait failback before this flow", failover::TOPIC);
        return plan;
    };
    let Some(record) = all.remove(&opposite) else {
        return plan;
    };
    let stored = crate::store::progress::read_stored(&target, &plan.source).await;
    let unprepared: BTreeSet<String> = record
        .topics
        .into_iter()
        .filter(|t| !stored.keys().any(|tp| &tp.topic == t))
        .collect();
    if unprepared.is_empty() {
        return plan;
    }
    tracing::error!(flow = %name, topics = ?unprepared, "{opposite} was failed over; under IdentityReplicationPolicy this flow would copy these topics' records that came from {} back to it: not replicated until `strait failback --flow {opposite}` sets where it starts", plan.target);
    leave_out(plan, unprepared)
}

/// The watch of the failover state while the run goes on.
#[derive(Debug, Default)]
pub(super) struct FailoverWatch {
    last_read: Option<Instant>,
    /// How long after `last_read` the next read is due.
    next_after: Duration,
    /// Each flow's failed-over topics at the last read.
    stopped: BTreeMap<FlowId, BTreeSet<String>>,
}

impl FailoverWatch {
    /// Reads the state when [`WATCH_INTERVAL`] has passed and stops the held partitions of
    /// failed-over topics.
    pub(super) async fn apply_if_due(
        &mut self,
        flows: &mut [FlowRuntime],
        parts: &mut Partitions,
        shards: &Shards,
        holds: &mut Holds,
        now: Instant,
    ) {
        if self
            .last_read
            .is_some_and(|t| now.duration_since(t) < self.next_after)
        {
            return;
        }
        self.last_read = Some(now);
        self.next_after = WATCH_INTERVAL;
        for (fid, f) in flows.iter_mut().enumerate().filter(|(_, f)| !f.retired) {
            let fid = fid as FlowId;
            let topics = match tokio::time::timeout(READ_TIMEOUT, failover::read_all(&f.target))
                .await
            {
                Ok(Ok(mut all)) => all.remove(&f.name()).map(|r| r.topics).unwrap_or_default(),
                Ok(Err(e)) => {
                    tracing::debug!(flow = %f.name(), error = %e, "cannot read the failover state; tries again in 15 s");
                    self.next_after = AFTER_FAILURE;
                    continue;
                }
                Err(_) => {
                    tracing::debug!(flow = %f.name(), "reading the failover state timed out; tries again in 15 s");
                    self.next_after = AFTER_FAILURE;
                    continue;
                }
            };
            if topics.is_empty() {
                continue;
            }
            let mut stopped = 0;
            for (key, st) in parts.iter_mut() {
                if key.flow != fid
                    || !topics.contains(&*key.topic)
                    || !st.assigned
                    || holds.get(key) == Some(&Hold::Stopped)
                {
                    continue;
                }
                if let Err(e) = shards.send(st.shard, ShardCommand::Pause(key.clone())) {
                    tracing::warn!(flow = %f.name(), partition = %format!("{}-{}", key.topic, key.partition), error = %e, "cannot stop a failed-over partition yet; next read tries again");
                    continue;
                }
                holds.insert(key.clone(), Hold::Stopped);
                st.paused = true;
                stopped += 1;
            }
            if stopped > 0 || self.stopped.get(&fid) != Some(&topics) {
                tracing::warn!(flow = %f.name(), topics = ?topics, partitions = stopped, "failed over (strait failover): these topics are no longer replicated");
                if let Err(e) = f.flush_progress().await {
                    tracing::warn!(error = %e, "cannot write progress after a failover stop; will retry");
                }
            }
            self.stopped.insert(fid, topics);
        }
    }
}
