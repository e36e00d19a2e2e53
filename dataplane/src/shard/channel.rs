//! What the control thread and the shards say to each other over bounded crossbeam channels.
//!
//! Down (control → shard): [`ShardCommand`]. Up (shard → control): [`ShardEvent`]. A shard only
//! ever `try_send`s and `try_recv`s: when the up channel is full it keeps its report and merges
//! it into the next one, so it never blocks and nothing is lost.

use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use super::core::Leader;
use super::partition::ProducerIdentity;
use crate::wire::ConnConfig;

/// Index of a flow (`source->target`) in the control plane's flow list.
pub type FlowId = u32;

/// The unit of assignment: one source partition of one flow.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PartitionKey {
    pub flow: FlowId,
    pub topic: Arc<str>,
    pub partition: i32,
}

impl PartitionKey {
    pub fn new(flow: FlowId, topic: &str, partition: i32) -> Self {
        PartitionKey {
            flow,
            topic: Arc::from(topic),
            partition,
        }
    }
}

impl fmt::Display for PartitionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{} (flow {})", self.topic, self.partition, self.flow)
    }
}

/// How to reach a cluster. The TLS configuration is built once by control and shared.
#[derive(Clone)]
pub struct ClusterEndpoint {
    pub alias: String,
    pub bootstrap: Vec<String>,
    pub config: ConnConfig,
    pub tls: Option<Arc<rustls::ClientConfig>>,
}

impl fmt::Debug for ClusterEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClusterEndpoint")
            .field("alias", &self.alias)
            .field("bootstrap", &self.bootstrap)
            .field("security", &self.config.security_protocol)
            .finish()
    }
}

/// `isolation.level` of the source consumer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum IsolationLevel {
    /// Everything up to the high watermark, aborted transactions included (MM2's default).
    ReadUncommitted,
    /// Up to the last stable offset, aborted transactions dropped (strait's default).
    #[default]
    ReadCommitted,
}

impl IsolationLevel {
    /// The Fetch request's `isolation_level` byte.
    pub fn wire(self) -> i8 {
        match self {
            IsolationLevel::ReadUncommitted => 0,
            IsolationLevel::ReadCommitted => 1,
        }
    }
}

/// `acks` of the target producer. `acks=0` has no variant: strait needs each batch's target
/// offset back, which only an acknowledged produce gives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Acks {
    /// `acks=1`: the leader alone.
    Leader,
    /// `acks=all` (`-1`): every in-sync replica (the default).
    #[default]
    All,
}

impl Acks {
    /// The Produce request's `acks` field.
    pub fn wire(self) -> i16 {
        match self {
            Acks::Leader => 1,
            Acks::All => -1,
        }
    }
}

/// How a client backs off on one cluster, from its `reconnect.backoff.*` and `retry.backoff.*`
/// keys. Each delay grows exponentially from its base to its max, with ±20 % jitter, as Kafka's
/// `ExponentialBackoff` does (KIP-144, KIP-580), and starts again at the base after a success.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BackoffSettings {
    /// `reconnect.backoff.ms`: first wait after a failed connection. Default 50.
    pub reconnect_ms: u64,
    /// `reconnect.backoff.max.ms`: the longest wait between connection attempts. Default 1 000.
    pub reconnect_max_ms: u64,
    /// `retry.backoff.ms`: first wait before retrying a failed request (a produce, a leader
    /// lookup, a producer id); also the least time between two leader lookups. Default 100.
    pub retry_ms: u64,
    /// `retry.backoff.max.ms`: the longest wait between retries. Default 1 000.
    pub retry_max_ms: u64,
}

impl Default for BackoffSettings {
    fn default() -> Self {
        BackoffSettings {
            reconnect_ms: 50,
            reconnect_max_ms: 1_000,
            retry_ms: 100,
            retry_max_ms: 1_000,
        }
    }
}

/// Fetch settings of a flow (from the source consumer config).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FetchSettings {
    /// `isolation.level`; strait's default is read_committed.
    pub isolation_level: IsolationLevel,
    /// `fetch.max.wait.ms`, default 500.
    pub max_wait_ms: i32,
    /// `fetch.min.bytes`, default 1.
    pub min_bytes: i32,
    /// `fetch.max.bytes`, default 52 428 800. Also capped by the shard's memory budget.
    pub max_bytes: i32,
    /// `max.partition.fetch.bytes`, default 1 048 576: what a partition asks for at first.
    pub partition_max_bytes: i32,
    /// How far a partition's ask may grow while it is behind and its answers come back full
    /// ([`crate::shard::fetch_size`]): `fetch.max.bytes` by default, `max.partition.fetch.bytes`
    /// (no growth) when the user set that. The shard also caps it at a quarter of its memory
    /// budget.
    pub partition_ceiling_bytes: i32,
    /// Backoff on the source cluster (the first flow assigned to a shard sets it for the
    /// cluster's connections and lookups in that shard).
    pub backoff: BackoffSettings,
}

impl Default for FetchSettings {
    fn default() -> Self {
        FetchSettings {
            isolation_level: IsolationLevel::ReadCommitted,
            max_wait_ms: 500,
            min_bytes: 1,
            max_bytes: 52_428_800,
            partition_max_bytes: 1_048_576,
            partition_ceiling_bytes: 52_428_800,
            backoff: BackoffSettings::default(),
        }
    }
}

/// Produce settings of a flow (from the target producer config).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProduceSettings {
    /// `acks`: all (the default) or the leader alone.
    pub acks: Acks,
    /// `request.timeout.ms` sent as the produce timeout, default 30 000.
    pub timeout_ms: i32,
    /// `max.in.flight.requests.per.connection` applied per partition, 1..=5 (idempotence caps
    /// it at 5). Default 5.
    pub max_in_flight_per_partition: usize,
    /// `delivery.timeout.ms`: how long a partition may be unable to deliver (retriable errors,
    /// or a target it cannot reach) before it stops. Default 120 000.
    pub delivery_timeout_ms: u64,
    /// `max.request.size`: the batch bytes of one produce request at most (a single batch
    /// larger than it is still sent alone; the topic's `max.message.bytes` bounds batches).
    /// Default 16 MiB; the shard's own `max_produce_request_bytes` bounds it too.
    pub max_request_bytes: usize,
    /// `batch.size`: tiny batches (see [`ProduceSettings::merge_below_bytes`]) that queue
    /// behind a full produce window (the partition is behind) are merged into batches of up to
    /// this many bytes (and the topic's `max.message.bytes`), so that a backlog of one- or
    /// two-record batches does not cost a produce round trip each. 0 forwards every batch as it
    /// is. Default 16 384, the producer's.
    pub batch_bytes: usize,
    /// Backoff on the target cluster: produce retries use `retry.backoff.*`; connections,
    /// leader lookups and producer ids as on the source (first flow wins per cluster).
    pub backoff: BackoffSettings,
}

/// The share of `batch.size` under which a queued batch counts as tiny and may be merged: a
/// sixteenth, 1 KiB with the default (one to a few records). Forwarding as it came is the
/// design; merging is kept for the backlog it rescues, where each batch costs a produce round
/// trip: 512 B batches copy 1.5-12x faster merged in every codec (perf/README.md "Merging of
/// small batches"). Larger batches gain less, and merging gzip or zstd costs 2-4x the CPU; an
/// operator who wants more merging raises `batch.size` (65 536 merges under 4 KiB).
const MERGE_BELOW_SHARE_OF_BATCH: usize = 16;

impl ProduceSettings {
    /// Queued batches this size or larger are never merged; 0 with `batch.size` 0.
    pub fn merge_below_bytes(&self) -> usize {
        self.batch_bytes / MERGE_BELOW_SHARE_OF_BATCH
    }
}

impl Default for ProduceSettings {
    fn default() -> Self {
        ProduceSettings {
            acks: Acks::All,
            timeout_ms: 30_000,
            max_in_flight_per_partition: 5,
            delivery_timeout_ms: 120_000,
            max_request_bytes: 16 * 1024 * 1024,
            batch_bytes: 16 * 1024,
            backoff: BackoffSettings::default(),
        }
    }
}

/// Settings of one shard.
#[derive(Debug, Clone)]
pub struct ShardConfig {
    pub index: usize,
    pub backend: crate::io::IoBackend,
    /// Pin the thread to this core, if given.
    pub core: Option<core_affinity::CoreId>,
    /// Fetch response bytes held at once, in flight or waiting to be produced. Default 64 MiB;
    /// the binary gives each shard its share of `strait.memory.bytes`. The shard's memory for
    /// record data stays within this plus one oversized batch.
    pub memory_budget_bytes: usize,
    /// How often progress, mappings and counters go to control while anything happens in the
    /// shard; a quiet shard reports every `core::QUIET_REPORT_INTERVAL`. Default 200 ms.
    pub report_interval_ms: u64,
    /// How often commands are read and timers (deadlines, retry backoff, reports) are checked.
    /// Default 25 ms: data moves on completions, not on the tick, and each tick wakes the
    /// thread (at 5 ms, ticks were a tenth of strait's CPU in the steady bench).
    pub tick_ms: u64,
    /// Produce requests in flight per target broker and flow. Default 8.
    pub max_produce_requests_per_broker: usize,
    /// Upper bound on one produce request's batch bytes. Default 16 MiB.
    pub max_produce_request_bytes: usize,
    /// How long a shutdown waits for in-flight produces. Default 30 000 ms.
    pub shutdown_timeout_ms: u64,
    /// Events (failures, revocations) queued for control beyond what its channel holds.
    /// Default 1 024. At the bound, further failures and revocations wait in their partitions
    /// (failed partitions stay stopped, revoked ones stay drained) until control takes events:
    /// nothing is dropped, and the queue never grows past it.
    pub max_pending_events: usize,
    /// How often an ongoing incident (a broker that stays unreachable, lookups that keep
    /// failing) is summarised in the log after its first line. Default 30 000 ms.
    pub incident_summary_interval_ms: u64,
}

impl ShardConfig {
    pub fn new(index: usize, backend: crate::io::IoBackend) -> Self {
        ShardConfig {
            index,
            backend,
            core: None,
            memory_budget_bytes: 64 * 1024 * 1024,
            report_interval_ms: 200,
            tick_ms: 25,
            max_produce_requests_per_broker: 8,
            max_produce_request_bytes: 16 * 1024 * 1024,
            shutdown_timeout_ms: 30_000,
            max_pending_events: 1024,
            incident_summary_interval_ms: 30_000,
        }
    }
}

/// A partition handed to a shard.
#[derive(Clone, Debug)]
pub struct Assignment {
    pub key: PartitionKey,
    pub source: Arc<ClusterEndpoint>,
    pub target: Arc<ClusterEndpoint>,
    /// The remote topic name on the target (same partition number).
    pub target_topic: Arc<str>,
    /// The next source offset to replicate.
    pub start_offset: i64,
    /// The source leader epoch stored with `start_offset` (-1 when unknown, or when the start
    /// is not the stored position): the first fetch checks that the source still holds it.
    pub start_leader_epoch: i32,
    /// Where the target partition's log ended when the control plane started the partition:
    /// the target offset `start_offset` lands at while no one else writes the partition (-1
    /// when unknown). Progress reports it until the first acknowledgement, so progress stored
    /// before then still lets crash recovery count what the target holds past it.
    pub start_target_offset: i64,
    /// The target topic's `max.message.bytes`.
    pub max_message_bytes: usize,
    pub fetch: FetchSettings,
    pub produce: ProduceSettings,
    /// Exactly-once forwarding: the partition's transactional producer, with a transaction
    /// open that already holds the remote partition. `None`: the shard's idempotent producer.
    pub transactional: Option<Transactional>,
    /// The source partition's leader as control's metadata named it moments before (same
    /// bootstrap servers, so the same listener's address): the shard fetches from it at once
    /// instead of looking the leader up first. A leader that moved meanwhile answers with a
    /// routing error, and an unreachable one fails its connection: either way the shard looks
    /// the leader up, as after any leader move. `None`: the shard looks it up.
    pub source_leader: Option<Leader>,
}

/// The transactional producer of one partition (exactly-once forwarding). Control got it with
/// InitProducerId, which fenced any earlier holder of the id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transactional {
    pub transactional_id: Arc<str>,
    pub producer: ProducerIdentity,
}

/// Control → shard.
#[derive(Debug)]
pub enum ShardCommand {
    Assign(Box<Assignment>),
    /// Stop replicating; in-flight produces are finished first, then [`ShardEvent::Revoked`].
    Revoke(PartitionKey),
    Pause(PartitionKey),
    Resume(PartitionKey),
    /// Restart from another source offset (operator action, or the opt-in reset after a lost
    /// position). Clears the partition's failure. `generation` numbers the seeks of one
    /// assignment (from 1; 0 is the assignment itself) and comes back in every later
    /// [`PartitionProgress`], so that the control loop can tell reports made before the seek,
    /// still in the channel, from those after it.
    Seek {
        key: PartitionKey,
        offset: i64,
        generation: u32,
    },
    /// The target topic's `max.message.bytes` changed.
    SetMaxMessageBytes(PartitionKey, usize),
    /// A member of a group of instances may send Produce requests only before
    /// `produce_until`, its local session deadline: past it, the coordinator may already have
    /// given its partitions to others, and a shard woken from a freeze (SIGSTOP, a long pause)
    /// must not write what it fetched before it. From then on nothing is sent (what is on
    /// the wire finishes), and a revoked partition counts as drained once nothing of it is on
    /// the wire. A later lease lifts the hold. Without any (no group) there is no limit.
    Lease {
        produce_until: Instant,
    },
    /// Exactly-once: a commit of the partition's transaction starts. Nothing new is sent;
    /// once every batch sent is acknowledged the shard answers [`ShardEvent::Sealed`].
    /// Fetching goes on.
    Seal(PartitionKey),
    /// Exactly-once: the commit is done and the next transaction holds the remote partition;
    /// sending goes on, with `producer` (a new epoch after each commit where the target speaks
    /// KIP-890's second part: sequences start again at 0).
    Unseal {
        key: PartitionKey,
        producer: ProducerIdentity,
    },
    /// Finish in-flight work, report final progress and stop.
    Shutdown,
}

/// One exactly known stretch of the offset mapping: `count` consecutive source offsets from
/// `upstream` landed at consecutive target offsets from `downstream`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MappingSegment {
    pub upstream: i64,
    pub downstream: i64,
    pub count: u32,
}

/// Where one partition stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionProgress {
    pub key: PartitionKey,
    /// Every source record below this offset is replicated (acknowledged by the target).
    pub next_offset: i64,
    /// The target offset right after the last acknowledged record (-1 while unknown): the
    /// target log holds exactly the replicated records below it. Stored with the progress so
    /// that a restart after a crash can find how far the target really got.
    pub target_next_offset: i64,
    /// The next offset the shard will fetch.
    pub fetch_offset: i64,
    /// The source leader epoch of the last batch fetched, -1 while unknown: an upper bound of
    /// the epoch of the record before `next_offset`, stored with it (see `Partition`).
    pub last_fetched_epoch: i32,
    /// The source's high watermark (or last stable offset under read_committed) at the last
    /// fetch; -1 before the first.
    pub end_offset: i64,
    pub log_start_offset: i64,
    /// Batches fetched and not yet acknowledged.
    pub queued_batches: usize,
    pub paused: bool,
    /// Why the partition cannot make progress right now, and since when; `None` while it can
    /// (or while it is paused, failed or has nothing to do).
    pub stall: Option<Stall>,
    /// Batch bytes the target acknowledged for this partition since this shard got it.
    pub bytes_copied: u64,
    /// Source batches fetched for this partition since this shard got it, by path.
    pub paths: PathCounts,
    /// Timestamp (ms since the epoch, see [`super::timing::batch_timestamp`]) of the oldest
    /// batch fetched and not yet acknowledged; -1 when none is held (or it has none).
    pub oldest_unacked_timestamp_ms: i64,
    /// The generation of the last [`ShardCommand::Seek`] applied, 0 before any.
    pub seek_generation: u32,
}

/// Source batches of one partition by the path they took: forwarded byte for byte with only
/// the header rewritten (fast), or rebuilt record by record (slow; why is counted per shard).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PathCounts {
    pub fast_batches: u64,
    pub slow_batches: u64,
}

impl PathCounts {
    /// Both counts of `self` and `other` together.
    #[must_use]
    pub fn plus(self, other: PathCounts) -> PathCounts {
        PathCounts {
            fast_batches: self.fast_batches + other.fast_batches,
            slow_batches: self.slow_batches + other.slow_batches,
        }
    }
}

/// Why a partition is not making progress (see [`Stall`]). The side it names is where the
/// problem is; the shard keeps retrying, with backoff, until it goes away (or, on the target
/// side, until `delivery.timeout.ms` stops the partition).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StallReason {
    /// The source broker that leads the partition (or every bootstrap broker, for a leader
    /// lookup) cannot be reached: connection refused or lost, a fetch unanswered 5 s past its
    /// `fetch.max.wait.ms`, or requests unanswered within `request.timeout.ms`.
    SourceUnreachable,
    /// The source partition has no leader right now, or its leader keeps saying it is not.
    SourceLeaderUnknown,
    /// The source answers the fetch with another retriable error (named in the detail).
    SourceError,
    /// The target broker that leads the partition cannot be reached, or leaves a produce
    /// request unanswered for 5 s (`core::produce::UNANSWERED_STALL`; the request itself is
    /// abandoned at `request.timeout.ms`).
    TargetUnreachable,
    /// The target partition has no leader right now, or its leader keeps saying it is not.
    TargetLeaderUnknown,
    /// The target refuses writes because fewer replicas are in sync than its
    /// `min.insync.replicas` (NOT_ENOUGH_REPLICAS).
    NotEnoughReplicas,
    /// The target answers the produce with another retriable error (named in the detail).
    TargetError,
    /// The target cluster gives this shard no idempotent producer id (InitProducerId fails:
    /// unreachable, or not authorized: IDEMPOTENT_WRITE / CLUSTER authorization).
    ProducerIdUnavailable,
    /// Nothing can be fetched because the shard's memory budget is held by fetched batches
    /// still waiting for the target (of this or other partitions).
    MemoryBudget,
}

impl StallReason {
    /// A stable snake_case name, for status pages and metrics labels.
    pub fn name(self) -> &'static str {
        match self {
            StallReason::SourceUnreachable => "source_unreachable",
            StallReason::SourceLeaderUnknown => "source_leader_unknown",
            StallReason::SourceError => "source_error",
            StallReason::TargetUnreachable => "target_unreachable",
            StallReason::TargetLeaderUnknown => "target_leader_unknown",
            StallReason::NotEnoughReplicas => "not_enough_replicas",
            StallReason::TargetError => "target_error",
            StallReason::ProducerIdUnavailable => "producer_id_unavailable",
            StallReason::MemoryBudget => "memory_budget",
        }
    }

    /// Whether the problem is on the target side (delivery): only those count towards
    /// `delivery.timeout.ms`.
    pub fn is_target_side(self) -> bool {
        matches!(
            self,
            StallReason::TargetUnreachable
                | StallReason::TargetLeaderUnknown
                | StallReason::NotEnoughReplicas
                | StallReason::TargetError
                | StallReason::ProducerIdUnavailable
        )
    }
}

impl fmt::Display for StallReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A partition that cannot make progress: why, since when, and the last error seen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stall {
    pub reason: StallReason,
    /// When the partition stopped making progress (the first failure of this incident; a
    /// change of reason within one incident keeps it).
    pub since: Instant,
    /// The last error, in words (names the broker or cluster).
    pub detail: Arc<str>,
}

/// Counters of one shard since it started. Plain numbers: the shard owns them alone.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShardStats {
    pub fetch_requests: u64,
    pub fetch_bytes: u64,
    /// Fetch requests naming every partition of their group (opening a fetch session, or
    /// without one), and incremental ones (naming only what changed, see
    /// [`crate::shard::fetch_session`]).
    pub full_fetches: u64,
    pub incremental_fetches: u64,
    /// Fetch sessions ended by an error, a lost request or a replaced partition state (the
    /// next fetch of the group is full).
    pub fetch_session_resets: u64,
    pub produce_requests: u64,
    pub produced_batches: u64,
    pub produced_records: u64,
    pub produced_bytes: u64,
    /// Batches forwarded byte-for-byte with only the header rewritten.
    pub fast_batches: u64,
    /// Batches rebuilt (decoded and re-encoded), and their source bytes.
    pub slow_batches: u64,
    pub slow_bytes: u64,
    /// `slow_batches` by why they were rebuilt.
    pub slow_reasons: crate::batch::SlowReasonCounts,
    /// Small batches merged behind a full produce window, and the batches they became.
    pub merged_batches: u64,
    pub merges: u64,
    /// Batches dropped as control markers or aborted transactions.
    pub dropped_control: u64,
    pub dropped_aborted: u64,
    pub produce_retries: u64,
    pub reconnects: u64,
    /// Requests abandoned because no answer came within `request.timeout.ms` (each also drops
    /// its connection).
    pub request_timeouts: u64,
    /// Bytes of fetch responses held in memory right now.
    pub buffered_bytes: u64,
    /// The shard's budget for them (`ShardConfig::memory_budget_bytes`).
    pub memory_budget_bytes: u64,
    /// Record age and replication latency histograms, one entry per flow (cumulative).
    pub timings: Vec<super::timing::FlowTimings>,
}

/// Why a partition stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FailureKind {
    /// The source log no longer has our position (truncated or deleted records): the
    /// position is below `log_start_offset`.
    PositionLost {
        position: i64,
        log_start_offset: i64,
    },
    /// The source log no longer holds what strait copied (KIP-320: the leader's answer to a
    /// fetch names a diverging epoch): an unclean leader election, or a leader that lost its
    /// log. Source offsets from `diverged_at` to `fetched_to` (exclusive) were fetched from
    /// the old log; those that the target acknowledged are on the target and no longer in the
    /// source. Nothing decides for the operator which copy is right, so the partition stops.
    SourceDiverged {
        diverged_at: i64,
        fetched_to: i64,
    },
    /// A record cannot fit the target topic's `max.message.bytes` even alone.
    RecordTooLarge,
    /// The source sent something we cannot forward (old format, corrupt batch).
    BadSourceData,
    /// The target refused the data for good (authorization, invalid records, ...).
    TargetRejected,
    /// Retriable errors persisted past `delivery.timeout.ms`.
    DeliveryTimeout,
    /// Exactly-once: the target refused the transactional producer's epoch. Another holder of
    /// the partition's transactional id fenced this one (its InitProducerId bumped the epoch),
    /// or the coordinator aborted a transaction open past its timeout (which bumps it too):
    /// control asks the coordinator which.
    Fenced,
    Other,
}

/// Shard → control.
#[derive(Debug)]
pub enum ShardEvent {
    /// Periodic report: new mapping segments, counters, and the progress of the partitions
    /// whose progress changed since the last report (every partition in a shard's first
    /// report and after a refused one): a partition left out stands where it stood.
    Report {
        shard: usize,
        progress: Vec<PartitionProgress>,
        mappings: Vec<(PartitionKey, Vec<MappingSegment>)>,
        stats: ShardStats,
    },
    /// A partition stopped; the others continue.
    PartitionFailed {
        shard: usize,
        key: PartitionKey,
        kind: FailureKind,
        error: String,
        /// Replicated up to here.
        next_offset: i64,
        /// The partition's last applied seek when it stopped: a failure from before control's
        /// latest seek (still in the channel when the seek was sent) is stale.
        seek_generation: u32,
    },
    /// A revoked partition is drained; `next_offset` is final.
    Revoked {
        shard: usize,
        key: PartitionKey,
        next_offset: i64,
        mappings: Vec<MappingSegment>,
    },
    /// Exactly-once: a sealed partition has nothing unanswered; `progress` and `mappings`
    /// are exactly what its open transaction holds.
    Sealed {
        shard: usize,
        progress: Box<PartitionProgress>,
        mappings: Vec<MappingSegment>,
    },
    /// The shard stopped (after `Shutdown`, or on a fatal error of its own).
    Stopped { shard: usize, error: Option<String> },
}
