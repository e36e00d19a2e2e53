//! The REST API and Prometheus `/metrics`, served on `strait.api.listen`.
//!
//! The control loop publishes a [`Status`] snapshot when a handler asks for a fresh one
//! ([`Published::fresh`]) and every 10 s otherwise; the API reads snapshots (it never touches the control loop's state) and sends operator commands back over a
//! bounded channel, each with a oneshot reply. The contract of every route is in
//! `openapi.json` (served at `/openapi.json`). Endpoints:
//! - `GET /flows`, `/flows/{flow}`, `/flows/{flow}/partitions`: state per flow and partition.
//! - `PUT /flows/{flow}[/topics/{topic}[/partitions/{p}]]/pause|resume|stop`.
//! - `GET|PATCH|DELETE /flows/{flow}/offsets`: stored progress in Connect's shape.
//! - `POST /config/reload`: re-read the config file and apply what changed (as SIGHUP does).
//! - `GET /status`: every flow and partition, shard counters, the IO backend (pre-v1 shape).
//! - `GET /metrics`: the same numbers and more in Prometheus text format (`prometheus-client`;
//!   404 with `strait.metrics.enabled=false`).
//! - `POST /partitions/{flow}/{topic}/{partition}/pause|resume` (pre-v1).
//! - `GET /health/live`: 200 while the control loop publishes; `GET /health/ready` (and its
//!   alias `GET /health`): 200 while every partition runs, none failed and none has been stuck
//!   with lag past `strait.health.stall.timeout.ms` (see [`health`]).
//!
//! - [`status`]: the snapshot's types ([`Status`]).
//! - [`metrics`]: the snapshot in Prometheus text format ([`render_metrics`]).
//! - [`health`]: liveness and readiness from the snapshot.
//! - [`rest`]: the router and server ([`serve`]) and the snapshot shared with the control loop
//!   ([`Published`]).
//! - [`state`]: what the handlers share ([`Published`], the command queue, the access rule).
//! - [`v1`]: the REST v1 handlers and views.
//! - [`command`]: operator commands and the control loop's replies ([`ApiCommand`]).
//! - [`auth`]: the bearer token rule ([`Auth`]).
//! - [`tls`]: HTTPS with the key store of `strait.api.ssl.keystore.*` ([`ApiKeyStore`]).

pub mod auth;
pub mod command;
pub mod health;
pub mod metrics;
pub mod rest;
pub mod state;
pub mod status;
pub mod tls;
pub mod v1;

pub use auth::{ApiToken, Auth};
pub use command::{ApiCommand, CommandError, Reply, Request};
pub use metrics::render_metrics;
pub use rest::{ApiError, ROUTES, router, serve};
pub use state::Published;
pub use status::{
    ApiState, Delivery, FlowStatus, ObservabilitySettings, PartitionStatus, PartitionVerification,
    ShardStatus, StallStatus, Status,
};
pub use tls::{ApiKeyStore, ApiTlsError};
