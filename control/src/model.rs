//! Value types shared by every layer: what a partition is called, how a topic id is shown.
//! No IO, no clock, no dependency on another module of the crate.
#![deny(clippy::disallowed_methods)]

pub mod counters;
pub mod mapping_cost;

use std::fmt;

/// A topic and partition.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopicPartition {
    pub topic: String,
    pub partition: i32,
}

impl TopicPartition {
    pub fn new(topic: impl Into<String>, partition: i32) -> Self {
        TopicPartition {
            topic: topic.into(),
            partition,
        }
    }
}

impl fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

/// Formats a topic id like Kafka's tools do (URL-safe base64 without padding).
pub fn topic_id_display(id: &[u8; 16]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_partition_display() {
        assert_eq!(TopicPartition::new("a.b", 3).to_string(), "a.b-3");
    }

    #[test]
    fn topic_ids_show_as_kafka_shows_them() {
        assert_eq!(topic_id_display(&[0; 16]), "AAAAAAAAAAAAAAAAAAAAAA");
    }
}
