//! Resolution: from file entries to the typed [`Mm2Config`], following
//! `MirrorMakerConfig` (reference §10) step by step:
//!
//! - `clusterProps(alias)`: the `<alias>.` keys, then the connection keys copied with
//!   put-if-absent into `producer.`, `consumer.` and `admin.`, then the top-level connection
//!   keys as defaults;
//! - `connectorBaseConfig(src->tgt)`: top-level connector keys, `config.providers*`,
//!   `replication.policy*`, the source cluster's props as `source.cluster.*`/`source.<client>.*`,
//!   the target's as `target.*`, MirrorMaker's names, then the `src->tgt.` keys over
//!   everything, then `enabled=false` unless set;
//! - the client configs (`sourceConsumerConfig`...): `source.cluster.*` connection keys,
//!   then `consumer.*`, then `source.consumer.*`. So `A.consumer.x` (which becomes
//!   `source.consumer.x`) beats `A->B.consumer.x`;
//! - one flow (herder) for every ordered pair with `src->tgt.enabled=true` or heartbeats on.
//!
//! Every value keeps its origin. strait's different defaults are marked as such.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use strait_dataplane::wire::{
    ClaimValue, ClientCredentials, ConnConfig, KeyStore, OAuthLogin, SaslConfig, SaslCredentials,
    SaslMechanism, Secret, SecurityProtocol, TlsConfig, TlsVersions, TokenRefresh, TrustStore,
    UnsecuredLogin, http, oauth,
};

use super::error::{ConfigError, ConfigWarning, ErrorKind, Severity, WarningKind};
use super::jaas;
use super::keys::{self, CONNECTION_KEYS, CONNECTOR_KEYS, ClientKind};
use super::model::*;
use super::values::{
    Acks, AutoOffsetReset, BrokerAddress, IsolationLevel, ValueError, java_parse_boolean,
    java_trim, parse_bool, parse_cpu_list, parse_double, parse_host_ports, parse_int,
    parse_listen_addr, parse_replication_factor,
};
use crate::mm2::filter::{
    ConfigPropertyFilter, GroupFilter, TopicFilter, UseDefaultsFrom, java_list,
};
use crate::mm2::policy::{DefaultPolicy, IDENTITY_POLICY_CLASS, ReplicationPolicy};

/// The most cluster aliases a file may list (flows grow with its square).
pub const MAX_CLUSTERS: usize = 64;

/// Why strait's source consumers read committed data only.
pub const WHY_READ_COMMITTED: &str =
    "MM2's read_uncommitted copies aborted transactions; strait skips them";
/// Why strait looks for new topics and groups every 10 seconds.
pub const WHY_FAST_REFRESH: &str =
    "new topics and groups are picked up within seconds, not MM2's 10 minutes";
/// Why strait's replication producer keeps 5 requests in flight.
pub const WHY_REQUEST_SIZE: &str = "source batches are forwarded whole, up to 16 MiB per produce request (MM2's 1 MiB would split the shards' requests 16 times)";
/// Why a partition's fetch size grows when `max.partition.fetch.bytes` is not set.
pub const WHY_GROWING_FETCH: &str = "a partition starts at 1 MiB per fetch and doubles it while it is behind and its answers come back full, up to fetch.max.bytes and a quarter of a shard's memory budget (a round trip moves at most one fetch: 1 MiB is under 7 MiB/s at 150 ms); set the key to keep one fixed size";
pub const WHY_IN_FLIGHT: &str = "the idempotent producer keeps order with up to 5 requests in flight (MM2's worker producer: 1)";

/// A file entry after provider expansion.
#[derive(Debug, Clone)]
pub(crate) struct RawEntry {
    pub value: String,
    pub line: u32,
}

/// A value on its way through MirrorMaker's maps.
#[derive(Debug, Clone)]
struct Val {
    value: String,
    origin: Origin,
    /// The file key it came from, for error messages.
    file_key: Option<String>,
    line: Option<u32>,
}

type Props = BTreeMap<String, Val>;

/// Which side of a flow a client talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Source,
    Target,
}

impl Side {
    fn prefix(self) -> &'static str {
        match self {
            Side::Source => "source",
            Side::Target => "target",
        }
    }
}

pub(crate) struct Resolver<'a> {
    path: Arc<Path>,
    raw: &'a BTreeMap<String, RawEntry>,
    clusters: Vec<String>,
    pub errors: Vec<ConfigError>,
    pub warnings: Vec<ConfigWarning>,
}

fn mm2_default(v: &str) -> Val {
    Val {
        value: v.to_string(),
        origin: Origin::MirrorMakerDefault,
        file_key: None,
        line: None,
    }
}

fn catalogue_default(table: &'static [keys::KeyDef], key: &str) -> &'static str {
    keys::find(table, key).and_then(|d| d.default).unwrap_or("")
}

/// The typed value of `key`, or `default` (MirrorMaker's) when it is absent. An invalid
/// value was reported where its key was validated, so it falls back to the default here.
fn setting<T>(
    props: &Props,
    key: &str,
    default: T,
    parse: impl Fn(&str) -> Result<T, ValueError>,
) -> Setting<T> {
    if let Some(v) = props.get(key)
        && let Ok(t) = parse(&v.value)
    {
        return Setting::new(t, v.origin.clone());
    }
    Setting::new(default, Origin::MirrorMakerDefault)
}

/// MM2's `offset.storage.replication.factor` for a flow's worker (`<target>.` or top level):
/// the replication factor of the topic strait's progress topic stands in for, with an
/// [`Origin::FromKey`]. Anything else is a placeholder that `config::load` replaces with
/// strait's own setting ([`prefer_strait_progress_replication`]).
fn mm2_offsets_replication_factor(worker: &Props) -> Setting<i16> {
    const KEY: &str = "offset.storage.replication.factor";
    match worker
        .get(KEY)
        .map(|v| (parse_replication_factor(&v.value), &v.origin))
    {
        Some((Ok(rf), Origin::File { path, line })) => Setting::new(
            rf,
            Origin::FromKey {
                key: KEY,
                path: path.clone(),
                line: *line,
            },
        ),
        _ => Setting::new(3, Origin::MirrorMakerDefault),
    }
}

/// Each flow's progress topic replication factor: `strait.progress.topic.replication.factor`
/// when the file sets it, else MM2's `offset.storage.replication.factor` for the flow, else
/// strait's default.
pub(crate) fn prefer_strait_progress_replication(flows: &mut [FlowConfig], s: &StraitSettings) {
    let own = &s.progress_topic_replication_factor;
    for f in flows {
        let mm2 = &f.progress_topic_replication_factor;
        if own.is_from_file() || !matches!(mm2.origin, Origin::FromKey { .. }) {
            f.progress_topic_replication_factor = own.clone();
        }
    }
}

fn parse_u64(v: &str) -> Result<u64, ValueError> {
    parse_int(v, 0, i64::MAX, "a 64-bit integer >= 0").map(|n| n as u64)
}

fn parse_u32(v: &str) -> Result<u32, ValueError> {
    parse_int(v, 0, i64::from(i32::MAX), "a 32-bit integer >= 0").map(|n| n as u32)
}

impl<'a> Resolver<'a> {
    pub(crate) fn new(
        path: Arc<Path>,
        raw: &'a BTreeMap<String, RawEntry>,
        clusters: Vec<String>,
    ) -> Self {
        Resolver {
            path,
            raw,
            clusters,
            errors: Vec::new(),
            warnings: Vec::new(),
        }
    }

    fn file_val(&self, key: &str, e: &RawEntry) -> Val {
        Val {
            value: e.value.clone(),
            origin: Origin::File {
                path: self.path.clone(),
                line: e.line,
            },
            file_key: Some(key.to_string()),
            line: Some(e.line),
        }
    }

    fn error(
        &mut self,
        kind: ErrorKind,
        v: Option<&Val>,
        key_fallback: &str,
        msg: impl Into<String>,
    ) {
        let key = v
            .and_then(|v| v.file_key.clone())
            .unwrap_or_else(|| key_fallback.to_string());
        self.errors.push(ConfigError::new(
            kind,
            Some(&key),
            v.and_then(|v| v.line),
            msg,
        ));
    }

    /// `stringsWithPrefixStripped(prefix)`.
    fn stripped(&self, prefix: &str) -> Props {
        self.raw
            .iter()
            .filter_map(|(k, e)| {
                k.strip_prefix(prefix)
                    .map(|rest| (rest.to_string(), self.file_val(k, e)))
            })
            .collect()
    }

    /// `stringsWithPrefix(prefix)` (keys kept whole).
    fn with_prefix(&self, prefix: &str) -> Props {
        self.raw
            .iter()
            .filter(|(k, _)| k.starts_with(prefix))
            .map(|(k, e)| (k.clone(), self.file_val(k, e)))
            .collect()
    }

    /// `MirrorMakerConfig.clusterProps`.
    fn cluster_props(&self, alias: &str) -> Props {
        let mut props = self.stripped(&format!("{alias}."));
        for d in CONNECTION_KEYS {
            if let Some(v) = props.get(d.name).cloned() {
                for kind in ClientKind::ALL {
                    props
                        .entry(format!("{}.{}", kind.prefix(), d.name))
                        .or_insert_with(|| v.clone());
                }
            }
        }
        for d in CONNECTION_KEYS {
            if let Some(e) = self.raw.get(d.name) {
                let v = self.file_val(d.name, e);
                for kind in ClientKind::ALL {
                    props
                        .entry(format!("{}.{}", kind.prefix(), d.name))
                        .or_insert_with(|| v.clone());
                }
                props.entry(d.name.to_string()).or_insert(v);
            }
        }
        props
    }

    /// `MirrorMakerConfig.connectorBaseConfig`.
    fn connector_props(&self, src: &str, tgt: &str) -> Props {
        let mut props: Props = self
            .raw
            .iter()
            .filter(|(k, _)| {
                keys::find(CONNECTOR_KEYS, k).is_some()
                    || keys::find(CONNECTION_KEYS, k).is_some_and(|d| d.name != "bootstrap.servers")
            })
            .map(|(k, e)| (k.clone(), self.file_val(k, e)))
            .collect();
        props.extend(self.with_prefix("config.providers"));
        props.extend(self.with_prefix("replication.policy"));
        for (side, alias) in [(Side::Source, src), (Side::Target, tgt)] {
            for (k, v) in self.cluster_props(alias) {
                let is_client = ["consumer", "producer", "admin"]
                    .iter()
                    .any(|p| k.starts_with(p));
                let key = if is_client {
                    format!("{}.{k}", side.prefix())
                } else {
                    format!("{}.cluster.{k}", side.prefix())
                };
                props.insert(key, v);
            }
        }
        props
            .entry("name".into())
            .or_insert_with(|| mm2_default("MirrorSourceConnector"));
        props.entry("connector.class".into()).or_insert_with(|| {
            mm2_default("org.apache.kafka.connect.mirror.MirrorSourceConnector")
        });
        props
            .entry("source.cluster.alias".into())
            .or_insert_with(|| mm2_default(src));
        props
            .entry("target.cluster.alias".into())
            .or_insert_with(|| mm2_default(tgt));
        props.extend(self.stripped(&format!("{src}->{tgt}.")));
        props
            .entry("enabled".into())
            .or_insert_with(|| mm2_default("false"));
        props
    }

    /// `MirrorMakerConfig.workerConfig` (the parts strait reads).
    fn worker_props(&self, src: &str, tgt: &str) -> Props {
        let mut props = self.cluster_props(tgt);
        for p in keys::WORKER_TOP_LEVEL_PREFIXES {
            props.extend(self.with_prefix(p));
        }
        props
            .entry("offset.storage.topic".into())
            .or_insert_with(|| mm2_default(&format!("mm2-offsets.{src}.internal")));
        props
    }

    /// `MirrorConnectorConfig.{source,target}{Consumer,Producer,Admin}Config`.
    fn role_props(conn: &Props, side: Side, kind: ClientKind) -> Props {
        let cluster_prefix = format!("{}.cluster.", side.prefix());
        let mut out: Props = conn
            .iter()
            .filter_map(|(k, v)| {
                k.strip_prefix(&cluster_prefix)
                    .map(|r| (r.to_string(), v.clone()))
            })
            .filter(|(k, _)| keys::find(CONNECTION_KEYS, k).is_some())
            .collect();
        let kind_prefix = format!("{}.", kind.prefix());
        let side_kind_prefix = format!("{}.{}.", side.prefix(), kind.prefix());
        for prefix in [&kind_prefix, &side_kind_prefix] {
            for (k, v) in conn {
                if let Some(r) = k.strip_prefix(prefix.as_str()) {
                    out.insert(r.to_string(), v.clone());
                }
            }
        }
        if kind == ClientKind::Consumer {
            out.insert("enable.auto.commit".into(), mm2_default("false"));
            out.entry("auto.offset.reset".into())
                .or_insert_with(|| mm2_default("earliest"));
        }
        // Keys the client does not know (`poll.timeout.ms` from `consumer.poll.timeout.ms`,
        // `override.*` from `producer.override.*`) are ignored by Kafka clients too.
        out.retain(|k, _| {
            kind.find(k).is_some()
                || keys::CLIENT_DYNAMIC_PREFIXES
                    .iter()
                    .any(|p| k.starts_with(p))
        });
        out
    }

    /// The Connect worker's producer for the flow (`Worker.baseProducerConfigs`): the
    /// target's `producer.*` (which `clusterProps` filled with the connection keys), then the
    /// connector's `producer.override.*`.
    fn data_producer_props(worker: &Props, conn: &Props) -> Props {
        let mut out = Props::new();
        if let Some(v) = worker.get("bootstrap.servers") {
            out.insert("bootstrap.servers".into(), v.clone());
        }
        out.insert("acks".into(), mm2_default("all"));
        for (k, v) in worker {
            if let Some(r) = k.strip_prefix("producer.") {
                out.insert(r.to_string(), v.clone());
            }
        }
        for (k, v) in conn {
            if let Some(r) = k.strip_prefix("producer.override.") {
                out.insert(r.to_string(), v.clone());
            }
        }
        out.retain(|k, _| ClientKind::Producer.find(k).is_some());
        out
    }

    fn with_strait_default<T>(mut s: Setting<T>, value: T, why: &'static str) -> Setting<T> {
        if s.origin == Origin::MirrorMakerDefault {
            s = Setting::new(value, Origin::StraitDefault { why });
        }
        s
    }

    fn positive_seconds(&mut self, props: &Props, key: &str) -> Setting<u64> {
        let default = parse_u64(catalogue_default(CONNECTOR_KEYS, key)).unwrap_or(1);
        let s = setting(props, key, default as i64, |v| {
            parse_int(v, i64::MIN, i64::MAX, "an integer")
        });
        if s.value < 1 {
            let v = props.get(key).cloned();
            let enabled_key = key.replace(".interval.seconds", ".enabled");
            self.error(
                ErrorKind::InvalidValue,
                v.as_ref(),
                key,
                format!("an interval must be at least 1 second; to turn this off set `{enabled_key}=false`"),
            );
            return Setting::new(default, Origin::MirrorMakerDefault);
        }
        Setting::new(s.value as u64, s.origin)
    }

    fn conn_bool(&self, props: &Props, key: &str) -> Setting<bool> {
        let default = parse_bool(catalogue_default(CONNECTOR_KEYS, key)).unwrap_or(false);
        setting(props, key, default, parse_bool)
    }

    fn conn_rf(&self, props: &Props, key: &str) -> Setting<i16> {
        let default = parse_replication_factor(catalogue_default(CONNECTOR_KEYS, key)).unwrap_or(3);
        setting(props, key, default, parse_replication_factor)
    }

    fn list_setting(&self, props: &Props, key: &str) -> Setting<Vec<String>> {
        setting(
            props,
            key,
            java_list(catalogue_default(CONNECTOR_KEYS, key)),
            |v| Ok(java_list(v)),
        )
    }

    /// Builds every flow. Called once the keys are validated.
    pub(crate) fn resolve(&mut self) -> (BTreeMap<String, ClusterConfig>, Vec<FlowConfig>) {
        let clusters_cfg: BTreeMap<String, ClusterConfig> = self
            .clusters
            .clone()
            .iter()
            .map(|alias| (alias.clone(), self.cluster_config(alias)))
            .collect();
        let mut flows = Vec::new();
        let global_hb = self
            .raw
            .get("emit.heartbeats.enabled")
            .map(|e| java_parse_boolean(&e.value))
            .unwrap_or(true);
        let aliases = self.clusters.clone();
        for src in &aliases {
            for tgt in &aliases {
                if src == tgt {
                    continue;
                }
                let pair = format!("{src}->{tgt}.");
                let pair_enabled = self
                    .raw
                    .get(&format!("{pair}enabled"))
                    .is_some_and(|e| java_parse_boolean(&e.value));
                let hb = self
                    .raw
                    .get(&format!("{pair}emit.heartbeats.enabled"))
                    .map(|e| java_parse_boolean(&e.value))
                    .unwrap_or(global_hb);
                if pair_enabled || hb {
                    flows.push(self.flow(src, tgt));
                }
            }
        }
        self.required_bootstrap(&clusters_cfg, &flows);
        (clusters_cfg, flows)
    }

    fn cluster_config(&mut self, alias: &str) -> ClusterConfig {
        let props = self.cluster_props(alias);
        let bootstrap_servers = props.get("bootstrap.servers").and_then(|v| {
            parse_host_ports(&v.value)
                .ok()
                .map(|a| Setting::new(a, v.origin.clone()))
        });
        let security_protocol = setting(
            &props,
            "security.protocol",
            SecurityProtocol::Plaintext,
            parse_protocol,
        );
        ClusterConfig {
            alias: alias.to_string(),
            bootstrap_servers,
            security_protocol,
        }
    }

    fn required_bootstrap(
        &mut self,
        clusters: &BTreeMap<String, ClusterConfig>,
        flows: &[FlowConfig],
    ) {
        let mut needed = BTreeSet::new();
        for f in flows {
            needed.insert(f.target.clone());
            if f.enabled.value {
                needed.insert(f.source.clone());
            }
        }
        for alias in needed {
            if clusters
                .get(&alias)
                .is_some_and(|c| c.bootstrap_servers.is_none())
                && !self.raw.contains_key(&format!("{alias}.bootstrap.servers"))
                && !self.raw.contains_key("bootstrap.servers")
            {
                self.errors.push(
                    ConfigError::new(
                        ErrorKind::Missing,
                        Some(&format!("{alias}.bootstrap.servers")),
                        None,
                        format!("cluster `{alias}` has no bootstrap.servers (MirrorMaker would silently connect to localhost:9092)"),
                    )
                    .suggest(Some(format!("{alias}.bootstrap.servers"))),
                );
            }
        }
    }

    #[allow(clippy::too_many_lines)] // a table of the flow's settings, one row each, and the struct they fill
    fn flow(&mut self, src: &str, tgt: &str) -> FlowConfig {
        let cp = self.connector_props(src, tgt);
        let worker = self.worker_props(src, tgt);
        let enabled = self.conn_bool(&cp, "enabled");

        let topics = self.list_setting(&cp, "topics");
        let topics_exclude = self.list_setting(&cp, "topics.exclude");
        let topic_filter = TopicFilter::new(&topics.value, &topics_exclude.value)
            .unwrap_or_else(|_| TopicFilter::mm2_default());
        let groups = self.list_setting(&cp, "groups");
        let groups_exclude = self.list_setting(&cp, "groups.exclude");
        let group_filter = GroupFilter::new(&groups.value, &groups_exclude.value)
            .unwrap_or_else(|_| GroupFilter::mm2_default());
        let config_properties_exclude = self.list_setting(&cp, "config.properties.exclude");
        let use_defaults_from = setting(&cp, "use.defaults.from", UseDefaultsFrom::Target, |v| {
            UseDefaultsFrom::parse(v).map_err(|e| ValueError::Invalid(e.to_string()))
        });
        let config_property_filter =
            ConfigPropertyFilter::new(&config_properties_exclude.value, use_defaults_from.value)
                .unwrap_or_else(|_| ConfigPropertyFilter::mm2_default());

        let PolicySettings {
            policy: replication_policy,
            class: replication_policy_class,
            separator: replication_policy_separator,
        } = self.replication_policy(&cp, src);

        let replication_factor = self.conn_rf(&cp, "replication.factor");
        let refresh_topics_enabled = self.conn_bool(&cp, "refresh.topics.enabled");
        let refresh_topics_interval_seconds = {
            let s = self.positive_seconds(&cp, "refresh.topics.interval.seconds");
            Self::with_strait_default(s, 10, WHY_FAST_REFRESH)
        };
        let sync_topic_configs_enabled = self.conn_bool(&cp, "sync.topic.configs.enabled");
        let sync_topic_configs_interval_seconds =
            self.positive_seconds(&cp, "sync.topic.configs.interval.seconds");
        let sync_topic_acls_enabled = self.conn_bool(&cp, "sync.topic.acls.enabled");
        let sync_topic_acls_interval_seconds =
            self.positive_seconds(&cp, "sync.topic.acls.interval.seconds");
        let refresh_groups_enabled = self.conn_bool(&cp, "refresh.groups.enabled");
        let refresh_groups_interval_seconds = {
            let s = self.positive_seconds(&cp, "refresh.groups.interval.seconds");
            Self::with_strait_default(s, 10, WHY_FAST_REFRESH)
        };
        let offset_lag_max = setting(&cp, "offset.lag.max", 100, parse_u64);
        let offset_syncs_topic_location = setting(
            &cp,
            "offset-syncs.topic.location",
            OffsetSyncsLocation::Source,
            |v| match java_trim(v) {
                "source" => Ok(OffsetSyncsLocation::Source),
                "target" => Ok(OffsetSyncsLocation::Target),
                _ => Err(ValueError::Expected {
                    expected: "source or target".into(),
                }),
            },
        );
        let emit_offset_syncs_enabled = self.conn_bool(&cp, "emit.offset-syncs.enabled");
        let emit_checkpoints_enabled = self.conn_bool(&cp, "emit.checkpoints.enabled");
        let emit_checkpoints_interval_seconds =
            self.positive_seconds(&cp, "emit.checkpoints.interval.seconds");
        let sync_group_offsets_enabled = self.conn_bool(&cp, "sync.group.offsets.enabled");
        let sync_group_offsets_interval_seconds =
            self.positive_seconds(&cp, "sync.group.offsets.interval.seconds");
        let emit_heartbeats_enabled = self.conn_bool(&cp, "emit.heartbeats.enabled");
        let emit_heartbeats_interval_seconds =
            self.positive_seconds(&cp, "emit.heartbeats.interval.seconds");
        let heartbeats_replication_enabled = self.conn_bool(&cp, "heartbeats.replication.enabled");
        let offset_syncs_topic_replication_factor =
            self.conn_rf(&cp, "offset-syncs.topic.replication.factor");
        let checkpoints_topic_replication_factor =
            self.conn_rf(&cp, "checkpoints.topic.replication.factor");
        let heartbeats_topic_replication_factor =
            self.conn_rf(&cp, "heartbeats.topic.replication.factor");
        let admin_timeout_ms = setting(&cp, "admin.timeout.ms", 60_000, parse_u64);
        let offset_flush_interval_ms =
            setting(&worker, "offset.flush.interval.ms", 60_000, parse_u64);
        // MM2's "preparing" is the first step of a rolling upgrade of Connect workers; strait
        // has no workers to upgrade, and a flow is transactional only with "enabled".
        let exactly_once = setting(&worker, "exactly.once.source.support", false, |v| {
            Ok(java_trim(v).eq_ignore_ascii_case("enabled"))
        });
        let transaction_boundary_interval_ms = Self::with_strait_default(
            setting(&cp, "transaction.boundary.interval.ms", 1_000, parse_u64),
            1_000,
            "a commit every second keeps what read_committed consumers wait for short",
        );
        let mm2_offsets_topic = setting(
            &worker,
            "offset.storage.topic",
            format!("mm2-offsets.{src}.internal"),
            |v| Ok(java_trim(v).to_string()),
        );
        let progress_topic_replication_factor = mm2_offsets_replication_factor(&worker);

        if enabled.value && !emit_offset_syncs_enabled.value {
            self.refuse_offset_syncs_settings(&cp, src, tgt);
        }

        let clients = self.clients(
            src,
            tgt,
            &cp,
            &worker,
            offset_syncs_topic_location.value,
            enabled.value,
        );

        FlowConfig {
            source: src.to_string(),
            target: tgt.to_string(),
            heartbeats_only: !enabled.value,
            enabled,
            topics,
            topics_exclude,
            topic_filter,
            groups,
            groups_exclude,
            group_filter,
            config_properties_exclude,
            use_defaults_from,
            config_property_filter,
            replication_policy,
            replication_policy_class,
            replication_policy_separator,
            replication_factor,
            refresh_topics_enabled,
            refresh_topics_interval_seconds,
            sync_topic_configs_enabled,
            sync_topic_configs_interval_seconds,
            sync_topic_acls_enabled,
            sync_topic_acls_interval_seconds,
            refresh_groups_enabled,
            refresh_groups_interval_seconds,
            offset_lag_max,
            offset_syncs_topic_location,
            emit_offset_syncs_enabled,
            emit_checkpoints_enabled,
            emit_checkpoints_interval_seconds,
            sync_group_offsets_enabled,
            sync_group_offsets_interval_seconds,
            emit_heartbeats_enabled,
            emit_heartbeats_interval_seconds,
            heartbeats_replication_enabled,
            offset_syncs_topic_replication_factor,
            checkpoints_topic_replication_factor,
            heartbeats_topic_replication_factor,
            admin_timeout_ms,
            offset_flush_interval_ms,
            exactly_once,
            transaction_boundary_interval_ms,
            mm2_offsets_topic,
            progress_topic_replication_factor,
            clients,
        }
    }

    /// `replication.policy.class` and its separator, as `DefaultReplicationPolicy` and
    /// `IdentityReplicationPolicy` configure themselves.
    fn replication_policy(&mut self, cp: &Props, src: &str) -> PolicySettings {
        let replication_policy_class = setting(
            cp,
            "replication.policy.class",
            catalogue_default(CONNECTOR_KEYS, "replication.policy.class").to_string(),
            |v| Ok(java_trim(v).to_string()),
        );
        let separator_val = cp.get("replication.policy.separator").cloned();
        let internal_flag = cp
            .get("replication.policy.internal.topic.separator.enabled")
            .and_then(|v| parse_bool(&v.value).ok());
        // ConfigDef STRING values are trimmed.
        let sep_value = separator_val
            .as_ref()
            .map(|v| java_trim(&v.value).to_string());
        if sep_value.as_deref() == Some("") {
            self.error(
                ErrorKind::InvalidValue,
                separator_val.as_ref(),
                "replication.policy.separator",
                "an empty separator makes remote topic names ambiguous (`Aorders`)",
            );
        }
        let base = DefaultPolicy::configure(sep_value.as_deref(), internal_flag);
        let replication_policy_separator = Setting::new(
            base.separator.clone(),
            separator_val
                .map(|v| v.origin)
                .unwrap_or(Origin::MirrorMakerDefault),
        );
        let replication_policy = if replication_policy_class.value == IDENTITY_POLICY_CLASS {
            let alias = cp
                .get("source.cluster.alias")
                .map(|v| v.value.clone())
                .unwrap_or_else(|| src.to_string());
            ReplicationPolicy::Identity {
                base,
                source_alias: Some(alias),
            }
        } else {
            ReplicationPolicy::Default(base)
        };
        PolicySettings {
            policy: replication_policy,
            class: replication_policy_class,
            separator: replication_policy_separator,
        }
    }

    /// MirrorSourceConnector.validate: no offset-syncs settings without offset syncs.
    fn refuse_offset_syncs_settings(&mut self, cp: &Props, src: &str, tgt: &str) {
        let conflicting: Vec<Val> = cp
            .iter()
            .filter(|(k, v)| {
                (k.starts_with("offset-syncs-") || k.starts_with("offset-syncs.topic."))
                    && v.origin != Origin::MirrorMakerDefault
            })
            .map(|(_, v)| v.clone())
            .collect();
        for v in conflicting {
            self.error(
                ErrorKind::Conflict,
                Some(&v),
                "offset-syncs.topic",
                format!("flow {src}->{tgt} sets emit.offset-syncs.enabled=false; MirrorMaker refuses offset-syncs settings then"),
            );
        }
    }

    fn clients(
        &mut self,
        src: &str,
        tgt: &str,
        cp: &Props,
        worker: &Props,
        location: OffsetSyncsLocation,
        enabled: bool,
    ) -> FlowClients {
        let on_source = location == OffsetSyncsLocation::Source;
        let syncs_side = if on_source {
            Side::Source
        } else {
            Side::Target
        };
        let syncs_alias = if on_source { src } else { tgt };
        let ctx = FlowCtx {
            src,
            tgt,
            check_connections: enabled,
        };

        let source_consumer = self.source_consumer(&ctx, cp, enabled);
        let target_producer = self.target_producer(&ctx, cp, worker, enabled);
        let source_admin = {
            let props = Self::role_props(cp, Side::Source, ClientKind::Admin);
            self.admin(&ctx, ClientRole::SourceAdmin, src, props)
        };
        let target_admin = {
            let props = Self::role_props(cp, Side::Target, ClientKind::Admin);
            self.admin(&ctx, ClientRole::TargetAdmin, tgt, props)
        };
        let target_consumer = {
            let props = Self::role_props(cp, Side::Target, ClientKind::Consumer);
            self.consumer(&ctx, ClientRole::TargetConsumer, tgt, props)
        };
        let offset_syncs_producer = {
            let props = Self::role_props(cp, syncs_side, ClientKind::Producer);
            self.producer(
                &ctx,
                ClientRole::OffsetSyncsProducer { on_source },
                syncs_alias,
                props,
            )
        };
        let offset_syncs_consumer = {
            let props = Self::role_props(cp, syncs_side, ClientKind::Consumer);
            self.consumer(
                &ctx,
                ClientRole::OffsetSyncsConsumer { on_source },
                syncs_alias,
                props,
            )
        };
        let offset_syncs_admin = {
            let props = Self::role_props(cp, syncs_side, ClientKind::Admin);
            self.admin(
                &ctx,
                ClientRole::OffsetSyncsAdmin { on_source },
                syncs_alias,
                props,
            )
        };
        FlowClients {
            source_consumer,
            source_admin,
            target_producer,
            target_admin,
            target_consumer,
            offset_syncs_producer,
            offset_syncs_consumer,
            offset_syncs_admin,
        }
    }

    /// The replication consumer: read_committed unless set, and only the resets strait has.
    fn source_consumer(&mut self, ctx: &FlowCtx, cp: &Props, enabled: bool) -> ConsumerSettings {
        let props = Self::role_props(cp, Side::Source, ClientKind::Consumer);
        let reset = props.get("auto.offset.reset").cloned();
        let mut c = self.consumer(ctx, ClientRole::ReplicationConsumer, ctx.src, props);
        c.isolation_level = Self::with_strait_default(
            c.isolation_level,
            IsolationLevel::ReadCommitted,
            WHY_READ_COMMITTED,
        );
        c.max_partition_fetch_bytes =
            Self::with_strait_default(c.max_partition_fetch_bytes, 1 << 20, WHY_GROWING_FETCH);
        if let AutoOffsetReset::ByDuration(_) | AutoOffsetReset::None = c.auto_offset_reset.value
            && enabled
        {
            self.error(
                ErrorKind::Unsupported,
                reset.as_ref(),
                "auto.offset.reset",
                "only earliest and latest are supported: a partition without stored progress starts at the source's log start or end (none and by_duration are not)",
            );
        }
        c
    }

    /// The replication producer: idempotent, so acks=all and at most 5 requests in flight.
    fn target_producer(
        &mut self,
        ctx: &FlowCtx,
        cp: &Props,
        worker: &Props,
        enabled: bool,
    ) -> ProducerSettings {
        let props = Self::data_producer_props(worker, cp);
        let mut p = self.producer(ctx, ClientRole::ReplicationProducer, ctx.tgt, props.clone());
        p.max_in_flight_requests_per_connection =
            Self::with_strait_default(p.max_in_flight_requests_per_connection, 5, WHY_IN_FLIGHT);
        p.max_request_size =
            Self::with_strait_default(p.max_request_size, 16 << 20, WHY_REQUEST_SIZE);
        p.client.conn.max_in_flight_requests =
            p.max_in_flight_requests_per_connection.value as usize;
        if enabled {
            if p.acks.value != Acks::All {
                self.error(
                    ErrorKind::Unsupported,
                    props.get("acks"),
                    "acks",
                    "strait's replication producer is idempotent, which needs acks=all",
                );
            }
            if p.max_in_flight_requests_per_connection.value > 5 {
                self.error(
                    ErrorKind::Unsupported,
                    props.get("max.in.flight.requests.per.connection"),
                    "max.in.flight.requests.per.connection",
                    "strait's idempotent replication producer allows at most 5 requests in flight",
                );
            }
        }
        p
    }

    fn u32_setting(props: &Props, kind: ClientKind, key: &str) -> Setting<u32> {
        let default = kind
            .find(key)
            .and_then(|d| d.default)
            .and_then(|d| parse_u32(d).ok())
            .unwrap_or(0);
        setting(props, key, default, parse_u32)
    }

    fn consumer(
        &mut self,
        ctx: &FlowCtx,
        role: ClientRole,
        cluster: &str,
        props: Props,
    ) -> ConsumerSettings {
        let k = ClientKind::Consumer;
        let fetch_max_bytes = Self::u32_setting(&props, k, "fetch.max.bytes");
        let max_partition_fetch_bytes = Self::u32_setting(&props, k, "max.partition.fetch.bytes");
        let fetch_max_wait_ms = Self::u32_setting(&props, k, "fetch.max.wait.ms");
        let fetch_min_bytes = Self::u32_setting(&props, k, "fetch.min.bytes");
        let isolation_level = setting(
            &props,
            "isolation.level",
            IsolationLevel::ReadUncommitted,
            IsolationLevel::parse,
        );
        let auto_offset_reset = setting(
            &props,
            "auto.offset.reset",
            AutoOffsetReset::Latest,
            AutoOffsetReset::parse,
        );
        let mut client = self.client(ctx, role, cluster, &props, k);
        // A fetch response may exceed fetch.max.bytes by up to one batch per partition; keep
        // the frame bound comfortably above it.
        let wanted = (fetch_max_bytes.value as usize).saturating_mul(2);
        client.conn.max_response_bytes = client.conn.max_response_bytes.max(wanted);
        ConsumerSettings {
            client,
            fetch_max_bytes,
            max_partition_fetch_bytes,
            fetch_max_wait_ms,
            fetch_min_bytes,
            isolation_level,
            auto_offset_reset,
        }
    }

    fn producer(
        &mut self,
        ctx: &FlowCtx,
        role: ClientRole,
        cluster: &str,
        props: Props,
    ) -> ProducerSettings {
        let k = ClientKind::Producer;
        let acks = setting(&props, "acks", Acks::All, Acks::parse);
        let max_in_flight_requests_per_connection = setting(
            &props,
            "max.in.flight.requests.per.connection",
            5,
            parse_u32,
        );
        let max_request_size = Self::u32_setting(&props, k, "max.request.size");
        let batch_size = Self::u32_setting(&props, k, "batch.size");
        let transaction_timeout_ms = Self::u32_setting(&props, k, "transaction.timeout.ms");
        let mut client = self.client(ctx, role, cluster, &props, k);
        client.conn.max_in_flight_requests = max_in_flight_requests_per_connection.value as usize;
        ProducerSettings {
            client,
            acks,
            max_in_flight_requests_per_connection,
            max_request_size,
            batch_size,
            transaction_timeout_ms,
        }
    }

    fn admin(
        &mut self,
        ctx: &FlowCtx,
        role: ClientRole,
        cluster: &str,
        props: Props,
    ) -> AdminSettings {
        let default_api_timeout_ms = setting(&props, "default.api.timeout.ms", 60_000, parse_u64);
        let client = self.client(ctx, role, cluster, &props, ClientKind::Admin);
        AdminSettings {
            client,
            default_api_timeout_ms,
        }
    }

    fn client(
        &mut self,
        ctx: &FlowCtx,
        role: ClientRole,
        cluster: &str,
        props: &Props,
        kind: ClientKind,
    ) -> ClientConfig {
        let bootstrap_servers = props
            .get("bootstrap.servers")
            .and_then(|v| parse_host_ports(&v.value).ok())
            .unwrap_or_default();
        let client_id = {
            let suffix = format!("{}->{}|strait|{}", ctx.src, ctx.tgt, role.name());
            match props
                .get("client.id")
                .filter(|v| !java_trim(&v.value).is_empty())
            {
                Some(v) => Setting::new(
                    format!("{}|{suffix}", java_trim(&v.value)),
                    v.origin.clone(),
                ),
                None => Setting::new(suffix, Origin::MirrorMakerDefault),
            }
        };
        let request_timeout_ms = setting(props, "request.timeout.ms", 30_000, parse_u64);
        let connect_timeout = setting(props, "socket.connection.setup.timeout.ms", 10_000, |v| {
            parse_int(v, 1, i64::MAX, "a 64-bit integer >= 1").map(|n| n as u64)
        });
        let security_protocol = setting(
            props,
            "security.protocol",
            SecurityProtocol::Plaintext,
            parse_protocol,
        )
        .value;
        let defaults = ConnConfig::default();
        // Heartbeat-only flows never talk to the source: problems with clients they do not
        // use are not errors.
        let needed = ctx.check_connections
            || matches!(
                role,
                ClientRole::TargetAdmin | ClientRole::ReplicationProducer
            );
        let (n_err, n_warn) = (self.errors.len(), self.warnings.len());
        let tls = self.tls(props, security_protocol);
        let sasl = self.sasl(props, security_protocol);
        if !needed {
            self.errors.truncate(n_err);
            self.warnings.truncate(n_warn);
        }
        let conn = ConnConfig {
            client_id: client_id.value.clone(),
            security_protocol,
            tls,
            sasl,
            connect_timeout_ms: connect_timeout.value,
            request_timeout_ms: request_timeout_ms.value,
            max_response_bytes: defaults.max_response_bytes,
            max_in_flight_requests: defaults.max_in_flight_requests,
        };
        let properties = ClientProperties(
            props
                .iter()
                .filter(|(k, _)| {
                    kind.find(k).is_some()
                        || keys::CLIENT_DYNAMIC_PREFIXES
                            .iter()
                            .any(|p| k.starts_with(p))
                })
                .map(|(k, v)| {
                    (
                        k.clone(),
                        ClientProperty {
                            value: v.value.clone(),
                            origin: v.origin.clone(),
                        },
                    )
                })
                .collect(),
        );
        ClientConfig {
            role,
            cluster: cluster.to_string(),
            bootstrap_servers,
            client_id,
            request_timeout_ms,
            conn,
            properties,
        }
    }

    /// TLS settings with the rules of Kafka's `DefaultSslEngineFactory`.
    fn tls(&mut self, props: &Props, protocol: SecurityProtocol) -> Option<TlsConfig> {
        if !protocol.uses_tls() {
            self.warn_unused_tls(props, protocol);
            return None;
        }
        let truststore = self.truststore(props);
        let keystore = self.keystore(props);

        // `https` (the default) checks the host name; an empty value turns the check off.
        let verify_hostname = props
            .get("ssl.endpoint.identification.algorithm")
            .is_none_or(|v| !java_trim(&v.value).is_empty());
        // An unusable list was reported where the key was validated.
        let versions = props
            .get("ssl.enabled.protocols")
            .map(|v| java_list(&v.value))
            .map(|l| TlsVersions {
                tls12: l.iter().any(|p| p == "TLSv1.2"),
                tls13: l.iter().any(|p| p == "TLSv1.3"),
            })
            .filter(|v| v.tls12 || v.tls13)
            .unwrap_or_default();
        Some(TlsConfig {
            truststore,
            keystore,
            verify_hostname,
            versions,
        })
    }

    /// A setting that has no effect, at its line.
    fn warn_ignored(&mut self, v: &Val, message: String) {
        self.warnings.push(ConfigWarning::new(
            Severity::Warning,
            WarningKind::IgnoredKey,
            v.file_key.as_deref(),
            v.line,
            message,
        ));
    }

    /// TLS settings given with a protocol that uses no TLS.
    fn warn_unused_tls(&mut self, props: &Props, protocol: SecurityProtocol) {
        let get = |k: &str| non_empty(props, k);
        let set: Vec<Val> = [
            "ssl.truststore.location",
            "ssl.truststore.certificates",
            "ssl.keystore.location",
            "ssl.keystore.key",
        ]
        .iter()
        .filter_map(|k| get(k))
        .filter(|v| v.origin != Origin::MirrorMakerDefault)
        .collect();
        if let Some(v) = set.first() {
            self.warn_ignored(v, format!("TLS settings have no effect with security.protocol={}; did you mean SSL or SASL_SSL?", protocol.name()));
        }
    }

    /// `ssl.truststore.*`: inline PEM, a PEM, PKCS#12 or JKS file, or the public roots.
    fn truststore(&mut self, props: &Props) -> TrustStore {
        let get = |k: &str| non_empty(props, k);
        let ts_type_v = get("ssl.truststore.type");
        let ts_type = ts_type_v
            .as_ref()
            .map_or("JKS".to_string(), |v| java_trim(&v.value).to_string());
        let ts_loc = get("ssl.truststore.location");
        let ts_pw = get("ssl.truststore.password");
        let ts_certs = get("ssl.truststore.certificates");
        if let Some(certs) = &ts_certs {
            if ts_type != "PEM" {
                self.error(ErrorKind::Tls, Some(certs), "ssl.truststore.certificates", format!("trust store certificates can be given inline only with ssl.truststore.type=PEM, not {ts_type}"));
                TrustStore::PublicRoots
            } else if ts_loc.is_some() {
                self.error(
                    ErrorKind::Tls,
                    Some(certs),
                    "ssl.truststore.certificates",
                    "both ssl.truststore.location and ssl.truststore.certificates are set",
                );
                TrustStore::PublicRoots
            } else if ts_pw.is_some() {
                self.error(
                    ErrorKind::Tls,
                    ts_pw.as_ref(),
                    "ssl.truststore.password",
                    "a PEM trust store takes no password",
                );
                TrustStore::PublicRoots
            } else {
                TrustStore::PemInline(normalize_inline_pem(&certs.value))
            }
        } else if let Some(loc) = &ts_loc {
            let path = std::path::PathBuf::from(java_trim(&loc.value));
            let password = ts_pw.as_ref().map(|v| Secret::new(v.value.clone()));
            if ts_type == "PEM" {
                if ts_pw.is_some() {
                    self.error(
                        ErrorKind::Tls,
                        ts_pw.as_ref(),
                        "ssl.truststore.password",
                        "a PEM trust store takes no password",
                    );
                }
                TrustStore::PemFile(path)
            } else if ts_type.eq_ignore_ascii_case("PKCS12") {
                TrustStore::Pkcs12 { path, password }
            } else if ts_type.eq_ignore_ascii_case("JKS") {
                TrustStore::Jks { path, password }
            } else {
                // The type itself was reported when its key was validated.
                TrustStore::PublicRoots
            }
        } else {
            if ts_pw.is_some() {
                self.error(
                    ErrorKind::Tls,
                    ts_pw.as_ref(),
                    "ssl.truststore.password",
                    "a trust store password is set but no ssl.truststore.location",
                );
            }
            TrustStore::PublicRoots
        }
    }

    /// A key store in a file: PEM (no store password), PKCS#12 or JKS (a store password).
    fn keystore_file(
        &mut self,
        loc: &Val,
        ks_type: &str,
        ks_pw: Option<&Val>,
        key_password: Option<Secret>,
    ) -> Option<KeyStore> {
        let path = std::path::PathBuf::from(java_trim(&loc.value));
        if ks_type == "PEM" {
            if ks_pw.is_some() {
                self.error(ErrorKind::Tls, ks_pw, "ssl.keystore.password", "a PEM key store takes no ssl.keystore.password; only ssl.key.password may be set");
                None
            } else {
                Some(KeyStore::PemFile { path, key_password })
            }
        } else if ks_pw.is_none() {
            self.error(
                ErrorKind::Tls,
                Some(loc),
                "ssl.keystore.location",
                "a key store is set but ssl.keystore.password is not",
            );
            None
        } else {
            // JKS (the default type) and PKCS12 files are told apart by their content when
            // they are loaded, as Java does; the declared type only names them.
            let password = ks_pw.map(|v| Secret::new(v.value.clone()));
            if ks_type.eq_ignore_ascii_case("PKCS12") {
                Some(KeyStore::Pkcs12 {
                    path,
                    password,
                    key_password,
                })
            } else if ks_type.eq_ignore_ascii_case("JKS") {
                Some(KeyStore::Jks {
                    path,
                    password,
                    key_password,
                })
            } else {
                // Unknown types were reported with ssl.keystore.type.
                None
            }
        }
    }

    /// `ssl.keystore.*` and `ssl.key.password`: the client's own certificate, if any.
    fn keystore(&mut self, props: &Props) -> Option<KeyStore> {
        let get = |k: &str| non_empty(props, k);
        let ks_type =
            get("ssl.keystore.type").map_or("JKS".to_string(), |v| java_trim(&v.value).to_string());
        let ks_loc = get("ssl.keystore.location");
        let ks_pw = get("ssl.keystore.password");
        let ks_key = get("ssl.keystore.key");
        let ks_chain = get("ssl.keystore.certificate.chain");
        let key_pw = get("ssl.key.password");
        let key_password = key_pw.as_ref().map(|v| Secret::new(v.value.clone()));
        if let Some(key) = &ks_key {
            if ks_type != "PEM" {
                self.error(ErrorKind::Tls, Some(key), "ssl.keystore.key", format!("a private key can be given inline only with ssl.keystore.type=PEM, not {ks_type}"));
                None
            } else if ks_chain.is_none() {
                self.error(
                    ErrorKind::Tls,
                    Some(key),
                    "ssl.keystore.key",
                    "ssl.keystore.key is set but ssl.keystore.certificate.chain is not",
                );
                None
            } else if ks_loc.is_some() {
                self.error(
                    ErrorKind::Tls,
                    Some(key),
                    "ssl.keystore.key",
                    "both ssl.keystore.location and ssl.keystore.key are set",
                );
                None
            } else if ks_pw.is_some() {
                self.error(ErrorKind::Tls, ks_pw.as_ref(), "ssl.keystore.password", "a PEM key store takes no ssl.keystore.password; only ssl.key.password may be set");
                None
            } else {
                Some(KeyStore::PemInline {
                    key: Secret::new(normalize_inline_pem(&key.value)),
                    certificate_chain: ks_chain
                        .as_ref()
                        .map(|v| normalize_inline_pem(&v.value))
                        .unwrap_or_default(),
                    key_password,
                })
            }
        } else if let Some(chain) = &ks_chain {
            self.error(
                ErrorKind::Tls,
                Some(chain),
                "ssl.keystore.certificate.chain",
                "a certificate chain is set but ssl.keystore.key is not",
            );
            None
        } else if let Some(loc) = &ks_loc {
            self.keystore_file(loc, &ks_type, ks_pw.as_ref(), key_password)
        } else {
            if ks_pw.is_some() {
                self.error(
                    ErrorKind::Tls,
                    ks_pw.as_ref(),
                    "ssl.keystore.password",
                    "a key store password is set but no ssl.keystore.location",
                );
            }
            None
        }
    }

    fn sasl(&mut self, props: &Props, protocol: SecurityProtocol) -> Option<SaslConfig> {
        let jaas_v = props.get("sasl.jaas.config").cloned();
        if !protocol.uses_sasl() {
            if let Some(v) = jaas_v.filter(|v| v.origin != Origin::MirrorMakerDefault) {
                self.warn_ignored(&v, format!("SASL settings have no effect with security.protocol={}; did you mean SASL_SSL?", protocol.name()));
            }
            return None;
        }
        let mech_v = props.get("sasl.mechanism").cloned();
        let mechanism_name = mech_v
            .as_ref()
            .map_or("GSSAPI".to_string(), |v| java_trim(&v.value).to_string());
        let mechanism = match SaslMechanism::parse(&mechanism_name) {
            Some(m) => m,
            None => {
                if mech_v.is_none() {
                    let proto = props.get("security.protocol").cloned();
                    self.error(
                        ErrorKind::Sasl,
                        proto.as_ref(),
                        "sasl.mechanism",
                        format!("security.protocol={} without sasl.mechanism means GSSAPI (Kerberos), which strait does not support; set sasl.mechanism to PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER", protocol.name()),
                    );
                }
                // A set but unsupported mechanism was reported with its key.
                return None;
            }
        };
        let Some(jv) = jaas_v else {
            let proto = props.get("security.protocol").cloned();
            self.error(
                ErrorKind::Sasl,
                proto.as_ref(),
                "sasl.jaas.config",
                format!(
                    "security.protocol={} needs sasl.jaas.config (strait reads no JAAS file)",
                    protocol.name()
                ),
            );
            return None;
        };
        // Syntax and module problems were reported with the key.
        let entry = jaas::parse(&jv.value).ok()?;
        let is_oauth_module = entry.login_module == jaas::OAUTHBEARER_LOGIN_MODULE;
        if is_oauth_module != (mechanism == SaslMechanism::OAuthBearer) {
            self.error(
                ErrorKind::Sasl,
                Some(&jv),
                "sasl.jaas.config",
                format!(
                    "sasl.mechanism={} needs {}, but sasl.jaas.config uses {}",
                    mechanism.name(),
                    if is_oauth_module {
                        "PlainLoginModule or ScramLoginModule"
                    } else {
                        jaas::OAUTHBEARER_LOGIN_MODULE
                    },
                    entry.login_module
                ),
            );
            return None;
        }
        if mechanism == SaslMechanism::OAuthBearer {
            let login = self.oauth_login(props, &jv, &entry)?;
            return Some(SaslConfig {
                mechanism,
                credentials: SaslCredentials::OAuthBearer(login),
            });
        }
        let username = entry.options.get("username")?.clone();
        let password = Secret::new(entry.options.get("password")?.clone());
        Some(SaslConfig::password(mechanism, username, password))
    }

    /// OAUTHBEARER's login: Kafka's unsecured handler, or the OIDC client-credentials handler
    /// when `sasl.login.callback.handler.class` names it (KIP-768).
    fn oauth_login(
        &mut self,
        props: &Props,
        jv: &Val,
        entry: &jaas::JaasEntry,
    ) -> Option<OAuthLogin> {
        let handler = props
            .get("sasl.login.callback.handler.class")
            .map(|v| java_trim(&v.value).to_string())
            .unwrap_or_default();
        if handler.is_empty() {
            if let Some(url) = props.get("sasl.oauthbearer.token.endpoint.url") {
                self.error(
                    ErrorKind::Sasl,
                    Some(url),
                    "sasl.oauthbearer.token.endpoint.url",
                    format!(
                        "a token endpoint is set but sasl.login.callback.handler.class is not: Kafka then uses its unsecured login and never calls the endpoint; set sasl.login.callback.handler.class={}",
                        jaas::OAUTHBEARER_LOGIN_HANDLERS[0]
                    ),
                );
                return None;
            }
            return match unsecured_login(&entry.options) {
                Ok(login) => Some(OAuthLogin::Unsecured(login)),
                Err(e) => {
                    self.error(ErrorKind::Sasl, Some(jv), "sasl.jaas.config", e.to_string());
                    None
                }
            };
        }
        // Any other handler class was refused with its key.
        jaas::OAUTHBEARER_LOGIN_HANDLERS
            .contains(&handler.as_str())
            .then_some(())?;
        self.client_credentials(props, jv, entry)
            .map(|c| OAuthLogin::ClientCredentials(Box::new(c)))
    }

    /// `sasl.oauthbearer.token.endpoint.url`, required by the OIDC login.
    fn token_endpoint(&mut self, props: &Props) -> Option<(String, http::Endpoint)> {
        let url = props
            .get("sasl.oauthbearer.token.endpoint.url")
            .map(|v| java_trim(&v.value).to_string())
            .filter(|v| !v.is_empty());
        let Some(url) = url else {
            self.error(
                ErrorKind::Sasl,
                props.get("sasl.login.callback.handler.class"),
                "sasl.oauthbearer.token.endpoint.url",
                "the OIDC login (OAuthBearerLoginCallbackHandler) needs sasl.oauthbearer.token.endpoint.url",
            );
            return None;
        };
        let endpoint = match http::Endpoint::parse(&url) {
            Ok(e) => e,
            Err(e) => {
                let v = props.get("sasl.oauthbearer.token.endpoint.url").cloned();
                self.error(
                    ErrorKind::InvalidValue,
                    v.as_ref(),
                    "sasl.oauthbearer.token.endpoint.url",
                    e.to_string(),
                );
                return None;
            }
        };
        Some((url, endpoint))
    }

    /// The JAAS options `extension_<name>`: SASL extensions sent with the token.
    fn jaas_extensions(
        &mut self,
        jv: &Val,
        entry: &jaas::JaasEntry,
    ) -> Option<Vec<(String, String)>> {
        let mut extensions = Vec::new();
        for (name, value) in &entry.options {
            if let Some(ext) = name.strip_prefix("extension_") {
                if let Err(e) = oauth::validate_extension(ext, value) {
                    self.error(ErrorKind::Sasl, Some(jv), "sasl.jaas.config", e.to_string());
                    return None;
                }
                extensions.push((ext.to_string(), value.clone()));
            }
        }
        Some(extensions)
    }

    /// The token endpoint's TLS settings.
    fn token_endpoint_tls(&mut self, jv: &Val, entry: &jaas::JaasEntry) -> TlsConfig {
        // Kafka's JaasOptionsUtils builds the token endpoint's TLS from ssl.* JAAS options.
        let ssl_props: Props = entry
            .options
            .iter()
            .filter(|(k, _)| k.starts_with("ssl."))
            .map(|(k, v)| {
                (
                    k.clone(),
                    Val {
                        value: v.clone(),
                        origin: jv.origin.clone(),
                        file_key: jv.file_key.clone(),
                        line: jv.line,
                    },
                )
            })
            .collect();
        self.tls(&ssl_props, SecurityProtocol::Ssl)
            .unwrap_or_default()
    }

    fn client_credentials(
        &mut self,
        props: &Props,
        jv: &Val,
        entry: &jaas::JaasEntry,
    ) -> Option<ClientCredentials> {
        let opt = |name: &str| {
            entry
                .options
                .get(name)
                .map(|v| java_trim(v).to_string())
                .filter(|v| !v.is_empty())
        };
        let key = |name: &str| {
            props
                .get(name)
                .map(|v| java_trim(&v.value).to_string())
                .filter(|v| !v.is_empty())
        };
        let (url, endpoint) = self.token_endpoint(props)?;
        // The KIP-1139 keys first, then the JAAS options Kafka read before them.
        let client_id =
            key("sasl.oauthbearer.client.credentials.client.id").or_else(|| opt("clientId"));
        let client_secret = key("sasl.oauthbearer.client.credentials.client.secret")
            .or_else(|| opt("clientSecret"));
        let needs_credentials = matches!(endpoint, http::Endpoint::Http(_));
        if needs_credentials && (client_id.is_none() || client_secret.is_none()) {
            let missing = if client_id.is_none() {
                "clientId"
            } else {
                "clientSecret"
            };
            self.error(
                ErrorKind::Sasl,
                Some(jv),
                "sasl.jaas.config",
                format!("the OIDC login needs the JAAS option {missing} (or sasl.oauthbearer.client.credentials.{})", if missing == "clientId" { "client.id" } else { "client.secret" }),
            );
            return None;
        }
        let extensions = self.jaas_extensions(jv, entry)?;
        let tls = self.token_endpoint_tls(jv, entry);
        let ms = |name: &str, default: u64| login_ms(props, name, default);
        Some(ClientCredentials {
            token_endpoint_url: url,
            client_id: client_id.unwrap_or_default(),
            client_secret: Secret::new(client_secret.unwrap_or_default()),
            scope: key("sasl.oauthbearer.scope").or_else(|| opt("scope")),
            extensions,
            urlencode_header: setting(
                props,
                "sasl.oauthbearer.header.urlencode",
                false,
                parse_bool,
            )
            .value,
            sub_claim_name: key("sasl.oauthbearer.sub.claim.name").unwrap_or_else(|| "sub".into()),
            tls,
            connect_timeout_ms: ms("sasl.login.connect.timeout.ms", STRAIT_LOGIN_TIMEOUT_MS),
            read_timeout_ms: ms("sasl.login.read.timeout.ms", STRAIT_LOGIN_TIMEOUT_MS),
            retry_backoff_ms: ms("sasl.login.retry.backoff.ms", 100),
            retry_backoff_max_ms: ms("sasl.login.retry.backoff.max.ms", 10_000),
            refresh: token_refresh(props),
        })
    }
}

/// A `sasl.login.*` count of milliseconds or seconds (a 64-bit integer >= 0).
fn login_ms(props: &Props, name: &str, default: u64) -> u64 {
    setting(props, name, default, |v| {
        parse_int(v, 0, i64::MAX, "a 64-bit integer >= 0").map(|n| n as u64)
    })
    .value
}

/// `sasl.login.refresh.*`: when the token is refreshed.
fn token_refresh(props: &Props) -> TokenRefresh {
    let ms = |name: &str, default: u64| login_ms(props, name, default);
    let dbl = |name: &str, lo: f64, hi: f64, default: f64| {
        setting(props, name, default, |v| parse_double(v, lo, hi)).value
    };
    let defaults = TokenRefresh::default();
    TokenRefresh {
        window_factor: dbl(
            "sasl.login.refresh.window.factor",
            0.5,
            1.0,
            defaults.window_factor,
        ),
        window_jitter: dbl(
            "sasl.login.refresh.window.jitter",
            0.0,
            0.25,
            defaults.window_jitter,
        ),
        min_period_seconds: ms(
            "sasl.login.refresh.min.period.seconds",
            defaults.min_period_seconds,
        ),
        buffer_seconds: ms("sasl.login.refresh.buffer.seconds", defaults.buffer_seconds),
    }
}

/// strait's bound on `sasl.login.connect.timeout.ms` and `sasl.login.read.timeout.ms` when
/// they are not set (Kafka's default: no timeout).
pub const STRAIT_LOGIN_TIMEOUT_MS: u64 = 10_000;

/// One `unsecuredLogin*Claim_<name>` or `unsecuredLoginExtension_<name>` option.
fn unsecured_option(
    key: &str,
    value: &str,
    claims: &mut Vec<(String, ClaimValue)>,
    extensions: &mut Vec<(String, String)>,
) -> Result<(), ValueError> {
    let invalid = |m: String| ValueError::Invalid(m);
    let reserved = |name: &str| -> Result<String, ValueError> {
        if name == "exp" || name == "iat" {
            Err(invalid(format!(
                "the `{name}` claim cannot be set explicitly ({key})"
            )))
        } else {
            Ok(name.to_string())
        }
    };
    if let Some(name) = key
        .strip_prefix("unsecuredLoginStringClaim_")
        .filter(|n| !n.is_empty())
    {
        claims.push((reserved(name)?, ClaimValue::String(value.to_string())));
    } else if let Some(name) = key
        .strip_prefix("unsecuredLoginNumberClaim_")
        .filter(|n| !n.is_empty())
    {
        let n: f64 = java_trim(value)
            .parse()
            .ok()
            .filter(|n: &f64| n.is_finite())
            .ok_or_else(|| invalid(format!("{key} is not a number")))?;
        let json = serde_json::Number::from_f64(n)
            .map(|n| n.to_string())
            .ok_or_else(|| invalid(format!("{key} is not a number")))?;
        claims.push((reserved(name)?, ClaimValue::Number(json)));
    } else if let Some(name) = key
        .strip_prefix("unsecuredLoginListClaim_")
        .filter(|n| !n.is_empty())
    {
        claims.push((
            reserved(name)?,
            ClaimValue::List(oauth::unsecured_list_claim(value)),
        ));
    } else if let Some(name) = key.strip_prefix("unsecuredLoginExtension_") {
        oauth::validate_extension(name, value).map_err(|e| invalid(e.to_string()))?;
        extensions.push((name.to_string(), value.to_string()));
    }
    Ok(())
}

/// The unsecured login's options, with the rules of Kafka's
/// `OAuthBearerUnsecuredLoginCallbackHandler`. Messages name options, never their values.
fn unsecured_login(options: &BTreeMap<String, String>) -> Result<UnsecuredLogin, ValueError> {
    let invalid = |m: String| ValueError::Invalid(m);
    const PREFIX: &str = "unsecuredLogin";
    if options.is_empty() {
        return Err(invalid("the unsecured OAUTHBEARER login has no options, so it has no token to send; set unsecuredLoginStringClaim_sub=\"<principal>\" (or configure the OIDC login)".into()));
    }
    if options
        .keys()
        .all(|k| k.starts_with("unsecuredLoginExtension_"))
    {
        return Err(invalid(
            "extensions are given without a token (unsecuredLoginStringClaim_sub is missing)"
                .into(),
        ));
    }
    let trimmed = |k: &str| {
        options
            .get(k)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    let principal_claim_name =
        trimmed(&format!("{PREFIX}PrincipalClaimName")).unwrap_or_else(|| "sub".into());
    let lifetime_seconds = match options.get(&format!("{PREFIX}LifetimeSeconds")) {
        None => 3600,
        Some(v) => v
            .trim()
            .parse::<i64>()
            .map_err(|_| invalid("unsecuredLoginLifetimeSeconds is not a whole number".into()))?,
    };
    let mut claims = Vec::new();
    let mut extensions = Vec::new();
    for (key, value) in options {
        unsecured_option(key, value, &mut claims, &mut extensions)?;
    }
    let login = UnsecuredLogin {
        principal_claim_name,
        lifetime_seconds,
        claims,
        extensions,
    };
    if login.principal().trim().is_empty() {
        return Err(invalid(format!(
            "the unsecured login names no principal: set unsecuredLoginStringClaim_{}",
            login.principal_claim_name
        )));
    }
    Ok(login)
}

/// Inline PEM written with properties-file continuations arrives on one line
/// (`-----BEGIN CERTIFICATE----- MIIB... -----END CERTIFICATE-----`): Kafka's parser accepts
/// that, PEM readers generally do not. Rebuilds each block with the markers and every base64
/// chunk on their own lines; text without a complete block is returned as it is.
pub fn normalize_inline_pem(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(b) = rest.find("-----BEGIN ") {
        let after = &rest[b + "-----BEGIN ".len()..];
        let Some(label_end) = after.find("-----") else {
            break;
        };
        let label = &after[..label_end];
        let body_and_rest = &after[label_end + 5..];
        let end_marker = format!("-----END {label}-----");
        let Some(e) = body_and_rest.find(&end_marker) else {
            break;
        };
        out.push_str("-----BEGIN ");
        out.push_str(label);
        out.push_str("-----\n");
        for chunk in body_and_rest[..e].split_whitespace() {
            out.push_str(chunk);
            out.push('\n');
        }
        out.push_str(&end_marker);
        out.push('\n');
        rest = &body_and_rest[e + end_marker.len()..];
    }
    if out.is_empty() { s.to_string() } else { out }
}

fn parse_protocol(v: &str) -> Result<SecurityProtocol, ValueError> {
    SecurityProtocol::parse(v)
        .ok_or_else(|| ValueError::Invalid("unknown security protocol".into()))
}

/// The value of `key` unless it is empty (Kafka treats an empty TLS setting as unset).
fn non_empty(props: &Props, key: &str) -> Option<Val> {
    props
        .get(key)
        .filter(|v| !java_trim(&v.value).is_empty())
        .cloned()
}

/// A flow's replication policy and the settings it came from.
struct PolicySettings {
    policy: ReplicationPolicy,
    class: Setting<String>,
    separator: Setting<String>,
}

/// The flow a client belongs to.
struct FlowCtx<'s> {
    src: &'s str,
    tgt: &'s str,
    /// Check TLS/SASL settings of every client (only the target ones for heartbeat-only
    /// flows, which never talk to the source).
    check_connections: bool,
}

/// Reads the `strait.*` settings.
#[allow(clippy::too_many_lines)] // a table of the `strait.*` settings, one row each
pub(crate) fn strait_settings(
    path: &Arc<Path>,
    raw: &BTreeMap<String, RawEntry>,
) -> StraitSettings {
    let file = |k: &str| {
        raw.get(k).map(|e| {
            (
                e.value.clone(),
                Origin::File {
                    path: path.clone(),
                    line: e.line,
                },
            )
        })
    };
    fn get<T>(
        file: &dyn Fn(&str) -> Option<(String, Origin)>,
        key: &str,
        default: T,
        why: &'static str,
        parse: impl Fn(&str) -> Result<T, ValueError>,
    ) -> Setting<T> {
        match file(key).and_then(|(v, o)| parse(&v).ok().map(|t| Setting::new(t, o))) {
            Some(s) => s,
            None => Setting::new(default, Origin::StraitDefault { why }),
        }
    }
    StraitSettings {
        shards: get(
            &file,
            "strait.shards",
            0,
            "one shard per CPU the process may use",
            |v| parse_int(v, 0, 1024, "").map(|n| n as u32),
        ),
        io: get(
            &file,
            "strait.io",
            IoBackend::Auto,
            "io_uring when available, else epoll",
            |v| match java_trim(v) {
                "auto" => Ok(IoBackend::Auto),
                "uring" => Ok(IoBackend::Uring),
                "epoll" => Ok(IoBackend::Epoll),
                _ => Err(ValueError::Expected {
                    expected: "auto, uring or epoll".into(),
                }),
            },
        ),
        api_listen: get(
            &file,
            "strait.api.listen",
            parse_listen_addr("127.0.0.1:8787").unwrap_or(None),
            "local-only REST API and /metrics",
            parse_listen_addr,
        ),
        api_token: get(
            &file,
            "strait.api.token",
            None,
            "no token: changes through the API only on a loopback address",
            |v| Ok(Some(v.to_string())),
        ),
        api_command_queue: get(
            &file,
            "strait.api.command.queue",
            64,
            "room for bursts of operator commands",
            |v| parse_int(v, 1, 65536, "").map(|n| n as u32),
        ),
        api_keystore_location: get(
            &file,
            "strait.api.ssl.keystore.location",
            None,
            "no key store: the API serves plain HTTP",
            |v| Ok(Some(std::path::PathBuf::from(java_trim(v)))),
        ),
        api_keystore_password: get(
            &file,
            "strait.api.ssl.keystore.password",
            None,
            "no store password",
            |v| Ok(Some(v.to_string())),
        ),
        api_key_password: get(
            &file,
            "strait.api.ssl.key.password",
            None,
            "no key password",
            |v| Ok(Some(v.to_string())),
        ),
        memory_bytes: get(
            &file,
            "strait.memory.bytes",
            96 << 20,
            "96 MiB of fetched data in flight across all shards: ~1 GiB/s at a 100 ms round trip",
            |v| parse_int(v, 1 << 20, 1 << 40, "").map(|n| n as u64),
        ),
        progress_topic_replication_factor: get(
            &file,
            "strait.progress.topic.replication.factor",
            3,
            "the same as MM2's internal topics",
            parse_replication_factor,
        ),
        mapping_max_runs_per_partition: get(
            &file,
            "strait.mapping.max.runs.per.partition",
            crate::model::mapping_cost::DEFAULT_MAX_SEGMENTS,
            "exact translation across 1024 gaps (compaction, markers, aborts) per partition",
            |v| {
                parse_int(
                    v,
                    crate::model::mapping_cost::MIN_MAX_SEGMENTS as i64,
                    crate::model::mapping_cost::MAX_MAX_SEGMENTS as i64,
                    "",
                )
                .map(|n| n as usize)
            },
        ),
        on_lost_position: get(
            &file,
            "strait.on.lost.position",
            OnLostPosition::Fail,
            "never skip data silently",
            |v| match java_trim(v) {
                "fail" => Ok(OnLostPosition::Fail),
                "earliest" => Ok(OnLostPosition::Earliest),
                _ => Err(ValueError::Expected {
                    expected: "fail or earliest".into(),
                }),
            },
        ),
        metrics_enabled: get(
            &file,
            "strait.metrics.enabled",
            true,
            "metrics on by default",
            parse_bool,
        ),
        metrics_per_partition: get(
            &file,
            "strait.metrics.per.partition",
            true,
            "per-partition series on by default (3 labels, one series set per partition)",
            parse_bool,
        ),
        health_stall_timeout_ms: get(
            &file,
            "strait.health.stall.timeout.ms",
            60_000,
            "a partition with lag and no progress for a minute makes strait not ready",
            |v| parse_int(v, 1_000, 86_400_000, "").map(|n| n as u64),
        ),
        cpus: get(
            &file,
            "strait.cpus",
            Vec::new(),
            "the CPUs of the inherited affinity mask",
            parse_cpu_list,
        ),
        cpus_pin: get(
            &file,
            "strait.cpus.pin",
            true,
            "shard threads pinned, one CPU each",
            parse_bool,
        ),
        verify_enabled: get(
            &file,
            "strait.verify.enabled",
            false,
            "continuous verification off by default",
            parse_bool,
        ),
        verify_from_history: get(
            &file,
            "strait.verify.from",
            false,
            "from where the run started: what it copies",
            |v| match java_trim(v) {
                "run" => Ok(false),
                "history" => Ok(true),
                _ => Err(ValueError::Expected {
                    expected: "run or history".into(),
                }),
            },
        ),
        verify_interval_ms: get(
            &file,
            "strait.verify.interval.ms",
            60_000,
            "a round a minute after the last one ended",
            |v| parse_int(v, 1_000, 86_400_000, "").map(|n| n as u64),
        ),
        verify_sample_rate: get(
            &file,
            "strait.verify.sample.rate",
            1.0,
            "every newly copied record compared",
            |v| parse_double(v, 0.000_001, 1.0),
        ),
        verify_max_records_per_round: get(
            &file,
            "strait.verify.max.records.per.round",
            1_000_000,
            "at most a million source records per partition and round",
            |v| parse_int(v, 1_000, 1_000_000_000, "").map(|n| n as u64),
        ),
        group_id: get(
            &file,
            "strait.group.id",
            None,
            "strait-<digest of the file>: instances with the same file form one group",
            |v| Ok(Some(java_trim(v).to_string()).filter(|s| !s.is_empty())),
        ),
        group_cluster: get(
            &file,
            "strait.group.cluster",
            None,
            "the target of the first enabled flow",
            |v| Ok(Some(java_trim(v).to_string()).filter(|s| !s.is_empty())),
        ),
        group_instance_id: get(
            &file,
            "strait.group.instance.id",
            None,
            "dynamic membership: a member restarted after a crash waits for its old session to end",
            |v| Ok(Some(java_trim(v).to_string()).filter(|s| !s.is_empty())),
        ),
        group_session_timeout_ms: get(
            &file,
            "strait.group.session.timeout.ms",
            10_000,
            "a dead member's partitions move within 10 s, as in Kafka Connect",
            |v| parse_int(v, 1000, 1_800_000, "").map(|n| n as u32),
        ),
        group_heartbeat_interval_ms: get(
            &file,
            "strait.group.heartbeat.interval.ms",
            3_000,
            "Kafka's default: several heartbeats per session",
            |v| parse_int(v, 100, 600_000, "").map(|n| n as u32),
        ),
        group_rebalance_timeout_ms: get(
            &file,
            "strait.group.rebalance.timeout.ms",
            30_000,
            "room for every member to drain its revoked partitions",
            |v| parse_int(v, 1000, 1_800_000, "").map(|n| n as u32),
        ),
    }
}

/// Addresses of a cluster for "same cluster" checks: lower-cased `host:port`.
pub(crate) fn address_set(addrs: &[BrokerAddress]) -> BTreeSet<String> {
    addrs
        .iter()
        .map(|a| format!("{}:{}", a.host.to_ascii_lowercase(), a.port))
        .collect()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use strait_dataplane::wire::{
        ClaimValue, KeyStore, OAuthLogin, SaslConfig, SaslCredentials, SaslMechanism, Secret,
        SecurityProtocol, TlsVersions, TrustStore,
    };

    use crate::config::model::{IoBackend, OffsetSyncsLocation, OnLostPosition, Origin};
    use crate::config::values::{Acks, IsolationLevel};
    use crate::config::{ConfigError, ErrorKind, Mm2Config, StaticEnv, WarningKind, load_with};

    const HEAD: &str = "clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\nA->B.enabled = true\nreplication.factor = 3\n";

    fn try_load(extra: &str) -> Result<Mm2Config, Vec<ConfigError>> {
        let env = StaticEnv::new().file("/m.properties", format!("{HEAD}{extra}"));
        load_with(Path::new("/m.properties"), &env).map_err(|e| e.0)
    }

    fn load(extra: &str) -> Mm2Config {
        match try_load(extra) {
            Ok(c) => c,
            Err(errs) => panic!("unexpected errors: {errs:#?}"),
        }
    }

    fn line_of(o: &Origin) -> Option<u32> {
        match o {
            Origin::File { line, .. } => Some(*line),
            _ => None,
        }
    }

    #[test]
    fn consumer_precedence_follows_mm2() {
        let c = load(
            "A.consumer.fetch.min.bytes = 100\n\
             A->B.consumer.fetch.min.bytes = 200\n\
             A->B.consumer.fetch.max.wait.ms = 50\n\
             A.consumer.max.partition.fetch.bytes = 2048\n\
             A->B.source.consumer.max.partition.fetch.bytes = 4096\n",
        );
        let sc = &c.flow("A", "B").expect("flow").clients.source_consumer;
        // `A.consumer.x` becomes `source.consumer.x`, which beats the flow's `consumer.x`.
        assert_eq!(sc.fetch_min_bytes.value, 100);
        assert_eq!(line_of(&sc.fetch_min_bytes.origin), Some(6));
        assert_eq!(sc.fetch_max_wait_ms.value, 50);
        // The flow's own `source.consumer.x` overrides everything.
        assert_eq!(sc.max_partition_fetch_bytes.value, 4096);
        assert_eq!(line_of(&sc.max_partition_fetch_bytes.origin), Some(10));
        // The flow's `consumer.x` also reaches the target-side consumers.
        assert_eq!(
            c.flow("A", "B")
                .expect("flow")
                .clients
                .target_consumer
                .fetch_max_wait_ms
                .value,
            50
        );
        // MM2 forces enable.auto.commit=false and defaults auto.offset.reset=earliest.
        assert_eq!(
            sc.client.properties.get("enable.auto.commit"),
            Some("false")
        );
        assert_eq!(
            sc.client.properties.get("auto.offset.reset"),
            Some("earliest")
        );
    }

    #[test]
    fn connection_defaults_and_overrides() {
        let c = load(
            "security.protocol = SSL\n\
             B.security.protocol = PLAINTEXT\n\
             A.consumer.security.protocol = PLAINTEXT\n",
        );
        let f = c.flow("A", "B").expect("flow");
        assert_eq!(
            c.clusters["A"].security_protocol.value,
            SecurityProtocol::Ssl
        );
        assert_eq!(
            c.clusters["B"].security_protocol.value,
            SecurityProtocol::Plaintext
        );
        assert_eq!(
            f.clients.source_admin.client.conn.security_protocol,
            SecurityProtocol::Ssl
        );
        assert_eq!(
            f.clients.source_consumer.client.conn.security_protocol,
            SecurityProtocol::Plaintext
        );
        assert_eq!(
            f.clients.target_producer.client.conn.security_protocol,
            SecurityProtocol::Plaintext
        );
        assert!(f.clients.source_admin.client.conn.tls.is_some());
        // A top-level bootstrap.servers is a default for every cluster.
        let env = StaticEnv::new().file("/m.properties", "clusters=A,B\nbootstrap.servers=x:1\nB.bootstrap.servers=b:1\nA->B.enabled=true\nreplication.factor=3\n");
        let c = load_with(Path::new("/m.properties"), &env).expect("valid");
        assert_eq!(
            c.clusters["A"]
                .bootstrap_servers
                .as_ref()
                .map(|s| s.value[0].to_string()),
            Some("x:1".into())
        );
        assert_eq!(
            c.clusters["B"]
                .bootstrap_servers
                .as_ref()
                .map(|s| s.value[0].to_string()),
            Some("b:1".into())
        );
    }

    #[test]
    fn connector_settings_top_level_then_flow() {
        let c = load(
            "topics = orders.*\nA->B.topics = payments\ngroups = g1\nemit.checkpoints.interval.seconds = 5\n",
        );
        let f = c.flow("A", "B").expect("flow");
        assert_eq!(f.topics.value, vec!["payments".to_string()]);
        assert_eq!(line_of(&f.topics.origin), Some(7));
        assert_eq!(f.groups.value, vec!["g1".to_string()]);
        assert_eq!(f.emit_checkpoints_interval_seconds.value, 5);
        assert_eq!(f.topics_exclude.origin, Origin::MirrorMakerDefault);
        assert!(f.should_replicate_topic("payments"));
        assert!(!f.should_replicate_topic("orders"));
        // B->A is heartbeat-only and takes the top-level value.
        let ba = c.flow("B", "A").expect("flow");
        assert!(!ba.enabled.value);
        assert_eq!(ba.enabled.origin, Origin::MirrorMakerDefault);
        assert_eq!(ba.topics.value, vec!["orders.*".to_string()]);
    }

    #[test]
    fn herders_follow_heartbeats() {
        let three = "clusters = A, B, C\nA.bootstrap.servers=a:1\nB.bootstrap.servers=b:1\nC.bootstrap.servers=c:1\nA->B.enabled=true\nreplication.factor=3\n";
        let env = StaticEnv::new().file("/m.properties", three);
        let c = load_with(Path::new("/m.properties"), &env).expect("valid");
        // Every ordered pair: 6 flows, one replicating.
        assert_eq!(c.flows.len(), 6);
        assert_eq!(c.enabled_flows().count(), 1);
        let env = StaticEnv::new().file(
            "/m.properties",
            format!("{three}emit.heartbeats.enabled=false\nC->A.emit.heartbeats.enabled=true\n"),
        );
        let c = load_with(Path::new("/m.properties"), &env).expect("valid");
        let names: Vec<String> = c.flows.iter().map(|f| f.name()).collect();
        assert_eq!(names, vec!["A->B".to_string(), "C->A".to_string()]);
        assert!(
            !c.flow("A", "B")
                .expect("flow")
                .emit_heartbeats_enabled
                .value
        );
        assert!(c.flow("C", "A").expect("flow").heartbeats_only);
    }

    #[test]
    fn policies() {
        let c = load(
            "A->B.replication.policy.separator = _\nreplication.policy.internal.topic.separator.enabled = false\n",
        );
        let f = c.flow("A", "B").expect("flow");
        assert_eq!(f.remote_topic("t"), "A_t");
        assert_eq!(f.checkpoints_topic(), "A.checkpoints.internal");
        assert_eq!(
            c.flow("B", "A")
                .expect("flow")
                .replication_policy
                .separator(),
            "."
        );
        let c = load(
            "replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy\n",
        );
        let f = c.flow("A", "B").expect("flow");
        assert!(f.replication_policy.is_identity());
        assert_eq!(f.remote_topic("orders"), "orders");
        assert_eq!(f.replication_policy.topic_source("orders"), Some("A"));
    }

    #[test]
    fn offset_syncs_location() {
        let c = load("A->B.offset-syncs.topic.location = target\n");
        let f = c.flow("A", "B").expect("flow");
        assert_eq!(
            f.offset_syncs_topic_location.value,
            OffsetSyncsLocation::Target
        );
        assert_eq!(f.offset_syncs_topic(), "mm2-offset-syncs.A.internal");
        assert_eq!(f.clients.offset_syncs_producer.client.cluster, "B");
        assert_eq!(
            f.clients.offset_syncs_producer.client.client_id.value,
            "A->B|strait|offset-syncs-target-producer"
        );
    }

    #[test]
    fn the_progress_topic_takes_mm2s_offsets_topic_replication_factor() {
        let rf = |c: &Mm2Config, s: &str, t: &str| {
            let f = c.flow(s, t).expect("flow");
            (
                f.progress_topic_replication_factor.value,
                f.progress_topic_replication_factor.origin.clone(),
            )
        };
        // Neither: strait's default.
        let c = load("");
        assert_eq!(rf(&c, "A", "B").0, 3);
        assert!(matches!(rf(&c, "A", "B").1, Origin::StraitDefault { .. }));
        // MM2's offsets topic setting, top level or the target cluster's, as workerConfig reads it.
        let c = load(
            "offset.storage.replication.factor = 1
",
        );
        assert_eq!(rf(&c, "A", "B").0, 1);
        assert!(matches!(
            rf(&c, "A", "B").1,
            Origin::FromKey {
                key: "offset.storage.replication.factor",
                ..
            }
        ));
        let c = load(
            "B.offset.storage.replication.factor = 2
",
        );
        assert_eq!(rf(&c, "A", "B").0, 2);
        assert_eq!(rf(&c, "B", "A").0, 3);
        // strait's own key wins.
        let c = load(
            "offset.storage.replication.factor = 1
strait.progress.topic.replication.factor = -1
",
        );
        assert_eq!(rf(&c, "A", "B").0, -1);
        assert!(line_of(&rf(&c, "A", "B").1).is_some());
    }

    #[test]
    fn worker_settings() {
        let c = load("B.offset.flush.interval.ms = 10000\nB.offset.storage.topic = b-offsets\n");
        let f = c.flow("A", "B").expect("flow");
        assert_eq!(f.offset_flush_interval_ms.value, 10_000);
        assert_eq!(f.mm2_offsets_topic.value, "b-offsets");
        assert_eq!(
            c.flow("B", "A").expect("flow").mm2_offsets_topic.value,
            "mm2-offsets.B.internal"
        );
        // Top-level offset.storage.* wins over the cluster's, as in workerConfig.
        let c = load("B.offset.storage.topic = b-offsets\noffset.storage.topic = all-offsets\n");
        assert_eq!(
            c.flow("A", "B").expect("flow").mm2_offsets_topic.value,
            "all-offsets"
        );
    }

    #[test]
    fn data_producer() {
        let c = load(
            "B.producer.max.request.size = 2097152\n\
             A->B.producer.override.request.timeout.ms = 5000\n\
             A->B.producer.linger.ms = 7\n",
        );
        let f = c.flow("A", "B").expect("flow");
        let p = &f.clients.target_producer;
        assert_eq!(p.max_request_size.value, 2_097_152);
        assert_eq!(p.client.request_timeout_ms.value, 5000);
        assert_eq!(p.acks.value, Acks::All);
        assert_eq!(p.max_in_flight_requests_per_connection.value, 5);
        assert!(matches!(
            p.max_in_flight_requests_per_connection.origin,
            Origin::StraitDefault { .. }
        ));
        assert_eq!(p.client.properties.get("linger.ms"), None);
        // The flow's producer.* reaches the offset-syncs producer only, and is flagged.
        assert_eq!(
            f.clients
                .offset_syncs_producer
                .client
                .properties
                .get("linger.ms"),
            Some("7")
        );
        assert!(
            c.warnings
                .iter()
                .any(|w| w.kind == WarningKind::WideEffect && w.line == Some(8))
        );
        let errs = try_load("B.producer.acks = 1\n").expect_err("acks=1");
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert_eq!(errs[0].kind, ErrorKind::Unsupported);
        assert_eq!(errs[0].key.as_deref(), Some("B.producer.acks"));
        assert_eq!(errs[0].line, Some(6));
    }

    #[test]
    fn strait_defaults_have_provenance() {
        let c = load("");
        let f = c.flow("A", "B").expect("flow");
        assert_eq!(
            f.clients.source_consumer.isolation_level.value,
            IsolationLevel::ReadCommitted
        );
        assert!(matches!(
            f.clients.source_consumer.isolation_level.origin,
            Origin::StraitDefault { .. }
        ));
        assert_eq!(
            f.clients.target_consumer.isolation_level.value,
            IsolationLevel::ReadUncommitted
        );
        assert_eq!(f.refresh_topics_interval_seconds.value, 10);
        assert!(matches!(
            f.refresh_groups_interval_seconds.origin,
            Origin::StraitDefault { .. }
        ));
        assert_eq!(f.sync_topic_configs_interval_seconds.value, 600);
        let c = load(
            "A.consumer.isolation.level = read_uncommitted\nrefresh.topics.interval.seconds = 600\n",
        );
        let f = c.flow("A", "B").expect("flow");
        assert_eq!(
            f.clients.source_consumer.isolation_level.value,
            IsolationLevel::ReadUncommitted
        );
        assert_eq!(
            line_of(&f.clients.source_consumer.isolation_level.origin),
            Some(6)
        );
        assert_eq!(f.refresh_topics_interval_seconds.value, 600);
        assert_eq!(c.strait.io.value, IoBackend::Auto);
        assert_eq!(c.strait.on_lost_position.value, OnLostPosition::Fail);
        assert_eq!(c.strait.api_listen.value.map(|a| a.port()), Some(8787));
        let c = load("strait.io = epoll\nstrait.api.listen =\nstrait.shards = 4\n");
        assert_eq!(c.strait.io.value, IoBackend::Epoll);
        assert_eq!(c.strait.api_listen.value, None);
        assert_eq!(c.strait.shards.value, 4);
    }

    #[test]
    fn client_ids() {
        let c = load("A.consumer.client.id = myapp\n");
        let f = c.flow("A", "B").expect("flow");
        assert_eq!(
            f.clients.source_consumer.client.client_id.value,
            "myapp|A->B|strait|replication-consumer"
        );
        assert_eq!(
            f.clients.source_consumer.client.conn.client_id,
            "myapp|A->B|strait|replication-consumer"
        );
        assert_eq!(
            f.clients.target_admin.client.client_id.value,
            "A->B|strait|replication-target-admin"
        );
    }

    #[test]
    fn sasl_and_tls() {
        let c = load(
            "A.security.protocol = SASL_SSL\n\
             A.sasl.mechanism = SCRAM-SHA-512\n\
             A.sasl.jaas.config = org.apache.kafka.common.security.scram.ScramLoginModule required username=\"alice\" password=\"alice-secret\";\n\
             A.ssl.truststore.type = PEM\n\
             A.ssl.truststore.location = /etc/ca.pem\n\
             A.ssl.endpoint.identification.algorithm =\n",
        );
        let conn = &c
            .flow("A", "B")
            .expect("flow")
            .clients
            .source_consumer
            .client
            .conn;
        let sasl = conn.sasl.as_ref().expect("sasl");
        assert_eq!(sasl.mechanism, SaslMechanism::ScramSha512);
        assert_eq!(
            sasl.user_password().map(|(u, p)| (u, p.expose())),
            Some(("alice", "alice-secret"))
        );
        let tls = conn.tls.as_ref().expect("tls");
        assert_eq!(tls.truststore, TrustStore::PemFile("/etc/ca.pem".into()));
        assert!(!tls.verify_hostname);
        assert!(!format!("{c:?}").contains("alice-secret"));

        let c = load(
            "B.security.protocol = SSL\nB.ssl.keystore.type = PKCS12\nB.ssl.keystore.location = /k.p12\nB.ssl.keystore.password = pw\n",
        );
        let tls = c
            .flow("A", "B")
            .expect("flow")
            .clients
            .target_producer
            .client
            .conn
            .tls
            .clone()
            .expect("tls");
        assert!(matches!(tls.keystore, Some(KeyStore::Pkcs12 { .. })));
        assert_eq!(tls.truststore, TrustStore::PublicRoots);
        assert!(tls.verify_hostname);
    }

    #[test]
    fn tls_rules_are_errors_at_the_right_line() {
        let errs = try_load(
            "A.security.protocol = SSL\n\
             A.ssl.keystore.type = PEM\n\
             A.ssl.keystore.location = /k.pem\n\
             A.ssl.keystore.password = nope\n\
             A.ssl.truststore.password = orphan\n",
        )
        .expect_err("invalid");
        let got: Vec<(Option<&str>, Option<u32>, ErrorKind)> = errs
            .iter()
            .map(|e| (e.key.as_deref(), e.line, e.kind))
            .collect();
        assert_eq!(
            got,
            vec![
                (Some("A.ssl.keystore.password"), Some(9), ErrorKind::Tls),
                (Some("A.ssl.truststore.password"), Some(10), ErrorKind::Tls),
            ]
        );
        assert!(
            errs.iter()
                .all(|e| !e.to_string().contains("nope") && !e.to_string().contains("orphan"))
        );
    }

    #[test]
    fn inline_pem_is_rebuilt_line_by_line() {
        use super::normalize_inline_pem;
        assert_eq!(
            normalize_inline_pem(
                "-----BEGIN CERTIFICATE----- AAAA BBBB -----END CERTIFICATE----- -----BEGIN CERTIFICATE----- CC -----END CERTIFICATE-----"
            ),
            "-----BEGIN CERTIFICATE-----\nAAAA\nBBBB\n-----END CERTIFICATE-----\n-----BEGIN CERTIFICATE-----\nCC\n-----END CERTIFICATE-----\n"
        );
        assert_eq!(normalize_inline_pem("not pem"), "not pem");
        assert_eq!(
            normalize_inline_pem("-----BEGIN X----- unterminated"),
            "-----BEGIN X----- unterminated"
        );
    }

    #[test]
    fn java_key_stores_and_self_flows() {
        // JKS is the default key store type (a PKCS#12 file is read too, by its content).
        let c = load(
            "B.security.protocol = SSL\nB.ssl.keystore.location = /k.jks\nB.ssl.keystore.password = pw\nB.ssl.key.password = kp\n",
        );
        let tls = c.flows[0]
            .clients
            .target_producer
            .client
            .conn
            .tls
            .clone()
            .expect("tls");
        assert_eq!(
            tls.keystore,
            Some(KeyStore::Jks {
                path: "/k.jks".into(),
                password: Some(Secret::new("pw")),
                key_password: Some(Secret::new("kp")),
            })
        );
        // Encrypted PEM keys take ssl.key.password.
        let c = load(
            "B.security.protocol = SSL\nB.ssl.keystore.type = PEM\nB.ssl.keystore.location = /k.pem\nB.ssl.key.password = kp\nB.ssl.enabled.protocols = TLSv1.2\n",
        );
        let tls = c.flows[0]
            .clients
            .target_admin
            .client
            .conn
            .tls
            .clone()
            .expect("tls");
        assert_eq!(
            tls.keystore,
            Some(KeyStore::PemFile {
                path: "/k.pem".into(),
                key_password: Some(Secret::new("kp")),
            })
        );
        assert_eq!(
            tls.versions,
            TlsVersions {
                tls12: true,
                tls13: false
            }
        );
        // A key store still needs its password.
        let errs = try_load("B.security.protocol = SSL\nB.ssl.keystore.location = /k.jks\n")
            .expect_err("no password");
        assert_eq!(errs[0].kind, ErrorKind::Tls, "{errs:?}");
        assert_eq!(errs[0].key.as_deref(), Some("B.ssl.keystore.location"));
        // The JKS type alone, with no key store, is harmless.
        load("B.ssl.keystore.type = JKS\n");
        let errs = try_load("A->A.enabled = true\n").expect_err("self flow");
        assert_eq!(errs[0].kind, ErrorKind::Conflict);
        assert_eq!(errs[0].line, Some(6));
    }

    const OAUTH_MODULE: &str =
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule";

    fn oauth_of(c: &Mm2Config) -> OAuthLogin {
        match &c.flows[0].clients.target_producer.client.conn.sasl {
            Some(SaslConfig {
                mechanism: SaslMechanism::OAuthBearer,
                credentials: SaslCredentials::OAuthBearer(login),
            }) => login.clone(),
            other => panic!("expected OAUTHBEARER, got {other:?}"),
        }
    }

    #[test]
    fn oauthbearer_unsecured_login() {
        let c = load(&format!(
            "B.security.protocol = SASL_PLAINTEXT\nB.sasl.mechanism = OAUTHBEARER\nB.sasl.jaas.config = {OAUTH_MODULE} required unsecuredLoginStringClaim_sub=\"mirror\" unsecuredLoginListClaim_scope=\",a,b\" unsecuredLoginNumberClaim_n=\"2\" unsecuredLoginExtension_traceId=\"t1\" unsecuredLoginLifetimeSeconds=\"60\";\n"
        ));
        let OAuthLogin::Unsecured(u) = oauth_of(&c) else {
            panic!("expected the unsecured login")
        };
        assert_eq!(u.principal(), "mirror");
        assert_eq!(u.lifetime_seconds, 60);
        assert_eq!(
            u.extensions,
            vec![("traceId".to_string(), "t1".to_string())]
        );
        assert!(
            u.claims
                .contains(&("n".to_string(), ClaimValue::Number("2.0".into())))
        );
        assert!(u.claims.contains(&(
            "scope".to_string(),
            ClaimValue::List(vec!["a".into(), "b".into()])
        )));
        for (bad, says) in [
            (
                "unsecuredLoginStringClaim_user=\"x\"",
                "unsecuredLoginStringClaim_sub",
            ),
            (
                "unsecuredLoginStringClaim_sub=\"x\" unsecuredLoginNumberClaim_exp=\"1\"",
                "exp",
            ),
            (
                "unsecuredLoginStringClaim_sub=\"x\" unsecuredLoginLifetimeSeconds=\"soon\"",
                "LifetimeSeconds",
            ),
            (
                "unsecuredLoginStringClaim_sub=\"x\" unsecuredLoginExtension_auth=\"y\"",
                "auth",
            ),
        ] {
            let errs = try_load(&format!(
                "B.security.protocol = SASL_PLAINTEXT\nB.sasl.mechanism = OAUTHBEARER\nB.sasl.jaas.config = {OAUTH_MODULE} required {bad};\n"
            ))
            .expect_err(bad);
            assert!(
                errs.iter().any(|e| e.to_string().contains(says)),
                "{bad}: {errs:?}"
            );
        }
        // The module must match the mechanism.
        let errs = try_load(&format!(
            "B.security.protocol = SASL_SSL\nB.sasl.mechanism = PLAIN\nB.sasl.jaas.config = {OAUTH_MODULE} required unsecuredLoginStringClaim_sub=\"x\";\n"
        ))
        .expect_err("module");
        assert!(errs[0].to_string().contains("PlainLoginModule"), "{errs:?}");
    }

    #[test]
    fn oauthbearer_client_credentials() {
        let base = "B.security.protocol = SASL_SSL\nB.sasl.mechanism = OAUTHBEARER\nB.sasl.login.callback.handler.class = org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler\nB.sasl.oauthbearer.token.endpoint.url = https://idp.example/token\nB.sasl.login.retry.backoff.max.ms = 2000\nB.sasl.login.refresh.buffer.seconds = 30\n";
        let c = load(&format!(
            "{base}B.sasl.jaas.config = {OAUTH_MODULE} required clientId=\"strait\" clientSecret=\"s3cret\" scope=\"kafka\" extension_logicalCluster=\"lkc-1\" ssl.truststore.type=\"PEM\" ssl.truststore.location=\"/idp-ca.pem\";\n"
        ));
        let OAuthLogin::ClientCredentials(cc) = oauth_of(&c) else {
            panic!("expected the OIDC login")
        };
        assert_eq!(cc.token_endpoint_url, "https://idp.example/token");
        assert_eq!(cc.client_id, "strait");
        assert_eq!(cc.client_secret.expose(), "s3cret");
        assert_eq!(cc.scope.as_deref(), Some("kafka"));
        assert_eq!(
            cc.extensions,
            vec![("logicalCluster".to_string(), "lkc-1".to_string())]
        );
        assert_eq!(cc.tls.truststore, TrustStore::PemFile("/idp-ca.pem".into()));
        assert_eq!(
            (cc.connect_timeout_ms, cc.read_timeout_ms),
            (10_000, 10_000)
        );
        assert_eq!((cc.retry_backoff_ms, cc.retry_backoff_max_ms), (100, 2000));
        assert_eq!(cc.refresh.buffer_seconds, 30);
        // The KIP-1139 keys win over the JAAS options.
        let c = load(&format!(
            "{base}B.sasl.oauthbearer.client.credentials.client.id = other\nB.sasl.jaas.config = {OAUTH_MODULE} required clientId=\"strait\" clientSecret=\"s3cret\";\n"
        ));
        let OAuthLogin::ClientCredentials(cc) = oauth_of(&c) else {
            panic!()
        };
        assert_eq!(cc.client_id, "other");
        // Missing pieces are errors that never show the secret.
        let errs = try_load(&format!(
            "{base}B.sasl.jaas.config = {OAUTH_MODULE} required clientId=\"strait\";\n"
        ))
        .expect_err("no secret");
        assert!(errs[0].to_string().contains("clientSecret"), "{errs:?}");
        let errs = try_load(&format!(
            "B.security.protocol = SASL_SSL\nB.sasl.mechanism = OAUTHBEARER\nB.sasl.oauthbearer.token.endpoint.url = https://idp.example/token\nB.sasl.jaas.config = {OAUTH_MODULE} required clientId=\"strait\" clientSecret=\"s3cret\";\n"
        ))
        .expect_err("no handler");
        let text = format!("{errs:?}");
        assert!(
            text.contains("sasl.login.callback.handler.class") && !text.contains("s3cret"),
            "{text}"
        );
        let errs = try_load(&format!(
            "{base}B.sasl.login.callback.handler.class = com.example.MyHandler\nB.sasl.jaas.config = {OAUTH_MODULE} required clientId=\"a\" clientSecret=\"s3cret\";\n"
        ))
        .expect_err("unknown handler");
        assert_eq!(errs[0].kind, ErrorKind::Unsupported, "{errs:?}");
    }

    #[test]
    fn sasl_without_mechanism_is_gssapi() {
        let errs = try_load(
            "A.security.protocol = SASL_SSL\nA.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required username=\"u\" password=\"p\";\n",
        )
        .expect_err("GSSAPI");
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert_eq!(errs[0].kind, ErrorKind::Sasl);
        assert_eq!(errs[0].key.as_deref(), Some("A.security.protocol"));
        assert_eq!(errs[0].line, Some(6));
    }

    #[test]
    fn heartbeat_only_flows_do_not_need_the_source() {
        let env = StaticEnv::new().file("/m.properties", "clusters = A, B\nA.bootstrap.servers = a:1\nA->B.enabled = false\nB->A.emit.heartbeats.enabled = false\nA->B.emit.heartbeats.enabled = false\n");
        // No flow at all: B needs no address.
        let c = load_with(Path::new("/m.properties"), &env).expect("valid");
        assert!(c.flows.is_empty());
        let env = StaticEnv::new().file(
            "/m.properties",
            "clusters = A, B\nB.bootstrap.servers = b:1\nB->A.emit.heartbeats.enabled = false\n",
        );
        // A->B only sends heartbeats into B: A needs no address.
        let c = load_with(Path::new("/m.properties"), &env).expect("valid");
        assert_eq!(c.flows.len(), 1);
    }

    #[test]
    fn intervals_and_offset_syncs_conflicts() {
        let errs =
            try_load("A->B.emit.checkpoints.interval.seconds = 0\n").expect_err("zero interval");
        assert_eq!(
            errs[0].key.as_deref(),
            Some("A->B.emit.checkpoints.interval.seconds")
        );
        assert_eq!(errs[0].line, Some(6));
        let errs = try_load(
            "A->B.emit.offset-syncs.enabled = false\noffset-syncs.topic.replication.factor = 1\n",
        )
        .expect_err("conflict");
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert_eq!(errs[0].kind, ErrorKind::Conflict);
        assert_eq!(
            errs[0].key.as_deref(),
            Some("offset-syncs.topic.replication.factor")
        );
        assert_eq!(errs[0].line, Some(7));
    }
}
