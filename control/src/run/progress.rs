//! Live progress of `strait run`: per flow the records copied per second and the lag, for all
//! flows the MiB/s (the shards count bytes per shard, not per flow) and, with
//! `--until-caught-up`, an ETA from the records still to copy. On a terminal it is drawn with
//! indicatif and refreshed every second; otherwise one log line (`progress`) is written every
//! `--progress-interval` seconds.
//!
//! [`Meter`] is pure: it takes counters and the time, and gives rates.
#![deny(clippy::disallowed_methods)]

use std::collections::HashMap;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use strait_dataplane::shard::ShardStats;

use super::FlowRuntime;
use super::assign::Partitions;

/// Where progress goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgressOutput {
    /// Drawn on the terminal (stderr), refreshed every second.
    Terminal,
    /// One log line at this interval.
    Log(Duration),
}

/// What one flow has done so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowSample {
    pub name: String,
    /// Records copied since start.
    pub copied: u64,
    /// Records on the source not yet on the target (at the last fetch).
    pub lag: i64,
    /// `--until-caught-up`: records still to copy to reach the ends seen at start.
    pub remaining: i64,
}

/// One flow's rates.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowRate {
    pub name: String,
    pub records_per_s: f64,
    pub lag: i64,
    pub copied: u64,
    pub remaining: i64,
}

/// The rates of one interval.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    pub flows: Vec<FlowRate>,
    /// All flows together.
    pub mib_per_s: f64,
    pub records_per_s: f64,
    pub lag: i64,
    /// `--until-caught-up`: the time left at the current rate; `None` while nothing moves.
    pub eta: Option<Duration>,
}

/// Turns counters into rates, interval by interval.
#[derive(Debug, Default)]
pub struct Meter {
    last: Option<(Instant, HashMap<String, u64>, u64)>,
}

impl Meter {
    /// The rates since the last sample (zero at the first), at `now`; `bytes` counts every
    /// shard's produced bytes since start.
    pub fn sample(&mut self, now: Instant, flows: &[FlowSample], bytes: u64) -> Report {
        let (secs, before, bytes_before) = match &self.last {
            Some((t, c, b)) => (
                now.saturating_duration_since(*t).as_secs_f64(),
                c.clone(),
                *b,
            ),
            None => (0.0, HashMap::new(), bytes),
        };
        let rate = |now: u64, then: u64| {
            if secs > 0.0 {
                now.saturating_sub(then) as f64 / secs
            } else {
                0.0
            }
        };
        let rates: Vec<FlowRate> = flows
            .iter()
            .map(|f| FlowRate {
                name: f.name.clone(),
                records_per_s: rate(f.copied, before.get(&f.name).copied().unwrap_or(f.copied)),
                lag: f.lag,
                copied: f.copied,
                remaining: f.remaining,
            })
            .collect();
        let records_per_s: f64 = rates.iter().map(|r| r.records_per_s).sum();
        let remaining: i64 = flows.iter().map(|f| f.remaining.max(0)).sum();
        let eta = if remaining == 0 {
            Some(Duration::ZERO)
        } else if records_per_s > 0.0 {
            Duration::try_from_secs_f64(remaining as f64 / records_per_s).ok()
        } else {
            None
        };
        self.last = Some((
            now,
            flows.iter().map(|f| (f.name.clone(), f.copied)).collect(),
            bytes,
        ));
        Report {
            mib_per_s: rate(bytes, bytes_before) / (1024.0 * 1024.0),
            records_per_s,
            lag: flows.iter().map(|f| f.lag).sum(),
            flows: rates,
            eta,
        }
    }
}

/// Per flow, `name: N rec/s, lag L`, joined by `; `.
pub fn flows_text(r: &Report) -> String {
    let mut out = String::new();
    for (i, f) in r.flows.iter().enumerate() {
        if i > 0 {
            out.push_str("; ");
        }
        let _ = write!(
            out,
            "{}: {:.0} rec/s, lag {}",
            f.name, f.records_per_s, f.lag
        );
    }
    out
}

/// The live progress of a run.
pub(crate) struct LiveProgress {
    output: ProgressOutput,
    until_caught_up: bool,
    meter: Meter,
    next: Option<Instant>,
    bars: Option<Bars>,
}

/// The terminal's drawing: one line per flow and one for all.
struct Bars {
    multi: indicatif::MultiProgress,
    flows: HashMap<String, indicatif::ProgressBar>,
    total: indicatif::ProgressBar,
}

impl LiveProgress {
    pub(crate) fn new(output: ProgressOutput, until_caught_up: bool) -> LiveProgress {
        LiveProgress {
            output,
            until_caught_up,
            meter: Meter::default(),
            next: None,
            bars: None,
        }
    }

    /// Samples and shows progress when due (every second on a terminal, else every interval).
    pub(crate) fn tick(
        &mut self,
        flows: &[FlowRuntime],
        parts: &Partitions,
        stats: &HashMap<usize, ShardStats>,
        now: Instant,
    ) {
        let every = match self.output {
            ProgressOutput::Terminal => Duration::from_secs(1),
            ProgressOutput::Log(d) => d,
        };
        if self.next.is_some_and(|t| now < t) {
            return;
        }
        self.next = Some(now + every);
        let bytes = stats.values().map(|s| s.produced_bytes).sum();
        let report = self.meter.sample(now, &samples(flows, parts), bytes);
        match self.output {
            ProgressOutput::Terminal => self.draw(&report),
            ProgressOutput::Log(_) => self.log(&report),
        }
    }

    fn log(&self, r: &Report) {
        let flows = flows_text(r);
        let mib_per_s = (r.mib_per_s * 100.0).round() / 100.0;
        let records_per_s = r.records_per_s.round() as u64;
        match (self.until_caught_up, r.eta) {
            (true, Some(eta)) => tracing::info!(
                records_per_s,
                mib_per_s,
                lag_records = r.lag,
                eta_s = eta.as_secs(),
                flows = %flows,
                "progress"
            ),
            _ => tracing::info!(
                records_per_s,
                mib_per_s,
                lag_records = r.lag,
                flows = %flows,
                "progress"
            ),
        }
    }

    fn draw(&mut self, r: &Report) {
        let bars = self.bars.get_or_insert_with(|| {
            let multi = indicatif::MultiProgress::new();
            let total = multi.add(indicatif::ProgressBar::new_spinner());
            Bars {
                multi,
                flows: HashMap::new(),
                total,
            }
        });
        for f in &r.flows {
            let bar = bars.flows.entry(f.name.clone()).or_insert_with(|| {
                let b = bars
                    .multi
                    .insert_before(&bars.total, indicatif::ProgressBar::new_spinner());
                b.set_style(
                    indicatif::ProgressStyle::with_template("{prefix:>12} {msg}")
                        .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
                );
                b.set_prefix(f.name.clone());
                b
            });
            bar.set_message(format!(
                "{:>10.0} rec/s  lag {:>10}  copied {:>12}",
                f.records_per_s, f.lag, f.copied
            ));
        }
        let eta = match (self.until_caught_up, r.eta) {
            (true, Some(d)) => format!("  ETA {}", indicatif::HumanDuration(d)),
            (true, None) => "  ETA -".into(),
            (false, _) => String::new(),
        };
        bars.total.set_message(format!(
            "all flows: {:.0} rec/s  {:.2} MiB/s  lag {}{eta}",
            r.records_per_s, r.mib_per_s, r.lag
        ));
    }

    /// At the end of the run, after the shards' final reports: the last log line, or the
    /// terminal's drawing cleared.
    pub(crate) fn finish(
        &mut self,
        flows: &[FlowRuntime],
        parts: &Partitions,
        stats: &HashMap<usize, ShardStats>,
        now: Instant,
    ) {
        if let ProgressOutput::Log(_) = self.output {
            let bytes = stats.values().map(|s| s.produced_bytes).sum();
            let report = self.meter.sample(now, &samples(flows, parts), bytes);
            self.log(&report);
        }
        if let Some(b) = self.bars.take() {
            for bar in b.flows.values() {
                bar.finish_and_clear();
            }
            b.total.finish_and_clear();
        }
    }
}

/// Each running flow's counters from the partition table.
fn samples(flows: &[FlowRuntime], parts: &Partitions) -> Vec<FlowSample> {
    let mut out: Vec<FlowSample> = flows
        .iter()
        .map(|f| FlowSample {
            name: f.name(),
            copied: 0,
            lag: 0,
            remaining: 0,
        })
        .collect();
    for (key, st) in parts {
        let Some(s) = out.get_mut(key.flow as usize) else {
            continue;
        };
        s.copied += st.records_copied;
        if st.end_offset >= 0 {
            s.lag += (st.end_offset - st.next_offset).max(0);
        }
        if st.failed.is_none() && !st.vanished {
            s.remaining += (st.target_end - st.next_offset).max(0);
        }
    }
    let mut i = 0;
    out.retain(|_| {
        i += 1;
        flows.get(i - 1).is_some_and(|f| !f.retired)
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(name: &str, copied: u64, lag: i64, remaining: i64) -> FlowSample {
        FlowSample {
            name: name.into(),
            copied,
            lag,
            remaining,
        }
    }

    #[test]
    fn rates_and_eta_come_from_the_interval() {
        #[allow(clippy::disallowed_methods)] // a test needs some instant to start from
        let t0 = Instant::now();
        let mut m = Meter::default();
        let first = m.sample(t0, &[flow("A->B", 100, 900, 900)], 0);
        assert_eq!(first.records_per_s, 0.0);
        assert_eq!(first.eta, None, "nothing moved yet");
        let r = m.sample(
            t0 + Duration::from_secs(2),
            &[flow("A->B", 300, 700, 700), flow("C->B", 50, 0, 0)],
            4 << 20,
        );
        assert_eq!(r.flows[0].records_per_s, 100.0);
        // A flow seen for the first time has no rate yet.
        assert_eq!(r.flows[1].records_per_s, 0.0);
        assert_eq!(r.mib_per_s, 2.0);
        assert_eq!(r.lag, 700);
        assert_eq!(r.eta, Some(Duration::from_secs(7)));
        assert_eq!(
            flows_text(&r),
            "A->B: 100 rec/s, lag 700; C->B: 0 rec/s, lag 0"
        );
        let done = m.sample(
            t0 + Duration::from_secs(3),
            &[flow("A->B", 1000, 0, 0)],
            4 << 20,
        );
        assert_eq!(done.eta, Some(Duration::ZERO));
        assert_eq!(done.mib_per_s, 0.0);
    }
}
