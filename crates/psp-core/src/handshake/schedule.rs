//! The crypto of the handshake as a by-value typestate chain, and the key schedule.
//!
//! ```text
//! Ephemeral ──complete(peer share, long-term keys)──▶ Shared ──derive(transcript hash)──▶ Secrets
//! ```
//!
//! Each step consumes its input: completing Diffie-Hellman consumes the ephemeral secret, and
//! deriving consumes the DH output, so neither can be used twice. Every secret is zeroized on
//! drop and prints nothing in `Debug`.
//!
//! With `TH` the transcript hash ([`Transcript::hash`]), `ikm` the ML-KEM secret (if the KEM is
//! in use) and the DH outputs (below), and HKDF-SHA-256 (RFC 5869):
//!
//! ```text
//! ikm        = [K ||] X25519(e_i, E_r) [|| X25519(e_i, S_r)] [|| X25519(s_i, E_r)]  (initiator)
//!            = [K ||] X25519(e_r, E_i) [|| X25519(s_r, E_i)] [|| X25519(e_r, S_i)]  (responder)
//! PRK        = HKDF-Extract(salt = TH, ikm)
//! k_i2r      = HKDF-Expand(PRK, "psp-sep-v1 key i2r" || TH, suite key length)
//! k_r2i      = HKDF-Expand(PRK, "psp-sep-v1 key r2i" || TH, suite key length)
//! k_confirm  = HKDF-Expand(PRK, "psp-sep-v1 confirm" || TH, 32)
//! key_id     = HKDF-Expand(PRK, "psp-sep-v1 key id" || TH, 3)  (24 bits; 0 becomes 1)
//! smkex_hash = SHA-256("psp-sep-v1 smkex" || TH)
//! tag_i      = HMAC-SHA-256(k_confirm, "psp-sep-v1 initiator" || TH)
//! tag_r      = HMAC-SHA-256(k_confirm, "psp-sep-v1 responder" || TH)
//! BIVN(dir)  = HMAC-SHA1(k_dir, "PSP-BIVN")   (thesis step 7, computed by SuiteKey::new)
//! ```
//!
//! `S_r`/`S_i` are the optional long-term keys of seed 002 §10.1 (Fig. 15: "the client can send
//! as input to the key derivation the concatenation of Y^x and LS^x"); the initiator's term is
//! the mirror image for a host that has one too. `K` is the 32-byte ML-KEM-768 shared secret
//! of a hybrid handshake ([`super::kem`]), first, as X25519MLKEM768 puts ML-KEM's secret before
//! X25519's (draft-ietf-tls-ecdhe-mlkem): the session keys stay secret while either X25519 or
//! ML-KEM-768 holds.

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use x25519_dalek::{PublicKey, StaticSecret};
use zeroize::{Zeroize, ZeroizeOnDrop};

use super::kem::{KEM_SECRET_LEN, KemSecret};
use super::messages::{Body, HASH_LEN, KEY_LEN, MAX_MESSAGE_LEN, NONCE_LEN, Repr};
use super::{FailReason, PathId, Role};
use crate::crypto::hmac_sha256::{Hkdf, HmacSha256Key};

const TRANSCRIPT_LABEL: &[u8] = b"psp-sep-v1 transcript";
const SMKEX_LABEL: &[u8] = b"psp-sep-v1 smkex";
const I2R_LABEL: &[u8] = b"psp-sep-v1 key i2r";
const R2I_LABEL: &[u8] = b"psp-sep-v1 key r2i";
const CONFIRM_LABEL: &[u8] = b"psp-sep-v1 confirm";
const KEY_ID_LABEL: &[u8] = b"psp-sep-v1 key id";
const TAG_I_LABEL: &[u8] = b"psp-sep-v1 initiator";
const TAG_R_LABEL: &[u8] = b"psp-sep-v1 responder";

/// The longest key a suite needs.
pub const MAX_KEY_LEN: usize = 32;

/// A long-term X25519 key of a host (seed 002 §10.1). Zeroized on drop.
#[derive(Clone)]
pub struct StaticKey(StaticSecret);

impl StaticKey {
    /// The key for 32 secret bytes (clamped by X25519).
    pub fn from_bytes(secret: [u8; 32]) -> Self {
        Self(StaticSecret::from(secret))
    }

    /// The public key announced to peers and pinned by them.
    pub fn public_key(&self) -> [u8; KEY_LEN] {
        PublicKey::from(&self.0).to_bytes()
    }
}

impl core::fmt::Debug for StaticKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_tuple("StaticKey")
            .field(&self.public_key())
            .finish()
    }
}

/// An ephemeral X25519 secret: the first state of the chain.
pub struct Ephemeral {
    secret: StaticSecret,
    public: [u8; KEY_LEN],
}

impl Ephemeral {
    /// The ephemeral for 32 random bytes.
    pub fn from_bytes(secret: [u8; 32]) -> Self {
        let secret = StaticSecret::from(secret);
        let public = PublicKey::from(&secret).to_bytes();
        Self { secret, public }
    }

    /// The public share.
    pub fn public_share(&self) -> [u8; KEY_LEN] {
        self.public
    }

    /// Completes Diffie-Hellman with the peer's share, mixing in the long-term keys that are
    /// present (Fig. 15). Consumes the ephemeral.
    ///
    /// `own_static` is this side's long-term key, `peer_static` the peer's announced one.
    ///
    /// # Errors
    /// [`FailReason::BadShare`] if any DH output is all-zero (a low-order or identity point).
    pub fn complete(
        self,
        role: Role,
        peer_share: &[u8; KEY_LEN],
        own_static: Option<&StaticKey>,
        peer_static: Option<&[u8; KEY_LEN]>,
    ) -> Result<Shared, FailReason> {
        self.complete_hybrid(role, None, peer_share, own_static, peer_static)
    }

    /// As [`complete`](Self::complete), with the ML-KEM-768 secret `kem` (if the KEM is in use)
    /// first in the input keying material: `ikm = K || X25519 outputs`.
    ///
    /// # Errors
    /// As [`complete`](Self::complete).
    pub fn complete_hybrid(
        self,
        role: Role,
        kem: Option<&KemSecret>,
        peer_share: &[u8; KEY_LEN],
        own_static: Option<&StaticKey>,
        peer_static: Option<&[u8; KEY_LEN]>,
    ) -> Result<Shared, FailReason> {
        let peer_e = PublicKey::from(*peer_share);
        let mut shared = Shared {
            ikm: [0; MAX_IKM_LEN],
            len: 0,
        };
        if let Some(k) = kem {
            shared.ikm[..KEM_SECRET_LEN].copy_from_slice(&k.0);
            shared.len = KEM_SECRET_LEN;
        }
        shared.push(self.secret.diffie_hellman(&peer_e))?;
        // Initiator's order: e·S_r, then s_i·E_r. The responder computes the same two values as
        // s_r·E_i and e_r·S_i, so each side orders the terms by role.
        let (first, second) = match role {
            Role::Initiator => (
                peer_static.map(|s| self.secret.diffie_hellman(&PublicKey::from(*s))),
                own_static.map(|s| s.0.diffie_hellman(&peer_e)),
            ),
            Role::Responder => (
                own_static.map(|s| s.0.diffie_hellman(&peer_e)),
                peer_static.map(|s| self.secret.diffie_hellman(&PublicKey::from(*s))),
            ),
        };
        for dh in [first, second].into_iter().flatten() {
            shared.push(dh)?;
        }
        Ok(shared)
    }
}

impl Drop for Ephemeral {
    #[inline(never)]
    fn drop(&mut self) {
        // StaticSecret zeroizes itself (feature "zeroize"); the public share is public.
    }
}

impl core::fmt::Debug for Ephemeral {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Ephemeral").finish_non_exhaustive()
    }
}

/// The longest input keying material: the ML-KEM secret and three X25519 outputs.
const MAX_IKM_LEN: usize = KEM_SECRET_LEN + 3 * 32;

/// The concatenated ML-KEM secret (if any) and DH outputs: the second state of the chain.
#[derive(Zeroize, ZeroizeOnDrop)]
pub struct Shared {
    ikm: [u8; MAX_IKM_LEN],
    len: usize,
}

impl Shared {
    fn push(&mut self, dh: x25519_dalek::SharedSecret) -> Result<(), FailReason> {
        if !dh.was_contributory() {
            return Err(FailReason::BadShare);
        }
        let slot = self
            .ikm
            .get_mut(self.len..self.len + 32)
            .ok_or(FailReason::BadShare)?;
        slot.copy_from_slice(dh.as_bytes());
        self.len += 32;
        Ok(())
    }

    /// The input keying material (for known-answer tests).
    pub fn ikm(&self) -> &[u8] {
        &self.ikm[..self.len.min(self.ikm.len())]
    }

    /// Runs the key schedule over the transcript hash; consumes the DH output.
    pub fn derive(self, transcript_hash: &[u8; HASH_LEN], key_len: usize) -> Secrets {
        let hk = Hkdf::extract(transcript_hash, &[self.ikm()]);
        let key_len = key_len.min(MAX_KEY_LEN);
        let mut s = Secrets {
            i2r: [0; MAX_KEY_LEN],
            r2i: [0; MAX_KEY_LEN],
            key_len,
            confirm: [0; 32],
            key_id: 0,
            th: *transcript_hash,
        };
        expand(&hk, I2R_LABEL, transcript_hash, &mut s.i2r[..key_len]);
        expand(&hk, R2I_LABEL, transcript_hash, &mut s.r2i[..key_len]);
        expand(&hk, CONFIRM_LABEL, transcript_hash, &mut s.confirm);
        let mut id = [0u8; 4];
        expand(&hk, KEY_ID_LABEL, transcript_hash, &mut id[1..]);
        s.key_id = u32::from_be_bytes(id).max(1);
        s
    }
}

impl core::fmt::Debug for Shared {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Shared").finish_non_exhaustive()
    }
}

fn expand(hk: &Hkdf, label: &[u8], th: &[u8; HASH_LEN], out: &mut [u8]) {
    // HKDF-SHA-256 can expand to 255 * 32 bytes; every output here is at most 32.
    if hk.expand(&[label, th], out).is_err() {
        out.fill(0);
    }
}

/// The derived secrets: the last state of the chain. Zeroized on drop.
#[derive(Zeroize, ZeroizeOnDrop)]
pub struct Secrets {
    i2r: [u8; MAX_KEY_LEN],
    r2i: [u8; MAX_KEY_LEN],
    key_len: usize,
    confirm: [u8; 32],
    key_id: u32,
    th: [u8; HASH_LEN],
}

impl Secrets {
    /// The initiator → responder key.
    pub fn i2r(&self) -> &[u8] {
        &self.i2r[..self.key_len]
    }

    /// The responder → initiator key.
    pub fn r2i(&self) -> &[u8] {
        &self.r2i[..self.key_len]
    }

    /// The 24-bit key id carried in the PSP security-number field of data frames.
    pub fn key_id(&self) -> u32 {
        self.key_id
    }

    /// The transcript hash the secrets were derived from.
    pub fn transcript_hash(&self) -> &[u8; HASH_LEN] {
        &self.th
    }

    /// The confirmation tag `role` sends.
    pub fn tag(&self, role: Role) -> [u8; HASH_LEN] {
        let label = match role {
            Role::Initiator => TAG_I_LABEL,
            Role::Responder => TAG_R_LABEL,
        };
        HmacSha256Key::new(&self.confirm).mac(&[label, &self.th])
    }

    /// Whether `tag` is the one `role` must send, compared in constant time.
    pub fn check_tag(&self, role: Role, tag: &[u8; HASH_LEN]) -> bool {
        bool::from(self.tag(role).ct_eq(tag))
    }
}

impl core::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Secrets")
            .field("key_id", &self.key_id)
            .finish_non_exhaustive()
    }
}

/// `SHA-256("psp-sep-v1 smkex" || TH)`: what the responder sends on path 2.
pub fn smkex_hash(transcript_hash: &[u8; HASH_LEN]) -> [u8; HASH_LEN] {
    let mut h = Sha256::new();
    h.update(SMKEX_LABEL);
    h.update(transcript_hash);
    h.finalize().into()
}

/// Whether two SMKEX hashes are equal, in constant time.
pub fn smkex_hash_eq(a: &[u8; HASH_LEN], b: &[u8; HASH_LEN]) -> bool {
    bool::from(a.ct_eq(b))
}

/// Everything both sides hash: the six messages that carry public keying material, each with
/// the path it went on (the sender's choice, the receiver's observation).
///
/// The NonceReply enters with its hash field zeroed (the hash is computed over the rest).
#[derive(Clone, Copy, Debug)]
pub struct Transcript {
    /// (message, path) in the fixed order Request, Accept, Share, Nonce, ShareReply, NonceReply.
    pub parts: [(Repr, PathId); 6],
}

impl Transcript {
    /// `SHA-256("psp-sep-v1 transcript" || for each part: path || len (u16 BE) || message)`.
    pub fn hash(&self) -> [u8; HASH_LEN] {
        let mut h = Sha256::new();
        h.update(TRANSCRIPT_LABEL);
        let mut buf = [0u8; MAX_MESSAGE_LEN];
        for (repr, path) in &self.parts {
            let mut repr = *repr;
            if let Body::NonceReply { hash, .. } = &mut repr.body {
                *hash = [0; HASH_LEN];
            }
            let n = repr.emit(&mut buf);
            h.update([path.0]);
            h.update((n as u16).to_be_bytes());
            h.update(&buf[..n]);
        }
        h.finalize().into()
    }
}

/// A zeroizing SMKEX nonce.
#[derive(Clone, Zeroize, ZeroizeOnDrop)]
pub(crate) struct NonceBytes(pub(crate) [u8; NONCE_LEN]);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_sides_agree_with_and_without_static_keys() {
        let si = StaticKey::from_bytes([0x11; 32]);
        let sr = StaticKey::from_bytes([0x22; 32]);
        for (own_i, own_r) in [(false, false), (false, true), (true, false), (true, true)] {
            let ei = Ephemeral::from_bytes([1; 32]);
            let er = Ephemeral::from_bytes([2; 32]);
            let (pi, pr) = (ei.public_share(), er.public_share());
            let si_pub = own_i.then(|| si.public_key());
            let sr_pub = own_r.then(|| sr.public_key());
            let a = ei
                .complete(Role::Initiator, &pr, own_i.then_some(&si), sr_pub.as_ref())
                .unwrap();
            let b = er
                .complete(Role::Responder, &pi, own_r.then_some(&sr), si_pub.as_ref())
                .unwrap();
            assert_eq!(a.ikm(), b.ikm());
            assert_eq!(a.ikm().len(), 32 * (1 + own_i as usize + own_r as usize));
            let (a, b) = (a.derive(&[7; 32], 16), b.derive(&[7; 32], 16));
            assert_eq!(a.i2r(), b.i2r());
            assert_eq!(a.r2i(), b.r2i());
            assert_ne!(a.i2r(), a.r2i());
            assert!(b.check_tag(Role::Initiator, &a.tag(Role::Initiator)));
            assert!(!b.check_tag(Role::Responder, &a.tag(Role::Initiator)));
            assert_eq!(a.transcript_hash(), &[7; 32]);
        }
    }

    /// The ML-KEM secret comes first in `ikm`, before the X25519 outputs (X25519MLKEM768's
    /// order), and both sides agree.
    #[test]
    fn the_kem_secret_comes_first() {
        let kp = crate::handshake::kem::KemKeyPair::from_seed(&[5; 32], &[6; 32]);
        let (ct, k_r) = crate::handshake::kem::encapsulate(kp.encapsulation_key(), &[7; 32]);
        let k_i = kp.decapsulate(&ct);
        let sr = StaticKey::from_bytes([0x22; 32]);
        let ei = Ephemeral::from_bytes([1; 32]);
        let er = Ephemeral::from_bytes([2; 32]);
        let (pi, pr) = (ei.public_share(), er.public_share());
        let classical = Ephemeral::from_bytes([1; 32])
            .complete(Role::Initiator, &pr, None, Some(&sr.public_key()))
            .unwrap();
        let a = ei
            .complete_hybrid(
                Role::Initiator,
                Some(&k_i),
                &pr,
                None,
                Some(&sr.public_key()),
            )
            .unwrap();
        let b = er
            .complete_hybrid(Role::Responder, Some(&k_r), &pi, Some(&sr), None)
            .unwrap();
        assert_eq!(a.ikm(), b.ikm());
        assert_eq!(a.ikm().len(), 96);
        assert_eq!(&a.ikm()[..32], k_r.as_bytes());
        assert_eq!(&a.ikm()[32..], classical.ikm());
    }

    #[test]
    fn low_order_share_is_refused() {
        let e = Ephemeral::from_bytes([1; 32]);
        assert_eq!(
            e.complete(Role::Initiator, &[0; 32], None, None)
                .unwrap_err(),
            FailReason::BadShare
        );
    }

    #[test]
    fn debug_hides_secrets() {
        let e = Ephemeral::from_bytes([1; 32]);
        assert_eq!(format!("{e:?}"), "Ephemeral { .. }");
        let s = e
            .complete(
                Role::Initiator,
                &Ephemeral::from_bytes([2; 32]).public_share(),
                None,
                None,
            )
            .unwrap();
        assert_eq!(format!("{s:?}"), "Shared { .. }");
    }

    /// A static key prints as its public key, never its secret.
    #[test]
    fn a_static_key_prints_its_public_key_only() {
        let k = StaticKey::from_bytes([0x5a; 32]);
        let shown = alloc::format!("{k:?}");
        assert_eq!(shown, alloc::format!("StaticKey({:?})", k.public_key()));
        assert!(!shown.contains("90, 90, 90"), "the secret's bytes: {shown}");
    }
}
