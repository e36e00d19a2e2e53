//! The one error type of the batch layer.

use super::compression::{CodecError, Compression};

/// Everything that can go wrong while walking, decoding, rewriting or rebuilding record batches.
///
/// Offsets are source-partition offsets; `position` is a byte position inside the record set
/// given to the walker.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BatchError {
    /// `batchLength` is negative or too small for any batch of this format.
    #[error(
        "batch at byte {position} of the record set (base offset {base_offset}): \
         batchLength {batch_length} is below the minimum {min_length}"
    )]
    InvalidBatchLength {
        /// Byte position of the batch in the record set.
        position: usize,
        /// The batch's base offset, as read (may be garbage).
        base_offset: i64,
        /// The `batchLength` field.
        batch_length: i32,
        /// The smallest legal value for this format.
        min_length: i32,
    },

    /// A magic 0/1 message where exactly one v2 batch was expected ([`RawBatch::new`]); the
    /// walker up-converts these instead.
    ///
    /// [`RawBatch::new`]: super::RawBatch::new
    #[error(
        "magic {magic} message at offset {base_offset}: a pre-0.11 message set, not a v2 batch"
    )]
    OldMagic {
        /// Offset of the message.
        base_offset: i64,
        /// The magic byte (0 or 1).
        magic: i8,
    },

    /// A pre-0.11 (magic 0 or 1) message that cannot be read or up-converted.
    #[error("pre-0.11 message at offset {offset}{}: {reason}", inner_suffix(*.inner))]
    CorruptLegacyMessage {
        /// Offset of the (outer) message; for a compressed one, its last inner offset.
        offset: i64,
        /// Index of the inner message of a compressed one, if the fault is in there.
        inner: Option<usize>,
        /// What is wrong.
        reason: &'static str,
    },

    /// The CRC-32 of a pre-0.11 message does not match its bytes.
    #[error(
        "pre-0.11 message at offset {offset}{}: CRC mismatch (stored {expected:#010x}, \
         computed {actual:#010x})",
        inner_suffix(*.inner)
    )]
    LegacyCrcMismatch {
        /// Offset of the (outer) message.
        offset: i64,
        /// Index of the inner message of a compressed one, if the fault is in there.
        inner: Option<usize>,
        /// CRC stored in the message.
        expected: u32,
        /// CRC computed over its bytes from the magic on.
        actual: u32,
    },

    /// A magic byte no Kafka version writes.
    #[error("batch at offset {base_offset}: unknown magic {magic}")]
    UnknownMagic {
        /// First offset of the batch.
        base_offset: i64,
        /// The magic byte.
        magic: i8,
    },

    /// Compression codec id 5..=7 in the attributes.
    #[error("batch at offset {base_offset}: unknown compression codec id {codec_id}")]
    UnknownCompression {
        /// First offset of the batch.
        base_offset: i64,
        /// The three codec bits of the attributes.
        codec_id: u8,
    },

    /// The bytes given as one batch are not exactly one batch.
    #[error(
        "batch at offset {base_offset}: {len} bytes given, but its header says {expected} bytes"
    )]
    LengthMismatch {
        /// First offset of the batch (0 when even that is missing).
        base_offset: i64,
        /// Bytes given.
        len: usize,
        /// `12 + batchLength`, or the header size when the header itself is incomplete.
        expected: usize,
    },

    /// The CRC-32C stored in the header does not match the bytes.
    #[error(
        "batch at offset {base_offset}: CRC mismatch (header {expected:#010x}, \
         computed {actual:#010x})"
    )]
    CrcMismatch {
        /// First offset of the batch.
        base_offset: i64,
        /// CRC stored in the header.
        expected: u32,
        /// CRC computed over bytes 21..end.
        actual: u32,
    },

    /// `recordsCount` is negative.
    #[error("batch at offset {base_offset}: invalid record count {count}")]
    InvalidRecordCount {
        /// First offset of the batch.
        base_offset: i64,
        /// The `recordsCount` field.
        count: i32,
    },

    /// A record inside the batch does not parse.
    #[error("batch at offset {base_offset}, record #{index}: {reason}")]
    CorruptRecord {
        /// First offset of the batch.
        base_offset: i64,
        /// Index of the record in the batch (equal to the count for trailing garbage).
        index: usize,
        /// What is wrong.
        reason: &'static str,
    },

    /// The compressed payload is not valid for its codec.
    #[error("batch at offset {base_offset}: cannot decompress {codec} payload: {source}")]
    Decompress {
        /// First offset of the batch.
        base_offset: i64,
        /// Codec from the attributes.
        codec: Compression,
        /// What the codec said.
        #[source]
        source: CodecError,
    },

    /// The payload inflates beyond the configured limit (a decompression bomb, or a limit set
    /// too low for this topic).
    #[error(
        "batch at offset {base_offset}: {codec} payload decompresses to more than \
         {max_decompressed_bytes} bytes (max_decompressed_bytes)"
    )]
    DecompressedTooLarge {
        /// First offset of the batch.
        base_offset: i64,
        /// Codec from the attributes.
        codec: Compression,
        /// The configured limit.
        max_decompressed_bytes: usize,
    },

    /// Compressing a rebuilt batch failed.
    #[error("cannot compress a batch with {codec}: {source}")]
    Compress {
        /// The codec.
        codec: Compression,
        /// What the codec said.
        #[source]
        source: CodecError,
    },

    /// A control batch whose marker record cannot be read.
    #[error("control batch at offset {base_offset}: {reason}")]
    InvalidControlBatch {
        /// First offset of the batch.
        base_offset: i64,
        /// What is wrong.
        reason: &'static str,
    },

    /// A control batch was handed to the rebuild path; markers are never forwarded as data.
    #[error(
        "batch at offset {base_offset} is a control batch; transaction markers are never \
         forwarded"
    )]
    ControlBatch {
        /// First offset of the batch.
        base_offset: i64,
    },

    /// Offset deltas inside a batch go backwards or beyond `lastOffsetDelta`, so source offsets
    /// cannot be mapped exactly.
    #[error("batch at offset {base_offset}, record #{index}: offset delta {offset_delta} {reason}")]
    InvalidOffsetDelta {
        /// First offset of the batch.
        base_offset: i64,
        /// Index of the record in the batch.
        index: usize,
        /// The record's offset delta.
        offset_delta: i32,
        /// What is wrong.
        reason: &'static str,
    },

    /// One record does not fit the target's `max.message.bytes` even alone in a batch.
    #[error(
        "record at offset {offset} needs a {size}-byte batch on its own, above the target's \
         max.message.bytes {max}"
    )]
    RecordTooLarge {
        /// Source offset of the record.
        offset: i64,
        /// Size of the smallest batch that holds it, with the batch's codec.
        size: usize,
        /// The limit.
        max: usize,
    },

    /// Batches that [`coalesce`](super::rebuild::coalesce) does not merge.
    #[error("batch at offset {base_offset} cannot be merged: {reason}")]
    CoalesceRefused {
        /// Base offset of the batch refused (-1 for none).
        base_offset: i64,
        /// Why.
        reason: &'static str,
    },

    /// A batch being built would exceed what the format can express (2^31 bytes or records).
    #[error("batch too large to encode: {records} records, {bytes} bytes")]
    BatchTooLarge {
        /// Records in the batch.
        records: usize,
        /// Encoded bytes (uncompressed records, or the whole batch).
        bytes: usize,
    },

    /// A builder call broke the builder's contract (for example offset deltas that do not
    /// increase).
    #[error("batch builder: {reason}")]
    InvalidBuilderInput {
        /// What is wrong.
        reason: &'static str,
    },
}

/// `, inner message #i` for errors inside a compressed legacy message.
fn inner_suffix(inner: Option<usize>) -> String {
    inner.map_or_else(String::new, |i| format!(", inner message #{i}"))
}
