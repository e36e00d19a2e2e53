//! `strait verify` through the binary against the test bed (issue 23): it passes on copies of
//! topics in every codec with keys and headers, a compacted topic after the cleaner ran and a
//! transactional topic with aborts, and it fails, naming partition, offsets and field, on a
//! record produced straight into the remote topic (extra), records deleted on the target
//! (missing) and a remote partition recreated with other data of the same count (mismatch); on
//! a topic whose oldest source segment retention deleted, it compares from the source's log
//! start and names the deleted range as not compared. Continuous verification in `strait run`
//! (`strait.verify.*`) reports the same damage in its first round and fails readiness.
//! Test data comes from Kafka's console producer and Kafka's transactional producer; the
//! record counts verify reports are checked against Kafka's console consumer.
#![forbid(unsafe_code)]

use std::path::Path;
use std::process::Command;

use serde_json::Value;
use strait_tests::api::{api_addr, call, eventually};
use strait_tests::strait::{Strait, verify_json};
use strait_tests::translation::{
    config, create_topic, produce_compacted_with_gaps, read_all, strait_run,
};
use strait_tests::{Testbed, kafka_tool_ok, temp_file, unique};

const STRAIT: &str = env!("CARGO_BIN_EXE_strait");

/// `strait verify --json` on `cfg`: exit code and the report.
fn verify(cfg: &Path, args: &[&str]) -> (i32, Value, String) {
    verify_json(Path::new(STRAIT), cfg, args)
}

/// The table form, for the failure messages and the table's own check.
fn verify_text(cfg: &Path, args: &[&str]) -> (i32, String) {
    let out = Command::new(STRAIT)
        .args(["verify", "--config"])
        .arg(cfg)
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("strait verify runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr),
    )
}

/// The report's partitions of `topic` (source topic), by partition number.
fn partitions<'a>(report: &'a Value, topic: &str) -> Vec<&'a Value> {
    report["partitions"]
        .as_array()
        .expect("partitions")
        .iter()
        .filter(|p| {
            p["source"]
                .as_str()
                .and_then(|s| s.rsplit_once('-'))
                .is_some_and(|(t, _)| t == topic)
        })
        .collect()
}

fn sum(parts: &[&Value], field: &str) -> u64 {
    parts.iter().map(|p| p[field].as_u64().expect(field)).sum()
}

/// Lines `key\theaders\tvalue` into `topic` on `bootstrap` through Kafka's console producer
/// with `compression` (the producer's default when `None`).
fn console_produce(bootstrap: &str, topic: &str, compression: Option<&str>, lines: &str) {
    let mut args = vec!["--bootstrap-server", bootstrap, "--topic", topic];
    if let Some(codec) = compression {
        args.extend(["--compression-codec", codec]);
    }
    for property in [
        "parse.key=true",
        "parse.headers=true",
        "key.separator=\t",
        "headers.delimiter=\t",
    ] {
        args.extend(["--property", property]);
    }
    kafka_tool_ok("kafka-console-producer", &args, Some(lines.as_bytes()));
}

fn keyed_lines(prefix: &str, n: usize) -> String {
    (0..n)
        .map(|i| format!("h1:{prefix}{i},h2:x\tk{}\t{prefix}-value-{i}\n", i % 7))
        .collect()
}

#[test]
fn verify_passes_on_every_codec_with_headers_compaction_and_aborts() {
    let tb = Testbed::get();
    let tag = unique("vfy-ok");
    let mut plain = Vec::new();
    for codec in ["none", "gzip", "snappy", "lz4", "zstd"] {
        let t = format!("{tag}-{codec}");
        create_topic(tb.source(), &t, 2, &[]);
        console_produce(
            Testbed::get().source(),
            &t,
            Some(codec),
            &keyed_lines(codec, 300),
        );
        plain.push(t);
    }
    let compacted = format!("{tag}-compacted");
    produce_compacted_with_gaps(&compacted);
    let tool = strait_tests::offsets_tool();
    strait_tests::translation::wait_for_compaction_gaps(&compacted);
    let txn = format!("{tag}-txn");
    create_topic(tb.source(), &txn, 2, &[]);
    tool.run(
        &[
            "produce-tx",
            tb.source(),
            &txn,
            &unique("vfy-txid"),
            "c10,a6,c7,c3,a4,c12,a2,c9",
        ],
        None,
    );

    let cfg = config(&format!("{tag}-.*"), "");
    strait_run(STRAIT, &cfg);
    let (code, report, stderr) = verify(&cfg, &[]);
    let (_, text) = verify_text(&cfg, &[]);
    assert_eq!(code, 0, "verify failed:\n{text}\n{stderr}");
    assert!(text.contains("OK: flow A->B"), "{text}");

    for t in plain.iter().chain([&compacted, &txn]) {
        let parts = partitions(&report, t);
        let expected_partitions = if t == &compacted { 1 } else { 2 };
        assert_eq!(parts.len(), expected_partitions, "{t}: {report:#}");
        // Kafka's consumer (read_committed) sees exactly what verify compared.
        let visible = read_all(tb.source(), t).len() as u64;
        assert_eq!(sum(&parts, "source_records"), visible, "{t}: {report:#}");
        // On the compacted topic the target's own cleaner may remove what the source's kept
        // in its active segment: counted apart, not as missing.
        assert_eq!(
            sum(&parts, "matched") + sum(&parts, "source_only_compacted"),
            visible,
            "{t}: {report:#}"
        );
        for field in ["missing", "extra", "mismatched"] {
            assert_eq!(sum(&parts, field), 0, "{t} {field}: {report:#}");
        }
        for p in &parts {
            assert_eq!(p["source_digest"], p["target_digest"], "{t}: {p:#}");
        }
    }
    // The aborted records were not visible, so not compared: 10+7+3+12+9 committed.
    assert_eq!(sum(&partitions(&report, &txn), "matched"), 41);
}

#[test]
fn verify_names_extra_missing_and_mismatched_records() {
    let tag = unique("vfy-bad");
    let [extra, missing, changed, clean] = four_topics(&tag, "lz4");
    let cfg = config(&format!("{tag}-.*"), "");
    strait_run(STRAIT, &cfg);
    let (code, _, stderr) = verify(&cfg, &[]);
    assert_eq!(code, 0, "before any damage: {stderr}");

    damage(&extra, &missing, &changed);

    let (code, report, stderr) = verify(&cfg, &[]);
    let (text_code, text) = verify_text(&cfg, &[]);
    assert_eq!((code, text_code), (1, 1), "{text}\n{stderr}");
    assert!(text.contains("FAILED: flow A->B"), "{text}");

    let p = partitions(&report, &extra)[0];
    assert_eq!(
        (
            p["extra"].as_u64(),
            p["missing"].as_u64(),
            p["matched"].as_u64()
        ),
        (Some(1), Some(0), Some(50)),
        "{p:#}"
    );
    assert_eq!(p["first_difference"]["kind"], "extra", "{p:#}");
    assert_eq!(p["first_difference"]["target_offset"], 50, "{p:#}");
    assert!(text.contains("extra: target 50"), "{text}");

    let p = partitions(&report, &missing)[0];
    assert_eq!(
        (p["missing"].as_u64(), p["matched"].as_u64()),
        (Some(10), Some(40)),
        "{p:#}"
    );
    assert_eq!(p["first_difference"]["source_offset"], 0, "{p:#}");
    assert!(text.contains("missing: source 0 not at target 0"), "{text}");

    // Same keys and headers, other timestamps: every record differs, the first field that
    // differs is the timestamp; record 17 also differs in value, but the report names the
    // first difference, at offset 0.
    let p = partitions(&report, &changed)[0];
    assert_eq!(p["mismatched"].as_u64(), Some(50), "{p:#}");
    assert_eq!(p["first_difference"]["kind"], "mismatch", "{p:#}");
    assert_eq!(p["first_difference"]["field"], "timestamp", "{p:#}");
    assert_ne!(p["source_digest"], p["target_digest"], "{p:#}");

    let p = partitions(&report, &clean)[0];
    assert_eq!(p["matched"].as_u64(), Some(50), "{p:#}");

    // Sampled: whole batches at random offsets find the changed records too, and pass on the
    // clean topic.
    let (code, report, stderr) = verify(
        &cfg,
        &["--sample", "0.3", "--seed", "7", "--topics", &changed],
    );
    assert_eq!(code, 1, "{report:#}\n{stderr}");
    let p = partitions(&report, &changed)[0];
    assert!(p["mismatched"].as_u64() > Some(0), "{p:#}");
    assert!(p["sampled_batches"].as_u64() >= Some(1), "{p:#}");
    assert_eq!(report["mode"], "sample 0.3 seed 7", "{report:#}");
    let (code, report, stderr) = verify(&cfg, &["--sample", "0.3", "--topics", &clean]);
    assert_eq!(code, 0, "{report:#}\n{stderr}");
    let p = partitions(&report, &clean)[0];
    assert!(p["matched"].as_u64() >= Some(15), "{p:#}");

    // Narrowed to the clean topic, it passes.
    let (code, _, stderr) = verify(&cfg, &["--topics", &format!("{tag}-clean")]);
    assert_eq!(code, 0, "{stderr}");
}

/// `{tag}-extra`, `-missing`, `-changed` and `-clean` on the source, one partition each, with 50
/// keyed records with headers in `codec`.
fn four_topics(tag: &str, codec: &str) -> [String; 4] {
    let names = ["extra", "missing", "changed", "clean"].map(|k| format!("{tag}-{k}"));
    for t in &names {
        create_topic(Testbed::get().source(), t, 1, &[]);
        console_produce(
            Testbed::get().source(),
            t,
            Some(codec),
            &keyed_lines("s", 50),
        );
    }
    names
}

/// The three kinds of damage: a record produced straight into `A.{extra}` (extra), the first
/// 10 records of `A.{missing}` deleted (missing), and `A.{changed}` recreated with other data
/// of the same count (mismatch: other timestamps, and one value).
fn damage(extra: &str, missing: &str, changed: &str) {
    let tb = Testbed::get();
    // A record produced straight into the remote topic.
    kafka_tool_ok(
        "kafka-console-producer",
        &[
            "--bootstrap-server",
            tb.target(),
            "--topic",
            &format!("A.{extra}"),
        ],
        Some(b"intruder\n"),
    );
    // Records deleted on the target.
    let spec = temp_file(&format!(
        r#"{{"version":1,"partitions":[{{"topic":"A.{missing}","partition":0,"offset":10}}]}}"#
    ));
    kafka_tool_ok(
        "kafka-delete-records",
        &[
            "--bootstrap-server",
            tb.target(),
            "--offset-json-file",
            spec.to_str().expect("utf-8"),
        ],
        None,
    );
    // The remote partition recreated with other data of the same count.
    let remote = format!("A.{changed}");
    kafka_tool_ok(
        "kafka-topics",
        &[
            "--bootstrap-server",
            tb.target(),
            "--delete",
            "--topic",
            &remote,
        ],
        None,
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let listed = kafka_tool_ok(
            "kafka-topics",
            &["--bootstrap-server", tb.target(), "--list"],
            None,
        );
        if !listed.lines().any(|l| l.trim() == remote) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{remote} not deleted");
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    create_topic(tb.target(), &remote, 1, &[]);
    let lines: String = keyed_lines("s", 50)
        .lines()
        .enumerate()
        .map(|(i, l)| {
            if i == 17 {
                l.replace("s-value-17", "other-value-17") + "\n"
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    console_produce(tb.target(), &remote, None, &lines);
}

/// Polls `f` every 500 ms for at most `secs` seconds.
fn wait_until(secs: u64, what: &str, mut f: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while !f() {
        assert!(std::time::Instant::now() < deadline, "timed out: {what}");
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
}

/// `kafka-configs --alter` of `topic` on the source.
fn alter_source_topic(topic: &str, change: &[&str]) {
    let mut args = vec![
        "--bootstrap-server",
        Testbed::get().source(),
        "--alter",
        "--entity-type",
        "topics",
        "--entity-name",
        topic,
    ];
    args.extend(change);
    kafka_tool_ok("kafka-configs", &args, None);
}

#[test]
fn verify_compares_from_the_source_log_start_after_retention_deleted_the_oldest_segment() {
    let tb = Testbed::get();
    let topic = unique("vfy-retention");
    // Segments roll after a second, so the first records sit in a segment of their own.
    create_topic(tb.source(), &topic, 1, &["segment.ms=1000"]);
    console_produce(tb.source(), &topic, Some("gzip"), &keyed_lines("old", 200));
    std::thread::sleep(std::time::Duration::from_millis(1500));
    console_produce(tb.source(), &topic, Some("gzip"), &keyed_lines("mid", 200));
    let cfg = config(&format!("{topic}$"), "");
    strait_run(STRAIT, &cfg);

    // Retention deletes what is older than a second (the test bed checks every second); once
    // the first segment is gone, it is lifted and more records come.
    alter_source_topic(&topic, &["--add-config", "retention.ms=1000"]);
    let offsets = |addr: &str, t: &str| strait_tests::log::offsets(addr, t)[0];
    wait_until(60, "retention to delete the first segment", || {
        offsets(tb.source(), &topic).0 >= 200
    });
    alter_source_topic(&topic, &["--delete-config", "retention.ms"]);
    console_produce(tb.source(), &topic, Some("gzip"), &keyed_lines("new", 200));
    strait_run(STRAIT, &cfg);

    let (source_start, source_end) = offsets(tb.source(), &topic);
    let (target_start, target_end) = offsets(tb.target(), &format!("A.{topic}"));
    assert_eq!(source_end, 600);
    // The target keeps what retention removed from the source.
    assert_eq!((target_start, target_end), (0, 600));
    let (code, report, stderr) = verify(&cfg, &[]);
    let (_, text) = verify_text(&cfg, &[]);
    assert_eq!(code, 0, "verify failed:\n{text}\n{stderr}");
    let p = partitions(&report, &topic)[0];
    // What the source still holds is compared and matches; what retention deleted is named as
    // not compared (with its range), neither missing nor extra.
    assert_eq!(
        p["matched"].as_u64(),
        Some((600 - source_start) as u64),
        "{p:#}"
    );
    for field in ["missing", "extra", "mismatched"] {
        assert_eq!(p[field].as_u64(), Some(0), "{field}: {p:#}");
    }
    let gaps = p["not_compared"].as_array().expect("not_compared");
    assert!(
        gaps.iter().any(|g| g["from"] == 0
            && g["to"] == source_start
            && g["reason"]
                .as_str()
                .is_some_and(|r| r.contains("deleted from the source"))),
        "{p:#}"
    );
    assert!(text.contains("deleted from the source"), "{text}");
}

/// The flow's partitions in `GET /flows/A->B/partitions`, by source topic (none while strait
/// starts).
fn api_partitions(api: &str) -> std::collections::BTreeMap<String, Value> {
    let (code, body) = call(api, "GET", "/flows/A-%3EB/partitions", None, "");
    if code == 503 && body["error_code"] == "starting" {
        return Default::default();
    }
    assert_eq!(code, 200, "{body}");
    body["partitions"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|p| (p["topic"].as_str().unwrap_or_default().to_string(), p))
        .collect()
}

/// Continuous verification (`strait.verify.*`) in `strait run` reports the damage of the test
/// above in its first round, one interval after the start: counts and the first difference per
/// partition in `/flows/{flow}/partitions`, `/flows`, `/metrics`, and `/health/ready` fails
/// naming partition and offsets; then it goes on verifying what is copied next.
#[test]
fn continuous_verification_reports_extra_missing_and_mismatched_records_in_its_first_round() {
    let tb = Testbed::get();
    let tag = unique("vfy-cont");
    let [extra, missing, changed, clean] = four_topics(&tag, "zstd");
    strait_run(STRAIT, &config(&format!("{tag}-.*"), ""));
    damage(&extra, &missing, &changed);

    // Rounds 5 s apart: the first observation of a round is the first round's.
    let cfg = config(
        &format!("{tag}-.*"),
        "strait.api.listen = 127.0.0.1:0\n\
         strait.verify.enabled = true\n\
         strait.verify.from = history\n\
         strait.verify.interval.ms = 5000\n",
    );
    let run = Strait::start(Path::new(STRAIT), &cfg, &["--shards", "2"]);
    let api = api_addr(&run);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let first = loop {
        let parts = api_partitions(&api);
        let done = [&extra, &missing, &changed, &clean].iter().all(|t| {
            parts
                .get(*t)
                .is_some_and(|p| p["verification"]["rounds"].as_u64() >= Some(1))
        });
        if done {
            break parts;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no verification round over the 4 partitions in 60 s; last answer {parts:#?}\n{}",
            run.stderr()
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    let v = |t: &str| first[t]["verification"].clone();
    for t in [&extra, &missing, &changed, &clean] {
        assert_eq!(v(t)["rounds"], 1, "{t}: {:#}\n{}", v(t), run.stderr());
        assert_eq!(v(t)["records_verified"], 50, "{t}: {:#}", v(t));
        assert_eq!(v(t)["last_verified_offset"], 50, "{t}: {:#}", v(t));
        assert!(v(t)["error"].is_null(), "{t}: {:#}", v(t));
    }
    assert_eq!(v(&extra)["mismatches"], 1, "{:#}", v(&extra));
    assert_eq!(
        v(&extra)["first_mismatch"],
        format!("{extra}-0: extra: target 50"),
        "{:#}",
        v(&extra)
    );
    assert_eq!(v(&missing)["mismatches"], 10, "{:#}", v(&missing));
    assert_eq!(
        v(&missing)["first_mismatch"],
        format!("{missing}-0: missing: source 0 not at target 0")
    );
    assert_eq!(v(&changed)["mismatches"], 50, "{:#}", v(&changed));
    assert_eq!(
        v(&changed)["first_mismatch"],
        format!("{changed}-0: timestamp differs: source 0 target 0")
    );
    assert_eq!(v(&clean)["mismatches"], 0, "{:#}", v(&clean));

    // Readiness fails, naming each damaged partition and the offsets.
    let (code, health) = call(&api, "GET", "/health/ready", None, "");
    assert_eq!(code, 503, "{health:#}");
    let listed: Vec<(String, String)> = health["partitions"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter(|p| p["reason"] == "verify_mismatch")
        .map(|p| {
            (
                p["topic"].as_str().unwrap_or_default().to_string(),
                p["detail"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    assert_eq!(listed.len(), 3, "{health:#}");
    assert!(
        listed
            .iter()
            .any(|(t, d)| *t == missing && d.contains("missing: source 0 not at target 0")),
        "{health:#}"
    );
    let (_, flows) = call(&api, "GET", "/flows", None, "");
    let flow = &flows["flows"][0];
    assert_eq!(flow["verification"]["mismatches"], 61, "{flows:#}");
    assert_eq!(flow["verification"]["records_verified"], 200, "{flows:#}");
    let ctl = Command::new(STRAIT)
        .args(["ctl", "--api", &api, "status"])
        .output()
        .expect("strait ctl runs");
    let text = String::from_utf8_lossy(&ctl.stdout);
    assert!(
        text.contains(
            "continuous verification: 200 records verified in 4 partitions, 61 mismatches; first: "
        ),
        "{text}"
    );
    let metrics = strait_tests::http::request(&api, "GET", "/metrics", None)
        .expect("/metrics answers")
        .body;
    assert!(
        metrics.contains("strait_flow_verify_mismatches_total{flow=\"A->B\"} 61"),
        "{metrics}"
    );
    assert!(
        metrics.contains(&format!(
            "strait_partition_last_verified_offset{{flow=\"A->B\",topic=\"{clean}\",partition=\"0\"}} 50"
        )),
        "{metrics}"
    );

    // What is copied next is verified by the following rounds.
    console_produce(tb.source(), &clean, Some("gzip"), &keyed_lines("n", 30));
    eventually(60, "the 30 new records verified", || {
        let p = api_partitions(&api).remove(&clean)?;
        (p["verification"]["records_verified"] == 80).then_some(())
    });
    let p = &api_partitions(&api)[&clean];
    assert_eq!(p["verification"]["last_verified_offset"], 80, "{p:#}");
    assert_eq!(p["verification"]["mismatches"], 0, "{p:#}");
    run.signal("TERM");
    let exit = run.wait(std::time::Duration::from_secs(30));
    assert!(!exit.stderr.contains("panicked"), "{}", exit.stderr);
}

/// `strait smoke --json` on `cfg`: exit code, the report (null when none) and stderr.
fn smoke(cfg: &Path, args: &[&str]) -> (i32, Value, String) {
    let out = Command::new(STRAIT)
        .args(["smoke", "--json", "--config"])
        .arg(cfg)
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("strait smoke runs");
    (
        out.status.code().unwrap_or(-1),
        serde_json::from_slice(&out.stdout).unwrap_or(Value::Null),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

/// `strait smoke` while strait runs: the stamped record reaches the remote topic identical, at
/// the target offset the stored mapping gives; a topic the flow does not copy is refused; with
/// strait stopped, the record is reported not copied.
#[test]
fn smoke_finds_its_record_on_the_target_where_the_stored_mapping_puts_it() {
    let tb = Testbed::get();
    let tag = unique("smoke");
    let topic = format!("{tag}-runbook");
    create_topic(tb.source(), &topic, 2, &[]);
    console_produce(tb.source(), &topic, Some("snappy"), &keyed_lines("s", 40));
    let cfg = config(&format!("{tag}-.*"), "");
    let run = Strait::start(Path::new(STRAIT), &cfg, &["--shards", "2"]);

    let (code, report, stderr) = smoke(&cfg, &["--topic", &topic, "--partition", "1"]);
    assert_eq!(code, 0, "{report:#}\n{stderr}\n{}", run.stderr());
    let at = report["source_offset"].as_i64().expect("source_offset");
    assert!(at >= 0, "{report:#}");
    assert_eq!(report["target"], format!("A.{topic}-1"), "{report:#}");
    // strait copies into a new remote partition from its start: the same offsets.
    assert_eq!(report["target_offset"].as_i64(), Some(at), "{report:#}");
    assert_eq!(report["mapped_offset"].as_i64(), Some(at), "{report:#}");
    assert!(report["differing_field"].is_null(), "{report:#}");
    assert!(report["latency_ms"].as_u64().is_some(), "{report:#}");
    // The copy is the record Kafka's consumer reads on the target.
    let copies = read_all(tb.target(), &format!("A.{topic}"));
    let id = report["id"].as_str().expect("id");
    assert!(
        copies
            .iter()
            .any(|r| r.partition == 1 && r.offset == at && r.value.contains(id)),
        "{report:#}"
    );
    // The table.
    let out = Command::new(STRAIT)
        .args(["smoke", "--config"])
        .arg(&cfg)
        .args(["--topic", &topic])
        .output()
        .expect("strait smoke runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("OK: the record reached the target identical"),
        "{text}"
    );

    let (code, _, stderr) = smoke(&cfg, &["--topic", &format!("other-{tag}")]);
    assert_eq!(code, 3, "{stderr}");
    assert!(stderr.contains("does not replicate topic"), "{stderr}");

    run.signal("TERM");
    let exit = run.wait(std::time::Duration::from_secs(30));
    assert_eq!(exit.code, Some(0), "{}", exit.stderr);
    let (code, report, stderr) = smoke(&cfg, &["--topic", &topic, "--wait-seconds", "3"]);
    assert_eq!(code, 1, "{report:#}\n{stderr}");
    assert!(report["target_offset"].is_null(), "{report:#}");
    assert!(
        report["problem"]
            .as_str()
            .is_some_and(|p| p.contains("not on the target within 3 s")),
        "{report:#}"
    );
}
