//! Several `strait run` processes with the same configuration share the work through Kafka's
//! own group membership (JoinGroup, SyncGroup, Heartbeat, LeaveGroup on the coordination
//! cluster, protocol type [`PROTOCOL_TYPE`]). Everything here is pure (sans-IO): bytes and
//! time in, requests and decisions out. The IO is `cluster::group` (the requests) and
//! `run::group` (the agent and the control loop's side).
//!
//! - [`codec`]: what a member tells the leader (flow digest, per-key digests, throughput, the
//!   units it owns) and what the leader tells each member (its units, or why it is refused).
//! - [`assignment`]: the leader's balanced, sticky, incremental cooperative assignment.
//! - [`membership`]: the member's state machine (join, sync, heartbeat, rejoin, fencing and the
//!   local session deadline).
//! - [`digest`]: the digest of the configuration that every member must share.
#![deny(clippy::disallowed_methods)]

pub mod assignment;
pub mod codec;
pub mod digest;
pub mod membership;

use std::fmt;

/// The group protocol type strait registers with the coordinator (no Kafka consumer or Connect
/// worker can join a group of this type by mistake).
pub const PROTOCOL_TYPE: &str = "strait";
/// The one assignment protocol strait members offer.
pub const PROTOCOL_NAME: &str = "strait-cooperative-v1";

/// A unit of work the leader assigns.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Unit {
    /// The singleton duties: topic discovery's target changes (creation, growth), config and
    /// ACL sync, MM2's heartbeats.
    Singleton,
    /// One source partition of one flow (`flow` as in the file: `A->B`).
    Partition {
        flow: String,
        topic: String,
        partition: i32,
    },
}

impl Unit {
    pub fn partition(flow: &str, topic: &str, partition: i32) -> Unit {
        Unit::Partition {
            flow: flow.to_string(),
            topic: topic.to_string(),
            partition,
        }
    }
}

impl fmt::Display for Unit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unit::Singleton => f.write_str("singleton duties"),
            Unit::Partition {
                flow,
                topic,
                partition,
            } => write!(f, "{flow} {topic}-{partition}"),
        }
    }
}
