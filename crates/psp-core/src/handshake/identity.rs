//! A host's long-term identity: one Ed25519 seed that both signs group frames (the thesis'
//! digital-signature flag) and, converted to X25519, enters the SEP key derivation (seed 002
//! §10.1, Fig. 15).
//!
//! The conversion is the standard one (RFC 8032 and RFC 7748 share the scalar; libsodium's
//! `crypto_sign_ed25519_sk_to_curve25519`): the X25519 secret is the clamped first half of
//! SHA-512(seed), so the X25519 public key is the Montgomery form of the Ed25519 public key.
//! The way back from a Montgomery u-coordinate loses the sign of x; identities made by
//! [`Identity::generate`] have sign 0, so a peer that learnt only the X25519 key in a handshake
//! (trust on first use) recovers the one Ed25519 key with [`ed25519_of`].

use curve25519_dalek::edwards::CompressedEdwardsY;
use curve25519_dalek::montgomery::MontgomeryPoint;
use zeroize::Zeroizing;

use super::StaticKey;
use crate::crypto::{KeyError, SigningKey};

/// A host's long-term keys, from one 32-byte Ed25519 seed. The seed is zeroized on drop.
pub struct Identity {
    seed: Zeroizing<[u8; 32]>,
    public: [u8; 32],
}

/// Why a seed is not an identity.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdentityError {
    /// The signing backend refused the seed.
    Key(KeyError),
    /// The public key's x has sign 1: not made by [`Identity::generate`], and a peer could not
    /// recover it from the X25519 key.
    OddSign,
    /// 32 bytes that are no Ed25519 public key (not a point of the curve).
    NotAKey,
}

impl core::fmt::Display for IdentityError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Key(e) => write!(f, "{e}"),
            Self::OddSign => f.write_str(
                "not an identity key made by `keygen --identity` (public key sign bit set)",
            ),
            Self::NotAKey => f.write_str("not an Ed25519 public key (not a curve point)"),
        }
    }
}

impl core::error::Error for IdentityError {}

impl Identity {
    /// The identity of `seed`.
    ///
    /// # Errors
    /// [`IdentityError::OddSign`] for a seed [`generate`](Self::generate) would not have made.
    pub fn from_seed(seed: [u8; 32]) -> Result<Self, IdentityError> {
        let seed = Zeroizing::new(seed);
        let signing = SigningKey::from_seed(&seed).map_err(IdentityError::Key)?;
        let public = *signing.public_key().as_bytes();
        if public[31] & 0x80 != 0 {
            return Err(IdentityError::OddSign);
        }
        Ok(Self { seed, public })
    }

    /// A new identity from `fill`, a source of random bytes (draws until the public key has
    /// sign 0: two draws on average).
    ///
    /// # Errors
    /// The backend refused every one of 64 seeds (a broken RNG).
    pub fn generate(mut fill: impl FnMut(&mut [u8; 32])) -> Result<Self, IdentityError> {
        let mut last = IdentityError::OddSign;
        for _ in 0..64 {
            let mut seed = Zeroizing::new([0u8; 32]);
            fill(&mut seed);
            match Self::from_seed(*seed) {
                Ok(id) => return Ok(id),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// A new identity drawn from `rng` (e.g. [`OsRng`](rand_core::OsRng) with the `std`
    /// feature): [`generate`](Self::generate) with the RNG's bytes.
    ///
    /// # Errors
    /// As [`generate`](Self::generate).
    pub fn random(rng: &mut dyn rand_core::CryptoRngCore) -> Result<Self, IdentityError> {
        Self::generate(|seed| rng.fill_bytes(seed))
    }

    /// The seed (for writing the identity file).
    pub fn seed(&self) -> &[u8; 32] {
        &self.seed
    }

    /// The Ed25519 public key: what peers pin.
    pub fn public_key(&self) -> [u8; 32] {
        self.public
    }

    /// The key that signs this host's group frames (a new copy per call).
    ///
    /// # Errors
    /// Never for an identity (its seed was accepted once); the backend's error otherwise.
    pub fn signing_key(&self) -> Result<SigningKey, KeyError> {
        SigningKey::from_seed(&self.seed)
    }

    /// The X25519 form of the identity, for the handshake.
    pub fn static_key(&self) -> StaticKey {
        StaticKey::from_bytes(*expanded_scalar(&self.seed))
    }
}

impl core::fmt::Debug for Identity {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_tuple("Identity").field(&self.public).finish()
    }
}

/// The first half of SHA-512(seed), the Ed25519 secret scalar before clamping (RFC 8032
/// §5.1.5), computed with `sha2::compress512` on a block and a state this function wipes (the
/// `Sha512` hasher keeps its state in memory it never zeroizes).
fn expanded_scalar(seed: &[u8; 32]) -> Zeroizing<[u8; 32]> {
    // FIPS 180-4 §5.3.5.
    const IV: [u64; 8] = [
        0x6a09_e667_f3bc_c908,
        0xbb67_ae85_84ca_a73b,
        0x3c6e_f372_fe94_f82b,
        0xa54f_f53a_5f1d_36f1,
        0x510e_527f_ade6_82d1,
        0x9b05_688c_2b3e_6c1f,
        0x1f83_d9ab_fb41_bd6b,
        0x5be0_cd19_137e_2179,
    ];
    // One 128-byte block: the seed, 0x80, zeros, the 128-bit length in bits (256).
    let mut block = Zeroizing::new([0u8; 128]);
    block[..32].copy_from_slice(seed);
    block[32] = 0x80;
    block[126] = 0x01;
    let mut state = Zeroizing::new(IV);
    sha2::compress512(
        &mut state,
        core::slice::from_ref(sha2::digest::generic_array::GenericArray::from_slice(
            &block[..],
        )),
    );
    let mut scalar = Zeroizing::new([0u8; 32]);
    for (chunk, word) in scalar.chunks_exact_mut(8).zip(state.iter()) {
        chunk.copy_from_slice(&word.to_be_bytes());
    }
    scalar
}

/// The X25519 public key of an Ed25519 public key, or `None` if it is not a curve point.
pub fn x25519_of(ed25519: &[u8; 32]) -> Option<[u8; 32]> {
    let point = CompressedEdwardsY(*ed25519).decompress()?;
    Some(point.to_montgomery().to_bytes())
}

/// The Ed25519 public key (sign 0) whose X25519 form is `x25519`, or `None`.
pub fn ed25519_of(x25519: &[u8; 32]) -> Option<[u8; 32]> {
    let point = MontgomeryPoint(*x25519).to_edwards(0)?;
    Some(point.compress().to_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_pinned_by_its_ed25519_key_holds_the_x25519_form_the_handshake_checks() {
        let id = Identity::from_seed([0xa3; 32]).unwrap();
        let addr = core::net::IpAddr::from([10, 0, 0, 1]);
        let peer = super::super::Peer::new([2, 0, 0, 0, 0, 1], addr);
        let pinned = peer.pin_identity(id.public_key()).unwrap();
        assert_eq!(pinned.pinned_x25519, Some(id.static_key().public_key()));
        assert_ne!(
            pinned.pinned_x25519,
            Some(id.public_key()),
            "two different encodings"
        );
        // Not a curve point: refused, not silently pinned.
        let mut bad = [0xff; 32];
        bad[31] = 0x7f;
        assert!(
            (0u8..=255)
                .map(|b| {
                    bad[0] = b;
                    peer.pin_identity(bad)
                })
                .any(|r| r == Err(IdentityError::NotAKey))
        );
    }

    #[test]
    fn the_wiped_scalar_is_sha512_of_the_seed() {
        use sha2::{Digest, Sha512};
        for n in [0u8, 1, 0x5a, 0xff] {
            let seed = [n; 32];
            assert_eq!(expanded_scalar(&seed)[..], Sha512::digest(seed)[..32]);
        }
    }

    fn counter() -> impl FnMut(&mut [u8; 32]) {
        let mut n = 0u8;
        move |seed: &mut [u8; 32]| {
            n = n.wrapping_add(1);
            *seed = [n; 32];
        }
    }

    #[test]
    fn the_x25519_key_is_the_montgomery_form_and_comes_back() {
        let id = Identity::generate(counter()).unwrap();
        let x = id.static_key().public_key();
        assert_eq!(x25519_of(&id.public_key()), Some(x));
        assert_eq!(ed25519_of(&x), Some(id.public_key()));
    }

    #[test]
    fn odd_sign_seeds_are_refused() {
        let mut odd = 0;
        for n in 0..16u8 {
            match Identity::from_seed([n; 32]) {
                Ok(id) => assert_eq!(id.public_key()[31] & 0x80, 0),
                Err(e) => {
                    assert_eq!(e, IdentityError::OddSign);
                    odd += 1;
                }
            }
        }
        assert!((1..16).contains(&odd), "{odd} of 16 odd");
    }

    #[test]
    fn rfc8032_seed_signs_as_expected() {
        // RFC 8032 §7.1 TEST 1: the public key of this seed (it happens to have sign 0).
        let seed = hex_literal("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60");
        let id = Identity::from_seed(seed).unwrap();
        assert_eq!(
            id.public_key(),
            hex_literal("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")
        );
    }

    fn hex_literal(s: &str) -> [u8; 32] {
        let mut out = [0u8; 32];
        for (i, b) in out.iter_mut().enumerate() {
            *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap();
        }
        out
    }

    /// The seed written to the identity file gives back the same identity.
    #[test]
    fn the_seed_gives_back_the_identity() {
        let id = Identity::generate(counter()).unwrap();
        let again = Identity::from_seed(*id.seed()).unwrap();
        assert_eq!(again.public_key(), id.public_key());
        assert_ne!(id.seed(), &[0; 32]);
    }
}
