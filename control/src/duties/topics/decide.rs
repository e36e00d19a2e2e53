//! The decisions of topic management, as pure functions of what the clusters reported: which
//! remote topics to create or grow and which partitions to start ([`plan_discovery`]), the
//! configs a remote topic is created with ([`creation_configs`]) and later synced to
//! ([`config_sync_ops`]), the ACLs to copy ([`acls_to_sync`]), and where a partition starts
//! ([`decide_start`]). [`super::TopicSync`] does the IO around them.
#![deny(clippy::disallowed_methods)]

use std::collections::{BTreeMap, BTreeSet};

use crate::cluster::{AclBinding, AlterConfigOp, ClusterError, ConfigEntry, ConfigSource, acl};
use crate::mm2::filter::ConfigPropertyFilter;
use crate::model::{TopicPartition, topic_id_display};
use crate::store::progress;

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
    /// Remote topics with fewer partitions than their source.
    pub grow: Vec<Growth>,
    /// Partitions to start, per source topic (once their remote partition exists).
    pub start: BTreeMap<String, Vec<i32>>,
    /// Known topics whose id changed.
    pub recreated: Vec<Recreation>,
    /// Known partitions the source no longer has: `(topic, partitions)`.
    pub vanished: Vec<(String, Vec<i32>)>,
}

/// Partitions one CreateTopics or CreatePartitions request makes at most. A KRaft controller
/// refuses a request that would write more than `max.records.per.user.op` metadata records
/// (10 000 by default: one per partition, one per topic and per config) with PolicyViolation,
/// so a topic of 10 000 partitions, or two of 5 000 in one request, would never be created.
pub const PARTITIONS_PER_REQUEST: i32 = 5_000;

/// The CreateTopics requests that make `topics`: at most `max_topics` topics and
/// [`PARTITIONS_PER_REQUEST`] partitions each, in order. A topic larger than that is asked for
/// with [`PARTITIONS_PER_REQUEST`] partitions, to be grown after ([`growth_steps`]).
pub fn creation_requests(
    topics: &[crate::cluster::NewTopic],
    max_topics: usize,
) -> Vec<Vec<crate::cluster::NewTopic>> {
    let mut requests: Vec<Vec<crate::cluster::NewTopic>> = Vec::new();
    let mut partitions = 0;
    for t in topics {
        let mut t = t.clone();
        t.partitions = t.partitions.min(PARTITIONS_PER_REQUEST);
        let fits = requests.last().is_some_and(|r| {
            r.len() < max_topics && partitions + t.partitions <= PARTITIONS_PER_REQUEST
        });
        if !fits {
            requests.push(Vec::new());
            partitions = 0;
        }
        partitions += t.partitions;
        requests.last_mut().expect("pushed above").push(t);
    }
    requests
}

/// The partition counts to ask CreatePartitions for, one request each, to grow a topic from
/// `from` to `to` partitions by at most [`PARTITIONS_PER_REQUEST`] at a time.
pub fn growth_steps(from: i32, to: i32) -> Vec<i32> {
    let mut steps = Vec::new();
    let mut count = from;
    while count < to {
        count = count.saturating_add(PARTITIONS_PER_REQUEST).min(to);
        steps.push(count);
    }
    steps
}

/// A remote topic to grow to its source's partition count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Growth {
    pub remote: String,
    /// The partitions it has.
    pub from: i32,
    /// The partitions its source has.
    pub to: i32,
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
            Some(&have) if have < t.partitions.len() => plan.grow.push(Growth {
                remote,
                from: i32::try_from(have).unwrap_or(i32::MAX),
                to: count,
            }),
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

/// The partitions of `start` (a [`DiscoveryPlan`]'s, by source topic) whose remote partition the
/// target shows (`remote_counts`, by remote topic), which start now, and the others, which wait
/// for theirs (a remote topic just created or grown, that metadata does not show complete yet;
/// in a group, a member waiting for the one that manages the target). The partitions of topics
/// whose remote topic could not be created (`creation_failed`: reported stopped) are in
/// neither.
pub fn split_startable<'t>(
    source: &'t [SourceTopic],
    start: &BTreeMap<String, Vec<i32>>,
    remote_counts: &BTreeMap<String, usize>,
    remote_name: &dyn Fn(&str) -> String,
    creation_failed: &dyn Fn(&str) -> bool,
) -> (Vec<(&'t SourceTopic, i32)>, Vec<TopicPartition>) {
    let mut ready = Vec::new();
    let mut waiting = Vec::new();
    for t in source {
        let Some(parts) = start.get(&t.name) else {
            continue;
        };
        let have = remote_counts
            .get(&remote_name(&t.name))
            .copied()
            .unwrap_or(0);
        for &p in parts {
            if usize::try_from(p).is_ok_and(|p| p < have) {
                ready.push((t, p));
            } else if !creation_failed(&t.name) {
                waiting.push(TopicPartition::new(&t.name, p));
            }
        }
    }
    (ready, waiting)
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

/// Removes from `configs` the names the target cluster does not know (`known`: the config names
/// a topic on the target reports) and returns them, sorted (issue 15: a source on Kafka 2.8
/// sets `message.format.version`, which a 4.x target refuses at creation).
pub fn drop_unknown_configs(
    configs: &mut Vec<(String, String)>,
    known: &BTreeSet<String>,
) -> Vec<String> {
    let mut dropped: Vec<String> = configs
        .iter()
        .filter(|(name, _)| !known.contains(name))
        .map(|(name, _)| name.clone())
        .collect();
    configs.retain(|(name, _)| known.contains(name));
    dropped.sort();
    dropped
}

/// Why a target may not know a topic config, for the log line.
pub fn why_unknown(name: &str) -> &'static str {
    match name {
        "message.format.version" | "message.downconversion.enable" => {
            "Kafka 4.0 removed it with the pre-0.11 message formats (KIP-724)"
        }
        "message.timestamp.difference.max.ms" => {
            "Kafka 4.0 removed it (KIP-937: message.timestamp.before/after.max.ms replace it)"
        }
        _ => "the target's topics do not report it (added after the target's version, or removed)",
    }
}

/// A CreateTopics error that a retry cannot change: the topic stops with it instead of being
/// created again at every discovery. Authorization is left retriable (ACLs change while strait
/// runs); so is every error Kafka itself calls retriable.
pub fn is_permanent_creation_error(e: &ClusterError) -> bool {
    use kafka_protocol::ResponseError as E;
    matches!(
        e.kafka_error(),
        Some(
            E::InvalidConfig
                | E::InvalidReplicationFactor
                | E::InvalidPartitions
                | E::InvalidReplicaAssignment
                | E::InvalidTopicException
                | E::PolicyViolation
                | E::UnsupportedVersion
        )
    )
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
            topic_id_display(&e.topic_id),
            topic_id_display(&topic_id),
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

/// Whether a partition may start from a log range `(log_start, log_end)` read a moment ago by
/// an earlier discovery pass instead of reading it again: only when the start it gives does
/// not depend on how old the range is. That is a stored position of the same topic inside the
/// range (the log end only grows, so it stays inside; a log start that moved past it meanwhile
/// is the fetch's out-of-range error, handled as a lost position, as when the log start moves
/// between any discovery and the first fetch), or no stored position with the start at the
/// earliest offset (the same). Anything else reads the range again: a stored position past the
/// old log end (another member copied on since), a recreated topic, a truncated log, and the
/// start at the latest offset, whose offset is the log end itself.
pub fn earlier_range_serves(
    stored: Option<progress::Entry>,
    topic_id: [u8; 16],
    (log_start, log_end): (i64, i64),
    start_at_earliest: bool,
) -> bool {
    match stored {
        None => start_at_earliest,
        Some(e) => e.topic_id == topic_id && e.next_offset >= log_start && e.next_offset <= log_end,
    }
}

/// The `max.message.bytes` of a remote topic from its configs (the broker default when it is
/// not reported or not a number).
pub fn max_message_bytes(entries: Option<&Vec<ConfigEntry>>) -> usize {
    entries
        .and_then(|c| c.iter().find(|e| e.name == "max.message.bytes"))
        .and_then(|e| e.value.as_deref())
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(strait_dataplane::batch::DEFAULT_MAX_MESSAGE_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mm2::filter::{UseDefaultsFrom, java_list};
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
            &java_list(crate::mm2::filter::CONFIG_PROPERTIES_EXCLUDE_DEFAULT),
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
    fn configs_the_target_does_not_know_are_left_out() {
        let mut configs = vec![
            ("cleanup.policy".to_string(), "compact".to_string()),
            ("message.format.version".to_string(), "0.9.0".to_string()),
            ("retention.ms".to_string(), "1000".to_string()),
            ("a.future.config".to_string(), "x".to_string()),
        ];
        let known: BTreeSet<String> = ["cleanup.policy", "retention.ms", "segment.ms"]
            .into_iter()
            .map(String::from)
            .collect();
        let dropped = drop_unknown_configs(&mut configs, &known);
        assert_eq!(dropped, vec!["a.future.config", "message.format.version"]);
        assert_eq!(
            configs.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
            vec!["cleanup.policy", "retention.ms"]
        );
        assert!(why_unknown("message.format.version").contains("KIP-724"));
    }

    #[test]
    fn only_errors_a_retry_cannot_change_stop_a_creation() {
        use crate::cluster::error::Context;
        use kafka_protocol::ResponseError as E;
        let err = |e: E| {
            ClusterError::kafka(Context::new("B", "CreateTopics"), e.code(), None)
                .expect("an error code")
        };
        for e in [
            E::InvalidConfig,
            E::InvalidReplicationFactor,
            E::PolicyViolation,
        ] {
            assert!(is_permanent_creation_error(&err(e)), "{e:?}");
        }
        for e in [
            E::TopicAuthorizationFailed,
            E::NotController,
            E::RequestTimedOut,
            E::TopicAlreadyExists,
        ] {
            assert!(!is_permanent_creation_error(&err(e)), "{e:?}");
        }
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
    fn an_earlier_range_serves_only_a_start_it_cannot_make_stale() {
        let e = |next, topic| progress::Entry {
            next_offset: next,
            topic_id: id(topic),
            target_offset: -1,
            leader_epoch: -1,
        };
        // A stored position inside the range, boundaries included: the start is the position.
        for next in [5, 7, 9] {
            assert!(earlier_range_serves(Some(e(next, 1)), id(1), (5, 9), true));
            assert!(earlier_range_serves(Some(e(next, 1)), id(1), (5, 9), false));
        }
        // Past the old log end: another member copied on since; it must be read again (with
        // the old end it would look like lost records and stop or reset the partition).
        assert!(!earlier_range_serves(Some(e(10, 1)), id(1), (5, 9), true));
        // Below the log start, or of another topic: the lost-position decision needs the
        // current range.
        assert!(!earlier_range_serves(Some(e(4, 1)), id(1), (5, 9), true));
        assert!(!earlier_range_serves(Some(e(7, 2)), id(1), (5, 9), true));
        // No stored position: the earliest offset serves; the latest is the log end itself.
        assert!(earlier_range_serves(None, id(1), (5, 9), true));
        assert!(!earlier_range_serves(None, id(1), (5, 9), false));
    }

    #[test]
    fn start_positions() {
        let tp = TopicPartition::new("t", 0);
        let e = |next| progress::Entry {
            next_offset: next,
            topic_id: id(1),
            target_offset: -1,
            leader_epoch: -1,
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
        assert_eq!(
            d.grow,
            vec![Growth {
                remote: "A.grown".to_string(),
                from: 1,
                to: 3
            }]
        );
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
                for g in &d.grow {
                    prop_assert!(target[&g.remote] == g.from as usize && g.from < g.to);
                    target.insert(g.remote.clone(), g.to as usize);
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

    #[test]
    fn partitions_whose_remote_partition_is_not_shown_wait_for_the_next_pass() {
        let topic = |name: &str, n: i32| SourceTopic {
            name: name.into(),
            topic_id: [1; 16],
            partitions: (0..n).collect(),
        };
        let source = [topic("big", 5_001), topic("new", 2), topic("bad", 3)];
        let start: BTreeMap<String, Vec<i32>> = [
            ("big".to_string(), (4_998..5_001).collect()),
            ("new".to_string(), vec![0, 1]),
            ("bad".to_string(), vec![0, 1, 2]),
        ]
        .into();
        // The remote of `big` created with 5 000 partitions, its growth not shown yet; that of
        // `new` not shown at all; that of `bad` could not be created.
        let counts: BTreeMap<String, usize> = [("A.big".to_string(), 5_000)].into();
        let remote = |t: &str| format!("A.{t}");
        let (ready, waiting) =
            split_startable(&source, &start, &counts, &remote, &|t: &str| t == "bad");
        let ready: Vec<(&str, i32)> = ready.iter().map(|(t, p)| (t.name.as_str(), *p)).collect();
        assert_eq!(ready, vec![("big", 4_998), ("big", 4_999)]);
        assert_eq!(
            waiting,
            vec![
                TopicPartition::new("big", 5_000),
                TopicPartition::new("new", 0),
                TopicPartition::new("new", 1),
            ]
        );
        // Once the target shows them, they start and none waits.
        let counts: BTreeMap<String, usize> =
            [("A.big".to_string(), 5_001), ("A.new".to_string(), 2)].into();
        let (ready, waiting) = split_startable(&source, &start, &counts, &remote, &|_: &str| false);
        assert_eq!(ready.len(), 5);
        assert_eq!(
            waiting,
            (0..3)
                .map(|p| TopicPartition::new("bad", p))
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn creation_requests_stay_under_the_controllers_limit() {
        let t = |name: &str, partitions| crate::cluster::NewTopic {
            name: name.into(),
            partitions,
            replication_factor: -1,
            configs: vec![],
        };
        let shape = |rs: Vec<Vec<crate::cluster::NewTopic>>| -> Vec<Vec<(String, i32)>> {
            rs.into_iter()
                .map(|r| r.into_iter().map(|t| (t.name, t.partitions)).collect())
                .collect()
        };
        let topics = [
            t("a", 3_000),
            t("b", 2_000),
            t("c", 1),
            t("d", 12_000),
            t("e", 1),
        ];
        assert_eq!(
            shape(creation_requests(&topics, 200)),
            vec![
                vec![("a".to_string(), 3_000), ("b".into(), 2_000)],
                vec![("c".into(), 1)],
                vec![("d".into(), PARTITIONS_PER_REQUEST)],
                vec![("e".into(), 1)],
            ]
        );
        let many: Vec<_> = (0..5).map(|i| t(&i.to_string(), 1)).collect();
        assert_eq!(
            creation_requests(&many, 2).len(),
            3,
            "at most max_topics per request"
        );
        assert!(creation_requests(&[], 200).is_empty());
        assert_eq!(growth_steps(5_000, 12_000), vec![10_000, 12_000]);
        assert_eq!(growth_steps(3, 4), vec![4]);
        assert!(growth_steps(4, 4).is_empty());
    }
}
