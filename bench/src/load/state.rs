//! What one load run knows while it runs, shared by its producer and consumer tasks (all on
//! one thread: `Rc<RefCell<Run>>`). Pure: times are inputs.
#![forbid(unsafe_code)]

use crate::stats::MIB;

use super::series::Series;
use super::stamp::LoadStamp;
use super::track::{Arrival, Tracker};

/// The state of a run.
#[derive(Debug)]
pub struct Run {
    pub run_id: u64,
    /// When production started, µs since the epoch.
    pub start_us: u64,
    pub tracker: Tracker,
    pub series: Series,
    /// Records and key+value+header bytes the source acknowledged.
    pub produced_records: u64,
    pub produced_bytes: u64,
    /// Key+value+header bytes of the first copies read.
    pub received_bytes: u64,
    /// Records on the remote topic that this run did not write (other runs, other producers).
    pub foreign: u64,
    pub first_arrival_us: Option<u64>,
    pub last_arrival_us: Option<u64>,
    /// Set once every producer task ended.
    pub production_ended_us: Option<u64>,
    /// Stop producing (Ctrl-C, a producer failed, or the tracking limit).
    pub stop: bool,
    /// Why production stopped early, if it did.
    pub stop_reason: Option<String>,
    /// Most records that were due by the rate but not yet sent, at any moment: large values
    /// mean the source (or this process) could not take the rate, not that replication lagged.
    pub max_behind_records: u64,
    pub fetch_errors: u64,
    pub last_fetch_error: Option<String>,
    /// The consumers ended (progress stops).
    pub finished: bool,
}

impl Run {
    pub fn new(run_id: u64, start_us: u64, partitions: usize, interval_us: u64) -> Run {
        Run {
            run_id,
            start_us,
            tracker: Tracker::new(partitions),
            series: Series::new(start_us, interval_us),
            produced_records: 0,
            produced_bytes: 0,
            received_bytes: 0,
            foreign: 0,
            first_arrival_us: None,
            last_arrival_us: None,
            production_ended_us: None,
            stop: false,
            stop_reason: None,
            max_behind_records: 0,
            fetch_errors: 0,
            last_fetch_error: None,
            finished: false,
        }
    }

    /// The source acknowledged `records` of `bytes` in all, sent at `sent_us`.
    pub fn produced(&mut self, sent_us: u64, records: u64, bytes: u64) {
        self.produced_records += records;
        self.produced_bytes += bytes;
        self.series.produced(sent_us, records, bytes);
    }

    /// A record with `value` (and `bytes` of key, value and headers) read from partition
    /// `read_from` of the remote topic at `t_us`.
    pub fn on_record(&mut self, value: Option<&[u8]>, bytes: u64, read_from: i32, t_us: u64) {
        let stamp = value
            .and_then(LoadStamp::read)
            .filter(|s| s.run_id == self.run_id);
        let Some(s) = stamp else {
            self.foreign += 1;
            return;
        };
        match self.tracker.arrived(s.partition, s.seq, read_from) {
            Arrival::First => {
                self.received_bytes += bytes;
                self.series.received(t_us, s.send_us, bytes);
                self.first_arrival_us.get_or_insert(t_us);
                self.last_arrival_us = Some(t_us);
            }
            Arrival::Duplicate => self.series.duplicate(t_us),
            Arrival::Unexpected => {}
        }
    }

    /// Stop reading: production ended, and every record sent arrived or `drain_us` passed.
    pub fn reading_done(&self, now_us: u64, drain_us: u64) -> bool {
        self.production_ended_us
            .is_some_and(|end| self.tracker.complete() || now_us >= end.saturating_add(drain_us))
    }

    /// One line of live progress.
    pub fn progress_line(&self, now_us: u64) -> String {
        let t = self.tracker.totals();
        let elapsed_s = (now_us.saturating_sub(self.start_us) as f64 / 1e6).max(1e-3);
        let lat = self
            .series
            .latest()
            .map_or("-".to_string(), |p| format!("{:.1} ms", p.p99_ms));
        let phase = match self.production_ended_us {
            None => "producing",
            Some(_) => "draining",
        };
        format!(
            "{phase} {elapsed_s:.0} s: produced {} ({:.0}/s, {:.2} MiB/s), received {} ({:.0}/s), not yet seen {}, duplicated {}, p99 now {lat}",
            self.produced_records,
            self.produced_records as f64 / elapsed_s,
            self.produced_bytes as f64 / MIB / elapsed_s,
            t.received,
            t.received as f64 / elapsed_s,
            t.lost,
            t.duplicated,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;

    fn stamped(run_id: u64, partition: u32, seq: u64, send_us: u64) -> Vec<u8> {
        let mut b = BytesMut::new();
        LoadStamp {
            run_id,
            partition,
            seq,
            send_us,
        }
        .put(&mut b);
        b.to_vec()
    }

    #[test]
    fn records_of_other_runs_and_strangers_are_foreign() {
        let mut r = Run::new(7, 0, 1, 1_000_000);
        r.tracker.sent(0, 2);
        r.on_record(Some(&stamped(8, 0, 0, 0)), 10, 0, 5);
        r.on_record(Some(b"hello"), 10, 0, 5);
        r.on_record(None, 0, 0, 5);
        r.on_record(Some(&stamped(7, 0, 1, 1000)), 32, 0, 3000);
        r.on_record(Some(&stamped(7, 0, 1, 1000)), 32, 0, 4000);
        assert_eq!(r.foreign, 3);
        let t = r.tracker.totals();
        assert_eq!((t.received, t.duplicated, t.lost), (1, 1, 1));
        assert_eq!(r.received_bytes, 32);
        assert_eq!(r.series.overall().map(|p| p.count), Some(1));
    }

    #[test]
    fn reading_ends_when_all_arrived_or_the_drain_passes() {
        let mut r = Run::new(7, 0, 1, 1_000_000);
        r.tracker.sent(0, 1);
        assert!(!r.reading_done(10, 5));
        r.production_ended_us = Some(100);
        assert!(!r.reading_done(104, 5));
        assert!(r.reading_done(105, 5));
        r.on_record(Some(&stamped(7, 0, 0, 50)), 32, 0, 103);
        assert!(r.reading_done(103, 5));
    }
}
