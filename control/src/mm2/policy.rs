//! Remote topic naming and cycle detection, exactly as MirrorMaker 2's
//! `DefaultReplicationPolicy` and `IdentityReplicationPolicy` do it (reference §3).
//!
//! Every function here is pure; topic names and aliases come in, names and answers go out.

use crate::mm2::filter::TopicFilter;

/// MM2's class name for the default policy (`replication.policy.class`).
pub const DEFAULT_POLICY_CLASS: &str = "org.apache.kafka.connect.mirror.DefaultReplicationPolicy";
/// MM2's class name for the identity policy.
pub const IDENTITY_POLICY_CLASS: &str = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy";
/// `replication.policy.separator` default.
pub const SEPARATOR_DEFAULT: &str = ".";
/// The heartbeats topic name; the separator does not apply to it.
pub const HEARTBEATS_TOPIC: &str = "heartbeats";

/// Naming settings shared by both policies (the identity policy extends the default one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefaultPolicy {
    /// Between the source alias and the topic in remote topic names.
    pub separator: String,
    /// Inside internal topic names (checkpoints, offset syncs): the separator, or `.` when
    /// `replication.policy.internal.topic.separator.enabled=false`.
    pub internal_separator: String,
}

impl Default for DefaultPolicy {
    fn default() -> Self {
        DefaultPolicy {
            separator: SEPARATOR_DEFAULT.to_string(),
            internal_separator: SEPARATOR_DEFAULT.to_string(),
        }
    }
}

impl DefaultPolicy {
    /// Builds the policy the way `DefaultReplicationPolicy.configure` does: the separator is
    /// taken only when the key is present, and the internal-separator flag is read only when
    /// the separator key is present too.
    pub fn configure(separator: Option<&str>, internal_separator_enabled: Option<bool>) -> Self {
        match separator {
            None => DefaultPolicy::default(),
            Some(sep) => {
                let internal = match internal_separator_enabled {
                    Some(false) => SEPARATOR_DEFAULT.to_string(),
                    _ => sep.to_string(),
                };
                DefaultPolicy {
                    separator: sep.to_string(),
                    internal_separator: internal,
                }
            }
        }
    }

    fn format_remote_topic(&self, source_alias: &str, topic: &str) -> String {
        format!("{source_alias}{}{topic}", self.separator)
    }

    fn topic_source<'t>(&self, topic: &'t str) -> Option<&'t str> {
        let parts = java_split(topic, &self.separator);
        if parts.len() < 2 {
            None
        } else {
            Some(parts[0])
        }
    }

    fn upstream_topic<'t>(&self, topic: &'t str) -> Option<&'t str> {
        let source = self.topic_source(topic)?;
        topic.get(source.len() + self.separator.len()..)
    }

    fn internal_suffix(&self) -> String {
        format!("{}internal", self.internal_separator)
    }

    fn checkpoints_suffix(&self) -> String {
        format!(
            "{sep}checkpoints{sep}internal",
            sep = self.internal_separator
        )
    }
}

/// A replication policy (`replication.policy.class`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplicationPolicy {
    /// `DefaultReplicationPolicy`: remote topics are `<source><separator><topic>`.
    Default(DefaultPolicy),
    /// `IdentityReplicationPolicy`: remote topics keep their name (heartbeat-like topics
    /// excepted). `source_alias` is the connector's `source.cluster.alias`; MM2 always sets
    /// it. Cycles cannot be detected under this policy.
    Identity {
        base: DefaultPolicy,
        source_alias: Option<String>,
    },
}

impl Default for ReplicationPolicy {
    fn default() -> Self {
        ReplicationPolicy::Default(DefaultPolicy::default())
    }
}

impl ReplicationPolicy {
    fn base(&self) -> &DefaultPolicy {
        match self {
            ReplicationPolicy::Default(b) => b,
            ReplicationPolicy::Identity { base, .. } => base,
        }
    }

    /// The separator between alias and topic.
    pub fn separator(&self) -> &str {
        &self.base().separator
    }

    /// Whether this is the identity policy (under which cycles are undetectable).
    pub fn is_identity(&self) -> bool {
        matches!(self, ReplicationPolicy::Identity { .. })
    }

    /// The MM2 class name of this policy.
    pub fn class_name(&self) -> &'static str {
        match self {
            ReplicationPolicy::Default(_) => DEFAULT_POLICY_CLASS,
            ReplicationPolicy::Identity { .. } => IDENTITY_POLICY_CLASS,
        }
    }

    /// `formatRemoteTopic`: the name of `topic` from `source_alias` on the target cluster.
    pub fn format_remote_topic(&self, source_alias: &str, topic: &str) -> String {
        match self {
            ReplicationPolicy::Default(b) => b.format_remote_topic(source_alias, topic),
            ReplicationPolicy::Identity { base, .. } => {
                if looks_like_heartbeat(topic) {
                    base.format_remote_topic(source_alias, topic)
                } else {
                    topic.to_string()
                }
            }
        }
    }

    /// `topicSource`: the alias of the cluster `topic` was replicated from, if it is a remote
    /// topic. Java `String.split` semantics: `a.b.c` → `a`, `.x` → `""`, `x.` → none.
    pub fn topic_source<'a>(&'a self, topic: &'a str) -> Option<&'a str> {
        match self {
            ReplicationPolicy::Default(b) => b.topic_source(topic),
            ReplicationPolicy::Identity { base, source_alias } => {
                if looks_like_heartbeat(topic) {
                    base.topic_source(topic)
                } else {
                    source_alias.as_deref()
                }
            }
        }
    }

    /// `upstreamTopic`: the name of `topic` one hop upstream.
    pub fn upstream_topic<'t>(&self, topic: &'t str) -> Option<&'t str> {
        match self {
            ReplicationPolicy::Default(b) => b.upstream_topic(topic),
            ReplicationPolicy::Identity { base, .. } => {
                if looks_like_heartbeat(topic) {
                    base.upstream_topic(topic)
                } else {
                    Some(topic)
                }
            }
        }
    }

    /// `originalTopic`: follows `upstream_topic` until it stops changing (`B.A.t` → `t`).
    pub fn original_topic<'t>(&self, topic: &'t str) -> &'t str {
        let mut current = topic;
        // Every step either stops or strictly shortens the name, so this ends; the bound is
        // a second guarantee.
        for _ in 0..=topic.len() {
            match self.upstream_topic(current) {
                Some(up) if up != current => current = up,
                _ => return current,
            }
        }
        current
    }

    /// `heartbeatsTopic`: always `heartbeats`.
    pub fn heartbeats_topic(&self) -> &'static str {
        HEARTBEATS_TOPIC
    }

    /// `isHeartbeatsTopic`: `heartbeats`, `A.heartbeats`, `B.A.heartbeats`...
    pub fn is_heartbeats_topic(&self, topic: &str) -> bool {
        self.original_topic(topic) == HEARTBEATS_TOPIC
    }

    /// `checkpointsTopic`: `<alias><isep>checkpoints<isep>internal`.
    pub fn checkpoints_topic(&self, cluster_alias: &str) -> String {
        format!("{cluster_alias}{}", self.base().checkpoints_suffix())
    }

    /// `offsetSyncsTopic`: `mm2-offset-syncs<isep><alias><isep>internal`.
    pub fn offset_syncs_topic(&self, cluster_alias: &str) -> String {
        let b = self.base();
        format!(
            "mm2-offset-syncs{}{cluster_alias}{}",
            b.internal_separator,
            b.internal_suffix()
        )
    }

    /// `isCheckpointsTopic`.
    pub fn is_checkpoints_topic(&self, topic: &str) -> bool {
        topic.ends_with(&self.base().checkpoints_suffix())
    }

    /// `isMM2InternalTopic`: ends with `<isep>internal`.
    pub fn is_mm2_internal_topic(&self, topic: &str) -> bool {
        topic.ends_with(&self.base().internal_suffix())
    }

    /// `isInternalTopic`: MM2 internal, Kafka internal (`__`, `.`), or Connect internal
    /// (`-internal`, `.internal`).
    pub fn is_internal_topic(&self, topic: &str) -> bool {
        self.is_mm2_internal_topic(topic)
            || topic.starts_with("__")
            || topic.starts_with('.')
            || topic.ends_with("-internal")
            || topic.ends_with(".internal")
    }

    /// `MirrorClient.isRemoteTopic`.
    pub fn is_remote_topic(&self, topic: &str) -> bool {
        !self.is_internal_topic(topic) && self.topic_source(topic).is_some()
    }

    /// `MirrorSourceConnector.isCycle`: whether `topic` already came from `target_alias`
    /// somewhere upstream. Under the identity policy this is false for every non-heartbeat
    /// topic whose source is not the target itself.
    pub fn is_cycle(&self, topic: &str, target_alias: &str) -> bool {
        let mut current = topic;
        for _ in 0..=topic.len() {
            let Some(source) = self.topic_source(current) else {
                return false;
            };
            if source == target_alias {
                return true;
            }
            match self.upstream_topic(current) {
                Some(up) if up != current => current = up,
                // The escape hatch for policies (identity) whose upstream is the topic itself.
                _ => return false,
            }
        }
        false
    }

    /// `MirrorSourceConnector.shouldReplicateTopic` for a flow to `target_alias`.
    pub fn should_replicate_topic(
        &self,
        topic: &str,
        filter: &TopicFilter,
        heartbeats_replication_enabled: bool,
        target_alias: &str,
    ) -> bool {
        (filter.should_replicate_topic(topic)
            || (heartbeats_replication_enabled && self.is_heartbeats_topic(topic)))
            && !self.is_internal_topic(topic)
            && !self.is_cycle(topic, target_alias)
    }

    /// The target-side name a checkpoint uses for a source topic
    /// (`MirrorCheckpointTask.renameTopicPartition`): a topic that came from the target goes
    /// back to its original name, any other is formatted as a remote topic.
    pub fn checkpoint_topic_name(
        &self,
        topic: &str,
        source_alias: &str,
        target_alias: &str,
    ) -> String {
        if self.topic_source(topic) == Some(target_alias) {
            self.original_topic(topic).to_string()
        } else {
            self.format_remote_topic(source_alias, topic)
        }
    }
}

/// `IdentityReplicationPolicy.looksLikeHeartbeat`: a plain suffix test.
fn looks_like_heartbeat(topic: &str) -> bool {
    topic.ends_with(HEARTBEATS_TOPIC)
}

/// `Pattern.compile(Pattern.quote(sep)).split(s)`: leading empty parts kept, trailing empty
/// parts dropped, and no match at all gives the input itself. An empty separator splits
/// between characters, without the leading empty part (Java 8+).
pub fn java_split<'s>(s: &'s str, sep: &str) -> Vec<&'s str> {
    let mut parts: Vec<&str> = if s.is_empty() {
        vec![s]
    } else if sep.is_empty() {
        s.char_indices()
            .map(|(i, c)| &s[i..i + c.len_utf8()])
            .collect()
    } else {
        s.split(sep).collect()
    };
    if parts.len() > 1 {
        while parts.last() == Some(&"") {
            parts.pop();
        }
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn default() -> ReplicationPolicy {
        ReplicationPolicy::default()
    }

    fn with_sep(sep: &str, internal: Option<bool>) -> ReplicationPolicy {
        ReplicationPolicy::Default(DefaultPolicy::configure(Some(sep), internal))
    }

    fn identity(alias: &str) -> ReplicationPolicy {
        ReplicationPolicy::Identity {
            base: DefaultPolicy::default(),
            source_alias: Some(alias.to_string()),
        }
    }

    #[test]
    fn java_split_semantics() {
        let cases: &[(&str, &str, &[&str])] = &[
            ("a.b.c", ".", &["a", "b", "c"]),
            ("t", ".", &["t"]),
            (".x", ".", &["", "x"]),
            ("x.", ".", &["x"]),
            ("a..b", ".", &["a", "", "b"]),
            (".", ".", &[]),
            ("..", ".", &[]),
            ("", ".", &[""]),
            ("a...b", "..", &["a", ".b"]),
            ("abc", "", &["a", "b", "c"]),
            ("", "", &[""]),
        ];
        for (s, sep, want) in cases {
            assert_eq!(java_split(s, sep), want.to_vec(), "split({s:?}, {sep:?})");
        }
    }

    #[test]
    fn default_policy_examples_from_the_reference() {
        let p = default();
        let cases: &[(&str, Option<&str>, Option<&str>)] = &[
            ("a.b.c", Some("a"), Some("b.c")),
            ("t", None, None),
            (".x", Some(""), Some("x")),
            ("x.", None, None),
            ("a..b", Some("a"), Some(".b")),
        ];
        for (topic, source, upstream) in cases {
            assert_eq!(p.topic_source(topic), *source, "topic_source({topic})");
            assert_eq!(
                p.upstream_topic(topic),
                *upstream,
                "upstream_topic({topic})"
            );
        }
        assert_eq!(
            p.format_remote_topic("us-west", "foo-topic"),
            "us-west.foo-topic"
        );
        assert_eq!(p.original_topic("B.A.t"), "t");
        assert_eq!(p.original_topic("t"), "t");
        assert_eq!(p.heartbeats_topic(), "heartbeats");
        for t in ["heartbeats", "A.heartbeats", "B.A.heartbeats"] {
            assert!(p.is_heartbeats_topic(t), "{t}");
        }
        assert!(!p.is_heartbeats_topic("myheartbeats"));
        assert!(!p.is_heartbeats_topic("heartbeats.x"));
        assert_eq!(p.checkpoints_topic("A"), "A.checkpoints.internal");
        assert_eq!(p.offset_syncs_topic("B"), "mm2-offset-syncs.B.internal");
        assert!(p.is_checkpoints_topic("A.checkpoints.internal"));
        assert!(p.is_mm2_internal_topic("mm2-offset-syncs.B.internal"));
    }

    #[test]
    fn internal_topics() {
        let p = default();
        for t in [
            "__consumer_offsets",
            ".hidden",
            "connect-offsets-internal",
            "mm2-configs.A.internal",
            "A.checkpoints.internal",
        ] {
            assert!(p.is_internal_topic(t), "{t}");
        }
        for t in ["orders", "A.orders", "internal", "x.internalx"] {
            assert!(!p.is_internal_topic(t), "{t}");
        }
        // With a custom separator MM2-internal means `<sep>internal`, but `.internal` still
        // counts through the Connect rule.
        let p = with_sep("_", None);
        assert!(p.is_internal_topic("mm2-offset-syncs_B_internal"));
        assert!(p.is_internal_topic("x.internal"));
        assert!(!p.is_internal_topic("x_internalx"));
    }

    #[test]
    fn custom_separators() {
        let p = with_sep("_", None);
        assert_eq!(p.format_remote_topic("A", "t"), "A_t");
        assert_eq!(p.topic_source("A_t_x"), Some("A"));
        assert_eq!(p.upstream_topic("A_t_x"), Some("t_x"));
        assert_eq!(p.checkpoints_topic("A"), "A_checkpoints_internal");
        assert_eq!(p.offset_syncs_topic("B"), "mm2-offset-syncs_B_internal");
        // Internal separator disabled: internal names use `.`, remote names keep `_`.
        let p = with_sep("_", Some(false));
        assert_eq!(p.format_remote_topic("A", "t"), "A_t");
        assert_eq!(p.checkpoints_topic("A"), "A.checkpoints.internal");
        assert_eq!(p.offset_syncs_topic("B"), "mm2-offset-syncs.B.internal");
        // The flag alone, without the separator key, is not read.
        let p = ReplicationPolicy::Default(DefaultPolicy::configure(None, Some(false)));
        assert_eq!(p.checkpoints_topic("A"), "A.checkpoints.internal");
        // Multi-character separator.
        let p = with_sep("__", None);
        assert_eq!(p.topic_source("A__t"), Some("A"));
        assert_eq!(p.upstream_topic("A__t"), Some("t"));
        assert_eq!(p.topic_source("A___t"), Some("A"));
        assert_eq!(p.upstream_topic("A___t"), Some("_t"));
    }

    #[test]
    fn identity_policy() {
        let p = identity("A");
        assert_eq!(p.format_remote_topic("A", "orders"), "orders");
        assert_eq!(p.format_remote_topic("A", "heartbeats"), "A.heartbeats");
        // Plain suffix test: `myheartbeats` looks like a heartbeat topic too.
        assert_eq!(p.format_remote_topic("A", "myheartbeats"), "A.myheartbeats");
        assert_eq!(p.topic_source("orders"), Some("A"));
        assert_eq!(p.topic_source("B.heartbeats"), Some("B"));
        assert_eq!(p.topic_source("heartbeats"), None);
        assert_eq!(p.upstream_topic("orders"), Some("orders"));
        assert_eq!(p.upstream_topic("B.heartbeats"), Some("heartbeats"));
        assert_eq!(p.original_topic("orders"), "orders");
        assert_eq!(p.original_topic("C.B.heartbeats"), "heartbeats");
        assert!(p.is_heartbeats_topic("B.heartbeats"));
        let unset = ReplicationPolicy::Identity {
            base: DefaultPolicy::default(),
            source_alias: None,
        };
        assert_eq!(unset.topic_source("orders"), None);
    }

    #[test]
    fn cycle_detection() {
        let p = default();
        assert!(p.is_cycle("B.t", "B"));
        assert!(p.is_cycle("A.B.t", "B"));
        assert!(!p.is_cycle("A.t", "B"));
        assert!(!p.is_cycle("t", "B"));
        assert!(!p.is_cycle("C.A.t", "B"));
        // Identity: the upstream of a data topic is itself, so only a direct match counts.
        let p = identity("A");
        assert!(!p.is_cycle("orders", "B"));
        assert!(p.is_cycle("orders", "A"));
        assert!(p.is_cycle("B.heartbeats", "B"));
        assert!(p.is_cycle("A.B.heartbeats", "B"));
        assert!(!p.is_cycle("heartbeats", "B"));
    }

    #[test]
    fn should_replicate_topic_combines_rules() {
        let p = default();
        let f = TopicFilter::new(&["orders.*".to_string()], &[]).expect("valid filter");
        assert!(p.should_replicate_topic("orders", &f, true, "B"));
        assert!(!p.should_replicate_topic("payments", &f, true, "B"));
        // Heartbeats pass even when the filter rejects them, unless disabled.
        assert!(p.should_replicate_topic("heartbeats", &f, true, "B"));
        assert!(p.should_replicate_topic("C.heartbeats", &f, true, "B"));
        assert!(!p.should_replicate_topic("heartbeats", &f, false, "B"));
        // Cycles and internal topics never pass.
        assert!(!p.should_replicate_topic("B.heartbeats", &f, true, "B"));
        let all = TopicFilter::new(&[".*".to_string()], &[]).expect("valid filter");
        assert!(!p.should_replicate_topic("B.orders", &all, true, "B"));
        assert!(!p.should_replicate_topic("__consumer_offsets", &all, true, "B"));
        assert!(!p.should_replicate_topic("mm2-offset-syncs.B.internal", &all, true, "B"));
    }

    #[test]
    fn checkpoint_names() {
        let p = default();
        assert_eq!(p.checkpoint_topic_name("orders", "A", "B"), "A.orders");
        assert_eq!(p.checkpoint_topic_name("B.orders", "A", "B"), "orders");
        assert_eq!(p.checkpoint_topic_name("C.orders", "A", "B"), "A.C.orders");
    }

    fn alias() -> impl Strategy<Value = String> {
        "[a-zA-Z0-9_-]{1,10}"
    }

    /// A topic name with at least one character that is not the separator: a name made of
    /// dots only has no source under Java's split rules (trailing empty parts are dropped).
    fn topic() -> impl Strategy<Value = String> {
        "[a-zA-Z0-9._-]{0,15}[a-zA-Z0-9_-][a-zA-Z0-9._-]{0,14}"
    }

    proptest! {
        #[test]
        fn source_of_remote_topic_is_the_alias(a in alias(), t in topic()) {
            let p = default();
            let remote = p.format_remote_topic(&a, &t);
            prop_assert_eq!(p.topic_source(&remote), Some(a.as_str()));
            prop_assert_eq!(p.upstream_topic(&remote), Some(t.as_str()));
        }

        #[test]
        fn custom_separator_round_trips(a in "[a-zA-Z0-9]{1,8}", t in "[a-zA-Z0-9.]{1,20}", sep in "[_-]{1,3}") {
            // Aliases and topics without the separator's characters.
            let p = with_sep(&sep, None);
            let remote = p.format_remote_topic(&a, &t);
            prop_assert_eq!(p.topic_source(&remote), Some(a.as_str()));
            prop_assert_eq!(p.upstream_topic(&remote), Some(t.as_str()));
        }

        #[test]
        fn original_topic_strips_every_hop(hops in proptest::collection::vec("[a-zA-Z0-9]{1,6}", 0..5), t in "[a-zA-Z0-9_-]{1,20}") {
            let p = default();
            let mut name = t.clone();
            for h in &hops {
                name = p.format_remote_topic(h, &name);
            }
            prop_assert_eq!(p.original_topic(&name), t.as_str());
        }

        #[test]
        fn a_topic_from_the_target_is_always_a_cycle(up in proptest::collection::vec("[a-zA-Z0-9]{1,6}", 0..4), tgt in "[a-zA-Z0-9]{1,6}", t in "[a-zA-Z0-9_-]{1,20}") {
            let p = default();
            let mut name = p.format_remote_topic(&tgt, &t);
            for h in &up {
                name = p.format_remote_topic(h, &name);
            }
            prop_assert!(p.is_cycle(&name, &tgt));
        }

        #[test]
        fn policy_functions_never_panic(t in "\\PC{0,40}", sep in "\\PC{0,3}", a in "\\PC{0,5}") {
            for p in [with_sep(&sep, None), with_sep(&sep, Some(false)), ReplicationPolicy::Identity { base: DefaultPolicy::configure(Some(&sep), None), source_alias: Some(a.clone()) }] {
                let _ = p.topic_source(&t);
                let _ = p.upstream_topic(&t);
                let _ = p.original_topic(&t);
                let _ = p.is_cycle(&t, &a);
                let _ = p.is_internal_topic(&t);
                let _ = p.format_remote_topic(&a, &t);
            }
        }
    }
}
