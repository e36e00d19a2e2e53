//! Retry pacing and retry logging, sans IO: exponential backoff with jitter (Kafka's
//! `ExponentialBackoff`), a small seeded random source for the jitter, and [`Incidents`], which
//! turns a stream of failures into one line when an incident starts, a summary now and then while
//! it lasts, and one line when it ends.
#![deny(clippy::disallowed_methods)]

use std::collections::HashMap;
use std::fmt;
use std::hash::Hash;
use std::time::{Duration, Instant};

/// Jitter applied to every delay: ±20 %, as Kafka's clients do.
const JITTER: f64 = 0.2;

/// A small deterministic random source (SplitMix64): the jitter of one shard. Seeded, so the
/// simulation replays exactly.
#[derive(Debug, Clone)]
pub struct Jitter(u64);

impl Jitter {
    pub fn new(seed: u64) -> Self {
        Jitter(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A uniform value in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// A delay that doubles from `base_ms` to `max_ms` with each failed attempt and starts again at
/// `base_ms` after a success.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    base_ms: u64,
    max_ms: u64,
    attempts: u32,
}

impl Backoff {
    /// A `max_ms` below `base_ms` caps every delay at `max_ms`, as in Kafka.
    pub fn new(base_ms: u64, max_ms: u64) -> Self {
        Backoff {
            base_ms,
            max_ms,
            attempts: 0,
        }
    }

    /// Failures since the last success.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// Counts a failure and returns how long to wait before the next attempt.
    pub fn fail(&mut self, jitter: &mut Jitter) -> Duration {
        let delay = self.delay(jitter);
        self.attempts = self.attempts.saturating_add(1);
        delay
    }

    /// The delay after `attempts` failures, without counting one.
    fn delay(&self, jitter: &mut Jitter) -> Duration {
        if self.base_ms == 0 || self.max_ms == 0 {
            return Duration::ZERO;
        }
        let cap = self.max_ms as f64;
        let term = (self.base_ms as f64) * 2f64.powi(self.attempts.min(62) as i32);
        let term = term.min(cap);
        let factor = 1.0 - JITTER + 2.0 * JITTER * jitter.unit();
        let ms = (term * factor).min(cap).max(0.0);
        Duration::from_micros((ms * 1000.0) as u64)
    }

    /// A success: the next failure waits `base_ms` again.
    pub fn reset(&mut self) {
        self.attempts = 0;
    }
}

/// One ongoing incident: something keeps failing.
#[derive(Debug, Clone)]
struct Incident {
    started: Instant,
    attempts: u64,
    last_summary: Instant,
    last_error: String,
}

/// What [`Incidents::failed`] says to log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Report {
    /// The first failure of a new incident.
    Started,
    /// The incident goes on: `attempts` failures in `for_ms`, the last being the one just seen.
    StillFailing { attempts: u64, for_ms: u64 },
    /// Nothing to log now.
    Quiet,
}

/// Failures grouped into incidents, one per key (a broker, a cluster's lookups...), so that the
/// log says what happened once per incident, not once per retry.
#[derive(Debug)]
pub struct Incidents<K> {
    open: HashMap<K, Incident>,
    summary_every: Duration,
}

impl<K: Hash + Eq + Clone + fmt::Debug> Incidents<K> {
    /// `summary_every`: how often an ongoing incident is summarised.
    pub fn new(summary_every: Duration) -> Self {
        Incidents {
            open: HashMap::new(),
            summary_every,
        }
    }

    /// Records a failure; says whether it starts an incident or is due for a summary.
    pub fn failed(&mut self, key: &K, error: &dyn fmt::Display, now: Instant) -> Report {
        match self.open.get_mut(key) {
            None => {
                self.open.insert(
                    key.clone(),
                    Incident {
                        started: now,
                        attempts: 1,
                        last_summary: now,
                        last_error: error.to_string(),
                    },
                );
                Report::Started
            }
            Some(i) => {
                i.attempts += 1;
                if now.saturating_duration_since(i.last_summary) >= self.summary_every {
                    i.last_summary = now;
                    i.last_error = error.to_string();
                    Report::StillFailing {
                        attempts: i.attempts,
                        for_ms: millis(now.saturating_duration_since(i.started)),
                    }
                } else {
                    Report::Quiet
                }
            }
        }
    }

    /// Ends the incident of `key`, if one is open: `(failures, duration in ms)`.
    pub fn recovered(&mut self, key: &K, now: Instant) -> Option<(u64, u64)> {
        self.open
            .remove(key)
            .map(|i| (i.attempts, millis(now.saturating_duration_since(i.started))))
    }

    /// Whether an incident is open for `key`.
    pub fn is_open(&self, key: &K) -> bool {
        self.open.contains_key(key)
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_to_the_cap_with_bounded_jitter_and_reset_after_success() {
        let mut j = Jitter::new(1);
        let mut b = Backoff::new(50, 1_000);
        let mut last_term = 0.0;
        for n in 0..10 {
            let d = b.fail(&mut j).as_secs_f64() * 1000.0;
            let term = (50.0 * 2f64.powi(n)).min(1000.0);
            assert!(
                d >= term * 0.8 - 0.01 && d <= (term * 1.2).min(1000.0) + 0.01,
                "{n}: {d}"
            );
            assert!(term >= last_term);
            last_term = term;
        }
        assert_eq!(b.attempts(), 10);
        b.reset();
        let d = b.fail(&mut j).as_secs_f64() * 1000.0;
        assert!((40.0..=60.0).contains(&d), "{d}");
        // A cap below the base caps everything; a zero base never waits.
        let mut low = Backoff::new(500, 100);
        assert!(low.fail(&mut j) <= Duration::from_millis(100));
        assert_eq!(Backoff::new(0, 1000).fail(&mut j), Duration::ZERO);
    }

    #[test]
    fn jitter_replays_from_its_seed() {
        let a: Vec<u64> = (0..5)
            .scan(Jitter::new(7), |j, _| Some(j.next_u64()))
            .collect();
        let b: Vec<u64> = (0..5)
            .scan(Jitter::new(7), |j, _| Some(j.next_u64()))
            .collect();
        assert_eq!(a, b);
        assert!((0..1000).all(|_| (0.0..1.0).contains(&Jitter::new(3).unit())));
    }

    #[test]
    fn one_line_per_incident_then_summaries_then_recovery() {
        let t0 = Instant::now();
        let mut inc: Incidents<&str> = Incidents::new(Duration::from_secs(30));
        assert_eq!(inc.failed(&"b1", &"refused", t0), Report::Started);
        for s in 1..30 {
            assert_eq!(
                inc.failed(&"b1", &"refused", t0 + Duration::from_secs(s)),
                Report::Quiet
            );
        }
        assert_eq!(
            inc.failed(&"b1", &"refused", t0 + Duration::from_secs(30)),
            Report::StillFailing {
                attempts: 31,
                for_ms: 30_000
            }
        );
        // Another key is its own incident.
        assert_eq!(inc.failed(&"b2", &"refused", t0), Report::Started);
        assert_eq!(
            inc.recovered(&"b1", t0 + Duration::from_secs(31)),
            Some((31, 31_000))
        );
        assert_eq!(inc.recovered(&"b1", t0), None);
        assert!(inc.is_open(&"b2"));
    }
}
