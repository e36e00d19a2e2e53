//! The progress store: for every replicated source partition, the next source offset to
//! replicate and the source topic's id, kept in a compacted topic on the target cluster
//! (`strait-progress.<source alias>.internal`, one partition). strait keeps no local state: a
//! restarted instance reads this topic and resumes where the last one stopped.
//!
//! Record layout (JSON, compact, fixed field order, so compaction keys are stable):
//! - key: `{"source":"A","topic":"orders","partition":3}`
//! - value: `{"next_offset":1234,"topic_id":"<32 hex digits>","time_ms":1700000000000,"target_offset":987,"leader_epoch":4}`
//!
//! `target_offset` is where the target partition's log ended when `next_offset` was stored (-1
//! when unknown). After a crash, the target may hold records written after the last store;
//! comparing its end with `target_offset` tells how many, so a restart can skip exactly those
//! instead of copying them again.
//!
//! The topic also holds one liveness record per flow ([`crate::store::liveness`]), which the import and
//! export commands read to refuse running while replication is active.
//!
//! `next_offset` is the first offset *not* yet replicated (MM2's Connect offsets store the last
//! replicated one; import and export convert).

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use strait_dataplane::batch::Record;

use crate::cluster::{Cluster, ClusterError, IsolationLevel};
use crate::model::TopicPartition;
use crate::store::topics::ensure_compacted_topic;
use crate::store::{liveness, records};

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
    /// A source leader epoch at least that of the record before `next_offset` (the last one
    /// the shard fetched), -1 when unknown. A restart at `next_offset` sends it as the first
    /// fetch's `last_fetched_epoch`, so that a source log that diverged while strait was down
    /// (an unclean leader election) is found before anything is copied from it (KIP-320).
    pub leader_epoch: i32,
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
    #[serde(default = "unknown_epoch")]
    leader_epoch: i32,
}

fn unknown_epoch() -> i32 {
    -1
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
        leader_epoch: entry.leader_epoch,
    })
    .expect("plain structs serialize")
}

/// A record of the progress topic that is not strait's progress format. Never retriable: the
/// record stays what it is (callers skip it with a warning).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("bad progress key: {reason}")]
    Key { reason: String },
    #[error("bad progress value for {tp}: {reason}")]
    Value { tp: TopicPartition, reason: String },
    #[error("bad topic id for {tp}")]
    TopicId { tp: TopicPartition },
}

/// Decodes a record of the progress topic: `Ok(None)` for keys of another source and for the
/// liveness records; an error for garbage (which the caller skips with a warning: one bad
/// record must not stop a restart).
pub fn decode(
    source: &str,
    key: &[u8],
    value: Option<&[u8]>,
) -> Result<Option<(TopicPartition, Option<Entry>)>, DecodeError> {
    // Running instances keep their liveness records in this topic too (see `store::liveness`).
    if liveness::is_liveness_key(key) {
        return Ok(None);
    }
    let k: Key<'_> = serde_json::from_slice(key).map_err(|e| DecodeError::Key {
        reason: e.to_string(),
    })?;
    if k.source != source {
        return Ok(None);
    }
    let tp = TopicPartition::new(k.topic, k.partition);
    let Some(value) = value else {
        return Ok(Some((tp, None)));
    };
    let v: Value = serde_json::from_slice(value).map_err(|e| DecodeError::Value {
        tp: tp.clone(),
        reason: e.to_string(),
    })?;
    let topic_id = unhex(&v.topic_id).ok_or_else(|| DecodeError::TopicId { tp: tp.clone() })?;
    Ok(Some((
        tp,
        Some(Entry {
            next_offset: v.next_offset,
            topic_id,
            target_offset: v.target_offset,
            leader_epoch: v.leader_epoch,
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
        records::read_to_end(target, &topic, 0, IsolationLevel::ReadUncommitted, |r| {
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

    /// Reads the stored entries of `tps` again: another member of the group replicated them
    /// and wrote their progress since this one loaded it. Their local changes are dropped.
    /// Returns how many of them have stored progress.
    pub async fn reload(
        &mut self,
        target: &Cluster,
        tps: &BTreeSet<TopicPartition>,
    ) -> Result<usize, ClusterError> {
        let mut fresh: BTreeMap<TopicPartition, Entry> = BTreeMap::new();
        let source = self.source.clone();
        records::read_to_end(
            target,
            &self.topic,
            0,
            IsolationLevel::ReadUncommitted,
            |r| {
                let Some(key) = r.key.as_deref() else {
                    return;
                };
                match decode(&source, key, r.value.as_deref()) {
                    Ok(Some((tp, Some(e)))) if tps.contains(&tp) => {
                        fresh.insert(tp, e);
                    }
                    Ok(Some((tp, None))) => {
                        fresh.remove(&tp);
                    }
                    _ => {}
                }
            },
        )
        .await?;
        for tp in tps {
            self.dirty.remove(tp);
            match fresh.get(tp) {
                Some(e) => self.entries.insert(tp.clone(), *e),
                None => self.entries.remove(tp),
            };
        }
        Ok(fresh.len())
    }

    /// Drops the unwritten change of `tp` (a member that lost its membership must not write
    /// progress for a partition another member may replicate by now).
    pub fn discard(&mut self, tp: &TopicPartition) {
        self.dirty.remove(tp);
    }

    pub fn is_dirty(&self) -> bool {
        !self.dirty.is_empty()
    }

    /// Partitions whose latest progress is not stored yet.
    pub fn dirty_len(&self) -> usize {
        self.dirty.len()
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
            records::produce(target, &self.topic, 0, chunk).await?;
        }
        let n = self.dirty.len();
        self.dirty.clear();
        Ok(n)
    }
}

/// Reads strait's stored progress without creating anything. A missing topic is no progress.
pub async fn read_stored(target: &Cluster, source_alias: &str) -> BTreeMap<TopicPartition, Entry> {
    let topic = topic_name(source_alias);
    let mut entries = BTreeMap::new();
    let read = records::read_to_end(target, &topic, 0, IsolationLevel::ReadUncommitted, |r| {
        let Some(key) = r.key.as_deref() else {
            return;
        };
        match decode(source_alias, key, r.value.as_deref()) {
            Ok(Some((tp, Some(e)))) => {
                entries.insert(tp, e);
            }
            Ok(Some((tp, None))) => {
                entries.remove(&tp);
            }
            _ => {}
        }
    })
    .await;
    if let Err(e) = read {
        tracing::debug!(topic = %topic, error = %e, "no stored progress");
    }
    entries
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
            leader_epoch: 5,
        };
        assert_eq!(
            String::from_utf8(encode_value(&e, 7)).unwrap(),
            r#"{"next_offset":42,"topic_id":"abababababababababababababababab","time_ms":7,"target_offset":40,"leader_epoch":5}"#
        );
        // Values written before target_offset and leader_epoch existed still read.
        let old =
            br#"{"next_offset":42,"topic_id":"abababababababababababababababab","time_ms":7}"#;
        let tp = TopicPartition::new("orders", 3);
        let got = decode("A", &encode_key("A", &tp), Some(old))
            .unwrap()
            .unwrap()
            .1
            .unwrap();
        assert_eq!((got.target_offset, got.leader_epoch), (-1, -1));
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
        fn round_trip(source in "[A-Za-z0-9_-]{1,10}", topic in "[a-zA-Z0-9._-]{1,40}", partition in 0i32..10_000, next in any::<i64>(), id in any::<[u8; 16]>(), target in any::<i64>(), epoch in -1i32..i32::MAX) {
            let tp = TopicPartition::new(topic, partition);
            let e = Entry { next_offset: next, topic_id: id, target_offset: target, leader_epoch: epoch };
            let got = decode(&source, &encode_key(&source, &tp), Some(&encode_value(&e, 1))).unwrap();
            prop_assert_eq!(got, Some((tp, Some(e))));
        }
    }
}
