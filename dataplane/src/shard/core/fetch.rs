//! Fetching: one Fetch request in flight per (source broker, flow, isolation level) group,
//! sized from the shard's memory budget, and the partitions' slices of each response handed
//! to their state machines. Each group keeps a fetch session with its broker (see
//! [`crate::shard::fetch_session`]): a fetch names only the partitions added or changed since the
//! last, and the broker answers only the partitions with something new.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
use kafka_protocol::messages::{BrokerId as KafkaBrokerId, FetchRequest, FetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::produce::UNANSWERED_STALL;
use super::routing::BrokerId;
use super::{Action, RequestId, ShardCore};
use crate::shard::channel::{
    FailureKind, FetchSettings, FlowId, IsolationLevel, PartitionKey, StallReason,
};
use crate::shard::fetch_session::{Answer, FetchSession, PartitionAsk, SessionRequest};
use crate::shard::partition::{DivergingEpoch, Fetched, FrameTicket, Partition};
use crate::wire::WireError;

/// A fetch response as the driver hands it over: decoded, with the size of its frame (the
/// memory its record sets hold until the last batch cut from it is acknowledged).
#[derive(Debug)]
pub struct FetchedFrame {
    pub response: FetchResponse,
    pub frame_bytes: usize,
}

/// Partitions fetched together: same source broker, flow and isolation level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) struct FetchGroup {
    broker: BrokerId,
    flow: FlowId,
    isolation: IsolationLevel,
}

#[derive(Debug)]
struct FetchInFlight {
    group: FetchGroup,
    generation: u32,
    reserved: usize,
    /// The partitions the request covers, in key order: all those in the group's session
    /// (named in it or not), less those forgotten since ([`ShardCore::forget_fetched`]).
    sent: Vec<PartitionKey>,
    /// An incremental fetch: the broker leaves out the partitions with nothing new. A full
    /// fetch is answered for every partition it names, so one left out learns nothing.
    incremental: bool,
    /// `max_wait_ms` after sending plus [`UNANSWERED_STALL`]: a broker silent past it is
    /// reported as a stall long before `request.timeout.ms` abandons the request.
    answer_due: Instant,
    deadline: Instant,
}

/// The fetch side's state.
#[derive(Debug, Default)]
pub(super) struct Fetches {
    in_flight: HashMap<RequestId, FetchInFlight>,
    /// The request in flight of each group (at most one).
    busy: HashMap<FetchGroup, RequestId>,
    /// When each group last sent a request (see [`defer_idle_fetch`]).
    sent_at: HashMap<FetchGroup, Instant>,
    /// Each group's fetch session, parked when the group has no partitions left: at most one
    /// per source broker, flow and isolation level, as many as the groups there can be.
    sessions: HashMap<FetchGroup, FetchSession>,
    /// Bytes reserved by fetches in flight (their `max_bytes`).
    pub(super) reserved: usize,
    rotation: usize,
}

#[derive(Default)]
struct GroupPlan {
    /// The partitions that want data and what each asks for, in key order.
    wanted: Vec<(PartitionKey, PartitionAsk)>,
    /// The settings of the group's first partition (a group shares its flow's).
    settings: Option<FetchSettings>,
    /// Some partition merges small batches (see `MERGE_HEADROOM_DIVISOR`).
    merges: bool,
    /// The sum of the keys' fetch sizes: what the fetch could return at most.
    wanted_bytes: usize,
    any_has_data: bool,
    any_backlogged: bool,
}

impl Fetches {
    /// The groups with a fetch in flight (diagnostics).
    pub(super) fn busy_groups(&self) -> Vec<(BrokerId, RequestId)> {
        self.busy.iter().map(|(g, id)| (g.broker, *id)).collect()
    }
}

impl ShardCore {
    /// Starts one fetch for every group that has partitions wanting data, a free connection
    /// and room in the memory budget.
    pub(super) fn plan_fetches(&mut self, now: Instant) {
        if self.shutdown_since.is_some() {
            return;
        }
        let (groups, group_count) = self.fetch_groups();
        // A group gone parks its session (the next full fetch closes it on the broker).
        let busy = &self.fetches.busy;
        self.fetches
            .sessions
            .retain(|g, s| groups.contains_key(g) || busy.contains_key(g) || s.park());
        for (group, plan) in groups {
            let Some(settings) = plan.settings else {
                continue;
            };
            if self.fetches.busy.contains_key(&group) {
                continue;
            }
            let last_sent = self.fetches.sent_at.get(&group).copied();
            if defer_idle_fetch(
                plan.any_has_data,
                plan.any_backlogged,
                last_sent,
                now,
                settings.max_wait_ms,
            ) {
                if let Some(at) = last_sent {
                    let max_wait = u64::try_from(settings.max_wait_ms).unwrap_or(0);
                    self.note_release(at + Duration::from_millis(max_wait), now);
                }
                continue;
            }
            let Some(generation) = self.ready_conn(group.broker, now) else {
                continue;
            };
            let used = self.in_use.get() + self.fetches.reserved;
            // The response frame is larger than the records it carries: reserve that too, so
            // that what the frame holds stays within the budget.
            let overhead = response_overhead(plan.wanted.len());
            // Fetches leave a quarter of the budget to merged batches (new memory while the
            // frames of their inputs are still held), so that merging is not starved by
            // reservations and never takes the shard past its budget.
            let headroom = if plan.merges {
                self.cfg.memory_budget_bytes / MERGE_HEADROOM_DIVISOR
            } else {
                0
            };
            let Some(max_bytes) = fetch_room(
                self.cfg
                    .memory_budget_bytes
                    .saturating_sub(overhead + headroom),
                used,
                settings,
                plan.wanted_bytes,
                group_count,
            ) else {
                let keys: Vec<PartitionKey> = plan.wanted.into_iter().map(|(k, _)| k).collect();
                self.stall_for_memory(&keys, used, now);
                continue; // wait for produced batches to free memory
            };
            self.start_fetch(group, generation, plan.wanted, settings, max_bytes, now);
        }
    }

    /// The fetch groups of partitions that want data or wait on the target, without their
    /// fetch in flight, and how many such groups there are, busy or not (they share the
    /// memory budget).
    fn fetch_groups(&self) -> (BTreeMap<FetchGroup, GroupPlan>, usize) {
        let mut groups: BTreeMap<FetchGroup, GroupPlan> = BTreeMap::new();
        let mut busy: Vec<FetchGroup> = Vec::new();
        for (k, o) in &self.parts {
            // Room for the answer being produced while the next one is fetched.
            let cap = o.p.fetch_bytes().saturating_mul(2);
            let Some(broker) = o.source_leader else {
                continue;
            };
            let wants = o.p.wants_fetch(cap);
            let backlogged = o.p.backlogged(cap);
            if !wants && !backlogged {
                continue;
            }
            let group = FetchGroup {
                broker,
                flow: k.flow,
                isolation: o.p.fetch.isolation_level,
            };
            // A group with its fetch in flight is not planned (its session is kept):
            // collecting its partitions, all of them when idle, was most of the planning.
            if self.fetches.busy.contains_key(&group) {
                if !busy.contains(&group) {
                    busy.push(group);
                }
                continue;
            }
            let g = groups.entry(group).or_default();
            if wants {
                // What it asks is taken here, in the walk, rather than looked up per key later.
                g.wanted.push((k.clone(), ask_of(&o.p)));
                g.settings.get_or_insert(o.p.fetch);
                g.merges |= o.p.produce.batch_bytes > 0;
                g.wanted_bytes = g.wanted_bytes.saturating_add(o.p.fetch_bytes());
                g.any_has_data |= !o.p.caught_up();
            }
            g.any_backlogged |= backlogged;
        }
        let count = groups.len() + busy.len();
        (groups, count)
    }

    fn stall_for_memory(&mut self, keys: &[PartitionKey], used: usize, now: Instant) {
        let detail = format!(
            "{used} of the shard's {} bytes are held by fetched batches waiting for the target",
            self.cfg.memory_budget_bytes
        );
        for k in keys {
            if let Some(o) = self.parts.get_mut(k) {
                o.p.stall_source(StallReason::MemoryBudget, &detail, now);
            }
        }
    }

    /// Sends `wanted` (in key order, as `fetch_groups` collects it) as the group's fetch.
    fn start_fetch(
        &mut self,
        group: FetchGroup,
        generation: u32,
        mut wanted: Vec<(PartitionKey, PartitionAsk)>,
        settings: FetchSettings,
        max_bytes: usize,
        now: Instant,
    ) {
        let reserve = max_bytes + response_overhead(wanted.len());
        // A stall (waiting for memory, say) ends with the answer, which every partition of the
        // session has: its slice, or nothing new. Not here: a stall is one incident since the
        // partition last moved (a memory wait can follow an unknown leader), and a fetch sent
        // has not moved it yet; cleared here, a partition stuck for long would report no
        // reason while the fetch is out (the simulation caught it, 8 s stuck).
        for_each_sorted(&mut self.parts, wanted.iter().map(|(k, _)| k), |o| {
            o.p.fetch_started();
        });
        // Rotate so that a large batch of a later partition eventually leads a response
        // (the broker returns an oversized batch whole only for the first partition).
        self.fetches.rotation = self.fetches.rotation.wrapping_add(1);
        let r = self.fetches.rotation % wanted.len();
        wanted.rotate_left(r);
        let session = self.fetches.sessions.entry(group).or_default();
        let plan = session.build(&wanted, now);
        // Back in key order, for the walk over the answer.
        wanted.rotate_right(r);
        let keys: Vec<PartitionKey> = wanted.into_iter().map(|(k, _)| k).collect();
        if plan.full {
            self.stats.full_fetches += 1;
        } else {
            self.stats.incremental_fetches += 1;
        }
        let request = self.fetch_request(&plan, settings, group.isolation, max_bytes);
        let id = self.next_request_id();
        let timeout = self.request_timeout(group.broker)
            + Duration::from_millis(u64::try_from(settings.max_wait_ms).unwrap_or(0));
        self.stats.fetch_requests += 1;
        self.fetches.busy.insert(group, id);
        self.fetches.sent_at.insert(group, now);
        self.fetches.reserved += reserve;
        self.fetches.in_flight.insert(
            id,
            FetchInFlight {
                group,
                generation,
                reserved: reserve,
                sent: keys,
                incremental: !plan.full,
                answer_due: now
                    + Duration::from_millis(u64::try_from(settings.max_wait_ms).unwrap_or(0))
                    + UNANSWERED_STALL,
                deadline: now + timeout,
            },
        );
        self.note_sent(group.broker);
        self.actions.push_back(Action::Fetch {
            id,
            broker: group.broker,
            request: Box::new(request),
        });
    }

    /// What a fetch asks of partition `key` now.
    fn ask(&self, key: &PartitionKey) -> PartitionAsk {
        ask_of(&self.parts[key].p)
    }

    fn fetch_request(
        &self,
        plan: &SessionRequest,
        settings: FetchSettings,
        isolation: IsolationLevel,
        max_bytes: usize,
    ) -> FetchRequest {
        let mut by_topic: Vec<(Arc<str>, Vec<FetchPartition>)> = Vec::new();
        for k in &plan.send {
            let ask = self.ask(k);
            let fp = FetchPartition::default()
                .with_partition(k.partition)
                .with_current_leader_epoch(ask.current_leader_epoch)
                .with_fetch_offset(ask.fetch_offset)
                .with_last_fetched_epoch(ask.last_fetched_epoch)
                .with_log_start_offset(-1)
                .with_partition_max_bytes(ask.max_bytes);
            match by_topic.iter_mut().find(|(t, _)| *t == k.topic) {
                Some((_, v)) => v.push(fp),
                None => by_topic.push((k.topic.clone(), vec![fp])),
            }
        }
        let mut forgotten: Vec<(Arc<str>, Vec<i32>)> = Vec::new();
        for k in &plan.forget {
            match forgotten.iter_mut().find(|(t, _)| *t == k.topic) {
                Some((_, v)) => v.push(k.partition),
                None => forgotten.push((k.topic.clone(), vec![k.partition])),
            }
        }
        FetchRequest::default()
            .with_replica_id(KafkaBrokerId(-1))
            .with_max_wait_ms(settings.max_wait_ms)
            .with_min_bytes(settings.min_bytes)
            .with_max_bytes(i32::try_from(max_bytes).unwrap_or(i32::MAX))
            .with_isolation_level(isolation.wire())
            .with_session_id(plan.session_id)
            .with_session_epoch(plan.session_epoch)
            .with_topics(
                by_topic
                    .into_iter()
                    .map(|(t, ps)| {
                        FetchTopic::default()
                            .with_topic(topic_name(&t))
                            .with_partitions(ps)
                    })
                    .collect(),
            )
            .with_forgotten_topics_data(
                forgotten
                    .into_iter()
                    .map(|(t, ps)| {
                        ForgottenTopic::default()
                            .with_topic(topic_name(&t))
                            .with_partitions(ps)
                    })
                    .collect(),
            )
    }

    /// The time a request to `broker` may take before the core gives up on its connection.
    /// The driver's connection times out at `request.timeout.ms` itself; the slack lets that
    /// more precise error arrive first.
    pub(super) fn request_timeout(&self, broker: BrokerId) -> Duration {
        let cluster = self.routing.broker(broker).cluster;
        let ms = self
            .routing
            .cluster(cluster)
            .endpoint
            .config
            .request_timeout_ms;
        Duration::from_millis(ms.saturating_add(1_000))
    }

    /// A fetch finished (or could not be sent).
    pub fn handle_fetch_response(
        &mut self,
        id: RequestId,
        result: Result<FetchedFrame, WireError>,
        now: Instant,
    ) {
        let Some(f) = self.fetches.in_flight.remove(&id) else {
            return; // abandoned with its connection
        };
        self.dirty = true;
        self.fetch_done(id, &f);
        self.note_answered(f.group.broker, f.generation);
        // An idle partition's answer (incremental, nothing new) changes no progress worth a
        // report before the quiet one; anything else may.
        let quiet = result
            .as_ref()
            .is_ok_and(|fr| fr.response.error_code == 0 && fr.response.responses.is_empty());
        self.report_soon |= !quiet;
        match result {
            Ok(frame) => {
                self.broker_answered(f.group.broker, now);
                if self.session_answered(f.group, &frame.response, now) {
                    self.on_fetch_response(&f, frame, now);
                }
            }
            Err(e @ WireError::UnsupportedVersion { .. }) => {
                self.session_lost(f.group);
                self.fail_keys(&f.sent, FailureKind::Other, &e.to_string());
            }
            Err(e) => {
                self.session_lost(f.group);
                self.fetch_lost(&f, &e, now);
                self.conn_failed(f.group.broker, &e, now);
            }
        }
    }

    /// The group's session learns from the answer (a new session, an error that ends it).
    /// Returns whether the answer's partitions are for what the session asked.
    fn session_answered(&mut self, group: FetchGroup, resp: &FetchResponse, now: Instant) -> bool {
        let Some(session) = self.fetches.sessions.get_mut(&group) else {
            return true;
        };
        let answered = resp.responses.iter().map(|t| t.partitions.len()).sum();
        let answer = session.handle_response(
            resp.error_code,
            resp.session_id,
            resp.throttle_time_ms,
            answered,
            now,
        );
        if matches!(answer, Answer::Reset | Answer::Foreign) {
            self.stats.fetch_session_resets += 1;
            let addr = self.routing.addr(group.broker).to_string();
            tracing::debug!(shard = self.cfg.index, broker = %addr, code = resp.error_code, session = resp.session_id, "fetch session reset");
        }
        answer != Answer::Foreign
    }

    /// The group's fetch in flight was lost: the next one is full.
    fn session_lost(&mut self, group: FetchGroup) {
        if let Some(session) = self.fetches.sessions.get_mut(&group)
            && session.handle_failure()
        {
            self.stats.fetch_session_resets += 1;
        }
    }

    fn fetch_done(&mut self, id: RequestId, f: &FetchInFlight) {
        if self.fetches.busy.get(&f.group) == Some(&id) {
            self.fetches.busy.remove(&f.group);
        }
        self.fetches.reserved = self.fetches.reserved.saturating_sub(f.reserved);
    }

    /// Marks the partitions of fetches unanswered past their `answer_due` as stalled on an
    /// unreachable source (a black-holed link: the connection stays open and silent). An
    /// answer clears it.
    pub(super) fn mark_unanswered_fetches(&mut self, now: Instant) {
        let mut stalled: Vec<(PartitionKey, BrokerId)> = Vec::new();
        for f in self.fetches.in_flight.values() {
            if now >= f.answer_due {
                stalled.extend(f.sent.iter().map(|k| (k.clone(), f.group.broker)));
            }
        }
        for (key, broker) in stalled {
            let detail = format!(
                "source broker {} has not answered a fetch for {} s past its max wait",
                self.routing.addr(broker),
                UNANSWERED_STALL.as_secs()
            );
            if let Some(o) = self.parts.get_mut(&key) {
                o.p.stall_source(StallReason::SourceUnreachable, &detail, now);
                self.report_soon = true;
            }
        }
    }

    fn fetch_lost(&mut self, f: &FetchInFlight, e: &WireError, now: Instant) {
        let detail = e.to_string();
        for k in &f.sent {
            if let Some(o) = self.parts.get_mut(k) {
                o.source_leader = None;
                o.p.needs_source_leader = true;
                o.p.stall_source(StallReason::SourceUnreachable, &detail, now);
            }
        }
    }

    /// Abandons the fetches in flight on `broker` (its connection failed).
    pub(super) fn abandon_fetches(&mut self, broker: BrokerId, e: &WireError, now: Instant) {
        let ids: Vec<RequestId> = self
            .fetches
            .in_flight
            .iter()
            .filter(|(_, f)| f.group.broker == broker)
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            if let Some(f) = self.fetches.in_flight.remove(&id) {
                self.fetch_done(id, &f);
                self.session_lost(f.group);
                self.fetch_lost(&f, e, now);
            }
        }
    }

    /// The broker owing the oldest answer past its deadline, if any.
    pub(super) fn overdue_fetch(&self, now: Instant) -> Option<(BrokerId, Duration)> {
        self.fetches
            .in_flight
            .values()
            .filter(|f| now >= f.deadline)
            .map(|f| (f.group.broker, self.request_timeout(f.group.broker)))
            .next()
    }

    /// Forgets `key` in the fetches in flight: it was assigned again or moved by a seek, so
    /// what they return for it is from the position before. Checking the offset alone is not
    /// enough: the new position's own fetch may be in flight too (to another leader), and the
    /// old answer would be taken for it, skipping or repeating records.
    ///
    /// A session holding `key` sends its next fetch full: the broker answers a partition only
    /// when something changed since its last answer, which the new state never saw.
    pub(super) fn forget_fetched(&mut self, key: &PartitionKey) {
        for f in self.fetches.in_flight.values_mut() {
            f.sent.retain(|k| k != key);
        }
        for s in self.fetches.sessions.values_mut() {
            if s.holds(key) && s.reset() {
                self.stats.fetch_session_resets += 1;
            }
        }
    }

    fn on_fetch_response(&mut self, f: &FetchInFlight, frame: FetchedFrame, now: Instant) {
        let (group, sent) = (f.group, &f.sent);
        self.stats.fetch_bytes += frame.frame_bytes as u64;
        let resp = frame.response;
        if resp.error_code != 0 {
            if !is_session_error(resp.error_code) {
                let addr = self.routing.addr(group.broker).to_string();
                tracing::warn!(shard = self.cfg.index, broker = %addr, code = resp.error_code, "fetch error");
            }
            return;
        }
        // Every partition of the session may be answered, named in the request or not; one
        // left out of an incremental answer has nothing new.
        let answered = self.take_fetch_response(group, sent, resp, frame.frame_bytes, now);
        if !f.incremental {
            return;
        }
        let unanswered = sent.iter().filter(|k| !answered.contains(*k));
        for_each_sorted(&mut self.parts, unanswered, |o| o.p.fetched_nothing_new());
    }

    /// Hands each partition of `sent` its slice of `resp`; returns the partitions answered.
    fn take_fetch_response(
        &mut self,
        group: FetchGroup,
        sent: &[PartitionKey],
        resp: FetchResponse,
        frame_bytes: usize,
        now: Instant,
    ) -> HashSet<PartitionKey> {
        let mut answered = HashSet::new();
        if resp.responses.is_empty() {
            return answered; // an incremental fetch with nothing new
        }
        let sent: HashSet<&PartitionKey> = sent.iter().collect();
        let ticket = FrameTicket::new(frame_bytes, &self.in_use);
        let mut failures = Vec::new();
        for t in resp.responses {
            let topic: Arc<str> = Arc::from(t.topic.0.as_str());
            for pd in t.partitions {
                let pk = PartitionKey {
                    flow: group.flow,
                    topic: topic.clone(),
                    partition: pd.partition_index,
                };
                if !sent.contains(&pk) {
                    continue;
                }
                answered.insert(pk.clone());
                let Some(o) = self.parts.get_mut(&pk) else {
                    continue;
                };
                let data = Fetched {
                    error_code: pd.error_code,
                    high_watermark: pd.high_watermark,
                    last_stable_offset: pd.last_stable_offset,
                    log_start_offset: pd.log_start_offset,
                    aborted: pd
                        .aborted_transactions
                        .unwrap_or_default()
                        .into_iter()
                        .map(|a| (a.producer_id.0, a.first_offset))
                        .collect(),
                    records: pd.records,
                    diverging: (pd.diverging_epoch.epoch >= 0
                        || pd.diverging_epoch.end_offset >= 0)
                        .then_some(DivergingEpoch {
                            epoch: pd.diverging_epoch.epoch,
                            end_offset: pd.diverging_epoch.end_offset,
                        }),
                };
                match o.p.handle_fetch(data, &ticket, now, &mut self.stats) {
                    Ok(()) => {
                        if o.p.needs_source_leader {
                            o.source_leader = None;
                        }
                    }
                    Err(f) => failures.push((pk, f)),
                }
            }
        }
        for (k, f) in failures {
            self.report_failure(&k, f);
        }
        answered
    }
}

/// What a fetch asks of partition `p` now.
fn ask_of(p: &Partition) -> PartitionAsk {
    PartitionAsk {
        fetch_offset: p.fetch_offset(),
        current_leader_epoch: p.source_leader_epoch(),
        last_fetched_epoch: p.last_fetched_epoch(),
        max_bytes: i32::try_from(p.fetch_bytes()).unwrap_or(i32::MAX),
    }
}

/// Calls `f` on the partition of each of `keys` (ascending, as in `parts`; keys `parts` no
/// longer holds are passed over) in one walk of `parts`'s range, instead of a lookup per key:
/// an idle fetch covers every partition of its group, and at 5 000 partitions a shard's
/// lookups (comparing topic names down the tree) were a fifth of its idle CPU.
fn for_each_sorted<'k, V>(
    parts: &mut BTreeMap<PartitionKey, V>,
    keys: impl IntoIterator<Item = &'k PartitionKey>,
    mut f: impl FnMut(&mut V),
) {
    let mut keys = keys.into_iter().peekable();
    let Some(&first) = keys.peek() else {
        return;
    };
    for (k, o) in parts.range_mut(first..) {
        while keys.next_if(|w| *w < k).is_some() {}
        match keys.peek() {
            None => return,
            Some(w) if *w == k => {
                f(o);
                keys.next();
            }
            Some(_) => {}
        }
    }
}

fn topic_name(t: &str) -> TopicName {
    TopicName(StrBytes::from_string(t.to_string()))
}

/// Whether to hold back a fetch whose partitions are all caught up while others of the same
/// group wait on the target. The broker holds such a fetch for up to `max_wait_ms`, and a
/// connection serves one request at a time, so sending it would keep the busy partitions from
/// fetching again until it returns: one idle partition (a heartbeats topic) cut a 1 GiB catch-up
/// from 540 to 50 MiB/s. So wait for the busy ones to join, but still poll the idle ones at least
/// every `max_wait_ms`, in case the busy ones are stuck.
pub(super) fn defer_idle_fetch(
    any_has_data: bool,
    any_backlogged: bool,
    last_sent: Option<Instant>,
    now: Instant,
    max_wait_ms: i32,
) -> bool {
    let max_wait = Duration::from_millis(u64::try_from(max_wait_ms).unwrap_or(0));
    !any_has_data
        && any_backlogged
        && last_sent.is_some_and(|at| now.saturating_duration_since(at) < max_wait)
}

/// Whether a Fetch's top-level error is about its session (the next fetch is full, and the
/// partitions are answered by it: nothing to warn about).
fn is_session_error(code: i16) -> bool {
    use crate::shard::fetch_session::{FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH};
    code == FETCH_SESSION_ID_NOT_FOUND || code == INVALID_FETCH_SESSION_EPOCH
}

/// Fetches of partitions that merge batches leave `1 / MERGE_HEADROOM_DIVISOR` of the memory
/// budget for the merged batches.
const MERGE_HEADROOM_DIVISOR: usize = 4;

/// A bound of what a Fetch response frame carries besides record batches, for `partitions`
/// partitions: the response and topic headers, and each partition's fixed fields (a few
/// aborted transactions included).
pub(super) fn response_overhead(partitions: usize) -> usize {
    256 + 128 * partitions
}

/// How far one partition's fetch size may grow in a shard with `budget_bytes` of memory: the
/// settings' ceiling, but at most a quarter of the budget (what is fetched, what is produced
/// meanwhile and room for other partitions), and never below the configured size.
pub(super) fn partition_ceiling_bytes(settings: FetchSettings, budget_bytes: usize) -> i32 {
    let base = settings.partition_max_bytes.max(1);
    let quarter = i32::try_from(budget_bytes / 4).unwrap_or(i32::MAX);
    settings.partition_ceiling_bytes.min(quarter).max(base)
}

/// The response size a new fetch may ask for, or `None` to wait for memory to be freed. The size
/// is reserved until the response arrives, so it asks for no more than its partitions can
/// return (`wanted_bytes`, the sum of their fetch sizes), and for no more than a fair share of
/// the budget among the shard's `groups` fetch groups: one group's long poll must not hold the
/// whole budget while another group waits (it did, with a 48 MiB budget and a 50 MiB
/// `fetch.max.bytes`). A fetch goes out once a whole partition's worth fits (or the whole budget,
/// when one partition's worth is larger than the budget: a shard must not wait for room it can
/// never have).
pub(super) fn fetch_room(
    budget_bytes: usize,
    used_bytes: usize,
    settings: FetchSettings,
    wanted_bytes: usize,
    groups: usize,
) -> Option<usize> {
    let remaining = budget_bytes.saturating_sub(used_bytes);
    let partition_bytes = settings.partition_max_bytes.max(1) as usize;
    let floor = partition_bytes.min(budget_bytes.max(1));
    if remaining < floor {
        return None;
    }
    let share = (budget_bytes / groups.max(1)).max(floor);
    let cap = (settings.max_bytes.max(1) as usize)
        .min(wanted_bytes.max(partition_bytes))
        .min(share);
    Some(cap.min(remaining))
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    #[test]
    fn an_idle_fetch_waits_for_busy_partitions_but_not_forever() {
        let t0 = Instant::now();
        let soon = t0 + Duration::from_millis(10);
        let late = t0 + Duration::from_millis(500);
        // Idle partitions only, others busy writing, fetched recently: hold back.
        assert!(defer_idle_fetch(false, true, Some(t0), soon, 500));
        // ...but not past max_wait_ms, in case the busy partitions are stuck.
        assert!(!defer_idle_fetch(false, true, Some(t0), late, 500));
        // Nothing busy in the group: a long poll blocks no one.
        assert!(!defer_idle_fetch(false, false, Some(t0), soon, 500));
        // Some partition has data, so the broker answers at once.
        assert!(!defer_idle_fetch(true, true, Some(t0), soon, 500));
        // The group never fetched: the first fetch goes out.
        assert!(!defer_idle_fetch(false, true, None, soon, 500));
        // A non-positive wait never defers.
        assert!(!defer_idle_fetch(false, true, Some(t0), t0, 0));
        assert!(!defer_idle_fetch(false, true, Some(t0), t0, -1));
    }

    #[test]
    fn fetch_room_is_bounded_by_the_budget_and_never_waits_for_the_impossible() {
        let s = FetchSettings {
            partition_max_bytes: 1 << 20,
            max_bytes: 50 << 20,
            ..FetchSettings::default()
        };
        let many = 1000 << 20;
        assert_eq!(fetch_room(64 << 20, 0, s, many, 1), Some(50 << 20));
        assert_eq!(fetch_room(64 << 20, 60 << 20, s, many, 1), Some(4 << 20));
        assert_eq!(fetch_room(64 << 20, (63 << 20) + 1, s, many, 1), None);
        assert_eq!(fetch_room(64 << 20, 80 << 20, s, many, 1), None);
        // No more than the partitions can return...
        assert_eq!(fetch_room(64 << 20, 0, s, 4 << 20, 1), Some(4 << 20));
        // ...(but at least one configured partition's worth)...
        assert_eq!(fetch_room(64 << 20, 0, s, 0, 1), Some(1 << 20));
        // ...and no more than a fair share, so that another group can fetch meanwhile.
        assert_eq!(fetch_room(48 << 20, 0, s, many, 2), Some(24 << 20));
        assert_eq!(fetch_room(48 << 20, 24 << 20, s, many, 2), Some(24 << 20));
        assert_eq!(fetch_room(3 << 20, 0, s, many, 8), Some(1 << 20));
        // One partition's worth is more than the whole budget: fetch when nothing is held.
        let big = FetchSettings {
            partition_max_bytes: 8 << 20,
            ..s
        };
        assert_eq!(fetch_room(2 << 20, 0, big, 24 << 20, 1), Some(2 << 20));
        assert_eq!(fetch_room(2 << 20, 1, big, 24 << 20, 1), None);
    }

    #[test]
    fn a_partition_grows_to_a_quarter_of_the_budget_at_most() {
        let s = FetchSettings::default(); // 1 MiB, may grow to 50 MiB
        assert_eq!(partition_ceiling_bytes(s, 48 << 20), 12 << 20);
        assert_eq!(partition_ceiling_bytes(s, 1 << 30), 52_428_800);
        // Never below the configured size, even in a small budget.
        assert_eq!(partition_ceiling_bytes(s, 1 << 20), 1 << 20);
        // An explicit size (ceiling = size) stays.
        let fixed = FetchSettings {
            partition_ceiling_bytes: 1 << 20,
            ..s
        };
        assert_eq!(partition_ceiling_bytes(fixed, 1 << 30), 1 << 20);
    }

    #[test]
    fn a_sorted_walk_visits_exactly_the_keys_the_map_holds() {
        let key = |t: &str, p: i32| PartitionKey::new(0, t, p);
        let mut parts: BTreeMap<PartitionKey, u32> = ["a", "b", "c"]
            .iter()
            .flat_map(|t| (0..4).map(move |p| (key(t, p), 0)))
            .collect();
        // A subset, one key the map no longer holds (revoked meanwhile), and the last key.
        let keys = [
            key("a", 1),
            key("a", 3),
            key("b", 0),
            key("b", 9),
            key("c", 3),
        ];
        for_each_sorted(&mut parts, keys.iter(), |v| *v += 1);
        let visited: Vec<&PartitionKey> = parts
            .iter()
            .filter(|(_, v)| **v == 1)
            .map(|(k, _)| k)
            .collect();
        let held: Vec<&PartitionKey> = keys.iter().filter(|k| parts.contains_key(*k)).collect();
        assert_eq!(visited, held);
        assert!(parts.values().all(|v| *v <= 1));
        // Nothing to visit; keys past the map's end.
        for_each_sorted(&mut parts, std::iter::empty(), |v| *v += 10);
        for_each_sorted(&mut parts, [key("d", 0)].iter(), |v| *v += 10);
        assert!(parts.values().all(|v| *v <= 1));
    }
}
