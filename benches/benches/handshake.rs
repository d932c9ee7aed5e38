//! Session set-up cost (CPU only, both sides in one thread, messages handed over in memory):
//! the thesis' single-path SEP, SMKEX over two paths, each also with ML-KEM-768 beside X25519
//! (`_kem`: the hybrid post-quantum handshake, `KemMode::Required` on both sides), and a plain
//! X25519 Diffie-Hellman (both key pairs and both shared secrets) as the reference. `psp-gateway`'s wall-clock handshake
//! over real links is in `testbed/sessions.sh`.
//!
//! `cargo bench -p psp-benches --bench handshake`. Duration: 7 benchmarks at about 4.7 s each
//! (see `criterion()`), about 35 s on the project's 2-vCPU guest, build not included.
#![allow(missing_docs)]

use core::hint::black_box;
use core::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use psp_benches::criterion_config;
use psp_core::handshake::messages::MAX_MESSAGE_LEN;
use psp_core::handshake::rand_core::{CryptoRng, Error, RngCore};
use psp_core::handshake::schedule::Ephemeral;
use psp_core::handshake::{Config, Event, Handshake, Identity, KemMode, Peer, Role, SmkexMode};
use psp_core::time::Instant;

/// A fast deterministic RNG (splitmix64): benches only.
struct Rng(u64);

impl RngCore for Rng {
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
        for c in dest.chunks_mut(8) {
            let v = self.next_u64().to_le_bytes();
            c.copy_from_slice(&v[..c.len()]);
        }
    }
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), Error> {
        self.fill_bytes(dest);
        Ok(())
    }
}

impl CryptoRng for Rng {}

const A: [u8; 6] = [2, 0, 0, 0, 0, 1];
const B: [u8; 6] = [2, 0, 0, 0, 0, 2];

/// The handshake's modes: paths, SMKEX and the KEM.
#[derive(Clone, Copy)]
struct Modes(u8, SmkexMode, KemMode);

const SEP: Modes = Modes(1, SmkexMode::Off, KemMode::Off);
const SMKEX: Modes = Modes(2, SmkexMode::Required, KemMode::Off);
const SEP_KEM: Modes = Modes(1, SmkexMode::Off, KemMode::Required);
const SMKEX_KEM: Modes = Modes(2, SmkexMode::Required, KemMode::Required);

fn config(mac: [u8; 6], n: u8, m: Modes, id: Option<&Identity>) -> Config {
    let mut c = Config::new(mac, format!("10.0.0.{n}").parse().unwrap(), 24);
    c.paths = m.0;
    c.smkex = m.1;
    c.kem = m.2;
    c.static_key = id.map(Identity::static_key);
    c
}

fn peer(mac: [u8; 6], n: u8) -> Peer {
    Peer {
        mac,
        addr: format!("10.0.0.{n}").parse().unwrap(),
        pinned_x25519: None,
    }
}

/// One complete handshake; returns whether both sides got keys.
fn handshake(rng: &mut Rng, m: Modes, ids: Option<&(Identity, Identity)>) -> bool {
    let now = Instant::ZERO;
    let (ia, ib) = match ids {
        Some((a, b)) => (Some(a), Some(b)),
        None => (None, None),
    };
    let mut a = Handshake::initiate(
        now,
        config(A, 1, m, ia),
        peer(B, 2),
        psp_core::handshake::Tai64n::from_unix(1, 0),
        rng,
    );
    let mut b: Option<Handshake> = None;
    let mut buf = [0u8; MAX_MESSAGE_LEN];
    let (mut done_a, mut done_b) = (false, false);
    for _ in 0..32 {
        while let Some(t) = a.poll_transmit(now, &mut buf) {
            let msg = &buf[..t.len];
            match b.as_mut() {
                None => {
                    b = Handshake::respond(now, config(B, 2, m, ib), peer(A, 1), t.path, msg, rng)
                        .ok();
                }
                Some(b) => {
                    let _ = b.handle_message(now, t.path, msg);
                }
            }
        }
        if let Some(b) = b.as_mut() {
            while let Some(t) = b.poll_transmit(now, &mut buf) {
                let _ = a.handle_message(now, t.path, &buf[..t.len]);
            }
            while let Some(e) = b.poll_event() {
                done_b |= matches!(e, Event::Established(_));
            }
        }
        while let Some(e) = a.poll_event() {
            done_a |= matches!(e, Event::Established(_));
        }
        if done_a && done_b {
            return true;
        }
    }
    false
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("handshake");
    let mut rng = Rng(1);
    for m in [SEP, SMKEX, SEP_KEM, SMKEX_KEM] {
        assert!(handshake(&mut rng, m, None));
    }
    g.bench_function("plain_x25519_dh", |b| {
        b.iter(|| {
            let mut s = [0u8; 32];
            rng.fill_bytes(&mut s);
            let x = Ephemeral::from_bytes(s);
            rng.fill_bytes(&mut s);
            let y = Ephemeral::from_bytes(s);
            let (px, py) = (x.public_share(), y.public_share());
            black_box((
                x.complete(Role::Initiator, &py, None, None).is_ok(),
                y.complete(Role::Responder, &px, None, None).is_ok(),
            ))
        });
    });
    g.bench_function("sep_single_path", |b| {
        b.iter(|| assert!(handshake(&mut rng, SEP, None)));
    });
    g.bench_function("sep_single_path_kem", |b| {
        b.iter(|| assert!(handshake(&mut rng, SEP_KEM, None)));
    });
    g.bench_function("smkex_two_paths", |b| {
        b.iter(|| assert!(handshake(&mut rng, SMKEX, None)));
    });
    g.bench_function("smkex_two_paths_kem", |b| {
        b.iter(|| assert!(handshake(&mut rng, SMKEX_KEM, None)));
    });
    let ids = (
        Identity::generate(|s| rng.fill_bytes(s)).unwrap(),
        Identity::generate(|s| rng.fill_bytes(s)).unwrap(),
    );
    g.bench_function("smkex_two_paths_identities", |b| {
        b.iter(|| assert!(handshake(&mut rng, SMKEX, Some(&ids))));
    });
    g.bench_function("smkex_two_paths_identities_kem", |b| {
        b.iter(|| assert!(handshake(&mut rng, SMKEX_KEM, Some(&ids))));
    });
    g.finish();
}

/// 1 s warm-up, 3 s measuring, 30 samples: a handshake takes 0.2-0.5 ms, so even the slowest
/// fits its 465 iterations (1 + 2 + ... + 30) in the measuring time.
fn criterion() -> Criterion {
    criterion_config(Duration::from_secs(1), Duration::from_secs(3), 30)
}

criterion_group! {
    name = benches;
    config = criterion();
    targets = bench
}
criterion_main!(benches);
