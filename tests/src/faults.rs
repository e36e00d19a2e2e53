//! The fault harness: `strait run` replicating between the test bed's multi-broker fault clusters
//! (`fsource` → `ftarget`, `scripts/testbed up fsource ftarget`) while Kafka's
//! `kafka-verifiable-producer` writes to the source, faults are injected (brokers stopped, killed,
//! paused, leaders moved, links slowed or cut through Toxiproxy, strait itself killed), and then
//! every source record is checked against the target.
//!
//! A scenario ([`Scenario`]) gives a [`Row`]: records produced, found, lost, duplicated, out of
//! order, the recovery time after the fault ended, strait's max RSS, and notes (what `/health`
//! and `/status` said during the fault, how long SIGTERM took). Rows are appended to
//! `$STRAIT_TESTBED_DIR/faults/results.tsv` so `scripts/faults.sh` can print the table of a run.
//!
//! Observers (offsets, metadata, reading the logs back) use the clusters' INTERNAL listeners,
//! which Toxiproxy does not touch, so a fault on strait's links never blinds the test.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use strait_control::cluster::{
    Cluster, IsolationLevel, NewTopic, OffsetSpec, RetryConfig, TopicMeta, TopicPartition,
};
use strait_control::run::SHUTDOWN_DEADLINE;
use strait_dataplane::io::IoBackend;
use strait_dataplane::wire::ConnConfig;

use crate::strait::Strait;
use crate::toxiproxy::Toxiproxy;
use crate::{Testbed, http, log, repo_root, setup, temp_file};

/// The source and target alias in the scenarios' `mm2.properties`.
pub const SOURCE_ALIAS: &str = "S";
pub const TARGET_ALIAS: &str = "T";
/// How long an observer call may take before the harness treats the cluster as not answering.
const OBSERVER_REQUEST_TIMEOUT_MS: u64 = 5_000;
/// How often lag and health are sampled.
const SAMPLE_EVERY: Duration = Duration::from_millis(250);
/// How often strait's RSS is sampled.
const RSS_EVERY: Duration = Duration::from_millis(200);

/// How long a scenario's SIGTERM may take to end strait: the code's own bound on a stop,
/// [`SHUTDOWN_DEADLINE`] (control/src/run/stop.rs: the shards' 6 s, then the final writes' 10 s,
/// then LeaveGroup's 3 s (run/group.rs) = 19 s, README's figure), plus [`SHUTDOWN_MARGIN`].
pub const SHUTDOWN_BOUND: Duration = SHUTDOWN_DEADLINE.saturating_add(SHUTDOWN_MARGIN);
/// What the deadlines do not count: the control loop noticing the signal (within a turn and a
/// duty's cluster work, whose 2 s deadline it does not wait out), the stop's own steps between
/// the deadlines, the process's teardown and the harness's 20 ms polling, on a 2-core CI machine
/// shared with seven JVMs. The slowest stop seen, SIGTERM during a target black hole, where two
/// deadlines run out, took 19.1 s.
pub const SHUTDOWN_MARGIN: Duration = Duration::from_secs(6);
/// How long the harness waits after SIGTERM before it SIGKILLs strait: past
/// [`SHUTDOWN_BOUND`], so that a late stop is measured (and fails) rather than cut short.
pub const SHUTDOWN_KILL_AFTER: Duration = Duration::from_secs(60);

/// How long after a fault's end (after the kill, for a broker killed and left down) the lag may
/// take to be back at its pre-fault level. The longest waits the code and the clusters impose,
/// one after the other: a request sent into the fault just before it ended waits out
/// `request.timeout.ms` (30 s, the default the scenarios keep) before strait retries it; then
/// reconnect and retry backoff (`reconnect.backoff.max.ms`, `retry.backoff.max.ms`: 1 s); a
/// killed broker is fenced by the controller after `broker.session.timeout.ms` (9 s, Kafka's
/// default, the test bed's), and when it coordinated strait's group the member is assigned
/// again within `strait.group.session.timeout.ms` (10 s): 50 s. Plus 10 s for the backlog, which
/// merging drains in seconds (1.1-3.4 s after the full profile's 60 s outages at 1 000
/// records/s), and for a loaded 2-core machine (the slowest of CI's short profile: 24.0 s).
pub const RECOVERY_BOUND: Duration = Duration::from_secs(60);

fn run<F: std::future::Future>(fut: F) -> F::Output {
    strait_dataplane::io::block_on(IoBackend::Epoll, fut).expect("an epoll runtime starts")
}

/// Fault scenarios share two clusters: one at a time.
pub fn exclusive() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

// ---------------------------------------------------------------------------------------------
// The fault clusters

/// One of the test bed's fault clusters (`fsource`, `ftarget`).
#[derive(Debug, Clone)]
pub struct FaultCluster {
    name: String,
    prefix: String,
}

impl FaultCluster {
    /// The running fault cluster `name`. Panics (the test fails) with how to start it when it
    /// is not up: fault tests never skip.
    pub fn get(name: &str) -> FaultCluster {
        let tb = Testbed::load();
        let up = tb.try_var("STRAIT_TESTBED_CLUSTERS").unwrap_or("");
        assert!(
            up.split_whitespace().any(|c| c == name),
            "fault cluster {name} is not running (testbed.env lists: '{up}'); run `scripts/testbed up fsource ftarget` or `scripts/faults.sh`"
        );
        FaultCluster {
            name: name.to_string(),
            prefix: format!("STRAIT_{}", name.to_uppercase()),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    fn var(&self, suffix: &str) -> String {
        Testbed::load()
            .var(&format!("{}_{suffix}", self.prefix))
            .to_string()
    }

    /// Every broker's PLAINTEXT client listener, through Toxiproxy: what strait uses.
    pub fn bootstrap(&self) -> String {
        self.var("BOOTSTRAP")
    }

    /// Every broker's INTERNAL listener (never proxied): what producers and observers use.
    pub fn internal_bootstrap(&self) -> String {
        self.var("INTERNAL_BOOTSTRAP")
    }

    /// Broker node ids.
    pub fn brokers(&self) -> Vec<u32> {
        self.var("BROKERS")
            .split_whitespace()
            .map(|b| b.parse().expect("broker ids are numbers"))
            .collect()
    }

    pub fn replication_factor(&self) -> i16 {
        self.var("REPLICATION_FACTOR")
            .parse()
            .expect("a replication factor")
    }

    /// The Toxiproxy proxies in front of `broker` (every client listener), or of every broker.
    pub fn proxies(&self, broker: Option<u32>) -> Vec<String> {
        let brokers = broker.map(|b| vec![b]).unwrap_or_else(|| self.brokers());
        brokers
            .iter()
            .flat_map(|b| {
                ["PLAINTEXT", "SASL_SSL"].map(|l| self.var(&format!("NODE_{b}_{l}_PROXY")))
            })
            .collect()
    }

    /// Runs `scripts/testbed ACTION CLUSTER NODE` (stop, kill, pause, resume, start, restart);
    /// panics with its output when it fails.
    pub fn node(&self, action: &str, node: u32) {
        let t0 = Instant::now();
        let out = Command::new(repo_root().join("scripts/testbed"))
            .args([action, &self.name, &node.to_string()])
            .stdin(Stdio::null())
            .output()
            .expect("scripts/testbed runs");
        assert!(
            out.status.success(),
            "testbed {action} {} {node} failed ({}):\n{}",
            self.name,
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        eprintln!(
            "[faults] testbed {action} {} {node}: {:.1} s",
            self.name,
            t0.elapsed().as_secs_f64()
        );
    }

    /// Whether node `node` runs (`scripts/testbed pid`).
    pub fn is_running(&self, node: u32) -> bool {
        Command::new(repo_root().join("scripts/testbed"))
            .args(["pid", &self.name, &node.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
    }

    /// The pid of node `node` when it runs (`scripts/testbed pid`).
    fn pid(&self, node: u32) -> Option<u32> {
        let out = Command::new(repo_root().join("scripts/testbed"))
            .args(["pid", &self.name, &node.to_string()])
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .ok()?;
        out.status.success().then_some(())?;
        String::from_utf8_lossy(&out.stdout).trim().parse().ok()
    }

    /// Starts every node that is not running and resumes paused ones (after a failed scenario);
    /// leaves running ones alone (one `testbed pid` each, a healthy bed's cost per scenario).
    pub fn heal(&self) {
        let nodes: Vec<u32> = self
            .var("NODES")
            .split_whitespace()
            .map(|n| n.parse().expect("node ids are numbers"))
            .collect();
        for n in nodes {
            match self.pid(n) {
                None => self.node("start", n),
                Some(pid) if is_paused(pid) => self.node("resume", n),
                Some(_) => {}
            }
        }
    }

    fn client(&self) -> Cluster {
        let config = ConnConfig {
            client_id: "strait-fault-observer".into(),
            connect_timeout_ms: 2_000,
            request_timeout_ms: OBSERVER_REQUEST_TIMEOUT_MS,
            ..ConnConfig::default()
        };
        Cluster::new(
            &self.name,
            self.internal_bootstrap()
                .split(',')
                .map(str::to_string)
                .collect(),
            setup(config, IoBackend::Epoll),
            RetryConfig {
                max_attempts: 3,
                backoff_initial_ms: 100,
                backoff_max_ms: 500,
            },
        )
    }

    /// Creates `topic` with `partitions` partitions at the cluster's replication factor.
    pub fn create_topic(&self, topic: &str, partitions: i32) {
        let rf = self.replication_factor();
        run(async {
            let c = self.client();
            c.create_topic(
                NewTopic::new(topic, partitions).replication_factor(rf),
                30_000,
            )
            .await
            .unwrap_or_else(|e| panic!("create {topic} on {}: {e}", self.name));
            c.wait_for_leaders(topic, 30_000)
                .await
                .unwrap_or_else(|e| panic!("leaders of {topic} on {}: {e}", self.name));
        })
    }

    /// Creates `topic` with `kafka-topics --replica-assignment` (`"1:2,3"`: partition 0 on
    /// brokers 1 and 2, partition 1 on broker 3) and topic `configs` (`key=value`), and waits
    /// until every partition has a leader.
    pub fn create_topic_assigned(&self, topic: &str, assignment: &str, configs: &[&str]) {
        let bootstrap = self.internal_bootstrap();
        let mut args = vec![
            "--bootstrap-server",
            &bootstrap,
            "--create",
            "--topic",
            topic,
            "--replica-assignment",
            assignment,
        ];
        for c in configs {
            args.extend(["--config", c]);
        }
        crate::kafka_tool_ok("kafka-topics", &args, None);
        run(async { self.client().wait_for_leaders(topic, 60_000).await })
            .unwrap_or_else(|e| panic!("leaders of {topic} on {}: {e}", self.name));
    }

    /// Waits until `topic`'s metadata satisfies `ok` (panics after `timeout`, naming `what`
    /// and the last metadata); returns how long it took.
    pub fn wait_topic(
        &self,
        topic: &str,
        timeout: Duration,
        what: &str,
        ok: impl Fn(&TopicMeta) -> bool,
    ) -> Duration {
        let t0 = Instant::now();
        loop {
            let meta = self.topic(topic);
            if meta.as_ref().is_some_and(&ok) {
                return t0.elapsed();
            }
            assert!(
                t0.elapsed() < timeout,
                "{topic} on {}: not {what} within {timeout:?}; metadata {meta:?}",
                self.name
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// Makes `leader` (a replica outside the ISR) the leader of `topic`-`partition`, losing
    /// what it lacks (`kafka-leader-election --election-type UNCLEAN`), retrying until the
    /// metadata shows it or `timeout` passes. The tool's own answer is not enough either way:
    /// while the controller quorum re-forms it may time out after the election took place.
    pub fn elect_unclean(&self, topic: &str, partition: i32, leader: u32, timeout: Duration) {
        let bootstrap = self.internal_bootstrap();
        let p = partition.to_string();
        let t0 = Instant::now();
        let led = || {
            self.topic(topic)
                .and_then(|m| m.partition(partition).map(|x| x.leader))
                == Some(leader as i32)
        };
        let mut last = String::new();
        while !led() {
            assert!(
                t0.elapsed() < timeout,
                "{topic}-{partition} on {}: broker {leader} not elected within {timeout:?}; the tool's last answer:\n{last}",
                self.name
            );
            let out = crate::kafka_tool(
                "kafka-leader-election",
                &[
                    "--bootstrap-server",
                    &bootstrap,
                    "--election-type",
                    "UNCLEAN",
                    "--topic",
                    topic,
                    "--partition",
                    &p,
                ],
                None,
            );
            last = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            eprintln!(
                "[faults] unclean election of {topic}-{partition}: {}",
                last.lines().next().unwrap_or("")
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// The values of `topic`-`partition`'s records a read_committed consumer sees, in the order
    /// it sees them (INTERNAL listener): aborted transactions left out, a committed one at its
    /// marker. Only exactly-once forwarding writes transactions in the scenarios.
    pub fn values(&self, topic: &str, partition: i32) -> Vec<String> {
        log::read_committed_records(&self.internal_bootstrap(), topic, partition)
            .iter()
            .map(log::LogRecord::value_str)
            .collect()
    }

    /// `topic`'s metadata, `None` when it does not exist or the cluster does not answer.
    pub fn topic(&self, topic: &str) -> Option<TopicMeta> {
        run(async {
            let c = self.client();
            let md = c.refresh_metadata(Some(&[topic])).await.ok()?;
            md.topics.get(topic).cloned()
        })
    }

    /// The high watermark of every partition of `topic`, `None` when any is unknown.
    pub fn ends(&self, topic: &str) -> Option<Vec<i64>> {
        run(async {
            let c = self.client();
            let md = c.refresh_metadata(Some(&[topic])).await.ok()?;
            let n = md.topics.get(topic)?.partitions.len() as i32;
            let tps: Vec<TopicPartition> = (0..n).map(|p| TopicPartition::new(topic, p)).collect();
            let got = c
                .list_offsets(&tps, OffsetSpec::Latest, IsolationLevel::ReadUncommitted)
                .await;
            tps.iter()
                .map(|tp| got.get(tp).and_then(|r| r.as_ref().ok()).copied())
                .collect()
        })
    }

    /// Waits until every partition of `topics` has its full replica set in sync (after a broker
    /// restart, before the next). Returns how long it took; panics after `timeout`.
    pub fn wait_in_sync(&self, topics: &[&str], timeout: Duration) -> Duration {
        let t0 = Instant::now();
        loop {
            let lagging: Vec<String> = topics
                .iter()
                .flat_map(|t| match self.topic(t) {
                    None => vec![format!("{t}: no metadata")],
                    Some(m) => m
                        .partitions
                        .iter()
                        .filter(|p| p.isr.len() < p.replicas.len() || p.leader < 0)
                        .map(|p| {
                            format!("{t}-{}: isr {:?} of {:?}", p.partition, p.isr, p.replicas)
                        })
                        .collect(),
                })
                .collect();
            if lagging.is_empty() {
                return t0.elapsed();
            }
            assert!(
                t0.elapsed() < timeout,
                "{}: partitions not in sync after {timeout:?}: {lagging:?}",
                self.name
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// Moves every partition's leadership of `topic` to another broker: rotates each replica
    /// list with `kafka-reassign-partitions` (the preferred leader changes), waits for the
    /// reassignment, then runs a preferred `kafka-leader-election`. Returns leaders before and
    /// after.
    #[allow(clippy::too_many_lines)] // one scenario step told in order; split when it grows
    pub fn move_leaders(&self, topic: &str) -> (Vec<i32>, Vec<i32>) {
        let meta = self
            .topic(topic)
            .unwrap_or_else(|| panic!("{topic} on {}", self.name));
        let before: Vec<i32> = meta.partitions.iter().map(|p| p.leader).collect();
        let parts: Vec<String> = meta
            .partitions
            .iter()
            .map(|p| {
                let mut r = p.replicas.clone();
                r.rotate_left(1);
                format!(
                    "{{\"topic\":\"{topic}\",\"partition\":{},\"replicas\":[{}]}}",
                    p.partition,
                    r.iter().map(i32::to_string).collect::<Vec<_>>().join(",")
                )
            })
            .collect();
        let plan = temp_file(&format!(
            "{{\"version\":1,\"partitions\":[{}]}}",
            parts.join(",")
        ));
        let plan = plan.to_string_lossy().into_owned();
        let bootstrap = self.internal_bootstrap();
        crate::kafka_tool_ok(
            "kafka-reassign-partitions",
            &[
                "--bootstrap-server",
                &bootstrap,
                "--reassignment-json-file",
                &plan,
                "--execute",
            ],
            None,
        );
        let t0 = Instant::now();
        loop {
            let out = crate::kafka_tool_ok(
                "kafka-reassign-partitions",
                &[
                    "--bootstrap-server",
                    &bootstrap,
                    "--reassignment-json-file",
                    &plan,
                    "--verify",
                ],
                None,
            );
            if !out.contains("still in progress") {
                break;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(120),
                "reassignment of {topic} on {} not done after 120 s:\n{out}",
                self.name
            );
            std::thread::sleep(Duration::from_secs(1));
        }
        crate::kafka_tool_ok(
            "kafka-leader-election",
            &[
                "--bootstrap-server",
                &bootstrap,
                "--election-type",
                "PREFERRED",
                // Partitions already led by their preferred replica are left alone.
                "--all-topic-partitions",
            ],
            None,
        );
        let t0 = Instant::now();
        loop {
            let after: Vec<i32> = self
                .topic(topic)
                .map(|m| m.partitions.iter().map(|p| p.leader).collect())
                .unwrap_or_default();
            let preferred: Vec<i32> = meta
                .partitions
                .iter()
                .map(|p| {
                    let mut r = p.replicas.clone();
                    r.rotate_left(1);
                    r[0]
                })
                .collect();
            if after == preferred {
                return (before, after);
            }
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "{topic} on {}: leaders {after:?}, preferred {preferred:?} after the election",
                self.name
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// The broker coordinating `group` (FindCoordinator).
    pub fn group_coordinator(&self, group: &str) -> u32 {
        let node = run(async { self.client().coordinator(group).await })
            .unwrap_or_else(|e| panic!("the coordinator of {group} on {}: {e}", self.name));
        u32::try_from(node).expect("a broker id")
    }

    /// The broker leading the most partitions of `topic`.
    pub fn busiest_leader(&self, topic: &str) -> u32 {
        let meta = self
            .topic(topic)
            .unwrap_or_else(|| panic!("{topic} on {}", self.name));
        let mut count: BTreeMap<i32, usize> = BTreeMap::new();
        for p in &meta.partitions {
            *count.entry(p.leader).or_default() += 1;
        }
        let (leader, _) = count
            .into_iter()
            .max_by_key(|(_, n)| *n)
            .expect("the topic has partitions");
        u32::try_from(leader).expect("a leader")
    }
}

// ---------------------------------------------------------------------------------------------
// The producer

/// Kafka's `kafka-verifiable-producer` writing `"PREFIX.SEQ"` values (PREFIX a number) (keys `0..999` repeating,
/// so every partition gets records), acks=all, its JSON lines parsed as they come.
#[derive(Debug)]
pub struct VerifiableProducer {
    child: Child,
    reader: Option<JoinHandle<ProducerLog>>,
    acked: Arc<AtomicU64>,
    stderr_path: PathBuf,
}

/// What the producer reported.
#[derive(Debug, Clone, Default)]
pub struct ProducerLog {
    /// Acknowledged records by partition: (offset, value), in ack order.
    pub acked: BTreeMap<i32, Vec<(i64, String)>>,
    /// `producer_send_error` lines.
    pub errors: u64,
    /// The first few errors.
    pub error_samples: Vec<String>,
    pub shutdown_complete: bool,
}

impl ProducerLog {
    pub fn acked_count(&self) -> u64 {
        self.acked.values().map(|v| v.len() as u64).sum()
    }
}

impl VerifiableProducer {
    /// Starts producing `messages` records at `per_second` to `topic` of `cluster` (through its
    /// INTERNAL listener: the producer stands for the source's own applications, which a fault
    /// between strait and the source does not stop).
    pub fn start(
        cluster: &FaultCluster,
        topic: &str,
        messages: u64,
        per_second: u64,
        prefix: u32,
    ) -> VerifiableProducer {
        let config = temp_file(
            "enable.idempotence=true\nacks=all\nretries=2147483647\nmax.in.flight.requests.per.connection=5\ndelivery.timeout.ms=300000\nlinger.ms=5\n",
        );
        let stderr_path = temp_file("");
        let stderr = std::fs::File::create(&stderr_path).expect("stderr file");
        let mut child = Command::new(repo_root().join("scripts/kafka-tool"))
            .args([
                "kafka-verifiable-producer",
                "--bootstrap-server",
                &cluster.internal_bootstrap(),
                "--topic",
                topic,
                "--max-messages",
                &messages.to_string(),
                "--throughput",
                &per_second.to_string(),
                "--acks",
                "-1",
                "--value-prefix",
                &prefix.to_string(),
                "--repeating-keys",
                "1000",
                "--producer.config",
            ])
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("kafka-verifiable-producer starts");
        let stdout = child.stdout.take().expect("piped stdout");
        let acked = Arc::new(AtomicU64::new(0));
        let counter = acked.clone();
        let reader = std::thread::spawn(move || {
            let mut log = ProducerLog::default();
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) else {
                    continue;
                };
                match v["name"].as_str() {
                    Some("producer_send_success") => {
                        let p = v["partition"].as_i64().unwrap_or(-1) as i32;
                        let o = v["offset"].as_i64().unwrap_or(-1);
                        let val = v["value"].as_str().unwrap_or_default().to_string();
                        log.acked.entry(p).or_default().push((o, val));
                        counter.fetch_add(1, Ordering::Relaxed);
                    }
                    Some("producer_send_error") => {
                        log.errors += 1;
                        if log.error_samples.len() < 5 {
                            log.error_samples.push(line.clone());
                        }
                    }
                    Some("shutdown_complete") => log.shutdown_complete = true,
                    _ => {}
                }
            }
            log
        });
        VerifiableProducer {
            child,
            reader: Some(reader),
            acked,
            stderr_path,
        }
    }

    /// Fails the test with the producer's stderr if it ended with an error.
    pub fn assert_not_failed(&mut self) {
        if let Some(status) = self.child.try_wait().expect("try_wait")
            && !status.success()
        {
            panic!(
                "kafka-verifiable-producer failed ({status}):\n{}",
                std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
            );
        }
    }

    /// Records acknowledged so far.
    pub fn acked(&self) -> u64 {
        self.acked.load(Ordering::Relaxed)
    }

    /// Waits for the producer to finish (at most `timeout`, then it is stopped and the test
    /// fails).
    pub fn finish(mut self, timeout: Duration) -> ProducerLog {
        let t0 = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                let log = self
                    .reader
                    .take()
                    .expect("reader")
                    .join()
                    .expect("reader thread");
                assert!(
                    status.success(),
                    "kafka-verifiable-producer failed ({status}):\n{}",
                    std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
                );
                return log;
            }
            if t0.elapsed() > timeout {
                let _ = self.child.kill();
                panic!(
                    "kafka-verifiable-producer did not finish within {timeout:?} ({} acked); stderr:\n{}",
                    self.acked(),
                    std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for VerifiableProducer {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

// ---------------------------------------------------------------------------------------------
// strait under test

/// The `strait` binary: `$STRAIT_BIN`, or `strait` next to the test binary's directory
/// (`target/<profile>/strait`, built by `cargo test --workspace` or `cargo build -p strait-control`).
pub fn strait_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("STRAIT_BIN") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps/<test>");
    let bin = profile_dir.join("strait");
    assert!(
        bin.exists(),
        "{} does not exist: build it (`cargo build -p strait-control --bin strait`) or set STRAIT_BIN",
        bin.display()
    );
    bin
}

/// `strait run` as a separate process, restarted as a supervisor would, its RSS sampled.
#[derive(Debug)]
pub struct StraitProcess {
    config: PathBuf,
    current: Option<Strait>,
    pid: Arc<AtomicU32>,
    max_rss_kb: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    sampler: Option<JoinHandle<()>>,
    /// stderr of the processes that ended.
    past_logs: Vec<String>,
    pub starts: u32,
}

impl StraitProcess {
    pub fn start(config: &Path) -> StraitProcess {
        let pid = Arc::new(AtomicU32::new(0));
        let max_rss_kb = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let sampler = {
            let (pid, max, stop) = (pid.clone(), max_rss_kb.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let p = pid.load(Ordering::Relaxed);
                    if p != 0
                        && let Some(kb) = rss_kb(p)
                    {
                        max.fetch_max(kb, Ordering::Relaxed);
                    }
                    std::thread::sleep(RSS_EVERY);
                }
            })
        };
        let mut s = StraitProcess {
            config: config.to_path_buf(),
            current: None,
            pid,
            max_rss_kb,
            stop,
            sampler: Some(sampler),
            past_logs: Vec::new(),
            starts: 0,
        };
        s.spawn();
        s
    }

    fn spawn(&mut self) {
        let s = Strait::start(&strait_bin(), &self.config, &[]);
        self.pid.store(s.pid(), Ordering::Relaxed);
        self.current = Some(s);
        self.starts += 1;
    }

    /// stderr of the running process.
    pub fn stderr(&self) -> String {
        self.current
            .as_ref()
            .map(Strait::stderr)
            .unwrap_or_default()
    }

    /// Every process's stderr, oldest first.
    pub fn all_logs(&self) -> String {
        let mut all = self.past_logs.clone();
        all.push(self.stderr());
        all.join("\n----- restart -----\n")
    }

    /// Fails the test with strait's log tail if it exited.
    pub fn assert_alive(&mut self) {
        let s = self.current.take().expect("strait runs");
        let pid = s.pid();
        if Path::new(&format!("/proc/{pid}")).exists() && !is_zombie(pid) {
            self.current = Some(s);
            return;
        }
        let exit = s.wait(Duration::from_secs(5));
        panic!(
            "strait exited on its own ({:?}); stderr tail:\n{}",
            exit.code,
            tail(&exit.stderr, 40)
        );
    }

    /// SIGKILL, waiting until the process is gone; [`StraitProcess::restart`] starts it again.
    pub fn kill(&mut self) {
        let s = self.current.take().expect("strait runs");
        s.signal("KILL");
        let exit = s.wait(Duration::from_secs(10));
        self.pid.store(0, Ordering::Relaxed);
        self.past_logs.push(exit.stderr);
    }

    /// SIGKILL, then start again at once (a supervisor's restart).
    pub fn kill_and_restart(&mut self) {
        self.kill();
        self.spawn();
    }

    /// SIGTERM; returns how long strait took to exit and its exit code. After `limit` it is
    /// killed (and the time reported is the limit). [`shutdown_verdict`] judges the outcome.
    pub fn terminate(&mut self, limit: Duration) -> Stop {
        let s = self.current.take().expect("strait runs");
        let pid = s.pid();
        let t0 = Instant::now();
        s.signal("TERM");
        let mut status = None;
        while t0.elapsed() < limit {
            if !Path::new(&format!("/proc/{pid}")).exists() || is_zombie(pid) {
                status = Some(());
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let killed = status.is_none();
        if killed {
            s.signal("KILL");
        }
        let exit = s.wait(Duration::from_secs(10));
        let took = t0.elapsed();
        self.pid.store(0, Ordering::Relaxed);
        self.past_logs.push(exit.stderr);
        Stop {
            took: took.min(limit),
            code: exit.code,
            killed,
        }
    }

    /// Starts strait again after [`StraitProcess::terminate`].
    pub fn restart(&mut self) {
        assert!(self.current.is_none(), "strait still runs");
        self.spawn();
    }

    /// The REST API address the running process logged.
    pub fn api_addr(&self) -> Option<String> {
        let log = self.stderr();
        let line = log
            .lines()
            .find(|l| l.contains("REST API and /metrics listening"))?;
        let addr = line.split("address=").nth(1)?.split_whitespace().next()?;
        Some(addr.to_string())
    }

    /// `/health`'s status code and body; `None` when the API does not answer.
    pub fn health(&self) -> Option<(u16, String)> {
        self.get("/health")
    }

    /// The status code and body of a GET of `path` on the API; `None` when it does not
    /// answer.
    pub fn get(&self, path: &str) -> Option<(u16, String)> {
        let r = http::request(&self.api_addr()?, "GET", path, None).ok()?;
        Some((r.status, r.body.trim().to_string()))
    }

    /// `/status` as JSON; `None` when the API does not answer.
    pub fn status(&self) -> Option<serde_json::Value> {
        let r = http::request(&self.api_addr()?, "GET", "/status", None).ok()?;
        serde_json::from_str(&r.body).ok()
    }

    /// Largest RSS seen over every process, in MiB.
    pub fn max_rss_mib(&self) -> f64 {
        self.max_rss_kb.load(Ordering::Relaxed) as f64 / 1024.0
    }
}

impl Drop for StraitProcess {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.sampler.take() {
            let _ = t.join();
        }
    }
}

fn rss_kb(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Whether `pid` is stopped (SIGSTOP: `testbed pause`).
fn is_paused(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with(['T', 't']))
        })
        .unwrap_or(false)
}

fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(true)
}

/// The last `n` lines of `text`.
pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

// ---------------------------------------------------------------------------------------------
// Checking the target against the source

/// One partition's comparison.
#[derive(Debug, Clone, Default)]
pub struct PartitionCheck {
    pub partition: i32,
    /// Records in the source partition.
    pub source: usize,
    /// Records in the target partition.
    pub target: usize,
    /// Source records (by value) the target lacks.
    pub lost: usize,
    /// Target records beyond the first copy of each source record.
    pub duplicated: usize,
    /// First copies that come after a later source record.
    pub out_of_order: usize,
    /// Target records that are not in the source at all.
    pub foreign: usize,
    /// Records the producer saw acknowledged that the source partition does not hold (the
    /// source cluster lost them: not strait's doing, but reported).
    pub acked_not_in_source: usize,
    /// Target offsets where the target differs from the source position by position (the
    /// first one), e.g. where duplicates start.
    pub first_divergence: Option<i64>,
    /// The first lost value, for the report.
    pub first_lost: Option<String>,
}

/// Compares one partition: source values `src` (in log order), target values `dst`, values the
/// producer saw acknowledged.
pub fn compare_partition(
    partition: i32,
    src: &[String],
    dst: &[String],
    acked: &[String],
) -> PartitionCheck {
    let index: HashMap<&str, usize> = src
        .iter()
        .enumerate()
        .map(|(i, v)| (v.as_str(), i))
        .collect();
    let mut seen: HashSet<&str> = HashSet::new();
    let (mut duplicated, mut out_of_order, mut foreign) = (0, 0, 0);
    let mut max_index: Option<usize> = None;
    for v in dst {
        let Some(&i) = index.get(v.as_str()) else {
            foreign += 1;
            continue;
        };
        if !seen.insert(v.as_str()) {
            duplicated += 1;
            continue;
        }
        if max_index.is_some_and(|m| i < m) {
            out_of_order += 1;
        }
        max_index = Some(max_index.map_or(i, |m| m.max(i)));
    }
    let missing: Vec<&String> = src.iter().filter(|v| !seen.contains(v.as_str())).collect();
    let first_divergence = dst
        .iter()
        .zip(src)
        .position(|(d, s)| d != s)
        .or_else(|| (dst.len() != src.len()).then_some(src.len().min(dst.len())))
        .map(|i| i as i64);
    let in_source: HashSet<&str> = src.iter().map(String::as_str).collect();
    PartitionCheck {
        partition,
        source: src.len(),
        target: dst.len(),
        lost: missing.len(),
        duplicated,
        out_of_order,
        foreign,
        acked_not_in_source: acked
            .iter()
            .filter(|v| !in_source.contains(v.as_str()))
            .count(),
        first_divergence,
        first_lost: missing.first().map(|v| v.to_string()),
    }
}

/// Every partition's comparison.
#[derive(Debug, Clone, Default)]
pub struct Check {
    pub partitions: Vec<PartitionCheck>,
    /// The target's values by partition as strait's decoder read them (for the Java cross-check).
    pub target_values: BTreeMap<i32, Vec<String>>,
    /// The verdicts that failed: shutdown, recovery, the Java consumer's read.
    pub failures: Vec<String>,
}

impl Check {
    fn sum(&self, f: impl Fn(&PartitionCheck) -> usize) -> usize {
        self.partitions.iter().map(f).sum()
    }
    pub fn source(&self) -> usize {
        self.sum(|p| p.source)
    }
    pub fn found(&self) -> usize {
        self.sum(|p| p.source - p.lost)
    }
    pub fn lost(&self) -> usize {
        self.sum(|p| p.lost)
    }
    pub fn duplicated(&self) -> usize {
        self.sum(|p| p.duplicated)
    }
    pub fn out_of_order(&self) -> usize {
        self.sum(|p| p.out_of_order)
    }
    pub fn foreign(&self) -> usize {
        self.sum(|p| p.foreign)
    }
    pub fn acked_not_in_source(&self) -> usize {
        self.sum(|p| p.acked_not_in_source)
    }
    /// One line per partition that is not a perfect copy.
    pub fn problems(&self) -> Vec<String> {
        self.partitions
            .iter()
            .filter(|p| {
                p.lost + p.duplicated + p.out_of_order + p.foreign + p.acked_not_in_source > 0
            })
            .map(|p| {
                format!(
                    "partition {}: source {} target {}: lost {} (first {:?}), duplicated {}, out of order {}, foreign {}, acked but not in source {}, first divergence at target offset {:?}",
                    p.partition,
                    p.source,
                    p.target,
                    p.lost,
                    p.first_lost,
                    p.duplicated,
                    p.out_of_order,
                    p.foreign,
                    p.acked_not_in_source,
                    p.first_divergence
                )
            })
            .collect()
    }
}

/// Reads `topic` on the source and `remote` on the target back (INTERNAL listeners) and compares
/// them partition by partition.
pub fn check(
    source: &FaultCluster,
    topic: &str,
    target: &FaultCluster,
    remote: &str,
    produced: &ProducerLog,
) -> Check {
    let partitions = source
        .topic(topic)
        .unwrap_or_else(|| panic!("{topic} on {}", source.name()))
        .partitions
        .len() as i32;
    // Every partition of both clusters read at once (each read mostly waits on its brokers).
    let (src, dst): (Vec<Vec<String>>, Vec<Vec<String>>) = std::thread::scope(|scope| {
        let src: Vec<_> = (0..partitions)
            .map(|p| scope.spawn(move || source.values(topic, p)))
            .collect();
        let dst: Vec<_> = (0..partitions)
            .map(|p| scope.spawn(move || target.values(remote, p)))
            .collect();
        let join = |h: Vec<std::thread::ScopedJoinHandle<'_, Vec<String>>>| {
            h.into_iter()
                .map(|h| h.join().expect("a partition's read"))
                .collect()
        };
        (join(src), join(dst))
    });
    let mut target_values = BTreeMap::new();
    let partitions = src
        .iter()
        .zip(dst)
        .zip(0..)
        .map(|((src, dst), p)| {
            let acked: Vec<String> = produced
                .acked
                .get(&p)
                .map(|v| v.iter().map(|(_, val)| val.clone()).collect())
                .unwrap_or_default();
            let c = compare_partition(p, src, &dst, &acked);
            target_values.insert(p, dst);
            c
        })
        .collect();
    Check {
        partitions,
        target_values,
        failures: Vec::new(),
    }
}

// ---------------------------------------------------------------------------------------------
// Verdicts: the bounds and the independent read every scenario asserts

/// How a SIGTERM'd strait ended ([`StraitProcess::terminate`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stop {
    /// From SIGTERM until the process was gone (the harness's limit when it was killed).
    pub took: Duration,
    /// The exit code; `None` when a signal ended it.
    pub code: Option<i32>,
    /// It still ran at the harness's limit and was SIGKILLed: it hung.
    pub killed: bool,
}

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.killed {
            write!(
                f,
                "still running {:.1} s after SIGTERM, SIGKILLed",
                self.took.as_secs_f64()
            )
        } else {
            write!(
                f,
                "exit {} {:.1} s after SIGTERM",
                self.code
                    .map_or_else(|| "by a signal".into(), |c| c.to_string()),
                self.took.as_secs_f64()
            )
        }
    }
}

/// A stop passes when strait exited by itself with `expected_code` (0; 2 once a partition
/// stopped, as after an unclean election) within `bound` ([`SHUTDOWN_BOUND`]).
pub fn shutdown_verdict(stop: &Stop, expected_code: i32, bound: Duration) -> Result<(), String> {
    if stop.killed {
        return Err(format!(
            "SIGTERM did not stop strait: {stop} (bound {:.0} s)",
            bound.as_secs_f64()
        ));
    }
    if stop.code != Some(expected_code) {
        return Err(format!("SIGTERM: {stop}, expected exit {expected_code}"));
    }
    if stop.took > bound {
        return Err(format!(
            "SIGTERM: {stop}, over the {:.0} s bound (the code's {:.0} s of deadlines + {:.0} s margin)",
            bound.as_secs_f64(),
            SHUTDOWN_DEADLINE.as_secs_f64(),
            SHUTDOWN_MARGIN.as_secs_f64()
        ));
    }
    Ok(())
}

/// Recovery passes when it was measured and the lag was back within `bound`
/// ([`RECOVERY_BOUND`]) of the fault's end.
pub fn recovery_verdict(recovery: Option<&Recovery>, bound: Duration) -> Result<(), String> {
    let Some(r) = recovery else {
        return Err("recovery was not measured".into());
    };
    match r.caught_up {
        Some(d) if d <= bound => Ok(()),
        Some(d) => Err(format!(
            "recovery took {:.1} s, over the {:.0} s bound",
            d.as_secs_f64(),
            bound.as_secs_f64()
        )),
        None => Err(format!(
            "did not catch up within the {:.0} s recovery bound of the fault's end (first progress {:?})",
            bound.as_secs_f64(),
            r.first_progress
        )),
    }
}

/// Every record value of `topic` on `cluster` by partition, in log order, as Kafka's Java
/// consumer reads it (read_committed, every partition assigned, from the beginning to the end
/// offsets; `tests/java/StraitOffsetsTool.java dump`): an oracle that does not share strait's
/// decoder.
pub fn java_values(cluster: &FaultCluster, topic: &str) -> BTreeMap<i32, Vec<String>> {
    JavaRead::start(cluster, topic).values()
}

/// [`java_values`] started in the background (its JVM starts while strait's decoder reads).
#[derive(Debug)]
pub struct JavaRead(Child);

impl JavaRead {
    pub fn start(cluster: &FaultCluster, topic: &str) -> JavaRead {
        JavaRead(crate::offsets_tool().spawn(&[
            "dump",
            &cluster.internal_bootstrap(),
            topic,
            "read_committed",
        ]))
    }

    /// Waits for the read; panics with the program's stderr if it failed.
    pub fn values(self) -> BTreeMap<i32, Vec<String>> {
        parse_java_values(&crate::offsets_tool().finish(self.0))
    }
}

fn parse_java_values(out: &str) -> BTreeMap<i32, Vec<String>> {
    let mut values: BTreeMap<i32, Vec<String>> = BTreeMap::new();
    for line in out.lines() {
        let mut f = line.splitn(3, '\t');
        let (Some(p), Some(_offset), Some(v)) = (f.next(), f.next(), f.next()) else {
            panic!("the Java consumer printed {line:?}, not \"partition offset value\"");
        };
        let p: i32 = p.parse().expect("a partition number");
        values.entry(p).or_default().push(v.to_string());
    }
    values
}

/// The independent read agrees with strait's decoder when every partition holds the same
/// records, by value and in the same order (so the same count and set); a partition absent from
/// one side counts as empty.
pub fn oracle_verdict(
    decoded: &BTreeMap<i32, Vec<String>>,
    java: &BTreeMap<i32, Vec<String>>,
) -> Result<(), String> {
    let empty = Vec::new();
    let mut diffs = Vec::new();
    for p in decoded
        .keys()
        .chain(java.keys())
        .collect::<std::collections::BTreeSet<_>>()
    {
        let (d, j) = (
            decoded.get(p).unwrap_or(&empty),
            java.get(p).unwrap_or(&empty),
        );
        if d == j {
            continue;
        }
        let first = d
            .iter()
            .zip(j)
            .position(|(a, b)| a != b)
            .unwrap_or(d.len().min(j.len()));
        diffs.push(format!(
            "partition {p}: strait's decoder read {} records, Kafka's Java consumer {}; first difference at index {first} ({:?} vs {:?})",
            d.len(),
            j.len(),
            d.get(first),
            j.get(first)
        ));
    }
    if diffs.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "the Java consumer's read of the target disagrees with strait's decoder: {}",
            diffs.join("; ")
        ))
    }
}

// ---------------------------------------------------------------------------------------------
// Lag and recovery

/// Records the target lacks: the sum over partitions of source end minus target end (`None`
/// when either cluster does not answer). Duplicates on the target make it smaller.
pub fn lag(source: &FaultCluster, topic: &str, target: &FaultCluster, remote: &str) -> Option<i64> {
    let s: i64 = source.ends(topic)?.iter().sum();
    let t: i64 = target.ends(remote)?.iter().sum();
    Some(s - t)
}

/// The target's end, summed over partitions.
pub fn target_end(target: &FaultCluster, remote: &str) -> Option<i64> {
    Some(target.ends(remote)?.iter().sum())
}

/// How strait came back after a fault.
#[derive(Debug, Clone, Copy, Default)]
pub struct Recovery {
    /// Until the target's end moved again.
    pub first_progress: Option<Duration>,
    /// Until the lag fell back to the threshold.
    pub caught_up: Option<Duration>,
}

/// Polls from `fault_end` until the lag is at most `threshold` records (at most `limit`).
pub fn measure_recovery(
    fault_end: Instant,
    source: &FaultCluster,
    topic: &str,
    target: &FaultCluster,
    remote: &str,
    threshold: i64,
    limit: Duration,
) -> Recovery {
    let start_end = target_end(target, remote);
    let mut r = Recovery::default();
    while fault_end.elapsed() < limit {
        if r.first_progress.is_none()
            && let (Some(a), Some(b)) = (start_end, target_end(target, remote))
            && b > a
        {
            r.first_progress = Some(fault_end.elapsed());
        }
        if let Some(l) = lag(source, topic, target, remote)
            && l <= threshold
        {
            r.caught_up = Some(fault_end.elapsed());
            r.first_progress.get_or_insert(fault_end.elapsed());
            return r;
        }
        std::thread::sleep(SAMPLE_EVERY);
    }
    r
}

/// The largest lag seen over `over` (the pre-fault level recovery returns to).
pub fn baseline_lag(
    source: &FaultCluster,
    topic: &str,
    target: &FaultCluster,
    remote: &str,
    over: Duration,
) -> i64 {
    let t0 = Instant::now();
    let mut max = 0;
    while t0.elapsed() < over {
        if let Some(l) = lag(source, topic, target, remote) {
            max = max.max(l);
        }
        std::thread::sleep(SAMPLE_EVERY);
    }
    max
}

/// What strait's API said while a fault lasted.
#[derive(Debug, Clone, Default)]
pub struct ApiWatch {
    pub samples: u32,
    /// Samples where `/health` answered 200.
    pub healthy: u32,
    /// Samples where the API did not answer at all.
    pub no_answer: u32,
    /// Largest lag `/status` reported (sum over partitions).
    pub max_reported_lag: i64,
    /// Largest lag the observers measured.
    pub max_true_lag: i64,
    /// Partition states `/status` reported, with how many samples each.
    pub states: BTreeMap<String, u32>,
    /// Distinct `/health` bodies.
    pub health_bodies: Vec<String>,
}

impl ApiWatch {
    /// One sample of `/health`, `/status` and the true lag.
    pub fn sample(
        &mut self,
        strait: &StraitProcess,
        source: &FaultCluster,
        topic: &str,
        target: &FaultCluster,
        remote: &str,
    ) {
        self.samples += 1;
        match strait.health() {
            None => self.no_answer += 1,
            Some((code, body)) => {
                if code == 200 {
                    self.healthy += 1;
                }
                // The JSON's status and reasons: partitions and ages differ at every sample.
                let b = match serde_json::from_str::<serde_json::Value>(&body) {
                    Ok(v) => format!("{code} {} {}", v["status"], v["reasons"]),
                    Err(_) => format!("{code} {body}"),
                };
                if !self.health_bodies.contains(&b) {
                    self.health_bodies.push(b);
                }
            }
        }
        if let Some(st) = strait.status() {
            let parts = st["flows"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|f| f["partitions"].as_array().cloned().unwrap_or_default());
            let mut reported = 0;
            for p in parts {
                reported += p["lag"].as_i64().unwrap_or(0);
                let state = p["state"].as_str().unwrap_or("?").to_string();
                *self.states.entry(state).or_default() += 1;
            }
            self.max_reported_lag = self.max_reported_lag.max(reported);
        }
        if let Some(l) = lag(source, topic, target, remote) {
            self.max_true_lag = self.max_true_lag.max(l);
        }
    }

    /// Samples for `how_long` (about one a second).
    pub fn watch(
        &mut self,
        how_long: Duration,
        strait: &StraitProcess,
        source: &FaultCluster,
        topic: &str,
        target: &FaultCluster,
        remote: &str,
    ) {
        let t0 = Instant::now();
        while t0.elapsed() < how_long {
            let s = Instant::now();
            self.sample(strait, source, topic, target, remote);
            let spent = s.elapsed();
            if spent < Duration::from_secs(1) {
                std::thread::sleep(Duration::from_secs(1) - spent);
            }
        }
    }

    /// A one-line summary for the notes.
    pub fn summary(&self) -> String {
        format!(
            "/health 200 in {}/{} samples ({} no answer; {:?}); /status max lag {} vs true {}; states {:?}",
            self.healthy,
            self.samples,
            self.no_answer,
            self.health_bodies,
            self.max_reported_lag,
            self.max_true_lag,
            self.states
        )
    }
}

// ---------------------------------------------------------------------------------------------
// Scenario profile, rows and the table

/// How big a run is: `STRAIT_FAULTS_PROFILE=short` (the test command's, the default) or `full`
/// (`scripts/faults.sh --full`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    Short,
    Full,
}

/// Whether the scenarios forward exactly-once (`STRAIT_FAULTS_EXACTLY_ONCE=1`, which
/// `scripts/faults.sh --exactly-once` and the test command set): the target's
/// `exactly.once.source.support = enabled`, each scenario's name (its row) ends in `-eos`, and
/// a scenario fails on any record a read_committed consumer of the target sees twice.
pub fn exactly_once() -> bool {
    match std::env::var("STRAIT_FAULTS_EXACTLY_ONCE").as_deref() {
        Ok("1") => true,
        Ok("0" | "") | Err(_) => false,
        Ok(other) => panic!("STRAIT_FAULTS_EXACTLY_ONCE must be 0 or 1, not {other:?}"),
    }
}

/// A scenario's name in its row: `name`, with `-eos` when it forwards exactly-once.
pub fn scenario_name(name: &str) -> String {
    if exactly_once() {
        format!("{name}-eos")
    } else {
        name.to_string()
    }
}

impl Profile {
    pub fn get() -> Profile {
        match std::env::var("STRAIT_FAULTS_PROFILE").as_deref() {
            Ok("full") => Profile::Full,
            Ok("short") | Err(_) => Profile::Short,
            Ok(other) => panic!("STRAIT_FAULTS_PROFILE must be short or full, not {other:?}"),
        }
    }

    /// `short` in the short profile, else `full`.
    pub fn pick<T>(self, short: T, full: T) -> T {
        match self {
            Profile::Short => short,
            Profile::Full => full,
        }
    }

    pub fn name(self) -> &'static str {
        self.pick("short", "full")
    }
}

/// One scenario's result: a line of the table.
#[derive(Debug, Clone, Default)]
pub struct Row {
    pub scenario: String,
    /// Records the producer saw acknowledged.
    pub produced: u64,
    /// Records in the source topic.
    pub source: usize,
    /// Source records found on the target.
    pub found: usize,
    pub lost: usize,
    pub duplicated: usize,
    pub out_of_order: usize,
    /// Seconds from the end of the fault until the lag was back at its pre-fault level.
    pub recovery_s: Option<f64>,
    pub max_rss_mib: f64,
    pub notes: Vec<String>,
}

impl Row {
    fn cells(&self) -> Vec<String> {
        vec![
            self.scenario.clone(),
            self.produced.to_string(),
            self.source.to_string(),
            self.found.to_string(),
            self.lost.to_string(),
            self.duplicated.to_string(),
            self.out_of_order.to_string(),
            self.recovery_s
                .map(|s| format!("{s:.1}"))
                .unwrap_or_else(|| "none".into()),
            format!("{:.0}", self.max_rss_mib),
        ]
    }

    /// A tab-separated line (notes last, joined with " | ").
    pub fn tsv(&self) -> String {
        let mut c = self.cells();
        c.push(self.notes.join(" | ").replace(['\t', '\n'], " "));
        c.join("\t")
    }

    pub fn from_tsv(line: &str) -> Option<Row> {
        let f: Vec<&str> = line.split('\t').collect();
        if f.len() < 9 {
            return None;
        }
        Some(Row {
            scenario: f[0].to_string(),
            produced: f[1].parse().ok()?,
            source: f[2].parse().ok()?,
            found: f[3].parse().ok()?,
            lost: f[4].parse().ok()?,
            duplicated: f[5].parse().ok()?,
            out_of_order: f[6].parse().ok()?,
            recovery_s: f[7].parse().ok(),
            max_rss_mib: f[8].parse().ok()?,
            notes: f
                .get(9)
                .map(|n| n.split(" | ").map(str::to_string).collect())
                .unwrap_or_default(),
        })
    }
}

const HEADER: [&str; 9] = [
    "scenario",
    "produced",
    "source",
    "found",
    "lost",
    "duplicated",
    "out of order",
    "recovery s",
    "max RSS MiB",
];

/// The rows as a Markdown table, notes listed under it.
pub fn table(rows: &[Row]) -> String {
    let mut out = format!("| {} |\n", HEADER.join(" | "));
    out.push_str(&format!("|{}\n", "---|".repeat(HEADER.len())));
    for r in rows {
        out.push_str(&format!("| {} |\n", r.cells().join(" | ")));
    }
    let noted: Vec<&Row> = rows.iter().filter(|r| !r.notes.is_empty()).collect();
    if !noted.is_empty() {
        out.push('\n');
        for r in noted {
            out.push_str(&format!("- **{}**: {}\n", r.scenario, r.notes.join("; ")));
        }
    }
    out
}

/// Where rows are appended: `$STRAIT_FAULTS_RESULTS`, or `$STRAIT_TESTBED_DIR/faults/results.tsv`.
pub fn results_file() -> PathBuf {
    std::env::var_os("STRAIT_FAULTS_RESULTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Testbed::dir().join("faults").join("results.tsv"))
}

/// Prints `row` and appends it to [`results_file`].
pub fn record(row: &Row) {
    eprintln!("[faults] result:\n{}", table(std::slice::from_ref(row)));
    let path = results_file();
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).expect("results dir");
    }
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .unwrap_or_else(|e| panic!("cannot append to {}: {e}", path.display()));
    writeln!(f, "{}", row.tsv()).expect("write results");
}

/// A small deterministic random source (xorshift64*), seeded from `STRAIT_FAULTS_SEED` or the
/// clock; the seed is printed so a run can be repeated.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn from_env() -> Rng {
        let seed = std::env::var("STRAIT_FAULTS_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos() as u64)
                    .unwrap_or(1)
            });
        eprintln!("[faults] random seed {seed} (STRAIT_FAULTS_SEED)");
        Rng(seed.max(1))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A duration in `[lo, hi)`.
    pub fn between(&mut self, lo: Duration, hi: Duration) -> Duration {
        let span = (hi - lo).as_millis().max(1) as u64;
        lo + Duration::from_millis(self.next_u64() % span)
    }
}

// ---------------------------------------------------------------------------------------------
// A scenario

/// Settings of one scenario.
#[derive(Debug, Clone)]
pub struct ScenarioConfig {
    pub name: String,
    pub partitions: i32,
    /// Records per second the producer writes.
    pub rate: u64,
    /// Seconds of production.
    pub seconds: u64,
}

/// A running scenario: topic created, strait replicating, producer writing.
#[derive(Debug)]
pub struct Scenario {
    pub config: ScenarioConfig,
    pub source: FaultCluster,
    pub target: FaultCluster,
    pub toxiproxy: Toxiproxy,
    pub topic: String,
    pub remote: String,
    pub strait: StraitProcess,
    pub producer: Option<VerifiableProducer>,
    pub notes: Vec<String>,
    pub recovery: Option<Recovery>,
    /// Failed verdicts ([`Scenario::verdict`]).
    pub failures: Vec<String>,
    started: Instant,
    _lock: MutexGuard<'static, ()>,
}

/// `strait.health.stall.timeout.ms` of the scenarios: short, so that `/health/ready` turns
/// within a short outage.
pub const STALL_TIMEOUT_MS: u64 = 3_000;

/// The `mm2.properties` of a scenario: `S` (fsource, through the proxy) to `T` (ftarget), `topic`
/// only, every internal topic at the clusters' replication factor, the API on a free port, and a
/// static member id (`strait.group.instance.id`), as an instance under a supervisor should have:
/// restarted after a crash it takes its place back at once instead of after the session timeout.
pub fn scenario_config(source: &FaultCluster, target: &FaultCluster, topic: &str) -> PathBuf {
    let rf = target.replication_factor();
    temp_file(&format!(
        "clusters = {SOURCE_ALIAS}, {TARGET_ALIAS}\n\
         {SOURCE_ALIAS}.bootstrap.servers = {}\n\
         {TARGET_ALIAS}.bootstrap.servers = {}\n\
         {SOURCE_ALIAS}->{TARGET_ALIAS}.enabled = true\n\
         {SOURCE_ALIAS}->{TARGET_ALIAS}.topics = {topic}\n\
         {SOURCE_ALIAS}->{TARGET_ALIAS}.heartbeats.replication.enabled = false\n\
         {TARGET_ALIAS}->{SOURCE_ALIAS}.emit.heartbeats.enabled = false\n\
         replication.factor = {rf}\n\
         checkpoints.topic.replication.factor = {rf}\n\
         heartbeats.topic.replication.factor = {rf}\n\
         offset-syncs.topic.replication.factor = {rf}\n\
         strait.progress.topic.replication.factor = {rf}\n\
         strait.health.stall.timeout.ms = {STALL_TIMEOUT_MS}\n\
         strait.group.instance.id = fault-strait-1\n\
         strait.api.listen = 127.0.0.1:0\n\
         {TARGET_ALIAS}.exactly.once.source.support = {}\n",
        source.bootstrap(),
        target.bootstrap(),
        if exactly_once() {
            "enabled"
        } else {
            "disabled"
        },
    ))
}

/// The fault clusters, healed (every node up and running, no toxic), held by one scenario
/// until this is dropped.
pub struct FaultBed {
    pub source: FaultCluster,
    pub target: FaultCluster,
    pub toxiproxy: Toxiproxy,
    lock: MutexGuard<'static, ()>,
}

impl FaultBed {
    /// Waits for the other scenarios of this process, then heals the test bed.
    pub fn healed() -> FaultBed {
        let lock = exclusive();
        let source = FaultCluster::get("fsource");
        let target = FaultCluster::get("ftarget");
        let toxiproxy = Toxiproxy::from_testbed();
        toxiproxy
            .reset()
            .unwrap_or_else(|e| panic!("cannot reset toxiproxy: {e}"));
        source.heal();
        target.heal();
        FaultBed {
            source,
            target,
            toxiproxy,
            lock,
        }
    }
}

impl Scenario {
    /// Heals the test bed (every node up, no toxic), creates a fresh topic, starts strait and
    /// the producer, and waits until records reach the target.
    pub fn start(mut config: ScenarioConfig) -> Scenario {
        config.name = scenario_name(&config.name);
        let FaultBed {
            source,
            target,
            toxiproxy,
            lock,
        } = FaultBed::healed();
        eprintln!(
            "[faults] === {} ({} profile): {} partitions, {} records/s for {} s",
            config.name,
            Profile::get().name(),
            config.partitions,
            config.rate,
            config.seconds
        );
        let topic = crate::unique(&format!("fault-{}", config.name));
        let remote = format!("{SOURCE_ALIAS}.{topic}");
        source.create_topic(&topic, config.partitions);
        let cfg = scenario_config(&source, &target, &topic);
        let strait = StraitProcess::start(&cfg);
        let producer = VerifiableProducer::start(
            &source,
            &topic,
            config.rate * config.seconds,
            config.rate,
            1,
        );
        let mut s = Scenario {
            config,
            source,
            target,
            toxiproxy,
            topic,
            remote,
            strait,
            producer: Some(producer),
            notes: Vec::new(),
            recovery: None,
            failures: Vec::new(),
            started: Instant::now(),
            _lock: lock,
        };
        s.wait_flowing(Duration::from_secs(90));
        s
    }

    /// Waits until the target's end moves (strait replicates).
    pub fn wait_flowing(&mut self, timeout: Duration) {
        let t0 = Instant::now();
        let first = target_end(&self.target, &self.remote).unwrap_or(0);
        loop {
            if target_end(&self.target, &self.remote).is_some_and(|e| e > first) {
                return;
            }
            self.strait.assert_alive();
            if let Some(p) = self.producer.as_mut() {
                p.assert_not_failed();
            }
            assert!(
                t0.elapsed() < timeout,
                "{}: nothing reached {} within {timeout:?}; strait's stderr:\n{}",
                self.config.name,
                self.remote,
                tail(&self.strait.stderr(), 40)
            );
            std::thread::sleep(SAMPLE_EVERY);
        }
    }

    /// How long the producer still writes.
    pub fn production_left(&self) -> Duration {
        Duration::from_secs(self.config.seconds).saturating_sub(self.started.elapsed())
    }

    /// The pre-fault lag (max over 3 s).
    pub fn baseline(&self) -> i64 {
        baseline_lag(
            &self.source,
            &self.topic,
            &self.target,
            &self.remote,
            Duration::from_secs(3),
        )
    }

    /// Measures recovery from `fault_end` back to `max(2 × baseline, one second of production)`
    /// and keeps it for the row.
    pub fn measure_recovery(&mut self, fault_end: Instant, baseline: i64) -> Recovery {
        let threshold = (2 * baseline).max(self.config.rate as i64);
        let r = measure_recovery(
            fault_end,
            &self.source,
            &self.topic,
            &self.target,
            &self.remote,
            threshold,
            RECOVERY_BOUND,
        );
        eprintln!(
            "[faults] {}: recovery {:?} (first progress {:?}, threshold {threshold} records, baseline {baseline})",
            self.config.name, r.caught_up, r.first_progress
        );
        if r.caught_up.is_none() {
            self.notes.push(format!(
                "lag {:?} at the recovery bound (threshold {threshold})",
                lag(&self.source, &self.topic, &self.target, &self.remote)
            ));
        }
        self.recovery = Some(r);
        r
    }

    /// Keeps a failed verdict for [`assert_passed`] (the scenario goes on, so its row is
    /// recorded).
    pub fn verdict(&mut self, v: Result<(), String>) {
        if let Err(e) = v {
            eprintln!("[faults] {}: FAILED: {e}", self.config.name);
            self.failures.push(e);
        }
    }

    /// Samples the API for `how_long` and notes what it said.
    pub fn watch_api(&mut self, what: &str, how_long: Duration) -> ApiWatch {
        let mut w = ApiWatch::default();
        w.watch(
            how_long,
            &self.strait,
            &self.source,
            &self.topic,
            &self.target,
            &self.remote,
        );
        eprintln!(
            "[faults] {}: during {what}: {}",
            self.config.name,
            w.summary()
        );
        self.notes.push(format!("during {what}: {}", w.summary()));
        w
    }

    /// Waits for the producer, then until the target holds at least the source's records and
    /// stopped moving, stops strait with SIGTERM (timed), checks every record, and records the
    /// row. Returns the row and the check; the caller asserts.
    #[allow(clippy::too_many_lines)] // the exact check's counts, in the order of the table
    pub fn finish(mut self) -> (Row, Check) {
        let producer = self.producer.take().expect("producer");
        let produced = producer.finish(Duration::from_secs(self.config.seconds + 300));
        if produced.errors > 0 {
            self.notes.push(format!(
                "the producer saw {} send errors (e.g. {:?})",
                produced.errors,
                produced.error_samples.first()
            ));
        }
        // Caught up: every target partition at least as long as its source, and still for 3 s.
        let t0 = Instant::now();
        let mut last: Option<Vec<i64>> = None;
        let mut still_since = Instant::now();
        let caught_up = loop {
            let (s, t) = (
                self.source.ends(&self.topic),
                self.target.ends(&self.remote),
            );
            if let (Some(s), Some(t)) = (&s, &t)
                && s.len() == t.len()
                && t.iter().zip(s).all(|(t, s)| t >= s)
            {
                if last.as_ref() != Some(t) {
                    last = Some(t.clone());
                    still_since = Instant::now();
                } else if still_since.elapsed() > Duration::from_secs(3) {
                    break true;
                }
            }
            if t0.elapsed() > Duration::from_secs(180) {
                break false;
            }
            std::thread::sleep(Duration::from_millis(500));
        };
        if !caught_up {
            self.notes.push(format!(
                "the target did NOT catch up within 180 s after production ended (lag {:?})",
                lag(&self.source, &self.topic, &self.target, &self.remote)
            ));
        }
        self.strait.assert_alive();
        let stop = self.strait.terminate(SHUTDOWN_KILL_AFTER);
        eprintln!("[faults] {}: final SIGTERM: {stop}", self.config.name);
        self.notes.push(format!("final stop: {stop}"));
        let shutdown = shutdown_verdict(&stop, 0, SHUTDOWN_BOUND);
        if shutdown.is_err() {
            // Why it ended so is in its last lines.
            let logs = self.strait.all_logs();
            let tail: Vec<&str> = logs.lines().rev().take(40).collect();
            eprintln!(
                "[faults] {}: strait's last log lines:\n{}",
                self.config.name,
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
        self.verdict(shutdown);
        let recovery = recovery_verdict(self.recovery.as_ref(), RECOVERY_BOUND);
        self.verdict(recovery);
        // strait says when a restart resumes at the stored offset although the target may hold
        // more (the only way it duplicates on purpose): keep those lines as evidence.
        let logs = self.strait.all_logs();
        let resumed_as_stored: Vec<&str> = logs
            .lines()
            .filter(|l| {
                l.contains("may be copied again")
                    || l.contains("cannot check how far the target got")
            })
            .collect();
        if !resumed_as_stored.is_empty() {
            self.notes.push(format!(
                "{} restarts of a partition resumed at the stored offset without proof, e.g. {}",
                resumed_as_stored.len(),
                resumed_as_stored[0].chars().take(400).collect::<String>()
            ));
        }
        let advanced = logs
            .lines()
            .filter(|l| l.contains("the target already held records replicated after"))
            .count();
        if advanced > 0 {
            self.notes.push(format!(
                "{advanced} restarts of a partition skipped records the target already held"
            ));
        }
        let java = JavaRead::start(&self.target, &self.remote);
        let mut check = check(
            &self.source,
            &self.topic,
            &self.target,
            &self.remote,
            &produced,
        );
        let java = java.values();
        eprintln!(
            "[faults] {}: Kafka's Java consumer read {} target records",
            self.config.name,
            java.values().map(Vec::len).sum::<usize>()
        );
        self.verdict(oracle_verdict(&check.target_values, &java));
        check.failures = self.failures.clone();
        for f in &self.failures {
            self.notes.push(format!("FAILED: {f}"));
        }
        for p in check.problems() {
            eprintln!("[faults] {}: {p}", self.config.name);
        }
        if check.acked_not_in_source() > 0 {
            self.notes.push(format!(
                "the SOURCE cluster lost {} acknowledged records",
                check.acked_not_in_source()
            ));
        }
        if check.foreign() > 0 {
            self.notes.push(format!(
                "{} target records are not in the source",
                check.foreign()
            ));
        }
        let row = Row {
            scenario: self.config.name.clone(),
            produced: produced.acked_count(),
            source: check.source(),
            found: check.found(),
            lost: check.lost(),
            duplicated: check.duplicated(),
            out_of_order: check.out_of_order(),
            recovery_s: self
                .recovery
                .and_then(|r| r.caught_up)
                .map(|d| d.as_secs_f64()),
            max_rss_mib: self.strait.max_rss_mib(),
            notes: self.notes.clone(),
        };
        record(&row);
        if row.lost > 0 {
            eprintln!(
                "[faults] {}: strait's log tail:\n{}",
                self.config.name,
                tail(&self.strait.all_logs(), 60)
            );
        }
        (row, check)
    }
}

/// The assertion every scenario makes: nothing lost, nothing out of order, nothing foreign;
/// and every verdict passed (stops within [`SHUTDOWN_BOUND`], recovery within
/// [`RECOVERY_BOUND`], Kafka's Java consumer reads what strait's decoder read).
pub fn assert_passed(row: &Row, check: &Check) {
    assert!(
        !exactly_once() || row.duplicated == 0,
        "{}: forwarded exactly-once, a read_committed consumer of the target sees {} records twice:\n{}",
        row.scenario,
        row.duplicated,
        check.problems().join("\n")
    );
    assert!(
        row.lost == 0 && row.out_of_order == 0 && check.foreign() == 0 && row.found == row.source,
        "{}: {} of {} source records lost, {} out of order, {} foreign:\n{}",
        row.scenario,
        row.lost,
        row.source,
        row.out_of_order,
        check.foreign(),
        check.problems().join("\n")
    );
    assert!(
        check.failures.is_empty(),
        "{}: {}",
        row.scenario,
        check.failures.join("\n")
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn compare_counts_lost_duplicated_and_out_of_order() {
        let src = v(&["a", "b", "c", "d"]);
        let same = compare_partition(0, &src, &src, &src);
        assert_eq!(
            (same.lost, same.duplicated, same.out_of_order, same.foreign),
            (0, 0, 0, 0)
        );
        assert_eq!(same.first_divergence, None);

        // A restart two records back: c, d again.
        let dup = compare_partition(0, &src, &v(&["a", "b", "c", "d", "c", "d"]), &src);
        assert_eq!((dup.lost, dup.duplicated, dup.out_of_order), (0, 2, 0));
        assert_eq!(dup.first_divergence, Some(4));

        let lost = compare_partition(0, &src, &v(&["a", "c", "d", "x"]), &v(&["a", "z"]));
        assert_eq!((lost.lost, lost.foreign), (1, 1));
        assert_eq!(lost.first_lost.as_deref(), Some("b"));
        assert_eq!(lost.acked_not_in_source, 1);
        assert_eq!(lost.first_divergence, Some(1));

        let swapped = compare_partition(0, &src, &v(&["a", "c", "b", "d"]), &src);
        assert_eq!((swapped.lost, swapped.out_of_order), (0, 1));
    }

    #[test]
    fn rows_survive_the_results_file() {
        let row = Row {
            scenario: "x".into(),
            produced: 10,
            source: 10,
            found: 9,
            lost: 1,
            duplicated: 2,
            out_of_order: 0,
            recovery_s: Some(1.25),
            max_rss_mib: 42.0,
            notes: vec!["a".into(), "b".into()],
        };
        let back = Row::from_tsv(&row.tsv()).unwrap();
        assert_eq!(back.tsv(), row.tsv());
        let none = Row {
            recovery_s: None,
            notes: vec![],
            ..row
        };
        assert_eq!(Row::from_tsv(&none.tsv()).unwrap().recovery_s, None);
        assert!(table(&[none]).contains("| none |"));
    }

    fn stop(secs: f64, code: Option<i32>, killed: bool) -> Stop {
        Stop {
            took: Duration::from_secs_f64(secs),
            code,
            killed,
        }
    }

    /// The shutdown verdict fails a hung stop, a late one and a wrong exit code; the bound is the
    /// code's 19 s plus the margin.
    #[test]
    fn shutdown_verdict_fails_hung_late_and_non_zero_stops() {
        assert_eq!(SHUTDOWN_BOUND, Duration::from_secs(25));
        assert!(SHUTDOWN_KILL_AFTER > SHUTDOWN_BOUND);
        assert_eq!(
            shutdown_verdict(&stop(0.4, Some(0), false), 0, SHUTDOWN_BOUND),
            Ok(())
        );
        // The slowest stop seen (both deadlines run out during a target black hole) passes.
        assert_eq!(
            shutdown_verdict(&stop(19.1, Some(0), false), 0, SHUTDOWN_BOUND),
            Ok(())
        );
        assert_eq!(
            shutdown_verdict(&stop(25.0, Some(0), false), 0, SHUTDOWN_BOUND),
            Ok(())
        );
        // Hung: SIGKILLed at the harness's limit (exit by a signal).
        let hung = shutdown_verdict(&stop(60.0, None, true), 0, SHUTDOWN_BOUND).unwrap_err();
        assert!(
            hung.contains("did not stop strait") && hung.contains("SIGKILLed"),
            "{hung}"
        );
        // Late: exited by itself, past the bound.
        let late = shutdown_verdict(&stop(25.1, Some(0), false), 0, SHUTDOWN_BOUND).unwrap_err();
        assert!(late.contains("over the 25 s bound"), "{late}");
        // Non-zero, or zero where a stopped partition must give 2, or ended by a signal.
        for (code, expected) in [(Some(1), 0), (Some(0), 2), (None, 0)] {
            let e = shutdown_verdict(&stop(1.0, code, false), expected, SHUTDOWN_BOUND);
            assert!(e.is_err(), "{code:?} passed for expected {expected}");
        }
        assert_eq!(
            shutdown_verdict(&stop(1.0, Some(2), false), 2, SHUTDOWN_BOUND),
            Ok(())
        );
    }

    /// The recovery verdict fails a scenario that did not measure recovery, did not catch up, or
    /// caught up past the bound.
    #[test]
    fn recovery_verdict_fails_missing_and_late_recovery() {
        let r = |s: Option<u64>| Recovery {
            first_progress: Some(Duration::from_secs(1)),
            caught_up: s.map(Duration::from_secs),
        };
        assert_eq!(recovery_verdict(Some(&r(Some(3))), RECOVERY_BOUND), Ok(()));
        assert_eq!(recovery_verdict(Some(&r(Some(60))), RECOVERY_BOUND), Ok(()));
        assert!(recovery_verdict(Some(&r(Some(61))), RECOVERY_BOUND).is_err());
        let none = recovery_verdict(Some(&r(None)), RECOVERY_BOUND).unwrap_err();
        assert!(none.contains("did not catch up within the 60 s"), "{none}");
        assert!(recovery_verdict(None, RECOVERY_BOUND).is_err());
    }

    /// The cross-check fails on a record one reader has and the other lacks, on another order,
    /// and on a partition only one of them read.
    #[test]
    fn oracle_verdict_fails_when_the_readers_disagree() {
        let m = |parts: &[(i32, &[&str])]| -> BTreeMap<i32, Vec<String>> {
            parts.iter().map(|(p, vals)| (*p, v(vals))).collect()
        };
        let decoded = m(&[(0, &["a", "b"]), (1, &["c"]), (2, &[])]);
        // The Java consumer prints nothing for an empty partition.
        assert_eq!(
            oracle_verdict(&decoded, &m(&[(0, &["a", "b"]), (1, &["c"])])),
            Ok(())
        );
        let lost = oracle_verdict(&decoded, &m(&[(0, &["a"]), (1, &["c"])])).unwrap_err();
        assert!(
            lost.contains("partition 0: strait's decoder read 2 records, Kafka's Java consumer 1"),
            "{lost}"
        );
        assert!(oracle_verdict(&decoded, &m(&[(0, &["b", "a"]), (1, &["c"])])).is_err());
        assert!(oracle_verdict(&decoded, &m(&[(0, &["a", "b"]), (1, &["c", "c"])])).is_err());
        assert!(
            oracle_verdict(&decoded, &m(&[(0, &["a", "b"]), (1, &["c"]), (3, &["x"])])).is_err()
        );
    }

    #[test]
    fn rng_is_deterministic_and_bounded() {
        let (mut a, mut b) = (Rng(7), Rng(7));
        for _ in 0..100 {
            let d = a.between(Duration::from_secs(1), Duration::from_secs(3));
            assert_eq!(d, b.between(Duration::from_secs(1), Duration::from_secs(3)));
            assert!(d >= Duration::from_secs(1) && d < Duration::from_secs(3));
        }
    }
}
