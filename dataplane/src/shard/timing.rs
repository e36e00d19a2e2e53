//! Record timing in the shard, aggregated: histograms of record age and replication latency
//! (MirrorMaker's `record-age-ms` and `replication-latency-ms`), kept as fixed bucket counts per
//! flow, and the wall clock they need.
//!
//! Bounded by construction: one pair of histograms per flow the shard replicates, each
//! [`BUCKETS`] counters, whatever the record rate. A shard reports them inside
//! [`ShardStats`](super::ShardStats) (cumulative since it started), never per record.
//!
//! Observations are per batch: a batch of `n` records counts `n` times at the age of its
//! timestamp (the batch's first record timestamp under CreateTime, the broker's append time
//! under LogAppendTime). Batches without a timestamp (-1, as up-converted magic 0 records
//! have) are not observed.
#![deny(clippy::disallowed_methods)]

use std::time::Instant;

use super::channel::FlowId;
use crate::batch::{RawBatch, TimestampType};

/// Upper bounds (ms, inclusive) of the finite buckets; one more bucket takes everything above.
pub const BOUNDS_MS: [u64; 17] = [
    1, 2, 5, 10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 30_000, 60_000, 300_000,
    3_600_000,
];

/// Buckets of a histogram: the finite ones and `+Inf`.
pub const BUCKETS: usize = BOUNDS_MS.len() + 1;

/// A histogram of milliseconds with the fixed bounds [`BOUNDS_MS`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LatencyHistogram {
    /// Observations per bucket (not cumulative); the last is above every bound.
    pub counts: [u64; BUCKETS],
    /// Sum of the observed values, ms.
    pub sum_ms: u64,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram {
            counts: [0; BUCKETS],
            sum_ms: 0,
        }
    }
}

impl LatencyHistogram {
    /// Counts `ms` (negative values, from clock skew, count as 0) `weight` times.
    pub fn observe(&mut self, ms: i64, weight: u64) {
        let v = u64::try_from(ms).unwrap_or(0);
        let i = BOUNDS_MS.partition_point(|b| *b < v);
        self.counts[i] = self.counts[i].saturating_add(weight);
        self.sum_ms = self.sum_ms.saturating_add(v.saturating_mul(weight));
    }

    /// Observations in all.
    pub fn count(&self) -> u64 {
        self.counts.iter().fold(0u64, |a, c| a.saturating_add(*c))
    }

    /// Adds another histogram (another shard's).
    pub fn add(&mut self, other: &LatencyHistogram) {
        for (mine, theirs) in self.counts.iter_mut().zip(other.counts) {
            *mine = mine.saturating_add(theirs);
        }
        self.sum_ms = self.sum_ms.saturating_add(other.sum_ms);
    }
}

/// The timing histograms of one flow in one shard.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlowTimings {
    pub flow: FlowId,
    /// Age of records when fetched from the source (`record-age-ms`).
    pub record_age: LatencyHistogram,
    /// From the record's timestamp to the target's acknowledgement (`replication-latency-ms`).
    pub replication_latency: LatencyHistogram,
}

/// The timings of `flow` in `all`, added when missing (one entry per flow).
pub fn timings_of(all: &mut Vec<FlowTimings>, flow: FlowId) -> &mut FlowTimings {
    let i = match all.iter().position(|t| t.flow == flow) {
        Some(i) => i,
        None => {
            all.push(FlowTimings {
                flow,
                ..FlowTimings::default()
            });
            all.len() - 1
        }
    };
    &mut all[i]
}

/// Adds `other`'s timings into `total`, flow by flow.
pub fn add_timings(total: &mut Vec<FlowTimings>, other: &[FlowTimings]) {
    for t in other {
        let mine = timings_of(total, t.flow);
        mine.record_age.add(&t.record_age);
        mine.replication_latency.add(&t.replication_latency);
    }
}

/// Wall time from a monotonic instant: one reading of both clocks taken by the IO loop, so
/// that the sans-IO code converts its `now` without reading a clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WallClock {
    pub at: Instant,
    /// Milliseconds since the Unix epoch at `at`.
    pub epoch_ms: i64,
}

impl WallClock {
    /// Milliseconds since the Unix epoch at `now`.
    pub fn ms(&self, now: Instant) -> i64 {
        let ahead = now.saturating_duration_since(self.at).as_millis();
        let behind = self.at.saturating_duration_since(now).as_millis();
        self.epoch_ms
            .saturating_add(i64::try_from(ahead).unwrap_or(i64::MAX))
            .saturating_sub(i64::try_from(behind).unwrap_or(i64::MAX))
    }
}

/// The timestamp a batch's records are timed by: the append time for LogAppendTime batches
/// (and batches whose base timestamp holds a delete horizon), else the first record's create
/// time; -1 when it has none.
pub fn batch_timestamp(batch: &RawBatch) -> i64 {
    let ts = if batch.timestamp_type() == TimestampType::LogAppendTime || batch.has_delete_horizon()
    {
        batch.max_timestamp()
    } else {
        batch.base_timestamp()
    };
    if ts < 0 { -1 } else { ts }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn observations_land_in_the_first_bucket_that_holds_them() {
        let mut h = LatencyHistogram::default();
        h.observe(0, 1);
        h.observe(1, 1);
        h.observe(2, 3);
        h.observe(3, 1);
        h.observe(-50, 1);
        h.observe(i64::MAX, 2);
        assert_eq!(h.counts[0], 3, "0, 1 and the negative one are <= 1 ms");
        assert_eq!(h.counts[1], 3);
        assert_eq!(h.counts[2], 1);
        assert_eq!(h.counts[BUCKETS - 1], 2);
        assert_eq!(h.count(), 9);
        assert_eq!(h.sum_ms, u64::MAX, "the sum saturates");
    }

    #[test]
    fn histograms_add_up_per_flow() {
        let mut a = vec![];
        timings_of(&mut a, 1).record_age.observe(10, 4);
        let mut b = vec![];
        timings_of(&mut b, 1).record_age.observe(10, 1);
        timings_of(&mut b, 2).replication_latency.observe(100, 1);
        add_timings(&mut a, &b);
        assert_eq!(a.len(), 2);
        assert_eq!(timings_of(&mut a, 1).record_age.count(), 5);
        assert_eq!(timings_of(&mut a, 1).record_age.sum_ms, 50);
        assert_eq!(timings_of(&mut a, 2).replication_latency.count(), 1);
    }

    #[test]
    #[allow(clippy::disallowed_methods)] // any instant will do
    fn wall_clock_follows_the_monotonic_one() {
        let at = Instant::now();
        let w = WallClock {
            at,
            epoch_ms: 1_000_000,
        };
        assert_eq!(w.ms(at + Duration::from_millis(250)), 1_000_250);
        if let Some(before) = at.checked_sub(Duration::from_millis(5)) {
            assert_eq!(w.ms(before), 999_995);
        }
    }
}
