//! Reading and writing the small internal topics the control plane owns (progress, offset
//! syncs, checkpoints, heartbeats, MM2's Connect offsets): whole-partition reads and keyed
//! writes, routed to partition leaders through the admin client.
//!
//! Volumes are tiny next to the data plane, so simplicity wins: writes are one batch per call,
//! acks=all, without idempotence (every internal topic here is read "last value per key wins",
//! so a retried duplicate is harmless).

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::{ApiKey, BrokerId, FetchRequest, ProduceRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use std::collections::HashMap;

use strait_dataplane::batch::{
    BatchBuilder, BatchWalker, Compression, ControlType, RawBatch, Record, decode_records,
};
use strait_dataplane::wire::WireError;
use strait_dataplane::wire::produce::{PartitionBatch, TopicBatches, encode_produce_body};

use crate::cluster::{Cluster, ClusterError, Context, IsolationLevel, OffsetSpec, TopicPartition};

/// A record read back from a topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredRecord {
    pub offset: i64,
    pub timestamp: i64,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub headers: Vec<strait_dataplane::batch::RecordHeader>,
    /// The batch's timestamp type (the record timestamp is the producer's either way).
    pub timestamp_type: strait_dataplane::batch::TimestampType,
}

/// Bound on what one internal-topic read may decompress per batch.
const MAX_DECOMPRESSED_BYTES: usize = 64 * 1024 * 1024;

/// Appends `records` to `topic`-`partition` in one batch. Returns the base offset.
pub async fn produce(
    cluster: &Cluster,
    topic: &str,
    partition: i32,
    records: &[Record],
) -> Result<i64, ClusterError> {
    if records.is_empty() {
        return Ok(-1);
    }
    let batch = BatchBuilder::new(Compression::None)
        .push_all(records)
        .and_then(|b| b.build())
        .map_err(|e| ClusterError::Invalid {
            context: Box::new(Context::new(cluster.alias(), "Produce").topic(topic)),
            message: format!("cannot encode records: {e}"),
        })?;
    produce_batch(cluster, topic, partition, &batch).await
}

/// Appends one built v2 batch (any codec; idempotent when the batch carries a producer id and
/// sequence) to `topic`-`partition`, acks=all, resent on retriable errors. Returns the base
/// offset. Public for `strait-bench load`, which builds its own batches.
pub async fn produce_batch(
    cluster: &Cluster,
    topic: &str,
    partition: i32,
    batch: &Bytes,
) -> Result<i64, ClusterError> {
    produce_batch_as(cluster, None, topic, partition, batch).await
}

/// Appends one built transactional batch (carrying `producer`'s id and epoch, a sequence, and
/// the transactional bit) to `topic`-`partition` inside `producer`'s open transaction; the
/// partition must have been added to it (`Cluster::add_partitions_to_txn`). Returns the base
/// offset.
pub async fn produce_batch_in_txn(
    cluster: &Cluster,
    producer: &crate::cluster::txn::TxnProducer,
    topic: &str,
    partition: i32,
    batch: &Bytes,
) -> Result<i64, ClusterError> {
    produce_batch_as(
        cluster,
        Some(&producer.transactional_id),
        topic,
        partition,
        batch,
    )
    .await
}

async fn produce_batch_as(
    cluster: &Cluster,
    transactional_id: Option<&str>,
    topic: &str,
    partition: i32,
    batch: &Bytes,
) -> Result<i64, ClusterError> {
    let header_len = strait_dataplane::batch::HEADER_LEN;
    if batch.len() < header_len {
        return Err(ClusterError::Invalid {
            context: Box::new(Context::new(cluster.alias(), "Produce").topic(topic)),
            message: format!("a batch of {} bytes has no complete header", batch.len()),
        });
    }
    let tp = TopicPartition::new(topic, partition);
    cluster
        .with_retries("Produce", || async {
            let conn = cluster.leader_conn(&tp, "Produce").await?;
            let ctx = Context::new(cluster.alias(), "Produce")
                .broker(conn.broker())
                .topic(topic)
                .partition(partition);
            let version = conn
                .version_for::<ProduceRequest>()
                .map_err(|e| ClusterError::wire(ctx.clone(), e))?;
            let mut head = [0u8; strait_dataplane::batch::HEADER_LEN];
            head.copy_from_slice(&batch[..header_len]);
            let topics = [TopicBatches {
                topic: topic.to_string(),
                partitions: vec![PartitionBatch {
                    partition,
                    head,
                    payload: batch.slice(header_len..),
                }],
            }];
            let resp = conn
                .send_encoded(ApiKey::Produce as i16, version, |fb| {
                    encode_produce_body(fb, version, transactional_id, -1, 30_000, &topics).map_err(
                        |m| WireError::Protocol {
                            broker: conn.broker().to_string(),
                            api: "Produce",
                            message: m.to_string(),
                        },
                    )
                })
                .await
                .map_err(|e| ClusterError::wire(ctx.clone(), e))?
                .decode::<ProduceRequest>()
                .await
                .map_err(|e| ClusterError::wire(ctx.clone(), e))?;
            let pr = resp
                .responses
                .iter()
                .flat_map(|t| &t.partition_responses)
                .find(|p| p.index == partition)
                .ok_or_else(|| ClusterError::Invalid {
                    context: Box::new(ctx.clone()),
                    message: "the produce response does not mention the partition".into(),
                })?;
            match ClusterError::kafka(
                ctx,
                pr.error_code,
                pr.error_message.as_ref().map(|m| m.to_string()),
            ) {
                Some(e) => Err(e),
                None => Ok(pr.base_offset),
            }
        })
        .await
}

/// Reads `topic`-`partition` from its start to the end it has when the read begins (the high
/// watermark, or the last stable offset under read_committed), calling `each` per record.
/// Returns that end offset.
pub async fn read_to_end(
    cluster: &Cluster,
    topic: &str,
    partition: i32,
    isolation: IsolationLevel,
    mut each: impl FnMut(StoredRecord),
) -> Result<i64, ClusterError> {
    let tp = TopicPartition::new(topic, partition);
    let (start, end) = log_bounds(cluster, &tp, isolation).await?;
    read_range(cluster, &tp, start, end, isolation, |r| {
        each(r);
        true
    })
    .await?;
    Ok(end)
}

/// `tp`'s log start and end under `isolation` (the end: the high watermark, or the last stable
/// offset under read_committed).
async fn log_bounds(
    cluster: &Cluster,
    tp: &TopicPartition,
    isolation: IsolationLevel,
) -> Result<(i64, i64), ClusterError> {
    let end = cluster
        .list_offsets(std::slice::from_ref(tp), OffsetSpec::Latest, isolation)
        .await
        .into_values()
        .next()
        .unwrap_or_else(|| {
            Err(ClusterError::UnknownTopicOrPartition {
                context: Box::new(
                    Context::new(cluster.alias(), "ListOffsets")
                        .topic(&tp.topic)
                        .partition(tp.partition),
                ),
            })
        })?;
    let start = cluster
        .list_offsets(std::slice::from_ref(tp), OffsetSpec::Earliest, isolation)
        .await
        .into_values()
        .next()
        .transpose()?
        .unwrap_or(0);
    Ok((start, end))
}

/// Reads `topic`-`partition` from its start to the high watermark it has when the read begins
/// under read_uncommitted, resolving transactions itself: `each` gets every record written
/// outside a transaction at once, and a transaction's records when its COMMIT marker is read;
/// records of aborted transactions, and of transactions still open at the high watermark, are
/// never delivered. A read_committed read would stop at the first open transaction (the last
/// stable offset) and hide every committed record after it: exactly-once's progress records
/// share one partition, where other partitions' transactions are open at any moment (or for a
/// whole transaction timeout, after their holder died). Open transactions' records are held
/// until their marker; the internal topics read this way are small. Returns the end read to.
pub async fn read_resolving_transactions(
    cluster: &Cluster,
    topic: &str,
    partition: i32,
    mut each: impl FnMut(StoredRecord),
) -> Result<i64, ClusterError> {
    let tp = TopicPartition::new(topic, partition);
    let isolation = IsolationLevel::ReadUncommitted;
    let (start, end) = log_bounds(cluster, &tp, isolation).await?;
    let mut resolver = TxnResolver::default();
    let mut position = start;
    while position < end {
        let (batches, next) = fetch_once_with(
            cluster,
            &tp,
            position,
            isolation,
            MAX_FETCH_BYTES,
            raw_batches,
        )
        .await?;
        for b in batches {
            resolver
                .push(&b, position, end, &mut each)
                .map_err(|e| ClusterError::Invalid {
                    context: Box::new(
                        Context::new(cluster.alias(), "Fetch")
                            .topic(topic)
                            .partition(partition),
                    ),
                    message: e.to_string(),
                })?;
        }
        if next <= position {
            return Err(no_progress(cluster, &tp, position, Some(end)));
        }
        position = next;
    }
    Ok(end)
}

/// Transactions resolved over a log read in order, as a read_committed consumer sees it:
/// records written outside a transaction at once, a transaction's records at its COMMIT
/// marker, an aborted transaction's never (nor those of a transaction still open when the read
/// ends). Keyed by producer id: a producer has at most one transaction open per partition.
#[derive(Debug, Default)]
pub struct TxnResolver {
    open: HashMap<i64, Vec<StoredRecord>>,
}

impl TxnResolver {
    /// The next batch of the log; `each` gets what it makes visible (records with offsets in
    /// `from..end` only).
    pub fn push(
        &mut self,
        b: &RawBatch,
        from: i64,
        end: i64,
        each: impl FnMut(StoredRecord),
    ) -> Result<(), strait_dataplane::batch::BatchError> {
        if b.last_offset() < from || b.base_offset() >= end {
            return Ok(());
        }
        let pid = b.producer_id();
        if b.is_control() {
            match b.control_type()? {
                Some(ControlType::Commit) => {
                    self.open.remove(&pid).into_iter().flatten().for_each(each);
                }
                Some(ControlType::Abort) => {
                    self.open.remove(&pid);
                }
                // Other control records end no transaction.
                Some(ControlType::Empty | ControlType::Unknown(_)) | None => {}
            }
            return Ok(());
        }
        let records = stored_records(b, from, end)?;
        if b.is_transactional() {
            self.open.entry(pid).or_default().extend(records);
        } else {
            records.into_iter().for_each(each);
        }
        Ok(())
    }
}

/// The records of `b` with offsets in `from..end`.
fn stored_records(
    b: &RawBatch,
    from: i64,
    end: i64,
) -> Result<Vec<StoredRecord>, strait_dataplane::batch::BatchError> {
    let base = b.base_offset();
    let timestamp_type = b.timestamp_type();
    Ok(decode_records(b, MAX_DECOMPRESSED_BYTES)?
        .into_iter()
        .map(|r| StoredRecord {
            offset: r.offset(base),
            timestamp: r.timestamp,
            key: r.key,
            value: r.value,
            headers: r.headers,
            timestamp_type,
        })
        .filter(|r| (from..end).contains(&r.offset))
        .collect())
}

/// Every batch of a fetched record set, and the offset after the last.
fn raw_batches(
    pd: PartitionData,
    offset: i64,
    ctx: &Context,
) -> Result<(Vec<RawBatch>, i64), ClusterError> {
    let mut next = offset;
    let mut out = Vec::new();
    for b in BatchWalker::new(pd.records.unwrap_or_default()) {
        let b = b.map_err(|e| ClusterError::Invalid {
            context: Box::new(ctx.clone()),
            message: e.to_string(),
        })?;
        next = next.max(b.next_offset());
        out.push(b);
    }
    Ok((out, next))
}

/// Reads records of `tp` with offsets in `from..end`, in order, skipping control batches and,
/// under read_committed, aborted transactions (what a consumer, and the data plane, would see).
/// `each` returns false to stop early. Returns the offset after the last record delivered, or
/// where the read stopped.
pub async fn read_range(
    cluster: &Cluster,
    tp: &TopicPartition,
    from: i64,
    end: i64,
    isolation: IsolationLevel,
    mut each: impl FnMut(StoredRecord) -> bool,
) -> Result<i64, ClusterError> {
    let mut position = from;
    while position < end {
        let (records, next) = fetch_once(cluster, tp, position, isolation, MAX_FETCH_BYTES).await?;
        for r in records {
            if r.offset >= position && r.offset < end {
                let offset = r.offset;
                if !each(r) {
                    return Ok(offset + 1);
                }
            }
        }
        if next <= position {
            return Err(no_progress(cluster, tp, position, Some(end)));
        }
        position = next;
    }
    Ok(position.min(end))
}

/// What one fetch of the control plane asks at most (a broker returns the first batch whole
/// even when it is larger).
pub const MAX_FETCH_BYTES: i32 = 8 * 1024 * 1024;

/// One fetch of `tp` at `offset`, up to `max_bytes` (at least the first batch): the records (control batches, and aborted ones
/// under read_committed, left out) and the offset to read next (after the last batch; the log
/// start when `offset` was below it). Fails when it would not advance.
pub async fn read_chunk(
    cluster: &Cluster,
    tp: &TopicPartition,
    offset: i64,
    isolation: IsolationLevel,
    max_bytes: i32,
) -> Result<(Vec<StoredRecord>, i64), ClusterError> {
    let (records, next) = fetch_once(cluster, tp, offset, isolation, max_bytes).await?;
    if next <= offset {
        return Err(no_progress(cluster, tp, offset, None));
    }
    Ok((records, next))
}

/// A read of `tp` at `offset` (towards `end`, when bounded) that would not advance.
fn no_progress(
    cluster: &Cluster,
    tp: &TopicPartition,
    offset: i64,
    end: Option<i64>,
) -> ClusterError {
    let end = end.map(|e| format!(" (end {e})")).unwrap_or_default();
    ClusterError::Invalid {
        context: Box::new(
            Context::new(cluster.alias(), "Fetch")
                .topic(&tp.topic)
                .partition(tp.partition),
        ),
        message: format!("no progress reading at offset {offset}{end}"),
    }
}

/// One fetch at `offset` (a long poll of at most 100 ms): the records and the next offset to
/// read, which is `offset` itself when nothing new arrived. Public for `strait-bench load`,
/// which polls the end of a topic.
pub async fn fetch_once(
    cluster: &Cluster,
    tp: &TopicPartition,
    offset: i64,
    isolation: IsolationLevel,
    max_bytes: i32,
) -> Result<(Vec<StoredRecord>, i64), ClusterError> {
    fetch_once_with(
        cluster,
        tp,
        offset,
        isolation,
        max_bytes,
        |pd, offset, ctx| decode_partition(pd, offset, isolation, ctx),
    )
    .await
}

/// One fetch at `offset`, its partition's answer taken apart by `decode` (which returns what
/// it found and the offset to read next).
async fn fetch_once_with<T: Default>(
    cluster: &Cluster,
    tp: &TopicPartition,
    offset: i64,
    isolation: IsolationLevel,
    max_bytes: i32,
    decode: impl Fn(PartitionData, i64, &Context) -> Result<(T, i64), ClusterError>,
) -> Result<(T, i64), ClusterError> {
    cluster
        .with_retries("Fetch", || async {
            let conn = cluster.leader_conn(tp, "Fetch").await?;
            let ctx = Context::new(cluster.alias(), "Fetch")
                .broker(conn.broker())
                .topic(&tp.topic)
                .partition(tp.partition);
            let resp = conn
                .call(&fetch_request(tp, offset, isolation, max_bytes))
                .await
                .map_err(|e| ClusterError::wire(ctx.clone(), e))?;
            let pd = resp
                .responses
                .into_iter()
                .flat_map(|t| t.partitions)
                .find(|p| p.partition_index == tp.partition)
                .ok_or_else(|| ClusterError::Invalid {
                    context: Box::new(ctx.clone()),
                    message: "the fetch response does not mention the partition".into(),
                })?;
            if let Some(e) = ClusterError::kafka(ctx.clone(), pd.error_code, None) {
                if e.is(ResponseError::OffsetOutOfRange) {
                    // Compaction or retention moved the start: continue from there.
                    return Ok((T::default(), pd.log_start_offset.max(offset + 1)));
                }
                return Err(e);
            }
            decode(pd, offset, &ctx)
        })
        .await
}

/// A fetch of one partition from `offset`, up to `max_bytes`.
fn fetch_request(
    tp: &TopicPartition,
    offset: i64,
    isolation: IsolationLevel,
    max_bytes: i32,
) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(100)
        .with_min_bytes(1)
        .with_max_bytes(max_bytes)
        .with_isolation_level(isolation.wire())
        .with_session_epoch(-1)
        .with_topics(vec![
            FetchTopic::default()
                .with_topic(TopicName(StrBytes::from_string(tp.topic.clone())))
                .with_partitions(vec![
                    FetchPartition::default()
                        .with_partition(tp.partition)
                        .with_current_leader_epoch(-1)
                        .with_fetch_offset(offset)
                        .with_last_fetched_epoch(-1)
                        .with_log_start_offset(-1)
                        .with_partition_max_bytes(max_bytes),
                ]),
        ])
}

/// The data records of a partition's fetched record set (control batches, and aborted ones
/// under read_committed, left out) and the offset after the last batch.
fn decode_partition(
    pd: PartitionData,
    offset: i64,
    isolation: IsolationLevel,
    ctx: &Context,
) -> Result<(Vec<StoredRecord>, i64), ClusterError> {
    let invalid = |message: String| ClusterError::Invalid {
        context: Box::new(ctx.clone()),
        message,
    };
    let mut out = Vec::new();
    let mut next = offset;
    let aborted: Vec<(i64, i64)> = pd
        .aborted_transactions
        .unwrap_or_default()
        .into_iter()
        .map(|a| (a.producer_id.0, a.first_offset))
        .collect();
    let mut filter = strait_dataplane::batch::AbortedFilter::new(aborted);
    for b in BatchWalker::new(pd.records.unwrap_or_default()) {
        let b = b.map_err(|e| invalid(e.to_string()))?;
        next = next.max(b.next_offset());
        let verdict = if isolation == IsolationLevel::ReadCommitted {
            filter.classify(&b).map_err(|e| invalid(e.to_string()))?
        } else if b.is_control() {
            strait_dataplane::batch::Verdict::DropControl
        } else {
            strait_dataplane::batch::Verdict::Forward
        };
        if verdict != strait_dataplane::batch::Verdict::Forward {
            continue;
        }
        out.extend(stored_records(&b, i64::MIN, i64::MAX).map_err(|e| invalid(e.to_string()))?);
    }
    // A batch larger than our max bytes would stall us: the broker still returns it whole
    // as the first batch, so `next` always advances when records exist.
    Ok((out, next))
}

#[cfg(test)]
mod tests {
    use super::*;
    use strait_dataplane::batch::records::{BatchBuilder, end_txn_marker};
    use strait_dataplane::batch::{Compression, Record};

    /// A data batch at `base` of `values`, by producer `pid` (in a transaction or not).
    fn data(base: i64, pid: i64, transactional: bool, values: &[&str]) -> RawBatch {
        let mut b = BatchBuilder::new(Compression::None)
            .base_offset(base)
            .producer(pid, 0, 0)
            .transactional(transactional);
        for v in values {
            b.push(&Record::new(0, None, Some(Bytes::from(v.to_string()))))
                .unwrap();
        }
        RawBatch::new(b.build().unwrap()).unwrap()
    }

    fn marker(kind: ControlType, base: i64, pid: i64) -> RawBatch {
        RawBatch::new(end_txn_marker(kind, base, pid, 0, 0)).unwrap()
    }

    fn visible(log: &[RawBatch], from: i64, end: i64) -> Vec<(i64, String)> {
        let mut r = TxnResolver::default();
        let mut out = Vec::new();
        for b in log {
            r.push(b, from, end, |s| {
                let v = s
                    .value
                    .as_deref()
                    .map(|v| String::from_utf8_lossy(v).into_owned());
                out.push((s.offset, v.unwrap_or_default()));
            })
            .unwrap();
        }
        out
    }

    #[test]
    fn committed_records_show_at_their_marker_and_aborted_ones_never() {
        let log = [
            data(0, 7, true, &["a0", "a1"]),
            data(2, 9, false, &["plain"]),
            data(3, 8, true, &["b0"]),
            marker(ControlType::Abort, 4, 8),
            data(5, 7, true, &["a2"]),
            marker(ControlType::Commit, 6, 7),
            data(7, 8, true, &["b1"]),
            marker(ControlType::Commit, 8, 8),
            // Open when the read ends: not shown.
            data(9, 7, true, &["open"]),
        ];
        let all = visible(&log, 0, 10);
        assert_eq!(
            all,
            [
                (2, "plain".to_string()),
                (0, "a0".to_string()),
                (1, "a1".to_string()),
                (5, "a2".to_string()),
                (7, "b1".to_string()),
            ]
        );
        // A read from offset 1 to 8: a1 and a2 of the committed transaction, nothing of the
        // one whose marker is past the end.
        let part: Vec<String> = visible(&log, 1, 8).into_iter().map(|(_, v)| v).collect();
        assert_eq!(part, ["plain", "a1", "a2"]);
    }
}
