//! When to emit `OffsetSync` records: MM2's `OffsetSyncWriter` (`connect/mirror/.../
//! OffsetSyncWriter.java`) as a sans-IO state machine.
//!
//! # MM2's rules
//!
//! For every replicated record `(u, d)` of a source partition, `PartitionState::update` asks for
//! a sync when any of these holds:
//! - it is the first record of this writer's lifetime for the partition;
//! - `d - (last_sync_downstream + 1) >= offset.lag.max` (default [`DEFAULT_OFFSET_LAG_MAX`]):
//!   translation of a group past the last sync gives `last_sync + 1`, which is now too stale;
//! - `u - previous_upstream != 1`: upstream records were skipped (transaction markers, aborted
//!   or compacted records);
//! - `d < previous_downstream`: the target went backwards.
//!
//! A sync that is asked for replaces the partition's entry in the *pending* queue (and clears
//! its *delayed* entry); any other becomes the partition's *delayed* entry. After each record
//! the pending queue is fired in insertion order while fewer than `max_outstanding` (MM2's
//! `MAX_OUTSTANDING_OFFSET_SYNCS` = 10) sends are outstanding. Every
//! `offset.flush.interval.ms` (default 60000) all delayed syncs are promoted to pending and
//! fired, so each partition's latest position is published at least once per interval.
//! Queues keep one entry per partition and keep a partition's place when its entry is
//! replaced, as Java's `LinkedHashMap` does.
//!
//! # Batches instead of records
//!
//! MM2 sees records; strait sees acknowledged batches, as [`Segment`]s. [`OffsetSyncWriter::
//! on_segment`] produces exactly the queue states, partition state and sends that MM2 would
//! produce for the segment's records one by one, computing the lag-triggered records
//! arithmetically instead of looping over every record. One difference remains: in MM2 a send
//! may complete, and free its permit, between two records; strait handles a whole batch at
//! once, so when permits run out inside a batch the remaining triggered syncs of that batch
//! collapse to its last one (still sent later, as in MM2 when its permits run out).
//!
//! # Driving it
//!
//! 1. [`OffsetSyncWriter::on_segment`] (or [`OffsetSyncWriter::on_record`]) after each
//!    acknowledgement;
//! 2. [`OffsetSyncWriter::on_flush_interval`] every `offset.flush.interval.ms`;
//! 3. after either, [`OffsetSyncWriter::take_ready`] and produce each returned sync to
//!    partition 0 of the offset-syncs topic;
//! 4. [`OffsetSyncWriter::on_send_complete`] when the producer reports a send done, whether it
//!    succeeded or failed (MM2 only logs failures), then [`OffsetSyncWriter::fire_pending`] to
//!    use the freed permit.
//!
//! Memory is bounded by the partitions fed to it: one [`PartitionState`] and at most one
//! pending and one delayed sync per partition, and at most `max_outstanding` ready syncs.

use std::collections::{BTreeMap, HashMap};

use thiserror::Error;

use super::TopicPartition;
use super::format::OffsetSync;
use super::mapping::Segment;

/// MM2's `offset.lag.max` default.
pub const DEFAULT_OFFSET_LAG_MAX: i64 = 100;

/// MM2's `MAX_OUTSTANDING_OFFSET_SYNCS`.
pub const MAX_OUTSTANDING_OFFSET_SYNCS: usize = 10;

/// Worker `offset.flush.interval.ms` default: how often to call
/// [`OffsetSyncWriter::on_flush_interval`].
pub const DEFAULT_OFFSET_FLUSH_INTERVAL_MS: u64 = 60_000;

/// Errors from the sync writer.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum SyncWriterError {
    /// A segment with a negative offset, no records, or an end past `i64::MAX`.
    #[error(
        "{tp}: invalid segment upstream {upstream_start}, downstream {downstream_start}, {len} records"
    )]
    InvalidSegment {
        /// Source partition.
        tp: TopicPartition,
        /// Upstream start offset given.
        upstream_start: i64,
        /// Downstream start offset given.
        downstream_start: i64,
        /// Record count given.
        len: i64,
    },
    /// `on_send_complete` without a send in flight.
    #[error("offset-sync send completion reported but no send is in flight")]
    NoSendInFlight,
}

/// Configuration of an [`OffsetSyncWriter`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SyncWriterConfig {
    /// `offset.lag.max`: emit a sync once translation from the last one would lag this much.
    /// Default [`DEFAULT_OFFSET_LAG_MAX`]; zero or less emits a sync for every record.
    pub offset_lag_max: i64,
    /// Bound on syncs handed out and not yet completed. Default
    /// [`MAX_OUTSTANDING_OFFSET_SYNCS`]; values below 1 are treated as 1.
    pub max_outstanding: usize,
}

impl Default for SyncWriterConfig {
    fn default() -> Self {
        Self {
            offset_lag_max: DEFAULT_OFFSET_LAG_MAX,
            max_outstanding: MAX_OUTSTANDING_OFFSET_SYNCS,
        }
    }
}

/// MM2's `OffsetSyncWriter.PartitionState` (its `shouldSyncOffsets` flag is only ever true
/// inside one update, so it is not stored).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionState {
    /// Upstream offset of the previous record, -1 before the first.
    pub previous_upstream_offset: i64,
    /// Downstream offset of the previous record, -1 before the first.
    pub previous_downstream_offset: i64,
    /// Downstream offset of the last record that asked for a sync, -1 before the first.
    pub last_sync_downstream_offset: i64,
}

impl Default for PartitionState {
    fn default() -> Self {
        Self {
            previous_upstream_offset: -1,
            previous_downstream_offset: -1,
            last_sync_downstream_offset: -1,
        }
    }
}

impl PartitionState {
    /// MM2's `update(u, d)`: records the pair and says whether it needs a sync. Arithmetic
    /// wraps like Java's `long`.
    pub fn update(&mut self, upstream: i64, downstream: i64, offset_lag_max: i64) -> bool {
        let no_previous_sync = self.last_sync_downstream_offset == -1;
        let translated_too_stale = downstream
            .wrapping_sub(self.last_sync_downstream_offset.wrapping_add(1))
            >= offset_lag_max;
        let skipped_upstream = upstream.wrapping_sub(self.previous_upstream_offset) != 1;
        let truncated_downstream = downstream < self.previous_downstream_offset;
        let sync =
            no_previous_sync || translated_too_stale || skipped_upstream || truncated_downstream;
        if sync {
            self.last_sync_downstream_offset = downstream;
        }
        self.previous_upstream_offset = upstream;
        self.previous_downstream_offset = downstream;
        sync
    }
}

/// One sync per partition in insertion order; replacing an entry keeps its place (Java's
/// `LinkedHashMap`).
#[derive(Debug, Clone, Default)]
struct SyncQueue {
    by_seq: BTreeMap<u64, OffsetSync>,
    seq_of: HashMap<TopicPartition, u64>,
    next_seq: u64,
}

impl SyncQueue {
    fn insert(&mut self, tp: &TopicPartition, sync: OffsetSync) {
        let seq = match self.seq_of.get(tp) {
            Some(seq) => *seq,
            None => {
                let seq = self.next_seq;
                self.next_seq += 1;
                self.seq_of.insert(tp.clone(), seq);
                seq
            }
        };
        self.by_seq.insert(seq, sync);
    }

    fn remove(&mut self, tp: &TopicPartition) -> Option<OffsetSync> {
        let seq = self.seq_of.remove(tp)?;
        self.by_seq.remove(&seq)
    }

    fn pop_front(&mut self) -> Option<OffsetSync> {
        let (_, sync) = self.by_seq.pop_first()?;
        self.seq_of.remove(&sync.topic_partition());
        Some(sync)
    }

    fn is_empty(&self) -> bool {
        self.by_seq.is_empty()
    }

    fn len(&self) -> usize {
        self.by_seq.len()
    }

    fn iter(&self) -> impl Iterator<Item = &OffsetSync> {
        self.by_seq.values()
    }
}

/// MM2's `OffsetSyncWriter`. See the [module docs](self).
#[derive(Debug, Clone, Default)]
pub struct OffsetSyncWriter {
    config: SyncWriterConfig,
    states: HashMap<TopicPartition, PartitionState>,
    delayed: SyncQueue,
    pending: SyncQueue,
    ready: Vec<OffsetSync>,
    outstanding: usize,
}

impl OffsetSyncWriter {
    /// Takes a new `offset.lag.max` (a configuration reload); the partitions' state stays.
    pub fn set_offset_lag_max(&mut self, offset_lag_max: i64) {
        self.config.offset_lag_max = offset_lag_max;
    }

    /// A writer with no partitions.
    pub fn new(config: SyncWriterConfig) -> Self {
        Self {
            config: SyncWriterConfig {
                max_outstanding: config.max_outstanding.max(1),
                ..config
            },
            ..Self::default()
        }
    }

    /// One replicated record, exactly as MM2's `commitRecord` handles it:
    /// `maybeQueueOffsetSyncs` then `firePendingOffsetSyncs`.
    pub fn on_record(&mut self, tp: &TopicPartition, upstream: i64, downstream: i64) {
        let lag = self.config.offset_lag_max;
        let state = self.states.entry(tp.clone()).or_default();
        let sync_now = state.update(upstream, downstream, lag);
        self.queue(tp, OffsetSync::new(tp, upstream, downstream), sync_now);
        self.fire_pending();
    }

    /// An acknowledged segment: the same result as [`OffsetSyncWriter::on_record`] for each of
    /// its records in order, computed in time bounded by `max_outstanding`, not by the record
    /// count.
    pub fn on_segment(
        &mut self,
        tp: &TopicPartition,
        segment: Segment,
    ) -> Result<(), SyncWriterError> {
        if !segment.is_valid() {
            return Err(SyncWriterError::InvalidSegment {
                tp: tp.clone(),
                upstream_start: segment.upstream_start,
                downstream_start: segment.downstream_start,
                len: segment.len,
            });
        }
        let (u0, d0) = (segment.upstream_start, segment.downstream_start);
        self.on_record(tp, u0, d0);
        if segment.len == 1 {
            return Ok(());
        }
        // Records after the first are contiguous in both offsets, so only staleness can ask for
        // a sync: at the first d with d - (last_sync + 1) >= lag, then every `step` records.
        let lag = i128::from(self.config.offset_lag_max);
        let step = lag.max(0) + 1;
        let d_last = i128::from(segment.downstream_end() - 1);
        let mut last_sync = i128::from(
            self.states
                .get(tp)
                .map_or(-1, |s| s.last_sync_downstream_offset),
        );
        let mut next = (i128::from(d0) + 1).max(last_sync + 1 + lag);
        while next <= d_last {
            let d = if self.outstanding < self.config.max_outstanding {
                next
            } else {
                // No permit can free up inside this batch: the remaining triggered syncs would
                // only replace each other in the pending queue, so jump to the last one.
                next + (d_last - next) / step * step
            };
            // `d0 < d <= d_last` fits in i64, and so does the matching upstream offset.
            let (d, u) = (d as i64, u0 + (d as i64 - d0));
            self.delayed.remove(tp);
            self.pending.insert(tp, OffsetSync::new(tp, u, d));
            self.fire_pending();
            last_sync = i128::from(d);
            next = last_sync + step;
        }
        let (u_last, d_last) = (segment.upstream_end() - 1, segment.downstream_end() - 1);
        if last_sync != i128::from(d_last) {
            // The last record did not ask for a sync: it is the partition's delayed sync.
            self.delayed.insert(tp, OffsetSync::new(tp, u_last, d_last));
        }
        let state = self.states.entry(tp.clone()).or_default();
        state.previous_upstream_offset = u_last;
        state.previous_downstream_offset = d_last;
        state.last_sync_downstream_offset = last_sync as i64;
        Ok(())
    }

    /// Java's `maybeQueueOffsetSyncs` after the state update.
    fn queue(&mut self, tp: &TopicPartition, sync: OffsetSync, sync_now: bool) {
        if sync_now {
            self.delayed.remove(tp);
            self.pending.insert(tp, sync);
        } else {
            self.delayed.insert(tp, sync);
        }
    }

    /// Moves pending syncs to the ready list, oldest first, while permits are free
    /// (`firePendingOffsetSyncs`).
    pub fn fire_pending(&mut self) {
        while !self.pending.is_empty() && self.outstanding < self.config.max_outstanding {
            if let Some(sync) = self.pending.pop_front() {
                self.outstanding += 1;
                self.ready.push(sync);
            }
        }
        debug_assert!(self.outstanding <= self.config.max_outstanding);
    }

    /// Promotes every delayed sync to pending (`promoteDelayedOffsetSyncs`).
    pub fn promote_delayed(&mut self) {
        while let Some(sync) = self.delayed.pop_front() {
            let tp = sync.topic_partition();
            self.pending.insert(&tp, sync);
        }
    }

    /// What MM2's `MirrorSourceTask.commit()` does after each offset flush: promote delayed
    /// syncs, then fire.
    pub fn on_flush_interval(&mut self) {
        self.promote_delayed();
        self.fire_pending();
    }

    /// The syncs to produce now, in order. Each holds a permit until
    /// [`OffsetSyncWriter::on_send_complete`].
    pub fn take_ready(&mut self) -> Vec<OffsetSync> {
        std::mem::take(&mut self.ready)
    }

    /// A send handed out by [`OffsetSyncWriter::take_ready`] completed (successfully or not):
    /// frees its permit. Call [`OffsetSyncWriter::fire_pending`] afterwards.
    pub fn on_send_complete(&mut self) -> Result<(), SyncWriterError> {
        if self.outstanding <= self.ready.len() {
            return Err(SyncWriterError::NoSendInFlight);
        }
        self.outstanding -= 1;
        Ok(())
    }

    /// A send handed out by [`OffsetSyncWriter::take_ready`] never completed (its task was
    /// dropped mid-flight, as a stop abandons the duties in flight): frees the permits of
    /// `syncs` and puts each back as its partition's pending sync, unless a newer one is pending
    /// already. Without this the permits would stay taken and the writer would never drain.
    /// Call [`OffsetSyncWriter::fire_pending`] afterwards.
    pub fn on_send_abandoned(&mut self, syncs: Vec<OffsetSync>) -> Result<(), SyncWriterError> {
        for sync in syncs {
            self.on_send_complete()?;
            let tp = sync.topic_partition();
            if !self.pending.seq_of.contains_key(&tp) {
                self.pending.insert(&tp, sync);
            }
        }
        Ok(())
    }

    /// Forgets a partition's state (revoked). Its delayed sync is promoted so that its latest
    /// position is still published; MM2 loses it when a task stops.
    pub fn remove_partition(&mut self, tp: &TopicPartition) {
        self.states.remove(tp);
        if let Some(sync) = self.delayed.remove(tp) {
            self.pending.insert(tp, sync);
        }
        self.fire_pending();
    }

    /// The state of a partition.
    pub fn partition_state(&self, tp: &TopicPartition) -> Option<&PartitionState> {
        self.states.get(tp)
    }

    /// Pending syncs, in firing order.
    pub fn pending(&self) -> impl Iterator<Item = &OffsetSync> {
        self.pending.iter()
    }

    /// Delayed syncs, in promotion order.
    pub fn delayed(&self) -> impl Iterator<Item = &OffsetSync> {
        self.delayed.iter()
    }

    /// Number of pending syncs.
    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }

    /// Number of delayed syncs.
    pub fn delayed_len(&self) -> usize {
        self.delayed.len()
    }

    /// Permits in use: ready syncs plus sends not yet completed.
    pub fn outstanding(&self) -> usize {
        self.outstanding
    }

    /// The configuration in force.
    pub fn config(&self) -> SyncWriterConfig {
        self.config
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn tp() -> TopicPartition {
        TopicPartition::new("topic", 0)
    }

    fn writer(offset_lag_max: i64, max_outstanding: usize) -> OffsetSyncWriter {
        OffsetSyncWriter::new(SyncWriterConfig {
            offset_lag_max,
            max_outstanding,
        })
    }

    fn pairs(syncs: &[OffsetSync]) -> Vec<(i64, i64)> {
        syncs
            .iter()
            .map(|s| (s.upstream_offset, s.downstream_offset))
            .collect()
    }

    // OffsetSyncWriterTest.testMaybeQueueOffsetSyncs
    #[test]
    fn maybe_queue_offset_syncs() {
        let mut w = writer(2, 1);
        w.on_record(&tp(), 0, 1);
        assert_eq!(w.delayed_len(), 0);
        assert_eq!(
            w.partition_state(&tp())
                .unwrap()
                .last_sync_downstream_offset,
            1
        );
        // The Java test uses a producer mock; here the first sync went to the ready list.
        assert_eq!(pairs(&w.take_ready()), vec![(0, 1)]);
        w.on_record(&tp(), 1, 2);
        assert_eq!(
            pairs(&w.delayed().cloned().collect::<Vec<_>>()),
            vec![(1, 2)]
        );
        assert_eq!(
            w.partition_state(&tp())
                .unwrap()
                .last_sync_downstream_offset,
            1
        );
    }

    // OffsetSyncWriterTest.testFirePendingOffsetSyncs
    #[test]
    fn an_abandoned_send_frees_its_permits_and_is_sent_again() {
        let mut w = OffsetSyncWriter::new(SyncWriterConfig {
            offset_lag_max: 100,
            max_outstanding: 2,
        });
        let (a, b) = (TopicPartition::new("t", 0), TopicPartition::new("t", 1));
        w.on_record(&a, 0, 0);
        w.on_record(&b, 0, 0);
        let lost = w.take_ready();
        assert_eq!((lost.len(), w.outstanding()), (2, 2));
        // Meanwhile partition 1 moved on: its newer sync waits for a permit.
        w.on_record(&b, 50, 500);
        assert_eq!(w.pending_len(), 1);
        w.on_send_abandoned(lost).unwrap();
        w.fire_pending();
        let again = w.take_ready();
        let offsets: Vec<_> = again
            .iter()
            .map(|s| (s.topic_partition().partition, s.upstream_offset))
            .collect();
        assert_eq!(offsets, vec![(1, 50), (0, 0)], "the newer sync of 1 wins");
        for _ in &again {
            w.on_send_complete().unwrap();
        }
        assert_eq!((w.outstanding(), w.pending_len()), (0, 0));
        // More than were handed out is refused.
        assert!(w.on_send_abandoned(again).is_err());
    }

    #[test]
    fn fire_pending_offset_syncs() {
        let mut w = writer(1, 1);
        w.on_record(&tp(), 0, 100);
        assert_eq!(
            w.partition_state(&tp())
                .unwrap()
                .last_sync_downstream_offset,
            100
        );
        assert_eq!(pairs(&w.take_ready()), vec![(0, 100)]);
        w.on_record(&tp(), 2, 102);
        assert_eq!(
            w.partition_state(&tp())
                .unwrap()
                .last_sync_downstream_offset,
            102
        );
        // One sync in flight: the new one waits.
        assert!(w.take_ready().is_empty());
        assert_eq!(
            pairs(&w.pending().cloned().collect::<Vec<_>>()),
            vec![(2, 102)]
        );
        w.on_send_complete().unwrap();
        w.fire_pending();
        assert_eq!(pairs(&w.take_ready()), vec![(2, 102)]);
        w.on_send_complete().unwrap();
        assert_eq!(w.on_send_complete(), Err(SyncWriterError::NoSendInFlight));
    }

    // OffsetSyncWriterTest.testPromoteDelayedOffsetSyncs
    #[test]
    fn promote_delayed_offset_syncs() {
        let mut w = writer(50, 1);
        w.on_record(&tp(), 0, 100);
        w.on_record(&tp(), 1, 101);
        w.promote_delayed();
        assert_eq!(w.delayed_len(), 0);
        assert_eq!(
            pairs(&w.pending().cloned().collect::<Vec<_>>()),
            vec![(1, 101)]
        );
    }

    #[test]
    fn rules_lag_gap_and_rewind() {
        let mut w = writer(100, 100);
        let feed = |w: &mut OffsetSyncWriter, u, d| {
            w.on_record(&tp(), u, d);
            pairs(&w.take_ready())
        };
        let mut emitted = Vec::new();
        for i in 0..=250 {
            emitted.extend(feed(&mut w, i, i));
        }
        // First record, then d = last + 101 each time.
        assert_eq!(emitted, vec![(0, 0), (101, 101), (202, 202)]);
        emitted.clear();
        // Upstream gap (a transaction marker at 251).
        emitted.extend(feed(&mut w, 252, 251));
        // Downstream rewind.
        emitted.extend(feed(&mut w, 253, 10));
        // Contiguous again: nothing.
        emitted.extend(feed(&mut w, 254, 11));
        assert_eq!(emitted, vec![(252, 251), (253, 10)]);
        assert_eq!(
            pairs(&w.delayed().cloned().collect::<Vec<_>>()),
            vec![(254, 11)]
        );
    }

    #[test]
    fn segment_emits_what_mm2_emits_per_record() {
        let mut w = writer(100, 10);
        w.on_segment(&tp(), Segment::new(0, 0, 500)).unwrap();
        assert_eq!(
            pairs(&w.take_ready()),
            vec![(0, 0), (101, 101), (202, 202), (303, 303), (404, 404)]
        );
        assert_eq!(
            pairs(&w.delayed().cloned().collect::<Vec<_>>()),
            vec![(499, 499)]
        );
        // A batch after a gap syncs its first record.
        w.on_segment(&tp(), Segment::new(501, 500, 5)).unwrap();
        assert_eq!(pairs(&w.take_ready()), vec![(501, 500)]);
        assert_eq!(
            pairs(&w.delayed().cloned().collect::<Vec<_>>()),
            vec![(505, 504)]
        );
        w.on_flush_interval();
        assert_eq!(pairs(&w.take_ready()), vec![(505, 504)]);
    }

    #[test]
    fn segment_collapses_triggers_once_permits_run_out() {
        let mut w = writer(9, 2);
        w.on_segment(&tp(), Segment::new(0, 0, 1000)).unwrap();
        // Two permits: the first two syncs go out, then the last trigger (990) waits.
        assert_eq!(pairs(&w.take_ready()), vec![(0, 0), (10, 10)]);
        assert_eq!(
            pairs(&w.pending().cloned().collect::<Vec<_>>()),
            vec![(990, 990)]
        );
        assert_eq!(
            pairs(&w.delayed().cloned().collect::<Vec<_>>()),
            vec![(999, 999)]
        );
        assert_eq!(
            w.partition_state(&tp())
                .unwrap()
                .last_sync_downstream_offset,
            990
        );
    }

    #[test]
    fn zero_or_negative_lag_syncs_every_record() {
        for lag in [0, -5] {
            let mut w = writer(lag, 100);
            w.on_segment(&tp(), Segment::new(10, 20, 4)).unwrap();
            assert_eq!(
                pairs(&w.take_ready()),
                vec![(10, 20), (11, 21), (12, 22), (13, 23)]
            );
            assert_eq!(w.delayed_len(), 0);
        }
    }

    #[test]
    fn huge_lag_never_overflows() {
        let mut w = writer(i64::MAX, 10);
        w.on_segment(&tp(), Segment::new(0, 0, 1 << 40)).unwrap();
        w.on_segment(&tp(), Segment::new(1 << 40, 1 << 40, 1 << 40))
            .unwrap();
        assert_eq!(pairs(&w.take_ready()), vec![(0, 0)]);
        assert!(w.on_segment(&tp(), Segment::new(0, 0, 0)).is_err());
    }

    #[test]
    fn queues_keep_insertion_order_on_replace() {
        let a = TopicPartition::new("a", 0);
        let b = TopicPartition::new("b", 0);
        let mut w = writer(1000, 1);
        w.on_record(&a, 0, 0); // ready (takes the only permit)
        w.on_record(&b, 0, 0); // pending [b]
        w.on_record(&a, 5, 5); // gap: pending [b, a]
        w.on_record(&b, 9, 9); // gap: replaces b in place: [b', a]
        let order: Vec<_> = w
            .pending()
            .map(|s| (s.topic.clone(), s.upstream_offset))
            .collect();
        assert_eq!(order, vec![("b".to_string(), 9), ("a".to_string(), 5)]);
        assert_eq!(pairs(&w.take_ready()), vec![(0, 0)]);
        w.on_send_complete().unwrap();
        w.fire_pending();
        assert_eq!(w.take_ready()[0].topic, "b");
    }

    #[test]
    fn remove_partition_publishes_its_delayed_sync() {
        let mut w = writer(100, 10);
        w.on_segment(&tp(), Segment::new(0, 0, 10)).unwrap();
        assert_eq!(pairs(&w.take_ready()), vec![(0, 0)]);
        w.remove_partition(&tp());
        assert_eq!(pairs(&w.take_ready()), vec![(9, 9)]);
        assert!(w.partition_state(&tp()).is_none());
    }

    /// Operations of the equivalence property test.
    #[derive(Debug, Clone)]
    enum Op {
        Segment {
            partition: u8,
            upstream_gap: i64,
            downstream_gap: i64,
            rewind: bool,
            len: i64,
        },
        Complete(u8),
        Flush,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (0u8..3, prop_oneof![4 => Just(0i64), 1 => 1i64..5], prop_oneof![5 => Just(0i64), 1 => 1i64..3],
                  proptest::bool::weighted(0.05), 1i64..400)
                .prop_map(|(partition, upstream_gap, downstream_gap, rewind, len)| Op::Segment {
                    partition, upstream_gap, downstream_gap, rewind, len,
                }),
            2 => (1u8..6).prop_map(Op::Complete),
            1 => Just(Op::Flush),
        ]
    }

    proptest! {
        /// `on_segment` equals MM2's per-record handling: same sends in the same order, same
        /// queues, same partition states.
        #[test]
        fn segment_equals_per_record(
            lag in prop_oneof![Just(-1i64), 0i64..3, 3i64..150],
            max_outstanding in 1usize..12,
            ops in proptest::collection::vec(op(), 1..60),
        ) {
            let mut fast = writer(lag, max_outstanding);
            let mut slow = writer(lag, max_outstanding);
            let mut pos = [(0i64, 0i64); 3];
            let mut sent_fast = Vec::new();
            let mut sent_slow = Vec::new();
            for op in ops {
                match op {
                    Op::Segment { partition, upstream_gap, downstream_gap, rewind, len } => {
                        let tp = TopicPartition::new("t", i32::from(partition));
                        let (u, d) = &mut pos[usize::from(partition)];
                        *u += upstream_gap;
                        *d = if rewind { *d / 2 } else { *d + downstream_gap };
                        fast.on_segment(&tp, Segment::new(*u, *d, len)).unwrap();
                        for i in 0..len {
                            slow.on_record(&tp, *u + i, *d + i);
                        }
                        *u += len;
                        *d += len;
                    }
                    Op::Complete(n) => {
                        for _ in 0..n {
                            let a = fast.on_send_complete().is_ok();
                            let b = slow.on_send_complete().is_ok();
                            prop_assert_eq!(a, b);
                        }
                        fast.fire_pending();
                        slow.fire_pending();
                    }
                    Op::Flush => {
                        fast.on_flush_interval();
                        slow.on_flush_interval();
                    }
                }
                sent_fast.extend(fast.take_ready());
                sent_slow.extend(slow.take_ready());
                prop_assert_eq!(&sent_fast, &sent_slow);
                prop_assert_eq!(fast.pending().collect::<Vec<_>>(), slow.pending().collect::<Vec<_>>());
                prop_assert_eq!(fast.delayed().collect::<Vec<_>>(), slow.delayed().collect::<Vec<_>>());
                prop_assert_eq!(&fast.states, &slow.states);
                prop_assert_eq!(fast.outstanding(), slow.outstanding());
                prop_assert!(fast.outstanding() <= max_outstanding);
            }
        }
    }
}
