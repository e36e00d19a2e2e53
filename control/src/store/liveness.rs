//! The liveness record: one per flow, in the flow's progress topic
//! (`strait-progress.<source>.internal`), saying whether a `strait run` replicates the flow.
//!
//! - key: `{"liveness":{"source":"A","target":"B"}}`
//! - value: `{"instance":"<uuid>","state":"running","time_ms":..,"interval_ms":5000}`
//!
//! A running instance writes `running` when it starts and every [`LIVENESS_INTERVAL_MS`]
//! ([`crate::duties::liveness`]), and `stopped` after its final progress flush. The import and
//! export commands ([`crate::commands::migrate`]) read the last record ([`last_liveness`]) and
//! [`judge`] it: a `running` record younger than [`LIVENESS_MISSED_BEATS`] intervals means the
//! flow is active. Ages use the writer's and the reader's clocks, so hosts must agree within
//! seconds; a record from the future counts as active.
//!
//! MirrorMaker 2 replicating the same flow is seen through its Connect worker group
//! ([`mm2_running`]): `strait run` refuses to start beside it, and so do import and export.

use serde::{Deserialize, Serialize};

use crate::cluster::{Cluster, ClusterError, IsolationLevel};
use crate::store::records;

/// How often a running instance writes its liveness record.
pub const LIVENESS_INTERVAL_MS: u64 = 5_000;

/// A `running` record older than this many intervals means the instance is gone.
pub const LIVENESS_MISSED_BEATS: u64 = 3;

#[derive(Serialize, Deserialize)]
struct Pair<'a> {
    source: &'a str,
    target: &'a str,
}

#[derive(Serialize, Deserialize)]
struct LivenessKey<'a> {
    #[serde(borrow)]
    liveness: Pair<'a>,
}

/// Whether an instance is running or stopped cleanly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunState {
    Running,
    Stopped,
}

/// The value of a liveness record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LivenessRecord {
    /// Random id of the `strait run` process.
    pub instance: String,
    pub state: RunState,
    /// The writer's clock when written.
    pub time_ms: i64,
    /// How often the writer beats.
    pub interval_ms: u64,
}

/// The key of flow `source->target`'s liveness record in the progress topic.
pub fn liveness_key(source: &str, target: &str) -> Vec<u8> {
    serde_json::to_vec(&LivenessKey {
        liveness: Pair { source, target },
    })
    .expect("plain structs serialize")
}

/// The value of a liveness record.
pub fn liveness_value(r: &LivenessRecord) -> Vec<u8> {
    serde_json::to_vec(r).expect("plain structs serialize")
}

/// Whether a key of the progress topic is a liveness key (of any flow).
pub fn is_liveness_key(key: &[u8]) -> bool {
    serde_json::from_slice::<LivenessKey<'_>>(key).is_ok()
}

/// Decodes a liveness record of flow `source->target`; `None` for anything else.
pub fn decode_liveness(
    source: &str,
    target: &str,
    key: &[u8],
    value: Option<&[u8]>,
) -> Option<LivenessRecord> {
    let k: LivenessKey<'_> = serde_json::from_slice(key).ok()?;
    if k.liveness.source != source || k.liveness.target != target {
        return None;
    }
    serde_json::from_slice(value?).ok()
}

/// What the liveness record says about a flow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Activity {
    /// No strait instance ever ran the flow (against this progress topic).
    NeverRan,
    /// The last instance stopped cleanly.
    Stopped { instance: String, at_ms: i64 },
    /// An instance beat recently: replication is active.
    Running { instance: String, age_ms: i64 },
    /// The last instance said it was running but stopped beating (crashed, or killed).
    Silent { instance: String, age_ms: i64 },
}

/// Judges the last liveness record of a flow at `now_ms`.
pub fn judge(last: Option<&LivenessRecord>, now_ms: i64) -> Activity {
    let Some(r) = last else {
        return Activity::NeverRan;
    };
    let age_ms = now_ms.saturating_sub(r.time_ms);
    let limit =
        i64::try_from(r.interval_ms.saturating_mul(LIVENESS_MISSED_BEATS)).unwrap_or(i64::MAX);
    match r.state {
        RunState::Stopped => Activity::Stopped {
            instance: r.instance.clone(),
            at_ms: r.time_ms,
        },
        RunState::Running if age_ms < limit => Activity::Running {
            instance: r.instance.clone(),
            age_ms,
        },
        RunState::Running => Activity::Silent {
            instance: r.instance.clone(),
            age_ms,
        },
    }
}

/// The last liveness record of flow `source->target` in its progress topic `progress_topic`
/// (`None` if there is none, or no progress topic at all).
pub async fn last_liveness(
    target: &Cluster,
    progress_topic: &str,
    source: &str,
    target_alias: &str,
) -> Result<Option<LivenessRecord>, ClusterError> {
    let md = target.refresh_metadata(Some(&[progress_topic])).await?;
    if !md.topics.contains_key(progress_topic) {
        return Ok(None);
    }
    let mut last = None;
    records::read_to_end(
        target,
        progress_topic,
        0,
        IsolationLevel::ReadUncommitted,
        |r| {
            if let Some(k) = r.key.as_deref()
                && let Some(l) = decode_liveness(source, target_alias, k, r.value.as_deref())
            {
                last = Some(l);
            }
        },
    )
    .await?;
    Ok(last)
}

/// The Connect worker group MM2 runs for herder `source->target` (on the target).
pub fn mm2_worker_group(source: &str) -> String {
    format!("{source}-mm2")
}

/// Why MirrorMaker 2 is replicating flow `source->target` (its worker group on the target has
/// members), or `None`.
pub async fn mm2_running(
    target: &Cluster,
    source: &str,
    target_alias: &str,
) -> Result<Option<String>, ClusterError> {
    let group = mm2_worker_group(source);
    let groups = match target.describe_groups(std::slice::from_ref(&group)).await {
        Ok(g) => g,
        // Kafka 4's group coordinator answers so for a group that never existed.
        Err(e) if e.is(kafka_protocol::ResponseError::GroupIdNotFound) => Vec::new(),
        Err(e) => return Err(e),
    };
    Ok(groups.iter().find(|g| g.members > 0).map(|g| {
        format!(
            "MirrorMaker 2 is running: its worker group {group} on {target_alias} has {} member(s) (state {}); stop MM2 first",
            g.members, g.state
        )
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::TopicPartition;
    use crate::store::progress;
    use proptest::prelude::*;

    #[test]
    fn liveness_layout() {
        assert_eq!(
            String::from_utf8(liveness_key("A", "B")).unwrap(),
            r#"{"liveness":{"source":"A","target":"B"}}"#
        );
        let r = LivenessRecord {
            instance: "i".into(),
            state: RunState::Running,
            time_ms: 7,
            interval_ms: 5000,
        };
        assert_eq!(
            String::from_utf8(liveness_value(&r)).unwrap(),
            r#"{"instance":"i","state":"running","time_ms":7,"interval_ms":5000}"#
        );
        // Progress keys are not liveness keys and the other way round.
        let pk = progress::encode_key("A", &TopicPartition::new("t", 0));
        assert!(!is_liveness_key(&pk));
        assert!(is_liveness_key(&liveness_key("A", "B")));
        assert_eq!(
            progress::decode("A", &liveness_key("A", "B"), None),
            Ok(None)
        );
        assert_eq!(
            decode_liveness("A", "C", &liveness_key("A", "B"), Some(&liveness_value(&r))),
            None
        );
        assert_eq!(
            decode_liveness("A", "B", &pk, Some(&liveness_value(&r))),
            None
        );
    }

    #[test]
    fn judging() {
        let r = |state, time_ms| LivenessRecord {
            instance: "i".into(),
            state,
            time_ms,
            interval_ms: 5_000,
        };
        assert_eq!(judge(None, 0), Activity::NeverRan);
        assert!(matches!(
            judge(Some(&r(RunState::Running, 1_000)), 15_999),
            Activity::Running { age_ms: 14_999, .. }
        ));
        assert!(matches!(
            judge(Some(&r(RunState::Running, 1_000)), 16_000),
            Activity::Silent { .. }
        ));
        // A record from a clock ahead of ours counts as running.
        assert!(matches!(
            judge(Some(&r(RunState::Running, 50_000)), 1_000),
            Activity::Running { .. }
        ));
        assert!(matches!(
            judge(Some(&r(RunState::Stopped, 1_000)), 1_001),
            Activity::Stopped { .. }
        ));
    }

    proptest! {
        #[test]
        fn liveness_round_trip(src in "[A-Za-z0-9_-]{1,12}", tgt in "[A-Za-z0-9_-]{1,12}", t in any::<i64>(), iv in any::<u64>(), stopped in any::<bool>()) {
            let r = LivenessRecord {
                instance: "x".into(),
                state: if stopped { RunState::Stopped } else { RunState::Running },
                time_ms: t,
                interval_ms: iv,
            };
            prop_assert_eq!(decode_liveness(&src, &tgt, &liveness_key(&src, &tgt), Some(&liveness_value(&r))), Some(r));
        }
    }
}
