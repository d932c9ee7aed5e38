//! psp-multipath's sans-I/O protocol never panics and never hangs on hostile bytes: a
//! responder's set-up fed arbitrary bytes (and closes) after valid hellos, in either mode, with
//! or without ML-KEM-768, and an established data-phase connection (each cipher, each
//! path-failure policy) fed arbitrary bytes on both paths, with reads, path failures and timers
//! in between. Errors are fine; a panic is a bug.
#![no_main]

use libfuzzer_sys::fuzz_target;
use psp_core::handshake::Tai64n;
use psp_core::handshake::rand_core::{CryptoRng, Error as RngError, RngCore};
use psp_core::time::{Duration, Instant};
use psp_multipath::proto::{Connection, Established, Read, Setup, SetupEvent};
use psp_multipath::wire::HELLO_LEN;
use psp_multipath::{Cipher, Error, KemMode, Mode, OnPathFailure, Options};

/// A deterministic RNG (an LCG; no security needed here).
struct Lcg(u64);

impl RngCore for Lcg {
    fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }
    fn next_u64(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0
    }
    fn fill_bytes(&mut self, dest: &mut [u8]) {
        for b in dest {
            *b = (self.next_u64() >> 56) as u8;
        }
    }
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), RngError> {
        self.fill_bytes(dest);
        Ok(())
    }
}

impl CryptoRng for Lcg {}

const T0: Instant = Instant::from_secs(1);

/// A set-up between `io` and `ro` in memory: the responder's end.
fn responder_end(io: &Options, ro: &Options) -> Option<Established> {
    let mut init = Setup::initiate(T0, io, Tai64n::from_unix(1, 0), Box::new(Lcg(1)));
    let out: Vec<Vec<u8>> = (0..2)
        .map(|i| {
            let b = init.poll_transmit(i).to_vec();
            init.transmitted(i, b.len());
            b
        })
        .collect();
    let hellos: Vec<[u8; HELLO_LEN]> = out
        .iter()
        .map(|b| b[..HELLO_LEN].try_into().unwrap())
        .collect();
    let mut resp = Setup::respond(T0, ro, &hellos, Box::new(Lcg(2)));
    for (i, b) in out.iter().enumerate() {
        resp.handle_recv(T0, i, &b[HELLO_LEN..]);
    }
    for _ in 0..10 {
        for i in 0..2 {
            let b = resp.poll_transmit(i).to_vec();
            resp.transmitted(i, b.len());
            init.handle_recv(T0, i, &b);
            let b = init.poll_transmit(i).to_vec();
            init.transmitted(i, b.len());
            resp.handle_recv(T0, i, &b);
        }
        if let Some(SetupEvent::Established(e)) = resp.poll_event() {
            return Some(*e);
        }
    }
    None
}

fuzz_target!(|input: &[u8]| {
    let Some((&mode, rest)) = input.split_first() else {
        return;
    };
    let cipher = Cipher::ALL[usize::from(mode & 3)];
    let policy = if mode & 4 == 0 {
        OnPathFailure::Close
    } else {
        OnPathFailure::Continue {
            allow_untrusted_only: mode & 8 != 0,
        }
    };
    let o = Options {
        cipher,
        on_path_failure: policy,
        ..Options::default()
    };
    if mode & 0x80 != 0 {
        // A responder's set-up: valid hellos, then the input as what follows on each path;
        // with ML-KEM-768 offered (0x40), in kernel MPTCP mode (0x20: one connection), a peer
        // closing a connection (a chunk starting 0xee).
        let o = Options {
            kem: if mode & 0x40 != 0 {
                KemMode::Preferred
            } else {
                KemMode::Off
            },
            mode: if mode & 0x20 != 0 {
                Mode::KernelMptcp
            } else {
                Mode::Dispersal
            },
            ..o
        };
        let slots = if o.mode == Mode::KernelMptcp { 1 } else { 2 };
        let init = Setup::initiate(T0, &o, Tai64n::from_unix(1, 0), Box::new(Lcg(3)));
        let hellos: Vec<[u8; HELLO_LEN]> = (0..slots)
            .map(|i| init.poll_transmit(i)[..HELLO_LEN].try_into().unwrap())
            .collect();
        let mut resp = Setup::respond(T0, &o, &hellos, Box::new(Lcg(4)));
        for (k, chunk) in rest.chunks(37).enumerate() {
            let now = T0 + Duration::from_millis(k as u64);
            if chunk.first() == Some(&0xee) {
                resp.handle_eof(now, k % slots);
            } else {
                resp.handle_recv(now, k % slots, chunk);
            }
            let _ = resp.poll_event();
            let _ = resp.poll_timeout();
        }
        resp.handle_timeout(T0 + Duration::from_secs(60));
        return;
    }
    let Some(est) = responder_end(&o, &o) else {
        return;
    };
    let mut c = Connection::new(T0, est, &o);
    let mut now = T0;
    let mut buf = [0u8; 4096];
    for (k, chunk) in rest.chunks(61).enumerate() {
        let slot = k % 2;
        now += Duration::from_millis(30);
        match c.needs_input(slot) {
            Ok(true) => {
                let space = c.recv_buf(slot);
                let n = space.len().min(chunk.len());
                space[..n].copy_from_slice(&chunk[..n]);
                c.handle_recv(slot, n);
            }
            Ok(false) => {}
            Err(_) => return,
        }
        if chunk.first() == Some(&0xee) {
            let _ = c.handle_path_failed(now, slot, Error::Protocol("fuzz"));
        }
        for _ in 0..64 {
            match c.read(now, &mut buf) {
                Ok(Read::Data(_)) => {}
                Ok(_) | Err(_) => break,
            }
        }
        c.handle_timeout(now);
        let _ = c.write(now, chunk);
        for i in 0..2 {
            let n = c.poll_transmit(i).len();
            c.transmitted(i, n);
        }
        while c.poll_event().is_some() {}
    }
});
