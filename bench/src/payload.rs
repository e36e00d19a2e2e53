//! What the load generator writes into each record, and how the consumer reads it back.
//!
//! A record value starts with a 16-byte stamp, then filler:
//!
//! | bytes  | field                                                                 |
//! |--------|-----------------------------------------------------------------------|
//! | 0..8   | send time, microseconds since the Unix epoch, big-endian              |
//! | 8..16  | sequence number, big-endian; bit 63 set marks a warm-up record        |
//! | 16..   | filler: pseudo-random letters `A..=Z` from a fixed seed               |
//!
//! The sequence number lets the consumer count distinct records (duplicates from an
//! at-least-once replicator are not counted twice) and tell warm-up traffic, sent while the
//! replicator starts, from the measured records. Letters compress roughly like text (zstd finds
//! about 4.7 bits of entropy per byte, lz4 little), like Kafka's own `ProducerPerformance`.
#![forbid(unsafe_code)]

use bytes::{BufMut, Bytes, BytesMut};

/// Length of the stamp at the start of every value.
pub const STAMP_LEN: usize = 16;
/// Bit 63 of the sequence number: a warm-up record, not measured.
pub const WARMUP_BIT: u64 = 1 << 63;

/// The stamp of one record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    /// Send time, microseconds since the Unix epoch.
    pub send_us: u64,
    /// Sequence number within the run, without the warm-up bit.
    pub seq: u64,
    /// A warm-up record (sent before the measured phase).
    pub warmup: bool,
}

impl Stamp {
    /// Writes the 16-byte stamp.
    pub fn put(&self, out: &mut impl BufMut) {
        out.put_u64(self.send_us);
        let seq = self.seq & !WARMUP_BIT;
        out.put_u64(if self.warmup { seq | WARMUP_BIT } else { seq });
    }

    /// Reads the stamp at the start of `value`; `None` when the value is too short to hold one
    /// (a record the generator did not write).
    pub fn read(value: &[u8]) -> Option<Stamp> {
        let send = value.get(0..8)?;
        let seq = value.get(8..16)?;
        let send_us = u64::from_be_bytes(send.try_into().ok()?);
        let raw = u64::from_be_bytes(seq.try_into().ok()?);
        Some(Stamp {
            send_us,
            seq: raw & !WARMUP_BIT,
            warmup: raw & WARMUP_BIT != 0,
        })
    }
}

/// Makes record values, keys and headers of the configured shape.
#[derive(Debug, Clone)]
pub struct RecordShape {
    value_bytes: usize,
    key_bytes: usize,
    key_cardinality: u64,
    headers: usize,
    filler: Bytes,
}

/// Filler is cut from a buffer this long, at varying offsets, so that consecutive records are
/// not byte-identical (which would let compressors cheat).
const FILLER_POOL_BYTES: usize = 1 << 20;

impl RecordShape {
    /// `value_bytes` is clamped up to [`STAMP_LEN`]. `key_cardinality` 0 means no keys.
    pub fn new(value_bytes: usize, key_bytes: usize, key_cardinality: u64, headers: usize) -> Self {
        let value_bytes = value_bytes.max(STAMP_LEN);
        let pool = FILLER_POOL_BYTES + value_bytes.max(key_bytes);
        RecordShape {
            value_bytes,
            key_bytes,
            key_cardinality,
            headers,
            filler: letters(pool, 0x5eed_0f5f_4a17),
        }
    }

    pub fn value_bytes(&self) -> usize {
        self.value_bytes
    }

    /// Bytes of key, value and headers of one record: what "GiB replicated" counts.
    pub fn record_bytes(&self) -> usize {
        let key = if self.key_cardinality > 0 {
            self.key_bytes
        } else {
            0
        };
        self.value_bytes + key + self.headers * HEADER_BYTES
    }

    /// The value of record `seq`.
    pub fn value(&self, stamp: Stamp) -> Bytes {
        let mut v = BytesMut::with_capacity(self.value_bytes);
        stamp.put(&mut v);
        let n = self.value_bytes - STAMP_LEN;
        let off = self.offset(stamp.seq, n);
        v.put_slice(&self.filler[off..off + n]);
        v.freeze()
    }

    /// `n` bytes of filler for record `seq` (at most the value size of this shape), for values
    /// that carry a stamp of another layout (`load::stamp`).
    pub fn filler(&self, seq: u64, n: usize) -> Bytes {
        let n = n.min(self.value_bytes);
        let off = self.offset(seq, n);
        self.filler.slice(off..off + n)
    }

    /// The key of record `seq`: `None` without keys, else one of `key_cardinality` distinct
    /// keys, each `key_bytes` long.
    pub fn key(&self, seq: u64) -> Option<Bytes> {
        if self.key_cardinality == 0 {
            return None;
        }
        let id = seq % self.key_cardinality;
        let mut k = BytesMut::with_capacity(self.key_bytes.max(8));
        k.put_slice(format!("k{id:07}").as_bytes());
        k.resize(self.key_bytes, b'.');
        Some(k.freeze())
    }

    /// The headers of a record: `h0`, `h1`, ... each with an 8-byte value.
    pub fn headers(&self, seq: u64) -> Vec<(Bytes, Option<Bytes>)> {
        (0..self.headers)
            .map(|i| {
                (
                    Bytes::from(format!("h{i}")),
                    Some(Bytes::copy_from_slice(&seq.to_be_bytes())),
                )
            })
            .collect()
    }

    fn offset(&self, seq: u64, n: usize) -> usize {
        let room = self.filler.len() - n;
        if room == 0 {
            return 0;
        }
        // A multiplicative hash spreads consecutive sequence numbers over the pool.
        (seq.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 20) as usize % room
    }
}

/// Bytes of one generated header: key `hN` (counted as 2) plus an 8-byte value.
const HEADER_BYTES: usize = 10;

/// `len` pseudo-random letters `A..=Z` from a fixed seed (xorshift64*).
fn letters(len: usize, seed: u64) -> Bytes {
    let mut x = seed | 1;
    let mut out = Vec::with_capacity(len);
    for _ in 0..len {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        let r = x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32;
        out.push(b'A' + (r % 26) as u8);
    }
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn stamp_round_trips(send_us in any::<u64>(), seq in 0..WARMUP_BIT, warmup in any::<bool>()) {
            let s = Stamp { send_us, seq, warmup };
            let mut b = BytesMut::new();
            s.put(&mut b);
            prop_assert_eq!(b.len(), STAMP_LEN);
            prop_assert_eq!(Stamp::read(&b), Some(s));
        }

        #[test]
        fn values_have_the_size_and_stamp_asked_for(
            size in 0usize..5000, seq in 0u64..1_000_000, send_us in any::<u64>(), warmup in any::<bool>()
        ) {
            let shape = RecordShape::new(size, 0, 0, 0);
            let stamp = Stamp { send_us, seq, warmup };
            let v = shape.value(stamp);
            prop_assert_eq!(v.len(), size.max(STAMP_LEN));
            prop_assert_eq!(Stamp::read(&v), Some(stamp));
            prop_assert!(v[STAMP_LEN..].iter().all(|c| c.is_ascii_uppercase()));
        }

        #[test]
        fn read_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
            let r = Stamp::read(&bytes);
            prop_assert_eq!(r.is_some(), bytes.len() >= STAMP_LEN);
        }
    }

    #[test]
    fn keys_cycle_through_the_cardinality() {
        let shape = RecordShape::new(100, 12, 3, 0);
        let k0 = shape.key(0).unwrap();
        assert_eq!(k0.len(), 12);
        assert_eq!(shape.key(3), Some(k0.clone()));
        assert_ne!(shape.key(1), Some(k0));
        assert_eq!(RecordShape::new(100, 12, 0, 0).key(5), None);
    }

    #[test]
    fn record_bytes_counts_key_value_and_headers() {
        assert_eq!(RecordShape::new(100, 0, 0, 0).record_bytes(), 100);
        assert_eq!(
            RecordShape::new(100, 12, 5, 2).record_bytes(),
            100 + 12 + 20
        );
        let shape = RecordShape::new(100, 12, 5, 2);
        let h = shape.headers(7);
        let hb: usize = h
            .iter()
            .map(|(k, v)| k.len() + v.as_ref().map_or(0, Bytes::len))
            .sum();
        assert_eq!(hb, 20);
    }

    #[test]
    fn consecutive_values_differ() {
        let shape = RecordShape::new(1024, 0, 0, 0);
        let a = shape.value(Stamp {
            send_us: 1,
            seq: 1,
            warmup: false,
        });
        let b = shape.value(Stamp {
            send_us: 1,
            seq: 2,
            warmup: false,
        });
        assert_ne!(a[STAMP_LEN..], b[STAMP_LEN..]);
    }
}
