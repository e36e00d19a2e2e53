//! `strait run` as a member of a group of instances (`strait.group.id`).
//!
//! Two halves on the control thread, sharing one [`Shared`] cell:
//! - the **agent**, a local task that runs the member's state machine
//!   ([`crate::group::membership`]) against the coordinator with a client of its own (JoinGroup
//!   blocks for a whole rebalance; the control plane's admin calls must not queue behind it).
//!   As leader it computes every member's assignment ([`crate::group::assignment::lead`]).
//! - the [`GroupLink`], called by the control loop every turn: it sends the shards only the
//!   partitions this member owns. A revoked partition is revoked in its shard, its final progress
//!   flushed, and only then released (with a rejoin, so that the leader can give it to another
//!   member in the next generation). A newly assigned one has its stored progress read again
//!   and is started by an immediate discovery, with crash recovery for the target's tail. When
//!   the local session deadline passes (no successful heartbeat), every partition is revoked at
//!   once and no progress is written until the member is assigned again.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use strait_dataplane::io::{ConnSetup, IoBackend};
use strait_dataplane::shard::backoff::{Incidents, Report};
use strait_dataplane::shard::{FlowId, PartitionKey, ShardCommand, ShardStats};
use strait_dataplane::wire::ConnConfig;

use super::assign::Partitions;
use super::outbox::Shards;
use super::{FlowRuntime, RunError, now_ms};
use crate::api::status::{GroupMemberStatus, GroupStatus, RebalanceStatus};
use crate::cluster::group::GroupCall;
use crate::cluster::{Cluster, RetryConfig};
use crate::duties::topics::TopicChange;
use crate::group::codec::{Assignment, MemberMetadata};
use crate::group::membership::{Event, Membership, Request, Response, Timings};
use crate::group::{Unit, assignment};
use crate::model::TopicPartition;

/// How often the agent looks at the control loop's requests while it waits.
const AGENT_POLL: Duration = Duration::from_millis(20);
/// How often the member's owned units and throughput are refreshed for its next join.
const REPORT_INTERVAL: Duration = Duration::from_millis(500);
/// The window over which throughput is measured.
const THROUGHPUT_WINDOW: Duration = Duration::from_secs(10);
/// How long shutdown waits for LeaveGroup (a coordinator that answers does in milliseconds;
/// one that does not lets the session lapse instead).
pub(super) const LEAVE_TIMEOUT: Duration = Duration::from_secs(3);

/// The group settings of a run.
#[derive(Debug, Clone)]
pub struct GroupOptions {
    /// `strait.group.id`.
    pub group_id: String,
    /// `strait.group.cluster`: the cluster whose coordinator runs the group.
    pub cluster: String,
    pub bootstrap: Vec<String>,
    /// The coordination cluster's admin connection settings.
    pub conn: ConnConfig,
    /// `strait.group.instance.id`: static membership when set.
    pub instance_id: Option<String>,
    pub timings: Timings,
    /// The configuration digest and its per-key digests ([`crate::group::digest`]).
    pub digest: u64,
    pub keys: Vec<(String, u64)>,
}

/// A configuration's digest and its per-key digests ([`crate::group::digest::of_properties`]).
pub type ConfigDigest = (u64, Vec<(String, u64)>);

/// What the agent and the control loop share.
#[derive(Debug, Default)]
struct Shared {
    /// The digest announced after a reload (else the one the run started with).
    reloaded: Option<ConfigDigest>,
    // Written by the control loop.
    /// Every unit the leader may assign.
    universe: BTreeSet<Unit>,
    /// Incremented at every change of `universe`.
    universe_seq: u64,
    /// What this member holds (for its next JoinGroup).
    owned: Vec<Unit>,
    throughput: u64,
    rejoin: Option<String>,
    leave: bool,
    // Written by the agent.
    assigned_seq: u64,
    assigned: BTreeSet<Unit>,
    /// `fenced_seq` when the latest assignment came: a fencing it already counts came before
    /// it (a static member rejoins within milliseconds, so both can wait for one turn).
    assigned_after_fence: u64,
    /// Incremented when the coordinator fenced this member.
    fenced_seq: u64,
    live_until: Option<Instant>,
    fatal: Option<String>,
    left: bool,
    status: GroupStatus,
    /// As leader: units the last assignment withheld because their holder must revoke them.
    moving: usize,
    /// As leader: the `universe_seq` of the universe it last assigned.
    led_seq: Option<u64>,
    /// The member is stable in a generation and no rejoin is asked for or under way.
    stable: bool,
}

impl Shared {
    /// Whether this member leads the group's current generation.
    fn is_leader(&self) -> bool {
        !self.status.member_id.is_empty() && self.status.member_id == self.status.leader
    }

    /// The agent's half of [`GroupLink::settled`]: the control loop saw the latest assignment
    /// (`seen_assigned`), no rebalance is asked for or under way, and a leader's last
    /// assignment covered every unit known now (a partition found after it is assigned by the
    /// next one, to this member or another).
    fn settled(&self, seen_assigned: u64) -> bool {
        seen_assigned > 0
            && seen_assigned == self.assigned_seq
            && self.stable
            && self.rejoin.is_none()
            && (!self.is_leader() || self.led_seq == Some(self.universe_seq))
    }
}

type SharedCell = Rc<RefCell<Shared>>;

/// The name of flow `fid` (`A->B`).
fn flow_name(flows: &[FlowRuntime], fid: FlowId) -> String {
    flows.get(fid as usize).map_or_else(String::new, |f| {
        format!("{}->{}", f.plan.source, f.plan.target)
    })
}

fn unit_of(flows: &[FlowRuntime], key: &PartitionKey) -> Unit {
    Unit::partition(&flow_name(flows, key.flow), &key.topic, key.partition)
}

/// The units the member last reported, as the keys it held then: compared at every report
/// (every 500 ms) with what it holds now. Keys compare by their topic's `Arc` first (the
/// partitions' own, so the names are not read); comparing the units' strings was a fifth of
/// an idle member's control-thread CPU at 10 000 partitions.
#[derive(Debug, Default)]
struct ReportedUnits {
    flow_names: Vec<String>,
    keys: Vec<PartitionKey>,
    singleton: bool,
}

impl ReportedUnits {
    /// Whether they are the partitions `keys` (in that order; `flow_names` by flow id), then
    /// the singleton duties if `singleton`.
    fn are<'k>(
        &self,
        flow_names: &[String],
        mut keys: impl Iterator<Item = &'k PartitionKey>,
        singleton: bool,
    ) -> bool {
        let same = |a: &PartitionKey, b: &PartitionKey| {
            a.flow == b.flow
                && a.partition == b.partition
                && (Arc::ptr_eq(&a.topic, &b.topic) || a.topic == b.topic)
        };
        self.singleton == singleton
            && self.flow_names == flow_names
            && self
                .keys
                .iter()
                .all(|a| keys.next().is_some_and(|b| same(a, b)))
            && keys.next().is_none()
    }
}

fn key_of(flows: &[FlowRuntime], unit: &Unit) -> Option<PartitionKey> {
    let Unit::Partition {
        flow,
        topic,
        partition,
    } = unit
    else {
        return None;
    };
    let fid = flows
        .iter()
        .position(|f| format!("{}->{}", f.plan.source, f.plan.target) == *flow)?;
    Some(PartitionKey::new(fid as FlowId, topic, *partition))
}

fn tp_of(key: &PartitionKey) -> TopicPartition {
    TopicPartition::new(&*key.topic, key.partition)
}

/// Why the group does not agree to a configuration reload.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "this instance is one of {members} members of group {group}; a configuration change must \
     reach every member: restart them one by one with the new file"
)]
pub struct ReloadRefused {
    pub group: String,
    pub members: usize,
}

/// The control loop's side of the group.
pub struct GroupLink {
    shared: SharedCell,
    seen_assigned: u64,
    seen_fenced: u64,
    /// What this member may hold: its latest assignment (empty after a lapse or fencing).
    target: BTreeSet<Unit>,
    /// Revoked partitions their shard has not drained yet.
    revoking: BTreeSet<PartitionKey>,
    /// Those of them revoked by a lapse or a fencing: their final progress is never written
    /// (another member may own them by now), even once a new assignment allows writes again.
    lost_drains: BTreeSet<PartitionKey>,
    /// Rejoin once `revoking` is empty (the leader hands the revoked units over then).
    rejoin_when_drained: bool,
    /// Assigned partitions waiting for the discovery that starts them.
    starting: BTreeSet<PartitionKey>,
    /// The local session deadline passed or the coordinator fenced this member: no progress
    /// writes until the next assignment.
    lost: bool,
    last_report: Option<Instant>,
    /// Bytes produced and when, at the start of the throughput window.
    window: (u64, Instant),
    /// The agent's options and client until [`GroupLink::join`] starts it.
    pending: Option<(GroupOptions, Cluster)>,
    /// What `shared.owned` was last made of.
    reported: ReportedUnits,
    /// The lease every shard has ([`ShardCommand::Lease`]), once sent to all.
    lease_sent: Option<Instant>,
}

impl GroupLink {
    /// Prepares the member; [`GroupLink::join`] starts the agent.
    pub(super) fn start(opts: GroupOptions, now: Instant) -> Result<GroupLink, RunError> {
        let mut conn = opts.conn.clone();
        // JoinGroup is answered when the rebalance completes.
        let rebalance_ms = opts.timings.rebalance_timeout.as_millis() as u64;
        conn.request_timeout_ms = conn.request_timeout_ms.max(rebalance_ms + 5_000);
        let setup = ConnSetup::new(conn, IoBackend::Epoll).map_err(|error| RunError::Client {
            cluster: opts.cluster.clone(),
            error,
        })?;
        let cluster = Cluster::new(
            &opts.cluster,
            opts.bootstrap.clone(),
            setup,
            RetryConfig::default(),
        );
        let shared = SharedCell::default();
        {
            let mut s = shared.borrow_mut();
            s.universe.insert(Unit::Singleton);
            s.status = GroupStatus {
                group_id: opts.group_id.clone(),
                cluster: opts.cluster.clone(),
                state: "joining".into(),
                state_since_ms: now_ms(),
                generation: -1,
                ..GroupStatus::default()
            };
        }
        Ok(GroupLink {
            shared,
            seen_assigned: 0,
            seen_fenced: 0,
            target: BTreeSet::new(),
            revoking: BTreeSet::new(),
            lost_drains: BTreeSet::new(),
            rejoin_when_drained: false,
            starting: BTreeSet::new(),
            lost: false,
            last_report: None,
            window: (0, now),
            pending: Some((opts, cluster)),
            reported: ReportedUnits::default(),
            lease_sent: None,
        })
    }

    /// Starts the agent: joins the group (after the first discovery, so that a leader knows
    /// every unit at its first assignment).
    pub(super) fn join(&mut self) {
        if let Some((opts, cluster)) = self.pending.take() {
            tracing::info!(group = %opts.group_id, cluster = %opts.cluster, "joining the group");
            tokio::task::spawn_local(agent(self.shared.clone(), opts, cluster));
        }
    }

    /// Whether the member has the group's latest assignment and started all of it, with no
    /// rebalance to come that this member knows of (`--until-caught-up`; [`Shared::settled`]).
    pub(super) fn settled(&self) -> bool {
        self.starting.is_empty()
            && self.revoking.is_empty()
            && !self.rejoin_when_drained
            && self.shared.borrow().settled(self.seen_assigned)
    }

    /// Before the final progress is written at shutdown: a member that lost its membership
    /// writes none.
    pub(super) fn before_final_writes(
        &self,
        flows: &mut [FlowRuntime],
        parts: &Partitions,
        now: Instant,
    ) {
        if self.may_write(now) {
            return;
        }
        for key in parts.keys() {
            if let Some(f) = flows.get_mut(key.flow as usize) {
                f.progress.discard(&tp_of(key));
            }
        }
    }

    /// Whether this member lost its place in the group (a lapse or a fencing) and holds
    /// nothing until it is assigned again.
    pub(super) fn lost(&self) -> bool {
        self.lost
    }

    /// Whether this member runs the singleton duties.
    pub(super) fn singleton(&self) -> bool {
        self.target.contains(&Unit::Singleton)
    }

    /// Whether this member may write progress now: it is assigned and within its local
    /// session deadline.
    pub(super) fn may_write(&self, now: Instant) -> bool {
        !self.lost && self.shared.borrow().live_until.is_some_and(|t| now < t)
    }

    pub(super) fn status(&self) -> GroupStatus {
        self.shared.borrow().status.clone()
    }

    /// The group hook of config reload: whether a changed configuration may be applied. A
    /// member alone in its group may; with others, a change must be the same on every member
    /// (they would otherwise replicate two configurations side by side), so the reload path
    /// must refuse it with this error and let the operator roll the change out as a rolling
    /// restart (each restarted member rejoins with its new digest; members whose digest
    /// differs from the leader's are refused).
    pub fn agree_to_reload(&self) -> Result<(), ReloadRefused> {
        let s = self.shared.borrow();
        match s.status.members.len() {
            0 | 1 => Ok(()),
            members => Err(ReloadRefused {
                group: s.status.group_id.clone(),
                members,
            }),
        }
    }

    /// After a reload applied alone: rejoin announcing the new configuration, so that members
    /// started later with the old file are refused, and those with the new one admitted.
    pub fn reloaded(&mut self, digest: ConfigDigest) {
        let mut s = self.shared.borrow_mut();
        s.reloaded = Some(digest);
        s.rejoin = Some("configuration reloaded".to_string());
    }

    /// Keeps only the starts of partitions this member owns; the others stay known to topic
    /// discovery (so their changes are still seen) but are not started.
    pub(super) fn filter(
        &mut self,
        changes: Vec<TopicChange>,
        flows: &[FlowRuntime],
    ) -> Vec<TopicChange> {
        changes
            .into_iter()
            .filter(|c| match c {
                TopicChange::Start(np) => {
                    self.starting.remove(&np.key);
                    self.target.contains(&unit_of(flows, &np.key))
                }
                _ => true,
            })
            .collect()
    }

    /// Every unit the flows know, for the leader. A change on the leader starts a rebalance.
    pub(super) fn note_units(&mut self, flows: &[FlowRuntime], parts: &Partitions) {
        let mut units = BTreeSet::from([Unit::Singleton]);
        // A flow removed by a reload offers no more work.
        for (fid, f) in flows.iter().enumerate().filter(|(_, f)| !f.retired) {
            let name = flow_name(flows, fid as FlowId);
            for (topic, k) in f.topics.known() {
                units.extend(
                    k.partitions
                        .iter()
                        .map(|p| Unit::partition(&name, topic, *p)),
                );
            }
        }
        units.extend(parts.keys().map(|k| unit_of(flows, k)));
        units.extend(self.starting.iter().map(|k| unit_of(flows, k)));
        let mut s = self.shared.borrow_mut();
        if s.universe != units {
            let leader = s.is_leader();
            s.universe = units;
            s.universe_seq += 1;
            if leader && s.assigned_seq > 0 {
                s.rejoin = Some("the set of partitions changed".into());
            }
        }
    }

    /// One turn: acts on a lapse, a fencing or a new assignment, releases drained partitions,
    /// refreshes what the member reports. Returns the flows whose discovery must run now (to
    /// start newly assigned partitions).
    pub(super) async fn tick(
        &mut self,
        flows: &mut [FlowRuntime],
        parts: &mut Partitions,
        shards: &Shards,
        stats: &HashMap<usize, ShardStats>,
        now: Instant,
    ) -> Result<BTreeSet<FlowId>, RunError> {
        let (fatal, live_until, fenced, assigned) = {
            let s = self.shared.borrow();
            let assigned = (s.assigned_seq != self.seen_assigned)
                .then(|| (s.assigned_seq, s.assigned.clone(), s.assigned_after_fence));
            (s.fatal.clone(), s.live_until, s.fenced_seq, assigned)
        };
        if let Some(why) = fatal {
            return Err(RunError::Group { why });
        }
        self.send_lease(live_until, shards, now)?;
        // A fencing and the assignment of the generation joined after it, seen in one turn:
        // the fencing applies to what was held before, so it goes first (the other way round
        // it stopped the new assignment too, and nothing restarted it).
        if fenced != self.seen_fenced
            && assigned
                .as_ref()
                .is_some_and(|(_, _, after)| *after == fenced)
        {
            self.drop_everything(false, flows, parts, shards).await?;
            self.seen_fenced = fenced;
        }
        let mut restart = BTreeSet::new();
        if let Some((seq, units, _)) = assigned {
            self.seen_assigned = seq;
            self.lost = false;
            restart = self.set_target(units, flows, parts, shards).await?;
        }
        let lapsed = !self.target.is_empty() && live_until.is_none_or(|t| now >= t);
        if lapsed || fenced != self.seen_fenced {
            self.seen_fenced = fenced;
            self.drop_everything(lapsed, flows, parts, shards).await?;
        }
        restart.extend(self.release_drained(flows, parts, now).await);
        if self.revoking.is_empty() && self.rejoin_when_drained {
            self.rejoin_when_drained = false;
            // What the next JoinGroup reports must already be without the released units.
            self.report_owned(flows, parts);
            self.shared.borrow_mut().rejoin = Some("revoked units released".into());
        }
        if self
            .last_report
            .is_none_or(|t| now.duration_since(t) >= REPORT_INTERVAL)
        {
            self.last_report = Some(now);
            self.report(flows, parts, stats, now);
        }
        Ok(restart)
    }

    /// Gives the shards the local session deadline as their lease: a shard sends no Produce
    /// past it, by itself, even when the control loop is late to revoke (a process frozen by
    /// SIGSTOP wakes up with every thread at once; the shards would otherwise copy what they
    /// fetched before the control loop notices the lapse). Not a member (`None`): the lease
    /// ends now. It reaches each shard in order with the commands before it (a full channel
    /// is flushed at the next turn; a newer lease replaces one still waiting).
    fn send_lease(
        &mut self,
        live_until: Option<Instant>,
        shards: &Shards,
        now: Instant,
    ) -> Result<(), RunError> {
        let lease = match (live_until, self.lease_sent) {
            (Some(t), _) => t,
            (None, Some(sent)) if sent <= now => return Ok(()), // ended already
            (None, _) => now,
        };
        if self.lease_sent == Some(lease) {
            return Ok(());
        }
        for shard in 0..shards.len() {
            shards.send(
                shard,
                ShardCommand::Lease {
                    produce_until: lease,
                },
            )?;
        }
        self.lease_sent = Some(lease);
        Ok(())
    }

    /// After a lapse (`lapsed`) or a fencing: stops every partition at once, writes no progress
    /// until the next assignment and none ever for what is draining now.
    async fn drop_everything(
        &mut self,
        lapsed: bool,
        flows: &mut [FlowRuntime],
        parts: &mut Partitions,
        shards: &Shards,
    ) -> Result<(), RunError> {
        if !self.target.is_empty() || !self.revoking.is_empty() {
            tracing::warn!(
                "{}: stopping every partition of this member at once (the group hands them to the others)",
                if lapsed {
                    "no successful heartbeat within the local session deadline"
                } else {
                    "the coordinator fenced this member"
                }
            );
        }
        self.lost = true;
        self.set_target(BTreeSet::new(), flows, parts, shards)
            .await?;
        self.lost_drains.extend(self.revoking.iter().cloned());
        self.rejoin_when_drained = false;
        self.shared
            .borrow_mut()
            .status
            .set_state("lapsed", now_ms());
        if lapsed {
            self.shared.borrow_mut().rejoin = Some("the session lapsed".into());
        }
        Ok(())
    }

    /// Makes `units` this member's target: revokes what it holds beyond them, prepares the start
    /// of what it gains (stored progress read again, discovery told to start it with recovery).
    async fn set_target(
        &mut self,
        units: BTreeSet<Unit>,
        flows: &mut [FlowRuntime],
        parts: &mut Partitions,
        shards: &Shards,
    ) -> Result<BTreeSet<FlowId>, RunError> {
        let singleton = units.contains(&Unit::Singleton);
        if self.singleton() && !singleton {
            // Released at once (no shard holds it): the next generation gives it to another.
            self.rejoin_when_drained = true;
        }
        for f in flows.iter_mut() {
            f.topics.set_manages_target(singleton);
        }
        let mut gone = Vec::new();
        for (key, st) in parts.iter_mut() {
            if units.contains(&unit_of(flows, key)) || self.revoking.contains(key) {
                continue;
            }
            if st.assigned {
                shards.send(st.shard, ShardCommand::Revoke(key.clone()))?;
                st.assigned = false;
                st.released = false;
                self.revoking.insert(key.clone());
                self.rejoin_when_drained = true;
            } else {
                // Stopped with an error: no shard holds it.
                gone.push(key.clone());
            }
        }
        for key in gone {
            parts.remove(&key);
        }
        let mut gained: BTreeMap<FlowId, BTreeSet<TopicPartition>> = BTreeMap::new();
        for u in &units {
            let Some(key) = key_of(flows, u) else {
                continue;
            };
            if parts.contains_key(&key) || self.starting.contains(&key) {
                continue;
            }
            gained.entry(key.flow).or_default().insert(tp_of(&key));
            self.starting.insert(key);
        }
        self.target = units;
        self.publish_assignment();
        self.publish_owned_partitions(flows);
        Ok(self.prepare_starts(flows, gained).await)
    }

    /// Reads the stored progress of `gained` again and makes discovery start them.
    async fn prepare_starts(
        &mut self,
        flows: &mut [FlowRuntime],
        gained: BTreeMap<FlowId, BTreeSet<TopicPartition>>,
    ) -> BTreeSet<FlowId> {
        for (fid, tps) in &gained {
            let Some(f) = flows.get_mut(*fid as usize) else {
                continue;
            };
            // The previous owner's stored progress and exact mapping: translation stays exact.
            match f.progress.reload(&f.target, tps).await {
                Ok(mappings) => f.offsets.restore_partitions(mappings),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read the stored progress of newly assigned partitions; starting them from what was read at start (records may be copied again)");
                }
            }
            for tp in tps {
                f.topics.restart_partition(&tp.topic, tp.partition);
            }
            tracing::info!(flow = %format!("{}->{}", f.plan.source, f.plan.target), partitions = tps.len(), "partitions assigned to this member");
        }
        gained.into_keys().collect()
    }

    /// Partitions whose shard drained them after a Revoke: their final progress is flushed
    /// (unless the member lost its membership), then they are released, or started again if
    /// they were assigned back meanwhile.
    async fn release_drained(
        &mut self,
        flows: &mut [FlowRuntime],
        parts: &mut Partitions,
        now: Instant,
    ) -> BTreeSet<FlowId> {
        let drained: Vec<PartitionKey> = self
            .revoking
            .iter()
            .filter(|k| parts.get(*k).is_none_or(|st| st.released))
            .cloned()
            .collect();
        if drained.is_empty() {
            return BTreeSet::new();
        }
        let write = self.may_write(now);
        let flows_touched: BTreeSet<FlowId> = drained.iter().map(|k| k.flow).collect();
        for key in &drained {
            let lost = self.lost_drains.remove(key);
            if (!write || lost)
                && let Some(f) = flows.get_mut(key.flow as usize)
            {
                f.progress.discard(&tp_of(key));
            }
        }
        if write {
            for fid in &flows_touched {
                let Some(f) = flows.get_mut(*fid as usize) else {
                    continue;
                };
                if let Err(e) = f.flush_progress().await {
                    tracing::warn!(error = %e, "cannot write the final progress of revoked partitions; their next owner may copy some records again");
                }
            }
        }
        let mut gained: BTreeMap<FlowId, BTreeSet<TopicPartition>> = BTreeMap::new();
        for key in drained {
            self.revoking.remove(&key);
            parts.remove(&key);
            if self.target.contains(&unit_of(flows, &key)) {
                gained.entry(key.flow).or_default().insert(tp_of(&key));
                self.starting.insert(key);
            }
        }
        tracing::info!(
            remaining = self.revoking.len(),
            "revoked partitions drained and released"
        );
        self.prepare_starts(flows, gained).await
    }

    /// What the member reports at its next join: the units it holds and its throughput.
    fn report(
        &mut self,
        flows: &mut [FlowRuntime],
        parts: &Partitions,
        stats: &HashMap<usize, ShardStats>,
        now: Instant,
    ) {
        self.report_owned(flows, parts);
        let bytes: u64 = stats.values().map(|s| s.produced_bytes).sum();
        let elapsed = now.duration_since(self.window.1);
        let mut s = self.shared.borrow_mut();
        if elapsed >= THROUGHPUT_WINDOW {
            let secs = elapsed.as_secs_f64().max(0.001);
            s.throughput = (bytes.saturating_sub(self.window.0) as f64 / secs) as u64;
            self.window = (bytes, now);
            // The group table shows this member's own figure live; the others' are what they
            // reported at their last join (the protocol carries nothing between joins).
            let (me, throughput, at_ms) = (s.status.member_id.clone(), s.throughput, now_ms());
            for m in s.status.members.iter_mut().filter(|m| m.member_id == me) {
                m.throughput_bytes_per_sec = throughput;
                m.throughput_at_ms = at_ms;
            }
        }
    }

    /// Tells each flow's offsets duty which partitions are this member's (its assignment):
    /// checkpoints and group-offset sync cover those, where it has the exact mapping.
    fn publish_owned_partitions(&self, flows: &mut [FlowRuntime]) {
        let mut owned: Vec<(BTreeSet<TopicPartition>, BTreeSet<TopicPartition>)> =
            vec![Default::default(); flows.len()];
        for key in self.target.iter().filter_map(|u| key_of(flows, u)) {
            let Some(f) = flows.get(key.flow as usize) else {
                continue;
            };
            let (source, remote) = &mut owned[key.flow as usize];
            source.insert(tp_of(&key));
            remote.insert(TopicPartition::new(
                (f.plan.remote_name)(&key.topic),
                key.partition,
            ));
        }
        for (f, o) in flows.iter_mut().zip(owned) {
            f.offsets.set_owned_partitions(Some(o));
        }
    }

    /// The units this member holds, for its next JoinGroup: its partitions (the ones still
    /// draining too, while it is a member, so that nobody else gets them before they are
    /// drained) and the singleton duties.
    /// Rebuilt only when it changed: at 10 000 partitions, making the units' strings at every
    /// report was most of an idle member's control-thread CPU; comparing allocates nothing.
    fn report_owned(&mut self, flows: &[FlowRuntime], parts: &Partitions) {
        let held = || {
            parts
                .iter()
                .filter(|(k, st)| st.assigned || (!self.lost && self.revoking.contains(*k)))
                .map(|(k, _)| k)
                .chain(&self.starting)
        };
        let singleton = self.singleton();
        let names: Vec<String> = (0..flows.len())
            .map(|f| flow_name(flows, f as FlowId))
            .collect();
        if self.reported.are(&names, held(), singleton) {
            return;
        }
        let keys: Vec<PartitionKey> = held().cloned().collect();
        let mut owned: Vec<Unit> = keys.iter().map(|k| unit_of(flows, k)).collect();
        if singleton {
            owned.push(Unit::Singleton);
        }
        self.shared.borrow_mut().owned = owned;
        self.reported = ReportedUnits {
            flow_names: names,
            keys,
            singleton,
        };
    }

    fn publish_assignment(&self) {
        let mut s = self.shared.borrow_mut();
        s.status.assignment = self.target.iter().map(ToString::to_string).collect();
        s.status.singleton = self.target.contains(&Unit::Singleton);
    }

    /// Leaves the group (after the final progress is written), waiting at most
    /// [`LEAVE_TIMEOUT`].
    pub(super) async fn leave(&self) {
        self.shared.borrow_mut().leave = true;
        let deadline = Instant::now() + LEAVE_TIMEOUT;
        while !self.shared.borrow().left && Instant::now() < deadline {
            tokio::time::sleep(AGENT_POLL).await;
        }
    }
}

fn call<'a>(opts: &'a GroupOptions, member_id: &'a str, generation: i32) -> GroupCall<'a> {
    GroupCall {
        group: &opts.group_id,
        member_id,
        generation,
        instance_id: opts.instance_id.as_deref(),
    }
}

/// The agent: the member's state machine against the coordinator.
async fn agent(shared: SharedCell, opts: GroupOptions, cluster: Cluster) {
    let mut m = Membership::new(opts.timings, Instant::now());
    let mut joining: Option<(Instant, String)> = None;
    let mut leaving = false;
    // As leader with units moving: a rebalance to hand them over, in case their holder's
    // rejoin never comes (it held them no longer).
    let mut follow_up: Option<(Instant, i32)> = None;
    let mut incidents = Incidents::new(INCIDENT_SUMMARY);
    loop {
        let now = Instant::now();
        if let Some((at, generation)) = follow_up
            && now >= at
        {
            follow_up = None;
            if m.generation() == Some(generation) {
                m.rejoin("units withheld for a hand-over", now);
            }
        }
        {
            let mut s = shared.borrow_mut();
            if s.leave && !leaving {
                leaving = true;
                m.leave();
            }
            if let Some(why) = s.rejoin.take() {
                m.rejoin(&why, now);
            }
        }
        let (events, req) = m.poll(now);
        on_events(&shared, events, &mut joining);
        note_membership(&shared, &m);
        if m.is_done() {
            shared.borrow_mut().left = true;
            return;
        }
        let Some(req) = req else {
            let wait = m
                .next_wakeup()
                .map_or(AGENT_POLL, |t| t.saturating_duration_since(now))
                .min(AGENT_POLL);
            tokio::time::sleep(wait).await;
            continue;
        };
        if let Request::Join { reason, .. } = &req
            && joining.is_none()
        {
            joining = Some((now, reason.clone()));
            shared.borrow_mut().status.set_state("joining", now_ms());
        }
        let resp = execute(&cluster, &opts, &shared, &req, &mut incidents).await;
        let events = m.on_response(resp, Instant::now());
        if let (Request::Sync { generation, .. }, Some(g)) = (&req, m.generation()) {
            let moving = std::mem::take(&mut shared.borrow_mut().moving);
            if moving > 0 && *generation == g {
                follow_up = Some((Instant::now() + opts.timings.rebalance_timeout / 2, g));
            }
        }
        on_events(&shared, events, &mut joining);
        note_membership(&shared, &m);
    }
}

/// What the control loop reads of the member's state machine.
fn note_membership(shared: &SharedCell, m: &Membership) {
    let mut s = shared.borrow_mut();
    s.live_until = m.live_until();
    s.stable = m.is_stable();
}

/// Sends one request and reduces the answer for the state machine.
async fn execute(
    cluster: &Cluster,
    opts: &GroupOptions,
    shared: &SharedCell,
    req: &Request,
    incidents: &mut Incidents<&'static str>,
) -> Response {
    let result = match req {
        Request::Join { member_id, reason } => {
            let md = {
                let s = shared.borrow();
                let (digest, keys) = s
                    .reloaded
                    .clone()
                    .unwrap_or_else(|| (opts.digest, opts.keys.clone()));
                MemberMetadata {
                    digest,
                    keys,
                    throughput: s.throughput,
                    owned: s.owned.clone(),
                }
            };
            cluster
                .join_group(
                    &call(opts, member_id, -1),
                    &opts.timings,
                    md.encode(),
                    reason,
                )
                .await
        }
        Request::Sync {
            generation,
            member_id,
            members,
        } => {
            let assignments = match members {
                Some(members) => {
                    let (universe, seq) = {
                        let s = shared.borrow();
                        (s.universe.clone(), s.universe_seq)
                    };
                    let (out, moving) = assignment::lead(member_id, members, &universe);
                    {
                        let mut s = shared.borrow_mut();
                        s.moving = moving;
                        s.led_seq = Some(seq);
                    }
                    tracing::info!(
                        group = %opts.group_id,
                        generation,
                        members = out.len(),
                        units = universe.len(),
                        moving,
                        "assigned the group's units (as leader)"
                    );
                    out.into_iter().map(|(id, a)| (id, a.encode())).collect()
                }
                None => Vec::new(),
            };
            cluster
                .sync_group(&call(opts, member_id, *generation), assignments)
                .await
        }
        Request::Heartbeat {
            generation,
            member_id,
        } => cluster.heartbeat(&call(opts, member_id, *generation)).await,
        Request::Leave { member_id } => {
            cluster
                .leave_group(&call(opts, member_id, -1), "shutting down")
                .await
        }
    };
    logged(result, opts, incidents)
}

/// The answer for the state machine; failures logged once per incident.
fn logged(
    result: Result<Response, crate::cluster::ClusterError>,
    opts: &GroupOptions,
    incidents: &mut Incidents<&'static str>,
) -> Response {
    let now = Instant::now();
    match result {
        Ok(r) => {
            if let Some((failures, for_ms)) = incidents.recovered(&COORDINATOR, now) {
                tracing::info!(group = %opts.group_id, failures, for_ms, "the group coordinator answers again");
            }
            r
        }
        Err(e) => {
            // One line when the coordinator stops answering, a summary now and then, one when
            // it answers again: not one per retry.
            match incidents.failed(&COORDINATOR, &e, now) {
                Report::Started => {
                    tracing::warn!("group {}: {e}; retrying", opts.group_id);
                }
                Report::StillFailing { attempts, for_ms } => {
                    tracing::warn!(group = %opts.group_id, attempts, for_ms, last_error = %e, "group requests still failing; retrying");
                }
                Report::Quiet => tracing::debug!("group {}: {e}; retrying", opts.group_id),
            }
            Response::Failed { why: e.to_string() }
        }
    }
}

/// The one incident key of the agent: its requests to the group coordinator.
const COORDINATOR: &str = "coordinator";
/// How often an ongoing coordinator incident is summarised.
const INCIDENT_SUMMARY: Duration = Duration::from_secs(30);

/// Applies the state machine's events to the shared state.
fn on_events(shared: &SharedCell, events: Vec<Event>, joining: &mut Option<(Instant, String)>) {
    for ev in events {
        let mut s = shared.borrow_mut();
        match ev {
            Event::Assigned {
                generation,
                leader,
                member_id,
                assignment,
            } => {
                let a = Assignment::decode(&assignment).unwrap_or_else(|e| Assignment {
                    error: Some(format!("cannot read the leader's assignment: {e}")),
                    ..Assignment::default()
                });
                let (started, cause) = joining
                    .take()
                    .unwrap_or_else(|| (Instant::now(), "rebalance".into()));
                let joined_ms = now_ms();
                let st = &mut s.status;
                st.generation = generation;
                st.leader = leader;
                st.member_id = member_id;
                st.members = a
                    .members
                    .iter()
                    .map(|m| GroupMemberStatus {
                        member_id: m.member_id.clone(),
                        units: m.units,
                        throughput_bytes_per_sec: m.throughput,
                        throughput_at_ms: joined_ms,
                    })
                    .collect();
                st.rebalances += 1;
                st.last_rebalance = Some(RebalanceStatus {
                    cause,
                    duration_ms: started.elapsed().as_millis() as u64,
                    at_ms: now_ms(),
                });
                tracing::info!(
                    generation,
                    member = %st.member_id,
                    leader = %st.leader,
                    members = st.members.len(),
                    units = a.units.len(),
                    "joined the group"
                );
                if let Some(why) = a.error {
                    st.set_state("refused", now_ms());
                    s.fatal = Some(why);
                } else {
                    st.set_state("stable", now_ms());
                    s.assigned = a.units.into_iter().collect();
                    s.assigned_seq += 1;
                    s.assigned_after_fence = s.fenced_seq;
                }
            }
            Event::Fenced { why } => {
                tracing::warn!("the group coordinator fenced this member ({why}); rejoining");
                s.fenced_seq += 1;
            }
            Event::Lapsed => {
                tracing::warn!("the local session deadline passed; rejoining");
            }
            Event::Fatal { why } => {
                s.status.set_state("refused", now_ms());
                s.fatal = Some(format!("the group coordinator refused this member: {why}"));
            }
            Event::Left => s.left = true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reported_units_are_compared_with_the_held_partitions_in_order_singleton_last() {
        let names = vec!["A->B".to_string(), "A->C".to_string()];
        let keys = [PartitionKey::new(0, "t", 0), PartitionKey::new(1, "t", 1)];
        let reported = |keys: &[PartitionKey], singleton| ReportedUnits {
            flow_names: names.clone(),
            keys: keys.to_vec(),
            singleton,
        };
        let units = reported(&keys, false);
        assert!(units.are(&names, keys.iter(), false));
        // Equal keys with topics of their own (not the same `Arc`) are the same.
        let copies = [PartitionKey::new(0, "t", 0), PartitionKey::new(1, "t", 1)];
        assert!(units.are(&names, copies.iter(), false));
        // The singleton duties: held now, not before; held before, not now.
        assert!(!units.are(&names, keys.iter(), true));
        let with_singleton = reported(&keys, true);
        assert!(with_singleton.are(&names, keys.iter(), true));
        assert!(!with_singleton.are(&names, keys.iter(), false));
        // One more, one fewer, another partition, another flow, another flow name.
        assert!(!reported(&keys[..1], false).are(&names, keys.iter(), false));
        assert!(!units.are(&names, keys[..1].iter(), false));
        let other = [PartitionKey::new(0, "t", 0), PartitionKey::new(1, "t", 2)];
        assert!(!units.are(&names, other.iter(), false));
        let flow = [PartitionKey::new(0, "t", 0), PartitionKey::new(0, "t", 1)];
        assert!(!units.are(&names, flow.iter(), false));
        let renamed = vec!["A->B".to_string(), "A->D".to_string()];
        assert!(!units.are(&renamed, keys.iter(), false));
        assert!(reported(&[], false).are(&names, [].iter(), false));
    }

    /// A member stable in its generation, its latest assignment seen (`seen_assigned` 1), that
    /// assigned as `leader` the universe it knows.
    fn settled_member(leader: bool) -> Shared {
        let mut s = Shared {
            assigned_seq: 1,
            universe_seq: 3,
            led_seq: leader.then_some(3),
            stable: true,
            ..Shared::default()
        };
        s.status.member_id = "m1".into();
        s.status.leader = if leader { "m1" } else { "m2" }.into();
        s
    }

    #[test]
    fn settled_needs_the_latest_assignment_no_rebalance_and_a_leader_that_assigned_every_unit() {
        for leader in [false, true] {
            let s = settled_member(leader);
            assert!(s.settled(1), "leader {leader}");
            assert!(!s.settled(0), "never assigned");
            // An assignment the control loop did not act on yet.
            let newer = Shared {
                assigned_seq: 2,
                ..settled_member(leader)
            };
            assert!(!newer.settled(1));
            let mut rejoin = settled_member(leader);
            rejoin.rejoin = Some("revoked units released".into());
            assert!(!rejoin.settled(1));
            let rebalancing = Shared {
                stable: false,
                ..settled_member(leader)
            };
            assert!(!rebalancing.settled(1));
        }
        // A unit found after the leader's last assignment (the leader's rejoin taken by the
        // agent already, or not asked for): the next assignment must cover it first.
        let grown = Shared {
            universe_seq: 4,
            ..settled_member(true)
        };
        assert!(!grown.settled(1));
        let never_led = Shared {
            led_seq: None,
            ..settled_member(true)
        };
        assert!(!never_led.settled(1));
        // A member that does not lead does not know the leader's universe.
        let follower = Shared {
            universe_seq: 4,
            ..settled_member(false)
        };
        assert!(follower.settled(1));
    }
}
