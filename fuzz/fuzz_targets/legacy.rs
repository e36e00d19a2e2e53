//! Pre-0.11 messages: arbitrary bytes as the value of a magic 0/1 message with a correct CRC,
//! so the fuzzer spends its time in the wrapper's decompression, the inner message parser and the
//! up-conversion rather than in CRCs. Byte 0 picks magic (bit 0), codec (bits 1..2: none, gzip,
//! snappy, lz4) and LogAppendTime (bit 3); bytes 1..9 are the offset; the rest is the value. An
//! uncompressed message is followed by the value's bytes again as raw record-set bytes, so runs
//! and framing after a good message are fuzzed too.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use strait_dataplane::batch::legacy::encode::{self, LegacyMessage};
use strait_dataplane::batch::{
    BatchWalker, Compression, Path, RawBatch, RebuildOptions, SlowReason, classify, decode_records,
    rebuild,
};

const MAX_DECOMPRESSED_BYTES: usize = 1 << 20;
const MAX_BATCH_BYTES: usize = 4096;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let Some((offset, value)) = rest.split_first_chunk::<8>() else {
        return;
    };
    let magic = (selector & 1) as i8;
    let codec = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
    ][usize::from((selector >> 1) & 3)];
    let mut set = encode::message(
        magic,
        encode::attributes(codec, selector & 0x08 != 0),
        &LegacyMessage {
            offset: i64::from_be_bytes(*offset),
            timestamp: 1_700_000_000_000,
            key: None,
            value: Some(Bytes::copy_from_slice(value)),
        },
    );
    if codec == Compression::None {
        set.extend_from_slice(value);
    }
    let len = set.len();
    let mut walker =
        BatchWalker::new(Bytes::from(set)).max_decompressed_bytes(MAX_DECOMPRESSED_BYTES);
    let mut consumed = 0;
    for batch in (&mut walker).flatten() {
        consumed += batch.source_size();
        // The bytes after an uncompressed message may frame a v2 batch: the walker target's.
        let Some(origin) = batch.legacy_origin() else {
            continue;
        };
        batch
            .verify_crc()
            .expect("up-converted batches have a correct CRC");
        assert_eq!(batch.compression(), Compression::None);
        let path = classify(&batch, i64::MIN, MAX_BATCH_BYTES);
        assert_eq!(
            path,
            Path::Slow(SlowReason::OldFormat {
                magic: origin.magic
            })
        );
        let records =
            decode_records(&batch, MAX_DECOMPRESSED_BYTES).expect("up-converted batches decode");
        assert_eq!(records.len(), batch.records_count() as usize);
        let opts = RebuildOptions {
            max_batch_bytes: MAX_BATCH_BYTES,
            max_decompressed_bytes: MAX_DECOMPRESSED_BYTES,
            ..RebuildOptions::default()
        };
        if let Ok(out) = rebuild(&batch, &opts) {
            let mut rebuilt = 0;
            for b in out {
                let raw = RawBatch::new(b.bytes.clone()).expect("rebuilt batches are framed");
                assert!(raw.size() <= MAX_BATCH_BYTES);
                assert_eq!(raw.compression(), batch.output_compression());
                raw.verify_crc()
                    .expect("rebuilt batches have a correct CRC");
                rebuilt += b.record_count();
            }
            assert_eq!(rebuilt, records.len());
        }
    }
    assert!(consumed + walker.partial_tail_len() <= len);
});
