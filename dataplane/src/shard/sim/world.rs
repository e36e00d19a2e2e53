//! The simulated world: fake clusters, the in-memory transport, the fault schedule and the
//! invariants (see the module above).

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{FetchRequest, FetchResponse, ProduceResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use crate::batch::{BatchBuilder, Compression, RawBatch, Record, decode_records};
use crate::io::IoBackend;
use crate::shard::backoff::Jitter;
use crate::shard::channel::{
    Acks, Assignment, ClusterEndpoint, FetchSettings, IsolationLevel, MappingSegment, PartitionKey,
    PartitionProgress, ProduceSettings, ShardCommand, ShardConfig, ShardEvent, Transactional,
};
use crate::shard::core::{
    Action, BrokerId, ConnInfo, FetchedFrame, Leader, Leaders, ProduceRequestPlan, ProducerIdError,
    RequestId, ShardCore,
};
use crate::shard::partition::ProducerIdentity;
use crate::wire::{ConnConfig, WireError};

const PARTITIONS: usize = 3;
/// The partition forwarded exactly-once (its own transactional producer, sealed for commits
/// at random times); the others use the shard's idempotent producer.
const TXN_PARTITION: usize = PARTITIONS - 1;
/// The transactional producer's id (the shard's idempotent ids count up from 1 001).
const TXN_PID: i64 = 9_000;
/// Batches in each source log; they become visible over time (a producer writing).
const BATCHES: usize = 40;
const TOPIC: &str = "t";
const REMOTE: &str = "A.t";
const FAULT_STEPS: usize = 450;
const REQUEST_TIMEOUT_MS: u64 = 2_000;
const CONNECT_TIMEOUT_MS: u64 = 1_000;
/// A partition without progress for this long, with work to do, must say why.
const STUCK_MS: u64 = 8_000;
/// Once faults end, everything must be replicated within this.
const SETTLE_LIMIT_MS: u64 = 60_000;
const BUDGET: usize = 48 * 1024;
const PARTITION_MAX_BYTES: i32 = 4096;
const MAX_IN_FLIGHT_REQUESTS: usize = 5;
const TRACE_LINES: usize = 300;

/// One source partition's log: its batches back to back in `bytes`, and each batch's
/// `(base offset, next offset, range in bytes)`. Fetch answers are slices of `bytes`, so a
/// forwarded batch's payload points into it and the fake target finds its offsets without
/// decoding it.
struct SourceLog {
    bytes: Bytes,
    batches: Vec<(i64, i64, std::ops::Range<usize>)>,
    largest_batch: usize,
}

impl SourceLog {
    /// The source offsets of a forwarded batch whose payload is a slice of this log.
    fn offsets_of(&self, payload: &Bytes) -> Option<(i64, i64)> {
        let start = (payload.as_ptr() as usize).checked_sub(self.bytes.as_ptr() as usize)?;
        let head = start.checked_sub(crate::batch::HEADER_LEN)?;
        let i = self
            .batches
            .binary_search_by_key(&head, |b| b.2.start)
            .ok()?;
        let (base, next, range) = &self.batches[i];
        (range.end == start + payload.len()).then_some((*base, *next))
    }
}

/// The source logs, built once for every seed: records `offset:padding`, 1 to 4 per batch,
/// partition 1 LZ4-compressed.
fn source_logs() -> &'static [SourceLog] {
    static LOGS: OnceLock<Vec<SourceLog>> = OnceLock::new();
    LOGS.get_or_init(|| {
        (0..PARTITIONS)
            .map(|p| {
                let codec = if p == 1 {
                    Compression::Lz4
                } else {
                    Compression::None
                };
                let mut next = 0i64;
                let mut batches = Vec::new();
                let mut bytes = BytesMut::new();
                let mut largest = 0;
                for i in 0..BATCHES {
                    let n = 1 + (i * 7 + p * 3) % 4;
                    let records: Vec<Record> = (0..n)
                        .map(|j| {
                            let off = next + j as i64;
                            let pad = "x".repeat((off as usize * 37 + p * 11) % 300);
                            Record::new(
                                1_000 + off,
                                None,
                                Some(Bytes::from(format!("{off}:{pad}"))),
                            )
                        })
                        .collect();
                    let b = BatchBuilder::new(codec)
                        .base_offset(next)
                        .push_all(&records)
                        .expect("records fit")
                        .build()
                        .expect("a valid batch");
                    largest = largest.max(b.len());
                    let at = bytes.len();
                    bytes.extend_from_slice(&b);
                    batches.push((next, next + n as i64, at..bytes.len()));
                    next += n as i64;
                }
                SourceLog {
                    bytes: bytes.freeze(),
                    batches,
                    largest_batch: largest,
                }
            })
            .collect()
    })
}

/// What the idempotent target remembers of one producer on one partition.
#[derive(Default)]
struct ProducerEntry {
    epoch: i16,
    last_seq: i32,
    /// `(first seq, last seq, base offset)` of its last 5 batches.
    retained: VecDeque<(i32, i32, i64)>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum ReplicaFault {
    /// NOT_ENOUGH_REPLICAS: refused, nothing written.
    Before,
    /// NOT_ENOUGH_REPLICAS_AFTER_APPEND: written, then the error.
    After,
}

struct TargetPart {
    leader: usize,
    /// Source offset of each target offset.
    log: Vec<i64>,
    producers: HashMap<i64, ProducerEntry>,
    fault: Option<(ReplicaFault, Instant)>,
}

struct SimBroker {
    addr: String,
    down_until: Instant,
    hole_until: Instant,
    slow_until: Instant,
    slow_ms: u64,
    /// Fetch sessions by id (KIP-227), lost when the broker crashes.
    sessions: HashMap<i32, SimSession>,
}

/// A fetch session as a Kafka broker keeps it: what the last requests asked of each partition
/// and the high watermark last answered, in the broker's order (partitions answered with
/// records move to the back).
struct SimSession {
    epoch: i32,
    parts: Vec<SessionPart>,
}

#[derive(Clone)]
struct SessionPart {
    topic: TopicName,
    partition: i32,
    fetch_offset: i64,
    max_bytes: i32,
    /// The high watermark last answered (-1: none, or an error since).
    hw: i64,
}

enum Req {
    Fetch(Box<FetchRequest>),
    Produce(ProduceRequestPlan),
}

struct SimConn {
    generation: u32,
    wire: VecDeque<(RequestId, Req)>,
}

enum Completion {
    Connected {
        broker: BrokerId,
        generation: u32,
        result: Result<ConnInfo, WireError>,
    },
    Fetch(RequestId, Result<FetchedFrame, WireError>),
    Produce(RequestId, Result<ProduceResponse, WireError>),
    Leaders(RequestId, Result<Leaders, WireError>),
    ProducerId(RequestId, Result<ProducerIdentity, ProducerIdError>),
}

struct Ready {
    at: Instant,
    /// The connection it came on, for faults that lose answers in transit.
    conn: Option<(BrokerId, u32)>,
    completion: Completion,
}

#[derive(Default, Clone, Copy)]
struct PartView {
    next: i64,
    fetched: i64,
    changed_at_ms: u64,
    paused_until: Option<Instant>,
    revoking: bool,
    /// The last report of the partition named a stall (a report carries only partitions whose
    /// progress changed: the view holds what control would know).
    stalled: bool,
}

/// The result of one seed.
#[derive(Debug, Default)]
pub struct Outcome {
    pub failure: Option<String>,
    pub trace: String,
    pub steps: usize,
    faults: u64,
    reassignments: u64,
    lapses: u64,
    stalls_seen: u64,
    produce_retries: u64,
    reconnects: u64,
    timeouts: u64,
    /// Partitions fetched with more than the configured size (their ask grew).
    grown_asks: u64,
    /// Exactly-once commit cycles of the transactional partition (sealed, settled, unsealed).
    commits: u64,
    /// Incremental fetches answered, and fetch sessions refused (cache full), evicted or
    /// answered with a wrong epoch.
    incremental_fetches: u64,
    session_faults: u64,
}

/// Totals over seeds, to show the schedules exercise what they claim.
#[derive(Debug, Default)]
pub struct Totals {
    pub faults: u64,
    pub reassignments: u64,
    pub lapses: u64,
    pub stalls_seen: u64,
    pub produce_retries: u64,
    pub reconnects: u64,
    pub timeouts: u64,
    pub grown_asks: u64,
    pub commits: u64,
    pub incremental_fetches: u64,
    pub session_faults: u64,
}

impl Totals {
    pub fn merge(&mut self, o: &Totals) {
        self.faults += o.faults;
        self.reassignments += o.reassignments;
        self.lapses += o.lapses;
        self.stalls_seen += o.stalls_seen;
        self.produce_retries += o.produce_retries;
        self.reconnects += o.reconnects;
        self.timeouts += o.timeouts;
        self.grown_asks += o.grown_asks;
        self.commits += o.commits;
        self.incremental_fetches += o.incremental_fetches;
        self.session_faults += o.session_faults;
    }

    pub fn add(&mut self, o: &Outcome) {
        self.faults += o.faults;
        self.reassignments += o.reassignments;
        self.lapses += o.lapses;
        self.stalls_seen += o.stalls_seen;
        self.produce_retries += o.produce_retries;
        self.reconnects += o.reconnects;
        self.timeouts += o.timeouts;
        self.grown_asks += o.grown_asks;
        self.commits += o.commits;
        self.incremental_fetches += o.incremental_fetches;
        self.session_faults += o.session_faults;
    }
}

impl fmt::Display for Totals {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} faults, {} reassignments, {} lapses, {} stalled reports, {} produce retries, {} reconnects, {} request timeouts, {} grown fetch asks, {} commits, {} incremental fetches, {} fetch session faults",
            self.faults,
            self.reassignments,
            self.lapses,
            self.stalls_seen,
            self.produce_retries,
            self.reconnects,
            self.timeouts,
            self.grown_asks,
            self.commits,
            self.incremental_fetches,
            self.session_faults
        )
    }
}

/// Where the transactional partition's commit cycle stands, as control would drive it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TxnView {
    /// Sending into the open transaction.
    Open,
    /// Seal sent; waiting for Sealed.
    Sealing,
    /// Sealed reported; the commit takes until then (nothing may be sent meanwhile).
    Committing { until: Instant },
}

pub struct World {
    rng: Jitter,
    t0: Instant,
    now: Instant,
    core: ShardCore,
    src_ep: Arc<ClusterEndpoint>,
    tgt_ep: Arc<ClusterEndpoint>,
    /// Source leader of each partition (index into `brokers`, 0..2), and until when it has none.
    src_leader: Vec<usize>,
    src_unknown_until: Vec<Instant>,
    tgt_unknown_until: Vec<Instant>,
    tgt: Vec<TargetPart>,
    /// s0, s1 (source), t0, t1 (target).
    brokers: Vec<SimBroker>,
    addr_of: HashMap<BrokerId, usize>,
    conns: HashMap<BrokerId, SimConn>,
    ready: Vec<Ready>,
    views: Vec<PartView>,
    refuse_next_report: bool,
    /// While the shard's lease has ended (a group member's session lapsed): renewed at this
    /// time once every partition has been revoked and assigned again.
    lapsed_until: Option<Instant>,
    next_pid: i64,
    next_session_id: i32,
    /// The transactional partition's producer epoch: each assignment gets the next, as
    /// control's InitProducerId (which fences the previous holder) gives.
    txn_epoch: i16,
    txn: TxnView,
    trace: VecDeque<String>,
    /// Whether to keep the trace: off for the bulk run (a failing seed runs again with it).
    tracing: bool,
    out: Outcome,
}

impl World {
    pub fn new(seed: u64, tracing: bool) -> Self {
        let t0 = Instant::now();
        let endpoint = |alias: &str, names: [&str; 2]| {
            Arc::new(ClusterEndpoint {
                alias: alias.into(),
                bootstrap: names.iter().map(|n| format!("{n}:9092")).collect(),
                config: ConnConfig {
                    request_timeout_ms: REQUEST_TIMEOUT_MS,
                    connect_timeout_ms: CONNECT_TIMEOUT_MS,
                    max_in_flight_requests: MAX_IN_FLIGHT_REQUESTS,
                    ..ConnConfig::default()
                },
                tls: None,
            })
        };
        let mut cfg = ShardConfig::new(0, IoBackend::Epoll);
        cfg.memory_budget_bytes = BUDGET;
        cfg.max_produce_request_bytes = 16 * 1024;
        // Small, so that the bound on queued events is reached.
        cfg.max_pending_events = 2;
        let brokers = ["s0", "s1", "t0", "t1"]
            .iter()
            .map(|n| SimBroker {
                addr: format!("{n}:9092"),
                down_until: t0,
                hole_until: t0,
                slow_until: t0,
                slow_ms: 0,
                sessions: HashMap::new(),
            })
            .collect();
        let mut w = World {
            rng: Jitter::new(seed.wrapping_mul(0x2545_f491_4f6c_dd1d)),
            t0,
            now: t0,
            core: ShardCore::new(cfg, t0, seed),
            src_ep: endpoint("src", ["s0", "s1"]),
            tgt_ep: endpoint("tgt", ["t0", "t1"]),
            src_leader: (0..PARTITIONS).map(|p| p % 2).collect(),
            src_unknown_until: vec![t0; PARTITIONS],
            tgt_unknown_until: vec![t0; PARTITIONS],
            tgt: (0..PARTITIONS)
                .map(|p| TargetPart {
                    leader: 2 + (p + 1) % 2,
                    log: Vec::new(),
                    producers: HashMap::new(),
                    fault: None,
                })
                .collect(),
            brokers,
            addr_of: HashMap::new(),
            conns: HashMap::new(),
            ready: Vec::new(),
            views: vec![PartView::default(); PARTITIONS],
            refuse_next_report: false,
            lapsed_until: None,
            next_pid: 1_000,
            next_session_id: 0,
            txn_epoch: 0,
            txn: TxnView::Open,
            trace: VecDeque::new(),
            tracing,
            out: Outcome::default(),
        };
        for p in 0..PARTITIONS {
            w.assign(p, 0);
        }
        w
    }

    fn key(p: usize) -> PartitionKey {
        PartitionKey::new(0, TOPIC, p as i32)
    }

    fn assign(&mut self, p: usize, start: i64) {
        let a = Assignment {
            key: Self::key(p),
            source: self.src_ep.clone(),
            target: self.tgt_ep.clone(),
            target_topic: Arc::from(REMOTE),
            start_offset: start,
            start_leader_epoch: -1,
            start_target_offset: -1,
            max_message_bytes: 1 << 20,
            fetch: FetchSettings {
                isolation_level: IsolationLevel::ReadCommitted,
                max_bytes: 16 * 1024,
                partition_max_bytes: PARTITION_MAX_BYTES,
                ..FetchSettings::default()
            },
            produce: ProduceSettings {
                acks: Acks::All,
                timeout_ms: REQUEST_TIMEOUT_MS as i32,
                delivery_timeout_ms: 60_000,
                ..ProduceSettings::default()
            },
            transactional: (p == TXN_PARTITION).then(|| Transactional {
                transactional_id: Arc::from(format!("strait-eos:src->tgt:{TOPIC}:{p}")),
                producer: ProducerIdentity {
                    id: TXN_PID,
                    epoch: self.txn_epoch,
                },
            }),
            // Control's leader: none for every third partition (the shard looks it up), the
            // one the source names now, or the other broker (stale by the time it arrives).
            source_leader: match p % 3 {
                0 => None,
                n => {
                    let now = self.src_leader[p];
                    let b = if n == 1 { now } else { 1 - now };
                    Some(Leader {
                        addr: self.brokers[b].addr.clone(),
                        epoch: -1,
                    })
                }
            },
        };
        if p == TXN_PARTITION {
            self.txn_epoch += 1;
            self.txn = TxnView::Open;
        }
        self.core
            .handle_command(ShardCommand::Assign(Box::new(a)), self.now);
    }

    fn ms(&self) -> u64 {
        self.now.duration_since(self.t0).as_millis() as u64
    }

    fn log(&mut self, line: impl FnOnce() -> String) {
        if !self.tracing {
            return;
        }
        if self.trace.len() == TRACE_LINES {
            self.trace.pop_front();
        }
        let l = format!("{:>7} ms  {}", self.ms(), line());
        self.trace.push_back(l);
    }

    fn fail(&mut self, why: String) {
        if self.out.failure.is_none() {
            self.out.failure = Some(why);
        }
    }

    fn pick(&mut self, n: usize) -> usize {
        (self.rng.next_u64() % n.max(1) as u64) as usize
    }

    fn chance(&mut self, one_in: u64) -> bool {
        self.rng.next_u64().is_multiple_of(one_in)
    }

    fn between_ms(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(lo + self.rng.next_u64() % (hi - lo + 1))
    }

    /// How many batches of each source log exist now (a producer keeps writing for ~4 s).
    fn visible_batches(&self) -> usize {
        (5 + self.ms() as usize / 120).min(BATCHES)
    }

    fn source_end(&self, p: usize) -> i64 {
        source_logs()[p].batches[self.visible_batches() - 1].1
    }

    pub fn run(mut self) -> Outcome {
        for step in 0..FAULT_STEPS {
            self.out.steps = step;
            self.step(true);
            if self.out.failure.is_some() {
                return self.finish();
            }
        }
        self.settle();
        self.finish()
    }

    fn finish(mut self) -> Outcome {
        let stats = self.core_stats();
        self.out.produce_retries = stats.0;
        self.out.reconnects = stats.1;
        self.out.timeouts = stats.2;
        self.out.trace = self.trace.iter().cloned().collect::<Vec<_>>().join("\n");
        self.out
    }

    fn core_stats(&mut self) -> (u64, u64, u64) {
        // The last report's counters, read through one more report.
        self.core
            .handle_timers(self.now + Duration::from_secs(3600));
        let mut out = (0, 0, 0);
        while let Some(ev) = self.core.poll_event() {
            if let ShardEvent::Report { stats, .. } = ev {
                out = (
                    stats.produce_retries,
                    stats.reconnects,
                    stats.request_timeouts,
                );
            }
        }
        out
    }

    /// Control's side of the commit cycle: seal at random times, unseal once the commit took
    /// its time. A revoked partition's cycle ends with it (its next assignment starts open).
    fn commit_cycle(&mut self) {
        let p = TXN_PARTITION;
        let seal_now = self.chance(40);
        match self.txn {
            TxnView::Open if !self.views[p].revoking && seal_now => {
                self.txn = TxnView::Sealing;
                self.core
                    .handle_command(ShardCommand::Seal(Self::key(p)), self.now);
                self.log(|| format!("seal p{p}"));
            }
            TxnView::Committing { until } if self.now >= until => {
                self.txn = TxnView::Open;
                self.out.commits += 1;
                // Half the commits as KIP-890 part 2 ends them: the next transaction under a
                // new epoch, its sequences from 0 (the broker model refuses anything else).
                if self.chance(2) {
                    self.txn_epoch += 1;
                    // The commit's marker, written with the new epoch, moves the partition's
                    // producer to it: the old epoch is refused from then on.
                    if let Some(e) = self.tgt[p].producers.get_mut(&TXN_PID) {
                        e.epoch = self.txn_epoch - 1;
                        e.last_seq = -1;
                        e.retained.clear();
                    }
                }
                self.core.handle_command(
                    ShardCommand::Unseal {
                        key: Self::key(p),
                        producer: ProducerIdentity {
                            id: TXN_PID,
                            epoch: self.txn_epoch - 1,
                        },
                    },
                    self.now,
                );
                self.log(|| format!("unseal p{p}"));
            }
            _ => {}
        }
    }

    fn step(&mut self, faults: bool) {
        self.perform();
        self.events();
        self.commit_cycle();
        self.check_memory();
        let roll = self.pick(20);
        match roll {
            0..=6 => self.process_one(),
            7..=13 => {
                self.deliver_one();
            }
            14..=17 => {
                let d = if self.chance(10) {
                    self.between_ms(200, 1_000)
                } else {
                    self.between_ms(1, 60)
                };
                self.advance(d);
            }
            _ if faults => self.fault(),
            _ => self.advance(Duration::from_millis(5)),
        }
    }

    /// Lifts every fault, then runs fairly until everything visible is replicated.
    fn settle(&mut self) {
        let end_faults = self.now;
        for b in &mut self.brokers {
            b.down_until = end_faults;
            b.hole_until = end_faults;
            b.slow_until = end_faults;
        }
        for t in &mut self.tgt {
            t.fault = None;
        }
        self.src_unknown_until.fill(end_faults);
        self.tgt_unknown_until.fill(end_faults);
        self.log(|| "faults end".to_string());
        let start = self.now;
        loop {
            self.out.steps += 1;
            self.perform();
            self.events();
            self.commit_cycle();
            self.check_memory();
            while !self.conns.values().all(|c| c.wire.is_empty()) {
                self.process_one();
            }
            while self.deliver_one() {}
            // Jump to the next answer due, or the next tick.
            let tick = self.now + Duration::from_millis(25);
            let next = self
                .ready
                .iter()
                .map(|r| r.at)
                .min()
                .unwrap_or(tick)
                .min(tick);
            self.advance(
                next.saturating_duration_since(self.now)
                    .max(Duration::from_millis(1)),
            );
            if self.out.failure.is_some() {
                return;
            }
            let done = (0..PARTITIONS).all(|p| {
                let end = self.source_end(p);
                self.tgt[p].log.len() as i64 == end && self.views[p].next == end
            });
            if done && self.visible_batches() == BATCHES {
                return;
            }
            if self.now.duration_since(start) > Duration::from_millis(SETTLE_LIMIT_MS) {
                let progress = self.core.progress();
                let status: Vec<String> = progress
                    .iter()
                    .map(|p| {
                        format!(
                            "{}: next {} of {}, stall {:?}",
                            p.key,
                            p.next_offset,
                            self.source_end(p.key.partition as usize),
                            p.stall.as_ref().map(|s| (s.reason, s.detail.clone()))
                        )
                    })
                    .collect();
                self.fail(format!(
                    "not replicated {SETTLE_LIMIT_MS} ms after the faults ended: {}",
                    status.join("; ")
                ));
                return;
            }
        }
    }

    fn advance(&mut self, d: Duration) {
        self.now += d;
        if self.lapsed_until.is_some_and(|t| self.now >= t)
            && self.views.iter().all(|v| !v.revoking)
        {
            self.lapsed_until = None;
            self.core.handle_command(
                ShardCommand::Lease {
                    produce_until: self.now + Duration::from_secs(3_600),
                },
                self.now,
            );
            self.log(|| "lease renewed".to_string());
        }
        for p in 0..PARTITIONS {
            if self.views[p].paused_until.is_some_and(|t| self.now >= t) {
                self.views[p].paused_until = None;
                // Time paused is not time stuck.
                self.views[p].changed_at_ms = self.ms();
                self.core
                    .handle_command(ShardCommand::Resume(Self::key(p)), self.now);
                self.log(|| format!("resume p{p}"));
            }
        }
        self.core.handle_timers(self.now);
    }

    // ---- the driver: performing the core's actions over the in-memory transport ----

    fn perform(&mut self) {
        while let Some(a) = self.core.poll_action(self.now) {
            match a {
                Action::Connect {
                    broker,
                    generation,
                    addr,
                    ..
                } => {
                    self.log(|| format!("connect {broker:?}/{generation} {addr}"));
                    self.connect(broker, generation, &addr);
                }
                Action::Disconnect { broker, generation } => {
                    if self
                        .conns
                        .get(&broker)
                        .is_some_and(|c| c.generation == generation)
                    {
                        self.log(|| format!("core drops conn {broker:?}/{generation}"));
                        self.drop_conn(broker, false);
                    }
                }
                Action::LookupLeaders {
                    id,
                    cluster,
                    topics,
                } => {
                    let alias = self.core.endpoint(cluster).alias.clone();
                    let result = self.lookup(&alias, &topics);
                    self.answer_later(Completion::Leaders(id, result));
                }
                Action::InitProducerId { id, .. } => {
                    let result = self.init_producer_id();
                    self.answer_later(Completion::ProducerId(id, result));
                }
                Action::Fetch {
                    id,
                    broker,
                    request,
                } => {
                    self.log(|| {
                        let named: Vec<i32> = request
                            .topics
                            .iter()
                            .flat_map(|t| t.partitions.iter().map(|p| p.partition))
                            .collect();
                        let forgotten: Vec<i32> = request
                            .forgotten_topics_data
                            .iter()
                            .flat_map(|t| t.partitions.iter().copied())
                            .collect();
                        format!(
                            "send fetch {id:?} on {broker:?}: session {}/{}, {named:?}, forget {forgotten:?}",
                            request.session_id, request.session_epoch
                        )
                    });
                    self.send(broker, id, Req::Fetch(request));
                }
                Action::Produce {
                    id,
                    broker,
                    request,
                } => {
                    if self.lapsed_until.is_some() {
                        self.fail(format!("produce {id:?} sent after the lease ended"));
                    }
                    self.log(|| format!("send produce {id:?} on {broker:?}: {}", seqs(&request)));
                    self.send(broker, id, Req::Produce(request));
                }
            }
        }
    }

    /// An answer that does not travel on a shard connection, due in a few ms.
    fn answer_later(&mut self, completion: Completion) {
        let at = self.now + self.between_ms(1, 20);
        self.ready.push(Ready {
            at,
            conn: None,
            completion,
        });
    }

    fn init_producer_id(&mut self) -> Result<ProducerIdentity, ProducerIdError> {
        if self.cluster_down(2) {
            return Err(ProducerIdError::Wire(refused("t0:9092")));
        }
        self.next_pid += 1;
        Ok(ProducerIdentity {
            id: self.next_pid,
            epoch: 0,
        })
    }

    fn broker_index(&self, addr: &str) -> usize {
        self.brokers
            .iter()
            .position(|b| b.addr == addr)
            .expect("a simulated broker")
    }

    fn cluster_down(&self, first: usize) -> bool {
        (first..first + 2).all(|i| self.now < self.brokers[i].down_until)
    }

    fn connect(&mut self, broker: BrokerId, generation: u32, addr: &str) {
        let b = self.broker_index(addr);
        self.addr_of.insert(broker, b);
        if self.now < self.brokers[b].hole_until {
            self.log(|| format!("connect {addr}/{generation}: black hole"));
            return; // never completes: the core's deadline must notice
        }
        let result = if self.now < self.brokers[b].down_until {
            Err(refused(addr))
        } else {
            let replace_at = self
                .chance(10)
                .then(|| self.now + Duration::from_millis(1_500));
            Ok(ConnInfo {
                max_in_flight: MAX_IN_FLIGHT_REQUESTS,
                replace_at,
            })
        };
        let at = self.now + self.between_ms(1, 10);
        self.ready.push(Ready {
            at,
            conn: None,
            completion: Completion::Connected {
                broker,
                generation,
                result,
            },
        });
    }

    fn send(&mut self, broker: BrokerId, id: RequestId, req: Req) {
        let Some(conn) = self.conns.get_mut(&broker) else {
            let err = WireError::Closed {
                broker: format!("{broker:?}"),
                reason: "no connection".into(),
            };
            match req {
                Req::Fetch(_) => self.core.handle_fetch_response(id, Err(err), self.now),
                Req::Produce(_) => self.core.handle_produce_response(id, Err(err), self.now),
            }
            return;
        };
        conn.wire.push_back((id, req));
        let generation = conn.generation;
        let in_flight = conn.wire.len()
            + self
                .ready
                .iter()
                .filter(|r| r.conn == Some((broker, generation)))
                .count();
        if in_flight > MAX_IN_FLIGHT_REQUESTS {
            self.fail(format!(
                "the core put {in_flight} requests in flight on {broker:?}, over its bound of {MAX_IN_FLIGHT_REQUESTS}"
            ));
        }
    }

    /// A connection breaks: what was on the wire fails; answers already on their way are lost
    /// with `lose_answers` (the broker may have acted on them).
    fn drop_conn(&mut self, broker: BrokerId, lose_answers: bool) {
        let Some(conn) = self.conns.remove(&broker) else {
            return;
        };
        let err = || WireError::Closed {
            broker: format!("{broker:?}"),
            reason: "connection dropped".into(),
        };
        for (id, req) in conn.wire {
            let completion = match req {
                Req::Fetch(_) => Completion::Fetch(id, Err(err())),
                Req::Produce(_) => Completion::Produce(id, Err(err())),
            };
            self.ready.push(Ready {
                at: self.now,
                conn: None,
                completion,
            });
        }
        if lose_answers {
            for i in 0..self.ready.len() {
                if self.ready[i].conn == Some((broker, conn.generation)) && self.chance(2) {
                    let r = &mut self.ready[i];
                    r.conn = None;
                    r.completion = match &r.completion {
                        Completion::Fetch(id, _) => Completion::Fetch(*id, Err(err())),
                        Completion::Produce(id, _) => Completion::Produce(*id, Err(err())),
                        _ => continue,
                    };
                }
            }
        }
    }

    /// The broker at the head of some connection's queue answers it.
    fn process_one(&mut self) {
        let mut candidates: Vec<BrokerId> = self
            .conns
            .iter()
            .filter(|(b, c)| {
                !c.wire.is_empty() && self.now >= self.brokers[self.addr_of[b]].hole_until
            })
            .map(|(b, _)| *b)
            .collect();
        if candidates.is_empty() {
            return;
        }
        candidates.sort_unstable();
        let broker = candidates[self.pick(candidates.len())];
        let b = self.addr_of[&broker];
        let conn = self.conns.get_mut(&broker).expect("a candidate");
        let generation = conn.generation;
        let (id, req) = conn.wire.pop_front().expect("not empty");
        let mut latency = self.between_ms(0, 5);
        if self.now < self.brokers[b].slow_until {
            latency += Duration::from_millis(self.brokers[b].slow_ms);
        }
        let completion = match req {
            Req::Fetch(r) => {
                let (frame, empty) = self.fetch(b, &r);
                if empty {
                    latency += Duration::from_millis(r.max_wait_ms as u64);
                }
                Completion::Fetch(id, Ok(frame))
            }
            Req::Produce(plan) => Completion::Produce(id, Ok(self.produce(b, &plan))),
        };
        self.ready.push(Ready {
            at: self.now + latency,
            conn: Some((broker, generation)),
            completion,
        });
    }

    /// Hands one due answer to the core: usually the oldest, sometimes another (completions
    /// may come in any order). Returns whether there was one.
    fn deliver_one(&mut self) -> bool {
        let due: Vec<usize> = (0..self.ready.len())
            .filter(|i| self.ready[*i].at <= self.now)
            .collect();
        if due.is_empty() {
            return false;
        }
        let i = if self.chance(3) {
            due[self.pick(due.len())]
        } else {
            *due.iter()
                .min_by_key(|i| self.ready[**i].at)
                .expect("not empty")
        };
        let r = self.ready.remove(i);
        let now = self.now;
        let what = match &r.completion {
            Completion::Connected {
                broker,
                generation,
                result,
            } => format!("connected {broker:?}/{generation}: {}", result.is_ok()),
            Completion::Fetch(id, r) => match r {
                Ok(f) => {
                    let parts: Vec<(i32, i16, usize)> = f
                        .response
                        .responses
                        .iter()
                        .flat_map(|t| t.partitions.iter())
                        .map(|p| {
                            let bytes = p.records.as_ref().map_or(0, Bytes::len);
                            (p.partition_index, p.error_code, bytes)
                        })
                        .collect();
                    format!(
                        "fetch {id:?} answered: error {}, session {}, {parts:?}",
                        f.response.error_code, f.response.session_id
                    )
                }
                Err(e) => format!("fetch {id:?} failed: {e}"),
            },
            Completion::Produce(id, r) => format!(
                "produce {id:?} answered: {}",
                r.as_ref()
                    .map(|_| "ok".to_string())
                    .unwrap_or_else(|e| e.to_string())
            ),
            Completion::Leaders(id, r) => format!("leaders {id:?}: {}", r.is_ok()),
            Completion::ProducerId(id, r) => format!("producer id {id:?}: {}", r.is_ok()),
        };
        self.log(|| what);
        match r.completion {
            Completion::Connected {
                broker,
                generation,
                result,
            } => {
                let ok = result.is_ok();
                if self.core.handle_connected(broker, generation, result, now) && ok {
                    self.conns.insert(
                        broker,
                        SimConn {
                            generation,
                            wire: VecDeque::new(),
                        },
                    );
                }
            }
            Completion::Fetch(id, result) => self.core.handle_fetch_response(id, result, now),
            Completion::Produce(id, result) => self.core.handle_produce_response(id, result, now),
            Completion::Leaders(id, result) => self.core.handle_leaders(id, result, now),
            Completion::ProducerId(id, result) => self.core.handle_producer_id(id, result, now),
        }
        true
    }

    // ---- the fake brokers ----

    fn lookup(&mut self, alias: &str, topics: &[Arc<str>]) -> Result<Leaders, WireError> {
        let first = if alias == "src" { 0 } else { 2 };
        if self.cluster_down(first) {
            return Err(refused(&self.brokers[first].addr));
        }
        let mut out = Leaders::new();
        for t in topics {
            for p in 0..PARTITIONS {
                let (leader, unknown) = if &**t == TOPIC {
                    (self.src_leader[p], self.src_unknown_until[p])
                } else {
                    (self.tgt[p].leader, self.tgt_unknown_until[p])
                };
                let leader = (self.now >= unknown).then(|| Leader {
                    addr: self.brokers[leader].addr.clone(),
                    epoch: -1,
                });
                out.insert((t.to_string(), p as i32), leader);
            }
        }
        Ok(out)
    }

    /// A Fetch: a full one reads every partition it names, an incremental one every partition
    /// of its session and answers only those with something new (records, a new high
    /// watermark, an error), as a Kafka broker does.
    fn fetch(&mut self, b: usize, req: &FetchRequest) -> (FetchedFrame, bool) {
        let (session_id, parts, incremental) = match self.fetch_context(b, req) {
            Ok(c) => c,
            Err(code) => {
                let response = FetchResponse::default().with_error_code(code);
                let frame = FetchedFrame {
                    response,
                    frame_bytes: 1,
                };
                return (frame, false);
            }
        };
        for t in &req.topics {
            for fp in &t.partitions {
                self.check_ask(fp.partition_max_bytes);
            }
        }
        let mut budget = req.max_bytes.max(0) as usize;
        let mut first = true;
        let mut frame_bytes = 0;
        let mut any_data = false;
        let mut topics: Vec<FetchableTopicResponse> = Vec::new();
        let mut answered = Vec::new();
        for sp in &parts {
            let pd = self.read_partition(b, sp, &mut budget, &mut first);
            let bytes = pd.records.as_ref().map_or(0, Bytes::len);
            let hw = if pd.error_code == 0 {
                pd.high_watermark
            } else {
                -1
            };
            if incremental && bytes == 0 && pd.error_code == 0 && hw == sp.hw {
                continue; // nothing new: left out of an incremental answer
            }
            any_data |= bytes > 0;
            frame_bytes += bytes;
            answered.push((sp.partition, hw, bytes > 0));
            match topics.iter_mut().find(|t| t.topic == sp.topic) {
                Some(t) => t.partitions.push(pd),
                None => topics.push(
                    FetchableTopicResponse::default()
                        .with_topic(sp.topic.clone())
                        .with_partitions(vec![pd]),
                ),
            }
        }
        if let Some(s) = self.brokers[b].sessions.get_mut(&session_id) {
            for (p, hw, records) in answered {
                let Some(i) = s.parts.iter().position(|x| x.partition == p) else {
                    continue;
                };
                s.parts[i].hw = hw;
                if records {
                    let moved = s.parts.remove(i);
                    s.parts.push(moved);
                }
            }
        }
        let response = FetchResponse::default()
            .with_session_id(session_id)
            .with_responses(topics);
        (
            FetchedFrame {
                response,
                frame_bytes: frame_bytes.max(1),
            },
            !any_data,
        )
    }

    /// The session a Fetch runs in (KIP-227): its id (0: none), the partitions to read and
    /// whether it is incremental; or the top-level error that refuses it. Sometimes the cache
    /// is full (no session), a session is evicted, or an epoch is refused.
    fn fetch_context(
        &mut self,
        b: usize,
        req: &FetchRequest,
    ) -> Result<(i32, Vec<SessionPart>, bool), i16> {
        let named: Vec<SessionPart> = req
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions.iter().map(|fp| SessionPart {
                    topic: t.topic.clone(),
                    partition: fp.partition,
                    fetch_offset: fp.fetch_offset,
                    max_bytes: fp.partition_max_bytes,
                    hw: -1,
                })
            })
            .collect();
        if req.session_epoch <= 0 {
            // Epoch 0 closes the session named and opens a new one; -1 asks for none.
            self.brokers[b].sessions.remove(&req.session_id);
            if req.session_epoch < 0 {
                return Ok((0, named, false));
            }
            if self.chance(12) {
                self.out.session_faults += 1;
                self.log(|| "fetch session cache full".into());
                return Ok((0, named, false));
            }
            self.next_session_id += 1;
            let id = self.next_session_id;
            let session = SimSession {
                epoch: 1,
                parts: named.clone(),
            };
            self.brokers[b].sessions.insert(id, session);
            return Ok((id, named, false));
        }
        if self.chance(30) {
            self.out.session_faults += 1;
            self.log(|| format!("fetch session {} evicted", req.session_id));
            self.brokers[b].sessions.remove(&req.session_id);
        }
        let skew = self.chance(40);
        let Some(s) = self.brokers[b].sessions.get_mut(&req.session_id) else {
            return Err(70); // FETCH_SESSION_ID_NOT_FOUND
        };
        if skew || s.epoch != req.session_epoch {
            self.out.session_faults += u64::from(skew);
            return Err(71); // INVALID_FETCH_SESSION_EPOCH
        }
        s.epoch = if s.epoch == i32::MAX { 1 } else { s.epoch + 1 };
        for n in named {
            match s
                .parts
                .iter_mut()
                .find(|x| x.partition == n.partition && x.topic == n.topic)
            {
                Some(x) => {
                    x.fetch_offset = n.fetch_offset;
                    x.max_bytes = n.max_bytes;
                }
                None => s.parts.push(n),
            }
        }
        for t in &req.forgotten_topics_data {
            s.parts
                .retain(|x| x.topic != t.topic || !t.partitions.contains(&x.partition));
        }
        self.out.incremental_fetches += 1;
        Ok((req.session_id, s.parts.clone(), true))
    }

    /// What broker `b` answers for one partition, at the session's or request's offset.
    fn read_partition(
        &mut self,
        b: usize,
        sp: &SessionPart,
        budget: &mut usize,
        first: &mut bool,
    ) -> PartitionData {
        let p = sp.partition as usize;
        let end = self.source_end(p);
        let pd = PartitionData::default()
            .with_partition_index(sp.partition)
            .with_high_watermark(end)
            .with_last_stable_offset(end)
            .with_log_start_offset(0)
            .with_aborted_transactions(Some(Vec::new()));
        if self.src_leader[p] != b || self.now < self.src_unknown_until[p] {
            return pd.with_error_code(6); // NOT_LEADER_OR_FOLLOWER
        }
        let visible = self.visible_batches();
        let log = &source_logs()[p];
        let limit = (sp.max_bytes.max(0) as usize).min(*budget);
        let mut range: Option<std::ops::Range<usize>> = None;
        for (_, next, r) in log.batches[..visible].iter() {
            if *next <= sp.fetch_offset {
                continue;
            }
            let taken = range.as_ref().map_or(0, |x| x.len());
            // KIP-74: the first batch of the first partition with data comes whole.
            let whole = *first && taken == 0;
            if !whole && taken + r.len() > limit {
                // A partial batch at the end is normal, sometimes.
                if self.chance(6) {
                    let room = limit.saturating_sub(taken).min(r.len() - 1);
                    let start = range.as_ref().map_or(r.start, |x| x.start);
                    range = Some(start..r.start + room);
                }
                break;
            }
            range = Some(range.map_or(r.clone(), |x| x.start..r.end));
        }
        let data = range.map_or_else(Bytes::new, |r| log.bytes.slice(r));
        if !data.is_empty() {
            *first = false;
        }
        *budget = budget.saturating_sub(data.len());
        pd.with_records(Some(data))
    }

    fn produce(&mut self, b: usize, plan: &ProduceRequestPlan) -> ProduceResponse {
        let mut topics = Vec::new();
        let in_request: usize = plan.topics.iter().map(|t| t.partitions.len()).sum();
        for t in &plan.topics {
            let mut parts = Vec::new();
            for pb in &t.partitions {
                let p = pb.partition as usize;
                self.check_transactional(p, plan, in_request, &pb.head);
                let (code, base) = self.append(b, p, &pb.head, &pb.payload);
                let seq = i32::from_be_bytes([pb.head[53], pb.head[54], pb.head[55], pb.head[56]]);
                let addr = &self.brokers[b].addr;
                let line = format!("{addr} produce p{p} seq {seq} -> error {code}, base {base}");
                self.log(|| line);
                parts.push(
                    PartitionProduceResponse::default()
                        .with_index(pb.partition)
                        .with_error_code(code)
                        .with_base_offset(base),
                );
            }
            topics.push(
                TopicProduceResponse::default()
                    .with_name(TopicName(StrBytes::from_string(t.topic.clone())))
                    .with_partition_responses(parts),
            );
        }
        ProduceResponse::default().with_responses(topics)
    }

    /// A Produce request of the transactional partition carries its transactional id and only
    /// that partition, its batches the transactional bit, and none arrives while a commit
    /// waits; the other partitions' requests carry no transactional id.
    fn check_transactional(&mut self, p: usize, plan: &ProduceRequestPlan, n: usize, head: &[u8]) {
        // The attributes are bytes 21..23 of the header; 0x10 is the transactional bit.
        let transactional = i16::from_be_bytes([head[21], head[22]]) & 0x10 != 0;
        if p == TXN_PARTITION {
            let want = format!("strait-eos:src->tgt:{TOPIC}:{p}");
            if plan.transactional_id.as_deref() != Some(want.as_str()) || n != 1 || !transactional {
                self.fail(format!(
                    "p{p}: a transactional batch came as {:?} in a request of {n} partitions (transactional bit {transactional})",
                    plan.transactional_id
                ));
            }
            if let TxnView::Committing { .. } = self.txn {
                self.fail(format!(
                    "p{p}: a batch was sent after Sealed, before Unseal"
                ));
            }
        } else if plan.transactional_id.is_some() || transactional {
            self.fail(format!(
                "p{p}: a batch of the idempotent producer came transactional ({:?})",
                plan.transactional_id
            ));
        }
    }

    /// Kafka's producer-state checks of a batch `first..=last` from `pid` at `epoch`: the
    /// answer when it is not appended (a duplicate, or out of order, or a stale epoch).
    fn idempotence_check(
        &mut self,
        p: usize,
        pid: i64,
        epoch: i16,
        first: i32,
        last: i32,
    ) -> Option<(i16, i64)> {
        let dup_code = if self.chance(2) { 0 } else { 46 };
        let e = self.tgt[p].producers.get(&pid)?;
        if epoch < e.epoch {
            return Some((47, -1)); // INVALID_PRODUCER_EPOCH
        }
        if epoch > e.epoch {
            // A new epoch (a new holder of a transactional id) starts at sequence 0.
            return (first != 0).then_some((45, -1)); // OUT_OF_ORDER_SEQUENCE_NUMBER
        }
        if let Some(&(_, _, base)) = e
            .retained
            .iter()
            .find(|(f, l, _)| (*f, *l) == (first, last))
        {
            // A duplicate of a batch it has: the original offset (or, older brokers,
            // DUPLICATE_SEQUENCE_NUMBER).
            return Some((dup_code, if dup_code == 0 { base } else { -1 }));
        }
        (first != e.last_seq.wrapping_add(1)).then_some((45, -1)) // OUT_OF_ORDER_SEQUENCE_NUMBER
    }

    /// The target leader's append with Kafka's idempotence checks. Returns (error, base offset).
    fn append(&mut self, b: usize, p: usize, head: &[u8], payload: &Bytes) -> (i16, i64) {
        let now = self.now;
        if self.tgt[p].leader != b || now < self.tgt_unknown_until[p] {
            return (6, -1); // NOT_LEADER_OR_FOLLOWER
        }
        let fault = self.tgt[p]
            .fault
            .filter(|(_, until)| now < *until)
            .map(|f| f.0);
        if fault == Some(ReplicaFault::Before) {
            return (19, -1); // NOT_ENOUGH_REPLICAS
        }
        let mut whole = BytesMut::from(head);
        whole.extend_from_slice(payload);
        let batch = match RawBatch::new(whole.freeze()) {
            Ok(rb) if rb.verify_crc().is_ok() => rb,
            other => {
                self.fail(format!(
                    "p{p}: the target got a corrupt batch: {:?}",
                    other.err()
                ));
                return (2, -1);
            }
        };
        let (pid, epoch, first) = (
            batch.producer_id(),
            batch.producer_epoch(),
            batch.base_sequence(),
        );
        let last = first + batch.last_offset_delta();
        if let Some(answer) = self.idempotence_check(p, pid, epoch, first, last) {
            return answer;
        }
        let part = &mut self.tgt[p];
        // A producer the partition does not know may start at any sequence number.
        let offsets: Vec<i64> = match source_logs()[p].offsets_of(payload) {
            Some((from, to)) => (from..to).collect(),
            None => decode_records(&batch, 1 << 20)
                .expect("records decode")
                .iter()
                .map(|r| {
                    let value = r.value.as_ref().expect("values");
                    std::str::from_utf8(value)
                        .ok()
                        .and_then(|s| s.split(':').next())
                        .and_then(|s| s.parse().ok())
                        .expect("source offset in the value")
                })
                .collect(),
        };
        let base = part.log.len() as i64;
        for off in offsets {
            let expected = part.log.len() as i64;
            part.log.push(off);
            if off != expected {
                let why = format!(
                    "p{p}: target offset {expected} holds source offset {off} (a duplicate, gap or reorder; seq {first}..={last}, producer {pid})"
                );
                self.fail(why);
                return (0, base);
            }
        }
        let e = self.tgt[p].producers.entry(pid).or_default();
        if e.epoch != epoch {
            e.epoch = epoch;
            e.retained.clear();
        }
        e.last_seq = last;
        e.retained.push_back((first, last, base));
        if e.retained.len() > 5 {
            e.retained.pop_front();
        }
        if fault == Some(ReplicaFault::After) {
            return (20, -1); // NOT_ENOUGH_REPLICAS_AFTER_APPEND: written all the same
        }
        (0, base)
    }

    // ---- faults ----

    fn fault(&mut self) {
        self.out.faults += 1;
        let kind = self.pick(13);
        if kind < 6 {
            self.broker_fault(kind);
        } else {
            self.partition_fault(kind);
        }
    }

    /// Connections and brokers: drops, crashes, black holes, slowness.
    fn broker_fault(&mut self, kind: usize) {
        match kind {
            0..=2 => {
                let mut live: Vec<BrokerId> = self.conns.keys().copied().collect();
                live.sort_unstable();
                if !live.is_empty() {
                    let b = live[self.pick(live.len())];
                    self.log(|| format!("fault: drop conn {b:?}"));
                    self.drop_conn(b, true);
                }
            }
            3 => {
                let b = self.pick(4);
                let until = self.now + self.between_ms(500, 6_000);
                self.brokers[b].down_until = until;
                self.crash(b);
                let addr = self.brokers[b].addr.clone();
                let ms = until.duration_since(self.t0).as_millis();
                self.log(|| format!("fault: {addr} down until {ms} ms"));
            }
            4 => {
                let b = self.pick(4);
                let until = self.now + self.between_ms(1_000, 8_000);
                self.brokers[b].hole_until = until;
                let addr = self.brokers[b].addr.clone();
                let ms = until.duration_since(self.t0).as_millis();
                self.log(|| format!("fault: {addr} black hole until {ms} ms"));
            }
            5 => {
                let b = self.pick(4);
                self.brokers[b].slow_until = self.now + self.between_ms(1_000, 5_000);
                self.brokers[b].slow_ms = self.between_ms(300, 2_600).as_millis() as u64;
                let (addr, ms) = (self.brokers[b].addr.clone(), self.brokers[b].slow_ms);
                self.log(|| format!("fault: {addr} slow ({ms} ms)"));
            }
            _ => unreachable!("broker faults are 0..6"),
        }
    }

    /// Partitions: leader moves and elections, replicas, reassignment, pauses, control.
    fn partition_fault(&mut self, kind: usize) {
        match kind {
            6 => {
                let p = self.pick(PARTITIONS);
                self.src_leader[p] = 1 - self.src_leader[p];
                self.log(|| format!("fault: source leader of p{p} moves"));
            }
            7 => {
                let p = self.pick(PARTITIONS);
                self.tgt[p].leader = 5 - self.tgt[p].leader;
                self.log(|| format!("fault: target leader of p{p} moves"));
            }
            8 => {
                let p = self.pick(PARTITIONS);
                let until = self.now + self.between_ms(200, 3_000);
                if self.chance(2) {
                    self.src_unknown_until[p] = until;
                    self.src_leader[p] = self.pick(2);
                } else {
                    self.tgt_unknown_until[p] = until;
                    self.tgt[p].leader = 2 + self.pick(2);
                }
                self.log(|| format!("fault: leader election for p{p}"));
            }
            9 => {
                let p = self.pick(PARTITIONS);
                let kind = if self.chance(2) {
                    ReplicaFault::Before
                } else {
                    ReplicaFault::After
                };
                let until = self.now + self.between_ms(200, 4_000);
                self.tgt[p].fault = Some((kind, until));
                self.log(|| format!("fault: not enough replicas for p{p}"));
            }
            10 => {
                let p = self.pick(PARTITIONS);
                if self.chance(2) {
                    if !self.views[p].revoking {
                        self.views[p].revoking = true;
                        self.core
                            .handle_command(ShardCommand::Revoke(Self::key(p)), self.now);
                        self.log(|| format!("fault: revoke p{p} (to assign it again)"));
                    }
                } else if self.views[p].paused_until.is_none() {
                    self.views[p].paused_until = Some(self.now + self.between_ms(300, 3_000));
                    self.core
                        .handle_command(ShardCommand::Pause(Self::key(p)), self.now);
                    self.log(|| format!("fault: pause p{p}"));
                }
            }
            11 => self.lapse(),
            _ => {
                self.refuse_next_report = true;
                self.log(|| "fault: the control channel is full".to_string());
            }
        }
    }

    /// The member's session lapses (as after a freeze): the lease ends now, every partition is
    /// revoked, and the lease comes back once all are assigned again. The shard must send no
    /// Produce in between and must finish every revocation although it may not resend.
    fn lapse(&mut self) {
        if self.lapsed_until.is_some() {
            return;
        }
        self.out.lapses += 1;
        self.lapsed_until = Some(self.now + self.between_ms(200, 2_000));
        self.core.handle_command(
            ShardCommand::Lease {
                produce_until: self.now,
            },
            self.now,
        );
        for p in 0..PARTITIONS {
            if !self.views[p].revoking {
                self.views[p].revoking = true;
                self.core
                    .handle_command(ShardCommand::Revoke(Self::key(p)), self.now);
            }
        }
        self.log(|| "fault: the session lapses; every partition revoked".to_string());
    }

    /// Broker `b` dies: its connections break and answers on their way are lost.
    fn crash(&mut self, b: usize) {
        self.brokers[b].sessions.clear();
        let mut on: Vec<BrokerId> = self
            .conns
            .keys()
            .filter(|id| self.addr_of[*id] == b)
            .copied()
            .collect();
        on.sort_unstable();
        for id in on {
            self.drop_conn(id, true);
        }
    }

    // ---- invariants ----

    /// A partition's fetch size grows from the configured size up to a quarter of the budget,
    /// never past it.
    fn check_ask(&mut self, ask: i32) {
        let ceiling = (BUDGET / 4).max(PARTITION_MAX_BYTES as usize);
        let ask = usize::try_from(ask).unwrap_or(0);
        if ask < PARTITION_MAX_BYTES as usize || ask > ceiling {
            self.fail(format!(
                "a partition asked for {ask} bytes, outside {PARTITION_MAX_BYTES}..={ceiling}"
            ));
        }
        if ask > PARTITION_MAX_BYTES as usize {
            self.out.grown_asks += 1;
        }
    }

    fn check_memory(&mut self) {
        let largest = source_logs()
            .iter()
            .map(|l| l.largest_batch)
            .max()
            .unwrap_or(0);
        let used = self.core.memory_in_use();
        if used > BUDGET + largest {
            self.fail(format!(
                "the shard holds {used} bytes of fetched data, over its budget {BUDGET} plus one batch ({largest})"
            ));
        }
    }

    fn events(&mut self) {
        while let Some(ev) = self.core.poll_event() {
            match ev {
                ShardEvent::Report {
                    progress, mappings, ..
                } => {
                    if self.refuse_next_report {
                        self.refuse_next_report = false;
                        self.log(|| "report refused".to_string());
                        self.core.handle_event_refused(ShardEvent::Report {
                            shard: 0,
                            progress,
                            mappings,
                            stats: Default::default(),
                        });
                        return;
                    }
                    self.check_report(&progress, &mappings);
                }
                ShardEvent::PartitionFailed { key, error, .. } => {
                    self.fail(format!("{key} failed: {error}"));
                }
                ShardEvent::Revoked {
                    key,
                    next_offset,
                    mappings,
                    ..
                } => {
                    let p = key.partition as usize;
                    self.check_mappings(p, &mappings);
                    // After a lapse, batches whose answers were lost may be on the target, and
                    // another producer writes next: the next owner starts from the target's
                    // tail, as control's crash recovery does.
                    let held = self.tgt[p].log.len() as i64;
                    if next_offset > held {
                        self.fail(format!(
                            "p{p} revoked at {next_offset}, past the target's {held}"
                        ));
                    }
                    let next_offset = if self.lapsed_until.is_some() {
                        held
                    } else {
                        next_offset
                    };
                    let ms = self.ms();
                    self.views[p] = PartView {
                        next: next_offset,
                        fetched: next_offset,
                        changed_at_ms: ms,
                        paused_until: None,
                        revoking: false,
                        stalled: false,
                    };
                    self.out.reassignments += 1;
                    self.log(|| format!("revoked p{p} at {next_offset}; assigned again"));
                    self.assign(p, next_offset);
                }
                ShardEvent::Sealed {
                    progress, mappings, ..
                } => {
                    let p = progress.key.partition as usize;
                    self.check_mappings(p, &mappings);
                    self.check_progress(&progress);
                    // Everything sent is acknowledged: the target holds exactly the records
                    // below the progress (source offsets equal target offsets here).
                    let held = self.tgt[p].log.len() as i64;
                    if p != TXN_PARTITION || self.txn != TxnView::Sealing {
                        self.fail(format!("p{p} reported Sealed unasked ({:?})", self.txn));
                    } else if progress.next_offset != held {
                        self.fail(format!(
                            "p{p} sealed at {}, but the target holds {held}",
                            progress.next_offset
                        ));
                    }
                    let until = self.now + self.between_ms(1, 40);
                    self.txn = TxnView::Committing { until };
                    self.log(|| format!("p{p} sealed at {held}; committing"));
                }
                ShardEvent::Stopped { .. } => self.fail("the shard stopped".to_string()),
            }
        }
    }

    /// Target offsets equal source offsets here (the log starts at 0 on both sides), so a
    /// correct segment maps each offset to itself, and the target log holds it.
    fn check_mappings(&mut self, p: usize, segs: &[crate::shard::MappingSegment]) {
        for s in segs {
            let held = self.tgt[p].log.len() as i64;
            if s.upstream != s.downstream || s.downstream + i64::from(s.count) > held {
                self.fail(format!(
                    "p{p}: mapping {s:?} does not match the target log ({held} records)"
                ));
            }
        }
    }

    fn check_progress(&mut self, pr: &PartitionProgress) {
        let p = pr.key.partition as usize;
        let held = self.tgt[p].log.len() as i64;
        let view = self.views[p];
        if pr.next_offset < view.next && !view.revoking {
            self.fail(format!(
                "p{p}: progress went back from {} to {}",
                view.next, pr.next_offset
            ));
        }
        if pr.next_offset > held {
            self.fail(format!(
                "p{p}: progress {} is past the target log's {held} records",
                pr.next_offset
            ));
        }
        if pr.target_next_offset >= 0 && pr.target_next_offset != pr.next_offset {
            self.fail(format!(
                "p{p}: target position {} does not match progress {}",
                pr.target_next_offset, pr.next_offset
            ));
        }
        if pr.stall.is_some() {
            self.out.stalls_seen += 1;
        }
        if std::env::var_os("STRAIT_SIM_VERBOSE").is_some() {
            let line = format!(
                "report p{p}: next {}, stall {:?}",
                pr.next_offset,
                pr.stall.as_ref().map(|s| (s.reason, s.detail.clone()))
            );
            self.log(|| line);
        }
        let ms = self.ms();
        self.views[p].stalled = pr.stall.is_some();
        // Progress is either side moving: records acknowledged, or records fetched.
        if pr.next_offset != view.next || pr.fetch_offset != view.fetched {
            self.views[p].next = pr.next_offset;
            self.views[p].fetched = pr.fetch_offset;
            self.views[p].changed_at_ms = ms;
        }
    }

    /// A report control took: its segments and progress, then every partition, reported or
    /// not (one left out stands where its last report put it).
    fn check_report(
        &mut self,
        progress: &[PartitionProgress],
        mappings: &[(PartitionKey, Vec<MappingSegment>)],
    ) {
        for (k, segs) in mappings {
            self.check_mappings(k.partition as usize, segs);
        }
        for pr in progress {
            self.check_progress(pr);
        }
        for p in 0..PARTITIONS {
            self.check_moving(p);
        }
    }

    /// Control's view of partition `p` after a report: moving, caught up, paused, revoking, or
    /// stalled with a reason; never behind and silent for [`STUCK_MS`].
    fn check_moving(&mut self, p: usize) {
        let view = self.views[p];
        let idle = self.ms() - view.changed_at_ms;
        if view.next < self.source_end(p)
            && view.paused_until.is_none()
            && !view.revoking
            && idle > STUCK_MS
            && !view.stalled
        {
            self.fail(format!(
                "p{p}: no progress for {idle} ms at {} of {} and no stall reason ({})",
                view.next,
                self.source_end(p),
                self.core.describe(&Self::key(p))
            ));
        }
    }
}

/// `p<partition>:<base sequence>` of each batch of a produce request, for the trace.
fn seqs(plan: &ProduceRequestPlan) -> String {
    plan.topics
        .iter()
        .flat_map(|t| t.partitions.iter())
        .map(|pb| {
            let seq = i32::from_be_bytes([pb.head[53], pb.head[54], pb.head[55], pb.head[56]]);
            format!("p{}:{seq}", pb.partition)
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn refused(addr: &str) -> WireError {
    WireError::Connect {
        broker: addr.to_string(),
        message: "Connection refused (os error 111)".into(),
    }
}
