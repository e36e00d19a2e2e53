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
//!      batch, LogAppendTime, too large for the target). [`rebuild`] decodes and decompresses the
//!      records ([`decode_records`]) and re-encodes one or more dense batches with the same codec
//!      ([`BatchBuilder`]), reporting which source offset each output record came from. The caller
//!      then applies the same [`HeaderRewrite`] as on the fast path.
//!    - [`Path::Skip`]: the batch holds nothing to replicate.
//!
//! Everything here is sans-IO and panic-free on hostile input: every length and count read from
//! the wire is checked against the bytes actually present before it sizes anything, and
//! decompression stops at a configured `max_decompressed_bytes`.
#![forbid(unsafe_code)]

pub mod compression;
pub mod crc;
mod error;
pub mod rebuild;
pub mod records;
pub mod rewrite;
pub mod txn;
mod varint;
pub mod walk;

pub use compression::{CodecError, Compression, DEFAULT_MAX_DECOMPRESSED_BYTES};
pub use error::BatchError;
pub use rebuild::{OffsetRun, Path, RebuildOptions, RebuiltBatch, SlowReason, classify, rebuild};
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
