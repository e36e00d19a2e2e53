//! `strait-bench load`: measure a replication path, whatever replicates it (strait, MirrorMaker
//! 2, Cluster Linking). It reads the clusters' connection and security settings from the same
//! `mm2.properties` with strait's parser, creates a test topic on the flow's source (or uses one
//! it is told to), produces stamped records at a fixed rate or flat out, reads the remote topic
//! on the target, and reports end-to-end latency over time, throughput, and records lost,
//! duplicated and out of order. It never starts a replicator, never writes to a topic it did not
//! create unless `--use-existing-topic` says so, and removes what it created unless `--keep`.
//!
//! Clients: the source admin client's settings create, write and delete the test topic (no
//! MirrorMaker client produces to the source; `strait smoke` does the same), the target
//! consumer's read the remote topic, the target admin's delete it. `--set` adds lines to the
//! file as read, e.g. to give the load test a principal of its own.
#![forbid(unsafe_code)]

pub mod consume;
pub mod output;
pub mod produce;
pub mod series;
pub mod stamp;
pub mod state;
pub mod track;

mod run;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use strait_control::config::{self, ConfigEnv, Mm2Config, SystemEnv};
use strait_dataplane::batch::Compression;

pub use run::run;

/// `strait-bench load` options.
#[derive(clap::Args, Debug, Clone)]
pub struct LoadArgs {
    /// The mm2.properties whose clusters (bootstrap servers, TLS, SASL) the test uses.
    #[arg(long)]
    pub config: PathBuf,
    /// The flow to measure, SOURCE->TARGET (default: the only enabled flow).
    #[arg(long)]
    pub flow: Option<String>,
    /// A `KEY=VALUE` line added to the end of the file as read (repeatable; the last value of a
    /// key wins), e.g. the load test's own principal:
    /// `--set 'A.sasl.jaas.config=...ScramLoginModule required username="loader" password="...";'`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// The test topic on the source (default `strait-load.<time>-<random>`). The flow must
    /// replicate it.
    #[arg(long)]
    pub topic: Option<String>,
    /// Partitions of the test topic created.
    #[arg(long, default_value_t = 3)]
    pub partitions: i32,
    /// Replication factor of the test topic created; -1: the broker's default.
    #[arg(long, default_value_t = -1, allow_hyphen_values = true)]
    pub replication_factor: i16,
    /// Write to --topic although this run did not create it (it is then never deleted).
    #[arg(long)]
    pub use_existing_topic: bool,
    /// Keep the test topic and its remote copy at the end (by default both are deleted).
    #[arg(long)]
    pub keep: bool,
    /// Records per second, all partitions together; 0: flat out.
    #[arg(long, default_value_t = 1000.0)]
    pub rate: f64,
    /// Seconds of production (unless --records).
    #[arg(long, default_value_t = 60)]
    pub duration_s: u64,
    /// Records to produce in all, instead of --duration-s.
    #[arg(long)]
    pub records: Option<u64>,
    /// Bytes of each value (the 32-byte stamp, then filler).
    #[arg(long, default_value_t = 1024)]
    pub record_size: usize,
    /// Bytes of each key; 0: no keys.
    #[arg(long, default_value_t = 0)]
    pub key_size: usize,
    /// Distinct keys, cycled through (with --key-size).
    #[arg(long, default_value_t = 1000)]
    pub keys: u64,
    /// Headers per record (`h0`, `h1`, ..., 8-byte values).
    #[arg(long, default_value_t = 0)]
    pub headers: usize,
    /// none, gzip, snappy, lz4 or zstd.
    #[arg(long, default_value = "none")]
    pub compression: String,
    /// Largest batch, uncompressed bytes of records.
    #[arg(long, default_value_t = 64 * 1024)]
    pub batch_bytes: usize,
    /// After production ends, how long to wait for the records still missing before they
    /// count as lost.
    #[arg(long, default_value_t = 30)]
    pub drain_timeout_s: u64,
    /// How long to wait for the replicator to create the remote topic before producing.
    #[arg(long, default_value_t = 120)]
    pub remote_wait_s: u64,
    /// Length of the intervals of the series (latency and throughput over time), seconds.
    #[arg(long, default_value_t = 1.0)]
    pub interval_s: f64,
    /// Write the result as JSON here, and the series next to it (`<stem>.csv`,
    /// `<stem>-latency.svg`, `<stem>-throughput.svg`).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Duplicates do not fail the run (an at-least-once replicator makes some on restarts).
    #[arg(long)]
    pub allow_duplicates: bool,
}

/// The file's largest batch (Kafka's default `max.message.bytes` less some room).
const MAX_BATCH_BYTES: usize = 1_000_000;

impl LoadArgs {
    fn validate(&self) -> Result<Compression> {
        if !(self.rate >= 0.0 && self.rate.is_finite()) {
            bail!("--rate {}: records per second, 0 for flat out", self.rate);
        }
        if self.partitions < 1 {
            bail!("--partitions {}: at least 1", self.partitions);
        }
        if self.batch_bytes == 0 || self.batch_bytes > MAX_BATCH_BYTES {
            bail!("--batch-bytes {}: 1..={MAX_BATCH_BYTES}", self.batch_bytes);
        }
        if self.record_size + self.key_size > self.batch_bytes {
            bail!(
                "--record-size {} and --key-size {} do not fit one batch of --batch-bytes {}",
                self.record_size,
                self.key_size,
                self.batch_bytes
            );
        }
        if self.record_size < stamp::STAMP_LEN {
            bail!(
                "--record-size {}: at least {} (the stamp)",
                self.record_size,
                stamp::STAMP_LEN
            );
        }
        if !(self.interval_s >= 0.001 && self.interval_s.is_finite()) {
            bail!("--interval-s {}: at least 0.001", self.interval_s);
        }
        if self.records == Some(0) || (self.records.is_none() && self.duration_s == 0) {
            bail!("nothing to produce: give --records or --duration-s above 0");
        }
        parse_compression(&self.compression)
    }
}

/// `--compression`: every codec strait's batch builder writes.
pub fn parse_compression(name: &str) -> Result<Compression> {
    Compression::ALL
        .into_iter()
        .find(|c| c.name() == name)
        .with_context(|| {
            format!("--compression {name}: expected one of none, gzip, snappy, lz4, zstd")
        })
}

/// The file with `--set` lines appended, as strait's parser reads it.
struct WithLines {
    path: PathBuf,
    lines: String,
}

impl ConfigEnv for WithLines {
    fn env_var(&self, name: &str) -> Option<String> {
        SystemEnv.env_var(name)
    }

    fn read_file(&self, path: &Path, max_bytes: u64) -> std::io::Result<Vec<u8>> {
        let mut bytes = SystemEnv.read_file(path, max_bytes)?;
        if path == self.path {
            bytes.push(b'\n');
            bytes.extend_from_slice(self.lines.as_bytes());
        }
        Ok(bytes)
    }
}

/// Loads `path` with the `--set` lines, by strait's rules (errors name key and line).
pub fn load_config(path: &Path, set: &[String]) -> Result<Mm2Config> {
    for s in set {
        if !s.contains('=') || s.contains('\n') {
            bail!("--set {s:?}: expected one KEY=VALUE line");
        }
    }
    let env = WithLines {
        path: path.to_path_buf(),
        lines: set.iter().map(|s| format!("{s}\n")).collect(),
    };
    config::load_with(path, &env).map_err(|e| anyhow::anyhow!("{}:\n{e}", path.display()))
}
