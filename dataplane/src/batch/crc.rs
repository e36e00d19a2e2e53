//! CRC-32C patching without reading the payload.
//!
//! A v2 batch's CRC covers bytes `21..end`. The fast path changes only header bytes `21..61`
//! (attributes and producer fields), so the new CRC follows from the old one and the two
//! versions of those 40 bytes. CRC-32C (with its init and final xor) is affine over GF(2): for
//! equal-length messages the constants cancel, so with `A`/`A'` the old/new covered header bytes
//! and `n` the payload length,
//!
//! `crc(A' ‖ T) = crc(A ‖ T) ^ shift(crc(A) ^ crc(A'), n)`
//!
//! where `shift(x, n)` multiplies `x` by `x^(8n)` modulo the Castagnoli polynomial ("append `n`
//! zero bytes" to a raw CRC register). [`shift`] does that in five carry-less multiplications
//! with tables computed at compile time, about a hundred nanoseconds whatever `n` is, against a
//! full recompute that would read every payload byte (~45 µs for 1 MiB).
//!
//! A useful side effect: patching keeps a corrupt source batch corrupt. If the source CRC was
//! wrong, the patched one is wrong by the same amount and the target broker rejects the batch,
//! instead of strait laundering it with a freshly computed CRC.

/// The reflected Castagnoli polynomial.
const POLY: u32 = 0x82f6_3b78;

/// `a(x) * b(x) mod P(x)` in the reflected bit order CRC registers use (bit 31 is `x^0`).
const fn multmodp(a: u32, mut b: u32) -> u32 {
    let mut m: u32 = 1 << 31;
    let mut p: u32 = 0;
    loop {
        if a & m != 0 {
            p ^= b;
            if a & (m - 1) == 0 {
                break;
            }
        }
        m >>= 1;
        b = if b & 1 != 0 { (b >> 1) ^ POLY } else { b >> 1 };
        if m == 0 {
            break;
        }
    }
    p
}

/// `X8N[i][b] = x^(8 * b * 256^i) mod P`: the operator "append `b * 256^i` zero bytes".
/// Four rows cover every 32-bit length, and a fifth multiplication applies the product.
static X8N: [[u32; 256]; 4] = build_x8n();

const fn build_x8n() -> [[u32; 256]; 4] {
    let mut table = [[0u32; 256]; 4];
    // x^0 in reflected order.
    let one: u32 = 1 << 31;
    // x^8: one zero byte.
    let mut unit = multmodp(1 << 23, one);
    let mut row = 0;
    while row < 4 {
        table[row][0] = one;
        let mut b = 1;
        while b < 256 {
            table[row][b] = multmodp(table[row][b - 1], unit);
            b += 1;
        }
        // The next row's unit is this row's unit raised to the 256th power.
        unit = multmodp(table[row][255], unit);
        row += 1;
    }
    table
}

/// The operator `x^(8 * len) mod P` ("append `len` zero bytes"), for lengths below 2^32.
fn x8n(len: u32) -> u32 {
    let [b0, b1, b2, b3] = len.to_le_bytes();
    let lo = multmodp(X8N[0][usize::from(b0)], X8N[1][usize::from(b1)]);
    let hi = multmodp(X8N[2][usize::from(b2)], X8N[3][usize::from(b3)]);
    multmodp(lo, hi)
}

/// Writes the CRC-32C of a v2 batch's bytes `21..end` into its header, for batches built or
/// altered by hand (tests, fuzzers). `batch` must hold at least a header.
pub fn seal(batch: &mut [u8]) {
    assert!(
        batch.len() >= super::HEADER_LEN,
        "a batch holds at least its header"
    );
    let crc = crc32c::crc32c(&batch[super::field::CRC_START..]);
    batch[super::field::CRC..super::field::CRC + 4].copy_from_slice(&crc.to_be_bytes());
}

/// Shifts a CRC difference across `len` bytes: the raw CRC register after feeding `len` zero
/// bytes. Equals `crc32c::crc32c_combine(x, 0, len)`, much faster.
pub fn shift(x: u32, len: u64) -> u32 {
    // A batch is below 2^31 bytes; larger lengths are reduced with one more factor per 2^32.
    let mut p = multmodp(x8n(len as u32), x);
    let mut high = len >> 32;
    if high != 0 {
        // x^(8 * 2^32): four bytes of 256 each cover 2^32 bytes exactly.
        let step = multmodp(X8N[3][255], X8N[3][1]);
        while high != 0 {
            p = multmodp(step, p);
            high -= 1;
        }
    }
    p
}

/// `crc32c(A ‖ B)` from `crc32c(A)`, `crc32c(B)` and `B`'s length.
pub fn combine(crc_a: u32, crc_b: u32, len_b: u64) -> u32 {
    shift(crc_a, len_b) ^ crc_b
}

/// The new CRC of a message whose first bytes changed from `old_prefix` to `new_prefix` (same
/// length), followed by `tail_len` unchanged bytes.
pub fn patch(old_crc: u32, old_prefix: &[u8], new_prefix: &[u8], tail_len: u64) -> u32 {
    debug_assert_eq!(
        old_prefix.len(),
        new_prefix.len(),
        "prefixes must have equal length"
    );
    let delta = crc32c::crc32c(old_prefix) ^ crc32c::crc32c(new_prefix);
    if delta == 0 {
        return old_crc;
    }
    old_crc ^ shift(delta, tail_len)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn shift_by_zero_is_identity() {
        assert_eq!(shift(0xdead_beef, 0), 0xdead_beef);
        assert_eq!(x8n(0), 1 << 31);
    }

    #[test]
    fn combine_matches_crc_of_concatenation() {
        let a = b"the quick brown fox ";
        let b = b"jumps over the lazy dog";
        let whole = [&a[..], &b[..]].concat();
        assert_eq!(
            combine(crc32c::crc32c(a), crc32c::crc32c(b), b.len() as u64),
            crc32c::crc32c(&whole)
        );
    }

    #[test]
    fn shift_above_four_gib_matches_repeated_shifts() {
        let x = 0x1234_5678;
        let len = (1u64 << 32) + 5;
        let step = shift(shift(shift(x, 1 << 31), 1 << 31), 5);
        assert_eq!(shift(x, len), step);
    }

    #[test]
    fn patch_of_one_mebibyte_matches_full_recompute() {
        let mut msg: Vec<u8> = (0..(1usize << 20) + 40)
            .map(|i| (i * 31 % 251) as u8)
            .collect();
        let old_crc = crc32c::crc32c(&msg);
        let old_prefix: Vec<u8> = msg[..40].to_vec();
        msg[10] ^= 0x5a;
        msg[39] = 0;
        let new_crc = patch(old_crc, &old_prefix, &msg[..40], (msg.len() - 40) as u64);
        assert_eq!(new_crc, crc32c::crc32c(&msg));
    }

    proptest! {
        #[test]
        fn shift_matches_crc32c_combine(x: u32, len in 0u64..(1 << 31)) {
            prop_assert_eq!(shift(x, len), crc32c::crc32c_combine(x, 0, len as usize));
        }

        #[test]
        fn combine_matches_crc32c_combine(a: u32, b: u32, len in 0u64..(1 << 24)) {
            prop_assert_eq!(combine(a, b, len), crc32c::crc32c_combine(a, b, len as usize));
        }

        #[test]
        fn patch_matches_recompute(
            prefix in proptest::collection::vec(any::<u8>(), 40),
            new_prefix in proptest::collection::vec(any::<u8>(), 40),
            tail in proptest::collection::vec(any::<u8>(), 0..4096),
        ) {
            let old = [&prefix[..], &tail[..]].concat();
            let new = [&new_prefix[..], &tail[..]].concat();
            let patched = patch(crc32c::crc32c(&old), &prefix, &new_prefix, tail.len() as u64);
            prop_assert_eq!(patched, crc32c::crc32c(&new));
        }
    }
}
