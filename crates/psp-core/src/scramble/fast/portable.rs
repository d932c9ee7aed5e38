//! The portable kernel: 64-bit words, little-endian (byte `j` of a word is bits `8j..8j+8`).
//!
//! Works on a running prefix-XOR `P` of the stream (its origin is arbitrary: only differences
//! of `P` are used) and the exclusive prefix `V = P ^ x`. Per word, `P = scan(x) ^ bcast(c)`
//! where `scan` is the in-word prefix (3 shift-XORs) and `c` the running XOR of all earlier
//! bytes; the only loop-carried dependency is one byte XOR. Then `B = P ^ V(previous row)`.
//! Descrambling inverts it: `P = B ^ V(previous row)`, `V = P` shifted up one byte, `x = P ^ V`.

use super::{Row, rows_mut, set_words, words};

/// `0x01` in every byte: multiplying a byte by it broadcasts the byte to the word.
const ONES: u64 = 0x0101_0101_0101_0101;

/// Words per row.
const WORDS: usize = 8;

/// Inclusive prefix-XOR of the bytes within a word.
#[inline(always)]
fn scan(x: u64) -> u64 {
    let y = x ^ (x << 8);
    let y = y ^ (y << 16);
    y ^ (y << 32)
}

/// Exclusive prefixes `V` of the history row and the running byte `c` (in the low byte) after
/// it, with the prefix origin at the start of the history.
#[inline(always)]
fn start(prev: &Row) -> ([u64; WORDS], u64) {
    let x = words(prev);
    let mut c = 0u64;
    let mut v = [0u64; WORDS];
    for i in 0..WORDS {
        let y = scan(x[i]);
        // `c < 256`, so the multiply only broadcasts it.
        v[i] = y ^ x[i] ^ c.wrapping_mul(ONES);
        c ^= y >> 56;
    }
    (v, c)
}

/// Scrambles whole rows (contract in the parent module).
///
/// The word-parallel steps are separate loops over the 8 words so the compiler can vectorise
/// them with baseline SIMD; only the running byte `c` is serial.
pub(super) fn scramble_rows(prev: &mut Row, data: &mut [u8]) {
    let (mut v, mut c) = start(prev);
    let mut x = [0u64; WORDS];
    for row in rows_mut(data) {
        x = words(row);
        let y = x.map(scan);
        let mut carry = [0u64; WORDS];
        for i in 0..WORDS {
            carry[i] = c;
            c ^= y[i] >> 56;
        }
        let mut out = [0u64; WORDS];
        for i in 0..WORDS {
            // `carry[i] < 256`, so the multiply only broadcasts it.
            let p = y[i] ^ carry[i].wrapping_mul(ONES);
            out[i] = p ^ v[i];
            v[i] = p ^ x[i];
        }
        set_words(row, &out);
    }
    set_words(prev, &x);
}

/// Descrambles whole rows (contract in the parent module).
pub(super) fn descramble_rows(prev: &mut Row, data: &mut [u8]) {
    let (mut v, c) = start(prev);
    // The previous word's prefix; only its top byte is used.
    let mut last = c << 56;
    let mut x = [0u64; WORDS];
    for row in rows_mut(data) {
        let b = words(row);
        for i in 0..WORDS {
            let p = b[i] ^ v[i];
            let e = (p << 8) | (last >> 56);
            x[i] = p ^ e;
            v[i] = e;
            last = p;
        }
        set_words(row, &x);
    }
    set_words(prev, &x);
}
