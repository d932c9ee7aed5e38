//! One simulated gateway ([`Node`]): a real [`Host`] driven as psp-gateway's driver drives it,
//! with a state directory ([`Disk`]), a clock that starts at zero at every boot, a wall clock
//! that may be a day off, and its own random generator. [`Roster`] writes every host's
//! configuration (the N² `[[peer]]` blocks), as an operator would.

use core::net::{IpAddr, Ipv4Addr};
use std::collections::BTreeMap;

use psp_core::crypto::SigningKey;
use psp_core::handshake::rand_core::RngCore;
use psp_core::handshake::{self, Identity, KemMode, KeyRingConfig, SmkexMode, Tai64n};
use psp_core::host::{
    self, Claim, Host, HostEvent, KeySpec, Keying, Mac, NormSpec, PeerId, PeerSpec, Pin, Received,
    ReplayFloor, Resume, SessionSettings, TapJob, TapResult,
};
use psp_core::pki::{CertFields, Certificate, Kind, RevocationList};
use psp_core::protect::{OpenerConfig, Sealer, SealerConfig};
use psp_core::time::{Duration, Instant};
use psp_core::{SuiteId, wire::Seq};
use zeroize::Zeroizing;

use super::SimRng;
use super::scenario::{Ids, Kem, KeyingMix, Scenario, Smkex};

/// The wall clock (Unix seconds) at the simulation's start.
pub(crate) const WALL0: u64 = 1_800_000_000;
/// The largest frame an uplink carries.
pub(crate) const MAX_FRAME: usize = 1514;
/// Sequence numbers one reservation covers (as psp-gateway's state directory: group key,
/// `key_file` keys).
const GROUP_BLOCK: u32 = 1 << 16;
const UNICAST_BLOCK: u32 = 1 << 20;

/// How two hosts protect their unicast frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PairKind {
    Session,
    Static,
    Group,
}

/// Every host's configuration, as the operator writes it.
#[derive(Clone, Debug)]
pub(crate) struct Roster {
    pub(crate) scen: Scenario,
    /// Each host's identity generation (a rotation makes the next).
    pub(crate) id_gen: Vec<u8>,
    /// `known[i][j]`: the identity generation of host `j` that host `i`'s configuration names.
    pub(crate) known: Vec<Vec<u8>>,
    /// Hosts removed from every other host's configuration.
    pub(crate) retired: Vec<bool>,
    /// `alt[i][j]`: host `i`'s peer `j` has its changed settings (a reload with a change).
    pub(crate) alt: Vec<Vec<bool>>,
    /// Identities' public keys computed so far, by (host, generation).
    keys: core::cell::RefCell<BTreeMap<(u8, u8), [u8; 32]>>,
}

impl Roster {
    pub(crate) fn new(scen: Scenario) -> Self {
        let n = usize::from(scen.hosts);
        Self {
            scen,
            id_gen: vec![0; n],
            known: vec![vec![0; n]; n],
            retired: vec![false; n],
            alt: vec![vec![false; n]; n],
            keys: core::cell::RefCell::default(),
        }
    }

    /// Host `i`'s identity's public key of generation `generation` (computed once).
    pub(crate) fn public_key(&self, i: u8, generation: u8) -> [u8; 32] {
        *self
            .keys
            .borrow_mut()
            .entry((i, generation))
            .or_insert_with(|| Self::identity(i, generation).public_key())
    }

    pub(crate) fn hosts(&self) -> u8 {
        self.scen.hosts
    }

    pub(crate) fn mac(i: u8) -> Mac {
        [2, 0x50, 0x53, 0, 0, i + 1]
    }

    pub(crate) fn ip(i: u8) -> Ipv4Addr {
        Ipv4Addr::new(10, 77, 0, i + 1)
    }

    /// The host whose MAC is `mac`.
    pub(crate) fn host_of(&self, mac: &Mac) -> Option<u8> {
        (0..self.hosts()).find(|i| Self::mac(*i) == *mac)
    }

    /// Host `i`'s identity of generation `gen`.
    pub(crate) fn identity(i: u8, generation: u8) -> Identity {
        let mut k = i
            .wrapping_mul(37)
            .wrapping_add(generation.wrapping_mul(101))
            | 1;
        Identity::generate(|seed| {
            seed.fill(k);
            seed[0] = i;
            seed[1] = generation;
            k = k.wrapping_add(100);
        })
        .expect("a seed with sign 0 within 64 draws")
    }

    pub(crate) fn pair(&self, i: u8, j: u8) -> PairKind {
        let (a, b) = (i.min(j), i.max(j));
        match (self.scen.keying, a, b) {
            (KeyingMix::Mixed, 0, 1) => PairKind::Static,
            (KeyingMix::Mixed, 0, 2) => PairKind::Group,
            _ => PairKind::Session,
        }
    }

    pub(crate) fn group_key() -> KeySpec {
        KeySpec {
            suite: SuiteId::Aes128Gcm,
            key: Zeroizing::new(vec![0x42; 16]),
            sealer: SealerConfig::new(),
            opener: OpenerConfig::new().with_max_frame_len(MAX_FRAME),
        }
    }

    pub(crate) fn static_key(i: u8, j: u8) -> KeySpec {
        let (a, b) = (i.min(j), i.max(j));
        KeySpec {
            suite: SuiteId::Aes128Gcm,
            key: Zeroizing::new(vec![0x10 + a * 16 + b; 16]),
            sealer: SealerConfig::new(),
            opener: OpenerConfig::new().with_max_frame_len(MAX_FRAME),
        }
    }

    /// Host `i`'s `kem` mode.
    pub(crate) fn kem(&self, i: u8) -> Kem {
        self.scen.kem[usize::from(i)]
    }

    /// Whether `i` and `j` run sessions that their `kem` modes forbid (one requires the KEM,
    /// the other has it off): every handshake between them fails `kem_required`.
    pub(crate) fn kem_apart(&self, i: u8, j: u8) -> bool {
        self.pair(i, j) == PairKind::Session && Kem::session(self.kem(i), self.kem(j)).is_none()
    }

    /// Whether `i` and `j` normalize their traffic to each other.
    pub(crate) fn normalized(&self, i: u8, j: u8) -> bool {
        self.scen.normalize && i.min(j) == 0 && i.max(j) == 1
    }

    fn norm_spec(&self, i: u8, j: u8) -> NormSpec {
        let mut cfg = psp_core::normalize::NormConfig::default();
        let kbps = if self.alt[usize::from(i)][usize::from(j)] {
            160
        } else {
            240
        };
        cfg.s_goal = psp_core::normalize::Rate::from_kbps(kbps);
        cfg.s_min = psp_core::normalize::Rate::from_kbps(40);
        cfg.s_step = psp_core::normalize::Rate::from_kbps(40);
        cfg.max_inner_len = 1518;
        NormSpec {
            cfg,
            frame_size: 600,
            wire_extra: 0,
            lead: Duration::from_millis(2),
        }
    }

    /// Host `i`'s settings, its wall clock at its clock's zero being `wall`.
    pub(crate) fn config(&self, i: u8, wall: Tai64n) -> host::HostConfig {
        let s = &self.scen;
        let ip = IpAddr::V4(Self::ip(i));
        let mut hs = handshake::Config::new(Self::mac(i), ip, 24);
        hs.smkex = match s.smkex {
            Smkex::Off => SmkexMode::Off,
            Smkex::Prefer => SmkexMode::Preferred,
            Smkex::Require => SmkexMode::Required,
        };
        hs.kem = match s.kem[usize::from(i)] {
            Kem::Off => KemMode::Off,
            Kem::Prefer => KemMode::Preferred,
            Kem::Require => KemMode::Required,
        };
        hs.lifetime = Duration::from_secs(u64::from(s.lifetime_s));
        hs.min_lifetime = Duration::from_secs(60).min(hs.lifetime);
        hs.static_key = (s.ids != Ids::None)
            .then(|| Self::identity(i, self.id_gen[usize::from(i)]).static_key());
        let lifetime = hs.lifetime;
        host::HostConfig {
            mac: Self::mac(i),
            subnets: vec![(ip, 24)],
            paths: 2,
            max_frame: MAX_FRAME,
            session: Some(SessionSettings {
                handshake: hs,
                address: (ip, 24),
                rekey_after: Duration::from_secs(u64::from(s.rekey_after_s)),
                ring: KeyRingConfig {
                    rekey_margin: Duration::from_micros(
                        (lifetime.total_micros() / 4).min(60_000_000),
                    ),
                    ..KeyRingConfig::default()
                },
                queue: 64,
                keepalive: SessionSettings::KEEPALIVE,
                dead_after: SessionSettings::DEAD_AFTER,
                paths: if s.both {
                    host::PathMode::Both
                } else {
                    host::PathMode::Failover
                },
                // Slower than the defaults (25 ms, 100 ms): the simulator checks what happens, not
                // how fast, and every probe is an event.
                probe_every: Duration::from_millis(100),
                down_after: Duration::from_millis(400),
            }),
            wall_origin: wall,
            group_copies: s.group_copies,
            pki: s.pki.then(|| host::Pki {
                ca: Self::ca().public_key(),
                certificate: self.cert(i),
                revoked: RevocationList::empty(),
                skew_secs: host::Pki::SKEW_SECS,
                max_certified: 16,
                rotate_every: Duration::from_secs(30),
            }),
        }
    }

    /// The simulation's network CA.
    pub(crate) fn ca() -> SigningKey {
        SigningKey::from_seed(&[0xca; 32]).expect("a valid seed")
    }

    /// Host `i`'s certificate for its current identity (serial: host and generation), valid
    /// a year either side of the start (clock jumps of a day or a few stay inside it: a host whose
    /// clock leaves a certificate's window refuses it, by design).
    pub(crate) fn cert(&self, i: u8) -> Certificate {
        let generation = self.id_gen[usize::from(i)];
        Self::cert_for(i, generation, self.public_key(i, generation), &Self::ca())
    }

    /// A certificate for host `i`'s MAC and address with `key`, signed by `ca`.
    pub(crate) fn cert_for(i: u8, generation: u8, key: [u8; 32], ca: &SigningKey) -> Certificate {
        let mut f = CertFields::new(
            Kind::Host,
            Self::serial(i, generation),
            key,
            &format!("h{i}"),
        );
        f.not_before = WALL0 - 365 * 86_400;
        f.not_after = WALL0 + 365 * 86_400;
        f.push_mac(Self::mac(i));
        f.push_addr(IpAddr::V4(Self::ip(i)), 24);
        Certificate::sign(&f, ca).expect("valid fields")
    }

    /// The serial of host `i`'s certificate of identity generation `generation`.
    pub(crate) fn serial(i: u8, generation: u8) -> u64 {
        u64::from(i) * 1000 + u64::from(generation) + 1
    }

    /// Host `i`'s signing key, if hosts have identities.
    pub(crate) fn signer(&self, i: u8) -> Option<SigningKey> {
        (self.scen.ids != Ids::None)
            .then(|| {
                Self::identity(i, self.id_gen[usize::from(i)])
                    .signing_key()
                    .ok()
            })
            .flatten()
    }

    /// Host `i`'s peers (with first-use pins from `pins`), and each peer's host.
    pub(crate) fn peers(
        &self,
        i: u8,
        pins: &BTreeMap<String, [u8; 32]>,
    ) -> (Vec<PeerSpec>, Vec<u8>) {
        let mut specs = Vec::new();
        let mut hosts = Vec::new();
        if self.scen.pki {
            // Certificates, not configuration, make the peers.
            return (specs, hosts);
        }
        if self.retired[usize::from(i)] {
            // A retired host keeps the configuration it had: every other host.
            return self.peers_of(i, pins, |_| true);
        }
        for j in 0..self.hosts() {
            if j == i || self.retired[usize::from(j)] {
                continue;
            }
            let (mut s, mut h) = self.peers_of(i, pins, |k| k == j);
            specs.append(&mut s);
            hosts.append(&mut h);
        }
        (specs, hosts)
    }

    fn peers_of(
        &self,
        i: u8,
        pins: &BTreeMap<String, [u8; 32]>,
        which: impl Fn(u8) -> bool,
    ) -> (Vec<PeerSpec>, Vec<u8>) {
        let mut specs = Vec::new();
        let mut hosts = Vec::new();
        for j in (0..self.hosts()).filter(|j| *j != i && which(*j)) {
            let name = format!("h{j}");
            let alt = self.alt[usize::from(i)][usize::from(j)];
            let keying = match self.pair(i, j) {
                PairKind::Static => Keying::Static(Self::static_key(i, j)),
                PairKind::Group => Keying::Group,
                PairKind::Session => {
                    let known = self.public_key(j, self.known[usize::from(i)][usize::from(j)]);
                    let pin = match self.scen.ids {
                        Ids::None => Pin::None,
                        Ids::Configured => Pin::Configured(known),
                        Ids::Tofu => Pin::Tofu(pins.get(&name).copied()),
                    };
                    // A changed peer (without normalization): its address is learnt instead of
                    // configured.
                    let address =
                        (!alt || self.normalized(i, j)).then_some(IpAddr::V4(Self::ip(j)));
                    Keying::Session { pin, address }
                }
            };
            specs.push(PeerSpec {
                name,
                macs: vec![Self::mac(j)],
                keying,
                paths: 2,
                normalize: self.normalized(i, j).then(|| self.norm_spec(i, j)),
            });
            hosts.push(j);
        }
        (specs, hosts)
    }
}

/// A host's state directory: reservation marks, the Request clock's floor, first-use pins.
#[derive(Clone, Debug, Default)]
pub(crate) struct Disk {
    marks: BTreeMap<[u8; 16], u32>,
    floor: Option<Tai64n>,
    pub(crate) pins: BTreeMap<String, [u8; 32]>,
    floors: Vec<ReplayFloor>,
    /// The newest revocation list in force (`[pki]`, as psp-gateway keeps it).
    list: Option<Vec<u8>>,
}

/// What one call into a node produced.
#[derive(Debug, Default)]
pub(crate) struct Out {
    /// Sealed frames: path, bytes, and when they leave if not at once (a normalized departure,
    /// global time).
    pub(crate) sends: Vec<(u8, Vec<u8>, Option<Instant>)>,
    /// Inner frames delivered to the protected side, with the host they came from.
    pub(crate) delivered: Vec<(u8, Vec<u8>)>,
    /// The host crashed (an armed crash after a reservation).
    pub(crate) crashed: bool,
    /// The host's events.
    pub(crate) events: Vec<HostEvent>,
}

/// One simulated gateway.
pub(crate) struct Node {
    pub(crate) idx: u8,
    pub(crate) host: Option<Host>,
    pub(crate) boot_at: Instant,
    pub(crate) boots: u32,
    pub(crate) disk: Disk,
    /// Copies of the state directory, for a rollback.
    snapshots: Vec<(Instant, Disk)>,
    /// The wall clock's offset, seconds.
    pub(crate) skew_s: i64,
    /// Incremented whenever the state directory is lost or rolled back.
    pub(crate) epoch: u32,
    /// Crash right after the next reservation is written.
    pub(crate) crash_armed: bool,
    /// Each peer's host, in the host's peer order.
    pub(crate) peer_hosts: Vec<u8>,
    rng: SimRng,
    seed: u64,
    /// The same wake-up instant seen again and again (a timer that does not act).
    pub(crate) spin: (Instant, u32),
    /// When the replay floors were last written.
    floors_at: Instant,
    /// Crashes: (floors last written, crash): frames that opened in between may open again.
    pub(crate) gaps: Vec<(Instant, Instant)>,
}

impl Node {
    pub(crate) fn new(idx: u8, seed: u64) -> Self {
        Self {
            idx,
            host: None,
            boot_at: Instant::ZERO,
            boots: 0,
            disk: Disk::default(),
            snapshots: Vec::new(),
            skew_s: 0,
            epoch: 0,
            crash_armed: false,
            peer_hosts: Vec::new(),
            rng: SimRng::new(seed),
            seed,
            spin: (Instant::ZERO, 0),
            floors_at: Instant::ZERO,
            gaps: Vec::new(),
        }
    }

    /// The host's clock at global time `g`.
    pub(crate) fn local(&self, g: Instant) -> Instant {
        Instant::from_micros(g.total_micros().saturating_sub(self.boot_at.total_micros()))
    }

    fn global(&self, t: Instant) -> Instant {
        Instant::from_micros(self.boot_at.total_micros() + t.total_micros())
    }

    /// The peer id of host `h` in this host's configuration.
    pub(crate) fn peer_of(&self, h: u8) -> Option<PeerId> {
        self.peer_hosts.iter().position(|x| *x == h).map(PeerId)
    }

    /// Starts the host at global time `g` with `roster`'s configuration.
    pub(crate) fn boot(&mut self, g: Instant, roster: &Roster) -> Out {
        self.boots += 1;
        self.boot_at = g;
        self.rng = SimRng::new(super::mix(self.seed, u64::from(self.boots)));
        let secs = i64::try_from(WALL0 + g.total_micros() / 1_000_000).unwrap_or(0) + self.skew_s;
        let wall = Tai64n::from_unix(
            secs.max(0) as u64,
            (g.total_micros() % 1_000_000) as u32 * 1000,
        );
        let cfg = roster.config(self.idx, wall);
        let (specs, hosts) = roster.peers(self.idx, &self.disk.pins);
        self.peer_hosts = hosts;
        let host = Host::new(
            Instant::ZERO,
            cfg,
            Roster::group_key(),
            roster.signer(self.idx),
            specs,
            Resume {
                clock: self.disk.floor,
                floors: self.disk.floors.clone(),
            },
        )
        .expect("the roster's configuration is valid");
        self.host = Some(host);
        self.spin = (Instant::ZERO, 0);
        // As psp-gateway: the newest list the run before kept is in force again.
        if let (Some(h), Some(b)) = (self.host.as_mut(), self.disk.list.as_ref())
            && let Ok(l) = RevocationList::parse(b)
        {
            let _ = h.handle_revocation_list(Instant::ZERO, l, &mut self.rng);
        }
        let mut out = Out::default();
        self.after(g, &mut out);
        out
    }

    /// Hands host a revocation list (the operator: a file and SIGHUP; a host that is down
    /// finds the file at its start).
    pub(crate) fn revoke(&mut self, g: Instant, list: RevocationList) -> Out {
        let mut out = Out::default();
        let now = self.local(g);
        self.disk.list = Some(list.as_bytes().to_vec());
        if let Some(h) = self.host.as_mut() {
            let _ = h.handle_revocation_list(now, list, &mut self.rng);
        }
        self.after(g, &mut out);
        out
    }

    /// With `[pki]`, the peers come and go with certificates: each peer's host, from its MAC
    /// (`0xff`: a MAC no host has, the attacker's).
    fn refresh_peers(&mut self) {
        let Some(host) = self.host.as_ref() else {
            return;
        };
        if host.config().pki.is_some() {
            self.peer_hosts = host
                .peers()
                .map(|(_, s)| {
                    s.macs
                        .first()
                        .and_then(Roster::default_host_of)
                        .unwrap_or(0xff)
                })
                .collect();
        }
    }

    /// Stops the host at once: what it did not persist is gone (the replay floors since the
    /// last save among them).
    pub(crate) fn crash(&mut self, now: Instant) {
        if self.host.take().is_some() {
            self.gaps.push((self.floors_at, now));
        }
        self.crash_armed = false;
    }

    /// Stops the host cleanly: it writes its replay floors first.
    pub(crate) fn stop(&mut self, now: Instant) {
        if let Some(h) = self.host.take() {
            self.disk.floors = h.replay_floors();
            self.floors_at = now;
        }
        self.crash_armed = false;
    }

    /// The state directory's fate at a restart.
    pub(crate) fn lose_disk(&mut self, rollback: bool, now: Instant) {
        self.epoch += 1;
        if rollback {
            let old = self
                .snapshots
                .iter()
                .rev()
                .find(|(t, _)| now.saturating_since(*t) >= Duration::from_secs(10))
                .map(|(_, d)| d.clone())
                .unwrap_or_default();
            self.disk = old;
        } else {
            self.disk = Disk::default();
        }
    }

    /// Keeps a copy of the state directory (a backup) every ten seconds or so.
    pub(crate) fn snapshot(&mut self, now: Instant) {
        if self
            .snapshots
            .last()
            .is_none_or(|(t, _)| now.saturating_since(*t) >= Duration::from_secs(10))
        {
            self.snapshots.push((now, self.disk.clone()));
            if self.snapshots.len() > 8 {
                self.snapshots.remove(0);
            }
        }
    }

    /// A frame from the protected side.
    pub(crate) fn tap(&mut self, g: Instant, inner: &[u8]) -> Out {
        let mut out = Out::default();
        let now = self.local(g);
        let Some(host) = self.host.as_mut() else {
            return out;
        };
        let mut buf = vec![0u8; 2048];
        let mut jobs = [TapJob::new(inner, &mut buf)];
        host.handle_tap(now, &mut jobs, &mut self.rng);
        self.refresh_peers();
        if let TapResult::Sealed { len, path, .. } = jobs[0].result {
            out.sends.push((path.0, buf[..len].to_vec(), None));
        }
        self.after(g, &mut out);
        out
    }

    /// A frame from uplink `path`.
    pub(crate) fn uplink(&mut self, g: Instant, path: u8, frame: &[u8]) -> Out {
        let mut out = Out::default();
        let now = self.local(g);
        let Some(host) = self.host.as_mut() else {
            return out;
        };
        let mut f = frame.to_vec();
        let r = host.handle_uplink(now, handshake::PathId(path), &mut f, &mut self.rng);
        self.refresh_peers();
        if let Received::Deliver { peer, range, .. } = r
            && let Some(h) = self.peer_hosts.get(peer.0)
        {
            out.delivered.push((*h, f[range].to_vec()));
        }
        self.after(g, &mut out);
        out
    }

    /// When the host wants to be woken (global time), as the driver computes it.
    pub(crate) fn next_wake(&self) -> Option<Instant> {
        let host = self.host.as_ref()?;
        Some(self.global(host.poll_timeout()?))
    }

    /// The driver's wake-up at global time `g`.
    pub(crate) fn timeout(&mut self, g: Instant) -> Out {
        let mut out = Out::default();
        let now = self.local(g);
        if self.spin.0 == g {
            self.spin.1 += 1;
        } else {
            self.spin = (g, 1);
        }
        let Some(host) = self.host.as_mut() else {
            return out;
        };
        host.handle_timeout(now, &mut self.rng);
        self.after(g, &mut out);
        out
    }

    /// Reloads the host's configuration from `roster`.
    pub(crate) fn reload(&mut self, g: Instant, roster: &Roster) -> Out {
        let mut out = Out::default();
        let now = self.local(g);
        if self.retired_self(roster) {
            return out;
        }
        let (specs, hosts) = roster.peers(self.idx, &self.disk.pins);
        let Some(host) = self.host.as_mut() else {
            return out;
        };
        host.reconfigure(now, Roster::group_key(), specs)
            .expect("the roster's configuration is valid");
        self.peer_hosts = hosts;
        self.after(g, &mut out);
        out
    }

    fn retired_self(&self, roster: &Roster) -> bool {
        roster.retired[usize::from(self.idx)]
    }

    /// What the driver does after every input: events (persisted before anything is sent),
    /// then messages, departures and deliveries, until the host has nothing more.
    fn after(&mut self, g: Instant, out: &mut Out) {
        let now = self.local(g);
        let mut buf = vec![0u8; 2048];
        for _ in 0..64 {
            let Some(host) = self.host.as_mut() else {
                return;
            };
            let mut busy = false;
            while let Some(e) = host.poll_event() {
                busy = true;
                match &e {
                    HostEvent::Reserve { key, group, next } => {
                        let block = if *group { GROUP_BLOCK } else { UNICAST_BLOCK };
                        let mark = match self.disk.marks.get(&key.0) {
                            Some(m) => *m,
                            None => {
                                let mut r = [0u8; 4];
                                RngCore::fill_bytes(&mut self.rng, &mut r);
                                Sealer::random_initial_seq(r).0
                            }
                        };
                        let from = next.map_or(mark, |n| n.0);
                        let limit = mark.max(from).saturating_add(block);
                        self.disk.marks.insert(key.0, limit);
                        if self.crash_armed {
                            out.crashed = true;
                            out.events.push(e);
                            self.crash(g);
                            return;
                        }
                        host.handle_reserved(
                            *key,
                            Claim {
                                from: Seq(from),
                                limit: Seq(limit),
                            },
                        );
                    }
                    HostEvent::ReplayFloors(f) => {
                        self.disk.floors.clone_from(f);
                        self.floors_at = g;
                    }
                    HostEvent::ClockFloor(f) => {
                        self.disk.floor = Some(*f);
                        host.handle_clock_floor_saved(*f, true);
                    }
                    HostEvent::RevocationList { .. } => {
                        self.disk.list = Some(host.revocation_list().as_bytes().to_vec());
                    }
                    HostEvent::PinLearned { peer, key } => {
                        let name =
                            format!("h{}", self.peer_hosts.get(peer.0).copied().unwrap_or(0xff));
                        self.disk.pins.insert(name, *key);
                        host.handle_pin_saved(now, *peer, true, &mut self.rng);
                    }
                    _ => {}
                }
                out.events.push(e);
            }
            while let Some(t) = host.poll_transmit(now, &mut buf, &mut self.rng) {
                busy = true;
                let at = t.at.map(|at| {
                    Instant::from_micros(self.boot_at.total_micros() + at.total_micros())
                });
                out.sends.push((t.path.0, buf[..t.len].to_vec(), at));
            }
            while let Some((peer, len)) = host.poll_delivery(now, &mut buf, &mut self.rng) {
                busy = true;
                if let Some(h) = self.peer_hosts.get(peer.0) {
                    out.delivered.push((*h, buf[..len].to_vec()));
                }
            }
            if !busy {
                self.refresh_peers();
                return;
            }
        }
        self.refresh_peers();
    }
}
