//! Offset-translation test helpers shared by `control/tests/translate.rs`, `history.rs` and
//! `group.rs`: Kafka's consumer and producers through `tests/java/StraitOffsetsTool.java`,
//! `strait offsets translate` read back as rows, Kafka's tools for group offsets, and the
//! oracle of an exact translation computed from the records themselves.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::{Testbed, kafka_tool_ok, offsets_tool, testbed_mm2_config, unique};

fn tool() -> &'static crate::JavaProgram {
    offsets_tool()
}

/// A consumed record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rec {
    pub partition: i32,
    pub offset: i64,
    pub value: String,
}

pub fn parse_records(out: &str) -> Vec<Rec> {
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
pub fn consume(bootstrap: &str, group: &str, topic: &str, max: i64) -> Vec<Rec> {
    parse_records(&crate::consume_committed(bootstrap, group, topic, max))
}

/// Everything `topic` holds now, read by a throwaway group that MM2's default group filter
/// excludes (so strait never checkpoints it).
pub fn read_all(bootstrap: &str, topic: &str) -> Vec<Rec> {
    consume(bootstrap, &unique("console-consumer-reader"), topic, -1)
}

pub fn by_partition(records: &[Rec]) -> BTreeMap<i32, Vec<String>> {
    let mut out: BTreeMap<i32, Vec<String>> = BTreeMap::new();
    for r in records {
        out.entry(r.partition).or_default().push(r.value.clone());
    }
    out
}

/// The offset after the last consumed record, per partition: what the group committed.
pub fn committed(records: &[Rec]) -> BTreeMap<i32, i64> {
    let mut out = BTreeMap::new();
    for r in records {
        out.insert(r.partition, r.offset + 1);
    }
    out
}

pub fn create_topic(bootstrap: &str, topic: &str, partitions: u32, configs: &[&str]) {
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
pub fn produce(topic: &str, count: u32, prefix: &str, keys: u32, stride: u32) {
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

/// A row of `strait offsets translate`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub topic: String,
    pub partition: i32,
    pub source_offset: i64,
    pub target_topic: String,
    pub target_offset: Option<i64>,
    pub precision: String,
    /// For an approximate answer, at most how many records a consumer re-reads (`None`:
    /// unbounded or not approximate).
    pub max_reread: Option<i64>,
}

/// `strait offsets translate --config CONFIG --group GROUP` with the `strait` binary `bin`:
/// its rows and its whole output.
pub fn strait_translate(bin: &str, config: &Path, group: &str) -> (Vec<Row>, String) {
    let out = Command::new(bin)
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
            assert_eq!(f.len(), 9, "row {l:?}");
            Row {
                topic: f[0].to_string(),
                partition: f[1].parse().expect("partition"),
                source_offset: f[2].parse().expect("source offset"),
                target_topic: f[3].to_string(),
                target_offset: f[4].parse().ok(),
                precision: f[5].to_string(),
                max_reread: f[6].parse().ok(),
            }
        })
        .collect();
    (rows, stdout)
}

/// The committed offsets of `group` on `bootstrap`, by (topic, partition), as
/// `kafka-consumer-groups --describe` shows them ("-" is no offset).
pub fn group_offsets(bootstrap: &str, group: &str) -> BTreeMap<(String, i32), i64> {
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

/// Moves `group`'s committed offsets of `topic` (`topic` or `topic:partition`) on `bootstrap`
/// with Kafka's `kafka-consumer-groups --reset-offsets`, `to` naming where
/// (`["--to-offset", "50"]`, `["--to-earliest"]`).
pub fn reset_group_offsets(bootstrap: &str, group: &str, topic: &str, to: &[&str]) {
    let mut args = vec![
        "--bootstrap-server",
        bootstrap,
        "--reset-offsets",
        "--group",
        group,
        "--topic",
        topic,
    ];
    args.extend_from_slice(to);
    args.push("--execute");
    kafka_tool_ok("kafka-consumer-groups", &args, None);
}

/// The group's state on `bootstrap` (`kafka-consumer-groups --describe --state`).
pub fn group_state(bootstrap: &str, group: &str) -> String {
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

/// A member of `group` consuming `topic` on `bootstrap` with Kafka's consumer until
/// [`ActiveMember::finish`]: the group is `Stable` there meanwhile.
pub struct ActiveMember {
    stop: PathBuf,
    consumer: std::thread::JoinHandle<String>,
}

impl ActiveMember {
    /// Starts the member and waits (at most 60 s) until the group is `Stable`.
    pub fn start(bootstrap: &str, group: &str, topic: &str) -> ActiveMember {
        let stop = crate::temp_file("").with_extension("stop");
        let _ = std::fs::remove_file(&stop);
        let args: Vec<String> = vec![
            "consume".into(),
            bootstrap.into(),
            group.into(),
            topic.into(),
            "-1".into(),
            "read_committed".into(),
            "latest".into(),
            stop.to_string_lossy().into_owned(),
        ];
        let consumer = std::thread::spawn(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            tool().run(&args, None)
        });
        let deadline = Instant::now() + Duration::from_secs(60);
        while !group_state(bootstrap, group).contains("Stable") {
            assert!(
                Instant::now() < deadline,
                "the member of {group} on {bootstrap} never became stable"
            );
            std::thread::sleep(Duration::from_millis(500));
        }
        ActiveMember { stop, consumer }
    }

    /// Stops the member; its consumer's output.
    pub fn finish(self) -> String {
        std::fs::write(&self.stop, b"").expect("stop file");
        self.consumer.join().expect("member thread")
    }
}

/// `RemoteClusterUtils.translateOffsets(target, "A", group)`: (offset, metadata) by
/// (topic, partition).
pub fn remote_translate(group: &str) -> BTreeMap<(String, i32), (i64, String)> {
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

/// Failover without loss or duplicates: per partition, what the group read on the source
/// followed by what it read on the target after failover is exactly the target partition.
pub fn assert_failover(first: &[Rec], second: &[Rec], target_all: &[Rec]) {
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

/// End offsets of a topic's partitions (`kafka-get-offsets`).
pub fn end_offsets(bootstrap: &str, topic: &str) -> BTreeMap<i32, i64> {
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

/// Commits, for each `(group, offsets)`, those `(partition, offset)` of `topic` on `bootstrap`
/// with Kafka's consumer (without joining the group, as `kafka-consumer-groups
/// --reset-offsets` does), all in one JVM.
pub fn commit_offsets(bootstrap: &str, topic: &str, groups: &[(String, Vec<(i32, i64)>)]) {
    let mut args: Vec<String> = vec!["commit".into(), bootstrap.into(), topic.into()];
    for (g, offsets) in groups {
        let list: Vec<String> = offsets.iter().map(|(p, o)| format!("{p}:{o}")).collect();
        args.push(format!("{g}={}", list.join(",")));
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    tool().run(&args, None);
}

/// What an exact translation answers, computed from the records: a source partition's and its
/// remote partition's records as a read_committed consumer sees them (values unique per
/// partition), and the remote partition's end.
#[derive(Debug, Clone)]
pub struct Oracle {
    source: BTreeMap<i32, Vec<(i64, String)>>,
    /// Target offset of the first copy of each value, per partition.
    target_of: BTreeMap<i32, std::collections::HashMap<String, i64>>,
    target_end: BTreeMap<i32, i64>,
}

impl Oracle {
    /// Reads `topic` on the source and `remote` on the target whole.
    pub fn read(topic: &str, remote: &str) -> Oracle {
        let tb = Testbed::get();
        let mut source: BTreeMap<i32, Vec<(i64, String)>> = BTreeMap::new();
        for r in read_all(tb.source(), topic) {
            source
                .entry(r.partition)
                .or_default()
                .push((r.offset, r.value));
        }
        let mut target_of: BTreeMap<i32, std::collections::HashMap<String, i64>> = BTreeMap::new();
        for r in read_all(tb.target(), remote) {
            target_of
                .entry(r.partition)
                .or_default()
                .entry(r.value)
                .or_insert(r.offset);
        }
        Oracle {
            source,
            target_of,
            target_end: end_offsets(tb.target(), remote),
        }
    }

    /// Where a group that committed `offset` on source `partition` must resume on the target:
    /// the target offset of the first source record at or after `offset` (the target's end
    /// when there is none). Panics when that record is not on the target (nothing to
    /// translate to: the copy is incomplete).
    pub fn exact(&self, partition: i32, offset: i64) -> i64 {
        let next = self
            .source
            .get(&partition)
            .and_then(|recs| recs.iter().find(|(o, _)| *o >= offset));
        match next {
            Some((o, v)) => *self
                .target_of
                .get(&partition)
                .and_then(|m| m.get(v))
                .unwrap_or_else(|| {
                    panic!("source record {partition}@{o} ({v}) is not on the target")
                }),
            None => self.target_end.get(&partition).copied().unwrap_or(0),
        }
    }

    /// [`Oracle::exact`], or `None` when that record is not on the target (yet).
    pub fn try_exact(&self, partition: i32, offset: i64) -> Option<i64> {
        let next = self
            .source
            .get(&partition)
            .and_then(|recs| recs.iter().find(|(o, _)| *o >= offset));
        match next {
            Some((_, v)) => self.target_of.get(&partition)?.get(v).copied(),
            None => Some(self.target_end.get(&partition).copied().unwrap_or(0)),
        }
    }

    /// The value of the first source record of `partition` at or after `offset`.
    pub fn value_at(&self, partition: i32, offset: i64) -> Option<String> {
        self.source
            .get(&partition)?
            .iter()
            .find(|(o, _)| *o >= offset)
            .map(|(_, v)| v.clone())
    }

    /// The source offsets of `partition`'s records (read_committed), in order.
    pub fn source_offsets(&self, partition: i32) -> Vec<i64> {
        self.source
            .get(&partition)
            .map(|r| r.iter().map(|(o, _)| *o).collect())
            .unwrap_or_default()
    }
}

/// A config for `topics` (heartbeats off, see `testbed_mm2_config`) with the short intervals
/// the tests use, plus `extra` lines.
pub fn config(topics: &str, extra: &str) -> PathBuf {
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

/// `strait run --until-caught-up` with the `strait` binary `bin`; returns its log. Fails the test when strait fails or takes
/// longer than two minutes (then it is killed and its log shown).
pub fn strait_run(bin: &str, config: &Path) -> String {
    use std::io::Read;
    let started = Instant::now();
    let mut child = Command::new(bin)
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
pub fn strip_ansi(s: &str) -> String {
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
pub fn assert_checkpoints_exact(log: &str) {
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("checkpoints written"))
        .collect();
    assert!(!lines.is_empty(), "no checkpoints written:\n{log}");
    for l in lines {
        assert!(l.contains("approximate=0"), "{l}");
    }
}

/// Creates `topic` on the source, one partition compacted within seconds, and writes it so
/// that the cleaner leaves gaps: 40 keys, then every other key again, then more to roll the
/// segment (the cleaner keeps every other record of the first segment). Wait for the gaps
/// with [`wait_for_compaction_gaps`].
pub fn produce_compacted_with_gaps(topic: &str) {
    let source = Testbed::get().source();
    create_topic(
        source,
        topic,
        1,
        &[
            "cleanup.policy=compact",
            "segment.ms=100",
            "min.cleanable.dirty.ratio=0.01",
            "min.compaction.lag.ms=0",
            "delete.retention.ms=100",
        ],
    );
    for (round, (count, keys, stride)) in [(40, 40, 1), (20, 20, 2), (10, 10, 1000)]
        .into_iter()
        .enumerate()
    {
        tool().run(
            &[
                "produce",
                source,
                topic,
                &count.to_string(),
                &format!("r{round}"),
                &keys.to_string(),
                &stride.to_string(),
            ],
            None,
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// Waits (at most 90 s) until the log cleaner has left gaps in `topic` on the source and the
/// log stops changing; returns its records then.
pub fn wait_for_compaction_gaps(topic: &str) -> Vec<Rec> {
    let tb = Testbed::get();
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut previous: Vec<Rec> = Vec::new();
    loop {
        let now = read_all(tb.source(), topic);
        let gaps = now.windows(2).any(|w| w[1].offset != w[0].offset + 1);
        if gaps && now == previous {
            return now;
        }
        assert!(
            Instant::now() < deadline,
            "the log cleaner left no gaps in {topic}: {now:?}"
        );
        previous = now;
        std::thread::sleep(Duration::from_secs(1));
    }
}
