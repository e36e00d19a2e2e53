//! Micro-benchmarks of the batch hot path (walk, classify, header rewrite with CRC patch) and of
//! the slow path (rebuild).
//!
//! Run: `cargo bench -p strait-perf --bench batch -- --quick` (or `--measurement-time 2`).
//! Throughput is in bytes of record set, so criterion prints GB/s; batches/s is that divided by
//! the batch size in the benchmark's name.
#![forbid(unsafe_code)]

use std::hint::black_box;

use bytes::Bytes;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use strait_dataplane::batch::{
    BatchBuilder, BatchWalker, Compression, HeaderRewrite, Path, RawBatch, RebuildOptions, Record,
    classify, rebuild,
};

const RECORD_SET_BYTES: usize = 1 << 20;

/// Pseudo-random bytes with some repetition, like JSON-ish payloads: compressible about 2-3x.
fn payload(seed: u32, len: usize) -> Bytes {
    let mut x = seed.wrapping_mul(2_654_435_761) | 1;
    let words: [&[u8]; 8] = [
        b"{\"id\":",
        b"\"user\":\"",
        b"\",\"ts\":",
        b"\"event\":\"click\"",
        b"\"page\":\"/home\"",
        b",\"amount\":",
        b"}",
        b"\"session\":\"",
    ];
    let mut out = Vec::with_capacity(len + 16);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        if x.is_multiple_of(3) {
            out.extend_from_slice(words[(x >> 8) as usize % words.len()]);
        } else {
            out.extend((0..4).map(|i| b'a' + ((x >> (i * 5)) % 26) as u8));
        }
    }
    out.truncate(len);
    Bytes::from(out)
}

/// One batch at `base_offset` holding about `target_bytes` of 1 KiB records.
fn batch(codec: Compression, base_offset: i64, target_bytes: usize) -> Bytes {
    let mut builder = BatchBuilder::new(codec)
        .base_offset(base_offset)
        .producer(7, 0, 0);
    let mut i = 0u32;
    while builder.uncompressed_len() + 1100 <= target_bytes {
        let key = Bytes::from(format!("key-{i}"));
        builder
            .push(&Record::new(
                1_700_000_000_000 + i64::from(i),
                Some(key),
                Some(payload(i, 1024)),
            ))
            .expect("small records fit");
        i += 1;
    }
    builder.build().expect("bench batches build")
}

/// About 1 MiB of uncompressed batches of `batch_bytes` each, as a fetch response carries them
/// (the fast path never looks inside the payload, so the codec does not matter here).
fn record_set(batch_bytes: usize) -> (Bytes, usize) {
    let mut out = Vec::with_capacity(RECORD_SET_BYTES + batch_bytes);
    let mut offset = 0;
    let mut batches = 0;
    while out.len() + batch_bytes <= RECORD_SET_BYTES {
        let b = batch(Compression::None, offset, batch_bytes);
        offset = RawBatch::new(b.clone()).expect("valid").next_offset();
        out.extend_from_slice(&b);
        batches += 1;
    }
    (Bytes::from(out), batches)
}

fn fast_path(c: &mut Criterion) {
    let mut group = c.benchmark_group("fast_path");
    for batch_kib in [16usize, 64] {
        let (set, batches) = record_set(batch_kib * 1024);
        group.throughput(Throughput::Bytes(set.len() as u64));
        let rewrite = HeaderRewrite {
            producer_id: 1234,
            producer_epoch: 0,
            base_sequence: 0,
            transactional: false,
        };
        group.bench_function(format!("walk_{batch_kib}KiB_x{batches}"), |b| {
            b.iter(|| {
                let mut n = 0usize;
                for batch in BatchWalker::new(black_box(set.clone())) {
                    n += batch.expect("valid").records_count() as usize;
                }
                n
            })
        });
        group.bench_function(format!("walk_rewrite_crc_{batch_kib}KiB_x{batches}"), |b| {
            b.iter(|| {
                let mut wire = 0usize;
                let mut next_offset = 0;
                for batch in BatchWalker::new(black_box(set.clone())) {
                    let batch = batch.expect("valid");
                    assert_eq!(classify(&batch, next_offset, 1 << 20), Path::Fast);
                    next_offset = batch.next_offset();
                    let forwarded = rewrite.forward(&batch);
                    wire += black_box(forwarded.header[20]) as usize + forwarded.len();
                }
                wire
            })
        });
    }
    group.finish();
}

fn crc(c: &mut Criterion) {
    let mut group = c.benchmark_group("crc");
    let big = RawBatch::new(batch(Compression::None, 0, 1 << 20)).expect("valid");
    let rewrite = HeaderRewrite {
        producer_id: 99,
        producer_epoch: 3,
        base_sequence: 5,
        transactional: false,
    };
    group.throughput(Throughput::Elements(1));
    group.bench_function("header_rewrite_patch_1MiB_batch", |b| {
        b.iter(|| rewrite.apply(black_box(&big)))
    });
    group.bench_function("full_recompute_1MiB_batch", |b| {
        b.iter(|| black_box(&big).verify_crc().is_ok())
    });
    group.finish();
}

fn slow_path(c: &mut Criterion) {
    let mut group = c.benchmark_group("slow_path");
    for codec in [Compression::Lz4, Compression::Zstd] {
        // A 64 KiB (uncompressed) batch whose record at delta 10 compaction removed.
        let mut builder = BatchBuilder::new(codec).base_offset(5000).producer(7, 0, 0);
        let mut delta = 0;
        let mut raw_bytes = 0;
        for i in 0..62u32 {
            if i == 10 {
                delta += 1;
            }
            let r = Record::new(
                1_700_000_000_000 + i64::from(i),
                None,
                Some(payload(i, 1024)),
            );
            raw_bytes += 1024;
            builder.push_at(delta, &r).expect("small records fit");
            delta += 1;
        }
        let source = RawBatch::new(builder.build().expect("builds")).expect("valid");
        assert!(!source.is_dense());
        let opts = RebuildOptions::default();
        group.throughput(Throughput::Bytes(raw_bytes));
        group.bench_function(format!("rebuild_gap_{codec}_64KiB"), |b| {
            b.iter(|| rebuild(black_box(&source), &opts).expect("rebuilds"))
        });
    }
    group.finish();
}

criterion_group!(benches, fast_path, crc, slow_path);
criterion_main!(benches);
