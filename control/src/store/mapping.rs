//! The exact offset mapping as stored with strait's progress, in bounded, incremental pieces.
//!
//! A partition's mapping ([`PartitionMapping`]) is a list of runs (`upstream, downstream, len`).
//! It is stored in the progress topic next to the partition's progress record, in two parts:
//! - **sealed chunks**: records of their own, each holding [`CHUNK_RUNS`] consecutive runs and
//!   never changed once written; key `{"mapping":{"source":"A","topic":"orders","partition":3,"chunk":7}}`,
//!   value `{"runs":[[u,d,n],...]}`;
//! - **the tail**: the newest runs (at most [`CHUNK_RUNS`], at least one), inside the progress
//!   record's value with the ids of the sealed chunks before it and the acknowledged end (every
//!   source record below it is replicated and mapped; absent after an operator moved the
//!   position, until the shard acknowledges again):
//!   `"map":{"chunks":[5,6,7],"runs":[[u,d,n],...],"end":1234}`.
//!
//! A run is `[upstream, downstream, len]`, or `[upstream, downstream, len, 0]` when thinning
//! removed runs in the upstream gap before it (translation in that gap is approximate).
//!
//! A dense partition is one run however long it replicates, so its mapping is one short tail.
//! Gaps (compaction, transaction markers, aborted transactions, a target written by others)
//! add runs; every [`CHUNK_RUNS`] of them seal one chunk. When the mapping is thinned or
//! truncated, the chunks it no longer matches are written anew under fresh ids and the old
//! ones deleted (tombstones).
//!
//! # Crash consistency
//!
//! The progress record is the commit point. It names exactly the chunks that hold the mapping's
//! older runs, and carries the newest ones itself, beside `next_offset`; both come from the
//! same control-loop state, so the stored mapping never ends past the stored progress and
//! never names a record the target did not acknowledge. The records of one partition's flush
//! are appended in order (new chunks, then the progress record, then the tombstones of chunks
//! it no longer names), to the one partition of the progress topic, usually in one batch:
//! - a crash before the progress record leaves new chunks nobody names (read back as garbage
//!   and deleted at the next flush) and the previous progress record, whose chunks still exist
//!   (they are deleted only after the record that stops naming them);
//! - chunk ids are never reused (each start continues after the highest id seen), so a chunk a
//!   progress record names always holds what that record was written with.
//!
//! Compaction keeps the newest record of each key, so it keeps every chunk a progress record
//! names. A stored progress record without `map` (written by an older strait, or imported from
//! MM2) has no exact history: translation falls back to the offset syncs.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::TopicPartition;
use crate::offsets::mapping::{MappingError, PartitionMapping, Segment, StoredRun};

/// Runs per sealed chunk (and at most in the tail): a chunk record is about 2.5 KiB.
pub const CHUNK_RUNS: usize = 64;

pub use crate::model::mapping_cost::MAX_STORED_RUN_BYTES;

/// The reference to a partition's stored mapping inside its progress value.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct MapRef {
    /// The sealed chunks, oldest first.
    pub chunks: Vec<u64>,
    /// The newest runs.
    pub runs: Vec<Vec<i64>>,
    /// The acknowledged end ([`PartitionMapping::acked_end`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<i64>,
    /// Where replication of this history began ([`PartitionMapping::start`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<i64>,
}

#[derive(Serialize, Deserialize)]
struct ChunkKeyFields<'a> {
    source: &'a str,
    topic: &'a str,
    partition: i32,
    chunk: u64,
}

#[derive(Serialize, Deserialize)]
struct ChunkKey<'a> {
    #[serde(borrow)]
    mapping: ChunkKeyFields<'a>,
}

#[derive(Serialize, Deserialize)]
struct ChunkValue {
    runs: Vec<Vec<i64>>,
}

/// A stored mapping record that does not decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MapDecodeError {
    #[error("bad mapping chunk of {tp}: {reason}")]
    Chunk { tp: TopicPartition, reason: String },
    #[error("bad mapping run of {tp}: {run:?}")]
    Run { tp: TopicPartition, run: Vec<i64> },
}

/// Whether `key` is a mapping chunk's key (cheap: no full parse).
pub fn is_chunk_key(key: &[u8]) -> bool {
    key.starts_with(br#"{"mapping":"#)
}

/// The key of chunk `id` of `tp`'s mapping.
pub fn chunk_key(source: &str, tp: &TopicPartition, id: u64) -> Vec<u8> {
    serde_json::to_vec(&ChunkKey {
        mapping: ChunkKeyFields {
            source,
            topic: &tp.topic,
            partition: tp.partition,
            chunk: id,
        },
    })
    .expect("plain structs serialize")
}

/// The value of a chunk holding `runs`.
pub fn chunk_value(runs: &[StoredRun]) -> Vec<u8> {
    serde_json::to_vec(&ChunkValue {
        runs: runs.iter().map(encode_run).collect(),
    })
    .expect("plain structs serialize")
}

/// A decoded chunk record: `runs` is `None` for a tombstone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkRecord {
    pub tp: TopicPartition,
    pub id: u64,
    pub runs: Option<Vec<StoredRun>>,
}

/// Decodes a chunk record; `Ok(None)` for another source's.
pub fn decode_chunk(
    source: &str,
    key: &[u8],
    value: Option<&[u8]>,
) -> Result<Option<ChunkRecord>, MapDecodeError> {
    let k: ChunkKey<'_> = serde_json::from_slice(key).map_err(|e| MapDecodeError::Chunk {
        tp: TopicPartition::new("?", -1),
        reason: e.to_string(),
    })?;
    if k.mapping.source != source {
        return Ok(None);
    }
    let tp = TopicPartition::new(k.mapping.topic, k.mapping.partition);
    let runs = match value {
        None => None,
        Some(v) => {
            let v: ChunkValue = serde_json::from_slice(v).map_err(|e| MapDecodeError::Chunk {
                tp: tp.clone(),
                reason: e.to_string(),
            })?;
            Some(decode_runs(&tp, &v.runs)?)
        }
    };
    Ok(Some(ChunkRecord {
        tp,
        id: k.mapping.chunk,
        runs,
    }))
}

fn encode_run(r: &StoredRun) -> Vec<i64> {
    let s = r.segment;
    if r.exact_gap_before {
        vec![s.upstream_start, s.downstream_start, s.len]
    } else {
        vec![s.upstream_start, s.downstream_start, s.len, 0]
    }
}

/// Decodes stored runs; every length read is checked (a hostile or corrupt record is an
/// error, never a panic).
pub fn decode_runs(
    tp: &TopicPartition,
    runs: &[Vec<i64>],
) -> Result<Vec<StoredRun>, MapDecodeError> {
    runs.iter()
        .map(|r| {
            let bad = || MapDecodeError::Run {
                tp: tp.clone(),
                run: r.clone(),
            };
            let (exact_gap_before, [u, d, n]) = match r.as_slice() {
                [u, d, n] => (true, [*u, *d, *n]),
                [u, d, n, 0] => (false, [*u, *d, *n]),
                _ => return Err(bad()),
            };
            let segment = Segment::new(u, d, n);
            if !segment.is_valid() {
                return Err(bad());
            }
            Ok(StoredRun {
                segment,
                exact_gap_before,
            })
        })
        .collect()
}

/// What the store holds of one partition's mapping: its sealed chunks with their run counts,
/// oldest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoredChunks {
    pub sealed: Vec<(u64, usize)>,
}

impl StoredChunks {
    /// Runs in the sealed chunks.
    pub fn sealed_runs(&self) -> usize {
        self.sealed.iter().map(|&(_, n)| n).sum()
    }
}

/// The records one flush writes for one partition's mapping, and the bookkeeping to commit
/// once they are written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapWrite {
    /// New chunks (id, runs), written before the progress record.
    pub new_chunks: Vec<(u64, Vec<StoredRun>)>,
    /// The progress record's `map`.
    pub map: MapRef,
    /// Chunks the progress record no longer names, deleted after it.
    pub stale: Vec<u64>,
    /// What the store holds once written.
    pub after: StoredChunks,
    /// Leading runs of the mapping the store then holds in sealed chunks.
    pub stable_runs: usize,
}

/// Plans the write of `mapping` over what the store holds (`stored`); new chunk ids come from
/// `next_id`, which is advanced (ids are never reused, even when the write then fails).
pub fn plan_write(
    stored: &StoredChunks,
    mapping: &PartitionMapping,
    next_id: &mut u64,
) -> MapWrite {
    let stable = mapping.stable_prefix();
    let mut kept = Vec::new();
    let mut end = 0usize;
    let mut stale = Vec::new();
    for &(id, n) in &stored.sealed {
        if stale.is_empty() && end + n <= stable {
            kept.push((id, n));
            end += n;
        } else {
            stale.push(id);
        }
    }
    let runs: Vec<StoredRun> = mapping.stored_runs().skip(end).collect();
    let mut new_chunks = Vec::new();
    let mut i = 0;
    // Seal whole chunks while more than a chunk remains: the tail keeps 1..=CHUNK_RUNS runs,
    // among them the last run, the only one appends change.
    while runs.len() - i > CHUNK_RUNS {
        let id = *next_id;
        *next_id += 1;
        new_chunks.push((id, runs[i..i + CHUNK_RUNS].to_vec()));
        kept.push((id, CHUNK_RUNS));
        i += CHUNK_RUNS;
    }
    let map = MapRef {
        chunks: kept.iter().map(|&(id, _)| id).collect(),
        runs: runs[i..].iter().map(encode_run).collect(),
        end: mapping.acked_end(),
        start: mapping.start(),
    };
    MapWrite {
        new_chunks,
        map,
        stale,
        after: StoredChunks { sealed: kept },
        stable_runs: end + i,
    }
}

/// What was read of one partition's stored mapping.
#[derive(Debug, Default)]
pub struct ReadChunks {
    /// Every chunk record of the partition, by id (tombstoned ones removed).
    pub chunks: BTreeMap<u64, Vec<StoredRun>>,
    /// The highest chunk id seen, tombstones included.
    pub max_id: Option<u64>,
}

impl ReadChunks {
    /// Applies one chunk record.
    pub fn apply(&mut self, id: u64, runs: Option<Vec<StoredRun>>) {
        self.max_id = Some(self.max_id.map_or(id, |m| m.max(id)));
        match runs {
            Some(r) => {
                self.chunks.insert(id, r);
            }
            None => {
                self.chunks.remove(&id);
            }
        }
    }
}

/// A partition's mapping rebuilt from its progress record's `map` and its chunks.
#[derive(Debug)]
pub struct Restored {
    pub mapping: PartitionMapping,
    /// What the store holds (for the next flush); empty when the mapping must be rewritten.
    pub stored: StoredChunks,
    /// Chunks of the partition the progress record does not name (deleted at the next flush).
    pub garbage: Vec<u64>,
    /// Chunks the progress record names that were not found: the history before the next run
    /// is then approximate.
    pub missing: usize,
}

/// Rebuilds `tp`'s mapping from its `map` and the chunks read; at most `max_runs` runs.
pub fn restore(
    tp: &TopicPartition,
    map: &MapRef,
    read: &ReadChunks,
    max_runs: usize,
) -> Result<Restored, MappingError> {
    let named: std::collections::BTreeSet<u64> = map.chunks.iter().copied().collect();
    let garbage = read
        .chunks
        .keys()
        .filter(|id| !named.contains(id))
        .copied()
        .collect();
    let mut runs: Vec<StoredRun> = Vec::new();
    let mut sealed = Vec::new();
    let mut missing = 0usize;
    let mut gap_lost = false;
    for id in &map.chunks {
        match read.chunks.get(id) {
            Some(chunk) => {
                for (i, r) in chunk.iter().enumerate() {
                    let mut r = *r;
                    if i == 0 && gap_lost {
                        r.exact_gap_before = false;
                    }
                    runs.push(r);
                }
                gap_lost = false;
                sealed.push((*id, chunk.len()));
            }
            None => {
                missing += 1;
                gap_lost = true;
            }
        }
    }
    let tail = decode_runs(tp, &map.runs).map_err(|_| MappingError::InvalidSegment {
        tp: tp.clone(),
        upstream_start: -1,
        downstream_start: -1,
        len: 0,
    })?;
    for (i, mut r) in tail.into_iter().enumerate() {
        if i == 0 && gap_lost {
            r.exact_gap_before = false;
        }
        runs.push(r);
    }
    let total = runs.len();
    let sealed_runs: usize = sealed.iter().map(|&(_, n)| n).sum();
    let mut mapping = PartitionMapping::restore(tp, max_runs, runs, false)?;
    if let Some(end) = map.end {
        mapping.set_acked_end(end);
    }
    if let Some(start) = map.start {
        mapping.restore_start(start);
    }
    // The sealed chunks are what the store holds only when nothing was lost or thinned.
    let stored = if missing == 0 && mapping.run_count() == total {
        mapping.mark_stable(sealed_runs);
        StoredChunks { sealed }
    } else {
        StoredChunks::default()
    };
    Ok(Restored {
        mapping,
        stored,
        garbage,
        missing,
    })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn tp() -> TopicPartition {
        TopicPartition::new("orders", 3)
    }

    /// Writes `m` over `stored` the way the progress store does: applies the plan to a fake
    /// topic (chunks by id) and commits.
    fn write(
        m: &mut PartitionMapping,
        stored: &mut StoredChunks,
        topic: &mut ReadChunks,
        next_id: &mut u64,
    ) -> MapRef {
        let w = plan_write(stored, m, next_id);
        for (id, runs) in &w.new_chunks {
            // Round trip through the record codec.
            let key = chunk_key("A", &tp(), *id);
            let value = chunk_value(runs);
            let rec = decode_chunk("A", &key, Some(&value)).unwrap().unwrap();
            topic.apply(rec.id, rec.runs);
        }
        for id in &w.stale {
            topic.apply(*id, None);
        }
        *stored = w.after.clone();
        m.mark_stable(w.stable_runs);
        w.map
    }

    #[test]
    fn a_dense_partition_is_one_run_in_the_progress_record() {
        let mut m = PartitionMapping::default();
        let mut stored = StoredChunks::default();
        let mut topic = ReadChunks::default();
        let mut next = 0;
        for i in 0..1000 {
            m.append(&tp(), Segment::new(i * 10, i * 10, 10)).unwrap();
            let map = write(&mut m, &mut stored, &mut topic, &mut next);
            assert!(map.chunks.is_empty());
            assert_eq!(map.runs, vec![vec![0, 0, (i + 1) * 10]]);
        }
        assert_eq!(next, 0);
        assert_eq!(
            serde_json::to_string(&MapRef {
                chunks: vec![],
                runs: vec![vec![0, 0, 10_000]],
                end: Some(10_001),
                start: None,
            })
            .unwrap(),
            r#"{"chunks":[],"runs":[[0,0,10000]],"end":10001}"#
        );
    }

    #[test]
    fn gaps_seal_chunks_that_are_written_once() {
        let mut m = PartitionMapping::default();
        let mut stored = StoredChunks::default();
        let mut topic = ReadChunks::default();
        let mut next = 0;
        let mut written = 0;
        for i in 0..(CHUNK_RUNS as i64 * 3 + 5) {
            // A transaction marker after every batch: a run each.
            m.append(&tp(), Segment::new(i * 11, i * 10, 10)).unwrap();
            let before = next;
            let map = write(&mut m, &mut stored, &mut topic, &mut next);
            written += next - before;
            assert!(!map.runs.is_empty() && map.runs.len() <= CHUNK_RUNS);
        }
        assert_eq!(written, 3, "each chunk sealed once");
        let last = write(&mut m, &mut stored, &mut topic, &mut next);
        let r = restore(&tp(), &last, &topic, m.max_segments()).unwrap();
        assert_eq!(
            r.mapping.stored_runs().collect::<Vec<_>>(),
            m.stored_runs().collect::<Vec<_>>()
        );
        assert_eq!(r.stored, stored);
        assert_eq!(r.mapping.stable_prefix(), CHUNK_RUNS * 3);
        assert!(r.garbage.is_empty());
    }

    #[test]
    fn missing_chunks_make_the_gap_approximate_and_garbage_is_found() {
        let runs: Vec<StoredRun> = (0..3)
            .map(|i| StoredRun {
                segment: Segment::new(i * 20, i * 10, 10),
                exact_gap_before: true,
            })
            .collect();
        let mut read = ReadChunks::default();
        read.apply(1, Some(runs[..1].to_vec()));
        read.apply(9, Some(runs[..1].to_vec()));
        let map = MapRef {
            chunks: vec![1, 2],
            runs: vec![vec![40, 20, 10]],
            end: None,
            start: None,
        };
        let r = restore(&tp(), &map, &read, 1024).unwrap();
        assert_eq!(r.missing, 1);
        assert_eq!(r.garbage, vec![9]);
        assert_eq!(r.stored, StoredChunks::default());
        assert_eq!(r.mapping.stable_prefix(), 0);
        use crate::offsets::Translation;
        assert_eq!(r.mapping.translate(5), Translation::Exact(5));
        // Between the first run and the tail a chunk is missing: approximate there.
        assert_eq!(r.mapping.translate(25), Translation::Approximate(10));
        assert_eq!(r.mapping.translate(45), Translation::Exact(25));
    }

    #[test]
    fn hostile_records_are_errors() {
        assert!(decode_chunk("A", b"{", None).is_err());
        let key = chunk_key("A", &tp(), 1);
        assert!(is_chunk_key(&key));
        for v in [
            &br#"{"runs":[[1,2]]}"#[..],
            br#"{"runs":[[1,2,0]]}"#,
            br#"{"runs":[[-1,2,3]]}"#,
            br#"{"runs":[[1,2,3,1]]}"#,
            br#"{"runs":[[9223372036854775807,2,3]]}"#,
            br#"{"runs":7}"#,
        ] {
            assert!(
                decode_chunk("A", &key, Some(v)).is_err(),
                "{}",
                String::from_utf8_lossy(v)
            );
        }
        assert_eq!(decode_chunk("B", &key, None), Ok(None));
        // Overlapping runs restore as an error, not a panic.
        let map = MapRef {
            chunks: vec![],
            runs: vec![vec![0, 0, 10], vec![5, 20, 10]],
            end: None,
            start: None,
        };
        assert!(restore(&tp(), &map, &ReadChunks::default(), 1024).is_err());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Whatever sequence of appends, gaps, rewinds and flushes, the stored mapping read back
        /// equals the mapping in memory, and the store writes a chunk only when it seals or
        /// rewrites one.
        #[test]
        fn what_is_read_back_is_what_was_in_memory(
            steps in proptest::collection::vec((0i64..3, 1i64..30, 0u8..10, any::<bool>()), 1..700),
        ) {
            let mut m = PartitionMapping::new(256).unwrap();
            let mut stored = StoredChunks::default();
            let mut topic = ReadChunks::default();
            let mut next = 0;
            let (mut u, mut d) = (0i64, 0i64);
            for (gap, len, op, flush) in steps {
                match op {
                    // An operator moves the position back.
                    0 => { u = (u - 40).max(0); m.truncate(u); }
                    // A foreign write on the target.
                    1 => d += 1,
                    _ => {}
                }
                u += gap;
                m.append(&tp(), Segment::new(u, d, len)).unwrap();
                u += len;
                d += len;
                if flush {
                    let last = write(&mut m, &mut stored, &mut topic, &mut next);
                    let r = restore(&tp(), &last, &topic, 256).unwrap();
                    prop_assert_eq!(r.mapping.stored_runs().collect::<Vec<_>>(), m.stored_runs().collect::<Vec<_>>());
                    prop_assert!(r.garbage.is_empty());
                    prop_assert_eq!(r.missing, 0);
                    // Every chunk still in the topic is named.
                    prop_assert_eq!(topic.chunks.len(), last.chunks.len());
                }
            }
        }
    }
}
