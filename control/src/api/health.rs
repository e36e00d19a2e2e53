//! `/health/live` and `/health/ready`, decided from the published snapshot and its age (pure:
//! the handlers pass the snapshot, its age and the wall time in).
//!
//! - Live: the control loop published a snapshot within [`STALE_AFTER`] (it turns every 20 ms
//!   and publishes when asked and every 10 s, between duties that each have a 2 s deadline).
//! - Ready: live, and every flow's partitions are running: none `FAILED`, and none stuck
//!   (lag without progress, see `PartitionStatus::stuck_since_ms`) for longer than
//!   `strait.health.stall.timeout.ms`. Partitions an operator paused or stopped do not count.
//!   Nor has a shard taken none of the control loop's commands for that long (`shard_stuck`):
//!   what it was told to start, stop or seek does not happen.
//!   A partition whose target does not answer has lag and makes no progress, so it turns
//!   strait not ready after the timeout, with the shard's reason (`target_unreachable`...).
//!
//! Continuous verification (`strait.verify.enabled`) that found a record missing, extra or
//! different on the target makes strait not ready too (`verify_mismatch`, with the partition
//! and the offsets), until the process restarts: a copy that differs is not healthy.
//!
//! `/health` is an alias of `/health/ready`.

use std::time::Duration;

use serde::Serialize;

use super::status::{ApiState, Status};

/// The reason of a partition in which continuous verification found a difference.
pub const VERIFY_MISMATCH: &str = "verify_mismatch";

/// A snapshot older than this means the control loop is stuck.
pub const STALE_AFTER: Duration = Duration::from_secs(30);

/// A partition that keeps strait from being ready.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct NotReadyPartition {
    pub flow: String,
    pub topic: String,
    pub partition: i32,
    /// `failed`, or the stall reason (`target_unreachable`, ...; `no_progress` when the shard
    /// reported none).
    pub reason: String,
    /// The error or the stall's last error.
    pub detail: Option<String>,
    /// Since when (ms since the epoch).
    pub since_ms: i64,
    pub lag: i64,
}

/// The answer of a health endpoint.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Health {
    /// `ok`, `starting`, `stalled` (the control loop), or `not_ready`.
    pub status: &'static str,
    /// Age of the snapshot this is decided from, ms (absent before the first).
    pub snapshot_age_ms: Option<u64>,
    /// Why not ready, in words.
    pub reasons: Vec<String>,
    /// At most [`MAX_LISTED`] of the partitions that keep strait from being ready.
    pub partitions: Vec<NotReadyPartition>,
}

/// Partitions listed at most in a health answer (the count is in `reasons`).
pub const MAX_LISTED: usize = 20;

impl Health {
    pub fn is_ok(&self) -> bool {
        self.status == "ok"
    }
}

/// Liveness from the snapshot's age (`None`: nothing published yet).
pub fn live(age: Option<Duration>) -> Health {
    let (status, reasons) = match age {
        None => ("starting", vec!["no status published yet".to_string()]),
        Some(a) if a >= STALE_AFTER => (
            "stalled",
            vec![format!(
                "the control loop published nothing for {} s",
                a.as_secs()
            )],
        ),
        Some(_) => ("ok", Vec::new()),
    };
    Health {
        status,
        snapshot_age_ms: age.map(|a| a.as_millis() as u64),
        reasons,
        partitions: Vec::new(),
    }
}

/// Readiness of `status`, published `age` ago, at `now_ms` (ms since the epoch).
pub fn ready(status: &Status, age: Option<Duration>, now_ms: i64) -> Health {
    let mut h = live(age);
    if !h.is_ok() {
        return h;
    }
    let timeout_ms = i64::try_from(status.settings.stall_timeout_ms).unwrap_or(i64::MAX);
    let unassigned = status
        .group
        .as_ref()
        .filter(|g| g.state != "stable")
        .map(|g| {
            format!(
                "group {} is {}: this member replicates its partitions only once the group coordinator on cluster {} assigns them",
                g.group_id, g.state, g.cluster
            )
        });
    let mut bad = Vec::new();
    for f in &status.flows {
        for p in &f.partitions {
            let entry = |reason: String, detail: Option<String>, since_ms: i64| NotReadyPartition {
                flow: f.name.clone(),
                topic: p.topic.clone(),
                partition: p.partition,
                reason,
                detail,
                since_ms,
                lag: p.lag,
            };
            if let Some(v) = p.verification.as_ref().filter(|v| v.mismatches > 0) {
                let detail = format!(
                    "{} record(s) missing, extra or different; first: {}",
                    v.mismatches,
                    v.first_mismatch.as_deref().unwrap_or("-")
                );
                let since = v.first_mismatch_at_ms.unwrap_or(v.last_round_ms);
                bad.push(entry(VERIFY_MISMATCH.into(), Some(detail), since));
            }
            if p.api_state == ApiState::Failed {
                bad.push(entry("failed".into(), p.error.clone(), p.since_ms));
            } else if p.api_state == ApiState::Running
                && let Some(since) = p.stuck_since_ms.or_else(|| source_stalled_since(p))
                && now_ms.saturating_sub(since) > timeout_ms
            {
                let (reason, detail) = match (&p.stall, unassigned.as_ref()) {
                    (Some(s), _) => (s.reason.clone(), Some(s.detail.clone())),
                    // No shard stall, but the member is not in a stable group: it holds its
                    // partitions only once the coordinator assigns them again.
                    (None, Some(why)) => ("group_unavailable".into(), Some(why.clone())),
                    (None, None) => ("no_progress".into(), None),
                };
                bad.push(entry(reason, detail, since));
            }
        }
    }
    // A member out of its group for longer than the stall timeout holds no partitions, so
    // none of them is listed as stuck: its share of the work is not done all the same.
    let group_stuck = status
        .group
        .as_ref()
        .filter(|g| g.state != "stable" && now_ms.saturating_sub(g.state_since_ms) > timeout_ms);
    if let (Some(g), Some(why)) = (group_stuck, unassigned.as_ref()) {
        h.reasons.push(format!(
            "group_unavailable: {why} (for {} s)",
            now_ms.saturating_sub(g.state_since_ms) / 1000
        ));
    }
    let stuck = stuck_shards(status, now_ms, timeout_ms);
    let shard_stuck = !stuck.is_empty();
    h.reasons.extend(stuck);
    if bad.is_empty() {
        if group_stuck.is_some() || shard_stuck {
            h.status = "not_ready";
        }
        return h;
    }
    h.reasons.extend(partition_reasons(&bad, timeout_ms));
    bad.truncate(MAX_LISTED);
    h.status = "not_ready";
    h.partitions = bad;
    h
}

/// The reasons, in words, of the partitions that keep strait from being ready.
fn partition_reasons(bad: &[NotReadyPartition], timeout_ms: i64) -> Vec<String> {
    let mut out = Vec::new();
    let failed = bad.iter().filter(|b| b.reason == "failed").count();
    if failed > 0 {
        out.push(format!("{failed} partition(s) failed"));
    }
    let mismatched = bad.iter().filter(|b| b.reason == VERIFY_MISMATCH).count();
    if mismatched > 0 {
        out.push(format!(
            "{VERIFY_MISMATCH}: continuous verification found records missing, extra or different on the target in {mismatched} partition(s)"
        ));
    }
    if bad.len() > failed + mismatched {
        out.push(format!(
            "{} partition(s) with lag (or a source that does not answer) made no progress for more than strait.health.stall.timeout.ms = {timeout_ms} ms",
            bad.len() - failed - mismatched
        ));
    }
    out
}

/// Shards that took none of the control loop's commands for longer than `timeout_ms`, in
/// words: a shard that takes no commands starts, stops and seeks nothing it is told to.
fn stuck_shards(status: &Status, now_ms: i64, timeout_ms: i64) -> Vec<String> {
    status
        .shards
        .iter()
        .filter_map(|s| {
            let idle_ms = now_ms.saturating_sub(s.commands_taken_none_since_ms?);
            (idle_ms > timeout_ms).then(|| {
                format!(
                    "shard_stuck: shard {} has not taken commands for {} s ({} wait for it)",
                    s.shard,
                    idle_ms / 1000,
                    s.commands_waiting
                )
            })
        })
        .collect()
}

/// Since when the shard cannot fetch the partition from its source, if it cannot. Its lag is
/// then unknown (the source's end was last seen when it answered), so without this a source
/// outage looked healthy: 60 s of connection resets on the source showed lag 14 and /health 200
/// while the source grew by 59 000 records (the fault suite's `source-resets`, full profile).
fn source_stalled_since(p: &crate::api::status::PartitionStatus) -> Option<i64> {
    p.stall
        .as_ref()
        .filter(|s| s.reason.starts_with("source_"))
        .map(|s| s.since_ms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::status::{GroupStatus, StallStatus, sample};

    const NOW: i64 = 1_700_000_100_000;

    fn running() -> Status {
        let mut s = sample();
        let p = &mut s.flows[0].partitions[0];
        p.api_state = ApiState::Running;
        p.state = "replicating".into();
        p.error = None;
        s
    }

    #[test]
    fn a_shard_that_takes_no_commands_past_the_stall_timeout_is_not_ready() {
        let mut s = running();
        let timeout = s.settings.stall_timeout_ms as i64;
        s.shards[0].commands_waiting = 7;
        s.shards[0].commands_taken_none_since_ms = Some(NOW - timeout + 1_000);
        assert!(ready(&s, Some(Duration::from_secs(1)), NOW).is_ok());
        s.shards[0].commands_taken_none_since_ms = Some(NOW - timeout - 1_000);
        let h = ready(&s, Some(Duration::from_secs(1)), NOW);
        assert_eq!(h.status, "not_ready");
        assert!(
            h.reasons[0].starts_with(&format!(
                "shard_stuck: shard {} has not taken commands for 61 s",
                s.shards[0].shard
            )),
            "{:?}",
            h.reasons
        );
        assert!(h.reasons[0].ends_with("(7 wait for it)"), "{:?}", h.reasons);
    }

    #[test]
    fn liveness_follows_the_snapshot_age() {
        assert_eq!(live(None).status, "starting");
        assert!(live(Some(Duration::from_secs(1))).is_ok());
        assert_eq!(live(Some(STALE_AFTER)).status, "stalled");
    }

    #[test]
    fn a_verification_mismatch_is_not_ready_and_names_partition_and_offsets() {
        let mut s = sample();
        s.flows[0].partitions[0].api_state = ApiState::Running;
        s.flows[0].partitions[0].error = None;
        let age = Some(Duration::from_secs(1));
        s.flows[0].partitions[0].verification = Some(crate::api::PartitionVerification {
            records_verified: 10,
            ..Default::default()
        });
        assert!(ready(&s, age, NOW).is_ok(), "verified, no mismatch");
        s.flows[0].partitions[0].verification = Some(crate::api::PartitionVerification {
            mismatches: 1,
            first_mismatch: Some("orders-3: extra: target 40".into()),
            first_mismatch_at_ms: Some(NOW - 5),
            ..Default::default()
        });
        let h = ready(&s, age, NOW);
        assert_eq!(h.status, "not_ready");
        assert_eq!(h.partitions[0].reason, VERIFY_MISMATCH);
        assert_eq!(h.partitions[0].partition, 3);
        assert!(
            h.partitions[0]
                .detail
                .as_deref()
                .unwrap()
                .contains("extra: target 40")
        );
        assert!(
            h.reasons[0].starts_with("verify_mismatch"),
            "{:?}",
            h.reasons
        );
    }

    #[test]
    fn a_failed_partition_is_not_ready() {
        let h = ready(&sample(), Some(Duration::from_secs(1)), NOW);
        assert_eq!(h.status, "not_ready");
        assert_eq!(h.partitions[0].reason, "failed");
        assert_eq!(h.partitions[0].detail.as_deref(), Some("boom"));
    }

    #[test]
    fn a_partition_stuck_past_the_timeout_is_not_ready_and_says_why() {
        let mut s = running();
        let age = Some(Duration::from_secs(1));
        assert!(ready(&s, age, NOW).is_ok());
        let timeout = s.settings.stall_timeout_ms as i64;
        let p = &mut s.flows[0].partitions[0];
        p.stuck_since_ms = Some(NOW - timeout + 1_000);
        p.stall = Some(StallStatus {
            reason: "target_unreachable".into(),
            detail: "broker 1: connection refused".into(),
            since_ms: NOW - timeout + 1_000,
        });
        assert!(ready(&s, age, NOW).is_ok(), "not yet past the timeout");
        let h = ready(&s, age, NOW + 2_000);
        assert_eq!(h.status, "not_ready");
        assert_eq!(h.partitions[0].reason, "target_unreachable");
        assert!(h.reasons[0].contains("no progress"), "{:?}", h.reasons);
        // Paused by an operator: not counted.
        s.flows[0].partitions[0].api_state = ApiState::Paused;
        assert!(ready(&s, age, NOW + 2_000).is_ok());
    }

    #[test]
    fn a_source_that_does_not_answer_is_not_ready_even_without_known_lag() {
        let mut s = running();
        let age = Some(Duration::from_secs(1));
        let timeout = s.settings.stall_timeout_ms as i64;
        let p = &mut s.flows[0].partitions[0];
        p.lag = 0;
        p.stuck_since_ms = None;
        p.stall = Some(StallStatus {
            reason: "source_unreachable".into(),
            detail: "broker 127.0.0.1:1: connection reset".into(),
            since_ms: NOW - timeout - 1_000,
        });
        let h = ready(&s, age, NOW);
        assert_eq!(h.status, "not_ready");
        assert_eq!(h.partitions[0].reason, "source_unreachable");
        // A target-side stall without lag is nothing to wait for.
        s.flows[0].partitions[0].stall.as_mut().unwrap().reason = "target_unreachable".into();
        assert!(ready(&s, age, NOW).is_ok());
    }

    #[test]
    fn a_stuck_partition_of_a_member_out_of_its_group_names_the_group() {
        let mut s = running();
        let age = Some(Duration::from_secs(1));
        let timeout = s.settings.stall_timeout_ms as i64;
        s.flows[0].partitions[0].stuck_since_ms = Some(NOW - timeout - 1_000);
        s.group = Some(GroupStatus {
            group_id: "g".into(),
            cluster: "B".into(),
            state: "stable".into(),
            ..GroupStatus::default()
        });
        assert_eq!(ready(&s, age, NOW).partitions[0].reason, "no_progress");
        if let Some(g) = s.group.as_mut() {
            g.state = "lapsed".into();
        }
        let h = ready(&s, age, NOW);
        assert_eq!(h.partitions[0].reason, "group_unavailable");
        let detail = h.partitions[0].detail.clone().unwrap_or_default();
        assert!(
            detail.contains("group g is lapsed") && detail.contains("cluster B"),
            "{detail}"
        );
    }

    #[test]
    fn a_member_out_of_its_group_past_the_stall_timeout_is_not_ready_though_it_holds_nothing() {
        let mut s = running();
        s.flows[0].partitions.clear();
        let age = Some(Duration::from_secs(1));
        let timeout = s.settings.stall_timeout_ms as i64;
        s.group = Some(GroupStatus {
            group_id: "g".into(),
            cluster: "B".into(),
            state: "lapsed".into(),
            state_since_ms: NOW - timeout + 1_000,
            ..GroupStatus::default()
        });
        assert_eq!(ready(&s, age, NOW).status, "ok", "not yet past the timeout");
        if let Some(g) = s.group.as_mut() {
            g.state_since_ms = NOW - timeout - 1_000;
        }
        let h = ready(&s, age, NOW);
        assert_eq!(h.status, "not_ready");
        assert!(
            h.reasons[0].starts_with("group_unavailable: group g is lapsed"),
            "{:?}",
            h.reasons
        );
        if let Some(g) = s.group.as_mut() {
            g.state = "stable".into();
        }
        assert_eq!(ready(&s, age, NOW).status, "ok");
    }

    #[test]
    fn a_stale_snapshot_is_neither_live_nor_ready() {
        let h = ready(&running(), Some(STALE_AFTER + Duration::from_secs(1)), NOW);
        assert_eq!(h.status, "stalled");
    }
}
