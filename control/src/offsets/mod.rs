//! Offsets: MM2's record formats, offset mapping and translation, offset-sync emission,
//! checkpoints and group-offset sync.
//!
//! Everything here is pure, sans-IO logic: no sockets, no clock (time is an argument where it
//! matters), no global state. The control loop feeds it bytes and events and acts on its outputs.
//!
//! # Modules and the calls other code makes
//!
//! - [`format`](mod@format): MM2's binary records, byte-exact with `OffsetSync.java`, `Checkpoint.java` and
//!   `Heartbeat.java`.
//!   - [`OffsetSync`]: `encode_key`, `encode_value`, `decode(key, value)`.
//!   - [`Checkpoint`]: `encode_key`, `encode_value` (always version 0), `decode(key, value)`.
//!   - [`Heartbeat`]: `encode_key`, `encode_value`, `decode(key, value)`.
//! - [`connect`]: MM2's progress in Connect's `mm2-offsets.<src>.internal` topic.
//!   - [`connect::source_offset_key`] / [`connect::source_offset_value`]: the exact key and value
//!     bytes Connect writes, so MM2 can resume from strait's progress.
//!   - [`connect::partition_for_key`]: the partition of that topic Connect would write a key to
//!     (`toPositive(murmur2(key)) % partitions`); [`connect::murmur2`] is Kafka's hash.
//!   - [`ImportedProgress`]: MM2's last replicated offset per source partition, built from the
//!     topic's records (`apply(key, value)`, last record wins, tombstones delete).
//! - [`mapping`]: strait's exact upstream→downstream mapping, fed from produce acknowledgements.
//!   - [`PartitionMapping::append`] with a [`Segment`] per forwarded batch (or per renumbered run
//!     of a rebuilt batch); [`PartitionMapping::translate`] gives a [`Translation`].
//!   - [`OffsetMapping`]: the same for many partitions, keyed by [`TopicPartition`].
//! - [`sync_store`]: a faithful port of MM2's `OffsetSyncStore`, rebuilt from the offset-syncs
//!   topic; used after a restart and wherever strait has no exact mapping.
//!   - [`OffsetSyncStore::start`], [`OffsetSyncStore::handle_record`] (or
//!     [`OffsetSyncStore::handle_sync`]), [`OffsetSyncStore::mark_read_to_end`],
//!     [`OffsetSyncStore::translate_downstream`].
//! - [`sync_writer`]: when to emit `OffsetSync` records, with MM2's `OffsetSyncWriter` rules.
//!   - [`OffsetSyncWriter::on_segment`] after each acknowledged batch;
//!     [`OffsetSyncWriter::on_flush_interval`] every `offset.flush.interval.ms`;
//!     [`OffsetSyncWriter::take_ready`] gives the syncs to produce now;
//!     [`OffsetSyncWriter::on_send_complete`] when the producer reports one done.
//! - [`checkpoint`]: which `Checkpoint` records to emit for a group, and the in-memory
//!   [`CheckpointStore`].
//!   - [`translate_offset`] combines the exact mapping with the sync store and reports the
//!     [`Precision`] of the answer (also what `strait offsets translate` prints).
//!   - [`CheckpointStore::checkpoints_for_group`] applies MM2's filter, drop and
//!     "more recent" rules and records what it emits.
//! - [`group_sync`]: whether to commit translated offsets to a target group
//!   ([`plan_group_sync`]).
//!
//! # Conventions
//!
//! Offsets are `i64`, as in Kafka. "Upstream" is the source cluster, "downstream" the target.
//! A [`TopicPartition`] names a source partition unless a function says otherwise (checkpoints
//! name the renamed, target-side topic, exactly as MM2 does).
#![deny(clippy::disallowed_methods)]

pub mod checkpoint;
pub mod connect;
pub mod format;
pub mod group_sync;
pub mod mapping;
pub mod sync_store;
pub mod sync_writer;
pub mod translator;

pub use checkpoint::{
    CheckpointError, CheckpointOutcome, CheckpointSkip, CheckpointStore, CommittedOffset,
    EmittedCheckpoint, Precision, TranslatedOffset, TranslationSource, translate_offset,
};
pub use connect::{ConnectError, ImportEvent, ImportedProgress};
pub use format::{Checkpoint, FormatError, Heartbeat, OffsetSync};
pub use group_sync::{
    GroupSyncAction, GroupSyncDecision, GroupSyncReport, TargetGroupState, plan_group_sync,
};
pub use mapping::{MappingError, OffsetMapping, PartitionMapping, Segment, Translation};
pub use sync_store::{OffsetSyncStore, StoredSync, SyncLookup};
pub use sync_writer::{OffsetSyncWriter, PartitionState, SyncWriterConfig, SyncWriterError};
pub use translator::{Translator, restart_seed};

/// A topic name and a partition number (shared with the admin client).
pub use crate::model::TopicPartition;
