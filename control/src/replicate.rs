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
    Assignment, ClusterEndpoint, FailureKind, FetchSettings, FlowId, PartitionKey, ProduceSettings,
    ShardCommand, ShardConfig, ShardEvent, ShardHandle, ShardStats, spawn_shard,
};
use strait_dataplane::wire::ConnConfig;

use crate::cluster::{
    Cluster, ClusterError, IsolationLevel, NewTopic, OffsetSpec, RetryConfig, TopicMeta,
    TopicPartition,
};
use crate::progress::{self, ProgressStore};

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

/// Process-wide options.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub backend: IoBackend,
    pub shards: usize,
    pub shard_memory_bytes: usize,
    pub until_caught_up: bool,
    /// How often progress is written. Default 1 000 ms.
    pub progress_flush_ms: u64,
    /// Restart a partition whose position was lost from the earliest offset (else stop it).
    pub reset_lost_positions: bool,
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
}

pub(crate) struct FlowRuntime {
    plan: FlowPlan,
    source: Rc<Cluster>,
    target: Rc<Cluster>,
    source_ep: Arc<ClusterEndpoint>,
    target_ep: Arc<ClusterEndpoint>,
    progress: ProgressStore,
    /// Offset syncs, checkpoints and group-offset sync.
    offsets: crate::translate::OffsetsRuntime,
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
            offsets,
        });
    }

    let (ev_tx, ev_rx) = crossbeam_channel::bounded::<ShardEvent>(1024);
    let cores = strait_dataplane::io::runtime::allowed_cores();
    let mut shards: Vec<ShardHandle> = Vec::new();
    for i in 0..opts.shards.max(1) {
        let mut cfg = ShardConfig::new(i, opts.backend);
        cfg.core = Some(cores[i % cores.len()]);
        cfg.memory_budget_bytes = opts.shard_memory_bytes;
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

    let mut parts: BTreeMap<PartitionKey, PartitionState> = BTreeMap::new();
    let mut next_shard = 0usize;
    for (fid, flow) in flows.iter_mut().enumerate() {
        let fid = fid as FlowId;
        let assigned = plan_flow(flow, fid, &opts).await?;
        for (key, a, st) in assigned {
            let shard = next_shard % shards.len();
            if st.failed.is_none() {
                next_shard += 1;
                shards[shard]
                    .commands
                    .send(ShardCommand::Assign(Box::new(a)))
                    .map_err(|_| RunError::Setup(format!("shard {shard} is gone")))?;
            }
            parts.insert(key, PartitionState { shard, ..st });
        }
    }
    tracing::info!(partitions = parts.len(), "partitions assigned");

    let outcome = control_loop(&mut flows, &shards, &ev_rx, &mut parts, &opts, stop).await;

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
    for f in flows.iter_mut() {
        f.progress.flush(&f.target, now_ms()).await?;
    }
    // The last offset syncs; with --until-caught-up, a final round of checkpoints and group
    // sync over the final mapping.
    for f in flows.iter_mut() {
        f.offsets.finish(opts.until_caught_up, now_ms()).await;
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

/// Discovers a flow's topics, creates missing remote topics and decides each partition's start.
async fn plan_flow(
    flow: &mut FlowRuntime,
    fid: FlowId,
    opts: &RunOptions,
) -> Result<Vec<(PartitionKey, Assignment, PartitionState)>, RunError> {
    let plan = &flow.plan;
    let md = flow.source.refresh_metadata(None).await?;
    let topics: Vec<TopicMeta> = md
        .topics
        .values()
        .filter(|t| !t.is_internal && (plan.should_replicate)(&t.name))
        .cloned()
        .collect();
    let remote: Vec<String> = topics.iter().map(|t| (plan.remote_name)(&t.name)).collect();
    let tmd = flow
        .target
        .refresh_metadata(Some(&remote.iter().map(String::as_str).collect::<Vec<_>>()))
        .await?;
    let missing: Vec<NewTopic> = topics
        .iter()
        .zip(&remote)
        .filter(|(_, r)| !tmd.topics.contains_key(*r))
        .map(|(t, r)| NewTopic {
            name: r.clone(),
            partitions: t.partitions.len() as i32,
            replication_factor: plan.replication_factor,
            configs: Vec::new(),
        })
        .collect();
    if !missing.is_empty() {
        for (name, r) in flow.target.create_topics(&missing, 30_000).await? {
            match r {
                Ok(()) => {
                    tracing::info!(topic = %name, cluster = %plan.target, "created remote topic")
                }
                Err(e) if e.is(kafka_protocol::ResponseError::TopicAlreadyExists) => {}
                Err(e) => return Err(e.into()),
            }
        }
        flow.target
            .refresh_metadata(Some(&remote.iter().map(String::as_str).collect::<Vec<_>>()))
            .await?;
    }
    let max_bytes = flow.target.describe_topic_configs(&remote).await?;

    let all: Vec<TopicPartition> = topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| TopicPartition::new(&t.name, p.partition))
        })
        .collect();
    let isolation = if plan.fetch.isolation_level == 1 {
        IsolationLevel::ReadCommitted
    } else {
        IsolationLevel::ReadUncommitted
    };
    let earliest = flow
        .source
        .list_offsets(&all, OffsetSpec::Earliest, isolation)
        .await;
    let latest = flow
        .source
        .list_offsets(&all, OffsetSpec::Latest, isolation)
        .await;

    let mut out = Vec::new();
    for (t, r) in topics.iter().zip(&remote) {
        let max_message_bytes = max_bytes
            .get(r)
            .and_then(|c| c.as_ref().ok())
            .and_then(|c| c.iter().find(|e| e.name == "max.message.bytes"))
            .and_then(|e| e.value.as_deref())
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(strait_dataplane::batch::DEFAULT_MAX_MESSAGE_BYTES);
        for p in &t.partitions {
            let tp = TopicPartition::new(&t.name, p.partition);
            let key = PartitionKey::new(fid, &t.name, p.partition);
            let lo = earliest.get(&tp).and_then(|r| r.as_ref().ok()).copied();
            let hi = latest.get(&tp).and_then(|r| r.as_ref().ok()).copied();
            let (Some(lo), Some(hi)) = (lo, hi) else {
                let why = earliest
                    .get(&tp)
                    .and_then(|r| r.as_ref().err())
                    .or(latest.get(&tp).and_then(|r| r.as_ref().err()))
                    .map(|e| e.to_string())
                    .unwrap_or_else(|| "no offsets".into());
                return Err(RunError::Setup(format!(
                    "cannot read offsets of {tp} on {}: {why}",
                    plan.source
                )));
            };
            let mut failed = None;
            let start = match flow.progress.get(&tp) {
                Some(e) if e.topic_id != t.topic_id => {
                    let msg = format!(
                        "source topic {} was recreated (topic id {} is now {}): its stored position {} belongs to the old topic",
                        t.name,
                        progress::topic_id_display(&e.topic_id),
                        progress::topic_id_display(&t.topic_id),
                        e.next_offset
                    );
                    if opts.reset_lost_positions {
                        tracing::warn!(partition = %tp, "{msg}; restarting from the earliest offset {lo} (strait.on.lost.position=earliest)");
                        lo
                    } else {
                        failed = Some(msg);
                        e.next_offset
                    }
                }
                Some(e) if e.next_offset < lo => {
                    let msg = format!(
                        "source partition {tp} was truncated past strait's position: next offset {} is below the log start {lo}",
                        e.next_offset
                    );
                    if opts.reset_lost_positions {
                        tracing::warn!(partition = %tp, "{msg}; restarting from {lo} (strait.on.lost.position=earliest)");
                        lo
                    } else {
                        failed = Some(msg);
                        e.next_offset
                    }
                }
                Some(e) => e.next_offset,
                None if plan.start_at_earliest => lo,
                None => hi,
            };
            let state = PartitionState {
                shard: 0,
                flow: fid,
                topic_id: t.topic_id,
                next_offset: start,
                target_end: hi,
                failed: failed.clone(),
            };
            if let Some(msg) = failed {
                tracing::error!(partition = %tp, "{msg}; the partition is not replicated (set strait.on.lost.position=earliest to restart it)");
                // Record it as failed without assigning it.
                out.push((
                    key.clone(),
                    unassigned(&key, flow, r, start, max_message_bytes),
                    state,
                ));
                continue;
            }
            let a = Assignment {
                key: key.clone(),
                source: flow.source_ep.clone(),
                target: flow.target_ep.clone(),
                target_topic: Arc::from(r.as_str()),
                start_offset: start,
                max_message_bytes,
                fetch: plan.fetch,
                produce: plan.produce,
            };
            out.push((key, a, state));
        }
    }
    Ok(out)
}

/// An assignment that is never sent (the partition is failed before it starts); kept so that
/// the bookkeeping has one shape.
fn unassigned(
    key: &PartitionKey,
    flow: &FlowRuntime,
    remote: &str,
    start: i64,
    max: usize,
) -> Assignment {
    Assignment {
        key: key.clone(),
        source: flow.source_ep.clone(),
        target: flow.target_ep.clone(),
        target_topic: Arc::from(remote),
        start_offset: start,
        max_message_bytes: max,
        fetch: flow.plan.fetch,
        produce: flow.plan.produce,
    }
}

async fn control_loop(
    flows: &mut [FlowRuntime],
    shards: &[ShardHandle],
    ev_rx: &Receiver<ShardEvent>,
    parts: &mut BTreeMap<PartitionKey, PartitionState>,
    opts: &RunOptions,
    stop: impl std::future::Future<Output = ()>,
) -> Result<(), RunError> {
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
        loop {
            match ev_rx.try_recv() {
                Ok(ev) => apply_event(ev, flows, parts, &mut stats, shards, opts).await,
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    return Err(RunError::Setup("every shard stopped".into()));
                }
            }
        }
        for f in flows.iter_mut() {
            f.offsets.tick(Instant::now(), now_ms()).await;
        }
        if last_flush.elapsed() >= Duration::from_millis(opts.progress_flush_ms) {
            last_flush = Instant::now();
            for f in flows.iter_mut() {
                if let Err(e) = f.progress.flush(&f.target, now_ms()).await {
                    tracing::warn!(error = %e, "cannot write progress; will retry");
                }
            }
        }
        if opts.until_caught_up
            && parts
                .values()
                .all(|p| p.failed.is_some() || p.next_offset >= p.target_end)
        {
            tracing::info!("every partition reached the end it had at start");
            return Ok(());
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
            // Offsets: the segments first, then the acknowledged ends they cover.
            for (key, segments) in &mappings {
                if let Some(f) = flows.get_mut(key.flow as usize) {
                    f.offsets.on_segments(&key.topic, key.partition, segments);
                }
            }
            for p in &progress {
                if let Some(f) = flows.get_mut(p.key.flow as usize) {
                    f.offsets
                        .on_progress(&p.key.topic, p.key.partition, p.next_offset);
                }
            }
            for p in progress {
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
                tracing::warn!(partition = %key, "{error}; restarting from the log start {log_start_offset} (strait.on.lost.position=earliest)");
                let _ = shards[st.shard]
                    .commands
                    .send(ShardCommand::Seek(key.clone(), *log_start_offset));
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
            if let Some(f) = flows.get_mut(key.flow as usize) {
                f.offsets.on_segments(&key.topic, key.partition, &mappings);
                f.offsets
                    .on_progress(&key.topic, key.partition, next_offset);
            }
            if let Some(st) = parts.get_mut(&key) {
                st.next_offset = next_offset;
            }
        }
        ShardEvent::Stopped { .. } => {}
    }
}
