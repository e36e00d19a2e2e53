//! Start-up of `strait run`: every flow's clients, progress, topic sync, liveness and offsets
//! duty; the shard threads; the REST API.

use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::Receiver;
use strait_dataplane::io::{ConnSetup, IoBackend};
use strait_dataplane::shard::{ClusterEndpoint, ShardConfig, ShardEvent, ShardHandle, spawn_shard};
use strait_dataplane::wire::ConnConfig;

use super::api_link::ApiLink;
use super::outbox::{SHARD_CHANNEL_CAPACITY, Shards};
use super::{FlowRuntime, RunError, RunOptions, now_ms, shard_memory_bytes};
use crate::api::{Auth, Published};
use crate::cluster::{Cluster, RetryConfig};
use crate::duties::liveness::Liveness;
use crate::duties::offsets::OffsetsRuntime;
use crate::duties::topics::TopicSync;
use crate::plan::FlowPlan;
use crate::store::liveness::mm2_running;
use crate::store::progress::ProgressStore;

/// Opens one flow: its admin clients and endpoints, its stored progress, its topic sync, its
/// first liveness beat and its offsets duty, whose offset syncs and checkpoints go on loading in
/// the background (`OffsetsRuntime::poll_load` takes them). `instance` names this process in the
/// liveness records; `started` is when the run started.
pub(super) async fn open_flow(
    plan: FlowPlan,
    instance: &str,
    started: Instant,
) -> Result<FlowRuntime, RunError> {
    let source = admin(&plan.source, &plan.source_bootstrap, &plan.source_admin)?;
    let target = admin(&plan.target, &plan.target_bootstrap, &plan.target_admin)?;
    let source_ep = endpoint(&plan.source, &plan.source_bootstrap, &plan.source_fetch)?;
    let target_ep = endpoint(&plan.target, &plan.target_bootstrap, &plan.target_produce)?;
    match mm2_running(&target, &plan.source, &plan.target).await {
        Ok(None) => {}
        Ok(Some(why)) => {
            return Err(RunError::AlreadyReplicated {
                flow: format!("{}->{}", plan.source, plan.target),
                why,
            });
        }
        // A least-privilege principal need not see MM2's group: say that the check was not
        // made, and go on.
        Err(e) if e.is(kafka_protocol::ResponseError::GroupAuthorizationFailed) => {
            tracing::warn!(
                flow = %format!("{}->{}", plan.source, plan.target),
                "cannot tell whether MirrorMaker 2 replicates this flow too: {e}"
            );
        }
        Err(e) => return Err(e.into()),
    }
    let mut progress = ProgressStore::open_bounded(
        &target,
        &plan.source,
        plan.progress_replication_factor,
        plan.mapping_max_runs,
    )
    .await?;
    tracing::info!(
        flow = %format!("{}->{}", plan.source, plan.target),
        stored = progress.entries().len(),
        topic = progress.topic(),
        "progress loaded"
    );
    let topics = TopicSync::new(&plan, started);
    let mut liveness = Liveness::new(
        &plan.source,
        &plan.target,
        progress.topic(),
        instance,
        started,
    );
    liveness
        .beat_if_due(&target, Instant::now(), now_ms())
        .await;
    let restored = progress.take_restored();
    let eos = crate::duties::exactly_once::ExactlyOnce::for_flow(&plan.config, progress.topic());
    let offsets = OffsetsRuntime::start(
        &plan.config,
        source.clone(),
        target.clone(),
        progress.entries(),
        restored,
        Instant::now(),
    )?;
    Ok(FlowRuntime {
        plan,
        source,
        target,
        source_ep,
        target_ep,
        progress,
        topics,
        liveness,
        offsets,
        eos,
        eos_restarts: false,
        lost_position_resets: 0,
        observed: Default::default(),
        retired: false,
    })
}

/// A test knob: the capacity of each shard's command channel, 1 to
/// [`SHARD_CHANNEL_CAPACITY`] (the default). Tests lower it to make a shard's channel fill
/// up with a few partitions, as it does in production with more than 1 024 partitions on one
/// shard or with a shard that does not read it; not a setting (nothing gains from changing it).
pub const TEST_COMMAND_CHANNEL_ENV: &str = "STRAIT_TEST_SHARD_COMMAND_CHANNEL";

fn command_channel_capacity() -> usize {
    let set = std::env::var(TEST_COMMAND_CHANNEL_ENV).ok();
    match set.as_deref().map(|v| v.trim().parse::<usize>()) {
        None => SHARD_CHANNEL_CAPACITY,
        Some(Ok(n)) if (1..=SHARD_CHANNEL_CAPACITY).contains(&n) => {
            tracing::warn!(
                "{TEST_COMMAND_CHANNEL_ENV}={n}: the shards' command channels hold {n} commands (a test knob)"
            );
            n
        }
        Some(_) => {
            tracing::warn!(
                "{TEST_COMMAND_CHANNEL_ENV} must be 1 to {SHARD_CHANNEL_CAPACITY}; ignored"
            );
            SHARD_CHANNEL_CAPACITY
        }
    }
}

/// Starts `opts.shards` shard threads (at least one), pinned round-robin to the allowed cores,
/// and returns them with the receiving end of their shared event channel.
pub(super) fn spawn_shards(opts: &RunOptions) -> Result<(Shards, Receiver<ShardEvent>), RunError> {
    let capacity = command_channel_capacity();
    let (ev_tx, ev_rx) = crossbeam_channel::bounded::<ShardEvent>(1024);
    if !opts.pin && !opts.cpus.is_empty() {
        return Err(RunError::CpusUnpinned {
            cpus: cpu_list(&opts.cpus),
        });
    }
    let cores = shard_cores(&opts.cpus)?;
    let mut shards: Vec<ShardHandle> = Vec::new();
    for i in 0..opts.shards.max(1) {
        let mut cfg = ShardConfig::new(i, opts.backend);
        cfg.core = opts.pin.then(|| cores[i % cores.len()]);
        cfg.memory_budget_bytes = shard_memory_bytes(opts.memory_bytes, opts.shards);
        shards.push(
            spawn_shard(cfg, ev_tx.clone(), capacity)
                .map_err(|error| RunError::ShardStart { shard: i, error })?,
        );
    }
    drop(ev_tx);
    if !opts.pin {
        tracing::info!(
            shards = shards.len(),
            io = opts.backend.name(),
            shard_cpus = "not pinned (strait.cpus.pin = false)",
            control_cpu = "not pinned",
            "shards started"
        );
        return Ok((Shards::new(shards), ev_rx));
    }
    let used: Vec<usize> = (0..shards.len())
        .map(|i| cores[i % cores.len()].id)
        .collect();
    let control = place_control_thread(&used);
    tracing::info!(
        shards = shards.len(),
        io = opts.backend.name(),
        shard_cpus = ?used,
        control_cpu = control.map_or("shared with the shards".to_string(), |c| c.to_string()),
        "shards started"
    );
    Ok((Shards::new(shards), ev_rx))
}

/// The CPUs the shards are pinned to, round-robin: `strait.cpus`, each of which must be in the
/// inherited affinity mask; else the mask's (`allowed_cores`).
fn shard_cores(cpus: &[usize]) -> Result<Vec<strait_dataplane::io::runtime::CoreId>, RunError> {
    if cpus.is_empty() {
        return Ok(strait_dataplane::io::runtime::allowed_cores());
    }
    let mask = strait_dataplane::io::runtime::affinity_mask();
    let outside: Vec<usize> = cpus.iter().copied().filter(|c| !mask.contains(c)).collect();
    if !outside.is_empty() {
        return Err(RunError::Cpus {
            outside: cpu_list(&outside),
            mask: cpu_list(&mask),
        });
    }
    Ok(cpus
        .iter()
        .map(|&id| strait_dataplane::io::runtime::CoreId { id })
        .collect())
}

/// Pins the control thread (and so every thread it starts from now on) to the first CPU of
/// the inherited mask that no shard uses, if there is one; returns it.
fn place_control_thread(shard_cpus: &[usize]) -> Option<usize> {
    let spare = strait_dataplane::io::runtime::affinity_mask()
        .into_iter()
        .find(|c| !shard_cpus.contains(c))?;
    let core = strait_dataplane::io::runtime::CoreId { id: spare };
    strait_dataplane::io::runtime::pin_current_thread(core).then_some(spare)
}

fn cpu_list(cpus: &[usize]) -> String {
    cpus.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// Serves the REST API on `strait.api.listen`, when set. A configured address that cannot be
/// bound stops the run; the default one only warns.
pub(super) async fn start_api(opts: &RunOptions) -> Result<ApiLink, RunError> {
    let published = Published::default();
    let (api_tx, api_rx) = tokio::sync::mpsc::channel(opts.api_queue.max(1));
    if let Some(addr) = opts.api_listen {
        let auth = Auth::new(opts.api_token.clone(), addr);
        let tls = match &opts.api_tls {
            Some(ks) => Some(ks.server_config()?),
            None => None,
        };
        let scheme = if tls.is_some() { "https" } else { "http" };
        match crate::api::serve(addr, published.clone(), api_tx, auth, tls).await {
            Ok(bound) => {
                tracing::info!(address = %bound, scheme, "REST API and /metrics listening");
            }
            Err(e) if opts.api_required => return Err(e.into()),
            Err(e) => tracing::warn!("{e}; running without the REST API"),
        }
    }
    Ok(ApiLink::new(published, api_rx))
}

/// The data plane's view of a cluster: bootstrap servers, connection settings, TLS.
fn endpoint(
    alias: &str,
    bootstrap: &[String],
    cfg: &ConnConfig,
) -> Result<Arc<ClusterEndpoint>, RunError> {
    // Building the TLS config reads the trust and key stores: do it once, here.
    let setup =
        ConnSetup::new(cfg.clone(), IoBackend::Epoll).map_err(|error| RunError::Client {
            cluster: alias.to_string(),
            error,
        })?;
    Ok(Arc::new(ClusterEndpoint {
        alias: alias.to_string(),
        bootstrap: bootstrap.to_vec(),
        config: cfg.clone(),
        tls: setup.tls,
    }))
}

/// An admin client for the control plane.
fn admin(alias: &str, bootstrap: &[String], cfg: &ConnConfig) -> Result<Rc<Cluster>, RunError> {
    let setup =
        ConnSetup::new(cfg.clone(), IoBackend::Epoll).map_err(|error| RunError::Client {
            cluster: alias.to_string(),
            error,
        })?;
    Ok(Rc::new(Cluster::new(
        alias,
        bootstrap.to_vec(),
        setup,
        RetryConfig::default(),
    )))
}
