//! [`Party`]: what the harness needs of an honest host, so that another implementation (a
//! sans-I/O peer endpoint that owns the gateway's per-peer decisions) can be driven and checked
//! the same way as the reference [`GatewayParty`](super::GatewayParty).

use psp_core::SuiteId;
use psp_core::handshake::{PathId, Role, SessionId};
use psp_core::time::Instant;

/// A MAC address.
pub type Mac = [u8; 6];

/// One frame on a path.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Frame {
    /// The source MAC (an insider attacker can write any).
    pub src: Mac,
    /// The destination MAC.
    pub dst: Mac,
    /// The path it travels on.
    pub path: PathId,
    /// What it carries.
    pub body: FrameBody,
}

/// What a frame carries.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FrameBody {
    /// A handshake message: the payload of a session-establishment or key-exchange sub-protocol
    /// frame, which the gateway seals under the group key (transparent to the insider attacker,
    /// so the harness leaves it out).
    Handshake(Vec<u8>),
    /// A whole PSP frame sealed under a session key (data or a keepalive).
    Session(Vec<u8>),
}

/// Which key-ring slot holds a session, or whether its keys wait for confirmation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SlotKind {
    /// The previous session (opens during its grace period).
    Previous,
    /// The session that seals now.
    Current,
    /// Installed, waiting for the peer's first frame (responder).
    Next,
    /// Derived but not yet installed: a compact responder's keys before the initiator's first
    /// frame on path 2 (the caller's key confirmation of `Config::compact`). They neither seal
    /// nor open anything.
    Unconfirmed,
}

/// One session an honest host holds keys for. Key material appears only as fingerprints (the
/// suite's BIVN of each direction's key).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionView {
    /// The peer the host believes it shares the session with.
    pub peer: Mac,
    /// The session id.
    pub id: SessionId,
    /// The host's role in the handshake.
    pub role: Role,
    /// Where the keys are.
    pub slot: SlotKind,
    /// The negotiated suite.
    pub suite: SuiteId,
    /// The fingerprint of the key the host seals under.
    pub send: [u8; 20],
    /// The fingerprint of the key the host opens under.
    pub recv: [u8; 20],
    /// Whether SMKEX ran over two paths.
    pub two_path: bool,
    /// The long-term key the host took as the peer's (mixed into its DH), if any.
    pub peer_static: Option<[u8; 32]>,
    /// The host's own long-term public key, if it has one.
    pub own_static: Option<[u8; 32]>,
    /// Whether the host had the peer's long-term key pinned.
    pub pinned: bool,
}

/// A host's state as the invariants see it.
#[derive(Clone, Debug, Default)]
pub struct Observation {
    /// Every session it holds keys for.
    pub sessions: Vec<SessionView>,
    /// Live handshake objects (all peers).
    pub handshakes: usize,
    /// Frames queued for sending (after [`Party::poll_transmit`] was drained: should be 0).
    pub queued: usize,
    /// How many peers it has (the bounds scale with it).
    pub peers: usize,
    /// Data frames opened per peer, in peer order.
    pub opened: Vec<(Mac, u64)>,
}

/// An honest host, sans-I/O: frames in, frames out, `now` passed in.
///
/// Call order: after any `handle_*`, `want` or `send_data`, drain
/// [`poll_transmit`](Self::poll_transmit); call [`handle_timeout`](Self::handle_timeout) at
/// [`poll_timeout`](Self::poll_timeout).
pub trait Party {
    /// Its MAC address.
    fn mac(&self) -> Mac;
    /// Traffic for `peer` is waiting: get a session if there is none. With `rekey`, start a new
    /// one even if a session is up (when the host's rules allow a rekey now).
    fn want(&mut self, now: Instant, peer: Mac, rekey: bool);
    /// Seals one data frame to `peer` under the current session; `false` if there is none (the
    /// host then wants one, as [`want`](Self::want)).
    fn send_data(&mut self, now: Instant, peer: Mac) -> bool;
    /// A frame for this host arrived.
    fn handle_frame(&mut self, now: Instant, frame: &Frame);
    /// Time passed.
    fn handle_timeout(&mut self, now: Instant);
    /// When [`handle_timeout`](Self::handle_timeout) must be called next.
    fn poll_timeout(&self) -> Option<Instant>;
    /// The next frame to send.
    fn poll_transmit(&mut self) -> Option<Frame>;
    /// Its state, for the invariants.
    fn observe(&self) -> Observation;
}
