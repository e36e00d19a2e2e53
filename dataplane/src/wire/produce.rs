//! Produce request encoding with record batches as separate segments.
//!
//! The `kafka-protocol` encoder copies a partition's records into the output buffer. This
//! encoder writes the same bytes (a property test checks they are identical) but hands each
//! batch's payload to the socket as its own segment, so forwarded bytes are never copied in user
//! space. Only the name-addressed versions 3..=12 exist here (see `versions::CAPS`).

use bytes::{BufMut, Bytes, BytesMut};

use super::frame::FrameBuilder;
use crate::batch::HEADER_LEN;

/// Produce versions this encoder writes.
pub const MIN_VERSION: i16 = 3;
pub const MAX_VERSION: i16 = 12;
/// From v9 the request is "flexible": compact lengths and tagged fields.
const FIRST_FLEXIBLE: i16 = 9;

/// One partition's batch: a rewritten header (small, owned) and the untouched payload.
#[derive(Debug, Clone)]
pub struct PartitionBatch {
    pub partition: i32,
    /// The batch's rewritten 61-byte header. Copied into the request's small buffer: 61 bytes
    /// per batch cost less than an iovec of their own.
    pub head: [u8; HEADER_LEN],
    /// The rest of the batch, forwarded by reference.
    pub payload: Bytes,
}

impl PartitionBatch {
    pub fn len(&self) -> usize {
        self.head.len() + self.payload.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One topic's partitions.
#[derive(Debug, Clone)]
pub struct TopicBatches {
    pub topic: String,
    pub partitions: Vec<PartitionBatch>,
}

/// Why a Produce request could not be encoded. Neither is retriable: the same request would
/// fail the same way.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    #[error("Produce v{version} is outside {MIN_VERSION}..={MAX_VERSION}")]
    UnsupportedVersion { version: i16 },
    #[error("{len} bytes do not fit a Kafka length field")]
    TooLong { len: usize },
}

/// Writes a Produce request body (after the request header) into `fb`.
pub fn encode_produce_body(
    fb: &mut FrameBuilder,
    version: i16,
    transactional_id: Option<&str>,
    acks: i16,
    timeout_ms: i32,
    topics: &[TopicBatches],
) -> Result<(), EncodeError> {
    if !(MIN_VERSION..=MAX_VERSION).contains(&version) {
        return Err(EncodeError::UnsupportedVersion { version });
    }
    let flexible = version >= FIRST_FLEXIBLE;
    let b = fb.small();
    put_nullable_string(b, transactional_id, flexible)?;
    b.put_i16(acks);
    b.put_i32(timeout_ms);
    put_array_len(b, topics.len(), flexible)?;
    for t in topics {
        put_string(fb.small(), &t.topic, flexible)?;
        put_array_len(fb.small(), t.partitions.len(), flexible)?;
        for p in &t.partitions {
            let b = fb.small();
            b.put_i32(p.partition);
            let len = p.len();
            if flexible {
                put_unsigned_varint(b, u32::try_from(len + 1).map_err(|_| too_long(len))?);
            } else {
                b.put_i32(i32::try_from(len).map_err(|_| too_long(len))?);
            }
            b.put_slice(&p.head);
            fb.push_payload(p.payload.clone());
            if flexible {
                fb.small().put_u8(0); // partition tagged fields
            }
        }
        if flexible {
            fb.small().put_u8(0); // topic tagged fields
        }
    }
    if flexible {
        fb.small().put_u8(0); // request tagged fields
    }
    Ok(())
}

fn too_long(len: usize) -> EncodeError {
    EncodeError::TooLong { len }
}

fn put_nullable_string(
    b: &mut BytesMut,
    s: Option<&str>,
    flexible: bool,
) -> Result<(), EncodeError> {
    match s {
        None if flexible => b.put_u8(0),
        None => b.put_i16(-1),
        Some(s) => put_string(b, s, flexible)?,
    }
    Ok(())
}

fn put_string(b: &mut BytesMut, s: &str, flexible: bool) -> Result<(), EncodeError> {
    if flexible {
        put_unsigned_varint(
            b,
            u32::try_from(s.len() + 1).map_err(|_| too_long(s.len()))?,
        );
    } else {
        b.put_i16(i16::try_from(s.len()).map_err(|_| too_long(s.len()))?);
    }
    b.put_slice(s.as_bytes());
    Ok(())
}

fn put_array_len(b: &mut BytesMut, n: usize, flexible: bool) -> Result<(), EncodeError> {
    if flexible {
        put_unsigned_varint(b, u32::try_from(n + 1).map_err(|_| too_long(n))?);
    } else {
        b.put_i32(i32::try_from(n).map_err(|_| too_long(n))?);
    }
    Ok(())
}

/// Kafka's unsigned varint, used by compact types in flexible versions.
pub fn put_unsigned_varint(b: &mut BytesMut, mut v: u32) {
    while v >= 0x80 {
        b.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    b.put_u8(v as u8);
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use kafka_protocol::messages::{ProduceRequest, TopicName};
    use kafka_protocol::protocol::{Encodable, StrBytes};
    use proptest::prelude::*;

    fn reference(
        version: i16,
        txn: Option<&str>,
        acks: i16,
        timeout: i32,
        topics: &[TopicBatches],
    ) -> Vec<u8> {
        let req = ProduceRequest::default()
            .with_transactional_id(txn.map(|t| StrBytes::from_string(t.to_string()).into()))
            .with_acks(acks)
            .with_timeout_ms(timeout)
            .with_topic_data(
                topics
                    .iter()
                    .map(|t| {
                        TopicProduceData::default()
                            .with_name(TopicName(StrBytes::from_string(t.topic.clone())))
                            .with_partition_data(
                                t.partitions
                                    .iter()
                                    .map(|p| {
                                        let mut whole = p.head.to_vec();
                                        whole.extend_from_slice(&p.payload);
                                        PartitionProduceData::default()
                                            .with_index(p.partition)
                                            .with_records(Some(Bytes::from(whole)))
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            );
        let mut out = BytesMut::new();
        req.encode(&mut out, version).unwrap();
        out.to_vec()
    }

    fn topics_strategy() -> impl Strategy<Value = Vec<TopicBatches>> {
        proptest::collection::vec(
            (
                "[a-z._-]{1,20}",
                proptest::collection::vec(
                    (
                        0i32..1000,
                        proptest::array::uniform32(any::<u8>()),
                        proptest::collection::vec(any::<u8>(), 0..400),
                    ),
                    0..4,
                ),
            ),
            0..4,
        )
        .prop_map(|ts| {
            ts.into_iter()
                .map(|(topic, ps)| TopicBatches {
                    topic,
                    partitions: ps
                        .into_iter()
                        .map(|(partition, head, payload)| PartitionBatch {
                            partition,
                            head: std::array::from_fn(|i| head[i % 32] ^ i as u8),
                            payload: Bytes::from(payload),
                        })
                        .collect(),
                })
                .collect()
        })
    }

    proptest! {
        /// Our segmented encoding is byte-identical to the kafka-protocol encoder's.
        #[test]
        fn matches_the_reference_encoder(
            version in MIN_VERSION..=MAX_VERSION,
            txn in proptest::option::of("[a-z]{0,10}"),
            acks in prop_oneof![Just(-1i16), Just(1i16)],
            timeout in any::<i32>(),
            topics in topics_strategy(),
        ) {
            let mut fb = FrameBuilder::new();
            encode_produce_body(&mut fb, version, txn.as_deref(), acks, timeout, &topics).unwrap();
            let frame = fb.finish().unwrap().to_contiguous();
            let ours = &frame[4..]; // strip the size prefix (no header was written)
            prop_assert_eq!(ours, &reference(version, txn.as_deref(), acks, timeout, &topics)[..]);
        }
    }

    #[test]
    fn payloads_are_not_copied() {
        let payload = Bytes::from(vec![9u8; 100_000]);
        let topics = vec![TopicBatches {
            topic: "t".into(),
            partitions: vec![
                PartitionBatch {
                    partition: 0,
                    head: [1; HEADER_LEN],
                    payload: payload.clone(),
                },
                PartitionBatch {
                    partition: 1,
                    head: [2; HEADER_LEN],
                    payload: payload.slice(10..),
                },
            ],
        }];
        let mut fb = FrameBuilder::new();
        encode_produce_body(&mut fb, 12, None, -1, 30_000, &topics).unwrap();
        let segs = fb.finish().unwrap();
        let ptrs: Vec<_> = segs.as_slice().iter().map(|s| s.as_ptr()).collect();
        assert!(ptrs.contains(&payload.as_ptr()));
        assert!(ptrs.contains(&payload.slice(10..).as_ptr()));
    }

    #[test]
    fn rejects_versions_outside_range() {
        let mut fb = FrameBuilder::new();
        assert!(encode_produce_body(&mut fb, 13, None, -1, 0, &[]).is_err());
        assert!(encode_produce_body(&mut fb, 2, None, -1, 0, &[]).is_err());
    }
}
