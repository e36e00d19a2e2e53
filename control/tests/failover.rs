//! `strait failover` (planned) through the binary against the test bed (issue 24): with
//! production stopped before the command, a group that consumed part of a topic on the source
//! reads exactly the rest on the target after the failover (0 lost, 0 re-read), the topic stays
//! stopped in the running strait and in a restarted one, and a second run is idempotent; with
//! a producer still writing, it refuses and names the topic; killed during its lag wait, a
//! second run completes it. Each test has flow aliases of its own (the stored failover state
//! is per flow). Test data comes from Kafka's console producer and perf producer; what the
//! group reads comes from Kafka's consumer.
#![forbid(unsafe_code)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use strait_tests::api::produce_round_robin;
use strait_tests::log::{create_topic, offsets, stored_progress};
use strait_tests::strait::Strait;
use strait_tests::translation::{consume, read_all};
use strait_tests::{Testbed, own_flow_config, perf_producer, unique};

const STRAIT: &str = env!("CARGO_BIN_EXE_strait");

/// A flow of its own copying `topic`, and its remote topic's name.
fn flow_config(topic: &str) -> (PathBuf, String, String) {
    own_flow_config(topic, "")
}

/// `strait failover --json` with `args`: exit code, report, stderr.
fn failover(cfg: &Path, args: &[&str]) -> (i32, Value, String) {
    let out = Command::new(STRAIT)
        .args(["failover", "--json", "--config"])
        .arg(cfg)
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("strait failover runs");
    (
        out.status.code().unwrap_or(-1),
        serde_json::from_slice(&out.stdout).unwrap_or(Value::Null),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

fn statuses(report: &Value) -> Vec<(String, String)> {
    report["steps"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|s| {
            (
                s["step"].as_str().unwrap_or_default().to_string(),
                s["status"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// Until strait stored progress for the flow (the failover fails over what it stored).
fn wait_stored(flow: &str, run: &Strait) {
    let alias = flow.split("->").next().expect("flow");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while stored_progress(Testbed::get().target(), alias).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "no stored progress: {}",
            run.stderr()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn end_sum(bootstrap: &str, topic: &str) -> i64 {
    offsets(bootstrap, topic).iter().map(|o| o.1).sum()
}

#[test]
fn planned_failover_moves_a_group_exactly_and_keeps_the_topic_stopped() {
    let tb = Testbed::get();
    let topic = unique("fo-orders");
    create_topic(tb.source(), &topic, 2, &[]);
    produce_round_robin(&topic, "before-", 200);
    let (cfg, flow, remote) = flow_config(&topic);
    let group = unique("fo-app");
    // The group consumed part of the topic on the source.
    let consumed = consume(tb.source(), &group, &topic, 70);
    assert_eq!(consumed.len(), 70);
    let run = Strait::start(Path::new(STRAIT), &cfg, &["--shards", "2"]);
    wait_stored(&flow, &run);
    // Live production while strait copies; it stops before the failover.
    produce_round_robin(&topic, "during-", 300);
    let all_source: BTreeSet<String> = read_all(tb.source(), &topic)
        .into_iter()
        .map(|r| r.value)
        .collect();
    assert_eq!(all_source.len(), 500);

    let (code, report, stderr) = failover(
        &cfg,
        &[
            "--topics",
            &topic,
            "--groups",
            &group,
            "--quiet-seconds",
            "3",
            "--wait-seconds",
            "90",
        ],
    );
    assert_eq!(code, 0, "{report:#}\n{stderr}\n{}", run.stderr());
    let steps = statuses(&report);
    assert_eq!(
        steps,
        ["validate", "quiet", "lag", "stop", "groups"]
            .iter()
            .map(|s| (s.to_string(), "done".to_string()))
            .collect::<Vec<_>>(),
        "{report:#}"
    );
    for p in report["partitions"].as_array().expect("partitions") {
        assert_eq!(p["source_end"], p["target_offset"], "{p:#}");
        assert_eq!(p["source_end"], 250, "{p:#}");
    }
    let g = &report["groups"][0];
    assert_eq!(g["committed"], true, "{report:#}");
    assert!(
        g["partitions"]
            .as_array()
            .expect("rows")
            .iter()
            .all(|r| r["exact"] == true),
        "{report:#}"
    );

    // The group on the target reads exactly what it had not consumed on the source.
    let rest = consume(tb.target(), &group, &remote, 430);
    let rest: Vec<String> = rest.into_iter().map(|r| r.value).collect();
    let rest_set: BTreeSet<String> = rest.iter().cloned().collect();
    assert_eq!(rest.len(), rest_set.len(), "re-read records: {rest:?}");
    let consumed: BTreeSet<String> = consumed.into_iter().map(|r| r.value).collect();
    let expected: BTreeSet<String> = all_source.difference(&consumed).cloned().collect();
    assert_eq!(rest_set, expected, "lost or re-read records");

    // The topic stays stopped: in the running strait, and in a restarted one.
    let before = end_sum(tb.target(), &remote);
    produce_round_robin(&topic, "after-", 20);
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!(end_sum(tb.target(), &remote), before, "{}", run.stderr());
    run.signal("TERM");
    let exit = run.wait(Duration::from_secs(30));
    assert_eq!(exit.code, Some(0), "{}", exit.stderr);
    let again = Strait::start(Path::new(STRAIT), &cfg, &["--shards", "2"]);
    std::thread::sleep(Duration::from_secs(8));
    assert_eq!(end_sum(tb.target(), &remote), before, "{}", again.stderr());
    assert!(
        again.stderr().contains("were failed over"),
        "{}",
        again.stderr()
    );
    drop(again);

    // A second run finds the failover done: it waits for nothing, moves no group again, and
    // names what was written to the old source since.
    let (code, report, stderr) = failover(
        &cfg,
        &[
            "--topics",
            &topic,
            "--quiet-seconds",
            "1",
            "--wait-seconds",
            "5",
        ],
    );
    assert_eq!(code, 0, "{report:#}\n{stderr}");
    assert_eq!(
        statuses(&report),
        [
            ("validate", "done"),
            ("quiet", "skipped"),
            ("lag", "skipped"),
            ("stop", "skipped"),
            ("groups", "skipped")
        ]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect::<Vec<_>>(),
        "{report:#}"
    );
    assert!(
        report["steps"][2]["detail"]
            .as_str()
            .is_some_and(|d| d.contains("10 records")),
        "{report:#}"
    );
}

#[test]
fn failover_refuses_while_a_producer_writes_and_a_killed_run_is_completed_by_the_next() {
    let tb = Testbed::get();
    let topic = unique("fo-busy");
    create_topic(tb.source(), &topic, 1, &[]);
    produce_round_robin(&topic, "a-", 100);
    let (cfg, flow, remote) = flow_config(&topic);
    let run = Strait::start(Path::new(STRAIT), &cfg, &["--shards", "1"]);
    wait_stored(&flow, &run);

    // A producer still writing (Kafka's perf producer, 50 records/s).
    let mut producer = perf_producer(&topic, 50);
    // Until it writes.
    let start = end_sum(tb.source(), &topic);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while end_sum(tb.source(), &topic) == start {
        assert!(
            std::time::Instant::now() < deadline,
            "the perf producer wrote nothing"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let (code, report, stderr) = failover(&cfg, &["--quiet-seconds", "3", "--wait-seconds", "30"]);
    let _ = producer.kill();
    let _ = producer.wait();
    assert_eq!(code, 1, "{report:#}\n{stderr}");
    let refused = report["refused"].as_str().unwrap_or_default();
    assert!(
        refused.contains("producers still write to the source") && refused.contains(&topic),
        "{report:#}"
    );
    assert_eq!(
        statuses(&report).last().map(|s| s.1.as_str()),
        Some("refused")
    );

    // strait stops; more records arrive; the failover waits for a lag that cannot reach zero
    // and is killed there.
    run.signal("TERM");
    let exit = run.wait(Duration::from_secs(30));
    assert_eq!(exit.code, Some(0), "{}", exit.stderr);
    produce_round_robin(&topic, "b-", 50);
    let stderr_file = tempfile::NamedTempFile::new().expect("temp file");
    let mut first = Command::new(STRAIT)
        .args(["failover", "--config"])
        .arg(&cfg)
        .args(["--quiet-seconds", "1", "--wait-seconds", "120"])
        .stdout(std::process::Stdio::null())
        .stderr(stderr_file.reopen().expect("reopen"))
        .spawn()
        .expect("strait failover starts");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(stderr_file.path())
        .unwrap_or_default()
        .contains("waiting for lag 0")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the failover never waited for the lag"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let _ = first.kill();
    let _ = first.wait();

    // strait runs again, and a second failover completes what the killed one started.
    let again = Strait::start(Path::new(STRAIT), &cfg, &["--shards", "1"]);
    let (code, report, stderr) = failover(&cfg, &["--quiet-seconds", "2", "--wait-seconds", "90"]);
    assert_eq!(code, 0, "{report:#}\n{stderr}\n{}", again.stderr());
    let source_end = end_sum(tb.source(), &topic);
    assert_eq!(
        report["partitions"][0]["source_end"], source_end,
        "{report:#}"
    );
    assert_eq!(
        end_sum(tb.target(), &remote),
        source_end,
        "every record copied before the stop"
    );
    drop(again);
}
