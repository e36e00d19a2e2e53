//! REST API v1: flows and partitions with their state, pause/resume/stop at flow, topic and
//! partition scope, and the stored offsets in the shape of Kafka Connect's offsets API.
//!
//! Reads are answered from the published snapshot. Changes go to the control loop as
//! [`ApiCommand`]s with a oneshot reply: a full command queue answers 503, and what the loop
//! refuses comes back as a JSON error (`{"error_code", "message"}`; 400, 404, 409, 503).

use std::net::SocketAddr;
use std::time::Duration;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{ConnectInfo, Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};

use super::command::{
    Action, ApiCommand, CommandError, ConnectOffset, OffsetChange, Reply, Request, Scope,
};
use super::state::AppState;
use super::status::{
    ApiState, Delivery, FlowStatus, PartitionStatus, PartitionVerification, ShardStatus,
};
use crate::model::counters::TxnCounters;

/// How long a request waits for the control loop's answer.
const REPLY_TIMEOUT: Duration = Duration::from_secs(30);

/// The contract of every route (see [`super::rest::ROUTES`]).
pub const OPENAPI: &str = include_str!("openapi.json");

/// An error answer: `{"error_code", "message"}` with an HTTP status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub status: u16,
    pub error_code: &'static str,
    pub message: String,
}

impl Failure {
    pub fn new(status: u16, error_code: &'static str, message: impl Into<String>) -> Failure {
        Failure {
            status,
            error_code,
            message: message.into(),
        }
    }
}

impl From<CommandError> for Failure {
    fn from(e: CommandError) -> Failure {
        let (status, code) = e.http();
        Failure::new(status, code, e.to_string())
    }
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = serde_json::json!({"error_code": self.error_code, "message": self.message});
        (status, Json(body)).into_response()
    }
}

/// Any path that is not a route.
pub(super) async fn not_found() -> Failure {
    Failure::new(404, "not_found", "no such route (see /openapi.json)")
}

pub(super) async fn openapi() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], OPENAPI).into_response()
}

/// Partitions of a flow by state.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct StateCounts {
    pub running: usize,
    pub paused: usize,
    pub stopped: usize,
    pub failed: usize,
    pub not_assigned: usize,
}

/// A flow in `GET /flows` and `GET /flows/{flow}`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FlowView {
    pub name: String,
    pub source: String,
    pub target: String,
    /// `FAILED` when a partition failed; else `NOT_ASSIGNED` when no partition is assigned
    /// to this member (out of its group), `STOPPED` when every partition is stopped,
    /// `PAUSED` when every partition is paused or stopped, `RUNNING` otherwise.
    pub state: ApiState,
    pub partitions: usize,
    pub partition_states: StateCounts,
    pub lag_records: i64,
    /// The largest lag in time of its partitions, seconds.
    pub lag_seconds: f64,
    pub records_copied: u64,
    pub bytes_copied: u64,
    /// Continuous verification of its partitions (`strait.verify.enabled`); absent when off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verification: Option<FlowVerification>,
    pub delivery: Delivery,
    /// Its transactions (committed, aborted, fenced, commit latency) when it forwards
    /// exactly-once; absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transactions: Option<TxnCounters>,
}

/// What continuous verification found of a flow's partitions since this process started.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct FlowVerification {
    /// Partitions a round looked at.
    pub partitions: usize,
    pub records_verified: u64,
    /// Records missing, extra or different, all partitions together.
    pub mismatches: u64,
    /// The first difference of the first partition that has one (partition and offsets).
    pub first_mismatch: Option<String>,
}

/// A partition in `GET /flows/{flow}/partitions`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PartitionView {
    pub topic: String,
    pub partition: i32,
    pub remote_topic: String,
    pub state: ApiState,
    pub error: Option<String>,
    /// Why this member holds it not (`NOT_ASSIGNED` only).
    pub not_assigned_reason: Option<String>,
    /// Since when (ms since the epoch) the partition is in `state`.
    pub since_ms: i64,
    /// The source's end at the last fetch; -1 before the first.
    pub source_end_offset: i64,
    /// Every source record below this offset is on the target.
    pub next_offset: i64,
    pub lag_records: i64,
    /// Lag in time, seconds: 0 without lag; else the age of the oldest record not yet on the
    /// target (now minus its batch timestamp), or, before it is fetched, the time since the
    /// partition last made progress.
    pub lag_seconds: f64,
    /// Records copied since this process started.
    pub records_copied: u64,
    /// Batch bytes the target acknowledged since this process started.
    pub bytes_copied: u64,
    /// Source batches since this process started forwarded byte for byte (fast path) and
    /// rebuilt record by record (slow path; why is in the shard's `slow_batches_by_reason`).
    pub fast_batches: u64,
    pub slow_batches: u64,
    /// The shard that replicates it (its counters are in `GET /flows`).
    pub shard: usize,
    /// Continuous verification (`strait.verify.enabled`): records verified, mismatches, the
    /// last verified offset; absent when off or before the first round.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verification: Option<PartitionVerification>,
}

/// `GET /flows`: every flow, and the shards' counters (bytes copied, fast and slow path
/// batches), which are per shard, not per flow.
#[derive(Debug, Clone, Serialize)]
pub struct FlowsView {
    pub flows: Vec<FlowView>,
    pub shards: Vec<ShardStatus>,
}

fn flow_view(f: &FlowStatus) -> FlowView {
    let (source, target) = f
        .name
        .split_once("->")
        .map_or((f.name.clone(), String::new()), |(s, t)| {
            (s.to_string(), t.to_string())
        });
    let mut counts = StateCounts::default();
    for p in &f.partitions {
        match p.api_state {
            ApiState::Running => counts.running += 1,
            ApiState::Paused => counts.paused += 1,
            ApiState::Stopped => counts.stopped += 1,
            ApiState::Failed => counts.failed += 1,
            ApiState::NotAssigned => counts.not_assigned += 1,
        }
    }
    let n = f.partitions.len();
    let state = if counts.failed > 0 {
        ApiState::Failed
    } else if n > 0 && counts.not_assigned == n {
        ApiState::NotAssigned
    } else if n > 0 && counts.stopped == n {
        ApiState::Stopped
    } else if n > 0 && counts.stopped + counts.paused == n {
        ApiState::Paused
    } else {
        ApiState::Running
    };
    FlowView {
        name: f.name.clone(),
        source,
        target,
        state,
        partitions: n,
        partition_states: counts,
        lag_records: f.partitions.iter().map(|p| p.lag).sum(),
        lag_seconds: f.partitions.iter().map(|p| p.lag_ms).max().unwrap_or(0) as f64 / 1000.0,
        records_copied: f.partitions.iter().map(|p| p.records_copied).sum(),
        bytes_copied: f.partitions.iter().map(|p| p.bytes_copied).sum(),
        verification: flow_verification(f),
        delivery: f.delivery,
        transactions: f.transactions.clone(),
    }
}

/// The sum of the flow's partitions' verification (`None` when no partition has one).
fn flow_verification(f: &FlowStatus) -> Option<FlowVerification> {
    let verified: Vec<&PartitionVerification> = f
        .partitions
        .iter()
        .filter_map(|p| p.verification.as_ref())
        .collect();
    if verified.is_empty() {
        return None;
    }
    Some(FlowVerification {
        partitions: verified.len(),
        records_verified: verified.iter().map(|v| v.records_verified).sum(),
        mismatches: verified.iter().map(|v| v.mismatches).sum(),
        first_mismatch: verified.iter().find_map(|v| v.first_mismatch.clone()),
    })
}

fn partition_view(p: &PartitionStatus) -> PartitionView {
    PartitionView {
        topic: p.topic.clone(),
        partition: p.partition,
        remote_topic: p.remote_topic.clone(),
        state: p.api_state,
        error: p.error.clone(),
        not_assigned_reason: p.not_assigned_reason.clone(),
        since_ms: p.since_ms,
        source_end_offset: p.end_offset,
        next_offset: p.next_offset,
        lag_records: p.lag,
        lag_seconds: p.lag_ms as f64 / 1000.0,
        records_copied: p.records_copied,
        bytes_copied: p.bytes_copied,
        fast_batches: p.fast_batches,
        slow_batches: p.slow_batches,
        shard: p.shard,
        verification: p.verification.clone(),
    }
}

async fn find_flow(s: &AppState, flow: &str) -> Result<FlowStatus, Failure> {
    let (status, published) = s.published.fresh(super::state::READ_WAIT).await;
    if published.is_none() {
        return Err(Failure::new(
            503,
            "starting",
            "strait is starting; try again",
        ));
    }
    status
        .flows
        .into_iter()
        .find(|f| f.name == flow)
        .ok_or_else(|| CommandError::UnknownFlow { flow: flow.into() }.into())
}

pub(super) async fn flows(State(s): State<AppState>) -> Response {
    let (status, _) = s.published.fresh(super::state::READ_WAIT).await;
    Json(FlowsView {
        flows: status.flows.iter().map(flow_view).collect(),
        shards: status.shards,
    })
    .into_response()
}

pub(super) async fn flow(State(s): State<AppState>, Path(flow): Path<String>) -> Response {
    match find_flow(&s, &flow).await {
        Ok(f) => Json(flow_view(&f)).into_response(),
        Err(e) => e.into_response(),
    }
}

pub(super) async fn partitions(State(s): State<AppState>, Path(flow): Path<String>) -> Response {
    match find_flow(&s, &flow).await {
        Ok(f) => Json(serde_json::json!({
            "flow": f.name,
            "partitions": f.partitions.iter().map(partition_view).collect::<Vec<_>>(),
        }))
        .into_response(),
        Err(e) => e.into_response(),
    }
}

/// A partition number from a path.
pub(super) fn parse_partition(s: &str) -> Result<i32, Failure> {
    match s.parse::<i32>() {
        Ok(p) if p >= 0 => Ok(p),
        _ => Err(Failure::new(
            400,
            "bad_request",
            format!("{s:?} is not a partition number"),
        )),
    }
}

fn parse_action(s: &str) -> Result<Action, Failure> {
    Action::parse(s).ok_or_else(|| {
        Failure::new(
            404,
            "unknown_action",
            format!("unknown action {s:?}: use pause, resume or stop"),
        )
    })
}

/// Checks the caller may change things, sends `request` to the control loop and waits for its
/// answer.
pub(super) async fn mutate(
    s: &AppState,
    client: SocketAddr,
    headers: &HeaderMap,
    request: Request,
) -> Result<Reply, Failure> {
    let authorization = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    if let Err(denied) = s.auth.check(authorization) {
        let status = match denied {
            super::auth::Denied::Unauthorized => 401,
            super::auth::Denied::NoTokenOffLoopback => 403,
        };
        return Err(Failure::new(status, "unauthorized", denied.message()));
    }
    ask(&s.commands, client, request).await
}

/// Sends `request` to the control loop and waits for its answer: 503 when its queue is full
/// or it does not answer in time.
async fn ask(
    commands: &mpsc::Sender<ApiCommand>,
    client: SocketAddr,
    request: Request,
) -> Result<Reply, Failure> {
    let (tx, rx) = oneshot::channel();
    let cmd = ApiCommand {
        request,
        client: client.to_string(),
        reply: tx,
    };
    if let Err(e) = commands.try_send(cmd) {
        let message = match e {
            mpsc::error::TrySendError::Full(_) => "the control loop is busy; try again",
            mpsc::error::TrySendError::Closed(_) => "strait is stopping",
        };
        return Err(Failure::new(503, "busy", message));
    }
    match tokio::time::timeout(REPLY_TIMEOUT, rx).await {
        Ok(Ok(reply)) => reply.map_err(Failure::from),
        Ok(Err(_)) => Err(Failure::new(503, "busy", "strait is stopping")),
        Err(_) => Err(Failure::new(
            503,
            "busy",
            "the control loop did not answer in time; try again",
        )),
    }
}

fn acted(action: Action, reply: Result<Reply, Failure>) -> Response {
    match reply {
        Ok(Reply::Acted { partitions }) => Json(serde_json::json!({
            "action": action.name(),
            "partitions": partitions
                .iter()
                .map(|(t, p)| serde_json::json!({"topic": t, "partition": p}))
                .collect::<Vec<_>>(),
        }))
        .into_response(),
        Ok(_) => Failure::new(500, "internal", "unexpected answer").into_response(),
        Err(f) => f.into_response(),
    }
}

async fn act(
    s: &AppState,
    client: SocketAddr,
    headers: &HeaderMap,
    scope: Scope,
    action: &str,
) -> Response {
    let action = match parse_action(action) {
        Ok(a) => a,
        Err(f) => return f.into_response(),
    };
    acted(
        action,
        mutate(s, client, headers, Request::Act { scope, action }).await,
    )
}

pub(super) async fn act_flow(
    State(s): State<AppState>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path((flow, action)): Path<(String, String)>,
) -> Response {
    let scope = Scope {
        flow,
        topic: None,
        partition: None,
    };
    act(&s, client, &headers, scope, &action).await
}

pub(super) async fn act_topic(
    State(s): State<AppState>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path((flow, topic, action)): Path<(String, String, String)>,
) -> Response {
    let scope = Scope {
        flow,
        topic: Some(topic),
        partition: None,
    };
    act(&s, client, &headers, scope, &action).await
}

pub(super) async fn act_partition(
    State(s): State<AppState>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path((flow, topic, partition, action)): Path<(String, String, String, String)>,
) -> Response {
    let partition = match parse_partition(&partition) {
        Ok(p) => p,
        Err(f) => return f.into_response(),
    };
    let scope = Scope {
        flow,
        topic: Some(topic),
        partition: Some(partition),
    };
    act(&s, client, &headers, scope, &action).await
}

/// `GET /flows/{flow}/offsets`: the stored progress, as Connect's `{"offsets": [...]}`.
pub(super) async fn get_offsets(
    State(s): State<AppState>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    Path(flow): Path<String>,
) -> Response {
    match ask(&s.commands, client, Request::GetOffsets { flow }).await {
        Ok(Reply::Offsets(offsets)) => Json(OffsetsBody { offsets }).into_response(),
        Ok(_) => Failure::new(500, "internal", "unexpected answer").into_response(),
        Err(f) => f.into_response(),
    }
}

/// Connect's offsets body.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OffsetsBody {
    pub offsets: Vec<ConnectOffset>,
}

/// The changes of a PATCH (or DELETE) body. `reset` forces every offset to `None`.
fn changes(flow: &str, body: &[u8], reset: bool) -> Result<Vec<OffsetChange>, Failure> {
    let bad = |m: String| Failure::new(400, "bad_request", m);
    let parsed: OffsetsBody = serde_json::from_slice(body).map_err(|e| {
        bad(format!(
            "the body must be {{\"offsets\": [{{\"partition\": {{\"cluster\", \"topic\", \"partition\"}}, \"offset\": {{\"offset\"}}}}]}}: {e}"
        ))
    })?;
    let source = flow.split_once("->").map_or(flow, |(s, _)| s);
    let mut out = Vec::new();
    for o in parsed.offsets {
        if o.partition.cluster != source {
            return Err(bad(format!(
                "partition {}-{} names cluster {:?}; flow {flow} replicates from {source:?}",
                o.partition.topic, o.partition.partition, o.partition.cluster
            )));
        }
        let offset = if reset {
            None
        } else {
            o.offset.map(|p| p.offset)
        };
        if offset.is_some_and(|v| v < 0) {
            return Err(bad(format!(
                "offset {} of {}-{} is negative",
                offset.unwrap_or(0),
                o.partition.topic,
                o.partition.partition
            )));
        }
        out.push(OffsetChange {
            topic: o.partition.topic,
            partition: o.partition.partition,
            offset,
        });
    }
    if out.is_empty() && !reset {
        return Err(bad("no offsets given".into()));
    }
    Ok(out)
}

async fn set_offsets(
    s: &AppState,
    client: SocketAddr,
    headers: &HeaderMap,
    flow: String,
    changes: Vec<OffsetChange>,
) -> Response {
    match mutate(s, client, headers, Request::SetOffsets { flow, changes }).await {
        Ok(Reply::OffsetsSet(applied)) => Json(serde_json::json!({
            "message": "The offsets for this flow have been altered successfully",
            "changes": applied,
        }))
        .into_response(),
        Ok(_) => Failure::new(500, "internal", "unexpected answer").into_response(),
        Err(f) => f.into_response(),
    }
}

/// `PATCH /flows/{flow}/offsets`: set the next source offset of the given partitions (a
/// `null` offset resets one). Only while they are stopped.
pub(super) async fn patch_offsets(
    State(s): State<AppState>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(flow): Path<String>,
    body: Bytes,
) -> Response {
    match changes(&flow, &body, false) {
        Ok(c) => set_offsets(&s, client, &headers, flow, c).await,
        Err(f) => f.into_response(),
    }
}

/// `DELETE /flows/{flow}/offsets`: reset partitions to `auto.offset.reset`: those in the
/// body, or every partition of the flow without a body. Only while they are stopped.
pub(super) async fn delete_offsets(
    State(s): State<AppState>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(flow): Path<String>,
    body: Bytes,
) -> Response {
    let c = if body.iter().all(u8::is_ascii_whitespace) {
        Ok(Vec::new())
    } else {
        changes(&flow, &body, true)
    };
    match c {
        Ok(c) => set_offsets(&s, client, &headers, flow, c).await,
        Err(f) => f.into_response(),
    }
}

/// `POST /config/reload`: re-read the config file with `strait check`'s validation and apply
/// what changed; the answer says what (400 with the file's errors, 409 naming settings that
/// need a restart, and then nothing is applied).
pub(super) async fn reload(
    State(s): State<AppState>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Response {
    match mutate(&s, client, &headers, Request::Reload).await {
        Ok(Reply::Reloaded(plan)) => Json(serde_json::json!({
            "changed": !plan.is_empty(),
            "summary": plan.summary(),
            "added": plan.added,
            "removed": plan.removed,
            "restarted": plan.restarted,
            "updated": plan.updated,
            "heartbeats": plan.heartbeats,
        }))
        .into_response(),
        Ok(_) => Failure::new(500, "internal", "unexpected answer").into_response(),
        Err(f) => f.into_response(),
    }
}
