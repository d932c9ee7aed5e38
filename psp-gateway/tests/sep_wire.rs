//! The live daemons' handshake read off the wire and checked against docs/SESSIONS.md (root,
//! real namespaces): two hosts with identities on two raw paths establish a session while
//! both hosts' uplinks are captured. Every handshake frame is opened under the group key with the
//! sender's pinned identity, and every message is checked field by field against the
//! specification's tables (header, body lengths, flags, addresses, suite list, long-term keys,
//! sub-protocol and path per message type, identical retransmissions); the SMKEX hash of each
//! complete handshake is recomputed from the captured messages with the documented transcript
//! (path byte 0x00 for path 1, 0x01 for path 2); and the data frames of both directions carry
//! the same key id. The deterministic vectors are in `crates/psp-core/tests/sep_exchange.rs`;
//! this test shows the daemon is what they describe.

mod common;

use core::time::Duration;
use std::collections::BTreeMap;

use common::{PacketSocket, Testbed, TestbedOptions};
use psp_core::crypto::{SuiteId, SuiteKey, VerifyingKey};
use psp_core::handshake::identity::x25519_of;
use psp_core::protect::{Opener, OpenerConfig};
use psp_core::time::Instant as PspInstant;
use psp_core::wire::Frame;
use sha2::{Digest, Sha256};

const ETH_P_PSP: u16 = 0x1982;

/// Body length of each message type (SESSIONS.md, "Header"), `n` suites, long-term key or not.
fn body_len(ty: u8, body: &[u8]) -> usize {
    let key = |flags: u8| if flags & 0x04 != 0 { 32 } else { 0 };
    match ty {
        0x01 => 61 + usize::from(body[60]) + key(body[12]),
        0x02 => 2 + key(body[0]),
        0x03 => 1,
        0x04 | 0x05 => 36,
        0x06 | 0x08 | 0x09 => 32,
        0x07 => 64,
        _ => panic!("unknown message type {ty:#04x}"),
    }
}

/// The 17-byte network address of 10.77.0.`n`.
fn addr(n: u8) -> [u8; 17] {
    let mut a = [0u8; 17];
    a[..5].copy_from_slice(&[4, 10, 77, 0, n]);
    a
}

/// One captured handshake message.
struct Msg {
    /// Index of the uplink it was captured on: 0 (path 1) or 1 (path 2).
    path: u8,
    protocol: u16,
    src: [u8; 6],
    dst: [u8; 6],
    bytes: Vec<u8>,
}

#[test]
fn root_the_daemons_handshake_follows_sessions_md() {
    let tb = Testbed::up(TestbedOptions {
        suite: SuiteId::Aes128Gcm.name().into(),
        session: true,
        paths: 2,
        identity: true,
        ..TestbedOptions::default()
    });
    // Each host's uplinks, receive side: what the peer put on the wire. (Frames a daemon sends
    // bypass the packet taps of its own namespace.)
    let caps: Vec<(u8, PacketSocket)> = ["vm1", "vm2"]
        .iter()
        .flat_map(|vm| {
            let ns = tb.ns(vm);
            [(0, "up0"), (1, "up1")]
                .map(|(path, ifname)| (path, PacketSocket::open(&ns, ifname, ETH_P_PSP)))
        })
        .collect();
    let _vm1 = tb.start(1);
    let _vm2 = tb.start(2);
    tb.ping_until_up(1, 2, Duration::from_secs(10));
    let ping = tb.ping(1, 2, 3);
    assert_eq!(ping.received, 3, "the session carries traffic");

    let group = tb.key("group");
    let pubs: BTreeMap<[u8; 6], [u8; 32]> = [1u8, 2]
        .iter()
        .map(|&n| {
            let text = std::fs::read_to_string(tb.dir().join(format!("vm{n}.pub"))).unwrap();
            let key: [u8; 32] = hex::decode(text.trim()).unwrap().try_into().unwrap();
            (Testbed::mac(n), key)
        })
        .collect();
    let mut msgs = Vec::new();
    // Key ids of the frames under session keys, by sender.
    let mut key_ids: BTreeMap<[u8; 6], Vec<u32>> = BTreeMap::new();
    for (path, cap) in &caps {
        for c in cap.recv_for(Duration::from_millis(300)) {
            if c.outgoing {
                continue;
            }
            let f = c.data;
            let dst: [u8; 6] = f[..6].try_into().unwrap();
            let src: [u8; 6] = f[6..12].try_into().unwrap();
            let Some(pin) = pubs.get(&src) else {
                continue;
            };
            if dst[0] & 1 == 1 {
                continue; // ARP and broadcast under the group key
            }
            let view = Frame::new_checked(&f[..], 0).expect("a PSP frame");
            if let Some(id) = view.security_number() {
                key_ids.entry(src).or_default().push(id.get());
                continue;
            }
            // A handshake message: the group key, signed by the sender's identity.
            let key = SuiteKey::new(SuiteId::Aes128Gcm, &group).unwrap();
            let mut opener = Opener::new(key, OpenerConfig::new())
                .unwrap()
                .with_verifier(VerifyingKey::from_bytes(*pin));
            let mut frame = f.clone();
            let opened = opener
                .open(PspInstant::from_millis(0), &mut frame)
                .expect("a unicast group frame of a host opens and verifies under its pin");
            assert!(f[14] & 0x02 != 0, "signed");
            msgs.push(Msg {
                path: *path,
                protocol: u16::from(opened.protocol()),
                src,
                dst,
                bytes: opened.payload().to_vec(),
            });
        }
    }
    let seen: Vec<(u8, u8, bool)> = msgs
        .iter()
        .map(|m| (m.path, m.bytes[1], m.src == Testbed::mac(1)))
        .collect();
    assert!(
        msgs.len() >= 8,
        "{} handshake messages captured: {seen:?}; key ids {key_ids:?}",
        msgs.len()
    );

    // Each message against the tables; grouped by handshake (initiator id).
    let mut handshakes: BTreeMap<[u8; 8], BTreeMap<u8, &Msg>> = BTreeMap::new();
    for m in &msgs {
        let b = &m.bytes;
        assert_eq!(b[0], 2, "version");
        let ty = b[1];
        assert_eq!(
            b.len(),
            18 + body_len(ty, &b[18..]),
            "type {ty:#04x} length"
        );
        let zero_responder = b[10..18] == [0; 8];
        assert_eq!(
            zero_responder,
            ty == 0x01,
            "responder id zero only in a Request"
        );
        let (protocol, path) = match ty {
            0x06 | 0x07 => (0x0004, 1),
            0x08 => (0x0001, 1),
            _ => (0x0001, 0),
        };
        assert_eq!((m.protocol, m.path), (protocol, path), "type {ty:#04x}");
        let body = &b[18..];
        match ty {
            0x01 => {
                let secs = u64::from_be_bytes(body[..8].try_into().unwrap()) - (1 << 62);
                let nanos = u32::from_be_bytes(body[8..12].try_into().unwrap());
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_secs();
                assert!(secs.abs_diff(now) < 300 && nanos < 1_000_000_000, "TAI64N");
                assert_eq!(body[12..14], [0x05, 2], "flags two-path + key, 2 paths");
                assert_eq!(body[14..20], m.src, "initiator MAC");
                assert_eq!(body[20..26], m.dst, "responder MAC");
                let n = |mac: [u8; 6]| mac[5];
                assert_eq!(body[26..43], addr(n(m.src)));
                assert_eq!(body[43..60], addr(n(m.dst)));
                assert_eq!(
                    body[60..63],
                    [2, 0x03, 0x05],
                    "aes128-gcm, chacha20-poly1305"
                );
                assert_eq!(body[63..95], x25519_of(&pubs[&m.src]).unwrap());
            }
            0x02 => {
                assert_eq!(body[..2], [0x05, 0x03], "two-path + key, aes128-gcm");
                assert_eq!(body[2..34], x25519_of(&pubs[&m.src]).unwrap());
            }
            0x04 | 0x05 => assert_eq!(body[..4], 3600u32.to_be_bytes(), "lifetime_s"),
            _ => {}
        }
        let id: [u8; 8] = b[2..10].try_into().unwrap();
        let slot = handshakes.entry(id).or_default();
        match slot.get(&ty) {
            // A retransmission: the same message.
            Some(first) => assert_eq!(first.bytes, m.bytes, "type {ty:#04x} repeated"),
            None => {
                slot.insert(ty, m);
            }
        }
    }

    // The SMKEX hash of each complete handshake, from the documented transcript.
    let mut complete = 0;
    for parts in handshakes.values() {
        let order = [0x01, 0x02, 0x04, 0x06, 0x05, 0x07];
        if !order.iter().all(|t| parts.contains_key(t)) {
            continue;
        }
        complete += 1;
        let initiator = parts[&0x01].src;
        for (ty, m) in parts {
            let from_initiator = matches!(ty, 0x01 | 0x04 | 0x06 | 0x08);
            assert_eq!(m.src == initiator, from_initiator, "sender of {ty:#04x}");
        }
        let th = |path_byte: fn(u8) -> u8| -> [u8; 32] {
            let mut h = Sha256::new();
            h.update(b"psp-sep-v1 transcript");
            for t in order {
                let mut m = parts[&t].bytes.clone();
                if t == 0x07 {
                    m[50..82].fill(0);
                }
                h.update([path_byte(parts[&t].path)]);
                h.update((m.len() as u16).to_be_bytes());
                h.update(&m);
            }
            h.finalize().into()
        };
        let smkex = |th: [u8; 32]| -> Vec<u8> {
            Sha256::new()
                .chain_update(b"psp-sep-v1 smkex")
                .chain_update(th)
                .finalize()
                .to_vec()
        };
        let sent = &parts[&0x07].bytes[50..82];
        assert_eq!(
            smkex(th(|p| p)),
            sent,
            "H over the transcript, path bytes 0 and 1"
        );
        assert_ne!(smkex(th(|p| p + 1)), sent, "not with path bytes 1 and 2");
    }
    assert!(complete >= 1, "a complete handshake was captured");

    // Both directions carry the session's key id.
    let ids = |n: u8| key_ids.get(&Testbed::mac(n)).cloned().unwrap_or_default();
    let (a, b) = (ids(1), ids(2));
    assert!(
        a.iter().any(|x| b.contains(x)),
        "a key id both directions use: {a:?} / {b:?}"
    );
}
