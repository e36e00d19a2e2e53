//! Control-plane duties of `strait run` against the real test bed, with the binary as a child
//! process: both directions under the Default policy, changes while running (new topics, new
//! partitions, topic configs, `max.message.bytes` reaching the shards), restart without
//! duplicates, lost positions (recreated topic, truncated log), and migration from and back to
//! the real MirrorMaker 2.
//!
//! Every test uses topic names (and, where a flow's internal topics must not be shared, cluster
//! aliases) of its own, so tests run concurrently with each other and with other suites.
#![forbid(unsafe_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use strait_control::cluster::{
    AlterConfigOp, Cluster, ConfigSource, IsolationLevel, NewTopic, RetryConfig, TopicPartition,
};
use strait_control::offsets::Heartbeat;
use strait_control::offsets::connect::{
    self, ImportedProgress, MIRROR_SOURCE_CONNECTOR, source_offset_key,
};
use strait_control::store::records::{self, StoredRecord};
use strait_dataplane::batch::Record;
use strait_dataplane::io::IoBackend;
use strait_tests::strait::verify_json;
use strait_tests::{Testbed, kafka_tool_ok, setup, temp_file, testbed_clusters_config, unique};

const STRAIT: &str = env!("CARGO_BIN_EXE_strait");

// ---------------------------------------------------------------------------------------------
// Helpers: an admin client on a private runtime, strait as a child process, polling.

/// An admin client of one test-bed cluster with its own single-threaded runtime.
struct Admin {
    rt: tokio::runtime::Runtime,
    local: tokio::task::LocalSet,
    cluster: Cluster,
}

impl Admin {
    fn new(addr: &str) -> Admin {
        let tb = Testbed::get();
        Admin {
            rt: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime"),
            local: tokio::task::LocalSet::new(),
            cluster: Cluster::new(
                "test",
                vec![addr.to_string()],
                setup(tb.plaintext(), IoBackend::Epoll),
                RetryConfig::default(),
            ),
        }
    }

    /// Runs `f` on this client's runtime (the connections run as local tasks).
    fn block<F: std::future::Future>(&self, f: F) -> F::Output {
        self.local.block_on(&self.rt, f)
    }

    fn source() -> Admin {
        Admin::new(Testbed::get().source())
    }

    fn target() -> Admin {
        Admin::new(Testbed::get().target())
    }

    fn create_topic(&self, name: &str, partitions: i32, configs: &[(&str, &str)]) {
        let res = self
            .block(
                self.cluster.create_topics(
                    &[NewTopic {
                        name: name.to_string(),
                        partitions,
                        replication_factor: -1,
                        configs: configs
                            .iter()
                            .map(|(k, v)| (k.to_string(), v.to_string()))
                            .collect(),
                    }],
                    30_000,
                ),
            )
            .expect("CreateTopics");
        for (n, r) in res {
            r.unwrap_or_else(|e| panic!("create {n}: {e}"));
        }
        self.block(self.cluster.refresh_metadata(Some(&[name])))
            .expect("metadata");
    }

    /// Appends `values` (keys `k<start of the value>`) to one partition in one batch.
    fn produce(&self, topic: &str, partition: i32, values: &[String]) {
        let records: Vec<Record> = values
            .iter()
            .map(|v| {
                Record::new(
                    now_ms(),
                    Some(Bytes::from(format!(
                        "k{}",
                        v.chars().take(32).collect::<String>()
                    ))),
                    Some(Bytes::from(v.clone())),
                )
            })
            .collect();
        self.block(records::produce(&self.cluster, topic, partition, &records))
            .unwrap_or_else(|e| panic!("produce to {topic}-{partition}: {e}"));
    }

    fn partitions(&self, topic: &str) -> Option<usize> {
        let md = self
            .block(self.cluster.refresh_metadata(Some(&[topic])))
            .expect("metadata");
        md.topics.get(topic).map(|t| t.partitions.len())
    }

    fn topics(&self) -> BTreeSet<String> {
        let md = self
            .block(self.cluster.refresh_metadata(None))
            .expect("metadata");
        md.topics.keys().cloned().collect()
    }

    fn topic_id(&self, topic: &str) -> Option<[u8; 16]> {
        let md = self
            .block(self.cluster.refresh_metadata(Some(&[topic])))
            .expect("metadata");
        md.topics.get(topic).map(|t| t.topic_id)
    }

    /// Every record of every partition, by partition.
    fn read(&self, topic: &str) -> BTreeMap<i32, Vec<StoredRecord>> {
        let mut out = BTreeMap::new();
        let Some(n) = self.partitions(topic) else {
            return out;
        };
        for p in 0..n as i32 {
            let mut records = Vec::new();
            self.block(records::read_to_end(
                &self.cluster,
                topic,
                p,
                IsolationLevel::ReadUncommitted,
                |r| records.push(r),
            ))
            .unwrap_or_else(|e| panic!("read {topic}-{p}: {e}"));
            out.insert(p, records);
        }
        out
    }

    /// The values of every partition, in order.
    fn values(&self, topic: &str) -> BTreeMap<i32, Vec<String>> {
        self.read(topic)
            .into_iter()
            .map(|(p, rs)| {
                (
                    p,
                    rs.iter()
                        .map(|r| {
                            String::from_utf8_lossy(r.value.as_deref().unwrap_or_default())
                                .into_owned()
                        })
                        .collect(),
                )
            })
            .collect()
    }

    fn count(&self, topic: &str) -> usize {
        self.read(topic).values().map(Vec::len).sum()
    }

    /// `name -> (value, source)` of a topic's configs.
    fn configs(&self, topic: &str) -> BTreeMap<String, (Option<String>, ConfigSource)> {
        let mut r = self
            .block(self.cluster.describe_topic_configs(&[topic.to_string()]))
            .expect("DescribeConfigs");
        r.remove(topic)
            .expect("described")
            .unwrap_or_else(|e| panic!("describe {topic}: {e}"))
            .into_iter()
            .map(|e| (e.name, (e.value, e.source)))
            .collect()
    }

    fn alter(&self, topic: &str, ops: &[AlterConfigOp]) {
        self.block(self.cluster.alter_topic_configs(topic, ops))
            .unwrap_or_else(|e| panic!("alter {topic}: {e}"));
    }

    fn grow(&self, topic: &str, count: i32) {
        self.block(self.cluster.create_partitions(topic, count, 30_000))
            .unwrap_or_else(|e| panic!("grow {topic}: {e}"));
        self.block(self.cluster.refresh_metadata(Some(&[topic])))
            .expect("metadata");
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Polls `cond` every 200 ms until it holds; panics with `what` after `timeout`. Returns the
/// time it took.
fn wait_for(what: &str, timeout: Duration, cond: impl FnMut() -> bool) -> Duration {
    wait_for_or(what, timeout, cond, String::new)
}

/// Like [`wait_for`], adding `context()` (a log) to the panic message.
fn wait_for_or(
    what: &str,
    timeout: Duration,
    mut cond: impl FnMut() -> bool,
    context: impl Fn() -> String,
) -> Duration {
    let start = Instant::now();
    loop {
        if cond() {
            return start.elapsed();
        }
        if start.elapsed() > timeout {
            panic!(
                "timed out after {timeout:?} waiting for {what}\n{}",
                context()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The epoch milliseconds of a log line's RFC 3339 UTC timestamp
/// (`2026-12-04T17:46:47.123456Z ...`, the text log's first field).
fn log_time_ms(line: &str) -> Option<i64> {
    let ts = line.split_whitespace().next()?.strip_suffix('Z')?;
    let (date, time) = ts.split_once('T')?;
    let mut d = date.splitn(3, '-').map(|x| x.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    let (hms, frac) = time.split_once('.').unwrap_or((time, "0"));
    let mut t = hms.splitn(3, ':').map(|x| x.parse::<i64>().ok());
    let (hh, mm, ss) = (t.next()??, t.next()??, t.next()??);
    let ms: i64 = format!("{frac:0<3}")[..3].parse().ok()?;
    // Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days * 24 + hh) * 60 + mm) * 60_000 + ss * 1000 + ms)
}

/// `(start time, number)` of every topic discovery round in a log with debug lines of
/// `strait_control::duties::topics`.
fn discovery_rounds(log: &str) -> Vec<(i64, u64)> {
    log.lines()
        .filter(|l| l.contains("topic discovery round"))
        .filter_map(|l| {
            let n = l
                .split("round=")
                .nth(1)?
                .split_whitespace()
                .next()?
                .parse()
                .ok()?;
            Some((log_time_ms(l)?, n))
        })
        .collect()
}

/// The discovery round that created the remote topic `remote`.
fn creation_round(log: &str, remote: &str) -> u64 {
    log.lines()
        .find(|l| l.contains("created remote topic") && l.contains(&format!("topic={remote} ")))
        .and_then(|l| {
            l.split("discovery_round=")
                .nth(1)?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no `created remote topic` line for {remote}:\n{log}"))
}

#[test]
fn log_times_are_read_as_utc() {
    assert_eq!(log_time_ms("1970-01-01T00:00:00.000000Z  INFO x"), Some(0));
    assert_eq!(
        log_time_ms("2026-12-04T17:46:47.123456Z DEBUG strait_control::duties::topics: round=3"),
        Some(1_796_406_407_123)
    );
    assert_eq!(log_time_ms("2000-02-29T23:59:59.9Z"), Some(951_868_799_900));
    assert_eq!(log_time_ms("not a time"), None);
}

fn values(prefix: &str, range: std::ops::Range<usize>) -> Vec<String> {
    range.map(|i| format!("{prefix}{i}")).collect()
}

/// A `strait run` child process; its stderr goes to a file. Killed if the test panics.
struct Strait {
    child: Option<Child>,
    log: PathBuf,
}

impl Strait {
    fn start(config: &Path) -> Strait {
        Strait::start_logging(config, "info")
    }

    /// With `RUST_LOG=filter`.
    fn start_logging(config: &Path, filter: &str) -> Strait {
        let log = temp_file("");
        let child = Command::new(STRAIT)
            .args(["run", "--config"])
            .arg(config)
            .env("RUST_LOG", filter)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log file"))
            .spawn()
            .expect("strait starts");
        Strait {
            child: Some(child),
            log,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Whether it is still running.
    fn running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| c.try_wait().ok().flatten().is_none())
    }

    /// A clean stop: SIGTERM, then wait (at most a minute). Returns the status and the log.
    fn stop(mut self) -> (ExitStatus, String) {
        let mut child = self.child.take().expect("running");
        let ok = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(ok.success(), "cannot signal strait");
        let start = Instant::now();
        loop {
            if let Some(status) = child.try_wait().expect("wait") {
                return (status, self.log());
            }
            if start.elapsed() > Duration::from_secs(60) {
                let _ = child.kill();
                panic!("strait did not stop within 60 s:\n{}", self.log());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Strait {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Runs a `strait` command to completion; returns status, stdout, stderr.
fn strait(args: &[&str]) -> (ExitStatus, String, String) {
    let out = Command::new(STRAIT)
        .args(args)
        .env("RUST_LOG", "info")
        .output()
        .expect("strait runs");
    (
        out.status,
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn until_caught_up(config: &Path) -> (ExitStatus, String) {
    let (status, _, err) = strait(&[
        "run",
        "--config",
        config.to_str().expect("utf-8 path"),
        "--until-caught-up",
    ]);
    (status, err)
}

/// A two-cluster config on the test bed (source cluster = alias `s`, target = `t`) with
/// `body`, without heartbeats.
///
/// Tests use aliases of their own so that their progress is their own, and such aliases must
/// neither emit nor replicate heartbeats: MM2's rule replicates every heartbeats topic whose
/// chain of aliases does not contain the target, so several aliases for one physical cluster
/// would copy each other's `x.heartbeats` topics into ever longer chains.
fn config(s: &str, t: &str, body: &str) -> PathBuf {
    testbed_clusters_config(
        s,
        t,
        &format!("emit.heartbeats.enabled = false\nheartbeats.replication.enabled = false\n{body}"),
    )
}

/// A one-way flow `s->t` over `topics`, plus `extra` lines.
fn one_way(s: &str, t: &str, topics: &str, extra: &str) -> PathBuf {
    config(
        s,
        t,
        &format!(
            "{s}->{t}.enabled = true\n{s}->{t}.topics = {topics}\n\
             {extra}\n"
        ),
    )
}

/// Aliases no other test uses, so that the flow's progress and MM2 topics are its own.
fn aliases() -> (String, String) {
    let id = &unique("x")[2..10];
    (format!("src{id}"), format!("dst{id}"))
}

// ---------------------------------------------------------------------------------------------
// Both directions.

#[test]
fn both_directions_copy_once_and_never_back() {
    let (a, b) = (Admin::source(), Admin::target());
    let tag = unique("cpbd");
    let (a1, a2, b1) = (
        format!("{tag}-a1"),
        format!("{tag}-a2"),
        format!("{tag}-b1"),
    );
    a.create_topic(&a1, 2, &[]);
    a.create_topic(&a2, 1, &[]);
    b.create_topic(&b1, 1, &[]);
    a.produce(&a1, 0, &values("a1p0-", 0..30));
    a.produce(&a1, 1, &values("a1p1-", 0..20));
    a.produce(&a2, 0, &values("a2-", 0..10));
    b.produce(&b1, 0, &values("b1-", 0..15));
    let started_ms = now_ms();
    // "All topics", fenced to this test's topics by the tag. The aliases are the test bed's
    // own A and B, as heartbeats need (see `config`), so the progress of A's `heartbeats` is
    // shared with every concurrent A->B test: a position another run left behind must not stop
    // this one, hence `earliest` (the data topics are new, so it changes nothing for them).
    // B->A does not replicate B's heartbeats topics, which other suites' aliases fill.
    let cfg = testbed_clusters_config(
        "A",
        "B",
        &format!(
            "A->B.enabled = true\nB->A.enabled = true\ntopics = .*{tag}.*\n\
             B->A.heartbeats.replication.enabled = false\n\
             refresh.topics.interval.seconds = 1\nemit.heartbeats.interval.seconds = 1\n\
             strait.on.lost.position = earliest\n"
        ),
    );
    let s = Strait::start(&cfg);
    let (ra1, ra2, rb1) = (format!("A.{a1}"), format!("A.{a2}"), format!("B.{b1}"));
    wait_for_or(
        "both directions to copy",
        Duration::from_secs(60),
        || b.count(&ra1) == 50 && b.count(&ra2) == 10 && a.count(&rb1) == 15,
        || s.log(),
    );
    // Heartbeats: the pair B->A writes into A's `heartbeats`, which A->B copies to B as
    // `A.heartbeats`; the pair A->B writes into B's `heartbeats`.
    let heartbeat_since = |admin: &Admin, topic: &str, src: &str, tgt: &str| {
        admin.read(topic).values().flatten().any(|r| {
            let (Some(k), Some(v)) = (r.key.as_deref(), r.value.as_deref()) else {
                return false;
            };
            Heartbeat::decode(k, v).is_ok_and(|h| {
                h.source_alias == src && h.target_alias == tgt && h.timestamp_ms >= started_ms
            })
        })
    };
    wait_for_or(
        "replicated heartbeats",
        Duration::from_secs(30),
        || heartbeat_since(&b, "A.heartbeats", "B", "A"),
        || s.log(),
    );
    assert!(heartbeat_since(&a, "heartbeats", "B", "A"));
    assert!(heartbeat_since(&b, "heartbeats", "A", "B"));
    // Several discovery intervals: anything copied back would show up now.
    std::thread::sleep(Duration::from_secs(4));
    let (status, log) = s.stop();
    assert!(status.success(), "strait failed:\n{log}");

    let on = |admin: &Admin| -> BTreeSet<String> {
        admin
            .topics()
            .into_iter()
            .filter(|t| t.contains(&tag))
            .collect()
    };
    let set = |names: &[&str]| names.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    assert_eq!(on(&a), set(&[&a1, &a2, &rb1]), "topics on A; log:\n{log}");
    assert_eq!(on(&b), set(&[&b1, &ra1, &ra2]), "topics on B; log:\n{log}");
    // Copied once, in order, partition for partition.
    assert_eq!(b.values(&ra1), a.values(&a1));
    assert_eq!(b.values(&ra2), a.values(&a2));
    assert_eq!(a.values(&rb1), b.values(&b1));
    // ACL sync is on by default and the test bed runs an authorizer: each flow described the
    // source's topic ACLs (none concern these topics) without an error.
    for bad in ["no ACL authorizer", "ACLs:", "cannot sync ACL"] {
        assert!(!log.contains(bad), "`{bad}` in the log:\n{log}");
    }
    // B's own heartbeats never went back to it.
    assert!(!b.topics().contains("A.B.heartbeats") && !a.topics().contains("B.A.heartbeats"));
}

// ---------------------------------------------------------------------------------------------
// Changes while running.

#[test]
fn changes_while_running_propagate() {
    let (a, b) = (Admin::source(), Admin::target());
    let (sa, sb) = aliases();
    let tag = unique("cpchg");
    let x = format!("{tag}-x");
    let rx = format!("{sa}.{x}");
    // retention.ms is an override that is copied at creation; min.insync.replicas is excluded
    // by MM2's default config.properties.exclude.
    a.create_topic(
        &x,
        1,
        &[("retention.ms", "7200000"), ("min.insync.replicas", "1")],
    );
    a.produce(&x, 0, &values("x0-", 0..10));
    let cfg = config(
        &sa,
        &sb,
        &format!(
            "{sa}->{sb}.enabled = true\n{sa}->{sb}.topics = {tag}.*\n\
             refresh.topics.interval.seconds = 1\n\
             sync.topic.configs.interval.seconds = 1\nsync.topic.acls.enabled = false\n"
        ),
    );
    // Discovery rounds are logged at debug level, with their number.
    let mut s = Strait::start_logging(&cfg, "info,strait_control::duties::topics=debug");
    wait_for("the first topic", Duration::from_secs(30), || {
        b.count(&rx) == 10
    });
    let c = b.configs(&rx);
    assert_eq!(
        c["retention.ms"],
        (Some("7200000".into()), ConfigSource::DynamicTopic)
    );
    assert_ne!(
        c["min.insync.replicas"].1,
        ConfigSource::DynamicTopic,
        "excluded config copied"
    );

    // A new topic is created and replicated by the first discovery round that starts after it
    // exists (or the next, should the source broker's metadata lag behind its CreateTopics
    // answer). Counted in rounds, not seconds, so that a busy machine cannot fail it; that a
    // round comes every refresh.topics.interval.seconds is the schedule's own (sans-IO) test,
    // duties::topics::tests::the_passes_come_due_on_their_intervals.
    let y = format!("{tag}-y");
    a.create_topic(&y, 2, &[]);
    let created_ms = now_ms();
    a.produce(&y, 0, &values("y0-", 0..12));
    a.produce(&y, 1, &values("y1-", 0..8));
    let took = wait_for("the new topic", Duration::from_secs(30), || {
        b.count(&format!("{sa}.{y}")) == 20
    });
    assert_eq!(b.values(&format!("{sa}.{y}")), a.values(&y));
    let log = s.log();
    let rounds = discovery_rounds(&log);
    let first_after = rounds
        .iter()
        .find(|(at_ms, _)| *at_ms >= created_ms)
        .map(|(_, n)| *n)
        .unwrap_or_else(|| panic!("no discovery round after the topic was created:\n{log}"));
    let creating = creation_round(&log, &format!("{sa}.{y}"));
    eprintln!(
        "new topic: created by discovery round {creating}, the first after it existed being \
         {first_after}; copied {took:?} after it was created"
    );
    assert!(
        creating <= first_after + 1,
        "the new topic was created by discovery round {creating}, more than one round after \
         the first that started once it existed ({first_after})\n{log}"
    );

    // New partitions: the remote topic grows, then the partition is replicated.
    a.grow(&x, 3);
    a.produce(&x, 2, &values("x2-", 0..5));
    wait_for("the new partition", Duration::from_secs(30), || {
        b.partitions(&rx) == Some(3) && b.values(&rx).get(&2).is_some_and(|v| v.len() == 5)
    });

    // Config changes: set on the source, reset on the target (a manual override there goes,
    // as MM2's use.defaults.from=target does), max.message.bytes raised.
    b.alter(
        &rx,
        &[AlterConfigOp::Set("segment.ms".into(), "100000000".into())],
    );
    a.alter(
        &x,
        &[
            AlterConfigOp::Set("retention.ms".into(), "3600000".into()),
            AlterConfigOp::Set("max.message.bytes".into(), "3000000".into()),
        ],
    );
    wait_for("config sync", Duration::from_secs(30), || {
        let c = b.configs(&rx);
        c["retention.ms"].0.as_deref() == Some("3600000")
            && c["max.message.bytes"].0.as_deref() == Some("3000000")
            && c["segment.ms"].1 != ConfigSource::DynamicTopic
    });
    // The shards learn the new max.message.bytes: a 1.5 MB record, too large for the default
    // 1 MiB the partition started with, is replicated rather than failing the partition. The
    // target shows the new value a describe and a control-loop turn before the shards have it
    // (under CI load that took longer than a fixed 500 ms once), so wait for strait's word.
    wait_for_or(
        "strait to see the new max.message.bytes",
        Duration::from_secs(30),
        || s.log().contains("to=3000000"),
        || s.log(),
    );
    std::thread::sleep(Duration::from_millis(500));
    let big = "b".repeat(1_500_000);
    a.produce(&x, 0, std::slice::from_ref(&big));
    wait_for_or(
        "the large record",
        Duration::from_secs(30),
        || b.values(&rx).get(&0).is_some_and(|v| v.len() == 11),
        || s.log(),
    );
    assert_eq!(b.values(&rx)[&0][10].len(), big.len());
    // Back to the default on the source: deleted on the target.
    a.alter(&x, &[AlterConfigOp::Delete("retention.ms".into())]);
    wait_for("config reset", Duration::from_secs(30), || {
        b.configs(&rx)["retention.ms"].1 != ConfigSource::DynamicTopic
    });
    assert!(s.running(), "strait stopped:\n{}", s.log());
    let (status, log) = s.stop();
    assert!(status.success(), "strait failed:\n{log}");
    assert!(!log.contains("too large"), "{log}");
    assert_eq!(b.values(&rx), a.values(&x));
}

// ---------------------------------------------------------------------------------------------
// Restart.

#[test]
fn restart_replicates_nothing_twice() {
    let (a, b) = (Admin::source(), Admin::target());
    let t = unique("cprst");
    let (sa, sb) = aliases();
    let rt = format!("{sa}.{t}");
    a.create_topic(&t, 3, &[]);
    for p in 0..3 {
        a.produce(&t, p, &values(&format!("p{p}-"), 0..100));
    }
    let cfg = one_way(&sa, &sb, &t, "");
    let s = Strait::start(&cfg);
    wait_for("the first 300 records", Duration::from_secs(30), || {
        b.count(&rt) == 300
    });
    // Keep producing while strait stops, so that the stop happens with work in flight.
    let topic = t.clone();
    let producer = std::thread::spawn(move || {
        let a = Admin::source();
        for i in 0..20 {
            for p in 0..3 {
                a.produce(
                    &topic,
                    p,
                    &values(&format!("p{p}-"), 100 + i * 10..110 + i * 10),
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    });
    std::thread::sleep(Duration::from_millis(400));
    let (status, log) = s.stop();
    assert!(status.success(), "strait failed:\n{log}");
    producer.join().expect("producer");
    let copied_before_restart = b.count(&rt);
    assert!(copied_before_restart >= 300);

    let (status, log) = until_caught_up(&cfg);
    assert!(status.success(), "restart failed:\n{log}");
    let want = a.values(&t);
    assert_eq!(want.values().map(Vec::len).sum::<usize>(), 900);
    assert_eq!(
        b.values(&rt),
        want,
        "copied before the restart: {copied_before_restart}"
    );
}

/// The offset syncs load in the background while replication starts: a load that fails still
/// fails the run, with the error and the exit status it had when the run waited for it.
#[test]
fn an_offset_syncs_topic_that_cannot_be_created_still_fails_the_run() {
    let a = Admin::source();
    let t = unique("cpsyncerr");
    let (sa, sb) = aliases();
    a.create_topic(&t, 1, &[]);
    a.produce(&t, 0, &values("v", 0..10));
    // A replication factor the test bed's one broker cannot give.
    let cfg = one_way(&sa, &sb, &t, "offset-syncs.topic.replication.factor = 7");
    for args in [&["--until-caught-up"][..], &[]] {
        let mut cmd = vec!["run", "--config", cfg.to_str().expect("utf-8 path")];
        cmd.extend_from_slice(args);
        let (status, _, err) = strait(&cmd);
        assert_eq!(status.code(), Some(3), "{args:?}:\n{err}");
        let want = format!("cannot create mm2-offset-syncs.{sb}.internal on {sa}");
        assert!(
            err.contains(&want) && err.contains("InvalidReplicationFactor"),
            "{args:?}: no `{want}` in:\n{err}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Lost positions.

fn delete_topic(admin: &Admin, topic: &str) {
    let tb = Testbed::get();
    kafka_tool_ok(
        "kafka-topics",
        &[
            "--bootstrap-server",
            tb.source(),
            "--delete",
            "--topic",
            topic,
        ],
        None,
    );
    wait_for("the topic to be deleted", Duration::from_secs(30), || {
        admin.partitions(topic).is_none()
    });
}

#[test]
fn recreated_topic_stops_or_restarts_from_earliest() {
    let (a, b) = (Admin::source(), Admin::target());
    let t = unique("cprec");
    let (sa, sb) = aliases();
    let rt = format!("{sa}.{t}");
    a.create_topic(&t, 1, &[]);
    a.produce(&t, 0, &values("old-", 0..10));
    let cfg = one_way(&sa, &sb, &t, "");
    let (status, log) = until_caught_up(&cfg);
    assert!(status.success(), "{log}");
    assert_eq!(b.count(&rt), 10);
    let old_id = a.topic_id(&t);

    delete_topic(&a, &t);
    create_again(&a, &t);
    assert_ne!(a.topic_id(&t), old_id);
    a.produce(&t, 0, &values("new-", 0..5));

    let (status, log) = until_caught_up(&cfg);
    assert_eq!(status.code(), Some(2), "{log}");
    assert!(log.contains("was recreated"), "{log}");
    assert!(
        log.contains("set strait.on.lost.position=earliest"),
        "{log}"
    );
    assert_eq!(b.count(&rt), 10, "nothing of the new topic may be copied");

    let reset = one_way(&sa, &sb, &t, "strait.on.lost.position = earliest");
    let (status, log) = until_caught_up(&reset);
    assert!(status.success(), "{log}");
    assert!(
        log.contains("RESTARTING FROM THE EARLIEST OFFSET 0"),
        "{log}"
    );
    let mut want = values("old-", 0..10);
    want.extend(values("new-", 0..5));
    assert_eq!(b.values(&rt)[&0], want);
    // The position now belongs to the new topic: a further run has nothing to do.
    let (status, log) = until_caught_up(&cfg);
    assert!(status.success(), "{log}");
    assert_eq!(b.count(&rt), 15);
}

/// Creates `topic` with one partition on `admin`, retrying while a deletion of the same name
/// completes.
fn create_again(admin: &Admin, topic: &str) {
    wait_for(
        "the topic to be created again",
        Duration::from_secs(30),
        || {
            admin
                .block(admin.cluster.create_topics(
                    &[NewTopic {
                        name: topic.to_string(),
                        partitions: 1,
                        replication_factor: -1,
                        configs: vec![],
                    }],
                    30_000,
                ))
                .is_ok_and(|r| r.iter().all(|(_, r)| r.is_ok()))
        },
    );
}

#[test]
fn recreated_while_running_stops_only_that_partition() {
    recreated_while_running(false);
}

#[test]
fn recreated_while_running_restarts_from_earliest_when_asked() {
    recreated_while_running(true);
}

fn recreated_while_running(reset: bool) {
    let (a, b) = (Admin::source(), Admin::target());
    let (sa, sb) = aliases();
    let tag = unique("cprrun");
    let (victim, bystander) = (format!("{tag}-v"), format!("{tag}-b"));
    let (rv, rb) = (format!("{sa}.{victim}"), format!("{sa}.{bystander}"));
    a.create_topic(&victim, 1, &[]);
    a.create_topic(&bystander, 1, &[]);
    a.produce(&victim, 0, &values("old-", 0..10));
    a.produce(&bystander, 0, &values("b-", 0..10));
    let extra = if reset {
        "refresh.topics.interval.seconds = 1\nstrait.on.lost.position = earliest"
    } else {
        "refresh.topics.interval.seconds = 1"
    };
    let cfg = one_way(&sa, &sb, &format!("{tag}-.*"), extra);
    let s = Strait::start(&cfg);
    wait_for_or(
        "the first records",
        Duration::from_secs(30),
        || b.count(&rv) == 10 && b.count(&rb) == 10,
        || s.log(),
    );
    delete_topic(&a, &victim);
    create_again(&a, &victim);
    a.produce(&victim, 0, &values("new-", 0..3));
    // Several discovery intervals; the other partition keeps replicating.
    std::thread::sleep(Duration::from_secs(3));
    a.produce(&bystander, 0, &values("b-", 10..15));
    wait_for_or(
        "the other topic",
        Duration::from_secs(30),
        || b.count(&rb) == 15,
        || s.log(),
    );
    let mut old_and_new = values("old-", 0..10);
    old_and_new.extend(values("new-", 0..3));
    if reset {
        wait_for_or(
            "the new topic's records",
            Duration::from_secs(30),
            || b.count(&rv) == 13,
            || s.log(),
        );
    }
    let (status, log) = s.stop();
    if reset {
        assert!(status.success(), "{log}");
        assert!(log.contains("RESTARTING FROM THE EARLIEST OFFSET"), "{log}");
        assert_eq!(b.values(&rv)[&0], old_and_new);
    } else {
        assert_eq!(status.code(), Some(2), "{log}");
        assert!(
            log.contains(&format!("partition {victim}-0 stopped")),
            "{log}"
        );
        // Discovery sees the new topic id (or, if the shard fetched from the new topic before
        // discovery ran, its position is past the new log's end).
        assert!(
            log.contains("was recreated") || log.contains("out of range"),
            "{log}"
        );
        // Nothing of the new topic was copied on top of the old one.
        assert_eq!(b.values(&rv)[&0], values("old-", 0..10));
    }
    assert_eq!(b.values(&rb), a.values(&bystander));
}

#[test]
fn truncated_log_stops_or_restarts_from_earliest() {
    let (a, b) = (Admin::source(), Admin::target());
    let tb = Testbed::get();
    let t = unique("cptrunc");
    let (sa, sb) = aliases();
    let rt = format!("{sa}.{t}");
    a.create_topic(&t, 1, &[]);
    a.produce(&t, 0, &values("v", 0..10));
    let cfg = one_way(&sa, &sb, &t, "");
    let (status, log) = until_caught_up(&cfg);
    assert!(status.success(), "{log}");
    assert_eq!(b.count(&rt), 10);

    a.produce(&t, 0, &values("v", 10..20));
    let spec = temp_file(&format!(
        r#"{{"version":1,"partitions":[{{"topic":"{t}","partition":0,"offset":15}}]}}"#
    ));
    kafka_tool_ok(
        "kafka-delete-records",
        &[
            "--bootstrap-server",
            tb.source(),
            "--offset-json-file",
            spec.to_str().expect("utf-8"),
        ],
        None,
    );

    let (status, log) = until_caught_up(&cfg);
    assert_eq!(status.code(), Some(2), "{log}");
    assert!(
        log.contains(
            "was truncated past strait's position: next offset 10 is below the log start 15"
        ),
        "{log}"
    );
    assert_eq!(b.count(&rt), 10);

    let reset = one_way(&sa, &sb, &t, "strait.on.lost.position = earliest");
    let (status, log) = until_caught_up(&reset);
    assert!(status.success(), "{log}");
    assert!(
        log.contains("RESTARTING FROM THE EARLIEST OFFSET 15"),
        "{log}"
    );
    let mut want = values("v", 0..10);
    want.extend(values("v", 15..20));
    assert_eq!(b.values(&rt)[&0], want);
}

// ---------------------------------------------------------------------------------------------
// Migration.

#[test]
fn import_and_export_refuse_while_strait_runs() {
    let (a, b) = (Admin::source(), Admin::target());
    let (s, t) = aliases();
    let topic = unique("cpref");
    let remote = format!("{s}.{topic}");
    a.create_topic(&topic, 2, &[]);
    a.produce(&topic, 0, &values("p0-", 0..7));
    a.produce(&topic, 1, &values("p1-", 0..3));
    let cfg = config(
        &s,
        &t,
        &format!("{s}->{t}.enabled = true\n{s}->{t}.topics = {topic}\n"),
    );
    let path = cfg.to_str().expect("utf-8");
    let run = Strait::start(&cfg);
    wait_for("replication", Duration::from_secs(30), || {
        b.count(&remote) == 10
    });
    for cmd in ["import-mm2", "export-mm2"] {
        let (status, out, err) = strait(&["offsets", cmd, "--config", path]);
        assert_eq!(status.code(), Some(4), "{cmd}: {out}{err}");
        assert!(
            err.contains("while replication is active") && err.contains("strait instance"),
            "{cmd}: {err}"
        );
    }
    let (status, log) = run.stop();
    assert!(status.success(), "{log}");

    // Stopped cleanly: export writes MM2's entries (creating MM2's offsets topic), and an
    // import reads back exactly strait's positions.
    let (status, out, err) = strait(&[
        "offsets",
        "export-mm2",
        "--config",
        path,
        "--flow",
        &format!("{s}->{t}"),
    ]);
    assert!(status.success(), "{out}{err}");
    assert!(
        out.contains(&format!(
            "{topic}-0: strait resumes at 7 -> MM2's last replicated offset 6"
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "{topic}-1: strait resumes at 3 -> MM2's last replicated offset 2"
        )),
        "{out}"
    );
    let (status, out, err) = strait(&["offsets", "import-mm2", "--config", path]);
    assert!(status.success(), "{out}{err}");
    assert!(
        out.contains(&format!(
            "{topic}-0: MM2 replicated up to offset 6 -> strait resumes at 7 (was 7)"
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "{topic}-1: MM2 replicated up to offset 2 -> strait resumes at 3 (was 3)"
        )),
        "{out}"
    );
    // A wrong flow name is a usage error.
    let (status, _, err) = strait(&["offsets", "import-mm2", "--config", path, "--flow", "nope"]);
    assert_eq!(status.code(), Some(1), "{err}");
}

/// MirrorMaker 2 from the test bed's jars, as a child process.
struct Mm2 {
    child: Option<Child>,
    log: PathBuf,
}

impl Mm2 {
    fn start(config: &Path) -> Mm2 {
        let log = temp_file("");
        let child = Command::new(strait_tests::repo_root().join("scripts/kafka-tool"))
            .arg("connect-mirror-maker")
            .arg(config)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).expect("log"))
            .stderr(Stdio::from(
                std::fs::OpenOptions::new()
                    .append(true)
                    .open(&log)
                    .expect("log"),
            ))
            .spawn()
            .expect("MirrorMaker starts");
        Mm2 {
            child: Some(child),
            log,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn stop(mut self) {
        let mut child = self.child.take().expect("running");
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        let start = Instant::now();
        while child.try_wait().expect("wait").is_none() {
            if start.elapsed() > Duration::from_secs(60) {
                let _ = child.kill();
                panic!("MirrorMaker did not stop:\n{}", self.log());
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Mm2 {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// MM2's progress for `source` as stored in `topic`, and the raw records per partition.
fn mm2_progress(
    b: &Admin,
    topic: &str,
    source: &str,
) -> (ImportedProgress, BTreeMap<i32, Vec<StoredRecord>>) {
    let records = b.read(topic);
    let mut p = ImportedProgress::new(MIRROR_SOURCE_CONNECTOR, source);
    for r in records.values().flatten() {
        if let Some(k) = r.key.as_deref() {
            p.apply(k, r.value.as_deref());
        }
    }
    (p, records)
}

#[test]
fn migrate_from_mm2_and_back() {
    let (a, b) = (Admin::source(), Admin::target());
    let (s, t) = aliases();
    let topic = unique("cpmig");
    let remote = format!("{s}.{topic}");
    let offsets_topic = format!("mm2-offsets.{s}.internal");
    a.create_topic(&topic, 2, &[]);
    for p in 0..2 {
        a.produce(&topic, p, &values(&format!("p{p}-"), 0..100));
    }
    let tb = Testbed::get();
    let mm2_props = format!(
        "clusters = {s}, {t}\n\
         {s}.bootstrap.servers = {}\n\
         {t}.bootstrap.servers = {}\n\
         {s}->{t}.enabled = true\n\
         {s}->{t}.topics = {topic}\n\
         emit.heartbeats.enabled = false\n\
         heartbeats.replication.enabled = false\n\
         replication.factor = 1\n\
         checkpoints.topic.replication.factor = 1\n\
         heartbeats.topic.replication.factor = 1\n\
         offset-syncs.topic.replication.factor = 1\n\
         offset.storage.replication.factor = 1\n\
         status.storage.replication.factor = 1\n\
         config.storage.replication.factor = 1\n\
         sync.topic.acls.enabled = false\n\
         emit.checkpoints.enabled = false\n\
         {t}.offset.flush.interval.ms = 1000\n",
        tb.source(),
        tb.target()
    );
    let mm2_cfg = temp_file(&mm2_props);
    let strait_cfg = temp_file(&format!(
        "{mm2_props}strait.progress.topic.replication.factor = 1\n"
    ));
    let strait_path = strait_cfg.to_str().expect("utf-8");

    // MirrorMaker copies the first 200 records and commits its progress.
    let started = Instant::now();
    let mm2 = Mm2::start(&mm2_cfg);
    wait_for("MirrorMaker to copy", Duration::from_secs(180), || {
        b.count(&remote) == 200
    });
    eprintln!(
        "MirrorMaker copied 200 records after {:?}",
        started.elapsed()
    );
    // While it runs, strait refuses to import.
    let (status, out, err) = strait(&["offsets", "import-mm2", "--config", strait_path]);
    assert_eq!(status.code(), Some(4), "{out}{err}");
    assert!(err.contains("MirrorMaker 2 is running"), "{err}");
    // And `strait run` refuses to copy the flow a second time beside it.
    let (status, log) = until_caught_up(&strait_cfg);
    assert!(!status.success(), "{log}");
    assert!(
        log.contains(&format!(
            "flow {s}->{t}: refusing to start: MirrorMaker 2 is running"
        )),
        "{log}"
    );
    assert_eq!(b.count(&remote), 200, "strait copied nothing");
    wait_for(
        "MirrorMaker's offset commit",
        Duration::from_secs(60),
        || {
            let (p, _) = mm2_progress(&b, &offsets_topic, &s);
            (0..2).all(|i| p.offsets().get(&TopicPartition::new(&topic, i)) == Some(&99))
        },
    );
    mm2.stop();
    let (_, mm2_records) = mm2_progress(&b, &offsets_topic, &s);

    // More records arrive after MirrorMaker stopped.
    for p in 0..2 {
        a.produce(&topic, p, &values(&format!("p{p}-"), 100..150));
    }
    // The worker leaves its group when it stops; until then the import refuses.
    let mut out = String::new();
    wait_for("the import", Duration::from_secs(60), || {
        let (status, o, e) = strait(&["offsets", "import-mm2", "--config", strait_path]);
        assert!(status.success() || status.code() == Some(4), "{o}{e}");
        out = o;
        status.success()
    });
    for p in 0..2 {
        assert!(
            out.contains(&format!(
                "{topic}-{p}: MM2 replicated up to offset 99 -> strait resumes at 100 (new)"
            )),
            "{out}"
        );
    }
    let (status, log) = until_caught_up(&strait_cfg);
    assert!(status.success(), "{log}");
    // strait continued exactly after MirrorMaker's last record: no duplicate, no gap.
    assert_eq!(b.values(&remote), a.values(&topic));
    assert_eq!(b.count(&remote), 300);
    // strait verify proves the whole copy: what MirrorMaker copied by its offset syncs (strait
    // stored no mapping for it), what strait copied by its own.
    let (code, report, err) = verify_json(Path::new(STRAIT), &strait_cfg, &[]);
    assert_eq!(code, 0, "{report:#}\n{err}");
    let parts = report["partitions"].as_array().expect("partitions");
    assert_eq!(parts.len(), 2, "{report:#}");
    for p in parts {
        assert_eq!(p["source_range"], serde_json::json!([0, 150]), "{p:#}");
        assert_eq!(p["matched"], 150, "{p:#}");
        for f in ["missing", "extra", "mismatched"] {
            assert_eq!(p[f], 0, "{f}: {p:#}");
        }
        assert_eq!(p["not_compared"], serde_json::json!([]), "{p:#}");
    }
    assert!(
        !report["offset_syncs"]
            .as_str()
            .is_some_and(|s| s.ends_with("; 0 used")),
        "{report:#}"
    );

    // Back to MirrorMaker: the exported keys are byte for byte the ones MirrorMaker wrote, on
    // the same partitions, with strait's positions.
    let (status, out, err) = strait(&["offsets", "export-mm2", "--config", strait_path]);
    assert!(status.success(), "{out}{err}");
    let (progress, records) = mm2_progress(&b, &offsets_topic, &s);
    let partitions = records.len() as i32;
    for p in 0..2 {
        let key = source_offset_key(MIRROR_SOURCE_CONNECTOR, &s, &topic, p);
        let holders: Vec<(i32, Vec<String>)> = records
            .iter()
            .map(|(part, rs)| {
                (
                    *part,
                    rs.iter()
                        .filter(|r| r.key.as_deref() == Some(&key[..]))
                        .map(|r| {
                            String::from_utf8_lossy(r.value.as_deref().unwrap_or_default())
                                .into_owned()
                        })
                        .collect::<Vec<_>>(),
                )
            })
            .filter(|(_, v)| !v.is_empty())
            .collect();
        assert_eq!(
            holders.len(),
            1,
            "key of partition {p} on several partitions: {holders:?}"
        );
        let (part, vals) = &holders[0];
        assert_eq!(*part, connect::partition_for_key(&key, partitions).unwrap());
        assert!(
            mm2_records[part]
                .iter()
                .any(|r| r.key.as_deref() == Some(&key[..])),
            "MirrorMaker wrote another key"
        );
        assert!(vals.iter().any(|v| v == r#"{"offset":99}"#), "{vals:?}");
        assert_eq!(vals.last().map(String::as_str), Some(r#"{"offset":149}"#));
        assert_eq!(progress.offsets()[&TopicPartition::new(&topic, p)], 149);
    }

    // MirrorMaker resumes where strait stopped.
    for p in 0..2 {
        a.produce(&topic, p, &values(&format!("p{p}-"), 150..160));
    }
    let mm2 = Mm2::start(&mm2_cfg);
    wait_for("MirrorMaker to resume", Duration::from_secs(180), || {
        b.count(&remote) >= 320
    });
    // Give it a moment to (wrongly) copy anything twice.
    std::thread::sleep(Duration::from_secs(2));
    let log = mm2.log();
    mm2.stop();
    assert_eq!(
        b.values(&remote),
        a.values(&topic),
        "MirrorMaker log:\n{log}"
    );
}

// ---------------------------------------------------------------------------------------------
// Corrupt source data.

/// Flips one byte of the record value `marker` inside the source broker's log file of
/// `topic`-0: the broker serves the altered bytes (it checks CRCs on append, not on read), as a
/// disk or a bad copy can corrupt a log.
fn corrupt_source_log(topic: &str, marker: &str) {
    let log = Testbed::dir()
        .join("source/data")
        .join(format!("{topic}-0"))
        .join("00000000000000000000.log");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let bytes = std::fs::read(&log).unwrap_or_default();
        if let Some(at) = bytes
            .windows(marker.len())
            .position(|w| w == marker.as_bytes())
        {
            // In place (no truncation): the broker keeps the file open.
            use std::io::{Seek, SeekFrom, Write};
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .open(&log)
                .expect("open the source log");
            f.seek(SeekFrom::Start(at as u64)).expect("seek");
            f.write_all(&[bytes[at] ^ 0x20]).expect("write"); // "POISON" -> "pOISON"
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{marker} not found in {}",
            log.display()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn corrupt_source_batch_stops_its_partition_at_once() {
    let (a, b) = (Admin::source(), Admin::target());
    let (sa, sb) = aliases();
    let tag = unique("cpcrc");
    let (victim, bystander) = (format!("{tag}-v"), format!("{tag}-b"));
    let (rv, rb) = (format!("{sa}.{victim}"), format!("{sa}.{bystander}"));
    a.create_topic(&victim, 1, &[]);
    a.create_topic(&bystander, 1, &[]);
    // Kafka's console producer, uncompressed, so the marker is plain text in the log.
    let lines: String = (0..10)
        .map(|i| {
            if i == 5 {
                format!("POISON-{i}\n")
            } else {
                format!("good-{i}\n")
            }
        })
        .collect();
    kafka_tool_ok(
        "kafka-console-producer",
        &[
            "--bootstrap-server",
            Testbed::get().source(),
            "--topic",
            &victim,
        ],
        Some(lines.as_bytes()),
    );
    a.produce(&bystander, 0, &values("b-", 0..10));
    corrupt_source_log(&victim, "POISON");

    let cfg = one_way(&sa, &sb, &format!("{tag}-.*"), "");
    let started = Instant::now();
    let s = Strait::start(&cfg);
    wait_for_or(
        "the other topic",
        Duration::from_secs(30),
        || b.count(&rb) == 10,
        || s.log(),
    );
    wait_for_or(
        "the corrupt partition to stop",
        Duration::from_secs(30),
        || s.log().contains("is corrupt"),
        || s.log(),
    );
    let stopped_after = started.elapsed();
    let (status, log) = s.stop();
    assert_eq!(status.code(), Some(2), "{log}");
    assert!(
        log.contains(&format!(
            "source partition {victim}-0: the batch of source offsets"
        )) && log.contains("is corrupt"),
        "{log}"
    );
    // Nothing corrupt or after it arrived; what arrived is byte-identical.
    let copied = b.values(&rv).remove(&0).unwrap_or_default();
    assert!(copied.len() < 10, "{copied:?}");
    assert!(copied.iter().all(|v| v.starts_with("good-")), "{copied:?}");
    assert_eq!(b.values(&rb), a.values(&bystander));
    eprintln!(
        "corrupt batch: {} of 10 records copied before it, partition stopped {:.1} s after start",
        copied.len(),
        stopped_after.as_secs_f64()
    );
}
