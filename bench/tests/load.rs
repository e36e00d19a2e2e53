//! `strait-bench load` against the test bed over SASL_SSL (SCRAM-SHA-512, the bed's CA), through
//! the binaries: `strait run` replicates as the least-privilege replicator `mirror`, and the
//! load test runs as the least-privilege `loader` (`loader_acls` in scripts/testbed: it may
//! create, write and delete its `acl-load-*` topics on the source and read and delete their
//! copies on the target, nothing else), given with `--set` on top of strait's own file.
//!
//! 1. With strait replicating: 0 lost, 0 duplicated, latency percentiles present, the series
//!    and plots written, and the topics it created removed.
//! 2. With strait killed half-way through production: records lost, exit status 3.
//!
//! Needs the test bed (`scripts/testbed up`) and the `strait` binary next to `strait-bench`
//! (`cargo test --workspace` builds it). Fails, never skips, when either is missing.
#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use strait_control::cluster::{Cluster, RetryConfig};
use strait_dataplane::io::IoBackend;
use strait_tests::strait::Strait;
use strait_tests::{Testbed, setup, temp_file, unique};

/// Production rate and length of each run: short, but long enough to kill strait half-way.
const RATE: &str = "500";
const DURATION_S: u64 = 10;

fn binaries() -> (PathBuf, PathBuf) {
    let bench = PathBuf::from(env!("CARGO_BIN_EXE_strait-bench"));
    let strait = bench.with_file_name("strait");
    assert!(
        strait.exists(),
        "{} is missing: build it with `cargo build -p strait-control --bin strait` (cargo test --workspace builds it)",
        strait.display()
    );
    (bench, strait)
}

/// A flow of its own (`msrc<tag>->mdst<tag>`: inside mirror's ACLs, with its own progress and
/// group) copying only `topic`, both clusters on SASL_SSL as `mirror`. Returns the file and
/// the flow's name.
fn config(tag: &str, topic: &str) -> (PathBuf, String) {
    let tb = Testbed::get();
    let s = format!("{}{tag}", tb.var("STRAIT_MIRROR_SOURCE_ALIAS"));
    let t = format!("{}{tag}", tb.var("STRAIT_MIRROR_TARGET_ALIAS"));
    let user = tb.var("STRAIT_SASL_MIRROR_USER");
    let password = tb.var("STRAIT_SASL_MIRROR_PASSWORD");
    let ca = tb.ca_pem();
    let cluster = |alias: &str, bootstrap: &str| {
        format!(
            "{alias}.bootstrap.servers = {bootstrap}\n\
             {alias}.security.protocol = SASL_SSL\n\
             {alias}.sasl.mechanism = SCRAM-SHA-512\n\
             {alias}.sasl.jaas.config = org.apache.kafka.common.security.scram.ScramLoginModule required username=\"{user}\" password=\"{password}\";\n\
             {alias}.ssl.truststore.type = PEM\n\
             {alias}.ssl.truststore.location = {}\n",
            ca.display()
        )
    };
    let file = temp_file(&format!(
        "clusters = {s}, {t}\n{}{}\
         replication.factor = 1\n\
         checkpoints.topic.replication.factor = 1\n\
         heartbeats.topic.replication.factor = 1\n\
         offset-syncs.topic.replication.factor = 1\n\
         strait.progress.topic.replication.factor = 1\n\
         strait.api.listen =\n\
         {s}->{t}.enabled = true\n\
         {s}->{t}.topics = {topic}\n\
         {t}->{s}.emit.heartbeats.enabled = false\n\
         emit.heartbeats.enabled = false\n\
         heartbeats.replication.enabled = false\n\
         emit.checkpoints.enabled = false\n\
         refresh.topics.interval.seconds = 1\n",
        cluster(&s, tb.source_sasl_ssl()),
        cluster(&t, tb.target_sasl_ssl()),
    ));
    (file, format!("{s}->{t}"))
}

/// `strait-bench load` on `flow` as `loader`, writing `json`; stderr goes to `<json>.log`.
fn start_load(cfg: &Path, flow: &str, topic: &str, json: &Path) -> Child {
    let tb = Testbed::get();
    let jaas = format!(
        "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"{}\" password=\"{}\";",
        tb.var("STRAIT_SASL_LOADER_USER"),
        tb.var("STRAIT_SASL_LOADER_PASSWORD")
    );
    let (s, t) = flow.split_once("->").expect("a flow");
    let log = std::fs::File::create(json.with_extension("log")).expect("log file");
    Command::new(binaries().0)
        .args(["load", "--config"])
        .arg(cfg)
        .args(["--flow", flow, "--topic", topic, "--partitions", "3"])
        .args(["--set", &format!("{s}.sasl.jaas.config={jaas}")])
        .args(["--set", &format!("{t}.sasl.jaas.config={jaas}")])
        .args(["--rate", RATE, "--duration-s", &DURATION_S.to_string()])
        .args(["--record-size", "200", "--key-size", "16", "--headers", "2"])
        .args(["--compression", "lz4", "--drain-timeout-s", "8"])
        .arg("--json")
        .arg(json)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .expect("strait-bench starts")
}

/// Waits for the load test (bounded), returns its exit code, stdout and JSON result.
fn finish_load(child: Child, json: &Path) -> (Option<i32>, String, Value) {
    let out = child.wait_with_output().expect("strait-bench runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let log = std::fs::read_to_string(json.with_extension("log")).unwrap_or_default();
    let text = std::fs::read_to_string(json).unwrap_or_else(|e| {
        panic!(
            "no result at {} ({e}); exit {:?}; stdout:\n{stdout}\nstderr:\n{log}",
            json.display(),
            out.status.code()
        )
    });
    let v: Value = serde_json::from_str(&text).expect("the result is JSON");
    (out.status.code(), stdout, v)
}

fn n(v: &Value, path: &[&str]) -> u64 {
    path.iter()
        .fold(v, |v, k| &v[*k])
        .as_u64()
        .unwrap_or_else(|| panic!("{path:?} is not a number in {v}"))
}

/// A test topic inside loader's and mirror's ACLs that no other test uses.
fn tag_and_topic() -> (String, String) {
    let tag = unique("x")[2..10].to_string();
    let topic = format!("{}{tag}", Testbed::get().var("STRAIT_LOADER_TOPIC_PREFIX"));
    (tag, topic)
}

fn out_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("strait-bench-load-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("result dir");
    dir
}

/// Topic names on a test-bed cluster (PLAINTEXT, a super user).
fn topics(addr: &str) -> Vec<String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async {
        let c = Cluster::new(
            "test-admin",
            vec![addr.to_string()],
            setup(Testbed::get().plaintext(), IoBackend::Epoll),
            RetryConfig::default(),
        );
        let md = c.refresh_metadata(None).await.expect("metadata");
        md.topics.keys().cloned().collect()
    })
}

#[test]
fn with_strait_replicating_nothing_is_lost_or_duplicated() {
    let (tag, topic) = tag_and_topic();
    let (cfg, flow) = config(&tag, &topic);
    let strait = Strait::start(&binaries().1, &cfg, &[]);
    let json = out_dir("ok").join("result.json");
    let load = start_load(&cfg, &flow, &topic, &json);
    let (code, stdout, v) = finish_load(load, &json);
    strait.signal("TERM");
    let exit = strait.wait(Duration::from_secs(60));
    assert_eq!(code, Some(0), "stdout:\n{stdout}\nstrait:\n{}", exit.stderr);
    let sent = n(&v, &["counts", "sent"]);
    // 500 records/s for 10 s over 3 partitions (each paced at a third, rounded down).
    assert!((4900..=5100).contains(&sent), "sent {sent}: {v}");
    assert_eq!(n(&v, &["counts", "received"]), sent, "{stdout}");
    assert_eq!(n(&v, &["counts", "lost"]), 0, "{stdout}");
    assert_eq!(n(&v, &["counts", "duplicated"]), 0, "{stdout}");
    assert_eq!(n(&v, &["counts", "out_of_order"]), 0, "{stdout}");
    assert_eq!(n(&v, &["counts", "misplaced"]), 0, "{stdout}");
    assert_eq!(n(&v, &["latency", "count"]), sent);
    let lat = |k: &str| v["latency"][k].as_f64().expect("a percentile");
    assert!(lat("p50_ms") > 0.0);
    assert!(lat("p50_ms") <= lat("p99_ms") && lat("p99_ms") <= lat("max_ms"));
    let intervals = v["intervals"].as_array().expect("intervals");
    assert!(intervals.len() >= DURATION_S as usize, "{intervals:?}");
    let per_interval: u64 = intervals.iter().map(|p| n(p, &["received"])).sum();
    assert_eq!(per_interval, sent);
    assert!(
        stdout.contains("OK: every record sent arrived, once"),
        "{stdout}"
    );
    for side in ["result.csv", "result-latency.svg", "result-throughput.svg"] {
        let f = json.with_file_name(side);
        let text = std::fs::read_to_string(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        assert!(text.lines().count() > 3, "{}:\n{text}", f.display());
    }
    // What it created is gone: the test topic and its remote copy.
    let remote = v["setup"]["remote_topic"].as_str().expect("remote topic");
    assert!(!topics(Testbed::get().source()).contains(&topic));
    assert!(!topics(Testbed::get().target()).contains(&remote.to_string()));
}

#[test]
fn with_strait_killed_mid_run_the_loss_is_reported_and_fails_the_run() {
    let (tag, topic) = tag_and_topic();
    let (cfg, flow) = config(&tag, &topic);
    let strait = Strait::start(&binaries().1, &cfg, &[]);
    let json = out_dir("killed").join("result.json");
    let load = start_load(&cfg, &flow, &topic, &json);
    // Half-way through production, from its progress lines ("producing N s: ...").
    let log = json.with_extension("log");
    let deadline = Instant::now() + Duration::from_secs(90);
    while produced_s(&std::fs::read_to_string(&log).unwrap_or_default()) < DURATION_S / 2 {
        assert!(Instant::now() < deadline, "production never got half-way");
        std::thread::sleep(Duration::from_millis(100));
    }
    strait.signal("KILL");
    let (code, stdout, v) = finish_load(load, &json);
    let sent = n(&v, &["counts", "sent"]);
    let lost = n(&v, &["counts", "lost"]);
    assert!(
        lost > 0,
        "nothing lost with strait killed half-way: {stdout}"
    );
    // What was copied before the kill arrived, and it was not all.
    let received = n(&v, &["counts", "received"]);
    assert!(received > 0 && received < sent, "{stdout}");
    assert_eq!(received + lost, sent);
    assert_eq!(code, Some(3), "{stdout}");
    assert!(stdout.contains("FAILED:"), "{stdout}");
}

/// The latest `producing N s` of the load test's progress.
fn produced_s(log: &str) -> u64 {
    log.lines()
        .filter_map(|l| l.split_once("producing ")?.1.split_once(" s:"))
        .filter_map(|(s, _)| s.parse().ok())
        .max()
        .unwrap_or(0)
}
