//! A deterministic simulator of whole hosts: several real [`psp_core::host::Host`]s, two
//! segments (paths) between them, a virtual clock, one seed, and the faults, operator events and
//! attackers of a hostile network, with invariants checked after every event (in the spirit of
//! FoundationDB's simulation testing and TigerBeetle's VOPR).
//!
//! Nothing here decides protocol policy: every host is the shipped `Host`, driven the way
//! psp-gateway's driver drives it (events first, then transmits, departures and deliveries; the
//! state directory's reservations, Request-clock floor and first-use pins persisted as the
//! daemon persists them, through [`psp_core::host`]'s own helpers). What the simulator adds is
//! the world around the hosts:
//!
//! | file | what it holds |
//! |---|---|
//! | `scenario.rs` | [`Scenario`]: how many hosts, keyings, identities, SMKEX, each host's KEM mode, normalization, which faults, operator events and attackers a run may use |
//! | `action.rs` | [`Action`]: one input to the world (time passing, traffic, a restart, a fault, an attack), and the seeded swarm generator |
//! | `node.rs` | one simulated gateway: its `Host`, state directory, clock and random generator |
//! | `app.rs` | the protected hosts' traffic: tagged inner frames, what each host received |
//! | `net.rs` | the two segments: delay, jitter, loss, duplication, partitions, frames in flight |
//! | `attacker.rs` | the attacker: captures, replays, drops and holds, forgeries with the group key, rewrites, puppet handshakes, what keys it knows |
//! | `check.rs` | the invariants and [`Violation`] |
//! | `world.rs` | [`World`]: everything above on one clock, one event at a time |
//! | `search.rs` | seeded swarm runs, shrinking a failing run, printing it as a unit test |
//!
//! Every run is reproducible from its [`Scenario`] (which holds the seed) and its list of
//! [`Action`]s; [`search::to_test`] prints a failing one as a ready-to-paste test.

mod action;
mod app;
mod attacker;
mod check;
mod net;
mod node;
mod scenario;
pub mod search;
mod world;

pub use action::{Action, DiskFate, ForgeKind, Rewrite, Target, swarm};
pub use check::{Kind, Violation};
pub use scenario::{Attackers, Faults, Ids, Kem, KeyingMix, Operator, Scenario, Smkex};
pub use world::{DEAD_BOUND, LIVENESS_BOUND, Outcome, RECOVERY_BOUND, Stats, World};

use psp_core::handshake::rand_core::{self, CryptoRng, RngCore};

use crate::Rng;

/// A seeded RNG standing in for a host's OS RNG (SplitMix64: **not cryptographic**; the
/// simulator needs reproducible runs, not secrecy).
#[derive(Clone, Debug)]
pub struct SimRng(Rng);

impl SimRng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Self {
        Self(Rng::new(seed))
    }
}

impl RngCore for SimRng {
    fn next_u32(&mut self) -> u32 {
        self.0.next_u64() as u32
    }
    fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }
    fn fill_bytes(&mut self, dest: &mut [u8]) {
        for chunk in dest.chunks_mut(8) {
            let v = self.0.next_u64().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand_core::Error> {
        self.fill_bytes(dest);
        Ok(())
    }
}

impl CryptoRng for SimRng {}

/// A 64-bit mix of `seed` and `x` (SplitMix64's finalizer): decisions keyed by content, so a
/// shrunk run keeps the decisions about the frames it still has.
pub(crate) fn mix(seed: u64, x: u64) -> u64 {
    let mut z = seed ^ x.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A 64-bit digest of bytes (FNV-1a, then [`mix`]).
pub(crate) fn digest(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    mix(h, bytes.len() as u64)
}
