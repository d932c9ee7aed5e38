//! HMAC-SHA1 (RFC 2104) with the key schedule done once.
//!
//! [`HmacSha1Key`] keeps an `Hmac<Sha1>` whose inner and outer pads are already absorbed and
//! clones it per message, so no per-frame key processing happens. Tags are compared in constant
//! time.

use hmac::{Hmac, Mac};
use sha1::Sha1;
use subtle::ConstantTimeEq;

use crate::crypto::CryptoError;

/// Length of an HMAC-SHA1 tag (the full, untruncated output) in bytes.
pub const MAC_LEN: usize = 20;

/// An HMAC-SHA1 key with its pads precomputed.
///
/// Limitation: `hmac` 0.12 offers no way to zeroize its precomputed state, so this type is not
/// `ZeroizeOnDrop`; the raw key is never stored.
#[derive(Clone)]
pub struct HmacSha1Key {
    proto: Hmac<Sha1>,
}

impl HmacSha1Key {
    /// Keys HMAC-SHA1 with `key` (any length; keys over 64 bytes are hashed first, RFC 2104).
    pub fn new(key: &[u8]) -> Self {
        // HMAC accepts keys of any length, so `new_from_slice` cannot fail.
        let proto = <Hmac<Sha1> as Mac>::new_from_slice(key).unwrap_or_else(|_| unreachable!());
        Self { proto }
    }

    /// HMAC-SHA1 over the concatenation of `parts`.
    pub fn mac(&self, parts: &[&[u8]]) -> [u8; MAC_LEN] {
        let mut m = self.proto.clone();
        for part in parts {
            m.update(part);
        }
        m.finalize().into_bytes().into()
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
    use super::*;

    #[test]
    fn parts_equal_concatenation() {
        let k = HmacSha1Key::new(b"key");
        assert_eq!(k.mac(&[b"ab", b"", b"cd"]), k.mac(&[b"abcd"]));
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
