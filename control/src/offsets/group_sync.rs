//! Group-offset sync: whether to commit a group's translated offsets on the target
//! (`sync.group.offsets.enabled`), per partition.
//!
//! MM2's `MirrorCheckpointTask.syncGroupOffset` writes every translated offset of a group that is
//! not EMPTY on the target (it assumes such a group is new, i.e. dead or absent; an active group
//! makes the broker reject the commit, which MM2 logs), and for an EMPTY group writes only
//! partitions whose target offset is missing, null, or older than the translated offset.
//!
//! strait is stricter:
//! - it never even attempts a commit for a group with members or in an unknown state: only an
//!   absent, dead or empty target group is written;
//! - it never moves an existing target offset backwards, whatever the group state;
//! - a negative translated offset is never committed (Java's `OffsetAndMetadata` rejects it).

use std::collections::HashMap;
use std::fmt;

use super::TopicPartition;
use super::format::Checkpoint;

/// The state of the consumer group on the target cluster, as `DescribeGroups` /
/// `ConsumerGroupDescribe` report it, plus "absent" for a group the target does not know.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TargetGroupState {
    /// The target has no such group (e.g. `GROUP_ID_NOT_FOUND`).
    Absent,
    /// `Dead`: the classic protocol's answer for a group that does not exist.
    Dead,
    /// `Empty`: no members.
    Empty,
    /// `Stable`: members consuming.
    Stable,
    /// `PreparingRebalance`.
    PreparingRebalance,
    /// `CompletingRebalance`.
    CompletingRebalance,
    /// `Assigning` (KIP-848 consumer groups).
    Assigning,
    /// `Reconciling` (KIP-848 consumer groups).
    Reconciling,
    /// `NotReady` (share and streams groups).
    NotReady,
    /// `Unknown`, or a state name strait does not know.
    Unknown,
}

impl TargetGroupState {
    /// Parses Kafka's state name (`ConsumerGroupState`/`GroupState` `toString`), ignoring case;
    /// anything else is [`TargetGroupState::Unknown`].
    pub fn from_kafka_name(name: &str) -> Self {
        const NAMES: [(&str, TargetGroupState); 9] = [
            ("Dead", TargetGroupState::Dead),
            ("Empty", TargetGroupState::Empty),
            ("Stable", TargetGroupState::Stable),
            ("PreparingRebalance", TargetGroupState::PreparingRebalance),
            ("CompletingRebalance", TargetGroupState::CompletingRebalance),
            ("Assigning", TargetGroupState::Assigning),
            ("Reconciling", TargetGroupState::Reconciling),
            ("NotReady", TargetGroupState::NotReady),
            ("Unknown", TargetGroupState::Unknown),
        ];
        NAMES
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map_or(Self::Unknown, |(_, s)| *s)
    }

    /// True for the states strait commits to: absent, dead or empty.
    pub fn is_idle(&self) -> bool {
        matches!(self, Self::Absent | Self::Dead | Self::Empty)
    }
}

impl fmt::Display for TargetGroupState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Absent => "absent",
            Self::Dead => "Dead",
            Self::Empty => "Empty",
            Self::Stable => "Stable",
            Self::PreparingRebalance => "PreparingRebalance",
            Self::CompletingRebalance => "CompletingRebalance",
            Self::Assigning => "Assigning",
            Self::Reconciling => "Reconciling",
            Self::NotReady => "NotReady",
            Self::Unknown => "Unknown",
        })
    }
}

/// What to do with one partition of a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupSyncAction {
    /// Commit `offset` with `metadata` to the target group.
    Commit {
        /// Translated downstream offset.
        offset: i64,
        /// Metadata carried over from the source commit.
        metadata: String,
        /// The target's current offset, if it had a valid one (older than `offset`).
        previous: Option<i64>,
    },
    /// The target offset is already at or past the translated one: never move backwards.
    SkipNotNewer {
        /// Translated downstream offset.
        translated: i64,
        /// The target's committed offset.
        target: i64,
    },
    /// The target group is not idle: strait never commits to it.
    SkipGroupActive {
        /// Its state.
        state: TargetGroupState,
    },
    /// The translated offset is negative and cannot be committed.
    SkipInvalidOffset {
        /// The offset.
        translated: i64,
    },
}

/// The decision for one target partition of a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupSyncDecision {
    /// Target-side topic-partition.
    pub tp: TopicPartition,
    /// What to do.
    pub action: GroupSyncAction,
}

impl GroupSyncDecision {
    /// A one-line reason for reports.
    pub fn reason(&self) -> String {
        match &self.action {
            GroupSyncAction::Commit {
                offset,
                previous: None,
                ..
            } => format!(
                "commit {offset}: target group has no valid offset for {}",
                self.tp
            ),
            GroupSyncAction::Commit {
                offset,
                previous: Some(p),
                ..
            } => format!(
                "commit {offset}: target offset {p} for {} is older",
                self.tp
            ),
            GroupSyncAction::SkipNotNewer { translated, target } => format!(
                "skip {}: target offset {target} is not behind translated {translated}; offsets never move backwards",
                self.tp
            ),
            GroupSyncAction::SkipGroupActive { state } => format!(
                "skip {}: target group is {state}; strait commits only to absent, dead or empty groups",
                self.tp
            ),
            GroupSyncAction::SkipInvalidOffset { translated } => {
                format!(
                    "skip {}: translated offset {translated} is negative",
                    self.tp
                )
            }
        }
    }

    /// True for [`GroupSyncAction::Commit`].
    pub fn is_commit(&self) -> bool {
        matches!(self.action, GroupSyncAction::Commit { .. })
    }
}

/// Decides, per checkpoint of one group, whether to commit its downstream offset to the target
/// group.
///
/// - `checkpoints`: the group's last checkpoints
///   ([`converted_offsets`](super::CheckpointStore::converted_offsets)); each names a target
///   partition;
/// - `state`: the target group's state;
/// - `target_offsets`: the target group's committed offsets; a partition absent from the map has
///   none, `None` is an entry without a valid offset (e.g. reset to -1 by a non-Java client).
///   Negative offsets count as no valid offset.
///
/// Decisions come out sorted by partition, so reports are stable.
pub fn plan_group_sync<'a>(
    checkpoints: impl IntoIterator<Item = &'a Checkpoint>,
    state: TargetGroupState,
    target_offsets: &HashMap<TopicPartition, Option<i64>>,
) -> Vec<GroupSyncDecision> {
    let mut decisions: Vec<GroupSyncDecision> = checkpoints
        .into_iter()
        .map(|cp| {
            let tp = cp.topic_partition();
            let translated = cp.downstream_offset;
            let target = target_offsets
                .get(&tp)
                .copied()
                .flatten()
                .filter(|o| *o >= 0);
            let action = if !state.is_idle() {
                GroupSyncAction::SkipGroupActive { state }
            } else if translated < 0 {
                GroupSyncAction::SkipInvalidOffset { translated }
            } else {
                match target {
                    Some(target) if target >= translated => {
                        GroupSyncAction::SkipNotNewer { translated, target }
                    }
                    previous => GroupSyncAction::Commit {
                        offset: translated,
                        metadata: cp.metadata.clone(),
                        previous,
                    },
                }
            };
            GroupSyncDecision { tp, action }
        })
        .collect();
    decisions.sort_by(|a, b| a.tp.cmp(&b.tp));
    decisions
}

/// What one group-sync round did for one group: the report strait logs (and `offsets
/// translate` prints as a plan).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupSyncReport {
    pub group: String,
    /// The target group's state when the round looked.
    pub state: TargetGroupState,
    /// One decision per target partition with a checkpoint.
    pub decisions: Vec<GroupSyncDecision>,
    /// Commits the target refused, with its error.
    pub failures: Vec<(TopicPartition, String)>,
}

impl GroupSyncReport {
    /// Partitions committed.
    pub fn committed(&self) -> usize {
        self.decisions
            .iter()
            .filter(|d| d.is_commit() && !self.failures.iter().any(|(tp, _)| *tp == d.tp))
            .count()
    }
}

impl fmt::Display for GroupSyncReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let skipped = self.decisions.iter().filter(|d| !d.is_commit()).count();
        write!(
            f,
            "group {} (target state {}): {} committed, {} skipped, {} failed",
            self.group,
            self.state,
            self.committed(),
            skipped,
            self.failures.len()
        )?;
        for d in &self.decisions {
            match self.failures.iter().find(|(tp, _)| *tp == d.tp) {
                Some((_, e)) => write!(f, "; {} failed: {e}", d.reason())?,
                None => write!(f, "; {}", d.reason())?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn cp(topic: &str, partition: i32, downstream: i64) -> Checkpoint {
        Checkpoint {
            group: "g".into(),
            topic: topic.into(),
            partition,
            upstream_offset: 0,
            downstream_offset: downstream,
            metadata: "m".into(),
        }
    }

    #[test]
    fn state_names_parse() {
        assert_eq!(
            TargetGroupState::from_kafka_name("Stable"),
            TargetGroupState::Stable
        );
        assert_eq!(
            TargetGroupState::from_kafka_name("EMPTY"),
            TargetGroupState::Empty
        );
        assert_eq!(
            TargetGroupState::from_kafka_name("completingrebalance"),
            TargetGroupState::CompletingRebalance
        );
        assert_eq!(
            TargetGroupState::from_kafka_name("weird"),
            TargetGroupState::Unknown
        );
        assert!(TargetGroupState::Dead.is_idle());
        assert!(!TargetGroupState::Reconciling.is_idle());
        assert!(!TargetGroupState::Unknown.is_idle());
    }

    #[test]
    fn empty_group_commits_only_newer_offsets() {
        let cps = [
            cp("a", 0, 10),
            cp("a", 1, 20),
            cp("a", 2, 30),
            cp("a", 3, 40),
            cp("a", 4, -1),
        ];
        let target: HashMap<_, _> = [
            (TopicPartition::new("a", 0), Some(10)), // equal: skip
            (TopicPartition::new("a", 1), Some(5)),  // older: commit
            (TopicPartition::new("a", 2), None),     // no valid offset: commit
            (TopicPartition::new("a", 3), Some(99)), // newer: skip
        ]
        .into_iter()
        .collect();
        let plan = plan_group_sync(&cps, TargetGroupState::Empty, &target);
        let actions: Vec<_> = plan.iter().map(|d| d.action.clone()).collect();
        assert_eq!(
            actions,
            vec![
                GroupSyncAction::SkipNotNewer {
                    translated: 10,
                    target: 10
                },
                GroupSyncAction::Commit {
                    offset: 20,
                    metadata: "m".into(),
                    previous: Some(5)
                },
                GroupSyncAction::Commit {
                    offset: 30,
                    metadata: "m".into(),
                    previous: None
                },
                GroupSyncAction::SkipNotNewer {
                    translated: 40,
                    target: 99
                },
                GroupSyncAction::SkipInvalidOffset { translated: -1 },
            ]
        );
        assert!(plan[0].reason().contains("never move backwards"));
    }

    #[test]
    fn absent_group_commits_everything_valid() {
        let cps = [cp("b", 1, 7), cp("a", 0, 3)];
        let plan = plan_group_sync(&cps, TargetGroupState::Absent, &HashMap::new());
        assert!(plan.iter().all(GroupSyncDecision::is_commit));
        // Sorted by partition.
        assert_eq!(plan[0].tp, TopicPartition::new("a", 0));
    }

    #[test]
    fn active_groups_are_never_touched() {
        for state in [
            TargetGroupState::Stable,
            TargetGroupState::PreparingRebalance,
            TargetGroupState::CompletingRebalance,
            TargetGroupState::Assigning,
            TargetGroupState::Reconciling,
            TargetGroupState::NotReady,
            TargetGroupState::Unknown,
        ] {
            let plan = plan_group_sync(&[cp("a", 0, 10)], state, &HashMap::new());
            assert_eq!(plan[0].action, GroupSyncAction::SkipGroupActive { state });
            assert!(plan[0].reason().contains(&state.to_string()));
        }
    }

    proptest! {
        #[test]
        fn never_commits_backwards_or_to_active_groups(
            downstream in -2i64..100,
            target in proptest::option::of(proptest::option::of(-2i64..100)),
            state_idx in 0usize..10,
        ) {
            let states = [
                TargetGroupState::Absent, TargetGroupState::Dead, TargetGroupState::Empty,
                TargetGroupState::Stable, TargetGroupState::PreparingRebalance,
                TargetGroupState::CompletingRebalance, TargetGroupState::Assigning,
                TargetGroupState::Reconciling, TargetGroupState::NotReady, TargetGroupState::Unknown,
            ];
            let state = states[state_idx];
            let tp = TopicPartition::new("a", 0);
            let mut offsets = HashMap::new();
            if let Some(t) = target {
                offsets.insert(tp.clone(), t);
            }
            let plan = plan_group_sync(&[cp("a", 0, downstream)], state, &offsets);
            prop_assert_eq!(plan.len(), 1);
            if let GroupSyncAction::Commit { offset, .. } = plan[0].action {
                prop_assert!(state.is_idle());
                prop_assert!(offset >= 0);
                if let Some(Some(t)) = target {
                    prop_assert!(t < offset);
                }
            } else {
                let expect_commit = state.is_idle()
                    && downstream >= 0
                    && !matches!(target, Some(Some(t)) if t >= downstream);
                prop_assert!(!expect_commit, "{:?}", plan[0]);
            }
        }
    }

    #[test]
    fn report_lines_say_why() {
        let r = GroupSyncReport {
            group: "g".into(),
            state: TargetGroupState::Stable,
            decisions: plan_group_sync(
                [Checkpoint {
                    group: "g".into(),
                    topic: "A.t".into(),
                    partition: 0,
                    upstream_offset: 5,
                    downstream_offset: 5,
                    metadata: String::new(),
                }]
                .iter(),
                TargetGroupState::Stable,
                &HashMap::new(),
            ),
            failures: Vec::new(),
        };
        let text = r.to_string();
        assert!(text.contains("0 committed, 1 skipped"), "{text}");
        assert!(text.contains("Stable"), "{text}");
        assert_eq!(r.committed(), 0);
    }
}
