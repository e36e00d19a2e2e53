//! `strait verify`: for every replicated partition of a flow, reads the source and the target
//! over the range strait's stored progress says is copied and compares them record by record
//! over the stored exact mapping ([`crate::verify`]). Reads only; writes nothing.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::fmt::{self, Write as _};
use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use serde::Serialize;

use super::translate::select_flow;
use crate::cluster::{Cluster, TopicPartition};
use crate::config::{FlowConfig, Mm2Config};
use crate::duties::offsets::{OffsetsError, cluster_for};
use crate::store::offset_syncs::read_all_syncs;
use crate::store::progress;
use crate::verify::partition::{
    Mode, PartitionInput, PartitionResult, compacted, compaction_of, partition_input,
    verify_partition,
};
use crate::verify::syncs::with_offset_syncs;

/// Partitions verified at once: each holds at most one fetch (8 MiB) per side.
pub const DEFAULT_PARALLEL_PARTITIONS: usize = 4;

/// What to verify.
#[derive(Debug, Clone)]
pub struct VerifyOptions {
    /// Every copied record, or a sample of whole batches.
    pub mode: Mode,
    /// The flow (`source->target`); default the only enabled flow.
    pub flow: Option<String>,
    /// Only source topics matching this regex (whole name).
    pub topics: Option<regex::Regex>,
    /// Only these partitions.
    pub partitions: Option<Vec<i32>>,
    /// Partitions verified at once (at least 1).
    pub parallel_partitions: usize,
}

/// Live progress, for a terminal.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    /// Records read so far, both sides.
    pub records: u64,
    /// At most this many records to read (from the stored progress).
    pub records_estimate: u64,
    pub partitions_done: usize,
    pub partitions: usize,
    pub elapsed: Duration,
}

/// What `strait verify` prints.
#[derive(Debug, Clone, Serialize)]
pub struct VerifyReport {
    pub flow: String,
    /// `full`, or `sample RATE seed SEED`.
    pub mode: String,
    pub partitions: Vec<PartitionResult>,
    /// The offset syncs read for what MirrorMaker copied before strait (progress imported
    /// from MM2), and how many were used.
    pub offset_syncs: String,
    pub elapsed_ms: u64,
}

impl VerifyReport {
    /// True when every partition compared matches.
    pub fn ok(&self) -> bool {
        self.partitions.iter().all(PartitionResult::ok)
    }
}

/// Runs the verification; `on_progress` is called about once a second.
pub async fn verify_command(
    cfg: &Mm2Config,
    opts: &VerifyOptions,
    mut on_progress: impl FnMut(Progress),
) -> Result<VerifyReport, OffsetsError> {
    let started = Instant::now();
    let flow = select_flow(cfg, opts.flow.as_deref())?;
    let name = flow.name();
    let c = &flow.clients;
    let source = cluster_for(&name, "source consumer", &c.source_consumer.client)?;
    let source_admin = cluster_for(&name, "source admin", &c.source_admin.client)?;
    let target = cluster_for(&name, "target consumer", &c.target_consumer.client)?;
    let target_admin = cluster_for(&name, "target admin", &c.target_admin.client)?;

    let (stored, mut mappings) = progress::read_stored_with_mappings(
        &target,
        &flow.source,
        cfg.strait.mapping_max_runs_per_partition.value,
    )
    .await;
    let chosen: Vec<(TopicPartition, progress::Entry)> = stored
        .into_iter()
        .filter(|(tp, _)| selected(flow, opts, tp))
        .collect();
    let mut topics: Vec<String> = chosen.iter().map(|(tp, _)| tp.topic.clone()).collect();
    topics.dedup();
    let remote: Vec<String> = topics.iter().map(|t| flow.remote_topic(t)).collect();
    let source_compacted = compacted(&source_admin, &topics).await;
    let target_compacted = compacted(&target_admin, &remote).await;
    let (mut syncs, syncs_read) = offset_syncs(flow).await;
    let mut syncs_used = 0;

    let inputs: Vec<PartitionInput> = chosen
        .into_iter()
        .map(|(tp, entry)| {
            let target_tp = TopicPartition::new(flow.remote_topic(&tp.topic), tp.partition);
            let compaction = compaction_of(&source_compacted, &target_compacted, &tp, &target_tp);
            let mapping = mappings.remove(&tp);
            let syncs = syncs.remove(&tp).unwrap_or_default();
            let input = partition_input(tp, target_tp, &entry, mapping.as_ref(), compaction);
            let w = with_offset_syncs(input.runs, &syncs, input.copied_end);
            syncs_used += w.syncs_used;
            PartitionInput {
                runs: w.runs,
                compare_end: w.compare_end,
                not_compared: w.not_compared,
                ..input
            }
        })
        .collect();
    let records_estimate = records_estimate(&inputs);

    let parallel = opts.parallel_partitions;
    let mut results = verify_all(&source, &target, inputs, opts.mode, parallel, |p| {
        on_progress(Progress {
            records_estimate,
            elapsed: started.elapsed(),
            ..p
        })
    })
    .await;
    results.sort_by(|a, b| a.source.cmp(&b.source));
    Ok(VerifyReport {
        flow: name,
        mode: match opts.mode {
            Mode::Full => "full".into(),
            Mode::Sample { rate, seed } => format!("sample {rate} seed {seed}"),
        },
        partitions: results,
        offset_syncs: format!("{syncs_read}; {syncs_used} used"),
        elapsed_ms: started.elapsed().as_millis() as u64,
    })
}

/// Whether the options choose partition `tp` of the flow.
fn selected(flow: &FlowConfig, opts: &VerifyOptions, tp: &TopicPartition) -> bool {
    flow.should_replicate_topic(&tp.topic)
        && opts.topics.as_ref().is_none_or(|re| {
            re.find(&tp.topic)
                .is_some_and(|m| m.start() == 0 && m.end() == tp.topic.len())
        })
        && opts
            .partitions
            .as_ref()
            .is_none_or(|ps| ps.contains(&tp.partition))
}

/// At most how many records both sides hold over the ranges to compare.
fn records_estimate(inputs: &[PartitionInput]) -> u64 {
    inputs
        .iter()
        .map(|i| 2 * (i.copied_end - i.history_from()).max(0) as u64)
        .sum()
}

/// Every offset sync of the flow's offset-syncs topic (MirrorMaker's and strait's), per source
/// partition, and what was read. A topic that cannot be read leaves the partitions without a
/// stored mapping not compared (said per partition), not the run failed.
async fn offset_syncs(flow: &FlowConfig) -> (BTreeMap<TopicPartition, BTreeMap<i64, i64>>, String) {
    let topic = flow.offset_syncs_topic();
    let consumer = match cluster_for(
        &flow.name(),
        "offset-syncs consumer",
        &flow.clients.offset_syncs_consumer.client,
    ) {
        Ok(c) => c,
        Err(e) => return (BTreeMap::new(), format!("{topic} not read: {e}")),
    };
    match read_all_syncs(&consumer, &topic).await {
        Ok((syncs, bad)) => {
            let n: usize = syncs.values().map(BTreeMap::len).sum();
            let bad = if bad > 0 {
                format!(" ({bad} records that are not offset syncs skipped)")
            } else {
                String::new()
            };
            let read = format!(
                "{topic}: {n} offset syncs for {} partitions{bad}",
                syncs.len()
            );
            (syncs, read)
        }
        Err(e) if e.is_unknown_topic() => (BTreeMap::new(), format!("{topic} does not exist")),
        Err(e) => {
            tracing::warn!(error = %e, "cannot read {topic}: partitions without a stored mapping are not compared");
            (BTreeMap::new(), format!("{topic} not read: {e}"))
        }
    }
}

/// Verifies `inputs`, `parallel` partitions at once, calling `on_progress` about once a second
/// (with the records read and partitions done filled in).
async fn verify_all(
    source: &Cluster,
    target: &Cluster,
    inputs: Vec<PartitionInput>,
    mode: Mode,
    parallel: usize,
    mut on_progress: impl FnMut(Progress),
) -> Vec<PartitionResult> {
    let read = Cell::new(0u64);
    let partitions = inputs.len();
    let mut results = Vec::with_capacity(partitions);
    let read_ref = &read;
    let mut stream = futures_util::stream::iter(inputs)
        .map(|input| verify_partition(source, target, input, mode, read_ref))
        .buffer_unordered(parallel.max(1));
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            next = stream.next() => match next {
                Some(r) => results.push(r),
                None => break,
            },
            _ = tick.tick() => on_progress(Progress {
                records: read.get(),
                records_estimate: 0,
                partitions_done: results.len(),
                partitions,
                elapsed: Duration::ZERO,
            }),
        }
    }
    results
}

impl fmt::Display for VerifyReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{:<28} {:<28} {:>23} {:>10} {:>10} {:>8} {:>8} {:>10} {:>10}  FIRST DIFFERENCE",
            "SOURCE",
            "TARGET",
            "SOURCE RANGE",
            "RECORDS",
            "MATCHED",
            "MISSING",
            "EXTRA",
            "MISMATCHED",
            "NOT COPIED"
        );
        for p in &self.partitions {
            let _ = writeln!(
                out,
                "{:<28} {:<28} {:>23} {:>10} {:>10} {:>8} {:>8} {:>10} {:>10}  {}",
                p.source,
                p.target,
                format!("{}..{}", p.source_range[0], p.source_range[1]),
                p.counts.source_records,
                p.counts.matched,
                p.counts.missing,
                p.counts.extra,
                p.counts.mismatched,
                p.not_yet_copied,
                first_difference(p),
            );
            for n in &p.not_compared {
                let _ = writeln!(
                    out,
                    "    not compared: source offsets {}..{}: {}",
                    n.from, n.to, n.reason
                );
            }
            if p.counts.source_only_compacted + p.counts.target_only_compacted > 0 {
                let _ = writeln!(
                    out,
                    "    on one side only (removed by a compacted topic's cleaner): {} source, {} target",
                    p.counts.source_only_compacted, p.counts.target_only_compacted
                );
            }
            if p.target_ahead > 0 {
                let _ = writeln!(
                    out,
                    "    {} target records past the stored progress (copied since it was stored): not compared",
                    p.target_ahead
                );
            }
        }
        let _ = writeln!(out, "offset syncs: {}", self.offset_syncs);
        let sum = |f: fn(&PartitionResult) -> u64| self.partitions.iter().map(f).sum::<u64>();
        let failed = self.partitions.iter().filter(|p| !p.ok()).count();
        let _ = writeln!(
            out,
            "{}: flow {} ({}), {} partitions, {} records compared, {} matched, {} missing, {} extra, {} mismatched, {} not yet copied, {} partitions failed, in {:.1} s",
            if self.ok() { "OK" } else { "FAILED" },
            self.flow,
            self.mode,
            self.partitions.len(),
            sum(|p| p.counts.compared),
            sum(|p| p.counts.matched),
            sum(|p| p.counts.missing),
            sum(|p| p.counts.extra),
            sum(|p| p.counts.mismatched),
            sum(|p| p.not_yet_copied.max(0) as u64),
            failed,
            self.elapsed_ms as f64 / 1000.0
        );
        f.write_str(&out)
    }
}

/// The FIRST DIFFERENCE cell.
fn first_difference(p: &PartitionResult) -> String {
    if let Some(e) = &p.error {
        return format!("error: {e}");
    }
    p.first_difference
        .as_ref()
        .map_or_else(|| "-".into(), ToString::to_string)
}
