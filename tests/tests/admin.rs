//! The admin client against the real test bed, over both IO drivers and over the plaintext
//! and SASL_SSL listeners.

use std::collections::BTreeMap;

use kafka_protocol::ResponseError;
use strait_control::cluster::{
    AlterConfigOp, Cluster, CommittedOffset, ConfigSource, IsolationLevel, Metadata, NewTopic,
    OffsetSpec, RetryConfig, TopicPartition, acl,
};
use strait_dataplane::io::IoBackend;
use strait_dataplane::wire::{ConnConfig, SaslMechanism};
use strait_tests::{Testbed, kafka_tool_ok, on_each_backend, setup, unique};

fn cluster(addr: &str, cfg: ConnConfig, backend: IoBackend) -> Cluster {
    Cluster::new(
        "source",
        vec![addr.to_string()],
        setup(cfg, backend),
        RetryConfig::default(),
    )
}

/// Metadata once it lists `topic` with `partitions` partitions: creation and growth reach the
/// broker answering metadata a moment after the controller acknowledged them.
async fn metadata_with(c: &Cluster, topic: &str, partitions: usize) -> Metadata {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(15);
    loop {
        let md = c.refresh_metadata(Some(&[topic])).await.unwrap();
        let seen = md.topics.get(topic).map_or(0, |t| t.partitions.len());
        if seen == partitions {
            return md;
        }
        assert!(
            std::time::Instant::now() < until,
            "{topic}: metadata lists {seen} partitions after 15 s, want {partitions}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

#[test]
fn topics_offsets_and_configs() {
    let tb = Testbed::get();
    on_each_backend(|backend| async move {
        let listeners = [
            (tb.source(), tb.plaintext()),
            (
                tb.source_sasl_ssl(),
                tb.sasl_ssl(SaslMechanism::ScramSha512),
            ),
        ];
        for (addr, cfg) in listeners {
            let c = cluster(addr, cfg, backend);
            let topic = unique("admin");
            let created = c
                .create_topics(
                    &[NewTopic {
                        name: topic.clone(),
                        partitions: 3,
                        replication_factor: -1,
                        configs: vec![("retention.ms".into(), "123456789".into())],
                    }],
                    30_000,
                )
                .await
                .unwrap();
            assert_eq!(created.len(), 1);
            created[0].1.as_ref().unwrap();

            // Creating it again names the topic and the error.
            let again = c
                .create_topics(
                    &[NewTopic {
                        name: topic.clone(),
                        partitions: 3,
                        replication_factor: -1,
                        configs: vec![],
                    }],
                    30_000,
                )
                .await
                .unwrap();
            let err = again[0].1.as_ref().unwrap_err();
            assert!(err.to_string().contains(addr), "{err}");
            assert!(err.is(ResponseError::TopicAlreadyExists), "{err}");
            assert!(err.to_string().contains(&topic), "{err}");

            // A broker answering metadata may not have the new topic yet: wait for it.
            let md = metadata_with(&c, &topic, 3).await;
            let meta = &md.topics[&topic];
            assert!(meta.partitions.iter().all(|p| p.leader >= 0));
            assert_ne!(meta.topic_id, [0u8; 16]);

            // Ten records into partition 1 with Kafka's own producer.
            let lines: String = (0..10).map(|i| format!("{i}:v{i}\n")).collect();
            kafka_tool_ok(
                "kafka-console-producer",
                &[
                    "--bootstrap-server",
                    tb.source(),
                    "--topic",
                    &topic,
                    "--property",
                    "parse.key=true",
                    "--property",
                    "key.separator=:",
                    "--producer-property",
                    "partitioner.class=org.apache.kafka.clients.producer.RoundRobinPartitioner",
                ],
                Some(lines.as_bytes()),
            );
            let tps: Vec<_> = (0..3).map(|p| TopicPartition::new(&topic, p)).collect();
            let latest = c
                .list_offsets(&tps, OffsetSpec::Latest, IsolationLevel::ReadCommitted)
                .await;
            let total: i64 = latest.values().map(|r| *r.as_ref().unwrap()).sum();
            assert_eq!(total, 10);
            let earliest = c
                .list_offsets(&tps, OffsetSpec::Earliest, IsolationLevel::ReadUncommitted)
                .await;
            assert!(earliest.values().all(|r| *r.as_ref().unwrap() == 0));

            // An unknown partition fails alone and says which.
            let mixed = c
                .list_offsets(
                    &[
                        TopicPartition::new(&topic, 0),
                        TopicPartition::new(&topic, 9),
                    ],
                    OffsetSpec::Latest,
                    IsolationLevel::ReadCommitted,
                )
                .await;
            assert!(mixed[&TopicPartition::new(&topic, 0)].is_ok());
            let bad = mixed[&TopicPartition::new(&topic, 9)]
                .as_ref()
                .unwrap_err()
                .to_string();
            assert!(bad.contains(&format!("{topic}-9")), "{bad}");

            // Configs: describe, alter, describe.
            let cfgs = c
                .describe_topic_configs(std::slice::from_ref(&topic))
                .await
                .unwrap();
            let entries = cfgs[&topic].as_ref().unwrap();
            let retention = entries.iter().find(|e| e.name == "retention.ms").unwrap();
            assert_eq!(retention.value.as_deref(), Some("123456789"));
            assert_eq!(retention.source, ConfigSource::DynamicTopic);
            let cleanup = entries.iter().find(|e| e.name == "cleanup.policy").unwrap();
            assert!(cleanup.is_default());
            c.alter_topic_configs(
                &topic,
                &[
                    AlterConfigOp::Set("cleanup.policy".into(), "compact".into()),
                    AlterConfigOp::Delete("retention.ms".into()),
                ],
            )
            .await
            .unwrap();
            // The controller applies the change; the broker answering DescribeConfigs learns it
            // from the metadata log a moment later, so poll (bounded) for it.
            let mut tries = 0;
            let entries = loop {
                let cfgs = c
                    .describe_topic_configs(std::slice::from_ref(&topic))
                    .await
                    .unwrap();
                let entries = cfgs[&topic].as_ref().unwrap().clone();
                let compact = entries
                    .iter()
                    .any(|e| e.name == "cleanup.policy" && e.value.as_deref() == Some("compact"));
                tries += 1;
                if compact || tries == 50 {
                    break entries;
                }
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            };
            let get = |n: &str| entries.iter().find(|e| e.name == n).unwrap().clone();
            assert_eq!(get("cleanup.policy").value.as_deref(), Some("compact"));
            assert!(get("retention.ms").is_default());

            // Partition growth.
            c.create_partitions(&topic, 5, 30_000).await.unwrap();
            metadata_with(&c, &topic, 5).await;
            let shrink = c.create_partitions(&topic, 2, 30_000).await.unwrap_err();
            assert!(shrink.is(ResponseError::InvalidPartitions), "{shrink}");

            let (pid, epoch) = c.init_producer_id().await.unwrap();
            assert!(pid >= 0 && epoch >= 0);

            // The source runs StandardAuthorizer with the least-privilege principal's topic
            // ACLs (scripts/testbed, mirror_acls); a super user may read them.
            let acls = c
                .describe_topic_acls()
                .await
                .unwrap()
                .expect("the test bed's source has an authorizer");
            let prefix = tb.var("STRAIT_MIRROR_TOPIC_PREFIX");
            assert!(
                acls.iter().any(|b| b.principal == "User:mirror"
                    && b.resource_name == prefix
                    && b.pattern_type == acl::PATTERN_PREFIXED
                    && b.operation == acl::OPERATION_READ
                    && b.permission_type == acl::PERMISSION_ALLOW),
                "{acls:?}"
            );
        }
    });
}

#[test]
fn groups_and_committed_offsets() {
    let tb = Testbed::get();
    on_each_backend(|backend| async move {
        let c = cluster(tb.source(), tb.plaintext(), backend);
        let topic = unique("groups");
        c.create_topic(NewTopic::new(&topic, 1), 30_000)
            .await
            .unwrap();
        let lines: String = (0..20).map(|i| format!("r{i}\n")).collect();
        kafka_tool_ok(
            "kafka-console-producer",
            &["--bootstrap-server", tb.source(), "--topic", &topic],
            Some(lines.as_bytes()),
        );
        let group = unique("g");
        let out = kafka_tool_ok(
            "kafka-console-consumer",
            &[
                "--bootstrap-server",
                tb.source(),
                "--topic",
                &topic,
                "--group",
                &group,
                "--from-beginning",
                "--max-messages",
                "7",
                "--timeout-ms",
                "30000",
            ],
            None,
        );
        assert_eq!(out.lines().count(), 7, "{out}");

        let groups = c.list_groups().await.unwrap();
        let listed = groups
            .iter()
            .find(|g| g.group_id == group)
            .expect("group listed");
        assert_eq!(listed.protocol_type, "consumer");
        let described = c
            .describe_groups(std::slice::from_ref(&group))
            .await
            .unwrap();
        assert_eq!(described[0].state, "Empty");
        assert_eq!(described[0].members, 0);

        let committed = c.offset_fetch(&group).await.unwrap();
        assert_eq!(committed[&TopicPartition::new(&topic, 0)].offset, 7);

        // An administrative commit to an empty group, then read back with metadata.
        let mut offsets = BTreeMap::new();
        offsets.insert(
            TopicPartition::new(&topic, 0),
            CommittedOffset {
                offset: 12,
                metadata: "from strait".into(),
            },
        );
        let results = c.offset_commit(&group, &offsets).await.unwrap();
        results[&TopicPartition::new(&topic, 0)].as_ref().unwrap();
        let committed = c.offset_fetch(&group).await.unwrap();
        let got = &committed[&TopicPartition::new(&topic, 0)];
        assert_eq!((got.offset, got.metadata.as_str()), (12, "from strait"));

        // Kafka's own tool agrees.
        let described = kafka_tool_ok(
            "kafka-consumer-groups",
            &[
                "--bootstrap-server",
                tb.source(),
                "--describe",
                "--group",
                &group,
            ],
            None,
        );
        let row = described
            .lines()
            .find(|l| l.contains(&topic))
            .expect("row for topic");
        assert!(row.split_whitespace().any(|w| w == "12"), "{row}");

        // A group that never existed has no offsets.
        assert!(c.offset_fetch(&unique("nobody")).await.unwrap().is_empty());
    });
}

#[test]
fn unreachable_cluster_names_what_was_tried() {
    on_each_backend(|backend| async move {
        let c = Cluster::new(
            "nowhere",
            vec!["127.0.0.1:1".into()],
            setup(ConnConfig::default(), backend),
            RetryConfig {
                max_attempts: 2,
                backoff_initial_ms: 10,
                backoff_max_ms: 10,
            },
        );
        let err = c.refresh_metadata(None).await.unwrap_err().to_string();
        assert!(
            err.contains("nowhere") && err.contains("127.0.0.1:1"),
            "{err}"
        );
    });
}

/// The test bed's brokers end SASL sessions after `STRAIT_SASL_SESSION_MS` and close a
/// connection at its first request after that (KIP-368). The admin client moves to a fresh
/// connection before then, so calls spread over several session lifetimes all succeed.
#[test]
fn calls_across_sasl_session_expiry_succeed() {
    let tb = Testbed::get();
    let session = std::time::Duration::from_millis(tb.sasl_session_ms());
    on_each_backend(|backend| async move {
        // One attempt per call: a retry on a fresh connection would hide a closed one.
        let c = Cluster::new(
            "source",
            vec![tb.source_sasl_ssl().to_string()],
            setup(tb.sasl_ssl(SaslMechanism::ScramSha512), backend),
            RetryConfig {
                max_attempts: 1,
                ..RetryConfig::default()
            },
        );
        let topic = unique("admin-reauth");
        c.create_topic(NewTopic::new(&topic, 1), 30_000)
            .await
            .unwrap();
        let until = std::time::Instant::now() + session * 5 / 2;
        let mut calls = 0;
        while std::time::Instant::now() < until {
            c.refresh_metadata(Some(&[topic.as_str()]))
                .await
                .unwrap_or_else(|e| panic!("call {calls} over SASL_SSL failed: {e}"));
            calls += 1;
            tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        }
        assert!(calls >= 10, "only {calls} calls");
    });
}
