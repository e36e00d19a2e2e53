//! A target outage seen through strait's API: while the target (which also runs strait's group
//! coordinator) does not answer, the member's session lapses and it holds no partition, yet
//! `/flows`, `/flows/{flow}/partitions` and `strait ctl status` keep listing every partition as
//! `NOT_ASSIGNED`, with why, the source end (the source still answers) and a lag that grows
//! with what is produced meanwhile. Once the target answers again, everything is copied.
//!
//! The outage is the test bed's own target broker paused (`scripts/testbed pause`, SIGSTOP;
//! resumed by a guard, whatever the test does): this binary holds this one test, and cargo runs
//! test binaries one after the other, so no other test sees the pause.
#![forbid(unsafe_code)]

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use strait_tests::api::{api_addr, call, eventually, produce_round_robin};
use strait_tests::log::{create_topic, offsets};
use strait_tests::strait::Strait;
use strait_tests::{Frozen, Testbed, own_flow_config, unique};

const STRAIT: &str = env!("CARGO_BIN_EXE_strait");

/// The flow's partitions of `topic` (the test bed's source holds other tests' topics, such as
/// the heartbeats topics MirrorMaker's sample leaves there).
fn partitions(api: &str, flow: &str, topic: &str) -> Vec<Value> {
    let path = format!("/flows/{}/partitions", flow.replace("->", "-%3E"));
    let (code, body) = call(api, "GET", &path, None, "");
    assert_eq!(code, 200, "{body}");
    let mut all = body["partitions"].as_array().cloned().unwrap_or_default();
    all.retain(|p| p["topic"] == topic);
    all
}

fn lag_records(parts: &[Value]) -> i64 {
    parts.iter().filter_map(|p| p["lag_records"].as_i64()).sum()
}

#[test]
fn during_a_target_outage_every_partition_stays_listed_not_assigned_with_its_growing_lag() {
    let tb = Testbed::get();
    let topic = unique("outage");
    create_topic(tb.source(), &topic, 2, &[]);
    produce_round_robin(&topic, "before-", 200);
    let (cfg, flow, remote) = own_flow_config(
        &topic,
        "strait.group.session.timeout.ms = 6000\n\
         strait.group.heartbeat.interval.ms = 1000\n\
         strait.group.rebalance.timeout.ms = 10000\n\
         strait.api.listen = 127.0.0.1:0\n",
    );
    let run = Strait::start(Path::new(STRAIT), &cfg, &[]);
    let api = api_addr(&run);
    let caught_up = |parts: &[Value]| {
        parts.len() == 2
            && parts
                .iter()
                .all(|p| p["state"] == "RUNNING" && p["lag_records"] == 0)
    };
    let mut last = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    while !caught_up(&last) {
        assert!(
            std::time::Instant::now() < deadline,
            "both partitions not copied in 90 s; last answer {last:?}\n{}",
            run.stderr()
        );
        std::thread::sleep(Duration::from_millis(200));
        last = partitions(&api, &flow, &topic);
    }

    let frozen = Frozen::new("target");
    produce_round_robin(&topic, "during-", 300);
    let source_ends: Vec<i64> = offsets(tb.source(), &topic).iter().map(|o| o.1).collect();
    let during = eventually(
        60,
        "both partitions NOT_ASSIGNED with the new source ends",
        || {
            let parts = partitions(&api, &flow, &topic);
            (parts.len() == 2
                && parts.iter().all(|p| {
                    p["state"] == "NOT_ASSIGNED"
                        && p["not_assigned_reason"]
                            .as_str()
                            .is_some_and(|r| r.contains("out of group strait-"))
                        && source_ends.contains(&p["source_end_offset"].as_i64().unwrap_or(-1))
                })
                && lag_records(&parts) == 300)
                .then_some(parts)
        },
    );
    // The lag in time grows while nothing is copied.
    let lag_s = |parts: &[Value]| {
        parts
            .iter()
            .filter_map(|p| p["lag_seconds"].as_f64())
            .fold(0.0, f64::max)
    };
    let first = lag_s(&during);
    eventually(30, "the lag in seconds to grow", || {
        (lag_s(&partitions(&api, &flow, &topic)) >= first + 1.0).then_some(())
    });
    let (code, flows) = call(&api, "GET", "/flows", None, "");
    assert_eq!(code, 200);
    let f = &flows["flows"][0];
    assert_eq!(f["state"], "NOT_ASSIGNED", "{flows}");
    assert_eq!(f["lag_records"], 300, "{flows}");
    assert_eq!(f["partition_states"]["not_assigned"], 2, "{flows}");
    // Through the binary: strait ctl status lists them, and why.
    let out = Command::new(STRAIT)
        .args(["ctl", "--api", &api, "status"])
        .output()
        .expect("strait ctl runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with(&topic) && l.contains("NOT_ASSIGNED"))
        .collect();
    assert_eq!(rows.len(), 2, "{text}");
    assert!(rows.iter().all(|r| r.contains("out of group")), "{text}");

    drop(frozen);
    eventually(120, "everything copied once the target answers", || {
        let dst = strait_tests::log::try_offsets(tb.target(), &remote)?;
        (caught_up(&partitions(&api, &flow, &topic)) && dst.iter().map(|o| o.1).sum::<i64>() >= 500)
            .then_some(())
    });
    run.signal("TERM");
    let exit = run.wait(Duration::from_secs(40));
    assert_eq!(exit.code, Some(0), "{}", exit.stderr);
}
