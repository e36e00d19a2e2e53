//! The stamp at the start of every value `strait-bench load` writes, and the value around it.
//!
//! | bytes  | field                                                               |
//! |--------|---------------------------------------------------------------------|
//! | 0..4   | magic `SLD1` (tells our records from anything else on the topic)     |
//! | 4..12  | run id, big-endian (one per invocation: earlier runs are ignored)    |
//! | 12..16 | source partition the record was written to, big-endian              |
//! | 16..24 | sequence number within that partition, from 0, big-endian           |
//! | 24..32 | send time, microseconds since the Unix epoch, big-endian            |
//! | 32..   | filler: letters from [`RecordShape`], up to `--record-size`         |
//!
//! The sequence is partition-local so that loss, duplicates and order can be judged per
//! partition, as Kafka orders records only within one. Values read back are hostile: anything
//! shorter than a stamp or without the magic is not ours.
#![forbid(unsafe_code)]

use bytes::{BufMut, Bytes, BytesMut};

use crate::payload::RecordShape;

/// Bytes of the stamp; the smallest `--record-size`.
pub const STAMP_LEN: usize = 32;
/// The first four bytes of every stamped value.
pub const MAGIC: [u8; 4] = *b"SLD1";

/// What one record carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadStamp {
    pub run_id: u64,
    pub partition: u32,
    pub seq: u64,
    pub send_us: u64,
}

impl LoadStamp {
    /// Writes the 32-byte stamp.
    pub fn put(&self, out: &mut impl BufMut) {
        out.put_slice(&MAGIC);
        out.put_u64(self.run_id);
        out.put_u32(self.partition);
        out.put_u64(self.seq);
        out.put_u64(self.send_us);
    }

    /// The stamp at the start of `value`; `None` when the value is too short or lacks the magic.
    pub fn read(value: &[u8]) -> Option<LoadStamp> {
        let head = value.get(..STAMP_LEN)?;
        if head[..4] != MAGIC {
            return None;
        }
        let u64_at = |at: usize| -> Option<u64> {
            Some(u64::from_be_bytes(head.get(at..at + 8)?.try_into().ok()?))
        };
        Some(LoadStamp {
            run_id: u64_at(4)?,
            partition: u32::from_be_bytes(head.get(12..16)?.try_into().ok()?),
            seq: u64_at(16)?,
            send_us: u64_at(24)?,
        })
    }
}

/// The value of a record: the stamp, then filler up to `size` bytes (at least the stamp).
pub fn value(stamp: &LoadStamp, size: usize, shape: &RecordShape) -> Bytes {
    let size = size.max(STAMP_LEN);
    let mut v = BytesMut::with_capacity(size);
    stamp.put(&mut v);
    v.put_slice(&shape.filler(stamp.seq, size - STAMP_LEN));
    v.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn stamps_round_trip(run_id in any::<u64>(), partition in any::<u32>(), seq in any::<u64>(), send_us in any::<u64>()) {
            let s = LoadStamp { run_id, partition, seq, send_us };
            let mut b = BytesMut::new();
            s.put(&mut b);
            prop_assert_eq!(b.len(), STAMP_LEN);
            prop_assert_eq!(LoadStamp::read(&b), Some(s));
        }

        #[test]
        fn values_have_the_size_asked_and_read_back(size in 0usize..4096, seq in 0u64..1_000_000, run_id in any::<u64>()) {
            let shape = RecordShape::new(size, 0, 0, 0);
            let s = LoadStamp { run_id, partition: 3, seq, send_us: 17 };
            let v = value(&s, size, &shape);
            prop_assert_eq!(v.len(), size.max(STAMP_LEN));
            prop_assert_eq!(LoadStamp::read(&v), Some(s));
        }

        #[test]
        fn read_never_panics_on_hostile_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let r = LoadStamp::read(&bytes);
            prop_assert_eq!(r.is_some(), bytes.len() >= STAMP_LEN && bytes[..4] == MAGIC);
        }
    }

    #[test]
    fn values_without_the_magic_are_not_ours() {
        let mut b = BytesMut::new();
        LoadStamp {
            run_id: 1,
            partition: 0,
            seq: 0,
            send_us: 0,
        }
        .put(&mut b);
        b[0] = b'X';
        assert_eq!(LoadStamp::read(&b), None);
        assert_eq!(LoadStamp::read(&b[..STAMP_LEN - 1]), None);
    }
}
