//! AEAD suites through ring: AES-128-GCM, AES-256-GCM, ChaCha20-Poly1305.
//!
//! The tag is kept apart from the ciphertext (it is the PSP ICV), so sealing and opening work in
//! place on the section with no allocation. On a failed open ring zeroes the buffer before
//! returning, so no unauthenticated plaintext is left behind.

use ring::aead::{self, Aad, LessSafeKey, Nonce, Tag, UnboundKey};

use crate::crypto::{CryptoError, KeyError, SuiteId};

/// Length of an AEAD tag (the ICV) in bytes.
pub const TAG_LEN: usize = 16;
/// Length of an AEAD nonce in bytes.
pub const NONCE_LEN: usize = 12;

/// A ring AEAD key for one of the AEAD suites.
///
/// Limitation: ring exposes no way to zeroize its key schedule; the raw key is never stored.
pub struct AeadKey {
    suite: SuiteId,
    key: LessSafeKey,
}

impl AeadKey {
    /// Builds the key for an AEAD `suite` ([`SuiteId::is_aead`]).
    ///
    /// # Errors
    /// [`KeyError::WrongLength`] if `key` is not `suite.key_len()` bytes; [`KeyError::Rejected`]
    /// if `suite` is not an AEAD suite or ring refuses the key.
    pub fn new(suite: SuiteId, key: &[u8]) -> Result<Self, KeyError> {
        let alg = match suite {
            SuiteId::Aes128Gcm => &aead::AES_128_GCM,
            SuiteId::Aes256Gcm => &aead::AES_256_GCM,
            SuiteId::ChaCha20Poly1305 => &aead::CHACHA20_POLY1305,
            _ => return Err(KeyError::Rejected),
        };
        if key.len() != suite.key_len() {
            return Err(KeyError::WrongLength {
                expected: suite.key_len(),
                got: key.len(),
            });
        }
        let unbound = UnboundKey::new(alg, key).map_err(|_| KeyError::Rejected)?;
        Ok(Self {
            suite,
            key: LessSafeKey::new(unbound),
        })
    }

    /// The suite this key is for.
    pub fn suite(&self) -> SuiteId {
        self.suite
    }

    /// Encrypts `in_out` in place and writes the tag into `tag`.
    ///
    /// # Errors
    /// [`CryptoError::BadLength`] if `tag` is not [`TAG_LEN`] bytes; [`CryptoError::Internal`]
    /// if ring refuses (input too long).
    pub fn seal_in_place(
        &self,
        nonce: &[u8; NONCE_LEN],
        aad: &[u8],
        in_out: &mut [u8],
        tag: &mut [u8],
    ) -> Result<(), CryptoError> {
        if tag.len() != TAG_LEN {
            return Err(CryptoError::BadLength);
        }
        let t = self
            .key
            .seal_in_place_separate_tag(
                Nonce::assume_unique_for_key(*nonce),
                Aad::from(aad),
                in_out,
            )
            .map_err(|_| CryptoError::Internal)?;
        tag.copy_from_slice(t.as_ref());
        Ok(())
    }

    /// Checks `tag` and decrypts `in_out` in place. On failure `in_out` is zeroed (by ring).
    ///
    /// # Errors
    /// [`CryptoError::BadLength`] if `tag` is not [`TAG_LEN`] bytes (`in_out` untouched);
    /// [`CryptoError::BadIcv`] if authentication fails.
    pub fn open_in_place(
        &self,
        nonce: &[u8; NONCE_LEN],
        aad: &[u8],
        in_out: &mut [u8],
        tag: &[u8],
    ) -> Result<(), CryptoError> {
        let tag = Tag::try_from(tag).map_err(|_| CryptoError::BadLength)?;
        self.key
            .open_in_place_separate_tag(
                Nonce::assume_unique_for_key(*nonce),
                Aad::from(aad),
                tag,
                in_out,
                0..,
            )
            .map(|_| ())
            .map_err(|_| CryptoError::BadIcv)
    }
}

impl core::fmt::Debug for AeadKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "AeadKey({})", self.suite.name())
    }
}

/// The per-frame nonce: `BIVN[0..12]` with its last 4 bytes XOR `SN_be32`.
///
/// Unique per SN under one key because the SN never wraps (the session re-keys first).
pub fn derive_nonce(bivn: &[u8; 20], seq: u32) -> [u8; NONCE_LEN] {
    let mut nonce = [0u8; NONCE_LEN];
    nonce.copy_from_slice(&bivn[..NONCE_LEN]);
    for (n, s) in nonce[NONCE_LEN - 4..].iter_mut().zip(seq.to_be_bytes()) {
        *n ^= s;
    }
    nonce
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_non_aead_and_wrong_length() {
        assert_eq!(
            AeadKey::new(SuiteId::BfCbcHmacSha1, &[0; 32]).unwrap_err(),
            KeyError::Rejected
        );
        assert_eq!(
            AeadKey::new(SuiteId::Aes128Gcm, &[0; 32]).unwrap_err(),
            KeyError::WrongLength {
                expected: 16,
                got: 32
            }
        );
    }

    #[test]
    fn nonce_xors_last_four_bytes() {
        let bivn: [u8; 20] = core::array::from_fn(|i| i as u8);
        let n = derive_nonce(&bivn, 0x0102_0304);
        assert_eq!(n[..8], bivn[..8]);
        assert_eq!(n[8..], [8 ^ 1, 9 ^ 2, 10 ^ 3, 11 ^ 4]);
        assert_eq!(derive_nonce(&bivn, 0)[..], bivn[..12]);
    }

    #[test]
    fn failed_open_zeroes_buffer() {
        let k = AeadKey::new(SuiteId::ChaCha20Poly1305, &[3; 32]).unwrap();
        let mut buf = *b"attack at dawn!!";
        let mut tag = [0u8; TAG_LEN];
        k.seal_in_place(&[0; 12], b"hdr", &mut buf, &mut tag)
            .unwrap();
        tag[3] ^= 0x80;
        assert_eq!(
            k.open_in_place(&[0; 12], b"hdr", &mut buf, &tag),
            Err(CryptoError::BadIcv)
        );
        assert_eq!(buf, [0u8; 16]);
    }
}
