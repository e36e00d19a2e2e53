//! The run over time: per interval (`--interval-s`), records and bytes produced and received,
//! duplicates, and the latency percentiles of the records first seen in it; and the latency of
//! the whole run. Pure: times are inputs, in microseconds since the Unix epoch.
//!
//! A latency histogram takes a few hundred KiB, so only the last [`OPEN_INTERVALS`] intervals
//! keep one; older intervals are summarised as they close. Arrivals come in time order (one
//! thread reads them off the wire); one stamped before the oldest open interval (the wall
//! clock stepped back) is counted in that interval.
#![forbid(unsafe_code)]

use serde::Serialize;

use crate::stats::Latency;

/// Intervals that still take latencies.
pub const OPEN_INTERVALS: usize = 3;
/// Most intervals a run keeps (later times count in the last one): 11 days at 1 s.
pub const MAX_INTERVALS: usize = 1_000_000;

/// Latency percentiles, milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Percentiles {
    pub count: u64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
}

impl Percentiles {
    /// The summary of `l`; `None` when it holds nothing.
    pub fn of(l: &Latency) -> Option<Percentiles> {
        (l.count() > 0).then(|| Percentiles {
            count: l.count(),
            p50_ms: l.quantile_ms(0.5),
            p90_ms: l.quantile_ms(0.9),
            p99_ms: l.quantile_ms(0.99),
            p999_ms: l.quantile_ms(0.999),
            max_ms: l.max_ms(),
        })
    }
}

/// One interval.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct IntervalPoint {
    /// Start of the interval, seconds since the run started.
    pub start_s: f64,
    /// Records acknowledged by the source (counted when sent).
    pub produced: u64,
    pub produced_bytes: u64,
    /// First copies read on the target.
    pub received: u64,
    pub received_bytes: u64,
    pub duplicates: u64,
    /// Of the records first seen in this interval.
    pub latency: Option<Percentiles>,
}

/// The series of one run.
#[derive(Debug)]
pub struct Series {
    start_us: u64,
    interval_us: u64,
    points: Vec<IntervalPoint>,
    /// (interval index, its latencies), oldest first.
    open: Vec<(usize, Latency)>,
    overall: Latency,
}

impl Series {
    /// `interval_us` is clamped to at least 1 ms.
    pub fn new(start_us: u64, interval_us: u64) -> Series {
        Series {
            start_us,
            interval_us: interval_us.max(1000),
            points: Vec::new(),
            open: Vec::new(),
            overall: Latency::new(),
        }
    }

    fn index(&self, t_us: u64) -> usize {
        let i = t_us.saturating_sub(self.start_us) / self.interval_us;
        (i.min(MAX_INTERVALS as u64 - 1)) as usize
    }

    fn point(&mut self, i: usize) -> &mut IntervalPoint {
        while self.points.len() <= i {
            let start_s = (self.points.len() as u64 * self.interval_us) as f64 / 1e6;
            self.points.push(IntervalPoint {
                start_s,
                ..IntervalPoint::default()
            });
        }
        &mut self.points[i]
    }

    /// `records` of `bytes` in all were produced at `t_us`.
    pub fn produced(&mut self, t_us: u64, records: u64, bytes: u64) {
        let p = self.point(self.index(t_us));
        p.produced += records;
        p.produced_bytes += bytes;
    }

    /// A copy seen twice or more, at `t_us`.
    pub fn duplicate(&mut self, t_us: u64) {
        self.point(self.index(t_us)).duplicates += 1;
    }

    /// A first copy of `bytes` sent at `send_us` was read at `t_us`.
    pub fn received(&mut self, t_us: u64, send_us: u64, bytes: u64) {
        let mut i = self.index(t_us);
        let p = self.point(i);
        p.received += 1;
        p.received_bytes += bytes;
        self.overall.record(send_us, t_us);
        if let Some((oldest, _)) = self.open.first() {
            i = i.max(*oldest);
        }
        if !self.open.iter().any(|(k, _)| *k == i) {
            self.open.push((i, Latency::new()));
            self.open.sort_by_key(|(k, _)| *k);
            while self.open.len() > OPEN_INTERVALS {
                let (k, l) = self.open.remove(0);
                self.close(k, &l);
            }
        }
        if let Some((_, l)) = self.open.iter_mut().find(|(k, _)| *k == i) {
            l.record(send_us, t_us);
        }
    }

    fn close(&mut self, i: usize, l: &Latency) {
        self.point(i).latency = Percentiles::of(l);
    }

    /// The latency of the whole run so far.
    pub fn overall(&self) -> Option<Percentiles> {
        Percentiles::of(&self.overall)
    }

    /// The last closed-or-open interval's latency (for live progress).
    pub fn latest(&self) -> Option<Percentiles> {
        self.open.last().and_then(|(_, l)| Percentiles::of(l))
    }

    /// Every interval, each with its latency summary.
    pub fn finish(mut self) -> Vec<IntervalPoint> {
        for (k, l) in std::mem::take(&mut self.open) {
            self.close(k, &l);
        }
        self.points
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000;

    #[test]
    fn records_fall_into_their_intervals() {
        let start = 1_000 * S;
        let mut s = Series::new(start, S);
        s.produced(start + 100, 10, 1000);
        s.produced(start + S + 5, 3, 300);
        // Sent at 0.1 s, read at 0.105 s: 5 ms.
        s.received(start + 105_000, start + 100_000, 100);
        s.received(start + 2 * S + 20_000, start + 2 * S, 100);
        s.duplicate(start + 2 * S + 1);
        let overall = s.overall().expect("latencies");
        assert_eq!(overall.count, 2);
        let pts = s.finish();
        assert_eq!(pts.len(), 3);
        assert_eq!((pts[0].produced, pts[0].produced_bytes), (10, 1000));
        assert_eq!((pts[1].produced, pts[1].received), (3, 0));
        assert_eq!(pts[1].latency, None);
        assert_eq!(pts[2].start_s, 2.0);
        assert_eq!(pts[2].duplicates, 1);
        let l0 = pts[0].latency.expect("interval 0 latency");
        assert!((l0.p50_ms - 5.0).abs() < 0.01, "{l0:?}");
        let l2 = pts[2].latency.expect("interval 2 latency");
        assert!((l2.max_ms - 20.0).abs() < 0.05, "{l2:?}");
    }

    #[test]
    fn percentiles_of_one_interval() {
        let mut s = Series::new(0, S);
        // 1..=1000 ms: p50 500, p90 900, p99 990, p99.9 999, max 1000 (3 significant digits).
        for ms in 1..=1000u64 {
            s.received(10 * S, 10 * S - ms * 1000, 1);
        }
        let p = s.finish()[10].latency.expect("latency");
        assert_eq!(p.count, 1000);
        for (got, want) in [
            (p.p50_ms, 500.0),
            (p.p90_ms, 900.0),
            (p.p99_ms, 990.0),
            (p.p999_ms, 999.0),
            (p.max_ms, 1000.0),
        ] {
            assert!((got - want).abs() / want < 0.002, "{got} vs {want}");
        }
    }

    #[test]
    fn old_intervals_close_and_late_arrivals_join_the_oldest_open_one() {
        let mut s = Series::new(0, S);
        for i in 0..10u64 {
            s.received(i * S, i * S, 1);
        }
        assert_eq!(s.open.len(), OPEN_INTERVALS);
        // The clock stepped back to interval 2: counted in the oldest open one (7).
        s.received(2 * S, 2 * S - 1000, 1);
        let pts = s.finish();
        assert_eq!(pts[2].received, 2);
        assert_eq!(pts[7].latency.map(|l| l.count), Some(2));
        assert!(pts.iter().all(|p| p.latency.is_some()));
    }

    #[test]
    fn times_before_the_start_and_far_after_are_bounded() {
        let mut s = Series::new(10 * S, S);
        s.produced(0, 1, 1);
        assert_eq!(s.index(u64::MAX), MAX_INTERVALS - 1);
        assert_eq!(s.finish()[0].produced, 1);
    }
}
