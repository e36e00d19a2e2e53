//! The admin client: bootstrap, a metadata cache, routing to partition leaders and group
//! coordinators, bounded retries, and typed calls for the APIs the control plane uses.
//!
//! It runs on the control thread's single-threaded runtime and shares [`BrokerConn`] with the
//! shards. Calls that touch many partitions report per-partition results, so one broken
//! partition never hides the others.

pub mod authz;
pub mod error;
pub mod group;
pub mod probe;
pub mod txn;

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::future::Future;
use std::time::Duration;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    BrokerId, CreateAclsRequest, CreatePartitionsRequest, CreateTopicsRequest, DeleteGroupsRequest,
    DescribeAclsRequest, DescribeConfigsRequest, DescribeGroupsRequest, FindCoordinatorRequest,
    GroupId, IncrementalAlterConfigsRequest, InitProducerIdRequest, ListGroupsRequest,
    ListOffsetsRequest, MetadataRequest, OffsetCommitRequest, OffsetFetchRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use strait_dataplane::io::{BrokerConn, ConnSetup};
use strait_dataplane::shard::core::Leader;

/// The admin client names partitions with the crate's value type.
pub use crate::model::TopicPartition;
pub use error::{ClusterError, Context};

/// Bounds on retrying retriable errors. Every admin call is retried at most `max_attempts`
/// times in total, sleeping `backoff_initial_ms`, doubling up to `backoff_max_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryConfig {
    /// Default 6.
    pub max_attempts: u32,
    /// Default 100 ms.
    pub backoff_initial_ms: u64,
    /// Default 2 000 ms.
    pub backoff_max_ms: u64,
}

impl Default for RetryConfig {
    fn default() -> Self {
        RetryConfig {
            max_attempts: 6,
            backoff_initial_ms: 100,
            backoff_max_ms: 2_000,
        }
    }
}

impl RetryConfig {
    fn backoff(&self, attempt: u32) -> Duration {
        let ms = self
            .backoff_initial_ms
            .saturating_mul(1u64 << attempt.min(16))
            .min(self.backoff_max_ms);
        Duration::from_millis(ms)
    }
}

/// One partition as metadata describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionMeta {
    pub partition: i32,
    /// -1 when there is no leader.
    pub leader: i32,
    pub leader_epoch: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    /// A partition-level error code from metadata (0 = none).
    pub error_code: i16,
}

/// One topic as metadata describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicMeta {
    pub name: String,
    /// The topic id; a recreated topic has a new one.
    pub topic_id: [u8; 16],
    pub is_internal: bool,
    pub partitions: Vec<PartitionMeta>,
}

impl TopicMeta {
    /// Partition `p`, by binary search: `partitions` is sorted by number where it is made
    /// (a linear search per partition made a pass over 10 000 partitions quadratic).
    pub fn partition(&self, p: i32) -> Option<&PartitionMeta> {
        debug_assert!(self.partitions.is_sorted_by_key(|m| m.partition));
        self.partitions
            .binary_search_by_key(&p, |m| m.partition)
            .ok()
            .map(|i| &self.partitions[i])
    }
}

/// A cluster-wide metadata snapshot.
#[derive(Debug, Clone, Default)]
pub struct Metadata {
    pub cluster_id: Option<String>,
    pub controller_id: i32,
    /// Node id → `host:port`.
    pub brokers: BTreeMap<i32, String>,
    pub topics: BTreeMap<String, TopicMeta>,
}

/// Which offset ListOffsets should return.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetSpec {
    Earliest,
    Latest,
    /// The first offset whose timestamp is at or after this time (ms).
    Timestamp(i64),
}

impl OffsetSpec {
    fn wire(self) -> i64 {
        match self {
            OffsetSpec::Earliest => -2,
            OffsetSpec::Latest => -1,
            OffsetSpec::Timestamp(t) => t,
        }
    }
}

/// `isolation.level` for ListOffsets and Fetch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IsolationLevel {
    ReadUncommitted,
    #[default]
    ReadCommitted,
}

/// The source consumer's `isolation.level` as configured.
impl From<crate::config::IsolationLevel> for IsolationLevel {
    fn from(level: crate::config::IsolationLevel) -> Self {
        match level {
            crate::config::IsolationLevel::ReadCommitted => IsolationLevel::ReadCommitted,
            crate::config::IsolationLevel::ReadUncommitted => IsolationLevel::ReadUncommitted,
        }
    }
}

/// What the shards fetch with, for the control plane's reads of the same ends.
impl From<strait_dataplane::shard::IsolationLevel> for IsolationLevel {
    fn from(level: strait_dataplane::shard::IsolationLevel) -> Self {
        match level {
            strait_dataplane::shard::IsolationLevel::ReadCommitted => IsolationLevel::ReadCommitted,
            strait_dataplane::shard::IsolationLevel::ReadUncommitted => {
                IsolationLevel::ReadUncommitted
            }
        }
    }
}

impl IsolationLevel {
    pub fn wire(self) -> i8 {
        match self {
            IsolationLevel::ReadUncommitted => 0,
            IsolationLevel::ReadCommitted => 1,
        }
    }
}

/// A topic to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTopic {
    pub name: String,
    pub partitions: i32,
    /// -1 = the broker's `default.replication.factor`.
    pub replication_factor: i16,
    pub configs: Vec<(String, String)>,
}

impl NewTopic {
    /// A topic with the broker's default replication factor and no config overrides.
    pub fn new(name: impl Into<String>, partitions: i32) -> Self {
        NewTopic {
            name: name.into(),
            partitions,
            replication_factor: -1,
            configs: Vec::new(),
        }
    }

    pub fn replication_factor(mut self, rf: i16) -> Self {
        self.replication_factor = rf;
        self
    }

    pub fn config(mut self, key: &str, value: &str) -> Self {
        self.configs.push((key.to_string(), value.to_string()));
        self
    }
}

/// Where a config value comes from (`DescribeConfigs` `config_source`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigSource {
    Unknown,
    DynamicTopic,
    DynamicBroker,
    DynamicDefaultBroker,
    StaticBroker,
    Default,
    DynamicBrokerLogger,
    ClientMetrics,
    Group,
}

impl ConfigSource {
    fn from_wire(v: i8) -> Self {
        match v {
            1 => ConfigSource::DynamicTopic,
            2 => ConfigSource::DynamicBroker,
            3 => ConfigSource::DynamicDefaultBroker,
            4 => ConfigSource::StaticBroker,
            5 => ConfigSource::Default,
            6 => ConfigSource::DynamicBrokerLogger,
            7 => ConfigSource::ClientMetrics,
            8 => ConfigSource::Group,
            _ => ConfigSource::Unknown,
        }
    }
}

/// One config entry of a resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigEntry {
    pub name: String,
    pub value: Option<String>,
    pub source: ConfigSource,
    pub read_only: bool,
    pub sensitive: bool,
}

impl ConfigEntry {
    /// MM2's "default": the value comes from the built-in default, not from any override.
    pub fn is_default(&self) -> bool {
        self.source == ConfigSource::Default
    }
}

/// An incremental config change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AlterConfigOp {
    Set(String, String),
    /// Reset to the default.
    Delete(String),
}

/// A group as ListGroups reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedGroup {
    pub group_id: String,
    pub protocol_type: String,
    /// `Stable`, `Empty`, `Dead`, `PreparingRebalance`, ... (empty when the broker is too old
    /// to say).
    pub state: String,
    /// `classic`, `consumer`, ... (empty when not reported).
    pub group_type: String,
}

/// A group as DescribeGroups reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDescription {
    pub group_id: String,
    /// `Stable`, `Empty`, `Dead`, `PreparingRebalance`, `CompletingRebalance`, ...
    pub state: String,
    pub protocol_type: String,
    pub members: usize,
}

/// A committed offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedOffset {
    pub offset: i64,
    /// The commit's metadata string (`""` when the client sent null, as the Java client reads it).
    pub metadata: String,
}

/// An ACL binding, as the wire encodes it (Kafka's numeric codes).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct AclBinding {
    pub resource_type: i8,
    pub resource_name: String,
    pub pattern_type: i8,
    pub principal: String,
    pub host: String,
    pub operation: i8,
    pub permission_type: i8,
}

/// FindCoordinator's key type of a consumer group.
const KEY_TYPE_GROUP: i8 = 0;

/// ACL codes (`AclOperation`, `AclPermissionType`, `ResourceType`, `PatternType`).
pub mod acl {
    pub const RESOURCE_ANY: i8 = 1;
    pub const RESOURCE_TOPIC: i8 = 2;
    pub const RESOURCE_GROUP: i8 = 3;
    pub const RESOURCE_CLUSTER: i8 = 4;
    pub const RESOURCE_TRANSACTIONAL_ID: i8 = 5;
    pub const PATTERN_ANY: i8 = 1;
    pub const PATTERN_LITERAL: i8 = 3;
    pub const PATTERN_PREFIXED: i8 = 4;
    pub const OPERATION_ANY: i8 = 1;
    pub const OPERATION_ALL: i8 = 2;
    pub const OPERATION_READ: i8 = 3;
    pub const OPERATION_WRITE: i8 = 4;
    pub const OPERATION_CREATE: i8 = 5;
    pub const OPERATION_DESCRIBE: i8 = 8;
    pub const PERMISSION_ANY: i8 = 1;
    pub const PERMISSION_DENY: i8 = 2;
    pub const PERMISSION_ALLOW: i8 = 3;
}

/// The admin client of one cluster.
pub struct Cluster {
    alias: String,
    bootstrap: Vec<String>,
    setup: ConnSetup,
    retry: RetryConfig,
    metadata: RefCell<Metadata>,
    conns: RefCell<HashMap<String, BrokerConn>>,
    coordinators: RefCell<HashMap<String, i32>>,
    /// Transaction coordinators by transactional id (`txn.rs`).
    txn_coordinators: RefCell<HashMap<String, i32>>,
}

impl fmt::Debug for Cluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cluster")
            .field("alias", &self.alias)
            .field("bootstrap", &self.bootstrap)
            .finish()
    }
}

type Result<T, E = ClusterError> = std::result::Result<T, E>;

fn sb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

impl Cluster {
    pub fn new(alias: &str, bootstrap: Vec<String>, setup: ConnSetup, retry: RetryConfig) -> Self {
        Cluster {
            alias: alias.to_string(),
            bootstrap,
            setup,
            retry,
            metadata: RefCell::new(Metadata::default()),
            conns: RefCell::new(HashMap::new()),
            coordinators: RefCell::new(HashMap::new()),
            txn_coordinators: RefCell::new(HashMap::new()),
        }
    }

    pub fn alias(&self) -> &str {
        &self.alias
    }

    pub fn setup(&self) -> &ConnSetup {
        &self.setup
    }

    fn ctx(&self, api: &'static str) -> Context {
        Context::new(&self.alias, api).principal(authz::principal(&self.setup.config))
    }

    /// A connection to `addr`, reusing a healthy one. One whose SASL session ends soon is
    /// replaced (its requests in flight finish on it; see `BrokerConn::should_replace`).
    pub async fn conn_to(
        &self,
        addr: &str,
    ) -> Result<BrokerConn, strait_dataplane::wire::WireError> {
        if let Some(c) = self.conns.borrow().get(addr)
            && !c.is_failed()
            && !c.should_replace(std::time::Instant::now())
        {
            return Ok(c.clone());
        }
        let c = BrokerConn::connect(addr, &self.setup).await?;
        self.conns.borrow_mut().insert(addr.to_string(), c.clone());
        Ok(c)
    }

    /// Any live broker: known brokers first, then the bootstrap list.
    pub async fn any_conn(&self) -> Result<BrokerConn> {
        let mut candidates: Vec<String> =
            self.metadata.borrow().brokers.values().cloned().collect();
        for b in &self.bootstrap {
            if !candidates.contains(b) {
                candidates.push(b.clone());
            }
        }
        let mut tried = Vec::new();
        for addr in candidates {
            match self.conn_to(&addr).await {
                Ok(c) => return Ok(c),
                Err(e) => {
                    // Authentication and TLS trust failures will not differ between brokers.
                    if !e.is_retriable() {
                        return Err(ClusterError::wire(self.ctx("connect"), e));
                    }
                    tried.push((addr, e.to_string()));
                }
            }
        }
        Err(ClusterError::Unreachable {
            cluster: self.alias.clone(),
            tried,
        })
    }

    async fn node_conn(&self, node: i32, api: &'static str) -> Result<BrokerConn> {
        let addr = self.metadata.borrow().brokers.get(&node).cloned();
        let addr = match addr {
            Some(a) => a,
            None => {
                self.refresh_metadata(Some(&[])).await?;
                self.metadata
                    .borrow()
                    .brokers
                    .get(&node)
                    .cloned()
                    .ok_or_else(|| ClusterError::BrokerGone {
                        context: Box::new(self.ctx(api)),
                        node,
                    })?
            }
        };
        self.conn_to(&addr)
            .await
            .map_err(|e| ClusterError::wire(self.ctx(api).broker(&addr), e))
    }

    /// Runs `op` until it succeeds, fails with a final error, or the attempts run out. Between
    /// attempts it sleeps with exponential backoff and refreshes metadata.
    async fn retrying<T, F, Fut>(&self, api: &'static str, mut op: F) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        let mut attempt = 0;
        loop {
            match op().await {
                Ok(v) => return Ok(v),
                Err(e) if e.is_retriable() && attempt + 1 < self.retry.max_attempts => {
                    tracing::debug!(cluster = %self.alias, api, attempt, error = %e, "retrying");
                    tokio::time::sleep(self.retry.backoff(attempt)).await;
                    attempt += 1;
                    self.coordinators.borrow_mut().clear();
                    self.txn_coordinators.borrow_mut().clear();
                    // Best effort: if metadata fails too, the next attempt reports it.
                    let _ = self.refresh_metadata_once(None).await;
                }
                Err(e) if e.is_retriable() => {
                    let context = e.context().cloned().unwrap_or_else(|| self.ctx(api));
                    return Err(ClusterError::RetriesExhausted {
                        context: Box::new(context),
                        attempts: attempt + 1,
                        last: Box::new(e),
                    });
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Sends `req` to any broker (with retries) and returns the broker's address with the
    /// response, so that errors in the response can name the broker.
    async fn any_call<R: kafka_protocol::protocol::Request>(
        &self,
        api: &'static str,
        topic: Option<&str>,
        req: &R,
    ) -> Result<(String, R::Response)> {
        self.retrying(api, || async {
            let conn = self.any_conn().await?;
            let mut ctx = self.ctx(api).broker(conn.broker());
            if let Some(t) = topic {
                ctx = ctx.topic(t);
            }
            let resp = conn
                .call(req)
                .await
                .map_err(|e| ClusterError::wire(ctx, e))?;
            Ok((conn.broker().to_string(), resp))
        })
        .await
    }

    /// The cached metadata.
    pub fn metadata(&self) -> Metadata {
        self.metadata.borrow().clone()
    }

    /// Cached metadata of one topic.
    pub fn topic(&self, name: &str) -> Option<TopicMeta> {
        self.metadata.borrow().topics.get(name).cloned()
    }

    /// The leader of `tp` (of the topic with id `topic_id`) as the cached metadata names it:
    /// its address and epoch; `None` when the cache knows no leader for it.
    pub fn cached_leader(&self, tp: &TopicPartition, topic_id: [u8; 16]) -> Option<Leader> {
        let md = self.metadata.borrow();
        let t = md
            .topics
            .get(&tp.topic)
            .filter(|t| t.topic_id == topic_id)?;
        let p = t
            .partition(tp.partition)
            .filter(|p| p.leader >= 0 && p.error_code == 0)?;
        Some(Leader {
            addr: md.brokers.get(&p.leader)?.clone(),
            epoch: p.leader_epoch,
        })
    }

    /// Refreshes metadata (with retries). `None` = all topics; `Some(&[])` = brokers only.
    /// Returns the new snapshot: every topic cached for `None`, else only the topics asked
    /// for (a copy of the whole cache, 10 000 partitions and their replica lists, at every
    /// refresh of one internal topic was a good part of an idle run's control CPU).
    pub async fn refresh_metadata(&self, topics: Option<&[&str]>) -> Result<Metadata> {
        let owned: Option<Vec<String>> = topics.map(|t| t.iter().map(|s| s.to_string()).collect());
        self.retrying("Metadata", || self.refresh_metadata_once(owned.as_deref()))
            .await
    }

    async fn refresh_metadata_once(&self, topics: Option<&[String]>) -> Result<Metadata> {
        let conn = self.any_conn().await?;
        let req = MetadataRequest::default()
            .with_allow_auto_topic_creation(false)
            .with_topics(topics.map(|ts| {
                ts.iter()
                    .map(|t| MetadataRequestTopic::default().with_name(Some(TopicName(sb(t)))))
                    .collect()
            }));
        let resp = conn
            .call(&req)
            .await
            .map_err(|e| ClusterError::wire(self.ctx("Metadata"), e))?;
        let mut md = self.metadata.borrow_mut();
        md.cluster_id = resp.cluster_id.map(|s| s.to_string());
        md.controller_id = resp.controller_id.0;
        md.brokers = resp
            .brokers
            .iter()
            .map(|b| (b.node_id.0, format!("{}:{}", b.host.as_str(), b.port)))
            .collect();
        if topics.is_none() {
            md.topics.clear();
        }
        for t in resp.topics {
            let Some(name) = t.name.map(|n| n.0.to_string()) else {
                continue;
            };
            if t.error_code != 0 {
                // Unknown (deleted) topics disappear from the cache; others keep old data.
                if t.error_code == ResponseError::UnknownTopicOrPartition.code() {
                    md.topics.remove(&name);
                }
                continue;
            }
            let mut partitions: Vec<PartitionMeta> = t
                .partitions
                .iter()
                .map(|p| PartitionMeta {
                    partition: p.partition_index,
                    leader: p.leader_id.0,
                    leader_epoch: p.leader_epoch,
                    replicas: p.replica_nodes.iter().map(|b| b.0).collect(),
                    isr: p.isr_nodes.iter().map(|b| b.0).collect(),
                    error_code: p.error_code,
                })
                .collect();
            partitions.sort_by_key(|p| p.partition);
            md.topics.insert(
                name.clone(),
                TopicMeta {
                    name,
                    topic_id: *t.topic_id.as_bytes(),
                    is_internal: t.is_internal,
                    partitions,
                },
            );
        }
        Ok(match topics {
            None => md.clone(),
            Some(asked) => Metadata {
                cluster_id: md.cluster_id.clone(),
                controller_id: md.controller_id,
                brokers: md.brokers.clone(),
                topics: asked
                    .iter()
                    .filter_map(|t| md.topics.get(t).map(|m| (t.clone(), m.clone())))
                    .collect(),
            },
        })
    }

    /// The leader of a partition from cached metadata (refreshing once if unknown).
    pub async fn leader(&self, tp: &TopicPartition, api: &'static str) -> Result<i32> {
        let lookup = |md: &Metadata| {
            md.topics
                .get(&tp.topic)
                .and_then(|t| t.partition(tp.partition))
                .map(|p| p.leader)
        };
        let mut leader = lookup(&self.metadata.borrow());
        if leader.is_none_or(|l| l < 0) {
            self.refresh_metadata_once(Some(std::slice::from_ref(&tp.topic)))
                .await?;
            leader = lookup(&self.metadata.borrow());
        }
        let ctx = || Box::new(self.ctx(api).topic(&tp.topic).partition(tp.partition));
        match leader {
            None => Err(ClusterError::UnknownTopicOrPartition { context: ctx() }),
            Some(l) if l < 0 => Err(ClusterError::NoLeader { context: ctx() }),
            Some(l) => Ok(l),
        }
    }

    /// A connection to the leader of `tp`.
    pub async fn leader_conn(&self, tp: &TopicPartition, api: &'static str) -> Result<BrokerConn> {
        let leader = self.leader(tp, api).await?;
        self.node_conn(leader, api).await
    }

    /// Runs `op` with retries (exponential backoff, metadata refresh between attempts).
    pub async fn with_retries<T, F, Fut>(&self, api: &'static str, op: F) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        self.retrying(api, op).await
    }

    /// ListOffsets for many partitions, routed to their leaders. Each partition gets its own
    /// result; retriable errors are retried per partition.
    pub async fn list_offsets(
        &self,
        partitions: &[TopicPartition],
        spec: OffsetSpec,
        isolation: IsolationLevel,
    ) -> BTreeMap<TopicPartition, Result<i64>> {
        let mut results = BTreeMap::new();
        let mut todo: Vec<TopicPartition> = partitions.to_vec();
        let mut attempt = 0;
        while !todo.is_empty() {
            let mut retry = Vec::new();
            let mut by_leader: BTreeMap<i32, Vec<TopicPartition>> = BTreeMap::new();
            for tp in todo.drain(..) {
                match self.leader(&tp, "ListOffsets").await {
                    Ok(l) => by_leader.entry(l).or_default().push(tp),
                    Err(e) => {
                        results.insert(tp.clone(), Err(e.clone()));
                        retry.push((tp, e));
                    }
                }
            }
            for (leader, tps) in by_leader {
                let outcome = self.list_offsets_on(leader, &tps, spec, isolation).await;
                match outcome {
                    Ok(per) => {
                        for (tp, r) in per {
                            if let Err(e) = &r
                                && e.is_retriable()
                            {
                                retry.push((tp.clone(), e.clone()));
                            }
                            results.insert(tp, r);
                        }
                    }
                    Err(e) => {
                        for tp in tps {
                            results.insert(tp.clone(), Err(e.clone()));
                            if e.is_retriable() {
                                retry.push((tp, e.clone()));
                            }
                        }
                    }
                }
            }
            attempt += 1;
            if retry.is_empty() || attempt >= self.retry.max_attempts {
                break;
            }
            tokio::time::sleep(self.retry.backoff(attempt - 1)).await;
            let _ = self.refresh_metadata_once(None).await;
            todo = retry.into_iter().map(|(tp, _)| tp).collect();
        }
        results
    }

    async fn list_offsets_on(
        &self,
        leader: i32,
        tps: &[TopicPartition],
        spec: OffsetSpec,
        isolation: IsolationLevel,
    ) -> Result<Vec<(TopicPartition, Result<i64>)>> {
        let conn = self.node_conn(leader, "ListOffsets").await?;
        let broker = conn.broker().to_string();
        let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
        for tp in tps {
            by_topic.entry(&tp.topic).or_default().push(tp.partition);
        }
        let req = ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_isolation_level(isolation.wire())
            .with_topics(
                by_topic
                    .iter()
                    .map(|(t, ps)| {
                        ListOffsetsTopic::default()
                            .with_name(TopicName(sb(t)))
                            .with_partitions(
                                ps.iter()
                                    .map(|p| {
                                        ListOffsetsPartition::default()
                                            .with_partition_index(*p)
                                            .with_current_leader_epoch(-1)
                                            .with_timestamp(spec.wire())
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            );
        let resp = conn
            .call(&req)
            .await
            .map_err(|e| ClusterError::wire(self.ctx("ListOffsets").broker(&broker), e))?;
        let mut out = Vec::new();
        for t in resp.topics {
            let topic = t.name.0.to_string();
            for p in t.partitions {
                let tp = TopicPartition::new(&topic, p.partition_index);
                let ctx = self
                    .ctx("ListOffsets")
                    .broker(&broker)
                    .topic(&topic)
                    .partition(p.partition_index);
                let r = match ClusterError::kafka(ctx, p.error_code, None) {
                    Some(e) => Err(e),
                    None => Ok(p.offset),
                };
                out.push((tp, r));
            }
        }
        Ok(out)
    }

    /// Creates topics; each gets its own result (TopicAlreadyExists included, for the caller to
    /// judge).
    pub async fn create_topics(
        &self,
        topics: &[NewTopic],
        timeout_ms: i32,
    ) -> Result<Vec<(String, Result<()>)>> {
        let req = CreateTopicsRequest::default()
            .with_timeout_ms(timeout_ms)
            .with_topics(
                topics
                    .iter()
                    .map(|t| {
                        CreatableTopic::default()
                            .with_name(TopicName(sb(&t.name)))
                            .with_num_partitions(t.partitions)
                            .with_replication_factor(t.replication_factor)
                            .with_configs(
                                t.configs
                                    .iter()
                                    .map(|(k, v)| {
                                        CreatableTopicConfig::default()
                                            .with_name(sb(k))
                                            .with_value(Some(sb(v)))
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            );
        // Any broker forwards CreateTopics to the KRaft controller.
        let (broker, resp) = self.any_call("CreateTopics", None, &req).await?;
        Ok(resp
            .topics
            .into_iter()
            .map(|t| {
                let name = t.name.0.to_string();
                let ctx = self.ctx("CreateTopics").broker(&broker).topic(&name);
                let r = match ClusterError::kafka(
                    ctx,
                    t.error_code,
                    t.error_message.map(|m| m.to_string()),
                ) {
                    Some(e) => Err(e),
                    None => Ok(()),
                };
                (name, r)
            })
            .collect())
    }

    /// Creates one topic; `TopicAlreadyExists` is an error like any other.
    pub async fn create_topic(&self, topic: NewTopic, timeout_ms: i32) -> Result<()> {
        let name = topic.name.clone();
        self.create_topics(std::slice::from_ref(&topic), timeout_ms)
            .await?
            .into_iter()
            .next()
            .map(|(_, r)| r)
            .unwrap_or_else(|| {
                Err(ClusterError::Invalid {
                    context: Box::new(self.ctx("CreateTopics").topic(&name)),
                    message: "the response does not mention the topic".into(),
                })
            })
    }

    /// Waits until every partition of `topic` has a leader (a topic just created takes a moment),
    /// at most `timeout_ms`.
    pub async fn wait_for_leaders(&self, topic: &str, timeout_ms: u64) -> Result<()> {
        let deadline = tokio::time::Instant::now() + Duration::from_millis(timeout_ms);
        loop {
            let ready = self
                .refresh_metadata_once(Some(&[topic.to_string()]))
                .await
                .ok()
                .and_then(|md| md.topics.get(topic).cloned())
                .is_some_and(|t| {
                    !t.partitions.is_empty() && t.partitions.iter().all(|p| p.leader >= 0)
                });
            if ready {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(ClusterError::NoLeader {
                    context: Box::new(self.ctx("Metadata").topic(topic)),
                });
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Grows a topic to `count` partitions.
    pub async fn create_partitions(&self, topic: &str, count: i32, timeout_ms: i32) -> Result<()> {
        let req = CreatePartitionsRequest::default()
            .with_timeout_ms(timeout_ms)
            .with_topics(vec![
                CreatePartitionsTopic::default()
                    .with_name(TopicName(sb(topic)))
                    .with_count(count)
                    .with_assignments(None),
            ]);
        let (broker, resp) = self.any_call("CreatePartitions", Some(topic), &req).await?;
        for r in resp.results {
            let ctx = self.ctx("CreatePartitions").broker(&broker).topic(topic);
            if let Some(e) =
                ClusterError::kafka(ctx, r.error_code, r.error_message.map(|m| m.to_string()))
            {
                return Err(e);
            }
        }
        Ok(())
    }

    /// The configs of topics (resource type 2). Per-topic errors are reported per topic.
    pub async fn describe_topic_configs(
        &self,
        topics: &[String],
    ) -> Result<BTreeMap<String, Result<Vec<ConfigEntry>>>> {
        const TOPIC: i8 = 2;
        let req = DescribeConfigsRequest::default().with_resources(
            topics
                .iter()
                .map(|t| {
                    DescribeConfigsResource::default()
                        .with_resource_type(TOPIC)
                        .with_resource_name(sb(t))
                        .with_configuration_keys(None)
                })
                .collect(),
        );
        let (broker, resp) = self.any_call("DescribeConfigs", None, &req).await?;
        let mut out = BTreeMap::new();
        for r in resp.results {
            let name = r.resource_name.to_string();
            let ctx = self.ctx("DescribeConfigs").broker(&broker).topic(&name);
            let entry = match ClusterError::kafka(
                ctx,
                r.error_code,
                r.error_message.map(|m| m.to_string()),
            ) {
                Some(e) => Err(e),
                None => Ok(r
                    .configs
                    .into_iter()
                    .map(|c| ConfigEntry {
                        name: c.name.to_string(),
                        value: c.value.map(|v| v.to_string()),
                        source: ConfigSource::from_wire(c.config_source),
                        read_only: c.read_only,
                        sensitive: c.is_sensitive,
                    })
                    .collect()),
            };
            out.insert(name, entry);
        }
        Ok(out)
    }

    /// Applies incremental config changes to one topic.
    pub async fn alter_topic_configs(&self, topic: &str, ops: &[AlterConfigOp]) -> Result<()> {
        const TOPIC: i8 = 2;
        const SET: i8 = 0;
        const DELETE: i8 = 1;
        let req = IncrementalAlterConfigsRequest::default().with_resources(vec![
            AlterConfigsResource::default()
                .with_resource_type(TOPIC)
                .with_resource_name(sb(topic))
                .with_configs(
                    ops.iter()
                        .map(|op| match op {
                            AlterConfigOp::Set(k, v) => AlterableConfig::default()
                                .with_name(sb(k))
                                .with_config_operation(SET)
                                .with_value(Some(sb(v))),
                            AlterConfigOp::Delete(k) => AlterableConfig::default()
                                .with_name(sb(k))
                                .with_config_operation(DELETE)
                                .with_value(None),
                        })
                        .collect(),
                ),
        ]);
        let (broker, resp) = self
            .any_call("IncrementalAlterConfigs", Some(topic), &req)
            .await?;
        for r in resp.responses {
            let ctx = self
                .ctx("IncrementalAlterConfigs")
                .broker(&broker)
                .topic(topic);
            if let Some(e) =
                ClusterError::kafka(ctx, r.error_code, r.error_message.map(|m| m.to_string()))
            {
                return Err(e);
            }
        }
        Ok(())
    }

    /// Every group of the cluster: ListGroups must ask every broker, since each coordinates
    /// its own share.
    pub async fn list_groups(&self) -> Result<Vec<ListedGroup>> {
        let md = self.refresh_metadata(Some(&[])).await?;
        let mut out = Vec::new();
        for (node, addr) in md.brokers {
            let groups = self
                .retrying("ListGroups", || async {
                    let conn = self.node_conn(node, "ListGroups").await?;
                    let resp = conn
                        .call(&ListGroupsRequest::default())
                        .await
                        .map_err(|e| ClusterError::wire(self.ctx("ListGroups").broker(&addr), e))?;
                    if let Some(e) = ClusterError::kafka(
                        self.ctx("ListGroups").broker(&addr),
                        resp.error_code,
                        None,
                    ) {
                        return Err(e);
                    }
                    Ok(resp.groups)
                })
                .await?;
            out.extend(groups.into_iter().map(|g| ListedGroup {
                group_id: g.group_id.0.to_string(),
                protocol_type: g.protocol_type.to_string(),
                state: g.group_state.to_string(),
                group_type: g.group_type.to_string(),
            }));
        }
        out.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        out.dedup_by(|a, b| a.group_id == b.group_id);
        Ok(out)
    }

    /// The coordinator of a group (cached until a routing error).
    pub async fn coordinator(&self, group: &str) -> Result<i32> {
        if let Some(n) = self.coordinators.borrow().get(group) {
            return Ok(*n);
        }
        let ctx = self.ctx("FindCoordinator").group(group);
        let node = self.find_coordinator(KEY_TYPE_GROUP, group, &ctx).await?;
        self.coordinators
            .borrow_mut()
            .insert(group.to_string(), node);
        Ok(node)
    }

    /// FindCoordinator for `key` of `key_type` ([`KEY_TYPE_GROUP`], or a transactional id's) on
    /// any broker, with retries; `ctx` names what is looked up.
    async fn find_coordinator(&self, key_type: i8, key: &str, ctx: &Context) -> Result<i32> {
        self.retrying("FindCoordinator", || async {
            let conn = self.any_conn().await?;
            let ctx = ctx.clone().broker(conn.broker());
            let version = conn
                .version_for::<FindCoordinatorRequest>()
                .map_err(|e| ClusterError::wire(ctx.clone(), e))?;
            // v4+ batches keys; before that one key per request.
            let req = if version >= 4 {
                FindCoordinatorRequest::default()
                    .with_key_type(key_type)
                    .with_coordinator_keys(vec![sb(key)])
            } else {
                FindCoordinatorRequest::default()
                    .with_key(sb(key))
                    .with_key_type(key_type)
            };
            let resp = conn
                .send(&req, version)
                .await
                .map_err(|e| ClusterError::wire(ctx.clone(), e))?
                .decode::<FindCoordinatorRequest>()
                .await
                .map_err(|e| ClusterError::wire(ctx.clone(), e))?;
            let (code, msg, node) = match resp.coordinators.first() {
                Some(c) => (c.error_code, c.error_message.clone(), c.node_id.0),
                None => (resp.error_code, resp.error_message.clone(), resp.node_id.0),
            };
            match ClusterError::kafka(ctx, code, msg.map(|m| m.to_string())) {
                Some(e) => Err(e),
                None => Ok(node),
            }
        })
        .await
    }

    async fn coordinator_conn(&self, group: &str, api: &'static str) -> Result<BrokerConn> {
        let node = self.coordinator(group).await?;
        // A coordinator that cannot be reached may have died: ask again which broker it is
        // (FindCoordinator) next time, or the group would call a dead broker forever.
        self.node_conn(node, api).await.inspect_err(|_| {
            self.coordinators.borrow_mut().remove(group);
        })
    }

    /// Describes groups (each through its coordinator).
    pub async fn describe_groups(&self, groups: &[String]) -> Result<Vec<GroupDescription>> {
        let mut out = Vec::new();
        for group in groups {
            let d = self
                .retrying("DescribeGroups", || async {
                    let conn = self.coordinator_conn(group, "DescribeGroups").await?;
                    let ctx = self
                        .ctx("DescribeGroups")
                        .broker(conn.broker())
                        .group(group);
                    let resp = conn
                        .call(
                            &DescribeGroupsRequest::default().with_groups(vec![GroupId(sb(group))]),
                        )
                        .await
                        .map_err(|e| ClusterError::wire(ctx.clone(), e))?;
                    let g =
                        resp.groups
                            .into_iter()
                            .next()
                            .ok_or_else(|| ClusterError::Invalid {
                                context: Box::new(ctx.clone()),
                                message: "empty DescribeGroups response".into(),
                            })?;
                    if let Some(e) = ClusterError::kafka(
                        ctx,
                        g.error_code,
                        g.error_message.map(|m| m.to_string()),
                    ) {
                        if e.is(ResponseError::NotCoordinator)
                            || e.is(ResponseError::CoordinatorNotAvailable)
                        {
                            self.coordinators.borrow_mut().remove(group);
                        }
                        return Err(e);
                    }
                    Ok(GroupDescription {
                        group_id: group.clone(),
                        state: g.group_state.to_string(),
                        protocol_type: g.protocol_type.to_string(),
                        members: g.members.len(),
                    })
                })
                .await?;
            out.push(d);
        }
        Ok(out)
    }

    /// Deletes an empty group and its committed offsets (a non-empty group answers
    /// NON_EMPTY_GROUP; one that does not exist, GROUP_ID_NOT_FOUND).
    pub async fn delete_group(&self, group: &str) -> Result<()> {
        self.retrying("DeleteGroups", || async {
            let conn = self.coordinator_conn(group, "DeleteGroups").await?;
            let ctx = self.ctx("DeleteGroups").broker(conn.broker()).group(group);
            let resp = conn
                .call(&DeleteGroupsRequest::default().with_groups_names(vec![GroupId(sb(group))]))
                .await
                .map_err(|e| ClusterError::wire(ctx.clone(), e))?;
            let code = resp
                .results
                .iter()
                .find(|r| r.group_id.0.as_str() == group)
                .map(|r| r.error_code)
                .ok_or_else(|| ClusterError::Invalid {
                    context: Box::new(ctx.clone()),
                    message: "the DeleteGroups response does not mention the group".into(),
                })?;
            if let Some(e) = ClusterError::kafka(ctx, code, None) {
                if e.is(ResponseError::NotCoordinator)
                    || e.is(ResponseError::CoordinatorNotAvailable)
                {
                    self.coordinators.borrow_mut().remove(group);
                }
                return Err(e);
            }
            Ok(())
        })
        .await
    }

    /// A group's committed offsets (all partitions it has committed).
    pub async fn offset_fetch(
        &self,
        group: &str,
    ) -> Result<BTreeMap<TopicPartition, CommittedOffset>> {
        self.retrying("OffsetFetch", || async {
            let conn = self.coordinator_conn(group, "OffsetFetch").await?;
            let ctx = self.ctx("OffsetFetch").broker(conn.broker()).group(group);
            let req = OffsetFetchRequest::default()
                .with_group_id(GroupId(sb(group)))
                .with_topics(None)
                .with_require_stable(true);
            let version = conn
                .version_for::<OffsetFetchRequest>()
                .map_err(|e| ClusterError::wire(ctx.clone(), e))?;
            let resp = conn
                .send(&req, version)
                .await
                .map_err(|e| ClusterError::wire(ctx.clone(), e))?
                .decode::<OffsetFetchRequest>()
                .await
                .map_err(|e| ClusterError::wire(ctx.clone(), e))?;
            if let Some(e) = ClusterError::kafka(ctx.clone(), resp.error_code, None) {
                if e.is(ResponseError::NotCoordinator)
                    || e.is(ResponseError::CoordinatorNotAvailable)
                {
                    self.coordinators.borrow_mut().remove(group);
                }
                return Err(e);
            }
            let mut out = BTreeMap::new();
            for t in resp.topics {
                let topic = t.name.0.to_string();
                for p in t.partitions {
                    let pctx = ctx.clone().topic(&topic).partition(p.partition_index);
                    if let Some(e) = ClusterError::kafka(pctx, p.error_code, None) {
                        return Err(e);
                    }
                    if p.committed_offset < 0 {
                        continue; // no commit for this partition
                    }
                    out.insert(
                        TopicPartition::new(&topic, p.partition_index),
                        CommittedOffset {
                            offset: p.committed_offset,
                            metadata: p.metadata.map(|m| m.to_string()).unwrap_or_default(),
                        },
                    );
                }
            }
            Ok(out)
        })
        .await
    }

    /// Commits offsets for a group as an administrator (no member id, generation -1). The
    /// broker accepts this only for groups with no active members; an active group answers
    /// UnknownMemberId or IllegalGeneration, which come back per partition.
    pub async fn offset_commit(
        &self,
        group: &str,
        offsets: &BTreeMap<TopicPartition, CommittedOffset>,
    ) -> Result<BTreeMap<TopicPartition, Result<()>>> {
        let mut by_topic: BTreeMap<&str, Vec<(i32, &CommittedOffset)>> = BTreeMap::new();
        for (tp, o) in offsets {
            by_topic
                .entry(&tp.topic)
                .or_default()
                .push((tp.partition, o));
        }
        let req = OffsetCommitRequest::default()
            .with_group_id(GroupId(sb(group)))
            .with_generation_id_or_member_epoch(-1)
            .with_member_id(StrBytes::new())
            .with_topics(
                by_topic
                    .iter()
                    .map(|(t, ps)| {
                        OffsetCommitRequestTopic::default()
                            .with_name(TopicName(sb(t)))
                            .with_partitions(
                                ps.iter()
                                    .map(|(p, o)| {
                                        OffsetCommitRequestPartition::default()
                                            .with_partition_index(*p)
                                            .with_committed_offset(o.offset)
                                            .with_committed_leader_epoch(-1)
                                            .with_committed_metadata(Some(sb(&o.metadata)))
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            );
        let resp = self
            .retrying("OffsetCommit", || async {
                let conn = self.coordinator_conn(group, "OffsetCommit").await?;
                let ctx = self.ctx("OffsetCommit").broker(conn.broker()).group(group);
                let resp = conn
                    .call(&req)
                    .await
                    .map_err(|e| ClusterError::wire(ctx.clone(), e))?;
                // A coordinator move fails every partition alike: retry the whole request.
                let moved = resp.topics.iter().flat_map(|t| &t.partitions).any(|p| {
                    p.error_code == ResponseError::NotCoordinator.code()
                        || p.error_code == ResponseError::CoordinatorNotAvailable.code()
                        || p.error_code == ResponseError::CoordinatorLoadInProgress.code()
                });
                if moved {
                    self.coordinators.borrow_mut().remove(group);
                    return Err(ClusterError::kafka(
                        ctx,
                        ResponseError::NotCoordinator.code(),
                        None,
                    )
                    .expect("non-zero code"));
                }
                Ok((conn.broker().to_string(), resp))
            })
            .await?;
        let (broker, resp) = resp;
        let mut out = BTreeMap::new();
        for t in resp.topics {
            let topic = t.name.0.to_string();
            for p in t.partitions {
                let ctx = self
                    .ctx("OffsetCommit")
                    .broker(&broker)
                    .group(group)
                    .topic(&topic)
                    .partition(p.partition_index);
                let r = match ClusterError::kafka(ctx, p.error_code, None) {
                    Some(e) => Err(e),
                    None => Ok(()),
                };
                out.insert(TopicPartition::new(&topic, p.partition_index), r);
            }
        }
        Ok(out)
    }

    /// A fresh idempotent (non-transactional) producer id and epoch.
    pub async fn init_producer_id(&self) -> Result<(i64, i16)> {
        self.retrying("InitProducerId", || async {
            let conn = self.any_conn().await?;
            let ctx = self.ctx("InitProducerId").broker(conn.broker());
            let req = InitProducerIdRequest::default()
                .with_transactional_id(None)
                .with_transaction_timeout_ms(-1)
                .with_producer_id((-1).into())
                .with_producer_epoch(-1);
            let resp = conn
                .call(&req)
                .await
                .map_err(|e| ClusterError::wire(ctx.clone(), e))?;
            match ClusterError::kafka(ctx, resp.error_code, None) {
                Some(e) => Err(e),
                None => Ok((resp.producer_id.0, resp.producer_epoch)),
            }
        })
        .await
    }

    /// ACLs on topics, any pattern. `Ok(None)` when the cluster has no authorizer
    /// (SecurityDisabled), which MM2 also treats as "nothing to sync".
    pub async fn describe_topic_acls(&self) -> Result<Option<Vec<AclBinding>>> {
        let req = DescribeAclsRequest::default()
            .with_resource_type_filter(acl::RESOURCE_TOPIC)
            .with_resource_name_filter(None)
            .with_pattern_type_filter(acl::PATTERN_ANY)
            .with_principal_filter(None)
            .with_host_filter(None)
            .with_operation(acl::OPERATION_ANY)
            .with_permission_type(acl::PERMISSION_ANY);
        let (broker, resp) = self.any_call("DescribeAcls", None, &req).await?;
        if resp.error_code == ResponseError::SecurityDisabled.code() {
            return Ok(None);
        }
        if let Some(e) = ClusterError::kafka(
            self.ctx("DescribeAcls").broker(&broker),
            resp.error_code,
            resp.error_message.map(|m| m.to_string()),
        ) {
            return Err(e);
        }
        let mut out = Vec::new();
        for r in resp.resources {
            for a in r.acls {
                out.push(AclBinding {
                    resource_type: r.resource_type,
                    resource_name: r.resource_name.to_string(),
                    pattern_type: r.pattern_type,
                    principal: a.principal.to_string(),
                    host: a.host.to_string(),
                    operation: a.operation,
                    permission_type: a.permission_type,
                });
            }
        }
        Ok(Some(out))
    }

    /// Creates ACL bindings; each gets its own result.
    pub async fn create_acls(&self, bindings: &[AclBinding]) -> Result<Vec<Result<()>>> {
        let req = CreateAclsRequest::default().with_creations(
            bindings
                .iter()
                .map(|b| {
                    AclCreation::default()
                        .with_resource_type(b.resource_type)
                        .with_resource_name(sb(&b.resource_name))
                        .with_resource_pattern_type(b.pattern_type)
                        .with_principal(sb(&b.principal))
                        .with_host(sb(&b.host))
                        .with_operation(b.operation)
                        .with_permission_type(b.permission_type)
                })
                .collect(),
        );
        let (broker, resp) = self.any_call("CreateAcls", None, &req).await?;
        Ok(resp
            .results
            .into_iter()
            .zip(bindings)
            .map(|(r, b)| {
                let ctx = self
                    .ctx("CreateAcls")
                    .broker(&broker)
                    .topic(&b.resource_name);
                match ClusterError::kafka(ctx, r.error_code, r.error_message.map(|m| m.to_string()))
                {
                    Some(e) => Err(e),
                    None => Ok(()),
                }
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_is_bounded_and_grows() {
        let r = RetryConfig::default();
        assert_eq!(r.backoff(0), Duration::from_millis(100));
        assert_eq!(r.backoff(1), Duration::from_millis(200));
        assert_eq!(r.backoff(10), Duration::from_millis(2_000));
        assert_eq!(r.backoff(u32::MAX), Duration::from_millis(2_000));
    }
}
