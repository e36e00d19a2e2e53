//! `strait failback --resume`: the last step of a failback. After the failover back (`strait
//! failover --flow B->A`), the flow A->B copies the failed-over topics again, so that B is a
//! disaster-recovery copy of A once more: the topics leave A->B's stored failover state, and
//! under `IdentityReplicationPolicy` A->B's stored progress moves to where the reverse flow's
//! copy ended on A (what lies before came from B, or was left behind and quarantined on B);
//! its exact history starts again there. Under `DefaultReplicationPolicy` A->B goes on from its
//! stored progress: the records left behind on A, then everything written to A since, reach
//! `A.<topic>` on B. The reverse flow stays failed over (its stored state keeps it stopped);
//! a later failback sets it up again. Running strait instances pick the change up at their
//! next start.

use std::fmt;

use serde::Serialize;

use super::translate::select_flow;
use crate::cluster::{Cluster, IsolationLevel, TopicPartition};
use crate::config::{FlowConfig, Mm2Config};
use crate::duties::offsets::{OffsetsError, cluster_for};
use crate::store::failover::{self, Stage};
use crate::store::progress::{self, Entry, ProgressStore};

/// Why it could not run.
#[derive(Debug, thiserror::Error)]
pub enum ResumeError {
    #[error(transparent)]
    Offsets(#[from] OffsetsError),
    #[error(
        "flow {flow}: no failover is stored in {} on its target: nothing to resume",
        failover::TOPIC
    )]
    NoFailover { flow: String },
    #[error(
        "flow {flow}: the failover back is not done ({reverse} has no completed failover of {topics}): run `strait failover --flow {reverse} --groups ...` first"
    )]
    NotFailedBack {
        flow: String,
        reverse: String,
        topics: String,
    },
    #[error(
        "flow {reverse}: no stored progress of {partition} on {cluster}: where its copy ended is unknown"
    )]
    ReverseEndUnknown {
        reverse: String,
        partition: String,
        cluster: String,
    },
}

/// Where the flow starts again on one partition.
#[derive(Debug, Clone, Serialize)]
pub struct ResumedPartition {
    pub source: String,
    pub target: String,
    /// The source offset it copies from.
    pub from_offset: i64,
    /// `moved` (identity: past what came back from the target) or `stored progress`.
    pub how: &'static str,
}

/// What `strait failback --resume` prints.
#[derive(Debug, Clone, Serialize)]
pub struct ResumeReport {
    pub flow: String,
    pub topics: Vec<String>,
    pub partitions: Vec<ResumedPartition>,
}

/// Resumes the flow's failed-over topics after the failover back.
pub async fn resume_command(
    cfg: &Mm2Config,
    flow: Option<&str>,
) -> Result<ResumeReport, ResumeError> {
    let flow = select_flow(cfg, flow)?;
    let name = flow.name();
    let reverse_name = format!("{}->{}", flow.target, flow.source);
    let c = &flow.clients;
    let source = cluster_for(&name, "source admin", &c.source_admin.client)?;
    let target = cluster_for(&name, "target admin", &c.target_admin.client)?;
    let err = |what: &'static str| OffsetsError::cluster(&name, what.into());
    let Some(record) = failover::read_all(&target)
        .await
        .map_err(err("reading the stored failover state"))?
        .remove(&name)
    else {
        return Err(ResumeError::NoFailover { flow: name });
    };
    let back = failover::read_all(&source)
        .await
        .map_err(err("reading the reverse flow's stored failover state"))?
        .remove(&reverse_name);
    if !back.is_some_and(|b| b.stage == Stage::Done && record.topics.is_subset(&b.topics)) {
        return Err(ResumeError::NotFailedBack {
            flow: name,
            reverse: reverse_name,
            topics: record.topics.iter().cloned().collect::<Vec<_>>().join(", "),
        });
    }
    let max_runs = cfg.strait.mapping_max_runs_per_partition.value;
    let mut store = ProgressStore::open_bounded(
        &target,
        &flow.source,
        flow.progress_topic_replication_factor.value,
        max_runs,
    )
    .await
    .map_err(err("reading the stored progress"))?;
    let tps: Vec<TopicPartition> = store
        .entries()
        .keys()
        .filter(|tp| record.topics.contains(&tp.topic))
        .cloned()
        .collect();
    let partitions = if flow.replication_policy.is_identity() {
        let p = past_reverse(flow, &source, &target, &tps).await?;
        for (tp, e) in &p {
            store.update(tp, *e);
        }
        store
            .flush_positions(&target, crate::time::wall_ms())
            .await
            .map_err(err("storing where the flow starts again"))?;
        p.iter()
            .map(|(tp, e)| resumed(flow, tp, e.next_offset, "moved"))
            .collect()
    } else {
        tps.iter()
            .map(|tp| {
                let from = store.get(tp).map_or(0, |e| e.next_offset);
                resumed(flow, tp, from, "stored progress")
            })
            .collect()
    };
    let topics: Vec<String> = record.topics.iter().cloned().collect();
    let rf = flow.progress_topic_replication_factor.value;
    failover::lift(
        &target,
        &name,
        record,
        topics.iter().map(String::as_str),
        rf,
    )
    .await
    .map_err(err("clearing the stored failover state"))?;
    Ok(ResumeReport {
        flow: name,
        topics,
        partitions,
    })
}

fn resumed(
    flow: &FlowConfig,
    tp: &TopicPartition,
    from: i64,
    how: &'static str,
) -> ResumedPartition {
    ResumedPartition {
        source: tp.to_string(),
        target: TopicPartition::new(flow.remote_topic(&tp.topic), tp.partition).to_string(),
        from_offset: from,
        how,
    }
}

/// Under `IdentityReplicationPolicy`: per partition, the flow's new start where the reverse
/// flow's copy ended on the source (the reverse flow's stored target offsets), and the
/// target's end.
async fn past_reverse(
    flow: &FlowConfig,
    source: &Cluster,
    target: &Cluster,
    tps: &[TopicPartition],
) -> Result<Vec<(TopicPartition, Entry)>, ResumeError> {
    let name = flow.name();
    let err = |what: &'static str| OffsetsError::cluster(&name, what.into());
    let reverse_progress = progress::read_stored(source, &flow.target).await;
    let topics: Vec<&str> = tps.iter().map(|tp| tp.topic.as_str()).collect();
    let md = source
        .refresh_metadata(Some(&topics))
        .await
        .map_err(err("describing the topics on the source"))?;
    let remote: Vec<TopicPartition> = tps
        .iter()
        .map(|tp| TopicPartition::new(flow.remote_topic(&tp.topic), tp.partition))
        .collect();
    let target_ends = super::end_offsets(target, &remote, IsolationLevel::ReadUncommitted)
        .await
        .map_err(err("reading the target's ends"))?;
    let mut out = Vec::new();
    for (tp, rtp) in tps.iter().zip(&remote) {
        let from = reverse_progress
            .get(rtp)
            .map(|e| e.target_offset)
            .filter(|o| *o >= 0)
            .ok_or_else(|| ResumeError::ReverseEndUnknown {
                reverse: format!("{}->{}", flow.target, flow.source),
                partition: rtp.to_string(),
                cluster: flow.source.clone(),
            })?;
        let entry = Entry {
            next_offset: from,
            topic_id: md.topics.get(&tp.topic).map_or([0; 16], |t| t.topic_id),
            target_offset: target_ends.get(rtp).copied().unwrap_or(-1),
            leader_epoch: -1,
        };
        out.push((tp.clone(), entry));
    }
    Ok(out)
}

impl fmt::Display for ResumeReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "flow {} copies {} again:",
            self.flow,
            self.topics.join(", ")
        )?;
        for p in &self.partitions {
            writeln!(
                f,
                "  {:<32} -> {:<32} from offset {} ({})",
                p.source, p.target, p.from_offset, p.how
            )?;
        }
        writeln!(
            f,
            "OK: restart strait (every instance of the flow) to copy them again"
        )
    }
}
