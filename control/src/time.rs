//! The control loop's notion of "due": a periodic timer that is told the time instead of
//! reading a clock, so every duty's schedule is testable without waiting.
//! [`wall_ms`] is the wall-clock read the IO code (control loop, API, commands) shares.
#![deny(clippy::disallowed_methods)]

use std::time::{Duration, Instant};

/// A periodic duty: due at `next`, then every `interval`. Disabled duties are never due.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Every {
    interval: Duration,
    next: Option<Instant>,
}

impl Every {
    /// A duty first due at `first`, then every `interval_seconds` (at least one second, so a
    /// zero interval cannot spin the control loop). `enabled = false` makes it never due.
    pub fn new(enabled: bool, interval_seconds: u64, first: Instant) -> Every {
        Every {
            interval: Duration::from_secs(interval_seconds.max(1)),
            next: enabled.then_some(first),
        }
    }

    /// Same, with the interval in milliseconds (at least 1 ms).
    pub fn from_millis(enabled: bool, interval_ms: u64, first: Instant) -> Every {
        Every {
            interval: Duration::from_millis(interval_ms.max(1)),
            next: enabled.then_some(first),
        }
    }

    /// Whether the duty is due at `now`.
    pub fn due(&self, now: Instant) -> bool {
        self.next.is_some_and(|n| now >= n)
    }

    /// The duty ran at `now`: next due one interval later (never, if that overflows).
    pub fn done(&mut self, now: Instant) {
        if self.next.is_some() {
            self.next = now.checked_add(self.interval);
        }
    }

    /// Whether the duty runs at all.
    pub fn enabled(&self) -> bool {
        self.next.is_some()
    }

    /// The interval.
    pub fn interval(&self) -> Duration {
        self.interval
    }
}

/// The wait before the next attempt of something that failed `failed` times in a row (or, for
/// work left over, was left that many times): 1 s, doubling, at most 30 s.
pub fn retry_delay(failed: u32) -> Duration {
    Duration::from_secs(1u64 << failed.saturating_sub(1).min(5)).min(Duration::from_secs(30))
}

/// The wall clock now, in ms since the epoch (0 if the clock is before it): read only by IO
/// code (the control loop, the API, one-shot commands), which hands it to sans-IO code.
#[allow(clippy::disallowed_methods)] // for IO code only; the timers above take the time
pub fn wall_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_delays_double_up_to_thirty_seconds() {
        let s: Vec<u64> = (0..8).map(|n| retry_delay(n).as_secs()).collect();
        assert_eq!(s, [1, 1, 2, 4, 8, 16, 30, 30]);
        assert_eq!(retry_delay(u32::MAX), Duration::from_secs(30));
    }

    #[test]
    fn schedule() {
        #[allow(clippy::disallowed_methods)] // a test needs some instant to start from
        let t0 = Instant::now();
        let mut e = Every::new(true, 10, t0);
        assert!(e.due(t0));
        e.done(t0);
        assert!(!e.due(t0 + Duration::from_secs(9)));
        assert!(e.due(t0 + Duration::from_secs(10)));
        let off = Every::new(false, 10, t0);
        assert!(!off.due(t0 + Duration::from_secs(1_000)));
        // A zero interval still waits a second.
        let mut z = Every::new(true, 0, t0);
        z.done(t0);
        assert!(!z.due(t0));
        assert!(z.due(t0 + Duration::from_secs(1)));
    }
}
