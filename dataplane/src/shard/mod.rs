//! Shards: one thread per core, each owning a disjoint set of source partitions, its own
//! connections, its own idempotent producer per target cluster, its own buffers and counters.
//!
//! - [`channel`]: the commands and events exchanged with the control thread, and the settings.
//! - [`partition`]: the sans-IO state machine of one partition (fetch → filter → classify →
//!   rewrite or rebuild → produce → acknowledge).
//! - [`fetch_session`]: KIP-227 fetch sessions: which partitions a fetch names and forgets.
//! - [`fetch_size`]: how many bytes a partition asks for per fetch (grows while it is behind).
//! - [`core`]: the sans-IO state machine of the whole shard (routing, connections, fetch and
//!   produce requests, retries, deadlines, stall reasons), around the partitions.
//! - [`backoff`]: exponential backoff with jitter, and one log line per incident.
//! - [`driver`]: the thin IO loop that runs the core on tokio-uring or epoll.
//! - [`meta`]: leader lookups and producer ids on a fresh connection (IO, used by the driver).
//! - [`timing`]: record age and replication latency histograms (bucket counts per flow).
#![forbid(unsafe_code)]

pub mod backoff;
pub mod channel;
pub mod core;
pub mod driver;
pub mod fetch_session;
pub mod fetch_size;
pub mod meta;
pub mod partition;
#[cfg(test)]
mod sim;
pub mod timing;

pub use channel::{
    Acks, Assignment, BackoffSettings, ClusterEndpoint, FailureKind, FetchSettings, FlowId,
    IsolationLevel, MappingSegment, PartitionKey, PartitionProgress, PathCounts, ProduceSettings,
    ShardCommand, ShardConfig, ShardEvent, ShardStats, Stall, StallReason, Transactional,
};
pub use driver::{ShardHandle, spawn_shard};
pub use timing::{FlowTimings, LatencyHistogram, WallClock};

use kafka_protocol::ResponseError;

/// Errors that mean our idea of a partition's leader is stale.
pub fn is_routing_error(e: ResponseError) -> bool {
    matches!(
        e,
        ResponseError::NotLeaderOrFollower
            | ResponseError::LeaderNotAvailable
            | ResponseError::UnknownTopicOrPartition
            | ResponseError::FencedLeaderEpoch
            | ResponseError::UnknownLeaderEpoch
            | ResponseError::KafkaStorageError
    )
}
