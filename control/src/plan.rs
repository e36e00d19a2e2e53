//! From a resolved `mm2.properties` to what the control loop runs.

use strait_dataplane::shard::{FetchSettings, ProduceSettings};

use crate::config::{Acks, AutoOffsetReset, FlowConfig, IsolationLevel, Mm2Config};
use crate::replicate::FlowPlan;

fn addrs(c: &crate::config::ClientConfig) -> Vec<String> {
    c.bootstrap_servers.iter().map(|a| a.to_string()).collect()
}

/// The plan of one enabled flow. Fails when a client the flow needs has no bootstrap servers.
pub fn flow_plan(cfg: &Mm2Config, flow: &FlowConfig) -> Result<FlowPlan, String> {
    let c = &flow.clients;
    let source_bootstrap = addrs(&c.source_consumer.client);
    let target_bootstrap = addrs(&c.target_producer.client);
    if source_bootstrap.is_empty() {
        return Err(format!(
            "{}: {}.bootstrap.servers is not set",
            flow.name(),
            flow.source
        ));
    }
    if target_bootstrap.is_empty() {
        return Err(format!(
            "{}: {}.bootstrap.servers is not set",
            flow.name(),
            flow.target
        ));
    }
    let consumer = &c.source_consumer;
    let fetch = FetchSettings {
        isolation_level: match consumer.isolation_level.value {
            IsolationLevel::ReadCommitted => 1,
            IsolationLevel::ReadUncommitted => 0,
        },
        max_wait_ms: consumer.fetch_max_wait_ms.value as i32,
        min_bytes: consumer.fetch_min_bytes.value as i32,
        max_bytes: consumer.fetch_max_bytes.value.min(i32::MAX as u32) as i32,
        partition_max_bytes: consumer
            .max_partition_fetch_bytes
            .value
            .min(i32::MAX as u32) as i32,
    };
    let producer = &c.target_producer;
    let acks = match producer.acks.value {
        Acks::All => -1,
        Acks::Leader => 1,
        Acks::None => {
            return Err(format!(
                "{}: acks=0 cannot work for strait: it needs each batch's target offset back",
                flow.name()
            ));
        }
    };
    let produce = ProduceSettings {
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
        ..ProduceSettings::default()
    };
    let start_at_earliest = match &consumer.auto_offset_reset.value {
        AutoOffsetReset::Earliest => true,
        AutoOffsetReset::Latest => false,
        other => {
            return Err(format!(
                "{}: auto.offset.reset={other:?} is not supported by strait yet (use earliest or latest)",
                flow.name()
            ));
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
        progress_replication_factor: cfg.strait.progress_topic_replication_factor.value,
        fetch,
        produce,
        start_at_earliest,
    })
}

/// Plans for every enabled flow.
pub fn plans(cfg: &Mm2Config) -> Result<Vec<FlowPlan>, String> {
    cfg.enabled_flows().map(|f| flow_plan(cfg, f)).collect()
}
