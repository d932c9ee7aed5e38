//! The sans-I/O host: one PSP host's peers behind one owner.
//!
//! A [`Host`] routes: a frame from an uplink goes to the [`Peer`] its source MAC names, a frame
//! from the protected side to the peer its destination MAC names (a broadcast to the group
//! key's sealer, the peers' streams, or as group copies to each peer); the host keeps only what
//! its peers truly share ([`Shared`]: the group key's sealer, the static keys' sealers, the
//! Request limiter and clock, the counters), the report of unknown sources and the replay
//! floors. Everything else a host does with one peer (which key opens its frames, its
//! sessions, handshakes, rekeys, backoff, freshness, pins, liveness, budgets, its normalized
//! stream) is that [`Peer`]'s, with every timer in the peer's
//! [`TimerTable`](peer::timers::TimerTable).
//!
//! The caller (`psp-gateway`, or psp-test's simulator) owns sockets, threads, the clock and
//! the configuration file, and drives it quinn-proto style:
//!
//! 1. frames from the protected side (the TAP): [`Host::handle_tap`] seals each into the
//!    caller's buffer ([`TapResult::Sealed`], with its [`Dest`]), queues it, or drops it
//!    (counted);
//! 2. frames from an uplink: [`Host::handle_uplink`] opens each in place and says what it was:
//!    an inner frame to deliver ([`Received::Deliver`]), a message it consumed, or a drop
//!    ([`RxDrop`], counted); a normalized stream's inner frames come out of
//!    [`Host::poll_delivery`];
//! 3. at [`Host::poll_timeout`] (the one deadline): [`Host::handle_timeout`];
//! 4. after any of these: drain [`Host::poll_transmit`] (handshake messages, keepalives, frames
//!    that waited for a session, group copies, and normalized frames with the slot they leave
//!    at) and [`Host::poll_event`] (what the caller must persist or log).
//!
//! Time (`now`) and randomness (`rng`) are arguments; nothing here blocks, allocates per frame
//! on the data path, or takes a lock. The wire formats are docs/PROTOCOL.md (frames) and
//! docs/SESSIONS.md (handshake, control messages); docs/GATEWAY.md ("Which key seals and opens a
//! frame") walks through the routing.
//!
//! | file | what it holds |
//! |---|---|
//! | `mod.rs` | [`Host`]: construction, reload, routing, the one deadline, the output queues |
//! | `config.rs` | [`HostConfig`], [`SessionSettings`], [`PeerSpec`], [`Keying`], [`Pin`] |
//! | `io.rs` | inputs and outputs: [`TapJob`], [`Received`], [`HostTransmit`], [`HostEvent`] |
//! | `shared.rs` | [`Shared`]: what the peers share |
//! | `peer/` | [`Peer`]: everything the host does with one peer |
//! | `broadcast.rs` | broadcasts from the protected side: group key, streams, group copies |
//! | `keys.rs` | static-key sealers and their sequence-number reservations |
//! | `group.rs` | group-key receiving: pins into openers, genuine group payloads |
//! | `floors.rs` | replay floors: windows that survive a restart |
//! | `unknown.rs` | reporting unknown sources, bounded |
//! | `budget.rs` | the per-peer handshake message budget |
//! | `counters.rs` | every counter, declared once |
//!
//! What it does not do: I/O, read a clock, store anything (the caller persists what
//! [`HostEvent`]s name), or wait for a normalized frame's slot (the caller's pacer does).

mod admit;
mod bkeys;
mod broadcast;
mod budget;
mod config;
mod counters;
mod floors;
mod group;
mod io;
mod keys;
mod members;
mod membership;
pub mod peer;
mod shared;
mod unknown;

use alloc::collections::{BTreeMap, VecDeque};
use alloc::string::String;
use alloc::vec::Vec;

use rand_core::CryptoRngCore;

pub use bkeys::{BKEY_SLOT, ELECT_AFTER, KEEP_OLD, SWITCH_AFTER};
pub use budget::MessageBudget;
pub use config::{
    GROUP_COPY_EXTRA, HostConfig, Keying, PeerSpec, Pin, SessionSettings, SpecError, tap_overhead,
};
pub use counters::{Counter, Counters, DROP_REASONS, FAIL_REASONS, HostCounters, PeerCounters};
pub use floors::{FLOOR_EVERY, ReplayFloor, Resume};
pub use group::{GroupOpener, is_group_payload};
pub use io::{
    Dest, HostEvent, HostTransmit, Mac, PeerId, Received, RxDrop, SlotKind, TapDrop, TapJob,
    TapResult,
};
pub use keys::{Claim, Fingerprint, KeySpec, session_overhead};
pub use members::ANNOUNCE_EVERY;
pub use membership::{Pki, Refusal, source_allowed};
pub use peer::{
    DOWN_AFTER, Down, NormCounters, NormSpec, PROBE_EVERY, PathChange, PathMode, PathState, Peer,
    REORDER_CAPACITY, REORDER_WAIT, SessionInfo, Status as SessionStatus, addr_from_frame,
};
pub use shared::Shared;
pub use unknown::UNKNOWN_REPORTED;

use self::broadcast::CopyJob;
use self::floors::Floors;
use self::keys::{GroupSealer, StaticKeys};
use self::shared::RequestClock;
use self::unknown::Unknown;
use crate::crypto::{SigningKey, SuiteId};
use crate::handshake::{PathId, RequestLimiter, Slot, Tai64n};
use crate::time::{Duration, Instant};
use crate::wire::{Frame, Seq};

/// How often an unknown source or a peer's bad signature is reported at most.
pub(crate) const REPORT_EVERY: Duration = Duration::from_secs(60);
/// How soon a reservation the caller could not make durable is asked for again.
pub const RESERVE_RETRY: Duration = Duration::from_secs(1);

/// The host (see the module docs).
#[derive(Debug)]
pub struct Host {
    shared: Shared,
    peers: Vec<Peer>,
    by_mac: BTreeMap<Mac, PeerId>,
    /// Peers with something to send, in the order they got it.
    ready: VecDeque<PeerId>,
    /// Broadcasts going out as group copies, one peer after another.
    copies: VecDeque<CopyJob>,
    unknown: Unknown,
    floors: Floors,
    /// Reservations the caller could not make durable, asked for again at `retry_at`.
    refused: Vec<(Fingerprint, bool, Option<Seq>)>,
    retry_at: Option<Instant>,
    /// [`Host::max_overhead`] for the keys in force.
    overhead: usize,
    /// `[pki]`: opens Requests from unknown MACs (on a copy in `scratch`).
    admission: Option<crate::protect::Opener>,
    scratch: Vec<u8>,
    /// `[pki]`: a certified peer's frame as it came, until its signature is checked.
    pristine: Vec<u8>,
}

impl Host {
    /// A host with `cfg`, the group key `group` (signed with `signer` when this host has an
    /// identity), the peers `peers`, resuming from what the run before persisted (`resume`:
    /// the Request clock's floor and the replay floors; empty on a first start). Every static
    /// sealer starts unreserved: drain [`poll_event`](Self::poll_event) (the
    /// [`HostEvent::Reserve`]s) before sealing.
    ///
    /// # Errors
    /// A key or setting the core refuses, named by peer (`group` for the group key).
    pub fn new(
        now: Instant,
        cfg: HostConfig,
        group: KeySpec,
        signer: Option<SigningKey>,
        peers: Vec<PeerSpec>,
        resume: Resume,
    ) -> Result<Self, SpecError> {
        let mut host = Self {
            shared: Shared {
                group: GroupSealer::new(&group, signer)?,
                statics: StaticKeys::default(),
                limiter: RequestLimiter::new(),
                clock: RequestClock::new(resume.clock),
                counters: HostCounters::default(),
                events: VecDeque::new(),
                revoked: cfg
                    .pki
                    .as_ref()
                    .map_or_else(crate::pki::RevocationList::empty, |p| p.revoked.clone()),
                member: members::Owed::new(now, cfg.pki.is_some()),
                bkeys: bkeys::BKeys::new(now, cfg.pki.is_some()),
                cfg,
            },
            peers: Vec::new(),
            by_mac: BTreeMap::new(),
            ready: VecDeque::new(),
            copies: VecDeque::new(),
            unknown: Unknown::default(),
            floors: Floors::new(now),
            refused: Vec::new(),
            retry_at: None,
            overhead: 0,
            admission: None,
            scratch: Vec::new(),
            pristine: Vec::new(),
        };
        let e = host.shared.group.reserve_event(None);
        host.shared.events.push_back(e);
        host.apply_peers(now, group, peers)?;
        host.restore_floors(&resume.floors);
        Ok(host)
    }

    /// Applies a new peer list (and group key): peers whose name and settings are unchanged
    /// keep everything (sequence numbers, replay windows, sessions, timers, counters); a static
    /// key in use before keeps its sequence numbers; a changed peer starts fresh, its windows
    /// above the old ones where the key is the same. All or nothing: on error nothing changed.
    ///
    /// # Errors
    /// As [`new`](Self::new).
    pub fn reconfigure(
        &mut self,
        now: Instant,
        group: KeySpec,
        peers: Vec<PeerSpec>,
    ) -> Result<(), SpecError> {
        self.apply_peers(now, group, peers)?;
        for i in 0..self.peers.len() {
            self.touch(PeerId(i), now);
        }
        Ok(())
    }

    fn apply_peers(
        &mut self,
        now: Instant,
        group: KeySpec,
        specs: Vec<PeerSpec>,
    ) -> Result<(), SpecError> {
        // 1. Build everything new, reading `self` only: an error changes nothing.
        let group_changed = self.shared.group.spec() != &group;
        let new_group = if group_changed {
            Some(GroupSealer::new(&group, None)?)
        } else {
            None
        };
        let group_ref = new_group.as_ref().unwrap_or(&self.shared.group);
        let statics = self.shared.statics.rebuild(&specs, group_ref.spec())?;
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
                    &self.shared.cfg,
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
            g.set_signer(self.shared.group.take_signer());
            self.shared.group = g;
            let e = self.shared.group.reserve_event(None);
            self.shared.events.push_back(e);
        }
        let adopted = self.shared.statics.adopt(statics);
        self.shared.events.extend(adopted);
        let mut old: BTreeMap<String, Peer> = core::mem::take(&mut self.peers)
            .into_iter()
            .map(|p| (p.spec.name.clone(), p))
            .collect();
        let group_spec = self.shared.group.spec().clone();
        let certified = if group_changed {
            Vec::new()
        } else {
            Self::certified_to_keep(&mut old, &specs)
        };
        let configured = specs.len();
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
                        if crate::plant::on(crate::plant::Bug::ResetWindowOnReload) {
                            for g in p.group.iter_mut().flatten() {
                                g.restart_at(0);
                            }
                            if let Some(u) = p.unicast.as_mut() {
                                u.restart_replay_window(0);
                            }
                        }
                        p
                    }
                    // `keep` found it above; nothing else removes it.
                    None => continue,
                },
            };
            p.id = PeerId(i);
            p.ready = false;
            if let Keying::Static(k) = &p.spec.keying {
                p.key = self.shared.statics.find(k, &group_spec);
            }
            self.peers.push(p);
        }
        for (i, mut p) in certified.into_iter().enumerate() {
            p.id = PeerId(configured + i);
            p.ready = false;
            self.peers.push(p);
        }
        if group_changed {
            self.admission = None;
        }
        self.ready.clear();
        self.copies.clear();
        self.overhead = self.compute_overhead();
        self.by_mac = self
            .peers
            .iter()
            .flat_map(|p| p.spec.macs.iter().map(|m| (*m, p.id)))
            .collect();
        Ok(())
    }

    /// The settings the host runs with.
    pub fn config(&self) -> &HostConfig {
        &self.shared.cfg
    }

    /// The peers, in configuration order.
    pub fn peers(&self) -> impl Iterator<Item = (PeerId, &PeerSpec)> {
        self.peers.iter().map(|p| (p.id, &p.spec))
    }

    /// One peer, for inspection.
    pub fn peer(&self, id: PeerId) -> Option<&Peer> {
        self.peers.get(id.0)
    }

    /// One peer and what it shares with the others, to drive it directly (its `handle_*` and
    /// `poll_*`); the host's own queues do not see what it does meanwhile, so drain its
    /// [`Peer::poll_transmit`] and [`Peer::poll_event`] yourself.
    pub fn peer_mut(&mut self, id: PeerId) -> Option<(&mut Peer, &mut Shared)> {
        let p = self.peers.get_mut(id.0)?;
        Some((p, &mut self.shared))
    }

    /// The peer that has `mac`.
    pub fn peer_by_mac(&self, mac: &Mac) -> Option<PeerId> {
        self.by_mac.get(mac).copied()
    }

    /// The host's counters.
    pub fn counters(&self) -> &HostCounters {
        &self.shared.counters
    }

    /// A peer's counters.
    pub fn peer_counters(&self, peer: PeerId) -> Option<&PeerCounters> {
        self.peers.get(peer.0).map(|p| &p.counters)
    }

    /// A session peer's session, for status (`None` for other peers).
    pub fn session_status(&self, peer: PeerId, now: Instant) -> Option<SessionStatus> {
        self.peers.get(peer.0).and_then(|p| p.session_status(now))
    }

    /// The sessions a session peer's key ring holds (previous, current, next), for inspection:
    /// ids, roles and key fingerprints, never keys.
    pub fn key_slots(&self, peer: PeerId) -> impl Iterator<Item = (SlotKind, &Slot)> {
        self.peers.get(peer.0).into_iter().flat_map(Peer::key_slots)
    }

    /// The group key's suite.
    pub fn group_suite(&self) -> SuiteId {
        self.shared.group.spec().suite
    }

    /// The largest number of bytes sealing adds to an inner frame, over every key in use now
    /// (sessions: every suite they may negotiate), as [`tap_overhead`] counts it: the MTU of
    /// the protected side is at most `max_frame - 14 -` this.
    pub fn max_overhead(&self) -> usize {
        self.overhead
    }

    fn compute_overhead(&self) -> usize {
        let mut unicast = self.shared.statics.max_overhead();
        if let Some(s) = &self.shared.cfg.session {
            unicast = unicast.max(session_overhead(&s.handshake));
        }
        tap_overhead(
            self.shared.group.overhead(),
            unicast,
            self.shared.cfg.group_copies,
        )
    }

    /// Opens a frame from uplink `path` in place and says what it was: an inner frame to
    /// deliver (at a range of `frame`), a message the host consumed (a handshake message, a
    /// keepalive, a stream payload), or a drop (counted; the peer's counters when the sender
    /// is known).
    pub fn handle_uplink(
        &mut self,
        now: Instant,
        path: PathId,
        frame: &mut [u8],
        rng: &mut dyn CryptoRngCore,
    ) -> Received {
        let (Some(dst), Some(src)) = (mac_at(frame, 0), mac_at(frame, 6)) else {
            self.shared.counters.malformed += 1;
            return Received::Dropped(RxDrop::Malformed);
        };
        let group = is_group(&dst);
        if (path != PathId::FIRST || !group) && dst != self.shared.cfg.mac {
            self.shared.counters.not_for_us += 1;
            return Received::Dropped(RxDrop::NotForUs);
        }
        let known = self.by_mac.get(&src).copied();
        let admitted = match known {
            None if path == PathId::FIRST => self.admit(now, src, frame),
            _ => None,
        };
        let Some(pid) = known.or(admitted) else {
            self.shared.counters.unknown_peer += 1;
            self.unknown.report(now, src, &mut self.shared.events);
            return Received::Dropped(RxDrop::UnknownPeer(src));
        };
        // `[pki]`: a certified peer's frame under the group key is kept until its signature is
        // checked: a renewed identity brings its new certificate in a frame the old pin
        // refuses. (Not a unicast frame under a session key: no copy on the data path.)
        let certified =
            self.shared.cfg.pki.is_some() && admit::is_certified(&self.peers[pid.0].spec);
        let keep = certified
            && path == PathId::FIRST
            && (group
                || Frame::new_checked(&*frame, 0)
                    .ok()
                    .and_then(|f| f.security_number())
                    .is_none_or(|k| Some(k) == self.shared.group_sn()));
        // A peer made for a MAC this host sent to, whose certificate it has not seen yet, takes
        // only a frame that brings one (signed by its key), which pins it: anything else could
        // be anyone's with the group key (it would move the peer's replay window, or be
        // delivered unsigned).
        if certified
            && self.peers[pid.0].pin().is_none()
            && (!keep || !self.recertify(now, pid, frame))
        {
            self.shared.counters.unknown_peer += 1;
            return Received::Dropped(RxDrop::UnknownPeer(src));
        }
        if keep {
            self.pristine.clear();
            self.pristine.extend_from_slice(frame);
        }
        let mut r = self.peers[pid.0].handle_uplink(now, &mut self.shared, path, frame, rng);
        if keep
            && matches!(
                r,
                Received::Dropped(RxDrop::Open(_, crate::protect::DropReason::BadSignature))
            )
        {
            let copy = core::mem::take(&mut self.pristine);
            if copy.len() == frame.len() && self.recertify(now, pid, &copy) {
                frame.copy_from_slice(&copy);
                r = self.peers[pid.0].handle_uplink(now, &mut self.shared, path, frame, rng);
            }
            self.pristine = copy;
        }
        self.touch(pid, now);
        self.take_offered(now, rng);
        self.take_offered_keys(now);
        r
    }

    /// Seals a batch of Ethernet II frames from the protected side, each into its job's `out`
    /// (at least `max_frame` bytes), and sets each job's result: sealed (with where it goes),
    /// queued (a session peer without a session: the frame waits and a handshake starts; a
    /// normalized peer's stream; group copies), or dropped (counted). A run of frames to one
    /// peer is sealed in one call, so a suite can interleave their cipher chains.
    ///
    /// Only this host's frames are sealed: a frame from another source MAC (a bridged or
    /// spoofing sender behind the TAP) would leave as ours.
    pub fn handle_tap(
        &mut self,
        now: Instant,
        jobs: &mut [TapJob<'_>],
        rng: &mut dyn CryptoRngCore,
    ) {
        let ours = self.shared.cfg.mac;
        let mut i = 0;
        while i < jobs.len() {
            let frame = jobs[i].input;
            let (Some(dst), Some(src)) = (mac_at(frame, 0), mac_at(frame, 6)) else {
                self.shared.counters.malformed += 1;
                jobs[i].result = TapResult::Dropped(TapDrop::Malformed);
                i += 1;
                continue;
            };
            if src != ours {
                self.shared.counters.spoofed_src += 1;
                jobs[i].result = TapResult::Dropped(TapDrop::SpoofedSrc);
                i += 1;
                continue;
            }
            if is_group(&dst) {
                jobs[i].result = self.broadcast(now, &mut jobs[i], rng);
                i += 1;
                continue;
            }
            let known = self.by_mac.get(&dst).copied();
            let Some(pid) = known.or_else(|| self.provisional(now, dst)) else {
                self.shared.counters.no_route += 1;
                jobs[i].result = TapResult::Dropped(TapDrop::NoRoute);
                i += 1;
                continue;
            };
            let mut end = i + 1;
            while end < jobs.len()
                && mac_at(jobs[end].input, 0) == Some(dst)
                && mac_at(jobs[end].input, 6) == Some(ours)
            {
                end += 1;
            }
            let n = self.peers[pid.0].handle_tap(now, &mut self.shared, &mut jobs[i..end], rng);
            self.touch(pid, now);
            i += n.max(1);
        }
        self.shared.take_clock_event();
    }

    /// The next instant [`handle_timeout`](Self::handle_timeout) must run at: the earliest of
    /// every peer's timers and the host's own (a reservation to ask for again, the replay
    /// floors to save).
    pub fn poll_timeout(&self) -> Option<Instant> {
        let peers = self.peers.iter().filter_map(Peer::poll_timeout).min();
        [
            peers,
            self.retry_at,
            Some(self.floors.at),
            self.shared.member.announce_at,
            self.shared.bkeys.poll_timeout(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Handles the timers due at `now`: every peer's (handshake retransmissions and deadlines,
    /// key expiry, rekeys, backoffs, liveness, keepalives, stream frames to prepare) and the
    /// host's own.
    pub fn handle_timeout(&mut self, now: Instant, rng: &mut dyn CryptoRngCore) {
        for i in 0..self.peers.len() {
            if self.peers[i].poll_timeout().is_some_and(|t| t <= now) {
                self.peers[i].handle_timeout(now, &mut self.shared, rng);
                self.touch(PeerId(i), now);
            }
        }
        if self.retry_at.is_some_and(|t| t <= now) {
            self.retry_at = None;
            for (key, group, next) in core::mem::take(&mut self.refused) {
                self.shared
                    .events
                    .push_back(HostEvent::Reserve { key, group, next });
            }
        }
        if self.floors.at <= now {
            self.floors_due(now);
        }
        self.announce_due(now);
        self.bkeys_due(now, rng);
        self.shared.take_clock_event();
    }

    /// The next frame to send, sealed into `out` (at least `max_frame` bytes): group copies,
    /// then each peer's handshake messages, keepalives, frames that waited for a session and
    /// normalized frames (those with the slot they leave at).
    pub fn poll_transmit(
        &mut self,
        now: Instant,
        out: &mut [u8],
        rng: &mut dyn CryptoRngCore,
    ) -> Option<HostTransmit> {
        if let Some(t) = self.poll_copy(now, out, rng) {
            return Some(t);
        }
        if let Some(t) = self.poll_announce(now, out) {
            return Some(t);
        }
        while let Some(&pid) = self.ready.front() {
            let p = &mut self.peers[pid.0];
            let t = p.poll_transmit(now, &mut self.shared, out, rng);
            self.shared.events.extend(p.events.drain(..));
            if t.is_some() {
                self.shared.take_clock_event();
                return t;
            }
            p.ready = false;
            self.ready.pop_front();
        }
        None
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<HostEvent> {
        self.shared.events.pop_front()
    }

    /// The next inner frame a normalized peer's stream delivered, copied into `out`, with the
    /// peer it came from: `Some((peer, len))`. Handshake and control messages in the stream are
    /// handled here; call until `None` after every [`handle_uplink`](Self::handle_uplink)
    /// batch.
    pub fn poll_delivery(
        &mut self,
        now: Instant,
        out: &mut [u8],
        rng: &mut dyn CryptoRngCore,
    ) -> Option<(PeerId, usize)> {
        for i in 0..self.peers.len() {
            if !self.peers[i].delivering() {
                continue;
            }
            let got = self.peers[i].poll_delivery(now, &mut self.shared, out, rng);
            self.touch(PeerId(i), now);
            if let Some(n) = got {
                return Some((PeerId(i), n));
            }
        }
        None
    }

    /// A reservation for the static key `key` is durable: its sealer may use numbers from
    /// `claim.from` up to `claim.limit`.
    pub fn handle_reserved(&mut self, key: Fingerprint, claim: Claim) {
        self.refused.retain(|r| r.0 != key);
        if self.shared.group.fingerprint() == key {
            self.shared.group.reserved(claim);
        } else if key == BKEY_SLOT {
            self.bkey_reserved(claim);
        } else {
            self.shared.statics.reserved(key, claim);
        }
    }

    /// The reservation of [`HostEvent::Reserve`] for `key` could not be made durable: the host asks
    /// for it again in [`RESERVE_RETRY`] (meanwhile its sealer stops at its old limit, frames
    /// counted `tx_unreserved`), and says so once ([`HostEvent::ReserveRefused`]).
    pub fn handle_reserve_failed(
        &mut self,
        now: Instant,
        key: Fingerprint,
        group: bool,
        next: Option<Seq>,
    ) {
        if !self.refused.iter().any(|r| r.0 == key) {
            self.shared
                .events
                .push_back(HostEvent::ReserveRefused { key });
        }
        self.refused.retain(|r| r.0 != key);
        self.refused.push((key, group, next));
        self.retry_at = Some(
            self.retry_at
                .map_or(now + RESERVE_RETRY, |t| t.min(now + RESERVE_RETRY)),
        );
    }

    /// The Request clock's floor from the last [`HostEvent::ClockFloor`] is durable (or, with
    /// `saved == false`, could not be written: it is asked for again later).
    pub fn handle_clock_floor_saved(&mut self, floor: Tai64n, saved: bool) {
        self.shared.clock.saving = None;
        if saved {
            self.shared.clock.clock.reserved(floor);
        }
    }

    /// The first-use pin of [`HostEvent::PinLearned`] for `peer` was stored (`true`) or could not
    /// be (`false`: the session is refused, `pin_unsaved`).
    pub fn handle_pin_saved(
        &mut self,
        now: Instant,
        peer: PeerId,
        saved: bool,
        rng: &mut dyn CryptoRngCore,
    ) {
        if let Some(p) = self.peers.get_mut(peer.0) {
            p.handle_pin_saved(now, &mut self.shared, saved, rng);
            self.touch(peer, now);
        }
    }

    /// A normalized peer's stream statistics and counters, for status.
    pub fn norm_status(
        &self,
        peer: PeerId,
    ) -> Option<(crate::normalize::Stats, &NormCounters, usize)> {
        let st = self.peers.get(peer.0)?.stream.as_ref()?;
        Some((st.ep.stats(), &st.counters, st.spec.frame_size))
    }

    /// The largest inner frame every normalized stream carries whole, if any is configured
    /// (faithful packing: one inner frame per outer frame, so the protected side's MTU must
    /// shrink to it).
    pub fn norm_max_inner_len(&self) -> Option<usize> {
        self.peers
            .iter()
            .filter_map(|p| {
                let spec = p.spec.normalize.as_ref()?;
                // A session peer's stream does not run before its first session: its
                // settings decide all the same.
                let overhead = match (&p.session, &self.shared.cfg.session) {
                    (Some(_), Some(settings)) => session_overhead(&settings.handshake),
                    _ => self.shared.statics.overhead_of(p.key, &self.shared.group),
                };
                peer::Stream::endpoint_config(spec, overhead)
                    .ok()
                    .map(|c| c.max_sendable_inner_len())
            })
            .min()
    }

    /// Whether broadcasts to `peer` travel inside its normalized stream now (then it needs no
    /// copy under the group key): a static normalized peer always, a session peer while it
    /// has a live session.
    pub fn streams_to(&self, peer: PeerId, now: Instant) -> bool {
        self.peers.get(peer.0).is_some_and(|p| p.streams(now))
    }

    /// After a call into peer `pid`: its events join the host's queue, and it joins the list of
    /// peers with something to send if it has.
    fn touch(&mut self, pid: PeerId, now: Instant) {
        let p = &mut self.peers[pid.0];
        self.shared.events.extend(p.events.drain(..));
        if !p.ready && p.has_output(now) {
            p.ready = true;
            self.ready.push_back(pid);
        }
    }
}

#[cfg(feature = "_fuzz")]
impl Host {
    /// Fuzz targets only (feature `_fuzz`): seals `payload` as sub-protocol `proto` from this
    /// host to `peer` under the key that seals the peer's unicast frames (its current session,
    /// else its `key_file` key or the group key) into `out`; its length. Not an API.
    pub fn fuzz_seal(
        &mut self,
        now: Instant,
        peer: PeerId,
        proto: crate::wire::Protocol,
        payload: &[u8],
        out: &mut [u8],
    ) -> Option<usize> {
        let src = self.shared.cfg.mac;
        let p = self.peers.get_mut(peer.0)?;
        let dst = *p.spec.macs.first()?;
        if let Some(s) = p.session.as_deref_mut() {
            return s
                .ring()
                .seal_sub(now, dst, src, proto, payload, out)
                .ok()
                .map(<[u8]>::len);
        }
        let r = self
            .shared
            .statics
            .sealer_mut(p.key, &mut self.shared.group);
        r.sealer
            .seal_sub(now, dst, src, proto, payload, out)
            .ok()
            .map(<[u8]>::len)
    }
}

fn is_group(mac: &[u8]) -> bool {
    mac.first().is_some_and(|b| b & 1 == 1)
}

fn mac_at(frame: &[u8], at: usize) -> Option<Mac> {
    frame.get(at..at + 6)?.try_into().ok()
}

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

#[cfg(test)]
mod tests;
