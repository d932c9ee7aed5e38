//! AEAD suites: AES-128-GCM, AES-256-GCM, ChaCha20-Poly1305, through ring (feature `ring`, the
//! default) or RustCrypto (feature `rustcrypto`); with both on, ring. See `docs/SUITES.md`.
//!
//! The tag is kept apart from the ciphertext (it is the PSP ICV), so sealing and opening work in
//! place on the section with no allocation. Whatever the backend, a failed open zeroes the
//! buffer before returning, so no unauthenticated plaintext is left behind, and the tag is
//! compared in constant time.

use crate::crypto::backend::selected;
use crate::crypto::{CryptoError, KeyError, SuiteId};

/// Length of an AEAD tag (the ICV) in bytes.
pub const TAG_LEN: usize = 16;
/// Length of an AEAD nonce in bytes.
pub const NONCE_LEN: usize = 12;

/// An AEAD key for one of the AEAD suites.
///
/// Limitation: with the ring backend the key schedule cannot be wiped on drop (ring exposes no
/// way to); with RustCrypto the AES round keys and the ChaCha20-Poly1305 key are (not the GHASH
/// subkey). The raw key is never stored.
pub struct AeadKey {
    suite: SuiteId,
    key: selected::Aead,
}

impl AeadKey {
    /// Builds the key for an AEAD `suite` ([`SuiteId::is_aead`]).
    ///
    /// # Errors
    /// [`KeyError::WrongLength`] if `key` is not `suite.key_len()` bytes; [`KeyError::Rejected`]
    /// if `suite` is not an AEAD suite or the library refuses the key.
    pub fn new(suite: SuiteId, key: &[u8]) -> Result<Self, KeyError> {
        if !suite.is_aead() {
            return Err(KeyError::Rejected);
        }
        if key.len() != suite.key_len() {
            return Err(KeyError::WrongLength {
                expected: suite.key_len(),
                got: key.len(),
            });
        }
        Ok(Self {
            suite,
            key: selected::Aead::new(suite, key)?,
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
    /// if the library refuses (input too long).
    pub fn seal_in_place(
        &self,
        nonce: &[u8; NONCE_LEN],
        aad: &[u8],
        in_out: &mut [u8],
        tag: &mut [u8],
    ) -> Result<(), CryptoError> {
        let tag: &mut [u8; TAG_LEN] = tag.try_into().map_err(|_| CryptoError::BadLength)?;
        *tag = self.key.seal(nonce, aad, in_out)?;
        Ok(())
    }

    /// Checks `tag` and decrypts `in_out` in place. On failure `in_out` is zeroed.
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
        let tag: &[u8; TAG_LEN] = tag.try_into().map_err(|_| CryptoError::BadLength)?;
        let opened = self.key.open(nonce, aad, in_out, tag);
        if opened.is_err() {
            // ring zeroes the buffer itself, RustCrypto leaves the ciphertext: wipe here so both
            // backends leave the same thing behind.
            in_out.fill(0);
        }
        opened
    }
}

impl core::fmt::Debug for AeadKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "AeadKey({})", self.suite.name())
    }
}

/// The AEAD implementations compiled in, side by side, for benches and cross-backend tests.
///
/// [`AeadKey`] is the API; these are the bare library calls behind it (`new(suite, key)`,
/// `seal(nonce, aad, in_out) -> tag`, `open(nonce, aad, in_out, &tag)`), without its length
/// checks and, for `RustCrypto`, without wiping the buffer after a failed open.
#[doc(hidden)]
pub mod backend {
    #[cfg(feature = "ring")]
    pub use crate::crypto::backend::ring::Aead as Ring;
    #[cfg(feature = "rustcrypto")]
    pub use crate::crypto::backend::rust_crypto::Aead as RustCrypto;
}

/// Where the source MAC address sits in the clear part of a frame (Ethernet dst, then src).
pub const SRC_MAC: core::ops::Range<usize> = 6..12;

/// The per-frame nonce: `BIVN[0..12] XOR (src_mac || 0x00 0x00 || SN_be32)`.
///
/// One key is shared by several senders (a pair key by both directions, the group key by every
/// host on the segment), each with its own SN range. The source MAC puts each sender in its own
/// nonce space; within one sender the SN never repeats (the session re-keys before it wraps; a
/// static key's sealer continues across restarts from a persisted reservation, see
/// [`Sealer::set_seq_limit`](crate::protect::Sealer::set_seq_limit)), so no (key, nonce) pair is
/// used twice. See `docs/SUITES.md`.
pub fn derive_nonce(bivn: &[u8; 20], src_mac: &[u8; 6], seq: u32) -> [u8; NONCE_LEN] {
    let mut nonce = [0u8; NONCE_LEN];
    nonce.copy_from_slice(&bivn[..NONCE_LEN]);
    let mut mask = [0u8; NONCE_LEN];
    mask[..6].copy_from_slice(src_mac);
    mask[8..].copy_from_slice(&seq.to_be_bytes());
    for (n, m) in nonce.iter_mut().zip(mask) {
        *n ^= m;
    }
    nonce
}

/// The nonce of the frame whose clear part is `clear`: [`derive_nonce`] with the source MAC
/// taken from `clear[6..12]`.
///
/// # Errors
/// [`CryptoError::BadLength`] if `clear` is shorter than 12 bytes (no source MAC).
pub fn frame_nonce(
    bivn: &[u8; 20],
    clear: &[u8],
    seq: u32,
) -> Result<[u8; NONCE_LEN], CryptoError> {
    let src_mac: &[u8; 6] = clear
        .get(SRC_MAC)
        .and_then(|s| s.try_into().ok())
        .ok_or(CryptoError::BadLength)?;
    Ok(derive_nonce(bivn, src_mac, seq))
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
    fn nonce_xors_src_mac_and_seq() {
        let bivn: [u8; 20] = core::array::from_fn(|i| i as u8);
        let mac = [0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5];
        let n = derive_nonce(&bivn, &mac, 0x0102_0304);
        let want: [u8; 12] = [
            0xa0,
            1 ^ 0xa1,
            2 ^ 0xa2,
            3 ^ 0xa3,
            4 ^ 0xa4,
            5 ^ 0xa5,
            6,
            7,
            8 ^ 1,
            9 ^ 2,
            10 ^ 3,
            11 ^ 4,
        ];
        assert_eq!(n, want);
        assert_eq!(derive_nonce(&bivn, &[0; 6], 0)[..], bivn[..12]);
    }

    #[test]
    fn distinct_senders_same_seq_get_distinct_nonces_and_ciphertexts() {
        // Both directions of a pair key (or two hosts under the group key) at the same SN.
        let bivn = [0x5c; 20];
        let k = AeadKey::new(SuiteId::Aes128Gcm, &[7; 16]).unwrap();
        let a = [0x02, 0, 0, 0, 0, 0x01];
        let b = [0x02, 0, 0, 0, 0, 0x02];
        let seq = 0x1234_5678;
        let (na, nb) = (derive_nonce(&bivn, &a, seq), derive_nonce(&bivn, &b, seq));
        assert_ne!(na, nb);
        let plain = *b"the same payload";
        let (mut ca, mut cb) = (plain, plain);
        let (mut ta, mut tb) = ([0u8; TAG_LEN], [0u8; TAG_LEN]);
        k.seal_in_place(&na, b"hdr", &mut ca, &mut ta).unwrap();
        k.seal_in_place(&nb, b"hdr", &mut cb, &mut tb).unwrap();
        // A shared nonce would give equal keystreams, so equal ciphertexts for equal plaintexts.
        assert_ne!(ca, cb);
        assert_ne!(ta, tb);
    }

    #[test]
    fn frame_nonce_reads_the_source_mac() {
        let bivn = [0x33; 20];
        let clear = *b"\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01\x19\x82";
        assert_eq!(
            frame_nonce(&bivn, &clear, 9),
            Ok(derive_nonce(&bivn, &[2, 0, 0, 0, 0, 1], 9))
        );
        assert_eq!(
            frame_nonce(&bivn, &clear[..12], 9),
            frame_nonce(&bivn, &clear, 9)
        );
        assert_eq!(
            frame_nonce(&bivn, &clear[..11], 9),
            Err(CryptoError::BadLength)
        );
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
