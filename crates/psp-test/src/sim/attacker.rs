//! The attacker: where it sits ([`Caps`]), what it captured, and what it can do with that: send
//! a captured frame again (no key needed), drop or hold frames on a path it controls, and, with
//! the group key (an insider, or a former member), forge frames in any host's name, rewrite
//! handshake messages in flight and run handshakes of its own ("puppets": real psp-core
//! [`Handshake`]s under another host's MAC and address).
//!
//! What it knows is concrete: the frames it captured, and the session keys of its puppets (their
//! fingerprints, which the invariants compare with every honest host's key ring). It signs
//! forged group frames with its own Ed25519 key, or with a former member's: a receiver that pins
//! the claimed host's identity refuses them, one that does not accepts them.
//!
//! Its rewrites re-seal the message under the group key with the frame's own sequence number,
//! so the receiver takes the rewritten message as the sender's; only the handshake's own
//! bindings (the transcript hash over path 2, the confirmations) can tell.

use std::collections::{BTreeMap, BTreeSet};

use psp_core::SuiteKey;
use psp_core::handshake::messages::{Body, Repr};
use psp_core::handshake::schedule::Ephemeral;
use psp_core::handshake::{
    self, Event as HsEvent, Handshake, Identity, PathId, Peer, SmkexMode, Tai64n,
};
use psp_core::host::Mac;
use psp_core::normalize::Endpoint;
use psp_core::protect::{Opener, OpenerConfig, Sealer, SealerConfig};
use psp_core::time::Instant;
use psp_core::wire::{Frame, Protocol, Seq};

use super::SimRng;
use super::action::{ForgeKind, Rewrite, Target};
use super::app::{self, ATTACKER, BROADCAST, Tag};
use super::node::{MAX_FRAME, Roster, WALL0};

/// Frames at most this long are keepalives and probes (see `capture`).
const SMALL_FRAME: usize = 64;

/// What the attacker can do on each path (index 0: path 1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Caps {
    /// It sees every frame.
    pub(crate) see: [bool; 2],
    /// It can send frames with any source MAC.
    pub(crate) inject: [bool; 2],
    /// It can drop and hold frames.
    pub(crate) control: [bool; 2],
}

/// What the attacker does with a frame it sees on a path it controls.
#[derive(Debug)]
pub(crate) enum Verdict {
    Pass,
    Drop,
    Hold(Instant),
    Replace(Vec<u8>),
}

/// One of its own handshakes.
struct Puppet {
    hs: Handshake,
    /// The host it claims to be.
    claims: u8,
    /// The host it talks to.
    to: u8,
    /// The session's sealer, once established.
    sealer: Option<Sealer>,
}

/// The attacker.
pub(crate) struct Attacker {
    pub(crate) caps: Caps,
    /// It holds the group key.
    pub(crate) insider: bool,
    /// It stopped (the quiet phase).
    pub(crate) stopped: bool,
    captured: [Vec<Vec<u8>>; 2],
    seen: u64,
    /// The highest group-key sequence number seen per source MAC and path.
    last_sn: BTreeMap<(Mac, u8), u32>,
    /// The newest Request timestamp seen per initiator MAC.
    max_ts: BTreeMap<Mac, Tai64n>,
    counter: u64,
    far: u32,
    /// Honest hosts' frames it sealed again, and in whose name.
    pub(crate) resealed: BTreeSet<(Tag, u8)>,
    /// Hosts in whose name it forged a frame with a sequence number far ahead, and to whom.
    pub(crate) far_forged: BTreeSet<(u8, u8)>,
    puppets: Vec<Puppet>,
    /// Fingerprints of session keys it holds.
    pub(crate) known: BTreeSet<[u8; 20]>,
    rewrite: Option<Rewrite>,
    /// Handshake messages it rewrote.
    pub(crate) rewritten: u64,
    drop: [u32; 2],
    hold_until: [Instant; 2],
    rng: SimRng,
    eve: Identity,
    eve_static: handshake::StaticKey,
    eve_share: [u8; 32],
    /// Identities of former members it holds (a retired host's): it signs as them.
    pub(crate) identities: BTreeMap<u8, Identity>,
    /// Certificates of former members it holds (`[pki]`).
    pub(crate) certs: BTreeMap<u8, psp_core::pki::Certificate>,
    /// The hosts run `[pki]`: its puppets present certificates (a former member's, or one its
    /// own CA signed for eve's key).
    pub(crate) pki: bool,
    /// Some host uses ML-KEM-768: half its puppets offer it too (`kem = "prefer"`: the KEM is
    /// unauthenticated, anyone can run it).
    pub(crate) kem: bool,
    outbox: Vec<(u8, Vec<u8>)>,
    hosts: u8,
}

impl Attacker {
    pub(crate) fn new(caps: Caps, insider: bool, seed: u64, hosts: u8) -> Self {
        let eve = Roster::identity(0xe0, 0);
        Self {
            caps,
            insider,
            stopped: false,
            captured: [Vec::new(), Vec::new()],
            seen: 0,
            last_sn: BTreeMap::new(),
            max_ts: BTreeMap::new(),
            counter: 0,
            far: 0,
            resealed: BTreeSet::new(),
            far_forged: BTreeSet::new(),
            puppets: Vec::new(),
            known: BTreeSet::new(),
            rewrite: None,
            rewritten: 0,
            drop: [0; 2],
            hold_until: [Instant::ZERO; 2],
            rng: SimRng::new(seed ^ 0xe7e),
            eve_static: eve.static_key(),
            eve,
            eve_share: Ephemeral::from_bytes([0xe5; 32]).public_share(),
            identities: BTreeMap::new(),
            certs: BTreeMap::new(),
            pki: false,
            kem: false,
            outbox: Vec::new(),
            hosts,
        }
    }

    /// Frames it wants to send (puppets' messages), by path.
    pub(crate) fn take_outbox(&mut self) -> Vec<(u8, Vec<u8>)> {
        core::mem::take(&mut self.outbox)
    }

    /// An honest frame on `path`: captured if it sees the path (an insider sees broadcasts on
    /// path 1), read with the group key, and what it does with it if it controls the path.
    pub(crate) fn observe(&mut self, now: Instant, path: u8, frame: &[u8]) -> Verdict {
        if self.stopped {
            return Verdict::Pass;
        }
        let p = usize::from(path);
        let broadcast = frame.first().is_some_and(|b| b & 1 == 1);
        let sees = self.caps.see[p] || (self.insider && path == 0 && broadcast);
        if !sees {
            return Verdict::Pass;
        }
        self.capture(path, frame);
        let header = Frame::new_checked(frame, 0).ok();
        let message = if self.insider {
            self.read_group(frame, path)
        } else {
            None
        };
        if let Some((src, dst, repr, bytes)) = &message {
            if let Body::Request(req) = repr.body {
                let e = self.max_ts.entry(*src).or_insert(req.timestamp);
                *e = (*e).max(req.timestamp);
            }
            self.feed_puppets(now, path, *src, *dst, bytes);
        }
        if !self.caps.control[p] {
            return Verdict::Pass;
        }
        if self.drop[p] > 0 {
            self.drop[p] -= 1;
            return Verdict::Drop;
        }
        if let (Some(op), Some((_, _, repr, _)), Some(f)) = (self.rewrite, message, &header)
            && let Some(new) = rewritten(op, repr, self.eve_static.public_key(), self.eve_share)
        {
            self.rewrite = None;
            self.rewritten += 1;
            let (src, dst, seq) = (f.src_addr(), f.dst_addr(), f.seq_number());
            return match self.seal_message(now, src, dst, seq, &new) {
                Some(f) => Verdict::Replace(f),
                None => Verdict::Drop,
            };
        }
        if now < self.hold_until[p] {
            return Verdict::Hold(self.hold_until[p]);
        }
        Verdict::Pass
    }

    fn capture(&mut self, path: u8, frame: &[u8]) {
        self.seen += 1;
        // The smallest frames are keepalives and path probes (40 a second on an idle path): an
        // attacker that kept them all would hold little else to replay, so it keeps one in 256.
        if frame.len() <= SMALL_FRAME && !self.seen.is_multiple_of(256) {
            return;
        }
        let c = &mut self.captured[usize::from(path)];
        if c.len() < 256 {
            c.push(frame.to_vec());
        } else {
            // Keep the newest half, and a sample of the older frames.
            let i = (super::mix(self.seen, 7) % 256) as usize;
            if i < 128 || self.seen.is_multiple_of(4) {
                c[i] = frame.to_vec();
            } else {
                c.remove(128);
                c.push(frame.to_vec());
            }
        }
    }

    /// A captured frame, chosen by `pick`.
    pub(crate) fn replay(&self, path: u8, pick: u32) -> Option<Vec<u8>> {
        let c = &self.captured[usize::from(path & 1)];
        if c.is_empty() || !self.caps.inject[usize::from(path & 1)] {
            return None;
        }
        c.get(pick as usize % c.len()).cloned()
    }

    pub(crate) fn arm_drop(&mut self, path: u8, count: u8) {
        self.drop[usize::from(path & 1)] += u32::from(count);
    }

    pub(crate) fn arm_hold(&mut self, path: u8, until: Instant) {
        self.hold_until[usize::from(path & 1)] = until;
    }

    pub(crate) fn arm_rewrite(&mut self, op: Rewrite) {
        self.rewrite = Some(op);
    }

    /// Stops: no more captures, drops, holds or rewrites; its puppets end.
    pub(crate) fn stop(&mut self) {
        self.stopped = true;
        self.puppets.clear();
        self.drop = [0; 2];
        self.rewrite = None;
    }

    /// Opens a group-key frame (any signature accepted): notes its sequence number (the next
    /// forgery in its sender's name follows it) and parses a handshake message in it.
    fn read_group(&mut self, frame: &[u8], path: u8) -> Option<(Mac, Mac, Repr, Vec<u8>)> {
        let mut f = frame.to_vec();
        let mut opener = group_opener();
        let o = opener.open(Instant::ZERO, &mut f).ok()?;
        let e = self.last_sn.entry((o.src_addr(), path)).or_insert(0);
        *e = (*e).max(o.seq().0);
        if !matches!(
            o.protocol(),
            Protocol::SessionEstablishment | Protocol::KeyExchange
        ) {
            return None;
        }
        let payload = o.payload().to_vec();
        let repr = Repr::parse_bytes(&payload).ok()?;
        Some((o.src_addr(), o.dst_addr(), repr, payload))
    }

    /// Seals `payload` under the group key in `src`'s name with sequence number `seq`.
    fn seal_group(
        &mut self,
        now: Instant,
        src: Mac,
        dst: Mac,
        seq: Seq,
        proto: Protocol,
        payload: &[u8],
    ) -> Option<Vec<u8>> {
        let mut s = self.group_sealer(src, seq)?;
        let mut out = vec![0u8; 2048];
        let f = s.seal_sub(now, dst, src, proto, payload, &mut out).ok()?;
        Some(f.to_vec())
    }

    fn group_sealer(&self, src: Mac, seq: Seq) -> Option<Sealer> {
        let g = Roster::group_key();
        let key = SuiteKey::new(g.suite, &g.key).ok()?;
        let mut s = Sealer::new(key, seq, SealerConfig::new()).ok()?;
        let id = Roster::default_host_of(&src)
            .and_then(|h| self.identities.get(&h))
            .unwrap_or(&self.eve);
        s.set_signer(id.signing_key().ok());
        Some(s)
    }

    /// The next sequence number for a forgery in `src`'s name on `path`.
    fn next_sn(&mut self, src: Mac, path: u8, far: bool) -> Seq {
        if far {
            self.far += 1;
            return Seq(0x4000_0000 + self.far);
        }
        let last = self.last_sn.get(&(src, path)).copied().unwrap_or(0);
        self.counter += 1;
        Seq(last.saturating_add(1 + (self.counter % 3) as u32))
    }

    /// Forges a frame in host `from`'s name; returns the frames to send on path 1, and the tag
    /// of the data it carries (if any).
    pub(crate) fn forge(
        &mut self,
        now: Instant,
        from: u8,
        to: Target,
        kind: ForgeKind,
        far: bool,
    ) -> (Vec<Vec<u8>>, Option<Tag>) {
        if self.stopped || !self.insider {
            return (Vec::new(), None);
        }
        let src = Roster::mac(from);
        let (dst, dst_ip, to_host) = match to {
            Target::Host(h) => (Roster::mac(h), Roster::ip(h), Some(h)),
            Target::Broadcast => (BROADCAST, core::net::Ipv4Addr::BROADCAST, None),
        };
        self.counter += 1;
        let tag = Tag {
            origin: ATTACKER,
            counter: self.counter,
        };
        let inner = app::frame((dst, dst_ip), (src, Roster::ip(from)), tag, 120);
        // With a puppet session toward the target, data goes under its keys.
        if kind == ForgeKind::Data
            && let Some(h) = to_host
            && let Some(p) = self
                .puppets
                .iter_mut()
                .find(|p| p.claims == from && p.to == h && p.sealer.is_some())
            && let Some(s) = p.sealer.as_mut()
        {
            let mut out = vec![0u8; 2048];
            if let Ok(f) = s.seal(now, &inner, &mut out) {
                return (vec![f.to_vec()], Some(tag));
            }
        }
        let seq = self.next_sn(src, 0, far);
        let Some(mut sealer) = self.group_sealer(src, seq) else {
            return (Vec::new(), None);
        };
        let mut out = vec![0u8; 2048];
        let sealed = match kind {
            ForgeKind::Data => sealer.seal(now, &inner, &mut out).ok().map(<[u8]>::to_vec),
            ForgeKind::WrappedUnicast => {
                let h = to_host.unwrap_or(0);
                let wrapped = app::frame(
                    (BROADCAST, Roster::ip(h)),
                    (src, Roster::ip(from)),
                    tag,
                    120,
                );
                sealer
                    .seal(now, &wrapped, &mut out)
                    .ok()
                    .map(<[u8]>::to_vec)
            }
            ForgeKind::GroupCopy => {
                let bcast = app::frame(
                    (BROADCAST, core::net::Ipv4Addr::BROADCAST),
                    (src, Roster::ip(from)),
                    tag,
                    120,
                );
                let mut copy = bcast[..6].to_vec();
                copy.extend_from_slice(&bcast[12..]);
                sealer
                    .seal_sub(now, dst, src, Protocol::GroupCopy, &copy, &mut out)
                    .ok()
                    .map(<[u8]>::to_vec)
            }
            ForgeKind::Normalized => {
                let mut cfg = psp_core::normalize::NormConfig::default();
                cfg.frame_len = 500;
                cfg.wire_len = 600;
                let mut ep = Endpoint::new(now, cfg, vec![0u8; cfg.storage_len()]).ok();
                let mut payload = vec![0u8; 600];
                let p = ep.as_mut().and_then(|ep| {
                    ep.handle_inner(now, &inner).ok()?;
                    let at = ep.poll_timeout().unwrap_or(now).max(now);
                    let t = ep.poll_transmit(at, &mut payload)?;
                    Some(t.payload.len())
                });
                p.and_then(|len| {
                    sealer
                        .seal_sub(
                            now,
                            dst,
                            src,
                            Protocol::Normalized,
                            &payload[..len],
                            &mut out,
                        )
                        .ok()
                        .map(<[u8]>::to_vec)
                })
            }
            ForgeKind::Control => sealer
                .seal_sub(now, dst, src, Protocol::Control, &[1], &mut out)
                .ok()
                .map(<[u8]>::to_vec),
            ForgeKind::Request | ForgeKind::FutureRequest => {
                let Some(h) = to_host else {
                    return (Vec::new(), None);
                };
                let mut cfg = handshake::Config::new(src, Roster::ip(from).into(), 24);
                cfg.smkex = SmkexMode::Off;
                let ahead = if kind == ForgeKind::FutureRequest {
                    3600
                } else {
                    1
                };
                let ts = self.timestamp(now, src).plus_secs(ahead);
                let peer = Peer {
                    mac: Roster::mac(h),
                    addr: Roster::ip(h).into(),
                    pinned_x25519: None,
                };
                let mut hs = Handshake::initiate(now, cfg, peer, ts, &mut self.rng);
                let mut buf = [0u8; 256];
                hs.poll_transmit(now, &mut buf).and_then(|t| {
                    sealer
                        .seal_sub(now, dst, src, t.protocol, &buf[..t.len], &mut out)
                        .ok()
                        .map(<[u8]>::to_vec)
                })
            }
        };
        if far && let Some(f) = &sealed {
            // Every host that receives it (a broadcast frame: all).
            for h in (0..self.hosts).filter(|h| f[..6] == Roster::mac(*h) || f[0] & 1 == 1) {
                self.far_forged.insert((from, h));
            }
        }
        let data = !matches!(
            kind,
            ForgeKind::Control | ForgeKind::Request | ForgeKind::FutureRequest
        );
        (sealed.into_iter().collect(), data.then_some(tag))
    }

    /// A Request timestamp newer than any it saw from `src`.
    fn timestamp(&self, now: Instant, src: Mac) -> Tai64n {
        let wall = Tai64n::from_unix(WALL0, 0).plus(now.saturating_since(Instant::ZERO));
        match self.max_ts.get(&src) {
            Some(t) if *t >= wall => t.successor(),
            _ => wall,
        }
    }

    /// Starts a puppet handshake with host `to` in host `from`'s name: single-path unless it
    /// can both see and inject on path 2.
    pub(crate) fn puppet(&mut self, now: Instant, from: u8, to: u8) {
        if self.stopped || !self.insider || !self.caps.see[0] || from == to {
            return;
        }
        let two = self.caps.see[1] && self.caps.inject[1];
        let mut cfg = handshake::Config::new(Roster::mac(from), Roster::ip(from).into(), 24);
        cfg.smkex = if two {
            SmkexMode::Preferred
        } else {
            SmkexMode::Off
        };
        cfg.paths = if two { 2 } else { 1 };
        self.counter += 1;
        cfg.static_key = (self.pki || self.counter.is_multiple_of(2)).then(|| {
            self.identities
                .get(&from)
                .map_or_else(|| self.eve_static.clone(), Identity::static_key)
        });
        if self.kem && self.counter % 4 < 2 {
            cfg.kem = handshake::KemMode::Preferred;
        }
        if self.pki {
            // A former member's own certificate, or one for eve's key from the attacker's CA.
            let cert = self.certs.get(&from).copied().unwrap_or_else(|| {
                let ca = psp_core::SigningKey::from_seed(&[0xee; 32]).expect("a valid seed");
                Roster::cert_for(from, 0xee, self.eve.public_key(), &ca)
            });
            cfg.certificate = handshake::messages::CertBytes::new(cert.as_bytes());
        }
        let peer = Peer {
            mac: Roster::mac(to),
            addr: Roster::ip(to).into(),
            pinned_x25519: None,
        };
        let ts = self.timestamp(now, Roster::mac(from));
        let hs = Handshake::initiate(now, cfg, peer, ts, &mut self.rng);
        self.puppets.push(Puppet {
            hs,
            claims: from,
            to,
            sealer: None,
        });
        if self.puppets.len() > 4 {
            self.puppets.remove(0);
        }
        let i = self.puppets.len() - 1;
        self.drive(now, i);
    }

    fn feed_puppets(&mut self, now: Instant, path: u8, src: Mac, dst: Mac, bytes: &[u8]) {
        for i in 0..self.puppets.len() {
            let p = &mut self.puppets[i];
            if Roster::mac(p.claims) == dst && Roster::mac(p.to) == src {
                let _ = p.hs.handle_message(now, PathId(path), bytes);
                self.drive(now, i);
            }
        }
    }

    fn drive(&mut self, now: Instant, i: usize) {
        let mut buf = [0u8; handshake::messages::MAX_MESSAGE_LEN];
        loop {
            let p = &mut self.puppets[i];
            if let Some(ev) = p.hs.poll_event() {
                if let HsEvent::Established(keys) = ev {
                    let (Ok(send), Ok(recv)) = (keys.send_key(), keys.recv_key()) else {
                        continue;
                    };
                    self.known.insert(*send.bivn());
                    self.known.insert(*recv.bivn());
                    let cfg = SealerConfig::new()
                        .with_security_number(Some(keys.key_id()))
                        .with_allow_none(true);
                    if let Ok(mut s) = Sealer::new(send, Seq(0), cfg) {
                        // The keepalive makes the responder seal under the keys.
                        let mut out = vec![0u8; 256];
                        let (src, dst) = (Roster::mac(p.claims), Roster::mac(p.to));
                        if let Ok(f) = s.seal_sub(now, dst, src, Protocol::Control, &[1], &mut out)
                        {
                            self.outbox.push((0, f.to_vec()));
                        }
                        p.sealer = Some(s);
                    }
                }
                continue;
            }
            let Some(t) = p.hs.poll_transmit(now, &mut buf) else {
                break;
            };
            let (src, dst) = (Roster::mac(p.claims), Roster::mac(p.to));
            let path = t.path.0.min(1);
            if !self.caps.inject[usize::from(path)] {
                continue;
            }
            let seq = self.next_sn(src, path, false);
            if let Some(f) = self.seal_group(now, src, dst, seq, t.protocol, &buf[..t.len]) {
                self.outbox.push((path, f));
            }
        }
    }

    /// When a puppet's timer is due.
    pub(crate) fn next_wake(&self) -> Option<Instant> {
        self.puppets
            .iter()
            .filter_map(|p| p.hs.poll_timeout())
            .min()
    }

    /// Fires the puppets' timers due at `now`.
    pub(crate) fn timeout(&mut self, now: Instant) {
        for i in 0..self.puppets.len() {
            if self.puppets[i].hs.poll_timeout().is_some_and(|t| t <= now) {
                self.puppets[i].hs.handle_timeout(now);
                self.drive(now, i);
            }
        }
        self.puppets
            .retain(|p| !p.hs.is_closed() || p.sealer.is_some());
    }

    /// Whether it holds the key with fingerprint `fp`.
    pub(crate) fn knows(&self, fp: &[u8; 20]) -> bool {
        self.known.contains(fp)
    }

    /// One frame of a replay flood: a captured handshake message (one whose frame opens under
    /// the group key, for an insider) sealed again under a fresh sequence number in its
    /// sender's name; a keyless attacker sends a captured frame as it was.
    pub(crate) fn reseal_request(&mut self, now: Instant, pick: u64) -> Option<(u8, Vec<u8>)> {
        let path = (pick & 1) as u8;
        let c = &self.captured[usize::from(path)];
        if c.is_empty() {
            return None;
        }
        let start = (pick >> 1) as usize % c.len();
        if !self.insider {
            let f = c[start].clone();
            return self.caps.inject[usize::from(path)].then_some((path, f));
        }
        // An insider floods Requests (it can read which frames are): the first from `start`.
        let n = c.len();
        let frames: Vec<Vec<u8>> = (0..n).map(|k| c[(start + k) % n].clone()).collect();
        let (src, dst, repr) = frames.iter().find_map(|f| {
            let (src, dst, repr, _) = self.read_group(f, path)?;
            matches!(repr.body, Body::Request(_)).then_some((src, dst, repr))
        })?;
        let seq = self.next_sn(src, path, false);
        let sealed = self.seal_message(now, src, dst, seq, &repr)?;
        Some((path, sealed))
    }

    /// A handshake message under the group key in `src`'s name, under its sub-protocol.
    fn seal_message(
        &mut self,
        now: Instant,
        src: Mac,
        dst: Mac,
        seq: Seq,
        repr: &Repr,
    ) -> Option<Vec<u8>> {
        let proto = if matches!(repr.body, Body::Nonce(_) | Body::NonceReply { .. }) {
            Protocol::KeyExchange
        } else {
            Protocol::SessionEstablishment
        };
        let mut buf = [0u8; handshake::messages::MAX_MESSAGE_LEN];
        let n = repr.emit(&mut buf);
        self.seal_group(now, src, dst, seq, proto, &buf[..n])
    }

    /// Sends an honest frame it opened under the group key again, in `as_host`'s name (an
    /// insider re-sealing a captured broadcast): the frames to send, and the tag inside.
    pub(crate) fn reseal(
        &mut self,
        now: Instant,
        path: u8,
        pick: u32,
        as_host: u8,
    ) -> Option<(Vec<u8>, Tag)> {
        if !self.insider || self.stopped {
            return None;
        }
        let c = &self.captured[usize::from(path & 1)];
        if c.is_empty() {
            return None;
        }
        let mut f = c[pick as usize % c.len()].clone();
        let mut opener = group_opener();
        let o = opener.open(Instant::ZERO, &mut f).ok()?;
        let mut inner = o.frame().to_vec();
        let tag = app::tag_of(&inner)?;
        let src = Roster::mac(as_host);
        inner[6..12].copy_from_slice(&src);
        let seq = self.next_sn(src, 0, false);
        let mut s = self.group_sealer(src, seq)?;
        let mut out = vec![0u8; 2048];
        let sealed = s.seal(now, &inner, &mut out).ok()?.to_vec();
        self.resealed.insert((tag, as_host));
        Some((sealed, tag))
    }
}

/// An opener for the group key that takes any signature and keeps no replay window.
fn group_opener() -> Opener {
    let g = Roster::group_key();
    let key = SuiteKey::new(g.suite, &g.key).expect("the group key");
    let mut o = Opener::new(key, OpenerConfig::new().with_max_frame_len(MAX_FRAME))
        .expect("the group key's opener");
    o.set_accept_unverified(true);
    o
}

/// `repr` with `op` applied, if it applies to its message type.
fn rewritten(
    op: Rewrite,
    mut repr: Repr,
    eve_static: [u8; 32],
    eve_share: [u8; 32],
) -> Option<Repr> {
    match (op, &mut repr.body) {
        (Rewrite::FutureTimestamp, Body::Request(r)) => r.timestamp = r.timestamp.plus_secs(3600),
        (Rewrite::StripTwoPath, Body::Request(r)) => {
            r.flags.two_path = false;
            r.flags.smkex_required = false;
        }
        (Rewrite::StripTwoPath, Body::Accept(a)) => a.two_path = false,
        (Rewrite::StaticNone, Body::Request(r)) => r.static_key = None,
        (Rewrite::StaticNone, Body::Accept(a)) => a.static_key = None,
        (Rewrite::StaticEve, Body::Request(r)) => r.static_key = Some(eve_static),
        (Rewrite::StaticEve, Body::Accept(a)) => a.static_key = Some(eve_static),
        (
            Rewrite::SwapShare,
            Body::Share { share, .. }
            | Body::ShareReply { share, .. }
            | Body::KemShare { share, .. }
            | Body::KemShareReply { share, .. },
        ) => {
            *share = eve_share;
        }
        // The downgrade of the hybrid handshake: the KEM stripped from one of its messages
        // (only where there is a KEM to strip), the rest of the message as it was.
        (Rewrite::StripKemOffer, Body::Request(r)) if r.flags.kem => {
            r.flags.kem = false;
            r.flags.kem_required = false;
        }
        (Rewrite::StripKemAnswer, Body::Accept(a)) if a.kem => a.kem = false,
        (
            Rewrite::StripKemKey,
            Body::KemShare {
                expiry_secs, share, ..
            },
        ) => {
            repr.body = Body::Share {
                expiry_secs: *expiry_secs,
                share: *share,
            };
        }
        (
            Rewrite::StripKemCiphertext,
            Body::KemShareReply {
                expiry_secs, share, ..
            },
        ) => {
            repr.body = Body::ShareReply {
                expiry_secs: *expiry_secs,
                share: *share,
            };
        }
        _ => return None,
    }
    Some(repr)
}

impl Roster {
    /// The host index a MAC of the simulation names (the attacker's guess: hosts are
    /// numbered by their MAC's last byte).
    pub(crate) fn default_host_of(mac: &Mac) -> Option<u8> {
        (mac[..5] == [2, 0x50, 0x53, 0, 0]).then(|| mac[5].wrapping_sub(1))
    }
}
