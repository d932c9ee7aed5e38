//! [`GatewayParty`]: the reference honest host. psp-core's [`Handshake`] and [`KeyRing`] per
//! peer, under the responder rules the gateway applies around the core:
//!
//! - **Freshness** (per peer, [`Freshness`]): a Request is taken only if its timestamp is newer
//!   than the highest accepted from that peer, and never replaces a running responder handshake
//!   unless it is newer than the Request that handshake answers. When the highest value is
//!   raised is a [`FreshnessRule`].
//! - **Copies**: a Request with the initiator id of the running handshake goes to that handshake
//!   (which answers it at most once per half RTO).
//! - **The limiter** ([`RequestLimiter`], per source MAC) is checked after freshness and before
//!   a running handshake is replaced.
//! - **Crossings**: while this host's own initiator handshake runs, a Request from the peer is
//!   ignored if this host has the lower MAC (it stays initiator); otherwise it answers.
//! - **Backoff**: after a failure, no new handshake by this host for 1 s, doubling per failure
//!   in a row up to 32 s, ±12.5 %.
//! - **The key ring**: the initiator seals under new keys at once and sends a keepalive under
//!   them; the responder installs them as *next* and seals under them only after a frame under
//!   them opened. A compact responder holds its keys unconfirmed until a frame under them
//!   arrives on path 2 (the caller's key confirmation that `Config::compact` asks for), for at
//!   most one handshake timeout; meanwhile they count as a handshake in progress.
//! - **Timestamps**: Requests are stamped by a [`TimestampClock`] over the host's wall clock.
//!
//! One handshake per peer at most; a closed one is dropped at once.

use core::net::IpAddr;
use std::collections::VecDeque;

use psp_core::handshake::messages::{Body, Repr};
use psp_core::handshake::{
    Config, Event, Freshness, Handshake, KeyRing, KeyRingConfig, PathId, Peer, RequestLimiter,
    Role, SessionId, SessionKeys, StaticKey, Tai64n, TimestampClock,
};
use psp_core::time::{Duration, Instant};
use psp_core::wire::Frame as PspFrame;
use psp_core::{Opener, OpenerConfig, Protocol, SuiteId};

use super::SimRng;
use super::party::{Frame, FrameBody, Mac, Observation, Party, SessionView, SlotKind};

/// When the responder raises a peer's highest accepted Request timestamp.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FreshnessRule {
    /// When it takes the Request (answers it with a handshake that did not fail at once). A
    /// Request is not authenticated before Confirm, so an insider's future-dated Request locks
    /// the peer out until the peer's clock passes it, with or without pinned identities.
    OnTake,
    /// When the handshake that Request started is established (for a compact responder: when
    /// its keys are confirmed). A running handshake still refuses Requests that are not newer
    /// than its own.
    OnEstablish,
    /// [`OnEstablish`](Self::OnEstablish), plus a second, per-peer "taken" watermark raised
    /// when a Request is taken: a Request not newer than it is refused for one handshake
    /// timeout after the take that raised it, and never makes this host give up its own
    /// running initiator handshake in a crossing. Replays of Requests taken earlier can then neither abort a
    /// crossing nor start a handshake within a timeout of the take, and an insider's
    /// future-dated Request blocks the peer's Requests for one timeout, not until the peer's
    /// clock passes it.
    Hybrid,
    /// No freshness check at all: any Request with a new initiator id replaces the running
    /// handshake (the gateway before Requests carried timestamps). Only for showing what the
    /// harness catches.
    Off,
}

/// The rules' knobs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Rules {
    /// When freshness is raised.
    pub freshness: FreshnessRule,
    /// The first retry backoff after a failure.
    pub backoff: Duration,
    /// The longest backoff.
    pub max_backoff: Duration,
    /// A new handshake when the peer never used this host's current session although it sends
    /// under other keys, or although this host has sealed traffic under it for a handshake
    /// timeout (WireGuard's "no reply" rule). The gateway starts one only when it has no
    /// session: a host whose keepalive (or compact confirmation) got lost seals under keys the
    /// peer does not hold until they expire.
    pub rehandshake_unheard: bool,
    /// A compact responder takes its keys as confirmed only by a frame under them on path 2
    /// (`false`: on any path, which lets an attacker that knows them confirm them on path 1;
    /// only for showing what the harness catches).
    pub compact_confirm_on_path2: bool,
}

impl Default for Rules {
    /// The gateway's backoff (1 s doubling to 32 s), [`FreshnessRule::Hybrid`], a new
    /// handshake when the peer never used the current keys and sends under others, compact keys
    /// confirmed on path 2.
    fn default() -> Self {
        Self {
            freshness: FreshnessRule::Hybrid,
            backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(32),
            rehandshake_unheard: true,
            compact_confirm_on_path2: true,
        }
    }
}

/// A host's identity in the simulation.
#[derive(Clone, Debug)]
pub struct HostSpec {
    /// Its MAC.
    pub mac: Mac,
    /// Its address.
    pub addr: IpAddr,
    /// Its long-term X25519 secret, if it has one.
    pub static_secret: Option<[u8; 32]>,
    static_public: Option<[u8; 32]>,
}

impl HostSpec {
    /// A host (the public key is computed once).
    pub fn new(mac: Mac, addr: IpAddr, static_secret: Option<[u8; 32]>) -> Self {
        Self {
            mac,
            addr,
            static_secret,
            static_public: static_secret.map(|s| StaticKey::from_bytes(s).public_key()),
        }
    }

    /// The long-term public key, if any.
    pub fn static_public(&self) -> Option<[u8; 32]> {
        self.static_public
    }
}

/// What the host knows of one session's keys (fingerprints only).
#[derive(Clone, Debug)]
struct KeyRecord {
    id: SessionId,
    role: Role,
    suite: SuiteId,
    send: [u8; 20],
    recv: [u8; 20],
    two_path: bool,
    peer_static: Option<[u8; 32]>,
    established_at: Instant,
}

impl KeyRecord {
    fn of(keys: &SessionKeys) -> Self {
        let fp = |k: Result<psp_core::SuiteKey, _>| k.map_or([0; 20], |k| *k.bivn());
        Self {
            id: keys.session_id(),
            role: keys.role(),
            suite: keys.suite(),
            send: fp(keys.send_key()),
            recv: fp(keys.recv_key()),
            two_path: keys.two_path(),
            peer_static: keys.peer_static(),
            established_at: keys.established_at(),
        }
    }
}

/// A compact responder's keys waiting for confirmation.
struct Unconfirmed {
    keys: SessionKeys,
    record: KeyRecord,
    request_ts: Option<Tai64n>,
    /// Dropped then, unconfirmed (the initiator confirms within its handshake timeout).
    until: Instant,
}

struct PeerState {
    mac: Mac,
    addr: IpAddr,
    pin: Option<[u8; 32]>,
    hs: Option<Handshake>,
    /// The timestamp of the Request the running responder handshake answers.
    hs_ts: Option<Tai64n>,
    freshness: Freshness,
    /// The "taken" watermark of [`FreshnessRule::Hybrid`] and when it was last raised.
    taken: Freshness,
    taken_at: Option<Instant>,
    ring: KeyRing,
    records: Vec<KeyRecord>,
    unconfirmed: Option<Unconfirmed>,
    want: bool,
    rekey: bool,
    holdoff: Option<Instant>,
    fails: u32,
    opened: u64,
}

/// The reference honest host (see the module docs for its rules).
pub struct GatewayParty {
    me: HostSpec,
    cfg: Config,
    rules: Rules,
    peers: Vec<PeerState>,
    clock: TimestampClock,
    /// Seconds since the Unix epoch of this host's wall clock at `Instant::ZERO`.
    wall_base: u64,
    limiter: RequestLimiter<16>,
    rng: SimRng,
    outbox: VecDeque<Frame>,
    buf: Vec<u8>,
}

impl GatewayParty {
    /// A host with handshake settings `cfg` (its MAC, address and long-term key are taken from
    /// `me`), knowing `peers` (each with the long-term key it pins, if any).
    pub fn new(
        me: HostSpec,
        mut cfg: Config,
        rules: Rules,
        peers: &[(HostSpec, Option<[u8; 32]>)],
        wall_base: u64,
        seed: u64,
    ) -> Self {
        cfg.local_mac = me.mac;
        cfg.local_addr = me.addr;
        cfg.static_key = me.static_secret.map(StaticKey::from_bytes);
        let mut peers: Vec<PeerState> = peers
            .iter()
            .map(|(p, pin)| PeerState {
                mac: p.mac,
                addr: p.addr,
                pin: *pin,
                hs: None,
                hs_ts: None,
                freshness: Freshness::new(),
                taken: Freshness::new(),
                taken_at: None,
                ring: KeyRing::new(KeyRingConfig::default()),
                records: Vec::new(),
                unconfirmed: None,
                want: false,
                rekey: false,
                holdoff: None,
                fails: 0,
                opened: 0,
            })
            .collect();
        peers.sort_by_key(|p| p.mac);
        Self {
            me,
            cfg,
            rules,
            peers,
            clock: TimestampClock::new(),
            wall_base,
            limiter: RequestLimiter::new(),
            rng: SimRng::new(seed),
            outbox: VecDeque::new(),
            buf: vec![0; 256],
        }
    }

    fn wall(&self, now: Instant) -> Tai64n {
        let us = now.total_micros();
        Tai64n::from_unix(
            self.wall_base + us / 1_000_000,
            (us % 1_000_000) as u32 * 1000,
        )
    }

    fn peer_ix(&self, mac: Mac) -> Option<usize> {
        self.peers.iter().position(|p| p.mac == mac)
    }

    fn initiate(&mut self, now: Instant, i: usize) {
        let wall = self.wall(now);
        let ts = self.clock.issue(wall);
        if let Some(t) = self.clock.reserve_due() {
            // The floor is "durable" at once in the simulation.
            self.clock.reserved(t);
        }
        let p = &mut self.peers[i];
        let peer = Peer {
            mac: p.mac,
            addr: p.addr,
            pinned_static: p.pin,
        };
        p.hs = Some(Handshake::initiate(
            now,
            self.cfg.clone(),
            peer,
            ts,
            &mut self.rng,
        ));
        p.hs_ts = None;
        p.rekey = false;
        self.drive(now, i);
    }

    /// Starts a handshake with peer `i` if it needs one and may have one.
    fn consider(&mut self, now: Instant, i: usize) {
        let p = &self.peers[i];
        if p.hs.is_some() || p.holdoff.is_some_and(|t| now < t) {
            return;
        }
        let need = (p.want && p.ring.current().is_none()) || p.rekey;
        if need {
            self.initiate(now, i);
        }
    }

    fn request(&mut self, now: Instant, i: usize, frame: &Frame, repr: &Repr, ts: Tai64n) {
        let bytes = match &frame.body {
            FrameBody::Handshake(b) => b.as_slice(),
            FrameBody::Session(_) => return,
        };
        let p = &mut self.peers[i];
        if let Some(hs) = p.hs.as_mut()
            && hs.session_id().initiator == repr.initiator_id
        {
            // A copy of the Request this handshake answers (or our own, reflected).
            let _ = hs.handle_message(now, frame.path, bytes);
            self.drive(now, i);
            return;
        }
        // Freshness first: a replay must not even spend the peer's tokens.
        // A compact responder's unconfirmed keys are a handshake still in progress too: a replay
        // of the Request they answer must not replace them.
        let running_newer = (p.hs.as_ref().is_some_and(|h| h.role() == Role::Responder)
            && p.hs_ts.is_some_and(|t| t >= ts))
            || p.unconfirmed
                .as_ref()
                .and_then(|u| u.request_ts)
                .is_some_and(|t| t >= ts);
        let rule = self.rules.freshness;
        let recently_taken = rule == FreshnessRule::Hybrid
            && !p.taken.is_fresh(ts)
            && p.taken_at.is_some_and(|t| now < t + self.cfg.timeout);
        if rule != FreshnessRule::Off
            && (!p.freshness.is_fresh(ts) || running_newer || recently_taken)
        {
            return;
        }
        if self.limiter.check(now, frame.src).is_err() {
            return;
        }
        let p = &mut self.peers[i];
        if let Some(hs) = &p.hs
            && hs.role() == Role::Initiator
            && !hs.is_closed()
            && (self.me.mac < frame.src || (rule == FreshnessRule::Hybrid && !p.taken.is_fresh(ts)))
        {
            // Crossing: the lower MAC stays initiator (and, under the hybrid rule, the higher
            // gives way only to a Request newer than every one it took).
            return;
        }
        let peer = Peer {
            mac: p.mac,
            addr: match repr.body {
                Body::Request(r) => r.initiator_addr,
                _ => p.addr,
            },
            pinned_static: p.pin,
        };
        let Ok(hs) = Handshake::respond(
            now,
            self.cfg.clone(),
            peer,
            frame.path,
            bytes,
            &mut self.rng,
        ) else {
            return;
        };
        let p = &mut self.peers[i];
        p.hs = Some(hs);
        p.hs_ts = Some(ts);
        self.drive(now, i);
        let p = &mut self.peers[i];
        if p.hs
            .as_ref()
            .is_some_and(|h| h.session_id().initiator == repr.initiator_id)
        {
            match rule {
                FreshnessRule::OnTake => p.freshness.accept(ts),
                FreshnessRule::Hybrid => {
                    // Only a take that raises the watermark restarts its timeout: replays of
                    // older Requests must not keep a future-dated one in force.
                    if p.taken.is_fresh(ts) {
                        p.taken.accept(ts);
                        p.taken_at = Some(now);
                    }
                }
                FreshnessRule::OnEstablish | FreshnessRule::Off => {}
            }
        }
    }

    /// Sends what peer `i`'s handshake queued and handles what it reported.
    fn drive(&mut self, now: Instant, i: usize) {
        loop {
            let p = &mut self.peers[i];
            let Some(hs) = p.hs.as_mut() else {
                return;
            };
            if let Some(ev) = hs.poll_event() {
                match ev {
                    Event::Established(keys) => self.established(now, i, keys),
                    Event::Failed(_) => self.failed(now, i),
                }
                continue;
            }
            let Some(t) = hs.poll_transmit(now, &mut self.buf) else {
                break;
            };
            self.outbox.push_back(Frame {
                src: self.me.mac,
                dst: p.mac,
                path: t.path,
                body: FrameBody::Handshake(self.buf[..t.len].to_vec()),
            });
        }
        let p = &mut self.peers[i];
        if p.hs.as_ref().is_some_and(Handshake::is_closed) {
            p.hs = None;
            p.hs_ts = None;
        }
    }

    fn established(&mut self, now: Instant, i: usize, keys: SessionKeys) {
        let compact = self.cfg.compact;
        let record = KeyRecord::of(&keys);
        let p = &mut self.peers[i];
        p.fails = 0;
        p.holdoff = None;
        if keys.role() == Role::Responder && compact && keys.two_path() {
            p.unconfirmed = Some(Unconfirmed {
                keys,
                record,
                request_ts: p.hs_ts,
                until: now + self.cfg.timeout,
            });
            return;
        }
        if keys.role() == Role::Responder
            && matches!(
                self.rules.freshness,
                FreshnessRule::OnEstablish | FreshnessRule::Hybrid
            )
            && let Some(t) = p.hs_ts
        {
            p.freshness.accept(t);
        }
        if p.ring.install(now, &keys).is_err() {
            return;
        }
        p.records.push(record);
        if keys.role() == Role::Initiator {
            // Keys still waiting for confirmation are older than these: a late confirmation
            // must not put them in front (the key ring retires its waiting *next* the same way).
            p.unconfirmed = None;
            // WireGuard's keepalive: the responder switches when it opens it. A compact
            // initiator also sends one on path 2: the responder's key confirmation.
            self.keepalive(now, i, PathId::FIRST);
            if compact && keys.two_path() {
                self.keepalive(now, i, PathId::SECOND);
            }
        }
        self.prune(i);
    }

    fn failed(&mut self, now: Instant, i: usize) {
        let p = &mut self.peers[i];
        p.fails = p.fails.saturating_add(1);
        let base = (self.rules.backoff.total_micros() << p.fails.saturating_sub(1).min(5))
            .min(self.rules.max_backoff.total_micros());
        let wait = base - base / 8 + self.rng.next_random() % (base / 4 + 1);
        p.holdoff = Some(now + Duration::from_micros(wait));
    }

    fn keepalive(&mut self, now: Instant, i: usize, path: PathId) {
        let mut out = [0u8; 256];
        let p = &mut self.peers[i];
        if let Ok(f) = p.ring.seal_sub(
            now,
            p.mac,
            self.me.mac,
            Protocol::Control,
            b"keepalive",
            &mut out,
        ) {
            self.outbox.push_back(Frame {
                src: self.me.mac,
                dst: p.mac,
                path,
                body: FrameBody::Session(f.to_vec()),
            });
        }
    }

    /// Forgets the fingerprints of sessions the ring no longer holds.
    fn prune(&mut self, i: usize) {
        let p = &mut self.peers[i];
        let live: Vec<SessionId> = [p.ring.previous(), p.ring.current(), p.ring.next()]
            .into_iter()
            .flatten()
            .map(|s| s.session_id())
            .collect();
        p.records.retain(|r| live.contains(&r.id));
    }

    fn session_frame(&mut self, now: Instant, i: usize, frame: &Frame, bytes: &[u8]) {
        let key_id = PspFrame::new_checked(bytes, 0)
            .ok()
            .and_then(|f| f.security_number());
        let p = &mut self.peers[i];
        if let Some(u) = &p.unconfirmed
            && key_id == Some(u.keys.key_id())
        {
            if frame.path != PathId::SECOND && self.rules.compact_confirm_on_path2 {
                // A compact responder's keys are confirmed on path 2 only.
                return;
            }
            let Ok(key) = u.keys.recv_key() else {
                return;
            };
            let cfg = OpenerConfig::new().with_security_number(Some(u.keys.key_id()));
            let Ok(mut opener) = Opener::new(key, cfg) else {
                return;
            };
            let mut copy = bytes.to_vec();
            if opener.open(now, &mut copy).is_err() {
                return;
            }
            let Some(u) = p.unconfirmed.take() else {
                return;
            };
            if matches!(
                self.rules.freshness,
                FreshnessRule::OnEstablish | FreshnessRule::Hybrid
            ) && let Some(t) = u.request_ts
            {
                p.freshness.accept(t);
            }
            if p.ring.install(now, &u.keys).is_ok() {
                p.records.push(u.record);
            }
        }
        let mut copy = bytes.to_vec();
        match p.ring.open(now, &mut copy) {
            Ok(_) => p.opened += 1,
            Err(psp_core::handshake::RingOpenError::UnknownKey) => {
                // The peer has keys we lack (we restarted, or its rekey got ahead). With no
                // session, start one (the gateway's rule); with one the peer never used, it
                // probably never got it either (a lost confirmation): start a new one too.
                if p.ring.current().is_none() {
                    p.want = true;
                } else if self.rules.rehandshake_unheard && !p.ring.current_heard() {
                    p.rekey = true;
                }
            }
            Err(_) => {}
        }
        self.prune(i);
        self.consider(now, i);
    }
}

impl Party for GatewayParty {
    fn mac(&self) -> Mac {
        self.me.mac
    }

    fn want(&mut self, now: Instant, peer: Mac, rekey: bool) {
        let Some(i) = self.peer_ix(peer) else {
            return;
        };
        let p = &mut self.peers[i];
        p.want = true;
        // The gateway rekeys only once the peer used the current keys, so it is never two
        // sessions behind.
        if rekey && p.ring.current_heard() {
            p.rekey = true;
        }
        self.consider(now, i);
    }

    fn send_data(&mut self, now: Instant, peer: Mac) -> bool {
        let Some(i) = self.peer_ix(peer) else {
            return false;
        };
        let mut inner = [0u8; 64];
        inner[..6].copy_from_slice(&peer);
        inner[6..12].copy_from_slice(&self.me.mac);
        inner[12..14].copy_from_slice(&[0x08, 0x00]);
        let mut out = [0u8; 256];
        let timeout = self.cfg.timeout;
        let p = &mut self.peers[i];
        // WireGuard's "no reply": traffic goes out under keys the peer has not used for a whole
        // handshake timeout, so it probably does not hold them. Start a new handshake.
        let unheard = p.ring.current().is_some_and(|c| {
            !p.ring.current_heard()
                && p.records
                    .iter()
                    .any(|r| r.id == c.session_id() && now >= r.established_at + timeout)
        });
        if self.rules.rehandshake_unheard && unheard {
            p.rekey = true;
        }
        match p.ring.seal(now, &inner, &mut out) {
            Ok(f) => {
                self.outbox.push_back(Frame {
                    src: self.me.mac,
                    dst: peer,
                    path: PathId::FIRST,
                    body: FrameBody::Session(f.to_vec()),
                });
                if p.rekey {
                    self.consider(now, i);
                }
                true
            }
            Err(_) => {
                p.want = true;
                self.consider(now, i);
                false
            }
        }
    }

    fn handle_frame(&mut self, now: Instant, frame: &Frame) {
        if frame.dst != self.me.mac {
            return;
        }
        let Some(i) = self.peer_ix(frame.src) else {
            return;
        };
        match &frame.body {
            FrameBody::Session(bytes) => self.session_frame(now, i, frame, bytes),
            FrameBody::Handshake(bytes) => {
                let Ok(repr) = Repr::parse_bytes(bytes) else {
                    return;
                };
                if let Body::Request(req) = repr.body {
                    self.request(now, i, frame, &repr, req.timestamp);
                } else if let Some(hs) = self.peers[i].hs.as_mut() {
                    let _ = hs.handle_message(now, frame.path, bytes);
                    self.drive(now, i);
                }
                self.consider(now, i);
            }
        }
    }

    fn handle_timeout(&mut self, now: Instant) {
        for i in 0..self.peers.len() {
            self.peers[i].ring.handle_timeout(now);
            if self.peers[i]
                .unconfirmed
                .as_ref()
                .is_some_and(|u| u.until <= now)
            {
                self.peers[i].unconfirmed = None;
            }
            if let Some(hs) = self.peers[i].hs.as_mut()
                && hs.poll_timeout().is_some_and(|t| t <= now)
            {
                hs.handle_timeout(now);
                self.drive(now, i);
            }
            self.prune(i);
            self.consider(now, i);
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        let mut t: Option<Instant> = None;
        let mut at = |x: Instant| t = Some(t.map_or(x, |t| t.min(x)));
        for p in &self.peers {
            if let Some(x) = p.hs.as_ref().and_then(Handshake::poll_timeout) {
                at(x);
            }
            if let Some(u) = &p.unconfirmed {
                at(u.until);
            }
            if let Some(h) = p.holdoff
                && p.hs.is_none()
                && ((p.want && p.ring.current().is_none()) || p.rekey)
            {
                at(h);
            }
        }
        t
    }

    fn poll_transmit(&mut self) -> Option<Frame> {
        self.outbox.pop_front()
    }

    fn observe(&self) -> Observation {
        let own_static = self.me.static_public();
        let mut o = Observation {
            peers: self.peers.len(),
            queued: self.outbox.len(),
            ..Observation::default()
        };
        for p in &self.peers {
            o.handshakes += usize::from(p.hs.is_some());
            o.opened.push((p.mac, p.opened));
            let view = |r: &KeyRecord, slot| SessionView {
                peer: p.mac,
                id: r.id,
                role: r.role,
                slot,
                suite: r.suite,
                send: r.send,
                recv: r.recv,
                two_path: r.two_path,
                peer_static: r.peer_static,
                own_static,
                pinned: p.pin.is_some(),
            };
            for (kind, slot) in [
                (SlotKind::Previous, p.ring.previous()),
                (SlotKind::Current, p.ring.current()),
                (SlotKind::Next, p.ring.next()),
            ] {
                if let Some(s) = slot
                    && let Some(r) = p.records.iter().find(|r| r.id == s.session_id())
                {
                    o.sessions.push(view(r, kind));
                }
            }
            if let Some(u) = &p.unconfirmed {
                o.sessions.push(view(&u.record, SlotKind::Unconfirmed));
            }
        }
        o
    }
}
