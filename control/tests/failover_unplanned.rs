//! Unplanned failover (`strait failover --source-unavailable`, issue 24 item 3) through the
//! binary: the test bed's source broker is frozen (`scripts/testbed pause source 1`, SIGSTOP;
//! resumed by a guard) while Kafka's perf producer writes and strait copies; the failover
//! stops the flow without waiting, moves the group to strait's last checkpoints, and reports a
//! recovery point per partition equal to what the target holds, with the source end strait
//! last saw. Then the source answers again and takes more writes: `strait failback` reports
//! exactly what it holds beyond the copy and quarantines it on the target on request.
//! Its own test binary: no other test runs while the source is frozen.
#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;
use strait_tests::api::{api_addr, produce_round_robin};
use strait_tests::log::{create_topic, offsets, stored_progress, try_offsets};
use strait_tests::strait::Strait;
use strait_tests::translation::{consume, group_offsets};
use strait_tests::{Frozen, Testbed, own_flow_config, perf_producer, unique};

const STRAIT: &str = env!("CARGO_BIN_EXE_strait");

fn wait_for(secs: u64, what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !f() {
        assert!(Instant::now() < deadline, "timed out: {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn unplanned_failover_reports_the_recovery_point_the_target_holds() {
    let tb = Testbed::get();
    let topic = unique("fo-lost");
    create_topic(tb.source(), &topic, 2, &[]);
    produce_round_robin(&topic, "before-", 300);
    let group = unique("fo-unplanned");
    assert_eq!(consume(tb.source(), &group, &topic, 100).len(), 100);

    let (cfg, flow, remote) = own_flow_config(
        &topic,
        "emit.checkpoints.interval.seconds = 1\n\
         refresh.groups.interval.seconds = 1\n\
         strait.api.listen = 127.0.0.1:0\n",
    );
    let src = flow.split("->").next().expect("flow").to_string();
    let run = Strait::start(Path::new(STRAIT), &cfg, &["--shards", "2"]);
    let api = api_addr(&run);
    wait_for(60, "the 300 records copied and stored", || {
        stored_progress(tb.target(), &src).values().sum::<i64>() == 300
    });
    let checkpoints = format!("{src}.checkpoints.internal");
    wait_for(60, "a checkpoint of the group", || {
        try_offsets(tb.target(), &checkpoints).is_some_and(|o| o.iter().any(|p| p.1 > 0))
    });

    // Mid-stream: Kafka's perf producer writes while strait copies, then the source freezes.
    let mut producer = perf_producer(&topic, 200);
    wait_for(60, "records copied while the producer writes", || {
        stored_progress(tb.target(), &src).values().sum::<i64>() > 500
    });
    let frozen = Frozen::new("source");
    let _ = producer.kill();
    let _ = producer.wait();
    // strait flushes what the target acknowledged; nothing more can be fetched.
    std::thread::sleep(Duration::from_secs(5));

    let out = Command::new(STRAIT)
        .args(["failover", "--json", "--source-unavailable", "--config"])
        .arg(&cfg)
        .args(["--groups", &group, "--api", &api])
        .env("NO_COLOR", "1")
        .output()
        .expect("strait failover runs");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{report:#}\n{stderr}\n{}",
        run.stderr()
    );
    assert_eq!(report["planned"], false, "{report:#}");
    let steps: Vec<(&str, &str)> = report["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .map(|s| (s["step"].as_str().unwrap(), s["status"].as_str().unwrap()))
        .collect();
    assert_eq!(
        steps,
        [
            ("validate", "done"),
            ("quiet", "skipped"),
            ("lag", "skipped"),
            ("stop", "done"),
            ("groups", "done")
        ],
        "{report:#}"
    );

    // The recovery point is what the target holds: every record below it, nothing beyond.
    // (log start, end) per partition, in partition order.
    let target_ends: BTreeMap<String, i64> = offsets(tb.target(), &remote)
        .iter()
        .enumerate()
        .map(|(p, (_, end))| (format!("{remote}-{p}"), *end))
        .collect();
    let stored = stored_progress(tb.target(), &src);
    for p in report["partitions"].as_array().expect("partitions") {
        let target = p["target"].as_str().expect("target");
        assert_eq!(
            p["target_offset"].as_i64(),
            target_ends.get(target).copied(),
            "{p:#}"
        );
        assert_eq!(p["source_end"], p["target_offset"], "{p:#}");
        let n: i32 = target.rsplit('-').next().unwrap().parse().unwrap();
        let copied = stored
            .iter()
            .find(|(tp, _)| tp.topic == topic && tp.partition == n)
            .map(|(_, o)| *o);
        assert_eq!(p["source_end"].as_i64(), copied, "{p:#}");
        let seen = p["source_end_last_seen"].as_i64().expect("last seen");
        assert!(seen >= copied.unwrap(), "{p:#}");
        assert_eq!(
            p["records_possibly_lost"].as_i64(),
            Some(seen - copied.unwrap()),
            "{p:#}"
        );
        assert!(p["seconds_possibly_lost"].as_f64().is_some(), "{p:#}");
    }
    // The group moved to strait's last checkpoints.
    let g = &report["groups"][0];
    assert_eq!(g["committed"], true, "{report:#}");
    let on_target = group_offsets(tb.target(), &group);
    for row in g["partitions"].as_array().expect("rows") {
        assert_eq!(row["via"], "last checkpoint", "{row:#}");
        let target = row["target"].as_str().unwrap();
        let (t, p) = target.rsplit_once('-').unwrap();
        assert_eq!(
            on_target.get(&(t.to_string(), p.parse().unwrap())).copied(),
            row["target_offset"].as_i64(),
            "{row:#}\n{on_target:?}"
        );
    }
    let committed: i64 = g["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["committed"].as_i64().unwrap())
        .sum();
    assert_eq!(committed, 100, "{report:#}");

    drop(frozen);
    // What strait saw last is at most what the source holds.
    let source_ends: i64 = offsets(tb.source(), &topic).iter().map(|o| o.1).sum();
    let seen: i64 = report["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["source_end_last_seen"].as_i64().unwrap())
        .sum();
    assert!(seen <= source_ends, "{seen} > {source_ends}");

    // Failback, first part: the old source answers again and takes more writes (a split
    // brain); what it holds beyond the copy is reported exactly and quarantined on request.
    produce_round_robin(&topic, "after-failover-", 25);
    std::thread::sleep(Duration::from_secs(2));
    let failback = |extra: &[&str]| {
        let out = Command::new(STRAIT)
            .args(["failback", "--json", "--config"])
            .arg(&cfg)
            .args(extra)
            .output()
            .expect("strait failback runs");
        (
            out.status.code(),
            serde_json::from_slice::<Value>(&out.stdout).unwrap_or(Value::Null),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let (code, back, stderr) = failback(&[]);
    assert_eq!(code, Some(1), "records are left behind: {back:#}\n{stderr}");
    let stored = stored_progress(tb.target(), &src);
    let ends = offsets(tb.source(), &topic);
    let mut left = 0;
    for p in back["partitions"].as_array().expect("partitions") {
        let n: usize = p["source"]
            .as_str()
            .unwrap()
            .rsplit('-')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let copied = stored
            .iter()
            .find(|(tp, _)| tp.topic == topic && tp.partition == n as i32)
            .map(|(_, o)| *o)
            .unwrap();
        assert_eq!(p["copied_end"], copied, "{p:#}");
        assert_eq!(p["source_end"], ends[n].1, "{p:#}");
        assert_eq!(p["records"], ends[n].1 - copied, "{p:#}");
        left += ends[n].1 - copied;
    }
    assert!(left >= 25, "{back:#}");
    assert_eq!(back["records_left_behind"], left, "{back:#}");
    let (code, back, stderr) = failback(&["--quarantine"]);
    assert_eq!(code, Some(0), "{back:#}\n{stderr}");
    let quarantined = strait_tests::translation::read_all(
        tb.target(),
        &format!("strait-quarantine.{src}.{topic}"),
    );
    assert_eq!(quarantined.len() as i64, left, "{back:#}");
    for i in 0..25 {
        let v = format!("after-failover-{i}");
        assert!(
            quarantined.iter().any(|r| r.value == v),
            "{v} not quarantined"
        );
    }
    run.signal("TERM");
    let _ = run.wait(Duration::from_secs(30));
}
