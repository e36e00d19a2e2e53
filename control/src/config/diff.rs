//! What a configuration reload changes: a pure comparison of the running configuration with a
//! newly validated one, as a [`ReloadPlan`].
//!
//! Values are compared, never their origins: moving a line or adding a comment changes
//! nothing. Per flow:
//! - a changed client (any property of any of its clients, their connection settings) restarts
//!   the flow's partitions, and names the cluster the client talks to, so that a change of one
//!   cluster's settings restarts only the flows that use it;
//! - a changed replication policy or offset-syncs topic (where strait writes) restarts it too;
//! - filters, intervals, groups, `offset.lag.max` and the other duty settings are taken in
//!   place: the partitions go on with their connections and producer state.
//!
//! Flows enabled in the new file and not running are added; running flows that are disabled
//! or gone are removed. strait's own settings (`strait.*`: shards, the API, the memory budget,
//! metrics, health, the group...) are read at start: the key table says so for each
//! ([`super::keys::Reload`]), and a change of one is refused with its name and reason.
#![deny(clippy::disallowed_methods)]

use std::collections::BTreeSet;

use serde::Serialize;

use super::keys::{Reload, STRAIT_KEYS};
use super::model::{ClientConfig, FlowConfig, Mm2Config, StraitSettings};

/// The changes of one flow.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FlowChange {
    /// `source->target`.
    pub flow: String,
    /// What changed: MirrorMaker key names; for clients `<role> on <cluster>: <key>`.
    pub keys: Vec<String>,
    /// The clusters whose client settings changed (restarts only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub clusters: Vec<String>,
}

/// What a reload does, computed by [`diff`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ReloadPlan {
    /// Flows that start replicating.
    pub added: Vec<String>,
    /// Flows that stop (their progress is flushed).
    pub removed: Vec<String>,
    /// Flows whose partitions restart with new client settings.
    pub restarted: Vec<FlowChange>,
    /// Flows whose duties take new settings while their partitions go on.
    pub updated: Vec<FlowChange>,
    /// Herder pairs whose heartbeat settings changed (the heartbeat duty restarts).
    pub heartbeats: Vec<FlowChange>,
    /// Keys that changed but are fixed until strait restarts: the reload is refused.
    pub refused: Vec<Refused>,
}

/// A changed key a reload cannot apply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Refused {
    /// The key.
    pub key: String,
    /// Why (from the key table, [`Reload::Refused`]).
    pub reason: &'static str,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.key, self.reason)
    }
}

impl ReloadPlan {
    /// Whether the new configuration changes nothing.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty()
            && self.removed.is_empty()
            && self.restarted.is_empty()
            && self.updated.is_empty()
            && self.heartbeats.is_empty()
            && self.refused.is_empty()
    }

    /// One line for the log: every flow and key named, no value.
    pub fn summary(&self) -> String {
        if self.is_empty() {
            return "nothing changed".into();
        }
        let changes = |v: &[FlowChange]| {
            v.iter()
                .map(|c| format!("{} ({})", c.flow, c.keys.join(", ")))
                .collect::<Vec<_>>()
                .join("; ")
        };
        let mut parts = Vec::new();
        for (what, text) in [
            ("added", self.added.join(", ")),
            ("removed", self.removed.join(", ")),
            ("restarted", changes(&self.restarted)),
            ("updated", changes(&self.updated)),
            ("heartbeats", changes(&self.heartbeats)),
            (
                "refused",
                self.refused
                    .iter()
                    .map(Refused::to_string)
                    .collect::<Vec<_>>()
                    .join(", "),
            ),
        ] {
            if !text.is_empty() {
                parts.push(format!("{what}: {text}"));
            }
        }
        parts.join("; ")
    }
}

/// Compares the running configuration `old` with the validated `new` one.
pub fn diff(old: &Mm2Config, new: &Mm2Config) -> ReloadPlan {
    let mut plan = ReloadPlan {
        refused: strait_changes(&old.strait, &new.strait),
        ..ReloadPlan::default()
    };
    let enabled =
        |c: &Mm2Config| -> BTreeSet<String> { c.enabled_flows().map(|f| f.name()).collect() };
    let (was, is) = (enabled(old), enabled(new));
    plan.added = is.difference(&was).cloned().collect();
    plan.removed = was.difference(&is).cloned().collect();
    for f in new.enabled_flows() {
        let Some(o) = old.flow(&f.source, &f.target).filter(|o| o.enabled.value) else {
            continue;
        };
        let (keys, clusters) = restart_changes(o, f);
        let in_place = changed(&in_place_fields(o), &in_place_fields(f));
        if !keys.is_empty() {
            let mut keys = keys;
            keys.extend(in_place);
            plan.restarted.push(FlowChange {
                flow: f.name(),
                keys,
                clusters,
            });
        } else if !in_place.is_empty() {
            plan.updated.push(FlowChange {
                flow: f.name(),
                keys: in_place,
                clusters: Vec::new(),
            });
        }
    }
    for f in &new.flows {
        let before = old.flow(&f.source, &f.target);
        let keys = match before {
            // Off before and after: nothing to restart.
            Some(o) if !o.emit_heartbeats_enabled.value && !f.emit_heartbeats_enabled.value => {
                Vec::new()
            }
            Some(o) => changed(&heartbeat_fields(o), &heartbeat_fields(f)),
            None if f.emit_heartbeats_enabled.value => vec!["emit.heartbeats.enabled".into()],
            None => Vec::new(),
        };
        if !keys.is_empty() {
            plan.heartbeats.push(FlowChange {
                flow: f.name(),
                keys,
                clusters: Vec::new(),
            });
        }
    }
    for f in old
        .flows
        .iter()
        .filter(|f| new.flow(&f.source, &f.target).is_none())
    {
        if f.emit_heartbeats_enabled.value {
            plan.heartbeats.push(FlowChange {
                flow: f.name(),
                keys: vec!["emit.heartbeats.enabled".into()],
                clusters: Vec::new(),
            });
        }
    }
    plan
}

/// `(key, value)` pairs; a value is compared as its `Debug` text.
type Fields = Vec<(&'static str, String)>;

/// The keys whose values differ between two field lists (a key missing on one side counts).
fn changed(old: &Fields, new: &Fields) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (k, v) in new {
        if old.iter().find(|(ok, _)| ok == k).map(|(_, ov)| ov) != Some(v) {
            out.push((*k).to_string());
        }
    }
    for (k, _) in old {
        if !new.iter().any(|(nk, _)| nk == k) && !out.iter().any(|o| o == k) {
            out.push((*k).to_string());
        }
    }
    out
}

macro_rules! fields {
    ($f:expr; $($key:literal => $field:ident),* $(,)?) => {
        vec![$(($key, format!("{:?}", $f.$field.value))),*]
    };
}

/// The flow settings its duties take in place.
fn in_place_fields(f: &FlowConfig) -> Fields {
    let mut out = fields!(f;
        "topics" => topics,
        "topics.exclude" => topics_exclude,
        "groups" => groups,
        "groups.exclude" => groups_exclude,
        "config.properties.exclude" => config_properties_exclude,
        "use.defaults.from" => use_defaults_from,
        "replication.factor" => replication_factor,
        "refresh.topics.enabled" => refresh_topics_enabled,
        "refresh.topics.interval.seconds" => refresh_topics_interval_seconds,
        "sync.topic.configs.enabled" => sync_topic_configs_enabled,
        "sync.topic.configs.interval.seconds" => sync_topic_configs_interval_seconds,
        "sync.topic.acls.enabled" => sync_topic_acls_enabled,
        "sync.topic.acls.interval.seconds" => sync_topic_acls_interval_seconds,
        "refresh.groups.enabled" => refresh_groups_enabled,
        "refresh.groups.interval.seconds" => refresh_groups_interval_seconds,
        "offset.lag.max" => offset_lag_max,
        "emit.checkpoints.enabled" => emit_checkpoints_enabled,
        "emit.checkpoints.interval.seconds" => emit_checkpoints_interval_seconds,
        "sync.group.offsets.enabled" => sync_group_offsets_enabled,
        "sync.group.offsets.interval.seconds" => sync_group_offsets_interval_seconds,
        "heartbeats.replication.enabled" => heartbeats_replication_enabled,
        "admin.timeout.ms" => admin_timeout_ms,
        "offset.flush.interval.ms" => offset_flush_interval_ms,
        "offset.storage.topic" => mm2_offsets_topic,
    );
    // For progress topics created from then on (a flow added later), as replication.factor is
    // for remote topics. Only MM2's key: strait.progress.topic.replication.factor is refused.
    let rf = &f.progress_topic_replication_factor;
    out.push((
        "offset.storage.replication.factor",
        format!(
            "{:?}",
            matches!(rf.origin, super::model::Origin::FromKey { .. }).then_some(rf.value)
        ),
    ));
    out
}

/// The settings of a herder pair's heartbeats.
fn heartbeat_fields(f: &FlowConfig) -> Fields {
    let mut out = fields!(f;
        "emit.heartbeats.enabled" => emit_heartbeats_enabled,
        "emit.heartbeats.interval.seconds" => emit_heartbeats_interval_seconds,
        "heartbeats.topic.replication.factor" => heartbeats_topic_replication_factor,
    );
    // The target admin client writes them.
    out.extend(client_fields(&f.clients.target_admin.client));
    out
}

/// The flow settings that restart its partitions when they change, besides its clients.
fn restart_fields(f: &FlowConfig) -> Fields {
    let mut out = fields!(f;
        "replication.policy.class" => replication_policy_class,
        "replication.policy.separator" => replication_policy_separator,
        "offset-syncs.topic.location" => offset_syncs_topic_location,
        "emit.offset-syncs.enabled" => emit_offset_syncs_enabled,
        "offset-syncs.topic.replication.factor" => offset_syncs_topic_replication_factor,
        "checkpoints.topic.replication.factor" => checkpoints_topic_replication_factor,
        // The flow's runtime holds its partitions' transactions, or none.
        "exactly.once.source.support" => exactly_once,
        "transaction.boundary.interval.ms" => transaction_boundary_interval_ms,
    );
    out.push((
        "transaction.timeout.ms",
        format!(
            "{:?}",
            f.clients.target_producer.transaction_timeout_ms.value
        ),
    ));
    out.push((
        "replication.policy.*",
        format!("{:?}", f.replication_policy),
    ));
    out
}

/// A client's comparable settings: every property (secrets too: only the key is ever
/// reported), the bootstrap servers and the connection settings built from them.
fn client_fields(c: &ClientConfig) -> Vec<(&'static str, String)> {
    vec![
        ("bootstrap.servers", format!("{:?}", c.bootstrap_servers)),
        ("client.id", c.client_id.value.clone()),
        ("request.timeout.ms", c.request_timeout_ms.value.to_string()),
        ("connection settings", format!("{:?}", c.conn)),
    ]
}

/// The property keys whose values differ between two clients.
fn property_changes(old: &ClientConfig, new: &ClientConfig) -> Vec<String> {
    let keys: BTreeSet<&String> = old
        .properties
        .0
        .keys()
        .chain(new.properties.0.keys())
        .collect();
    keys.into_iter()
        .filter(|k| old.properties.get(k) != new.properties.get(k))
        .cloned()
        .collect()
}

/// What changed in a flow that restarts its partitions, and the clusters of the changed
/// clients.
fn restart_changes(old: &FlowConfig, new: &FlowConfig) -> (Vec<String>, Vec<String>) {
    let mut keys = changed(&restart_fields(old), &restart_fields(new));
    let mut clusters: Vec<String> = Vec::new();
    for (o, n) in clients(old).into_iter().zip(clients(new)) {
        let mut ks = property_changes(o, n);
        for k in changed(&client_fields(o), &client_fields(n)) {
            if !ks.contains(&k) {
                ks.push(k);
            }
        }
        if ks.is_empty() {
            continue;
        }
        // A cluster renamed in the file is another cluster: both are named.
        for c in [&o.cluster, &n.cluster] {
            if !clusters.contains(c) {
                clusters.push(c.clone());
            }
        }
        keys.extend(
            ks.into_iter()
                .map(|k| format!("{} on {}: {k}", n.role.name(), n.cluster)),
        );
    }
    (keys, clusters)
}

/// Every client of a flow, in a fixed order.
fn clients(f: &FlowConfig) -> [&ClientConfig; 8] {
    let c = &f.clients;
    [
        &c.source_consumer.client,
        &c.source_admin.client,
        &c.target_producer.client,
        &c.target_admin.client,
        &c.target_consumer.client,
        &c.offset_syncs_producer.client,
        &c.offset_syncs_consumer.client,
        &c.offset_syncs_admin.client,
    ]
}

/// strait's own settings that differ and that a reload cannot apply, from the key table: every
/// `strait.*` key says what a reload does with it ([`Reload`]). A key marked
/// [`Reload::Applied`] must be applied by `run::reload` and named in the plan; none is today,
/// and `every_strait_key_is_refused_or_applied` fails for one that is not.
fn strait_changes(old: &StraitSettings, new: &StraitSettings) -> Vec<Refused> {
    STRAIT_KEYS
        .iter()
        .filter(|d| old.compared(d.name) != new.compared(d.name))
        .filter_map(|d| match d.reload {
            Reload::Refused(reason) => Some(Refused {
                key: d.name.to_string(),
                reason,
            }),
            Reload::Applied => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::config::{StaticEnv, load_with};

    fn load(text: &str) -> Mm2Config {
        let env = StaticEnv::new().file("/cfg/mm2.properties", text);
        load_with(Path::new("/cfg/mm2.properties"), &env).expect("valid config")
    }

    /// Flows A->B and C->B, both from the same base.
    const BASE: &str = "clusters = A, B, C\n\
        A.bootstrap.servers = a:9092\n\
        B.bootstrap.servers = b:9092\n\
        C.bootstrap.servers = c:9092\n\
        A->B.enabled = true\n\
        A->B.topics = orders\n\
        C->B.enabled = true\n\
        replication.factor = 1\n";

    fn names(v: &[FlowChange]) -> Vec<&str> {
        v.iter().map(|c| c.flow.as_str()).collect()
    }

    #[test]
    fn moving_lines_and_comments_changes_nothing() {
        let old = load(BASE);
        let new = load(&format!("# a comment\n\n{}", BASE.replace("\n", "\n\n")));
        let plan = diff(&old, &new);
        assert!(plan.is_empty(), "{plan:?}");
        assert_eq!(plan.summary(), "nothing changed");
    }

    #[test]
    fn filters_and_intervals_are_taken_in_place() {
        let old = load(BASE);
        let new = load(&format!(
            "{BASE}A->B.topics = orders, payments\nrefresh.topics.interval.seconds = 5\n"
        ));
        let plan = diff(&old, &new);
        assert!(
            plan.restarted.is_empty() && plan.refused.is_empty(),
            "{plan:?}"
        );
        assert_eq!(names(&plan.updated), vec!["A->B", "C->B"]);
        assert_eq!(
            plan.updated[0].keys,
            vec!["topics", "refresh.topics.interval.seconds"]
        );
        assert_eq!(
            plan.updated[1].keys,
            vec!["refresh.topics.interval.seconds"]
        );
    }

    #[test]
    fn a_cluster_change_restarts_only_the_flows_that_use_it() {
        let old = load(BASE);
        let new = load(&BASE.replace(
            "C.bootstrap.servers = c:9092",
            "C.bootstrap.servers = c2:9092",
        ));
        let plan = diff(&old, &new);
        assert_eq!(names(&plan.restarted), vec!["C->B"]);
        assert_eq!(plan.restarted[0].clusters, vec!["C"]);
        assert!(
            plan.restarted[0]
                .keys
                .contains(&"replication-consumer on C: bootstrap.servers".to_string()),
            "{plan:?}"
        );
        assert!(plan.updated.is_empty() && plan.added.is_empty(), "{plan:?}");
        // A consumer setting of the source cluster A.
        let new = load(&format!("{BASE}A.consumer.fetch.min.bytes = 1000\n"));
        let plan = diff(&old, &new);
        assert_eq!(names(&plan.restarted), vec!["A->B"]);
        // Every consumer of A takes it, the offset-syncs consumer too.
        assert_eq!(
            plan.restarted[0].keys,
            vec![
                "replication-consumer on A: fetch.min.bytes",
                "offset-syncs-source-consumer on A: fetch.min.bytes"
            ]
        );
        assert_eq!(plan.restarted[0].clusters, vec!["A"]);
    }

    #[test]
    fn a_secret_change_is_named_never_shown() {
        let old = load(&format!(
            "{BASE}B.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required username=\"u\" password=\"one\";\nB.security.protocol = SASL_PLAINTEXT\nB.sasl.mechanism = PLAIN\n"
        ));
        let new = load(&format!(
            "{BASE}B.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required username=\"u\" password=\"two\";\nB.security.protocol = SASL_PLAINTEXT\nB.sasl.mechanism = PLAIN\n"
        ));
        let plan = diff(&old, &new);
        // B is the target of both flows.
        assert_eq!(names(&plan.restarted), vec!["A->B", "C->B"]);
        let text = format!("{plan:?} {}", plan.summary());
        assert!(text.contains("sasl.jaas.config"), "{text}");
        assert!(!text.contains("two") && !text.contains("one\""), "{text}");
    }

    #[test]
    fn flows_are_added_and_removed() {
        let old = load(BASE);
        let new = load(&format!(
            "{BASE}C->B.enabled = false\nA->C.enabled = true\n"
        ));
        let plan = diff(&old, &new);
        assert_eq!(plan.added, vec!["A->C"]);
        assert_eq!(plan.removed, vec!["C->B"]);
        assert!(
            plan.restarted.is_empty() && plan.updated.is_empty(),
            "{plan:?}"
        );
    }

    #[test]
    fn strait_settings_are_refused_by_name() {
        let old = load(BASE);
        let new = load(&format!(
            "{BASE}strait.shards = 3\nstrait.api.listen = 127.0.0.1:9999\nA->B.topics = x\n"
        ));
        let plan = diff(&old, &new);
        let keys: Vec<&str> = plan.refused.iter().map(|r| r.key.as_str()).collect();
        assert_eq!(keys, vec!["strait.shards", "strait.api.listen"]);
        assert!(
            plan.summary().contains(
                "refused: strait.shards (the shard threads are started once; restart to apply), strait.api.listen (the API is started once, at start; restart to apply)"
            ),
            "{}",
            plan.summary()
        );
    }

    /// Values of a key's type to try as a change, in order.
    fn candidates(d: &crate::config::keys::KeyDef) -> Vec<String> {
        use crate::config::keys::Ty;
        match d.ty {
            Ty::Bool => vec!["false".into(), "true".into()],
            Ty::Int(lo, hi) | Ty::Long(lo, hi) | Ty::Short(lo, hi) => {
                vec![lo.to_string(), hi.to_string(), ((lo + hi) / 2).to_string()]
            }
            Ty::Double(lo, hi) => vec![
                lo.to_string(),
                hi.to_string(),
                ((lo + hi) / 2.0).to_string(),
            ],
            Ty::Enum(v) | Ty::EnumCi(v) => v.iter().map(|s| s.to_string()).collect(),
            // A cluster of the flows, for strait.group.cluster.
            Ty::Str => vec!["A".into(), "other".into()],
            Ty::Password => vec!["changed-secret".into()],
            Ty::ReplicationFactor => vec!["-1".into(), "1".into()],
            Ty::ListenAddr => vec!["127.0.0.1:1".into(), String::new()],
            Ty::CpuList => vec!["0".into(), "0-1".into()],
            other => panic!("{}: no value to try for {other:?}", d.name),
        }
    }

    /// Every `strait.*` key of the table, changed on its own, is either refused by name with
    /// the table's reason (and nothing else in the plan), or applied and named in the plan.
    #[test]
    fn every_strait_key_is_refused_or_applied() {
        use crate::config::keys::{Reload, STRAIT_KEYS};
        // A key store, so that its passwords may be set.
        let base_text = format!("{BASE}strait.api.ssl.keystore.location = /ks.p12\n");
        let base = load(&base_text);
        for d in STRAIT_KEYS {
            let before = base.strait.compared(d.name);
            assert!(before.is_some(), "{}: StraitSettings::compared", d.name);
            let changed = candidates(d)
                .into_iter()
                .filter(|v| Some(v.as_str()) != d.default)
                .find_map(|v| {
                    let env = StaticEnv::new().file(
                        "/cfg/mm2.properties",
                        format!("{base_text}{} = {v}\n", d.name),
                    );
                    load_with(Path::new("/cfg/mm2.properties"), &env)
                        .ok()
                        .filter(|c| c.strait.compared(d.name) != before)
                })
                .unwrap_or_else(|| panic!("{}: no valid changed value", d.name));
            let plan = diff(&base, &changed);
            match d.reload {
                Reload::Refused(reason) => {
                    assert_eq!(
                        plan.refused,
                        vec![Refused {
                            key: d.name.to_string(),
                            reason
                        }],
                        "{}",
                        d.name
                    );
                    assert!(
                        plan.added.is_empty()
                            && plan.removed.is_empty()
                            && plan.restarted.is_empty()
                            && plan.updated.is_empty()
                            && plan.heartbeats.is_empty(),
                        "{}: {plan:?}",
                        d.name
                    );
                    let summary = plan.summary();
                    assert!(
                        summary.contains(d.name) && summary.contains(reason),
                        "{summary}"
                    );
                }
                Reload::Applied => assert!(
                    plan.summary().contains(d.name),
                    "{} is marked applied by a reload, but the reload does not name it: {plan:?}",
                    d.name
                ),
            }
        }
    }

    #[test]
    fn the_mapping_bound_and_the_group_are_refused() {
        let old = load(BASE);
        for line in [
            "strait.mapping.max.runs.per.partition = 2048",
            "strait.health.stall.timeout.ms = 5000",
            "strait.group.session.timeout.ms = 30000",
            "strait.metrics.per.partition = false",
        ] {
            let plan = diff(&old, &load(&format!("{BASE}{line}\n")));
            let key = line.split(" = ").next().unwrap_or_default();
            assert_eq!(
                plan.refused
                    .iter()
                    .map(|r| r.key.as_str())
                    .collect::<Vec<_>>(),
                vec![key]
            );
        }
    }

    #[test]
    fn heartbeat_settings_are_named_per_pair() {
        let old = load(BASE);
        let new = load(&format!("{BASE}emit.heartbeats.interval.seconds = 5\n"));
        let plan = diff(&old, &new);
        assert!(
            plan.restarted.is_empty() && plan.updated.is_empty(),
            "{plan:?}"
        );
        assert!(names(&plan.heartbeats).contains(&"A->B"), "{plan:?}");
        assert!(
            plan.heartbeats
                .iter()
                .all(|c| c.keys == vec!["emit.heartbeats.interval.seconds"]),
            "{plan:?}"
        );
    }
}
