//! The replicator under test: an `mm2.properties` written for the run, and a command line
//! started as a child process with its output going to a log file.
//!
//! Both tools read the same base configuration (clusters, the one topic, replication factors).
//! MirrorMaker 2 additionally gets the tuning its documentation recommends for throughput
//! (`tasks.max`, producer batching and compression, consumer fetch sizes; see
//! `perf/README.md`); strait gets only keys it documents, plus any `--replicator-prop`.
#![forbid(unsafe_code)]

use std::fmt::Write as _;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde::Serialize;
use strait_dataplane::batch::Compression;

/// Which replicator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Tool {
    Strait,
    /// MM2 tuned for throughput as its documentation recommends (see [`config_text`]).
    Mm2,
    /// MM2 with its defaults: only what the run needs (clusters, flow, topic, replication
    /// factors), as a new operator would start it.
    #[serde(rename = "mm2-defaults")]
    Mm2Defaults,
}

impl Tool {
    pub fn name(self) -> &'static str {
        match self {
            Tool::Strait => "strait",
            Tool::Mm2 => "mm2",
            Tool::Mm2Defaults => "mm2-defaults",
        }
    }
}

/// Inputs of the generated configuration.
#[derive(Debug, Clone)]
pub struct ConfigParams {
    pub source_alias: String,
    pub target_alias: String,
    pub source_bootstrap: String,
    pub target_bootstrap: String,
    /// The replicated topic (an exact name; it is matched as a regex, so it must not contain
    /// regex metacharacters other than `-`, `_` and `.` escaped by the caller).
    pub topic: String,
    /// The codec of the source data (MM2's producer recompresses with it).
    pub codec: Compression,
    /// MM2 `tasks.max`.
    pub mm2_tasks: u32,
    /// MM2 producer `linger.ms`.
    pub mm2_linger_ms: u64,
    /// Replication factor of every topic the replicators create (remote and internal ones).
    pub replication_factor: i16,
    /// Extra `key=value` lines appended verbatim, except that `{source}` and `{target}` in a key
    /// become the run's cluster aliases.
    pub extra: Vec<(String, String)>,
}

/// The topic name on the target under MM2's `DefaultReplicationPolicy`.
pub fn remote_topic(source_alias: &str, topic: &str) -> String {
    format!("{source_alias}.{topic}")
}

/// Escapes `.` so a topic name matches itself only, as a Java regex.
fn exact_regex(topic: &str) -> String {
    topic.replace('.', "\\\\.")
}

/// The `mm2.properties` text for `tool`.
pub fn config_text(tool: Tool, p: &ConfigParams) -> String {
    let (s, t) = (&p.source_alias, &p.target_alias);
    let mut o = String::new();
    let mut kv = |k: &str, v: &str| {
        let _ = writeln!(o, "{k} = {v}");
    };
    kv("clusters", &format!("{s}, {t}"));
    kv(&format!("{s}.bootstrap.servers"), &p.source_bootstrap);
    kv(&format!("{t}.bootstrap.servers"), &p.target_bootstrap);
    kv(&format!("{s}->{t}.enabled"), "true");
    kv(&format!("{s}->{t}.topics"), &exact_regex(&p.topic));
    // One-way: no heartbeats herder in the other direction.
    kv(&format!("{t}->{s}.emit.heartbeats.enabled"), "false");
    // 1 on the single-broker test bed, 3 on the fault clusters.
    let rf = p.replication_factor.to_string();
    for k in [
        "replication.factor",
        "checkpoints.topic.replication.factor",
        "heartbeats.topic.replication.factor",
        "offset-syncs.topic.replication.factor",
        "offset.storage.replication.factor",
        "status.storage.replication.factor",
        "config.storage.replication.factor",
    ] {
        kv(k, &rf);
    }
    kv("sync.topic.acls.enabled", "false");
    if tool == Tool::Strait {
        kv("strait.progress.topic.replication.factor", &rf);
    }
    if tool == Tool::Mm2 {
        // MM2 throughput tuning, as its documentation recommends for high volumes.
        kv("tasks.max", &p.mm2_tasks.to_string());
        kv(&format!("{t}.producer.batch.size"), "327680");
        kv(
            &format!("{t}.producer.linger.ms"),
            &p.mm2_linger_ms.to_string(),
        );
        kv(&format!("{t}.producer.compression.type"), p.codec.name());
        kv(&format!("{s}.consumer.fetch.max.bytes"), "52428800");
        kv(
            &format!("{s}.consumer.max.partition.fetch.bytes"),
            "1048576",
        );
        kv(&format!("{s}.consumer.max.poll.records"), "500");
    }
    for (k, v) in &p.extra {
        kv(&k.replace("{source}", s).replace("{target}", t), v);
    }
    o
}

/// A replicator command line; `{config}` in any argument is replaced by the config path.
#[derive(Debug, Clone, Serialize)]
pub struct CommandSpec {
    pub program: String,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
}

impl CommandSpec {
    /// Parses a whitespace-separated command line (no quoting).
    pub fn parse(line: &str) -> Result<Self> {
        let mut words = line.split_whitespace().map(str::to_string);
        let Some(program) = words.next() else {
            bail!("empty replicator command");
        };
        Ok(CommandSpec {
            program,
            args: words.collect(),
            env: Vec::new(),
        })
    }

    /// The command with `{config}` substituted, as one printable line.
    pub fn display(&self, config: &Path) -> String {
        let mut s = String::new();
        for (k, v) in &self.env {
            let _ = write!(s, "{k}='{v}' ");
        }
        s.push_str(&self.program);
        for a in self.args(config) {
            s.push(' ');
            s.push_str(&a);
        }
        s
    }

    fn args(&self, config: &Path) -> Vec<String> {
        let c = config.display().to_string();
        self.args
            .iter()
            .map(|a| a.replace("{config}", &c))
            .collect()
    }
}

/// The default command for `tool`: strait from `bin_dir` (the directory of this executable),
/// MM2 through the repository's `scripts/kafka-tool` with a sized heap.
pub fn default_command(tool: Tool, repo: &Path, bin_dir: &Path, mm2_heap: &str) -> CommandSpec {
    match tool {
        Tool::Strait => CommandSpec {
            program: bin_dir.join("strait").display().to_string(),
            args: vec!["run".into(), "--config".into(), "{config}".into()],
            env: vec![("RUST_LOG".into(), "info".into())],
        },
        Tool::Mm2 | Tool::Mm2Defaults => CommandSpec {
            program: repo.join("scripts/kafka-tool").display().to_string(),
            args: vec!["connect-mirror-maker".into(), "{config}".into()],
            env: vec![("KAFKA_HEAP_OPTS".into(), mm2_heap.to_string())],
        },
    }
}

/// A running replicator. Dropping it stops the process.
#[derive(Debug)]
pub struct Running {
    child: Option<Child>,
    pub pid: u32,
    pub log: PathBuf,
    pub command_line: String,
}

impl Running {
    /// Starts `cmd` with `config`, stdout and stderr into `log`.
    pub fn start(cmd: &CommandSpec, config: &Path, log: &Path) -> Result<Running> {
        let out = File::create(log).with_context(|| format!("creating {}", log.display()))?;
        let err = out.try_clone()?;
        let mut c = Command::new(&cmd.program);
        c.args(cmd.args(config))
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        for (k, v) in &cmd.env {
            c.env(k, v);
        }
        let child = c
            .spawn()
            .with_context(|| format!("starting the replicator: {}", cmd.display(config)))?;
        Ok(Running {
            pid: child.id(),
            child: Some(child),
            log: log.to_path_buf(),
            command_line: cmd.display(config),
        })
    }

    /// `Err` with the end of its log if the process has exited.
    pub fn check_alive(&mut self) -> Result<()> {
        let Some(child) = self.child.as_mut() else {
            bail!("the replicator was already stopped");
        };
        if let Some(status) = child.try_wait()? {
            bail!(
                "the replicator exited early ({status}); last lines of {}:\n{}",
                self.log.display(),
                tail(&self.log, 30)
            );
        }
        Ok(())
    }

    /// SIGTERM, then SIGKILL after `grace`. Returns how it ended.
    pub fn stop(&mut self, grace: Duration) -> Result<String> {
        let Some(mut child) = self.child.take() else {
            return Ok("already stopped".into());
        };
        if let Some(s) = child.try_wait()? {
            return Ok(format!("had exited: {s}"));
        }
        let _ = Command::new("kill")
            .args(["-TERM", &self.pid.to_string()])
            .status();
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Some(s) = child.try_wait()? {
                return Ok(format!("stopped: {s}"));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        child.kill()?;
        let s = child.wait()?;
        Ok(format!("killed after {} s: {s}", grace.as_secs()))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The last `n` lines of a file, for error messages.
pub fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> ConfigParams {
        ConfigParams {
            source_alias: "src1".into(),
            target_alias: "dst1".into(),
            source_bootstrap: "127.0.0.1:19092".into(),
            target_bootstrap: "127.0.0.1:29092".into(),
            topic: "bench.x-1".into(),
            codec: Compression::Zstd,
            mm2_tasks: 2,
            mm2_linger_ms: 100,
            replication_factor: 1,
            extra: vec![("a.b".into(), "c".into())],
        }
    }

    fn lookup<'a>(text: &'a str, key: &str) -> Option<&'a str> {
        text.lines().find_map(|l| {
            l.split_once(" = ")
                .filter(|(k, _)| *k == key)
                .map(|(_, v)| v)
        })
    }

    #[test]
    fn mm2_config_has_flow_topic_and_tuning() {
        let t = config_text(Tool::Mm2, &params());
        assert_eq!(lookup(&t, "clusters"), Some("src1, dst1"));
        assert_eq!(lookup(&t, "src1->dst1.enabled"), Some("true"));
        // A properties file unescapes `\\` to `\`, so the regex MM2 sees is `bench\.x-1`.
        assert_eq!(lookup(&t, "src1->dst1.topics"), Some("bench\\\\.x-1"));
        assert_eq!(
            lookup(&t, "dst1->src1.emit.heartbeats.enabled"),
            Some("false")
        );
        assert_eq!(lookup(&t, "tasks.max"), Some("2"));
        assert_eq!(lookup(&t, "dst1.producer.compression.type"), Some("zstd"));
        assert_eq!(lookup(&t, "dst1.producer.linger.ms"), Some("100"));
        assert_eq!(lookup(&t, "offset.storage.replication.factor"), Some("1"));
        assert_eq!(lookup(&t, "a.b"), Some("c"));
    }

    #[test]
    fn mm2_with_defaults_gets_no_tuning_and_aliases_fill_extra_keys() {
        let mut p = params();
        p.extra = vec![("{source}.consumer.fetch.max.bytes".into(), "9".into())];
        let t = config_text(Tool::Mm2Defaults, &p);
        assert_eq!(lookup(&t, "src1->dst1.enabled"), Some("true"));
        assert_eq!(lookup(&t, "tasks.max"), None);
        assert!(!t.contains(".producer."), "{t}");
        assert_eq!(lookup(&t, "src1.consumer.fetch.max.bytes"), Some("9"));
        assert_eq!(lookup(&t, "offset.storage.replication.factor"), Some("1"));
    }

    #[test]
    fn strait_config_has_no_connect_tuning() {
        let t = config_text(Tool::Strait, &params());
        assert_eq!(
            lookup(&t, "src1.bootstrap.servers"),
            Some("127.0.0.1:19092")
        );
        assert_eq!(lookup(&t, "tasks.max"), None);
        assert!(!t.contains(".producer."));
        assert_eq!(
            lookup(&t, "strait.progress.topic.replication.factor"),
            Some("1")
        );
        assert_eq!(lookup(&t, "a.b"), Some("c"));
    }

    #[test]
    fn commands_substitute_the_config() {
        let c = CommandSpec::parse("/bin/x run --config {config}").unwrap();
        assert_eq!(
            c.display(Path::new("/tmp/a.properties")),
            "/bin/x run --config /tmp/a.properties"
        );
        assert!(CommandSpec::parse("  ").is_err());
        assert_eq!(remote_topic("src1", "t"), "src1.t");
    }

    #[test]
    fn a_child_that_exits_is_reported_with_its_log() {
        let dir = std::env::temp_dir().join(format!("strait-bench-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("x.log");
        let cmd = CommandSpec {
            program: "sh".into(),
            args: vec!["-c".into(), "echo boom {config}; exit 3".into()],
            env: vec![],
        };
        let mut r = Running::start(&cmd, Path::new("cfg"), &log).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        let err = loop {
            match r.check_alive() {
                Err(e) => break e.to_string(),
                Ok(()) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                Ok(()) => panic!("the child did not exit"),
            }
        };
        assert!(err.contains("boom cfg"), "{err}");
        let mut long = Running::start(
            &CommandSpec::parse("sleep 30").unwrap(),
            Path::new("cfg"),
            &log,
        )
        .unwrap();
        long.check_alive().unwrap();
        let how = long.stop(Duration::from_secs(5)).unwrap();
        assert!(how.starts_with("stopped"), "{how}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
