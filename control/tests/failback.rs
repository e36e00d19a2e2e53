//! Failback (issue 24 item 4) through the binary, under both replication policies: strait
//! copies S->T and stops; 30 records written to S after that are left behind by an unplanned
//! failover; producers then write to the topic on T and the group reads there. The old source
//! answers again: `strait failback` reports exactly what was left behind, quarantines it, and
//! sets up the reverse flow T->S; strait copies what was written on T back to S; `strait
//! failover --flow T->S` moves the group back. On S the group then reads exactly what it had
//! not read on T (plus the records left behind, which it never saw): nothing skipped, nothing
//! read twice.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;
use strait_tests::api::{produce_round_robin, produce_round_robin_to};
use strait_tests::log::{create_topic, offsets, stored_progress, try_offsets};
use strait_tests::strait::Strait;
use strait_tests::translation::{commit_offsets, consume, read_all};
use strait_tests::{Testbed, own_flow_config, unique};

const STRAIT: &str = env!("CARGO_BIN_EXE_strait");

fn wait_for(secs: u64, what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !f() {
        assert!(Instant::now() < deadline, "timed out: {what}");
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// Runs `strait <args>`; its exit code and JSON report.
fn strait(args: &[&str], cfg: &Path) -> (Option<i32>, Value, String) {
    let out = Command::new(STRAIT)
        .args(args)
        .arg("--json")
        .arg("--config")
        .arg(cfg)
        .env("NO_COLOR", "1")
        .output()
        .expect("strait runs");
    (
        out.status.code(),
        serde_json::from_slice(&out.stdout).unwrap_or(Value::Null),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

/// The records of `topic` on `bootstrap` at or after `from` (per partition), by value.
fn unread(bootstrap: &str, topic: &str, from: &BTreeMap<i32, i64>) -> Vec<String> {
    read_all(bootstrap, topic)
        .into_iter()
        .filter(|r| r.offset >= from.get(&r.partition).copied().unwrap_or(0))
        .map(|r| r.value)
        .collect()
}

fn failback_scenario(identity: bool) {
    let tb = Testbed::get();
    let topic = unique(if identity {
        "fb-identity"
    } else {
        "fb-default"
    });
    create_topic(tb.source(), &topic, 2, &[]);
    produce_round_robin(&topic, "before-", 200);
    // The copy's end per partition (the remote partitions' offsets equal the source's).
    let copy_end: Vec<i64> = offsets(tb.source(), &topic).iter().map(|o| o.1).collect();
    let group = unique("fb-group");
    assert_eq!(consume(tb.source(), &group, &topic, 100).len(), 100);

    let policy = if identity {
        "replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy\n"
    } else {
        ""
    };
    let (cfg, flow, _) = own_flow_config(
        &topic,
        &format!(
            "emit.checkpoints.interval.seconds = 1\nrefresh.groups.interval.seconds = 1\n\
             strait.api.listen = 127.0.0.1:0\n{policy}"
        ),
    );
    let (src, tgt) = flow.split_once("->").expect("a flow");
    let (src, tgt) = (src.to_string(), tgt.to_string());
    let remote = if identity {
        topic.clone()
    } else {
        format!("{src}.{topic}")
    };
    // The operator adds the reverse flow for the failback.
    let reverse = format!("{tgt}->{src}");
    let cfg2 = PathBuf::from(format!("{}.failback", cfg.display()));
    std::fs::write(
        &cfg2,
        format!(
            "{}\n{reverse}.enabled = true\n{reverse}.topics = {topic}\n",
            std::fs::read_to_string(&cfg).expect("config")
        ),
    )
    .expect("write the failback config");

    let run = Strait::start(Path::new(STRAIT), &cfg, &[]);
    wait_for(60, "the 200 records copied and stored", || {
        stored_progress(tb.target(), &src).values().sum::<i64>() == 200
    });
    let checkpoints = format!("{src}.checkpoints.internal");
    wait_for(60, "a checkpoint of the group", || {
        try_offsets(tb.target(), &checkpoints).is_some_and(|o| o.iter().any(|p| p.1 > 0))
    });
    run.signal("TERM");
    let _ = run.wait(Duration::from_secs(30));

    // Written to S after strait stopped: what the unplanned failover leaves behind.
    produce_round_robin(&topic, "left-", 30);
    let source_end: Vec<i64> = offsets(tb.source(), &topic).iter().map(|o| o.1).collect();
    let (code, report, stderr) = strait(
        &["failover", "--source-unavailable", "--groups", &group],
        &cfg,
    );
    assert_eq!(code, Some(0), "{report:#}\n{stderr}");

    // On T now: producers write to the topic, and the group reads there; its positions are
    // set so that one partition is inside the copy and the other at (or, under the identity
    // policy, past) its end.
    if !identity {
        create_topic(tb.target(), &topic, 2, &[]);
    }
    produce_round_robin_to(tb.target(), &topic, "on-target-", 40);
    let past = if identity {
        (offsets(tb.target(), &topic)[1].1 - copy_end[1]).min(10)
    } else {
        0
    };
    let on_remote = vec![(0, copy_end[0] - 30), (1, copy_end[1] + past)];
    commit_offsets(tb.target(), &remote, &[(group.clone(), on_remote.clone())]);
    let mut not_read_on_t = unread(tb.target(), &remote, &on_remote.into_iter().collect());
    if !identity {
        let on_local = vec![(0, 5), (1, 0)];
        commit_offsets(tb.target(), &topic, &[(group.clone(), on_local.clone())]);
        not_read_on_t.extend(unread(tb.target(), &topic, &on_local.into_iter().collect()));
    }

    if identity {
        // The reverse flow run before failback set it up would copy the copy back: left out.
        let early = Strait::start(Path::new(STRAIT), &cfg2, &[]);
        wait_for(60, "the reverse flow's refusal in the log", || {
            early
                .stderr()
                .contains("not replicated until `strait failback")
        });
        std::thread::sleep(Duration::from_secs(3));
        let now: i64 = offsets(tb.source(), &topic).iter().map(|o| o.1).sum();
        assert_eq!(now, source_end.iter().sum::<i64>(), "{}", early.stderr());
        early.signal("TERM");
        let _ = early.wait(Duration::from_secs(30));
    }

    // The old source answers again: the records left behind, exactly.
    let (code, back, stderr) = strait(&["failback", "--flow", &flow], &cfg2);
    assert_eq!(code, Some(1), "records are left behind: {back:#}\n{stderr}");
    assert_eq!(back["records_left_behind"], 30, "{back:#}");
    assert!(back["reverse"].is_null(), "{back:#}");
    for (n, p) in back["partitions"]
        .as_array()
        .expect("partitions")
        .iter()
        .enumerate()
    {
        assert_eq!(p["copied_end"], copy_end[n], "{p:#}");
        assert_eq!(p["source_end"], source_end[n], "{p:#}");
        assert_eq!(p["records"], source_end[n] - copy_end[n], "{p:#}");
        if source_end[n] > copy_end[n] {
            assert_eq!(p["first_offset"], copy_end[n], "{p:#}");
            assert_eq!(p["last_offset"], source_end[n] - 1, "{p:#}");
        }
    }
    let (code, back, stderr) = strait(&["failback", "--flow", &flow, "--quarantine"], &cfg2);
    assert_eq!(code, Some(0), "{back:#}\n{stderr}");
    let rev = &back["reverse"];
    assert_eq!(rev["flow"], reverse.as_str(), "{back:#}");
    for (n, p) in rev["partitions"]
        .as_array()
        .expect("reverse partitions")
        .iter()
        .enumerate()
    {
        if identity {
            // The reverse flow starts where the copy ended on T: what is below came from S.
            assert_eq!(p["start_offset"], copy_end[n], "{back:#}");
            assert_eq!(p["status"], "set", "{back:#}");
        } else {
            assert!(p["start_offset"].is_null(), "{back:#}");
        }
    }
    // A second run (after an interruption) copies nothing twice and finds the reverse flow set.
    let (code, again, stderr) = strait(&["failback", "--flow", &flow, "--quarantine"], &cfg2);
    assert_eq!(code, Some(0), "{again:#}\n{stderr}");
    let quarantined = read_all(tb.target(), &format!("strait-quarantine.{src}.{topic}"));
    assert_eq!(quarantined.len(), 30, "{again:#}");
    assert!(quarantined.iter().all(|r| r.value.starts_with("left-")));
    if identity {
        for p in again["reverse"]["partitions"].as_array().expect("reverse") {
            assert_eq!(p["status"], "already set", "{again:#}");
        }
    }

    // The reverse flow copies what was written on T back to S.
    let (back_topic, back_total) = if identity {
        (topic.clone(), 270)
    } else {
        (format!("{tgt}.{topic}"), 40)
    };
    let run = Strait::start(Path::new(STRAIT), &cfg2, &[]);
    wait_for(90, "the records written on T copied to S", || {
        try_offsets(tb.source(), &back_topic)
            .is_some_and(|o| o.iter().map(|p| p.1).sum::<i64>() == back_total)
    });
    let t_end: i64 = offsets(tb.target(), &topic).iter().map(|o| o.1).sum();
    wait_for(60, "the reverse flow's progress stored", || {
        stored_progress(tb.source(), &tgt).values().sum::<i64>() == t_end
    });

    // The failover back to S.
    let (code, report, stderr) = strait(
        &[
            "failover",
            "--flow",
            &reverse,
            "--groups",
            &group,
            "--quiet-seconds",
            "2",
        ],
        &cfg2,
    );
    assert_eq!(code, Some(0), "{report:#}\n{stderr}\n{}", run.stderr());
    let rows = report["groups"][0]["partitions"]
        .as_array()
        .expect("group rows")
        .clone();
    let back_rows = rows.iter().filter(|r| r["via"] == "mapping back").count();
    // Under the identity policy a position past the copy's end goes by the reverse flow's
    // own mapping; every other goes back by the forward flow's.
    let expected_back = if identity && past > 0 { 1 } else { 2 };
    assert_eq!(back_rows, expected_back, "{report:#}");
    assert!(rows.iter().all(|r| r["exact"] == true), "{report:#}");
    run.signal("TERM");
    let _ = run.wait(Duration::from_secs(30));

    // On S the group reads exactly what it had not read on T, and the records left behind.
    let mut read_on_s: Vec<String> = consume(tb.source(), &group, &topic, -1)
        .into_iter()
        .map(|r| r.value)
        .collect();
    if !identity {
        read_on_s.extend(
            consume(tb.source(), &group, &back_topic, -1)
                .into_iter()
                .map(|r| r.value),
        );
    }
    let left: Vec<&String> = read_on_s
        .iter()
        .filter(|v| v.starts_with("left-"))
        .collect();
    assert!(left.len() <= 30, "{left:?}");
    let mut read: Vec<String> = read_on_s
        .iter()
        .filter(|v| !v.starts_with("left-"))
        .cloned()
        .collect();
    read.sort();
    not_read_on_t.sort();
    assert_eq!(
        read, not_read_on_t,
        "the group on S must read exactly what it had not read on T"
    );

    // The last step: S->T copies the topic again, so that T is a copy of S once more. Under
    // the identity policy it starts past what came back from T; under the default policy it
    // goes on from its stored progress (the records left behind reach T now).
    let (code, resumed, stderr) = strait(&["failback", "--flow", &flow, "--resume"], &cfg2);
    assert_eq!(code, Some(0), "{resumed:#}\n{stderr}");
    produce_round_robin(&topic, "after-resume-", 10);
    let before: i64 = offsets(tb.target(), &remote).iter().map(|o| o.1).sum();
    let expected = before + if identity { 10 } else { 40 };
    let run = Strait::start(Path::new(STRAIT), &cfg2, &[]);
    wait_for(90, "S->T copying again", || {
        offsets(tb.target(), &remote)
            .iter()
            .map(|o| o.1)
            .sum::<i64>()
            == expected
    });
    std::thread::sleep(Duration::from_secs(2));
    run.signal("TERM");
    let _ = run.wait(Duration::from_secs(30));
    let on_t: Vec<String> = read_all(tb.target(), &remote)
        .into_iter()
        .map(|r| r.value)
        .collect();
    let count = |prefix: &str| on_t.iter().filter(|v| v.starts_with(prefix)).count();
    assert_eq!(on_t.len() as i64, expected, "{resumed:#}");
    assert_eq!(count("after-resume-"), 10, "{resumed:#}");
    assert_eq!(count("left-"), if identity { 0 } else { 30 }, "{resumed:#}");
    let unique: std::collections::BTreeSet<&String> = on_t.iter().collect();
    assert_eq!(
        unique.len(),
        on_t.len(),
        "a record copied twice: {resumed:#}"
    );
    if identity {
        second_cycle(&cfg2, &flow, &reverse, &topic);
    }
}

/// A second failover and failback after the resume, under the identity policy: the reverse
/// flow's start and stop left by the first cycle are replaced, and only what is written on T
/// this time reaches S.
fn second_cycle(cfg2: &Path, flow: &str, reverse: &str, topic: &str) {
    let tb = Testbed::get();
    let (code, report, stderr) =
        strait(&["failover", "--flow", flow, "--source-unavailable"], cfg2);
    assert_eq!(code, Some(0), "{report:#}\n{stderr}");
    let copy_end: Vec<i64> = offsets(tb.target(), topic).iter().map(|o| o.1).collect();
    produce_round_robin_to(tb.target(), topic, "second-on-target-", 6);
    let (code, back, stderr) = strait(&["failback", "--flow", flow, "--quarantine"], cfg2);
    assert_eq!(code, Some(0), "{back:#}\n{stderr}");
    assert_eq!(back["records_left_behind"], 0, "{back:#}");
    for (n, p) in back["reverse"]["partitions"]
        .as_array()
        .expect("reverse partitions")
        .iter()
        .enumerate()
    {
        assert_eq!(p["start_offset"], copy_end[n], "{back:#}");
        assert_eq!(p["status"], "set", "{back:#}");
    }
    let before: i64 = offsets(tb.source(), topic).iter().map(|o| o.1).sum();
    let run = Strait::start(Path::new(STRAIT), cfg2, &[]);
    wait_for(90, "the second cycle's records copied back", || {
        offsets(tb.source(), topic).iter().map(|o| o.1).sum::<i64>() == before + 6
    });
    std::thread::sleep(Duration::from_secs(2));
    run.signal("TERM");
    let _ = run.wait(Duration::from_secs(30));
    let on_s: Vec<String> = read_all(tb.source(), topic)
        .into_iter()
        .map(|r| r.value)
        .collect();
    assert_eq!(on_s.len() as i64, before + 6, "{reverse}");
    let unique: std::collections::BTreeSet<&String> = on_s.iter().collect();
    assert_eq!(
        unique.len(),
        on_s.len(),
        "a record copied twice by {reverse}"
    );
    let second = on_s
        .iter()
        .filter(|v| v.starts_with("second-on-target-"))
        .count();
    assert_eq!(second, 6, "{reverse}");
}

#[test]
fn failback_under_the_default_replication_policy() {
    failback_scenario(false);
}

#[test]
fn failback_under_the_identity_replication_policy() {
    failback_scenario(true);
}
