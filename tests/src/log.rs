//! Reading a whole partition back with our own Fetch and batch decoder, to compare what strait
//! wrote with what Kafka's producer wrote: batch by batch (raw bytes) and record by record.
//!
//! Reads are read_uncommitted up to the high watermark: every data batch, aborted or not, and
//! every control batch, exactly as the log holds them. Tests decide what they expect from that.

use std::collections::BTreeMap;

use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{BrokerId, FetchRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use strait_control::cluster::{
    Cluster, IsolationLevel, NewTopic, OffsetSpec, RetryConfig, TopicPartition,
};
use strait_control::store::records::TxnResolver;
use strait_dataplane::batch::{BatchWalker, RawBatch, RecordHeader, decode_records};
use strait_dataplane::io::IoBackend;

use crate::{Testbed, setup};

/// Bound on what one test read decompresses per batch.
const MAX_DECOMPRESSED_BYTES: usize = 64 * 1024 * 1024;
/// Bytes asked for per fetch.
const FETCH_BYTES: i32 = 4 * 1024 * 1024;

/// One record as the log holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogRecord {
    pub offset: i64,
    pub timestamp: i64,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub headers: Vec<RecordHeader>,
}

impl LogRecord {
    /// The record without its offset: what must survive replication.
    pub fn content(&self) -> (i64, Option<&Bytes>, Option<&Bytes>, &[RecordHeader]) {
        (
            self.timestamp,
            self.key.as_ref(),
            self.value.as_ref(),
            &self.headers,
        )
    }

    /// The value as text (lossy), "" for null.
    pub fn value_str(&self) -> String {
        self.value
            .as_ref()
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .unwrap_or_default()
    }
}

fn run<F: std::future::Future>(fut: F) -> F::Output {
    strait_dataplane::io::block_on(IoBackend::Epoll, fut).expect("an epoll runtime starts")
}

/// A client of the cluster at `addr`: one address, or a comma-separated bootstrap list.
fn cluster(addr: &str) -> Cluster {
    let tb = Testbed::load();
    Cluster::new(
        "test",
        addr.split(',').map(str::to_string).collect(),
        setup(tb.plaintext(), IoBackend::Epoll),
        RetryConfig::default(),
    )
}

/// Creates `topic` with `partitions` partitions (replication factor 1) and topic `configs`.
pub fn create_topic(addr: &str, topic: &str, partitions: i32, configs: &[(&str, &str)]) {
    run(async {
        let new = configs.iter().fold(
            NewTopic::new(topic, partitions).replication_factor(1),
            |t, (k, v)| t.config(k, v),
        );
        cluster(addr)
            .create_topic(new, 30_000)
            .await
            .unwrap_or_else(|e| panic!("create {topic} on {addr}: {e}"));
    })
}

/// `(log start, high watermark)` of every partition of `topic`, by partition; `None` when the
/// topic does not exist (yet).
pub fn try_offsets(addr: &str, topic: &str) -> Option<Vec<(i64, i64)>> {
    run(async {
        let c = cluster(addr);
        let md = c
            .refresh_metadata(Some(&[topic]))
            .await
            .unwrap_or_else(|e| panic!("metadata of {topic} on {addr}: {e}"));
        let t = md.topics.get(topic)?;
        let tps: Vec<TopicPartition> = (0..t.partitions.len() as i32)
            .map(|p| TopicPartition::new(topic, p))
            .collect();
        let lo = c
            .list_offsets(&tps, OffsetSpec::Earliest, IsolationLevel::ReadUncommitted)
            .await;
        let hi = c
            .list_offsets(&tps, OffsetSpec::Latest, IsolationLevel::ReadUncommitted)
            .await;
        let mut out = Vec::new();
        for tp in &tps {
            // A topic created a moment ago may not have leaders yet.
            let (Some(Ok(l)), Some(Ok(h))) = (lo.get(tp), hi.get(tp)) else {
                return None;
            };
            out.push((*l, *h));
        }
        Some(out)
    })
}

/// `(log start, high watermark)` of every partition of `topic`, by partition.
pub fn offsets(addr: &str, topic: &str) -> Vec<(i64, i64)> {
    try_offsets(addr, topic).unwrap_or_else(|| panic!("{topic} does not exist on {addr}"))
}

/// The next source offset strait's progress store on cluster `addr` holds for each partition
/// of flows from `source_alias`.
pub fn stored_progress(addr: &str, source_alias: &str) -> BTreeMap<TopicPartition, i64> {
    run(async {
        let c = cluster(addr);
        let store = strait_control::store::progress::ProgressStore::open(&c, source_alias, 1)
            .await
            .unwrap_or_else(|e| panic!("progress of {source_alias} on {addr}: {e}"));
        store
            .entries()
            .iter()
            .map(|(tp, e)| (tp.clone(), e.next_offset))
            .collect()
    })
}

/// Every batch of `topic`-`partition` from its log start to its high watermark, in order,
/// control batches included. Panics (the test fails) on any error or a corrupt batch.
pub fn read_batches(addr: &str, topic: &str, partition: i32) -> Vec<RawBatch> {
    run(async {
        let c = cluster(addr);
        let tp = TopicPartition::new(topic, partition);
        let ask = |spec| {
            let c = &c;
            let tp = tp.clone();
            async move {
                c.list_offsets(
                    std::slice::from_ref(&tp),
                    spec,
                    IsolationLevel::ReadUncommitted,
                )
                .await
                .into_values()
                .next()
                .expect("one answer per partition")
                .unwrap_or_else(|e| panic!("offsets of {tp} on {addr}: {e}"))
            }
        };
        let mut position = ask(OffsetSpec::Earliest).await;
        let end = ask(OffsetSpec::Latest).await;
        let mut out = Vec::new();
        while position < end {
            let conn = c
                .leader_conn(&tp, "Fetch")
                .await
                .unwrap_or_else(|e| panic!("leader of {tp} on {addr}: {e}"));
            let req = FetchRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_max_wait_ms(100)
                .with_min_bytes(1)
                .with_max_bytes(FETCH_BYTES)
                .with_isolation_level(0)
                .with_session_epoch(-1)
                .with_topics(vec![
                    FetchTopic::default()
                        .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
                        .with_partitions(vec![
                            FetchPartition::default()
                                .with_partition(partition)
                                .with_current_leader_epoch(-1)
                                .with_fetch_offset(position)
                                .with_last_fetched_epoch(-1)
                                .with_log_start_offset(-1)
                                .with_partition_max_bytes(FETCH_BYTES),
                        ]),
                ]);
            let resp = conn
                .call(&req)
                .await
                .unwrap_or_else(|e| panic!("fetch {tp} at {position} on {addr}: {e}"));
            let pd = resp
                .responses
                .into_iter()
                .flat_map(|t| t.partitions)
                .find(|p| p.partition_index == partition)
                .unwrap_or_else(|| panic!("the fetch response of {addr} does not mention {tp}"));
            assert_eq!(
                pd.error_code, 0,
                "fetch {tp} at {position} on {addr}: error code {}",
                pd.error_code
            );
            let before = position;
            for b in BatchWalker::new(pd.records.unwrap_or_default()) {
                let b = b.unwrap_or_else(|e| panic!("{tp} on {addr}: bad batch: {e}"));
                b.verify_crc()
                    .unwrap_or_else(|e| panic!("{tp} on {addr} at {}: {e}", b.base_offset()));
                if b.next_offset() <= position || b.base_offset() >= end {
                    continue;
                }
                position = b.next_offset();
                out.push(b);
            }
            assert!(
                position > before,
                "no progress reading {tp} on {addr} at offset {position} (end {end})"
            );
        }
        out
    })
}

/// The data records of `batches` (control batches left out), in log order.
pub fn records_of(batches: &[RawBatch]) -> Vec<LogRecord> {
    let mut out = Vec::new();
    for b in batches.iter().filter(|b| !b.is_control()) {
        let base = b.base_offset();
        let records = decode_records(b, MAX_DECOMPRESSED_BYTES)
            .unwrap_or_else(|e| panic!("cannot decode the batch at {base}: {e}"));
        out.extend(records.into_iter().map(|r| LogRecord {
            offset: r.offset(base),
            timestamp: r.timestamp,
            key: r.key,
            value: r.value,
            headers: r.headers,
        }));
    }
    out
}

/// The records of `batches` (a partition's whole log, in order) a read_committed consumer
/// sees: transactions resolved by their markers, aborted ones left out (strait's
/// [`TxnResolver`]).
pub fn committed_records_of(batches: &[RawBatch]) -> Vec<LogRecord> {
    let mut resolver = TxnResolver::default();
    let mut out = Vec::new();
    for b in batches {
        resolver
            .push(b, i64::MIN, i64::MAX, |r| {
                out.push(LogRecord {
                    offset: r.offset,
                    timestamp: r.timestamp,
                    key: r.key,
                    value: r.value,
                    headers: r.headers,
                });
            })
            .unwrap_or_else(|e| panic!("cannot decode the batch at {}: {e}", b.base_offset()));
    }
    out
}

/// Every record of `topic`-`partition` a read_committed consumer sees (see [`read_batches`]).
pub fn read_committed_records(addr: &str, topic: &str, partition: i32) -> Vec<LogRecord> {
    committed_records_of(&read_batches(addr, topic, partition))
}

/// Every data record of `topic`-`partition` (see [`read_batches`]).
pub fn read_records(addr: &str, topic: &str, partition: i32) -> Vec<LogRecord> {
    records_of(&read_batches(addr, topic, partition))
}

/// Every data record of every partition of `topic`, by partition.
pub fn read_topic(addr: &str, topic: &str) -> BTreeMap<i32, Vec<LogRecord>> {
    let n = offsets(addr, topic).len() as i32;
    (0..n).map(|p| (p, read_records(addr, topic, p))).collect()
}

/// Compares two partitions record by record (timestamp, key, value, headers, order) and panics
/// with the first difference.
pub fn assert_same_records(what: &str, expected: &[LogRecord], actual: &[LogRecord]) {
    for (i, (e, a)) in expected.iter().zip(actual).enumerate() {
        assert!(
            e.content() == a.content(),
            "{what}: record {i} differs (source offset {}, target offset {}):\n expected {e:?}\n   actual {a:?}",
            e.offset,
            a.offset
        );
    }
    assert_eq!(
        expected.len(),
        actual.len(),
        "{what}: {} records expected, {} found",
        expected.len(),
        actual.len()
    );
}
