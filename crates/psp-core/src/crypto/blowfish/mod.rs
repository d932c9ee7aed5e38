//! Blowfish in CBC mode over our own interleaved Blowfish core (`blowfish/cipher.rs`).
//!
//! CBC encryption of one buffer is a serial chain, so [`BlowfishCbc::encrypt_in_place`] runs at
//! the latency of one block (~140 cycles per 8 bytes). CBC *decryption* is parallel:
//! [`BlowfishCbc::decrypt_in_place`] decrypts [`DECRYPT_LANES`] blocks at once, and
//! [`BlowfishCbc::encrypt_many_in_place`] interleaves the chains of several independent buffers
//! (several frames, each with its own IV), which is what a batch of frames needs.
//!
//! Everything works in place and allocates nothing; the chaining value is a big-endian `u64`.
//! Padding is the caller's job: lengths must be multiples of [`BLOCK_LEN`]. The expanded key is
//! zeroized on drop.

// The cipher core and its tables are private children of this module.
mod cipher;
mod consts;

use cipher::Blowfish;

use crate::crypto::{CryptoError, KeyError};

/// Blowfish block length in bytes.
pub const BLOCK_LEN: usize = 8;
/// Shortest Blowfish key in bytes.
pub const MIN_KEY_LEN: usize = 4;
/// Longest Blowfish key in bytes (448 bits).
pub const MAX_KEY_LEN: usize = 56;
/// Blocks decrypted side by side by [`BlowfishCbc::decrypt_in_place`].
pub const DECRYPT_LANES: usize = 8;
/// Chains encrypted side by side by [`BlowfishCbc::encrypt_many_in_place`].
pub const ENCRYPT_LANES: usize = 8;

/// One buffer of [`BlowfishCbc::encrypt_many_in_place`]: its IV and its data, encrypted in place.
#[derive(Debug, Default)]
pub struct CbcJob<'a> {
    /// The IV of this buffer's chain.
    pub iv: [u8; BLOCK_LEN],
    /// The data; a multiple of [`BLOCK_LEN`] bytes (empty buffers are skipped).
    pub buf: &'a mut [u8],
}

/// An expanded Blowfish key schedule used for CBC and for single blocks.
#[derive(Clone)]
pub struct BlowfishCbc {
    bf: Blowfish,
}

impl BlowfishCbc {
    /// Expands `key` (4 to 56 bytes).
    ///
    /// # Errors
    /// [`KeyError::WrongLength`] outside 4..=56 bytes (`expected` is the maximum).
    pub fn new(key: &[u8]) -> Result<Self, KeyError> {
        let bf = Blowfish::new(key).ok_or(KeyError::WrongLength {
            expected: MAX_KEY_LEN,
            got: key.len(),
        })?;
        Ok(Self { bf })
    }

    /// Encrypts one block in place (ECB).
    #[inline]
    pub fn encrypt_block(&self, block: &mut [u8; BLOCK_LEN]) {
        *block = self.bf.encrypt(u64::from_be_bytes(*block)).to_be_bytes();
    }

    /// Decrypts one block in place (ECB).
    #[inline]
    pub fn decrypt_block(&self, block: &mut [u8; BLOCK_LEN]) {
        *block = self.bf.decrypt(u64::from_be_bytes(*block)).to_be_bytes();
    }

    /// Encrypts `N` independent blocks in place (ECB), their rounds interleaved.
    #[inline]
    pub fn encrypt_blocks<const N: usize>(&self, blocks: &mut [[u8; BLOCK_LEN]; N]) {
        let mut x: [u64; N] = core::array::from_fn(|j| u64::from_be_bytes(blocks[j]));
        self.bf.encrypt_lanes(&mut x);
        for (block, x) in blocks.iter_mut().zip(x) {
            *block = x.to_be_bytes();
        }
    }

    /// Decrypts `N` independent blocks in place (ECB), their rounds interleaved.
    #[inline]
    pub fn decrypt_blocks<const N: usize>(&self, blocks: &mut [[u8; BLOCK_LEN]; N]) {
        let mut x: [u64; N] = core::array::from_fn(|j| u64::from_be_bytes(blocks[j]));
        self.bf.decrypt_lanes(&mut x);
        for (block, x) in blocks.iter_mut().zip(x) {
            *block = x.to_be_bytes();
        }
    }

    /// CBC-encrypts `buf` in place with `iv` (one chain: one block at a time).
    ///
    /// # Errors
    /// [`CryptoError::BadBlockLength`] if `buf.len()` is not a multiple of [`BLOCK_LEN`]; `buf`
    /// is untouched then.
    pub fn encrypt_in_place(
        &self,
        iv: &[u8; BLOCK_LEN],
        buf: &mut [u8],
    ) -> Result<(), CryptoError> {
        let blocks = whole_blocks(buf)?;
        let mut chain = u64::from_be_bytes(*iv);
        for block in blocks {
            chain = self.bf.encrypt(u64::from_be_bytes(*block) ^ chain);
            *block = chain.to_be_bytes();
        }
        Ok(())
    }

    /// CBC-decrypts `buf` in place with `iv`, [`DECRYPT_LANES`] blocks at a time.
    ///
    /// # Errors
    /// [`CryptoError::BadBlockLength`] if `buf.len()` is not a multiple of [`BLOCK_LEN`]; `buf`
    /// is untouched then.
    pub fn decrypt_in_place(
        &self,
        iv: &[u8; BLOCK_LEN],
        buf: &mut [u8],
    ) -> Result<(), CryptoError> {
        self.decrypt_in_place_lanes::<DECRYPT_LANES>(iv, buf)
    }

    /// [`decrypt_in_place`](Self::decrypt_in_place) with `N` blocks side by side (1 to 8; for
    /// benchmarks and tests).
    ///
    /// # Errors
    /// As [`decrypt_in_place`](Self::decrypt_in_place).
    pub fn decrypt_in_place_lanes<const N: usize>(
        &self,
        iv: &[u8; BLOCK_LEN],
        buf: &mut [u8],
    ) -> Result<(), CryptoError> {
        const { assert!(N > 0, "at least one lane") };
        let blocks = whole_blocks(buf)?;
        let mut chain = u64::from_be_bytes(*iv);
        let (groups, mut tail) = blocks.as_chunks_mut::<N>();
        for group in groups {
            self.decrypt_group(group, &mut chain);
        }
        // Fewer than N blocks are left: take them in the widest groups that fit.
        while !tail.is_empty() {
            tail = match tail.len() {
                1 => self.decrypt_head::<1>(tail, &mut chain),
                2 | 3 => self.decrypt_head::<2>(tail, &mut chain),
                _ => self.decrypt_head::<4>(tail, &mut chain),
            };
        }
        Ok(())
    }

    /// CBC-encrypts several independent buffers in place, each with its own IV, interleaving
    /// [`ENCRYPT_LANES`] chains. The result is that of [`encrypt_in_place`](Self::encrypt_in_place)
    /// on each buffer.
    ///
    /// # Errors
    /// [`CryptoError::BadBlockLength`] if any buffer is not a multiple of [`BLOCK_LEN`]; nothing
    /// is modified then.
    pub fn encrypt_many_in_place(&self, jobs: &mut [CbcJob<'_>]) -> Result<(), CryptoError> {
        self.encrypt_many_in_place_lanes::<ENCRYPT_LANES>(jobs)
    }

    /// [`encrypt_many_in_place`](Self::encrypt_many_in_place) with up to `L` chains side by side
    /// (1 to 8; for benchmarks and tests).
    ///
    /// # Errors
    /// As [`encrypt_many_in_place`](Self::encrypt_many_in_place).
    pub fn encrypt_many_in_place_lanes<const L: usize>(
        &self,
        jobs: &mut [CbcJob<'_>],
    ) -> Result<(), CryptoError> {
        const { assert!(L > 0, "at least one lane") };
        if jobs.iter().any(|j| !j.buf.len().is_multiple_of(BLOCK_LEN)) {
            return Err(CryptoError::BadBlockLength);
        }
        let mut pending = jobs.iter_mut().filter(|j| !j.buf.is_empty());
        let mut lanes: [Chain<'_>; L] = core::array::from_fn(|_| Chain::default());
        loop {
            for lane in &mut lanes {
                if lane.blocks.is_empty()
                    && let Some(job) = pending.next()
                {
                    *lane = Chain {
                        blocks: job.buf.as_chunks_mut().0,
                        chain: u64::from_be_bytes(job.iv),
                    };
                }
            }
            // Busy lanes first, then run as many side by side as there are.
            lanes.sort_unstable_by_key(|lane| lane.blocks.is_empty());
            let busy = lanes.iter().filter(|lane| !lane.blocks.is_empty()).count();
            match busy {
                0 => return Ok(()),
                1 => self.encrypt_chains::<1>(&mut lanes),
                2 => self.encrypt_chains::<2>(&mut lanes),
                3 => self.encrypt_chains::<3>(&mut lanes),
                4 => self.encrypt_chains::<4>(&mut lanes),
                5 => self.encrypt_chains::<5>(&mut lanes),
                6 => self.encrypt_chains::<6>(&mut lanes),
                7 => self.encrypt_chains::<7>(&mut lanes),
                _ => self.encrypt_chains::<8>(&mut lanes),
            }
        }
    }

    /// The per-frame IV: `Blowfish_K(BIVN[0..8] XOR (0u32 || SN_be32))`.
    ///
    /// Distinct SNs give distinct IVs (Blowfish is a permutation) that cannot be predicted
    /// without the key.
    pub fn derive_iv(&self, bivn: &[u8; 20], seq: u32) -> [u8; BLOCK_LEN] {
        let mut iv = [0u8; BLOCK_LEN];
        iv.copy_from_slice(&bivn[..BLOCK_LEN]);
        let iv_word = u64::from_be_bytes(iv) ^ u64::from(seq);
        self.bf.encrypt(iv_word).to_be_bytes()
    }

    /// Decrypts one group of `N` consecutive CBC blocks; `chain` is the ciphertext block before
    /// the group and becomes the group's last ciphertext block.
    #[inline(always)]
    fn decrypt_group<const N: usize>(&self, group: &mut [[u8; BLOCK_LEN]; N], chain: &mut u64) {
        let ct: [u64; N] = core::array::from_fn(|j| u64::from_be_bytes(group[j]));
        let mut pt = ct;
        self.bf.decrypt_lanes(&mut pt);
        for j in 0..N {
            let prev = if j == 0 { *chain } else { ct[j - 1] };
            group[j] = (pt[j] ^ prev).to_be_bytes();
        }
        *chain = ct[N - 1];
    }

    /// Decrypts the first `N` blocks of `blocks` (which has at least `N`) and returns the rest.
    fn decrypt_head<'b, const N: usize>(
        &self,
        blocks: &'b mut [[u8; BLOCK_LEN]],
        chain: &mut u64,
    ) -> &'b mut [[u8; BLOCK_LEN]] {
        let Some((head, rest)) = blocks.split_first_chunk_mut::<N>() else {
            // Callers pass at least N blocks; an empty rest ends their loop either way.
            return &mut [];
        };
        self.decrypt_group(head, chain);
        rest
    }

    /// Runs the first `K` lanes (all busy) side by side until the shortest one is done.
    // `i` indexes K slices at once; an iterator per lane cannot be zipped for a generic K.
    #[allow(clippy::needless_range_loop)]
    fn encrypt_chains<const K: usize>(&self, lanes: &mut [Chain<'_>]) {
        let Some(lanes) = lanes.first_chunk_mut::<K>() else {
            return;
        };
        let steps = lanes.iter().map(|l| l.blocks.len()).min().unwrap_or(0);
        let mut chain: [u64; K] = core::array::from_fn(|j| lanes[j].chain);
        // Every lane cut to exactly `steps` blocks, so the loop below has no bounds checks (and
        // no branches between the lanes, which would let the compiler serialise them).
        let mut views = lanes.iter_mut();
        let blocks: [&mut [[u8; BLOCK_LEN]]; K] = core::array::from_fn(|_| {
            views
                .next()
                .and_then(|lane| lane.blocks.get_mut(..steps))
                .unwrap_or_default()
        });
        for i in 0..steps {
            let mut x: [u64; K] =
                core::array::from_fn(|j| u64::from_be_bytes(blocks[j][i]) ^ chain[j]);
            self.bf.encrypt_lanes(&mut x);
            for j in 0..K {
                blocks[j][i] = x[j].to_be_bytes();
            }
            chain = x;
        }
        for (lane, chain) in lanes.iter_mut().zip(chain) {
            lane.blocks = &mut core::mem::take(&mut lane.blocks)[steps..];
            lane.chain = chain;
        }
    }
}

/// One CBC chain in flight in [`BlowfishCbc::encrypt_many_in_place`]: the blocks still to
/// encrypt and the last ciphertext block (or the IV).
#[derive(Default)]
struct Chain<'b> {
    blocks: &'b mut [[u8; BLOCK_LEN]],
    chain: u64,
}

/// `buf` as whole blocks.
fn whole_blocks(buf: &mut [u8]) -> Result<&mut [[u8; BLOCK_LEN]], CryptoError> {
    match buf.as_chunks_mut() {
        (blocks, []) => Ok(blocks),
        _ => Err(CryptoError::BadBlockLength),
    }
}

impl core::fmt::Debug for BlowfishCbc {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("BlowfishCbc(..)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_length_limits() {
        assert!(BlowfishCbc::new(&[0; 3]).is_err());
        assert!(BlowfishCbc::new(&[0; 4]).is_ok());
        assert!(BlowfishCbc::new(&[0; 56]).is_ok());
        assert_eq!(
            BlowfishCbc::new(&[0; 57]).unwrap_err(),
            KeyError::WrongLength {
                expected: 56,
                got: 57
            }
        );
    }

    #[test]
    fn cbc_round_trip_and_chaining() {
        let c = BlowfishCbc::new(&[7; 32]).unwrap();
        let iv = [1, 2, 3, 4, 5, 6, 7, 8];
        let plain = [0x42u8; 64];
        let mut buf = plain;
        c.encrypt_in_place(&iv, &mut buf).unwrap();
        // Identical plaintext blocks must give distinct ciphertext blocks under CBC.
        assert_ne!(buf[..8], buf[8..16]);
        c.decrypt_in_place(&iv, &mut buf).unwrap();
        assert_eq!(buf, plain);
    }

    #[test]
    fn cbc_matches_manual_ecb_chain() {
        let c = BlowfishCbc::new(b"0123456789abcdef").unwrap();
        let iv = [9u8; 8];
        let mut buf: [u8; 16] = core::array::from_fn(|i| i as u8);
        let plain = buf;
        c.encrypt_in_place(&iv, &mut buf).unwrap();
        let mut b0: [u8; 8] = core::array::from_fn(|i| plain[i] ^ iv[i]);
        c.encrypt_block(&mut b0);
        let mut b1: [u8; 8] = core::array::from_fn(|i| plain[8 + i] ^ b0[i]);
        c.encrypt_block(&mut b1);
        assert_eq!(buf[..8], b0);
        assert_eq!(buf[8..], b1);
    }

    #[test]
    fn bad_block_length() {
        let c = BlowfishCbc::new(&[7; 32]).unwrap();
        let mut buf = [5u8; 9];
        assert_eq!(
            c.encrypt_in_place(&[0; 8], &mut buf),
            Err(CryptoError::BadBlockLength)
        );
        assert_eq!(
            c.decrypt_in_place(&[0; 8], &mut buf),
            Err(CryptoError::BadBlockLength)
        );
        assert_eq!(buf, [5u8; 9]);
        let mut empty: [u8; 0] = [];
        assert_eq!(c.encrypt_in_place(&[0; 8], &mut empty), Ok(()));
    }

    /// CBC over the RustCrypto block cipher, the reference for the property tests.
    fn reference_cbc(key: &[u8], iv: &[u8; 8], buf: &mut [u8], encrypt: bool) {
        use ::cipher::generic_array::GenericArray;
        use ::cipher::{BlockDecrypt, BlockEncrypt, KeyInit};
        let bf = <blowfish::Blowfish>::new_from_slice(key).unwrap();
        let mut chain = *iv;
        for block in buf.chunks_exact_mut(8) {
            let saved: [u8; 8] = block.try_into().unwrap();
            if encrypt {
                block.iter_mut().zip(chain).for_each(|(b, c)| *b ^= c);
                bf.encrypt_block(GenericArray::from_mut_slice(block));
                chain.copy_from_slice(block);
            } else {
                bf.decrypt_block(GenericArray::from_mut_slice(block));
                block.iter_mut().zip(chain).for_each(|(b, c)| *b ^= c);
                chain = saved;
            }
        }
    }

    /// Every decryption path (lane widths 1..=8 and the default) on `ct`, compared with `pt`.
    fn check_all_decrypt_paths(c: &BlowfishCbc, iv: &[u8; 8], ct: &[u8], pt: &[u8]) {
        macro_rules! each {
            ($($n:literal),*) => {$(
                let mut buf = ct.to_vec();
                c.decrypt_in_place_lanes::<$n>(iv, &mut buf).unwrap();
                assert_eq!(buf, pt, "{} lanes, {} bytes", $n, ct.len());
            )*};
        }
        each!(1, 2, 3, 4, 5, 8);
        let mut buf = ct.to_vec();
        c.decrypt_in_place(iv, &mut buf).unwrap();
        assert_eq!(buf, pt);
    }

    /// Every batched-encryption lane count on `bufs` (with their IVs), compared with `expected`.
    fn check_all_encrypt_many_paths(
        c: &BlowfishCbc,
        ivs: &[[u8; 8]],
        bufs: &[Vec<u8>],
        expected: &[Vec<u8>],
    ) {
        macro_rules! each {
            ($($n:literal),*) => {$(
                let mut out = bufs.to_vec();
                let mut jobs: Vec<CbcJob<'_>> = out
                    .iter_mut()
                    .zip(ivs)
                    .map(|(buf, iv)| CbcJob { iv: *iv, buf })
                    .collect();
                c.encrypt_many_in_place_lanes::<$n>(&mut jobs).unwrap();
                assert_eq!(out, expected, "{} lanes", $n);
            )*};
        }
        each!(1, 2, 3, 4, 5, 8);
        let mut out = bufs.to_vec();
        let mut jobs: Vec<CbcJob<'_>> = out
            .iter_mut()
            .zip(ivs)
            .map(|(buf, iv)| CbcJob { iv: *iv, buf })
            .collect();
        c.encrypt_many_in_place(&mut jobs).unwrap();
        assert_eq!(out, expected);
    }

    #[derive(serde::Deserialize)]
    struct VectorFile {
        #[serde(default)]
        ecb: Vec<Vector>,
        cbc: Vec<Vector>,
    }

    #[derive(serde::Deserialize)]
    struct Vector {
        key: String,
        #[serde(default)]
        iv: String,
        plaintext: String,
        ciphertext: String,
    }

    fn unhex(s: &str) -> Vec<u8> {
        hex::decode(s).unwrap()
    }

    #[test]
    fn eric_young_ecb_vectors_through_every_lane_width() {
        let file: VectorFile =
            serde_json::from_str(include_str!("../../../tests/vectors/blowfish_ecb.json")).unwrap();
        assert!(file.ecb.len() >= 30);
        for v in &file.ecb {
            let c = BlowfishCbc::new(&unhex(&v.key)).unwrap();
            let pt: [u8; 8] = unhex(&v.plaintext).try_into().unwrap();
            let ct: [u8; 8] = unhex(&v.ciphertext).try_into().unwrap();
            let mut one = pt;
            c.encrypt_block(&mut one);
            assert_eq!(one, ct, "key {}", v.key);
            // The vector in every lane of 2-, 4- and 8-lane groups.
            let mut two = [pt; 2];
            c.encrypt_blocks(&mut two);
            assert_eq!(two, [ct; 2]);
            c.decrypt_blocks(&mut two);
            assert_eq!(two, [pt; 2]);
            let mut four = [pt; 4];
            c.encrypt_blocks(&mut four);
            assert_eq!(four, [ct; 4]);
            c.decrypt_blocks(&mut four);
            assert_eq!(four, [pt; 4]);
            let mut eight = [pt; 8];
            c.encrypt_blocks(&mut eight);
            assert_eq!(eight, [ct; 8]);
            c.decrypt_blocks(&mut eight);
            assert_eq!(eight, [pt; 8]);
            // ECB = CBC with a zero IV on one block.
            check_all_decrypt_paths(&c, &[0; 8], &ct, &pt);
        }
    }

    #[test]
    fn cbc_vectors_through_every_path() {
        let mut vectors = Vec::new();
        for text in [
            include_str!("../../../tests/vectors/blowfish_ecb.json"),
            include_str!("../../../tests/vectors/blowfish_cbc.json"),
        ] {
            let file: VectorFile = serde_json::from_str(text).unwrap();
            vectors.extend(file.cbc);
        }
        assert!(vectors.len() >= 11);
        // (cipher, iv, plaintext, ciphertext) per vector.
        let mut by_key = Vec::new();
        for v in &vectors {
            let c = BlowfishCbc::new(&unhex(&v.key)).unwrap();
            let iv: [u8; 8] = unhex(&v.iv).try_into().unwrap();
            let (pt, ct) = (unhex(&v.plaintext), unhex(&v.ciphertext));
            let mut buf = pt.clone();
            c.encrypt_in_place(&iv, &mut buf).unwrap();
            assert_eq!(buf, ct, "key {}", v.key);
            check_all_decrypt_paths(&c, &iv, &ct, &pt);
            check_all_encrypt_many_paths(
                &c,
                &[iv],
                core::slice::from_ref(&pt),
                core::slice::from_ref(&ct),
            );
            by_key.push((c, iv, pt, ct));
        }
        // Several vectors under one key in one batch: the first vector's key, re-encrypting
        // the others' plaintexts; references from single-chain encryption (checked above).
        let (c, ..) = &by_key[0];
        let ivs: Vec<[u8; 8]> = by_key.iter().map(|v| v.1).collect();
        let pts: Vec<Vec<u8>> = by_key.iter().map(|v| v.2.clone()).collect();
        let expected: Vec<Vec<u8>> = pts
            .iter()
            .zip(&ivs)
            .map(|(pt, iv)| {
                let mut b = pt.clone();
                c.encrypt_in_place(iv, &mut b).unwrap();
                b
            })
            .collect();
        check_all_encrypt_many_paths(c, &ivs, &pts, &expected);
    }

    #[test]
    fn encrypt_many_rejects_bad_lengths_untouched() {
        let c = BlowfishCbc::new(&[7; 32]).unwrap();
        let mut a = [1u8; 16];
        let mut b = [2u8; 12];
        let mut jobs = [
            CbcJob {
                iv: [0; 8],
                buf: &mut a,
            },
            CbcJob {
                iv: [0; 8],
                buf: &mut b,
            },
        ];
        assert_eq!(
            c.encrypt_many_in_place(&mut jobs),
            Err(CryptoError::BadBlockLength)
        );
        assert_eq!((a, b), ([1u8; 16], [2u8; 12]));
        assert_eq!(c.encrypt_many_in_place(&mut []), Ok(()));
        let mut empty = [CbcJob::default(), CbcJob::default()];
        assert_eq!(c.encrypt_many_in_place(&mut empty), Ok(()));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

        #[test]
        fn prop_equals_rustcrypto(
            key in proptest::collection::vec(proptest::prelude::any::<u8>(), 4..=56),
            seeds in proptest::collection::vec(
                (proptest::prelude::any::<[u8; 8]>(), 0usize..60, proptest::prelude::any::<u8>()),
                1..12,
            ),
        ) {
            let c = BlowfishCbc::new(&key).unwrap();
            let ivs: Vec<[u8; 8]> = seeds.iter().map(|s| s.0).collect();
            let pts: Vec<Vec<u8>> = seeds
                .iter()
                .map(|&(_, blocks, fill)| {
                    (0..blocks * 8).map(|i| (i as u8).wrapping_mul(fill) ^ fill).collect()
                })
                .collect();
            let mut cts = pts.clone();
            for (ct, iv) in cts.iter_mut().zip(&ivs) {
                reference_cbc(&key, iv, ct, true);
                let mut single = ct.clone();
                reference_cbc(&key, iv, &mut single, false);
                proptest::prop_assert_eq!(&single, &pts[ivs.iter().position(|x| x == iv).unwrap()]);
            }
            for ((pt, ct), iv) in pts.iter().zip(&cts).zip(&ivs) {
                let mut buf = pt.clone();
                c.encrypt_in_place(iv, &mut buf).unwrap();
                proptest::prop_assert_eq!(&buf, ct);
                check_all_decrypt_paths(&c, iv, ct, pt);
            }
            check_all_encrypt_many_paths(&c, &ivs, &pts, &cts);
            // ECB lanes against the reference on the first blocks.
            let blocks: [[u8; 8]; 8] = core::array::from_fn(|j| {
                core::array::from_fn(|i| (j * 8 + i) as u8 ^ key[0])
            });
            let mut expected = blocks;
            for b in &mut expected {
                reference_cbc(&key, &[0; 8], b, true);
            }
            let mut ours = blocks;
            c.encrypt_blocks(&mut ours);
            proptest::prop_assert_eq!(ours, expected);
            c.decrypt_blocks(&mut ours);
            proptest::prop_assert_eq!(ours, blocks);
        }
    }
}
