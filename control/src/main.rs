//! The `strait` binary.
#![forbid(unsafe_code)]
#![warn(clippy::too_many_lines)]

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Parser, Subcommand, ValueEnum};
use strait_control::config::{self, OnLostPosition};
use strait_control::run::{self as replicate, RunOptions};
use strait_dataplane::io::{IoChoice, select_backend};

#[derive(Parser, Debug)]
#[command(
    name = "strait",
    // The commit comes from build.rs (`unknown` outside git, `-dirty` with local changes).
    version = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("STRAIT_GIT_COMMIT"), ")"),
    about = "Kafka replication, drop-in for MirrorMaker 2"
)]
struct Cli {
    /// Log format on stderr: `text` (coloured only on a terminal, never when `NO_COLOR` is set)
    /// or `json` (one JSON object per line, for log pipelines).
    #[arg(long, value_enum, global = true, default_value = "text")]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Replicate every enabled flow of an mm2.properties file.
    Run {
        /// The mm2.properties file.
        #[arg(long)]
        config: PathBuf,
        /// Exit once every partition has reached the source end offset seen at start.
        #[arg(long)]
        until_caught_up: bool,
        /// IO backend (overrides strait.io).
        #[arg(long, value_enum)]
        io: Option<IoArg>,
        /// Shard threads (overrides strait.shards; default one per allowed CPU).
        #[arg(long)]
        shards: Option<usize>,
        /// Without a terminal on stderr, log a `progress` line (records/s, MiB/s, lag, ETA with
        /// --until-caught-up) every this many seconds; on a terminal progress is drawn live.
        #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
        progress_interval: u64,
    },
    /// Validate a config file and print the effective configuration per flow.
    Check {
        #[arg(long)]
        config: PathBuf,
        /// Also connect to the clusters of every enabled flow as the configured principal and
        /// list each permission strait needs there and whether it is granted (exit 1 if any is
        /// missing or a cluster cannot be reached).
        #[arg(long)]
        connect: bool,
    },
    /// Consumer-group offsets across a flow, and progress between MirrorMaker 2 and strait.
    Offsets {
        #[command(subcommand)]
        command: OffsetsCommand,
    },
    /// Control a running strait through its REST API: status, pause, resume, stop, offsets,
    /// reload.
    Ctl(CtlArgs),
    /// Prove the copy: read the source and the target over the range strait's stored progress
    /// says is copied and compare them record by record (key, value, headers, timestamp and its
    /// type) over the stored offset mapping. Exit 0 only when everything compared matches, 1
    /// when something differs, 3 when it cannot run.
    Verify(VerifyArgs),
    /// Rehearse a failover for one consumer group, read-only for it: start a shadow group on
    /// the target where the group would resume (its offsets there after group sync, else
    /// strait's translation) and check, per partition and by content, that it reads first the
    /// first record the group had not consumed on the source. Exit 0 when nothing would be
    /// skipped, 1 on a skip or a partition that cannot be checked, 3 when it cannot run (for
    /// example, the group is active on the target).
    Drill(DrillArgs),
    /// The runbook's smoke test: produce one stamped record into a topic the flow replicates
    /// (name one made for it), wait for it on the target, compare it field by field and check
    /// that strait's stored mapping puts it where it was found. Exit status 0 when all holds,
    /// 1 when not (not copied within the wait, different, or elsewhere than mapped), 3 when it
    /// cannot run.
    Smoke(SmokeArgs),
    /// Planned failover of a flow's topics to the target: validate, wait until strait copied
    /// everything, check that no producer still writes to the source, stop the topics in every
    /// strait run (a stored state), move the named groups' offsets to the target and print the
    /// evidence. Resumable: a second run goes on from the stored state. Exit status 0 when
    /// done (or a dry run), 1 when refused (lag, producers, active groups), 3 when it cannot run.
    Failover(FailoverArgs),
    /// After a failover, once the old source answers: what it holds beyond what reached the
    /// target (per partition, exactly, from strait's stored progress), optionally copied to
    /// quarantine topics on the target (`--quarantine`; nothing is deleted); then, with
    /// nothing left behind unquarantined and the reverse flow target->source enabled in the
    /// config, sets that flow up to copy back what producers wrote on the target since (under
    /// IdentityReplicationPolicy from where the copy ended). Resumable. The failover back is
    /// `strait failover --flow target->source`. Exit status 0 when nothing was left behind or
    /// it was quarantined, 1 when records are left behind, 3 when it cannot run.
    Failback(FailbackArgs),
}

/// `strait failback`'s arguments.
#[derive(clap::Args, Debug)]
struct FailbackArgs {
    /// The mm2.properties file.
    #[arg(long)]
    config: PathBuf,
    /// The flow that was failed over (`source->target`); default the only enabled flow.
    #[arg(long)]
    flow: Option<String>,
    /// Copy the records left behind to `strait-quarantine.<source>.<topic>` on the target.
    #[arg(long)]
    quarantine: bool,
    /// The last step, after the failover back (`strait failover --flow target->source`): the
    /// flow copies the failed-over topics again (they leave its stored failover state; under
    /// IdentityReplicationPolicy it starts where the reverse flow's copy ended).
    #[arg(long, conflicts_with = "quarantine")]
    resume: bool,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

/// `strait failover`'s arguments.
#[derive(clap::Args, Debug)]
struct FailoverArgs {
    /// The mm2.properties file.
    #[arg(long)]
    config: PathBuf,
    /// The flow (`source->target`); default the only enabled flow.
    #[arg(long)]
    flow: Option<String>,
    /// Only source topics whose whole name matches this regex (default: every topic of the
    /// flow with stored progress but MirrorMaker's heartbeats topics).
    #[arg(long)]
    topics: Option<String>,
    /// Consumer groups whose offsets move to the target (comma-separated; each must be empty
    /// there).
    #[arg(long, value_delimiter = ',')]
    groups: Vec<String>,
    /// Check everything as it is now (no waiting) and write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Go on although producers still write to the source.
    #[arg(long)]
    force: bool,
    /// How long to wait for the lag to reach zero.
    #[arg(long, default_value_t = strait_control::commands::failover::DEFAULT_WAIT.as_secs(),
          value_parser = clap::value_parser!(u64).range(0..=86_400))]
    wait_seconds: u64,
    /// Over how long the source's ends must not move.
    #[arg(long, default_value_t = strait_control::commands::failover::DEFAULT_QUIET.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    quiet_seconds: u64,
    /// Unplanned: the source does not answer. No producer check, no lag wait; groups move to
    /// strait's last checkpoints; the report gives the recovery point per partition.
    #[arg(long)]
    source_unavailable: bool,
    /// A running strait's REST API (`host:port`, plain HTTP, `strait.api.token` sent), asked
    /// for the source ends it last saw (default: `strait.api.listen` when it names a port).
    #[arg(long)]
    api: Option<String>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

/// `strait smoke`'s arguments.
#[derive(clap::Args, Debug)]
struct SmokeArgs {
    /// The mm2.properties file.
    #[arg(long)]
    config: PathBuf,
    /// The flow (`source->target`); default the only enabled flow.
    #[arg(long)]
    flow: Option<String>,
    /// The source topic the record is produced to; the flow must replicate it.
    #[arg(long)]
    topic: String,
    /// Its partition.
    #[arg(long, default_value_t = 0)]
    partition: i32,
    /// How long to wait for the copy on the target, and then for strait's stored progress past
    /// it.
    #[arg(long, default_value_t = strait_control::commands::smoke::DEFAULT_WAIT.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    wait_seconds: u64,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

/// `strait drill`'s arguments.
#[derive(clap::Args, Debug)]
struct DrillArgs {
    /// The mm2.properties file.
    #[arg(long)]
    config: PathBuf,
    /// The flow (`source->target`); default the only enabled flow.
    #[arg(long)]
    flow: Option<String>,
    /// The consumer group rehearsed (never written).
    #[arg(long)]
    group: String,
    /// With group sync on: how long to wait for the group's target offsets to reach strait's
    /// translations.
    #[arg(long, default_value_t = strait_control::commands::drill::DEFAULT_WAIT.as_secs(),
          value_parser = clap::value_parser!(u64).range(0..=3600))]
    wait_seconds: u64,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

/// `strait verify`'s arguments.
#[derive(clap::Args, Debug)]
struct VerifyArgs {
    /// The mm2.properties file.
    #[arg(long)]
    config: PathBuf,
    /// The flow (`source->target`); default the only enabled flow.
    #[arg(long)]
    flow: Option<String>,
    /// Only source topics whose whole name matches this regex.
    #[arg(long)]
    topics: Option<String>,
    /// Only these partitions (comma-separated).
    #[arg(long, value_delimiter = ',')]
    partitions: Option<Vec<i32>>,
    /// Partitions verified at once (each holds at most one 8 MiB fetch per side).
    #[arg(long, default_value_t = strait_control::commands::verify::DEFAULT_PARALLEL_PARTITIONS as u64,
          value_parser = clap::value_parser!(u64).range(1..=256))]
    parallel: u64,
    /// Compare about this share of the copied records (0 < RATE <= 1), as whole source
    /// batches at random offsets, with what the mapping puts on the target.
    #[arg(long, conflicts_with = "full")]
    sample: Option<f64>,
    /// Compare every copied record (the default).
    #[arg(long)]
    full: bool,
    /// The seed of --sample's offsets (default: from the clock; printed in the report).
    #[arg(long, requires = "sample")]
    seed: Option<u64>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args, Debug)]
struct CtlArgs {
    /// The API's address (host:port); default strait.api.listen of --config, else
    /// 127.0.0.1:8787.
    #[arg(long, global = true)]
    api: Option<String>,
    /// Read the API address from this mm2.properties (strait.api.listen).
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    /// A file holding the bearer token (strait.api.token); default $STRAIT_API_TOKEN.
    #[arg(long, global = true)]
    token_file: Option<PathBuf>,
    /// Talk HTTPS to an API with strait.api.ssl.keystore.location set, trusting the CA
    /// certificates of this PEM file (the certificate must name the --api host).
    #[arg(long, global = true)]
    tls_ca: Option<PathBuf>,
    /// Print the API's JSON instead of tables.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: CtlCommand,
}

/// A flow, optionally narrowed to a topic or one partition.
#[derive(clap::Args, Debug)]
struct CtlScope {
    /// The flow, `source->target`.
    flow: String,
    #[arg(long)]
    topic: Option<String>,
    #[arg(long)]
    partition: Option<i32>,
}

#[derive(Subcommand, Debug)]
enum CtlCommand {
    /// Every flow (or one) with its partitions' state, positions, lag and records copied.
    Status {
        /// Only this flow.
        flow: Option<String>,
    },
    /// Stop fetching (what was fetched is still produced).
    Pause(CtlScope),
    /// Fetch and produce again.
    Resume(CtlScope),
    /// Stop fetching and producing and flush the progress (offsets can be changed then).
    Stop(CtlScope),
    /// A flow's stored offsets, or change them (the partitions must be stopped).
    Offsets {
        #[command(subcommand)]
        command: CtlOffsets,
    },
    /// Re-read the config file and apply what changed without a restart (as SIGHUP does); a
    /// file with errors, or a change of a setting fixed until restart, is refused.
    Reload,
}

#[derive(Subcommand, Debug)]
enum CtlOffsets {
    /// The stored next source offset of every partition of a flow.
    Get { flow: String },
    /// Set one partition's next source offset (rewind, or skip past a record).
    Set {
        #[command(flatten)]
        scope: CtlScope,
        #[arg(long)]
        offset: i64,
    },
    /// Reset one partition (or, without --topic, every partition of the flow) to
    /// auto.offset.reset.
    Reset(CtlScope),
}

#[derive(Subcommand, Debug)]
enum OffsetsCommand {
    /// Seed strait's progress from MM2's (`mm2-offsets.<source>.internal` on the target), so
    /// that switching from MM2 to strait copies nothing twice. Refuses while MM2 or strait
    /// replicates the flow (exit status 4).
    ImportMm2 {
        #[arg(long)]
        config: PathBuf,
        /// Only this flow (`source->target`); default every enabled flow.
        #[arg(long)]
        flow: Option<String>,
    },
    /// Write strait's progress into MM2's offsets topic, so that MM2 resumes where strait
    /// stopped. Refuses while MM2 or strait replicates the flow (exit status 4).
    ExportMm2 {
        #[arg(long)]
        config: PathBuf,
        /// Only this flow (`source->target`); default every enabled flow.
        #[arg(long)]
        flow: Option<String>,
    },
    /// Translate a group's committed source offsets to the target, per partition, with their
    /// precision (from the offset syncs, strait's checkpoints and stored progress; replicates
    /// nothing).
    Translate {
        #[arg(long)]
        config: PathBuf,
        /// The consumer group.
        #[arg(long)]
        group: String,
        /// The flow (`source->target`); default the only enabled flow.
        #[arg(long)]
        flow: Option<String>,
    },
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum IoArg {
    Auto,
    Uring,
    Epoll,
}

/// Colour codes only for a person at a terminal: a file or a log collector gets plain text,
/// and `NO_COLOR` (any non-empty value, <https://no-color.org>) turns them off everywhere.
fn use_colour() -> bool {
    use std::io::IsTerminal as _;
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    !no_color && std::io::stderr().is_terminal()
}

fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.with_ansi(use_colour()).init(),
        LogFormat::Json => builder
            .json()
            .with_current_span(false)
            .with_span_list(false)
            .init(),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.log_format);
    match cli.command {
        Command::Check { config, connect } => {
            let report = config::check(&config);
            print!("{report}");
            if report.has_errors() {
                ExitCode::from(1)
            } else if connect {
                check_connect(&config).unwrap_or_else(|e| {
                    eprintln!("strait: {e:#}");
                    ExitCode::from(3)
                })
            } else {
                ExitCode::SUCCESS
            }
        }
        Command::Offsets { command } => {
            let result = match command {
                OffsetsCommand::ImportMm2 { config, flow } => migrate(config, flow, false),
                OffsetsCommand::ExportMm2 { config, flow } => migrate(config, flow, true),
                OffsetsCommand::Translate {
                    config,
                    group,
                    flow,
                } => offsets_translate(&config, &group, flow.as_deref()),
            };
            match result {
                Ok(code) => code,
                Err(e) => {
                    eprintln!("strait: {e:#}");
                    ExitCode::from(3)
                }
            }
        }
        Command::Ctl(args) => ctl(args),
        Command::Verify(args) => verify(&args).unwrap_or_else(|e| {
            eprintln!("strait: {e:#}");
            ExitCode::from(3)
        }),
        Command::Drill(args) => drill(&args).unwrap_or_else(|e| {
            eprintln!("strait: {e:#}");
            ExitCode::from(3)
        }),
        Command::Failback(args) => failback(&args).unwrap_or_else(|e| {
            eprintln!("strait: {e:#}");
            ExitCode::from(3)
        }),
        Command::Failover(args) => failover(&args).unwrap_or_else(|e| {
            eprintln!("strait: {e:#}");
            ExitCode::from(3)
        }),
        Command::Smoke(args) => smoke(&args).unwrap_or_else(|e| {
            eprintln!("strait: {e:#}");
            ExitCode::from(3)
        }),
        Command::Run {
            config,
            until_caught_up,
            io,
            shards,
            progress_interval,
        } => match run(
            config,
            RunArgs {
                until_caught_up,
                io,
                shards,
                progress_interval,
            },
            cli.log_format == LogFormat::Json,
        ) {
            Ok(code) => code,
            Err(e) => {
                eprintln!("strait: {e:#}");
                ExitCode::from(3)
            }
        },
    }
}

/// `strait ctl`: exit 0 on success, 1 when the API refused, 3 when it cannot be reached.
fn ctl(args: CtlArgs) -> ExitCode {
    use strait_control::commands::ctl::{self, CtlError, Target};
    let client = match ctl_client(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("strait ctl: {e:#}");
            return ExitCode::from(3);
        }
    };
    let target = |s: &CtlScope| Target {
        flow: s.flow.clone(),
        topic: s.topic.clone(),
        partition: s.partition,
    };
    let (result, render): (_, fn(&serde_json::Value) -> String) = match &args.command {
        CtlCommand::Status { flow } => (client.status(flow.as_deref()), ctl::render_status),
        CtlCommand::Pause(s) => (client.act(&target(s), "pause"), ctl::render_result),
        CtlCommand::Resume(s) => (client.act(&target(s), "resume"), ctl::render_result),
        CtlCommand::Stop(s) => (client.act(&target(s), "stop"), ctl::render_result),
        CtlCommand::Offsets { command } => match command {
            CtlOffsets::Get { flow } => (client.offsets(flow), ctl::render_offsets),
            CtlOffsets::Set { scope, offset } => (
                client.set_offset(&target(scope), Some(*offset)),
                ctl::render_result,
            ),
            CtlOffsets::Reset(s) => (client.set_offset(&target(s), None), ctl::render_result),
        },
        CtlCommand::Reload => (client.reload(), ctl::render_reload),
    };
    match result {
        Ok(v) if args.json => {
            println!("{v:#}");
            ExitCode::SUCCESS
        }
        Ok(v) => {
            print!("{}", render(&v));
            ExitCode::SUCCESS
        }
        Err(e @ (CtlError::Io { .. } | CtlError::BadResponse { .. })) => {
            eprintln!("strait ctl: {e}");
            ExitCode::from(3)
        }
        Err(e) => {
            eprintln!("strait ctl: {e}");
            ExitCode::from(1)
        }
    }
}

/// The API's address and token from the arguments, the config and the environment.
fn ctl_client(args: &CtlArgs) -> anyhow::Result<strait_control::commands::ctl::Client> {
    let addr = match (&args.api, &args.config) {
        (Some(a), _) => a.clone(),
        (None, Some(path)) => {
            let cfg = config::load(path).map_err(|e| anyhow::anyhow!("{e}"))?;
            cfg.strait
                .api_listen
                .value
                .with_context(|| format!("strait.api.listen is disabled in {}", path.display()))?
                .to_string()
        }
        (None, None) => "127.0.0.1:8787".to_string(),
    };
    let token = match &args.token_file {
        Some(f) => Some(
            std::fs::read_to_string(f)
                .with_context(|| format!("cannot read the token file {}", f.display()))?
                .trim()
                .to_string(),
        ),
        None => std::env::var("STRAIT_API_TOKEN")
            .ok()
            .filter(|t| !t.is_empty()),
    };
    let tls = match &args.tls_ca {
        Some(ca) => Some(strait_control::commands::ctl::tls_trusting(ca)?),
        None => None,
    };
    Ok(strait_control::commands::ctl::Client { addr, token, tls })
}

/// The API's key store from `strait.api.ssl.*` (passwords without a store were refused as the
/// file was loaded).
fn api_key_store(
    s: &strait_control::config::StraitSettings,
) -> Option<strait_control::api::ApiKeyStore> {
    s.api_keystore_location
        .value
        .as_ref()
        .map(|path| strait_control::api::ApiKeyStore {
            path: path.clone(),
            password: s.api_keystore_password.value.clone(),
            key_password: s.api_key_password.value.clone(),
        })
}

/// `strait run`'s options besides the config file.
struct RunArgs {
    until_caught_up: bool,
    io: Option<IoArg>,
    shards: Option<usize>,
    progress_interval: u64,
}

/// Live progress: drawn on a terminal (text logs), else a log line every `interval_s`.
fn progress_output(interval_s: u64, json_logs: bool) -> replicate::progress::ProgressOutput {
    use replicate::progress::ProgressOutput;
    use std::io::IsTerminal as _;
    if !json_logs && std::io::stderr().is_terminal() {
        ProgressOutput::Terminal
    } else {
        ProgressOutput::Log(std::time::Duration::from_secs(interval_s))
    }
}

fn run(path: PathBuf, args: RunArgs, json_logs: bool) -> anyhow::Result<ExitCode> {
    let RunArgs {
        until_caught_up,
        io,
        shards,
        progress_interval,
    } = args;
    let cfg = match config::load(&path) {
        Ok(c) => c,
        Err(errors) => {
            eprintln!("{errors}");
            eprintln!(
                "strait: {} has errors; run `strait check --config {}` for details",
                path.display(),
                path.display()
            );
            return Ok(ExitCode::from(1));
        }
    };
    for w in &cfg.warnings {
        tracing::warn!("{w}");
    }
    let choice = io_choice(io, &cfg);
    let selection = select_backend(choice).map_err(anyhow::Error::msg)?;
    if let Some(why) = &selection.fallback_reason {
        tracing::warn!("using epoll instead of io_uring: {why}");
    }
    let shards = shards.unwrap_or(match cfg.strait.shards.value {
        0 if !cfg.strait.cpus.value.is_empty() => cfg.strait.cpus.value.len(),
        0 => strait_dataplane::io::runtime::allowed_cores().len(),
        n => n as usize,
    });
    let plans = strait_control::plan::plans(&cfg)?;
    if plans.is_empty() {
        eprintln!(
            "strait: no flow is enabled in {} (set <source>-><target>.enabled = true)",
            path.display()
        );
        return Ok(ExitCode::from(1));
    }
    let (heartbeats, hb_warnings) = strait_control::duties::heartbeats::plans(&cfg);
    for w in hb_warnings {
        tracing::warn!("{w}");
    }
    let opts = RunOptions {
        backend: selection.backend,
        shards,
        memory_bytes: usize::try_from(cfg.strait.memory_bytes.value).unwrap_or(usize::MAX),
        until_caught_up,
        progress_flush_ms: 1_000,
        reset_lost_positions: cfg.strait.on_lost_position.value == OnLostPosition::Earliest,
        heartbeats,
        api_listen: cfg.strait.api_listen.value,
        api_token: cfg
            .strait
            .api_token
            .value
            .clone()
            .map(strait_control::api::ApiToken::new),
        api_queue: cfg.strait.api_command_queue.value as usize,
        api_required: cfg.strait.api_listen.is_from_file(),
        api_tls: api_key_store(&cfg.strait),
        metrics_enabled: cfg.strait.metrics_enabled.value,
        metrics_per_partition: cfg.strait.metrics_per_partition.value,
        stall_timeout_ms: cfg.strait.health_stall_timeout_ms.value,
        group: Some(group_options(&cfg, &plans, &path)?),
        config: Some(cfg.clone()),
        progress: Some(progress_output(progress_interval, json_logs)),
        verify: verify_settings(&cfg.strait),
        cpus: cfg.strait.cpus.value.clone(),
        pin: cfg.strait.cpus_pin.value,
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the control runtime")?;
    let local = tokio::task::LocalSet::new();
    let outcome = local.block_on(&rt, replicate::run(plans, opts, shutdown_signal()))?;
    Ok(report_outcome(&outcome, json_logs))
}

/// Continuous verification's settings (`strait.verify.*`), when it is on.
fn verify_settings(s: &config::StraitSettings) -> Option<replicate::VerifySettings> {
    s.verify_enabled.value.then(|| replicate::VerifySettings {
        interval: std::time::Duration::from_millis(s.verify_interval_ms.value),
        sample_rate: s.verify_sample_rate.value,
        max_records_per_round: s.verify_max_records_per_round.value,
        from_history: s.verify_from_history.value,
        mapping_max_runs: s.mapping_max_runs_per_partition.value,
    })
}

/// The group this run joins: `strait.group.*`, the coordination cluster's admin settings and
/// the digest of the file that every member must share.
fn group_options(
    cfg: &config::Mm2Config,
    plans: &[strait_control::plan::FlowPlan],
    path: &Path,
) -> anyhow::Result<replicate::group::GroupOptions> {
    use strait_control::group::{digest, membership::Timings};
    let s = &cfg.strait;
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let (file_digest, keys) = digest::of_properties(&config::properties::parse_bytes(&bytes));
    let first_target = plans.first().map(|p| p.target.clone()).unwrap_or_default();
    let cluster = s.group_cluster.value.clone().unwrap_or(first_target);
    let (bootstrap, conn) = plans
        .iter()
        .find_map(|p| {
            if p.target == cluster {
                Some((p.target_bootstrap.clone(), p.target_admin.clone()))
            } else if p.source == cluster {
                Some((p.source_bootstrap.clone(), p.source_admin.clone()))
            } else {
                None
            }
        })
        .with_context(|| {
            format!("strait.group.cluster = {cluster} is not a cluster of any enabled flow")
        })?;
    // Their bounds and the cluster were checked as the file was loaded (config::cross).
    let session = s.group_session_timeout_ms.value;
    let heartbeat = s.group_heartbeat_interval_ms.value;
    let ms = |v: u32| std::time::Duration::from_millis(u64::from(v));
    Ok(replicate::group::GroupOptions {
        group_id: s
            .group_id
            .value
            .clone()
            .unwrap_or_else(|| format!("strait-{file_digest:016x}")),
        cluster,
        bootstrap,
        conn,
        instance_id: s.group_instance_id.value.clone(),
        timings: Timings {
            session_timeout: ms(session),
            heartbeat_interval: ms(heartbeat),
            rebalance_timeout: ms(s.group_rebalance_timeout_ms.value),
            retry_backoff: ms(heartbeat.min(1_000)),
        },
        digest: file_digest,
        keys,
    })
}

/// The IO backend: `--io`, else `strait.io`.
fn io_choice(io: Option<IoArg>, cfg: &config::Mm2Config) -> IoChoice {
    match io {
        Some(IoArg::Auto) => IoChoice::Auto,
        Some(IoArg::Uring) => IoChoice::Uring,
        Some(IoArg::Epoll) => IoChoice::Epoll,
        None => match cfg.strait.io.value {
            config::IoBackend::Auto => IoChoice::Auto,
            config::IoBackend::Uring => IoChoice::Uring,
            config::IoBackend::Epoll => IoChoice::Epoll,
        },
    }
}

/// Prints how the run went (a summary line, or an event with `--log-format json`) and the
/// partitions that stopped; exit status 2 when some did.
fn report_outcome(outcome: &replicate::RunOutcome, json_logs: bool) -> ExitCode {
    let s = &outcome.stats;
    // Text mode ends with a line for people (and scripts that parse it); JSON mode logs the same
    // numbers as an event, so that every stderr line stays one JSON object.
    if json_logs {
        tracing::info!(
            partitions = outcome.partitions,
            records = s.produced_records,
            batches = s.produced_batches,
            fast_batches = s.fast_batches,
            rebuilt_batches = s.slow_batches,
            merged_batches = s.merged_batches,
            merges = s.merges,
            bytes = s.produced_bytes,
            "run finished"
        );
    } else {
        eprintln!(
            "strait: {} partitions; {} records in {} batches ({} fast, {} rebuilt, {} merged), {} bytes",
            outcome.partitions,
            s.produced_records,
            s.produced_batches,
            s.fast_batches,
            s.slow_batches,
            s.merged_batches,
            s.produced_bytes
        );
    }
    if outcome.failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        for (p, e) in &outcome.failed {
            if json_logs {
                tracing::error!(partition = %p, error = %e, "partition stopped");
            } else {
                eprintln!("strait: partition {p} stopped: {e}");
            }
        }
        ExitCode::from(2)
    }
}

/// `strait offsets import-mm2` / `export-mm2`: exit 0 when done, 1 for config or usage
/// errors, 3 for cluster errors, 4 when replication is active.
fn migrate(path: PathBuf, flow: Option<String>, export: bool) -> anyhow::Result<ExitCode> {
    use strait_control::commands::migrate::{self, MigrateError};
    let cfg = match config::load(&path) {
        Ok(c) => c,
        Err(errors) => {
            eprintln!("{errors}");
            return Ok(ExitCode::from(1));
        }
    };
    let flows: Vec<&config::FlowConfig> = match &flow {
        None => cfg.enabled_flows().collect(),
        Some(name) => {
            let Some((s, t)) = name.split_once("->") else {
                eprintln!("strait: --flow takes source->target, not `{name}`");
                return Ok(ExitCode::from(1));
            };
            match cfg.flow(s.trim(), t.trim()) {
                Some(f) if f.enabled.value => vec![f],
                _ => {
                    eprintln!("strait: {} has no enabled flow {name}", path.display());
                    return Ok(ExitCode::from(1));
                }
            }
        }
    };
    if flows.is_empty() {
        eprintln!("strait: no flow is enabled in {}", path.display());
        return Ok(ExitCode::from(1));
    }
    let (rt, local) = command_runtime()?;
    let mut code = ExitCode::SUCCESS;
    for f in flows {
        let now = strait_control::time::wall_ms();
        let result = local.block_on(&rt, async {
            if export {
                migrate::export_mm2(&cfg, f, now).await
            } else {
                migrate::import_mm2(&cfg, f, now).await
            }
        });
        match result {
            Ok(report) => {
                for l in &report.lines {
                    println!("{l}");
                }
            }
            Err(e @ MigrateError::Active { .. }) => {
                eprintln!("strait: {e}");
                code = ExitCode::from(4);
            }
            Err(e) => {
                eprintln!("strait: {e}");
                code = ExitCode::from(3);
            }
        }
    }
    Ok(code)
}

/// `strait check --connect`: the permissions of every enabled flow, on stdout; exit 1 when one
/// is missing or a cluster cannot be reached.
fn check_connect(path: &Path) -> anyhow::Result<ExitCode> {
    let Some(cfg) = load_or_report(path) else {
        return Ok(ExitCode::from(1));
    };
    let (rt, local) = command_runtime()?;
    let mut problems = 0;
    for flow in cfg.flows.iter().filter(|f| f.enabled.value) {
        let report = local.block_on(
            &rt,
            strait_control::commands::preflight::preflight(&cfg, flow),
        )?;
        print!("{report}");
        problems += report.problems();
    }
    Ok(if problems == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// `strait offsets translate`: exit 0 with the report on stdout, 1 for config errors, 3 for
/// cluster errors or an unknown flow.
fn offsets_translate(path: &Path, group: &str, flow: Option<&str>) -> anyhow::Result<ExitCode> {
    let Some(cfg) = load_or_report(path) else {
        return Ok(ExitCode::from(1));
    };
    let (rt, local) = command_runtime()?;
    let report = local.block_on(
        &rt,
        strait_control::commands::translate::translate_command(&cfg, flow, group),
    )?;
    print!("{report}");
    Ok(ExitCode::SUCCESS)
}

/// `strait verify`: exit 0 when every compared record matches, 1 otherwise.
fn verify(args: &VerifyArgs) -> anyhow::Result<ExitCode> {
    use std::io::IsTerminal as _;
    use strait_control::commands::verify::{Progress, VerifyOptions, verify_command};
    use strait_control::verify::partition::Mode;
    let mode = match args.sample {
        None => Mode::Full,
        Some(rate) if rate > 0.0 && rate <= 1.0 => Mode::Sample {
            rate,
            seed: args.seed.unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos() as u64)
            }),
        },
        Some(rate) => anyhow::bail!("--sample {rate}: expected a share above 0 and at most 1"),
    };
    let topics = args
        .topics
        .as_deref()
        .map(|t| regex::Regex::new(t).with_context(|| format!("--topics {t}")))
        .transpose()?;
    let Some(cfg) = load_or_report(&args.config) else {
        return Ok(ExitCode::from(1));
    };
    let opts = VerifyOptions {
        mode,
        flow: args.flow.clone(),
        topics,
        partitions: args.partitions.clone(),
        parallel_partitions: args.parallel as usize,
    };
    let live = std::io::stderr().is_terminal();
    let show = |p: Progress| {
        if !live {
            return;
        }
        let secs = p.elapsed.as_secs_f64().max(0.001);
        let rate = p.records as f64 / secs;
        let left = p.records_estimate.saturating_sub(p.records) as f64;
        let eta = if rate > 0.0 { left / rate } else { f64::NAN };
        eprint!(
            "\r\x1b[Kverify: {} records read, {:.0} records/s, {}/{} partitions, ETA {:.0} s",
            p.records, rate, p.partitions_done, p.partitions, eta
        );
    };
    let (rt, local) = command_runtime()?;
    let report = local.block_on(&rt, verify_command(&cfg, &opts, show))?;
    if live {
        eprint!("\r\x1b[K");
    }
    print_report(&report, args.json, report.ok())
}

/// Prints a command's report (JSON or text); exit 0 when `ok`, else 1.
fn print_report(
    report: &(impl serde::Serialize + std::fmt::Display),
    json: bool,
    ok: bool,
) -> anyhow::Result<ExitCode> {
    if json {
        println!("{}", serde_json::to_string_pretty(report)?);
    } else {
        print!("{report}");
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn drill(args: &DrillArgs) -> anyhow::Result<ExitCode> {
    use strait_control::commands::drill::{DEFAULT_SCAN_RECORDS, DrillOptions, drill_command};
    let Some(cfg) = load_or_report(&args.config) else {
        return Ok(ExitCode::from(3));
    };
    let opts = DrillOptions {
        flow: args.flow.clone(),
        group: args.group.clone(),
        wait: std::time::Duration::from_secs(args.wait_seconds),
        scan_records: DEFAULT_SCAN_RECORDS,
    };
    let (rt, local) = command_runtime()?;
    let report = local.block_on(&rt, drill_command(&cfg, &opts))?;
    print_report(&report, args.json, report.ok())
}

fn failback(args: &FailbackArgs) -> anyhow::Result<ExitCode> {
    use strait_control::commands::failback::{FailbackOptions, failback_command};
    let Some(cfg) = load_or_report(&args.config) else {
        return Ok(ExitCode::from(3));
    };
    let (rt, local) = command_runtime()?;
    if args.resume {
        use strait_control::commands::resume::resume_command;
        let report = local.block_on(&rt, resume_command(&cfg, args.flow.as_deref()))?;
        return print_report(&report, args.json, true);
    }
    let opts = FailbackOptions {
        flow: args.flow.clone(),
        quarantine: args.quarantine,
    };
    let report = local.block_on(&rt, failback_command(&cfg, &opts))?;
    let ok = report.records_left_behind == 0 || args.quarantine;
    print_report(&report, args.json, ok)
}

fn failover(args: &FailoverArgs) -> anyhow::Result<ExitCode> {
    use strait_control::commands::failover::{FailoverOptions, failover_command};
    let Some(cfg) = load_or_report(&args.config) else {
        return Ok(ExitCode::from(3));
    };
    let topics = match &args.topics {
        Some(t) => Some(regex::Regex::new(t).with_context(|| format!("--topics {t}"))?),
        None => None,
    };
    let opts = FailoverOptions {
        flow: args.flow.clone(),
        topics,
        groups: args.groups.clone(),
        dry_run: args.dry_run,
        force: args.force,
        wait: std::time::Duration::from_secs(args.wait_seconds),
        quiet: std::time::Duration::from_secs(args.quiet_seconds),
        source_unavailable: args.source_unavailable,
        api: args
            .api
            .clone()
            .or_else(|| {
                cfg.strait
                    .api_listen
                    .value
                    .filter(|a| a.port() != 0)
                    .map(|a| a.to_string())
            })
            .map(|addr| strait_control::commands::ctl::Client {
                addr,
                token: cfg.strait.api_token.value.clone(),
                tls: None,
            }),
    };
    let (rt, local) = command_runtime()?;
    let report = local.block_on(
        &rt,
        failover_command(&cfg, &opts, |line| eprintln!("strait failover: {line}")),
    )?;
    print_report(&report, args.json, report.ok())
}

fn smoke(args: &SmokeArgs) -> anyhow::Result<ExitCode> {
    use strait_control::commands::smoke::{SmokeOptions, smoke_command};
    let Some(cfg) = load_or_report(&args.config) else {
        return Ok(ExitCode::from(3));
    };
    let opts = SmokeOptions {
        flow: args.flow.clone(),
        topic: args.topic.clone(),
        partition: args.partition,
        wait: std::time::Duration::from_secs(args.wait_seconds),
    };
    let (rt, local) = command_runtime()?;
    let report = local.block_on(&rt, smoke_command(&cfg, &opts))?;
    print_report(&report, args.json, report.ok())
}

/// The configuration of a one-shot command, or `None` after printing its errors (exit 1).
fn load_or_report(path: &Path) -> Option<config::Mm2Config> {
    config::load(path)
        .map_err(|errors| eprintln!("{errors}"))
        .ok()
}

/// The runtime of the one-shot admin commands: one thread, the admin client's connections as
/// local tasks.
fn command_runtime() -> anyhow::Result<(tokio::runtime::Runtime, tokio::task::LocalSet)> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the runtime")?;
    Ok((rt, tokio::task::LocalSet::new()))
}

async fn shutdown_signal() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
