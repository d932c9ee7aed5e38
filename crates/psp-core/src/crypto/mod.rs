//! Cipher suites, keys, the ICV and signatures of PSP (thesis §4.1–§4.3).
//!
//! A [`SuiteKey`] holds the keyed state of one suite (expanded Blowfish schedule, ring AEAD key,
//! HMAC-SHA1 prototype, Base IV Number). It seals and opens the *section* of a frame in place and
//! writes or checks the ICV over `clear || section`; framing, sequence numbers and replay checks
//! belong to [`crate::protect`]. The IV and nonce derivations are documented in `docs/SUITES.md`.
//!
//! The raw primitives underneath (Blowfish, HMAC-SHA1, the AEAD wrapper) are private here; benches
//! and fuzz targets reach them through [`crate::primitives`].
//!
//! This module does not allocate and does no per-frame key expansion. It does not pick suites or
//! refuse [`SuiteId::None`]; that policy belongs to the session.

mod backend;
mod scramble_hmac;
mod suite;

pub(crate) mod aead;
pub(crate) mod blowfish;
mod hmac_md;
pub(crate) mod hmac_sha1;
pub(crate) mod hmac_sha256;
pub mod sign;

pub use sign::{SigningKey, VerifyingKey};
pub use suite::{SectionJob, SuiteKey};

/// Cipher suite identifiers. Names are the config/CLI spellings.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SuiteId {
    /// `none`: no encryption, no ICV (the thesis' noENC-noHMAC measurement mode).
    None,
    /// `null-hmac-sha1`: integrity only (ENC flag 0), ICV = HMAC-SHA1.
    NullHmacSha1,
    /// `bf-cbc-hmac-sha1`: the thesis default; Blowfish-CBC + HMAC-SHA1 with one key for both.
    BfCbcHmacSha1,
    /// `aes128-gcm` (ring): the 16-byte tag is the ICV.
    Aes128Gcm,
    /// `aes256-gcm` (ring): the 16-byte tag is the ICV.
    Aes256Gcm,
    /// `chacha20-poly1305` (ring): the 16-byte tag is the ICV.
    ChaCha20Poly1305,
    /// `scramble-hmac-sha1`: per-frame byte scrambler + HMAC-SHA1 (obfuscation, not encryption).
    ScrambleHmacSha1,
}

impl SuiteId {
    /// Every suite, in declaration order.
    pub const ALL: &'static [Self] = &[
        Self::None,
        Self::NullHmacSha1,
        Self::BfCbcHmacSha1,
        Self::Aes128Gcm,
        Self::Aes256Gcm,
        Self::ChaCha20Poly1305,
        Self::ScrambleHmacSha1,
    ];

    /// The config/CLI spelling.
    pub fn name(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::NullHmacSha1 => "null-hmac-sha1",
            Self::BfCbcHmacSha1 => "bf-cbc-hmac-sha1",
            Self::Aes128Gcm => "aes128-gcm",
            Self::Aes256Gcm => "aes256-gcm",
            Self::ChaCha20Poly1305 => "chacha20-poly1305",
            Self::ScrambleHmacSha1 => "scramble-hmac-sha1",
        }
    }

    /// The suite whose [`name`](Self::name) is `s` (exact, case-sensitive).
    pub fn from_name(s: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|id| id.name() == s)
    }

    /// Required key length in bytes: 16 for `aes128-gcm`, 32 for every other suite.
    ///
    /// [`SuiteId::None`] reports 0 and accepts (and ignores) a key of any length.
    pub fn key_len(self) -> usize {
        match self {
            Self::None => 0,
            Self::Aes128Gcm => 16,
            _ => 32,
        }
    }

    /// Length of the ICV (HMAC-SHA1 output or AEAD tag) in bytes.
    pub fn icv_len(self) -> usize {
        match self {
            Self::None => 0,
            Self::NullHmacSha1 | Self::BfCbcHmacSha1 | Self::ScrambleHmacSha1 => hmac_sha1::MAC_LEN,
            Self::Aes128Gcm | Self::Aes256Gcm | Self::ChaCha20Poly1305 => aead::TAG_LEN,
        }
    }

    /// The section length must be a multiple of this: 8 for Blowfish-CBC, else 1.
    pub fn block_len(self) -> usize {
        match self {
            Self::BfCbcHmacSha1 => blowfish::BLOCK_LEN,
            _ => 1,
        }
    }

    /// Whether the suite transforms the section (the frame's ENC flag).
    ///
    /// `false` for [`SuiteId::None`] and [`SuiteId::NullHmacSha1`]. `scramble-hmac-sha1` reports
    /// `true` although it only obfuscates.
    pub fn encrypts(self) -> bool {
        !matches!(self, Self::None | Self::NullHmacSha1)
    }

    /// Whether the suite keeps the section confidential. `false` for [`SuiteId::None`],
    /// [`SuiteId::NullHmacSha1`] and [`SuiteId::ScrambleHmacSha1`]: the scrambler is linear and
    /// keyless after 64 bytes, and a ciphertext-only analyst recovers scrambled text
    /// (docs/SCRAMBLER.md); those suites give integrity (the HMAC) at most.
    pub fn is_confidential(self) -> bool {
        !matches!(
            self,
            Self::None | Self::NullHmacSha1 | Self::ScrambleHmacSha1
        )
    }

    /// Whether the suite is an AEAD (ring) suite.
    pub fn is_aead(self) -> bool {
        matches!(
            self,
            Self::Aes128Gcm | Self::Aes256Gcm | Self::ChaCha20Poly1305
        )
    }
}

impl core::fmt::Display for SuiteId {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

/// Failure to seal or open. Opaque to the peer; the variant is the local reason for counters.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CryptoError {
    /// The ICV (HMAC or AEAD tag) did not verify.
    BadIcv,
    /// The ICV buffer does not have the suite's `icv_len`, or a signature has the wrong length.
    BadLength,
    /// The section is not a multiple of the suite's `block_len`.
    BadBlockLength,
    /// The underlying library refused the operation (e.g. an AEAD input too long).
    Internal,
}

impl CryptoError {
    /// A short, static, local reason (for counters and logs; never sent to the peer).
    pub fn reason(self) -> &'static str {
        match self {
            Self::BadIcv => "bad icv",
            Self::BadLength => "bad icv or signature length",
            Self::BadBlockLength => "section not a multiple of the block length",
            Self::Internal => "crypto library error",
        }
    }
}

impl core::fmt::Display for CryptoError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.reason())
    }
}

impl core::error::Error for CryptoError {}

/// A key was refused when building a [`SuiteKey`] or a [`sign::SigningKey`].
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyError {
    /// The key has the wrong length for the suite.
    WrongLength {
        /// The length the suite requires.
        expected: usize,
        /// The length that was given.
        got: usize,
    },
    /// The underlying library rejected the key.
    Rejected,
}

impl core::fmt::Display for KeyError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::WrongLength { expected, got } => {
                write!(f, "wrong key length: expected {expected} bytes, got {got}")
            }
            Self::Rejected => f.write_str("key rejected"),
        }
    }
}

impl core::error::Error for KeyError {}
