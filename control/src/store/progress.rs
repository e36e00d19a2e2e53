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
//! With an exact offset mapping (every partition strait copied since this format), the value
//! also carries the mapping's newest runs and names the chunk records that hold the older ones:
//! `"map":{"chunks":[..],"runs":[[u,d,n],..]}`; [`crate::store::mapping`] has the format and why
//! progress and mapping never disagree after a crash.
//!
//! The topic also holds one liveness record per flow ([`crate::store::liveness`]), which the import and
//! export commands read to refuse running while replication is active.
//!
//! `next_offset` is the first offset *not* yet replicated (MM2's Connect offsets store the last
//! replicated one; import and export convert).

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use strait_dataplane::batch::{BatchBuilder, Compression, Record};

use crate::cluster::{Cluster, ClusterError};
use crate::model::TopicPartition;
use crate::offsets::mapping::{OffsetMapping, PartitionMapping};
use crate::store::mapping::{self as stored_map, MapRef, ReadChunks, StoredChunks};
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    map: Option<MapRef>,
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
    encode_value_with_map(entry, time_ms, None)
}

/// A progress value with its partition's stored mapping (see [`crate::store::mapping`]).
pub fn encode_value_with_map(entry: &Entry, time_ms: i64, map: Option<MapRef>) -> Vec<u8> {
    serde_json::to_vec(&Value {
        next_offset: entry.next_offset,
        topic_id: hex(&entry.topic_id),
        time_ms,
        target_offset: entry.target_offset,
        leader_epoch: entry.leader_epoch,
        map,
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
    #[error(transparent)]
    Mapping(#[from] stored_map::MapDecodeError),
}

/// A decoded record of the progress topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProgressRecord {
    /// A partition's progress (`None`: a tombstone) and its stored mapping's reference.
    Progress {
        tp: TopicPartition,
        entry: Option<(Entry, Option<MapRef>)>,
    },
    /// A chunk of a partition's stored mapping.
    Chunk(stored_map::ChunkRecord),
}

/// Decodes a record of the progress topic: `Ok(None)` for keys of another source and for the
/// liveness records; an error for garbage (which the caller skips with a warning: one bad
/// record must not stop a restart).
pub fn decode_record(
    source: &str,
    key: &[u8],
    value: Option<&[u8]>,
) -> Result<Option<ProgressRecord>, DecodeError> {
    // Running instances keep their liveness records in this topic too (see `store::liveness`).
    if liveness::is_liveness_key(key) {
        return Ok(None);
    }
    if stored_map::is_chunk_key(key) {
        return Ok(stored_map::decode_chunk(source, key, value)?.map(ProgressRecord::Chunk));
    }
    let k: Key<'_> = serde_json::from_slice(key).map_err(|e| DecodeError::Key {
        reason: e.to_string(),
    })?;
    if k.source != source {
        return Ok(None);
    }
    let tp = TopicPartition::new(k.topic, k.partition);
    let Some(value) = value else {
        return Ok(Some(ProgressRecord::Progress { tp, entry: None }));
    };
    let v: Value = serde_json::from_slice(value).map_err(|e| DecodeError::Value {
        tp: tp.clone(),
        reason: e.to_string(),
    })?;
    let topic_id = unhex(&v.topic_id).ok_or_else(|| DecodeError::TopicId { tp: tp.clone() })?;
    let entry = Entry {
        next_offset: v.next_offset,
        topic_id,
        target_offset: v.target_offset,
        leader_epoch: v.leader_epoch,
    };
    Ok(Some(ProgressRecord::Progress {
        tp,
        entry: Some((entry, v.map)),
    }))
}

/// Decodes a progress record without its mapping: `Ok(None)` also for mapping chunks.
pub fn decode(
    source: &str,
    key: &[u8],
    value: Option<&[u8]>,
) -> Result<Option<(TopicPartition, Option<Entry>)>, DecodeError> {
    Ok(match decode_record(source, key, value)? {
        Some(ProgressRecord::Progress { tp, entry }) => Some((tp, entry.map(|(e, _)| e))),
        Some(ProgressRecord::Chunk(_)) | None => None,
    })
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

/// Everything stored for one source's partitions in a progress topic, as read.
#[derive(Debug, Default)]
pub struct StoredProgress {
    pub entries: BTreeMap<TopicPartition, Entry>,
    maps: BTreeMap<TopicPartition, MapRef>,
    chunks: BTreeMap<TopicPartition, ReadChunks>,
    /// The highest chunk id seen (of any partition): new chunks take ids above it.
    max_chunk_id: Option<u64>,
    /// Records that did not decode.
    pub bad: usize,
}

impl StoredProgress {
    /// Reads the whole topic (a missing topic is an error). With `only`, keeps only those
    /// partitions.
    pub async fn read(
        target: &Cluster,
        topic: &str,
        source: &str,
        only: Option<&BTreeSet<TopicPartition>>,
    ) -> Result<StoredProgress, ClusterError> {
        let mut out = StoredProgress::default();
        // Committed records only, without waiting for the transactions still open: the
        // progress of a partition forwarded exactly-once is written in its transaction, and
        // another partition's open transaction must not hide a newer committed record.
        records::read_resolving_transactions(target, topic, 0, |r| {
            let Some(key) = r.key.as_deref() else {
                out.bad += 1;
                return;
            };
            match decode_record(source, key, r.value.as_deref()) {
                Ok(Some(rec)) => out.apply(rec, only),
                Ok(None) => {}
                Err(_) => out.bad += 1,
            }
        })
        .await?;
        if out.bad > 0 {
            tracing::warn!(topic = %topic, records = out.bad, "skipped unreadable progress records");
        }
        Ok(out)
    }

    fn apply(&mut self, rec: ProgressRecord, only: Option<&BTreeSet<TopicPartition>>) {
        match rec {
            ProgressRecord::Chunk(c) => {
                self.max_chunk_id = Some(self.max_chunk_id.map_or(c.id, |m| m.max(c.id)));
                if only.is_none_or(|o| o.contains(&c.tp)) {
                    self.chunks.entry(c.tp).or_default().apply(c.id, c.runs);
                }
            }
            ProgressRecord::Progress { tp, .. } if only.is_some_and(|o| !o.contains(&tp)) => {}
            ProgressRecord::Progress { tp, entry: None } => {
                self.entries.remove(&tp);
                self.maps.remove(&tp);
            }
            ProgressRecord::Progress {
                tp,
                entry: Some((e, map)),
            } => {
                self.entries.insert(tp.clone(), e);
                match map {
                    Some(m) => self.maps.insert(tp, m),
                    None => self.maps.remove(&tp),
                };
            }
        }
    }

    /// Rebuilds the stored mapping of `tp` (at most `max_runs` runs); `None` when its progress
    /// carries none (an older strait, progress imported from MM2) or it does not restore (said
    /// in the log: translation then falls back to the offset syncs).
    pub fn restore(&self, tp: &TopicPartition, max_runs: usize) -> Option<stored_map::Restored> {
        let map = self.maps.get(tp)?;
        let empty = ReadChunks::default();
        let chunks = self.chunks.get(tp).unwrap_or(&empty);
        match stored_map::restore(tp, map, chunks, max_runs) {
            Ok(r) => {
                if r.missing > 0 {
                    tracing::warn!(partition = %tp, missing = r.missing, "chunks of the stored offset mapping are missing: translation before them is approximate");
                }
                Some(r)
            }
            Err(e) => {
                tracing::warn!(partition = %tp, error = %e, "the stored offset mapping does not restore: translation falls back to the offset syncs");
                None
            }
        }
    }

    /// The stored mappings of every partition with progress.
    pub fn mappings(&self, max_runs: usize) -> BTreeMap<TopicPartition, PartitionMapping> {
        self.entries
            .keys()
            .filter_map(|tp| Some((tp.clone(), self.restore(tp, max_runs)?.mapping)))
            .collect()
    }

    /// Chunk records of partitions without progress (their progress was deleted): garbage.
    fn orphaned_chunks(&self) -> impl Iterator<Item = (&TopicPartition, Vec<u64>)> + '_ {
        self.chunks
            .iter()
            .filter(|(tp, c)| !self.entries.contains_key(*tp) && !c.chunks.is_empty())
            .map(|(tp, c)| (tp, c.chunks.keys().copied().collect()))
    }
}

/// The progress of one source cluster's partitions, as stored on one target, with the stored
/// offset mapping of each (see [`crate::store::mapping`]).
#[derive(Debug)]
pub struct ProgressStore {
    source: String,
    topic: String,
    entries: BTreeMap<TopicPartition, Entry>,
    dirty: BTreeSet<TopicPartition>,
    /// What the topic holds of each partition's mapping.
    chunks: BTreeMap<TopicPartition, StoredChunks>,
    /// Chunks no progress record names (left by a crash mid-flush), deleted when their
    /// partition's progress is next written.
    garbage: BTreeMap<TopicPartition, Vec<u64>>,
    /// The next chunk id: above every id ever seen, never reused.
    next_chunk_id: u64,
    /// Mappings read at open and not yet taken ([`ProgressStore::take_restored`]).
    restored: BTreeMap<TopicPartition, PartitionMapping>,
    /// `strait.mapping.max.runs.per.partition`.
    max_runs: usize,
    /// Partitions forwarded exactly-once: their progress is written inside their own
    /// transactions ([`ProgressStore::write_in_txn`]), never by [`ProgressStore::flush`].
    transactional: BTreeSet<TopicPartition>,
}

/// A partition's progress written inside its open transaction, to be marked stored
/// ([`ProgressStore::txn_committed`]) once the transaction commits.
#[derive(Debug)]
pub struct TxnWrite {
    write: PartitionWrite,
    /// The sequence number after the write's batch, for the producer's next write to the
    /// progress partition.
    pub next_sequence: i32,
}

/// Bytes of keys and values per produce request of a flush, well under the default
/// `max.message.bytes` (1 MiB).
const FLUSH_BATCH_BYTES: usize = 512 * 1024;

/// Records per produce request of a flush.
const FLUSH_BATCH_RECORDS: usize = 2_000;

/// One partition's records of a flush, and what to commit once they are written.
#[derive(Debug)]
struct PartitionWrite {
    tp: TopicPartition,
    records: Vec<Record>,
    bytes: usize,
    /// The mapping's new bookkeeping (`None`: written without a mapping).
    after: Option<(StoredChunks, usize)>,
}

impl ProgressStore {
    /// Creates the compacted topic if needed and loads every stored entry and mapping, with
    /// the default bound on runs per partition.
    pub async fn open(
        target: &Cluster,
        source_alias: &str,
        replication_factor: i16,
    ) -> Result<ProgressStore, ClusterError> {
        Self::open_bounded(
            target,
            source_alias,
            replication_factor,
            crate::offsets::mapping::DEFAULT_MAX_SEGMENTS,
        )
        .await
    }

    /// Creates the compacted topic if needed and loads every stored entry and mapping (each
    /// mapping of at most `max_runs` runs).
    pub async fn open_bounded(
        target: &Cluster,
        source_alias: &str,
        replication_factor: i16,
        max_runs: usize,
    ) -> Result<ProgressStore, ClusterError> {
        let topic = topic_name(source_alias);
        ensure_compacted_topic(target, &topic, replication_factor).await?;
        let read = StoredProgress::read(target, &topic, source_alias, None).await?;
        let mut store = ProgressStore {
            source: source_alias.to_string(),
            topic,
            entries: BTreeMap::new(),
            dirty: BTreeSet::new(),
            chunks: BTreeMap::new(),
            garbage: BTreeMap::new(),
            next_chunk_id: 0,
            restored: BTreeMap::new(),
            max_runs,
            transactional: BTreeSet::new(),
        };
        for (tp, ids) in read.orphaned_chunks() {
            store.garbage.insert(tp.clone(), ids);
        }
        let tps: Vec<TopicPartition> = read.entries.keys().cloned().collect();
        store.restored = store.take_read(read, &tps);
        Ok(store)
    }

    /// Takes what `read` holds of `tps`: entries, chunk bookkeeping and garbage into the store;
    /// returns their restored mappings.
    fn take_read(
        &mut self,
        mut read: StoredProgress,
        tps: &[TopicPartition],
    ) -> BTreeMap<TopicPartition, PartitionMapping> {
        if let Some(m) = read.max_chunk_id {
            self.next_chunk_id = self.next_chunk_id.max(m + 1);
        }
        let mut out = BTreeMap::new();
        for tp in tps {
            self.dirty.remove(tp);
            self.chunks.remove(tp);
            self.garbage.remove(tp);
            match read.entries.remove(tp) {
                Some(e) => self.entries.insert(tp.clone(), e),
                None => self.entries.remove(tp),
            };
            let all: Vec<u64> = read
                .chunks
                .get(tp)
                .map(|c| c.chunks.keys().copied().collect())
                .unwrap_or_default();
            match read.restore(tp, self.max_runs) {
                Some(r) => {
                    self.chunks.insert(tp.clone(), r.stored.clone());
                    // Chunks no longer named, and, when the mapping must be written anew,
                    // every chunk it was read from.
                    let mut garbage = r.garbage;
                    if r.stored.sealed.is_empty() {
                        garbage = all;
                    }
                    if !garbage.is_empty() {
                        self.garbage.insert(tp.clone(), garbage);
                    }
                    out.insert(tp.clone(), r.mapping);
                }
                None if !all.is_empty() => {
                    self.garbage.insert(tp.clone(), all);
                }
                None => {}
            }
        }
        out
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

    /// The mappings read at open, for the offsets duty to translate with (taken once).
    pub fn take_restored(&mut self) -> BTreeMap<TopicPartition, PartitionMapping> {
        std::mem::take(&mut self.restored)
    }

    /// The bound on runs per partition.
    pub fn max_runs(&self) -> usize {
        self.max_runs
    }

    /// Records new progress (written at the next flush, if it changed).
    pub fn update(&mut self, tp: &TopicPartition, entry: Entry) {
        if self.entries.get(tp) != Some(&entry) {
            self.entries.insert(tp.clone(), entry);
            self.dirty.insert(tp.clone());
        }
    }

    /// Reads the stored entries and mappings of `tps` again: another member of the group
    /// replicated them and wrote their progress since this one loaded it. Their local changes
    /// are dropped. Returns their stored mappings (to translate with from now on).
    pub async fn reload(
        &mut self,
        target: &Cluster,
        tps: &BTreeSet<TopicPartition>,
    ) -> Result<BTreeMap<TopicPartition, PartitionMapping>, ClusterError> {
        let read = StoredProgress::read(target, &self.topic, &self.source, Some(tps)).await?;
        let tps: Vec<TopicPartition> = tps.iter().cloned().collect();
        Ok(self.take_read(read, &tps))
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

    /// The records of one partition's flush: new mapping chunks, the progress record, then
    /// the tombstones of chunks it no longer names.
    fn partition_write(
        &mut self,
        tp: &TopicPartition,
        entry: &Entry,
        mapping: Option<&PartitionMapping>,
        now_ms: i64,
    ) -> PartitionWrite {
        let source = self.source.clone();
        let chunk_record = |id: u64, value: Option<Vec<u8>>| {
            Record::new(
                now_ms,
                Some(Bytes::from(stored_map::chunk_key(&source, tp, id))),
                value.map(Bytes::from),
            )
        };
        let mut records = Vec::new();
        let mut stale: Vec<u64> = self.garbage.get(tp).cloned().unwrap_or_default();
        let (map, after) = match mapping {
            Some(m) => {
                let stored = self.chunks.get(tp).cloned().unwrap_or_default();
                let w = stored_map::plan_write(&stored, m, &mut self.next_chunk_id);
                for (id, runs) in &w.new_chunks {
                    records.push(chunk_record(*id, Some(stored_map::chunk_value(runs))));
                }
                stale.extend(w.stale);
                (Some(w.map), Some((w.after, w.stable_runs)))
            }
            None => {
                stale.extend(
                    self.chunks
                        .get(tp)
                        .into_iter()
                        .flat_map(|c| c.sealed.iter().map(|&(id, _)| id)),
                );
                (None, None)
            }
        };
        records.push(Record::new(
            now_ms,
            Some(Bytes::from(encode_key(&self.source, tp))),
            Some(Bytes::from(encode_value_with_map(entry, now_ms, map))),
        ));
        for id in stale {
            records.push(chunk_record(id, None));
        }
        let bytes = records
            .iter()
            .map(|r| {
                r.key.as_ref().map_or(0, Bytes::len) + r.value.as_ref().map_or(0, Bytes::len) + 32
            })
            .sum();
        PartitionWrite {
            tp: tp.clone(),
            records,
            bytes,
            after,
        }
    }

    /// The write of `w` is stored: its partition is clean, its mapping's bookkeeping current.
    fn commit(&mut self, w: PartitionWrite, mappings: &mut OffsetMapping) {
        self.dirty.remove(&w.tp);
        self.garbage.remove(&w.tp);
        match w.after {
            Some((after, stable)) => {
                if let Some(m) = mappings.partition_mut(&w.tp) {
                    m.mark_stable(stable);
                }
                self.chunks.insert(w.tp, after);
            }
            None => {
                self.chunks.remove(&w.tp);
            }
        }
    }

    /// Writes every changed entry with its partition's mapping from `mappings` (a partition
    /// `mappings` does not hold is written without one, and its stored mapping deleted). On
    /// failure the unwritten entries stay dirty for the next attempt.
    pub async fn flush(
        &mut self,
        target: &Cluster,
        now_ms: i64,
        mappings: &mut OffsetMapping,
    ) -> Result<usize, ClusterError> {
        if self.dirty.is_empty() {
            return Ok(0);
        }
        let dirty: Vec<TopicPartition> = self
            .dirty
            .iter()
            .filter(|tp| !self.transactional.contains(*tp))
            .cloned()
            .collect();
        if dirty.is_empty() {
            return Ok(0);
        }
        let mut writes = Vec::with_capacity(dirty.len());
        for tp in &dirty {
            let Some(entry) = self.entries.get(tp).copied() else {
                self.dirty.remove(tp);
                continue;
            };
            writes.push(self.partition_write(tp, &entry, mappings.partition(tp), now_ms));
        }
        let n = writes.len();
        // Batches bounded in bytes and records; one partition's records stay in one batch
        // unless they alone exceed the bound (then in order over several: still safe, see
        // `store::mapping`). A partition is committed once its last record is written.
        let mut batch: Vec<Record> = Vec::new();
        let mut bytes = 0usize;
        let mut pending: Vec<PartitionWrite> = Vec::new();
        for w in writes {
            if !batch.is_empty()
                && (bytes + w.bytes > FLUSH_BATCH_BYTES
                    || batch.len() + w.records.len() > FLUSH_BATCH_RECORDS)
            {
                records::produce(target, &self.topic, 0, &batch).await?;
                for p in pending.drain(..) {
                    self.commit(p, mappings);
                }
                batch.clear();
                bytes = 0;
            }
            bytes += w.bytes;
            for chunk in w.records.chunks(FLUSH_BATCH_RECORDS) {
                if batch.len() + chunk.len() > FLUSH_BATCH_RECORDS {
                    records::produce(target, &self.topic, 0, &batch).await?;
                    for p in pending.drain(..) {
                        self.commit(p, mappings);
                    }
                    batch.clear();
                }
                batch.extend_from_slice(chunk);
            }
            pending.push(w);
        }
        if !batch.is_empty() {
            records::produce(target, &self.topic, 0, &batch).await?;
        }
        for p in pending.drain(..) {
            self.commit(p, mappings);
        }
        Ok(n)
    }
}

impl ProgressStore {
    /// Exactly-once: `tp`'s progress is written only inside its transactions from now on
    /// (`true`), or by the periodic flush again (`false`, the partition left this member).
    pub fn set_transactional(&mut self, tp: &TopicPartition, transactional: bool) {
        if transactional {
            self.transactional.insert(tp.clone());
        } else {
            self.transactional.remove(tp);
        }
    }

    /// Writes `tp`'s progress (with its mapping from `mappings`: new chunks, the progress
    /// record, tombstones of chunks it no longer names) as one transactional batch of
    /// `producer`, whose open transaction must hold the progress partition, from sequence
    /// `sequence`. Nothing is marked stored until [`ProgressStore::txn_committed`]: an aborted
    /// transaction leaves the store as it was, and the next write repeats the change.
    pub async fn write_in_txn(
        &mut self,
        target: &Cluster,
        tp: &TopicPartition,
        producer: &crate::cluster::txn::TxnProducer,
        sequence: i32,
        now_ms: i64,
        mappings: &OffsetMapping,
    ) -> Result<TxnWrite, ClusterError> {
        let entry = self
            .entries
            .get(tp)
            .copied()
            .ok_or_else(|| ClusterError::Invalid {
                context: Box::new(
                    crate::cluster::Context::new(target.alias(), "Produce")
                        .topic(&self.topic)
                        .transactional_id(&producer.transactional_id),
                ),
                message: format!("no progress of {tp} to write"),
            })?;
        let write = self.partition_write(tp, &entry, mappings.partition(tp), now_ms);
        let batch = BatchBuilder::new(Compression::None)
            .producer(producer.producer_id, producer.producer_epoch, sequence)
            .transactional(true)
            .push_all(&write.records)
            .and_then(|b| b.build())
            .map_err(|e| ClusterError::Invalid {
                context: Box::new(
                    crate::cluster::Context::new(target.alias(), "Produce").topic(&self.topic),
                ),
                message: format!("cannot encode the progress of {tp}: {e}"),
            })?;
        records::produce_batch_in_txn(target, producer, &self.topic, 0, &batch).await?;
        let n = i32::try_from(write.records.len()).unwrap_or(i32::MAX);
        Ok(TxnWrite {
            write,
            next_sequence: strait_dataplane::batch::increment_sequence(sequence, n),
        })
    }

    /// The transaction holding `w` committed: its partition's progress is stored.
    pub fn txn_committed(&mut self, w: TxnWrite, mappings: &mut OffsetMapping) {
        self.commit(w.write, mappings);
    }

    /// Writes the changed entries without mappings (their stored mappings deleted): positions
    /// a command set, from which a flow starts with a new history (`strait failback`).
    pub async fn flush_positions(
        &mut self,
        target: &Cluster,
        now_ms: i64,
    ) -> Result<usize, ClusterError> {
        // Holds no partition: each entry is written without a mapping.
        let mut none = OffsetMapping::new(crate::offsets::mapping::DEFAULT_MAX_SEGMENTS)
            .expect("the default bound is valid");
        self.flush(target, now_ms, &mut none).await
    }
}

/// Reads strait's stored progress without creating anything. A missing topic is no progress.
pub async fn read_stored(target: &Cluster, source_alias: &str) -> BTreeMap<TopicPartition, Entry> {
    read_stored_with_mappings(
        target,
        source_alias,
        crate::offsets::mapping::DEFAULT_MAX_SEGMENTS,
    )
    .await
    .0
}

/// Reads strait's stored progress and mappings without creating anything. A missing topic is
/// no progress.
pub async fn read_stored_with_mappings(
    target: &Cluster,
    source_alias: &str,
    max_runs: usize,
) -> (
    BTreeMap<TopicPartition, Entry>,
    BTreeMap<TopicPartition, PartitionMapping>,
) {
    let topic = topic_name(source_alias);
    match StoredProgress::read(target, &topic, source_alias, None).await {
        Ok(read) => {
            let mappings = read.mappings(max_runs);
            (read.entries, mappings)
        }
        Err(e) => {
            tracing::debug!(topic = %topic, error = %e, "no stored progress");
            (BTreeMap::new(), BTreeMap::new())
        }
    }
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
