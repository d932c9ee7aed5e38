//! Production scrambler kernels: the prefix-XOR row formulation, a portable SWAR kernel and
//! x86-64 SIMD kernels, with runtime CPU-feature dispatch.
//!
//! This is the only module of psp-core that may use `unsafe` (SIMD loads/stores and calls to
//! `#[target_feature]` functions); every `unsafe` block carries a `// SAFETY:` comment.
//!
//! # The row formulation
//!
//! Cut the stream into 64-byte rows; `x_k` is row `k` of plaintext, `x_{k-1}` the 64 bytes
//! before it (at the start of a call: the saved history). With `Q_k` the inclusive prefix-XOR
//! inside row `k`, `T_k` the row's total broadcast to all bytes and `R_k = Q_k ^ x_k ^ T_k`
//! (inclusive *suffix* XOR of the row):
//!
//! - scramble: `B_k = Q_k ^ R_{k-1}`: one in-row scan per row, no dependency between rows;
//! - descramble: with `P` a running prefix-XOR, `P_k = B_k ^ P_{k-1} ^ x_{k-1}` (no in-row
//!   dependency), then `x_k = P_k ^ (P_k shifted up one byte, P_{k-1}[63] shifted in)`.
//!
//! A trailing partial row is zero-padded to 64 bytes: output byte `j` only depends on bytes
//! `0..=j` of its row and on the previous row, so the padding never reaches the real bytes.
//!
//! Kernels implement "rows" functions with this contract: `data.len()` is a nonzero multiple of
//! 64, `prev` holds the 64 plaintext bytes preceding `data` (oldest first); the function
//! transforms `data` in place and leaves the last 64 plaintext bytes of `data` in `prev`.

#![allow(unsafe_code)]

use super::{Kernel, WINDOW_LEN};

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
mod portable;

/// One 64-byte row.
type Row = [u8; WINDOW_LEN];

#[cfg(target_arch = "x86_64")]
cpufeatures::new!(cpuid_avx2, "avx2");
#[cfg(target_arch = "x86_64")]
cpufeatures::new!(cpuid_avx512, "avx512f", "avx512bw", "avx512vbmi", "gfni");

/// Whether the CPU we run on supports `kernel`.
pub(super) fn is_available(kernel: Kernel) -> bool {
    match kernel {
        Kernel::Portable => true,
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx2 => cpuid_avx2::get(),
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx512 => cpuid_avx512::get(),
    }
}

/// Whether this is an AMD Zen 4 CPU (family 19h with AVX-512), which executes 512-bit
/// operations as two 256-bit halves.
#[cfg(target_arch = "x86_64")]
pub(super) fn is_zen4() -> bool {
    use core::arch::x86_64::__cpuid;
    // SAFETY: `cpuid` exists on every x86-64 CPU; leaves 0 and 1 are always valid. (Newer
    // compilers declare `__cpuid` safe; the block keeps older ones within the MSRV building.)
    #[allow(unused_unsafe)]
    let (vendor, sig) = unsafe { (__cpuid(0), __cpuid(1)) };
    let amd = (vendor.ebx, vendor.edx, vendor.ecx) == (0x6874_7541, 0x6974_6e65, 0x444d_4163);
    let family = ((sig.eax >> 8) & 0xf) + ((sig.eax >> 20) & 0xff);
    amd && family == 0x19 && cpuid_avx512::get()
}

/// A kernel proven available on this CPU: only [`Dispatch::new`] and [`Dispatch::preferred`] build
/// one, and both check. The SIMD calls below rely on this invariant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Dispatch(Kernel);

impl Dispatch {
    /// `kernel` if this CPU supports it.
    pub(super) fn new(kernel: Kernel) -> Option<Self> {
        is_available(kernel).then_some(Self(kernel))
    }

    /// The preferred kernel for `dir` ([`super::select::preferred`]), which is available.
    pub(super) fn preferred(dir: super::Direction) -> Self {
        Self::new(super::select::preferred().get(dir)).unwrap_or(Self(Kernel::Portable))
    }

    /// The kernel.
    pub(super) fn kernel(self) -> Kernel {
        self.0
    }

    /// Scrambles `buf`, continuing from `history` (the last 64 plaintext bytes, oldest first).
    pub(super) fn scramble(self, history: &mut Row, buf: &mut [u8]) {
        match self.0 {
            Kernel::Portable => drive(history, buf, portable::scramble_rows),
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 => drive(history, buf, |p, d| {
                // SAFETY: `Dispatch(Avx2)` exists only after `cpuid_avx2::get()` returned true.
                unsafe { avx2::scramble_rows(p, d) }
            }),
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `Dispatch(Avx512)` exists only after `cpuid_avx512::get()` returned true
            // (AVX-512 F, BW, VBMI and GFNI, with OS support for the ZMM state).
            Kernel::Avx512 => unsafe { avx512::scramble(history, buf) },
        }
    }

    /// Descrambles `buf`, continuing from `history` (the last 64 plaintext bytes, oldest first).
    pub(super) fn descramble(self, history: &mut Row, buf: &mut [u8]) {
        match self.0 {
            Kernel::Portable => drive(history, buf, portable::descramble_rows),
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 => drive(history, buf, |p, d| {
                // SAFETY: `Dispatch(Avx2)` exists only after `cpuid_avx2::get()` returned true.
                unsafe { avx2::descramble_rows(p, d) }
            }),
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as in `scramble`, the CPU was checked for AVX-512 F/BW/VBMI and GFNI.
            Kernel::Avx512 => unsafe { avx512::descramble(history, buf) },
        }
    }
}

/// The whole 64-byte rows of `data` (a trailing partial row is skipped).
#[inline(always)]
fn rows_mut(data: &mut [u8]) -> impl Iterator<Item = &mut Row> {
    data.chunks_exact_mut(WINDOW_LEN)
        // `chunks_exact_mut(64)` yields exactly 64-byte slices, so the conversion cannot fail.
        .map(|c| <&mut Row>::try_from(c).unwrap_or_else(|_| unreachable!()))
}

/// The 8 little-endian 64-bit words of a row.
#[inline(always)]
fn words(row: &Row) -> [u64; 8] {
    core::array::from_fn(|i| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&row[8 * i..8 * i + 8]);
        u64::from_le_bytes(w)
    })
}

/// Writes 8 words into a row, little-endian.
#[inline(always)]
fn set_words(row: &mut Row, w: &[u64; 8]) {
    for (i, w) in w.iter().enumerate() {
        row[8 * i..8 * i + 8].copy_from_slice(&w.to_le_bytes());
    }
}

/// Runs `rows` over the whole rows of `buf`, then over the zero-padded trailing partial row,
/// and keeps `history` equal to the last 64 plaintext bytes.
#[inline(always)]
fn drive(history: &mut Row, buf: &mut [u8], mut rows: impl FnMut(&mut Row, &mut [u8])) {
    let whole = buf.len() - buf.len() % WINDOW_LEN;
    let (head, tail) = buf.split_at_mut(whole);
    if !head.is_empty() {
        rows(history, head);
    }
    let t = tail.len();
    if t == 0 {
        return;
    }
    let mut row = [0u8; WINDOW_LEN];
    row[..t].copy_from_slice(tail);
    let mut prev = *history;
    rows(&mut prev, &mut row);
    tail.copy_from_slice(&row[..t]);
    // `prev` now holds the padded row's plaintext; only its first `t` bytes are real.
    history.copy_within(t.., 0);
    history[WINDOW_LEN - t..].copy_from_slice(&prev[..t]);
}
