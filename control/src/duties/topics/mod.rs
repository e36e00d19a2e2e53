//! Topic management of one flow: MM2's `MirrorSourceConnector` control-plane duties (reference
//! §9), on strait's intervals.
//!
//! - **Discovery** every `refresh.topics.interval.seconds` (strait default 10 s, MM2 600 s):
//!   source topics the flow replicates get a remote topic (source partition count, the
//!   configured replication factor, the source configs filtered as MM2's
//!   `targetConfig(config, incremental=false)`); a remote topic with fewer partitions than its
//!   source grows (`CreatePartitions`), and only then are the new partitions assigned. A known
//!   topic whose id changed was recreated; a known topic that is gone was deleted.
//! - **Config sync** every `sync.topic.configs.interval.seconds`, when enabled: MM2's
//!   incremental rules (`targetConfig(config, incremental=true)`, then SET, or DELETE for a
//!   source default under `use.defaults.from=target`), with `config.properties.exclude`. The
//!   same pass reads each remote topic's `max.message.bytes`, which the shards must know.
//! - **ACL sync** every `sync.topic.acls.interval.seconds`, when enabled: literal topic ACLs,
//!   ALLOW WRITE never copied, ALLOW ALL downgraded to ALLOW READ.
//!
//! Topics are never deleted and never shrunk. The decisions are pure functions
//! ([`plan_discovery`], [`creation_configs`], [`config_sync_ops`], [`acls_to_sync`],
//! [`decide_start`]); [`TopicSync`] does the IO around them and reports what the control loop
//! must do with the shards as [`TopicChange`]s.
//!
//! Two deliberate differences from MM2, with the same end state:
//! - config sync compares with the target's current configs and sends only the operations that
//!   change something, where MM2 re-sends every property on every pass;
//! - a property the target does not report is not sent (MM2 sends it, and the broker then
//!   rejects the whole topic's update).
#![forbid(unsafe_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use strait_dataplane::shard::{Assignment, ClusterEndpoint, FlowId, MappingSegment, PartitionKey};

pub mod decide;

pub use decide::{
    DiscoveryPlan, Growth, KnownTopic, PARTITIONS_PER_REQUEST, Recreation, SourceTopic,
    StartDecision, acls_to_sync, config_sync_ops, creation_configs, creation_requests,
    decide_start, drop_unknown_configs, earlier_range_serves, growth_steps,
    is_permanent_creation_error, max_message_bytes, plan_discovery, split_startable, why_unknown,
};

use crate::cluster::{
    AclBinding, Cluster, ClusterError, ConfigEntry, IsolationLevel, NewTopic, OffsetSpec,
};
use crate::model::counters::TopicCounters;
use crate::model::{TopicPartition, topic_id_display};
use crate::plan::FlowPlan;
use crate::store::progress::ProgressStore;
use crate::time::Every;

/// Topics per DescribeConfigs / CreateTopics request: keeps requests and responses small on
/// clusters with many topics.
const ADMIN_BATCH_TOPICS: usize = 200;

/// Timeout the brokers get for CreateTopics and CreatePartitions.
const CREATE_TIMEOUT_MS: i32 = 30_000;
/// The most source records crash recovery reads per partition at start; past it, strait
/// resumes at the stored position and copies the difference again.
const RECOVERY_MAX_RECORDS: i64 = 1_000_000;
/// The oldest source view ([`SourceSeen`]) the start of newly assigned partitions reuses (and
/// never older than one refresh interval): past it, that start reads the source again.
pub const SOURCE_REUSE_MAX: Duration = Duration::from_secs(10);

/// Errors of topic management. Each names the flow and what was being done.
#[derive(Debug, thiserror::Error)]
pub enum TopicError {
    /// An admin call failed.
    #[error("flow {flow}: {action}: {source}")]
    Cluster {
        flow: String,
        action: &'static str,
        #[source]
        source: ClusterError,
    },
    /// The offsets of a source partition could not be read.
    #[error("flow {flow}: cannot read the offsets of {partition} on {cluster}: {why}")]
    Offsets {
        flow: String,
        cluster: String,
        partition: TopicPartition,
        why: String,
        /// A later pass may read them (a leader moving, a broker still creating the log).
        retriable: bool,
    },
}

/// A partition to start replicating.
#[derive(Debug, Clone)]
pub struct NewPartition {
    pub key: PartitionKey,
    /// What to send to a shard (unless `failed`).
    pub assignment: Assignment,
    pub topic_id: [u8; 16],
    /// The source's end offset when the partition was discovered (`--until-caught-up`).
    pub end_offset: i64,
    /// The partition cannot start: why.
    pub failed: Option<String>,
    /// Records crash recovery found already on the target past the stored progress, and where
    /// (the partition starts after them): the exact mapping takes them.
    pub recovered: Vec<MappingSegment>,
}

/// What the control loop must do after a topic-management pass.
#[derive(Debug, Clone)]
pub enum TopicChange {
    /// Start a partition (or record why it cannot start).
    Start(Box<NewPartition>),
    /// The partition's source topic was recreated while it was being replicated.
    Recreated {
        key: PartitionKey,
        new_topic_id: [u8; 16],
        /// The new topic's log start, for `strait.on.lost.position=earliest`.
        log_start: i64,
        message: String,
    },
    /// The source partition is gone (topic deleted): stop replicating it, keep the remote topic.
    Vanished { key: PartitionKey },
    /// The remote topic's `max.message.bytes` changed.
    MaxMessageBytes { key: PartitionKey, bytes: usize },
}

/// What topic management needs of a flow's runtime.
pub struct FlowIo<'a> {
    pub fid: FlowId,
    pub plan: &'a FlowPlan,
    pub source: &'a Cluster,
    pub target: &'a Cluster,
    pub source_ep: &'a Arc<ClusterEndpoint>,
    pub target_ep: &'a Arc<ClusterEndpoint>,
    pub progress: &'a ProgressStore,
    /// `strait.on.lost.position=earliest`.
    pub reset_lost_positions: bool,
}

impl FlowIo<'_> {
    fn flow(&self) -> String {
        format!("{}->{}", self.plan.source, self.plan.target)
    }

    fn err(&self, action: &'static str) -> impl FnOnce(ClusterError) -> TopicError + '_ {
        move |source| TopicError::Cluster {
            flow: self.flow(),
            action,
            source,
        }
    }

    fn isolation(&self) -> IsolationLevel {
        self.plan.fetch.isolation_level.into()
    }
}

/// The topic-management passes due at one instant ([`TopicSync::due`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopicDuties {
    /// Topic discovery (`refresh.topics.interval.seconds`).
    pub discover: bool,
    /// Reading the remote topics' configs; `Some(true)` also syncs them from the source
    /// (`sync.topic.configs.interval.seconds`).
    pub configs: Option<bool>,
    /// ACL sync (`sync.topic.acls.interval.seconds`).
    pub acls: bool,
}

/// Topic management of one flow: call [`TopicSync::discover`] once at start, then
/// [`TopicSync::tick`] from the control loop.
#[derive(Debug)]
pub struct TopicSync {
    known: BTreeMap<String, KnownTopic>,
    /// Source topics whose remote topic could not be created, and the last error (logged once).
    creation_failures: BTreeMap<String, String>,
    /// Source topics whose creation failed with an error a retry cannot change: not tried
    /// again (a restart tries again).
    creation_stopped: BTreeSet<String>,
    /// Source topics whose left-out configs were logged.
    dropped_configs_logged: BTreeSet<String>,
    refresh: Every,
    configs: Every,
    /// Reading the remote topics' `max.message.bytes`, also when config sync is off.
    target_configs: Every,
    acls: Every,
    acl_source_unsecured_logged: bool,
    acl_target_unsecured_logged: bool,
    /// A discovery pass completed.
    discovered: bool,
    /// Rounds, changes and errors, for `/metrics`.
    counters: TopicCounters,
    /// This process makes the changes on the target (creation, growth, config and ACL sync):
    /// always alone, only on the member holding the singleton duties in a group.
    manages_target: bool,
    /// Partitions to start with crash recovery at the next discovery (handed over by another
    /// member of the group).
    recover: BTreeSet<TopicPartition>,
    /// What the last full discovery pass read of the source, for the start of partitions the
    /// group assigns soon after ([`TopicSync::discover_assigned`]).
    seen: Option<SourceSeen>,
    /// Partitions the last discovery pass was to start but left for the next one
    /// ([`TopicSync::unstarted`]).
    unstarted: usize,
}

/// A partition a discovery pass starts: its source topic, number and log range.
type Ready<'t> = (&'t SourceTopic, i32, (i64, i64));

/// What a discovery pass read of the source: the flow's topics, and the log ranges of the
/// partitions it was to start.
#[derive(Debug, Clone)]
struct SourceSeen {
    /// When the pass began to read the source (its view is at least this old).
    at: Instant,
    topics: Vec<SourceTopic>,
    ranges: BTreeMap<TopicPartition, (i64, i64)>,
}

impl TopicSync {
    /// Schedules the duties of `plan` from `now`. Discovery runs first at start (by
    /// [`TopicSync::discover`]), then every interval; config and ACL sync first at the first
    /// tick, as MM2 runs them at t=0.
    pub fn new(plan: &FlowPlan, now: Instant) -> TopicSync {
        let c = &plan.config;
        let refresh_s = c.refresh_topics_interval_seconds.value;
        let mut refresh = Every::new(c.refresh_topics_enabled.value, refresh_s, now);
        refresh.done(now);
        let configs_s = c.sync_topic_configs_interval_seconds.value;
        // The shards must learn a changed max.message.bytes soon, whatever the config sync
        // interval: reading the remote topics' configs is one cheap request.
        let target_configs_s = if c.refresh_topics_enabled.value {
            configs_s.min(refresh_s)
        } else {
            configs_s
        };
        TopicSync {
            known: BTreeMap::new(),
            creation_failures: BTreeMap::new(),
            creation_stopped: BTreeSet::new(),
            dropped_configs_logged: BTreeSet::new(),
            refresh,
            configs: Every::new(c.sync_topic_configs_enabled.value, configs_s, now),
            target_configs: Every::new(true, target_configs_s, now),
            acls: Every::new(
                c.sync_topic_acls_enabled.value,
                c.sync_topic_acls_interval_seconds.value,
                now,
            ),
            acl_source_unsecured_logged: false,
            acl_target_unsecured_logged: false,
            discovered: false,
            counters: TopicCounters::default(),
            manages_target: true,
            recover: BTreeSet::new(),
            seen: None,
            unstarted: 0,
        }
    }

    /// Rounds, changes and errors of topic, config and ACL sync so far.
    pub fn counters(&self) -> TopicCounters {
        self.counters
    }

    /// Group hook: whether this member makes the changes on the target (remote topic creation
    /// and growth, config and ACL sync). Discovery and reading the remote topics' configs run
    /// on every member.
    pub fn set_manages_target(&mut self, yes: bool) {
        self.manages_target = yes;
    }

    /// Group hook: forgets that `topic`-`partition` was started, so that the next discovery
    /// starts it again from the stored progress, with crash recovery for the target's tail.
    pub fn restart_partition(&mut self, topic: &str, partition: i32) {
        if let Some(k) = self.known.get_mut(topic) {
            k.partitions.remove(&partition);
        }
        self.recover.insert(TopicPartition::new(topic, partition));
    }

    /// Takes the schedules of `plan` (a configuration reload) at `now`, keeping what is known
    /// of the topics. The caller runs a discovery pass right after ([`TopicSync::discover`]),
    /// so that a new filter applies now: a topic it no longer matches is then stopped like a
    /// deleted one (its remote topic kept). Config and ACL sync run at the next tick, as at
    /// start.
    pub fn reconfigure(&mut self, plan: &FlowPlan, now: Instant) {
        let fresh = TopicSync::new(plan, now);
        // The source view was filtered by the old plan.
        self.seen = None;
        self.refresh = fresh.refresh;
        self.configs = fresh.configs;
        self.target_configs = fresh.target_configs;
        self.acls = fresh.acls;
    }

    /// How many partitions the last discovery pass was to start but could not, leaving them
    /// for the next pass: their remote partition was not shown yet (a remote topic just created
    /// or grown), or their source offsets could not be read. `--until-caught-up` waits for them.
    pub fn unstarted(&self) -> usize {
        self.unstarted
    }

    /// The source topics managed so far.
    pub fn known(&self) -> &BTreeMap<String, KnownTopic> {
        &self.known
    }

    /// Which duties are due at `now`, each then scheduled for its next interval. Pure: the
    /// control loop may decide now and run the passes later.
    pub fn due(&mut self, now: Instant) -> TopicDuties {
        let discover = self.refresh.due(now);
        if discover {
            self.refresh.done(now);
        }
        let configs = (self.configs.due(now) || self.target_configs.due(now)).then(|| {
            let sync = self.configs.due(now);
            // Only a sync that ran moves the sync's schedule: reading the remote configs more
            // often must not postpone it (it did: config sync ran once, at start, whenever the
            // remote configs were read more often than they were synced).
            if sync {
                self.configs.done(now);
            }
            self.target_configs.done(now);
            sync
        });
        let acls = self.acls.due(now);
        if acls {
            self.acls.done(now);
        }
        TopicDuties {
            discover,
            configs,
            acls,
        }
    }

    /// Runs the duties that are due. Errors are logged and the duty runs again at its next
    /// interval.
    pub async fn tick(&mut self, io: &FlowIo<'_>, now: Instant) -> Vec<TopicChange> {
        let due = self.due(now);
        let mut out = Vec::new();
        if due.discover {
            match self.discover(io).await {
                Ok(changes) => out.extend(changes),
                Err(e) => {
                    self.counters.topics.errors += 1;
                    tracing::warn!(
                        "topic discovery failed, retrying in {:?}: {e}",
                        self.refresh.interval()
                    )
                }
            }
        }
        if let Some(sync) = due.configs {
            let sync = sync && self.manages_target;
            self.counters.configs.rounds += u64::from(sync);
            match self.sync_configs(io, sync).await {
                Ok(changes) => out.extend(changes),
                Err(e) => {
                    self.counters.configs.errors += 1;
                    tracing::warn!("topic config sync failed: {e}")
                }
            }
        }
        if due.acls && self.manages_target {
            self.counters.acls.rounds += 1;
            if let Err(e) = self.sync_acls(io).await {
                self.counters.acls.errors += 1;
                tracing::warn!("topic ACL sync failed: {e}");
            }
        }
        out
    }

    /// One discovery pass: creates missing remote topics and partitions, and returns the
    /// partitions to start and the changes of known topics.
    pub async fn discover(&mut self, io: &FlowIo<'_>) -> Result<Vec<TopicChange>, TopicError> {
        self.pass(io, None).await
    }

    /// Group hook: the discovery pass that starts the partitions just assigned to this member
    /// (after [`TopicSync::restart_partition`]). When the last full pass read the source less
    /// than a refresh interval (and [`SOURCE_REUSE_MAX`]) before `now`, this pass takes the
    /// source topics from it instead of asking the source again, as a run outside a group
    /// starts its partitions from its first pass: a topic changed on the source meanwhile is
    /// seen by the next refresh, which falls due within that interval anyway. The log ranges
    /// it read serve only where the start they give cannot be stale
    /// ([`earlier_range_serves`], against the stored progress just read again); the others
    /// are read again. Everything on the target (counts, configs, crash recovery) is read as
    /// in every pass. Otherwise, or with topic refresh off, a full pass.
    pub async fn discover_assigned(
        &mut self,
        io: &FlowIo<'_>,
        now: Instant,
    ) -> Result<Vec<TopicChange>, TopicError> {
        let seen = self.reusable_source(now);
        self.pass(io, seen).await
    }

    /// The source view a start at `now` may reuse ([`TopicSync::discover_assigned`]).
    fn reusable_source(&self, now: Instant) -> Option<SourceSeen> {
        let max_age = self.refresh.interval().min(SOURCE_REUSE_MAX);
        self.seen
            .as_ref()
            .filter(|s| self.refresh.enabled() && now.saturating_duration_since(s.at) < max_age)
            .cloned()
    }

    /// One discovery pass; `seen`: the source view to reuse instead of reading the source's
    /// topics (and, where they serve, its log ranges) again. Only a pass that read the source
    /// leaves its view for the next ones.
    async fn pass(
        &mut self,
        io: &FlowIo<'_>,
        seen: Option<SourceSeen>,
    ) -> Result<Vec<TopicChange>, TopicError> {
        self.counters.topics.rounds += 1;
        tracing::debug!(flow = %io.flow(), round = self.counters.topics.rounds, reused_source_view = seen.is_some(), "topic discovery round");
        let plan = io.plan;
        #[allow(clippy::disallowed_methods)] // IO code: when this pass's source view was read
        let began = Instant::now();
        let topics = match &seen {
            Some(s) => s.topics.clone(),
            None => source_topics(io).await?,
        };
        let remotes: Vec<String> = topics.iter().map(|t| (plan.remote_name)(&t.name)).collect();
        let mut target_counts = self.target_partition_counts(io, &remotes).await?;
        let d = plan_discovery(&topics, &target_counts, &self.known, &*plan.remote_name);

        let mut out = Vec::new();
        if self.change_target(io, &d, &mut out).await? {
            target_counts = self.target_partition_counts(io, &remotes).await?;
        }
        // Recreated topics: the running partitions belong to the old topic.
        let mut need_offsets: Vec<TopicPartition> = Vec::new();
        for r in &d.recreated {
            need_offsets.extend(
                r.partitions
                    .iter()
                    .map(|p| TopicPartition::new(&r.topic, *p)),
            );
        }
        let failures = &self.creation_failures;
        let (to_start, waiting) = split_startable(
            &topics,
            &d.start,
            &target_counts,
            &*plan.remote_name,
            &|t| failures.contains_key(t),
        );
        need_offsets.extend(
            to_start
                .iter()
                .map(|(t, p)| TopicPartition::new(&t.name, *p)),
        );
        let offsets = self
            .source_offsets(io, &need_offsets, &topics, seen.as_ref(), began)
            .await;
        self.recreated(io, &d.recreated, &offsets, &mut out);

        // The remote topics' max.message.bytes, for topics that start now.
        let mut new_remotes: Vec<String> = to_start
            .iter()
            .map(|(t, _)| (plan.remote_name)(&t.name))
            .filter(|r| self.known.values().all(|k| &k.remote != r))
            .collect();
        new_remotes.sort();
        new_remotes.dedup();
        // Nothing below may fail the pass: the changes above are already decided.
        let described = match self.describe(io.target, &new_remotes).await {
            Ok(d) => d,
            Err(e) => {
                tracing::warn!(flow = %io.flow(), "cannot read the new remote topics' configs, assuming the default max.message.bytes until the next config pass: {e}");
                BTreeMap::new()
            }
        };

        let first_pass = !self.discovered;
        let ready = self.with_ranges(io, to_start, waiting, &offsets, first_pass)?;
        self.discovered = true;
        let target_ends = remote_log_ends(io, &ready).await;
        for (t, p, range) in ready {
            let target_end = target_ends
                .get(&TopicPartition::new((plan.remote_name)(&t.name), p))
                .copied()
                .unwrap_or(-1);
            let change = self
                .start_partition(io, t, p, range, target_end, first_pass, &described)
                .await;
            out.push(change);
        }
        self.vanished(io, &d.vanished, &mut out);
        Ok(out)
    }

    /// The log ranges of `partitions`: from the source view `seen` where they serve, else
    /// read. A pass that read the source (`seen` is `None`; it began at `began`) leaves its
    /// view for [`TopicSync::discover_assigned`].
    async fn source_offsets(
        &mut self,
        io: &FlowIo<'_>,
        partitions: &[TopicPartition],
        topics: &[SourceTopic],
        seen: Option<&SourceSeen>,
        began: Instant,
    ) -> SourceOffsets {
        if let Some(s) = seen {
            return SourceOffsets::reuse_or_read(io, partitions, topics, s).await;
        }
        let offsets = SourceOffsets::read(io, partitions).await;
        self.seen = Some(SourceSeen {
            at: began,
            topics: topics.to_vec(),
            ranges: offsets.ranges(),
        });
        offsets
    }

    /// Creates the remote topics and partitions discovery planned. Returns whether the target
    /// changed (then its partition counts are read again).
    async fn change_target(
        &mut self,
        io: &FlowIo<'_>,
        d: &DiscoveryPlan,
        out: &mut Vec<TopicChange>,
    ) -> Result<bool, TopicError> {
        if !self.manages_target {
            return Ok(false);
        }
        if !d.create.is_empty() {
            self.create_remote_topics(io, &d.create, out).await?;
        }
        for Growth { remote, from, to } in &d.grow {
            match self.grow(io, remote, *from, *to).await {
                Ok(()) => {
                    self.counters.topics.changes += 1;
                    tracing::info!(
                        topic = %remote,
                        cluster = %io.plan.target,
                        partitions = to,
                        "grew remote topic"
                    )
                }
                Err(e) => {
                    self.counters.topics.errors += 1;
                    tracing::warn!(topic = %remote, "cannot add partitions to the remote topic: {e}")
                }
            }
        }
        Ok(!d.create.is_empty() || !d.grow.is_empty())
    }

    /// The partitions of `to_start` whose source log range is known, with it. The others are
    /// left for the next pass with `waiting` (their remote partition not shown yet), and
    /// counted ([`TopicSync::unstarted`]); those the first pass leaves start later with the
    /// crash recovery it gives. The first pass fails instead when a partition's offsets cannot
    /// be read for a reason a retry cannot change.
    fn with_ranges<'t>(
        &mut self,
        io: &FlowIo<'_>,
        to_start: Vec<(&'t SourceTopic, i32)>,
        waiting: Vec<TopicPartition>,
        offsets: &SourceOffsets,
        first_pass: bool,
    ) -> Result<Vec<Ready<'t>>, TopicError> {
        if !waiting.is_empty() {
            tracing::info!(flow = %io.flow(), partitions = waiting.len(), first = %waiting[0], "remote partitions not shown by the target yet; starting them at the next discovery");
        }
        let mut left = waiting;
        let mut ready = Vec::with_capacity(to_start.len());
        for (t, p) in to_start {
            let tp = TopicPartition::new(&t.name, p);
            match offsets.range(io, &tp) {
                Ok(range) => ready.push((t, p, range)),
                Err(e @ TopicError::Offsets { retriable, .. }) if !first_pass || retriable => {
                    tracing::warn!("{e}; retrying at the next discovery");
                    left.push(tp);
                }
                Err(e) => return Err(e),
            }
        }
        self.unstarted = left.len();
        if first_pass {
            self.recover.extend(left);
        }
        Ok(ready)
    }

    /// The partitions of recreated topics: the control loop restarts or stops them.
    fn recreated(
        &mut self,
        io: &FlowIo<'_>,
        recreated: &[Recreation],
        offsets: &SourceOffsets,
        out: &mut Vec<TopicChange>,
    ) {
        for Recreation {
            topic,
            old_id: old,
            new_id: new,
            partitions: both,
        } in recreated
        {
            let message = format!(
                "source topic {topic} was recreated while being replicated (topic id {} is now {})",
                topic_id_display(old),
                topic_id_display(new)
            );
            for &p in both {
                let log_start = offsets
                    .range(io, &TopicPartition::new(topic, p))
                    .map(|(lo, _)| lo)
                    .unwrap_or(0);
                out.push(TopicChange::Recreated {
                    key: PartitionKey::new(io.fid, topic, p),
                    new_topic_id: *new,
                    log_start,
                    message: message.clone(),
                });
            }
            if let Some(k) = self.known.get_mut(topic) {
                k.topic_id = *new;
            }
        }
    }

    /// Starts partition `p` of `t`, whose log spans `(lo, hi)`: where it resumes (stored
    /// progress, `auto.offset.reset`, crash recovery on the first pass), or why it cannot.
    /// `target_end` is the remote partition's log end read just before (-1 when unknown).
    #[allow(clippy::too_many_arguments)]
    async fn start_partition(
        &mut self,
        io: &FlowIo<'_>,
        t: &SourceTopic,
        p: i32,
        (lo, hi): (i64, i64),
        target_end: i64,
        first_pass: bool,
        described: &BTreeMap<String, Vec<ConfigEntry>>,
    ) -> TopicChange {
        let plan = io.plan;
        let tp = TopicPartition::new(&t.name, p);
        let remote = (plan.remote_name)(&t.name);
        let known = self
            .known
            .entry(t.name.clone())
            .or_insert_with(|| KnownTopic {
                topic_id: t.topic_id,
                partitions: BTreeSet::new(),
                remote: remote.clone(),
                max_message_bytes: max_message_bytes(described.get(&remote)),
            });
        known.partitions.insert(p);
        let max_message_bytes = known.max_message_bytes;
        let decision = decide_start(
            &tp,
            io.progress.get(&tp),
            t.topic_id,
            lo,
            hi,
            plan.start_at_earliest,
            io.reset_lost_positions,
        );
        let mut recovered = Vec::new();
        let (start, failed) = match decision {
            StartDecision::Start(o)
                // Exactly-once needs no recovery: past its committed progress the target holds
                // only aborted records, which no read_committed consumer sees.
                if (first_pass || self.recover.remove(&tp))
                    && io.progress.get(&tp).is_some()
                    && !plan.config.exactly_once.value =>
            {
                let (start, segments) = recover_start(io, &tp, &remote, o).await;
                recovered = segments;
                (start, None)
            }
            StartDecision::Start(o) => (o, None),
            StartDecision::Reset { offset, warning } => {
                tracing::warn!(partition = %tp, flow = %io.flow(), "{warning}");
                (offset, None)
            }
            StartDecision::Fail { stored, error } => {
                tracing::error!(partition = %tp, flow = %io.flow(), "{error}");
                (stored, Some(error))
            }
        };
        // The stored epoch belongs to the stored position only: a start elsewhere (recovery
        // past records the target already holds, a reset) may follow records of a later epoch,
        // and checking it against an older one would report a divergence that is not there.
        let start_leader_epoch = io
            .progress
            .get(&tp)
            .filter(|e| e.next_offset == start && e.topic_id == t.topic_id)
            .map_or(-1, |e| e.leader_epoch);
        // Where the first record copied lands: after what recovery found, else the target's
        // end (the data plane's producer is the partition's only writer).
        let start_target_offset = recovered
            .last()
            .map_or(target_end, |s| s.downstream + i64::from(s.count));
        let key = PartitionKey::new(io.fid, &t.name, p);
        TopicChange::Start(Box::new(NewPartition {
            assignment: Assignment {
                key: key.clone(),
                source: io.source_ep.clone(),
                target: io.target_ep.clone(),
                target_topic: Arc::from(remote.as_str()),
                start_offset: start,
                start_leader_epoch,
                start_target_offset,
                max_message_bytes,
                fetch: plan.fetch,
                produce: plan.produce,
                transactional: None,
                source_leader: io.source.cached_leader(&tp, t.topic_id),
            },
            key,
            topic_id: t.topic_id,
            end_offset: hi,
            failed,
            recovered,
        }))
    }

    /// Known partitions the source no longer has: the control loop stops them.
    fn vanished(
        &mut self,
        io: &FlowIo<'_>,
        vanished: &[(String, Vec<i32>)],
        out: &mut Vec<TopicChange>,
    ) {
        for (topic, parts) in vanished {
            tracing::info!(topic = %topic, cluster = %io.plan.source, partitions = ?parts, "source partitions are gone; no longer replicated (the remote topic is kept)");
            for &p in parts {
                out.push(TopicChange::Vanished {
                    key: PartitionKey::new(io.fid, topic, p),
                });
            }
            if let Some(k) = self.known.get_mut(topic) {
                for p in parts {
                    k.partitions.remove(p);
                }
                if k.partitions.is_empty() {
                    self.known.remove(topic);
                }
            }
        }
    }

    async fn target_partition_counts(
        &self,
        io: &FlowIo<'_>,
        remotes: &[String],
    ) -> Result<BTreeMap<String, usize>, TopicError> {
        let mut counts = BTreeMap::new();
        for chunk in remotes.chunks(ADMIN_BATCH_TOPICS * 5) {
            let names: Vec<&str> = chunk.iter().map(String::as_str).collect();
            let md = io
                .target
                .refresh_metadata(Some(&names))
                .await
                .map_err(io.err("reading remote topics"))?;
            for name in chunk {
                if let Some(t) = md.topics.get(name) {
                    counts.insert(name.clone(), t.partitions.len());
                }
            }
        }
        Ok(counts)
    }

    async fn describe(
        &self,
        cluster: &Cluster,
        topics: &[String],
    ) -> Result<BTreeMap<String, Vec<ConfigEntry>>, ClusterError> {
        let mut out = BTreeMap::new();
        for chunk in topics.chunks(ADMIN_BATCH_TOPICS) {
            for (name, r) in cluster.describe_topic_configs(chunk).await? {
                match r {
                    Ok(entries) => {
                        out.insert(name, entries);
                    }
                    Err(e) => tracing::debug!(topic = %name, "cannot describe configs: {e}"),
                }
            }
        }
        Ok(out)
    }

    async fn create_remote_topics(
        &mut self,
        io: &FlowIo<'_>,
        create: &[(String, String, i32)],
        out: &mut Vec<TopicChange>,
    ) -> Result<(), TopicError> {
        let create: Vec<&(String, String, i32)> = create
            .iter()
            .filter(|(s, _, _)| !self.creation_stopped.contains(s))
            .collect();
        if create.is_empty() {
            return Ok(());
        }
        let names: Vec<String> = create.iter().map(|(s, _, _)| s.clone()).collect();
        let target_knows = self.target_topic_config_names(io).await;
        let source_configs = self
            .describe(io.source, &names)
            .await
            .map_err(io.err("describing source topic configs"))?;
        let new_topics = self.new_topics(io, &create, &source_configs, target_knows.as_ref());
        for request in creation_requests(&new_topics, ADMIN_BATCH_TOPICS) {
            let results = io
                .target
                .create_topics(&request, CREATE_TIMEOUT_MS)
                .await
                .map_err(io.err("creating remote topics"))?;
            for (name, r) in results {
                let Some(nt) = new_topics.iter().find(|t| t.name == name) else {
                    continue;
                };
                let Some((source, _, _)) = create.iter().find(|(_, r, _)| *r == name) else {
                    continue;
                };
                // A topic larger than one request may make was created smaller: grow it now.
                let asked = nt.partitions.min(PARTITIONS_PER_REQUEST);
                let r = match r {
                    Ok(()) if asked < nt.partitions => {
                        self.grow(io, &nt.name, asked, nt.partitions).await
                    }
                    r => r,
                };
                match r {
                    Ok(()) => self.created(io, source, nt).await,
                    Err(e) if e.is(kafka_protocol::ResponseError::TopicAlreadyExists) => {}
                    Err(e) => self.creation_failed(io, source, nt, &e, out),
                }
            }
        }
        Ok(())
    }

    /// The remote topics to create for `create` (source, remote, partitions): the source
    /// configs MirrorMaker copies, less those the target does not know (`target_knows`).
    fn new_topics(
        &mut self,
        io: &FlowIo<'_>,
        create: &[&(String, String, i32)],
        source_configs: &BTreeMap<String, Vec<ConfigEntry>>,
        target_knows: Option<&BTreeSet<String>>,
    ) -> Vec<NewTopic> {
        let plan = io.plan;
        let mut new_topics = Vec::new();
        for (source, remote, count) in create.iter().copied() {
            // A topic deleted since it was listed has no configs: try again next time.
            let Some(configs) = source_configs.get(source) else {
                continue;
            };
            let mut configs = creation_configs(configs, &plan.config.config_property_filter);
            if let Some(known) = target_knows {
                let dropped = drop_unknown_configs(&mut configs, known);
                if !dropped.is_empty() && self.dropped_configs_logged.insert(source.clone()) {
                    let why: Vec<String> = dropped
                        .iter()
                        .map(|n| format!("{n} ({})", why_unknown(n)))
                        .collect();
                    tracing::warn!(
                        topic = %remote,
                        cluster = %plan.target,
                        "creating the remote topic without source topic configs the target \
                         cluster does not support: {}",
                        why.join(", ")
                    );
                }
            }
            new_topics.push(NewTopic {
                name: remote.clone(),
                partitions: *count,
                replication_factor: plan.replication_factor,
                configs,
            });
        }
        new_topics
    }

    /// Grows `remote` from `from` to `to` partitions, [`PARTITIONS_PER_REQUEST`] at a time.
    /// A step someone else made first (InvalidPartitions: it has that many already) is done.
    async fn grow(
        &self,
        io: &FlowIo<'_>,
        remote: &str,
        from: i32,
        to: i32,
    ) -> Result<(), ClusterError> {
        for count in growth_steps(from, to) {
            match io
                .target
                .create_partitions(remote, count, CREATE_TIMEOUT_MS)
                .await
            {
                Err(e) if !e.is(kafka_protocol::ResponseError::InvalidPartitions) => return Err(e),
                _ => {}
            }
        }
        Ok(())
    }

    /// The remote topic `nt` of `source` was created: wait until its partitions have leaders.
    async fn created(&mut self, io: &FlowIo<'_>, source: &str, nt: &NewTopic) {
        self.creation_failures.remove(source);
        self.counters.topics.changes += 1;
        tracing::info!(
            topic = %nt.name,
            cluster = %io.plan.target,
            partitions = nt.partitions,
            replication_factor = nt.replication_factor,
            configs = ?nt.configs,
            discovery_round = self.counters.topics.rounds,
            "created remote topic"
        );
        // Metadata shows a new topic a moment after creation; its partitions start only once
        // they are visible, so wait here rather than leave them for the next discovery.
        if let Err(e) = io
            .target
            .wait_for_leaders(&nt.name, CREATE_TIMEOUT_MS as u64)
            .await
        {
            tracing::warn!(topic = %nt.name, "the new remote topic has no leaders yet: {e}");
        }
    }

    /// The target refused to create the remote topic `nt` of `source`: its partitions are
    /// reported stopped, once per distinct error; a permanent error is not retried.
    fn creation_failed(
        &mut self,
        io: &FlowIo<'_>,
        source: &str,
        nt: &NewTopic,
        e: &ClusterError,
        out: &mut Vec<TopicChange>,
    ) {
        let plan = io.plan;
        let name = &nt.name;
        self.counters.topics.errors += 1;
        let permanent = is_permanent_creation_error(e);
        let msg = if permanent {
            self.creation_stopped.insert(source.to_string());
            format!(
                "cannot create remote topic {name} on {} with configs {:?}: {e}; not retried \
                 (the error will not change: fix the cause and restart strait)",
                plan.target, nt.configs
            )
        } else {
            format!("cannot create remote topic {name} on {}: {e}", plan.target)
        };
        if self.creation_failures.get(source) == Some(&msg) {
            return;
        }
        if permanent {
            tracing::error!("{msg}");
        } else {
            tracing::error!("{msg}; retrying at every discovery");
        }
        for p in 0..nt.partitions {
            let key = PartitionKey::new(io.fid, source, p);
            out.push(TopicChange::Start(Box::new(NewPartition {
                assignment: Assignment {
                    key: key.clone(),
                    source: io.source_ep.clone(),
                    target: io.target_ep.clone(),
                    target_topic: Arc::from(name.as_str()),
                    start_offset: 0,
                    start_leader_epoch: -1,
                    start_target_offset: -1,
                    max_message_bytes: strait_dataplane::batch::DEFAULT_MAX_MESSAGE_BYTES,
                    fetch: plan.fetch,
                    produce: plan.produce,
                    transactional: None,
                    source_leader: None,
                },
                key,
                topic_id: [0; 16],
                end_offset: 0,
                failed: Some(msg.clone()),
                recovered: Vec::new(),
            })));
        }
        self.creation_failures.insert(source.to_string(), msg);
    }

    /// The topic config names the target cluster knows, from DescribeConfigs of a topic there
    /// (every config comes back, defaults included): strait's progress topic, else a remote
    /// topic. `None` when none can be described; creation then sends every config, and a
    /// config the target refuses stops that topic with the broker's error.
    async fn target_topic_config_names(&self, io: &FlowIo<'_>) -> Option<BTreeSet<String>> {
        let mut candidates = vec![io.progress.topic().to_string()];
        candidates.extend(self.known.values().take(2).map(|k| k.remote.clone()));
        for topic in candidates {
            match io
                .target
                .describe_topic_configs(std::slice::from_ref(&topic))
                .await
            {
                Ok(mut m) => {
                    if let Some(Ok(entries)) = m.remove(&topic)
                        && !entries.is_empty()
                    {
                        return Some(entries.into_iter().map(|e| e.name).collect());
                    }
                }
                Err(e) => tracing::debug!(topic = %topic, "cannot describe configs: {e}"),
            }
        }
        tracing::warn!(
            cluster = %io.plan.target,
            "cannot learn which topic configs the target cluster supports (no topic there could be described); creating remote topics with every source config"
        );
        None
    }

    /// Config sync (when `sync` and enabled) and the remote topics' `max.message.bytes`.
    async fn sync_configs(
        &mut self,
        io: &FlowIo<'_>,
        sync: bool,
    ) -> Result<Vec<TopicChange>, TopicError> {
        if self.known.is_empty() {
            return Ok(Vec::new());
        }
        let sources: Vec<String> = self.known.keys().cloned().collect();
        let remotes: Vec<String> = self.known.values().map(|k| k.remote.clone()).collect();
        let mut target = self
            .describe(io.target, &remotes)
            .await
            .map_err(io.err("describing remote topic configs"))?;
        if sync {
            let source = self
                .describe(io.source, &sources)
                .await
                .map_err(io.err("describing source topic configs"))?;
            let mut altered = Vec::new();
            for (name, k) in &self.known {
                let (Some(src), Some(tgt)) = (source.get(name), target.get(&k.remote)) else {
                    continue;
                };
                let ops = config_sync_ops(src, Some(tgt), &io.plan.config.config_property_filter);
                if ops.is_empty() {
                    continue;
                }
                match io.target.alter_topic_configs(&k.remote, &ops).await {
                    Ok(()) => {
                        self.counters.configs.changes += 1;
                        tracing::info!(topic = %k.remote, cluster = %io.plan.target, changes = ?ops, "synced topic configs");
                        altered.push(k.remote.clone());
                    }
                    Err(e) if e.is(kafka_protocol::ResponseError::UnsupportedVersion) => {
                        self.counters.configs.errors += 1;
                        tracing::error!(topic = %k.remote, "the target cluster {} does not support IncrementalAlterConfigs: {e}", io.plan.target);
                    }
                    Err(e) => {
                        self.counters.configs.errors += 1;
                        tracing::warn!(topic = %k.remote, "cannot sync topic configs: {e}")
                    }
                }
            }
            if !altered.is_empty() {
                let again = self
                    .describe(io.target, &altered)
                    .await
                    .map_err(io.err("describing remote topic configs"))?;
                target.extend(again);
            }
        }
        let mut out = Vec::new();
        for (name, k) in self.known.iter_mut() {
            let Some(entries) = target.get(&k.remote) else {
                continue;
            };
            let bytes = max_message_bytes(Some(entries));
            if bytes != k.max_message_bytes {
                tracing::info!(topic = %k.remote, from = k.max_message_bytes, to = bytes, "remote topic max.message.bytes changed");
                k.max_message_bytes = bytes;
                for &p in &k.partitions {
                    out.push(TopicChange::MaxMessageBytes {
                        key: PartitionKey::new(io.fid, name, p),
                        bytes,
                    });
                }
            }
        }
        Ok(out)
    }

    async fn sync_acls(&mut self, io: &FlowIo<'_>) -> Result<(), TopicError> {
        let Some(source) = io
            .source
            .describe_topic_acls()
            .await
            .map_err(io.err("describing source ACLs"))?
        else {
            if !self.acl_source_unsecured_logged {
                self.acl_source_unsecured_logged = true;
                tracing::info!(cluster = %io.plan.source, "no ACL authorizer on the source cluster, so no topic ACL sync; consider sync.topic.acls.enabled = false");
            }
            return Ok(());
        };
        let plan = io.plan;
        let wanted = acls_to_sync(&source, &*plan.should_replicate, &*plan.remote_name);
        if wanted.is_empty() {
            return Ok(());
        }
        let Some(existing) = io
            .target
            .describe_topic_acls()
            .await
            .map_err(io.err("describing target ACLs"))?
        else {
            if !self.acl_target_unsecured_logged {
                self.acl_target_unsecured_logged = true;
                tracing::warn!(cluster = %plan.target, "the target cluster has no ACL authorizer: {} topic ACLs of the source cannot be synced", wanted.len());
            }
            return Ok(());
        };
        let existing: BTreeSet<AclBinding> = existing.into_iter().collect();
        let new: Vec<AclBinding> = wanted
            .into_iter()
            .filter(|b| !existing.contains(b))
            .collect();
        if new.is_empty() {
            return Ok(());
        }
        let results = io
            .target
            .create_acls(&new)
            .await
            .map_err(io.err("creating target ACLs"))?;
        let mut created = 0usize;
        for (b, r) in new.iter().zip(results) {
            match r {
                Ok(()) => created += 1,
                Err(e) => {
                    self.counters.acls.errors += 1;
                    tracing::warn!(topic = %b.resource_name, "cannot sync ACL: {e}")
                }
            }
        }
        self.counters.acls.changes += created as u64;
        tracing::info!(cluster = %plan.target, created, "synced topic ACLs");
        Ok(())
    }
}

/// The source topics the flow replicates, as discovery sees them.
async fn source_topics(io: &FlowIo<'_>) -> Result<Vec<SourceTopic>, TopicError> {
    let md = io
        .source
        .refresh_metadata(None)
        .await
        .map_err(io.err("listing source topics"))?;
    Ok(md
        .topics
        .values()
        .filter(|t| !t.is_internal && (io.plan.should_replicate)(&t.name))
        .map(|t| SourceTopic {
            name: t.name.clone(),
            topic_id: t.topic_id,
            partitions: t.partitions.iter().map(|p| p.partition).collect(),
        })
        .collect())
}

/// The earliest and latest offsets of source partitions, read once per discovery pass.
#[derive(Default)]
struct SourceOffsets {
    earliest: BTreeMap<TopicPartition, Result<i64, ClusterError>>,
    latest: BTreeMap<TopicPartition, Result<i64, ClusterError>>,
}

impl SourceOffsets {
    async fn read(io: &FlowIo<'_>, partitions: &[TopicPartition]) -> SourceOffsets {
        if partitions.is_empty() {
            return SourceOffsets::default();
        }
        let isolation = io.isolation();
        // Side by side: far from the source, one round trip instead of two before any start.
        let (earliest, latest) = futures_util::join!(
            io.source
                .list_offsets(partitions, OffsetSpec::Earliest, isolation),
            io.source
                .list_offsets(partitions, OffsetSpec::Latest, isolation),
        );
        SourceOffsets { earliest, latest }
    }

    /// The ranges of `partitions` from the earlier view `seen` where they serve
    /// ([`earlier_range_serves`]); the others read from the source.
    async fn reuse_or_read(
        io: &FlowIo<'_>,
        partitions: &[TopicPartition],
        topics: &[SourceTopic],
        seen: &SourceSeen,
    ) -> SourceOffsets {
        let ids: BTreeMap<&str, [u8; 16]> = topics
            .iter()
            .map(|t| (t.name.as_str(), t.topic_id))
            .collect();
        let (reused, to_read): (Vec<_>, Vec<_>) =
            partitions.iter().cloned().partition(|tp| {
                match (seen.ranges.get(tp), ids.get(tp.topic.as_str())) {
                    (Some(range), Some(id)) => earlier_range_serves(
                        io.progress.get(tp),
                        *id,
                        *range,
                        io.plan.start_at_earliest,
                    ),
                    _ => false,
                }
            });
        tracing::debug!(flow = %io.flow(), reused = reused.len(), read = to_read.len(), "log ranges of newly assigned partitions");
        let mut offsets = SourceOffsets::read(io, &to_read).await;
        for tp in reused {
            let (lo, hi) = seen.ranges[&tp];
            offsets.earliest.insert(tp.clone(), Ok(lo));
            offsets.latest.insert(tp, Ok(hi));
        }
        offsets
    }

    /// The ranges read successfully.
    fn ranges(&self) -> BTreeMap<TopicPartition, (i64, i64)> {
        self.earliest
            .iter()
            .filter_map(|(tp, lo)| {
                let lo = *lo.as_ref().ok()?;
                let hi = *self.latest.get(tp)?.as_ref().ok()?;
                Some((tp.clone(), (lo, hi)))
            })
            .collect()
    }

    /// `(log start, log end)` of `tp`, or why it is not known.
    fn range(&self, io: &FlowIo<'_>, tp: &TopicPartition) -> Result<(i64, i64), TopicError> {
        self.range_of(tp)
            .map_err(|(why, retriable)| TopicError::Offsets {
                flow: io.flow(),
                cluster: io.plan.source.clone(),
                partition: tp.clone(),
                why,
                retriable,
            })
    }

    /// `(log start, log end)` of `tp`, or why not and whether a later read may succeed (a
    /// partition missing from the answers may: its broker did not answer).
    fn range_of(&self, tp: &TopicPartition) -> Result<(i64, i64), (String, bool)> {
        let lo = self.earliest.get(tp).map(|r| r.as_ref().map(|v| *v));
        let hi = self.latest.get(tp).map(|r| r.as_ref().map(|v| *v));
        match (lo, hi) {
            (Some(Ok(lo)), Some(Ok(hi))) => Ok((lo, hi)),
            (Some(Err(e)), _) | (_, Some(Err(e))) => Err((e.to_string(), e.is_retriable())),
            _ => Err(("no answer".into(), true)),
        }
    }
}

/// The log ends of the remote partitions of `ready`, read in one pass (read_uncommitted: the
/// data plane's producer is not transactional); a partition whose end is not known is absent.
async fn remote_log_ends(
    io: &FlowIo<'_>,
    ready: &[(&SourceTopic, i32, (i64, i64))],
) -> BTreeMap<TopicPartition, i64> {
    let remotes: Vec<TopicPartition> = ready
        .iter()
        .map(|(t, p, _)| TopicPartition::new((io.plan.remote_name)(&t.name), *p))
        .collect();
    if remotes.is_empty() {
        return BTreeMap::new();
    }
    io.target
        .list_offsets(
            &remotes,
            OffsetSpec::Latest,
            IsolationLevel::ReadUncommitted,
        )
        .await
        .into_iter()
        .filter_map(|(tp, r)| r.ok().map(|o| (tp, o)))
        .collect()
}

/// At process start, a partition with stored progress may have been replicated further
/// before an unclean stop: skip what the target provably already holds (see
/// [`crate::duties::recovery`]). Any doubt or error resumes at the stored offset. Returns where
/// to start and the mapping of the records skipped.
async fn recover_start(
    io: &FlowIo<'_>,
    tp: &TopicPartition,
    remote: &str,
    stored_offset: i64,
) -> (i64, Vec<MappingSegment>) {
    let Some(entry) = io.progress.get(tp) else {
        return (stored_offset, Vec::new());
    };
    let target_tp = TopicPartition::new(remote, tp.partition);
    match crate::duties::recovery::recover(
        io.source,
        io.target,
        tp,
        &target_tp,
        &entry,
        io.isolation(),
        RECOVERY_MAX_RECORDS,
    )
    .await
    {
        Ok(crate::duties::recovery::Recovered::AsStored) => (stored_offset, Vec::new()),
        Ok(crate::duties::recovery::Recovered::Advanced {
            to,
            records,
            segments,
        }) => {
            tracing::info!(partition = %tp, flow = %io.flow(), from = stored_offset, to, records, "the target already held records replicated after the last progress store (unclean stop); resuming after them");
            (to, segments)
        }
        Ok(crate::duties::recovery::Recovered::Unverified { reason }) => {
            tracing::warn!(partition = %tp, flow = %io.flow(), "{reason}; resuming at the stored offset {stored_offset} (records after it may be copied again)");
            (stored_offset, Vec::new())
        }
        Err(e) => {
            tracing::warn!(partition = %tp, flow = %io.flow(), "cannot check how far the target got ({e}); resuming at the stored offset {stored_offset}");
            (stored_offset, Vec::new())
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn plan(extra: &str) -> FlowPlan {
        let text = format!(
            "clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\nA->B.enabled = true\n{extra}"
        );
        let path = std::env::temp_dir().join(format!(
            "strait-topic-duties-{}-{}.properties",
            std::process::id(),
            extra.len()
        ));
        std::fs::write(&path, text).unwrap();
        let cfg = crate::config::load(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        crate::plan::flow_plan(&cfg, cfg.flow("A", "B").unwrap()).unwrap()
    }

    #[test]
    fn the_passes_come_due_on_their_intervals() {
        let plan = plan(
            "refresh.topics.interval.seconds = 10\nsync.topic.configs.interval.seconds = 30\nsync.topic.acls.enabled = false\n",
        );
        #[allow(clippy::disallowed_methods)] // a test needs some instant to start from
        let t0 = Instant::now();
        let mut sync = TopicSync::new(&plan, t0);
        // Discovery ran at start; config sync runs at the first tick, as MM2 runs it at t=0.
        let first = sync.due(t0);
        assert_eq!(
            first,
            TopicDuties {
                discover: false,
                configs: Some(true),
                acls: false
            }
        );
        // Decided once: the same instant has nothing more.
        assert_eq!(
            sync.due(t0),
            TopicDuties {
                discover: false,
                configs: None,
                acls: false
            }
        );
        // At 10 s discovery, and the remote configs (max.message.bytes) without a sync.
        let at10 = sync.due(t0 + Duration::from_secs(10));
        assert!(at10.discover);
        assert_eq!(at10.configs, Some(false));
        assert_eq!(sync.due(t0 + Duration::from_secs(20)).configs, Some(false));
        // Reading the remote configs every 10 s does not postpone the sync due at 30 s.
        assert_eq!(sync.due(t0 + Duration::from_secs(30)).configs, Some(true));
        assert_eq!(sync.due(t0 + Duration::from_secs(40)).configs, Some(false));
    }

    #[test]
    fn an_offsets_error_says_whether_a_later_pass_may_read_them() {
        use crate::cluster::Context;
        let tp = |p| TopicPartition::new("t", p);
        let kafka = |code| {
            ClusterError::kafka(Context::new("A", "ListOffsets").topic("t"), code, None).unwrap()
        };
        let offsets = SourceOffsets {
            earliest: BTreeMap::from([
                (tp(0), Ok(0)),
                (tp(1), Ok(0)),
                (tp(2), Err(kafka(29))),
                (tp(3), Ok(0)),
            ]),
            latest: BTreeMap::from([
                (tp(0), Ok(7)),
                // NOT_LEADER_OR_FOLLOWER: a broker still creating the log, a leader moving.
                (tp(1), Err(kafka(6))),
                (tp(3), Ok(2)),
            ]),
        };
        assert_eq!(offsets.range_of(&tp(0)), Ok((0, 7)));
        assert!(matches!(offsets.range_of(&tp(1)), Err((_, true))));
        // TOPIC_AUTHORIZATION_FAILED: no later pass changes it.
        assert!(matches!(offsets.range_of(&tp(2)), Err((why, false)) if why.contains("uthoriz")));
        // No answer for the partition at all.
        assert_eq!(offsets.range_of(&tp(4)), Err(("no answer".into(), true)));
    }

    fn seen_at(at: Instant) -> SourceSeen {
        SourceSeen {
            at,
            topics: vec![SourceTopic {
                name: "t".into(),
                topic_id: [1; 16],
                partitions: vec![0],
            }],
            ranges: BTreeMap::from([(TopicPartition::new("t", 0), (0, 5))]),
        }
    }

    #[test]
    fn an_assignment_reuses_the_source_view_only_within_a_refresh_interval() {
        #[allow(clippy::disallowed_methods)] // a test needs some instant to start from
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut sync = TopicSync::new(
            &plan(
                "refresh.topics.interval.seconds = 4
",
            ),
            t0,
        );
        // No pass read the source yet.
        assert!(sync.reusable_source(t0).is_none());
        sync.seen = Some(seen_at(t0));
        assert!(sync.reusable_source(t0 + s(3)).is_some());
        // One refresh interval on, the regular pass is due: the view is too old.
        assert!(sync.reusable_source(t0 + s(4)).is_none());
        // A reload's new filter makes the view meaningless.
        sync.reconfigure(
            &plan(
                "refresh.topics.interval.seconds = 4
",
            ),
            t0,
        );
        assert!(sync.reusable_source(t0).is_none());

        // Never older than SOURCE_REUSE_MAX, whatever the interval (MM2's default: 600 s).
        let mut sync = TopicSync::new(
            &plan(
                "refresh.topics.interval.seconds = 600
",
            ),
            t0,
        );
        sync.seen = Some(seen_at(t0));
        assert!(sync.reusable_source(t0 + SOURCE_REUSE_MAX - s(1)).is_some());
        assert!(sync.reusable_source(t0 + SOURCE_REUSE_MAX).is_none());

        // Without topic refresh nothing would ever look again: no reuse.
        let mut sync = TopicSync::new(
            &plan(
                "refresh.topics.enabled = false
",
            ),
            t0,
        );
        sync.seen = Some(seen_at(t0));
        assert!(sync.reusable_source(t0).is_none());
    }
}
