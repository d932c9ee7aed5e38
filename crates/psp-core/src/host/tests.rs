//! Two hosts on an in-memory wire, on a virtual clock: sessions, rekeys, replays, forgeries,
//! pins, reservations and the group payload rule, end to end through `handle_*`/`poll_*`.

use alloc::collections::BTreeMap;
use alloc::vec;
use alloc::vec::Vec;
use core::net::{IpAddr, Ipv4Addr};

use zeroize::Zeroizing;

use super::*;
use crate::crypto::SigningKey;
use crate::handshake::{self, KeyRingConfig};
use crate::handshake::{Identity, KemMode, SmkexMode};
use crate::protect::{OpenerConfig, SealerConfig};
use crate::wire::Protocol;
use crate::wire::Seq;

mod api;
mod group_copies;
mod kem;
mod normalized;
mod paths;
mod pki;
mod policy;
mod restarts;
mod statics;

/// A deterministic RNG (SplitMix64) for tests only.
pub(super) struct TestRng(u64);

impl rand_core::RngCore for TestRng {
    fn next_u32(&mut self) -> u32 {
        self.next_u64() as u32
    }
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn fill_bytes(&mut self, dest: &mut [u8]) {
        for chunk in dest.chunks_mut(8) {
            let v = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand_core::Error> {
        self.fill_bytes(dest);
        Ok(())
    }
}

impl rand_core::CryptoRng for TestRng {}

pub(super) const MAC_A: Mac = [2, 0x50, 0x53, 0, 0, 1];
pub(super) const MAC_B: Mac = [2, 0x50, 0x53, 0, 0, 2];

pub(super) fn ip(n: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 77, 0, n))
}

pub(super) fn group_spec() -> KeySpec {
    KeySpec {
        suite: SuiteId::Aes128Gcm,
        key: Zeroizing::new(vec![0x42; 16]),
        sealer: SealerConfig::new(),
        opener: OpenerConfig::new(),
    }
}

/// Options of a two-host test network.
#[derive(Clone, Copy)]
pub(super) struct Opts {
    pub(super) paths: u8,
    pub(super) smkex: SmkexMode,
    pub(super) identities: bool,
    pub(super) tofu: bool,
    pub(super) rekey_after_s: u64,
    /// The session lifetime the handshake offers.
    pub(super) lifetime_s: u64,
    pub(super) normalize: bool,
    pub(super) group_copies: bool,
    pub(super) path_mode: PathMode,
    pub(super) kem: KemMode,
}

impl Default for Opts {
    fn default() -> Self {
        Self {
            paths: 2,
            smkex: SmkexMode::Required,
            identities: true,
            tofu: false,
            rekey_after_s: 120,
            lifetime_s: 3600,
            normalize: false,
            group_copies: true,
            path_mode: PathMode::Failover,
            kem: KemMode::Off,
        }
    }
}

pub(super) fn identity(n: u8) -> Identity {
    let mut k = n;
    Identity::generate(|seed| {
        seed.fill(k);
        k = k.wrapping_add(100);
    })
    .unwrap()
}

pub(super) fn host(me: u8, o: Opts) -> Host {
    let (mac, other_mac) = if me == 1 {
        (MAC_A, MAC_B)
    } else {
        (MAC_B, MAC_A)
    };
    let other = 3 - me;
    let id = identity(me);
    let mut hs = handshake::Config::new(mac, ip(me), 24);
    hs.smkex = o.smkex;
    hs.kem = o.kem;
    hs.lifetime = Duration::from_secs(o.lifetime_s);
    hs.static_key = o.identities.then(|| id.static_key());
    let cfg = HostConfig {
        mac,
        subnets: vec![(ip(me), 24)],
        paths: o.paths,
        max_frame: 1514,
        session: Some(SessionSettings {
            handshake: hs,
            address: (ip(me), 24),
            rekey_after: Duration::from_secs(o.rekey_after_s),
            ring: KeyRingConfig::default(),
            queue: 64,
            keepalive: SessionSettings::KEEPALIVE,
            dead_after: SessionSettings::DEAD_AFTER,
            paths: o.path_mode,
            probe_every: PROBE_EVERY,
            down_after: DOWN_AFTER,
        }),
        wall_origin: Tai64n::from_unix(1_800_000_000, 0),
        group_copies: o.group_copies,
        pki: None,
    };
    let pin = match (o.identities, o.tofu) {
        (true, false) => Pin::Configured(identity(other).public_key()),
        (true, true) => Pin::Tofu(None),
        _ => Pin::None,
    };
    let peer = PeerSpec {
        name: alloc::format!("vm{other}"),
        macs: vec![other_mac],
        keying: Keying::Session {
            pin,
            address: Some(ip(other)),
        },
        paths: o.paths,
        normalize: o.normalize.then(|| NormSpec {
            cfg: crate::normalize::NormConfig::default(),
            frame_size: 600,
            wire_extra: 0,
            lead: Duration::ZERO,
        }),
    };
    let signer: Option<SigningKey> = o.identities.then(|| id.signing_key().unwrap());
    Host::new(
        Instant::ZERO,
        cfg,
        group_spec(),
        signer,
        vec![peer],
        Resume::default(),
    )
    .unwrap()
}

/// An aes128-gcm sealer under the raw `key` from sequence number `seq`: what an insider (the
/// group key) or a peer (its key file) seals with, outside any host.
pub(super) fn forger(key: &[u8], seq: u32) -> crate::Sealer {
    crate::Sealer::new(
        crate::SuiteKey::new(SuiteId::Aes128Gcm, key).unwrap(),
        Seq(seq),
        SealerConfig::new(),
    )
    .unwrap()
}

/// A frame on the wire: from host 1 or 2, on a path.
#[derive(Clone, Debug)]
pub(super) struct Wire {
    pub(super) from: u8,
    pub(super) path: PathId,
    pub(super) frame: Vec<u8>,
}

/// Two hosts, a wire, a clock.
pub(super) struct Net {
    pub(super) hosts: [Host; 2],
    pub(super) now: Instant,
    pub(super) rng: TestRng,
    pub(super) wire: Vec<Wire>,
    /// Everything that crossed the wire (an eavesdropper's capture).
    pub(super) seen: Vec<Wire>,
    /// Inner frames delivered, per host.
    pub(super) delivered: [Vec<Vec<u8>>; 2],
    pub(super) events: [Vec<HostEvent>; 2],
    /// Sequence-number marks the hosts persisted, by key (as the caller's state directory).
    pub(super) marks: [BTreeMap<Fingerprint, u32>; 2],
    /// Whether hosts can store first-use pins.
    pub(super) pins_writable: bool,
    /// Hosts that are stopped: nothing reaches them, nothing leaves them.
    pub(super) stopped: [bool; 2],
    /// Paths that are cut: frames sent on them are lost.
    pub(super) cut: [bool; 2],
}

impl Net {
    pub(super) fn new(o: Opts) -> Self {
        Self::with_hosts([host(1, o), host(2, o)])
    }

    /// Two given hosts on a fresh wire, their first events handled.
    pub(super) fn with_hosts(hosts: [Host; 2]) -> Self {
        let mut n = Self {
            hosts,
            now: Instant::from_secs(10),
            rng: TestRng(7),
            wire: Vec::new(),
            seen: Vec::new(),
            delivered: [Vec::new(), Vec::new()],
            events: [Vec::new(), Vec::new()],
            marks: [BTreeMap::new(), BTreeMap::new()],
            pins_writable: true,
            stopped: [false; 2],
            cut: [false; 2],
        };
        n.drain(0);
        n.drain(1);
        n
    }

    /// Handles host `i`'s events (as the caller would: reservations, pins, clock floor) and
    /// puts what it has to send on the wire.
    pub(super) fn drain(&mut self, i: usize) {
        loop {
            let mut out = vec![0u8; 2048];
            while let Some((_, len)) =
                self.hosts[i].poll_delivery(self.now, &mut out, &mut self.rng)
            {
                self.delivered[i].push(out[..len].to_vec());
            }
            while let Some(t) = self.hosts[i].poll_transmit(self.now, &mut out, &mut self.rng) {
                self.push(i, t.path, out[..t.len].to_vec());
            }
            let Some(e) = self.hosts[i].poll_event() else {
                break;
            };
            match &e {
                HostEvent::Reserve { key, next, group } => {
                    let block = if *group { 1 << 16 } else { 1 << 20 };
                    // As the gateway's state directory: contiguous with the sealer's numbers
                    // (one sealer per key here), the mark a block ahead.
                    let mark = self.marks[i].entry(*key).or_insert(1000);
                    let claim = Claim {
                        from: Seq(next.map_or(*mark, |n| n.0)),
                        limit: Seq(*mark + block),
                    };
                    *mark = claim.limit.0;
                    self.hosts[i].handle_reserved(*key, claim);
                }
                HostEvent::ClockFloor(f) => self.hosts[i].handle_clock_floor_saved(*f, true),
                HostEvent::PinLearned { peer, .. } => {
                    let ok = self.pins_writable;
                    self.hosts[i].handle_pin_saved(self.now, *peer, ok, &mut self.rng)
                }
                _ => {}
            }
            self.events[i].push(e);
        }
    }

    fn push(&mut self, i: usize, path: PathId, frame: Vec<u8>) {
        let w = Wire {
            from: i as u8 + 1,
            path,
            frame,
        };
        self.seen.push(w.clone());
        self.wire.push(w);
    }

    /// Host `i` sends an inner frame from its protected side.
    pub(super) fn send(&mut self, i: usize, inner: &[u8]) -> TapResult {
        let mut out = vec![0u8; 2048];
        let mut jobs = [TapJob::new(inner, &mut out)];
        self.hosts[i].handle_tap(self.now, &mut jobs, &mut self.rng);
        let r = jobs[0].result;
        if let TapResult::Sealed { len, path, .. } = r {
            self.push(i, path, out[..len].to_vec());
        }
        self.drain(i);
        r
    }

    /// Delivers one frame to the host it is not from; returns what that host said.
    pub(super) fn deliver(&mut self, w: Wire) -> Received {
        let to = usize::from(2 - w.from);
        if self.stopped[to]
            || self.stopped[usize::from(w.from - 1)]
            || self.cut[usize::from(w.path.0).min(1)]
        {
            return Received::Dropped(RxDrop::NotForUs);
        }
        let mut frame = w.frame;
        let r = self.hosts[to].handle_uplink(self.now, w.path, &mut frame, &mut self.rng);
        if let Received::Deliver { range, .. } = &r {
            self.delivered[to].push(frame[range.clone()].to_vec());
        }
        self.drain(to);
        r
    }

    /// Delivers everything on the wire (and what it causes) until it is quiet.
    pub(super) fn settle(&mut self) {
        for _ in 0..1000 {
            if self.wire.is_empty() {
                return;
            }
            let batch = core::mem::take(&mut self.wire);
            for w in batch {
                let _ = self.deliver(w);
            }
        }
        panic!("the wire never went quiet");
    }

    /// Moves the clock by `ms`, firing timers on the way (in 10 ms steps).
    pub(super) fn advance(&mut self, ms: u64) {
        let end = self.now + Duration::from_millis(ms);
        while self.now < end {
            self.now = (self.now + Duration::from_millis(10)).min(end);
            let stopped = self.stopped;
            for i in (0..2).filter(|i| !stopped[*i]) {
                if self.hosts[i].poll_timeout().is_some_and(|t| t <= self.now) {
                    self.hosts[i].handle_timeout(self.now, &mut self.rng);
                }
                self.drain(i);
            }
            self.settle();
        }
    }

    pub(super) fn status(&self, i: usize) -> SessionStatus {
        self.hosts[i].session_status(PeerId(0), self.now).unwrap()
    }

    pub(super) fn counters(&self, i: usize) -> &PeerCounters {
        self.hosts[i].peer_counters(PeerId(0)).unwrap()
    }
}

/// An IPv4 ping from host `from` to the other.
pub(super) fn ping(from: u8, seq: u16) -> Vec<u8> {
    let (src, dst) = if from == 1 {
        (MAC_A, MAC_B)
    } else {
        (MAC_B, MAC_A)
    };
    let mut f = dst.to_vec();
    f.extend_from_slice(&src);
    f.extend_from_slice(&[0x08, 0x00, 0x45, 0, 0, 28, 0, 0, 0, 0, 64, 1, 0, 0]);
    f.extend_from_slice(&[10, 77, 0, from, 10, 77, 0, 3 - from]);
    f.extend_from_slice(&[8, 0, 0, 0, 0, 1]);
    f.extend_from_slice(&seq.to_be_bytes());
    f
}

#[test]
fn a_first_frame_starts_a_two_path_session_and_is_delivered() {
    let mut n = Net::new(Opts::default());
    assert_eq!(n.send(0, &ping(1, 1)), TapResult::Queued);
    n.settle();
    assert_eq!(n.delivered[1], vec![ping(1, 1)]);
    let st = n.status(0);
    assert!(st.up);
    assert!(st.last.unwrap().1.two_path);
    assert!(
        n.events[0]
            .iter()
            .any(|e| matches!(e, HostEvent::SessionUp { .. }))
    );
    // Both directions flow under the session.
    assert!(matches!(n.send(1, &ping(2, 1)), TapResult::Sealed { .. }));
    n.settle();
    assert_eq!(n.delivered[0], vec![ping(2, 1)]);
    assert_eq!(n.counters(0).sessions, 1);
    assert_eq!(n.counters(1).sessions, 1);
    // Path 2 carried the SMKEX nonces.
    assert!(n.seen.iter().any(|w| w.path == PathId::SECOND));
}

#[test]
fn nothing_is_sealed_before_the_sequence_numbers_are_reserved() {
    let mut h = host(1, Opts::default());
    let mut out = vec![0u8; 2048];
    let arp = [&[0xff; 6][..], &MAC_A, &[0x08, 0x06], &[0u8; 28]].concat();
    let mut jobs = [TapJob::new(&arp, &mut out)];
    let mut rng = TestRng(1);
    h.handle_tap(Instant::from_secs(1), &mut jobs, &mut rng);
    assert_eq!(jobs[0].result, TapResult::Dropped(TapDrop::Unreserved));
    assert_eq!(h.counters().tx_unreserved, 1);
    let Some(HostEvent::Reserve {
        key,
        next: None,
        group: true,
    }) = h.poll_event()
    else {
        panic!("the group key asks for a reservation first");
    };
    h.handle_reserved(
        key,
        Claim {
            from: Seq(500),
            limit: Seq(600),
        },
    );
    let mut jobs = [TapJob::new(&arp, &mut out)];
    h.handle_tap(Instant::from_secs(1), &mut jobs, &mut rng);
    assert!(matches!(
        jobs[0].result,
        TapResult::Sealed {
            dest: Dest::Group,
            ..
        }
    ));
    assert_eq!(
        u32::from_be_bytes(out[15..19].try_into().unwrap()),
        500,
        "the first number of the claim"
    );
}

#[test]
fn reservations_are_asked_for_ahead_and_never_passed() {
    // Without identities: 70,000 Ed25519 signatures would be the test's whole time.
    let mut n = Net::new(Opts {
        identities: false,
        ..Opts::default()
    });
    let arp = [&[0xff; 6][..], &MAC_A, &[0x08, 0x06], &[0u8; 28]].concat();
    let mut asked = 0;
    for _ in 0..70_000 {
        let _ = n.send(0, &arp);
        asked += n.events[0]
            .drain(..)
            .filter(|e| matches!(e, HostEvent::Reserve { next: Some(_), .. }))
            .count();
    }
    n.wire.clear();
    // 70,000 frames in blocks of 65,536: the next block was asked for once, half-way.
    assert_eq!(asked, 1);
    assert_eq!(n.hosts[0].counters().tx_unreserved, 0);
}

/// Pings both ways every 100 ms for `secs`, settling each time; returns how many were lost.
fn traffic(n: &mut Net, secs: u64) -> usize {
    let mut sent = 0;
    let before = n.delivered[0].len() + n.delivered[1].len();
    for i in 0..secs * 10 {
        for from in [1u8, 2] {
            let _ = n.send(usize::from(from - 1), &ping(from, i as u16));
            sent += 1;
        }
        n.settle();
        n.advance(100);
    }
    sent - (n.delivered[0].len() + n.delivered[1].len() - before)
}

pub(super) fn up(n: &mut Net) {
    let _ = n.send(0, &ping(1, 0));
    n.settle();
    assert!(n.status(0).up && n.status(1).up, "no session");
}

#[test]
fn rekeys_every_two_seconds_lose_nothing() {
    let mut n = Net::new(Opts {
        rekey_after_s: 2,
        ..Opts::default()
    });
    up(&mut n);
    assert_eq!(traffic(&mut n, 20), 0);
    let rekeys = n.counters(0).rekeys + n.counters(1).rekeys;
    assert!(rekeys >= 16, "{rekeys} rekeys");
    for i in 0..2 {
        let c = n.counters(i);
        assert_eq!(c.drops_total(), 0, "{c:?}");
        assert_eq!((c.unknown_key, c.no_session), (0, 0), "{c:?}");
    }
}

/// The frames of handshake Requests from host `from` that crossed the wire.
fn requests(n: &Net, from: u8) -> Vec<Vec<u8>> {
    let key = crate::SuiteKey::new(SuiteId::Aes128Gcm, &[0x42; 16]).unwrap();
    n.seen
        .iter()
        .filter(|w| w.from == from && w.path == PathId::FIRST)
        .filter(|w| {
            let mut o = crate::Opener::new(
                crate::SuiteKey::new(SuiteId::Aes128Gcm, &[0x42; 16]).unwrap(),
                OpenerConfig::new(),
            )
            .unwrap();
            o.set_accept_unverified(true);
            let mut f = w.frame.clone();
            let _ = &key;
            o.open(Instant::ZERO, &mut f).is_ok_and(|op| {
                op.protocol() == Protocol::SessionEstablishment
                    && matches!(
                        handshake::messages::Repr::parse_bytes(op.payload()).map(|r| r.body),
                        Ok(handshake::messages::Body::Request(_))
                    )
            })
        })
        .map(|w| w.frame.clone())
        .collect()
}

/// In memory: a captured Request of host 2 replayed at 500 frames/s while the
/// hosts rekey every 4 s: the replays are `replay`/`too-old` drops at the group window, never
/// reach the handshake logic, and sessions and rekeys go on.
#[test]
fn a_replayed_request_never_stops_the_sessions() {
    let mut n = Net::new(Opts {
        rekey_after_s: 4,
        ..Opts::default()
    });
    let _ = n.send(1, &ping(2, 0));
    n.settle();
    let request = requests(&n, 2).pop().expect("a Request from host 2");
    let rekeys = n.counters(0).rekeys;
    let mut lost = 0;
    for t in 0..300u64 {
        for _ in 0..10 {
            let _ = n.deliver(Wire {
                from: 2,
                path: PathId::FIRST,
                frame: request.clone(),
            });
        }
        let before = n.delivered[1].len();
        let _ = n.send(0, &ping(1, t as u16));
        n.settle();
        lost += usize::from(n.delivered[1].len() == before);
        n.advance(20);
    }
    let c = n.counters(0);
    assert_eq!(lost, 0);
    assert!(c.rekeys - rekeys >= 1, "rekeys go on: {c:?}");
    assert_eq!(c.messages_limited, 0, "{c:?}");
    let replays: u64 = [DropReason::Replay, DropReason::TooOld]
        .iter()
        .map(|r| c.drops[DROP_REASONS.iter().position(|x| x == r).unwrap()])
        .sum();
    assert_eq!(replays, 3000, "every copy dropped at the window: {c:?}");
    assert!(n.status(0).up);
}

use crate::protect::DropReason;

/// After host 1 restarts (a new host, its windows empty), a replayed old Request passes the
/// window once and starts a handshake that cannot complete; every copy after it is stale, and
/// the genuine peer's newer Request replaces it.
#[test]
fn after_a_restart_a_replayed_request_is_taken_once_and_a_newer_one_wins() {
    let mut n = Net::new(Opts::default());
    let _ = n.send(1, &ping(2, 0));
    n.settle();
    let old = requests(&n, 2).pop().unwrap();
    n.hosts[0] = host(1, Opts::default());
    n.drain(0);
    for _ in 0..5 {
        let _ = n.deliver(Wire {
            from: 2,
            path: PathId::FIRST,
            frame: old.clone(),
        });
    }
    n.wire.clear();
    let c = n.counters(0).clone();
    let replays = c.drops[DROP_REASONS
        .iter()
        .position(|x| *x == DropReason::Replay)
        .unwrap()];
    assert_eq!(replays, 4, "the window takes the first copy only: {c:?}");
    // Host 2 sends under its session, which host 1 lost: host 1 asks for a new one.
    let _ = n.send(1, &ping(2, 1));
    n.settle();
    n.advance(2000);
    let _ = n.send(1, &ping(2, 2));
    n.settle();
    assert!(n.status(0).up, "{:?}", n.counters(0));
    assert!(n.delivered[0].contains(&ping(2, 2)));
}

/// Crossing handshakes (both hosts start at once) end in one session, not a loop.
#[test]
fn crossing_handshakes_end_in_one_session() {
    let mut n = Net::new(Opts::default());
    let _ = n.send(0, &ping(1, 0));
    let _ = n.send(1, &ping(2, 0));
    n.settle();
    n.advance(3000);
    assert!(n.status(0).up && n.status(1).up);
    assert!(n.delivered[0].contains(&ping(2, 0)) && n.delivered[1].contains(&ping(1, 0)));
    let fails: u64 = n.counters(0).handshake_failures.iter().sum::<u64>()
        + n.counters(1).handshake_failures.iter().sum::<u64>();
    assert_eq!(fails, 0);
}

/// A peer with `identity = "tofu"`: its key is pinned once stored; if it cannot be stored the
/// session is refused (no keys installed, nothing more sent), and the next try works.
#[test]
fn a_first_use_pin_is_stored_before_the_session_is_used() {
    let mut n = Net::new(Opts {
        tofu: true,
        ..Opts::default()
    });
    n.pins_writable = false;
    let _ = n.send(0, &ping(1, 0));
    n.settle();
    n.advance(200);
    assert!(!n.status(0).up && !n.status(1).up);
    let pin_unsaved = FAIL_REASONS
        .iter()
        .position(|r| *r == "pin_unsaved")
        .unwrap();
    // The responder stores first (at Confirm) and refuses: no ConfirmAck, no keys anywhere.
    assert_eq!(n.counters(1).handshake_failures[pin_unsaved], 1);
    assert!(n.status(0).pin.is_none() && n.status(1).pin.is_none());
    n.pins_writable = true;
    // Host 1's handshake times out (15 s) and retries after its backoff.
    n.advance(20_000);
    let _ = n.send(0, &ping(1, 1));
    n.settle();
    n.advance(200);
    assert!(n.status(0).up);
    assert_eq!(n.status(0).pin, Some(identity(2).public_key()));
    assert!(n.delivered[1].contains(&ping(1, 1)));
}

/// A host without a pin for its peer never pins it: any key is taken, nothing is stored.
#[test]
fn a_peer_without_identity_is_never_pinned() {
    let mut n = Net::new(Opts {
        identities: false,
        ..Opts::default()
    });
    up(&mut n);
    assert!(n.status(0).pin.is_none());
    assert!(
        !n.events[0]
            .iter()
            .any(|e| matches!(e, HostEvent::PinLearned { .. }))
    );
}

/// In memory: a unicast ping inside a broadcast frame under the group key
/// "from" a session peer is not delivered (`group_unicast`); ARP in a broadcast is.
#[test]
fn only_genuine_group_payloads_under_the_group_key() {
    let mut n = Net::new(Opts {
        identities: false,
        ..Opts::default()
    });
    up(&mut n);
    let mut sneaky = ping(2, 9);
    sneaky[..6].copy_from_slice(&[0xff; 6]);
    let mut sealer = forger(&[0x42; 16], u32::MAX - 10);
    let mut out = vec![0u8; 256];
    let f = sealer.seal(n.now, &sneaky, &mut out).unwrap().to_vec();
    let r = n.deliver(Wire {
        from: 2,
        path: PathId::FIRST,
        frame: f,
    });
    assert_eq!(r, Received::Dropped(RxDrop::GroupUnicast(PeerId(0))));
    assert_eq!(n.counters(0).group_unicast, 1);
    let arp = [&[0xff; 6][..], &MAC_B, &[0x08, 0x06], &[0u8; 28]].concat();
    let f = sealer.seal(n.now, &arp, &mut out).unwrap().to_vec();
    assert!(matches!(
        n.deliver(Wire {
            from: 2,
            path: PathId::FIRST,
            frame: f
        }),
        Received::Deliver { .. }
    ));
}

/// With identities, a group frame "from" the peer signed by someone else fails its signature on
/// both paths (and is reported once), before it reaches any budget.
#[test]
fn forged_signatures_fail_on_both_paths_and_are_reported_once() {
    let mut n = Net::new(Opts::default());
    up(&mut n);
    let mut signed =
        forger(&[0x42; 16], u32::MAX - 10).with_signer(SigningKey::from_seed(&[9; 32]).unwrap());
    let mut out = vec![0u8; 256];
    for path in [PathId::FIRST, PathId::SECOND, PathId::FIRST] {
        let f = signed
            .seal_sub(
                n.now,
                MAC_A,
                MAC_B,
                Protocol::SessionEstablishment,
                &[1, 1, 0],
                &mut out,
            )
            .unwrap()
            .to_vec();
        assert_eq!(
            n.deliver(Wire {
                from: 2,
                path,
                frame: f
            }),
            Received::Dropped(RxDrop::Open(PeerId(0), DropReason::BadSignature))
        );
    }
    let reported = n.events[0]
        .iter()
        .filter(|e| matches!(e, HostEvent::BadSignature(_)))
        .count();
    assert_eq!(reported, 1);
    assert_eq!(n.counters(0).messages_limited, 0);
}

/// A frame from a MAC that is no peer's: dropped, counted, reported once a minute.
#[test]
fn unknown_sources_are_reported_once_a_minute() {
    let mut n = Net::new(Opts::default());
    let mut f = ping(2, 0);
    f[6..12].copy_from_slice(&[2, 9, 9, 9, 9, 9]);
    for _ in 0..3 {
        let r = n.deliver(Wire {
            from: 2,
            path: PathId::FIRST,
            frame: f.clone(),
        });
        assert_eq!(
            r,
            Received::Dropped(RxDrop::UnknownPeer([2, 9, 9, 9, 9, 9]))
        );
    }
    n.now += Duration::from_secs(61);
    let _ = n.deliver(Wire {
        from: 2,
        path: PathId::FIRST,
        frame: f,
    });
    let reported = n.events[0]
        .iter()
        .filter(|e| matches!(e, HostEvent::UnknownSource(_)))
        .count();
    assert_eq!(reported, 2);
    assert_eq!(n.hosts[0].counters().unknown_peer, 4);
}

/// `require` with one path on one side: no session, counted `too_few_paths`, retried with
/// backoff (not in a loop).
#[test]
fn require_with_one_path_fails_cleanly_and_backs_off() {
    let mut n = Net::new(Opts::default());
    n.hosts[1] = host(
        2,
        Opts {
            paths: 1,
            smkex: SmkexMode::Preferred,
            ..Opts::default()
        },
    );
    n.drain(1);
    let _ = n.send(0, &ping(1, 0));
    n.settle();
    n.advance(10_000);
    let too_few = FAIL_REASONS
        .iter()
        .position(|r| *r == "too_few_paths")
        .unwrap();
    let f = n.counters(0).handshake_failures[too_few];
    assert!((1..=5).contains(&f), "{f} failures in 10 s: backoff");
    assert!(!n.status(0).up);
}

/// In memory: normalized peers with sessions. The first handshake runs before
/// any stream; from then on every frame on path 1 is one stream frame of one size (rekeys
/// included: their messages ride inside the stream), and pings arrive through the streams.
#[test]
fn normalized_peers_with_sessions_rekey_inside_their_streams() {
    let mut n = Net::new(Opts {
        normalize: true,
        rekey_after_s: 2,
        ..Opts::default()
    });
    let _ = n.send(0, &ping(1, 0));
    n.settle();
    n.advance(500);
    assert!(n.status(0).up && n.status(1).up);
    let first = n.seen.len();
    let mut sent = 0;
    for t in 1..60u16 {
        let _ = n.send(0, &ping(1, t));
        let _ = n.send(1, &ping(2, t));
        sent += 2;
        n.advance(100);
    }
    n.advance(500);
    let got = n.delivered[0]
        .iter()
        .chain(&n.delivered[1])
        .filter(|f| f.len() == ping(1, 0).len())
        .count();
    assert!(got >= sent, "{got} of {sent} pings through the streams");
    let rekeys = n.counters(0).rekeys + n.counters(1).rekeys;
    assert!(rekeys >= 2, "{rekeys} rekeys");
    // After the first session: one frame size on path 1, whatever was inside.
    let sizes: alloc::collections::BTreeSet<usize> = n.seen[first..]
        .iter()
        .filter(|w| w.path == PathId::FIRST)
        .map(|w| w.frame.len())
        .collect();
    assert_eq!(sizes.len(), 1, "path 1 frame sizes {sizes:?}");
    assert_eq!(*sizes.iter().next().unwrap(), 600);
}

/// Every deadline [`Host::poll_timeout`] returns makes [`Host::handle_timeout`] act: after it
/// runs, the next deadline lies ahead. One-way traffic past `rekey_after` (the peer is never
/// heard, so no rekey may start), two-way traffic, a handshake lost on the wire: no instant
/// comes back again (a host that wakes for nothing spins its driver).
#[test]
fn no_deadline_comes_back_after_it_was_handled() {
    let check = |n: &mut Net| {
        for i in 0..2 {
            if let Some(t) = n.hosts[i].poll_timeout().filter(|t| *t <= n.now) {
                n.hosts[i].handle_timeout(n.now, &mut n.rng);
                n.drain(i);
                let again = n.hosts[i].poll_timeout();
                assert!(
                    again.is_none_or(|a| a > n.now),
                    "host {i}: deadline {t:?} handled at {:?}, next {again:?}",
                    n.now
                );
            }
        }
    };
    let mut n = Net::new(Opts {
        rekey_after_s: 2,
        ..Opts::default()
    });
    up(&mut n);
    // One way only, for 10 s: host 2 never sends, host 1 never hears it.
    for k in 0..1000u16 {
        let _ = n.send(0, &ping(1, k));
        n.settle();
        n.now += Duration::from_millis(10);
        check(&mut n);
        n.settle();
    }
    // A handshake whose messages are all lost, for 20 s.
    n.now += Duration::from_secs(5);
    let _ = n.send(1, &ping(2, 1));
    for _ in 0..2000 {
        n.wire.clear();
        n.now += Duration::from_millis(10);
        check(&mut n);
    }
}

/// A reconfiguration with the same peers changes nothing (sessions, keys and counters stay);
/// one that cannot be applied (a key that does not suit its suite) returns the error and
/// changes nothing either: the running session goes on.
#[test]
fn reconfigure_is_all_or_nothing_and_keeps_unchanged_peers() {
    let mut n = Net::new(Opts::default());
    up(&mut n);
    let key_id = n.status(0).current.map(|c| c.0);
    let specs: Vec<PeerSpec> = n.hosts[0].peers().map(|(_, s)| s.clone()).collect();
    let counters = n.counters(0).clone();
    n.hosts[0]
        .reconfigure(n.now, group_spec(), specs.clone())
        .expect("the same configuration");
    assert_eq!(n.status(0).current.map(|c| c.0), key_id);
    assert_eq!(*n.counters(0), counters);
    assert!(
        n.hosts[0].poll_event().is_none(),
        "nothing to persist or say"
    );
    let mut bad = specs.clone();
    bad.push(PeerSpec {
        name: "vm9".into(),
        macs: vec![[0x02, 0, 0, 0, 0, 9]],
        keying: Keying::Static(KeySpec {
            suite: SuiteId::Aes128Gcm,
            key: Zeroizing::new(vec![1; 5]),
            sealer: SealerConfig::new(),
            opener: OpenerConfig::new(),
        }),
        paths: 1,
        normalize: None,
    });
    assert!(n.hosts[0].reconfigure(n.now, group_spec(), bad).is_err());
    assert_eq!(n.hosts[0].peers().count(), 1);
    assert_eq!(n.status(0).current.map(|c| c.0), key_id);
    assert_eq!(traffic(&mut n, 1), 0, "the session still carries frames");
}

/// The protected side's MTU follows the normalized streams' capacity before any stream runs:
/// a session peer's stream starts with its first session, and a full-size frame sent then must
/// fit it (it was refused, counted as an inner drop, when the MTU was taken from running
/// streams only).
#[test]
fn the_largest_normalized_inner_frame_is_known_before_the_session() {
    let mut n = Net::new(Opts {
        normalize: true,
        ..Opts::default()
    });
    let before = n.hosts[0]
        .norm_max_inner_len()
        .expect("a normalized peer is configured");
    up(&mut n);
    n.advance(500);
    assert_eq!(n.hosts[0].norm_max_inner_len(), Some(before));
    let mut big = ping(1, 7);
    big.resize(before, 0);
    let sent = n.hosts[0]
        .norm_status(PeerId(0))
        .map(|(s, ..)| s.inner_queued);
    assert_eq!(n.send(0, &big), TapResult::Queued);
    let after = n.hosts[0]
        .norm_status(PeerId(0))
        .map(|(s, ..)| s.inner_queued);
    assert_eq!(after, sent.map(|q| q + 1), "the full-size frame was queued");
}

/// A Request "from host `from`" minted by an insider with the group key, stamped `ts`.
fn insider_request(from: u8, ts: Tai64n, seq: u32) -> Vec<u8> {
    let (mac, other) = if from == 1 {
        (MAC_A, MAC_B)
    } else {
        (MAC_B, MAC_A)
    };
    let mut cfg = handshake::Config::new(mac, ip(from), 24);
    cfg.paths = 2;
    cfg.smkex = SmkexMode::Preferred;
    let mut hs = handshake::Handshake::initiate(
        Instant::ZERO,
        cfg,
        handshake::Peer {
            mac: other,
            addr: ip(3 - from),
            pinned_x25519: None,
        },
        ts,
        &mut TestRng(1234 + u64::from(from)),
    );
    let mut msg = vec![0u8; 512];
    let t = hs.poll_transmit(Instant::ZERO, &mut msg).unwrap();
    let mut sealer = forger(&[0x42; 16], seq);
    let mut out = vec![0u8; 2048];
    sealer
        .seal_sub(
            Instant::ZERO,
            other,
            mac,
            Protocol::SessionEstablishment,
            &msg[..t.len],
            &mut out,
        )
        .unwrap()
        .to_vec()
}

/// An insider with the group key (no identities pinned) sends each host a Request "from the
/// other", stamped a day ahead. Taking a Request does not make it the freshness bar (only an
/// established handshake does): the genuine Requests are refused for one handshake timeout
/// after the take, then rekeys resume. (Raising the bar on take locked both hosts out of new
/// sessions until their clocks passed the forged stamp: the adversary harness's finding.)
#[test]
fn a_future_dated_request_blocks_rekeys_for_one_timeout_only() {
    let mut n = Net::new(Opts {
        rekey_after_s: 2,
        identities: false,
        ..Opts::default()
    });
    up(&mut n);
    assert_eq!(traffic(&mut n, 5), 0);
    let day_ahead = Tai64n::from_unix(1_800_000_000 + 86_400, 0);
    for from in [1u8, 2] {
        // The next number of the sender's group key (a number far ahead would pin the group
        // window instead: what an insider can do without identities, docs/SESSIONS.md).
        let next = n
            .seen
            .iter()
            .filter(|w| w.from == from && w.path == PathId::FIRST && w.frame[14] & 0x10 == 0)
            .map(|w| u32::from_be_bytes([w.frame[15], w.frame[16], w.frame[17], w.frame[18]]))
            .max()
            .unwrap()
            + 1;
        let f = insider_request(from, day_ahead, next);
        let _ = n.deliver(Wire {
            from,
            path: PathId::FIRST,
            frame: f,
        });
    }
    let before = n.counters(0).sessions;
    assert_eq!(
        traffic(&mut n, 10),
        0,
        "the current sessions carry the traffic meanwhile"
    );
    assert_eq!(n.counters(0).sessions, before, "blocked for a while");
    assert_eq!(traffic(&mut n, 30), 0);
    let after = n.counters(0).sessions;
    assert!(
        after >= before + 5,
        "{before} -> {after} sessions in 40 s after the forgery"
    );
}

/// A reload that changes a session peer (here its address is no longer configured) starts new
/// sessions but keeps how old the peer's Requests were: an insider's stale Request is refused
/// before and after, and a newer one is answered.
#[test]
fn a_changed_session_peer_keeps_refusing_stale_requests() {
    let mut n = Net::new(Opts {
        identities: false,
        ..Opts::default()
    });
    // Host 2 initiates: host 1 takes its Request, which sets the freshness bar.
    let _ = n.send(1, &ping(2, 0));
    n.settle();
    assert!(n.status(0).up);
    // Past the handshake timeout: only the freshness bar refuses a stale Request now.
    n.advance(20_000);
    let next = |n: &Net| {
        n.seen
            .iter()
            .filter(|w| w.from == 2 && w.path == PathId::FIRST && w.frame[14] & 0x10 == 0)
            .map(|w| u32::from_be_bytes([w.frame[15], w.frame[16], w.frame[17], w.frame[18]]))
            .max()
            .unwrap_or(1000)
            + 100
    };
    let stale = Tai64n::from_unix(1_700_000_000, 0);
    // Whether host 1 took the Request (not counted stale).
    let answered = |n: &mut Net, ts: Tai64n, seq: u32| {
        let before = n.counters(0).stale_requests;
        let _ = n.deliver(Wire {
            from: 2,
            path: PathId::FIRST,
            frame: insider_request(2, ts, seq),
        });
        n.counters(0).stale_requests == before
    };
    let seq = next(&n);
    assert!(!answered(&mut n, stale, seq), "stale before the reload");
    let mut specs: Vec<PeerSpec> = n.hosts[0].peers().map(|(_, s)| s.clone()).collect();
    specs[0].keying = Keying::Session {
        pin: Pin::None,
        address: None,
    };
    n.hosts[0].reconfigure(n.now, group_spec(), specs).unwrap();
    n.drain(0);
    assert!(!answered(&mut n, stale, seq + 1), "stale after the reload");
    let newer = Tai64n::from_unix(1_800_000_000 + 3_600, 0);
    assert!(
        answered(&mut n, newer, seq + 2),
        "a newer Request is answered"
    );
}
