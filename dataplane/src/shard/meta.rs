//! Leader lookups and producer ids for the shard's own partitions, on a fresh connection to any
//! bootstrap broker. Control owns cluster metadata; a shard only asks "who leads these
//! partitions now?" when a broker tells it its routing is stale, so it can follow a leader move
//! without a round trip through the control thread. IO, used by the driver.

use std::collections::HashMap;
use std::sync::Arc;

use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{InitProducerIdRequest, MetadataRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::channel::ClusterEndpoint;
use super::core::{Leader, Leaders, ProducerIdError};
use super::partition::ProducerIdentity;
use crate::io::{BrokerConn, ConnSetup};
use crate::wire::WireError;

/// Connects to the first reachable bootstrap broker of `endpoint`.
pub async fn any_broker(
    endpoint: &ClusterEndpoint,
    setup: &ConnSetup,
) -> Result<BrokerConn, WireError> {
    let mut last = None;
    for addr in &endpoint.bootstrap {
        match BrokerConn::connect(addr, setup).await {
            Ok(c) => return Ok(c),
            Err(e) if !e.is_retriable() => return Err(e),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| WireError::Connect {
        broker: endpoint.alias.clone(),
        message: "no bootstrap servers configured".to_string(),
    }))
}

/// The current leaders of every partition of `topics`.
pub async fn lookup_leaders(
    endpoint: &ClusterEndpoint,
    setup: &ConnSetup,
    topics: Vec<Arc<str>>,
) -> Result<Leaders, WireError> {
    let conn = any_broker(endpoint, setup).await?;
    let req = MetadataRequest::default()
        .with_allow_auto_topic_creation(false)
        .with_topics(Some(
            topics
                .iter()
                .map(|t| {
                    MetadataRequestTopic::default()
                        .with_name(Some(TopicName(StrBytes::from_string(t.to_string()))))
                })
                .collect(),
        ));
    let resp = conn.call(&req).await?;
    let brokers: HashMap<i32, String> = resp
        .brokers
        .iter()
        .map(|b| (b.node_id.0, format!("{}:{}", b.host.as_str(), b.port)))
        .collect();
    let mut out = Leaders::new();
    for t in resp.topics {
        let Some(name) = t.name else { continue };
        for p in t.partitions {
            let leader = (p.leader_id.0 >= 0)
                .then(|| brokers.get(&p.leader_id.0).cloned())
                .flatten()
                .map(|addr| Leader {
                    addr,
                    epoch: p.leader_epoch,
                });
            out.insert((name.0.to_string(), p.partition_index), leader);
        }
    }
    Ok(out)
}

/// A fresh idempotent producer id and epoch on the cluster.
pub async fn init_producer_id(
    endpoint: &ClusterEndpoint,
    setup: &ConnSetup,
) -> Result<ProducerIdentity, ProducerIdError> {
    let conn = any_broker(endpoint, setup).await?;
    let req = InitProducerIdRequest::default()
        .with_transactional_id(None)
        .with_transaction_timeout_ms(-1)
        .with_producer_id((-1).into())
        .with_producer_epoch(-1);
    let resp = conn.call(&req).await?;
    match kafka_protocol::ResponseError::try_from_code(resp.error_code) {
        None => Ok(ProducerIdentity {
            id: resp.producer_id.0,
            epoch: resp.producer_epoch,
        }),
        Some(error) => Err(ProducerIdError::Refused {
            cluster: endpoint.alias.clone(),
            broker: conn.broker().to_string(),
            error,
        }),
    }
}
