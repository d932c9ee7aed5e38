//! [`Shared`]: what every peer of one host uses, and nothing else: the settings, the group key's
//! sealer (one sequence-number stream for broadcasts and every handshake message), the static
//! keys' sealers (one per distinct `key_file` key), the per-source Request limiter, the Request
//! clock, the host's counters and its own events. A [`Peer`](super::Peer) gets it as an
//! argument for the length of one call.

use alloc::collections::VecDeque;

use super::counters::HostCounters;
use super::keys::{GroupSealer, StaticKeys};
use super::{HostConfig, HostEvent, Mac, SessionSettings};
use crate::handshake::{RequestLimiter, Tai64n, TimestampClock};
use crate::protect::SealError;
use crate::time::Instant;
use crate::wire::{Protocol, SecurityNumber};

/// What the peers of one host share (see the module docs). It has no constructor of its own:
/// [`Host::peer_mut`](super::Host::peer_mut) lends it with a peer.
#[derive(Debug)]
pub struct Shared {
    pub(crate) cfg: HostConfig,
    pub(crate) group: GroupSealer,
    pub(crate) statics: StaticKeys,
    pub(crate) limiter: RequestLimiter<256>,
    pub(crate) clock: RequestClock,
    pub(crate) counters: HostCounters,
    pub(crate) events: VecDeque<HostEvent>,
    /// The revocation list in force (`[pki]`; empty otherwise).
    pub(crate) revoked: crate::pki::RevocationList,
    /// Membership messages the host owes (`[pki]`).
    pub(crate) member: super::members::Owed,
    /// Broadcast keys (`[pki]`).
    pub(crate) bkeys: super::bkeys::BKeys,
}

impl Shared {
    /// The host's settings.
    pub fn config(&self) -> &HostConfig {
        &self.cfg
    }

    /// The host's counters.
    pub fn counters(&self) -> &HostCounters {
        &self.counters
    }

    pub(crate) fn session_settings(&self) -> Option<&SessionSettings> {
        self.cfg.session.as_ref()
    }

    /// The security number the group key's frames carry, if any (a session key id equal to it
    /// would send the session's frames to the group opener).
    pub(crate) fn group_sn(&self) -> Option<SecurityNumber> {
        self.group.spec().sealer.security_number()
    }

    /// The wall clock at `now`, as the caller gave its origin.
    pub(crate) fn wall(&self, now: Instant) -> Tai64n {
        self.cfg
            .wall_origin
            .plus(now.saturating_since(Instant::ZERO))
    }

    /// Seals a sub-protocol message (a handshake message) from this host to `dst` under the
    /// group key into `out`; its length, or `None` (counted) when the sealer refused.
    pub(crate) fn seal_group_sub(
        &mut self,
        now: Instant,
        dst: Mac,
        proto: Protocol,
        payload: &[u8],
        out: &mut [u8],
    ) -> Option<usize> {
        let src = self.cfg.mac;
        let r = self
            .group
            .r
            .sealer
            .seal_sub(now, dst, src, proto, payload, out)
            .map(<[u8]>::len);
        if let Some(e) = self.group.r.due(true) {
            self.events.push_back(e);
        }
        match r {
            Ok(len) => {
                self.counters.group_tx_frames += 1;
                Some(len)
            }
            Err(SealError::Unreserved) => {
                self.counters.tx_unreserved += 1;
                None
            }
            Err(_) => {
                self.counters.tx_unsupported += 1;
                None
            }
        }
    }

    /// Queues the Request clock's floor for persisting, if it asked for one.
    pub(crate) fn take_clock_event(&mut self) {
        if let Some((floor, false)) = self.clock.saving {
            self.clock.saving = Some((floor, true));
            self.events.push_back(HostEvent::ClockFloor(floor));
        }
    }
}

/// The host's source of Request timestamps ([`TimestampClock`]) and whether its floor is being
/// persisted: `Some((floor, reported))` from the issue that asked for it until the caller says
/// it was saved.
#[derive(Debug)]
pub(crate) struct RequestClock {
    pub(crate) clock: TimestampClock,
    pub(crate) saving: Option<(Tai64n, bool)>,
}

impl RequestClock {
    pub(crate) fn new(floor: Option<Tai64n>) -> Self {
        Self {
            clock: floor.map_or_else(TimestampClock::new, TimestampClock::resume),
            saving: None,
        }
    }

    /// A Request timestamp for the wall clock `wall`; asks for the floor to be persisted when
    /// it is due.
    pub(crate) fn issue(&mut self, wall: Tai64n) -> Tai64n {
        let t = self.clock.issue(wall);
        if self.saving.is_none()
            && let Some(floor) = self.clock.reserve_due()
        {
            self.saving = Some((floor, false));
        }
        t
    }
}
