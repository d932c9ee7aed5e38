//! Certificates and revocation lists (`psp_core::pki`): parsing never panics; whatever parses
//! has one encoding (`as_bytes()` is the input, and the fields give back its length); the
//! accessors and the validity check never panic, even at the ends of time; and the only bytes
//! that verify under the fixed CA key are the two known-answer vectors (the seeds in
//! fuzz/corpus/pki), so a mutated signature never passes. The same bytes go in as a handshake
//! message, which may carry a certificate after the static key (flag 0x10): whatever parses
//! emits back to the input in exactly `buffer_len()` bytes, and a carried certificate goes
//! through the same checks. And as a membership message (sub-protocol 0x0007: announce,
//! revocation, state, broadcast key): whatever parses emits back to the input.
#![no_main]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::LazyLock;

use libfuzzer_sys::fuzz_target;
use psp_core::handshake::messages::{Body, Repr};
use psp_core::pki::{
    CertFields, Certificate, Kind, MAX_ADDRS, MAX_MACS, MAX_NAME_LEN, MAX_REVOKED, PkiError,
    RevocationList,
};
use psp_core::{SigningKey, VerifyingKey};

/// The CA key of the vectors (seed 0xca×32) and the two encodings it signed.
struct Known {
    ca: VerifyingKey,
    cert: Certificate,
    crl: RevocationList,
}

static KNOWN: LazyLock<Known> = LazyLock::new(|| {
    let ca = SigningKey::from_seed(&[0xca; 32]).expect("a valid seed");
    let host = SigningKey::from_seed(&[0x01; 32])
        .expect("a valid seed")
        .public_key();
    // The fields of `host_fields()` in crates/psp-core/src/pki/cert.rs.
    let mut f = CertFields::new(Kind::Host, 3, *host.as_bytes(), "host-1");
    f.not_before = 1_700_000_000;
    f.not_after = 1_900_000_000;
    f.priority = 10;
    f.push_mac([0x02, 0, 0, 0, 0, 0x01]);
    f.push_addr(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)), 24);
    f.push_addr(IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1)), 64);
    Known {
        ca: ca.public_key(),
        cert: Certificate::sign(&f, &ca).expect("the vector's fields"),
        crl: RevocationList::sign(2, 1_800_000_000, &[3, 9], &ca).expect("two serials"),
    }
});

fuzz_target!(|data: &[u8]| {
    if let Ok(c) = Certificate::parse(data) {
        check_cert(&c, data);
    }
    if let Ok(l) = RevocationList::parse(data) {
        check_crl(&l, data);
    }
    if let Ok(m) = psp_core::pki::message::Message::parse(data) {
        let len = m.buffer_len();
        let mut buf = vec![0u8; len];
        assert_eq!(
            m.emit(&mut buf),
            len,
            "membership emit wrote other than buffer_len"
        );
        assert_eq!(&buf[..], data, "membership parse/emit is not canonical");
        if let psp_core::pki::message::Message::BroadcastKey(k) = m {
            let _ = k.signed_digest();
        }
    }
    if let Ok(repr) = Repr::parse_bytes(data) {
        let len = repr.buffer_len();
        let mut buf = vec![0u8; len];
        assert_eq!(repr.emit(&mut buf), len, "emit wrote other than buffer_len");
        assert_eq!(&buf[..], data, "parse/emit is not canonical");
        let cert = match &repr.body {
            Body::Request(q) => q.cert,
            Body::Accept(a) => a.cert,
            _ => None,
        };
        if let Some(bytes) = cert
            && let Ok(c) = Certificate::parse(bytes.as_bytes())
        {
            check_cert(&c, bytes.as_bytes());
        }
    }
});

fn check_cert(c: &Certificate, input: &[u8]) {
    assert_eq!(c.as_bytes(), input, "a certificate re-encodes differently");
    let f = c.fields();
    assert_eq!(
        Certificate::encoded_len(f),
        input.len(),
        "fields disagree with the length"
    );
    assert_eq!(Certificate::parse(c.as_bytes()).as_ref(), Ok(c));
    let name = f.name();
    assert!(!name.is_empty() && name.len() <= MAX_NAME_LEN);
    assert!(
        name.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_')),
        "{name:?}"
    );
    assert!(f.macs().len() <= MAX_MACS && f.addrs().len() <= MAX_ADDRS);
    assert_eq!(f.kind == Kind::Host, !f.macs().is_empty());
    for m in f.macs() {
        assert!(f.names_mac(m));
    }
    for &(a, p) in f.addrs() {
        assert!(f.names_addr(a));
        assert!(p <= if a.is_ipv4() { 32 } else { 128 });
    }
    let _ = f.names_mac(&[0xff; 6]);
    let _ = f.names_addr(IpAddr::V6(Ipv6Addr::UNSPECIFIED));
    let _ = (c.x25519(), c.fingerprint(), format!("{c:?}"));

    // The window is inclusive at both ends, the allowance saturates.
    assert!(f.not_before <= f.not_after);
    assert_eq!(f.check_time(f.not_before, 0), Ok(()));
    assert_eq!(f.check_time(f.not_after, 0), Ok(()));
    if let Some(t) = f.not_before.checked_sub(1) {
        assert_eq!(f.check_time(t, 0), Err(PkiError::NotYetValid));
    }
    if let Some(t) = f.not_after.checked_add(1) {
        assert_eq!(f.check_time(t, 0), Err(PkiError::Expired));
    }
    for now in [0, 1, u64::MAX - 1, u64::MAX] {
        for skew in [0, 1, u64::MAX] {
            let _ = f.check_time(now, skew);
        }
    }
    assert_eq!(f.check_time(0, u64::MAX), Ok(()));
    assert_eq!(f.check_time(u64::MAX, u64::MAX), Ok(()));

    // With the whole of time allowed, `verify` is the signature check alone.
    let k = &*KNOWN;
    if c.verify(&k.ca, 0, u64::MAX).is_ok() {
        assert_eq!(c, &k.cert, "a certificate the CA never signed verifies");
    }
    let _ = c.verify(&k.ca, u64::MAX, 0);
}

fn check_crl(l: &RevocationList, input: &[u8]) {
    assert_eq!(l.as_bytes(), input, "a list re-encodes differently");
    let s = l.serials();
    assert!(s.len() <= MAX_REVOKED);
    assert_eq!(
        input.len(),
        20 + 8 * s.len() + 64,
        "serials disagree with the length"
    );
    assert!(s.windows(2).all(|w| w[0] < w[1]), "serials out of order");
    for &x in s {
        assert!(l.revokes(x));
    }
    for x in [0, 1, u64::MAX] {
        assert_eq!(l.revokes(x), s.contains(&x));
    }
    let _ = (l.number(), l.issued(), format!("{l:?}"));
    assert_eq!(RevocationList::parse(l.as_bytes()).as_ref(), Ok(l));
    let k = &*KNOWN;
    if l.verify(&k.ca).is_ok() {
        assert_eq!(l, &k.crl, "a list the CA never signed verifies");
    }
}
