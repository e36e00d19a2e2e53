//! The partitions of a member that lost its place in its group (its session lapsed or the
//! coordinator fenced it: the target, or the group's coordinator, does not answer). It holds
//! none of them then, yet the API keeps listing every partition its flows know as
//! `NOT_ASSIGNED`, with why, the last position it knew and the source end read here every
//! [`READ_INTERVAL`] (the source usually still answers), so that how much is not yet copied
//! keeps showing, and growing, during an outage of the target. Once the group assigns
//! partitions again, the list is gone: in a stable group each member lists what it holds.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use strait_dataplane::shard::{FlowId, PartitionKey};

use super::FlowRuntime;
use super::assign::Partitions;
use crate::api::status::GroupStatus;
use crate::api::{FlowStatus, PartitionStatus};
use crate::cluster::OffsetSpec;
use crate::model::TopicPartition;

/// How often the source ends of unheld partitions are read (one ListOffsets per source leader
/// and flow).
pub(super) const READ_INTERVAL: Duration = Duration::from_secs(5);

/// The `state` of an unheld partition in the run's status (`/status`).
pub(super) const NOT_ASSIGNED: &str = "not_assigned";

/// What the API lists of the partitions this member does not hold while it is out of its group.
#[derive(Debug, Default)]
pub(super) struct Unheld {
    /// Why nothing is assigned; `None` while the member is in its group (nothing is listed).
    why: Option<String>,
    /// Each unheld partition's source end at the last read that answered for it.
    ends: HashMap<PartitionKey, i64>,
    last_read: Option<Instant>,
}

impl Unheld {
    /// Notes that the member is in its group.
    pub(super) fn note_in_group(&mut self) {
        if self.why.take().is_some() {
            self.ends.clear();
            self.last_read = None;
        }
    }

    /// Notes whether the member is out of its group (`lost`), and why, from its status.
    pub(super) fn note_group(&mut self, lost: bool, group: &GroupStatus) {
        if !lost {
            self.note_in_group();
            return;
        }
        self.why = Some(format!(
            "this member is out of group {} on cluster {} ({} since {} ms): no successful \
             heartbeat within its session, or the coordinator fenced it; nothing of this \
             partition is copied here until the group assigns it again",
            group.group_id, group.cluster, group.state, group.state_since_ms
        ));
    }

    /// Every partition the flows know that no shard of this member holds, by flow, while the
    /// member is out of its group.
    fn partitions(
        &self,
        flows: &[FlowRuntime],
        parts: &Partitions,
    ) -> BTreeMap<FlowId, Vec<PartitionKey>> {
        let mut out: BTreeMap<FlowId, Vec<PartitionKey>> = BTreeMap::new();
        if self.why.is_none() {
            return out;
        }
        for (fid, f) in flows.iter().enumerate().filter(|(_, f)| !f.retired) {
            for (topic, known) in f.topics.known() {
                for &p in &known.partitions {
                    let key = PartitionKey::new(fid as FlowId, topic, p);
                    if !parts.contains_key(&key) {
                        out.entry(fid as FlowId).or_default().push(key);
                    }
                }
            }
        }
        out
    }

    /// Reads the source end of every unheld partition when [`READ_INTERVAL`] has passed. A
    /// partition whose read fails keeps its last end (its lag stops growing; the log says why).
    pub(super) async fn read_ends_if_due(
        &mut self,
        flows: &[FlowRuntime],
        parts: &Partitions,
        now: Instant,
    ) {
        if self.why.is_none()
            || self
                .last_read
                .is_some_and(|t| now.duration_since(t) < READ_INTERVAL)
        {
            return;
        }
        self.last_read = Some(now);
        for (fid, keys) in self.partitions(flows, parts) {
            let f = &flows[fid as usize];
            let tps: Vec<TopicPartition> = keys
                .iter()
                .map(|k| TopicPartition::new(&*k.topic, k.partition))
                .collect();
            let isolation = f.plan.fetch.isolation_level.into();
            let ends = f
                .source
                .list_offsets(&tps, OffsetSpec::Latest, isolation)
                .await;
            for (key, tp) in keys.into_iter().zip(&tps) {
                match ends.get(tp) {
                    Some(Ok(end)) => {
                        self.ends.insert(key, *end);
                    }
                    Some(Err(e)) => {
                        tracing::warn!(flow = %f.name(), partition = %tp, error = %e, "cannot read the source end of a partition not assigned to this member; its lag is the last one known");
                    }
                    None => {}
                }
            }
        }
    }

    /// Adds the unheld partitions to the flows' status: their last known position (the stored
    /// progress), the source end last read, and why they are not assigned.
    pub(super) fn list(&self, out: &mut [FlowStatus], flows: &[FlowRuntime], parts: &Partitions) {
        let Some(why) = &self.why else {
            return;
        };
        for (fid, keys) in self.partitions(flows, parts) {
            let (Some(f), Some(fs)) = (flows.get(fid as usize), out.get_mut(fid as usize)) else {
                continue;
            };
            for key in keys {
                let tp = TopicPartition::new(&*key.topic, key.partition);
                let next_offset = f.progress.get(&tp).map_or(-1, |e| e.next_offset);
                let end_offset = self.ends.get(&key).copied().unwrap_or(-1);
                fs.partitions.push(PartitionStatus {
                    topic: key.topic.to_string(),
                    partition: key.partition,
                    remote_topic: (f.plan.remote_name)(&key.topic),
                    next_offset,
                    end_offset,
                    lag: if next_offset >= 0 && end_offset >= 0 {
                        (end_offset - next_offset).max(0)
                    } else {
                        0
                    },
                    state: NOT_ASSIGNED.to_string(),
                    not_assigned_reason: Some(why.clone()),
                    ..PartitionStatus::default()
                });
            }
        }
    }
}
