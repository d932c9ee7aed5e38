//! The "not-every-not-any" byte scrambler (seeds 001 and 000). STUB: the API contract only;
//! the real implementations (straightforward, revised, SIMD production) replace the bodies.

use hmac::{Hmac, Mac};
use sha1::Sha1;
use zeroize::{Zeroize, ZeroizeOnDrop};

pub mod revised;
pub mod straightforward;

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
    /// Portable scalar code.
    Portable,
}

impl Kernel {
    /// Every kernel compiled in, fastest last.
    pub const ALL: &'static [Self] = &[Self::Portable];

    /// The fastest kernel this CPU supports.
    pub fn detect() -> Self {
        Self::Portable
    }

    /// Whether this CPU can run the kernel.
    pub fn is_available(self) -> bool {
        true
    }

    /// A short name.
    pub fn name(self) -> &'static str {
        "portable"
    }
}

/// Send-side state: scrambles a byte stream.
#[derive(Clone, Zeroize, ZeroizeOnDrop)]
pub struct Scrambler {
    inner: revised::Scrambler,
}

/// Receive-side state: descrambles a byte stream.
#[derive(Clone, Zeroize, ZeroizeOnDrop)]
pub struct Descrambler {
    inner: revised::Descrambler,
}

impl Scrambler {
    /// A scrambler starting from `seed`, using the fastest kernel.
    pub fn new(seed: &Seed) -> Self {
        Self {
            inner: revised::Scrambler::new(seed),
        }
    }

    /// A scrambler using a specific kernel, or `None` if this CPU lacks it.
    pub fn with_kernel(seed: &Seed, kernel: Kernel) -> Option<Self> {
        kernel.is_available().then(|| Self::new(seed))
    }

    /// Scrambles `buf` in place, continuing the stream.
    pub fn scramble_in_place(&mut self, buf: &mut [u8]) {
        self.inner.scramble_in_place(buf);
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
    /// A descrambler starting from `seed` (the peer's send seed), using the fastest kernel.
    pub fn new(seed: &Seed) -> Self {
        Self {
            inner: revised::Descrambler::new(seed),
        }
    }

    /// A descrambler using a specific kernel, or `None` if this CPU lacks it.
    pub fn with_kernel(seed: &Seed, kernel: Kernel) -> Option<Self> {
        kernel.is_available().then(|| Self::new(seed))
    }

    /// Descrambles `buf` in place, continuing the stream.
    pub fn descramble_in_place(&mut self, buf: &mut [u8]) {
        self.inner.descramble_in_place(buf);
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
