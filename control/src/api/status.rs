//! The status snapshot the control loop publishes: what `/status` serves as JSON and
//! `/metrics` renders.

use std::collections::BTreeMap;

use serde::Serialize;
use strait_dataplane::shard::{LatencyHistogram, ShardStats};

use crate::model::counters::{HeartbeatCounters, OffsetsCounters, TopicCounters, TxnCounters};
pub use crate::verify::continuous::PartitionVerification;

/// What a flow promises the target's consumers.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum Delivery {
    /// Nothing lost; after a crash or a lapse some records may be copied twice.
    #[default]
    AtLeastOnce,
    /// `<target>.exactly.once.source.support = enabled`: read_committed consumers of the target
    /// see every record once.
    ExactlyOnce,
}

impl Delivery {
    pub fn name(self) -> &'static str {
        match self {
            Delivery::AtLeastOnce => "at_least_once",
            Delivery::ExactlyOnce => "exactly_once",
        }
    }
}

/// A partition's state in the REST API v1 (`/flows/...`).
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq, Default)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ApiState {
    /// Fetching and producing.
    #[default]
    Running,
    /// Paused by an operator (fetching stops; what was fetched is still produced), or held
    /// while its source topic is gone.
    Paused,
    /// Stopped by an operator: nothing fetched or produced, progress flushed; its offsets may
    /// be changed.
    Stopped,
    /// Stopped by an error (in `error`).
    Failed,
    /// Held by no shard of this member, which is out of its group (its session lapsed or it
    /// was fenced: the target or the group's coordinator does not answer); why is in
    /// `not_assigned_reason`. Listed with its last known position and the source end, so
    /// that the lag shows during the outage.
    NotAssigned,
}

impl ApiState {
    /// Every state, in the order `/metrics` lists them.
    pub const ALL: [ApiState; 5] = [
        ApiState::Running,
        ApiState::Paused,
        ApiState::Stopped,
        ApiState::Failed,
        ApiState::NotAssigned,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ApiState::Running => "RUNNING",
            ApiState::Paused => "PAUSED",
            ApiState::Stopped => "STOPPED",
            ApiState::Failed => "FAILED",
            ApiState::NotAssigned => "NOT_ASSIGNED",
        }
    }
}

/// Why a partition cannot make progress, as the data plane sees it, and since when.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, Default)]
pub struct StallStatus {
    /// `target_unreachable`, `target_leader_unknown`, `not_enough_replicas`, `target_error`,
    /// `producer_id_unavailable`, `source_unreachable`, `source_leader_unknown`,
    /// `source_error` or `memory_budget`.
    pub reason: String,
    /// The last error, in words (names the broker or cluster).
    pub detail: String,
    /// Since when (ms since the epoch).
    pub since_ms: i64,
}

/// One partition as the API shows it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, Default)]
pub struct PartitionStatus {
    pub topic: String,
    pub partition: i32,
    pub remote_topic: String,
    /// Every source record below this offset is replicated.
    pub next_offset: i64,
    /// The source's end (high watermark, or last stable offset under read_committed); -1 before
    /// the first fetch.
    pub end_offset: i64,
    /// `end_offset - next_offset`, 0 when unknown.
    pub lag: i64,
    /// `replicating`, `paused`, `failed` or `not_assigned`.
    pub state: String,
    pub error: Option<String>,
    /// Why no shard of this member holds it (`not_assigned` only).
    pub not_assigned_reason: Option<String>,
    pub shard: usize,
    /// The v1 state (`RUNNING`, `PAUSED`, `STOPPED`, `FAILED`, `NOT_ASSIGNED`).
    pub api_state: ApiState,
    /// Since when (ms since the epoch) the partition is in `api_state`.
    pub since_ms: i64,
    /// Records copied to the target since this process started (from the acknowledged
    /// mapping segments).
    pub records_copied: u64,
    /// Batch bytes the target acknowledged since this process started.
    pub bytes_copied: u64,
    /// Source batches fetched since this process started and forwarded byte for byte (only
    /// the header rewritten).
    pub fast_batches: u64,
    /// Source batches fetched since this process started and rebuilt record by record (why:
    /// per shard, `slow_batches_by_reason`).
    pub slow_batches: u64,
    /// Lag in time, ms: 0 without lag; else the age of the oldest record not yet on the target
    /// when it is fetched (now minus its batch timestamp), or, when nothing is fetched yet, the
    /// time since the partition last made progress (acknowledged records, or had no lag).
    pub lag_ms: i64,
    /// Why it cannot make progress right now (from the shard), if it cannot.
    pub stall: Option<StallStatus>,
    /// Since when (ms since the epoch) it has lag without progress (nothing acknowledged);
    /// `None` while it has no lag or moves. Paused, stopped and failed partitions: `None`.
    pub stuck_since_ms: Option<i64>,
    /// Continuous verification (`strait.verify.enabled`); `None` when it is off or has not
    /// looked at the partition yet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verification: Option<PartitionVerification>,
}

/// One flow as the API shows it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, Default)]
pub struct FlowStatus {
    /// `source->target`.
    pub name: String,
    pub delivery: Delivery,
    /// Its transactions, when it forwards exactly-once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transactions: Option<TxnCounters>,
    pub partitions: Vec<PartitionStatus>,
    /// Offset syncs, checkpoints and group-offset sync.
    pub offsets: OffsetsCounters,
    /// Topic, config and ACL sync.
    pub topic_sync: TopicCounters,
    /// Record age when fetched (`record-age-ms`), all shards together.
    #[serde(skip)]
    pub record_age: LatencyHistogram,
    /// Source record timestamp to the target's acknowledgement (`replication-latency-ms`).
    #[serde(skip)]
    pub replication_latency: LatencyHistogram,
}

/// Counters of one shard (cumulative since start).
#[derive(Debug, Clone, Serialize, PartialEq, Eq, Default)]
pub struct ShardStatus {
    pub shard: usize,
    pub fetch_requests: u64,
    pub fetch_bytes: u64,
    /// Fetch requests naming every partition of their group (opening a fetch session, or
    /// without one) and incremental ones (KIP-227: only what changed), and fetch sessions
    /// ended by an error or a lost request.
    pub full_fetches: u64,
    pub incremental_fetches: u64,
    pub fetch_session_resets: u64,
    pub produce_requests: u64,
    pub produced_batches: u64,
    pub produced_records: u64,
    pub produced_bytes: u64,
    pub fast_batches: u64,
    pub slow_batches: u64,
    /// `slow_batches` by reason (`old_format`, `not_dense`, `starts_before_next_offset`,
    /// `log_append_time`, `too_large`).
    pub slow_batches_by_reason: BTreeMap<String, u64>,
    pub slow_bytes: u64,
    /// Source batches under a sixteenth of `batch.size` merged behind a full produce window,
    /// and the batches they became.
    pub merged_batches: u64,
    pub merges: u64,
    pub dropped_control: u64,
    pub dropped_aborted: u64,
    pub produce_retries: u64,
    pub reconnects: u64,
    pub request_timeouts: u64,
    pub buffered_bytes: u64,
    /// The budget for `buffered_bytes` (the shard's share of `strait.memory.bytes`).
    pub memory_budget_bytes: u64,
    /// Commands of the control loop its channel did not take yet (they wait, in order).
    pub commands_waiting: u64,
    /// While commands wait: since when it took none (ms since the epoch). Past
    /// `strait.health.stall.timeout.ms`, `/health/ready` fails.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commands_taken_none_since_ms: Option<i64>,
}

impl ShardStatus {
    pub fn from_stats(shard: usize, s: &ShardStats) -> Self {
        ShardStatus {
            shard,
            fetch_requests: s.fetch_requests,
            fetch_bytes: s.fetch_bytes,
            full_fetches: s.full_fetches,
            incremental_fetches: s.incremental_fetches,
            fetch_session_resets: s.fetch_session_resets,
            produce_requests: s.produce_requests,
            produced_batches: s.produced_batches,
            produced_records: s.produced_records,
            produced_bytes: s.produced_bytes,
            fast_batches: s.fast_batches,
            slow_batches: s.slow_batches,
            slow_batches_by_reason: s
                .slow_reasons
                .by_name()
                .into_iter()
                .map(|(reason, n)| (reason.to_string(), n))
                .collect(),
            slow_bytes: s.slow_bytes,
            merged_batches: s.merged_batches,
            merges: s.merges,
            dropped_control: s.dropped_control,
            dropped_aborted: s.dropped_aborted,
            produce_retries: s.produce_retries,
            reconnects: s.reconnects,
            request_timeouts: s.request_timeouts,
            buffered_bytes: s.buffered_bytes,
            memory_budget_bytes: s.memory_budget_bytes,
            // Set by the control loop from its outbox.
            commands_waiting: 0,
            commands_taken_none_since_ms: None,
        }
    }
}

/// One member of the group, as the leader last assigned it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, Default)]
pub struct GroupMemberStatus {
    pub member_id: String,
    /// Units assigned (source partitions, plus the singleton duties on one member).
    pub units: u32,
    /// Bytes per second the target acknowledged for the member over 10 s: this member's own
    /// figure is measured every 10 s; another member's is what it reported at its last join
    /// (the group protocol carries nothing between joins: ask that member for its own).
    pub throughput_bytes_per_sec: u64,
    /// When `throughput_bytes_per_sec` was measured (ms since the epoch).
    pub throughput_at_ms: i64,
}

/// The last completed rebalance.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, Default)]
pub struct RebalanceStatus {
    /// Why it started (this member's reason for joining, or the coordinator's).
    pub cause: String,
    /// From this member's JoinGroup to its assignment.
    pub duration_ms: u64,
    /// When it completed (ms since the epoch).
    pub at_ms: i64,
}

/// The group this process is a member of (`strait.group.id`).
#[derive(Debug, Clone, Serialize, PartialEq, Eq, Default)]
pub struct GroupStatus {
    pub group_id: String,
    /// The cluster whose group coordinator runs the group (`strait.group.cluster`).
    pub cluster: String,
    /// `joining`, `stable`, `lapsed` (no successful heartbeat within the local session
    /// deadline: holds nothing) or `refused`.
    pub state: String,
    /// Since when it is in `state` (ms since the epoch; 0 before the first change).
    pub state_since_ms: i64,
    pub member_id: String,
    pub leader: String,
    pub generation: i32,
    pub members: Vec<GroupMemberStatus>,
    /// This member's units, as `flow topic-partition` (and `singleton duties`).
    pub assignment: Vec<String>,
    /// Whether this member runs the singleton duties.
    pub singleton: bool,
    pub rebalances: u64,
    pub last_rebalance: Option<RebalanceStatus>,
}

impl GroupStatus {
    /// Moves to `state`, keeping the time of the last change of state.
    pub fn set_state(&mut self, state: &str, now_ms: i64) {
        if self.state != state {
            self.state = state.to_string();
            self.state_since_ms = now_ms;
        }
    }
}

/// What the control loop publishes.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, Default)]
pub struct Status {
    pub version: String,
    /// `uring` or `epoll`.
    pub io_backend: String,
    pub flows: Vec<FlowStatus>,
    pub shards: Vec<ShardStatus>,
    /// Partitions restarted from the earliest offset after a lost position
    /// (`strait.on.lost.position=earliest`).
    pub lost_position_resets: u64,
    /// When the control loop made this snapshot (ms since the epoch); `/status` adds its age.
    pub generated_at_ms: i64,
    /// Every herder pair's heartbeats.
    pub heartbeats: Vec<HeartbeatCounters>,
    /// How `/metrics` and `/health/ready` use the snapshot.
    pub settings: ObservabilitySettings,
    /// The group of instances sharing the work (absent when the run is not in a group).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<GroupStatus>,
}

/// The settings of `/metrics` and `/health/ready`.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
pub struct ObservabilitySettings {
    /// `strait.metrics.enabled`.
    pub metrics_enabled: bool,
    /// `strait.metrics.per.partition`.
    pub metrics_per_partition: bool,
    /// `strait.health.stall.timeout.ms`.
    pub stall_timeout_ms: u64,
}

impl Default for ObservabilitySettings {
    fn default() -> Self {
        ObservabilitySettings {
            metrics_enabled: true,
            metrics_per_partition: true,
            stall_timeout_ms: 60_000,
        }
    }
}

/// A snapshot with one flow, one failed partition and one shard, for tests.
#[cfg(test)]
pub(crate) fn sample() -> Status {
    Status {
        version: "0.1.0".into(),
        io_backend: "uring".into(),
        flows: vec![FlowStatus {
            name: "A->B".into(),
            partitions: vec![PartitionStatus {
                topic: "orders\"x".into(),
                partition: 3,
                remote_topic: "A.orders".into(),
                next_offset: 40,
                end_offset: 100,
                lag: 60,
                state: "failed".into(),
                error: Some("boom".into()),
                shard: 1,
                api_state: ApiState::Failed,
                since_ms: 1_700_000_000_000,
                records_copied: 40,
                bytes_copied: 4_000,
                lag_ms: 1_500,
                ..PartitionStatus::default()
            }],
            ..FlowStatus::default()
        }],
        shards: vec![ShardStatus {
            shard: 1,
            produced_records: 40,
            slow_batches_by_reason: [("old_format".to_string(), 7)].into(),
            ..ShardStatus::default()
        }],
        lost_position_resets: 2,
        generated_at_ms: 1_700_000_000_000,
        ..Status::default()
    }
}
