//! The paper's straightforward implementation (seed 001 §IV): a 64-byte shift buffer whose 64
//! bytes are XORed for every byte, then shifted by one to make room for the new byte.
//!
//! This is the literal reading of the paper and the reference the known-answer vectors come
//! from. It is deliberately slow (64 XORs and a 63-byte move per byte); use
//! [`super::Scrambler`] in real code.

use zeroize::{Zeroize, ZeroizeOnDrop};

use super::{SEED_LEN, Seed, WINDOW_LEN};

/// The shift buffer: `buf[0]` is the most recent original byte, `buf[63]` the oldest
/// ("highest"), which is forced out when a new byte arrives.
#[derive(Clone, Zeroize, ZeroizeOnDrop)]
struct ShiftBuffer {
    buf: [u8; WINDOW_LEN],
}

impl ShiftBuffer {
    /// The HMAC bytes fill the low end; "the higher bytes ... [are] filled by zero".
    fn new(seed: &Seed) -> Self {
        let mut buf = [0u8; WINDOW_LEN];
        buf[..SEED_LEN].copy_from_slice(&seed.0);
        Self { buf }
    }

    /// XOR of all the bytes in the buffer, recomputed every time.
    fn xor_all(&self) -> u8 {
        let mut x = 0;
        for b in &self.buf {
            x ^= b;
        }
        x
    }

    /// Shifts every byte one place up (dropping the highest) and stores `orig` at the bottom.
    fn push(&mut self, orig: u8) {
        for i in (1..WINDOW_LEN).rev() {
            self.buf[i] = self.buf[i - 1];
        }
        self.buf[0] = orig;
    }
}

/// Send state of the straightforward implementation.
#[derive(Clone, Zeroize, ZeroizeOnDrop)]
pub struct Scrambler {
    window: ShiftBuffer,
}

/// Receive state of the straightforward implementation.
#[derive(Clone, Zeroize, ZeroizeOnDrop)]
pub struct Descrambler {
    window: ShiftBuffer,
}

impl Scrambler {
    /// Starts from `seed` (the local side's HMAC of its key).
    pub fn new(seed: &Seed) -> Self {
        Self {
            window: ShiftBuffer::new(seed),
        }
    }

    /// Scrambles `data` in place: `B[i] = b[i] ^ XOR(window)`, then `b[i]` enters the window.
    pub fn scramble_in_place(&mut self, data: &mut [u8]) {
        for b in data {
            let orig = *b;
            *b = orig ^ self.window.xor_all();
            self.window.push(orig);
        }
    }
}

impl Descrambler {
    /// Starts from `seed` (the remote side's HMAC of its key).
    pub fn new(seed: &Seed) -> Self {
        Self {
            window: ShiftBuffer::new(seed),
        }
    }

    /// Descrambles `data` in place: `b[i] = B[i] ^ XOR(window)`, then `b[i]` enters the window.
    pub fn descramble_in_place(&mut self, data: &mut [u8]) {
        for b in data {
            let orig = *b ^ self.window.xor_all();
            self.window.push(orig);
            *b = orig;
        }
    }
}

impl core::fmt::Debug for Scrambler {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("straightforward::Scrambler(..)")
    }
}

impl core::fmt::Debug for Descrambler {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("straightforward::Descrambler(..)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_matches_history_reversed() {
        let seed = Seed::from_key(b"k");
        let w = ShiftBuffer::new(&seed);
        let mut h = seed.history();
        h.reverse();
        assert_eq!(w.buf, h);
    }

    #[test]
    fn first_byte_is_xored_with_the_seed() {
        let seed = Seed::from_bytes([0x11; SEED_LEN]);
        let mut s = Scrambler::new(&seed);
        let mut buf = [0xAA];
        s.scramble_in_place(&mut buf);
        // 20 equal bytes XOR to zero.
        assert_eq!(buf, [0xAA]);
        let seed = Seed::from_bytes([0; SEED_LEN]);
        let mut s = Scrambler::new(&seed);
        let mut buf = [1, 2, 3];
        s.scramble_in_place(&mut buf);
        assert_eq!(buf, [1, 2 ^ 1, 3 ^ 2 ^ 1]);
    }

    #[test]
    fn roundtrip() {
        let seed = Seed::from_key(b"key");
        let data: [u8; 300] = core::array::from_fn(|i| (i * 7) as u8);
        let mut buf = data;
        Scrambler::new(&seed).scramble_in_place(&mut buf);
        assert_ne!(buf, data);
        Descrambler::new(&seed).descramble_in_place(&mut buf);
        assert_eq!(buf, data);
    }
}
