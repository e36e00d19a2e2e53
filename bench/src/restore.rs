//! What restoring the stored exact offset mapping adds to start-up (issue 22): many
//! partitions' progress written to a progress topic on the target, with mappings of a chosen
//! number of runs, then read back the way `strait run` reads it at start
//! (`ProgressStore::open_bounded`: the whole topic, every mapping rebuilt). Progress without a
//! mapping is the baseline: the difference is the cost of exact history.

use std::time::Instant;

use anyhow::{Context, Result};
use serde::Serialize;
use strait_control::cluster::Cluster;
use strait_control::model::TopicPartition;
use strait_control::offsets::mapping::{DEFAULT_MAX_SEGMENTS, OffsetMapping, Segment};
use strait_control::store::progress::{Entry, ProgressStore, topic_name};

/// One measured shape.
#[derive(Debug, Clone, Serialize)]
pub struct RestoreRow {
    pub partitions: usize,
    /// Runs per partition (0: progress without a mapping, the format before exact history).
    pub runs: usize,
    /// Records the progress topic holds for them (progress and mapping chunks).
    pub records: u64,
    /// Bytes of keys and values written.
    pub bytes: u64,
    /// Seconds the first flush of every partition took.
    pub flush_s: f64,
    /// Seconds each read back took (`open_bounded`), one per repetition.
    pub open_s: Vec<f64>,
    /// Partitions whose mapping came back, in the last read.
    pub restored: usize,
}

/// A mapping of `runs` runs: batches of 10 records, each followed by one offset that was not
/// replicated (a transaction marker), so that every batch is a run.
fn mapping(runs: usize) -> Vec<Segment> {
    (0..runs as i64)
        .map(|i| Segment::new(i * 11, i * 10, 10))
        .collect()
}

/// Writes `partitions` partitions' progress with `runs`-run mappings under source alias
/// `alias`, then reads it back `repeat` times.
pub async fn measure(
    target: &Cluster,
    alias: &str,
    partitions: usize,
    runs: usize,
    repeat: usize,
) -> Result<RestoreRow> {
    let mut store = ProgressStore::open_bounded(target, alias, 1, DEFAULT_MAX_SEGMENTS)
        .await
        .context("creating the progress topic")?;
    let mut mappings = OffsetMapping::default();
    let segments = mapping(runs);
    let next = segments.last().map_or(1_000, |s| s.upstream_end() + 1);
    for p in 0..partitions {
        let tp = TopicPartition::new(format!("t{}", p / 100), (p % 100) as i32);
        for s in &segments {
            mappings.append(&tp, *s)?;
        }
        if runs > 0 {
            mappings.set_acked_end(tp.clone(), next);
        }
        store.update(
            &tp,
            Entry {
                next_offset: next,
                topic_id: [7; 16],
                target_offset: next,
                leader_epoch: 0,
            },
        );
    }
    let started = Instant::now();
    store
        .flush(target, 1, &mut mappings)
        .await
        .context("writing progress")?;
    let flush_s = started.elapsed().as_secs_f64();
    let topic = topic_name(alias);
    let (records, bytes) = topic_size(target, &topic).await?;
    let mut open_s = Vec::new();
    let mut restored = 0;
    for _ in 0..repeat.max(1) {
        let started = Instant::now();
        let mut store = ProgressStore::open_bounded(target, alias, 1, DEFAULT_MAX_SEGMENTS)
            .await
            .context("reading progress back")?;
        let back = store.take_restored();
        open_s.push(started.elapsed().as_secs_f64());
        restored = back.values().filter(|m| m.run_count() > 0).count();
        anyhow::ensure!(
            store.entries().len() == partitions,
            "read back {} of {partitions} partitions",
            store.entries().len()
        );
    }
    Ok(RestoreRow {
        partitions,
        runs,
        records,
        bytes,
        flush_s,
        open_s,
        restored,
    })
}

/// Records and key+value bytes of a one-partition topic.
async fn topic_size(cluster: &Cluster, topic: &str) -> Result<(u64, u64)> {
    let mut n = 0u64;
    let mut bytes = 0u64;
    strait_control::store::records::read_to_end(
        cluster,
        topic,
        0,
        strait_control::cluster::IsolationLevel::ReadUncommitted,
        |r| {
            n += 1;
            bytes += r.key.as_ref().map_or(0, |k| k.len() as u64)
                + r.value.as_ref().map_or(0, |v| v.len() as u64);
        },
    )
    .await?;
    Ok((n, bytes))
}

/// The rows as a table.
pub fn table(rows: &[RestoreRow]) -> String {
    let mut out =
        String::from("partitions  runs  records  MiB     first flush s  read back s (each)\n");
    for r in rows {
        let each: Vec<String> = r.open_s.iter().map(|s| format!("{s:.2}")).collect();
        out.push_str(&format!(
            "{:<10}  {:<4}  {:<7}  {:<6.1}  {:<13.2}  {}\n",
            r.partitions,
            r.runs,
            r.records,
            r.bytes as f64 / (1 << 20) as f64,
            r.flush_s,
            each.join(" ")
        ));
    }
    out
}
