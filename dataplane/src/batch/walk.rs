//! The record-set walker: cuts a fetched record set into v2 batches by their headers alone.

use bytes::Bytes;

use super::compression::{Compression, DEFAULT_MAX_DECOMPRESSED_BYTES};
use super::error::BatchError;
use super::legacy::{self, LegacyOrigin, MIN_MESSAGE_LEN_V0, MIN_MESSAGE_LEN_V1};
use super::records::first_control_key;
use super::{HEADER_LEN, LOG_OVERHEAD, MAGIC_V2, attr, field};

/// Smallest `batchLength` of a v2 batch: the header minus `LOG_OVERHEAD`.
const MIN_BATCH_LENGTH_V2: i32 = (HEADER_LEN - LOG_OVERHEAD) as i32;
/// Smallest `batchLength` in any format (a v0 message: crc, magic, attributes, two lengths).
const MIN_BATCH_LENGTH_ANY: i32 = MIN_MESSAGE_LEN_V0 as i32;

/// How a batch's timestamps are to be read (attribute bit 3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimestampType {
    /// Record timestamps are `baseTimestamp + timestampDelta`.
    CreateTime,
    /// Every record's timestamp is the batch's `maxTimestamp`, set by the broker.
    LogAppendTime,
}

/// The type of a control batch's marker (`ControlRecordType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ControlType {
    /// End of an aborted transaction (type 0).
    Abort,
    /// End of a committed transaction (type 1).
    Commit,
    /// Any other type id (KRaft metadata markers and future types).
    Unknown(i16),
    /// A control batch with no records left (compaction can do this).
    Empty,
}

/// One complete v2 record batch: a zero-copy slice of the record set, or a batch up-converted
/// from pre-0.11 messages ([`legacy_origin`](Self::legacy_origin)).
///
/// Construction checks the framing (length, magic 2, a known codec), so every accessor is
/// infallible. Nothing beyond the 61-byte header is read unless a method says so.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawBatch {
    bytes: Bytes,
    legacy: Option<LegacyOrigin>,
}

/// Walks a record set batch by batch.
///
/// Yields `Ok(RawBatch)` for each complete batch. A trailing partial batch ends the walk with
/// `None` (see [`partial_tail_len`](Self::partial_tail_len)); a malformed batch yields one `Err`
/// and then `None`, since nothing after it can be framed.
///
/// Pre-0.11 messages (magic 0 and 1) are up-converted as they come (see [`legacy`]): each
/// compressed message, and each run of uncompressed ones, comes out as one v2 batch that
/// [`RawBatch::legacy_origin`] marks. This is the only place the walker reads beyond headers.
#[derive(Debug)]
pub struct BatchWalker {
    records: Bytes,
    position: usize,
    partial_tail_len: usize,
    done: bool,
    max_decompressed_bytes: usize,
}

/// What the bytes at a position hold.
enum Frame {
    /// A complete batch of this many bytes.
    Batch(usize),
    /// A complete magic 0 or 1 message.
    Legacy,
    /// Not enough bytes to finish framing the batch.
    Partial,
}

/// Frames the batch at the start of `buf`. `position` is only for error messages.
fn frame(buf: &[u8], position: usize) -> Result<Frame, BatchError> {
    let (Some(base_offset), Some(batch_length)) = (
        read_be::<8>(buf, field::BASE_OFFSET).map(i64::from_be_bytes),
        read_be::<4>(buf, field::BATCH_LENGTH).map(i32::from_be_bytes),
    ) else {
        return Ok(Frame::Partial);
    };
    if batch_length < MIN_BATCH_LENGTH_ANY {
        return Err(BatchError::InvalidBatchLength {
            position,
            base_offset,
            batch_length,
            min_length: MIN_BATCH_LENGTH_ANY,
        });
    }
    let Some(&magic) = buf.get(field::MAGIC) else {
        return Ok(Frame::Partial);
    };
    let magic = magic as i8;
    let legacy_min = match magic {
        MAGIC_V2 => None,
        legacy::MAGIC_V0 => Some(MIN_MESSAGE_LEN_V0),
        legacy::MAGIC_V1 => Some(MIN_MESSAGE_LEN_V1),
        _ => return Err(BatchError::UnknownMagic { base_offset, magic }),
    };
    if let Some(min) = legacy_min {
        // Both minimums are small constants; batch_length >= 14 here, so the casts are exact.
        if (batch_length as usize) < min {
            return Err(BatchError::InvalidBatchLength {
                position,
                base_offset,
                batch_length,
                min_length: min as i32,
            });
        }
        if buf.len() < LOG_OVERHEAD + batch_length as usize {
            return Ok(Frame::Partial);
        }
        return Ok(Frame::Legacy);
    }
    if batch_length < MIN_BATCH_LENGTH_V2 {
        return Err(BatchError::InvalidBatchLength {
            position,
            base_offset,
            batch_length,
            min_length: MIN_BATCH_LENGTH_V2,
        });
    }
    // batch_length >= 49, so the cast is exact and the sum cannot overflow on 32- or 64-bit.
    let size = LOG_OVERHEAD + batch_length as usize;
    if buf.len() < size {
        return Ok(Frame::Partial);
    }
    // The header is complete from here on: size >= 61.
    let codec_id = buf[field::ATTRIBUTES + 1] & attr::COMPRESSION_MASK as u8;
    if Compression::from_id(codec_id).is_none() {
        return Err(BatchError::UnknownCompression {
            base_offset,
            codec_id,
        });
    }
    Ok(Frame::Batch(size))
}

/// `N` bytes at `at`, if present.
fn read_be<const N: usize>(buf: &[u8], at: usize) -> Option<[u8; N]> {
    buf.get(at..at.checked_add(N)?)?.try_into().ok()
}

impl BatchWalker {
    /// Starts walking a record set (a Fetch response partition's `records`).
    pub fn new(records: Bytes) -> Self {
        Self {
            records,
            position: 0,
            partial_tail_len: 0,
            done: false,
            max_decompressed_bytes: DEFAULT_MAX_DECOMPRESSED_BYTES,
        }
    }

    /// Bounds what one up-converted legacy entry may decompress to (default
    /// [`DEFAULT_MAX_DECOMPRESSED_BYTES`]); also the size of one run of uncompressed messages.
    pub fn max_decompressed_bytes(mut self, max_decompressed_bytes: usize) -> Self {
        self.max_decompressed_bytes = max_decompressed_bytes;
        self
    }

    /// Bytes of the trailing partial batch that ended the walk (0 if the record set ended on a
    /// batch boundary, or the walk has not ended yet). A fetch response may legally end with a
    /// truncated batch; the next fetch starts from the offset after the last complete batch.
    pub fn partial_tail_len(&self) -> usize {
        self.partial_tail_len
    }

    /// Byte position of the next batch in the record set.
    pub fn position(&self) -> usize {
        self.position
    }
}

impl Iterator for BatchWalker {
    type Item = Result<RawBatch, BatchError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let rest = self.records.get(self.position..).unwrap_or_default();
        match frame(rest, self.position) {
            Ok(Frame::Batch(size)) => {
                let bytes = self.records.slice(self.position..self.position + size);
                self.position += size;
                Some(Ok(RawBatch {
                    bytes,
                    legacy: None,
                }))
            }
            Ok(Frame::Legacy) => {
                match legacy::upconvert(&self.records, self.position, self.max_decompressed_bytes) {
                    Ok((batch, consumed)) => {
                        self.position += consumed;
                        Some(Ok(batch))
                    }
                    Err(err) => {
                        self.done = true;
                        Some(Err(err))
                    }
                }
            }
            Ok(Frame::Partial) => {
                self.partial_tail_len = rest.len();
                self.done = true;
                None
            }
            Err(err) => {
                self.done = true;
                Some(Err(err))
            }
        }
    }
}

impl std::iter::FusedIterator for BatchWalker {}

impl RawBatch {
    /// Wraps bytes that must hold exactly one complete v2 batch (for example a rebuilt batch).
    pub fn new(bytes: Bytes) -> Result<Self, BatchError> {
        let base_offset = read_be::<8>(&bytes, 0).map_or(0, i64::from_be_bytes);
        match frame(&bytes, 0)? {
            Frame::Batch(size) if size == bytes.len() => Ok(Self {
                bytes,
                legacy: None,
            }),
            Frame::Legacy => Err(BatchError::OldMagic {
                base_offset,
                magic: bytes[field::MAGIC] as i8,
            }),
            Frame::Batch(expected) => Err(BatchError::LengthMismatch {
                base_offset,
                len: bytes.len(),
                expected,
            }),
            Frame::Partial => {
                let expected = read_be::<4>(&bytes, field::BATCH_LENGTH).map_or(HEADER_LEN, |l| {
                    LOG_OVERHEAD + i32::from_be_bytes(l).max(0) as usize
                });
                Err(BatchError::LengthMismatch {
                    base_offset,
                    len: bytes.len(),
                    expected,
                })
            }
        }
    }

    /// A v2 batch up-converted from pre-0.11 messages (see [`legacy`]).
    pub(crate) fn upconverted(bytes: Bytes, origin: LegacyOrigin) -> Result<Self, BatchError> {
        let mut batch = Self::new(bytes)?;
        batch.legacy = Some(origin);
        Ok(batch)
    }

    /// For a batch the walker up-converted from pre-0.11 messages, where it came from.
    pub fn legacy_origin(&self) -> Option<LegacyOrigin> {
        self.legacy
    }

    /// The codec a rebuild of this batch writes: its own, or for an up-converted batch (which is
    /// uncompressed) the codec of the messages it came from.
    pub fn output_compression(&self) -> Compression {
        self.legacy
            .map_or_else(|| self.compression(), |origin| origin.compression)
    }

    /// Bytes the batch took in the record set: its size, or for an up-converted batch the size
    /// of the messages it came from.
    pub fn source_size(&self) -> usize {
        self.legacy
            .map_or(self.bytes.len(), |origin| origin.source_len)
    }

    /// The whole batch, header included (zero-copy).
    pub fn as_bytes(&self) -> &Bytes {
        &self.bytes
    }

    /// The whole batch, header included.
    pub fn into_bytes(self) -> Bytes {
        self.bytes
    }

    /// The 61-byte header.
    pub fn header(&self) -> &[u8; HEADER_LEN] {
        self.bytes[..HEADER_LEN]
            .try_into()
            .expect("a RawBatch is at least HEADER_LEN bytes, checked by frame()")
    }

    /// Everything after the header: the (possibly compressed) records. Zero-copy.
    pub fn payload(&self) -> Bytes {
        self.bytes.slice(HEADER_LEN..)
    }

    fn be<const N: usize>(&self, at: usize) -> [u8; N] {
        read_be(self.header(), at).expect("header fields lie inside the 61-byte header")
    }

    /// First offset of the batch (in the source log).
    pub fn base_offset(&self) -> i64 {
        i64::from_be_bytes(self.be(field::BASE_OFFSET))
    }

    /// Size minus `LOG_OVERHEAD` (12).
    pub fn batch_length(&self) -> i32 {
        i32::from_be_bytes(self.be(field::BATCH_LENGTH))
    }

    /// The leader epoch the source broker stamped.
    pub fn partition_leader_epoch(&self) -> i32 {
        i32::from_be_bytes(self.be(field::PARTITION_LEADER_EPOCH))
    }

    /// Always 2 (checked at construction).
    pub fn magic(&self) -> i8 {
        self.header()[field::MAGIC] as i8
    }

    /// The stored CRC-32C of bytes `21..end`.
    pub fn crc(&self) -> u32 {
        u32::from_be_bytes(self.be(field::CRC))
    }

    /// The attributes field.
    pub fn attributes(&self) -> i16 {
        i16::from_be_bytes(self.be(field::ATTRIBUTES))
    }

    /// The payload codec (checked at construction).
    pub fn compression(&self) -> Compression {
        Compression::from_id((self.attributes() & attr::COMPRESSION_MASK) as u8)
            .expect("codec id checked by frame()")
    }

    /// CreateTime or LogAppendTime (attribute bit 3).
    pub fn timestamp_type(&self) -> TimestampType {
        if self.attributes() & attr::LOG_APPEND_TIME != 0 {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    }

    /// Attribute bit 4: part of a transaction.
    pub fn is_transactional(&self) -> bool {
        self.attributes() & attr::TRANSACTIONAL != 0
    }

    /// Attribute bit 5: a transaction marker (or other control record).
    pub fn is_control(&self) -> bool {
        self.attributes() & attr::CONTROL != 0
    }

    /// Attribute bit 6: `baseTimestamp` holds the log cleaner's delete horizon.
    pub fn has_delete_horizon(&self) -> bool {
        self.attributes() & attr::DELETE_HORIZON != 0
    }

    /// `lastOffset - baseOffset`, kept even when compaction removed the last records.
    pub fn last_offset_delta(&self) -> i32 {
        i32::from_be_bytes(self.be(field::LAST_OFFSET_DELTA))
    }

    /// Timestamp of the first record (or the delete horizon, see
    /// [`has_delete_horizon`](Self::has_delete_horizon)).
    pub fn base_timestamp(&self) -> i64 {
        i64::from_be_bytes(self.be(field::BASE_TIMESTAMP))
    }

    /// Largest record timestamp, or the append time for LogAppendTime batches.
    pub fn max_timestamp(&self) -> i64 {
        i64::from_be_bytes(self.be(field::MAX_TIMESTAMP))
    }

    /// Producer id, -1 if none.
    pub fn producer_id(&self) -> i64 {
        i64::from_be_bytes(self.be(field::PRODUCER_ID))
    }

    /// Producer epoch, -1 if none.
    pub fn producer_epoch(&self) -> i16 {
        i16::from_be_bytes(self.be(field::PRODUCER_EPOCH))
    }

    /// Sequence of the first record, -1 if none.
    pub fn base_sequence(&self) -> i32 {
        i32::from_be_bytes(self.be(field::BASE_SEQUENCE))
    }

    /// Number of records in the payload, as the header claims.
    pub fn records_count(&self) -> i32 {
        i32::from_be_bytes(self.be(field::RECORDS_COUNT))
    }

    /// `baseOffset + lastOffsetDelta` (wrapping: a hostile header gives a meaningless value,
    /// never a panic).
    pub fn last_offset(&self) -> i64 {
        self.base_offset()
            .wrapping_add(i64::from(self.last_offset_delta()))
    }

    /// The offset after this batch: where the next fetch continues.
    pub fn next_offset(&self) -> i64 {
        self.last_offset().wrapping_add(1)
    }

    /// No offset gaps: `lastOffsetDelta + 1 == recordsCount > 0`. Brokers reject anything else
    /// from a producer.
    pub fn is_dense(&self) -> bool {
        let count = self.records_count();
        count > 0 && i64::from(self.last_offset_delta()) + 1 == i64::from(count)
    }

    /// Total size in bytes (`12 + batchLength`).
    pub fn size(&self) -> usize {
        self.bytes.len()
    }

    /// Recomputes the CRC over bytes `21..end` (reads the whole payload).
    pub fn verify_crc(&self) -> Result<(), BatchError> {
        let actual = crc32c::crc32c(&self.bytes[field::CRC_START..]);
        let expected = self.crc();
        if actual == expected {
            Ok(())
        } else {
            Err(BatchError::CrcMismatch {
                base_offset: self.base_offset(),
                expected,
                actual,
            })
        }
    }

    /// For a control batch, the type of its marker, read from the first record's key (version
    /// i16 >= 0, type i16). `Ok(None)` for data batches. Only the first record is parsed.
    pub fn control_type(&self) -> Result<Option<ControlType>, BatchError> {
        if !self.is_control() {
            return Ok(None);
        }
        let base_offset = self.base_offset();
        let invalid = |reason| BatchError::InvalidControlBatch {
            base_offset,
            reason,
        };
        if self.records_count() <= 0 {
            return Ok(Some(ControlType::Empty));
        }
        // Brokers write markers uncompressed; anything else is not a marker we can trust.
        if self.compression() != Compression::None {
            return Err(invalid("control batch is compressed"));
        }
        let key = first_control_key(&self.bytes[HEADER_LEN..]).map_err(invalid)?;
        let Some(key) = key else {
            return Err(invalid("control record has no key"));
        };
        let (Some(version), Some(kind)) = (read_be::<2>(key, 0), read_be::<2>(key, 2)) else {
            return Err(invalid("control record key shorter than 4 bytes"));
        };
        if i16::from_be_bytes(version) < 0 {
            return Err(invalid("control record key has a negative version"));
        }
        Ok(Some(match i16::from_be_bytes(kind) {
            0 => ControlType::Abort,
            1 => ControlType::Commit,
            other => ControlType::Unknown(other),
        }))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::batch::records::{BatchBuilder, Record};

    fn batch(base_offset: i64, values: &[&[u8]]) -> Bytes {
        let mut b = BatchBuilder::new(Compression::None).base_offset(base_offset);
        for (i, v) in values.iter().enumerate() {
            b.push(&Record::new(
                1_700_000_000_000 + i as i64,
                None,
                Some(Bytes::copy_from_slice(v)),
            ))
            .unwrap();
        }
        b.build().unwrap()
    }

    fn record_set(parts: &[Bytes]) -> Bytes {
        Bytes::from(parts.concat())
    }

    #[test]
    fn walks_complete_batches_zero_copy() {
        let a = batch(100, &[b"a", b"bb"]);
        let b = batch(102, &[b"ccc"]);
        let set = record_set(&[a.clone(), b.clone()]);
        let mut walker = BatchWalker::new(set.clone());
        let first = walker.next().unwrap().unwrap();
        assert_eq!(first.as_bytes(), &a);
        // Same backing memory: the batch is a slice of the record set.
        assert_eq!(first.as_bytes().as_ptr(), set.as_ptr());
        assert_eq!(first.base_offset(), 100);
        assert_eq!(first.last_offset(), 101);
        assert_eq!(first.next_offset(), 102);
        assert_eq!(first.records_count(), 2);
        assert!(first.is_dense());
        let second = walker.next().unwrap().unwrap();
        assert_eq!(second.as_bytes(), &b);
        assert!(walker.next().is_none());
        assert_eq!(walker.partial_tail_len(), 0);
        assert!(walker.next().is_none());
    }

    #[test]
    fn header_accessors_read_the_right_fields() {
        let bytes = BatchBuilder::new(Compression::Lz4)
            .base_offset(0x0102_0304_0506_0708)
            .partition_leader_epoch(7)
            .producer(4242, 3, 99)
            .transactional(true)
            .push_all(&[Record::new(5, None, None), Record::new(9, None, None)])
            .unwrap()
            .build()
            .unwrap();
        let b = RawBatch::new(bytes.clone()).unwrap();
        assert_eq!(b.base_offset(), 0x0102_0304_0506_0708);
        assert_eq!(b.batch_length() as usize, bytes.len() - 12);
        assert_eq!(b.partition_leader_epoch(), 7);
        assert_eq!(b.magic(), 2);
        assert_eq!(b.compression(), Compression::Lz4);
        assert_eq!(b.timestamp_type(), TimestampType::CreateTime);
        assert!(b.is_transactional());
        assert!(!b.is_control());
        assert!(!b.has_delete_horizon());
        assert_eq!(b.last_offset_delta(), 1);
        assert_eq!(b.base_timestamp(), 5);
        assert_eq!(b.max_timestamp(), 9);
        assert_eq!(b.producer_id(), 4242);
        assert_eq!(b.producer_epoch(), 3);
        assert_eq!(b.base_sequence(), 99);
        assert_eq!(b.records_count(), 2);
        assert_eq!(b.size(), bytes.len());
        assert_eq!(b.payload(), bytes.slice(61..));
        assert_eq!(b.attributes(), 0x10 | 3);
        b.verify_crc().unwrap();
        assert_eq!(b.control_type().unwrap(), None);
    }

    #[test]
    fn every_truncation_of_the_last_batch_is_a_clean_partial_tail() {
        let a = batch(0, &[b"first"]);
        let b = batch(1, &[b"second batch value"]);
        let full = record_set(&[a.clone(), b.clone()]);
        for cut in a.len()..full.len() {
            let mut walker = BatchWalker::new(full.slice(..cut));
            assert_eq!(walker.next().unwrap().unwrap().as_bytes(), &a, "cut {cut}");
            assert!(walker.next().is_none(), "cut {cut}");
            assert_eq!(walker.partial_tail_len(), cut - a.len(), "cut {cut}");
        }
    }

    #[test]
    fn bad_lengths_are_errors() {
        let good = batch(5, &[b"x"]);
        for (len, min) in [
            (-1i32, 14),
            (i32::MIN, 14),
            (0, 14),
            (13, 14),
            (14, 49),
            (48, 49),
        ] {
            let mut bytes = good.to_vec();
            bytes[8..12].copy_from_slice(&len.to_be_bytes());
            let mut walker = BatchWalker::new(Bytes::from(bytes));
            match walker.next() {
                Some(Err(BatchError::InvalidBatchLength {
                    batch_length,
                    min_length,
                    ..
                })) => {
                    assert_eq!((batch_length, min_length), (len, min));
                }
                other => panic!("length {len}: {other:?}"),
            }
            assert!(walker.next().is_none());
        }
    }

    #[test]
    fn huge_length_is_a_partial_tail_not_an_allocation() {
        let mut bytes = batch(5, &[b"x"]).to_vec();
        bytes[8..12].copy_from_slice(&i32::MAX.to_be_bytes());
        let mut walker = BatchWalker::new(Bytes::from(bytes.clone()));
        assert!(walker.next().is_none());
        assert_eq!(walker.partial_tail_len(), bytes.len());
    }

    #[test]
    fn old_magic_is_up_converted_or_reported_with_offset() {
        for magic in [0u8, 1] {
            // A v2 batch with magic 0/1 is read as a legacy message, whose CRC does not hold.
            let mut bytes = batch(77, &[b"x"]).to_vec();
            bytes[16] = magic;
            let err = BatchWalker::new(Bytes::from(bytes.clone()))
                .next()
                .unwrap()
                .unwrap_err();
            assert!(
                matches!(
                    err,
                    BatchError::LegacyCrcMismatch {
                        offset: 77,
                        inner: None,
                        ..
                    }
                ),
                "{err:?}"
            );
            let err = RawBatch::new(Bytes::from(bytes)).unwrap_err();
            assert!(
                matches!(err, BatchError::OldMagic { base_offset: 77, magic: m } if m == magic as i8)
            );
            assert_eq!(
                err.to_string(),
                format!(
                    "magic {magic} message at offset 77: a pre-0.11 message set, not a v2 batch"
                )
            );
        }
        let mut bytes = batch(77, &[b"x"]).to_vec();
        bytes[16] = 3;
        let err = BatchWalker::new(Bytes::from(bytes))
            .next()
            .unwrap()
            .unwrap_err();
        assert!(matches!(err, BatchError::UnknownMagic { magic: 3, .. }));
    }

    #[test]
    fn unknown_codec_is_an_error() {
        let mut bytes = batch(1, &[b"x"]).to_vec();
        bytes[22] |= 0x07;
        let err = BatchWalker::new(Bytes::from(bytes))
            .next()
            .unwrap()
            .unwrap_err();
        assert!(matches!(
            err,
            BatchError::UnknownCompression {
                codec_id: 7,
                base_offset: 1
            }
        ));
    }

    #[test]
    fn crc_mismatch_is_detected() {
        let mut bytes = batch(1, &[b"payload"]).to_vec();
        let last = bytes.len() - 2;
        bytes[last] ^= 1;
        let b = RawBatch::new(Bytes::from(bytes)).unwrap();
        assert!(matches!(
            b.verify_crc(),
            Err(BatchError::CrcMismatch { base_offset: 1, .. })
        ));
    }

    #[test]
    fn raw_batch_new_requires_exactly_one_batch() {
        let a = batch(1, &[b"x"]);
        assert!(RawBatch::new(a.clone()).is_ok());
        let two = record_set(&[a.clone(), a.clone()]);
        assert!(matches!(
            RawBatch::new(two),
            Err(BatchError::LengthMismatch { .. })
        ));
        assert!(matches!(
            RawBatch::new(a.slice(..40)),
            Err(BatchError::LengthMismatch { .. })
        ));
        assert!(matches!(
            RawBatch::new(Bytes::new()),
            Err(BatchError::LengthMismatch { .. })
        ));
    }

    #[test]
    fn control_types_are_read_from_the_first_key() {
        use crate::batch::records::end_txn_marker;
        let abort = RawBatch::new(end_txn_marker(ControlType::Abort, 10, 7, 0, 5)).unwrap();
        assert!(abort.is_control());
        assert!(abort.is_transactional());
        assert_eq!(abort.control_type().unwrap(), Some(ControlType::Abort));
        let commit = RawBatch::new(end_txn_marker(ControlType::Commit, 11, 7, 0, 5)).unwrap();
        assert_eq!(commit.control_type().unwrap(), Some(ControlType::Commit));

        let short_key = BatchBuilder::new(Compression::None)
            .control(true)
            .push_all(&[Record::new(0, Some(Bytes::from_static(&[0, 0, 0])), None)])
            .unwrap()
            .build()
            .unwrap();
        let err = RawBatch::new(short_key)
            .unwrap()
            .control_type()
            .unwrap_err();
        assert!(matches!(err, BatchError::InvalidControlBatch { .. }));

        let compressed = BatchBuilder::new(Compression::Gzip)
            .control(true)
            .push_all(&[Record::new(
                0,
                Some(Bytes::from_static(&[0, 0, 0, 0])),
                None,
            )])
            .unwrap()
            .build()
            .unwrap();
        let err = RawBatch::new(compressed)
            .unwrap()
            .control_type()
            .unwrap_err();
        assert!(matches!(err, BatchError::InvalidControlBatch { .. }));
    }

    proptest! {
        #[test]
        fn walker_never_panics_on_arbitrary_bytes(
            bytes in proptest::collection::vec(any::<u8>(), 0..512)
        ) {
            let bytes = Bytes::from(bytes);
            let len = bytes.len();
            let mut walker = BatchWalker::new(bytes);
            let mut seen = 0;
            for b in (&mut walker).flatten() {
                seen += b.source_size();
                let _ = (b.last_offset(), b.next_offset(), b.is_dense(), b.verify_crc());
                let _ = b.control_type();
            }
            prop_assert!(seen + walker.partial_tail_len() <= len);
        }

        #[test]
        fn walker_never_panics_on_mutated_batches(
            flips in proptest::collection::vec((0usize..200, any::<u8>()), 1..6),
        ) {
            let mut bytes = record_set(&[batch(3, &[b"abc", b"defg"]), batch(5, &[b"h"])]).to_vec();
            let n = bytes.len();
            for (at, v) in flips {
                bytes[at % n] = v;
            }
            for item in BatchWalker::new(Bytes::from(bytes)).flatten() {
                let _ = b_all(&item);
            }
        }
    }

    fn b_all(b: &RawBatch) -> i64 {
        let _ = (
            b.compression(),
            b.timestamp_type(),
            b.control_type(),
            b.payload(),
        );
        b.base_offset() ^ i64::from(b.records_count())
    }
}
