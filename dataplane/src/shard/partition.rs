//! The replication state machine of one source partition, sans IO.
//!
//! It takes fetched record sets and produce outcomes in, and gives back batches to send,
//! progress and exact offset-mapping segments. Time is an argument. The shard's event loop
//! ([`super::core`], driven by [`super::driver`]) does the rest around it.
//!
//! Life of a batch:
//! 1. [`Partition::handle_fetch`] walks the record set, drops control and aborted batches, and
//!    queues the rest: as they are (fast path) or rebuilt (slow path).
//! 2. [`Partition::poll_send`] hands out the next batch with this shard's producer id, epoch and
//!    the partition's next sequence number, at most `max_in_flight_per_partition` at a time.
//!    Tiny batches (under a sixteenth of `batch.size`) that queued up behind a full window are
//!    merged first, up to `batch.size` (`Partition::coalesce_front`): a partition that is behind
//!    pays one round trip per `batch.size`, not one per record or two; larger batches go as
//!    they came.
//! 3. [`Partition::handle_produced`] records the outcome. Acknowledged batches leave the window
//!    in sequence order, moving progress and producing mapping segments. A retriable failure
//!    marks the batch for resending with the *same* sequence number (the broker deduplicates),
//!    after every later in-flight batch has answered.
#![deny(clippy::disallowed_methods)]

use std::cell::Cell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::ResponseError;

use super::backoff::{Backoff, Jitter};
use super::channel::{
    FailureKind, FetchSettings, IsolationLevel, MappingSegment, PartitionKey, PartitionProgress,
    PathCounts, ProduceSettings, ShardStats, Stall, StallReason, Transactional,
};
use super::fetch_size::FetchSize;
use super::timing::{WallClock, batch_timestamp, timings_of};
use crate::batch::{
    AbortedFilter, BatchError, BatchWalker, DEFAULT_MAX_DECOMPRESSED_BYTES, HEADER_LEN,
    HeaderRewrite, OffsetRun, Path, RawBatch, RebuildOptions, SlowReason, Verdict, classify,
    coalesce, increment_sequence, rebuild,
};
use crate::wire::produce::PartitionBatch;

/// Memory held by one fetch response frame. Every batch cut from the frame holds a clone; the
/// frame's bytes leave the shard's budget when the last one is dropped.
#[derive(Debug)]
pub struct FrameTicket {
    bytes: usize,
    in_use: Rc<Cell<usize>>,
}

impl FrameTicket {
    pub fn new(bytes: usize, in_use: &Rc<Cell<usize>>) -> Rc<FrameTicket> {
        in_use.set(in_use.get() + bytes);
        Rc::new(FrameTicket {
            bytes,
            in_use: in_use.clone(),
        })
    }
}

impl FrameTicket {
    /// A ticket for `bytes` more in the same shard's budget (a batch built from fetched ones).
    pub fn sibling(&self, bytes: usize) -> Rc<FrameTicket> {
        FrameTicket::new(bytes, &self.in_use)
    }
}

impl Drop for FrameTicket {
    fn drop(&mut self) {
        self.in_use
            .set(self.in_use.get().saturating_sub(self.bytes));
    }
}

/// One partition's data from a fetch response.
#[derive(Debug, Clone, Default)]
pub struct Fetched {
    pub error_code: i16,
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
    /// `(producer_id, first_offset)` of aborted transactions.
    pub aborted: Vec<(i64, i64)>,
    pub records: Option<Bytes>,
    /// Set when the leader's log does not hold the epoch and offset strait last fetched
    /// (Fetch v12+, KIP-320 through the request's `last_fetched_epoch`).
    pub diverging: Option<DivergingEpoch>,
}

/// A fetch's diverging epoch: the leader's log for leader epoch `epoch` (the largest it has at
/// or below the one strait last fetched) ends at `end_offset`, before strait's position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DivergingEpoch {
    pub epoch: i32,
    pub end_offset: i64,
}

/// What the target said about one batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProduceOutcome {
    /// Appended; the batch's first record is at `base_offset` (-1 when unknown, e.g. a
    /// duplicate the broker recognised).
    Appended { base_offset: i64 },
    /// An error code from the broker, with its message.
    Error { code: i16, message: Option<String> },
    /// The request failed before an answer (connection lost, timeout): the batch may or may not
    /// have been written, so it is resent with the same sequence number.
    Lost { reason: String },
}

/// This shard's idempotent producer on a target cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProducerIdentity {
    pub id: i64,
    pub epoch: i16,
}

/// Where this shard's producer stands on one target partition: the sequence number the broker
/// expects next from it. Kept when a partition leaves the shard, so that a later assignment of
/// the same target partition continues the sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SequenceState {
    pub producer: ProducerIdentity,
    pub next_sequence: i32,
    /// Whether the target acknowledged a batch of this producer on the partition, so that it
    /// knows the producer and checks its sequence numbers (until then only one batch may be in
    /// flight: see `Partition::established`).
    pub acknowledged: bool,
}

/// A partition that stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub kind: FailureKind,
    pub message: String,
}

/// Where one batch of the window stands with the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BatchState {
    /// Fetched, no sequence number yet (in `queue`).
    Queued,
    /// On the wire (or about to be), waiting for the answer.
    Sent,
    Acked {
        base_offset: i64,
    },
    /// The last attempt failed retriably; resent with the same sequence number.
    Failed,
}

/// The source offsets of a batch's records, in order. A forwarded batch (the fast path, nearly
/// every batch) is one run, stored inline; only a rebuilt batch with compaction gaps has more.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceRuns {
    One(OffsetRun),
    Many(Box<[OffsetRun]>),
}

impl SourceRuns {
    pub fn from_vec(mut runs: Vec<OffsetRun>) -> Self {
        if runs.len() == 1 {
            SourceRuns::One(runs.remove(0))
        } else {
            SourceRuns::Many(runs.into_boxed_slice())
        }
    }

    pub fn as_slice(&self) -> &[OffsetRun] {
        match self {
            SourceRuns::One(r) => std::slice::from_ref(r),
            SourceRuns::Many(rs) => rs,
        }
    }

    /// The first source offset, -1 when empty.
    pub fn first_offset(&self) -> i64 {
        self.as_slice().first().map_or(-1, |r| r.first)
    }

    /// The source offset after the last record, if any.
    pub fn end_offset(&self) -> Option<i64> {
        self.as_slice().last().map(|r| r.first + i64::from(r.len))
    }
}

#[derive(Debug)]
struct Outgoing {
    batch: RawBatch,
    /// The source offsets of its records, in order.
    runs: SourceRuns,
    records: i32,
    /// Progress after this batch is acknowledged (past any filtered batches that followed it).
    next_after: i64,
    seq: Option<i32>,
    state: BatchState,
    /// Whether it was rebuilt (slow path).
    rebuilt: bool,
    /// What its records are timed by ([`batch_timestamp`]), -1 for none.
    timestamp_ms: i64,
    _ticket: Rc<FrameTicket>,
}

/// Lifecycle of a partition inside a shard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    Running,
    Paused,
    /// Revoked or shutting down: nothing new is fetched or sent; waiting for answers.
    Draining,
    Failed(Failure),
}

/// The state machine of one partition.
#[derive(Debug)]
pub struct Partition {
    pub key: PartitionKey,
    pub target_topic: Arc<str>,
    pub fetch: FetchSettings,
    pub produce: ProduceSettings,
    max_message_bytes: usize,
    /// What the next fetch asks for (grows while behind, see [`FetchSize`]).
    fetch_size: FetchSize,
    status: Status,
    fetch_offset: i64,
    /// The offset the fetch in flight asked for. A response is taken only while the partition
    /// still stands there: an answer to a fetch sent before a seek or a new assignment of the
    /// partition would otherwise skip the records between the two positions.
    fetch_sent_at: Option<i64>,
    acked_next: i64,
    /// Target offset after the last acknowledged batch, -1 while unknown.
    target_next: i64,
    end_offset: i64,
    log_start_offset: i64,
    /// The source leader's epoch from the last leader lookup (-1 while unknown), sent as the
    /// fetch's `current_leader_epoch`.
    source_leader_epoch: i32,
    /// The partition leader epoch of the last batch taken from the source (-1 while none is
    /// known), sent as the fetch's `last_fetched_epoch` so that the leader can say when its log
    /// no longer holds what strait fetched (KIP-320). It is at least the epoch of the record
    /// before `acked_next`, so stored with the progress it can only miss a divergence, never
    /// invent one.
    last_fetched_epoch: i32,
    /// Batches not yet acknowledged: `window` (sequence numbers assigned) then `queue`.
    window: VecDeque<Outgoing>,
    queue: VecDeque<Outgoing>,
    queued_bytes: usize,
    next_seq: i32,
    producer: Option<ProducerIdentity>,
    /// Exactly-once forwarding: this partition's own transactional producer's id (its
    /// `producer` is that producer, never the shard's idempotent one), and every batch it
    /// sends belongs to that producer's open transaction.
    transactional_id: Option<Arc<str>>,
    /// A commit is under way ([`Partition::seal`]): no new batch goes on the wire.
    sealed: bool,
    /// Whether the target has acknowledged a batch of the current producer on this partition.
    /// Until then only one batch may be in flight: a broker that does not know our producer
    /// accepts *any* sequence number, so a later batch could land before a refused first one
    /// and make the first out of order for good.
    established: bool,
    retry_at: Option<Instant>,
    /// Produce retries back off exponentially (`retry.backoff.ms` to `retry.backoff.max.ms`).
    retry_backoff: Backoff,
    jitter: Jitter,
    /// Why fetching is stuck, and since when (set and cleared by the shard and by fetches).
    source_stall: Option<Stall>,
    /// Why delivery is stuck, and since when. Its `since` starts `delivery.timeout.ms`.
    target_stall: Option<Stall>,
    mappings: Vec<MappingSegment>,
    /// The last seek's generation, reported with the progress.
    seek_generation: u32,
    /// Batch bytes acknowledged since the partition came to this shard.
    bytes_acked: u64,
    /// Source batches fetched since the partition came to this shard, by path.
    paths: PathCounts,
    /// For record timing; without it nothing is timed.
    wall: Option<WallClock>,
    /// The leaders must be looked up before fetching / producing.
    pub needs_source_leader: bool,
    pub needs_target_leader: bool,
}

impl Partition {
    pub fn new(
        key: PartitionKey,
        target_topic: Arc<str>,
        start_offset: i64,
        max_message_bytes: usize,
        fetch: FetchSettings,
        produce: ProduceSettings,
    ) -> Self {
        let seed = seed_of(&key);
        let fetch_size = FetchSize::new(
            usize::try_from(fetch.partition_max_bytes).unwrap_or(0),
            usize::try_from(fetch.partition_ceiling_bytes).unwrap_or(0),
        );
        Partition {
            key,
            target_topic,
            fetch,
            produce,
            max_message_bytes,
            fetch_size,
            status: Status::Running,
            fetch_offset: start_offset,
            fetch_sent_at: None,
            acked_next: start_offset,
            target_next: -1,
            end_offset: -1,
            log_start_offset: -1,
            source_leader_epoch: -1,
            last_fetched_epoch: -1,
            window: VecDeque::new(),
            queue: VecDeque::new(),
            queued_bytes: 0,
            next_seq: 0,
            producer: None,
            transactional_id: None,
            sealed: false,
            established: false,
            retry_at: None,
            retry_backoff: Backoff::new(produce.backoff.retry_ms, produce.backoff.retry_max_ms),
            jitter: Jitter::new(seed),
            source_stall: None,
            target_stall: None,
            mappings: Vec::new(),
            seek_generation: 0,
            bytes_acked: 0,
            paths: PathCounts::default(),
            wall: None,
            needs_source_leader: true,
            needs_target_leader: true,
        }
    }

    pub fn status(&self) -> &Status {
        &self.status
    }

    /// Times records (age when fetched, latency when acknowledged) by this clock.
    pub fn set_wall_clock(&mut self, wall: WallClock) {
        self.wall = Some(wall);
    }

    /// Counts `records` records timed at `timestamp_ms` into this flow's replication latency
    /// histogram (`latency`) or record age histogram.
    fn time_records(
        &self,
        timestamp_ms: i64,
        records: i32,
        now: Instant,
        stats: &mut ShardStats,
        latency: bool,
    ) {
        let Some(wall) = self.wall.filter(|_| timestamp_ms >= 0) else {
            return;
        };
        let t = timings_of(&mut stats.timings, self.key.flow);
        let h = if latency {
            &mut t.replication_latency
        } else {
            &mut t.record_age
        };
        h.observe(
            wall.ms(now).saturating_sub(timestamp_ms),
            u64::try_from(records).unwrap_or(0),
        );
    }

    pub fn source_leader_epoch(&self) -> i32 {
        self.source_leader_epoch
    }

    pub fn set_source_leader_epoch(&mut self, epoch: i32) {
        self.source_leader_epoch = epoch;
    }

    pub fn last_fetched_epoch(&self) -> i32 {
        self.last_fetched_epoch
    }

    /// The leader epoch of the record before the start offset, when the stored progress knows
    /// it (see `last_fetched_epoch`): the first fetch then checks the source log still holds it.
    pub fn set_last_fetched_epoch(&mut self, epoch: i32) {
        self.last_fetched_epoch = epoch;
    }

    /// The target offset the next acknowledged record lands at, as known before the first
    /// acknowledgement (see `Assignment::start_target_offset`); -1 when unknown.
    pub fn set_target_next_offset(&mut self, offset: i64) {
        debug_assert!(self.window.is_empty(), "set before anything was sent");
        self.target_next = offset.max(-1);
    }

    pub fn fetch_offset(&self) -> i64 {
        self.fetch_offset
    }

    /// The number of the last seek applied (`ShardCommand::Seek`), 0 before any.
    pub fn seek_generation(&self) -> u32 {
        self.seek_generation
    }

    /// Every source record below this offset has been acknowledged by the target.
    pub fn next_offset(&self) -> i64 {
        self.acked_next
    }

    pub fn end_offset(&self) -> i64 {
        self.end_offset
    }

    /// Bytes of batches fetched and not yet acknowledged.
    pub fn queued_bytes(&self) -> usize {
        self.queued_bytes
    }

    pub fn set_max_message_bytes(&mut self, v: usize) {
        self.max_message_bytes = v;
    }

    pub fn pause(&mut self) {
        if self.status == Status::Running {
            self.status = Status::Paused;
        }
    }

    pub fn resume(&mut self) {
        if self.status == Status::Paused {
            self.status = Status::Running;
        }
    }

    /// Stops fetching and sending new batches; queued (unsent) batches are dropped, so that the
    /// next owner refetches them from [`Partition::next_offset`]. Batches already given a
    /// sequence number are finished: a failed one is still resent until the target
    /// acknowledges it (or `delivery.timeout.ms` stops the partition), because the target may
    /// hold it already and only its own sequence number lets the broker recognise it.
    pub fn drain(&mut self) {
        self.drop_queue();
        if !matches!(self.status, Status::Failed(_)) {
            self.status = Status::Draining;
        }
    }

    /// Whether a draining partition has finished every batch it gave a sequence number to
    /// (a failed partition: whether none is still on the wire).
    pub fn is_quiet(&self) -> bool {
        if matches!(self.status, Status::Failed(_)) {
            self.nothing_on_wire()
        } else {
            self.window.is_empty()
        }
    }

    /// Whether no batch of this partition awaits an answer.
    pub fn nothing_on_wire(&self) -> bool {
        !self.window.iter().any(|o| o.state == BatchState::Sent)
    }

    /// Restarts from `offset` (operator seek, or the opt-in reset), the seek numbered
    /// `generation` (see `ShardCommand::Seek`). Anything fetched or in flight is forgotten;
    /// answers still in flight are ignored when they arrive.
    pub fn seek(&mut self, offset: i64, generation: u32) {
        self.seek_generation = generation;
        self.drop_queue();
        self.window.clear();
        self.queued_bytes = 0;
        self.fetch_offset = offset;
        self.fetch_sent_at = None;
        self.acked_next = offset;
        self.target_next = -1;
        self.last_fetched_epoch = -1;
        self.retry_at = None;
        self.retry_backoff.reset();
        self.source_stall = None;
        self.target_stall = None;
        if matches!(self.status, Status::Failed(_)) {
            self.status = Status::Running;
        }
    }

    fn drop_queue(&mut self) {
        for o in self.queue.drain(..) {
            self.queued_bytes -= o.batch.size();
        }
        // Whatever followed the last batch in the window will be refetched.
        if let Some(last) = self.window.back_mut() {
            last.next_after = last.runs.end_offset().unwrap_or(last.next_after);
        }
    }

    /// Stops the partition: nothing more is fetched or sent for it until a seek.
    pub fn fail(&mut self, kind: FailureKind, message: String) {
        self.drop_queue();
        self.status = Status::Failed(Failure { kind, message });
    }

    /// The partition is in a fetch request now, at [`Partition::fetch_offset`].
    pub fn fetch_started(&mut self) {
        self.fetch_sent_at = Some(self.fetch_offset);
    }

    /// The bytes this partition asks for in its next fetch.
    pub fn fetch_bytes(&self) -> usize {
        self.fetch_size.bytes()
    }

    /// Whether this partition wants to be in the next fetch request.
    pub fn wants_fetch(&self, per_partition_cap: usize) -> bool {
        self.status == Status::Running
            && !self.needs_source_leader
            && self.queued_bytes < per_partition_cap
    }

    /// Whether the last fetch reached the end of the readable log, so that a fetch of this
    /// partition alone would wait on the broker for up to `max_wait_ms`.
    pub fn caught_up(&self) -> bool {
        self.end_offset >= 0 && self.fetch_offset >= self.end_offset
    }

    /// Whether it stays out of fetches only because its fetched batches still await the target:
    /// it will want a fetch again as soon as the target acknowledges them.
    pub fn backlogged(&self, per_partition_cap: usize) -> bool {
        self.status == Status::Running
            && !self.needs_source_leader
            && self.queued_bytes >= per_partition_cap
    }

    /// An incremental fetch answered without this partition, which its fetch session holds:
    /// nothing new since the broker last answered it (no records, the same high watermark, no
    /// error), taken as an empty slice is. The fetch succeeded, so a stall it reported ends,
    /// and an ask grown while behind shrinks back once caught up (as with an empty slice: an
    /// idle partition would otherwise keep reserving its largest ask in every fetch).
    pub fn fetched_nothing_new(&mut self) {
        if self.status == Status::Running && self.fetch_sent_at.take() == Some(self.fetch_offset) {
            self.source_stall = None;
            self.fetch_size.observe(0, self.caught_up());
        }
    }

    /// Takes a partition's slice of a fetch response.
    pub fn handle_fetch(
        &mut self,
        data: Fetched,
        ticket: &Rc<FrameTicket>,
        now: Instant,
        stats: &mut ShardStats,
    ) -> Result<(), Failure> {
        let result = self.take_fetched(data, ticket, now, stats);
        self.check_invariants();
        result
    }

    fn take_fetched(
        &mut self,
        data: Fetched,
        ticket: &Rc<FrameTicket>,
        now: Instant,
        stats: &mut ShardStats,
    ) -> Result<(), Failure> {
        if self.status != Status::Running {
            return Ok(()); // paused or draining since the request left: drop the data
        }
        if self.fetch_sent_at.take() != Some(self.fetch_offset) {
            return Ok(()); // the answer to a fetch from another position (a seek since)
        }
        self.log_start_offset = data.log_start_offset;
        if data.error_code != 0 {
            return self.fetch_error(&data, now);
        }
        if let Some(d) = data.diverging {
            return self.diverged(d);
        }
        self.source_stall = None;
        let read_committed = self.fetch.isolation_level == IsolationLevel::ReadCommitted;
        self.end_offset = if read_committed && data.last_stable_offset >= 0 {
            data.last_stable_offset
        } else {
            data.high_watermark
        };
        let Some(records) = data.records else {
            self.fetch_size.observe(0, self.caught_up());
            return Ok(());
        };
        let returned_bytes = records.len();
        let mut filter = AbortedFilter::new(data.aborted);
        let mut walker = BatchWalker::new(records);
        for item in walker.by_ref() {
            let batch = match item {
                Ok(b) => b,
                Err(e) => {
                    return self.fail_with(FailureKind::BadSourceData, self.describe(&e));
                }
            };
            if batch.next_offset() <= self.fetch_offset {
                continue; // the broker starts at the batch holding our offset
            }
            // Taken from here on (forwarded, rebuilt or skipped), or the partition fails.
            self.last_fetched_epoch = batch.partition_leader_epoch();
            if !self.keep(&batch, read_committed.then_some(&mut filter), stats)? {
                continue;
            }
            self.time_records(
                batch_timestamp(&batch),
                batch.records_count(),
                now,
                stats,
                false,
            );
            let next = batch.next_offset();
            match classify(&batch, self.fetch_offset, self.max_message_bytes) {
                Path::Skip => self.skip_to(next),
                Path::Fast => {
                    stats.fast_batches += 1;
                    self.paths.fast_batches += 1;
                    let runs = SourceRuns::One(OffsetRun {
                        first: batch.base_offset(),
                        len: batch.records_count() as u32,
                    });
                    let records = batch.records_count();
                    self.push(batch, runs, records, next, false, ticket);
                }
                Path::Slow(reason) => self.queue_rebuilt(&batch, reason, next, ticket, stats)?,
            }
            self.fetch_offset = next;
        }
        self.fetch_size.observe(returned_bytes, self.caught_up());
        Ok(())
    }

    /// Whether to forward `batch`: control markers and (under read_committed, with the
    /// response's aborted-transactions `filter`) aborted batches are dropped, and progress moves
    /// past them.
    fn keep(
        &mut self,
        batch: &RawBatch,
        filter: Option<&mut AbortedFilter>,
        stats: &mut ShardStats,
    ) -> Result<bool, Failure> {
        let verdict = match filter {
            Some(f) => match f.classify(batch) {
                Ok(v) => v,
                Err(e) => {
                    return self
                        .fail_with(FailureKind::BadSourceData, self.describe(&e))
                        .map(|()| false);
                }
            },
            None if batch.is_control() => Verdict::DropControl,
            None => Verdict::Forward,
        };
        match verdict {
            Verdict::DropControl => stats.dropped_control += 1,
            Verdict::DropAborted => stats.dropped_aborted += 1,
            Verdict::Forward => return Ok(true),
        }
        self.skip_to(batch.next_offset());
        Ok(false)
    }

    /// The slow path: rebuilds `batch` into dense batches from the fetch offset on, within
    /// the target's `max.message.bytes`, and queues them.
    fn queue_rebuilt(
        &mut self,
        batch: &RawBatch,
        reason: SlowReason,
        next: i64,
        ticket: &Rc<FrameTicket>,
        stats: &mut ShardStats,
    ) -> Result<(), Failure> {
        stats.slow_batches += 1;
        self.paths.slow_batches += 1;
        stats.slow_reasons.count(reason);
        stats.slow_bytes += batch.source_size() as u64;
        let opts = RebuildOptions {
            resume_offset: self.fetch_offset,
            max_batch_bytes: self.max_message_bytes,
            ..RebuildOptions::default()
        };
        let rebuilt = match rebuild(batch, &opts) {
            Ok(r) => r,
            Err(e @ BatchError::RecordTooLarge { .. }) => {
                let msg = format!(
                    "{}; the target topic {} has max.message.bytes={}",
                    self.describe(&e),
                    self.target_topic,
                    self.max_message_bytes
                );
                return self.fail_with(FailureKind::RecordTooLarge, msg);
            }
            Err(e) => {
                return self.fail_with(FailureKind::BadSourceData, self.describe(&e));
            }
        };
        if rebuilt.is_empty() {
            self.skip_to(next);
        }
        let n = rebuilt.len();
        for (i, rb) in rebuilt.into_iter().enumerate() {
            let records = rb.record_count() as i32;
            let raw = match RawBatch::new(rb.bytes) {
                Ok(r) => r,
                Err(e) => {
                    return self
                        .fail_with(FailureKind::Other, format!("rebuilt batch is invalid: {e}"));
                }
            };
            let runs = SourceRuns::from_vec(rb.source_runs);
            let after = if i + 1 == n {
                next
            } else {
                runs.end_offset().unwrap_or(next)
            };
            self.push(raw, runs, records, after, true, ticket);
        }
        Ok(())
    }

    /// The target refused window entry `i` for good.
    fn rejected(
        &mut self,
        i: usize,
        e: ResponseError,
        message: Option<String>,
    ) -> Result<(), Failure> {
        // Answered: no longer on the wire, so a shutdown need not wait for it.
        self.window[i].state = BatchState::Failed;
        let o = &self.window[i];
        let first = o.runs.first_offset();
        let kind = match e {
            ResponseError::MessageTooLarge | ResponseError::RecordListTooLarge => {
                FailureKind::RecordTooLarge
            }
            ResponseError::ProducerFenced | ResponseError::InvalidProducerEpoch
                if self.transactional_id.is_some() =>
            {
                FailureKind::Fenced
            }
            _ => FailureKind::TargetRejected,
        };
        let msg = format!(
            "target partition {}-{} rejected the batch of source offsets {}..={} (from {}-{}): {e}{}",
            self.target_topic,
            self.key.partition,
            first,
            first + i64::from(o.records) - 1,
            self.key.topic,
            self.key.partition,
            message.map(|m| format!(": {m}")).unwrap_or_default()
        );
        let msg = match (&kind, &self.transactional_id) {
            // Control tells a fencing from the coordinator's timeout, and says which.
            (FailureKind::Fenced, Some(id)) => {
                format!("{msg}: the epoch of transactional id {id} is no longer current")
            }
            _ => msg,
        };
        self.fail_with(kind, msg)
    }

    /// Why the target's CORRUPT_MESSAGE for window entry `i` is final: the source's bytes do
    /// not match their CRC.
    fn corrupt_source_message(&self, i: usize) -> String {
        let o = &self.window[i];
        let first = o.runs.first_offset();
        let crc = match o.batch.verify_crc() {
            Err(BatchError::CrcMismatch {
                expected, actual, ..
            }) => format!("its stored CRC is {expected:#010x}, its bytes give {actual:#010x}"),
            _ => "its CRC does not match its bytes".to_string(),
        };
        format!(
            "source partition {}-{}: the batch of source offsets {}..={} is corrupt ({crc}): the target refused it as CORRUPT_MESSAGE; the source log holds bad data at these offsets, so the partition stops (nothing after it is copied)",
            self.key.topic,
            self.key.partition,
            first,
            first + i64::from(o.records) - 1,
        )
    }

    fn describe(&self, e: &BatchError) -> String {
        format!(
            "source partition {}-{}: {e}",
            self.key.topic, self.key.partition
        )
    }

    fn fail_with(&mut self, kind: FailureKind, message: String) -> Result<(), Failure> {
        self.fail(kind.clone(), message.clone());
        Err(Failure { kind, message })
    }

    fn fetch_error(&mut self, data: &Fetched, now: Instant) -> Result<(), Failure> {
        let err = ResponseError::try_from_code(data.error_code);
        match err {
            Some(ResponseError::OffsetOutOfRange) => {
                let msg = format!(
                    "source partition {}-{}: offset {} is out of range (log start {}, high watermark {}): the source log was truncated or deleted past strait's position",
                    self.key.topic,
                    self.key.partition,
                    self.fetch_offset,
                    data.log_start_offset,
                    data.high_watermark
                );
                self.fail_with(
                    FailureKind::PositionLost {
                        position: self.fetch_offset,
                        log_start_offset: data.log_start_offset,
                    },
                    msg,
                )
            }
            Some(e) if e.is_retriable() || crate::shard::is_routing_error(e) => {
                self.needs_source_leader = true;
                let reason = if crate::shard::is_routing_error(e) {
                    StallReason::SourceLeaderUnknown
                } else {
                    StallReason::SourceError
                };
                let detail = format!("the source leader answered the fetch with {e}");
                self.stall_source(reason, &detail, now);
                Ok(())
            }
            Some(e) => {
                let msg = format!(
                    "source partition {}-{}: fetch failed: {e}",
                    self.key.topic, self.key.partition
                );
                self.fail_with(FailureKind::Other, msg)
            }
            None => Ok(()),
        }
    }

    /// The source leader's log diverged from what strait fetched (see [`DivergingEpoch`]). When
    /// nothing from past the divergence reached the target (nothing acknowledged there, nothing
    /// in flight), the queue is dropped and fetching resumes at the last acknowledged offset, as
    /// a follower truncates: the target then matches the new source log. Otherwise the target
    /// holds records that the source no longer has, and the partition stops, naming them.
    fn diverged(&mut self, d: DivergingEpoch) -> Result<(), Failure> {
        let at = d.end_offset.clamp(0, self.fetch_offset);
        if self.acked_next <= at && self.window.is_empty() {
            self.drop_queue();
            self.fetch_offset = self.acked_next;
            self.last_fetched_epoch = -1;
            return Ok(());
        }
        let fetched_to = self.fetch_offset;
        let on_target = if self.acked_next > at {
            format!(
                "the target partition {}-{} holds source offsets {}..{} of them",
                self.target_topic,
                self.key.partition,
                at,
                self.acked_next - 1
            )
        } else {
            format!(
                "none of them acknowledged on the target partition {}-{} yet",
                self.target_topic, self.key.partition
            )
        };
        let in_flight = if self.window.is_empty() {
            ""
        } else {
            " (batches in flight may add more)"
        };
        let msg = format!(
            "source partition {}-{} diverged from what strait copied (KIP-320): its leader (epoch {}) says leader epoch {} ends at offset {}, but strait fetched up to offset {} in leader epoch {}. Source offsets {}..{} came from a log the source no longer has (an unclean leader election, or a leader that lost its log); {}{}. The partition is stopped: compare both copies, then set its position with PATCH /flows/{{flow}}/offsets to resume",
            self.key.topic,
            self.key.partition,
            self.source_leader_epoch,
            d.epoch,
            d.end_offset,
            fetched_to,
            self.last_fetched_epoch,
            at,
            fetched_to - 1,
            on_target,
            in_flight,
        );
        self.fail_with(
            FailureKind::SourceDiverged {
                diverged_at: at,
                fetched_to,
            },
            msg,
        )
    }

    /// A filtered or empty batch moves progress once everything before it is acknowledged.
    fn skip_to(&mut self, next: i64) {
        let last = if self.queue.is_empty() {
            self.window.back_mut()
        } else {
            self.queue.back_mut()
        };
        match last {
            Some(last) => last.next_after = last.next_after.max(next),
            None => self.acked_next = self.acked_next.max(next),
        }
        self.fetch_offset = self.fetch_offset.max(next);
    }

    fn push(
        &mut self,
        batch: RawBatch,
        runs: SourceRuns,
        records: i32,
        next_after: i64,
        rebuilt: bool,
        ticket: &Rc<FrameTicket>,
    ) {
        self.queued_bytes += batch.size();
        let timestamp_ms = batch_timestamp(&batch);
        self.queue.push_back(Outgoing {
            timestamp_ms,
            batch,
            runs,
            records,
            next_after,
            seq: None,
            state: BatchState::Queued,
            rebuilt,
            _ticket: ticket.clone(),
        });
    }

    /// Sets this shard's producer id and epoch for the target cluster. A new producer restarts
    /// sequence numbers at 0 (only before anything was sent with the old one). A transactional
    /// partition keeps its own producer.
    pub fn set_producer(&mut self, producer: ProducerIdentity) {
        if self.transactional_id.is_none() && self.producer != Some(producer) {
            self.restart_sequence(Some(producer));
        }
    }

    /// Forgets the producer (a new one is to be fetched), only while nothing is numbered. A
    /// transactional partition keeps its own: only control, which fences, can replace it.
    pub fn clear_producer(&mut self) {
        if self.transactional_id.is_none() {
            self.restart_sequence(None);
        }
    }

    /// Exactly-once forwarding: from now on the partition writes with `txn`'s producer,
    /// sequences from 0, inside that producer's open transaction. Only before anything was
    /// sent (at assignment).
    pub fn set_transactional(&mut self, txn: &Transactional) {
        assert!(
            self.window.is_empty(),
            "{}: a transactional producer is set before anything is numbered",
            self.key
        );
        self.transactional_id = Some(txn.transactional_id.clone());
        self.restart_sequence(Some(txn.producer));
    }

    /// The transactional id every Produce request of this partition carries, if any.
    pub fn transactional_id(&self) -> Option<&Arc<str>> {
        self.transactional_id.as_ref()
    }

    /// A commit starts: nothing new goes on the wire (a failed batch is still resent: the
    /// transaction needs it); fetching goes on.
    pub fn seal(&mut self) {
        self.sealed = true;
    }

    /// The commit is done and the next transaction is open: sending goes on, with `producer`.
    /// A new epoch (KIP-890 part 2 bumps it at every EndTxn) starts its sequences at 0; the
    /// same one continues them.
    pub fn unseal(&mut self, producer: ProducerIdentity) {
        if self.producer != Some(producer) {
            assert!(
                self.window.is_empty(),
                "{}: a new transactional epoch only once everything sent is acknowledged",
                self.key
            );
            self.restart_sequence(Some(producer));
        }
        self.sealed = false;
    }

    /// Sealed, running, and every batch sent is acknowledged: the progress now is exactly what
    /// the open transaction holds.
    pub fn is_sealed_and_settled(&self) -> bool {
        self.sealed && !matches!(self.status, Status::Failed(_)) && self.window.is_empty()
    }

    /// A new producer (or none yet) starts its sequence at 0, only while nothing is numbered.
    fn restart_sequence(&mut self, producer: Option<ProducerIdentity>) {
        if self.window.is_empty() {
            self.producer = producer;
            self.next_seq = 0;
            self.established = false;
        }
    }

    /// The producer and next sequence number this partition writes its target partition with.
    ///
    /// A partition that stopped with batches unacknowledged (failed, or a shutdown that timed
    /// out) continues from the first of them: its records are refetched from
    /// [`Partition::next_offset`] and sent again with the same sequence numbers, which the
    /// broker accepts if it never got them and recognises as duplicates if it did. Continuing
    /// after them would leave a gap the broker refuses, or copy their records twice.
    pub fn sequence_state(&self) -> Option<SequenceState> {
        let next_sequence = self
            .window
            .front()
            .and_then(|o| o.seq)
            .unwrap_or(self.next_seq);
        self.producer.map(|producer| SequenceState {
            producer,
            next_sequence,
            acknowledged: self.established,
        })
    }

    /// Continues the sequence of an earlier assignment of the same target partition in this
    /// shard: the broker remembers our producer there and expects the next number.
    pub fn resume_sequence(&mut self, state: SequenceState) {
        if self.window.is_empty() {
            self.producer = Some(state.producer);
            self.next_seq = state.next_sequence;
            self.established = state.acknowledged;
        }
    }

    /// Why no batch goes out (diagnostics).
    pub fn debug_send_state(&self) -> String {
        format!(
            "retry_at {:?}, established {}, window {:?}, queue {}",
            self.retry_at,
            self.established,
            self.window
                .iter()
                .map(|o| (o.seq, o.state))
                .collect::<Vec<_>>(),
            self.queue.len()
        )
    }

    pub fn has_producer(&self) -> bool {
        self.producer.is_some()
    }

    /// Whether [`Partition::poll_send`] would hand out a batch now.
    pub fn can_send(&self, now: Instant) -> bool {
        self.next_sendable(now).is_some()
    }

    fn next_sendable(&self, now: Instant) -> Option<Target> {
        if !matches!(
            self.status,
            Status::Running | Status::Paused | Status::Draining
        ) || self.needs_target_leader
            || self.producer.is_none()
            || self.retry_at.is_some_and(|t| now < t)
        {
            return None;
        }
        // Resend the first failed batch once no later batch awaits an answer.
        if let Some(i) = self
            .window
            .iter()
            .position(|o| o.state == BatchState::Failed)
        {
            let later_sent = self
                .window
                .iter()
                .skip(i + 1)
                .any(|o| o.state == BatchState::Sent);
            return (!later_sent).then_some(Target::Window(i));
        }
        // Every batch since the oldest unsettled one counts, acknowledged or not: the broker
        // deduplicates a resend only against its last 5 batches, so no more than 5 may follow
        // a batch whose fate is unknown.
        let unsettled = self.window.len();
        let limit = if self.established {
            self.produce.max_in_flight_per_partition.clamp(1, 5)
        } else {
            1
        };
        if unsettled >= limit {
            return None;
        }
        (self.status != Status::Draining && !self.sealed && !self.queue.is_empty())
            .then_some(Target::Queue)
    }

    /// The next batch to send, with its header rewritten for this shard's producer. Returns the
    /// sequence number that identifies it in [`Partition::handle_produced`].
    pub fn poll_send(
        &mut self,
        now: Instant,
        stats: &mut ShardStats,
    ) -> Option<(i32, PartitionBatch)> {
        self.poll_send_within(now, usize::MAX, stats)
    }

    /// [`Partition::poll_send`], merging small batches into one of at most `merge_room` bytes
    /// (what the shard's memory budget has left).
    pub fn poll_send_within(
        &mut self,
        now: Instant,
        merge_room: usize,
        stats: &mut ShardStats,
    ) -> Option<(i32, PartitionBatch)> {
        let target = self.next_sendable(now)?;
        let ProducerIdentity { id: pid, epoch } = self.producer?;
        let idx = match target {
            Target::Window(i) => i,
            Target::Queue => {
                self.coalesce_front(merge_room, stats);
                let mut o = self.queue.pop_front()?;
                o.seq = Some(self.next_seq);
                self.next_seq = increment_sequence(self.next_seq, o.records);
                self.window.push_back(o);
                self.window.len() - 1
            }
        };
        let o = &mut self.window[idx];
        o.state = BatchState::Sent;
        let seq = o.seq.expect("window entries have sequence numbers");
        let head: [u8; HEADER_LEN] = HeaderRewrite {
            producer_id: pid,
            producer_epoch: epoch,
            base_sequence: seq,
            transactional: self.transactional_id.is_some(),
        }
        .apply(&o.batch);
        let payload = o.batch.payload();
        self.check_invariants();
        Some((
            seq,
            PartitionBatch {
                partition: self.key.partition,
                head,
                payload,
            },
        ))
    }

    /// Merges the tiny batches at the front of the queue into one (see
    /// [`ProduceSettings::merge_below_bytes`]). Only called when a batch leaves the queue:
    /// batches queue up only while the window is full, so a partition that keeps up sends every
    /// batch as it came, and only one that is behind pays for decoding and re-encoding. Whatever
    /// cannot be merged (a batch of a sixteenth of `batch.size` or more, another codec, a corrupt
    /// batch, a result over the limit) goes as it is: merging never changes what is copied,
    /// only how many produce requests carry it.
    fn coalesce_front(&mut self, merge_room: usize, stats: &mut ShardStats) {
        let limit = self
            .produce
            .batch_bytes
            .min(self.max_message_bytes)
            .min(merge_room);
        let below = self.produce.merge_below_bytes();
        let Some(codec) = self.queue.front().map(|o| o.batch.compression()) else {
            return;
        };
        let mut total = 0;
        let mut n = 0;
        for o in &self.queue {
            if o.batch.size() >= below
                || total + o.batch.size() > limit
                || o.batch.compression() != codec
            {
                break;
            }
            total += o.batch.size();
            n += 1;
        }
        if n < 2 {
            return;
        }
        let inputs: Vec<&RawBatch> = self.queue.iter().take(n).map(|o| &o.batch).collect();
        let Ok(bytes) = coalesce(&inputs, DEFAULT_MAX_DECOMPRESSED_BYTES) else {
            return;
        };
        let records: i32 = self.queue.iter().take(n).map(|o| o.records).sum();
        let Ok(batch) = RawBatch::new(bytes) else {
            return;
        };
        if batch.size() > limit || batch.records_count() != records {
            return;
        }
        let mut runs: Vec<OffsetRun> = Vec::new();
        let mut next_after = self.acked_next;
        let ticket = self.queue[0]._ticket.sibling(batch.size());
        for o in self.queue.drain(..n) {
            self.queued_bytes -= o.batch.size();
            next_after = o.next_after;
            for &run in o.runs.as_slice() {
                match runs.last_mut() {
                    Some(last)
                        if last.first + i64::from(last.len) == run.first
                            && last.len.checked_add(run.len).is_some() =>
                    {
                        last.len += run.len;
                    }
                    _ => runs.push(run),
                }
            }
        }
        stats.merged_batches += n as u64;
        stats.merges += 1;
        self.queued_bytes += batch.size();
        self.queue.push_front(Outgoing {
            timestamp_ms: batch_timestamp(&batch),
            batch,
            runs: SourceRuns::from_vec(runs),
            records,
            next_after,
            seq: None,
            state: BatchState::Queued,
            rebuilt: true,
            _ticket: ticket,
        });
    }

    /// Records the target's answer for the batch with sequence `seq`.
    pub fn handle_produced(
        &mut self,
        seq: i32,
        outcome: ProduceOutcome,
        now: Instant,
        stats: &mut ShardStats,
    ) -> Result<(), Failure> {
        let Some(i) = self
            .window
            .iter()
            .position(|o| o.seq == Some(seq) && o.state == BatchState::Sent)
        else {
            return Ok(()); // stale: the partition was reset since
        };
        match outcome {
            ProduceOutcome::Appended { base_offset } => {
                self.window[i].state = BatchState::Acked { base_offset };
                self.established = true;
            }
            ProduceOutcome::Error { code, message } => {
                let err = ResponseError::try_from_code(code);
                match err {
                    None => self.window[i].state = BatchState::Acked { base_offset: -1 },
                    // The broker already has this batch: it was written by an earlier attempt.
                    Some(ResponseError::DuplicateSequenceNumber) => {
                        self.window[i].state = BatchState::Acked { base_offset: -1 };
                        self.established = true;
                    }
                    // Out of order is expected behind a batch that failed, or whose answer
                    // has not come yet (answers may be handled in another order than sent: it
                    // may be failing right now); otherwise our sequence state is broken and
                    // retrying cannot fix it.
                    Some(e @ ResponseError::OutOfOrderSequenceNumber)
                        if self
                            .window
                            .iter()
                            .take(i)
                            .any(|o| matches!(o.state, BatchState::Failed | BatchState::Sent)) =>
                    {
                        self.mark_failed(i, StallReason::TargetError, &e, now, stats);
                    }
                    // Retriable for Kafka's producer, but a forwarded batch keeps the source's
                    // CRC: if it does not match, the source log is corrupt and retrying cannot
                    // help. Checked only on refusal: the target checks every batch anyway.
                    Some(ResponseError::CorruptMessage)
                        if self.window[i].batch.verify_crc().is_err() =>
                    {
                        self.window[i].state = BatchState::Failed; // answered, as below
                        return self
                            .fail_with(FailureKind::BadSourceData, self.corrupt_source_message(i));
                    }
                    Some(e) if e.is_retriable() || crate::shard::is_routing_error(e) => {
                        let reason = if crate::shard::is_routing_error(e) {
                            self.needs_target_leader = true;
                            StallReason::TargetLeaderUnknown
                        } else if matches!(
                            e,
                            ResponseError::NotEnoughReplicas
                                | ResponseError::NotEnoughReplicasAfterAppend
                        ) {
                            StallReason::NotEnoughReplicas
                        } else {
                            StallReason::TargetError
                        };
                        self.mark_failed(i, reason, &e, now, stats);
                    }
                    Some(e) => return self.rejected(i, e, message),
                }
            }
            ProduceOutcome::Lost { reason } => {
                self.needs_target_leader = true;
                self.mark_failed(i, StallReason::TargetUnreachable, &reason, now, stats);
            }
        }
        self.settle(now, stats);
        self.check_invariants();
        self.check_delivery_timeout(now)
    }

    /// A retriable failure of the batch at window index `i`: it is resent with the same
    /// sequence number after the partition's retry backoff. Failures of several batches at
    /// once (a lost connection) are one retry, so they back off once.
    fn mark_failed(
        &mut self,
        i: usize,
        reason: StallReason,
        error: &dyn std::fmt::Display,
        now: Instant,
        stats: &mut ShardStats,
    ) {
        self.window[i].state = BatchState::Failed;
        stats.produce_retries += 1;
        self.stall_target(reason, &error.to_string(), now);
        if self.retry_at.is_none_or(|t| t <= now) {
            self.retry_at = Some(now + self.retry_backoff.fail(&mut self.jitter));
        }
    }

    /// Stops the partition when it has not been able to deliver for `delivery.timeout.ms`,
    /// whether its batches failed retriably or never left for want of a target.
    pub fn check_delivery_timeout(&mut self, now: Instant) -> Result<(), Failure> {
        if let Some(stall) = &self.target_stall
            && now.saturating_duration_since(stall.since)
                > Duration::from_millis(self.produce.delivery_timeout_ms)
        {
            let msg = format!(
                "target partition {}-{}: nothing delivered for more than delivery.timeout.ms={} ms ({}: {})",
                self.target_topic,
                self.key.partition,
                self.produce.delivery_timeout_ms,
                stall.reason,
                stall.detail
            );
            return self.fail_with(FailureKind::DeliveryTimeout, msg);
        }
        Ok(())
    }

    /// When [`Partition::check_delivery_timeout`] fails the partition unless it delivers
    /// first: while its delivery is stalled.
    pub fn delivery_deadline(&self) -> Option<Instant> {
        self.target_stall
            .as_ref()
            .map(|s| s.since + Duration::from_millis(self.produce.delivery_timeout_ms))
    }

    /// When a failed batch may be sent again ([`Partition::can_send`] is false until then).
    pub fn retry_at(&self) -> Option<Instant> {
        self.retry_at
    }

    /// Whether fetched batches wait for the target (queued or in the window).
    pub fn has_undelivered(&self) -> bool {
        !self.window.is_empty() || !self.queue.is_empty()
    }

    /// Delivery is stuck for `reason`. The first call of an incident sets `since`; later ones
    /// update the reason and detail. Only a partition with batches to deliver can stall on the
    /// target side.
    pub fn stall_target(&mut self, reason: StallReason, detail: &str, now: Instant) {
        if self.has_undelivered() {
            set_stall(&mut self.target_stall, reason, detail, now);
        }
    }

    /// Fetching is stuck for `reason` (cleared by the next fetch answered for this partition).
    pub fn stall_source(&mut self, reason: StallReason, detail: &str, now: Instant) {
        if matches!(self.status, Status::Running | Status::Paused) {
            set_stall(&mut self.source_stall, reason, detail, now);
        }
    }

    /// Clears a source stall of `reason` (e.g. the memory it waited for is free again).
    pub fn clear_source_stall(&mut self, reason: StallReason) {
        if self
            .source_stall
            .as_ref()
            .is_some_and(|s| s.reason == reason)
        {
            self.source_stall = None;
        }
    }

    /// The stall to report: delivery first (fetched data is waiting), then fetching. None
    /// while paused, failed or draining.
    pub fn stall(&self) -> Option<&Stall> {
        if self.status != Status::Running {
            return None;
        }
        self.target_stall.as_ref().or(self.source_stall.as_ref())
    }

    /// Moves the acknowledged prefix of the window out: progress and mapping segments.
    fn settle(&mut self, now: Instant, stats: &mut ShardStats) {
        let mut acked_any = false;
        while let Some(BatchState::Acked { base_offset }) = self.window.front().map(|o| o.state) {
            let o = self.window.pop_front().expect("front exists");
            self.queued_bytes -= o.batch.size();
            stats.produced_batches += 1;
            stats.produced_records += o.records as u64;
            stats.produced_bytes += o.batch.size() as u64;
            self.bytes_acked += o.batch.size() as u64;
            self.time_records(o.timestamp_ms, o.records, now, stats, true);
            // A batch acknowledged without its offset (a duplicate the broker recognised)
            // leaves the target position unknown until the next batch's answer.
            self.target_next = if base_offset >= 0 {
                base_offset + i64::from(o.records)
            } else {
                -1
            };
            if base_offset >= 0 {
                let mut downstream = base_offset;
                for run in o.runs.as_slice() {
                    self.add_mapping(MappingSegment {
                        upstream: run.first,
                        downstream,
                        count: run.len,
                    });
                    downstream += i64::from(run.len);
                }
            }
            self.acked_next = self.acked_next.max(o.next_after);
            let _ = o.rebuilt;
            acked_any = true;
        }
        if acked_any {
            self.retry_backoff.reset();
        }
        if !self.window.iter().any(|o| o.state == BatchState::Failed) {
            self.target_stall = None;
            self.retry_at = None;
        }
    }

    /// The invariants of the queues, checked in debug builds after every change: the queued
    /// bytes are the sum of the batches held, the window holds at most the in-flight limit, its
    /// sequence numbers follow each other without a gap and end at `next_seq`, and only the
    /// queue holds batches without one.
    fn check_invariants(&self) {
        if !cfg!(debug_assertions) {
            return;
        }
        let held: usize = self
            .window
            .iter()
            .chain(self.queue.iter())
            .map(|o| o.batch.size())
            .sum();
        debug_assert_eq!(held, self.queued_bytes, "{}: queued bytes", self.key);
        debug_assert!(self.window.len() <= 5, "{}: window over 5", self.key);
        let mut expect = self.window.front().and_then(|o| o.seq);
        for o in &self.window {
            debug_assert!(
                o.state != BatchState::Queued,
                "{}: queued in window",
                self.key
            );
            debug_assert_eq!(o.seq, expect, "{}: sequence gap in the window", self.key);
            expect = o.seq.map(|s| increment_sequence(s, o.records));
        }
        if let Some(next) = expect {
            debug_assert_eq!(next, self.next_seq, "{}: next sequence", self.key);
        }
        debug_assert!(
            self.queue
                .iter()
                .all(|o| o.seq.is_none() && o.state == BatchState::Queued),
            "{}: sequence numbers in the queue",
            self.key
        );
    }

    fn add_mapping(&mut self, seg: MappingSegment) {
        if let Some(last) = self.mappings.last_mut()
            && last.upstream + i64::from(last.count) == seg.upstream
            && last.downstream + i64::from(last.count) == seg.downstream
            && let Some(count) = last.count.checked_add(seg.count)
        {
            last.count = count;
            return;
        }
        self.mappings.push(seg);
    }

    /// New mapping segments since the last call.
    pub fn take_mappings(&mut self) -> Vec<MappingSegment> {
        std::mem::take(&mut self.mappings)
    }

    /// Puts back segments a full channel refused, ahead of newer ones.
    pub fn restore_mappings(&mut self, mut older: Vec<MappingSegment>) {
        older.append(&mut self.mappings);
        self.mappings = older;
    }

    pub fn progress(&self) -> PartitionProgress {
        PartitionProgress {
            key: self.key.clone(),
            next_offset: self.acked_next,
            target_next_offset: self.target_next,
            fetch_offset: self.fetch_offset,
            last_fetched_epoch: self.last_fetched_epoch,
            end_offset: self.end_offset,
            log_start_offset: self.log_start_offset,
            queued_batches: self.window.len() + self.queue.len(),
            paused: self.status == Status::Paused,
            stall: self.stall().cloned(),
            bytes_copied: self.bytes_acked,
            paths: self.paths,
            oldest_unacked_timestamp_ms: self
                .window
                .front()
                .or(self.queue.front())
                .map_or(-1, |o| o.timestamp_ms),
            seek_generation: self.seek_generation,
        }
    }
}

fn set_stall(slot: &mut Option<Stall>, reason: StallReason, detail: &str, now: Instant) {
    match slot {
        Some(s) => {
            s.reason = reason;
            if *s.detail != *detail {
                s.detail = Arc::from(detail);
            }
        }
        None => {
            *slot = Some(Stall {
                reason,
                since: now,
                detail: Arc::from(detail),
            });
        }
    }
}

/// A fixed seed per partition for its retry jitter, so that runs replay.
fn seed_of(key: &PartitionKey) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ u64::from(key.flow);
    for b in key.topic.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h ^ (key.partition as u64)
}

#[derive(Debug, Clone, Copy)]
enum Target {
    Window(usize),
    Queue,
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    fn now0() -> Instant {
        Instant::now()
    }
    use crate::batch::{BatchBuilder, Compression, Record, decode_records};
    use bytes::BytesMut;

    fn batch(base: i64, n: usize, codec: Compression) -> Bytes {
        let records: Vec<Record> = (0..n)
            .map(|i| {
                Record::new(
                    1_000 + i as i64,
                    Some(Bytes::from(format!("k{i}"))),
                    Some(Bytes::from(format!("v{}", base + i as i64))),
                )
            })
            .collect();
        BatchBuilder::new(codec)
            .base_offset(base)
            .push_all(&records)
            .unwrap()
            .build()
            .unwrap()
    }

    fn set(batches: &[Bytes]) -> Bytes {
        let mut b = BytesMut::new();
        for x in batches {
            b.extend_from_slice(x);
        }
        b.freeze()
    }

    fn part(start: i64) -> Partition {
        let mut p = Partition::new(
            PartitionKey::new(0, "src", 0),
            Arc::from("A.src"),
            start,
            1_048_588,
            FetchSettings::default(),
            // Batch by batch; merging has its own tests.
            ProduceSettings {
                batch_bytes: 0,
                ..ProduceSettings::default()
            },
        );
        p.needs_source_leader = false;
        p.needs_target_leader = false;
        p.set_producer(ProducerIdentity { id: 7, epoch: 0 });
        p.established = true;
        p
    }

    fn fetched(records: Bytes, hw: i64) -> Fetched {
        Fetched {
            high_watermark: hw,
            last_stable_offset: hw,
            records: Some(records),
            ..Fetched::default()
        }
    }

    fn ticket() -> (Rc<Cell<usize>>, Rc<FrameTicket>) {
        let budget = Rc::new(Cell::new(0));
        let t = FrameTicket::new(1000, &budget);
        (budget, t)
    }

    #[test]
    fn nothing_new_in_a_session_is_an_empty_slice() {
        const MIB: usize = 1 << 20;
        let mut p = part(0);
        let mut st = ShardStats::default();
        let (_budget, t) = ticket();
        p.fetch_size = FetchSize::new(MIB, 16 * MIB);
        for _ in 0..3 {
            p.fetch_size.observe(MIB * 16, false);
        }
        assert_eq!(p.fetch_bytes(), 8 * MIB);
        // Caught up at 3, and a stall reported meanwhile.
        p.fetch_started();
        p.handle_fetch(
            fetched(batch(0, 3, Compression::None), 3),
            &t,
            now0(),
            &mut st,
        )
        .unwrap();
        assert!(p.caught_up());
        assert_eq!(p.fetch_bytes(), 4 * MIB);
        p.stall_source(StallReason::SourceUnreachable, "silent", now0());
        // Answered without it: the stall ends and the ask shrinks as with an empty slice.
        p.fetch_started();
        p.fetched_nothing_new();
        assert!(p.stall().is_none());
        assert_eq!(p.fetch_bytes(), 2 * MIB);
        // An answer to a fetch it is no longer in (a seek since) says nothing of it.
        p.stall_source(StallReason::SourceUnreachable, "silent", now0());
        p.fetched_nothing_new();
        assert!(p.stall().is_some());
        assert_eq!(p.fetch_bytes(), 2 * MIB);
    }

    #[test]
    fn small_batches_queued_together_go_as_one_and_map_exactly() {
        let mut p = part(0);
        p.produce.batch_bytes = 16 * 1024;
        let mut st = ShardStats::default();
        let (budget, t) = ticket();
        // Three small batches, a transaction marker (a gap of one offset), two more, then one of
        // another codec and a corrupt one: the first five merge, the others go as they are.
        let mut corrupt = batch(9, 2, Compression::None).to_vec();
        let last = corrupt.len() - 1;
        corrupt[last] ^= 0xff;
        let rs = set(&[
            batch(0, 1, Compression::None),
            batch(1, 3, Compression::None),
            batch(4, 1, Compression::None),
            crate::batch::end_txn_marker(crate::batch::ControlType::Commit, 5, -1, -1, 0),
            batch(6, 2, Compression::None),
            batch(8, 1, Compression::Lz4),
            Bytes::from(corrupt),
        ]);
        p.fetch_started();
        p.handle_fetch(fetched(rs, 11), &t, now0(), &mut st)
            .unwrap();
        drop(t);
        let now = Instant::now();
        let (s0, b0) = p.poll_send(now, &mut st).unwrap();
        assert_eq!((st.merges, st.merged_batches), (1, 4));
        let mut whole = b0.head.to_vec();
        whole.extend_from_slice(&b0.payload);
        let merged = RawBatch::new(Bytes::from(whole)).unwrap();
        merged.verify_crc().unwrap();
        assert_eq!((merged.producer_id(), merged.base_sequence()), (7, 0));
        let values: Vec<_> = decode_records(&merged, usize::MAX)
            .unwrap()
            .into_iter()
            .map(|r| r.value.unwrap())
            .collect();
        let want: Vec<_> = [0, 1, 2, 3, 4, 6, 7]
            .iter()
            .map(|i| Bytes::from(format!("v{i}")))
            .collect();
        assert_eq!(values, want);
        // The merged batch holds its own share of the budget (the frame's stays while other
        // batches cut from it are queued).
        assert_eq!(budget.get(), 1000 + merged.size());
        let (s1, b1) = p.poll_send(now, &mut st).unwrap();
        let (s2, _) = p.poll_send(now, &mut st).unwrap();
        assert_eq!((s1, s2), (7, 8));
        assert_eq!(
            b1.head.len() + b1.payload.len(),
            batch(8, 1, Compression::Lz4).len()
        );
        assert_eq!(
            st.merges, 1,
            "a corrupt batch is never merged (its CRC would be laundered)"
        );
        for (seq, base) in [(s0, 100), (s1, 107), (s2, 108)] {
            p.handle_produced(
                seq,
                ProduceOutcome::Appended { base_offset: base },
                now,
                &mut st,
            )
            .unwrap();
        }
        assert_eq!(p.next_offset(), 11);
        let segs: Vec<_> = p
            .take_mappings()
            .into_iter()
            .map(|m| (m.upstream, m.downstream, m.count))
            .collect();
        assert_eq!(segs, vec![(0, 100, 5), (6, 105, 5)]);
    }

    #[test]
    fn only_batches_under_a_sixteenth_of_batch_size_are_merged() {
        let one = batch(0, 1, Compression::None).len();
        for (batch_bytes, merges) in [(16 * one, 0), (16 * (one + 1), 1)] {
            let mut p = part(0);
            p.produce.batch_bytes = batch_bytes;
            let mut st = ShardStats::default();
            let (_budget, t) = ticket();
            let rs = set(&[
                batch(0, 1, Compression::None),
                batch(1, 1, Compression::None),
                batch(2, 1, Compression::None),
            ]);
            p.fetch_started();
            p.handle_fetch(fetched(rs, 3), &t, now0(), &mut st).unwrap();
            let (_, b0) = p.poll_send(Instant::now(), &mut st).unwrap();
            assert_eq!(
                st.merges, merges,
                "batch.size {batch_bytes}, batches of {one}"
            );
            let sent = b0.head.len() + b0.payload.len();
            assert_eq!(
                sent == one,
                merges == 0,
                "batch.size {batch_bytes}: sent {sent}"
            );
        }
    }

    #[test]
    fn batches_are_merged_only_within_the_room_the_budget_has_left() {
        let mut p = part(0);
        p.produce.batch_bytes = 16 * 1024;
        let mut st = ShardStats::default();
        let (budget, t) = ticket();
        let parts = [
            batch(0, 1, Compression::None),
            batch(1, 1, Compression::None),
        ];
        let rs = set(&parts);
        p.fetch_started();
        p.handle_fetch(fetched(rs, 2), &t, now0(), &mut st).unwrap();
        let now = Instant::now();
        // No room: the first batch goes alone, and no new memory is taken.
        let (s0, b0) = p.poll_send_within(now, 0, &mut st).unwrap();
        assert_eq!(st.merges, 0);
        assert_eq!(b0.head.len() + b0.payload.len(), parts[0].len());
        assert_eq!(budget.get(), 1000);
        p.handle_produced(
            s0,
            ProduceOutcome::Appended { base_offset: 0 },
            now,
            &mut st,
        )
        .unwrap();
        let (s1, _) = p.poll_send_within(now, 0, &mut st).unwrap();
        assert_eq!((s0, s1, st.merges), (0, 1, 0));
    }

    #[test]
    fn a_partition_that_keeps_up_forwards_batches_as_they_are() {
        let mut p = part(0);
        p.produce.batch_bytes = 16 * 1024;
        let mut st = ShardStats::default();
        let (_budget, t) = ticket();
        let now = Instant::now();
        for base in 0..3 {
            p.fetch_started();
            p.handle_fetch(
                fetched(batch(base, 1, Compression::None), base + 1),
                &t,
                now,
                &mut st,
            )
            .unwrap();
            let (seq, _) = p.poll_send(now, &mut st).unwrap();
            p.handle_produced(
                seq,
                ProduceOutcome::Appended { base_offset: base },
                now,
                &mut st,
            )
            .unwrap();
        }
        assert_eq!((st.merges, st.fast_batches), (0, 3));
    }

    #[test]
    fn progress_before_the_first_acknowledgement_reports_the_start_target_offset() {
        let mut p = part(0);
        assert_eq!(p.progress().target_next_offset, -1, "unknown by default");
        p.set_target_next_offset(40);
        let mut st = ShardStats::default();
        let (_budget, t) = ticket();
        let now = Instant::now();
        p.fetch_started();
        p.handle_fetch(fetched(batch(0, 2, Compression::None), 2), &t, now, &mut st)
            .unwrap();
        let (seq, _) = p.poll_send(now, &mut st).unwrap();
        // Sent, not acknowledged: stored progress (offset 0) still maps to target offset 40.
        assert_eq!((p.next_offset(), p.progress().target_next_offset), (0, 40));
        p.handle_produced(
            seq,
            ProduceOutcome::Appended { base_offset: 40 },
            now,
            &mut st,
        )
        .unwrap();
        assert_eq!((p.next_offset(), p.progress().target_next_offset), (2, 42));
    }

    #[test]
    fn fast_path_forwards_payload_by_reference_and_maps_exactly() {
        let mut p = part(0);
        let mut st = ShardStats::default();
        let (budget, t) = ticket();
        let rs = set(&[
            batch(0, 3, Compression::None),
            batch(3, 2, Compression::Lz4),
        ]);
        p.fetch_started();
        p.handle_fetch(fetched(rs.clone(), 5), &t, now0(), &mut st)
            .unwrap();
        drop(t);
        assert_eq!(st.fast_batches, 2);
        let now = Instant::now();
        let (s0, b0) = p.poll_send(now, &mut st).unwrap();
        let (s1, b1) = p.poll_send(now, &mut st).unwrap();
        assert_eq!((s0, s1), (0, 3));
        // Zero copy: the payload points into the fetched record set.
        let rs_range = rs.as_ptr() as usize..rs.as_ptr() as usize + rs.len();
        assert!(rs_range.contains(&(b0.payload.as_ptr() as usize)));
        // Rewritten header: base offset 0, our producer, valid CRC.
        let mut whole = b1.head.to_vec();
        whole.extend_from_slice(&b1.payload);
        let rb = RawBatch::new(Bytes::from(whole)).unwrap();
        assert_eq!(
            (rb.base_offset(), rb.producer_id(), rb.base_sequence()),
            (0, 7, 3)
        );
        rb.verify_crc().unwrap();
        assert_eq!(decode_records(&rb, 1 << 20).unwrap().len(), 2);

        p.handle_produced(
            s1,
            ProduceOutcome::Appended { base_offset: 103 },
            now,
            &mut st,
        )
        .unwrap();
        assert_eq!(p.next_offset(), 0, "progress waits for the earlier batch");
        p.handle_produced(
            s0,
            ProduceOutcome::Appended { base_offset: 100 },
            now,
            &mut st,
        )
        .unwrap();
        assert_eq!(p.next_offset(), 5);
        assert_eq!(p.progress().target_next_offset, 105);
        assert_eq!(
            p.take_mappings(),
            vec![MappingSegment {
                upstream: 0,
                downstream: 100,
                count: 5
            }]
        );
        assert_eq!(p.queued_bytes(), 0);
        assert_eq!(budget.get(), 0, "frame memory released once acknowledged");
    }

    /// Exactly-once: the partition's own producer and the transactional bit on every batch;
    /// sealed, nothing new goes out and it is settled once the batch on the wire is answered;
    /// a fenced producer stops the partition as `Fenced`.
    #[test]
    fn a_transactional_partition_writes_its_own_producer_and_seals() {
        let mut p = Partition::new(
            PartitionKey::new(0, "src", 0),
            Arc::from("A.src"),
            0,
            1_048_588,
            FetchSettings::default(),
            ProduceSettings {
                batch_bytes: 0,
                ..ProduceSettings::default()
            },
        );
        p.needs_source_leader = false;
        p.needs_target_leader = false;
        p.set_transactional(&Transactional {
            transactional_id: Arc::from("strait-eos:A->B:src:0"),
            producer: ProducerIdentity { id: 40, epoch: 3 },
        });
        // The shard's idempotent producer does not replace it.
        p.set_producer(ProducerIdentity { id: 7, epoch: 0 });
        p.clear_producer();
        let mut st = ShardStats::default();
        let (_budget, t) = ticket();
        let rs = set(&[
            batch(0, 3, Compression::None),
            batch(3, 2, Compression::None),
        ]);
        p.fetch_started();
        p.handle_fetch(fetched(rs, 5), &t, now0(), &mut st).unwrap();
        let now = Instant::now();
        let (s0, b0) = p.poll_send(now, &mut st).unwrap();
        let mut whole = b0.head.to_vec();
        whole.extend_from_slice(&b0.payload);
        let rb = RawBatch::new(Bytes::from(whole)).unwrap();
        assert_eq!(
            (rb.producer_id(), rb.producer_epoch(), rb.base_sequence()),
            (40, 3, 0)
        );
        assert!(rb.is_transactional());
        rb.verify_crc().unwrap();

        p.seal();
        assert!(!p.can_send(now), "sealed: the second batch waits");
        assert!(!p.is_sealed_and_settled(), "the first batch is unanswered");
        p.handle_produced(
            s0,
            ProduceOutcome::Appended { base_offset: 0 },
            now,
            &mut st,
        )
        .unwrap();
        assert!(p.is_sealed_and_settled());
        assert_eq!(p.progress().next_offset, 3);
        // The next transaction under a new epoch (KIP-890 part 2): sequences from 0 again.
        p.unseal(ProducerIdentity { id: 40, epoch: 4 });
        let (s1, b1) = p.poll_send(now, &mut st).unwrap();
        assert_eq!(s1, 0, "the new epoch's first sequence");
        let mut whole = b1.head.to_vec();
        whole.extend_from_slice(&b1.payload);
        let rb = RawBatch::new(Bytes::from(whole)).unwrap();
        assert_eq!(
            (rb.producer_id(), rb.producer_epoch(), rb.base_sequence()),
            (40, 4, 0)
        );
        rb.verify_crc().unwrap();
        let fenced = p
            .handle_produced(
                s1,
                ProduceOutcome::Error {
                    code: ResponseError::ProducerFenced.code(),
                    message: None,
                },
                now,
                &mut st,
            )
            .unwrap_err();
        assert_eq!(fenced.kind, FailureKind::Fenced);
        assert!(
            fenced.message.contains(
                ": the epoch of transactional id strait-eos:A->B:src:0 is no longer current"
            ),
            "{}",
            fenced.message
        );
    }

    /// The target answers CORRUPT_MESSAGE: retried when our bytes are sound (the fault was on
    /// the way), the partition stopped at once, naming the offsets, when the source's CRC does
    /// not match.
    #[test]
    fn corrupt_message_stops_only_a_batch_whose_crc_is_wrong() {
        for corrupt in [false, true] {
            let mut p = part(0);
            let mut st = ShardStats::default();
            let (_b, t) = ticket();
            let mut bytes = batch(0, 3, Compression::None).to_vec();
            if corrupt {
                let last = bytes.len() - 1;
                bytes[last] ^= 0x40;
            }
            p.fetch_started();
            p.handle_fetch(fetched(Bytes::from(bytes), 3), &t, now0(), &mut st)
                .unwrap();
            assert_eq!(
                st.fast_batches, 1,
                "forwarded as is: the payload is not read"
            );
            let now = Instant::now();
            let (seq, _) = p.poll_send(now, &mut st).unwrap();
            let refused = ProduceOutcome::Error {
                code: ResponseError::CorruptMessage.code(),
                message: None,
            };
            let got = p.handle_produced(seq, refused, now, &mut st);
            if corrupt {
                let f = got.expect_err("a corrupt source batch cannot be retried into shape");
                assert_eq!(f.kind, FailureKind::BadSourceData);
                assert!(
                    f.message.contains("src-0") && f.message.contains("offsets 0..=2"),
                    "{}",
                    f.message
                );
            } else {
                got.expect("a sound batch is retried");
                assert_eq!(p.status(), &Status::Running, "still replicating");
            }
        }
    }

    #[test]
    fn records_are_timed_when_fetched_and_when_acknowledged() {
        let mut p = part(0);
        let t0 = now0();
        // Record timestamps are 1 000 + i ms: the wall clock reads 1 500 ms at t0.
        p.set_wall_clock(WallClock {
            at: t0,
            epoch_ms: 1_500,
        });
        let mut st = ShardStats::default();
        let (_b, t) = ticket();
        let rs = set(&[
            batch(0, 3, Compression::None),
            batch(3, 2, Compression::None),
        ]);
        p.fetch_started();
        p.handle_fetch(fetched(rs, 5), &t, t0, &mut st).unwrap();
        let age = &st.timings[0].record_age;
        // Each batch counts its records at the age of its first record (500 ms).
        assert_eq!((age.count(), age.sum_ms), (5, 5 * 500));
        assert_eq!(p.progress().oldest_unacked_timestamp_ms, 1_000);
        let (s0, b0) = p.poll_send(t0, &mut st).unwrap();
        let (s1, b1) = p.poll_send(t0, &mut st).unwrap();
        let size = (b0.head.len() + b0.payload.len() + b1.head.len() + b1.payload.len()) as u64;
        let acked = t0 + Duration::from_millis(1_000);
        for (seq, base) in [(s0, 100), (s1, 103)] {
            p.handle_produced(
                seq,
                ProduceOutcome::Appended { base_offset: base },
                acked,
                &mut st,
            )
            .unwrap();
        }
        let latency = &st.timings[0].replication_latency;
        assert_eq!((latency.count(), latency.sum_ms), (5, 5 * 1_500));
        assert_eq!(st.timings.len(), 1, "one entry per flow");
        let pr = p.progress();
        assert_eq!(pr.oldest_unacked_timestamp_ms, -1, "nothing waits");
        assert_eq!(pr.bytes_copied, size);
    }

    #[test]
    fn resume_inside_a_batch_takes_the_slow_path_and_keeps_offsets_exact() {
        let mut p = part(2);
        let mut st = ShardStats::default();
        let (_b, t) = ticket();
        p.fetch_started();
        p.handle_fetch(
            fetched(set(&[batch(0, 5, Compression::Zstd)]), 5),
            &t,
            now0(),
            &mut st,
        )
        .unwrap();
        assert_eq!(st.slow_batches, 1);
        let now = Instant::now();
        let (seq, b) = p.poll_send(now, &mut st).unwrap();
        let mut whole = b.head.to_vec();
        whole.extend_from_slice(&b.payload);
        let rb = RawBatch::new(Bytes::from(whole)).unwrap();
        let recs = decode_records(&rb, 1 << 20).unwrap();
        let values: Vec<_> = recs.iter().map(|r| r.value.clone().unwrap()).collect();
        assert_eq!(
            values,
            vec![Bytes::from("v2"), Bytes::from("v3"), Bytes::from("v4")]
        );
        p.handle_produced(
            seq,
            ProduceOutcome::Appended { base_offset: 40 },
            now,
            &mut st,
        )
        .unwrap();
        assert_eq!(p.next_offset(), 5);
        assert_eq!(
            p.take_mappings(),
            vec![MappingSegment {
                upstream: 2,
                downstream: 40,
                count: 3
            }]
        );
    }

    #[test]
    fn retriable_failure_resends_with_the_same_sequence_in_order() {
        let mut p = part(0);
        let mut st = ShardStats::default();
        let (_b, t) = ticket();
        let rs = set(&[
            batch(0, 1, Compression::None),
            batch(1, 1, Compression::None),
            batch(2, 1, Compression::None),
        ]);
        p.fetch_started();
        p.handle_fetch(fetched(rs, 3), &t, now0(), &mut st).unwrap();
        let now = Instant::now();
        let sent: Vec<i32> = (0..3)
            .map(|_| p.poll_send(now, &mut st).unwrap().0)
            .collect();
        assert_eq!(sent, vec![0, 1, 2]);
        // The leader moved: the first fails, the rest fail out of order behind it.
        p.handle_produced(
            0,
            ProduceOutcome::Error {
                code: 6,
                message: None,
            },
            now,
            &mut st,
        )
        .unwrap();
        assert!(p.needs_target_leader);
        p.needs_target_leader = false;
        assert!(
            p.poll_send(now, &mut st).is_none(),
            "waits for the later batches' answers"
        );
        p.handle_produced(
            1,
            ProduceOutcome::Error {
                code: 45,
                message: None,
            },
            now,
            &mut st,
        )
        .unwrap();
        p.handle_produced(
            2,
            ProduceOutcome::Error {
                code: 45,
                message: None,
            },
            now,
            &mut st,
        )
        .unwrap();
        assert!(p.poll_send(now, &mut st).is_none(), "backs off first");
        let later = now + Duration::from_secs(1);
        let resent: Vec<i32> = (0..3)
            .map(|_| p.poll_send(later, &mut st).unwrap().0)
            .collect();
        assert_eq!(resent, vec![0, 1, 2]);
        for s in resent {
            p.handle_produced(
                s,
                ProduceOutcome::Appended {
                    base_offset: 10 + i64::from(s),
                },
                later,
                &mut st,
            )
            .unwrap();
        }
        assert_eq!(p.next_offset(), 3);
        assert_eq!(st.produce_retries, 3);
    }

    #[test]
    fn a_batch_acked_behind_a_failed_one_counts_once_the_gap_closes() {
        let mut p = part(0);
        let mut st = ShardStats::default();
        let (_b, t) = ticket();
        p.fetch_started();
        p.handle_fetch(
            fetched(
                set(&[
                    batch(0, 2, Compression::None),
                    batch(2, 2, Compression::None),
                ]),
                4,
            ),
            &t,
            now0(),
            &mut st,
        )
        .unwrap();
        let now = Instant::now();
        let (a, _) = p.poll_send(now, &mut st).unwrap();
        let (b, _) = p.poll_send(now, &mut st).unwrap();
        // A timed-out acks=all write that did land, then the next one succeeded.
        p.handle_produced(
            a,
            ProduceOutcome::Lost {
                reason: "timeout".into(),
            },
            now,
            &mut st,
        )
        .unwrap();
        p.handle_produced(
            b,
            ProduceOutcome::Appended { base_offset: 52 },
            now,
            &mut st,
        )
        .unwrap();
        assert_eq!(p.next_offset(), 0);
        p.needs_target_leader = false;
        let later = now + Duration::from_secs(1);
        let (again, _) = p.poll_send(later, &mut st).unwrap();
        assert_eq!(again, a);
        // The broker recognises the duplicate.
        p.handle_produced(
            a,
            ProduceOutcome::Error {
                code: 46,
                message: None,
            },
            later,
            &mut st,
        )
        .unwrap();
        assert_eq!(p.next_offset(), 4);
        assert_eq!(p.progress().target_next_offset, 54);
        assert_eq!(
            p.take_mappings(),
            vec![MappingSegment {
                upstream: 2,
                downstream: 52,
                count: 2
            }]
        );
    }

    #[test]
    fn a_new_assignment_continues_the_target_sequence() {
        let mut p = part(0);
        let mut st = ShardStats::default();
        let (_b, t) = ticket();
        p.fetch_started();
        p.handle_fetch(
            fetched(set(&[batch(0, 3, Compression::None)]), 3),
            &t,
            now0(),
            &mut st,
        )
        .unwrap();
        let now = Instant::now();
        let (seq, _) = p.poll_send(now, &mut st).unwrap();
        p.handle_produced(
            seq,
            ProduceOutcome::Appended { base_offset: 0 },
            now,
            &mut st,
        )
        .unwrap();
        let state = SequenceState {
            producer: ProducerIdentity { id: 7, epoch: 0 },
            next_sequence: 3,
            acknowledged: true,
        };
        assert_eq!(p.sequence_state(), Some(state));

        let mut again = part(3);
        again.established = false;
        again.resume_sequence(state);
        again.fetch_started();
        again
            .handle_fetch(
                fetched(set(&[batch(3, 2, Compression::None)]), 5),
                &t,
                now0(),
                &mut st,
            )
            .unwrap();
        assert_eq!(again.poll_send(now, &mut st).unwrap().0, 3);
    }

    #[test]
    fn in_flight_window_is_bounded() {
        let mut p = part(0);
        p.produce.max_in_flight_per_partition = 2;
        let mut st = ShardStats::default();
        let (_b, t) = ticket();
        let rs = set(&(0..4)
            .map(|i| batch(i, 1, Compression::None))
            .collect::<Vec<_>>());
        p.fetch_started();
        p.handle_fetch(fetched(rs, 4), &t, now0(), &mut st).unwrap();
        let now = Instant::now();
        assert!(p.poll_send(now, &mut st).is_some());
        assert!(p.poll_send(now, &mut st).is_some());
        assert!(p.poll_send(now, &mut st).is_none());
        p.handle_produced(0, ProduceOutcome::Appended { base_offset: 0 }, now, &mut st)
            .unwrap();
        assert!(p.poll_send(now, &mut st).is_some());
    }

    #[test]
    fn caught_up_and_backlogged_follow_the_fetched_end_and_the_queue() {
        let mut p = part(0);
        let mut st = ShardStats::default();
        let (_b, t) = ticket();
        assert!(
            !p.caught_up(),
            "the end of the log is unknown before the first fetch"
        );
        let rs = set(&(0..4)
            .map(|i| batch(i, 1, Compression::None))
            .collect::<Vec<_>>());
        p.fetch_started();
        p.handle_fetch(fetched(rs, 10), &t, now0(), &mut st)
            .unwrap();
        assert!(!p.caught_up(), "records 4..10 are still to fetch");
        let queued = p.queued_bytes();
        assert!(queued > 0);
        assert!(p.backlogged(queued) && !p.wants_fetch(queued));
        assert!(!p.backlogged(queued + 1) && p.wants_fetch(queued + 1));
        let rs = set(&(4..10)
            .map(|i| batch(i, 1, Compression::None))
            .collect::<Vec<_>>());
        p.fetch_started();
        p.handle_fetch(fetched(rs, 10), &t, now0(), &mut st)
            .unwrap();
        assert!(p.caught_up());
        p.pause();
        assert!(
            !p.backlogged(1),
            "a paused partition is not waiting on the target"
        );
    }

    #[test]
    fn control_and_aborted_batches_are_dropped_and_progress_moves_past_them() {
        let mut p = part(0);
        let mut st = ShardStats::default();
        let (_b, t) = ticket();
        let aborted = BatchBuilder::new(Compression::None)
            .base_offset(0)
            .producer(99, 0, 0)
            .transactional(true)
            .push_all(&[Record::new(1, None, Some(Bytes::from("x")))])
            .unwrap()
            .build()
            .unwrap();
        let marker = crate::batch::end_txn_marker(crate::batch::ControlType::Abort, 1, 99, 0, 5);
        let data = Fetched {
            high_watermark: 2,
            last_stable_offset: 2,
            aborted: vec![(99, 0)],
            records: Some(set(&[aborted, marker])),
            ..Fetched::default()
        };
        p.fetch_started();
        p.handle_fetch(data, &t, now0(), &mut st).unwrap();
        assert_eq!((st.dropped_aborted, st.dropped_control), (1, 1));
        assert!(p.poll_send(Instant::now(), &mut st).is_none());
        assert_eq!(p.next_offset(), 2);
        assert_eq!(p.fetch_offset(), 2);
    }

    #[test]
    fn a_record_too_large_for_the_target_stops_only_this_partition() {
        let mut p = part(0);
        p.set_max_message_bytes(100);
        let mut st = ShardStats::default();
        let (_b, t) = ticket();
        let big = BatchBuilder::new(Compression::None)
            .push_all(&[Record::new(1, None, Some(Bytes::from(vec![b'x'; 500])))])
            .unwrap()
            .build()
            .unwrap();
        p.fetch_started();
        let err = p
            .handle_fetch(fetched(big, 1), &t, now0(), &mut st)
            .unwrap_err();
        assert_eq!(err.kind, FailureKind::RecordTooLarge);
        assert!(
            err.message.contains("max.message.bytes=100"),
            "{}",
            err.message
        );
        assert!(matches!(p.status(), Status::Failed(_)));
        assert!(p.poll_send(Instant::now(), &mut st).is_none());
    }

    fn epoch_batch(base: i64, n: usize, epoch: i32) -> Bytes {
        let records: Vec<Record> = (0..n)
            .map(|i| {
                Record::new(
                    1_000,
                    None,
                    Some(Bytes::from(format!("v{}", base + i as i64))),
                )
            })
            .collect();
        BatchBuilder::new(Compression::None)
            .base_offset(base)
            .partition_leader_epoch(epoch)
            .push_all(&records)
            .unwrap()
            .build()
            .unwrap()
    }

    fn diverging(epoch: i32, end_offset: i64) -> Fetched {
        Fetched {
            high_watermark: end_offset,
            last_stable_offset: end_offset,
            diverging: Some(DivergingEpoch { epoch, end_offset }),
            ..Fetched::default()
        }
    }

    #[test]
    fn the_last_fetched_epoch_follows_the_batches_taken_and_a_seek_forgets_it() {
        let mut p = part(0);
        let mut st = ShardStats::default();
        let (_b, t) = ticket();
        assert_eq!(p.last_fetched_epoch(), -1);
        let rs = set(&[epoch_batch(0, 2, 3), epoch_batch(2, 2, 5)]);
        p.fetch_started();
        p.handle_fetch(fetched(rs, 4), &t, now0(), &mut st).unwrap();
        assert_eq!(p.last_fetched_epoch(), 5);
        // A batch before the position (the broker starts at the batch holding it) is not taken.
        let rs = set(&[epoch_batch(2, 2, 5), epoch_batch(4, 1, 6)]);
        p.fetch_started();
        p.handle_fetch(fetched(rs, 5), &t, now0(), &mut st).unwrap();
        assert_eq!((p.last_fetched_epoch(), p.fetch_offset()), (6, 5));
        p.seek(2, 1);
        assert_eq!(p.last_fetched_epoch(), -1);
    }

    #[test]
    fn a_diverged_source_log_stops_the_partition_naming_what_the_target_holds() {
        let mut p = part(0);
        p.set_source_leader_epoch(7);
        let mut st = ShardStats::default();
        let (_b, t) = ticket();
        p.fetch_started();
        p.handle_fetch(fetched(epoch_batch(0, 10, 4), 10), &t, now0(), &mut st)
            .unwrap();
        let now = Instant::now();
        let (seq, _) = p.poll_send(now, &mut st).unwrap();
        p.handle_produced(
            seq,
            ProduceOutcome::Appended { base_offset: 50 },
            now,
            &mut st,
        )
        .unwrap();
        assert_eq!(p.next_offset(), 10);
        // The new leader (epoch 7, elected uncleanly) ends epoch 4 at offset 6.
        p.fetch_started();
        let err = p
            .handle_fetch(diverging(4, 6), &t, now0(), &mut st)
            .unwrap_err();
        assert_eq!(
            err.kind,
            FailureKind::SourceDiverged {
                diverged_at: 6,
                fetched_to: 10
            }
        );
        for part in [
            "src-0 diverged",
            "leader (epoch 7) says leader epoch 4 ends at offset 6",
            "fetched up to offset 10 in leader epoch 4",
            "Source offsets 6..9",
            "target partition A.src-0 holds source offsets 6..9",
        ] {
            assert!(err.message.contains(part), "{part}: {}", err.message);
        }
        assert!(matches!(p.status(), Status::Failed(_)));
        assert!(p.poll_send(now, &mut st).is_none());
        // A later answer changes nothing.
        p.fetch_started();
        assert!(
            p.handle_fetch(fetched(epoch_batch(10, 1, 7), 11), &t, now0(), &mut st)
                .is_ok()
        );
        assert_eq!(p.fetch_offset(), 10);
    }

    #[test]
    fn a_divergence_past_everything_on_the_target_refetches_from_the_last_ack() {
        let mut p = part(0);
        let mut st = ShardStats::default();
        let (_b, t) = ticket();
        p.fetch_started();
        p.handle_fetch(fetched(epoch_batch(0, 10, 4), 10), &t, now0(), &mut st)
            .unwrap();
        assert!(p.queued_bytes() > 0);
        // Nothing sent yet: the target holds nothing from past offset 6.
        p.fetch_started();
        p.handle_fetch(diverging(4, 6), &t, now0(), &mut st)
            .unwrap();
        assert_eq!(p.status(), &Status::Running);
        assert_eq!(
            (p.fetch_offset(), p.next_offset(), p.queued_bytes()),
            (0, 0, 0)
        );
        assert_eq!(p.last_fetched_epoch(), -1);
        assert!(p.poll_send(Instant::now(), &mut st).is_none());
    }

    #[test]
    fn truncated_source_is_a_lost_position() {
        let mut p = part(10);
        let mut st = ShardStats::default();
        let (_b, t) = ticket();
        let data = Fetched {
            error_code: 1,
            log_start_offset: 50,
            high_watermark: 80,
            ..Fetched::default()
        };
        p.fetch_started();
        let err = p.handle_fetch(data, &t, now0(), &mut st).unwrap_err();
        assert_eq!(
            err.kind,
            FailureKind::PositionLost {
                position: 10,
                log_start_offset: 50
            }
        );
        p.seek(50, 1);
        assert_eq!(p.status(), &Status::Running);
        assert_eq!(p.next_offset(), 50);
    }

    #[test]
    fn partial_trailing_batch_is_refetched() {
        let mut p = part(0);
        let mut st = ShardStats::default();
        let (_b, t) = ticket();
        let two = set(&[
            batch(0, 2, Compression::None),
            batch(2, 2, Compression::None),
        ]);
        let cut = two.slice(..two.len() - 5);
        p.fetch_started();
        p.handle_fetch(fetched(cut, 4), &t, now0(), &mut st)
            .unwrap();
        assert_eq!(p.fetch_offset(), 2);
        assert_eq!(st.fast_batches, 1);
    }

    #[test]
    fn a_fetch_answer_from_before_a_seek_is_dropped() {
        let mut p = part(0);
        let mut st = ShardStats::default();
        let (_b, t) = ticket();
        // A fetch at 0 is in flight; the operator seeks to 3; the answer (from 0) arrives.
        p.fetch_started();
        p.seek(3, 1);
        let rs = set(&[
            batch(0, 2, Compression::None),
            batch(5, 2, Compression::None),
        ]);
        p.handle_fetch(fetched(rs.clone(), 7), &t, now0(), &mut st)
            .unwrap();
        assert!(
            p.poll_send(now0(), &mut st).is_none(),
            "nothing taken from the stale answer"
        );
        assert_eq!(p.fetch_offset(), 3, "records 3..5 are still to fetch");
        // An answer without a fetch of ours in flight is dropped too.
        p.handle_fetch(fetched(rs, 7), &t, now0(), &mut st).unwrap();
        assert_eq!(p.fetch_offset(), 3);
    }

    #[test]
    fn a_refused_batch_leaves_the_failed_partition_quiet() {
        let mut p = part(0);
        let mut st = ShardStats::default();
        let (_b, t) = ticket();
        p.fetch_started();
        p.handle_fetch(
            fetched(set(&[batch(0, 2, Compression::None)]), 2),
            &t,
            now0(),
            &mut st,
        )
        .unwrap();
        let now = Instant::now();
        let (s, _) = p.poll_send(now, &mut st).unwrap();
        let refused = ProduceOutcome::Error {
            code: ResponseError::TopicAuthorizationFailed.code(),
            message: None,
        };
        let failure = p.handle_produced(s, refused, now, &mut st).unwrap_err();
        assert_eq!(failure.kind, FailureKind::TargetRejected);
        p.drain();
        assert!(
            p.is_quiet(),
            "nothing of it is on the wire: a shutdown must not wait"
        );
    }

    #[test]
    fn draining_drops_unsent_batches_and_keeps_progress_honest() {
        let mut p = part(0);
        let mut st = ShardStats::default();
        let (_b, t) = ticket();
        p.fetch_started();
        p.handle_fetch(
            fetched(
                set(&[
                    batch(0, 2, Compression::None),
                    batch(2, 2, Compression::None),
                ]),
                4,
            ),
            &t,
            now0(),
            &mut st,
        )
        .unwrap();
        let now = Instant::now();
        let (s, _) = p.poll_send(now, &mut st).unwrap();
        p.drain();
        assert!(!p.is_quiet());
        assert!(p.poll_send(now, &mut st).is_none());
        p.handle_produced(s, ProduceOutcome::Appended { base_offset: 0 }, now, &mut st)
            .unwrap();
        assert!(p.is_quiet());
        assert_eq!(
            p.next_offset(),
            2,
            "the unsent second batch will be refetched by the next owner"
        );
    }
}

/// A simulation of one partition against a model of the broker's idempotence checks, with
/// arbitrary interleavings of sends, refused enqueues, lost connections and answers.
#[cfg(test)]
#[allow(clippy::disallowed_methods)]
mod sim {
    use super::*;

    fn now0() -> Instant {
        Instant::now()
    }
    use crate::batch::{BatchBuilder, Compression, Record};
    use bytes::BytesMut;
    use proptest::prelude::*;

    /// What the broker knows about our producer on this partition (ProducerStateEntry).
    #[derive(Default)]
    struct Broker {
        /// (first_seq, last_seq, base_offset) of the last 5 batches.
        retained: VecDeque<(i32, i32, i64)>,
        log: Vec<(i32, i32)>,
        next_offset: i64,
    }

    impl Broker {
        fn append(&mut self, first: i32, last: i32) -> ProduceOutcome {
            if let Some(&(_, _, base)) = self
                .retained
                .iter()
                .find(|(f, l, _)| *f == first && *l == last)
            {
                return ProduceOutcome::Appended { base_offset: base };
            }
            if let Some(&(_, prev_last, _)) = self.retained.back()
                && first != prev_last + 1
            {
                return ProduceOutcome::Error {
                    code: 45,
                    message: None,
                };
            }
            let base = self.next_offset;
            self.next_offset += i64::from(last - first + 1);
            self.log.push((first, last));
            self.retained.push_back((first, last, base));
            if self.retained.len() > 5 {
                self.retained.pop_front();
            }
            ProduceOutcome::Appended { base_offset: base }
        }
    }

    #[derive(Debug, Clone)]
    enum Step {
        Send {
            refuse: bool,
        },
        Deliver {
            answer: bool,
        },
        /// The broker is not (yet) the leader: it refuses the request without writing.
        NotLeader,
        /// The connection drops: everything still queued on it is lost unanswered.
        Drop,
        Wait,
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            3 => Just(Step::Send { refuse: false }),
            1 => Just(Step::Send { refuse: true }),
            3 => Just(Step::Deliver { answer: true }),
            1 => Just(Step::Deliver { answer: false }),
            1 => Just(Step::Drop),
            1 => Just(Step::NotLeader),
            1 => Just(Step::Wait),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]
        #[test]
        fn never_out_of_order_and_exactly_once(steps in proptest::collection::vec(step(), 1..400), n in 1usize..12) {
            let mut p = Partition::new(
                PartitionKey::new(0, "s", 0), Arc::from("t"), 0, 1 << 20,
                FetchSettings::default(), ProduceSettings { backoff: crate::shard::BackoffSettings { retry_ms: 0, ..Default::default() }, ..ProduceSettings::default() },
            );
            p.needs_source_leader = false;
            p.needs_target_leader = false;
            p.set_producer(ProducerIdentity { id: 1, epoch: 0 });
            let mut rs = BytesMut::new();
            for i in 0..n {
                let b = BatchBuilder::new(Compression::None)
                    .base_offset(i as i64 * 2)
                    .push_all(&[Record::new(0, None, Some(Bytes::from("a"))), Record::new(0, None, Some(Bytes::from("b")))])
                    .unwrap()
                    .build()
                    .unwrap();
                rs.extend_from_slice(&b);
            }
            let budget = Rc::new(Cell::new(0));
            let t = FrameTicket::new(1, &budget);
            let mut st = ShardStats::default();
            p.fetch_started();
            p.handle_fetch(Fetched { high_watermark: 2 * n as i64, last_stable_offset: 2 * n as i64, records: Some(rs.freeze()), ..Fetched::default() }, &t, now0(), &mut st).unwrap();
            let mut broker = Broker::default();
            // Requests on the wire, in order: (seq, first, last).
            let mut wire: VecDeque<(i32, i32, i32)> = VecDeque::new();
            let mut now = Instant::now();
            let mut finish = steps;
            // After the random prefix, keep going fairly until everything is acknowledged.
            finish.extend(std::iter::repeat_n(Step::Send { refuse: false }, 1).chain(std::iter::repeat_n(Step::Deliver { answer: true }, 1)).cycle().take(20 * n + 50));
            for s in finish {
                match s {
                    Step::Send { refuse } => {
                        if let Some((seq, b)) = p.poll_send(now, &mut st) {
                            let mut whole = b.head.to_vec();
                            whole.extend_from_slice(&b.payload);
                            let rb = RawBatch::new(Bytes::from(whole)).unwrap();
                            let last = rb.base_sequence() + rb.last_offset_delta();
                            if refuse {
                                p.handle_produced(seq, ProduceOutcome::Lost { reason: "no slot".into() }, now, &mut st).unwrap();
                            } else {
                                wire.push_back((seq, rb.base_sequence(), last));
                            }
                        }
                    }
                    Step::Deliver { answer } => {
                        if let Some((seq, first, last)) = wire.pop_front() {
                            // Out of order behind a refused batch is normal: nothing is written
                            // and the partition resends in order. What must never happen is a
                            // gap or a duplicate in the log, or the partition giving up.
                            let out = broker.append(first, last);
                            let out = if answer { out } else { ProduceOutcome::Lost { reason: "timeout".into() } };
                            let r = p.handle_produced(seq, out, now, &mut st);
                            prop_assert!(r.is_ok(), "{r:?} for {first}..{last} after {:?}", broker.log);
                        }
                    }
                    Step::NotLeader => {
                        if let Some((seq, _, _)) = wire.pop_front() {
                            p.handle_produced(seq, ProduceOutcome::Error { code: 6, message: None }, now, &mut st).unwrap();
                        }
                    }
                    Step::Drop => {
                        for (seq, _, _) in wire.drain(..) {
                            p.handle_produced(seq, ProduceOutcome::Lost { reason: "closed".into() }, now, &mut st).unwrap();
                        }
                    }
                    Step::Wait => now += Duration::from_millis(10),
                }
                p.needs_target_leader = false;
                now += Duration::from_millis(1);
            }
            prop_assert_eq!(p.next_offset(), 2 * n as i64);
            // The target position the shard reports is where the target log really ends.
            prop_assert_eq!(p.progress().target_next_offset, broker.next_offset);
            // Every record once, in order (small batches queued together may have been merged).
            let written: Vec<i32> = broker.log.iter().flat_map(|&(first, last)| first..=last).collect();
            prop_assert_eq!(written, (0..2 * n as i32).collect::<Vec<_>>());
            prop_assert_eq!(st.merged_batches as usize + broker.log.len() - st.merges as usize, n);
        }
    }
}
