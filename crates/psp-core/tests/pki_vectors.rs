//! The certificate and revocation-list vectors rebuilt from the layout in the `pki` module docs
//! alone (crates/psp-core/src/pki/{cert,revocation}.rs): the bytes are pushed one field at a
//! time, the digest is SHA-256(label || body) from `sha2`, the signature Ed25519 from
//! `ed25519-dalek`. psp-core is used only to compare: its `sign` must give the same bytes, its
//! `parse` and `verify` must accept them. The hex constants are copied from the `VECTOR`s of
//! the unit tests; `print_vectors_for_docs` prints them as a document can quote them
//! (`cargo test -p psp-core --test pki_vectors -- --nocapture`).
#![allow(missing_docs)]

use ed25519_dalek::{Signature, Signer, SigningKey, Verifier};
use sha2::{Digest, Sha256};

/// The certificate: CA seed 0xca×32, host seed 0x01×32, the fields of `host_fields()`.
const CERT_HEX: &str = concat!(
    "01020000000000000003000000006553f10000000000713fb3008a88e3dd7409",
    "f195fd52db2d3cba5d72ca6709bf1d94121bf3748801b40f6f5c0a06686f7374",
    "2d310102000000000102040a0000011806fd0000000000000000000000000000",
    "01404fafc7ff4bf9e63ef761a6d4c91d407e69490538551dd7e69d0645bfd157",
    "aef0c6f9c38b74ac42b6e7c8c6d302c80a95fb29cced1133e52ee23063a41cc0",
    "ac0d",
);

/// The revocation list: CA seed 0xca×32, list 2 issued at 1,800,000,000 revoking 3 and 9.
const CRL_HEX: &str = concat!(
    "01030000000000000002000000006b49d2000002000000000000000300000000",
    "000000091db2ccf70fae913bc567df40ecbe5134ac3ebe687e15c624ee7813c9",
    "5445be612d6c2999198848c672cec32fbd0024c1c4f08fcd003e4e540ffacd31",
    "c113c00d",
);

const CA_SEED: [u8; 32] = [0xca; 32];
const HOST_SEED: [u8; 32] = [0x01; 32];
const NOW: u64 = 1_800_000_000;

/// Appends the Ed25519 signature by `ca` over SHA-256(`label` || `body`) and checks it.
fn signed(label: &[u8], mut body: Vec<u8>) -> Vec<u8> {
    let ca = SigningKey::from_bytes(&CA_SEED);
    let digest: [u8; 32] = Sha256::new()
        .chain_update(label)
        .chain_update(&body)
        .finalize()
        .into();
    let sig = ca.sign(&digest);
    ca.verifying_key().verify_strict(&digest, &sig).unwrap();
    body.extend_from_slice(&sig.to_bytes());
    body
}

/// The certificate, byte by byte from the layout table in cert.rs.
fn cert_by_hand() -> Vec<u8> {
    let host = SigningKey::from_bytes(&HOST_SEED).verifying_key();
    let mut b = Vec::new();
    b.push(1); // version
    b.push(0x02); // kind: host
    b.extend_from_slice(&3u64.to_be_bytes()); // serial
    b.extend_from_slice(&1_700_000_000u64.to_be_bytes()); // not before
    b.extend_from_slice(&1_900_000_000u64.to_be_bytes()); // not after
    assert_eq!(b.len(), 26);
    b.extend_from_slice(host.as_bytes()); // the host's Ed25519 public key
    assert_eq!(b.len(), 58);
    b.push(10); // key-server priority
    b.push(6); // name length
    assert_eq!(b.len(), 60);
    b.extend_from_slice(b"host-1");
    b.push(1); // MAC count
    b.extend_from_slice(&[0x02, 0x00, 0x00, 0x00, 0x00, 0x01]);
    b.push(2); // address count
    b.push(4); // 10.0.0.1/24
    b.extend_from_slice(&[10, 0, 0, 1]);
    b.push(24);
    b.push(6); // fd00::1/64
    b.extend_from_slice(&[0xfd, 0x00]);
    b.extend_from_slice(&[0; 13]);
    b.push(0x01);
    b.push(64);
    signed(b"psp-cert-v1", b)
}

/// The revocation list, byte by byte from the layout table in revocation.rs.
fn crl_by_hand() -> Vec<u8> {
    let mut b = Vec::new();
    b.push(1); // version
    b.push(0x03); // kind: revocation list
    b.extend_from_slice(&2u64.to_be_bytes()); // number
    b.extend_from_slice(&1_800_000_000u64.to_be_bytes()); // issued
    b.extend_from_slice(&2u16.to_be_bytes()); // count
    assert_eq!(b.len(), 20);
    b.extend_from_slice(&3u64.to_be_bytes()); // serials, increasing
    b.extend_from_slice(&9u64.to_be_bytes());
    signed(b"psp-crl-v1", b)
}

/// The same certificate from psp-core's API.
fn cert_by_psp_core() -> psp_core::pki::Certificate {
    use psp_core::pki::{CertFields, Certificate, Kind};
    let ca = psp_core::SigningKey::from_seed(&CA_SEED).unwrap();
    let host = psp_core::SigningKey::from_seed(&HOST_SEED)
        .unwrap()
        .public_key();
    let mut f = CertFields::new(Kind::Host, 3, *host.as_bytes(), "host-1");
    f.not_before = 1_700_000_000;
    f.not_after = 1_900_000_000;
    f.priority = 10;
    f.push_mac([0x02, 0, 0, 0, 0, 0x01]);
    f.push_addr("10.0.0.1".parse().unwrap(), 24);
    f.push_addr("fd00::1".parse().unwrap(), 64);
    Certificate::sign(&f, &ca).unwrap()
}

fn ca_public() -> psp_core::VerifyingKey {
    psp_core::SigningKey::from_seed(&CA_SEED)
        .unwrap()
        .public_key()
}

/// The hex as a document quotes it: 32 bytes a line, each line headed by its offset.
fn quoted(bytes: &[u8]) -> String {
    bytes
        .chunks(32)
        .enumerate()
        .map(|(i, c)| format!("{:04x}  {}\n", i * 32, hex::encode(c)))
        .collect()
}

#[test]
fn certificate_from_layout_matches_psp_core() {
    let hand = cert_by_hand();
    assert_eq!(hand.len(), 162);
    let core = cert_by_psp_core();
    assert_eq!(core.as_bytes(), &hand[..]);
    let parsed = psp_core::pki::Certificate::parse(&hand).unwrap();
    assert_eq!(parsed, core);
    assert_eq!(parsed.fields(), core.fields());
    parsed.verify(&ca_public(), NOW, 0).unwrap();
    // The host key in the certificate is the Ed25519 key of its seed, as psp-core derives it.
    let host = psp_core::SigningKey::from_seed(&HOST_SEED)
        .unwrap()
        .public_key();
    assert_eq!(&parsed.fields().public_key, host.as_bytes());
}

#[test]
fn revocation_list_from_layout_matches_psp_core() {
    use psp_core::pki::RevocationList;
    let hand = crl_by_hand();
    assert_eq!(hand.len(), 100);
    let ca = psp_core::SigningKey::from_seed(&CA_SEED).unwrap();
    let core = RevocationList::sign(2, NOW, &[9, 3, 9], &ca).unwrap();
    assert_eq!(core.as_bytes(), &hand[..]);
    let parsed = RevocationList::parse(&hand).unwrap();
    assert_eq!(parsed, core);
    parsed.verify(&ca_public()).unwrap();
    assert_eq!((parsed.number(), parsed.issued()), (2, NOW));
    assert_eq!(parsed.serials(), &[3, 9]);
}

/// The signatures also verify with `ed25519-dalek` alone, and only under their own label.
#[test]
fn signatures_verify_independently_and_are_label_bound() {
    let ca = SigningKey::from_bytes(&CA_SEED).verifying_key();
    for (bytes, label, other) in [
        (cert_by_hand(), &b"psp-cert-v1"[..], &b"psp-crl-v1"[..]),
        (crl_by_hand(), &b"psp-crl-v1"[..], &b"psp-cert-v1"[..]),
    ] {
        let (body, sig) = bytes.split_at(bytes.len() - 64);
        let sig = Signature::from_slice(sig).unwrap();
        let digest = |l: &[u8]| -> [u8; 32] {
            Sha256::new()
                .chain_update(l)
                .chain_update(body)
                .finalize()
                .into()
        };
        ca.verify(&digest(label), &sig).unwrap();
        assert!(ca.verify(&digest(other), &sig).is_err());
        // Not a signature over the body itself, unhashed.
        assert!(ca.verify(body, &sig).is_err());
    }
}

#[test]
fn print_vectors_for_docs() {
    let cert = cert_by_hand();
    let crl = crl_by_hand();
    println!("certificate ({} bytes):\n{}", cert.len(), quoted(&cert));
    println!("revocation list ({} bytes):\n{}", crl.len(), quoted(&crl));
    assert_eq!(hex::encode(&cert), CERT_HEX);
    assert_eq!(hex::encode(&crl), CRL_HEX);
}
