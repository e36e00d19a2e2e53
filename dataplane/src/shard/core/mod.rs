//! The shard's decisions, sans IO: which connections to open, which leaders to look up, which
//! fetch and produce requests to send, when to retry, when to give up, what to tell control.
//!
//! [`ShardCore`] owns the partition state machines ([`super::partition`]) and everything the
//! shard knows about clusters, brokers and requests in flight. It owns no socket and reads no
//! clock: a driver ([`super::driver`] on tokio-uring or epoll, or the simulation in the tests)
//! feeds it
//! - commands from control ([`ShardCore::handle_command`]),
//! - completions: connections ([`ShardCore::handle_connected`]), leader lookups
//!   ([`ShardCore::handle_leaders`]), producer ids ([`ShardCore::handle_producer_id`]), fetch
//!   and produce responses ([`ShardCore::handle_fetch_response`],
//!   [`ShardCore::handle_produce_response`]), each with the time it arrived,
//! - and the passing of time ([`ShardCore::handle_timers`]), at least every `tick_ms`;
//!
//! and takes out the work to do ([`ShardCore::poll_action`]: requests to send, connections to
//! open or drop) and the events for control ([`ShardCore::poll_event`]). The driver must
//! perform actions in the order they come and enqueue each request on its connection before
//! taking the next action: wire order is then build order, which keeps every partition's
//! sequence numbers in order. A request the driver cannot enqueue is answered at once with an
//! error.
//!
//! Duties, one module each: [`routing`] (clusters, broker ids, leader lookups),
//! [`connections`] (connection states, backoff, deadlines), [`fetch`] and [`produce`].
#![deny(clippy::disallowed_methods)]

pub mod connections;
pub mod fetch;
pub mod produce;
pub mod routing;

use std::cell::Cell;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::messages::FetchRequest;

use super::backoff::{Incidents, Jitter};
use super::channel::ShardConfig;
use super::channel::{Assignment, FailureKind, PartitionKey, ShardCommand, ShardEvent, ShardStats};
use super::partition::{Failure, Partition, SequenceState, Status};
use connections::Conn;
pub use connections::ConnInfo;
pub use fetch::FetchedFrame;
pub use produce::{ProduceRequestPlan, ProducerIdError};
use routing::Routing;
pub use routing::{BrokerId, ClusterId, Leader, Leaders};

/// How often the passing of time alone makes the core walk its partitions: plan again (a
/// backoff or deferral may have ended), delivery timeouts, failures waiting for room in the
/// event queue, finished revocations and seals. Completions and commands plan at once; this
/// bounds only how late a time-based release is seen (a retry backoff of 100 ms may start up to
/// 100 ms later).
pub const SWEEP_INTERVAL: Duration = Duration::from_millis(100);

/// How often the partitions are walked when nothing waits on time (no backoff or deferral ends
/// within it, no revocation, seal or failure report pending): at ten thousand idle partitions
/// the sweeps every [`SWEEP_INTERVAL`] were most of a shard's CPU. A release the core did not
/// note (see [`ShardCore::note_release`]) is seen at most this late.
pub const QUIET_SWEEP_INTERVAL: Duration = Duration::from_secs(1);

/// How often a report is built when nothing happened since the last one (no command, no
/// answer with partitions in it, no failure, connection or lookup): building one compares
/// every partition's progress, a fifth of an idle shard's CPU at `report_interval_ms`. What
/// changed anyway (a stall that time alone set or cleared) is reported at most this late.
pub const QUIET_REPORT_INTERVAL: Duration = Duration::from_secs(1);

/// Identifies one request the core asked for, in its answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestId(pub u64);

/// Work for the driver, in the order it must be done.
#[derive(Debug)]
pub enum Action {
    /// Open a connection to `addr` (a broker of `cluster`) and answer with
    /// [`ShardCore::handle_connected`] for this `generation`.
    Connect {
        broker: BrokerId,
        generation: u32,
        cluster: ClusterId,
        addr: Arc<str>,
    },
    /// Close this connection; whatever is still in flight on it fails (its answers are no
    /// longer awaited by the core).
    Disconnect { broker: BrokerId, generation: u32 },
    /// Ask any broker of `cluster` who leads these topics' partitions; answer with
    /// [`ShardCore::handle_leaders`].
    LookupLeaders {
        id: RequestId,
        cluster: ClusterId,
        topics: Vec<Arc<str>>,
    },
    /// Get an idempotent producer id from `cluster`; answer with
    /// [`ShardCore::handle_producer_id`].
    InitProducerId { id: RequestId, cluster: ClusterId },
    /// Send on the current connection to `broker`; answer with
    /// [`ShardCore::handle_fetch_response`].
    Fetch {
        id: RequestId,
        broker: BrokerId,
        request: Box<FetchRequest>,
    },
    /// Encode at the connection's Produce version and send on the current connection to
    /// `broker`; answer with [`ShardCore::handle_produce_response`].
    Produce {
        id: RequestId,
        broker: BrokerId,
        request: ProduceRequestPlan,
    },
}

/// Which side of a flow a cluster or leader is on for a partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Side {
    Source,
    Target,
}

/// What an incident of failures is about (see [`Incidents`]): the log says what happened once
/// per incident, not once per retry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Incident {
    /// Connecting to the broker, or requests on its connection, fail.
    Broker(BrokerId),
    /// Leader lookups on the cluster fail.
    Lookup(ClusterId),
    /// The cluster gives no producer id.
    ProducerId(ClusterId),
}

/// A target partition, for the sequence numbers this shard's producer has used on it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct TargetPartition {
    cluster: ClusterId,
    topic: Arc<str>,
    partition: i32,
}

/// A partition the shard owns, with its routing.
#[derive(Debug)]
pub(crate) struct Owned {
    pub(crate) p: Partition,
    pub(crate) source: ClusterId,
    pub(crate) target: ClusterId,
    pub(crate) source_leader: Option<BrokerId>,
    pub(crate) target_leader: Option<BrokerId>,
    pub(crate) revoking: bool,
    /// A failure waiting for room in the event queue.
    unreported_failure: bool,
    /// Exactly-once: sealed for a commit, [`ShardEvent::Sealed`] not yet sent.
    sealing: bool,
    /// The progress last put in a report: a report carries only partitions whose progress
    /// changed (at ten thousand idle partitions, full reports were most of control's work).
    reported: Option<super::PartitionProgress>,
}

/// The shard's state machine.
#[derive(Debug)]
pub struct ShardCore {
    cfg: ShardConfig,
    parts: BTreeMap<PartitionKey, Owned>,
    routing: Routing,
    conns: Vec<Conn>,
    producers: HashMap<ClusterId, produce::ProducerIdState>,
    /// Sequence state of target partitions this shard wrote and no longer owns: a partition
    /// assigned here again continues the sequence the broker expects from our producer.
    sequences: HashMap<TargetPartition, SequenceState>,
    fetches: fetch::Fetches,
    produces: produce::Produces,
    /// Bytes of fetch response frames still referenced by queued batches.
    in_use: Rc<Cell<usize>>,
    stats: ShardStats,
    jitter: Jitter,
    incidents: Incidents<Incident>,
    next_request: u64,
    actions: VecDeque<Action>,
    /// Whether something changed since the last planning.
    dirty: bool,
    /// Events for control, bounded by `max_pending_events` (see [`ShardCore::poll_event`]).
    outbox: VecDeque<ShardEvent>,
    report: Option<ShardEvent>,
    /// The next report carries every partition, changed or not: a report was refused (control
    /// never saw the changes it carried).
    report_all: bool,
    next_report: Instant,
    /// Something happened that may have changed a partition's progress: the next report is
    /// built at `report_interval_ms` (otherwise at [`QUIET_REPORT_INTERVAL`]).
    report_soon: bool,
    /// When a report is built even if nothing set `report_soon`.
    next_quiet_report: Instant,
    /// When [`ShardCore::handle_timers`] next may walk the partitions ([`SWEEP_INTERVAL`]).
    next_sweep: Instant,
    /// Something waits on time within [`QUIET_SWEEP_INTERVAL`]: the next sweep walks the
    /// partitions (set by planning and the sweeps, cleared at each sweep that walks).
    sweep_soon: bool,
    /// When the partitions are walked even if nothing noted a release.
    next_quiet_sweep: Instant,
    shutdown_since: Option<Instant>,
    /// The group member's lease ([`ShardCommand::Lease`]): no Produce is sent from then on.
    produce_until: Option<Instant>,
    stopped: bool,
    /// For record timing (see [`ShardCore::set_wall_clock`]).
    wall: Option<super::timing::WallClock>,
}

impl ShardCore {
    /// `seed` drives the backoff jitter (the simulation replays by it).
    pub fn new(cfg: ShardConfig, now: Instant, seed: u64) -> Self {
        let summary = Duration::from_millis(cfg.incident_summary_interval_ms.max(1));
        ShardCore {
            report_all: true,
            next_report: now + Duration::from_millis(cfg.report_interval_ms),
            report_soon: true,
            next_quiet_report: now,
            next_sweep: now,
            sweep_soon: true,
            next_quiet_sweep: now,
            cfg,
            parts: BTreeMap::new(),
            routing: Routing::default(),
            conns: Vec::new(),
            producers: HashMap::new(),
            sequences: HashMap::new(),
            fetches: fetch::Fetches::default(),
            produces: produce::Produces::default(),
            in_use: Rc::new(Cell::new(0)),
            stats: ShardStats::default(),
            jitter: Jitter::new(seed),
            incidents: Incidents::new(summary),
            next_request: 0,
            actions: VecDeque::new(),
            dirty: true,
            outbox: VecDeque::new(),
            report: None,
            shutdown_since: None,
            produce_until: None,
            stopped: false,
            wall: None,
        }
    }

    /// The wall clock the partitions time records by (record age, replication latency);
    /// partitions assigned before it is set are not timed.
    pub fn set_wall_clock(&mut self, wall: super::timing::WallClock) {
        self.wall = Some(wall);
    }

    pub fn index(&self) -> usize {
        self.cfg.index
    }

    /// How to reach `cluster` (for the driver's lookups, producer ids and connections).
    pub fn endpoint(&self, cluster: ClusterId) -> &Arc<super::ClusterEndpoint> {
        &self.routing.cluster(cluster).endpoint
    }

    /// Bytes of fetched data held: frames referenced by queued batches, plus what in-flight
    /// fetches may return. Stays within `memory_budget_bytes` plus one oversized batch.
    pub fn memory_in_use(&self) -> usize {
        self.in_use.get()
    }

    /// Bytes reserved for fetches in flight.
    pub fn memory_reserved(&self) -> usize {
        self.fetches.reserved
    }

    /// The progress of every owned partition (a report carries the changed ones).
    pub fn progress(&self) -> Vec<super::PartitionProgress> {
        self.parts.values().map(|o| o.p.progress()).collect()
    }

    /// Whether the shard has stopped (its last events are in the queue).
    pub fn is_stopped(&self) -> bool {
        self.stopped
    }

    /// Whether a shutdown is under way.
    pub fn is_shutting_down(&self) -> bool {
        self.shutdown_since.is_some()
    }

    /// A partition's routing and state in words, for diagnostics.
    pub fn describe(&self, key: &PartitionKey) -> String {
        match self.parts.get(key) {
            None => format!("{key} is not owned"),
            Some(o) => {
                format!(
                    "{key}: {:?}, source leader {:?} (needed: {}), target leader {:?} (needed: {}), producer: {}, revoking: {}",
                    o.p.status(),
                    o.source_leader.map(|b| self.routing.addr(b).to_string()),
                    o.p.needs_source_leader,
                    o.target_leader.map(|b| self.routing.addr(b).to_string()),
                    o.p.needs_target_leader,
                    o.p.has_producer(),
                    o.revoking
                ) + &format!(
                    "; source conn {:?}; target conn {:?}; produces in flight {:?}; fetches in flight {} (busy {:?}); can send at {:?}",
                    o.source_leader.and_then(|b| self.conns.get(b.0 as usize)),
                    o.target_leader.and_then(|b| self.conns.get(b.0 as usize)),
                    self.produces.per_group,
                    self.fetches.reserved,
                    self.fetches.busy_groups(),
                    o.p.debug_send_state()
                )
            }
        }
    }

    fn next_request_id(&mut self) -> RequestId {
        self.next_request += 1;
        RequestId(self.next_request)
    }

    /// The next thing to do. Planning (what can be started now) runs when the queue is empty
    /// and something changed since the last planning.
    pub fn poll_action(&mut self, now: Instant) -> Option<Action> {
        if self.actions.is_empty() && self.dirty && !self.stopped {
            self.dirty = false;
            self.plan(now);
        }
        self.actions.pop_front()
    }

    fn plan(&mut self, now: Instant) {
        self.plan_producer_ids(now);
        self.plan_lookups(now);
        self.plan_connections(now);
        self.plan_fetches(now);
        self.plan_produces(now);
    }

    /// The next event for control. Failures and revocations wait in their partitions while
    /// `max_pending_events` events are queued (so the queue stays bounded and nothing is
    /// lost); the periodic report comes after them.
    pub fn poll_event(&mut self) -> Option<ShardEvent> {
        self.outbox.pop_front().or_else(|| self.report.take())
    }

    /// Control's channel was full: the report's mapping segments go back to their partitions
    /// (ahead of newer ones) for the next report, and the next report carries every
    /// partition's progress (control missed the changes this one carried). Any other event is
    /// queued again at the front.
    pub fn handle_event_refused(&mut self, event: ShardEvent) {
        match event {
            ShardEvent::Report { mappings, .. } => {
                self.report_all = true;
                for (k, m) in mappings {
                    if let Some(o) = self.parts.get_mut(&k) {
                        o.p.restore_mappings(m);
                    }
                }
            }
            other => self.outbox.push_front(other),
        }
    }

    /// Something becomes possible at `at` with no completion to say so (a backoff or a
    /// deferral ends): sweeps run every [`SWEEP_INTERVAL`] once it is near. One further away
    /// is noted again by the planning of a later sweep.
    pub(crate) fn note_release(&mut self, at: Instant, now: Instant) {
        if at <= now + QUIET_SWEEP_INTERVAL {
            self.sweep_soon = true;
        }
    }

    fn has_room(&self) -> bool {
        self.outbox.len() < self.cfg.max_pending_events.max(1)
    }

    /// A command from control.
    pub fn handle_command(&mut self, cmd: ShardCommand, now: Instant) {
        self.dirty = true;
        self.report_soon = true;
        // Revocations, seals, pauses and shutdowns finish in sweeps.
        self.sweep_soon = true;
        fn part<'a>(s: &'a mut ShardCore, key: &PartitionKey) -> Option<&'a mut Partition> {
            s.parts.get_mut(key).map(|o| &mut o.p)
        }
        match cmd {
            ShardCommand::Assign(a) => self.assign(*a),
            ShardCommand::Revoke(key) => {
                if let Some(o) = self.parts.get_mut(&key) {
                    o.p.drain();
                    o.revoking = true;
                }
            }
            ShardCommand::Pause(key) => part(self, &key).into_iter().for_each(Partition::pause),
            ShardCommand::Resume(key) => part(self, &key).into_iter().for_each(Partition::resume),
            ShardCommand::Seek {
                key,
                offset,
                generation,
            } => {
                self.forget_fetched(&key);
                if let Some(o) = self.parts.get_mut(&key) {
                    o.p.seek(offset, generation);
                    o.unreported_failure = false;
                }
            }
            ShardCommand::SetMaxMessageBytes(key, v) => {
                if let Some(p) = part(self, &key) {
                    p.set_max_message_bytes(v);
                }
            }
            ShardCommand::Lease { produce_until } => {
                if self.lease_ended(now) && now < produce_until {
                    self.forget_producers();
                }
                self.produce_until = Some(produce_until);
            }
            ShardCommand::Seal(key) => {
                if let Some(o) = self.parts.get_mut(&key) {
                    o.p.seal();
                    o.sealing = true;
                }
            }
            ShardCommand::Unseal { key, producer } => {
                if let Some(o) = self.parts.get_mut(&key) {
                    o.p.unseal(producer);
                    o.sealing = false;
                }
            }
            ShardCommand::Shutdown => {
                self.shutdown_since = Some(now);
                for o in self.parts.values_mut() {
                    o.p.drain();
                }
            }
        }
    }

    fn assign(&mut self, a: Assignment) {
        let source = self.routing.cluster_id(&a.source, a.fetch.backoff);
        let target = self.routing.cluster_id(&a.target, a.produce.backoff);
        if let Some(old) = self.parts.remove(&a.key) {
            self.keep_sequence(&old);
        }
        self.forget_fetched(&a.key);
        let mut fetch = a.fetch;
        fetch.partition_ceiling_bytes =
            fetch::partition_ceiling_bytes(fetch, self.cfg.memory_budget_bytes);
        let mut p = Partition::new(
            a.key.clone(),
            a.target_topic.clone(),
            a.start_offset,
            a.max_message_bytes,
            fetch,
            a.produce,
        );
        p.set_last_fetched_epoch(a.start_leader_epoch);
        p.set_target_next_offset(a.start_target_offset);
        // The leader control just saw: no lookup before the first fetch (a stale one answers
        // with a routing error or fails its connection, and the shard then looks it up).
        let source_leader = a.source_leader.as_ref().map(|l| {
            p.needs_source_leader = false;
            p.set_source_leader_epoch(l.epoch);
            self.routing.broker_id(&l.addr, source)
        });
        if let Some(w) = self.wall {
            p.set_wall_clock(w);
        }
        if let Some(txn) = &a.transactional {
            p.set_transactional(txn);
        } else if let Some(produce::ProducerIdState::Ready(producer)) = self.producers.get(&target)
        {
            p.set_producer(*producer);
            let tp = TargetPartition {
                cluster: target,
                topic: a.target_topic.clone(),
                partition: a.key.partition,
            };
            if let Some(state) = self.sequences.get(&tp)
                && state.producer == *producer
            {
                p.resume_sequence(*state);
            }
        }
        self.parts.insert(
            a.key,
            Owned {
                p,
                source,
                target,
                source_leader,
                target_leader: None,
                revoking: false,
                unreported_failure: false,
                sealing: false,
                reported: None,
            },
        );
    }

    /// Remembers where the shard's idempotent producer stands on the partition's target
    /// partition (a transactional partition's producer is its own and ends with it).
    fn keep_sequence(&mut self, o: &Owned) {
        if o.p.transactional_id().is_none()
            && let Some(state) = o.p.sequence_state()
        {
            let tp = TargetPartition {
                cluster: o.target,
                topic: o.p.target_topic.clone(),
                partition: o.p.key.partition,
            };
            self.sequences.insert(tp, state);
        }
    }

    /// Time passed: deadlines of requests and connection attempts, delivery timeouts,
    /// revocations, the periodic report and the end of a shutdown. Call at least every
    /// `tick_ms`.
    pub fn handle_timers(&mut self, now: Instant) {
        if self.stopped {
            return;
        }
        // Requests and connection attempts in flight: few, checked at every call.
        self.expire_requests(now);
        self.mark_unanswered_produces(now);
        self.mark_unanswered_fetches(now);
        self.expire_connects(now);
        self.expire_lookups(now);
        self.expire_producer_ids(now);
        // What walks every partition runs at most every SWEEP_INTERVAL: at 5 000 idle
        // partitions a shard spent most of its CPU planning and sweeping 40 times a second
        // though only the passing of time had changed (completions and commands plan at once).
        // And only while something waits on time (noted by planning and by the sweeps
        // themselves), otherwise every QUIET_SWEEP_INTERVAL: idle partitions wait on nothing.
        if now >= self.next_sweep
            && (self.sweep_soon || now >= self.next_quiet_sweep || self.shutdown_since.is_some())
        {
            self.next_sweep = now + SWEEP_INTERVAL;
            self.next_quiet_sweep = now + QUIET_SWEEP_INTERVAL;
            self.sweep_soon = false;
            // Backoffs and deferrals may have ended: plan again at the next poll (which notes
            // what still waits).
            self.dirty = true;
            self.check_delivery_timeouts(now);
            self.report_failures();
            self.finish_revocations(now);
            self.finish_seals();
        }
        if now >= self.next_report {
            self.next_report = now + Duration::from_millis(self.cfg.report_interval_ms);
            // Quiet: nothing happened that could change progress (see QUIET_REPORT_INTERVAL).
            if self.report_soon || self.report_all || now >= self.next_quiet_report {
                self.report_soon = false;
                self.next_quiet_report = now + QUIET_REPORT_INTERVAL;
                if let Some(unsent) = self.report.take() {
                    // Never polled: its segments and changes go into this one.
                    self.handle_event_refused(unsent);
                }
                self.report = Some(self.build_report());
            }
        }
        if let Some(since) = self.shutdown_since {
            let quiet = self.parts.values().all(|o| self.is_quiet(o, now));
            let timeout = Duration::from_millis(self.cfg.shutdown_timeout_ms);
            if quiet || now.saturating_duration_since(since) > timeout {
                // A periodic report not polled yet (built a moment ago, in this very call
                // perhaps) carries changes no later report repeats: it goes into the final one
                // (dropping it lost a partition's last progress at a stop, 1 run in 6 of
                // controlplane's import_and_export_refuse_while_strait_runs).
                if let Some(unsent) = self.report.take() {
                    self.handle_event_refused(unsent);
                }
                let report = self.build_report();
                self.outbox.push_back(report);
                self.outbox.push_back(ShardEvent::Stopped {
                    shard: self.cfg.index,
                    error: None,
                });
                self.stopped = true;
            }
        }
    }

    /// The earliest time [`ShardCore::handle_timers`] has something to do (a driver may sleep
    /// until then, or until the next completion).
    pub fn next_timer(&self) -> Instant {
        self.next_report
    }

    /// A request unanswered past its deadline: the broker is not answering, so its connection
    /// is dropped (failing everything in flight on it) and reopened after the backoff.
    fn expire_requests(&mut self, now: Instant) {
        while let Some((broker, after)) = self
            .overdue_fetch(now)
            .or_else(|| self.overdue_produce(now))
        {
            self.stats.request_timeouts += 1;
            let err = crate::wire::WireError::Timeout {
                broker: self.routing.addr(broker).to_string(),
                api: "Fetch or Produce",
                after_ms: u64::try_from(after.as_millis()).unwrap_or(u64::MAX),
            };
            self.conn_failed(broker, &err, now);
        }
    }

    fn check_delivery_timeouts(&mut self, now: Instant) {
        let mut failed = Vec::new();
        let mut soonest: Option<Instant> = None;
        for (k, o) in self.parts.iter_mut() {
            if matches!(o.p.status(), Status::Running | Status::Draining) {
                if let Err(f) = o.p.check_delivery_timeout(now) {
                    failed.push((k.clone(), f));
                } else if let Some(at) = o.p.delivery_deadline() {
                    soonest = Some(soonest.map_or(at, |s| s.min(at)));
                }
            }
        }
        if let Some(at) = soonest {
            self.note_release(at, now);
        }
        for (k, f) in failed {
            self.report_failure(&k, f);
        }
    }

    /// The report: new mapping segments, and the progress of the partitions whose progress
    /// changed since the last report (of every partition after a refused one).
    fn build_report(&mut self) -> ShardEvent {
        let mut mappings = Vec::new();
        let mut progress = Vec::new();
        let all = std::mem::take(&mut self.report_all);
        for (k, o) in self.parts.iter_mut() {
            let m = o.p.take_mappings();
            if !m.is_empty() {
                mappings.push((k.clone(), m));
            }
            let now = o.p.progress();
            if all || o.reported.as_ref() != Some(&now) {
                o.reported = Some(now.clone());
                progress.push(now);
            }
        }
        self.stats.buffered_bytes = self.in_use.get() as u64;
        self.stats.memory_budget_bytes = self.cfg.memory_budget_bytes as u64;
        ShardEvent::Report {
            shard: self.cfg.index,
            progress,
            mappings,
            stats: self.stats.clone(),
        }
    }

    /// Whether the lease of a group member has ended ([`ShardCommand::Lease`]).
    pub(crate) fn lease_ended(&self, now: Instant) -> bool {
        self.produce_until.is_some_and(|t| now >= t)
    }

    /// A lease after one that ended: what this shard's producers wrote while their fate was
    /// unknown (revoked at the lapse with batches unanswered) cannot be resent with the same
    /// sequence numbers (refetched batches may be merged differently, and the broker refuses a
    /// sequence it has seen with other bounds), so every partition with nothing numbered takes
    /// a new producer id; one still holding numbered batches resends them as they are and
    /// switches once they are answered.
    fn forget_producers(&mut self) {
        self.producers.clear();
        self.sequences.clear();
        for o in self.parts.values_mut() {
            o.p.clear_producer();
        }
    }

    /// Whether a draining partition is done: every batch it numbered is answered, or, once
    /// the lease has ended (nothing more may be sent), none is on the wire.
    fn is_quiet(&self, o: &Owned, now: Instant) -> bool {
        o.p.is_quiet() || (self.lease_ended(now) && o.p.nothing_on_wire())
    }

    /// Reports drained revoked partitions and forgets them (while the event queue has room).
    fn finish_revocations(&mut self, now: Instant) {
        let mut done: Vec<PartitionKey> = Vec::new();
        let mut draining = false;
        for (k, o) in self.parts.iter().filter(|(_, o)| o.revoking) {
            if self.is_quiet(o, now) {
                done.push(k.clone());
            } else {
                draining = true;
            }
        }
        // Revoking partitions still draining, or left for want of room, finish at a later
        // sweep.
        self.sweep_soon |= draining;
        for key in done {
            if !self.has_room() {
                self.sweep_soon = true;
                return;
            }
            let Some(mut o) = self.parts.remove(&key) else {
                continue;
            };
            self.keep_sequence(&o);
            let ev = ShardEvent::Revoked {
                shard: self.cfg.index,
                next_offset: o.p.next_offset(),
                mappings: o.p.take_mappings(),
                key,
            };
            self.outbox.push_back(ev);
        }
    }

    /// Reports sealed partitions whose every sent batch is acknowledged (while the event
    /// queue has room).
    fn finish_seals(&mut self) {
        let shard = self.cfg.index;
        let cap = self.cfg.max_pending_events.max(1);
        for o in self.parts.values_mut() {
            if !o.sealing || o.revoking {
                continue;
            }
            if self.outbox.len() >= cap || !o.p.is_sealed_and_settled() {
                // Finished at a later sweep.
                self.sweep_soon = true;
                continue;
            }
            o.sealing = false;
            self.outbox.push_back(ShardEvent::Sealed {
                shard,
                progress: Box::new(o.p.progress()),
                mappings: o.p.take_mappings(),
            });
        }
    }

    /// A partition stopped: it stays failed (nothing more is fetched or sent for it) and its
    /// failure goes to control, now or when the event queue has room.
    fn report_failure(&mut self, key: &PartitionKey, f: Failure) {
        if f.kind == FailureKind::Fenced {
            // Another holder, or the coordinator's timeout: control finds out which, and
            // either stops the partition for good or takes it over again.
            tracing::warn!(shard = self.cfg.index, partition = %key, error = %f.message, "partition stopped in its shard: its transactional producer's epoch was refused");
        } else {
            tracing::error!(shard = self.cfg.index, partition = %key, error = %f.message, "partition stopped");
        }
        let Some(o) = self.parts.get_mut(key) else {
            return;
        };
        self.report_soon = true;
        o.p.fail(f.kind, f.message);
        o.unreported_failure = true;
        self.report_failures();
    }

    fn report_failures(&mut self) {
        let shard = self.cfg.index;
        let cap = self.cfg.max_pending_events.max(1);
        for (k, o) in self.parts.iter_mut() {
            if self.outbox.len() >= cap {
                // The rest when the queue has room, at a later sweep.
                self.sweep_soon = true;
                return;
            }
            if !o.unreported_failure {
                continue;
            }
            o.unreported_failure = false;
            if let Status::Failed(f) = o.p.status() {
                self.outbox.push_back(ShardEvent::PartitionFailed {
                    shard,
                    key: k.clone(),
                    kind: f.kind.clone(),
                    error: f.message.clone(),
                    next_offset: o.p.next_offset(),
                    seek_generation: o.p.seek_generation(),
                });
            }
        }
    }

    /// Fails `keys` for a reason that is not theirs alone (the broker speaks no version we do).
    fn fail_keys(&mut self, keys: &[PartitionKey], kind: FailureKind, error: &str) {
        for k in keys {
            self.report_failure(
                k,
                Failure {
                    kind: kind.clone(),
                    message: error.to_string(),
                },
            );
        }
    }
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    /// Whether the last `handle_timers` walked the partitions (a sweep marks the core dirty;
    /// nothing else happened in these tests).
    fn swept(core: &mut ShardCore, now: Instant) -> bool {
        core.dirty = false;
        core.handle_timers(now);
        core.dirty
    }

    #[test]
    fn sweeps_run_often_only_while_something_waits_on_time() {
        let t0 = Instant::now();
        let cfg = ShardConfig::new(0, crate::io::IoBackend::Epoll);
        let mut core = ShardCore::new(cfg, t0, 1);
        let ms = |n: u64| t0 + Duration::from_millis(n);
        // The first call sweeps; then nothing waits on time: no sweep until the quiet interval.
        assert!(swept(&mut core, t0));
        assert!(!swept(&mut core, ms(100)));
        assert!(!swept(&mut core, ms(900)));
        assert!(swept(&mut core, ms(1000)));
        // A release within the quiet interval brings sweeps back to every SWEEP_INTERVAL...
        core.note_release(ms(1300), ms(1000));
        assert!(swept(&mut core, ms(1100)));
        // ...and they stop once nothing notes one again (planning would note it while it waits).
        assert!(!swept(&mut core, ms(1200)));
        assert!(!swept(&mut core, ms(1999)));
        assert!(swept(&mut core, ms(2100)));
        // A release further away waits for a later sweep's planning to note it.
        core.note_release(ms(9000), ms(2100));
        assert!(!swept(&mut core, ms(2200)));
        // Commands (revocations, seals, shutdowns finish in sweeps) bring the next one forward.
        core.handle_command(ShardCommand::Pause(PartitionKey::new(0, "t", 0)), ms(2300));
        assert!(swept(&mut core, ms(2300)));
        // A shutdown sweeps at every interval until it ends (at once here: nothing is owned).
        core.handle_command(ShardCommand::Shutdown, ms(2500));
        assert!(swept(&mut core, ms(2500)));
        assert!(core.is_stopped());
    }

    /// Whether `handle_timers` at `now` built a report.
    fn reported(core: &mut ShardCore, now: Instant) -> bool {
        core.report = None;
        core.handle_timers(now);
        core.report.is_some()
    }

    #[test]
    fn reports_come_at_their_interval_only_after_something_happened() {
        let t0 = Instant::now();
        let cfg = ShardConfig::new(0, crate::io::IoBackend::Epoll); // reports every 200 ms
        let mut core = ShardCore::new(cfg, t0, 1);
        let ms = |n: u64| t0 + Duration::from_millis(n);
        // The first one; then nothing happens: the next comes after the quiet interval.
        assert!(reported(&mut core, ms(200)));
        assert!(!reported(&mut core, ms(400)));
        assert!(!reported(&mut core, ms(1000)));
        assert!(reported(&mut core, ms(1200)));
        // A command (anything that may change progress) brings back the report interval...
        core.handle_command(ShardCommand::Pause(PartitionKey::new(0, "t", 0)), ms(1300));
        assert!(reported(&mut core, ms(1400)));
        assert!(!reported(&mut core, ms(1600)));
        // ...as a refused report does (it carries every partition next time).
        let refused = core.build_report();
        core.handle_event_refused(refused);
        assert!(reported(&mut core, ms(1800)));
        assert!(!reported(&mut core, ms(2000)));
    }
}
