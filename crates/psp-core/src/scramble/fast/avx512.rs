//! The AVX-512 kernel (F + BW + VBMI, plus GFNI): one 64-byte row per ZMM register.
//!
//! Scramble: in-row inclusive scan = 3 GFNI affine steps inside each 64-bit lane, then an exclusive
//! scan of the 8 lane totals across lanes (`vpshufb` to broadcast each lane's top byte,
//! 3 `valignq` shift-XORs), then `B_k = Q_k ^ R_{k-1}` with `R = Q ^ x ^ T` (`vpternlogq`).
//! Descramble: `P_k = B_k ^ V_{k-1}` and `V_k = P_k` shifted up one byte across the whole row
//! with `P_{k-1}[63]` shifted in (one `vpermt2b`), `x_k = P_k ^ V_k`.

// AVX-512 intrinsics and `#[target_feature(enable = "avx512*")]` are stable since Rust 1.89,
// which is why the workspace's MSRV is 1.89.

use core::arch::x86_64::{
    __m512i, __mmask64, _mm512_add_epi8, _mm512_alignr_epi64, _mm512_gf2p8affine_epi64_epi8,
    _mm512_loadu_si512, _mm512_mask_storeu_epi8, _mm512_maskz_loadu_epi8, _mm512_permutex2var_epi8,
    _mm512_permutexvar_epi64, _mm512_set_epi64, _mm512_set1_epi8, _mm512_set1_epi64,
    _mm512_setzero_si512, _mm512_shuffle_epi8, _mm512_storeu_si512, _mm512_ternarylogic_epi64,
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

/// Loads the `tail.len() < 64` bytes of `tail`, zero-padded to 64.
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
fn load_tail(tail: &[u8]) -> __m512i {
    debug_assert!(tail.len() < 64);
    let mask: __mmask64 = (1u64 << tail.len()) - 1;
    // SAFETY: the mask selects exactly the first `tail.len()` bytes, all readable; masked-out
    // bytes are not accessed and cannot fault. AVX-512BW is enabled here.
    unsafe { _mm512_maskz_loadu_epi8(mask, tail.as_ptr().cast()) }
}

/// Stores the first `tail.len() < 64` bytes of `v` into `tail`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
fn store_tail(tail: &mut [u8], v: __m512i) {
    debug_assert!(tail.len() < 64);
    let mask: __mmask64 = (1u64 << tail.len()) - 1;
    // SAFETY: the mask selects exactly the first `tail.len()` bytes, all writable; masked-out
    // bytes are not written and cannot fault. AVX-512BW is enabled here.
    unsafe { _mm512_mask_storeu_epi8(tail.as_mut_ptr().cast(), mask, v) }
}

/// The last 64 bytes of `prev` (64 bytes) followed by the first `t < 64` bytes of `cur`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
fn slide(prev: __m512i, cur: __m512i, t: usize) -> __m512i {
    let iota = _mm512_set_epi64(
        0x3F3E_3D3C_3B3A_3938,
        0x3736_3534_3332_3130,
        0x2F2E_2D2C_2B2A_2928,
        0x2726_2524_2322_2120,
        0x1F1E_1D1C_1B1A_1918,
        0x1716_1514_1312_1110,
        0x0F0E_0D0C_0B0A_0908,
        0x0706_0504_0302_0100,
    );
    // Index j + t < 128: bit 6 selects `cur`. `t < 64` fits in an i8.
    let idx = _mm512_add_epi8(iota, _mm512_set1_epi8(t as i8));
    _mm512_permutex2var_epi8(prev, idx, cur)
}

/// Inclusive prefix-XOR of the bytes inside each 64-bit lane, with three GFNI affine steps.
///
/// View a lane as an 8x8 bit matrix `D[s][b]` (byte `s`, bit `b`); we want
/// `F[s][b] = XOR_{s' <= s} D[s'][b]`. `gf2p8affineqb(x, A)` computes, per byte `x_j` of its first
/// operand, bit `i` = parity(`A.byte[7 - i] & x_j`). With the data as `A` and constant bytes as
/// `x` it transposes; with a constant `A` it applies a matrix inside each byte:
/// 1. `T[j].bit[i] = D[7-i][7-j]` (x bytes `1 << (7 - j)`, A = data): transpose;
/// 2. `U[j].bit[i] = XOR_{s <= i} D[s][7-j] = F[i][7-j]` (A bytes `0xFF << r`): prefix;
/// 3. `out[s].bit[i] = U[7-i].bit[s] = F[s][i]` (x bytes `1 << s`, A = U): transpose back.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,gfni")]
fn lane_scan(x: __m512i) -> __m512i {
    let t = _mm512_gf2p8affine_epi64_epi8::<0>(_mm512_set1_epi64(0x0102_0408_1020_4080), x);
    let u =
        _mm512_gf2p8affine_epi64_epi8::<0>(t, _mm512_set1_epi64(0x80C0_E0F0_F8FC_FEFFu64 as i64));
    _mm512_gf2p8affine_epi64_epi8::<0>(_mm512_set1_epi64(0x8040_2010_0804_0201u64 as i64), u)
}

/// Inclusive prefix-XOR `Q` of a row and its total `T` broadcast to all 64 bytes.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,gfni")]
fn scan(x: __m512i) -> (__m512i, __m512i) {
    let y = lane_scan(x);
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

/// Scrambles `data` (any length), continuing from `prev` (the last 64 plaintext bytes) and
/// updating it.
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,gfni")]
pub(super) fn scramble(prev: &mut Row, data: &mut [u8]) {
    let (data, tail) = data.split_at_mut(data.len() - data.len() % 64);
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
    if !tail.is_empty() {
        let xt = load_tail(tail);
        let (q, _) = scan(xt);
        store_tail(tail, _mm512_xor_si512(q, r));
        x = slide(x, xt, tail.len());
    }
    store(prev, x);
}

/// Descrambles `data` (any length), continuing from `prev` (the last 64 plaintext bytes) and
/// updating it.
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,gfni")]
pub(super) fn descramble(prev: &mut Row, data: &mut [u8]) {
    let (data, tail) = data.split_at_mut(data.len() - data.len() % 64);
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
    if !tail.is_empty() {
        let p_new = _mm512_xor_si512(load_tail(tail), v);
        let v = _mm512_permutex2var_epi8(p_new, shift_idx, p);
        let xt = _mm512_xor_si512(p_new, v);
        store_tail(tail, xt);
        x = slide(x, xt, tail.len());
    }
    store(prev, x);
}
