//! The HTTP side: the router, the server, the shared snapshot, and the routes that are not
//! REST v1 (`/status`, `/metrics`, `/health`, the legacy partition pause/resume).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::{ConnectInfo, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use tokio::sync::mpsc;

use super::auth::Auth;
use super::command::{Action, ApiCommand, Request, Scope};
use super::health;
use super::metrics::render_metrics;
use super::state::{AppState, Published};
use super::tls::TlsListener;
use super::v1;

/// Every route served, as `(method, path)`; `/openapi.json` describes each (a test checks it).
pub const ROUTES: &[(&str, &str)] = &[
    ("get", "/status"),
    ("get", "/metrics"),
    ("get", "/health"),
    ("get", "/health/live"),
    ("get", "/health/ready"),
    ("get", "/openapi.json"),
    ("get", "/flows"),
    ("get", "/flows/{flow}"),
    ("get", "/flows/{flow}/partitions"),
    ("put", "/flows/{flow}/{action}"),
    ("put", "/flows/{flow}/topics/{topic}/{action}"),
    (
        "put",
        "/flows/{flow}/topics/{topic}/partitions/{partition}/{action}",
    ),
    ("get", "/flows/{flow}/offsets"),
    ("patch", "/flows/{flow}/offsets"),
    ("delete", "/flows/{flow}/offsets"),
    ("post", "/partitions/{flow}/{topic}/{partition}/{action}"),
    ("post", "/config/reload"),
];

/// The router (separate from [`serve`] for tests). Requests must carry
/// `ConnectInfo<SocketAddr>` (as [`serve`] sets up).
pub fn router(published: Published, commands: mpsc::Sender<ApiCommand>, auth: Auth) -> Router {
    Router::new()
        .route("/status", get(status))
        .route("/metrics", get(metrics))
        .route("/health", get(health_ready))
        .route("/health/live", get(health_live))
        .route("/health/ready", get(health_ready))
        .route("/openapi.json", get(v1::openapi))
        .route("/flows", get(v1::flows))
        .route("/flows/{flow}", get(v1::flow))
        .route("/flows/{flow}/partitions", get(v1::partitions))
        .route("/flows/{flow}/{action}", put(v1::act_flow))
        .route("/flows/{flow}/topics/{topic}/{action}", put(v1::act_topic))
        .route(
            "/flows/{flow}/topics/{topic}/partitions/{partition}/{action}",
            put(v1::act_partition),
        )
        .route(
            "/flows/{flow}/offsets",
            get(v1::get_offsets)
                .patch(v1::patch_offsets)
                .delete(v1::delete_offsets),
        )
        .route(
            "/partitions/{flow}/{topic}/{partition}/{action}",
            post(partition_action),
        )
        .route("/config/reload", post(v1::reload))
        .fallback(v1::not_found)
        .with_state(AppState {
            published,
            commands,
            auth: Arc::new(auth),
        })
}

/// Why the API could not start. Not retriable by strait: the address is taken or not allowed.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("cannot listen on {addr} (strait.api.listen): {error}")]
    Bind {
        addr: SocketAddr,
        /// In the message, so not a `#[source]` (the CLI prints error chains).
        error: std::io::Error,
    },
    #[error("cannot read the API address: {error}")]
    LocalAddr {
        /// In the message, so not a `#[source]` (the CLI prints error chains).
        error: std::io::Error,
    },
}

/// Binds `addr` and serves until the runtime stops. Returns the bound address (port 0 picks
/// one). Binding errors name the address.
/// With `tls`, only HTTPS is served on it.
pub async fn serve(
    addr: SocketAddr,
    published: Published,
    commands: mpsc::Sender<ApiCommand>,
    auth: Auth,
    tls: Option<Arc<rustls::ServerConfig>>,
) -> Result<SocketAddr, ApiError> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|error| ApiError::Bind { addr, error })?;
    let bound = listener
        .local_addr()
        .map_err(|error| ApiError::LocalAddr { error })?;
    let app = router(published, commands, auth).into_make_service_with_connect_info::<SocketAddr>();
    match tls {
        None => {
            tokio::spawn(async move {
                if let Err(e) = axum::serve(listener, app).await {
                    tracing::error!(error = %e, "the REST API stopped");
                }
            });
        }
        Some(config) => {
            use axum::serve::ListenerExt;
            let listener = TlsListener::new(listener, config)
                .map_err(|error| ApiError::LocalAddr { error })?
                // `tap_io` gives the connections their peer address as `ConnectInfo`.
                .tap_io(|_| ());
            tokio::spawn(async move {
                if let Err(e) = axum::serve(listener, app).await {
                    tracing::error!(error = %e, "the REST API stopped");
                }
            });
        }
    }
    Ok(bound)
}

/// `GET /status`: the snapshot, with `snapshot_age_ms` (how old it is).
async fn status(State(s): State<AppState>) -> Response {
    let (status, at) = s.published.fresh(super::state::READ_WAIT).await;
    let mut v = serde_json::to_value(status).unwrap_or_default();
    if let Some(o) = v.as_object_mut() {
        let age = at.map(|t| t.elapsed().as_millis() as u64);
        o.insert("snapshot_age_ms".into(), serde_json::json!(age));
    }
    axum::Json(v).into_response()
}

async fn metrics(State(s): State<AppState>) -> Response {
    let (status, at) = s.published.fresh(super::state::READ_WAIT).await;
    if !status.settings.metrics_enabled {
        return v1::Failure::new(
            404,
            "not_found",
            "metrics are off (strait.metrics.enabled = false)".to_string(),
        )
        .into_response();
    }
    let age = at.map_or(0.0, |t| t.elapsed().as_secs_f64());
    (
        [(
            axum::http::header::CONTENT_TYPE,
            prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
        )],
        render_metrics(&status, age),
    )
        .into_response()
}

fn health_answer(h: &health::Health) -> Response {
    let code = if h.is_ok() {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (code, axum::Json(h)).into_response()
}

/// `GET /health/live`: the control loop publishes.
async fn health_live(State(s): State<AppState>) -> Response {
    let (_, at) = s.published.fresh(super::state::PROBE_WAIT).await;
    health_answer(&health::live(at.map(|t| t.elapsed())))
}

/// `GET /health/ready` and `GET /health`: every partition runs and none is stuck.
async fn health_ready(State(s): State<AppState>) -> Response {
    let (status, at) = s.published.fresh(super::state::PROBE_WAIT).await;
    health_answer(&health::ready(
        &status,
        at.map(|t| t.elapsed()),
        crate::time::wall_ms(),
    ))
}

/// `POST /partitions/{flow}/{topic}/{partition}/pause|resume` (before v1): 202 once applied.
async fn partition_action(
    State(s): State<AppState>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path((flow, topic, partition, action)): Path<(String, String, String, String)>,
) -> Response {
    let action = match Action::parse(&action) {
        Some(a @ (Action::Pause | Action::Resume)) => a,
        _ => {
            return v1::Failure::new(
                404,
                "unknown_action",
                format!("unknown action {action:?}: use pause or resume"),
            )
            .into_response();
        }
    };
    let partition = match v1::parse_partition(&partition) {
        Ok(p) => p,
        Err(f) => return f.into_response(),
    };
    let request = Request::Act {
        scope: Scope {
            flow,
            topic: Some(topic),
            partition: Some(partition),
        },
        action,
    };
    match v1::mutate(&s, client, &headers, request).await {
        Ok(_) => (StatusCode::ACCEPTED, "accepted\n").into_response(),
        Err(f) => f.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::auth::ApiToken;
    use crate::api::command::Reply;
    use std::io::{Read, Write};
    use std::time::{Duration, Instant};

    fn http(addr: SocketAddr, request: &str) -> String {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.write_all(request.as_bytes()).unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    }

    fn req(method: &str, path: &str, extra: &str) -> String {
        format!(
            "{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n{extra}Connection: close\r\n\r\n"
        )
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap()
    }

    fn start(
        rt: &tokio::runtime::Runtime,
        queue: usize,
        auth: Auth,
    ) -> (SocketAddr, Published, mpsc::Receiver<ApiCommand>) {
        let published = Published::default();
        let (tx, rx) = mpsc::channel(queue);
        let addr = rt
            .block_on(serve(
                "127.0.0.1:0".parse().unwrap(),
                published.clone(),
                tx,
                auth,
                None,
            ))
            .unwrap();
        (addr, published, rx)
    }

    fn open() -> Auth {
        Auth::new(None, "127.0.0.1:0".parse().unwrap())
    }

    #[test]
    fn serves_status_metrics_and_commands() {
        let rt = runtime();
        let (addr, published, mut rx) = start(&rt, 4, open());
        let starting = http(addr, &req("GET", "/health", ""));
        assert!(starting.starts_with("HTTP/1.1 503"), "{starting}");
        published.publish(crate::api::status::sample(), Instant::now());
        let live = http(addr, &req("GET", "/health/live", ""));
        assert!(live.starts_with("HTTP/1.1 200"), "{live}");
        // The sample's partition failed: live, but not ready (and /health is /health/ready).
        for path in ["/health/ready", "/health"] {
            let ready = http(addr, &req("GET", path, ""));
            assert!(ready.starts_with("HTTP/1.1 503"), "{ready}");
            assert!(ready.contains("\"reason\":\"failed\""), "{ready}");
        }
        let status = http(addr, &req("GET", "/status", ""));
        assert!(status.contains("\"remote_topic\":\"A.orders\""), "{status}");
        assert!(status.contains("\"snapshot_age_ms\":"), "{status}");
        let metrics = http(addr, &req("GET", "/metrics", ""));
        assert!(
            metrics.contains("strait_partition_next_offset"),
            "{metrics}"
        );
        // The control loop's side: answer the command that arrives.
        let answer = rt.spawn(async move {
            let cmd = rx.recv().await.unwrap();
            let request = cmd.request.clone();
            cmd.reply
                .send(Ok(Reply::Acted {
                    partitions: vec![("orders".into(), 3)],
                }))
                .unwrap();
            request
        });
        let pause = http(addr, &req("POST", "/partitions/A-%3EB/orders/3/pause", ""));
        assert!(pause.starts_with("HTTP/1.1 202"), "{pause}");
        assert_eq!(
            rt.block_on(answer).unwrap(),
            Request::Act {
                scope: Scope {
                    flow: "A->B".into(),
                    topic: Some("orders".into()),
                    partition: Some(3)
                },
                action: Action::Pause
            }
        );
        let bad = http(
            addr,
            &req("POST", "/partitions/A-%3EB/orders/3/explode", ""),
        );
        assert!(bad.starts_with("HTTP/1.1 404"), "{bad}");
        assert!(bad.contains("\"error_code\":\"unknown_action\""), "{bad}");
    }

    #[test]
    fn a_full_command_queue_answers_503_and_drops_nothing() {
        let rt = runtime();
        // Nobody drains the queue: the first command waits in it, the second finds it full.
        let (addr, published, mut rx) = start(&rt, 1, open());
        published.publish(crate::api::status::sample(), Instant::now());
        let first = std::thread::spawn(move || http(addr, &req("PUT", "/flows/A-%3EB/pause", "")));
        let deadline = Instant::now() + Duration::from_secs(10);
        while rx.is_empty() {
            assert!(Instant::now() < deadline, "the first command never arrived");
            std::thread::sleep(Duration::from_millis(10));
        }
        let second = http(addr, &req("PUT", "/flows/A-%3EB/pause", ""));
        assert!(second.starts_with("HTTP/1.1 503"), "{second}");
        assert!(second.contains("\"error_code\":\"busy\""), "{second}");
        // The queued one is answered once the loop takes it.
        let cmd = rx.try_recv().unwrap();
        cmd.reply
            .send(Err(crate::api::CommandError::WrongState {
                message: "nope".into(),
            }))
            .unwrap();
        let first = first.join().unwrap();
        assert!(first.starts_with("HTTP/1.1 409"), "{first}");
        assert!(first.contains("\"message\":\"nope\""), "{first}");
    }

    #[test]
    fn mutations_need_the_token_when_one_is_configured() {
        let rt = runtime();
        let auth = Auth::new(Some(ApiToken::new("t0ken")), "127.0.0.1:0".parse().unwrap());
        let (addr, published, mut rx) = start(&rt, 4, auth);
        published.publish(crate::api::status::sample(), Instant::now());
        for extra in ["", "Authorization: Bearer nope\r\n"] {
            let r = http(addr, &req("PUT", "/flows/A-%3EB/stop", extra));
            assert!(r.starts_with("HTTP/1.1 401"), "{r}");
            assert!(!r.contains("t0ken"), "{r}");
        }
        assert!(rx.try_recv().is_err(), "a refused request reached the loop");
        // Reads need no token.
        let flows = http(addr, &req("GET", "/flows", ""));
        assert!(flows.starts_with("HTTP/1.1 200"), "{flows}");
        assert!(flows.contains("\"state\":\"FAILED\""), "{flows}");
        let answer = rt.spawn(async move {
            let cmd = rx.recv().await.unwrap();
            cmd.reply
                .send(Ok(Reply::Acted { partitions: vec![] }))
                .unwrap();
        });
        let ok = http(
            addr,
            &req(
                "PUT",
                "/flows/A-%3EB/stop",
                "Authorization: Bearer t0ken\r\n",
            ),
        );
        assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
        rt.block_on(answer).unwrap();
    }

    #[test]
    fn malformed_input_and_unknown_things_answer_json_errors() {
        let rt = runtime();
        let (addr, published, _rx) = start(&rt, 4, open());
        published.publish(crate::api::status::sample(), Instant::now());
        for (method, path, code, error_code) in [
            ("GET", "/flows/nope", 404, "unknown_flow"),
            ("GET", "/flows/A-%3EB/partitions", 200, ""),
            ("GET", "/nothing/here", 404, "not_found"),
            ("PUT", "/flows/A-%3EB/explode", 404, "unknown_action"),
            (
                "PUT",
                "/flows/A-%3EB/topics/t/partitions/x/pause",
                400,
                "bad_request",
            ),
            ("PATCH", "/flows/A-%3EB/offsets", 400, "bad_request"),
        ] {
            let r = http(addr, &req(method, path, ""));
            assert!(
                r.starts_with(&format!("HTTP/1.1 {code}")),
                "{method} {path}: {r}"
            );
            assert!(r.contains(error_code), "{method} {path}: {r}");
        }
    }

    #[test]
    fn openapi_describes_every_route() {
        let doc: serde_json::Value = serde_json::from_str(super::super::v1::OPENAPI).unwrap();
        let paths = doc["paths"].as_object().unwrap();
        for (method, path) in ROUTES {
            assert!(
                paths.get(*path).and_then(|p| p.get(*method)).is_some(),
                "{method} {path} is not in openapi.json"
            );
        }
        let described: usize = paths.values().map(|p| p.as_object().unwrap().len()).sum();
        assert_eq!(
            described,
            ROUTES.len(),
            "openapi.json describes routes not served"
        );
    }
}
