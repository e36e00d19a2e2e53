//! Calls that ask the cluster what the authenticated principal may do, without changing
//! anything (KIP-430 authorized operations, validate-only creation): the pre-flight of
//! `strait check --connect`.

use std::collections::BTreeMap;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    CreateTopicsRequest, DescribeClusterRequest, DescribeGroupsRequest, GroupId, MetadataRequest,
    TopicName,
};

use super::{Cluster, ClusterError, Result, sb};

/// What the principal may do on one topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TopicAccess {
    /// The topic exists; bit `1 << code` is set for each allowed `AclOperation` code.
    Exists { operations: i32 },
    /// The topic does not exist (or the principal may not even DESCRIBE it: Kafka answers
    /// TopicAuthorizationFailed then, see [`TopicAccess::Hidden`]).
    Absent,
    /// The principal may not DESCRIBE the topic.
    Hidden,
}

impl Cluster {
    /// The operations the principal may perform on each of `topics` (Metadata with
    /// `include_topic_authorized_operations`).
    pub async fn topic_access(&self, topics: &[String]) -> Result<BTreeMap<String, TopicAccess>> {
        let req = MetadataRequest::default()
            .with_allow_auto_topic_creation(false)
            .with_include_topic_authorized_operations(true)
            .with_topics(Some(
                topics
                    .iter()
                    .map(|t| MetadataRequestTopic::default().with_name(Some(TopicName(sb(t)))))
                    .collect(),
            ));
        let (_, resp) = self.any_call("Metadata", None, &req).await?;
        let mut out = BTreeMap::new();
        for t in resp.topics {
            let Some(name) = t.name.map(|n| n.0.to_string()) else {
                continue;
            };
            let access = match ResponseError::try_from_code(t.error_code) {
                None => TopicAccess::Exists {
                    operations: t.topic_authorized_operations,
                },
                Some(ResponseError::TopicAuthorizationFailed) => TopicAccess::Hidden,
                Some(_) => TopicAccess::Absent,
            };
            out.insert(name, access);
        }
        Ok(out)
    }

    /// Whether the principal may create `topic` (CreateTopics with `validate_only`: nothing is
    /// created). `Ok(Err(_))` carries the broker's refusal.
    pub async fn may_create(&self, topic: &str) -> Result<Result<()>> {
        let req = CreateTopicsRequest::default()
            .with_validate_only(true)
            .with_timeout_ms(10_000)
            .with_topics(vec![
                CreatableTopic::default()
                    .with_name(TopicName(sb(topic)))
                    .with_num_partitions(-1)
                    .with_replication_factor(-1),
            ]);
        let (broker, resp) = self.any_call("CreateTopics", Some(topic), &req).await?;
        let code = resp.topics.first().map_or(0, |t| t.error_code);
        let ctx = self.ctx("CreateTopics").broker(&broker).topic(topic);
        Ok(match ClusterError::kafka(ctx, code, None) {
            Some(e) if !e.is(ResponseError::TopicAlreadyExists) => Err(e),
            _ => Ok(()),
        })
    }

    /// The operations the principal may perform on the cluster resource (DescribeCluster with
    /// `include_cluster_authorized_operations`), as bits like [`TopicAccess::Exists`].
    pub async fn cluster_operations(&self) -> Result<i32> {
        let req =
            DescribeClusterRequest::default().with_include_cluster_authorized_operations(true);
        let (broker, resp) = self.any_call("DescribeCluster", None, &req).await?;
        match ClusterError::kafka(
            self.ctx("DescribeCluster").broker(&broker),
            resp.error_code,
            resp.error_message.map(|m| m.to_string()),
        ) {
            Some(e) => Err(e),
            None => Ok(resp.cluster_authorized_operations),
        }
    }

    /// The operations the principal may perform on `group` (FindCoordinator, then DescribeGroups
    /// with `include_authorized_operations`). A principal without DESCRIBE on the group gets
    /// GroupAuthorizationFailed, which comes back as the error.
    pub async fn group_operations(&self, group: &str) -> Result<i32> {
        let conn = self.coordinator_conn(group, "DescribeGroups").await?;
        let ctx = self
            .ctx("DescribeGroups")
            .broker(conn.broker())
            .group(group);
        let req = DescribeGroupsRequest::default()
            .with_groups(vec![GroupId(sb(group))])
            .with_include_authorized_operations(true);
        let resp = conn
            .call(&req)
            .await
            .map_err(|e| ClusterError::wire(ctx.clone(), e))?;
        let g = resp.groups.into_iter().next();
        let code = g.as_ref().map_or(0, |g| g.error_code);
        match ClusterError::kafka(ctx, code, None) {
            Some(e) if e.is(ResponseError::GroupAuthorizationFailed) => Err(e),
            _ => Ok(g.map_or(i32::MIN, |g| g.authorized_operations)),
        }
    }
}
