//! Shards: one thread per core, each owning a disjoint set of source partitions, its own
//! connections, its own idempotent producer per target cluster, its own buffers and counters.
//!
//! - [`channel`]: the commands and events exchanged with the control thread.
//! - [`partition`]: the sans-IO state machine of one partition (fetch → filter → classify →
//!   rewrite or rebuild → produce → acknowledge).
//! - [`run`]: the event loop that does the IO around those state machines.
#![forbid(unsafe_code)]

pub mod channel;
pub mod meta;
pub mod partition;
pub mod run;

pub use channel::{
    Assignment, ClusterEndpoint, FailureKind, FetchSettings, FlowId, MappingSegment, PartitionKey,
    PartitionProgress, ProduceSettings, ShardCommand, ShardEvent, ShardStats,
};
pub use run::{ShardConfig, ShardHandle, spawn_shard};

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
