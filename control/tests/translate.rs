//! Offset translation end to end on the test bed: a consumer group consumes part of a source
//! topic with Kafka's own client, `strait run --until-caught-up` replicates, checkpoints and
//! syncs the group, and the same group on the target resumes at exactly the next record.
//! Kafka's own `RemoteClusterUtils`, `kafka-consumer-groups` and MM2's `OffsetSyncStore` read
//! what strait wrote. Also: groups active on the target are left alone, offsets never move
//! backwards, and a restarted strait translates from the offset-syncs topic.
//!
//! The Java side is `tests/java/StraitOffsetsTool.java`.
#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use strait_tests::{JavaProgram, Testbed, kafka_tool_ok, temp_file, testbed_mm2_config, unique};

fn tool() -> &'static JavaProgram {
    strait_tests::offsets_tool()
}

/// A consumed record.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Rec {
    partition: i32,
    offset: i64,
    value: String,
}

fn parse_records(out: &str) -> Vec<Rec> {
    out.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let mut f = l.splitn(3, '\t');
            let (p, o, v) = (f.next(), f.next(), f.next());
            Rec {
                partition: p.and_then(|p| p.parse().ok()).expect("partition"),
                offset: o.and_then(|o| o.parse().ok()).expect("offset"),
                value: v.expect("value").to_string(),
            }
        })
        .collect()
}

/// Consumes at most `max` records (all when negative) of `topic` as `group` with Kafka's
/// consumer (read_committed, earliest), committing exactly after the last one per partition.
fn consume(bootstrap: &str, group: &str, topic: &str, max: i64) -> Vec<Rec> {
    parse_records(&strait_tests::consume_committed(
        bootstrap, group, topic, max,
    ))
}

/// Everything `topic` holds now, read by a throwaway group that MM2's default group filter
/// excludes (so strait never checkpoints it).
fn read_all(bootstrap: &str, topic: &str) -> Vec<Rec> {
    consume(bootstrap, &unique("console-consumer-reader"), topic, -1)
}

fn by_partition(records: &[Rec]) -> BTreeMap<i32, Vec<String>> {
    let mut out: BTreeMap<i32, Vec<String>> = BTreeMap::new();
    for r in records {
        out.entry(r.partition).or_default().push(r.value.clone());
    }
    out
}

/// The offset after the last consumed record, per partition: what the group committed.
fn committed(records: &[Rec]) -> BTreeMap<i32, i64> {
    let mut out = BTreeMap::new();
    for r in records {
        out.insert(r.partition, r.offset + 1);
    }
    out
}

fn create_topic(bootstrap: &str, topic: &str, partitions: u32, configs: &[&str]) {
    let partitions = partitions.to_string();
    let mut args = vec![
        "--bootstrap-server",
        bootstrap,
        "--create",
        "--topic",
        topic,
        "--partitions",
        &partitions,
        "--replication-factor",
        "1",
    ];
    for c in configs {
        args.extend(["--config", c]);
    }
    kafka_tool_ok("kafka-topics", &args, None);
}

/// `count` records to the source, spread over the partitions; record `i` has key
/// `k-{(i % keys) * stride}` and value `{prefix}-{i}`.
fn produce(topic: &str, count: u32, prefix: &str, keys: u32, stride: u32) {
    let tb = Testbed::get();
    tool().run(
        &[
            "produce",
            tb.source(),
            topic,
            &count.to_string(),
            prefix,
            &keys.to_string(),
            &stride.to_string(),
        ],
        None,
    );
}

/// A config for `topics` (heartbeats off, see `testbed_mm2_config`) with the short intervals
/// the tests use, plus `extra` lines.
fn config(topics: &str, extra: &str) -> PathBuf {
    testbed_mm2_config(
        topics,
        &format!(
            "emit.checkpoints.interval.seconds = 1\n\
             sync.group.offsets.interval.seconds = 1\n\
             refresh.groups.interval.seconds = 1\n\
             {extra}"
        ),
    )
}

/// `strait run --until-caught-up`; returns its log. Fails the test when strait fails or takes
/// longer than two minutes (then it is killed and its log shown).
fn strait_run(config: &Path) -> String {
    use std::io::Read;
    let started = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_strait"))
        .args(["run", "--config"])
        .arg(config)
        .args(["--until-caught-up", "--shards", "2"])
        .env("RUST_LOG", "info,strait_control::duties::offsets=debug")
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("strait runs");
    let mut stderr = child.stderr.take().expect("piped stderr");
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = stderr.read_to_end(&mut buf);
        buf
    });
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for strait") {
            break Some(status);
        }
        if started.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let log = strip_ansi(&String::from_utf8_lossy(
        &reader.join().expect("stderr reader"),
    ));
    match status {
        Some(s) => assert!(s.success(), "strait run failed ({s}):\n{log}"),
        None => panic!("strait run did not finish within 120 s:\n{log}"),
    }
    eprintln!("strait run took {:?}", started.elapsed());
    log
}

/// The log without terminal colour codes.
fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Every checkpoint strait wrote in this run was translated exactly.
fn assert_checkpoints_exact(log: &str) {
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("checkpoints written"))
        .collect();
    assert!(!lines.is_empty(), "no checkpoints written:\n{log}");
    for l in lines {
        assert!(l.contains("approximate=0"), "{l}");
    }
}

/// A row of `strait offsets translate`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Row {
    topic: String,
    partition: i32,
    source_offset: i64,
    target_topic: String,
    target_offset: Option<i64>,
    precision: String,
}

fn strait_translate(config: &Path, group: &str) -> (Vec<Row>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_strait"))
        .args(["offsets", "translate", "--config"])
        .arg(config)
        .args(["--group", group])
        .output()
        .expect("strait runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "strait offsets translate failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let rows = stdout
        .lines()
        .skip_while(|l| !l.starts_with("TOPIC"))
        .skip(1)
        .take_while(|l| !l.starts_with("target group state"))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(f.len(), 8, "row {l:?}");
            Row {
                topic: f[0].to_string(),
                partition: f[1].parse().expect("partition"),
                source_offset: f[2].parse().expect("source offset"),
                target_topic: f[3].to_string(),
                target_offset: f[4].parse().ok(),
                precision: f[5].to_string(),
            }
        })
        .collect();
    (rows, stdout)
}

/// The committed offsets of `group` on `bootstrap`, by (topic, partition), as
/// `kafka-consumer-groups --describe` shows them ("-" is no offset).
fn group_offsets(bootstrap: &str, group: &str) -> BTreeMap<(String, i32), i64> {
    let out = kafka_tool_ok(
        "kafka-consumer-groups",
        &[
            "--bootstrap-server",
            bootstrap,
            "--describe",
            "--group",
            group,
        ],
        None,
    );
    out.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() < 4 || f[0] != group {
                return None;
            }
            Some(((f[1].to_string(), f[2].parse().ok()?), f[3].parse().ok()?))
        })
        .collect()
}

/// The group's state on `bootstrap` (`kafka-consumer-groups --describe --state`).
fn group_state(bootstrap: &str, group: &str) -> String {
    kafka_tool_ok(
        "kafka-consumer-groups",
        &[
            "--bootstrap-server",
            bootstrap,
            "--describe",
            "--group",
            group,
            "--state",
        ],
        None,
    )
}

/// `RemoteClusterUtils.translateOffsets(target, "A", group)`: (offset, metadata) by
/// (topic, partition).
fn remote_translate(group: &str) -> BTreeMap<(String, i32), (i64, String)> {
    let tb = Testbed::get();
    let out = tool().run(&["remote-translate", tb.target(), "A", group], None);
    out.lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            (
                (f[0].to_string(), f[1].parse().expect("partition")),
                (
                    f[2].parse().expect("offset"),
                    f.get(3).unwrap_or(&"").to_string(),
                ),
            )
        })
        .collect()
}

/// MM2's own `OffsetSyncStore.translateDownstream` over the offset syncs strait wrote.
fn mm2_translate(
    bootstrap: &str,
    syncs_topic: &str,
    group: &str,
    topic: &str,
    partition: i32,
    offsets: &[i64],
) -> Vec<Option<i64>> {
    let mut args: Vec<String> = [
        "mm2-translate",
        bootstrap,
        syncs_topic,
        group,
        topic,
        &partition.to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(offsets.iter().map(|o| o.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = tool().run(&args, None);
    out.lines()
        .filter(|l| !l.is_empty())
        .map(|l| l.split('\t').nth(1).and_then(|v| v.parse().ok()))
        .collect()
}

/// Failover without loss or duplicates: per partition, what the group read on the source
/// followed by what it read on the target after failover is exactly the target partition.
fn assert_failover(first: &[Rec], second: &[Rec], target_all: &[Rec]) {
    let (a, b, all) = (
        by_partition(first),
        by_partition(second),
        by_partition(target_all),
    );
    for p in a.keys().chain(b.keys()) {
        assert!(all.contains_key(p), "partition {p} is not on the target");
    }
    for (p, values) in &all {
        let mut joined = a.get(p).cloned().unwrap_or_default();
        joined.extend(b.get(p).cloned().unwrap_or_default());
        assert_eq!(
            &joined,
            values,
            "partition {p}: the records read on the source ({}) then on the target after failover ({}) must be the target partition ({}) exactly once",
            a.get(p).map_or(0, Vec::len),
            b.get(p).map_or(0, Vec::len),
            values.len()
        );
    }
}

fn describe_topic(bootstrap: &str, topic: &str) -> String {
    kafka_tool_ok(
        "kafka-topics",
        &[
            "--bootstrap-server",
            bootstrap,
            "--describe",
            "--topic",
            topic,
        ],
        None,
    )
}

/// End offsets of a topic's partitions (`kafka-get-offsets`).
fn end_offsets(bootstrap: &str, topic: &str) -> BTreeMap<i32, i64> {
    kafka_tool_ok(
        "kafka-get-offsets",
        &["--bootstrap-server", bootstrap, "--topic", topic],
        None,
    )
    .lines()
    .filter_map(|l| {
        let f: Vec<&str> = l.rsplitn(3, ':').collect();
        Some((f.get(1)?.parse().ok()?, f.first()?.parse().ok()?))
    })
    .collect()
}

#[test]
fn failover_resumes_at_the_next_record() {
    let tb = Testbed::get();
    let topic = unique("tr-plain");
    let remote = format!("A.{topic}");
    let group = unique("tr-group");
    create_topic(tb.source(), &topic, 3, &[]);
    produce(&topic, 600, "v", 600, 1);
    let first = consume(tb.source(), &group, &topic, 250);
    assert_eq!(first.len(), 250);
    let source_committed = committed(&first);

    let cfg = config(&topic, "sync.group.offsets.enabled = true\n");
    let log = strait_run(&cfg);
    assert!(
        log.contains(&format!("group {group} (target state absent)")),
        "no group-sync report for {group}:\n{log}"
    );

    // The internal topics MM2 readers need: offset syncs on the source (the default location),
    // checkpoints on the target; one partition each, compacted.
    for (bootstrap, t) in [
        (tb.source(), "mm2-offset-syncs.B.internal"),
        (tb.target(), "A.checkpoints.internal"),
    ] {
        let d = describe_topic(bootstrap, t);
        assert!(d.contains("PartitionCount: 1"), "{d}");
        assert!(d.contains("cleanup.policy=compact"), "{d}");
    }

    assert_checkpoints_exact(&log);

    // A plain topic copied whole lands at the same offsets: exact translation is the identity.
    let (rows, text) = strait_translate(&cfg, &group);
    assert_eq!(rows.len(), source_committed.len(), "{text}");
    for r in &rows {
        assert_eq!(r.topic, topic);
        assert_eq!(r.target_topic, remote);
        assert_eq!(r.source_offset, source_committed[&r.partition], "{text}");
        assert_eq!(r.target_offset, Some(r.source_offset), "{text}");
        // Stopped, strait answers from its checkpoints (exact at the end of a partition).
        assert!(
            ["exact", "checkpoint"].contains(&r.precision.as_str()),
            "{text}"
        );
    }

    // Kafka's own tools see what strait committed and checkpointed.
    let target_offsets = group_offsets(tb.target(), &group);
    let remote_offsets = remote_translate(&group);
    for (p, offset) in &source_committed {
        let key = (remote.clone(), *p);
        assert_eq!(
            target_offsets.get(&key),
            Some(offset),
            "kafka-consumer-groups on the target"
        );
        assert_eq!(
            remote_offsets.get(&key),
            Some(&(*offset, "strait-test".to_string())),
            "RemoteClusterUtils.translateOffsets"
        );
        // MM2's own translation from strait's offset syncs is valid (never past the group)
        // and never better than strait's exact one.
        let mm2 = mm2_translate(
            tb.source(),
            "mm2-offset-syncs.B.internal",
            &group,
            &topic,
            *p,
            &[*offset],
        );
        let mm2 = mm2[0].expect("MM2 translates from strait's offset syncs");
        assert!(mm2 <= *offset, "MM2 translated {offset} to {mm2}");
    }
    assert_eq!(
        target_offsets.len(),
        source_committed.len(),
        "{target_offsets:?}"
    );

    let second = consume(tb.target(), &group, &remote, -1);
    let target_all = read_all(tb.target(), &remote);
    assert_eq!(target_all.len(), 600);
    assert_eq!(first.len() + second.len(), 600);
    assert_failover(&first, &second, &target_all);
    // And the copy is the source, partition by partition.
    assert_eq!(
        by_partition(&read_all(tb.source(), &topic)),
        by_partition(&target_all)
    );
}

#[test]
fn failover_with_transactions_and_aborts() {
    let tb = Testbed::get();
    let topic = unique("tr-tx");
    let remote = format!("A.{topic}");
    let group = unique("tr-group");
    let group_all = unique("tr-group-all");
    create_topic(tb.source(), &topic, 2, &[]);
    tool().run(
        &[
            "produce-tx",
            tb.source(),
            &topic,
            &unique("tr-txid"),
            "c10,a6,c7,c3,a4,c12,a2,c9",
        ],
        None,
    );
    // Ends inside a committed transaction on one of the partitions.
    let first = consume(tb.source(), &group, &topic, 17);
    assert_eq!(first.len(), 17);
    let everything = consume(tb.source(), &group_all, &topic, -1);
    assert_eq!(everything.len(), 41);
    assert!(everything.iter().all(|r| r.value.starts_with("c-")));

    let cfg = config(&topic, "sync.group.offsets.enabled = true\n");
    let log = strait_run(&cfg);
    assert_checkpoints_exact(&log);
    let target_all = read_all(tb.target(), &remote);
    assert_eq!(
        target_all.len(),
        41,
        "aborted records and markers are not copied"
    );
    assert!(target_all.iter().all(|r| r.value.starts_with("c-")));

    // Markers and aborted records make target offsets smaller than source offsets, and the
    // translation still is exact.
    let (rows, text) = strait_translate(&cfg, &group);
    assert!(!rows.is_empty(), "{text}");
    assert!(
        rows.iter()
            .all(|r| ["exact", "checkpoint"].contains(&r.precision.as_str())),
        "{text}"
    );
    assert!(
        rows.iter()
            .any(|r| r.target_offset != Some(r.source_offset)),
        "{text}"
    );
    // A group at the very end (past the last commit marker) translates exactly to the end.
    let ends = end_offsets(tb.target(), &remote);
    let (rows_all, text_all) = strait_translate(&cfg, &group_all);
    assert_eq!(rows_all.len(), 2, "{text_all}");
    for r in &rows_all {
        assert_eq!(r.precision, "exact", "{text_all}");
        assert_eq!(r.target_offset, Some(ends[&r.partition]), "{text_all}");
    }

    let second = consume(tb.target(), &group, &remote, -1);
    assert_failover(&first, &second, &target_all);
    assert!(consume(tb.target(), &group_all, &remote, -1).is_empty());
}

#[test]
fn failover_across_compaction_gaps() {
    let tb = Testbed::get();
    let topic = unique("tr-compact");
    let remote = format!("A.{topic}");
    let group = unique("tr-group");
    create_topic(
        tb.source(),
        &topic,
        1,
        &[
            "cleanup.policy=compact",
            "segment.ms=100",
            "min.cleanable.dirty.ratio=0.01",
            "min.compaction.lag.ms=0",
            "delete.retention.ms=100",
        ],
    );
    // Three segments: 40 keys; then every other one of them again, so that compaction leaves
    // every other record of the first segment; then a few more to roll the second.
    for (round, (count, keys, stride)) in [(40, 40, 1), (20, 20, 2), (10, 10, 1000)]
        .into_iter()
        .enumerate()
    {
        produce(&topic, count, &format!("r{round}"), keys, stride);
        std::thread::sleep(Duration::from_millis(300));
    }
    // Wait until the cleaner has left gaps and the log stops changing.
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut previous: Vec<Rec> = Vec::new();
    let source = loop {
        let now = read_all(tb.source(), &topic);
        let gaps = now.windows(2).any(|w| w[1].offset != w[0].offset + 1);
        if gaps && now == previous {
            break now;
        }
        assert!(
            Instant::now() < deadline,
            "the log cleaner left no gaps in {topic}: {now:?}"
        );
        previous = now;
        std::thread::sleep(Duration::from_secs(1));
    };
    assert!(source.len() < 70, "{source:?}");
    let first = consume(tb.source(), &group, &topic, (source.len() / 2) as i64);

    let cfg = config(&topic, "sync.group.offsets.enabled = true\n");
    let log = strait_run(&cfg);
    assert_checkpoints_exact(&log);
    let target_all = read_all(tb.target(), &remote);
    assert_eq!(by_partition(&target_all), by_partition(&source));
    let (rows, text) = strait_translate(&cfg, &group);
    assert_eq!(rows.len(), 1, "{text}");
    assert_eq!(rows[0].precision, "checkpoint", "{text}");
    // The target is dense: the group's position there is the number of records it read.
    assert_eq!(rows[0].target_offset, Some(first.len() as i64), "{text}");
    assert_ne!(rows[0].source_offset, first.len() as i64, "{text}");

    let second = consume(tb.target(), &group, &remote, -1);
    assert_failover(&first, &second, &target_all);
}

#[test]
fn active_groups_are_left_alone_and_offsets_never_move_backwards() {
    let tb = Testbed::get();
    let topic = unique("tr-safety");
    let remote = format!("A.{topic}");
    let group = unique("tr-group");
    let busy = unique("tr-busy");
    create_topic(tb.source(), &topic, 2, &[]);
    produce(&topic, 100, "v", 100, 1);
    // Both groups read 60 of the 100 records (50 per partition).
    let mut first = consume(tb.source(), &group, &topic, 60);
    first.sort_by_key(|r| (r.partition, r.offset));
    assert_eq!(first.len(), 60);
    consume(tb.source(), &busy, &topic, 60);
    let source_committed = committed(&first);

    // Replicate without group sync, then put the target group at the end of partition 0, where
    // no translation can be ahead of it.
    strait_run(&config(&topic, ""));
    kafka_tool_ok(
        "kafka-consumer-groups",
        &[
            "--bootstrap-server",
            tb.target(),
            "--reset-offsets",
            "--group",
            &group,
            "--topic",
            &format!("{remote}:0"),
            "--to-offset",
            "50",
            "--execute",
        ],
        None,
    );

    // A member of `busy` consumes on the target while strait syncs.
    let stop = temp_file("").with_extension("stop");
    let _ = std::fs::remove_file(&stop);
    let member = {
        let (target, busy, remote, stop) = (
            tb.target().to_string(),
            busy.clone(),
            remote.clone(),
            stop.to_string_lossy().into_owned(),
        );
        std::thread::spawn(move || {
            tool().run(
                &[
                    "consume",
                    &target,
                    &busy,
                    &remote,
                    "-1",
                    "read_committed",
                    "latest",
                    &stop,
                ],
                None,
            )
        })
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while !group_state(tb.target(), &busy).contains("Stable") {
        assert!(
            Instant::now() < deadline,
            "the target member of {busy} never became stable"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let cfg = config(&topic, "sync.group.offsets.enabled = true\n");
    let log = strait_run(&cfg);
    std::fs::write(&stop, b"").expect("stop file");
    let member_out = member.join().expect("member thread");
    assert!(member_out.contains("ASSIGNED"), "{member_out}");

    assert!(
        log.contains(&format!("group {busy} (target state Stable): 0 committed")),
        "{log}"
    );
    assert!(
        group_offsets(tb.target(), &busy).is_empty(),
        "strait committed to an active group"
    );

    // Partition 0 stays ahead, partition 1 gets the translation.
    let offsets = group_offsets(tb.target(), &group);
    assert_eq!(offsets.get(&(remote.clone(), 0)), Some(&50));
    assert_eq!(
        offsets.get(&(remote.clone(), 1)),
        Some(&source_committed[&1])
    );
    if source_committed.get(&0).is_some_and(|o| *o < 50) {
        assert!(log.contains("target offset 50 is not behind"), "{log}");
    }

    // Now idle, `busy` is synced.
    strait_run(&cfg);
    let busy_offsets = group_offsets(tb.target(), &busy);
    assert_eq!(busy_offsets.len(), 2, "{busy_offsets:?}");

    // The source group rewinds: the checkpoint follows (MM2 propagates upstream rewinds), the
    // target group's offsets do not move backwards.
    kafka_tool_ok(
        "kafka-consumer-groups",
        &[
            "--bootstrap-server",
            tb.source(),
            "--reset-offsets",
            "--group",
            &group,
            "--topic",
            &topic,
            "--to-earliest",
            "--execute",
        ],
        None,
    );
    strait_run(&cfg);
    let checkpoints = remote_translate(&group);
    assert_eq!(checkpoints.get(&(remote.clone(), 1)).map(|c| c.0), Some(0));
    assert_eq!(group_offsets(tb.target(), &group), offsets);
}

#[test]
fn restart_translates_from_the_offset_syncs() {
    let tb = Testbed::get();
    let topic = unique("tr-restart");
    let remote = format!("A.{topic}");
    let group = unique("tr-group");
    let group_end = unique("tr-group-end");
    create_topic(tb.source(), &topic, 1, &[]);
    produce(&topic, 500, "v", 500, 1);
    // Offset syncs on the target this time.
    let extra = "offset-syncs.topic.location = target\noffset.lag.max = 10\n";
    strait_run(&config(&topic, extra));
    let d = describe_topic(tb.target(), "mm2-offset-syncs.A.internal");
    assert!(
        d.contains("PartitionCount: 1") && d.contains("cleanup.policy=compact"),
        "{d}"
    );

    // The groups commit after strait stopped: only the offset syncs and strait's stored
    // progress can translate them.
    let first = consume(tb.source(), &group, &topic, 250);
    assert_eq!(first.len(), 250);
    assert_eq!(consume(tb.source(), &group_end, &topic, -1).len(), 500);
    let cfg = config(
        &topic,
        &format!("{extra}sync.group.offsets.enabled = true\n"),
    );
    let (rows, text) = strait_translate(&cfg, &group);
    assert_eq!(rows.len(), 1, "{text}");
    let translated = rows[0]
        .target_offset
        .expect("translated from the offset syncs");
    // Exactly what MM2's own store answers from the same syncs; never past the group.
    let mm2 = mm2_translate(
        tb.target(),
        "mm2-offset-syncs.A.internal",
        &group,
        &topic,
        0,
        &[250],
    );
    assert_eq!(mm2, vec![Some(translated)], "{text}");
    assert!(translated <= 250, "{text}");
    if translated < 250 {
        assert_eq!(rows[0].precision, "approximate", "{text}");
    }
    // At the end, the last offset sync and the stored progress are exact.
    let (rows_end, text_end) = strait_translate(&cfg, &group_end);
    assert_eq!(rows_end[0].target_offset, Some(500), "{text_end}");
    assert_eq!(rows_end[0].precision, "exact", "{text_end}");

    // The restarted strait (nothing new to copy) checkpoints and syncs the same translation.
    let log = strait_run(&cfg);
    assert!(log.contains("offset syncs loaded"), "{log}");
    let offsets = group_offsets(tb.target(), &group);
    assert_eq!(
        offsets.get(&(remote.clone(), 0)),
        Some(&translated),
        "{log}"
    );
    assert_eq!(
        remote_translate(&group)
            .get(&(remote.clone(), 0))
            .map(|c| c.0),
        Some(translated)
    );
    assert_eq!(
        group_offsets(tb.target(), &group_end).get(&(remote.clone(), 0)),
        Some(&500)
    );

    // No loss; the re-read is exactly the distance back to the offset sync.
    let second = consume(tb.target(), &group, &remote, -1);
    let target_all = read_all(tb.target(), &remote);
    assert_eq!(second.first().map(|r| r.offset), Some(translated));
    assert_eq!(
        by_partition(&second)[&0],
        by_partition(&target_all)[&0][translated as usize..].to_vec()
    );
}
