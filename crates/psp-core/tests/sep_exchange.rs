//! End-to-end vectors of whole gateway SEP exchanges (`tests/vectors/sep_exchange.json`,
//! printed in docs/SESSIONS.md, "Vectors"): every handshake message and every PSP frame as it
//! appears on the wire, the transcript hash, the key schedule, the confirmation tags and the
//! first frames under the session keys.
//!
//! The exchange is run the way `psp-gateway` runs it (`psp-gateway/src/sessions/driver.rs`):
//! the handshake's [`Config`] as the driver builds it from `[session]` defaults, messages sealed
//! by the host's one group-key sealer (signing with its identity, if any) with the sub-protocol
//! and path its `Transmit` names, opened by the peer's group opener (verifying the pinned
//! identity), session keys installed in a [`KeyRing`], the initiator's keepalive (control type
//! 0x01) first, then data. Randomness comes from a script of fixed bytes, so each host's
//! ephemeral secret, nonce and handshake id are inputs of the vector.
//!
//! `sep_exchange_matches_vectors` reruns every exchange and compares all of it with the file;
//! it fails if the implementation drifts. `sessions_md_prints_the_vectors` checks that
//! docs/SESSIONS.md prints exactly the file's bytes. Regenerate (only when the protocol changes
//! on purpose) with
//! `cargo test -p psp-core --test sep_exchange -- --ignored --nocapture print_vectors` (the
//! JSON) and `... print_markdown` (the docs section). `tests/sep_exchange_from_docs.rs`
//! recomputes the same bytes without psp-core, from the documented formulas only.
#![allow(missing_docs)]

use core::net::IpAddr;

use hmac::{Hmac, Mac};
use psp_core::crypto::{SuiteId, SuiteKey};
use psp_core::handshake::kem::KemKeyPair;
use psp_core::handshake::messages::{Body, MAX_MESSAGE_LEN, Repr, SuiteList};
use psp_core::handshake::rand_core::{self, CryptoRng, RngCore};
use psp_core::handshake::schedule::{Ephemeral, Transcript, smkex_hash};
use psp_core::handshake::{
    Config, Event, Handshake, Identity, KemMode, KeyRing, KeyRingConfig, PathId, Peer, Role,
    SessionKeys, SmkexMode, Tai64n,
};
use psp_core::protect::{Opener, OpenerConfig, Sealer, SealerConfig};
use psp_core::time::{Duration, Instant};
use psp_core::wire::{Protocol, Seq};
use serde::{Deserialize, Serialize};

#[derive(Debug, Serialize, Deserialize)]
struct File {
    description: String,
    exchanges: Vec<Exchange>,
}

/// One complete exchange: inputs first, then everything the hosts put on the wire and derive.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Exchange {
    name: String,
    /// The group key's suite and key (hex): every handshake message is sealed under it.
    group_suite: String,
    group_key: String,
    /// `[session] suites` of both hosts (offer order / allowed).
    session_suites: Vec<String>,
    /// `[session] smkex` of both hosts.
    smkex: String,
    /// `[session] kem` of both hosts (absent: `off`, the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    kem: Option<String>,
    /// `[session] lifetime_s` of both hosts.
    lifetime_s: u32,
    /// The Request's TAI64N timestamp (hex, 12 bytes).
    timestamp: String,
    initiator: Host,
    responder: Host,
    /// The handshake messages, in the order they were sent.
    handshake: Vec<Sent>,
    /// SHA-256 over the transcript (docs/SESSIONS.md, "Transcript hash").
    transcript_hash: String,
    /// SHA-256("psp-sep-v1 smkex" || TH): the hash field of the NonceReply.
    smkex_hash: String,
    /// The ML-KEM-768 shared secret, if the KEM was in use (the first 32 bytes of `ikm`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    kem_secret: Option<String>,
    /// The ML-KEM secret (if any) and the X25519 outputs (initiator's order), concatenated.
    ikm: String,
    k_i2r: String,
    k_r2i: String,
    k_confirm: String,
    key_id: u32,
    tag_i: String,
    tag_r: String,
    /// HMAC-SHA1(k, "PSP-BIVN") of each session key (20 bytes; AEAD suites use the first 12).
    bivn_i2r: String,
    bivn_r2i: String,
    /// The first frames under the session keys, in the order sent.
    data: Vec<Sent>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Host {
    mac: String,
    /// `[session] address`: ADDRESS/PREFIX.
    address: String,
    /// Uplinks toward the peer (the Request's `paths`).
    paths: u8,
    /// The Ed25519 identity seed (`identity_file`), if any.
    identity_seed: Option<String>,
    /// Its Ed25519 public key (what the peer pins) and X25519 form (in Request/Accept).
    identity_public: Option<String>,
    identity_x25519: Option<String>,
    /// The RNG draws of its handshake, in draw order (ephemeral, nonce, id; jitter is 0; then,
    /// with the KEM, `kem_random`).
    ephemeral_secret: String,
    nonce: String,
    handshake_id: String,
    /// The ML-KEM-768 draw: the initiator's key-pair seed `d ‖ z` (64 bytes), the responder's
    /// encapsulation randomness `m` (32 bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    kem_random: Option<String>,
    /// Its X25519 share, X25519(ephemeral_secret, 9).
    share: String,
    /// The group sealer's next sequence number when the handshake starts.
    group_seq: u32,
}

/// One message or frame on the wire.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Sent {
    /// What it is: the message type, or `keepalive` / `ping` / `pong`.
    label: String,
    /// `initiator` or `responder`.
    from: String,
    /// 1 (the first uplink) or 2.
    path: u8,
    /// The PSP protocol type of the section (sub-protocol, or the inner EtherType).
    protocol: u16,
    /// The frame's sequence number.
    seq: u32,
    /// The payload: the handshake message, the control message, or the inner Ethernet frame.
    payload: String,
    /// The PSP frame as sent (without FCS).
    frame: String,
}

// --- the scenario ----------------------------------------------------------------------------

const MAC_I: [u8; 6] = [2, 0, 0, 0, 0, 1];
const MAC_R: [u8; 6] = [2, 0, 0, 0, 0, 2];
/// An ICMP echo request 10.77.0.1 -> 10.77.0.2 (id 0x1234, seq 1, "psp-sep-vector01").
const PING: &str = "02000000000202000000000108004500002c1c464000400109ef0a4d00010a4d00020800a819\
                    123400017073702d7365702d766563746f723031";
/// Its echo reply.
const PONG: &str = "02000000000102000000000208004500002c2d5740004001f8dd0a4d00020a4d00010000b019\
                    123400017073702d7365702d766563746f723031";

fn specs() -> Vec<Exchange> {
    let host = |mac: [u8; 6], address: &str, paths, seed: Option<[u8; 32]>, tag: u8, seq| Host {
        mac: hex::encode(mac),
        address: address.to_owned(),
        paths,
        identity_seed: seed.map(hex::encode),
        identity_public: None,
        identity_x25519: None,
        ephemeral_secret: hex::encode([0xe0 | tag; 32]),
        nonce: hex::encode([0xc0 | tag; 32]),
        handshake_id: hex::encode([0x10 * tag + 1, 2, 3, 4, 5, 6, 7, 8]),
        kem_random: None,
        share: String::new(),
        group_seq: seq,
    };
    let base = |name: &str, i: Host, r: Host| Exchange {
        name: name.to_owned(),
        group_suite: SuiteId::Aes128Gcm.name().to_owned(),
        group_key: "000102030405060708090a0b0c0d0e0f".to_owned(),
        session_suites: vec!["aes128-gcm".to_owned(), "chacha20-poly1305".to_owned()],
        smkex: "prefer".to_owned(),
        kem: None,
        lifetime_s: 3600,
        timestamp: hex::encode(Tai64n::from_unix(1_700_000_000, 123_456_789).0),
        initiator: i,
        responder: r,
        handshake: Vec::new(),
        transcript_hash: String::new(),
        smkex_hash: String::new(),
        kem_secret: None,
        ikm: String::new(),
        k_i2r: String::new(),
        k_r2i: String::new(),
        k_confirm: String::new(),
        key_id: 0,
        tag_i: String::new(),
        tag_r: String::new(),
        bivn_i2r: String::new(),
        bivn_r2i: String::new(),
        data: Vec::new(),
    };
    vec![
        base(
            "two paths, both hosts with identities",
            host(MAC_I, "10.77.0.1/24", 2, Some([0xa3; 32]), 1, 0x1000),
            host(MAC_R, "10.77.0.2/24", 2, Some([0xb2; 32]), 2, 0x2000),
        ),
        base(
            "one path, no identities",
            host(MAC_I, "10.77.0.1/24", 1, None, 1, 0x1000),
            host(MAC_R, "10.77.0.2/24", 1, None, 2, 0x2000),
        ),
        {
            // The first exchange with `kem = "prefer"` on both hosts: the hybrid handshake.
            let mut i = host(MAC_I, "10.77.0.1/24", 2, Some([0xa3; 32]), 1, 0x1000);
            let mut r = host(MAC_R, "10.77.0.2/24", 2, Some([0xb2; 32]), 2, 0x2000);
            i.kem_random = Some(hex::encode([[0xd1u8; 32], [0xf1; 32]].concat()));
            r.kem_random = Some(hex::encode([0xd2u8; 32]));
            let mut x = base("two paths, both hosts with identities, ML-KEM-768", i, r);
            x.kem = Some("prefer".to_owned());
            x
        },
    ]
}

// --- plumbing ------------------------------------------------------------------------------

/// An RNG that hands out a fixed script of bytes (the vector's draws), then panics.
struct Script(Vec<u8>);

impl Script {
    fn take(&mut self, n: usize) -> Vec<u8> {
        assert!(self.0.len() >= n, "the script ran out");
        self.0.drain(..n).collect()
    }
}

impl RngCore for Script {
    fn next_u32(&mut self) -> u32 {
        u32::from_le_bytes(self.take(4).try_into().unwrap())
    }
    fn next_u64(&mut self) -> u64 {
        u64::from_le_bytes(self.take(8).try_into().unwrap())
    }
    fn fill_bytes(&mut self, dest: &mut [u8]) {
        dest.copy_from_slice(&self.take(dest.len()));
    }
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand_core::Error> {
        self.fill_bytes(dest);
        Ok(())
    }
}

impl CryptoRng for Script {}

fn arr<const N: usize>(h: &str) -> [u8; N] {
    hex::decode(h).unwrap().try_into().unwrap()
}

fn addr(h: &Host) -> (IpAddr, u8) {
    let (a, p) = h.address.split_once('/').unwrap();
    (a.parse().unwrap(), p.parse().unwrap())
}

fn suite(name: &str) -> SuiteId {
    SuiteId::from_name(name).unwrap()
}

fn identity(h: &Host) -> Option<Identity> {
    h.identity_seed
        .as_deref()
        .map(|s| Identity::from_seed(arr(s)).unwrap())
}

fn script(h: &Host) -> Script {
    let mut b = hex::decode(&h.ephemeral_secret).unwrap();
    b.extend(hex::decode(&h.nonce).unwrap());
    b.extend(hex::decode(&h.handshake_id).unwrap());
    b.extend([0u8; 8]); // retransmission jitter: changes no byte
    if let Some(k) = &h.kem_random {
        b.extend(hex::decode(k).unwrap());
    }
    Script(b)
}

/// The handshake settings the gateway's driver builds (`Driver::hs_config`).
fn config(x: &Exchange, h: &Host) -> Config {
    let (a, prefix) = addr(h);
    let mut c = Config::new(arr(&h.mac), a, prefix);
    let suites: Vec<SuiteId> = x.session_suites.iter().map(|s| suite(s)).collect();
    c.suites = SuiteList::from_suites(&suites);
    c.smkex = match x.smkex.as_str() {
        "require" => SmkexMode::Required,
        "off" => SmkexMode::Off,
        _ => SmkexMode::Preferred,
    };
    c.kem = match x.kem.as_deref() {
        Some("require") => KemMode::Required,
        Some("prefer") => KemMode::Preferred,
        _ => KemMode::Off,
    };
    c.paths = h.paths;
    c.lifetime = Duration::from_secs(u64::from(x.lifetime_s));
    c.min_lifetime = Duration::from_secs(60).min(c.lifetime);
    c.static_key = identity(h).map(|id| id.static_key());
    c
}

fn peer_of(h: &Host) -> Peer {
    Peer {
        mac: arr(&h.mac),
        addr: addr(h).0,
        pinned_x25519: identity(h).map(|id| id.static_key().public_key()),
    }
}

fn group_key(x: &Exchange) -> SuiteKey {
    SuiteKey::new(suite(&x.group_suite), &hex::decode(&x.group_key).unwrap()).unwrap()
}

/// A host's group sealer: the group key's settings (no security number, no timestamps),
/// signing with its identity.
fn group_sealer(x: &Exchange, h: &Host) -> Sealer {
    let mut s = Sealer::new(group_key(x), Seq(h.group_seq), SealerConfig::new()).unwrap();
    if let Some(id) = identity(h) {
        s = s.with_signer(id.signing_key().unwrap());
    }
    s
}

/// The receiver's group opener for frames of `from` (one per path in the gateway), verifying
/// `from`'s pinned identity.
fn group_opener(x: &Exchange, from: &Host) -> Opener {
    let mut o = Opener::new(group_key(x), OpenerConfig::new()).unwrap();
    if let Some(id) = identity(from) {
        o = o.with_verifier(id.signing_key().unwrap().public_key());
    }
    o
}

fn hmac_sha1(key: &[u8], msg: &[u8]) -> [u8; 20] {
    let mut m = <Hmac<sha1::Sha1> as Mac>::new_from_slice(key).unwrap();
    m.update(msg);
    m.finalize().into_bytes().into()
}

/// One side of the run.
struct Side<'a> {
    host: &'a Host,
    role: Role,
    sealer: Sealer,
    /// Openers for the peer's group frames, per path.
    openers: [Opener; 2],
    hs: Option<Handshake>,
    rng: Script,
    keys: Option<SessionKeys>,
}

impl Side<'_> {
    /// Drains the handshake's transmits into sealed frames.
    fn transmit(&mut self, now: Instant, peer_mac: [u8; 6], out: &mut Vec<Sent>) {
        let mut buf = [0u8; MAX_MESSAGE_LEN];
        let mut frame = [0u8; 2048];
        let Some(hs) = self.hs.as_mut() else { return };
        loop {
            if let Some(ev) = hs.poll_event() {
                match ev {
                    Event::Established(k) => self.keys = Some(k),
                    Event::Failed(r) => panic!("{:?} failed: {r}", self.role),
                }
                continue;
            }
            let Some(t) = hs.poll_transmit(now, &mut buf) else {
                break;
            };
            let seq = self.sealer.next_seq().unwrap().0;
            let sealed = self
                .sealer
                .seal_sub(
                    now,
                    peer_mac,
                    arr(&self.host.mac),
                    t.protocol,
                    &buf[..t.len],
                    &mut frame,
                )
                .unwrap();
            let payload = &buf[..t.len];
            let label = format!(
                "{:?}",
                Repr::parse_bytes(payload).unwrap().body.message_type()
            );
            out.push(Sent {
                label,
                from: role_name(self.role).to_owned(),
                path: t.path.0 + 1,
                protocol: u16::from(t.protocol),
                seq,
                payload: hex::encode(payload),
                frame: hex::encode(sealed),
            });
        }
    }
}

fn role_name(r: Role) -> &'static str {
    match r {
        Role::Initiator => "initiator",
        Role::Responder => "responder",
    }
}

/// Runs the exchange and fills in every output of `x`.
fn run(mut x: Exchange) -> Exchange {
    let now = Instant::from_secs(1_700_000_000);
    for h in [&mut x.initiator, &mut x.responder] {
        let id = identity(h);
        h.identity_public = id.as_ref().map(|i| hex::encode(i.public_key()));
        h.identity_x25519 = id
            .as_ref()
            .map(|i| hex::encode(i.static_key().public_key()));
        h.share = hex::encode(Ephemeral::from_bytes(arr(&h.ephemeral_secret)).public_share());
    }
    let (hi, hr) = (x.initiator.clone(), x.responder.clone());
    let mut i = Side {
        host: &hi,
        role: Role::Initiator,
        sealer: group_sealer(&x, &hi),
        openers: [group_opener(&x, &hr), group_opener(&x, &hr)],
        hs: None,
        rng: script(&hi),
        keys: None,
    };
    let mut r = Side {
        host: &hr,
        role: Role::Responder,
        sealer: group_sealer(&x, &hr),
        openers: [group_opener(&x, &hi), group_opener(&x, &hi)],
        hs: None,
        rng: script(&hr),
        keys: None,
    };
    i.hs = Some(Handshake::initiate(
        now,
        config(&x, &hi),
        peer_of(&hr),
        Tai64n(arr(&x.timestamp)),
        &mut i.rng,
    ));
    let mut wire = Vec::new();
    i.transmit(now, MAC_R, &mut wire);
    // Deliver frames in the order sent; every answer is appended and delivered in turn.
    let mut next = 0;
    while let Some(sent) = wire.get(next).cloned() {
        next += 1;
        let to = if sent.from == "initiator" {
            &mut r
        } else {
            &mut i
        };
        let mut frame = hex::decode(&sent.frame).unwrap();
        let opened = to.openers[usize::from(sent.path - 1)]
            .open(now, &mut frame)
            .expect("the peer opens every handshake frame");
        assert_eq!(u16::from(opened.protocol()), sent.protocol);
        let payload = opened.payload().to_vec();
        assert_eq!(hex::encode(&payload), sent.payload);
        let path = PathId(sent.path - 1);
        match to.hs.as_mut() {
            Some(hs) => hs.handle_message(now, path, &payload).unwrap(),
            None => {
                let from = if to.role == Role::Responder { &hi } else { &hr };
                to.hs = Some(
                    Handshake::respond(
                        now,
                        config(&x, to.host),
                        peer_of(from),
                        path,
                        &payload,
                        &mut to.rng,
                    )
                    .unwrap(),
                );
            }
        }
        let peer_mac = if to.role == Role::Responder {
            MAC_I
        } else {
            MAC_R
        };
        to.transmit(now, peer_mac, &mut wire);
    }
    let (ki, kr) = (i.keys.take().unwrap(), r.keys.take().unwrap());
    assert_eq!(ki.key_id(), kr.key_id());
    assert!(i.rng.0.is_empty() && r.rng.0.is_empty(), "every draw used");
    x.handshake = wire;

    // The key schedule, recomputed from the transcript with psp-core's schedule functions.
    let kem = x.kem.is_some();
    let msg = |label: &str| -> Repr {
        let s = x.handshake.iter().find(|s| s.label == label).unwrap();
        Repr::parse_bytes(&hex::decode(&s.payload).unwrap()).unwrap()
    };
    let path_of =
        |label: &str| PathId(x.handshake.iter().find(|s| s.label == label).unwrap().path - 1);
    // With the KEM, KemShare and KemShareReply take the Share's and ShareReply's places.
    let order = [
        "Request",
        "Accept",
        if kem { "KemShare" } else { "Share" },
        "Nonce",
        if kem { "KemShareReply" } else { "ShareReply" },
        "NonceReply",
    ];
    let parts = order.map(|l| (msg(l), path_of(l)));
    let th = Transcript { parts }.hash();
    x.transcript_hash = hex::encode(th);
    x.smkex_hash = hex::encode(smkex_hash(&th));
    let static_i = identity(&hi).map(|id| id.static_key());
    let static_r_pub = identity(&hr).map(|id| id.static_key().public_key());
    // The ML-KEM secret: the initiator's key pair from its drawn seed, decapsulating the
    // KemShareReply's ciphertext.
    let kem_secret = hi.kem_random.as_ref().filter(|_| kem).map(|seed| {
        let seed = hex::decode(seed).unwrap();
        let pair = KemKeyPair::from_seed(
            &seed[..32].try_into().unwrap(),
            &seed[32..].try_into().unwrap(),
        );
        let Body::KemShareReply { ciphertext, .. } = msg("KemShareReply").body else {
            panic!("a KemShareReply");
        };
        pair.decapsulate(&ciphertext)
    });
    x.kem_secret = kem_secret.as_ref().map(|k| hex::encode(k.as_bytes()));
    let shared = Ephemeral::from_bytes(arr(&hi.ephemeral_secret))
        .complete_hybrid(
            Role::Initiator,
            kem_secret.as_ref(),
            &arr(&hr.share),
            static_i.as_ref(),
            static_r_pub.as_ref(),
        )
        .unwrap();
    x.ikm = hex::encode(shared.ikm());
    assert_eq!(ki.kem(), kem);
    assert_eq!(kr.kem(), kem);
    let session = ki.suite();
    let secrets = shared.derive(&th, session.key_len());
    x.k_i2r = hex::encode(secrets.i2r());
    x.k_r2i = hex::encode(secrets.r2i());
    x.key_id = secrets.key_id();
    assert_eq!(x.key_id, ki.key_id().get());
    x.tag_i = hex::encode(secrets.tag(Role::Initiator));
    x.tag_r = hex::encode(secrets.tag(Role::Responder));
    // Not exposed by psp-core: k_confirm and the BIVNs, by the `hkdf`/`hmac` crates.
    let ikm = hex::decode(&x.ikm).unwrap();
    let hk = hkdf::Hkdf::<sha2::Sha256>::new(Some(&th), &ikm);
    let mut confirm = [0u8; 32];
    hk.expand_multi_info(&[b"psp-sep-v1 confirm", &th], &mut confirm)
        .unwrap();
    x.k_confirm = hex::encode(confirm);
    x.bivn_i2r = hex::encode(hmac_sha1(secrets.i2r(), b"PSP-BIVN"));
    x.bivn_r2i = hex::encode(hmac_sha1(secrets.r2i(), b"PSP-BIVN"));
    // The tags on the wire are the schedule's.
    assert!(msg("Confirm").body == Body::Confirm(secrets.tag(Role::Initiator)));
    assert!(msg("ConfirmAck").body == Body::ConfirmAck(secrets.tag(Role::Responder)));

    // The data path: each host's key ring, the initiator's keepalive first (the host sends it
    // as soon as it is established), then its queued ping; the responder answers once the keepalive opened.
    let mut ring_i = KeyRing::new(KeyRingConfig::default());
    let mut ring_r = KeyRing::new(KeyRingConfig::default());
    ring_i.install(now, &ki).unwrap();
    ring_r.install(now, &kr).unwrap();
    let mut out = [0u8; 512];
    let mut data = Vec::new();
    let mut push =
        |label: &str, from: Role, protocol: u16, seq: u32, payload: &[u8], frame: &[u8]| {
            data.push(Sent {
                label: label.to_owned(),
                from: role_name(from).to_owned(),
                path: 1,
                protocol,
                seq,
                payload: hex::encode(payload),
                frame: hex::encode(frame),
            });
        };
    let keepalive = ring_i
        .seal_sub(now, MAC_R, MAC_I, Protocol::Control, &[0x01], &mut out)
        .unwrap()
        .to_vec();
    push("keepalive", Role::Initiator, 0x0002, 0, &[0x01], &keepalive);
    let ping = hex::decode(PING).unwrap();
    let sealed = ring_i.seal(now, &ping, &mut out).unwrap().to_vec();
    push("ping", Role::Initiator, 0x0800, 1, &ping[14..], &sealed);
    let mut f = keepalive.clone();
    assert!(ring_r.open(now, &mut f).is_ok());
    let mut f = sealed.clone();
    assert_eq!(ring_r.open(now, &mut f).unwrap().frame(), &ping[..]);
    let pong = hex::decode(PONG).unwrap();
    let sealed = ring_r.seal(now, &pong, &mut out).unwrap().to_vec();
    push("pong", Role::Responder, 0x0800, 0, &pong[14..], &sealed);
    let mut f = sealed.clone();
    assert_eq!(ring_i.open(now, &mut f).unwrap().frame(), &pong[..]);
    x.data = data;
    x
}

fn load() -> File {
    serde_json::from_str(include_str!("vectors/sep_exchange.json")).unwrap()
}

#[test]
fn sep_exchange_matches_vectors() {
    let file = load();
    assert_eq!(file.exchanges.len(), specs().len());
    for x in &file.exchanges {
        // Only the inputs are kept; everything else is recomputed.
        let spec = specs().into_iter().find(|s| s.name == x.name).unwrap();
        let got = run(spec);
        assert_eq!(
            serde_json::to_value(&got).unwrap(),
            serde_json::to_value(x).unwrap(),
            "{}",
            x.name
        );
    }
}

#[test]
#[ignore = "generator: run by hand when the protocol changes on purpose"]
fn print_vectors() {
    let file = File {
        description: "Gateway SEP exchanges (docs/SESSIONS.md, \"Vectors\"): every handshake \
                      message (`payload`) and PSP frame (`frame`) in the order sent, the \
                      transcript hash, key schedule and confirmation tags, and the first frames \
                      under the session keys. Hex is lower-case; paths are 1 and 2."
            .to_owned(),
        exchanges: specs().into_iter().map(run).collect(),
    };
    println!("{}", serde_json::to_string_pretty(&file).unwrap());
}

// --- the docs -------------------------------------------------------------------------------

/// Hex, 64 digits a line.
fn lines(hex: &str) -> String {
    hex.as_bytes()
        .chunks(64)
        .map(|c| core::str::from_utf8(c).unwrap())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The docs/SESSIONS.md section of one exchange (the heading and everything up to the next).
fn markdown(x: &Exchange) -> String {
    use core::fmt::Write as _;
    let mut s = String::new();
    let w = &mut s;
    let bytes = |w: &mut String, label: &str, hex: &str| {
        let _ = writeln!(w, "{label} ({} bytes)\n{}", hex.len() / 2, lines(hex));
    };
    let _ = writeln!(w, "### Vector: {}\n", x.name);
    let mac = |h: &Host| {
        let b = hex::decode(&h.mac).unwrap();
        b.iter()
            .map(|x| format!("{x:02x}"))
            .collect::<Vec<_>>()
            .join(":")
    };
    let _ = writeln!(
        w,
        "Initiator {} at {}, responder {} at {}, {} each; `[session]` suites {}, smkex `{}`, \
         `lifetime_s` {}; group key under `{}` (no security number, no timestamps); the group \
         sealers' next SNs are 0x{:08x} (initiator) and 0x{:08x} (responder); identities: {}{}.\n",
        mac(&x.initiator),
        x.initiator.address,
        mac(&x.responder),
        x.responder.address,
        if x.initiator.paths == 1 {
            "one path"
        } else {
            "two paths"
        },
        x.session_suites.join(", "),
        x.smkex,
        x.lifetime_s,
        x.group_suite,
        x.initiator.group_seq,
        x.responder.group_seq,
        if x.initiator.identity_seed.is_some() {
            "both, each pinned by the other (frames signed, long-term keys in the key schedule)"
        } else {
            "none (frames unsigned)"
        },
        match &x.kem {
            Some(k) => format!("; `[session] kem` `{k}` on both (ML-KEM-768 in the key schedule)"),
            None => String::new(),
        },
    );
    let _ = writeln!(w, "```text");
    for (k, h) in [("initiator", &x.initiator), ("responder", &x.responder)] {
        if let Some(seed) = &h.identity_seed {
            bytes(w, &format!("{k} identity seed"), seed);
            bytes(
                w,
                &format!("{k} Ed25519 public key"),
                h.identity_public.as_ref().unwrap(),
            );
            bytes(
                w,
                &format!("{k} X25519 public key"),
                h.identity_x25519.as_ref().unwrap(),
            );
        }
        bytes(w, &format!("{k} ephemeral secret"), &h.ephemeral_secret);
        bytes(w, &format!("{k} share"), &h.share);
        bytes(w, &format!("{k} nonce"), &h.nonce);
        bytes(w, &format!("{k} handshake id"), &h.handshake_id);
        if let Some(r) = &h.kem_random {
            let what = if k == "initiator" {
                "ML-KEM seed d || z"
            } else {
                "ML-KEM encapsulation randomness m"
            };
            bytes(w, &format!("{k} {what}"), r);
        }
    }
    bytes(w, "group key", &x.group_key);
    bytes(w, "Request timestamp", &x.timestamp);
    let _ = writeln!(w, "```\n");
    let _ = writeln!(w, "```text");
    for (n, m) in x.handshake.iter().chain(&x.data).enumerate() {
        let n = n + 1;
        let to = if m.from == "initiator" {
            "responder"
        } else {
            "initiator"
        };
        let kind = if m.protocol < 0x0600 {
            "sub-protocol"
        } else {
            "EtherType"
        };
        let key = if n > x.handshake.len() {
            format!(
                "session key k_{}, key id 0x{:06x}",
                if m.from == "initiator" { "i2r" } else { "r2i" },
                x.key_id
            )
        } else {
            "group key".to_owned()
        };
        let _ = writeln!(
            w,
            "-- {n} {}: {} -> {to}, path {}, {kind} 0x{:04x}, {key}, SN 0x{:08x}",
            m.label, m.from, m.path, m.protocol, m.seq
        );
        let what = if n > x.handshake.len() {
            "payload"
        } else {
            "message"
        };
        bytes(w, &format!("{n} {what}"), &m.payload);
        bytes(w, &format!("{n} frame"), &m.frame);
    }
    let _ = writeln!(w, "```\n");
    let _ = writeln!(w, "```text");
    for (k, h) in [
        ("transcript hash TH", &x.transcript_hash),
        ("SMKEX hash", &x.smkex_hash),
    ] {
        bytes(w, k, h);
    }
    if let Some(k) = &x.kem_secret {
        bytes(w, "ML-KEM shared secret K", k);
    }
    for (k, h) in [
        ("ikm", &x.ikm),
        ("k_i2r", &x.k_i2r),
        ("k_r2i", &x.k_r2i),
        ("k_confirm", &x.k_confirm),
        ("tag_i", &x.tag_i),
        ("tag_r", &x.tag_r),
        ("BIVN(k_i2r)", &x.bivn_i2r),
        ("BIVN(k_r2i)", &x.bivn_r2i),
    ] {
        bytes(w, k, h);
    }
    let _ = writeln!(w, "key id 0x{:06x} ({})", x.key_id, x.key_id);
    let _ = writeln!(w, "```\n");
    // Three of the above, field by field.
    let request = hex::decode(&x.handshake[0].payload).unwrap();
    let n = usize::from(request[18 + 60]);
    let mut layout = vec![
        ("version", 1),
        ("type", 1),
        ("initiator id", 8),
        ("responder id", 8),
        ("timestamp", 12),
        ("flags", 1),
        ("paths", 1),
        ("initiator MAC", 6),
        ("responder MAC", 6),
        ("initiator address", 17),
        ("responder address", 17),
        ("suite count", 1),
        ("suite codes", n),
    ];
    if request.len() > 18 + 61 + n {
        layout.push(("long-term key", 32));
    }
    let _ = writeln!(w, "```text");
    let _ = writeln!(
        w,
        "-- message 1 (Request), field by field: offset, width, name"
    );
    fields(w, &request, &layout);
    let signed = x.initiator.identity_seed.is_some();
    let frame = hex::decode(&x.handshake[0].frame).unwrap();
    let trailer = 16 + if signed { 64 } else { 0 };
    let mut layout = vec![
        ("destination MAC", 6),
        ("source MAC", 6),
        ("EtherType 0x1982", 2),
        ("version and flags", 1),
        ("SN", 4),
        ("section (encrypted)", frame.len() - 19 - trailer),
        ("ICV (GCM tag)", 16),
    ];
    if signed {
        layout.push(("Ed25519 signature", 64));
    }
    let _ = writeln!(w, "-- frame 1, field by field");
    fields(w, &frame, &layout);
    let n = x.handshake.len() + 1;
    let frame = hex::decode(&x.data[0].frame).unwrap();
    let layout = [
        ("destination MAC", 6),
        ("source MAC", 6),
        ("EtherType 0x1982", 2),
        ("version and flags", 1),
        ("SN", 4),
        ("security number: key id", 3),
        ("section (encrypted)", frame.len() - 22 - 16),
        ("ICV (GCM tag)", 16),
    ];
    let _ = writeln!(w, "-- frame {n} (keepalive), field by field");
    fields(w, &frame, &layout);
    let _ = writeln!(w, "```");
    s
}

/// `bytes` cut into `layout`'s fields, one line each: offset, width, name, hex.
fn fields(w: &mut String, bytes: &[u8], layout: &[(&str, usize)]) {
    use core::fmt::Write as _;
    let mut at = 0;
    for (name, len) in layout {
        let value = if *len > 32 {
            format!("({len} bytes, as printed above)")
        } else {
            hex::encode(&bytes[at..at + len])
        };
        let _ = writeln!(w, "{at:>3} {len:>3} {name:<24} {value}");
        at += len;
    }
    assert_eq!(at, bytes.len(), "the layout covers every byte");
}

#[test]
#[ignore = "generator: prints the docs/SESSIONS.md vector sections"]
fn print_markdown() {
    for x in &load().exchanges {
        println!("{}", markdown(x));
    }
}

/// docs/SESSIONS.md prints every vector exactly as `print_markdown` does, so the printed bytes
/// are the file's.
#[test]
fn sessions_md_prints_the_vectors() {
    let doc = include_str!("../../../docs/SESSIONS.md");
    for x in &load().exchanges {
        assert!(
            doc.contains(&markdown(x)),
            "docs/SESSIONS.md does not print `{}` as `print_markdown` does",
            x.name
        );
    }
}
