//! The shard thread: a single-threaded event loop around the partition state machines.
//!
//! Each turn it starts whatever work is possible (connections, leader lookups, producer ids,
//! one fetch per source broker and flow, produce requests per target broker and flow), then
//! waits for the first of: a finished request, or the tick that reads commands and sends
//! reports. Requests are enqueued on their connection synchronously when they are built, so
//! wire order equals build order, which keeps each partition's sequence numbers in order.

use std::cell::Cell;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::rc::Rc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, TryRecvError, TrySendError};
use futures_util::StreamExt;
use futures_util::future::LocalBoxFuture;
use futures_util::stream::FuturesUnordered;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{
    ApiKey, BrokerId, FetchRequest, FetchResponse, ProduceRequest, ProduceResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::channel::{
    Assignment, ClusterEndpoint, FailureKind, FetchSettings, FlowId, PartitionKey, ShardCommand,
    ShardEvent, ShardStats,
};
use super::meta::{self, Leaders};
use super::partition::{Failure, Fetched, FrameTicket, Partition, ProduceOutcome, Status};
use crate::io::{BrokerConn, ConnSetup, IoBackend};
use crate::wire::WireError;
use crate::wire::produce::{TopicBatches, encode_produce_body};

/// Settings of one shard thread.
#[derive(Debug, Clone)]
pub struct ShardConfig {
    pub index: usize,
    pub backend: IoBackend,
    /// Pin the thread to this core, if given.
    pub core: Option<core_affinity::CoreId>,
    /// Fetch response bytes held at once, in flight or waiting to be produced. Default 64 MiB;
    /// the binary gives each shard its share of `strait.memory.bytes`. The shard's memory for
    /// record data stays within this plus one oversized batch.
    pub memory_budget_bytes: usize,
    /// How often progress, mappings and counters go to control. Default 200 ms.
    pub report_interval_ms: u64,
    /// How often commands are read and timers (retry backoff, reports) are checked. Default
    /// 25 ms: data moves on completions, not on the tick, and each tick wakes the thread (at
    /// 5 ms, ticks were a tenth of strait's CPU in the steady bench).
    pub tick_ms: u64,
    /// Wait after a failed connection attempt. Default 500 ms.
    pub reconnect_backoff_ms: u64,
    /// Minimum time between two leader lookups on one cluster. Default 100 ms: a new remote
    /// topic's leader is usually ready a moment after the first "not leader" answer.
    pub leader_lookup_interval_ms: u64,
    /// Produce requests in flight per target broker and flow. Default 8.
    pub max_produce_requests_per_broker: usize,
    /// Upper bound on one produce request's batch bytes. Default 16 MiB.
    pub max_produce_request_bytes: usize,
    /// How long a shutdown waits for in-flight produces. Default 30 000 ms.
    pub shutdown_timeout_ms: u64,
}

impl ShardConfig {
    pub fn new(index: usize, backend: IoBackend) -> Self {
        ShardConfig {
            index,
            backend,
            core: None,
            memory_budget_bytes: 64 * 1024 * 1024,
            report_interval_ms: 200,
            tick_ms: 25,
            reconnect_backoff_ms: 500,
            leader_lookup_interval_ms: 100,
            max_produce_requests_per_broker: 8,
            max_produce_request_bytes: 16 * 1024 * 1024,
            shutdown_timeout_ms: 30_000,
        }
    }
}

/// A running shard: its command channel and thread.
#[derive(Debug)]
pub struct ShardHandle {
    pub index: usize,
    pub commands: Sender<ShardCommand>,
    pub thread: JoinHandle<()>,
}

/// Starts a shard thread. `command_capacity` bounds the command channel.
pub fn spawn_shard(
    cfg: ShardConfig,
    events: Sender<ShardEvent>,
    command_capacity: usize,
) -> std::io::Result<ShardHandle> {
    let (tx, rx) = crossbeam_channel::bounded(command_capacity.max(1));
    let index = cfg.index;
    let thread = std::thread::Builder::new()
        .name(format!("strait-shard-{index}"))
        .spawn(move || {
            if let Some(core) = cfg.core
                && !crate::io::runtime::pin_current_thread(core)
            {
                tracing::warn!(shard = index, core = core.id, "could not pin shard thread");
            }
            let backend = cfg.backend;
            let events2 = events.clone();
            let result = crate::io::block_on(backend, Shard::new(cfg, rx, events).run());
            if let Err(e) = result {
                let _ = events2.send(ShardEvent::Stopped {
                    shard: index,
                    error: Some(format!("cannot start the {} runtime: {e}", backend.name())),
                });
            }
        })?;
    Ok(ShardHandle {
        index,
        commands: tx,
        thread,
    })
}

/// (target cluster alias, target topic, partition).
type TargetPartition = (String, Arc<str>, i32);
/// (producer id, producer epoch, next sequence number).
type SequenceState = (i64, i16, i32);

struct Slot {
    p: Partition,
    source: Arc<ClusterEndpoint>,
    target: Arc<ClusterEndpoint>,
    source_leader: Option<String>,
    target_leader: Option<String>,
    revoking: bool,
}

enum Conn {
    Ready(BrokerConn),
    Connecting,
    Down { until: Instant },
}

enum Done {
    Fetch {
        key: FetchKey,
        reserved: usize,
        sent: Vec<PartitionKey>,
        result: Result<(FetchResponse, usize), WireError>,
    },
    Produce {
        addr: String,
        flow: FlowId,
        /// (target topic, partition) → (partition key, sequence).
        sent: HashMap<(Arc<str>, i32), (PartitionKey, i32)>,
        result: Result<ProduceResponse, WireError>,
    },
    Connected {
        addr: String,
        result: Result<BrokerConn, WireError>,
    },
    Leaders {
        alias: String,
        result: Result<Leaders, WireError>,
    },
    Producer {
        alias: String,
        result: Result<(i64, i16), String>,
    },
}

/// Whether to hold back a fetch whose partitions are all caught up while others of the same
/// group wait on the target. The broker holds such a fetch for up to `max_wait_ms`, and a
/// connection serves one request at a time, so sending it would keep the busy partitions from
/// fetching again until it returns: one idle partition (a heartbeats topic) cut a 1 GiB catch-up
/// from 540 to 50 MiB/s. So wait for the busy ones to join, but still poll the idle ones at least
/// every `max_wait_ms`, in case the busy ones are stuck.
fn defer_idle_fetch(
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

/// The response size a new fetch of `partitions` partitions may ask for, or `None` to wait for
/// memory to be freed. The size is reserved until the response arrives, so it asks for no more
/// than its partitions can return, and for no more than a fair share of the budget among the
/// shard's `groups` fetch groups: one group's long poll must not hold the whole budget while
/// another group waits (it did, with a 48 MiB budget and a 50 MiB `fetch.max.bytes`). A fetch
/// goes out once a whole partition's worth fits (or the whole budget, when one partition's worth
/// is larger than the budget: a shard must not wait for room it can never have).
fn fetch_room(
    budget_bytes: usize,
    used_bytes: usize,
    settings: FetchSettings,
    partitions: usize,
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
        .min(partition_bytes.saturating_mul(partitions.max(1)))
        .min(share);
    Some(cap.min(remaining))
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct FetchKey {
    addr: String,
    flow: FlowId,
    isolation: i8,
}

enum ProducerId {
    Pending,
    Ready(i64, i16),
    Down { until: Instant },
}

struct Shard {
    cfg: ShardConfig,
    commands: Receiver<ShardCommand>,
    events: Sender<ShardEvent>,
    slots: BTreeMap<PartitionKey, Slot>,
    setups: HashMap<String, ConnSetup>,
    conns: HashMap<String, Conn>,
    producers: HashMap<String, ProducerId>,
    /// Sequence state of target partitions this shard wrote and no longer owns:
    /// (target cluster, topic, partition) → (producer id, epoch, next sequence). A partition
    /// assigned here again continues the sequence the broker expects from our producer.
    sequences: HashMap<TargetPartition, SequenceState>,
    lookups: HashMap<String, Option<Instant>>,
    fetching: HashSet<FetchKey>,
    /// When each fetch group last sent a request (see the deferral in `start_fetches`).
    fetch_sent_at: HashMap<FetchKey, Instant>,
    producing: HashMap<(String, FlowId), usize>,
    in_use: Rc<Cell<usize>>,
    reserved: usize,
    rotation: usize,
    stats: ShardStats,
    outbox: VecDeque<ShardEvent>,
    last_report: Instant,
    shutdown_since: Option<Instant>,
}

type Futs = FuturesUnordered<LocalBoxFuture<'static, Done>>;

impl Shard {
    fn new(cfg: ShardConfig, commands: Receiver<ShardCommand>, events: Sender<ShardEvent>) -> Self {
        Shard {
            cfg,
            commands,
            events,
            slots: BTreeMap::new(),
            setups: HashMap::new(),
            conns: HashMap::new(),
            producers: HashMap::new(),
            sequences: HashMap::new(),
            lookups: HashMap::new(),
            fetching: HashSet::new(),
            fetch_sent_at: HashMap::new(),
            producing: HashMap::new(),
            in_use: Rc::new(Cell::new(0)),
            reserved: 0,
            rotation: 0,
            stats: ShardStats::default(),
            outbox: VecDeque::new(),
            last_report: Instant::now(),
            shutdown_since: None,
        }
    }

    async fn run(mut self) {
        let mut futs: Futs = FuturesUnordered::new();
        let mut tick = tokio::time::interval(Duration::from_millis(self.cfg.tick_ms.max(1)));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let now = Instant::now();
            self.start_work(&mut futs, now);
            tokio::select! {
                Some(done) = futs.next() => self.on_done(done),
                _ = tick.tick() => {
                    if !self.read_commands() {
                        break; // control is gone
                    }
                    self.finish_revocations();
                    if self.last_report.elapsed() >= Duration::from_millis(self.cfg.report_interval_ms)
                        && !self.report()
                    {
                        break;
                    }
                    if let Some(since) = self.shutdown_since {
                        let quiet = self.slots.values().all(|s| s.p.is_quiet());
                        if quiet || since.elapsed() > Duration::from_millis(self.cfg.shutdown_timeout_ms) {
                            self.report();
                            self.flush_outbox_blocking();
                            let _ = self.events.send(ShardEvent::Stopped { shard: self.cfg.index, error: None });
                            return;
                        }
                    }
                }
            }
        }
        let _ = self.events.try_send(ShardEvent::Stopped {
            shard: self.cfg.index,
            error: Some("the control channel closed".to_string()),
        });
    }

    fn emit(&mut self, ev: ShardEvent) {
        self.outbox.push_back(ev);
        self.flush_outbox();
    }

    fn flush_outbox(&mut self) {
        while let Some(ev) = self.outbox.pop_front() {
            match self.events.try_send(ev) {
                Ok(()) => {}
                Err(TrySendError::Full(ev)) | Err(TrySendError::Disconnected(ev)) => {
                    self.outbox.push_front(ev);
                    return;
                }
            }
        }
    }

    /// At shutdown only: the last events must arrive, so wait for room (bounded by control
    /// draining the channel, which it does until every shard has stopped).
    fn flush_outbox_blocking(&mut self) {
        while let Some(ev) = self.outbox.pop_front() {
            if self
                .events
                .send_timeout(ev, Duration::from_secs(5))
                .is_err()
            {
                return;
            }
        }
    }

    /// Reads every queued command. Returns false when control has disconnected.
    fn read_commands(&mut self) -> bool {
        loop {
            match self.commands.try_recv() {
                Ok(cmd) => self.on_command(cmd),
                Err(TryRecvError::Empty) => return true,
                Err(TryRecvError::Disconnected) => return self.shutdown_since.is_some(),
            }
        }
    }

    fn on_command(&mut self, cmd: ShardCommand) {
        match cmd {
            ShardCommand::Assign(a) => self.assign(*a),
            ShardCommand::Revoke(key) => {
                if let Some(s) = self.slots.get_mut(&key) {
                    s.p.drain();
                    s.revoking = true;
                }
            }
            ShardCommand::Pause(key) => {
                if let Some(s) = self.slots.get_mut(&key) {
                    s.p.pause();
                }
            }
            ShardCommand::Resume(key) => {
                if let Some(s) = self.slots.get_mut(&key) {
                    s.p.resume();
                }
            }
            ShardCommand::Seek(key, offset) => {
                if let Some(s) = self.slots.get_mut(&key) {
                    s.p.seek(offset);
                }
            }
            ShardCommand::SetMaxMessageBytes(key, v) => {
                if let Some(s) = self.slots.get_mut(&key) {
                    s.p.set_max_message_bytes(v);
                }
            }
            ShardCommand::Shutdown => {
                self.shutdown_since = Some(Instant::now());
                for s in self.slots.values_mut() {
                    s.p.drain();
                }
            }
        }
    }

    fn assign(&mut self, a: Assignment) {
        for ep in [&a.source, &a.target] {
            self.setups
                .entry(ep.alias.clone())
                .or_insert_with(|| ConnSetup {
                    config: ep.config.clone(),
                    tls: ep.tls.clone(),
                    backend: self.cfg.backend,
                });
        }
        if let Some(old) = self.slots.remove(&a.key)
            && let Some(state) = old.p.sequence_state()
        {
            self.sequences.insert(
                (
                    old.target.alias.clone(),
                    old.p.target_topic.clone(),
                    a.key.partition,
                ),
                state,
            );
        }
        let mut p = Partition::new(
            a.key.clone(),
            a.target_topic.clone(),
            a.start_offset,
            a.max_message_bytes,
            a.fetch,
            a.produce,
        );
        if let Some(ProducerId::Ready(pid, epoch)) = self.producers.get(&a.target.alias) {
            p.set_producer(*pid, *epoch);
            let target = (
                a.target.alias.clone(),
                a.target_topic.clone(),
                a.key.partition,
            );
            if let Some(&(spid, sepoch, seq)) = self.sequences.get(&target)
                && (spid, sepoch) == (*pid, *epoch)
            {
                p.resume_sequence(spid, sepoch, seq);
            }
        }
        self.slots.insert(
            a.key,
            Slot {
                p,
                source: a.source,
                target: a.target,
                source_leader: None,
                target_leader: None,
                revoking: false,
            },
        );
    }

    /// Reports drained revoked partitions and forgets them.
    fn finish_revocations(&mut self) {
        let done: Vec<PartitionKey> = self
            .slots
            .iter()
            .filter(|(_, s)| s.revoking && s.p.is_quiet())
            .map(|(k, _)| k.clone())
            .collect();
        for key in &done {
            if let Some(mut s) = self.slots.remove(key) {
                if let Some(state) = s.p.sequence_state() {
                    self.sequences.insert(
                        (
                            s.target.alias.clone(),
                            s.p.target_topic.clone(),
                            key.partition,
                        ),
                        state,
                    );
                }
                let ev = ShardEvent::Revoked {
                    shard: self.cfg.index,
                    key: key.clone(),
                    next_offset: s.p.next_offset(),
                    mappings: s.p.take_mappings(),
                };
                self.emit(ev);
            }
        }
    }

    /// Sends the periodic report. Returns false when control has disconnected.
    fn report(&mut self) -> bool {
        self.last_report = Instant::now();
        self.flush_outbox();
        let mut mappings = Vec::new();
        for (k, s) in self.slots.iter_mut() {
            let m = s.p.take_mappings();
            if !m.is_empty() {
                mappings.push((k.clone(), m));
            }
        }
        self.stats.buffered_bytes = self.in_use.get() as u64;
        let ev = ShardEvent::Report {
            shard: self.cfg.index,
            progress: self.slots.values().map(|s| s.p.progress()).collect(),
            mappings,
            stats: self.stats.clone(),
        };
        match self.events.try_send(ev) {
            Ok(()) => true,
            Err(TrySendError::Full(ShardEvent::Report { mappings, .. })) => {
                // Keep the segments for the next report; progress is re-read anyway.
                for (k, m) in mappings {
                    if let Some(s) = self.slots.get_mut(&k) {
                        s.p.restore_mappings(m);
                    }
                }
                true
            }
            Err(TrySendError::Full(_)) => true,
            Err(TrySendError::Disconnected(_)) => self.shutdown_since.is_some(),
        }
    }

    fn start_work(&mut self, futs: &mut Futs, now: Instant) {
        self.start_producer_ids(futs, now);
        self.start_lookups(futs, now);
        self.start_connections(futs, now);
        self.start_fetches(futs, now);
        self.start_produces(futs, now);
    }

    fn start_producer_ids(&mut self, futs: &mut Futs, now: Instant) {
        let mut needed: Vec<Arc<ClusterEndpoint>> = Vec::new();
        for s in self.slots.values() {
            if !s.p.has_producer() && !needed.iter().any(|e| e.alias == s.target.alias) {
                needed.push(s.target.clone());
            }
        }
        for ep in needed {
            match self.producers.get(&ep.alias) {
                Some(ProducerId::Pending) => continue,
                Some(ProducerId::Down { until }) if now < *until => continue,
                Some(ProducerId::Ready(pid, epoch)) => {
                    let (pid, epoch) = (*pid, *epoch);
                    for s in self.slots.values_mut() {
                        if s.target.alias == ep.alias {
                            s.p.set_producer(pid, epoch);
                        }
                    }
                    continue;
                }
                _ => {}
            }
            let Some(setup) = self.setups.get(&ep.alias).cloned() else {
                continue;
            };
            self.producers.insert(ep.alias.clone(), ProducerId::Pending);
            let alias = ep.alias.clone();
            futs.push(Box::pin(async move {
                let result = meta::init_producer_id(&ep, &setup).await;
                Done::Producer { alias, result }
            }));
        }
    }

    fn start_lookups(&mut self, futs: &mut Futs, now: Instant) {
        let mut wanted: BTreeMap<String, (Arc<ClusterEndpoint>, Vec<String>)> = BTreeMap::new();
        for s in self.slots.values() {
            if matches!(s.p.status(), Status::Failed(_)) {
                continue;
            }
            if s.p.needs_source_leader && !s.revoking {
                let e = wanted
                    .entry(s.source.alias.clone())
                    .or_insert_with(|| (s.source.clone(), Vec::new()));
                if !e.1.iter().any(|t| **t == *s.p.key.topic) {
                    e.1.push(s.p.key.topic.to_string());
                }
            }
            if s.p.needs_target_leader {
                let e = wanted
                    .entry(s.target.alias.clone())
                    .or_insert_with(|| (s.target.clone(), Vec::new()));
                if !e.1.iter().any(|t| **t == *s.p.target_topic) {
                    e.1.push(s.p.target_topic.to_string());
                }
            }
        }
        for (alias, (ep, topics)) in wanted {
            match self.lookups.get(&alias) {
                Some(None) => continue, // in flight
                Some(Some(until)) if now < *until => continue,
                _ => {}
            }
            let Some(setup) = self.setups.get(&alias).cloned() else {
                continue;
            };
            self.lookups.insert(alias.clone(), None);
            futs.push(Box::pin(async move {
                let result = meta::lookup_leaders(&ep, &setup, topics).await;
                Done::Leaders { alias, result }
            }));
        }
    }

    fn start_connections(&mut self, futs: &mut Futs, now: Instant) {
        let mut needed: Vec<(String, String)> = Vec::new();
        for s in self.slots.values() {
            if s.p.wants_fetch(usize::MAX)
                && let Some(a) = &s.source_leader
            {
                needed.push((a.clone(), s.source.alias.clone()));
            }
            if let Some(a) = &s.target_leader
                && !s.p.needs_target_leader
            {
                needed.push((a.clone(), s.target.alias.clone()));
            }
        }
        for (addr, alias) in needed {
            let start = match self.conns.get(&addr) {
                None => true,
                // A connection whose SASL session ends soon is replaced once its requests in
                // flight have finished (`ready_conn` sends nothing new on it meanwhile): a produce
                // on the new connection must not overtake one still in flight on the old.
                Some(Conn::Ready(c)) => {
                    c.is_failed() || (c.should_replace(now) && c.in_flight() == 0)
                }
                Some(Conn::Connecting) => false,
                Some(Conn::Down { until }) => now >= *until,
            };
            if !start {
                continue;
            }
            let Some(setup) = self.setups.get(&alias).cloned() else {
                continue;
            };
            self.conns.insert(addr.clone(), Conn::Connecting);
            futs.push(Box::pin(async move {
                let result = BrokerConn::connect(&addr, &setup).await;
                Done::Connected { addr, result }
            }));
        }
    }

    fn ready_conn(&self, addr: &str, now: Instant) -> Option<BrokerConn> {
        match self.conns.get(addr) {
            Some(Conn::Ready(c)) if !c.is_failed() && !c.should_replace(now) => Some(c.clone()),
            _ => None,
        }
    }

    fn start_fetches(&mut self, futs: &mut Futs, now: Instant) {
        if self.shutdown_since.is_some() {
            return;
        }
        #[derive(Default)]
        struct Group {
            keys: Vec<PartitionKey>,
            any_has_data: bool,
            any_backlogged: bool,
        }
        let mut groups: BTreeMap<(String, FlowId, i8), Group> = BTreeMap::new();
        for (k, s) in &self.slots {
            let cap = (s.p.fetch.partition_max_bytes.max(1) as usize).saturating_mul(2);
            let Some(addr) = &s.source_leader else {
                continue;
            };
            let wants = s.p.wants_fetch(cap);
            let backlogged = s.p.backlogged(cap);
            if !wants && !backlogged {
                continue;
            }
            let g = groups
                .entry((addr.clone(), k.flow, s.p.fetch.isolation_level))
                .or_default();
            if wants {
                g.keys.push(k.clone());
                g.any_has_data |= !s.p.caught_up();
            }
            g.any_backlogged |= backlogged;
        }
        let group_count = groups.len();
        for ((addr, flow, isolation), group) in groups {
            let mut keys = group.keys;
            if keys.is_empty() {
                continue;
            }
            let fkey = FetchKey {
                addr: addr.clone(),
                flow,
                isolation,
            };
            if self.fetching.contains(&fkey) {
                continue;
            }
            let max_wait_ms = self.slots[&keys[0]].p.fetch.max_wait_ms;
            if defer_idle_fetch(
                group.any_has_data,
                group.any_backlogged,
                self.fetch_sent_at.get(&fkey).copied(),
                now,
                max_wait_ms,
            ) {
                continue;
            }
            let Some(conn) = self.ready_conn(&addr, now) else {
                continue;
            };
            let settings = self.slots[&keys[0]].p.fetch;
            let Some(max_bytes) = fetch_room(
                self.cfg.memory_budget_bytes,
                self.in_use.get() + self.reserved,
                settings,
                keys.len(),
                group_count,
            ) else {
                continue; // wait for produced batches to free memory
            };
            // Rotate so that a large batch of a later partition eventually leads a response
            // (the broker returns an oversized batch whole only for the first partition).
            self.rotation = self.rotation.wrapping_add(1);
            let r = self.rotation % keys.len();
            keys.rotate_left(r);
            let mut by_topic: Vec<(Arc<str>, Vec<FetchPartition>)> = Vec::new();
            for k in &keys {
                let p = &self.slots[k].p;
                let fp = FetchPartition::default()
                    .with_partition(k.partition)
                    .with_current_leader_epoch(-1)
                    .with_fetch_offset(p.fetch_offset())
                    .with_last_fetched_epoch(-1)
                    .with_log_start_offset(-1)
                    .with_partition_max_bytes(settings.partition_max_bytes);
                match by_topic.iter_mut().find(|(t, _)| *t == k.topic) {
                    Some((_, v)) => v.push(fp),
                    None => by_topic.push((k.topic.clone(), vec![fp])),
                }
            }
            let req = FetchRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_max_wait_ms(settings.max_wait_ms)
                .with_min_bytes(settings.min_bytes)
                .with_max_bytes(max_bytes as i32)
                .with_isolation_level(isolation)
                .with_session_id(0)
                .with_session_epoch(-1)
                .with_topics(
                    by_topic
                        .into_iter()
                        .map(|(t, ps)| {
                            FetchTopic::default()
                                .with_topic(TopicName(StrBytes::from_string(t.to_string())))
                                .with_partitions(ps)
                        })
                        .collect(),
                );
            let version = match conn.version_for::<FetchRequest>() {
                Ok(v) => v,
                Err(e) => {
                    self.fail_keys(&keys, FailureKind::Other, e.to_string());
                    continue;
                }
            };
            let pending = match conn.try_send(&req, version) {
                Ok(Some(p)) => p,
                Ok(None) => continue,
                Err(_) => {
                    self.conn_down(&addr);
                    continue;
                }
            };
            self.stats.fetch_requests += 1;
            self.fetching.insert(fkey.clone());
            self.fetch_sent_at.insert(fkey.clone(), now);
            self.reserved += max_bytes;
            let broker = addr.clone();
            futs.push(Box::pin(async move {
                let result = async {
                    let resp = pending.wait().await?;
                    let len = resp.body.len();
                    Ok((resp.decode::<FetchRequest>(&broker)?, len))
                }
                .await;
                Done::Fetch {
                    key: fkey,
                    reserved: max_bytes,
                    sent: keys,
                    result,
                }
            }));
        }
    }

    fn start_produces(&mut self, futs: &mut Futs, now: Instant) {
        let mut groups: BTreeMap<(String, FlowId), Vec<PartitionKey>> = BTreeMap::new();
        for (k, s) in &self.slots {
            if let Some(addr) = &s.target_leader
                && s.p.can_send(now)
            {
                groups
                    .entry((addr.clone(), k.flow))
                    .or_default()
                    .push(k.clone());
            }
        }
        for ((addr, flow), keys) in groups {
            let Some(conn) = self.ready_conn(&addr, now) else {
                continue;
            };
            let version = match conn.version_for::<ProduceRequest>() {
                Ok(v) => v,
                Err(e) => {
                    self.fail_keys(&keys, FailureKind::TargetRejected, e.to_string());
                    continue;
                }
            };
            // One batch per partition per request (a protocol rule), so keep building requests
            // while partitions have batches to send: that is what fills each partition's
            // in-flight window within one turn of the loop.
            loop {
                let mut keys: VecDeque<PartitionKey> = keys
                    .iter()
                    .filter(|k| self.slots.get(*k).is_some_and(|s| s.p.can_send(now)))
                    .cloned()
                    .collect();
                if keys.is_empty() {
                    break;
                }
                let in_flight = self
                    .producing
                    .get(&(addr.clone(), flow))
                    .copied()
                    .unwrap_or(0);
                // Check for a free slot before any batch is taken out of its queue: a batch
                // marked sent but never written would only cost a resend round.
                if in_flight >= self.cfg.max_produce_requests_per_broker || !conn.has_capacity() {
                    break;
                }
                let mut topics: Vec<TopicBatches> = Vec::new();
                let mut sent = HashMap::new();
                let mut bytes = 0usize;
                let (mut acks, mut timeout_ms) = (-1i16, 30_000i32);
                while let Some(k) = keys.front().cloned() {
                    let s = self.slots.get_mut(&k).expect("grouped keys exist");
                    if bytes > 0
                        && bytes + s.p.queued_bytes().min(1 << 20)
                            > self.cfg.max_produce_request_bytes
                    {
                        break;
                    }
                    keys.pop_front();
                    let Some((seq, pb)) = s.p.poll_send(now) else {
                        continue;
                    };
                    tracing::trace!(shard = self.cfg.index, partition = %k, seq, "batch into request");
                    acks = s.p.produce.acks;
                    timeout_ms = s.p.produce.timeout_ms;
                    bytes += pb.len();
                    sent.insert((s.p.target_topic.clone(), pb.partition), (k.clone(), seq));
                    match topics.iter_mut().find(|t| *t.topic == *s.p.target_topic) {
                        Some(t) => t.partitions.push(pb),
                        None => topics.push(TopicBatches {
                            topic: s.p.target_topic.to_string(),
                            partitions: vec![pb],
                        }),
                    }
                }
                if sent.is_empty() {
                    break;
                }
                let pending = conn.try_send_encoded(ApiKey::Produce as i16, version, |fb| {
                    encode_produce_body(fb, version, None, acks, timeout_ms, &topics).map_err(|m| {
                        WireError::Protocol {
                            broker: conn.broker().to_string(),
                            api: "Produce",
                            message: m,
                        }
                    })
                });
                let pending = match pending {
                    Ok(Some(p)) => p,
                    other => {
                        // Could not enqueue: the batches were not sent; they will be resent.
                        let err = match other {
                            Err(e) => e,
                            _ => WireError::Closed {
                                broker: addr.clone(),
                                reason: "every in-flight slot of the connection is taken"
                                    .to_string(),
                            },
                        };
                        self.on_produce_result(&addr, sent, Err(err), now);
                        break;
                    }
                };
                tracing::trace!(
                    shard = self.cfg.index,
                    batches = sent.len(),
                    "produce request enqueued"
                );
                self.stats.produce_requests += 1;
                *self.producing.entry((addr.clone(), flow)).or_default() += 1;
                let a = addr.clone();
                futs.push(Box::pin(async move {
                    let result = pending.decode::<ProduceRequest>().await;
                    Done::Produce {
                        addr: a,
                        flow,
                        sent,
                        result,
                    }
                }));
            }
        }
    }

    fn conn_down(&mut self, addr: &str) {
        self.stats.reconnects += 1;
        self.conns.insert(
            addr.to_string(),
            Conn::Down {
                until: Instant::now() + Duration::from_millis(self.cfg.reconnect_backoff_ms),
            },
        );
    }

    fn fail_keys(&mut self, keys: &[PartitionKey], kind: FailureKind, error: String) {
        for k in keys {
            self.report_failure(
                k,
                Failure {
                    kind: kind.clone(),
                    message: error.clone(),
                },
            );
        }
    }

    fn report_failure(&mut self, key: &PartitionKey, f: Failure) {
        let next_offset = self.slots.get(key).map_or(-1, |s| s.p.next_offset());
        tracing::error!(shard = self.cfg.index, partition = %key, error = %f.message, "partition stopped");
        self.emit(ShardEvent::PartitionFailed {
            shard: self.cfg.index,
            key: key.clone(),
            kind: f.kind,
            error: f.message,
            next_offset,
        });
    }

    fn on_done(&mut self, done: Done) {
        let now = Instant::now();
        match done {
            Done::Connected { addr, result } => match result {
                Ok(c) => {
                    self.conns.insert(addr, Conn::Ready(c));
                }
                Err(e) => {
                    tracing::warn!(shard = self.cfg.index, broker = %addr, error = %e, "connect failed");
                    self.conn_down(&addr);
                    // The leader may have moved off a dead broker.
                    for s in self.slots.values_mut() {
                        if s.source_leader.as_deref() == Some(addr.as_str()) {
                            s.source_leader = None;
                            s.p.needs_source_leader = true;
                        }
                        if s.target_leader.as_deref() == Some(addr.as_str()) {
                            s.target_leader = None;
                            s.p.needs_target_leader = true;
                        }
                    }
                }
            },
            Done::Producer { alias, result } => match result {
                Ok((pid, epoch)) => {
                    self.producers
                        .insert(alias.clone(), ProducerId::Ready(pid, epoch));
                    for s in self.slots.values_mut() {
                        if s.target.alias == alias {
                            s.p.set_producer(pid, epoch);
                        }
                    }
                }
                Err(e) => {
                    tracing::warn!(shard = self.cfg.index, cluster = %alias, error = %e, "InitProducerId failed");
                    self.producers.insert(
                        alias,
                        ProducerId::Down {
                            until: now + Duration::from_millis(self.cfg.reconnect_backoff_ms),
                        },
                    );
                }
            },
            Done::Leaders { alias, result } => {
                let backoff = Some(now + Duration::from_millis(self.cfg.leader_lookup_interval_ms));
                match result {
                    Ok(leaders) => {
                        self.lookups.insert(alias.clone(), backoff);
                        for s in self.slots.values_mut() {
                            if s.source.alias == alias
                                && s.p.needs_source_leader
                                && let Some(Some(l)) =
                                    leaders.get(&(s.p.key.topic.to_string(), s.p.key.partition))
                            {
                                s.source_leader = Some(l.clone());
                                s.p.needs_source_leader = false;
                            }
                            if s.target.alias == alias
                                && s.p.needs_target_leader
                                && let Some(Some(l)) =
                                    leaders.get(&(s.p.target_topic.to_string(), s.p.key.partition))
                            {
                                s.target_leader = Some(l.clone());
                                s.p.needs_target_leader = false;
                            }
                        }
                    }
                    Err(e) => {
                        tracing::warn!(shard = self.cfg.index, cluster = %alias, error = %e, "leader lookup failed");
                        self.lookups.insert(alias, backoff);
                    }
                }
            }
            Done::Fetch {
                key,
                reserved,
                sent,
                result,
            } => {
                self.fetching.remove(&key);
                self.reserved = self.reserved.saturating_sub(reserved);
                match result {
                    Ok((resp, frame_len)) => self.on_fetch_response(&key, resp, frame_len),
                    Err(e) => {
                        tracing::warn!(shard = self.cfg.index, broker = %key.addr, error = %e, "fetch failed");
                        self.conn_down(&key.addr);
                        for k in sent {
                            if let Some(s) = self.slots.get_mut(&k) {
                                s.source_leader = None;
                                s.p.needs_source_leader = true;
                            }
                        }
                    }
                }
            }
            Done::Produce {
                addr,
                flow,
                sent,
                result,
            } => {
                if let Some(n) = self.producing.get_mut(&(addr.clone(), flow)) {
                    *n = n.saturating_sub(1);
                }
                if result.is_err() {
                    self.conn_down(&addr);
                }
                self.on_produce_result(&addr, sent, result, now);
            }
        }
    }

    fn on_fetch_response(&mut self, key: &FetchKey, resp: FetchResponse, frame_len: usize) {
        self.stats.fetch_bytes += frame_len as u64;
        let ticket = FrameTicket::new(frame_len, &self.in_use);
        if resp.error_code != 0 {
            tracing::warn!(shard = self.cfg.index, broker = %key.addr, code = resp.error_code, "fetch error");
            return;
        }
        let mut failures = Vec::new();
        for t in resp.responses {
            let topic: &str = t.topic.0.as_str();
            for pd in t.partitions {
                let pk = PartitionKey {
                    flow: key.flow,
                    topic: Arc::from(topic),
                    partition: pd.partition_index,
                };
                let Some(s) = self.slots.get_mut(&pk) else {
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
                };
                match s.p.handle_fetch(data, &ticket, &mut self.stats) {
                    Ok(()) => {
                        if s.p.needs_source_leader {
                            s.source_leader = None;
                        }
                    }
                    Err(f) => failures.push((pk, f)),
                }
            }
        }
        for (k, f) in failures {
            self.report_failure(&k, f);
        }
    }

    fn on_produce_result(
        &mut self,
        addr: &str,
        sent: HashMap<(Arc<str>, i32), (PartitionKey, i32)>,
        result: Result<ProduceResponse, WireError>,
        now: Instant,
    ) {
        let mut outcomes: Vec<(PartitionKey, i32, ProduceOutcome)> = Vec::new();
        match result {
            Err(e) => {
                tracing::warn!(shard = self.cfg.index, broker = %addr, error = %e, "produce failed");
                for (_, (k, seq)) in sent {
                    outcomes.push((
                        k,
                        seq,
                        ProduceOutcome::Lost {
                            reason: e.to_string(),
                        },
                    ));
                }
            }
            Ok(resp) => {
                let mut sent = sent;
                for t in resp.responses {
                    let topic: Arc<str> = Arc::from(t.name.0.as_str());
                    for pr in t.partition_responses {
                        let Some((k, seq)) = sent.remove(&(topic.clone(), pr.index)) else {
                            continue;
                        };
                        let outcome = if pr.error_code == 0 {
                            ProduceOutcome::Appended {
                                base_offset: pr.base_offset,
                            }
                        } else {
                            ProduceOutcome::Error {
                                code: pr.error_code,
                                message: pr.error_message.map(|m| m.to_string()),
                            }
                        };
                        outcomes.push((k, seq, outcome));
                    }
                }
                // Partitions the broker did not mention were not answered: resend them.
                for (_, (k, seq)) in sent {
                    outcomes.push((
                        k,
                        seq,
                        ProduceOutcome::Lost {
                            reason: "missing from the produce response".to_string(),
                        },
                    ));
                }
            }
        }
        let mut failures = Vec::new();
        for (k, seq, outcome) in outcomes {
            tracing::trace!(shard = self.cfg.index, partition = %k, seq, ?outcome, "produce outcome");
            let Some(s) = self.slots.get_mut(&k) else {
                continue;
            };
            match s.p.handle_produced(seq, outcome, now, &mut self.stats) {
                Ok(()) => {
                    if s.p.needs_target_leader {
                        s.target_leader = None;
                    }
                }
                Err(f) => failures.push((k, f)),
            }
        }
        for (k, f) in failures {
            self.report_failure(&k, f);
        }
    }
}

#[cfg(test)]
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
        assert_eq!(fetch_room(64 << 20, 0, s, 1000, 1), Some(50 << 20));
        assert_eq!(fetch_room(64 << 20, 60 << 20, s, 1000, 1), Some(4 << 20));
        assert_eq!(fetch_room(64 << 20, (63 << 20) + 1, s, 1000, 1), None);
        assert_eq!(fetch_room(64 << 20, 80 << 20, s, 1000, 1), None);
        // No more than the partitions can return...
        assert_eq!(fetch_room(64 << 20, 0, s, 4, 1), Some(4 << 20));
        // ...and no more than a fair share, so that another group can fetch meanwhile.
        assert_eq!(fetch_room(48 << 20, 0, s, 1000, 2), Some(24 << 20));
        assert_eq!(fetch_room(48 << 20, 24 << 20, s, 1000, 2), Some(24 << 20));
        assert_eq!(fetch_room(3 << 20, 0, s, 1000, 8), Some(1 << 20));
        // One partition's worth is more than the whole budget: fetch when nothing is held.
        let big = FetchSettings {
            partition_max_bytes: 8 << 20,
            ..s
        };
        assert_eq!(fetch_room(2 << 20, 0, big, 3, 1), Some(2 << 20));
        assert_eq!(fetch_room(2 << 20, 1, big, 3, 1), None);
    }
}
