//! One measured run per replicator: topics, load, the replicator as a child process, its CPU
//! and memory, the consumer, the result entry, and clean-up.
#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};
use serde::Serialize;
use strait_dataplane::io::IoBackend;

use crate::consumer::{self, ConsumeSpec, Monitor};
use crate::kafka::{self, now_us};
use crate::machine::{self, Machine};
use crate::payload::RecordShape;
use crate::procfs::{self, TreeSampler};
use crate::producer::{self, ProduceReport, ProduceSpec};
use crate::replicator::{self, CommandSpec, ConfigParams, Running, Tool};
use crate::scenario::{Mode, Scenario};
use crate::stats::{GIB, SecondPoint};

/// Everything a run needs besides the scenario.
#[derive(Debug, Clone)]
pub struct RunEnv {
    /// The source bootstrap of the bench's own clients (generator, admin).
    pub source: String,
    /// The source bootstrap in the replicators' `mm2.properties` (another listener of the same
    /// cluster, e.g. behind Toxiproxy).
    pub replicator_source: String,
    pub target: String,
    /// Test-bed names of the clusters, for their brokers' CPU (`source`, `fsource`, ...).
    pub source_cluster: String,
    pub target_cluster: String,
    /// Replication factor of the run's topics (the bench's and the replicators').
    pub replication_factor: i16,
    pub repo: PathBuf,
    pub testbed_dir: PathBuf,
    /// Configs and logs of this run.
    pub work_dir: PathBuf,
    pub backend: IoBackend,
    pub mm2_tasks: u32,
    pub keep_topics: bool,
    pub progress: bool,
    /// After a strait catch-up run, time `strait verify --full` over the copy with this binary.
    pub verify_with: Option<PathBuf>,
}

/// One replicator's result in a scenario.
#[derive(Debug, Clone, Serialize)]
pub struct Entry {
    pub tool: Tool,
    /// The scenario variant (the codec).
    pub variant: String,
    /// Every expected record arrived.
    pub complete: bool,
    pub error: Option<String>,
    /// Key + value + header bytes replicated, GiB.
    pub gib: f64,
    /// Distinct measured records that arrived.
    pub records: u64,
    /// catch-up: replicator launch → last record; steady: first measured send → last record.
    pub wall_s: f64,
    /// Replicator CPU (user + sys, whole process tree) from launch to the last record.
    pub cpu_s: f64,
    /// Replicator peak RSS (VmHWM), MiB.
    pub peak_rss_mib: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
    pub mean_ms: f64,
    /// Launch → first measured record on the target.
    pub startup_s: f64,
    /// First → last measured record on the target.
    pub copy_s: f64,
    /// Replicator CPU between first and last measured record.
    pub cpu_copy_s: f64,
    /// `cpu_copy_s / gib`.
    pub cpu_s_per_gib: f64,
    /// `gib / copy_s`, MiB/s.
    pub mib_per_s: f64,
    pub records_per_s: f64,
    pub duplicates: u64,
    pub unexpected: u64,
    /// Batch bytes read from the target (compressed), MiB.
    pub target_wire_mib: f64,
    pub target_batches: u64,
    pub cpu_breakdown: CpuBreakdown,
    pub generator: ProduceReport,
    pub replicator: ReplicatorInfo,
    pub series: Vec<SecondPoint>,
    /// `(quantile, ms)` points.
    pub latency_cdf: Vec<(f64, f64)>,
    /// `strait verify --full` over the copy, after the run (`--verify`, strait catch-up only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verify: Option<VerifyRun>,
}

/// One `strait verify --full` over a run's copy.
#[derive(Debug, Clone, Default, Serialize)]
pub struct VerifyRun {
    /// Launch to exit.
    pub secs: f64,
    /// It exited 0: every compared record matched.
    pub ok: bool,
    /// Records it matched, every partition.
    pub matched: u64,
    /// The copy's GiB (the entry's `gib`) over `secs`, MiB/s.
    pub mib_per_s: f64,
    pub error: Option<String>,
}

/// Runs `strait verify --full --json` on `config` and times it (`mib_per_s` is set once the
/// copy's size is known).
fn verify_copy(strait: &Path, config: &Path) -> VerifyRun {
    let started = Instant::now();
    let out = Command::new(strait)
        .args(["verify", "--full", "--json", "--config"])
        .arg(config)
        .output();
    let secs = started.elapsed().as_secs_f64();
    let out = match out {
        Ok(o) => o,
        Err(e) => {
            return VerifyRun {
                secs,
                error: Some(format!("cannot run {}: {e}", strait.display())),
                ..VerifyRun::default()
            };
        }
    };
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    let matched = report["partitions"].as_array().map_or(0, |ps| {
        ps.iter().filter_map(|p| p["matched"].as_u64()).sum()
    });
    let ok = out.status.success();
    VerifyRun {
        secs,
        ok,
        matched,
        mib_per_s: 0.0,
        error: (!ok).then(|| {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let tail: Vec<&str> = stderr.lines().rev().take(5).collect();
            format!("exit {:?}: {}", out.status.code(), tail.join(" | "))
        }),
    }
}

/// CPU seconds of each process during the measured window (launch → last record).
#[derive(Debug, Clone, Default, Serialize)]
pub struct CpuBreakdown {
    pub window_s: f64,
    pub replicator_s: f64,
    pub source_broker_s: Option<f64>,
    pub target_broker_s: Option<f64>,
    /// This harness (consumer, and the generator in steady mode).
    pub bench_s: f64,
    /// Every CPU of the machine, busy time (includes work unrelated to the run).
    pub machine_busy_s: f64,
    pub machine_cores: usize,
}

/// How the replicator was run.
#[derive(Debug, Clone, Serialize)]
pub struct ReplicatorInfo {
    pub command: String,
    pub config: String,
    pub log: String,
    pub stop: String,
}

/// A result file: one scenario, every tool.
#[derive(Debug, Clone, Serialize)]
pub struct ResultFile {
    pub scenario: String,
    /// UTC, RFC 3339.
    pub date: String,
    pub commit: String,
    pub command: String,
    pub machine: Machine,
    pub params: Scenario,
    /// The bootstraps used and the latency added between the replicators and the source.
    pub link: crate::link::LinkInfo,
    pub entries: Vec<Entry>,
}

struct Cpu {
    ticks_per_s: u64,
    /// Every node of each cluster.
    source: Vec<u32>,
    target: Vec<u32>,
}

#[derive(Clone, Copy)]
struct CpuSnap {
    at_us: u64,
    source: Option<f64>,
    target: Option<f64>,
    bench: f64,
    machine_busy: f64,
}

impl Cpu {
    fn snap(&self) -> CpuSnap {
        let t = self.ticks_per_s;
        // `None` unless every node answered: a partial sum would read as a quiet cluster.
        let nodes = |pids: &[u32]| -> Option<f64> {
            if pids.is_empty() {
                return None;
            }
            pids.iter().map(|&p| procfs::process_cpu_s(p, t)).sum()
        };
        CpuSnap {
            at_us: now_us(),
            source: nodes(&self.source),
            target: nodes(&self.target),
            bench: procfs::process_cpu_s(std::process::id(), t).unwrap_or(0.0),
            machine_busy: procfs::machine_ticks().map_or(0.0, |(b, _)| b as f64 / t as f64),
        }
    }
}

struct RunMonitor<'a> {
    running: &'a mut Running,
    sampler: TreeSampler,
    cpu_at_first: Option<f64>,
    last: procfs::TreeSample,
    go: Option<Arc<AtomicBool>>,
    /// Set by the generator thread when it fails: no more records will come.
    generator_error: Arc<Mutex<Option<String>>>,
}

impl Monitor for RunMonitor<'_> {
    fn sample(&mut self) -> Result<(f64, f64)> {
        if let Some(e) = self.generator_error.lock().ok().and_then(|g| g.clone()) {
            anyhow::bail!("the generator failed: {e}");
        }
        self.running.check_alive()?;
        self.last = self.sampler.sample();
        Ok((self.last.cpu_s, self.last.rss_mib))
    }

    fn first_arrival(&mut self) {
        self.last = self.sampler.sample();
        self.cpu_at_first = Some(self.last.cpu_s);
    }

    fn all_partitions_live(&mut self) {
        if let Some(go) = &self.go {
            go.store(true, Ordering::Relaxed);
        }
    }
}

/// A short id that names this run's topics and aliases.
pub fn run_id() -> String {
    let x = now_us() ^ (u64::from(std::process::id()) << 40);
    format!("{:08x}", x & 0xffff_ffff)
}

fn produce_spec(s: &Scenario, env: &RunEnv, topic: &str, warmup: bool) -> ProduceSpec {
    ProduceSpec {
        bootstrap: env.source.clone(),
        topic: topic.to_string(),
        records: s.records,
        shape: RecordShape::new(s.value_bytes, s.key_bytes, s.key_cardinality, s.headers),
        codec: s.codec,
        batch_bytes: s.batch_bytes,
        linger_ms: s.linger_ms,
        rate: if warmup { None } else { s.rate },
        acks: -1,
        max_in_flight: 5,
        max_request_bytes: 4 << 20,
        warmup,
        progress: env.progress,
        backend: env.backend,
    }
}

/// Writes dirty pages back before a replicator starts. Without this, the preload and earlier
/// runs leave gigabytes dirty, and the kernel throttles the target broker's writes to the disk's
/// writeback rate part-way through the run (seen here: 450 MiB/s falling to 23 MiB/s at about
/// 1.6 GB dirty), so a result would depend on what ran before it rather than on the replicator.
fn settle_page_cache() {
    let t0 = Instant::now();
    match Command::new("sync").status() {
        Ok(s) if s.success() => eprintln!(
            "strait-bench: flushed dirty pages before the replicator starts in {:.1} s",
            t0.elapsed().as_secs_f64()
        ),
        Ok(s) => eprintln!(
            "strait-bench: warning: `sync` exited with {s}; dirty pages may throttle this run"
        ),
        Err(e) => eprintln!(
            "strait-bench: warning: cannot run `sync` ({e}); dirty pages may throttle this run"
        ),
    }
}

/// Runs `scenario` against `tool`. Errors before the replicator starts are returned; a
/// replicator that fails or times out gives an entry with `complete: false` and the error.
#[allow(clippy::too_many_lines)] // bench code, one measurement told in order: not split yet
pub fn run_one(
    scenario: &Scenario,
    variant: &str,
    tool: Tool,
    command: &CommandSpec,
    extra_props: &[(String, String)],
    env: &RunEnv,
) -> Result<Entry> {
    let id = run_id();
    let topic = format!("bench-{}-{}-{id}", scenario.name, tool.name());
    let (src_alias, dst_alias) = (format!("src{id}"), format!("dst{id}"));
    let remote = replicator::remote_topic(&src_alias, &topic);
    let dir = env
        .work_dir
        .join(format!("{}-{variant}-{}", scenario.name, tool.name()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    eprintln!(
        "strait-bench: {} [{variant}] with {}: topic {topic} → {remote}",
        scenario.name,
        tool.name()
    );

    let source_admin = kafka::admin("source", &env.source, env.backend)?;
    let target_admin = kafka::admin("target", &env.target, env.backend)?;
    strait_dataplane::io::block_on(env.backend, async {
        kafka::create_topic(
            &source_admin,
            &topic,
            scenario.partitions,
            env.replication_factor,
            &[],
        )
        .await
    })??;

    // Catch-up: all the data is there before the replicator starts.
    let mut preload = None;
    if scenario.mode == Mode::CatchUp {
        let spec = produce_spec(scenario, env, &topic, false);
        let r = strait_dataplane::io::block_on(env.backend, producer::produce(&spec, None))??;
        eprintln!(
            "strait-bench: preloaded {} records ({:.0} MiB) in {:.1} s: {:.0} records/s, {:.1} MiB/s",
            r.records,
            r.bytes as f64 / crate::stats::MIB,
            r.secs,
            r.records_per_s,
            r.mib_per_s
        );
        preload = Some(r);
    }

    let params = ConfigParams {
        source_alias: src_alias.clone(),
        target_alias: dst_alias.clone(),
        source_bootstrap: env.replicator_source.clone(),
        target_bootstrap: env.target.clone(),
        topic: topic.clone(),
        codec: scenario.codec,
        mm2_tasks: env.mm2_tasks,
        mm2_linger_ms: scenario.mm2_linger_ms,
        replication_factor: env.replication_factor,
        extra: extra_props.to_vec(),
    };
    let config_text = replicator::config_text(tool, &params);
    let config_path = dir.join(format!("{}.properties", tool.name()));
    std::fs::write(&config_path, &config_text)?;
    let log = dir.join(format!("{}.log", tool.name()));

    settle_page_cache();

    let cpu = Cpu {
        ticks_per_s: procfs::clock_ticks_per_second(),
        source: machine::broker_pids(&env.testbed_dir, &env.source_cluster),
        target: machine::broker_pids(&env.testbed_dir, &env.target_cluster),
    };
    let before = cpu.snap();
    let launch_us = now_us();
    let mut running = Running::start(command, &config_path, &log)?;
    eprintln!(
        "strait-bench: started {} (pid {}), log {}",
        tool.name(),
        running.pid,
        log.display()
    );

    // Steady: a warm-up trickle until every partition is live, then the measured load, from
    // another thread so that generating never waits on consuming.
    let go = Arc::new(AtomicBool::new(false));
    let generator_error: Arc<Mutex<Option<String>>> = Arc::new(Mutex::new(None));
    let producer_thread = if scenario.mode == Mode::Steady {
        let mut warm = produce_spec(scenario, env, &topic, true);
        warm.records = u64::MAX >> 2;
        warm.rate = Some(f64::from(scenario.partitions.max(1)) * 20.0);
        warm.linger_ms = 0;
        warm.progress = false;
        let measured = produce_spec(scenario, env, &topic, false);
        let (go2, backend, gen_err) = (go.clone(), env.backend, generator_error.clone());
        Some(std::thread::Builder::new().name("generator".into()).spawn(
            move || -> Result<ProduceReport> {
                let r = strait_dataplane::io::block_on(backend, async move {
                    producer::produce(&warm, Some(go2)).await?;
                    producer::produce(&measured, None).await
                })
                .map_err(anyhow::Error::from)
                .and_then(|r| r);
                if let (Err(e), Ok(mut slot)) = (&r, gen_err.lock()) {
                    *slot = Some(format!("{e:#}"));
                }
                r
            },
        )?)
    } else {
        None
    };

    let spec = ConsumeSpec {
        bootstrap: env.target.clone(),
        topic: remote.clone(),
        partitions: scenario.partitions,
        expected: scenario.records,
        timeout_ms: scenario.timeout_s * 1000,
        stall_timeout_ms: scenario.stall_timeout_s * 1000,
        fetch_max_bytes: 64 << 20,
        partition_max_bytes: 1 << 20,
        max_wait_ms: 100,
        start_us: launch_us,
        max_series_s: 7200,
        backend: env.backend,
    };
    let sampler = TreeSampler::new(running.pid);
    let mut monitor = RunMonitor {
        running: &mut running,
        sampler,
        cpu_at_first: None,
        last: Default::default(),
        go: (scenario.mode == Mode::Steady).then(|| go.clone()),
        generator_error: generator_error.clone(),
    };
    let consumed =
        strait_dataplane::io::block_on(env.backend, consumer::consume(&spec, &mut monitor));
    let final_sample = monitor.sampler.sample();
    let cpu_at_first = monitor.cpu_at_first;
    let after = cpu.snap();
    // Whatever happened, the generator must stop before the replicator does.
    go.store(true, Ordering::Relaxed);
    let stop = running
        .stop(Duration::from_secs(20))
        .unwrap_or_else(|e| format!("stop failed: {e}"));
    // The stop stored the final progress: verify compares everything copied.
    // (`summary` prints its result with the run's.)
    let verify = match (&env.verify_with, tool, scenario.mode) {
        (Some(strait), Tool::Strait, Mode::CatchUp) => Some(verify_copy(strait, &config_path)),
        _ => None,
    };
    let generator = match producer_thread {
        Some(h) => match h.join() {
            Ok(r) => Some(r),
            Err(_) => Some(Err(anyhow!("the generator thread panicked"))),
        },
        None => preload.map(Ok),
    };

    if !env.keep_topics
        && let Err(e) = cleanup(&source_admin, &target_admin, &id, env.backend)
    {
        eprintln!("strait-bench: warning: cleaning up topics of run {id}: {e:#}");
    }

    let replicator_info = ReplicatorInfo {
        command: running.command_line.clone(),
        config: config_text,
        log: log.display().to_string(),
        stop,
    };
    let (generator, gen_err) = match generator {
        Some(Ok(g)) => (g, None),
        Some(Err(e)) => (ProduceReport::default(), Some(format!("generator: {e:#}"))),
        None => (ProduceReport::default(), None),
    };
    let c = match consumed {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => {
            return Ok(failed_entry(
                tool,
                variant,
                format!("{e:#}"),
                generator,
                replicator_info,
                final_sample,
            ));
        }
        Err(e) => {
            return Ok(failed_entry(
                tool,
                variant,
                format!("runtime: {e}"),
                generator,
                replicator_info,
                final_sample,
            ));
        }
    };
    let gib = c.bytes as f64 / GIB;
    let last = c.last_arrival_us.unwrap_or(after.at_us);
    let first = c.first_arrival_us.unwrap_or(last);
    let wall_start = match scenario.mode {
        Mode::CatchUp => launch_us,
        Mode::Steady => generator.started_us.max(launch_us),
    };
    let wall_s = secs(last.saturating_sub(wall_start));
    let copy_s = secs(last.saturating_sub(first));
    let cpu_copy_s = (final_sample.cpu_s - cpu_at_first.unwrap_or(final_sample.cpu_s)).max(0.0);
    let lat = c.latency_summary();
    let window_s = secs(after.at_us.saturating_sub(before.at_us));
    let diff = |a: Option<f64>, b: Option<f64>| Some(a? - b?);
    let mut error = gen_err;
    if !c.complete {
        error = Some(match (c.stop_reason.clone(), error) {
            (Some(r), Some(g)) => format!("{r}; {g}"),
            (Some(r), None) => r,
            (None, Some(g)) => g,
            (None, None) => "incomplete".to_string(),
        });
    }
    Ok(Entry {
        tool,
        variant: variant.to_string(),
        complete: c.complete && error.is_none(),
        error,
        gib,
        records: c.distinct,
        wall_s,
        cpu_s: final_sample.cpu_s,
        peak_rss_mib: final_sample.hwm_mib,
        p50_ms: lat.p50_ms,
        p99_ms: lat.p99_ms,
        p999_ms: lat.p999_ms,
        max_ms: lat.max_ms,
        mean_ms: lat.mean_ms,
        startup_s: secs(first.saturating_sub(launch_us)),
        copy_s,
        cpu_copy_s,
        cpu_s_per_gib: if gib > 0.0 { cpu_copy_s / gib } else { 0.0 },
        mib_per_s: if copy_s > 0.0 {
            gib * 1024.0 / copy_s
        } else {
            0.0
        },
        records_per_s: if copy_s > 0.0 {
            c.distinct as f64 / copy_s
        } else {
            0.0
        },
        duplicates: c.duplicates,
        unexpected: c.unexpected,
        target_wire_mib: c.wire_bytes as f64 / crate::stats::MIB,
        target_batches: c.batches,
        cpu_breakdown: CpuBreakdown {
            window_s,
            replicator_s: final_sample.cpu_s,
            source_broker_s: diff(after.source, before.source),
            target_broker_s: diff(after.target, before.target),
            bench_s: after.bench - before.bench,
            machine_busy_s: after.machine_busy - before.machine_busy,
            machine_cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        },
        generator,
        replicator: replicator_info,
        latency_cdf: c.latency.cdf(),
        series: c.series,
        verify: verify.map(|v| VerifyRun {
            mib_per_s: if v.secs > 0.0 {
                gib * 1024.0 / v.secs
            } else {
                0.0
            },
            ..v
        }),
    })
}

fn failed_entry(
    tool: Tool,
    variant: &str,
    error: String,
    generator: ProduceReport,
    replicator: ReplicatorInfo,
    sample: procfs::TreeSample,
) -> Entry {
    eprintln!("strait-bench: {} failed: {error}", tool.name());
    Entry {
        tool,
        variant: variant.to_string(),
        complete: false,
        error: Some(error),
        gib: 0.0,
        records: 0,
        wall_s: 0.0,
        cpu_s: sample.cpu_s,
        peak_rss_mib: sample.hwm_mib,
        p50_ms: 0.0,
        p99_ms: 0.0,
        p999_ms: 0.0,
        max_ms: 0.0,
        mean_ms: 0.0,
        startup_s: 0.0,
        copy_s: 0.0,
        cpu_copy_s: 0.0,
        cpu_s_per_gib: 0.0,
        mib_per_s: 0.0,
        records_per_s: 0.0,
        duplicates: 0,
        unexpected: 0,
        target_wire_mib: 0.0,
        target_batches: 0,
        cpu_breakdown: CpuBreakdown::default(),
        generator,
        replicator,
        series: Vec::new(),
        latency_cdf: Vec::new(),
        verify: None,
    }
}

fn secs(us: u64) -> f64 {
    us as f64 / 1e6
}

/// Deletes every topic of run `id` on both clusters (the bench's own topics and the
/// replicator's internal ones, whose names carry the run's cluster aliases).
fn cleanup(
    source: &strait_control::cluster::Cluster,
    target: &strait_control::cluster::Cluster,
    id: &str,
    backend: IoBackend,
) -> Result<()> {
    strait_dataplane::io::block_on(backend, async {
        for c in [source, target] {
            let names: Vec<String> = kafka::list_topics(c)
                .await?
                .into_iter()
                .filter(|n| n.contains(id))
                .collect();
            kafka::delete_topics(c, &names).await?;
        }
        Ok::<_, anyhow::Error>(())
    })?
}

/// One line per entry, for humans.
pub fn summary(e: &Entry) -> String {
    let verify = e.verify.as_ref().map_or(String::new(), |v| {
        format!(
            "\n  strait verify --full: {} in {:.1} s ({} records matched, {:.1} MiB/s; the copy took {:.1} s from launch){}",
            if v.ok { "OK" } else { "FAILED" },
            v.secs,
            v.matched,
            v.mib_per_s,
            e.wall_s,
            v.error.as_deref().map(|e| format!(": {e}")).unwrap_or_default()
        )
    });
    let status = if e.complete {
        "ok".to_string()
    } else {
        format!("INCOMPLETE: {}", e.error.as_deref().unwrap_or("?"))
    };
    let b = &e.cpu_breakdown;
    let opt = |v: Option<f64>| v.map_or("?".into(), |v| format!("{v:.1}"));
    format!(
        "{tool:>6} [{var}] {status}\n  {rec} records, {gib:.3} GiB in {wall:.1} s (startup {st:.1} s, copy {copy:.1} s, {mibs:.1} MiB/s)\n  replicator CPU {cpu:.1} s total, {cpc:.1} s while copying ({cpg:.1} s/GiB), peak RSS {rss:.0} MiB\n  latency p50 {p50:.1} ms, p99 {p99:.1} ms, p99.9 {p999:.1} ms, max {max:.1} ms; duplicates {dup}\n  CPU over {win:.1} s on {cores} cores: replicator {rep:.1} s, source broker {sb} s, target broker {tb} s, bench {bench:.1} s, whole machine {mach:.1} s",
        tool = e.tool.name(),
        var = e.variant,
        rec = e.records,
        gib = e.gib,
        wall = e.wall_s,
        st = e.startup_s,
        copy = e.copy_s,
        mibs = e.mib_per_s,
        cpu = e.cpu_s,
        cpc = e.cpu_copy_s,
        cpg = e.cpu_s_per_gib,
        rss = e.peak_rss_mib,
        p50 = e.p50_ms,
        p99 = e.p99_ms,
        p999 = e.p999_ms,
        max = e.max_ms,
        dup = e.duplicates,
        win = b.window_s,
        cores = b.machine_cores,
        rep = b.replicator_s,
        sb = opt(b.source_broker_s),
        tb = opt(b.target_broker_s),
        bench = b.bench_s,
        mach = b.machine_busy_s,
    ) + &verify
}

/// UTC now as RFC 3339 (seconds), without a date crate.
pub fn utc_now() -> String {
    let s = now_us() / 1_000_000;
    let (days, rem) = (s / 86_400, s % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Days since 1970-01-01 → (year, month, day), Howard Hinnant's algorithm.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// The directory of the running executable (where `strait` is built next to it).
pub fn bin_dir() -> Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let dir = exe
        .parent()
        .ok_or_else(|| anyhow!("{} has no parent directory", exe.display()))?;
    // Integration tests run from target/<profile>/deps.
    Ok(if dir.ends_with("deps") {
        dir.parent().unwrap_or(dir).to_path_buf()
    } else {
        dir.to_path_buf()
    })
}

/// Writes `file` as pretty JSON.
pub fn write_result(file: &ResultFile, path: &Path) -> Result<()> {
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d)?;
    }
    let text = serde_json::to_string_pretty(file)?;
    std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(19_723), (2024, 1, 1));
        assert_eq!(civil_from_days(20_513), (2026, 3, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }

    #[test]
    fn run_ids_are_short_hex() {
        let id = run_id();
        assert_eq!(id.len(), 8);
        assert!(id.chars().all(|c| c.is_ascii_hexdigit()));
    }
}
