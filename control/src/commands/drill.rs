//! `strait drill`: the failover rehearsal of the MM2 tutorial, automated and read-only for the
//! group it rehearses. For group G it reads G's committed source offsets, waits for strait's
//! checkpoints and group sync to reach them (or translates itself when group sync is off),
//! starts a shadow group on the target where a failed-over G would start, and checks per
//! partition, by content, that the first record the shadow group reads is the first record G
//! had not consumed on the source. G itself is never written; a G active on the target is
//! refused. The shadow group is deleted at the end.

use std::collections::BTreeMap;
use std::fmt;
use std::rc::Rc;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::translate::{TranslateReport, TranslateRow, select_flow, translate_command};
use crate::cluster::{
    Cluster, ClusterError, CommittedOffset, IsolationLevel, OffsetSpec, TopicPartition,
};
use crate::config::Mm2Config;
use crate::duties::offsets::{OffsetsError, cluster_for};
use crate::store::progress;
use crate::store::records::{self, StoredRecord};
use crate::time::wall_ms;
use crate::verify::compare::{Field, differing_field};

/// How long the drill waits, by default, for group sync to reach G's committed offsets.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(60);
/// How far from G's committed offset the drill looks for the source record the target's
/// first record is a copy of (each way), by default.
pub const DEFAULT_SCAN_RECORDS: i64 = 100_000;

/// What to rehearse.
#[derive(Debug, Clone)]
pub struct DrillOptions {
    /// The flow (`source->target`); default the only enabled flow.
    pub flow: Option<String>,
    /// The group rehearsed (only read, never written).
    pub group: String,
    /// The bound on waiting for group sync.
    pub wait: Duration,
    /// The bound on the search for the source copy of a target record, each way.
    pub scan_records: i64,
}

/// Why the drill could not run.
#[derive(Debug, thiserror::Error)]
pub enum DrillError {
    #[error(transparent)]
    Offsets(#[from] OffsetsError),
    /// G has members on the target: a consumer may be reading there already.
    #[error(
        "group {group} is {state} on {cluster}: a drill never runs against a group active on the target (stop its consumers there, or rehearse before they start)"
    )]
    ActiveOnTarget {
        group: String,
        state: String,
        cluster: String,
    },
    /// G has no committed offset on a replicated topic.
    #[error("group {group} has no committed offset on a topic flow {flow} replicates")]
    NothingToRehearse { group: String, flow: String },
}

/// One timed step.
#[derive(Debug, Clone, Serialize)]
pub struct Step {
    pub name: &'static str,
    pub ms: u64,
}

/// What a consumer of G that fails over would read first, per partition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Outcome {
    /// The first record read on the target is the first record G had not consumed.
    Exact,
    /// G consumed everything on the source and the target holds nothing past the start.
    NothingToRead,
    /// The target start is past records G had not consumed: they would be skipped.
    Skipped { records: u64 },
    /// The target start is before records G consumed: they would be read again.
    Reread { records: u64 },
    /// The first record G had not consumed is not copied yet (replication lag, not a skip).
    NotYetCopied,
    /// No comparison possible; why.
    Unknown { why: String },
}

impl Outcome {
    /// A skip, or a result the drill cannot vouch for.
    pub fn fails(&self) -> bool {
        matches!(self, Self::Skipped { .. } | Self::Unknown { .. })
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Exact => f.write_str("exact"),
            Self::NothingToRead => f.write_str("exact (nothing to read)"),
            Self::Skipped { records } => write!(f, "SKIPS {records}"),
            Self::Reread { records } => write!(f, "re-reads {records}"),
            Self::NotYetCopied => f.write_str("not yet copied (lag)"),
            Self::Unknown { why } => write!(f, "UNKNOWN: {why}"),
        }
    }
}

/// One partition of G.
#[derive(Debug, Clone, Serialize)]
pub struct DrillRow {
    pub topic: String,
    pub partition: i32,
    /// G's committed offset on the source: the first offset it has not consumed.
    pub source_offset: i64,
    pub target_topic: String,
    /// strait's translation of `source_offset` and its precision.
    pub translated_offset: Option<i64>,
    pub precision: &'static str,
    /// G's committed offset on the target (what group sync wrote), if any.
    pub target_committed: Option<i64>,
    /// Where the shadow group started: G's target offset when it has one (a failed-over
    /// consumer resumes there), else the translation.
    pub shadow_start: Option<i64>,
    /// The offsets of the records compared: the first G had not consumed on the source, and
    /// the first the shadow group reads on the target.
    pub first_source_record: Option<i64>,
    pub first_target_record: Option<i64>,
    pub outcome: Outcome,
    /// Records on the source strait had not copied yet, and the age of the oldest of them.
    pub lag_records: Option<i64>,
    pub lag_seconds: Option<f64>,
}

/// What `strait drill` prints.
#[derive(Debug, Clone, Serialize)]
pub struct DrillReport {
    pub flow: String,
    pub group: String,
    pub shadow_group: String,
    pub group_sync: bool,
    /// With group sync: whether G's target offsets matched strait's translations within the
    /// wait.
    pub group_sync_caught_up: Option<bool>,
    pub steps: Vec<Step>,
    pub partitions: Vec<DrillRow>,
    /// Whether the shadow group was deleted at the end (else its name, to delete by hand).
    pub shadow_group_deleted: bool,
}

impl DrillReport {
    /// No skip, and every partition compared or honestly not yet copied.
    pub fn ok(&self) -> bool {
        !self.partitions.iter().any(|r| r.outcome.fails())
    }
}

/// Whether a failed-over consumer reads `target` as the record `source`: verify's comparison,
/// short of the timestamp type (key, value, headers and timestamp).
fn same_record(source: &StoredRecord, target: &StoredRecord) -> bool {
    matches!(
        differing_field(source, target),
        None | Some(Field::TimestampType)
    )
}

/// The first record at or after `from` and before `end`, as a consumer sees it.
async fn first_record(
    cluster: &Cluster,
    tp: &TopicPartition,
    from: i64,
    end: i64,
    isolation: IsolationLevel,
) -> Result<Option<StoredRecord>, ClusterError> {
    let mut found = None;
    if from < end {
        records::read_range(cluster, tp, from, end, isolation, |r| {
            found = Some(r);
            false
        })
        .await?;
    }
    Ok(found)
}

/// Counts records of `tp` in `from..end`, and the offset of the first one equal to `wanted`
/// (counting those before it), reading at most `limit` records.
async fn scan_for(
    cluster: &Cluster,
    tp: &TopicPartition,
    from: i64,
    end: i64,
    isolation: IsolationLevel,
    wanted: Option<&StoredRecord>,
    limit: i64,
) -> Result<(u64, Option<(i64, u64)>), ClusterError> {
    let (mut seen, mut hit) = (0u64, None);
    if from < end {
        records::read_range(cluster, tp, from, end, isolation, |r| {
            if let Some(w) = wanted
                && hit.is_none()
                && same_record(&r, w)
            {
                hit = Some((r.offset, seen));
            }
            seen += 1;
            (seen as i64) < limit
        })
        .await?;
    }
    Ok((seen, hit))
}

/// The shadow group's name: tied to G, unique per run.
fn shadow_name(group: &str) -> String {
    format!("strait-drill.{group}.{}", wall_ms())
}

/// Whether group sync has written G's target offsets as strait translates them.
fn sync_caught_up(t: &TranslateReport) -> bool {
    t.rows
        .iter()
        .all(|r| r.answer.downstream().is_some() && r.target_committed == r.answer.downstream())
}

/// The clusters and settings a drill reads with.
struct Sides {
    source: Rc<Cluster>,
    target: Rc<Cluster>,
    /// What strait copies, and what the drill reads on both sides.
    isolation: IsolationLevel,
    scan: i64,
}

/// What is known of one partition before its records are read.
struct Positions {
    source_end: Option<i64>,
    target_end: Option<i64>,
    /// strait's stored progress: the first source offset not copied.
    copied_to: Option<i64>,
    shadow_start: Option<i64>,
}

impl Sides {
    /// One partition's row: the lag at this moment and the comparison.
    async fn row(&self, r: &TranslateRow, at: &Positions) -> DrillRow {
        let mut row = DrillRow {
            topic: r.source.topic.clone(),
            partition: r.source.partition,
            source_offset: r.committed,
            target_topic: r.target.topic.clone(),
            translated_offset: r.answer.downstream(),
            precision: r.answer.label(),
            target_committed: r.target_committed,
            shadow_start: at.shadow_start,
            first_source_record: None,
            first_target_record: None,
            outcome: Outcome::NothingToRead,
            lag_records: None,
            lag_seconds: None,
        };
        if let (Some(end), Some(copied)) = (at.source_end, at.copied_to) {
            let lag = (end - copied).max(0);
            row.lag_records = Some(lag);
            row.lag_seconds = Some(0.0);
            if lag > 0
                && let Ok(Some(oldest)) =
                    first_record(&self.source, &r.source, copied, end, self.isolation).await
            {
                row.lag_seconds = Some(((wall_ms() - oldest.timestamp).max(0) as f64) / 1000.0);
            }
        }
        row.outcome = match (at.source_end, at.target_end, at.shadow_start) {
            (None, _, _) | (_, None, _) => Outcome::Unknown {
                why: "the log end of the source or the target partition is not known".into(),
            },
            (_, _, None) => Outcome::Unknown {
                why: "no translation, and no offset of the group on the target".into(),
            },
            (Some(source_end), Some(target_end), Some(start)) => {
                self.compare(r, (source_end, target_end, start), at.copied_to, &mut row)
                    .await
            }
        };
        row
    }

    /// Compares the first record G had not consumed with the first the shadow group reads.
    async fn compare(
        &self,
        r: &TranslateRow,
        (source_end, target_end, start): (i64, i64, i64),
        copied_to: Option<i64>,
        row: &mut DrillRow,
    ) -> Outcome {
        let (source, target, isolation, scan) =
            (&self.source, &self.target, self.isolation, self.scan);
        let s = match first_record(source, &r.source, r.committed, source_end, isolation).await {
            Ok(s) => s,
            Err(e) => return unknown(&e),
        };
        let t = match first_record(target, &r.target, start, target_end, isolation).await {
            Ok(t) => t,
            Err(e) => return unknown(&e),
        };
        row.first_source_record = s.as_ref().map(|x| x.offset);
        row.first_target_record = t.as_ref().map(|x| x.offset);
        match (s, t) {
            (None, None) => Outcome::NothingToRead,
            (Some(s), _) if copied_to.is_some_and(|c| s.offset >= c) => Outcome::NotYetCopied,
            (Some(s), Some(t)) if same_record(&s, &t) => Outcome::Exact,
            // G read everything; whatever the target holds from the start is read again.
            (None, Some(_)) => {
                match scan_for(target, &r.target, start, target_end, isolation, None, scan).await {
                    Ok((n, _)) => Outcome::Reread { records: n },
                    Err(e) => unknown(&e),
                }
            }
            // Copied (per strait's progress), yet nothing on the target from the start.
            (Some(s), None) => {
                let end = copied_to.unwrap_or(source_end);
                match scan_for(source, &r.source, s.offset, end, isolation, None, scan).await {
                    Ok((n, _)) => Outcome::Skipped { records: n },
                    Err(e) => unknown(&e),
                }
            }
            (Some(s), Some(t)) => self.place(r, &s, &t, source_end).await,
        }
    }

    /// Where the target's first record `t` lies against the first record `s` G had not
    /// consumed: a later source record (skipped), or an earlier one (re-read).
    async fn place(
        &self,
        r: &TranslateRow,
        s: &StoredRecord,
        t: &StoredRecord,
        source_end: i64,
    ) -> Outcome {
        let (source, isolation, scan) = (&self.source, self.isolation, self.scan);
        match scan_for(
            source,
            &r.source,
            s.offset,
            source_end,
            isolation,
            Some(t),
            scan,
        )
        .await
        {
            Ok((_, Some((_, before)))) => return Outcome::Skipped { records: before },
            Ok(_) => {}
            Err(e) => return unknown(&e),
        }
        let from = (r.committed - scan).max(0);
        let (mut last_hit, mut total) = (None, 0u64);
        let walked = records::read_range(source, &r.source, from, r.committed, isolation, |x| {
            if same_record(&x, t) {
                last_hit = Some(total);
            }
            total += 1;
            true
        })
        .await;
        match (walked, last_hit) {
            (Err(e), _) => unknown(&e),
            (Ok(_), Some(at)) => Outcome::Reread {
                records: total - at,
            },
            (Ok(_), None) => Outcome::Unknown {
                why: format!(
                    "the target's record at {} matches no source record within {scan} records of offset {}",
                    t.offset, r.committed
                ),
            },
        }
    }
}

fn unknown(e: &ClusterError) -> Outcome {
    Outcome::Unknown { why: e.to_string() }
}

/// Waits (at most `opts.wait`) until group sync wrote G's target offsets as strait translates
/// them; refuses a group that became active meanwhile. Returns the last translation and
/// whether it caught up.
async fn wait_for_group_sync(
    cfg: &Mm2Config,
    opts: &DrillOptions,
    target_alias: &str,
    mut t: TranslateReport,
) -> Result<(TranslateReport, bool), DrillError> {
    let deadline = Instant::now() + opts.wait;
    loop {
        if sync_caught_up(&t) {
            return Ok((t, true));
        }
        if Instant::now() >= deadline {
            return Ok((t, false));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        t = translate_command(cfg, opts.flow.as_deref(), &opts.group).await?;
        refuse_active(&t, &opts.group, target_alias)?;
    }
}

fn refuse_active(t: &TranslateReport, group: &str, target_alias: &str) -> Result<(), DrillError> {
    if t.plan.state.is_idle() {
        return Ok(());
    }
    Err(DrillError::ActiveOnTarget {
        group: group.to_string(),
        state: t.plan.state.to_string(),
        cluster: target_alias.to_string(),
    })
}

/// Commits the shadow group where a failed-over G starts (G's target offsets, else the
/// translation) and reads it back as a consumer of it would.
async fn start_shadow(
    target: &Cluster,
    flow: &str,
    shadow: &str,
    group: &str,
    rows: &[TranslateRow],
) -> Result<BTreeMap<TopicPartition, CommittedOffset>, DrillError> {
    let cluster_err = |what: String| {
        move |source| {
            DrillError::Offsets(OffsetsError::Cluster {
                flow: flow.to_string(),
                what,
                source: Box::new(source),
            })
        }
    };
    let starts: BTreeMap<TopicPartition, CommittedOffset> = rows
        .iter()
        .filter_map(|r| {
            let offset = r.target_committed.or_else(|| r.answer.downstream())?;
            Some((
                r.target.clone(),
                CommittedOffset {
                    offset,
                    metadata: format!("strait drill of {group}"),
                },
            ))
        })
        .collect();
    let committed = target
        .offset_commit(shadow, &starts)
        .await
        .map_err(cluster_err(format!(
            "cannot commit the shadow group {shadow}"
        )))?;
    if let Some((tp, Err(e))) = committed.iter().find(|(_, r)| r.is_err()) {
        return Err(cluster_err(format!(
            "cannot commit the shadow group {shadow} for {tp}"
        ))(e.clone()));
    }
    target
        .offset_fetch(shadow)
        .await
        .map_err(cluster_err(format!(
            "cannot fetch the shadow group {shadow}"
        )))
}

/// Times the drill's steps.
struct Laps {
    steps: Vec<Step>,
    since: Instant,
}

impl Laps {
    fn lap(&mut self, name: &'static str) {
        self.steps.push(Step {
            name,
            ms: self.since.elapsed().as_millis() as u64,
        });
        self.since = Instant::now();
    }
}

/// `strait drill`.
pub async fn drill_command(
    cfg: &Mm2Config,
    opts: &DrillOptions,
) -> Result<DrillReport, DrillError> {
    let mut laps = Laps {
        steps: Vec::new(),
        since: Instant::now(),
    };
    let flow = select_flow(cfg, opts.flow.as_deref())?;
    let name = flow.name();
    let c = &flow.clients;
    let sides = Sides {
        source: cluster_for(&name, "source consumer", &c.source_consumer.client)?,
        target: cluster_for(&name, "target admin", &c.target_admin.client)?,
        isolation: c.source_consumer.isolation_level.value.into(),
        scan: opts.scan_records,
    };
    let target_consumer = cluster_for(&name, "target consumer", &c.target_consumer.client)?;
    let group_sync = flow.sync_group_offsets_enabled.value;

    // Validate: G must not be consuming on the target, and must have something to rehearse.
    let mut t = translate_command(cfg, opts.flow.as_deref(), &opts.group).await?;
    refuse_active(&t, &opts.group, &flow.target)?;
    if t.rows.is_empty() {
        return Err(DrillError::NothingToRehearse {
            group: opts.group.clone(),
            flow: name.clone(),
        });
    }
    laps.lap("validate and translate");
    let mut caught_up = None;
    if group_sync {
        let (latest, done) = wait_for_group_sync(cfg, opts, &flow.target, t).await?;
        (t, caught_up) = (latest, Some(done));
        laps.lap("wait for group sync");
    }

    let shadow = shadow_name(&opts.group);
    let shadow_starts = start_shadow(&sides.target, &name, &shadow, &opts.group, &t.rows).await?;
    laps.lap("start the shadow group");

    // Where strait stands, for the lag at this moment, and both logs' ends.
    let stored = progress::read_stored(&target_consumer, &flow.source).await;
    let source_tps: Vec<TopicPartition> = t.rows.iter().map(|r| r.source.clone()).collect();
    let target_tps: Vec<TopicPartition> = t.rows.iter().map(|r| r.target.clone()).collect();
    let source_ends = sides
        .source
        .list_offsets(&source_tps, OffsetSpec::Latest, sides.isolation)
        .await;
    let target_ends = sides
        .target
        .list_offsets(&target_tps, OffsetSpec::Latest, sides.isolation)
        .await;
    let known = |m: &BTreeMap<TopicPartition, Result<i64, ClusterError>>, tp| {
        m.get(tp).and_then(|e| e.as_ref().ok()).copied()
    };
    let mut partitions = Vec::new();
    for r in &t.rows {
        let at = Positions {
            source_end: known(&source_ends, &r.source),
            target_end: known(&target_ends, &r.target),
            copied_to: stored.get(&r.source).map(|e| e.next_offset),
            shadow_start: shadow_starts.get(&r.target).map(|o| o.offset),
        };
        partitions.push(sides.row(r, &at).await);
    }
    laps.lap("read and compare");

    let shadow_group_deleted = sides
        .target
        .delete_group(&shadow)
        .await
        .inspect_err(|e| tracing::warn!(group = %shadow, "cannot delete the shadow group: {e}"))
        .is_ok();
    laps.lap("delete the shadow group");
    Ok(DrillReport {
        flow: name,
        group: opts.group.clone(),
        shadow_group: shadow,
        group_sync,
        group_sync_caught_up: caught_up,
        steps: laps.steps,
        partitions,
        shadow_group_deleted,
    })
}

impl DrillReport {
    /// The table: a line per partition.
    fn table(&self) -> String {
        let dash = |v: Option<i64>| v.map_or("-".to_string(), |v| v.to_string());
        let header = [
            "TOPIC",
            "PARTITION",
            "SOURCE-OFFSET",
            "TRANSLATED",
            "PRECISION",
            "TARGET-COMMITTED",
            "SHADOW-START",
            "FIRST-SOURCE",
            "FIRST-TARGET",
            "LAG",
            "LAG-S",
            "RESULT",
        ];
        let mut rows: Vec<Vec<String>> = Vec::new();
        for r in &self.partitions {
            rows.push(vec![
                r.topic.clone(),
                r.partition.to_string(),
                r.source_offset.to_string(),
                dash(r.translated_offset),
                r.precision.to_string(),
                dash(r.target_committed),
                dash(r.shadow_start),
                dash(r.first_source_record),
                dash(r.first_target_record),
                dash(r.lag_records),
                r.lag_seconds.map_or("-".into(), |s| format!("{s:.1}")),
                r.outcome.to_string(),
            ]);
        }
        super::table(&header, &rows)
    }

    /// Records skipped and re-read, over every partition.
    fn totals(&self) -> (u64, u64) {
        self.partitions
            .iter()
            .fold((0, 0), |(skipped, reread), r| match r.outcome {
                Outcome::Skipped { records } => (skipped + records, reread),
                Outcome::Reread { records } => (skipped, reread + records),
                _ => (skipped, reread),
            })
    }
}

impl fmt::Display for DrillReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "drill of group {} over flow {} (shadow group {})",
            self.group, self.flow, self.shadow_group
        )?;
        match self.group_sync_caught_up {
            Some(true) => writeln!(
                f,
                "group sync: on, the target offsets are strait's translations"
            )?,
            Some(false) => writeln!(
                f,
                "group sync: on, but the target offsets did NOT reach strait's translations within the wait"
            )?,
            None => writeln!(
                f,
                "group sync: off, the shadow group starts at strait's translations"
            )?,
        }
        f.write_str(&self.table())?;
        let steps: Vec<String> = self
            .steps
            .iter()
            .map(|s| format!("{} {} ms", s.name, s.ms))
            .collect();
        writeln!(f, "steps: {}", steps.join(", "))?;
        if !self.shadow_group_deleted {
            writeln!(
                f,
                "the shadow group {} could not be deleted",
                self.shadow_group
            )?;
        }
        let (skipped, reread) = self.totals();
        writeln!(
            f,
            "{}: {} partitions, {skipped} records skipped, {reread} re-read",
            if self.ok() { "OK" } else { "FAILED" },
            self.partitions.len()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_skips_and_unknowns_fail() {
        assert!(!Outcome::Exact.fails());
        assert!(!Outcome::NothingToRead.fails());
        assert!(!Outcome::NotYetCopied.fails());
        assert!(!Outcome::Reread { records: 3 }.fails());
        assert!(Outcome::Skipped { records: 1 }.fails());
        assert!(Outcome::Unknown { why: "x".into() }.fails());
        assert_eq!(Outcome::Skipped { records: 7 }.to_string(), "SKIPS 7");
    }

    #[test]
    fn the_shadow_group_is_named_after_the_group() {
        assert!(shadow_name("orders").starts_with("strait-drill.orders."));
    }
}
