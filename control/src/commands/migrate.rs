//! Moving between MirrorMaker 2 and strait without copying anything twice (reference §11).
//!
//! - [`import_mm2`]: reads MM2's progress, `mm2-offsets.<source>.internal` on the target (every
//!   partition, last record per key wins, tombstones delete), and seeds strait's progress store
//!   with `next offset = MM2's last replicated offset + 1` and the source topic's current id.
//! - [`export_mm2`]: writes strait's progress back in MM2's format (the exact key bytes Connect
//!   looks up, on the partition Connect's partitioner picks), so that MM2 resumes where strait
//!   stopped.
//!
//! Both print what they did per partition and **refuse to run while replication is active**,
//! because the other side would overwrite or ignore what they write:
//! - *strait* is detected by its liveness record ([`crate::store::liveness`]): every
//!   `strait run` writes one next to its progress, `running` every few seconds and `stopped`
//!   after its final progress flush. A flow is active when its last record says `running` and
//!   is younger than three intervals (15 s); an instance that crashed is presumed dead after
//!   that. Ages use the writer's and the reader's clocks, so hosts must agree within seconds;
//!   a record from the future counts as active.
//! - *MM2* is detected by its Connect worker group, `<source>-mm2` on the target (the default
//!   `group.id` MM2 gives the herder `source->target`): any member means a worker is running.
#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::rc::Rc;

use bytes::Bytes;
use strait_dataplane::batch::Record;
use strait_dataplane::io::{ConnSetup, IoBackend};
use strait_dataplane::wire::WireError;

use crate::cluster::{
    Cluster, ClusterError, IsolationLevel, NewTopic, OffsetSpec, RetryConfig, TopicPartition,
};
use crate::config::{FlowConfig, Mm2Config};
use crate::offsets::connect::{
    self, ConnectError, DEFAULT_OFFSET_STORAGE_PARTITIONS, ExportRecord, ImportedProgress,
    MIRROR_SOURCE_CONNECTOR,
};
use crate::plan::PlanError;
use crate::store::liveness::{Activity, judge, last_liveness, mm2_running};
use crate::store::progress::{self, Entry, ProgressStore};
use crate::store::records;

/// Errors of the migration commands. Each names the flow.
#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    /// The flow cannot be planned (missing bootstrap servers, unsupported settings...).
    #[error("flow {flow}: {source}")]
    Plan {
        flow: String,
        #[source]
        source: PlanError,
    },
    /// A client's connection settings are unusable (an unreadable trust store...).
    #[error("flow {flow}: cluster {cluster}: {error}")]
    Client {
        flow: String,
        cluster: String,
        /// In the message, so not a `#[source]` (the CLI prints error chains).
        error: WireError,
    },
    /// An admin call failed.
    #[error("flow {flow}: {action}: {source}")]
    Cluster {
        flow: String,
        action: &'static str,
        #[source]
        source: ClusterError,
    },
    /// Replication is running: importing or exporting now would be overwritten or ignored.
    #[error("flow {flow}: refusing to {command} while replication is active: {why}")]
    Active {
        flow: String,
        command: &'static str,
        why: String,
    },
    /// MM2's offsets topic cannot be addressed.
    #[error("flow {flow}: {source}")]
    Connect {
        flow: String,
        #[source]
        source: ConnectError,
    },
}

/// Why replication of `flow` is active, or `None`.
async fn active_replication(
    flow: &FlowConfig,
    target: &Cluster,
    now_ms: i64,
) -> Result<Option<String>, MigrateError> {
    let err = |action| {
        let flow = flow.name();
        move |source| MigrateError::Cluster {
            flow,
            action,
            source,
        }
    };
    let last = last_liveness(
        target,
        &progress::topic_name(&flow.source),
        &flow.source,
        &flow.target,
    )
    .await
    .map_err(err("reading strait's liveness record"))?;
    if let Activity::Running { instance, age_ms } = judge(last.as_ref(), now_ms) {
        return Ok(Some(format!(
            "strait instance {instance} is replicating it (its last liveness record in {} on {} is {} ms old); stop it first",
            progress::topic_name(&flow.source),
            flow.target,
            age_ms
        )));
    }
    mm2_running(target, &flow.source, &flow.target)
        .await
        .map_err(err("describing MM2's worker group"))
}

/// What happens to one partition in an import.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImportAction {
    /// strait's progress is set to `next`; `previous` is what strait had.
    Seed {
        next: i64,
        topic_id: [u8; 16],
        previous: Option<i64>,
        /// Something the operator should know (position outside the log, moving backwards).
        note: Option<String>,
    },
    /// Not imported, and why.
    Skip(String),
}

/// One partition of an import.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportRow {
    pub tp: TopicPartition,
    /// MM2's last replicated offset.
    pub mm2_last: i64,
    pub action: ImportAction,
}

/// A source partition as the import sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourcePartition {
    pub topic_id: [u8; 16],
    pub log_start: i64,
    pub log_end: i64,
}

/// Decides what to import: every MM2 entry of a partition that exists on the source and that
/// the flow replicates becomes `next = last + 1` with the current topic id.
pub fn plan_import(
    imported: &ImportedProgress,
    source: &BTreeMap<TopicPartition, SourcePartition>,
    existing: &BTreeMap<TopicPartition, Entry>,
    should_replicate: &dyn Fn(&str) -> bool,
) -> Vec<ImportRow> {
    let mut rows = Vec::new();
    for (tp, &last) in imported.offsets() {
        let action = if !should_replicate(&tp.topic) {
            ImportAction::Skip(format!("topic {} is not replicated by this flow", tp.topic))
        } else if let Some(next) = imported.resume_offset(tp) {
            match source.get(tp) {
                None => ImportAction::Skip(format!("{tp} does not exist on the source")),
                Some(s) => {
                    let previous = existing
                        .get(tp)
                        .filter(|e| e.topic_id == s.topic_id)
                        .map(|e| e.next_offset);
                    let note = if next < s.log_start {
                        Some(format!(
                            "below the log start {}: strait will treat the position as lost",
                            s.log_start
                        ))
                    } else if next > s.log_end {
                        Some(format!(
                            "past the log end {}: strait will treat the position as lost",
                            s.log_end
                        ))
                    } else if previous.is_some_and(|p| p > next) {
                        Some("moves strait's position backwards: records in between will be copied again".into())
                    } else {
                        None
                    };
                    ImportAction::Seed {
                        next,
                        topic_id: s.topic_id,
                        previous,
                        note,
                    }
                }
            }
        } else {
            ImportAction::Skip(format!("MM2's offset {last} is not a position"))
        };
        rows.push(ImportRow {
            tp: tp.clone(),
            mm2_last: last,
            action,
        });
    }
    rows
}

/// What happens to one partition in an export.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExportAction {
    /// This record is written.
    Write(ExportRecord),
    Skip(String),
}

/// One partition of an export.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportRow {
    pub tp: TopicPartition,
    /// strait's next offset.
    pub next: i64,
    pub action: ExportAction,
}

/// Decides what to export: each progress entry of a topic the flow replicates, whose topic
/// still has the stored id, becomes MM2's `last = next - 1` for connector `connector` of
/// cluster `source_alias`, on an offsets topic of `topic_partitions` partitions.
pub fn plan_export(
    entries: &BTreeMap<TopicPartition, Entry>,
    source_ids: &BTreeMap<String, [u8; 16]>,
    should_replicate: &dyn Fn(&str) -> bool,
    connector: &str,
    source_alias: &str,
    topic_partitions: i32,
) -> Result<Vec<ExportRow>, ConnectError> {
    let mut rows = Vec::new();
    for (tp, e) in entries {
        let action = if !should_replicate(&tp.topic) {
            ExportAction::Skip(format!("topic {} is not replicated by this flow", tp.topic))
        } else if source_ids.get(&tp.topic) != Some(&e.topic_id) {
            ExportAction::Skip(match source_ids.get(&tp.topic) {
                None => format!("topic {} no longer exists on the source", tp.topic),
                Some(_) => format!(
                    "topic {} was recreated since strait replicated it",
                    tp.topic
                ),
            })
        } else if e.next_offset <= 0 {
            ExportAction::Skip(
                "nothing replicated yet (MM2 will start at auto.offset.reset)".into(),
            )
        } else {
            ExportAction::Write(connect::export_record(
                connector,
                source_alias,
                tp,
                e.next_offset - 1,
                topic_partitions,
            )?)
        };
        rows.push(ExportRow {
            tp: tp.clone(),
            next: e.next_offset,
            action,
        });
    }
    Ok(rows)
}

/// What a command did for one flow: printable lines.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FlowReport {
    pub flow: String,
    pub lines: Vec<String>,
    /// Partitions written.
    pub written: usize,
    pub skipped: usize,
}

struct Clusters {
    source: Rc<Cluster>,
    target: Rc<Cluster>,
    progress_rf: i16,
    should_replicate: Box<dyn Fn(&str) -> bool>,
}

fn clusters(cfg: &Mm2Config, flow: &FlowConfig) -> Result<Clusters, MigrateError> {
    let plan = crate::plan::flow_plan(cfg, flow).map_err(|source| MigrateError::Plan {
        flow: flow.name(),
        source,
    })?;
    let admin = |alias: &str, bootstrap: &[String], conn: &strait_dataplane::wire::ConnConfig| {
        let setup = ConnSetup::new(conn.clone(), IoBackend::Epoll).map_err(|error| {
            MigrateError::Client {
                flow: flow.name(),
                cluster: alias.to_string(),
                error,
            }
        })?;
        Ok::<_, MigrateError>(Rc::new(Cluster::new(
            alias,
            bootstrap.to_vec(),
            setup,
            RetryConfig::default(),
        )))
    };
    Ok(Clusters {
        source: admin(&plan.source, &plan.source_bootstrap, &plan.source_admin)?,
        target: admin(&plan.target, &plan.target_bootstrap, &plan.target_admin)?,
        progress_rf: plan.progress_replication_factor,
        should_replicate: plan.should_replicate,
    })
}

fn cluster_err(
    flow: &FlowConfig,
    action: &'static str,
) -> impl FnOnce(ClusterError) -> MigrateError {
    let flow = flow.name();
    move |source| MigrateError::Cluster {
        flow,
        action,
        source,
    }
}

/// Reads the source partitions' ids and log ranges.
async fn source_partitions(
    flow: &FlowConfig,
    source: &Cluster,
    wanted: &[TopicPartition],
) -> Result<BTreeMap<TopicPartition, SourcePartition>, MigrateError> {
    let md = source
        .refresh_metadata(None)
        .await
        .map_err(cluster_err(flow, "listing source topics"))?;
    let present: Vec<TopicPartition> = wanted
        .iter()
        .filter(|tp| {
            md.topics
                .get(&tp.topic)
                .is_some_and(|t| t.partition(tp.partition).is_some())
        })
        .cloned()
        .collect();
    let isolation = IsolationLevel::ReadCommitted;
    let lo = source
        .list_offsets(&present, OffsetSpec::Earliest, isolation)
        .await;
    let hi = source
        .list_offsets(&present, OffsetSpec::Latest, isolation)
        .await;
    let mut out = BTreeMap::new();
    for tp in present {
        let (Some(Ok(l)), Some(Ok(h)), Some(t)) = (
            lo.get(&tp).map(|r| r.as_ref().map(|v| *v)),
            hi.get(&tp).map(|r| r.as_ref().map(|v| *v)),
            md.topics.get(&tp.topic),
        ) else {
            continue;
        };
        out.insert(
            tp,
            SourcePartition {
                topic_id: t.topic_id,
                log_start: l,
                log_end: h,
            },
        );
    }
    Ok(out)
}

/// The flow's clusters and an empty report, once neither replicator is running on the flow.
async fn start_command(
    cfg: &Mm2Config,
    flow: &FlowConfig,
    now_ms: i64,
    command: &'static str,
) -> Result<(Clusters, FlowReport), MigrateError> {
    let c = clusters(cfg, flow)?;
    if let Some(why) = active_replication(flow, &c.target, now_ms).await? {
        return Err(MigrateError::Active {
            flow: flow.name(),
            command,
            why,
        });
    }
    let report = FlowReport {
        flow: flow.name(),
        ..FlowReport::default()
    };
    Ok((c, report))
}

/// Sets strait's progress from the import's rows, with a report line per row.
fn seed_progress(rows: &[ImportRow], store: &mut ProgressStore, report: &mut FlowReport) {
    for row in rows {
        match &row.action {
            ImportAction::Seed {
                next,
                topic_id,
                previous,
                note,
            } => {
                store.update(
                    &row.tp,
                    Entry {
                        next_offset: *next,
                        topic_id: *topic_id,
                        target_offset: -1,
                        leader_epoch: -1,
                    },
                );
                report.written += 1;
                report.lines.push(format!(
                    "  {}: MM2 replicated up to offset {} -> strait resumes at {next} ({}){}",
                    row.tp,
                    row.mm2_last,
                    previous.map_or("new".to_string(), |p| format!("was {p}")),
                    note.as_ref()
                        .map(|n| format!("; WARNING: {n}"))
                        .unwrap_or_default()
                ));
            }
            ImportAction::Skip(why) => {
                report.skipped += 1;
                report.lines.push(format!("  {}: skipped: {why}", row.tp));
            }
        }
    }
}

/// `strait offsets import-mm2` for one flow.
pub async fn import_mm2(
    cfg: &Mm2Config,
    flow: &FlowConfig,
    now_ms: i64,
) -> Result<FlowReport, MigrateError> {
    let (c, mut report) = start_command(cfg, flow, now_ms, "import MM2's progress").await?;
    let topic = flow.mm2_offsets_topic.value.clone();
    let md = c
        .target
        .refresh_metadata(Some(&[topic.as_str()]))
        .await
        .map_err(cluster_err(flow, "looking up MM2's offsets topic"))?;
    let Some(meta) = md.topics.get(&topic) else {
        report.lines.push(format!(
            "import-mm2 {}: MM2's offsets topic {topic} does not exist on {}: nothing to import",
            flow.name(),
            flow.target
        ));
        return Ok(report);
    };
    let mut imported = ImportedProgress::new(MIRROR_SOURCE_CONNECTOR, flow.source.as_str());
    let mut records = 0usize;
    for p in &meta.partitions {
        // MM2 with exactly-once source support writes offsets transactionally: committed only.
        records::read_to_end(
            &c.target,
            &topic,
            p.partition,
            IsolationLevel::ReadCommitted,
            |r| {
                records += 1;
                if let Some(k) = r.key.as_deref() {
                    imported.apply(k, r.value.as_deref());
                }
            },
        )
        .await
        .map_err(cluster_err(flow, "reading MM2's offsets topic"))?;
    }
    report.lines.push(format!(
        "import-mm2 {}: read {records} records of {topic} on {} ({} partitions): MM2 progress for {} source partitions of {}",
        flow.name(),
        flow.target,
        meta.partitions.len(),
        imported.offsets().len(),
        flow.source
    ));
    let wanted: Vec<TopicPartition> = imported.offsets().keys().cloned().collect();
    let source = source_partitions(flow, &c.source, &wanted).await?;
    let mut store = ProgressStore::open(&c.target, &flow.source, c.progress_rf)
        .await
        .map_err(cluster_err(flow, "opening strait's progress"))?;
    let rows = plan_import(&imported, &source, store.entries(), &*c.should_replicate);
    seed_progress(&rows, &mut store, &mut report);
    store
        // Imported progress has no exact mapping: any stored one is deleted with it.
        .flush(
            &c.target,
            now_ms,
            &mut crate::offsets::OffsetMapping::default(),
        )
        .await
        .map_err(cluster_err(flow, "writing strait's progress"))?;
    report.lines.push(format!(
        "import-mm2 {}: {} partitions seeded, {} skipped; progress in {} on {}",
        flow.name(),
        report.written,
        report.skipped,
        store.topic(),
        flow.target
    ));
    Ok(report)
}

/// How long a freshly created MM2 offsets topic may take to get leaders for all its partitions.
const OFFSETS_TOPIC_READY_TIMEOUT_MS: u64 = 30_000;

/// The partitions the target lists for `topic` (`None`: no such topic).
async fn listed_partitions(
    flow: &FlowConfig,
    c: &Clusters,
    topic: &str,
) -> Result<Option<usize>, MigrateError> {
    Ok(c.target
        .refresh_metadata(Some(&[topic]))
        .await
        .map_err(cluster_err(flow, "looking up MM2's offsets topic"))?
        .topics
        .get(topic)
        .map(|t| t.partitions.len()))
}

/// Waits until every partition of `topic` has a leader: a topic just created can be listed with
/// no partitions (or no leaders) for a moment, and writing then would address nothing.
async fn wait_for_leaders(
    flow: &FlowConfig,
    c: &Clusters,
    topic: &str,
) -> Result<(), MigrateError> {
    c.target
        .wait_for_leaders(topic, OFFSETS_TOPIC_READY_TIMEOUT_MS)
        .await
        .map_err(cluster_err(
            flow,
            "waiting for MM2's offsets topic's leaders",
        ))
}

/// The partition count of MM2's offsets topic, which is created as Connect would when it is
/// missing.
async fn mm2_offsets_partitions(
    flow: &FlowConfig,
    c: &Clusters,
    topic: &str,
    report: &mut FlowReport,
) -> Result<i32, MigrateError> {
    let mut partitions = listed_partitions(flow, c, topic).await?;
    if partitions.is_none() {
        // Connect uses an existing offsets topic as it is; create it as Connect would.
        let created = c
            .target
            .create_topics(
                &[NewTopic {
                    name: topic.to_string(),
                    partitions: DEFAULT_OFFSET_STORAGE_PARTITIONS,
                    replication_factor: -1,
                    configs: vec![("cleanup.policy".into(), "compact".into())],
                }],
                30_000,
            )
            .await
            .map_err(cluster_err(flow, "creating MM2's offsets topic"))?;
        for (_, r) in created {
            match r {
                Ok(()) => {}
                Err(e) if e.is(kafka_protocol::ResponseError::TopicAlreadyExists) => {}
                Err(e) => return Err(cluster_err(flow, "creating MM2's offsets topic")(e)),
            }
        }
        report.lines.push(format!(
            "export-mm2 {}: created MM2's offsets topic {topic} on {} ({DEFAULT_OFFSET_STORAGE_PARTITIONS} partitions, compacted, the broker's default replication factor)",
            flow.name(),
            flow.target
        ));
        wait_for_leaders(flow, c, topic).await?;
        partitions = listed_partitions(flow, c, topic).await?;
    } else if partitions == Some(0) {
        // Created a moment ago by someone else: wait for its partitions as above.
        wait_for_leaders(flow, c, topic).await?;
        partitions = listed_partitions(flow, c, topic).await?;
    }
    Ok(i32::try_from(partitions.unwrap_or(0)).unwrap_or(i32::MAX))
}

/// The records to write per partition of MM2's offsets topic, with a report line per row.
fn export_records(
    rows: &[ExportRow],
    topic: &str,
    now_ms: i64,
    report: &mut FlowReport,
) -> BTreeMap<i32, Vec<Record>> {
    let mut by_partition: BTreeMap<i32, Vec<Record>> = BTreeMap::new();
    for row in rows {
        match &row.action {
            ExportAction::Write(r) => {
                by_partition
                    .entry(r.partition)
                    .or_default()
                    .push(Record::new(
                        now_ms,
                        Some(Bytes::from(r.key.clone())),
                        Some(Bytes::from(r.value.clone())),
                    ));
                report.written += 1;
                report.lines.push(format!(
                    "  {}: strait resumes at {} -> MM2's last replicated offset {} ({topic} partition {})",
                    row.tp,
                    row.next,
                    row.next - 1,
                    r.partition
                ));
            }
            ExportAction::Skip(why) => {
                report.skipped += 1;
                report.lines.push(format!("  {}: skipped: {why}", row.tp));
            }
        }
    }
    by_partition
}

/// `strait offsets export-mm2` for one flow.
pub async fn export_mm2(
    cfg: &Mm2Config,
    flow: &FlowConfig,
    now_ms: i64,
) -> Result<FlowReport, MigrateError> {
    let (c, mut report) = start_command(cfg, flow, now_ms, "export strait's progress").await?;
    let progress_topic = progress::topic_name(&flow.source);
    let md = c
        .target
        .refresh_metadata(Some(&[progress_topic.as_str()]))
        .await
        .map_err(cluster_err(flow, "looking up strait's progress topic"))?;
    if !md.topics.contains_key(&progress_topic) {
        report.lines.push(format!(
            "export-mm2 {}: strait's progress topic {progress_topic} does not exist on {}: nothing to export",
            flow.name(),
            flow.target
        ));
        return Ok(report);
    }
    let store = ProgressStore::open(&c.target, &flow.source, c.progress_rf)
        .await
        .map_err(cluster_err(flow, "reading strait's progress"))?;
    let smd = c
        .source
        .refresh_metadata(None)
        .await
        .map_err(cluster_err(flow, "listing source topics"))?;
    let ids: BTreeMap<String, [u8; 16]> = smd
        .topics
        .values()
        .map(|t| (t.name.clone(), t.topic_id))
        .collect();

    let topic = flow.mm2_offsets_topic.value.clone();
    let partitions = mm2_offsets_partitions(flow, &c, &topic, &mut report).await?;
    let rows = plan_export(
        store.entries(),
        &ids,
        &*c.should_replicate,
        MIRROR_SOURCE_CONNECTOR,
        &flow.source,
        partitions,
    )
    .map_err(|source| MigrateError::Connect {
        flow: flow.name(),
        source,
    })?;
    let by_partition = export_records(&rows, &topic, now_ms, &mut report);
    for (p, records) in by_partition {
        for chunk in records.chunks(2_000) {
            records::produce(&c.target, &topic, p, chunk)
                .await
                .map_err(cluster_err(flow, "writing MM2's offsets topic"))?;
        }
    }
    report.lines.push(format!(
        "export-mm2 {}: {} partitions written to {topic} on {}, {} skipped",
        flow.name(),
        report.written,
        flow.target,
        report.skipped
    ));
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ids(n: u8) -> [u8; 16] {
        [n; 16]
    }

    /// A stored position with no known target offset.
    fn entry(next_offset: i64, id: u8) -> Entry {
        Entry {
            next_offset,
            topic_id: ids(id),
            target_offset: -1,
            leader_epoch: -1,
        }
    }

    #[test]
    fn import_rows() {
        let key = |t: &str, p| connect::source_offset_key(MIRROR_SOURCE_CONNECTOR, "A", t, p);
        let recs: Vec<(Vec<u8>, &[u8])> = vec![
            (key("t", 0), b"{\"offset\":41}"),
            (key("t", 1), b"{\"offset\":9}"),
            (key("t", 2), b"{\"offset\":100}"),
            (key("gone", 0), b"{\"offset\":3}"),
            (key("other", 0), b"{\"offset\":3}"),
            (key("t", 3), b"{\"offset\":-1}"),
        ];
        let imported = ImportedProgress::from_records(
            MIRROR_SOURCE_CONNECTOR,
            "A",
            recs.iter().map(|(k, v)| (k.as_slice(), Some(*v))),
        );
        let sp = |lo, hi| SourcePartition {
            topic_id: ids(1),
            log_start: lo,
            log_end: hi,
        };
        let source: BTreeMap<TopicPartition, SourcePartition> = [
            (TopicPartition::new("t", 0), sp(0, 50)),
            (TopicPartition::new("t", 1), sp(0, 50)),
            (TopicPartition::new("t", 2), sp(0, 50)),
            (TopicPartition::new("t", 3), sp(0, 50)),
            (TopicPartition::new("other", 0), sp(0, 50)),
        ]
        .into_iter()
        .collect();
        let existing: BTreeMap<TopicPartition, Entry> = [
            (TopicPartition::new("t", 1), entry(20, 1)),
            // An entry of an older topic id is not "what strait had".
            (TopicPartition::new("t", 0), entry(5, 9)),
        ]
        .into_iter()
        .collect();
        let rows = plan_import(&imported, &source, &existing, &|t| t != "other");
        let find = |t: &str, p| {
            rows.iter()
                .find(|r| r.tp == TopicPartition::new(t, p))
                .unwrap()
                .action
                .clone()
        };
        assert_eq!(
            find("t", 0),
            ImportAction::Seed {
                next: 42,
                topic_id: ids(1),
                previous: None,
                note: None
            }
        );
        match find("t", 1) {
            ImportAction::Seed {
                next: 10,
                previous: Some(20),
                note: Some(n),
                ..
            } => assert!(n.contains("backwards")),
            other => panic!("{other:?}"),
        }
        match find("t", 2) {
            ImportAction::Seed {
                next: 101,
                note: Some(n),
                ..
            } => assert!(n.contains("log end")),
            other => panic!("{other:?}"),
        }
        assert!(matches!(find("gone", 0), ImportAction::Skip(w) if w.contains("does not exist")));
        assert!(matches!(find("other", 0), ImportAction::Skip(w) if w.contains("not replicated")));
        assert!(matches!(find("t", 3), ImportAction::Skip(_)));
        assert_eq!(rows.len(), 6);
    }

    #[test]
    fn export_rows() {
        let entries: BTreeMap<TopicPartition, Entry> = [
            (TopicPartition::new("t", 0), entry(42, 1)),
            (TopicPartition::new("t", 1), entry(0, 1)),
            (TopicPartition::new("new", 0), entry(5, 2)),
            (TopicPartition::new("gone", 0), entry(5, 3)),
        ]
        .into_iter()
        .collect();
        let source_ids: BTreeMap<String, [u8; 16]> =
            [("t".to_string(), ids(1)), ("new".into(), ids(7))]
                .into_iter()
                .collect();
        let rows = plan_export(
            &entries,
            &source_ids,
            &|_| true,
            MIRROR_SOURCE_CONNECTOR,
            "A",
            25,
        )
        .unwrap();
        let find = |t: &str, p| {
            rows.iter()
                .find(|r| r.tp == TopicPartition::new(t, p))
                .unwrap()
                .action
                .clone()
        };
        let ExportAction::Write(r) = find("t", 0) else {
            panic!()
        };
        assert_eq!(
            r,
            connect::export_record(
                MIRROR_SOURCE_CONNECTOR,
                "A",
                &TopicPartition::new("t", 0),
                41,
                25
            )
            .unwrap()
        );
        assert_eq!(r.value, b"{\"offset\":41}");
        assert!(matches!(find("t", 1), ExportAction::Skip(_)));
        assert!(matches!(find("new", 0), ExportAction::Skip(w) if w.contains("recreated")));
        assert!(matches!(find("gone", 0), ExportAction::Skip(w) if w.contains("no longer exists")));
        assert!(
            plan_export(
                &entries,
                &source_ids,
                &|_| true,
                MIRROR_SOURCE_CONNECTOR,
                "A",
                0
            )
            .is_err()
        );
    }

    proptest! {
        /// Export then import gives strait back the positions it exported.
        #[test]
        fn export_import_round_trip(
            positions in proptest::collection::btree_map(("[a-z]{1,8}", 0i32..50), 1i64..1_000_000, 1..20),
            partitions in 1i32..60,
        ) {
            let entries: BTreeMap<TopicPartition, Entry> = positions.iter()
                .map(|((t, p), n)| (TopicPartition::new(t, *p), Entry { next_offset: *n, topic_id: ids(1), target_offset: -1, leader_epoch: -1 }))
                .collect();
            let source_ids: BTreeMap<String, [u8; 16]> = entries.keys().map(|tp| (tp.topic.clone(), ids(1))).collect();
            let rows = plan_export(&entries, &source_ids, &|_| true, MIRROR_SOURCE_CONNECTOR, "A", partitions).unwrap();
            let mut imported = ImportedProgress::new(MIRROR_SOURCE_CONNECTOR, "A");
            for row in &rows {
                let ExportAction::Write(r) = &row.action else { panic!("{row:?}") };
                prop_assert!((0..partitions).contains(&r.partition));
                imported.apply(&r.key, Some(&r.value));
            }
            let source: BTreeMap<TopicPartition, SourcePartition> = entries.keys()
                .map(|tp| (tp.clone(), SourcePartition { topic_id: ids(1), log_start: 0, log_end: i64::MAX }))
                .collect();
            let back = plan_import(&imported, &source, &BTreeMap::new(), &|_| true);
            prop_assert_eq!(back.len(), entries.len());
            for row in back {
                let ImportAction::Seed { next, .. } = row.action else { panic!() };
                prop_assert_eq!(next, entries[&row.tp].next_offset);
            }
        }

    }
}
