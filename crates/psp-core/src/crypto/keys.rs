//! [`SuiteKey`]: the keyed state of one suite, and the per-frame seal/open dispatch.

use zeroize::{Zeroize, ZeroizeOnDrop};

use crate::crypto::aead::{self, AeadKey};
use crate::crypto::blowfish_cbc::BlowfishCbc;
use crate::crypto::hmac_sha1::{HmacSha1Key, MAC_LEN};
use crate::crypto::{CryptoError, KeyError, SuiteId, scramble_hmac};

/// The label HMAC'd with the session key to form the Base IV Number.
const BIVN_LABEL: &[u8] = b"PSP-BIVN";

/// Keyed state for one suite: expanded Blowfish schedule, ring AEAD key, HMAC-SHA1 prototype and
/// the Base IV Number (BIVN).
///
/// Construction does all key expansion; sealing and opening a frame expands nothing and
/// allocates nothing. The BIVN and this crate's own copies are zeroized on drop; see
/// `docs/SUITES.md` for the library-held state that cannot be. `Debug` prints only the suite.
pub struct SuiteKey {
    suite: SuiteId,
    bivn: [u8; MAC_LEN],
    inner: Inner,
}

/// Per-suite keyed state.
enum Inner {
    None,
    /// `null-hmac-sha1` and `scramble-hmac-sha1`.
    Hmac(HmacSha1Key),
    BfCbc {
        cbc: BlowfishCbc,
        mac: HmacSha1Key,
    },
    Aead(AeadKey),
}

impl SuiteKey {
    /// Expands `key` for `suite` and derives the BIVN.
    ///
    /// # Errors
    /// [`KeyError::WrongLength`] if `key` is not `suite.key_len()` bytes (any length is accepted
    /// for [`SuiteId::None`]); [`KeyError::Rejected`] if the library refuses the key.
    pub fn new(suite: SuiteId, key: &[u8]) -> Result<Self, KeyError> {
        if suite != SuiteId::None && key.len() != suite.key_len() {
            return Err(KeyError::WrongLength {
                expected: suite.key_len(),
                got: key.len(),
            });
        }
        let mac = HmacSha1Key::new(key);
        let bivn = mac.mac(&[BIVN_LABEL]);
        let inner = match suite {
            SuiteId::None => Inner::None,
            SuiteId::NullHmacSha1 | SuiteId::ScrambleHmacSha1 => Inner::Hmac(mac),
            SuiteId::BfCbcHmacSha1 => Inner::BfCbc {
                cbc: BlowfishCbc::new(key)?,
                mac,
            },
            SuiteId::Aes128Gcm | SuiteId::Aes256Gcm | SuiteId::ChaCha20Poly1305 => {
                Inner::Aead(AeadKey::new(suite, key)?)
            }
        };
        Ok(Self { suite, bivn, inner })
    }

    /// The suite this key is for.
    pub fn suite(&self) -> SuiteId {
        self.suite
    }

    /// Base IV Number: `HMAC-SHA1(K = key, M = "PSP-BIVN")` (20 bytes).
    pub fn bivn(&self) -> &[u8; 20] {
        &self.bivn
    }

    /// Encrypts `section` in place (already padded to `block_len` by the caller), then writes the
    /// ICV over `clear || section` (the ciphertext) into `icv`.
    ///
    /// `clear` is the whole clear part of the layer-2 frame (Ethernet dst+src+EtherType and the
    /// PSP clear header); for AEAD suites it is the AAD. `seq` is the frame's sequence number,
    /// which must never repeat under one key.
    ///
    /// # Errors
    /// [`CryptoError::BadLength`] if `icv.len() != icv_len`; [`CryptoError::BadBlockLength`] if
    /// the section is not a multiple of `block_len`; nothing is modified in either case.
    /// [`CryptoError::Internal`] if ring refuses the input.
    pub fn seal_in_place(
        &self,
        seq: u32,
        clear: &[u8],
        section: &mut [u8],
        icv: &mut [u8],
    ) -> Result<(), CryptoError> {
        self.check_lengths(section, icv.len())?;
        match &self.inner {
            Inner::None => {}
            Inner::Hmac(mac) => {
                if self.suite == SuiteId::ScrambleHmacSha1 {
                    scramble_hmac::scramble(mac, &self.bivn, seq, section);
                }
                icv.copy_from_slice(&mac.mac(&[clear, section]));
            }
            Inner::BfCbc { cbc, mac } => {
                let iv = cbc.derive_iv(&self.bivn, seq);
                cbc.encrypt_in_place(&iv, section)?;
                icv.copy_from_slice(&mac.mac(&[clear, section]));
            }
            Inner::Aead(key) => {
                key.seal_in_place(&aead::derive_nonce(&self.bivn, seq), clear, section, icv)?;
            }
        }
        Ok(())
    }

    /// Verifies the ICV over `clear || section` in constant time, then decrypts `section` in
    /// place.
    ///
    /// For the HMAC suites nothing is decrypted unless the ICV verifies, so a failure leaves the
    /// ciphertext as it was. For AEAD suites ring authenticates while decrypting and zeroes the
    /// section on failure.
    ///
    /// # Errors
    /// [`CryptoError::BadIcv`] if the ICV does not verify; [`CryptoError::BadLength`] or
    /// [`CryptoError::BadBlockLength`] as for [`seal_in_place`](Self::seal_in_place).
    pub fn open_in_place(
        &self,
        seq: u32,
        clear: &[u8],
        section: &mut [u8],
        icv: &[u8],
    ) -> Result<(), CryptoError> {
        self.check_lengths(section, icv.len())?;
        match &self.inner {
            Inner::None => {}
            Inner::Hmac(mac) => {
                mac.verify(&[clear, section], icv)?;
                if self.suite == SuiteId::ScrambleHmacSha1 {
                    scramble_hmac::descramble(mac, &self.bivn, seq, section);
                }
            }
            Inner::BfCbc { cbc, mac } => {
                mac.verify(&[clear, section], icv)?;
                let iv = cbc.derive_iv(&self.bivn, seq);
                cbc.decrypt_in_place(&iv, section)?;
            }
            Inner::Aead(key) => {
                key.open_in_place(&aead::derive_nonce(&self.bivn, seq), clear, section, icv)?;
            }
        }
        Ok(())
    }

    fn check_lengths(&self, section: &[u8], icv_len: usize) -> Result<(), CryptoError> {
        if icv_len != self.suite.icv_len() {
            return Err(CryptoError::BadLength);
        }
        if section.len() % self.suite.block_len() != 0 {
            return Err(CryptoError::BadBlockLength);
        }
        Ok(())
    }
}

impl Drop for SuiteKey {
    #[inline(never)]
    fn drop(&mut self) {
        self.bivn.zeroize();
    }
}

impl ZeroizeOnDrop for SuiteKey {}

impl core::fmt::Debug for SuiteKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "SuiteKey({})", self.suite.name())
    }
}
