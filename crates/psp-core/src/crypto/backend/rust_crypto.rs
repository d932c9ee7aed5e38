//! The RustCrypto backend: `aes-gcm` 0.10, `chacha20poly1305` 0.10 and `ed25519-dalek` 2, pure
//! Rust with default features off, so nothing here links `alloc`. Selected by the `rustcrypto`
//! feature when `ring` is off.
//!
//! The `aes` and `polyval` crates pick AES-NI and CLMUL at run time when the CPU has them (else
//! constant-time bitsliced software); `chacha20` and `poly1305` pick AVX2 likewise;
//! `curve25519-dalek` picks its AVX2 field arithmetic. Both AEAD crates compare tags in constant
//! time (`subtle`) and decrypt only after the tag verified.
//!
//! Wiped on drop: the AES round keys (`aes/zeroize`), the ChaCha20-Poly1305 key and the Ed25519
//! secret key (`ed25519-dalek/zeroize`). Not wiped: the GHASH subkey inside `polyval` 0.6's
//! CPU-dispatching backend (it drops its state without wiping; an upstream limitation).

use aes_gcm::aead::{AeadInPlace, KeyInit};
use aes_gcm::{Aes128Gcm, Aes256Gcm};
use chacha20poly1305::ChaCha20Poly1305;
use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};

use crate::crypto::aead::{NONCE_LEN, TAG_LEN};
use crate::crypto::sign::{PUBLIC_KEY_LEN, SEED_LEN, SIGNATURE_LEN};
use crate::crypto::{CryptoError, KeyError, SuiteId};

/// A RustCrypto AEAD key (AES-128-GCM, AES-256-GCM or ChaCha20-Poly1305).
pub struct Aead(Cipher);

// The AES variants hold both key-schedule layouts (AES-NI and software) and are about 1.5 KiB;
// a key is built once per session and never moved on the hot path, and there is no heap to box
// it on.
#[allow(clippy::large_enum_variant)]
enum Cipher {
    Aes128Gcm(Aes128Gcm),
    Aes256Gcm(Aes256Gcm),
    ChaCha20Poly1305(ChaCha20Poly1305),
}

impl Aead {
    /// The key for the AEAD `suite`.
    ///
    /// # Errors
    /// [`KeyError::Rejected`] if `suite` is not an AEAD suite or the key has the wrong length
    /// ([`super::super::aead::AeadKey::new`] reports the latter as `WrongLength`).
    pub fn new(suite: SuiteId, key: &[u8]) -> Result<Self, KeyError> {
        let cipher = match suite {
            SuiteId::Aes128Gcm => Aes128Gcm::new_from_slice(key).map(Cipher::Aes128Gcm),
            SuiteId::Aes256Gcm => Aes256Gcm::new_from_slice(key).map(Cipher::Aes256Gcm),
            SuiteId::ChaCha20Poly1305 => {
                ChaCha20Poly1305::new_from_slice(key).map(Cipher::ChaCha20Poly1305)
            }
            _ => return Err(KeyError::Rejected),
        };
        cipher.map(Self).map_err(|_| KeyError::Rejected)
    }

    /// Encrypts `in_out` in place and returns the tag.
    ///
    /// # Errors
    /// [`CryptoError::Internal`] if the library refuses (input too long).
    pub fn seal(
        &self,
        nonce: &[u8; NONCE_LEN],
        aad: &[u8],
        in_out: &mut [u8],
    ) -> Result<[u8; TAG_LEN], CryptoError> {
        let nonce = nonce.into();
        let tag = match &self.0 {
            Cipher::Aes128Gcm(c) => c.encrypt_in_place_detached(nonce, aad, in_out),
            Cipher::Aes256Gcm(c) => c.encrypt_in_place_detached(nonce, aad, in_out),
            Cipher::ChaCha20Poly1305(c) => c.encrypt_in_place_detached(nonce, aad, in_out),
        };
        tag.map(Into::into).map_err(|_| CryptoError::Internal)
    }

    /// Checks `tag` (in constant time) and, only if it verifies, decrypts `in_out` in place.
    ///
    /// # Errors
    /// [`CryptoError::BadIcv`] if authentication fails; `in_out` still holds the ciphertext.
    pub fn open(
        &self,
        nonce: &[u8; NONCE_LEN],
        aad: &[u8],
        in_out: &mut [u8],
        tag: &[u8; TAG_LEN],
    ) -> Result<(), CryptoError> {
        let (nonce, tag) = (nonce.into(), tag.into());
        let opened = match &self.0 {
            Cipher::Aes128Gcm(c) => c.decrypt_in_place_detached(nonce, aad, in_out, tag),
            Cipher::Aes256Gcm(c) => c.decrypt_in_place_detached(nonce, aad, in_out, tag),
            Cipher::ChaCha20Poly1305(c) => c.decrypt_in_place_detached(nonce, aad, in_out, tag),
        };
        opened.map_err(|_| CryptoError::BadIcv)
    }
}

/// An ed25519-dalek key pair (the secret key is wiped on drop).
pub struct Ed25519(SigningKey);

impl Ed25519 {
    /// The key pair for an RFC 8032 seed.
    ///
    /// # Errors
    /// Never: every 32-byte seed is a valid key. The `Result` matches the ring backend.
    pub fn from_seed(seed: &[u8; SEED_LEN]) -> Result<Self, KeyError> {
        Ok(Self(SigningKey::from_bytes(seed)))
    }

    /// The encoded public key.
    pub fn public_key(&self) -> [u8; PUBLIC_KEY_LEN] {
        self.0.verifying_key().to_bytes()
    }

    /// The signature of `msg`.
    pub fn sign(&self, msg: &[u8]) -> [u8; SIGNATURE_LEN] {
        self.0.sign(msg).to_bytes()
    }

    /// Verifies `sig` over `msg` under the encoded public key `public`: RFC 8032's cofactorless
    /// equation with a canonical `S`, as ring checks it (not dalek's `verify_strict`, which also
    /// refuses small-order keys and would make the backends disagree).
    ///
    /// # Errors
    /// [`CryptoError::BadIcv`] if the signature or the public key is invalid.
    pub fn verify(
        public: &[u8; PUBLIC_KEY_LEN],
        msg: &[u8],
        sig: &[u8; SIGNATURE_LEN],
    ) -> Result<(), CryptoError> {
        let key = VerifyingKey::from_bytes(public).map_err(|_| CryptoError::BadIcv)?;
        key.verify(msg, &Signature::from_bytes(sig))
            .map_err(|_| CryptoError::BadIcv)
    }
}
