//! The REST API and Prometheus `/metrics`, served on `strait.api.listen`.
//!
//! The control loop publishes a [`Status`] snapshot about once a second; the API only reads
//! snapshots (it never touches the control loop's state) and sends operator commands back over a
//! bounded channel. Endpoints:
//! - `GET /status`: every flow and partition: progress, end offset, lag, state, error; shard
//!   counters; the IO backend.
//! - `GET /metrics`: the same numbers in Prometheus text format.
//! - `POST /partitions/{flow}/{topic}/{partition}/pause` and `.../resume`.
//! - `GET /health`: 200 while the control loop publishes, 503 when its snapshot is stale.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Serialize;
use strait_dataplane::shard::ShardStats;
use tokio::sync::mpsc;

/// One partition as the API shows it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
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
    /// `replicating`, `paused` or `failed`.
    pub state: String,
    pub error: Option<String>,
    pub shard: usize,
}

/// One flow as the API shows it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct FlowStatus {
    /// `source->target`.
    pub name: String,
    pub partitions: Vec<PartitionStatus>,
}

/// Counters of one shard (cumulative since start).
#[derive(Debug, Clone, Serialize, PartialEq, Eq, Default)]
pub struct ShardStatus {
    pub shard: usize,
    pub fetch_requests: u64,
    pub fetch_bytes: u64,
    pub produce_requests: u64,
    pub produced_batches: u64,
    pub produced_records: u64,
    pub produced_bytes: u64,
    pub fast_batches: u64,
    pub slow_batches: u64,
    pub slow_bytes: u64,
    pub dropped_control: u64,
    pub dropped_aborted: u64,
    pub produce_retries: u64,
    pub reconnects: u64,
    pub buffered_bytes: u64,
}

impl ShardStatus {
    pub fn from_stats(shard: usize, s: &ShardStats) -> Self {
        ShardStatus {
            shard,
            fetch_requests: s.fetch_requests,
            fetch_bytes: s.fetch_bytes,
            produce_requests: s.produce_requests,
            produced_batches: s.produced_batches,
            produced_records: s.produced_records,
            produced_bytes: s.produced_bytes,
            fast_batches: s.fast_batches,
            slow_batches: s.slow_batches,
            slow_bytes: s.slow_bytes,
            dropped_control: s.dropped_control,
            dropped_aborted: s.dropped_aborted,
            produce_retries: s.produce_retries,
            reconnects: s.reconnects,
            buffered_bytes: s.buffered_bytes,
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
}

/// An operator request for the control loop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiCommand {
    Pause {
        flow: String,
        topic: String,
        partition: i32,
    },
    Resume {
        flow: String,
        topic: String,
        partition: i32,
    },
}

/// The snapshot shared between the control loop and the API.
#[derive(Debug, Clone, Default)]
pub struct Published {
    inner: Arc<Mutex<(Status, Option<Instant>)>>,
}

impl Published {
    pub fn publish(&self, status: Status, now: Instant) {
        if let Ok(mut g) = self.inner.lock() {
            *g = (status, Some(now));
        }
    }

    pub fn snapshot(&self) -> (Status, Option<Instant>) {
        self.inner
            .lock()
            .map(|g| g.clone())
            .unwrap_or_else(|e| e.into_inner().clone())
    }
}

#[derive(Clone)]
struct AppState {
    published: Published,
    commands: mpsc::Sender<ApiCommand>,
}

/// The router (separate from [`serve`] for tests).
pub fn router(published: Published, commands: mpsc::Sender<ApiCommand>) -> Router {
    Router::new()
        .route("/status", get(status))
        .route("/metrics", get(metrics))
        .route("/health", get(health))
        .route(
            "/partitions/{flow}/{topic}/{partition}/{action}",
            post(partition_action),
        )
        .with_state(AppState {
            published,
            commands,
        })
}

/// Binds `addr` and serves until the runtime stops. Returns the bound address (port 0 picks
/// one). Binding errors name the address.
pub async fn serve(
    addr: SocketAddr,
    published: Published,
    commands: mpsc::Sender<ApiCommand>,
) -> Result<SocketAddr, String> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen on {addr} (strait.api.listen): {e}"))?;
    let bound = listener
        .local_addr()
        .map_err(|e| format!("cannot read the API address: {e}"))?;
    let app = router(published, commands);
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!(error = %e, "the REST API stopped");
        }
    });
    Ok(bound)
}

async fn status(State(s): State<AppState>) -> Response {
    let (status, _) = s.published.snapshot();
    axum::Json(status).into_response()
}

async fn metrics(State(s): State<AppState>) -> Response {
    let (status, _) = s.published.snapshot();
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        render_metrics(&status),
    )
        .into_response()
}

/// A snapshot older than this means the control loop is stuck.
const STALE_AFTER: Duration = Duration::from_secs(30);

async fn health(State(s): State<AppState>) -> Response {
    match s.published.snapshot().1 {
        Some(t) if t.elapsed() < STALE_AFTER => (StatusCode::OK, "ok\n").into_response(),
        Some(_) => (StatusCode::SERVICE_UNAVAILABLE, "control loop stalled\n").into_response(),
        None => (StatusCode::SERVICE_UNAVAILABLE, "starting\n").into_response(),
    }
}

async fn partition_action(
    State(s): State<AppState>,
    Path((flow, topic, partition, action)): Path<(String, String, i32, String)>,
) -> Response {
    let cmd = match action.as_str() {
        "pause" => ApiCommand::Pause {
            flow,
            topic,
            partition,
        },
        "resume" => ApiCommand::Resume {
            flow,
            topic,
            partition,
        },
        other => {
            return (
                StatusCode::NOT_FOUND,
                format!("unknown action {other:?}: use pause or resume\n"),
            )
                .into_response();
        }
    };
    match s.commands.try_send(cmd) {
        Ok(()) => (StatusCode::ACCEPTED, "accepted\n").into_response(),
        Err(_) => (
            StatusCode::SERVICE_UNAVAILABLE,
            "the control loop is busy; try again\n",
        )
            .into_response(),
    }
}

/// Prometheus text exposition (format 0.0.4) of a snapshot.
pub fn render_metrics(s: &Status) -> String {
    fn family(out: &mut String, name: &'static str, kind: &str, help: &str) -> &'static str {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        name
    }
    let mut out = String::new();
    let n = family(
        &mut out,
        "strait_info",
        "gauge",
        "strait version and IO backend.",
    );
    let _ = writeln!(
        out,
        "{n}{{version=\"{}\",io_backend=\"{}\"}} 1",
        esc(&s.version),
        esc(&s.io_backend)
    );

    type ShardCounter = (&'static str, &'static str, fn(&ShardStatus) -> u64);
    let shard_counters: [ShardCounter; 13] = [
        ("strait_fetch_requests_total", "Fetch requests sent.", |x| {
            x.fetch_requests
        }),
        (
            "strait_fetch_bytes_total",
            "Fetch response bytes received.",
            |x| x.fetch_bytes,
        ),
        (
            "strait_produce_requests_total",
            "Produce requests sent.",
            |x| x.produce_requests,
        ),
        (
            "strait_produced_batches_total",
            "Batches acknowledged by the target.",
            |x| x.produced_batches,
        ),
        (
            "strait_produced_records_total",
            "Records acknowledged by the target.",
            |x| x.produced_records,
        ),
        (
            "strait_produced_bytes_total",
            "Batch bytes acknowledged by the target.",
            |x| x.produced_bytes,
        ),
        (
            "strait_fast_path_batches_total",
            "Batches forwarded with only the header rewritten.",
            |x| x.fast_batches,
        ),
        (
            "strait_slow_path_batches_total",
            "Batches rebuilt (decoded and re-encoded).",
            |x| x.slow_batches,
        ),
        (
            "strait_slow_path_bytes_total",
            "Source bytes of rebuilt batches.",
            |x| x.slow_bytes,
        ),
        (
            "strait_dropped_control_batches_total",
            "Transaction markers not replicated.",
            |x| x.dropped_control,
        ),
        (
            "strait_dropped_aborted_batches_total",
            "Batches of aborted transactions not replicated.",
            |x| x.dropped_aborted,
        ),
        (
            "strait_produce_retries_total",
            "Batches resent after a retriable failure.",
            |x| x.produce_retries,
        ),
        (
            "strait_reconnects_total",
            "Broker connections lost and reopened.",
            |x| x.reconnects,
        ),
    ];
    for (name, help, get) in shard_counters {
        let n = family(&mut out, name, "counter", help);
        for sh in &s.shards {
            let _ = writeln!(out, "{n}{{shard=\"{}\"}} {}", sh.shard, get(sh));
        }
    }
    let n = family(
        &mut out,
        "strait_buffered_bytes",
        "gauge",
        "Fetched bytes held in memory, per shard.",
    );
    for sh in &s.shards {
        let _ = writeln!(out, "{n}{{shard=\"{}\"}} {}", sh.shard, sh.buffered_bytes);
    }

    type PartGauge = fn(&PartitionStatus) -> i64;
    let part_gauges: [(&'static str, &'static str, PartGauge); 4] = [
        (
            "strait_partition_next_offset",
            "Next source offset to replicate.",
            |p| p.next_offset,
        ),
        (
            "strait_partition_end_offset",
            "Source end offset at the last fetch.",
            |p| p.end_offset,
        ),
        (
            "strait_partition_lag_records",
            "Records not yet replicated.",
            |p| p.lag,
        ),
        (
            "strait_partition_failed",
            "1 when the partition stopped with an error.",
            |p| i64::from(p.state == "failed"),
        ),
    ];
    for (name, help, get) in part_gauges {
        let n = family(&mut out, name, "gauge", help);
        for f in &s.flows {
            for p in &f.partitions {
                let _ = writeln!(
                    out,
                    "{n}{{flow=\"{}\",topic=\"{}\",partition=\"{}\"}} {}",
                    esc(&f.name),
                    esc(&p.topic),
                    p.partition,
                    get(p)
                );
            }
        }
    }
    let n = family(
        &mut out,
        "strait_lost_position_resets_total",
        "counter",
        "Partitions restarted from the earliest offset after their position was lost.",
    );
    let _ = writeln!(out, "{n} {}", s.lost_position_resets);
    out
}

/// Escapes a label value (backslash, double quote, newline).
fn esc(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    fn sample() -> Status {
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
                }],
            }],
            shards: vec![ShardStatus {
                shard: 1,
                produced_records: 40,
                ..ShardStatus::default()
            }],
            lost_position_resets: 2,
        }
    }

    #[test]
    fn metrics_text_format() {
        let text = render_metrics(&sample());
        assert!(text.contains("# TYPE strait_produced_records_total counter\n"));
        assert!(text.contains("strait_produced_records_total{shard=\"1\"} 40\n"));
        assert!(text.contains(
            "strait_partition_lag_records{flow=\"A->B\",topic=\"orders\\\"x\",partition=\"3\"} 60\n"
        ));
        assert!(text.contains(
            "strait_partition_failed{flow=\"A->B\",topic=\"orders\\\"x\",partition=\"3\"} 1\n"
        ));
        assert!(text.contains("strait_lost_position_resets_total 2\n"));
        // Every sample line belongs to a declared family.
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let name = line.split(['{', ' ']).next().unwrap();
            assert!(text.contains(&format!("# TYPE {name} ")), "{line}");
        }
    }

    fn http(addr: SocketAddr, request: &str) -> String {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.write_all(request.as_bytes()).unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    }

    #[test]
    fn serves_status_metrics_and_commands() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let published = Published::default();
        let (tx, mut rx) = mpsc::channel(4);
        let addr = rt
            .block_on(serve("127.0.0.1:0".parse().unwrap(), published.clone(), tx))
            .unwrap();
        let starting = http(
            addr,
            "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        );
        assert!(starting.starts_with("HTTP/1.1 503"), "{starting}");
        published.publish(sample(), Instant::now());
        let health = http(
            addr,
            "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        );
        assert!(health.starts_with("HTTP/1.1 200"), "{health}");
        let status = http(
            addr,
            "GET /status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        );
        assert!(status.contains("\"remote_topic\":\"A.orders\""), "{status}");
        let metrics = http(
            addr,
            "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        );
        assert!(
            metrics.contains("strait_partition_next_offset"),
            "{metrics}"
        );
        let pause = http(
            addr,
            "POST /partitions/A-%3EB/orders/3/pause HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        );
        assert!(pause.starts_with("HTTP/1.1 202"), "{pause}");
        assert_eq!(
            rx.try_recv().unwrap(),
            ApiCommand::Pause {
                flow: "A->B".into(),
                topic: "orders".into(),
                partition: 3
            }
        );
        let bad = http(
            addr,
            "POST /partitions/A-%3EB/orders/3/explode HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        );
        assert!(bad.starts_with("HTTP/1.1 404"), "{bad}");
    }
}
