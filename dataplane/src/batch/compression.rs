//! The record-payload codecs, written and read the way Kafka's Java client does.
//!
//! - **gzip**: standard gzip members (`GZIPOutputStream`); the reader accepts concatenated
//!   members like `GZIPInputStream`.
//! - **snappy**: the Java client writes snappy-java's *xerial* framing: the 16-byte header
//!   `82 'S' 'N' 'A' 'P' 'P' 'Y' 00`, version 1, compatible version 1 (both i32 BE), then chunks
//!   of `i32 BE compressed length + raw snappy block`, each block holding at most 32 KiB of
//!   input. The reader also takes a bare raw snappy block (what snappy-java falls back to when
//!   the magic is absent, and what some non-Java clients write) and concatenated xerial streams.
//! - **lz4**: the LZ4 *frame* format, as `Lz4BlockOutputStream` writes it: FLG `0x60` (version 1,
//!   independent blocks, no block or content checksum, no content size), BD `0x40` (64 KiB
//!   blocks), the standard header checksum, blocks, and a zero end mark. Kafka's reader requires
//!   independent blocks, accepts 64 KiB..4 MiB blocks, block checksums (verified), a content size
//!   (skipped) and a content checksum (skipped); we write exactly the Java bytes layout.
//! - **zstd**: standard zstd frames (zstd-jni), level 3 like Kafka's default.
//!
//! Decompression is bounded by `max_decompressed_bytes` whatever the input claims, so a
//! decompression bomb costs at most that much memory (plus codec windows of a few MiB).

use std::fmt;
use std::io::{self, Read, Write};

/// Default bound on one batch's decompressed payload (64 MiB): 64 times Kafka's default
/// `max.message.bytes`, enough for very compressible real data, small enough for a shard.
pub const DEFAULT_MAX_DECOMPRESSED_BYTES: usize = 64 * 1024 * 1024;

/// Snappy-java's stream header magic.
const XERIAL_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];
/// Magic, version, compatible version.
const XERIAL_HEADER_LEN: usize = 16;
/// `SnappyCodec.DEFAULT_VERSION` / `MINIMUM_COMPATIBLE_VERSION`.
const XERIAL_VERSION: i32 = 1;
/// `SnappyOutputStream.DEFAULT_BLOCK_SIZE`.
const XERIAL_BLOCK_LEN: usize = 32 * 1024;
/// Upper bound of snappy's expansion: a 3-byte copy element emits at most 64 bytes, so no valid
/// block inflates more than ~22x; anything claiming more than this is rejected before allocating.
const SNAPPY_MAX_RATIO: usize = 32;

/// Kafka's default zstd level (`CompressionType.ZSTD.defaultLevel()`).
const ZSTD_LEVEL: i32 = 3;
/// zstd window bounds (log2 bytes). Frames from zstd-jni at normal levels use up to 2^23; the
/// upper bound is zstd's own default limit.
const ZSTD_WINDOW_LOG_MIN: u32 = 23;
const ZSTD_WINDOW_LOG_MAX: u32 = 27;

/// The compression codec of a batch (attribute bits 0..2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Compression {
    /// Codec 0.
    None,
    /// Codec 1.
    Gzip,
    /// Codec 2.
    Snappy,
    /// Codec 3.
    Lz4,
    /// Codec 4.
    Zstd,
}

impl Compression {
    /// All codecs, in id order.
    pub const ALL: [Compression; 5] = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];

    /// The codec with this id, or `None` for ids 5..=7.
    pub fn from_id(id: u8) -> Option<Self> {
        Some(match id {
            0 => Compression::None,
            1 => Compression::Gzip,
            2 => Compression::Snappy,
            3 => Compression::Lz4,
            4 => Compression::Zstd,
            _ => return None,
        })
    }

    /// The id written in the attributes.
    pub fn id(self) -> u8 {
        match self {
            Compression::None => 0,
            Compression::Gzip => 1,
            Compression::Snappy => 2,
            Compression::Lz4 => 3,
            Compression::Zstd => 4,
        }
    }

    /// Kafka's name for the codec (`compression.type`).
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Snappy => "snappy",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }
}

impl fmt::Display for Compression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a codec reported. Carried inside [`BatchError`](super::BatchError), which adds the batch.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CodecError {
    /// The stream decoder (gzip, lz4, zstd) failed.
    #[error("{0}")]
    Stream(#[from] io::Error),
    /// A snappy block is invalid.
    #[error("snappy block at byte {position}: {source}")]
    Snappy {
        /// Byte position of the block in the payload.
        position: usize,
        /// What snap said.
        #[source]
        source: snap::Error,
    },
    /// The xerial framing around snappy blocks is invalid.
    #[error("xerial snappy framing at byte {position}: {reason}")]
    Xerial {
        /// Byte position in the payload.
        position: usize,
        /// What is wrong.
        reason: &'static str,
    },
    /// A snappy block declares more output than any valid block of its size can produce.
    #[error("snappy block at byte {position} claims {claimed} bytes from {len} input bytes")]
    SnappyLength {
        /// Byte position of the block in the payload.
        position: usize,
        /// Declared output length.
        claimed: usize,
        /// Block length.
        len: usize,
    },
    /// The output would exceed the caller's limit.
    #[error("decompressed size exceeds {max_decompressed_bytes} bytes")]
    LimitExceeded {
        /// The limit.
        max_decompressed_bytes: usize,
    },
}

/// Decompresses a batch payload, failing with [`CodecError::LimitExceeded`] rather than
/// producing more than `max_decompressed_bytes`.
pub fn decompress(
    codec: Compression,
    input: &[u8],
    max_decompressed_bytes: usize,
) -> Result<Vec<u8>, CodecError> {
    match codec {
        Compression::None => {
            if input.len() > max_decompressed_bytes {
                return Err(CodecError::LimitExceeded {
                    max_decompressed_bytes,
                });
            }
            Ok(input.to_vec())
        }
        Compression::Gzip => read_capped(
            flate2::read::MultiGzDecoder::new(input),
            input.len(),
            max_decompressed_bytes,
        ),
        Compression::Snappy => decompress_snappy(input, max_decompressed_bytes),
        Compression::Lz4 => read_capped(
            lz4_flex::frame::FrameDecoder::new(input),
            input.len(),
            max_decompressed_bytes,
        ),
        Compression::Zstd => {
            let mut decoder = zstd::stream::read::Decoder::with_buffer(input)?;
            // The window is allocated up front from the frame header; bound it by the output
            // limit (never below what ordinary levels use, never above zstd's default cap).
            let window_log = usize::BITS - max_decompressed_bytes.saturating_sub(1).leading_zeros();
            decoder.window_log_max(window_log.clamp(ZSTD_WINDOW_LOG_MIN, ZSTD_WINDOW_LOG_MAX))?;
            read_capped(decoder, input.len(), max_decompressed_bytes)
        }
    }
}

/// Compresses a batch payload the way Kafka's Java producer does (see the module doc).
pub fn compress(codec: Compression, input: &[u8]) -> Result<Vec<u8>, CodecError> {
    Ok(match codec {
        Compression::None => input.to_vec(),
        Compression::Gzip => {
            let mut encoder = flate2::write::GzEncoder::new(
                Vec::with_capacity(input.len() / 2 + 64),
                flate2::Compression::default(),
            );
            encoder.write_all(input)?;
            encoder.finish()?
        }
        Compression::Snappy => compress_xerial(input)?,
        Compression::Lz4 => {
            let info = lz4_flex::frame::FrameInfo::new()
                .block_size(lz4_flex::frame::BlockSize::Max64KB)
                .block_mode(lz4_flex::frame::BlockMode::Independent)
                .block_checksums(false)
                .content_checksum(false);
            let mut encoder = lz4_flex::frame::FrameEncoder::with_frame_info(
                info,
                Vec::with_capacity(input.len() / 2 + 64),
            );
            encoder.write_all(input)?;
            encoder.finish().map_err(io::Error::from)?
        }
        Compression::Zstd => zstd::bulk::compress(input, ZSTD_LEVEL)?,
    })
}

/// lz4 as magic 0 wrappers carry it: Kafka before 0.10 computed the frame header checksum over
/// the magic number too (KAFKA-3160), and Kafka's reader ignores that byte for magic 0. We set it
/// to the right value (a copy of the header, at most 19 bytes) and decode as usual.
pub(crate) fn decompress_lz4_ignoring_header_checksum(
    input: &[u8],
    max_decompressed_bytes: usize,
) -> Result<Vec<u8>, CodecError> {
    // Magic, FLG, BD, then an 8-byte content size and a 4-byte dictionary id if FLG says so.
    const FLG_CONTENT_SIZE: u8 = 0x08;
    const FLG_DICTIONARY_ID: u8 = 0x01;
    let Some(&flg) = input.get(4) else {
        return decompress(Compression::Lz4, input, max_decompressed_bytes);
    };
    let mut checksum_at = 6;
    if flg & FLG_CONTENT_SIZE != 0 {
        checksum_at += 8;
    }
    if flg & FLG_DICTIONARY_ID != 0 {
        checksum_at += 4;
    }
    let (Some(descriptor), Some(rest)) = (input.get(4..checksum_at), input.get(checksum_at + 1..))
    else {
        return decompress(Compression::Lz4, input, max_decompressed_bytes);
    };
    let mut header = input[..checksum_at].to_vec();
    header.push((xxh32(descriptor) >> 8) as u8);
    read_capped(
        lz4_flex::frame::FrameDecoder::new(header.as_slice().chain(rest)),
        input.len(),
        max_decompressed_bytes,
    )
}

/// XXH32 with seed 0 of fewer than 16 bytes (an lz4 frame descriptor): the short-input path of
/// the algorithm, which is all a frame header checksum needs.
pub(crate) fn xxh32(input: &[u8]) -> u32 {
    const P1: u32 = 0x9E37_79B1;
    const P2: u32 = 0x85EB_CA77;
    const P3: u32 = 0xC2B2_AE3D;
    const P4: u32 = 0x27D4_EB2F;
    const P5: u32 = 0x1656_67B1;
    debug_assert!(input.len() < 16, "xxh32 here covers short inputs only");
    let mut h = P5.wrapping_add(input.len() as u32);
    let mut words = input.chunks_exact(4);
    for w in &mut words {
        let w = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
        h = h
            .wrapping_add(w.wrapping_mul(P3))
            .rotate_left(17)
            .wrapping_mul(P4);
    }
    for &b in words.remainder() {
        h = h
            .wrapping_add(u32::from(b).wrapping_mul(P5))
            .rotate_left(11)
            .wrapping_mul(P1);
    }
    h ^= h >> 15;
    h = h.wrapping_mul(P2);
    h ^= h >> 13;
    h = h.wrapping_mul(P3);
    h ^ (h >> 16)
}

/// Reads a decoder to the end, keeping at most `max + 1` bytes to detect overflow.
fn read_capped(reader: impl Read, input_len: usize, max: usize) -> Result<Vec<u8>, CodecError> {
    let cap = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1);
    // A first guess from the input size; the Vec grows as needed, never beyond the cap.
    let mut out = Vec::with_capacity(input_len.saturating_mul(4).min(max));
    reader.take(cap).read_to_end(&mut out)?;
    if out.len() > max {
        return Err(CodecError::LimitExceeded {
            max_decompressed_bytes: max,
        });
    }
    Ok(out)
}

fn decompress_snappy(input: &[u8], max: usize) -> Result<Vec<u8>, CodecError> {
    // snappy-java decides on the magic prefix alone; anything else is one raw block.
    let is_xerial = input.len() >= XERIAL_HEADER_LEN && input[..8] == XERIAL_MAGIC;
    let mut out = Vec::new();
    if !is_xerial {
        snappy_block(input, 0, max, &mut out)?;
        return Ok(out);
    }
    let mut pos = XERIAL_HEADER_LEN;
    // Like snappy-java, 1..3 trailing bytes that cannot hold a chunk length end the stream.
    while let Some(len_bytes) = input.get(pos..pos + 4) {
        let head = [len_bytes[0], len_bytes[1], len_bytes[2], len_bytes[3]];
        if head
            == [
                XERIAL_MAGIC[0],
                XERIAL_MAGIC[1],
                XERIAL_MAGIC[2],
                XERIAL_MAGIC[3],
            ]
        {
            // A concatenated stream: another full header follows.
            let header = input
                .get(pos..pos + XERIAL_HEADER_LEN)
                .ok_or(CodecError::Xerial {
                    position: pos,
                    reason: "truncated header of a concatenated stream",
                })?;
            if header[..8] != XERIAL_MAGIC {
                // snappy-java treats an invalid inner header as the end of the stream.
                break;
            }
            pos += XERIAL_HEADER_LEN;
            continue;
        }
        let chunk_len = i32::from_be_bytes(head);
        let start = pos + 4;
        let chunk_len = usize::try_from(chunk_len).map_err(|_| CodecError::Xerial {
            position: pos,
            reason: "negative chunk length",
        })?;
        let chunk = input
            .get(start..start + chunk_len)
            .ok_or(CodecError::Xerial {
                position: pos,
                reason: "chunk length beyond the end of the payload",
            })?;
        snappy_block(chunk, start, max, &mut out)?;
        pos = start + chunk_len;
    }
    Ok(out)
}

/// Appends one raw snappy block's output to `out`, within the overall limit.
fn snappy_block(
    block: &[u8],
    position: usize,
    max: usize,
    out: &mut Vec<u8>,
) -> Result<(), CodecError> {
    let claimed = snap::raw::decompress_len(block)
        .map_err(|source| CodecError::Snappy { position, source })?;
    if claimed
        > block
            .len()
            .saturating_mul(SNAPPY_MAX_RATIO)
            .saturating_add(16)
    {
        return Err(CodecError::SnappyLength {
            position,
            claimed,
            len: block.len(),
        });
    }
    if claimed > max.saturating_sub(out.len()) {
        return Err(CodecError::LimitExceeded {
            max_decompressed_bytes: max,
        });
    }
    let start = out.len();
    out.resize(start + claimed, 0);
    let written = snap::raw::Decoder::new()
        .decompress(block, &mut out[start..])
        .map_err(|source| CodecError::Snappy { position, source })?;
    if written != claimed {
        return Err(CodecError::SnappyLength {
            position,
            claimed,
            len: block.len(),
        });
    }
    Ok(())
}

fn compress_xerial(input: &[u8]) -> Result<Vec<u8>, CodecError> {
    let chunks = input.len().div_ceil(XERIAL_BLOCK_LEN);
    let mut out = Vec::with_capacity(
        XERIAL_HEADER_LEN + chunks * 4 + snap::raw::max_compress_len(XERIAL_BLOCK_LEN) * chunks,
    );
    out.extend_from_slice(&XERIAL_MAGIC);
    out.extend_from_slice(&XERIAL_VERSION.to_be_bytes());
    out.extend_from_slice(&XERIAL_VERSION.to_be_bytes());
    let mut encoder = snap::raw::Encoder::new();
    for chunk in input.chunks(XERIAL_BLOCK_LEN) {
        let len_at = out.len();
        out.extend_from_slice(&[0; 4]);
        let start = out.len();
        out.resize(start + snap::raw::max_compress_len(chunk.len()), 0);
        let written = encoder
            .compress(chunk, &mut out[start..])
            .map_err(|source| CodecError::Snappy {
                position: start,
                source,
            })?;
        out.truncate(start + written);
        let written = i32::try_from(written).map_err(|_| CodecError::Xerial {
            position: len_at,
            reason: "chunk above 2 GiB",
        })?;
        out[len_at..start].copy_from_slice(&written.to_be_bytes());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn sample(len: usize) -> Vec<u8> {
        // Compressible but not trivial.
        (0..len)
            .map(|i| b"kafka-record-"[i % 13] ^ ((i / 97) as u8))
            .collect()
    }

    #[test]
    fn codec_ids_round_trip() {
        for codec in Compression::ALL {
            assert_eq!(Compression::from_id(codec.id()), Some(codec));
        }
        for id in 5..=7 {
            assert_eq!(Compression::from_id(id), None);
        }
    }

    #[test]
    fn lz4_frame_header_is_the_java_one() {
        let out = compress(Compression::Lz4, &sample(1000)).unwrap();
        // Magic (LE), FLG 0x60, BD 0x40, header checksum (xxh32 of FLG,BD >> 8).
        assert_eq!(&out[..7], &[0x04, 0x22, 0x4d, 0x18, 0x60, 0x40, 0x82]);
        // No content checksum: the frame ends with the zero end mark.
        assert_eq!(&out[out.len() - 4..], &[0, 0, 0, 0]);
    }

    #[test]
    fn lz4_reads_a_java_style_stored_block() {
        // Lz4BlockOutputStream stores an incompressible block raw, flagged by the high bit.
        let data = b"abcdefgh";
        let mut frame = vec![0x04, 0x22, 0x4d, 0x18, 0x60, 0x40, 0x82];
        frame.extend_from_slice(&(data.len() as u32 | 0x8000_0000).to_le_bytes());
        frame.extend_from_slice(data);
        frame.extend_from_slice(&[0, 0, 0, 0]);
        assert_eq!(decompress(Compression::Lz4, &frame, 1 << 20).unwrap(), data);
    }

    #[test]
    fn lz4_reads_frames_with_checksums_and_content_size() {
        let data = sample(200_000);
        let info = lz4_flex::frame::FrameInfo::new()
            .block_size(lz4_flex::frame::BlockSize::Max256KB)
            .block_checksums(true)
            .content_checksum(true)
            .content_size(Some(data.len() as u64));
        let mut enc = lz4_flex::frame::FrameEncoder::with_frame_info(info, Vec::new());
        enc.write_all(&data).unwrap();
        let frame = enc.finish().unwrap();
        assert_eq!(decompress(Compression::Lz4, &frame, 1 << 20).unwrap(), data);
    }

    #[test]
    fn xxh32_matches_the_lz4_header_checksums_lz4_flex_writes() {
        for (data, content_size) in [(&b"x"[..], None), (b"x", Some(1u64)), (b"hello", Some(5))] {
            let info = lz4_flex::frame::FrameInfo::new().content_size(content_size);
            let mut enc = lz4_flex::frame::FrameEncoder::with_frame_info(info, Vec::new());
            enc.write_all(data).unwrap();
            let frame = enc.finish().unwrap();
            let hc_at = if content_size.is_some() { 14 } else { 6 };
            assert_eq!((xxh32(&frame[4..hc_at]) >> 8) as u8, frame[hc_at]);
        }
        // Reference values of XXH32 (seed 0).
        assert_eq!(xxh32(b""), 0x02CC_5D05);
        assert_eq!(xxh32(b"a"), 0x550D_7456);
        assert_eq!(xxh32(b"abc"), 0x32D1_53FF);
    }

    #[test]
    fn lz4_header_checksum_is_ignored_only_when_asked() {
        let data = sample(3000);
        let mut frame = compress(Compression::Lz4, &data).unwrap();
        // What Kafka before 0.10 wrote: the checksum of magic, FLG and BD.
        frame[6] = (xxh32(&frame[..6]) >> 8) as u8;
        assert!(decompress(Compression::Lz4, &frame, 1 << 20).is_err());
        assert_eq!(
            decompress_lz4_ignoring_header_checksum(&frame, 1 << 20).unwrap(),
            data
        );
        // A truncated header is an error (lz4_flex reads a bare magic number, or a header with
        // no blocks, as an empty frame, for this reader as for `decompress`).
        for cut in 5..7 {
            let got = decompress_lz4_ignoring_header_checksum(&frame[..cut], 1 << 20);
            assert!(got.is_err(), "cut {cut}: {got:?}");
        }
        assert!(matches!(
            decompress_lz4_ignoring_header_checksum(&frame, 100),
            Err(CodecError::LimitExceeded { .. })
        ));
    }

    #[test]
    fn snappy_writes_xerial_framing_with_32k_chunks() {
        let data = sample(70_000);
        let out = compress(Compression::Snappy, &data).unwrap();
        assert_eq!(&out[..8], &XERIAL_MAGIC);
        assert_eq!(&out[8..16], &[0, 0, 0, 1, 0, 0, 0, 1]);
        // Walk the chunks: 32 KiB + 32 KiB + the rest.
        let mut pos = 16;
        let mut sizes = Vec::new();
        while pos < out.len() {
            let len = u32::from_be_bytes(out[pos..pos + 4].try_into().unwrap()) as usize;
            let block = &out[pos + 4..pos + 4 + len];
            sizes.push(snap::raw::decompress_len(block).unwrap());
            pos += 4 + len;
        }
        assert_eq!(sizes, vec![32768, 32768, 70_000 - 65536]);
        assert_eq!(
            decompress(Compression::Snappy, &out, 1 << 20).unwrap(),
            data
        );
    }

    #[test]
    fn snappy_reads_raw_blocks_and_concatenated_streams() {
        let a = sample(5000);
        let b = b"second stream".to_vec();
        let raw = snap::raw::Encoder::new().compress_vec(&a).unwrap();
        assert_eq!(decompress(Compression::Snappy, &raw, 1 << 20).unwrap(), a);

        let mut both = compress(Compression::Snappy, &a).unwrap();
        both.extend_from_slice(&compress(Compression::Snappy, &b).unwrap());
        let expected = [&a[..], &b[..]].concat();
        assert_eq!(
            decompress(Compression::Snappy, &both, 1 << 20).unwrap(),
            expected
        );
    }

    #[test]
    fn snappy_rejects_bad_chunk_lengths() {
        let mut out = compress(Compression::Snappy, &sample(100)).unwrap();
        out[16..20].copy_from_slice(&(-5i32).to_be_bytes());
        assert!(matches!(
            decompress(Compression::Snappy, &out, 1 << 20),
            Err(CodecError::Xerial { .. })
        ));
        let mut out = compress(Compression::Snappy, &sample(100)).unwrap();
        out[16..20].copy_from_slice(&1_000_000i32.to_be_bytes());
        assert!(decompress(Compression::Snappy, &out, 1 << 20).is_err());
    }

    #[test]
    fn snappy_length_bomb_is_rejected_before_allocating() {
        // A 6-byte "block" claiming 2^31 bytes of output.
        let bomb = [0x80, 0x80, 0x80, 0x80, 0x08, 0x00];
        assert!(decompress(Compression::Snappy, &bomb, usize::MAX).is_err());
    }

    #[test]
    fn bombs_stop_at_the_limit() {
        let zeros = vec![0u8; 4 << 20];
        for codec in Compression::ALL {
            let packed = compress(codec, &zeros).unwrap();
            let got = decompress(codec, &packed, 1 << 20);
            assert!(
                matches!(
                    got,
                    Err(CodecError::LimitExceeded {
                        max_decompressed_bytes: 1048576
                    })
                ),
                "{codec}: {got:?}"
            );
            assert_eq!(
                decompress(codec, &packed, 4 << 20).unwrap().len(),
                4 << 20,
                "{codec}"
            );
        }
    }

    #[test]
    fn empty_input_round_trips() {
        for codec in Compression::ALL {
            let packed = compress(codec, &[]).unwrap();
            assert_eq!(
                decompress(codec, &packed, 16).unwrap(),
                Vec::<u8>::new(),
                "{codec}"
            );
        }
    }

    proptest! {
        #[test]
        fn round_trip(
            codec_id in 0u8..5,
            data in prop_oneof![
                proptest::collection::vec(any::<u8>(), 0..100_000),
                (0usize..200_000).prop_map(sample),
            ],
        ) {
            let codec = Compression::from_id(codec_id).unwrap();
            let packed = compress(codec, &data).unwrap();
            prop_assert_eq!(decompress(codec, &packed, data.len()).unwrap(), data);
        }

        #[test]
        fn garbage_never_panics(
            codec_id in 0u8..5,
            data in proptest::collection::vec(any::<u8>(), 0..2048),
        ) {
            let codec = Compression::from_id(codec_id).unwrap();
            let _ = decompress(codec, &data, 1 << 16);
        }
    }
}
