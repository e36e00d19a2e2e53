//! `strait failback`: once the old source answers again after a failover, what it holds
//! beyond what reached the target, computed exactly from strait's stored progress and mapping:
//! per failed-over partition the records from the last copied offset to the old source's end
//! (what an unplanned failover left behind, and anything written there since). Nothing is
//! deleted (plain Kafka cannot cut a log's tail): `--quarantine` copies those records (key,
//! value, headers, timestamp) to `strait-quarantine.<source>.<topic>` on the target, same
//! partition, so that they can be inspected or replayed.
//!
//! With nothing left behind (or all of it quarantined) it then sets up the reverse flow
//! `target->source`, which must be in the config: it copies what producers wrote to the
//! failed-over topics on the target since. Under `IdentityReplicationPolicy` the reverse flow
//! would copy the topic's old records (they came from the old source) back to where they came
//! from, so its stored progress is set to start where the copy ended on the target; under
//! `DefaultReplicationPolicy` the producers' topic on the target holds only their own records
//! and the reverse flow copies it from its start. The failover back is `strait failover --flow
//! target->source`, which translates groups back through this flow's stored mapping.

use std::collections::BTreeMap;
use std::fmt;

use bytes::Bytes;
use serde::Serialize;
use strait_dataplane::batch::Record;

use super::translate::select_flow;
use crate::cluster::{Cluster, ClusterError, IsolationLevel, NewTopic, TopicPartition};
use crate::config::{FlowConfig, Mm2Config};
use crate::duties::offsets::{OffsetsError, cluster_for};
use crate::offsets::mapping::PartitionMapping;
use crate::store::failover::{self, FailoverRecord};
use crate::store::progress::{self, Entry, ProgressStore};
use crate::store::records::{self, StoredRecord};

/// Records copied to quarantine per produce request at most.
const QUARANTINE_BATCH: usize = 500;

/// The header naming a quarantined record's offset on the old source.
const QUARANTINE_OFFSET_HEADER: &[u8] = b"strait.quarantine.source.offset";

/// The old source's offset a quarantined record names.
fn quarantined_offset(r: &StoredRecord) -> Option<i64> {
    r.headers
        .iter()
        .find(|(k, _)| k.as_ref() == QUARANTINE_OFFSET_HEADER)
        .and_then(|(_, v)| std::str::from_utf8(v.as_ref()?).ok()?.parse().ok())
}

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
    #[error(
        "flow {reverse}: does not copy the failed-over topics {topics}: add them to `{reverse}.topics`"
    )]
    ReverseMissesTopics { reverse: String, topics: String },
    #[error(
        "flow {reverse}: under IdentityReplicationPolicy it would copy {topics} back to the cluster they came from (flow {flow} still copies them): narrow `{reverse}.topics` to the failed-over topics"
    )]
    ReverseLoop {
        flow: String,
        reverse: String,
        topics: String,
    },
    #[error(
        "flow {reverse}: its stored progress of {partition} is at {stored}, below {copy_end}, where the copy from the old source ended: records that came from the old source were copied back to it (was the reverse flow run before strait failback?). Remove them there, or fail back by hand"
    )]
    ReverseCopiedBack {
        reverse: String,
        partition: String,
        stored: i64,
        copy_end: i64,
    },
    #[error(
        "flow {flow}: where the copy of {partition} ended on the target is not known (no stored mapping or target offset)"
    )]
    CopyEndUnknown { flow: String, partition: String },
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
    /// The reverse flow as set up (none while records are left behind unquarantined).
    pub reverse: Option<ReverseSetup>,
    pub next: Vec<String>,
}

/// The reverse flow, ready to run.
#[derive(Debug, Clone, Serialize)]
pub struct ReverseSetup {
    pub flow: String,
    /// `identity` or `default`.
    pub policy: &'static str,
    pub partitions: Vec<ReversePartition>,
}

/// Where the reverse flow starts on one partition.
#[derive(Debug, Clone, Serialize)]
pub struct ReversePartition {
    /// `topic-partition` on the failed-over-to cluster (what producers write to now).
    pub source: String,
    /// `topic-partition` it is copied to on the old source.
    pub target: String,
    /// The offset the reverse flow starts at; `None`: its own start rule (stored progress, or
    /// `auto.offset.reset` for a new partition).
    pub start_offset: Option<i64>,
    /// `set` (stored now), `already set` (an earlier run or the running flow), `own start`.
    pub status: &'static str,
}

/// Computes (and with `--quarantine` copies) what the old source holds beyond the copy, then
/// (nothing left behind unquarantined) sets up the reverse flow.
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
    let (stored, mappings) = progress::read_stored_with_mappings(
        &target,
        &flow.source,
        cfg.strait.mapping_max_runs_per_partition.value,
    )
    .await;
    let tps: Vec<TopicPartition> = stored
        .keys()
        .filter(|tp| record.topics.contains(&tp.topic))
        .cloned()
        .collect();
    let partitions =
        left_behind_all(flow, &source, &target_admin, &tps, &stored, opts.quarantine).await?;
    let records_left_behind = partitions.iter().map(|p| p.records).sum();
    let reverse_name = format!("{}->{}", flow.target, flow.source);
    let mut report = FailbackReport {
        flow: name.clone(),
        partitions,
        records_left_behind,
        reverse: None,
        next: Vec::new(),
    };
    if records_left_behind > 0 && !opts.quarantine {
        report.next.push(
            "the records left behind stay on the old source only: copy them to quarantine (--quarantine), then run strait failback again to set up the reverse flow".into(),
        );
        return Ok(report);
    }
    let Some(reverse) = cfg
        .flow(&flow.target, &flow.source)
        .filter(|r| r.enabled.value)
    else {
        report.next.push(format!(
            "to copy back what producers write on {} now, add `{reverse_name}.enabled = true` and `{reverse_name}.topics = {}` to the config and run strait failback again: it sets up the reverse flow",
            flow.target,
            record.topics.iter().cloned().collect::<Vec<_>>().join(",")
        ));
        return Ok(report);
    };
    check_reverse(flow, reverse, &record, &stored)?;
    let setup = Reverse {
        flow,
        reverse,
        target_admin: &target_admin,
        max_runs: cfg.strait.mapping_max_runs_per_partition.value,
    };
    let rev = setup.set_up(&tps, &stored, &mappings).await?;
    report.next = vec![
        format!(
            "run strait with this config ({reverse_name}.enabled = true): it copies what producers wrote to {} on {} since the failover to {}",
            record.topics.iter().cloned().collect::<Vec<_>>().join(", "),
            flow.target,
            flow.source
        ),
        format!(
            "then stop those producers and fail over back: strait failover --config {} --flow {reverse_name} --groups <the groups>",
            cfg.path.display()
        ),
    ];
    report.reverse = Some(rev);
    Ok(report)
}

/// Per failed-over partition, the records the old source holds beyond the copy (copied to
/// quarantine with `quarantine`).
async fn left_behind_all(
    flow: &FlowConfig,
    source: &Cluster,
    target_admin: &Cluster,
    tps: &[TopicPartition],
    stored: &BTreeMap<TopicPartition, Entry>,
    quarantine: bool,
) -> Result<Vec<LeftBehind>, OffsetsError> {
    let name = flow.name();
    let err = |what: &'static str| OffsetsError::cluster(&name, what.into());
    let ends = super::end_offsets(source, tps, IsolationLevel::ReadCommitted)
        .await
        .map_err(err("reading the old source's ends"))?;
    let mut partitions = Vec::new();
    for tp in tps {
        let copied_end = stored.get(tp).map_or(0, |e| e.next_offset);
        let end = ends.get(tp).copied().unwrap_or(copied_end);
        let mut left = Vec::new();
        if end > copied_end {
            records::read_range(
                source,
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
        if quarantine && !left.is_empty() {
            let (topic, offset) = self::quarantine(target_admin, flow, tp, &left)
                .await
                .map_err(err("copying the records left behind to quarantine"))?;
            lb.quarantined_to = Some(format!("{topic}-{}", tp.partition));
            lb.quarantine_offset = Some(offset);
        }
        partitions.push(lb);
    }
    Ok(partitions)
}

/// Refuses a reverse flow that misses a failed-over topic or, under `IdentityReplicationPolicy`,
/// would copy back a topic the forward flow still copies (a loop).
fn check_reverse(
    flow: &FlowConfig,
    reverse: &FlowConfig,
    record: &FailoverRecord,
    stored: &BTreeMap<TopicPartition, Entry>,
) -> Result<(), FailbackError> {
    let missing: Vec<&str> = record
        .topics
        .iter()
        .filter(|t| !reverse.should_replicate_topic(t))
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        return Err(FailbackError::ReverseMissesTopics {
            reverse: reverse.name(),
            topics: missing.join(", "),
        });
    }
    if flow.replication_policy.is_identity() {
        let looping: std::collections::BTreeSet<&str> = stored
            .keys()
            .map(|tp| tp.topic.as_str())
            .filter(|t| !record.topics.contains(*t) && reverse.should_replicate_topic(t))
            .collect();
        if !looping.is_empty() {
            return Err(FailbackError::ReverseLoop {
                flow: flow.name(),
                reverse: reverse.name(),
                topics: looping.into_iter().collect::<Vec<_>>().join(", "),
            });
        }
    }
    Ok(())
}

/// Setting up the reverse flow `reverse` of `flow`.
struct Reverse<'a> {
    flow: &'a FlowConfig,
    reverse: &'a FlowConfig,
    /// `flow`'s target (the reverse flow's source).
    target_admin: &'a Cluster,
    max_runs: usize,
}

impl Reverse<'_> {
    /// Under `IdentityReplicationPolicy`, stores the reverse flow's start on each failed-over
    /// partition where the copy ended (what is below came from the old source); an earlier
    /// start stored there means records were copied back already.
    async fn set_up(
        &self,
        tps: &[TopicPartition],
        stored: &BTreeMap<TopicPartition, Entry>,
        mappings: &BTreeMap<TopicPartition, PartitionMapping>,
    ) -> Result<ReverseSetup, FailbackError> {
        let identity = self.flow.replication_policy.is_identity();
        let mut out = ReverseSetup {
            flow: self.reverse.name(),
            policy: if identity { "identity" } else { "default" },
            partitions: Vec::new(),
        };
        let rname = self.reverse.name();
        let err = |what: &'static str| OffsetsError::cluster(&rname, what.into());
        let rc = &self.reverse.clients;
        let old_source = cluster_for(&rname, "target admin", &rc.target_admin.client)?;
        // The reverse flow failed over back in an earlier failback keeps these topics stopped,
        // and its stored progress there is where that one ended.
        let earlier = failover::read_all(&old_source)
            .await
            .map_err(err("reading the reverse flow's stored failover state"))?
            .remove(&rname)
            .filter(|r| tps.iter().any(|tp| r.topics.contains(&tp.topic)));
        if !identity {
            for tp in tps {
                out.partitions.push(ReversePartition {
                    source: tp.to_string(),
                    target: TopicPartition::new(self.reverse.remote_topic(&tp.topic), tp.partition)
                        .to_string(),
                    start_offset: None,
                    status: "own start",
                });
            }
            self.unstop(&old_source, earlier, tps).await?;
            return Ok(out);
        }
        let mut store = ProgressStore::open_bounded(
            &old_source,
            &self.reverse.source,
            self.reverse.progress_topic_replication_factor.value,
            self.max_runs,
        )
        .await
        .map_err(err("reading the reverse flow's stored progress"))?;
        let topics: Vec<&str> = tps.iter().map(|tp| tp.topic.as_str()).collect();
        let md = self
            .target_admin
            .refresh_metadata(Some(&topics))
            .await
            .map_err(err("describing the failed-over topics"))?;
        let now = super::end_offsets(&old_source, tps, IsolationLevel::ReadUncommitted)
            .await
            .map_err(err("reading the old source's ends"))?;
        for tp in tps {
            let copy_end = copy_end(stored.get(tp), mappings.get(tp)).ok_or_else(|| {
                FailbackError::CopyEndUnknown {
                    flow: self.flow.name(),
                    partition: tp.to_string(),
                }
            })?;
            let start = Entry {
                next_offset: copy_end,
                topic_id: md.topics.get(&tp.topic).map_or([0; 16], |t| t.topic_id),
                target_offset: now.get(tp).copied().unwrap_or(-1),
                leader_epoch: -1,
            };
            let stale = earlier
                .as_ref()
                .is_some_and(|r| r.topics.contains(&tp.topic));
            let status = self.start_at(&mut store, tp, start, stale)?;
            out.partitions.push(ReversePartition {
                source: tp.to_string(),
                target: TopicPartition::new(self.reverse.remote_topic(&tp.topic), tp.partition)
                    .to_string(),
                start_offset: Some(store.get(tp).map_or(copy_end, |e| e.next_offset)),
                status,
            });
        }
        store
            .flush_positions(&old_source, crate::time::wall_ms())
            .await
            .map_err(err("storing the reverse flow's start"))?;
        self.unstop(&old_source, earlier, tps).await?;
        Ok(out)
    }

    /// Stores `start` as the reverse flow's progress of `tp` unless it has one: at or past
    /// `start` is fine (an earlier run, or the flow ran since); before it, records that came
    /// from the old source were copied back to it.
    fn start_at(
        &self,
        store: &mut ProgressStore,
        tp: &TopicPartition,
        start: Entry,
        stale: bool,
    ) -> Result<&'static str, FailbackError> {
        match store.get(tp) {
            // Where an earlier failback's reverse flow stopped: this one starts anew.
            Some(e) if stale && e.next_offset < start.next_offset => {
                store.update(tp, start);
                Ok("set")
            }
            Some(e) if e.next_offset >= start.next_offset => Ok("already set"),
            Some(e) => Err(FailbackError::ReverseCopiedBack {
                reverse: self.reverse.name(),
                partition: tp.to_string(),
                stored: e.next_offset,
                copy_end: start.next_offset,
            }),
            None => {
                store.update(tp, start);
                Ok("set")
            }
        }
    }

    /// Takes `tps`' topics out of the reverse flow's stored failover state of an earlier
    /// failback, so that strait copies them again.
    async fn unstop(
        &self,
        old_source: &Cluster,
        earlier: Option<FailoverRecord>,
        tps: &[TopicPartition],
    ) -> Result<(), FailbackError> {
        let Some(record) = earlier else {
            return Ok(());
        };
        let rname = self.reverse.name();
        let topics = tps.iter().map(|tp| tp.topic.as_str());
        let rf = self.reverse.progress_topic_replication_factor.value;
        failover::lift(old_source, &rname, record, topics, rf)
            .await
            .map_err(OffsetsError::cluster(
                &rname,
                "clearing its stored failover state".into(),
            ))?;
        Ok(())
    }
}

/// Where the copy of a partition ended on the target: the target offset of its stored
/// progress, exactly from the mapping when there is one.
fn copy_end(entry: Option<&Entry>, mapping: Option<&PartitionMapping>) -> Option<i64> {
    let entry = entry?;
    mapping
        .and_then(|m| m.translate(entry.next_offset).exact())
        .or(Some(entry.target_offset).filter(|o| *o >= 0))
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
/// 1`), but for the records an earlier run copied; returns the topic and the offset of the
/// first copy.
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
        let spec =
            NewTopic::new(&topic, partitions).replication_factor(flow.replication_factor.value);
        match target.create_topic(spec, 30_000).await {
            Err(e) if !e.is(kafka_protocol::ResponseError::TopicAlreadyExists) => return Err(e),
            _ => {}
        }
        target.wait_for_leaders(&topic, 30_000).await?;
    }
    // A second run copies only what an earlier one did not: each copy names its source offset.
    let qtp = TopicPartition::new(&topic, tp.partition);
    let end = super::end_offsets(
        target,
        std::slice::from_ref(&qtp),
        IsolationLevel::ReadCommitted,
    )
    .await?
    .get(&qtp)
    .copied()
    .unwrap_or(0);
    let mut done: Option<(i64, i64)> = None;
    records::read_range(target, &qtp, 0, end, IsolationLevel::ReadCommitted, |r| {
        if let Some(o) = quarantined_offset(&r) {
            done = Some(done.map_or((r.offset, o), |(first, last)| (first, last.max(o))));
        }
        true
    })
    .await?;
    let left: Vec<&StoredRecord> = left
        .iter()
        .filter(|r| done.is_none_or(|(_, last)| r.offset > last))
        .collect();
    let mut first = done.map(|(first, _)| first);
    for chunk in left.chunks(QUARANTINE_BATCH) {
        let batch: Vec<Record> = chunk
            .iter()
            .map(|r| {
                let mut rec = Record::new(r.timestamp, r.key.clone(), r.value.clone());
                rec.headers = r.headers.clone();
                rec.headers.push((
                    Bytes::from_static(QUARANTINE_OFFSET_HEADER),
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
        if let Some(r) = &self.reverse {
            writeln!(
                f,
                "reverse flow {} ({} replication policy) set up:",
                r.flow, r.policy
            )?;
            for p in &r.partitions {
                writeln!(
                    f,
                    "  {:<32} -> {:<32} {}",
                    p.source,
                    p.target,
                    match p.start_offset {
                        Some(o) => format!("from offset {o} ({})", p.status),
                        None => "from its start (auto.offset.reset)".to_string(),
                    }
                )?;
            }
        }
        for n in &self.next {
            writeln!(f, "next: {n}")?;
        }
        Ok(())
    }
}
