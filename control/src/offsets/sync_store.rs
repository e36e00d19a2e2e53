//! A port of MM2's `OffsetSyncStore` (`connect/mirror/.../OffsetSyncStore.java`, the
//! KAFKA-15202 algorithm with KAFKA-15905's initial-load handling).
//!
//! strait rebuilds it from the offset-syncs topic after a restart and uses it to translate
//! exactly like MM2 wherever its own exact mapping has no answer.
//!
//! Per source partition the store keeps an array of [`SYNCS_PER_PARTITION`] syncs with these
//! invariants (from the Java class doc):
//! - A: `syncs[0]` is the latest sync;
//! - B: for `i < j` with `syncs[i] != syncs[j]`: `syncs[i].upstream <= syncs[j].upstream + 2^j - 2^i`;
//! - C: for `i < j` with `syncs[i] != syncs[j]`: `syncs[i].upstream >= syncs[j].upstream + 2^(i-2)`;
//! - D: `syncs[63]` is the earliest sync usable for translation.
//!
//! `!=` is object identity in Java: two syncs with equal offsets read from two records are
//! different. The port gives every handled sync a unique [`StoredSync::id`] (a counter of the
//! store) and compares ids. Arithmetic wraps like Java's `long`.
//!
//! Sans-IO: the caller reads the topic (partition 0 only, from the beginning), calls
//! [`OffsetSyncStore::start`] first, [`OffsetSyncStore::handle_record`] for each record, and
//! [`OffsetSyncStore::mark_read_to_end`] once it has reached the end offset it saw at start.
//! Until then nothing is translated, as in MM2.

use std::collections::HashMap;

use thiserror::Error;

use super::TopicPartition;
use super::format::{FormatError, OffsetSync};

/// Syncs kept per partition: one per bit of an offset (`Long.SIZE`).
pub const SYNCS_PER_PARTITION: usize = 64;

/// Default bound on partitions held. Each costs `64 * 24` bytes of syncs plus its key.
pub const DEFAULT_MAX_PARTITIONS: usize = 100_000;

/// Errors from the sync store.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum SyncStoreError {
    /// A record of the offset-syncs topic did not decode.
    #[error("undecodable offset-sync record: {0}")]
    Format(#[from] FormatError),
    /// A sync for a new partition beyond the configured bound; it was not stored.
    #[error("{tp}: offset-sync store already holds its maximum of {max_partitions} partitions")]
    TooManyPartitions {
        /// The partition of the rejected sync.
        tp: TopicPartition,
        /// The bound.
        max_partitions: usize,
    },
}

/// One stored sync. `id` stands for Java's object identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoredSync {
    /// Unique per handled sync; equal ids mean "the same object".
    pub id: u64,
    /// Upstream offset.
    pub upstream_offset: i64,
    /// Downstream offset.
    pub downstream_offset: i64,
}

/// Result of [`OffsetSyncStore::lookup`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncLookup {
    /// The offset is before the earliest retained sync (MM2 returns -1).
    BeforeEarliest,
    /// Translated by MM2's rule; `exact` when the sync is for this very upstream offset.
    Translated {
        /// `sync.downstream + (upstream == sync.upstream ? 0 : 1)`.
        downstream: i64,
        /// True when `upstream == sync.upstream`.
        exact: bool,
    },
}

/// MM2's `OffsetSyncStore`. See the [module docs](self).
#[derive(Debug, Clone)]
pub struct OffsetSyncStore {
    syncs: HashMap<TopicPartition, Box<[StoredSync; SYNCS_PER_PARTITION]>>,
    next_id: u64,
    initialization_must_read_to_end: bool,
    read_to_end: bool,
    max_partitions: usize,
}

impl Default for OffsetSyncStore {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_PARTITIONS)
    }
}

impl OffsetSyncStore {
    /// An empty store holding at most `max_partitions` partitions.
    pub fn new(max_partitions: usize) -> Self {
        Self {
            syncs: HashMap::new(),
            next_id: 0,
            // Java's field defaults.
            initialization_must_read_to_end: true,
            read_to_end: false,
            max_partitions,
        }
    }

    /// Begins the initial load. With `initialization_must_read_to_end` (MM2 passes
    /// `!checkpointsReadOk`), every sync read before [`OffsetSyncStore::mark_read_to_end`]
    /// replaces the partition's whole history, so only the last one is kept: without previous
    /// checkpoints that keeps emitted checkpoints monotonic.
    pub fn start(&mut self, initialization_must_read_to_end: bool) {
        self.initialization_must_read_to_end = initialization_must_read_to_end;
    }

    /// The initial read reached the end of the topic: translation is now allowed.
    pub fn mark_read_to_end(&mut self) {
        self.read_to_end = true;
    }

    /// True once [`OffsetSyncStore::mark_read_to_end`] was called.
    pub fn is_read_to_end(&self) -> bool {
        self.read_to_end
    }

    /// Decodes one record of the offset-syncs topic and applies it.
    pub fn handle_record(&mut self, key: &[u8], value: &[u8]) -> Result<(), SyncStoreError> {
        let sync = OffsetSync::decode(key, value)?;
        self.handle_sync(&sync)
    }

    /// Applies one sync (Java's `handleRecord` after deserialisation).
    pub fn handle_sync(&mut self, sync: &OffsetSync) -> Result<(), SyncStoreError> {
        let new = StoredSync {
            id: self.next_id,
            upstream_offset: sync.upstream_offset,
            downstream_offset: sync.downstream_offset,
        };
        let only_load_last_offset = !self.read_to_end && self.initialization_must_read_to_end;
        let tp = sync.topic_partition();
        match self.syncs.get_mut(&tp) {
            Some(syncs) => {
                let original = **syncs;
                update_sync_array(syncs, &original, new, only_load_last_offset);
            }
            None => {
                if self.syncs.len() >= self.max_partitions {
                    return Err(SyncStoreError::TooManyPartitions {
                        tp,
                        max_partitions: self.max_partitions,
                    });
                }
                self.syncs.insert(tp, Box::new([new; SYNCS_PER_PARTITION]));
            }
        }
        self.next_id += 1;
        Ok(())
    }

    /// MM2's `translateDownstream`: `None` before the initial load completed or without syncs
    /// for the partition, `Some(-1)` before the earliest sync, otherwise
    /// `sync.downstream + (upstream == sync.upstream ? 0 : 1)` for the latest sync at or before
    /// `upstream`.
    pub fn translate_downstream(&self, tp: &TopicPartition, upstream: i64) -> Option<i64> {
        self.lookup(tp, upstream).map(|l| match l {
            SyncLookup::BeforeEarliest => -1,
            SyncLookup::Translated { downstream, .. } => downstream,
        })
    }

    /// [`OffsetSyncStore::translate_downstream`] with the detail of which case applied.
    pub fn lookup(&self, tp: &TopicPartition, upstream: i64) -> Option<SyncLookup> {
        if !self.read_to_end {
            return None;
        }
        let syncs = self.syncs.get(tp)?;
        let sync = syncs
            .iter()
            .find(|s| s.upstream_offset <= upstream)
            .unwrap_or(&syncs[SYNCS_PER_PARTITION - 1]);
        if sync.upstream_offset > upstream {
            return Some(SyncLookup::BeforeEarliest);
        }
        let exact = upstream == sync.upstream_offset;
        Some(SyncLookup::Translated {
            downstream: sync.downstream_offset.wrapping_add(i64::from(!exact)),
            exact,
        })
    }

    /// The downstream offset of the oldest retained sync whose upstream offset is past
    /// `upstream`: the exact position of `upstream` is at or before it. `None` when there is
    /// none.
    pub fn next_known_downstream(&self, tp: &TopicPartition, upstream: i64) -> Option<i64> {
        if !self.read_to_end {
            return None;
        }
        // Newest first: the last sync past `upstream` is the nearest one.
        self.syncs
            .get(tp)?
            .iter()
            .rev()
            .find(|s| s.upstream_offset > upstream)
            .map(|s| s.downstream_offset)
    }

    /// The sync array of a partition (Java's `syncFor`, for inspection and tests).
    pub fn syncs_for(&self, tp: &TopicPartition) -> Option<&[StoredSync; SYNCS_PER_PARTITION]> {
        self.syncs.get(tp).map(|b| &**b)
    }

    /// Number of partitions with syncs.
    pub fn partition_count(&self) -> usize {
        self.syncs.len()
    }
}

/// Java's `updateSyncArray`: `syncs` starts as a copy of `original` and is repaired in place.
fn update_sync_array(
    syncs: &mut [StoredSync; SYNCS_PER_PARTITION],
    original: &[StoredSync; SYNCS_PER_PARTITION],
    new: StoredSync,
    only_load_last_offset: bool,
) {
    // During a must-read-to-end load keep only the last sync; after an upstream rewind every
    // older sync is invalid.
    let upstream_rewind = new.upstream_offset < syncs[0].upstream_offset;
    if only_load_last_offset || upstream_rewind {
        *syncs = [new; SYNCS_PER_PARTITION];
        return;
    }
    let mut replacement = new;
    // Index into `original` of the next candidate to keep.
    let mut replacement_index = 0usize;
    // Invariant A: the latest sync is always first.
    syncs[0] = replacement;
    for current in 1..SYNCS_PER_PARTITION {
        let previous = current - 1;
        // Pick the best value of the old array that satisfies the invariants here, skipping
        // values that can never be used at a later index.
        loop {
            let old = original[replacement_index];
            let is_recent = invariant_b(&syncs[previous], &old, previous, current);
            let separated_from_previous = invariant_c(&syncs[previous], &old, previous);
            let next = current + 1;
            let separated_from_next =
                next >= SYNCS_PER_PARTITION || invariant_c(&old, &syncs[next], current);
            let next_replacement = replacement_index + 1;
            let duplicate =
                next_replacement < SYNCS_PER_PARTITION && old.id == original[next_replacement].id;
            let promote = is_recent && separated_from_previous && separated_from_next;
            if promote {
                replacement = old;
            }
            let skip_old_value = duplicate || !separated_from_previous;
            if promote || skip_old_value {
                replacement_index += 1;
            }
            if !(replacement_index < current && skip_old_value) {
                break;
            }
        }
        if invariant_b(&syncs[previous], &syncs[current], previous, current) {
            // B holds here, so it holds for the rest of the unchanged tail.
            break;
        }
        syncs[current] = replacement;
    }
}

/// Invariant B for `i_sync` at index `i` and `j_sync` at index `j > i`.
fn invariant_b(i_sync: &StoredSync, j_sync: &StoredSync, i: usize, j: usize) -> bool {
    let bound = j_sync
        .upstream_offset
        .wrapping_add(1i64.wrapping_shl(j as u32))
        .wrapping_sub(1i64.wrapping_shl(i as u32));
    i_sync.id == j_sync.id || bound < 0 || i_sync.upstream_offset <= bound
}

/// Invariant C for `i_sync` at index `i` and a later `j_sync`.
fn invariant_c(i_sync: &StoredSync, j_sync: &StoredSync, i: usize) -> bool {
    let bound = j_sync
        .upstream_offset
        .wrapping_add(1i64.wrapping_shl(i.saturating_sub(2) as u32));
    i_sync.id == j_sync.id || (bound >= 0 && i_sync.upstream_offset >= bound)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn tp() -> TopicPartition {
        TopicPartition::new("topic1", 2)
    }

    fn sync(store: &mut OffsetSyncStore, upstream: i64, downstream: i64) {
        let s = OffsetSync::new(&tp(), upstream, downstream);
        // Go through the wire format, like the Java test's FakeOffsetSyncStore.
        store
            .handle_record(&s.encode_key().unwrap(), &s.encode_value())
            .unwrap();
    }

    fn translate(store: &OffsetSyncStore, upstream: i64) -> Option<i64> {
        store.translate_downstream(&tp(), upstream)
    }

    fn started(must_read_to_end: bool) -> OffsetSyncStore {
        let mut store = OffsetSyncStore::default();
        store.start(must_read_to_end);
        store.mark_read_to_end();
        store
    }

    /// Java's `assertSparseSync`.
    fn assert_sparse_sync(store: &OffsetSyncStore, sync_offset: i64, previous_offset: i64) {
        let before = if previous_offset == -1 {
            -1
        } else {
            previous_offset + 1
        };
        assert_eq!(
            translate(store, sync_offset - 1),
            Some(before),
            "{sync_offset}-1"
        );
        assert_eq!(translate(store, sync_offset), Some(sync_offset));
        assert_eq!(translate(store, sync_offset + 1), Some(sync_offset + 1));
        assert_eq!(translate(store, sync_offset + 2), Some(sync_offset + 1));
    }

    /// Java's `assertSparseSyncInvariant` (value comparison, as in the Java test).
    fn check_invariants(syncs: &[StoredSync; SYNCS_PER_PARTITION]) -> Result<(), String> {
        for j in 0..SYNCS_PER_PARTITION {
            for i in 0..j {
                let j_up = syncs[j].upstream_offset;
                let i_up = syncs[i].upstream_offset;
                if j_up == i_up {
                    continue;
                }
                let exponent = i.saturating_sub(2) as u32;
                let lower = j_up.wrapping_add(1i64.wrapping_shl(exponent));
                if lower < 0 {
                    continue;
                }
                if i_up < lower {
                    return Err(format!("C({i},{j}): {i_up} < {lower}"));
                }
                let upper = j_up
                    .wrapping_add(1i64.wrapping_shl(j as u32))
                    .wrapping_sub(1i64.wrapping_shl(i as u32));
                if upper < 0 {
                    continue;
                }
                if i_up > upper {
                    return Err(format!("B({i},{j}): {i_up} > {upper}"));
                }
            }
        }
        Ok(())
    }

    fn assert_invariants(store: &OffsetSyncStore) {
        check_invariants(store.syncs_for(&tp()).unwrap()).unwrap();
    }

    fn distinct_syncs(store: &OffsetSyncStore) -> usize {
        let syncs = store.syncs_for(&tp()).unwrap();
        1 + (1..SYNCS_PER_PARTITION)
            .filter(|&i| syncs[i - 1].id != syncs[i].id)
            .count()
    }

    #[test]
    fn offset_translation() {
        let mut store = started(true);
        // Emit synced downstream offset without dead-reckoning.
        sync(&mut store, 100, 200);
        assert_eq!(translate(&store, 150), Some(201));
        // Translate exact offsets.
        sync(&mut store, 150, 251);
        assert_eq!(translate(&store, 150), Some(251));
        // Offset before any sync: cannot translate.
        assert_eq!(translate(&store, 5), Some(-1));
        // Downstream offsets reset.
        sync(&mut store, 200, 10);
        assert_eq!(translate(&store, 200), Some(10));
        // Upstream offsets reset.
        sync(&mut store, 20, 20);
        assert_eq!(translate(&store, 20), Some(20));
    }

    #[test]
    fn no_translation_if_store_not_started() {
        let mut store = OffsetSyncStore::default();
        assert_eq!(translate(&store, 0), None);
        assert_eq!(translate(&store, 100), None);
        assert_eq!(translate(&store, 200), None);
        store.start(true);
        // A sync read during the initial load is not used before the load completes.
        sync(&mut store, 100, 200);
        assert_eq!(translate(&store, 0), None);
        assert_eq!(translate(&store, 100), None);
        assert_eq!(translate(&store, 200), None);
        store.mark_read_to_end();
        assert_eq!(translate(&store, 0), Some(-1));
        assert_eq!(translate(&store, 100), Some(200));
        assert_eq!(translate(&store, 200), Some(201));
    }

    #[test]
    fn no_translation_if_no_offset_sync() {
        let store = started(true);
        assert_eq!(translate(&store, 0), None);
    }

    #[test]
    fn past_offset_translation() {
        let max_offset_lag = 10;
        let mut store = OffsetSyncStore::default();
        store.start(true);
        for offset in (0..=1000).step_by(max_offset_lag) {
            sync(&mut store, offset, offset);
            assert_invariants(&store);
        }
        store.mark_read_to_end();
        // Before new syncs, only the latest startup offset can be translated.
        assert_sparse_sync(&store, 1000, -1);
        for offset in (1000 + max_offset_lag as i64..=10_000).step_by(max_offset_lag) {
            sync(&mut store, offset, offset);
            assert_invariants(&store);
        }
        // Invariant D: the last sync of the initial load is still the earliest.
        assert_sparse_sync(&store, 1000, -1);
        // Older offsets are less precise.
        assert_sparse_sync(&store, 4840, 1000);
        assert_sparse_sync(&store, 6760, 4840);
        assert_sparse_sync(&store, 8680, 6760);
        assert_sparse_sync(&store, 9160, 8680);
        assert_sparse_sync(&store, 9640, 9160);
        assert_sparse_sync(&store, 9880, 9640);
        assert_sparse_sync(&store, 9940, 9880);
        assert_sparse_sync(&store, 9970, 9940);
        assert_sparse_sync(&store, 9990, 9970);
        assert_sparse_sync(&store, 10_000, 9990);
        // Rewinding upstream offsets clears all history.
        sync(&mut store, 1500, 11_000);
        assert_invariants(&store);
        assert_eq!(translate(&store, 1499), Some(-1));
        assert_eq!(translate(&store, 1500), Some(11_000));
        assert_eq!(translate(&store, 2000), Some(11_001));
    }

    #[test]
    fn past_offset_translation_without_initialization_read_to_end() {
        let max_offset_lag = 10;
        let mut store = OffsetSyncStore::default();
        store.start(false);
        for offset in (0..=1000).step_by(max_offset_lag) {
            sync(&mut store, offset, offset);
            assert_invariants(&store);
        }
        store.mark_read_to_end();
        // The full exponential history of the load is kept.
        assert_sparse_sync(&store, 480, 0);
        assert_sparse_sync(&store, 720, 480);
        assert_sparse_sync(&store, 1000, 990);
        for offset in (1000..=10_000).step_by(max_offset_lag) {
            sync(&mut store, offset, offset);
            assert_invariants(&store);
        }
        // 1000 was expired; before 3840 only 0 remains.
        assert_sparse_sync(&store, 3840, 0);
        assert_sparse_sync(&store, 7680, 3840);
        assert_sparse_sync(&store, 8640, 7680);
        assert_sparse_sync(&store, 9120, 8640);
        assert_sparse_sync(&store, 9600, 9120);
        assert_sparse_sync(&store, 9840, 9600);
        assert_sparse_sync(&store, 9900, 9840);
        assert_sparse_sync(&store, 9960, 9900);
        assert_sparse_sync(&store, 9990, 9960);
        assert_sparse_sync(&store, 10_000, 9990);
        sync(&mut store, 1500, 11_000);
        assert_invariants(&store);
        assert_eq!(translate(&store, 1499), Some(-1));
        assert_eq!(translate(&store, 1500), Some(11_000));
        assert_eq!(translate(&store, 2000), Some(11_001));
    }

    /// Java's `assertSyncSpacingHasBoundedExpirations`.
    fn assert_bounded_expirations(
        first_offset: i64,
        steps: impl IntoIterator<Item = i64>,
        maximum_expirations: usize,
    ) {
        let mut store = started(true);
        sync(&mut store, first_offset, first_offset);
        let mut offset = first_offset;
        let mut last_count = 1usize;
        for step in steps {
            offset += step;
            assert!(offset >= 0, "test is invalid, offset overflowed");
            sync(&mut store, offset, offset);
            let syncs = store.syncs_for(&tp()).unwrap();
            // Invariant A: the latest sync is present.
            assert_eq!(syncs[0].upstream_offset, offset);
            // Invariant D: the earliest sync is present.
            assert_eq!(syncs[63].upstream_offset, first_offset);
            let count = distinct_syncs(&store);
            let expired = last_count + 1 - count;
            assert!(
                expired <= maximum_expirations,
                "expired {expired} > {maximum_expirations} after offset {offset}"
            );
            last_count = count;
        }
    }

    #[test]
    fn consistently_spaced_syncs() {
        let iterations = 100usize;
        let max_step = i64::MAX / iterations as i64;
        let mut step = 1i64;
        while step < max_step {
            for first_offset in 0..30 {
                assert_bounded_expirations(first_offset, std::iter::repeat_n(step, iterations), 1);
            }
            step = step * 2 + 1;
        }
    }

    /// `java.util.Random`, so the random streams are those of the Java test (seed 0).
    struct JavaRandom(u64);

    impl JavaRandom {
        const MULTIPLIER: u64 = 0x5_DEEC_E66D;
        const MASK: u64 = (1 << 48) - 1;

        fn new(seed: i64) -> Self {
            Self((seed as u64 ^ Self::MULTIPLIER) & Self::MASK)
        }

        fn next(&mut self, bits: u32) -> i32 {
            self.0 = (self.0.wrapping_mul(Self::MULTIPLIER).wrapping_add(0xB)) & Self::MASK;
            (self.0 >> (48 - bits)) as i32
        }

        fn next_long(&mut self) -> i64 {
            (i64::from(self.next(32)) << 32).wrapping_add(i64::from(self.next(32)))
        }

        /// `Random.longs(n, origin, bound)` element (`RandomSupport.boundedNextLong`).
        fn next_long_in(&mut self, origin: i64, bound: i64) -> i64 {
            let mut r = self.next_long();
            let n = bound - origin;
            let m = n - 1;
            if n & m == 0 {
                return (r & m) + origin;
            }
            let mut u = ((r as u64) >> 1) as i64;
            loop {
                r = u % n;
                if u.wrapping_add(m).wrapping_sub(r) >= 0 {
                    break;
                }
                u = ((self.next_long() as u64) >> 1) as i64;
            }
            r + origin
        }

        fn next_double(&mut self) -> f64 {
            let hi = i64::from(self.next(26)) << 27;
            let lo = i64::from(self.next(27));
            (hi + lo) as f64 * (1.0 / (1u64 << 53) as f64)
        }
    }

    #[test]
    fn randomly_spaced_syncs() {
        let mut random = JavaRandom::new(0);
        let iteration_bits = 10;
        let iterations = 1usize << iteration_bits;
        for n in 1..(64 - iteration_bits) {
            // Steps with at most n bits of difference expire at most n + 2 syncs at once.
            let maximum_difference = 1i64 << n;
            let maximum_expirations = n + 2;
            let steps: Vec<i64> = (0..iterations)
                .map(|_| random.next_long_in(0, maximum_difference))
                .collect();
            assert_bounded_expirations(0, steps, maximum_expirations);
            // Also with a larger minimum step, as offset.lag.max causes.
            let offset_lag_max = 1i64 << 16;
            let steps: Vec<i64> = (0..iterations)
                .map(|_| random.next_long_in(offset_lag_max, offset_lag_max + maximum_difference))
                .collect();
            assert_bounded_expirations(0, steps, maximum_expirations);
        }
    }

    #[test]
    fn dropped_syncs_spacing() {
        let mut random = JavaRandom::new(0);
        let offset_lag_max = 100i64;
        // Half the gaps are offset.lag.max, half double that (one sync dropped in between).
        let steps: Vec<i64> = (0..10_000)
            .map(|_| {
                if random.next_double() < 0.5 {
                    2 * offset_lag_max
                } else {
                    offset_lag_max
                }
            })
            .collect();
        assert_bounded_expirations(0, steps, 2);
    }

    #[test]
    fn partitions_are_bounded_and_records_decoded() {
        let mut store = OffsetSyncStore::new(1);
        store.start(false);
        store.mark_read_to_end();
        sync(&mut store, 1, 1);
        let other = OffsetSync::new(&TopicPartition::new("other", 0), 1, 1);
        assert!(matches!(
            store.handle_sync(&other),
            Err(SyncStoreError::TooManyPartitions {
                max_partitions: 1,
                ..
            })
        ));
        assert!(matches!(
            store.handle_record(&[0, 5, b'x'], &[0; 16]),
            Err(SyncStoreError::Format(_))
        ));
        assert_eq!(store.partition_count(), 1);
        assert_eq!(
            store.lookup(&tp(), 1),
            Some(SyncLookup::Translated {
                downstream: 1,
                exact: true
            })
        );
        assert_eq!(
            store.lookup(&tp(), 2),
            Some(SyncLookup::Translated {
                downstream: 2,
                exact: false
            })
        );
    }

    /// A stream of sync upstream offsets: mostly forward steps of many sizes, some rewinds.
    fn sync_stream() -> impl Strategy<Value = Vec<(i64, bool)>> {
        proptest::collection::vec(
            (
                prop_oneof![
                    4 => 1i64..200,
                    2 => 200i64..100_000,
                    1 => 100_000i64..(1i64 << 40),
                ],
                proptest::bool::weighted(0.02),
            ),
            1..400,
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn hostile_offsets_never_panic(
            syncs in proptest::collection::vec((any::<i64>(), any::<i64>()), 1..80),
            queries in proptest::collection::vec(any::<i64>(), 1..20),
        ) {
            let mut store = started(false);
            for (u, d) in syncs {
                sync(&mut store, u, d);
            }
            for q in queries {
                let _ = translate(&store, q);
            }
        }

        #[test]
        fn invariants_hold_after_any_sequence(
            start in 0i64..(1i64 << 50),
            steps in sync_stream(),
            must_read_to_end: bool,
            load_len in 0usize..50,
        ) {
            let mut store = OffsetSyncStore::default();
            store.start(must_read_to_end);
            let mut offset = start;
            let mut earliest = start;
            for (i, (step, rewind)) in steps.iter().enumerate() {
                if i == load_len {
                    store.mark_read_to_end();
                }
                let prev = offset;
                offset = if *rewind { offset / 2 } else { offset.saturating_add(*step) };
                sync(&mut store, offset, offset);
                let syncs = store.syncs_for(&tp()).unwrap();
                prop_assert!(check_invariants(syncs).is_ok(), "{:?}", check_invariants(syncs));
                // A: the latest sync is first.
                prop_assert_eq!(syncs[0].upstream_offset, offset);
                // D: the earliest sync since the last reset is kept last.
                let reset = i == 0 || offset < prev || (!store.is_read_to_end() && must_read_to_end);
                if reset {
                    earliest = offset;
                }
                prop_assert_eq!(syncs[63].upstream_offset, earliest);
                // Upstream offsets never increase along the array.
                prop_assert!(syncs.windows(2).all(|w| w[0].upstream_offset >= w[1].upstream_offset));
            }
        }
    }
}
