//! Old clusters (issue 15), through the real `strait run` binary:
//!
//! - `from_kafka_2_8`: a Kafka 2.8.2 (ZooKeeper) source into the 4.1.1 test-bed target. Topics in
//!   every codec in the current format; topics holding magic 0 and magic 1 data (the topic's
//!   `message.format.version` at 0.9.0 / 0.10.2, so the 2.8 broker converts what producers send)
//!   in every legacy codec, one of them LogAppendTime, one written by Kafka's console producer
//!   and one by its perf producer; and compacted magic 0 and magic 1 topics after cleaning
//!   (offset gaps, tombstones). The source logs are checked to really hold those formats (Kafka's
//!   `DumpLogSegments`), and the `message.format.version` Kafka 4 no longer knows must be left
//!   out of the remote topics' configs.
//! - `from_kafka_3_9` and `into_kafka_3_9`: a 3.9.1 (KRaft) source into 4.1.1, and the 4.1.1
//!   test-bed source into a 3.9.1 target.
//!
//! Every record is compared, per partition and in order, between what Kafka's own consumer of
//! the source's version reads from the source and what Kafka 4.1.1's consumer reads from the
//! target (`tests/java/LegacyData.java`): key, value, timestamp (magic 0 has none: the target
//! gets -1, Kafka's own `NO_TIMESTAMP`), CreateTime on the target, no headers.
//!
//! The old clusters come from `scripts/oldkafka up 2.8 3.9`; `scripts/test.sh` (so CI) and
//! `scripts/test-old-kafka` start both. A missing cluster fails the test with how to start it.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use strait_tests::log::{create_topic, read_topic};
use strait_tests::strait::{StraitExit, run_strait, verify_json};
use strait_tests::{JavaProgram, Testbed, repo_root, run_with_stdin, temp_file, unique};

const STRAIT: &str = env!("CARGO_BIN_EXE_strait");
const RUN_TIMEOUT: Duration = Duration::from_secs(120);
const LEGACY_DATA: &str = include_str!("../../tests/java/LegacyData.java");
/// Records per produced topic.
const COUNT: usize = 300;

/// A cluster started by `scripts/oldkafka`, read from its `cluster.env`.
struct OldCluster {
    short: String,
    version: String,
    bootstrap: String,
    libs: PathBuf,
    data_dir: PathBuf,
}

fn old_cluster(short: &str) -> OldCluster {
    let dir = std::env::var_os("STRAIT_TESTBED_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".testbed"));
    let env_file = dir.join(format!("old-{short}")).join("cluster.env");
    let text = std::fs::read_to_string(&env_file).unwrap_or_else(|e| {
        panic!(
            "the Kafka {short} cluster is not up ({}: {e}); start it with `scripts/oldkafka up {short}`",
            env_file.display()
        )
    });
    let vars: HashMap<&str, String> = text
        .lines()
        .filter_map(|l| l.strip_prefix("export ")?.split_once('='))
        .map(|(k, v)| (k, v.trim_matches('\'').to_string()))
        .collect();
    let var = |k: &str| {
        vars.get(k)
            .unwrap_or_else(|| panic!("{} has no {k}", env_file.display()))
            .clone()
    };
    let c = OldCluster {
        short: short.to_string(),
        version: var("STRAIT_OLD_KAFKA_VERSION"),
        bootstrap: var("STRAIT_OLD_KAFKA_BOOTSTRAP"),
        libs: PathBuf::from(var("STRAIT_OLD_KAFKA_LIBS")),
        data_dir: PathBuf::from(var("STRAIT_OLD_KAFKA_DATA_DIR")),
    };
    if std::net::TcpStream::connect(&c.bootstrap).is_err() {
        panic!(
            "Kafka {} is not running ({} refuses connections); run `scripts/oldkafka up {short}`",
            c.version, c.bootstrap
        );
    }
    c
}

impl OldCluster {
    /// `scripts/oldkafka tool VERSION CLASS ARGS...`, with `classpath` first; stdout, or a
    /// panic with stderr.
    fn tool(
        &self,
        classpath: Option<&Path>,
        class: &str,
        args: &[&str],
        stdin: Option<&[u8]>,
    ) -> String {
        let mut cmd = Command::new(repo_root().join("scripts/oldkafka"));
        cmd.args(["tool", &self.short, class]).args(args);
        if let Some(cp) = classpath {
            cmd.env("STRAIT_EXTRA_CLASSPATH", cp);
        }
        let out = run_with_stdin(cmd, stdin);
        assert!(
            out.status.success(),
            "Kafka {} {class} {args:?} failed ({}):\n{}",
            self.version,
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `tests/java/LegacyData.java` compiled against this version's jars (once per content).
    fn legacy_data_classes(&self) -> PathBuf {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        LEGACY_DATA.hash(&mut h);
        let dir = PathBuf::from(Testbed::get().var("STRAIT_TESTBED_DIR"))
            .join("java")
            .join(format!("LegacyData-{}-{:016x}", self.version, h.finish()));
        if !dir.join("LegacyData.class").exists() {
            let parent = dir.parent().expect("has parent");
            std::fs::create_dir_all(parent).expect("java dir");
            let tmp = tempfile::Builder::new()
                .prefix("javac-")
                .tempdir_in(parent)
                .expect("temp dir");
            let src = tmp.path().join("LegacyData.java");
            std::fs::write(&src, LEGACY_DATA).expect("write source");
            let classes = tmp.path().join("classes");
            let out = Command::new("javac")
                .args(["-nowarn", "--release", "17", "-d"])
                .arg(&classes)
                .arg("-cp")
                .arg(format!("{}/*", self.libs.display()))
                .arg(&src)
                .output()
                .expect("javac runs (a JDK is required)");
            assert!(
                out.status.success(),
                "javac LegacyData against Kafka {} failed:\n{}",
                self.version,
                String::from_utf8_lossy(&out.stderr)
            );
            // Renamed into place whole, so concurrent tests never see half-written classes.
            let _ = std::fs::rename(&classes, &dir);
        }
        dir
    }

    fn legacy_data(&self, args: &[&str]) -> String {
        self.tool(Some(&self.legacy_data_classes()), "LegacyData", args, None)
    }

    /// `(magic, codec)` of every batch or message set in the first segment of each topic's
    /// partition 0, as Kafka's own `DumpLogSegments` prints them (one JVM for all).
    fn formats(&self, topics: &[&str]) -> BTreeMap<String, Vec<(u8, String)>> {
        let files: Vec<String> = topics
            .iter()
            .map(|t| {
                let f = self
                    .data_dir
                    .join(format!("{t}-0"))
                    .join("00000000000000000000.log");
                f.to_str().expect("utf-8 path").to_string()
            })
            .collect();
        let out = self.tool(
            None,
            "kafka.tools.DumpLogSegments",
            &["--files", &files.join(",")],
            None,
        );
        let mut by_topic: BTreeMap<String, Vec<(u8, String)>> = BTreeMap::new();
        let mut current = None;
        for l in out.lines() {
            if let Some(file) = l.strip_prefix("Dumping ") {
                current = topics
                    .iter()
                    .find(|t| file.contains(&format!("/{t}-0/")))
                    .map(|t| t.to_string());
                continue;
            }
            let parsed = (|| {
                let magic = l.split("magic: ").nth(1)?.split(' ').next()?.parse().ok()?;
                let codec = l
                    .split("compresscodec: ")
                    .nth(1)?
                    .split(' ')
                    .next()?
                    .to_string();
                Some((magic, codec))
            })();
            if let (Some(t), Some(f)) = (&current, parsed) {
                by_topic.entry(t.clone()).or_default().push(f);
            }
        }
        by_topic
    }
}

/// One record as `LegacyData dump` prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Dumped {
    offset: i64,
    timestamp_type: String,
    timestamp: i64,
    key: String,
    value: String,
    headers: usize,
}

/// Records by topic and partition.
type Dump = BTreeMap<(String, i32), Vec<Dumped>>;

fn parse_dump(text: &str) -> Dump {
    let mut out = Dump::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        assert_eq!(f.len(), 8, "bad dump line {line:?}");
        let d = Dumped {
            offset: f[2].parse().expect("offset"),
            timestamp_type: f[3].to_string(),
            timestamp: f[4].parse().expect("timestamp"),
            key: f[5].to_string(),
            value: f[6].to_string(),
            headers: f[7].parse().expect("headers"),
        };
        let partition = f[1].parse().expect("partition");
        out.entry((f[0].to_string(), partition))
            .or_default()
            .push(d);
    }
    out
}

/// How one side's records are read: Kafka's consumer of that side's version.
enum Reader<'a> {
    Old(&'a OldCluster),
    Current(&'a str),
}

impl Reader<'_> {
    /// Every record of `topics` (name, partitions), in one JVM.
    fn dump(&self, topics: &[(String, i32)]) -> Dump {
        let specs: Vec<String> = topics.iter().map(|(t, p)| format!("{t}:{p}")).collect();
        let mut args = vec!["dump", self.bootstrap()];
        args.extend(specs.iter().map(String::as_str));
        parse_dump(&match self {
            Reader::Old(c) => c.legacy_data(&args),
            Reader::Current(_) => legacy_data_current().run(&args, None),
        })
    }

    fn bootstrap(&self) -> &str {
        match self {
            Reader::Old(c) => &c.bootstrap,
            Reader::Current(addr) => addr,
        }
    }
}

fn legacy_data_current() -> JavaProgram {
    JavaProgram::compile("LegacyData", LEGACY_DATA)
}

/// Compares every `(topic, partitions)` on the source with its remote topic `remote(topic)` on
/// the target, record by record; returns the records compared.
fn compare(
    topics: &[(String, i32)],
    source: &Reader,
    target: &Reader,
    remote: impl Fn(&str) -> String,
) -> usize {
    let src = source.dump(topics);
    let remotes: Vec<(String, i32)> = topics.iter().map(|(t, p)| (remote(t), *p)).collect();
    let dst = target.dump(&remotes);
    let mut compared = 0;
    for (topic, partitions) in topics {
        let mut in_topic = 0;
        for p in 0..*partitions {
            let s = src
                .get(&(topic.clone(), p))
                .map(Vec::as_slice)
                .unwrap_or_default();
            let d = dst
                .get(&(remote(topic), p))
                .map(Vec::as_slice)
                .unwrap_or_default();
            assert_eq!(
                s.len(),
                d.len(),
                "{topic}-{p}: {} records on the source, {} on the target",
                s.len(),
                d.len()
            );
            for (a, b) in s.iter().zip(d) {
                let what = format!(
                    "{topic}-{p}: source offset {} -> target offset {}",
                    a.offset, b.offset
                );
                assert_eq!((&a.key, &a.value), (&b.key, &b.value), "{what}: key/value");
                assert_eq!(
                    b.timestamp_type, "CreateTime",
                    "{what}: target timestamp type"
                );
                let want_ts = if a.timestamp_type == "NoTimestampType" {
                    -1
                } else {
                    a.timestamp
                };
                assert_eq!(
                    b.timestamp, want_ts,
                    "{what}: timestamp ({} on the source)",
                    a.timestamp_type
                );
                assert_eq!((a.headers, b.headers), (0, 0), "{what}: headers");
            }
            in_topic += s.len();
        }
        assert!(in_topic > 0, "{topic}: no source records");
        compared += in_topic;
    }
    compared
}

/// An `mm2.properties` replicating `topics` (a regex) from `source` (alias `O`) to `target`
/// (alias `B`), nothing else.
fn config(source: &str, target: &str, topics: &str) -> PathBuf {
    temp_file(&format!(
        "clusters = O, B\n\
         O.bootstrap.servers = {source}\n\
         B.bootstrap.servers = {target}\n\
         O->B.enabled = true\n\
         O->B.topics = {topics}\n\
         O->B.heartbeats.replication.enabled = false\n\
         B->O.emit.heartbeats.enabled = false\n\
         emit.heartbeats.enabled = false\n\
         heartbeats.replication.enabled = false\n\
         replication.factor = 1\n\
         checkpoints.topic.replication.factor = 1\n\
         heartbeats.topic.replication.factor = 1\n\
         offset-syncs.topic.replication.factor = 1\n\
         strait.progress.topic.replication.factor = 1\n"
    ))
}

fn run(config: &Path) -> StraitExit {
    let exit = run_strait(
        Path::new(STRAIT),
        config,
        &["--until-caught-up", "--shards", "2"],
        RUN_TIMEOUT,
    );
    let lines: Vec<&str> = exit.stderr.lines().collect();
    eprintln!(
        "strait ran {:?}, exit {:?}; last lines:\n{}",
        exit.elapsed,
        exit.code,
        lines[lines.len().saturating_sub(8)..].join("\n")
    );
    exit.expect_code(0);
    exit
}

/// `strait verify --full --json` over everything `config` replicates: passes, with nothing
/// missing, extra or mismatched; returns the records it matched (with those the target's
/// cleaner removed from a compacted topic, which it counts apart).
fn verify_all(config: &Path) -> u64 {
    let (code, report, stderr) = verify_json(Path::new(STRAIT), config, &["--full"]);
    assert_eq!(code, 0, "strait verify failed:\n{report:#}\n{stderr}");
    let parts = report["partitions"].as_array().expect("partitions");
    assert!(!parts.is_empty(), "{report:#}");
    let n = |p: &serde_json::Value, f: &str| p[f].as_u64().unwrap_or_else(|| panic!("{f}: {p:#}"));
    for p in parts {
        for f in ["missing", "extra", "mismatched"] {
            assert_eq!(n(p, f), 0, "{f}: {p:#}");
        }
    }
    parts
        .iter()
        .map(|p| n(p, "matched") + n(p, "source_only_compacted"))
        .sum()
}

/// Waits until the cleaner left offset gaps in every partition of `topic` and the log stopped
/// changing (read through strait's own reader, which up-converts old formats; the comparison
/// afterwards uses Kafka's consumer).
fn wait_for_cleaned(addr: &str, topic: &str, timeout: Duration) {
    let start = Instant::now();
    let mut last = None;
    loop {
        let now = read_topic(addr, topic);
        let gaps = !now.is_empty()
            && now
                .values()
                .all(|recs| recs.windows(2).any(|w| w[1].offset != w[0].offset + 1));
        if gaps && last.as_ref() == Some(&now) {
            return;
        }
        assert!(
            start.elapsed() < timeout,
            "the log cleaner did not clean {topic} on {addr} within {timeout:?}"
        );
        last = Some(now);
        std::thread::sleep(Duration::from_millis(1500));
    }
}

const COMPACT_CONFIGS: [(&str, &str); 5] = [
    ("cleanup.policy", "compact"),
    ("segment.ms", "500"),
    ("min.cleanable.dirty.ratio", "0.01"),
    ("min.compaction.lag.ms", "0"),
    // Tombstones stay: they are data to replicate.
    ("delete.retention.ms", "86400000"),
];

/// A source topic: name, partitions, codec of its producer, topic configs, and the magic its
/// log must hold (None: not checked).
struct Topic {
    name: String,
    partitions: i32,
    codec: &'static str,
    magic: Option<u8>,
}

#[test]
fn from_kafka_2_8() {
    let tb = Testbed::get();
    let old = old_cluster("2.8");
    let base = unique("old28");
    let mut produced: Vec<Topic> = Vec::new();
    let create = |name: String, partitions, codec, magic: Option<u8>, configs: &[(&str, &str)]| {
        create_topic(&old.bootstrap, &name, partitions, configs);
        Topic {
            name,
            partitions,
            codec,
            magic,
        }
    };
    for codec in ["none", "gzip", "snappy", "lz4", "zstd"] {
        produced.push(create(format!("{base}-v2-{codec}"), 2, codec, Some(2), &[]));
    }
    for (magic, format) in [(0u8, "0.9.0"), (1, "0.10.2")] {
        for codec in ["none", "gzip", "snappy", "lz4"] {
            produced.push(create(
                format!("{base}-m{magic}-{codec}"),
                2,
                codec,
                Some(magic),
                &[("message.format.version", format)],
            ));
        }
    }
    produced.push(create(
        format!("{base}-m1-logappendtime"),
        1,
        "gzip",
        Some(1),
        &[
            ("message.format.version", "0.10.2"),
            ("message.timestamp.type", "LogAppendTime"),
        ],
    ));
    let mut compacted = Vec::new();
    for (magic, format, codec) in [(0u8, "0.9.0", "gzip"), (1, "0.10.2", "lz4")] {
        let mut configs = COMPACT_CONFIGS.to_vec();
        configs.push(("message.format.version", format));
        compacted.push(create(
            format!("{base}-m{magic}-compact"),
            2,
            codec,
            Some(magic),
            &configs,
        ));
    }
    // Kafka's own command-line producers of 2.8: console (keys, lz4 in magic 0: the broken lz4
    // header checksum) and perf (bulk, snappy in magic 1).
    let console = create(
        format!("{base}-m0-console"),
        1,
        "lz4",
        Some(0),
        &[("message.format.version", "0.9.0")],
    );
    let perf = create(
        format!("{base}-m1-perf"),
        1,
        "snappy",
        Some(1),
        &[("message.format.version", "0.10.2")],
    );

    let t0 = Instant::now();
    let specs: Vec<String> = produced
        .iter()
        .map(|t| format!("{}:{}:{}", t.name, t.partitions, t.codec))
        .collect();
    let count = COUNT.to_string();
    let mut args = vec!["produce", old.bootstrap.as_str(), &count, "42"];
    args.extend(specs.iter().map(String::as_str));
    old.legacy_data(&args);
    let compact_specs: Vec<String> = compacted
        .iter()
        .map(|t| format!("{}:{}:{}", t.name, t.partitions, t.codec))
        .collect();
    let mut args = vec!["compact", old.bootstrap.as_str(), "60", "4", "1200"];
    args.extend(compact_specs.iter().map(String::as_str));
    old.legacy_data(&args);
    let lines: String = (0..200)
        .map(|i| format!("key-{}:console value {i}\n", i % 50))
        .collect();
    old.tool(
        None,
        "kafka.tools.ConsoleProducer",
        &[
            "--bootstrap-server",
            &old.bootstrap,
            "--topic",
            &console.name,
            "--compression-codec",
            "lz4",
            "--property",
            "parse.key=true",
            "--property",
            "key.separator=:",
        ],
        Some(lines.as_bytes()),
    );
    old.tool(
        None,
        "org.apache.kafka.tools.ProducerPerformance",
        &[
            "--topic",
            &perf.name,
            "--num-records",
            "5000",
            "--record-size",
            "300",
            "--throughput",
            "-1",
            "--producer-props",
            &format!("bootstrap.servers={}", old.bootstrap),
            "compression.type=snappy",
            "linger.ms=20",
        ],
        None,
    );
    for t in &compacted {
        wait_for_cleaned(&old.bootstrap, &t.name, Duration::from_secs(90));
    }
    eprintln!("test data written and cleaned in {:?}", t0.elapsed());

    // The source logs hold what the topics promise: magic 0/1 message sets in each codec.
    let all: Vec<&Topic> = produced
        .iter()
        .chain(&compacted)
        .chain([&console, &perf])
        .collect();
    let names: Vec<&str> = all.iter().map(|t| t.name.as_str()).collect();
    let formats = old.formats(&names);
    for t in &all {
        let formats = formats.get(&t.name).map(Vec::as_slice).unwrap_or_default();
        let want_codec = match t.codec {
            "none" => "NONE".to_string(),
            c => c.to_uppercase(),
        };
        assert!(
            !formats.is_empty(),
            "{}: DumpLogSegments printed no batches",
            t.name
        );
        for (magic, codec) in formats {
            assert_eq!(Some(*magic), t.magic, "{}: magic in the source log", t.name);
            assert_eq!(codec, &want_codec, "{}: codec in the source log", t.name);
        }
    }

    let cfg = config(&old.bootstrap, tb.target(), &format!("{base}-.*"));
    let exit = run(&cfg);
    let summary = exit.summary();
    assert!(
        summary.rebuilt > 0,
        "old formats take the slow path: {summary:?}"
    );
    assert!(
        summary.fast > 0,
        "2.8's own v2 batches take the fast path: {summary:?}"
    );
    // Kafka 4 removed message.format.version (KIP-724): left out, and said so.
    assert!(
        exit.stderr.contains(
            "does not support: message.format.version (Kafka 4.0 removed it with the pre-0.11 \
             message formats (KIP-724))"
        ),
        "strait did not say it left message.format.version out:\n{}",
        exit.stderr
    );

    let source = Reader::Old(&old);
    let target = Reader::Current(tb.target());
    let topics: Vec<(String, i32)> = all.iter().map(|t| (t.name.clone(), t.partitions)).collect();
    let total = compare(&topics, &source, &target, |t| format!("O.{t}"));
    // strait verify proves the same copy from its stored mapping, record by record, reading
    // the magic 0/1 source logs through strait's own up-conversion.
    let verified = verify_all(&cfg);
    assert_eq!(
        verified, total as u64,
        "verify compared other records than Kafka's consumer"
    );
    eprintln!(
        "from Kafka {}: {} topics, {total} records identical; {summary:?}; whole test {:?}",
        old.version,
        all.len(),
        t0.elapsed()
    );
}

/// Who writes a side's test data: Kafka's producer of that side's version.
fn legacy_data_on(reader: &Reader, args: &[&str]) -> String {
    match reader {
        Reader::Old(c) => c.legacy_data(args),
        Reader::Current(_) => legacy_data_current().run(args, None),
    }
}

/// Topics in every codec and a compacted one on `source`, written, cleaned, replicated to
/// `target` and compared. `extra` configs go on one more topic (the same data). Returns the
/// run.
fn current_format_round(
    what: &str,
    source: Reader,
    target: Reader,
    target_addr: &str,
    extra: &[(&str, &str)],
) -> StraitExit {
    let t0 = Instant::now();
    let base = unique(what);
    let addr = source.bootstrap().to_string();
    let mut topics: Vec<(String, i32)> = Vec::new();
    let mut specs = Vec::new();
    for codec in ["none", "gzip", "snappy", "lz4", "zstd"] {
        let name = format!("{base}-{codec}");
        create_topic(&addr, &name, 2, &[]);
        specs.push(format!("{name}:2:{codec}"));
        topics.push((name, 2));
    }
    if !extra.is_empty() {
        let name = format!("{base}-configs");
        create_topic(&addr, &name, 1, extra);
        specs.push(format!("{name}:1:gzip"));
        topics.push((name, 1));
    }
    let count = COUNT.to_string();
    let mut args = vec!["produce", addr.as_str(), &count, "7"];
    args.extend(specs.iter().map(String::as_str));
    legacy_data_on(&source, &args);
    let compact = format!("{base}-compact");
    create_topic(&addr, &compact, 2, &COMPACT_CONFIGS);
    let spec = format!("{compact}:2:lz4");
    legacy_data_on(&source, &["compact", &addr, "60", "4", "1200", &spec]);
    wait_for_cleaned(&addr, &compact, Duration::from_secs(90));
    topics.push((compact, 2));
    eprintln!(
        "{what}: test data written and cleaned in {:?}",
        t0.elapsed()
    );

    let exit = run(&config(&addr, target_addr, &format!("{base}-.*")));
    let summary = exit.summary();
    let total = compare(&topics, &source, &target, |t| format!("O.{t}"));
    eprintln!(
        "{what}: {} topics, {total} records identical; {summary:?}; whole test {:?}",
        topics.len(),
        t0.elapsed()
    );
    exit
}

#[test]
fn from_kafka_3_9() {
    let tb = Testbed::get();
    let old = old_cluster("3.9");
    // 3.9 still takes message.format.version (and ignores it: KRaft writes magic 2); 4.1.1 does
    // not know it, so strait must leave it out of the remote topic.
    let exit = current_format_round(
        "old39",
        Reader::Old(&old),
        Reader::Current(tb.target()),
        tb.target(),
        &[
            ("message.format.version", "0.10.2"),
            ("retention.ms", "86400000"),
        ],
    );
    assert!(
        exit.stderr
            .contains("does not support: message.format.version"),
        "strait did not say it left message.format.version out:\n{}",
        exit.stderr
    );
}

#[test]
fn into_kafka_3_9() {
    let tb = Testbed::get();
    let old = old_cluster("3.9");
    current_format_round(
        "into39",
        Reader::Current(tb.source()),
        Reader::Old(&old),
        &old.bootstrap,
        &[("retention.ms", "86400000")],
    );
}

/// Exactly-once into a Kafka 3.9.1 target (issue 26): the transaction calls strait makes
/// (FindCoordinator, InitProducerId, AddPartitionsToTxn v3 and below, EndTxn v4 and below,
/// transactional Produce) are what 3.9 brokers take. SIGKILLed five times while Kafka's
/// verifiable producer writes, restarted each time, strait leaves every record on the 3.9
/// target exactly once, in order, as Kafka's read_committed console consumer reads it.
#[test]
fn exactly_once_into_kafka_3_9() {
    let tb = Testbed::get();
    let old = old_cluster("3.9");
    let topic = unique("eos39");
    let partitions = 3;
    create_topic(tb.source(), &topic, partitions, &[]);
    let cfg = config(tb.source(), &old.bootstrap, &topic);
    let text = std::fs::read_to_string(&cfg).unwrap()
        + "B.exactly.once.source.support = enabled\n\
           strait.group.instance.id = eos-into-39\n\
           strait.group.session.timeout.ms = 6000\n\
           strait.group.heartbeat.interval.ms = 1000\n";
    std::fs::write(&cfg, text).unwrap();
    let records: u64 = 15_000;
    let mut producer = strait_tests::verifiable_producer(tb.source(), &topic, records, 1_500);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    for kill in 0..5u32 {
        let s = strait_tests::strait::Strait::start(Path::new(STRAIT), &cfg, &[]);
        s.wait_taken_over(partitions as usize);
        // At a moment that varies from kill to kill and run to run.
        let ms = u64::from((nanos >> kill).wrapping_mul(2_654_435_761) % 2_000);
        std::thread::sleep(Duration::from_millis(ms));
        s.signal("KILL");
        s.wait(Duration::from_secs(10));
    }
    assert!(producer.wait().expect("the producer runs").success());
    run(&cfg);
    let t = strait_tests::tally(
        &strait_tests::committed_values(&old.bootstrap, &format!("O.{topic}"), records),
        records,
    );
    assert_eq!(
        (t.lost, t.duplicated, t.out_of_order, t.highest),
        (0, 0, 0, Some(records - 1)),
        "Kafka {}: {records} produced; read_committed saw {t:?}",
        old.version
    );
}
