//! What the control thread and the shards say to each other over bounded crossbeam channels.
//!
//! Down (control → shard): [`ShardCommand`]. Up (shard → control): [`ShardEvent`]. A shard only
//! ever `try_send`s and `try_recv`s: when the up channel is full it keeps its report and merges
//! it into the next one, so it never blocks and nothing is lost.

use std::fmt;
use std::sync::Arc;

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

/// Fetch settings of a flow (from the source consumer config).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FetchSettings {
    /// 0 = read_uncommitted, 1 = read_committed (strait's default).
    pub isolation_level: i8,
    /// `fetch.max.wait.ms`, default 500.
    pub max_wait_ms: i32,
    /// `fetch.min.bytes`, default 1.
    pub min_bytes: i32,
    /// `fetch.max.bytes`, default 52 428 800. Also capped by the shard's memory budget.
    pub max_bytes: i32,
    /// `max.partition.fetch.bytes`, default 1 048 576.
    pub partition_max_bytes: i32,
}

impl Default for FetchSettings {
    fn default() -> Self {
        FetchSettings {
            isolation_level: 1,
            max_wait_ms: 500,
            min_bytes: 1,
            max_bytes: 52_428_800,
            partition_max_bytes: 1_048_576,
        }
    }
}

/// Produce settings of a flow (from the target producer config).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProduceSettings {
    /// `acks`: -1 (all, the default) or 1. 0 is refused: strait needs the base offset back.
    pub acks: i16,
    /// `request.timeout.ms` sent as the produce timeout, default 30 000.
    pub timeout_ms: i32,
    /// `max.in.flight.requests.per.connection` applied per partition, 1..=5 (idempotence caps
    /// it at 5). Default 5.
    pub max_in_flight_per_partition: usize,
    /// `delivery.timeout.ms`: how long a batch may keep failing with retriable errors before its
    /// partition stops. Default 120 000.
    pub delivery_timeout_ms: u64,
    /// `retry.backoff.ms`, default 100.
    pub retry_backoff_ms: u64,
}

impl Default for ProduceSettings {
    fn default() -> Self {
        ProduceSettings {
            acks: -1,
            timeout_ms: 30_000,
            max_in_flight_per_partition: 5,
            delivery_timeout_ms: 120_000,
            retry_backoff_ms: 100,
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
    /// The target topic's `max.message.bytes`.
    pub max_message_bytes: usize,
    pub fetch: FetchSettings,
    pub produce: ProduceSettings,
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
    /// position). Clears the partition's failure.
    Seek(PartitionKey, i64),
    /// The target topic's `max.message.bytes` changed.
    SetMaxMessageBytes(PartitionKey, usize),
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
    /// The source's high watermark (or last stable offset under read_committed) at the last
    /// fetch; -1 before the first.
    pub end_offset: i64,
    pub log_start_offset: i64,
    /// Batches fetched and not yet acknowledged.
    pub queued_batches: usize,
    pub paused: bool,
}

/// Counters of one shard since it started. Plain numbers: the shard owns them alone.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShardStats {
    pub fetch_requests: u64,
    pub fetch_bytes: u64,
    pub produce_requests: u64,
    pub produced_batches: u64,
    pub produced_records: u64,
    pub produced_bytes: u64,
    /// Batches forwarded byte-for-byte with only the header rewritten.
    pub fast_batches: u64,
    /// Batches rebuilt (decoded and re-encoded), and their source bytes.
    pub slow_batches: u64,
    pub slow_bytes: u64,
    /// Batches dropped as control markers or aborted transactions.
    pub dropped_control: u64,
    pub dropped_aborted: u64,
    pub produce_retries: u64,
    pub reconnects: u64,
    /// Bytes of fetch responses held in memory right now.
    pub buffered_bytes: u64,
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
    /// A record cannot fit the target topic's `max.message.bytes` even alone.
    RecordTooLarge,
    /// The source sent something we cannot forward (old format, corrupt batch).
    BadSourceData,
    /// The target refused the data for good (authorization, invalid records, ...).
    TargetRejected,
    /// Retriable errors persisted past `delivery.timeout.ms`.
    DeliveryTimeout,
    Other,
}

/// Shard → control.
#[derive(Debug)]
pub enum ShardEvent {
    /// Periodic report: progress of every partition, new mapping segments, counters.
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
    },
    /// A revoked partition is drained; `next_offset` is final.
    Revoked {
        shard: usize,
        key: PartitionKey,
        next_offset: i64,
        mappings: Vec<MappingSegment>,
    },
    /// The shard stopped (after `Shutdown`, or on a fatal error of its own).
    Stopped { shard: usize, error: Option<String> },
}
