//! Continuous verification's bookkeeping, sans-IO: per partition, which source range the next
//! round compares and what the rounds found. The rounds themselves (reading both clusters) run
//! on a thread of their own (`run::verifier`).
//!
//! A round compares what was copied since the previous one: from where the previous round
//! stopped (the first: the partition's stored progress when the run started, so what this run
//! copies) to the stored progress now, at most `max_records` source records. Every count is
//! taken once: the next round starts where this one stopped, and target records past the
//! stored end that nothing accounts for (`extra` at the end, seen again every round until
//! strait copies past them) are counted by target offset, once each.

use std::collections::BTreeMap;

use serde::Serialize;

use super::partition::PartitionResult;

/// What continuous verification found of one partition since this process started.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, Default)]
pub struct PartitionVerification {
    /// Source records compared with their copies, record by record.
    pub records_verified: u64,
    /// Records missing on the target, extra on it, or different (key, value, headers,
    /// timestamp). Any makes `/health/ready` fail.
    pub mismatches: u64,
    /// The source offset the last round compared up to (exclusive); every copied record from
    /// where verification started below it was compared (or sampled). -1 before any round.
    pub last_verified_offset: i64,
    /// Rounds that looked at the partition.
    pub rounds: u64,
    /// When the last round ended for it (ms since the epoch).
    pub last_round_ms: i64,
    /// The first difference found, with both offsets and the field that differs.
    pub first_mismatch: Option<String>,
    /// When it was found (ms since the epoch).
    pub first_mismatch_at_ms: Option<i64>,
    /// Copied source records no round could compare (deleted from the source by retention
    /// before a round reached them, say), and the last reason.
    pub not_compared_records: u64,
    pub not_compared_reason: Option<String>,
    /// Why the last round could not verify the partition (a cluster that did not answer); the
    /// next round tries the same range again.
    pub error: Option<String>,
}

/// One partition of one flow.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PartitionRef {
    /// `source->target`.
    pub flow: String,
    pub topic: String,
    pub partition: i32,
}

/// The source range a round compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoundRange {
    pub from: i64,
    pub end: i64,
}

#[derive(Debug, Clone, Default)]
struct Tracked {
    /// Where the next round starts (`None`: where the run started).
    next_from: Option<i64>,
    /// Target offsets below this were counted as extra past the end already.
    extra_counted_to: i64,
    /// Source offsets below this were counted as not compared already.
    not_compared_to: i64,
    shown: PartitionVerification,
}

/// Every partition's verification so far.
#[derive(Debug, Clone)]
pub struct Rounds {
    max_records: u64,
    parts: BTreeMap<PartitionRef, Tracked>,
}

impl Rounds {
    /// `max_records`: source records a round compares per partition at most (at least 1).
    pub fn new(max_records: u64) -> Self {
        Rounds {
            max_records: max_records.max(1),
            parts: BTreeMap::new(),
        }
    }

    /// The range the next round compares of `p`: from where the last round stopped (the first
    /// round: `started_at`, the stored progress when the run started, or where the stored
    /// history begins when there was none) to `copied_end`, the stored progress now, at most
    /// `max_records` records.
    pub fn next_range(
        &mut self,
        p: &PartitionRef,
        started_at: Option<i64>,
        history_start: i64,
        copied_end: i64,
    ) -> RoundRange {
        let t = self.parts.entry(p.clone()).or_default();
        let from = t
            .next_from
            .or(started_at)
            .unwrap_or(history_start)
            .max(history_start)
            .min(copied_end);
        let most = i64::try_from(self.max_records).unwrap_or(i64::MAX);
        RoundRange {
            from,
            end: copied_end.min(from.saturating_add(most)),
        }
    }

    /// Notes what a round found of `p` at `now_ms`.
    pub fn record(&mut self, p: &PartitionRef, r: &PartitionResult, now_ms: i64) {
        let t = self.parts.entry(p.clone()).or_default();
        let v = &mut t.shown;
        v.rounds += 1;
        v.last_round_ms = now_ms;
        if let Some(e) = &r.error {
            v.error = Some(e.clone());
            return;
        }
        v.error = None;
        // [0, 0] when no range could be planned (no stored mapping yet): nothing moves.
        if r.source_range[1] > 0 {
            t.next_from = Some(t.next_from.unwrap_or(i64::MIN).max(r.source_range[1]));
            v.last_verified_offset = v.last_verified_offset.max(r.source_range[1]);
        }
        v.records_verified += r.counts.source_records;
        // The extra records past the end: those at target offsets not counted before.
        let end_extra_from = r.target_range[1];
        let end_extra_to = end_extra_from.saturating_add(r.extra_past_end as i64);
        let new_end_extra = (end_extra_to - end_extra_from.max(t.extra_counted_to)).max(0);
        t.extra_counted_to = t.extra_counted_to.max(end_extra_to);
        let in_range = r.counts.missing
            + r.counts.mismatched
            + (r.counts.extra - r.extra_past_end.min(r.counts.extra));
        let found = in_range + new_end_extra as u64;
        if found > 0 {
            v.mismatches += found;
            if v.first_mismatch.is_none() {
                v.first_mismatch = r
                    .first_difference
                    .as_ref()
                    .map(|d| format!("{}: {d}", r.source));
                v.first_mismatch_at_ms = Some(now_ms);
            }
        }
        for n in &r.not_compared {
            let from = n.from.max(t.not_compared_to);
            if n.to > from {
                v.not_compared_records += (n.to - from) as u64;
                v.not_compared_reason = Some(n.reason.clone());
                t.not_compared_to = n.to;
            }
        }
    }

    /// Notes that a round could not look at `p` (its stored progress could not be read).
    pub fn failed(&mut self, p: &PartitionRef, error: String, now_ms: i64) {
        let v = &mut self.parts.entry(p.clone()).or_default().shown;
        v.rounds += 1;
        v.last_round_ms = now_ms;
        v.error = Some(error);
    }

    /// What the API shows of `p`, if a round looked at it.
    pub fn get(&self, p: &PartitionRef) -> Option<&PartitionVerification> {
        self.parts.get(p).map(|t| &t.shown)
    }

    /// What the API shows of every partition looked at.
    pub fn shown(&self) -> BTreeMap<PartitionRef, PartitionVerification> {
        self.parts
            .iter()
            .map(|(k, t)| (k.clone(), t.shown.clone()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verify::compare::{Counts, Difference, DifferenceKind};
    use crate::verify::partition::NotCompared;

    fn part() -> PartitionRef {
        PartitionRef {
            flow: "A->B".into(),
            topic: "t".into(),
            partition: 0,
        }
    }

    fn result(from: i64, to: i64, t_to: i64, counts: Counts) -> PartitionResult {
        PartitionResult {
            source: "t-0".into(),
            target: "A.t-0".into(),
            source_range: [from, to],
            target_range: [from, t_to],
            counts,
            not_yet_copied: 0,
            target_ahead: 0,
            extra_past_end: 0,
            not_compared: Vec::new(),
            first_difference: None,
            sampled_batches: None,
            source_digest: String::new(),
            target_digest: String::new(),
            error: None,
        }
    }

    #[test]
    fn rounds_start_where_the_run_started_and_go_on_where_the_last_stopped() {
        let mut r = Rounds::new(1_000);
        let p = part();
        assert_eq!(
            r.next_range(&p, Some(40), 0, 100),
            RoundRange { from: 40, end: 100 }
        );
        let counts = Counts {
            source_records: 60,
            matched: 60,
            ..Counts::default()
        };
        r.record(&p, &result(40, 100, 100, counts), 5);
        assert_eq!(
            r.next_range(&p, Some(40), 0, 150),
            RoundRange {
                from: 100,
                end: 150
            }
        );
        let v = &r.shown()[&p];
        assert_eq!(
            (v.records_verified, v.mismatches, v.last_verified_offset),
            (60, 0, 100)
        );
        // Nothing stored before the run: from the history's start; and bounded per round.
        let q = PartitionRef {
            partition: 1,
            ..part()
        };
        let mut r = Rounds::new(10);
        assert_eq!(
            r.next_range(&q, None, 7, 100),
            RoundRange { from: 7, end: 17 }
        );
    }

    #[test]
    fn an_extra_record_past_the_end_counts_once_however_many_rounds_see_it() {
        let mut r = Rounds::new(1_000);
        let p = part();
        let mut with_extra = result(
            100,
            100,
            100,
            Counts {
                extra: 1,
                ..Counts::default()
            },
        );
        with_extra.extra_past_end = 1;
        with_extra.first_difference = Some(Difference {
            kind: DifferenceKind::Extra,
            source_offset: None,
            target_offset: Some(100),
            field: None,
        });
        r.record(&p, &with_extra, 1);
        r.record(&p, &with_extra, 2);
        let v = &r.shown()[&p];
        assert_eq!(v.mismatches, 1);
        assert_eq!(v.first_mismatch.as_deref(), Some("t-0: extra: target 100"));
        assert_eq!(v.first_mismatch_at_ms, Some(1));
        assert_eq!(v.rounds, 2);
        // A second stray record past it counts.
        with_extra.counts.extra = 2;
        with_extra.extra_past_end = 2;
        r.record(&p, &with_extra, 3);
        assert_eq!(r.shown()[&p].mismatches, 2);
    }

    #[test]
    fn missing_and_different_records_count_and_an_error_retries_the_range() {
        let mut r = Rounds::new(1_000);
        let p = part();
        let _ = r.next_range(&p, Some(0), 0, 50);
        let mut failed = result(0, 0, 0, Counts::default());
        failed.error = Some("broker gone".into());
        r.record(&p, &failed, 1);
        assert_eq!(r.next_range(&p, Some(0), 0, 50).from, 0, "retried");
        assert_eq!(r.shown()[&p].error.as_deref(), Some("broker gone"));
        let mut bad = result(
            0,
            50,
            50,
            Counts {
                source_records: 50,
                missing: 2,
                mismatched: 1,
                ..Counts::default()
            },
        );
        bad.not_compared = vec![NotCompared {
            from: 0,
            to: 5,
            reason: "deleted from the source".into(),
        }];
        r.record(&p, &bad, 2);
        r.record(&p, &result(50, 50, 50, Counts::default()), 3);
        let v = &r.shown()[&p];
        assert_eq!((v.mismatches, v.error.as_deref()), (3, None));
        assert_eq!(v.not_compared_records, 5);
        assert_eq!(r.next_range(&p, Some(0), 0, 80).from, 50);
    }
}
