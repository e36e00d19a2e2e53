//! strait's exact upstream→downstream offset mapping, per source partition.
//!
//! strait forwards record batches one to one, so each produce acknowledgement gives an exact
//! [`Segment`]: upstream offsets `upstream_start..upstream_start+len` are at downstream offsets
//! `downstream_start..downstream_start+len` (a rebuilt batch whose gaps were renumbered gives
//! several segments). [`PartitionMapping`] keeps these as run-length runs, merging a segment
//! that continues the previous one in both upstream and downstream offsets, so a partition
//! without gaps costs one run however long it replicates.
//!
//! # Translation
//!
//! [`PartitionMapping::translate`] answers "a consumer resumes at upstream offset `u`: where
//! should it resume downstream?". The exact answer is the downstream offset of the first
//! replicated record with upstream offset `>= u`, or the downstream end when there is none yet.
//! - Inside a run the answer is exact.
//! - In a gap between two adjacent runs (records that were never replicated: aborted
//!   transactions, control records, compacted away, filtered) the answer is the next run's
//!   first downstream offset, also exact.
//! - In a gap left by thinning (see below), or past the replicated end, the answer is
//!   approximate and follows MM2's rule: the last known pair `(u_s, d_s)` with `u_s <= u`
//!   gives `d_s + (u == u_s ? 0 : 1)`. It may re-read records, never skips one.
//! - Before the first run there is no answer ([`Translation::BeforeHistory`]).
//!
//! # Bounded memory
//!
//! A partition holds at most `max_segments` runs (default [`DEFAULT_MAX_SEGMENTS`], at least
//! [`MIN_MAX_SEGMENTS`]). When a new run would exceed it, history is thinned in one pass, the way
//! MM2's `OffsetSyncStore` keeps exponentially spaced syncs:
//! - the newest `max_segments / 4` runs stay exact;
//! - the oldest run is always kept, so history never gets shorter by thinning;
//! - of the other older runs, a run at upstream distance `dist` from the newest upstream end is
//!   in level `floor(log2(dist))`, and within a level kept runs are at least
//!   `ceil(2^level / K)` offsets apart, with `K = max_segments / 4 / 63`; so each of the at most
//!   63 levels keeps at most `K` runs.
//!
//! After a pass at most `max_segments / 2` runs remain, so a pass (linear in `max_segments`)
//! runs at most once per `max_segments / 2` appends.
//!
//! Worst-case memory per partition: the run buffer never holds more than `max_segments` runs of
//! 32 bytes, in a `VecDeque` whose capacity grows by doubling, so at most
//! `32 * max_segments.next_power_of_two()` bytes, plus 32 bytes of header: 32 KiB with the
//! default of 1024.
//!
//! # Persistence
//!
//! The mapping is stored with strait's progress (`crate::store::mapping` has the format). To
//! write only what changed, a mapping counts its *stable prefix*: how many leading runs are
//! unchanged since the store last took them ([`PartitionMapping::mark_stable`]). Appending
//! never changes a run but the last; thinning, truncation and clearing shorten the stable
//! prefix to what they left untouched. [`PartitionMapping::restore`] rebuilds a mapping from
//! stored runs.
//!
//! # Rewinds
//!
//! A segment that starts below the upstream end (a seek back, a re-replication after a retry)
//! truncates the history at its upstream start. A segment whose downstream start is below the
//! downstream end of what remains (the target partition was truncated or recreated) clears all
//! history: old downstream offsets can no longer be trusted.

use std::collections::{HashMap, VecDeque};

use thiserror::Error;

use super::TopicPartition;

pub use crate::model::mapping_cost::{DEFAULT_MAX_SEGMENTS, MAX_MAX_SEGMENTS, MIN_MAX_SEGMENTS};

/// Worst-case memory of one partition's mapping with `max_segments` runs (see the module
/// docs' "Bounded memory").
pub fn worst_case_bytes(max_segments: usize) -> usize {
    crate::model::mapping_cost::worst_case_memory_bytes(max_segments)
}

/// Number of distance levels thinning uses: upstream distances fit in 63 bits.
const LEVELS: usize = 63;

/// Errors from the offset mapping.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum MappingError {
    /// A segment with a negative offset, no records, or an end past `i64::MAX`.
    #[error(
        "{tp}: invalid mapping segment upstream {upstream_start}, downstream {downstream_start}, {len} records"
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
    /// Stored runs that overlap or go back (a corrupt stored mapping).
    #[error(
        "{tp}: stored mapping run upstream {upstream_start}, downstream {downstream_start} overlaps the run before it"
    )]
    OutOfOrder {
        /// Source partition.
        tp: TopicPartition,
        /// Upstream start offset of the run.
        upstream_start: i64,
        /// Downstream start offset of the run.
        downstream_start: i64,
    },
    /// `max_segments` below [`MIN_MAX_SEGMENTS`].
    #[error("max segments per partition must be at least {MIN_MAX_SEGMENTS}, got {max_segments}")]
    MaxSegmentsTooSmall {
        /// The bound given.
        max_segments: usize,
    },
}

/// An exact mapping: `len` records at upstream `upstream_start..` are at downstream
/// `downstream_start..`, one to one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Segment {
    /// Upstream offset of the first record.
    pub upstream_start: i64,
    /// Downstream offset of the first record.
    pub downstream_start: i64,
    /// Record count, at least 1.
    pub len: i64,
}

impl Segment {
    /// Builds a segment.
    pub fn new(upstream_start: i64, downstream_start: i64, len: i64) -> Self {
        Self {
            upstream_start,
            downstream_start,
            len,
        }
    }

    /// One past the last upstream offset.
    pub fn upstream_end(&self) -> i64 {
        self.upstream_start + self.len
    }

    /// One past the last downstream offset.
    pub fn downstream_end(&self) -> i64 {
        self.downstream_start + self.len
    }

    /// True when offsets are non-negative, `len >= 1` and both ends fit in an `i64`.
    pub fn is_valid(&self) -> bool {
        self.upstream_start >= 0
            && self.downstream_start >= 0
            && self.len >= 1
            && self.upstream_start.checked_add(self.len).is_some()
            && self.downstream_start.checked_add(self.len).is_some()
    }
}

/// Result of translating an upstream offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Translation {
    /// The downstream offset of the first replicated record at or after the upstream offset
    /// (or the downstream end, when the upstream offset is exactly the replicated end).
    Exact(i64),
    /// A safe lower bound by MM2's rule: resuming there may re-read records, never skips one.
    Approximate(i64),
    /// The offset is before the retained history (or there is no history).
    BeforeHistory,
}

impl Translation {
    /// The downstream offset, if any.
    pub fn downstream(&self) -> Option<i64> {
        match *self {
            Self::Exact(d) | Self::Approximate(d) => Some(d),
            Self::BeforeHistory => None,
        }
    }

    /// The downstream offset when the answer is exact.
    pub fn exact(&self) -> Option<i64> {
        match *self {
            Self::Exact(d) => Some(d),
            _ => None,
        }
    }
}

/// A retained run; `exact_gap_before` says whether the upstream gap between the previous run
/// and this one holds only records that were never replicated (false once thinning removed
/// runs there). It is meaningless for the first run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Run {
    upstream_start: i64,
    downstream_start: i64,
    len: i64,
    exact_gap_before: bool,
}

// The worst-case memory in the module docs counts 32 bytes per run.
const _: () = assert!(std::mem::size_of::<Run>() == 32);

impl Run {
    fn upstream_end(&self) -> i64 {
        self.upstream_start + self.len
    }

    fn downstream_end(&self) -> i64 {
        self.downstream_start + self.len
    }
}

/// The exact offset mapping of one source partition. See the [module docs](self).
#[derive(Debug, Clone)]
pub struct PartitionMapping {
    runs: VecDeque<Run>,
    max_segments: usize,
    /// Leading runs unchanged since the last [`PartitionMapping::mark_stable`] (see the module
    /// docs' "Persistence"); never more than `runs.len()`.
    stable: usize,
    /// Every source record below this offset is replicated and its segments applied (the
    /// shard's acknowledged end); `None` when not known (nothing acknowledged yet, or an
    /// operator moved the position since).
    acked_end: Option<i64>,
    /// Where replication of this history began: the source records from here up to the first
    /// run were never replicated (compacted away, markers, aborted), so offsets there
    /// translate exactly to the first run. `None` when not known.
    start: Option<i64>,
    /// Replication resumed past the acknowledged end without mapping what lies between: the
    /// next run's gap may hold records that were copied, so it is not exact.
    gap_unknown: bool,
}

impl Default for PartitionMapping {
    fn default() -> Self {
        Self {
            runs: VecDeque::new(),
            max_segments: DEFAULT_MAX_SEGMENTS,
            stable: 0,
            acked_end: None,
            start: None,
            gap_unknown: false,
        }
    }
}

/// A run as stored: its records and whether the upstream gap before it holds only records that
/// were never replicated ([`PartitionMapping::restore`], [`PartitionMapping::stored_runs`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoredRun {
    /// The run's records.
    pub segment: Segment,
    /// False when thinning removed runs in the gap before this one (translation there is
    /// approximate). Meaningless for the first run.
    pub exact_gap_before: bool,
}

impl PartitionMapping {
    /// An empty mapping holding at most `max_segments` runs (at least [`MIN_MAX_SEGMENTS`]).
    /// Worst-case memory: `32 * max_segments.next_power_of_two()` bytes plus a 32-byte header.
    pub fn new(max_segments: usize) -> Result<Self, MappingError> {
        if max_segments < MIN_MAX_SEGMENTS {
            return Err(MappingError::MaxSegmentsTooSmall { max_segments });
        }
        Ok(Self {
            runs: VecDeque::new(),
            max_segments,
            stable: 0,
            acked_end: None,
            start: None,
            gap_unknown: false,
        })
    }

    /// Replication of this partition starts at `upstream` (an assignment, a restart): when no
    /// history precedes it, the records from there to the first run are never replicated. When
    /// it starts past the acknowledged end (records copied but not mapped), the gap before the
    /// next run is not exact: translation there may re-read, never skip.
    pub fn set_start(&mut self, upstream: i64) {
        match self.runs.back() {
            None => self.start = Some(upstream),
            Some(last) => {
                if upstream > self.acked_end.unwrap_or(last.upstream_end()) {
                    self.gap_unknown = true;
                }
            }
        }
    }

    /// Where replication of the stored history began (see [`PartitionMapping::start`]).
    pub fn restore_start(&mut self, upstream: i64) {
        if self
            .runs
            .front()
            .is_none_or(|f| upstream <= f.upstream_start)
        {
            self.start = Some(upstream);
        }
    }

    /// Where replication of the retained history began, if known.
    pub fn start(&self) -> Option<i64> {
        self.start
    }

    /// Every source record below `next_offset` is replicated and its segments applied.
    pub fn set_acked_end(&mut self, next_offset: i64) {
        self.acked_end = Some(next_offset);
    }

    /// The acknowledged end, if known.
    pub fn acked_end(&self) -> Option<i64> {
        self.acked_end
    }

    /// Rebuilds a stored mapping (oldest run first) holding at most `max_segments` runs. The
    /// runs must be valid and increasing on both sides, as [`PartitionMapping::stored_runs`]
    /// gave them; more runs than the bound are thinned. All restored runs count as stable when
    /// `stable` is true (they are what the store holds), none otherwise.
    pub fn restore(
        tp: &TopicPartition,
        max_segments: usize,
        runs: impl IntoIterator<Item = StoredRun>,
        stable: bool,
    ) -> Result<Self, MappingError> {
        let mut m = Self::new(max_segments)?;
        for r in runs {
            let s = r.segment;
            let invalid = || MappingError::InvalidSegment {
                tp: tp.clone(),
                upstream_start: s.upstream_start,
                downstream_start: s.downstream_start,
                len: s.len,
            };
            if !s.is_valid() {
                return Err(invalid());
            }
            if let Some(last) = m.runs.back()
                && (s.upstream_start < last.upstream_end()
                    || s.downstream_start < last.downstream_end())
            {
                return Err(MappingError::OutOfOrder {
                    tp: tp.clone(),
                    upstream_start: s.upstream_start,
                    downstream_start: s.downstream_start,
                });
            }
            if m.runs.len() >= m.max_segments {
                m.thin();
            }
            m.runs.push_back(Run {
                upstream_start: s.upstream_start,
                downstream_start: s.downstream_start,
                len: s.len,
                exact_gap_before: r.exact_gap_before,
            });
        }
        m.stable = if stable { m.runs.len() } else { 0 };
        Ok(m)
    }

    /// The retained runs as stored, oldest first.
    pub fn stored_runs(&self) -> impl ExactSizeIterator<Item = StoredRun> + '_ {
        self.runs.iter().map(|r| StoredRun {
            segment: Segment::new(r.upstream_start, r.downstream_start, r.len),
            exact_gap_before: r.exact_gap_before,
        })
    }

    /// How many leading runs are unchanged since the last [`PartitionMapping::mark_stable`].
    pub fn stable_prefix(&self) -> usize {
        self.stable
    }

    /// The store holds the first `runs` runs as they are now.
    pub fn mark_stable(&mut self, runs: usize) {
        debug_assert!(runs <= self.runs.len());
        self.stable = runs.min(self.runs.len());
    }

    /// An operator moved the partition's position to `upstream`: every upstream offset
    /// `>= upstream` is dropped (what follows will be copied again, elsewhere on the target),
    /// and the acknowledged end is unknown until the shard reports again.
    pub fn truncate(&mut self, upstream: i64) {
        self.acked_end = None;
        if self
            .runs
            .front()
            .is_none_or(|first| upstream <= first.upstream_start)
        {
            // Nothing before it stays: a history that begins at `upstream` again.
            self.runs.clear();
            self.stable = 0;
            self.start = Some(upstream);
            return;
        }
        if self
            .runs
            .back()
            .is_some_and(|last| upstream < last.upstream_end())
        {
            self.truncate_from(upstream);
        }
    }

    /// Records an acknowledged segment. `tp` is only used for the error message.
    pub fn append(&mut self, tp: &TopicPartition, segment: Segment) -> Result<(), MappingError> {
        if !segment.is_valid() {
            return Err(MappingError::InvalidSegment {
                tp: tp.clone(),
                upstream_start: segment.upstream_start,
                downstream_start: segment.downstream_start,
                len: segment.len,
            });
        }
        let mut exact_gap_before = true;
        if self
            .runs
            .back()
            .is_some_and(|last| segment.upstream_start < last.upstream_end())
        {
            exact_gap_before = self.truncate_from(segment.upstream_start);
        }
        if let Some(last) = self.runs.back_mut() {
            if segment.downstream_start < last.downstream_end() {
                // The target went backwards: old downstream offsets are no longer trustworthy.
                self.runs.clear();
                self.stable = 0;
                self.start = None;
            } else if segment.upstream_start == last.upstream_end()
                && segment.downstream_start == last.downstream_end()
                && !self.gap_unknown
            {
                // Both ends continue: one longer run. Cannot overflow: the segment's ends fit.
                last.len += segment.len;
                self.stable = self.stable.min(self.runs.len() - 1);
                return Ok(());
            }
        }
        if self.runs.len() >= self.max_segments {
            self.thin();
        }
        self.runs.push_back(Run {
            upstream_start: segment.upstream_start,
            downstream_start: segment.downstream_start,
            len: segment.len,
            exact_gap_before: exact_gap_before && !std::mem::take(&mut self.gap_unknown),
        });
        debug_assert!(self.runs_increase(), "mapping runs out of order for {tp}");
        debug_assert!(self.runs.len() <= self.max_segments);
        Ok(())
    }

    /// Runs are increasing and disjoint on both sides: what translation's binary search needs.
    fn runs_increase(&self) -> bool {
        self.runs
            .iter()
            .zip(self.runs.iter().skip(1))
            .all(|(a, b)| {
                a.len > 0
                    && a.upstream_end() <= b.upstream_start
                    && a.downstream_end() <= b.downstream_start
            })
    }

    /// Drops every upstream offset `>= upstream`, splitting a run that straddles it. Returns
    /// whether the gap now before `upstream` is still exact.
    fn truncate_from(&mut self, upstream: i64) -> bool {
        let idx = self.runs.partition_point(|r| r.upstream_end() <= upstream);
        // Runs from `idx` on are shortened or dropped.
        self.stable = self.stable.min(idx);
        let mut exact = true;
        if let Some(run) = self.runs.get_mut(idx) {
            if run.upstream_start < upstream {
                run.len = upstream - run.upstream_start;
                self.runs.truncate(idx + 1);
                return true;
            }
            // The gap before `upstream` is part of the gap that was before this run.
            exact = run.exact_gap_before;
        }
        self.runs.truncate(idx);
        exact
    }

    /// Thins older runs to at most `max_segments / 2` in total; see the module docs.
    fn thin(&mut self) {
        let Some(head) = self.runs.back().map(Run::upstream_end) else {
            return;
        };
        let recent = self.max_segments / 4;
        let per_level = (self.max_segments / 4 / LEVELS).max(1) as i64;
        let older = self.runs.len().saturating_sub(recent);
        let mut kept: VecDeque<Run> = VecDeque::with_capacity(self.runs.capacity());
        let mut dropped = false;
        // Runs before the first one dropped stay where they were, unchanged.
        let mut first_dropped = None;
        for (i, run) in self.runs.drain(..).enumerate() {
            let keep = match kept.back() {
                None => true,
                Some(_) if i >= older => true,
                Some(prev) => {
                    // `head > run.upstream_start >= 0`, so the distance is in 1..=i64::MAX.
                    let distance = head - run.upstream_start;
                    let level = 63 - distance.leading_zeros();
                    let width = 1i64 << level;
                    let spacing = (width + per_level - 1) / per_level;
                    run.upstream_start - prev.upstream_start >= spacing
                }
            };
            if keep {
                let mut run = run;
                if dropped {
                    run.exact_gap_before = false;
                    dropped = false;
                }
                kept.push_back(run);
            } else {
                dropped = true;
                first_dropped.get_or_insert(i);
            }
        }
        self.runs = kept;
        if let Some(i) = first_dropped {
            self.stable = self.stable.min(i);
        }
    }

    /// Translates upstream offset `upstream`; see the module docs.
    pub fn translate(&self, upstream: i64) -> Translation {
        let Some(first) = self.runs.front() else {
            return Translation::BeforeHistory;
        };
        if upstream < first.upstream_start {
            return match self.start {
                Some(s) if s <= upstream => Translation::Exact(first.downstream_start),
                _ => Translation::BeforeHistory,
            };
        }
        // At least the first run starts at or before `upstream`.
        let idx = self.runs.partition_point(|r| r.upstream_start <= upstream) - 1;
        let run = &self.runs[idx];
        if upstream < run.upstream_end() {
            return Translation::Exact(run.downstream_start + (upstream - run.upstream_start));
        }
        match self.runs.get(idx + 1) {
            Some(next) if next.exact_gap_before => Translation::Exact(next.downstream_start),
            // MM2's rule from the last known pair (run end - 1, downstream end - 1): + 1.
            Some(_) => Translation::Approximate(run.downstream_end()),
            None if upstream == run.upstream_end() => Translation::Exact(run.downstream_end()),
            None => Translation::Approximate(run.downstream_end()),
        }
    }

    /// The other way round (a failback): the upstream offset where a consumer at downstream
    /// offset `downstream` resumes on the source, having read exactly the replicated records
    /// below it. Inside a run, or at its downstream end, the answer is exact; in a downstream
    /// gap (records the mapping did not write) it is the end of the run before, a safe lower
    /// bound; past the last run it is approximate (the consumer read records written to the
    /// target by someone else). Runs are few (bounded by `max_segments`): a scan, newest run
    /// first, since a truncated target's rewritten offsets belong to the later run.
    pub fn translate_back(&self, downstream: i64) -> Translation {
        if let Some(r) = self
            .runs
            .iter()
            .rev()
            .find(|r| r.downstream_start <= downstream && downstream <= r.downstream_end())
        {
            return Translation::Exact(r.upstream_start + (downstream - r.downstream_start));
        }
        match self
            .runs
            .iter()
            .rev()
            .filter(|r| r.downstream_end() < downstream)
            .max_by_key(|r| r.downstream_end())
        {
            Some(r) => Translation::Approximate(r.upstream_end()),
            None => Translation::BeforeHistory,
        }
    }

    /// The downstream offset of the first retained run starting after `upstream`: the exact
    /// answer for `upstream` is at or before it. `None` past the last run.
    pub fn next_known_downstream(&self, upstream: i64) -> Option<i64> {
        let idx = self.runs.partition_point(|r| r.upstream_start <= upstream);
        self.runs.get(idx).map(|next| next.downstream_start)
    }

    /// Number of retained runs.
    pub fn run_count(&self) -> usize {
        self.runs.len()
    }

    /// The retained runs, oldest first.
    pub fn runs(&self) -> impl Iterator<Item = Segment> + '_ {
        self.runs
            .iter()
            .map(|r| Segment::new(r.upstream_start, r.downstream_start, r.len))
    }

    /// First upstream offset of the retained history.
    pub fn upstream_start(&self) -> Option<i64> {
        self.runs.front().map(|r| r.upstream_start)
    }

    /// One past the last replicated upstream offset.
    pub fn upstream_end(&self) -> Option<i64> {
        self.runs.back().map(Run::upstream_end)
    }

    /// One past the last replicated downstream offset.
    pub fn downstream_end(&self) -> Option<i64> {
        self.runs.back().map(Run::downstream_end)
    }

    /// The configured bound on runs.
    pub fn max_segments(&self) -> usize {
        self.max_segments
    }
}

/// Exact mappings for many source partitions.
#[derive(Debug, Clone)]
pub struct OffsetMapping {
    partitions: HashMap<TopicPartition, PartitionMapping>,
    max_segments: usize,
}

impl Default for OffsetMapping {
    fn default() -> Self {
        Self {
            partitions: HashMap::new(),
            max_segments: DEFAULT_MAX_SEGMENTS,
        }
    }
}

impl OffsetMapping {
    /// An empty mapping with `max_segments` runs per partition (at least [`MIN_MAX_SEGMENTS`]).
    /// The number of partitions is bounded by the caller: it holds the partitions assigned to
    /// this instance and calls [`OffsetMapping::remove`] on revocation.
    pub fn new(max_segments: usize) -> Result<Self, MappingError> {
        PartitionMapping::new(max_segments)?;
        Ok(Self {
            partitions: HashMap::new(),
            max_segments,
        })
    }

    /// Records an acknowledged segment of `tp`.
    pub fn append(&mut self, tp: &TopicPartition, segment: Segment) -> Result<(), MappingError> {
        if let Some(mapping) = self.partitions.get_mut(tp) {
            return mapping.append(tp, segment);
        }
        let mut mapping = PartitionMapping::new(self.max_segments)?;
        mapping.append(tp, segment)?;
        self.partitions.insert(tp.clone(), mapping);
        Ok(())
    }

    /// Translates an upstream offset of `tp`; `BeforeHistory` for an unknown partition.
    pub fn translate(&self, tp: &TopicPartition, upstream: i64) -> Translation {
        self.partitions
            .get(tp)
            .map_or(Translation::BeforeHistory, |m| m.translate(upstream))
    }

    /// The mapping of one partition.
    pub fn partition(&self, tp: &TopicPartition) -> Option<&PartitionMapping> {
        self.partitions.get(tp)
    }

    /// The mapping of one partition, to mark what the store holds.
    pub fn partition_mut(&mut self, tp: &TopicPartition) -> Option<&mut PartitionMapping> {
        self.partitions.get_mut(tp)
    }

    /// Every source record of `tp` below `next_offset` is replicated and its segments applied.
    pub fn set_acked_end(&mut self, tp: TopicPartition, next_offset: i64) {
        match self.partitions.get_mut(&tp) {
            Some(m) => m.set_acked_end(next_offset),
            None => {
                let mut m = PartitionMapping {
                    max_segments: self.max_segments,
                    ..PartitionMapping::default()
                };
                m.set_acked_end(next_offset);
                self.partitions.insert(tp, m);
            }
        }
    }

    /// Replication of `tp` starts at `upstream` ([`PartitionMapping::set_start`]).
    pub fn set_start(&mut self, tp: TopicPartition, upstream: i64) {
        let max_segments = self.max_segments;
        self.partitions
            .entry(tp)
            .or_insert_with(|| PartitionMapping {
                max_segments,
                ..PartitionMapping::default()
            })
            .set_start(upstream);
    }

    /// Replaces the mapping of `tp` with one read from the store.
    pub fn insert(&mut self, tp: TopicPartition, mapping: PartitionMapping) {
        self.partitions.insert(tp, mapping);
    }

    /// Drops every upstream offset of `tp` at or after `upstream` (a seek back).
    pub fn truncate(&mut self, tp: &TopicPartition, upstream: i64) {
        if let Some(m) = self.partitions.get_mut(tp) {
            m.truncate(upstream);
        }
    }

    /// The bound on runs per partition.
    pub fn max_segments(&self) -> usize {
        self.max_segments
    }

    /// Forgets a partition (revoked, or its topic deleted or recreated).
    pub fn remove(&mut self, tp: &TopicPartition) -> Option<PartitionMapping> {
        self.partitions.remove(tp)
    }

    /// Number of partitions with a mapping.
    pub fn len(&self) -> usize {
        self.partitions.len()
    }

    /// True when no partition has a mapping.
    pub fn is_empty(&self) -> bool {
        self.partitions.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn tp() -> TopicPartition {
        TopicPartition::new("t", 0)
    }

    #[test]
    fn sizes_stay_within_the_figures_strait_check_prints() {
        use crate::model::mapping_cost::{PARTITION_MAPPING_FIXED_BYTES, RUN_MEMORY_BYTES};
        assert!(std::mem::size_of::<Run>() <= RUN_MEMORY_BYTES);
        assert!(std::mem::size_of::<PartitionMapping>() <= PARTITION_MAPPING_FIXED_BYTES);
    }

    fn mapping(segments: &[(i64, i64, i64)]) -> PartitionMapping {
        let mut m = PartitionMapping::default();
        for &(u, d, n) in segments {
            m.append(&tp(), Segment::new(u, d, n)).unwrap();
        }
        m
    }

    #[test]
    fn contiguous_segments_merge() {
        let m = mapping(&[(0, 100, 5), (5, 105, 3), (8, 108, 1)]);
        assert_eq!(m.run_count(), 1);
        assert_eq!(m.runs().collect::<Vec<_>>(), vec![Segment::new(0, 100, 9)]);
        // Upstream contiguous but downstream not (a foreign write on the target): no merge.
        let m = mapping(&[(0, 100, 5), (5, 106, 3)]);
        assert_eq!(m.run_count(), 2);
        // Downstream contiguous but upstream not (a transaction marker): no merge.
        let m = mapping(&[(0, 100, 5), (6, 105, 3)]);
        assert_eq!(m.run_count(), 2);
    }

    #[test]
    fn translation_inside_between_and_after_runs() {
        // Records 0..5 at 100..105; upstream 5 is a commit marker; 6..9 at 105..108.
        let m = mapping(&[(0, 100, 5), (6, 105, 3)]);
        assert_eq!(m.translate(-1), Translation::BeforeHistory);
        assert_eq!(m.translate(0), Translation::Exact(100));
        assert_eq!(m.translate(4), Translation::Exact(104));
        // A consumer at the marker next reads upstream 6, which is at 105.
        assert_eq!(m.translate(5), Translation::Exact(105));
        assert_eq!(m.translate(8), Translation::Exact(107));
        // Caught up: resume at the downstream end.
        assert_eq!(m.translate(9), Translation::Exact(108));
        // Ahead of replication: MM2's +1 rule from the last replicated record.
        assert_eq!(m.translate(50), Translation::Approximate(108));
    }

    #[test]
    fn translation_back_from_the_target() {
        // Records 0..5 at 100..105; upstream 5 is a marker; 6..9 at 105..108; 108..110 on the
        // target written by someone else; 9..11 at 110..112.
        let m = mapping(&[(0, 100, 5), (6, 105, 3), (9, 110, 2)]);
        assert_eq!(m.translate_back(99), Translation::BeforeHistory);
        assert_eq!(m.translate_back(100), Translation::Exact(0));
        assert_eq!(m.translate_back(104), Translation::Exact(4));
        // 105 is both the first run's end and the second's start: the record there is 6.
        assert_eq!(m.translate_back(105), Translation::Exact(6));
        assert_eq!(m.translate_back(108), Translation::Exact(9));
        // Inside the foreign records: resume after the last replicated record read.
        assert_eq!(m.translate_back(109), Translation::Approximate(9));
        assert_eq!(m.translate_back(112), Translation::Exact(11));
        assert_eq!(m.translate_back(200), Translation::Approximate(11));
    }

    #[test]
    fn history_starting_late_is_before_history() {
        let m = mapping(&[(1000, 0, 10)]);
        assert_eq!(m.translate(999), Translation::BeforeHistory);
        assert_eq!(m.translate(1000), Translation::Exact(0));
        assert_eq!(
            PartitionMapping::default().translate(0),
            Translation::BeforeHistory
        );
    }

    #[test]
    fn upstream_rewind_truncates_history() {
        let mut m = mapping(&[(0, 0, 10), (20, 10, 10)]);
        // Re-replication from upstream 5: records 5.. are now at 100...
        m.append(&tp(), Segment::new(5, 100, 3)).unwrap();
        assert_eq!(
            m.runs().collect::<Vec<_>>(),
            vec![Segment::new(0, 0, 5), Segment::new(5, 100, 3)]
        );
        assert_eq!(m.translate(4), Translation::Exact(4));
        assert_eq!(m.translate(5), Translation::Exact(100));
        // Rewind into a gap: the gap before the new run stays what it was.
        let mut m = mapping(&[(0, 0, 10), (20, 10, 10)]);
        m.append(&tp(), Segment::new(15, 50, 1)).unwrap();
        assert_eq!(m.translate(12), Translation::Exact(50));
        // Rewind before all history.
        let mut m = mapping(&[(10, 0, 10)]);
        m.append(&tp(), Segment::new(3, 40, 2)).unwrap();
        assert_eq!(m.runs().collect::<Vec<_>>(), vec![Segment::new(3, 40, 2)]);
    }

    #[test]
    fn downstream_rewind_clears_history() {
        let mut m = mapping(&[(0, 100, 10)]);
        m.append(&tp(), Segment::new(10, 5, 2)).unwrap();
        assert_eq!(m.runs().collect::<Vec<_>>(), vec![Segment::new(10, 5, 2)]);
        assert_eq!(m.translate(9), Translation::BeforeHistory);
    }

    #[test]
    fn invalid_segments_are_rejected() {
        let mut m = PartitionMapping::default();
        for seg in [
            Segment::new(-1, 0, 1),
            Segment::new(0, -1, 1),
            Segment::new(0, 0, 0),
            Segment::new(i64::MAX, 0, 1),
            Segment::new(0, i64::MAX - 1, 2),
        ] {
            assert!(matches!(
                m.append(&tp(), seg),
                Err(MappingError::InvalidSegment { .. })
            ));
        }
        assert_eq!(m.run_count(), 0);
        assert!(matches!(
            PartitionMapping::new(MIN_MAX_SEGMENTS - 1),
            Err(MappingError::MaxSegmentsTooSmall { .. })
        ));
    }

    #[test]
    fn thinning_bounds_runs_and_keeps_recent_and_first_exact() {
        let max = MIN_MAX_SEGMENTS;
        let mut m = PartitionMapping::new(max).unwrap();
        // Every batch is followed by one unreplicated offset (a transaction marker).
        let mut passes = 0;
        let mut previous = 0;
        for i in 0..10_000i64 {
            m.append(&tp(), Segment::new(i * 11, i * 10, 10)).unwrap();
            assert!(m.run_count() <= max);
            if m.run_count() < previous {
                // A thinning pass leaves at most half the bound (plus the new run).
                passes += 1;
                assert!(m.run_count() <= max / 2 + 1, "{}", m.run_count());
            }
            previous = m.run_count();
        }
        assert!(passes > 1);
        assert_eq!(m.upstream_start(), Some(0));
        assert_eq!(m.translate(0), Translation::Exact(0));
        // The newest quarter is exact, gaps included.
        for i in (10_000 - (max as i64) / 4)..10_000 {
            assert_eq!(m.translate(i * 11 + 3), Translation::Exact(i * 10 + 3));
            assert_eq!(m.translate(i * 11 + 10), Translation::Exact(i * 10 + 10));
        }
        // Somewhere in thinned history the answer is approximate but never skips.
        let thinned = (0..10_000i64 * 11)
            .filter(|&u| matches!(m.translate(u), Translation::Approximate(_)))
            .count();
        assert!(thinned > 0);
    }

    #[test]
    fn offset_mapping_per_partition() {
        let mut all = OffsetMapping::default();
        let a = TopicPartition::new("a", 0);
        let b = TopicPartition::new("a", 1);
        all.append(&a, Segment::new(0, 0, 10)).unwrap();
        all.append(&b, Segment::new(0, 50, 10)).unwrap();
        assert_eq!(all.translate(&a, 3), Translation::Exact(3));
        assert_eq!(all.translate(&b, 3), Translation::Exact(53));
        assert_eq!(
            all.translate(&TopicPartition::new("c", 0), 3),
            Translation::BeforeHistory
        );
        all.remove(&a);
        assert_eq!(all.translate(&a, 3), Translation::BeforeHistory);
        assert_eq!(all.len(), 1);
    }

    /// One batch of the generated stream: records skipped upstream before it (never
    /// replicated), foreign records written downstream before it, and its record count.
    #[derive(Debug, Clone)]
    struct Batch {
        upstream_gap: i64,
        downstream_gap: i64,
        len: i64,
    }

    fn batch() -> impl Strategy<Value = Batch> {
        (
            prop_oneof![3 => Just(0i64), 2 => 1i64..4, 1 => 4i64..200],
            prop_oneof![6 => Just(0i64), 1 => 1i64..3],
            1i64..40,
        )
            .prop_map(|(upstream_gap, downstream_gap, len)| Batch {
                upstream_gap,
                downstream_gap,
                len,
            })
    }

    /// Replays a stream; returns the mapping and every replicated (upstream, downstream) pair.
    fn replay(start: i64, batches: &[Batch], max: usize) -> (PartitionMapping, Vec<(i64, i64)>) {
        let mut m = PartitionMapping::new(max).unwrap();
        let mut pairs = Vec::new();
        let (mut u, mut d) = (start, 0i64);
        for b in batches {
            u += b.upstream_gap;
            d += b.downstream_gap;
            // Sometimes a rebuilt batch is reported as two segments.
            let first = (b.len / 2).max(1);
            m.append(&tp(), Segment::new(u, d, first)).unwrap();
            if b.len > first {
                m.append(&tp(), Segment::new(u + first, d + first, b.len - first))
                    .unwrap();
            }
            for i in 0..b.len {
                pairs.push((u + i, d + i));
            }
            u += b.len;
            d += b.len;
        }
        (m, pairs)
    }

    /// The exact answer: downstream of the first replicated record at or after `u`, else the
    /// downstream end.
    fn truth(pairs: &[(i64, i64)], u: i64) -> i64 {
        let idx = pairs.partition_point(|&(pu, _)| pu < u);
        pairs
            .get(idx)
            .map_or_else(|| pairs.last().map_or(0, |&(_, d)| d + 1), |&(_, d)| d)
    }

    #[test]
    fn offsets_between_the_start_and_the_first_run_are_exact() {
        // Replication began at 0; offsets 0..3 were compacted away on the source.
        let mut m = PartitionMapping::default();
        m.set_start(0);
        m.append(&tp(), Segment::new(3, 0, 5)).unwrap();
        assert_eq!(m.translate(0), Translation::Exact(0));
        assert_eq!(m.translate(2), Translation::Exact(0));
        // A start set once history exists changes nothing.
        m.set_start(1);
        assert_eq!(m.start(), Some(0));
        // Without a known start, before the first run is before history.
        let m = mapping(&[(3, 0, 5)]);
        assert_eq!(m.translate(2), Translation::BeforeHistory);
        // A seek before all history starts it again there.
        let mut m = mapping(&[(3, 0, 5)]);
        m.truncate(1);
        assert_eq!((m.run_count(), m.start()), (0, Some(1)));
        // Resuming past the acknowledged end without the records in between: not exact there.
        let mut m = mapping(&[(0, 0, 10)]);
        m.set_acked_end(10);
        m.set_start(14);
        m.append(&tp(), Segment::new(14, 14, 5)).unwrap();
        assert_eq!(m.translate(12), Translation::Approximate(10));
        assert_eq!(m.translate(15), Translation::Exact(15));
        // The target going backwards forgets where history began.
        let mut m = PartitionMapping::default();
        m.set_start(0);
        m.append(&tp(), Segment::new(3, 10, 5)).unwrap();
        m.append(&tp(), Segment::new(8, 2, 5)).unwrap();
        assert_eq!(m.translate(5), Translation::BeforeHistory);
    }

    #[test]
    fn truncation_forgets_the_acknowledged_end() {
        let mut m = mapping(&[(0, 0, 10), (20, 10, 10)]);
        m.set_acked_end(31);
        m.truncate(25);
        assert_eq!(m.acked_end(), None);
        assert_eq!(m.upstream_end(), Some(25));
        // A truncation past the end drops nothing, but still forgets the end.
        m.set_acked_end(25);
        m.truncate(40);
        assert_eq!((m.upstream_end(), m.acked_end()), (Some(25), None));
    }

    #[test]
    fn restore_rejects_overlaps_and_thins_past_the_bound() {
        let run = |u, d, n| StoredRun {
            segment: Segment::new(u, d, n),
            exact_gap_before: true,
        };
        assert!(matches!(
            PartitionMapping::restore(&tp(), 256, [run(0, 0, 10), run(5, 20, 1)], true),
            Err(MappingError::OutOfOrder { .. })
        ));
        let many: Vec<StoredRun> = (0..1000).map(|i| run(i * 2, i, 1)).collect();
        let m = PartitionMapping::restore(&tp(), 256, many, true).unwrap();
        assert!(m.run_count() <= 256);
        assert_eq!(m.translate(1998), Translation::Exact(999));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// What the store took stays what it was: after any appends, rewinds, thinning and
        /// truncations, the first `stable_prefix()` runs are those marked stable.
        #[test]
        fn the_stable_prefix_is_unchanged_since_marked(
            ops in proptest::collection::vec((batch(), 0u8..12), 1..900),
        ) {
            let mut m = PartitionMapping::new(MIN_MAX_SEGMENTS).unwrap();
            let mut marked: Vec<StoredRun> = Vec::new();
            let (mut u, mut d) = (0i64, 0i64);
            for (b, op) in ops {
                match op {
                    0 => { u = (u - 30).max(0); m.truncate(u); }
                    1 => d += 1,
                    2 => { marked = m.stored_runs().collect(); m.mark_stable(marked.len()); }
                    _ => {}
                }
                u += b.upstream_gap;
                d += b.downstream_gap;
                m.append(&tp(), Segment::new(u, d, b.len)).unwrap();
                u += b.len;
                d += b.len;
                let now: Vec<StoredRun> = m.stored_runs().collect();
                let stable = m.stable_prefix();
                prop_assert!(stable <= now.len() && stable <= marked.len());
                prop_assert_eq!(&now[..stable], &marked[..stable]);
            }
        }
    }

    proptest! {
        // Each case replays hundreds of batches and checks every offset; fewer cases suffice.
        #![proptest_config(ProptestConfig::with_cases(48))]

        #[test]
        fn without_thinning_every_answer_is_exact(
            start in 0i64..1000, batches in proptest::collection::vec(batch(), 1..100),
        ) {
            let (m, pairs) = replay(start, &batches, DEFAULT_MAX_SEGMENTS);
            let last = pairs.last().unwrap().0;
            for u in (start - 2)..=(last + 3) {
                let got = m.translate(u);
                if u < pairs[0].0 {
                    prop_assert_eq!(got, Translation::BeforeHistory);
                } else if u <= last + 1 {
                    prop_assert_eq!(got, Translation::Exact(truth(&pairs, u)), "u={}", u);
                } else {
                    // Ahead of replication: MM2's rule from the last replicated record.
                    prop_assert_eq!(got, Translation::Approximate(pairs.last().unwrap().1 + 1));
                }
            }
            // And back: the consumer at each replicated record's target offset resumes at
            // that record on the source; after the last one, right after it.
            for &(u, d) in &pairs {
                prop_assert_eq!(m.translate_back(d), Translation::Exact(u), "d={}", d);
            }
            let &(lu, ld) = pairs.last().unwrap();
            prop_assert_eq!(m.translate_back(ld + 1), Translation::Exact(lu + 1));
        }

        #[test]
        fn rewinds_keep_answers_exact(
            batches in proptest::collection::vec(
                (batch(), prop_oneof![8 => Just(0u8), 1 => Just(1u8), 1 => Just(2u8)], 0i64..50),
                1..80,
            ),
        ) {
            let mut m = PartitionMapping::default();
            // Model: the pairs still valid after truncations and clears.
            let mut pairs: Vec<(i64, i64)> = Vec::new();
            let (mut u, mut d) = (0i64, 0i64);
            for (b, rewind, back) in batches {
                match rewind {
                    // Upstream seek back (re-replication); downstream keeps going.
                    1 => u = (u - back).max(0),
                    // Target truncated: downstream goes back.
                    2 => d = (d - back - 1).max(0),
                    _ => {}
                }
                u += b.upstream_gap;
                d += b.downstream_gap;
                m.append(&tp(), Segment::new(u, d, b.len)).unwrap();
                pairs.retain(|&(pu, _)| pu < u);
                if pairs.last().is_some_and(|&(_, pd)| d <= pd) {
                    pairs.clear();
                }
                pairs.extend((0..b.len).map(|i| (u + i, d + i)));
                u += b.len;
                d += b.len;
            }
            let first = pairs[0].0;
            let last = pairs.last().unwrap().0;
            prop_assert_eq!(m.upstream_start(), Some(first));
            for q in (first - 2)..=(last + 2) {
                let got = m.translate(q);
                if q < first {
                    prop_assert_eq!(got, Translation::BeforeHistory);
                } else if q <= last + 1 {
                    prop_assert_eq!(got, Translation::Exact(truth(&pairs, q)), "q={}", q);
                } else {
                    prop_assert_eq!(got, Translation::Approximate(pairs.last().unwrap().1 + 1));
                }
            }
        }

        #[test]
        fn with_thinning_answers_are_exact_or_safe(
            start in 0i64..1000, batches in proptest::collection::vec(batch(), 200..900),
        ) {
            let max = MIN_MAX_SEGMENTS;
            let (m, pairs) = replay(start, &batches, max);
            prop_assert!(m.run_count() <= max);
            // The first record is never thinned away.
            prop_assert_eq!(m.upstream_start(), Some(pairs[0].0));
            let retained: Vec<Segment> = m.runs().collect();
            // Every retained run is exactly what was replicated.
            for seg in &retained {
                for i in 0..seg.len {
                    let idx = pairs.partition_point(|&(pu, _)| pu < seg.upstream_start + i);
                    prop_assert_eq!(pairs[idx], (seg.upstream_start + i, seg.downstream_start + i));
                }
            }
            let last = pairs.last().unwrap().0;
            for u in (start - 2)..=(last + 3) {
                let exact = truth(&pairs, u);
                match m.translate(u) {
                    Translation::BeforeHistory => prop_assert!(u < pairs[0].0),
                    Translation::Exact(d) => prop_assert_eq!(d, exact, "u={}", u),
                    Translation::Approximate(d) => {
                        // Never skips a replicated record.
                        prop_assert!(d <= exact, "u={} d={} exact={}", u, d, exact);
                        // MM2's rule from the last retained pair before u.
                        let seg = retained.iter().rev().find(|s| s.upstream_start < u).unwrap();
                        prop_assert!(u >= seg.upstream_end());
                        prop_assert_eq!(d, seg.downstream_end());
                    }
                }
            }
            // Records inside the newest quarter of the bound translate exactly.
            let recent = &retained[retained.len().saturating_sub(max / 4)..];
            for seg in recent {
                for u in seg.upstream_start..seg.upstream_end() {
                    prop_assert_eq!(m.translate(u), Translation::Exact(truth(&pairs, u)));
                }
            }
        }
    }
}
