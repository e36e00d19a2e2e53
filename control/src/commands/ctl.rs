//! `strait ctl`: a client of a running strait's REST API, so that operators need no curl.
//! `status`, `pause|resume|stop` at flow, topic or partition scope, `offsets get|set|reset`
//! and `reload`, printed as tables or, with `--json`, as the API's JSON.

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::table;

/// A plain or TLS connection to the API.
trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

/// Longest a request may take to connect, and then between reads and writes (a command waits
/// for the control loop, which answers within 30 s).
const TIMEOUT: Duration = Duration::from_secs(40);
/// Largest answer read.
const MAX_RESPONSE_BYTES: u64 = 64 * 1024 * 1024;

/// Why a `strait ctl` command failed.
#[derive(Debug, thiserror::Error)]
pub enum CtlError {
    #[error("cannot reach strait's API at {addr}: {what}: {error}")]
    Io {
        addr: String,
        what: &'static str,
        /// In the message, so not a `#[source]` (the CLI prints error chains).
        error: std::io::Error,
    },
    #[error("strait's API at {addr} answered something that is not HTTP: {detail}")]
    BadResponse { addr: String, detail: String },
    /// The API refused: its status, `error_code` and message.
    #[error("{status} {code}: {message}")]
    Refused {
        status: u16,
        code: String,
        message: String,
    },
    #[error("{0}")]
    Usage(String),
}

/// Where the API is and how to authenticate.
#[derive(Debug, Clone)]
pub struct Client {
    /// `host:port`.
    pub addr: String,
    /// Sent as `Authorization: Bearer` (never printed).
    pub token: Option<String>,
    /// HTTPS, trusting these roots (`--tls-ca`); `None` is plain HTTP.
    pub tls: Option<Arc<rustls::ClientConfig>>,
}

/// A client configuration trusting the CA certificates of a PEM file (for `--tls-ca`).
pub fn tls_trusting(ca_pem: &std::path::Path) -> Result<Arc<rustls::ClientConfig>, CtlError> {
    let store = strait_dataplane::wire::config::TrustStore::PemFile(ca_pem.to_path_buf());
    let roots = strait_dataplane::wire::tls::load_roots(&store)
        .map_err(|e| CtlError::Usage(format!("--tls-ca: {e}")))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| CtlError::Usage(format!("--tls-ca: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(cfg))
}

/// One partition, or all of a topic, or all of a flow.
#[derive(Debug, Clone, Default)]
pub struct Target {
    pub flow: String,
    pub topic: Option<String>,
    pub partition: Option<i32>,
}

/// A path segment, percent-encoded (flows are named `a->b`).
pub fn encode(segment: &str) -> String {
    let mut out = String::new();
    for b in segment.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

impl Target {
    fn path(&self, action: &str) -> Result<String, CtlError> {
        let mut p = format!("/flows/{}", encode(&self.flow));
        match (&self.topic, self.partition) {
            (None, Some(_)) => {
                return Err(CtlError::Usage("--partition needs --topic".into()));
            }
            (Some(t), part) => {
                let _ = write!(p, "/topics/{}", encode(t));
                if let Some(n) = part {
                    let _ = write!(p, "/partitions/{n}");
                }
            }
            (None, None) => {}
        }
        let _ = write!(p, "/{action}");
        Ok(p)
    }
}

impl Client {
    /// Sends one request; the answer's JSON, or the API's error.
    pub fn call(&self, method: &str, path: &str, body: Option<&str>) -> Result<Value, CtlError> {
        let io = |what: &'static str| {
            let addr = self.addr.clone();
            move |error| CtlError::Io { addr, what, error }
        };
        let sock = self
            .addr
            .to_socket_addrs()
            .map_err(io("resolve"))?
            .next()
            .ok_or_else(|| CtlError::BadResponse {
                addr: self.addr.clone(),
                detail: "the address resolves to nothing".into(),
            })?;
        let tcp = TcpStream::connect_timeout(&sock, TIMEOUT).map_err(io("connect"))?;
        tcp.set_read_timeout(Some(TIMEOUT))
            .map_err(io("set timeout"))?;
        tcp.set_write_timeout(Some(TIMEOUT))
            .map_err(io("set timeout"))?;
        let mut stream: Box<dyn ReadWrite> = match &self.tls {
            None => Box::new(tcp),
            Some(cfg) => {
                // The certificate must name the host as written in --api (a name or an IP).
                let host = self
                    .addr
                    .rsplit_once(':')
                    .map_or(self.addr.as_str(), |(h, _)| h);
                let host = host.trim_start_matches('[').trim_end_matches(']');
                let name =
                    rustls_pki_types::ServerName::try_from(host.to_string()).map_err(|e| {
                        CtlError::Usage(format!("--api {}: not a TLS server name: {e}", self.addr))
                    })?;
                let conn = rustls::ClientConnection::new(cfg.clone(), name).map_err(|e| {
                    CtlError::Usage(format!("cannot start TLS to {}: {e}", self.addr))
                })?;
                Box::new(rustls::StreamOwned::new(conn, tcp))
            }
        };
        let body = body.unwrap_or("");
        let auth = self
            .token
            .as_ref()
            .map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\n{auth}Connection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            self.addr,
            body.len()
        );
        stream.write_all(head.as_bytes()).map_err(io("write"))?;
        stream.write_all(body.as_bytes()).map_err(io("write"))?;
        let mut raw = Vec::new();
        stream
            .take(MAX_RESPONSE_BYTES)
            .read_to_end(&mut raw)
            .map_err(io("read"))?;
        self.parse(&raw)
    }

    fn parse(&self, raw: &[u8]) -> Result<Value, CtlError> {
        let bad = |detail: String| CtlError::BadResponse {
            addr: self.addr.clone(),
            detail,
        };
        let text = String::from_utf8_lossy(raw);
        let (head, body) = text
            .split_once("\r\n\r\n")
            .ok_or_else(|| bad(format!("no end of headers in {} bytes", raw.len())))?;
        let status: u16 = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| bad(format!("status line {:?}", head.lines().next())))?;
        let chunked = head.lines().any(|l| {
            l.to_ascii_lowercase()
                .starts_with("transfer-encoding: chunked")
        });
        let body = if chunked {
            dechunk(body).ok_or_else(|| bad("a broken chunked body".into()))?
        } else {
            body.to_string()
        };
        let json: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
        if (200..300).contains(&status) {
            return Ok(json);
        }
        Err(CtlError::Refused {
            status,
            code: json["error_code"].as_str().unwrap_or("http").to_string(),
            message: json["message"]
                .as_str()
                .map_or_else(|| body.trim().to_string(), str::to_string),
        })
    }

    /// `GET /flows` and each flow's partitions (or one flow's).
    pub fn status(&self, flow: Option<&str>) -> Result<Value, CtlError> {
        let flows = self.call("GET", "/flows", None)?;
        let mut out = Vec::new();
        for f in flows["flows"].as_array().cloned().unwrap_or_default() {
            let name = f["name"].as_str().unwrap_or_default().to_string();
            if flow.is_some_and(|w| w != name) {
                continue;
            }
            let parts = self.call("GET", &format!("/flows/{}/partitions", encode(&name)), None)?;
            let mut f = f;
            f["partition_list"] = parts["partitions"].clone();
            out.push(f);
        }
        if let Some(w) = flow
            && out.is_empty()
        {
            // The API's own 404, with its message.
            self.call("GET", &format!("/flows/{}", encode(w)), None)?;
        }
        // The group this instance is a member of (in `/status`).
        let group = self.call("GET", "/status", None)?["group"].clone();
        Ok(serde_json::json!({"flows": out, "shards": flows["shards"], "group": group}))
    }

    /// `PUT .../pause|resume|stop`.
    pub fn act(&self, target: &Target, action: &str) -> Result<Value, CtlError> {
        self.call("PUT", &target.path(action)?, None)
    }

    pub fn offsets(&self, flow: &str) -> Result<Value, CtlError> {
        self.call("GET", &format!("/flows/{}/offsets", encode(flow)), None)
    }

    /// `PATCH` (an offset) or `DELETE` (reset; every partition of the flow without a topic).
    pub fn set_offset(&self, target: &Target, offset: Option<i64>) -> Result<Value, CtlError> {
        let path = format!("/flows/{}/offsets", encode(&target.flow));
        let source = target.flow.split_once("->").map_or("", |(s, _)| s);
        let body = match (&target.topic, target.partition) {
            (Some(topic), Some(partition)) => Some(
                serde_json::json!({"offsets": [{
                    "partition": {"cluster": source, "topic": topic, "partition": partition},
                    "offset": offset.map(|o| serde_json::json!({"offset": o})),
                }]})
                .to_string(),
            ),
            (None, None) if offset.is_none() => None,
            _ => {
                return Err(CtlError::Usage(
                    "name the partition with --topic and --partition".into(),
                ));
            }
        };
        let method = if offset.is_some() { "PATCH" } else { "DELETE" };
        self.call(method, &path, body.as_deref())
    }
}

impl Client {
    /// `POST /config/reload`.
    pub fn reload(&self) -> Result<Value, CtlError> {
        self.call("POST", "/config/reload", None)
    }
}

fn dechunk(mut body: &str) -> Option<String> {
    let mut out = String::new();
    loop {
        let (size, rest) = body.split_once("\r\n")?;
        let size = usize::from_str_radix(size.split(';').next()?.trim(), 16).ok()?;
        if size == 0 {
            return Some(out);
        }
        out.push_str(rest.get(..size)?);
        body = rest.get(size..)?.strip_prefix("\r\n")?;
    }
}

fn cell(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    }
}

/// `status` as tables: the flows, then each flow's partitions.
pub fn render_status(v: &Value) -> String {
    let flows = v["flows"].as_array().cloned().unwrap_or_default();
    let rows: Vec<Vec<String>> = flows
        .iter()
        .map(|f| {
            [
                "name",
                "state",
                "delivery",
                "partitions",
                "lag_records",
                "lag_seconds",
                "records_copied",
                "bytes_copied",
            ]
            .iter()
            .map(|k| cell(&f[*k]))
            .collect()
        })
        .collect();
    let mut out = table(
        &[
            "FLOW",
            "STATE",
            "DELIVERY",
            "PARTITIONS",
            "LAG",
            "LAG_S",
            "COPIED",
            "BYTES",
        ],
        &rows,
    );
    for f in &flows {
        let _ = writeln!(out, "\n{}:", cell(&f["name"]));
        let rows = partition_rows(f);
        out.push_str(&table(
            &[
                "TOPIC",
                "PARTITION",
                "STATE",
                "NEXT",
                "END",
                "LAG",
                "LAG_S",
                "COPIED",
                "BYTES",
                "FAST",
                "SLOW",
                "WHY",
            ],
            &rows,
        ));
        render_flow_notes(&mut out, f);
    }
    render_group(&mut out, &v["group"]);
    out
}

/// The lines under a flow's partitions: its transactions (exactly-once) and what continuous
/// verification found.
fn render_flow_notes(out: &mut String, f: &Value) {
    let txn = &f["transactions"];
    if txn.is_object() {
        let _ = writeln!(
            out,
            "transactions: {} committed, {} aborted, {} fenced; {} partitions transactional; commit latency {} ms on average, {} ms at most",
            cell(&txn["committed"]),
            cell(&txn["aborted"]),
            cell(&txn["fenced"]),
            cell(&txn["partitions"]),
            cell(&txn["commit_latency_avg_ms"]),
            cell(&txn["commit_latency_max_ms"]),
        );
    }
    let ver = &f["verification"];
    if ver.is_object() {
        let _ = writeln!(
            out,
            "continuous verification: {} records verified in {} partitions, {} mismatches{}",
            cell(&ver["records_verified"]),
            cell(&ver["partitions"]),
            cell(&ver["mismatches"]),
            ver["first_mismatch"]
                .as_str()
                .map_or(String::new(), |m| format!("; first: {m}"))
        );
    }
}

/// One row per partition of a flow in `status`: an error, or why the partition is not assigned
/// to this member, in the last column.
fn partition_rows(f: &Value) -> Vec<Vec<String>> {
    f["partition_list"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            [
                "topic",
                "partition",
                "state",
                "next_offset",
                "source_end_offset",
                "lag_records",
                "lag_seconds",
                "records_copied",
                "bytes_copied",
                "fast_batches",
                "slow_batches",
            ]
            .iter()
            .map(|k| cell(&p[*k]))
            // An error, or why a partition is not assigned to this member.
            .chain([cell(if p["error"].is_null() {
                &p["not_assigned_reason"]
            } else {
                &p["error"]
            })])
            .collect()
        })
        .collect()
}

/// The group section of `status`: this member, the leader, every member's units and
/// throughput, the last rebalance.
fn render_group(out: &mut String, g: &Value) {
    if !g.is_object() {
        return;
    }
    let _ = writeln!(
        out,
        "\ngroup {} on cluster {}: {}, generation {}, leader {}",
        cell(&g["group_id"]),
        cell(&g["cluster"]),
        cell(&g["state"]),
        cell(&g["generation"]),
        cell(&g["leader"]),
    );
    let _ = writeln!(
        out,
        "this member: {} ({} units{})",
        cell(&g["member_id"]),
        g["assignment"].as_array().map_or(0, Vec::len),
        if g["singleton"] == true {
            ", singleton duties"
        } else {
            ""
        }
    );
    let rows: Vec<Vec<String>> = g["members"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|m| {
            ["member_id", "units", "throughput_bytes_per_sec"]
                .iter()
                .map(|k| cell(&m[*k]))
                .collect()
        })
        .collect();
    out.push_str(&table(&["MEMBER", "UNITS", "BYTES/S"], &rows));
    if let Some(r) = g["last_rebalance"].as_object() {
        let _ = writeln!(
            out,
            "last rebalance: {} ({} ms)",
            r.get("cause").map_or_else(String::new, cell),
            r.get("duration_ms").map_or_else(String::new, cell),
        );
    }
}

/// `offsets get` as a table.
pub fn render_offsets(v: &Value) -> String {
    let rows: Vec<Vec<String>> = v["offsets"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|o| {
            vec![
                cell(&o["partition"]["cluster"]),
                cell(&o["partition"]["topic"]),
                cell(&o["partition"]["partition"]),
                cell(&o["offset"]["offset"]),
            ]
        })
        .collect();
    table(&["CLUSTER", "TOPIC", "PARTITION", "NEXT OFFSET"], &rows)
}

/// What an action or an offsets change did, in one or a few lines.
pub fn render_result(v: &Value) -> String {
    let mut out = String::new();
    if let Some(a) = v["action"].as_str() {
        let n = v["partitions"].as_array().map_or(0, Vec::len);
        let _ = writeln!(out, "{a}: {n} partition(s)");
    }
    for c in v["changes"].as_array().cloned().unwrap_or_default() {
        let _ = writeln!(
            out,
            "{}-{}: {} -> {}",
            cell(&c["topic"]),
            cell(&c["partition"]),
            cell(&c["before"]),
            cell(&c["after"])
        );
    }
    out
}

/// What a reload changed: one line per kind of change.
pub fn render_reload(v: &Value) -> String {
    if v["changed"] == Value::Bool(false) {
        return "reloaded: nothing changed\n".into();
    }
    let mut out = String::from("reloaded\n");
    for what in ["added", "removed"] {
        for f in v[what].as_array().cloned().unwrap_or_default() {
            let _ = writeln!(out, "{what}: {}", cell(&f));
        }
    }
    for what in ["restarted", "updated", "heartbeats"] {
        for c in v[what].as_array().cloned().unwrap_or_default() {
            let keys: Vec<String> = c["keys"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .iter()
                .map(cell)
                .collect();
            let _ = writeln!(out, "{what}: {} ({})", cell(&c["flow"]), keys.join(", "));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_shows_the_group() {
        let v = serde_json::json!({
            "flows": [],
            "group": {
                "group_id": "g", "cluster": "B", "state": "stable", "generation": 4,
                "leader": "m1", "member_id": "m2", "singleton": true,
                "assignment": ["singleton duties", "A->B t-0"],
                "members": [
                    {"member_id": "m1", "units": 1, "throughput_bytes_per_sec": 10},
                    {"member_id": "m2", "units": 2, "throughput_bytes_per_sec": 0}
                ],
                "last_rebalance": {"cause": "revoked units released", "duration_ms": 12, "at_ms": 1}
            }
        });
        let out = render_status(&v);
        for part in [
            "group g on cluster B: stable, generation 4, leader m1",
            "this member: m2 (2 units, singleton duties)",
            "m1",
            "last rebalance: revoked units released (12 ms)",
        ] {
            assert!(out.contains(part), "{out} lacks {part}");
        }
        // No group: no section.
        assert!(!render_status(&serde_json::json!({"flows": []})).contains("group"));
    }

    #[test]
    fn a_partition_not_assigned_says_why_where_an_error_would_be() {
        let v = serde_json::json!({
            "flows": [{"name": "A->B", "state": "NOT_ASSIGNED", "partition_list": [
                {"topic": "t", "partition": 0, "state": "NOT_ASSIGNED", "next_offset": 5,
                 "source_end_offset": 9, "lag_records": 4, "error": null,
                 "not_assigned_reason": "this member is out of group g"},
                {"topic": "t", "partition": 1, "state": "FAILED", "error": "refused",
                 "not_assigned_reason": null}
            ]}]
        });
        let out = render_status(&v);
        let row = |p: &str| {
            out.lines()
                .find(|l| l.split_whitespace().take(2).eq(["t", p]))
                .unwrap_or_else(|| panic!("no row for t-{p} in\n{out}"))
                .to_string()
        };
        assert!(row("0").contains("NOT_ASSIGNED"), "{out}");
        assert!(row("0").ends_with("this member is out of group g"), "{out}");
        assert!(row("1").ends_with("refused"), "{out}");
        assert!(out.contains("WHY"), "{out}");
    }

    #[test]
    fn status_shows_each_flows_delivery_and_its_transactions() {
        let v = serde_json::json!({
            "flows": [
                {"name": "A->B", "state": "RUNNING", "delivery": "exactly_once",
                 "transactions": {"committed": 41, "aborted": 2, "fenced": 0, "partitions": 3,
                                  "commit_latency_avg_ms": 7, "commit_latency_max_ms": 30}},
                {"name": "B->A", "state": "RUNNING", "delivery": "at_least_once"}
            ]
        });
        let out = render_status(&v);
        assert!(out.contains("DELIVERY"), "{out}");
        let row = |flow: &str| {
            out.lines()
                .find(|l| l.starts_with(flow))
                .unwrap_or_else(|| panic!("no row for {flow} in\n{out}"))
                .to_string()
        };
        assert!(row("A->B ").contains("exactly_once"), "{out}");
        assert!(row("B->A ").contains("at_least_once"), "{out}");
        assert!(
            out.contains("transactions: 41 committed, 2 aborted, 0 fenced; 3 partitions transactional; commit latency 7 ms on average, 30 ms at most"),
            "{out}"
        );
        assert_eq!(out.matches("transactions:").count(), 1, "{out}");
    }

    #[test]
    fn paths_encode_flows_and_need_a_topic_for_a_partition() {
        assert_eq!(encode("A->B"), "A-%3EB");
        let t = Target {
            flow: "A->B".into(),
            topic: Some("t.1".into()),
            partition: Some(3),
        };
        assert_eq!(
            t.path("stop").unwrap(),
            "/flows/A-%3EB/topics/t.1/partitions/3/stop"
        );
        let bad = Target {
            flow: "A->B".into(),
            topic: None,
            partition: Some(3),
        };
        assert!(bad.path("stop").is_err());
    }

    #[test]
    fn a_reload_is_rendered_per_change() {
        let v = serde_json::json!({
            "changed": true,
            "added": ["A->C"],
            "removed": [],
            "restarted": [{"flow": "C->B", "keys": ["replication-consumer on C: bootstrap.servers"], "clusters": ["C"]}],
            "updated": [{"flow": "A->B", "keys": ["topics"]}],
            "heartbeats": [],
        });
        assert_eq!(
            render_reload(&v),
            "reloaded\nadded: A->C\nrestarted: C->B (replication-consumer on C: bootstrap.servers)\nupdated: A->B (topics)\n"
        );
        assert_eq!(
            render_reload(&serde_json::json!({"changed": false})),
            "reloaded: nothing changed\n"
        );
    }

    #[test]
    fn tables_pad_columns() {
        let t = table(&["A", "LONG"], &[vec!["xyz".into(), "1".into()]]);
        assert_eq!(t, "A    LONG\nxyz  1\n");
    }
}
