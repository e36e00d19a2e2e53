//! Feeds arbitrary bytes to the record decoder behind a valid batch header, so the fuzzer
//! spends its time in the decompressors and the record parser rather than in framing.
//! Byte 0 picks the codec and flags, bytes 1..5 the record count, the rest is the payload.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use strait_dataplane::batch::{
    BatchBuilder, Compression, HEADER_LEN, LOG_OVERHEAD, RawBatch, RebuildOptions, decode_records,
    rebuild,
};

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let Some((count, payload)) = rest.split_first_chunk::<4>() else {
        return;
    };
    let codec = Compression::from_id(selector % 5).expect("ids 0..5 are codecs");
    let mut batch = BatchBuilder::new(codec)
        .base_offset(1000)
        .build()
        .expect("an empty batch builds")
        .slice(..HEADER_LEN)
        .to_vec();
    batch[8..12]
        .copy_from_slice(&((HEADER_LEN - LOG_OVERHEAD + payload.len()) as i32).to_be_bytes());
    // Bit 3 of the selector: LogAppendTime.
    batch[22] |= selector & 0x08;
    batch[57..61].copy_from_slice(count);
    batch.extend_from_slice(payload);
    // rebuild refuses a batch whose CRC is wrong: a right one lets the fuzzer reach the decoder.
    strait_dataplane::batch::crc::seal(&mut batch);
    let batch = RawBatch::new(Bytes::from(batch)).expect("the frame is built valid");
    if let Ok(records) = decode_records(&batch, 1 << 20) {
        assert_eq!(records.len(), batch.records_count() as usize);
    }
    let opts = RebuildOptions {
        max_batch_bytes: 2048,
        max_decompressed_bytes: 1 << 20,
        ..RebuildOptions::default()
    };
    let _ = rebuild(&batch, &opts);
});
