//! The Blowfish block cipher (Schneier 1993): key schedule and an interleaved multi-lane core.
//!
//! Blowfish's round is a serial chain: `F(x) = ((S0[a] + S1[b]) ^ S2[c]) + S3[d]` needs four
//! dependent S-box loads, so one block costs 16 rounds of load latency (~140 cycles) while the
//! core sits mostly idle. [`Blowfish::encrypt_lanes`] and [`Blowfish::decrypt_lanes`] run `N`
//! independent blocks through the rounds side by side so the CPU overlaps their chains; this is
//! what makes CBC decryption (whose blocks are independent) and the encryption of several CBC
//! chains at once (several frames) fast. Indices are `as u8 as usize` into `[u32; 256]` tables,
//! so there are no bounds checks, and the 16 rounds are unrolled.
//!
//! Blocks are `u64`s, big-endian: the left half is the high word. Modes of operation, byte
//! handling and padding live in the parent module. The subkeys are zeroized on drop.

use zeroize::{Zeroize, ZeroizeOnDrop};

use super::consts;

/// An expanded Blowfish key: 18 round subkeys and four key-dependent S-boxes (4168 bytes).
#[derive(Clone)]
pub(super) struct Blowfish {
    p: [u32; 18],
    s: [[u32; 256]; 4],
}

/// Two Feistel rounds on every lane: `r ^= F(l) ^ p[$a]`, then `l ^= F(r) ^ p[$b]`.
///
/// The subkey is XORed into the half that is already known, off the critical path through `F`.
macro_rules! double_round {
    ($self:ident, $l:ident, $r:ident, $a:expr, $b:expr) => {
        for j in 0..N {
            $r[j] = ($r[j] ^ $self.p[$a]) ^ $self.f($l[j]);
        }
        for j in 0..N {
            $l[j] = ($l[j] ^ $self.p[$b]) ^ $self.f($r[j]);
        }
    };
}

impl Blowfish {
    /// Expands `key` (4 to 56 bytes, as the RustCrypto crate and OpenSSL's `BF_set_key` for
    /// those lengths), or `None` for other lengths.
    pub(super) fn new(key: &[u8]) -> Option<Self> {
        if !(4..=56).contains(&key.len()) {
            return None;
        }
        let mut bf = Self {
            p: consts::P,
            s: consts::S,
        };
        // The key, repeated cyclically, is XORed into P as big-endian words.
        let mut key_bytes = key.iter().copied().cycle();
        for p in &mut bf.p {
            let mut word = 0u32;
            for _ in 0..4 {
                word = (word << 8) | u32::from(key_bytes.next().unwrap_or(0));
            }
            *p ^= word;
        }
        // Then the all-zero block is encrypted repeatedly, each output replacing two subkeys.
        let mut block = 0u64;
        for i in 0..9 {
            block = bf.encrypt(block);
            bf.p[2 * i] = (block >> 32) as u32;
            bf.p[2 * i + 1] = block as u32;
        }
        for i in 0..4 {
            for j in 0..128 {
                block = bf.encrypt(block);
                bf.s[i][2 * j] = (block >> 32) as u32;
                bf.s[i][2 * j + 1] = block as u32;
            }
        }
        Some(bf)
    }

    /// The round function. Each index is one byte of `x`, so no bounds check can fail.
    #[inline(always)]
    fn f(&self, x: u32) -> u32 {
        let a = self.s[0][(x >> 24) as u8 as usize];
        let b = self.s[1][(x >> 16) as u8 as usize];
        let c = self.s[2][(x >> 8) as u8 as usize];
        let d = self.s[3][x as u8 as usize];
        (a.wrapping_add(b) ^ c).wrapping_add(d)
    }

    /// Encrypts one block.
    #[inline(always)]
    pub(super) fn encrypt(&self, block: u64) -> u64 {
        let mut b = [block];
        self.encrypt_lanes(&mut b);
        b[0]
    }

    /// Decrypts one block.
    #[inline(always)]
    pub(super) fn decrypt(&self, block: u64) -> u64 {
        let mut b = [block];
        self.decrypt_lanes(&mut b);
        b[0]
    }

    /// Encrypts `N` independent blocks in place, their rounds interleaved.
    #[inline(always)]
    pub(super) fn encrypt_lanes<const N: usize>(&self, blocks: &mut [u64; N]) {
        let mut l: [u32; N] = core::array::from_fn(|j| (blocks[j] >> 32) as u32);
        let mut r: [u32; N] = core::array::from_fn(|j| blocks[j] as u32);
        for x in &mut l {
            *x ^= self.p[0];
        }
        if N <= 2 {
            double_round!(self, l, r, 1, 2);
            double_round!(self, l, r, 3, 4);
            double_round!(self, l, r, 5, 6);
            double_round!(self, l, r, 7, 8);
            double_round!(self, l, r, 9, 10);
            double_round!(self, l, r, 11, 12);
            double_round!(self, l, r, 13, 14);
            double_round!(self, l, r, 15, 16);
        } else {
            // A loop of two rounds per iteration: see `decrypt_lanes`.
            for k in 0..8 {
                double_round!(self, l, r, 2 * k + 1, 2 * k + 2);
            }
        }
        for j in 0..N {
            r[j] ^= self.p[17];
            // The halves swap on output.
            blocks[j] = (u64::from(r[j]) << 32) | u64::from(l[j]);
        }
    }

    /// Decrypts `N` independent blocks in place, their rounds interleaved.
    #[inline(always)]
    pub(super) fn decrypt_lanes<const N: usize>(&self, blocks: &mut [u64; N]) {
        let mut l: [u32; N] = core::array::from_fn(|j| (blocks[j] >> 32) as u32);
        let mut r: [u32; N] = core::array::from_fn(|j| blocks[j] as u32);
        for x in &mut l {
            *x ^= self.p[17];
        }
        if N <= 2 {
            double_round!(self, l, r, 16, 15);
            double_round!(self, l, r, 14, 13);
            double_round!(self, l, r, 12, 11);
            double_round!(self, l, r, 10, 9);
            double_round!(self, l, r, 8, 7);
            double_round!(self, l, r, 6, 5);
            double_round!(self, l, r, 4, 3);
            double_round!(self, l, r, 2, 1);
        } else {
            // With many lanes the 16 unrolled rounds need more registers than x86-64 has, and
            // the compiler may then schedule lane after lane, which hides the parallelism from
            // the CPU. A loop keeps each basic block to two rounds of every lane, so the lanes
            // stay interleaved whatever the scheduler does; the loop costs 3 µops in ~200.
            for k in (1..9).rev() {
                double_round!(self, l, r, 2 * k, 2 * k - 1);
            }
        }
        for j in 0..N {
            r[j] ^= self.p[0];
            blocks[j] = (u64::from(r[j]) << 32) | u64::from(l[j]);
        }
    }
}

impl Blowfish {
    /// Overwrites the subkeys with zeros.
    fn wipe(&mut self) {
        self.p.zeroize();
        self.s.zeroize();
    }
}

impl Drop for Blowfish {
    #[inline(never)]
    fn drop(&mut self) {
        self.wipe();
    }
}

impl ZeroizeOnDrop for Blowfish {}

#[cfg(test)]
mod tests {
    use cipher::{BlockEncrypt, KeyInit};

    use super::*;

    #[test]
    fn pi_tables() {
        // The first and last words of the fractional part of pi used by Blowfish.
        assert_eq!(consts::P[0], 0x243f_6a88);
        assert_eq!(consts::P[17], 0x8979_fb1b);
        assert_eq!(consts::S[0][0], 0xd131_0ba6);
        assert_eq!(consts::S[3][255], 0x3ac3_72e6);
    }

    #[test]
    fn key_lengths() {
        assert!(Blowfish::new(&[1; 3]).is_none());
        assert!(Blowfish::new(&[1; 4]).is_some());
        assert!(Blowfish::new(&[1; 56]).is_some());
        assert!(Blowfish::new(&[1; 57]).is_none());
    }

    #[test]
    fn schedule_matches_rustcrypto() {
        for len in 4..=56 {
            let key: Vec<u8> = (0..len).map(|i| (i * 37 + len) as u8).collect();
            let ours = Blowfish::new(&key).unwrap();
            let theirs = <blowfish::Blowfish>::new_from_slice(&key).unwrap();
            for x in [0u64, 1, u64::MAX, 0x0123_4567_89ab_cdef] {
                let mut b = x.to_be_bytes().into();
                theirs.encrypt_block(&mut b);
                let expected = u64::from_be_bytes(b.into());
                assert_eq!(ours.encrypt(x), expected, "len {len}");
                assert_eq!(ours.decrypt(expected), x, "len {len}");
            }
        }
    }

    #[test]
    fn lanes_equal_single_blocks() {
        let bf = Blowfish::new(b"lanes!").unwrap();
        let blocks: [u64; 8] =
            core::array::from_fn(|i| (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let single: [u64; 8] = core::array::from_fn(|i| bf.encrypt(blocks[i]));
        let mut b2: [u64; 2] = [blocks[0], blocks[1]];
        bf.encrypt_lanes(&mut b2);
        assert_eq!(b2[..], single[..2]);
        let mut b3: [u64; 3] = [blocks[0], blocks[1], blocks[2]];
        bf.encrypt_lanes(&mut b3);
        assert_eq!(b3[..], single[..3]);
        let mut b4: [u64; 4] = core::array::from_fn(|i| blocks[i]);
        bf.encrypt_lanes(&mut b4);
        assert_eq!(b4[..], single[..4]);
        let mut b8 = blocks;
        bf.encrypt_lanes(&mut b8);
        assert_eq!(b8, single);
        bf.decrypt_lanes(&mut b8);
        assert_eq!(b8, blocks);
        bf.decrypt_lanes(&mut b4);
        assert_eq!(b4[..], blocks[..4]);
        bf.decrypt_lanes(&mut b2);
        assert_eq!(b2[..], blocks[..2]);
    }

    #[test]
    fn drop_wipes_subkeys() {
        let mut bf = Blowfish::new(b"wipe me").unwrap();
        bf.wipe();
        assert!(bf.p.iter().all(|&w| w == 0));
        assert!(bf.s.iter().flatten().all(|&w| w == 0));
    }
}
