//! What the API and `/metrics` show beyond the partition table: per partition the bytes
//! copied, the lag in time, why it is stalled and since when; per flow the shards' timing
//! histograms and the duties' counters; the heartbeats.
//!
//! Fed by the shards' reports ([`FlowObservations::on_progress`], a hook in `events`), read
//! when the status snapshot is made ([`fill`]). One small entry per partition of the flow.

use std::collections::HashMap;
use std::time::Instant;

use strait_dataplane::shard::timing::add_timings;
use strait_dataplane::shard::{FlowId, PartitionKey, PartitionProgress, PathCounts, ShardStats};

use super::{FlowRuntime, RunOptions};
use crate::api::{
    Delivery, FlowStatus, ObservabilitySettings, PartitionStatus, StallStatus, Status,
};

/// What a shard counts for one partition from the moment it gets it (a stint).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Copied {
    bytes: u64,
    paths: PathCounts,
}

impl Copied {
    fn of(p: &PartitionProgress) -> Self {
        Copied {
            bytes: p.bytes_copied,
            paths: p.paths,
        }
    }

    fn plus(self, other: Copied) -> Copied {
        Copied {
            bytes: self.bytes + other.bytes,
            paths: self.paths.plus(other.paths),
        }
    }

    /// Whether `self` cannot follow `earlier` in one stint (a counter went back).
    fn restarted_since(self, earlier: Copied) -> bool {
        self.bytes < earlier.bytes
            || self.paths.fast_batches < earlier.paths.fast_batches
            || self.paths.slow_batches < earlier.paths.slow_batches
    }
}

/// One partition, as its reports showed it.
#[derive(Debug, Clone, Default)]
struct Observed {
    shard: usize,
    /// Counted in earlier stints (on other shards, or before a reassignment).
    before: Copied,
    /// Counted in the current stint (the shard's counters).
    now: Copied,
    oldest_unacked_ms: i64,
    stall: Option<StallStatus>,
    last_next: i64,
    /// Wall time (ms) of the last progress: records acknowledged, or no lag.
    progress_ms: i64,
    /// The last report showed no lag. A shard reports a partition only when its progress
    /// changes, so a caught-up partition stays silent; the report that shows lag again is
    /// within one report interval of the last moment it had none.
    caught_up: bool,
}

/// The observations of one flow's partitions.
#[derive(Debug, Default)]
pub(crate) struct FlowObservations {
    parts: HashMap<PartitionKey, Observed>,
}

impl FlowObservations {
    /// A report of the shard that holds the partition, at `now` (`wall_ms` since the epoch).
    pub(crate) fn on_progress(
        &mut self,
        shard: usize,
        p: &PartitionProgress,
        now: Instant,
        wall_ms: i64,
    ) {
        let o = self.parts.entry(p.key.clone()).or_insert_with(|| Observed {
            shard,
            last_next: p.next_offset,
            progress_ms: wall_ms,
            ..Observed::default()
        });
        let copied = Copied::of(p);
        if o.shard != shard || copied.restarted_since(o.now) {
            // A new stint: the shard's counters started again.
            o.before = o.before.plus(o.now);
            o.now = Copied::default();
            o.shard = shard;
        }
        o.now = copied;
        o.oldest_unacked_ms = p.oldest_unacked_timestamp_ms;
        o.stall = p.stall.as_ref().map(|s| StallStatus {
            reason: s.reason.name().to_string(),
            detail: s.detail.to_string(),
            since_ms: wall_ms.saturating_sub(
                i64::try_from(now.saturating_duration_since(s.since).as_millis())
                    .unwrap_or(i64::MAX),
            ),
        });
        let no_lag = p.end_offset >= 0 && p.next_offset >= p.end_offset;
        if p.next_offset != o.last_next || no_lag || o.caught_up {
            o.progress_ms = wall_ms;
            o.last_next = p.next_offset;
        }
        o.caught_up = no_lag;
    }

    /// Fills the observed fields of `p` at `wall_ms`.
    fn fill(&self, fid: FlowId, p: &mut PartitionStatus, wall_ms: i64) {
        let key = PartitionKey::new(fid, &p.topic, p.partition);
        let Some(o) = self.parts.get(&key) else {
            return;
        };
        let copied = o.before.plus(o.now);
        p.bytes_copied = copied.bytes;
        p.fast_batches = copied.paths.fast_batches;
        p.slow_batches = copied.paths.slow_batches;
        let moving = p.state == "replicating";
        p.stall = o.stall.clone().filter(|_| moving);
        p.lag_ms = match (p.lag, o.oldest_unacked_ms) {
            (0, _) => 0,
            (_, ts) if ts >= 0 => (wall_ms - ts).max(0),
            _ => (wall_ms - o.progress_ms).max(0),
        };
        p.stuck_since_ms = (moving && p.lag > 0).then(|| {
            o.stall
                .as_ref()
                .map_or(o.progress_ms, |s| s.since_ms.min(o.progress_ms))
        });
    }
}

/// Fills what the partition table does not hold: per partition bytes, lag in time, stall;
/// per flow timings and duty counters; the settings.
pub(super) fn fill(
    status: &mut Status,
    flows: &[FlowRuntime],
    stats: &HashMap<usize, ShardStats>,
    opts: &RunOptions,
    wall_ms: i64,
) {
    status.generated_at_ms = wall_ms;
    status.settings = ObservabilitySettings {
        metrics_enabled: opts.metrics_enabled,
        metrics_per_partition: opts.metrics_per_partition,
        stall_timeout_ms: opts.stall_timeout_ms,
    };
    let mut timings = Vec::new();
    for s in stats.values() {
        add_timings(&mut timings, &s.timings);
    }
    for (fid, (fs, f)) in status.flows.iter_mut().zip(flows).enumerate() {
        fill_flow(fs, f, fid as FlowId, wall_ms);
        if let Some(t) = timings.iter().find(|t| t.flow == fid as FlowId) {
            fs.record_age = t.record_age.clone();
            fs.replication_latency = t.replication_latency.clone();
        }
    }
}

fn fill_flow(fs: &mut FlowStatus, f: &FlowRuntime, fid: FlowId, wall_ms: i64) {
    fs.offsets = f.offsets.counters().clone();
    fs.topic_sync = f.topics.counters();
    if let Some(eos) = &f.eos {
        fs.delivery = Delivery::ExactlyOnce;
        fs.transactions = Some(eos.counters());
    }
    for p in &mut fs.partitions {
        f.observed.fill(fid, p, wall_ms);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;
    use strait_dataplane::shard::{Stall, StallReason};

    fn progress(next: i64, end: i64, bytes: u64, oldest: i64) -> PartitionProgress {
        PartitionProgress {
            key: PartitionKey::new(0, "t", 0),
            next_offset: next,
            target_next_offset: next,
            fetch_offset: next,
            last_fetched_epoch: -1,
            end_offset: end,
            log_start_offset: 0,
            queued_batches: 0,
            paused: false,
            stall: None,
            bytes_copied: bytes,
            paths: PathCounts {
                fast_batches: bytes / 10,
                slow_batches: 0,
            },
            oldest_unacked_timestamp_ms: oldest,
            seek_generation: 0,
        }
    }

    fn view(lag: i64) -> PartitionStatus {
        PartitionStatus {
            topic: "t".into(),
            lag,
            state: "replicating".into(),
            ..PartitionStatus::default()
        }
    }

    #[test]
    #[allow(clippy::disallowed_methods)] // any instant will do
    fn bytes_add_up_over_stints_and_lag_ages_from_the_oldest_record() {
        let now = Instant::now();
        let mut o = FlowObservations::default();
        o.on_progress(0, &progress(10, 20, 100, 5_000), now, 10_000);
        o.on_progress(0, &progress(12, 20, 150, 6_000), now, 10_500);
        // Reassigned to shard 1: its counter starts again.
        o.on_progress(1, &progress(15, 20, 40, -1), now, 11_000);
        let mut p = view(5);
        o.fill(0, &mut p, 12_000);
        assert_eq!(p.bytes_copied, 190);
        assert_eq!(
            (p.fast_batches, p.slow_batches),
            (15 + 4, 0),
            "batches add up too"
        );
        // Nothing fetched and unacknowledged: time since the last progress (at 11 000).
        assert_eq!(p.lag_ms, 1_000);
        assert_eq!(p.stuck_since_ms, Some(11_000));
        o.on_progress(1, &progress(15, 20, 40, 9_000), now, 12_000);
        o.fill(0, &mut p, 12_500);
        assert_eq!(p.lag_ms, 3_500, "the oldest record waiting is from 9 000");
        assert_eq!(p.stuck_since_ms, Some(11_000), "no progress since 11 000");
        let mut caught_up = view(0);
        o.fill(0, &mut caught_up, 12_500);
        assert_eq!((caught_up.lag_ms, caught_up.stuck_since_ms), (0, None));
    }

    #[test]
    #[allow(clippy::disallowed_methods)] // any instant will do
    fn a_stall_names_its_reason_and_dates_from_the_shards_instant() {
        let now = Instant::now();
        let mut o = FlowObservations::default();
        let mut pr = progress(10, 20, 0, -1);
        pr.stall = Some(Stall {
            reason: StallReason::TargetUnreachable,
            since: now.checked_sub(Duration::from_secs(3)).unwrap_or(now),
            detail: Arc::from("broker 1 refused"),
        });
        o.on_progress(0, &pr, now, 100_000);
        let mut p = view(10);
        o.fill(0, &mut p, 100_000);
        let stall = p.stall.clone().unwrap();
        assert_eq!(stall.reason, "target_unreachable");
        assert!(stall.since_ms <= 100_000 && stall.since_ms >= 97_000);
        assert_eq!(p.stuck_since_ms, Some(stall.since_ms));
        // A paused partition is not stalled.
        let mut paused = view(10);
        paused.state = "paused".into();
        o.fill(0, &mut paused, 100_000);
        assert_eq!((paused.stall, paused.stuck_since_ms), (None, None));
    }

    #[test]
    #[allow(clippy::disallowed_methods)] // any instant will do
    fn a_partition_silent_while_caught_up_dates_its_lag_from_the_report_that_shows_it() {
        let now = Instant::now();
        let mut o = FlowObservations::default();
        o.on_progress(0, &progress(20, 20, 100, -1), now, 10_000);
        // Caught up and unchanged: the shard leaves it out of its reports for a minute, then a
        // record arrives at the source.
        o.on_progress(0, &progress(20, 21, 100, -1), now, 70_000);
        let mut p = view(1);
        o.fill(0, &mut p, 70_500);
        assert_eq!(
            p.lag_ms, 500,
            "caught up until the last report, not behind for a minute"
        );
        assert_eq!(p.stuck_since_ms, Some(70_000));
        // Still behind and unchanged: the age grows from there.
        o.on_progress(0, &progress(20, 21, 100, -1), now, 71_000);
        o.fill(0, &mut p, 75_000);
        assert_eq!((p.lag_ms, p.stuck_since_ms), (5_000, Some(70_000)));
    }
}
