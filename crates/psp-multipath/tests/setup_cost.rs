//! What a set-up costs in CPU, with no socket: both sides' `Setup` driven in memory in one
//! thread, each phase timed, against the one-path baseline that `psp-mp dh` runs (X25519, or
//! X25519 + ML-KEM-768) doing the same arithmetic in memory. It separates the protocol's own
//! work from what the network and the kernel add in `testbed/multipath.sh`'s set-up times
//! (docs/MULTIPATH.md, "Set-up cost").
//!
//! `cargo test --release -p psp-multipath --test setup_cost -- --ignored --nocapture`
#![allow(missing_docs)]

use core::time::Duration;
use std::time::Instant as StdInstant;

use psp_core::handshake::kem::{KemKeyPair, encapsulate};
use psp_core::handshake::messages::KemKey;
use psp_core::handshake::schedule::Ephemeral;
use psp_core::handshake::{Role, Tai64n};
use psp_core::time::Instant;
use psp_multipath::proto::{Connection, Established, Setup, SetupEvent};
use psp_multipath::wire::HELLO_LEN;
use psp_multipath::{KemMode, Mode, Options};
use rand_core::{OsRng, RngCore};

/// The driver's RNG in effect: one read of the OS generator per set-up, handed out piece by
/// piece.
struct OneRead([u8; 256], usize);

impl OneRead {
    fn new() -> Box<Self> {
        let mut b = [0u8; 256];
        OsRng.fill_bytes(&mut b);
        Box::new(Self(b, 0))
    }
}

impl RngCore for OneRead {
    fn next_u32(&mut self) -> u32 {
        rand_core::impls::next_u32_via_fill(self)
    }
    fn next_u64(&mut self) -> u64 {
        rand_core::impls::next_u64_via_fill(self)
    }
    fn fill_bytes(&mut self, dest: &mut [u8]) {
        dest.copy_from_slice(&self.0[self.1..self.1 + dest.len()]);
        self.1 += dest.len();
    }
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand_core::Error> {
        self.fill_bytes(dest);
        Ok(())
    }
}

impl rand_core::CryptoRng for OneRead {}

/// Per set-up, in ns: initiator's first flight, responder's answer, initiator's keys and tag
/// check, responder's tag check, both streams built.
#[derive(Default, Clone, Copy)]
struct Phases([u128; 5]);

const T0: Instant = Instant::from_secs(1);

fn established(s: &mut Setup) -> Established {
    match s.poll_event() {
        Some(SetupEvent::Established(e)) => *e,
        other => panic!("{other:?}"),
    }
}

/// Everything `s` has to send, slot by slot.
fn take(s: &mut Setup, slots: usize) -> Vec<Vec<u8>> {
    (0..slots)
        .map(|i| {
            let b = s.poll_transmit(i).to_vec();
            s.transmitted(i, b.len());
            b
        })
        .collect()
}

/// One set-up between two `o`s, each phase timed. Both flows reach the end in the same four
/// steps: the thesis flow takes more steps inside the two middle ones, where the
/// network would add round trips.
fn setup(o: &Options) -> Phases {
    let slots = if o.mode == Mode::KernelMptcp { 1 } else { 2 };
    let ts = Tai64n::from_unix(1_700_000_000, 0);
    let mut p = Phases::default();
    let t = StdInstant::now();
    let mut init = Setup::initiate(T0, o, ts, OneRead::new());
    let mut out = take(&mut init, slots);
    p.0[0] = t.elapsed().as_nanos();
    let t = StdInstant::now();
    let hellos: Vec<[u8; HELLO_LEN]> = out
        .iter()
        .map(|b| b[..HELLO_LEN].try_into().unwrap())
        .collect();
    let mut resp = Setup::respond(T0, o, &hellos, OneRead::new());
    for (i, b) in out.iter().enumerate() {
        resp.handle_recv(T0, i, &b[HELLO_LEN..]);
    }
    let mut back = take(&mut resp, slots);
    p.0[1] = t.elapsed().as_nanos();
    // The thesis flow's extra round trips: answer until the initiator has its keys.
    let mut to_init = Duration::ZERO;
    let mut to_resp = Duration::ZERO;
    loop {
        let t = StdInstant::now();
        for (i, b) in back.iter().enumerate() {
            init.handle_recv(T0, i, b);
        }
        out = take(&mut init, slots);
        to_init += t.elapsed();
        if init.has_keys() {
            break;
        }
        let t = StdInstant::now();
        for (i, b) in out.iter().enumerate() {
            resp.handle_recv(T0, i, b);
        }
        back = take(&mut resp, slots);
        to_resp += t.elapsed();
    }
    let t = StdInstant::now();
    let ie = established(&mut init);
    to_init += t.elapsed();
    let t = StdInstant::now();
    for (i, b) in out.iter().enumerate() {
        resp.handle_recv(T0, i, b);
    }
    let re = established(&mut resp);
    p.0[2] = to_init.as_nanos();
    p.0[3] = (to_resp + t.elapsed()).as_nanos();
    let t = StdInstant::now();
    let a = Connection::new(T0, ie, o);
    let b = Connection::new(T0, re, o);
    p.0[4] = t.elapsed().as_nanos();
    drop((a, b));
    p
}

/// The one-path baseline (`psp-mp dh`): initiator keys (and ML-KEM key pair), responder keys,
/// (encapsulation) and DH, initiator (decapsulation and) DH.
fn dh(kem: bool) -> Phases {
    let mut p = Phases::default();
    let eph = || {
        let mut s = [0u8; 32];
        OsRng.fill_bytes(&mut s);
        Ephemeral::from_bytes(s)
    };
    let t = StdInstant::now();
    let ei = eph();
    let share_i = ei.public_share();
    let pair = kem.then(|| {
        let mut seed = [0u8; 64];
        OsRng.fill_bytes(&mut seed);
        KemKeyPair::from_seed(
            seed[..32].try_into().unwrap(),
            seed[32..].try_into().unwrap(),
        )
    });
    let ek = pair.as_ref().map(|p| *p.encapsulation_key().as_bytes());
    p.0[0] = t.elapsed().as_nanos();
    let t = StdInstant::now();
    let er = eph();
    let share_r = er.public_share();
    let (ct, k_r) = match ek {
        Some(ek) => {
            let mut m = [0u8; 32];
            OsRng.fill_bytes(&mut m);
            let (c, k) = encapsulate(&KemKey::new(&ek).unwrap(), &m);
            (Some(c), Some(k))
        }
        None => (None, None),
    };
    er.complete_hybrid(Role::Responder, k_r.as_ref(), &share_i, None, None)
        .unwrap();
    p.0[1] = t.elapsed().as_nanos();
    let t = StdInstant::now();
    let k_i = pair.zip(ct).map(|(p, c)| p.decapsulate(&c));
    ei.complete_hybrid(Role::Initiator, k_i.as_ref(), &share_r, None, None)
        .unwrap();
    p.0[2] = t.elapsed().as_nanos();
    p
}

fn median(v: &mut [u128]) -> u128 {
    v.sort_unstable();
    v[v.len() / 2]
}

#[test]
#[ignore = "a measurement: cargo test --release -p psp-multipath --test setup_cost -- --ignored --nocapture"]
fn setup_cpu_cost_against_one_path_dh() {
    let kinds: Vec<(String, Option<Options>, bool)> = {
        let mut k = Vec::new();
        for mode in [Mode::Dispersal, Mode::KernelMptcp] {
            for compact in [true, false] {
                for kem in [KemMode::Off, KemMode::Required] {
                    let name = format!(
                        "{} {} {}",
                        if mode == Mode::Dispersal {
                            "dispersal"
                        } else {
                            "kernel-mptcp"
                        },
                        if compact { "compact" } else { "thesis" },
                        if kem == KemMode::Off {
                            "x25519"
                        } else {
                            "x25519+mlkem768"
                        }
                    );
                    let o = Options {
                        mode,
                        compact_handshake: compact,
                        kem,
                        ..Options::default()
                    };
                    k.push((name, Some(o), kem != KemMode::Off));
                }
            }
        }
        k.push(("one-path dh x25519".into(), None, false));
        k.push(("one-path dh x25519+mlkem768".into(), None, true));
        k
    };
    let (rounds, per) = (10, 100);
    let mut samples: Vec<Vec<Phases>> = vec![Vec::new(); kinds.len()];
    for _ in 0..rounds {
        for (i, (_, o, kem)) in kinds.iter().enumerate() {
            for _ in 0..per {
                samples[i].push(match o {
                    Some(o) => setup(o),
                    None => dh(*kem),
                });
            }
        }
    }
    println!(
        "CPU per set-up, both sides in one thread, medians of {} in {rounds} interleaved rounds (µs):",
        rounds * per
    );
    println!(
        "| kind | total | initiator: first flight | responder: answer | initiator: keys, tags | responder: tag check | streams built |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (i, (name, _, _)) in kinds.iter().enumerate() {
        let mut total: Vec<u128> = samples[i].iter().map(|p| p.0.iter().sum()).collect();
        let mut cols = [0u128; 5];
        for (c, col) in cols.iter_mut().enumerate() {
            let mut v: Vec<u128> = samples[i].iter().map(|p| p.0[c]).collect();
            *col = median(&mut v);
        }
        let us = |ns: u128| format!("{:.1}", ns as f64 / 1000.0);
        println!(
            "| {name} | {} | {} | {} | {} | {} | {} |",
            us(median(&mut total)),
            us(cols[0]),
            us(cols[1]),
            us(cols[2]),
            us(cols[3]),
            us(cols[4])
        );
    }
}
