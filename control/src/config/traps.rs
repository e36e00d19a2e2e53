//! Warnings for the MirrorMaker traps a valid file can still fall into.

use std::collections::BTreeMap;

use super::error::{ConfigWarning, Severity, WarningKind};
use super::model::{ClusterConfig, FlowConfig, Origin};
use super::resolve::{
    RawEntry, WHY_FAST_REFRESH, WHY_GROWING_FETCH, WHY_READ_COMMITTED, address_set,
};
use super::values::{java_parse_boolean, parse_bool};

pub(crate) fn add_warnings(
    raw: &BTreeMap<String, RawEntry>,
    clusters: &BTreeMap<String, ClusterConfig>,
    flows: &[FlowConfig],
    out: &mut Vec<ConfigWarning>,
) {
    let enabled: Vec<&FlowConfig> = flows.iter().filter(|f| f.enabled.value).collect();
    if enabled.is_empty() {
        out.push(ConfigWarning::new(
            Severity::Warning,
            WarningKind::NoReplication,
            None,
            None,
            "no flow replicates records: MirrorMaker enables none by default; enable one with `<source>-><target>.enabled = true`",
        ));
    }
    heartbeats_only(flows, out);
    replication_factor(&enabled, out);
    identity_cycles(&enabled, out);
    same_cluster(clusters, &enabled, out);
    offset_lag_max(&enabled, out);
    group_offset_sync(&enabled, out);
    checkpoints_off(&enabled, out);
    let aliases: Vec<&str> = clusters.keys().map(String::as_str).collect();
    flow_producer_keys(raw, &aliases, out);
    mm2_boolean_parsing(raw, &aliases, out);
    top_level_enabled(raw, out);
    strait_defaults(&enabled, out);
    exactly_once(&enabled, out);
}

/// What exactly-once forwarding changes, and what it needs, per flow that has it.
fn exactly_once(enabled: &[&FlowConfig], out: &mut Vec<ConfigWarning>) {
    for f in enabled.iter().filter(|f| f.exactly_once.value) {
        let (s, t) = (&f.source, &f.target);
        let interval = f.transaction_boundary_interval_ms.value;
        let timeout = f.clients.target_producer.transaction_timeout_ms.value;
        out.push(ConfigWarning::new(
            Severity::Note,
            WarningKind::ExactlyOnce,
            Some("exactly.once.source.support"),
            match &f.exactly_once.origin {
                Origin::File { line, .. } => Some(*line),
                _ => None,
            },
            format!(
                "{s}->{t} forwards exactly-once: each source partition is copied inside transactions on {t} that also hold its progress (transactional id `strait-eos:{s}->{t}:<topic>:<partition>`, one commit per partition every transaction.boundary.interval.ms = {interval} ms, each transaction aborted by {t} if open for transaction.timeout.ms = {timeout} ms), so read_committed consumers of {t} see each record once, also after a crash; read_uncommitted consumers may also see records of aborted transactions; the principal on {t} needs WRITE and DESCRIBE on the transactional ids with prefix `strait-eos:{s}->{t}:`"
            ),
        ));
    }
}

/// MirrorMaker runs a heartbeat-only flow for every pair by default, so a one-way setup
/// still writes into its source cluster.
fn heartbeats_only(flows: &[FlowConfig], out: &mut Vec<ConfigWarning>) {
    for f in flows
        .iter()
        .filter(|f| f.heartbeats_only && f.emit_heartbeats_enabled.value)
    {
        out.push(ConfigWarning::new(
            Severity::Note,
            WarningKind::HeartbeatsOnly,
            Some(&format!("{}.emit.heartbeats.enabled", f.name())),
            None,
            format!(
                "flow {} replicates nothing but writes heartbeats into `{}` (as MirrorMaker does by default); set `{}.emit.heartbeats.enabled = false` if `{}` must not be written to",
                f.name(),
                f.target,
                f.name(),
                f.target
            ),
        ));
    }
}

fn flow_names(flows: &[&FlowConfig]) -> String {
    flows
        .iter()
        .map(|f| f.name())
        .collect::<Vec<_>>()
        .join(", ")
}

fn replication_factor(enabled: &[&FlowConfig], out: &mut Vec<ConfigWarning>) {
    let at_default: Vec<&FlowConfig> = enabled
        .iter()
        .copied()
        .filter(|f| f.replication_factor.origin == Origin::MirrorMakerDefault)
        .collect();
    if !at_default.is_empty() {
        out.push(ConfigWarning::new(
            Severity::Warning,
            WarningKind::ReplicationFactorDefault,
            Some("replication.factor"),
            None,
            format!(
                "{} create remote topics with MirrorMaker's default replication.factor=2: one broker loss from unavailable; set it (3 is usual, -1 takes the target broker's default)",
                flow_names(&at_default)
            ),
        ));
    }
}

/// A topic that passes both flows' filters proves they overlap; literal list elements and a
/// few everyday names are tried.
fn overlap_witness(a: &FlowConfig, b: &FlowConfig) -> Option<String> {
    let mut probes: Vec<String> = a
        .topics
        .value
        .iter()
        .chain(b.topics.value.iter())
        .filter(|t| {
            !t.is_empty()
                && t.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
        })
        .cloned()
        .collect();
    for p in ["orders", "events", "test", "topic", "a"] {
        probes.push(p.to_string());
    }
    probes.into_iter().find(|t| {
        a.topic_filter.should_replicate_topic(t) && b.topic_filter.should_replicate_topic(t)
    })
}

fn identity_cycles(enabled: &[&FlowConfig], out: &mut Vec<ConfigWarning>) {
    for (i, a) in enabled.iter().enumerate() {
        for b in &enabled[i + 1..] {
            if a.source != b.target || a.target != b.source {
                continue;
            }
            if !(a.replication_policy.is_identity() || b.replication_policy.is_identity()) {
                continue;
            }
            let (severity, detail) = match overlap_witness(a, b) {
                Some(t) => (
                    Severity::Warning,
                    format!("topic `{t}` passes both flows' filters, so it would be copied back and forth forever"),
                ),
                None => (
                    Severity::Note,
                    "strait could not prove the two topic filters disjoint; make sure no topic passes both".to_string(),
                ),
            };
            out.push(ConfigWarning::new(
                severity,
                WarningKind::IdentityCycle,
                Some("replication.policy.class"),
                None,
                format!(
                    "{} and {} use IdentityReplicationPolicy, which keeps topic names, so replication cycles cannot be detected: {detail}",
                    a.name(),
                    b.name()
                ),
            ));
        }
    }
}

fn same_cluster(
    clusters: &BTreeMap<String, ClusterConfig>,
    enabled: &[&FlowConfig],
    out: &mut Vec<ConfigWarning>,
) {
    let mut used: Vec<&str> = Vec::new();
    for f in enabled {
        for a in [f.source.as_str(), f.target.as_str()] {
            if !used.contains(&a) {
                used.push(a);
            }
        }
    }
    for (i, a) in used.iter().enumerate() {
        for b in &used[i + 1..] {
            let (Some(ca), Some(cb)) = (clusters.get(*a), clusters.get(*b)) else {
                continue;
            };
            let (Some(sa), Some(sb)) = (&ca.bootstrap_servers, &cb.bootstrap_servers) else {
                continue;
            };
            let shared: Vec<String> = address_set(&sa.value)
                .intersection(&address_set(&sb.value))
                .cloned()
                .collect();
            if shared.is_empty() {
                continue;
            }
            let involved: Vec<&FlowConfig> = enabled
                .iter()
                .copied()
                .filter(|f| {
                    [a, b].contains(&&f.source.as_str()) || [a, b].contains(&&f.target.as_str())
                })
                .collect();
            out.push(ConfigWarning::new(
                Severity::Warning,
                WarningKind::SameCluster,
                Some(&format!("{b}.bootstrap.servers")),
                match &sb.origin {
                    Origin::File { line, .. } => Some(*line),
                    _ => None,
                },
                format!(
                    "aliases `{a}` and `{b}` share broker {} and look like the same cluster; flows {} would replicate it onto itself or copy the same topics twice",
                    shared.join(", "),
                    flow_names(&involved)
                ),
            ));
        }
    }
}

fn offset_lag_max(enabled: &[&FlowConfig], out: &mut Vec<ConfigWarning>) {
    let mut by_value: BTreeMap<u64, Vec<&FlowConfig>> = BTreeMap::new();
    for f in enabled {
        by_value.entry(f.offset_lag_max.value).or_default().push(f);
    }
    for (v, fs) in by_value {
        let (severity, what) = match v {
            0 => (
                Severity::Warning,
                "every replicated record then writes an offset sync, which costs a produce per record on the offset-syncs topic".to_string(),
            ),
            1..=100 => (
                Severity::Note,
                format!("MirrorMaker readers of the offset syncs translate a group to at most the last sync + 1, so after a failover its consumers may re-read up to {v} records per partition"),
            ),
            _ => (
                Severity::Warning,
                format!("MirrorMaker readers of the offset syncs translate a group to at most the last sync + 1, so after a failover its consumers may re-read up to {v} records per partition (MM2's default is 100)"),
            ),
        };
        out.push(ConfigWarning::new(
            severity,
            WarningKind::OffsetLagMax,
            Some("offset.lag.max"),
            None,
            format!("offset.lag.max={v} for {}: {what}; strait's own checkpoints stay exact within its retained mapping window", flow_names(&fs)),
        ));
    }
}

fn group_offset_sync(enabled: &[&FlowConfig], out: &mut Vec<ConfigWarning>) {
    let off: Vec<&FlowConfig> = enabled
        .iter()
        .copied()
        .filter(|f| !f.sync_group_offsets_enabled.value && f.emit_checkpoints_enabled.value)
        .collect();
    if !off.is_empty() {
        out.push(ConfigWarning::new(
            Severity::Warning,
            WarningKind::GroupOffsetSyncDisabled,
            Some("sync.group.offsets.enabled"),
            None,
            format!(
                "sync.group.offsets.enabled is false for {}: consumer groups get checkpoints but no committed offsets on the target, so after a failover they need RemoteClusterUtils.translateOffsets or fall back to auto.offset.reset",
                flow_names(&off)
            ),
        ));
    }
}

fn checkpoints_off(enabled: &[&FlowConfig], out: &mut Vec<ConfigWarning>) {
    for f in enabled {
        let reason = if !f.emit_checkpoints_enabled.value {
            Some("emit.checkpoints.enabled=false")
        } else if !f.emit_offset_syncs_enabled.value {
            Some("emit.offset-syncs.enabled=false")
        } else {
            None
        };
        if let Some(r) = reason {
            out.push(ConfigWarning::new(
                Severity::Warning,
                WarningKind::CheckpointsOff,
                Some(&format!("{}.{}", f.name(), r.split('=').next().unwrap_or(r))),
                None,
                format!(
                    "{}: with {r} MirrorMaker refuses to start its checkpoint connector; strait runs the flow without checkpoints or group offset sync",
                    f.name()
                ),
            ));
        }
    }
}

/// `A->B.producer.*` looks like the data producer's settings but, in MirrorMaker, only
/// reaches the offset-syncs producer.
fn pairs<'a>(aliases: &'a [&'a str]) -> impl Iterator<Item = (&'a str, &'a str)> + 'a {
    aliases
        .iter()
        .flat_map(move |s| aliases.iter().map(move |t| (*s, *t)))
        .filter(|(s, t)| s != t)
}

fn flow_producer_keys(
    raw: &BTreeMap<String, RawEntry>,
    aliases: &[&str],
    out: &mut Vec<ConfigWarning>,
) {
    for (src, tgt) in pairs(aliases) {
        let flow = format!("{src}->{tgt}");
        let prefix = format!("{flow}.producer.");
        for (k, e) in raw.range(prefix.clone()..) {
            let Some(sub) = k.strip_prefix(&prefix) else {
                break;
            };
            if sub.starts_with("override.") {
                continue;
            }
            out.push(ConfigWarning::new(
                Severity::Warning,
                WarningKind::WideEffect,
                Some(k),
                Some(e.line),
                format!(
                    "in MirrorMaker `{flow}.producer.{sub}` configures only the offset-syncs producer; records are written by the worker's producer (`{tgt}.producer.{sub}` or `{flow}.producer.override.{sub}`). strait follows MirrorMaker"
                ),
            ));
        }
    }
}

/// MirrorMaker decides which flows run with `Boolean.parseBoolean`, which reads `true ` (a
/// trailing blank) as false, while the connectors trim.
fn mm2_boolean_parsing(
    raw: &BTreeMap<String, RawEntry>,
    aliases: &[&str],
    out: &mut Vec<ConfigWarning>,
) {
    let mut switches = vec!["emit.heartbeats.enabled".to_string()];
    for (src, tgt) in pairs(aliases) {
        switches.push(format!("{src}->{tgt}.enabled"));
        switches.push(format!("{src}->{tgt}.emit.heartbeats.enabled"));
    }
    for k in switches {
        let Some(e) = raw.get(&k) else { continue };
        if let Ok(b) = parse_bool(&e.value)
            && b != java_parse_boolean(&e.value)
        {
            out.push(ConfigWarning::new(
                Severity::Warning,
                WarningKind::Mm2Parsing,
                Some(&k),
                Some(e.line),
                "MirrorMaker decides which flows to run with Boolean.parseBoolean, which reads this value (blanks around `true`) as false; remove the blanks",
            ));
        }
    }
}

fn top_level_enabled(raw: &BTreeMap<String, RawEntry>, out: &mut Vec<ConfigWarning>) {
    if let Some(e) = raw.get("enabled")
        && parse_bool(&e.value) == Ok(true)
    {
        out.push(ConfigWarning::new(
            Severity::Warning,
            WarningKind::WideEffect,
            Some("enabled"),
            Some(e.line),
            "a top-level `enabled=true` enables replication on every pair of clusters that has a flow (every pair, while heartbeats are on); enable flows one by one with `<source>-><target>.enabled=true`",
        ));
    }
}

fn strait_defaults(enabled: &[&FlowConfig], out: &mut Vec<ConfigWarning>) {
    let strait = |o: &Origin| matches!(o, Origin::StraitDefault { .. });
    let mut note = |any: bool, key: &'static str, text: String| {
        if any {
            out.push(ConfigWarning::new(
                Severity::Note,
                WarningKind::StraitDefault,
                Some(key),
                None,
                text,
            ));
        }
    };
    note(
        enabled
            .iter()
            .any(|f| strait(&f.clients.source_consumer.isolation_level.origin)),
        "isolation.level",
        format!(
            "source consumers use isolation.level=read_committed (MirrorMaker: read_uncommitted): {WHY_READ_COMMITTED}; set `<source>.consumer.isolation.level=read_uncommitted` for MirrorMaker's behaviour"
        ),
    );
    note(
        enabled
            .iter()
            .any(|f| strait(&f.clients.source_consumer.max_partition_fetch_bytes.origin)),
        "max.partition.fetch.bytes",
        format!(
            "max.partition.fetch.bytes is not set (MirrorMaker: a fixed 1048576): {WHY_GROWING_FETCH}"
        ),
    );
    note(
        enabled.iter().any(|f| {
            strait(&f.refresh_topics_interval_seconds.origin)
                || strait(&f.refresh_groups_interval_seconds.origin)
        }),
        "refresh.topics.interval.seconds",
        format!(
            "refresh.topics.interval.seconds and refresh.groups.interval.seconds default to 10 (MirrorMaker: 600): {WHY_FAST_REFRESH}"
        ),
    );
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::config::{ConfigWarning, Mm2Config, Severity, StaticEnv, WarningKind, load_with};

    fn load(text: &str) -> Mm2Config {
        let env = StaticEnv::new().file("/m.properties", text);
        match load_with(Path::new("/m.properties"), &env) {
            Ok(c) => c,
            Err(e) => panic!("{e}"),
        }
    }

    fn of(c: &Mm2Config, kind: WarningKind) -> Vec<&ConfigWarning> {
        c.warnings.iter().filter(|w| w.kind == kind).collect()
    }

    const TWO_WAY: &str = "clusters = A, B\nA.bootstrap.servers = a:1\nB.bootstrap.servers = b:1\nA->B.enabled = true\nB->A.enabled = true\nreplication.factor = 3\n";

    #[test]
    fn identity_policy_both_ways() {
        let c = load(&format!(
            "{TWO_WAY}replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy\nA->B.topics = orders, payments\nB->A.topics = orders.*\n"
        ));
        let w = of(&c, WarningKind::IdentityCycle);
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].severity, Severity::Warning);
        assert!(w[0].message.contains("`orders`"), "{}", w[0].message);
        // Disjoint literal filters cannot be proven disjoint in general: a note only.
        let c = load(&format!(
            "{TWO_WAY}replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy\nA->B.topics = a-.*\nB->A.topics = b-.*\n"
        ));
        let w = of(&c, WarningKind::IdentityCycle);
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].severity, Severity::Note);
        // The default policy detects cycles: nothing to say.
        assert!(of(&load(TWO_WAY), WarningKind::IdentityCycle).is_empty());
    }

    #[test]
    fn exactly_once_says_what_it_changes_per_target() {
        let c = load(&format!(
            "{TWO_WAY}B.exactly.once.source.support = enabled\n"
        ));
        let w = of(&c, WarningKind::ExactlyOnce);
        assert_eq!(w.len(), 1, "only A->B goes into B");
        assert_eq!(w[0].line, Some(7));
        assert!(
            w[0].message.contains("`strait-eos:A->B:`"),
            "{}",
            w[0].message
        );
        assert!(
            w[0].message
                .contains("transaction.boundary.interval.ms = 1000 ms")
                && w[0].message.contains("transaction.timeout.ms = 60000 ms"),
            "{}",
            w[0].message
        );
        let c = load(&format!(
            "{TWO_WAY}B.exactly.once.source.support = enabled\nA->B.transaction.boundary.interval.ms = 250\nB.producer.transaction.timeout.ms = 5000\n"
        ));
        let w = of(&c, WarningKind::ExactlyOnce);
        assert!(
            w[0].message.contains("= 250 ms") && w[0].message.contains("= 5000 ms"),
            "{}",
            w[0].message
        );
        assert!(of(&load(TWO_WAY), WarningKind::ExactlyOnce).is_empty());
        // MM2's first step of a rolling upgrade is not exactly-once.
        let c = load(&format!(
            "{TWO_WAY}B.exactly.once.source.support = preparing\n"
        ));
        assert!(of(&c, WarningKind::ExactlyOnce).is_empty());
    }

    #[test]
    fn two_aliases_for_one_cluster() {
        let c = load(
            "clusters = A, A2, B\nA.bootstrap.servers = kafka-1:9092, kafka-2:9092\nA2.bootstrap.servers = KAFKA-2:9092\nB.bootstrap.servers = b:1\nA->B.enabled = true\nA2->B.enabled = true\nreplication.factor = 3\n",
        );
        let w = of(&c, WarningKind::SameCluster);
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].line, Some(3));
        assert!(w[0].message.contains("kafka-2:9092"), "{}", w[0].message);
        // Only aliases used by replicating flows count.
        let c = load(
            "clusters = A, A2, B\nA.bootstrap.servers = k:1\nA2.bootstrap.servers = k:1\nB.bootstrap.servers = b:1\nA->B.enabled = true\nreplication.factor = 3\n",
        );
        assert!(of(&c, WarningKind::SameCluster).is_empty());
    }

    #[test]
    fn replication_factor_and_group_sync() {
        let c = load(
            "clusters = A, B\nA.bootstrap.servers = a:1\nB.bootstrap.servers = b:1\nA->B.enabled = true\n",
        );
        assert_eq!(of(&c, WarningKind::ReplicationFactorDefault).len(), 1);
        assert_eq!(of(&c, WarningKind::GroupOffsetSyncDisabled).len(), 1);
        let c = load(&format!("{TWO_WAY}sync.group.offsets.enabled = true\n"));
        assert!(of(&c, WarningKind::ReplicationFactorDefault).is_empty());
        assert!(of(&c, WarningKind::GroupOffsetSyncDisabled).is_empty());
    }

    #[test]
    fn offset_lag_max() {
        let c = load(&format!(
            "{TWO_WAY}A->B.offset.lag.max = 5000\nB->A.offset.lag.max = 0\n"
        ));
        let w = of(&c, WarningKind::OffsetLagMax);
        let sev: Vec<(Severity, bool)> = w
            .iter()
            .map(|w| (w.severity, w.message.contains("5000")))
            .collect();
        assert_eq!(
            sev,
            vec![(Severity::Warning, false), (Severity::Warning, true)]
        );
        let c = load(TWO_WAY);
        assert_eq!(
            of(&c, WarningKind::OffsetLagMax)[0].severity,
            Severity::Note
        );
    }

    #[test]
    fn checkpoints_off_and_mm2_parsing() {
        let c = load(&format!(
            "{TWO_WAY}A->B.emit.checkpoints.enabled = false\nemit.heartbeats.enabled = true \n"
        ));
        let w = of(&c, WarningKind::CheckpointsOff);
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].key.as_deref(), Some("A->B.emit.checkpoints.enabled"));
        let w = of(&c, WarningKind::Mm2Parsing);
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].line, Some(8));
    }

    #[test]
    fn nothing_replicates_and_heartbeat_only_flows() {
        let c = load("clusters = A, B\nA.bootstrap.servers = a:1\nB.bootstrap.servers = b:1\n");
        assert_eq!(of(&c, WarningKind::NoReplication).len(), 1);
        assert_eq!(of(&c, WarningKind::HeartbeatsOnly).len(), 2);
        let c = load(TWO_WAY);
        assert!(of(&c, WarningKind::NoReplication).is_empty());
        assert!(of(&c, WarningKind::HeartbeatsOnly).is_empty());
    }

    #[test]
    fn top_level_enabled_is_wide() {
        let c = load(
            "clusters = A, B, C\nA.bootstrap.servers = a:1\nB.bootstrap.servers = b:1\nC.bootstrap.servers = c:1\nenabled = true\nreplication.factor = 3\n",
        );
        // Every pair replicates, as in MirrorMaker.
        assert_eq!(c.enabled_flows().count(), 6);
        let w = of(&c, WarningKind::WideEffect);
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].line, Some(5));
    }
}
