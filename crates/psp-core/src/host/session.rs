//! One session peer: its handshakes (psp-core's [`Handshake`]), its [`KeyRing`], and the policy
//! around them: when to start a handshake (frames wait, a rekey is due, the peer sends under a
//! key we lack), the crossing rule, freshness of Requests, backoff after a failure, first-use
//! pins, and the frames that wait for a session.
//!
//! docs/SESSIONS.md ("In the gateway") describes the policy; every rule here has a test in
//! `host/tests.rs`.

use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::net::IpAddr;

use rand_core::CryptoRngCore;

use super::counters::PeerCounters;
use super::{Config, Dest, Event, Host, PeerId, PeerSpec, Pin, SessionSettings, Transmit};
use crate::crypto::SuiteId;
use crate::handshake::identity::ed25519_of;
use crate::handshake::messages::{Body, Repr};
use crate::handshake::{
    Event as HsEvent, FailReason, Freshness, Handshake, KeyRing, PathId, Peer, RequestLimiter,
    Role, SessionKeys, Tai64n,
};
use crate::time::{Duration, Instant};
use crate::wire::Protocol;

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
/// The control message of a session keepalive (docs/SESSIONS.md, "Control messages").
pub(super) const KEEPALIVE: [u8; 1] = [0x01];

/// A message waiting for [`Host::poll_transmit`].
#[derive(Debug)]
pub(super) struct Outgoing {
    pub(super) peer: PeerId,
    pub(super) path: PathId,
    pub(super) kind: OutKind,
}

/// What an [`Outgoing`] carries, and so which key seals it.
#[derive(Debug)]
pub(super) enum OutKind {
    /// A handshake message: a sub-protocol frame under the group key.
    Handshake(Protocol, Vec<u8>),
    /// A control message under the peer's current session key.
    Control(Vec<u8>),
    /// A frame that waited for the session, under its key (a broadcast or multicast one as a
    /// group copy).
    Data(Vec<u8>),
    /// A group copy for every peer from this one on (see [`Host::poll_transmit`]): the inner
    /// frame without its source MAC, and the peers whose queue holds the frame instead.
    GroupCopy(Vec<u8>, Vec<PeerId>),
}

/// About an established session (for the caller's log line).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionInfo {
    /// This host's role.
    pub role: Role,
    /// The suite.
    pub suite: SuiteId,
    /// Whether SMKEX ran over two paths.
    pub two_path: bool,
    /// How long the handshake took, in µs (from its start or the Request).
    pub handshake_us: u64,
    /// Whether another session was current (a rekey).
    pub rekey: bool,
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
}

/// What a session operation can reach besides the session: the rest of the host.
pub(super) struct Cx<'a> {
    pub(super) now: Instant,
    pub(super) rng: &'a mut dyn CryptoRngCore,
    pub(super) cfg: &'a Config,
    pub(super) settings: &'a SessionSettings,
    pub(super) peer: PeerId,
    pub(super) spec: &'a PeerSpec,
    pub(super) counters: &'a mut PeerCounters,
    pub(super) limiter: &'a mut RequestLimiter<256>,
    pub(super) transmits: &'a mut VecDeque<Outgoing>,
    pub(super) events: &'a mut VecDeque<Event>,
    /// Issues a Request timestamp from the host's clock.
    pub(super) timestamp: &'a mut dyn FnMut(Tai64n) -> Tai64n,
    /// The wall clock now, as the caller gave it.
    pub(super) wall: Tai64n,
    /// The security number the group key's frames carry, if any (a session key id equal to it
    /// would send the session's frames to the group opener).
    pub(super) group_sn: Option<crate::wire::SecurityNumber>,
}

/// One session peer.
#[derive(Debug)]
pub(super) struct SessionPeer {
    ring: KeyRing,
    hs: Option<Handshake>,
    /// The timestamp of the Request the running responder handshake answers.
    hs_ts: Option<Tai64n>,
    /// The highest Request timestamp whose handshake was established (raised then, not when a
    /// Request is taken: a Request is not authenticated before Confirm).
    freshness: Freshness,
    /// The highest Request timestamp taken, and when it was raised: a Request not newer than it
    /// is refused for one handshake timeout after that take, and never wins a crossing.
    taken: Freshness,
    taken_at: Option<Instant>,
    pin: Pin,
    /// The configured address; else learnt from a waiting frame or a completed handshake.
    addr: Option<IpAddr>,
    /// The address in the Request of the running responder handshake (learnt only if it
    /// completes: a Request alone is not authenticated).
    offered_addr: Option<IpAddr>,
    started: Option<Instant>,
    holdoff: Option<Instant>,
    fails: u32,
    /// When the current session was established, and our role in it.
    established: Option<(Instant, Role)>,
    last: Option<(Instant, SessionInfo)>,
    /// Keys established with a peer pinned on first use, waiting for the pin to be stored.
    pin_wait: Option<(SessionKeys, [u8; 32])>,
    pending: VecDeque<Vec<u8>>,
    queue: usize,
    /// The peer sent under a key we lack: it has a session we lost.
    want: bool,
    rekey_after: Duration,
    /// The last [`handle_timeout`](Self::handle_timeout): a deadline not after it that is still
    /// pending did not act, and is looked at again [`RECHECK`] later rather than at once.
    checked: Instant,
}

/// How long a timer that did not act waits before it is looked at again (a safety net: every
/// timer [`SessionPeer::poll_timeout`] returns should act).
const RECHECK: Duration = Duration::from_secs(1);

impl SessionPeer {
    pub(super) fn new(settings: &SessionSettings, pin: Pin, address: Option<IpAddr>) -> Self {
        Self {
            ring: KeyRing::new(settings.ring),
            hs: None,
            hs_ts: None,
            freshness: Freshness::new(),
            taken: Freshness::new(),
            taken_at: None,
            pin,
            addr: address,
            offered_addr: None,
            started: None,
            holdoff: None,
            fails: 0,
            established: None,
            last: None,
            pin_wait: None,
            pending: VecDeque::new(),
            queue: settings.queue,
            want: false,
            rekey_after: settings.rekey_after,
            checked: Instant::ZERO,
        }
    }

    /// Whether a current session that seals is up.
    pub(super) fn seals(&self, now: Instant) -> bool {
        self.ring.current().is_some_and(|c| now < c.expires_at())
    }

    /// Whether the peer surely streams to us: a live current session under which a frame of the
    /// peer has opened (so it seals under it too; until then its broadcasts may come under the
    /// group key).
    pub(super) fn peer_streams(&self, now: Instant) -> bool {
        self.ring.current().is_some_and(|c| now < c.expires_at()) && self.ring.current_heard()
    }

    /// The pinned identity (configured, or learnt).
    pub(super) fn pin(&self) -> Option<[u8; 32]> {
        match self.pin {
            Pin::Configured(k) | Pin::Tofu(Some(k)) => Some(k),
            _ => None,
        }
    }

    /// The ring's sessions, by slot.
    pub(super) fn slots(&self) -> impl Iterator<Item = (super::SlotKind, &crate::handshake::Slot)> {
        use super::SlotKind;
        [
            (SlotKind::Previous, self.ring.previous()),
            (SlotKind::Current, self.ring.current()),
            (SlotKind::Next, self.ring.next()),
        ]
        .into_iter()
        .filter_map(|(k, s)| s.map(|s| (k, s)))
    }

    pub(super) fn ring(&mut self) -> &mut KeyRing {
        &mut self.ring
    }

    /// Whether the newest session's suite has an ICV (only `none` has not): its frames'
    /// checksums can be trusted.
    pub(super) fn suite_has_icv(&self) -> bool {
        self.last.is_none_or(|(_, i)| i.suite.icv_len() > 0)
    }

    pub(super) fn status(&self, now: Instant) -> Status {
        Status {
            up: self.ring.current().is_some_and(|c| now < c.expires_at()),
            last: self.last,
            current: self
                .ring
                .current()
                .map(|c| (c.key_id().get(), c.next_seq().map_or(0, |s| s.0))),
            pin: self.pin(),
            handshaking: self.hs.is_some(),
            pending: self.pending.len(),
        }
    }

    /// The next instant [`handle_timeout`](Self::handle_timeout) acts at. Only times at which
    /// something happens count: the ring's expiries, the handshake's timers, a stalled
    /// responder's deadline, and the times [`consider`](Self::consider) would start a handshake
    /// at (never one it would refuse, or the host would wake for nothing, again and again).
    pub(super) fn poll_timeout(&self) -> Option<Instant> {
        let mut t = self.ring.expiry_timeout();
        let mut at = |x: Option<Instant>| {
            if let Some(x) = x {
                t = Some(t.map_or(x, |t| t.min(x)));
            }
        };
        let wanted = self.want || !self.pending.is_empty();
        match &self.hs {
            Some(hs) => {
                at(hs.poll_timeout());
                if let (true, Some(s)) = (stallable(hs), self.started) {
                    // A stalled responder yields once a session is needed: now if frames wait,
                    // else when a rekey would start.
                    let needed = if wanted {
                        Some(s)
                    } else {
                        let aged = self
                            .established
                            .filter(|_| self.ring.current_heard())
                            .map(|(est, role)| self.aged_at(est, role));
                        [self.ring.rekey_time(), aged].into_iter().flatten().min()
                    };
                    if let Some(n) = needed {
                        at(Some(n.max(s + STALL)));
                    }
                }
            }
            None if self.pin_wait.is_none() && self.addr.is_some() => {
                // Nothing starts before the backoff ends.
                let gate = |x: Instant| Some(self.holdoff.map_or(x, |h| h.max(x)));
                if wanted {
                    at(self.holdoff);
                }
                if self.ring.next().is_none() {
                    if let Some(r) = self.ring.rekey_time() {
                        at(gate(r));
                    }
                    if let Some((est, role)) = self.established
                        && self.ring.current_heard()
                    {
                        at(gate(self.aged_at(est, role)));
                    }
                }
            }
            None => {}
        }
        t.map(|t| {
            if t <= self.checked {
                self.checked + RECHECK
            } else {
                t
            }
        })
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

    /// Holds a frame until the session is up (a full queue drops it, counted `no_session`),
    /// and starts a handshake if one may start. A unicast frame names the peer's address even
    /// when the queue is full; a broadcast (a group copy waiting) names none, and broadcasts
    /// take at most half the queue, so they never keep out the unicast frame that starts the
    /// session.
    pub(super) fn enqueue(&mut self, cx: &mut Cx<'_>, frame: &[u8]) {
        let group = super::is_group(frame);
        if self.addr.is_none() && !group {
            self.addr = addr_from_frame(frame);
        }
        let room = if group {
            let waiting = self.pending.iter().filter(|f| super::is_group(f)).count();
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
    pub(super) fn unknown_key(&mut self, cx: &mut Cx<'_>) {
        cx.counters.unknown_key += 1;
        if self.ring.current().is_none() {
            self.want = true;
            self.consider(cx);
        }
    }

    /// After sealing under the current session: a rekey may be due.
    pub(super) fn after_seal(&mut self, cx: &mut Cx<'_>) {
        if self.hs.is_none() && self.ring.rekey_due(cx.now) {
            self.consider(cx);
        }
    }

    /// A frame under the waiting *next* session opened, so it is current now: the frames that
    /// waited (a responder's) can go.
    pub(super) fn promoted(&mut self, cx: &mut Cx<'_>) {
        self.flush_pending(cx);
    }

    pub(super) fn handle_timeout(&mut self, cx: &mut Cx<'_>) {
        self.checked = cx.now;
        self.ring.handle_timeout(cx.now);
        if let Some(hs) = self.hs.as_mut()
            && hs.poll_timeout().is_some_and(|t| t <= cx.now)
        {
            hs.handle_timeout(cx.now);
            self.drive(cx);
        }
        self.consider(cx);
    }

    /// Starts a handshake if the peer needs one and may have one.
    fn consider(&mut self, cx: &mut Cx<'_>) {
        let now = cx.now;
        let Some(why) = self.need(now) else {
            return;
        };
        if let (Some(hs), Some(t)) = (&self.hs, self.started)
            && stallable(hs)
            && now >= t + STALL
        {
            // Its initiator never answered (a replayed or forged Request, a peer gone), and we
            // need a session.
            self.hs = None;
        }
        if self.hs.is_some() || self.pin_wait.is_some() || self.holdoff.is_some_and(|t| now < t) {
            return;
        }
        if self.initiate(cx) {
            cx.events
                .push_back(Event::HandshakeStarted { peer: cx.peer, why });
            self.drive(cx);
        }
    }

    /// Why this host needs a new session with the peer now, if it does (the reason
    /// [`Event::HandshakeStarted`] gives).
    fn need(&self, now: Instant) -> Option<&'static str> {
        let has_current = self.ring.current().is_some();
        let next_waits = self.ring.next().is_some();
        let due = self.ring.rekey_due(now) && !next_waits;
        let aged = self
            .established
            .is_some_and(|(at, role)| now >= self.aged_at(at, role));
        if self.want && !has_current {
            Some("keys lost")
        } else if !self.pending.is_empty() {
            Some("first frame")
        } else if due && (has_current || self.established.is_some()) {
            Some("keys wear out")
        } else if has_current && aged && self.ring.current_heard() && !next_waits {
            Some("rekey time")
        } else {
            None
        }
    }

    /// Starts a handshake as initiator (`false`: the peer's address is not known yet).
    fn initiate(&mut self, cx: &mut Cx<'_>) -> bool {
        let Some(addr) = self.addr else {
            // Nothing names the peer's address yet; the frames wait (or are dropped when the
            // queue is full) until one does, e.g. an IP packet after ARP.
            return false;
        };
        self.want = false;
        let cfg = hs_config(cx, cx.spec);
        let peer = Peer {
            mac: cx.spec.macs[0],
            addr,
            pinned_static: self.pinned_x25519(),
        };
        let ts = (cx.timestamp)(cx.wall);
        self.hs = Some(Handshake::initiate(cx.now, cfg, peer, ts, cx.rng));
        self.hs_ts = None;
        self.started = Some(cx.now);
        cx.counters.initiated += 1;
        true
    }

    fn pinned_x25519(&self) -> Option<[u8; 32]> {
        self.pin()
            .and_then(|k| crate::handshake::identity::x25519_of(&k))
    }

    /// A handshake message from the peer on `path` (already opened, within the budget).
    ///
    /// # Errors
    /// `Err(())` for a Request that is not newer than one already accepted (counted).
    pub(super) fn message(
        &mut self,
        cx: &mut Cx<'_>,
        path: PathId,
        bytes: &[u8],
    ) -> Result<(), ()> {
        let Ok(repr) = Repr::parse_bytes(bytes) else {
            cx.counters.fail(FailReason::BadMessage.as_str());
            return Ok(());
        };
        let Body::Request(req) = repr.body else {
            if let Some(hs) = self.hs.as_mut() {
                let _ = hs.handle_message(cx.now, path, bytes);
                self.drive(cx);
            }
            return Ok(());
        };
        if let Some(hs) = self.hs.as_mut()
            && hs.session_id().initiator == repr.initiator_id
        {
            // A copy of the Request this handshake answers (answered at most once per half RTO).
            let _ = hs.handle_message(cx.now, path, bytes);
            self.drive(cx);
            return Ok(());
        }
        // Only a Request newer than every one whose handshake was established may start one,
        // and so replace the one in progress: a replay never does. Nor one not newer than the
        // Request the running responder handshake answers, or (for one handshake timeout) than
        // the newest taken. All before the token bucket.
        let ts = req.timestamp;
        let running_newer = self
            .hs
            .as_ref()
            .is_some_and(|h| h.role() == Role::Responder && !h.is_closed())
            && self.hs_ts.is_some_and(|t| t >= ts);
        let recently_taken = !self.taken.is_fresh(ts)
            && self
                .taken_at
                .is_some_and(|t| cx.now < t + cx.settings.handshake.timeout);
        if !self.freshness.is_fresh(ts) || running_newer || recently_taken {
            cx.counters.stale_requests += 1;
            return Err(());
        }
        if let Err(r) = cx.limiter.check(cx.now, cx.spec.macs[0]) {
            cx.counters.fail(r.as_str());
            return Ok(());
        }
        if let Some(hs) = &self.hs
            && hs.role() == Role::Initiator
            && !hs.is_closed()
            && cx.cfg.mac < cx.spec.macs[0]
        {
            // Crossing handshakes: the host with the lower MAC stays initiator. (Within a
            // timeout of a take, a Request not newer than it was refused above; after that the
            // MAC order alone decides, or two hosts could each wait for the other for ever.)
            return Ok(());
        }
        let cfg = hs_config(cx, cx.spec);
        let peer = Peer {
            mac: cx.spec.macs[0],
            addr: req.initiator_addr,
            pinned_static: self.pinned_x25519(),
        };
        match Handshake::respond(cx.now, cfg, peer, path, bytes, cx.rng) {
            Ok(hs) => {
                if self.taken.is_fresh(ts) {
                    // Only a take that raises the watermark restarts its timeout.
                    self.taken.accept(ts);
                    self.taken_at = Some(cx.now);
                }
                self.hs = Some(hs);
                self.hs_ts = Some(ts);
                self.started = Some(cx.now);
                self.offered_addr = Some(req.initiator_addr);
                self.drive(cx);
            }
            // Stage 1 refused it (not for us): the running handshake, if any, goes on.
            Err(r) => cx.counters.fail(r.as_str()),
        }
        Ok(())
    }

    /// Queues what the handshake has to send and handles what it reports. Events first: the
    /// keys are installed before the message that lets the peer use them (ConfirmAck) leaves.
    fn drive(&mut self, cx: &mut Cx<'_>) {
        let mut buf = [0u8; crate::handshake::messages::MAX_MESSAGE_LEN];
        loop {
            let Some(hs) = self.hs.as_mut() else {
                return;
            };
            if let Some(ev) = hs.poll_event() {
                match ev {
                    HsEvent::Established(keys) => self.established(cx, keys),
                    HsEvent::Failed(r) => self.failed(cx, r.as_str()),
                }
                continue;
            }
            if self.pin_wait.is_some() {
                // Nothing leaves before the pin is stored (a responder's ConfirmAck included).
                return;
            }
            let Some(t) = hs.poll_transmit(cx.now, &mut buf) else {
                break;
            };
            cx.transmits.push_back(Outgoing {
                peer: cx.peer,
                path: t.path,
                kind: OutKind::Handshake(t.protocol, buf[..t.len].to_vec()),
            });
        }
        if self.hs.as_ref().is_some_and(Handshake::is_closed) {
            self.hs = None;
        }
    }

    fn established(&mut self, cx: &mut Cx<'_>, keys: SessionKeys) {
        // Trust on first use, only for a peer configured so: the key the peer proved it holds
        // is stored before the session is used; the caller answers with `handle_pin_saved`.
        if let Pin::Tofu(None) = self.pin
            && let Some(x) = keys.peer_static()
            && let Some(ed) = ed25519_of(&x)
        {
            cx.events.push_back(Event::PinLearned {
                peer: cx.peer,
                key: ed,
            });
            self.pin_wait = Some((keys, ed));
            return;
        }
        self.install(cx, &keys);
    }

    /// The first-use pin was stored (or not: the session is refused).
    pub(super) fn pin_saved(&mut self, cx: &mut Cx<'_>, saved: bool) {
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
        let rekey = self.ring.current().is_some();
        // A key id equal to the group's security number clashes like one of a live session
        // (2^-24 per session, and only with `security_number` set): another handshake.
        if Some(keys.key_id()) == cx.group_sn || self.ring.install(now, keys).is_err() {
            self.abandon(cx, "install");
            return;
        }
        if keys.role() == Role::Responder {
            if let Some(addr) = self.offered_addr.take() {
                self.addr = Some(addr);
            }
            // The Request this handshake answered is authentic now: only newer ones may come.
            if let Some(t) = self.hs_ts {
                self.freshness.accept(t);
            }
        }
        let took = self
            .started
            .map_or(0, |s| now.saturating_since(s).total_micros());
        let info = SessionInfo {
            role: keys.role(),
            suite: keys.suite(),
            two_path: keys.two_path(),
            handshake_us: took,
            rekey,
        };
        self.established = Some((now, keys.role()));
        self.last = Some((now, info));
        self.fails = 0;
        self.holdoff = None;
        cx.counters.sessions += 1;
        if rekey {
            cx.counters.rekeys += 1;
        }
        cx.events.push_back(Event::SessionUp {
            peer: cx.peer,
            info,
        });
        if keys.role() == Role::Initiator {
            // The keepalive: the responder seals under the new keys only once a frame under
            // them opened. Then the frames that waited.
            cx.transmits.push_back(Outgoing {
                peer: cx.peer,
                path: PathId::FIRST,
                kind: OutKind::Control(KEEPALIVE.to_vec()),
            });
            self.flush_pending(cx);
        }
    }

    fn flush_pending(&mut self, cx: &mut Cx<'_>) {
        for f in self.pending.drain(..) {
            cx.transmits.push_back(Outgoing {
                peer: cx.peer,
                path: PathId::FIRST,
                kind: OutKind::Data(f),
            });
        }
    }

    /// Drops a handshake whose keys cannot be used: nothing more is sent for it.
    fn abandon(&mut self, cx: &mut Cx<'_>, reason: &'static str) {
        self.hs = None;
        self.failed(cx, reason);
    }

    fn failed(&mut self, cx: &mut Cx<'_>, reason: &'static str) {
        cx.counters.fail(reason);
        self.fails = self.fails.saturating_add(1);
        let base = BACKOFF.total_micros() << self.fails.saturating_sub(1).min(5);
        let base = base.min(MAX_BACKOFF.total_micros());
        // base ± 12.5 %.
        let wait = base - base / 8 + cx.rng.next_u64() % (base / 4 + 1);
        self.holdoff = Some(cx.now + Duration::from_micros(wait));
        let dropped = self.pending.len();
        self.pending.clear();
        cx.counters.no_session += dropped as u64;
        cx.events.push_back(Event::HandshakeFailed {
            peer: cx.peer,
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

fn hs_config(cx: &Cx<'_>, spec: &PeerSpec) -> crate::handshake::Config {
    let (addr, prefix) = cx.settings.address;
    let mut c = cx.settings.handshake.clone();
    c.local_mac = cx.cfg.mac;
    c.local_addr = addr;
    c.prefix_len = prefix;
    c.paths = spec.paths.min(cx.cfg.paths).max(1);
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

impl Host {
    /// Runs `f` on `peer`'s session with the rest of the host at hand.
    pub(super) fn with_session<R>(
        &mut self,
        peer: PeerId,
        now: Instant,
        rng: &mut dyn CryptoRngCore,
        f: impl FnOnce(&mut SessionPeer, &mut Cx<'_>) -> R,
    ) -> Option<R> {
        let Self {
            cfg,
            peers,
            limiter,
            clock,
            transmits,
            events,
            group,
            ..
        } = self;
        let group_sn = group.spec().sealer.security_number();
        let settings = cfg.session.as_ref()?;
        let p = peers.get_mut(peer.0)?;
        let s = p.session.as_deref_mut()?;
        let wall = cfg.wall_origin.plus(now.saturating_since(Instant::ZERO));
        let mut stamp = |w: Tai64n| clock.issue(w);
        let mut cx = Cx {
            now,
            rng,
            cfg,
            settings,
            peer,
            spec: &p.spec,
            counters: &mut p.counters,
            limiter,
            transmits,
            events,
            timestamp: &mut stamp,
            wall,
            group_sn,
        };
        let r = f(s, &mut cx);
        // A normalized session peer's stream starts with its first session.
        if let Some(n) = p.spec.normalize
            && p.stream.is_none()
            && s.ring().sealer(now).is_ok()
        {
            let overhead = super::keys::session_overhead(&settings.handshake);
            if let Ok(st) = super::normalized::Stream::new(now, n, overhead) {
                p.stream = Some(st);
            }
        }
        Some(r)
    }

    /// Seals one waiting message into `out`, or drops it (counted) when its key cannot seal.
    pub(super) fn seal_outgoing(
        &mut self,
        now: Instant,
        o: Outgoing,
        out: &mut [u8],
    ) -> Option<Transmit> {
        let Outgoing { peer, path, kind } = o;
        let kind = match kind {
            OutKind::GroupCopy(copy, queued) => {
                return self.seal_group_copy(now, peer.0, (copy, queued), out);
            }
            k => k,
        };
        let o = Outgoing { peer, path, kind };
        // A normalized peer whose stream runs: path-1 messages and waiting frames go in it.
        if o.path == PathId::FIRST && self.streams(o.peer.0, now) {
            match &o.kind {
                OutKind::Handshake(proto, bytes) => {
                    let _ = self.push_message(now, o.peer.0, *proto, bytes);
                }
                OutKind::Control(payload) => {
                    let _ = self.push_message(now, o.peer.0, Protocol::Control, payload);
                }
                OutKind::Data(frame) => {
                    let _ = self.push_inner(now, o.peer.0, frame);
                }
                OutKind::GroupCopy(..) => {}
            }
            return None;
        }
        let p = self.peers.get_mut(o.peer.0)?;
        let dst = *p.spec.macs.first()?;
        let src = self.cfg.mac;
        let path = if usize::from(o.path.0) < usize::from(self.cfg.paths) {
            o.path
        } else {
            PathId::FIRST
        };
        let len = match o.kind {
            OutKind::Handshake(proto, bytes) => {
                let r = self
                    .group
                    .r
                    .sealer
                    .seal_sub(now, dst, src, proto, &bytes, out)
                    .map(<[u8]>::len);
                if let Some(e) = self.group.r.due(true) {
                    self.events.push_back(e);
                }
                match r {
                    Ok(len) => {
                        self.counters.group_tx_frames += 1;
                        len
                    }
                    Err(crate::protect::SealError::Unreserved) => {
                        self.counters.tx_unreserved += 1;
                        return None;
                    }
                    Err(_) => {
                        self.counters.tx_unsupported += 1;
                        return None;
                    }
                }
            }
            OutKind::Control(payload) => {
                let s = p.session.as_deref_mut()?;
                match s
                    .ring()
                    .seal_sub(now, dst, src, Protocol::Control, &payload, out)
                {
                    Ok(f) => f.len(),
                    Err(_) => return None,
                }
            }
            OutKind::Data(mut frame) => {
                let max_frame = self.cfg.max_frame;
                let s = p.session.as_deref_mut()?;
                let inner_len = frame.len();
                let sealed = if super::is_group(&frame) && frame.len() >= 12 {
                    // A broadcast that waited for the session: as a group copy.
                    frame.drain(6..12);
                    s.ring()
                        .seal_sub(now, dst, src, Protocol::GroupCopy, &frame, out)
                } else {
                    s.ring().seal(now, &frame, out)
                };
                match sealed {
                    // Larger than the uplink carries: never sent.
                    Ok(f) if f.len() > max_frame => {
                        self.counters.tx_unsupported += 1;
                        return None;
                    }
                    Ok(f) => {
                        p.counters.tx_frames += 1;
                        p.counters.tx_bytes += inner_len as u64;
                        f.len()
                    }
                    Err(_) => {
                        p.counters.no_session += 1;
                        return None;
                    }
                }
            }
            // Taken apart above.
            OutKind::GroupCopy(..) => return None,
        };
        Some(Transmit {
            path,
            dest: Dest::Peer(o.peer),
            len,
        })
    }
}
