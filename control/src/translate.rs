//! Offset translation at run time: the IO side of [`crate::offsets`] for `strait run` and
//! `strait offsets translate`.
//!
//! One [`OffsetsRuntime`] per flow, owned by the control loop:
//! - [`OffsetsRuntime::on_segments`] takes the shards' exact mapping segments (from
//!   `ShardEvent::Report` and `ShardEvent::Revoked`): they extend the per-partition
//!   [`OffsetMapping`] and drive MM2's offset-sync cadence ([`OffsetSyncWriter`]);
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
//! [`OffsetSyncStore`] (keeping full history only when the checkpoints could be read, as
//! KAFKA-15905 does). So a restarted instance translates from the offset syncs at once, before
//! it has replicated anything.
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
use strait_dataplane::batch::Record;
use strait_dataplane::io::{ConnSetup, IoBackend};
use strait_dataplane::shard::MappingSegment;

use crate::cluster::{
    Cluster, ClusterError, IsolationLevel, ListedGroup, OffsetSpec, RetryConfig, TopicPartition,
};
use crate::config::{ClientConfig, FlowConfig, Mm2Config, OffsetSyncsLocation};
use crate::internal;
use crate::offsets::{
    Checkpoint, CheckpointSkip, CheckpointStore, CommittedOffset, GroupSyncAction,
    GroupSyncDecision, OffsetMapping, OffsetSyncStore, OffsetSyncWriter, Precision, Segment,
    StoredSync, SyncWriterConfig, TargetGroupState, TranslatedOffset, TranslationSource,
    plan_group_sync, translate_offset,
};
use crate::progress;

/// Default bound on the consumer groups one flow checkpoints. Each costs one OffsetFetch per
/// checkpoint round and per group refresh.
pub const DEFAULT_MAX_GROUPS: usize = 10_000;

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
    /// The connection settings of a client are unusable (e.g. an unreadable trust store).
    #[error("flow {flow}: client {role}: {message}")]
    Client {
        flow: String,
        role: &'static str,
        message: String,
    },
    /// `--flow` names no flow of the config, or none was given and the choice is ambiguous.
    #[error("{0}")]
    NoSuchFlow(String),
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

/// Everything translation needs for one flow: strait's exact mapping, each partition's
/// acknowledged end, and MM2's offset-sync store.
#[derive(Debug, Default)]
pub struct Translator {
    mapping: OffsetMapping,
    /// Per source partition: every source record below this offset is replicated, and its
    /// mapping segments have been applied.
    acked_end: HashMap<TopicPartition, i64>,
    store: OffsetSyncStore,
}

impl Translator {
    /// Translates the committed offset `upstream` of source partition `tp`: exact wherever
    /// strait knows the mapping, MM2's algorithm beyond it; `None` when nothing is known about
    /// the partition.
    pub fn translate(&self, tp: &TopicPartition, upstream: i64) -> Option<TranslatedOffset> {
        let mapping = self.mapping.partition(tp);
        let answer = translate_offset(mapping, &self.store, tp, upstream);
        if answer.is_some_and(|a| a.precision == Precision::Exact) {
            return answer;
        }
        // Between the last replicated record and the acknowledged end there are only records
        // strait does not copy: the first replicated record at or after `upstream` will be the
        // next one written, at the mapping's downstream end.
        if let Some(m) = mapping
            && let (Some(up_end), Some(down_end)) = (m.upstream_end(), m.downstream_end())
            && let Some(&acked) = self.acked_end.get(tp)
            && (up_end..=acked).contains(&upstream)
        {
            return Some(TranslatedOffset {
                downstream: down_end,
                precision: Precision::Exact,
                source: TranslationSource::Mapping,
            });
        }
        answer
    }

    /// Applies one acknowledged segment.
    fn append(&mut self, tp: &TopicPartition, segment: Segment) -> Result<(), String> {
        self.mapping.append(tp, segment).map_err(|e| e.to_string())
    }

    /// The sync store (read from the offset-syncs topic, plus the syncs strait wrote since).
    pub fn store(&self) -> &OffsetSyncStore {
        &self.store
    }

    /// The exact mapping.
    pub fn mapping(&self) -> &OffsetMapping {
        &self.mapping
    }
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
    let mut candidates: Vec<(TopicPartition, TopicPartition, StoredSync, i64)> = Vec::new();
    // Only partitions this flow replicates: the progress topic also holds other topics' ends.
    for (tp, entry) in progress
        .iter()
        .filter(|(tp, _)| flow.should_replicate_topic(&tp.topic))
    {
        let Some(latest) = translator.store.syncs_for(tp).map(|s| s[0]) else {
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
        return 0;
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
            return 0;
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
    let mut seeded = 0;
    for (tp, remote, latest, next) in candidates {
        let end = match ends.get(&remote) {
            Some(Ok(end)) => end,
            Some(Err(e)) => {
                tracing::debug!(partition = %remote, error = %e, "no end offset: translation of {tp} starts from the offset syncs alone");
                continue;
            }
            None => continue,
        };
        if let Some(segment) = restart_seed(&latest, next, *end)
            && translator.append(&tp, segment).is_ok()
        {
            translator.acked_end.insert(tp, next);
            seeded += 1;
        }
    }
    seeded
}

/// The exact pair a restart can trust for one partition (see [`seed_from_progress`]): the
/// latest offset sync `(u, d)` as a one-record segment, when the target partition ends right
/// after `d` (`target_end == d + 1`) and the stored progress `next_offset` is past `u`. With it
/// and `next_offset` as the acknowledged end, upstream offsets `u..=next_offset` translate
/// exactly.
pub fn restart_seed(latest: &StoredSync, next_offset: i64, target_end: i64) -> Option<Segment> {
    let (u, d) = (latest.upstream_offset, latest.downstream_offset);
    let segment = Segment::new(u, d, 1);
    (segment.is_valid() && next_offset > u && d.checked_add(1) == Some(target_end))
        .then_some(segment)
}

/// Builds an admin-style client for `client` (connections are opened on first use).
fn cluster_for(
    flow: &str,
    role: &'static str,
    client: &ClientConfig,
) -> Result<Rc<Cluster>, OffsetsError> {
    let setup = ConnSetup::new(client.conn.clone(), IoBackend::Epoll).map_err(|e| {
        OffsetsError::Client {
            flow: flow.to_string(),
            role,
            message: e.to_string(),
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
    groups: Vec<(String, Vec<Checkpoint>)>,
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

/// What one group-sync round did for one group: the report strait logs (and `offsets
/// translate` prints as a plan).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupSyncReport {
    pub group: String,
    /// The target group's state when the round looked.
    pub state: TargetGroupState,
    /// One decision per target partition with a checkpoint.
    pub decisions: Vec<GroupSyncDecision>,
    /// Commits the target refused, with its error.
    pub failures: Vec<(TopicPartition, String)>,
}

impl GroupSyncReport {
    /// Partitions committed.
    pub fn committed(&self) -> usize {
        self.decisions
            .iter()
            .filter(|d| d.is_commit() && !self.failures.iter().any(|(tp, _)| *tp == d.tp))
            .count()
    }
}

impl fmt::Display for GroupSyncReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let skipped = self.decisions.iter().filter(|d| !d.is_commit()).count();
        write!(
            f,
            "group {} (target state {}): {} committed, {} skipped, {} failed",
            self.group,
            self.state,
            self.committed(),
            skipped,
            self.failures.len()
        )?;
        for d in &self.decisions {
            match self.failures.iter().find(|(tp, _)| *tp == d.tp) {
                Some((_, e)) => write!(f, "; {} failed: {e}", d.reason())?,
                None => write!(f, "; {}", d.reason())?,
            }
        }
        Ok(())
    }
}

/// The offsets duties of one flow in `strait run`. See the [module docs](self).
pub struct OffsetsRuntime {
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
    /// No offset-sync sends before this instant (after a failed send).
    syncs_paused_until: Option<Instant>,
}

impl fmt::Debug for OffsetsRuntime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OffsetsRuntime")
            .field("flow", &self.name)
            .field("partitions", &self.translator.mapping.len())
            .field("groups", &self.groups.len())
            .finish()
    }
}

impl OffsetsRuntime {
    /// Creates the internal topics this flow needs, loads the checkpoints and the offset syncs,
    /// seeds the exact end pairs from `progress`, and lists the source groups. `source` and
    /// `target` are the flow's admin clients.
    pub async fn start(
        flow: &FlowConfig,
        source: Rc<Cluster>,
        target: Rc<Cluster>,
        progress: &BTreeMap<TopicPartition, progress::Entry>,
        now: Instant,
    ) -> Result<Self, OffsetsError> {
        let name = flow.name();
        let settings = OffsetsSettings::from_flow(flow);
        let c = &flow.clients;
        let target_producer = cluster_for(&name, "target producer", &c.target_producer.client)?;
        let target_consumer = cluster_for(&name, "target consumer", &c.target_consumer.client)?;
        let checkpoints_topic = flow.checkpoints_topic();

        let mut checkpoints = CheckpointStore::default();
        if settings.emit_checkpoints {
            ensure_internal_topic(
                &target,
                &checkpoints_topic,
                flow.checkpoints_topic_replication_factor.value,
            )
            .await
            .map_err(|source| OffsetsError::Cluster {
                flow: name.clone(),
                what: format!("cannot create {checkpoints_topic} on {}", flow.target),
                source: Box::new(source),
            })?;
            let (loaded, ok) = load_checkpoints(flow, &target_consumer, &mut checkpoints).await;
            tracing::info!(flow = %name, topic = %checkpoints_topic, loaded, "checkpoints loaded");
            checkpoints.finish_load(ok);
        } else {
            checkpoints.finish_load(false);
        }

        let mut translator = Translator::default();
        let mut syncs = None;
        if settings.emit_offset_syncs {
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
            translator.store.start(!checkpoints.load_succeeded());
            match load_syncs(&syncs_consumer, &topic.name, &mut translator.store).await {
                Ok((records, bad)) => {
                    tracing::info!(
                        flow = %name,
                        topic = %topic.name,
                        cluster = %topic.cluster,
                        records,
                        partitions = translator.store.partition_count(),
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
            syncs = Some(topic);
        }
        translator.store.mark_read_to_end();
        let seeded = seed_from_progress(&mut translator, flow, &target, progress).await;
        if seeded > 0 {
            tracing::info!(flow = %name, partitions = seeded, "exact end offsets restored from the last offset syncs and stored progress");
        }

        let writer = OffsetSyncWriter::new(SyncWriterConfig {
            offset_lag_max: settings.offset_lag_max,
            max_outstanding: settings.max_outstanding_syncs,
        });
        let checkpointing = settings.emit_checkpoints;
        let mut rt = Self {
            name,
            source,
            target,
            target_producer,
            syncs,
            checkpoints_topic,
            translator,
            writer,
            checkpoints,
            groups: BTreeSet::new(),
            next_flush: now + settings.offset_flush_interval,
            next_refresh: (checkpointing && settings.refresh_groups)
                .then(|| now + settings.refresh_groups_interval),
            next_checkpoints: checkpointing.then(|| now + settings.emit_checkpoints_interval),
            next_group_sync: (checkpointing && settings.sync_group_offsets)
                .then(|| now + settings.sync_group_offsets_interval),
            last_reports: HashMap::new(),
            mapping_errors: 0,
            syncs_paused_until: None,
            flow: flow.clone(),
            settings,
        };
        if checkpointing {
            rt.refresh_groups_logged().await;
        }
        Ok(rt)
    }

    /// The flow's translation state.
    pub fn translator(&self) -> &Translator {
        &self.translator
    }

    /// The groups being checkpointed.
    pub fn groups(&self) -> &BTreeSet<String> {
        &self.groups
    }

    /// The last emitted checkpoints.
    pub fn checkpoints(&self) -> &CheckpointStore {
        &self.checkpoints
    }

    /// New exact mapping segments of source partition `topic`-`partition`, oldest first.
    pub fn on_segments(&mut self, topic: &str, partition: i32, segments: &[MappingSegment]) {
        if segments.is_empty() {
            return;
        }
        let tp = TopicPartition::new(topic, partition);
        for s in segments {
            let segment = Segment::new(s.upstream, s.downstream, i64::from(s.count));
            if let Err(e) = self.translator.append(&tp, segment) {
                self.mapping_error(&e);
                continue;
            }
            if self.syncs.is_some()
                && let Err(e) = self.writer.on_segment(&tp, segment)
            {
                self.mapping_error(&e.to_string());
            }
        }
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
        self.translator.acked_end.insert(tp, next_offset);
    }

    /// Forgets a source partition (its topic was deleted or recreated).
    pub fn forget_partition(&mut self, tp: &TopicPartition) {
        self.translator.mapping.remove(tp);
        self.translator.acked_end.remove(tp);
        self.writer.remove_partition(tp);
    }

    /// Runs what is due at `now`; `wall_ms` stamps the records written.
    pub async fn tick(&mut self, now: Instant, wall_ms: i64) {
        self.send_syncs(now, wall_ms).await;
        if now >= self.next_flush {
            self.next_flush = now + self.settings.offset_flush_interval;
            self.writer.on_flush_interval();
            self.send_syncs(now, wall_ms).await;
        }
        if self.next_refresh.is_some_and(|t| now >= t) {
            self.next_refresh = Some(now + self.settings.refresh_groups_interval);
            self.refresh_groups_logged().await;
        }
        if self.next_checkpoints.is_some_and(|t| now >= t) {
            self.next_checkpoints = Some(now + self.settings.emit_checkpoints_interval);
            self.checkpoints_logged(wall_ms).await;
        }
        if self.next_group_sync.is_some_and(|t| now >= t) {
            self.next_group_sync = Some(now + self.settings.sync_group_offsets_interval);
            self.group_sync_logged().await;
        }
    }

    /// On the way out, after the shards' final reports: publishes the latest offset sync of
    /// every partition (so that a restart translates from the very end) and, when `final_round`
    /// (`--until-caught-up`), refreshes the groups and runs one more round of checkpoints and
    /// group sync.
    pub async fn finish(&mut self, final_round: bool, wall_ms: i64) {
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
            }
        }
        if final_round && self.settings.emit_checkpoints {
            self.refresh_groups_logged().await;
            self.checkpoints_logged(wall_ms).await;
            if self.settings.sync_group_offsets {
                self.group_sync_logged().await;
            }
        }
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
        if self.syncs_paused_until.is_some_and(|t| now < t) {
            return true;
        }
        let ready = self.writer.take_ready();
        if ready.is_empty() {
            return true;
        }
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
            internal::produce(&syncs.producer, &syncs.name, 0, &records),
        )
        .await;
        let ok = matches!(sent, Ok(Ok(_)));
        self.syncs_paused_until = (!ok).then_some(now + SYNC_FAILURE_PAUSE);
        match sent {
            Ok(Ok(_)) => {
                for s in &ready {
                    // MM2's checkpoint task reads its own syncs back from the topic.
                    if let Err(e) = self.translator.store.handle_sync(s) {
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

    async fn with_timeout<T>(
        &self,
        what: &'static str,
        fut: impl Future<Output = Result<T, OffsetsError>>,
    ) -> Result<T, OffsetsError> {
        tokio::time::timeout(self.settings.admin_timeout, fut)
            .await
            .unwrap_or_else(|_| {
                Err(OffsetsError::Timeout {
                    flow: self.name.clone(),
                    what,
                    timeout_ms: self.settings.admin_timeout.as_millis() as u64,
                })
            })
    }

    async fn refresh_groups_logged(&mut self) {
        let found = self
            .with_timeout(
                "group refresh",
                find_groups(&self.flow, &self.source, self.settings.max_groups),
            )
            .await;
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
            }
            Err(e) => {
                tracing::warn!("cannot refresh the consumer groups; keeping the last list: {e}")
            }
        }
    }

    async fn checkpoints_logged(&mut self, wall_ms: i64) {
        let timeout = self.settings.admin_timeout;
        let round = tokio::time::timeout(timeout, self.checkpoint_round(wall_ms)).await;
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
        let groups: Vec<String> = self.groups.iter().cloned().collect();
        let mut batch = CheckpointBatch::default();
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
                .map(|(tp, o)| {
                    let offset = CommittedOffset {
                        offset: o.offset,
                        metadata: o.metadata,
                    };
                    (tp, Some(offset))
                })
                .collect();
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
                if !matches!(why, CheckpointSkip::Repeated | CheckpointSkip::FilteredOut) {
                    tracing::debug!(flow = %self.name, group = %group, partition = %tp, "no checkpoint: {why}");
                }
            }
            if outcome.emitted.is_empty() {
                continue;
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
            batch.groups.push((group, previous));
            if batch.records.len() >= MAX_RECORDS_PER_PRODUCE
                || batch.bytes >= MAX_BYTES_PER_PRODUCE
            {
                self.write_checkpoints(std::mem::take(&mut batch), &mut counts)
                    .await;
            }
        }
        self.write_checkpoints(batch, &mut counts).await;
        counts
    }

    /// Writes a batch of checkpoints to partition 0 of the checkpoints topic; on failure puts
    /// the groups' previous checkpoints back into the store, so that the next round retries.
    async fn write_checkpoints(&mut self, batch: CheckpointBatch, counts: &mut RoundCounts) {
        if batch.records.is_empty() {
            return;
        }
        match internal::produce(
            &self.target_producer,
            &self.checkpoints_topic,
            0,
            &batch.records,
        )
        .await
        {
            Ok(_) => {
                counts.written += batch.records.len();
                counts.exact += batch.exact;
            }
            Err(e) => {
                tracing::warn!(flow = %self.name, topic = %self.checkpoints_topic, error = %e, "cannot write checkpoints");
                for (group, previous) in &batch.groups {
                    self.checkpoints.remove_group(group);
                    for cp in previous {
                        if let (Ok(k), Ok(v)) = (cp.encode_key(), cp.encode_value()) {
                            let _ = self.checkpoints.load_record(&k, Some(&v), |_| true);
                        }
                    }
                }
                counts.failed_groups += batch.groups.len();
            }
        }
    }

    async fn group_sync_logged(&mut self) {
        let timeout = self.settings.admin_timeout;
        match tokio::time::timeout(timeout, self.group_sync_round()).await {
            Ok(Ok(reports)) => {
                for r in reports {
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
            Ok(Err(e)) => tracing::warn!("group offset sync failed: {e}"),
            Err(_) => {
                tracing::warn!(flow = %self.name, "group offset sync did not finish within admin.timeout.ms")
            }
        }
    }

    /// One round of group-offset sync over the groups with checkpoints.
    async fn group_sync_round(&mut self) -> Result<Vec<GroupSyncReport>, OffsetsError> {
        if !self.checkpoints.is_initialized() {
            return Ok(Vec::new());
        }
        let groups: Vec<String> = self
            .groups
            .iter()
            .filter(|g| self.checkpoints.get(g).is_some_and(|c| !c.is_empty()))
            .cloned()
            .collect();
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
            let state = match target_state(
                &self.target,
                &group,
                listed.get(group.as_str()).copied(),
            )
            .await
            {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(flow = %self.name, group = %group, error = %e, "cannot read the target group's state; not syncing it");
                    continue;
                }
            };
            let mut target_offsets: HashMap<TopicPartition, Option<i64>> = HashMap::new();
            if state.is_idle() {
                match self.target.offset_fetch(&group).await {
                    Ok(o) => {
                        target_offsets.extend(o.into_iter().map(|(tp, c)| (tp, Some(c.offset))))
                    }
                    Err(e) => {
                        tracing::warn!(flow = %self.name, group = %group, error = %e, "cannot fetch the target group's offsets; not syncing it");
                        continue;
                    }
                }
            }
            let checkpoints = self.checkpoints.converted_offsets(&group);
            let decisions = plan_group_sync(checkpoints, state, &target_offsets);
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
            let mut failures = Vec::new();
            if !commits.is_empty() {
                match self.target.offset_commit(&group, &commits).await {
                    Ok(results) => {
                        for tp in commits.keys() {
                            match results.get(tp) {
                                Some(Ok(())) => {}
                                Some(Err(e)) => failures.push((tp.clone(), e.to_string())),
                                None => failures
                                    .push((tp.clone(), "not in the OffsetCommit response".into())),
                            }
                        }
                    }
                    Err(e) => {
                        failures.extend(commits.keys().map(|tp| (tp.clone(), e.to_string())));
                    }
                }
            }
            reports.push(GroupSyncReport {
                group,
                state,
                decisions,
                failures,
            });
        }
        Ok(reports)
    }
}

/// MM2's `createSinglePartitionCompactedTopic`: one partition, `cleanup.policy=compact`, the
/// given replication factor. Like MM2, a refusal for lack of authorization or an old broker is
/// logged and ignored, on the assumption that the topic exists or will be created by someone
/// allowed to.
async fn ensure_internal_topic(
    cluster: &Cluster,
    topic: &str,
    replication_factor: i16,
) -> Result<(), ClusterError> {
    use kafka_protocol::ResponseError as E;
    match progress::ensure_compacted_topic(cluster, topic, replication_factor).await {
        Err(e)
            if e.is(E::TopicAuthorizationFailed)
                || e.is(E::ClusterAuthorizationFailed)
                || e.is(E::UnsupportedVersion) =>
        {
            tracing::warn!(topic, cluster = cluster.alias(), error = %e, "cannot create the internal topic; assuming it exists");
            Ok(())
        }
        other => other,
    }
}

/// The state of `group` on the target: from ListGroups, or DescribeGroups when the broker did
/// not say; absent when the target does not list it.
async fn target_state(
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

/// MM2's group discovery (`findConsumerGroups`): the source's consumer groups that pass the
/// group filter and have a committed offset on at least one topic the topic filter accepts.
/// At most `max_groups`, by name.
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

/// Loads the checkpoints topic into `store` (groups the filter selects). Returns (records
/// loaded, whether the read succeeded).
async fn load_checkpoints(
    flow: &FlowConfig,
    consumer: &Cluster,
    store: &mut CheckpointStore,
) -> (usize, bool) {
    let topic = flow.checkpoints_topic();
    let mut loaded = 0usize;
    let mut bad = 0usize;
    let read = internal::read_to_end(consumer, &topic, 0, IsolationLevel::ReadUncommitted, |r| {
        let Some(key) = r.key.as_deref() else {
            bad += 1;
            return;
        };
        match store.load_record(key, r.value.as_deref(), |g| {
            flow.group_filter.should_replicate_group(g)
        }) {
            Ok(true) => loaded += 1,
            Ok(false) => {}
            Err(_) => bad += 1,
        }
    })
    .await;
    if bad > 0 {
        tracing::warn!(flow = %flow.name(), topic = %topic, records = bad, "skipped undecodable checkpoint records");
    }
    match read {
        Ok(_) => (loaded, true),
        Err(e) => {
            tracing::warn!(flow = %flow.name(), topic = %topic, error = %e, "cannot read the checkpoints; offset syncs load with only the latest per partition (as MM2)");
            (0, false)
        }
    }
}

/// Reads the whole offset-syncs topic (partition 0) into `store`. Returns (records, bad
/// records).
async fn load_syncs(
    consumer: &Cluster,
    topic: &str,
    store: &mut OffsetSyncStore,
) -> Result<(usize, usize), ClusterError> {
    let mut records = 0usize;
    let mut bad = 0usize;
    internal::read_to_end(consumer, topic, 0, IsolationLevel::ReadUncommitted, |r| {
        records += 1;
        match (r.key.as_deref(), r.value.as_deref()) {
            (Some(k), Some(v)) => {
                if store.handle_record(k, v).is_err() {
                    bad += 1;
                }
            }
            _ => bad += 1,
        }
    })
    .await?;
    Ok((records, bad))
}

/// Reads strait's stored progress without creating anything. A missing topic is no progress.
async fn read_progress(
    target: &Cluster,
    source_alias: &str,
) -> BTreeMap<TopicPartition, progress::Entry> {
    let topic = progress::topic_name(source_alias);
    let mut entries = BTreeMap::new();
    let read = internal::read_to_end(target, &topic, 0, IsolationLevel::ReadUncommitted, |r| {
        let Some(key) = r.key.as_deref() else {
            return;
        };
        match progress::decode(source_alias, key, r.value.as_deref()) {
            Ok(Some((tp, Some(e)))) => {
                entries.insert(tp, e);
            }
            Ok(Some((tp, None))) => {
                entries.remove(&tp);
            }
            _ => {}
        }
    })
    .await;
    if let Err(e) = read {
        tracing::debug!(topic = %topic, error = %e, "no stored progress");
    }
    entries
}

/// One row of `strait offsets translate`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TranslateRow {
    /// Source partition.
    pub source: TopicPartition,
    /// The group's committed offset on the source.
    pub committed: i64,
    /// The target partition (MM2's renamed topic).
    pub target: TopicPartition,
    /// The best translation available; see [`best_answer`].
    pub answer: Answer,
    /// The last checkpoint's downstream offset, if any.
    pub last_checkpoint: Option<i64>,
    /// The target group's committed offset, if any.
    pub target_committed: Option<i64>,
}

/// What `strait offsets translate` prints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TranslateReport {
    pub flow: String,
    pub group: String,
    /// Where the offset syncs were read from, and how many partitions they cover.
    pub syncs: String,
    /// Whether the group filter selects the group (strait checkpoints only those).
    pub group_selected: bool,
    pub rows: Vec<TranslateRow>,
    /// Source topics of the group that the topic filter leaves out.
    pub filtered_topics: Vec<String>,
    /// The target group's state and what group sync would do with these translations.
    pub plan: GroupSyncReport,
}

/// How `offsets translate` answered for one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// From the offset syncs and strait's stored progress: what a restarted strait computes.
    Translated(TranslatedOffset),
    /// strait's last checkpoint for this very committed offset: the translation it made while
    /// replicating (exact where its mapping covered the offset), ahead of what the offset syncs
    /// give now. Group sync and `RemoteClusterUtils` use this value.
    Checkpoint(i64),
    /// Neither the offset syncs, strait's progress nor a checkpoint know the partition.
    Unknown,
}

impl Answer {
    /// The translated offset; `None` when unknown or before the retained history.
    pub fn downstream(&self) -> Option<i64> {
        match self {
            Self::Translated(t) => Some(t.downstream).filter(|d| *d >= 0),
            Self::Checkpoint(d) => Some(*d),
            Self::Unknown => None,
        }
    }

    /// The PRECISION column.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Translated(t) => match t.precision {
                Precision::Exact => "exact",
                Precision::Approximate => "approximate",
                Precision::BeforeHistory => "before-history",
            },
            Self::Checkpoint(_) => "checkpoint",
            Self::Unknown => "unknown",
        }
    }
}

/// Combines a fresh translation (offset syncs and progress) with the group's last checkpoint
/// for the partition: a provably exact translation wins; otherwise the checkpoint, when it is
/// for the same committed offset and not behind (both are safe: strait never checkpoints past
/// the first record the group has not read); otherwise the fresh translation.
pub fn best_answer(
    fresh: Option<TranslatedOffset>,
    last: Option<&Checkpoint>,
    committed: i64,
) -> Answer {
    if let Some(t) = fresh
        && t.precision == Precision::Exact
    {
        return Answer::Translated(t);
    }
    let fresh_down = fresh.map_or(-1, |t| t.downstream);
    match last {
        Some(cp)
            if cp.upstream_offset == committed
                && cp.downstream_offset >= 0
                && cp.downstream_offset >= fresh_down =>
        {
            Answer::Checkpoint(cp.downstream_offset)
        }
        _ => fresh.map_or(Answer::Unknown, Answer::Translated),
    }
}

impl fmt::Display for TranslateReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "flow {}, group {}", self.flow, self.group)?;
        writeln!(f, "offset syncs: {}", self.syncs)?;
        if !self.group_selected {
            writeln!(
                f,
                "note: groups/groups.exclude leave this group out: strait does not checkpoint or sync it"
            )?;
        }
        if !self.filtered_topics.is_empty() {
            writeln!(
                f,
                "not replicated (topic filter): {}",
                self.filtered_topics.join(", ")
            )?;
        }
        let dash = |v: Option<i64>| v.map_or("-".to_string(), |v| v.to_string());
        let header = [
            "TOPIC",
            "PARTITION",
            "SOURCE-OFFSET",
            "TARGET-TOPIC",
            "TARGET-OFFSET",
            "PRECISION",
            "LAST-CHECKPOINT",
            "TARGET-COMMITTED",
        ];
        let mut lines: Vec<[String; 8]> = vec![header.map(String::from)];
        for r in &self.rows {
            lines.push([
                r.source.topic.clone(),
                r.source.partition.to_string(),
                r.committed.to_string(),
                r.target.topic.clone(),
                dash(r.answer.downstream()),
                r.answer.label().to_string(),
                dash(r.last_checkpoint),
                dash(r.target_committed),
            ]);
        }
        let mut widths = [0usize; 8];
        for l in &lines {
            for (w, c) in widths.iter_mut().zip(l) {
                *w = (*w).max(c.len());
            }
        }
        for l in &lines {
            let cells: Vec<String> = l
                .iter()
                .zip(widths)
                .map(|(c, w)| format!("{c:<w$}"))
                .collect();
            writeln!(f, "{}", cells.join("  ").trim_end())?;
        }
        if self.rows.is_empty() {
            writeln!(f, "the group has no committed offset on a replicated topic")?;
        }
        writeln!(f, "target group state: {}", self.plan.state)?;
        for d in &self.plan.decisions {
            writeln!(f, "group sync would {}", d.reason())?;
        }
        Ok(())
    }
}

/// Picks the flow for `--flow A->B`, or the only enabled flow.
fn select_flow<'a>(
    cfg: &'a Mm2Config,
    wanted: Option<&str>,
) -> Result<&'a FlowConfig, OffsetsError> {
    let names = || {
        cfg.enabled_flows()
            .map(FlowConfig::name)
            .collect::<Vec<_>>()
            .join(", ")
    };
    match wanted {
        Some(w) => {
            let (s, t) = w.split_once("->").ok_or_else(|| {
                OffsetsError::NoSuchFlow(format!("--flow {w}: expected SOURCE->TARGET, e.g. A->B"))
            })?;
            cfg.flow(s.trim(), t.trim()).ok_or_else(|| {
                OffsetsError::NoSuchFlow(format!(
                    "--flow {w}: no such flow (enabled flows: {})",
                    names()
                ))
            })
        }
        None => {
            let mut enabled = cfg.enabled_flows();
            match (enabled.next(), enabled.next()) {
                (Some(f), None) => Ok(f),
                (None, _) => Err(OffsetsError::NoSuchFlow(
                    "no flow is enabled; name one with --flow SOURCE->TARGET".into(),
                )),
                (Some(_), Some(_)) => Err(OffsetsError::NoSuchFlow(format!(
                    "several flows are enabled ({}); choose one with --flow SOURCE->TARGET",
                    names()
                ))),
            }
        }
    }
}

/// `strait offsets translate`: translates `group`'s committed source offsets for one flow from
/// the offset-syncs topic and strait's stored progress, without replicating or writing
/// anything.
pub async fn translate_command(
    cfg: &Mm2Config,
    flow: Option<&str>,
    group: &str,
) -> Result<TranslateReport, OffsetsError> {
    let flow = select_flow(cfg, flow)?;
    let name = flow.name();
    let c = &flow.clients;
    let source = cluster_for(&name, "source admin", &c.source_admin.client)?;
    let target = cluster_for(&name, "target admin", &c.target_admin.client)?;
    let target_consumer = cluster_for(&name, "target consumer", &c.target_consumer.client)?;
    let cluster_err = |what: String| {
        let name = name.clone();
        move |source| OffsetsError::Cluster {
            flow: name,
            what,
            source: Box::new(source),
        }
    };

    let mut checkpoints = CheckpointStore::default();
    let (_, checkpoints_ok) = load_checkpoints(flow, &target_consumer, &mut checkpoints).await;
    checkpoints.finish_load(checkpoints_ok);

    let mut translator = Translator::default();
    translator.store.start(!checkpoints_ok);
    let syncs_topic = flow.offset_syncs_topic();
    let syncs_cluster = match flow.offset_syncs_topic_location.value {
        OffsetSyncsLocation::Source => &flow.source,
        OffsetSyncsLocation::Target => &flow.target,
    };
    let syncs = if flow.emit_offset_syncs_enabled.value {
        let consumer = cluster_for(
            &name,
            "offset-syncs consumer",
            &c.offset_syncs_consumer.client,
        )?;
        match load_syncs(&consumer, &syncs_topic, &mut translator.store).await {
            Ok((records, _)) => format!(
                "{syncs_topic} on {syncs_cluster}: {records} records for {} partitions",
                translator.store.partition_count()
            ),
            Err(e)
                if e.is(kafka_protocol::ResponseError::UnknownTopicOrPartition)
                    || matches!(e, ClusterError::UnknownTopicOrPartition { .. }) =>
            {
                format!("{syncs_topic} does not exist on {syncs_cluster}")
            }
            Err(e) => return Err(cluster_err(format!("cannot read {syncs_topic}"))(e)),
        }
    } else {
        "disabled (emit.offset-syncs.enabled = false)".to_string()
    };
    translator.store.mark_read_to_end();
    let stored = read_progress(&target, &flow.source).await;
    seed_from_progress(&mut translator, flow, &target, &stored).await;

    let committed = source
        .offset_fetch(group)
        .await
        .map_err(cluster_err(format!(
            "cannot fetch the offsets of group {group}"
        )))?;
    let listed = target.list_groups().await.map_err(cluster_err(format!(
        "cannot list the groups of {}",
        flow.target
    )))?;
    let state = target_state(&target, group, listed.iter().find(|g| g.group_id == group))
        .await
        .map_err(cluster_err(format!(
            "cannot describe group {group} on {}",
            flow.target
        )))?;
    let target_offsets = if state == TargetGroupState::Absent {
        BTreeMap::new()
    } else {
        target
            .offset_fetch(group)
            .await
            .map_err(cluster_err(format!(
                "cannot fetch the offsets of group {group} on {}",
                flow.target
            )))?
    };

    let mut rows = Vec::new();
    let mut filtered = BTreeSet::new();
    let mut plan_input = Vec::new();
    for (tp, offset) in &committed {
        if !flow.topic_filter.should_replicate_topic(&tp.topic) {
            filtered.insert(tp.topic.clone());
            continue;
        }
        let target_tp = TopicPartition::new(
            flow.replication_policy
                .checkpoint_topic_name(&tp.topic, &flow.source, &flow.target),
            tp.partition,
        );
        let last = checkpoints.get(group).and_then(|g| g.get(&target_tp));
        let answer = best_answer(translator.translate(tp, offset.offset), last, offset.offset);
        if let Some(downstream) = answer.downstream() {
            plan_input.push(Checkpoint {
                group: group.to_string(),
                topic: target_tp.topic.clone(),
                partition: tp.partition,
                upstream_offset: offset.offset,
                downstream_offset: downstream,
                metadata: offset.metadata.clone(),
            });
        }
        rows.push(TranslateRow {
            source: tp.clone(),
            committed: offset.offset,
            last_checkpoint: last.map(|c| c.downstream_offset),
            target_committed: target_offsets.get(&target_tp).map(|o| o.offset),
            target: target_tp,
            answer,
        });
    }
    let target_map: HashMap<TopicPartition, Option<i64>> = target_offsets
        .iter()
        .map(|(tp, o)| (tp.clone(), Some(o.offset)))
        .collect();
    let decisions = plan_group_sync(plan_input.iter(), state, &target_map);
    Ok(TranslateReport {
        flow: name,
        group: group.to_string(),
        syncs,
        group_selected: flow.group_filter.should_replicate_group(group),
        rows,
        filtered_topics: filtered.into_iter().collect(),
        plan: GroupSyncReport {
            group: group.to_string(),
            state,
            decisions,
            failures: Vec::new(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    use crate::offsets::{OffsetSync, Translation};

    fn tp() -> TopicPartition {
        TopicPartition::new("t", 0)
    }

    fn translator(segments: &[(i64, i64, i64)], acked: Option<i64>) -> Translator {
        let mut t = Translator::default();
        t.store.start(false);
        t.store.mark_read_to_end();
        for &(u, d, n) in segments {
            t.append(&tp(), Segment::new(u, d, n)).unwrap();
        }
        if let Some(a) = acked {
            t.acked_end.insert(tp(), a);
        }
        t
    }

    fn at(t: &Translator, u: i64) -> Option<(i64, Precision)> {
        t.translate(&tp(), u).map(|x| (x.downstream, x.precision))
    }

    #[test]
    fn acknowledged_end_makes_the_tail_exact() {
        // Records 0..10 at 50..60, a commit marker at 10: the shard reports next offset 11.
        let t = translator(&[(0, 50, 10)], Some(11));
        assert_eq!(at(&t, 5), Some((55, Precision::Exact)));
        assert_eq!(at(&t, 10), Some((60, Precision::Exact)));
        assert_eq!(at(&t, 11), Some((60, Precision::Exact)));
        // Beyond the acknowledged end nothing is known: MM2's +1 rule, approximate.
        assert_eq!(at(&t, 12), Some((60, Precision::Approximate)));
        // Without an acknowledged end the marker's offset is approximate.
        let t = translator(&[(0, 50, 10)], None);
        assert_eq!(at(&t, 11), Some((60, Precision::Approximate)));
        // An acknowledged end behind the mapping (a seek back) adds nothing.
        let t = translator(&[(0, 50, 10)], Some(4));
        assert_eq!(at(&t, 11), Some((60, Precision::Approximate)));
        assert_eq!(at(&t, 3), Some((53, Precision::Exact)));
    }

    #[test]
    fn unknown_partitions_and_history_before_the_mapping() {
        let t = translator(&[(100, 0, 10)], Some(110));
        assert_eq!(t.translate(&TopicPartition::new("other", 0), 5), None);
        // Before the mapping and no syncs: nothing known.
        assert_eq!(at(&t, 50), None);
        assert_eq!(t.mapping().translate(&tp(), 50), Translation::BeforeHistory);
    }

    #[test]
    fn sync_store_answers_before_the_mapping() {
        let mut t = translator(&[(100, 200, 10)], Some(110));
        t.store
            .handle_sync(&OffsetSync::new(&tp(), 40, 140))
            .unwrap();
        // MM2's +1 rule from the sync at 40.
        assert_eq!(at(&t, 60), Some((141, Precision::Approximate)));
        assert_eq!(at(&t, 40), Some((140, Precision::Exact)));
        assert_eq!(at(&t, 30), Some((-1, Precision::BeforeHistory)));
        assert_eq!(at(&t, 105), Some((205, Precision::Exact)));
    }

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
        assert_eq!(select_flow(&cfg, None).unwrap().name(), "A->B");
        assert_eq!(select_flow(&cfg, Some("A->B")).unwrap().name(), "A->B");
        assert!(select_flow(&cfg, Some("A-B")).is_err());
        assert!(select_flow(&cfg, Some("C->B")).is_err());
    }

    #[test]
    fn the_best_answer_is_exact_then_the_checkpoint_then_the_syncs() {
        let t = |downstream, precision| {
            Some(TranslatedOffset {
                downstream,
                precision,
                source: TranslationSource::SyncStore,
            })
        };
        let cp = |upstream, downstream| Checkpoint {
            group: "g".into(),
            topic: "A.t".into(),
            partition: 0,
            upstream_offset: upstream,
            downstream_offset: downstream,
            metadata: String::new(),
        };
        // Exact beats everything.
        let exact = t(40, Precision::Exact);
        assert_eq!(
            best_answer(exact, Some(&cp(50, 45)), 50),
            Answer::Translated(exact.unwrap())
        );
        // A checkpoint for this offset beats an approximate translation behind it...
        let approx = t(30, Precision::Approximate);
        assert_eq!(
            best_answer(approx, Some(&cp(50, 45)), 50),
            Answer::Checkpoint(45)
        );
        assert_eq!(
            best_answer(None, Some(&cp(50, 45)), 50),
            Answer::Checkpoint(45)
        );
        assert_eq!(
            best_answer(t(-1, Precision::BeforeHistory), Some(&cp(50, 45)), 50),
            Answer::Checkpoint(45)
        );
        // ...but not one for another offset, nor one behind the translation.
        assert_eq!(
            best_answer(approx, Some(&cp(49, 45)), 50),
            Answer::Translated(approx.unwrap())
        );
        assert_eq!(
            best_answer(approx, Some(&cp(50, 20)), 50),
            Answer::Translated(approx.unwrap())
        );
        // A tie names the checkpoint: it is what group sync and MM2's readers use.
        assert_eq!(
            best_answer(approx, Some(&cp(50, 30)), 50),
            Answer::Checkpoint(30)
        );
        assert_eq!(best_answer(None, None, 50), Answer::Unknown);
        assert_eq!(Answer::Unknown.downstream(), None);
        assert_eq!(
            Answer::Translated(t(-1, Precision::BeforeHistory).unwrap()).downstream(),
            None
        );
        assert_eq!(Answer::Checkpoint(45).label(), "checkpoint");
    }

    #[test]
    fn report_lines_say_why() {
        let r = GroupSyncReport {
            group: "g".into(),
            state: TargetGroupState::Stable,
            decisions: plan_group_sync(
                [Checkpoint {
                    group: "g".into(),
                    topic: "A.t".into(),
                    partition: 0,
                    upstream_offset: 5,
                    downstream_offset: 5,
                    metadata: String::new(),
                }]
                .iter(),
                TargetGroupState::Stable,
                &HashMap::new(),
            ),
            failures: Vec::new(),
        };
        let text = r.to_string();
        assert!(text.contains("0 committed, 1 skipped"), "{text}");
        assert!(text.contains("Stable"), "{text}");
        assert_eq!(r.committed(), 0);
    }

    #[test]
    fn restart_seed_needs_the_target_to_end_at_the_sync() {
        let sync = |u, d| StoredSync {
            id: 0,
            upstream_offset: u,
            downstream_offset: d,
        };
        assert_eq!(
            restart_seed(&sync(99, 49,), 101, 50),
            Some(Segment::new(99, 49, 1))
        );
        // Something was written after the sync (records replicated since, or foreign writes).
        assert_eq!(restart_seed(&sync(99, 49), 101, 51), None);
        // The stored progress is not past the sync: nothing to add.
        assert_eq!(restart_seed(&sync(99, 49), 99, 50), None);
        assert_eq!(restart_seed(&sync(-1, 49), 101, 50), None);
        assert_eq!(restart_seed(&sync(5, i64::MAX), 101, i64::MIN), None);
    }

    /// One acknowledged batch: records skipped upstream before it (never replicated), its record
    /// count, and whether the sends in flight complete before the next batch.
    #[derive(Debug, Clone)]
    struct Batch {
        upstream_gap: i64,
        len: i64,
        sends_complete: bool,
    }

    fn batches() -> impl Strategy<Value = Vec<Batch>> {
        proptest::collection::vec(
            (
                prop_oneof![3 => Just(0i64), 2 => 1i64..4, 1 => 4i64..50],
                1i64..60,
                any::<bool>(),
            )
                .prop_map(|(upstream_gap, len, sends_complete)| Batch {
                    upstream_gap,
                    len,
                    sends_complete,
                }),
            1..60,
        )
    }

    /// The segments of a stream (the target has no other writer), every replicated
    /// (upstream, downstream) pair, and the upstream and downstream ends.
    fn replay(batches: &[Batch]) -> (Vec<Segment>, Vec<(i64, i64)>, i64, i64) {
        let (mut u, mut d) = (0i64, 0i64);
        let mut segments = Vec::new();
        let mut pairs = Vec::new();
        for b in batches {
            u += b.upstream_gap;
            segments.push(Segment::new(u, d, b.len));
            pairs.extend((0..b.len).map(|i| (u + i, d + i)));
            u += b.len;
            d += b.len;
        }
        (segments, pairs, u, d)
    }

    /// Where a group at upstream `u` must resume: the first replicated record at or after `u`,
    /// else the downstream end (the next record written).
    fn truth(pairs: &[(i64, i64)], u: i64, downstream_end: i64) -> i64 {
        let i = pairs.partition_point(|&(pu, _)| pu < u);
        pairs.get(i).map_or(downstream_end, |&(_, d)| d)
    }

    fn sent(w: &mut OffsetSyncWriter, out: &mut Vec<OffsetSync>) {
        loop {
            let ready = w.take_ready();
            if ready.is_empty() {
                break;
            }
            for _ in &ready {
                w.on_send_complete().unwrap();
            }
            out.extend(ready);
            w.fire_pending();
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn live_translation_is_exact_up_to_the_acknowledged_end(
            batches in batches(), tail in 0i64..4,
        ) {
            let (segments, pairs, up_end, down_end) = replay(&batches);
            let mut t = translator(&[], None);
            for s in &segments {
                t.append(&tp(), *s).unwrap();
            }
            // The shard's acknowledged end may be past the last record (markers, aborts).
            let acked = up_end + tail;
            t.acked_end.insert(tp(), acked);
            let first = pairs[0].0;
            for u in 0..=acked + 3 {
                let got = at(&t, u);
                if u < first {
                    prop_assert_eq!(got, None);
                } else if u <= acked {
                    prop_assert_eq!(got, Some((truth(&pairs, u, down_end), Precision::Exact)), "u={}", u);
                } else {
                    prop_assert_eq!(got, Some((down_end, Precision::Approximate)), "u={}", u);
                }
            }
        }

        #[test]
        fn after_a_restart_translation_never_skips_a_record(
            batches in batches(), tail in 0i64..4, lag in 0i64..30,
        ) {
            let (segments, pairs, up_end, down_end) = replay(&batches);
            // The run: MM2's cadence, sends completing now and then, the last sync of every
            // partition published on the way out.
            let mut w = OffsetSyncWriter::new(SyncWriterConfig { offset_lag_max: lag, max_outstanding: 10 });
            let mut syncs = Vec::new();
            for (s, b) in segments.iter().zip(&batches) {
                w.on_segment(&tp(), *s).unwrap();
                if b.sends_complete {
                    sent(&mut w, &mut syncs);
                }
            }
            sent(&mut w, &mut syncs);
            w.on_flush_interval();
            sent(&mut w, &mut syncs);
            // The restart: the offset-syncs topic, the stored progress and the target's end.
            let mut t = translator(&[], None);
            for s in &syncs {
                t.store.handle_sync(s).unwrap();
            }
            let acked = up_end + tail;
            let latest = t.store().syncs_for(&tp()).unwrap()[0];
            let seed = restart_seed(&latest, acked, down_end);
            prop_assert!(seed.is_some(), "the last record's sync is published on the way out");
            t.append(&tp(), seed.unwrap()).unwrap();
            t.acked_end.insert(tp(), acked);
            for u in 0..=acked + 3 {
                let expected = truth(&pairs, u, down_end);
                match t.translate(&tp(), u) {
                    Some(x) if x.downstream >= 0 => {
                        prop_assert!(x.downstream <= expected, "u={} got {:?}, must not pass {}", u, x, expected);
                        if x.precision == Precision::Exact && u <= acked {
                            prop_assert_eq!(x.downstream, expected, "u={}", u);
                        }
                    }
                    _ => prop_assert!(u < pairs[0].0 || u < latest.upstream_offset, "u={}", u),
                }
            }
            // A group that read everything resumes exactly at the end.
            prop_assert_eq!(at(&t, acked), Some((down_end, Precision::Exact)));
        }
    }
}
