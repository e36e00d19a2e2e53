//! Writes seed inputs for the fuzz targets: valid record sets the fuzzer can mutate from, so it
//! starts deep inside the decoders instead of rediscovering the framing and the codecs.

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
    let out = Path::new("corpus");
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
    legacy_seeds(out)
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
