//! `strait smoke`: the smoke test of DR runbooks as one command. It produces one stamped record
//! into a topic the flow replicates, waits (bounded) for it on the remote topic of the target,
//! compares it field by field with what was produced, and, once strait has stored its progress
//! past it, checks that the stored exact mapping puts it at the target offset where it was
//! found. It writes exactly that one record, to the source (name a topic made for smoke tests);
//! on the target it only reads. It produces with the flow's source admin client settings
//! (MirrorMaker has no source producer) and reads with its consumers' settings.

use std::fmt;
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde::Serialize;
use strait_dataplane::batch::Record;

use super::translate::select_flow;
use crate::cluster::{Cluster, ClusterError, IsolationLevel, TopicPartition};
use crate::config::Mm2Config;
use crate::duties::offsets::{OffsetsError, cluster_for};
use crate::offsets::mapping::Translation;
use crate::store::progress;
use crate::store::records::{self, StoredRecord};
use crate::verify::compare::{Field, differing_field};

/// How long `strait smoke` waits for the record on the target, and then for strait's stored
/// progress past it, by default.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(60);

/// The header that carries the smoke record's id.
pub const HEADER: &str = "strait.smoke";

/// How often the target is polled.
const POLL: Duration = Duration::from_millis(100);

/// What to smoke-test.
#[derive(Debug, Clone)]
pub struct SmokeOptions {
    /// The flow (`source->target`); default the only enabled flow.
    pub flow: Option<String>,
    /// The source topic the record is produced to (the flow must replicate it).
    pub topic: String,
    pub partition: i32,
    /// The bound on each wait (the record on the target; the stored progress past it).
    pub wait: Duration,
}

/// Why the smoke test could not run.
#[derive(Debug, thiserror::Error)]
pub enum SmokeError {
    #[error(transparent)]
    Offsets(#[from] OffsetsError),
    /// The flow's filters (or the replication policy) leave the topic out.
    #[error(
        "flow {flow} does not replicate topic {topic} (its topics / topics.exclude filters or the replication policy leave it out): name a topic the flow copies"
    )]
    NotReplicated { flow: String, topic: String },
}

/// What `strait smoke` prints.
#[derive(Debug, Clone, Serialize)]
pub struct SmokeReport {
    pub flow: String,
    /// `topic-partition` on the source, and the remote one on the target.
    pub source: String,
    pub target: String,
    /// The record's id (its key, and the value of its `strait.smoke` header).
    pub id: String,
    /// Where the source put it.
    pub source_offset: i64,
    /// Where it was found on the target; `None` when it did not arrive within the wait.
    pub target_offset: Option<i64>,
    /// From the source's acknowledgement to the record read on the target (polled every
    /// 100 ms).
    pub latency_ms: Option<u64>,
    /// The first field of the copy that differs from what was produced.
    pub differing_field: Option<Field>,
    /// Where strait's stored exact mapping puts the record, once its stored progress passed it.
    pub mapped_offset: Option<i64>,
    /// From the source's acknowledgement to strait's stored progress past the record.
    pub stored_after_ms: Option<u64>,
    /// Why it failed, in words.
    pub problem: Option<String>,
}

impl SmokeReport {
    /// Arrived, identical, and where the stored mapping says.
    pub fn ok(&self) -> bool {
        self.problem.is_none()
    }
}

/// Runs the smoke test.
pub async fn smoke_command(
    cfg: &Mm2Config,
    opts: &SmokeOptions,
) -> Result<SmokeReport, SmokeError> {
    let flow = select_flow(cfg, opts.flow.as_deref())?;
    let name = flow.name();
    if !flow.should_replicate_topic(&opts.topic) {
        return Err(SmokeError::NotReplicated {
            flow: name,
            topic: opts.topic.clone(),
        });
    }
    let c = &flow.clients;
    // No MirrorMaker client produces to the source: the source admin client's settings do.
    let producer = cluster_for(&name, "source admin", &c.source_admin.client)?;
    let source = cluster_for(&name, "source consumer", &c.source_consumer.client)?;
    let target = cluster_for(&name, "target consumer", &c.target_consumer.client)?;
    let source_tp = TopicPartition::new(&opts.topic, opts.partition);
    let target_tp = TopicPartition::new(flow.remote_topic(&opts.topic), opts.partition);
    let err = |what: &'static str| OffsetsError::cluster(&name, what.into());
    // Where the target ends now: the copy comes after it.
    let from = end(&target, &target_tp)
        .await
        .map_err(err("reading the remote partition's end on the target"))?;
    let id = uuid::Uuid::new_v4().simple().to_string();
    let produced = smoke_record(&id);
    let source_offset = records::produce(&producer, &opts.topic, opts.partition, &[produced])
        .await
        .map_err(err("producing the smoke record to the source"))?;
    let acked = Instant::now();
    let mut report = SmokeReport {
        flow: name.clone(),
        source: source_tp.to_string(),
        target: target_tp.to_string(),
        id: id.clone(),
        source_offset,
        target_offset: None,
        latency_ms: None,
        differing_field: None,
        mapped_offset: None,
        stored_after_ms: None,
        problem: None,
    };
    let Some(copy) = await_copy(&target, &target_tp, from, &id, acked + opts.wait).await else {
        report.problem = Some(format!(
            "not on the target within {} s: is strait running this flow? (`strait ctl status`)",
            opts.wait.as_secs()
        ));
        return Ok(report);
    };
    report.target_offset = Some(copy.offset);
    report.latency_ms = Some(acked.elapsed().as_millis() as u64);
    // What the source holds is what was produced (read back, so that the comparison is the
    // one verify makes, broker-assigned fields included).
    let original = records::read_chunk(
        &source,
        &source_tp,
        source_offset,
        IsolationLevel::ReadCommitted,
        64 * 1024,
    )
    .await
    .map_err(err("reading the smoke record back from the source"))?
    .0
    .into_iter()
    .find(|r| r.offset == source_offset);
    report.differing_field = original.as_ref().and_then(|o| differing_field(o, &copy));
    let mapped = await_mapping(
        &target,
        &flow.source,
        &source_tp,
        source_offset,
        acked + opts.wait,
    )
    .await;
    report.stored_after_ms = mapped.map(|_| acked.elapsed().as_millis() as u64);
    report.mapped_offset = mapped;
    report.problem = problem(original.is_some(), &report, copy.offset, opts.wait);
    Ok(report)
}

/// What is wrong, if anything, once the copy was found at `copy_offset`.
fn problem(
    original_found: bool,
    r: &SmokeReport,
    copy_offset: i64,
    wait: Duration,
) -> Option<String> {
    let source_offset = r.source_offset;
    match (original_found, r.differing_field, r.mapped_offset) {
        (false, _, _) => Some(format!(
            "the smoke record is no longer at source offset {source_offset}"
        )),
        (_, Some(f), _) => Some(format!("the copy's {f} differs from what was produced")),
        (_, None, None) => Some(format!(
            "strait's stored progress did not pass source offset {source_offset} within {} s (or its stored mapping does not place it exactly)",
            wait.as_secs()
        )),
        (_, None, Some(m)) if m != copy_offset => Some(format!(
            "the stored mapping puts source offset {source_offset} at target offset {m}, but the copy is at {copy_offset}"
        )),
        _ => None,
    }
}

/// The stamped record: key and header carry `id`, the value says when and who.
fn smoke_record(id: &str) -> Record {
    let now = crate::time::wall_ms();
    let mut r = Record::new(
        now,
        Some(Bytes::from(format!("strait-smoke-{id}"))),
        Some(Bytes::from(format!(
            "strait smoke test {id}, produced at {now} ms since the epoch"
        ))),
    );
    r.headers.push((
        Bytes::from_static(HEADER.as_bytes()),
        Some(Bytes::from(id.to_string())),
    ));
    r
}

/// The end (read_committed) of `tp`.
async fn end(cluster: &Cluster, tp: &TopicPartition) -> Result<i64, ClusterError> {
    let mut ends = super::end_offsets(
        cluster,
        std::slice::from_ref(tp),
        IsolationLevel::ReadCommitted,
    )
    .await?;
    Ok(ends.remove(tp).unwrap_or(0))
}

/// Reads `tp` from `from` until the record whose header carries `id` shows up, or `deadline`.
/// Read errors are retried until the deadline (the target may be failing over itself).
async fn await_copy(
    target: &Cluster,
    tp: &TopicPartition,
    from: i64,
    id: &str,
    deadline: Instant,
) -> Option<StoredRecord> {
    let mut pos = from;
    while Instant::now() < deadline {
        let end = match end(target, tp).await {
            Ok(e) => e,
            Err(e) => {
                tracing::debug!(partition = %tp, error = %e, "smoke: cannot read the target's end; retrying");
                tokio::time::sleep(POLL).await;
                continue;
            }
        };
        while pos < end {
            match records::read_chunk(target, tp, pos, IsolationLevel::ReadCommitted, 1 << 20).await
            {
                Ok((recs, next)) => {
                    if let Some(r) = recs.into_iter().find(|r| carries(r, id)) {
                        return Some(r);
                    }
                    pos = next;
                }
                Err(e) => {
                    tracing::debug!(partition = %tp, error = %e, "smoke: cannot read the target; retrying");
                    break;
                }
            }
        }
        tokio::time::sleep(POLL).await;
    }
    None
}

fn carries(r: &StoredRecord, id: &str) -> bool {
    r.headers
        .iter()
        .any(|(k, v)| k.as_ref() == HEADER.as_bytes() && v.as_deref() == Some(id.as_bytes()))
}

/// Once strait's stored progress of `tp` passes `offset`: where its stored mapping puts it.
async fn await_mapping(
    target: &Cluster,
    source_alias: &str,
    tp: &TopicPartition,
    offset: i64,
    deadline: Instant,
) -> Option<i64> {
    loop {
        let (stored, mappings) = progress::read_stored_with_mappings(
            target,
            source_alias,
            crate::offsets::mapping::DEFAULT_MAX_SEGMENTS,
        )
        .await;
        let passed = stored.get(tp).is_some_and(|e| e.next_offset > offset);
        if passed {
            return match mappings.get(tp).map(|m| m.translate(offset)) {
                Some(Translation::Exact(t)) => Some(t),
                _ => None,
            };
        }
        if Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

impl fmt::Display for SmokeReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let opt = |o: Option<i64>| o.map_or("-".to_string(), |v| v.to_string());
        writeln!(f, "smoke record {} (flow {})", self.id, self.flow)?;
        writeln!(
            f,
            "  produced   {} offset {}",
            self.source, self.source_offset
        )?;
        match (self.target_offset, self.latency_ms) {
            (Some(t), Some(ms)) => {
                writeln!(f, "  copied to  {} offset {t} after {ms} ms", self.target)?
            }
            _ => writeln!(f, "  copied to  {}: not found", self.target)?,
        }
        writeln!(
            f,
            "  fields     {}",
            match (self.target_offset, self.differing_field) {
                (None, _) => "-".to_string(),
                (Some(_), None) => "key, value, headers, timestamp identical".to_string(),
                (Some(_), Some(field)) => format!("{field} differs"),
            }
        )?;
        writeln!(
            f,
            "  mapping    stored progress past it after {} ms; maps source offset {} to target offset {}",
            self.stored_after_ms
                .map_or("-".to_string(), |v| v.to_string()),
            self.source_offset,
            opt(self.mapped_offset)
        )?;
        match &self.problem {
            None => writeln!(
                f,
                "OK: the record reached the target identical, where the stored mapping says"
            ),
            Some(p) => writeln!(f, "FAILED: {p}"),
        }
    }
}
