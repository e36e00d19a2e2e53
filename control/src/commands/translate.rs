//! `strait offsets translate`: a group's committed source offsets translated to the target,
//! per partition, with their precision, from the offset-syncs topic, strait's checkpoints and
//! stored progress. It replicates and writes nothing.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;

use crate::cluster::{Cluster, CommittedOffset};
use crate::config::{FlowConfig, Mm2Config, OffsetSyncsLocation};
use crate::duties::offsets::{
    OffsetsError, cluster_for, restore_mappings, seed_from_progress, target_state,
};
use crate::model::TopicPartition;
use crate::offsets::{
    Checkpoint, CheckpointStore, GroupSyncReport, Precision, TargetGroupState, TranslatedOffset,
    Translator, plan_group_sync,
};
use crate::store::checkpoints::load_checkpoints;
use crate::store::offset_syncs::load_syncs;
use crate::store::progress;

/// One row of `strait offsets translate`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TranslateRow {
    /// Source partition.
    pub source: TopicPartition,
    /// The group's committed offset on the source.
    pub committed: i64,
    /// The target partition (MM2's renamed topic).
    pub target: TopicPartition,
    /// The best translation available; see [`best_answer`].
    pub answer: Answer,
    /// The last checkpoint's downstream offset, if any.
    pub last_checkpoint: Option<i64>,
    /// The target group's committed offset, if any.
    pub target_committed: Option<i64>,
}

/// What `strait offsets translate` prints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TranslateReport {
    pub flow: String,
    pub group: String,
    /// Where the offset syncs were read from, and how many partitions they cover.
    pub syncs: String,
    /// Whether the group filter selects the group (strait checkpoints only those).
    pub group_selected: bool,
    pub rows: Vec<TranslateRow>,
    /// Source topics of the group that the topic filter leaves out.
    pub filtered_topics: Vec<String>,
    /// The target group's state and what group sync would do with these translations.
    pub plan: GroupSyncReport,
}

/// How `offsets translate` answered for one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// From the offset syncs and strait's stored progress: what a restarted strait computes.
    Translated(TranslatedOffset),
    /// strait's last checkpoint for this very committed offset: the translation it made while
    /// replicating (exact where its mapping covered the offset), ahead of what the offset syncs
    /// give now. Group sync and `RemoteClusterUtils` use this value.
    Checkpoint(i64),
    /// Neither the offset syncs, strait's progress nor a checkpoint know the partition.
    Unknown,
}

impl Answer {
    /// The translated offset; `None` when unknown or before the retained history.
    pub fn downstream(&self) -> Option<i64> {
        match self {
            Self::Translated(t) => Some(t.downstream).filter(|d| *d >= 0),
            Self::Checkpoint(d) => Some(*d),
            Self::Unknown => None,
        }
    }

    /// The MAX-REREAD column: for an approximate answer, at most how many records a consumer
    /// resuming there re-reads (`unbounded` when nothing bounds it); `-` otherwise.
    pub fn max_reread_cell(&self) -> String {
        match self {
            Self::Translated(TranslatedOffset {
                precision: Precision::Approximate,
                max_reread,
                ..
            }) => max_reread.map_or_else(|| "unbounded".to_string(), |n| n.to_string()),
            _ => "-".to_string(),
        }
    }

    /// The precision's label.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Translated(t) => match t.precision {
                Precision::Exact => "exact",
                Precision::Approximate => "approximate",
                Precision::BeforeHistory => "before-history",
            },
            Self::Checkpoint(_) => "checkpoint",
            Self::Unknown => "unknown",
        }
    }
}

/// Combines a fresh translation (offset syncs and progress) with the group's last checkpoint
/// for the partition: a provably exact translation wins; otherwise the checkpoint, when it is
/// for the same committed offset and not behind (both are safe: strait never checkpoints past
/// the first record the group has not read); otherwise the fresh translation.
pub fn best_answer(
    fresh: Option<TranslatedOffset>,
    last: Option<&Checkpoint>,
    committed: i64,
) -> Answer {
    if let Some(t) = fresh
        && t.precision == Precision::Exact
    {
        return Answer::Translated(t);
    }
    let fresh_down = fresh.map_or(-1, |t| t.downstream);
    match last {
        Some(cp)
            if cp.upstream_offset == committed
                && cp.downstream_offset >= 0
                && cp.downstream_offset >= fresh_down =>
        {
            Answer::Checkpoint(cp.downstream_offset)
        }
        _ => fresh.map_or(Answer::Unknown, Answer::Translated),
    }
}

impl fmt::Display for TranslateReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "flow {}, group {}", self.flow, self.group)?;
        writeln!(f, "offset syncs: {}", self.syncs)?;
        if !self.group_selected {
            writeln!(
                f,
                "note: groups/groups.exclude leave this group out: strait does not checkpoint or sync it"
            )?;
        }
        if !self.filtered_topics.is_empty() {
            writeln!(
                f,
                "not replicated (topic filter): {}",
                self.filtered_topics.join(", ")
            )?;
        }
        let dash = |v: Option<i64>| v.map_or("-".to_string(), |v| v.to_string());
        let header = [
            "TOPIC",
            "PARTITION",
            "SOURCE-OFFSET",
            "TARGET-TOPIC",
            "TARGET-OFFSET",
            "PRECISION",
            "MAX-REREAD",
            "LAST-CHECKPOINT",
            "TARGET-COMMITTED",
        ];
        let mut rows: Vec<Vec<String>> = Vec::new();
        for r in &self.rows {
            rows.push(vec![
                r.source.topic.clone(),
                r.source.partition.to_string(),
                r.committed.to_string(),
                r.target.topic.clone(),
                dash(r.answer.downstream()),
                r.answer.label().to_string(),
                r.answer.max_reread_cell(),
                dash(r.last_checkpoint),
                dash(r.target_committed),
            ]);
        }
        f.write_str(&super::table(&header, &rows))?;
        if self.rows.is_empty() {
            writeln!(f, "the group has no committed offset on a replicated topic")?;
        }
        writeln!(f, "target group state: {}", self.plan.state)?;
        for d in &self.plan.decisions {
            writeln!(f, "group sync would {}", d.reason())?;
        }
        Ok(())
    }
}

/// Picks the flow for `--flow A->B`, or the only enabled flow. Public for tools that read the
/// same file (`strait-bench load`).
pub fn select_flow<'a>(
    cfg: &'a Mm2Config,
    wanted: Option<&str>,
) -> Result<&'a FlowConfig, OffsetsError> {
    let names = || {
        cfg.enabled_flows()
            .map(FlowConfig::name)
            .collect::<Vec<_>>()
            .join(", ")
    };
    match wanted {
        Some(w) => {
            let (s, t) = w.split_once("->").ok_or_else(|| {
                OffsetsError::NoSuchFlow(format!("--flow {w}: expected SOURCE->TARGET, e.g. A->B"))
            })?;
            cfg.flow(s.trim(), t.trim()).ok_or_else(|| {
                OffsetsError::NoSuchFlow(format!(
                    "--flow {w}: no such flow (enabled flows: {})",
                    names()
                ))
            })
        }
        None => {
            let mut enabled = cfg.enabled_flows();
            match (enabled.next(), enabled.next()) {
                (Some(f), None) => Ok(f),
                (None, _) => Err(OffsetsError::NoSuchFlow(
                    "no flow is enabled; name one with --flow SOURCE->TARGET".into(),
                )),
                (Some(_), Some(_)) => Err(OffsetsError::NoSuchFlow(format!(
                    "several flows are enabled ({}); choose one with --flow SOURCE->TARGET",
                    names()
                ))),
            }
        }
    }
}

/// Reads the flow's offset syncs into `translator`'s store; says where they came from.
async fn read_offset_syncs(
    flow: &FlowConfig,
    translator: &mut Translator,
) -> Result<String, OffsetsError> {
    let name = flow.name();
    let c = &flow.clients;
    let syncs_topic = flow.offset_syncs_topic();
    let syncs_cluster = match flow.offset_syncs_topic_location.value {
        OffsetSyncsLocation::Source => &flow.source,
        OffsetSyncsLocation::Target => &flow.target,
    };
    Ok(if flow.emit_offset_syncs_enabled.value {
        let consumer = cluster_for(
            &name,
            "offset-syncs consumer",
            &c.offset_syncs_consumer.client,
        )?;
        match load_syncs(&consumer, &syncs_topic, translator.store_mut()).await {
            Ok((records, _)) => format!(
                "{syncs_topic} on {syncs_cluster}: {records} records for {} partitions",
                translator.store().partition_count()
            ),
            Err(e) if e.is_unknown_topic() => {
                format!("{syncs_topic} does not exist on {syncs_cluster}")
            }
            Err(e) => {
                return Err(OffsetsError::Cluster {
                    flow: name,
                    what: format!("cannot read {syncs_topic}"),
                    source: Box::new(e),
                });
            }
        }
    } else {
        "disabled (emit.offset-syncs.enabled = false)".to_string()
    })
}

/// The report's rows, the topics the filter leaves out, and the checkpoints group sync would
/// commit.
struct Rows {
    rows: Vec<TranslateRow>,
    filtered: BTreeSet<String>,
    plan_input: Vec<Checkpoint>,
}

/// One row per committed offset of a replicated topic: its best translation, the last
/// checkpoint and the target group's offset.
fn rows(
    flow: &FlowConfig,
    group: &str,
    committed: &BTreeMap<TopicPartition, CommittedOffset>,
    checkpoints: &CheckpointStore,
    translator: &Translator,
    target_offsets: &BTreeMap<TopicPartition, CommittedOffset>,
) -> Rows {
    let mut rows = Vec::new();
    let mut filtered = BTreeSet::new();
    let mut plan_input = Vec::new();
    for (tp, offset) in committed {
        if !flow.topic_filter.should_replicate_topic(&tp.topic) {
            filtered.insert(tp.topic.clone());
            continue;
        }
        let target_tp = TopicPartition::new(
            flow.replication_policy
                .checkpoint_topic_name(&tp.topic, &flow.source, &flow.target),
            tp.partition,
        );
        let last = checkpoints.get(group).and_then(|g| g.get(&target_tp));
        let answer = best_answer(translator.translate(tp, offset.offset), last, offset.offset);
        if let Some(downstream) = answer.downstream() {
            plan_input.push(Checkpoint {
                group: group.to_string(),
                topic: target_tp.topic.clone(),
                partition: tp.partition,
                upstream_offset: offset.offset,
                downstream_offset: downstream,
                metadata: offset.metadata.clone(),
            });
        }
        rows.push(TranslateRow {
            source: tp.clone(),
            committed: offset.offset,
            last_checkpoint: last.map(|c| c.downstream_offset),
            target_committed: target_offsets.get(&target_tp).map(|o| o.offset),
            target: target_tp,
            answer,
        });
    }
    Rows {
        rows,
        filtered,
        plan_input,
    }
}

/// The group's state on the target and its committed offsets there.
async fn target_group(
    flow: &FlowConfig,
    target: &Cluster,
    group: &str,
) -> Result<(TargetGroupState, BTreeMap<TopicPartition, CommittedOffset>), OffsetsError> {
    let cluster_err = |what: String| OffsetsError::cluster(&flow.name(), what);
    let listed = target.list_groups().await.map_err(cluster_err(format!(
        "cannot list the groups of {}",
        flow.target
    )))?;
    let state = target_state(target, group, listed.iter().find(|g| g.group_id == group))
        .await
        .map_err(cluster_err(format!(
            "cannot describe group {group} on {}",
            flow.target
        )))?;
    let target_offsets = if state == TargetGroupState::Absent {
        BTreeMap::new()
    } else {
        target
            .offset_fetch(group)
            .await
            .map_err(cluster_err(format!(
                "cannot fetch the offsets of group {group} on {}",
                flow.target
            )))?
    };
    Ok((state, target_offsets))
}

/// `strait offsets translate`: translates `group`'s committed source offsets for one flow from
/// strait's stored progress and exact mapping and the offset-syncs topic, without replicating
/// or writing anything.
pub async fn translate_command(
    cfg: &Mm2Config,
    flow: Option<&str>,
    group: &str,
) -> Result<TranslateReport, OffsetsError> {
    let flow = select_flow(cfg, flow)?;
    let name = flow.name();
    let c = &flow.clients;
    let source = cluster_for(&name, "source admin", &c.source_admin.client)?;
    let target = cluster_for(&name, "target admin", &c.target_admin.client)?;
    let target_consumer = cluster_for(&name, "target consumer", &c.target_consumer.client)?;
    let cluster_err = |what: String| OffsetsError::cluster(&name, what);

    let mut checkpoints = CheckpointStore::default();
    let (_, checkpoints_ok) = load_checkpoints(flow, &target_consumer, &mut checkpoints).await;
    checkpoints.finish_load(checkpoints_ok);

    let mut translator = Translator::default();
    translator.store_mut().start(!checkpoints_ok);
    let syncs = read_offset_syncs(flow, &mut translator).await?;
    translator.store_mut().mark_read_to_end();
    // Exact from the stored mapping where strait copied; the offset syncs and the one exact
    // pair of `seed_from_progress` elsewhere (progress imported from MM2 or written before
    // the mapping was stored).
    let (stored, mappings) = progress::read_stored_with_mappings(
        &target,
        &flow.source,
        cfg.strait.mapping_max_runs_per_partition.value,
    )
    .await;
    restore_mappings(&mut translator, flow, mappings);
    seed_from_progress(&mut translator, flow, &target, &stored).await;

    let committed = source
        .offset_fetch(group)
        .await
        .map_err(cluster_err(format!(
            "cannot fetch the offsets of group {group}"
        )))?;
    let (state, target_offsets) = target_group(flow, &target, group).await?;

    let Rows {
        rows,
        filtered,
        plan_input,
    } = rows(
        flow,
        group,
        &committed,
        &checkpoints,
        &translator,
        &target_offsets,
    );
    let target_map: HashMap<TopicPartition, Option<i64>> = target_offsets
        .iter()
        .map(|(tp, o)| (tp.clone(), Some(o.offset)))
        .collect();
    let decisions = plan_group_sync(plan_input.iter(), state, &target_map);
    Ok(TranslateReport {
        flow: name,
        group: group.to_string(),
        syncs,
        group_selected: flow.group_filter.should_replicate_group(group),
        rows,
        filtered_topics: filtered.into_iter().collect(),
        plan: GroupSyncReport {
            group: group.to_string(),
            state,
            decisions,
            failures: Vec::new(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::offsets::TranslationSource;

    #[test]
    fn the_best_answer_is_exact_then_the_checkpoint_then_the_syncs() {
        let t = |downstream, precision| {
            Some(TranslatedOffset {
                downstream,
                precision,
                source: TranslationSource::SyncStore,
                max_reread: None,
            })
        };
        let cp = |upstream, downstream| Checkpoint {
            group: "g".into(),
            topic: "A.t".into(),
            partition: 0,
            upstream_offset: upstream,
            downstream_offset: downstream,
            metadata: String::new(),
        };
        // Exact beats everything.
        let exact = t(40, Precision::Exact);
        assert_eq!(
            best_answer(exact, Some(&cp(50, 45)), 50),
            Answer::Translated(exact.unwrap())
        );
        // A checkpoint for this offset beats an approximate translation behind it...
        let approx = t(30, Precision::Approximate);
        assert_eq!(
            best_answer(approx, Some(&cp(50, 45)), 50),
            Answer::Checkpoint(45)
        );
        assert_eq!(
            best_answer(None, Some(&cp(50, 45)), 50),
            Answer::Checkpoint(45)
        );
        assert_eq!(
            best_answer(t(-1, Precision::BeforeHistory), Some(&cp(50, 45)), 50),
            Answer::Checkpoint(45)
        );
        // ...but not one for another offset, nor one behind the translation.
        assert_eq!(
            best_answer(approx, Some(&cp(49, 45)), 50),
            Answer::Translated(approx.unwrap())
        );
        assert_eq!(
            best_answer(approx, Some(&cp(50, 20)), 50),
            Answer::Translated(approx.unwrap())
        );
        // A tie names the checkpoint: it is what group sync and MM2's readers use.
        assert_eq!(
            best_answer(approx, Some(&cp(50, 30)), 50),
            Answer::Checkpoint(30)
        );
        assert_eq!(best_answer(None, None, 50), Answer::Unknown);
        assert_eq!(Answer::Unknown.downstream(), None);
        assert_eq!(
            Answer::Translated(t(-1, Precision::BeforeHistory).unwrap()).downstream(),
            None
        );
        assert_eq!(Answer::Checkpoint(45).label(), "checkpoint");
    }

    #[test]
    fn the_flow_is_named_or_the_only_one() {
        let text = "clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\nA->B.enabled = true\n";
        let path = std::env::temp_dir().join(format!(
            "strait-translate-flow-{}.properties",
            std::process::id()
        ));
        std::fs::write(&path, text).unwrap();
        let cfg = crate::config::load(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        assert_eq!(select_flow(&cfg, None).unwrap().name(), "A->B");
        assert_eq!(select_flow(&cfg, Some("A->B")).unwrap().name(), "A->B");
        assert!(select_flow(&cfg, Some("A-B")).is_err());
        assert!(select_flow(&cfg, Some("C->B")).is_err());
    }
}
