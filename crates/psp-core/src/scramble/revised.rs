//! The paper's revised implementation (seed 000 Fig 10/11, seed 001 §IV): a 64-byte ring buffer
//! indexed by `sIndex`, plus the running XOR of the whole window in `sXor`.
//!
//! Per byte: `x = b ^ sXor; sIndex = (sIndex + 1) % 64; sXor ^= sScrBuf[sIndex] ^ b;
//! sScrBuf[sIndex] = b; b = x`, in exactly the figure's order. The ring starts as
//! [`Seed::history`] (oldest first) with `sIndex = 63`, so the first write replaces slot 0, the
//! oldest byte; this computes the same function as [`super::straightforward`].

use zeroize::{Zeroize, ZeroizeOnDrop};

use super::{Seed, WINDOW_LEN};

/// The ring buffer with its index and running XOR (`sScrBuf`, `sIndex`, `sXor`).
#[derive(Clone, Zeroize, ZeroizeOnDrop)]
struct Ring {
    buf: [u8; WINDOW_LEN],
    /// The slot written last (the most recent byte); the next slot holds the oldest.
    index: usize,
    /// XOR of all 64 bytes in `buf`.
    xor: u8,
}

impl Ring {
    fn new(seed: &Seed) -> Self {
        let buf = seed.history();
        let mut xor = 0;
        for b in &buf {
            xor ^= b;
        }
        Self {
            buf,
            index: WINDOW_LEN - 1,
            xor,
        }
    }

    /// Adds `orig` to the window, evicting the oldest byte.
    #[inline(always)]
    fn push(&mut self, orig: u8) {
        self.index = (self.index + 1) % WINDOW_LEN;
        self.xor ^= self.buf[self.index] ^ orig;
        self.buf[self.index] = orig;
    }
}

/// Send state of the revised implementation.
#[derive(Clone, Zeroize, ZeroizeOnDrop)]
pub struct Scrambler {
    ring: Ring,
}

/// Receive state of the revised implementation.
#[derive(Clone, Zeroize, ZeroizeOnDrop)]
pub struct Descrambler {
    ring: Ring,
}

impl Scrambler {
    /// Starts from `seed` (the local side's HMAC of its key).
    pub fn new(seed: &Seed) -> Self {
        Self {
            ring: Ring::new(seed),
        }
    }

    /// Scrambles `data` in place.
    pub fn scramble_in_place(&mut self, data: &mut [u8]) {
        for b in data {
            let x = *b ^ self.ring.xor;
            self.ring.push(*b);
            *b = x;
        }
    }
}

impl Descrambler {
    /// Starts from `seed` (the remote side's HMAC of its key).
    pub fn new(seed: &Seed) -> Self {
        Self {
            ring: Ring::new(seed),
        }
    }

    /// Descrambles `data` in place (Fig 11: the recovered byte `x` enters the ring).
    pub fn descramble_in_place(&mut self, data: &mut [u8]) {
        for b in data {
            let x = *b ^ self.ring.xor;
            self.ring.push(x);
            *b = x;
        }
    }
}

impl core::fmt::Debug for Scrambler {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("revised::Scrambler(..)")
    }
}

impl core::fmt::Debug for Descrambler {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("revised::Descrambler(..)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scramble::straightforward;

    #[test]
    fn matches_straightforward() {
        let seed = Seed::from_key(b"revised");
        let data: [u8; 500] = core::array::from_fn(|i| (i * 31 + 5) as u8);
        let mut a = data;
        let mut b = data;
        Scrambler::new(&seed).scramble_in_place(&mut a);
        straightforward::Scrambler::new(&seed).scramble_in_place(&mut b);
        assert_eq!(a, b);
        Descrambler::new(&seed).descramble_in_place(&mut a);
        assert_eq!(a, data);
    }

    #[test]
    fn debug_prints_no_bytes() {
        let s = Scrambler::new(&Seed::from_bytes([0xAB; 20]));
        assert_eq!(format!("{s:?}"), "revised::Scrambler(..)");
    }
}
