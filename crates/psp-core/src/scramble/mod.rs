//! The "not-every-not-any" byte scrambler (seeds 001 §III-IV and 000 Figs 10/11).
//!
//! Every output byte is the input byte XORed with the XOR of the 64 previous *original*
//! (plaintext) bytes: `B[i] = b[i] ^ b[i-1] ^ ... ^ b[i-64]`. The window starts from
//! [`Seed::history`], an HMAC of the key. Scrambling is length-preserving and streaming: any
//! split of a stream into calls gives the same output. The send and receive sides keep separate
//! states ([`Scrambler`], [`Descrambler`]).
//!
//! Three implementations compute the same function byte for byte:
//! - [`straightforward`]: the paper's first version (XOR all 64 bytes, shift the buffer);
//! - [`revised`]: the paper's Fig 10 (ring buffer and running XOR);
//! - [`Scrambler`]/[`Descrambler`]: production, a prefix-XOR reformulation with SIMD kernels
//!   chosen at runtime ([`Kernel`]).
//!
//! This is obfuscation, not encryption: it is linear, gives no integrity, and anyone who knows
//! 65 consecutive plaintext bytes of a contiguous scrambled run can undo the rest of that run.
//! See `docs/SCRAMBLER.md`.

use hmac::{Hmac, Mac};
use sha1::Sha1;
use zeroize::{Zeroize, ZeroizeOnDrop};

mod fast;
pub mod revised;
pub mod select;
pub mod straightforward;

pub use select::{Direction, KernelChoice};

/// Length of the scrambling window in bytes.
pub const WINDOW_LEN: usize = 64;
/// Length of the HMAC-SHA1 seed that starts the window.
pub const SEED_LEN: usize = 20;

/// The initial window material: HMAC-SHA1 of a key.
#[derive(Clone, Zeroize, ZeroizeOnDrop)]
pub struct Seed([u8; SEED_LEN]);

impl Seed {
    /// `HMAC-SHA1(K = key, M = "")`, the paper's "HMAC of the key".
    pub fn from_key(key: &[u8]) -> Self {
        // HMAC accepts keys of any length, so `new_from_slice` cannot fail.
        let mac = <Hmac<Sha1> as Mac>::new_from_slice(key).unwrap_or_else(|_| unreachable!());
        Self(mac.finalize().into_bytes().into())
    }

    /// A seed from raw bytes (e.g. a per-frame derivation).
    pub fn from_bytes(bytes: [u8; SEED_LEN]) -> Self {
        Self(bytes)
    }

    /// The 64-byte initial history, oldest byte first: 44 zero bytes, then the seed reversed
    /// (seed byte 0 is the most recent byte).
    pub fn history(&self) -> [u8; WINDOW_LEN] {
        let mut h = [0u8; WINDOW_LEN];
        for (i, b) in self.0.iter().enumerate() {
            h[WINDOW_LEN - 1 - i] = *b;
        }
        h
    }
}

impl core::fmt::Debug for Seed {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Seed(..)")
    }
}

/// The input and output of a copying call differ in length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LengthMismatch;

impl core::fmt::Display for LengthMismatch {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("input and output lengths differ")
    }
}

impl core::error::Error for LengthMismatch {}

/// A production kernel; chosen at runtime from the CPU's features.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Kernel {
    /// Portable code on 64-bit words (SWAR); runs everywhere.
    Portable,
    /// x86-64 AVX2 (256-bit vectors).
    #[cfg(target_arch = "x86_64")]
    Avx2,
    /// x86-64 AVX-512 F + BW + VBMI and GFNI (512-bit vectors, byte permutes, bit-matrix ops).
    #[cfg(target_arch = "x86_64")]
    Avx512,
}

impl Kernel {
    /// Every kernel compiled in, fastest last.
    #[cfg(target_arch = "x86_64")]
    pub const ALL: &'static [Self] = &[Self::Portable, Self::Avx2, Self::Avx512];
    /// Every kernel compiled in, fastest last.
    #[cfg(not(target_arch = "x86_64"))]
    pub const ALL: &'static [Self] = &[Self::Portable];

    /// The widest kernel this CPU supports (by feature flags alone).
    pub fn detect() -> Self {
        Self::ALL
            .iter()
            .rev()
            .copied()
            .find(|k| k.is_available())
            .unwrap_or(Self::Portable)
    }

    /// The default kernel for `dir` on this CPU: the widest it supports, except where a
    /// measurement showed a narrower one faster (AMD Zen 4 descrambles faster with AVX2; see
    /// [`select`]). [`select::calibrate`] measures instead of assuming.
    pub fn detect_for(dir: Direction) -> Self {
        let widest = Self::detect();
        #[cfg(target_arch = "x86_64")]
        if widest == Self::Avx512 && dir == Direction::Descramble && fast::is_zen4() {
            return Self::Avx2;
        }
        let _ = dir;
        widest
    }

    /// Whether this CPU can run the kernel.
    pub fn is_available(self) -> bool {
        fast::is_available(self)
    }

    /// A short name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Portable => "portable",
            #[cfg(target_arch = "x86_64")]
            Self::Avx2 => "avx2",
            #[cfg(target_arch = "x86_64")]
            Self::Avx512 => "avx512",
        }
    }
}

/// Send-side state: scrambles a byte stream.
///
/// Holds the last 64 plaintext bytes (oldest first) and the kernel; zeroized on drop.
#[derive(Clone, Zeroize, ZeroizeOnDrop)]
pub struct Scrambler {
    history: [u8; WINDOW_LEN],
    #[zeroize(skip)]
    kernel: fast::Dispatch,
}

/// Receive-side state: descrambles a byte stream.
///
/// Holds the last 64 recovered plaintext bytes (oldest first) and the kernel; zeroized on drop.
#[derive(Clone, Zeroize, ZeroizeOnDrop)]
pub struct Descrambler {
    history: [u8; WINDOW_LEN],
    #[zeroize(skip)]
    kernel: fast::Dispatch,
}

impl Scrambler {
    /// A scrambler starting from `seed`, using the preferred kernel ([`select::preferred`]).
    pub fn new(seed: &Seed) -> Self {
        Self {
            history: seed.history(),
            kernel: fast::Dispatch::preferred(Direction::Scramble),
        }
    }

    /// A scrambler using a specific kernel, or `None` if this CPU lacks it.
    pub fn with_kernel(seed: &Seed, kernel: Kernel) -> Option<Self> {
        Some(Self {
            history: seed.history(),
            kernel: fast::Dispatch::new(kernel)?,
        })
    }

    /// The kernel this scrambler runs.
    pub fn kernel(&self) -> Kernel {
        self.kernel.kernel()
    }

    /// Scrambles `buf` in place, continuing the stream.
    pub fn scramble_in_place(&mut self, buf: &mut [u8]) {
        self.kernel.scramble(&mut self.history, buf);
    }

    /// Scrambles `input` into `output` (same length), continuing the stream.
    ///
    /// # Errors
    /// [`LengthMismatch`] if the lengths differ; the state is unchanged then.
    pub fn scramble(&mut self, input: &[u8], output: &mut [u8]) -> Result<(), LengthMismatch> {
        if input.len() != output.len() {
            return Err(LengthMismatch);
        }
        output.copy_from_slice(input);
        self.scramble_in_place(output);
        Ok(())
    }
}

impl Descrambler {
    /// A descrambler starting from `seed` (the peer's send seed), using the preferred kernel
    /// ([`select::preferred`]).
    pub fn new(seed: &Seed) -> Self {
        Self {
            history: seed.history(),
            kernel: fast::Dispatch::preferred(Direction::Descramble),
        }
    }

    /// A descrambler using a specific kernel, or `None` if this CPU lacks it.
    pub fn with_kernel(seed: &Seed, kernel: Kernel) -> Option<Self> {
        Some(Self {
            history: seed.history(),
            kernel: fast::Dispatch::new(kernel)?,
        })
    }

    /// The kernel this descrambler runs.
    pub fn kernel(&self) -> Kernel {
        self.kernel.kernel()
    }

    /// Descrambles `buf` in place, continuing the stream.
    pub fn descramble_in_place(&mut self, buf: &mut [u8]) {
        self.kernel.descramble(&mut self.history, buf);
    }

    /// Descrambles `input` into `output` (same length), continuing the stream.
    ///
    /// # Errors
    /// [`LengthMismatch`] if the lengths differ; the state is unchanged then.
    pub fn descramble(&mut self, input: &[u8], output: &mut [u8]) -> Result<(), LengthMismatch> {
        if input.len() != output.len() {
            return Err(LengthMismatch);
        }
        output.copy_from_slice(input);
        self.descramble_in_place(output);
        Ok(())
    }
}

impl core::fmt::Debug for Scrambler {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Scrambler")
            .field("kernel", &self.kernel.kernel().name())
            .finish_non_exhaustive()
    }
}

impl core::fmt::Debug for Descrambler {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Descrambler")
            .field("kernel", &self.kernel.kernel().name())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 131 + i / 7) as u8).collect()
    }

    #[test]
    fn history_layout() {
        let seed = Seed::from_bytes(core::array::from_fn(|i| i as u8 + 1));
        let h = seed.history();
        assert_eq!(h[..44], [0; 44]);
        assert_eq!(h[63], 1);
        assert_eq!(h[44], 20);
    }

    #[test]
    fn every_kernel_matches_revised_on_every_length() {
        let seed = Seed::from_key(b"kernels");
        for &k in Kernel::ALL {
            let Some(mut s) = Scrambler::with_kernel(&seed, k) else {
                continue;
            };
            let mut d = Descrambler::with_kernel(&seed, k).unwrap();
            let mut rs = revised::Scrambler::new(&seed);
            for n in 0..300 {
                let plain = data(n);
                let mut a = plain.clone();
                let mut b = plain.clone();
                s.scramble_in_place(&mut a);
                rs.scramble_in_place(&mut b);
                assert_eq!(a, b, "kernel {} len {n}", k.name());
                d.descramble_in_place(&mut a);
                assert_eq!(a, plain, "kernel {} len {n}", k.name());
            }
        }
    }

    #[test]
    fn detect_is_available() {
        assert!(Kernel::detect().is_available());
        assert!(Kernel::Portable.is_available());
        let _guard = select::tests::PREFERRED_LOCK.lock();
        assert_eq!(
            Scrambler::new(&Seed::from_key(b"")).kernel(),
            select::preferred().scramble
        );
        for &k in Kernel::ALL {
            let s = Scrambler::with_kernel(&Seed::from_key(b""), k);
            assert_eq!(s.is_some(), k.is_available());
            std::eprintln!("kernel {}: available = {}", k.name(), k.is_available());
        }
    }

    #[test]
    fn debug_prints_no_bytes() {
        let seed = Seed::from_bytes([0xAB; SEED_LEN]);
        let s = Scrambler::with_kernel(&seed, Kernel::Portable).unwrap();
        assert_eq!(format!("{seed:?}"), "Seed(..)");
        assert_eq!(format!("{s:?}"), "Scrambler { kernel: \"portable\", .. }");
        let d = Descrambler::with_kernel(&seed, Kernel::Portable).unwrap();
        assert!(!format!("{d:?}").contains("171"));
    }

    #[test]
    fn length_mismatch_leaves_state_unchanged() {
        let seed = Seed::from_key(b"len");
        let mut s = Scrambler::new(&seed);
        let mut out = [0u8; 3];
        assert_eq!(s.scramble(&[1, 2], &mut out), Err(LengthMismatch));
        let mut fresh = Scrambler::new(&seed);
        let mut a = [7u8; 100];
        let mut b = [7u8; 100];
        s.scramble_in_place(&mut a);
        fresh.scramble_in_place(&mut b);
        assert_eq!(a, b);
        assert_eq!(
            LengthMismatch.to_string(),
            "input and output lengths differ"
        );
    }
}
