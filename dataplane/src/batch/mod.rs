//! Kafka v2 record batches: walk, filter, rewrite, and (rarely) rebuild.
//!
//! A record set arrives as a zero-copy [`Bytes`](bytes::Bytes) slice of a Fetch response frame.
//! [`BatchWalker`] cuts it into [`RawBatch`]es by reading only the 61-byte headers; a truncated
//! trailing batch (normal in size-limited fetches) ends the walk cleanly. Each batch then goes
//! through:
//!
//! 1. [`AbortedFilter`] (under `read_committed`): drops control batches and batches of aborted
//!    transactions, using the response's aborted-transactions list exactly like the Java consumer.
//! 2. [`classify`]: picks the path.
//!    - **Fast path** ([`Path::Fast`]): a dense batch that starts at or after the next offset to
//!      replicate, uses CreateTime and fits the target's `max.message.bytes`. [`HeaderRewrite`]
//!      copies the 61-byte header, zeroes the base offset, sets the producer fields, clears the
//!      transactional and delete-horizon bits, and patches the CRC from the changed header bytes
//!      alone (CRC-32C is linear, see [`crc`]). The payload is never read: [`ForwardBatch`] is the
//!      new header plus the *same* payload `Bytes`, written as two iovec segments.
//!    - **Slow path** ([`Path::Slow`]): anything else (compaction gaps, a resume offset inside the
//!      batch, LogAppendTime, too large for the target, and pre-0.11 messages, which the walker
//!      up-converts to v2 batches as it meets them: [`legacy`]). [`rebuild()`] decodes and decompresses the
//!      records ([`decode_records`]) and re-encodes one or more dense batches with the same codec
//!      ([`BatchBuilder`]), reporting which source offset each output record came from. The caller
//!      then applies the same [`HeaderRewrite`] as on the fast path.
//!    - [`Path::Skip`]: the batch holds nothing to replicate.
//!
//! Everything here is sans-IO and panic-free on hostile input: every length and count read from
//! the wire is checked against the bytes actually present before it sizes anything, and
//! decompression stops at a configured `max_decompressed_bytes`.
#![forbid(unsafe_code)]
#![deny(clippy::disallowed_methods)]

pub mod compression;
pub mod crc;
mod error;
pub mod legacy;
pub mod rebuild;
pub mod records;
pub mod rewrite;
pub mod txn;
mod varint;
pub mod walk;

pub use compression::{CodecError, Compression, DEFAULT_MAX_DECOMPRESSED_BYTES};
pub use error::BatchError;
pub use legacy::LegacyOrigin;
pub use rebuild::{
    OffsetRun, Path, RebuildOptions, RebuiltBatch, SlowReason, SlowReasonCounts, classify,
    coalesce, rebuild,
};
pub use records::{BatchBuilder, Record, RecordHeader, decode_records, end_txn_marker};
pub use rewrite::{ForwardBatch, HeaderRewrite, increment_sequence};
pub use txn::{AbortedFilter, Verdict};
pub use walk::{BatchWalker, ControlType, RawBatch, TimestampType};

/// Size of the v2 batch header (`RECORD_BATCH_OVERHEAD`): everything before the first record.
pub const HEADER_LEN: usize = 61;
/// Bytes before the part counted by `batchLength` (`LOG_OVERHEAD`: baseOffset + batchLength).
pub const LOG_OVERHEAD: usize = 12;
/// The only record-batch format strait forwards.
pub const MAGIC_V2: i8 = 2;
/// Kafka's default `max.message.bytes` for a topic (1 MiB + `LOG_OVERHEAD`).
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 1_048_588;

/// Byte offsets of the v2 header fields (`DefaultRecordBatch.java`). All big-endian.
pub(crate) mod field {
    pub const BASE_OFFSET: usize = 0;
    pub const BATCH_LENGTH: usize = 8;
    pub const PARTITION_LEADER_EPOCH: usize = 12;
    pub const MAGIC: usize = 16;
    pub const CRC: usize = 17;
    pub const ATTRIBUTES: usize = 21;
    pub const LAST_OFFSET_DELTA: usize = 23;
    pub const BASE_TIMESTAMP: usize = 27;
    pub const MAX_TIMESTAMP: usize = 35;
    pub const PRODUCER_ID: usize = 43;
    pub const PRODUCER_EPOCH: usize = 51;
    pub const BASE_SEQUENCE: usize = 53;
    pub const RECORDS_COUNT: usize = 57;
    /// The CRC covers bytes `CRC_START..end`.
    pub const CRC_START: usize = ATTRIBUTES;
}

/// Attribute bits of the v2 header.
pub(crate) mod attr {
    pub const COMPRESSION_MASK: i16 = 0x07;
    pub const LOG_APPEND_TIME: i16 = 0x08;
    pub const TRANSACTIONAL: i16 = 0x10;
    pub const CONTROL: i16 = 0x20;
    pub const DELETE_HORIZON: i16 = 0x40;
}

#[cfg(test)]
mod tests {
    //! End-to-end no-panic properties: whatever a broker (or an attacker) sends, every stage
    //! returns a value or an error.

    use bytes::Bytes;
    use proptest::prelude::*;

    use super::*;

    /// A well-framed v2 batch with arbitrary header fields around an arbitrary payload, so the
    /// record decoder and decompressors see hostile input behind a valid frame.
    fn framed(
        attributes: i16,
        last_offset_delta: i32,
        count: i32,
        producer_id: i64,
        payload: &[u8],
    ) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_LEN + payload.len());
        out.extend_from_slice(&100i64.to_be_bytes());
        out.extend_from_slice(&((HEADER_LEN - LOG_OVERHEAD + payload.len()) as i32).to_be_bytes());
        out.extend_from_slice(&0i32.to_be_bytes());
        out.push(2);
        out.extend_from_slice(&0u32.to_be_bytes());
        // Codec ids 5..=7 would stop the walker; keep them valid to reach the decoders.
        let attributes = (attributes & !attr::COMPRESSION_MASK) | ((attributes & 7) % 5);
        out.extend_from_slice(&attributes.to_be_bytes());
        out.extend_from_slice(&last_offset_delta.to_be_bytes());
        out.extend_from_slice(&0i64.to_be_bytes());
        out.extend_from_slice(&0i64.to_be_bytes());
        out.extend_from_slice(&producer_id.to_be_bytes());
        out.extend_from_slice(&0i16.to_be_bytes());
        out.extend_from_slice(&0i32.to_be_bytes());
        out.extend_from_slice(&count.to_be_bytes());
        out.extend_from_slice(payload);
        out
    }

    /// Runs every stage over a record set; panics only if an invariant of ours breaks.
    fn exercise(records: Bytes) {
        let len = records.len();
        let mut walker = BatchWalker::new(records);
        let mut filter = AbortedFilter::new([(1, 0), (7, 100)]);
        let mut consumed = 0;
        for batch in (&mut walker).flatten() {
            consumed += batch.source_size();
            let _ = filter.classify(&batch);
            let _ = classify(&batch, 101, 4096);
            let rewrite = HeaderRewrite {
                producer_id: 3,
                producer_epoch: 0,
                base_sequence: 9,
                transactional: false,
            };
            let forwarded = RawBatch::new(rewrite.forward(&batch).to_bytes())
                .expect("a rewritten batch keeps its framing");
            // Patching never launders or breaks a CRC.
            assert_eq!(forwarded.verify_crc().is_ok(), batch.verify_crc().is_ok());
            let _ = decode_records(&batch, 1 << 16);
            let opts = RebuildOptions {
                resume_offset: 102,
                max_batch_bytes: 1024,
                max_decompressed_bytes: 1 << 16,
            };
            if let Ok(out) = rebuild(&batch, &opts) {
                for b in out {
                    let raw = RawBatch::new(b.bytes.clone()).expect("rebuilt batches are framed");
                    assert!(raw.size() <= 1024);
                    assert_eq!(raw.records_count() as usize, b.record_count());
                    raw.verify_crc()
                        .expect("rebuilt batches have a correct CRC");
                }
            }
        }
        assert!(consumed + walker.partial_tail_len() <= len);
    }

    proptest! {
        #[test]
        fn arbitrary_record_sets_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
            exercise(Bytes::from(bytes));
        }

        #[test]
        fn arbitrary_payloads_behind_valid_headers_never_panic(
            attributes: i16,
            last_offset_delta in prop_oneof![any::<i32>(), 0i32..8],
            count in prop_oneof![any::<i32>(), 0i32..8],
            producer_id in prop_oneof![Just(-1i64), Just(1), Just(7)],
            payload in proptest::collection::vec(any::<u8>(), 0..400),
            tail in proptest::collection::vec(any::<u8>(), 0..80),
        ) {
            let mut set = framed(attributes, last_offset_delta, count, producer_id, &payload);
            set.extend_from_slice(&tail);
            exercise(Bytes::from(set));
        }

        #[test]
        fn mutated_real_batches_never_panic(
            codec_id in 0u8..5,
            values in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..64), 1..6),
            flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..6),
        ) {
            let codec = Compression::from_id(codec_id).expect("ids 0..5 are codecs");
            let mut builder = BatchBuilder::new(codec).base_offset(100).producer(7, 0, 0);
            for v in &values {
                builder
                    .push(&Record::new(5, Some(Bytes::from_static(b"k")), Some(Bytes::from(v.clone()))))
                    .expect("small records fit");
            }
            let mut bytes = builder.build().expect("small batches build").to_vec();
            let n = bytes.len();
            for (at, v) in flips {
                bytes[at % n] = v;
            }
            exercise(Bytes::from(bytes));
        }
    }
}
