//! The AVX-512 kernel (F + BW + VBMI): one 64-byte row per ZMM register.
//!
//! Scramble: in-row inclusive scan = 3 shift-XORs inside each 64-bit lane, then an exclusive
//! scan of the 8 lane totals across lanes (`vpshufb` to broadcast each lane's top byte,
//! 3 `valignq` shift-XORs), then `B_k = Q_k ^ R_{k-1}` with `R = Q ^ x ^ T` (`vpternlogq`).
//! Descramble: `P_k = B_k ^ V_{k-1}` and `V_k = P_k` shifted up one byte across the whole row
//! with `P_{k-1}[63]` shifted in (one `vpermt2b`), `x_k = P_k ^ V_k`.

// AVX-512 intrinsics and `#[target_feature(enable = "avx512*")]` are stable since Rust 1.89,
// newer than the workspace's declared MSRV (1.85): building psp-core for x86-64 needs 1.89.
#![allow(clippy::incompatible_msrv)]

use core::arch::x86_64::{
    __m512i, _mm512_alignr_epi64, _mm512_loadu_si512, _mm512_permutex2var_epi8,
    _mm512_permutexvar_epi64, _mm512_set_epi64, _mm512_set1_epi64, _mm512_setzero_si512,
    _mm512_shuffle_epi8, _mm512_slli_epi64, _mm512_storeu_si512, _mm512_ternarylogic_epi64,
    _mm512_xor_si512,
};

use super::{Row, rows_mut};

/// `vpternlogq` truth table for `a ^ b ^ c`.
const XOR3: i32 = 0x96;

/// Loads 64 bytes.
#[inline(always)]
fn load(bytes: &[u8; 64]) -> __m512i {
    // SAFETY: `bytes` is 64 readable bytes; `loadu` has no alignment requirement. AVX-512F is
    // enabled in every caller (all are `#[target_feature(enable = "avx512f,...")]`).
    unsafe { _mm512_loadu_si512(bytes.as_ptr().cast()) }
}

/// Stores 64 bytes.
#[inline(always)]
fn store(bytes: &mut [u8; 64], v: __m512i) {
    // SAFETY: `bytes` is 64 writable bytes; `storeu` has no alignment requirement. AVX-512F is
    // enabled in every caller.
    unsafe { _mm512_storeu_si512(bytes.as_mut_ptr().cast(), v) }
}

/// Inclusive prefix-XOR `Q` of a row and its total `T` broadcast to all 64 bytes.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
fn scan(x: __m512i) -> (__m512i, __m512i) {
    let y = _mm512_xor_si512(x, _mm512_slli_epi64::<8>(x));
    let y = _mm512_xor_si512(y, _mm512_slli_epi64::<16>(y));
    let y = _mm512_xor_si512(y, _mm512_slli_epi64::<32>(y));
    // Each lane's total (its byte 7) broadcast over the lane; `vpshufb` indexes per 128 bits.
    let top = _mm512_set_epi64(
        0x0F0F_0F0F_0F0F_0F0F,
        0x0707_0707_0707_0707,
        0x0F0F_0F0F_0F0F_0F0F,
        0x0707_0707_0707_0707,
        0x0F0F_0F0F_0F0F_0F0F,
        0x0707_0707_0707_0707,
        0x0F0F_0F0F_0F0F_0F0F,
        0x0707_0707_0707_0707,
    );
    let t = _mm512_shuffle_epi8(y, top);
    // Inclusive scan of the lane totals across lanes; `alignr(v, 0, 8 - n)` shifts up n lanes.
    let z = _mm512_setzero_si512();
    let i = _mm512_xor_si512(t, _mm512_alignr_epi64::<7>(t, z));
    let i = _mm512_xor_si512(i, _mm512_alignr_epi64::<6>(i, z));
    let i = _mm512_xor_si512(i, _mm512_alignr_epi64::<4>(i, z));
    // Q = y ^ (exclusive lane prefix) = y ^ i ^ t.
    let q = _mm512_ternarylogic_epi64::<XOR3>(y, i, t);
    let total = _mm512_permutexvar_epi64(_mm512_set1_epi64(7), i);
    (q, total)
}

/// Scrambles whole rows (contract in the parent module).
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
pub(super) fn scramble_rows(prev: &mut Row, data: &mut [u8]) {
    let mut x = load(prev);
    let (q, t) = scan(x);
    // R = inclusive suffix XOR of the previous row.
    let mut r = _mm512_ternarylogic_epi64::<XOR3>(q, x, t);
    for row in rows_mut(data) {
        x = load(row);
        let (q, t) = scan(x);
        store(row, _mm512_xor_si512(q, r));
        r = _mm512_ternarylogic_epi64::<XOR3>(q, x, t);
    }
    store(prev, x);
}

/// Descrambles whole rows (contract in the parent module).
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
pub(super) fn descramble_rows(prev: &mut Row, data: &mut [u8]) {
    // Byte j of the result is byte j-1 of the current row; byte 0 is byte 63 of the previous
    // row (index bit 6 selects the second table).
    let shift_idx = _mm512_set_epi64(
        0x3E3D_3C3B_3A39_3837,
        0x3635_3433_3231_302F,
        0x2E2D_2C2B_2A29_2827,
        0x2625_2423_2221_201F,
        0x1E1D_1C1B_1A19_1817,
        0x1615_1413_1211_100F,
        0x0E0D_0C0B_0A09_0807,
        0x0605_0403_0201_007F,
    );
    let mut x = load(prev);
    let (mut p, _) = scan(x);
    let mut v = _mm512_xor_si512(p, x);
    for row in rows_mut(data) {
        let p_new = _mm512_xor_si512(load(row), v);
        v = _mm512_permutex2var_epi8(p_new, shift_idx, p);
        p = p_new;
        x = _mm512_xor_si512(p, v);
        store(row, x);
    }
    store(prev, x);
}
