//! A session peer's policy ([`Session`]): its handshakes (psp-core's [`Handshake`]), its
//! [`KeyRing`], and the rules around them: when to start a handshake (frames wait, a rekey is
//! due, the peer sends under keys we lack, the peer fell silent, a normalized peer has no
//! session), the crossing rule, freshness of Requests, backoff after a failure, first-use pins,
//! liveness, and the frames that wait for a session. Every time-based rule sets its timer in
//! the peer's [`TimerTable`] where the decision is made.
//!
//! docs/SESSIONS.md ("In the gateway") describes the policy; every rule here has a test in
//! `host/tests.rs` or the simulator's sweep.

use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::net::IpAddr;

use rand_core::CryptoRngCore;

use super::super::counters::PeerCounters;
use super::super::{HostEvent, Pin, Shared, SlotKind};
use super::paths::{PathMode, PathState, Paths};
use super::timers::{Timer, TimerTable};
use super::{PeerId, PeerSpec};
use crate::crypto::SuiteId;
use crate::handshake::identity::ed25519_of;
use crate::handshake::messages::{Body, HandshakeId, Repr};
use crate::handshake::{
    Event as HsEvent, Freshness, Handshake, KeyRing, PathId, Peer as HsPeer, Role, SessionKeys,
    Slot, Tai64n,
};
use crate::plant::{self, Bug};
use crate::time::{Duration, Instant};

/// The first retry backoff; doubles per failure in a row up to [`MAX_BACKOFF`].
const BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(32);
/// The responder of the current session rekeys this much later than its initiator, so normally
/// only one side starts.
const RESPONDER_SLACK: Duration = Duration::from_secs(3);
/// A responder handshake whose initiator has not answered its Accept after this long may be
/// answering a replayed Request (after this host restarted, the first replay of an old Request
/// passes the window): when this host needs a session itself, it drops it and initiates.
const STALL: Duration = Duration::from_secs(1);
/// How many answered Requests a session peer remembers.
const ANSWERED: usize = 8;
/// The control message of a session keepalive (docs/SESSIONS.md, "Control messages").
pub(crate) const KEEPALIVE: [u8; 1] = [0x01];
/// The control message type of a path probe, followed by the path it was sent on (0 or 1)
/// (docs/SESSIONS.md, "Two paths").
pub(crate) const PROBE: u8 = 0x02;

/// About an established session (for the caller's log line).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionInfo {
    /// This host's role.
    pub role: Role,
    /// The suite.
    pub suite: SuiteId,
    /// Whether SMKEX ran over two paths.
    pub two_path: bool,
    /// Whether the ML-KEM-768 secret went into the keys (the hybrid handshake).
    pub kem: bool,
    /// How long the handshake took, in µs (from its start or the Request).
    pub handshake_us: u64,
    /// Whether it replaced a session both sides held (a rekey). A session with a peer that lost
    /// its keys (it restarted: its Request said it had no session) is a new one.
    pub rekey: bool,
    /// Rekeys since the last new session (0 for a new one).
    pub rekeys: u32,
}

/// Why a session went down by itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Down {
    /// When.
    pub since: Instant,
    /// How long the peer had sent nothing while this host sent to it.
    pub silent: Duration,
}

/// A session peer's state, for `status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Status {
    /// Whether a session can seal now.
    pub up: bool,
    /// The newest session, if any: when, and what.
    pub last: Option<(Instant, SessionInfo)>,
    /// The current session's key id and next sequence number.
    pub current: Option<(u32, u32)>,
    /// The peer's pinned identity.
    pub pin: Option<[u8; 32]>,
    /// Whether a handshake runs now.
    pub handshaking: bool,
    /// Frames waiting for a session.
    pub pending: usize,
    /// The session went down by itself, and why (until the next one is up).
    pub down: Option<Down>,
    /// When a frame of the peer last opened under a session key.
    pub last_heard: Option<Instant>,
    /// Each path's state (`None`: the peer has one path).
    pub paths: [Option<PathState>; 2],
    /// How the paths are used.
    pub path_mode: PathMode,
}

/// What a session operation can reach besides the session: the rest of its peer, and what the
/// host's peers share.
pub(crate) struct Cx<'a> {
    pub(crate) now: Instant,
    pub(crate) rng: &'a mut dyn CryptoRngCore,
    pub(crate) shared: &'a mut Shared,
    pub(crate) id: PeerId,
    pub(crate) spec: &'a PeerSpec,
    pub(crate) counters: &'a mut PeerCounters,
    pub(crate) events: &'a mut VecDeque<HostEvent>,
    pub(crate) timers: &'a mut TimerTable,
}

/// What the Request of the running responder handshake offered (taken only if it completes:
/// a Request alone is not authenticated).
#[derive(Clone, Copy, Debug)]
struct Offer {
    addr: IpAddr,
    /// The initiator said it holds a live session with us.
    rekey: bool,
}

/// One session peer.
#[derive(Debug)]
pub(crate) struct Session {
    ring: KeyRing,
    hs: Option<Handshake>,
    /// The timestamp of the Request the running responder handshake answers.
    hs_ts: Option<Tai64n>,
    /// The running handshake's path-1 messages go inside the normalized stream (a rekey of a
    /// peer that streams to us), not under the group key.
    pub(crate) hs_in_stream: bool,
    /// The highest Request timestamp whose handshake was established (raised then, not when a
    /// Request is taken: a Request is not authenticated before Confirm).
    freshness: Freshness,
    /// The highest Request timestamp taken, and when it was raised: a Request not newer than it
    /// is refused for one handshake timeout after that take, and never wins a crossing.
    taken: Freshness,
    taken_at: Option<Instant>,
    /// The initiator ids of the last Requests this host answered: a genuine initiator never
    /// reuses one, so another copy of such a Request (a replay the window let through after a
    /// restart, or once the timeout of its take passed) never starts a second handshake.
    answered: [HandshakeId; ANSWERED],
    pin: Pin,
    /// The configured address; else learnt from a waiting frame or a completed handshake.
    addr: Option<IpAddr>,
    offer: Option<Offer>,
    started: Option<Instant>,
    holdoff: Option<Instant>,
    fails: u32,
    /// When the current session was established, and our role in it.
    established: Option<(Instant, Role)>,
    last: Option<(Instant, SessionInfo)>,
    /// Keys established with a peer pinned on first use, waiting for the pin to be stored.
    pin_wait: Option<(SessionKeys, [u8; 32])>,
    pub(crate) pending: VecDeque<Vec<u8>>,
    queue: usize,
    /// A reason to start a handshake although no frame waits: the peer sends under keys we
    /// lack ("keys lost"), or it fell silent ("peer silent").
    want: Option<&'static str>,
    rekey_after: Duration,
    keepalive: Duration,
    dead_after: Duration,
    last_heard: Option<Instant>,
    down: Option<Down>,
    /// A keepalive waits for [`Peer::poll_transmit`](super::Peer::poll_transmit).
    pub(crate) keepalive_due: bool,
    /// Rekeys since the last new session.
    chain: u32,
    /// The peer lost its keys (its Request said so) and a new session with it is up: its
    /// stream, if any, starts again.
    pub(crate) peer_restarted: bool,
    /// The certificate of the peer's current session (`[pki]`): what its frames' source
    /// addresses are checked against.
    pub(crate) cert: Option<crate::pki::Certificate>,
    /// The certificate the running handshake's peer presented, taken when its keys are.
    cert_offer: Option<crate::pki::Certificate>,
    /// Membership messages owed to the peer under the session ([`OWE_STATE`], [`OWE_LIST`]).
    pub(crate) member_due: u8,
    /// Its certificate was revoked: no session with it any more, nothing from it is taken.
    pub(crate) revoked: bool,
    /// Its paths: which are alive, which carries data.
    pub(crate) paths: Paths,
}

/// The peer is owed this host's state (a membership message) under the session.
pub(crate) const OWE_STATE: u8 = 1;
/// The peer is owed the revocation list in force.
pub(crate) const OWE_LIST: u8 = 2;
/// The peer is owed the newest broadcast key.
pub(crate) const OWE_KEY: u8 = 4;

impl Session {
    pub(crate) fn new(
        settings: &super::super::SessionSettings,
        pin: Pin,
        address: Option<IpAddr>,
        paths: u8,
        now: Instant,
    ) -> Self {
        Self {
            ring: KeyRing::new(settings.ring),
            hs: None,
            hs_ts: None,
            hs_in_stream: false,
            freshness: Freshness::new(),
            taken: Freshness::new(),
            taken_at: None,
            answered: [HandshakeId::default(); ANSWERED],
            pin,
            addr: address,
            offer: None,
            started: None,
            holdoff: None,
            fails: 0,
            established: None,
            last: None,
            pin_wait: None,
            pending: VecDeque::new(),
            queue: settings.queue,
            want: None,
            rekey_after: settings.rekey_after,
            keepalive: settings.keepalive,
            dead_after: settings.dead_after,
            last_heard: None,
            down: None,
            keepalive_due: false,
            chain: 0,
            peer_restarted: false,
            cert: None,
            cert_offer: None,
            member_due: 0,
            revoked: false,
            paths: Paths::with_timing(
                settings.paths,
                paths,
                now,
                settings.probe_every,
                settings.down_after,
            ),
        }
    }

    /// A probe is owed on a path (see [`Paths`]).
    pub(crate) fn probe_due(&self) -> bool {
        self.paths.probe_pending()
    }

    /// Ends everything with a peer whose certificate was revoked: its keys, its handshake,
    /// the frames waiting for it; none starts again.
    pub(crate) fn revoke(&mut self, cx: &mut Cx<'_>, serial: u64) {
        self.revoked = true;
        self.ring.clear();
        self.hs = None;
        self.member_due = 0;
        self.keepalive_due = false;
        let dropped = self.pending.len();
        self.pending.clear();
        cx.counters.no_session += dropped as u64;
        for t in Timer::ALL {
            cx.timers.stop(t);
        }
        cx.events.push_back(HostEvent::Revoked {
            peer: cx.id,
            serial,
        });
    }

    /// The serial of the certificate of its current session, if any.
    pub(crate) fn cert_serial(&self) -> Option<u64> {
        self.cert.as_ref().map(|c| c.fields().serial)
    }

    /// Takes the Request freshness of `old` (the same peer before a reload changed it).
    pub(crate) fn carry_freshness(&mut self, old: &Self) {
        self.freshness = old.freshness;
        self.taken = old.taken;
        self.taken_at = old.taken_at;
        self.answered = old.answered;
    }

    /// Whether a current session that seals is up.
    pub(crate) fn seals(&self, now: Instant) -> bool {
        self.ring.current().is_some_and(|c| now < c.expires_at())
    }

    /// Whether the peer surely streams to us: a live current session under which a frame of the
    /// peer has opened (so it seals under it too; until then its broadcasts may come under the
    /// group key).
    pub(crate) fn peer_streams(&self, now: Instant) -> bool {
        self.seals(now) && self.ring.current_heard()
    }

    /// The pinned identity (configured, or learnt).
    pub(crate) fn pin(&self) -> Option<[u8; 32]> {
        match self.pin {
            Pin::Configured(k) | Pin::Tofu(Some(k)) | Pin::Certified(Some(k)) => Some(k),
            _ => None,
        }
    }

    /// A newer certificate for the peer (its identity renewed): its key is the pin from now on.
    pub(crate) fn recertify(&mut self, cert: crate::pki::Certificate) {
        self.pin = Pin::Certified(Some(cert.fields().public_key));
        self.cert = Some(cert);
    }

    /// Whether the peer is known by its certificate (`[pki]`).
    pub(crate) fn certified(&self) -> bool {
        matches!(self.pin, Pin::Certified(_))
    }

    /// Checks the certificate in a handshake message from a `[pki]` peer (`addr`: the address
    /// a Request claims): the key it names becomes the handshake's pin.
    fn check_cert(
        &mut self,
        cx: &mut Cx<'_>,
        cert: Option<&crate::handshake::messages::CertBytes>,
        static_key: Option<[u8; 32]>,
        addr: Option<IpAddr>,
    ) -> Result<[u8; 32], ()> {
        let Some(pki) = cx.shared.cfg.pki.as_ref() else {
            return Err(());
        };
        let unix = cx.shared.wall(cx.now).to_unix().0;
        let checked = super::super::membership::check(
            pki,
            &cx.shared.revoked,
            unix,
            cert.map(|c| c.as_bytes()),
            &cx.spec.macs[0],
            static_key,
            addr,
        );
        match checked.ok().and_then(|c| Some((c.x25519()?, c))) {
            Some((x, c)) => {
                self.cert_offer = Some(c);
                Ok(x)
            }
            _ => {
                cx.counters.fail("bad_certificate");
                Err(())
            }
        }
    }

    pub(crate) fn ring(&mut self) -> &mut KeyRing {
        &mut self.ring
    }

    /// The running handshake, if it has a message to send and may send it (nothing leaves
    /// while a first-use pin is being stored).
    pub(crate) fn handshake_to_send(&mut self) -> Option<&mut Handshake> {
        if self.pin_wait.is_some() {
            return None;
        }
        self.hs.as_mut().filter(|h| h.has_transmit())
    }

    /// Whether the running handshake has a message that may leave now.
    pub(crate) fn has_handshake_output(&self) -> bool {
        self.pin_wait.is_none() && self.hs.as_ref().is_some_and(Handshake::has_transmit)
    }

    /// Drops the handshake once it is over (established or failed, nothing left to send).
    pub(crate) fn reap(&mut self, timers: &mut TimerTable) {
        if self.hs.as_ref().is_some_and(Handshake::is_closed) {
            self.hs = None;
            timers.stop(Timer::Handshake);
            timers.stop(Timer::Stall);
        }
    }

    /// The ring's sessions, by slot.
    pub(crate) fn slots(&self) -> impl Iterator<Item = (SlotKind, &Slot)> {
        [
            (SlotKind::Previous, self.ring.previous()),
            (SlotKind::Current, self.ring.current()),
            (SlotKind::Next, self.ring.next()),
        ]
        .into_iter()
        .filter_map(|(k, s)| s.map(|s| (k, s)))
    }

    /// Whether the newest session's suite has an ICV (only `none` has not): its frames'
    /// checksums can be trusted.
    pub(crate) fn suite_has_icv(&self) -> bool {
        self.last.is_none_or(|(_, i)| i.suite.icv_len() > 0)
    }

    pub(crate) fn status(&self, now: Instant) -> Status {
        Status {
            up: self.seals(now),
            last: self.last,
            current: self
                .ring
                .current()
                .map(|c| (c.key_id().get(), c.next_seq().map_or(0, |s| s.0))),
            pin: self.pin(),
            handshaking: self.hs.is_some(),
            pending: self.pending.len(),
            down: self.down,
            last_heard: self.last_heard,
            paths: [
                self.paths.state(PathId::FIRST).copied(),
                self.paths.state(PathId::SECOND).copied(),
            ],
            path_mode: self.paths.mode(),
        }
    }

    /// When the current session is old enough for a rekey: `rekey_after` for its initiator,
    /// [`RESPONDER_SLACK`] later for its responder (so normally only one side starts).
    fn aged_at(&self, est: Instant, role: Role) -> Instant {
        let slack = if role == Role::Initiator {
            Duration::ZERO
        } else {
            RESPONDER_SLACK
        };
        est + self.rekey_after + slack
    }

    /// Sets the rekey timer: the time the current session wears out, and its age limit once the
    /// peer used it (the *heard* rule).
    fn arm_rekey(&self, timers: &mut TimerTable) {
        let aged = self
            .established
            .filter(|_| self.ring.current_heard())
            .map(|(est, role)| self.aged_at(est, role));
        let t = [self.ring.rekey_time(), aged].into_iter().flatten().min();
        timers.set_opt(Timer::Rekey, t);
    }

    /// Holds a frame until the session is up (a full queue drops it, counted `no_session`),
    /// and starts a handshake if one may start. A unicast frame names the peer's address even
    /// when the queue is full; a broadcast (a group copy waiting) names none, and broadcasts
    /// take at most half the queue, so they never keep out the unicast frame that starts the
    /// session.
    pub(crate) fn enqueue(&mut self, cx: &mut Cx<'_>, frame: &[u8]) {
        let group = super::super::is_group(frame);
        if self.addr.is_none() && !group {
            self.addr = addr_from_frame(frame);
        }
        let room = if group {
            let waiting = self
                .pending
                .iter()
                .filter(|f| super::super::is_group(f))
                .count();
            waiting < self.queue / 2 && self.pending.len() < self.queue
        } else {
            self.pending.len() < self.queue
        };
        if room {
            self.pending.push_back(frame.to_vec());
        } else {
            cx.counters.no_session += 1;
        }
        self.consider(cx);
    }

    /// The peer sends under a key id we do not have (it has a session we lost).
    pub(crate) fn unknown_key(&mut self, cx: &mut Cx<'_>) {
        cx.counters.unknown_key += 1;
        if self.ring.current().is_none() {
            self.want = Some("keys lost");
            self.consider(cx);
        }
    }

    /// This host sealed a frame (data, keepalive, stream frame) under the current session: the
    /// peer is expected to answer within the liveness bound; no keepalive is due; a rekey may
    /// be due by sequence number.
    pub(crate) fn sent(&mut self, cx: &mut Cx<'_>, path: PathId) {
        self.paths.sent(path, cx.now);
        if !cx.timers.is_set(Timer::Silence) && !plant::on(Bug::NoLiveness) {
            cx.timers.set(Timer::Silence, cx.now + self.dead_after);
        }
        cx.timers.stop(Timer::Keepalive);
        self.keepalive_due = false;
        if self.hs.is_none() && self.ring.rekey_due(cx.now) {
            self.consider(cx);
        }
    }

    /// A frame of the peer opened under a session key (`first`: the first under the current
    /// session, or one that made the waiting *next* session current): the peer is alive; a
    /// keepalive is due if this host sends nothing.
    pub(crate) fn heard(&mut self, cx: &mut Cx<'_>, first: bool, path: PathId) {
        self.last_heard = Some(cx.now);
        if let Some(c) = self.paths.heard(path, cx.now) {
            cx.events.push_back(HostEvent::PathChanged {
                peer: cx.id,
                path: c.path,
                up: c.up,
            });
        }
        cx.timers.stop(Timer::Silence);
        if !cx.timers.is_set(Timer::Keepalive) {
            cx.timers.set(Timer::Keepalive, cx.now + self.keepalive);
        }
        if first {
            // A promotion moved the slots: their expiries, and the rekey by age, count now.
            self.arm_rekey(cx.timers);
            cx.timers
                .set_opt(Timer::KeyExpiry, self.ring.expiry_timeout());
        }
    }

    /// A timer of the session fired.
    pub(crate) fn handle_timer(&mut self, cx: &mut Cx<'_>, t: Timer) {
        match t {
            Timer::Handshake => {
                if let Some(hs) = self.hs.as_mut() {
                    hs.handle_timeout(cx.now);
                    self.drive(cx);
                }
            }
            Timer::KeyExpiry => {
                self.ring.handle_timeout(cx.now);
                cx.timers
                    .set_opt(Timer::KeyExpiry, self.ring.expiry_timeout());
            }
            Timer::Backoff => self.holdoff = None,
            Timer::Silence => self.fell_silent(cx),
            Timer::Keepalive if self.seals(cx.now) => self.keepalive_due = true,
            Timer::Probe => {
                for c in self.paths.tick(cx.now).into_iter().flatten() {
                    cx.events.push_back(HostEvent::PathChanged {
                        peer: cx.id,
                        path: c.path,
                        up: c.up,
                    });
                }
                cx.timers.set_opt(Timer::Probe, self.paths.next_tick());
            }
            _ => {}
        }
        self.consider(cx);
    }

    /// The peer sent nothing for the liveness bound while this host sent to it: the session
    /// stops sealing (the current keys move to *previous*, still opening for the grace period),
    /// frames wait for the next session, and a handshake starts.
    fn fell_silent(&mut self, cx: &mut Cx<'_>) {
        if !self.seals(cx.now) {
            return;
        }
        let silent = self
            .last_heard
            .map_or(self.dead_after, |t| cx.now.saturating_since(t));
        self.ring.retire_current(cx.now);
        self.paths.stop();
        cx.timers.stop(Timer::Probe);
        self.down = Some(Down {
            since: cx.now,
            silent,
        });
        self.want = Some("peer silent");
        cx.timers.stop(Timer::Keepalive);
        cx.timers.stop(Timer::Rekey);
        cx.timers
            .set_opt(Timer::KeyExpiry, self.ring.expiry_timeout());
        cx.events.push_back(HostEvent::SessionDown {
            peer: cx.id,
            silent,
        });
    }

    /// Starts a handshake if the peer needs one and may have one.
    fn consider(&mut self, cx: &mut Cx<'_>) {
        if self.revoked {
            return;
        }
        let now = cx.now;
        let Some(why) = self.need(now, cx.spec.normalize.is_some()) else {
            return;
        };
        if let (Some(hs), Some(t)) = (&self.hs, self.started)
            && stallable(hs)
            && now >= t + STALL
        {
            // Its initiator never answered (a replayed or forged Request, a peer gone), and we
            // need a session.
            self.hs = None;
            cx.timers.stop(Timer::Handshake);
            cx.timers.stop(Timer::Stall);
        }
        if self.hs.is_some() || self.pin_wait.is_some() || self.holdoff.is_some_and(|t| now < t) {
            return;
        }
        if self.initiate(cx, why) {
            cx.events
                .push_back(HostEvent::HandshakeStarted { peer: cx.id, why });
            self.drive(cx);
        }
    }

    /// Why this host needs a new session with the peer now, if it does (the reason
    /// [`HostEvent::HandshakeStarted`] gives). A `normalized` peer always needs one: its stream
    /// runs only under a session, and it must run whether or not inner frames wait (else the
    /// tunnel would be silent, its share of a shared bottleneck taken by the others, until the
    /// first frame, and its start would tell an observer when that frame came).
    fn need(&self, now: Instant, normalized: bool) -> Option<&'static str> {
        let has_current = self.ring.current().is_some();
        let next_waits = self.ring.next().is_some();
        let due = self.ring.rekey_due(now) && !next_waits;
        let aged = self
            .established
            .is_some_and(|(at, role)| now >= self.aged_at(at, role));
        match self.want {
            Some(w) if !has_current => return Some(w),
            _ => {}
        }
        if !self.pending.is_empty() {
            Some("first frame")
        } else if normalized && !has_current {
            Some("normalized stream")
        } else if due && (has_current || self.established.is_some()) {
            Some("keys wear out")
        } else if has_current && aged && self.ring.current_heard() && !next_waits {
            Some("rekey time")
        } else {
            None
        }
    }

    /// Starts a handshake as initiator (`false`: the peer's address is not known yet). Its
    /// path-1 messages travel in the normalized stream only for a rekey of a peer that streams
    /// to us; a handshake after the peer fell silent or lost its keys goes under the group key,
    /// where a restarted peer can read it.
    fn initiate(&mut self, cx: &mut Cx<'_>, why: &'static str) -> bool {
        let Some(addr) = self.addr else {
            // Nothing names the peer's address yet; the frames wait (or are dropped when the
            // queue is full) until one does, e.g. an IP packet after ARP.
            return false;
        };
        self.want = None;
        let rekey = self.seals(cx.now);
        let mut cfg = hs_config(cx, &self.paths);
        cfg.rekey = rekey;
        let peer = HsPeer {
            mac: cx.spec.macs[0],
            addr,
            pinned_x25519: self.pinned_x25519(),
        };
        let wall = cx.shared.wall(cx.now);
        let ts = cx.shared.clock.issue(wall);
        self.hs = Some(Handshake::initiate(cx.now, cfg, peer, ts, cx.rng));
        self.hs_ts = None;
        self.hs_in_stream = rekey && self.peer_streams(cx.now) && why != "peer silent";
        self.started = Some(cx.now);
        cx.counters.initiated += 1;
        true
    }

    fn pinned_x25519(&self) -> Option<[u8; 32]> {
        if plant::on(Bug::SkipPin) {
            return None;
        }
        self.pin()
            .and_then(|k| crate::handshake::identity::x25519_of(&k))
    }

    /// A handshake message from the peer on `path`, parsed once by the caller (already opened,
    /// within the budget); `in_stream`: it came inside the normalized stream.
    ///
    /// # Errors
    /// `Err(())` for a Request that is not newer than one already accepted (counted).
    pub(crate) fn message(
        &mut self,
        cx: &mut Cx<'_>,
        path: PathId,
        repr: Repr,
        in_stream: bool,
    ) -> Result<(), ()> {
        let Body::Request(req) = repr.body else {
            if let (Body::Accept(a), Pin::Certified(_)) = (repr.body, self.pin)
                && self.hs.as_ref().is_some_and(|h| {
                    h.role() == Role::Initiator && h.session_id().initiator == repr.initiator_id
                })
            {
                // The responder's certificate names the key the handshake must prove; an
                // Accept without a valid one is ignored (counted), as anyone with the group key
                // could have sent it.
                let Ok(x) = self.check_cert(cx, a.cert.as_ref(), a.static_key, None) else {
                    return Ok(());
                };
                if let Some(hs) = self.hs.as_mut() {
                    hs.pin_peer(x);
                }
            }
            if let Some(hs) = self.hs.as_mut() {
                let _ = hs.handle_parsed(cx.now, path, repr);
                self.drive(cx);
            }
            return Ok(());
        };
        if let Some(hs) = self.hs.as_mut()
            && hs.session_id().initiator == repr.initiator_id
        {
            // A copy of the Request this handshake answers (answered at most once per half RTO).
            let _ = hs.handle_parsed(cx.now, path, repr);
            self.drive(cx);
            return Ok(());
        }
        // Only a Request newer than every one whose handshake was established may start one,
        // and so replace the one in progress: a replay never does. Nor one not newer than the
        // Request the running responder handshake answers, or (for one handshake timeout) than
        // the newest taken. All before the token bucket.
        let ts = req.timestamp;
        let timeout = cx
            .shared
            .session_settings()
            .map_or(Duration::ZERO, |s| s.handshake.timeout);
        let running_newer = self
            .hs
            .as_ref()
            .is_some_and(|h| h.role() == Role::Responder && !h.is_closed())
            && self.hs_ts.is_some_and(|t| t >= ts);
        let recently_taken =
            !self.taken.is_fresh(ts) && self.taken_at.is_some_and(|t| cx.now < t + timeout);
        let answered = self.answered.contains(&repr.initiator_id);
        if (!self.freshness.is_fresh(ts) || running_newer || recently_taken || answered)
            && !plant::on(Bug::StaleRequest)
        {
            cx.counters.stale_requests += 1;
            return Err(());
        }
        if let Err(r) = cx.shared.limiter.check(cx.now, cx.spec.macs[0]) {
            cx.counters.fail(r.as_str());
            return Ok(());
        }
        if let Some(hs) = &self.hs
            && hs.role() == Role::Initiator
            && !hs.is_closed()
            && cx.shared.cfg.mac < cx.spec.macs[0]
            && (req.flags.rekey || !self.hs_in_stream)
            && !plant::on(Bug::NoCrossingTieBreak)
        {
            // Crossing handshakes: the host with the lower MAC stays initiator. (Within a
            // timeout of a take, a Request not newer than it was refused above; after that the
            // MAC order alone decides, or two hosts could each wait for the other for ever.)
            // Not when our Request travels in the stream and the peer says it has no session:
            // it cannot read ours, so we answer.
            return Ok(());
        }
        let mut pinned_x25519 = self.pinned_x25519();
        if let Pin::Certified(_) = self.pin {
            let Ok(x) = self.check_cert(
                cx,
                req.cert.as_ref(),
                req.static_key,
                Some(req.initiator_addr),
            ) else {
                return Ok(());
            };
            pinned_x25519 = Some(x);
        }
        let cfg = hs_config(cx, &self.paths);
        let peer = HsPeer {
            mac: cx.spec.macs[0],
            addr: req.initiator_addr,
            pinned_x25519,
        };
        match Handshake::respond_parsed(cx.now, cfg, peer, path, repr, cx.rng) {
            Ok(hs) => {
                if self.taken.is_fresh(ts) {
                    // Only a take that raises the watermark restarts its timeout.
                    self.taken.accept(ts);
                    self.taken_at = Some(cx.now);
                }
                self.answered.rotate_right(1);
                self.answered[0] = repr.initiator_id;
                self.hs = Some(hs);
                self.hs_ts = Some(ts);
                // Answered the way it came: a restarted peer's Request comes under the group
                // key, and so does our answer.
                self.hs_in_stream = in_stream || plant::on(Bug::AnswerInStream);
                self.started = Some(cx.now);
                self.offer = Some(Offer {
                    addr: req.initiator_addr,
                    rekey: req.flags.rekey,
                });
                cx.timers.set(Timer::Stall, cx.now + STALL);
                self.drive(cx);
            }
            // Stage 1 refused it (not for us): the running handshake, if any, goes on.
            Err(r) => cx.counters.fail(r.as_str()),
        }
        Ok(())
    }

    /// Handles what the handshake reports (its messages wait for `poll_transmit`): the keys are
    /// installed before the message that lets the peer use them (ConfirmAck) can leave.
    fn drive(&mut self, cx: &mut Cx<'_>) {
        loop {
            let Some(hs) = self.hs.as_mut() else {
                return;
            };
            match hs.poll_event() {
                Some(HsEvent::Established(keys)) => self.established(cx, keys),
                Some(HsEvent::Failed(r)) => self.failed(cx, r.as_str()),
                None => break,
            }
        }
        if let Some(hs) = &self.hs {
            cx.timers.set_opt(Timer::Handshake, hs.poll_timeout());
        }
        self.reap(cx.timers);
    }

    fn established(&mut self, cx: &mut Cx<'_>, keys: SessionKeys) {
        // Trust on first use, only for a peer configured so: the key the peer proved it holds
        // is stored before the session is used; the caller answers with `handle_pin_saved`.
        if let Pin::Tofu(None) = self.pin
            && let Some(x) = keys.peer_static()
            && let Some(ed) = ed25519_of(&x)
        {
            cx.events.push_back(HostEvent::PinLearned {
                peer: cx.id,
                key: ed,
            });
            self.pin_wait = Some((keys, ed));
            return;
        }
        self.install(cx, &keys);
    }

    /// The first-use pin was stored (or not: the session is refused).
    pub(crate) fn pin_saved(&mut self, cx: &mut Cx<'_>, saved: bool) {
        let Some((keys, ed)) = self.pin_wait.take() else {
            return;
        };
        if !saved {
            self.abandon(cx, "pin_unsaved");
            return;
        }
        self.pin = Pin::Tofu(Some(ed));
        self.install(cx, &keys);
        self.drive(cx);
    }

    fn install(&mut self, cx: &mut Cx<'_>, keys: &SessionKeys) {
        let now = cx.now;
        let responder = keys.role() == Role::Responder;
        // A responder whose initiator holds no session with it (its Request said so) knows the
        // peer lost its keys: nothing may be sealed under the old ones any more.
        let peer_lost =
            responder && self.offer.is_some_and(|o| !o.rekey) && self.ring.current().is_some();
        let rekey = self.ring.current().is_some() && !peer_lost;
        if peer_lost {
            self.ring.clear();
        }
        // A key id equal to the group's security number clashes like one of a live session
        // (2^-24 per session, and only with `security_number` set): another handshake.
        if Some(keys.key_id()) == cx.shared.group_sn() || self.ring.install(now, keys).is_err() {
            self.abandon(cx, "install");
            return;
        }
        if let Pin::Certified(_) = self.pin {
            // The certificate must name the key this handshake proved (a later Request may
            // have brought another one meanwhile).
            match self.cert_offer.take() {
                // Revoked meanwhile (a list came during the handshake): no session.
                Some(c) if cx.shared.revoked.revokes(c.fields().serial) => {
                    self.abandon(cx, "bad_certificate");
                    return;
                }
                Some(c) if c.x25519().is_some() && c.x25519() == keys.peer_static() => {
                    self.pin = Pin::Certified(Some(c.fields().public_key));
                    self.cert = Some(c);
                }
                _ => {
                    self.abandon(cx, "bad_certificate");
                    return;
                }
            }
        }
        if responder {
            if let Some(o) = self.offer.take() {
                self.addr = Some(o.addr);
            }
            // The Request this handshake answered is authentic now: only newer ones may come.
            if let Some(t) = self.hs_ts {
                self.freshness.accept(t);
            }
        }
        self.chain = if rekey {
            self.chain.saturating_add(1)
        } else {
            0
        };
        let took = self
            .started
            .map_or(0, |s| now.saturating_since(s).total_micros());
        let info = SessionInfo {
            role: keys.role(),
            suite: keys.suite(),
            two_path: keys.two_path(),
            kem: keys.kem(),
            handshake_us: took,
            rekey,
            rekeys: self.chain,
        };
        if cx.shared.cfg.pki.is_some() {
            // What this host holds (its list's number), so a peer behind catches up.
            self.member_due |= OWE_STATE;
        }
        self.established = Some((now, keys.role()));
        self.last = Some((now, info));
        self.fails = 0;
        self.holdoff = None;
        self.down = None;
        self.want = None;
        self.peer_restarted |= peer_lost;
        // The handshake proved the peer alive, and its paths with it.
        self.last_heard = Some(now);
        self.paths.start(now);
        if !cx.timers.is_set(Timer::Probe) {
            cx.timers.set_opt(Timer::Probe, self.paths.next_tick());
        }
        cx.timers.stop(Timer::Backoff);
        cx.timers.stop(Timer::Silence);
        cx.timers
            .set_opt(Timer::KeyExpiry, self.ring.expiry_timeout());
        self.arm_rekey(cx.timers);
        cx.counters.sessions += 1;
        if rekey {
            cx.counters.rekeys += 1;
        }
        cx.events
            .push_back(HostEvent::SessionUp { peer: cx.id, info });
        if keys.role() == Role::Initiator {
            // The keepalive: the responder seals under the new keys only once a frame under
            // them opened. The frames that waited follow it.
            self.keepalive_due = true;
        }
    }

    /// Drops a handshake whose keys cannot be used: nothing more is sent for it.
    fn abandon(&mut self, cx: &mut Cx<'_>, reason: &'static str) {
        self.hs = None;
        cx.timers.stop(Timer::Handshake);
        cx.timers.stop(Timer::Stall);
        self.failed(cx, reason);
    }

    fn failed(&mut self, cx: &mut Cx<'_>, reason: &'static str) {
        cx.counters.fail(reason);
        self.fails = self.fails.saturating_add(1);
        let base = BACKOFF.total_micros() << self.fails.saturating_sub(1).min(5);
        let base = base.min(MAX_BACKOFF.total_micros());
        // base ± 12.5 %.
        let wait = base - base / 8 + cx.rng.next_u64() % (base / 4 + 1);
        let until = cx.now + Duration::from_micros(wait);
        self.holdoff = Some(until);
        cx.timers.set(Timer::Backoff, until);
        let dropped = self.pending.len();
        self.pending.clear();
        cx.counters.no_session += dropped as u64;
        cx.events.push_back(HostEvent::HandshakeFailed {
            peer: cx.id,
            reason,
            retry_in: Duration::from_micros(wait),
            dropped,
        });
    }
}

/// A responder handshake whose initiator never answered its Accept.
fn stallable(hs: &Handshake) -> bool {
    hs.role() == Role::Responder && !hs.progressed()
}

/// The handshake settings for this peer: the host's template with its MAC, address, prefix and
/// the paths to the peer.
fn hs_config(cx: &Cx<'_>, paths: &Paths) -> crate::handshake::Config {
    let settings = cx
        .shared
        .session_settings()
        .expect("a session peer exists only with session settings");
    let (addr, prefix) = settings.address;
    let mut c = settings.handshake.clone();
    c.local_mac = cx.shared.cfg.mac;
    c.local_addr = addr;
    c.prefix_len = prefix;
    c.paths = cx.spec.paths.min(cx.shared.cfg.paths).max(1);
    // SMKEX preferred and path 2 down: a single-path handshake, which `prefer` accepts (an
    // attacker who cuts path 2 gets it; docs/SESSIONS.md, "Two paths"). Under `require` the
    // handshake keeps both paths and cannot complete until path 2 is back.
    let cut = c.paths == 2 && paths.redundant() && !paths.is_up(PathId::SECOND);
    if cut && plant::on(Bug::SinglePathUnderRequire) {
        c.smkex = crate::handshake::SmkexMode::Preferred;
    }
    if cut && c.smkex == crate::handshake::SmkexMode::Preferred {
        c.paths = 1;
    }
    if let Some(p) = &cx.shared.cfg.pki {
        c.certificate = crate::handshake::messages::CertBytes::new(p.certificate.as_bytes());
    }
    c
}

/// The address SEP's stage 1 names as destination, from the first frame waiting for a session:
/// an IPv4 or IPv6 destination, or an ARP packet's target.
pub fn addr_from_frame(frame: &[u8]) -> Option<IpAddr> {
    use core::net::{Ipv4Addr, Ipv6Addr};
    let ty = u16::from_be_bytes(frame.get(12..14)?.try_into().ok()?);
    let v4 = |at: usize| -> Option<IpAddr> {
        let b: [u8; 4] = frame.get(at..at + 4)?.try_into().ok()?;
        Some(IpAddr::V4(Ipv4Addr::from(b)))
    };
    match ty {
        0x0800 if frame.get(14)? >> 4 == 4 => v4(14 + 16),
        0x86dd => {
            let b: [u8; 16] = frame.get(14 + 24..14 + 40)?.try_into().ok()?;
            Some(IpAddr::V6(Ipv6Addr::from(b)))
        }
        0x0806 => v4(14 + 24),
        _ => None,
    }
}
