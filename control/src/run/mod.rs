//! `strait run`: start-up, the control loop and shutdown.
//!
//! - `start`: every flow's clients, stored progress and duties; the shard threads; the API.
//! - `control`: the loop that turns every 20 ms and runs the duties that are due.
//! - `assign`: which shard replicates which partition (pure).
//! - `discovery`: a flow's topic management pass and the assignment of what it found.
//! - `events`: what the shards' reports and failures change.
//! - `status` and `api_link`: the API's view of the run; `commands`: operator commands;
//!   `observe`: bytes, lag in time, stalls, timings and duty counters for the API.
//! - `reload`: configuration reload (API, SIGHUP); `progress`: live progress.
//! - `stop`: the shards' final reports, the last offset syncs, the final progress.
//! - `unheld`: what the API lists of the partitions of a member out of its group.
//! - `failover`: the stored failover state, honoured at start and watched while running.
//! - `verifier`: continuous verification (`strait.verify.*`) on a thread of its own.

mod api_link;
mod assign;
mod commands;
mod control;
mod discovery;
mod events;
mod failover;
pub mod group;
mod observe;
mod outbox;
pub mod progress;
mod reload;
mod start;
mod status;
mod stop;
mod unheld;
mod verifier;

use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use strait_dataplane::io::IoBackend;
use strait_dataplane::shard::{ClusterEndpoint, ShardStats};
use strait_dataplane::wire::WireError;

pub use self::control::{DUTY_DEADLINE, TICK};
pub use self::failover::WATCH_INTERVAL as FAILOVER_WATCH_INTERVAL;
pub use self::start::TEST_COMMAND_CHANNEL_ENV;
pub use self::stop::SHUTDOWN_DEADLINE;
pub use self::verifier::VerifySettings;

use self::assign::Partitions;
use self::control::ProcessDuties;
use crate::api::ApiError;
use crate::cluster::{Cluster, ClusterError};
use crate::duties::heartbeats::{HeartbeatError, HeartbeatPlan, Heartbeats};
use crate::duties::liveness::Liveness;
use crate::duties::offsets::{OffsetsError, OffsetsRuntime};
use crate::duties::topics::{TopicError, TopicSync};
use crate::plan::FlowPlan;
use crate::store::progress::ProgressStore;

/// Each shard's share of the total memory budget. At least 1 MiB, so that a shard can always
/// fetch something even when many shards split a small budget.
pub fn shard_memory_bytes(total_bytes: usize, shards: usize) -> usize {
    (total_bytes / shards.max(1)).max(1 << 20)
}

/// Process-wide options.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub backend: IoBackend,
    pub shards: usize,
    /// Fetched data in flight across all shards (`strait.memory.bytes`).
    pub memory_bytes: usize,
    pub until_caught_up: bool,
    /// How often progress is written. Default 1 000 ms.
    pub progress_flush_ms: u64,
    /// Restart a partition whose position was lost from the earliest offset (else stop it).
    pub reset_lost_positions: bool,
    /// Every herder pair's heartbeats (`heartbeat::plans`), including heartbeats-only pairs.
    pub heartbeats: Vec<HeartbeatPlan>,
    /// Where the REST API and `/metrics` listen (`strait.api.listen`); `None` = no API.
    pub api_listen: Option<std::net::SocketAddr>,
    /// The bearer token mutating API requests need (`strait.api.token`).
    pub api_token: Option<crate::api::ApiToken>,
    /// Operator commands waiting for the control loop at most (the API answers 503 beyond).
    pub api_queue: usize,
    /// Whether failing to listen stops the run (the address was configured) or only warns
    /// (the default address is taken, e.g. by another strait on the host).
    pub api_required: bool,
    /// The API's key store (`strait.api.ssl.keystore.*`): set, the API serves HTTPS only.
    pub api_tls: Option<crate::api::ApiKeyStore>,
    /// `strait.metrics.enabled`: serve `/metrics`.
    pub metrics_enabled: bool,
    /// `strait.metrics.per.partition`: per-partition series in `/metrics`.
    pub metrics_per_partition: bool,
    /// `strait.health.stall.timeout.ms`: how long a partition may have lag without progress
    /// before `/health/ready` fails.
    pub stall_timeout_ms: u64,
    /// The group this run joins (`strait.group.*`); `None` runs alone, outside any group.
    pub group: Option<group::GroupOptions>,
    /// The configuration the run started from (its file is read again on a reload); `None`:
    /// reloads are refused.
    pub config: Option<crate::config::Mm2Config>,
    /// Live progress on the terminal or as log lines; `None`: none.
    pub progress: Option<progress::ProgressOutput>,
    /// Continuous verification (`strait.verify.enabled`); `None`: off.
    pub verify: Option<VerifySettings>,
    /// `strait.cpus`: the shards' CPUs (empty: the inherited affinity mask's).
    pub cpus: Vec<usize>,
    /// `strait.cpus.pin`: false leaves the threads' placement to the kernel.
    pub pin: bool,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOutcome {
    /// Partitions that stopped with an error, and why.
    pub failed: Vec<(String, String)>,
    pub partitions: usize,
    pub stats: ShardStats,
}

/// Why `strait run` stopped with an error. None is retriable by the run itself: its
/// partitions resume from stored progress at the next start.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    #[error(transparent)]
    Topics(#[from] TopicError),
    #[error(transparent)]
    Offsets(#[from] OffsetsError),
    #[error(transparent)]
    Heartbeats(#[from] HeartbeatError),
    /// The REST API could not listen on a configured address.
    #[error(transparent)]
    Api(#[from] ApiError),
    /// The API's TLS settings cannot be used (never a fallback to plain HTTP).
    #[error(transparent)]
    ApiTls(#[from] crate::api::ApiTlsError),
    /// A cluster's connection settings are unusable (an unreadable trust store...).
    #[error("cluster {cluster}: {error}")]
    Client {
        cluster: String,
        /// In the message, so not a `#[source]` (the CLI prints error chains).
        error: WireError,
    },
    /// The continuous verification thread could not be started.
    #[error("cannot start the continuous verification thread: {error}")]
    VerifierStart {
        /// In the message, so not a `#[source]` (the CLI prints error chains).
        error: std::io::Error,
    },
    /// `strait.cpus` names CPUs this process may not run on.
    #[error(
        "strait.cpus lists CPUs {outside}, which this process may not run on (its affinity mask: {mask}; see taskset or the cgroup's cpuset)"
    )]
    Cpus { outside: String, mask: String },
    /// `strait.cpus` names CPUs while `strait.cpus.pin` is false.
    #[error("strait.cpus names CPUs ({cpus}) but strait.cpus.pin is false: set one or the other")]
    CpusUnpinned { cpus: String },
    /// A shard thread could not be started.
    #[error("cannot start shard {shard}: {error}")]
    ShardStart {
        shard: usize,
        /// In the message, so not a `#[source]` (the CLI prints error chains).
        error: std::io::Error,
    },
    /// A shard no longer takes commands.
    #[error("shard {shard} is gone")]
    ShardGone { shard: usize },
    /// A shard took no commands for so long that the most this run may queue for it waits
    /// (`run::outbox`): it is wedged, and control must not grow its queue without end.
    #[error(
        "shard {shard} has taken no commands for {stalled_s} s and {waiting} wait for it, the most this run queues; stopping (its partitions resume from stored progress at the next start)"
    )]
    ShardStuck {
        shard: usize,
        waiting: usize,
        stalled_s: u64,
    },
    /// A shard thread ended while the run went on.
    #[error(
        "shard {shard} stopped unexpectedly; stopping (its partitions resume from stored progress at the next start)"
    )]
    ShardDied { shard: usize },
    /// Every shard dropped its end of the event channel.
    #[error("every shard stopped")]
    ShardsStopped,
    /// Another replicator copies the flow already: both would copy every record.
    #[error("flow {flow}: refusing to start: {why}")]
    AlreadyReplicated { flow: String, why: String },
    /// The group refused this member (a configuration that differs from the leader's, an
    /// authorization error): it stops rather than replicate beside the group.
    #[error("group membership: {why}")]
    Group { why: String },
}

/// One flow while it runs: its plan, clients, progress and duties.
pub(crate) struct FlowRuntime {
    pub(crate) plan: FlowPlan,
    pub(crate) source: Rc<Cluster>,
    pub(crate) target: Rc<Cluster>,
    pub(crate) source_ep: Arc<ClusterEndpoint>,
    pub(crate) target_ep: Arc<ClusterEndpoint>,
    pub(crate) progress: ProgressStore,
    pub(crate) topics: TopicSync,
    pub(crate) liveness: Liveness,
    /// Offset syncs, checkpoints and group-offset sync.
    pub(crate) offsets: OffsetsRuntime,
    /// `exactly.once.source.support=enabled`: the partitions' transactions.
    pub(crate) eos: Option<crate::duties::exactly_once::ExactlyOnce>,
    /// Partitions of `eos` were released to be taken over again: discovery runs at once.
    pub(crate) eos_restarts: bool,
    /// Partitions restarted from the earliest offset after their position was lost
    /// (`strait.on.lost.position=earliest`), for `/metrics`.
    pub(crate) lost_position_resets: u64,
    /// Bytes, lag in time and stalls of its partitions, for the API and `/metrics`.
    pub(crate) observed: observe::FlowObservations,
    /// Removed by a configuration reload: its partitions are revoked and its duties no longer
    /// run; it keeps its place so that the other flows keep their ids.
    pub(crate) retired: bool,
}

impl FlowRuntime {
    /// `source->target`.
    pub(crate) fn name(&self) -> String {
        format!("{}->{}", self.plan.source, self.plan.target)
    }

    /// Writes the changed progress, each partition's with its exact mapping.
    pub(crate) async fn flush_progress(&mut self) -> Result<usize, crate::cluster::ClusterError> {
        self.progress
            .flush(&self.target, now_ms(), self.offsets.mapping_mut())
            .await
    }
}

/// Each partition's stored progress when the run starts: continuous verification compares
/// what this run copies from there.
fn started_at(
    flows: &[FlowRuntime],
) -> std::collections::BTreeMap<crate::verify::continuous::PartitionRef, i64> {
    flows
        .iter()
        .flat_map(|f| {
            let name = f.name();
            f.progress.entries().iter().map(move |(tp, e)| {
                let key = crate::verify::continuous::PartitionRef {
                    flow: name.clone(),
                    topic: tp.topic.clone(),
                    partition: tp.partition,
                };
                (key, e.next_offset)
            })
        })
        .collect()
}

fn now_ms() -> i64 {
    crate::time::wall_ms()
}

/// Runs the flows until `--until-caught-up` is satisfied or `stop` resolves. Must run on the
/// control thread's single-threaded runtime.
pub async fn run(
    plans: Vec<FlowPlan>,
    opts: RunOptions,
    stop: impl std::future::Future<Output = ()>,
) -> Result<RunOutcome, RunError> {
    let started = Instant::now();
    // Identifies this process in the liveness records.
    let instance = uuid::Uuid::new_v4().simple().to_string();
    // First: SIGHUP's default would end the process.
    let mut reloader = reload::Reloader::new(&opts, &instance);
    let mut live = opts
        .progress
        .map(|o| progress::LiveProgress::new(o, opts.until_caught_up));
    let mut heartbeats = Heartbeats::new(&opts.heartbeats, started)?;
    // Before the first discovery, so that a flow in the other direction finds the topic.
    heartbeats.start().await;
    let mut flows = Vec::new();
    for plan in plans {
        let plan = failover::exclude_failed_over(plan).await;
        let plan = failover::exclude_unprepared_reverse(plan).await;
        flows.push(start::open_flow(plan, &instance, started).await?);
    }
    let (shards, ev_rx) = start::spawn_shards(&opts)?;
    let mut api = start::start_api(&opts).await?;
    if let Some(settings) = opts.verify {
        api.verifier = Some(verifier::Verifier::start(
            settings,
            flows.iter().map(|f| f.plan.config.clone()).collect(),
            started_at(&flows),
            api.published.clone(),
        )?);
    }

    let mut group = match &opts.group {
        Some(g) => Some(group::GroupLink::start(g.clone(), started)?),
        None => None,
    };
    let mut parts = Partitions::new();
    control::first_discovery(&mut flows, &shards, &mut parts, &opts, group.as_mut()).await?;
    if let Some(g) = group.as_mut() {
        g.join();
    } else {
        tracing::info!(partitions = parts.len(), "partitions assigned");
    }

    let outcome = control::control_loop(
        &mut flows,
        &shards,
        &ev_rx,
        &mut parts,
        &opts,
        &mut ProcessDuties {
            heartbeats: &mut heartbeats,
            api: &mut api,
            group: group.as_mut(),
            reloader: &mut reloader,
            progress: live.as_mut(),
        },
        stop,
    )
    .await;

    if let Some(v) = api.verifier.take() {
        v.stop();
    }
    let (stats, commits_took) =
        stop::stop_shards(shards, &ev_rx, &mut flows, &mut parts, &opts).await;
    if let Some(l) = live.as_mut() {
        l.finish(&flows, &parts, &stats, Instant::now());
    }
    if let Some(g) = &group {
        g.before_final_writes(&mut flows, &parts, Instant::now());
    }
    let finished = stop::finish_flows(&mut flows, &opts, commits_took).await;
    if let Some(g) = &group {
        g.leave().await;
    }
    finished?;
    let failed = stop::failed_partitions(&parts);
    outcome?;
    Ok(RunOutcome {
        failed,
        partitions: parts.len(),
        stats: stop::total_stats(&stats),
    })
}

#[cfg(test)]
mod tests {
    use super::shard_memory_bytes;

    #[test]
    fn the_memory_budget_is_split_between_shards_with_a_floor() {
        assert_eq!(shard_memory_bytes(96 << 20, 2), 48 << 20);
        assert_eq!(shard_memory_bytes(96 << 20, 1), 96 << 20);
        assert_eq!(shard_memory_bytes(96 << 20, 0), 96 << 20);
        assert_eq!(shard_memory_bytes(96 << 20, 256), 1 << 20);
    }
}
