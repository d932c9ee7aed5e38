//! The quick path: a tunnel endpoint for the common case, sessions with a few peers over one
//! or two paths, on top of [`host::Host`](crate::host::Host).
//!
//! A [`Tunnel`] is a [`Host`] whose caller duties are done in memory: it owns the RNG, answers
//! the host's sequence-number reservations, clock floors and first-use pins at once, and keeps
//! the informational events for [`Tunnel::poll_event`]. What is left to the caller is moving
//! bytes and time:
//!
//! 1. an Ethernet frame from the protected side: [`Tunnel::send`] seals it into `out` (or
//!    queues it while the peer's session is set up);
//! 2. a frame from an uplink: [`Tunnel::receive`] opens it in place and returns the inner
//!    frame to deliver, if it was one;
//! 3. after either, and at [`Tunnel::poll_timeout`] after [`Tunnel::handle_timeout`]: drain
//!    [`Tunnel::poll`] (handshake messages, keepalives, frames that waited for the session).
//!
//! ```
//! use psp_core::handshake::{PathId, rand_core::OsRng};
//! use psp_core::time::Instant;
//! use psp_core::tunnel::{Output, Tunnel, TunnelConfig};
//!
//! let (a_mac, b_mac) = ([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
//! let key = [7u8; 16]; // the group key (aes128-gcm), shared by every host of the LAN
//! let a_cfg = TunnelConfig::new(a_mac, [10, 0, 0, 1].into(), 24, key).peer(b_mac, [10, 0, 0, 2].into());
//! let b_cfg = TunnelConfig::new(b_mac, [10, 0, 0, 2].into(), 24, key).peer(a_mac, [10, 0, 0, 1].into());
//! let now = Instant::ZERO;
//! let mut a = Tunnel::new(now, a_cfg, OsRng)?;
//! let mut b = Tunnel::new(now, b_cfg, OsRng)?;
//! let hello = [&b_mac[..], &a_mac, &[0x88, 0xb5], b"hello"].concat(); // dst, src, type, data
//! let mut buf = [0u8; 2048];
//! assert!(a.send(now, &hello, &mut buf).is_none()); // waits for a session
//! // Carry frames from a to b, swap, and again, until two turns in a row moved nothing.
//! let (mut got, mut idle) = (Vec::new(), 0);
//! while idle < 2 {
//!     idle += 1;
//!     while let Some(Output::Send { path, len }) = a.poll(now, &mut buf) {
//!         got.extend(b.receive(now, path, &mut buf[..len]).map(<[u8]>::to_vec));
//!         idle = 0;
//!     }
//!     std::mem::swap(&mut a, &mut b);
//! }
//! assert_eq!(got, [hello]);
//! # Ok::<(), psp_core::host::SpecError>(())
//! ```
//!
//! What it does not do: persist anything. A restart of one side is therefore what a lost state
//! directory is to `psp-gateway`: the restarted tunnel's group key starts its sequence numbers
//! at a fresh random point, and if that is below what a peer that kept running saw, the peer
//! refuses its handshake messages as too old (counted, `drops` "too_old") until the peer
//! restarts too (about half of the time; tested). A pair that restarts together gets a new
//! session at once. Nothing is ever delivered twice or under a lost session. A program that
//! must survive a restart of one side the way `psp-gateway` does (reservations and replay floors
//! on disk) drives [`Host`] itself and persists what its [`HostEvent`]s name. No normalization, static keys,
//! certificates or group copies either: [`TunnelConfig::host_config`] gives the [`Host`]
//! settings to start from.

use alloc::collections::VecDeque;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use core::net::IpAddr;

use rand_core::CryptoRngCore;
use zeroize::Zeroizing;

use crate::crypto::SuiteId;
use crate::handshake::{self, Identity, KeyRingConfig, PathId, Tai64n};
use crate::host::{
    Claim, Host, HostConfig, HostEvent, KeySpec, Keying, PeerSpec, Pin, Received, Resume,
    SessionSettings, SpecError, TapJob, TapResult,
};
use crate::protect::{OpenerConfig, Sealer, SealerConfig};
use crate::time::{Duration, Instant};
use crate::wire::Seq;

/// How many sequence numbers one in-memory reservation grants (the host asks again as a block
/// runs out).
const BLOCK: u32 = 1 << 20;

/// The system's wall clock (`std`), or the Unix epoch.
fn system_clock() -> Tai64n {
    #[cfg(feature = "std")]
    {
        let since = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        Tai64n::from_unix(since.as_secs(), since.subsec_nanos())
    }
    #[cfg(not(feature = "std"))]
    Tai64n::from_unix(0, 0)
}

/// One peer of a [`TunnelConfig`].
#[derive(Clone, Debug)]
struct PeerEntry {
    mac: [u8; 6],
    address: IpAddr,
    /// Its Ed25519 identity public key, if pinned.
    identity: Option<[u8; 32]>,
}

/// What a [`Tunnel`] needs: this host's MAC and address, the group key, its peers, and
/// optionally its identity and a second path.
#[derive(Clone)]
pub struct TunnelConfig {
    mac: [u8; 6],
    address: (IpAddr, u8),
    group_key: Zeroizing<[u8; 16]>,
    identity: Option<Zeroizing<[u8; 32]>>,
    peers: Vec<PeerEntry>,
    paths: u8,
    wall_clock: Tai64n,
}

impl core::fmt::Debug for TunnelConfig {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("TunnelConfig")
            .field("mac", &self.mac)
            .field("address", &self.address)
            .field("peers", &self.peers)
            .field("paths", &self.paths)
            .finish_non_exhaustive()
    }
}

impl TunnelConfig {
    /// A host with protected MAC `mac` and address `address/prefix_len`, and the LAN's group key
    /// (aes128-gcm: handshakes and broadcasts are sealed under it). One path, no identity,
    /// no peers yet.
    ///
    /// The wall clock at [`Instant::ZERO`] (see [`wall_clock`](Self::wall_clock)) is read from
    /// the system here with the `std` feature: the one clock read in psp-core, because a
    /// default that stayed the same across restarts would make a restarted host's Requests
    /// look replayed to peers that still run. Without `std` it is the Unix epoch until
    /// [`wall_clock`](Self::wall_clock) sets it, which a restartable program must do.
    pub fn new(mac: [u8; 6], address: IpAddr, prefix_len: u8, group_key: [u8; 16]) -> Self {
        Self {
            mac,
            address: (address, prefix_len),
            group_key: Zeroizing::new(group_key),
            identity: None,
            peers: Vec::new(),
            paths: 1,
            wall_clock: system_clock(),
        }
    }

    /// A peer, with sessions, whose identity is not checked: any holder of the group key can
    /// act as it. Use [`pinned_peer`](Self::pinned_peer) where that matters.
    #[must_use]
    pub fn peer(mut self, mac: [u8; 6], address: IpAddr) -> Self {
        self.peers.push(PeerEntry {
            mac,
            address,
            identity: None,
        });
        self
    }

    /// A peer whose handshakes and group frames must prove the Ed25519 identity `identity_public`
    /// (what [`Identity::public_key`] returns and `psp-gateway identity` prints; not the
    /// X25519 form). Needs [`identity`](Self::identity) on both sides.
    #[must_use]
    pub fn pinned_peer(mut self, mac: [u8; 6], address: IpAddr, identity_public: [u8; 32]) -> Self {
        self.peers.push(PeerEntry {
            mac,
            address,
            identity: Some(identity_public),
        });
        self
    }

    /// This host's identity ([`Identity::generate`], or [`Identity::from_seed`] with an
    /// `identity_file`'s secret): its handshakes then prove it and its group frames are signed.
    /// Its peers pin [`Identity::public_key`].
    #[must_use]
    pub fn identity(mut self, identity: &Identity) -> Self {
        self.identity = Some(Zeroizing::new(*identity.seed()));
        self
    }

    /// Two paths to every peer: SMKEX runs over both (docs/SESSIONS.md); data goes on the
    /// first.
    #[must_use]
    pub fn two_paths(mut self) -> Self {
        self.paths = 2;
        self
    }

    /// The wall clock (Unix seconds) at [`Instant::ZERO`]: a Request carries it plus `now`, and
    /// a peer refuses a Request no newer than the last it took from this host (a replay).
    #[must_use]
    pub fn wall_clock(mut self, unix_secs: u64) -> Self {
        self.wall_clock = Tai64n::from_unix(unix_secs, 0);
        self
    }

    /// The [`Host`] settings, group key, signer and peers this describes.
    ///
    /// # Errors
    /// None in practice: an identity is checked when it is made (reported as the `self` peer).
    #[allow(clippy::type_complexity)]
    pub fn host_config(
        &self,
    ) -> Result<
        (
            HostConfig,
            KeySpec,
            Option<crate::crypto::SigningKey>,
            Vec<PeerSpec>,
        ),
        SpecError,
    > {
        let bad = |problem| SpecError {
            peer: String::from("self"),
            problem,
        };
        let identity = match &self.identity {
            Some(seed) => Some(Identity::from_seed(**seed).map_err(|_| bad("bad identity seed"))?),
            None => None,
        };
        let (addr, prefix) = self.address;
        let mut hs = handshake::Config::new(self.mac, addr, prefix);
        hs.static_key = identity.as_ref().map(Identity::static_key);
        let cfg = HostConfig {
            mac: self.mac,
            subnets: vec![self.address],
            paths: self.paths,
            max_frame: 1514,
            session: Some(SessionSettings {
                handshake: hs,
                address: self.address,
                rekey_after: Duration::from_secs(120),
                ring: KeyRingConfig::default(),
                queue: 64,
                keepalive: SessionSettings::KEEPALIVE,
                dead_after: SessionSettings::DEAD_AFTER,
                paths: crate::host::PathMode::default(),
                probe_every: crate::host::PROBE_EVERY,
                down_after: crate::host::DOWN_AFTER,
            }),
            wall_origin: self.wall_clock,
            group_copies: false,
            pki: None,
        };
        let group = KeySpec {
            suite: SuiteId::Aes128Gcm,
            key: Zeroizing::new(self.group_key.to_vec()),
            sealer: SealerConfig::new(),
            opener: OpenerConfig::new(),
        };
        let signer = match &identity {
            Some(id) => Some(id.signing_key().map_err(|_| bad("bad identity seed"))?),
            None => None,
        };
        let peers = self
            .peers
            .iter()
            .map(|p| PeerSpec {
                name: alloc::format!(
                    "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
                    p.mac[0],
                    p.mac[1],
                    p.mac[2],
                    p.mac[3],
                    p.mac[4],
                    p.mac[5]
                ),
                macs: vec![p.mac],
                keying: Keying::Session {
                    pin: p.identity.map_or(Pin::None, Pin::Configured),
                    address: Some(p.address),
                },
                paths: self.paths,
                normalize: None,
            })
            .collect();
        Ok((cfg, group, signer, peers))
    }
}

/// What [`Tunnel::poll`] put in the caller's buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub enum Output {
    /// A PSP frame of `len` bytes to send on uplink `path`.
    Send {
        /// The uplink.
        path: PathId,
        /// Its length.
        len: usize,
    },
    /// An inner frame of `len` bytes for the protected side.
    Deliver {
        /// Its length.
        len: usize,
    },
}

/// A frame [`Tunnel::send`] sealed into the caller's buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub struct Sealed {
    /// The uplink to send it on.
    pub path: PathId,
    /// Its length.
    pub len: usize,
}

/// A tunnel endpoint (see the module docs).
#[derive(Debug)]
pub struct Tunnel<R> {
    host: Host,
    rng: R,
    events: VecDeque<HostEvent>,
}

impl<R: CryptoRngCore> Tunnel<R> {
    /// A tunnel as `cfg` says, drawing randomness from `rng` (e.g.
    /// [`OsRng`](crate::handshake::rand_core::OsRng) with the `std` feature).
    ///
    /// # Errors
    /// A setting the core refuses, named by peer.
    pub fn new(now: Instant, cfg: TunnelConfig, rng: R) -> Result<Self, SpecError> {
        let (config, group, signer, peers) = cfg.host_config()?;
        let host = Host::new(now, config, group, signer, peers, Resume::default())?;
        let mut t = Self {
            host,
            rng,
            events: VecDeque::new(),
        };
        t.duties(now);
        Ok(t)
    }

    /// An Ethernet frame from the protected side (destination MAC, source MAC = this host's,
    /// EtherType, payload): sealed into `out`, with the uplink to send it on, or `None` if it
    /// waits for the peer's session (it comes out of [`poll`](Self::poll) once the session is
    /// up) or was dropped (the reason is counted in [`host`](Self::host)'s counters).
    pub fn send(&mut self, now: Instant, frame: &[u8], out: &mut [u8]) -> Option<Sealed> {
        let mut jobs = [TapJob::new(frame, out)];
        self.host.handle_tap(now, &mut jobs, &mut self.rng);
        self.duties(now);
        match jobs[0].result {
            TapResult::Sealed { len, path, .. } => Some(Sealed { path, len }),
            _ => None,
        }
    }

    /// A frame from uplink `path`, opened in place: the inner Ethernet frame if it carried one
    /// for the protected side; `None` if it was a handshake or control message (drain
    /// [`poll`](Self::poll): it may have answers) or was dropped (counted).
    pub fn receive<'b>(
        &mut self,
        now: Instant,
        path: PathId,
        frame: &'b mut [u8],
    ) -> Option<&'b [u8]> {
        let r = self.host.handle_uplink(now, path, frame, &mut self.rng);
        self.duties(now);
        match r {
            Received::Deliver { range, .. } => Some(&frame[range]),
            _ => None,
        }
    }

    /// When [`handle_timeout`](Self::handle_timeout) is due (retransmissions, rekeys,
    /// keepalives, liveness).
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.host.poll_timeout()
    }

    /// Runs what is due at `now`; then drain [`poll`](Self::poll).
    pub fn handle_timeout(&mut self, now: Instant) {
        self.host.handle_timeout(now, &mut self.rng);
        self.duties(now);
    }

    /// The next frame to send or deliver, written into `buf` (2,048 bytes are always enough);
    /// `None` when there is nothing more.
    pub fn poll(&mut self, now: Instant, buf: &mut [u8]) -> Option<Output> {
        self.duties(now);
        if let Some(t) = self.host.poll_transmit(now, buf, &mut self.rng) {
            return Some(Output::Send {
                path: t.path,
                len: t.len,
            });
        }
        let (_, len) = self.host.poll_delivery(now, buf, &mut self.rng)?;
        Some(Output::Deliver { len })
    }

    /// What happened that a program may log: sessions up and down, handshakes started and
    /// failed, unknown sources.
    pub fn poll_event(&mut self) -> Option<HostEvent> {
        self.events.pop_front()
    }

    /// The host inside, for its counters and session status.
    pub fn host(&self) -> &Host {
        &self.host
    }

    /// Answers the host's requests for durable state in memory; keeps the rest for
    /// [`poll_event`](Self::poll_event) (at most 64; the oldest go first).
    fn duties(&mut self, now: Instant) {
        while let Some(e) = self.host.poll_event() {
            match e {
                HostEvent::Reserve { key, next, .. } => {
                    let from = next.unwrap_or_else(|| {
                        let mut r = [0u8; 4];
                        self.rng.fill_bytes(&mut r);
                        Sealer::random_initial_seq(r)
                    });
                    let limit = Seq(from.0.saturating_add(BLOCK));
                    self.host.handle_reserved(key, Claim { from, limit });
                }
                HostEvent::ClockFloor(floor) => self.host.handle_clock_floor_saved(floor, true),
                HostEvent::PinLearned { peer, .. } => {
                    self.host.handle_pin_saved(now, peer, true, &mut self.rng);
                }
                HostEvent::ReplayFloors(_) => {}
                other => {
                    if self.events.len() == 64 {
                        self.events.pop_front();
                    }
                    self.events.push_back(other);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use alloc::vec::Vec;

    use super::*;
    use crate::handshake::rand_core::{CryptoRng, RngCore};

    /// A deterministic RNG (xorshift): tests need no OS randomness.
    struct Xs(u64);

    impl RngCore for Xs {
        fn next_u32(&mut self) -> u32 {
            self.next_u64() as u32
        }
        fn next_u64(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn fill_bytes(&mut self, dest: &mut [u8]) {
            for b in dest {
                *b = self.next_u64() as u8;
            }
        }
        fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand_core::Error> {
            self.fill_bytes(dest);
            Ok(())
        }
    }

    impl CryptoRng for Xs {}

    const MAC: [[u8; 6]; 2] = [[2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]];

    fn ids() -> [Identity; 2] {
        let mut rng = Xs(7);
        [(); 2].map(|()| Identity::random(&mut rng).unwrap())
    }

    /// Host `me` (0 or 1) with two paths and a pinned peer, its wall clock at `wall`.
    fn tunnel(me: usize, ids: &[Identity; 2], wall: u64, seed: u64) -> Tunnel<Xs> {
        let ip = |n: usize| IpAddr::from([10, 0, 0, n as u8 + 1]);
        let cfg = TunnelConfig::new(MAC[me], ip(me), 24, [9; 16])
            .identity(&ids[me])
            .two_paths()
            .wall_clock(wall)
            .pinned_peer(MAC[1 - me], ip(1 - me), ids[1 - me].public_key());
        Tunnel::new(Instant::ZERO, cfg, Xs(seed)).unwrap()
    }

    fn frame(from: usize, data: &[u8]) -> Vec<u8> {
        [&MAC[1 - from][..], &MAC[from], &[0x88, 0xb5], data].concat()
    }

    /// Carries frames both ways until neither side sends; what each side delivered.
    fn settle(now: Instant, t: &mut [Tunnel<Xs>; 2]) -> [Vec<Vec<u8>>; 2] {
        let mut got = [Vec::new(), Vec::new()];
        let mut buf = [0u8; 2048];
        loop {
            let mut moved = false;
            for me in 0..2 {
                while let Some(Output::Send { path, len }) = t[me].poll(now, &mut buf) {
                    let (a, b) = t.split_at_mut(1);
                    let to = if me == 0 { &mut b[0] } else { &mut a[0] };
                    if let Some(f) = to.receive(now, path, &mut buf[..len]) {
                        got[1 - me].push(f.to_vec());
                    }
                    moved = true;
                }
            }
            if !moved {
                return got;
            }
        }
    }

    /// Sends `data` from `from`, carrying the sealed frame if `send` sealed it at once.
    fn send(now: Instant, t: &mut [Tunnel<Xs>; 2], from: usize, data: &[u8]) -> [Vec<Vec<u8>>; 2] {
        let mut buf = [0u8; 2048];
        let sealed = t[from].send(now, &frame(from, data), &mut buf);
        let mut got = [Vec::new(), Vec::new()];
        if let Some(Sealed { path, len }) = sealed
            && let Some(f) = t[1 - from].receive(now, path, &mut buf[..len])
        {
            got[1 - from].push(f.to_vec());
        }
        let more = settle(now, t);
        for i in 0..2 {
            got[i].extend(more[i].iter().cloned());
        }
        got
    }

    #[test]
    fn a_session_carries_frames_both_ways_on_two_paths() {
        let ids = ids();
        let mut t = [
            tunnel(0, &ids, 1_800_000_000, 1),
            tunnel(1, &ids, 1_800_000_000, 2),
        ];
        let now = Instant::from_secs(1);
        assert_eq!(send(now, &mut t, 0, b"ping")[1], [frame(0, b"ping")]);
        assert_eq!(send(now, &mut t, 1, b"pong")[0], [frame(1, b"pong")]);
        let up = core::iter::from_fn(|| t[0].poll_event())
            .filter(|e| matches!(e, HostEvent::SessionUp { .. }))
            .count();
        assert_eq!(up, 1);
        // SMKEX ran over both paths: the second path carried the nonces.
        let hs = t[0].host().counters();
        assert_eq!(hs.unknown_peer, 0);
    }

    #[test]
    fn a_pair_that_restarts_gets_a_new_session() {
        let ids = ids();
        let mut t = [
            tunnel(0, &ids, 1_800_000_000, 1),
            tunnel(1, &ids, 1_800_000_000, 2),
        ];
        let now = Instant::from_secs(1);
        assert_eq!(send(now, &mut t, 0, b"before")[1], [frame(0, b"before")]);
        // Both restart: new Tunnels, nothing kept, wall clocks later, monotonic clocks at 0.
        t = [
            tunnel(0, &ids, 1_800_000_060, 3),
            tunnel(1, &ids, 1_800_000_060, 4),
        ];
        assert_eq!(send(now, &mut t, 1, b"after")[0], [frame(1, b"after")]);
        assert_eq!(send(now, &mut t, 0, b"back")[1], [frame(0, b"back")]);
    }

    /// The documented limit: one side restarting is a lost state directory. Its group
    /// sealer starts at a fresh random number; if that is below what the survivor saw, the
    /// survivor refuses its handshake messages as too old (counted) until the survivor
    /// restarts too. Either way nothing panics or is delivered twice, and the survivor's
    /// frames are dropped and counted, never delivered under a lost session.
    #[test]
    fn one_side_restarting_alone_is_a_lost_state_directory() {
        let ids = ids();
        let mut outcomes = [0usize; 2];
        for seed in 10..30 {
            let mut t = [
                tunnel(0, &ids, 1_800_000_000, 1),
                tunnel(1, &ids, 1_800_000_000, 2),
            ];
            let now = Instant::from_secs(1);
            assert_eq!(send(now, &mut t, 0, b"before")[1], [frame(0, b"before")]);
            t[1] = tunnel(1, &ids, 1_800_000_060, seed);
            let got = [send(now, &mut t, 0, b"a"), send(now, &mut t, 0, b"b")];
            let delivered: Vec<_> = got.iter().flat_map(|g| g[1].iter()).collect();
            assert!(
                delivered
                    .iter()
                    .all(|f| **f == frame(0, b"a") || **f == frame(0, b"b"))
            );
            let too_old = t[0]
                .host()
                .peer_counters(crate::host::PeerId(0))
                .unwrap()
                .drops[10];
            outcomes[usize::from(delivered.contains(&&frame(0, b"b")))] += 1;
            if !delivered.contains(&&frame(0, b"b")) {
                assert!(too_old > 0, "seed {seed}: refused, and counted as too old");
            }
        }
        assert!(outcomes[1] > 0, "{outcomes:?}: some restarts get through");
    }

    #[test]
    fn hostile_frames_are_dropped_and_counted_not_delivered() {
        let ids = ids();
        let mut t = [
            tunnel(0, &ids, 1_800_000_000, 1),
            tunnel(1, &ids, 1_800_000_000, 2),
        ];
        let now = Instant::from_secs(1);
        let _ = send(now, &mut t, 0, b"up");
        let mut rng = Xs(99);
        for len in [0usize, 5, 14, 60, 200, 1514] {
            let mut junk = alloc::vec![0u8; len];
            rng.fill_bytes(&mut junk);
            if len >= 12 {
                junk[..6].copy_from_slice(&MAC[1]);
                junk[6..12].copy_from_slice(&MAC[0]);
            }
            assert_eq!(t[1].receive(now, PathId::FIRST, &mut junk), None);
        }
        let c = t[1].host().counters();
        let p = t[1].host().peer_counters(crate::host::PeerId(0)).unwrap();
        let drops: u64 = c.malformed + c.not_for_us + p.drops.iter().sum::<u64>() + p.unknown_key;
        assert_eq!(drops, 6, "{c:?} {p:?}");
        // The session still works.
        assert_eq!(send(now, &mut t, 0, b"still")[1], [frame(0, b"still")]);
    }
}
