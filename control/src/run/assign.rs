//! Assignment of source partitions to shards, as a pure function of topic management's findings
//! and the control loop's partition table: new partitions go to the least loaded shard; a
//! partition whose topic vanished and came back keeps its slot; a recreated topic stops its
//! partitions or restarts them from the earliest offset; a deleted one is paused or dropped.
//! The decisions come out as [`Effect`]s, which the control loop carries out (sends the shard
//! commands, counts the resets, stores the new positions).
#![deny(clippy::disallowed_methods)]

use std::collections::BTreeMap;

use strait_dataplane::shard::{FlowId, PartitionKey, PartitionProgress, ShardCommand};

use crate::duties::topics::{NewPartition, TopicChange};
use crate::model::TopicPartition;
use crate::store::progress;

/// The control loop's record of one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PartitionState {
    pub(crate) shard: usize,
    pub(crate) flow: FlowId,
    pub(crate) topic_id: [u8; 16],
    pub(crate) next_offset: i64,
    /// `--until-caught-up`: the source end at start.
    pub(crate) target_end: i64,
    pub(crate) failed: Option<String>,
    /// `shard` holds the partition (an Assign was sent and no Revoke since).
    pub(crate) assigned: bool,
    /// The source topic disappeared: the shard holds the partition paused, so that the topic
    /// coming back continues the same slot (and its producer sequence) with a Seek.
    pub(crate) vanished: bool,
    /// The source's end at the shard's last fetch (-1 before it), for lag.
    pub(crate) end_offset: i64,
    /// Paused by an operator (REST API).
    pub(crate) paused: bool,
    /// Records copied since start (the acknowledged mapping segments), for the API.
    pub(crate) records_copied: u64,
    /// After a Revoke: the shard drained the partition (`ShardEvent::Revoked`), its position is
    /// final.
    pub(crate) released: bool,
    /// The generation of the last Seek sent to `shard` since the Assign (0 for none): reports
    /// of an older one were made before it and must not move the position back.
    pub(crate) seek_generation: u32,
}

/// The partition table: every partition the control loop knows, by flow, topic and partition.
pub(crate) type Partitions = BTreeMap<PartitionKey, PartitionState>;

/// What the control loop must do for a decision, in order.
#[derive(Debug)]
pub(crate) enum Effect {
    /// Send `command` to shard `shard`.
    Send { shard: usize, command: ShardCommand },
    /// A partition of flow `flow` restarts from the earliest offset after its position was lost
    /// (`strait.on.lost.position=earliest`): count it, and store `entry` as its progress.
    Reset {
        flow: FlowId,
        tp: TopicPartition,
        entry: progress::Entry,
    },
}

/// Applies topic management's findings to the partition table over `shards` shards, and
/// returns what to tell the shards and the flows. `reset_lost_positions` is
/// `strait.on.lost.position=earliest`.
pub(crate) fn apply_topic_changes(
    changes: Vec<TopicChange>,
    parts: &mut Partitions,
    shards: usize,
    reset_lost_positions: bool,
) -> Vec<Effect> {
    let mut out = Vec::new();
    if changes.is_empty() {
        return out;
    }
    let mut load = vec![0usize; shards];
    for p in parts.values().filter(|p| p.failed.is_none()) {
        if let Some(l) = load.get_mut(p.shard) {
            *l += 1;
        }
    }
    for change in changes {
        match change {
            TopicChange::Start(np) => start(*np, parts, &mut load, &mut out),
            TopicChange::Recreated {
                key,
                new_topic_id,
                log_start,
                message,
            } => {
                let Some(st) = parts.get_mut(&key) else {
                    continue;
                };
                recreated(
                    key,
                    st,
                    new_topic_id,
                    log_start,
                    &message,
                    reset_lost_positions,
                    &mut out,
                );
            }
            TopicChange::Vanished { key } => match parts.get_mut(&key) {
                Some(st) if st.assigned => {
                    out.push(Effect::Send {
                        shard: st.shard,
                        command: ShardCommand::Pause(key),
                    });
                    st.vanished = true;
                }
                Some(_) => {
                    parts.remove(&key);
                }
                None => {}
            },
            TopicChange::MaxMessageBytes { key, bytes } => {
                if let Some(st) = parts.get(&key)
                    && st.assigned
                {
                    out.push(Effect::Send {
                        shard: st.shard,
                        command: ShardCommand::SetMaxMessageBytes(key, bytes),
                    });
                }
            }
        }
    }
    debug_assert!(
        parts.values().all(|p| !p.assigned || p.shard < shards),
        "a partition assigned to a shard that does not exist"
    );
    out
}

/// Starts a partition: in the slot its shard still holds, or on the least loaded shard.
fn start(np: NewPartition, parts: &mut Partitions, load: &mut [usize], out: &mut Vec<Effect>) {
    let start = np.assignment.start_offset;
    // A partition its shard still holds (its topic vanished and came back): reuse the slot. A
    // new slot on the same shard would restart the producer's sequence numbers for the target
    // partition, which the broker refuses.
    if let Some(st) = parts.get_mut(&np.key)
        && st.assigned
    {
        let shard = st.shard;
        let send = |command| Effect::Send { shard, command };
        match np.failed {
            None => {
                out.push(send(st.seek(&np.key, start)));
                out.push(send(ShardCommand::SetMaxMessageBytes(
                    np.key.clone(),
                    np.assignment.max_message_bytes,
                )));
                if st.vanished {
                    out.push(send(ShardCommand::Resume(np.key.clone())));
                }
            }
            Some(_) => {
                out.push(send(ShardCommand::Revoke(np.key.clone())));
                st.assigned = false;
            }
        }
        st.topic_id = np.topic_id;
        st.next_offset = start;
        st.target_end = np.end_offset;
        st.failed = np.failed;
        st.vanished = false;
        return;
    }
    let shard = (0..load.len()).min_by_key(|&i| load[i]).unwrap_or(0);
    let assigned = np.failed.is_none();
    if assigned {
        load[shard] += 1;
        out.push(Effect::Send {
            shard,
            command: ShardCommand::Assign(Box::new(np.assignment.clone())),
        });
    }
    parts.insert(
        np.key.clone(),
        PartitionState {
            shard,
            flow: np.key.flow,
            topic_id: np.topic_id,
            next_offset: start,
            target_end: np.end_offset,
            failed: np.failed,
            assigned,
            vanished: false,
            end_offset: -1,
            paused: false,
            records_copied: 0,
            released: false,
            seek_generation: 0,
        },
    );
}

impl PartitionState {
    /// The command that restarts the partition from `offset`, numbered as the next seek.
    pub(crate) fn seek(&mut self, key: &PartitionKey, offset: i64) -> ShardCommand {
        self.seek_generation += 1;
        ShardCommand::Seek {
            key: key.clone(),
            offset,
            generation: self.seek_generation,
        }
    }
}

/// The reports made after the control loop's last seek of their partition: one made before it
/// (still in the channel when the seek was sent) would move the position back to where the
/// operator moved it from.
pub(crate) fn after_last_seek(
    progress: Vec<PartitionProgress>,
    parts: &Partitions,
) -> Vec<PartitionProgress> {
    progress
        .into_iter()
        .filter(|p| !before_last_seek(&p.key, p.seek_generation, parts))
        .collect()
}

/// Whether something the shard said about `key` at seek `generation` predates control's last
/// seek of it (a report, or a failure the seek has cleared in the shard).
pub(crate) fn before_last_seek(key: &PartitionKey, generation: u32, parts: &Partitions) -> bool {
    parts
        .get(key)
        .is_some_and(|st| st.seek_generation != generation)
}

/// A replicated partition's source topic was recreated: restart it from the new topic's log
/// start (`reset_lost_positions`), or stop it.
fn recreated(
    key: PartitionKey,
    st: &mut PartitionState,
    new_topic_id: [u8; 16],
    log_start: i64,
    message: &str,
    reset_lost_positions: bool,
    out: &mut Vec<Effect>,
) {
    // Already restarted on the new topic (after the shard lost its position).
    if st.topic_id == new_topic_id {
        return;
    }
    if reset_lost_positions {
        if !st.assigned {
            return;
        }
        st.failed = None;
        tracing::warn!(partition = %key, "{message}; RESTARTING FROM THE EARLIEST OFFSET {log_start} (strait.on.lost.position=earliest): records may be skipped or copied again");
        out.push(Effect::Send {
            shard: st.shard,
            command: st.seek(&key, log_start),
        });
        st.topic_id = new_topic_id;
        st.next_offset = log_start;
        out.push(Effect::Reset {
            flow: st.flow,
            tp: TopicPartition::new(&*key.topic, key.partition),
            entry: progress::Entry {
                next_offset: log_start,
                topic_id: new_topic_id,
                target_offset: -1,
                leader_epoch: -1,
            },
        });
    } else if st.failed.is_none() {
        let error = format!(
            "{message}; the partition is stopped (set strait.on.lost.position=earliest to restart it from the earliest offset)"
        );
        tracing::error!(partition = %key, "{error}");
        out.push(Effect::Send {
            shard: st.shard,
            command: ShardCommand::Revoke(key),
        });
        st.assigned = false;
        st.failed = Some(error);
    } else if let Some(earlier) = st.failed.take_if(|f| !f.starts_with(message)) {
        // The shard may have stopped it first: its fetch position was past the new log (out of
        // range) or in a leader epoch the new log ends sooner (a KIP-320 divergence). The
        // recreation is the cause the operator needs to read, once.
        let error = format!(
            "{message}; the partition had already stopped ({earlier}) (set strait.on.lost.position=earliest to restart it from the earliest offset)"
        );
        tracing::error!(partition = %key, "{error}");
        st.failed = Some(error);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use strait_dataplane::shard::{
        Assignment, ClusterEndpoint, FetchSettings, PathCounts, ProduceSettings,
    };

    use super::*;

    fn endpoint() -> Arc<ClusterEndpoint> {
        Arc::new(ClusterEndpoint {
            alias: "A".into(),
            bootstrap: vec!["a:9092".into()],
            config: Default::default(),
            tls: None,
        })
    }

    fn new_partition(topic: &str, partition: i32, failed: Option<&str>) -> TopicChange {
        let key = PartitionKey::new(0, topic, partition);
        TopicChange::Start(Box::new(NewPartition {
            assignment: Assignment {
                key: key.clone(),
                source: endpoint(),
                target: endpoint(),
                target_topic: Arc::from(format!("A.{topic}").as_str()),
                start_offset: 5,
                start_leader_epoch: -1,
                start_target_offset: -1,
                max_message_bytes: 1_000,
                fetch: FetchSettings::default(),
                produce: ProduceSettings::default(),
                transactional: None,
                source_leader: None,
            },
            key,
            topic_id: [1; 16],
            end_offset: 9,
            failed: failed.map(String::from),
            recovered: Vec::new(),
        }))
    }

    /// The commands sent, as `(shard, command name)`.
    fn sent(effects: &[Effect]) -> Vec<(usize, String)> {
        effects
            .iter()
            .filter_map(|e| match e {
                Effect::Send { shard, command } => {
                    let name = format!("{command:?}");
                    Some((
                        *shard,
                        name[..name.find(['(', ' ']).unwrap_or(name.len())].to_string(),
                    ))
                }
                Effect::Reset { .. } => None,
            })
            .collect()
    }

    #[test]
    fn new_partitions_go_to_the_least_loaded_shard() {
        let mut parts = Partitions::new();
        let changes = (0..5).map(|p| new_partition("t", p, None)).collect();
        let effects = apply_topic_changes(changes, &mut parts, 2, false);
        let shards: Vec<usize> = sent(&effects).iter().map(|(s, _)| *s).collect();
        assert_eq!(shards, vec![0, 1, 0, 1, 0]);
        assert!(parts.values().all(|p| p.assigned && p.next_offset == 5));
        // A partition that cannot start is recorded, not assigned, and takes no load.
        let effects = apply_topic_changes(
            vec![
                new_partition("u", 0, Some("no remote topic")),
                new_partition("u", 1, None),
            ],
            &mut parts,
            2,
            false,
        );
        assert_eq!(sent(&effects), vec![(1, "Assign".to_string())]);
        let failed = &parts[&PartitionKey::new(0, "u", 0)];
        assert!(!failed.assigned && failed.failed.is_some());
    }

    #[test]
    fn a_topic_that_comes_back_keeps_its_slot() {
        let mut parts = Partitions::new();
        apply_topic_changes(vec![new_partition("t", 0, None)], &mut parts, 3, false);
        let key = PartitionKey::new(0, "t", 0);
        let effects = apply_topic_changes(
            vec![TopicChange::Vanished { key: key.clone() }],
            &mut parts,
            3,
            false,
        );
        assert_eq!(sent(&effects), vec![(0, "Pause".to_string())]);
        assert!(parts[&key].vanished);
        let effects = apply_topic_changes(vec![new_partition("t", 0, None)], &mut parts, 3, false);
        assert_eq!(
            sent(&effects),
            vec![
                (0, "Seek".to_string()),
                (0, "SetMaxMessageBytes".to_string()),
                (0, "Resume".to_string())
            ]
        );
        assert!(!parts[&key].vanished && parts[&key].assigned);
    }

    #[test]
    fn reports_from_before_a_seek_are_dropped() {
        let key = PartitionKey::new(0, "t", 0);
        let mut parts = Partitions::new();
        apply_topic_changes(vec![new_partition("t", 0, None)], &mut parts, 1, false);
        let report = |generation| PartitionProgress {
            key: key.clone(),
            next_offset: 10,
            target_next_offset: 10,
            fetch_offset: 10,
            last_fetched_epoch: -1,
            end_offset: 10,
            log_start_offset: 0,
            queued_batches: 0,
            paused: false,
            stall: None,
            bytes_copied: 0,
            paths: PathCounts::default(),
            oldest_unacked_timestamp_ms: -1,
            seek_generation: generation,
        };
        assert_eq!(after_last_seek(vec![report(0)], &parts).len(), 1);
        let st = parts.get_mut(&key).unwrap();
        let ShardCommand::Seek { generation, .. } = st.seek(&key, 2) else {
            panic!("not a seek");
        };
        assert_eq!(generation, 1);
        assert!(after_last_seek(vec![report(0)], &parts).is_empty());
        assert_eq!(after_last_seek(vec![report(1)], &parts).len(), 1);
        // A failure the shard reported before it applied the seek is stale too.
        assert!(before_last_seek(&key, 0, &parts));
        assert!(!before_last_seek(&key, 1, &parts));
    }

    #[test]
    fn a_recreated_topic_stops_or_restarts_its_partitions() {
        let recreated = |key: &PartitionKey| TopicChange::Recreated {
            key: key.clone(),
            new_topic_id: [2; 16],
            log_start: 3,
            message: "recreated".into(),
        };
        let key = PartitionKey::new(0, "t", 0);
        let mut parts = Partitions::new();
        apply_topic_changes(vec![new_partition("t", 0, None)], &mut parts, 1, false);
        let effects = apply_topic_changes(vec![recreated(&key)], &mut parts, 1, false);
        assert_eq!(sent(&effects), vec![(0, "Revoke".to_string())]);
        assert!(
            parts[&key]
                .failed
                .as_deref()
                .unwrap()
                .contains("strait.on.lost.position")
        );

        let mut parts = Partitions::new();
        apply_topic_changes(vec![new_partition("t", 0, None)], &mut parts, 1, true);
        let effects = apply_topic_changes(vec![recreated(&key)], &mut parts, 1, true);
        assert_eq!(sent(&effects), vec![(0, "Seek".to_string())]);
        assert!(matches!(
            effects.last(),
            Some(Effect::Reset { entry, .. }) if entry.next_offset == 3 && entry.topic_id == [2; 16]
        ));
        // Seen again with the same new id: nothing more to do.
        assert!(apply_topic_changes(vec![recreated(&key)], &mut parts, 1, true).is_empty());

        // Stopped by the shard before discovery saw the new id: the recreation is named, once.
        let mut parts = Partitions::new();
        apply_topic_changes(vec![new_partition("t", 0, None)], &mut parts, 1, false);
        parts.get_mut(&key).unwrap().failed = Some("diverged (KIP-320)".into());
        assert!(apply_topic_changes(vec![recreated(&key)], &mut parts, 1, false).is_empty());
        let failed = parts[&key].failed.clone().unwrap();
        assert!(
            failed.starts_with("recreated") && failed.contains("diverged"),
            "{failed}"
        );
        assert!(apply_topic_changes(vec![recreated(&key)], &mut parts, 1, false).is_empty());
        assert_eq!(parts[&key].failed.as_deref(), Some(failed.as_str()));
    }
}
