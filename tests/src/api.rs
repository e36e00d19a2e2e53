//! Driving a running `strait run` from tests: its REST API (the address from its log), waiting
//! for conditions, and records written with Kafka's console producer.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::strait::Strait;
use crate::{Testbed, kafka_tool_ok};

/// How long a request may wait for strait's answer (a command waits for the control loop, which
/// answers within 30 s).
const REPLY_TIMEOUT: Duration = Duration::from_secs(40);

/// One request to strait's API; `token` adds `Authorization: Bearer`. Returns the status and the
/// body as JSON (`Null` when not JSON).
pub fn call(addr: &str, method: &str, path: &str, token: Option<&str>, body: &str) -> (u16, Value) {
    let mut s = TcpStream::connect(addr).expect("API answers");
    s.set_read_timeout(Some(REPLY_TIMEOUT)).unwrap();
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: x\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let code = out.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = out.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    (code, serde_json::from_str(body).unwrap_or(Value::Null))
}

/// `f`'s first `Some`, polled every 200 ms; fails the test after `secs` seconds.
pub fn eventually<T>(secs: u64, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `n` records `{prefix}{i}` into the source's `topic`, spread round-robin over its partitions.
pub fn produce_round_robin(topic: &str, prefix: &str, n: usize) {
    produce_round_robin_to(Testbed::get().source(), topic, prefix, n);
}

/// `n` records `{prefix}{i}` into `topic` on `bootstrap`, round-robin over its partitions, with
/// Kafka's console producer.
pub fn produce_round_robin_to(bootstrap: &str, topic: &str, prefix: &str, n: usize) {
    let lines: String = (0..n).map(|i| format!("{prefix}{i}\n")).collect();
    kafka_tool_ok(
        "kafka-console-producer",
        &[
            "--bootstrap-server",
            bootstrap,
            "--topic",
            topic,
            "--producer-property",
            "partitioner.class=org.apache.kafka.clients.producer.RoundRobinPartitioner",
        ],
        Some(lines.as_bytes()),
    );
}

/// The address strait's API listens on, from its log (with `strait.api.listen = 127.0.0.1:0`).
pub fn api_addr(strait: &Strait) -> String {
    eventually(60, "the API address in the log", || {
        let log = strait.stderr();
        let line = log
            .lines()
            .find(|l| l.contains("REST API and /metrics listening"))?;
        Some(
            line.split("address=")
                .nth(1)?
                .split_whitespace()
                .next()?
                .to_string(),
        )
    })
}
