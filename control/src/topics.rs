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

use strait_dataplane::shard::{Assignment, ClusterEndpoint, FlowId, PartitionKey};

use crate::cluster::{
    AclBinding, AlterConfigOp, Cluster, ClusterError, ConfigEntry, ConfigSource, IsolationLevel,
    NewTopic, OffsetSpec, TopicPartition, acl,
};
use crate::filter::ConfigPropertyFilter;
use crate::progress::{self, ProgressStore};
use crate::replicate::FlowPlan;

/// Topics per DescribeConfigs / CreateTopics request: keeps requests and responses small on
/// clusters with many topics.
const ADMIN_BATCH_TOPICS: usize = 200;

/// Timeout the brokers get for CreateTopics and CreatePartitions.
const CREATE_TIMEOUT_MS: i32 = 30_000;
/// The most source records crash recovery reads per partition at start; past it, strait
/// resumes at the stored position and copies the difference again.
const RECOVERY_MAX_RECORDS: i64 = 1_000_000;

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
    },
}

/// A periodic duty: due at `next`, then every `interval`. Disabled duties are never due.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Every {
    interval: Duration,
    next: Option<Instant>,
}

impl Every {
    /// A duty first due at `first`, then every `interval_seconds` (at least one second, so a
    /// zero interval cannot spin the control loop). `enabled = false` makes it never due.
    pub fn new(enabled: bool, interval_seconds: u64, first: Instant) -> Every {
        Every {
            interval: Duration::from_secs(interval_seconds.max(1)),
            next: enabled.then_some(first),
        }
    }

    /// Same, with the interval in milliseconds (at least 1 ms).
    pub fn from_millis(enabled: bool, interval_ms: u64, first: Instant) -> Every {
        Every {
            interval: Duration::from_millis(interval_ms.max(1)),
            next: enabled.then_some(first),
        }
    }

    /// Whether the duty is due at `now`.
    pub fn due(&self, now: Instant) -> bool {
        self.next.is_some_and(|n| now >= n)
    }

    /// The duty ran at `now`: next due one interval later (never, if that overflows).
    pub fn done(&mut self, now: Instant) {
        if self.next.is_some() {
            self.next = now.checked_add(self.interval);
        }
    }

    /// The interval.
    pub fn interval(&self) -> Duration {
        self.interval
    }
}

/// A source topic as discovery sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceTopic {
    pub name: String,
    pub topic_id: [u8; 16],
    /// Partition numbers, ascending.
    pub partitions: Vec<i32>,
}

/// What discovery already manages for a source topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KnownTopic {
    pub topic_id: [u8; 16],
    /// Partitions started (assigned to a shard, or stopped with an error at start).
    pub partitions: BTreeSet<i32>,
    pub remote: String,
    /// The remote topic's `max.message.bytes`, as last told to the shards.
    pub max_message_bytes: usize,
}

/// A known topic that was deleted and created again (its id changed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recreation {
    pub topic: String,
    pub old_id: [u8; 16],
    pub new_id: [u8; 16],
    /// Started partitions the new topic also has.
    pub partitions: Vec<i32>,
}

/// What one discovery pass must do.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DiscoveryPlan {
    /// Source topics without a remote topic: `(source, remote, partition count)`.
    pub create: Vec<(String, String, i32)>,
    /// Remote topics with fewer partitions than their source: `(remote, new count)`.
    pub grow: Vec<(String, i32)>,
    /// Partitions to start, per source topic (once their remote partition exists).
    pub start: BTreeMap<String, Vec<i32>>,
    /// Known topics whose id changed.
    pub recreated: Vec<Recreation>,
    /// Known partitions the source no longer has: `(topic, partitions)`.
    pub vanished: Vec<(String, Vec<i32>)>,
}

/// Compares the source's topics (already filtered by the flow) with the remote topics'
/// partition counts and what is already managed. Never plans a deletion or a shrink.
pub fn plan_discovery(
    source: &[SourceTopic],
    target_partitions: &BTreeMap<String, usize>,
    known: &BTreeMap<String, KnownTopic>,
    remote_name: &dyn Fn(&str) -> String,
) -> DiscoveryPlan {
    let mut plan = DiscoveryPlan::default();
    let mut seen = BTreeSet::new();
    for t in source {
        seen.insert(t.name.as_str());
        let remote = remote_name(&t.name);
        let count = i32::try_from(t.partitions.len()).unwrap_or(i32::MAX);
        match target_partitions.get(&remote) {
            None => plan.create.push((t.name.clone(), remote, count)),
            Some(&have) if have < t.partitions.len() => plan.grow.push((remote, count)),
            Some(_) => {}
        }
        let current: BTreeSet<i32> = t.partitions.iter().copied().collect();
        let (started, recreated) = match known.get(&t.name) {
            None => (BTreeSet::new(), None),
            Some(k) if k.topic_id != t.topic_id => (k.partitions.clone(), Some(k.topic_id)),
            Some(k) => (k.partitions.clone(), None),
        };
        let new: Vec<i32> = current.difference(&started).copied().collect();
        let gone: Vec<i32> = started.difference(&current).copied().collect();
        if let Some(old) = recreated {
            let both: Vec<i32> = started.intersection(&current).copied().collect();
            plan.recreated.push(Recreation {
                topic: t.name.clone(),
                old_id: old,
                new_id: t.topic_id,
                partitions: both,
            });
        }
        if !new.is_empty() {
            plan.start.insert(t.name.clone(), new);
        }
        if !gone.is_empty() {
            plan.vanished.push((t.name.clone(), gone));
        }
    }
    for (name, k) in known {
        if !seen.contains(name.as_str()) && !k.partitions.is_empty() {
            plan.vanished
                .push((name.clone(), k.partitions.iter().copied().collect()));
        }
    }
    plan
}

fn passes_common_filters(e: &ConfigEntry, filter: &ConfigPropertyFilter) -> bool {
    !e.read_only
        && !e.sensitive
        && e.source != ConfigSource::StaticBroker
        && filter.should_replicate_config_property(&e.name)
}

/// The configs a new remote topic is created with: MM2's `targetConfig(config, false)`. Keeps
/// overridden entries (dynamic broker defaults count as overrides), and source defaults only
/// under `use.defaults.from=source`; never read-only, sensitive, static-broker or excluded
/// ones.
pub fn creation_configs(
    source: &[ConfigEntry],
    filter: &ConfigPropertyFilter,
) -> Vec<(String, String)> {
    source
        .iter()
        .filter(|e| !e.is_default() || filter.should_replicate_source_default(&e.name))
        .filter(|e| passes_common_filters(e, filter))
        .filter_map(|e| e.value.clone().map(|v| (e.name.clone(), v)))
        .collect()
}

/// The incremental changes that make the remote topic's configs follow the source's: MM2's
/// `targetConfig(config, true)` then `incrementalAlterConfigs` (a source default is DELETEd
/// on the target unless `use.defaults.from=source`, everything else is SET). With the target's
/// current configs, operations that would change nothing, and properties the target does not
/// report, are left out.
pub fn config_sync_ops(
    source: &[ConfigEntry],
    target: Option<&[ConfigEntry]>,
    filter: &ConfigPropertyFilter,
) -> Vec<AlterConfigOp> {
    let mut ops = Vec::new();
    for e in source.iter().filter(|e| passes_common_filters(e, filter)) {
        let op = if e.is_default() && !filter.should_replicate_source_default(&e.name) {
            AlterConfigOp::Delete(e.name.clone())
        } else {
            match &e.value {
                Some(v) => AlterConfigOp::Set(e.name.clone(), v.clone()),
                None => continue,
            }
        };
        if let Some(target) = target {
            let Some(t) = target.iter().find(|t| t.name == e.name) else {
                continue;
            };
            if t.read_only {
                continue;
            }
            let overridden = t.source == ConfigSource::DynamicTopic;
            let no_op = match &op {
                AlterConfigOp::Delete(_) => !overridden,
                AlterConfigOp::Set(_, v) => overridden && t.value.as_deref() == Some(v.as_str()),
            };
            if no_op {
                continue;
            }
        }
        ops.push(op);
    }
    ops
}

/// The ACL bindings MM2 would create on the target for the source's topic ACLs: literal topic
/// patterns of replicated topics only, never ALLOW WRITE, ALLOW ALL downgraded to ALLOW READ,
/// renamed to the remote topic. Sorted, without duplicates.
pub fn acls_to_sync(
    source: &[AclBinding],
    should_replicate: &dyn Fn(&str) -> bool,
    remote_name: &dyn Fn(&str) -> String,
) -> Vec<AclBinding> {
    let mut out: Vec<AclBinding> = source
        .iter()
        .filter(|b| b.resource_type == acl::RESOURCE_TOPIC)
        .filter(|b| b.pattern_type == acl::PATTERN_LITERAL)
        .filter(|b| {
            !(b.permission_type == acl::PERMISSION_ALLOW && b.operation == acl::OPERATION_WRITE)
        })
        .filter(|b| should_replicate(&b.resource_name))
        .map(|b| {
            let operation = if b.permission_type == acl::PERMISSION_ALLOW
                && b.operation == acl::OPERATION_ALL
            {
                acl::OPERATION_READ
            } else {
                b.operation
            };
            AclBinding {
                resource_type: acl::RESOURCE_TOPIC,
                resource_name: remote_name(&b.resource_name),
                pattern_type: acl::PATTERN_LITERAL,
                principal: b.principal.clone(),
                host: b.host.clone(),
                operation,
                permission_type: b.permission_type,
            }
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Where a partition starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartDecision {
    /// Replicate from this offset.
    Start(i64),
    /// The stored position is lost; restart from the log start (`strait.on.lost.position =
    /// earliest`), logging `warning` loudly.
    Reset { offset: i64, warning: String },
    /// The stored position is lost; the partition stops with `error`.
    Fail { stored: i64, error: String },
}

/// Decides where partition `tp` (source topic id `topic_id`, log from `log_start` to
/// `log_end`) starts, from its stored progress: resume where it stopped; without progress,
/// `auto.offset.reset`. A stored position of another topic id (the topic was recreated), below
/// the log start (truncated) or past the log end (the log lost records we had replicated) is
/// lost: the partition stops, or restarts from the log start when `reset_lost` is set.
pub fn decide_start(
    tp: &TopicPartition,
    stored: Option<progress::Entry>,
    topic_id: [u8; 16],
    log_start: i64,
    log_end: i64,
    start_at_earliest: bool,
    reset_lost: bool,
) -> StartDecision {
    let Some(e) = stored else {
        return StartDecision::Start(if start_at_earliest {
            log_start
        } else {
            log_end
        });
    };
    let lost = if e.topic_id != topic_id {
        format!(
            "source topic {} was recreated (topic id {} is now {}): the stored position {} of partition {} belongs to the old topic",
            tp.topic,
            progress::topic_id_display(&e.topic_id),
            progress::topic_id_display(&topic_id),
            e.next_offset,
            tp.partition
        )
    } else if e.next_offset < log_start {
        format!(
            "source partition {tp} was truncated past strait's position: next offset {} is below the log start {log_start}",
            e.next_offset
        )
    } else if e.next_offset > log_end {
        format!(
            "source partition {tp} lost records strait had replicated: next offset {} is past the log end {log_end}",
            e.next_offset
        )
    } else {
        return StartDecision::Start(e.next_offset);
    };
    if reset_lost {
        StartDecision::Reset {
            offset: log_start,
            warning: format!(
                "{lost}; RESTARTING FROM THE EARLIEST OFFSET {log_start} (strait.on.lost.position=earliest): records may be skipped or copied again"
            ),
        }
    } else {
        StartDecision::Fail {
            stored: e.next_offset,
            error: format!(
                "{lost}; the partition is stopped (set strait.on.lost.position=earliest to restart it from the earliest offset)"
            ),
        }
    }
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
        if self.plan.fetch.isolation_level == 1 {
            IsolationLevel::ReadCommitted
        } else {
            IsolationLevel::ReadUncommitted
        }
    }
}

/// Topic management of one flow: call [`TopicSync::discover`] once at start, then
/// [`TopicSync::tick`] from the control loop.
#[derive(Debug)]
pub struct TopicSync {
    known: BTreeMap<String, KnownTopic>,
    /// Source topics whose remote topic could not be created, and the last error (logged once).
    creation_failures: BTreeMap<String, String>,
    refresh: Every,
    configs: Every,
    /// Reading the remote topics' `max.message.bytes`, also when config sync is off.
    target_configs: Every,
    acls: Every,
    acl_source_unsecured_logged: bool,
    acl_target_unsecured_logged: bool,
    /// A discovery pass completed.
    discovered: bool,
}

fn max_message_bytes(entries: Option<&Vec<ConfigEntry>>) -> usize {
    entries
        .and_then(|c| c.iter().find(|e| e.name == "max.message.bytes"))
        .and_then(|e| e.value.as_deref())
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(strait_dataplane::batch::DEFAULT_MAX_MESSAGE_BYTES)
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
        }
    }

    /// The source topics managed so far.
    pub fn known(&self) -> &BTreeMap<String, KnownTopic> {
        &self.known
    }

    /// Runs the duties that are due. Errors are logged and the duty runs again at its next
    /// interval.
    pub async fn tick(&mut self, io: &FlowIo<'_>, now: Instant) -> Vec<TopicChange> {
        let mut out = Vec::new();
        if self.refresh.due(now) {
            self.refresh.done(now);
            match self.discover(io).await {
                Ok(changes) => out.extend(changes),
                Err(e) => tracing::warn!(
                    "topic discovery failed, retrying in {:?}: {e}",
                    self.refresh.interval()
                ),
            }
        }
        if self.configs.due(now) || self.target_configs.due(now) {
            let sync = self.configs.due(now);
            self.configs.done(now);
            self.target_configs.done(now);
            match self.sync_configs(io, sync).await {
                Ok(changes) => out.extend(changes),
                Err(e) => tracing::warn!("topic config sync failed: {e}"),
            }
        }
        if self.acls.due(now) {
            self.acls.done(now);
            if let Err(e) = self.sync_acls(io).await {
                tracing::warn!("topic ACL sync failed: {e}");
            }
        }
        out
    }

    /// One discovery pass: creates missing remote topics and partitions, and returns the
    /// partitions to start and the changes of known topics.
    pub async fn discover(&mut self, io: &FlowIo<'_>) -> Result<Vec<TopicChange>, TopicError> {
        let plan = io.plan;
        let md = io
            .source
            .refresh_metadata(None)
            .await
            .map_err(io.err("listing source topics"))?;
        let topics: Vec<SourceTopic> = md
            .topics
            .values()
            .filter(|t| !t.is_internal && (plan.should_replicate)(&t.name))
            .map(|t| SourceTopic {
                name: t.name.clone(),
                topic_id: t.topic_id,
                partitions: t.partitions.iter().map(|p| p.partition).collect(),
            })
            .collect();
        let remotes: Vec<String> = topics.iter().map(|t| (plan.remote_name)(&t.name)).collect();
        let mut target_counts = self.target_partition_counts(io, &remotes).await?;
        let d = plan_discovery(&topics, &target_counts, &self.known, &*plan.remote_name);

        let mut out = Vec::new();
        let mut changed_target = false;
        if !d.create.is_empty() {
            changed_target = true;
            self.create_remote_topics(io, &d.create, &mut out).await?;
        }
        for (remote, count) in &d.grow {
            changed_target = true;
            match io
                .target
                .create_partitions(remote, *count, CREATE_TIMEOUT_MS)
                .await
            {
                Ok(()) => tracing::info!(
                    topic = %remote,
                    cluster = %plan.target,
                    partitions = count,
                    "grew remote topic"
                ),
                // Someone grew it first: that is what we wanted.
                Err(e) if e.is(kafka_protocol::ResponseError::InvalidPartitions) => {}
                Err(e) => {
                    tracing::warn!(topic = %remote, "cannot add partitions to the remote topic: {e}")
                }
            }
        }
        if changed_target {
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
        // Partitions to start, once their remote partition exists.
        let mut to_start: Vec<(&SourceTopic, i32)> = Vec::new();
        for t in &topics {
            let Some(parts) = d.start.get(&t.name) else {
                continue;
            };
            let remote = (plan.remote_name)(&t.name);
            let have = target_counts.get(&remote).copied().unwrap_or(0);
            for &p in parts {
                if usize::try_from(p).is_ok_and(|p| p < have) {
                    to_start.push((t, p));
                    need_offsets.push(TopicPartition::new(&t.name, p));
                } else if !self.creation_failures.contains_key(&t.name) {
                    tracing::debug!(topic = %remote, partition = p, "remote partition not there yet");
                }
            }
        }
        let isolation = io.isolation();
        let (earliest, latest) = if need_offsets.is_empty() {
            Default::default()
        } else {
            (
                io.source
                    .list_offsets(&need_offsets, OffsetSpec::Earliest, isolation)
                    .await,
                io.source
                    .list_offsets(&need_offsets, OffsetSpec::Latest, isolation)
                    .await,
            )
        };
        let offsets = |tp: &TopicPartition| -> Result<(i64, i64), TopicError> {
            let lo = earliest.get(tp).map(|r| r.as_ref().map(|v| *v));
            let hi = latest.get(tp).map(|r| r.as_ref().map(|v| *v));
            match (lo, hi) {
                (Some(Ok(lo)), Some(Ok(hi))) => Ok((lo, hi)),
                (lo, hi) => Err(TopicError::Offsets {
                    flow: io.flow(),
                    cluster: plan.source.clone(),
                    partition: tp.clone(),
                    why: match (lo, hi) {
                        (Some(Err(e)), _) | (_, Some(Err(e))) => e.to_string(),
                        _ => "no answer".into(),
                    },
                }),
            }
        };

        for Recreation {
            topic,
            old_id: old,
            new_id: new,
            partitions: both,
        } in &d.recreated
        {
            let message = format!(
                "source topic {topic} was recreated while being replicated (topic id {} is now {})",
                progress::topic_id_display(old),
                progress::topic_id_display(new)
            );
            for &p in both {
                let log_start = offsets(&TopicPartition::new(topic, p))
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

        // The first pass fails the run when a partition's offsets cannot be read; later passes
        // leave the partition for the next one.
        let mut ready = Vec::with_capacity(to_start.len());
        for (t, p) in to_start {
            match offsets(&TopicPartition::new(&t.name, p)) {
                Ok(range) => ready.push((t, p, range)),
                Err(e) if self.discovered => {
                    tracing::warn!("{e}; retrying at the next discovery");
                }
                Err(e) => return Err(e),
            }
        }
        let first_pass = !self.discovered;
        self.discovered = true;

        for (t, p, (lo, hi)) in ready {
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
            let decision = decide_start(
                &tp,
                io.progress.get(&tp),
                t.topic_id,
                lo,
                hi,
                plan.start_at_earliest,
                io.reset_lost_positions,
            );
            let (start, failed) = match decision {
                StartDecision::Start(o) if first_pass && io.progress.get(&tp).is_some() => {
                    (recover_start(io, &tp, &remote, o).await, None)
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
            let key = PartitionKey::new(io.fid, &t.name, p);
            out.push(TopicChange::Start(Box::new(NewPartition {
                assignment: Assignment {
                    key: key.clone(),
                    source: io.source_ep.clone(),
                    target: io.target_ep.clone(),
                    target_topic: Arc::from(remote.as_str()),
                    start_offset: start,
                    max_message_bytes: known.max_message_bytes,
                    fetch: plan.fetch,
                    produce: plan.produce,
                },
                key,
                topic_id: t.topic_id,
                end_offset: hi,
                failed,
            })));
        }

        for (topic, parts) in &d.vanished {
            tracing::info!(topic = %topic, cluster = %plan.source, partitions = ?parts, "source partitions are gone; no longer replicated (the remote topic is kept)");
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
        Ok(out)
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
        let plan = io.plan;
        let names: Vec<String> = create.iter().map(|(s, _, _)| s.clone()).collect();
        let source_configs = self
            .describe(io.source, &names)
            .await
            .map_err(io.err("describing source topic configs"))?;
        let mut new_topics = Vec::new();
        for (source, remote, count) in create {
            // A topic deleted since it was listed has no configs: try again next time.
            let Some(configs) = source_configs.get(source) else {
                continue;
            };
            new_topics.push(NewTopic {
                name: remote.clone(),
                partitions: *count,
                replication_factor: plan.replication_factor,
                configs: creation_configs(configs, &plan.config.config_property_filter),
            });
        }
        for chunk in new_topics.chunks(ADMIN_BATCH_TOPICS) {
            let results = io
                .target
                .create_topics(chunk, CREATE_TIMEOUT_MS)
                .await
                .map_err(io.err("creating remote topics"))?;
            for (name, r) in results {
                let Some(nt) = chunk.iter().find(|t| t.name == name) else {
                    continue;
                };
                let Some((source, _, _)) = create.iter().find(|(_, r, _)| *r == name) else {
                    continue;
                };
                match r {
                    Ok(()) => {
                        self.creation_failures.remove(source);
                        tracing::info!(
                            topic = %name,
                            cluster = %plan.target,
                            partitions = nt.partitions,
                            replication_factor = nt.replication_factor,
                            configs = ?nt.configs,
                            "created remote topic"
                        );
                        // Metadata shows a new topic a moment after creation; its partitions
                        // start only once they are visible, so wait here rather than leave
                        // them for the next discovery.
                        if let Err(e) = io
                            .target
                            .wait_for_leaders(&name, CREATE_TIMEOUT_MS as u64)
                            .await
                        {
                            tracing::warn!(topic = %name, "the new remote topic has no leaders yet: {e}");
                        }
                    }
                    Err(e) if e.is(kafka_protocol::ResponseError::TopicAlreadyExists) => {}
                    Err(e) => {
                        let msg =
                            format!("cannot create remote topic {name} on {}: {e}", plan.target);
                        if self.creation_failures.get(source) != Some(&msg) {
                            tracing::error!("{msg}; retrying at every discovery");
                            // Report the topic's partitions as stopped, once per distinct error.
                            for p in 0..nt.partitions {
                                let key = PartitionKey::new(io.fid, source, p);
                                out.push(TopicChange::Start(Box::new(NewPartition {
                                    assignment: Assignment {
                                        key: key.clone(),
                                        source: io.source_ep.clone(),
                                        target: io.target_ep.clone(),
                                        target_topic: Arc::from(name.as_str()),
                                        start_offset: 0,
                                        max_message_bytes:
                                            strait_dataplane::batch::DEFAULT_MAX_MESSAGE_BYTES,
                                        fetch: plan.fetch,
                                        produce: plan.produce,
                                    },
                                    key,
                                    topic_id: [0; 16],
                                    end_offset: 0,
                                    failed: Some(msg.clone()),
                                })));
                            }
                            self.creation_failures.insert(source.clone(), msg);
                        }
                    }
                }
            }
        }
        Ok(())
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
                        tracing::info!(topic = %k.remote, cluster = %io.plan.target, changes = ?ops, "synced topic configs");
                        altered.push(k.remote.clone());
                    }
                    Err(e) if e.is(kafka_protocol::ResponseError::UnsupportedVersion) => {
                        tracing::error!(topic = %k.remote, "the target cluster {} does not support IncrementalAlterConfigs: {e}", io.plan.target);
                    }
                    Err(e) => tracing::warn!(topic = %k.remote, "cannot sync topic configs: {e}"),
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
                Err(e) => tracing::warn!(topic = %b.resource_name, "cannot sync ACL: {e}"),
            }
        }
        tracing::info!(cluster = %plan.target, created, "synced topic ACLs");
        Ok(())
    }
}

/// At process start, a partition with stored progress may have been replicated further
/// before an unclean stop: skip what the target provably already holds (see
/// [`crate::recover`]). Any doubt or error resumes at the stored offset.
async fn recover_start(
    io: &FlowIo<'_>,
    tp: &TopicPartition,
    remote: &str,
    stored_offset: i64,
) -> i64 {
    let Some(entry) = io.progress.get(tp) else {
        return stored_offset;
    };
    let target_tp = TopicPartition::new(remote, tp.partition);
    match crate::recover::recover(
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
        Ok(crate::recover::Recovered::AsStored) => stored_offset,
        Ok(crate::recover::Recovered::Advanced { to, records }) => {
            tracing::info!(partition = %tp, flow = %io.flow(), from = stored_offset, to, records, "the target already held records replicated after the last progress store (unclean stop); resuming after them");
            to
        }
        Ok(crate::recover::Recovered::Unverified { reason }) => {
            tracing::warn!(partition = %tp, flow = %io.flow(), "{reason}; resuming at the stored offset {stored_offset} (records after it may be copied again)");
            stored_offset
        }
        Err(e) => {
            tracing::warn!(partition = %tp, flow = %io.flow(), "cannot check how far the target got ({e}); resuming at the stored offset {stored_offset}");
            stored_offset
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::{UseDefaultsFrom, java_list};
    use proptest::prelude::*;

    fn entry(name: &str, value: &str, source: ConfigSource) -> ConfigEntry {
        ConfigEntry {
            name: name.into(),
            value: Some(value.into()),
            source,
            read_only: false,
            sensitive: false,
        }
    }

    fn filter(uses: UseDefaultsFrom) -> ConfigPropertyFilter {
        ConfigPropertyFilter::new(
            &java_list(crate::filter::CONFIG_PROPERTIES_EXCLUDE_DEFAULT),
            uses,
        )
        .unwrap()
    }

    fn source_configs() -> Vec<ConfigEntry> {
        vec![
            entry("cleanup.policy", "compact", ConfigSource::DynamicTopic),
            entry("retention.ms", "604800000", ConfigSource::Default),
            entry("segment.bytes", "1048576", ConfigSource::DynamicBroker),
            entry("segment.ms", "1000", ConfigSource::DynamicDefaultBroker),
            entry("log.dirs", "/x", ConfigSource::StaticBroker),
            entry("min.insync.replicas", "2", ConfigSource::DynamicTopic),
            entry(
                "message.timestamp.type",
                "LogAppendTime",
                ConfigSource::DynamicTopic,
            ),
            ConfigEntry {
                read_only: true,
                ..entry("ro", "1", ConfigSource::DynamicTopic)
            },
            ConfigEntry {
                sensitive: true,
                value: None,
                ..entry("secret", "", ConfigSource::DynamicTopic)
            },
        ]
    }

    #[test]
    fn creation_keeps_overrides_only() {
        let got = creation_configs(&source_configs(), &filter(UseDefaultsFrom::Target));
        assert_eq!(
            got,
            vec![
                ("cleanup.policy".to_string(), "compact".to_string()),
                ("segment.bytes".into(), "1048576".into()),
                ("segment.ms".into(), "1000".into()),
            ]
        );
        // use.defaults.from=source also copies the source's defaults.
        let got = creation_configs(&source_configs(), &filter(UseDefaultsFrom::Source));
        assert!(got.contains(&("retention.ms".into(), "604800000".into())));
        assert_eq!(got.len(), 4);
    }

    #[test]
    fn incremental_ops_as_mm2_without_target() {
        let ops = config_sync_ops(&source_configs(), None, &filter(UseDefaultsFrom::Target));
        assert_eq!(
            ops,
            vec![
                AlterConfigOp::Set("cleanup.policy".into(), "compact".into()),
                AlterConfigOp::Delete("retention.ms".into()),
                AlterConfigOp::Set("segment.bytes".into(), "1048576".into()),
                AlterConfigOp::Set("segment.ms".into(), "1000".into()),
            ]
        );
        let ops = config_sync_ops(&source_configs(), None, &filter(UseDefaultsFrom::Source));
        assert!(ops.contains(&AlterConfigOp::Set(
            "retention.ms".into(),
            "604800000".into()
        )));
    }

    #[test]
    fn incremental_ops_skip_what_changes_nothing() {
        let target = vec![
            // Already overridden to the same value: nothing to do.
            entry("cleanup.policy", "compact", ConfigSource::DynamicTopic),
            // A manual override on the target: reset it.
            entry("retention.ms", "1", ConfigSource::DynamicTopic),
            // Same value but from the target broker's default: pin it, as MM2 does.
            entry("segment.bytes", "1048576", ConfigSource::Default),
            // segment.ms is unknown to the target: not sent.
        ];
        let ops = config_sync_ops(
            &source_configs(),
            Some(&target),
            &filter(UseDefaultsFrom::Target),
        );
        assert_eq!(
            ops,
            vec![
                AlterConfigOp::Delete("retention.ms".into()),
                AlterConfigOp::Set("segment.bytes".into(), "1048576".into()),
            ]
        );
        let target = vec![entry("retention.ms", "604800000", ConfigSource::Default)];
        assert!(
            config_sync_ops(
                &source_configs(),
                Some(&target),
                &filter(UseDefaultsFrom::Target)
            )
            .is_empty()
        );
    }

    fn binding(name: &str, pattern: i8, op: i8, perm: i8) -> AclBinding {
        AclBinding {
            resource_type: acl::RESOURCE_TOPIC,
            resource_name: name.into(),
            pattern_type: pattern,
            principal: "User:alice".into(),
            host: "*".into(),
            operation: op,
            permission_type: perm,
        }
    }

    #[test]
    fn acls_follow_mm2_rules() {
        let source = vec![
            binding(
                "t",
                acl::PATTERN_LITERAL,
                acl::OPERATION_ALL,
                acl::PERMISSION_ALLOW,
            ),
            binding(
                "t",
                acl::PATTERN_LITERAL,
                acl::OPERATION_WRITE,
                acl::PERMISSION_ALLOW,
            ),
            binding(
                "t",
                acl::PATTERN_LITERAL,
                acl::OPERATION_WRITE,
                acl::PERMISSION_DENY,
            ),
            binding("t", 4, acl::OPERATION_READ, acl::PERMISSION_ALLOW),
            binding(
                "x",
                acl::PATTERN_LITERAL,
                acl::OPERATION_READ,
                acl::PERMISSION_ALLOW,
            ),
            AclBinding {
                resource_type: 3,
                ..binding(
                    "t",
                    acl::PATTERN_LITERAL,
                    acl::OPERATION_READ,
                    acl::PERMISSION_ALLOW,
                )
            },
        ];
        let got = acls_to_sync(&source, &|t| t == "t", &|t| format!("A.{t}"));
        assert_eq!(
            got,
            vec![
                binding(
                    "A.t",
                    acl::PATTERN_LITERAL,
                    acl::OPERATION_READ,
                    acl::PERMISSION_ALLOW
                ),
                binding(
                    "A.t",
                    acl::PATTERN_LITERAL,
                    acl::OPERATION_WRITE,
                    acl::PERMISSION_DENY
                ),
            ]
        );
    }

    fn id(n: u8) -> [u8; 16] {
        [n; 16]
    }

    #[test]
    fn start_positions() {
        let tp = TopicPartition::new("t", 0);
        let e = |next| progress::Entry {
            next_offset: next,
            topic_id: id(1),
            target_offset: -1,
        };
        assert_eq!(
            decide_start(&tp, None, id(1), 5, 9, true, false),
            StartDecision::Start(5)
        );
        assert_eq!(
            decide_start(&tp, None, id(1), 5, 9, false, false),
            StartDecision::Start(9)
        );
        assert_eq!(
            decide_start(&tp, Some(e(7)), id(1), 5, 9, true, false),
            StartDecision::Start(7)
        );
        // Boundaries are positions, not lost: the log start and the log end.
        assert_eq!(
            decide_start(&tp, Some(e(5)), id(1), 5, 9, true, false),
            StartDecision::Start(5)
        );
        assert_eq!(
            decide_start(&tp, Some(e(9)), id(1), 5, 9, true, false),
            StartDecision::Start(9)
        );
        for (stored, tid, what) in [
            (4, id(1), "truncated"),
            (10, id(1), "past the log end"),
            (7, id(2), "recreated"),
        ] {
            match decide_start(&tp, Some(e(stored)), tid, 5, 9, true, false) {
                StartDecision::Fail { stored: s, error } => {
                    assert_eq!(s, stored);
                    assert!(error.contains(what), "{error}");
                    assert!(
                        error.contains("strait.on.lost.position=earliest"),
                        "{error}"
                    );
                }
                other => panic!("{other:?}"),
            }
            match decide_start(&tp, Some(e(stored)), tid, 5, 9, false, true) {
                StartDecision::Reset { offset, warning } => {
                    assert_eq!(offset, 5);
                    assert!(warning.contains(what), "{warning}");
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn schedule() {
        let t0 = Instant::now();
        let mut e = Every::new(true, 10, t0);
        assert!(e.due(t0));
        e.done(t0);
        assert!(!e.due(t0 + Duration::from_secs(9)));
        assert!(e.due(t0 + Duration::from_secs(10)));
        let off = Every::new(false, 10, t0);
        assert!(!off.due(t0 + Duration::from_secs(1_000)));
        // A zero interval still waits a second.
        let mut z = Every::new(true, 0, t0);
        z.done(t0);
        assert!(!z.due(t0));
        assert!(z.due(t0 + Duration::from_secs(1)));
    }

    fn remote(t: &str) -> String {
        format!("A.{t}")
    }

    #[test]
    fn discovery_cases() {
        let src = |name: &str, n: u8, parts: i32| SourceTopic {
            name: name.into(),
            topic_id: id(n),
            partitions: (0..parts).collect(),
        };
        let known_topic = |n: u8, parts: i32| KnownTopic {
            topic_id: id(n),
            partitions: (0..parts).collect(),
            remote: String::new(),
            max_message_bytes: 1,
        };
        let source = vec![
            src("new", 1, 2),
            src("grown", 2, 3),
            src("same", 3, 1),
            src("again", 9, 2),
        ];
        let target: BTreeMap<String, usize> = [
            ("A.grown".to_string(), 1usize),
            ("A.same".into(), 1),
            ("A.again".into(), 3),
        ]
        .into_iter()
        .collect();
        let known: BTreeMap<String, KnownTopic> = [
            ("grown".to_string(), known_topic(2, 1)),
            ("same".into(), known_topic(3, 1)),
            ("again".into(), known_topic(4, 3)),
            ("deleted".into(), known_topic(5, 2)),
        ]
        .into_iter()
        .collect();
        let d = plan_discovery(&source, &target, &known, &remote);
        assert_eq!(d.create, vec![("new".to_string(), "A.new".to_string(), 2)]);
        assert_eq!(d.grow, vec![("A.grown".to_string(), 3)]);
        assert_eq!(
            d.start,
            [
                ("new".to_string(), vec![0, 1]),
                ("grown".into(), vec![1, 2])
            ]
            .into_iter()
            .collect()
        );
        assert_eq!(
            d.recreated,
            vec![Recreation {
                topic: "again".into(),
                old_id: id(4),
                new_id: id(9),
                partitions: vec![0, 1]
            }]
        );
        assert_eq!(
            d.vanished,
            vec![
                ("again".to_string(), vec![2]),
                ("deleted".into(), vec![0, 1])
            ]
        );
    }

    proptest! {
        /// Discovery never shrinks or deletes, starts every source partition exactly once over
        /// successive passes, and plans nothing once everything is in place.
        #[test]
        fn discovery_converges(
            counts in proptest::collection::btree_map("[a-e]", 1usize..6, 0..5),
            target_extra in proptest::collection::btree_map("[a-e]", 0usize..8, 0..5),
        ) {
            let source: Vec<SourceTopic> = counts.iter().map(|(n, c)| SourceTopic {
                name: n.clone(), topic_id: id(1), partitions: (0..*c as i32).collect(),
            }).collect();
            let mut target: BTreeMap<String, usize> =
                target_extra.iter().map(|(n, c)| (remote(n), *c)).collect();
            let mut known: BTreeMap<String, KnownTopic> = BTreeMap::new();
            let mut started: BTreeMap<String, Vec<i32>> = BTreeMap::new();
            for _ in 0..2 {
                let d = plan_discovery(&source, &target, &known, &remote);
                prop_assert!(d.vanished.is_empty() && d.recreated.is_empty());
                for (_, r, c) in &d.create {
                    prop_assert!(!target.contains_key(r));
                    target.insert(r.clone(), *c as usize);
                }
                for (r, c) in &d.grow {
                    prop_assert!(target[r] < *c as usize);
                    target.insert(r.clone(), *c as usize);
                }
                for (t, ps) in &d.start {
                    let k = known.entry(t.clone()).or_insert_with(|| KnownTopic {
                        topic_id: id(1), partitions: BTreeSet::new(), remote: remote(t), max_message_bytes: 1,
                    });
                    for p in ps {
                        prop_assert!(k.partitions.insert(*p), "started twice");
                        started.entry(t.clone()).or_default().push(*p);
                    }
                }
            }
            for t in &source {
                prop_assert!(target[&remote(&t.name)] >= t.partitions.len());
                prop_assert_eq!(started.get(&t.name), Some(&t.partitions));
            }
            prop_assert_eq!(plan_discovery(&source, &target, &known, &remote), DiscoveryPlan::default());
        }
    }
}
