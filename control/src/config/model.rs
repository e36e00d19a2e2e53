//! The typed, resolved configuration: what strait runs. Every value carries where it came
//! from.

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use strait_dataplane::wire::{ConnConfig, SecurityProtocol};

use super::error::ConfigWarning;
use super::keys::is_secret_key;
use super::values::{Acks, AutoOffsetReset, BrokerAddress, IsolationLevel};
use crate::mm2::filter::{ConfigPropertyFilter, GroupFilter, TopicFilter, UseDefaultsFrom};
use crate::mm2::policy::ReplicationPolicy;

/// Where a value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A line of the config file (the line where the key starts).
    File {
        /// The config file.
        path: Arc<Path>,
        /// 1-based line.
        line: u32,
    },
    /// MirrorMaker's (or its Kafka clients') default.
    MirrorMakerDefault,
    /// strait's own default, which differs from MirrorMaker's for the reason given.
    StraitDefault {
        /// Why strait differs.
        why: &'static str,
    },
    /// Not set itself: taken from another key of the file, which means the same thing to
    /// MirrorMaker.
    FromKey {
        /// The key the value was taken from.
        key: &'static str,
        /// The config file.
        path: Arc<Path>,
        /// 1-based line of that key.
        line: u32,
    },
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::File { path, line } => write!(f, "{}:{line}", path.display()),
            Origin::MirrorMakerDefault => f.write_str("MM2 default"),
            Origin::StraitDefault { why } => write!(f, "strait default: {why}"),
            Origin::FromKey { key, path, line } => {
                write!(f, "{key}, {}:{line}", path.display())
            }
        }
    }
}

/// A value and its origin.
#[derive(Debug, Clone, PartialEq)]
pub struct Setting<T> {
    /// The value.
    pub value: T,
    /// Where it came from.
    pub origin: Origin,
}

impl<T> Setting<T> {
    /// A value with its origin.
    pub fn new(value: T, origin: Origin) -> Self {
        Setting { value, origin }
    }

    /// Whether the value was written in the file.
    pub fn is_from_file(&self) -> bool {
        matches!(self.origin, Origin::File { .. })
    }

    /// Whether the user chose the value (in its own key or one MirrorMaker reads for it), not
    /// a default.
    pub fn is_set(&self) -> bool {
        matches!(self.origin, Origin::File { .. } | Origin::FromKey { .. })
    }
}

/// A resolved Kafka client property. `Debug` hides the value of secret keys.
#[derive(Clone, PartialEq, Eq)]
pub struct ClientProperty {
    /// The value.
    pub value: String,
    /// Where it came from.
    pub origin: Origin,
}

/// The properties of one client, by key.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct ClientProperties(pub BTreeMap<String, ClientProperty>);

impl fmt::Debug for ClientProperties {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut m = f.debug_map();
        for (k, v) in &self.0 {
            m.entry(
                k,
                &format_args!("{} ({})", super::redact(k, &v.value), v.origin),
            );
        }
        m.finish()
    }
}

impl ClientProperties {
    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(|p| p.value.as_str())
    }

    /// `key = value (origin)` lines with secrets redacted, for printing.
    pub fn redacted_lines(&self) -> Vec<String> {
        self.0
            .iter()
            .map(|(k, v)| format!("{k} = {} ({})", super::redact(k, &v.value), v.origin))
            .collect()
    }

    /// Whether any key here is a secret.
    pub fn has_secrets(&self) -> bool {
        self.0.keys().any(|k| is_secret_key(k))
    }
}

/// The role of a client in a flow, named as MirrorMaker names it in `client.id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ClientRole {
    /// Fetches the data from the source (`replication-consumer`).
    ReplicationConsumer,
    /// Writes the data to the target (MM2: the Connect worker's producer).
    ReplicationProducer,
    /// Admin on the source (`replication-source-admin`).
    SourceAdmin,
    /// Admin on the target (`replication-target-admin`).
    TargetAdmin,
    /// Reads the target's internal topics (`checkpoints-target-consumer`).
    TargetConsumer,
    /// Writes offset syncs (`offset-syncs-{source,target}-producer`).
    OffsetSyncsProducer {
        /// The topic lives on the source cluster.
        on_source: bool,
    },
    /// Reads offset syncs (`offset-syncs-{source,target}-consumer`).
    OffsetSyncsConsumer {
        /// The topic lives on the source cluster.
        on_source: bool,
    },
    /// Creates the offset-syncs topic (`offset-syncs-{source,target}-admin`).
    OffsetSyncsAdmin {
        /// The topic lives on the source cluster.
        on_source: bool,
    },
}

impl ClientRole {
    /// The role name MirrorMaker puts in `client.id`.
    pub fn name(self) -> &'static str {
        match self {
            ClientRole::ReplicationConsumer => "replication-consumer",
            ClientRole::ReplicationProducer => "replication-producer",
            ClientRole::SourceAdmin => "replication-source-admin",
            ClientRole::TargetAdmin => "replication-target-admin",
            ClientRole::TargetConsumer => "checkpoints-target-consumer",
            ClientRole::OffsetSyncsProducer { on_source: true } => "offset-syncs-source-producer",
            ClientRole::OffsetSyncsProducer { on_source: false } => "offset-syncs-target-producer",
            ClientRole::OffsetSyncsConsumer { on_source: true } => "offset-syncs-source-consumer",
            ClientRole::OffsetSyncsConsumer { on_source: false } => "offset-syncs-target-consumer",
            ClientRole::OffsetSyncsAdmin { on_source: true } => "offset-syncs-source-admin",
            ClientRole::OffsetSyncsAdmin { on_source: false } => "offset-syncs-target-admin",
        }
    }
}

/// Connection settings of one client, ready for the data plane.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientConfig {
    /// `role`.
    pub role: ClientRole,
    /// The alias of the cluster this client talks to.
    pub cluster: String,
    /// Empty when the cluster has no `bootstrap.servers` (an error when the client is needed).
    pub bootstrap_servers: Vec<BrokerAddress>,
    /// `client.id`: `[user client.id|]<source>-><target>|strait|<role>`, like MirrorMaker's
    /// `[user|]<source>-><target>|<connector>|<role>`.
    pub client_id: Setting<String>,
    /// `request.timeout.ms`.
    pub request_timeout_ms: Setting<u64>,
    /// Everything the data plane needs to open a connection.
    pub conn: ConnConfig,
    /// The Kafka client properties as MirrorMaker would assemble them for this client.
    pub properties: ClientProperties,
}

/// A consumer's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct ConsumerSettings {
    /// The connection settings.
    pub client: ClientConfig,
    /// `fetch.max.bytes`.
    pub fetch_max_bytes: Setting<u32>,
    /// `max.partition.fetch.bytes`.
    pub max_partition_fetch_bytes: Setting<u32>,
    /// `fetch.max.wait.ms`.
    pub fetch_max_wait_ms: Setting<u32>,
    /// `fetch.min.bytes`.
    pub fetch_min_bytes: Setting<u32>,
    /// `isolation.level`.
    pub isolation_level: Setting<IsolationLevel>,
    /// `auto.offset.reset`.
    pub auto_offset_reset: Setting<AutoOffsetReset>,
}

/// A producer's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct ProducerSettings {
    /// The connection settings.
    pub client: ClientConfig,
    /// `acks`.
    pub acks: Setting<Acks>,
    /// `max.in.flight.requests.per.connection`.
    pub max_in_flight_requests_per_connection: Setting<u32>,
    /// `max.request.size`.
    pub max_request_size: Setting<u32>,
    /// `batch.size`: batches under a sixteenth of it queued behind a full produce window merge
    /// up to this size.
    pub batch_size: Setting<u32>,
    /// `transaction.timeout.ms`: with exactly-once, how long the coordinator lets one of
    /// strait's transactions stay open before it aborts it (Kafka's default, 60 000).
    pub transaction_timeout_ms: Setting<u32>,
}

/// An admin client's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct AdminSettings {
    /// The connection settings.
    pub client: ClientConfig,
    /// `default.api.timeout.ms`.
    pub default_api_timeout_ms: Setting<u64>,
}

/// The clients of one flow.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowClients {
    /// Fetches records from the source.
    pub source_consumer: ConsumerSettings,
    /// Admin client on the source (topic listing, configs, ACLs, groups).
    pub source_admin: AdminSettings,
    /// Writes records to the target.
    pub target_producer: ProducerSettings,
    /// Admin client on the target (topic creation, configs, ACLs, group offsets).
    pub target_admin: AdminSettings,
    /// Reads the target's internal topics (checkpoints, progress).
    pub target_consumer: ConsumerSettings,
    /// On the source cluster when `offset-syncs.topic.location=source`, else on the target.
    pub offset_syncs_producer: ProducerSettings,
    /// `offset.syncs.consumer`.
    pub offset_syncs_consumer: ConsumerSettings,
    /// `offset.syncs.admin`.
    pub offset_syncs_admin: AdminSettings,
}

/// `offset-syncs.topic.location`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetSyncsLocation {
    /// On the source cluster, named after the target (MM2 default).
    Source,
    /// On the target cluster, named after the source.
    Target,
}

/// One replication flow `source->target` (an MM2 herder).
#[derive(Debug, Clone, PartialEq)]
pub struct FlowConfig {
    /// The source cluster alias.
    pub source: String,
    /// The target cluster alias.
    pub target: String,
    /// `<source>-><target>.enabled`: whether records are replicated.
    pub enabled: Setting<bool>,
    /// The flow exists only to emit heartbeats into the target (MM2 creates a herder for
    /// every pair with heartbeats on).
    pub heartbeats_only: bool,
    /// `topics`.
    pub topics: Setting<Vec<String>>,
    /// `topics.exclude`.
    pub topics_exclude: Setting<Vec<String>>,
    /// `topics` and `topics.exclude`, compiled.
    pub topic_filter: TopicFilter,
    /// `groups`.
    pub groups: Setting<Vec<String>>,
    /// `groups.exclude`.
    pub groups_exclude: Setting<Vec<String>>,
    /// `groups` and `groups.exclude`, compiled.
    pub group_filter: GroupFilter,
    /// `config.properties.exclude`.
    pub config_properties_exclude: Setting<Vec<String>>,
    /// `use.defaults.from`.
    pub use_defaults_from: Setting<UseDefaultsFrom>,
    /// `config.properties.exclude` and `use.defaults.from`, compiled.
    pub config_property_filter: ConfigPropertyFilter,
    /// The policy built from `replication.policy.*`.
    pub replication_policy: ReplicationPolicy,
    /// `replication.policy.class`.
    pub replication_policy_class: Setting<String>,
    /// `replication.policy.separator`.
    pub replication_policy_separator: Setting<String>,
    /// Remote topics' replication factor; -1 means the target broker's default.
    pub replication_factor: Setting<i16>,
    /// `refresh.topics.enabled`.
    pub refresh_topics_enabled: Setting<bool>,
    /// `refresh.topics.interval.seconds`.
    pub refresh_topics_interval_seconds: Setting<u64>,
    /// `sync.topic.configs.enabled`.
    pub sync_topic_configs_enabled: Setting<bool>,
    /// `sync.topic.configs.interval.seconds`.
    pub sync_topic_configs_interval_seconds: Setting<u64>,
    /// `sync.topic.acls.enabled`.
    pub sync_topic_acls_enabled: Setting<bool>,
    /// `sync.topic.acls.interval.seconds`.
    pub sync_topic_acls_interval_seconds: Setting<u64>,
    /// `refresh.groups.enabled`.
    pub refresh_groups_enabled: Setting<bool>,
    /// `refresh.groups.interval.seconds`.
    pub refresh_groups_interval_seconds: Setting<u64>,
    /// `offset.lag.max`.
    pub offset_lag_max: Setting<u64>,
    /// `offset-syncs.topic.location`.
    pub offset_syncs_topic_location: Setting<OffsetSyncsLocation>,
    /// `emit.offset-syncs.enabled`.
    pub emit_offset_syncs_enabled: Setting<bool>,
    /// `emit.checkpoints.enabled`.
    pub emit_checkpoints_enabled: Setting<bool>,
    /// `emit.checkpoints.interval.seconds`.
    pub emit_checkpoints_interval_seconds: Setting<u64>,
    /// `sync.group.offsets.enabled`.
    pub sync_group_offsets_enabled: Setting<bool>,
    /// `sync.group.offsets.interval.seconds`.
    pub sync_group_offsets_interval_seconds: Setting<u64>,
    /// `emit.heartbeats.enabled`.
    pub emit_heartbeats_enabled: Setting<bool>,
    /// `emit.heartbeats.interval.seconds`.
    pub emit_heartbeats_interval_seconds: Setting<u64>,
    /// `heartbeats.replication.enabled`.
    pub heartbeats_replication_enabled: Setting<bool>,
    /// `offset-syncs.topic.replication.factor`.
    pub offset_syncs_topic_replication_factor: Setting<i16>,
    /// `checkpoints.topic.replication.factor`.
    pub checkpoints_topic_replication_factor: Setting<i16>,
    /// `heartbeats.topic.replication.factor`.
    pub heartbeats_topic_replication_factor: Setting<i16>,
    /// `admin.timeout.ms`.
    pub admin_timeout_ms: Setting<u64>,
    /// The Connect worker's `offset.flush.interval.ms` (from `<target>.offset.flush.interval.ms`):
    /// MM2 publishes the latest offset sync of every partition at this cadence.
    pub offset_flush_interval_ms: Setting<u64>,
    /// `<target>.exactly.once.source.support = enabled`: every partition of the flow is
    /// forwarded exactly-once, inside transactions on the target that hold its progress too
    /// (`duties/exactly_once.rs`).
    pub exactly_once: Setting<bool>,
    /// `transaction.boundary.interval.ms`: with exactly-once, how often each partition's
    /// transaction commits. strait's default is 1000 ms (MirrorMaker commits per poll unless
    /// `transaction.boundary = interval`, whose interval defaults to the worker's
    /// `offset.flush.interval.ms`).
    pub transaction_boundary_interval_ms: Setting<u64>,
    /// Where MM2 kept this flow's progress (`offset.storage.topic`, default
    /// `mm2-offsets.<source>.internal`), for importing it.
    pub mm2_offsets_topic: Setting<String>,
    /// The replication factor of strait's progress topic for this flow, when it is created:
    /// `strait.progress.topic.replication.factor` if the file sets it, else MM2's
    /// `offset.storage.replication.factor` (strait's progress topic is MM2's offsets topic), else
    /// strait's default.
    pub progress_topic_replication_factor: Setting<i16>,
    /// `clients`.
    pub clients: FlowClients,
}

impl FlowConfig {
    /// `source->target`.
    pub fn name(&self) -> String {
        format!("{}->{}", self.source, self.target)
    }

    /// The offset-syncs topic: named after the other cluster, on the cluster its location
    /// says.
    pub fn offset_syncs_topic(&self) -> String {
        match self.offset_syncs_topic_location.value {
            OffsetSyncsLocation::Source => self.replication_policy.offset_syncs_topic(&self.target),
            OffsetSyncsLocation::Target => self.replication_policy.offset_syncs_topic(&self.source),
        }
    }

    /// `<source>.checkpoints.internal` (with the policy's separator), on the target.
    pub fn checkpoints_topic(&self) -> String {
        self.replication_policy.checkpoints_topic(&self.source)
    }

    /// `heartbeats`, on the target.
    pub fn heartbeats_topic(&self) -> &'static str {
        self.replication_policy.heartbeats_topic()
    }

    /// The remote name of a source topic.
    pub fn remote_topic(&self, topic: &str) -> String {
        self.replication_policy
            .format_remote_topic(&self.source, topic)
    }

    /// Whether a source topic is replicated by this flow (filter, heartbeats, internal and
    /// cycle rules).
    pub fn should_replicate_topic(&self, topic: &str) -> bool {
        self.replication_policy.should_replicate_topic(
            topic,
            &self.topic_filter,
            self.heartbeats_replication_enabled.value,
            &self.target,
        )
    }
}

/// One cluster alias.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterConfig {
    /// The cluster alias.
    pub alias: String,
    /// `<alias>.bootstrap.servers`, or the top-level default.
    pub bootstrap_servers: Option<Setting<Vec<BrokerAddress>>>,
    /// `security.protocol` of the cluster (before client overrides).
    pub security_protocol: Setting<SecurityProtocol>,
}

/// `strait.io`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoBackend {
    /// io_uring when the kernel allows it, else epoll.
    Auto,
    /// io_uring only; start fails without it.
    Uring,
    /// epoll (tokio) only.
    Epoll,
}

/// `strait.on.lost.position`: what to do when a source partition no longer holds the next
/// offset to replicate (topic recreated, log truncated past it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnLostPosition {
    /// Stop the partition with an error and a metric; the other partitions continue.
    Fail,
    /// Continue from the earliest offset the source still has (skips data, logged).
    Earliest,
}

/// strait's own settings (`strait.*`, top level).
#[derive(Debug, Clone, PartialEq)]
pub struct StraitSettings {
    /// `strait.shards`: shard threads; 0 means one per CPU the process may run on. Max 1024.
    pub shards: Setting<u32>,
    /// `strait.io`: `auto` (default), `uring` or `epoll`.
    pub io: Setting<IoBackend>,
    /// `strait.api.listen`: REST API and `/metrics` address, default `127.0.0.1:8787`;
    /// empty disables the API.
    pub api_listen: Setting<Option<SocketAddr>>,
    /// `strait.api.token`: the bearer token mutating API requests need; none by default
    /// (then they are allowed only on a loopback address). A secret: never printed.
    pub api_token: Setting<Option<String>>,
    /// `strait.api.command.queue`: operator commands waiting for the control loop at most,
    /// default 64 (1..=65536); the API answers 503 beyond.
    pub api_command_queue: Setting<u32>,
    /// `strait.api.ssl.keystore.location`: the API's certificate and key (a PEM file with the
    /// key and the chain, or a PKCS#12 or JKS store, told apart by content); set, the API
    /// serves HTTPS only. None by default (plain HTTP).
    pub api_keystore_location: Setting<Option<std::path::PathBuf>>,
    /// `strait.api.ssl.keystore.password`: the PKCS#12 or JKS store's password. A secret.
    pub api_keystore_password: Setting<Option<String>>,
    /// `strait.api.ssl.key.password`: an encrypted PEM key's password (for PKCS#12 and JKS,
    /// the store's password when unset). A secret.
    pub api_key_password: Setting<Option<String>>,
    /// `strait.memory.bytes`: fetched data in flight across all shards, split evenly between
    /// them (at least 1 MiB each), default 96 MiB (1 MiB..=1 TiB). A total rather than a
    /// per-shard figure, so that memory does not grow with the core count.
    pub memory_bytes: Setting<u64>,
    /// `strait.progress.topic.replication.factor`: default 3; -1 for the broker default. A flow
    /// without it takes MM2's `offset.storage.replication.factor`
    /// ([`FlowConfig::progress_topic_replication_factor`]).
    pub progress_topic_replication_factor: Setting<i16>,
    /// `strait.mapping.max.runs.per.partition`: the runs of one partition's exact offset
    /// mapping kept in memory and stored with its progress, default 1 024 (256..=16 384). A
    /// dense partition is one run; gaps (compaction, transaction markers, aborted
    /// transactions) add runs. Past the bound the oldest history is thinned the way MM2 thins
    /// its offset syncs (the newest quarter stays exact). Each run costs 32 bytes in memory and
    /// about 30 stored.
    pub mapping_max_runs_per_partition: Setting<usize>,
    /// `strait.on.lost.position`: `fail` (default) or `earliest`.
    pub on_lost_position: Setting<OnLostPosition>,
    /// `strait.metrics.enabled`: serve `/metrics`, default true (false: `/metrics` answers
    /// 404).
    pub metrics_enabled: Setting<bool>,
    /// `strait.metrics.per.partition`: the per-partition series of `/metrics` (labels flow,
    /// topic, partition), default true; false leaves only per-flow and per-shard series.
    pub metrics_per_partition: Setting<bool>,
    /// `strait.health.stall.timeout.ms`: `/health/ready` fails once a partition with lag has
    /// made no progress for this long, default 60 000 (1 000..=86 400 000).
    pub health_stall_timeout_ms: Setting<u64>,
    /// `strait.cpus`: the CPUs the shard threads are pinned to, round-robin (default empty:
    /// the CPUs of the inherited affinity mask, as `taskset` or a cgroup cpuset left them).
    /// Each must be in that mask. The control thread, and every thread it starts, is kept on
    /// the mask's other CPUs when there are any.
    pub cpus: Setting<Vec<usize>>,
    /// `strait.cpus.pin`: pin the shard threads (and the control thread) to CPUs, default
    /// true. False leaves placement to the kernel's scheduler: for hosts where strait shares
    /// its CPUs with other work, such as a container limited by a CPU quota but not a cpuset
    /// (its inherited mask is the whole node). Cannot be combined with `strait.cpus`.
    pub cpus_pin: Setting<bool>,
    /// `strait.verify.enabled`: continuous verification while `strait run` runs, default false.
    /// Each round compares, for every partition this member holds, what was copied since the
    /// last round (the first round: since the run started) record by record with the source,
    /// as `strait verify` does.
    pub verify_enabled: Setting<bool>,
    /// `strait.verify.from`: where the first round of each partition starts: `run` (default:
    /// the stored progress when the run started, so what this run copies) or `history` (the
    /// start of the stored history: what earlier runs copied is verified too, in rounds of
    /// `strait.verify.max.records.per.round`, before the newly copied records).
    pub verify_from_history: Setting<bool>,
    /// `strait.verify.interval.ms`: the pause between the end of a round and the start of the
    /// next, default 60 000 (1 000..=86 400 000).
    pub verify_interval_ms: Setting<u64>,
    /// `strait.verify.sample.rate`: the share of newly copied records a round compares (whole
    /// source batches at random below 1), default 1.0 (every record; 0.000001..=1).
    pub verify_sample_rate: Setting<f64>,
    /// `strait.verify.max.records.per.round`: source records a round compares per partition at
    /// most, default 1 000 000 (1 000..=1 000 000 000); the rest waits for the next round, so
    /// a round of a partition far behind stays short.
    pub verify_max_records_per_round: Setting<u64>,
    /// `strait.group.id`: the group of instances this one shares the work with. Default (None):
    /// `strait-<16 hex digits>`, the digest of the file without its process-local keys, so
    /// that instances started with the same file form one group with no setting.
    pub group_id: Setting<Option<String>>,
    /// `strait.group.cluster`: the alias of the cluster whose group coordinator runs the
    /// group. Default (None): the target of the first enabled flow.
    pub group_cluster: Setting<Option<String>>,
    /// `strait.group.instance.id`: this member's static identity (KIP-345), unique per
    /// instance and stable across its restarts (a pod name, `${env:HOSTNAME}`). A restarted
    /// member with the same id takes its place back at once, instead of waiting for its old
    /// session to end; a second process with the same id fences the first, which stops.
    /// Default (None): dynamic membership.
    pub group_instance_id: Setting<Option<String>>,
    /// `strait.group.session.timeout.ms`: default 10 000 (1 000..=1 800 000; the broker's
    /// `group.min.session.timeout.ms`, 6 000 by default, bounds it too). A member without a
    /// successful heartbeat for this long loses its partitions; it stops producing by itself
    /// one heartbeat interval earlier.
    pub group_session_timeout_ms: Setting<u32>,
    /// `strait.group.heartbeat.interval.ms`: default 3 000 (100..=600 000, and below a third of
    /// the session timeout).
    pub group_heartbeat_interval_ms: Setting<u32>,
    /// `strait.group.rebalance.timeout.ms`: how long a rebalance waits for the members to
    /// rejoin, default 30 000 (1 000..=1 800 000).
    pub group_rebalance_timeout_ms: Setting<u32>,
}

impl StraitSettings {
    /// The value of the `strait.*` key `key` as text to compare two configurations with
    /// (secrets included: the text is compared, never shown); `None` for a key this struct does
    /// not hold (a unit test of `config::diff` walks every key of `keys::STRAIT_KEYS`).
    pub fn compared(&self, key: &str) -> Option<String> {
        fn d<T: fmt::Debug>(s: &Setting<T>) -> String {
            format!("{:?}", s.value)
        }
        Some(match key {
            "strait.shards" => d(&self.shards),
            "strait.io" => d(&self.io),
            "strait.api.listen" => d(&self.api_listen),
            "strait.api.token" => d(&self.api_token),
            "strait.api.command.queue" => d(&self.api_command_queue),
            "strait.api.ssl.keystore.location" => d(&self.api_keystore_location),
            "strait.api.ssl.keystore.password" => d(&self.api_keystore_password),
            "strait.api.ssl.key.password" => d(&self.api_key_password),
            "strait.memory.bytes" => d(&self.memory_bytes),
            "strait.progress.topic.replication.factor" => {
                d(&self.progress_topic_replication_factor)
            }
            "strait.mapping.max.runs.per.partition" => d(&self.mapping_max_runs_per_partition),
            "strait.on.lost.position" => d(&self.on_lost_position),
            "strait.metrics.enabled" => d(&self.metrics_enabled),
            "strait.metrics.per.partition" => d(&self.metrics_per_partition),
            "strait.health.stall.timeout.ms" => d(&self.health_stall_timeout_ms),
            "strait.cpus" => d(&self.cpus),
            "strait.cpus.pin" => d(&self.cpus_pin),
            "strait.verify.enabled" => d(&self.verify_enabled),
            "strait.verify.from" => d(&self.verify_from_history),
            "strait.verify.interval.ms" => d(&self.verify_interval_ms),
            "strait.verify.sample.rate" => d(&self.verify_sample_rate),
            "strait.verify.max.records.per.round" => d(&self.verify_max_records_per_round),
            "strait.group.id" => d(&self.group_id),
            "strait.group.cluster" => d(&self.group_cluster),
            "strait.group.instance.id" => d(&self.group_instance_id),
            "strait.group.session.timeout.ms" => d(&self.group_session_timeout_ms),
            "strait.group.heartbeat.interval.ms" => d(&self.group_heartbeat_interval_ms),
            "strait.group.rebalance.timeout.ms" => d(&self.group_rebalance_timeout_ms),
            _ => return None,
        })
    }
}

/// A whole resolved `mm2.properties`.
#[derive(Debug, Clone, PartialEq)]
pub struct Mm2Config {
    /// `path`.
    pub path: PathBuf,
    /// `clusters`.
    pub clusters: BTreeMap<String, ClusterConfig>,
    /// Every herder MirrorMaker would run, in `clusters` order (source, then target).
    pub flows: Vec<FlowConfig>,
    /// `strait`.
    pub strait: StraitSettings,
    /// `warnings`.
    pub warnings: Vec<ConfigWarning>,
}

impl Mm2Config {
    /// The flows that replicate records.
    pub fn enabled_flows(&self) -> impl Iterator<Item = &FlowConfig> {
        self.flows.iter().filter(|f| f.enabled.value)
    }

    /// The flow `source->target`, if MirrorMaker would run one.
    pub fn flow(&self, source: &str, target: &str) -> Option<&FlowConfig> {
        self.flows
            .iter()
            .find(|f| f.source == source && f.target == target)
    }
}
