//! Two hosts on an in-memory wire, on a virtual clock: sessions, rekeys, replays, forgeries,
//! pins, reservations and the group payload rule, end to end through `handle_*`/`poll_*`.

use alloc::collections::BTreeMap;
use alloc::vec;
use alloc::vec::Vec;
use core::net::{IpAddr, Ipv4Addr};

use zeroize::Zeroizing;

use super::*;
use crate::crypto::SigningKey;
use crate::handshake::{Identity, SmkexMode};
use crate::session::{OpenerConfig, SealerConfig};
use crate::wire::Seq;

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

fn ip(n: u8) -> IpAddr {
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
}

impl Default for Opts {
    fn default() -> Self {
        Self {
            paths: 2,
            smkex: SmkexMode::Required,
            identities: true,
            tofu: false,
            rekey_after_s: 120,
        }
    }
}

fn identity(n: u8) -> Identity {
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
    hs.static_key = o.identities.then(|| id.static_key());
    let cfg = Config {
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
        }),
        wall_origin: Tai64n::from_unix(1_800_000_000, 0),
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
    };
    let signer: Option<SigningKey> = o.identities.then(|| id.signing_key().unwrap());
    Host::new(cfg, group_spec(), signer, vec![peer], None).unwrap()
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
    pub(super) events: [Vec<Event>; 2],
    /// Sequence-number marks the hosts persisted, by key (as the caller's state directory).
    pub(super) marks: [BTreeMap<Fingerprint, u32>; 2],
    /// Whether hosts can store first-use pins.
    pub(super) pins_writable: bool,
}

impl Net {
    pub(super) fn new(o: Opts) -> Self {
        let mut n = Self {
            hosts: [host(1, o), host(2, o)],
            now: Instant::from_secs(10),
            rng: TestRng(7),
            wire: Vec::new(),
            seen: Vec::new(),
            delivered: [Vec::new(), Vec::new()],
            events: [Vec::new(), Vec::new()],
            marks: [BTreeMap::new(), BTreeMap::new()],
            pins_writable: true,
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
            while let Some(t) = self.hosts[i].poll_transmit(self.now, &mut out) {
                self.push(i, t.path, out[..t.len].to_vec());
            }
            let Some(e) = self.hosts[i].poll_event() else {
                break;
            };
            match &e {
                Event::Reserve { key, next, group } => {
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
                Event::ClockFloor(f) => self.hosts[i].handle_clock_floor_saved(*f, true),
                Event::PinLearned { peer, .. } => {
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
        if let TapResult::Sealed { len, .. } = r {
            self.push(i, PathId::FIRST, out[..len].to_vec());
        }
        self.drain(i);
        r
    }

    /// Delivers one frame to the host it is not from; returns what that host said.
    pub(super) fn deliver(&mut self, w: Wire) -> Received {
        let to = usize::from(2 - w.from);
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
            for i in 0..2 {
                if self.hosts[i].poll_timeout().is_some_and(|t| t <= self.now) {
                    self.hosts[i].handle_timeout(self.now, &mut self.rng);
                    self.drain(i);
                }
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
            .any(|e| matches!(e, Event::SessionUp { .. }))
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
    let Some(Event::Reserve {
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
            .filter(|e| matches!(e, Event::Reserve { next: Some(_), .. }))
            .count();
    }
    n.wire.clear();
    // 70,000 frames in blocks of 65,536: the next block was asked for once, half-way.
    assert_eq!(asked, 1);
    assert_eq!(n.hosts[0].counters().tx_unreserved, 0);
}
