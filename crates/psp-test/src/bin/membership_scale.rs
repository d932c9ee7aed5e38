//! Membership at scale (issue 27, BENCHMARKS.md "Membership: 1,000 hosts in memory"): N real
//! `psp_core::host::Host`s with `[pki]` on one ideal segment (every frame takes 100 µs, no
//! loss), a virtual clock. Every host starts; host 0 (the lowest MAC: the key server) sends a
//! frame to every other, so each member has a session with it; then it measures
//!
//! * one rotation: from the key server making a new key until every member holds it (frames
//!   sent meanwhile, simulated time);
//! * one revocation: a list revoking the last host handed to host 1, until every other host
//!   has it in force (frames, simulated time), and the key server's new key after it;
//! * memory: the process's resident set before and after the hosts were made and connected,
//!   per host.
//!
//! cargo run --release -p psp-test --bin membership_scale -- [--hosts N]
//! Last line: RESULT hosts=N rotation_ms=… rotation_frames=… revocation_ms=… revocation_frames=… kib_per_host=…

use core::cmp::Reverse;
use core::net::{IpAddr, Ipv4Addr};
use std::collections::BinaryHeap;

use psp_core::handshake::{self, Identity, KeyRingConfig, SmkexMode, Tai64n};
use psp_core::host::{
    self, Claim, Host, HostEvent, KeySpec, Mac, Received, Resume, SessionSettings, TapJob,
    TapResult,
};
use psp_core::pki::{CertFields, Certificate, Kind, RevocationList};
use psp_core::protect::{OpenerConfig, SealerConfig};
use psp_core::time::{Duration, Instant};
use psp_core::wire::Seq;
use psp_core::{SigningKey, SuiteId};
use psp_test::sim::SimRng;
use zeroize::Zeroizing;

const WALL0: u64 = 1_800_000_000;
const HOP_US: u64 = 100;

fn mac(i: usize) -> Mac {
    [2, 0x50, (i >> 16) as u8, (i >> 8) as u8, i as u8, 1]
}

fn ip(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, (i >> 16) as u8, (i >> 8) as u8, i as u8 + 1)
}

fn identity(i: usize) -> Identity {
    let mut k = 0u8;
    Identity::generate(|seed| {
        seed.fill(k);
        seed[..8].copy_from_slice(&(i as u64).to_be_bytes());
        k = k.wrapping_add(1);
    })
    .expect("an identity")
}

fn group() -> KeySpec {
    KeySpec {
        suite: SuiteId::Aes128Gcm,
        key: Zeroizing::new(vec![0x42; 16]),
        sealer: SealerConfig::new(),
        opener: OpenerConfig::new().with_max_frame_len(1514),
    }
}

fn host(i: usize, ca: &SigningKey, know: usize) -> Host {
    let id = identity(i);
    let mut f = CertFields::new(Kind::Host, i as u64 + 1, id.public_key(), &format!("h{i}"));
    f.not_before = WALL0 - 86_400;
    f.not_after = WALL0 + 86_400 * 365;
    f.push_mac(mac(i));
    f.push_addr(IpAddr::V4(ip(i)), 8);
    let cert = Certificate::sign(&f, ca).expect("a certificate");
    let mut hs = handshake::Config::new(mac(i), IpAddr::V4(ip(i)), 8);
    hs.smkex = SmkexMode::Off;
    hs.static_key = Some(id.static_key());
    let cfg = host::HostConfig {
        mac: mac(i),
        subnets: vec![(IpAddr::V4(ip(i)), 8)],
        paths: 1,
        max_frame: 1514,
        session: Some(SessionSettings {
            handshake: hs,
            address: (IpAddr::V4(ip(i)), 8),
            rekey_after: Duration::from_secs(3000),
            ring: KeyRingConfig::default(),
            queue: 8,
            keepalive: SessionSettings::KEEPALIVE,
            dead_after: SessionSettings::DEAD_AFTER,
            paths: host::PathMode::default(),
            probe_every: host::PROBE_EVERY,
            down_after: host::DOWN_AFTER,
        }),
        wall_origin: Tai64n::from_unix(WALL0, 0),
        group_copies: true,
        pki: Some(host::Pki {
            ca: ca.public_key(),
            certificate: cert,
            revoked: RevocationList::empty(),
            skew_secs: 3600,
            // The key server knows every member; a member, the first `know` hosts it hears.
            max_certified: if i == 0 { 65_536 } else { know },
            rotate_every: Duration::from_secs(600),
        }),
    };
    Host::new(
        Instant::ZERO,
        cfg,
        group(),
        id.signing_key().ok(),
        Vec::new(),
        Resume::default(),
    )
    .expect("a host")
}

/// A frame in flight: when it arrives, a tie-break, to which host, its bytes.
type InFlight = Reverse<(u64, u64, usize, Vec<u8>)>;

/// The segment: every host, frames in flight, timers, counts.
struct Lan {
    hosts: Vec<Host>,
    rngs: Vec<SimRng>,
    now: u64,
    seq: u64,
    flight: BinaryHeap<InFlight>,
    wakes: BinaryHeap<Reverse<(u64, usize)>>,
    sent: u64,
    delivered: u64,
    events: Vec<(usize, HostEvent)>,
}

impl Lan {
    fn new(n: usize, know: usize) -> Self {
        let ca = SigningKey::from_seed(&[0xca; 32]).expect("a CA");
        let mut lan = Self {
            hosts: (0..n).map(|i| host(i, &ca, know)).collect(),
            rngs: (0..n).map(|i| SimRng::new(i as u64 + 7)).collect(),
            now: 0,
            seq: 0,
            flight: BinaryHeap::new(),
            wakes: BinaryHeap::new(),
            sent: 0,
            delivered: 0,
            events: Vec::new(),
        };
        for i in 0..n {
            lan.after(i);
        }
        lan
    }

    fn at(&self) -> Instant {
        Instant::from_micros(self.now)
    }

    /// Events (reservations answered at once), then frames onto the segment, then the wake-up.
    fn after(&mut self, i: usize) {
        let now = self.at();
        let mut buf = vec![0u8; 2048];
        loop {
            let mut busy = false;
            while let Some(e) = self.hosts[i].poll_event() {
                busy = true;
                if let HostEvent::Reserve { key, next, .. } = e {
                    let from = next.map_or(0, |s| s.0);
                    self.hosts[i].handle_reserved(
                        key,
                        Claim {
                            from: Seq(from),
                            limit: Seq(from.saturating_add(1 << 20)),
                        },
                    );
                } else {
                    self.events.push((i, e));
                }
            }
            while let Some(t) = self.hosts[i].poll_transmit(now, &mut buf, &mut self.rngs[i]) {
                busy = true;
                self.send(i, buf[..t.len].to_vec());
            }
            if !busy {
                break;
            }
        }
        if let Some(t) = self.hosts[i].poll_timeout() {
            self.wakes
                .push(Reverse((t.total_micros().max(self.now), i)));
        }
    }

    fn send(&mut self, from: usize, frame: Vec<u8>) {
        self.sent += 1;
        let dst: Mac = frame[..6].try_into().expect("a MAC");
        let at = self.now + HOP_US;
        if dst[0] & 1 == 1 {
            for j in (0..self.hosts.len()).filter(|j| *j != from) {
                self.seq += 1;
                self.flight.push(Reverse((at, self.seq, j, frame.clone())));
            }
        } else if let Some(j) = (0..self.hosts.len()).find(|j| mac(*j) == dst) {
            self.seq += 1;
            self.flight.push(Reverse((at, self.seq, j, frame)));
        }
    }

    /// Runs until `until` (µs) or until nothing is in flight and no timer is due before it.
    fn run(&mut self, until: u64) {
        loop {
            let next_frame = self.flight.peek().map(|Reverse((t, ..))| *t);
            let next_wake = self.wakes.peek().map(|Reverse((t, _))| *t);
            let next = match (next_frame, next_wake) {
                (Some(a), Some(b)) => a.min(b),
                (Some(a), None) => a,
                (None, Some(b)) => b,
                (None, None) => return,
            };
            if next > until {
                self.now = until;
                return;
            }
            self.now = next;
            if next_frame == Some(next) {
                let Reverse((_, _, j, mut f)) = self.flight.pop().expect("a frame");
                let now = self.at();
                let r = self.hosts[j].handle_uplink(
                    now,
                    handshake::PathId::FIRST,
                    &mut f,
                    &mut self.rngs[j],
                );
                if matches!(r, Received::Deliver { .. }) {
                    self.delivered += 1;
                }
                self.after(j);
            } else {
                let Reverse((_, j)) = self.wakes.pop().expect("a wake-up");
                let now = self.at();
                if self.hosts[j].poll_timeout().is_some_and(|t| t <= now) {
                    self.hosts[j].handle_timeout(now, &mut self.rngs[j]);
                    self.after(j);
                }
            }
        }
    }

    /// Host `i` sends a ping to host `j`'s address (a unicast frame from its protected side).
    fn ping(&mut self, i: usize, j: usize) {
        let mut f = mac(j).to_vec();
        f.extend_from_slice(&mac(i));
        f.extend_from_slice(&[0x08, 0x00, 0x45, 0, 0, 28, 0, 0, 0, 0, 64, 1, 0, 0]);
        f.extend_from_slice(&ip(i).octets());
        f.extend_from_slice(&ip(j).octets());
        f.extend_from_slice(&[8, 0, 0, 0, 0, 1, 0, 1]);
        let mut out = vec![0u8; 2048];
        let now = self.at();
        let mut jobs = [TapJob::new(&f, &mut out)];
        self.hosts[i].handle_tap(now, &mut jobs, &mut self.rngs[i]);
        if let TapResult::Sealed { len, .. } = jobs[0].result {
            self.send(i, out[..len].to_vec());
        }
        self.after(i);
    }
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|v| v.parse::<u64>().ok())
        })
        .map_or(0, |pages| pages * 4)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n = args
        .iter()
        .position(|a| a == "--hosts")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000usize);
    let know = args
        .iter()
        .position(|a| a == "--members-know")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(4usize);
    let rss0 = rss_kib();
    let started = std::time::Instant::now();
    let mut lan = Lan::new(n, know);
    // Announcements, then the election (3 s after the start).
    lan.run(4_000_000);
    // The key server (host 0) reaches every member: a session each, its key with it.
    for j in 1..n {
        lan.ping(0, j);
    }
    lan.run(10_000_000);
    let rss1 = rss_kib();
    let epoch = |h: &Host, now: u64| {
        h.broadcast_key(Instant::from_micros(now + 10_000_000))
            .map(|k| k.1)
    };
    let held = (1..n)
        .filter(|j| {
            lan.hosts[*j]
                .broadcast_key(Instant::from_micros(lan.now + 3_000_000))
                .is_some()
        })
        .count();
    eprintln!(
        "membership_scale: {n} hosts up in {:.1} s wall; {held} members hold the key server's key; {} certified peers at host 1",
        started.elapsed().as_secs_f64(),
        lan.hosts[1].certified_peers()
    );

    // One rotation: the key server's timer (600 s after its first key), found to the ms.
    let rot_before = lan.hosts[0].counters().rotations;
    lan.run(590_000_000);
    let (mut rotated_at, mut sent_rot0) = (lan.now, lan.sent);
    for _ in 0..300_000 {
        let (t0, s0) = (lan.now, lan.sent);
        lan.run(lan.now + 100);
        if lan.hosts[0].counters().rotations != rot_before {
            (rotated_at, sent_rot0) = (t0, s0);
            break;
        }
    }
    let new_epoch = epoch(&lan.hosts[0], lan.now);
    let mut rotation_ms = None;
    for _ in 0..20_000 {
        lan.run(lan.now + 100);
        let all = (1..n).all(|j| epoch(&lan.hosts[j], lan.now) == new_epoch);
        if all {
            rotation_ms = Some((lan.now - rotated_at) as f64 / 1000.0);
            break;
        }
    }
    let rotation_frames = lan.sent - sent_rot0;

    // One revocation: the last host, handed to host 1.
    let ca = SigningKey::from_seed(&[0xca; 32]).expect("a CA");
    let list = RevocationList::sign(1, WALL0, &[n as u64], &ca).expect("a list");
    let sent_rev0 = lan.sent;
    let revoked_at = lan.now;
    let now = lan.at();
    let _ = lan.hosts[1].handle_revocation_list(now, list, &mut lan.rngs[1]);
    lan.after(1);
    let mut revocation_ms = None;
    for _ in 0..50_000 {
        lan.run(lan.now + 100);
        if (0..n - 1).all(|j| lan.hosts[j].revocation_list().number() == 1) {
            revocation_ms = Some((lan.now - revoked_at) as f64 / 1000.0);
            break;
        }
    }
    let revocation_frames = lan.sent - sent_rev0;
    let kib_per_host = (rss1.saturating_sub(rss0)) as f64 / n as f64;
    let server_peers = lan.hosts[0].certified_peers();
    let member_peers = lan.hosts[n - 2].certified_peers();
    eprintln!(
        "membership_scale: the key server knows {server_peers} hosts, a member {member_peers}; {} KiB resident for all",
        rss1.saturating_sub(rss0)
    );
    println!(
        "RESULT hosts={n} members_know={know} rotation_ms={} rotation_frames={rotation_frames} revocation_ms={} revocation_frames={revocation_frames} kib_per_host={kib_per_host:.0} wall_s={:.1}",
        rotation_ms.map_or("na".into(), |v| format!("{v:.1}")),
        revocation_ms.map_or("na".into(), |v| format!("{v:.1}")),
        started.elapsed().as_secs_f64()
    );
}
