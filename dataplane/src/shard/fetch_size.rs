//! How many bytes one partition asks for in a fetch.
//!
//! With one fetch in flight per source connection, a partition moves at most what it asks for
//! per round trip: at 1 MiB (Kafka's `max.partition.fetch.bytes`) and 150 ms, under 7 MiB/s.
//! So while a partition is behind and its answers come back full, its ask doubles, up to a
//! ceiling (the user's explicit `max.partition.fetch.bytes` means no growth at all; otherwise
//! `fetch.max.bytes` and a share of the shard's memory budget); once a fetch reaches the end of
//! the readable log, it halves back towards the configured size, so that idle partitions do not
//! reserve memory they will not fill. This is slow start without the loss signal: the memory
//! budget and the fetch's total `max_bytes` do the bounding.

/// The fetch size of one partition (sans-IO: fed what each answer returned).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchSize {
    base_bytes: usize,
    ceiling_bytes: usize,
    current_bytes: usize,
}

impl FetchSize {
    /// Starts at `base_bytes` (at least 1) and never grows past `ceiling_bytes` (raised to the
    /// base if below it).
    pub fn new(base_bytes: usize, ceiling_bytes: usize) -> Self {
        let base_bytes = base_bytes.max(1);
        FetchSize {
            base_bytes,
            ceiling_bytes: ceiling_bytes.max(base_bytes),
            current_bytes: base_bytes,
        }
    }

    /// What the next fetch asks for.
    pub fn bytes(&self) -> usize {
        self.current_bytes
    }

    /// Takes what an answer held: `returned_bytes` of record sets, and whether the fetch
    /// position reached the end of the readable log with it.
    ///
    /// An answer at least half of the ask is full (the broker returns whole batches up to the
    /// ask, so a full one falls short by less than a batch); a shorter one that is not at the end
    /// was cut by the response's total `max_bytes` or by the log segment, and changes nothing.
    pub fn observe(&mut self, returned_bytes: usize, reached_end: bool) {
        if reached_end {
            self.current_bytes = (self.current_bytes / 2).max(self.base_bytes);
        } else if returned_bytes.saturating_mul(2) >= self.current_bytes {
            self.current_bytes = self.current_bytes.saturating_mul(2).min(self.ceiling_bytes);
        }
        debug_assert!(
            (self.base_bytes..=self.ceiling_bytes).contains(&self.current_bytes),
            "{self:?}"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MIB: usize = 1 << 20;

    #[test]
    fn a_partition_behind_with_full_answers_doubles_up_to_the_ceiling() {
        let mut s = FetchSize::new(MIB, 12 * MIB);
        for want in [2, 4, 8, 12, 12] {
            s.observe(s.bytes() - 1000, false);
            assert_eq!(s.bytes(), want * MIB);
        }
    }

    #[test]
    fn reaching_the_end_halves_back_to_the_base() {
        let mut s = FetchSize::new(MIB, 16 * MIB);
        for _ in 0..4 {
            s.observe(s.bytes(), false);
        }
        assert_eq!(s.bytes(), 16 * MIB);
        for want in [8, 4, 2, 1, 1] {
            s.observe(100, true);
            assert_eq!(s.bytes(), want * MIB);
        }
    }

    #[test]
    fn a_short_answer_not_at_the_end_changes_nothing() {
        let mut s = FetchSize::new(MIB, 16 * MIB);
        s.observe(MIB, false);
        s.observe(0, false);
        s.observe(MIB - 1, false);
        assert_eq!(s.bytes(), 2 * MIB);
    }

    #[test]
    fn an_explicit_size_never_grows() {
        let mut s = FetchSize::new(4096, 4096);
        s.observe(4096, false);
        assert_eq!(s.bytes(), 4096);
        // A ceiling below the base is the base.
        let mut s = FetchSize::new(MIB, 1);
        s.observe(MIB, false);
        assert_eq!(s.bytes(), MIB);
    }

    proptest! {
        #[test]
        fn the_ask_stays_between_base_and_ceiling(
            base in 0usize..(64 * MIB),
            ceiling in 0usize..(256 * MIB),
            answers in proptest::collection::vec((0usize..(512 * MIB), any::<bool>()), 0..64),
        ) {
            let mut s = FetchSize::new(base, ceiling);
            for (returned, end) in answers {
                let before = s.bytes();
                s.observe(returned, end);
                prop_assert!(s.bytes() >= base.max(1));
                prop_assert!(s.bytes() <= ceiling.max(base.max(1)));
                if end {
                    prop_assert!(s.bytes() <= before);
                } else {
                    prop_assert!(s.bytes() >= before);
                }
            }
        }
    }
}
