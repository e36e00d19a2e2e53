//! From a resolved `mm2.properties` to what the control loop runs.
#![deny(clippy::disallowed_methods)]

use strait_dataplane::shard::{
    Acks as WireAcks, BackoffSettings, FetchSettings, IsolationLevel as WireIsolation,
    ProduceSettings,
};
use strait_dataplane::wire::ConnConfig;

use crate::config::{
    Acks, AutoOffsetReset, ConsumerSettings, FlowConfig, IsolationLevel, Mm2Config,
    ProducerSettings,
};

/// One enabled flow, reduced to what the control loop needs.
pub struct FlowPlan {
    /// The whole resolved flow configuration (intervals, filters, policy, client settings) for
    /// the periodic duties.
    pub config: FlowConfig,
    pub source: String,
    pub target: String,
    /// Consumer-side connection to the source (fetching).
    pub source_fetch: ConnConfig,
    /// Producer-side connection to the target.
    pub target_produce: ConnConfig,
    pub source_admin: ConnConfig,
    pub target_admin: ConnConfig,
    pub source_bootstrap: Vec<String>,
    pub target_bootstrap: Vec<String>,
    /// Whether a source topic is replicated (filters, internal topics, cycles).
    pub should_replicate: Box<dyn Fn(&str) -> bool>,
    /// The remote name of a source topic.
    pub remote_name: Box<dyn Fn(&str) -> String>,
    /// Remote topics' replication factor (-1 = the target's default).
    pub replication_factor: i16,
    pub progress_replication_factor: i16,
    /// `strait.mapping.max.runs.per.partition`.
    pub mapping_max_runs: usize,
    pub fetch: FetchSettings,
    pub produce: ProduceSettings,
    /// `auto.offset.reset=earliest` (MM2's default) for partitions without progress.
    pub start_at_earliest: bool,
}

impl std::fmt::Debug for FlowPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FlowPlan({}->{})", self.source, self.target)
    }
}

/// Why a flow cannot be planned. Never retriable: the config must change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// A client the flow needs has no `bootstrap.servers`.
    #[error("{flow}: {cluster}.bootstrap.servers is not set")]
    NoBootstrap { flow: String, cluster: String },
    /// `acks=0`: strait needs each batch's target offset back.
    #[error("{flow}: acks=0 cannot work for strait: it needs each batch's target offset back")]
    AcksNone { flow: String },
    /// An `auto.offset.reset` strait does not implement (the config check refuses it too).
    #[error(
        "{flow}: auto.offset.reset={value} is not supported by strait (use earliest or latest)"
    )]
    OffsetReset { flow: String, value: String },
}

fn addrs(c: &crate::config::ClientConfig) -> Vec<String> {
    c.bootstrap_servers.iter().map(|a| a.to_string()).collect()
}

/// A client's `reconnect.backoff.*` and `retry.backoff.*` (validated as integers >= 0 by the
/// config check; Kafka's defaults where unset).
fn backoff(c: &crate::config::ClientConfig) -> BackoffSettings {
    let d = BackoffSettings::default();
    let get = |key: &str, default: u64| {
        c.properties
            .get(key)
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(default)
    };
    BackoffSettings {
        reconnect_ms: get("reconnect.backoff.ms", d.reconnect_ms),
        reconnect_max_ms: get("reconnect.backoff.max.ms", d.reconnect_max_ms),
        retry_ms: get("retry.backoff.ms", d.retry_ms),
        retry_max_ms: get("retry.backoff.max.ms", d.retry_max_ms),
    }
}

/// The plan of one enabled flow. Fails when a client the flow needs has no bootstrap servers.
pub fn flow_plan(cfg: &Mm2Config, flow: &FlowConfig) -> Result<FlowPlan, PlanError> {
    let c = &flow.clients;
    let source_bootstrap = addrs(&c.source_consumer.client);
    let target_bootstrap = addrs(&c.target_producer.client);
    if source_bootstrap.is_empty() {
        return Err(PlanError::NoBootstrap {
            flow: flow.name(),
            cluster: flow.source.clone(),
        });
    }
    if target_bootstrap.is_empty() {
        return Err(PlanError::NoBootstrap {
            flow: flow.name(),
            cluster: flow.target.clone(),
        });
    }
    let consumer = &c.source_consumer;
    let producer = &c.target_producer;
    let fetch = fetch_settings(consumer);
    let produce = produce_settings(flow, producer)?;
    let start_at_earliest = match &consumer.auto_offset_reset.value {
        AutoOffsetReset::Earliest => true,
        AutoOffsetReset::Latest => false,
        other => {
            return Err(PlanError::OffsetReset {
                flow: flow.name(),
                value: format!("{other:?}"),
            });
        }
    };
    let f1 = flow.clone();
    let f2 = flow.clone();
    Ok(FlowPlan {
        config: flow.clone(),
        source: flow.source.clone(),
        target: flow.target.clone(),
        source_fetch: consumer.client.conn.clone(),
        target_produce: producer.client.conn.clone(),
        source_admin: c.source_admin.client.conn.clone(),
        target_admin: c.target_admin.client.conn.clone(),
        source_bootstrap,
        target_bootstrap,
        should_replicate: Box::new(move |t| f1.should_replicate_topic(t)),
        remote_name: Box::new(move |t| f2.remote_topic(t)),
        replication_factor: flow.replication_factor.value,
        progress_replication_factor: flow.progress_topic_replication_factor.value,
        mapping_max_runs: cfg.strait.mapping_max_runs_per_partition.value,
        fetch,
        produce,
        start_at_earliest,
    })
}

/// What the shards fetch with, from the source consumer's settings.
fn fetch_settings(consumer: &ConsumerSettings) -> FetchSettings {
    let max_bytes = consumer.fetch_max_bytes.value.min(i32::MAX as u32) as i32;
    let partition_max_bytes = consumer
        .max_partition_fetch_bytes
        .value
        .min(i32::MAX as u32) as i32;
    FetchSettings {
        isolation_level: match consumer.isolation_level.value {
            IsolationLevel::ReadCommitted => WireIsolation::ReadCommitted,
            IsolationLevel::ReadUncommitted => WireIsolation::ReadUncommitted,
        },
        max_wait_ms: consumer.fetch_max_wait_ms.value as i32,
        min_bytes: consumer.fetch_min_bytes.value as i32,
        max_bytes,
        partition_max_bytes,
        // A size the user chose is kept; Kafka's default is where a partition starts, and it
        // grows while the partition is behind (a round trip moves at most one ask).
        partition_ceiling_bytes: if consumer.max_partition_fetch_bytes.is_set() {
            partition_max_bytes
        } else {
            max_bytes
        },
        backoff: backoff(&consumer.client),
    }
}

/// What the shards produce with, from the target producer's settings.
fn produce_settings(
    flow: &FlowConfig,
    producer: &ProducerSettings,
) -> Result<ProduceSettings, PlanError> {
    let acks = match producer.acks.value {
        Acks::All => WireAcks::All,
        Acks::Leader => WireAcks::Leader,
        Acks::None => {
            return Err(PlanError::AcksNone { flow: flow.name() });
        }
    };
    Ok(ProduceSettings {
        acks,
        timeout_ms: producer
            .client
            .request_timeout_ms
            .value
            .min(i32::MAX as u64) as i32,
        max_in_flight_per_partition: producer
            .max_in_flight_requests_per_connection
            .value
            .clamp(1, 5) as usize,
        delivery_timeout_ms: producer
            .client
            .properties
            .get("delivery.timeout.ms")
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(ProduceSettings::default().delivery_timeout_ms),
        max_request_bytes: producer.max_request_size.value as usize,
        batch_bytes: producer.batch_size.value as usize,
        backoff: backoff(&producer.client),
    })
}

/// Plans for every enabled flow.
pub fn plans(cfg: &Mm2Config) -> Result<Vec<FlowPlan>, PlanError> {
    cfg.enabled_flows().map(|f| flow_plan(cfg, f)).collect()
}
