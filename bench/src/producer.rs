//! The load generator: v2 batches built with strait's own [`BatchBuilder`] and sent with
//! [`BrokerConn`], one batch per partition per Produce request, several requests in flight.
//!
//! Records go to one partition until its batch is full (or has lingered `linger_ms`), then to
//! the next: Kafka's sticky partitioner for keyless records. At a fixed rate the generator
//! wakes every millisecond and stamps each record with the time it was generated, so the
//! measured latency includes the linger wait, as with a real producer. Flat out, it keeps at
//! most a bounded number of built batches waiting for an in-flight slot.
//!
//! Records are not idempotent (producer id -1), so requests may be pipelined without sequence
//! bookkeeping; any error in a response fails the run (the test bed is stable: a produce error
//! is a bug or a misconfiguration, not something to retry around).
#![forbid(unsafe_code)]

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::future::LocalBoxFuture;
use futures_util::stream::FuturesUnordered;
use kafka_protocol::messages::{ApiKey, ProduceRequest};
use serde::Serialize;
use strait_dataplane::batch::{BatchBuilder, Compression, HEADER_LEN, Record};
use strait_dataplane::io::{BrokerConn, ConnSetup, IoBackend};
use strait_dataplane::wire::WireError;
use strait_dataplane::wire::produce::{PartitionBatch, TopicBatches, encode_produce_body};

use crate::kafka::{self, now_us};
use crate::payload::{RecordShape, Stamp};
use crate::stats::{MIB, Pacer};

/// Largest batch the generator builds: Kafka's default `max.message.bytes` less some room.
pub const MAX_BATCH_BYTES: usize = 1_000_000;

/// What to produce.
#[derive(Debug, Clone)]
pub struct ProduceSpec {
    pub bootstrap: String,
    pub topic: String,
    /// Records to send (the run's sequence numbers are `0..records`).
    pub records: u64,
    pub shape: RecordShape,
    pub codec: Compression,
    /// A batch is closed once its uncompressed records reach this size.
    pub batch_bytes: usize,
    /// At a fixed rate, a batch is closed once its first record is this old.
    pub linger_ms: u64,
    /// Records per second; `None` = flat out.
    pub rate: Option<f64>,
    /// -1 (all) or 1.
    pub acks: i16,
    /// Produce requests in flight per broker.
    pub max_in_flight: usize,
    /// Upper bound on one request's batch bytes.
    pub max_request_bytes: usize,
    /// Stamp records as warm-up (not measured).
    pub warmup: bool,
    /// Show a progress bar (only when stderr is a terminal).
    pub progress: bool,
    pub backend: IoBackend,
}

impl ProduceSpec {
    fn validate(&self) -> Result<()> {
        if self.batch_bytes == 0 || self.batch_bytes > MAX_BATCH_BYTES {
            bail!(
                "batch size {} B is outside 1..={MAX_BATCH_BYTES}",
                self.batch_bytes
            );
        }
        if self.shape.record_bytes() > MAX_BATCH_BYTES {
            bail!(
                "records of {} B do not fit one batch",
                self.shape.record_bytes()
            );
        }
        if !matches!(self.acks, -1 | 1) {
            bail!(
                "acks must be -1 (all) or 1, got {} (acks=0 gets no response to count)",
                self.acks
            );
        }
        if let Some(r) = self.rate
            && !(r > 0.0 && r.is_finite())
        {
            bail!("rate must be a positive number of records per second, got {r}");
        }
        Ok(())
    }
}

/// What the generator did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ProduceReport {
    pub records: u64,
    /// Key + value + header bytes.
    pub bytes: u64,
    /// Batch bytes on the wire (after compression).
    pub wire_bytes: u64,
    pub batches: u64,
    pub requests: u64,
    pub secs: f64,
    pub records_per_s: f64,
    pub mib_per_s: f64,
    /// At a fixed rate: the most records the generator was ever behind its schedule (0 means
    /// it kept the rate exactly; large values mean the bench, not the replicator, was slow).
    pub max_behind_records: u64,
    /// True when a stop signal ended the run before `records` were sent.
    pub stopped_early: bool,
    /// When generation started, µs since the epoch.
    pub started_us: u64,
    /// Batches sent again after a transient leadership error.
    pub retries: u64,
}

struct Open {
    builder: BatchBuilder,
    first_us: u64,
    records: u64,
}

struct Ready {
    batch: Bytes,
    records: u64,
}

#[derive(Default)]
struct PartitionState {
    open: Option<Open>,
    ready: VecDeque<Ready>,
}

/// A sent request's batches (by partition index) and, per batch, the broker's error if any.
type Outcome = Vec<(usize, Ready, Option<kafka_protocol::ResponseError>)>;
type InFlight = LocalBoxFuture<'static, Result<Outcome>>;

/// How long a run may keep retrying batches rejected with a transient leadership error (a
/// partition whose leader is still being set up right after topic creation) without any batch
/// being accepted, before it fails.
const MAX_RETRY_WINDOW_US: u64 = 60_000_000;
/// Pause before resending after a retriable error.
const RETRY_BACKOFF_US: u64 = 100_000;

/// Errors worth retrying: leadership moves and topics still being created.
fn retriable(e: kafka_protocol::ResponseError) -> bool {
    use kafka_protocol::ResponseError::*;
    matches!(
        e,
        NotLeaderOrFollower
            | LeaderNotAvailable
            | UnknownTopicOrPartition
            | NotEnoughReplicas
            | NotEnoughReplicasAfterAppend
            | RequestTimedOut
    )
}

/// Produces `spec.records` records (or until `stop` is set). Runs on the current thread inside
/// a runtime of `spec.backend` (see [`strait_dataplane::io::block_on`]).
#[allow(clippy::too_many_lines)] // bench code, one measurement told in order: not split yet
pub async fn produce(spec: &ProduceSpec, stop: Option<Arc<AtomicBool>>) -> Result<ProduceReport> {
    spec.validate()?;
    let admin = kafka::admin("source", &spec.bootstrap, spec.backend)?;
    let leaders = kafka::wait_for_leaders(&admin, &spec.topic, 1, Duration::from_secs(30)).await?;
    let partitions: Vec<i32> = leaders.keys().copied().collect();
    let setup = ConnSetup::new(
        kafka::conn_config("strait-bench-producer", spec.max_in_flight),
        spec.backend,
    )?;
    let mut conns: BTreeMap<String, BrokerConn> = BTreeMap::new();
    for addr in leaders.values() {
        if !conns.contains_key(addr) {
            let c = BrokerConn::connect(addr, &setup)
                .await
                .with_context(|| format!("connecting the producer to {addr}"))?;
            conns.insert(addr.clone(), c);
        }
    }
    let by_broker: BTreeMap<String, Vec<usize>> =
        partitions
            .iter()
            .enumerate()
            .fold(BTreeMap::new(), |mut m, (i, p)| {
                m.entry(leaders[p].clone()).or_insert_with(Vec::new).push(i);
                m
            });

    let progress = (spec.progress && std::io::stderr().is_terminal()).then(|| {
        let pb = indicatif::ProgressBar::new(spec.records);
        pb.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} produce {bar:40} {pos}/{len} records {per_sec} eta {eta}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        pb
    });

    let start_us = now_us();
    let pacer = Pacer::new(start_us, spec.rate);
    let mut state: Vec<PartitionState> = partitions.iter().map(|_| Default::default()).collect();
    let mut cursor = 0usize;
    let mut total = spec.records;
    let mut generated = 0u64;
    let mut acked = 0u64;
    let mut ready_bytes = 0usize;
    // Flat out, built batches waiting for a slot are bounded: enough to fill every slot twice.
    let max_ready_bytes = spec.max_request_bytes * spec.max_in_flight.max(1) * 2;
    let mut report = ProduceReport {
        started_us: start_us,
        ..ProduceReport::default()
    };
    let mut inflight: FuturesUnordered<InFlight> = FuturesUnordered::new();
    let mut rotation: HashMap<String, usize> = HashMap::new();
    let tick = Duration::from_millis(1);
    let mut hold_until_us = 0u64;
    let mut last_success_us = start_us;

    loop {
        let now = now_us();
        if let Some(s) = &stop
            && s.load(Ordering::Relaxed)
            && total > generated
        {
            total = generated;
            report.stopped_early = true;
        }
        // 1. Generate what is due.
        let due = pacer.due(now).min(total);
        if spec.rate.is_some() {
            report.max_behind_records =
                report.max_behind_records.max(due.saturating_sub(generated));
        }
        while generated < due && ready_bytes < max_ready_bytes {
            let seq = generated;
            let st = &mut state[cursor];
            let open = st.open.get_or_insert_with(|| Open {
                builder: BatchBuilder::new(spec.codec),
                first_us: now,
                records: 0,
            });
            let stamp = Stamp {
                send_us: now,
                seq,
                warmup: spec.warmup,
            };
            let mut rec = Record::new(
                (now / 1000) as i64,
                spec.shape.key(seq),
                Some(spec.shape.value(stamp)),
            );
            rec.headers = spec.shape.headers(seq);
            open.builder
                .push(&rec)
                .map_err(|e| anyhow!("building a batch: {e}"))?;
            open.records += 1;
            generated += 1;
            if open.builder.uncompressed_len() >= spec.batch_bytes {
                ready_bytes += close(st)?;
                cursor = (cursor + 1) % state.len();
            }
        }
        // 2. Close lingering batches, and everything once all records are generated.
        let linger_us = spec.linger_ms * 1000;
        let n_parts = state.len();
        for (i, st) in state.iter_mut().enumerate() {
            let expired = st
                .open
                .as_ref()
                .is_some_and(|o| generated >= total || now.saturating_sub(o.first_us) >= linger_us);
            if expired {
                ready_bytes += close(st)?;
                if i == cursor {
                    cursor = (cursor + 1) % n_parts;
                }
            }
        }
        // 3. Send: one request per free slot, one batch per partition per request.
        let holding = now < hold_until_us;
        for (addr, idxs) in by_broker.iter().filter(|_| !holding) {
            let conn = &conns[addr];
            let version = conn.version_for::<ProduceRequest>()?;
            loop {
                let rot = rotation.entry(addr.clone()).or_default();
                let mut batches = Vec::new();
                let mut bytes = 0usize;
                for k in 0..idxs.len() {
                    let i = idxs[(*rot + k) % idxs.len()];
                    let Some(front) = state[i].ready.front() else {
                        continue;
                    };
                    if bytes > 0 && bytes + front.batch.len() > spec.max_request_bytes {
                        break;
                    }
                    let r = state[i].ready.pop_front().expect("front exists");
                    bytes += r.batch.len();
                    batches.push((i, r));
                }
                if batches.is_empty() {
                    break;
                }
                *rot = rot.wrapping_add(1);
                let topics = [TopicBatches {
                    topic: spec.topic.clone(),
                    partitions: batches
                        .iter()
                        .map(|(i, r)| split_batch(partitions[*i], &r.batch))
                        .collect::<Result<Vec<_>>>()?,
                }];
                let sent = conn.try_send_encoded(ApiKey::Produce as i16, version, |fb| {
                    encode_produce_body(fb, version, None, spec.acks, 30_000, &topics).map_err(
                        |m| WireError::Protocol {
                            broker: addr.clone(),
                            api: "Produce",
                            message: m.to_string(),
                        },
                    )
                })?;
                let Some(pending) = sent else {
                    // No free slot: put the batches back in order and wait for a response.
                    for (i, r) in batches.into_iter().rev() {
                        state[i].ready.push_front(r);
                    }
                    break;
                };
                ready_bytes -= bytes;
                report.requests += 1;
                report.batches += batches.len() as u64;
                let partition_of: Vec<i32> = batches.iter().map(|(i, _)| partitions[*i]).collect();
                inflight.push(Box::pin(async move {
                    let resp = pending.decode::<ProduceRequest>().await?;
                    let mut errors: HashMap<i32, kafka_protocol::ResponseError> = HashMap::new();
                    for t in &resp.responses {
                        for p in &t.partition_responses {
                            if let Some(e) =
                                kafka_protocol::ResponseError::try_from_code(p.error_code)
                            {
                                errors.insert(p.index, e);
                            }
                        }
                    }
                    Ok(batches
                        .into_iter()
                        .zip(partition_of)
                        .map(|((i, r), p)| (i, r, errors.get(&p).copied()))
                        .collect())
                }));
            }
        }
        // 4. Done?
        if acked >= total && generated >= total && inflight.is_empty() {
            break;
        }
        // 5. Wait for a response, or the next millisecond when more records will come due.
        let more_due = generated < total && spec.rate.is_some();
        let lingering = state.iter().any(|s| s.open.is_some());
        let waiting_for_slot = state.iter().any(|s| !s.ready.is_empty());
        let must_tick = more_due || lingering || stop.is_some();
        if inflight.is_empty() && !must_tick && !waiting_for_slot && generated >= total {
            break;
        }
        let mut ctx = Acks {
            acked: &mut acked,
            report: &mut report,
            progress: progress.as_ref(),
            state: &mut state,
            ready_bytes: &mut ready_bytes,
            partitions: &partitions,
            topic: &spec.topic,
            hold_until_us: &mut hold_until_us,
            last_success_us: &mut last_success_us,
        };
        if inflight.is_empty() {
            tokio::time::sleep(tick).await;
        } else if must_tick || waiting_for_slot {
            tokio::select! {
                r = inflight.next() => handle(r, &mut ctx)?,
                _ = tokio::time::sleep(tick) => {}
            }
        } else {
            let r = inflight.next().await;
            handle(r, &mut ctx)?;
        }
        // Drain whatever else completed without waiting.
        while let Some(Some(r)) = futures_util::FutureExt::now_or_never(inflight.next()) {
            handle(Some(r), &mut ctx)?;
        }
    }
    if let Some(pb) = progress {
        pb.finish_and_clear();
    }
    let secs = (now_us().saturating_sub(start_us)) as f64 / 1e6;
    report.records = acked;
    report.bytes = acked * spec.shape.record_bytes() as u64;
    report.secs = secs;
    if secs > 0.0 {
        report.records_per_s = acked as f64 / secs;
        report.mib_per_s = report.bytes as f64 / MIB / secs;
    }
    Ok(report)
}

struct Acks<'a> {
    acked: &'a mut u64,
    report: &'a mut ProduceReport,
    progress: Option<&'a indicatif::ProgressBar>,
    state: &'a mut [PartitionState],
    ready_bytes: &'a mut usize,
    partitions: &'a [i32],
    topic: &'a str,
    /// Sending pauses until then after a retriable error.
    hold_until_us: &'a mut u64,
    /// When a batch was last accepted (or the run started).
    last_success_us: &'a mut u64,
}

fn handle(r: Option<Result<Outcome>>, ctx: &mut Acks<'_>) -> Result<()> {
    let Some(r) = r else { return Ok(()) };
    for (i, batch, err) in r? {
        match err {
            None => {
                *ctx.last_success_us = now_us();
                *ctx.acked += batch.records;
                ctx.report.wire_bytes += batch.batch.len() as u64;
                if let Some(pb) = ctx.progress {
                    pb.inc(batch.records);
                }
            }
            Some(e)
                if retriable(e)
                    && now_us().saturating_sub(*ctx.last_success_us) < MAX_RETRY_WINDOW_US =>
            {
                ctx.report.retries += 1;
                *ctx.hold_until_us = now_us() + RETRY_BACKOFF_US;
                *ctx.ready_bytes += batch.batch.len();
                ctx.state[i].ready.push_front(batch);
            }
            Some(e) => bail!(
                "produce to {}-{} failed: {e} ({} batches retried in this run)",
                ctx.topic,
                ctx.partitions[i],
                ctx.report.retries
            ),
        }
    }
    Ok(())
}

/// Builds the open batch of `st` and queues it; returns its size.
fn close(st: &mut PartitionState) -> Result<usize> {
    let Some(open) = st.open.take() else {
        return Ok(0);
    };
    let batch = open
        .builder
        .build()
        .map_err(|e| anyhow!("building a batch: {e}"))?;
    let n = batch.len();
    st.ready.push_back(Ready {
        batch,
        records: open.records,
    });
    Ok(n)
}

/// A built batch as the Produce encoder wants it: a 61-byte head and the rest by reference.
fn split_batch(partition: i32, batch: &Bytes) -> Result<PartitionBatch> {
    let head: [u8; HEADER_LEN] = batch
        .get(..HEADER_LEN)
        .and_then(|h| h.try_into().ok())
        .ok_or_else(|| anyhow!("a built batch is shorter than its header"))?;
    Ok(PartitionBatch {
        partition,
        head,
        payload: batch.slice(HEADER_LEN..),
    })
}
