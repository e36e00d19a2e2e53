//! The transaction calls of the admin client (`control/src/cluster/txn.rs`) against the real
//! test bed's target: what exactly-once forwarding builds on. A forwarded batch (the fast
//! path's header rewrite with the transactional bit) and a progress record go into one
//! transaction; Kafka's own console consumer decides what read_committed shows.

use bytes::Bytes;
use kafka_protocol::ResponseError;
use std::time::Duration;
use strait_control::cluster::txn::{TxnEnd, TxnProducer};

use strait_control::cluster::{Cluster, IsolationLevel, NewTopic, RetryConfig, TopicPartition};
use strait_control::offsets::mapping::{DEFAULT_MAX_SEGMENTS, OffsetMapping};
use strait_control::store::progress::{Entry, ProgressStore, read_stored};
use strait_control::store::records::{self, produce_batch_in_txn};
use strait_dataplane::batch::compression::Compression;
use strait_dataplane::batch::{BatchBuilder, HeaderRewrite, RawBatch, Record};
use strait_dataplane::io::IoBackend;
use strait_tests::{Testbed, kafka_tool_ok, setup, unique};

/// Now: records with old timestamps would be deleted by the topic's retention at once.
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as i64
}

fn target() -> Cluster {
    let tb = Testbed::get();
    Cluster::new(
        "target",
        vec![tb.target().to_string()],
        setup(tb.plaintext(), IoBackend::Epoll),
        RetryConfig::default(),
    )
}

/// A batch as a source broker returns it: written by some other (transactional) producer at
/// some offset, one record per value.
fn source_batch(values: &[&str]) -> RawBatch {
    let records: Vec<Record> = values
        .iter()
        .map(|v| Record::new(now_ms(), None, Some(Bytes::from(v.to_string()))))
        .collect();
    let bytes = BatchBuilder::new(Compression::Lz4)
        .base_offset(5_000)
        .producer(31, 4, 77)
        .transactional(true)
        .push_all(&records)
        .and_then(|b| b.build())
        .expect("batch builds");
    RawBatch::new(bytes).expect("batch parses")
}

/// Forwards `values` as the fast path does, in `p`'s transaction, from sequence `seq`.
async fn forward(c: &Cluster, p: &TxnProducer, topic: &str, seq: i32, values: &[&str]) {
    let batch = source_batch(values);
    let fwd = HeaderRewrite {
        producer_id: p.producer_id,
        producer_epoch: p.producer_epoch,
        base_sequence: seq,
        transactional: true,
    }
    .forward(&batch);
    produce_batch_in_txn(c, p, topic, 0, &fwd.to_bytes())
        .await
        .unwrap_or_else(|e| panic!("forward {values:?}: {e}"));
}

/// A progress record in `p`'s transaction, built as the control plane builds its records.
async fn progress(c: &Cluster, p: &TxnProducer, topic: &str, seq: i32, value: &str) {
    let bytes = BatchBuilder::new(Compression::None)
        .producer(p.producer_id, p.producer_epoch, seq)
        .transactional(true)
        .push_all(&[Record::new(
            now_ms(),
            Some(Bytes::from_static(b"k")),
            Some(Bytes::from(value.to_string())),
        )])
        .and_then(|b| b.build())
        .expect("batch builds");
    produce_batch_in_txn(c, p, topic, 0, &bytes)
        .await
        .unwrap_or_else(|e| panic!("progress {value}: {e}"));
}

/// Every value of `topic` as Kafka's console consumer reads it at `isolation`.
fn values(topic: &str, isolation: &str, expected: usize) -> Vec<String> {
    let out = kafka_tool_ok(
        "kafka-console-consumer",
        &[
            "--bootstrap-server",
            Testbed::get().target(),
            "--topic",
            topic,
            "--from-beginning",
            "--isolation-level",
            isolation,
            "--max-messages",
            &expected.to_string(),
            "--timeout-ms",
            "10000",
        ],
        None,
    );
    out.lines().map(str::to_string).collect()
}

#[test]
fn commit_shows_abort_hides_and_a_new_holder_fences_the_old() {
    let data = unique("txn-data");
    let store = unique("txn-progress");
    let txn_id = unique("strait-eos-test");
    strait_dataplane::io::block_on(IoBackend::Epoll, async {
        let c = target();
        for t in [&data, &store] {
            c.create_topic(NewTopic::new(t, 1), 30_000).await.unwrap();
            c.wait_for_leaders(t, 30_000).await.unwrap();
        }
        let both = [
            TopicPartition::new(&data, 0),
            TopicPartition::new(&store, 0),
        ];

        let p1 = c.init_txn_producer(&txn_id, 60_000).await.unwrap();
        // Committed: three records and their progress.
        c.add_partitions_to_txn(&p1, &both).await.unwrap();
        forward(&c, &p1, &data, 0, &["a1", "a2", "a3"]).await;
        progress(&c, &p1, &store, 0, "progress-a").await;
        let bumped = c.end_txn(&p1, TxnEnd::Commit).await.unwrap();
        // The test bed's Kafka 4.1.1 has transaction version 2: KIP-890 part 2 gives every
        // transaction a new epoch, its sequences from 0.
        let p1 = bumped.expect("EndTxn v5 gives the next transaction its epoch");
        // Aborted.
        c.add_partitions_to_txn(&p1, &both).await.unwrap();
        forward(&c, &p1, &data, 0, &["b1", "b2"]).await;
        progress(&c, &p1, &store, 0, "progress-b").await;
        let p1 = c
            .end_txn(&p1, TxnEnd::Abort)
            .await
            .unwrap()
            .expect("a new epoch");
        // Left open, as by a holder that crashed.
        c.add_partitions_to_txn(&p1, &both).await.unwrap();
        forward(&c, &p1, &data, 0, &["c1"]).await;

        // A new holder of the same transactional id: the open transaction is aborted and the
        // old holder is fenced.
        let p2 = c.init_txn_producer(&txn_id, 60_000).await.unwrap();
        assert_eq!(p2.producer_id, p1.producer_id);
        assert!(p2.producer_epoch > p1.producer_epoch, "{p1:?} then {p2:?}");
        let fenced = c
            .add_partitions_to_txn(&p1, &both)
            .await
            .expect_err("the old holder is fenced");
        assert!(
            fenced.is(ResponseError::ProducerFenced)
                || fenced.is(ResponseError::InvalidProducerEpoch),
            "{fenced}"
        );
        let text = fenced.to_string();
        assert!(text.contains(&txn_id), "{text}");
        let ended = c
            .end_txn(&p1, TxnEnd::Commit)
            .await
            .expect_err("the old holder cannot commit");
        assert!(
            ended.is(ResponseError::ProducerFenced)
                || ended.is(ResponseError::InvalidProducerEpoch),
            "{ended}"
        );
        // The new holder starts its sequences at 0 with its epoch.
        c.add_partitions_to_txn(&p2, &both).await.unwrap();
        forward(&c, &p2, &data, 0, &["d1"]).await;
        progress(&c, &p2, &store, 0, "progress-d").await;
        c.end_txn(&p2, TxnEnd::Commit).await.unwrap();
    })
    .expect("runtime starts");

    assert_eq!(values(&data, "read_committed", 4), ["a1", "a2", "a3", "d1"]);
    assert_eq!(
        values(&store, "read_committed", 2),
        ["progress-a", "progress-d"]
    );
    // The aborted records are in the log; only read_committed hides them.
    assert_eq!(
        values(&data, "read_uncommitted", 7),
        ["a1", "a2", "a3", "b1", "b2", "c1", "d1"]
    );
}

/// A plain read_committed read stops at the first open transaction, hiding the committed
/// records after it; the read of strait's progress resolves transactions itself: committed
/// records past an open transaction show, the open and aborted transactions' records do not,
/// and a transaction's records show once it commits.
#[test]
fn a_read_resolving_transactions_is_not_held_up_by_an_open_one() {
    let store = unique("txn-store");
    strait_dataplane::io::block_on(IoBackend::Epoll, async {
        let c = target();
        c.create_topic(NewTopic::new(&store, 1), 30_000)
            .await
            .unwrap();
        c.wait_for_leaders(&store, 30_000).await.unwrap();
        let tp = [TopicPartition::new(&store, 0)];
        let values = || async {
            let mut out: Vec<String> = Vec::new();
            records::read_resolving_transactions(&c, &store, 0, |r| {
                out.push(String::from_utf8_lossy(&r.value.unwrap_or_default()).into_owned())
            })
            .await
            .unwrap();
            out
        };
        // Another partition's transaction, open, then a record written outside any.
        let open = c
            .init_txn_producer(&unique("strait-eos-open"), 60_000)
            .await
            .unwrap();
        c.add_partitions_to_txn(&open, &tp).await.unwrap();
        progress(&c, &open, &store, 0, "in-open-transaction").await;
        let plain = Record::new(now_ms(), None, Some(Bytes::from_static(b"after-it")));
        records::produce(&c, &store, 0, &[plain]).await.unwrap();
        // And one that aborts.
        let aborted = c
            .init_txn_producer(&unique("strait-eos-aborted"), 60_000)
            .await
            .unwrap();
        c.add_partitions_to_txn(&aborted, &tp).await.unwrap();
        progress(&c, &aborted, &store, 0, "aborted").await;
        c.end_txn(&aborted, TxnEnd::Abort).await.unwrap();

        let mut seen = Vec::new();
        records::read_to_end(&c, &store, 0, IsolationLevel::ReadCommitted, |r| {
            seen.push(r.value)
        })
        .await
        .unwrap();
        assert!(
            seen.is_empty(),
            "a plain read stops at the open transaction: {seen:?}"
        );

        assert_eq!(values().await, ["after-it"]);
        c.end_txn(&open, TxnEnd::Commit).await.unwrap();
        // EndTxn answers once the commit is decided; its markers are written just after.
        let want = ["after-it", "in-open-transaction"];
        let until = std::time::Instant::now() + Duration::from_secs(10);
        let mut got = values().await;
        while got != want && std::time::Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(50)).await;
            got = values().await;
        }
        assert_eq!(got, want);
    })
    .expect("runtime starts");
}

/// A partition's progress written inside its transaction: left alone by the periodic flush,
/// invisible to a reader of the store until the transaction commits, and still to write after
/// an abort.
#[test]
fn progress_written_in_a_transaction_is_stored_only_when_it_commits() {
    let source = unique("eos-src");
    strait_dataplane::io::block_on(IoBackend::Epoll, async {
        let c = target();
        let mut store = ProgressStore::open(&c, &source, 1).await.unwrap();
        let store_tp = [TopicPartition::new(store.topic(), 0)];
        let tp = TopicPartition::new("orders", 3);
        let entry = |n: i64| Entry {
            next_offset: n,
            topic_id: [7; 16],
            target_offset: n,
            leader_epoch: 0,
        };
        let mut mappings = OffsetMapping::new(DEFAULT_MAX_SEGMENTS).unwrap();
        store.set_transactional(&tp, true);
        store.update(&tp, entry(10));
        assert_eq!(
            store.flush(&c, now_ms(), &mut mappings).await.unwrap(),
            0,
            "the flush leaves a transactional partition alone"
        );
        let stored = || async {
            read_stored(&c, &source)
                .await
                .get(&tp)
                .map(|e| e.next_offset)
        };

        let p = c
            .init_txn_producer(&unique("strait-eos-progress"), 60_000)
            .await
            .unwrap();
        c.add_partitions_to_txn(&p, &store_tp).await.unwrap();
        let w = store
            .write_in_txn(&c, &tp, &p, 0, now_ms(), &mappings)
            .await
            .unwrap();
        // Transaction version 2 on the test bed: the next transaction has a new epoch and
        // starts its sequences at 0.
        let p = c
            .end_txn(&p, TxnEnd::Abort)
            .await
            .unwrap()
            .expect("a new epoch");
        drop(w);
        assert_eq!(stored().await, None, "aborted");
        assert!(store.is_dirty(), "still to write");

        store.update(&tp, entry(20));
        c.add_partitions_to_txn(&p, &store_tp).await.unwrap();
        let w = store
            .write_in_txn(&c, &tp, &p, 0, now_ms(), &mappings)
            .await
            .unwrap();
        assert_eq!(stored().await, None, "not committed yet");
        c.end_txn(&p, TxnEnd::Commit).await.unwrap();
        store.txn_committed(w, &mut mappings);
        assert!(!store.is_dirty());
        // The markers follow the commit's answer by a moment.
        let until = std::time::Instant::now() + Duration::from_secs(10);
        while stored().await != Some(20) && std::time::Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(stored().await, Some(20));
    })
    .expect("runtime starts");
}
