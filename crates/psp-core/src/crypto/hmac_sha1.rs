//! HMAC-SHA1 (RFC 2104) with the key schedule done once and wiped on drop: [`HmacState`] over
//! `sha1::compress` (SHA-NI when the CPU has it). Tags are compared in constant time.

use sha1::digest::generic_array::GenericArray;
use subtle::ConstantTimeEq;

use super::hmac_md::{BLOCK, Compress, HmacState};
use crate::crypto::CryptoError;

/// Length of an HMAC-SHA1 tag (the full, untruncated output) in bytes.
pub const MAC_LEN: usize = 20;

/// SHA-1 as a compression function.
pub(crate) struct Sha1;

impl Compress<5> for Sha1 {
    /// FIPS 180-4 §5.3.1.
    const IV: [u32; 5] = [
        0x6745_2301,
        0xefcd_ab89,
        0x98ba_dcfe,
        0x1032_5476,
        0xc3d2_e1f0,
    ];

    #[inline(always)]
    fn compress(state: &mut [u32; 5], block: &[u8]) {
        // Callers pass exactly `BLOCK` bytes (whole buffers or `chunks_exact(BLOCK)` items);
        // `from_slice` would panic otherwise.
        debug_assert_eq!(block.len(), BLOCK);
        sha1::compress(
            state,
            core::slice::from_ref(GenericArray::from_slice(block)),
        );
    }
}

/// An HMAC-SHA1 key with its padded key blocks already compressed.
#[derive(Clone)]
pub struct HmacSha1Key(HmacState<5>);

impl HmacSha1Key {
    /// Keys HMAC-SHA1 with `key` (any length; keys over 64 bytes are hashed first, RFC 2104).
    pub fn new(key: &[u8]) -> Self {
        Self(HmacState::new::<Sha1>(key))
    }

    /// HMAC-SHA1 over the concatenation of `parts`.
    #[inline]
    pub fn mac(&self, parts: &[&[u8]]) -> [u8; MAC_LEN] {
        let mut tag = [0u8; MAC_LEN];
        self.0.mac::<Sha1>(parts, &mut tag);
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

impl core::fmt::Debug for HmacSha1Key {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("HmacSha1Key(..)")
    }
}

#[cfg(test)]
mod tests {
    use hmac::{Hmac, Mac};

    use super::*;

    type Sha1 = sha1::Sha1;

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
