//! Checkpoints: which `Checkpoint` records to emit for a consumer group, as MM2's
//! `MirrorCheckpointTask` decides (`checkpointsForGroup`, `checkpointIsMoreRecent`), and the
//! in-memory `CheckpointStore` of what was emitted last.
//!
//! For each committed source offset of a group, in order:
//! 1. the source topic must pass the topic filter (no cycle or internal check, as in MM2);
//! 2. a partition without a committed offset is skipped;
//! 3. the offset is translated ([`translate_offset`]: strait's exact mapping first, MM2's
//!    `OffsetSyncStore` beyond it); no translation, no checkpoint;
//! 4. the checkpoint names the renamed (target-side) topic, and is dropped when the translated
//!    offset is below 0 (before the retained history);
//! 5. it is emitted only when more recent than the last one emitted for (group, target
//!    partition): there is none, or the upstream offset went back (a group rewind is
//!    propagated), or the downstream offset went forward. An equal downstream offset is a
//!    repeat; a smaller one would rewind the target and is skipped.
//!
//! Emitted checkpoints are recorded in the [`CheckpointStore`], which is loaded at start from
//! the checkpoints topic ([`CheckpointStore::load_record`]); after that it lives in memory.

use std::collections::HashMap;
use std::fmt;

use thiserror::Error;

use super::TopicPartition;
use super::format::{Checkpoint, FormatError};
use super::mapping::{PartitionMapping, Translation};
use super::sync_store::{OffsetSyncStore, SyncLookup};

/// Default bound on (group, partition) entries in a [`CheckpointStore`]. An entry costs about
/// 150 bytes plus its group, topic and metadata strings.
pub const DEFAULT_MAX_CHECKPOINT_ENTRIES: usize = 1_000_000;

/// Errors from the checkpoint store.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum CheckpointError {
    /// A record of the checkpoints topic did not decode.
    #[error("undecodable checkpoint record: {0}")]
    Format(#[from] FormatError),
    /// A new (group, partition) beyond the configured bound; it was not stored.
    #[error(
        "checkpoint store is full ({max_entries} entries): cannot add group {group}, {topic}-{partition}"
    )]
    StoreFull {
        /// Consumer group.
        group: String,
        /// Target-side topic.
        topic: String,
        /// Partition.
        partition: i32,
        /// The bound.
        max_entries: usize,
    },
}

/// How precise a translated offset is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Precision {
    /// The downstream position of the first replicated record at or after the upstream offset.
    Exact,
    /// A safe lower bound (MM2's "sync + 1" rule): may re-read records, never skips one.
    Approximate,
    /// The upstream offset is before the retained history; the downstream offset is -1, as in
    /// MM2, and no checkpoint is emitted.
    BeforeHistory,
}

impl fmt::Display for Precision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Exact => "exact",
            Self::Approximate => "approximate",
            Self::BeforeHistory => "before history",
        })
    }
}

/// Where a translated offset came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TranslationSource {
    /// strait's exact mapping.
    Mapping,
    /// MM2's offset-sync store.
    SyncStore,
}

/// A translated offset with its precision and source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TranslatedOffset {
    /// Downstream offset; -1 for [`Precision::BeforeHistory`].
    pub downstream: i64,
    /// How precise it is.
    pub precision: Precision,
    /// Which translator answered.
    pub source: TranslationSource,
    /// For an approximate answer: at most how many records a consumer resuming there
    /// re-reads (the next exactly known pair bounds it); `None` when nothing bounds it (past
    /// what was replicated) or the answer is not approximate.
    pub max_reread: Option<i64>,
}

/// Translates `upstream` of source partition `tp`: strait's exact mapping first, MM2's
/// offset-sync store where the mapping has no exact answer. `None` when neither knows the
/// partition (MM2 emits nothing then).
///
/// When both give approximate answers the larger is taken: each is a lower bound of the true
/// position, so the larger is still safe and re-reads less. So the answer is never further
/// behind than MM2's.
pub fn translate_offset(
    mapping: Option<&PartitionMapping>,
    store: &OffsetSyncStore,
    tp: &TopicPartition,
    upstream: i64,
) -> Option<TranslatedOffset> {
    let from_mapping = mapping.map_or(Translation::BeforeHistory, |m| m.translate(upstream));
    // Each translator's next known pair bounds the re-read of an approximate answer; both are
    // upper bounds of the exact position, so the smaller counts.
    let bound = |downstream: i64| {
        let a = mapping.and_then(|m| m.next_known_downstream(upstream));
        let b = store.next_known_downstream(tp, upstream);
        a.into_iter()
            .chain(b)
            .min()
            .map(|next| (next - downstream).max(0))
    };
    let answer = |downstream, precision, source| {
        Some(TranslatedOffset {
            downstream,
            precision,
            source,
            max_reread: (precision == Precision::Approximate)
                .then(|| bound(downstream))
                .flatten(),
        })
    };
    if let Translation::Exact(d) = from_mapping {
        return answer(d, Precision::Exact, TranslationSource::Mapping);
    }
    let from_store = store.lookup(tp, upstream);
    match (from_mapping, from_store) {
        (
            _,
            Some(SyncLookup::Translated {
                downstream,
                exact: true,
            }),
        ) => answer(downstream, Precision::Exact, TranslationSource::SyncStore),
        (Translation::Approximate(a), Some(SyncLookup::Translated { downstream: b, .. }))
            if b > a =>
        {
            answer(b, Precision::Approximate, TranslationSource::SyncStore)
        }
        (Translation::Approximate(a), _) => {
            answer(a, Precision::Approximate, TranslationSource::Mapping)
        }
        (_, Some(SyncLookup::Translated { downstream, .. })) => answer(
            downstream,
            Precision::Approximate,
            TranslationSource::SyncStore,
        ),
        (_, Some(SyncLookup::BeforeEarliest)) => {
            answer(-1, Precision::BeforeHistory, TranslationSource::SyncStore)
        }
        (_, None) => None,
    }
}

/// A group's committed offset on the source (`OffsetAndMetadata`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CommittedOffset {
    /// Committed offset: the next record the group will read.
    pub offset: i64,
    /// Commit metadata; `""` where the client had none.
    pub metadata: String,
}

/// Why no checkpoint was emitted for a source partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckpointSkip {
    /// The topic filter rejected the topic.
    FilteredOut,
    /// The group has no committed offset for the partition.
    NoCommittedOffset,
    /// Neither translator knows the partition.
    NotTranslatable,
    /// The offset is before the retained history (translated offset below 0).
    BeforeHistory,
    /// The same downstream offset as the last checkpoint.
    Repeated,
    /// A smaller downstream offset than the last checkpoint without an upstream rewind.
    PreventingDownstreamRewind {
        /// Downstream offset of the last checkpoint.
        last_downstream: i64,
    },
    /// Another source partition of this round renamed to the same target partition.
    DuplicateTarget(TopicPartition),
    /// The store is full; see [`CheckpointError::StoreFull`].
    StoreFull,
}

impl fmt::Display for CheckpointSkip {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::FilteredOut => f.write_str("topic not selected by the topic filter"),
            Self::NoCommittedOffset => f.write_str("no committed offset"),
            Self::NotTranslatable => f.write_str("no offset mapping or offset sync for partition"),
            Self::BeforeHistory => f.write_str("offset is before the retained offset history"),
            Self::Repeated => f.write_str("repeated checkpoint"),
            Self::PreventingDownstreamRewind { last_downstream } => write!(
                f,
                "translated offset is behind the last checkpoint's {last_downstream} (preventing downstream rewind)"
            ),
            Self::DuplicateTarget(tp) => {
                write!(f, "another source partition already maps to target {tp}")
            }
            Self::StoreFull => f.write_str("checkpoint store is full"),
        }
    }
}

/// A checkpoint to emit, with how its offset was translated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmittedCheckpoint {
    /// The record to write to `<source>.checkpoints.internal`, partition 0.
    pub checkpoint: Checkpoint,
    /// How the downstream offset was obtained.
    pub translation: TranslatedOffset,
}

/// Result of [`CheckpointStore::checkpoints_for_group`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckpointOutcome {
    /// Checkpoints to emit, in input order; already recorded in the store.
    pub emitted: Vec<EmittedCheckpoint>,
    /// Source partitions without a checkpoint this round, with the reason.
    pub skipped: Vec<(TopicPartition, CheckpointSkip)>,
}

/// The last emitted checkpoint per (group, target partition): MM2's `CheckpointStore`.
#[derive(Debug, Clone)]
pub struct CheckpointStore {
    groups: HashMap<String, HashMap<TopicPartition, Checkpoint>>,
    entries: usize,
    max_entries: usize,
    initialized: bool,
    load_succeeded: bool,
}

impl Default for CheckpointStore {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_CHECKPOINT_ENTRIES)
    }
}

impl CheckpointStore {
    /// An empty, not yet initialized store of at most `max_entries` (group, partition) entries.
    pub fn new(max_entries: usize) -> Self {
        Self {
            groups: HashMap::new(),
            entries: 0,
            max_entries,
            initialized: false,
            load_succeeded: false,
        }
    }

    /// Applies one record of the checkpoints topic during the initial load; the last record per
    /// (group, partition) wins. Tombstones (`value == None`) and groups `is_our_group` rejects
    /// are ignored (`Ok(false)`). An undecodable record is an error the caller logs and skips,
    /// as MM2 does.
    pub fn load_record(
        &mut self,
        key: &[u8],
        value: Option<&[u8]>,
        is_our_group: impl Fn(&str) -> bool,
    ) -> Result<bool, CheckpointError> {
        let Some(value) = value else {
            return Ok(false);
        };
        let checkpoint = Checkpoint::decode(key, value)?;
        if !is_our_group(&checkpoint.group) {
            return Ok(false);
        }
        self.insert(checkpoint)?;
        Ok(true)
    }

    /// Ends the initial load. On failure (e.g. not authorized to read the topic) everything
    /// loaded is dropped, as in MM2; pass the result to [`OffsetSyncStore::start`] as
    /// `initialization_must_read_to_end = !succeeded`.
    pub fn finish_load(&mut self, succeeded: bool) {
        if !succeeded {
            self.groups.clear();
            self.entries = 0;
        }
        self.initialized = true;
        self.load_succeeded = succeeded;
    }

    /// True after [`CheckpointStore::finish_load`]; MM2 emits nothing before.
    pub fn is_initialized(&self) -> bool {
        self.initialized
    }

    /// Whether the initial load succeeded.
    pub fn load_succeeded(&self) -> bool {
        self.load_succeeded
    }

    fn insert(&mut self, checkpoint: Checkpoint) -> Result<(), CheckpointError> {
        let tp = checkpoint.topic_partition();
        let known = self
            .groups
            .get(&checkpoint.group)
            .is_some_and(|g| g.contains_key(&tp));
        if !known {
            if self.entries >= self.max_entries {
                return Err(CheckpointError::StoreFull {
                    group: checkpoint.group,
                    topic: tp.topic,
                    partition: tp.partition,
                    max_entries: self.max_entries,
                });
            }
            self.entries += 1;
        }
        self.groups
            .entry(checkpoint.group.clone())
            .or_default()
            .insert(tp, checkpoint);
        Ok(())
    }

    /// The last checkpoints of a group, by target partition.
    pub fn get(&self, group: &str) -> Option<&HashMap<TopicPartition, Checkpoint>> {
        self.groups.get(group)
    }

    /// Groups with checkpoints.
    pub fn groups(&self) -> impl Iterator<Item = &str> {
        self.groups.keys().map(String::as_str)
    }

    /// Forgets a group (no longer assigned or no longer selected).
    pub fn remove_group(&mut self, group: &str) {
        if let Some(g) = self.groups.remove(group) {
            self.entries -= g.len();
        }
    }

    /// Number of (group, partition) entries.
    pub fn len(&self) -> usize {
        self.entries
    }

    /// True when there are no entries.
    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// MM2's `checkpointIsMoreRecent`: `Ok(())` to emit, or why not.
    fn is_more_recent(
        &self,
        checkpoint: &Checkpoint,
        tp: &TopicPartition,
    ) -> Result<(), CheckpointSkip> {
        let Some(last) = self.groups.get(&checkpoint.group).and_then(|g| g.get(tp)) else {
            return Ok(());
        };
        if checkpoint.upstream_offset < last.upstream_offset
            || checkpoint.downstream_offset > last.downstream_offset
        {
            return Ok(());
        }
        if checkpoint.downstream_offset == last.downstream_offset {
            Err(CheckpointSkip::Repeated)
        } else {
            Err(CheckpointSkip::PreventingDownstreamRewind {
                last_downstream: last.downstream_offset,
            })
        }
    }

    /// Decides the checkpoints of `group` from its committed source offsets (see the module
    /// docs) and records the emitted ones.
    ///
    /// - `committed`: source partition → committed offset (`None` for a partition listed
    ///   without one);
    /// - `translate(tp, upstream)`: normally [`translate_offset`] over the mapping and store;
    /// - `topic_filter(source_topic)`: the flow's topic filter;
    /// - `rename(source_topic)`: MM2's `renameTopicPartition` topic part (back to the original
    ///   name for topics that came from the target, otherwise the remote name).
    ///
    /// MM2 fails the whole poll when two source partitions rename to the same target partition;
    /// strait keeps the first and reports the others.
    pub fn checkpoints_for_group<'a>(
        &mut self,
        group: &str,
        committed: impl IntoIterator<Item = (&'a TopicPartition, &'a Option<CommittedOffset>)>,
        mut translate: impl FnMut(&TopicPartition, i64) -> Option<TranslatedOffset>,
        topic_filter: impl Fn(&str) -> bool,
        rename: impl Fn(&str) -> String,
    ) -> CheckpointOutcome {
        let mut outcome = CheckpointOutcome::default();
        let mut targets: HashMap<TopicPartition, TopicPartition> = HashMap::new();
        for (tp, offset) in committed {
            let result = self.checkpoint_for(
                group,
                tp,
                offset.as_ref(),
                &mut translate,
                &topic_filter,
                &rename,
            );
            let emitted = match result {
                Ok(emitted) => emitted,
                Err(skip) => {
                    outcome.skipped.push((tp.clone(), skip));
                    continue;
                }
            };
            let target = emitted.checkpoint.topic_partition();
            if let Some(first) = targets.get(&target) {
                outcome
                    .skipped
                    .push((tp.clone(), CheckpointSkip::DuplicateTarget(first.clone())));
                continue;
            }
            targets.insert(target, tp.clone());
            outcome.emitted.push(emitted);
        }
        // Record after deciding, as MM2 does: every candidate was compared with the old state.
        let mut kept = Vec::with_capacity(outcome.emitted.len());
        for emitted in outcome.emitted.drain(..) {
            match self.insert(emitted.checkpoint.clone()) {
                Ok(()) => kept.push(emitted),
                Err(_) => {
                    let source = targets
                        .get(&emitted.checkpoint.topic_partition())
                        .cloned()
                        .unwrap_or_else(|| emitted.checkpoint.topic_partition());
                    outcome.skipped.push((source, CheckpointSkip::StoreFull));
                }
            }
        }
        outcome.emitted = kept;
        outcome
    }

    fn checkpoint_for(
        &self,
        group: &str,
        tp: &TopicPartition,
        offset: Option<&CommittedOffset>,
        translate: &mut impl FnMut(&TopicPartition, i64) -> Option<TranslatedOffset>,
        topic_filter: &impl Fn(&str) -> bool,
        rename: &impl Fn(&str) -> String,
    ) -> Result<EmittedCheckpoint, CheckpointSkip> {
        if !topic_filter(&tp.topic) {
            return Err(CheckpointSkip::FilteredOut);
        }
        let offset = offset.ok_or(CheckpointSkip::NoCommittedOffset)?;
        let translation = translate(tp, offset.offset).ok_or(CheckpointSkip::NotTranslatable)?;
        if translation.downstream < 0 {
            return Err(CheckpointSkip::BeforeHistory);
        }
        let checkpoint = Checkpoint {
            group: group.to_owned(),
            topic: rename(&tp.topic),
            partition: tp.partition,
            upstream_offset: offset.offset,
            downstream_offset: translation.downstream,
            metadata: offset.metadata.clone(),
        };
        self.is_more_recent(&checkpoint, &checkpoint.topic_partition())?;
        Ok(EmittedCheckpoint {
            checkpoint,
            translation,
        })
    }

    /// The group's last checkpoints, whose target partition, downstream offset and metadata
    /// are the offsets to commit on the target (MM2's `computeConvertedUpstreamOffset`); feed
    /// them to [`plan_group_sync`](super::group_sync::plan_group_sync).
    pub fn converted_offsets(&self, group: &str) -> Vec<&Checkpoint> {
        self.groups
            .get(group)
            .map(|g| g.values().collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::offsets::format::OffsetSync;
    use crate::offsets::mapping::Segment;

    fn tp(topic: &str, p: i32) -> TopicPartition {
        TopicPartition::new(topic, p)
    }

    fn committed(offset: i64) -> Option<CommittedOffset> {
        Some(CommittedOffset {
            offset,
            metadata: "meta".into(),
        })
    }

    fn exact(d: i64) -> Option<TranslatedOffset> {
        Some(TranslatedOffset {
            downstream: d,
            precision: Precision::Exact,
            source: TranslationSource::Mapping,
            max_reread: None,
        })
    }

    fn rename(topic: &str) -> String {
        format!("src.{topic}")
    }

    fn run(
        store: &mut CheckpointStore,
        offsets: &[(TopicPartition, Option<CommittedOffset>)],
        translate: impl FnMut(&TopicPartition, i64) -> Option<TranslatedOffset>,
    ) -> CheckpointOutcome {
        store.checkpoints_for_group(
            "g",
            offsets.iter().map(|(a, b)| (a, b)),
            translate,
            |t| t != "excluded",
            rename,
        )
    }

    fn emitted_pairs(outcome: &CheckpointOutcome) -> Vec<(String, i64, i64)> {
        outcome
            .emitted
            .iter()
            .map(|e| {
                (
                    e.checkpoint.topic.clone(),
                    e.checkpoint.upstream_offset,
                    e.checkpoint.downstream_offset,
                )
            })
            .collect()
    }

    #[test]
    fn filter_translate_drop_and_rename() {
        let mut store = CheckpointStore::default();
        store.finish_load(true);
        let offsets = vec![
            (tp("t", 0), committed(10)),
            (tp("excluded", 0), committed(10)),
            (tp("t", 1), None),
            (tp("unknown", 0), committed(5)),
            (tp("old", 0), committed(1)),
        ];
        let outcome = run(&mut store, &offsets, |tp, u| match tp.topic.as_str() {
            "t" => exact(u + 100),
            "old" => Some(TranslatedOffset {
                downstream: -1,
                precision: Precision::BeforeHistory,
                source: TranslationSource::SyncStore,
                max_reread: None,
            }),
            _ => None,
        });
        assert_eq!(emitted_pairs(&outcome), vec![("src.t".into(), 10, 110)]);
        assert_eq!(outcome.emitted[0].checkpoint.metadata, "meta");
        assert_eq!(outcome.emitted[0].checkpoint.group, "g");
        assert_eq!(
            outcome.skipped,
            vec![
                (tp("excluded", 0), CheckpointSkip::FilteredOut),
                (tp("t", 1), CheckpointSkip::NoCommittedOffset),
                (tp("unknown", 0), CheckpointSkip::NotTranslatable),
                (tp("old", 0), CheckpointSkip::BeforeHistory),
            ]
        );
        assert_eq!(
            store.get("g").unwrap()[&tp("src.t", 0)].downstream_offset,
            110
        );
    }

    #[test]
    fn only_more_recent_checkpoints_are_emitted() {
        let mut store = CheckpointStore::default();
        store.finish_load(true);
        let mut round = |upstream: i64, downstream: i64| {
            run(&mut store, &[(tp("t", 0), committed(upstream))], |_, _| {
                exact(downstream)
            })
        };
        // First for the group.
        assert_eq!(round(10, 100).emitted.len(), 1);
        // Same downstream: repeated.
        assert_eq!(
            round(11, 100).skipped,
            vec![(tp("t", 0), CheckpointSkip::Repeated)]
        );
        // Downstream forward.
        assert_eq!(round(12, 105).emitted.len(), 1);
        // Downstream backward without upstream rewind: prevented.
        assert_eq!(
            round(13, 104).skipped,
            vec![(
                tp("t", 0),
                CheckpointSkip::PreventingDownstreamRewind {
                    last_downstream: 105
                }
            )]
        );
        // Upstream rewind is propagated even though downstream goes back.
        assert_eq!(round(5, 50).emitted.len(), 1);
        assert_eq!(round(5, 50).emitted.len(), 0);
    }

    #[test]
    fn duplicate_targets_keep_the_first() {
        let mut store = CheckpointStore::default();
        let offsets = [(tp("a", 0), committed(1)), (tp("b", 0), committed(2))];
        let outcome = store.checkpoints_for_group(
            "g",
            offsets.iter().map(|(a, b)| (a, b)),
            |_, u| exact(u),
            |_| true,
            |_| "same".to_string(),
        );
        assert_eq!(outcome.emitted.len(), 1);
        assert_eq!(outcome.emitted[0].checkpoint.upstream_offset, 1);
        assert_eq!(
            outcome.skipped,
            vec![(tp("b", 0), CheckpointSkip::DuplicateTarget(tp("a", 0)))]
        );
    }

    #[test]
    fn load_last_wins_ignores_tombstones_and_other_groups() {
        let mut store = CheckpointStore::new(10);
        let cp = |group: &str, d: i64| Checkpoint {
            group: group.into(),
            topic: "src.t".into(),
            partition: 0,
            upstream_offset: d,
            downstream_offset: d,
            metadata: String::new(),
        };
        for c in [cp("g", 1), cp("other", 5), cp("g", 3)] {
            let loaded = store
                .load_record(
                    &c.encode_key().unwrap(),
                    Some(&c.encode_value().unwrap()),
                    |g| g == "g",
                )
                .unwrap();
            assert_eq!(loaded, c.group == "g");
        }
        assert_eq!(
            store.load_record(&cp("g", 9).encode_key().unwrap(), None, |_| true),
            Ok(false)
        );
        assert!(matches!(
            store.load_record(&[0, 9], Some(&[0; 3]), |_| true),
            Err(CheckpointError::Format(_))
        ));
        store.finish_load(true);
        assert_eq!(store.len(), 1);
        assert_eq!(
            store.get("g").unwrap()[&tp("src.t", 0)].downstream_offset,
            3
        );
        assert!(store.get("other").is_none());
        // A failed load starts empty.
        let mut failed = CheckpointStore::new(10);
        let c = cp("g", 1);
        failed
            .load_record(
                &c.encode_key().unwrap(),
                Some(&c.encode_value().unwrap()),
                |_| true,
            )
            .unwrap();
        failed.finish_load(false);
        assert!(failed.is_empty() && failed.is_initialized() && !failed.load_succeeded());
    }

    #[test]
    fn store_is_bounded() {
        let mut store = CheckpointStore::new(1);
        let offsets = vec![(tp("a", 0), committed(1)), (tp("a", 1), committed(1))];
        let outcome = run(&mut store, &offsets, |_, u| exact(u));
        assert_eq!(outcome.emitted.len(), 1);
        assert_eq!(
            outcome.skipped,
            vec![(tp("a", 1), CheckpointSkip::StoreFull)]
        );
        // Updating an existing entry still works.
        let outcome = run(&mut store, &[(tp("a", 0), committed(5))], |_, u| exact(u));
        assert_eq!(outcome.emitted.len(), 1);
        store.remove_group("g");
        assert!(store.is_empty());
    }

    fn sync_store(syncs: &[(i64, i64)]) -> OffsetSyncStore {
        let mut store = OffsetSyncStore::default();
        store.start(false);
        for &(u, d) in syncs {
            store
                .handle_sync(&OffsetSync::new(&tp("t", 0), u, d))
                .unwrap();
        }
        store.mark_read_to_end();
        store
    }

    #[test]
    fn translate_prefers_exact_mapping_then_store() {
        let t = tp("t", 0);
        let mut mapping = PartitionMapping::default();
        mapping.append(&t, Segment::new(100, 1000, 50)).unwrap();
        let store = sync_store(&[(0, 900), (40, 940), (100, 1000)]);
        let tr = |u| translate_offset(Some(&mapping), &store, &t, u);
        // Inside the mapping: exact, from the mapping.
        assert_eq!(
            tr(120),
            Some(TranslatedOffset {
                downstream: 1020,
                precision: Precision::Exact,
                source: TranslationSource::Mapping,
                max_reread: None,
            })
        );
        // Before the mapping: the store; exact at a sync, approximate between.
        assert_eq!(
            tr(40).map(|t| (t.downstream, t.precision, t.source)),
            Some((940, Precision::Exact, TranslationSource::SyncStore))
        );
        assert_eq!(
            tr(50).map(|t| (t.downstream, t.precision)),
            Some((941, Precision::Approximate))
        );
        // Ahead of replication: the mapping's approximate end beats the store's older sync.
        assert_eq!(
            tr(500).map(|t| (t.downstream, t.precision, t.source)),
            Some((1050, Precision::Approximate, TranslationSource::Mapping))
        );
        // Before everything.
        let late = sync_store(&[(10, 10)]);
        assert_eq!(
            translate_offset(None, &late, &t, 5).map(|t| (t.downstream, t.precision)),
            Some((-1, Precision::BeforeHistory))
        );
        assert_eq!(
            translate_offset(None, &OffsetSyncStore::default(), &t, 5),
            None
        );
        // A store that has not finished its initial read does not answer.
        let mut loading = OffsetSyncStore::default();
        loading.start(true);
        assert_eq!(translate_offset(None, &loading, &t, 5), None);
    }

    proptest! {
        /// Whatever the mapping and store hold, the combined answer is never behind the
        /// store's own (MM2's) answer, and equals the mapping's exact answer when there is one.
        #[test]
        fn combined_translation_is_never_worse_than_mm2(
            segs in proptest::collection::vec((0i64..20, 1i64..30), 1..20),
            syncs in proptest::collection::vec(0i64..400, 0..20),
            u in 0i64..500,
        ) {
            let t = tp("t", 0);
            let mut mapping = PartitionMapping::default();
            let (mut up, mut down) = (0, 0);
            let mut pairs = Vec::new();
            for (gap, len) in segs {
                up += gap;
                mapping.append(&t, Segment::new(up, down, len)).unwrap();
                for i in 0..len {
                    pairs.push((up + i, down + i));
                }
                up += len;
                down += len;
            }
            // Syncs taken from the real pairs, in order, as a writer would emit them.
            let mut picks: Vec<usize> = syncs.iter().map(|&s| s as usize % pairs.len()).collect();
            picks.sort_unstable();
            picks.dedup();
            let chosen: Vec<(i64, i64)> = picks.iter().map(|&i| pairs[i]).collect();
            let store = sync_store(&chosen);
            let combined = translate_offset(Some(&mapping), &store, &t, u);
            if let Translation::Exact(d) = mapping.translate(u) {
                prop_assert_eq!(combined.map(|c| c.downstream), Some(d));
            }
            if let Some(mm2) = store.translate_downstream(&t, u) {
                prop_assert!(combined.is_some_and(|c| c.downstream >= mm2));
            }
        }
    }
}
