//! Counters the control plane's duties keep for `/metrics` and `/status`: offset syncs,
//! checkpoints, group-offset sync, heartbeats, topic/config/ACL sync. Plain numbers owned by
//! each duty, cumulative since the process started; every map is keyed by a fixed set of
//! `&'static str` reasons, so their size is bounded.

use std::collections::BTreeMap;

use serde::Serialize;
use strait_dataplane::shard::LatencyHistogram;

/// What the offsets duties of one flow did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct OffsetsCounters {
    /// `OffsetSync` records written to `mm2-offset-syncs.<alias>.internal`.
    pub offset_syncs_written: u64,
    /// Offset-sync writes that failed or timed out.
    pub offset_sync_errors: u64,
    /// Checkpoint rounds run (`emit.checkpoints.interval.seconds`).
    pub checkpoint_rounds: u64,
    /// `Checkpoint` records written to `<source>.checkpoints.internal`.
    pub checkpoints_written: u64,
    /// Groups whose checkpoints could not be read or written in a round.
    pub checkpoint_errors: u64,
    /// Partitions of a group that got no checkpoint, by why (`no_mapping`, `before_history`,
    /// `no_committed_offset`, `downstream_rewind`, `duplicate_target`, `store_full`; a
    /// `repeated` checkpoint or a filtered topic is not counted).
    pub checkpoint_skips: BTreeMap<&'static str, u64>,
    /// From the start of a checkpoint round (reading the group's committed offsets) to the
    /// target's acknowledgement of its checkpoint records, per record written
    /// (MirrorMaker's `checkpoint-latency-ms`).
    #[serde(skip)]
    pub checkpoint_latency: LatencyHistogram,
    /// Group-offset sync rounds run (`sync.group.offsets.interval.seconds`).
    pub group_sync_rounds: u64,
    /// Groups whose offsets were committed on the target in a round.
    pub groups_synced: u64,
    /// Groups left alone in a round, by why: `active_on_target` (the target group has
    /// members), `not_newer` (the target is at or past the translated offsets, e.g. behind the
    /// mapping), `invalid_offset`, `no_checkpoint` (no mapping yet for its offsets),
    /// `commit_failed`.
    pub groups_skipped: BTreeMap<&'static str, u64>,
    /// Group-offset sync rounds or groups that failed on a cluster error.
    pub group_sync_errors: u64,
}

/// What the heartbeat emitter of one herder pair did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct HeartbeatCounters {
    pub source: String,
    pub target: String,
    /// `Heartbeat` records written to the target's heartbeats topic.
    pub written: u64,
    /// Heartbeats that could not be written.
    pub errors: u64,
    /// Timestamp (ms since the epoch) of the newest record read back from the heartbeats
    /// topic on the target; -1 before the first read.
    pub newest_read_back_ms: i64,
}

/// Rounds, changes and errors of one kind of sync.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct SyncCounters {
    /// Rounds run.
    pub rounds: u64,
    /// Changes made on the target (topics or partitions created, configs altered, ACLs
    /// created).
    pub changes: u64,
    /// Rounds (or items) that failed.
    pub errors: u64,
}

/// What the topic duties of one flow did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct TopicCounters {
    /// Topic discovery and creation (remote topics, partition growth).
    pub topics: SyncCounters,
    /// Topic config sync.
    pub configs: SyncCounters,
    /// ACL sync.
    pub acls: SyncCounters,
}

/// The transactions of one flow forwarded exactly-once (`duties/exactly_once.rs`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TxnCounters {
    /// Transactions committed (one per partition about every commit interval).
    pub committed: u64,
    /// Transactions aborted: of failed or revoked partitions, and of failed commits.
    pub aborted: u64,
    /// Partitions stopped because another holder of their transactional id fenced this one.
    pub fenced: u64,
    /// Partitions holding a transactional producer now.
    pub partitions: usize,
    /// Commit latency, from the seal (the shard stops sending the partition's batches) to the
    /// coordinator's answer to EndTxn, ms: the mean and the largest.
    pub commit_latency_avg_ms: u64,
    pub commit_latency_max_ms: u64,
    /// The same latencies, for `/metrics`.
    #[serde(skip)]
    pub commit_latency: LatencyHistogram,
}

impl TxnCounters {
    /// One commit that took `ms`.
    pub fn committed_after(&mut self, ms: u64) {
        self.committed += 1;
        self.commit_latency
            .observe(i64::try_from(ms).unwrap_or(i64::MAX), 1);
        self.commit_latency_max_ms = self.commit_latency_max_ms.max(ms);
        self.commit_latency_avg_ms =
            self.commit_latency.sum_ms / self.commit_latency.count().max(1);
    }
}

/// Adds one to the count of `reason`.
pub fn bump(map: &mut BTreeMap<&'static str, u64>, reason: &'static str) {
    *map.entry(reason).or_default() += 1;
}
