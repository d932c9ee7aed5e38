//! One peer's state: how its frames are sealed and opened, its budgets and counters, and its
//! session if it is a session peer.

use alloc::boxed::Box;

use super::budget::MessageBudget;
use super::counters::PeerCounters;
use super::group::GroupOpener;
use super::keys::{KeyRef, KeySpec, StaticKeys};
use super::session::SessionPeer;
use super::{Config, Keying, PeerId, PeerSpec, Pin, SpecError};
use crate::protect::Opener;
use crate::time::Instant;

/// One configured peer.
#[derive(Debug)]
pub(super) struct Peer {
    pub(super) id: PeerId,
    pub(super) spec: PeerSpec,
    /// The sealer of its unicast frames, unless it is a session peer.
    pub(super) key: KeyRef,
    /// Opens its unicast frames, unless it is a session peer (its key ring does).
    pub(super) unicast: Option<Opener>,
    /// Opens its group-key frames, per path (path 2: session peers only).
    pub(super) group: [Option<GroupOpener>; 2],
    /// The handshake messages it may hand the session logic, per path.
    pub(super) budget: [MessageBudget; 2],
    /// Its counters.
    pub(super) counters: PeerCounters,
    /// Its sessions, if it is a session peer.
    pub(super) session: Option<Box<SessionPeer>>,
    /// When a bad signature from it was last reported.
    pub(super) bad_signature_reported: Option<Instant>,
    /// Its normalized stream (a session peer: from its first session on).
    pub(super) stream: Option<super::normalized::Stream>,
}

impl Peer {
    pub(super) fn new(
        id: PeerId,
        spec: PeerSpec,
        cfg: &Config,
        group: &KeySpec,
        statics: &StaticKeys,
        now: Instant,
        key_overhead: impl Fn(KeyRef) -> usize,
    ) -> Result<Self, SpecError> {
        let name = spec.name.as_str();
        let pin = match spec.keying {
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
            Keying::Static(k) => (
                statics.find(k, group),
                Some(k.opener(name, cfg.max_frame)?),
                None,
            ),
            Keying::Group => (
                KeyRef::Group,
                Some(group.opener(name, cfg.max_frame)?),
                None,
            ),
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
                    Some(Box::new(SessionPeer::new(settings, *pin, *address))),
                )
            }
        };
        // A static peer's stream starts now; a session peer's with its first session, with
        // settings checked now (a stream that could not start would leave its traffic
        // unnormalized).
        if let (Some(n), Some(_), Some(settings)) = (&spec.normalize, &session, &cfg.session) {
            let overhead = super::keys::session_overhead(&settings.handshake);
            super::normalized::Stream::check(n, overhead).map_err(|problem| SpecError {
                peer: spec.name.clone(),
                problem,
            })?;
        }
        let stream = match (&spec.normalize, &session) {
            (Some(n), None) => Some(
                super::normalized::Stream::new(now, *n, key_overhead(key)).map_err(|problem| {
                    SpecError {
                        peer: spec.name.clone(),
                        problem,
                    }
                })?,
            ),
            _ => None,
        };
        Ok(Self {
            id,
            stream,
            group: [group_opener(0)?, group_opener(1)?],
            spec,
            key,
            unicast,
            budget: [MessageBudget::new(); 2],
            counters: PeerCounters::default(),
            session,
            bad_signature_reported: None,
        })
    }

    /// The peer's pin now (configured, or learnt).
    pub(super) fn pin(&self) -> Option<[u8; 32]> {
        self.session.as_ref().and_then(|s| s.pin())
    }
}

impl Peer {
    /// Takes over from `old`, the same peer before a reload changed its settings, whatever
    /// the new settings leave valid: its counters always; its openers and their replay windows,
    /// its sessions (keys, handshake, Request freshness) and its stream when what they depend on
    /// is unchanged (a frame captured before the reload must not open twice); the group
    /// openers when the group key is the same (`group_kept`) and so is the peer's pin.
    pub(super) fn carry_over(&mut self, mut old: Self, group_kept: bool) {
        self.counters = core::mem::take(&mut old.counters);
        self.bad_signature_reported = old.bad_signature_reported;
        let same_keying = old.spec.keying == self.spec.keying;
        if same_keying {
            if self.unicast.is_some() {
                self.unicast = old.unicast.take();
            }
            if self.session.is_some() {
                self.session = old.session.take();
            }
            if old.spec.normalize == self.spec.normalize && old.stream.is_some() {
                self.stream = old.stream.take();
            }
        }
        if group_kept && old.pin() == self.pin() {
            self.group = old.group;
            self.budget = old.budget;
        }
    }
}
