//! Verifying what MirrorMaker 2 copied before strait took over (progress imported with
//! `strait offsets import-mm2`): strait stored no mapping for it, but MirrorMaker's offset syncs
//! say exactly where some records went. Pure: offset syncs in, pairing runs out.
//!
//! An offset sync `(u, d)` says source record `u` was written at target offset `d`. When the
//! next known position `(u', d')` is as far on both sides (`u' - u == d' - d`: nothing closed
//! up between them, as with strait's own syncs or a dense source), the sync starts an exact run
//! up to it. Otherwise it is a one-record run, and the gap after it is paired by order, as the
//! comparer pairs a gap that thinning left approximate: MirrorMaker wrote every record it read,
//! in order, one after the other (it renumbers densely: a source gap from compaction or
//! transaction markers closes up on the target), so the k-th source record after `u` goes with
//! target offset `d + 1 + k`, up to `d'`. A range MirrorMaker copied twice (a restart
//! before its offset commit) then shows as extra or mismatched records from where the
//! duplicates begin: the target holds more than the source there.
//!
//! Past the last sync, no target offset is known until strait's own stored history begins: when
//! strait copied after the import, its first run closes the last gap; when it did not, the
//! records after the last sync are not compared (and said so).

use std::collections::BTreeMap;

use super::partition::NotCompared;
use crate::offsets::mapping::{Segment, StoredRun};

/// What MirrorMaker's offset syncs add to a partition's stored runs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WithSyncs {
    /// The offset syncs' one-record runs, then strait's own.
    pub runs: Vec<StoredRun>,
    /// Where the comparison must end (before `copied_end`) when the last sync is the last
    /// known position.
    pub compare_end: Option<i64>,
    /// The source range left out, and why.
    pub not_compared: Vec<NotCompared>,
    /// Offset syncs used.
    pub syncs_used: usize,
}

/// Merges the offset syncs of one partition (`upstream -> downstream`, in any order; for an
/// upstream offset synced twice, the later sync wins) below strait's first stored run into
/// `runs`. `copied_end`: every source record below it is copied (by MirrorMaker or strait).
pub fn with_offset_syncs(
    runs: Vec<StoredRun>,
    syncs: &BTreeMap<i64, i64>,
    copied_end: i64,
) -> WithSyncs {
    let first = runs.first().map(|r| r.segment);
    // Syncs strictly below strait's history on both sides, both offsets increasing: a sync
    // that goes back on the target (MirrorMaker wrote again what it had written) is left out,
    // so the runs stay ordered on both sides.
    let mut kept: Vec<(i64, i64)> = Vec::new();
    for (&u, &d) in syncs {
        let below_strait = first.is_none_or(|s| u < s.upstream_start && d < s.downstream_start);
        let in_order = kept.last().is_none_or(|&(pu, pd)| u > pu && d > pd);
        if u >= 0 && d >= 0 && u < copied_end && below_strait && in_order {
            kept.push((u, d));
        }
    }
    if kept.is_empty() {
        return WithSyncs {
            runs,
            ..WithSyncs::default()
        };
    }
    // The next known position after each sync: the next sync, then strait's first record.
    let anchor = first.map(|s| (s.upstream_start, s.downstream_start));
    let mut out: Vec<StoredRun> = kept
        .iter()
        .enumerate()
        .map(|(i, &(u, d))| {
            let next = kept.get(i + 1).copied().or(anchor);
            // As many offsets on both sides: nothing closed up between the two, so the offsets
            // keep their distance (strait's own syncs, or a dense source): one exact run.
            let len = match next {
                Some((nu, nd)) if nu - u == nd - d => nu - u,
                _ => 1,
            };
            StoredRun {
                segment: Segment::new(u, d, len),
                // After a one-record run, paired by order up to the next position.
                exact_gap_before: false,
            }
        })
        .collect();
    let syncs_used = out.len();
    let (last_u, _) = kept[kept.len() - 1];
    let mut not_compared = Vec::new();
    let compare_end = if runs.is_empty() {
        (last_u + 1 < copied_end).then(|| {
            not_compared.push(NotCompared {
                from: last_u + 1,
                to: copied_end,
                reason: "copied by MirrorMaker after its last offset sync: no target offset is known for it".into(),
            });
            last_u + 1
        })
    } else {
        None
    };
    // The gap from the last sync to strait's first run is paired by order too.
    out.extend(runs.into_iter().enumerate().map(|(i, mut r)| {
        if i == 0 {
            r.exact_gap_before = false;
        }
        r
    }));
    WithSyncs {
        runs: out,
        compare_end,
        not_compared,
        syncs_used,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(u: i64, d: i64, n: i64, exact_gap_before: bool) -> StoredRun {
        StoredRun {
            segment: Segment::new(u, d, n),
            exact_gap_before,
        }
    }

    fn syncs(pairs: &[(i64, i64)]) -> BTreeMap<i64, i64> {
        pairs.iter().copied().collect()
    }

    #[test]
    fn syncs_below_strait_become_one_record_runs_paired_by_order_up_to_strait() {
        // A source gap closed up between 40 and strait's first record (100 -> 90): paired by
        // order there; between 0 and 40 nothing closed up: one exact run.
        let strait = vec![run(100, 90, 50, true)];
        let w = with_offset_syncs(strait, &syncs(&[(0, 0), (40, 40), (120, 110)]), 150);
        assert_eq!(
            w.runs,
            vec![
                run(0, 0, 40, false),
                run(40, 40, 1, false),
                run(100, 90, 50, false)
            ]
        );
        assert_eq!(w.compare_end, None);
        assert!(w.not_compared.is_empty());
        assert_eq!(w.syncs_used, 2);
    }

    #[test]
    fn without_strait_history_the_tail_after_the_last_sync_is_not_compared() {
        let w = with_offset_syncs(Vec::new(), &syncs(&[(0, 0), (99, 99)]), 100);
        assert_eq!(w.compare_end, None, "the last sync is the last record");
        assert_eq!(w.runs, vec![run(0, 0, 99, false), run(99, 99, 1, false)]);
        let w = with_offset_syncs(Vec::new(), &syncs(&[(0, 0), (50, 50)]), 100);
        assert_eq!(w.compare_end, Some(51));
        assert_eq!((w.not_compared[0].from, w.not_compared[0].to), (51, 100));
    }

    #[test]
    fn a_sync_going_back_on_the_target_or_past_the_copy_is_left_out() {
        // MirrorMaker restarted and wrote 30.. again at 60..: the sync (40, 70) is kept, (50,
        // 45) goes back and is left out; (200, 200) is past what is copied.
        let w = with_offset_syncs(
            Vec::new(),
            &syncs(&[(0, 0), (40, 70), (50, 45), (200, 200)]),
            100,
        );
        assert_eq!(w.runs, vec![run(0, 0, 1, false), run(40, 70, 1, false)]);
        assert_eq!(w.compare_end, Some(41));
    }

    #[test]
    fn no_syncs_leave_the_runs_alone() {
        let strait = vec![run(5, 5, 10, true)];
        let w = with_offset_syncs(strait.clone(), &BTreeMap::new(), 15);
        assert_eq!(w.runs, strait);
        assert_eq!(w.syncs_used, 0);
    }
}
