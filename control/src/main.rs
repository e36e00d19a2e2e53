//! The `strait` binary.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Parser, Subcommand, ValueEnum};
use strait_control::config::{self, OnLostPosition};
use strait_control::replicate::{self, RunOptions};
use strait_dataplane::io::{IoChoice, select_backend};

#[derive(Parser, Debug)]
#[command(
    name = "strait",
    version,
    about = "Kafka replication, drop-in for MirrorMaker 2"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
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
    },
    /// Validate a config file and print the effective configuration per flow.
    Check {
        #[arg(long)]
        config: PathBuf,
    },
    /// Consumer-group offsets across a flow, and progress between MirrorMaker 2 and strait.
    Offsets {
        #[command(subcommand)]
        command: OffsetsCommand,
    },
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

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    match cli.command {
        Command::Check { config } => {
            let report = config::check(&config);
            print!("{report}");
            if report.has_errors() {
                ExitCode::from(1)
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
        Command::Run {
            config,
            until_caught_up,
            io,
            shards,
        } => match run(config, until_caught_up, io, shards) {
            Ok(code) => code,
            Err(e) => {
                eprintln!("strait: {e:#}");
                ExitCode::from(3)
            }
        },
    }
}

fn run(
    path: PathBuf,
    until_caught_up: bool,
    io: Option<IoArg>,
    shards: Option<usize>,
) -> anyhow::Result<ExitCode> {
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
    let choice = match io {
        Some(IoArg::Auto) => IoChoice::Auto,
        Some(IoArg::Uring) => IoChoice::Uring,
        Some(IoArg::Epoll) => IoChoice::Epoll,
        None => match cfg.strait.io.value {
            config::IoBackend::Auto => IoChoice::Auto,
            config::IoBackend::Uring => IoChoice::Uring,
            config::IoBackend::Epoll => IoChoice::Epoll,
        },
    };
    let selection = select_backend(choice).map_err(anyhow::Error::msg)?;
    if let Some(why) = &selection.fallback_reason {
        tracing::warn!("using epoll instead of io_uring: {why}");
    }
    let shards = shards.unwrap_or(match cfg.strait.shards.value {
        0 => strait_dataplane::io::runtime::allowed_cores().len(),
        n => n as usize,
    });
    let plans = strait_control::plan::plans(&cfg).map_err(anyhow::Error::msg)?;
    if plans.is_empty() {
        eprintln!(
            "strait: no flow is enabled in {} (set <source>-><target>.enabled = true)",
            path.display()
        );
        return Ok(ExitCode::from(1));
    }
    let (heartbeats, hb_warnings) = strait_control::heartbeat::plans(&cfg);
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
        api_required: cfg.strait.api_listen.is_from_file(),
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the control runtime")?;
    let local = tokio::task::LocalSet::new();
    let outcome = local.block_on(&rt, replicate::run(plans, opts, shutdown_signal()))?;
    let s = &outcome.stats;
    eprintln!(
        "strait: {} partitions; {} records in {} batches ({} fast, {} rebuilt), {} bytes",
        outcome.partitions,
        s.produced_records,
        s.produced_batches,
        s.fast_batches,
        s.slow_batches,
        s.produced_bytes
    );
    if outcome.failed.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        for (p, e) in &outcome.failed {
            eprintln!("strait: partition {p} stopped: {e}");
        }
        Ok(ExitCode::from(2))
    }
}

/// `strait offsets import-mm2` / `export-mm2`: exit 0 when done, 1 for config or usage
/// errors, 3 for cluster errors, 4 when replication is active.
fn migrate(path: PathBuf, flow: Option<String>, export: bool) -> anyhow::Result<ExitCode> {
    use strait_control::migrate::{self, MigrateError};
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
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the runtime")?;
    // The admin client's connections run as local tasks.
    let local = tokio::task::LocalSet::new();
    let mut code = ExitCode::SUCCESS;
    for f in flows {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
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

/// `strait offsets translate`: exit 0 with the report on stdout, 1 for config errors, 3 for
/// cluster errors or an unknown flow.
fn offsets_translate(path: &Path, group: &str, flow: Option<&str>) -> anyhow::Result<ExitCode> {
    let cfg = match config::load(path) {
        Ok(c) => c,
        Err(errors) => {
            eprintln!("{errors}");
            return Ok(ExitCode::from(1));
        }
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the runtime")?;
    // The admin client's connections run as local tasks.
    let local = tokio::task::LocalSet::new();
    let report = local.block_on(
        &rt,
        strait_control::translate::translate_command(&cfg, flow, group),
    )?;
    print!("{report}");
    Ok(ExitCode::SUCCESS)
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
