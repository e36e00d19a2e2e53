//! Errors of the admin client. Every error names the cluster, and where they apply the broker,
//! the API, the topic and partition, or the group.

use std::fmt;

use kafka_protocol::ResponseError;
use strait_dataplane::wire::WireError;

/// Where in the cluster an error happened.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Context {
    pub cluster: String,
    pub broker: Option<String>,
    pub api: &'static str,
    pub topic: Option<String>,
    pub partition: Option<i32>,
    pub group: Option<String>,
    /// The principal the client authenticates as, when its settings say (see
    /// [`super::authz::principal`]); authorization errors name it.
    pub principal: Option<String>,
    /// The group member (group membership calls).
    pub member: Option<String>,
    /// The group generation (group membership calls).
    pub generation: Option<i32>,
    /// The transactional id (transaction calls).
    pub transactional_id: Option<String>,
}

impl Context {
    pub fn new(cluster: &str, api: &'static str) -> Self {
        Context {
            cluster: cluster.to_string(),
            api,
            ..Context::default()
        }
    }

    pub fn broker(mut self, b: &str) -> Self {
        self.broker = Some(b.to_string());
        self
    }

    pub fn topic(mut self, t: &str) -> Self {
        self.topic = Some(t.to_string());
        self
    }

    pub fn partition(mut self, p: i32) -> Self {
        self.partition = Some(p);
        self
    }

    pub fn group(mut self, g: &str) -> Self {
        self.group = Some(g.to_string());
        self
    }

    pub fn transactional_id(mut self, id: &str) -> Self {
        self.transactional_id = Some(id.to_string());
        self
    }

    pub fn principal(mut self, p: Option<String>) -> Self {
        self.principal = p;
        self
    }

    pub fn member(mut self, m: &str, generation: i32) -> Self {
        self.member = (!m.is_empty()).then(|| m.to_string());
        self.generation = (generation >= 0).then_some(generation);
        self
    }
}

impl fmt::Display for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} on cluster {}", self.api, self.cluster)?;
        if let Some(b) = &self.broker {
            write!(f, " (broker {b})")?;
        }
        match (&self.topic, self.partition) {
            (Some(t), Some(p)) => write!(f, " for {t}-{p}")?,
            (Some(t), None) => write!(f, " for topic {t}")?,
            _ => {}
        }
        if let Some(g) = &self.group {
            write!(f, " for group {g}")?;
        }
        if let Some(t) = &self.transactional_id {
            write!(f, " for transactional id {t}")?;
        }
        if let Some(m) = &self.member {
            write!(f, " (member {m})")?;
        }
        if let Some(g) = self.generation {
            write!(f, " (generation {g})")?;
        }
        Ok(())
    }
}

#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ClusterError {
    /// The connection failed (the wire error names the broker).
    #[error("{context}: {source}")]
    Wire {
        context: Box<Context>,
        #[source]
        source: WireError,
    },
    /// The broker answered with a Kafka error code.
    #[error("{}", kafka_text(context, *error, message.as_deref()))]
    Kafka {
        context: Box<Context>,
        error: ResponseError,
        message: Option<String>,
    },
    /// No broker of the cluster could be reached.
    #[error("cluster {cluster} is unreachable; tried {}", tried.iter().map(|(a, e)| format!("{a} ({e})")).collect::<Vec<_>>().join(", "))]
    Unreachable {
        cluster: String,
        tried: Vec<(String, String)>,
    },
    /// Metadata does not know the topic or partition.
    #[error("{context}: unknown topic or partition")]
    UnknownTopicOrPartition { context: Box<Context> },
    /// A partition has no leader right now.
    #[error("{context}: no leader")]
    NoLeader { context: Box<Context> },
    /// Cached metadata names a broker (a leader, a coordinator) that the cluster's current
    /// metadata no longer lists: it stopped or left. Retriable: the next attempt refreshes the
    /// metadata and finds who took over.
    #[error("{context}: broker {node} is not in metadata (it stopped or left the cluster)")]
    BrokerGone { context: Box<Context>, node: i32 },
    /// A retriable error persisted through every attempt.
    #[error("{context}: gave up after {attempts} attempts: {last}")]
    RetriesExhausted {
        context: Box<Context>,
        attempts: u32,
        last: Box<ClusterError>,
    },
    /// The broker's answer did not make sense.
    #[error("{context}: {message}")]
    Invalid {
        context: Box<Context>,
        message: String,
    },
}

impl ClusterError {
    pub fn kafka(context: Context, code: i16, message: Option<String>) -> Option<ClusterError> {
        ResponseError::try_from_code(code).map(|error| ClusterError::Kafka {
            context: Box::new(context),
            error,
            message,
        })
    }

    pub fn wire(context: Context, source: WireError) -> ClusterError {
        let context = match context.broker {
            Some(_) => context,
            None => context.broker(source.broker()),
        };
        ClusterError::Wire {
            context: Box::new(context),
            source,
        }
    }

    /// Whether trying again (after a metadata refresh) may succeed.
    pub fn is_retriable(&self) -> bool {
        match self {
            ClusterError::Wire { source, .. } => source.is_retriable(),
            ClusterError::Kafka { error, .. } => error.is_retriable() || is_routing_error(*error),
            ClusterError::Unreachable { .. }
            | ClusterError::NoLeader { .. }
            | ClusterError::BrokerGone { .. } => true,
            ClusterError::UnknownTopicOrPartition { .. } => true,
            ClusterError::RetriesExhausted { .. } | ClusterError::Invalid { .. } => false,
        }
    }

    /// The Kafka error code, if this is a broker-reported error.
    pub fn kafka_error(&self) -> Option<ResponseError> {
        match self {
            ClusterError::Kafka { error, .. } => Some(*error),
            ClusterError::RetriesExhausted { last, .. } => last.kafka_error(),
            _ => None,
        }
    }

    pub fn is(&self, e: ResponseError) -> bool {
        self.kafka_error() == Some(e)
    }

    /// The topic or partition does not exist (the broker's error code, or metadata without it).
    pub fn is_unknown_topic(&self) -> bool {
        self.is(ResponseError::UnknownTopicOrPartition)
            || matches!(self, ClusterError::UnknownTopicOrPartition { .. })
    }

    pub fn context(&self) -> Option<&Context> {
        match self {
            ClusterError::Wire { context, .. }
            | ClusterError::Kafka { context, .. }
            | ClusterError::UnknownTopicOrPartition { context }
            | ClusterError::NoLeader { context }
            | ClusterError::BrokerGone { context, .. }
            | ClusterError::RetriesExhausted { context, .. }
            | ClusterError::Invalid { context, .. } => Some(context),
            ClusterError::Unreachable { .. } => None,
        }
    }
}

/// `context: error: message`, and for an authorization error who may not do what where.
fn kafka_text(context: &Context, error: ResponseError, message: Option<&str>) -> String {
    let mut text = format!("{context}: {error}");
    if let Some(m) = message {
        text.push_str(": ");
        text.push_str(m);
    }
    let missing = super::authz::missing_permission(
        context.api,
        error,
        context.topic.as_deref(),
        context.group.as_deref(),
        context.transactional_id.as_deref(),
    );
    if let Some(missing) = missing {
        text.push_str(": ");
        text.push_str(&super::authz::explain(
            &missing,
            context.principal.as_deref(),
            &context.cluster,
        ));
    }
    text
}

/// Errors that mean our routing (leader or coordinator) is stale.
pub fn is_routing_error(e: ResponseError) -> bool {
    matches!(
        e,
        ResponseError::NotLeaderOrFollower
            | ResponseError::LeaderNotAvailable
            | ResponseError::NotCoordinator
            | ResponseError::CoordinatorNotAvailable
            | ResponseError::CoordinatorLoadInProgress
            | ResponseError::NotController
            | ResponseError::FencedLeaderEpoch
            | ResponseError::UnknownLeaderEpoch
            | ResponseError::UnknownTopicOrPartition
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_everything() {
        let ctx = Context::new("source", "ListOffsets")
            .broker("127.0.0.1:9092")
            .topic("orders")
            .partition(3);
        let e = ClusterError::kafka(ctx, 6, Some("moved".into())).unwrap();
        let text = e.to_string();
        for part in [
            "ListOffsets",
            "source",
            "127.0.0.1:9092",
            "orders-3",
            "NotLeaderOrFollower",
            "moved",
        ] {
            assert!(text.contains(part), "{text} lacks {part}");
        }
        assert!(e.is_retriable());
        assert!(ClusterError::kafka(Context::new("c", "x"), 0, None).is_none());
    }

    #[test]
    fn a_broker_gone_from_metadata_is_retried() {
        // A leader or coordinator that stopped: the next attempt refreshes metadata and finds
        // its successor (final, a SIGTERM during a broker outage lost the last progress flush).
        let e = ClusterError::BrokerGone {
            context: Box::new(Context::new("T", "Produce").topic("p").partition(0)),
            node: 2,
        };
        assert!(e.is_retriable());
        assert_eq!(
            e.to_string(),
            "Produce on cluster T for p-0: broker 2 is not in metadata (it stopped or left the cluster)"
        );
    }

    #[test]
    fn authorization_errors_are_final() {
        let e =
            ClusterError::kafka(Context::new("c", "CreateTopics").topic("t"), 29, None).unwrap();
        assert!(!e.is_retriable());
        assert!(e.is(ResponseError::TopicAuthorizationFailed));
        let ctx = Context::new("B", "CreateTopics")
            .topic("A.t")
            .principal(Some("User:mirror".into()));
        let text = ClusterError::kafka(ctx, 29, None).unwrap().to_string();
        assert!(
            text.contains("principal User:mirror may not CREATE topic A.t on cluster B"),
            "{text}"
        );
    }
}
