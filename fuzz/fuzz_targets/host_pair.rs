//! Two real hosts with a session between them; the fuzzer's bytes become what host B sends host
//! A, sealed under B's real keys so they pass the ICV: session frames of any sub-protocol
//! (control, normalized stream payloads, group copies, data), handshake messages under the
//! group key on either path (new, or B's last one altered), broadcasts; and time passing,
//! frames from A's protected side, restarts of A, raw bytes. A must never panic, never spin
//! (a timer that does not act), and never deliver a frame as coming from a peer other than B.
//!
//! Input: a flags byte (bit 0: both hosts normalize; bit 1: identities, pinned; bit 2: SMKEX
//! over two paths), then operations: an op byte, a length byte, that many data bytes.
#![no_main]

use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr};

use libfuzzer_sys::fuzz_target;
use psp_core::handshake::{Identity, KeyRingConfig, PathId, SmkexMode, Tai64n};
use psp_core::host::{
    Claim, Host, HostConfig, HostEvent, KeySpec, Keying, NormSpec, PeerId, PeerSpec, Pin, Received,
    Resume, SessionSettings, TapJob, TapResult,
};
use psp_core::protect::{OpenerConfig, SealerConfig};
use psp_core::time::Duration;
use psp_core::{Instant, Protocol, Sealer, Seq, SuiteId, SuiteKey};
use psp_test::sim::SimRng;
use zeroize::Zeroizing;

const MAC: [[u8; 6]; 2] = [[2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]];
const GROUP: [u8; 16] = [0x42; 16];

fn ip(i: usize) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 9, 0, i as u8 + 1))
}

fn identity(i: usize) -> Identity {
    // The seeds are found once (a seed whose public key has sign 0), then reused.
    static SEEDS: std::sync::OnceLock<[[u8; 32]; 2]> = std::sync::OnceLock::new();
    let seeds = SEEDS.get_or_init(|| {
        core::array::from_fn(|i| {
            let mut k = i as u8 + 7;
            *Identity::generate(|s| {
                s.fill(k);
                k = k.wrapping_add(100);
            })
            .unwrap()
            .seed()
        })
    });
    Identity::from_seed(seeds[i]).unwrap()
}

fn group() -> KeySpec {
    KeySpec {
        suite: SuiteId::Aes128Gcm,
        key: Zeroizing::new(GROUP.to_vec()),
        sealer: SealerConfig::new(),
        opener: OpenerConfig::new(),
    }
}

#[derive(Clone, Copy)]
struct Flags {
    normalize: bool,
    ids: bool,
    two_path: bool,
}

fn host(i: usize, f: Flags, resume: Resume) -> Host {
    let mut hs = psp_core::handshake::Config::new(MAC[i], ip(i), 24);
    hs.smkex = if f.two_path {
        SmkexMode::Required
    } else {
        SmkexMode::Off
    };
    hs.static_key = f.ids.then(|| identity(i).static_key());
    let cfg = HostConfig {
        mac: MAC[i],
        subnets: vec![(ip(i), 24)],
        paths: 2,
        max_frame: 1514,
        session: Some(SessionSettings {
            handshake: hs,
            address: (ip(i), 24),
            rekey_after: Duration::from_secs(20),
            ring: KeyRingConfig::default(),
            queue: 16,
            keepalive: SessionSettings::KEEPALIVE,
            dead_after: SessionSettings::DEAD_AFTER,
            paths: psp_core::host::PathMode::default(),
            probe_every: psp_core::host::PROBE_EVERY,
            down_after: psp_core::host::DOWN_AFTER,
        }),
        wall_origin: Tai64n::from_unix(1_800_000_000, 0),
        group_copies: true,
        pki: None,
    };
    let j = 1 - i;
    let peer = PeerSpec {
        name: format!("h{j}"),
        macs: vec![MAC[j]],
        keying: Keying::Session {
            pin: if f.ids {
                Pin::Configured(identity(j).public_key())
            } else {
                Pin::None
            },
            address: Some(ip(j)),
        },
        paths: 2,
        normalize: f.normalize.then(|| NormSpec {
            cfg: slow_stream(),
            frame_size: 600,
            wire_extra: 0,
            lead: Duration::ZERO,
        }),
    };
    let signer = f.ids.then(|| identity(i).signing_key().unwrap());
    Host::new(Instant::ZERO, cfg, group(), signer, vec![peer], resume).unwrap()
}

/// A slow stream: a time step then costs a few frames, not thousands.
fn slow_stream() -> psp_core::normalize::NormConfig {
    let mut c = psp_core::normalize::NormConfig::default();
    c.s_goal = psp_core::normalize::Rate::from_kbps(200);
    c.s_min = psp_core::normalize::Rate::from_kbps(40);
    c.s_step = psp_core::normalize::Rate::from_kbps(40);
    c
}

/// Two hosts, a wire between them, a clock.
struct Pair {
    h: [Host; 2],
    now: Instant,
    rng: SimRng,
    wire: VecDeque<(usize, PathId, Vec<u8>)>,
    marks: [u32; 2],
    /// The group-key sealer of B's name the fuzzer writes with.
    forger: Sealer,
    /// B's last handshake message to A (payload, protocol, path).
    last_hs: Option<(Vec<u8>, Protocol, PathId)>,
}

impl Pair {
    fn drain(&mut self, i: usize) {
        let mut buf = vec![0u8; 2048];
        for _ in 0..64 {
            let mut busy = false;
            while let Some(e) = self.h[i].poll_event() {
                busy = true;
                match e {
                    HostEvent::Reserve { key, next, .. } => {
                        let from = next.map_or(self.marks[i], |n| n.0);
                        let limit = from.max(self.marks[i]) + (1 << 16);
                        self.marks[i] = limit;
                        self.h[i].handle_reserved(
                            key,
                            Claim {
                                from: Seq(from),
                                limit: Seq(limit),
                            },
                        );
                    }
                    HostEvent::ClockFloor(f) => self.h[i].handle_clock_floor_saved(f, true),
                    HostEvent::PinLearned { peer, .. } => {
                        self.h[i].handle_pin_saved(self.now, peer, true, &mut self.rng)
                    }
                    _ => {}
                }
            }
            while let Some(t) = self.h[i].poll_transmit(self.now, &mut buf, &mut self.rng) {
                busy = true;
                if self.wire.len() < 256 {
                    self.wire.push_back((i, t.path, buf[..t.len].to_vec()));
                }
            }
            while let Some((peer, _)) = self.h[i].poll_delivery(self.now, &mut buf, &mut self.rng) {
                busy = true;
                assert_eq!(peer, PeerId(0), "a delivery from no peer of ours");
            }
            if !busy {
                return;
            }
        }
    }

    /// Hands frame `f` from host `from` to the other on `path`.
    fn give(&mut self, from: usize, path: PathId, mut f: Vec<u8>) {
        let to = 1 - from;
        if from == 1 && f.get(12..14) == Some(&[0x19, 0x82]) {
            self.note_handshake(&f, path);
        }
        let r = self.h[to].handle_uplink(self.now, path, &mut f, &mut self.rng);
        if let Received::Deliver { peer, range, .. } = r {
            assert_eq!(peer, PeerId(0));
            assert!(range.end <= f.len() && range.len() >= 14);
        }
        self.drain(to);
    }

    /// Keeps B's handshake messages to A (opened with the group key) for the mutation op.
    fn note_handshake(&mut self, f: &[u8], path: PathId) {
        let mut o = psp_core::Opener::new(
            SuiteKey::new(SuiteId::Aes128Gcm, &GROUP).unwrap(),
            OpenerConfig::new(),
        )
        .unwrap();
        o.set_accept_unverified(true);
        let mut f = f.to_vec();
        if let Ok(opened) = o.open(Instant::ZERO, &mut f)
            && matches!(
                opened.protocol(),
                Protocol::SessionEstablishment | Protocol::KeyExchange
            )
        {
            self.last_hs = Some((opened.payload().to_vec(), opened.protocol(), path));
        }
    }

    fn pump(&mut self) {
        self.drain(0);
        self.drain(1);
        let mut n = 0;
        while let Some((from, path, f)) = self.wire.pop_front() {
            self.give(from, path, f);
            n += 1;
            if n > 2000 {
                self.wire.clear();
                return;
            }
        }
    }

    fn advance(&mut self, ms: u64) {
        let end = self.now + Duration::from_millis(ms);
        for _ in 0..400 {
            let next = [self.h[0].poll_timeout(), self.h[1].poll_timeout()]
                .into_iter()
                .flatten()
                .min();
            let Some(t) = next.filter(|t| *t <= end) else {
                break;
            };
            self.now = self.now.max(t);
            for i in 0..2 {
                if self.h[i].poll_timeout().is_some_and(|t| t <= self.now) {
                    self.h[i].handle_timeout(self.now, &mut self.rng);
                    self.drain(i);
                    // A timer that fired and did not act would wake the host again at once.
                    let again = self.h[i].poll_timeout().is_some_and(|t| t <= self.now);
                    if again {
                        self.h[i].handle_timeout(self.now, &mut self.rng);
                        self.drain(i);
                        assert!(
                            self.h[i].poll_timeout().is_none_or(|t| t > self.now),
                            "a timer that does not act"
                        );
                    }
                }
            }
            self.pump();
        }
        self.now = self.now.max(end);
    }

    /// A group-key frame in B's name (signed with B's identity when hosts have one).
    fn forge(&mut self, dst: [u8; 6], proto: Protocol, payload: &[u8]) -> Option<Vec<u8>> {
        let mut out = vec![0u8; 2048];
        let f = self
            .forger
            .seal_sub(self.now, dst, MAC[1], proto, payload, &mut out)
            .ok()?;
        Some(f.to_vec())
    }
}

fn ping(from: usize, body: &[u8]) -> Vec<u8> {
    let mut f = MAC[1 - from].to_vec();
    f.extend_from_slice(&MAC[from]);
    f.extend_from_slice(&[0x08, 0x00, 0x45, 0, 0, 28, 0, 0, 0, 0, 64, 1, 0, 0]);
    f.extend_from_slice(&[10, 9, 0, from as u8 + 1, 10, 9, 0, 2 - from as u8]);
    f.extend_from_slice(body);
    f
}

fuzz_target!(|input: &[u8]| {
    let Some((&flags, mut ops)) = input.split_first() else {
        return;
    };
    let f = Flags {
        normalize: flags & 1 != 0,
        ids: flags & 2 != 0,
        two_path: flags & 4 != 0,
    };
    let mut forger = Sealer::new(
        SuiteKey::new(SuiteId::Aes128Gcm, &GROUP).unwrap(),
        Seq(0x7000_0000),
        SealerConfig::new(),
    )
    .unwrap();
    if f.ids {
        forger.set_signer(identity(1).signing_key().ok());
    }
    let mut p = Pair {
        h: [host(0, f, Resume::default()), host(1, f, Resume::default())],
        now: Instant::from_secs(1),
        rng: SimRng::new(u64::from(flags)),
        wire: VecDeque::new(),
        marks: [1000, 5000],
        forger,
        last_hs: None,
    };
    p.pump();
    // The session: B's first frame to A starts it.
    let mut out = vec![0u8; 2048];
    let first = ping(1, b"hello");
    let mut jobs = [TapJob::new(&first, &mut out)];
    p.h[1].handle_tap(p.now, &mut jobs, &mut p.rng);
    p.drain(1);
    p.pump();
    p.advance(100);
    for _ in 0..64 {
        let [op, len, rest @ ..] = ops else {
            break;
        };
        let n = usize::from(*len).min(rest.len());
        let (data, tail) = rest.split_at(n);
        ops = tail;
        match op % 10 {
            // B's protected side sends a frame to A (sealed by B's host).
            0 => {
                let inner = ping(1, data);
                let mut out = vec![0u8; 2048];
                let mut jobs = [TapJob::new(&inner, &mut out)];
                p.h[1].handle_tap(p.now, &mut jobs, &mut p.rng);
                if let TapResult::Sealed { len, .. } = jobs[0].result {
                    p.wire.push_back((1, PathId::FIRST, out[..len].to_vec()));
                }
                p.drain(1);
                p.pump();
            }
            // Any sub-protocol (or EtherType) under B's session keys: control, stream payloads,
            // group copies, data.
            1 | 9 => {
                let proto = match (op % 10, data) {
                    (9, _) => Protocol::Normalized,
                    (_, [a, b, ..]) => Protocol::from(u16::from_be_bytes([*a, *b])),
                    _ => Protocol::Control,
                };
                let payload = if op % 10 == 9 {
                    data
                } else {
                    data.get(2..).unwrap_or(&[])
                };
                let mut out = vec![0u8; 2048];
                if let Some(len) = p.h[1].fuzz_seal(p.now, PeerId(0), proto, payload, &mut out) {
                    p.give(1, PathId::FIRST, out[..len].to_vec());
                }
            }
            // A handshake message under the group key, on either path.
            2 => {
                let (proto, path) = match data.first() {
                    Some(b) if b & 1 == 1 => (Protocol::KeyExchange, PathId(b >> 1 & 1)),
                    Some(b) => (Protocol::SessionEstablishment, PathId(b >> 1 & 1)),
                    None => (Protocol::SessionEstablishment, PathId::FIRST),
                };
                if let Some(fr) = p.forge(MAC[0], proto, data.get(1..).unwrap_or(&[])) {
                    p.give(1, path, fr);
                }
            }
            // A broadcast under the group key.
            3 => {
                let mut inner = [0xff; 6].to_vec();
                inner.extend_from_slice(&MAC[1]);
                inner.extend_from_slice(data);
                let mut out = vec![0u8; 2048];
                if let Ok(fr) = p.forger.seal(p.now, &inner, &mut out) {
                    let fr = fr.to_vec();
                    p.give(1, PathId::FIRST, fr);
                }
            }
            // B's last handshake message, altered by the data (XOR), sealed again.
            4 => {
                if let Some((mut msg, proto, path)) = p.last_hs.clone() {
                    for (i, b) in data.iter().enumerate() {
                        if let Some(m) = msg.get_mut(i) {
                            *m ^= b;
                        }
                    }
                    if let Some(fr) = p.forge(MAC[0], proto, &msg) {
                        p.give(1, path, fr);
                    }
                }
            }
            // Time passes.
            5 => {
                let ms = data.iter().map(|b| u64::from(*b)).sum::<u64>() * 40;
                p.advance(ms.clamp(1, 30_000));
            }
            // A's protected side sends a frame to B.
            6 => {
                let inner = ping(0, data);
                let mut out = vec![0u8; 2048];
                let mut jobs = [TapJob::new(&inner, &mut out)];
                p.h[0].handle_tap(p.now, &mut jobs, &mut p.rng);
                if let TapResult::Sealed { len, .. } = jobs[0].result {
                    p.wire.push_back((0, PathId::FIRST, out[..len].to_vec()));
                }
                p.drain(0);
                p.pump();
            }
            // A restarts (its replay floors kept, or lost).
            7 => {
                let floors = if data.first().is_some_and(|b| b & 1 == 1) {
                    p.h[0].replay_floors()
                } else {
                    Vec::new()
                };
                p.h[0] = host(
                    0,
                    f,
                    Resume {
                        clock: None,
                        floors,
                    },
                );
                p.drain(0);
                p.pump();
            }
            // Raw bytes, unauthenticated.
            _ => {
                let path = PathId(data.first().map_or(0, |b| b & 1));
                let mut raw = data.to_vec();
                let _ = p.h[0].handle_uplink(p.now, path, &mut raw, &mut p.rng);
                p.drain(0);
            }
        }
    }
});
