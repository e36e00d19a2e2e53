//! `strait run`: the control loop. It starts the shards, discovers the topics of every enabled
//! flow, creates remote topics, resumes each partition from the progress store, assigns
//! partitions to shards, persists progress, and (with `--until-caught-up`) stops once every
//! partition has reached the end its source had at start.

use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, TryRecvError};
use strait_dataplane::io::{ConnSetup, IoBackend};
use strait_dataplane::shard::{
    ClusterEndpoint, FailureKind, FetchSettings, FlowId, PartitionKey, ProduceSettings,
    ShardCommand, ShardConfig, ShardEvent, ShardHandle, ShardStats, spawn_shard,
};
use strait_dataplane::wire::ConnConfig;

use crate::cluster::{Cluster, ClusterError, RetryConfig, TopicPartition};
use crate::heartbeat::{HeartbeatPlan, Heartbeats};
use crate::migrate::Liveness;
use crate::progress::{self, ProgressStore};
use crate::topics::{FlowIo, TopicChange, TopicError, TopicSync};

/// One enabled flow, reduced to what the control loop needs.
pub struct FlowPlan {
    /// The whole resolved flow configuration (intervals, filters, policy, client settings) for
    /// the periodic duties.
    pub config: crate::config::FlowConfig,
    pub source: String,
    pub target: String,
    /// Consumer-side connection to the source (fetching).
    pub source_fetch: ConnConfig,
    /// Producer-side connection to the target.
    pub target_produce: ConnConfig,
    pub source_admin: ConnConfig,
    pub target_admin: ConnConfig,
    pub source_bootstrap: Vec<String>,
    pub target_bootstrap: Vec<String>,
    /// Whether a source topic is replicated (filters, internal topics, cycles).
    pub should_replicate: Box<dyn Fn(&str) -> bool>,
    /// The remote name of a source topic.
    pub remote_name: Box<dyn Fn(&str) -> String>,
    /// Remote topics' replication factor (-1 = the target's default).
    pub replication_factor: i16,
    pub progress_replication_factor: i16,
    pub fetch: FetchSettings,
    pub produce: ProduceSettings,
    /// `auto.offset.reset=earliest` (MM2's default) for partitions without progress.
    pub start_at_earliest: bool,
}

impl std::fmt::Debug for FlowPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FlowPlan({}->{})", self.source, self.target)
    }
}

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
    /// Whether failing to listen stops the run (the address was configured) or only warns
    /// (the default address is taken, e.g. by another strait on the host).
    pub api_required: bool,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOutcome {
    /// Partitions that stopped with an error, and why.
    pub failed: Vec<(String, String)>,
    pub partitions: usize,
    pub stats: ShardStats,
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    #[error(transparent)]
    Topics(#[from] TopicError),
    #[error("{0}")]
    Setup(String),
    #[error(transparent)]
    Offsets(#[from] crate::translate::OffsetsError),
}

pub(crate) struct PartitionState {
    shard: usize,
    flow: FlowId,
    topic_id: [u8; 16],
    next_offset: i64,
    /// `--until-caught-up`: the source end at start.
    target_end: i64,
    failed: Option<String>,
    /// `shard` holds the partition (an Assign was sent and no Revoke since).
    assigned: bool,
    /// The source topic disappeared: the shard holds the partition paused, so that the topic
    /// coming back continues the same slot (and its producer sequence) with a Seek.
    vanished: bool,
    /// The source's end at the shard's last fetch (-1 before it), for lag.
    end_offset: i64,
    /// Paused by an operator (REST API).
    paused: bool,
}

pub(crate) struct FlowRuntime {
    plan: FlowPlan,
    source: Rc<Cluster>,
    target: Rc<Cluster>,
    source_ep: Arc<ClusterEndpoint>,
    target_ep: Arc<ClusterEndpoint>,
    progress: ProgressStore,
    topics: TopicSync,
    liveness: Liveness,
    /// Offset syncs, checkpoints and group-offset sync.
    offsets: crate::translate::OffsetsRuntime,
    /// Partitions restarted from the earliest offset after their position was lost
    /// (`strait.on.lost.position=earliest`), for `/metrics`.
    lost_position_resets: u64,
}

fn endpoint(
    alias: &str,
    bootstrap: &[String],
    cfg: &ConnConfig,
) -> Result<Arc<ClusterEndpoint>, RunError> {
    // Building the TLS config reads the trust and key stores: do it once, here.
    let setup = ConnSetup::new(cfg.clone(), IoBackend::Epoll)
        .map_err(|e| RunError::Setup(format!("cluster {alias}: {e}")))?;
    Ok(Arc::new(ClusterEndpoint {
        alias: alias.to_string(),
        bootstrap: bootstrap.to_vec(),
        config: cfg.clone(),
        tls: setup.tls,
    }))
}

fn admin(alias: &str, bootstrap: &[String], cfg: &ConnConfig) -> Result<Rc<Cluster>, RunError> {
    let setup = ConnSetup::new(cfg.clone(), IoBackend::Epoll)
        .map_err(|e| RunError::Setup(format!("cluster {alias}: {e}")))?;
    Ok(Rc::new(Cluster::new(
        alias,
        bootstrap.to_vec(),
        setup,
        RetryConfig::default(),
    )))
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Runs the flows until `--until-caught-up` is satisfied or `stop` resolves. Must run on the
/// control thread's single-threaded runtime.
pub async fn run(
    plans: Vec<FlowPlan>,
    opts: RunOptions,
    stop: impl std::future::Future<Output = ()>,
) -> Result<RunOutcome, RunError> {
    let started = Instant::now();
    // Identifies this process in the liveness records (`migrate`).
    let instance = uuid::Uuid::new_v4().simple().to_string();
    let mut heartbeats =
        Heartbeats::new(&opts.heartbeats, started).map_err(|e| RunError::Setup(e.to_string()))?;
    // Before the first discovery, so that a flow in the other direction finds the topic.
    heartbeats.start().await;
    let mut flows = Vec::new();
    for plan in plans {
        let source = admin(&plan.source, &plan.source_bootstrap, &plan.source_admin)?;
        let target = admin(&plan.target, &plan.target_bootstrap, &plan.target_admin)?;
        let source_ep = endpoint(&plan.source, &plan.source_bootstrap, &plan.source_fetch)?;
        let target_ep = endpoint(&plan.target, &plan.target_bootstrap, &plan.target_produce)?;
        let progress =
            ProgressStore::open(&target, &plan.source, plan.progress_replication_factor).await?;
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
            &instance,
            started,
        );
        liveness
            .beat_if_due(&target, Instant::now(), now_ms())
            .await;
        let offsets = crate::translate::OffsetsRuntime::start(
            &plan.config,
            source.clone(),
            target.clone(),
            progress.entries(),
            Instant::now(),
        )
        .await?;
        flows.push(FlowRuntime {
            plan,
            source,
            target,
            source_ep,
            target_ep,
            progress,
            topics,
            liveness,
            offsets,
            lost_position_resets: 0,
        });
    }

    let (ev_tx, ev_rx) = crossbeam_channel::bounded::<ShardEvent>(1024);
    let cores = strait_dataplane::io::runtime::allowed_cores();
    let mut shards: Vec<ShardHandle> = Vec::new();
    for i in 0..opts.shards.max(1) {
        let mut cfg = ShardConfig::new(i, opts.backend);
        cfg.core = Some(cores[i % cores.len()]);
        cfg.memory_budget_bytes = shard_memory_bytes(opts.memory_bytes, opts.shards);
        shards.push(
            spawn_shard(cfg, ev_tx.clone(), 1024)
                .map_err(|e| RunError::Setup(format!("cannot start shard {i}: {e}")))?,
        );
    }
    drop(ev_tx);
    tracing::info!(
        shards = shards.len(),
        io = opts.backend.name(),
        "shards started"
    );

    let published = crate::api::Published::default();
    let (api_tx, api_rx) = tokio::sync::mpsc::channel(64);
    if let Some(addr) = opts.api_listen {
        match crate::api::serve(addr, published.clone(), api_tx).await {
            Ok(bound) => tracing::info!(address = %bound, "REST API and /metrics listening"),
            Err(e) if opts.api_required => return Err(RunError::Setup(e)),
            Err(e) => tracing::warn!("{e}; running without the REST API"),
        }
    }
    let mut api = ApiLink {
        published,
        commands: api_rx,
        last_publish: None,
    };

    let mut parts: BTreeMap<PartitionKey, PartitionState> = BTreeMap::new();
    let mut changes = Vec::new();
    for (fid, flow) in flows.iter_mut().enumerate() {
        changes.extend(plan_flow(flow, fid as FlowId, &opts).await?);
    }
    apply_topic_changes(changes, &mut flows, &shards, &mut parts, &opts)?;
    tracing::info!(partitions = parts.len(), "partitions assigned");

    let outcome = control_loop(
        &mut flows,
        &shards,
        &ev_rx,
        &mut parts,
        &opts,
        &mut ProcessDuties {
            heartbeats: &mut heartbeats,
            api: &mut api,
        },
        stop,
    )
    .await;

    // Stop the shards and wait for their final reports.
    for s in &shards {
        let _ = s.commands.send(ShardCommand::Shutdown);
    }
    let mut stopped = 0;
    let mut stats: HashMap<usize, ShardStats> = HashMap::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while stopped < shards.len() && Instant::now() < deadline {
        match ev_rx.try_recv() {
            Ok(ev) => {
                if let ShardEvent::Stopped { shard, error } = &ev {
                    stopped += 1;
                    if let Some(e) = error {
                        tracing::error!(shard, error = %e, "shard stopped with an error");
                    }
                }
                apply_event(ev, &mut flows, &mut parts, &mut stats, &shards, &opts).await;
            }
            Err(TryRecvError::Empty) => tokio::time::sleep(Duration::from_millis(10)).await,
            Err(TryRecvError::Disconnected) => break,
        }
    }
    for s in shards {
        let _ = s.thread.join();
    }
    // The last offset syncs; with --until-caught-up, a final round of checkpoints and group
    // sync over the final mapping. Before the clean stop is recorded: they write too.
    for f in flows.iter_mut() {
        f.offsets.finish(opts.until_caught_up, now_ms()).await;
    }
    for f in flows.iter_mut() {
        f.progress.flush(&f.target, now_ms()).await?;
        // Import and export may run from now on.
        if let Err(e) = f.liveness.stopped(&f.target, now_ms()).await {
            tracing::warn!("cannot record the clean stop: {e}");
        }
    }
    let mut total = ShardStats::default();
    for s in stats.values() {
        add_stats(&mut total, s);
    }
    let failed = parts
        .iter()
        .filter_map(|(k, p)| {
            p.failed
                .clone()
                .map(|e| (format!("{}-{}", k.topic, k.partition), e))
        })
        .collect();
    outcome?;
    Ok(RunOutcome {
        failed,
        partitions: parts.len(),
        stats: total,
    })
}

fn add_stats(total: &mut ShardStats, s: &ShardStats) {
    total.fetch_requests += s.fetch_requests;
    total.fetch_bytes += s.fetch_bytes;
    total.produce_requests += s.produce_requests;
    total.produced_batches += s.produced_batches;
    total.produced_records += s.produced_records;
    total.produced_bytes += s.produced_bytes;
    total.fast_batches += s.fast_batches;
    total.slow_batches += s.slow_batches;
    total.slow_bytes += s.slow_bytes;
    total.dropped_control += s.dropped_control;
    total.dropped_aborted += s.dropped_aborted;
    total.produce_retries += s.produce_retries;
    total.reconnects += s.reconnects;
    total.buffered_bytes += s.buffered_bytes;
}

/// The first discovery of a flow: the same pass topic management runs every
/// `refresh.topics.interval.seconds`, but its errors stop the run.
async fn plan_flow(
    flow: &mut FlowRuntime,
    fid: FlowId,
    opts: &RunOptions,
) -> Result<Vec<TopicChange>, RunError> {
    Ok(topic_duties(flow, fid, opts, None).await?)
}

/// Runs a flow's topic management: the first discovery (`now = None`), or whatever is due.
async fn topic_duties(
    flow: &mut FlowRuntime,
    fid: FlowId,
    opts: &RunOptions,
    now: Option<Instant>,
) -> Result<Vec<TopicChange>, TopicError> {
    let FlowRuntime {
        plan,
        source,
        target,
        source_ep,
        target_ep,
        progress,
        topics,
        ..
    } = flow;
    let io = FlowIo {
        fid,
        plan,
        source,
        target,
        source_ep,
        target_ep,
        progress,
        reset_lost_positions: opts.reset_lost_positions,
    };
    match now {
        None => topics.discover(&io).await,
        Some(now) => Ok(topics.tick(&io, now).await),
    }
}

/// Acts on topic management's findings: assigns new partitions to the least loaded shards,
/// stops or restarts partitions of recreated topics, drops deleted ones and forwards
/// `max.message.bytes` changes.
fn apply_topic_changes(
    changes: Vec<TopicChange>,
    flows: &mut [FlowRuntime],
    shards: &[ShardHandle],
    parts: &mut BTreeMap<PartitionKey, PartitionState>,
    opts: &RunOptions,
) -> Result<(), RunError> {
    if changes.is_empty() {
        return Ok(());
    }
    let send = |shard: usize, cmd: ShardCommand| {
        shards[shard]
            .commands
            .send(cmd)
            .map_err(|_| RunError::Setup(format!("shard {shard} is gone")))
    };
    let mut load = vec![0usize; shards.len()];
    for p in parts.values().filter(|p| p.failed.is_none()) {
        if let Some(l) = load.get_mut(p.shard) {
            *l += 1;
        }
    }
    for change in changes {
        match change {
            TopicChange::Start(np) => {
                let start = np.assignment.start_offset;
                // A partition its shard still holds (its topic vanished and came back): reuse
                // the slot. A new slot on the same shard would restart the producer's sequence
                // numbers for the target partition, which the broker refuses.
                if let Some(st) = parts.get_mut(&np.key)
                    && st.assigned
                {
                    let shard = st.shard;
                    match np.failed {
                        None => {
                            send(shard, ShardCommand::Seek(np.key.clone(), start))?;
                            send(
                                shard,
                                ShardCommand::SetMaxMessageBytes(
                                    np.key.clone(),
                                    np.assignment.max_message_bytes,
                                ),
                            )?;
                            if st.vanished {
                                send(shard, ShardCommand::Resume(np.key.clone()))?;
                            }
                        }
                        Some(_) => {
                            send(shard, ShardCommand::Revoke(np.key.clone()))?;
                            st.assigned = false;
                        }
                    }
                    st.topic_id = np.topic_id;
                    st.next_offset = start;
                    st.target_end = np.end_offset;
                    st.failed = np.failed;
                    st.vanished = false;
                    continue;
                }
                let shard = (0..load.len()).min_by_key(|&i| load[i]).unwrap_or(0);
                let assigned = np.failed.is_none();
                if assigned {
                    load[shard] += 1;
                    send(shard, ShardCommand::Assign(Box::new(np.assignment.clone())))?;
                }
                parts.insert(
                    np.key.clone(),
                    PartitionState {
                        shard,
                        flow: np.key.flow,
                        topic_id: np.topic_id,
                        next_offset: start,
                        target_end: np.end_offset,
                        failed: np.failed,
                        assigned,
                        vanished: false,
                        end_offset: -1,
                        paused: false,
                    },
                );
            }
            TopicChange::Recreated {
                key,
                new_topic_id,
                log_start,
                message,
            } => {
                let Some(st) = parts.get_mut(&key) else {
                    continue;
                };
                // Already restarted on the new topic (after the shard lost its position).
                if st.topic_id == new_topic_id {
                    continue;
                }
                if opts.reset_lost_positions {
                    if !st.assigned {
                        continue;
                    }
                    st.failed = None;
                    tracing::warn!(partition = %key, "{message}; RESTARTING FROM THE EARLIEST OFFSET {log_start} (strait.on.lost.position=earliest): records may be skipped or copied again");
                    send(st.shard, ShardCommand::Seek(key.clone(), log_start))?;
                    st.topic_id = new_topic_id;
                    st.next_offset = log_start;
                    if let Some(f) = flows.get_mut(st.flow as usize) {
                        f.lost_position_resets += 1;
                        f.progress.update(
                            &TopicPartition::new(&*key.topic, key.partition),
                            progress::Entry {
                                next_offset: log_start,
                                topic_id: new_topic_id,
                                target_offset: -1,
                            },
                        );
                    }
                } else if st.failed.is_none() {
                    let error = format!(
                        "{message}; the partition is stopped (set strait.on.lost.position=earliest to restart it from the earliest offset)"
                    );
                    tracing::error!(partition = %key, "{error}");
                    send(st.shard, ShardCommand::Revoke(key.clone()))?;
                    st.assigned = false;
                    st.failed = Some(error);
                }
            }
            TopicChange::Vanished { key } => match parts.get_mut(&key) {
                Some(st) if st.assigned => {
                    send(st.shard, ShardCommand::Pause(key))?;
                    st.vanished = true;
                }
                Some(_) => {
                    parts.remove(&key);
                }
                None => {}
            },
            TopicChange::MaxMessageBytes { key, bytes } => {
                if let Some(st) = parts.get(&key)
                    && st.assigned
                {
                    send(st.shard, ShardCommand::SetMaxMessageBytes(key, bytes))?;
                }
            }
        }
    }
    Ok(())
}

async fn control_loop(
    flows: &mut [FlowRuntime],
    shards: &[ShardHandle],
    ev_rx: &Receiver<ShardEvent>,
    parts: &mut BTreeMap<PartitionKey, PartitionState>,
    opts: &RunOptions,
    duties: &mut ProcessDuties<'_>,
    stop: impl std::future::Future<Output = ()>,
) -> Result<(), RunError> {
    let ProcessDuties { heartbeats, api } = duties;
    tokio::pin!(stop);
    let mut stats: HashMap<usize, ShardStats> = HashMap::new();
    let mut last_flush = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_millis(20));
    loop {
        tokio::select! {
            _ = &mut stop => {
                tracing::info!("stopping");
                return Ok(());
            }
            _ = tick.tick() => {}
        }
        drain_events(ev_rx, flows, parts, &mut stats, shards, opts).await?;
        if let Some(dead) = shards.iter().find(|s| s.thread.is_finished()) {
            return Err(RunError::Setup(format!(
                "shard {} stopped unexpectedly; stopping (its partitions resume from stored progress at the next start)",
                dead.index
            )));
        }
        api.apply_commands(flows, parts, shards);
        api.publish_if_due(flows, parts, &stats, opts);
        if last_flush.elapsed() >= Duration::from_millis(opts.progress_flush_ms) {
            last_flush = Instant::now();
            for f in flows.iter_mut() {
                if let Err(e) = f.progress.flush(&f.target, now_ms()).await {
                    tracing::warn!(error = %e, "cannot write progress; will retry");
                }
                f.liveness
                    .beat_if_due(&f.target, last_flush, now_ms())
                    .await;
            }
        }
        let now = Instant::now();
        heartbeats.tick(now, now_ms()).await;
        for f in flows.iter_mut() {
            f.offsets.tick(now, now_ms()).await;
        }
        let mut changes = Vec::new();
        for (fid, f) in flows.iter_mut().enumerate() {
            // tick() logs its own errors and retries at the next interval.
            if let Ok(c) = topic_duties(f, fid as FlowId, opts, Some(now)).await {
                changes.extend(c);
            }
        }
        if !changes.is_empty() {
            // What the shards reported while the duties ran predates these changes: a failure
            // that a change resolves (a restart on a recreated topic) must come first.
            drain_events(ev_rx, flows, parts, &mut stats, shards, opts).await?;
        }
        apply_topic_changes(changes, flows, shards, parts, opts)?;
        if opts.until_caught_up
            && parts
                .values()
                .all(|p| p.failed.is_some() || p.vanished || p.next_offset >= p.target_end)
        {
            tracing::info!("every partition reached the end it had at start");
            return Ok(());
        }
    }
}

/// Duties of the whole process (not of one flow).
struct ProcessDuties<'a> {
    heartbeats: &'a mut Heartbeats,
    api: &'a mut ApiLink,
}

/// The control loop's side of the REST API: it publishes status snapshots and carries out
/// operator commands.
struct ApiLink {
    published: crate::api::Published,
    commands: tokio::sync::mpsc::Receiver<crate::api::ApiCommand>,
    last_publish: Option<Instant>,
}

/// How often the API's snapshot is refreshed.
const PUBLISH_INTERVAL: Duration = Duration::from_secs(1);

impl ApiLink {
    fn apply_commands(
        &mut self,
        flows: &[FlowRuntime],
        parts: &mut BTreeMap<PartitionKey, PartitionState>,
        shards: &[ShardHandle],
    ) {
        use crate::api::ApiCommand;
        while let Ok(cmd) = self.commands.try_recv() {
            let (flow, topic, partition, pause) = match cmd {
                ApiCommand::Pause {
                    flow,
                    topic,
                    partition,
                } => (flow, topic, partition, true),
                ApiCommand::Resume {
                    flow,
                    topic,
                    partition,
                } => (flow, topic, partition, false),
            };
            let Some(fid) = flows
                .iter()
                .position(|f| format!("{}->{}", f.plan.source, f.plan.target) == flow)
            else {
                tracing::warn!(flow = %flow, "API command for an unknown flow");
                continue;
            };
            let key = PartitionKey::new(fid as FlowId, &topic, partition);
            let Some(st) = parts.get_mut(&key).filter(|st| st.assigned) else {
                tracing::warn!(partition = %key, "API command for a partition that is not replicated");
                continue;
            };
            let cmd = if pause {
                ShardCommand::Pause(key.clone())
            } else {
                ShardCommand::Resume(key.clone())
            };
            if shards[st.shard].commands.try_send(cmd).is_ok() {
                st.paused = pause;
                tracing::info!(partition = %key, paused = pause, "operator request applied");
            }
        }
    }

    fn publish_if_due(
        &mut self,
        flows: &[FlowRuntime],
        parts: &BTreeMap<PartitionKey, PartitionState>,
        stats: &HashMap<usize, ShardStats>,
        opts: &RunOptions,
    ) {
        let now = Instant::now();
        if self
            .last_publish
            .is_some_and(|t| now.duration_since(t) < PUBLISH_INTERVAL)
        {
            return;
        }
        self.last_publish = Some(now);
        self.published
            .publish(status(flows, parts, stats, opts), now);
    }
}

/// The API's view of the run.
fn status(
    flows: &[FlowRuntime],
    parts: &BTreeMap<PartitionKey, PartitionState>,
    stats: &HashMap<usize, ShardStats>,
    opts: &RunOptions,
) -> crate::api::Status {
    use crate::api::{FlowStatus, PartitionStatus, ShardStatus};
    let mut out: Vec<FlowStatus> = flows
        .iter()
        .map(|f| FlowStatus {
            name: format!("{}->{}", f.plan.source, f.plan.target),
            partitions: Vec::new(),
        })
        .collect();
    for (key, st) in parts {
        let Some(f) = out.get_mut(key.flow as usize) else {
            continue;
        };
        let state = if st.failed.is_some() {
            "failed"
        } else if st.paused || st.vanished {
            "paused"
        } else {
            "replicating"
        };
        f.partitions.push(PartitionStatus {
            topic: key.topic.to_string(),
            partition: key.partition,
            remote_topic: (flows[key.flow as usize].plan.remote_name)(&key.topic),
            next_offset: st.next_offset,
            end_offset: st.end_offset,
            lag: if st.end_offset >= 0 {
                (st.end_offset - st.next_offset).max(0)
            } else {
                0
            },
            state: state.to_string(),
            error: st.failed.clone(),
            shard: st.shard,
        });
    }
    let mut shard_status: Vec<ShardStatus> = stats
        .iter()
        .map(|(i, s)| ShardStatus::from_stats(*i, s))
        .collect();
    shard_status.sort_by_key(|s| s.shard);
    crate::api::Status {
        version: env!("CARGO_PKG_VERSION").to_string(),
        io_backend: opts.backend.name().to_string(),
        flows: out,
        shards: shard_status,
        lost_position_resets: flows.iter().map(|f| f.lost_position_resets).sum(),
    }
}

/// Applies every event the shards have sent so far.
async fn drain_events(
    ev_rx: &Receiver<ShardEvent>,
    flows: &mut [FlowRuntime],
    parts: &mut BTreeMap<PartitionKey, PartitionState>,
    stats: &mut HashMap<usize, ShardStats>,
    shards: &[ShardHandle],
    opts: &RunOptions,
) -> Result<(), RunError> {
    loop {
        match ev_rx.try_recv() {
            Ok(ev) => apply_event(ev, flows, parts, stats, shards, opts).await,
            Err(TryRecvError::Empty) => return Ok(()),
            Err(TryRecvError::Disconnected) => {
                return Err(RunError::Setup("every shard stopped".into()));
            }
        }
    }
}

async fn apply_event(
    ev: ShardEvent,
    flows: &mut [FlowRuntime],
    parts: &mut BTreeMap<PartitionKey, PartitionState>,
    stats: &mut HashMap<usize, ShardStats>,
    shards: &[ShardHandle],
    opts: &RunOptions,
) {
    match ev {
        ShardEvent::Report {
            shard,
            progress,
            mappings,
            stats: s,
        } => {
            stats.insert(shard, s);
            // Offsets: the segments first, then the acknowledged ends they cover; only from the
            // shard that holds (or last held) the partition, so that they arrive in order.
            for (key, segments) in &mappings {
                if let Some(st) = parts.get(key).filter(|st| st.shard == shard)
                    && let Some(f) = flows.get_mut(st.flow as usize)
                {
                    f.offsets.on_segments(&key.topic, key.partition, segments);
                }
            }
            for p in &progress {
                if let Some(st) = parts.get(&p.key).filter(|st| st.shard == shard)
                    && let Some(f) = flows.get_mut(st.flow as usize)
                {
                    f.offsets
                        .on_progress(&p.key.topic, p.key.partition, p.next_offset);
                }
            }
            for p in progress {
                if let Some(st) = parts.get_mut(&p.key).filter(|st| st.shard == shard) {
                    st.end_offset = p.end_offset;
                }
                if let Some(st) = parts.get_mut(&p.key) {
                    st.next_offset = p.next_offset;
                    if let Some(f) = flows.get_mut(st.flow as usize) {
                        f.progress.update(
                            &TopicPartition::new(&*p.key.topic, p.key.partition),
                            progress::Entry {
                                next_offset: p.next_offset,
                                topic_id: st.topic_id,
                                target_offset: p.target_next_offset,
                            },
                        );
                    }
                }
            }
        }
        ShardEvent::PartitionFailed {
            key,
            kind,
            error,
            next_offset,
            ..
        } => {
            let Some(st) = parts.get_mut(&key) else {
                return;
            };
            st.next_offset = next_offset;
            if let (
                FailureKind::PositionLost {
                    log_start_offset, ..
                },
                true,
            ) = (&kind, opts.reset_lost_positions)
            {
                if *log_start_offset >= 0 {
                    tracing::warn!(partition = %key, "{error}; RESTARTING FROM THE EARLIEST OFFSET {log_start_offset} (strait.on.lost.position=earliest)");
                    let _ = shards[st.shard]
                        .commands
                        .send(ShardCommand::Seek(key.clone(), *log_start_offset));
                    st.next_offset = *log_start_offset;
                    if let Some(f) = flows.get_mut(st.flow as usize) {
                        f.lost_position_resets += 1;
                    }
                    return;
                }
                // No log start: the partition is being deleted (and perhaps created again).
                // Topic discovery restarts it when the topic is back, with its new id.
                tracing::error!(partition = %key, "{error}; the source partition is being deleted: it restarts when topic discovery sees the topic again");
                st.failed = Some(error);
                return;
            }
            tracing::error!(partition = %key, "{error}");
            st.failed = Some(error);
        }
        ShardEvent::Revoked {
            key,
            next_offset,
            mappings,
            ..
        } => {
            // Only control revokes, and it marks the state unassigned when it does; an assigned
            // state under the same key is a newer assignment, which this event must not touch.
            if let Some(st) = parts.get_mut(&key)
                && !st.assigned
            {
                st.next_offset = next_offset;
                if let Some(f) = flows.get_mut(st.flow as usize) {
                    f.offsets.on_segments(&key.topic, key.partition, &mappings);
                    f.offsets
                        .on_progress(&key.topic, key.partition, next_offset);
                }
            }
        }
        ShardEvent::Stopped { .. } => {}
    }
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
