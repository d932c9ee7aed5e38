//! The sans-I/O host: every per-peer decision of one PSP host, behind one owner.
//!
//! A [`Host`] holds the peer table (which key seals a frame for a destination MAC, which opener
//! checks a frame from a source MAC: the thesis' session key mapping, §4.4.3), the group key's
//! sealer and every peer's openers, the sessions (handshakes, key rings, rekeys, backoff,
//! freshness, budgets, pins) and the counters. The caller (`psp-gateway`) owns sockets,
//! threads, the clock and the configuration file, and drives it quinn-proto style:
//!
//! 1. frames from the protected side (the TAP): [`Host::handle_tap`] seals each into the
//!    caller's buffer ([`TapResult::Sealed`], with its [`Dest`]), queues it for a session, or
//!    drops it (counted);
//! 2. frames from an uplink: [`Host::handle_uplink`] opens each in place and says what it was:
//!    an inner frame to deliver ([`Received::Deliver`]), a handshake or control message it
//!    consumed, or a drop ([`RxDrop`], counted);
//! 3. after either, and at [`Host::poll_timeout`] (after [`Host::handle_timeout`]): drain
//!    [`Host::poll_transmit`] (handshake messages, keepalives, frames that waited for a session,
//!    sealed into the caller's buffer) and [`Host::poll_event`] (what the caller must persist or
//!    log: sequence-number reservations, first-use pins, the Request clock's floor, sessions up
//!    and failed, runtime mismatches).
//!
//! Time (`now`) and randomness (`rng`) are arguments; nothing here blocks, allocates per frame
//! on the data path, or takes a lock. The wire formats are docs/PROTOCOL.md (frames) and
//! docs/SESSIONS.md (handshake, control messages); docs/GATEWAY.md ("Which key seals and opens a
//! frame") walks through the routing.
//!
//! | file | what it holds |
//! |---|---|
//! | `mod.rs` | the API: [`Config`], [`PeerSpec`], [`Host`], inputs and outputs |
//! | `peer.rs` | one peer's state: keying, openers per path, budgets, counters |
//! | `keys.rs` | static-key sealers and their sequence-number reservations |
//! | `tx.rs` | [`Host::handle_tap`]: frames from the protected side |
//! | `rx.rs` | [`Host::handle_uplink`]: frames from the uplinks |
//! | `session.rs` | one session peer: handshakes, key ring, rekey policy, backoff, freshness |
//! | `group.rs` | group-key receiving: pins into openers, genuine group payloads |
//! | `budget.rs` | the per-peer handshake message budget |
//! | `counters.rs` | every counter, declared once |
//!
//! What it does not do: I/O, read a clock, store anything (the caller persists what
//! [`Event`]s name), or normalization's pacing (the caller's pacer thread sends the frames
//! [`Host::poll_departure`] prepares).

mod budget;
mod counters;
mod group;
mod keys;
mod normalized;
mod peer;
mod rx;
mod session;
mod tx;

use alloc::collections::{BTreeMap, VecDeque};
use alloc::string::String;
use alloc::vec::Vec;
use core::net::IpAddr;

use rand_core::CryptoRngCore;

pub use budget::MessageBudget;
pub use counters::{Counter, Counters, DROP_REASONS, FAIL_REASONS, HostCounters, PeerCounters};
pub use group::{GroupOpener, is_group_payload};
pub use keys::{Claim, Fingerprint, KeySpec, session_overhead};
pub use normalized::{Departure, NormCounters, NormSpec};
pub use session::{SessionInfo, Status as SessionStatus, addr_from_frame};

use self::keys::StaticKeys;
use self::peer::Peer;
use crate::crypto::{SigningKey, SuiteId};
use crate::handshake::{self, KeyRingConfig, PathId, RequestLimiter, Tai64n, TimestampClock};
use crate::time::{Duration, Instant};
use crate::wire::Protocol;

/// A MAC address.
pub type Mac = [u8; 6];

/// Where a key ring holds a session ([`Host::key_slots`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SlotKind {
    /// The session before the current one, opening during its grace period.
    Previous,
    /// The session that seals now.
    Current,
    /// Installed by the responder, waiting for the peer's first frame under it.
    Next,
}

/// A peer, by its place in the peer list the host was last configured with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PeerId(pub usize);

/// Where a sealed frame goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dest {
    /// To one peer (over UDP: its endpoint on the path).
    Peer(PeerId),
    /// To every peer (a broadcast or multicast under the group key): once on a shared segment,
    /// a copy per peer endpoint over UDP (the caller knows which peers are normalized: they get
    /// group frames through their normalized stream and need no copy).
    Group,
}

/// The host's settings fixed at start (a change needs a new host).
#[derive(Clone, Debug)]
pub struct Config {
    /// This host's protected MAC address.
    pub mac: Mac,
    /// This host's protected addresses and prefix lengths (which IPv4 broadcasts are genuine).
    pub subnets: Vec<(IpAddr, u8)>,
    /// How many uplinks (paths) this host has: 1 or 2.
    pub paths: u8,
    /// The largest frame an uplink carries (Ethernet header included).
    pub max_frame: usize,
    /// Sessions (`None`: every peer has a static key or uses the group key).
    pub session: Option<SessionSettings>,
    /// The wall clock at [`Instant::ZERO`] (Request timestamps are this plus `now`).
    pub wall_origin: Tai64n,
    /// What happens to a broadcast or multicast frame too large to go under the group key
    /// (with this host's signature, 64 bytes, the group key's frames are the largest):
    /// `false`, the thesis' way, drops it (`tx_unsupported`; the caller sizes its MTU so none
    /// is); `true` sends it as a *group copy* to each peer under that peer's own key (its
    /// session, or its static key): sub-protocol 0x0006, [`GROUP_COPY_EXTRA`] bytes more than a
    /// unicast frame ([`tap_overhead`]).
    pub group_copies: bool,
}

/// What a group copy adds to a unicast frame of the same inner frame: the destination MAC and
/// the EtherType, which travel in the section (its protocol type says `GroupCopy`).
pub const GROUP_COPY_EXTRA: usize = 8;

/// The overhead the protected side's MTU must leave room for, given the group key's sealing
/// overhead `group` (with the signature, if any), the largest unicast one `unicast` (static
/// keys, session suites) and whether large group frames go as group copies: with copies, a
/// group frame that does not fit signed costs `unicast + GROUP_COPY_EXTRA`, so the signature no
/// longer sets the MTU.
pub const fn tap_overhead(group: usize, unicast: usize, copies: bool) -> usize {
    let group = if copies && group > unicast + GROUP_COPY_EXTRA {
        unicast + GROUP_COPY_EXTRA
    } else {
        group
    };
    if group > unicast { group } else { unicast }
}

/// How sessions run (docs/SESSIONS.md).
#[derive(Clone, Debug)]
pub struct SessionSettings {
    /// The handshake template: suites, SMKEX policy, lifetime, timeouts and this host's
    /// long-term key; `local_mac`, `local_addr`, `prefix_len` and `paths` are set per handshake.
    pub handshake: handshake::Config,
    /// This host's address and prefix length on the protected network (SEP stage 1).
    pub address: (IpAddr, u8),
    /// Start a new handshake this long after a session was established (the initiator; its
    /// responder 3 s later).
    pub rekey_after: Duration,
    /// The key rings' settings.
    pub ring: KeyRingConfig,
    /// Frames queued per peer while it has no session.
    pub queue: usize,
}

/// What a peer's unicast frames are protected with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Keying {
    /// A key of its own (a `key_file`), shared with every peer that has the same key.
    Static(KeySpec),
    /// The group key (no key of its own, no sessions).
    Group,
    /// Sessions (SEP with SMKEX).
    Session {
        /// How its identity is known.
        pin: Pin,
        /// Its address on the protected network, if configured (SEP stage 1).
        address: Option<IpAddr>,
    },
}

/// How a session peer's long-term identity is known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pin {
    /// Not at all: its group frames' signatures are not checked and any key is taken in a
    /// handshake (any holder of the group key can act as this peer).
    None,
    /// Configured: signatures and handshakes must match it.
    Configured([u8; 32]),
    /// Learnt from its first session (trust on first use), then required; `Some` when a pin
    /// was stored before.
    Tofu(Option<[u8; 32]>),
}

/// One configured peer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerSpec {
    /// Its name (for the caller's logs; peers are matched by name on reconfiguration).
    pub name: String,
    /// Its protected MAC addresses (the first is the one sessions are set up with).
    pub macs: Vec<Mac>,
    /// What protects its unicast frames.
    pub keying: Keying,
    /// How many paths lead to it (2 only with two uplinks, and over UDP only with a second
    /// endpoint).
    pub paths: u8,
    /// Traffic normalization toward it (its unicast frames and the broadcasts go in a stream
    /// of fixed-size frames at a paced rate), if enabled.
    pub normalize: Option<NormSpec>,
}

/// A frame from the protected side to seal ([`Host::handle_tap`]), in the style of
/// [`SealJob`](crate::protect::SealJob).
#[derive(Debug)]
pub struct TapJob<'a> {
    /// The Ethernet II frame.
    pub input: &'a [u8],
    /// Where the sealed frame goes.
    pub out: &'a mut [u8],
    /// What happened.
    pub result: TapResult,
}

impl<'a> TapJob<'a> {
    /// A job for `input`, sealing into `out`.
    pub fn new(input: &'a [u8], out: &'a mut [u8]) -> Self {
        Self {
            input,
            out,
            result: TapResult::Dropped(TapDrop::Malformed),
        }
    }
}

/// What [`Host::handle_tap`] did with a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub enum TapResult {
    /// Sealed: the first `len` bytes of the job's `out`, for `dest`.
    Sealed {
        /// The sealed frame's length.
        len: usize,
        /// Where it goes.
        dest: Dest,
    },
    /// Taken by the host: queued for a session, or for a normalized stream.
    Queued,
    /// Dropped (counted).
    Dropped(TapDrop),
}

/// Why a frame from the protected side was not sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TapDrop {
    /// Shorter than an Ethernet header.
    Malformed,
    /// Its source MAC is not this host's.
    SpoofedSrc,
    /// To a unicast MAC that is no peer's.
    NoRoute,
    /// It cannot be sealed (an 802.3 length frame, oversize).
    Unsupported,
    /// The sealer's sequence numbers are not reserved yet (or the reservation failed).
    Unreserved,
    /// A session peer's queue is full (or its handshake failed).
    NoSession,
}

/// What [`Host::handle_uplink`] found in a frame.
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use]
pub enum Received {
    /// An inner frame to deliver, at `range` of the buffer given.
    Deliver {
        /// Who sent it.
        peer: PeerId,
        /// Where the inner Ethernet frame lies in the buffer.
        range: core::ops::Range<usize>,
        /// Whether an ICV vouches for it (its checksums may be trusted; `none` has no ICV).
        trusted: bool,
    },
    /// A handshake, control or dummy message, consumed.
    Consumed,
    /// Dropped (counted).
    Dropped(RxDrop),
}

/// Why a received frame was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RxDrop {
    /// Shorter than an Ethernet header.
    Malformed,
    /// Addressed to another unicast MAC on the segment (not an attack signal).
    NotForUs,
    /// From a MAC that is no peer's.
    UnknownPeer(Mac),
    /// The opener refused it.
    Open(PeerId, crate::protect::DropReason),
    /// Under a key id of no live session.
    UnknownKey(PeerId),
    /// A session peer's data under the group key that is not a genuine group payload.
    GroupUnicast(PeerId),
    /// Over the peer's handshake message budget.
    Limited(PeerId),
    /// A Request not newer than one already accepted.
    StaleRequest(PeerId),
    /// On path 2, something other than a handshake message.
    Path2Ignored(PeerId),
}

impl RxDrop {
    /// The counter name.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Malformed => "malformed",
            Self::NotForUs => "not_for_us",
            Self::UnknownPeer(_) => "unknown_peer",
            Self::Open(_, r) => r.as_str(),
            Self::UnknownKey(_) => "unknown_key",
            Self::GroupUnicast(_) => "group_unicast",
            Self::Limited(_) => "messages_limited",
            Self::StaleRequest(_) => "stale_requests",
            Self::Path2Ignored(_) => "path2_ignored",
        }
    }
}

/// A message to send ([`Host::poll_transmit`]): `len` bytes at the start of the caller's
/// buffer, a whole PSP frame, on `path`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub struct Transmit {
    /// The path (uplink) it goes on.
    pub path: PathId,
    /// Where it goes.
    pub dest: Dest,
    /// Its length.
    pub len: usize,
}

/// What the host tells its caller.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// Reserve sequence numbers for a static key's sealer: persist a mark above `next` (a block
    /// ahead), then call [`Host::handle_reserved`]. Until then the sealer seals only numbers
    /// below its current limit (none, for a new sealer).
    Reserve {
        /// Which key (its fingerprint names it without revealing it).
        key: Fingerprint,
        /// Whether it is the group key (whose frames are few: smaller blocks do).
        group: bool,
        /// The sealer's next number, or `None` for a new sealer.
        next: Option<crate::wire::Seq>,
    },
    /// Persist this floor for the Request clock (then [`Host::handle_clock_floor_saved`]).
    ClockFloor(Tai64n),
    /// A first-use pin to persist before the session is used; answer with
    /// [`Host::handle_pin_saved`].
    PinLearned {
        /// The peer.
        peer: PeerId,
        /// Its Ed25519 identity.
        key: [u8; 32],
    },
    /// A session is up.
    SessionUp {
        /// The peer.
        peer: PeerId,
        /// About the session.
        info: SessionInfo,
    },
    /// This host started a handshake with the peer, and why: `"first frame"` (frames wait
    /// for a session), `"keys lost"` (the peer seals under keys we lack), `"keys wear out"`
    /// (expiry or the sequence-number limit near), `"rekey time"` (`rekey_after`).
    HandshakeStarted {
        /// The peer.
        peer: PeerId,
        /// Why.
        why: &'static str,
    },
    /// A handshake failed.
    HandshakeFailed {
        /// The peer.
        peer: PeerId,
        /// The counter name ([`FAIL_REASONS`]).
        reason: &'static str,
        /// When this host tries again at the earliest.
        retry_in: Duration,
        /// Frames that waited for the session, dropped.
        dropped: usize,
    },
    /// A frame from a MAC that is no peer's (the first in a while from it: a likely
    /// configuration mismatch, worth one log line).
    UnknownSource(Mac),
    /// A peer's frame failed its signature check (the first in a while: a wrong `identity`?).
    BadSignature(PeerId),
}

/// The host.
#[derive(Debug)]
pub struct Host {
    cfg: Config,
    group: keys::GroupSealer,
    statics: StaticKeys,
    peers: Vec<Peer>,
    by_mac: BTreeMap<Mac, PeerId>,
    limiter: RequestLimiter<256>,
    clock: RequestClock,
    counters: HostCounters,
    /// Frames to send, waiting for [`Host::poll_transmit`]: handshake messages and control
    /// messages (sealed when polled), by peer.
    transmits: VecDeque<session::Outgoing>,
    events: VecDeque<Event>,
    /// Sources already reported as unknown, and when (one event per source a minute).
    unknown: BTreeMap<Mac, Instant>,
    /// [`Host::max_overhead`] for the keys in force (the MTU of the protected side is at most
    /// `max_frame - 14 -` this).
    overhead: usize,
}

/// How often an unknown source or a peer's bad signature is reported at most.
const REPORT_EVERY: Duration = Duration::from_secs(60);
/// At most this many unknown sources are remembered for reporting.
const UNKNOWN_REMEMBERED: usize = 64;

impl Host {
    /// A host with `cfg`, the group key `group` (signed with `signer` when this host has an
    /// identity), the peers `peers`, and the Request clock's floor from the run before
    /// (`None` on a first start). Every static sealer starts unreserved: drain
    /// [`poll_event`](Self::poll_event) (the [`Event::Reserve`]s) before sealing.
    ///
    /// # Errors
    /// A key or setting the core refuses, named by peer (`group` for the group key).
    pub fn new(
        now: Instant,
        cfg: Config,
        group: KeySpec,
        signer: Option<SigningKey>,
        peers: Vec<PeerSpec>,
        clock_floor: Option<Tai64n>,
    ) -> Result<Self, SpecError> {
        let mut host = Self {
            group: keys::GroupSealer::new(&group, signer)?,
            statics: StaticKeys::default(),
            peers: Vec::new(),
            by_mac: BTreeMap::new(),
            limiter: RequestLimiter::new(),
            clock: RequestClock {
                clock: clock_floor.map_or_else(TimestampClock::new, TimestampClock::resume),
                saving: None,
            },
            counters: HostCounters::default(),
            transmits: VecDeque::new(),
            events: VecDeque::new(),
            unknown: BTreeMap::new(),
            overhead: 0,
            cfg,
        };
        host.events.push_back(host.group.reserve_event(None));
        host.apply_peers(now, group, peers)?;
        Ok(host)
    }

    /// Applies a new peer list (and group key): peers whose name and settings are unchanged
    /// keep everything (sequence numbers, replay windows, sessions, counters); a static key in
    /// use before keeps its sequence numbers; the rest starts fresh. All or nothing: on error
    /// nothing changed.
    ///
    /// # Errors
    /// As [`new`](Self::new).
    pub fn reconfigure(
        &mut self,
        now: Instant,
        group: KeySpec,
        peers: Vec<PeerSpec>,
    ) -> Result<(), SpecError> {
        self.apply_peers(now, group, peers)
    }

    fn apply_peers(
        &mut self,
        now: Instant,
        group: KeySpec,
        specs: Vec<PeerSpec>,
    ) -> Result<(), SpecError> {
        // 1. Build everything new, reading `self` only: an error changes nothing.
        let group_changed = self.group.spec() != &group;
        let new_group = if group_changed {
            Some(keys::GroupSealer::new(&group, None)?)
        } else {
            None
        };
        let group_ref = new_group.as_ref().unwrap_or(&self.group);
        let statics = self.statics.rebuild(&specs, group_ref.spec())?;
        let mut fresh = Vec::with_capacity(specs.len());
        for (i, spec) in specs.iter().enumerate() {
            let keep = !group_changed
                && self
                    .peers
                    .iter()
                    .any(|p| p.spec == *spec || only_s_goal_differs(&p.spec, spec));
            fresh.push(if keep {
                None
            } else {
                let overhead = |k| statics.overhead_of(k, group_ref);
                Some(Peer::new(
                    PeerId(i),
                    spec.clone(),
                    &self.cfg,
                    &group,
                    &statics,
                    now,
                    overhead,
                )?)
            });
        }
        // 2. Put it in force (cannot fail). Unchanged peers keep all their state; a changed
        // peer keeps its counters (by name); a static key in use keeps its numbers.
        if let Some(mut g) = new_group {
            g.set_signer(self.group.take_signer());
            self.group = g;
            self.events.push_back(self.group.reserve_event(None));
        }
        self.events.extend(self.statics.adopt(statics));
        let mut old: BTreeMap<String, Peer> = core::mem::take(&mut self.peers)
            .into_iter()
            .map(|p| (p.spec.name.clone(), p))
            .collect();
        let group_spec = self.group.spec().clone();
        for (i, (spec, made)) in specs.into_iter().zip(fresh).enumerate() {
            let mut p = match made {
                Some(mut p) => {
                    if let Some(o) = old.remove(&spec.name) {
                        p.carry_over(o, !group_changed);
                    }
                    p
                }
                None => match old.remove(&spec.name) {
                    Some(mut p) => {
                        // Same peer, or only its S_goal changed: the stream keeps its
                        // numbers, rounds and queue (the peer's view of it stays valid).
                        if let (Some(st), Some(n)) = (p.stream.as_mut(), &spec.normalize) {
                            st.ep.set_s_goal(n.cfg.s_goal);
                            st.spec = *n;
                        }
                        p.spec = spec.clone();
                        p
                    }
                    // `keep` found it above; nothing else removes it.
                    None => continue,
                },
            };
            p.id = PeerId(i);
            if let Keying::Static(k) = &p.spec.keying {
                p.key = self.statics.find(k, &group_spec);
            }
            self.peers.push(p);
        }
        self.overhead = self.compute_overhead();
        self.by_mac = self
            .peers
            .iter()
            .flat_map(|p| p.spec.macs.iter().map(|m| (*m, p.id)))
            .collect();
        Ok(())
    }

    /// The settings the host runs with.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// The peers, in configuration order.
    pub fn peers(&self) -> impl Iterator<Item = (PeerId, &PeerSpec)> {
        self.peers.iter().map(|p| (p.id, &p.spec))
    }

    /// The peer that has `mac`.
    pub fn peer_by_mac(&self, mac: &Mac) -> Option<PeerId> {
        self.by_mac.get(mac).copied()
    }

    /// The host's counters.
    pub fn counters(&self) -> &HostCounters {
        &self.counters
    }

    /// A peer's counters.
    pub fn peer_counters(&self, peer: PeerId) -> Option<&PeerCounters> {
        self.peers.get(peer.0).map(|p| &p.counters)
    }

    /// A session peer's session, for status (`None` for other peers).
    pub fn session_status(&self, peer: PeerId, now: Instant) -> Option<SessionStatus> {
        self.peers
            .get(peer.0)
            .and_then(|p| p.session.as_ref())
            .map(|s| s.status(now))
    }

    /// The sessions a session peer's key ring holds (previous, current, next), for inspection:
    /// ids, roles and key fingerprints, never keys.
    pub fn key_slots(&self, peer: PeerId) -> impl Iterator<Item = (SlotKind, &handshake::Slot)> {
        self.peers
            .get(peer.0)
            .and_then(|p| p.session.as_deref())
            .map(|s| s.slots())
            .into_iter()
            .flatten()
    }

    /// The group key's suite.
    pub fn group_suite(&self) -> SuiteId {
        self.group.spec().suite
    }

    /// The largest number of bytes sealing adds to an inner frame, over every key in use now
    /// (sessions: every suite they may negotiate), as [`tap_overhead`] counts it: the MTU of
    /// the protected side is at most `max_frame - 14 -` this.
    pub fn max_overhead(&self) -> usize {
        self.overhead
    }

    fn compute_overhead(&self) -> usize {
        let mut unicast = self.statics.max_overhead();
        if let Some(s) = &self.cfg.session {
            unicast = unicast.max(session_overhead(&s.handshake));
        }
        tap_overhead(self.group.overhead(), unicast, self.cfg.group_copies)
    }

    /// The next message to send, sealed into `out` (at least `max_frame` bytes).
    pub fn poll_transmit(&mut self, now: Instant, out: &mut [u8]) -> Option<Transmit> {
        while let Some(o) = self.transmits.pop_front() {
            if let Some(t) = self.seal_outgoing(now, o, out) {
                return Some(t);
            }
        }
        None
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// The next instant [`handle_timeout`](Self::handle_timeout) must run at.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.peers
            .iter()
            .filter_map(|p| p.session.as_ref().and_then(|s| s.poll_timeout()))
            .min()
    }

    /// Handles the timers due at `now`: handshake retransmissions and deadlines, key expiry,
    /// rekeys, retries after a backoff.
    pub fn handle_timeout(&mut self, now: Instant, rng: &mut dyn CryptoRngCore) {
        for i in 0..self.peers.len() {
            if self.peers[i]
                .session
                .as_ref()
                .and_then(|s| s.poll_timeout())
                .is_some_and(|t| t <= now)
            {
                self.with_session(PeerId(i), now, rng, |s, cx| s.handle_timeout(cx));
                self.take_clock_event();
            }
        }
    }

    /// A reservation for the static key `key` is durable: its sealer may use numbers from
    /// `claim.from` up to `claim.limit`.
    pub fn handle_reserved(&mut self, key: Fingerprint, claim: Claim) {
        if self.group.fingerprint() == key {
            self.group.reserved(claim);
        } else {
            self.statics.reserved(key, claim);
        }
    }

    /// The Request clock's floor from the last [`Event::ClockFloor`] is durable (or, with
    /// `saved == false`, could not be written: it is asked for again later).
    pub fn handle_clock_floor_saved(&mut self, floor: Tai64n, saved: bool) {
        self.clock.saving = None;
        if saved {
            self.clock.clock.reserved(floor);
        }
    }

    /// The first-use pin of [`Event::PinLearned`] for `peer` was stored (`true`) or could not
    /// be (`false`: the session is refused, `pin_unsaved`).
    pub fn handle_pin_saved(
        &mut self,
        now: Instant,
        peer: PeerId,
        saved: bool,
        rng: &mut dyn CryptoRngCore,
    ) {
        self.with_session(peer, now, rng, |s, cx| s.pin_saved(cx, saved));
        // The spec records the pin learnt, so a reload that names the same `known_peers` pin
        // finds the peer unchanged.
        if let Some(p) = self.peers.get_mut(peer.0)
            && let Some(s) = p.session.as_deref()
            && let Keying::Session { pin, .. } = &mut p.spec.keying
            && let (Pin::Tofu(None), Some(k)) = (*pin, s.pin())
        {
            *pin = Pin::Tofu(Some(k));
        }
        self.take_clock_event();
    }

    /// Queues the Request clock's floor for persisting, if it asked for one.
    fn take_clock_event(&mut self) {
        if let Some((floor, false)) = self.clock.saving {
            self.clock.saving = Some((floor, true));
            self.events.push_back(Event::ClockFloor(floor));
        }
    }

    /// Reports an unknown source MAC once a [`REPORT_EVERY`] per MAC.
    fn report_unknown(&mut self, now: Instant, mac: Mac) {
        let due = self
            .unknown
            .get(&mac)
            .is_none_or(|t| now.saturating_since(*t) >= REPORT_EVERY);
        if due {
            if self.unknown.len() >= UNKNOWN_REMEMBERED && !self.unknown.contains_key(&mac) {
                self.unknown.clear();
            }
            self.unknown.insert(mac, now);
            self.events.push_back(Event::UnknownSource(mac));
        }
    }
}

/// The host's source of Request timestamps ([`TimestampClock`]) and whether its floor is being
/// persisted: `Some((floor, reported))` from the issue that asked for it until the caller says
/// it was saved.
#[derive(Debug)]
struct RequestClock {
    clock: TimestampClock,
    saving: Option<(Tai64n, bool)>,
}

impl RequestClock {
    fn issue(&mut self, wall: Tai64n) -> Tai64n {
        let t = self.clock.issue(wall);
        if self.saving.is_none()
            && let Some(floor) = self.clock.reserve_due()
        {
            self.saving = Some((floor, false));
        }
        t
    }
}

/// A key or setting the core refuses, for the named peer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpecError {
    /// The peer's name (`group` for the group key).
    pub peer: String,
    /// What is wrong.
    pub problem: &'static str,
}

impl core::fmt::Display for SpecError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "peer {}: {}", self.peer, self.problem)
    }
}

impl core::error::Error for SpecError {}

/// The sub-protocols of handshake messages.
fn is_handshake(p: Protocol) -> bool {
    matches!(p, Protocol::SessionEstablishment | Protocol::KeyExchange)
}

fn is_group(mac: &[u8]) -> bool {
    mac.first().is_some_and(|b| b & 1 == 1)
}

fn mac_at(frame: &[u8], at: usize) -> Option<Mac> {
    frame.get(at..at + 6)?.try_into().ok()
}

#[cfg(test)]
mod tests;

/// Whether `a` and `b` are the same peer settings but for the normalized stream's S_goal (a
/// reload then changes the running stream's rate instead of replacing it).
fn only_s_goal_differs(a: &PeerSpec, b: &PeerSpec) -> bool {
    let (Some(x), Some(y)) = (&a.normalize, &b.normalize) else {
        return false;
    };
    let mut same = a.clone();
    let mut n = *x;
    n.cfg.s_goal = y.cfg.s_goal;
    same.normalize = Some(n);
    same == *b
}
