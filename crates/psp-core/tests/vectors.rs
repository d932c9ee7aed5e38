//! Known-answer vectors for whole sealed PSP frames (`tests/vectors/psp_frames.json`).
//!
//! For every suite (and with/without the optional fields, one Ed25519-signed frame) the file fixes
//! the key, the inner Ethernet frame, the SN and the clock, and gives the exact sealed frame. The
//! test seals and compares, then opens and compares. Regenerate (only when the wire format changes
//! on purpose) with `cargo test -p psp-core --test vectors -- --ignored --nocapture print_vectors`
//! and paste the output into the JSON file and docs/PROTOCOL.md.
#![allow(missing_docs)]

use psp_core::crypto::sign::SigningKey;
use psp_core::crypto::{SuiteId, SuiteKey};
use psp_core::session::{Opener, OpenerConfig, Sealer, SealerConfig};
use psp_core::time::Instant;
use psp_core::wire::{Protocol, SecurityNumber, Seq};
use serde::{Deserialize, Serialize};

#[derive(Debug, Serialize, Deserialize)]
struct File {
    description: String,
    vectors: Vec<Vector>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Vector {
    name: String,
    suite: String,
    key: String,
    initial_seq: u32,
    now_ms: u64,
    security_number: Option<u32>,
    timestamps: bool,
    pad_to: u8,
    /// Ed25519 seed (hex) for the digital-signature flag.
    signer_seed: Option<String>,
    /// Seal with `seal_sub` (the inner frame's type field is the sub-protocol number).
    sub_protocol: bool,
    /// The inner Ethernet II frame (dst, src, type, data).
    inner: String,
    /// The sealed PSP frame.
    sealed: String,
}

const DST: &str = "020000000002";
const SRC: &str = "020000000001";

/// A 42-byte IPv4 ICMP echo request 10.0.0.1 -> 10.0.0.2 carrying "psp-test-vec01".
const IPV4_PING: &str =
    "4500002a1c46400040010a8b0a0000010a00000208005a45123400017073702d746573742d7665633031";

fn key_hex(suite: SuiteId) -> String {
    hex::encode((0..suite.key_len()).map(|i| i as u8).collect::<Vec<_>>())
}

fn spec(name: &str, suite: SuiteId) -> Vector {
    Vector {
        name: name.to_owned(),
        suite: suite.name().to_owned(),
        key: key_hex(suite),
        initial_seq: 0x1234_5678,
        now_ms: 1_700_000_000_123,
        security_number: None,
        timestamps: false,
        pad_to: 0,
        signer_seed: None,
        sub_protocol: false,
        inner: format!("{DST}{SRC}0800{IPV4_PING}"),
        sealed: String::new(),
    }
}

fn specs() -> Vec<Vector> {
    let mut v = Vec::new();
    for &suite in SuiteId::ALL {
        v.push(spec(&format!("{} plain", suite.name()), suite));
    }
    let mut x = spec(
        "bf-cbc-hmac-sha1 security number + timestamp",
        SuiteId::BfCbcHmacSha1,
    );
    x.security_number = Some(0x00ab_cdef);
    x.timestamps = true;
    v.push(x);
    let mut x = spec("bf-cbc-hmac-sha1 pad_to 32", SuiteId::BfCbcHmacSha1);
    x.pad_to = 32;
    v.push(x);
    let mut x = spec(
        "chacha20-poly1305 security number + timestamp",
        SuiteId::ChaCha20Poly1305,
    );
    x.security_number = Some(0x0000_0001);
    x.timestamps = true;
    v.push(x);
    let mut x = spec(
        "aes128-gcm timestamp, sub-protocol control",
        SuiteId::Aes128Gcm,
    );
    x.timestamps = true;
    x.sub_protocol = true;
    x.inner = format!("{DST}{SRC}0002feedbacc0ffee1");
    v.push(x);
    let mut x = spec("aes256-gcm 802.1Q-tagged inner frame", SuiteId::Aes256Gcm);
    // TCI 0x0064 (VLAN 100), then the real EtherType: PSP has no 802.1Q special case.
    x.inner = format!("{DST}{SRC}810000640800{IPV4_PING}");
    v.push(x);
    let mut x = spec("null-hmac-sha1 Ed25519-signed ARP", SuiteId::NullHmacSha1);
    x.signer_seed = Some(hex::encode([0x5a; 32]));
    // ARP request who-has 10.0.0.2 tell 10.0.0.1 (thesis §4.5: ARP travels inside PSP).
    x.inner = format!("ffffffffffff{SRC}08060001080006040001{SRC}0a0000010000000000000a000002");
    v.push(x);
    let mut x = spec("none Ed25519-signed (signature only)", SuiteId::None);
    x.signer_seed = Some(hex::encode([0x5a; 32]));
    v.push(x);
    v
}

fn suite_of(v: &Vector) -> SuiteId {
    SuiteId::from_name(&v.suite).expect("known suite")
}

fn signer_of(v: &Vector) -> Option<SigningKey> {
    v.signer_seed.as_ref().map(|s| {
        let seed: [u8; 32] = hex::decode(s).unwrap().try_into().unwrap();
        SigningKey::from_seed(&seed).unwrap()
    })
}

fn security_number(v: &Vector) -> Option<SecurityNumber> {
    v.security_number.map(|n| SecurityNumber::new(n).unwrap())
}

fn seal(v: &Vector) -> Vec<u8> {
    let suite = suite_of(v);
    let key = SuiteKey::new(suite, &hex::decode(&v.key).unwrap()).unwrap();
    let cfg = SealerConfig::new()
        .with_security_number(security_number(v))
        .with_timestamps(v.timestamps)
        .with_pad_to(v.pad_to)
        .with_allow_none(suite == SuiteId::None);
    let mut sealer = Sealer::new(key, Seq(v.initial_seq), cfg).unwrap();
    if let Some(signer) = signer_of(v) {
        sealer = sealer.with_signer(signer);
    }
    let inner = hex::decode(&v.inner).unwrap();
    let now = Instant::from_millis(v.now_ms);
    let mut out = vec![0u8; 2048];
    let sealed = if v.sub_protocol {
        let proto = Protocol::from(u16::from_be_bytes([inner[12], inner[13]]));
        sealer
            .seal_sub(
                now,
                inner[0..6].try_into().unwrap(),
                inner[6..12].try_into().unwrap(),
                proto,
                &inner[14..],
                &mut out,
            )
            .unwrap()
    } else {
        sealer.seal(now, &inner, &mut out).unwrap()
    };
    sealed.to_vec()
}

fn load() -> File {
    let text = include_str!("vectors/psp_frames.json");
    serde_json::from_str(text).expect("valid JSON")
}

#[test]
fn seal_matches_vectors() {
    let file = load();
    assert!(file.vectors.len() >= SuiteId::ALL.len() + 4);
    for suite in SuiteId::ALL {
        assert!(
            file.vectors.iter().any(|v| v.suite == suite.name()),
            "no vector for {suite}"
        );
    }
    for v in &file.vectors {
        assert_eq!(hex::encode(seal(v)), v.sealed, "{}", v.name);
    }
}

#[test]
fn open_matches_vectors() {
    for v in &load().vectors {
        let suite = suite_of(v);
        let key = SuiteKey::new(suite, &hex::decode(&v.key).unwrap()).unwrap();
        let cfg = OpenerConfig::new()
            .with_security_number(security_number(v))
            .with_require_timestamp(v.timestamps)
            .with_allow_none(suite == SuiteId::None);
        let mut opener = Opener::new(key, cfg).unwrap();
        if let Some(signer) = signer_of(v) {
            opener = opener.with_verifier(signer.public_key());
        }
        let mut frame = hex::decode(&v.sealed).unwrap();
        let now = Instant::from_millis(v.now_ms + 500);
        let opened = opener.open(now, &mut frame).expect(&v.name);
        assert_eq!(hex::encode(opened.frame()), v.inner, "{}", v.name);
        assert_eq!(opened.seq(), Seq(v.initial_seq));
        let mut again = hex::decode(&v.sealed).unwrap();
        assert!(opener.open(now, &mut again).is_err(), "{} replayed", v.name);
    }
}

/// Prints the vector file for the current implementation.
#[test]
#[ignore = "generator: run by hand when the wire format changes on purpose"]
fn print_vectors() {
    let vectors = specs()
        .into_iter()
        .map(|mut v| {
            v.sealed = hex::encode(seal(&v));
            v
        })
        .collect();
    let file = File {
        description: "PSP sealed-frame known answers: seal `inner` (an Ethernet II frame) with \
                      the given suite, key (hex), initial SN, clock (ms since the Unix epoch) and \
                      options; the result is `sealed`. See docs/PROTOCOL.md."
            .to_owned(),
        vectors,
    };
    println!("{}", serde_json::to_string_pretty(&file).unwrap());
}
