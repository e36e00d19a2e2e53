//! `/metrics` and the health endpoints of a running `strait run` against the real test bed:
//! the timing histograms have observations, the per-partition record counts equal what the
//! target holds, checkpoint, group-sync and heartbeat metrics move, and every query of the
//! Grafana dashboard (`docs/grafana/strait.json`) names a metric strait exports.
#![forbid(unsafe_code)]

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use strait_tests::log::{create_topic, offsets};
use strait_tests::strait::Strait;
use strait_tests::{Testbed, kafka_tool_ok, testbed_mm2_config, unique};

const STRAIT: &str = env!("CARGO_BIN_EXE_strait");
const DASHBOARD: &str = include_str!("../../docs/grafana/strait.json");
const METRICS_DOC: &str = include_str!("../../docs/metrics.md");

fn http(addr: &str, path: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).expect("API answers");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let code = out[9..12].parse().unwrap_or(0);
    let body = out
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (code, body)
}

/// Polls `f` until it returns Some, at most `secs` seconds.
fn eventually<T>(secs: u64, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The values of the samples of `name` whose labels contain every one of `labels`.
fn values(text: &str, name: &str, labels: &[&str]) -> Vec<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.split(['{', ' ']).next() == Some(name))
        .filter(|l| labels.iter().all(|want| l.contains(want)))
        .filter_map(|l| l.rsplit(' ').next()?.parse().ok())
        .collect()
}

fn total(text: &str, name: &str, labels: &[&str]) -> f64 {
    values(text, name, labels).iter().sum()
}

/// The metric names a PromQL expression uses: `strait_...` words, histogram series folded into
/// their family.
fn metrics_in(expr: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = expr;
    while let Some(i) = rest.find("strait_") {
        let word: String = rest[i..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        rest = &rest[i + word.len()..];
        out.insert(word);
    }
    out
}

/// Every `expr` of the dashboard's panels.
fn dashboard_queries() -> Vec<String> {
    let d: serde_json::Value = serde_json::from_str(DASHBOARD).expect("dashboard is JSON");
    let panels = d["panels"].as_array().expect("panels");
    let queries: Vec<String> = panels
        .iter()
        .flat_map(|p| p["targets"].as_array().cloned().unwrap_or_default())
        .filter_map(|t| t["expr"].as_str().map(str::to_string))
        .collect();
    assert!(queries.len() >= panels.len(), "every panel has a query");
    queries
}

/// Whether the scrape declares `name` (a family) or `name` is a histogram's series.
fn exported(scrape: &str, name: &str) -> bool {
    let declared = |f: &str| {
        scrape
            .lines()
            .any(|l| l.strip_prefix("# TYPE ").and_then(|r| r.split(' ').next()) == Some(f))
    };
    declared(name)
        || ["_bucket", "_sum", "_count"].iter().any(|s| {
            name.strip_suffix(s)
                .is_some_and(|f| declared(f) && scrape.contains(&format!("# TYPE {f} histogram")))
        })
}

#[test]
fn every_exported_family_is_documented() {
    for family in strait_control::api::metrics::FAMILIES {
        assert!(
            METRICS_DOC.contains(&format!("`{family}`")),
            "{family} is not in docs/metrics.md"
        );
    }
}

/// Produces 300 records to a fresh 2-partition topic and commits them as a consumer group.
fn source_with_group(topic: &str, group: &str) {
    let tb = Testbed::get();
    create_topic(tb.source(), topic, 2, &[]);
    let lines: String = (0..300).map(|i| format!("r{i}\n")).collect();
    kafka_tool_ok(
        "kafka-console-producer",
        &[
            "--bootstrap-server",
            tb.source(),
            "--topic",
            topic,
            "--producer-property",
            "partitioner.class=org.apache.kafka.clients.producer.RoundRobinPartitioner",
        ],
        Some(lines.as_bytes()),
    );
    kafka_tool_ok(
        "kafka-console-consumer",
        &[
            "--bootstrap-server",
            tb.source(),
            "--topic",
            topic,
            "--group",
            group,
            "--from-beginning",
            "--max-messages",
            "300",
            "--timeout-ms",
            "60000",
        ],
        None,
    );
}

#[test]
#[allow(clippy::too_many_lines)] // one run, then its checks in order
fn metrics_after_a_run_and_the_dashboard_check() {
    let tb = Testbed::get();
    let topic = unique("metrics");
    let group = unique("metrics-group");
    source_with_group(&topic, &group);
    let cfg = testbed_mm2_config(
        &topic,
        "strait.api.listen = 127.0.0.1:0\n\
         emit.checkpoints.interval.seconds = 1\n\
         refresh.groups.interval.seconds = 1\n\
         sync.group.offsets.enabled = true\n\
         sync.group.offsets.interval.seconds = 1\n\
         A->B.emit.heartbeats.enabled = true\n\
         emit.heartbeats.interval.seconds = 1",
    );
    let strait = Strait::start(Path::new(STRAIT), &cfg, &[]);
    let addr = eventually(60, "the API address in the log", || {
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
    });
    let flow = "flow=\"A->B\"";
    let in_topic = format!("topic=\"{topic}\"");
    let scrape = eventually(
        90,
        "records, checkpoints, group sync and heartbeats",
        || {
            let (code, m) = http(&addr, "/metrics");
            let copied = total(
                &m,
                "strait_partition_records_copied_total",
                &[flow, &in_topic],
            );
            let moved = copied == 300.0
                && total(&m, "strait_checkpoints_written_total", &[flow]) > 0.0
                && total(&m, "strait_groups_synced_total", &[flow]) > 0.0
                && total(&m, "strait_heartbeats_written_total", &["source=\"A\""]) > 0.0
                && !values(
                    &m,
                    "strait_heartbeat_read_back_age_seconds",
                    &["source=\"A\""],
                )
                .is_empty();
            (code == 200 && moved).then_some(m)
        },
    );

    // Per partition: the records counted are the records the remote partition holds (a fresh
    // topic, one run, nothing copied twice), and their bytes were counted too.
    let remote = format!("A.{topic}");
    for (p, (_, end)) in offsets(tb.target(), &remote).into_iter().enumerate() {
        let labels = [flow, in_topic.as_str(), &format!("partition=\"{p}\"")];
        assert_eq!(
            total(&scrape, "strait_partition_records_copied_total", &labels),
            end as f64,
            "partition {p}"
        );
        assert!(total(&scrape, "strait_partition_bytes_copied_total", &labels) > 0.0);
        assert_eq!(total(&scrape, "strait_partition_lag_records", &labels), 0.0);
        assert_eq!(total(&scrape, "strait_partition_lag_seconds", &labels), 0.0);
    }
    // The histograms: every copied record was timed once when acknowledged, at least once when
    // fetched; the buckets are cumulative up to the count.
    let latency = "strait_replication_latency_seconds";
    let latency_count = total(&scrape, &format!("{latency}_count"), &[flow]);
    assert_eq!(
        latency_count,
        total(&scrape, "strait_flow_records_copied_total", &[flow])
    );
    assert!(latency_count >= 300.0, "{latency_count}");
    assert_eq!(
        total(
            &scrape,
            &format!("{latency}_bucket"),
            &[flow, "le=\"+Inf\""]
        ),
        latency_count
    );
    assert!(total(&scrape, &format!("{latency}_sum"), &[flow]) > 0.0);
    assert!(total(&scrape, "strait_record_age_seconds_count", &[flow]) >= 300.0);
    assert!(total(&scrape, "strait_checkpoint_latency_seconds_count", &[flow]) > 0.0);
    assert!(total(&scrape, "strait_checkpoint_rounds_total", &[flow]) > 0.0);
    assert!(total(&scrape, "strait_offset_syncs_written_total", &[flow]) > 0.0);
    assert!(
        total(
            &scrape,
            "strait_sync_rounds_total",
            &[flow, "kind=\"topics\""]
        ) > 0.0
    );
    assert!(
        total(
            &scrape,
            "strait_sync_changes_total",
            &[flow, "kind=\"topics\""]
        ) > 0.0
    );
    assert!(total(&scrape, "strait_memory_budget_bytes", &[]) > 0.0);
    let age = total(&scrape, "strait_status_age_seconds", &[]);
    assert!((0.0..10.0).contains(&age), "snapshot age {age}");

    // Health: live and ready; /status says how old it is.
    assert_eq!(http(&addr, "/health/live").0, 200);
    let (code, ready) = http(&addr, "/health/ready");
    assert_eq!(code, 200, "{ready}");
    assert!(ready.contains("\"status\":\"ok\""), "{ready}");
    let status: serde_json::Value = serde_json::from_str(&http(&addr, "/status").1).unwrap();
    assert!(status["snapshot_age_ms"].as_u64().is_some(), "{status}");

    // The dashboard: every query names only metrics this run exported.
    let queries = dashboard_queries();
    for q in &queries {
        let names = metrics_in(q);
        assert!(
            !names.is_empty(),
            "a dashboard query names no strait metric: {q}"
        );
        for n in names {
            assert!(
                exported(&scrape, &n),
                "dashboard query {q:?} uses {n}, which strait does not export"
            );
        }
    }

    strait.signal("TERM");
    strait.wait(Duration::from_secs(30)).expect_code(0);
}
