//! Walks arbitrary bytes as a fetched record set and pushes every batch through every stage:
//! accessors, read_committed filter, path selection, header rewrite, record decoding (small
//! decompression cap) and rebuild. Checks our own invariants on the way.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use strait_dataplane::batch::{
    AbortedFilter, BatchWalker, HeaderRewrite, RawBatch, RebuildOptions, classify, decode_records,
    rebuild,
};

const MAX_DECOMPRESSED_BYTES: usize = 1 << 20;
const MAX_BATCH_BYTES: usize = 4096;

fuzz_target!(|data: &[u8]| {
    let len = data.len();
    let mut walker = BatchWalker::new(Bytes::copy_from_slice(data));
    let mut filter = AbortedFilter::new([(0, 0), (1, 10), (2, 1000)]);
    let mut consumed = 0;
    for batch in (&mut walker).flatten() {
        consumed += batch.source_size();
        let _ = (
            batch.base_offset(),
            batch.batch_length(),
            batch.partition_leader_epoch(),
            batch.magic(),
            batch.crc(),
            batch.compression(),
            batch.timestamp_type(),
            batch.is_transactional(),
            batch.is_control(),
            batch.has_delete_horizon(),
            batch.base_timestamp(),
            batch.max_timestamp(),
            batch.producer_epoch(),
            batch.base_sequence(),
            batch.next_offset(),
            batch.is_dense(),
            batch.payload(),
            batch.control_type(),
        );
        let _ = filter.classify(&batch);
        let _ = classify(&batch, 5, MAX_BATCH_BYTES);

        let rewrite = HeaderRewrite {
            producer_id: 42,
            producer_epoch: 1,
            base_sequence: 7,
            transactional: false,
        };
        let forwarded = rewrite.forward(&batch);
        assert_eq!(forwarded.len(), batch.size());
        let forwarded = RawBatch::new(forwarded.to_bytes()).expect("rewrite keeps the framing");
        assert_eq!(forwarded.verify_crc().is_ok(), batch.verify_crc().is_ok());

        if let Ok(records) = decode_records(&batch, MAX_DECOMPRESSED_BYTES) {
            assert_eq!(records.len(), batch.records_count() as usize);
        }
        let opts = RebuildOptions {
            resume_offset: batch.base_offset().wrapping_add(1),
            max_batch_bytes: MAX_BATCH_BYTES,
            max_decompressed_bytes: MAX_DECOMPRESSED_BYTES,
        };
        // rebuild refuses a v2 batch whose CRC is wrong (the fuzzer's nearly always is): a
        // resealed copy lets it reach the decoder and the rebuild.
        let batch = match batch.legacy_origin() {
            Some(_) => batch,
            None => {
                let mut resealed = batch.as_bytes().to_vec();
                strait_dataplane::batch::crc::seal(&mut resealed);
                RawBatch::new(Bytes::from(resealed)).expect("resealing keeps the framing")
            }
        };
        if let Ok(out) = rebuild(&batch, &opts) {
            for b in out {
                let raw = RawBatch::new(b.bytes.clone()).expect("rebuilt batches are framed");
                assert!(raw.size() <= MAX_BATCH_BYTES);
                assert!(raw.is_dense());
                raw.verify_crc()
                    .expect("rebuilt batches have a correct CRC");
            }
        }
    }
    assert!(consumed + walker.partial_tail_len() <= len);
});
