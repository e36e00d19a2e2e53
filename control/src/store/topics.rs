//! Creating the internal topics strait and MM2 keep their state in.

use crate::cluster::{Cluster, ClusterError, NewTopic};

/// Creates a one-partition compacted topic unless it exists (MM2's
/// `createSinglePartitionCompactedTopic`).
pub async fn ensure_compacted_topic(
    cluster: &Cluster,
    topic: &str,
    replication_factor: i16,
) -> Result<(), ClusterError> {
    let md = cluster.refresh_metadata(Some(&[topic])).await?;
    if md.topics.contains_key(topic) {
        return Ok(());
    }
    let topic_spec = NewTopic::new(topic, 1)
        .replication_factor(replication_factor)
        .config("cleanup.policy", "compact");
    match cluster.create_topic(topic_spec, 30_000).await {
        Err(e) if !e.is(kafka_protocol::ResponseError::TopicAlreadyExists) => return Err(e),
        _ => {}
    }
    cluster.wait_for_leaders(topic, 30_000).await
}

/// MM2's `createSinglePartitionCompactedTopic`: one partition, `cleanup.policy=compact`, the
/// given replication factor. Like MM2, a refusal for lack of authorization or an old broker is
/// logged and ignored, on the assumption that the topic exists or will be created by someone
/// allowed to.
pub async fn ensure_internal_topic(
    cluster: &Cluster,
    topic: &str,
    replication_factor: i16,
) -> Result<(), ClusterError> {
    use kafka_protocol::ResponseError as E;
    match ensure_compacted_topic(cluster, topic, replication_factor).await {
        Err(e)
            if e.is(E::TopicAuthorizationFailed)
                || e.is(E::ClusterAuthorizationFailed)
                || e.is(E::UnsupportedVersion) =>
        {
            tracing::warn!(topic, cluster = cluster.alias(), error = %e, "cannot create the internal topic; assuming it exists");
            Ok(())
        }
        other => other,
    }
}
