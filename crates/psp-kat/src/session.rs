//! A complete two-path session, byte for byte: docs/SESSIONS.md's first vector ("two paths,
//! both hosts with identities", crates/psp-core/tests/vectors/sep_exchange.json) run the way
//! the gateway runs it. Two [`Handshake`]s exchange their messages sealed under the group key
//! (signed with each host's identity), over their two paths, with randomness from the vector's
//! script; then each side installs its keys in a [`KeyRing`] and the initiator's keepalive and
//! ping and the responder's pong cross. What went on the wire is compared with the vector
//! through SHA-256 digests of its frames (the host test `digests_match_the_json_vector` checks
//! the digests against the JSON).

use core::net::{IpAddr, Ipv4Addr};

use psp_core::crypto::{SuiteId, SuiteKey};
use psp_core::handshake::messages::SuiteList;
use psp_core::handshake::rand_core::{self, CryptoRng, RngCore};
use psp_core::handshake::{
    Config, Event, Handshake, Identity, KeyRing, KeyRingConfig, PathId, Peer, SessionKeys,
    SmkexMode, Tai64n,
};
use psp_core::protect::{Opener, OpenerConfig, Sealer, SealerConfig};
use psp_core::time::{Duration, Instant};
use psp_core::wire::{Protocol, Seq};
use sha2::{Digest, Sha256};

use crate::{arr, unhex};

/// SHA-256 over every handshake frame in the order sent, each as `path || len (u16 BE) || frame`.
pub const HANDSHAKE_DIGEST: &str =
    "5b78f4309151de3acc5834f16813f34a88582fdf585cf0f75637dbe2249b3950";
/// The same over the keepalive, ping and pong frames under the session keys.
pub const DATA_DIGEST: &str = "f066f67914957d0c36e6d01f83de42eb86f59aa5ff7af53d2bc926049b660015";
/// The session's key id.
pub const KEY_ID: u32 = 1_379_216;
/// How many handshake frames the exchange puts on the wire.
pub const HANDSHAKE_FRAMES: usize = 8;

const MAC_I: [u8; 6] = [2, 0, 0, 0, 0, 1];
const MAC_R: [u8; 6] = [2, 0, 0, 0, 0, 2];
const GROUP_KEY: &str = "000102030405060708090a0b0c0d0e0f";
const TIMESTAMP: &str = "400000006553f100075bcd15";
/// An ICMP echo request 10.77.0.1 -> 10.77.0.2 and its reply.
const PING: &str = "02000000000202000000000108004500002c1c464000400109ef0a4d00010a4d00020800a819123400017073702d7365702d766563746f723031";
const PONG: &str = "02000000000102000000000208004500002c2d5740004001f8dd0a4d00020a4d00010000b019123400017073702d7365702d766563746f723031";

/// An RNG that hands out a fixed script of bytes (the vector's draws), then zeros.
struct Script {
    bytes: [u8; 80],
    at: usize,
}

impl Script {
    /// Ephemeral secret `0xe0 | tag` ×32, nonce `0xc0 | tag` ×32, handshake id
    /// `0x10 tag + 1, 2, 3, 4, 5, 6, 7, 8`, and 8 zero bytes of retransmission jitter.
    fn new(tag: u8) -> Self {
        let mut bytes = [0u8; 80];
        bytes[..32].fill(0xe0 | tag);
        bytes[32..64].fill(0xc0 | tag);
        bytes[64..72].copy_from_slice(&[0x10 * tag + 1, 2, 3, 4, 5, 6, 7, 8]);
        Self { bytes, at: 0 }
    }
}

impl RngCore for Script {
    fn next_u32(&mut self) -> u32 {
        let mut b = [0u8; 4];
        self.fill_bytes(&mut b);
        u32::from_le_bytes(b)
    }
    fn next_u64(&mut self) -> u64 {
        let mut b = [0u8; 8];
        self.fill_bytes(&mut b);
        u64::from_le_bytes(b)
    }
    fn fill_bytes(&mut self, dest: &mut [u8]) {
        for d in dest {
            *d = self.bytes.get(self.at).copied().unwrap_or(0);
            self.at += 1;
        }
    }
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand_core::Error> {
        self.fill_bytes(dest);
        Ok(())
    }
}

impl CryptoRng for Script {}

/// One host of the vector.
struct Host {
    mac: [u8; 6],
    addr: IpAddr,
    identity: Identity,
    group_seq: u32,
    tag: u8,
}

impl Host {
    fn initiator() -> Self {
        Self {
            mac: MAC_I,
            addr: IpAddr::V4(Ipv4Addr::new(10, 77, 0, 1)),
            identity: Identity::from_seed([0xa3; 32]).expect("a valid seed"),
            group_seq: 0x1000,
            tag: 1,
        }
    }

    fn responder() -> Self {
        Self {
            mac: MAC_R,
            addr: IpAddr::V4(Ipv4Addr::new(10, 77, 0, 2)),
            identity: Identity::from_seed([0xb2; 32]).expect("a valid seed"),
            group_seq: 0x2000,
            tag: 2,
        }
    }

    /// The handshake settings the gateway's driver builds from `[session]` defaults.
    fn config(&self) -> Config {
        let mut c = Config::new(self.mac, self.addr, 24);
        c.suites = SuiteList::from_suites(&[SuiteId::Aes128Gcm, SuiteId::ChaCha20Poly1305]);
        c.smkex = SmkexMode::Preferred;
        c.paths = 2;
        c.lifetime = Duration::from_secs(3600);
        c.min_lifetime = Duration::from_secs(60);
        c.static_key = Some(self.identity.static_key());
        c
    }

    fn as_peer(&self) -> Peer {
        Peer {
            mac: self.mac,
            addr: self.addr,
            pinned_x25519: Some(self.identity.static_key().public_key()),
        }
    }

    fn group_key() -> Option<SuiteKey> {
        SuiteKey::new(SuiteId::Aes128Gcm, &arr::<16>(GROUP_KEY)).ok()
    }

    fn sealer(&self) -> Option<Sealer> {
        let s = Sealer::new(Self::group_key()?, Seq(self.group_seq), SealerConfig::new()).ok()?;
        Some(s.with_signer(self.identity.signing_key().ok()?))
    }

    /// This host's group frames as its peer opens them (one opener per path).
    fn opener(&self) -> Option<Opener> {
        let o = Opener::new(Self::group_key()?, OpenerConfig::new()).ok()?;
        Some(o.with_verifier(self.identity.signing_key().ok()?.public_key()))
    }
}

/// The largest frame on the wire here.
const FRAME: usize = 512;

/// Frames waiting for delivery, in the order sent.
struct Wire {
    frames: [([u8; FRAME], usize, PathId, bool); HANDSHAKE_FRAMES + 2],
    sent: usize,
    digest: Sha256,
}

impl Wire {
    fn push(&mut self, frame: &[u8], path: PathId, from_initiator: bool) -> bool {
        let Some(slot) = self.frames.get_mut(self.sent) else {
            return false;
        };
        slot.0[..frame.len()].copy_from_slice(frame);
        (slot.1, slot.2, slot.3) = (frame.len(), path, from_initiator);
        self.sent += 1;
        hash_frame(&mut self.digest, path, frame);
        true
    }
}

fn hash_frame(d: &mut Sha256, path: PathId, frame: &[u8]) {
    d.update([path.0 + 1]);
    d.update((frame.len() as u16).to_be_bytes());
    d.update(frame);
}

/// One side: its group sealer, the handshake and the keys it ends with.
struct Side {
    host: Host,
    sealer: Sealer,
    hs: Option<Handshake>,
    rng: Script,
    keys: Option<SessionKeys>,
}

impl Side {
    /// Seals every message the handshake has to send onto the wire; false on any error.
    fn transmit(&mut self, now: Instant, to: [u8; 6], wire: &mut Wire, initiator: bool) -> bool {
        let (mut buf, mut frame) = ([0u8; FRAME], [0u8; FRAME]);
        let Some(hs) = self.hs.as_mut() else {
            return true;
        };
        loop {
            match hs.poll_event() {
                Some(Event::Established(k)) => self.keys = Some(k),
                Some(_) => return false,
                None => {}
            }
            let Some(t) = hs.poll_transmit(now, &mut buf) else {
                return true;
            };
            let Ok(sealed) = self.sealer.seal_sub(
                now,
                to,
                self.host.mac,
                t.protocol,
                &buf[..t.len],
                &mut frame,
            ) else {
                return false;
            };
            if !wire.push(sealed, t.path, initiator) {
                return false;
            }
        }
    }
}

/// What the exchange produced.
struct Outcome {
    handshake_digest: [u8; 32],
    frames: usize,
    key_id: u32,
    data_digest: [u8; 32],
}

/// The handshake, both sides: the keys each ended with, the digest of the frames and their
/// count. (Separate from the data path so that the two never share a stack frame: this runs
/// on microcontrollers.)
#[inline(never)]
fn handshake(now: Instant) -> Option<(SessionKeys, SessionKeys, [u8; 32], usize)> {
    let (hi, hr) = (Host::initiator(), Host::responder());
    // Each side opens the other's group frames, one opener per path.
    let mut open_from_i = [hi.opener()?, hi.opener()?];
    let mut open_from_r = [hr.opener()?, hr.opener()?];
    let (peer_i, peer_r) = (hi.as_peer(), hr.as_peer());
    let mut i = Side {
        sealer: hi.sealer()?,
        rng: Script::new(hi.tag),
        host: hi,
        hs: None,
        keys: None,
    };
    let mut r = Side {
        sealer: hr.sealer()?,
        rng: Script::new(hr.tag),
        host: hr,
        hs: None,
        keys: None,
    };
    i.hs = Some(Handshake::initiate(
        now,
        i.host.config(),
        peer_r,
        Tai64n(arr(TIMESTAMP)),
        &mut i.rng,
    ));
    let mut wire = Wire {
        frames: [([0; FRAME], 0, PathId::FIRST, false); HANDSHAKE_FRAMES + 2],
        sent: 0,
        digest: Sha256::new(),
    };
    if !i.transmit(now, MAC_R, &mut wire, true) {
        return None;
    }
    let mut next = 0;
    while next < wire.sent {
        let (mut frame, len, path, from_i) = wire.frames[next];
        next += 1;
        let (to, opener, peer, to_mac) = if from_i {
            (&mut r, &mut open_from_i[usize::from(path.0)], peer_i, MAC_I)
        } else {
            (&mut i, &mut open_from_r[usize::from(path.0)], peer_r, MAC_R)
        };
        let opened = opener.open(now, &mut frame[..len]).ok()?;
        let mut payload = [0u8; FRAME];
        let n = opened.payload().len();
        payload[..n].copy_from_slice(opened.payload());
        match to.hs.as_mut() {
            Some(hs) => hs.handle_message(now, path, &payload[..n]).ok()?,
            None => {
                let cfg = to.host.config();
                let hs = Handshake::respond(now, cfg, peer, path, &payload[..n], &mut to.rng);
                to.hs = Some(hs.ok()?);
            }
        }
        if !to.transmit(now, to_mac, &mut wire, !from_i) {
            return None;
        }
    }
    let (ki, kr) = (i.keys.take()?, r.keys.take()?);
    if ki.key_id() != kr.key_id() {
        return None;
    }
    Some((ki, kr, wire.digest.finalize().into(), wire.sent))
}

/// The data path: the initiator's keepalive and ping, the responder's pong, each opened by the
/// peer; the digest of the three frames.
#[inline(never)]
fn data_path(now: Instant, ki: &SessionKeys, kr: &SessionKeys) -> Option<[u8; 32]> {
    let mut ring_i = KeyRing::new(KeyRingConfig::default());
    let mut ring_r = KeyRing::new(KeyRingConfig::default());
    ring_i.install(now, ki).ok()?;
    ring_r.install(now, kr).ok()?;
    let mut data = Sha256::new();
    let (mut out, mut ping, mut pong) = ([0u8; FRAME], [0u8; 128], [0u8; 128]);
    let (ping_len, pong_len) = (unhex(PING, &mut ping), unhex(PONG, &mut pong));
    let keepalive = ring_i
        .seal_sub(now, MAC_R, MAC_I, Protocol::Control, &[0x01], &mut out)
        .ok()?;
    let n = keepalive.len();
    hash_frame(&mut data, PathId::FIRST, keepalive);
    ring_r.open(now, &mut out[..n]).ok()?;
    let sealed = ring_i.seal(now, &ping[..ping_len], &mut out).ok()?;
    let n = sealed.len();
    hash_frame(&mut data, PathId::FIRST, sealed);
    if ring_r.open(now, &mut out[..n]).ok()?.frame() != &ping[..ping_len] {
        return None;
    }
    let sealed = ring_r.seal(now, &pong[..pong_len], &mut out).ok()?;
    let n = sealed.len();
    hash_frame(&mut data, PathId::FIRST, sealed);
    if ring_i.open(now, &mut out[..n]).ok()?.frame() != &pong[..pong_len] {
        return None;
    }
    Some(data.finalize().into())
}

/// Runs the exchange; `None` if any step failed.
fn exchange() -> Option<Outcome> {
    let now = Instant::from_secs(1_700_000_000);
    let (ki, kr, handshake_digest, frames) = handshake(now)?;
    Some(Outcome {
        handshake_digest,
        frames,
        key_id: ki.key_id().get(),
        data_digest: data_path(now, &ki, &kr)?,
    })
}

/// Runs the session check.
pub fn check(report: &mut dyn FnMut(bool, &str)) {
    let Some(o) = exchange() else {
        report(false, "session vector: the exchange failed");
        return;
    };
    report(
        o.frames == HANDSHAKE_FRAMES && o.handshake_digest == arr::<32>(HANDSHAKE_DIGEST),
        "session vector: every handshake frame (SEP + SMKEX, two paths)",
    );
    report(o.key_id == KEY_ID, "session vector: key id");
    report(
        o.data_digest == arr::<32>(DATA_DIGEST),
        "session vector: keepalive, ping and pong under the session keys",
    );
}

#[cfg(test)]
mod tests {
    extern crate std;
    use std::string::String;

    use super::*;

    /// The digests over the JSON vector's frames (the file docs/SESSIONS.md prints).
    fn json_digests() -> (String, String, u32, usize) {
        let file: serde_json::Value = serde_json::from_str(include_str!(
            "../../psp-core/tests/vectors/sep_exchange.json"
        ))
        .unwrap();
        let x = &file["exchanges"][0];
        assert_eq!(x["name"], "two paths, both hosts with identities");
        let digest = |list: &serde_json::Value| {
            let mut d = Sha256::new();
            for s in list.as_array().unwrap() {
                let path = PathId(u8::try_from(s["path"].as_u64().unwrap() - 1).unwrap());
                hash_frame(
                    &mut d,
                    path,
                    &hex::decode(s["frame"].as_str().unwrap()).unwrap(),
                );
            }
            hex::encode(d.finalize())
        };
        let frames = x["handshake"].as_array().unwrap().len();
        let key_id = u32::try_from(x["key_id"].as_u64().unwrap()).unwrap();
        (digest(&x["handshake"]), digest(&x["data"]), key_id, frames)
    }

    #[test]
    fn digests_match_the_json_vector() {
        let (hs, data, key_id, frames) = json_digests();
        assert_eq!(
            (HANDSHAKE_DIGEST, DATA_DIGEST, KEY_ID, HANDSHAKE_FRAMES),
            (hs.as_str(), data.as_str(), key_id, frames)
        );
    }

    #[test]
    fn the_exchange_reproduces_the_vector() {
        let o = exchange().expect("the exchange completes");
        let (hs, data, key_id, frames) = json_digests();
        assert_eq!(hex::encode(o.handshake_digest), hs);
        assert_eq!(hex::encode(o.data_digest), data);
        assert_eq!((o.key_id, o.frames), (key_id, frames));
    }
}
