//! MM2's binary record formats: `OffsetSync`, `Checkpoint` and `Heartbeat`.
//!
//! Byte-exact with Kafka's `connect/mirror/.../OffsetSync.java` and
//! `connect/mirror-client/.../{Checkpoint,Heartbeat}.java`, which use the `Type` primitives of
//! Kafka's protocol library: big-endian `INT16`/`INT32`/`INT64`, and `STRING` = INT16 byte
//! length (0..=32767) followed by that many bytes of UTF-8. Fields are concatenated in schema
//! order with no tags or padding.
//!
//! Decoding follows Java's reader, which is what every consumer of these topics runs:
//! - a negative string length, or one longer than the bytes left, is an error;
//! - bytes after the last field are ignored (`Schema.read` stops after its fields);
//! - the checkpoint and heartbeat `version` header is read and then ignored: Java parses every
//!   version with the v0 schema (`valueSchema(version)` is only an `assert`);
//! - string bytes that are not valid UTF-8 are replaced with U+FFFD, as `new String(bytes,
//!   UTF_8)` does, instead of failing.
//!
//! Encoding fails only for a string longer than 32767 bytes, as Java's `Type.STRING.write` does.

use std::fmt;

use thiserror::Error;

use super::TopicPartition;

/// Version written in the `Checkpoint` and `Heartbeat` value headers (`VERSION = 0` in Java).
pub const FORMAT_VERSION: i16 = 0;

/// Largest byte length of a `STRING` field (`Short.MAX_VALUE`).
pub const MAX_STRING_BYTES: usize = i16::MAX as usize;

/// Length of an encoded `OffsetSync` value: two INT64.
pub const OFFSET_SYNC_VALUE_BYTES: usize = 16;

/// Length of an encoded `Heartbeat` value: INT16 version and INT64 timestamp.
pub const HEARTBEAT_VALUE_BYTES: usize = 10;

/// Which MM2 record a [`FormatError`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordKind {
    /// `OffsetSync`, on `mm2-offset-syncs.<alias>.internal`.
    OffsetSync,
    /// `Checkpoint`, on `<source>.checkpoints.internal`.
    Checkpoint,
    /// `Heartbeat`, on `heartbeats`.
    Heartbeat,
}

impl fmt::Display for RecordKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::OffsetSync => "OffsetSync",
            Self::Checkpoint => "Checkpoint",
            Self::Heartbeat => "Heartbeat",
        })
    }
}

/// Key or value of a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordPart {
    /// The record key.
    Key,
    /// The record value.
    Value,
}

impl fmt::Display for RecordPart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Key => "key",
            Self::Value => "value",
        })
    }
}

/// Errors encoding or decoding MM2 records. Each names the record, the part and the field.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum FormatError {
    /// Fewer bytes left than the field needs.
    #[error("{record} {part}: field `{field}` needs {needed} bytes but only {available} are left")]
    Truncated {
        /// Record type.
        record: RecordKind,
        /// Key or value.
        part: RecordPart,
        /// Field name, as in the Java schema.
        field: &'static str,
        /// Bytes the field needs.
        needed: usize,
        /// Bytes left in the input.
        available: usize,
    },
    /// A `STRING` length prefix below zero.
    #[error("{record} {part}: string field `{field}` has negative length {length}")]
    NegativeStringLength {
        /// Record type.
        record: RecordKind,
        /// Key or value.
        part: RecordPart,
        /// Field name, as in the Java schema.
        field: &'static str,
        /// The length read.
        length: i16,
    },
    /// A string to encode is longer than a `STRING` can hold.
    #[error(
        "{record} {part}: string field `{field}` is {length} bytes of UTF-8, more than the maximum {MAX_STRING_BYTES}"
    )]
    StringTooLong {
        /// Record type.
        record: RecordKind,
        /// Key or value.
        part: RecordPart,
        /// Field name, as in the Java schema.
        field: &'static str,
        /// Byte length of the string.
        length: usize,
    },
}

/// `OffsetSync`: upstream offset `upstream_offset` of a source partition is at
/// `downstream_offset` in its remote partition.
///
/// Key: `topic` STRING (the upstream topic, not renamed), `partition` INT32.
/// Value: `upstreamOffset` INT64, `offset` INT64. There is no version field.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OffsetSync {
    /// Upstream (source) topic name.
    pub topic: String,
    /// Partition number, the same upstream and downstream.
    pub partition: i32,
    /// Offset of the record in the source partition.
    pub upstream_offset: i64,
    /// Offset of its copy in the target partition.
    pub downstream_offset: i64,
}

impl OffsetSync {
    /// Builds a sync for a source topic-partition.
    pub fn new(tp: &TopicPartition, upstream_offset: i64, downstream_offset: i64) -> Self {
        Self {
            topic: tp.topic.clone(),
            partition: tp.partition,
            upstream_offset,
            downstream_offset,
        }
    }

    /// The source topic-partition this sync is about.
    pub fn topic_partition(&self) -> TopicPartition {
        TopicPartition::new(self.topic.clone(), self.partition)
    }

    /// Encodes the record key. Fails only if the topic is longer than 32767 bytes.
    pub fn encode_key(&self) -> Result<Vec<u8>, FormatError> {
        let mut w = Writer::new(RecordKind::OffsetSync, RecordPart::Key);
        w.string("topic", &self.topic)?;
        w.int32(self.partition);
        Ok(w.finish())
    }

    /// Encodes the record value (always 16 bytes).
    pub fn encode_value(&self) -> [u8; OFFSET_SYNC_VALUE_BYTES] {
        let mut out = [0u8; OFFSET_SYNC_VALUE_BYTES];
        out[..8].copy_from_slice(&self.upstream_offset.to_be_bytes());
        out[8..].copy_from_slice(&self.downstream_offset.to_be_bytes());
        out
    }

    /// Decodes a record. Trailing bytes after the last field are ignored, as in Java.
    pub fn decode(key: &[u8], value: &[u8]) -> Result<Self, FormatError> {
        let mut k = Reader::new(key, RecordKind::OffsetSync, RecordPart::Key);
        let topic = k.string("topic")?;
        let partition = k.int32("partition")?;
        let mut v = Reader::new(value, RecordKind::OffsetSync, RecordPart::Value);
        let upstream_offset = v.int64("upstreamOffset")?;
        let downstream_offset = v.int64("offset")?;
        Ok(Self {
            topic,
            partition,
            upstream_offset,
            downstream_offset,
        })
    }
}

/// `Checkpoint`: group `group` at upstream offset `upstream_offset` of the source partition
/// translates to `downstream_offset` of the target partition `topic`/`partition`.
///
/// Key: `group` STRING, `topic` STRING (the target-side, renamed topic), `partition` INT32.
/// Value: `version` INT16 (0), `upstreamOffset` INT64, `offset` INT64, `metadata` STRING.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Checkpoint {
    /// Consumer group id.
    pub group: String,
    /// Target-side (renamed) topic, e.g. `src.t`.
    pub topic: String,
    /// Partition number.
    pub partition: i32,
    /// The group's committed offset on the source.
    pub upstream_offset: i64,
    /// The translated offset on the target.
    pub downstream_offset: i64,
    /// The group's commit metadata; `""` where Java had null.
    pub metadata: String,
}

impl Checkpoint {
    /// The target-side topic-partition this checkpoint is about.
    pub fn topic_partition(&self) -> TopicPartition {
        TopicPartition::new(self.topic.clone(), self.partition)
    }

    /// Encodes the record key. Fails only if a string is longer than 32767 bytes.
    pub fn encode_key(&self) -> Result<Vec<u8>, FormatError> {
        let mut w = Writer::new(RecordKind::Checkpoint, RecordPart::Key);
        w.string("group", &self.group)?;
        w.string("topic", &self.topic)?;
        w.int32(self.partition);
        Ok(w.finish())
    }

    /// Encodes the record value with version 0. Fails only if the metadata is longer than
    /// 32767 bytes.
    pub fn encode_value(&self) -> Result<Vec<u8>, FormatError> {
        let mut w = Writer::new(RecordKind::Checkpoint, RecordPart::Value);
        w.int16(FORMAT_VERSION);
        w.int64(self.upstream_offset);
        w.int64(self.downstream_offset);
        w.string("metadata", &self.metadata)?;
        Ok(w.finish())
    }

    /// Decodes a record. Any version is parsed as v0 and trailing bytes are ignored, as in Java.
    pub fn decode(key: &[u8], value: &[u8]) -> Result<Self, FormatError> {
        // Java reads the value before the key; the order only changes which error is reported.
        let mut v = Reader::new(value, RecordKind::Checkpoint, RecordPart::Value);
        let _version = v.int16("version")?;
        let upstream_offset = v.int64("upstreamOffset")?;
        let downstream_offset = v.int64("offset")?;
        let metadata = v.string("metadata")?;
        let mut k = Reader::new(key, RecordKind::Checkpoint, RecordPart::Key);
        let group = k.string("group")?;
        let topic = k.string("topic")?;
        let partition = k.int32("partition")?;
        Ok(Self {
            group,
            topic,
            partition,
            upstream_offset,
            downstream_offset,
            metadata,
        })
    }
}

/// `Heartbeat`: emitted every `emit.heartbeats.interval.seconds` by the flow
/// `source_alias->target_alias`.
///
/// Key: `sourceClusterAlias` STRING, `targetClusterAlias` STRING.
/// Value: `version` INT16 (0), `timestamp` INT64 (epoch milliseconds).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Heartbeat {
    /// Source cluster alias of the flow.
    pub source_alias: String,
    /// Target cluster alias of the flow.
    pub target_alias: String,
    /// Emission time, epoch milliseconds; also the record timestamp.
    pub timestamp_ms: i64,
}

impl Heartbeat {
    /// Encodes the record key. Fails only if an alias is longer than 32767 bytes.
    pub fn encode_key(&self) -> Result<Vec<u8>, FormatError> {
        let mut w = Writer::new(RecordKind::Heartbeat, RecordPart::Key);
        w.string("sourceClusterAlias", &self.source_alias)?;
        w.string("targetClusterAlias", &self.target_alias)?;
        Ok(w.finish())
    }

    /// Encodes the record value with version 0 (always 10 bytes).
    pub fn encode_value(&self) -> [u8; HEARTBEAT_VALUE_BYTES] {
        let mut out = [0u8; HEARTBEAT_VALUE_BYTES];
        out[..2].copy_from_slice(&FORMAT_VERSION.to_be_bytes());
        out[2..].copy_from_slice(&self.timestamp_ms.to_be_bytes());
        out
    }

    /// Decodes a record. Any version is parsed as v0 and trailing bytes are ignored, as in Java.
    pub fn decode(key: &[u8], value: &[u8]) -> Result<Self, FormatError> {
        let mut v = Reader::new(value, RecordKind::Heartbeat, RecordPart::Value);
        let _version = v.int16("version")?;
        let timestamp_ms = v.int64("timestamp")?;
        let mut k = Reader::new(key, RecordKind::Heartbeat, RecordPart::Key);
        let source_alias = k.string("sourceClusterAlias")?;
        let target_alias = k.string("targetClusterAlias")?;
        Ok(Self {
            source_alias,
            target_alias,
            timestamp_ms,
        })
    }
}

/// Appends schema fields to a buffer.
struct Writer {
    out: Vec<u8>,
    record: RecordKind,
    part: RecordPart,
}

impl Writer {
    fn new(record: RecordKind, part: RecordPart) -> Self {
        Self {
            out: Vec::new(),
            record,
            part,
        }
    }

    fn int16(&mut self, v: i16) {
        self.out.extend_from_slice(&v.to_be_bytes());
    }

    fn int32(&mut self, v: i32) {
        self.out.extend_from_slice(&v.to_be_bytes());
    }

    fn int64(&mut self, v: i64) {
        self.out.extend_from_slice(&v.to_be_bytes());
    }

    fn string(&mut self, field: &'static str, s: &str) -> Result<(), FormatError> {
        let bytes = s.as_bytes();
        let length = i16::try_from(bytes.len()).map_err(|_| FormatError::StringTooLong {
            record: self.record,
            part: self.part,
            field,
            length: bytes.len(),
        })?;
        self.int16(length);
        self.out.extend_from_slice(bytes);
        Ok(())
    }

    fn finish(self) -> Vec<u8> {
        self.out
    }
}

/// Reads schema fields from untrusted bytes; never panics, never allocates more than the input.
struct Reader<'a> {
    rest: &'a [u8],
    record: RecordKind,
    part: RecordPart,
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8], record: RecordKind, part: RecordPart) -> Self {
        Self {
            rest: bytes,
            record,
            part,
        }
    }

    fn take<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], FormatError> {
        let Some((head, tail)) = self.rest.split_first_chunk::<N>() else {
            return Err(self.truncated(field, N));
        };
        self.rest = tail;
        Ok(*head)
    }

    fn truncated(&self, field: &'static str, needed: usize) -> FormatError {
        FormatError::Truncated {
            record: self.record,
            part: self.part,
            field,
            needed,
            available: self.rest.len(),
        }
    }

    fn int16(&mut self, field: &'static str) -> Result<i16, FormatError> {
        self.take::<2>(field).map(i16::from_be_bytes)
    }

    fn int32(&mut self, field: &'static str) -> Result<i32, FormatError> {
        self.take::<4>(field).map(i32::from_be_bytes)
    }

    fn int64(&mut self, field: &'static str) -> Result<i64, FormatError> {
        self.take::<8>(field).map(i64::from_be_bytes)
    }

    fn string(&mut self, field: &'static str) -> Result<String, FormatError> {
        let length = self.int16(field)?;
        let Ok(len) = usize::try_from(length) else {
            return Err(FormatError::NegativeStringLength {
                record: self.record,
                part: self.part,
                field,
                length,
            });
        };
        if len > self.rest.len() {
            return Err(self.truncated(field, len));
        }
        let (bytes, tail) = self.rest.split_at(len);
        self.rest = tail;
        Ok(String::from_utf8_lossy(bytes).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn offset_sync_key_matches_reference_bytes() {
        let sync = OffsetSync::new(&TopicPartition::new("t", 0), 5, 7);
        assert_eq!(
            sync.encode_key().unwrap(),
            [0x00, 0x01, 0x74, 0x00, 0x00, 0x00, 0x00]
        );
        assert_eq!(
            sync.encode_value(),
            [0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 7]
        );
    }

    #[test]
    fn checkpoint_layout_is_version_offsets_metadata() {
        let cp = Checkpoint {
            group: "g".into(),
            topic: "src.t".into(),
            partition: 3,
            upstream_offset: 0x0102,
            downstream_offset: -1,
            metadata: "m".into(),
        };
        assert_eq!(
            cp.encode_key().unwrap(),
            [0, 1, b'g', 0, 5, b's', b'r', b'c', b'.', b't', 0, 0, 0, 3]
        );
        let value = cp.encode_value().unwrap();
        assert_eq!(
            value,
            [
                0, 0, // version
                0, 0, 0, 0, 0, 0, 1, 2, // upstream
                0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // downstream
                0, 1, b'm' // metadata
            ]
        );
        // Empty metadata gives the 20-byte minimum value.
        let empty = Checkpoint {
            metadata: String::new(),
            ..cp
        };
        assert_eq!(empty.encode_value().unwrap().len(), 20);
    }

    #[test]
    fn heartbeat_layout() {
        let hb = Heartbeat {
            source_alias: "A".into(),
            target_alias: "BB".into(),
            timestamp_ms: 1_700_000_000_123,
        };
        assert_eq!(hb.encode_key().unwrap(), [0, 1, b'A', 0, 2, b'B', b'B']);
        let mut expected = vec![0u8, 0];
        expected.extend_from_slice(&1_700_000_000_123i64.to_be_bytes());
        assert_eq!(hb.encode_value().as_slice(), expected.as_slice());
    }

    #[test]
    fn negative_string_length_is_an_error() {
        let err = OffsetSync::decode(&[0xff, 0xff, 0, 0, 0, 0], &[0; 16]).unwrap_err();
        assert_eq!(
            err,
            FormatError::NegativeStringLength {
                record: RecordKind::OffsetSync,
                part: RecordPart::Key,
                field: "topic",
                length: -1,
            }
        );
    }

    #[test]
    fn oversized_string_length_is_an_error() {
        // Claims 0x7fff bytes, has 1.
        let err = Checkpoint::decode(&[0x7f, 0xff, b'x'], &[0; 20]).unwrap_err();
        assert_eq!(
            err,
            FormatError::Truncated {
                record: RecordKind::Checkpoint,
                part: RecordPart::Key,
                field: "group",
                needed: 0x7fff,
                available: 1,
            }
        );
    }

    #[test]
    fn short_value_is_an_error() {
        let key = OffsetSync::new(&TopicPartition::new("t", 0), 0, 0)
            .encode_key()
            .unwrap();
        let err = OffsetSync::decode(&key, &[0; 15]).unwrap_err();
        assert_eq!(
            err,
            FormatError::Truncated {
                record: RecordKind::OffsetSync,
                part: RecordPart::Value,
                field: "offset",
                needed: 8,
                available: 7,
            }
        );
        assert!(Heartbeat::decode(&[0, 0, 0, 0], &[0]).is_err());
        assert!(Heartbeat::decode(&[0, 0], &[0; 10]).is_err());
    }

    #[test]
    fn trailing_bytes_are_ignored_and_any_version_reads_as_v0() {
        let cp = Checkpoint {
            group: "g".into(),
            topic: "t".into(),
            partition: 1,
            upstream_offset: 10,
            downstream_offset: 20,
            metadata: "x".into(),
        };
        let mut key = cp.encode_key().unwrap();
        key.extend_from_slice(b"junk");
        let mut value = cp.encode_value().unwrap();
        value[0..2].copy_from_slice(&7i16.to_be_bytes());
        value.extend_from_slice(b"more");
        assert_eq!(Checkpoint::decode(&key, &value).unwrap(), cp);

        let hb = Heartbeat {
            source_alias: "a".into(),
            target_alias: "b".into(),
            timestamp_ms: 9,
        };
        let mut hv = hb.encode_value().to_vec();
        hv[1] = 3;
        hv.push(1);
        assert_eq!(
            Heartbeat::decode(&hb.encode_key().unwrap(), &hv).unwrap(),
            hb
        );
    }

    #[test]
    fn invalid_utf8_is_replaced_like_java() {
        let key = [0, 2, 0xc3, 0x28, 0, 0, 0, 1];
        let sync = OffsetSync::decode(&key, &[0; 16]).unwrap();
        assert_eq!(sync.topic, "\u{fffd}(");
        assert_eq!(sync.partition, 1);
    }

    #[test]
    fn string_longer_than_short_max_cannot_be_encoded() {
        let long = "x".repeat(MAX_STRING_BYTES + 1);
        let sync = OffsetSync {
            topic: long.clone(),
            partition: 0,
            upstream_offset: 0,
            downstream_offset: 0,
        };
        assert!(matches!(
            sync.encode_key(),
            Err(FormatError::StringTooLong { length, .. }) if length == MAX_STRING_BYTES + 1
        ));
        let fits = OffsetSync {
            topic: "x".repeat(MAX_STRING_BYTES),
            ..sync
        };
        let key = fits.encode_key().unwrap();
        assert_eq!(&key[..2], &[0x7f, 0xff]);
        assert_eq!(
            OffsetSync::decode(&key, &fits.encode_value()).unwrap(),
            fits
        );
    }

    fn short_string() -> impl Strategy<Value = String> {
        // Any Unicode, up to 300 chars (never over the 32767-byte limit).
        proptest::collection::vec(any::<char>(), 0..300).prop_map(|c| c.into_iter().collect())
    }

    proptest! {
        #[test]
        fn offset_sync_round_trips(topic in short_string(), partition: i32, up: i64, down: i64) {
            let sync = OffsetSync { topic, partition, upstream_offset: up, downstream_offset: down };
            let key = sync.encode_key().unwrap();
            prop_assert_eq!(key.len(), 2 + sync.topic.len() + 4);
            prop_assert_eq!(OffsetSync::decode(&key, &sync.encode_value()).unwrap(), sync);
        }

        #[test]
        fn checkpoint_round_trips(
            group in short_string(), topic in short_string(), metadata in short_string(),
            partition: i32, up: i64, down: i64,
        ) {
            let cp = Checkpoint {
                group, topic, partition, upstream_offset: up, downstream_offset: down, metadata,
            };
            let value = cp.encode_value().unwrap();
            prop_assert_eq!(value.len(), 20 + cp.metadata.len());
            prop_assert_eq!(Checkpoint::decode(&cp.encode_key().unwrap(), &value).unwrap(), cp);
        }

        #[test]
        fn heartbeat_round_trips(src in short_string(), tgt in short_string(), ts: i64) {
            let hb = Heartbeat { source_alias: src, target_alias: tgt, timestamp_ms: ts };
            prop_assert_eq!(Heartbeat::decode(&hb.encode_key().unwrap(), &hb.encode_value()).unwrap(), hb);
        }

        #[test]
        fn decoding_arbitrary_bytes_never_panics(
            key in proptest::collection::vec(any::<u8>(), 0..64),
            value in proptest::collection::vec(any::<u8>(), 0..64),
        ) {
            let _ = OffsetSync::decode(&key, &value);
            let _ = Checkpoint::decode(&key, &value);
            let _ = Heartbeat::decode(&key, &value);
        }

        #[test]
        fn every_proper_prefix_of_a_key_is_rejected(topic in short_string(), partition: i32) {
            let sync = OffsetSync { topic, partition, upstream_offset: 1, downstream_offset: 2 };
            let key = sync.encode_key().unwrap();
            for cut in 0..key.len() {
                prop_assert!(OffsetSync::decode(&key[..cut], &sync.encode_value()).is_err());
            }
        }
    }
}
