//! Writes seed inputs for the fuzz targets: valid record sets, broker responses, key stores and
//! the like that the fuzzer can mutate from, so it starts deep inside the decoders instead of
//! rediscovering the framing and the codecs. Run from `fuzz/` (`cargo run --bin seeds`): it
//! rewrites `seeds/<target>/`, which is committed; the smoke run (`scripts/fuzz-smoke`) reads it
//! beside the local, uncommitted `corpus/<target>/`. Every target gets at least one seed.

use std::fs;
use std::path::Path;

use bytes::Bytes;
use strait_dataplane::batch::legacy::encode::{self, LegacyMessage};
use strait_dataplane::batch::{
    BatchBuilder, Compression, ControlType, HEADER_LEN, Record, end_txn_marker,
};

fn record(i: usize) -> Record {
    let mut r = Record::new(
        1_700_000_000_000 + i as i64,
        if i.is_multiple_of(3) {
            None
        } else {
            Some(Bytes::from(format!("key-{i}")))
        },
        if i % 5 == 4 {
            None
        } else {
            Some(Bytes::from(format!("value {i} ").repeat(i % 7)))
        },
    );
    if i % 2 == 1 {
        r.headers.push((
            Bytes::from_static(b"h"),
            if i % 4 == 1 {
                None
            } else {
                Some(Bytes::from_static(b"v"))
            },
        ));
    }
    r
}

fn main() -> std::io::Result<()> {
    let out = Path::new("seeds");
    if out.exists() {
        // Written afresh, so that a seed the writer no longer makes does not linger.
        fs::remove_dir_all(out)?;
    }
    fs::create_dir_all(out.join("walker"))?;
    fs::create_dir_all(out.join("records"))?;
    fs::create_dir_all(out.join("legacy"))?;
    for codec in Compression::ALL {
        let mut set = Vec::new();
        let mut dense = BatchBuilder::new(codec)
            .base_offset(0)
            .producer(1, 0, 0)
            .transactional(true);
        let mut gappy = BatchBuilder::new(codec)
            .base_offset(4)
            .log_append_time(1_700_000_999_999);
        for i in 0..4 {
            dense.push(&record(i)).expect("small records fit");
            gappy
                .push_at(i as i32 * 2, &record(i + 4))
                .expect("small records fit");
        }
        let dense = dense.build().expect("builds");
        set.extend_from_slice(&dense);
        set.extend_from_slice(&end_txn_marker(ControlType::Abort, 4, 1, 0, 3));
        set.extend_from_slice(&gappy.build().expect("builds"));
        set.extend_from_slice(&dense[..dense.len() / 2]);
        fs::write(out.join("walker").join(format!("set-{codec}")), &set)?;

        // records target: selector, count, payload.
        let mut input = vec![codec.id()];
        input.extend_from_slice(&dense[57..HEADER_LEN]);
        input.extend_from_slice(&dense[HEADER_LEN..]);
        fs::write(out.join("records").join(format!("payload-{codec}")), &input)?;
    }
    connection_seeds(out)?;
    scram_seeds(out)?;
    control_seeds(out)?;
    response_seeds(out)?;
    security_seeds(out)?;
    legacy_seeds(out)
}

/// `responses` target input: byte 0 the response (the target's order), byte 1 its version, then
/// the encoded body.
fn response_input<R: kafka_protocol::protocol::Request>(
    which: u8,
    version: i16,
    body: &R::Response,
) -> Vec<u8> {
    let mut buf = bytes::BytesMut::new();
    kafka_protocol::protocol::Encodable::encode(body, &mut buf, version).expect("encodes");
    let mut input = vec![which, version as u8];
    input.extend_from_slice(&buf);
    input
}

/// Every response the `responses` target decodes, empty at its lowest and highest version (the
/// target takes versions 0..17), and a Metadata and a Fetch answer with content.
fn response_seeds(out: &Path) -> std::io::Result<()> {
    use kafka_protocol::messages::*;
    use kafka_protocol::protocol::{Message, Request, StrBytes};
    let dir = out.join("responses");
    fs::create_dir_all(&dir)?;
    fn empty<R: Request>(dir: &Path, which: u8, name: &str) -> std::io::Result<()>
    where
        R::Response: Default,
    {
        let range = <R::Response as Message>::VERSIONS;
        for v in [range.min, range.max.min(17)] {
            let input = response_input::<R>(which, v, &R::Response::default());
            fs::write(dir.join(format!("{name}-v{v}")), input)?;
        }
        Ok(())
    }
    empty::<FetchRequest>(&dir, 0, "fetch")?;
    empty::<ProduceRequest>(&dir, 1, "produce")?;
    empty::<MetadataRequest>(&dir, 2, "metadata")?;
    empty::<ApiVersionsRequest>(&dir, 3, "api-versions")?;
    empty::<ListOffsetsRequest>(&dir, 4, "list-offsets")?;
    empty::<InitProducerIdRequest>(&dir, 5, "init-producer-id")?;
    empty::<FindCoordinatorRequest>(&dir, 6, "find-coordinator")?;
    empty::<OffsetFetchRequest>(&dir, 7, "offset-fetch")?;
    empty::<ListGroupsRequest>(&dir, 8, "list-groups")?;
    empty::<CreateTopicsRequest>(&dir, 9, "create-topics")?;
    empty::<DescribeConfigsRequest>(&dir, 10, "describe-configs")?;
    empty::<OffsetCommitRequest>(&dir, 11, "offset-commit")?;
    empty::<SaslHandshakeRequest>(&dir, 12, "sasl-handshake")?;
    empty::<SaslAuthenticateRequest>(&dir, 13, "sasl-authenticate")?;
    empty::<DescribeGroupsRequest>(&dir, 14, "describe-groups")?;

    let topic = TopicName(StrBytes::from_static_str("orders"));
    let mut md = MetadataResponse::default();
    md.brokers.push(
        metadata_response::MetadataResponseBroker::default()
            .with_node_id(BrokerId(1))
            .with_host(StrBytes::from_static_str("broker-1"))
            .with_port(9092),
    );
    md.topics.push(
        metadata_response::MetadataResponseTopic::default()
            .with_name(Some(topic.clone()))
            .with_partitions(vec![
                metadata_response::MetadataResponsePartition::default()
                    .with_leader_id(BrokerId(1))
                    .with_replica_nodes(vec![BrokerId(1)])
                    .with_isr_nodes(vec![BrokerId(1)]),
            ]),
    );
    fs::write(
        dir.join("metadata-v12-topic"),
        response_input::<MetadataRequest>(2, 12, &md),
    )?;

    let mut set = BatchBuilder::new(Compression::Lz4).base_offset(0);
    for i in 0..3 {
        set.push(&record(i)).expect("small records fit");
    }
    let records = Bytes::from(set.build().expect("builds"));
    let fetch = FetchResponse::default().with_responses(vec![
        fetch_response::FetchableTopicResponse::default()
            .with_topic(topic)
            .with_partitions(vec![
                fetch_response::PartitionData::default()
                    .with_high_watermark(3)
                    .with_last_stable_offset(3)
                    .with_records(Some(records)),
            ]),
    ]);
    fs::write(
        dir.join("fetch-v12-records"),
        response_input::<FetchRequest>(0, 12, &fetch),
    )
}

/// `security` target input: byte 0 the parser (0 JKS, 1 encrypted PKCS#8 DER, 2 HTTP response,
/// 3 token JSON, 4 JWT, 5 endpoint URL), then its input. The key stores and keys are the
/// data plane's TLS test fixtures (passwords in their generate.sh; the target tries
/// "changeit", so it reaches the integrity check and the key entries' framing).
fn security_seeds(out: &Path) -> std::io::Result<()> {
    let dir = out.join("security");
    fs::create_dir_all(&dir)?;
    let fixtures = Path::new("../dataplane/tests/fixtures/tls");
    let seed = |name: &str, which: u8, input: &[u8]| {
        let mut v = vec![which];
        v.extend_from_slice(input);
        fs::write(dir.join(name), v)
    };
    for store in ["truststore.jks", "client.jks"] {
        seed(store, 0, &fs::read(fixtures.join(store))?)?;
    }
    for pem in ["client.enc-pbes2.pem", "client.enc-3des.pem"] {
        let text = fs::read_to_string(fixtures.join(pem))?;
        seed(
            pem.trim_end_matches(".pem"),
            1,
            &pem_block(&text, "ENCRYPTED PRIVATE KEY"),
        )?;
    }
    let body = r#"{"access_token":"x.y.z","token_type":"bearer","expires_in":3600}"#;
    seed(
        "http-chunked",
        2,
        format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{body}\r\n0\r\n\r\n",
            body.len()
        )
        .as_bytes(),
    )?;
    seed(
        "http-length",
        2,
        format!(
            "HTTP/1.1 400 Bad Request\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    )?;
    seed("token-response", 3, body.as_bytes())?;
    seed(
        "error-response",
        3,
        br#"{"error":"invalid_client","error_description":"bad credentials"}"#,
    )?;
    // {"alg":"none"} . {"sub":"mirror","iat":1700000000,"exp":1700003600,"scope":"a b"} .
    seed(
        "jwt",
        4,
        b"eyJhbGciOiJub25lIn0.eyJzdWIiOiJtaXJyb3IiLCJpYXQiOjE3MDAwMDAwMDAsImV4cCI6MTcwMDAwMzYwMCwic2NvcGUiOiJhIGIifQ.",
    )?;
    seed(
        "url-https",
        5,
        b"https://idp.example.com:8443/oauth2/token?x=1",
    )?;
    seed("url-file", 5, b"file:///var/run/secrets/token.jwt")
}

/// The DER bytes of the first PEM block labelled `label` (the fixtures' base64 is plain).
fn pem_block(text: &str, label: &str) -> Vec<u8> {
    let begin = format!("-----BEGIN {label}-----");
    let end = format!("-----END {label}-----");
    let body: String = text
        .split_once(&begin)
        .and_then(|(_, rest)| rest.split_once(&end))
        .map(|(b, _)| b.chars().filter(|c| !c.is_whitespace()).collect())
        .unwrap_or_else(|| panic!("no {label} block"));
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => panic!("not base64: {c}"),
    };
    let mut out = Vec::new();
    for chunk in body.trim_end_matches('=').as_bytes().chunks(4) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &c)| n | u32::from(value(c)) << (18 - 6 * i));
        out.extend_from_slice(&n.to_be_bytes()[1..chunk.len()]);
    }
    out
}

/// A broker's ApiVersions answer (correlation id 0, v3 flexible), as the connection target's
/// input: plaintext mode, whole chunks.
fn connection_seeds(out: &Path) -> std::io::Result<()> {
    use kafka_protocol::messages::api_versions_response::ApiVersion;
    use kafka_protocol::messages::{ApiKey, ApiVersionsResponse, ResponseHeader};
    use kafka_protocol::protocol::Encodable;
    let dir = out.join("connection");
    fs::create_dir_all(&dir)?;
    let mut r = ApiVersionsResponse::default();
    for (k, max) in [(ApiKey::ApiVersions, 4), (ApiKey::Metadata, 12)] {
        r.api_keys.push(
            ApiVersion::default()
                .with_api_key(k as i16)
                .with_min_version(0)
                .with_max_version(max),
        );
    }
    let mut frame = bytes::BytesMut::new();
    ResponseHeader::default()
        .with_correlation_id(0)
        .encode(&mut frame, 0)
        .expect("encodes");
    r.encode(&mut frame, 4).expect("encodes");
    let mut input = vec![0u8, 255];
    input.extend_from_slice(&(frame.len() as i32).to_be_bytes());
    input.extend_from_slice(&frame);
    fs::write(dir.join("api-versions"), input)
}

/// Server-first messages in RFC 5802's shape (the client nonce is the target's).
fn scram_seeds(out: &Path) -> std::io::Result<()> {
    let dir = out.join("scram");
    fs::create_dir_all(&dir)?;
    let first = "r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096";
    for (name, hash) in [("sha256", 0u8), ("sha512", 1u8)] {
        let mut input = vec![hash];
        input.extend_from_slice(first.as_bytes());
        input.push(0xff);
        input.extend_from_slice(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=");
        fs::write(dir.join(name), input)?;
    }
    fs::write(dir.join("server-error"), b"\0e=other-error")
}

/// MM2 records as control reads them.
fn control_seeds(out: &Path) -> std::io::Result<()> {
    use strait_control::offsets::format::OffsetSync;
    let dir = out.join("control_records");
    fs::create_dir_all(&dir)?;
    let tp = strait_control::offsets::TopicPartition::new("orders", 3);
    let sync = OffsetSync::new(&tp, 100, 42);
    let mut input = vec![0u8];
    input.extend_from_slice(&sync.encode_key().expect("encodes"));
    input.push(0xff);
    input.extend_from_slice(&sync.encode_value());
    fs::write(dir.join("offset-sync"), input)?;
    let checkpoint = strait_control::offsets::format::Checkpoint {
        group: "billing".into(),
        topic: "A.orders".into(),
        partition: 3,
        upstream_offset: 100,
        downstream_offset: 42,
        metadata: "m".into(),
    };
    let mut input = vec![1u8];
    input.extend_from_slice(&checkpoint.encode_key().expect("encodes"));
    input.push(0xff);
    input.extend_from_slice(&checkpoint.encode_value().expect("encodes"));
    fs::write(dir.join("checkpoint"), input)?;
    let heartbeat = strait_control::offsets::format::Heartbeat {
        source_alias: "A".into(),
        target_alias: "B".into(),
        timestamp_ms: 1_700_000_000_000,
    };
    let mut input = vec![2u8];
    input.extend_from_slice(&heartbeat.encode_key().expect("encodes"));
    input.push(0xff);
    input.extend_from_slice(&heartbeat.encode_value());
    fs::write(dir.join("heartbeat"), input)?;
    let key = strait_control::offsets::connect::source_offset_key(
        "MirrorSourceConnector",
        "A",
        "orders",
        3,
    );
    let mut input = vec![3u8];
    input.extend_from_slice(&key);
    input.push(0xff);
    input.extend_from_slice(&strait_control::offsets::connect::source_offset_value(7));
    fs::write(dir.join("connect-offset"), input)?;
    let mut input = vec![4u8];
    input.extend_from_slice(br#"{"source":"A","topic":"orders","partition":3}"#);
    input.push(0xff);
    input.extend_from_slice(br#"{"next_offset":7}"#);
    fs::write(dir.join("progress"), input)
}

/// Pre-0.11 message sets for the walker, and wrapper values for the legacy target.
fn legacy_seeds(out: &Path) -> std::io::Result<()> {
    let messages: Vec<LegacyMessage> = (0..4)
        .map(|i| {
            let r = record(i);
            LegacyMessage {
                // Relative (magic 1 inner) or absolute (the rest); a gap at 2.
                offset: if i < 2 { i as i64 } else { i as i64 + 1 },
                timestamp: r.timestamp,
                key: r.key,
                value: r.value,
            }
        })
        .collect();
    for magic in [0i8, 1] {
        fs::write(
            out.join("walker").join(format!("legacy-v{magic}-none")),
            encode::message_set(magic, &messages),
        )?;
        for (bits, codec) in [
            (1u8, Compression::Gzip),
            (2, Compression::Snappy),
            (3, Compression::Lz4),
        ] {
            let wrapper =
                encode::wrapper(magic, codec, magic == 1, 4, 1_700_000_999_999, &messages)
                    .expect("small sets compress");
            fs::write(
                out.join("walker").join(format!("legacy-v{magic}-{codec}")),
                &wrapper,
            )?;
            let mut input = vec![magic as u8 | bits << 1 | u8::from(magic == 1) << 3];
            input.extend_from_slice(&4i64.to_be_bytes());
            input.extend_from_slice(
                &encode::compress(codec, magic, &encode::message_set(magic, &messages))
                    .expect("small sets compress"),
            );
            fs::write(
                out.join("legacy").join(format!("wrapper-v{magic}-{codec}")),
                &input,
            )?;
        }
    }
    Ok(())
}
