//! The REST API and `/metrics` of a running `strait run`, against the real test bed.
#![forbid(unsafe_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

use strait_tests::api::{api_addr, eventually};
use strait_tests::log::{create_topic, offsets};
use strait_tests::strait::Strait;
use strait_tests::{Testbed, kafka_tool_ok, testbed_mm2_config, unique};

const STRAIT: &str = env!("CARGO_BIN_EXE_strait");

fn http(addr: &str, method: &str, path: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).expect("API answers");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
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

#[test]
fn status_metrics_and_pause_resume() {
    let tb = Testbed::get();
    let topic = unique("api");
    create_topic(tb.source(), &topic, 2, &[]);
    let lines: String = (0..100).map(|i| format!("r{i}\n")).collect();
    kafka_tool_ok(
        "kafka-console-producer",
        &["--bootstrap-server", tb.source(), "--topic", &topic],
        Some(lines.as_bytes()),
    );
    // Port 0: the OS picks a free port; strait logs the address it bound.
    let cfg = testbed_mm2_config(&topic, "strait.api.listen = 127.0.0.1:0");
    let strait = Strait::start(Path::new(STRAIT), &cfg, &[]);
    let addr = api_addr(&strait);

    // Status: both partitions replicated up to the 100 records.
    let status: serde_json::Value = eventually(60, "all records in /status", || {
        let (code, body) = http(&addr, "GET", "/status");
        let v: serde_json::Value = serde_json::from_str(&body).ok()?;
        let parts = v["flows"][0]["partitions"].as_array()?.clone();
        let done: i64 = parts
            .iter()
            .map(|p| p["next_offset"].as_i64().unwrap_or(0))
            .sum();
        (code == 200 && parts.len() == 2 && done == 100).then_some(v)
    });
    assert_eq!(status["flows"][0]["name"], "A->B");
    let p0 = &status["flows"][0]["partitions"][0];
    assert_eq!(p0["remote_topic"], format!("A.{topic}"));
    assert_eq!(p0["state"], "replicating");
    assert!(["uring", "epoll"].contains(&status["io_backend"].as_str().unwrap()));

    // Metrics: the same partitions, lag 0, records counted.
    let (code, metrics) = http(&addr, "GET", "/metrics");
    assert_eq!(code, 200);
    let lag_line = format!(
        "strait_partition_lag_records{{flow=\"A->B\",topic=\"{topic}\",partition=\"0\"}} 0"
    );
    assert!(metrics.contains(&lag_line), "{metrics}");
    let produced: u64 = metrics
        .lines()
        .filter(|l| l.starts_with("strait_produced_records_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum();
    assert!(produced >= 100, "{metrics}");
    assert_eq!(http(&addr, "GET", "/health").0, 200);

    // Pause partition 1, produce more: partition 0 moves, partition 1 does not.
    let path = format!("/partitions/A-%3EB/{topic}/1/pause");
    assert_eq!(http(&addr, "POST", &path).0, 202);
    eventually(10, "partition 1 paused", || {
        let v: serde_json::Value = serde_json::from_str(&http(&addr, "GET", "/status").1).ok()?;
        (v["flows"][0]["partitions"][1]["state"] == "paused").then_some(())
    });
    let before: serde_json::Value = serde_json::from_str(&http(&addr, "GET", "/status").1).unwrap();
    let p1_before = before["flows"][0]["partitions"][1]["next_offset"]
        .as_i64()
        .unwrap();
    let more: String = (0..200).map(|i| format!("m{i}\n")).collect();
    kafka_tool_ok(
        "kafka-console-producer",
        &[
            "--bootstrap-server",
            tb.source(),
            "--topic",
            &topic,
            "--producer-property",
            "partitioner.class=org.apache.kafka.clients.producer.RoundRobinPartitioner",
        ],
        Some(more.as_bytes()),
    );
    let source_end_p1 = offsets(tb.source(), &topic)[1].1;
    assert!(
        source_end_p1 > p1_before,
        "the new records reach partition 1 too"
    );
    let total_now = |v: &serde_json::Value| -> i64 {
        v["flows"][0]["partitions"]
            .as_array()
            .map(|ps| {
                ps.iter()
                    .map(|p| p["end_offset"].as_i64().unwrap_or(0))
                    .sum()
            })
            .unwrap_or(0)
    };
    let paused_view = eventually(30, "partition 0 caught up while 1 is paused", || {
        let v: serde_json::Value = serde_json::from_str(&http(&addr, "GET", "/status").1).ok()?;
        let p0 = &v["flows"][0]["partitions"][0];
        (p0["end_offset"].as_i64()? > 0 && p0["lag"] == 0 && total_now(&v) > 0).then_some(v)
    });
    assert_eq!(
        paused_view["flows"][0]["partitions"][1]["next_offset"]
            .as_i64()
            .unwrap(),
        p1_before,
        "a paused partition must not move"
    );

    // Resume: everything arrives.
    assert_eq!(
        http(
            &addr,
            "POST",
            &format!("/partitions/A-%3EB/{topic}/1/resume")
        )
        .0,
        202
    );
    eventually(30, "all 300 records replicated after resume", || {
        let v: serde_json::Value = serde_json::from_str(&http(&addr, "GET", "/status").1).ok()?;
        let parts = v["flows"][0]["partitions"].as_array()?.clone();
        let done: i64 = parts
            .iter()
            .map(|p| p["next_offset"].as_i64().unwrap_or(0))
            .sum();
        (done == 300).then_some(())
    });
    assert_eq!(
        http(
            &addr,
            "POST",
            &format!("/partitions/A-%3EB/{topic}/1/explode")
        )
        .0,
        404
    );

    strait.signal("TERM");
    strait.wait(Duration::from_secs(30)).expect_code(0);
}
