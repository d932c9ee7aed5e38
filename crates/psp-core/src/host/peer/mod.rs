//! [`Peer`]: everything one host does with one configured peer, as one protocol object in
//! quinn-proto's shape: frames from the uplinks and the protected side in (`handle_uplink`,
//! `handle_tap`), time in (`handle_timeout` at [`Peer::poll_timeout`]), messages and events out
//! (`poll_transmit`, `poll_event`); `now` and the random generator are arguments; every timer
//! is a [`Timer`] in its [`TimerTable`], set where the decision that needs it is made. What
//! the peers of a host share (the group key's sealer, the static keys' sealers, the Request
//! limiter and clock) comes in as a [`Shared`] for the length of a call.
//!
//! | file | what it holds |
//! |---|---|
//! | `mod.rs` | [`Peer`]: construction, reload, timers, events, inspection |
//! | `rx.rs` | frames from the uplinks: which key opens a frame, what it may carry under that key |
//! | `tx.rs` | frames to the peer: data, group copies, handshake and keepalive messages, stream frames |
//! | `session.rs` | a session peer's policy: handshakes, key ring, rekeys, freshness, backoff, liveness |
//! | `stream.rs` | a normalized peer's stream |
//! | `reorder.rs` | the reorder buffer of a peer whose frames are spread over two paths |
//! | `timers.rs` | [`Timer`], [`TimerTable`] |

mod paths;
mod reorder;
mod rx;
mod session;
mod stream;
pub mod timers;
pub(crate) mod tx;

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::vec::Vec;

use rand_core::CryptoRngCore;

pub use self::paths::{Change as PathChange, DOWN_AFTER, PROBE_EVERY, PathMode, PathState};
use self::reorder::Reorder;
pub use self::reorder::{CAPACITY as REORDER_CAPACITY, REORDER_WAIT};
pub(crate) use self::session::{Cx, KEEPALIVE, OWE_KEY, OWE_LIST, OWE_STATE, PROBE, Session};
pub use self::session::{Down, SessionInfo, Status, addr_from_frame};
pub(crate) use self::stream::Stream;
pub use self::stream::{NormCounters, NormSpec};
use self::timers::{Timer, TimerTable};
use super::budget::MessageBudget;
use super::counters::PeerCounters;
use super::group::GroupOpener;
use super::keys::{KeyRef, KeySpec, StaticKeys};
use super::{HostConfig, HostEvent, Keying, PeerId, PeerSpec, Pin, Shared, SlotKind, SpecError};
use crate::handshake::Slot;
use crate::protect::Opener;
use crate::time::Instant;

/// One configured peer of a host (see the module docs).
#[derive(Debug)]
pub struct Peer {
    pub(crate) id: PeerId,
    pub(crate) spec: PeerSpec,
    /// The sealer of its unicast frames, unless it is a session peer.
    pub(crate) key: KeyRef,
    /// Opens its unicast frames under its `key_file` key (a static peer only).
    pub(crate) unicast: Option<Opener>,
    /// Opens its group-key frames, per path (path 2: session peers only); for a peer without a
    /// key of its own, its unicast frames too.
    pub(crate) group: [Option<GroupOpener>; 2],
    /// The handshake messages it may hand the session logic, per path.
    pub(crate) budget: [MessageBudget; 2],
    pub(crate) counters: PeerCounters,
    pub(crate) session: Option<Box<Session>>,
    /// Its normalized stream (a session peer: from its first session on, which starts at
    /// once).
    pub(crate) stream: Option<Stream>,
    pub(crate) timers: TimerTable,
    pub(crate) events: VecDeque<HostEvent>,
    /// When a bad signature from it was last reported.
    pub(crate) bad_signature_reported: Option<Instant>,
    /// In the host's list of peers with something to send or say.
    pub(crate) ready: bool,
    /// Opens its broadcasts under the broadcast keys (`[pki]`), by key id.
    pub(crate) bkeys: Vec<(u32, GroupOpener)>,
    /// Puts its session frames back in order (`paths = "both"`, two paths, not normalized).
    pub(crate) reorder: Option<Reorder>,
}

impl Peer {
    pub(crate) fn new(
        id: PeerId,
        spec: PeerSpec,
        cfg: &HostConfig,
        group: &KeySpec,
        statics: &StaticKeys,
        now: Instant,
        key_overhead: impl Fn(KeyRef) -> usize,
    ) -> Result<Self, SpecError> {
        let name = spec.name.as_str();
        let pin = match spec.keying {
            _ if crate::plant::on(crate::plant::Bug::SkipPin) => None,
            Keying::Session {
                pin: Pin::Configured(k) | Pin::Tofu(Some(k)),
                ..
            } => Some(k),
            _ => None,
        };
        let group_opener = |path: usize| -> Result<Option<GroupOpener>, SpecError> {
            let session = matches!(spec.keying, Keying::Session { .. });
            if path == 1 && !(session && spec.paths >= 2 && cfg.paths >= 2) {
                return Ok(None);
            }
            Ok(Some(GroupOpener::new(
                group.opener(name, cfg.max_frame)?,
                pin,
            )))
        };
        let (key, unicast, session) = match &spec.keying {
            // A `key_file` that is the group key: as a peer without a key of its own.
            Keying::Static(k) if k.key == group.key => (KeyRef::Group, None, None),
            Keying::Static(k) => (
                statics.find(k, group),
                Some(k.opener(name, cfg.max_frame)?),
                None,
            ),
            // Its unicast frames come under the group key, signed when it has an identity: the
            // group opener takes them (with their signatures unchecked, as its broadcasts).
            Keying::Group => (KeyRef::Group, None, None),
            Keying::Session { pin, address } => {
                let Some(settings) = &cfg.session else {
                    return Err(SpecError {
                        peer: spec.name.clone(),
                        problem: "a session peer needs the host's session settings",
                    });
                };
                (
                    KeyRef::Group,
                    None,
                    Some(Box::new(Session::new(
                        settings,
                        *pin,
                        *address,
                        spec.paths.min(cfg.paths),
                        now,
                    ))),
                )
            }
        };
        // A static peer's stream starts now; a session peer's with its first session, with
        // settings checked now (a stream that could not start would leave its traffic
        // unnormalized).
        if let (Some(n), Some(_), Some(settings)) = (&spec.normalize, &session, &cfg.session) {
            let overhead = super::keys::session_overhead(&settings.handshake);
            Stream::check(n, overhead).map_err(|problem| SpecError {
                peer: spec.name.clone(),
                problem,
            })?;
        }
        let stream = match (&spec.normalize, &session) {
            (Some(n), None) => Some(Stream::new(now, *n, key_overhead(key)).map_err(
                |problem| SpecError {
                    peer: spec.name.clone(),
                    problem,
                },
            )?),
            _ => None,
        };
        let both = cfg
            .session
            .as_ref()
            .is_some_and(|s| s.paths == PathMode::Both);
        let reorder = (both
            && session.is_some()
            && spec.paths.min(cfg.paths) >= 2
            && spec.normalize.is_none())
        .then(|| Reorder::new(cfg.max_frame, REORDER_WAIT));
        let mut p = Self {
            id,
            reorder,
            stream,
            group: [group_opener(0)?, group_opener(1)?],
            spec,
            key,
            unicast,
            budget: [MessageBudget::new(); 2],
            counters: PeerCounters::default(),
            session,
            timers: TimerTable::default(),
            events: VecDeque::new(),
            bad_signature_reported: None,
            ready: false,
            bkeys: Vec::new(),
        };
        p.arm_departure();
        if p.spec.normalize.is_some() && p.session.is_some() {
            // Its stream runs only under a session and must run whether or not a frame waits:
            // the first handshake starts at the first `handle_timeout`, as at the end of a
            // backoff ([`Session`]'s `need`).
            p.timers.set(Timer::Backoff, now);
        }
        Ok(p)
    }

    /// Takes over from `old`, the same peer before a reload changed its settings, whatever
    /// the new settings leave valid: its counters always; its openers and their replay windows,
    /// its sessions (keys, handshake, Request freshness, timers) and its stream when what they
    /// depend on is unchanged; the group openers when the group key is the same
    /// (`group_kept`) and so is the peer's pin. An opener made new under the same key starts
    /// its window above the old one's, so a frame captured before the reload never opens twice.
    pub(crate) fn carry_over(&mut self, mut old: Self, group_kept: bool) {
        self.counters = core::mem::take(&mut old.counters);
        self.bad_signature_reported = old.bad_signature_reported;
        let same_keying = old.spec.keying == self.spec.keying;
        if same_keying {
            if self.unicast.is_some() {
                self.unicast = old.unicast.take();
            }
            if self.session.is_some() {
                self.session = old.session.take();
                // The start of a normalized peer's first handshake, unless a backoff runs.
                let start = self.timers.get(Timer::Backoff);
                self.timers = old.timers.clone();
                if !self.timers.is_set(Timer::Backoff) {
                    self.timers.set_opt(Timer::Backoff, start);
                }
                self.timers.stop(Timer::Departure);
                // Frames that wait keep waiting (`[session]`, which decides whether there is a
                // buffer, does not change on a reload).
                if self.reorder.is_some() && old.reorder.is_some() {
                    self.reorder = old.reorder.take();
                }
            }
            if old.spec.normalize == self.spec.normalize && old.stream.is_some() {
                self.stream = old.stream.take();
            }
        } else if let (Some(new), Some(old)) = (self.session.as_deref_mut(), old.session.as_deref())
        {
            // Another address or pin: new sessions, but Requests the peer made before stay as
            // old as they were (a replay of one is refused as it was before the reload).
            new.carry_freshness(old);
        } else if let (Keying::Static(a), Keying::Static(b)) = (&old.spec.keying, &self.spec.keying)
            && a.key == b.key
            && let (Some(o), Some(n)) = (&old.unicast, self.unicast.as_mut())
            && let Some(h) = o.replay_window().highest()
        {
            n.restart_replay_window(h.saturating_add(1));
        }
        if group_kept && old.pin() == self.pin() {
            self.group = old.group;
            self.budget = old.budget;
        } else if group_kept {
            // Same key, another pin: new openers, the old windows' floors.
            for (n, o) in self.group.iter_mut().zip(&old.group) {
                if let (Some(n), Some(o)) = (n.as_mut(), o.as_ref())
                    && let Some(h) = o.highest()
                {
                    n.restart_at(h.saturating_add(1));
                }
            }
        }
        self.arm_departure();
    }

    /// After the reorder buffer moved: its timer and counters.
    pub(crate) fn sync_reorder(&mut self) {
        let Some(r) = self.reorder.as_ref() else {
            return;
        };
        self.timers.set_opt(Timer::Reorder, r.poll_timeout());
        let c = &r.counters;
        self.counters.reorder_held = c.held;
        self.counters.reorder_gaps = c.gaps;
        self.counters.reorder_late = c.late;
        self.counters.reorder_overflow = c.overflow;
    }

    /// Whether frames wait to be handed out by `poll_delivery` (a stream's, or the reorder
    /// buffer's).
    pub(crate) fn delivering(&self) -> bool {
        self.stream.as_ref().is_some_and(|s| s.delivering)
            || (self.reorder.as_ref().is_some_and(Reorder::has_ready)
                && !crate::plant::on(crate::plant::Bug::ReorderNotPolled))
    }

    /// Its place in the host's peer list.
    pub fn id(&self) -> PeerId {
        self.id
    }

    /// Its settings.
    pub fn spec(&self) -> &PeerSpec {
        &self.spec
    }

    /// Its counters.
    pub fn counters(&self) -> &PeerCounters {
        &self.counters
    }

    /// Its timers.
    pub fn timers(&self) -> &TimerTable {
        &self.timers
    }

    /// The earliest of its timers: call [`handle_timeout`](Self::handle_timeout) then.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.timers.next()
    }

    /// Its session state, if it is a session peer.
    pub fn session_status(&self, now: Instant) -> Option<Status> {
        self.session.as_ref().map(|s| s.status(now))
    }

    /// The sessions its key ring holds (ids, roles, fingerprints; never keys).
    pub fn key_slots(&self) -> impl Iterator<Item = (SlotKind, &Slot)> {
        self.session.as_deref().into_iter().flat_map(Session::slots)
    }

    /// The next event about this peer.
    pub fn poll_event(&mut self) -> Option<HostEvent> {
        self.events.pop_front()
    }

    /// The peer's pin now (configured, or learnt).
    pub(crate) fn pin(&self) -> Option<[u8; 32]> {
        if crate::plant::on(crate::plant::Bug::SkipPin) {
            return None;
        }
        self.session.as_ref().and_then(|s| s.pin())
    }

    /// Handles the timers due at `now`.
    pub fn handle_timeout(
        &mut self,
        now: Instant,
        shared: &mut Shared,
        rng: &mut dyn CryptoRngCore,
    ) {
        while let Some(t) = self.timers.take_due(now) {
            if t == Timer::Reorder {
                if let Some(r) = self.reorder.as_mut() {
                    r.handle_timeout(now);
                }
                self.sync_reorder();
                continue;
            }
            // The stream's frame is prepared by `poll_transmit`, which sets its timer again.
            if t != Timer::Departure {
                self.with_session(now, shared, rng, |s, cx| s.handle_timer(cx, t));
            }
        }
    }

    /// The first-use pin of [`HostEvent::PinLearned`] was stored (or not).
    pub fn handle_pin_saved(
        &mut self,
        now: Instant,
        shared: &mut Shared,
        saved: bool,
        rng: &mut dyn CryptoRngCore,
    ) {
        self.with_session(now, shared, rng, |s, cx| s.pin_saved(cx, saved));
        // The spec records the pin learnt, so a reload that names the same `known_peers` pin
        // finds the peer unchanged.
        if let Some(s) = self.session.as_deref()
            && let Keying::Session { pin, .. } = &mut self.spec.keying
            && let (Pin::Tofu(None), Some(k)) = (*pin, s.pin())
        {
            *pin = Pin::Tofu(Some(k));
        }
    }

    /// Runs `f` on the peer's session with the rest of the peer and `shared` at hand; then
    /// starts or restarts its stream as its sessions require.
    pub(crate) fn with_session<R>(
        &mut self,
        now: Instant,
        shared: &mut Shared,
        rng: &mut dyn CryptoRngCore,
        f: impl FnOnce(&mut Session, &mut Cx<'_>) -> R,
    ) -> Option<R> {
        let Self {
            id,
            spec,
            counters,
            session,
            timers,
            events,
            ..
        } = self;
        let s = session.as_deref_mut()?;
        let mut cx = Cx {
            now,
            rng,
            shared,
            id: *id,
            spec,
            counters,
            events,
            timers,
        };
        let r = f(s, &mut cx);
        shared.take_clock_event();
        self.sync_stream(now, shared);
        Some(r)
    }

    /// A normalized session peer's stream starts with its first session that seals, and
    /// starts again when the peer restarted (its sequence numbers and rates begin anew).
    fn sync_stream(&mut self, now: Instant, shared: &Shared) {
        let (Some(n), Some(s)) = (self.spec.normalize, self.session.as_deref_mut()) else {
            return;
        };
        let restarted = core::mem::take(&mut s.peer_restarted);
        if restarted {
            self.stream = None;
        }
        if self.stream.is_none()
            && s.seals(now)
            && let Some(settings) = shared.session_settings()
        {
            let overhead = super::keys::session_overhead(&settings.handshake);
            if let Ok(st) = Stream::new(now, n, overhead) {
                self.stream = Some(st);
                self.arm_departure();
            }
        }
    }

    /// Whether the peer has something to send or say at `now`.
    pub(crate) fn has_output(&self, now: Instant) -> bool {
        if !self.events.is_empty() {
            return true;
        }
        if let Some(s) = self.session.as_deref()
            && (s.keepalive_due
                || (s.seals(now) && (!s.pending.is_empty() || s.member_due != 0 || s.probe_due()))
                || s.has_handshake_output())
        {
            return true;
        }
        self.stream
            .as_ref()
            .and_then(Stream::prepare_at)
            .is_some_and(|t| t <= now)
    }

    /// Counts a frame whose signature failed and reports it, once a
    /// [`REPORT_EVERY`](super::REPORT_EVERY).
    pub(crate) fn bad_signature(&mut self, now: Instant) {
        if self
            .bad_signature_reported
            .is_none_or(|t| now.saturating_since(t) >= super::REPORT_EVERY)
        {
            self.bad_signature_reported = Some(now);
            self.events.push_back(HostEvent::BadSignature(self.id));
        }
    }
}
