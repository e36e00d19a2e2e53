//! `strait failback`, its first part: once the old source answers again after a failover, what
//! it holds beyond what reached the target, computed exactly from strait's stored progress and
//! mapping: per failed-over partition the records from the last copied offset to the old
//! source's end (what an unplanned failover left behind, and anything written there since).
//! Nothing is deleted: `--quarantine` copies those records (key, value, headers, timestamp) to
//! `strait-quarantine.<source>.<topic>` on the target, same partition, so that they can be
//! inspected or replayed. Setting up the reverse flow is not automated yet (issue 24).

use std::fmt;

use bytes::Bytes;
use serde::Serialize;
use strait_dataplane::batch::Record;

use super::translate::select_flow;
use crate::cluster::{Cluster, ClusterError, IsolationLevel, NewTopic, TopicPartition};
use crate::config::Mm2Config;
use crate::duties::offsets::{OffsetsError, cluster_for};
use crate::store::failover;
use crate::store::progress;
use crate::store::records::{self, StoredRecord};

/// Records copied to quarantine per produce request at most.
const QUARANTINE_BATCH: usize = 500;

/// What to do.
#[derive(Debug, Clone)]
pub struct FailbackOptions {
    pub flow: Option<String>,
    /// Copy the records left behind to quarantine topics on the target.
    pub quarantine: bool,
}

/// Why it could not run.
#[derive(Debug, thiserror::Error)]
pub enum FailbackError {
    #[error(transparent)]
    Offsets(#[from] OffsetsError),
    #[error(
        "flow {flow}: no failover is stored in {} on its target: there is nothing to fail back",
        failover::TOPIC
    )]
    NoFailover { flow: String },
}

/// One partition's records left behind on the old source.
#[derive(Debug, Clone, Serialize)]
pub struct LeftBehind {
    pub source: String,
    /// strait's stored progress: every record below it is on the target.
    pub copied_end: i64,
    /// The old source's end now (read_committed).
    pub source_end: i64,
    /// Records in `copied_end..source_end` a consumer sees (markers and aborted ones not).
    pub records: u64,
    pub first_offset: Option<i64>,
    pub last_offset: Option<i64>,
    /// Their timestamps' range (ms since the epoch).
    pub first_timestamp_ms: Option<i64>,
    pub last_timestamp_ms: Option<i64>,
    /// With `--quarantine`: where they were copied (`topic-partition`, first offset there).
    pub quarantined_to: Option<String>,
    pub quarantine_offset: Option<i64>,
}

/// What `strait failback` prints.
#[derive(Debug, Clone, Serialize)]
pub struct FailbackReport {
    pub flow: String,
    pub partitions: Vec<LeftBehind>,
    pub records_left_behind: u64,
    /// The configuration of the reverse flow, to add by hand for now.
    pub next: Vec<String>,
}

/// Computes (and with `--quarantine` copies) what the old source holds beyond the copy.
pub async fn failback_command(
    cfg: &Mm2Config,
    opts: &FailbackOptions,
) -> Result<FailbackReport, FailbackError> {
    let flow = select_flow(cfg, opts.flow.as_deref())?;
    let name = flow.name();
    let c = &flow.clients;
    let source = cluster_for(&name, "source consumer", &c.source_consumer.client)?;
    let target_admin = cluster_for(&name, "target admin", &c.target_admin.client)?;
    let target = cluster_for(&name, "target consumer", &c.target_consumer.client)?;
    let err = |what: &'static str| OffsetsError::cluster(&name, what.into());
    let Some(record) = failover::read_all(&target_admin)
        .await
        .map_err(err("reading the stored failover state"))?
        .remove(&name)
    else {
        return Err(FailbackError::NoFailover { flow: name });
    };
    let stored = progress::read_stored(&target, &flow.source).await;
    let tps: Vec<TopicPartition> = stored
        .keys()
        .filter(|tp| record.topics.contains(&tp.topic))
        .cloned()
        .collect();
    let ends = super::end_offsets(&source, &tps, IsolationLevel::ReadCommitted)
        .await
        .map_err(err("reading the old source's ends"))?;
    let mut partitions = Vec::new();
    for tp in &tps {
        let copied_end = stored.get(tp).map_or(0, |e| e.next_offset);
        let end = ends.get(tp).copied().unwrap_or(copied_end);
        let mut left = Vec::new();
        if end > copied_end {
            records::read_range(
                &source,
                tp,
                copied_end,
                end,
                IsolationLevel::ReadCommitted,
                |r| {
                    left.push(r);
                    true
                },
            )
            .await
            .map_err(err("reading the records left behind"))?;
        }
        let mut lb = left_behind(tp, copied_end, end, &left);
        if opts.quarantine && !left.is_empty() {
            let (topic, offset) = quarantine(&target_admin, flow, tp, &left)
                .await
                .map_err(err("copying the records left behind to quarantine"))?;
            lb.quarantined_to = Some(format!("{topic}-{}", tp.partition));
            lb.quarantine_offset = Some(offset);
        }
        partitions.push(lb);
    }
    let records_left_behind = partitions.iter().map(|p| p.records).sum();
    let reverse = format!("{}->{}", flow.target, flow.source);
    Ok(FailbackReport {
        flow: name,
        partitions,
        records_left_behind,
        next: vec![format!(
            "the reverse flow is not set up by strait yet: add `{reverse}.enabled = true` and `{reverse}.topics = ...` (the topics producers now write to on {}), run strait, then `strait failover --flow {reverse}` to move back",
            flow.target
        )],
    })
}

fn left_behind(
    tp: &TopicPartition,
    copied_end: i64,
    end: i64,
    left: &[StoredRecord],
) -> LeftBehind {
    LeftBehind {
        source: tp.to_string(),
        copied_end,
        source_end: end,
        records: left.len() as u64,
        first_offset: left.first().map(|r| r.offset),
        last_offset: left.last().map(|r| r.offset),
        first_timestamp_ms: left.iter().map(|r| r.timestamp).min(),
        last_timestamp_ms: left.iter().map(|r| r.timestamp).max(),
        quarantined_to: None,
        quarantine_offset: None,
    }
}

/// Copies `left` to `strait-quarantine.<source>.<topic>`, partition `tp.partition`, on the
/// target (created with as many partitions as the remote topic has, at least `tp.partition +
/// 1`); returns the topic and the offset of the first copy.
async fn quarantine(
    target: &Cluster,
    flow: &crate::config::FlowConfig,
    tp: &TopicPartition,
    left: &[StoredRecord],
) -> Result<(String, i64), ClusterError> {
    let topic = format!("strait-quarantine.{}.{}", flow.source, tp.topic);
    let md = target.refresh_metadata(Some(&[topic.as_str()])).await?;
    if !md.topics.contains_key(&topic) {
        let remote = flow.remote_topic(&tp.topic);
        let remote_md = target.refresh_metadata(Some(&[remote.as_str()])).await?;
        let partitions = remote_md
            .topics
            .get(&remote)
            .map_or(0, |t| t.partitions.len() as i32)
            .max(tp.partition + 1);
        let spec = NewTopic::new(&topic, partitions)
            .replication_factor(flow.progress_topic_replication_factor.value);
        match target.create_topic(spec, 30_000).await {
            Err(e) if !e.is(kafka_protocol::ResponseError::TopicAlreadyExists) => return Err(e),
            _ => {}
        }
        target.wait_for_leaders(&topic, 30_000).await?;
    }
    let mut first = None;
    for chunk in left.chunks(QUARANTINE_BATCH) {
        let batch: Vec<Record> = chunk
            .iter()
            .map(|r| {
                let mut rec = Record::new(r.timestamp, r.key.clone(), r.value.clone());
                rec.headers = r.headers.clone();
                rec.headers.push((
                    Bytes::from_static(b"strait.quarantine.source.offset"),
                    Some(Bytes::from(r.offset.to_string())),
                ));
                rec
            })
            .collect();
        let base = records::produce(target, &topic, tp.partition, &batch).await?;
        first.get_or_insert(base);
    }
    Ok((topic, first.unwrap_or(-1)))
}

impl fmt::Display for FailbackReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "failback of flow {}: what the old source holds beyond the copy",
            self.flow
        )?;
        writeln!(
            f,
            "{:<32} {:>12} {:>12} {:>10} {:>12} {:>12}  QUARANTINED TO",
            "SOURCE", "COPIED TO", "SOURCE END", "RECORDS", "FIRST", "LAST"
        )?;
        for p in &self.partitions {
            let opt = |o: Option<i64>| o.map_or("-".to_string(), |v| v.to_string());
            writeln!(
                f,
                "{:<32} {:>12} {:>12} {:>10} {:>12} {:>12}  {}",
                p.source,
                p.copied_end,
                p.source_end,
                p.records,
                opt(p.first_offset),
                opt(p.last_offset),
                match (&p.quarantined_to, p.quarantine_offset) {
                    (Some(t), Some(o)) => format!("{t} from offset {o}"),
                    _ => "-".to_string(),
                }
            )?;
        }
        writeln!(
            f,
            "{} records on the old source were never copied to the target; nothing was deleted",
            self.records_left_behind
        )?;
        for n in &self.next {
            writeln!(f, "next: {n}")?;
        }
        Ok(())
    }
}
