//! The progress store: for every replicated source partition, the next source offset to
//! replicate and the source topic's id, kept in a compacted topic on the target cluster
//! (`strait-progress.<source alias>.internal`, one partition). strait keeps no local state: a
//! restarted instance reads this topic and resumes where the last one stopped.
//!
//! Record layout (JSON, compact, fixed field order, so compaction keys are stable):
//! - key: `{"source":"A","topic":"orders","partition":3}`
//! - value: `{"next_offset":1234,"topic_id":"<32 hex digits>","time_ms":1700000000000,"target_offset":987}`
//!
//! `target_offset` is where the target partition's log ended when `next_offset` was stored (-1
//! when unknown). After a crash, the target may hold records written after the last store;
//! comparing its end with `target_offset` tells how many, so a restart can skip exactly those
//! instead of copying them again.
//!
//! The topic also holds one liveness record per flow (`crate::migrate`), which the import and
//! export commands read to refuse running while replication is active.
//!
//! `next_offset` is the first offset *not* yet replicated (MM2's Connect offsets store the last
//! replicated one; import and export convert).

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use strait_dataplane::batch::Record;

use crate::cluster::{Cluster, ClusterError, IsolationLevel, NewTopic, TopicPartition};
use crate::internal;

/// The progress topic for flows from `source_alias`.
pub fn topic_name(source_alias: &str) -> String {
    format!("strait-progress.{source_alias}.internal")
}

/// Where one source partition stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub next_offset: i64,
    /// The source topic's id when the offset was stored; a recreated topic has another.
    pub topic_id: [u8; 16],
    /// The target partition's log end matching `next_offset`, -1 when unknown.
    pub target_offset: i64,
}

#[derive(Serialize, Deserialize)]
struct Key<'a> {
    source: &'a str,
    topic: &'a str,
    partition: i32,
}

#[derive(Serialize, Deserialize)]
struct Value {
    next_offset: i64,
    topic_id: String,
    time_ms: i64,
    #[serde(default = "unknown_offset")]
    target_offset: i64,
}

fn unknown_offset() -> i64 {
    -1
}

pub fn encode_key(source: &str, tp: &TopicPartition) -> Vec<u8> {
    serde_json::to_vec(&Key {
        source,
        topic: &tp.topic,
        partition: tp.partition,
    })
    .expect("plain structs serialize")
}

pub fn encode_value(entry: &Entry, time_ms: i64) -> Vec<u8> {
    serde_json::to_vec(&Value {
        next_offset: entry.next_offset,
        topic_id: hex(&entry.topic_id),
        time_ms,
        target_offset: entry.target_offset,
    })
    .expect("plain structs serialize")
}

/// Decodes a record of the progress topic; `None` for keys of another source or garbage
/// (which is skipped with a warning by the caller: one bad record must not stop a restart).
pub fn decode(
    source: &str,
    key: &[u8],
    value: Option<&[u8]>,
) -> Result<Option<(TopicPartition, Option<Entry>)>, String> {
    // Running instances keep their liveness records in this topic too (see `migrate`).
    if crate::migrate::is_liveness_key(key) {
        return Ok(None);
    }
    let k: Key<'_> = serde_json::from_slice(key).map_err(|e| format!("bad progress key: {e}"))?;
    if k.source != source {
        return Ok(None);
    }
    let tp = TopicPartition::new(k.topic, k.partition);
    let Some(value) = value else {
        return Ok(Some((tp, None)));
    };
    let v: Value =
        serde_json::from_slice(value).map_err(|e| format!("bad progress value for {tp}: {e}"))?;
    let topic_id = unhex(&v.topic_id).ok_or_else(|| format!("bad topic id for {tp}"))?;
    Ok(Some((
        tp,
        Some(Entry {
            next_offset: v.next_offset,
            topic_id,
            target_offset: v.target_offset,
        }),
    )))
}

fn hex(id: &[u8; 16]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<[u8; 16]> {
    if s.len() != 32 || !s.is_ascii() {
        return None;
    }
    let mut out = [0u8; 16];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

/// Formats a topic id like Kafka's tools do (URL-safe base64 without padding).
pub fn topic_id_display(id: &[u8; 16]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(id)
}

/// The progress of one source cluster's partitions, as stored on one target.
#[derive(Debug)]
pub struct ProgressStore {
    source: String,
    topic: String,
    entries: BTreeMap<TopicPartition, Entry>,
    dirty: BTreeSet<TopicPartition>,
}

impl ProgressStore {
    /// Creates the compacted topic if needed and loads every stored entry.
    pub async fn open(
        target: &Cluster,
        source_alias: &str,
        replication_factor: i16,
    ) -> Result<ProgressStore, ClusterError> {
        let topic = topic_name(source_alias);
        ensure_compacted_topic(target, &topic, replication_factor).await?;
        let mut entries = BTreeMap::new();
        let mut bad = 0usize;
        internal::read_to_end(target, &topic, 0, IsolationLevel::ReadUncommitted, |r| {
            let Some(key) = r.key.as_deref() else {
                bad += 1;
                return;
            };
            match decode(source_alias, key, r.value.as_deref()) {
                Ok(Some((tp, Some(e)))) => {
                    entries.insert(tp, e);
                }
                Ok(Some((tp, None))) => {
                    entries.remove(&tp);
                }
                Ok(None) => {}
                Err(_) => bad += 1,
            }
        })
        .await?;
        if bad > 0 {
            tracing::warn!(topic = %topic, records = bad, "skipped unreadable progress records");
        }
        Ok(ProgressStore {
            source: source_alias.to_string(),
            topic,
            entries,
            dirty: BTreeSet::new(),
        })
    }

    pub fn topic(&self) -> &str {
        &self.topic
    }

    pub fn get(&self, tp: &TopicPartition) -> Option<Entry> {
        self.entries.get(tp).copied()
    }

    pub fn entries(&self) -> &BTreeMap<TopicPartition, Entry> {
        &self.entries
    }

    /// Records new progress (written at the next flush, if it changed).
    pub fn update(&mut self, tp: &TopicPartition, entry: Entry) {
        if self.entries.get(tp) != Some(&entry) {
            self.entries.insert(tp.clone(), entry);
            self.dirty.insert(tp.clone());
        }
    }

    pub fn is_dirty(&self) -> bool {
        !self.dirty.is_empty()
    }

    /// Writes every changed entry. On failure the entries stay dirty for the next attempt.
    pub async fn flush(&mut self, target: &Cluster, now_ms: i64) -> Result<usize, ClusterError> {
        if self.dirty.is_empty() {
            return Ok(0);
        }
        let records: Vec<Record> = self
            .dirty
            .iter()
            .filter_map(|tp| {
                self.entries.get(tp).map(|e| {
                    Record::new(
                        now_ms,
                        Some(Bytes::from(encode_key(&self.source, tp))),
                        Some(Bytes::from(encode_value(e, now_ms))),
                    )
                })
            })
            .collect();
        // One batch per flush, bounded so that a flush of many partitions stays well under
        // max.message.bytes.
        for chunk in records.chunks(2_000) {
            internal::produce(target, &self.topic, 0, chunk).await?;
        }
        let n = self.dirty.len();
        self.dirty.clear();
        Ok(n)
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn layout_is_stable() {
        let tp = TopicPartition::new("orders", 3);
        assert_eq!(
            String::from_utf8(encode_key("A", &tp)).unwrap(),
            r#"{"source":"A","topic":"orders","partition":3}"#
        );
        let e = Entry {
            next_offset: 42,
            topic_id: [0xab; 16],
            target_offset: 40,
        };
        assert_eq!(
            String::from_utf8(encode_value(&e, 7)).unwrap(),
            r#"{"next_offset":42,"topic_id":"abababababababababababababababab","time_ms":7,"target_offset":40}"#
        );
        // Values written before target_offset existed still read.
        let old =
            br#"{"next_offset":42,"topic_id":"abababababababababababababababab","time_ms":7}"#;
        let tp = TopicPartition::new("orders", 3);
        let got = decode("A", &encode_key("A", &tp), Some(old))
            .unwrap()
            .unwrap()
            .1
            .unwrap();
        assert_eq!(got.target_offset, -1);
    }

    #[test]
    fn other_sources_and_garbage() {
        let tp = TopicPartition::new("t", 0);
        assert_eq!(decode("B", &encode_key("A", &tp), None), Ok(None));
        assert_eq!(
            decode("A", &encode_key("A", &tp), None),
            Ok(Some((tp, None)))
        );
        assert!(decode("A", b"{", None).is_err());
        assert!(
            decode(
                "A",
                &encode_key("A", &TopicPartition::new("t", 0)),
                Some(b"{}")
            )
            .is_err()
        );
    }

    proptest! {
        #[test]
        fn round_trip(source in "[A-Za-z0-9_-]{1,10}", topic in "[a-zA-Z0-9._-]{1,40}", partition in 0i32..10_000, next in any::<i64>(), id in any::<[u8; 16]>(), target in any::<i64>()) {
            let tp = TopicPartition::new(topic, partition);
            let e = Entry { next_offset: next, topic_id: id, target_offset: target };
            let got = decode(&source, &encode_key(&source, &tp), Some(&encode_value(&e, 1))).unwrap();
            prop_assert_eq!(got, Some((tp, Some(e))));
        }
    }
}
