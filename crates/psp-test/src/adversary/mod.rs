//! An adversary that keeps looking: honest hosts running psp-core's handshake
//! ([`psp_core::handshake::Handshake`]) under the responder rules of the gateway, a scheduler
//! that lets an attacker drop, delay, duplicate, replay, reorder, splice and rewrite their
//! messages and run handshakes of its own, and invariants checked after every step.
//!
//! | file | what it holds |
//! |---|---|
//! | `party.rs` | [`Party`]: what the harness needs of an honest host (a frame in, frames out, time, an [`Observation`] for the invariants) |
//! | `gateway.rs` | [`GatewayParty`]: the reference host: the core's [`Handshake`](psp_core::handshake::Handshake) and [`KeyRing`](psp_core::handshake::KeyRing) under the gateway's rules (freshness, crossing, limiter, backoff) |
//! | `attacker.rs` | [`Attacker`]: what it sees, its own handshakes ("puppets"), its rewrites, and what it can compute (the key oracle) |
//! | `world.rs` | [`World`]: hosts, the two paths, the attacker, the virtual clock, [`Action`]s and the invariants |
//! | `explore.rs` | seeded random walks and an exhaustive (bounded-depth, state-deduplicated) search over [`Action`]s |
//!
//! The model: every host has two paths to every other. A frame is a handshake message (what
//! the gateway seals under the group key) or a PSP frame under a session key. The group-key
//! layer is transparent to the attacker, which is an insider (it has the group key): the worst
//! case of docs/SESSIONS.md's attacker table. Its position ([`Position`]) says on which path it
//! sees frames, injects frames, and drops or rewrites them. Time is a
//! [`psp_core::time::Instant`] advanced by the scheduler; every run is reproducible from its
//! seed and its list of actions.
//!
//! What it does not model: frame signatures and the group replay windows of the gateway (the
//! attacker may forge any source MAC), frame loss other than the attacker's, link delay (a
//! delivery takes no time; the attacker delays by holding a frame while time passes), and the
//! psp-multipath binding tags (a compact responder's keys count as confirmed by the
//! initiator's first frame on path 2, which stands in for them).

mod attacker;
mod explore;
mod gateway;
mod party;
mod world;

pub use attacker::{Attacker, KnownKey, Op, PuppetKind};
pub use explore::{ExhaustiveStats, Explorer, RandomStats, RunOutcome};
pub use gateway::{FreshnessRule, GatewayParty, HostSpec, Rules};
pub use party::{Frame, FrameBody, Mac, Observation, Party, SessionView, SlotKind};
pub use world::{
    Action, Alphabet, Caps, EnvBudget, Flow, Identities, LIVENESS_WINDOW, Position, Scenario,
    Violation, ViolationKind, World,
};

use psp_core::handshake::rand_core::{self, CryptoRng, RngCore};

use crate::Rng;

/// A seeded RNG standing in for the OS RNG of the simulated hosts (SplitMix64: **not
/// cryptographic**; the harness needs reproducible runs, not secrecy).
#[derive(Clone, Debug)]
pub struct SimRng {
    inner: Rng,
    /// The first 32-byte draw, if recording (the ephemeral secret of a handshake created with
    /// this RNG: the attacker keeps those of its own handshakes).
    first_key: Option<[u8; 32]>,
    recording: bool,
}

impl SimRng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Self {
        Self {
            inner: Rng::new(seed),
            first_key: None,
            recording: false,
        }
    }

    /// A generator that remembers its first 32-byte draw ([`first_key`](Self::first_key)).
    pub fn recording(seed: u64) -> Self {
        Self {
            recording: true,
            ..Self::new(seed)
        }
    }

    /// The first 32-byte draw, if recording.
    pub fn first_key(&self) -> Option<[u8; 32]> {
        self.first_key
    }

    /// The next 64 random bits.
    pub fn next_random(&mut self) -> u64 {
        self.inner.next_u64()
    }
}

impl RngCore for SimRng {
    fn next_u32(&mut self) -> u32 {
        self.inner.next_u64() as u32
    }
    fn next_u64(&mut self) -> u64 {
        self.inner.next_u64()
    }
    fn fill_bytes(&mut self, dest: &mut [u8]) {
        for b in dest.iter_mut() {
            *b = self.inner.next_u64() as u8;
        }
        if self.recording
            && self.first_key.is_none()
            && let Ok(k) = <[u8; 32]>::try_from(&*dest)
        {
            self.first_key = Some(k);
        }
    }
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand_core::Error> {
        self.fill_bytes(dest);
        Ok(())
    }
}

impl CryptoRng for SimRng {}

/// A 64-bit digest of anything hashable (SipHash with fixed keys: the same within one build,
/// which is all state deduplication needs).
pub(crate) fn digest<T: core::hash::Hash + ?Sized>(x: &T) -> u64 {
    use core::hash::Hasher;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    x.hash(&mut h);
    h.finish()
}
