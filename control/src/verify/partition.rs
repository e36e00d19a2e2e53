//! Verifying one partition against real clusters: fixes the ranges, reads both sides chunk by
//! chunk as the [`Comparer`] asks (one fetch per side in memory at a time) and gives the result.

use std::cell::Cell;
use std::collections::BTreeMap;

use serde::Serialize;

use super::compare::{Comparer, Counts, Difference, Need, Plan, Window};
use crate::cluster::{Cluster, ClusterError, IsolationLevel, OffsetSpec, TopicPartition};
use crate::offsets::mapping::StoredRun;
use crate::store::records::{self, StoredRecord};

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
    /// Where the comparison ends when it cannot reach `copied_end` (MirrorMaker's last offset
    /// sync is the last known position: see `super::syncs`).
    pub compare_end: Option<i64>,
    /// Where the comparison starts at the earliest: continuous verification compares only what
    /// was copied since its last round (`None`: from the start of the stored history).
    pub compare_from: Option<i64>,
    /// Source ranges left out before reading, and why.
    pub not_compared: Vec<NotCompared>,
    pub source_compacted: bool,
    pub target_compacted: bool,
}

impl PartitionInput {
    /// Where the stored history begins: its recorded start, else its first run's, else the
    /// copied end (nothing stored).
    pub fn history_from(&self) -> i64 {
        self.history_start
            .or(self.runs.first().map(|r| r.segment.upstream_start))
            .unwrap_or(self.copied_end)
    }
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
    /// Of `counts.extra`, the target records past the stored progress's target end that no
    /// source record accounts for (nothing was left to copy: someone else wrote them).
    pub extra_past_end: u64,
    pub not_compared: Vec<NotCompared>,
    pub first_difference: Option<Difference>,
    /// With `--sample`: how many source batches were compared (none: the whole range was).
    pub sampled_batches: Option<u64>,
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
            extra_past_end: 0,
            not_compared: Vec::new(),
            first_difference: None,
            sampled_batches: None,
            source_digest: String::new(),
            target_digest: String::new(),
            error: None,
        }
    }
}

/// Whether every copied record is compared, or whole batches chosen at random.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Mode {
    Full,
    /// Compare about `rate` of the copied records (0 < rate <= 1), as whole source batches at
    /// random offsets drawn from `seed` (printed, so that a run can be repeated).
    Sample {
        rate: f64,
        seed: u64,
    },
}

/// At most this many batches are drawn per partition in a sampled run, however small the
/// batches: bounds the requests a sampled run sends.
pub const MAX_SAMPLES_PER_PARTITION: u64 = 100_000;

/// One side's cluster and partition.
struct Side<'a> {
    cluster: &'a Cluster,
    tp: &'a TopicPartition,
}

impl<'a> Side<'a> {
    fn new(cluster: &'a Cluster, tp: &'a TopicPartition) -> Self {
        Self { cluster, tp }
    }

    /// One fetch at `from` (at most `max_bytes`, the first batch whole), without the records
    /// before `keep_from` (a fetch returns whole batches); and where to read next.
    async fn read(
        &self,
        from: i64,
        keep_from: i64,
        max_bytes: i32,
        progress: &Cell<u64>,
    ) -> Result<(Vec<StoredRecord>, i64), ClusterError> {
        let (mut recs, next) = records::read_chunk(
            self.cluster,
            self.tp,
            from,
            IsolationLevel::ReadCommitted,
            max_bytes,
        )
        .await?;
        progress.set(progress.get() + recs.len() as u64);
        recs.retain(|r| r.offset >= keep_from);
        Ok((recs, next))
    }
}

/// Both sides of a partition.
struct Sides<'a> {
    source: Side<'a>,
    target: Side<'a>,
    /// The target's log start: reads begin there at the earliest (see `verify`).
    target_start: i64,
    progress: &'a Cell<u64>,
}

impl Sides<'_> {
    /// Compares source `from..end` with target `from..end` as `cmp` asks.
    async fn compare(
        &self,
        cmp: &mut Comparer,
        (s_from, s_end): (i64, i64),
        (t_from, t_end): (i64, i64),
        max_bytes: i32,
    ) -> Result<(), ClusterError> {
        let (mut s_pos, mut t_pos) = (s_from, t_from.max(self.target_start));
        loop {
            match cmp.need() {
                Need::Finished => return Ok(()),
                Need::Source if s_pos >= s_end => cmp.source_done(),
                Need::Target if t_pos >= t_end => cmp.target_done(),
                Need::Source => {
                    let (recs, next) = self
                        .source
                        .read(s_pos, s_pos, max_bytes, self.progress)
                        .await?;
                    s_pos = next;
                    cmp.push_source(recs);
                }
                Need::Target => {
                    let (recs, next) = self
                        .target
                        .read(t_pos, t_pos, max_bytes, self.progress)
                        .await?;
                    t_pos = next;
                    cmp.push_target(recs);
                }
            }
        }
    }
}

/// A sampled comparison: whole source batches at random offsets, each with the target records
/// the mapping puts them at, until about `rate` of the range's records are compared. Returns
/// the batches compared.
async fn sample(
    sides: &Sides<'_>,
    cmp: &mut Comparer,
    plan: &Plan,
    rate: f64,
    seed: u64,
) -> Result<u64, ClusterError> {
    let span = plan.source_end - plan.source_from;
    if span <= 0 {
        return Ok(0);
    }
    let wanted = ((span as f64 * rate).ceil() as u64).max(1);
    let mut rng = SplitMix64(seed);
    let (mut batches, mut drawn) = (0u64, 0u64);
    while cmp.counts().source_records < wanted && drawn < MAX_SAMPLES_PER_PARTITION {
        drawn += 1;
        let u = plan.source_from + (rng.next() % span as u64) as i64;
        // A one-byte fetch returns the batch holding `u` whole: compare all of it.
        let (recs, next) = sides.source.read(u, i64::MIN, 1, sides.progress).await?;
        let Some(first) = recs.first() else {
            continue; // markers or an aborted batch: nothing a consumer sees
        };
        let (b0, b1) = (
            first.offset.max(plan.source_from),
            next.min(plan.source_end),
        );
        if b0 >= b1 || recs.iter().any(|r| cmp.in_approximate_gap(r.offset)) {
            continue; // pairing by order needs the approximate gap's start
        }
        let (t0, t1) = (cmp.downstream_at(b0), cmp.downstream_at(b1));
        cmp.next_window(Window {
            source_from: b0,
            source_end: b1,
            target_from: t0,
            target_end: t1,
        });
        cmp.push_source(recs);
        cmp.source_done();
        sides.compare(cmp, (b1, b1), (t0, t1), 1).await?;
        batches += 1;
    }
    Ok(batches)
}

/// splitmix64: a small, fast generator; the offsets only need to be spread, not secret.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// Mixes the partition into the seed, so that partitions draw different offsets.
fn partition_seed(input: &PartitionInput) -> u64 {
    input
        .source
        .topic
        .bytes()
        .fold(u64::from(input.source.partition as u32), |h, b| {
            h.wrapping_mul(0x100_0000_01B3) ^ u64::from(b)
        })
}

/// What is known of one partition before its records are read.
pub fn partition_input(
    source: TopicPartition,
    target: TopicPartition,
    entry: &crate::store::progress::Entry,
    mapping: Option<&crate::offsets::mapping::PartitionMapping>,
    (source_compacted, target_compacted): (bool, bool),
) -> PartitionInput {
    let acked = mapping.and_then(|m| m.acked_end());
    PartitionInput {
        source,
        target,
        runs: mapping
            .map(|m| m.stored_runs().collect())
            .unwrap_or_default(),
        history_start: mapping.and_then(|m| m.start()),
        copied_end: acked.map_or(entry.next_offset, |a| a.min(entry.next_offset)),
        compare_end: None,
        compare_from: None,
        not_compared: Vec::new(),
        source_compacted,
        target_compacted,
    }
}

/// Whether the source topic and the remote topic of a partition are compacted, from the maps
/// [`compacted`] gives (unknown counts as not compacted).
pub fn compaction_of(
    source_compacted: &BTreeMap<String, bool>,
    target_compacted: &BTreeMap<String, bool>,
    source: &TopicPartition,
    target: &TopicPartition,
) -> (bool, bool) {
    (
        source_compacted
            .get(&source.topic)
            .copied()
            .unwrap_or(false),
        target_compacted
            .get(&target.topic)
            .copied()
            .unwrap_or(false),
    )
}

/// Which of `topics` have `compact` in their cleanup policy (unknown counts as not compacted:
/// then a record removed by a cleaner is reported missing, never hidden).
pub async fn compacted(cluster: &Cluster, topics: &[String]) -> BTreeMap<String, bool> {
    if topics.is_empty() {
        return BTreeMap::new();
    }
    match cluster.describe_topic_configs(topics).await {
        Ok(all) => all
            .into_iter()
            .map(|(topic, entries)| {
                let compact = entries.ok().is_some_and(|es| {
                    es.iter().any(|e| {
                        e.name == "cleanup.policy"
                            && e.value.as_deref().is_some_and(|v| v.contains("compact"))
                    })
                });
                (topic, compact)
            })
            .collect(),
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the topics' cleanup.policy: records a cleaner removed will count as missing");
            BTreeMap::new()
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
    mode: Mode,
    progress: &Cell<u64>,
) -> PartitionResult {
    match verify(source, target, &input, mode, progress).await {
        Ok(r) => r,
        Err(e) => PartitionResult::failed(&input, e.to_string()),
    }
}

async fn verify(
    source: &Cluster,
    target: &Cluster,
    input: &PartitionInput,
    mode: Mode,
    progress: &Cell<u64>,
) -> Result<PartitionResult, ClusterError> {
    // The target first: every record it holds then came from a source record that exists
    // when the source is read next, so a target end past the stored progress with a source
    // end that is not is a record strait did not copy (`extra` below), never a copy made
    // between the two reads.
    let (target_start, target_end_now) = bounds(target, &input.target).await?;
    let (source_start, source_end) = bounds(source, &input.source).await?;
    let mut not_compared = input.not_compared.clone();
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
    let sides = Sides {
        source: Side::new(source, &input.source),
        target: Side::new(target, &input.target),
        target_start,
        progress,
    };
    let sampled_batches = match mode {
        Mode::Full => {
            sides
                .compare(
                    &mut cmp,
                    (plan.source_from, plan.source_end),
                    (plan.target_from, plan.target_end),
                    records::MAX_FETCH_BYTES,
                )
                .await?;
            None
        }
        Mode::Sample { rate, seed } => {
            Some(sample(&sides, &mut cmp, &plan, rate, seed ^ partition_seed(input)).await?)
        }
    };
    let (source_digest, target_digest) = cmp.digests();
    let mut counts = cmp.counts().clone();
    let mut first_difference = cmp.first_difference().cloned();
    // With nothing left to copy, target records past the stored end were not written by
    // strait for this source: extra (unless the comparison stopped short of the copied end).
    let compared_to_the_end = plan.source_end >= input.copied_end;
    let mut extra_past_end = 0;
    if compared_to_the_end && source_end <= plan.source_end && target_ahead > 0 {
        extra_past_end = target_ahead as u64;
        counts.extra += extra_past_end;
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
        not_yet_copied: (source_end - input.copied_end.max(plan.source_end)).max(0),
        target_ahead: if compared_to_the_end && source_end <= plan.source_end {
            0
        } else {
            target_ahead
        },
        extra_past_end,
        not_compared,
        first_difference,
        sampled_batches,
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
            reason: "no stored offset mapping for this partition and no offset sync below its progress (nothing copied by strait yet, or progress imported from MM2 without its offset syncs)".into(),
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
    let from = input.compare_from.unwrap_or(i64::MIN);
    // What an earlier round compared is not left out again.
    not_compared.retain_mut(|n| {
        n.from = n.from.max(from);
        n.from < n.to
    });
    let source_from = source_start.max(history).max(from);
    let source_end = input
        .compare_end
        .unwrap_or(input.copied_end)
        .min(input.copied_end)
        .max(source_from);
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
