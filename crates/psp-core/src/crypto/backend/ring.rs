//! The ring backend (ring 0.17: assembly AES-GCM with AES-NI/CLMUL/AVX, ChaCha20-Poly1305 and
//! Ed25519). Selected by the `ring` feature, the default.
//!
//! ring links `alloc` (its test utilities), so a freestanding binary using this backend must
//! name a global allocator even though nothing here allocates. ring offers no way to wipe its
//! key schedules on drop.

use ring::aead::{self, Aad, LessSafeKey, Nonce, Tag, UnboundKey};
use ring::signature::{self, Ed25519KeyPair, KeyPair, UnparsedPublicKey};

use crate::crypto::aead::{NONCE_LEN, TAG_LEN};
use crate::crypto::sign::{PUBLIC_KEY_LEN, SEED_LEN, SIGNATURE_LEN};
use crate::crypto::{CryptoError, KeyError, SuiteId};

/// A ring AEAD key (AES-128-GCM, AES-256-GCM or ChaCha20-Poly1305).
pub struct Aead(LessSafeKey);

impl Aead {
    /// The key for the AEAD `suite`.
    ///
    /// # Errors
    /// [`KeyError::Rejected`] if `suite` is not an AEAD suite or ring refuses the key (a wrong
    /// length included: [`super::super::aead::AeadKey::new`] reports that as `WrongLength`).
    pub fn new(suite: SuiteId, key: &[u8]) -> Result<Self, KeyError> {
        let alg = match suite {
            SuiteId::Aes128Gcm => &aead::AES_128_GCM,
            SuiteId::Aes256Gcm => &aead::AES_256_GCM,
            SuiteId::ChaCha20Poly1305 => &aead::CHACHA20_POLY1305,
            _ => return Err(KeyError::Rejected),
        };
        let unbound = UnboundKey::new(alg, key).map_err(|_| KeyError::Rejected)?;
        Ok(Self(LessSafeKey::new(unbound)))
    }

    /// Encrypts `in_out` in place and returns the tag.
    ///
    /// # Errors
    /// [`CryptoError::Internal`] if ring refuses (input too long).
    pub fn seal(
        &self,
        nonce: &[u8; NONCE_LEN],
        aad: &[u8],
        in_out: &mut [u8],
    ) -> Result<[u8; TAG_LEN], CryptoError> {
        let tag = self
            .0
            .seal_in_place_separate_tag(
                Nonce::assume_unique_for_key(*nonce),
                Aad::from(aad),
                in_out,
            )
            .map_err(|_| CryptoError::Internal)?;
        let mut out = [0u8; TAG_LEN];
        out.copy_from_slice(tag.as_ref());
        Ok(out)
    }

    /// Checks `tag` (in constant time) and decrypts `in_out` in place.
    ///
    /// # Errors
    /// [`CryptoError::BadIcv`] if authentication fails; ring has then zeroed `in_out`.
    pub fn open(
        &self,
        nonce: &[u8; NONCE_LEN],
        aad: &[u8],
        in_out: &mut [u8],
        tag: &[u8; TAG_LEN],
    ) -> Result<(), CryptoError> {
        self.0
            .open_in_place_separate_tag(
                Nonce::assume_unique_for_key(*nonce),
                Aad::from(aad),
                Tag::from(*tag),
                in_out,
                0..,
            )
            .map(|_| ())
            .map_err(|_| CryptoError::BadIcv)
    }
}

/// A ring Ed25519 key pair.
pub struct Ed25519 {
    pair: Ed25519KeyPair,
    public: [u8; PUBLIC_KEY_LEN],
}

impl Ed25519 {
    /// The key pair for an RFC 8032 seed.
    ///
    /// # Errors
    /// [`KeyError::Rejected`] if ring refuses the seed.
    pub fn from_seed(seed: &[u8; SEED_LEN]) -> Result<Self, KeyError> {
        let pair = Ed25519KeyPair::from_seed_unchecked(seed).map_err(|_| KeyError::Rejected)?;
        let public = pair
            .public_key()
            .as_ref()
            .try_into()
            .map_err(|_| KeyError::Rejected)?;
        Ok(Self { pair, public })
    }

    /// The encoded public key.
    pub fn public_key(&self) -> [u8; PUBLIC_KEY_LEN] {
        self.public
    }

    /// The signature of `msg`.
    pub fn sign(&self, msg: &[u8]) -> [u8; SIGNATURE_LEN] {
        let mut out = [0u8; SIGNATURE_LEN];
        out.copy_from_slice(self.pair.sign(msg).as_ref());
        out
    }

    /// Verifies `sig` over `msg` under the encoded public key `public`.
    ///
    /// # Errors
    /// [`CryptoError::BadIcv`] if the signature or the public key is invalid.
    pub fn verify(
        public: &[u8; PUBLIC_KEY_LEN],
        msg: &[u8],
        sig: &[u8; SIGNATURE_LEN],
    ) -> Result<(), CryptoError> {
        UnparsedPublicKey::new(&signature::ED25519, public)
            .verify(msg, sig)
            .map_err(|_| CryptoError::BadIcv)
    }
}
