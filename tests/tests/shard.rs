//! One shard against the real test bed: records written by Kafka's own Java producer are
//! forwarded batch by batch and arrive byte-identical, on both IO drivers.

use std::sync::Arc;
use std::time::{Duration, Instant};

use strait_control::cluster::{Cluster, NewTopic, RetryConfig};
use strait_dataplane::io::IoBackend;
use strait_dataplane::shard::{
    Assignment, ClusterEndpoint, FetchSettings, PartitionKey, ProduceSettings, ShardCommand,
    ShardConfig, ShardEvent, spawn_shard,
};
use strait_tests::{Testbed, backends, kafka_tool_ok, setup, unique};

fn endpoint(alias: &str, addr: &str) -> Arc<ClusterEndpoint> {
    let tb = Testbed::get();
    Arc::new(ClusterEndpoint {
        alias: alias.into(),
        bootstrap: vec![addr.into()],
        config: tb.plaintext(),
        tls: None,
    })
}

fn create(addr: &str, topic: &str, partitions: i32) {
    let tb = Testbed::get();
    strait_dataplane::io::block_on(IoBackend::Epoll, async {
        let c = Cluster::new(
            "x",
            vec![addr.into()],
            setup(tb.plaintext(), IoBackend::Epoll),
            RetryConfig::default(),
        );
        c.create_topic(NewTopic::new(topic, partitions), 30_000)
            .await
            .unwrap();
    })
    .unwrap();
}

/// Console-consumer lines `key\tvalue` of a topic, read committed, up to `n` records.
fn consume(addr: &str, topic: &str, n: usize) -> Vec<String> {
    let out = kafka_tool_ok(
        "kafka-console-consumer",
        &[
            "--bootstrap-server",
            addr,
            "--topic",
            topic,
            "--from-beginning",
            "--max-messages",
            &n.to_string(),
            "--timeout-ms",
            "20000",
            "--property",
            "print.key=true",
            "--property",
            "print.headers=true",
            "--property",
            "print.timestamp=true",
            "--isolation-level",
            "read_committed",
        ],
        None,
    );
    let mut lines: Vec<String> = out.lines().map(str::to_string).collect();
    lines.sort();
    lines
}

#[test]
fn forwards_console_producer_batches_on_both_drivers() {
    let tb = Testbed::get();
    for backend in backends() {
        let topic = unique("shard");
        let remote = format!("A.{topic}");
        create(tb.source(), &topic, 1);
        create(tb.target(), &remote, 1);
        let lines: String = (0..500)
            .map(|i| format!("h{i}:x\tk{i}\tvalue-{i}\n"))
            .collect();
        kafka_tool_ok(
            "kafka-console-producer",
            &[
                "--bootstrap-server",
                tb.source(),
                "--topic",
                &topic,
                "--compression-codec",
                "lz4",
                "--property",
                "parse.key=true",
                "--property",
                "parse.headers=true",
                "--producer-property",
                "linger.ms=50",
            ],
            Some(lines.as_bytes()),
        );

        let (ev_tx, ev_rx) = crossbeam_channel::bounded(64);
        let mut cfg = ShardConfig::new(0, backend);
        cfg.report_interval_ms = 50;
        let shard = spawn_shard(cfg, ev_tx, 16).unwrap();
        let key = PartitionKey::new(0, &topic, 0);
        shard
            .commands
            .send(ShardCommand::Assign(Box::new(Assignment {
                key: key.clone(),
                source: endpoint("A", tb.source()),
                target: endpoint("B", tb.target()),
                target_topic: Arc::from(remote.as_str()),
                start_offset: 0,
                max_message_bytes: 1_048_588,
                fetch: FetchSettings::default(),
                produce: ProduceSettings::default(),
            })))
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut mapped = 0u64;
        loop {
            assert!(
                Instant::now() < deadline,
                "{}: not caught up in time",
                backend.name()
            );
            match ev_rx.recv_timeout(Duration::from_secs(5)) {
                Ok(ShardEvent::Report {
                    progress,
                    mappings,
                    stats,
                    ..
                }) => {
                    for (_, segs) in mappings {
                        mapped += segs.iter().map(|s| u64::from(s.count)).sum::<u64>();
                    }
                    if progress
                        .iter()
                        .any(|p| p.key == key && p.next_offset == 500)
                    {
                        assert!(stats.fast_batches > 0);
                        assert_eq!(stats.slow_batches, 0);
                        break;
                    }
                }
                Ok(ShardEvent::PartitionFailed { error, .. }) => {
                    panic!("partition failed: {error}")
                }
                Ok(other) => panic!("unexpected event {other:?}"),
                Err(_) => {}
            }
        }
        assert_eq!(mapped, 500, "every record has an exact mapping");
        shard.commands.send(ShardCommand::Shutdown).unwrap();
        loop {
            match ev_rx
                .recv_timeout(Duration::from_secs(30))
                .expect("shard stops")
            {
                ShardEvent::Stopped { error, .. } => {
                    assert_eq!(error, None);
                    break;
                }
                _ => continue,
            }
        }
        shard.thread.join().unwrap();

        let src = consume(tb.source(), &topic, 500);
        let dst = consume(tb.target(), &remote, 500);
        assert_eq!(src.len(), 500);
        assert_eq!(
            src,
            dst,
            "{}: target records differ from source",
            backend.name()
        );
    }
}
