//! The host's settings: [`HostConfig`] (fixed at start), [`SessionSettings`], and one
//! [`PeerSpec`] per configured peer (its MACs, [`Keying`], [`Pin`], paths, normalization).

use alloc::string::String;
use alloc::vec::Vec;
use core::net::IpAddr;

use super::{KeySpec, Mac, NormSpec};
use crate::handshake::{self, KeyRingConfig, Tai64n};
use crate::time::Duration;

/// The host's settings fixed at start (a change needs a new host).
#[derive(Clone, Debug)]
pub struct HostConfig {
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
    /// The wall clock at [`Instant::ZERO`](crate::time::Instant::ZERO) (Request timestamps are this plus `now`).
    pub wall_origin: Tai64n,
    /// What happens to a broadcast or multicast frame too large to go under the group key
    /// (with this host's signature, 64 bytes, the group key's frames are the largest):
    /// `false`, the thesis' way, drops it (`tx_unsupported`; the caller sizes its MTU so none
    /// is); `true` sends it as a *group copy* to each peer under that peer's own key (its
    /// session, or its static key): sub-protocol 0x0006, [`GROUP_COPY_EXTRA`] bytes more than a
    /// unicast frame ([`tap_overhead`]).
    pub group_copies: bool,
    /// Membership by certificate (`[pki]`, docs/MEMBERSHIP.md): a host whose handshake carries
    /// a valid certificate becomes a peer with no [`PeerSpec`] of its own, and a unicast frame
    /// from the protected side to an unknown MAC starts a handshake with that MAC. Needs
    /// [`session`](Self::session) and an identity.
    pub pki: Option<super::Pki>,
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
    /// Liveness: a host that received from a peer and sent it nothing for this long sends a
    /// keepalive (WireGuard's passive keepalive, 10 s), so a peer that only sends keeps
    /// hearing from it.
    pub keepalive: Duration,
    /// Liveness: a session whose peer sent nothing for this long after this host sent it a
    /// frame goes down (WireGuard's 15 s "no reply" rule, plus the keepalive): its keys stop
    /// sealing, frames wait for the next session and a handshake starts. Default 25 s.
    pub dead_after: Duration,
    /// How a peer's two paths are used (`[session] paths`): failover (the default), both, or
    /// the thesis' path-2-for-SMKEX-only ([`PathMode`](super::PathMode)).
    pub paths: super::PathMode,
    /// A probe goes on a path that carried nothing from this host for this long (default
    /// [`PROBE_EVERY`](super::PROBE_EVERY), 25 ms).
    pub probe_every: Duration,
    /// A path on which nothing of the peer opened for this long is down (default
    /// [`DOWN_AFTER`](super::DOWN_AFTER), 100 ms).
    pub down_after: Duration,
}

impl SessionSettings {
    /// The default keepalive interval.
    pub const KEEPALIVE: Duration = Duration::from_secs(10);
    /// The default liveness bound.
    pub const DEAD_AFTER: Duration = Duration::from_secs(25);
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
    /// From the certificate its handshakes carry (`[pki]`): every Request and Accept it sends
    /// must carry a valid certificate naming its MAC and proving its key; `Some` once one did
    /// (its group frames are then checked against that key).
    Certified(Option<[u8; 32]>),
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
