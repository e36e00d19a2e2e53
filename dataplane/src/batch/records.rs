//! The records inside a v2 batch: decoding (slow path, tests) and [`BatchBuilder`].
//!
//! Record layout (`DefaultRecord.java`), all varints zig-zag: `length varint, attributes int8,
//! timestampDelta varlong, offsetDelta varint, keyLength varint (-1 = null), key,
//! valueLength varint, value, headerCount varint, [headerKeyLength varint, headerKey,
//! headerValueLength varint (-1 = null), headerValue]*`.
//!
//! The decoder accepts what Kafka's Java reader accepts (any negative key or value length reads
//! as null, like `Utils.readBytes`), and rejects what it rejects (negative header counts or header
//! key lengths, a record whose fields do not fill exactly its declared length, bytes left after
//! the declared record count).

use std::ops::Range;

use bytes::Bytes;

use super::compression::{self, CodecError, Compression};
use super::error::BatchError;
use super::varint::{
    read_varint, read_varlong, varint_len, varlong_len, write_varint, write_varlong,
};
use super::walk::{ControlType, RawBatch, TimestampType};
use super::{HEADER_LEN, LOG_OVERHEAD, MAGIC_V2, attr, field};

/// A record header: key and nullable value.
pub type RecordHeader = (Bytes, Option<Bytes>);

/// Smallest encoded record: length, attributes, timestamp delta, offset delta, key length,
/// value length and header count, one byte each.
const MIN_RECORD_LEN: usize = 7;
/// Largest payload a batch can carry (`batchLength` is an i32).
const MAX_PAYLOAD_LEN: usize = i32::MAX as usize - (HEADER_LEN - LOG_OVERHEAD);

/// One decoded record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// Offset relative to the batch's base offset.
    pub offset_delta: i32,
    /// Absolute timestamp: `baseTimestamp + timestampDelta`, or the batch's `maxTimestamp` for
    /// LogAppendTime batches.
    pub timestamp: i64,
    /// Key, `None` for a null key (distinct from an empty key).
    pub key: Option<Bytes>,
    /// Value, `None` for a null value (a tombstone).
    pub value: Option<Bytes>,
    /// Headers in order (keys may repeat).
    pub headers: Vec<RecordHeader>,
}

impl Record {
    /// A record with no headers and offset delta 0 (builders assign offsets).
    pub fn new(timestamp: i64, key: Option<Bytes>, value: Option<Bytes>) -> Self {
        Self {
            offset_delta: 0,
            timestamp,
            key,
            value,
            headers: Vec::new(),
        }
    }

    /// The record's absolute offset in a batch starting at `base_offset` (wrapping, so hostile
    /// values never panic).
    pub fn offset(&self, base_offset: i64) -> i64 {
        base_offset.wrapping_add(i64::from(self.offset_delta))
    }
}

/// A bounds-checked reader over a byte slice; every error is a static reason.
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn u8(&mut self) -> Result<u8, &'static str> {
        let b = *self
            .buf
            .get(self.pos)
            .ok_or("record ends inside its attributes")?;
        self.pos += 1;
        Ok(b)
    }

    fn varint(&mut self) -> Result<i32, &'static str> {
        read_varint(self.buf, &mut self.pos)
    }

    fn varlong(&mut self) -> Result<i64, &'static str> {
        read_varlong(self.buf, &mut self.pos)
    }

    /// `len` bytes, checked against what is present.
    fn take(&mut self, len: usize, what: &'static str) -> Result<Range<usize>, &'static str> {
        if len > self.remaining() {
            return Err(what);
        }
        let range = self.pos..self.pos + len;
        self.pos += len;
        Ok(range)
    }

    /// A length-prefixed nullable field: any negative length is null, as in Java.
    fn nullable(&mut self, what: &'static str) -> Result<Option<Range<usize>>, &'static str> {
        let len = self.varint()?;
        match usize::try_from(len) {
            Ok(len) => self.take(len, what).map(Some),
            Err(_) => Ok(None),
        }
    }

    /// Enters a record: reads its length and returns a cursor limited to its body.
    fn record_body(&mut self) -> Result<Cursor<'a>, &'static str> {
        let len = self.varint()?;
        let len = usize::try_from(len).map_err(|_| "negative record length")?;
        let body = self.take(len, "record length beyond the end of the batch")?;
        Ok(Cursor {
            buf: &self.buf[..body.end],
            pos: body.start,
        })
    }
}

/// Parses one record from `data` at `*pos`.
fn parse_record(
    data: &Bytes,
    pos: &mut usize,
    base_timestamp: i64,
    log_append_time: Option<i64>,
) -> Result<Record, &'static str> {
    let mut outer = Cursor {
        buf: data,
        pos: *pos,
    };
    let mut r = outer.record_body()?;
    let _attributes = r.u8()?;
    let timestamp_delta = r.varlong()?;
    let offset_delta = r.varint()?;
    let key = r
        .nullable("key length beyond the record")?
        .map(|k| data.slice(k));
    let value = r
        .nullable("value length beyond the record")?
        .map(|v| data.slice(v));
    let count = r.varint()?;
    let count = usize::try_from(count).map_err(|_| "negative header count")?;
    if count > r.remaining() {
        return Err("header count larger than the record");
    }
    // Each header takes at least two bytes, so this bounds the allocation by bytes present.
    let mut headers = Vec::with_capacity(count.min(r.remaining() / 2));
    for _ in 0..count {
        let key_len = r.varint()?;
        let key_len = usize::try_from(key_len).map_err(|_| "negative header key length")?;
        let key = r.take(key_len, "header key length beyond the record")?;
        let value = r.nullable("header value length beyond the record")?;
        headers.push((data.slice(key), value.map(|v| data.slice(v))));
    }
    if r.remaining() != 0 {
        return Err("record fields do not fill its declared length");
    }
    *pos = outer.pos;
    Ok(Record {
        offset_delta,
        // Java adds with wrap-around; so do we, so that any encodable timestamp round-trips.
        timestamp: log_append_time.unwrap_or(base_timestamp.wrapping_add(timestamp_delta)),
        key,
        value,
        headers,
    })
}

/// The key of the first record of an uncompressed record payload (for control batches).
pub(crate) fn first_control_key(payload: &[u8]) -> Result<Option<&[u8]>, &'static str> {
    let mut outer = Cursor {
        buf: payload,
        pos: 0,
    };
    let mut r = outer.record_body()?;
    let _attributes = r.u8()?;
    let _timestamp_delta = r.varlong()?;
    let _offset_delta = r.varint()?;
    Ok(r.nullable("key length beyond the record")?
        .map(|k| &payload[k]))
}

/// Decodes every record of a batch, decompressing at most `max_decompressed_bytes`.
///
/// Keys, values and headers are zero-copy slices: of the batch itself when it is uncompressed,
/// of the decompressed buffer otherwise.
pub fn decode_records(
    batch: &RawBatch,
    max_decompressed_bytes: usize,
) -> Result<Vec<Record>, BatchError> {
    let base_offset = batch.base_offset();
    let codec = batch.compression();
    let count = batch.records_count();
    let count = usize::try_from(count)
        .map_err(|_| BatchError::InvalidRecordCount { base_offset, count })?;
    let data = match codec {
        Compression::None => batch.payload(),
        _ => Bytes::from(
            compression::decompress(codec, &batch.payload(), max_decompressed_bytes).map_err(
                |source| match source {
                    CodecError::LimitExceeded {
                        max_decompressed_bytes,
                    } => BatchError::DecompressedTooLarge {
                        base_offset,
                        codec,
                        max_decompressed_bytes,
                    },
                    source => BatchError::Decompress {
                        base_offset,
                        codec,
                        source,
                    },
                },
            )?,
        ),
    };
    let log_append_time = match batch.timestamp_type() {
        TimestampType::LogAppendTime => Some(batch.max_timestamp()),
        TimestampType::CreateTime => None,
    };
    let base_timestamp = batch.base_timestamp();
    // The count is hostile: never reserve more records than the bytes could hold.
    let mut records = Vec::with_capacity(count.min(data.len() / MIN_RECORD_LEN));
    let mut pos = 0;
    for index in 0..count {
        let record =
            parse_record(&data, &mut pos, base_timestamp, log_append_time).map_err(|reason| {
                BatchError::CorruptRecord {
                    base_offset,
                    index,
                    reason,
                }
            })?;
        records.push(record);
    }
    if pos != data.len() {
        return Err(BatchError::CorruptRecord {
            base_offset,
            index: count,
            reason: "bytes remain after the declared record count",
        });
    }
    Ok(records)
}

/// Builds one v2 batch: dense offset deltas unless told otherwise, correct CRC.
///
/// Defaults match what a plain (non-idempotent) producer writes: base offset 0, partition leader
/// epoch -1, producer id/epoch/sequence -1, CreateTime, not transactional, not control.
/// `baseTimestamp` is the first record's timestamp and `maxTimestamp` the largest one, like
/// `MemoryRecordsBuilder`.
#[derive(Clone, Debug)]
pub struct BatchBuilder {
    compression: Compression,
    base_offset: i64,
    partition_leader_epoch: i32,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    transactional: bool,
    control: bool,
    log_append_time: Option<i64>,
    delete_horizon: Option<i64>,
    last_offset_delta: Option<i32>,
    /// Encoded, uncompressed records.
    records: Vec<u8>,
    count: usize,
    base_timestamp: Option<i64>,
    max_timestamp: Option<i64>,
    last_delta: Option<i32>,
}

impl BatchBuilder {
    /// An empty builder for this codec.
    pub fn new(compression: Compression) -> Self {
        Self {
            compression,
            base_offset: 0,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
            transactional: false,
            control: false,
            log_append_time: None,
            delete_horizon: None,
            last_offset_delta: None,
            records: Vec::new(),
            count: 0,
            base_timestamp: None,
            max_timestamp: None,
            last_delta: None,
        }
    }

    /// Sets the base offset (0 for anything sent to a broker).
    pub fn base_offset(mut self, base_offset: i64) -> Self {
        self.base_offset = base_offset;
        self
    }

    /// Sets the partition leader epoch.
    pub fn partition_leader_epoch(mut self, epoch: i32) -> Self {
        self.partition_leader_epoch = epoch;
        self
    }

    /// Sets producer id, epoch and base sequence.
    pub fn producer(mut self, producer_id: i64, producer_epoch: i16, base_sequence: i32) -> Self {
        self.producer_id = producer_id;
        self.producer_epoch = producer_epoch;
        self.base_sequence = base_sequence;
        self
    }

    /// Sets the transactional attribute.
    pub fn transactional(mut self, transactional: bool) -> Self {
        self.transactional = transactional;
        self
    }

    /// Sets the control attribute (for building transaction markers in tests and tools).
    pub fn control(mut self, control: bool) -> Self {
        self.control = control;
        self
    }

    /// Marks the batch LogAppendTime with this append time as `maxTimestamp`, the way a broker
    /// stamps batches of a `LogAppendTime` topic (record deltas keep their create times).
    pub fn log_append_time(mut self, append_time_ms: i64) -> Self {
        self.log_append_time = Some(append_time_ms);
        self
    }

    /// Sets the delete-horizon attribute with `baseTimestamp = horizon_ms`, the way the log
    /// cleaner writes it. Must be called before the first record is pushed.
    pub fn delete_horizon(mut self, horizon_ms: i64) -> Self {
        self.delete_horizon = Some(horizon_ms);
        self
    }

    /// Overrides `lastOffsetDelta` (it must not be below the last record's delta), to build
    /// batches whose trailing records compaction removed.
    pub fn last_offset_delta(mut self, last_offset_delta: i32) -> Self {
        self.last_offset_delta = Some(last_offset_delta);
        self
    }

    /// Appends records with dense offset deltas; consuming form for chains.
    pub fn push_all(mut self, records: &[Record]) -> Result<Self, BatchError> {
        for record in records {
            self.push(record)?;
        }
        Ok(self)
    }

    /// Appends a record with the next dense offset delta (its own `offset_delta` is ignored).
    pub fn push(&mut self, record: &Record) -> Result<(), BatchError> {
        let delta = match self.last_delta {
            None => 0,
            Some(last) => last.checked_add(1).ok_or(BatchError::BatchTooLarge {
                records: self.count,
                bytes: self.records.len(),
            })?,
        };
        self.push_at(delta, record)
    }

    /// Appends a record at an explicit offset delta, which must exceed the previous one (for
    /// reproducing compacted batches).
    pub fn push_at(&mut self, offset_delta: i32, record: &Record) -> Result<(), BatchError> {
        if offset_delta < 0 || self.last_delta.is_some_and(|last| offset_delta <= last) {
            return Err(BatchError::InvalidBuilderInput {
                reason: "offset deltas must be non-negative and increasing",
            });
        }
        let base = *self
            .base_timestamp
            .get_or_insert(self.delete_horizon.unwrap_or(record.timestamp));
        let timestamp_delta = record.timestamp.wrapping_sub(base);
        let body_len = record_body_len(offset_delta, timestamp_delta, record).ok_or(
            BatchError::BatchTooLarge {
                records: self.count + 1,
                bytes: usize::MAX,
            },
        )?;
        let new_len = self.records.len() + varint_len(body_len) + body_len as usize;
        if new_len > MAX_PAYLOAD_LEN {
            return Err(BatchError::BatchTooLarge {
                records: self.count + 1,
                bytes: new_len,
            });
        }
        write_record(
            &mut self.records,
            body_len,
            offset_delta,
            timestamp_delta,
            record,
        );
        self.count += 1;
        self.last_delta = Some(offset_delta);
        self.max_timestamp = Some(
            self.max_timestamp
                .map_or(record.timestamp, |m| m.max(record.timestamp)),
        );
        Ok(())
    }

    /// Records pushed so far.
    pub fn len(&self) -> usize {
        self.count
    }

    /// No record pushed yet.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Size of the batch if it were uncompressed (header plus encoded records).
    pub fn uncompressed_len(&self) -> usize {
        HEADER_LEN + self.records.len()
    }

    /// Encodes the batch: header, compressed records, CRC.
    pub fn build(&self) -> Result<Bytes, BatchError> {
        let count = i32::try_from(self.count).map_err(|_| BatchError::BatchTooLarge {
            records: self.count,
            bytes: self.records.len(),
        })?;
        let last_delta = self.last_delta.unwrap_or(-1);
        let last_offset_delta = match self.last_offset_delta {
            Some(d) if d < last_delta => {
                return Err(BatchError::InvalidBuilderInput {
                    reason: "lastOffsetDelta below the last record's offset delta",
                });
            }
            Some(d) => d,
            // Java writes 0 for an empty batch's delta... but an empty batch is never sent.
            None => last_delta.max(0),
        };
        let payload = compression::compress(self.compression, &self.records).map_err(|source| {
            BatchError::Compress {
                codec: self.compression,
                source,
            }
        })?;
        let total = HEADER_LEN + payload.len();
        if payload.len() > MAX_PAYLOAD_LEN {
            return Err(BatchError::BatchTooLarge {
                records: self.count,
                bytes: total,
            });
        }
        let mut attributes = i16::from(self.compression.id());
        if self.log_append_time.is_some() {
            attributes |= attr::LOG_APPEND_TIME;
        }
        if self.transactional {
            attributes |= attr::TRANSACTIONAL;
        }
        if self.control {
            attributes |= attr::CONTROL;
        }
        if self.delete_horizon.is_some() {
            attributes |= attr::DELETE_HORIZON;
        }
        let base_timestamp = self.base_timestamp.or(self.delete_horizon).unwrap_or(-1);
        let max_timestamp = self.log_append_time.or(self.max_timestamp).unwrap_or(-1);

        let mut out = Vec::with_capacity(total);
        out.extend_from_slice(&self.base_offset.to_be_bytes());
        out.extend_from_slice(&((total - LOG_OVERHEAD) as i32).to_be_bytes());
        out.extend_from_slice(&self.partition_leader_epoch.to_be_bytes());
        out.push(MAGIC_V2 as u8);
        out.extend_from_slice(&[0; 4]); // CRC, patched below.
        out.extend_from_slice(&attributes.to_be_bytes());
        out.extend_from_slice(&last_offset_delta.to_be_bytes());
        out.extend_from_slice(&base_timestamp.to_be_bytes());
        out.extend_from_slice(&max_timestamp.to_be_bytes());
        out.extend_from_slice(&self.producer_id.to_be_bytes());
        out.extend_from_slice(&self.producer_epoch.to_be_bytes());
        out.extend_from_slice(&self.base_sequence.to_be_bytes());
        out.extend_from_slice(&count.to_be_bytes());
        debug_assert_eq!(out.len(), HEADER_LEN);
        out.extend_from_slice(&payload);
        let crc = crc32c::crc32c(&out[field::CRC_START..]);
        out[field::CRC..field::CRC + 4].copy_from_slice(&crc.to_be_bytes());
        Ok(Bytes::from(out))
    }
}

/// Size of a record's body (everything after its length varint), or `None` if a field exceeds
/// what the format can express.
fn record_body_len(offset_delta: i32, timestamp_delta: i64, record: &Record) -> Option<i32> {
    fn nullable_len(field: Option<&Bytes>) -> Option<usize> {
        match field {
            None => Some(varint_len(-1)),
            Some(b) => Some(varint_len(i32::try_from(b.len()).ok()?) + b.len()),
        }
    }
    let mut len = 1 + varlong_len(timestamp_delta) + varint_len(offset_delta);
    len += nullable_len(record.key.as_ref())?;
    len += nullable_len(record.value.as_ref())?;
    len += varint_len(i32::try_from(record.headers.len()).ok()?);
    for (key, value) in &record.headers {
        len = len.checked_add(nullable_len(Some(key))?)?;
        len = len.checked_add(nullable_len(value.as_ref())?)?;
    }
    i32::try_from(len).ok()
}

fn write_record(
    out: &mut Vec<u8>,
    body_len: i32,
    offset_delta: i32,
    timestamp_delta: i64,
    record: &Record,
) {
    fn write_nullable(out: &mut Vec<u8>, field: Option<&Bytes>) {
        match field {
            None => write_varint(out, -1),
            Some(b) => {
                // Lengths were checked to fit an i32 by record_body_len.
                write_varint(out, b.len() as i32);
                out.extend_from_slice(b);
            }
        }
    }
    write_varint(out, body_len);
    out.push(0); // Record attributes: unused by Kafka.
    write_varlong(out, timestamp_delta);
    write_varint(out, offset_delta);
    write_nullable(out, record.key.as_ref());
    write_nullable(out, record.value.as_ref());
    write_varint(out, record.headers.len() as i32);
    for (key, value) in &record.headers {
        write_nullable(out, Some(key));
        write_nullable(out, value.as_ref());
    }
}

/// A transaction marker batch as a broker writes it (for tests and tools): one uncompressed
/// control record, key `version 0, type`, value `version 0, coordinator epoch`.
pub fn end_txn_marker(
    kind: ControlType,
    base_offset: i64,
    producer_id: i64,
    producer_epoch: i16,
    coordinator_epoch: i32,
) -> Bytes {
    let type_id: i16 = match kind {
        ControlType::Abort => 0,
        ControlType::Commit => 1,
        ControlType::Unknown(id) => id,
        ControlType::Empty => -1,
    };
    let mut key = Vec::with_capacity(4);
    key.extend_from_slice(&0i16.to_be_bytes());
    key.extend_from_slice(&type_id.to_be_bytes());
    let mut value = Vec::with_capacity(6);
    value.extend_from_slice(&0i16.to_be_bytes());
    value.extend_from_slice(&coordinator_epoch.to_be_bytes());
    let mut builder = BatchBuilder::new(Compression::None)
        .base_offset(base_offset)
        .producer(producer_id, producer_epoch, -1)
        .transactional(true)
        .control(true);
    if kind != ControlType::Empty {
        builder
            .push(&Record::new(
                0,
                Some(Bytes::from(key)),
                Some(Bytes::from(value)),
            ))
            .expect("one small record always fits a batch");
    }
    builder
        .build()
        .expect("an uncompressed marker batch always encodes")
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn arb_bytes(max: usize) -> impl Strategy<Value = Bytes> {
        proptest::collection::vec(any::<u8>(), 0..max).prop_map(Bytes::from)
    }

    fn arb_record() -> impl Strategy<Value = Record> {
        let timestamp = prop_oneof![
            any::<i64>(),
            Just(-1i64),
            Just(i64::MIN),
            Just(i64::MAX),
            1_500_000_000_000i64..1_900_000_000_000,
        ];
        (
            timestamp,
            proptest::option::of(arb_bytes(64)),
            proptest::option::of(arb_bytes(300)),
            proptest::collection::vec((arb_bytes(16), proptest::option::of(arb_bytes(32))), 0..4),
        )
            .prop_map(|(timestamp, key, value, headers)| Record {
                offset_delta: 0,
                timestamp,
                key,
                value,
                headers,
            })
    }

    fn dense(records: &[Record]) -> Vec<Record> {
        records
            .iter()
            .enumerate()
            .map(|(i, r)| Record {
                offset_delta: i as i32,
                ..r.clone()
            })
            .collect()
    }

    #[test]
    fn known_record_encoding() {
        // One record, key "k", value "v", one header ("h", null), timestamp = base.
        let record = Record {
            offset_delta: 0,
            timestamp: 1000,
            key: Some(Bytes::from_static(b"k")),
            value: Some(Bytes::from_static(b"v")),
            headers: vec![(Bytes::from_static(b"h"), None)],
        };
        let bytes = BatchBuilder::new(Compression::None)
            .push_all(&[record])
            .unwrap()
            .build()
            .unwrap();
        // length 11 -> 0x16, attrs 0, ts delta 0, offset delta 0, key len 1 -> 0x02, 'k',
        // value len 1 -> 0x02, 'v', 1 header -> 0x02, key len 1 -> 0x02, 'h', null -> 0x01.
        assert_eq!(
            &bytes[61..],
            &[
                0x16, 0, 0, 0, 0x02, b'k', 0x02, b'v', 0x02, 0x02, b'h', 0x01
            ]
        );
        let batch = RawBatch::new(bytes).unwrap();
        assert_eq!(batch.base_timestamp(), 1000);
        assert_eq!(batch.max_timestamp(), 1000);
        assert_eq!(batch.producer_id(), -1);
        assert_eq!(batch.producer_epoch(), -1);
        assert_eq!(batch.base_sequence(), -1);
        assert_eq!(batch.partition_leader_epoch(), -1);
        assert_eq!(batch.base_offset(), 0);
        batch.verify_crc().unwrap();
    }

    #[test]
    fn uncompressed_decoding_is_zero_copy() {
        let bytes = BatchBuilder::new(Compression::None)
            .push_all(&[Record::new(1, Some(Bytes::from_static(b"key")), None)])
            .unwrap()
            .build()
            .unwrap();
        let batch = RawBatch::new(bytes.clone()).unwrap();
        let records = decode_records(&batch, 1 << 20).unwrap();
        let key = records[0].key.as_ref().unwrap();
        let start = bytes.as_ptr() as usize;
        let at = key.as_ptr() as usize;
        assert!(
            at >= start && at < start + bytes.len(),
            "key points into the batch"
        );
    }

    #[test]
    fn log_append_time_reads_max_timestamp() {
        let bytes = BatchBuilder::new(Compression::Zstd)
            .log_append_time(42_000)
            .push_all(&[Record::new(1, None, None), Record::new(5, None, None)])
            .unwrap()
            .build()
            .unwrap();
        let batch = RawBatch::new(bytes).unwrap();
        assert_eq!(batch.timestamp_type(), TimestampType::LogAppendTime);
        let ts: Vec<i64> = decode_records(&batch, 1 << 20)
            .unwrap()
            .iter()
            .map(|r| r.timestamp)
            .collect();
        assert_eq!(ts, vec![42_000, 42_000]);
    }

    #[test]
    fn delete_horizon_keeps_record_timestamps() {
        let bytes = BatchBuilder::new(Compression::None)
            .delete_horizon(9_999)
            .push_all(&[Record::new(1, None, None), Record::new(5, None, None)])
            .unwrap()
            .build()
            .unwrap();
        let batch = RawBatch::new(bytes).unwrap();
        assert!(batch.has_delete_horizon());
        assert_eq!(batch.base_timestamp(), 9_999);
        let ts: Vec<i64> = decode_records(&batch, 1 << 20)
            .unwrap()
            .iter()
            .map(|r| r.timestamp)
            .collect();
        assert_eq!(ts, vec![1, 5]);
    }

    #[test]
    fn count_mismatch_and_trailing_bytes_are_errors() {
        let bytes = BatchBuilder::new(Compression::None)
            .push_all(&[Record::new(1, None, None), Record::new(2, None, None)])
            .unwrap()
            .build()
            .unwrap();
        for (count, expect_index) in [(3i32, 2usize), (1, 1)] {
            let mut b = bytes.to_vec();
            b[57..61].copy_from_slice(&count.to_be_bytes());
            let batch = RawBatch::new(Bytes::from(b)).unwrap();
            match decode_records(&batch, 1 << 20) {
                Err(BatchError::CorruptRecord { index, .. }) => assert_eq!(index, expect_index),
                other => panic!("count {count}: {other:?}"),
            }
        }
        let mut b = bytes.to_vec();
        b[57..61].copy_from_slice(&(-1i32).to_be_bytes());
        let batch = RawBatch::new(Bytes::from(b)).unwrap();
        assert!(matches!(
            decode_records(&batch, 1 << 20),
            Err(BatchError::InvalidRecordCount { count: -1, .. })
        ));
    }

    #[test]
    fn huge_record_count_does_not_allocate_by_it() {
        let bytes = BatchBuilder::new(Compression::None)
            .push_all(&[Record::new(1, None, None)])
            .unwrap()
            .build()
            .unwrap();
        let mut b = bytes.to_vec();
        b[57..61].copy_from_slice(&i32::MAX.to_be_bytes());
        let batch = RawBatch::new(Bytes::from(b)).unwrap();
        assert!(matches!(
            decode_records(&batch, 1 << 20),
            Err(BatchError::CorruptRecord { .. })
        ));
    }

    #[test]
    fn negative_header_count_and_key_length_are_errors() {
        // Hand-made record body: attrs, ts 0, delta 0, null key, null value, header count -1.
        let body = [0u8, 0, 0, 0x01, 0x01, 0x01];
        let mut rec = vec![(body.len() as u8) << 1];
        rec.extend_from_slice(&body);
        assert_eq!(
            parse_record(&Bytes::from(rec), &mut 0, 0, None).unwrap_err(),
            "negative header count"
        );
        let body = [0u8, 0, 0, 0x01, 0x01, 0x02, 0x01, 0x01];
        let mut rec = vec![(body.len() as u8) << 1];
        rec.extend_from_slice(&body);
        assert_eq!(
            parse_record(&Bytes::from(rec), &mut 0, 0, None).unwrap_err(),
            "negative header key length"
        );
    }

    #[test]
    fn decompression_bomb_is_bounded() {
        let big = Record::new(0, None, Some(Bytes::from(vec![0u8; 8 << 20])));
        for codec in [
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let bytes = BatchBuilder::new(codec)
                .push_all(std::slice::from_ref(&big))
                .unwrap()
                .build()
                .unwrap();
            let batch = RawBatch::new(bytes).unwrap();
            assert!(
                matches!(
                    decode_records(&batch, 1 << 20),
                    Err(BatchError::DecompressedTooLarge {
                        max_decompressed_bytes: 1048576,
                        ..
                    })
                ),
                "{codec}"
            );
        }
    }

    #[test]
    fn builder_rejects_non_increasing_deltas() {
        let mut b = BatchBuilder::new(Compression::None);
        b.push_at(3, &Record::new(0, None, None)).unwrap();
        assert!(b.push_at(3, &Record::new(0, None, None)).is_err());
        assert!(b.push_at(-1, &Record::new(0, None, None)).is_err());
        assert!(b.clone().last_offset_delta(2).build().is_err());
        let batch = RawBatch::new(b.last_offset_delta(9).build().unwrap()).unwrap();
        assert_eq!(batch.last_offset_delta(), 9);
        assert!(!batch.is_dense());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn records_round_trip_every_codec(
            codec_id in 0u8..5,
            records in proptest::collection::vec(arb_record(), 1..40),
        ) {
            let codec = Compression::from_id(codec_id).unwrap();
            let bytes = BatchBuilder::new(codec).push_all(&records).unwrap().build().unwrap();
            let batch = RawBatch::new(bytes).unwrap();
            batch.verify_crc().unwrap();
            prop_assert_eq!(batch.compression(), codec);
            prop_assert!(batch.is_dense());
            prop_assert_eq!(batch.records_count() as usize, records.len());
            prop_assert_eq!(batch.base_timestamp(), records[0].timestamp);
            prop_assert_eq!(batch.max_timestamp(), records.iter().map(|r| r.timestamp).max().unwrap());
            prop_assert_eq!(decode_records(&batch, usize::MAX).unwrap(), dense(&records));
        }

        #[test]
        fn sparse_deltas_round_trip(
            codec_id in 0u8..5,
            gaps in proptest::collection::vec(1i32..5, 1..20),
        ) {
            let codec = Compression::from_id(codec_id).unwrap();
            let mut b = BatchBuilder::new(codec);
            let mut delta = 0;
            let mut expected = Vec::new();
            for (i, gap) in gaps.iter().enumerate() {
                let r = Record { offset_delta: delta, ..Record::new(i as i64, None, Some(Bytes::from(vec![i as u8; i]))) };
                b.push_at(delta, &r).unwrap();
                expected.push(r);
                delta += gap;
            }
            let batch = RawBatch::new(b.build().unwrap()).unwrap();
            prop_assert_eq!(decode_records(&batch, usize::MAX).unwrap(), expected);
        }

        #[test]
        fn decoder_never_panics_on_mutated_payloads(
            codec_id in 0u8..5,
            records in proptest::collection::vec(arb_record(), 1..5),
            flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8),
        ) {
            let codec = Compression::from_id(codec_id).unwrap();
            let bytes = BatchBuilder::new(codec).push_all(&records).unwrap().build().unwrap();
            let mut b = bytes.to_vec();
            let payload_len = b.len() - HEADER_LEN;
            for (at, v) in flips {
                if payload_len > 0 {
                    b[HEADER_LEN + at % payload_len] = v;
                }
            }
            let batch = RawBatch::new(Bytes::from(b)).unwrap();
            let _ = decode_records(&batch, 1 << 20);
        }
    }
}
