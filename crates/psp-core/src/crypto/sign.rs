//! Ed25519 signatures (RFC 8032) for PSP's digital-signature flag, through ring (feature
//! `ring`, the default) or ed25519-dalek (feature `rustcrypto`); with both on, ring. Ed25519 is
//! deterministic, so both give the same signature bytes.
//!
//! ring hashes the message twice, so it needs it contiguous: [`SigningKey::sign`] and
//! [`VerifyingKey::verify`] take one slice (in a frame, `clear || section` already is one).

use crate::crypto::backend::selected;
use crate::crypto::{CryptoError, KeyError};

/// Length of an Ed25519 signature in bytes.
pub const SIGNATURE_LEN: usize = 64;
/// Length of an Ed25519 seed (private key) in bytes.
pub const SEED_LEN: usize = 32;
/// Length of an Ed25519 public key in bytes.
pub const PUBLIC_KEY_LEN: usize = 32;

/// An Ed25519 signing key.
///
/// Limitation: with the ring backend the expanded private key cannot be wiped on drop (ring
/// exposes no way to); with RustCrypto the secret key is. The seed is not kept.
pub struct SigningKey {
    pair: selected::Ed25519,
    public: VerifyingKey,
}

impl SigningKey {
    /// The key pair for a 32-byte RFC 8032 seed.
    ///
    /// # Errors
    /// [`KeyError::Rejected`] if the library refuses the seed.
    pub fn from_seed(seed: &[u8; SEED_LEN]) -> Result<Self, KeyError> {
        let pair = selected::Ed25519::from_seed(seed)?;
        let public = VerifyingKey(pair.public_key());
        Ok(Self { pair, public })
    }

    /// The matching public key.
    pub fn public_key(&self) -> VerifyingKey {
        self.public
    }

    /// Signs `msg` into `out`.
    pub fn sign(&self, msg: &[u8], out: &mut [u8; SIGNATURE_LEN]) {
        *out = self.pair.sign(msg);
    }
}

impl core::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SigningKey")
            .field("public", &self.public)
            .finish_non_exhaustive()
    }
}

/// An Ed25519 public key (32 bytes, RFC 8032 encoding).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct VerifyingKey([u8; PUBLIC_KEY_LEN]);

impl VerifyingKey {
    /// Wraps encoded public key bytes (checked only when verifying).
    pub fn from_bytes(bytes: [u8; PUBLIC_KEY_LEN]) -> Self {
        Self(bytes)
    }

    /// The encoded public key.
    pub fn as_bytes(&self) -> &[u8; PUBLIC_KEY_LEN] {
        &self.0
    }

    /// Verifies `sig` over `msg`.
    ///
    /// # Errors
    /// [`CryptoError::BadLength`] if `sig` is not [`SIGNATURE_LEN`] bytes; [`CryptoError::BadIcv`]
    /// if the signature (or the public key) is invalid.
    pub fn verify(&self, msg: &[u8], sig: &[u8]) -> Result<(), CryptoError> {
        let sig: &[u8; SIGNATURE_LEN] = sig.try_into().map_err(|_| CryptoError::BadLength)?;
        selected::Ed25519::verify(&self.0, msg, sig)
    }
}

/// The label that starts the digest a PSP frame's signature covers.
const DIGEST_LABEL: &[u8] = b"psp-frame-sig-v1";

/// What a PSP frame's Ed25519 signature signs: SHA-256(`"psp-frame-sig-v1"` || `signed_part`),
/// where `signed_part` is the clear part, the section (ciphertext) and the suite ICV. Signing a
/// digest lets a receiver hash the ciphertext, check the ICV (decrypting in place) and only then
/// pay for the signature check, without copying the frame.
pub fn signed_digest(signed_part: &[u8]) -> [u8; 32] {
    use sha2::Digest as _;
    let mut h = sha2::Sha256::new();
    h.update(DIGEST_LABEL);
    h.update(signed_part);
    h.finalize().into()
}

/// The Ed25519 implementations compiled in, side by side, for benches and cross-backend tests:
/// `from_seed`, `public_key`, `sign(msg) -> signature` and `verify(public, msg, &signature)`.
/// [`SigningKey`] and [`VerifyingKey`] are the API.
#[doc(hidden)]
pub mod backend {
    #[cfg(feature = "ring")]
    pub use crate::crypto::backend::ring::Ed25519 as Ring;
    #[cfg(feature = "rustcrypto")]
    pub use crate::crypto::backend::rust_crypto::Ed25519 as RustCrypto;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sign_verify_and_reject() {
        let k = SigningKey::from_seed(&[9; 32]).unwrap();
        let mut sig = [0u8; SIGNATURE_LEN];
        k.sign(b"frame", &mut sig);
        let vk = k.public_key();
        assert_eq!(vk.verify(b"frame", &sig), Ok(()));
        assert_eq!(vk.verify(b"frame!", &sig), Err(CryptoError::BadIcv));
        assert_eq!(vk.verify(b"frame", &sig[..63]), Err(CryptoError::BadLength));
        sig[10] ^= 4;
        assert_eq!(vk.verify(b"frame", &sig), Err(CryptoError::BadIcv));
        let other = SigningKey::from_seed(&[8; 32]).unwrap().public_key();
        sig[10] ^= 4;
        assert_eq!(other.verify(b"frame", &sig), Err(CryptoError::BadIcv));
    }

    #[test]
    fn debug_shows_only_public() {
        let k = SigningKey::from_seed(&[9; 32]).unwrap();
        assert!(format!("{k:?}").starts_with("SigningKey { public: VerifyingKey("));
    }
}
