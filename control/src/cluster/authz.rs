//! What a Kafka authorization error means in ACL terms: the operation the refused API needs on
//! which resource, and the principal strait authenticated as, so that a refusal says who may
//! not do what where (and what to grant). Sans-IO.

use std::fmt;

use kafka_protocol::ResponseError;
use strait_dataplane::wire::{ConnConfig, OAuthLogin, SaslCredentials};

/// A resource an ACL protects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resource {
    Topic(String),
    Group(String),
    Cluster,
    /// A transactional id, when the call's context names it.
    TransactionalId(Option<String>),
    /// The transactional ids that start with a prefix (an ACL of pattern type PREFIXED).
    TransactionalIdPrefix(String),
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Resource::Topic(t) => write!(f, "topic {t}"),
            Resource::Group(g) => write!(f, "group {g}"),
            Resource::Cluster => f.write_str("the cluster"),
            Resource::TransactionalId(Some(id)) => write!(f, "transactional id {id}"),
            Resource::TransactionalId(None) => f.write_str("the transactional id"),
            Resource::TransactionalIdPrefix(p) => write!(f, "transactional ids with prefix {p}"),
        }
    }
}

/// The permission an authorization error says is missing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missing {
    /// Kafka's operation name (`AclOperation`), e.g. `WRITE`.
    pub operation: &'static str,
    pub resource: Resource,
}

/// The operation `api` needs on the kind of resource `error` names, for the topic, group or
/// transactional id the call concerned. `None` when `error` is no authorization error or the
/// API is not one strait calls.
pub fn missing_permission(
    api: &str,
    error: ResponseError,
    topic: Option<&str>,
    group: Option<&str>,
    transactional_id: Option<&str>,
) -> Option<Missing> {
    use ResponseError as E;
    let (operation, resource) = match error {
        E::TopicAuthorizationFailed => {
            let op = match api {
                "Produce" => "WRITE",
                "Fetch" | "OffsetCommit" => "READ",
                "CreateTopics" => "CREATE",
                "CreatePartitions" => "ALTER",
                "DescribeConfigs" => "DESCRIBE_CONFIGS",
                "IncrementalAlterConfigs" | "AlterConfigs" => "ALTER_CONFIGS",
                "DeleteTopics" => "DELETE",
                "Metadata" | "ListOffsets" | "OffsetFetch" | "OffsetForLeaderEpoch" => "DESCRIBE",
                _ => return None,
            };
            (op, Resource::Topic(topic.unwrap_or("?").to_string()))
        }
        E::GroupAuthorizationFailed => {
            let op = match api {
                "OffsetCommit" | "JoinGroup" | "SyncGroup" | "Heartbeat" => "READ",
                "DeleteGroups" => "DELETE",
                _ => "DESCRIBE",
            };
            (op, Resource::Group(group.unwrap_or("?").to_string()))
        }
        E::ClusterAuthorizationFailed => {
            let op = match api {
                "CreateAcls" | "DeleteAcls" => "ALTER",
                "InitProducerId" => "IDEMPOTENT_WRITE",
                _ => "DESCRIBE",
            };
            (op, Resource::Cluster)
        }
        E::TransactionalIdAuthorizationFailed => {
            let op = match api {
                "FindCoordinator" => "DESCRIBE",
                _ => "WRITE",
            };
            (
                op,
                Resource::TransactionalId(transactional_id.map(str::to_string)),
            )
        }
        _ => return None,
    };
    Some(Missing {
        operation,
        resource,
    })
}

/// The principal a connection authenticates as, as the broker's default principal builder
/// names it, when the settings alone say so: `User:<username>` for PLAIN and SCRAM, `User:<sub>`
/// for Kafka's unsecured OAUTHBEARER login. `None` for PLAINTEXT and SSL (`User:ANONYMOUS` or
/// the client certificate's subject, depending on the broker) and for tokens from an endpoint.
pub fn principal(conn: &ConnConfig) -> Option<String> {
    match &conn.sasl.as_ref()?.credentials {
        SaslCredentials::Password { username, .. } => Some(format!("User:{username}")),
        SaslCredentials::OAuthBearer(OAuthLogin::Unsecured(u)) if !u.principal().is_empty() => {
            Some(format!("User:{}", u.principal()))
        }
        SaslCredentials::OAuthBearer(_) => None,
    }
}

/// `principal User:mirror may not WRITE topic t on cluster B (grant it ALLOW WRITE on topic t)`.
pub fn explain(missing: &Missing, principal: Option<&str>, cluster: &str) -> String {
    let who = principal.map_or_else(
        || "the principal strait authenticates as".to_string(),
        |p| format!("principal {p}"),
    );
    format!(
        "{who} may not {op} {res} on cluster {cluster} (an ACL must ALLOW {op} on {res} for it)",
        op = missing.operation,
        res = missing.resource,
    )
}

/// A shard's refusal message (`... rejected the batch ...: Topic authorization failed.`) with
/// who may not write what where appended; other messages unchanged. The shard knows the Kafka
/// error, control knows the cluster and the principal.
pub fn explain_rejected_produce(
    error: String,
    target_topic: &str,
    principal: Option<&str>,
    cluster: &str,
) -> String {
    if !error.contains(&ResponseError::TopicAuthorizationFailed.to_string()) {
        return error;
    }
    let missing = Missing {
        operation: "WRITE",
        resource: Resource::Topic(target_topic.to_string()),
    };
    format!("{error}: {}", explain(&missing, principal, cluster))
}

#[cfg(test)]
mod tests {
    use super::*;
    use strait_dataplane::wire::{SaslConfig, SaslMechanism, Secret};

    #[test]
    fn each_refusal_names_the_operation_and_resource() {
        use ResponseError as E;
        let m = |api, e| missing_permission(api, e, Some("t"), Some("g"), None);
        let cases = [
            ("Produce", E::TopicAuthorizationFailed, "WRITE", "topic t"),
            ("Fetch", E::TopicAuthorizationFailed, "READ", "topic t"),
            (
                "CreateTopics",
                E::TopicAuthorizationFailed,
                "CREATE",
                "topic t",
            ),
            (
                "ListOffsets",
                E::TopicAuthorizationFailed,
                "DESCRIBE",
                "topic t",
            ),
            (
                "IncrementalAlterConfigs",
                E::TopicAuthorizationFailed,
                "ALTER_CONFIGS",
                "topic t",
            ),
            (
                "OffsetFetch",
                E::GroupAuthorizationFailed,
                "DESCRIBE",
                "group g",
            ),
            (
                "OffsetCommit",
                E::GroupAuthorizationFailed,
                "READ",
                "group g",
            ),
            (
                "CreateAcls",
                E::ClusterAuthorizationFailed,
                "ALTER",
                "the cluster",
            ),
            (
                "DescribeAcls",
                E::ClusterAuthorizationFailed,
                "DESCRIBE",
                "the cluster",
            ),
            (
                "InitProducerId",
                E::ClusterAuthorizationFailed,
                "IDEMPOTENT_WRITE",
                "the cluster",
            ),
            (
                "InitProducerId",
                E::TransactionalIdAuthorizationFailed,
                "WRITE",
                "the transactional id",
            ),
            (
                "FindCoordinator",
                E::TransactionalIdAuthorizationFailed,
                "DESCRIBE",
                "the transactional id",
            ),
        ];
        for (api, e, op, res) in cases {
            let got = m(api, e).unwrap_or_else(|| panic!("{api} {e:?}"));
            assert_eq!(
                (got.operation, got.resource.to_string().as_str()),
                (op, res),
                "{api}"
            );
        }
        assert_eq!(m("Produce", E::NotLeaderOrFollower), None);
        assert_eq!(m("Frobnicate", E::TopicAuthorizationFailed), None);
    }

    #[test]
    fn the_principal_comes_from_the_sasl_settings_only() {
        let mut conn = ConnConfig::default();
        assert_eq!(principal(&conn), None);
        conn.sasl = Some(SaslConfig::password(
            SaslMechanism::ScramSha512,
            "mirror",
            Secret::new("pw-never-shown"),
        ));
        assert_eq!(principal(&conn).as_deref(), Some("User:mirror"));
        let missing = missing_permission(
            "Produce",
            ResponseError::TopicAuthorizationFailed,
            Some("A.t"),
            None,
            None,
        )
        .unwrap();
        let text = explain(&missing, principal(&conn).as_deref(), "B");
        assert_eq!(
            text,
            "principal User:mirror may not WRITE topic A.t on cluster B (an ACL must ALLOW WRITE on topic A.t for it)"
        );
        assert!(!text.contains("pw-never-shown"));
        assert!(explain(&missing, None, "B").starts_with("the principal strait authenticates as"));
        let refused = format!(
            "target partition A.t-0 rejected the batch: {}",
            ResponseError::TopicAuthorizationFailed
        );
        let text = explain_rejected_produce(refused, "A.t", Some("User:mirror"), "B");
        assert!(text.ends_with("principal User:mirror may not WRITE topic A.t on cluster B (an ACL must ALLOW WRITE on topic A.t for it)"), "{text}");
        let other = "target partition A.t-0 rejected the batch: Corrupt message.".to_string();
        assert_eq!(
            explain_rejected_produce(other.clone(), "A.t", None, "B"),
            other
        );
    }
}
