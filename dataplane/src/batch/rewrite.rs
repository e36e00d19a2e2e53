//! The fast path: rewrite a copy of the 61-byte header and patch its CRC; forward the payload
//! untouched.

use bytes::Bytes;

use super::walk::RawBatch;
use super::{HEADER_LEN, attr, crc, field};

/// The producer fields a forwarded batch gets on the target.
///
/// Applying it also sets `baseOffset = 0` (brokers require it from clients),
/// `partitionLeaderEpoch = -1` (the broker stamps its own), sets the transactional (0x10) bit
/// to `transactional` (the source's says nothing about the target's transaction) and clears the
/// delete-horizon (0x40) bit. It does **not** touch the LogAppendTime bit (0x08):
/// brokers reject such batches from clients, and [`classify`](super::classify) sends them to the
/// slow path, which rewrites the record timestamps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeaderRewrite {
    /// This shard's producer id on the target, or -1.
    pub producer_id: i64,
    /// Its epoch, or -1.
    pub producer_epoch: i16,
    /// Sequence of the batch's first record for this target partition, or -1.
    pub base_sequence: i32,
    /// Whether the batch belongs to the producer's open transaction on the target (exactly-once
    /// forwarding); the produce request must then carry the producer's transactional id.
    pub transactional: bool,
}

/// A batch ready for a Produce request: the rewritten header and the original payload, to be
/// written as two iovec segments (the payload is never copied).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForwardBatch {
    /// The rewritten header.
    pub header: [u8; HEADER_LEN],
    /// The records, the same `Bytes` as in the fetch response.
    pub payload: Bytes,
}

impl HeaderRewrite {
    /// A non-idempotent producer: all producer fields -1.
    pub const NON_IDEMPOTENT: Self = Self {
        producer_id: -1,
        producer_epoch: -1,
        base_sequence: -1,
        transactional: false,
    };

    /// Returns the rewritten header of `batch`, with its CRC patched from the old and new header
    /// bytes alone (see [`super::crc`]). Reads no payload byte.
    pub fn apply(&self, batch: &RawBatch) -> [u8; HEADER_LEN] {
        let old = batch.header();
        let mut new = *old;
        new[field::BASE_OFFSET..field::BATCH_LENGTH].copy_from_slice(&0i64.to_be_bytes());
        new[field::PARTITION_LEADER_EPOCH..field::MAGIC].copy_from_slice(&(-1i32).to_be_bytes());
        let mut attributes = batch.attributes() & !(attr::TRANSACTIONAL | attr::DELETE_HORIZON);
        if self.transactional {
            attributes |= attr::TRANSACTIONAL;
        }
        new[field::ATTRIBUTES..field::LAST_OFFSET_DELTA].copy_from_slice(&attributes.to_be_bytes());
        new[field::PRODUCER_ID..field::PRODUCER_EPOCH]
            .copy_from_slice(&self.producer_id.to_be_bytes());
        new[field::PRODUCER_EPOCH..field::BASE_SEQUENCE]
            .copy_from_slice(&self.producer_epoch.to_be_bytes());
        new[field::BASE_SEQUENCE..field::RECORDS_COUNT]
            .copy_from_slice(&self.base_sequence.to_be_bytes());
        let tail_len = (batch.size() - HEADER_LEN) as u64;
        let crc = crc::patch(
            batch.crc(),
            &old[field::CRC_START..],
            &new[field::CRC_START..],
            tail_len,
        );
        new[field::CRC..field::ATTRIBUTES].copy_from_slice(&crc.to_be_bytes());
        new
    }

    /// The batch as it goes to the target: rewritten header plus the untouched payload.
    pub fn forward(&self, batch: &RawBatch) -> ForwardBatch {
        ForwardBatch {
            header: self.apply(batch),
            payload: batch.payload(),
        }
    }
}

impl ForwardBatch {
    /// Total bytes on the wire.
    pub fn len(&self) -> usize {
        HEADER_LEN + self.payload.len()
    }

    /// Never true: a batch has at least a header. Present for API symmetry with `len`.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The two iovec segments, in order.
    pub fn segments(&self) -> [&[u8]; 2] {
        [&self.header, &self.payload]
    }

    /// Copies both segments into one buffer (tests, and transports without vectored writes).
    pub fn to_bytes(&self) -> Bytes {
        let mut out = Vec::with_capacity(self.len());
        out.extend_from_slice(&self.header);
        out.extend_from_slice(&self.payload);
        Bytes::from(out)
    }
}

/// Kafka's `DefaultRecordBatch.incrementSequence`: `sequence + increment`, wrapping to 0 after
/// `i32::MAX`. A shard's next base sequence for a partition is
/// `increment_sequence(base_sequence, records_count)`.
pub fn increment_sequence(sequence: i32, increment: i32) -> i32 {
    // Widened so that no input can overflow; for Kafka's inputs this is Java's arithmetic.
    let sum = i64::from(sequence) + i64::from(increment);
    if sum > i64::from(i32::MAX) {
        // Wrap: the sequence after i32::MAX is 0.
        (sum - i64::from(i32::MAX) - 1) as i32
    } else {
        sum as i32
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::batch::compression::Compression;
    use crate::batch::records::{BatchBuilder, Record, decode_records};

    fn arb_batch() -> impl Strategy<Value = Bytes> {
        let payload_len = prop_oneof![
            8 => 0usize..4096,
            1 => Just(0usize),
            1 => (1usize << 20)..(3usize << 19),
        ];
        (
            payload_len,
            any::<i64>(),
            any::<i32>(),
            any::<i16>(),
            any::<i64>(),
            any::<i16>(),
            any::<i32>(),
            any::<i64>(),
            any::<i64>(),
            any::<u8>(),
        )
            .prop_map(
                |(len, base, ple, attrs, pid, epoch, seq, base_ts, max_ts, fill)| {
                    // A batch with random header fields and an opaque random payload: the fast
                    // path must not care what the payload is.
                    let mut out = Vec::with_capacity(HEADER_LEN + len);
                    out.extend_from_slice(&base.to_be_bytes());
                    out.extend_from_slice(&((HEADER_LEN - 12 + len) as i32).to_be_bytes());
                    out.extend_from_slice(&ple.to_be_bytes());
                    out.push(2);
                    out.extend_from_slice(&[0; 4]);
                    // Keep the codec valid (ids 0..=4).
                    let attrs = (attrs & !7) | i16::from(fill % 5);
                    out.extend_from_slice(&attrs.to_be_bytes());
                    out.extend_from_slice(&(len as i32).to_be_bytes());
                    out.extend_from_slice(&base_ts.to_be_bytes());
                    out.extend_from_slice(&max_ts.to_be_bytes());
                    out.extend_from_slice(&pid.to_be_bytes());
                    out.extend_from_slice(&epoch.to_be_bytes());
                    out.extend_from_slice(&seq.to_be_bytes());
                    out.extend_from_slice(&7i32.to_be_bytes());
                    let mut x = u32::from(fill) | 1;
                    out.extend((0..len).map(|_| {
                        x ^= x << 13;
                        x ^= x >> 17;
                        x ^= x << 5;
                        x as u8
                    }));
                    let crc = crc32c::crc32c(&out[21..]);
                    out[17..21].copy_from_slice(&crc.to_be_bytes());
                    Bytes::from(out)
                },
            )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]

        #[test]
        fn patched_crc_equals_full_recompute(
            bytes in arb_batch(),
            pid: i64,
            epoch: i16,
            seq: i32,
            transactional: bool,
        ) {
            let batch = RawBatch::new(bytes.clone()).unwrap();
            let rewrite = HeaderRewrite {
                producer_id: pid,
                producer_epoch: epoch,
                base_sequence: seq,
                transactional,
            };
            let fwd = rewrite.forward(&batch);
            let whole = fwd.to_bytes();
            prop_assert_eq!(whole.len(), bytes.len());
            let expected = crc32c::crc32c(&whole[21..]);
            prop_assert_eq!(u32::from_be_bytes(whole[17..21].try_into().unwrap()), expected);

            let out = RawBatch::new(whole).unwrap();
            out.verify_crc().unwrap();
            prop_assert_eq!(out.base_offset(), 0);
            prop_assert_eq!(out.partition_leader_epoch(), -1);
            prop_assert_eq!(out.producer_id(), pid);
            prop_assert_eq!(out.producer_epoch(), epoch);
            prop_assert_eq!(out.base_sequence(), seq);
            prop_assert_eq!(out.is_transactional(), transactional);
            prop_assert!(!out.has_delete_horizon());
            // Everything else survives.
            prop_assert_eq!(out.attributes() | 0x50, batch.attributes() | 0x50);
            prop_assert_eq!(out.last_offset_delta(), batch.last_offset_delta());
            prop_assert_eq!(out.base_timestamp(), batch.base_timestamp());
            prop_assert_eq!(out.max_timestamp(), batch.max_timestamp());
            prop_assert_eq!(out.records_count(), batch.records_count());
            prop_assert_eq!(out.batch_length(), batch.batch_length());
            prop_assert_eq!(out.payload(), batch.payload());
        }

        #[test]
        fn increment_sequence_matches_wide_arithmetic(seq in 0i32..=i32::MAX, inc in 0i32..=1_000_000) {
            let wide = (i64::from(seq) + i64::from(inc)) % (i64::from(i32::MAX) + 1);
            prop_assert_eq!(i64::from(increment_sequence(seq, inc)), wide);
        }
    }

    #[test]
    fn payload_is_forwarded_zero_copy() {
        let bytes = BatchBuilder::new(Compression::Lz4)
            .base_offset(500)
            .producer(9, 1, 0)
            .transactional(true)
            .push_all(&[Record::new(1, None, Some(Bytes::from_static(b"v")))])
            .unwrap()
            .build()
            .unwrap();
        let batch = RawBatch::new(bytes.clone()).unwrap();
        let fwd = HeaderRewrite {
            producer_id: 77,
            producer_epoch: 2,
            base_sequence: 1000,
            transactional: false,
        }
        .forward(&batch);
        assert_eq!(fwd.payload.as_ptr(), bytes[61..].as_ptr());
        assert_eq!(fwd.len(), bytes.len());
        assert_eq!(fwd.segments()[0], &fwd.header[..]);
        // The rewritten batch decodes to the same records.
        let out = RawBatch::new(fwd.to_bytes()).unwrap();
        assert_eq!(
            decode_records(&out, 1 << 20).unwrap(),
            decode_records(&batch, 1 << 20).unwrap()
        );
    }

    #[test]
    fn corrupt_source_stays_corrupt() {
        let bytes = BatchBuilder::new(Compression::None)
            .push_all(&[Record::new(1, None, Some(Bytes::from_static(b"value")))])
            .unwrap()
            .build()
            .unwrap();
        let mut b = bytes.to_vec();
        let last = b.len() - 1;
        b[last] ^= 0x40;
        let batch = RawBatch::new(Bytes::from(b)).unwrap();
        let out = RawBatch::new(HeaderRewrite::NON_IDEMPOTENT.forward(&batch).to_bytes()).unwrap();
        assert!(out.verify_crc().is_err());
    }

    #[test]
    fn increment_sequence_wraps_to_zero() {
        assert_eq!(increment_sequence(i32::MAX, 1), 0);
        assert_eq!(increment_sequence(i32::MAX - 1, 5), 3);
        assert_eq!(increment_sequence(10, 5), 15);
    }
}
