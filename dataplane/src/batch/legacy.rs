//! Pre-0.11 message sets (magic 0 and 1), up-converted to v2 batches for the slow path.
//!
//! Brokers before 0.11, and later brokers whose topic sets an old `message.format.version`,
//! store *messages* rather than batches (`LegacyRecord.java`), each behind the same 12-byte log
//! overhead as a batch (`offset int64, size int32`), so the walker sees the magic at the same
//! byte 16:
//!
//! ```text
//! crc uint32 (CRC-32 of magic..end), magic int8, attributes int8 (bits 0..2 codec, bit 3
//! LogAppendTime, magic 1 only), timestamp int64 (magic 1 only), key (int32 length, -1 = null),
//! value (int32 length, -1 = null)
//! ```
//!
//! A compressed message (a *wrapper*) carries in its value a compressed message set of
//! uncompressed inner messages (`AbstractLegacyRecordBatch.DeepRecordsIterator`):
//! - in a magic 0 wrapper the inner offsets are absolute;
//! - in a magic 1 wrapper they are relative (0, 1, ..., with gaps after compaction) and the
//!   wrapper's offset is the absolute offset of the last inner message, so
//!   `absolute = wrapper - last inner + inner` (a wrapper offset of 0 means base 0, as Kafka
//!   reads some librdkafka produce data);
//! - LogAppendTime on a magic 1 wrapper gives every magic 1 inner message the wrapper's timestamp;
//! - lz4 in magic 0 wrappers carries a wrong frame header checksum (KAFKA-3160: computed over the
//!   magic number too); Kafka ignores it for magic 0, and so do we.
//!
//! The walker hands [`upconvert`] each legacy *entry*: one compressed wrapper, or a run of
//! consecutive uncompressed messages (one per message would cost one produce round trip per
//! record). It becomes one uncompressed v2 batch with the same offsets (compaction gaps kept, and
//! the wrapper's last offset as `lastOffsetDelta`), keys, values (a null value stays a tombstone),
//! no headers, and CreateTime timestamps: a magic 1 message's own (or its wrapper's append time),
//! `NO_TIMESTAMP` (-1) for magic 0, which is what Kafka's own up-conversion writes
//! (`LogValidator`) and what a 4.x broker accepts under CreateTime. The batch remembers where it
//! came from ([`LegacyOrigin`]), so [`classify`](super::classify) sends it down the slow path
//! ([`SlowReason::OldFormat`](super::SlowReason::OldFormat)) and [`rebuild`](super::rebuild)
//! compresses the output with the wrapper's codec. Keys and values are copied once into that
//! batch and once more by the rebuild: the price of one slow path for every format, paid only by
//! data older than 0.11.
//!
//! Every CRC is verified, as the Java consumer does with `check.crcs=true`: the rebuilt batch
//! gets a fresh CRC, so an unverified corrupt message would be laundered into a valid one.
//! Every length, offset and count is checked against the bytes present before it is used.

use std::ops::Range;

use bytes::Bytes;

use super::compression::{self, CodecError, Compression};
use super::error::BatchError;
use super::records::{BatchBuilder, Record};
use super::walk::RawBatch;
use super::{LOG_OVERHEAD, field};

/// Message format of Kafka 0.8 to 0.9: no timestamps.
pub const MAGIC_V0: i8 = 0;
/// Message format of Kafka 0.10: a timestamp per message.
pub const MAGIC_V1: i8 = 1;
/// `RecordBatch.NO_TIMESTAMP`: the timestamp of a magic 0 message.
pub const NO_TIMESTAMP: i64 = -1;
/// `LegacyRecord.RECORD_OVERHEAD_V0`: crc, magic, attributes, key and value lengths.
pub(crate) const MIN_MESSAGE_LEN_V0: usize = 14;
/// `LegacyRecord.RECORD_OVERHEAD_V1`: the same plus the timestamp.
pub(crate) const MIN_MESSAGE_LEN_V1: usize = 22;

/// Attribute bits of a legacy message.
const CODEC_MASK: u8 = 0x07;
const LOG_APPEND_TIME: u8 = 0x08;

/// Byte positions inside a message (after the log overhead).
mod at {
    pub const CRC: usize = 0;
    pub const MAGIC: usize = 4;
    pub const ATTRIBUTES: usize = 5;
    pub const TIMESTAMP: usize = 6;
    pub const KEY_SIZE_V0: usize = 6;
    pub const KEY_SIZE_V1: usize = 14;
}

/// Where an up-converted batch came from. Carried by its [`RawBatch`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LegacyOrigin {
    /// The entry's magic (for a run of uncompressed messages, the lowest in it).
    pub magic: i8,
    /// The entry's codec: what the rebuilt batches are compressed with.
    pub compression: Compression,
    /// Bytes the entry took in the record set.
    pub source_len: usize,
}

/// One parsed message; key and value are zero-copy slices of the buffer it was read from.
struct Message {
    magic: i8,
    attributes: u8,
    /// As stored (magic 1), or [`NO_TIMESTAMP`] (magic 0).
    timestamp: i64,
    key: Option<Bytes>,
    value: Option<Bytes>,
}

/// What is wrong with one message, before the caller names where it is.
enum Bad {
    Reason(&'static str),
    Crc { expected: u32, actual: u32 },
}

impl Bad {
    fn at(self, offset: i64, inner: Option<usize>) -> BatchError {
        match self {
            Bad::Reason(reason) => BatchError::CorruptLegacyMessage {
                offset,
                inner,
                reason,
            },
            Bad::Crc { expected, actual } => BatchError::LegacyCrcMismatch {
                offset,
                inner,
                expected,
                actual,
            },
        }
    }
}

/// CRC-32 (IEEE, as `java.util.zip.CRC32`) of a message's bytes from the magic on.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = flate2::Crc::new();
    crc.update(bytes);
    crc.sum()
}

fn be_i32(b: &[u8], at: usize) -> Option<i32> {
    Some(i32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn be_i64(b: &[u8], at: usize) -> Option<i64> {
    Some(i64::from_be_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// A length-prefixed nullable field at `*pos`: any negative length is null, as `Utils.sizeDelimited`.
fn sized(body: &[u8], pos: &mut usize, what: &'static str) -> Result<Option<Range<usize>>, Bad> {
    let len = be_i32(body, *pos).ok_or(Bad::Reason("message ends inside a length field"))?;
    *pos += 4;
    let Ok(len) = usize::try_from(len) else {
        return Ok(None);
    };
    let end = pos
        .checked_add(len)
        .filter(|&end| end <= body.len())
        .ok_or(Bad::Reason(what))?;
    let range = *pos..end;
    *pos = end;
    Ok(Some(range))
}

/// Parses the message in `data[body]` (crc to end, no log overhead) and checks its CRC.
///
/// Bytes after the value are ignored, as Kafka's reader does (the CRC covers them).
fn parse(data: &Bytes, body: Range<usize>) -> Result<Message, Bad> {
    let b = &data[body.clone()];
    if b.len() < MIN_MESSAGE_LEN_V0 {
        return Err(Bad::Reason("message shorter than the 14-byte minimum"));
    }
    let magic = b[at::MAGIC] as i8;
    let key_size_at = match magic {
        MAGIC_V0 => at::KEY_SIZE_V0,
        MAGIC_V1 if b.len() < MIN_MESSAGE_LEN_V1 => {
            return Err(Bad::Reason(
                "magic 1 message shorter than the 22-byte minimum",
            ));
        }
        MAGIC_V1 => at::KEY_SIZE_V1,
        _ => return Err(Bad::Reason("magic is neither 0 nor 1")),
    };
    let expected = u32::from_be_bytes(
        b[at::CRC..at::CRC + 4]
            .try_into()
            .expect("the length was checked above"),
    );
    let actual = crc32(&b[at::MAGIC..]);
    if expected != actual {
        return Err(Bad::Crc { expected, actual });
    }
    let timestamp = if magic == MAGIC_V1 {
        be_i64(b, at::TIMESTAMP).expect("the length was checked above")
    } else {
        NO_TIMESTAMP
    };
    let mut pos = key_size_at;
    let key = sized(b, &mut pos, "key length beyond the message")?;
    let value = sized(b, &mut pos, "value length beyond the message")?;
    let slice = |r: Range<usize>| data.slice(body.start + r.start..body.start + r.end);
    Ok(Message {
        magic,
        attributes: b[at::ATTRIBUTES],
        timestamp,
        key: key.map(slice),
        value: value.map(slice),
    })
}

/// Frames the legacy message at the start of `buf`: its offset and total length (log overhead
/// included), if it is complete, long enough for its magic and has magic 0 or 1.
fn frame(buf: &[u8]) -> Option<(i64, usize)> {
    let offset = be_i64(buf, 0)?;
    let size = usize::try_from(be_i32(buf, 8)?).ok()?;
    let min = match *buf.get(field::MAGIC)? as i8 {
        MAGIC_V0 => MIN_MESSAGE_LEN_V0,
        MAGIC_V1 => MIN_MESSAGE_LEN_V1,
        _ => return None,
    };
    let total = LOG_OVERHEAD.checked_add(size)?;
    (size >= min && buf.len() >= total).then_some((offset, total))
}

/// Up-converts the legacy entry at `records[position..]` (which the walker framed as one
/// complete magic 0 or 1 message) into one v2 batch, and returns it with the bytes it consumed.
///
/// A run of uncompressed messages ends before a compressed one, a v2 batch, a partial or
/// unreadable message, an offset that does not increase, or when it reaches
/// `max_decompressed_bytes`; the walker continues from there, so the messages before a corrupt
/// one still replicate and the corrupt one stops the walk with its own error.
pub(crate) fn upconvert(
    records: &Bytes,
    position: usize,
    max_decompressed_bytes: usize,
) -> Result<(RawBatch, usize), BatchError> {
    let buf = records.get(position..).unwrap_or_default();
    let (offset, len) = frame(buf).ok_or(BatchError::CorruptLegacyMessage {
        offset: be_i64(buf, 0).unwrap_or(-1),
        inner: None,
        reason: "not a complete magic 0 or 1 message",
    })?;
    let body = position + LOG_OVERHEAD..position + len;
    let message = parse(records, body).map_err(|bad| bad.at(offset, None))?;
    let codec_id = message.attributes & CODEC_MASK;
    let codec = match Compression::from_id(codec_id) {
        Some(Compression::None) => {
            return upconvert_run(
                records,
                position,
                (offset, len, message),
                max_decompressed_bytes,
            );
        }
        Some(Compression::Zstd) => {
            return Err(BatchError::CorruptLegacyMessage {
                offset,
                inner: None,
                reason: "zstd compression needs magic 2",
            });
        }
        Some(codec) => codec,
        None => {
            return Err(BatchError::UnknownCompression {
                base_offset: offset,
                codec_id,
            });
        }
    };
    let batch = upconvert_wrapper(offset, &message, codec, len, max_decompressed_bytes)?;
    Ok((batch, len))
}

/// `first` (the uncompressed message at `position`, `first_len` bytes) and the uncompressed
/// messages right after it, into one batch.
fn upconvert_run(
    records: &Bytes,
    position: usize,
    (first_offset, first_len, first): (i64, usize, Message),
    max_decompressed_bytes: usize,
) -> Result<(RawBatch, usize), BatchError> {
    let mut builder = BatchBuilder::new(Compression::None).base_offset(first_offset);
    builder.push_at(0, &Record::new(first.timestamp, first.key, first.value))?;
    let mut magic = first.magic;
    let mut last_delta = 0i32;
    let mut pos = position + first_len;
    while let Some((offset, len)) = frame(records.get(pos..).unwrap_or_default()) {
        if pos - position + len > max_decompressed_bytes {
            break;
        }
        // Offsets that go back end the run (the shard skips what it has passed); a gap wider
        // than an i32 starts a new batch.
        let Some(delta) = offset
            .checked_sub(first_offset)
            .and_then(|d| i32::try_from(d).ok())
            .filter(|&d| d > last_delta)
        else {
            break;
        };
        // A wrapper is an entry of its own; a corrupt message stops the walk when the walker
        // comes back to it as the first of the next entry.
        let Some(message) = parse(records, pos + LOG_OVERHEAD..pos + len)
            .ok()
            .filter(|m| m.attributes & CODEC_MASK == 0)
        else {
            break;
        };
        builder.push_at(
            delta,
            &Record::new(message.timestamp, message.key, message.value),
        )?;
        last_delta = delta;
        magic = magic.min(message.magic);
        pos += len;
    }
    let origin = LegacyOrigin {
        magic,
        compression: Compression::None,
        source_len: pos - position,
    };
    Ok((
        RawBatch::upconverted(builder.build()?, origin)?,
        pos - position,
    ))
}

/// The inner messages of a compressed wrapper at `offset` into one batch.
fn upconvert_wrapper(
    offset: i64,
    wrapper: &Message,
    codec: Compression,
    source_len: usize,
    max_decompressed_bytes: usize,
) -> Result<RawBatch, BatchError> {
    let corrupt = |inner, reason| BatchError::CorruptLegacyMessage {
        offset,
        inner,
        reason,
    };
    let value = wrapper
        .value
        .as_ref()
        .ok_or(corrupt(None, "compressed message with a null value"))?;
    let inflated = inflate_wrapper(offset, wrapper.magic, codec, value, max_decompressed_bytes)?;
    let inner = inner_messages(offset, wrapper, &inflated)?;
    let Some(&(last_inner, _)) = inner.last() else {
        return Err(corrupt(None, "compressed message holds no inner messages"));
    };
    // Magic 1: relative inner offsets, anchored at the wrapper's (the last) offset.
    let absolute_base = match wrapper.magic {
        MAGIC_V1 if offset == 0 => 0,
        MAGIC_V1 => offset
            .checked_sub(last_inner)
            .filter(|_| offset >= last_inner)
            .ok_or(corrupt(None, "wrapper offset below its last inner offset"))?,
        _ => 0,
    };
    let first = absolute_base.wrapping_add(inner[0].0);
    let mut builder = BatchBuilder::new(Compression::None).base_offset(first);
    let mut last_delta = -1i32;
    for (index, (inner_offset, record)) in inner.iter().enumerate() {
        let absolute = absolute_base
            .checked_add(*inner_offset)
            .ok_or(corrupt(Some(index), "inner offset overflows"))?;
        if absolute > offset {
            return Err(corrupt(
                Some(index),
                "inner offset beyond the wrapper's offset",
            ));
        }
        let delta = absolute
            .checked_sub(first)
            .and_then(|d| i32::try_from(d).ok())
            .filter(|&d| d > last_delta)
            .ok_or(corrupt(Some(index), "inner offsets do not increase"))?;
        builder.push_at(delta, record)?;
        last_delta = delta;
    }
    let last_offset_delta = i32::try_from(offset - first)
        .map_err(|_| corrupt(None, "inner offsets span more than 2^31"))?;
    let bytes = builder.last_offset_delta(last_offset_delta).build()?;
    let origin = LegacyOrigin {
        magic: wrapper.magic,
        compression: codec,
        source_len,
    };
    RawBatch::upconverted(bytes, origin)
}

/// A wrapper's value decompressed, bounded by `max_decompressed_bytes`.
fn inflate_wrapper(
    offset: i64,
    magic: i8,
    codec: Compression,
    value: &[u8],
    max_decompressed_bytes: usize,
) -> Result<Bytes, BatchError> {
    let inflated =
        inflate(codec, magic, value, max_decompressed_bytes).map_err(|source| match source {
            CodecError::LimitExceeded {
                max_decompressed_bytes,
            } => BatchError::DecompressedTooLarge {
                base_offset: offset,
                codec,
                max_decompressed_bytes,
            },
            source => BatchError::Decompress {
                base_offset: offset,
                codec,
                source,
            },
        })?;
    Ok(Bytes::from(inflated))
}

/// The inner messages of a decompressed wrapper: their offsets as stored, and the records
/// (timestamps as Kafka's up-conversion gives them).
fn inner_messages(
    offset: i64,
    wrapper: &Message,
    inflated: &Bytes,
) -> Result<Vec<(i64, Record)>, BatchError> {
    let corrupt = |inner, reason| BatchError::CorruptLegacyMessage {
        offset,
        inner,
        reason,
    };
    let wrapper_log_append_time =
        wrapper.magic == MAGIC_V1 && wrapper.attributes & LOG_APPEND_TIME != 0;
    // Inner offsets as stored, and the records; every inner message takes at least 26 bytes.
    let mut inner: Vec<(i64, Record)> =
        Vec::with_capacity(inflated.len() / (LOG_OVERHEAD + MIN_MESSAGE_LEN_V0));
    let mut pos = 0;
    while pos < inflated.len() {
        let index = Some(inner.len());
        let (Some(inner_offset), Some(size)) = (be_i64(inflated, pos), be_i32(inflated, pos + 8))
        else {
            return Err(corrupt(index, "bytes remain after the last inner message"));
        };
        let size = usize::try_from(size)
            .ok()
            .filter(|&s| s >= MIN_MESSAGE_LEN_V0)
            .ok_or(corrupt(
                index,
                "inner message shorter than the 14-byte minimum",
            ))?;
        let body = pos + LOG_OVERHEAD..pos + LOG_OVERHEAD + size;
        if body.end > inflated.len() {
            return Err(corrupt(
                index,
                "inner message beyond the end of the decompressed set",
            ));
        }
        let message = parse(inflated, body.clone()).map_err(|bad| bad.at(offset, index))?;
        if message.attributes & CODEC_MASK != 0 {
            return Err(corrupt(index, "inner message is compressed"));
        }
        let timestamp = match message.magic {
            MAGIC_V0 => NO_TIMESTAMP,
            _ if wrapper_log_append_time => wrapper.timestamp,
            _ => message.timestamp,
        };
        inner.push((
            inner_offset,
            Record::new(timestamp, message.key, message.value),
        ));
        pos = body.end;
    }
    Ok(inner)
}

/// Decompresses a wrapper's value.
fn inflate(
    codec: Compression,
    magic: i8,
    value: &[u8],
    max_decompressed_bytes: usize,
) -> Result<Vec<u8>, CodecError> {
    if codec == Compression::Lz4 && magic == MAGIC_V0 {
        return compression::decompress_lz4_ignoring_header_checksum(value, max_decompressed_bytes);
    }
    compression::decompress(codec, value, max_decompressed_bytes)
}

/// Encoders of the legacy formats, for tests, tools and fuzz seeds: what pre-0.11 producers and
/// brokers wrote.
pub mod encode {
    use bytes::Bytes;

    use super::{CODEC_MASK, LOG_APPEND_TIME, MAGIC_V0, MAGIC_V1, crc32};
    use crate::batch::compression::{self, CodecError, Compression};

    /// One message to encode.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct LegacyMessage {
        /// Absolute offset, or relative inside a magic 1 wrapper.
        pub offset: i64,
        /// Ignored for magic 0.
        pub timestamp: i64,
        /// `None` is a null key.
        pub key: Option<Bytes>,
        /// `None` is a null value (a tombstone).
        pub value: Option<Bytes>,
    }

    /// Attribute byte of a message.
    pub fn attributes(codec: Compression, log_append_time: bool) -> u8 {
        let mut a = codec.id() & CODEC_MASK;
        if log_append_time {
            a |= LOG_APPEND_TIME;
        }
        a
    }

    /// One message with its log overhead, as it sits in a log or a fetch response. `magic`
    /// must be 0 or 1; the CRC is correct.
    pub fn message(magic: i8, attributes: u8, m: &LegacyMessage) -> Vec<u8> {
        assert!(
            magic == MAGIC_V0 || magic == MAGIC_V1,
            "legacy magic is 0 or 1"
        );
        let field_len = |f: &Option<Bytes>| f.as_ref().map_or(0, Bytes::len);
        let body_len =
            if magic == MAGIC_V1 { 22 } else { 14 } + field_len(&m.key) + field_len(&m.value);
        let mut out = Vec::with_capacity(12 + body_len);
        out.extend_from_slice(&m.offset.to_be_bytes());
        out.extend_from_slice(&(body_len as i32).to_be_bytes());
        out.extend_from_slice(&[0; 4]); // CRC, below.
        out.push(magic as u8);
        out.push(attributes);
        if magic == MAGIC_V1 {
            out.extend_from_slice(&m.timestamp.to_be_bytes());
        }
        for f in [&m.key, &m.value] {
            match f {
                None => out.extend_from_slice(&(-1i32).to_be_bytes()),
                Some(b) => {
                    out.extend_from_slice(&(b.len() as i32).to_be_bytes());
                    out.extend_from_slice(b);
                }
            }
        }
        let crc = crc32(&out[16..]);
        out[12..16].copy_from_slice(&crc.to_be_bytes());
        out
    }

    /// Uncompressed messages back to back (a log segment's content, or a wrapper's before
    /// compression).
    pub fn message_set(magic: i8, messages: &[LegacyMessage]) -> Vec<u8> {
        messages.iter().flat_map(|m| message(magic, 0, m)).collect()
    }

    /// Compresses a wrapper's inner set as the Java client of that format did: snappy with
    /// xerial framing, lz4 frames whose header checksum is broken for magic 0 (KAFKA-3160).
    pub fn compress(codec: Compression, magic: i8, set: &[u8]) -> Result<Vec<u8>, CodecError> {
        let mut out = compression::compress(codec, set)?;
        if codec == Compression::Lz4 && magic == MAGIC_V0 {
            // Our frames have no content size: magic 4, FLG, BD, HC.
            out[6] = (compression::xxh32(&out[..6]) >> 8) as u8;
        }
        Ok(out)
    }

    /// A compressed wrapper at `offset` holding `inner` (encoded with `magic`): the wrapper's
    /// key is null and its value the compressed set.
    pub fn wrapper(
        magic: i8,
        codec: Compression,
        log_append_time: bool,
        offset: i64,
        timestamp: i64,
        inner: &[LegacyMessage],
    ) -> Result<Vec<u8>, CodecError> {
        let value = compress(codec, magic, &message_set(magic, inner))?;
        Ok(message(
            magic,
            attributes(codec, log_append_time),
            &LegacyMessage {
                offset,
                timestamp,
                key: None,
                value: Some(Bytes::from(value)),
            },
        ))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::encode::{self, LegacyMessage};
    use super::*;
    use crate::batch::{
        BatchWalker, Path, RebuildOptions, SlowReason, classify, decode_records, rebuild,
    };

    fn msg(offset: i64, timestamp: i64, key: Option<&str>, value: Option<&str>) -> LegacyMessage {
        LegacyMessage {
            offset,
            timestamp,
            key: key.map(|k| Bytes::copy_from_slice(k.as_bytes())),
            value: value.map(|v| Bytes::copy_from_slice(v.as_bytes())),
        }
    }

    /// What a v2 consumer sees: (offset, timestamp, key, value) of every record, in order.
    type Seen = Vec<(i64, i64, Option<Bytes>, Option<Bytes>)>;

    fn walk(set: Vec<u8>) -> (Vec<RawBatch>, Seen) {
        let mut batches = Vec::new();
        let mut seen = Vec::new();
        for b in BatchWalker::new(Bytes::from(set)) {
            let b = b.unwrap();
            b.verify_crc().unwrap();
            for r in decode_records(&b, usize::MAX).unwrap() {
                assert!(r.headers.is_empty());
                seen.push((r.offset(b.base_offset()), r.timestamp, r.key, r.value));
            }
            batches.push(b);
        }
        (batches, seen)
    }

    fn expected(msgs: &[LegacyMessage], magic: i8, base: i64) -> Seen {
        msgs.iter()
            .map(|m| {
                let ts = if magic == MAGIC_V0 { -1 } else { m.timestamp };
                (base + m.offset, ts, m.key.clone(), m.value.clone())
            })
            .collect()
    }

    #[test]
    fn uncompressed_runs_become_one_batch_with_gaps_tombstones_and_timestamps() {
        for magic in [MAGIC_V0, MAGIC_V1] {
            let msgs = [
                msg(10, 1_000, Some("k1"), Some("v1")),
                msg(11, 1_001, None, Some("")),
                // Compaction removed 12..=14.
                msg(15, 990, Some("k1"), None),
                msg(16, 1_005, Some(""), Some("v4")),
            ];
            let (batches, seen) = walk(encode::message_set(magic, &msgs));
            assert_eq!(batches.len(), 1, "magic {magic}");
            let b = &batches[0];
            assert_eq!(b.base_offset(), 10);
            assert_eq!(b.last_offset(), 16);
            assert_eq!(b.records_count(), 4);
            assert_eq!(b.compression(), Compression::None);
            assert_eq!(b.producer_id(), -1);
            let origin = b.legacy_origin().unwrap();
            assert_eq!(origin.magic, magic);
            assert_eq!(origin.compression, Compression::None);
            assert_eq!(origin.source_len, encode::message_set(magic, &msgs).len());
            assert_eq!(seen, expected(&msgs, magic, 0));
            assert_eq!(
                classify(b, 0, 1 << 20),
                Path::Slow(SlowReason::OldFormat { magic })
            );
        }
    }

    #[test]
    fn wrappers_in_every_codec_and_both_magics() {
        for magic in [MAGIC_V0, MAGIC_V1] {
            for codec in [Compression::Gzip, Compression::Snappy, Compression::Lz4] {
                // Magic 0 inner offsets are absolute, magic 1 relative; both with a gap.
                let base = if magic == MAGIC_V0 { 500 } else { 0 };
                let inner = [
                    msg(base, 7, Some("a"), Some("x".repeat(300).as_str())),
                    msg(base + 1, 8, None, None),
                    msg(base + 3, 9, Some("c"), Some("z")),
                ];
                let wrapper = encode::wrapper(magic, codec, false, 503, 9, &inner).unwrap();
                let (batches, seen) = walk(wrapper.clone());
                assert_eq!(batches.len(), 1, "{codec} magic {magic}");
                let b = &batches[0];
                assert_eq!((b.base_offset(), b.last_offset()), (500, 503));
                assert_eq!(b.legacy_origin().unwrap().compression, codec);
                assert_eq!(b.legacy_origin().unwrap().source_len, wrapper.len());
                assert_eq!(b.output_compression(), codec);
                let shift = if magic == MAGIC_V0 { 0 } else { 500 };
                assert_eq!(
                    seen,
                    expected(&inner, magic, shift),
                    "{codec} magic {magic}"
                );

                // The rebuild compresses with the wrapper's codec and keeps every record.
                let out = rebuild(b, &RebuildOptions::default()).unwrap();
                assert_eq!(out.len(), 1);
                let rebuilt = RawBatch::new(out[0].bytes.clone()).unwrap();
                assert_eq!(rebuilt.compression(), codec);
                assert!(rebuilt.legacy_origin().is_none());
                assert_eq!(
                    out[0].source_offsets().collect::<Vec<_>>(),
                    vec![500, 501, 503]
                );
            }
        }
    }

    #[test]
    fn magic_0_lz4_is_read_with_either_header_checksum_but_magic_1_needs_the_right_one() {
        let inner = [msg(0, 0, Some("k"), Some("v"))];
        let set = encode::message_set(MAGIC_V0, &inner);
        // The correct checksum (what lz4 itself writes) inside a magic 0 wrapper.
        let correct = compression::compress(Compression::Lz4, &set).unwrap();
        let mut broken = correct.clone();
        broken[6] = (compression::xxh32(&broken[..6]) >> 8) as u8;
        assert_ne!(correct[6], broken[6]);
        for (magic, value, ok) in [
            (MAGIC_V0, &correct, true),
            (MAGIC_V0, &broken, true),
            (MAGIC_V1, &correct, true),
            (MAGIC_V1, &broken, false),
        ] {
            let inner_set = if magic == MAGIC_V0 {
                set.clone()
            } else {
                encode::message_set(MAGIC_V1, &inner)
            };
            let value = if magic == MAGIC_V1 && ok {
                compression::compress(Compression::Lz4, &inner_set).unwrap()
            } else if magic == MAGIC_V1 {
                let mut v = compression::compress(Compression::Lz4, &inner_set).unwrap();
                v[6] = (compression::xxh32(&v[..6]) >> 8) as u8;
                v
            } else {
                value.clone()
            };
            let wrapper = encode::message(
                magic,
                encode::attributes(Compression::Lz4, false),
                &LegacyMessage {
                    offset: 0,
                    timestamp: 5,
                    key: None,
                    value: Some(Bytes::from(value)),
                },
            );
            let got = BatchWalker::new(Bytes::from(wrapper)).next().unwrap();
            assert_eq!(got.is_ok(), ok, "magic {magic}: {got:?}");
            if !ok {
                assert!(matches!(
                    got,
                    Err(BatchError::Decompress {
                        codec: Compression::Lz4,
                        ..
                    })
                ));
            }
        }
    }

    #[test]
    fn raw_snappy_wrappers_are_read() {
        let inner = [msg(0, 3, Some("k"), Some("v")), msg(1, 4, None, Some("w"))];
        let raw = snap::raw::Encoder::new()
            .compress_vec(&encode::message_set(MAGIC_V1, &inner))
            .unwrap();
        let wrapper = encode::message(
            MAGIC_V1,
            encode::attributes(Compression::Snappy, false),
            &LegacyMessage {
                offset: 41,
                timestamp: 4,
                key: None,
                value: Some(Bytes::from(raw)),
            },
        );
        let (_, seen) = walk(wrapper);
        assert_eq!(seen, expected(&inner, MAGIC_V1, 40));
    }

    #[test]
    fn log_append_time_wrappers_stamp_their_inner_messages() {
        let inner = [
            msg(0, 1, Some("a"), Some("1")),
            msg(1, 2, Some("b"), Some("2")),
        ];
        let wrapper =
            encode::wrapper(MAGIC_V1, Compression::Gzip, true, 9, 77_777, &inner).unwrap();
        let (batches, seen) = walk(wrapper);
        assert!(seen.iter().all(|s| s.1 == 77_777), "{seen:?}");
        // Out as CreateTime: a LogAppendTime batch is refused from producers.
        let out = rebuild(&batches[0], &RebuildOptions::default()).unwrap();
        let rebuilt = RawBatch::new(out[0].bytes.clone()).unwrap();
        assert_eq!(
            rebuilt.timestamp_type(),
            crate::batch::TimestampType::CreateTime
        );
        // An uncompressed LogAppendTime message already holds the append time.
        let m = encode::message(
            MAGIC_V1,
            encode::attributes(Compression::None, true),
            &msg(3, 55, None, Some("x")),
        );
        assert_eq!(walk(m).1[0].1, 55);
    }

    #[test]
    fn a_record_set_mixing_formats_walks_in_order() {
        let v0 = encode::message_set(
            MAGIC_V0,
            &[msg(0, 0, None, Some("a")), msg(1, 0, None, Some("b"))],
        );
        let w1 = encode::wrapper(
            MAGIC_V1,
            Compression::Snappy,
            false,
            4,
            20,
            &[msg(0, 20, None, Some("c")), msg(2, 21, None, Some("d"))],
        )
        .unwrap();
        let v1 = encode::message_set(MAGIC_V1, &[msg(5, 30, None, Some("e"))]);
        let v2 = crate::batch::BatchBuilder::new(Compression::None)
            .base_offset(6)
            .push_all(&[Record::new(40, None, Some(Bytes::from_static(b"f")))])
            .unwrap()
            .build()
            .unwrap();
        let tail = encode::message_set(MAGIC_V1, &[msg(7, 50, None, Some("g"))]);
        let set = [&v0[..], &w1, &v1, &v2, &tail[..tail.len() - 3]].concat();
        let mut walker = BatchWalker::new(Bytes::from(set));
        let got: Vec<RawBatch> = (&mut walker).map(Result::unwrap).collect();
        let spans: Vec<(i64, i64, bool)> = got
            .iter()
            .map(|b| {
                (
                    b.base_offset(),
                    b.last_offset(),
                    b.legacy_origin().is_some(),
                )
            })
            .collect();
        assert_eq!(
            spans,
            vec![(0, 1, true), (2, 4, true), (5, 5, true), (6, 6, false)]
        );
        assert_eq!(walker.partial_tail_len(), tail.len() - 3);
    }

    #[test]
    fn a_corrupt_message_stops_the_walk_after_the_good_ones() {
        let good = encode::message_set(
            MAGIC_V1,
            &[msg(0, 1, None, Some("a")), msg(1, 1, None, Some("b"))],
        );
        let mut bad = encode::message(MAGIC_V1, 0, &msg(2, 1, None, Some("c")));
        let last = bad.len() - 1;
        bad[last] ^= 0xff;
        let mut walker = BatchWalker::new(Bytes::from([&good[..], &bad].concat()));
        let first = walker.next().unwrap().unwrap();
        assert_eq!((first.base_offset(), first.records_count()), (0, 2));
        let err = walker.next().unwrap().unwrap_err();
        assert!(
            matches!(
                err,
                BatchError::LegacyCrcMismatch {
                    offset: 2,
                    inner: None,
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(
            err.to_string()
                .starts_with("pre-0.11 message at offset 2: CRC mismatch")
        );
        assert!(walker.next().is_none());
    }

    #[test]
    #[allow(clippy::too_many_lines)] // a table of corruptions, one case per block
    fn corrupt_wrappers_are_named() {
        let inner = [msg(0, 1, None, Some("a")), msg(1, 1, None, Some("b"))];
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (
                encode::message(
                    MAGIC_V1,
                    encode::attributes(Compression::Gzip, false),
                    &msg(1, 0, None, None),
                ),
                "compressed message with a null value",
            ),
            (
                encode::message(
                    MAGIC_V1,
                    encode::attributes(Compression::Zstd, false),
                    &msg(1, 0, None, Some("x")),
                ),
                "zstd compression needs magic 2",
            ),
            (
                encode::wrapper(MAGIC_V1, Compression::Gzip, false, 0, 0, &[]).unwrap(),
                "compressed message holds no inner messages",
            ),
            (
                // Relative offsets 0 and 1 cannot end at absolute offset 0 < 1 unless offset 0.
                encode::wrapper(MAGIC_V1, Compression::Gzip, false, 0, 0, &inner).unwrap(),
                "inner offset beyond the wrapper's offset",
            ),
            (
                encode::wrapper(MAGIC_V0, Compression::Gzip, false, 0, 0, &inner).unwrap(),
                "inner offset beyond the wrapper's offset",
            ),
            (
                encode::wrapper(
                    MAGIC_V0,
                    Compression::Gzip,
                    false,
                    9,
                    0,
                    &[msg(5, 0, None, None), msg(5, 0, None, None)],
                )
                .unwrap(),
                "inner offsets do not increase",
            ),
        ];
        for (bytes, reason) in cases {
            let err = BatchWalker::new(Bytes::from(bytes))
                .next()
                .unwrap()
                .unwrap_err();
            assert!(err.to_string().contains(reason), "{reason}: {err}");
        }
        // A compressed inner message.
        let nested =
            encode::wrapper(MAGIC_V1, Compression::Gzip, false, 0, 0, &inner[..1]).unwrap();
        let value = compression::compress(Compression::Gzip, &nested).unwrap();
        let outer = encode::message(
            MAGIC_V1,
            encode::attributes(Compression::Gzip, false),
            &LegacyMessage {
                offset: 0,
                timestamp: 0,
                key: None,
                value: Some(Bytes::from(value)),
            },
        );
        let err = BatchWalker::new(Bytes::from(outer))
            .next()
            .unwrap()
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "pre-0.11 message at offset 0, inner message #0: inner message is compressed"
        );
        // A corrupt inner CRC.
        let mut set = encode::message_set(MAGIC_V1, &inner);
        let last = set.len() - 1;
        set[last] ^= 1;
        let outer = encode::message(
            MAGIC_V1,
            encode::attributes(Compression::Gzip, false),
            &LegacyMessage {
                offset: 1,
                timestamp: 0,
                key: None,
                value: Some(Bytes::from(
                    compression::compress(Compression::Gzip, &set).unwrap(),
                )),
            },
        );
        let err = BatchWalker::new(Bytes::from(outer))
            .next()
            .unwrap()
            .unwrap_err();
        assert!(
            matches!(
                err,
                BatchError::LegacyCrcMismatch {
                    offset: 1,
                    inner: Some(1),
                    ..
                }
            ),
            "{err:?}"
        );
    }

    #[test]
    fn decompression_is_bounded() {
        let big = "z".repeat(100_000);
        let inner = [msg(0, 0, None, Some(big.as_str()))];
        let wrapper = encode::wrapper(MAGIC_V1, Compression::Gzip, false, 0, 0, &inner).unwrap();
        let err = BatchWalker::new(Bytes::from(wrapper))
            .max_decompressed_bytes(10_000)
            .next()
            .unwrap()
            .unwrap_err();
        assert!(
            matches!(err, BatchError::DecompressedTooLarge { base_offset: 0, .. }),
            "{err:?}"
        );
    }

    #[test]
    fn runs_split_at_the_size_bound_and_at_wide_gaps() {
        let msgs: Vec<LegacyMessage> = (0..10)
            .map(|i| msg(i, 0, None, Some("0123456789")))
            .collect();
        let one = encode::message(MAGIC_V1, 0, &msgs[0]).len();
        let set = encode::message_set(MAGIC_V1, &msgs);
        let sizes: Vec<i32> = BatchWalker::new(Bytes::from(set))
            .max_decompressed_bytes(3 * one)
            .map(|b| b.unwrap().records_count())
            .collect();
        assert_eq!(sizes, vec![3, 3, 3, 1]);

        let wide = [msg(0, 0, None, Some("a")), msg(1 << 33, 0, None, Some("b"))];
        let (batches, seen) = walk(encode::message_set(MAGIC_V0, &wide));
        assert_eq!(batches.len(), 2);
        assert_eq!(seen, expected(&wide, MAGIC_V0, 0));
    }

    #[test]
    fn short_and_bad_lengths_are_errors_or_partial_tails() {
        // A magic 1 message declaring 20 bytes (below its 22-byte minimum).
        let mut m = encode::message(MAGIC_V1, 0, &msg(3, 0, None, None));
        m[8..12].copy_from_slice(&20i32.to_be_bytes());
        let err = BatchWalker::new(Bytes::from(m))
            .next()
            .unwrap()
            .unwrap_err();
        assert!(
            matches!(err, BatchError::InvalidBatchLength { min_length: 22, .. }),
            "{err:?}"
        );
        // A key length beyond the message.
        let mut m = encode::message(MAGIC_V0, 0, &msg(3, 0, Some("kk"), None));
        m[18..22].copy_from_slice(&1000i32.to_be_bytes());
        let crc = crc32(&m[16..]);
        m[12..16].copy_from_slice(&crc.to_be_bytes());
        let err = BatchWalker::new(Bytes::from(m))
            .next()
            .unwrap()
            .unwrap_err();
        assert!(
            err.to_string().contains("key length beyond the message"),
            "{err}"
        );
        // Every truncation of a message is a partial tail.
        let m = encode::message(MAGIC_V1, 0, &msg(3, 0, Some("k"), Some("v")));
        for cut in 0..m.len() {
            let mut walker = BatchWalker::new(Bytes::copy_from_slice(&m[..cut]));
            assert!(walker.next().is_none(), "cut {cut}");
            assert_eq!(walker.partial_tail_len(), cut);
        }
        // RawBatch::new refuses a legacy message: it is not a v2 batch.
        assert!(matches!(
            RawBatch::new(Bytes::from(m)),
            Err(BatchError::OldMagic {
                base_offset: 3,
                magic: 1
            })
        ));
    }

    fn arb_message() -> impl Strategy<Value = (u8, LegacyMessage)> {
        let bytes = |max| {
            proptest::option::of(
                proptest::collection::vec(any::<u8>(), 0..max).prop_map(Bytes::from),
            )
        };
        (
            1u8..4,
            prop_oneof![
                any::<i64>(),
                1_500_000_000_000i64..1_900_000_000_000,
                Just(-1i64)
            ],
            bytes(24),
            bytes(200),
        )
            .prop_map(|(gap, timestamp, key, value)| {
                (
                    gap,
                    LegacyMessage {
                        offset: 0,
                        timestamp,
                        key,
                        value,
                    },
                )
            })
    }

    /// One entry of a generated legacy record set: uncompressed messages or a wrapper.
    #[derive(Clone, Debug)]
    struct Entry {
        magic: i8,
        codec: Compression,
        log_append_time: bool,
        wrapper_timestamp: i64,
        messages: Vec<(u8, LegacyMessage)>,
    }

    fn arb_entry() -> impl Strategy<Value = Entry> {
        (
            prop_oneof![Just(MAGIC_V0), Just(MAGIC_V1)],
            prop_oneof![
                Just(Compression::None),
                Just(Compression::Gzip),
                Just(Compression::Snappy),
                Just(Compression::Lz4)
            ],
            any::<bool>(),
            any::<i64>(),
            proptest::collection::vec(arb_message(), 1..8),
        )
            .prop_map(
                |(magic, codec, log_append_time, wrapper_timestamp, messages)| Entry {
                    magic,
                    codec,
                    log_append_time,
                    wrapper_timestamp,
                    messages,
                },
            )
    }

    /// Encodes entries back to back with gapped, increasing offsets, and what a v2 reader must
    /// see after up-conversion.
    fn encode_entries(entries: &[Entry]) -> (Vec<u8>, Seen) {
        let mut set = Vec::new();
        let mut want = Vec::new();
        let mut next = 1_000i64;
        for e in entries {
            let mut abs = Vec::new();
            for (gap, m) in &e.messages {
                next += i64::from(*gap);
                abs.push(LegacyMessage {
                    offset: next,
                    ..m.clone()
                });
            }
            let last = next;
            for m in &abs {
                let ts = match (e.magic, e.codec) {
                    (MAGIC_V0, _) => -1,
                    (_, Compression::None) => m.timestamp,
                    _ if e.log_append_time => e.wrapper_timestamp,
                    _ => m.timestamp,
                };
                want.push((m.offset, ts, m.key.clone(), m.value.clone()));
            }
            if e.codec == Compression::None {
                for m in &abs {
                    set.extend(encode::message(
                        e.magic,
                        encode::attributes(
                            Compression::None,
                            e.log_append_time && e.magic == MAGIC_V1,
                        ),
                        m,
                    ));
                }
            } else {
                let first = abs[0].offset;
                let inner: Vec<LegacyMessage> = abs
                    .iter()
                    .map(|m| LegacyMessage {
                        offset: if e.magic == MAGIC_V1 {
                            m.offset - first
                        } else {
                            m.offset
                        },
                        ..m.clone()
                    })
                    .collect();
                set.extend(
                    encode::wrapper(
                        e.magic,
                        e.codec,
                        e.log_append_time,
                        last,
                        e.wrapper_timestamp,
                        &inner,
                    )
                    .unwrap(),
                );
            }
        }
        (set, want)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        #[test]
        fn up_conversion_round_trips(entries in proptest::collection::vec(arb_entry(), 1..6)) {
            let (set, want) = encode_entries(&entries);
            let (batches, seen) = walk(set.clone());
            prop_assert_eq!(&seen, &want);
            // Source bytes are accounted exactly once.
            prop_assert_eq!(batches.iter().map(RawBatch::source_size).sum::<usize>(), set.len());
            // And the slow path keeps every record, with the source codec.
            let mut rebuilt = Vec::new();
            for b in &batches {
                for out in rebuild(b, &RebuildOptions::default()).unwrap() {
                    let raw = RawBatch::new(out.bytes.clone()).unwrap();
                    raw.verify_crc().unwrap();
                    prop_assert_eq!(raw.compression(), b.output_compression());
                    for (offset, r) in out.source_offsets().zip(decode_records(&raw, usize::MAX).unwrap()) {
                        rebuilt.push((offset, r.timestamp, r.key, r.value));
                    }
                }
            }
            prop_assert_eq!(rebuilt, want);
        }

        #[test]
        fn mutated_legacy_sets_never_panic(
            entries in proptest::collection::vec(arb_entry(), 1..4),
            flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..6),
            cut in any::<usize>(),
        ) {
            let (mut set, _) = encode_entries(&entries);
            let n = set.len();
            for (at, v) in flips {
                set[at % n] = v;
            }
            set.truncate(cut % (n + 1));
            let len = set.len();
            let mut walker = BatchWalker::new(Bytes::from(set)).max_decompressed_bytes(1 << 16);
            let mut consumed = 0;
            for b in (&mut walker).flatten() {
                consumed += b.source_size();
                let _ = decode_records(&b, 1 << 16);
                let _ = rebuild(&b, &RebuildOptions::default());
            }
            prop_assert!(consumed + walker.partial_tail_len() <= len);
        }

        #[test]
        fn arbitrary_bytes_after_a_legacy_header_never_panic(
            magic in 0u8..2,
            attributes: u8,
            size in prop_oneof![any::<i32>(), 14i32..300],
            body in proptest::collection::vec(any::<u8>(), 0..300),
            fix_crc: bool,
        ) {
            let mut m = Vec::new();
            m.extend_from_slice(&7i64.to_be_bytes());
            m.extend_from_slice(&size.to_be_bytes());
            m.extend_from_slice(&[0; 4]);
            m.push(magic);
            m.push(attributes);
            m.extend_from_slice(&body);
            if fix_crc {
                let crc = crc32(&m[16..]);
                m[12..16].copy_from_slice(&crc.to_be_bytes());
            }
            for b in BatchWalker::new(Bytes::from(m)).flatten() {
                let _ = rebuild(&b, &RebuildOptions::default());
            }
        }
    }
}
