//! `strait drill` end to end on the test bed: groups consume part of a topic on the source with
//! Kafka's own client, `strait run --until-caught-up` replicates, checkpoints and syncs them,
//! and the drill starts a shadow group on the target and compares, by content, the first record
//! it reads with the first record each group had not consumed. It passes for a synced group,
//! reports the skip of a group whose target offsets were set past the translation, refuses a
//! group active on the target, and never writes the group it rehearses.
#![forbid(unsafe_code)]

use strait_tests::translation::{
    ActiveMember, committed, config, consume, create_topic, group_offsets, produce,
    reset_group_offsets, strait_run,
};
use strait_tests::{Testbed, kafka_tool_ok, unique};

/// The `strait` binary under test.
const STRAIT: &str = env!("CARGO_BIN_EXE_strait");

/// Runs `strait drill --json`: (exit code, report, stderr).
fn drill(cfg: &std::path::Path, group: &str, extra: &[&str]) -> (i32, serde_json::Value, String) {
    let out = std::process::Command::new(STRAIT)
        .args(["drill", "--config"])
        .arg(cfg)
        .args(["--group", group, "--json"])
        .args(extra)
        .output()
        .expect("strait runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let report = serde_json::from_str(&stdout).unwrap_or(serde_json::Value::Null);
    (out.status.code().unwrap_or(-1), report, stderr)
}

fn rows(report: &serde_json::Value) -> Vec<&serde_json::Value> {
    report["partitions"]
        .as_array()
        .map(|a| a.iter().collect())
        .unwrap_or_default()
}

#[test]
fn drill_passes_for_a_synced_group_reports_a_skip_and_refuses_an_active_group() {
    let tb = Testbed::get();
    let topic = unique("drill");
    let remote = format!("A.{topic}");
    let (synced, ahead, busy) = (unique("dr-ok"), unique("dr-ahead"), unique("dr-busy"));
    create_topic(tb.source(), &topic, 3, &[]);
    produce(&topic, 600, "v", 600, 1);
    let source_committed = committed(&consume(tb.source(), &synced, &topic, 250));
    let ahead_committed = committed(&consume(tb.source(), &ahead, &topic, 90));
    consume(tb.source(), &busy, &topic, 30);

    let cfg = config(&topic, "sync.group.offsets.enabled = true\n");
    strait_run(STRAIT, &cfg);

    // A synced group: every partition exact, the group's own offsets untouched.
    let before = group_offsets(tb.target(), &synced);
    let (code, report, stderr) = drill(&cfg, &synced, &[]);
    assert_eq!(code, 0, "{report:#}\n{stderr}");
    assert_eq!(report["group_sync_caught_up"], true, "{report:#}");
    assert_eq!(report["shadow_group_deleted"], true, "{report:#}");
    let parts = rows(&report);
    assert_eq!(parts.len(), source_committed.len(), "{report:#}");
    for r in &parts {
        let p = r["partition"].as_i64().expect("partition") as i32;
        assert_eq!(r["source_offset"], source_committed[&p], "{r:#}");
        assert_eq!(r["shadow_start"], r["target_committed"], "{r:#}");
        // A partition the group read to its end has nothing to read on either side.
        if r["first_source_record"].is_null() {
            assert_eq!(r["outcome"]["kind"], "nothing_to_read", "{r:#}");
            assert!(r["first_target_record"].is_null(), "{r:#}");
        } else {
            assert_eq!(r["outcome"]["kind"], "exact", "{r:#}");
            assert_eq!(r["first_source_record"], source_committed[&p], "{r:#}");
        }
        assert_eq!(r["lag_records"], 0, "{r:#}");
    }
    // 250 of 600 records consumed: some partition has records left, so some comparison ran.
    assert!(
        parts.iter().any(|r| r["outcome"]["kind"] == "exact"),
        "{report:#}"
    );
    assert_eq!(
        group_offsets(tb.target(), &synced),
        before,
        "the drill wrote the group"
    );
    let shadow = report["shadow_group"].as_str().expect("shadow group");
    assert!(
        !kafka_tool_ok(
            "kafka-consumer-groups",
            &["--bootstrap-server", tb.target(), "--list"],
            None
        )
        .lines()
        .any(|l| l.trim() == shadow),
        "{shadow} left on the target"
    );

    // Set on the target past the translation of one partition: a failed-over consumer would
    // skip records. Group sync never moves a group back, so the drill sees it.
    let (&skewed, &at) = ahead_committed
        .iter()
        .next()
        .expect("the group read something");
    let past = at + 7;
    reset_group_offsets(
        tb.target(),
        &ahead,
        &format!("{remote}:{skewed}"),
        &["--to-offset", &past.to_string()],
    );
    let (code, report, stderr) = drill(&cfg, &ahead, &["--wait-seconds", "2"]);
    assert_eq!(code, 1, "{report:#}\n{stderr}");
    assert_eq!(report["group_sync_caught_up"], false, "{report:#}");
    let parts = rows(&report);
    assert!(parts.iter().any(|r| r["partition"] == skewed), "{report:#}");
    for r in parts {
        if r["partition"] == skewed {
            assert_eq!(r["shadow_start"], past, "{r:#}");
            assert_eq!(
                r["outcome"],
                serde_json::json!({"kind": "skipped", "records": 7}),
                "{r:#}"
            );
        } else {
            assert_ne!(r["outcome"]["kind"], "skipped", "{r:#}");
        }
    }

    // A member of `busy` consuming on the target: refused, nothing written.
    let member = ActiveMember::start(tb.target(), &busy, &remote);
    let (code, _, stderr) = drill(&cfg, &busy, &[]);
    member.finish();
    assert_eq!(code, 3, "{stderr}");
    assert!(
        stderr.contains(&format!("group {busy} is Stable on B")),
        "{stderr}"
    );
}
