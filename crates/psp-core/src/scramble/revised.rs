//! The paper's revised implementation (seed 000 Fig 10): ring buffer plus running XOR. STUB.

use zeroize::{Zeroize, ZeroizeOnDrop};

use super::{Seed, WINDOW_LEN};

/// Send state of the revised implementation.
#[derive(Clone, Zeroize, ZeroizeOnDrop)]
pub struct Scrambler {
    buf: [u8; WINDOW_LEN],
    index: usize,
    xor: u8,
}

/// Receive state of the revised implementation.
#[derive(Clone, Zeroize, ZeroizeOnDrop)]
pub struct Descrambler {
    inner: Scrambler,
}

impl Scrambler {
    /// Starts from `seed`.
    pub fn new(seed: &Seed) -> Self {
        let buf = seed.history();
        let xor = buf.iter().fold(0, |a, b| a ^ b);
        // buf[0] is the oldest; the next write goes to index 0.
        Self {
            buf,
            index: WINDOW_LEN - 1,
            xor,
        }
    }

    /// Scrambles `data` in place.
    pub fn scramble_in_place(&mut self, data: &mut [u8]) {
        for b in data {
            let x = *b ^ self.xor;
            self.push(*b);
            *b = x;
        }
    }

    fn push(&mut self, orig: u8) {
        self.index = (self.index + 1) % WINDOW_LEN;
        self.xor ^= self.buf[self.index] ^ orig;
        self.buf[self.index] = orig;
    }
}

impl Descrambler {
    /// Starts from `seed`.
    pub fn new(seed: &Seed) -> Self {
        Self {
            inner: Scrambler::new(seed),
        }
    }

    /// Descrambles `data` in place.
    pub fn descramble_in_place(&mut self, data: &mut [u8]) {
        for b in data {
            let x = *b ^ self.inner.xor;
            self.inner.push(x);
            *b = x;
        }
    }
}
