//! Operator commands: what the API asks of the control loop, and the loop's answer. Every
//! command carries a oneshot reply, so that the API can tell the caller what happened (and a
//! full command queue is answered 503, never dropped).

use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

/// What an operator asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Stop fetching; what was fetched is still produced.
    Pause,
    /// Fetch and produce again (after pause or stop).
    Resume,
    /// Stop fetching and producing and flush the progress; offsets may be changed then.
    Stop,
}

impl Action {
    pub fn parse(s: &str) -> Option<Action> {
        match s {
            "pause" => Some(Action::Pause),
            "resume" => Some(Action::Resume),
            "stop" => Some(Action::Stop),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Action::Pause => "pause",
            Action::Resume => "resume",
            Action::Stop => "stop",
        }
    }
}

/// The partitions an action applies to: a flow, one of its topics, or one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    /// `source->target`.
    pub flow: String,
    pub topic: Option<String>,
    pub partition: Option<i32>,
}

/// One partition's new next offset; `None` resets it to the flow's `auto.offset.reset`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetChange {
    pub topic: String,
    pub partition: i32,
    pub offset: Option<i64>,
}

/// A request for the control loop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    Act {
        scope: Scope,
        action: Action,
    },
    /// The flow's stored progress.
    GetOffsets {
        flow: String,
    },
    /// Set (or reset) the next source offset of some partitions of a stopped flow.
    SetOffsets {
        flow: String,
        changes: Vec<OffsetChange>,
    },
    /// Re-read the config file and apply what changed (`POST /config/reload`).
    Reload,
}

/// One partition's stored progress, in the shape of Connect's `GET /connectors/{name}/offsets`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectOffset {
    pub partition: ConnectPartition,
    pub offset: Option<ConnectPosition>,
}

/// Connect's source partition of a MirrorMaker source task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectPartition {
    /// The source cluster's alias.
    pub cluster: String,
    pub topic: String,
    pub partition: i32,
}

/// The next source offset to replicate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectPosition {
    pub offset: i64,
}

/// One partition whose offset changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OffsetApplied {
    pub topic: String,
    pub partition: i32,
    pub before: i64,
    pub after: i64,
}

/// The control loop's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// The action was applied to these partitions (topic, partition).
    Acted {
        partitions: Vec<(String, i32)>,
    },
    Offsets(Vec<ConnectOffset>),
    OffsetsSet(Vec<OffsetApplied>),
    /// The configuration was re-read; what changed.
    Reloaded(crate::config::diff::ReloadPlan),
}

/// Why the control loop refused a command.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommandError {
    #[error("no flow {flow:?} (flows are named source->target, as in the config)")]
    UnknownFlow { flow: String },
    #[error("flow {flow} replicates no topic {topic:?}")]
    UnknownTopic { flow: String, topic: String },
    #[error("flow {flow} replicates no partition {topic}-{partition}")]
    UnknownPartition {
        flow: String,
        topic: String,
        partition: i32,
    },
    /// The scope is in a state that does not allow the command.
    #[error("{message}")]
    WrongState { message: String },
    #[error("{message}")]
    BadRequest { message: String },
    /// A shard or a cluster could not take the command now; try again.
    #[error("{message}")]
    Unavailable { message: String },
    /// A reloaded config file has errors (as `strait check` reports them, with key and line);
    /// the running configuration stays.
    #[error("{} has errors; the running configuration stays:\n{}", path, errors.join("\n"))]
    InvalidConfig { path: String, errors: Vec<String> },
    /// A reloaded config file changes settings fixed until strait restarts; nothing applied.
    /// Each of `keys` is `key (reason)`.
    #[error("{} cannot change without restarting strait; nothing was applied (the running configuration stays)", keys.join(", "))]
    RestartRequired { keys: Vec<String> },
}

impl CommandError {
    /// The HTTP status and `error_code` of this error.
    pub fn http(&self) -> (u16, &'static str) {
        match self {
            CommandError::UnknownFlow { .. } => (404, "unknown_flow"),
            CommandError::UnknownTopic { .. } => (404, "unknown_topic"),
            CommandError::UnknownPartition { .. } => (404, "unknown_partition"),
            CommandError::WrongState { .. } => (409, "wrong_state"),
            CommandError::BadRequest { .. } => (400, "bad_request"),
            CommandError::Unavailable { .. } => (503, "unavailable"),
            CommandError::InvalidConfig { .. } => (400, "invalid_config"),
            CommandError::RestartRequired { .. } => (409, "restart_required"),
        }
    }
}

/// A request with its reply channel and who sent it (for the log).
#[derive(Debug)]
pub struct ApiCommand {
    pub request: Request,
    /// The client's address, for the log.
    pub client: String,
    pub reply: oneshot::Sender<Result<Reply, CommandError>>,
}
