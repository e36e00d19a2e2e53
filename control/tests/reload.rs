//! Configuration reload of a running `strait run` against the real test bed: a topic added to
//! the filter (through `POST /config/reload`, and again by SIGHUP) is replicated at once while
//! the running partitions keep their connections, counters and records; a bad file (through
//! `strait ctl reload`) and a setting fixed until restart are refused and replication goes on;
//! a removed flow stops with its progress flushed while the other flow goes on.
#![forbid(unsafe_code)]

use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;
use strait_control::cluster::TopicPartition;
use strait_tests::api::{api_addr, eventually, produce_round_robin as produce};
use strait_tests::log::{create_topic, offsets, read_records, stored_progress};
use strait_tests::strait::Strait;
use strait_tests::{Testbed, temp_file, testbed_mm2_config, unique};

/// A request without token or body.
fn call(addr: &str, method: &str, path: &str) -> (u16, Value) {
    strait_tests::api::call(addr, method, path, None, "")
}

const STRAIT: &str = env!("CARGO_BIN_EXE_strait");

/// Records of every partition of `topic` on the target (0 when it does not exist yet).
fn target_count(topic: &str) -> i64 {
    strait_tests::log::try_offsets(Testbed::get().target(), topic)
        .map_or(0, |o| o.iter().map(|(lo, hi)| hi - lo).sum())
}

fn source_count(topic: &str) -> i64 {
    offsets(Testbed::get().source(), topic)
        .iter()
        .map(|(lo, hi)| hi - lo)
        .sum()
}

/// Every partition of `flow` once they are all caught up with `records` copied in all.
fn caught_up(addr: &str, flow: &str, records: i64) -> Vec<Value> {
    let path = format!("/flows/{}/partitions", flow.replace("->", "-%3E"));
    eventually(60, &format!("{flow} copied {records} records"), || {
        let (code, v) = call(addr, "GET", &path);
        let mut ps = v["partitions"].as_array()?.clone();
        ps.sort_by_key(|p| {
            (
                p["topic"].as_str().map(String::from),
                p["partition"].as_i64(),
            )
        });
        let copied: i64 = ps.iter().filter_map(|p| p["records_copied"].as_i64()).sum();
        (code == 200 && copied == records && ps.iter().all(|p| p["lag_records"] == 0)).then_some(ps)
    })
}

/// The shards' reconnects, summed.
fn reconnects(addr: &str) -> u64 {
    let (_, v) = call(addr, "GET", "/status");
    v["shards"]
        .as_array()
        .expect("shards")
        .iter()
        .filter_map(|s| s["reconnects"].as_u64())
        .sum()
}

/// `topic`'s records of partition `p` on the source and, under `remote`, on the target.
fn same_records(topic: &str, remote: &str, p: i32) {
    let tb = Testbed::get();
    let values = |addr: &str, t: &str| -> Vec<String> {
        read_records(addr, t, p)
            .iter()
            .map(|r| r.value_str())
            .collect()
    };
    assert_eq!(
        values(tb.source(), topic),
        values(tb.target(), remote),
        "{remote}-{p}: the target holds other records than the source (copied twice?)"
    );
}

fn append(cfg: &Path, text: &str) {
    let mut f = std::fs::OpenOptions::new().append(true).open(cfg).unwrap();
    f.write_all(text.as_bytes()).unwrap();
}

#[test]
fn a_topic_added_to_the_filter_is_replicated_while_the_others_go_on() {
    let tb = Testbed::get();
    let (t1, t2, t3) = (unique("reload-a"), unique("reload-b"), unique("reload-c"));
    create_topic(tb.source(), &t1, 2, &[]);
    create_topic(tb.source(), &t2, 2, &[]);
    create_topic(tb.source(), &t3, 1, &[]);
    produce(&t1, "a", 40);
    produce(&t2, "b", 20);
    produce(&t3, "c", 10);
    // Discovery runs every 300 s: what starts sooner was started by the reload.
    let cfg = testbed_mm2_config(
        &t1,
        "strait.api.listen = 127.0.0.1:0\nrefresh.topics.interval.seconds = 300\n",
    );
    let strait = Strait::start(Path::new(STRAIT), &cfg, &[]);
    let addr = api_addr(&strait);
    caught_up(&addr, "A->B", 40);
    let reconnects_before = reconnects(&addr);

    // Through the API: t2 joins, t1's partitions go on.
    append(&cfg, &format!("A->B.topics = {t1}, {t2}\n"));
    let started = Instant::now();
    let (code, body) = call(&addr, "POST", "/config/reload");
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["changed"], true, "{body}");
    assert_eq!(body["updated"][0]["flow"], "A->B", "{body}");
    assert_eq!(
        body["updated"][0]["keys"],
        serde_json::json!(["topics"]),
        "{body}"
    );
    assert_eq!(body["restarted"], serde_json::json!([]), "{body}");
    produce(&t1, "a2-", 20);
    let ps = caught_up(&addr, "A->B", 80);
    assert!(
        started.elapsed() < Duration::from_secs(120),
        "not started by the reload"
    );
    assert_eq!(target_count(&format!("A.{t2}")), 20);
    // t1's partitions were not restarted: their counters count since the start of the run.
    for p in ps.iter().filter(|p| p["topic"] == t1.as_str()) {
        assert_eq!(p["records_copied"], p["next_offset"], "{p}");
    }
    for p in 0..2 {
        same_records(&t1, &format!("A.{t1}"), p);
    }

    refused_changes_leave_replication_alone(&addr, &cfg, &t2);

    // SIGHUP does the same: t3 joins.
    let good = std::fs::read_to_string(&cfg).unwrap();
    let good = good
        .replace("A->B.topicz = nope\n", "")
        .replace("strait.shards = 7\n", "");
    std::fs::write(&cfg, format!("{good}A->B.topics = {t1}, {t2}, {t3}\n")).unwrap();
    strait.signal("HUP");
    caught_up(&addr, "A->B", 100);
    assert_eq!(target_count(&format!("A.{t3}")), 10);
    let log = strait.stderr();
    assert!(
        log.lines().any(|l| l.contains("configuration reloaded")
            && l.contains("client=\"SIGHUP\"")
            || l.contains("configuration reloaded") && l.contains("client=SIGHUP")),
        "no reload by SIGHUP in the log:\n{log}"
    );
    assert_eq!(
        reconnects(&addr),
        reconnects_before,
        "the running partitions' connections were replaced"
    );
    for p in 0..2 {
        same_records(&t1, &format!("A.{t1}"), p);
    }
}

/// A bad file (through `strait ctl reload`) and a change of `strait.shards` are refused with
/// their reasons; `t2` (replicated) goes on.
fn refused_changes_leave_replication_alone(addr: &str, cfg: &Path, t2: &str) {
    let lines = std::fs::read_to_string(cfg).unwrap().lines().count() + 1;
    append(cfg, "A->B.topicz = nope\n");
    let out = Command::new(STRAIT)
        .args(["ctl", "--api", addr, "reload"])
        .output()
        .expect("strait ctl runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("400 invalid_config"), "{stderr}");
    assert!(stderr.contains("A->B.topicz"), "{stderr}");
    assert!(stderr.contains(&format!("line {lines}")), "{stderr}");
    assert!(
        stderr.contains("the running configuration stays"),
        "{stderr}"
    );

    let text = std::fs::read_to_string(cfg)
        .unwrap()
        .replace("A->B.topicz = nope\n", "");
    std::fs::write(cfg, format!("{text}strait.shards = 7\n")).unwrap();
    let (code, body) = call(addr, "POST", "/config/reload");
    assert_eq!(code, 409, "{body}");
    assert_eq!(body["error_code"], "restart_required", "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("strait.shards"),
        "{body}"
    );

    produce(t2, "b2-", 10);
    caught_up(addr, "A->B", 90);
    assert_eq!(target_count(&format!("A.{t2}")), 30);
}

/// Settings read once at start (the stall timeout of /health/ready, the group's) are refused
/// by name and reason, through the API and by SIGHUP, and the running file stays the one
/// compared with: taking the change back out is then no change at all.
#[test]
fn settings_read_at_start_are_refused_by_name_and_the_old_file_stays_current() {
    let tb = Testbed::get();
    let (t1, t2) = (unique("reload-s"), unique("reload-t"));
    create_topic(tb.source(), &t1, 1, &[]);
    create_topic(tb.source(), &t2, 1, &[]);
    produce(&t1, "s", 10);
    produce(&t2, "t", 10);
    let cfg = testbed_mm2_config(
        &t1,
        "strait.api.listen = 127.0.0.1:0\nrefresh.topics.interval.seconds = 300\n",
    );
    let good = std::fs::read_to_string(&cfg).unwrap();
    let strait = Strait::start(Path::new(STRAIT), &cfg, &[]);
    let addr = api_addr(&strait);
    caught_up(&addr, "A->B", 10);

    // Through the API, with a change the reload could apply: nothing is applied.
    std::fs::write(
        &cfg,
        format!("{good}strait.health.stall.timeout.ms = 5000\nA->B.topics = {t1}, {t2}\n"),
    )
    .unwrap();
    let (code, body) = call(&addr, "POST", "/config/reload");
    assert_eq!(code, 409, "{body}");
    assert_eq!(body["error_code"], "restart_required", "{body}");
    let message = body["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("strait.health.stall.timeout.ms (read at start; restart to apply)"),
        "{body}"
    );
    assert!(!message.contains("A->B.topics"), "{body}");

    // The refused file did not become current: without the stall timeout, only the topic is
    // new (a stored refused file would make the stall timeout change back).
    std::fs::write(&cfg, format!("{good}A->B.topics = {t1}, {t2}\n")).unwrap();
    let (code, body) = call(&addr, "POST", "/config/reload");
    assert_eq!(code, 200, "{body}");
    assert_eq!(
        body["updated"][0]["keys"],
        serde_json::json!(["topics"]),
        "{body}"
    );
    caught_up(&addr, "A->B", 20);

    // Rules between keys are the config layer's: a reload refuses what strait check refuses.
    let current = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(
        &cfg,
        format!("{current}strait.group.heartbeat.interval.ms = 9000\n"),
    )
    .unwrap();
    let (code, body) = call(&addr, "POST", "/config/reload");
    assert_eq!(code, 400, "{body}");
    assert_eq!(body["error_code"], "invalid_config", "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap_or_default()
            .contains("strait.group.heartbeat.interval.ms = 9000 must be at most a third of strait.group.session.timeout.ms = 10000"),
        "{body}"
    );

    // SIGHUP: a group setting, refused in the log with its name and reason.
    std::fs::write(
        &cfg,
        format!("{current}strait.group.session.timeout.ms = 30000\n"),
    )
    .unwrap();
    strait.signal("HUP");
    let line = eventually(30, "the refused SIGHUP reload in the log", || {
        strait
            .stderr()
            .lines()
            .find(|l| l.contains("configuration reload refused") && l.contains("SIGHUP"))
            .map(str::to_string)
    });
    assert!(
        line.contains("strait.group.session.timeout.ms (the group membership is set up at start"),
        "{line}"
    );
    // Still the file before it.
    std::fs::write(&cfg, &current).unwrap();
    let (code, body) = call(&addr, "POST", "/config/reload");
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["changed"], false, "{body}");
}

#[test]
fn a_removed_flow_stops_and_its_progress_is_flushed() {
    let tb = Testbed::get();
    let (x, y) = (unique("reload-x"), unique("reload-y"));
    create_topic(tb.source(), &x, 1, &[]);
    create_topic(tb.source(), &y, 1, &[]);
    produce(&x, "x", 30);
    produce(&y, "y", 30);
    // The source cluster under two aliases, A and C: two flows into B.
    let cfg = temp_file(&format!(
        "clusters = A, B, C\n\
         A.bootstrap.servers = {src}\n\
         C.bootstrap.servers = {src}\n\
         B.bootstrap.servers = {tgt}\n\
         replication.factor = 1\n\
         checkpoints.topic.replication.factor = 1\n\
         heartbeats.topic.replication.factor = 1\n\
         offset-syncs.topic.replication.factor = 1\n\
         strait.progress.topic.replication.factor = 1\n\
         emit.heartbeats.enabled = false\n\
         heartbeats.replication.enabled = false\n\
         strait.api.listen = 127.0.0.1:0\n\
         A->B.enabled = true\n\
         A->B.topics = {x}\n\
         C->B.enabled = true\n\
         C->B.topics = {y}\n",
        src = tb.source(),
        tgt = tb.target()
    ));
    let strait = Strait::start(Path::new(STRAIT), &cfg, &[]);
    let addr = api_addr(&strait);
    caught_up(&addr, "A->B", 30);
    caught_up(&addr, "C->B", 30);

    // Records arrive while the flow is removed: what was copied is what is stored.
    produce(&y, "y2-", 200);
    append(&cfg, "C->B.enabled = false\n");
    let (code, body) = call(&addr, "POST", "/config/reload");
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["removed"], serde_json::json!(["C->B"]), "{body}");
    let copied = target_count(&format!("C.{y}"));
    let stored = stored_progress(tb.target(), "C");
    assert_eq!(
        stored.get(&TopicPartition::new(&*y, 0)).copied(),
        Some(copied),
        "the removed flow's progress is not what it copied"
    );
    assert_eq!(call(&addr, "GET", "/flows/C-%3EB").0, 404);
    let (_, flows) = call(&addr, "GET", "/flows");
    assert_eq!(flows["flows"].as_array().map(Vec::len), Some(1), "{flows}");

    // The other flow goes on; the removed one copies nothing more.
    produce(&y, "y3-", 10);
    produce(&x, "x2-", 10);
    caught_up(&addr, "A->B", 40);
    assert_eq!(target_count(&format!("C.{y}")), copied);
    assert!(source_count(&y) > copied);
    let log = strait.stderr();
    assert!(log.contains("flow stopped for the reload"), "{log}");
}

#[test]
fn without_a_terminal_progress_is_a_log_line_at_an_interval() {
    let tb = Testbed::get();
    let topic = unique("reload-progress");
    create_topic(tb.source(), &topic, 2, &[]);
    produce(&topic, "p", 50);
    let cfg = testbed_mm2_config(&topic, "strait.api.listen =\n");
    let exit = Strait::start(
        Path::new(STRAIT),
        &cfg,
        &["--until-caught-up", "--progress-interval", "1"],
    )
    .wait(Duration::from_secs(120));
    exit.expect_code(0);
    let lines: Vec<&str> = exit
        .stderr
        .lines()
        .filter(|l| l.contains(" progress ") && l.contains("records_per_s="))
        .collect();
    assert!(!lines.is_empty(), "no progress line:\n{}", exit.stderr);
    for l in &lines {
        for field in ["mib_per_s=", "lag_records=", "flows=A->B: "] {
            assert!(l.contains(field), "{field} missing in {l}");
        }
    }
    // The last one, after the shards' final reports: caught up.
    let last = lines.last().unwrap();
    assert!(
        last.contains("lag_records=0") && last.contains("eta_s=0") && last.contains("lag 0"),
        "{last}"
    );
    assert_eq!(exit.summary().records, 50);
}
