//! Zig-zag varints as Kafka's `ByteUtils` reads and writes them.
//!
//! The readers accept exactly what Java accepts: a varint is at most 5 bytes and its fifth byte
//! must not have the continuation bit (bits beyond 32 are dropped, as Java's int shift does); a
//! varlong is at most 10 bytes.

/// Writes `value` as a zig-zag varint (at most 5 bytes).
pub(crate) fn write_varint(out: &mut Vec<u8>, value: i32) {
    // Zig-zag maps small magnitudes of either sign to small unsigned numbers.
    let mut v = ((value << 1) ^ (value >> 31)) as u32;
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Writes `value` as a zig-zag varlong (at most 10 bytes).
pub(crate) fn write_varlong(out: &mut Vec<u8>, value: i64) {
    let mut v = ((value << 1) ^ (value >> 63)) as u64;
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Encoded size of [`write_varint`]`(value)`.
pub(crate) fn varint_len(value: i32) -> usize {
    let v = ((value << 1) ^ (value >> 31)) as u32;
    // 7 payload bits per byte; `| 1` makes zero take one byte.
    (32 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

/// Encoded size of [`write_varlong`]`(value)`.
pub(crate) fn varlong_len(value: i64) -> usize {
    let v = ((value << 1) ^ (value >> 63)) as u64;
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

/// Reads a zig-zag varint from `buf` at `*pos`, advancing `*pos`.
pub(crate) fn read_varint(buf: &[u8], pos: &mut usize) -> Result<i32, &'static str> {
    let mut raw: u32 = 0;
    for i in 0..5 {
        let b = *buf
            .get(*pos)
            .ok_or("varint runs past the end of the data")?;
        *pos += 1;
        // On the fifth byte the shift drops bits 32+, like Java's `tmp << 28`.
        raw |= u32::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Ok(((raw >> 1) as i32) ^ -((raw & 1) as i32));
        }
    }
    Err("varint longer than 5 bytes")
}

/// Reads a zig-zag varlong from `buf` at `*pos`, advancing `*pos`.
pub(crate) fn read_varlong(buf: &[u8], pos: &mut usize) -> Result<i64, &'static str> {
    let mut raw: u64 = 0;
    for i in 0..10 {
        let b = *buf
            .get(*pos)
            .ok_or("varlong runs past the end of the data")?;
        *pos += 1;
        raw |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64));
        }
    }
    Err("varlong longer than 10 bytes")
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn known_encodings() {
        let cases: &[(i32, &[u8])] = &[
            (0, &[0x00]),
            (-1, &[0x01]),
            (1, &[0x02]),
            (-64, &[0x7f]),
            (64, &[0x80, 0x01]),
            (i32::MAX, &[0xfe, 0xff, 0xff, 0xff, 0x0f]),
            (i32::MIN, &[0xff, 0xff, 0xff, 0xff, 0x0f]),
        ];
        for &(value, bytes) in cases {
            let mut out = Vec::new();
            write_varint(&mut out, value);
            assert_eq!(out, bytes, "encoding {value}");
            assert_eq!(varint_len(value), bytes.len());
            let mut pos = 0;
            assert_eq!(read_varint(bytes, &mut pos), Ok(value));
            assert_eq!(pos, bytes.len());
        }
    }

    #[test]
    fn too_long_varints_are_rejected() {
        let mut pos = 0;
        assert!(read_varint(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x00], &mut pos).is_err());
        let mut pos = 0;
        assert!(read_varlong(&[0x80; 11], &mut pos).is_err());
        let mut pos = 0;
        assert!(read_varint(&[0x80], &mut pos).is_err());
    }

    #[test]
    fn fifth_byte_high_bits_are_dropped_like_java() {
        // Java: result |= tmp << 28 with tmp = 0x7f keeps only the low 4 bits of tmp.
        let mut pos = 0;
        let got = read_varint(&[0xff, 0xff, 0xff, 0xff, 0x7f], &mut pos);
        assert_eq!(got, Ok(i32::MIN));
    }

    proptest! {
        #[test]
        fn varint_round_trip(value: i32) {
            let mut out = Vec::new();
            write_varint(&mut out, value);
            prop_assert_eq!(out.len(), varint_len(value));
            let mut pos = 0;
            prop_assert_eq!(read_varint(&out, &mut pos), Ok(value));
            prop_assert_eq!(pos, out.len());
        }

        #[test]
        fn varlong_round_trip(value: i64) {
            let mut out = Vec::new();
            write_varlong(&mut out, value);
            prop_assert_eq!(out.len(), varlong_len(value));
            let mut pos = 0;
            prop_assert_eq!(read_varlong(&out, &mut pos), Ok(value));
            prop_assert_eq!(pos, out.len());
        }

        #[test]
        fn readers_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..16)) {
            let mut pos = 0;
            let _ = read_varint(&bytes, &mut pos);
            prop_assert!(pos <= bytes.len());
            let mut pos = 0;
            let _ = read_varlong(&bytes, &mut pos);
            prop_assert!(pos <= bytes.len());
        }
    }
}
