//! PSP frames: one vector per AEAD suite (crates/psp-core/tests/vectors/psp_frames.json) sealed,
//! compared byte for byte, opened back, and a replay and a flipped bit refused; the anti-replay
//! window; Ed25519 (RFC 8032 §7.1 test 2). [`SealOpen`] is the per-frame workload that the
//! Cortex-M program times.

use psp_core::crypto::sign::{SIGNATURE_LEN, SigningKey, VerifyingKey};
use psp_core::crypto::{SuiteId, SuiteKey};
use psp_core::protect::{DropReason, Opener, OpenerConfig, Sealer, SealerConfig};
use psp_core::replay::ReplayWindow;
use psp_core::time::Instant;
use psp_core::wire::Seq;

use crate::unhex;

/// The inner frame of every vector: an ICMP echo request, "psp-test-vec01".
const INNER: &str = "02000000000202000000000108004500002a1c46400040010a8b0a0000010a00000208005a45123400017073702d746573742d7665633031";
const KEY16: &str = "000102030405060708090a0b0c0d0e0f";
const KEY32: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

/// (suite, check name, key, the sealed frame at SN 0x12345678 and t = 1,700,000,000.123 s).
pub const VECTORS: &[(SuiteId, &str, &str, &str)] = &[
    (
        SuiteId::BfCbcHmacSha1,
        "psp vector bf-cbc-hmac-sha1",
        KEY32,
        "020000000002020000000001198201123456780d6756f1c97ded2a14d2327aff0eb752c9ba1d3aceb05519df1e279d80a5e605f7cce3c9773aef76e8fe842a8632051680b9cc21e3237f855272931f64944849ac3855e5",
    ),
    (
        SuiteId::Aes128Gcm,
        "psp vector aes128-gcm",
        KEY16,
        "0200000000020200000000011982011234567881c9018dc837beab562340307610c1d41ea656550d0a7b94b87ed5c320680ce72776d5a5bc7453abd4f8beec8d0f5004aec395b26e881a6a990aaa3314",
    ),
    (
        SuiteId::ChaCha20Poly1305,
        "psp vector chacha20-poly1305",
        KEY32,
        "02000000000202000000000119820112345678a1469935ab863e36c3689f9718e638f07415bb6860db990637ec8da1a9d671d48faf5b2987e928a90609fdbbf8876c17dab69047b993c61bf04c2cef8e",
    ),
];

/// Runs the frame, replay-window and Ed25519 checks.
pub fn check(report: &mut dyn FnMut(bool, &str)) {
    let mut w = ReplayWindow::default();
    let replay_ok = w.commit(10).is_ok() && w.commit(10).is_err() && w.commit(9).is_ok();
    report(replay_ok, "replay window");
    for (suite, name, key, sealed) in VECTORS {
        report(psp_vector(*suite, key, sealed), name);
    }
    report(ed25519_vector(), "ed25519 rfc 8032 test 2");
}

/// Seals the vector's inner frame, compares with the expected bytes, opens it back, and checks
/// that a replay and a flipped bit are refused.
fn psp_vector(suite: SuiteId, key_hex: &str, sealed_hex: &str) -> bool {
    let (mut key_buf, mut inner_buf, mut expect_buf, mut out) =
        ([0u8; 32], [0u8; 128], [0u8; 256], [0u8; 256]);
    let key_len = unhex(key_hex, &mut key_buf);
    let inner_len = unhex(INNER, &mut inner_buf);
    let expect_len = unhex(sealed_hex, &mut expect_buf);
    let (key, inner, expect) = (
        &key_buf[..key_len],
        &inner_buf[..inner_len],
        &expect_buf[..expect_len],
    );
    let now = Instant::from_millis(1_700_000_000_123);
    let (Ok(ks), Ok(ko)) = (SuiteKey::new(suite, key), SuiteKey::new(suite, key)) else {
        return false;
    };
    let Ok(mut sealer) = Sealer::new(ks, Seq(0x1234_5678), SealerConfig::default()) else {
        return false;
    };
    let Ok(mut opener) = Opener::new(ko, OpenerConfig::default()) else {
        return false;
    };
    let Ok(sealed) = sealer.seal(now, inner, &mut out) else {
        return false;
    };
    if sealed != expect {
        return false;
    }
    let len = sealed.len();
    let mut wire = [0u8; 256];
    wire[..len].copy_from_slice(expect);
    let mut replay = wire;
    let mut flipped = wire;
    flipped[20] ^= 1;
    // A flipped bit first (the replay check runs before the ICV, so it must be a fresh SN), then
    // the genuine frame, then its replay.
    let flip_refused = matches!(opener.open(now, &mut flipped[..len]),
        Err(e) if e.reason() == DropReason::BadIcv);
    let opened_ok = matches!(opener.open(now, &mut wire[..len]), Ok(o) if o.frame() == inner);
    let replay_refused = matches!(opener.open(now, &mut replay[..len]),
        Err(e) if e.reason() == DropReason::Replay);
    opened_ok && replay_refused && flip_refused
}

/// RFC 8032 §7.1 test 2: public key, signature, verification, and a refused altered message.
fn ed25519_vector() -> bool {
    let (mut seed, mut public, mut sig_want) = ([0u8; 32], [0u8; 32], [0u8; SIGNATURE_LEN]);
    unhex(
        "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
        &mut seed,
    );
    unhex(
        "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c",
        &mut public,
    );
    unhex(
        "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00",
        &mut sig_want,
    );
    let Ok(key) = SigningKey::from_seed(&seed) else {
        return false;
    };
    let mut sig = [0u8; SIGNATURE_LEN];
    key.sign(&[0x72], &mut sig);
    let vk = VerifyingKey::from_bytes(public);
    key.public_key() == vk
        && sig == sig_want
        && vk.verify(&[0x72], &sig).is_ok()
        && vk.verify(&[0x73], &sig).is_err()
}

/// The largest inner frame [`SealOpen`] takes.
pub const MAX_INNER: usize = 1514;

/// One sealer and one opener under the same key: [`SealOpen::round`] seals an inner frame and
/// opens it, the work a tunnel does per frame on each side.
pub struct SealOpen {
    sealer: Sealer,
    opener: Opener,
    inner: [u8; MAX_INNER],
    len: usize,
}

impl SealOpen {
    /// A pair for `suite` under a fixed test key, and an inner Ethernet frame of `len` bytes
    /// (clamped to 14..=[`MAX_INNER`]).
    pub fn new(suite: SuiteId, len: usize) -> Option<Self> {
        let key = [0x42u8; 32];
        let key = &key[..suite.key_len()];
        let sealer =
            Sealer::new(SuiteKey::new(suite, key).ok()?, Seq(1), SealerConfig::new()).ok()?;
        let opener = Opener::new(SuiteKey::new(suite, key).ok()?, OpenerConfig::new()).ok()?;
        let mut inner = [0u8; MAX_INNER];
        inner[..14].copy_from_slice(&[2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00]);
        Some(Self {
            sealer,
            opener,
            inner,
            len: len.clamp(14, MAX_INNER),
        })
    }

    /// Seals the inner frame and opens it; true if the opened frame equals it.
    pub fn round(&mut self, now: Instant) -> bool {
        let inner = &self.inner[..self.len];
        let mut out = [0u8; MAX_INNER + 128];
        let Ok(sealed) = self.sealer.seal(now, inner, &mut out) else {
            return false;
        };
        let n = sealed.len();
        matches!(self.opener.open(now, &mut out[..n]), Ok(o) if o.frame() == inner)
    }
}
