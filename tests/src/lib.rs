//! Helpers for integration tests against the real Apache Kafka test bed (`scripts/testbed`).
//!
//! Tests never skip: if the test bed is not running, they fail with a message saying how to
//! start it. `scripts/test.sh` starts it and exports `STRAIT_TESTBED_DIR`.
#![forbid(unsafe_code)]
#![warn(clippy::too_many_lines)]

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

use strait_dataplane::io::{ConnSetup, IoBackend};
use strait_dataplane::wire::{
    ConnConfig, SaslConfig, SaslMechanism, Secret, SecurityProtocol, TlsConfig, TrustStore,
};

pub mod api;
pub mod faults;
pub mod http;
pub mod log;
pub mod oauth;
pub mod strait;
pub mod toxiproxy;
pub mod translation;

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ lives in the repository root")
        .to_path_buf()
}

/// Facts about the running test bed, read from `$STRAIT_TESTBED_DIR/testbed.env`.
#[derive(Debug, Clone)]
pub struct Testbed {
    vars: HashMap<String, String>,
}

impl Testbed {
    /// The test bed's facts as `testbed.env` holds them, without checking that any cluster
    /// answers (the fault tests need only the fault clusters: [`crate::faults::FaultCluster`]).
    /// Panics (the test fails) when the test bed was never set up.
    pub fn load() -> &'static Testbed {
        static TB: OnceLock<Testbed> = OnceLock::new();
        TB.get_or_init(|| {
            let env_file = Self::dir().join("testbed.env");
            let text = std::fs::read_to_string(&env_file).unwrap_or_else(|e| {
                panic!(
                    "the Kafka test bed is not set up ({}: {e}); run `scripts/testbed up` or `scripts/test.sh`",
                    env_file.display()
                )
            });
            Testbed {
                vars: parse_env(&text),
            }
        })
    }

    /// `$STRAIT_TESTBED_DIR`, or the default `<repo>/.testbed`.
    pub fn dir() -> PathBuf {
        std::env::var_os("STRAIT_TESTBED_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| repo_root().join(".testbed"))
    }

    /// The running test bed's `source` and `target`. Panics (the test fails) when they are not up.
    pub fn get() -> &'static Testbed {
        static CHECKED: OnceLock<&'static Testbed> = OnceLock::new();
        CHECKED.get_or_init(|| {
            let tb = Self::load();
            for addr in [tb.source(), tb.target()] {
                if std::net::TcpStream::connect(addr).is_err() {
                    panic!("the Kafka test bed is not running ({addr} refuses connections); run `scripts/testbed up`");
                }
            }
            tb
        })
    }

    pub fn var(&self, name: &str) -> &str {
        self.vars
            .get(name)
            .unwrap_or_else(|| panic!("testbed.env has no {name}"))
    }

    /// A variable that may be absent (e.g. a fault cluster's, before it was ever started).
    pub fn try_var(&self, name: &str) -> Option<&str> {
        self.vars.get(name).map(String::as_str)
    }

    /// Source cluster, PLAINTEXT.
    pub fn source(&self) -> &str {
        self.var("STRAIT_SOURCE_BOOTSTRAP")
    }
    /// Target cluster, PLAINTEXT.
    pub fn target(&self) -> &str {
        self.var("STRAIT_TARGET_BOOTSTRAP")
    }
    pub fn source_sasl_ssl(&self) -> &str {
        self.var("STRAIT_SOURCE_SASL_SSL_BOOTSTRAP")
    }
    pub fn target_sasl_ssl(&self) -> &str {
        self.var("STRAIT_TARGET_SASL_SSL_BOOTSTRAP")
    }
    pub fn ca_pem(&self) -> PathBuf {
        PathBuf::from(self.var("STRAIT_TLS_CA_PEM"))
    }
    pub fn other_ca_pem(&self) -> PathBuf {
        PathBuf::from(self.var("STRAIT_TLS_OTHER_CA_PEM"))
    }
    /// How long the brokers' SASL sessions last (`connections.max.reauth.ms`, KIP-368).
    pub fn sasl_session_ms(&self) -> u64 {
        self.var("STRAIT_SASL_SESSION_MS")
            .parse()
            .expect("STRAIT_SASL_SESSION_MS is a number")
    }
    pub fn user(&self) -> &str {
        self.var("STRAIT_SASL_USER")
    }
    pub fn password(&self) -> &str {
        self.var("STRAIT_SASL_PASSWORD")
    }

    /// Connection settings for the PLAINTEXT listener.
    pub fn plaintext(&self) -> ConnConfig {
        ConnConfig {
            client_id: "strait-test".into(),
            ..ConnConfig::default()
        }
    }

    /// Connection settings for the SASL_SSL listener with `mechanism`, trusting the test CA.
    pub fn sasl_ssl(&self, mechanism: SaslMechanism) -> ConnConfig {
        ConnConfig {
            client_id: "strait-test".into(),
            security_protocol: SecurityProtocol::SaslSsl,
            tls: Some(TlsConfig {
                truststore: TrustStore::PemFile(self.ca_pem()),
                ..TlsConfig::default()
            }),
            sasl: Some(SaslConfig::password(
                mechanism,
                self.user(),
                Secret::new(self.password()),
            )),
            ..ConnConfig::default()
        }
    }

    /// Properties for a Java client on the SASL_SSL listener (a `--command-config` file body).
    pub fn java_sasl_ssl_props(&self, mechanism: SaslMechanism) -> String {
        let module = match mechanism {
            SaslMechanism::Plain => "org.apache.kafka.common.security.plain.PlainLoginModule",
            _ => "org.apache.kafka.common.security.scram.ScramLoginModule",
        };
        format!(
            "security.protocol=SASL_SSL\nsasl.mechanism={}\nsasl.jaas.config={module} required username=\"{}\" password=\"{}\";\nssl.truststore.type=PEM\nssl.truststore.location={}\n",
            mechanism.name(),
            self.user(),
            self.password(),
            self.ca_pem().display()
        )
    }
}

fn parse_env(text: &str) -> HashMap<String, String> {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("export "))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), unquote(v)))
        .collect()
}

/// Undoes bash's `printf %q` for the values the test bed writes: `''` quoting, or backslashes
/// before spaces and commas.
fn unquote(v: &str) -> String {
    if let Some(inner) = v.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')) {
        return inner.to_string();
    }
    let mut out = String::with_capacity(v.len());
    let mut chars = v.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.extend(chars.next()),
            c => out.push(c),
        }
    }
    out
}

/// The backends the current machine can run. io_uring must be available on the CI machine;
/// if it is not, the test fails rather than silently testing only epoll.
pub fn backends() -> [IoBackend; 2] {
    if let Err(why) = strait_dataplane::io::runtime::probe_uring() {
        panic!("io_uring is unavailable here, so the uring driver cannot be tested: {why}");
    }
    [IoBackend::Uring, IoBackend::Epoll]
}

/// Runs `body` once on each IO backend, each on a fresh runtime.
pub fn on_each_backend<F, Fut>(body: F)
where
    F: Fn(IoBackend) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    for backend in backends() {
        eprintln!("--- backend {}", backend.name());
        strait_dataplane::io::block_on(backend, body(backend)).expect("runtime starts");
    }
}

/// A ConnSetup for `config` on `backend`; panics on invalid TLS material (a test bug).
pub fn setup(config: ConnConfig, backend: IoBackend) -> ConnSetup {
    ConnSetup::new(config, backend).expect("valid connection settings")
}

/// A topic name no other test uses.
pub fn unique(prefix: &str) -> String {
    format!(
        "{prefix}-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    )
}

/// Runs one of Kafka's CLI tools through `scripts/kafka-tool`, feeding `stdin`.
pub fn kafka_tool(name: &str, args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut cmd = Command::new(repo_root().join("scripts/kafka-tool"));
    cmd.arg(name).args(args);
    run_with_stdin(cmd, stdin)
}

/// Runs `cmd` with `stdin` fed to it (or no stdin), capturing stdout and stderr.
pub fn run_with_stdin(mut cmd: Command, stdin: Option<&[u8]>) -> Output {
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    if let Some(data) = stdin {
        let mut si = child.stdin.take().expect("piped stdin");
        si.write_all(data).expect("write to stdin");
    }
    child.wait_with_output().expect("the command runs")
}

/// Like [`kafka_tool`] but panics with the tool's stderr when it fails.
pub fn kafka_tool_ok(name: &str, args: &[&str], stdin: Option<&[u8]>) -> String {
    let out = kafka_tool(name, args, stdin);
    if !out.status.success() {
        panic!(
            "{name} {args:?} failed ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Writes `text` to a fresh temporary file and returns its path (kept until process exit).
pub fn temp_file(text: &str) -> PathBuf {
    let f = tempfile::Builder::new()
        .prefix("strait-test-")
        .tempfile()
        .expect("temp file");
    std::fs::write(f.path(), text).expect("write temp file");
    let (_, path) = f.keep().expect("keep temp file");
    path
}

/// A small Java program compiled against the test bed's Kafka jars (kafka-clients,
/// connect-mirror-client, ...). Tests use these to produce data with Kafka's own client (bytes we
/// did not write) and to call Kafka's own libraries (e.g. `RemoteClusterUtils`).
#[derive(Debug, Clone)]
pub struct JavaProgram {
    class: String,
    classes_dir: PathBuf,
}

impl JavaProgram {
    /// Compiles `source` (a whole `.java` file defining public class `class`) once per content;
    /// the classes are cached under the test bed directory. Needs the test bed's Kafka jars, not
    /// its clusters (the fault suite runs it with only the fault clusters up).
    pub fn compile(class: &str, source: &str) -> JavaProgram {
        use std::hash::{Hash, Hasher};
        let tb = Testbed::load();
        let mut h = std::collections::hash_map::DefaultHasher::new();
        source.hash(&mut h);
        let dir = PathBuf::from(tb.var("STRAIT_TESTBED_DIR"))
            .join("java")
            .join(format!("{class}-{:016x}", h.finish()));
        let marker = dir.join(format!("{class}.class"));
        if !marker.exists() {
            let src_dir = dir.join("src");
            std::fs::create_dir_all(&src_dir).expect("create java dir");
            let src = src_dir.join(format!("{class}.java"));
            std::fs::write(&src, source).expect("write java source");
            let libs = format!("{}/*", tb.var("STRAIT_KAFKA_LIBS"));
            // Compile into a temporary directory and rename it into place, so that concurrent
            // tests never see half-written classes.
            let tmp = tempfile::Builder::new()
                .prefix("javac-")
                .tempdir_in(dir.parent().expect("has parent"))
                .expect("temp dir");
            let out = Command::new("javac")
                .args(["-nowarn", "-d"])
                .arg(tmp.path())
                .args(["-cp", &libs])
                .arg(&src)
                .output()
                .expect("javac runs (a JDK is required)");
            assert!(
                out.status.success(),
                "javac {class} failed:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
            for entry in std::fs::read_dir(tmp.path()).expect("read classes") {
                let entry = entry.expect("entry");
                let _ = std::fs::rename(entry.path(), dir.join(entry.file_name()));
            }
        }
        JavaProgram {
            class: class.to_string(),
            classes_dir: dir,
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(repo_root().join("scripts/kafka-tool"));
        cmd.arg("kafka-run-class")
            .arg(&self.class)
            .args(args)
            .env("STRAIT_EXTRA_CLASSPATH", &self.classes_dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    }

    /// Starts the program without waiting for it (stdin closed); finish it with
    /// [`JavaProgram::finish`].
    pub fn spawn(&self, args: &[&str]) -> std::process::Child {
        self.command(args)
            .stdin(Stdio::null())
            .spawn()
            .expect("kafka-run-class starts")
    }

    /// Waits for a program started with [`JavaProgram::spawn`]; panics with its stderr if it
    /// failed. Returns stdout.
    pub fn finish(&self, child: std::process::Child) -> String {
        let out = child.wait_with_output().expect("program runs");
        if !out.status.success() {
            panic!(
                "java {} failed ({}):\n{}",
                self.class,
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs the program through `scripts/kafka-tool kafka-run-class`; panics with its stderr
    /// if it fails. Returns stdout.
    pub fn run(&self, args: &[&str], stdin: Option<&[u8]>) -> String {
        let mut cmd = self.command(args);
        cmd.stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        });
        let mut child = cmd.spawn().expect("kafka-run-class starts");
        if let Some(data) = stdin {
            child
                .stdin
                .take()
                .expect("piped")
                .write_all(data)
                .expect("write stdin");
        }
        let out = child.wait_with_output().expect("program runs");
        if !out.status.success() {
            panic!(
                "java {} {args:?} failed ({}):\n{}",
                self.class,
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

/// `tests/java/StraitProduce.java`: Kafka's own producer writing the data-path tests' records
/// (modes `mixed`, `txn`, `compact`, `bulk`, `big`; see the file). Compiled once.
pub fn strait_produce() -> &'static JavaProgram {
    static PROGRAM: OnceLock<JavaProgram> = OnceLock::new();
    PROGRAM.get_or_init(|| {
        JavaProgram::compile("StraitProduce", include_str!("../java/StraitProduce.java"))
    })
}

/// `tests/java/StraitOffsetsTool.java`: Kafka's consumer, transactional producer, MM2's
/// `RemoteClusterUtils` and `OffsetSyncStore` (commands in the file). Compiled once.
pub fn offsets_tool() -> &'static JavaProgram {
    static PROGRAM: OnceLock<JavaProgram> = OnceLock::new();
    PROGRAM.get_or_init(|| {
        JavaProgram::compile(
            "org.apache.kafka.connect.mirror.StraitOffsetsTool",
            include_str!("../java/StraitOffsetsTool.java"),
        )
    })
}

/// Consumes at most `max` records (all when negative) of `topic` as `group` with Kafka's
/// consumer (read_committed, earliest), committing exactly after the last one per partition;
/// returns the tool's "partition offset value" lines.
pub fn consume_committed(bootstrap: &str, group: &str, topic: &str, max: i64) -> String {
    offsets_tool().run(
        &[
            "consume",
            bootstrap,
            group,
            topic,
            &max.to_string(),
            "read_committed",
            "earliest",
        ],
        None,
    )
}

/// Kafka's `kafka-verifiable-producer` writing `n` records to `topic` on `bootstrap` at
/// `per_second`, acks=all, values "0", "1", ... (unique), keys repeating over 1 000.
pub fn verifiable_producer(
    bootstrap: &str,
    topic: &str,
    n: u64,
    per_second: u64,
) -> std::process::Child {
    Command::new(repo_root().join("scripts/kafka-tool"))
        .args([
            "kafka-verifiable-producer",
            "--bootstrap-server",
            bootstrap,
            "--topic",
            topic,
            "--max-messages",
            &n.to_string(),
            "--throughput",
            &per_second.to_string(),
            "--acks",
            "-1",
            "--repeating-keys",
            "1000",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("kafka-verifiable-producer starts")
}

/// An `mm2.properties` for the test bed: clusters `A` (source) and `B` (target) on their
/// PLAINTEXT listeners, flow `A->B` enabled for `topics`, heartbeats off, every replication
/// factor 1, and `extra` lines appended. Returns the file's path.
pub fn testbed_mm2_config(topics: &str, extra: &str) -> PathBuf {
    testbed_clusters_config(
        "A",
        "B",
        &format!(
            "A->B.enabled = true\n\
             A->B.topics = {topics}\n\
             B->A.emit.heartbeats.enabled = false\n\
             # Tests share the test bed and the aliases A and B: replicating A's `heartbeats` from\n\
             # every test would make them share its progress too. Tests about heartbeats turn\n\
             # these back on in `extra` (the last value wins).\n\
             emit.heartbeats.enabled = false\n\
             heartbeats.replication.enabled = false\n\
             {extra}"
        ),
    )
}

/// An `mm2.properties` naming the test bed's source cluster `source_alias` and its target
/// `target_alias`, with every replication factor at 1 (one broker each) and `body` appended.
/// Returns the file's path.
pub fn testbed_clusters_config(source_alias: &str, target_alias: &str, body: &str) -> PathBuf {
    let tb = Testbed::get();
    temp_file(&format!(
        "clusters = {source_alias}, {target_alias}\n\
         {source_alias}.bootstrap.servers = {}\n\
         {target_alias}.bootstrap.servers = {}\n\
         replication.factor = 1\n\
         checkpoints.topic.replication.factor = 1\n\
         heartbeats.topic.replication.factor = 1\n\
         offset-syncs.topic.replication.factor = 1\n\
         strait.progress.topic.replication.factor = 1\n\
         {body}\n",
        tb.source(),
        tb.target()
    ))
}

/// `scripts/testbed ACTION CLUSTER 1` (`pause`, `resume`, ...) on the test bed's node of
/// `cluster` (`source` or `target`).
pub fn testbed_node(action: &str, cluster: &str) {
    let out = Command::new(repo_root().join("scripts/testbed"))
        .args([action, cluster, "1"])
        .stdin(Stdio::null())
        .output()
        .expect("scripts/testbed runs");
    assert!(
        out.status.success(),
        "testbed {action} {cluster} 1 failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The test bed's broker of `cluster` frozen (`scripts/testbed pause`: SIGSTOP) until dropped
/// (`resume`), whatever the test does. A test that freezes a broker needs a test binary of its
/// own: cargo runs test binaries one after another, so no other test sees it.
pub struct Frozen {
    cluster: &'static str,
}

impl Frozen {
    pub fn new(cluster: &'static str) -> Frozen {
        testbed_node("pause", cluster);
        Frozen { cluster }
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        testbed_node("resume", self.cluster);
    }
}

/// Kafka's perf producer writing 100-byte records to the source's `topic` at `rate` records/s
/// until killed.
pub fn perf_producer(topic: &str, rate: u32) -> std::process::Child {
    Command::new(repo_root().join("scripts/kafka-tool"))
        .args([
            "kafka-producer-perf-test",
            "--topic",
            topic,
            "--num-records",
            "100000000",
            "--record-size",
            "100",
            "--throughput",
            &rate.to_string(),
            "--producer-props",
            &format!("bootstrap.servers={}", Testbed::get().source()),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("kafka-producer-perf-test starts")
}

/// A config with a flow of its own, `S<tag>->T<tag>` (aliases no other test uses: its progress,
/// group and stored failover state are its own), copying `topic` with heartbeats off, plus
/// `extra`. Returns the file, the flow's name and the remote topic's name.
pub fn own_flow_config(topic: &str, extra: &str) -> (PathBuf, String, String) {
    let tag = &uuid::Uuid::new_v4().simple().to_string()[..8];
    let (src, tgt) = (format!("S{tag}"), format!("T{tag}"));
    let flow = format!("{src}->{tgt}");
    let cfg = testbed_clusters_config(
        &src,
        &tgt,
        &format!(
            "{flow}.enabled = true\n{flow}.topics = {topic}\n\
             {tgt}->{src}.emit.heartbeats.enabled = false\n\
             emit.heartbeats.enabled = false\n\
             heartbeats.replication.enabled = false\n\
             {extra}"
        ),
    );
    (cfg, flow, format!("{src}.{topic}"))
}

/// Every value of `topic` on `bootstrap` by partition, as Kafka's console consumer reads it
/// under read_committed: the values of Kafka's verifiable producer (integers). Reads at most
/// `expected + 1` records (one more, so that a duplicate can show).
pub fn committed_values(
    bootstrap: &str,
    topic: &str,
    expected: u64,
) -> std::collections::BTreeMap<i32, Vec<u64>> {
    let out = kafka_tool_ok(
        "kafka-console-consumer",
        &[
            "--bootstrap-server",
            bootstrap,
            "--topic",
            topic,
            "--from-beginning",
            "--isolation-level",
            "read_committed",
            // One more than expected: a duplicate must be able to show.
            "--max-messages",
            &(expected + 1).to_string(),
            "--timeout-ms",
            "15000",
            "--property",
            "print.partition=true",
        ],
        None,
    );
    let mut by_partition: std::collections::BTreeMap<i32, Vec<u64>> =
        std::collections::BTreeMap::new();
    for line in out.lines().filter(|l| !l.trim().is_empty()) {
        let (p, v) = line
            .split_once('\t')
            .unwrap_or_else(|| panic!("unexpected console-consumer line {line:?}"));
        let p: i32 = p
            .strip_prefix("Partition:")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("unexpected console-consumer line {line:?}"));
        let v: u64 = v
            .parse()
            .unwrap_or_else(|_| panic!("unexpected value in {line:?}"));
        by_partition.entry(p).or_default().push(v);
    }
    by_partition
}

/// What a read of the values `0..records` of Kafka's verifiable producer found, by partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    pub total: usize,
    pub lost: usize,
    pub duplicated: usize,
    /// Values not above the one before them in their partition.
    pub out_of_order: usize,
    pub highest: Option<u64>,
}

/// Counts what `seen` ([`committed_values`]) lost, duplicated and reordered of `0..records`.
pub fn tally(seen: &std::collections::BTreeMap<i32, Vec<u64>>, records: u64) -> Tally {
    let total: usize = seen.values().map(Vec::len).sum();
    let mut all: Vec<u64> = seen.values().flatten().copied().collect();
    all.sort_unstable();
    all.dedup();
    Tally {
        total,
        lost: (records as usize).saturating_sub(all.iter().filter(|v| **v < records).count()),
        duplicated: total - all.len(),
        out_of_order: seen
            .values()
            .map(|v| v.windows(2).filter(|w| w[1] <= w[0]).count())
            .sum(),
        highest: all.last().copied(),
    }
}
