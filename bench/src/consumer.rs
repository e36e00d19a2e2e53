//! The measuring consumer: plain Fetch requests over [`BrokerConn`] (no group, no commits),
//! every partition from offset 0, records decoded with strait's own [`decode_records`].
//!
//! Each record's stamp gives its send time; the arrival time is when the Fetch response that
//! carried it was read. It reads as a read_committed consumer does (up to the last stable
//! offset, aborted transactions left out), so that a replicator writing transactions
//! (exactly-once) is measured by when its records become visible to such consumers. Measured records are counted once per sequence number (duplicates
//! apart); warm-up records only tell that the replicator is live on their partition.
#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use futures_util::StreamExt;
use futures_util::future::LocalBoxFuture;
use futures_util::stream::FuturesUnordered;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{BrokerId, FetchRequest, FetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use serde::Serialize;
use strait_dataplane::batch::{
    AbortedFilter, BatchWalker, DEFAULT_MAX_DECOMPRESSED_BYTES, RawBatch, Verdict, decode_records,
};
use strait_dataplane::io::{BrokerConn, ConnSetup, IoBackend};

use crate::kafka::{self, now_us};
use crate::payload::Stamp;
use crate::stats::{Latency, MIB, SecondPoint, Seen, Series};

/// What to read.
#[derive(Debug, Clone)]
pub struct ConsumeSpec {
    pub bootstrap: String,
    pub topic: String,
    /// Partitions the topic must have before reading starts (it may not exist yet: the
    /// replicator creates it).
    pub partitions: i32,
    /// Measured records to wait for (sequence numbers `0..expected`).
    pub expected: u64,
    /// Give up after this long (from the call), with what has arrived so far.
    pub timeout_ms: u64,
    /// Give up when no new measured record has arrived for this long after the first one
    /// (a replicator that stopped some partitions but keeps running).
    pub stall_timeout_ms: u64,
    pub fetch_max_bytes: i32,
    pub partition_max_bytes: i32,
    pub max_wait_ms: i32,
    /// Time zero of the per-second series (µs since the epoch).
    pub start_us: u64,
    /// Longest series kept, seconds.
    pub max_series_s: usize,
    pub backend: IoBackend,
}

/// Called by the consumer: once a second, at first arrivals, and to ask whether to go on.
pub trait Monitor {
    /// The replicator's cumulative CPU seconds and current RSS (MiB); an error (replicator
    /// died) stops the run.
    fn sample(&mut self) -> Result<(f64, f64)>;
    /// The first measured record arrived.
    fn first_arrival(&mut self) {}
    /// Every partition has delivered at least one record (warm-up or measured).
    fn all_partitions_live(&mut self) {}
}

/// A monitor that watches nothing (the standalone `consume` command).
#[derive(Debug, Default)]
pub struct NoMonitor;

impl Monitor for NoMonitor {
    fn sample(&mut self) -> Result<(f64, f64)> {
        Ok((0.0, 0.0))
    }
}

/// What the consumer saw.
#[derive(Debug)]
pub struct ConsumeReport {
    pub distinct: u64,
    pub duplicates: u64,
    pub unexpected: u64,
    pub warmup_records: u64,
    /// Key + value + header bytes of the distinct measured records.
    pub bytes: u64,
    /// Batch bytes fetched (compressed, all records).
    pub wire_bytes: u64,
    pub batches: u64,
    pub first_arrival_us: Option<u64>,
    pub last_arrival_us: Option<u64>,
    /// When the target topic was seen with all its partitions led.
    pub topic_ready_us: u64,
    pub latency: Latency,
    pub series: Vec<SecondPoint>,
    pub complete: bool,
    /// Why reading stopped before every expected record arrived (timeout, stall, replicator
    /// exited).
    pub stop_reason: Option<String>,
}

impl ConsumeReport {
    /// Nothing read yet; the topic was ready at `topic_ready_us`.
    fn empty(topic_ready_us: u64) -> Self {
        ConsumeReport {
            distinct: 0,
            duplicates: 0,
            unexpected: 0,
            warmup_records: 0,
            bytes: 0,
            wire_bytes: 0,
            batches: 0,
            first_arrival_us: None,
            last_arrival_us: None,
            topic_ready_us,
            latency: Latency::new(),
            series: Vec::new(),
            complete: false,
            stop_reason: None,
        }
    }
}

/// Summary fields for JSON.
#[derive(Debug, Clone, Serialize)]
pub struct LatencySummary {
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
    pub mean_ms: f64,
}

impl ConsumeReport {
    pub fn latency_summary(&self) -> LatencySummary {
        LatencySummary {
            p50_ms: self.latency.quantile_ms(0.5),
            p99_ms: self.latency.quantile_ms(0.99),
            p999_ms: self.latency.quantile_ms(0.999),
            max_ms: self.latency.max_ms(),
            mean_ms: self.latency.mean_ms(),
        }
    }
}

struct Part {
    partition: i32,
    next_offset: i64,
    live: bool,
}

/// Whether a read_committed consumer skips `b`: a control batch, or a batch of an aborted
/// transaction (dataplane's [`AbortedFilter`], the shard's own, built per response).
fn skipped(filter: &mut AbortedFilter, b: &RawBatch) -> Result<bool> {
    Ok(filter.classify(b)? != Verdict::Forward)
}

type FetchFut = LocalBoxFuture<'static, (String, Result<FetchResponse>, u64)>;

/// Reads `spec.topic` until `spec.expected` distinct measured records have arrived, the
/// timeout passes, or `monitor` reports an error.
#[allow(clippy::too_many_lines)] // bench code, one measurement told in order: not split yet
pub async fn consume(spec: &ConsumeSpec, monitor: &mut dyn Monitor) -> Result<ConsumeReport> {
    let t_begin = now_us();
    let deadline_us = t_begin + spec.timeout_ms * 1000;
    let admin = kafka::admin("target", &spec.bootstrap, spec.backend)?;
    let mut series = Series::new(spec.start_us, spec.max_series_s);
    let close_seconds = |series: &mut Series, monitor: &mut dyn Monitor, now: u64| -> Result<()> {
        while series.due(now) {
            let (cpu, rss) = monitor.sample()?;
            series.close_second(cpu, rss);
        }
        Ok(())
    };

    // Wait for the replicator to create the topic.
    let early_stop = |reason: String, series: Series| ConsumeReport {
        series: series.into_points(),
        stop_reason: Some(reason),
        ..ConsumeReport::empty(0)
    };
    let leaders = loop {
        let now = now_us();
        if let Err(e) = close_seconds(&mut series, monitor, now) {
            return Ok(early_stop(format!("{e:#}"), series));
        }
        if let Some(l) = kafka::leaders(&admin, &spec.topic, spec.partitions).await? {
            break l;
        }
        if now >= deadline_us {
            let reason = format!(
                "the target topic {} did not appear with {} partitions within {} s",
                spec.topic,
                spec.partitions,
                spec.timeout_ms / 1000
            );
            return Ok(early_stop(reason, series));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let topic_ready_us = now_us();

    let setup = ConnSetup::new(kafka::conn_config("strait-bench-consumer", 2), spec.backend)?;
    let mut conns: BTreeMap<String, BrokerConn> = BTreeMap::new();
    let mut parts: BTreeMap<String, Vec<Part>> = BTreeMap::new();
    for (&p, addr) in &leaders {
        if !conns.contains_key(addr) {
            let c = BrokerConn::connect(addr, &setup)
                .await
                .with_context(|| format!("connecting the consumer to {addr}"))?;
            conns.insert(addr.clone(), c);
        }
        parts.entry(addr.clone()).or_default().push(Part {
            partition: p,
            next_offset: 0,
            live: false,
        });
    }
    let total_parts = leaders.len();
    let mut live_parts = 0usize;
    let mut all_live_told = false;

    let mut seen = Seen::new(spec.expected).map_err(|e| anyhow!(e))?;
    let mut latency = Latency::new();
    let mut report = ConsumeReport::empty(topic_ready_us);
    let mut fetches: FuturesUnordered<FetchFut> = FuturesUnordered::new();
    for addr in conns.keys() {
        fetches.push(fetch(&conns[addr], &spec.topic, &parts[addr], spec)?);
    }
    let tick = Duration::from_millis(200);
    while !seen.complete() {
        let now = now_us();
        if let Err(e) = close_seconds(&mut series, monitor, now) {
            report.stop_reason = Some(format!("{e:#}"));
            break;
        }
        if now >= deadline_us {
            report.stop_reason = Some(format!(
                "timed out after {} s with {} of {} records",
                spec.timeout_ms / 1000,
                seen.distinct(),
                spec.expected
            ));
            break;
        }
        let last_progress = report.last_arrival_us.unwrap_or(topic_ready_us);
        if report.first_arrival_us.is_some()
            && now.saturating_sub(last_progress) >= spec.stall_timeout_ms * 1000
        {
            report.stop_reason = Some(format!(
                "stalled: no new record for {} s, with {} of {} records",
                spec.stall_timeout_ms / 1000,
                seen.distinct(),
                spec.expected
            ));
            break;
        }
        let done = tokio::select! {
            d = fetches.next() => d,
            _ = tokio::time::sleep(tick) => None,
        };
        let Some((addr, resp, frame_bytes)) = done else {
            continue;
        };
        let arrival = now_us();
        let resp = resp?;
        if resp.error_code != 0 {
            bail!(
                "fetch from {addr} failed: {:?}",
                kafka_protocol::ResponseError::try_from_code(resp.error_code)
            );
        }
        let mut transient_errors = 0usize;
        let my_parts = parts
            .get_mut(&addr)
            .expect("fetches only go to known brokers");
        for t in resp.responses {
            for pd in t.partitions {
                let Some(part) = my_parts
                    .iter_mut()
                    .find(|p| p.partition == pd.partition_index)
                else {
                    continue;
                };
                if let Some(e) = kafka_protocol::ResponseError::try_from_code(pd.error_code) {
                    if transient(e) {
                        // A topic the replicator just created: its leader is still settling.
                        transient_errors += 1;
                        continue;
                    }
                    bail!(
                        "fetch of {}-{} at offset {} from {addr}: {e}",
                        spec.topic,
                        part.partition,
                        part.next_offset
                    );
                }
                let mut filter = AbortedFilter::new(
                    pd.aborted_transactions
                        .iter()
                        .flatten()
                        .map(|a| (a.producer_id.0, a.first_offset)),
                );
                let Some(records) = pd.records else { continue };
                for b in BatchWalker::new(records) {
                    let b = b.with_context(|| {
                        format!("a corrupt batch in {}-{}", spec.topic, part.partition)
                    })?;
                    if b.next_offset() <= part.next_offset {
                        continue;
                    }
                    if skipped(&mut filter, &b)? {
                        part.next_offset = b.next_offset();
                        continue;
                    }
                    report.batches += 1;
                    report.wire_bytes += b.size() as u64;
                    let recs =
                        decode_records(&b, DEFAULT_MAX_DECOMPRESSED_BYTES).with_context(|| {
                            format!("decoding a batch of {}-{}", spec.topic, part.partition)
                        })?;
                    for r in &recs {
                        if r.offset(b.base_offset()) < part.next_offset {
                            continue;
                        }
                        let Some(value) = &r.value else { continue };
                        let Some(stamp) = Stamp::read(value) else {
                            report.unexpected += 1;
                            continue;
                        };
                        if !part.live {
                            part.live = true;
                            live_parts += 1;
                        }
                        if stamp.warmup {
                            report.warmup_records += 1;
                            continue;
                        }
                        if seen.insert(stamp.seq) {
                            let size = value.len()
                                + r.key.as_ref().map_or(0, |k| k.len())
                                + r.headers
                                    .iter()
                                    .map(|(k, v)| k.len() + v.as_ref().map_or(0, |v| v.len()))
                                    .sum::<usize>();
                            report.bytes += size as u64;
                            latency.record(stamp.send_us, arrival);
                            series.arrival(size as u64, stamp.send_us, arrival);
                            if report.first_arrival_us.is_none() {
                                report.first_arrival_us = Some(arrival);
                                monitor.first_arrival();
                            }
                            report.last_arrival_us = Some(arrival);
                        }
                    }
                    part.next_offset = b.next_offset();
                }
            }
        }
        let _ = frame_bytes;
        if !all_live_told && live_parts == total_parts {
            all_live_told = true;
            monitor.all_partitions_live();
        }
        if transient_errors > 0 {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        if !seen.complete() {
            fetches.push(fetch(&conns[&addr], &spec.topic, &parts[&addr], spec)?);
        }
    }
    // Close the last (partial) second so the series covers the whole run.
    let (cpu, rss) = monitor.sample().unwrap_or_default();
    series.close_second(cpu, rss);
    report.distinct = seen.distinct();
    report.duplicates = seen.duplicates();
    report.unexpected += seen.unexpected();
    report.complete = seen.complete();
    report.latency = latency;
    report.series = series.into_points();
    Ok(report)
}

fn fetch(conn: &BrokerConn, topic: &str, parts: &[Part], spec: &ConsumeSpec) -> Result<FetchFut> {
    let req = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(spec.max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(spec.fetch_max_bytes)
        // read_committed.
        .with_isolation_level(1)
        .with_session_id(0)
        .with_session_epoch(-1)
        .with_topics(vec![
            FetchTopic::default()
                .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
                .with_partitions(
                    parts
                        .iter()
                        .map(|p| {
                            FetchPartition::default()
                                .with_partition(p.partition)
                                .with_current_leader_epoch(-1)
                                .with_fetch_offset(p.next_offset)
                                .with_last_fetched_epoch(-1)
                                .with_log_start_offset(-1)
                                .with_partition_max_bytes(spec.partition_max_bytes)
                        })
                        .collect(),
                ),
        ]);
    let version = conn.version_for::<FetchRequest>()?;
    let conn = conn.clone();
    let addr = conn.broker().to_string();
    Ok(Box::pin(async move {
        let r: Result<(FetchResponse, u64)> = async {
            let resp = conn.send(&req, version).await?.wait().await?;
            let len = resp.body.len() as u64;
            Ok((resp.decode::<FetchRequest>(&addr)?, len))
        }
        .await;
        match r {
            Ok((f, n)) => (addr, Ok(f), n),
            Err(e) => (addr, Err(e), 0),
        }
    }))
}

/// Partition errors that pass by themselves (leadership settling after topic creation).
fn transient(e: kafka_protocol::ResponseError) -> bool {
    use kafka_protocol::ResponseError::*;
    matches!(
        e,
        NotLeaderOrFollower
            | LeaderNotAvailable
            | UnknownTopicOrPartition
            | FencedLeaderEpoch
            | UnknownLeaderEpoch
    )
}

/// MiB of `bytes`.
pub fn mib(bytes: u64) -> f64 {
    bytes as f64 / MIB
}

#[cfg(test)]
mod read_committed_tests {
    use super::*;
    use bytes::Bytes;
    use strait_dataplane::batch::records::{BatchBuilder, end_txn_marker};
    use strait_dataplane::batch::walk::ControlType;
    use strait_dataplane::batch::{Compression, RawBatch, Record};

    fn data(base: i64, pid: i64, transactional: bool) -> RawBatch {
        let mut b = BatchBuilder::new(Compression::None)
            .base_offset(base)
            .producer(pid, 0, 0)
            .transactional(transactional);
        b.push(&Record::new(0, None, Some(Bytes::from_static(b"v"))))
            .unwrap();
        RawBatch::new(b.build().unwrap()).unwrap()
    }

    #[test]
    fn aborted_transactions_and_markers_are_skipped_committed_ones_kept() {
        // Producer 8's transaction from offset 1 was aborted; 7's committed.
        let mut filter = AbortedFilter::new([(8, 1)]);
        let log = [
            (data(0, 7, true), false),
            (data(1, 8, true), true),
            (data(2, 9, false), false),
            (
                RawBatch::new(end_txn_marker(ControlType::Abort, 3, 8, 0, 0)).unwrap(),
                true,
            ),
            (
                RawBatch::new(end_txn_marker(ControlType::Commit, 4, 7, 0, 0)).unwrap(),
                true,
            ),
            // Producer 8's next transaction is not aborted.
            (data(5, 8, true), false),
        ];
        for (b, skipped) in &log {
            assert_eq!(
                super::skipped(&mut filter, b).unwrap(),
                *skipped,
                "{}",
                b.base_offset()
            );
        }
    }
}
