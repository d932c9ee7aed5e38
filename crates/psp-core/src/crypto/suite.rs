//! [`SuiteKey`]: the keyed state of one suite, the per-frame seal/open dispatch, and batched
//! sealing ([`SuiteKey::seal_many`]) for suites that gain from processing frames side by side.

use zeroize::{Zeroize, ZeroizeOnDrop};

use crate::crypto::aead::{self, AeadKey};
use crate::crypto::blowfish::{self, BlowfishCbc, CbcJob};
use crate::crypto::hmac_sha1::{HmacSha1Key, MAC_LEN};
use crate::crypto::{CryptoError, KeyError, SuiteId, scramble_hmac};

/// The label HMAC'd with the session key to form the Base IV Number.
const BIVN_LABEL: &[u8] = b"PSP-BIVN";

/// Keyed state for one suite: expanded Blowfish schedule, ring AEAD key, HMAC-SHA1 prototype and
/// the Base IV Number (BIVN).
///
/// Construction does all key expansion; sealing and opening a frame expands nothing and
/// allocates nothing. The BIVN and the HMAC states are zeroized on drop; see `docs/SUITES.md` for
/// the library-held state (ring key schedules, Blowfish schedule) that is not. `Debug` prints
/// only the suite.
pub struct SuiteKey {
    suite: SuiteId,
    bivn: [u8; MAC_LEN],
    inner: Inner,
}

/// Per-suite keyed state.
// The Blowfish schedule (4 KiB) makes `BfCbc` much larger than the rest; boxing it is not an
// option without `alloc`, and a session holds one or two keys, so the size is accepted.
#[allow(clippy::large_enum_variant)]
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

    /// How many frames [`seal_many`](Self::seal_many) seals side by side: the Blowfish-CBC
    /// lane count for `bf-cbc-hmac-sha1`, 1 for suites that gain nothing from batching.
    ///
    /// Batches longer than this still work; they are only not faster per frame.
    pub fn batch_lanes(&self) -> usize {
        match self.inner {
            Inner::BfCbc { .. } => blowfish::ENCRYPT_LANES,
            _ => 1,
        }
    }

    /// Seals every job as [`seal_in_place`](Self::seal_in_place) would, writing each outcome to
    /// the job's `result`.
    ///
    /// For `bf-cbc-hmac-sha1` the CBC chains of up to [`batch_lanes`](Self::batch_lanes) frames
    /// run interleaved, several times faster per frame than one at a time (CBC encryption is
    /// serial within a frame); other suites loop. Nothing is allocated.
    pub fn seal_many(&self, jobs: &mut [SectionJob<'_>]) {
        let Inner::BfCbc { cbc, mac } = &self.inner else {
            for job in jobs.iter_mut() {
                job.result = self.seal_in_place(job.seq, job.clear, job.section, job.icv);
            }
            return;
        };
        for chunk in jobs.chunks_mut(MANY_CHUNK) {
            let mut cbc_jobs: [CbcJob<'_>; MANY_CHUNK] = Default::default();
            for (job, cbc_job) in chunk.iter_mut().zip(&mut cbc_jobs) {
                job.result = self.check_lengths(job.section, job.icv.len());
                if job.result.is_ok() {
                    *cbc_job = CbcJob {
                        iv: cbc.derive_iv(&self.bivn, job.seq),
                        buf: &mut *job.section,
                    };
                }
            }
            // Every section passed `check_lengths`, so this cannot fail; if it ever did, each
            // job reports it as `seal_in_place` would.
            let encrypted = cbc.encrypt_many_in_place(&mut cbc_jobs);
            for job in chunk.iter_mut().filter(|j| j.result.is_ok()) {
                job.result = encrypted;
                if encrypted.is_ok() {
                    job.icv.copy_from_slice(&mac.mac(&[job.clear, job.section]));
                }
            }
        }
    }

    /// Encrypts `section` in place (already padded to `block_len` by the caller), then writes the
    /// ICV over `clear || section` (the ciphertext) into `icv`.
    ///
    /// `clear` is the whole clear part of the layer-2 frame (Ethernet dst+src+EtherType and the
    /// PSP clear header); for AEAD suites it is the AAD, and its bytes 6..12 (the source MAC)
    /// enter the nonce with `seq` ([`aead::derive_nonce`]). `seq` is the frame's sequence number,
    /// which must never repeat for one sender under one key.
    ///
    /// # Errors
    /// [`CryptoError::BadLength`] if `icv.len() != icv_len`, or for an AEAD suite if `clear` is
    /// shorter than 12 bytes (no source MAC); [`CryptoError::BadBlockLength`] if
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
                let nonce = aead::frame_nonce(&self.bivn, clear, seq)?;
                key.seal_in_place(&nonce, clear, section, icv)?;
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
                let nonce = aead::frame_nonce(&self.bivn, clear, seq)?;
                key.open_in_place(&nonce, clear, section, icv)?;
            }
        }
        Ok(())
    }

    fn check_lengths(&self, section: &[u8], icv_len: usize) -> Result<(), CryptoError> {
        if icv_len != self.suite.icv_len() {
            return Err(CryptoError::BadLength);
        }
        if !section.len().is_multiple_of(self.suite.block_len()) {
            return Err(CryptoError::BadBlockLength);
        }
        Ok(())
    }
}

/// Frames per group in [`SuiteKey::seal_many`]: two per Blowfish lane keeps every lane busy
/// while the group's plaintexts stay in L1.
const MANY_CHUNK: usize = 2 * blowfish::ENCRYPT_LANES;

/// One frame's parts for [`SuiteKey::seal_many`], each a slice of the frame being sealed.
#[derive(Debug)]
pub struct SectionJob<'a> {
    /// The frame's sequence number (never reused under one key by one sender).
    pub seq: u32,
    /// The clear part (Ethernet header and PSP clear header): authenticated, not encrypted.
    pub clear: &'a [u8],
    /// The padded section, encrypted in place.
    pub section: &'a mut [u8],
    /// Where the ICV is written (`icv_len` bytes).
    pub icv: &'a mut [u8],
    /// After [`SuiteKey::seal_many`]: whether this job was sealed.
    pub result: Result<(), CryptoError>,
}

impl Default for SectionJob<'_> {
    fn default() -> Self {
        Self {
            seq: 0,
            clear: &[],
            section: &mut [],
            icv: &mut [],
            result: Ok(()),
        }
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

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;
    use crate::crypto::blowfish::BLOCK_LEN;

    const CLEAR: &[u8] = b"\x02\x00\x00\x00\x00\x01\x02\x00\x00\x00\x00\x02\x19\x82psp-hdr!";

    fn key_for(suite: SuiteId, byte: u8) -> SuiteKey {
        let key: Vec<u8> = (0..suite.key_len())
            .map(|i| byte.wrapping_add(i as u8))
            .collect();
        SuiteKey::new(suite, &key).unwrap()
    }

    fn section_for(suite: SuiteId, len: usize) -> Vec<u8> {
        let len = len.next_multiple_of(suite.block_len());
        (0..len).map(|i| (i * 7 + 3) as u8).collect()
    }

    fn seal(k: &SuiteKey, seq: u32, clear: &[u8], plain: &[u8]) -> (Vec<u8>, Vec<u8>) {
        let mut section = plain.to_vec();
        let mut icv = vec![0u8; k.suite().icv_len()];
        k.seal_in_place(seq, clear, &mut section, &mut icv).unwrap();
        (section, icv)
    }

    #[test]
    fn round_trip_every_suite() {
        for &suite in SuiteId::ALL {
            let k = key_for(suite, 1);
            for len in [0, 1, 8, 15, 64, 1400] {
                let plain = section_for(suite, len);
                let (mut section, icv) = seal(&k, 42, CLEAR, &plain);
                if suite.encrypts() && !plain.is_empty() {
                    assert_ne!(
                        section, plain,
                        "{suite} len {len} left the section in clear"
                    );
                } else {
                    assert_eq!(section, plain, "{suite} len {len} changed the section");
                }
                k.open_in_place(42, CLEAR, &mut section, &icv).unwrap();
                assert_eq!(section, plain, "{suite} len {len}");
            }
        }
    }

    #[test]
    fn every_single_bit_flip_is_rejected() {
        for &suite in SuiteId::ALL.iter().filter(|s| s.icv_len() > 0) {
            let k = key_for(suite, 9);
            let plain = section_for(suite, 16);
            let (section, icv) = seal(&k, 7, CLEAR, &plain);
            let frame: Vec<u8> = [CLEAR, &section, &icv].concat();
            for bit in 0..frame.len() * 8 {
                let mut f = frame.clone();
                f[bit / 8] ^= 1 << (bit % 8);
                let (clear, rest) = f.split_at_mut(CLEAR.len());
                let (sec, icv) = rest.split_at_mut(section.len());
                assert_eq!(
                    k.open_in_place(7, clear, sec, icv),
                    Err(CryptoError::BadIcv),
                    "{suite} bit {bit}"
                );
            }
        }
    }

    #[test]
    fn hmac_suites_leave_section_untouched_on_failure() {
        for suite in [
            SuiteId::NullHmacSha1,
            SuiteId::BfCbcHmacSha1,
            SuiteId::ScrambleHmacSha1,
        ] {
            let k = key_for(suite, 9);
            let (section, mut icv) = seal(&k, 7, CLEAR, &section_for(suite, 32));
            icv[0] ^= 1;
            let mut s = section.clone();
            assert_eq!(
                k.open_in_place(7, CLEAR, &mut s, &icv),
                Err(CryptoError::BadIcv)
            );
            assert_eq!(s, section, "{suite}");
        }
    }

    #[test]
    fn wrong_key_and_wrong_seq_are_rejected() {
        for &suite in SuiteId::ALL.iter().filter(|s| s.icv_len() > 0) {
            let k = key_for(suite, 1);
            let other = key_for(suite, 2);
            let (section, icv) = seal(&k, 5, CLEAR, &section_for(suite, 24));
            let mut s = section.clone();
            assert_eq!(
                other.open_in_place(5, CLEAR, &mut s, &icv),
                Err(CryptoError::BadIcv)
            );
            // The HMAC suites bind the SN only through the IV/seed, so a wrong SN verifies but
            // decrypts to garbage; the session's replay check and ICV over the clear header (which
            // carries the SN) are what bind it. AEAD suites reject it outright.
            let mut s = section.clone();
            let r = k.open_in_place(6, CLEAR, &mut s, &icv);
            if suite.is_aead() {
                assert_eq!(r, Err(CryptoError::BadIcv), "{suite}");
            }
        }
    }

    #[test]
    fn length_errors_modify_nothing() {
        let k = key_for(SuiteId::BfCbcHmacSha1, 1);
        let mut section = [1u8; 12];
        let mut icv = [0u8; 20];
        assert_eq!(
            k.seal_in_place(1, CLEAR, &mut section, &mut icv),
            Err(CryptoError::BadBlockLength)
        );
        assert_eq!(
            k.open_in_place(1, CLEAR, &mut section, &icv),
            Err(CryptoError::BadBlockLength)
        );
        assert_eq!(section, [1u8; 12]);
        for &suite in SuiteId::ALL {
            let k = key_for(suite, 1);
            let mut section = [1u8; 16];
            let mut icv = vec![0u8; suite.icv_len() + 1];
            assert_eq!(
                k.seal_in_place(1, CLEAR, &mut section, &mut icv),
                Err(CryptoError::BadLength)
            );
            assert_eq!(
                k.open_in_place(1, CLEAR, &mut section, &icv),
                Err(CryptoError::BadLength)
            );
            assert_eq!(section, [1u8; 16], "{suite}");
        }
    }

    #[test]
    fn key_lengths() {
        for &suite in SuiteId::ALL {
            if suite == SuiteId::None {
                assert!(SuiteKey::new(suite, &[]).is_ok());
                assert!(SuiteKey::new(suite, &[1; 77]).is_ok());
                continue;
            }
            let n = suite.key_len();
            assert!(SuiteKey::new(suite, &vec![1; n]).is_ok(), "{suite}");
            for bad in [0, n - 1, n + 1] {
                assert_eq!(
                    SuiteKey::new(suite, &vec![1; bad]).unwrap_err(),
                    KeyError::WrongLength {
                        expected: n,
                        got: bad
                    }
                );
            }
        }
    }

    #[test]
    fn suite_table() {
        let rows: Vec<_> = SuiteId::ALL
            .iter()
            .map(|s| {
                (
                    s.name(),
                    s.key_len(),
                    s.icv_len(),
                    s.block_len(),
                    s.encrypts(),
                    s.is_aead(),
                )
            })
            .collect();
        assert_eq!(
            rows,
            [
                ("none", 0, 0, 1, false, false),
                ("null-hmac-sha1", 32, 20, 1, false, false),
                ("bf-cbc-hmac-sha1", 32, 20, 8, true, false),
                ("aes128-gcm", 16, 16, 1, true, true),
                ("aes256-gcm", 32, 16, 1, true, true),
                ("chacha20-poly1305", 32, 16, 1, true, true),
                ("scramble-hmac-sha1", 32, 20, 1, true, false),
            ]
        );
        for &s in SuiteId::ALL {
            assert_eq!(SuiteId::from_name(s.name()), Some(s));
        }
        assert_eq!(SuiteId::from_name("BF-CBC-HMAC-SHA1"), None);
    }

    #[test]
    fn debug_prints_no_key_bytes() {
        let k = SuiteKey::new(SuiteId::BfCbcHmacSha1, &[0xab; 32]).unwrap();
        assert_eq!(format!("{k:?}"), "SuiteKey(bf-cbc-hmac-sha1)");
    }

    #[test]
    fn ivs_and_nonces_are_unique_per_seq() {
        let k = key_for(SuiteId::BfCbcHmacSha1, 3);
        let Inner::BfCbc { cbc, .. } = &k.inner else {
            unreachable!()
        };
        let seqs = (0..20_000u32).chain([u32::MAX - 1, u32::MAX]);
        let ivs: HashSet<_> = seqs.clone().map(|s| cbc.derive_iv(k.bivn(), s)).collect();
        assert_eq!(ivs.len(), 20_002);
        let nonces: HashSet<_> = seqs
            .flat_map(|s| {
                [[2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]]
                    .map(|mac| aead::derive_nonce(k.bivn(), &mac, s))
            })
            .collect();
        assert_eq!(nonces.len(), 2 * 20_002);
        // Same plaintext, distinct SNs: distinct first ciphertext blocks for every cipher suite.
        // (Not the scrambler: its first 44 output bytes depend on the seed only through the XOR
        // of its 20 bytes, so it has at most 256 variants there; see docs/SUITES.md.)
        let real_ciphers = SuiteId::ALL
            .iter()
            .filter(|s| s.encrypts() && **s != SuiteId::ScrambleHmacSha1);
        for &suite in real_ciphers {
            let k = key_for(suite, 3);
            let plain = section_for(suite, 16);
            let firsts: HashSet<_> = (0..500)
                .map(|seq| seal(&k, seq, CLEAR, &plain).0[..BLOCK_LEN].to_vec())
                .collect();
            assert_eq!(firsts.len(), 500, "{suite}");
        }
    }

    #[test]
    fn scramble_frames_are_independent() {
        // A lost frame must not break the next: open frames out of order and with gaps.
        let k = key_for(SuiteId::ScrambleHmacSha1, 4);
        let plain = section_for(SuiteId::ScrambleHmacSha1, 100);
        let frames: Vec<_> = (0..5).map(|seq| seal(&k, seq, CLEAR, &plain)).collect();
        for seq in [4u32, 1, 3] {
            let (mut s, icv) = frames[seq as usize].clone();
            k.open_in_place(seq, CLEAR, &mut s, &icv).unwrap();
            assert_eq!(s, plain);
        }
    }

    fn unhex(s: &str) -> Vec<u8> {
        hex::decode(s).unwrap()
    }

    /// Key 00 01 .. 1f. Expected values computed independently (Python `hmac` + OpenSSL
    /// Blowfish via `cryptography`).
    const PIN_KEY: [u8; 32] = {
        let mut k = [0u8; 32];
        let mut i = 0;
        while i < 32 {
            k[i] = i as u8;
            i += 1;
        }
        k
    };

    #[test]
    fn bf_cbc_iv_derivation_is_pinned() {
        let k = SuiteKey::new(SuiteId::BfCbcHmacSha1, &PIN_KEY).unwrap();
        assert_eq!(
            k.bivn()[..],
            unhex("f17e4ea8274559fe6dbd7df7d0166c37fb6cbff5")
        );
        let Inner::BfCbc { cbc, .. } = &k.inner else {
            unreachable!()
        };
        for (seq, iv) in [
            (0, "d4198543228f29cc"),
            (1, "0ecf710c82e8b4e7"),
            (0x0102_0304, "787f9ae38b59d415"),
            (u32::MAX, "5b16a47cf96e318b"),
        ] {
            assert_eq!(cbc.derive_iv(k.bivn(), seq)[..], unhex(iv), "seq {seq}");
        }
    }

    #[test]
    fn aead_nonce_derivation_is_pinned() {
        let k = SuiteKey::new(SuiteId::ChaCha20Poly1305, &PIN_KEY).unwrap();
        let mac1 = [2, 0, 0, 0, 0, 1];
        for (mac, seq, nonce) in [
            (mac1, 0, "f37e4ea8274459fe6dbd7df7"),
            (mac1, 1, "f37e4ea8274459fe6dbd7df6"),
            (mac1, 0x0102_0304, "f37e4ea8274459fe6cbf7ef3"),
            (mac1, u32::MAX, "f37e4ea8274459fe92428208"),
            (
                [0xa0, 0xb1, 0xc2, 0xd3, 0xe4, 0xf5],
                0x0102_0304,
                "51cf8c7bc3b059fe6cbf7ef3",
            ),
        ] {
            assert_eq!(
                aead::derive_nonce(k.bivn(), &mac, seq)[..],
                unhex(nonce),
                "mac {mac:02x?} seq {seq}"
            );
        }
    }

    /// `CLEAR` with its source MAC (bytes 6..12) replaced by `mac`.
    fn clear_from(mac: [u8; 6]) -> Vec<u8> {
        let mut c = CLEAR.to_vec();
        c[aead::SRC_MAC].copy_from_slice(&mac);
        c
    }

    #[test]
    fn aead_senders_sharing_a_key_never_share_a_nonce() {
        // The two directions of a pair key (or two hosts under the group key) at the same SN.
        let (a, b) = (
            clear_from([2, 0, 0, 0, 0, 1]),
            clear_from([2, 0, 0, 0, 0, 2]),
        );
        let plain = section_for(SuiteId::Aes128Gcm, 64);
        for suite in [
            SuiteId::Aes128Gcm,
            SuiteId::Aes256Gcm,
            SuiteId::ChaCha20Poly1305,
        ] {
            let k = key_for(suite, 5);
            assert_ne!(
                aead::frame_nonce(k.bivn(), &a, 77),
                aead::frame_nonce(k.bivn(), &b, 77)
            );
            let (ca, _) = seal(&k, 77, &a, &plain);
            let (cb, _) = seal(&k, 77, &b, &plain);
            // A shared nonce would mean a shared keystream: equal plaintexts, equal ciphertexts.
            assert_ne!(ca, cb, "{suite}");
        }
    }

    #[test]
    fn aead_src_mac_changed_in_transit_fails_to_open() {
        for suite in [
            SuiteId::Aes128Gcm,
            SuiteId::Aes256Gcm,
            SuiteId::ChaCha20Poly1305,
        ] {
            let k = key_for(suite, 6);
            let plain = section_for(suite, 40);
            let (section, icv) = seal(&k, 9, CLEAR, &plain);
            let forged = clear_from([2, 0, 0, 0, 0, 3]);
            let mut s = section.clone();
            assert_eq!(
                k.open_in_place(9, &forged, &mut s, &icv),
                Err(CryptoError::BadIcv),
                "{suite}"
            );
            let mut s = section;
            k.open_in_place(9, CLEAR, &mut s, &icv).unwrap();
            assert_eq!(s, plain, "{suite}");
        }
    }

    #[test]
    fn aead_clear_without_src_mac_is_a_length_error() {
        for suite in [
            SuiteId::Aes128Gcm,
            SuiteId::Aes256Gcm,
            SuiteId::ChaCha20Poly1305,
        ] {
            let k = key_for(suite, 1);
            let mut section = [1u8; 16];
            let mut icv = [0u8; 16];
            assert_eq!(
                k.seal_in_place(1, &CLEAR[..11], &mut section, &mut icv),
                Err(CryptoError::BadLength)
            );
            assert_eq!(
                k.open_in_place(1, &CLEAR[..11], &mut section, &icv),
                Err(CryptoError::BadLength)
            );
            assert_eq!(section, [1u8; 16], "{suite}");
        }
    }

    #[test]
    fn whole_suite_outputs_are_pinned() {
        // seq 0x01020304, clear = CLEAR, section = 00 01 .. 0f.
        let cases = [
            (
                SuiteId::BfCbcHmacSha1,
                "3b0dcff25f0e18fac644fc9c6ced1fcd",
                "31c0fcfb89ce2d98ebe1f0f387eb31efd9928499",
            ),
            (
                SuiteId::NullHmacSha1,
                "000102030405060708090a0b0c0d0e0f",
                "8fe58b805a630b87509c882dcf7a5ac4b3bf870a",
            ),
            (
                SuiteId::Aes128Gcm,
                "e9b5ea256e2ebd15220a800a8a2869d8",
                "7a4d0d6e345c941d4f0946ca88b4534b",
            ),
            (
                SuiteId::Aes256Gcm,
                "9163ffe7f6a6b529f9942bbbf2de63d1",
                "3c766516169816ad43fcac693ace09ff",
            ),
            (
                SuiteId::ChaCha20Poly1305,
                "ccfdf580b6f7fbcd4c9b3f9eb0fdea66",
                "e7f9259373352da348bdb8371e2d740b",
            ),
        ];
        let plain: Vec<u8> = (0..16).collect();
        for (suite, ct, icv) in cases {
            let k = SuiteKey::new(suite, &PIN_KEY[..suite.key_len()]).unwrap();
            let (section, tag) = seal(&k, 0x0102_0304, CLEAR, &plain);
            assert_eq!(section, unhex(ct), "{suite}");
            assert_eq!(tag, unhex(icv), "{suite}");
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

        #[test]
        fn prop_round_trip(
            key in proptest::collection::vec(proptest::prelude::any::<u8>(), 32),
            seq in proptest::prelude::any::<u32>(),
            clear in proptest::collection::vec(proptest::prelude::any::<u8>(), 12..40),
            plain in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300),
        ) {
            for &suite in SuiteId::ALL {
                let k = SuiteKey::new(suite, &key[..suite.key_len()]).unwrap();
                let mut plain = plain.clone();
                plain.truncate(plain.len() / suite.block_len() * suite.block_len());
                let (mut section, icv) = seal(&k, seq, &clear, &plain);
                k.open_in_place(seq, &clear, &mut section, &icv).unwrap();
                proptest::prop_assert_eq!(&section, &plain, "{}", suite);
            }
        }
    }
}
