//! What goes into a [`Host`](super::Host) and comes out of it: the frames of the protected side
//! ([`TapJob`]) and what became of them, what a frame from an uplink was ([`Received`]), the
//! messages to send ([`HostTransmit`]) and what the caller must persist or log ([`HostEvent`]).

use alloc::vec::Vec;

use super::{Fingerprint, ReplayFloor, SessionInfo};
use crate::handshake::{PathId, Tai64n};
use crate::time::{Duration, Instant};

/// A MAC address.
pub type Mac = [u8; 6];

/// Where a key ring holds a session ([`Host::key_slots`](super::Host::key_slots)).
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

/// A frame from the protected side to seal ([`Host::handle_tap`](super::Host::handle_tap)), in the style of
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

/// What [`Host::handle_tap`](super::Host::handle_tap) did with a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub enum TapResult {
    /// Sealed: the first `len` bytes of the job's `out`, for `dest`.
    Sealed {
        /// The uplink to send it on.
        path: PathId,
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

/// What [`Host::handle_uplink`](super::Host::handle_uplink) found in a frame.
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
    /// From a peer learnt from a certificate, with a source address the certificate does not
    /// name (`[pki]`).
    SpoofedAddr(PeerId),
    /// From a peer whose certificate is revoked.
    Revoked(PeerId),
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
            Self::SpoofedAddr(_) => "spoofed_addr",
            Self::Revoked(_) => "revoked",
        }
    }
}

/// A frame to send ([`Host::poll_transmit`](super::Host::poll_transmit)): `len` bytes at the
/// start of the caller's buffer, a whole PSP frame, on `path`, now or (a normalized stream's
/// frame) at its slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub struct HostTransmit {
    /// The path (uplink) it goes on.
    pub path: PathId,
    /// Where it goes.
    pub dest: Dest,
    /// Its length.
    pub len: usize,
    /// `None`: send it now. `Some(t)`: a normalized stream's frame, prepared ahead of its slot:
    /// the caller's pacer sends it at `t` (at once if `t` has passed), so its departure depends
    /// on the pacer alone, never on what the host was doing.
    pub at: Option<Instant>,
}

/// What the host tells its caller.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum HostEvent {
    /// Reserve sequence numbers for a static key's sealer: persist a mark above `next` (a block
    /// ahead), then call [`Host::handle_reserved`](super::Host::handle_reserved). Until then the sealer seals only numbers
    /// below its current limit (none, for a new sealer).
    Reserve {
        /// Which key (its fingerprint names it without revealing it).
        key: Fingerprint,
        /// Whether it is the group key (whose frames are few: smaller blocks do).
        group: bool,
        /// The sealer's next number, or `None` for a new sealer.
        next: Option<crate::wire::Seq>,
    },
    /// Persist this floor for the Request clock (then [`Host::handle_clock_floor_saved`](super::Host::handle_clock_floor_saved)).
    ClockFloor(Tai64n),
    /// A first-use pin to persist before the session is used; answer with
    /// [`Host::handle_pin_saved`](super::Host::handle_pin_saved).
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
        /// The counter name ([`FAIL_REASONS`](super::FAIL_REASONS)).
        reason: &'static str,
        /// When this host tries again at the earliest.
        retry_in: Duration,
        /// Frames that waited for the session, dropped.
        dropped: usize,
    },
    /// The state directory refused a reservation ([`Host::handle_reserve_failed`](super::Host::handle_reserve_failed)):
    /// the host asks again in a second (this event is the caller's cue to log, once).
    ReserveRefused {
        /// Which key.
        key: Fingerprint,
    },
    /// A frame from a MAC that is no peer's (the first in a while from it: a likely
    /// configuration mismatch, worth one log line). At most one a minute per MAC, for at most
    /// [`UNKNOWN_REPORTED`](super::UNKNOWN_REPORTED) MACs a minute; beyond that,
    /// [`HostEvent::UnknownSources`].
    UnknownSource(Mac),
    /// Frames from more unknown MACs than are reported one by one arrived in the last minute
    /// (a flood of random sources, or a misconfigured segment): how many MACs went unreported,
    /// and the last of them. At most one a minute.
    UnknownSources {
        /// MACs not reported one by one.
        count: u64,
        /// The last of them.
        last: Mac,
    },
    /// Persist these replay floors (the state directory's `replay-floors`), and pass them to
    /// [`Host::new`](super::Host::new) at the next start: frames captured before then are
    /// refused after it. Asked for every [`FLOOR_EVERY`](super::FLOOR_EVERY) while windows
    /// move; [`Host::replay_floors`](super::Host::replay_floors) gives them at a clean stop.
    ReplayFloors(Vec<ReplayFloor>),
    /// A session went down by itself: the peer sent nothing for `silent` while this host sent
    /// to it (it stopped, or the path died). Frames to it wait for the next session, and a
    /// handshake starts.
    SessionDown {
        /// The peer.
        peer: PeerId,
        /// How long nothing came from it.
        silent: Duration,
    },
    /// One of a session peer's two paths went down (nothing opened on it for
    /// [`DOWN_AFTER`](super::DOWN_AFTER)) or up again (a frame opened on it): data moves as
    /// `[session] paths` says.
    PathChanged {
        /// The peer.
        peer: PeerId,
        /// The path.
        path: PathId,
        /// Up (else down).
        up: bool,
    },
    /// A newer revocation list is in force (`[pki]`: handed to
    /// [`Host::handle_revocation_list`](super::Host::handle_revocation_list) or received from
    /// a peer): the caller persists it ([`Host::revocation_list`](super::Host::revocation_list))
    /// so that a restart keeps it.
    RevocationList {
        /// Its number.
        number: u64,
    },
    /// A broadcast key from a key server was taken (`[pki]`).
    BroadcastKey {
        /// The key server's MAC.
        server: Mac,
        /// The key's epoch.
        epoch: u32,
    },
    /// A peer's certificate was revoked: its sessions ended and none starts again.
    Revoked {
        /// The peer.
        peer: PeerId,
        /// Its certificate's serial.
        serial: u64,
    },
    /// A peer's frame failed its signature check (the first in a while: a wrong `identity`?).
    BadSignature(PeerId),
}
