//! The gateway's SEP written again from docs/SESSIONS.md and docs/PROTOCOL.md alone, with none
//! of psp-core's code: only `sha2`, `hmac`, `sha1`, `hkdf`, `x25519-dalek`, `aes-gcm`,
//! `ed25519-dalek` and, for the hybrid exchange, `ml-kem` (FIPS 203's `KeyGen_internal` and
//! `Encaps_internal`, which the docs name). From the inputs of each vector in `tests/vectors/sep_exchange.json` (seeds,
//! ephemeral secrets, nonces, ids, addresses, settings) it builds every handshake message, the
//! transcript hash, the key schedule, the confirmation tags, every PSP frame (AES-128-GCM under
//! the group key, Ed25519-signed) and the first frames under the session keys, and requires the
//! same bytes as the implementation (`tests/sep_exchange.rs` fixes those). Each step names the
//! section of the docs it follows. If this test needs a fact the docs do not give, the docs are
//! incomplete.
#![allow(missing_docs)]

use aes_gcm::aead::{AeadInPlace, KeyInit};
use aes_gcm::{Aes128Gcm, Nonce};
use ed25519_dalek::{Signer, SigningKey, Verifier};
use hmac::{Hmac, Mac};
use ml_kem::kem::Decapsulate;
use ml_kem::{B32, EncapsulateDeterministic, EncodedSizeUser, KemCore, MlKem768};
use serde_json::Value;
use sha2::{Digest, Sha256, Sha512};
use x25519_dalek::{PublicKey, StaticSecret};

fn load() -> Value {
    serde_json::from_str(include_str!("vectors/sep_exchange.json")).unwrap()
}

fn h(v: &Value) -> Vec<u8> {
    hex::decode(v.as_str().unwrap()).unwrap()
}

fn a32(v: &[u8]) -> [u8; 32] {
    v.try_into().unwrap()
}

fn sha256(parts: &[&[u8]]) -> [u8; 32] {
    let mut d = Sha256::new();
    for p in parts {
        d.update(p);
    }
    d.finalize().into()
}

fn hmac_sha256(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(key).unwrap();
    for p in parts {
        m.update(p);
    }
    m.finalize().into_bytes().into()
}

fn x25519(secret: &[u8], public: &[u8]) -> [u8; 32] {
    StaticSecret::from(a32(secret))
        .diffie_hellman(&PublicKey::from(a32(public)))
        .to_bytes()
}

fn x25519_public(secret: &[u8]) -> [u8; 32] {
    PublicKey::from(&StaticSecret::from(a32(secret))).to_bytes()
}

/// A host as the docs describe it ("Identities"): the Ed25519 seed signs; the X25519 long-term
/// secret is the first half of SHA-512(seed) (clamped by X25519).
struct Host {
    mac: [u8; 6],
    addr: [u8; 17],
    paths: u8,
    seed: Option<[u8; 32]>,
    ed_public: Option<[u8; 32]>,
    x_secret: Option<[u8; 32]>,
    x_public: Option<[u8; 32]>,
    e: Vec<u8>,
    share: [u8; 32],
    nonce: Vec<u8>,
    id: Vec<u8>,
    /// "Hybrid post-quantum sessions", Randomness: the initiator's `d || z`, the responder's `m`.
    kem_random: Option<Vec<u8>>,
    seq: u32,
}

/// "Addresses": family byte 4 then the IPv4 address and 12 zero bytes (or 6 and 16 bytes).
fn encode_addr(text: &str) -> [u8; 17] {
    let ip: core::net::Ipv4Addr = text.split('/').next().unwrap().parse().unwrap();
    let mut a = [0u8; 17];
    a[0] = 4;
    a[1..5].copy_from_slice(&ip.octets());
    a
}

fn host(v: &Value) -> Host {
    let seed = v["identity_seed"]
        .as_str()
        .map(|s| a32(&hex::decode(s).unwrap()));
    let ed_public = seed.map(|s| SigningKey::from_bytes(&s).verifying_key().to_bytes());
    let x_secret = seed.map(|s| a32(&Sha512::digest(s)[..32]));
    let e = h(&v["ephemeral_secret"]);
    Host {
        mac: hex::decode(v["mac"].as_str().unwrap())
            .unwrap()
            .try_into()
            .unwrap(),
        addr: encode_addr(v["address"].as_str().unwrap()),
        paths: v["paths"].as_u64().unwrap() as u8,
        seed,
        ed_public,
        x_secret,
        x_public: x_secret.map(|s| x25519_public(&s)),
        share: x25519_public(&e),
        e,
        nonce: h(&v["nonce"]),
        id: h(&v["handshake_id"]),
        kem_random: v["kem_random"].as_str().map(|s| hex::decode(s).unwrap()),
        seq: v["group_seq"].as_u64().unwrap() as u32,
    }
}

/// "Suite codes".
fn suite_code(name: &str) -> u8 {
    match name {
        "none" => 0,
        "null-hmac-sha1" => 1,
        "bf-cbc-hmac-sha1" => 2,
        "aes128-gcm" => 3,
        "aes256-gcm" => 4,
        "chacha20-poly1305" => 5,
        "scramble-hmac-sha1" => 6,
        _ => panic!("{name}"),
    }
}

/// "Header": version 2, type, initiator id, responder id (zero in a Request).
fn message(ty: u8, id_i: &[u8], id_r: Option<&[u8]>, body: &[&[u8]]) -> Vec<u8> {
    let mut m = vec![2, ty];
    m.extend(id_i);
    m.extend(id_r.unwrap_or(&[0; 8]));
    for b in body {
        m.extend(*b);
    }
    m
}

/// PROTOCOL.md §1, §1.2, §1.4 and SUITES.md (AEAD): a PSP frame under an AES-128-GCM key, with
/// an optional 24-bit security number and an optional Ed25519 signature.
fn psp_frame(
    key: &[u8],
    (dst, src): ([u8; 6], [u8; 6]),
    seq: u32,
    security_number: Option<u32>,
    proto: u16,
    data: &[u8],
    signer: Option<&[u8; 32]>,
) -> Vec<u8> {
    let mut clear = Vec::new();
    clear.extend(dst);
    clear.extend(src);
    clear.extend(0x1982u16.to_be_bytes());
    let vf = 0x01
        | if signer.is_some() { 0x02 } else { 0 }
        | if security_number.is_some() { 0x10 } else { 0 };
    clear.push(vf);
    clear.extend(seq.to_be_bytes());
    if let Some(n) = security_number {
        clear.extend(&n.to_be_bytes()[1..]);
    }
    // §1.2: the section is at least 3 + D bytes, and the whole frame at least 60 (block 1).
    let trailer = 16 + if signer.is_some() { 64 } else { 0 };
    let need = (3 + data.len()).max(60usize.saturating_sub(clear.len() + trailer));
    let pad = need - (3 + data.len());
    let mut section = Vec::new();
    section.extend(proto.to_be_bytes());
    section.push(pad as u8);
    section.extend(data);
    section.extend(vec![0u8; pad]);
    // SUITES.md: nonce = BIVN[0..12] XOR (src_mac || 00 00 || SN), BIVN = HMAC-SHA1(key, "PSP-BIVN").
    let bivn = bivn(key);
    let mut nonce = [0u8; 12];
    nonce[..6].copy_from_slice(&src);
    nonce[8..].copy_from_slice(&seq.to_be_bytes());
    for (n, b) in nonce.iter_mut().zip(&bivn) {
        *n ^= b;
    }
    let tag = Aes128Gcm::new_from_slice(key)
        .unwrap()
        .encrypt_in_place_detached(Nonce::from_slice(&nonce), &clear, &mut section)
        .unwrap();
    let mut frame = [clear, section, tag.to_vec()].concat();
    if let Some(seed) = signer {
        // §1.4: the signature is over SHA-256("psp-frame-sig-v1" || clear || section || ICV).
        let digest = sha256(&[b"psp-frame-sig-v1", &frame]);
        let sk = SigningKey::from_bytes(seed);
        let sig = sk.sign(&digest);
        sk.verifying_key().verify(&digest, &sig).unwrap();
        frame.extend(sig.to_bytes());
    }
    frame
}

fn bivn(key: &[u8]) -> [u8; 20] {
    let mut m = <Hmac<sha1::Sha1> as Mac>::new_from_slice(key).unwrap();
    m.update(b"PSP-BIVN");
    m.finalize().into_bytes().into()
}

struct Out {
    label: &'static str,
    from_initiator: bool,
    path: u8,
    proto: u16,
    seq: u32,
    payload: Vec<u8>,
    frame: Vec<u8>,
}

#[test]
fn the_docs_suffice_to_rebuild_every_exchange() {
    let file = load();
    let exchanges = file["exchanges"].as_array().unwrap();
    assert!(!exchanges.is_empty());
    for x in exchanges {
        let name = x["name"].as_str().unwrap();
        let (mut i, mut r) = (host(&x["initiator"]), host(&x["responder"]));
        let group_key = h(&x["group_key"]);
        assert_eq!(
            x["group_suite"], "aes128-gcm",
            "this check implements one group suite"
        );
        let suites: Vec<u8> = x["session_suites"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| suite_code(s.as_str().unwrap()))
            .collect();
        let smkex = x["smkex"].as_str().unwrap();
        let lifetime = x["lifetime_s"].as_u64().unwrap() as u32;
        // "Hybrid post-quantum sessions": `[session] kem` of both hosts (absent: off).
        let kem_mode = x["kem"].as_str().unwrap_or("off");
        let kem = kem_mode != "off";

        // "Request": flags two-path when SMKEX is not off and the host has two paths; static
        // key when it has an identity.
        let two_path_offer = smkex != "off" && i.paths >= 2;
        let flags = u8::from(two_path_offer)
            | if smkex == "require" { 0x02 } else { 0 }
            | if i.x_public.is_some() { 0x04 } else { 0 }
            | if kem { 0x20 } else { 0 }
            | if kem_mode == "require" { 0x40 } else { 0 };
        let mut body = h(&x["timestamp"]);
        body.extend([flags, i.paths]);
        body.extend(i.mac);
        body.extend(r.mac);
        body.extend(i.addr);
        body.extend(r.addr);
        body.push(suites.len() as u8);
        body.extend(&suites);
        body.extend(i.x_public.map(Vec::from).unwrap_or_default());
        let request = message(0x01, &i.id, None, &[&body]);
        // "Accept": two-path if both offered it and both have two paths; the first suite of
        // the initiator's list the responder allows (the same list here).
        let two_path = two_path_offer && r.paths >= 2 && smkex != "off";
        let chosen = suites[0];
        let mut body = vec![
            u8::from(two_path)
                | if r.x_public.is_some() { 0x04 } else { 0 }
                | if kem { 0x20 } else { 0 },
            chosen,
        ];
        body.extend(r.x_public.map(Vec::from).unwrap_or_default());
        let accept = message(0x02, &i.id, Some(&r.id), &[&body]);
        // With the KEM: (ek, dk) = ML-KEM.KeyGen_internal(d, z) from the initiator's draw,
        // (K, c) = ML-KEM.Encaps_internal(ek, m) from the responder's; KemShare (0x0a) and
        // KemShareReply (0x0b) carry ek and c after the lifetime and the share.
        let (kem_key, kem_ct, kem_secret) = if kem {
            let seed = i.kem_random.as_ref().unwrap();
            let d = B32::try_from(&seed[..32]).unwrap();
            let z = B32::try_from(&seed[32..]).unwrap();
            let (dk, ek) = MlKem768::generate_deterministic(&d, &z);
            let m = B32::try_from(&r.kem_random.as_ref().unwrap()[..]).unwrap();
            let (c, k) = ek.encapsulate_deterministic(&m).unwrap();
            assert_eq!(dk.decapsulate(&c).unwrap(), k, "{name}: Decaps gives K");
            (ek.as_bytes().to_vec(), c.to_vec(), k.to_vec())
        } else {
            (Vec::new(), Vec::new(), Vec::new())
        };
        assert_eq!(kem_key.len(), if kem { 1184 } else { 0 });
        assert_eq!(kem_ct.len(), if kem { 1088 } else { 0 });
        let share = message(
            if kem { 0x0a } else { 0x04 },
            &i.id,
            Some(&r.id),
            &[&lifetime.to_be_bytes(), &i.share, &kem_key],
        );
        let nonce = message(0x06, &i.id, Some(&r.id), &[&i.nonce]);
        let share_reply = message(
            if kem { 0x0b } else { 0x05 },
            &i.id,
            Some(&r.id),
            &[&lifetime.to_be_bytes(), &r.share, &kem_ct],
        );
        let nonce_reply_zero = message(0x07, &i.id, Some(&r.id), &[&r.nonce, &[0u8; 32]]);

        // "Transcript hash": path byte 0 for path 1 and 1 for path 2, u16 BE length, message.
        let p2: u8 = if two_path { 1 } else { 0 };
        let mut t = Sha256::new();
        t.update(b"psp-sep-v1 transcript");
        for (m, path) in [
            (&request, 0u8),
            (&accept, 0),
            (&share, 0),
            (&nonce, p2),
            (&share_reply, 0),
            (&nonce_reply_zero, p2),
        ] {
            t.update([path]);
            t.update((m.len() as u16).to_be_bytes());
            t.update(m);
        }
        let th: [u8; 32] = t.finalize().into();
        assert_eq!(hex::encode(th), x["transcript_hash"], "{name}: TH");
        let smkex_hash = sha256(&[b"psp-sep-v1 smkex", &th]);
        assert_eq!(hex::encode(smkex_hash), x["smkex_hash"], "{name}");
        let nonce_reply = message(0x07, &i.id, Some(&r.id), &[&r.nonce, &smkex_hash]);

        // "Key schedule": ikm in the initiator's order ([K ||] X25519 outputs), HKDF-SHA-256
        // with salt TH.
        if kem {
            assert_eq!(hex::encode(&kem_secret), x["kem_secret"], "{name}: K");
        } else {
            assert!(x.get("kem_secret").is_none(), "{name}");
        }
        let mut ikm = kem_secret.clone();
        ikm.extend(x25519(&i.e, &r.share));
        if let Some(sr) = r.x_public {
            ikm.extend(x25519(&i.e, &sr));
        }
        if let Some(si) = i.x_secret {
            ikm.extend(x25519(&si, &r.share));
        }
        // The responder's view gives the same bytes.
        let mut ikm_r = kem_secret.clone();
        ikm_r.extend(x25519(&r.e, &i.share));
        if let Some(sr) = r.x_secret {
            ikm_r.extend(x25519(&sr, &i.share));
        }
        if let Some(si) = i.x_public {
            ikm_r.extend(x25519(&r.e, &si));
        }
        assert_eq!(ikm, ikm_r);
        assert_eq!(hex::encode(&ikm), x["ikm"], "{name}");
        let hk = hkdf::Hkdf::<Sha256>::new(Some(&th), &ikm);
        let expand = |label: &[u8], n: usize| {
            let mut o = vec![0u8; n];
            hk.expand_multi_info(&[label, &th], &mut o).unwrap();
            o
        };
        let key_len = 16; // aes128-gcm
        let k_i2r = expand(b"psp-sep-v1 key i2r", key_len);
        let k_r2i = expand(b"psp-sep-v1 key r2i", key_len);
        let k_confirm = expand(b"psp-sep-v1 confirm", 32);
        let id = expand(b"psp-sep-v1 key id", 3);
        let key_id = (u32::from(id[0]) << 16 | u32::from(id[1]) << 8 | u32::from(id[2])).max(1);
        let tag_i = hmac_sha256(&k_confirm, &[b"psp-sep-v1 initiator", &th]);
        let tag_r = hmac_sha256(&k_confirm, &[b"psp-sep-v1 responder", &th]);
        for (k, v) in [
            ("k_i2r", hex::encode(&k_i2r)),
            ("k_r2i", hex::encode(&k_r2i)),
            ("k_confirm", hex::encode(&k_confirm)),
            ("tag_i", hex::encode(tag_i)),
            ("tag_r", hex::encode(tag_r)),
            ("bivn_i2r", hex::encode(bivn(&k_i2r))),
            ("bivn_r2i", hex::encode(bivn(&k_r2i))),
        ] {
            assert_eq!(x[k], v.as_str(), "{name}: {k}");
        }
        assert_eq!(x["key_id"].as_u64().unwrap(), u64::from(key_id), "{name}");
        let confirm = message(0x08, &i.id, Some(&r.id), &[&tag_i]);
        let confirm_ack = message(0x09, &i.id, Some(&r.id), &[&tag_r]);

        // "Carriage": the order each host sends in, each under its group sealer's next SN,
        // sub-protocol 0x0004 for Nonce and NonceReply, 0x0001 for the rest.
        let mut out = Vec::new();
        let mut send = |label, from_i: bool, path: u8, proto: u16, m: &[u8]| {
            let (me, peer) = if from_i { (&mut i, &r) } else { (&mut r, &i) };
            let frame = psp_frame(
                &group_key,
                (peer.mac, me.mac),
                me.seq,
                None,
                proto,
                m,
                me.seed.as_ref(),
            );
            out.push(Out {
                label,
                from_initiator: from_i,
                path,
                proto,
                seq: me.seq,
                payload: m.to_vec(),
                frame,
            });
            me.seq += 1;
        };
        let p2 = p2 + 1;
        send("Request", true, 1, 1, &request);
        send("Accept", false, 1, 1, &accept);
        send(if kem { "KemShare" } else { "Share" }, true, 1, 1, &share);
        send("Nonce", true, p2, 4, &nonce);
        send(
            if kem { "KemShareReply" } else { "ShareReply" },
            false,
            1,
            1,
            &share_reply,
        );
        send("NonceReply", false, p2, 4, &nonce_reply);
        send("Confirm", true, p2, 1, &confirm);
        send("ConfirmAck", false, 1, 1, &confirm_ack);

        // "Data frames": the key id as security number, SNs from 0 per key; the initiator's
        // keepalive (control 0x0002, type 0x01) first.
        let ping = &h(&x["data"][1]["payload"]);
        let pong = &h(&x["data"][2]["payload"]);
        let data = [
            ("keepalive", true, 0x0002u16, 0u32, vec![0x01], &k_i2r),
            ("ping", true, 0x0800, 1, ping.clone(), &k_i2r),
            ("pong", false, 0x0800, 0, pong.clone(), &k_r2i),
        ];
        for (label, from_i, proto, seq, payload, key) in data {
            let (src, dst) = if from_i {
                (i.mac, r.mac)
            } else {
                (r.mac, i.mac)
            };
            let frame = psp_frame(key, (dst, src), seq, Some(key_id), proto, &payload, None);
            out.push(Out {
                label,
                from_initiator: from_i,
                path: 1,
                proto,
                seq,
                payload,
                frame,
            });
        }

        let want: Vec<&Value> = x["handshake"]
            .as_array()
            .unwrap()
            .iter()
            .chain(x["data"].as_array().unwrap())
            .collect();
        assert_eq!(want.len(), out.len(), "{name}");
        for (o, w) in out.iter().zip(want) {
            let what = format!("{name}: {}", o.label);
            assert_eq!(w["label"], o.label, "{what}");
            let from = if o.from_initiator {
                "initiator"
            } else {
                "responder"
            };
            assert_eq!(w["from"], from, "{what}");
            assert_eq!(w["path"].as_u64().unwrap(), u64::from(o.path), "{what}");
            assert_eq!(
                w["protocol"].as_u64().unwrap(),
                u64::from(o.proto),
                "{what}"
            );
            assert_eq!(w["seq"].as_u64().unwrap(), u64::from(o.seq), "{what}");
            assert_eq!(
                w["payload"],
                hex::encode(&o.payload).as_str(),
                "{what}: payload"
            );
            assert_eq!(w["frame"], hex::encode(&o.frame).as_str(), "{what}: frame");
        }
        // The identities the vector prints are the documented conversions.
        for (k, host) in [("initiator", &i), ("responder", &r)] {
            if let (Some(ed), Some(xp)) = (host.ed_public, host.x_public) {
                assert_eq!(x[k]["identity_public"], hex::encode(ed).as_str());
                assert_eq!(x[k]["identity_x25519"], hex::encode(xp).as_str());
            }
            assert_eq!(x[k]["share"], hex::encode(host.share).as_str());
        }
    }
}
