//! Path selection and the slow path: rebuild a batch that cannot be forwarded as is.

use bytes::Bytes;

use super::compression::DEFAULT_MAX_DECOMPRESSED_BYTES;
use super::error::BatchError;
use super::records::{BatchBuilder, Record, decode_records};
use super::walk::{RawBatch, TimestampType};
use super::{DEFAULT_MAX_MESSAGE_BYTES, HEADER_LEN};

/// How a batch that passed the transaction filter is replicated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Path {
    /// Rewrite the header, forward the payload untouched.
    Fast,
    /// Decode and re-encode ([`rebuild`]).
    Slow(SlowReason),
    /// Nothing to replicate: the batch ends before the next offset, holds no records, or is a
    /// control batch. The next offset still moves to [`RawBatch::next_offset`] when larger.
    Skip,
}

/// Why a batch takes the slow path (the first reason found, in this order).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlowReason {
    /// Up-converted from pre-0.11 messages (magic 0 or 1), which no 4.x broker accepts.
    OldFormat {
        /// The source messages' magic.
        magic: i8,
    },
    /// Offset gaps (compaction): `lastOffsetDelta + 1 != recordsCount`.
    NotDense,
    /// The next offset to replicate falls inside the batch.
    StartsBeforeNextOffset,
    /// LogAppendTime batches are rejected from producers; record timestamps must be rewritten.
    LogAppendTime,
    /// Larger than the target topic's `max.message.bytes`.
    TooLarge {
        /// Batch size in bytes.
        size: usize,
        /// The target's limit.
        max: usize,
    },
}

/// Slow-path batches counted by [`SlowReason`]; the fields sum to the slow-path batches.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SlowReasonCounts {
    /// [`SlowReason::OldFormat`].
    pub old_format: u64,
    /// [`SlowReason::NotDense`].
    pub not_dense: u64,
    /// [`SlowReason::StartsBeforeNextOffset`].
    pub starts_before_next_offset: u64,
    /// [`SlowReason::LogAppendTime`].
    pub log_append_time: u64,
    /// [`SlowReason::TooLarge`].
    pub too_large: u64,
}

impl SlowReasonCounts {
    /// Counts one batch.
    pub fn count(&mut self, reason: SlowReason) {
        let counter = match reason {
            SlowReason::OldFormat { .. } => &mut self.old_format,
            SlowReason::NotDense => &mut self.not_dense,
            SlowReason::StartsBeforeNextOffset => &mut self.starts_before_next_offset,
            SlowReason::LogAppendTime => &mut self.log_append_time,
            SlowReason::TooLarge { .. } => &mut self.too_large,
        };
        *counter += 1;
    }

    /// Adds another set of counts (another shard's).
    pub fn add(&mut self, other: &SlowReasonCounts) {
        for ((_, mine), (_, theirs)) in self.by_name_mut().into_iter().zip(other.by_name()) {
            *mine += theirs;
        }
    }

    /// `(reason, count)` with stable snake_case names, for metrics.
    pub fn by_name(&self) -> [(&'static str, u64); 5] {
        [
            ("old_format", self.old_format),
            ("not_dense", self.not_dense),
            ("starts_before_next_offset", self.starts_before_next_offset),
            ("log_append_time", self.log_append_time),
            ("too_large", self.too_large),
        ]
    }

    fn by_name_mut(&mut self) -> [(&'static str, &mut u64); 5] {
        [
            ("old_format", &mut self.old_format),
            ("not_dense", &mut self.not_dense),
            (
                "starts_before_next_offset",
                &mut self.starts_before_next_offset,
            ),
            ("log_append_time", &mut self.log_append_time),
            ("too_large", &mut self.too_large),
        ]
    }
}

/// Picks the path for `batch` (ARCHITECTURE, data path step 4). `next_offset` is the next
/// source offset to replicate; `max_message_bytes` the target topic's `max.message.bytes`.
pub fn classify(batch: &RawBatch, next_offset: i64, max_message_bytes: usize) -> Path {
    if batch.is_control() || batch.records_count() == 0 || batch.last_offset() < next_offset {
        return Path::Skip;
    }
    if let Some(origin) = batch.legacy_origin() {
        return Path::Slow(SlowReason::OldFormat {
            magic: origin.magic,
        });
    }
    if !batch.is_dense() {
        return Path::Slow(SlowReason::NotDense);
    }
    if batch.base_offset() < next_offset {
        return Path::Slow(SlowReason::StartsBeforeNextOffset);
    }
    if batch.timestamp_type() == TimestampType::LogAppendTime {
        return Path::Slow(SlowReason::LogAppendTime);
    }
    if batch.size() > max_message_bytes {
        return Path::Slow(SlowReason::TooLarge {
            size: batch.size(),
            max: max_message_bytes,
        });
    }
    Path::Fast
}

/// Bounds and position for [`rebuild`].
///
/// Peak memory of one rebuild is about three times the decompressed payload (decoded records,
/// their re-encoding, its compressed form), so at most about `3 * max_decompressed_bytes`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RebuildOptions {
    /// Records below this source offset are dropped. Default `i64::MIN` (keep all).
    pub resume_offset: i64,
    /// Each output batch is at most this many bytes: the target topic's `max.message.bytes`.
    /// Default [`DEFAULT_MAX_MESSAGE_BYTES`].
    pub max_batch_bytes: usize,
    /// Bound on the decompressed payload. Default [`DEFAULT_MAX_DECOMPRESSED_BYTES`].
    pub max_decompressed_bytes: usize,
}

impl Default for RebuildOptions {
    fn default() -> Self {
        Self {
            resume_offset: i64::MIN,
            max_batch_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            max_decompressed_bytes: DEFAULT_MAX_DECOMPRESSED_BYTES,
        }
    }
}

/// A run of consecutive source offsets carried by consecutive records of an output batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OffsetRun {
    /// Source offset of the run's first record.
    pub first: i64,
    /// Records in the run (at least 1).
    pub len: u32,
}

/// One output batch of [`rebuild`] and the source offsets of its records, in order: record `i`
/// of `bytes` (target offset `producedBase + i`) came from source offset
/// `source_offsets().nth(i)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RebuiltBatch {
    /// A dense v2 batch: base offset 0, producer fields -1, same codec as the source, CreateTime.
    pub bytes: Bytes,
    /// Run-length form of the source offsets.
    pub source_runs: Vec<OffsetRun>,
}

impl RebuiltBatch {
    /// Source offsets, one per record.
    pub fn source_offsets(&self) -> impl Iterator<Item = i64> + '_ {
        self.source_runs
            .iter()
            .flat_map(|run| (0..i64::from(run.len)).map(move |i| run.first + i))
    }

    /// Records in the batch.
    pub fn record_count(&self) -> usize {
        self.source_runs.iter().map(|run| run.len as usize).sum()
    }
}

/// Rebuilds `batch` into dense v2 batches (ARCHITECTURE, data path step 6):
/// - records below `opts.resume_offset` are dropped;
/// - offsets are renumbered densely (compaction gaps), each output batch reporting its source
///   offsets;
/// - the output is split so that every batch fits `opts.max_batch_bytes`; a record that cannot
///   fit alone gives [`BatchError::RecordTooLarge`];
/// - LogAppendTime becomes CreateTime with every record's timestamp set to the batch's
///   `maxTimestamp` (what MirrorMaker 2 produces);
/// - a batch up-converted from pre-0.11 messages is compressed with their codec
///   ([`RawBatch::output_compression`]);
/// - transactional, control and delete-horizon bits are cleared, producer fields are -1 and the
///   base offset is 0: apply the shard's [`HeaderRewrite`](super::HeaderRewrite) next.
///
/// An empty result (every record before the resume offset) is not an error. Control batches
/// are refused ([`BatchError::ControlBatch`]): markers are never forwarded as data.
pub fn rebuild(batch: &RawBatch, opts: &RebuildOptions) -> Result<Vec<RebuiltBatch>, BatchError> {
    let base_offset = batch.base_offset();
    if batch.is_control() {
        return Err(BatchError::ControlBatch { base_offset });
    }
    // A rebuilt batch gets a fresh CRC, so a corrupt source batch would come out valid: check
    // the source's CRC first (up-converted batches were checked message by message, and their
    // CRC is ours). The payload is decoded next anyway, so this costs one more pass over it.
    if batch.legacy_origin().is_none() {
        batch.verify_crc()?;
    }
    let records = decode_records(batch, opts.max_decompressed_bytes)?;
    let last_offset_delta = batch.last_offset_delta();
    let mut kept: Vec<(i64, Record)> = Vec::with_capacity(records.len());
    let mut previous: Option<i32> = None;
    for (index, record) in records.into_iter().enumerate() {
        let delta = record.offset_delta;
        let bad = |reason| BatchError::InvalidOffsetDelta {
            base_offset,
            index,
            offset_delta: delta,
            reason,
        };
        // Exact offset translation needs source offsets that increase within the batch range.
        if delta < 0 || previous.is_some_and(|p| delta <= p) {
            return Err(bad("does not increase"));
        }
        if delta > last_offset_delta {
            return Err(bad("is beyond the batch's lastOffsetDelta"));
        }
        previous = Some(delta);
        let offset = base_offset
            .checked_add(i64::from(delta))
            .ok_or_else(|| bad("overflows"))?;
        if offset >= opts.resume_offset {
            kept.push((offset, record));
        }
    }
    let mut out = Vec::new();
    encode_fitting(batch, &kept, opts.max_batch_bytes, &mut out)?;
    Ok(out)
}

/// Merges consecutive dense v2 batches of one partition into one batch holding their records in
/// order: dense offsets from 0, the inputs' codec, CreateTime with every record's own
/// timestamp, keys, values and headers as they were; producer fields -1, not transactional
/// (apply the shard's [`HeaderRewrite`](super::HeaderRewrite) next).
///
/// The shard merges small batches queued behind a full produce window (see
/// `Partition::poll_send`). Every input's CRC is checked first: the output gets a fresh one, so
/// a corrupt input would come out valid. Inputs must share one codec, be CreateTime and hold
/// no control records; anything else is refused with an error, and the caller then sends the
/// inputs as they are.
pub fn coalesce(batches: &[&RawBatch], max_decompressed_bytes: usize) -> Result<Bytes, BatchError> {
    let Some(first) = batches.first() else {
        return Err(BatchError::CoalesceRefused {
            base_offset: -1,
            reason: "no batches",
        });
    };
    let codec = first.compression();
    let mut builder = BatchBuilder::new(codec);
    for batch in batches {
        let refused = |reason| BatchError::CoalesceRefused {
            base_offset: batch.base_offset(),
            reason,
        };
        if batch.compression() != codec {
            return Err(refused("another codec"));
        }
        if batch.is_control() {
            return Err(refused("a control batch"));
        }
        if batch.timestamp_type() != TimestampType::CreateTime || batch.has_delete_horizon() {
            return Err(refused("not CreateTime"));
        }
        if batch.legacy_origin().is_some() {
            return Err(refused("up-converted"));
        }
        batch.verify_crc()?;
        // The bound is on everything decoded so far, not per input.
        let budget = max_decompressed_bytes.saturating_sub(builder.uncompressed_len());
        let records = decode_records(batch, budget)?;
        if records.len() != usize::try_from(batch.records_count()).unwrap_or(usize::MAX) {
            return Err(refused("record count does not match its records"));
        }
        for record in &records {
            builder.push(record)?;
        }
    }
    builder.build()
}

/// Encodes `records` into as few batches as it can find that each fit `max`, appending to `out`.
///
/// Tries the whole group first; if the compressed batch is too large it splits the group into
/// as many parts as the overshoot suggests (at least two), balanced by encoded size, and
/// recurses. Each level at least halves the group, so the cost stays `O(n log n)` record
/// encodings in the worst case, and one encoding in the common case.
fn encode_fitting(
    source: &RawBatch,
    records: &[(i64, Record)],
    max: usize,
    out: &mut Vec<RebuiltBatch>,
) -> Result<(), BatchError> {
    if records.is_empty() {
        return Ok(());
    }
    let mut builder = BatchBuilder::new(source.output_compression());
    for (_, record) in records {
        builder.push(record)?;
    }
    // Splitting by the uncompressed size first avoids compressing huge groups that cannot fit.
    let estimate = builder.uncompressed_len();
    let is_compressed = source.output_compression() != super::Compression::None;
    if !is_compressed && estimate > max && records.len() > 1 {
        return split(source, records, estimate.div_ceil(max.max(1)), max, out);
    }
    let bytes = builder.build()?;
    if bytes.len() <= max {
        out.push(RebuiltBatch {
            source_runs: runs(records),
            bytes,
        });
        return Ok(());
    }
    if records.len() == 1 {
        return Err(BatchError::RecordTooLarge {
            offset: records[0].0,
            size: bytes.len(),
            max,
        });
    }
    // Aim a little below the limit: compressed sizes do not scale exactly with record counts.
    let parts = (bytes.len() * 5 / 4).div_ceil(max.max(1));
    split(source, records, parts, max, out)
}

/// Splits `records` into `parts` (>= 2) groups of similar encoded size and encodes each.
fn split(
    source: &RawBatch,
    records: &[(i64, Record)],
    parts: usize,
    max: usize,
    out: &mut Vec<RebuiltBatch>,
) -> Result<(), BatchError> {
    let parts = parts.clamp(2, records.len());
    let sizes: Vec<usize> = records.iter().map(|(_, r)| approx_record_len(r)).collect();
    let total: usize = sizes.iter().sum();
    let target = total.div_ceil(parts).max(1);
    let mut start = 0;
    let mut acc = 0;
    for (i, size) in sizes.iter().enumerate() {
        acc += size;
        // Close a group when it reaches the target, leaving at least one record for the rest.
        if acc >= target && i + 1 < records.len() {
            encode_fitting(source, &records[start..=i], max, out)?;
            start = i + 1;
            acc = 0;
        }
    }
    if start == 0 {
        // One record dominates: isolate the first record so the recursion always shrinks.
        encode_fitting(source, &records[..1], max, out)?;
        start = 1;
    }
    encode_fitting(source, &records[start..], max, out)
}

/// Encoded size of a record, close enough for balancing splits.
fn approx_record_len(record: &Record) -> usize {
    let field = |b: Option<&Bytes>| b.map_or(1, |b| b.len() + 5);
    let headers: usize = record
        .headers
        .iter()
        .map(|(k, v)| k.len() + 5 + field(v.as_ref()))
        .sum();
    // Length, attributes, timestamp and offset deltas: up to about 20 bytes.
    20 + field(record.key.as_ref()) + field(record.value.as_ref()) + headers
}

/// Run-length form of the records' source offsets.
fn runs(records: &[(i64, Record)]) -> Vec<OffsetRun> {
    let mut runs: Vec<OffsetRun> = Vec::new();
    for &(offset, _) in records {
        match runs.last_mut() {
            Some(run) if run.first + i64::from(run.len) == offset && run.len < u32::MAX => {
                run.len += 1;
            }
            _ => runs.push(OffsetRun {
                first: offset,
                len: 1,
            }),
        }
    }
    runs
}

// The smallest possible batch is a header; a limit below it can never be met.
const _: () = assert!(HEADER_LEN < DEFAULT_MAX_MESSAGE_BYTES);

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::batch::compression::Compression;
    use crate::batch::records::end_txn_marker;
    use crate::batch::walk::ControlType;

    /// Incompressible bytes, so that splitting is needed whatever the codec.
    fn value(i: usize, len: usize) -> Option<Bytes> {
        let mut x = (i as u32).wrapping_mul(2_654_435_761) | 1;
        Some(Bytes::from(
            (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    x as u8
                })
                .collect::<Vec<u8>>(),
        ))
    }

    /// A batch at `base` with records at the given deltas.
    fn sparse(codec: Compression, base: i64, deltas: &[i32], value_len: usize) -> RawBatch {
        let mut b = BatchBuilder::new(codec)
            .base_offset(base)
            .producer(5, 1, 100)
            .transactional(true);
        for (i, &d) in deltas.iter().enumerate() {
            let mut r = Record::new(
                1_000 + i as i64,
                Some(Bytes::from(format!("k{i}"))),
                value(i, value_len),
            );
            r.headers.push((
                Bytes::from_static(b"h"),
                if i % 2 == 0 { None } else { value(i, 3) },
            ));
            b.push_at(d, &r).unwrap();
        }
        RawBatch::new(b.build().unwrap()).unwrap()
    }

    fn decoded(b: &RebuiltBatch) -> Vec<Record> {
        decode_records(&RawBatch::new(b.bytes.clone()).unwrap(), usize::MAX).unwrap()
    }

    /// Records of the source at or after `resume`, with absolute offsets.
    fn surviving(batch: &RawBatch, resume: i64) -> Vec<(i64, Record)> {
        decode_records(batch, usize::MAX)
            .unwrap()
            .into_iter()
            .map(|r| (r.offset(batch.base_offset()), r))
            .filter(|(o, _)| *o >= resume)
            .collect()
    }

    #[test]
    fn a_corrupt_source_batch_is_refused_not_laundered() {
        for codec in [Compression::None, Compression::Lz4] {
            let good = sparse(codec, 40, &[0, 1, 2], 64);
            let mut bytes = good.as_bytes().to_vec();
            let last = bytes.len() - 1;
            bytes[last] ^= 0x01; // a payload byte: the header and its framing stay valid
            let bad = RawBatch::new(Bytes::from(bytes)).unwrap();
            match rebuild(&bad, &RebuildOptions::default()) {
                Err(BatchError::CrcMismatch { base_offset, .. }) => assert_eq!(base_offset, 40),
                other => panic!("{codec:?}: expected a CRC mismatch, got {other:?}"),
            }
        }
    }

    fn check_rebuild(batch: &RawBatch, opts: &RebuildOptions) -> Vec<RebuiltBatch> {
        let out = rebuild(batch, opts).unwrap();
        let expected = surviving(batch, opts.resume_offset);
        let mut got = Vec::new();
        for b in &out {
            let raw = RawBatch::new(b.bytes.clone()).unwrap();
            raw.verify_crc().unwrap();
            assert!(raw.is_dense());
            assert_eq!(raw.base_offset(), 0);
            assert_eq!(raw.producer_id(), -1);
            assert!(!raw.is_transactional());
            assert_eq!(raw.timestamp_type(), TimestampType::CreateTime);
            assert_eq!(raw.compression(), batch.compression());
            assert!(raw.size() <= opts.max_batch_bytes);
            assert_eq!(b.record_count(), raw.records_count() as usize);
            for (offset, record) in b.source_offsets().zip(decoded(b)) {
                got.push((offset, record));
            }
        }
        assert_eq!(got.len(), expected.len());
        for ((go, gr), (eo, er)) in got.iter().zip(&expected) {
            assert_eq!(go, eo);
            assert_eq!(
                (&gr.key, &gr.value, &gr.headers, gr.timestamp),
                (&er.key, &er.value, &er.headers, er.timestamp)
            );
        }
        out
    }

    #[test]
    fn classify_follows_the_architecture_rule() {
        let dense = RawBatch::new(
            BatchBuilder::new(Compression::Lz4)
                .base_offset(100)
                .push_all(&[
                    Record::new(0, None, value(0, 10)),
                    Record::new(0, None, value(1, 10)),
                ])
                .unwrap()
                .build()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(classify(&dense, 100, 1 << 20), Path::Fast);
        assert_eq!(classify(&dense, 50, 1 << 20), Path::Fast);
        assert_eq!(
            classify(&dense, 101, 1 << 20),
            Path::Slow(SlowReason::StartsBeforeNextOffset)
        );
        assert_eq!(classify(&dense, 102, 1 << 20), Path::Skip);
        assert_eq!(
            classify(&dense, 100, 80),
            Path::Slow(SlowReason::TooLarge {
                size: dense.size(),
                max: 80
            })
        );
        let gappy = sparse(Compression::None, 10, &[0, 2, 5], 4);
        assert_eq!(
            classify(&gappy, 0, 1 << 20),
            Path::Slow(SlowReason::NotDense)
        );
        let lat = RawBatch::new(
            BatchBuilder::new(Compression::None)
                .log_append_time(5)
                .push_all(&[Record::new(0, None, None)])
                .unwrap()
                .build()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(
            classify(&lat, 0, 1 << 20),
            Path::Slow(SlowReason::LogAppendTime)
        );
        let marker = RawBatch::new(end_txn_marker(ControlType::Commit, 7, 1, 0, 0)).unwrap();
        assert_eq!(classify(&marker, 0, 1 << 20), Path::Skip);
        let empty = RawBatch::new(BatchBuilder::new(Compression::None).build().unwrap()).unwrap();
        assert_eq!(classify(&empty, 0, 1 << 20), Path::Skip);
    }

    #[test]
    fn compaction_gaps_are_renumbered_with_source_offsets() {
        let batch = sparse(Compression::Zstd, 1000, &[0, 1, 4, 5, 6, 9], 20);
        let out = check_rebuild(&batch, &RebuildOptions::default());
        assert_eq!(out.len(), 1);
        assert_eq!(
            out[0].source_runs,
            vec![
                OffsetRun {
                    first: 1000,
                    len: 2
                },
                OffsetRun {
                    first: 1004,
                    len: 3
                },
                OffsetRun {
                    first: 1009,
                    len: 1
                },
            ]
        );
    }

    #[test]
    fn resume_offset_trims_and_may_empty_the_batch() {
        let batch = sparse(Compression::Gzip, 50, &[0, 1, 2, 3, 4], 8);
        let opts = RebuildOptions {
            resume_offset: 53,
            ..RebuildOptions::default()
        };
        let out = check_rebuild(&batch, &opts);
        assert_eq!(out[0].source_offsets().collect::<Vec<_>>(), vec![53, 54]);
        let opts = RebuildOptions {
            resume_offset: 55,
            ..RebuildOptions::default()
        };
        assert!(rebuild(&batch, &opts).unwrap().is_empty());
    }

    #[test]
    fn log_append_time_becomes_create_time_with_max_timestamp() {
        let batch = RawBatch::new(
            BatchBuilder::new(Compression::Snappy)
                .log_append_time(77_777)
                .push_all(&[
                    Record::new(1, None, value(0, 5)),
                    Record::new(2, None, value(1, 5)),
                ])
                .unwrap()
                .build()
                .unwrap(),
        )
        .unwrap();
        let out = check_rebuild(&batch, &RebuildOptions::default());
        let ts: Vec<i64> = decoded(&out[0]).iter().map(|r| r.timestamp).collect();
        assert_eq!(ts, vec![77_777, 77_777]);
    }

    #[test]
    fn splits_to_fit_max_batch_bytes_for_every_codec() {
        let deltas: Vec<i32> = (0..200).collect();
        for codec in Compression::ALL {
            let batch = sparse(codec, 0, &deltas, 600);
            let opts = RebuildOptions {
                max_batch_bytes: 8 * 1024,
                ..RebuildOptions::default()
            };
            let out = check_rebuild(&batch, &opts);
            assert!(out.len() >= 2, "{codec}: {} batches", out.len());
        }
    }

    #[test]
    fn a_record_too_large_alone_is_an_error() {
        let batch = sparse(Compression::None, 40, &[0, 1, 2], 5000);
        let opts = RebuildOptions {
            max_batch_bytes: 4096,
            ..RebuildOptions::default()
        };
        match rebuild(&batch, &opts) {
            Err(BatchError::RecordTooLarge {
                offset: 40,
                size,
                max: 4096,
            }) => assert!(size > 4096),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn control_batches_are_refused() {
        let marker = RawBatch::new(end_txn_marker(ControlType::Abort, 7, 1, 0, 0)).unwrap();
        assert!(matches!(
            rebuild(&marker, &RebuildOptions::default()),
            Err(BatchError::ControlBatch { base_offset: 7 })
        ));
    }

    #[test]
    fn deltas_beyond_last_offset_delta_are_refused() {
        let mut b = BatchBuilder::new(Compression::None);
        b.push_at(0, &Record::new(0, None, None)).unwrap();
        b.push_at(3, &Record::new(0, None, None)).unwrap();
        let mut bytes = b.build().unwrap().to_vec();
        bytes[23..27].copy_from_slice(&1i32.to_be_bytes());
        // A well-formed CRC over the bad header, so that the deltas are what is refused.
        crate::batch::crc::seal(&mut bytes);
        let batch = RawBatch::new(Bytes::from(bytes)).unwrap();
        assert!(matches!(
            rebuild(&batch, &RebuildOptions::default()),
            Err(BatchError::InvalidOffsetDelta {
                index: 1,
                offset_delta: 3,
                ..
            })
        ));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        #[test]
        fn rebuild_preserves_surviving_records(
            codec_id in 0u8..5,
            gaps in proptest::collection::vec(1i32..4, 1..60),
            value_len in 0usize..400,
            resume_at in 0usize..70,
            max_batch_bytes in prop_oneof![Just(1usize << 20), 2_000usize..20_000],
            log_append_time: bool,
        ) {
            let codec = Compression::from_id(codec_id).unwrap();
            let base = 10_000i64;
            let mut b = BatchBuilder::new(codec).base_offset(base);
            if log_append_time {
                b = b.log_append_time(1_234_567);
            }
            let mut delta = 0;
            for (i, gap) in gaps.iter().enumerate() {
                let mut r = Record::new(i64::from(delta) * 3 - 7, None, value(i, value_len));
                if i % 3 == 0 {
                    r.key = Some(Bytes::new());
                    r.headers.push((Bytes::from_static(b"trace"), None));
                }
                b.push_at(delta, &r).unwrap();
                delta += gap;
            }
            let batch = RawBatch::new(b.build().unwrap()).unwrap();
            let opts = RebuildOptions {
                resume_offset: base + resume_at as i64,
                max_batch_bytes,
                ..RebuildOptions::default()
            };
            check_rebuild(&batch, &opts);
        }
    }
}
