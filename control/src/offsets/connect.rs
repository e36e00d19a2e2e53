//! MM2's progress in Connect's offsets topic, `mm2-offsets.<src>.internal` (on the target).
//!
//! MM2's `MirrorSourceTask` stores, per source partition, the offset of the last replicated
//! record. Connect serialises the entries with Jackson (compact JSON, no schemas):
//!
//! ```text
//! key   ["MirrorSourceConnector",{"cluster":"<src>","partition":<int>,"topic":"<topic>"}]
//! value {"offset":<long>}
//! ```
//!
//! Connect's reader finds an offset by the **exact key bytes**, so an export must reproduce
//! Jackson's output byte for byte: the field order above (that of Java's `HashMap` for these
//! three keys), no whitespace, and Jackson's string escaping (see [`write_json_string`]).
//! Each key goes to partition `toPositive(murmur2(key)) % partitions` of the topic, as Kafka's
//! default partitioner computes it ([`partition_for_key`]).
//!
//! Import ([`ImportedProgress`]) reads every record of the topic in order: the last record per
//! source partition wins, a tombstone deletes. Keys of other connectors or other source clusters
//! are ignored. It parses keys as JSON rather than matching canonical bytes, so it also accepts
//! keys with another field order or spacing, which MM2 itself never writes.

use std::collections::BTreeMap;

use thiserror::Error;

use super::TopicPartition;

/// Connector name (Connect namespace) of MM2's source connector in dedicated mode.
pub const MIRROR_SOURCE_CONNECTOR: &str = "MirrorSourceConnector";

/// Default partition count of `mm2-offsets.<src>.internal` (`offset.storage.partitions`).
pub const DEFAULT_OFFSET_STORAGE_PARTITIONS: i32 = 25;

/// Default bound on the source partitions an [`ImportedProgress`] holds.
pub const DEFAULT_MAX_IMPORTED_PARTITIONS: usize = 1_000_000;

/// Errors building Connect offset records.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The offsets topic must have at least one partition.
    #[error("offsets topic partition count must be positive, got {partitions}")]
    InvalidPartitionCount {
        /// The partition count given.
        partitions: i32,
    },
}

/// Kafka's `Utils.murmur2`: 32-bit MurmurHash2 with seed `0x9747b28c`, little-endian words.
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;

    // Java computes `seed ^ length` on ints; only the low 32 bits of the length matter there.
    let mut h = SEED ^ (data.len() as u32);
    let mut chunks = data.chunks_exact(4);
    for chunk in &mut chunks {
        let mut k = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = chunks.remainder();
    // The Java switch falls through from case 3 to case 1.
    if tail.len() >= 3 {
        h ^= u32::from(tail[2]) << 16;
    }
    if tail.len() >= 2 {
        h ^= u32::from(tail[1]) << 8;
    }
    if !tail.is_empty() {
        h ^= u32::from(tail[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// Kafka's `Utils.toPositive`: clears the sign bit (not `abs`).
pub fn to_positive(n: i32) -> i32 {
    n & 0x7fff_ffff
}

/// The partition Kafka's default partitioner picks for a keyed record:
/// `toPositive(murmur2(key)) % partitions`.
pub fn partition_for_key(key: &[u8], partitions: i32) -> Result<i32, ConnectError> {
    if partitions <= 0 {
        return Err(ConnectError::InvalidPartitionCount { partitions });
    }
    Ok(to_positive(murmur2(key)) % partitions)
}

/// Appends `s` as a JSON string literal, escaped exactly as Jackson's default `JsonGenerator`
/// (jackson-core 2.x `UTF8JsonGenerator` with default features) writes it:
/// - `"` and `\` get a backslash;
/// - `\b \t \n \f \r` use their short escapes;
/// - other control characters below U+0020 become `\u00XX` with upper-case hex;
/// - everything else in the Basic Multilingual Plane, including U+007F and `/`, is written as
///   raw UTF-8;
/// - a character above U+FFFF is written as its two UTF-16 surrogates, each as `\uXXXX`
///   (`COMBINE_UNICODE_SURROGATES_IN_UTF8` is off by default).
pub fn write_json_string(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    for c in s.chars() {
        match c {
            '"' => out.extend_from_slice(b"\\\""),
            '\\' => out.extend_from_slice(b"\\\\"),
            '\u{08}' => out.extend_from_slice(b"\\b"),
            '\t' => out.extend_from_slice(b"\\t"),
            '\n' => out.extend_from_slice(b"\\n"),
            '\u{0c}' => out.extend_from_slice(b"\\f"),
            '\r' => out.extend_from_slice(b"\\r"),
            c if (c as u32) < 0x20 => push_unicode_escape(out, c as u16),
            c if (c as u32) > 0xffff => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    push_unicode_escape(out, *unit);
                }
            }
            c => {
                let mut buf = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
    }
    out.push(b'"');
}

fn push_unicode_escape(out: &mut Vec<u8>, unit: u16) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    out.extend_from_slice(b"\\u");
    for shift in [12u16, 8, 4, 0] {
        out.push(HEX[usize::from((unit >> shift) & 0xf)]);
    }
}

/// The exact key bytes Connect writes for MM2's progress on one source partition:
/// `["<connector>",{"cluster":"<cluster>","partition":<partition>,"topic":"<topic>"}]`.
pub fn source_offset_key(connector: &str, cluster: &str, topic: &str, partition: i32) -> Vec<u8> {
    let mut out = Vec::with_capacity(48 + connector.len() + cluster.len() + topic.len());
    out.push(b'[');
    write_json_string(&mut out, connector);
    out.extend_from_slice(b",{\"cluster\":");
    write_json_string(&mut out, cluster);
    out.extend_from_slice(b",\"partition\":");
    out.extend_from_slice(partition.to_string().as_bytes());
    out.extend_from_slice(b",\"topic\":");
    write_json_string(&mut out, topic);
    out.extend_from_slice(b"}]");
    out
}

/// The exact value bytes Connect writes for MM2's progress: `{"offset":<offset>}`, where
/// `offset` is the last replicated source offset (MM2 resumes at `offset + 1`).
pub fn source_offset_value(offset: i64) -> Vec<u8> {
    format!("{{\"offset\":{offset}}}").into_bytes()
}

/// One record to write to `mm2-offsets.<src>.internal` so that MM2 resumes where strait is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportRecord {
    /// Record key ([`source_offset_key`]).
    pub key: Vec<u8>,
    /// Record value ([`source_offset_value`]).
    pub value: Vec<u8>,
    /// Partition of the offsets topic Connect would write this key to.
    pub partition: i32,
}

/// Builds the record exporting "last replicated offset of `tp` is `last_offset`" for MM2's
/// source connector `connector` of cluster `cluster`, for an offsets topic with
/// `topic_partitions` partitions.
pub fn export_record(
    connector: &str,
    cluster: &str,
    tp: &TopicPartition,
    last_offset: i64,
    topic_partitions: i32,
) -> Result<ExportRecord, ConnectError> {
    let key = source_offset_key(connector, cluster, &tp.topic, tp.partition);
    let partition = partition_for_key(&key, topic_partitions)?;
    Ok(ExportRecord {
        key,
        value: source_offset_value(last_offset),
        partition,
    })
}

/// What [`ImportedProgress::apply`] did with one record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImportEvent {
    /// The offset of a source partition was set.
    Updated {
        /// Source partition.
        tp: TopicPartition,
        /// Last replicated offset.
        offset: i64,
    },
    /// A tombstone (or a JSON `null` value) removed a source partition's offset.
    Deleted {
        /// Source partition.
        tp: TopicPartition,
    },
    /// The record was not applied.
    Ignored(IgnoreReason),
}

/// Why a record of the offsets topic was not applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IgnoreReason {
    /// The key is not valid JSON.
    KeyNotJson,
    /// The key is not a two-element array `[name, {partition map}]`.
    NotConnectKey,
    /// The key belongs to another connector (e.g. MM2's checkpoint or heartbeat connectors).
    OtherConnector(String),
    /// The key is for another source cluster.
    OtherCluster,
    /// Ours, but `topic` is not a string or `partition` not an int32.
    MalformedPartition,
    /// Ours, but the value is not `{"offset": <long>}`.
    MalformedValue(TopicPartition),
    /// A new partition beyond the configured bound.
    TooManyPartitions(TopicPartition),
}

/// MM2's progress read from its Connect offsets topic: the last replicated offset per source
/// partition of one source cluster.
#[derive(Debug, Clone)]
pub struct ImportedProgress {
    connector: String,
    cluster: String,
    max_partitions: usize,
    offsets: BTreeMap<TopicPartition, i64>,
}

impl ImportedProgress {
    /// An empty import for connector `connector` (normally [`MIRROR_SOURCE_CONNECTOR`]) and
    /// source cluster alias `cluster`, holding at most [`DEFAULT_MAX_IMPORTED_PARTITIONS`].
    pub fn new(connector: impl Into<String>, cluster: impl Into<String>) -> Self {
        Self::with_max_partitions(connector, cluster, DEFAULT_MAX_IMPORTED_PARTITIONS)
    }

    /// Like [`ImportedProgress::new`] with an explicit bound on source partitions.
    pub fn with_max_partitions(
        connector: impl Into<String>,
        cluster: impl Into<String>,
        max_partitions: usize,
    ) -> Self {
        Self {
            connector: connector.into(),
            cluster: cluster.into(),
            max_partitions,
            offsets: BTreeMap::new(),
        }
    }

    /// Builds an import from records in topic order (all partitions of the offsets topic;
    /// entries for one key always share a partition, so per-partition order is enough).
    pub fn from_records<'a>(
        connector: impl Into<String>,
        cluster: impl Into<String>,
        records: impl IntoIterator<Item = (&'a [u8], Option<&'a [u8]>)>,
    ) -> Self {
        let mut progress = Self::new(connector, cluster);
        for (key, value) in records {
            progress.apply(key, value);
        }
        progress
    }

    /// Applies one record; `value` is `None` for a tombstone. Never panics on any bytes.
    pub fn apply(&mut self, key: &[u8], value: Option<&[u8]>) -> ImportEvent {
        let tp = match self.parse_key(key) {
            Ok(tp) => tp,
            Err(reason) => return ImportEvent::Ignored(reason),
        };
        let offset = match value.map(parse_offset_value) {
            None | Some(Ok(None)) => {
                self.offsets.remove(&tp);
                return ImportEvent::Deleted { tp };
            }
            Some(Ok(Some(offset))) => offset,
            Some(Err(())) => return ImportEvent::Ignored(IgnoreReason::MalformedValue(tp)),
        };
        if !self.offsets.contains_key(&tp) && self.offsets.len() >= self.max_partitions {
            return ImportEvent::Ignored(IgnoreReason::TooManyPartitions(tp));
        }
        self.offsets.insert(tp.clone(), offset);
        ImportEvent::Updated { tp, offset }
    }

    fn parse_key(&self, key: &[u8]) -> Result<TopicPartition, IgnoreReason> {
        let json: serde_json::Value =
            serde_json::from_slice(key).map_err(|_| IgnoreReason::KeyNotJson)?;
        let Some([name, map]) = json.as_array().map(Vec::as_slice) else {
            return Err(IgnoreReason::NotConnectKey);
        };
        let (Some(name), Some(map)) = (name.as_str(), map.as_object()) else {
            return Err(IgnoreReason::NotConnectKey);
        };
        if name != self.connector {
            return Err(IgnoreReason::OtherConnector(name.to_owned()));
        }
        if map.get("cluster").and_then(serde_json::Value::as_str) != Some(self.cluster.as_str()) {
            return Err(IgnoreReason::OtherCluster);
        }
        let topic = map.get("topic").and_then(serde_json::Value::as_str);
        // JsonConverter may hand the partition back as a long; any integer that fits an int32
        // is the same partition.
        let partition = map
            .get("partition")
            .and_then(serde_json::Value::as_i64)
            .and_then(|p| i32::try_from(p).ok());
        match (topic, partition) {
            (Some(topic), Some(partition)) => Ok(TopicPartition::new(topic, partition)),
            _ => Err(IgnoreReason::MalformedPartition),
        }
    }

    /// Last replicated offset per source partition, as MM2 stored it.
    pub fn offsets(&self) -> &BTreeMap<TopicPartition, i64> {
        &self.offsets
    }

    /// Where MM2 would resume `tp`: stored offset + 1, or `None` when there is no offset or it
    /// is negative (MM2 then falls back to `auto.offset.reset`).
    pub fn resume_offset(&self, tp: &TopicPartition) -> Option<i64> {
        self.offsets
            .get(tp)
            .filter(|o| **o >= 0)
            .and_then(|o| o.checked_add(1))
    }
}

/// Parses `{"offset": <long>}`; `Ok(None)` for a JSON `null` value (no offset).
fn parse_offset_value(value: &[u8]) -> Result<Option<i64>, ()> {
    let json: serde_json::Value = serde_json::from_slice(value).map_err(|_| ())?;
    if json.is_null() {
        return Ok(None);
    }
    json.as_object()
        .and_then(|m| m.get("offset"))
        .and_then(serde_json::Value::as_i64)
        .map(Some)
        .ok_or(())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn murmur2_matches_kafka_utils_test() {
        // clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java, testMurmur2.
        let cases: [(&[u8], i32); 6] = [
            (b"21", -973_932_308),
            (b"foobar", -790_332_482),
            (b"a-little-bit-long-string", -985_981_536),
            (b"a-little-bit-longer-string", -1_486_304_829),
            (
                b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
                -58_897_971,
            ),
            (b"abc", 479_470_107),
        ];
        for (key, expected) in cases {
            assert_eq!(murmur2(key), expected, "{}", String::from_utf8_lossy(key));
        }
    }

    #[test]
    fn murmur2_matches_librdkafka_java_vectors() {
        // librdkafka src/rdmurmur2.c unittest_murmur2, `java_murmur2_results`.
        let cases: [(&str, u32); 11] = [
            ("kafka", 0xd067_cf64),
            ("giberish123456789", 0x8f55_2b0c),
            ("1234", 0x9fc9_7b14),
            ("234", 0xe7c0_09ca),
            ("34", 0x8739_30da),
            ("4", 0x5a4b_5ca1),
            ("PreAmbleWillBeRemoved,ThePrePartThatIs", 0x7842_4f1c),
            ("reAmbleWillBeRemoved,ThePrePartThatIs", 0x4a62_b377),
            ("eAmbleWillBeRemoved,ThePrePartThatIs", 0xe0e4_e09e),
            ("AmbleWillBeRemoved,ThePrePartThatIs", 0x62b8_b43f),
            ("", 0x106e_08d9),
        ];
        for (key, expected) in cases {
            assert_eq!(murmur2(key.as_bytes()), expected as i32, "{key:?}");
        }
    }

    #[test]
    fn partition_uses_sign_bit_clearing_not_abs() {
        // murmur2("kafka") = 0xd067cf64 is negative; toPositive gives 0x5067cf64 = 1348980580.
        assert_eq!(to_positive(murmur2(b"kafka")), 1_348_980_580);
        assert_eq!(partition_for_key(b"kafka", 25), Ok(1_348_980_580 % 25));
        assert_eq!(
            partition_for_key(b"kafka", 0),
            Err(ConnectError::InvalidPartitionCount { partitions: 0 })
        );
        assert_eq!(to_positive(i32::MIN), 0);
    }

    #[test]
    fn key_and_value_bytes_are_exact() {
        assert_eq!(
            source_offset_key(MIRROR_SOURCE_CONNECTOR, "src", "orders", 7),
            br#"["MirrorSourceConnector",{"cluster":"src","partition":7,"topic":"orders"}]"#
        );
        assert_eq!(source_offset_value(42), br#"{"offset":42}"#);
        assert_eq!(source_offset_value(-1), br#"{"offset":-1}"#);
    }

    #[test]
    fn jackson_escaping() {
        let mut out = Vec::new();
        write_json_string(&mut out, "a\"b\\c/\u{8}\t\n\u{c}\r\u{0}\u{1f}\u{7f}é€😀");
        let expected = "\"a\\\"b\\\\c/\\b\\t\\n\\f\\r\\u0000\\u001F\u{7f}é€\\uD83D\\uDE00\"";
        assert_eq!(String::from_utf8(out).unwrap(), expected);
    }

    #[test]
    fn escaped_keys_parse_back() {
        let cluster = "we\"ird\\\u{1}😀";
        let key = source_offset_key(MIRROR_SOURCE_CONNECTOR, cluster, "t", 0);
        let mut progress = ImportedProgress::new(MIRROR_SOURCE_CONNECTOR, cluster);
        assert_eq!(
            progress.apply(&key, Some(b"{\"offset\":5}")),
            ImportEvent::Updated {
                tp: TopicPartition::new("t", 0),
                offset: 5
            }
        );
    }

    #[test]
    fn import_last_record_wins_tombstones_delete_others_ignored() {
        let tp0 = TopicPartition::new("t", 0);
        let k0 = source_offset_key(MIRROR_SOURCE_CONNECTOR, "A", "t", 0);
        let k1 = source_offset_key(MIRROR_SOURCE_CONNECTOR, "A", "t", 1);
        let other_cluster = source_offset_key(MIRROR_SOURCE_CONNECTOR, "B", "t", 0);
        let checkpoint_key =
            br#"["MirrorCheckpointConnector",{"partition":0,"topic":"A.t","group":"g"}]"#;
        let heartbeat_key =
            br#"["MirrorHeartbeatConnector",{"sourceClusterAlias":"A","targetClusterAlias":"B"}]"#;
        let spaced_long =
            br#"[ "MirrorSourceConnector" , {"topic":"t","partition":2,"cluster":"A"} ]"#;
        let records: Vec<(&[u8], Option<&[u8]>)> = vec![
            (&k0, Some(b"{\"offset\":10}")),
            (&k1, Some(b"{\"offset\":3}")),
            (&k0, Some(b"{\"offset\":11}")),
            (&other_cluster, Some(b"{\"offset\":99}")),
            (checkpoint_key, Some(b"{\"offset\":0}")),
            (heartbeat_key, Some(b"{\"offset\":0}")),
            (&k1, None),
            (spaced_long, Some(b"{\"offset\":4}")),
            (b"not json", Some(b"{\"offset\":1}")),
        ];
        let progress = ImportedProgress::from_records(MIRROR_SOURCE_CONNECTOR, "A", records);
        let expected: BTreeMap<_, _> = [(tp0.clone(), 11), (TopicPartition::new("t", 2), 4)]
            .into_iter()
            .collect();
        assert_eq!(progress.offsets(), &expected);
        assert_eq!(progress.resume_offset(&tp0), Some(12));
        assert_eq!(progress.resume_offset(&TopicPartition::new("t", 1)), None);
    }

    #[test]
    fn import_reports_why_it_ignores() {
        let mut p = ImportedProgress::with_max_partitions(MIRROR_SOURCE_CONNECTOR, "A", 1);
        let ok = source_offset_key(MIRROR_SOURCE_CONNECTOR, "A", "t", 0);
        assert_eq!(
            p.apply(b"{", Some(b"{}")),
            ImportEvent::Ignored(IgnoreReason::KeyNotJson)
        );
        assert_eq!(
            p.apply(b"[1,2,3]", Some(b"{}")),
            ImportEvent::Ignored(IgnoreReason::NotConnectKey)
        );
        assert_eq!(
            p.apply(br#"["X",{"cluster":"A"}]"#, None),
            ImportEvent::Ignored(IgnoreReason::OtherConnector("X".into()))
        );
        assert_eq!(
            p.apply(
                br#"["MirrorSourceConnector",{"cluster":"A","partition":2147483648,"topic":"t"}]"#,
                Some(b"{\"offset\":1}")
            ),
            ImportEvent::Ignored(IgnoreReason::MalformedPartition)
        );
        assert_eq!(
            p.apply(&ok, Some(b"{\"offset\":\"1\"}")),
            ImportEvent::Ignored(IgnoreReason::MalformedValue(TopicPartition::new("t", 0)))
        );
        assert!(matches!(
            p.apply(&ok, Some(b"{\"offset\":1}")),
            ImportEvent::Updated { .. }
        ));
        let second = source_offset_key(MIRROR_SOURCE_CONNECTOR, "A", "t", 1);
        assert_eq!(
            p.apply(&second, Some(b"{\"offset\":1}")),
            ImportEvent::Ignored(IgnoreReason::TooManyPartitions(TopicPartition::new("t", 1)))
        );
        // A JSON null value deletes like a tombstone.
        assert_eq!(
            p.apply(&ok, Some(b"null")),
            ImportEvent::Deleted {
                tp: TopicPartition::new("t", 0)
            }
        );
        assert!(p.offsets().is_empty());
    }

    #[test]
    fn export_record_partition_is_murmur2_of_key() {
        let tp = TopicPartition::new("orders", 3);
        let rec = export_record(MIRROR_SOURCE_CONNECTOR, "src", &tp, 99, 25).unwrap();
        assert_eq!(rec.partition, to_positive(murmur2(&rec.key)) % 25);
        assert!((0..25).contains(&rec.partition));
        assert_eq!(rec.value, b"{\"offset\":99}");
    }

    proptest! {
        #[test]
        fn exported_keys_import_back(
            cluster in "\\PC{0,12}", topic in "[a-zA-Z0-9._-]{1,40}",
            partition in 0i32..=i32::MAX, offset: i64,
        ) {
            let key = source_offset_key(MIRROR_SOURCE_CONNECTOR, &cluster, &topic, partition);
            let value = source_offset_value(offset);
            let mut p = ImportedProgress::new(MIRROR_SOURCE_CONNECTOR, cluster.clone());
            prop_assert_eq!(
                p.apply(&key, Some(&value)),
                ImportEvent::Updated { tp: TopicPartition::new(topic, partition), offset }
            );
        }

        #[test]
        fn escaper_output_is_json_that_serde_reads_back(s in any::<String>()) {
            let mut out = Vec::new();
            write_json_string(&mut out, &s);
            // Only ASCII escapes and raw BMP UTF-8: the output is valid JSON for the same text.
            let back: String = serde_json::from_slice(&out).unwrap();
            prop_assert_eq!(back, s);
        }

        #[test]
        fn import_never_panics(
            key in proptest::collection::vec(any::<u8>(), 0..80),
            value in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40)),
        ) {
            let mut p = ImportedProgress::new(MIRROR_SOURCE_CONNECTOR, "A");
            let _ = p.apply(&key, value.as_deref());
        }

        #[test]
        fn partition_is_always_in_range(key in proptest::collection::vec(any::<u8>(), 0..64), n in 1i32..1000) {
            let p = partition_for_key(&key, n).unwrap();
            prop_assert!((0..n).contains(&p));
        }
    }
}
