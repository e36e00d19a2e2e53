//! `strait-bench`: produce, consume, run a scenario against strait and MirrorMaker 2, and
//! write the results table. `strait-bench help` lists the commands.
#![forbid(unsafe_code)]
#![warn(clippy::too_many_lines)]

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::{Args, Parser, Subcommand};
use strait_bench::consumer::{self, ConsumeSpec, NoMonitor};
use strait_bench::kafka::{self, now_us};
use strait_bench::machine::{self, Machine};
use strait_bench::payload::RecordShape;
use strait_bench::producer::{self, ProduceSpec};
use strait_bench::replicator::{self, CommandSpec, Tool};
use strait_bench::run::{self, ResultFile, RunEnv};
use strait_bench::scenario::{self, Scenario};
use strait_bench::stats::MIB;
use strait_dataplane::io::{IoBackend, IoChoice, select_backend};

#[derive(Parser)]
#[command(
    name = "strait-bench",
    about = "Load generator and strait-vs-MirrorMaker 2 harness"
)]
struct Cli {
    /// IO backend of the bench's own clients: auto, uring or epoll.
    #[arg(long, global = true, default_value = "auto")]
    io: String,
    /// Source cluster bootstrap (default: the test bed's).
    #[arg(long, global = true)]
    source: Option<String>,
    /// Target cluster bootstrap (default: the test bed's).
    #[arg(long, global = true)]
    target: Option<String>,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Produce records to the source cluster, at a fixed rate or flat out.
    Produce(ProduceArgs),
    /// Read a topic on the target cluster and report latency and throughput.
    Consume(ConsumeArgs),
    /// Run a scenario against one or more replicators and write a JSON result.
    Run(Box<RunArgs>),
    /// Regenerate perf/RESULTS.md from the JSON results.
    Report(ReportArgs),
    /// Rewrite the generated blocks of README.md and perf/README.md from
    /// tests/faults/RESULTS.md and perf/results/*.json (scripts/readme-tables).
    Readme(ReadmeArgs),
    /// strait as a group of instances under a fixed-rate load: rebalance time and per-partition
    /// stall when a member joins, leaves (SIGTERM) and is killed (SIGKILL).
    Group(GroupArgs),
    /// Load-test a replication path (strait, MirrorMaker 2, Cluster Linking: whatever runs):
    /// stamped records into a test topic on the flow's source, read back from the remote topic
    /// on the target; latency, throughput, loss and duplicates. Exit 3 when records were lost
    /// or duplicated.
    Load(Box<strait_bench::load::LoadArgs>),
    /// What restoring the stored exact offset mappings adds to start-up: many partitions'
    /// progress with mappings of chosen sizes written to the target, then read back as
    /// `strait run` reads it at start (without a mapping: the baseline).
    Restore(RestoreArgs),
    /// The CPU floor of a forwarder: N bytes over loopback through a relay thread that does
    /// read()/write() through a user-space buffer, or splice(2) through a pipe; the relay
    /// thread's own CPU per GiB. No Kafka involved.
    Relay(RelayArgs),
}

#[derive(Args)]
struct RelayArgs {
    /// Bytes through each relay per round.
    #[arg(long, default_value_t = 1 << 30)]
    bytes: u64,
    /// read-write, splice or both.
    #[arg(long, default_value = "both")]
    mode: String,
    /// Rounds; each round runs every mode once, alternating.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// The read-write relay's buffer, the splice relay's pipe capacity (and bytes per call),
    /// the sender's write size.
    #[arg(long, default_value_t = 64 << 10)]
    buffer_bytes: usize,
    /// Write the JSON result here.
    #[arg(long)]
    json: Option<PathBuf>,
}

#[derive(Args)]
struct RestoreArgs {
    #[arg(long, default_value_t = 10_000)]
    partitions: usize,
    /// Runs per partition, comma-separated (0: progress without a mapping).
    #[arg(long, default_value = "0,1,200")]
    runs: String,
    /// Read-backs per shape.
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Where the JSON result goes (default perf/results/restore/<date>-restore.json).
    #[arg(long)]
    out: Option<PathBuf>,
}

#[derive(Args)]
struct ReadmeArgs {
    /// Change nothing; fail when a block differs from what the result files give.
    #[arg(long)]
    check: bool,
}

#[derive(Args)]
struct GroupArgs {
    /// Members at the largest: the run starts INSTANCES - 1, one joins, one leaves, one is
    /// killed.
    #[arg(long, default_value_t = 3)]
    instances: u32,
    #[arg(long, default_value_t = 12)]
    partitions: u32,
    /// Records per second, all partitions together.
    #[arg(long, default_value_t = 2_000.0)]
    rate: f64,
    #[arg(long, default_value_t = 1024)]
    value_bytes: usize,
    /// Seconds of load after each rebalance, before the next event.
    #[arg(long, default_value_t = 15)]
    settle_s: u64,
    /// `strait.group.session.timeout.ms` of the members.
    #[arg(long, default_value_t = 6_000)]
    session_timeout_ms: u32,
    /// `strait.group.heartbeat.interval.ms` of the members.
    #[arg(long, default_value_t = 1_000)]
    heartbeat_interval_ms: u32,
    /// The strait binary (default: next to this executable).
    #[arg(long)]
    strait: Option<PathBuf>,
    /// Where the JSON result goes (default perf/results/scaling/<date>-group.json).
    #[arg(long)]
    out: Option<PathBuf>,
}

#[derive(Args, Clone)]
struct Shape {
    /// Records to send.
    #[arg(long)]
    records: Option<u64>,
    /// Value size, bytes (at least 16: the stamp).
    #[arg(long)]
    value_bytes: Option<usize>,
    /// Key size, bytes (with --keys > 0).
    #[arg(long)]
    key_bytes: Option<usize>,
    /// Distinct keys; 0 = no keys.
    #[arg(long)]
    keys: Option<u64>,
    /// Headers per record.
    #[arg(long)]
    headers: Option<usize>,
    /// none, gzip, snappy, lz4, zstd.
    #[arg(long)]
    codec: Option<String>,
    /// Batch size, uncompressed bytes.
    #[arg(long)]
    batch_bytes: Option<usize>,
    /// Linger, ms (fixed-rate mode).
    #[arg(long)]
    linger_ms: Option<u64>,
    /// Records per second (steady mode; `produce` without it goes flat out).
    #[arg(long)]
    rate: Option<f64>,
    /// Partitions.
    #[arg(long)]
    partitions: Option<i32>,
}

impl Shape {
    fn apply(&self, s: &mut Scenario) -> Result<()> {
        if let Some(v) = self.records {
            s.records = v;
        }
        if let Some(v) = self.value_bytes {
            s.value_bytes = v;
        }
        if let Some(v) = self.key_bytes {
            s.key_bytes = v;
        }
        if let Some(v) = self.keys {
            s.key_cardinality = v;
        }
        if let Some(v) = self.headers {
            s.headers = v;
        }
        if let Some(c) = &self.codec {
            s.codec = scenario::parse_codec(c).with_context(|| format!("unknown codec {c}"))?;
        }
        if let Some(v) = self.batch_bytes {
            s.batch_bytes = v;
        }
        if let Some(v) = self.linger_ms {
            s.linger_ms = v;
        }
        if let Some(v) = self.rate {
            s.rate = Some(v);
        }
        if let Some(v) = self.partitions {
            s.partitions = v;
        }
        Ok(())
    }
}

#[derive(Args)]
struct ProduceArgs {
    #[arg(long)]
    topic: String,
    /// Create the topic first with this many partitions.
    #[arg(long)]
    create: bool,
    #[command(flatten)]
    shape: Shape,
    /// -1 (all) or 1.
    #[arg(long, default_value_t = -1, allow_hyphen_values = true)]
    acks: i16,
    /// Produce requests in flight per broker.
    #[arg(long, default_value_t = 5)]
    in_flight: usize,
    /// Largest request, bytes of batches.
    #[arg(long, default_value_t = 4 << 20)]
    max_request_bytes: usize,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct ConsumeArgs {
    #[arg(long)]
    topic: String,
    #[arg(long, default_value_t = 1)]
    partitions: i32,
    /// Measured records to wait for.
    #[arg(long)]
    records: u64,
    #[arg(long, default_value_t = 300)]
    timeout_s: u64,
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct RunArgs {
    /// smoke, catch-up, steady, many-partitions, codecs, small-batches.
    #[arg(long)]
    scenario: String,
    /// Replicators to run, in order (comma-separated): strait, mm2.
    #[arg(long, value_delimiter = ',', default_value = "strait,mm2")]
    replicator: Vec<Tool>,
    #[command(flatten)]
    shape: Shape,
    /// Give up on a replicator after this many seconds.
    #[arg(long)]
    timeout_s: Option<u64>,
    /// Give up when no new record arrived for this many seconds after the first.
    #[arg(long)]
    stall_timeout_s: Option<u64>,
    /// strait's command line; `{config}` is the generated mm2.properties.
    #[arg(long)]
    strait_cmd: Option<String>,
    /// MirrorMaker 2's command line (default: scripts/kafka-tool connect-mirror-maker).
    #[arg(long)]
    mm2_cmd: Option<String>,
    /// MM2 heap flags.
    #[arg(long, default_value = "-Xms256m -Xmx1g")]
    mm2_heap: String,
    /// MM2 tasks.max.
    #[arg(long, default_value_t = 2)]
    mm2_tasks: u32,
    /// Extra config line for one tool: `strait:key=value`, `mm2:key=value` or
    /// `mm2-defaults:key=value`; `{source}` and `{target}` in the key are the run's cluster
    /// aliases (`mm2:{source}.consumer.fetch.max.bytes=...`). Repeatable.
    #[arg(long)]
    prop: Vec<String>,
    /// Where to write the JSON (default perf/results/<date>-<scenario>.json).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Configs and logs (default perf/results/tmp/<run id>).
    #[arg(long)]
    work_dir: Option<PathBuf>,
    /// Keep the run's topics instead of deleting them.
    #[arg(long)]
    keep_topics: bool,
    /// After each strait catch-up run, time `strait verify --full` over the same copy (before
    /// its topics are deleted) and record it under `verify`.
    #[arg(long)]
    verify: bool,
    /// The repository (scripts/, git commit).
    #[arg(long)]
    repo: Option<PathBuf>,
    /// Exit 0 even when a replicator did not finish (the JSON says so).
    #[arg(long)]
    allow_incomplete: bool,
    #[command(flatten)]
    link: LinkArgs,
}

/// How the replicators reach the source (the slow-link measurement; perf/README.md).
#[derive(Args)]
struct LinkArgs {
    /// The source bootstrap written into the replicators' mm2.properties (default: --source,
    /// the bench's own). On the fault clusters: the proxied PLAINTEXT listener, while --source
    /// is the direct INTERNAL one.
    #[arg(long, value_name = "BOOTSTRAP")]
    replicator_source: Option<String>,
    /// One-way latency added between the replicators and the source, ms: a Toxiproxy `latency`
    /// toxic of N ms (jitter 0) on both directions of every PLAINTEXT proxy of
    /// --source-cluster, so the round trip grows by 2N ms. Removed when the run ends.
    #[arg(long, value_name = "MS", value_parser = strait_bench::link::parse_one_way_latency_ms)]
    source_latency_ms: Option<u64>,
    /// Toxiproxy's API, host:port (default: 127.0.0.1:$STRAIT_TOXIPROXY_PORT, else the test
    /// bed's STRAIT_TOXIPROXY_API, else 127.0.0.1:8474).
    #[arg(long, value_name = "HOST:PORT")]
    toxiproxy_api: Option<String>,
    /// The test-bed name of the source cluster: its brokers' CPU is recorded, and its proxies
    /// (`NAME-<node>-plaintext`) get the latency.
    #[arg(long, default_value = "source")]
    source_cluster: String,
    /// The test-bed name of the target cluster (its brokers' CPU is recorded).
    #[arg(long, default_value = "target")]
    target_cluster: String,
    /// Replication factor of the bench's topic and of every topic the replicators create
    /// (1 on the single-broker test bed; 3 on the fault clusters).
    #[arg(long, default_value_t = 1)]
    replication_factor: i16,
}

#[derive(Args)]
struct ReportArgs {
    #[arg(long, default_value = "perf/results")]
    results: PathBuf,
    #[arg(long, default_value = "perf/RESULTS.md")]
    out: PathBuf,
}

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    if let Err(e) = real_main(cli) {
        eprintln!("strait-bench: error: {e:#}");
        std::process::exit(1);
    }
}

fn repo_default() -> PathBuf {
    std::env::var_os("STRAIT_REPO_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
}

fn real_main(cli: Cli) -> Result<()> {
    let choice = IoChoice::parse(&cli.io).with_context(|| format!("--io {}", cli.io))?;
    let sel = select_backend(choice).map_err(anyhow::Error::msg)?;
    let backend = sel.backend;
    let repo = repo_default();
    let tb = machine::testbed_dir(&repo);
    let source = cli
        .source
        .or_else(|| machine::testbed_var(&tb, "STRAIT_SOURCE_BOOTSTRAP"))
        .unwrap_or_else(|| "127.0.0.1:19092".into());
    let target = cli
        .target
        .or_else(|| machine::testbed_var(&tb, "STRAIT_TARGET_BOOTSTRAP"))
        .unwrap_or_else(|| "127.0.0.1:29092".into());
    match cli.cmd {
        Cmd::Produce(a) => cmd_produce(a, &source, backend),
        Cmd::Consume(a) => cmd_consume(a, &target, backend),
        Cmd::Run(a) => cmd_run(*a, source, target, tb, backend),
        Cmd::Group(a) => cmd_group(a, source, target, &repo, backend),
        Cmd::Restore(a) => cmd_restore(a, &target, &repo, backend),
        Cmd::Readme(a) => cmd_readme(&a, &repo),
        Cmd::Relay(a) => cmd_relay(&a, &repo),
        Cmd::Load(a) => {
            if !strait_bench::load::run(&a)? {
                std::process::exit(3);
            }
            Ok(())
        }
        Cmd::Report(a) => {
            let n = strait_bench::report::write_results_md(&a.results, &a.out)?;
            eprintln!("strait-bench: wrote {} ({n} scenarios)", a.out.display());
            Ok(())
        }
    }
}

fn cmd_relay(a: &RelayArgs, repo: &Path) -> Result<()> {
    use strait_bench::relay::{self, Mode, RelayParams};
    let modes = Mode::parse_list(&a.mode)?;
    if a.rounds == 0 || a.bytes == 0 || a.buffer_bytes == 0 {
        bail!("--rounds, --bytes and --buffer-bytes must be positive");
    }
    let params = RelayParams {
        bytes: a.bytes,
        buffer_bytes: a.buffer_bytes,
    };
    // Described before the runs: the load average then is what the runs shared the machine with.
    let machine = Machine::describe();
    let date = run::utc_now();
    let runs = relay::run_rounds(params, &modes, a.rounds)?;
    let summary = relay::summarize(&runs, &modes);
    for s in &summary {
        println!("{}", relay::summary_line(s));
    }
    let Some(out) = &a.json else {
        return Ok(());
    };
    if let Some(dir) = out.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let json = serde_json::json!({
        "kind": "relay",
        "date": date,
        "commit": machine::commit(repo),
        "machine": machine,
        "command": std::env::args().collect::<Vec<_>>().join(" "),
        "params": {"bytes": a.bytes, "rounds": a.rounds, "buffer_bytes": a.buffer_bytes,
            "modes": modes},
        "modes": summary,
        "runs": runs,
    });
    std::fs::write(out, serde_json::to_string_pretty(&json)? + "\n")
        .with_context(|| format!("writing {}", out.display()))?;
    eprintln!("strait-bench: wrote {}", out.display());
    Ok(())
}

fn cmd_readme(a: &ReadmeArgs, repo: &Path) -> Result<()> {
    let mut stale = Vec::new();
    for (path, now, new) in strait_bench::readme::regenerate(repo)? {
        if now == new {
            continue;
        }
        if a.check {
            stale.push(path.display().to_string());
        } else {
            std::fs::write(&path, new)?;
            eprintln!(
                "strait-bench: rewrote the generated blocks of {}",
                path.display()
            );
        }
    }
    let problems = strait_bench::readme::check_docs(repo)?;
    for p in &problems {
        eprintln!("strait-bench: {p}");
    }
    if !stale.is_empty() {
        anyhow::bail!(
            "the generated blocks of {} differ from the result files: run scripts/readme-tables",
            stale.join(" and ")
        );
    }
    if !problems.is_empty() {
        anyhow::bail!(
            "{} problem(s) with the design document and the READMEs' links",
            problems.len()
        );
    }
    Ok(())
}

fn cmd_produce(a: ProduceArgs, source: &str, backend: IoBackend) -> Result<()> {
    let mut s = Scenario::named("catch-up").expect("built-in scenario");
    s.records = 100_000;
    a.shape.apply(&mut s)?;
    if a.create {
        let admin = kafka::admin("source", source, backend)?;
        strait_dataplane::io::block_on(backend, async {
            kafka::create_topic(&admin, &a.topic, s.partitions, 1, &[]).await
        })??;
    }
    let spec = ProduceSpec {
        bootstrap: source.to_string(),
        topic: a.topic.clone(),
        records: s.records,
        shape: RecordShape::new(s.value_bytes, s.key_bytes, s.key_cardinality, s.headers),
        codec: s.codec,
        batch_bytes: s.batch_bytes,
        linger_ms: s.linger_ms,
        rate: a.shape.rate,
        acks: a.acks,
        max_in_flight: a.in_flight,
        max_request_bytes: a.max_request_bytes,
        warmup: false,
        progress: true,
        backend,
    };
    let r = strait_dataplane::io::block_on(backend, producer::produce(&spec, None))??;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        println!(
            "produced {} records ({:.1} MiB, {:.1} MiB on the wire) in {:.2} s: {:.0} records/s, {:.1} MiB/s; {} requests, {} batches; max behind schedule {} records",
            r.records,
            r.bytes as f64 / MIB,
            r.wire_bytes as f64 / MIB,
            r.secs,
            r.records_per_s,
            r.mib_per_s,
            r.requests,
            r.batches,
            r.max_behind_records
        );
    }
    Ok(())
}

fn cmd_consume(a: ConsumeArgs, target: &str, backend: IoBackend) -> Result<()> {
    let spec = ConsumeSpec {
        bootstrap: target.to_string(),
        topic: a.topic,
        partitions: a.partitions,
        expected: a.records,
        timeout_ms: a.timeout_s * 1000,
        stall_timeout_ms: a.timeout_s * 1000,
        fetch_max_bytes: 64 << 20,
        partition_max_bytes: 1 << 20,
        max_wait_ms: 100,
        start_us: now_us(),
        max_series_s: 7200,
        backend,
    };
    let r = strait_dataplane::io::block_on(backend, consumer::consume(&spec, &mut NoMonitor))??;
    let l = r.latency_summary();
    let span = match (r.first_arrival_us, r.last_arrival_us) {
        (Some(f), Some(l)) => (l - f) as f64 / 1e6,
        _ => 0.0,
    };
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "records": r.distinct, "duplicates": r.duplicates, "complete": r.complete,
                "mib": r.bytes as f64 / MIB, "secs": span, "latency": l, "series": r.series,
            }))?
        );
    } else {
        println!(
            "consumed {} records ({} duplicates, {:.1} MiB) over {:.2} s; latency p50 {:.1} ms, p99 {:.1} ms, p99.9 {:.1} ms, max {:.1} ms{}",
            r.distinct,
            r.duplicates,
            r.bytes as f64 / MIB,
            span,
            l.p50_ms,
            l.p99_ms,
            l.p999_ms,
            l.max_ms,
            if r.complete {
                ""
            } else {
                " (INCOMPLETE: timed out)"
            }
        );
    }
    if !r.complete {
        bail!("only {} of {} records arrived", r.distinct, a.records);
    }
    Ok(())
}

#[allow(clippy::too_many_lines)] // bench code, one measurement told in order: not split yet
fn cmd_run(
    a: RunArgs,
    source: String,
    target: String,
    testbed_dir: PathBuf,
    backend: IoBackend,
) -> Result<()> {
    let mut s = Scenario::named(&a.scenario).with_context(|| {
        format!(
            "unknown scenario {}; known: {}",
            a.scenario,
            scenario::NAMES.join(", ")
        )
    })?;
    a.shape.apply(&mut s)?;
    if let Some(t) = a.timeout_s {
        s.timeout_s = t;
    }
    if let Some(t) = a.stall_timeout_s {
        s.stall_timeout_s = t;
    }
    let repo = a.repo.clone().unwrap_or_else(repo_default);
    let repo = repo.canonicalize().unwrap_or(repo);
    let id = run::run_id();
    let work_dir = a
        .work_dir
        .clone()
        .unwrap_or_else(|| repo.join("perf/results/tmp").join(&id));
    let replicator_source = a
        .link
        .replicator_source
        .clone()
        .unwrap_or_else(|| source.clone());
    let one_way_ms = a.link.source_latency_ms.unwrap_or(0);
    let mut link = strait_bench::link::LinkInfo {
        bench_source_bootstrap: source.clone(),
        replicator_source_bootstrap: replicator_source.clone(),
        target_bootstrap: target.clone(),
        source_one_way_latency_ms: one_way_ms,
        source_added_rtt_ms: 2 * one_way_ms,
        toxiproxy_api: None,
        latency_proxies: Vec::new(),
    };
    let env = RunEnv {
        source,
        replicator_source,
        target,
        source_cluster: a.link.source_cluster.clone(),
        target_cluster: a.link.target_cluster.clone(),
        replication_factor: a.link.replication_factor,
        repo: repo.clone(),
        testbed_dir,
        work_dir,
        backend,
        mm2_tasks: a.mm2_tasks,
        keep_topics: a.keep_topics,
        progress: true,
        verify_with: None,
    };
    let bin_dir = run::bin_dir()?;
    let env = RunEnv {
        verify_with: a.verify.then(|| bin_dir.join("strait")),
        ..env
    };
    let mut props: Vec<(Tool, String, String)> = Vec::new();
    for p in &a.prop {
        let (tool, kv) = p
            .split_once(':')
            .with_context(|| format!("--prop {p}: expected TOOL:key=value"))?;
        let tool = match tool {
            "strait" => Tool::Strait,
            "mm2" => Tool::Mm2,
            "mm2-defaults" => Tool::Mm2Defaults,
            other => bail!("--prop {p}: unknown tool {other}"),
        };
        let (k, v) = kv
            .split_once('=')
            .with_context(|| format!("--prop {p}: expected key=value"))?;
        props.push((tool, k.trim().to_string(), v.trim().to_string()));
    }
    // Dropping it (an error below) removes the toxics too; the normal path removes them below
    // and reports a failure to.
    let slow = if one_way_ms > 0 {
        let api = strait_bench::link::toxiproxy_api(
            a.link.toxiproxy_api.as_deref(),
            std::env::var("STRAIT_TOXIPROXY_PORT").ok().as_deref(),
            &env.testbed_dir,
        );
        let s = strait_bench::link::SlowSource::add(&api, &a.link.source_cluster, one_way_ms)?;
        link.toxiproxy_api = Some(s.api().to_string());
        link.latency_proxies = s.proxies.clone();
        Some(s)
    } else {
        None
    };
    let date = run::utc_now();
    let mut file = ResultFile {
        scenario: s.name.clone(),
        date: date.clone(),
        commit: machine::commit(&repo),
        command: std::env::args().collect::<Vec<_>>().join(" "),
        machine: Machine::describe(),
        params: s.clone(),
        link,
        entries: Vec::new(),
    };
    let out = a.out.clone().unwrap_or_else(|| {
        repo.join("perf/results")
            .join(format!("{}-{}.json", &date[..10], s.name))
    });
    for (variant, vs) in s.variants() {
        for &tool in &a.replicator {
            let cmd = match tool {
                Tool::Strait => a.strait_cmd.as_deref().map(CommandSpec::parse),
                Tool::Mm2 | Tool::Mm2Defaults => a.mm2_cmd.as_deref().map(CommandSpec::parse),
            }
            .transpose()?
            .unwrap_or_else(|| replicator::default_command(tool, &repo, &bin_dir, &a.mm2_heap));
            let extra: Vec<(String, String)> = props
                .iter()
                .filter(|(t, _, _)| *t == tool)
                .map(|(_, k, v)| (k.clone(), v.clone()))
                .collect();
            let entry = run::run_one(&vs, &variant, tool, &cmd, &extra, &env)?;
            println!("{}", run::summary(&entry));
            file.entries.push(entry);
            // Written after every entry, so an interrupted scenario keeps what it measured.
            run::write_result(&file, &out)?;
        }
    }
    eprintln!("strait-bench: wrote {}", out.display());
    if let Some(s) = slow {
        s.remove()?;
    }
    let incomplete: Vec<String> = file
        .entries
        .iter()
        .filter(|e| !e.complete)
        .map(|e| format!("{} [{}]", e.tool.name(), e.variant))
        .collect();
    if !incomplete.is_empty() && !a.allow_incomplete {
        bail!("incomplete runs: {}", incomplete.join(", "));
    }
    Ok(())
}

fn cmd_restore(a: RestoreArgs, target: &str, repo: &Path, backend: IoBackend) -> Result<()> {
    let runs: Vec<usize> = a
        .runs
        .split(',')
        .map(|r| r.trim().parse().context("--runs: numbers"))
        .collect::<Result<_>>()?;
    let admin = kafka::admin("target", target, backend)?;
    let id = run::run_id();
    // One runtime for every shape and the clean-up: the admin connection's tasks live on
    // the runtime that opened it.
    let rows = strait_dataplane::io::block_on(backend, async {
        let mut rows = Vec::new();
        let mut topics = Vec::new();
        for r in runs {
            let alias = format!("bench-restore-{id}-{r}");
            topics.push(strait_control::store::progress::topic_name(&alias));
            let row =
                strait_bench::restore::measure(&admin, &alias, a.partitions, r, a.repeat).await?;
            eprint!(
                "{}",
                strait_bench::restore::table(std::slice::from_ref(&row))
            );
            rows.push(row);
        }
        kafka::delete_topics(&admin, &topics).await?;
        anyhow::Ok(rows)
    })??;
    let date = run::utc_now();
    let out = a.out.unwrap_or_else(|| {
        repo.join("perf/results/restore")
            .join(format!("{}-restore.json", &date[..10.min(date.len())]))
    });
    if let Some(dir) = out.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let json = serde_json::json!({
        "date": date,
        "commit": machine::commit(repo),
        "machine": Machine::describe(),
        "command": std::env::args().collect::<Vec<_>>().join(" "),
        "rows": rows,
    });
    std::fs::write(&out, serde_json::to_string_pretty(&json)?)
        .with_context(|| format!("writing {}", out.display()))?;
    print!("{}", strait_bench::restore::table(&rows));
    eprintln!("strait-bench: wrote {}", out.display());
    Ok(())
}

fn cmd_group(
    a: GroupArgs,
    source: String,
    target: String,
    repo: &Path,
    backend: IoBackend,
) -> Result<()> {
    let strait = match a.strait {
        Some(p) => p,
        None => run::bin_dir()?.join("strait"),
    };
    let date = run::utc_now();
    let spec = strait_bench::group::GroupSpec {
        instances: a.instances,
        partitions: a.partitions,
        rate: a.rate,
        value_bytes: a.value_bytes,
        settle_s: a.settle_s,
        session_timeout_ms: a.session_timeout_ms,
        heartbeat_interval_ms: a.heartbeat_interval_ms,
        strait,
        work_dir: repo
            .join("perf/results/tmp")
            .join(format!("group-{}", run::run_id())),
        source,
        target,
        backend,
    };
    let r = strait_bench::group::run(&spec)?;
    let out = a.out.unwrap_or_else(|| {
        repo.join("perf/results/scaling")
            .join(format!("{}-group.json", &date[..10.min(date.len())]))
    });
    let json = serde_json::json!({
        "date": date,
        "machine": Machine::describe(),
        "result": r,
    });
    std::fs::write(&out, serde_json::to_string_pretty(&json)?)
        .with_context(|| format!("writing {}", out.display()))?;
    print!("{}", strait_bench::group::table(&r));
    eprintln!("strait-bench: wrote {}", out.display());
    if r.missing > 0 {
        bail!("{} source records missing on the target", r.missing);
    }
    Ok(())
}
