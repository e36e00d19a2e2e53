//! Offset translation at run time: the IO side of [`crate::offsets`] for `strait run` and
//! `strait offsets translate`.
//!
//! One [`OffsetsRuntime`] per flow, owned by the control loop:
//! - [`OffsetsRuntime::on_segments`] takes the shards' exact mapping segments (from
//!   `ShardEvent::Report` and `ShardEvent::Revoked`): they extend the per-partition
//!   [`OffsetMapping`](crate::offsets::OffsetMapping) and drive MM2's offset-sync cadence ([`OffsetSyncWriter`]);
//! - [`OffsetsRuntime::on_progress`] takes each partition's acknowledged end (every source
//!   record below it is replicated), which makes translation exact up to that end even where it
//!   ends in records strait never copies (transaction markers, aborted records);
//! - [`OffsetsRuntime::tick`] runs the periodic duties: offset syncs to
//!   `mm2-offset-syncs.<alias>.internal` (MM2's cadence, at most
//!   [`OffsetsSettings::max_outstanding_syncs`] in flight), the latest sync of every partition
//!   every `offset.flush.interval.ms`, the source group list every
//!   `refresh.groups.interval.seconds`, checkpoints every `emit.checkpoints.interval.seconds`,
//!   and group-offset sync every `sync.group.offsets.interval.seconds`;
//! - [`OffsetsRuntime::finish`] on the way out publishes the latest sync of every partition and,
//!   with `--until-caught-up`, runs one last round of group refresh, checkpoints and group sync.
//!
//! # Start and restart
//!
//! [`OffsetsRuntime::start`] does what MM2's checkpoint task does at start, in its order: it
//! creates the checkpoints topic (`<source>.checkpoints.internal` on the target, one partition,
//! compacted) and loads the last checkpoint of every selected group from it; then it creates the
//! offset-syncs topic (placed by `offset-syncs.topic.location`) and reads it whole into MM2's
//! [`OffsetSyncStore`](crate::offsets::OffsetSyncStore) (keeping full history only when the checkpoints could be read, as
//! KAFKA-15905 does). So a restarted instance translates from the offset syncs as soon as they
//! are read, whether or not it has replicated anything by then.
//!
//! That load runs in the background (a local task): far from the source, reading the
//! offset-syncs topic whole takes seconds that replication need not wait for. Meanwhile the
//! exact mapping takes the shards' segments as usual (the progress store writes it), the offset
//! sync writer queues what they call for (at most one pending and one delayed sync per
//! partition, as always), and nothing is sent or checkpointed: the rounds that fall due wait for
//! the load and run at the first tick after it ([`OffsetsRuntime::tick`]), so no checkpoint comes
//! from a translator without its offset syncs. The control loop takes the load's outcome every
//! turn ([`OffsetsRuntime::poll_load`]); its error stops the run as it did when the run waited
//! for it at start, only later.
//!
//! strait's progress adds one exact pair per partition: on shutdown strait publishes the last
//! sync of every partition, and when that sync's downstream offset is the last record of the
//! target partition and the stored progress is past its upstream offset, every upstream offset
//! from the sync up to the progress maps exactly to the target's end (no record in between was
//! replicated: it would sit after the sync downstream). See [`seed_from_progress`].
//!
//! # Bounds
//!
//! - Mapping: at most [`crate::offsets::mapping::DEFAULT_MAX_SEGMENTS`] runs per partition,
//!   32 KiB worst case, for the partitions this instance replicates; one `i64` of acknowledged
//!   end per partition.
//! - Offset syncs: one writer state and at most one pending and one delayed sync per partition;
//!   at most `max_outstanding_syncs` (MM2's 10) sent and not completed; the sync store holds at
//!   most [`crate::offsets::sync_store::DEFAULT_MAX_PARTITIONS`] partitions of 64 syncs.
//! - Groups: at most [`DEFAULT_MAX_GROUPS`] per flow (the rest are left out with a warning);
//!   checkpoint entries at most [`crate::offsets::checkpoint::DEFAULT_MAX_CHECKPOINT_ENTRIES`].
//! - Every admin call retries a bounded number of times, and every periodic round is cut off
//!   after `admin.timeout.ms`.
//!
//! The control thread runs these rounds inline: they are small (one request per group and a
//! produce or two), and the shards never wait on the control thread.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::future::LocalBoxFuture;
use strait_dataplane::batch::Record;
use strait_dataplane::io::{ConnSetup, IoBackend};
use strait_dataplane::shard::MappingSegment;
use strait_dataplane::wire::WireError;

use crate::cluster::{Cluster, ClusterError, IsolationLevel, ListedGroup, OffsetSpec, RetryConfig};
use crate::config::{ClientConfig, FlowConfig, OffsetSyncsLocation};
use crate::model::TopicPartition;
use crate::model::counters::{OffsetsCounters, bump};
use crate::offsets::{
    Checkpoint, CheckpointSkip, CheckpointStore, CommittedOffset, GroupSyncAction, GroupSyncReport,
    OffsetMapping, OffsetSync, OffsetSyncStore, OffsetSyncWriter, PartitionMapping, Precision,
    Segment, StoredSync, SyncWriterConfig, TargetGroupState, Translator, plan_group_sync,
    restart_seed,
};
use crate::store::checkpoints::load_checkpoints;
use crate::store::offset_syncs::load_syncs;
use crate::store::topics::ensure_internal_topic;
use crate::store::{progress, records};

/// Default bound on the consumer groups one flow checkpoints. Each costs one OffsetFetch per
/// checkpoint round and per group refresh.
pub const DEFAULT_MAX_GROUPS: usize = 10_000;

/// How long a stop waits for a background load still running ([`OffsetsRuntime::finish`]):
/// well within the final writes' deadline, which the progress write needs too.
pub const LOAD_WAIT_AT_STOP: Duration = Duration::from_secs(5);

/// How long offset-sync sends pause after a failed one.
pub const SYNC_FAILURE_PAUSE: Duration = Duration::from_secs(5);

/// Records per produce request to an internal topic.
const MAX_RECORDS_PER_PRODUCE: usize = 500;

/// Bytes of keys and values per produce request, well under the default `max.message.bytes`.
const MAX_BYTES_PER_PRODUCE: usize = 512 * 1024;

/// Errors of the offsets runtime and the `offsets translate` command.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OffsetsError {
    /// A cluster call failed; `what` says what strait was doing.
    #[error("flow {flow}: {what}: {source}")]
    Cluster {
        flow: String,
        what: String,
        #[source]
        source: Box<ClusterError>,
    },
    /// A round did not finish within `admin.timeout.ms`.
    #[error("flow {flow}: {what} did not finish within admin.timeout.ms = {timeout_ms} ms")]
    Timeout {
        flow: String,
        what: &'static str,
        timeout_ms: u64,
    },
    /// The background load ended without an outcome (it was cancelled).
    #[error("flow {flow}: loading the offset syncs and checkpoints was cancelled")]
    LoadCancelled { flow: String },
    /// The connection settings of a client are unusable (e.g. an unreadable trust store).
    #[error("flow {flow}: client {role}: {error}")]
    Client {
        flow: String,
        role: &'static str,
        /// In the message, so not a `#[source]` (the CLI prints error chains).
        error: WireError,
    },
    /// `--flow` names no flow of the config, or none was given and the choice is ambiguous.
    #[error("{0}")]
    NoSuchFlow(String),
}

impl OffsetsError {
    /// What a failed cluster call of flow `flow` becomes, `what` saying what strait was doing
    /// (for `map_err`).
    pub fn cluster(flow: &str, what: String) -> impl FnOnce(ClusterError) -> OffsetsError + use<> {
        let flow = flow.to_string();
        move |source| OffsetsError::Cluster {
            flow,
            what,
            source: Box::new(source),
        }
    }
}

/// The offsets duties' settings of one flow, from its MM2 configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetsSettings {
    /// `emit.offset-syncs.enabled` (default true).
    pub emit_offset_syncs: bool,
    /// `offset.lag.max` (default 100).
    pub offset_lag_max: i64,
    /// The worker's `offset.flush.interval.ms` (default 60 000): the latest sync of every
    /// partition is published at this cadence.
    pub offset_flush_interval: Duration,
    /// `emit.checkpoints.enabled` (default true).
    pub emit_checkpoints: bool,
    /// `emit.checkpoints.interval.seconds` (default 60).
    pub emit_checkpoints_interval: Duration,
    /// `refresh.groups.enabled` (default true).
    pub refresh_groups: bool,
    /// `refresh.groups.interval.seconds` (strait's default 10; MM2's 600).
    pub refresh_groups_interval: Duration,
    /// `sync.group.offsets.enabled` (default false).
    pub sync_group_offsets: bool,
    /// `sync.group.offsets.interval.seconds` (default 60).
    pub sync_group_offsets_interval: Duration,
    /// `admin.timeout.ms` (default 60 000): the longest one round may take.
    pub admin_timeout: Duration,
    /// Groups per flow; default [`DEFAULT_MAX_GROUPS`].
    pub max_groups: usize,
    /// Offset syncs sent and not completed; MM2's `MAX_OUTSTANDING_OFFSET_SYNCS` (10).
    pub max_outstanding_syncs: usize,
}

impl OffsetsSettings {
    /// The settings of `flow`.
    pub fn from_flow(flow: &FlowConfig) -> Self {
        let secs = |s: u64| Duration::from_secs(s.max(1));
        Self {
            emit_offset_syncs: flow.emit_offset_syncs_enabled.value,
            offset_lag_max: i64::try_from(flow.offset_lag_max.value).unwrap_or(i64::MAX),
            offset_flush_interval: Duration::from_millis(
                flow.offset_flush_interval_ms.value.max(1),
            ),
            emit_checkpoints: flow.emit_checkpoints_enabled.value,
            emit_checkpoints_interval: secs(flow.emit_checkpoints_interval_seconds.value),
            refresh_groups: flow.refresh_groups_enabled.value,
            refresh_groups_interval: secs(flow.refresh_groups_interval_seconds.value),
            sync_group_offsets: flow.sync_group_offsets_enabled.value,
            sync_group_offsets_interval: secs(flow.sync_group_offsets_interval_seconds.value),
            admin_timeout: Duration::from_millis(flow.admin_timeout_ms.value.max(1)),
            max_groups: DEFAULT_MAX_GROUPS,
            max_outstanding_syncs: crate::offsets::sync_writer::MAX_OUTSTANDING_OFFSET_SYNCS,
        }
    }
}

/// Installs the stored exact mappings of the partitions `flow` replicates; returns how many.
pub(crate) fn restore_mappings(
    translator: &mut Translator,
    flow: &FlowConfig,
    restored: BTreeMap<TopicPartition, PartitionMapping>,
) -> usize {
    let mut n = 0;
    for (tp, m) in restored
        .into_iter()
        .filter(|(tp, _)| flow.should_replicate_topic(&tp.topic))
    {
        translator.restore(tp, m);
        n += 1;
    }
    n
}

/// Seeds the exact end pair of each partition after a restart, from the last offset sync, the
/// target partition's end offset and strait's stored progress.
///
/// For a source partition whose latest sync `(u, d)` has `d + 1` equal to the target
/// partition's end offset, and whose stored progress `next` is past `u`: no source record in
/// `u+1..next` was replicated (it would be after `d` on the target), so every upstream offset in
/// `u+1..=next` resumes exactly at `d + 1`. Returns how many partitions were seeded.
pub async fn seed_from_progress(
    translator: &mut Translator,
    flow: &FlowConfig,
    target: &Cluster,
    progress: &BTreeMap<TopicPartition, progress::Entry>,
) -> usize {
    let mapped = |tp: &TopicPartition| {
        translator
            .mapping()
            .partition(tp)
            .is_some_and(|m| m.run_count() > 0)
    };
    let seeds = restart_seeds(translator.store(), flow, target, progress, mapped).await;
    apply_seeds(translator, seeds, |_| false)
}

/// One partition's restart seed ([`seed_from_progress`]): the last sync as a one-record segment
/// and the stored progress, which becomes the acknowledged end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RestartSeed {
    tp: TopicPartition,
    segment: Segment,
    next_offset: i64,
}

/// The restart seeds that `store`, the target's end offsets and `progress` allow, leaving out
/// the partitions `skip` names (those with an exact mapping already).
async fn restart_seeds(
    store: &OffsetSyncStore,
    flow: &FlowConfig,
    target: &Cluster,
    progress: &BTreeMap<TopicPartition, progress::Entry>,
    skip: impl Fn(&TopicPartition) -> bool,
) -> Vec<RestartSeed> {
    let mut candidates: Vec<(TopicPartition, TopicPartition, StoredSync, i64)> = Vec::new();
    // Only partitions this flow replicates: the progress topic also holds other topics' ends.
    for (tp, entry) in progress
        .iter()
        .filter(|(tp, _)| flow.should_replicate_topic(&tp.topic) && !skip(tp))
    {
        let Some(latest) = store.syncs_for(tp).map(|s| s[0]) else {
            continue;
        };
        // Only ask the target about partitions that could qualify.
        if restart_seed(
            &latest,
            entry.next_offset,
            latest.downstream_offset.saturating_add(1),
        )
        .is_some()
        {
            let remote = TopicPartition::new(flow.remote_topic(&tp.topic), tp.partition);
            candidates.push((tp.clone(), remote, latest, entry.next_offset));
        }
    }
    if candidates.is_empty() {
        return Vec::new();
    }
    // Leave out remote topics the target does not have (one Metadata request, where ListOffsets
    // would retry each as possibly stale metadata).
    let names: BTreeSet<&str> = candidates.iter().map(|c| c.1.topic.as_str()).collect();
    let names: Vec<&str> = names.into_iter().collect();
    match target.refresh_metadata(Some(&names)).await {
        Ok(md) => candidates.retain(|c| {
            md.topics
                .get(&c.1.topic)
                .is_some_and(|t| t.partition(c.1.partition).is_some())
        }),
        Err(e) => {
            tracing::debug!(error = %e, "no target metadata: translation starts from the offset syncs alone");
            return Vec::new();
        }
    }
    let remotes: Vec<TopicPartition> = candidates.iter().map(|c| c.1.clone()).collect();
    let ends = target
        .list_offsets(
            &remotes,
            OffsetSpec::Latest,
            IsolationLevel::ReadUncommitted,
        )
        .await;
    let mut seeds = Vec::new();
    for (tp, remote, latest, next) in candidates {
        let end = match ends.get(&remote) {
            Some(Ok(end)) => end,
            Some(Err(e)) => {
                tracing::debug!(partition = %remote, error = %e, "no end offset: translation of {tp} starts from the offset syncs alone");
                continue;
            }
            None => continue,
        };
        if let Some(segment) = restart_seed(&latest, next, *end) {
            seeds.push(RestartSeed {
                tp,
                segment,
                next_offset: next,
            });
        }
    }
    seeds
}

/// Adds `seeds` to `translator`, except to partitions `changed` names or that have runs by now
/// (segments since: the seed would no longer come first). A seed read while the shard already
/// copied cannot be wrong: a record written before the target's end was read fails the seed's
/// `d + 1 == end`, one written after comes after the seed. Returns how many were added.
fn apply_seeds(
    translator: &mut Translator,
    seeds: Vec<RestartSeed>,
    changed: impl Fn(&TopicPartition) -> bool,
) -> usize {
    let mut seeded = 0;
    for s in seeds {
        let mapping = translator.mapping().partition(&s.tp);
        if changed(&s.tp) || mapping.is_some_and(|m| m.run_count() > 0) {
            continue;
        }
        // Acknowledged ends reported meanwhile with no segment cover only records strait does
        // not copy: they stay exact too.
        let acked = mapping
            .and_then(|m| m.acked_end())
            .map_or(s.next_offset, |a| a.max(s.next_offset));
        if translator.append(&s.tp, s.segment).is_ok() {
            translator.set_acked_end(s.tp, acked);
            seeded += 1;
        }
    }
    seeded
}

/// Builds an admin-style client for `client` (connections are opened on first use), on epoll.
/// Public for tools that connect with a flow's client settings (`strait-bench load`); `role`
/// names the client in errors.
pub fn cluster_for(
    flow: &str,
    role: &'static str,
    client: &ClientConfig,
) -> Result<Rc<Cluster>, OffsetsError> {
    let setup = ConnSetup::new(client.conn.clone(), IoBackend::Epoll).map_err(|e| {
        OffsetsError::Client {
            flow: flow.to_string(),
            role,
            error: e,
        }
    })?;
    let bootstrap = client
        .bootstrap_servers
        .iter()
        .map(|a| a.to_string())
        .collect();
    Ok(Rc::new(Cluster::new(
        &client.cluster,
        bootstrap,
        setup,
        RetryConfig::default(),
    )))
}

/// Checkpoint records waiting to be written, with the previous checkpoints of their groups.
#[derive(Default)]
struct CheckpointBatch {
    records: Vec<Record>,
    bytes: usize,
    /// Records translated exactly.
    exact: usize,
    /// When the round that made them began, for `checkpoint-latency-ms`.
    started: Option<Instant>,
}

/// What a checkpoint round did.
#[derive(Debug, Default)]
struct RoundCounts {
    written: usize,
    exact: usize,
    failed_groups: usize,
}

/// The offset-syncs topic and the clients that use it.
struct SyncsTopic {
    name: String,
    /// Alias of the cluster it lives on.
    cluster: String,
    producer: Rc<Cluster>,
}

/// The offsets rounds due at one instant ([`OffsetsRuntime::due`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetsDuties {
    /// Publish the latest sync of every partition (`offset.flush.interval.ms`).
    pub flush: bool,
    /// List the source groups again (`refresh.groups.interval.seconds`).
    pub refresh_groups: bool,
    /// A checkpoint round (`emit.checkpoints.interval.seconds`).
    pub checkpoints: bool,
    /// A group-offset sync round (`sync.group.offsets.interval.seconds`).
    pub group_sync: bool,
}

/// What the background load of [`OffsetsRuntime::start`] gives.
pub(crate) struct Loaded {
    checkpoints: CheckpointStore,
    store: OffsetSyncStore,
    /// `None` when offset syncs are off.
    syncs: Option<SyncsTopic>,
    /// The source's groups; `None` when checkpoints are off.
    groups: Option<Result<BTreeSet<String>, OffsetsError>>,
    seeds: Vec<RestartSeed>,
}

/// The background load, made again for each attempt.
type Loader = Box<dyn Fn() -> LocalBoxFuture<'static, Result<Loaded, OffsetsError>>>;

/// Where the background load is.
enum Load {
    Running {
        task: tokio::task::JoinHandle<Result<Loaded, OffsetsError>>,
        /// Partitions whose mapping changed meanwhile other than by an acknowledged end (a
        /// segment, a seek, a restore, forgotten): no restart seed may go before that.
        changed: BTreeSet<TopicPartition>,
        /// Attempts that failed before this one.
        failed: u32,
    },
    /// The last attempt failed with an error that may pass (no leader yet for a topic just
    /// created, a timeout): the next starts at `at`. Replication goes on meanwhile.
    Retrying {
        at: Instant,
        changed: BTreeSet<TopicPartition>,
        failed: u32,
    },
    Done,
    /// It failed, and its error was handed out: the run stops.
    Failed,
}

/// The wait before the next attempt of a load that failed `failed` times: 1 s, doubling, at
/// most 30 s.
fn load_retry_delay(failed: u32) -> Duration {
    Duration::from_secs(1u64 << failed.saturating_sub(1).min(5)).min(Duration::from_secs(30))
}

/// The offsets duties of one flow in `strait run`. See the [module docs](self).
pub struct OffsetsRuntime {
    load: Load,
    loader: Loader,
    flow: FlowConfig,
    name: String,
    settings: OffsetsSettings,
    source: Rc<Cluster>,
    target: Rc<Cluster>,
    target_producer: Rc<Cluster>,
    syncs: Option<SyncsTopic>,
    checkpoints_topic: String,
    translator: Translator,
    writer: OffsetSyncWriter,
    checkpoints: CheckpointStore,
    groups: BTreeSet<String>,
    next_flush: Instant,
    next_refresh: Option<Instant>,
    next_checkpoints: Option<Instant>,
    next_group_sync: Option<Instant>,
    /// The last logged group-sync report of each group, so that unchanged skips are not logged
    /// every round.
    last_reports: HashMap<String, String>,
    mapping_errors: u64,
    /// Exactly-once partitions: their mapping segments since their last commit. The offset
    /// sync writer gets them only once their transaction commits, so that no offset sync names
    /// target offsets that an abort may yet discard.
    uncommitted: HashMap<TopicPartition, Vec<Segment>>,
    /// No offset-sync sends before this instant (after a failed send).
    syncs_paused_until: Option<Instant>,
    /// The syncs of the send being awaited. Left non-empty only when that send was dropped
    /// mid-flight (a stop abandons the duties in flight): the next send gives them back to the
    /// writer, whose permits they still hold.
    syncs_in_flight: Vec<OffsetSync>,
    /// The groups whose checkpoints a round recorded in the store but has not written yet, with
    /// their previous checkpoints. A round dropped before writing them (by `admin.timeout.ms` or a
    /// stop) leaves them here, and the next round puts the previous ones back first: otherwise
    /// the store would hold checkpoints never written, and an unchanged group would never get
    /// them (an equal checkpoint is a repeat, not emitted).
    checkpoints_unwritten: Vec<(String, Vec<Checkpoint>)>,
    /// Whether the source's groups were probed for DESCRIBE after a refresh found none.
    groups_probed: bool,
    /// What the duties did, for `/metrics`.
    counters: OffsetsCounters,
    /// In a group: the partitions this member replicates (source names, and the remote names
    /// of the same partitions); checkpoints and group-offset sync cover only those, where this
    /// member has the exact mapping. `None`: every partition (a run alone).
    owned: Option<(BTreeSet<TopicPartition>, BTreeSet<TopicPartition>)>,
}

impl fmt::Debug for OffsetsRuntime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OffsetsRuntime")
            .field("flow", &self.name)
            .field("partitions", &self.translator.mapping().len())
            .field("groups", &self.groups.len())
            .field("loaded", &self.is_loaded())
            .finish()
    }
}

impl Drop for OffsetsRuntime {
    fn drop(&mut self) {
        // A flow removed or restarted by a reload, or a run stopping early: its load is moot.
        if let Load::Running { task, .. } = &self.load {
            task.abort();
        }
    }
}

impl OffsetsError {
    /// Whether the same call may succeed later: a cluster error that may pass (no leader, an
    /// unreachable broker, retries of such an error exhausted), or a timeout.
    fn may_pass(&self) -> bool {
        match self {
            OffsetsError::Cluster { source, .. } => match &**source {
                ClusterError::RetriesExhausted { last, .. } => last.is_retriable(),
                other => other.is_retriable(),
            },
            OffsetsError::Timeout { .. } => true,
            _ => false,
        }
    }
}

impl OffsetsRuntime {
    /// Starts the offsets duties of `flow`: installs the exact mappings `restored` from the
    /// stored progress at once, and starts the background load (a local task, so this must run
    /// in a `LocalSet`) that creates the internal topics, loads the checkpoints and the offset
    /// syncs, reads the restart seeds for `progress` and lists the source groups. `source` and
    /// `target` are the flow's admin clients.
    pub fn start(
        flow: &FlowConfig,
        source: Rc<Cluster>,
        target: Rc<Cluster>,
        progress: &BTreeMap<TopicPartition, progress::Entry>,
        restored: BTreeMap<TopicPartition, PartitionMapping>,
        now: Instant,
    ) -> Result<Self, OffsetsError> {
        let target_consumer = cluster_for(
            &flow.name(),
            "target consumer",
            &flow.clients.target_consumer.client,
        )?;
        let mut translator = Translator::default();
        let exact = restore_mappings(&mut translator, flow, restored);
        if exact > 0 {
            tracing::info!(flow = %flow.name(), partitions = exact, "exact offset mappings restored from the stored progress");
        }
        // Partitions with a restored mapping take no seed: no need to ask the target about them.
        let progress: BTreeMap<TopicPartition, progress::Entry> = progress
            .iter()
            .filter(|(tp, _)| {
                translator
                    .mapping()
                    .partition(tp)
                    .is_none_or(|m| m.run_count() == 0)
            })
            .map(|(tp, e)| (tp.clone(), *e))
            .collect();
        let loader: Loader = {
            let (flow, source, target) = (flow.clone(), source.clone(), target.clone());
            Box::new(move || {
                Box::pin(load(
                    flow.clone(),
                    source.clone(),
                    target.clone(),
                    target_consumer.clone(),
                    progress.clone(),
                ))
            })
        };
        Self::with_loader(flow, source, target, translator, now, loader)
    }

    /// [`OffsetsRuntime::start`] with the load given (tests give their own).
    fn with_loader(
        flow: &FlowConfig,
        source: Rc<Cluster>,
        target: Rc<Cluster>,
        translator: Translator,
        now: Instant,
        loader: Loader,
    ) -> Result<Self, OffsetsError> {
        let name = flow.name();
        let settings = OffsetsSettings::from_flow(flow);
        let target_producer = cluster_for(
            &name,
            "target producer",
            &flow.clients.target_producer.client,
        )?;
        let checkpointing = settings.emit_checkpoints;
        let writer = OffsetSyncWriter::new(SyncWriterConfig {
            offset_lag_max: settings.offset_lag_max,
            max_outstanding: settings.max_outstanding_syncs,
        });
        Ok(Self {
            load: Load::Running {
                task: tokio::task::spawn_local(loader()),
                changed: BTreeSet::new(),
                failed: 0,
            },
            loader,
            name,
            source,
            target,
            target_producer,
            syncs: None,
            checkpoints_topic: flow.checkpoints_topic(),
            translator,
            writer,
            checkpoints: CheckpointStore::default(),
            groups: BTreeSet::new(),
            next_flush: now + settings.offset_flush_interval,
            next_refresh: (checkpointing && settings.refresh_groups)
                .then(|| now + settings.refresh_groups_interval),
            next_checkpoints: checkpointing.then(|| now + settings.emit_checkpoints_interval),
            next_group_sync: (checkpointing && settings.sync_group_offsets)
                .then(|| now + settings.sync_group_offsets_interval),
            last_reports: HashMap::new(),
            mapping_errors: 0,
            uncommitted: HashMap::new(),
            syncs_paused_until: None,
            syncs_in_flight: Vec::new(),
            checkpoints_unwritten: Vec::new(),
            groups_probed: false,
            counters: OffsetsCounters::default(),
            owned: None,
            flow: flow.clone(),
            settings,
        })
    }

    /// Whether the background load finished and was taken: offset syncs are sent and the
    /// rounds run from then on.
    pub fn is_loaded(&self) -> bool {
        matches!(self.load, Load::Done)
    }

    /// Takes the background load's outcome if it has finished (the control loop asks every
    /// turn): installs what it read, or returns its error, once.
    pub async fn poll_load(&mut self) -> Result<(), OffsetsError> {
        self.retry_load_if_due(Instant::now());
        let Load::Running { task, .. } = &mut self.load else {
            return Ok(());
        };
        if !task.is_finished() {
            return Ok(());
        }
        let Some(outcome) = futures_util::FutureExt::now_or_never(task) else {
            return Ok(());
        };
        self.take_load(outcome).await
    }

    /// Waits for the background load and takes its outcome (a flow a reload starts; a stop).
    /// A load waiting to be tried again is not waited for.
    pub async fn wait_loaded(&mut self) -> Result<(), OffsetsError> {
        let Load::Running { task, .. } = &mut self.load else {
            return Ok(());
        };
        let outcome = task.await;
        self.take_load(outcome).await
    }

    /// Starts the next attempt of a load that failed, once its wait is over.
    fn retry_load_if_due(&mut self, now: Instant) {
        if !matches!(self.load, Load::Retrying { at, .. } if now >= at) {
            return;
        }
        let Load::Retrying {
            changed, failed, ..
        } = std::mem::replace(&mut self.load, Load::Failed)
        else {
            return;
        };
        tracing::info!(flow = %self.name, attempt = failed + 1, "loading the offset syncs and checkpoints again");
        self.load = Load::Running {
            task: tokio::task::spawn_local((self.loader)()),
            changed,
            failed,
        };
    }

    async fn take_load(
        &mut self,
        outcome: Result<Result<Loaded, OffsetsError>, tokio::task::JoinError>,
    ) -> Result<(), OffsetsError> {
        let Load::Running {
            changed, failed, ..
        } = std::mem::replace(&mut self.load, Load::Failed)
        else {
            return Ok(());
        };
        let loaded = match outcome {
            Ok(Ok(l)) => l,
            Ok(Err(e)) if e.may_pass() => {
                // Replication goes on; no offset sync is sent and no round runs until a load
                // succeeds. An error that cannot pass (internal topics that cannot exist, no
                // authorisation) still stops the run.
                let wait = load_retry_delay(failed + 1);
                tracing::warn!(flow = %self.name, error = %e, retry_in_ms = wait.as_millis() as u64, "loading the offset syncs and checkpoints failed; trying again");
                self.load = Load::Retrying {
                    at: Instant::now() + wait,
                    changed,
                    failed: failed + 1,
                };
                return Ok(());
            }
            Ok(Err(e)) => return Err(e),
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(_) => {
                return Err(OffsetsError::LoadCancelled {
                    flow: self.name.clone(),
                });
            }
        };
        let found = self.install(loaded, &changed);
        self.load = Load::Done;
        if let Some(found) = found {
            // Probed by the load when none was found (the refresh would probe again otherwise).
            self.groups_probed = matches!(&found, Ok(g) if g.is_empty());
            self.take_groups(found).await;
        }
        Ok(())
    }

    /// Installs what the load read, the translator's own syncs store replaced by the one read
    /// (nothing was sent meanwhile, so it holds nothing of this run's); returns the groups found.
    fn install(
        &mut self,
        loaded: Loaded,
        changed: &BTreeSet<TopicPartition>,
    ) -> Option<Result<BTreeSet<String>, OffsetsError>> {
        self.checkpoints = loaded.checkpoints;
        *self.translator.store_mut() = loaded.store;
        self.syncs = loaded.syncs;
        let seeded = apply_seeds(&mut self.translator, loaded.seeds, |tp| {
            changed.contains(tp)
        });
        if seeded > 0 {
            tracing::info!(flow = %self.name, partitions = seeded, "exact end offsets restored from the last offset syncs and stored progress");
        }
        loaded.groups
    }

    /// While the load runs: `tp`'s mapping changed other than by an acknowledged end.
    fn changed_while_loading(&mut self, tp: &TopicPartition) {
        if let Load::Running { changed, .. } | Load::Retrying { changed, .. } = &mut self.load {
            changed.insert(tp.clone());
        }
    }

    /// Takes the duty settings of `flow` (a configuration reload) at `now`: intervals,
    /// `offset.lag.max`, groups and their filter, `admin.timeout.ms`. The translation state,
    /// the checkpoints and the offset-syncs topic stay (a change of those restarts the flow).
    /// A group refresh is due at once, so that a new group filter applies now.
    pub fn reconfigure(&mut self, flow: &FlowConfig, now: Instant) {
        let s = OffsetsSettings {
            emit_offset_syncs: self.settings.emit_offset_syncs,
            max_groups: self.settings.max_groups,
            max_outstanding_syncs: self.settings.max_outstanding_syncs,
            ..OffsetsSettings::from_flow(flow)
        };
        self.writer.set_offset_lag_max(s.offset_lag_max);
        self.next_flush = now + s.offset_flush_interval;
        let checkpointing = s.emit_checkpoints;
        self.next_refresh = (checkpointing && s.refresh_groups).then_some(now);
        self.next_checkpoints = checkpointing.then(|| now + s.emit_checkpoints_interval);
        self.next_group_sync =
            (checkpointing && s.sync_group_offsets).then(|| now + s.sync_group_offsets_interval);
        self.flow = flow.clone();
        self.settings = s;
    }

    /// The flow's translation state.
    pub fn translator(&self) -> &Translator {
        &self.translator
    }

    /// The exact mapping, for the progress store to write with the progress.
    pub fn mapping_mut(&mut self) -> &mut OffsetMapping {
        self.translator.mapping_mut()
    }

    /// Translates these partitions from now on with their mappings read from storage (a
    /// member of a group was assigned partitions another member replicated).
    pub fn restore_partitions(&mut self, restored: BTreeMap<TopicPartition, PartitionMapping>) {
        for tp in restored.keys() {
            self.changed_while_loading(tp);
        }
        restore_mappings(&mut self.translator, &self.flow, restored);
    }

    /// Replication of `topic`-`partition` starts at `upstream`: with no history before it,
    /// offsets from there to the first copied record translate exactly.
    pub fn on_start(&mut self, topic: &str, partition: i32, upstream: i64) {
        self.translator
            .mapping_mut()
            .set_start(TopicPartition::new(topic, partition), upstream);
    }

    /// An operator moved `tp` to `next_offset` (its mapping is truncated there).
    pub fn on_seek(&mut self, tp: &TopicPartition, next_offset: i64) {
        self.changed_while_loading(tp);
        self.translator.seek(tp, next_offset);
    }

    /// The groups being checkpointed.
    pub fn groups(&self) -> &BTreeSet<String> {
        &self.groups
    }

    /// The last emitted checkpoints.
    /// What the offsets duties did so far (for `/metrics`).
    pub fn counters(&self) -> &OffsetsCounters {
        &self.counters
    }

    pub fn checkpoints(&self) -> &CheckpointStore {
        &self.checkpoints
    }

    /// New exact mapping segments of source partition `topic`-`partition`, oldest first.
    pub fn on_segments(&mut self, topic: &str, partition: i32, segments: &[MappingSegment]) {
        if segments.is_empty() {
            return;
        }
        let tp = TopicPartition::new(topic, partition);
        self.changed_while_loading(&tp);
        // Exactly-once: looked up once per report, not per segment.
        let mut held = self.uncommitted.remove(&tp);
        for s in segments {
            let segment = Segment::new(s.upstream, s.downstream, i64::from(s.count));
            if let Err(e) = self.translator.append(&tp, segment) {
                self.mapping_error(&e.to_string());
                continue;
            }
            if let Some(held) = held.as_mut() {
                held.push(segment);
                continue;
            }
            // While the load runs too: the writer keeps what is to be sent (bounded per
            // partition), and sends wait for the load.
            if self.settings.emit_offset_syncs
                && let Err(e) = self.writer.on_segment(&tp, segment)
            {
                self.mapping_error(&e.to_string());
            }
        }
        if let Some(held) = held {
            self.uncommitted.insert(tp, held);
        }
    }

    /// Exactly-once: `tp` was taken over (again): its offset syncs wait for its commits, and
    /// whatever an earlier holding left uncommitted is dropped (aborted, copied again).
    pub fn hold_syncs_until_commit(&mut self, tp: &TopicPartition) {
        self.uncommitted.insert(tp.clone(), Vec::new());
    }

    /// Exactly-once: `tp`'s transaction committed every segment reported since the last one:
    /// they go to the offset sync writer.
    pub fn on_committed(&mut self, tp: &TopicPartition) {
        let Some(held) = self.uncommitted.get_mut(tp) else {
            return;
        };
        let segments = std::mem::take(held);
        if !self.settings.emit_offset_syncs {
            return;
        }
        for segment in segments {
            if let Err(e) = self.writer.on_segment(tp, segment) {
                self.mapping_error(&e.to_string());
            }
        }
    }

    /// Exactly-once: `tp` was released; what it did not commit is aborted.
    pub fn drop_uncommitted(&mut self, tp: &TopicPartition) {
        self.uncommitted.remove(tp);
    }

    fn mapping_error(&mut self, e: &str) {
        // A shard bug, not an outside input; say it once in a while, not per batch.
        self.mapping_errors += 1;
        if self.mapping_errors.is_power_of_two() {
            tracing::error!(flow = %self.name, count = self.mapping_errors, "ignored invalid mapping segment: {e}");
        }
    }

    /// The acknowledged end of a source partition (the shard's `next_offset`), reported after
    /// the segments it covers.
    pub fn on_progress(&mut self, topic: &str, partition: i32, next_offset: i64) {
        let tp = TopicPartition::new(topic, partition);
        self.translator.set_acked_end(tp, next_offset);
    }

    /// Group hook: checkpoints and group-offset sync only for these partitions, given by their
    /// source and by their remote names (`None`: every partition).
    pub fn set_owned_partitions(
        &mut self,
        owned: Option<(BTreeSet<TopicPartition>, BTreeSet<TopicPartition>)>,
    ) {
        self.owned = owned;
    }

    fn owns_source(&self, tp: &TopicPartition) -> bool {
        self.owned.as_ref().is_none_or(|(s, _)| s.contains(tp))
    }

    fn owns_remote(&self, tp: &TopicPartition) -> bool {
        self.owned.as_ref().is_none_or(|(_, r)| r.contains(tp))
    }

    /// Forgets a source partition (its topic was deleted or recreated).
    pub fn forget_partition(&mut self, tp: &TopicPartition) {
        self.changed_while_loading(tp);
        self.translator.forget(tp);
        self.writer.remove_partition(tp);
    }

    /// Which rounds are due at `now`, each then scheduled for its next interval. Pure: the
    /// control loop may decide now and run the rounds later.
    pub fn due(&mut self, now: Instant) -> OffsetsDuties {
        let flush = now >= self.next_flush;
        if flush {
            self.next_flush = now + self.settings.offset_flush_interval;
        }
        let due_at = |next: &mut Option<Instant>, interval: Duration| {
            let due = next.is_some_and(|t| now >= t);
            if due {
                *next = Some(now + interval);
            }
            due
        };
        OffsetsDuties {
            flush,
            refresh_groups: due_at(
                &mut self.next_refresh,
                self.settings.refresh_groups_interval,
            ),
            checkpoints: due_at(
                &mut self.next_checkpoints,
                self.settings.emit_checkpoints_interval,
            ),
            group_sync: due_at(
                &mut self.next_group_sync,
                self.settings.sync_group_offsets_interval,
            ),
        }
    }

    /// Runs what is due at `now`; `wall_ms` stamps the records written. The offset syncs the
    /// writer has ready are sent at every tick.
    pub async fn tick(&mut self, now: Instant, wall_ms: i64) {
        // Nothing is sent or emitted before the load: what falls due meanwhile stays due (its
        // schedule untouched) and runs at the first tick after it.
        if !self.is_loaded() {
            return;
        }
        let due = self.due(now);
        self.send_syncs(now, wall_ms).await;
        if due.flush {
            self.writer.on_flush_interval();
            self.send_syncs(now, wall_ms).await;
        }
        if due.refresh_groups {
            self.refresh_groups_logged().await;
        }
        if due.checkpoints {
            self.checkpoints_logged(wall_ms).await;
        }
        if due.group_sync {
            self.group_sync_logged().await;
        }
    }

    /// On the way out, after the shards' final reports: publishes the latest offset sync of
    /// every partition (so that a restart translates from the very end) and, when `final_round`
    /// (`--until-caught-up`), refreshes the groups and runs one more round of checkpoints and
    /// group sync. A load still running is waited for at most [`LOAD_WAIT_AT_STOP`]; its error
    /// is returned.
    pub async fn finish(&mut self, final_round: bool, wall_ms: i64) -> Result<(), OffsetsError> {
        if matches!(self.load, Load::Running { .. }) {
            match tokio::time::timeout(LOAD_WAIT_AT_STOP, self.wait_loaded()).await {
                Ok(loaded) => loaded?,
                Err(_) => {
                    tracing::warn!(flow = %self.name, "the offset syncs and checkpoints are still loading: no last offset syncs, checkpoints or group sync");
                    return Ok(());
                }
            }
        }
        if !self.is_loaded() {
            return Ok(());
        }
        if self.syncs.is_some() {
            self.writer.on_flush_interval();
            self.syncs_paused_until = None;
            let deadline = Instant::now() + self.settings.admin_timeout;
            while self.writer.outstanding() > 0 || self.writer.pending_len() > 0 {
                let now = Instant::now();
                if now >= deadline || !self.send_syncs(now, wall_ms).await {
                    tracing::warn!(flow = %self.name, pending = self.writer.pending_len(), "gave up publishing the last offset syncs");
                    break;
                }
                // When nothing was ready (a sync still delayed), send_syncs returned without
                // awaiting: yield, so that this loop never spins past the caller's deadline.
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        if final_round && self.settings.emit_checkpoints {
            self.refresh_groups_logged().await;
            self.checkpoints_logged(wall_ms).await;
            if self.settings.sync_group_offsets {
                self.group_sync_logged().await;
            }
        }
        Ok(())
    }

    /// Produces the syncs the writer has made ready (at most `max_outstanding_syncs`), in one
    /// request. MM2 only logs a failed send; so does strait, and then pauses sending for
    /// [`SYNC_FAILURE_PAUSE`] so that an unreachable cluster does not hold up the control loop
    /// at every tick (meanwhile the writer keeps at most one pending sync per partition).
    /// Returns false when a send failed.
    async fn send_syncs(&mut self, now: Instant, wall_ms: i64) -> bool {
        let Some(syncs) = &self.syncs else {
            return true;
        };
        if !self.syncs_in_flight.is_empty() {
            let abandoned = std::mem::take(&mut self.syncs_in_flight);
            tracing::debug!(flow = %self.name, count = abandoned.len(), "offset syncs of an abandoned send queued again");
            if let Err(e) = self.writer.on_send_abandoned(abandoned) {
                tracing::error!(flow = %self.name, "offset sync permits out of step: {e}");
            }
            self.writer.fire_pending();
        }
        if self.syncs_paused_until.is_some_and(|t| now < t) {
            return true;
        }
        let ready = self.writer.take_ready();
        if ready.is_empty() {
            return true;
        }
        self.syncs_in_flight.clone_from(&ready);
        let mut records = Vec::with_capacity(ready.len());
        for s in &ready {
            match s.encode_key() {
                Ok(key) => records.push(Record::new(
                    wall_ms,
                    Some(Bytes::from(key)),
                    Some(Bytes::copy_from_slice(&s.encode_value())),
                )),
                Err(e) => tracing::error!(flow = %self.name, "cannot encode an offset sync: {e}"),
            }
        }
        let sent = tokio::time::timeout(
            self.settings.admin_timeout,
            records::produce(&syncs.producer, &syncs.name, 0, &records),
        )
        .await;
        self.syncs_in_flight.clear();
        let ok = matches!(sent, Ok(Ok(_)));
        self.syncs_paused_until = (!ok).then_some(now + SYNC_FAILURE_PAUSE);
        if ok {
            self.counters.offset_syncs_written += ready.len() as u64;
        } else {
            self.counters.offset_sync_errors += 1;
        }
        match sent {
            Ok(Ok(_)) => {
                for s in &ready {
                    // MM2's checkpoint task reads its own syncs back from the topic.
                    if let Err(e) = self.translator.store_mut().handle_sync(s) {
                        tracing::warn!(flow = %self.name, "offset sync not kept for translation: {e}");
                    }
                }
                tracing::debug!(flow = %self.name, count = ready.len(), topic = %syncs.name, "offset syncs written");
            }
            Ok(Err(e)) => {
                tracing::warn!(flow = %self.name, topic = %syncs.name, count = ready.len(), error = %e, "cannot write offset syncs")
            }
            Err(_) => tracing::warn!(
                flow = %self.name,
                topic = %syncs.name,
                count = ready.len(),
                "writing offset syncs timed out (admin.timeout.ms)"
            ),
        }
        for _ in &ready {
            // Cannot fail: each handed-out sync holds exactly one permit.
            let _ = self.writer.on_send_complete();
        }
        self.writer.fire_pending();
        ok
    }

    async fn refresh_groups_logged(&mut self) {
        let found = find_groups_timed(&self.flow, &self.source, &self.settings).await;
        self.take_groups(found).await;
    }

    /// Takes a group refresh's result: the groups to checkpoint from now on.
    async fn take_groups(&mut self, found: Result<BTreeSet<String>, OffsetsError>) {
        match found {
            Ok(groups) => {
                let added: Vec<&String> = groups.difference(&self.groups).collect();
                let removed: Vec<String> = self.groups.difference(&groups).cloned().collect();
                if !added.is_empty() || !removed.is_empty() {
                    tracing::info!(flow = %self.name, groups = groups.len(), added = ?added, removed = ?removed, "consumer groups to checkpoint");
                }
                for g in &removed {
                    self.checkpoints.remove_group(g);
                    self.last_reports.remove(g);
                }
                self.groups = groups;
                if self.groups.is_empty() && !self.groups_probed {
                    self.groups_probed = true;
                    probe_group_access(&self.flow, &self.source, &self.settings).await;
                }
            }
            Err(e) => {
                tracing::warn!("cannot refresh the consumer groups; keeping the last list: {e}")
            }
        }
    }

    async fn checkpoints_logged(&mut self, wall_ms: i64) {
        let timeout = self.settings.admin_timeout;
        self.counters.checkpoint_rounds += 1;
        let round = tokio::time::timeout(timeout, self.checkpoint_round(wall_ms)).await;
        match &round {
            Ok(c) => self.counters.checkpoint_errors += c.failed_groups as u64,
            Err(_) => self.counters.checkpoint_errors += 1,
        }
        match round {
            Ok(c) if c.failed_groups == 0 => {
                if c.written > 0 {
                    tracing::info!(
                        flow = %self.name,
                        emitted = c.written,
                        exact = c.exact,
                        approximate = c.written - c.exact,
                        topic = %self.checkpoints_topic,
                        "checkpoints written"
                    );
                }
            }
            Ok(c) => tracing::warn!(
                flow = %self.name,
                emitted = c.written,
                failed_groups = c.failed_groups,
                "checkpoint round incomplete; the failed groups are retried next round"
            ),
            Err(_) => {
                tracing::warn!(flow = %self.name, "checkpoint round did not finish within admin.timeout.ms")
            }
        }
    }

    /// One round of checkpoints over the selected groups.
    async fn checkpoint_round(&mut self, wall_ms: i64) -> RoundCounts {
        let mut counts = RoundCounts::default();
        if !self.checkpoints.is_initialized() {
            return counts;
        }
        let dropped = self.restore_unwritten_checkpoints();
        if dropped > 0 {
            tracing::debug!(flow = %self.name, groups = dropped, "checkpoints of a dropped round put back, to be emitted again");
        }
        let groups: Vec<String> = self.groups.iter().cloned().collect();
        let mut batch = CheckpointBatch {
            started: Some(Instant::now()),
            ..CheckpointBatch::default()
        };
        for group in groups {
            let committed = match self.source.offset_fetch(&group).await {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(flow = %self.name, group = %group, error = %e, "cannot fetch the group's committed offsets");
                    counts.failed_groups += 1;
                    continue;
                }
            };
            let committed: Vec<(TopicPartition, Option<CommittedOffset>)> = committed
                .into_iter()
                .filter(|(tp, _)| self.owns_source(tp))
                .map(|(tp, o)| {
                    let offset = CommittedOffset {
                        offset: o.offset,
                        metadata: o.metadata,
                    };
                    (tp, Some(offset))
                })
                .collect();
            self.group_checkpoints(group, &committed, wall_ms, &mut batch);
            if batch.records.len() >= MAX_RECORDS_PER_PRODUCE
                || batch.bytes >= MAX_BYTES_PER_PRODUCE
            {
                let started = batch.started;
                self.write_checkpoints(std::mem::take(&mut batch), &mut counts)
                    .await;
                batch.started = started;
            }
        }
        self.write_checkpoints(batch, &mut counts).await;
        counts
    }

    /// Adds the checkpoints of `group` for its `committed` offsets to `batch` (with the
    /// group's previous checkpoints, put back if the write fails).
    fn group_checkpoints(
        &mut self,
        group: String,
        committed: &[(TopicPartition, Option<CommittedOffset>)],
        wall_ms: i64,
        batch: &mut CheckpointBatch,
    ) {
        let previous: Vec<Checkpoint> = self
            .checkpoints
            .get(&group)
            .map(|g| g.values().cloned().collect())
            .unwrap_or_default();
        let translator = &self.translator;
        let flow = &self.flow;
        let outcome = self.checkpoints.checkpoints_for_group(
            &group,
            committed.iter().map(|(tp, o)| (tp, o)),
            |tp, upstream| translator.translate(tp, upstream),
            |topic| flow.topic_filter.should_replicate_topic(topic),
            |topic| {
                flow.replication_policy
                    .checkpoint_topic_name(topic, &flow.source, &flow.target)
            },
        );
        for (tp, why) in &outcome.skipped {
            if let Some(reason) = skip_reason(why) {
                bump(&mut self.counters.checkpoint_skips, reason);
            }
            if !matches!(why, CheckpointSkip::Repeated | CheckpointSkip::FilteredOut) {
                tracing::debug!(flow = %self.name, group = %group, partition = %tp, "no checkpoint: {why}");
            }
        }
        if outcome.emitted.is_empty() {
            return;
        }
        for e in &outcome.emitted {
            let cp = &e.checkpoint;
            let (Ok(key), Ok(value)) = (cp.encode_key(), cp.encode_value()) else {
                tracing::error!(flow = %self.name, group = %group, "checkpoint too large to encode");
                continue;
            };
            tracing::debug!(
                flow = %self.name,
                group = %group,
                topic = %cp.topic,
                partition = cp.partition,
                upstream = cp.upstream_offset,
                downstream = cp.downstream_offset,
                precision = %e.translation.precision,
                "checkpoint"
            );
            batch.bytes += key.len() + value.len();
            batch.exact += usize::from(e.translation.precision == Precision::Exact);
            batch.records.push(Record::new(
                wall_ms,
                Some(Bytes::from(key)),
                Some(Bytes::from(value)),
            ));
        }
        self.checkpoints_unwritten.push((group, previous));
    }

    /// Puts the previous checkpoints of the groups not written back into the store; returns how
    /// many groups.
    fn restore_unwritten_checkpoints(&mut self) -> usize {
        let groups = std::mem::take(&mut self.checkpoints_unwritten);
        for (group, previous) in &groups {
            self.checkpoints.remove_group(group);
            for cp in previous {
                if let (Ok(k), Ok(v)) = (cp.encode_key(), cp.encode_value()) {
                    let _ = self.checkpoints.load_record(&k, Some(&v), |_| true);
                }
            }
        }
        groups.len()
    }

    /// Writes a batch of checkpoints to partition 0 of the checkpoints topic; on failure puts
    /// the groups' previous checkpoints back into the store, so that the next round retries.
    async fn write_checkpoints(&mut self, batch: CheckpointBatch, counts: &mut RoundCounts) {
        if batch.records.is_empty() {
            // Nothing emitted: the store holds nothing unwritten for these groups.
            self.checkpoints_unwritten.clear();
            return;
        }
        match records::produce(
            &self.target_producer,
            &self.checkpoints_topic,
            0,
            &batch.records,
        )
        .await
        {
            Ok(_) => {
                self.checkpoints_unwritten.clear();
                counts.written += batch.records.len();
                counts.exact += batch.exact;
                self.counters.checkpoints_written += batch.records.len() as u64;
                if let Some(t) = batch.started {
                    let ms = i64::try_from(t.elapsed().as_millis()).unwrap_or(i64::MAX);
                    self.counters
                        .checkpoint_latency
                        .observe(ms, batch.records.len() as u64);
                }
            }
            Err(e) => {
                tracing::warn!(flow = %self.name, topic = %self.checkpoints_topic, error = %e, "cannot write checkpoints");
                counts.failed_groups += self.restore_unwritten_checkpoints();
            }
        }
    }

    async fn group_sync_logged(&mut self) {
        let timeout = self.settings.admin_timeout;
        self.counters.group_sync_rounds += 1;
        match tokio::time::timeout(timeout, self.group_sync_round()).await {
            Ok(Ok(reports)) => {
                for r in reports {
                    count_group_sync(&mut self.counters, &r);
                    let text = r.to_string();
                    let changed = self.last_reports.get(&r.group) != Some(&text);
                    if r.committed() > 0 || !r.failures.is_empty() {
                        tracing::info!(flow = %self.name, "group offset sync: {text}");
                    } else if changed {
                        tracing::info!(flow = %self.name, "group offset sync: {text}");
                    } else {
                        tracing::debug!(flow = %self.name, "group offset sync: {text}");
                    }
                    self.last_reports.insert(r.group, text);
                }
            }
            Ok(Err(e)) => {
                self.counters.group_sync_errors += 1;
                tracing::warn!("group offset sync failed: {e}")
            }
            Err(_) => {
                self.counters.group_sync_errors += 1;
                tracing::warn!(flow = %self.name, "group offset sync did not finish within admin.timeout.ms")
            }
        }
    }

    /// One round of group-offset sync over the groups with checkpoints.
    async fn group_sync_round(&mut self) -> Result<Vec<GroupSyncReport>, OffsetsError> {
        if !self.checkpoints.is_initialized() {
            return Ok(Vec::new());
        }
        let (groups, unchecked): (Vec<String>, Vec<String>) = self
            .groups
            .iter()
            .cloned()
            .partition(|g| self.checkpoints.get(g).is_some_and(|c| !c.is_empty()));
        for _ in &unchecked {
            bump(&mut self.counters.groups_skipped, "no_checkpoint");
        }
        if groups.is_empty() {
            return Ok(Vec::new());
        }
        let listed = self
            .target
            .list_groups()
            .await
            .map_err(|source| OffsetsError::Cluster {
                flow: self.name.clone(),
                what: format!("cannot list the groups of {}", self.flow.target),
                source: Box::new(source),
            })?;
        let listed: HashMap<&str, &ListedGroup> =
            listed.iter().map(|g| (g.group_id.as_str(), g)).collect();
        let mut reports = Vec::with_capacity(groups.len());
        for group in groups {
            let entry = listed.get(group.as_str()).copied();
            if let Some(report) = self.sync_group(group, entry).await {
                reports.push(report);
            }
        }
        Ok(reports)
    }

    /// Syncs one group (`listed`: its entry in the target's group list): reads its state and,
    /// when idle, its offsets on the target, then commits the translated checkpoints that
    /// MirrorMaker's rules allow. `None` when the target cannot be read (logged, counted).
    async fn sync_group(
        &mut self,
        group: String,
        listed: Option<&ListedGroup>,
    ) -> Option<GroupSyncReport> {
        let state = match target_state(&self.target, &group, listed).await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(flow = %self.name, group = %group, error = %e, "cannot read the target group's state; not syncing it");
                self.counters.group_sync_errors += 1;
                return None;
            }
        };
        let mut target_offsets: HashMap<TopicPartition, Option<i64>> = HashMap::new();
        if state.is_idle() {
            match self.target.offset_fetch(&group).await {
                Ok(o) => target_offsets.extend(o.into_iter().map(|(tp, c)| (tp, Some(c.offset)))),
                Err(e) => {
                    tracing::warn!(flow = %self.name, group = %group, error = %e, "cannot fetch the target group's offsets; not syncing it");
                    self.counters.group_sync_errors += 1;
                    return None;
                }
            }
        }
        let checkpoints = self.checkpoints.converted_offsets(&group);
        let mut decisions = plan_group_sync(checkpoints, state, &target_offsets);
        decisions.retain(|d| self.owns_remote(&d.tp));
        let commits: BTreeMap<TopicPartition, crate::cluster::CommittedOffset> = decisions
            .iter()
            .filter_map(|d| match &d.action {
                GroupSyncAction::Commit {
                    offset, metadata, ..
                } => Some((
                    d.tp.clone(),
                    crate::cluster::CommittedOffset {
                        offset: *offset,
                        metadata: metadata.clone(),
                    },
                )),
                _ => None,
            })
            .collect();
        let failures = self.commit_group(&group, &commits).await;
        Some(GroupSyncReport {
            group,
            state,
            decisions,
            failures,
        })
    }

    /// Commits `commits` for `group` on the target; the partitions that failed, and why.
    async fn commit_group(
        &self,
        group: &str,
        commits: &BTreeMap<TopicPartition, crate::cluster::CommittedOffset>,
    ) -> Vec<(TopicPartition, String)> {
        let mut failures = Vec::new();
        if commits.is_empty() {
            return failures;
        }
        match self.target.offset_commit(group, commits).await {
            Ok(results) => {
                for tp in commits.keys() {
                    match results.get(tp) {
                        Some(Ok(())) => {}
                        Some(Err(e)) => failures.push((tp.clone(), e.to_string())),
                        None => {
                            failures.push((tp.clone(), "not in the OffsetCommit response".into()));
                        }
                    }
                }
            }
            Err(e) => failures.extend(commits.keys().map(|tp| (tp.clone(), e.to_string()))),
        }
        failures
    }
}

/// The background load of [`OffsetsRuntime::start`], in MM2's checkpoint task's order: the
/// checkpoints topic and its checkpoints, then the offset-syncs topic and its syncs (whole), then
/// the restart seeds for `progress`; beside them, the source's groups.
async fn load(
    flow: FlowConfig,
    source: Rc<Cluster>,
    target: Rc<Cluster>,
    target_consumer: Rc<Cluster>,
    progress: BTreeMap<TopicPartition, progress::Entry>,
) -> Result<Loaded, OffsetsError> {
    let settings = OffsetsSettings::from_flow(&flow);
    let flow = &flow;
    // The group list comes from the source, as the offset syncs do by default: asked for
    // side by side, a start far from the source waits for one of them, not both.
    let loads = async {
        let checkpoints =
            load_checkpoint_store(flow, &target, &target_consumer, &flow.checkpoints_topic())
                .await?;
        let mut store = OffsetSyncStore::default();
        let syncs = if settings.emit_offset_syncs {
            Some(load_offset_syncs(flow, &checkpoints, &mut store).await?)
        } else {
            None
        };
        store.mark_read_to_end();
        Ok::<_, OffsetsError>((checkpoints, store, syncs))
    };
    let groups = async {
        if !settings.emit_checkpoints {
            return None;
        }
        let found = find_groups_timed(flow, &source, &settings).await;
        if matches!(&found, Ok(g) if g.is_empty()) {
            probe_group_access(flow, &source, &settings).await;
        }
        Some(found)
    };
    let (loaded, groups) = futures_util::join!(loads, groups);
    let (checkpoints, store, syncs) = loaded?;
    let seeds = restart_seeds(&store, flow, &target, &progress, |_| false).await;
    Ok(Loaded {
        checkpoints,
        store,
        syncs,
        groups,
        seeds,
    })
}

/// Creates the checkpoints topic and loads the last checkpoint of every selected group from it
/// (MM2's checkpoint task at start); an empty, unloaded store when checkpoints are off.
async fn load_checkpoint_store(
    flow: &FlowConfig,
    target: &Cluster,
    target_consumer: &Cluster,
    checkpoints_topic: &str,
) -> Result<CheckpointStore, OffsetsError> {
    let name = flow.name();
    let mut checkpoints = CheckpointStore::default();
    if flow.emit_checkpoints_enabled.value {
        ensure_internal_topic(
            target,
            checkpoints_topic,
            flow.checkpoints_topic_replication_factor.value,
        )
        .await
        .map_err(|source| OffsetsError::Cluster {
            flow: name.clone(),
            what: format!("cannot create {checkpoints_topic} on {}", flow.target),
            source: Box::new(source),
        })?;
        let (loaded, ok) = load_checkpoints(flow, target_consumer, &mut checkpoints).await;
        tracing::info!(flow = %name, topic = %checkpoints_topic, loaded, "checkpoints loaded");
        checkpoints.finish_load(ok);
    } else {
        checkpoints.finish_load(false);
    }
    Ok(checkpoints)
}

/// Creates the offset-syncs topic and reads it whole into `store` (keeping
/// full history only when the checkpoints could be read, as KAFKA-15905 does).
async fn load_offset_syncs(
    flow: &FlowConfig,
    checkpoints: &CheckpointStore,
    store: &mut OffsetSyncStore,
) -> Result<SyncsTopic, OffsetsError> {
    let name = flow.name();
    let c = &flow.clients;
    let (admin_client, consumer_client) = (
        &c.offset_syncs_admin.client,
        &c.offset_syncs_consumer.client,
    );
    let syncs_admin = cluster_for(&name, "offset-syncs admin", admin_client)?;
    let syncs_consumer = cluster_for(&name, "offset-syncs consumer", consumer_client)?;
    let producer = cluster_for(
        &name,
        "offset-syncs producer",
        &c.offset_syncs_producer.client,
    )?;
    let topic = SyncsTopic {
        name: flow.offset_syncs_topic(),
        cluster: match flow.offset_syncs_topic_location.value {
            OffsetSyncsLocation::Source => flow.source.clone(),
            OffsetSyncsLocation::Target => flow.target.clone(),
        },
        producer,
    };
    ensure_internal_topic(
        &syncs_admin,
        &topic.name,
        flow.offset_syncs_topic_replication_factor.value,
    )
    .await
    .map_err(|source| OffsetsError::Cluster {
        flow: name.clone(),
        what: format!("cannot create {} on {}", topic.name, topic.cluster),
        source: Box::new(source),
    })?;
    store.start(!checkpoints.load_succeeded());
    match load_syncs(&syncs_consumer, &topic.name, store).await {
        Ok((records, bad)) => {
            tracing::info!(
                flow = %name,
                topic = %topic.name,
                cluster = %topic.cluster,
                records,
                partitions = store.partition_count(),
                "offset syncs loaded"
            );
            if bad > 0 {
                tracing::warn!(flow = %name, topic = %topic.name, records = bad, "skipped undecodable offset-sync records");
            }
        }
        Err(e) => tracing::error!(
            flow = %name,
            topic = %topic.name,
            error = %e,
            "cannot read the offset syncs: translation starts from strait's own mapping only"
        ),
    }
    Ok(topic)
}

/// The state of `group` on the target: from ListGroups, or DescribeGroups when the broker did
/// not say; absent when the target does not list it.
pub(crate) async fn target_state(
    target: &Cluster,
    group: &str,
    listed: Option<&ListedGroup>,
) -> Result<TargetGroupState, ClusterError> {
    match listed {
        None => Ok(TargetGroupState::Absent),
        Some(g) if !g.state.is_empty() => Ok(TargetGroupState::from_kafka_name(&g.state)),
        Some(_) => {
            let d = target.describe_groups(&[group.to_string()]).await?;
            Ok(d.first().map_or(TargetGroupState::Unknown, |d| {
                TargetGroupState::from_kafka_name(&d.state)
            }))
        }
    }
}

/// The group name the group permissions are probed with: the literal start of the first
/// `groups` pattern (a prefix ACL on it then answers), or a fixed name.
pub fn probe_group(flow: &FlowConfig) -> String {
    let first = flow.group_filter.0.include.elements.first();
    let literal: String = first
        .map(|p| {
            p.chars()
                .take_while(|c| !".*+?[](){}|\\^$".contains(*c))
                .collect()
        })
        .unwrap_or_default();
    if literal.is_empty() {
        "strait-preflight-probe".to_string()
    } else {
        literal
    }
}

/// MM2's group discovery (`findConsumerGroups`): the source's consumer groups that pass the
/// group filter and have a committed offset on at least one topic the topic filter accepts.
/// At most `max_groups`, by name.
/// No group was found: a principal without DESCRIBE on the source's groups sees none
/// (ListGroups leaves them out), so ask once for a group the filter names and say so clearly.
/// Replication goes on either way.
async fn probe_group_access(flow: &FlowConfig, source: &Cluster, settings: &OffsetsSettings) {
    let group = probe_group(flow);
    let probe = tokio::time::timeout(settings.admin_timeout, source.group_operations(&group));
    // Only a refusal is news here; other answers (old brokers, timeouts) say nothing
    // about permissions.
    if let Ok(Err(e)) = probe.await
        && e.is(kafka_protocol::ResponseError::GroupAuthorizationFailed)
    {
        tracing::error!(flow = %flow.name(), "no consumer group is visible, so checkpoints and group offset sync have nothing to do (replication goes on): cannot describe group {group} of {}: {e}", flow.source);
    }
}

/// [`find_groups`] within `admin.timeout.ms`.
async fn find_groups_timed(
    flow: &FlowConfig,
    source: &Cluster,
    settings: &OffsetsSettings,
) -> Result<BTreeSet<String>, OffsetsError> {
    tokio::time::timeout(
        settings.admin_timeout,
        find_groups(flow, source, settings.max_groups),
    )
    .await
    .unwrap_or_else(|_| {
        Err(OffsetsError::Timeout {
            flow: flow.name(),
            what: "group refresh",
            timeout_ms: settings.admin_timeout.as_millis() as u64,
        })
    })
}

async fn find_groups(
    flow: &FlowConfig,
    source: &Cluster,
    max_groups: usize,
) -> Result<BTreeSet<String>, OffsetsError> {
    let listed = source
        .list_groups()
        .await
        .map_err(|e| OffsetsError::Cluster {
            flow: flow.name(),
            what: format!("cannot list the groups of {}", flow.source),
            source: Box::new(e),
        })?;
    let mut out = BTreeSet::new();
    for g in listed {
        // Consumer groups only (classic "consumer", KIP-848, or offsets-only groups).
        let consumer = g.protocol_type == "consumer" || g.protocol_type.is_empty();
        if !consumer || !flow.group_filter.should_replicate_group(&g.group_id) {
            continue;
        }
        let offsets = match source.offset_fetch(&g.group_id).await {
            Ok(o) => o,
            Err(e) => {
                tracing::warn!(flow = %flow.name(), group = %g.group_id, error = %e, "cannot fetch the group's committed offsets; leaving it out this time");
                continue;
            }
        };
        if !offsets
            .keys()
            .any(|tp| flow.topic_filter.should_replicate_topic(&tp.topic))
        {
            continue;
        }
        if out.len() >= max_groups {
            tracing::warn!(flow = %flow.name(), max_groups, group = %g.group_id, "too many consumer groups: leaving out this one and the rest");
            break;
        }
        out.insert(g.group_id);
    }
    Ok(out)
}

/// The `checkpoint_skips` reason of a partition without a checkpoint; `None` for the skips
/// that are not worth counting (a repeated checkpoint, a topic the filter leaves out).
fn skip_reason(why: &CheckpointSkip) -> Option<&'static str> {
    Some(match why {
        CheckpointSkip::FilteredOut | CheckpointSkip::Repeated => return None,
        CheckpointSkip::NoCommittedOffset => "no_committed_offset",
        CheckpointSkip::NotTranslatable => "no_mapping",
        CheckpointSkip::BeforeHistory => "before_history",
        CheckpointSkip::PreventingDownstreamRewind { .. } => "downstream_rewind",
        CheckpointSkip::DuplicateTarget(_) => "duplicate_target",
        CheckpointSkip::StoreFull => "store_full",
    })
}

/// Counts one group's group-offset sync: synced when something was committed, else skipped
/// by its first reason.
fn count_group_sync(c: &mut OffsetsCounters, r: &GroupSyncReport) {
    if r.committed() > 0 {
        c.groups_synced += 1;
        return;
    }
    let reason = if !r.failures.is_empty() {
        "commit_failed"
    } else if r
        .decisions
        .iter()
        .any(|d| matches!(d.action, GroupSyncAction::SkipGroupActive { .. }))
    {
        "active_on_target"
    } else if r
        .decisions
        .iter()
        .any(|d| matches!(d.action, GroupSyncAction::SkipInvalidOffset { .. }))
    {
        "invalid_offset"
    } else {
        "not_newer"
    };
    bump(&mut c.groups_skipped, reason);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_follow_the_flow_config() {
        let text = "clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\nA->B.enabled = true\n\
                    offset.lag.max = 7\nemit.checkpoints.interval.seconds = 3\nsync.group.offsets.enabled = true\n";
        let path = std::env::temp_dir().join(format!(
            "strait-translate-settings-{}.properties",
            std::process::id()
        ));
        std::fs::write(&path, text).unwrap();
        let cfg = crate::config::load(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        let s = OffsetsSettings::from_flow(cfg.flow("A", "B").unwrap());
        assert_eq!(s.offset_lag_max, 7);
        assert_eq!(s.emit_checkpoints_interval, Duration::from_secs(3));
        assert!(s.sync_group_offsets);
        assert!(s.emit_offset_syncs);
        // strait's default: new groups within seconds, not MM2's ten minutes.
        assert_eq!(s.refresh_groups_interval, Duration::from_secs(10));
        assert_eq!(s.offset_flush_interval, Duration::from_millis(60_000));
    }

    fn flow(extra: &str, tag: &str) -> FlowConfig {
        let text = format!(
            "clusters = A, B\nA.bootstrap.servers = a.invalid:9092\nB.bootstrap.servers = b.invalid:9092\n\
             A->B.enabled = true\nemit.checkpoints.interval.seconds = 1\n{extra}"
        );
        let path = format!("/cfg/{tag}.properties");
        let env = crate::config::StaticEnv::new().file(&path, &text);
        let cfg = crate::config::load_with(std::path::Path::new(&path), &env).unwrap();
        cfg.flow("A", "B").unwrap().clone()
    }

    /// A runtime whose load finishes when the first sender is used, and its second attempt
    /// when the second is (its clients never connect: the tests run nothing that would).
    fn loading(
        flow: &FlowConfig,
        now: Instant,
    ) -> (
        OffsetsRuntime,
        [tokio::sync::oneshot::Sender<Result<Loaded, OffsetsError>>; 2],
    ) {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let (tx2, rx2) = tokio::sync::oneshot::channel();
        let receivers = std::cell::RefCell::new(vec![rx2, rx]);
        let loader: Loader = Box::new(move || {
            let rx = receivers.borrow_mut().pop();
            Box::pin(async move {
                match rx {
                    Some(rx) => rx.await.unwrap_or_else(|_| {
                        Err(OffsetsError::LoadCancelled {
                            flow: "test".into(),
                        })
                    }),
                    None => panic!("loaded more than twice"),
                }
            })
        });
        let source = cluster_for("A->B", "source", &flow.clients.source_admin.client).unwrap();
        let target = cluster_for("A->B", "target", &flow.clients.target_admin.client).unwrap();
        let rt =
            OffsetsRuntime::with_loader(flow, source, target, Translator::default(), now, loader)
                .unwrap();
        (rt, [tx, tx2])
    }

    fn loaded(seeds: Vec<RestartSeed>) -> Loaded {
        let mut store = OffsetSyncStore::default();
        store.start(false);
        store.mark_read_to_end();
        Loaded {
            checkpoints: CheckpointStore::default(),
            store,
            syncs: None,
            groups: None,
            seeds,
        }
    }

    /// Runs `test` on a current-thread runtime inside a `LocalSet`, as `strait run` does.
    fn local(test: impl std::future::Future<Output = ()>) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        tokio::task::LocalSet::new().block_on(&rt, test);
    }

    async fn poll_until_loaded(rt: &mut OffsetsRuntime) -> Result<(), OffsetsError> {
        for _ in 0..100 {
            rt.poll_load().await?;
            if rt.is_loaded() {
                return Ok(());
            }
            tokio::task::yield_now().await;
        }
        panic!("the load did not finish");
    }

    fn seg(u: i64, d: i64, n: u32) -> MappingSegment {
        MappingSegment {
            upstream: u,
            downstream: d,
            count: n,
        }
    }

    #[test]
    fn segments_while_loading_are_mapped_at_once_and_their_syncs_sent_after_in_order() {
        local(async {
            let t0 = Instant::now();
            let (mut rt, [tx, _]) = loading(&flow("", "segments"), t0);
            let tp = TopicPartition::new("t", 0);
            rt.on_start("t", 0, 100);
            rt.on_segments("t", 0, &[seg(100, 0, 10), seg(110, 10, 5)]);
            rt.on_progress("t", 0, 115);
            // The progress store writes the mapping while the load runs: it is there already.
            let m = rt.translator().mapping().partition(&tp).unwrap();
            assert_eq!(m.run_count(), 1);
            assert_eq!(m.acked_end(), Some(115));
            // Nothing is sent before the load (no sync topic yet); the writer keeps the syncs.
            rt.tick(t0 + Duration::from_secs(120), 0).await;
            assert!(!rt.is_loaded());
            tx.send(Ok(loaded(Vec::new()))).ok().unwrap();
            poll_until_loaded(&mut rt).await.unwrap();
            let ready = rt.writer.take_ready();
            assert_eq!(
                ready
                    .iter()
                    .map(|s| (s.upstream_offset, s.downstream_offset))
                    .collect::<Vec<_>>()
                    .first(),
                Some(&(100, 0)),
                "the first record's sync, kept from before the load"
            );
            assert!(
                ready
                    .windows(2)
                    .all(|w| w[0].upstream_offset < w[1].upstream_offset)
            );
        });
    }

    #[test]
    fn rounds_due_while_loading_wait_for_it_then_run_at_once() {
        local(async {
            let t0 = Instant::now();
            let (mut rt, [tx, _]) = loading(&flow("", "rounds"), t0);
            let late = t0 + Duration::from_secs(90);
            // Due (checkpoints every second, flush every minute), but the load runs: untouched.
            rt.tick(late, 0).await;
            tx.send(Ok(loaded(Vec::new()))).ok().unwrap();
            poll_until_loaded(&mut rt).await.unwrap();
            let due = rt.due(late);
            assert!(due.checkpoints && due.flush && due.refresh_groups);
            // Then on their intervals again.
            assert!(!rt.due(late + Duration::from_millis(500)).checkpoints);
        });
    }

    #[test]
    fn exactly_once_syncs_held_while_loading_wait_for_the_commit() {
        local(async {
            let t0 = Instant::now();
            let (mut rt, [tx, _]) = loading(&flow("", "eos"), t0);
            let tp = TopicPartition::new("t", 0);
            rt.hold_syncs_until_commit(&tp);
            rt.on_segments("t", 0, &[seg(0, 0, 3)]);
            assert!(rt.writer.take_ready().is_empty(), "uncommitted: no sync");
            rt.on_committed(&tp);
            tx.send(Ok(loaded(Vec::new()))).ok().unwrap();
            poll_until_loaded(&mut rt).await.unwrap();
            let ready = rt.writer.take_ready();
            assert_eq!(ready.first().map(|s| s.upstream_offset), Some(0));
        });
    }

    #[test]
    fn restart_seeds_skip_partitions_whose_mapping_changed_while_loading() {
        local(async {
            let t0 = Instant::now();
            let (mut rt, [tx, _]) = loading(&flow("", "seeds"), t0);
            let seed = |p: i32| RestartSeed {
                tp: TopicPartition::new("t", p),
                segment: Segment::new(99, 49, 1),
                next_offset: 101,
            };
            // 0: started only (the seed still comes first); 1: copied meanwhile; 2: sought;
            // 3: an acknowledged end past the stored progress, no record copied.
            rt.on_start("t", 0, 101);
            rt.on_start("t", 1, 101);
            rt.on_segments("t", 1, &[seg(101, 50, 1)]);
            rt.on_seek(&TopicPartition::new("t", 2), 7);
            rt.on_progress("t", 3, 105);
            tx.send(Ok(loaded((0..4).map(seed).collect())))
                .ok()
                .unwrap();
            poll_until_loaded(&mut rt).await.unwrap();
            let m = |p: i32| {
                rt.translator()
                    .mapping()
                    .partition(&TopicPartition::new("t", p))
                    .map(|m| (m.runs().collect::<Vec<_>>(), m.acked_end()))
            };
            assert_eq!(m(0), Some((vec![Segment::new(99, 49, 1)], Some(101))));
            assert_eq!(m(1), Some((vec![Segment::new(101, 50, 1)], None)));
            assert!(m(2).is_none_or(|(runs, _)| runs.is_empty()));
            assert_eq!(m(3), Some((vec![Segment::new(99, 49, 1)], Some(105))));
            let t0p0 = TopicPartition::new("t", 0);
            let exact = rt.translator().translate(&t0p0, 100).unwrap();
            assert_eq!((exact.downstream, exact.precision), (50, Precision::Exact));
        });
    }

    #[test]
    fn a_failed_load_is_returned_once_and_nothing_runs_after_it() {
        local(async {
            let t0 = Instant::now();
            let (mut rt, [tx, _]) = loading(&flow("", "failed"), t0);
            tx.send(Err(OffsetsError::NoSuchFlow(
                "cannot create the topic".into(),
            )))
            .ok()
            .unwrap();
            let mut failed = None;
            for _ in 0..100 {
                if let Err(e) = rt.poll_load().await {
                    failed = Some(e);
                    break;
                }
                tokio::task::yield_now().await;
            }
            assert_eq!(
                failed.map(|e| e.to_string()).as_deref(),
                Some("cannot create the topic")
            );
            assert!(rt.poll_load().await.is_ok());
            assert!(!rt.is_loaded());
            // Neither the rounds nor the final ones run (they would reach for the clusters).
            rt.tick(t0 + Duration::from_secs(120), 0).await;
            assert!(rt.finish(true, 0).await.is_ok());
        });
    }

    #[test]
    fn a_stop_waits_for_the_load_and_returns_its_error() {
        local(async {
            let (mut rt, [tx, _]) = loading(&flow("", "stop"), Instant::now());
            tokio::task::spawn_local(async move {
                tokio::task::yield_now().await;
                tx.send(Err(OffsetsError::NoSuchFlow("unreadable".into())))
                    .ok()
                    .unwrap();
            });
            let e = rt.finish(false, 0).await.unwrap_err();
            assert_eq!(e.to_string(), "unreadable");
        });
    }

    #[test]
    fn a_load_that_fails_with_an_error_that_may_pass_is_tried_again_and_the_run_goes_on() {
        local(async {
            let t0 = Instant::now();
            let (mut rt, [tx, tx2]) = loading(&flow("", "retry"), t0);
            tx.send(Err(OffsetsError::Timeout {
                flow: "A->B".into(),
                what: "creating the offset-syncs topic",
                timeout_ms: 1,
            }))
            .ok()
            .unwrap();
            for _ in 0..100 {
                rt.poll_load()
                    .await
                    .expect("an error that may pass does not stop the run");
                tokio::task::yield_now().await;
            }
            assert!(!rt.is_loaded());
            assert!(matches!(rt.load, Load::Retrying { failed: 1, .. }));
            // A segment while waiting: the second attempt's seeds must not go before it.
            rt.on_segments("t", 0, &[seg(0, 0, 1)]);
            tokio::time::sleep(load_retry_delay(1) + Duration::from_millis(50)).await;
            rt.poll_load().await.unwrap();
            assert!(
                matches!(&rt.load, Load::Running { failed: 1, changed, .. } if changed.len() == 1),
                "the second attempt started and kept what changed meanwhile"
            );
            tx2.send(Ok(loaded(Vec::new()))).ok().unwrap();
            poll_until_loaded(&mut rt).await.unwrap();
        });
    }

    #[test]
    fn the_wait_between_load_attempts_doubles_up_to_thirty_seconds() {
        let secs: Vec<u64> = (1..=8).map(|n| load_retry_delay(n).as_secs()).collect();
        assert_eq!(secs, [1, 2, 4, 8, 16, 30, 30, 30]);
    }
}
