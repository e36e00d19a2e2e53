//! Translation for one flow: strait's exact mapping, each partition's acknowledged end and
//! MM2's offset-sync store, combined into one answer per committed offset ([`Translator`]); and
//! the one exact pair a restart can trust per partition ([`restart_seed`]).
#![deny(clippy::disallowed_methods)]

use super::TopicPartition;
use super::checkpoint::{Precision, TranslatedOffset, TranslationSource, translate_offset};
use super::mapping::{MappingError, OffsetMapping, PartitionMapping, Segment};
use super::sync_store::{OffsetSyncStore, StoredSync};

/// Everything translation needs for one flow: strait's exact mapping, each partition's
/// acknowledged end, and MM2's offset-sync store.
#[derive(Debug, Default)]
pub struct Translator {
    /// Per source partition, the runs and the acknowledged end.
    mapping: OffsetMapping,
    store: OffsetSyncStore,
}

impl Translator {
    /// Translates the committed offset `upstream` of source partition `tp`: exact wherever
    /// strait knows the mapping, MM2's algorithm beyond it; `None` when nothing is known about
    /// the partition.
    pub fn translate(&self, tp: &TopicPartition, upstream: i64) -> Option<TranslatedOffset> {
        let mapping = self.mapping.partition(tp);
        let answer = translate_offset(mapping, &self.store, tp, upstream);
        if answer.is_some_and(|a| a.precision == Precision::Exact) {
            return answer;
        }
        // Between the last replicated record and the acknowledged end there are only records
        // strait does not copy: the first replicated record at or after `upstream` will be the
        // next one written, at the mapping's downstream end.
        if let Some(m) = mapping
            && let (Some(up_end), Some(down_end)) = (m.upstream_end(), m.downstream_end())
            && let Some(acked) = m.acked_end()
            && (up_end..=acked).contains(&upstream)
        {
            return Some(TranslatedOffset {
                downstream: down_end,
                precision: Precision::Exact,
                source: TranslationSource::Mapping,
                max_reread: None,
            });
        }
        answer
    }

    /// Applies one acknowledged segment.
    pub fn append(&mut self, tp: &TopicPartition, segment: Segment) -> Result<(), MappingError> {
        self.mapping.append(tp, segment)
    }

    /// Every source record of `tp` below `next_offset` is replicated and its segments applied.
    pub fn set_acked_end(&mut self, tp: TopicPartition, next_offset: i64) {
        self.mapping.set_acked_end(tp, next_offset);
    }

    /// Forgets what is known of `tp` from strait's own replication (its topic was deleted or
    /// recreated); the sync store keeps MM2's history.
    pub fn forget(&mut self, tp: &TopicPartition) {
        self.mapping.remove(tp);
    }

    /// The sync store (read from the offset-syncs topic, plus the syncs strait wrote since).
    pub fn store(&self) -> &OffsetSyncStore {
        &self.store
    }

    /// The sync store, to load it and to add the syncs strait writes.
    pub fn store_mut(&mut self) -> &mut OffsetSyncStore {
        &mut self.store
    }

    /// The exact mapping.
    pub fn mapping(&self) -> &OffsetMapping {
        &self.mapping
    }

    /// The exact mapping, for the progress store to mark what it holds.
    pub fn mapping_mut(&mut self) -> &mut OffsetMapping {
        &mut self.mapping
    }

    /// Translates `tp` from now on with a mapping read from storage.
    pub fn restore(&mut self, tp: TopicPartition, mapping: PartitionMapping) {
        self.mapping.insert(tp, mapping);
    }

    /// An operator moved `tp` to `next_offset`: history from there on is forgotten (what
    /// follows will be copied again), and nothing is exact past the mapping until the shard
    /// acknowledges again.
    pub fn seek(&mut self, tp: &TopicPartition, next_offset: i64) {
        self.mapping.truncate(tp, next_offset);
    }
}

/// The exact pair a restart can trust for one partition (see `duties::offsets::seed_from_progress`): the
/// latest offset sync `(u, d)` as a one-record segment, when the target partition ends right
/// after `d` (`target_end == d + 1`) and the stored progress `next_offset` is past `u`. With it
/// and `next_offset` as the acknowledged end, upstream offsets `u..=next_offset` translate
/// exactly.
pub fn restart_seed(latest: &StoredSync, next_offset: i64, target_end: i64) -> Option<Segment> {
    let (u, d) = (latest.upstream_offset, latest.downstream_offset);
    let segment = Segment::new(u, d, 1);
    (segment.is_valid() && next_offset > u && d.checked_add(1) == Some(target_end))
        .then_some(segment)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    use crate::offsets::OffsetSync;
    use crate::offsets::mapping::Translation;
    use crate::offsets::sync_writer::{OffsetSyncWriter, SyncWriterConfig};

    fn tp() -> TopicPartition {
        TopicPartition::new("t", 0)
    }

    fn translator(segments: &[(i64, i64, i64)], acked: Option<i64>) -> Translator {
        let mut t = Translator::default();
        t.store_mut().start(false);
        t.store_mut().mark_read_to_end();
        for &(u, d, n) in segments {
            t.append(&tp(), Segment::new(u, d, n)).unwrap();
        }
        if let Some(a) = acked {
            t.set_acked_end(tp(), a);
        }
        t
    }

    fn at(t: &Translator, u: i64) -> Option<(i64, Precision)> {
        t.translate(&tp(), u).map(|x| (x.downstream, x.precision))
    }

    #[test]
    fn acknowledged_end_makes_the_tail_exact() {
        // Records 0..10 at 50..60, a commit marker at 10: the shard reports next offset 11.
        let t = translator(&[(0, 50, 10)], Some(11));
        assert_eq!(at(&t, 5), Some((55, Precision::Exact)));
        assert_eq!(at(&t, 10), Some((60, Precision::Exact)));
        assert_eq!(at(&t, 11), Some((60, Precision::Exact)));
        // Beyond the acknowledged end nothing is known: MM2's +1 rule, approximate.
        assert_eq!(at(&t, 12), Some((60, Precision::Approximate)));
        // Without an acknowledged end the marker's offset is approximate.
        let t = translator(&[(0, 50, 10)], None);
        assert_eq!(at(&t, 11), Some((60, Precision::Approximate)));
        // An acknowledged end behind the mapping (a seek back) adds nothing.
        let t = translator(&[(0, 50, 10)], Some(4));
        assert_eq!(at(&t, 11), Some((60, Precision::Approximate)));
        assert_eq!(at(&t, 3), Some((53, Precision::Exact)));
    }

    #[test]
    fn unknown_partitions_and_history_before_the_mapping() {
        let t = translator(&[(100, 0, 10)], Some(110));
        assert_eq!(t.translate(&TopicPartition::new("other", 0), 5), None);
        // Before the mapping and no syncs: nothing known.
        assert_eq!(at(&t, 50), None);
        assert_eq!(t.mapping().translate(&tp(), 50), Translation::BeforeHistory);
    }

    #[test]
    fn sync_store_answers_before_the_mapping() {
        let mut t = translator(&[(100, 200, 10)], Some(110));
        t.store_mut()
            .handle_sync(&OffsetSync::new(&tp(), 40, 140))
            .unwrap();
        // MM2's +1 rule from the sync at 40.
        assert_eq!(at(&t, 60), Some((141, Precision::Approximate)));
        assert_eq!(at(&t, 40), Some((140, Precision::Exact)));
        assert_eq!(at(&t, 30), Some((-1, Precision::BeforeHistory)));
        assert_eq!(at(&t, 105), Some((205, Precision::Exact)));
    }

    #[test]
    fn restart_seed_needs_the_target_to_end_at_the_sync() {
        let sync = |u, d| StoredSync {
            id: 0,
            upstream_offset: u,
            downstream_offset: d,
        };
        assert_eq!(
            restart_seed(&sync(99, 49,), 101, 50),
            Some(Segment::new(99, 49, 1))
        );
        // Something was written after the sync (records replicated since, or foreign writes).
        assert_eq!(restart_seed(&sync(99, 49), 101, 51), None);
        // The stored progress is not past the sync: nothing to add.
        assert_eq!(restart_seed(&sync(99, 49), 99, 50), None);
        assert_eq!(restart_seed(&sync(-1, 49), 101, 50), None);
        assert_eq!(restart_seed(&sync(5, i64::MAX), 101, i64::MIN), None);
    }

    /// One acknowledged batch: records skipped upstream before it (never replicated), its record
    /// count, and whether the sends in flight complete before the next batch.
    #[derive(Debug, Clone)]
    struct Batch {
        upstream_gap: i64,
        len: i64,
        sends_complete: bool,
    }

    fn batches() -> impl Strategy<Value = Vec<Batch>> {
        proptest::collection::vec(
            (
                prop_oneof![3 => Just(0i64), 2 => 1i64..4, 1 => 4i64..50],
                1i64..60,
                any::<bool>(),
            )
                .prop_map(|(upstream_gap, len, sends_complete)| Batch {
                    upstream_gap,
                    len,
                    sends_complete,
                }),
            1..60,
        )
    }

    /// The segments of a stream (the target has no other writer), every replicated
    /// (upstream, downstream) pair, and the upstream and downstream ends.
    fn replay(batches: &[Batch]) -> (Vec<Segment>, Vec<(i64, i64)>, i64, i64) {
        let (mut u, mut d) = (0i64, 0i64);
        let mut segments = Vec::new();
        let mut pairs = Vec::new();
        for b in batches {
            u += b.upstream_gap;
            segments.push(Segment::new(u, d, b.len));
            pairs.extend((0..b.len).map(|i| (u + i, d + i)));
            u += b.len;
            d += b.len;
        }
        (segments, pairs, u, d)
    }

    /// Where a group at upstream `u` must resume: the first replicated record at or after `u`,
    /// else the downstream end (the next record written).
    fn truth(pairs: &[(i64, i64)], u: i64, downstream_end: i64) -> i64 {
        let i = pairs.partition_point(|&(pu, _)| pu < u);
        pairs.get(i).map_or(downstream_end, |&(_, d)| d)
    }

    fn sent(w: &mut OffsetSyncWriter, out: &mut Vec<OffsetSync>) {
        loop {
            let ready = w.take_ready();
            if ready.is_empty() {
                break;
            }
            for _ in &ready {
                w.on_send_complete().unwrap();
            }
            out.extend(ready);
            w.fire_pending();
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn live_translation_is_exact_up_to_the_acknowledged_end(
            batches in batches(), tail in 0i64..4,
        ) {
            let (segments, pairs, up_end, down_end) = replay(&batches);
            let mut t = translator(&[], None);
            for s in &segments {
                t.append(&tp(), *s).unwrap();
            }
            // The shard's acknowledged end may be past the last record (markers, aborts).
            let acked = up_end + tail;
            t.set_acked_end(tp(), acked);
            let first = pairs[0].0;
            for u in 0..=acked + 3 {
                let got = at(&t, u);
                if u < first {
                    prop_assert_eq!(got, None);
                } else if u <= acked {
                    prop_assert_eq!(got, Some((truth(&pairs, u, down_end), Precision::Exact)), "u={}", u);
                } else {
                    prop_assert_eq!(got, Some((down_end, Precision::Approximate)), "u={}", u);
                }
            }
        }

        #[test]
        fn after_a_restart_translation_never_skips_a_record(
            batches in batches(), tail in 0i64..4, lag in 0i64..30,
        ) {
            let (segments, pairs, up_end, down_end) = replay(&batches);
            // The run: MM2's cadence, sends completing now and then, the last sync of every
            // partition published on the way out.
            let mut w = OffsetSyncWriter::new(SyncWriterConfig { offset_lag_max: lag, max_outstanding: 10 });
            let mut syncs = Vec::new();
            for (s, b) in segments.iter().zip(&batches) {
                w.on_segment(&tp(), *s).unwrap();
                if b.sends_complete {
                    sent(&mut w, &mut syncs);
                }
            }
            sent(&mut w, &mut syncs);
            w.on_flush_interval();
            sent(&mut w, &mut syncs);
            // The restart: the offset-syncs topic, the stored progress and the target's end.
            let mut t = translator(&[], None);
            for s in &syncs {
                t.store_mut().handle_sync(s).unwrap();
            }
            let acked = up_end + tail;
            let latest = t.store().syncs_for(&tp()).unwrap()[0];
            let seed = restart_seed(&latest, acked, down_end);
            prop_assert!(seed.is_some(), "the last record's sync is published on the way out");
            t.append(&tp(), seed.unwrap()).unwrap();
            t.set_acked_end(tp(), acked);
            for u in 0..=acked + 3 {
                let expected = truth(&pairs, u, down_end);
                match t.translate(&tp(), u) {
                    Some(x) if x.downstream >= 0 => {
                        prop_assert!(x.downstream <= expected, "u={} got {:?}, must not pass {}", u, x, expected);
                        if x.precision == Precision::Exact && u <= acked {
                            prop_assert_eq!(x.downstream, expected, "u={}", u);
                        }
                    }
                    _ => prop_assert!(u < pairs[0].0 || u < latest.upstream_offset, "u={}", u),
                }
            }
            // A group that read everything resumes exactly at the end.
            prop_assert_eq!(at(&t, acked), Some((down_end, Precision::Exact)));
        }
    }
}
