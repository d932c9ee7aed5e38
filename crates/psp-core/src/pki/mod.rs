//! Membership by certificate: a network CA signs one [`Certificate`] per host (its name, the
//! MACs and addresses it may send from, its identity key, a validity window, a serial and its
//! key-server priority) and a [`RevocationList`] of serials it no longer vouches for.
//!
//! Both are compact byte strings with a fixed layout (docs/MEMBERSHIP.md gives it byte by byte,
//! with vectors) signed with Ed25519 under domain-separating labels; parsing never panics and
//! checks every length; verification is a separate, explicit step ([`Certificate::verify`],
//! [`RevocationList::verify`]), so a parsed value is never mistaken for a trusted one.
//!
//! ```
//! use psp_core::pki::{Certificate, CertFields, Kind, RevocationList};
//! use psp_core::SigningKey;
//!
//! let ca = SigningKey::from_seed(&[1; 32])?;
//! let host = SigningKey::from_seed(&[2; 32])?.public_key();
//! let mut f = CertFields::new(Kind::Host, 7, *host.as_bytes(), "h1");
//! f.not_after = 2_000_000_000;
//! f.push_mac([2, 0, 0, 0, 0, 1]);
//! let cert = Certificate::sign(&f, &ca)?;
//! let back = Certificate::parse(cert.as_bytes())?;
//! back.verify(&ca.public_key(), 1_800_000_000, 0)?;
//! assert!(back.fields().names_mac(&[2, 0, 0, 0, 0, 1]));
//!
//! let crl = RevocationList::sign(1, 1_800_000_000, &[7], &ca)?;
//! let crl = RevocationList::parse(crl.as_bytes())?;
//! crl.verify(&ca.public_key())?;
//! assert!(crl.revokes(7));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod cert;
pub mod message;
mod revocation;

pub use cert::{
    CertFields, Certificate, Kind, MAX_ADDRS, MAX_CERT_LEN, MAX_MACS, MAX_NAME_LEN,
    NEVER_KEY_SERVER,
};
pub use revocation::{MAX_CRL_LEN, MAX_REVOKED, RevocationList};

/// The format version this implementation writes and reads.
pub const VERSION: u8 = 1;

/// Why bytes are not a certificate or revocation list, or why one is not trusted.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PkiError {
    /// Shorter than its fields say, or longer (trailing bytes).
    Length,
    /// A version this implementation does not read.
    Version,
    /// A kind byte that is not the one expected here.
    Kind,
    /// A field out of its range (a count too large, an empty or non-ASCII name, an address
    /// family that is neither 4 nor 6, a prefix too long, serials out of order).
    Field,
    /// The CA's signature does not verify.
    Signature,
    /// Not valid yet at the time given (beyond the clock-skew allowance).
    NotYetValid,
    /// Expired at the time given (beyond the clock-skew allowance).
    Expired,
    /// More entries than the format allows.
    TooMany,
    /// The signing backend refused the key.
    Key,
}

impl PkiError {
    /// A short name for counters and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Length => "cert_length",
            Self::Version => "cert_version",
            Self::Kind => "cert_kind",
            Self::Field => "cert_field",
            Self::Signature => "cert_signature",
            Self::NotYetValid => "cert_not_yet_valid",
            Self::Expired => "cert_expired",
            Self::TooMany => "cert_too_many",
            Self::Key => "cert_key",
        }
    }
}

impl core::fmt::Display for PkiError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Self::Length => "wrong length",
            Self::Version => "unknown format version",
            Self::Kind => "wrong kind",
            Self::Field => "a field is out of range",
            Self::Signature => "the CA's signature does not verify",
            Self::NotYetValid => "not valid yet",
            Self::Expired => "expired",
            Self::TooMany => "too many entries",
            Self::Key => "the signing key was refused",
        })
    }
}

impl core::error::Error for PkiError {}

/// Signs `label || body` with `key`.
fn sign_labelled(key: &crate::SigningKey, label: &[u8], body: &[u8]) -> [u8; 64] {
    let digest = digest(label, body);
    let mut sig = [0u8; 64];
    key.sign(&digest, &mut sig);
    sig
}

/// What the CA signs: SHA-256(`label` || `body`).
fn digest(label: &[u8], body: &[u8]) -> [u8; 32] {
    use sha2::Digest as _;
    let mut h = sha2::Sha256::new();
    h.update(label);
    h.update(body);
    h.finalize().into()
}

/// A bounded reader over a byte string: every read checks the length.
struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Self { buf, at: 0 }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], PkiError> {
        let end = self.at.checked_add(n).ok_or(PkiError::Length)?;
        let s = self.buf.get(self.at..end).ok_or(PkiError::Length)?;
        self.at = end;
        Ok(s)
    }

    fn u8(&mut self) -> Result<u8, PkiError> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<u16, PkiError> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    fn u64(&mut self) -> Result<u64, PkiError> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(u64::from_be_bytes(a))
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], PkiError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }
}

/// A bounded writer: the callers size their buffers from the format's maxima.
struct Writer<'a> {
    buf: &'a mut [u8],
    at: usize,
}

impl<'a> Writer<'a> {
    fn new(buf: &'a mut [u8]) -> Self {
        Self { buf, at: 0 }
    }

    fn put(&mut self, b: &[u8]) {
        self.buf[self.at..self.at + b.len()].copy_from_slice(b);
        self.at += b.len();
    }
}
