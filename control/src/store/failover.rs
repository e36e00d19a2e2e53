//! The stored failover state: which topics of a flow were failed over, so that every running
//! `strait run` (any member of the group) stops copying them and a restarted one never starts
//! them again. One small compacted topic per target cluster, [`TOPIC`], one record per flow,
//! written by `strait failover` and read by `strait run` at start and every few seconds.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use strait_dataplane::batch::Record;

use crate::cluster::{Cluster, ClusterError, IsolationLevel};
use crate::store::records;
use crate::store::topics::ensure_compacted_topic;

/// The failover state's topic on the target cluster.
pub const TOPIC: &str = "strait-failover.internal";

/// How far a failover got.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// The topics are stopped: strait copies nothing more of them (the command may not have
    /// finished: a second run goes on from here).
    Stopped,
    /// The groups were moved and the evidence printed.
    Done,
}

/// One flow's failover.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailoverRecord {
    pub stage: Stage,
    /// Source topics no longer copied.
    pub topics: BTreeSet<String>,
    /// Groups whose offsets were (or are to be) set on the target.
    pub groups: BTreeSet<String>,
    /// `true` for a planned failover (the source answered), `false` for an unplanned one.
    pub planned: bool,
    pub started_ms: i64,
    pub updated_ms: i64,
}

#[derive(Serialize, Deserialize)]
struct Key {
    failover: String,
}

/// Every flow's failover record on `cluster` (none when the topic does not exist).
pub async fn read_all(cluster: &Cluster) -> Result<BTreeMap<String, FailoverRecord>, ClusterError> {
    let mut out = BTreeMap::new();
    // One metadata request when there is no failover (the usual case): no retries on an
    // unknown topic.
    if !cluster
        .refresh_metadata(Some(&[TOPIC]))
        .await?
        .topics
        .contains_key(TOPIC)
    {
        return Ok(out);
    }
    let read = records::read_to_end(cluster, TOPIC, 0, IsolationLevel::ReadCommitted, |r| {
        let Some(key) = r
            .key
            .as_deref()
            .and_then(|k| serde_json::from_slice::<Key>(k).ok())
        else {
            return;
        };
        match r.value.as_deref() {
            // A tombstone: the flow's failover was withdrawn.
            None => {
                out.remove(&key.failover);
            }
            Some(v) => match serde_json::from_slice::<FailoverRecord>(v) {
                Ok(rec) => {
                    out.insert(key.failover, rec);
                }
                Err(e) => {
                    tracing::warn!(flow = %key.failover, error = %e, "a record of {TOPIC} does not decode; ignored");
                }
            },
        }
    })
    .await;
    match read {
        Ok(_) => Ok(out),
        Err(e) if e.is_unknown_topic() => Ok(BTreeMap::new()),
        Err(e) => Err(e),
    }
}

/// Writes `flow`'s record (creating the topic, compacted, with `replication_factor`).
pub async fn write(
    cluster: &Cluster,
    flow: &str,
    rec: &FailoverRecord,
    replication_factor: i16,
) -> Result<(), ClusterError> {
    ensure_compacted_topic(cluster, TOPIC, replication_factor).await?;
    let key = serde_json::to_vec(&Key {
        failover: flow.to_string(),
    })
    .unwrap_or_default();
    let value = serde_json::to_vec(rec).unwrap_or_default();
    records::produce(
        cluster,
        TOPIC,
        0,
        &[Record::new(
            crate::time::wall_ms(),
            Some(Bytes::from(key)),
            Some(Bytes::from(value)),
        )],
    )
    .await
    .map(|_| ())
}

/// Takes `topics` out of `flow`'s failover `record` and writes it: strait copies them again
/// (at its next start). With no topic left, the groups go too: nothing is failed over.
pub async fn lift<'t>(
    cluster: &Cluster,
    flow: &str,
    mut record: FailoverRecord,
    topics: impl IntoIterator<Item = &'t str>,
    replication_factor: i16,
) -> Result<(), ClusterError> {
    for t in topics {
        record.topics.remove(t);
    }
    if record.topics.is_empty() {
        record.groups.clear();
    }
    record.updated_ms = crate::time::wall_ms();
    write(cluster, flow, &record, replication_factor).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_record_layout_is_stable() {
        let rec = FailoverRecord {
            stage: Stage::Stopped,
            topics: ["orders".to_string()].into(),
            groups: BTreeSet::new(),
            planned: true,
            started_ms: 1,
            updated_ms: 2,
        };
        let text = serde_json::to_string(&rec).unwrap();
        assert_eq!(
            text,
            r#"{"stage":"stopped","topics":["orders"],"groups":[],"planned":true,"started_ms":1,"updated_ms":2}"#
        );
        assert_eq!(serde_json::from_str::<FailoverRecord>(&text).unwrap(), rec);
        assert!(Stage::Stopped < Stage::Done);
    }
}
