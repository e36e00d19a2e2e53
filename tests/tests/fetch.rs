//! On every listener and SASL mechanism, and on both IO drivers: create a topic with our admin
//! client, produce records with Kafka's console producer (bytes we did not write), read them back
//! with our own Fetch and batch decoder, and compare every byte.

use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{BrokerId, FetchRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use strait_control::cluster::{Cluster, NewTopic, RetryConfig};
use strait_dataplane::batch::{BatchWalker, decode_records};
use strait_dataplane::io::BrokerConn;
use strait_dataplane::wire::{ConnConfig, SaslMechanism};
use strait_tests::{Testbed, kafka_tool_ok, on_each_backend, setup, temp_file, unique};

/// Every record of partition 0, in order, fetched with our own connection.
async fn fetch_all(
    conn: &BrokerConn,
    topic: &str,
    expected: usize,
) -> Vec<(Option<Bytes>, Option<Bytes>)> {
    let mut out = Vec::new();
    let mut offset = 0i64;
    for _ in 0..50 {
        if out.len() >= expected {
            break;
        }
        let req = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(200)
            .with_min_bytes(1)
            .with_max_bytes(1 << 20)
            .with_isolation_level(1)
            .with_session_epoch(-1)
            .with_topics(vec![
                FetchTopic::default()
                    .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
                    .with_partitions(vec![
                        FetchPartition::default()
                            .with_partition(0)
                            .with_current_leader_epoch(-1)
                            .with_fetch_offset(offset)
                            .with_last_fetched_epoch(-1)
                            .with_log_start_offset(-1)
                            .with_partition_max_bytes(1 << 20),
                    ]),
            ]);
        let resp = conn.call(&req).await.expect("fetch");
        let pd = &resp.responses[0].partitions[0];
        assert_eq!(pd.error_code, 0, "fetch error");
        for b in BatchWalker::new(pd.records.clone().unwrap_or_default()) {
            let b = b.expect("valid batch");
            b.verify_crc().expect("CRC of a fetched batch");
            for r in decode_records(&b, 1 << 24).expect("records decode") {
                if r.offset(b.base_offset()) >= offset {
                    out.push((r.key, r.value));
                }
            }
            offset = b.next_offset();
        }
    }
    out
}

#[test]
fn console_producer_records_read_back_byte_for_byte() {
    let tb = Testbed::get();
    let mut listeners: Vec<(String, ConnConfig, Option<String>)> =
        vec![(tb.source().to_string(), tb.plaintext(), None)];
    for m in [
        SaslMechanism::Plain,
        SaslMechanism::ScramSha256,
        SaslMechanism::ScramSha512,
    ] {
        listeners.push((
            tb.source_sasl_ssl().to_string(),
            tb.sasl_ssl(m),
            Some(tb.java_sasl_ssl_props(m)),
        ));
    }
    on_each_backend(|backend| {
        let listeners = listeners.clone();
        async move {
            for (addr, cfg, java_props) in listeners {
                let label = format!("{addr} {:?}", cfg.sasl.as_ref().map(|s| s.mechanism));
                let admin = Cluster::new(
                    "source",
                    vec![addr.clone()],
                    setup(cfg.clone(), backend),
                    RetryConfig::default(),
                );
                let topic = unique("bytes");
                admin
                    .create_topic(NewTopic::new(&topic, 1), 30_000)
                    .await
                    .unwrap_or_else(|e| panic!("{label}: {e}"));

                // Keys, values with spaces, punctuation and multi-byte UTF-8.
                let lines: Vec<(String, String)> = (0..200)
                    .map(|i| {
                        (
                            format!("key-{i}"),
                            format!("value {i}: äöü €, tab-free; {}", "x".repeat(i % 37)),
                        )
                    })
                    .collect();
                let input: String = lines.iter().map(|(k, v)| format!("{k}|{v}\n")).collect();
                let mut args = vec![
                    "--bootstrap-server",
                    addr.as_str(),
                    "--topic",
                    topic.as_str(),
                    "--property",
                    "parse.key=true",
                    "--property",
                    "key.separator=|",
                    "--compression-codec",
                    "snappy",
                ];
                let props_file;
                if let Some(p) = &java_props {
                    props_file = temp_file(p);
                    args.push("--producer.config");
                    args.push(props_file.to_str().unwrap());
                }
                kafka_tool_ok("kafka-console-producer", &args, Some(input.as_bytes()));

                let conn = BrokerConn::connect(&addr, &setup(cfg, backend))
                    .await
                    .unwrap();
                let got = fetch_all(&conn, &topic, lines.len()).await;
                assert_eq!(got.len(), lines.len(), "{label}");
                for ((k, v), (gk, gv)) in lines.iter().zip(&got) {
                    assert_eq!(gk.as_deref(), Some(k.as_bytes()), "{label}");
                    assert_eq!(gv.as_deref(), Some(v.as_bytes()), "{label}");
                }
            }
        }
    });
}
