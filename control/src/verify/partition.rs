//! Verifying one partition against real clusters: fixes the ranges, reads both sides chunk by
//! chunk as the [`Comparer`] asks (one fetch per side in memory at a time) and gives the result.

use std::cell::Cell;

use serde::Serialize;

use super::compare::{Comparer, Counts, Difference, Need, Plan};
use crate::cluster::{Cluster, ClusterError, IsolationLevel, OffsetSpec, TopicPartition};
use crate::offsets::mapping::StoredRun;
use crate::store::records;

/// What is known of a partition before its records are read.
#[derive(Debug, Clone)]
pub struct PartitionInput {
    pub source: TopicPartition,
    pub target: TopicPartition,
    /// The stored mapping's runs (empty when strait stored none).
    pub runs: Vec<StoredRun>,
    /// Where the stored history begins (records from here to the first run were not copied).
    pub history_start: Option<i64>,
    /// The stored progress: every source record below it is copied.
    pub copied_end: i64,
    pub source_compacted: bool,
    pub target_compacted: bool,
}

/// A source range left out, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NotCompared {
    pub from: i64,
    pub to: i64,
    pub reason: String,
}

/// One partition's verdict.
#[derive(Debug, Clone, Serialize)]
pub struct PartitionResult {
    pub source: String,
    pub target: String,
    /// Source offsets compared (`from..to`).
    pub source_range: [i64; 2],
    /// Target offsets compared.
    pub target_range: [i64; 2],
    #[serde(flatten)]
    pub counts: Counts,
    /// Source records past the stored progress: not yet copied (lag, not an error).
    pub not_yet_copied: i64,
    /// Target records past the stored progress's target end (copied since the progress was
    /// stored, or written by someone else when nothing is left to copy).
    pub target_ahead: i64,
    pub not_compared: Vec<NotCompared>,
    pub first_difference: Option<Difference>,
    pub source_digest: String,
    pub target_digest: String,
    /// Why the partition could not be verified.
    pub error: Option<String>,
}

impl PartitionResult {
    /// True when everything compared matches and nothing failed.
    pub fn ok(&self) -> bool {
        self.error.is_none()
            && self.counts.mismatched == 0
            && self.counts.missing == 0
            && self.counts.extra == 0
    }

    fn failed(input: &PartitionInput, error: String) -> Self {
        Self {
            error: Some(error),
            ..Self::empty(input)
        }
    }

    fn empty(input: &PartitionInput) -> Self {
        Self {
            source: input.source.to_string(),
            target: input.target.to_string(),
            source_range: [0, 0],
            target_range: [0, 0],
            counts: Counts::default(),
            not_yet_copied: 0,
            target_ahead: 0,
            not_compared: Vec::new(),
            first_difference: None,
            source_digest: String::new(),
            target_digest: String::new(),
            error: None,
        }
    }
}

/// Log start and end (read_committed: the last stable offset) of `tp`.
async fn bounds(cluster: &Cluster, tp: &TopicPartition) -> Result<(i64, i64), ClusterError> {
    let one = std::slice::from_ref(tp);
    let start = cluster
        .list_offsets(one, OffsetSpec::Earliest, IsolationLevel::ReadCommitted)
        .await
        .into_values()
        .next()
        .transpose()?
        .unwrap_or(0);
    let end = cluster
        .list_offsets(one, OffsetSpec::Latest, IsolationLevel::ReadCommitted)
        .await
        .into_values()
        .next()
        .transpose()?
        .unwrap_or(0);
    Ok((start, end))
}

/// Verifies one partition; `progress` is added the records read on both sides as they come.
pub async fn verify_partition(
    source: &Cluster,
    target: &Cluster,
    input: PartitionInput,
    progress: &Cell<u64>,
) -> PartitionResult {
    match verify(source, target, &input, progress).await {
        Ok(r) => r,
        Err(e) => PartitionResult::failed(&input, e.to_string()),
    }
}

async fn verify(
    source: &Cluster,
    target: &Cluster,
    input: &PartitionInput,
    progress: &Cell<u64>,
) -> Result<PartitionResult, ClusterError> {
    let (source_start, source_end) = bounds(source, &input.source).await?;
    let (target_start, target_end_now) = bounds(target, &input.target).await?;
    let mut not_compared = Vec::new();
    let Some(plan) = plan(input, source_start, &mut not_compared) else {
        return Ok(PartitionResult {
            not_yet_copied: (source_end - input.copied_end.max(source_start)).max(0),
            not_compared,
            ..PartitionResult::empty(input)
        });
    };
    let target_ahead = (target_end_now - plan.target_end).max(0);
    let mut cmp = Comparer::new(plan.clone());
    // Below its log start a broker may still serve records that are deleted (delete-records
    // moves the start before the segment goes): read from the start, so that the records
    // below it count as missing.
    let (mut s_pos, mut t_pos) = (plan.source_from, plan.target_from.max(target_start));
    loop {
        match cmp.need() {
            Need::Finished => break,
            Need::Source if s_pos >= plan.source_end => cmp.source_done(),
            Need::Target if t_pos >= plan.target_end => cmp.target_done(),
            Need::Source => {
                let (recs, next) = records::read_chunk(
                    source,
                    &input.source,
                    s_pos,
                    IsolationLevel::ReadCommitted,
                )
                .await?;
                progress.set(progress.get() + recs.len() as u64);
                // A fetch returns whole batches: leave out what lies before the position.
                let from = s_pos;
                let recs = recs.into_iter().filter(move |r| r.offset >= from);
                s_pos = next;
                cmp.push_source(recs);
            }
            Need::Target => {
                let (recs, next) = records::read_chunk(
                    target,
                    &input.target,
                    t_pos,
                    IsolationLevel::ReadCommitted,
                )
                .await?;
                progress.set(progress.get() + recs.len() as u64);
                // A fetch returns whole batches: leave out what lies before the position.
                let from = t_pos;
                let recs = recs.into_iter().filter(move |r| r.offset >= from);
                t_pos = next;
                cmp.push_target(recs);
            }
        }
    }
    let (source_digest, target_digest) = cmp.digests();
    let mut counts = cmp.counts().clone();
    let mut first_difference = cmp.first_difference().cloned();
    // With nothing left to copy, target records past the stored end were not written by
    // strait for this source: extra.
    if source_end <= plan.source_end && target_ahead > 0 {
        counts.extra += target_ahead as u64;
        first_difference.get_or_insert(Difference {
            kind: super::compare::DifferenceKind::Extra,
            source_offset: None,
            target_offset: Some(plan.target_end),
            field: None,
        });
    }
    Ok(PartitionResult {
        source: input.source.to_string(),
        target: input.target.to_string(),
        source_range: [plan.source_from, plan.source_end],
        target_range: [plan.target_from, plan.target_end],
        counts,
        not_yet_copied: (source_end - plan.source_end).max(0),
        target_ahead: if source_end <= plan.source_end {
            0
        } else {
            target_ahead
        },
        not_compared,
        first_difference,
        source_digest,
        target_digest,
        error: None,
    })
}

/// The ranges to compare, or `None` when nothing can be compared (reasons in `not_compared`).
fn plan(
    input: &PartitionInput,
    source_start: i64,
    not_compared: &mut Vec<NotCompared>,
) -> Option<Plan> {
    let (Some(first), Some(last)) = (input.runs.first(), input.runs.last()) else {
        not_compared.push(NotCompared {
            from: source_start,
            to: input.copied_end,
            reason: "no stored offset mapping for this partition (nothing copied by strait yet, or progress imported from MM2)".into(),
        });
        return None;
    };
    let history = input
        .history_start
        .unwrap_or(first.segment.upstream_start)
        .min(first.segment.upstream_start);
    if source_start > history {
        not_compared.push(NotCompared {
            from: history,
            to: source_start,
            reason: "deleted from the source (retention or delete-records)".into(),
        });
    }
    if history > source_start {
        not_compared.push(NotCompared {
            from: source_start,
            to: history,
            reason: "before strait's stored history".into(),
        });
    }
    let source_from = source_start.max(history);
    let source_end = input.copied_end.max(source_from);
    // The target offset of the first compared source record (or the next run's).
    let target_from = input
        .runs
        .iter()
        .find(|r| r.segment.upstream_end() > source_from)
        .map(|r| {
            let s = &r.segment;
            s.downstream_start + (source_from - s.upstream_start).max(0)
        })
        .unwrap_or(last.segment.downstream_end());
    Some(Plan {
        runs: input.runs.clone(),
        source_from,
        source_end,
        target_from,
        target_end: last.segment.downstream_end(),
        source_compacted: input.source_compacted,
        target_compacted: input.target_compacted,
    })
}
