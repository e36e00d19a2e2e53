//! The record-by-record comparison of one source partition with its remote partition, sans-IO:
//! records go in (in offset order, in chunks, from each side), the comparer says which side it
//! needs next and counts what it found. The driver (`super::partition`) does the fetching.
//!
//! # Pairing
//!
//! Every record gets a *downstream key*, the target offset it should be at:
//! - a target record's key is its offset;
//! - a source record inside a run of the stored mapping has the run's exact target offset;
//! - a source record in a gap that thinning left approximate is paired by order: the k-th
//!   source record of the gap with target offset `previous run's downstream end + k` (strait
//!   copies in order, so without compaction both sides line up);
//! - a source record in an exact gap (between runs, or skipped at the end) has no key: the
//!   mapping says strait did not copy it, yet a read_committed consumer of the source sees it,
//!   so it is missing on the target.
//!
//! Both streams come in key order, so one merge pairs them: equal keys are compared field by
//! field; a source key the target lacks is *missing*; a target record no source record claims
//! is *extra*. On a compacted topic a side's cleaner may remove records the other side still
//! holds: those are counted apart (present on one side only) and do not fail the comparison.

use std::collections::VecDeque;

use sha2::{Digest, Sha256};
use strait_dataplane::batch::TimestampType;

use crate::offsets::mapping::StoredRun;
use crate::store::records::StoredRecord;

/// What is compared of one partition, fixed before reading.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The stored mapping's runs, oldest first.
    pub runs: Vec<StoredRun>,
    /// Source records from here are compared.
    pub source_from: i64,
    /// Source records below this are copied by the stored progress (the fixed end).
    pub source_end: i64,
    /// Target records from here are compared.
    pub target_from: i64,
    /// Target records below this were written for the source's records below `source_end`.
    pub target_end: i64,
    /// The source topic is compacted: its cleaner may have removed records already copied.
    pub source_compacted: bool,
    /// The remote topic is compacted: its cleaner may have removed copied records.
    pub target_compacted: bool,
}

/// A part of the plan's ranges compared on its own (a sampled batch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub source_from: i64,
    pub source_end: i64,
    pub target_from: i64,
    pub target_end: i64,
}

/// Which record field differs first (in this order of comparison).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Field {
    Key,
    Value,
    Headers,
    Timestamp,
    TimestampType,
}

impl std::fmt::Display for Field {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Field::Key => "key",
            Field::Value => "value",
            Field::Headers => "headers",
            Field::Timestamp => "timestamp",
            Field::TimestampType => "timestamp type",
        })
    }
}

/// What kind of difference a partition showed first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DifferenceKind {
    /// Both sides hold the record; a field differs.
    Mismatch,
    /// The source holds a copied record that the target does not.
    Missing,
    /// The target holds a record that no copied source record accounts for.
    Extra,
}

/// The first difference found in a partition.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Difference {
    pub kind: DifferenceKind,
    /// The source record's offset (none for an extra record).
    pub source_offset: Option<i64>,
    /// The target offset (where the record is, or should be).
    pub target_offset: Option<i64>,
    /// For a mismatch, the first field that differs.
    pub field: Option<Field>,
}

impl std::fmt::Display for Difference {
    /// `value differs: source 12 target 40`, `missing: source 12 not at target 40`,
    /// `extra: target 41`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let at = |o: Option<i64>| o.map_or("-".to_string(), |o| o.to_string());
        match self.kind {
            DifferenceKind::Mismatch => write!(
                f,
                "{} differs: source {} target {}",
                self.field.map(|f| f.to_string()).unwrap_or_default(),
                at(self.source_offset),
                at(self.target_offset)
            ),
            DifferenceKind::Missing => write!(
                f,
                "missing: source {} not at target {}",
                at(self.source_offset),
                at(self.target_offset)
            ),
            DifferenceKind::Extra => write!(f, "extra: target {}", at(self.target_offset)),
        }
    }
}

/// Counts of one partition's comparison.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Counts {
    /// Source records read in the compared range.
    pub source_records: u64,
    /// Target records read in the compared range.
    pub target_records: u64,
    /// Pairs compared field by field.
    pub compared: u64,
    pub matched: u64,
    pub mismatched: u64,
    /// Copied source records the target does not hold.
    pub missing: u64,
    /// Target records no copied source record accounts for.
    pub extra: u64,
    /// Source records whose target copy a compacted remote topic's cleaner removed.
    pub source_only_compacted: u64,
    /// Target records whose source a compacted source topic's cleaner removed.
    pub target_only_compacted: u64,
}

/// What the comparer needs next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// More source records (or [`Comparer::source_done`]).
    Source,
    /// More target records (or [`Comparer::target_done`]).
    Target,
    /// Both sides are done and everything is counted.
    Finished,
}

/// Where a source offset falls in the mapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// Copied to this target offset.
    Exact(i64),
    /// The mapping says it was not copied.
    ExactGap,
    /// In the approximate gap before run `usize`.
    InexactGap(usize),
}

/// One partition's comparison (see the module docs).
pub struct Comparer {
    plan: Plan,
    source: VecDeque<(Option<i64>, StoredRecord)>,
    target: VecDeque<StoredRecord>,
    source_done: bool,
    target_done: bool,
    /// The approximate gap being paired by order: run index and the next key to hand out.
    gap_cursor: Option<(usize, i64)>,
    counts: Counts,
    first: Option<Difference>,
    source_digest: Sha256,
    target_digest: Sha256,
}

impl Comparer {
    pub fn new(plan: Plan) -> Self {
        debug_assert!(
            plan.runs.windows(2).all(|w| w[0].segment.upstream_end()
                <= w[1].segment.upstream_start
                && w[0].segment.downstream_end() <= w[1].segment.downstream_start),
            "stored runs are ordered and disjoint"
        );
        Self {
            plan,
            source: VecDeque::new(),
            target: VecDeque::new(),
            source_done: false,
            target_done: false,
            gap_cursor: None,
            counts: Counts::default(),
            first: None,
            source_digest: Sha256::new(),
            target_digest: Sha256::new(),
        }
    }

    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// Compares `window` next (after [`Need::Finished`]); counts, the first difference and the
    /// digests carry on, so a sampled run sums its windows.
    pub fn next_window(&mut self, window: Window) {
        assert!(
            self.source.is_empty() && self.target.is_empty(),
            "a window starts after the previous one is finished"
        );
        self.plan.source_from = window.source_from;
        self.plan.source_end = window.source_end;
        self.plan.target_from = window.target_from;
        self.plan.target_end = window.target_end;
        self.source_done = false;
        self.target_done = false;
        self.gap_cursor = None;
    }

    /// Whether source offset `u` lies in a gap that thinning left approximate: pairing there
    /// goes by order from the gap's start, so a window must not begin or end inside one.
    pub fn in_approximate_gap(&self, u: i64) -> bool {
        matches!(self.place(u), Place::InexactGap(_))
    }

    /// The target offset of the copy of the first copied source record at or after `u` (the
    /// downstream end when there is none).
    pub fn downstream_at(&self, u: i64) -> i64 {
        let runs = &self.plan.runs;
        let idx = runs.partition_point(|r| r.segment.upstream_start <= u);
        if idx > 0 {
            let run = &runs[idx - 1].segment;
            if u < run.upstream_end() {
                return run.downstream_start + (u - run.upstream_start);
            }
        }
        match runs.get(idx) {
            Some(next) => next.segment.downstream_start,
            None => runs.last().map_or(0, |r| r.segment.downstream_end()),
        }
    }

    /// Source records in offset order, each after the previous ones; records outside
    /// `source_from..source_end` are ignored.
    pub fn push_source(&mut self, records: impl IntoIterator<Item = StoredRecord>) {
        for r in records {
            if r.offset < self.plan.source_from || r.offset >= self.plan.source_end {
                continue;
            }
            debug_assert!(
                self.source.back().is_none_or(|(_, b)| b.offset < r.offset),
                "source records come in offset order"
            );
            self.counts.source_records += 1;
            let key = match self.place(r.offset) {
                Place::Exact(d) => Some(d),
                Place::ExactGap => None,
                Place::InexactGap(run) => {
                    let region_start = self.plan.runs[run - 1].segment.downstream_end();
                    let region_end = self.plan.runs[run].segment.downstream_start;
                    let next = match self.gap_cursor {
                        Some((r, next)) if r == run => next,
                        _ => region_start,
                    };
                    self.gap_cursor = Some((run, next + 1));
                    (next < region_end).then_some(next)
                }
            };
            match key {
                Some(_) => self.source.push_back((key, r)),
                // Not copied although a consumer sees it: missing right away.
                None => self.missing(r.offset, None),
            }
        }
        self.drain();
    }

    /// Target records in offset order; records outside `target_from..target_end` are ignored.
    pub fn push_target(&mut self, records: impl IntoIterator<Item = StoredRecord>) {
        for r in records {
            if r.offset < self.plan.target_from || r.offset >= self.plan.target_end {
                continue;
            }
            self.counts.target_records += 1;
            self.target.push_back(r);
        }
        self.drain();
    }

    /// No more source records.
    pub fn source_done(&mut self) {
        self.source_done = true;
        self.drain();
    }

    /// No more target records.
    pub fn target_done(&mut self) {
        self.target_done = true;
        self.drain();
    }

    /// What to read next: the side whose queue ran dry (source first), or nothing.
    pub fn need(&self) -> Need {
        if self.source.is_empty() && !self.source_done {
            Need::Source
        } else if self.target.is_empty() && !self.target_done {
            Need::Target
        } else if self.source_done && self.target_done {
            Need::Finished
        } else if !self.source_done {
            Need::Source
        } else {
            Need::Target
        }
    }

    pub fn counts(&self) -> &Counts {
        &self.counts
    }

    pub fn first_difference(&self) -> Option<&Difference> {
        self.first.as_ref()
    }

    /// True when nothing compared differs (one-sided records of compacted topics aside).
    pub fn matches(&self) -> bool {
        self.counts.mismatched == 0 && self.counts.missing == 0 && self.counts.extra == 0
    }

    /// The SHA-256 digests of the compared records of each side (equal when every pair
    /// matched), hex.
    pub fn digests(&self) -> (String, String) {
        (
            hex(&self.source_digest.clone().finalize()),
            hex(&self.target_digest.clone().finalize()),
        )
    }

    /// Pairs what both queues allow.
    fn drain(&mut self) {
        loop {
            match (self.source.front(), self.target.front()) {
                (Some((s_key, _)), Some(t)) => {
                    let s_key = s_key.expect("only keyed source records are queued");
                    if s_key == t.offset {
                        let (_, s) = self.source.pop_front().expect("front exists");
                        let t = self.target.pop_front().expect("front exists");
                        self.compare(&s, &t);
                    } else if s_key < t.offset {
                        let (key, s) = self.source.pop_front().expect("front exists");
                        self.source_only(s.offset, key);
                    } else {
                        let t = self.target.pop_front().expect("front exists");
                        self.target_only(t.offset);
                    }
                }
                (Some(_), None) if self.target_done => {
                    let (key, s) = self.source.pop_front().expect("front exists");
                    self.source_only(s.offset, key);
                }
                (None, Some(_)) if self.source_done => {
                    let t = self.target.pop_front().expect("front exists");
                    self.target_only(t.offset);
                }
                _ => return,
            }
        }
    }

    fn compare(&mut self, s: &StoredRecord, t: &StoredRecord) {
        self.counts.compared += 1;
        digest(&mut self.source_digest, s);
        digest(&mut self.target_digest, t);
        match differing_field(s, t) {
            None => self.counts.matched += 1,
            Some(field) => {
                self.counts.mismatched += 1;
                self.first.get_or_insert(Difference {
                    kind: DifferenceKind::Mismatch,
                    source_offset: Some(s.offset),
                    target_offset: Some(t.offset),
                    field: Some(field),
                });
            }
        }
    }

    /// A copied source record without its target record.
    fn source_only(&mut self, offset: i64, key: Option<i64>) {
        if self.plan.target_compacted {
            self.counts.source_only_compacted += 1;
        } else {
            self.missing(offset, key);
        }
    }

    fn missing(&mut self, offset: i64, key: Option<i64>) {
        self.counts.missing += 1;
        self.first.get_or_insert(Difference {
            kind: DifferenceKind::Missing,
            source_offset: Some(offset),
            target_offset: key,
            field: None,
        });
    }

    /// A target record no source record paired with.
    fn target_only(&mut self, offset: i64) {
        // Inside a run (or an approximate gap) it stands for a source record the source's
        // cleaner may have removed; in an exact gap nothing was copied there.
        let claimed = self.claimed_downstream(offset);
        if claimed && self.plan.source_compacted {
            self.counts.target_only_compacted += 1;
        } else {
            self.counts.extra += 1;
            self.first.get_or_insert(Difference {
                kind: DifferenceKind::Extra,
                source_offset: None,
                target_offset: Some(offset),
                field: None,
            });
        }
    }

    /// Where source offset `u` falls in the mapping.
    fn place(&self, u: i64) -> Place {
        let runs = &self.plan.runs;
        let idx = runs.partition_point(|r| r.segment.upstream_start <= u);
        if idx > 0 {
            let run = &runs[idx - 1].segment;
            if u < run.upstream_end() {
                return Place::Exact(run.downstream_start + (u - run.upstream_start));
            }
        }
        if idx == 0 || idx == runs.len() || runs[idx].exact_gap_before {
            Place::ExactGap
        } else {
            Place::InexactGap(idx)
        }
    }

    /// Whether target offset `d` stands for a copied source record: inside a run or an
    /// approximate gap.
    fn claimed_downstream(&self, d: i64) -> bool {
        let runs = &self.plan.runs;
        let idx = runs.partition_point(|r| r.segment.downstream_start <= d);
        if idx > 0 && d < runs[idx - 1].segment.downstream_end() {
            return true;
        }
        idx > 0 && idx < runs.len() && !runs[idx].exact_gap_before
    }
}

/// The first field that differs, in the order key, value, headers, timestamp, type.
pub fn differing_field(s: &StoredRecord, t: &StoredRecord) -> Option<Field> {
    if s.key != t.key {
        Some(Field::Key)
    } else if s.value != t.value {
        Some(Field::Value)
    } else if s.headers != t.headers {
        Some(Field::Headers)
    } else if s.timestamp != t.timestamp {
        Some(Field::Timestamp)
    } else if s.timestamp_type != t.timestamp_type {
        Some(Field::TimestampType)
    } else {
        None
    }
}

/// Feeds a record's replicated content to a digest, each field length-prefixed so that no two
/// different records feed the same bytes.
fn digest(h: &mut Sha256, r: &StoredRecord) {
    fn field(h: &mut Sha256, b: Option<&[u8]>) {
        match b {
            None => h.update((-1i64).to_be_bytes()),
            Some(b) => {
                h.update((b.len() as i64).to_be_bytes());
                h.update(b);
            }
        }
    }
    field(h, r.key.as_deref());
    field(h, r.value.as_deref());
    h.update((r.headers.len() as i64).to_be_bytes());
    for (key, value) in &r.headers {
        field(h, Some(key));
        field(h, value.as_deref());
    }
    h.update(r.timestamp.to_be_bytes());
    h.update([match r.timestamp_type {
        TimestampType::CreateTime => 0u8,
        TimestampType::LogAppendTime => 1u8,
    }]);
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::offsets::mapping::Segment;

    fn rec(offset: i64, value: &str) -> StoredRecord {
        StoredRecord {
            offset,
            timestamp: 1_000 + offset,
            key: Some(Bytes::from(format!("k{offset}"))),
            value: Some(Bytes::copy_from_slice(value.as_bytes())),
            headers: vec![(Bytes::from_static(b"h"), None)],
            timestamp_type: TimestampType::CreateTime,
        }
    }

    fn run(u: i64, d: i64, n: i64, exact_gap_before: bool) -> StoredRun {
        StoredRun {
            segment: Segment::new(u, d, n),
            exact_gap_before,
        }
    }

    fn plan(runs: Vec<StoredRun>) -> Plan {
        let first = runs.first().unwrap().segment;
        let last = runs.last().unwrap().segment;
        Plan {
            runs,
            source_from: first.upstream_start,
            source_end: last.upstream_end(),
            target_from: first.downstream_start,
            target_end: last.downstream_end(),
            source_compacted: false,
            target_compacted: false,
        }
    }

    /// Source records at `source` offsets, target records at `target` offsets, the same
    /// content for the same index (`v{i}`), unless overridden.
    fn run_cmp(p: Plan, source: Vec<StoredRecord>, target: Vec<StoredRecord>) -> Comparer {
        let mut c = Comparer::new(p);
        // Feed in small chunks, alternating as asked, like the driver.
        let (mut s, mut t) = (source.into_iter(), target.into_iter());
        loop {
            match c.need() {
                Need::Finished => break,
                Need::Source => {
                    let chunk: Vec<_> = s.by_ref().take(2).collect();
                    if chunk.is_empty() {
                        c.source_done();
                    } else {
                        c.push_source(chunk);
                    }
                }
                Need::Target => {
                    let chunk: Vec<_> = t.by_ref().take(3).collect();
                    if chunk.is_empty() {
                        c.target_done();
                    } else {
                        c.push_target(chunk);
                    }
                }
            }
        }
        c
    }

    /// Records at `offsets` carrying the contents of `keys` (the content follows the record,
    /// not its offset).
    fn at(offsets: &[i64], keys: &[i64]) -> Vec<StoredRecord> {
        offsets
            .iter()
            .zip(keys)
            .map(|(&o, &k)| StoredRecord {
                offset: o,
                ..rec(k, &format!("v{k}"))
            })
            .collect()
    }

    #[test]
    fn a_dense_copy_matches_and_both_digests_agree() {
        let src = at(&[0, 1, 2, 3, 4], &[0, 1, 2, 3, 4]);
        let tgt = at(&[10, 11, 12, 13, 14], &[0, 1, 2, 3, 4]);
        let c = run_cmp(plan(vec![run(0, 10, 5, true)]), src, tgt);
        assert!(c.matches(), "{:?}", c.counts());
        assert_eq!(c.counts().matched, 5);
        let (a, b) = c.digests();
        assert_eq!(a, b);
    }

    #[test]
    fn gaps_of_aborted_or_compacted_records_pair_by_the_mapping() {
        // Source 0..3 copied to 0..3, 3..5 aborted (not visible), 5..8 copied to 3..6.
        let src = at(&[0, 1, 2, 5, 6, 7], &[0, 1, 2, 5, 6, 7]);
        let tgt = at(&[0, 1, 2, 3, 4, 5], &[0, 1, 2, 5, 6, 7]);
        let c = run_cmp(plan(vec![run(0, 0, 3, true), run(5, 3, 3, true)]), src, tgt);
        assert!(c.matches(), "{:?} {:?}", c.counts(), c.first_difference());
        assert_eq!(c.counts().matched, 6);
    }

    #[test]
    fn a_record_deleted_on_the_target_is_missing() {
        let src = at(&[0, 1, 2, 3], &[0, 1, 2, 3]);
        let tgt = at(&[2, 3], &[2, 3]);
        let c = run_cmp(plan(vec![run(0, 0, 4, true)]), src, tgt);
        assert_eq!(c.counts().missing, 2);
        assert_eq!(c.counts().matched, 2);
        let d = c.first_difference().unwrap();
        assert_eq!(d.kind, DifferenceKind::Missing);
        assert_eq!((d.source_offset, d.target_offset), (Some(0), Some(0)));
    }

    #[test]
    fn a_record_written_into_a_gap_is_extra() {
        let src = at(&[0, 1, 5], &[0, 1, 5]);
        let tgt = at(&[0, 1, 2, 3], &[0, 1, 99, 5]);
        let c = run_cmp(plan(vec![run(0, 0, 2, true), run(5, 3, 1, true)]), src, tgt);
        assert_eq!(c.counts().extra, 1);
        assert_eq!(c.counts().matched, 3);
        assert_eq!(c.first_difference().unwrap().target_offset, Some(2));
    }

    #[test]
    fn a_changed_field_is_named() {
        let src = at(&[0, 1, 2], &[0, 1, 2]);
        let mut tgt = at(&[0, 1, 2], &[0, 1, 2]);
        tgt[1].headers = vec![];
        tgt[2].value = Some(Bytes::from_static(b"other"));
        let c = run_cmp(plan(vec![run(0, 0, 3, true)]), src, tgt);
        assert_eq!(c.counts().mismatched, 2);
        let d = c.first_difference().unwrap();
        assert_eq!(
            (d.kind, d.source_offset, d.field),
            (DifferenceKind::Mismatch, Some(1), Some(Field::Headers))
        );
        let (a, b) = c.digests();
        assert_ne!(a, b);
    }

    #[test]
    fn a_visible_source_record_in_an_exact_gap_is_missing() {
        let src = at(&[0, 1, 2, 3], &[0, 1, 2, 3]);
        let tgt = at(&[0, 1, 2], &[0, 1, 3]);
        let c = run_cmp(plan(vec![run(0, 0, 2, true), run(3, 2, 1, true)]), src, tgt);
        assert_eq!((c.counts().missing, c.counts().matched), (1, 3));
        assert_eq!(c.first_difference().unwrap().source_offset, Some(2));
    }

    #[test]
    fn an_approximate_gap_pairs_by_order() {
        // Thinning removed the runs between: 3 source records at 10..13 copied to 2..5.
        let src = at(&[0, 1, 10, 11, 12, 20], &[0, 1, 10, 11, 12, 20]);
        let tgt = at(&[0, 1, 2, 3, 4, 5], &[0, 1, 10, 11, 12, 20]);
        let c = run_cmp(
            plan(vec![run(0, 0, 2, true), run(20, 5, 1, false)]),
            src,
            tgt,
        );
        assert!(c.matches(), "{:?} {:?}", c.counts(), c.first_difference());
        assert_eq!(c.counts().matched, 6);
    }

    #[test]
    fn compacted_topics_count_one_sided_records_apart() {
        let src = at(&[0, 2, 3], &[0, 2, 3]);
        let tgt = at(&[0, 1, 2], &[0, 1, 2]);
        let mut p = plan(vec![run(0, 0, 4, true)]);
        p.source_compacted = true;
        p.target_compacted = true;
        let c = run_cmp(p, src, tgt);
        assert!(c.matches(), "{:?}", c.counts());
        assert_eq!(c.counts().target_only_compacted, 1);
        assert_eq!(c.counts().source_only_compacted, 1);
        assert_eq!(c.counts().matched, 2);
    }

    #[test]
    fn records_outside_the_fixed_ranges_are_left_alone() {
        let src = at(&[0, 1, 2, 3], &[0, 1, 2, 3]);
        let tgt = at(&[0, 1, 2, 3], &[0, 1, 2, 3]);
        let mut p = plan(vec![run(0, 0, 3, true)]);
        p.source_end = 3;
        p.target_end = 3;
        let c = run_cmp(p, src, tgt);
        assert!(c.matches());
        assert_eq!(c.counts().matched, 3);
    }

    #[test]
    fn windows_sum_their_counts_and_find_a_difference_in_any_of_them() {
        let src = at(&[0, 1, 2, 3, 4, 5, 6, 7], &[0, 1, 2, 3, 4, 5, 6, 7]);
        let mut tgt = at(&[0, 1, 2, 3, 4, 5], &[0, 1, 2, 5, 6, 7]);
        tgt[4].value = None;
        let p = plan(vec![run(0, 0, 3, true), run(5, 3, 3, true)]);
        let mut c = Comparer::new(p);
        for (from, end) in [(0, 2), (5, 8)] {
            c.next_window(Window {
                source_from: from,
                source_end: end,
                target_from: c.downstream_at(from),
                target_end: c.downstream_at(end),
            });
            c.push_source(
                src.iter()
                    .filter(|r| r.offset >= from)
                    .cloned()
                    .collect::<Vec<_>>(),
            );
            c.source_done();
            c.push_target(tgt.clone());
            c.target_done();
            assert_eq!(c.need(), Need::Finished);
        }
        assert_eq!((c.counts().matched, c.counts().mismatched), (4, 1));
        assert_eq!(c.first_difference().unwrap().source_offset, Some(6));
        assert_eq!(
            c.downstream_at(3),
            3,
            "a gap's records go where the next run starts"
        );
        assert!(!c.in_approximate_gap(3));
    }

    proptest::proptest! {
        /// Whatever the chunking, a copy is found identical, and dropping any one target
        /// record is found as exactly one missing record.
        #[test]
        fn any_copy_matches_and_any_loss_is_found(
            gaps in proptest::collection::vec(0i64..3, 1..40),
            drop in proptest::prelude::any::<proptest::sample::Index>(),
        ) {
            let mut runs = Vec::new();
            let mut src_offsets = Vec::new();
            let (mut u, mut d) = (0i64, 0i64);
            for g in &gaps {
                u += g;
                runs.push(run(u, d, 1, true));
                src_offsets.push(u);
                u += 1;
                d += 1;
            }
            let n = src_offsets.len();
            let tgt_offsets: Vec<i64> = (0..n as i64).collect();
            let c = run_cmp(plan(runs.clone()), at(&src_offsets, &src_offsets), at(&tgt_offsets, &src_offsets));
            proptest::prop_assert!(c.matches());
            proptest::prop_assert_eq!(c.counts().matched, n as u64);
            let i = drop.index(n);
            let mut tgt = at(&tgt_offsets, &src_offsets);
            tgt.remove(i);
            let c = run_cmp(plan(runs), at(&src_offsets, &src_offsets), tgt);
            proptest::prop_assert_eq!(c.counts().missing, 1);
            proptest::prop_assert_eq!(c.first_difference().unwrap().source_offset, Some(src_offsets[i]));
        }
    }
}
