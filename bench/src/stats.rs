//! Pure accounting for a measured run: the latency histogram, distinct-record tracking,
//! per-second series and the rate pacer. Time is always an input (microseconds); nothing here
//! reads the clock.
#![forbid(unsafe_code)]

use hdrhistogram::Histogram;
use serde::Serialize;

/// Highest latency the histogram tracks: one hour, in microseconds. Larger values are clamped.
const MAX_LATENCY_US: u64 = 3_600_000_000;

/// Send→arrival latencies in microseconds, three significant digits.
#[derive(Debug, Clone)]
pub struct Latency {
    hist: Histogram<u64>,
}

impl Default for Latency {
    fn default() -> Self {
        Self::new()
    }
}

impl Latency {
    pub fn new() -> Self {
        Latency {
            hist: Histogram::new_with_bounds(1, MAX_LATENCY_US, 3)
                .expect("constant histogram bounds are valid"),
        }
    }

    /// Records one record sent at `send_us` and seen at `arrival_us`. A send time in the
    /// future (clock steps) counts as zero latency.
    pub fn record(&mut self, send_us: u64, arrival_us: u64) {
        let us = arrival_us.saturating_sub(send_us).clamp(1, MAX_LATENCY_US);
        self.hist
            .record(us)
            .expect("value is clamped into the histogram's bounds");
    }

    pub fn count(&self) -> u64 {
        self.hist.len()
    }

    /// The latency at `quantile` (0..=1) in milliseconds; 0 when empty.
    pub fn quantile_ms(&self, quantile: f64) -> f64 {
        if self.hist.is_empty() {
            return 0.0;
        }
        self.hist.value_at_quantile(quantile) as f64 / 1000.0
    }

    pub fn max_ms(&self) -> f64 {
        self.hist.max() as f64 / 1000.0
    }

    pub fn mean_ms(&self) -> f64 {
        self.hist.mean() / 1000.0
    }

    pub fn reset(&mut self) {
        self.hist.reset();
    }

    /// Points of the latency CDF for plotting: `(quantile, ms)` at quantiles spaced more
    /// densely towards the tail (0, 0.5, 0.75, ... 0.999, 0.9999, 1).
    pub fn cdf(&self) -> Vec<(f64, f64)> {
        if self.hist.is_empty() {
            return Vec::new();
        }
        let mut qs = Vec::new();
        for i in 0..=50 {
            qs.push(f64::from(i) / 100.0);
        }
        // 0.5 .. 0.99999: halve the remaining tail each step.
        let mut tail = 0.5;
        while tail > 1e-5 {
            tail /= 1.25;
            qs.push(1.0 - tail);
        }
        qs.push(1.0);
        qs.iter().map(|&q| (q, self.quantile_ms(q))).collect()
    }
}

/// Which sequence numbers `0..expected` have arrived, so duplicates are counted apart and the
/// run ends when every expected record is there.
#[derive(Debug, Clone)]
pub struct Seen {
    bits: Vec<u64>,
    expected: u64,
    distinct: u64,
    duplicates: u64,
    unexpected: u64,
}

/// Largest number of expected records tracked (bitset of 16 MiB).
pub const MAX_TRACKED_RECORDS: u64 = 128 * 1024 * 1024;

impl Seen {
    /// Tracks `0..expected`; `expected` above [`MAX_TRACKED_RECORDS`] is an error.
    pub fn new(expected: u64) -> Result<Self, String> {
        if expected > MAX_TRACKED_RECORDS {
            return Err(format!(
                "{expected} records is more than the {MAX_TRACKED_RECORDS} a run can track"
            ));
        }
        let words = expected.div_ceil(64) as usize;
        Ok(Seen {
            bits: vec![0; words],
            expected,
            distinct: 0,
            duplicates: 0,
            unexpected: 0,
        })
    }

    /// Notes `seq`; true when it is new and expected.
    pub fn insert(&mut self, seq: u64) -> bool {
        if seq >= self.expected {
            self.unexpected += 1;
            return false;
        }
        let (w, b) = ((seq / 64) as usize, seq % 64);
        let mask = 1u64 << b;
        if self.bits[w] & mask != 0 {
            self.duplicates += 1;
            false
        } else {
            self.bits[w] |= mask;
            self.distinct += 1;
            true
        }
    }

    pub fn distinct(&self) -> u64 {
        self.distinct
    }
    pub fn duplicates(&self) -> u64 {
        self.duplicates
    }
    pub fn unexpected(&self) -> u64 {
        self.unexpected
    }
    pub fn complete(&self) -> bool {
        self.distinct == self.expected
    }
}

/// One second of a run, as plotted and stored.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct SecondPoint {
    /// Seconds since the run's start (the replicator's launch).
    pub t_s: u32,
    /// Measured records that arrived in this second.
    pub records: u64,
    /// Their key+value+header bytes, MiB.
    pub mib: f64,
    /// Latency percentiles of this second's arrivals (0 when none arrived).
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// The replicator's CPU seconds used so far (cumulative), and its RSS now.
    pub cpu_s: f64,
    pub rss_mib: f64,
}

/// Builds the per-second series from arrivals; the caller closes each second with the
/// replicator's CPU and memory at that moment.
#[derive(Debug)]
pub struct Series {
    start_us: u64,
    current: u32,
    records: u64,
    bytes: u64,
    latency: Latency,
    points: Vec<SecondPoint>,
    /// Bound on stored points (one per second); a run longer than this keeps the first ones.
    max_points: usize,
}

impl Series {
    pub fn new(start_us: u64, max_points: usize) -> Self {
        Series {
            start_us,
            current: 0,
            records: 0,
            bytes: 0,
            latency: Latency::new(),
            points: Vec::new(),
            max_points,
        }
    }

    /// The second of the run that `now_us` falls in.
    pub fn second_of(&self, now_us: u64) -> u32 {
        u32::try_from(now_us.saturating_sub(self.start_us) / 1_000_000).unwrap_or(u32::MAX)
    }

    /// True when `now_us` is past the current second: call [`Series::close_second`].
    pub fn due(&self, now_us: u64) -> bool {
        self.second_of(now_us) > self.current
    }

    /// Adds one measured arrival (in the current second).
    pub fn arrival(&mut self, bytes: u64, send_us: u64, arrival_us: u64) {
        self.records += 1;
        self.bytes += bytes;
        self.latency.record(send_us, arrival_us);
    }

    /// Ends the current second with the replicator's cumulative CPU and current RSS.
    pub fn close_second(&mut self, cpu_s: f64, rss_mib: f64) {
        if self.points.len() < self.max_points {
            self.points.push(SecondPoint {
                t_s: self.current,
                records: self.records,
                mib: self.bytes as f64 / MIB,
                p50_ms: self.latency.quantile_ms(0.5),
                p99_ms: self.latency.quantile_ms(0.99),
                cpu_s,
                rss_mib,
            });
        }
        self.current = self.current.saturating_add(1);
        self.records = 0;
        self.bytes = 0;
        self.latency.reset();
    }

    pub fn points(&self) -> &[SecondPoint] {
        &self.points
    }

    pub fn into_points(self) -> Vec<SecondPoint> {
        self.points
    }
}

pub const MIB: f64 = 1024.0 * 1024.0;
pub const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// Paces a fixed record rate: how many records should have been generated by a given time.
#[derive(Debug, Clone, Copy)]
pub struct Pacer {
    start_us: u64,
    /// Records per second; `None` means flat out.
    rate: Option<f64>,
}

impl Pacer {
    pub fn new(start_us: u64, rate: Option<f64>) -> Self {
        Pacer { start_us, rate }
    }

    /// Records due by `now_us` (saturating at `u64::MAX` when flat out).
    pub fn due(&self, now_us: u64) -> u64 {
        match self.rate {
            None => u64::MAX,
            Some(r) => {
                let elapsed_s = now_us.saturating_sub(self.start_us) as f64 / 1e6;
                (elapsed_s * r.max(0.0)).floor() as u64
            }
        }
    }

    /// When `n` records will be due (µs), for sleeping until then.
    pub fn time_of(&self, n: u64) -> Option<u64> {
        let r = self.rate?;
        if r <= 0.0 {
            return None;
        }
        Some(self.start_us + ((n as f64 / r) * 1e6).ceil() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn latency_percentiles() {
        let mut l = Latency::new();
        for ms in 1..=1000u64 {
            l.record(0, ms * 1000);
        }
        assert_eq!(l.count(), 1000);
        let p50 = l.quantile_ms(0.5);
        let p99 = l.quantile_ms(0.99);
        assert!((499.0..=501.0).contains(&p50), "{p50}");
        assert!((989.0..=991.0).contains(&p99), "{p99}");
        assert!(l.max_ms() >= 999.0);
        let cdf = l.cdf();
        assert!(cdf.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1));
        assert_eq!(cdf.last().unwrap().0, 1.0);
    }

    #[test]
    fn latency_clamps_clock_steps_and_huge_values() {
        let mut l = Latency::new();
        l.record(10, 5);
        l.record(0, u64::MAX);
        assert_eq!(l.count(), 2);
        assert!(l.quantile_ms(0.0) <= 0.002);
        assert!(l.max_ms() >= 3_599_000.0);
        assert!(Latency::new().cdf().is_empty());
        assert_eq!(Latency::new().quantile_ms(0.5), 0.0);
    }

    proptest! {
        #[test]
        fn seen_counts_distinct_duplicates_and_strays(
            expected in 0u64..500, seqs in proptest::collection::vec(0u64..600, 0..2000)
        ) {
            let mut s = Seen::new(expected).unwrap();
            let mut model = std::collections::HashSet::new();
            let (mut dups, mut stray) = (0u64, 0u64);
            for &q in &seqs {
                let new = s.insert(q);
                if q >= expected {
                    stray += 1;
                    prop_assert!(!new);
                } else if model.insert(q) {
                    prop_assert!(new);
                } else {
                    dups += 1;
                    prop_assert!(!new);
                }
            }
            prop_assert_eq!(s.distinct(), model.len() as u64);
            prop_assert_eq!(s.duplicates(), dups);
            prop_assert_eq!(s.unexpected(), stray);
            prop_assert_eq!(s.complete(), model.len() as u64 == expected);
        }

        #[test]
        fn pacer_is_monotonic_and_exact(rate in 1.0f64..1e6, t1 in 0u64..10_000_000, dt in 0u64..10_000_000) {
            let p = Pacer::new(1_000, Some(rate));
            let a = p.due(1_000 + t1);
            let b = p.due(1_000 + t1 + dt);
            prop_assert!(a <= b);
            let expect = (t1 as f64 / 1e6 * rate).floor() as u64;
            prop_assert!(a.abs_diff(expect) <= 1);
            let n = a + 1;
            let when = p.time_of(n).unwrap();
            prop_assert!(p.due(when) >= n);
        }
    }

    #[test]
    fn seen_refuses_unbounded_runs() {
        assert!(Seen::new(MAX_TRACKED_RECORDS + 1).is_err());
        assert!(Seen::new(0).unwrap().complete());
    }

    #[test]
    fn flat_out_pacer_has_everything_due() {
        let p = Pacer::new(0, None);
        assert_eq!(p.due(0), u64::MAX);
        assert_eq!(p.time_of(5), None);
    }

    #[test]
    fn series_buckets_by_second() {
        let mut s = Series::new(1_000_000, 10);
        assert_eq!(s.second_of(1_500_000), 0);
        s.arrival(1024, 1_000_000, 1_200_000);
        s.arrival(1024, 1_000_000, 1_400_000);
        assert!(!s.due(1_999_999));
        assert!(s.due(2_000_000));
        s.close_second(1.5, 100.0);
        s.arrival(2048, 2_000_000, 2_010_000);
        s.close_second(2.0, 110.0);
        let p = s.points();
        assert_eq!(p.len(), 2);
        assert_eq!((p[0].t_s, p[0].records), (0, 2));
        assert!((p[0].mib - 2048.0 / MIB).abs() < 1e-12);
        assert!((p[0].p50_ms - 200.0).abs() < 1.0, "{}", p[0].p50_ms);
        assert_eq!((p[1].t_s, p[1].records), (1, 1));
        assert!((p[1].p99_ms - 10.0).abs() < 0.1);
        assert_eq!(p[1].cpu_s, 2.0);
    }

    #[test]
    fn series_is_bounded() {
        let mut s = Series::new(0, 3);
        for _ in 0..10 {
            s.close_second(0.0, 0.0);
        }
        assert_eq!(s.points().len(), 3);
    }
}
