//! Cluster chores for the harness: connection settings, topic creation and deletion, and
//! partition leaders, on top of strait's own admin client.
#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, anyhow, bail};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::{DeleteTopicsRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use strait_control::cluster::{Cluster, NewTopic, RetryConfig};
use strait_dataplane::io::{ConnSetup, IoBackend};
use strait_dataplane::wire::ConnConfig;

/// Wall-clock microseconds since the Unix epoch: what record stamps carry.
pub fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

/// PLAINTEXT connection settings for the bench's own clients.
pub fn conn_config(client_id: &str, max_in_flight: usize) -> ConnConfig {
    ConnConfig {
        client_id: client_id.to_string(),
        max_in_flight_requests: max_in_flight.max(1),
        ..ConnConfig::default()
    }
}

/// An admin client for `bootstrap` (PLAINTEXT).
pub fn admin(alias: &str, bootstrap: &str, backend: IoBackend) -> Result<Cluster> {
    let setup = ConnSetup::new(conn_config("strait-bench-admin", 8), backend)
        .context("connection settings")?;
    Ok(Cluster::new(
        alias,
        vec![bootstrap.to_string()],
        setup,
        RetryConfig::default(),
    ))
}

/// Creates `topic` with `partitions` partitions and `replication_factor` replicas (1 on the
/// single-broker test bed, 3 on the fault clusters).
pub async fn create_topic(
    cluster: &Cluster,
    topic: &str,
    partitions: i32,
    replication_factor: i16,
    configs: &[(&str, &str)],
) -> Result<()> {
    let new = configs.iter().fold(
        NewTopic::new(topic, partitions).replication_factor(replication_factor),
        |t, (k, v)| t.config(k, v),
    );
    cluster
        .create_topic(new, 60_000)
        .await
        .with_context(|| format!("creating topic {topic} on {}", cluster.alias()))?;
    Ok(())
}

/// `partition → leader address` of `topic`, once every partition has a leader; `None` while
/// the topic does not exist yet or has fewer than `partitions` partitions.
pub async fn leaders(
    cluster: &Cluster,
    topic: &str,
    partitions: i32,
) -> Result<Option<BTreeMap<i32, String>>> {
    let md = cluster
        .refresh_metadata(Some(&[topic]))
        .await
        .with_context(|| format!("metadata of {topic} on {}", cluster.alias()))?;
    let Some(t) = md.topics.get(topic) else {
        return Ok(None);
    };
    if t.partitions.len() < partitions as usize {
        return Ok(None);
    }
    let mut out = BTreeMap::new();
    for p in &t.partitions {
        if p.leader < 0 {
            return Ok(None);
        }
        let addr = md.brokers.get(&p.leader).ok_or_else(|| {
            anyhow!(
                "leader {} of {topic}-{} is not a known broker",
                p.leader,
                p.partition
            )
        })?;
        out.insert(p.partition, addr.clone());
    }
    Ok(Some(out))
}

/// Waits until `topic` exists with `partitions` led partitions, up to `timeout`.
pub async fn wait_for_leaders(
    cluster: &Cluster,
    topic: &str,
    partitions: i32,
    timeout: Duration,
) -> Result<BTreeMap<i32, String>> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(l) = leaders(cluster, topic, partitions).await? {
            return Ok(l);
        }
        if tokio::time::Instant::now() >= deadline {
            bail!(
                "topic {topic} on {} has no leaders for {partitions} partitions after {} s",
                cluster.alias(),
                timeout.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Names of every topic on the cluster.
pub async fn list_topics(cluster: &Cluster) -> Result<Vec<String>> {
    let md = cluster
        .refresh_metadata(None)
        .await
        .with_context(|| format!("listing topics of {}", cluster.alias()))?;
    Ok(md.topics.keys().cloned().collect())
}

/// Deletes topics (missing ones are fine). Returns the names deleted.
pub async fn delete_topics(cluster: &Cluster, names: &[String]) -> Result<Vec<String>> {
    if names.is_empty() {
        return Ok(Vec::new());
    }
    let conn = cluster
        .any_conn()
        .await
        .with_context(|| format!("connecting to {}", cluster.alias()))?;
    let version = conn.version_for::<DeleteTopicsRequest>()?;
    let req = if version >= 6 {
        DeleteTopicsRequest::default().with_topics(
            names
                .iter()
                .map(|n| {
                    DeleteTopicState::default()
                        .with_name(Some(TopicName(StrBytes::from_string(n.clone()))))
                })
                .collect(),
        )
    } else {
        DeleteTopicsRequest::default().with_topic_names(
            names
                .iter()
                .map(|n| TopicName(StrBytes::from_string(n.clone())))
                .collect(),
        )
    }
    .with_timeout_ms(60_000);
    let resp = conn
        .send(&req, version)
        .await?
        .decode::<DeleteTopicsRequest>()
        .await
        .with_context(|| format!("DeleteTopics on {}", cluster.alias()))?;
    let mut deleted = Vec::new();
    for r in resp.responses {
        let name = r.name.map(|n| n.0.to_string()).unwrap_or_default();
        match kafka_protocol::ResponseError::try_from_code(r.error_code) {
            None => deleted.push(name),
            Some(kafka_protocol::ResponseError::UnknownTopicOrPartition) => {}
            Some(e) => bail!("deleting topic {name} on {}: {e}", cluster.alias()),
        }
    }
    Ok(deleted)
}
