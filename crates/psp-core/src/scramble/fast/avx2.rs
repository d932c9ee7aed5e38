//! The AVX2 kernel: one 64-byte row as two YMM halves (`lo` = bytes 0..32, `hi` = 32..64).
//!
//! Same math as the AVX-512 kernel; the cross-lane steps use `vpermq`/`vperm2i128` because
//! AVX2 byte shuffles stay inside 128-bit lanes.

use core::arch::x86_64::{
    __m128i, __m256i, _mm_alignr_epi8, _mm_loadu_si128, _mm_storeu_si128, _mm_xor_si128,
    _mm256_blend_epi32, _mm256_castsi256_si128, _mm256_extracti128_si256, _mm256_loadu_si256,
    _mm256_permute4x64_epi64, _mm256_set_epi64x, _mm256_setzero_si256, _mm256_shuffle_epi8,
    _mm256_slli_epi64, _mm256_slli_si256, _mm256_storeu_si256, _mm256_xor_si256,
};

use super::{Row, rows_mut};

/// A row as two halves.
#[derive(Clone, Copy)]
struct Halves {
    lo: __m256i,
    hi: __m256i,
}

#[inline(always)]
fn load(bytes: &[u8; 64]) -> Halves {
    let p = bytes.as_ptr();
    // SAFETY: `p..p + 64` is readable, so are both 32-byte halves; `loadu` has no alignment
    // requirement. AVX is enabled in every caller (all are `#[target_feature(enable = "avx2")]`).
    unsafe {
        Halves {
            lo: _mm256_loadu_si256(p.cast()),
            hi: _mm256_loadu_si256(p.add(32).cast()),
        }
    }
}

#[inline(always)]
fn store(bytes: &mut [u8; 64], v: Halves) {
    let p = bytes.as_mut_ptr();
    // SAFETY: `p..p + 64` is writable, so are both 32-byte halves; `storeu` has no alignment
    // requirement. AVX is enabled in every caller.
    unsafe {
        _mm256_storeu_si256(p.cast(), v.lo);
        _mm256_storeu_si256(p.add(32).cast(), v.hi);
    }
}

#[inline]
#[target_feature(enable = "avx2")]
fn xor(a: Halves, b: Halves) -> Halves {
    Halves {
        lo: _mm256_xor_si256(a.lo, b.lo),
        hi: _mm256_xor_si256(a.hi, b.hi),
    }
}

/// Inclusive in-lane (64-bit) prefix, then each lane's total broadcast over the lane.
#[inline]
#[target_feature(enable = "avx2")]
fn lane_scan(x: __m256i) -> (__m256i, __m256i) {
    let y = _mm256_xor_si256(x, _mm256_slli_epi64::<8>(x));
    let y = _mm256_xor_si256(y, _mm256_slli_epi64::<16>(y));
    let y = _mm256_xor_si256(y, _mm256_slli_epi64::<32>(y));
    let top = _mm256_set_epi64x(
        0x0F0F_0F0F_0F0F_0F0F,
        0x0707_0707_0707_0707,
        0x0F0F_0F0F_0F0F_0F0F,
        0x0707_0707_0707_0707,
    );
    (y, _mm256_shuffle_epi8(y, top))
}

/// Inclusive scan of the 4 lane totals `t` within one YMM.
#[inline]
#[target_feature(enable = "avx2")]
fn cross_scan(t: __m256i) -> __m256i {
    // Lane 1 += lane 0, lane 3 += lane 2 (byte shift by 8 inside each 128-bit half).
    let i = _mm256_xor_si256(t, _mm256_slli_si256::<8>(t));
    // Lanes 2, 3 += lane 1.
    let l1 = _mm256_permute4x64_epi64::<0b01_01_01_01>(i);
    let l1 = _mm256_blend_epi32::<0b1111_0000>(_mm256_setzero_si256(), l1);
    _mm256_xor_si256(i, l1)
}

/// Inclusive prefix-XOR `Q` of a row and its total `T` broadcast to all 64 bytes.
#[inline]
#[target_feature(enable = "avx2")]
fn scan(x: Halves) -> (Halves, Halves) {
    let (ylo, tlo) = lane_scan(x.lo);
    let (yhi, thi) = lane_scan(x.hi);
    let ilo = cross_scan(tlo);
    let lo_total = _mm256_permute4x64_epi64::<0b11_11_11_11>(ilo);
    let ihi = _mm256_xor_si256(cross_scan(thi), lo_total);
    let q = Halves {
        lo: _mm256_xor_si256(ylo, _mm256_xor_si256(ilo, tlo)),
        hi: _mm256_xor_si256(yhi, _mm256_xor_si256(ihi, thi)),
    };
    let total = _mm256_permute4x64_epi64::<0b11_11_11_11>(ihi);
    (
        q,
        Halves {
            lo: total,
            hi: total,
        },
    )
}

/// Scrambles whole rows (contract in the parent module).
#[target_feature(enable = "avx2")]
pub(super) fn scramble_rows(prev: &mut Row, data: &mut [u8]) {
    let mut x = load(prev);
    let (q, t) = scan(x);
    let mut r = xor(xor(q, x), t);
    for row in rows_mut(data) {
        x = load(row);
        let (q, t) = scan(x);
        store(row, xor(q, r));
        r = xor(xor(q, x), t);
    }
    store(prev, x);
}

/// Descrambles whole rows (contract in the parent module).
///
/// The running prefix lives in four XMM quarters rather than two YMM halves: the loop-carried
/// step is then one XOR and one in-lane `vpalignr` (2 cycles) instead of going through the
/// cross-lane `vperm2i128` (3 more), which measured 1.5x faster on AMD Zen 3 (BENCHMARKS.md).
#[target_feature(enable = "avx2")]
pub(super) fn descramble_rows(prev: &mut Row, data: &mut [u8]) {
    let x = load(prev);
    let (p, _) = scan(x);
    let v = xor(p, x);
    let mut v = quarters(v);
    // The previous row's prefix, top quarter: its byte 15 is shifted into the next row.
    let mut carry = _mm256_extracti128_si256::<1>(p.hi);
    let mut last = quarters(x);
    for row in rows_mut(data) {
        let b = load_quarters(row);
        let p: [__m128i; 4] = core::array::from_fn(|j| _mm_xor_si128(b[j], v[j]));
        v = [
            _mm_alignr_epi8::<15>(p[0], carry),
            _mm_alignr_epi8::<15>(p[1], p[0]),
            _mm_alignr_epi8::<15>(p[2], p[1]),
            _mm_alignr_epi8::<15>(p[3], p[2]),
        ];
        carry = p[3];
        last = core::array::from_fn(|j| _mm_xor_si128(p[j], v[j]));
        store_quarters(row, last);
    }
    store_quarters(prev, last);
}

/// The four 16-byte quarters of a row held as two halves.
#[inline]
#[target_feature(enable = "avx2")]
fn quarters(h: Halves) -> [__m128i; 4] {
    [
        _mm256_castsi256_si128(h.lo),
        _mm256_extracti128_si256::<1>(h.lo),
        _mm256_castsi256_si128(h.hi),
        _mm256_extracti128_si256::<1>(h.hi),
    ]
}

#[inline(always)]
fn load_quarters(bytes: &[u8; 64]) -> [__m128i; 4] {
    let p = bytes.as_ptr();
    // SAFETY: `p..p + 64` is readable, so is each 16-byte quarter; `loadu` has no alignment
    // requirement. SSE2 is part of x86-64.
    core::array::from_fn(|j| unsafe { _mm_loadu_si128(p.add(16 * j).cast()) })
}

#[inline(always)]
fn store_quarters(bytes: &mut [u8; 64], q: [__m128i; 4]) {
    let p = bytes.as_mut_ptr();
    for (j, q) in q.into_iter().enumerate() {
        // SAFETY: `p..p + 64` is writable, so is each 16-byte quarter; `storeu` has no
        // alignment requirement. SSE2 is part of x86-64.
        unsafe { _mm_storeu_si128(p.add(16 * j).cast(), q) };
    }
}
