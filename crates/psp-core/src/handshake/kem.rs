//! ML-KEM-768 (FIPS 203) for the hybrid handshake: the initiator's ephemeral key pair, the
//! responder's encapsulation, and the 32-byte shared secret that enters the key schedule before
//! the X25519 outputs (docs/SESSIONS.md, "Hybrid post-quantum sessions").
//!
//! Every function is deterministic: the key pair comes from the 64 seed bytes `d ‖ z`
//! (FIPS 203 `ML-KEM.KeyGen_internal`) and the encapsulation from the 32 bytes `m`
//! (`ML-KEM.Encaps_internal`), which the handshake draws from the caller's RNG. So the caller's
//! `rand_core` 0.6 RNG is all the randomness there is, and the vectors can fix it. The RustCrypto
//! `ml-kem` crate (0.2, no_std, no alloc) does the lattice arithmetic; this module only wraps
//! its types in ours, which zeroize on drop and print no secret.

use ml_kem::kem::Decapsulate;
use ml_kem::{B32, EncapsulateDeterministic, EncodedSizeUser, KemCore, MlKem768};
use zeroize::{Zeroize, ZeroizeOnDrop};

use super::messages::{KEM_CIPHERTEXT_LEN, KEM_KEY_LEN, KemCiphertext, KemKey};

/// Length of the shared secret ML-KEM-768 gives both sides.
pub const KEM_SECRET_LEN: usize = 32;

type DecapsulationKey = <MlKem768 as KemCore>::DecapsulationKey;
type EncapsulationKey = <MlKem768 as KemCore>::EncapsulationKey;

/// The ML-KEM shared secret (`K` of FIPS 203). Zeroized on drop.
#[derive(Zeroize, ZeroizeOnDrop)]
pub struct KemSecret(pub(crate) [u8; KEM_SECRET_LEN]);

impl KemSecret {
    /// The bytes (for known-answer tests).
    pub fn as_bytes(&self) -> &[u8; KEM_SECRET_LEN] {
        &self.0
    }
}

impl core::fmt::Debug for KemSecret {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("KemSecret").finish_non_exhaustive()
    }
}

/// The initiator's ephemeral ML-KEM-768 key pair. The decapsulation key zeroizes itself on drop
/// (`ml-kem`'s `zeroize` feature).
pub struct KemKeyPair {
    dk: DecapsulationKey,
    ek: KemKey,
}

impl KemKeyPair {
    /// The key pair of seed `d ‖ z` (FIPS 203 Algorithm 16, `ML-KEM.KeyGen_internal(d, z)`).
    pub fn from_seed(d: &[u8; 32], z: &[u8; 32]) -> Self {
        let mut d = B32::from(*d);
        let mut z = B32::from(*z);
        let (dk, ek) = MlKem768::generate_deterministic(&d, &z);
        d.as_mut_slice().zeroize();
        z.as_mut_slice().zeroize();
        let mut bytes = [0u8; KEM_KEY_LEN];
        bytes.copy_from_slice(ek.as_bytes().as_slice());
        Self {
            dk,
            // A key made by KeyGen has every coefficient reduced: it passes the modulus check.
            ek: KemKey(bytes),
        }
    }

    /// The encapsulation key the KemShare carries.
    pub fn encapsulation_key(&self) -> &KemKey {
        &self.ek
    }

    /// The shared secret in `ct` (FIPS 203 Algorithm 18; a ciphertext not made for this key
    /// gives a pseudo-random secret, never an error: implicit rejection).
    pub fn decapsulate(&self, ct: &KemCiphertext) -> KemSecret {
        let mut c = ml_kem::Ciphertext::<MlKem768>::default();
        c.as_mut_slice().copy_from_slice(&ct.0);
        // `Decapsulate` for ML-KEM never fails (its error type is `()` for the trait's sake).
        let Ok(mut k) = self.dk.decapsulate(&c) else {
            return KemSecret([0; KEM_SECRET_LEN]);
        };
        let mut out = KemSecret([0; KEM_SECRET_LEN]);
        out.0.copy_from_slice(k.as_slice());
        k.as_mut_slice().zeroize();
        out
    }
}

impl core::fmt::Debug for KemKeyPair {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("KemKeyPair")
            .field("ek", &self.ek)
            .finish_non_exhaustive()
    }
}

/// Encapsulates to `ek` with the 32 random bytes `m` (FIPS 203 Algorithm 17,
/// `ML-KEM.Encaps_internal(ek, m)`): the ciphertext for the KemShareReply and the secret.
pub fn encapsulate(ek: &KemKey, m: &[u8; 32]) -> (KemCiphertext, KemSecret) {
    let ek = EncapsulationKey::from_bytes(&ml_kem::Encoded::<EncapsulationKey>::from(ek.0));
    let mut m = B32::from(*m);
    let res = ek.encapsulate_deterministic(&m);
    m.as_mut_slice().zeroize();
    let mut ct = KemCiphertext([0; KEM_CIPHERTEXT_LEN]);
    let mut secret = KemSecret([0; KEM_SECRET_LEN]);
    // Encapsulation never fails (the error type is `()` for the trait's sake).
    if let Ok((c, mut k)) = res {
        ct.0.copy_from_slice(c.as_slice());
        secret.0.copy_from_slice(k.as_slice());
        k.as_mut_slice().zeroize();
    }
    (ct, secret)
}

/// The seed of the initiator's key pair, `d ‖ z`, drawn when the handshake starts. Zeroized.
#[derive(Zeroize, ZeroizeOnDrop)]
pub(crate) struct KemSeed(pub(crate) [u8; 64]);

impl KemSeed {
    pub(crate) fn key_pair(&self) -> KemKeyPair {
        let mut d = [0u8; 32];
        let mut z = [0u8; 32];
        d.copy_from_slice(&self.0[..32]);
        z.copy_from_slice(&self.0[32..]);
        let kp = KemKeyPair::from_seed(&d, &z);
        d.zeroize();
        z.zeroize();
        kp
    }
}

/// The responder's encapsulation randomness `m`, drawn when it answers the Request. Zeroized.
#[derive(Zeroize, ZeroizeOnDrop)]
pub(crate) struct KemCoins(pub(crate) [u8; 32]);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_sides_get_the_same_secret_and_a_tampered_ciphertext_another() {
        let kp = KemKeyPair::from_seed(&[1; 32], &[2; 32]);
        let (ct, k) = encapsulate(kp.encapsulation_key(), &[3; 32]);
        assert_eq!(kp.decapsulate(&ct).as_bytes(), k.as_bytes());
        let mut bad = ct;
        bad.0[100] ^= 1;
        let rejected = kp.decapsulate(&bad);
        assert_ne!(rejected.as_bytes(), k.as_bytes());
        // Implicit rejection is deterministic: the same wrong ciphertext, the same secret.
        assert_eq!(kp.decapsulate(&bad).as_bytes(), rejected.as_bytes());
    }

    #[test]
    fn a_generated_key_passes_the_modulus_check_and_a_reduced_one_fails() {
        let kp = KemKeyPair::from_seed(&[9; 32], &[8; 32]);
        let ek = *kp.encapsulation_key().as_bytes();
        assert!(KemKey::new(&ek).is_some());
        let mut bad = ek;
        // The first coefficient set to q = 3329 = 0xd01 (bytes 0x01, low nibble 0x0d).
        bad[0] = 0x01;
        bad[1] = (bad[1] & 0xf0) | 0x0d;
        assert!(KemKey::new(&bad).is_none());
        bad[0] = 0x00; // 3328 = q - 1 is fine.
        assert!(KemKey::new(&bad).is_some());
        // The last coefficient of t̂ (the high 12 bits of bytes 1149..1152) and ρ is free.
        let mut bad = ek;
        bad[1151] = 0xff; // 0xff·16 + (byte 1150 >> 4) >= 4080 > q
        assert!(KemKey::new(&bad).is_none());
        let mut fine = ek;
        fine[KEM_KEY_LEN - 1] = 0xff;
        assert!(KemKey::new(&fine).is_some());
    }

    #[test]
    fn debug_prints_no_secret() {
        let kp = KemKeyPair::from_seed(&[1; 32], &[2; 32]);
        let (_, k) = encapsulate(kp.encapsulation_key(), &[3; 32]);
        assert_eq!(format!("{k:?}"), "KemSecret { .. }");
        assert!(format!("{kp:?}").starts_with("KemKeyPair { ek: KemKey("));
    }
}
