//! HMAC-SHA1 (RFC 2104) with the key schedule done once and wiped on drop.
//!
//! [`HmacSha1Key`] stores only the SHA-1 chaining values after the inner and outer padded key
//! blocks (`H(K ^ ipad)` and `H(K ^ opad)` before finalisation). Each message starts from a copy
//! of them, so nothing about the key is processed per frame. The compression function is
//! `sha1::compress` (SHA-NI when the CPU has it). Unlike an `hmac::Hmac<Sha1>` prototype, these
//! states can be zeroized, and they are on drop. Tags are compared in constant time.

use sha1::digest::generic_array::GenericArray;
use sha1::{Digest, Sha1};
use subtle::ConstantTimeEq;
use zeroize::{Zeroize, ZeroizeOnDrop};

use crate::crypto::CryptoError;

/// Length of an HMAC-SHA1 tag (the full, untruncated output) in bytes.
pub const MAC_LEN: usize = 20;

/// SHA-1 block length in bytes.
const BLOCK: usize = 64;

/// SHA-1 initial chaining value (FIPS 180-4 §5.3.1).
const SHA1_IV: [u32; 5] = [
    0x6745_2301,
    0xefcd_ab89,
    0x98ba_dcfe,
    0x1032_5476,
    0xc3d2_e1f0,
];

/// An HMAC-SHA1 key with its padded key blocks already compressed.
#[derive(Clone, Zeroize, ZeroizeOnDrop)]
pub struct HmacSha1Key {
    /// Chaining value after `K ^ ipad`.
    inner: [u32; 5],
    /// Chaining value after `K ^ opad`.
    outer: [u32; 5],
}

impl HmacSha1Key {
    /// Keys HMAC-SHA1 with `key` (any length; keys over 64 bytes are hashed first, RFC 2104).
    pub fn new(key: &[u8]) -> Self {
        let mut block = [0u8; BLOCK];
        if key.len() > BLOCK {
            let mut digest: [u8; MAC_LEN] = Sha1::digest(key).into();
            block[..MAC_LEN].copy_from_slice(&digest);
            digest.zeroize();
        } else {
            block[..key.len()].copy_from_slice(key);
        }
        let mut inner = SHA1_IV;
        let mut outer = SHA1_IV;
        block.iter_mut().for_each(|b| *b ^= 0x36);
        compress(&mut inner, &block);
        block.iter_mut().for_each(|b| *b ^= 0x36 ^ 0x5c);
        compress(&mut outer, &block);
        block.zeroize();
        Self { inner, outer }
    }

    /// HMAC-SHA1 over the concatenation of `parts`.
    pub fn mac(&self, parts: &[&[u8]]) -> [u8; MAC_LEN] {
        let mut state = self.inner;
        let mut buf = [0u8; BLOCK];
        let mut buf_len = 0;
        // The inner hash has already absorbed one block (the padded key).
        let mut total = BLOCK as u64;
        for part in parts {
            total += part.len() as u64;
            let mut data = *part;
            if buf_len > 0 {
                let take = data.len().min(BLOCK - buf_len);
                buf[buf_len..buf_len + take].copy_from_slice(&data[..take]);
                buf_len += take;
                data = &data[take..];
                if buf_len < BLOCK {
                    continue;
                }
                compress(&mut state, &buf);
            }
            let mut blocks = data.chunks_exact(BLOCK);
            for block in &mut blocks {
                compress(&mut state, block);
            }
            let rest = blocks.remainder();
            buf[..rest.len()].copy_from_slice(rest);
            buf_len = rest.len();
        }
        // MD padding: 0x80, zeros, 64-bit big-endian bit length.
        buf[buf_len] = 0x80;
        buf[buf_len + 1..].fill(0);
        if buf_len + 1 > BLOCK - 8 {
            compress(&mut state, &buf);
            buf.fill(0);
        }
        buf[BLOCK - 8..].copy_from_slice(&(total * 8).to_be_bytes());
        compress(&mut state, &buf);

        // Outer hash: H(K ^ opad || inner digest), one block.
        buf.fill(0);
        for (chunk, word) in buf[..MAC_LEN].chunks_exact_mut(4).zip(state) {
            chunk.copy_from_slice(&word.to_be_bytes());
        }
        buf[MAC_LEN] = 0x80;
        buf[BLOCK - 8..].copy_from_slice(&(((BLOCK + MAC_LEN) as u64) * 8).to_be_bytes());
        let mut out_state = self.outer;
        compress(&mut out_state, &buf);

        let mut tag = [0u8; MAC_LEN];
        for (chunk, word) in tag.chunks_exact_mut(4).zip(out_state) {
            chunk.copy_from_slice(&word.to_be_bytes());
        }
        state.zeroize();
        buf.zeroize();
        tag
    }

    /// Checks `tag` against HMAC-SHA1 over the concatenation of `parts`, in constant time.
    ///
    /// # Errors
    /// [`CryptoError::BadLength`] if `tag` is not [`MAC_LEN`] bytes; [`CryptoError::BadIcv`] if it
    /// does not match.
    pub fn verify(&self, parts: &[&[u8]], tag: &[u8]) -> Result<(), CryptoError> {
        if tag.len() != MAC_LEN {
            return Err(CryptoError::BadLength);
        }
        let expected = self.mac(parts);
        if bool::from(expected.ct_eq(tag)) {
            Ok(())
        } else {
            Err(CryptoError::BadIcv)
        }
    }
}

/// One SHA-1 compression of a 64-byte block.
#[inline(always)]
fn compress(state: &mut [u32; 5], block: &[u8]) {
    // Callers pass exactly `BLOCK` bytes (whole buffers or `chunks_exact(BLOCK)` items);
    // `from_slice` would panic otherwise.
    sha1::compress(
        state,
        core::slice::from_ref(GenericArray::from_slice(block)),
    );
}

impl core::fmt::Debug for HmacSha1Key {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("HmacSha1Key(..)")
    }
}

#[cfg(test)]
mod tests {
    use hmac::{Hmac, Mac};

    use super::*;

    #[test]
    fn parts_equal_concatenation() {
        let k = HmacSha1Key::new(b"key");
        assert_eq!(k.mac(&[b"ab", b"", b"cd"]), k.mac(&[b"abcd"]));
    }

    #[test]
    fn matches_hmac_crate_across_lengths_and_splits() {
        // Every message length around the padding and block boundaries, split three ways.
        let data: Vec<u8> = (0..300u32).map(|i| (i * 31 + 7) as u8).collect();
        for key_len in [0, 1, 20, 63, 64, 65, 100] {
            let key = &data[..key_len];
            let k = HmacSha1Key::new(key);
            for len in 0..260 {
                let msg = &data[..len];
                let mut reference = <Hmac<Sha1> as Mac>::new_from_slice(key).unwrap();
                reference.update(msg);
                let expected: [u8; MAC_LEN] = reference.finalize().into_bytes().into();
                assert_eq!(k.mac(&[msg]), expected, "key {key_len} len {len}");
                let (a, b) = msg.split_at(len / 3);
                let (b, c) = b.split_at(b.len() / 2);
                assert_eq!(k.mac(&[a, b, c]), expected, "key {key_len} len {len} split");
            }
        }
    }

    #[test]
    fn verify_rejects_wrong_length_and_value() {
        let k = HmacSha1Key::new(b"key");
        let mut t = k.mac(&[b"msg"]);
        assert_eq!(k.verify(&[b"msg"], &t), Ok(()));
        assert_eq!(k.verify(&[b"msg"], &t[..19]), Err(CryptoError::BadLength));
        t[0] ^= 1;
        assert_eq!(k.verify(&[b"msg"], &t), Err(CryptoError::BadIcv));
    }

    #[test]
    fn debug_hides_key() {
        let s = format!("{:?}", HmacSha1Key::new(b"secret"));
        assert_eq!(s, "HmacSha1Key(..)");
    }
}
