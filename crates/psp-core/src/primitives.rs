//! The raw primitives under the cipher suites, for benches, fuzz targets and cross-checks.
//!
//! Not a stable API and not what a protocol user needs: seal and open frames with
//! [`Sealer`](crate::Sealer) and [`Opener`](crate::Opener), keyed by a
//! [`SuiteKey`](crate::SuiteKey). Nothing here adds a sequence number, a replay check or a
//! constant-time comparison the caller forgets.

/// Blowfish (our interleaved multi-lane core) and Blowfish-CBC.
pub mod blowfish {
    pub use crate::crypto::blowfish::*;
}

/// HMAC-SHA1 with precomputed pads.
pub mod hmac_sha1 {
    pub use crate::crypto::hmac_sha1::*;
}

/// The AEAD suites' key wrapper and the PSP nonce derivation.
pub mod aead {
    pub use crate::crypto::aead::*;
}
