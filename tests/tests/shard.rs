//! One shard against the real test bed: records written by Kafka's own Java producer are
//! forwarded batch by batch and arrive byte-identical, on both IO drivers.

use std::sync::Arc;
use std::time::{Duration, Instant};

use strait_control::cluster::{Cluster, NewTopic, RetryConfig};
use strait_dataplane::io::IoBackend;
use strait_dataplane::shard::{
    Assignment, ClusterEndpoint, FetchSettings, PartitionKey, ProduceSettings, ShardCommand,
    ShardConfig, ShardEvent, ShardHandle, spawn_shard,
};
use strait_dataplane::wire::SaslMechanism;
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

/// A shard (reporting every 50 ms) that copies partition 0 of `topic` to `remote` from offset 0.
fn start_one_partition_shard(
    backend: IoBackend,
    topic: &str,
    remote: &str,
    source: Arc<ClusterEndpoint>,
    target: Arc<ClusterEndpoint>,
) -> (
    ShardHandle,
    crossbeam_channel::Receiver<ShardEvent>,
    PartitionKey,
) {
    let (ev_tx, ev_rx) = crossbeam_channel::bounded(64);
    let mut cfg = ShardConfig::new(0, backend);
    cfg.report_interval_ms = 50;
    let shard = spawn_shard(cfg, ev_tx, 16).unwrap();
    let key = PartitionKey::new(0, topic, 0);
    shard
        .commands
        .send(ShardCommand::Assign(Box::new(Assignment {
            key: key.clone(),
            source,
            target,
            target_topic: Arc::from(remote),
            start_offset: 0,
            start_leader_epoch: -1,
            start_target_offset: -1,
            max_message_bytes: 1_048_588,
            fetch: FetchSettings::default(),
            produce: ProduceSettings::default(),
            transactional: None,
            source_leader: None,
        })))
        .unwrap();
    (shard, ev_rx, key)
}

/// Shuts the shard down and checks that it stopped without an error.
fn stop_shard(shard: ShardHandle, ev_rx: &crossbeam_channel::Receiver<ShardEvent>) {
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

        let (shard, ev_rx, key) = start_one_partition_shard(
            backend,
            &topic,
            &remote,
            endpoint("A", tb.source()),
            endpoint("B", tb.target()),
        );
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
        stop_shard(shard, &ev_rx);

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

/// The test bed's brokers end SASL sessions after `STRAIT_SASL_SESSION_MS` (KIP-368) and close a
/// connection at its first request after that. A shard that copies over SASL_SSL through several
/// session lifetimes must move to fresh connections before each session ends: no request fails,
/// so no connection is counted as lost, and every record arrives once.
#[test]
fn expiring_sasl_sessions_are_replaced_before_the_broker_closes_them() {
    let tb = Testbed::get();
    let session = Duration::from_millis(tb.sasl_session_ms());
    let rounds = 3;
    let per_round = 200;
    for backend in backends() {
        let topic = unique("shard-reauth");
        let remote = format!("A.{topic}");
        create(tb.source(), &topic, 1);
        create(tb.target(), &remote, 1);
        let sasl_endpoint = |alias: &str, addr: &str| {
            let config = tb.sasl_ssl(SaslMechanism::ScramSha256);
            let tls = setup(config.clone(), backend).tls;
            Arc::new(ClusterEndpoint {
                alias: alias.into(),
                bootstrap: vec![addr.into()],
                config,
                tls,
            })
        };

        let (shard, ev_rx, key) = start_one_partition_shard(
            backend,
            &topic,
            &remote,
            sasl_endpoint("A", tb.source_sasl_ssl()),
            sasl_endpoint("B", tb.target_sasl_ssl()),
        );

        // Records arrive in rounds, one session lifetime apart, so that fetches and produces run
        // on connections whose sessions expire.
        let source = tb.source().to_string();
        let producer_topic = topic.clone();
        let producer = std::thread::spawn(move || {
            for round in 0..rounds {
                let lines: String = (0..per_round).map(|i| format!("r{round}-{i}\n")).collect();
                kafka_tool_ok(
                    "kafka-console-producer",
                    &["--bootstrap-server", &source, "--topic", &producer_topic],
                    Some(lines.as_bytes()),
                );
                std::thread::sleep(session);
            }
        });

        let total = (rounds * per_round) as i64;
        let deadline = Instant::now() + Duration::from_secs(120);
        let mut last_stats = None;
        let mut done = false;
        while !(done && producer.is_finished()) {
            assert!(
                Instant::now() < deadline,
                "{}: not caught up in time",
                backend.name()
            );
            match ev_rx.recv_timeout(Duration::from_secs(5)) {
                Ok(ShardEvent::Report {
                    progress, stats, ..
                }) => {
                    done |= progress
                        .iter()
                        .any(|p| p.key == key && p.next_offset == total);
                    last_stats = Some(stats);
                }
                Ok(ShardEvent::PartitionFailed { error, .. }) => {
                    panic!("{}: partition failed: {error}", backend.name())
                }
                Ok(_) | Err(_) => {}
            }
        }
        producer.join().unwrap();
        let stats = last_stats.expect("reports arrived");
        assert_eq!(
            stats.reconnects,
            0,
            "{}: a connection was lost (the broker closes one whose session expired): {stats:?}",
            backend.name()
        );
        stop_shard(shard, &ev_rx);

        let dst = consume(tb.target(), &remote, rounds * per_round);
        assert_eq!(dst.len(), rounds * per_round, "{}", backend.name());
    }
}
