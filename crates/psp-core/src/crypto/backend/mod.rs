//! The libraries behind the AEAD suites and Ed25519: ring or RustCrypto, chosen by Cargo feature.
//!
//! Both backend modules offer the same two types, `Aead` and `Ed25519`, with the same methods.
//! [`super::aead::AeadKey`] and [`super::sign`]'s keys wrap the selected one and do every check
//! whose outcome must not depend on the library (key and tag lengths, wiping the buffer after a
//! failed open), so the public behaviour is the same whichever backend is built. With both
//! features on, ring is selected; the other stays reachable under `aead::backend` and
//! `sign::backend` for benches and cross-backend tests.
//!
//! This module holds no protocol logic (nonces, framing): only the calls into the libraries.

#[cfg(not(any(feature = "ring", feature = "rustcrypto")))]
compile_error!(
    "psp-core needs a crypto backend: enable the `ring` feature (the default; links `alloc`) or \
     `rustcrypto` (pure Rust, no_std without alloc), e.g. \
     `default-features = false, features = [\"rustcrypto\"]`"
);

#[cfg(feature = "ring")]
pub(crate) mod ring;
#[cfg(feature = "rustcrypto")]
pub(crate) mod rust_crypto;

#[cfg(feature = "ring")]
pub(crate) use self::ring as selected;
#[cfg(all(feature = "rustcrypto", not(feature = "ring")))]
pub(crate) use self::rust_crypto as selected;

/// Ring against RustCrypto, byte for byte, when both are built (`cargo test --workspace` builds
/// both: psp-benches turns `rustcrypto` on next to the default `ring`).
#[cfg(all(test, feature = "ring", feature = "rustcrypto"))]
mod tests {
    use super::ring::{Aead as RingAead, Ed25519 as RingEd25519};
    use super::rust_crypto::{Aead as RcAead, Ed25519 as RcEd25519};
    use crate::crypto::aead::{NONCE_LEN, TAG_LEN};
    use crate::crypto::sign::SIGNATURE_LEN;
    use crate::crypto::{CryptoError, KeyError, SuiteId};

    const AEAD_SUITES: [SuiteId; 3] = [
        SuiteId::Aes128Gcm,
        SuiteId::Aes256Gcm,
        SuiteId::ChaCha20Poly1305,
    ];

    /// The group order L of Ed25519, little-endian (RFC 8032 §5.1).
    const ORDER_LE: [u8; 32] = [
        0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde,
        0x14, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10,
    ];

    fn pair(suite: SuiteId, key: &[u8]) -> (RingAead, RcAead) {
        let key = &key[..suite.key_len()];
        (
            RingAead::new(suite, key).unwrap(),
            RcAead::new(suite, key).unwrap(),
        )
    }

    /// Seals with each backend, checks ciphertext and tag agree, opens each with the other.
    fn cross(suite: SuiteId, key: &[u8; 32], nonce: &[u8; NONCE_LEN], aad: &[u8], plain: &[u8]) {
        let (ring, rc) = pair(suite, key);
        let (mut by_ring, mut by_rc) = (plain.to_vec(), plain.to_vec());
        let ring_tag = ring.seal(nonce, aad, &mut by_ring).unwrap();
        let rc_tag = rc.seal(nonce, aad, &mut by_rc).unwrap();
        assert_eq!(by_ring, by_rc, "{suite}: ciphertexts differ");
        assert_eq!(ring_tag, rc_tag, "{suite}: tags differ");
        rc.open(nonce, aad, &mut by_ring, &ring_tag).unwrap();
        ring.open(nonce, aad, &mut by_rc, &rc_tag).unwrap();
        assert_eq!(by_ring, plain, "{suite}: rustcrypto opening ring's frame");
        assert_eq!(by_rc, plain, "{suite}: ring opening rustcrypto's frame");
    }

    #[test]
    fn aead_backends_agree_on_frame_sizes() {
        let key: [u8; 32] = core::array::from_fn(|i| (i * 29 + 5) as u8);
        let nonce: [u8; NONCE_LEN] = core::array::from_fn(|i| (i * 7) as u8);
        let plain: Vec<u8> = (0..9000).map(|i| (i * 13 + i / 256) as u8).collect();
        for suite in AEAD_SUITES {
            for len in [0, 1, 15, 16, 17, 63, 64, 65, 255, 1280, 1500, 9000] {
                cross(suite, &key, &nonce, b"psp header", &plain[..len]);
            }
        }
    }

    #[test]
    fn aead_backends_refuse_alike() {
        for suite in AEAD_SUITES {
            let (ring, rc) = pair(suite, &[9; 32]);
            let mut buf = *b"sixteen byte msg";
            let mut tag = ring.seal(&[1; NONCE_LEN], b"hdr", &mut buf).unwrap();
            tag[TAG_LEN - 1] ^= 1;
            let mut copy = buf;
            assert_eq!(
                ring.open(&[1; NONCE_LEN], b"hdr", &mut buf, &tag),
                Err(CryptoError::BadIcv)
            );
            assert_eq!(
                rc.open(&[1; NONCE_LEN], b"hdr", &mut copy, &tag),
                Err(CryptoError::BadIcv)
            );
        }
        for (suite, len) in [
            (SuiteId::Aes128Gcm, 32),
            (SuiteId::Aes256Gcm, 16),
            (SuiteId::ChaCha20Poly1305, 31),
            (SuiteId::BfCbcHmacSha1, 32),
        ] {
            assert_eq!(
                RingAead::new(suite, &[0; 32][..len]).err(),
                Some(KeyError::Rejected)
            );
            assert_eq!(
                RcAead::new(suite, &[0; 32][..len]).err(),
                Some(KeyError::Rejected)
            );
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

        #[test]
        fn aead_backends_agree(
            suite in proptest::sample::select(AEAD_SUITES.to_vec()),
            key in proptest::array::uniform32(proptest::num::u8::ANY),
            nonce in proptest::array::uniform12(proptest::num::u8::ANY),
            aad in proptest::collection::vec(proptest::num::u8::ANY, 0..48),
            plain in proptest::collection::vec(proptest::num::u8::ANY, 0..1600),
        ) {
            cross(suite, &key, &nonce, &aad, &plain);
        }

        #[test]
        fn ed25519_backends_agree(
            seed in proptest::array::uniform32(proptest::num::u8::ANY),
            msg in proptest::collection::vec(proptest::num::u8::ANY, 0..600),
        ) {
            let (ring, rc) = (RingEd25519::from_seed(&seed).unwrap(), RcEd25519::from_seed(&seed).unwrap());
            let public = ring.public_key();
            proptest::prop_assert_eq!(public, rc.public_key());
            let sig = ring.sign(&msg);
            proptest::prop_assert_eq!(sig, rc.sign(&msg));
            proptest::prop_assert_eq!(RingEd25519::verify(&public, &msg, &sig), Ok(()));
            proptest::prop_assert_eq!(RcEd25519::verify(&public, &msg, &sig), Ok(()));
        }
    }

    #[test]
    fn ed25519_backends_refuse_alike() {
        let k = RingEd25519::from_seed(&[0x42; 32]).unwrap();
        let public = k.public_key();
        let sig = k.sign(b"frame");
        let both = |public: &[u8; 32], msg: &[u8], sig: &[u8; SIGNATURE_LEN]| {
            let ring = RingEd25519::verify(public, msg, sig);
            assert_eq!(ring, RcEd25519::verify(public, msg, sig));
            ring
        };
        assert_eq!(both(&public, b"frame", &sig), Ok(()));
        assert_eq!(both(&public, b"frame.", &sig), Err(CryptoError::BadIcv));
        let mut flipped = sig;
        flipped[40] ^= 2;
        assert_eq!(both(&public, b"frame", &flipped), Err(CryptoError::BadIcv));
        // S + L: the same scalar mod L, but not canonical (RFC 8032 §5.1.7 requires S < L).
        let mut malleable = sig;
        let mut carry = 0u16;
        for (s, l) in malleable[32..].iter_mut().zip(ORDER_LE) {
            let sum = u16::from(*s) + u16::from(l) + carry;
            *s = sum as u8;
            carry = sum >> 8;
        }
        assert_eq!(carry, 0);
        assert_eq!(
            both(&public, b"frame", &malleable),
            Err(CryptoError::BadIcv)
        );
        // Other keys (some no curve point at all).
        for y in 2u8..40 {
            let mut other = [0u8; 32];
            other[0] = y;
            assert_eq!(both(&other, b"frame", &sig), Err(CryptoError::BadIcv));
        }
        // The small-order identity key with the trivial signature (R = identity, S = 0): the
        // cofactorless equation holds for every message and neither library checks key order,
        // so both accept. Configured keys come from the operator; this pins that the backends
        // agree (dalek's `verify_strict` would refuse it and break the agreement).
        let mut identity = [0u8; 32];
        identity[0] = 1;
        let mut trivial = [0u8; SIGNATURE_LEN];
        trivial[0] = 1;
        assert_eq!(both(&identity, b"any message", &trivial), Ok(()));
    }
}
