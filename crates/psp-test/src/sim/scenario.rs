//! [`Scenario`]: what one simulated run may use. A swarm run draws one at random per seed (a
//! random subset of faults, operator events and attackers: most bugs need only a few of them,
//! and runs that leave the others out find those bugs faster).

use crate::Rng;

/// How the hosts protect their unicast frames to each other.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeyingMix {
    /// Sessions between every pair.
    Sessions,
    /// Host 0 and host 1 share a `key_file` key, host 0 and host 2 use the group key, every
    /// other pair runs sessions.
    Mixed,
}

/// The hosts' long-term identities.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ids {
    /// None: any holder of the group key can act as any host.
    None,
    /// Every host has one and every peer pins it in its configuration.
    Configured,
    /// Every host has one; peers pin it on first use (`identity = "tofu"`).
    Tofu,
}

/// The SMKEX policy of every host.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Smkex {
    /// Single-path SEP.
    Off,
    /// Two paths when both sides have them.
    Prefer,
    /// Two paths or no session.
    Require,
}

/// One host's `kem` mode (the hybrid post-quantum handshake, ML-KEM-768 beside X25519).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kem {
    /// X25519 only.
    Off,
    /// The KEM when the peer allows it.
    Prefer,
    /// The KEM or no session.
    Require,
}

impl Kem {
    /// Whether a session between hosts in modes `a` and `b` has the KEM (`Some(true)`), has it
    /// not (`Some(false)`), or must not exist (`None`: one requires it, the other has it off):
    /// docs/SESSIONS.md, "Hybrid post-quantum sessions", the negotiation table.
    pub fn session(a: Self, b: Self) -> Option<bool> {
        match (a, b) {
            (Self::Require, Self::Off) | (Self::Off, Self::Require) => None,
            (Self::Off, _) | (_, Self::Off) => Some(false),
            _ => Some(true),
        }
    }
}

/// Faults of the network (until the quiet phase).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Faults {
    /// Frames lost, per mille.
    pub loss: u16,
    /// Frames duplicated, per mille.
    pub dup: u16,
    /// The fixed delay of each path, µs.
    pub delay_us: u32,
    /// A random extra delay of up to this, µs (frames overtake each other).
    pub jitter_us: u32,
}

/// Which operator events a run may have.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Operator {
    /// Restarts with the state directory intact.
    pub restart: bool,
    /// Restarts with the state directory lost or rolled back to an older copy.
    pub lose_state: bool,
    /// A crash right after a reservation was written and before the sealer used it.
    pub crash_mid_reserve: bool,
    /// Reloads, with the peers unchanged or changed.
    pub reload: bool,
    /// Identity rotation: a host gets a new identity and its peers are told, one by one.
    pub rotate: bool,
    /// A host's wall clock jumps a day ahead or back (seen at its next start).
    pub clock_jump: bool,
    /// Path 2 partitioned for a while, or flapping.
    pub partition: bool,
    /// A host removed from every other host's configuration (it stays up: a former peer).
    pub retire: bool,
}

/// Which attackers a run has.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Attackers {
    /// Dolev-Yao on path 1: sees, drops, holds, replays and injects every frame there.
    pub path1: bool,
    /// On path 2: sees and injects, cannot drop or delay.
    pub path2_inject: bool,
    /// It holds the group key (an insider: a member's key file, or a former member's).
    pub insider: bool,
    /// It does not stop: through the liveness phase it keeps sending captured handshake
    /// messages again (re-sealed under fresh sequence numbers if it holds the group key), four
    /// a second.
    pub flood: bool,
}

/// One run's setting.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Scenario {
    /// The seed of every random choice of the run (hosts' RNGs, the network's decisions).
    pub seed: u64,
    /// Hosts (3 or 4).
    pub hosts: u8,
    /// Keyings.
    pub keying: KeyingMix,
    /// Identities.
    pub ids: Ids,
    /// SMKEX.
    pub smkex: Smkex,
    /// Each host's `kem` mode (index: host; a fourth entry for a three-host run is unused).
    pub kem: [Kem; 4],
    /// Every host spreads its session frames over both paths (`paths = "both"`) and puts its
    /// peers' back in order (the reorder buffer); else `failover`.
    pub both: bool,
    /// Host 0 and host 1 normalize their traffic to each other.
    pub normalize: bool,
    /// Broadcasts too large for the signed group key go as group copies.
    pub group_copies: bool,
    /// `[session] rekey_after_s`.
    pub rekey_after_s: u32,
    /// `[session] lifetime_s`.
    pub lifetime_s: u32,
    /// Background traffic: each host sends a frame to a peer (in turn) this often, ms.
    pub ping_ms: u32,
    /// Network faults.
    pub faults: Faults,
    /// Operator events.
    pub operator: Operator,
    /// Attackers.
    pub attackers: Attackers,
    /// Membership by certificate (`[pki]`): no host lists another; certificates from the
    /// simulation's CA, announcements, broadcast keys; a retired host is revoked (on one host,
    /// and the list spreads) instead of removed from the others' configurations.
    pub pki: bool,
}

impl Scenario {
    /// A quiet three-host network of sessions with configured identities and SMKEX preferred:
    /// the base the tests start from.
    pub fn basic(seed: u64) -> Self {
        Self {
            seed,
            hosts: 3,
            keying: KeyingMix::Sessions,
            ids: Ids::Configured,
            smkex: Smkex::Prefer,
            kem: [Kem::Off; 4],
            both: false,
            normalize: false,
            group_copies: true,
            rekey_after_s: 120,
            lifetime_s: 3600,
            ping_ms: 200,
            faults: Faults::default(),
            operator: Operator::default(),
            attackers: Attackers::default(),
            pki: false,
        }
    }

    /// A scenario drawn from `seed`: each fault, operator event and attacker is in with
    /// probability about one half (swarm testing).
    pub fn random(seed: u64) -> Self {
        let mut r = Rng::new(seed ^ 0x5ce0_a810);
        let mut coin = |num: u64| r.below(100) < num;
        let hosts = if coin(25) { 4 } else { 3 };
        let keying = if coin(35) {
            KeyingMix::Mixed
        } else {
            KeyingMix::Sessions
        };
        let ids = match seed % 3 {
            0 => Ids::None,
            1 => Ids::Configured,
            _ => Ids::Tofu,
        };
        let smkex = match (seed / 3) % 3 {
            0 => Smkex::Off,
            1 => Smkex::Prefer,
            _ => Smkex::Require,
        };
        let normalize = coin(45);
        let group_copies = coin(70);
        let rekey_after_s = if coin(50) { 20 } else { 120 };
        let lifetime_s = if coin(50) { 90 } else { 3600 };
        let faults = Faults {
            loss: if coin(40) { 20 } else { 0 },
            dup: if coin(30) { 20 } else { 0 },
            delay_us: if coin(50) { 300 } else { 50 },
            jitter_us: if coin(40) { 2000 } else { 0 },
        };
        let operator = Operator {
            restart: coin(60),
            lose_state: coin(20),
            crash_mid_reserve: coin(20),
            reload: coin(40),
            rotate: coin(20),
            clock_jump: coin(25),
            partition: coin(35),
            retire: coin(15),
        };
        let attackers = Attackers {
            path1: coin(50),
            path2_inject: coin(35),
            insider: coin(50),
            flood: coin(20),
        };
        // `[pki]` for one seed in eight (drawn apart, so the other seeds' scenarios stay as
        // they were): every host has an identity and runs sessions with every other.
        let pki = seed % 8 == 3;
        let (ids, keying) = if pki {
            (Ids::Configured, KeyingMix::Sessions)
        } else {
            (ids, keying)
        };
        // With certificates, revocation is what a retirement is, and the insider attacker
        // tries certificates of its own: both always in.
        let mut operator = operator;
        let mut attackers = attackers;
        if pki {
            operator.retire = true;
            operator.restart = true;
            attackers.insider = true;
            attackers.path1 = true;
        }
        let kem = kem_modes(seed);
        // Drawn apart from everything else, as the KEM: one seed in four.
        let both = super::mix(seed, 0x626f_7468).is_multiple_of(4);
        Self {
            seed,
            hosts,
            keying,
            ids,
            smkex,
            kem,
            both,
            normalize,
            group_copies,
            rekey_after_s,
            lifetime_s,
            ping_ms: 200,
            faults,
            operator,
            attackers,
            pki,
        }
    }
}

/// The hosts' `kem` modes for `seed`, drawn apart from everything else (so the other seeds'
/// scenarios stay as they were): one seed in four uses the KEM. Of those, one in four has every
/// host require it, one in four every host prefer it, and the rest draw each host's mode (off,
/// prefer, require: pairs that get the KEM, pairs that do not, pairs that get no session).
fn kem_modes(seed: u64) -> [Kem; 4] {
    if !super::mix(seed, 0x006b_656d).is_multiple_of(4) {
        return [Kem::Off; 4];
    }
    let mut r = Rng::new(seed ^ 0x6b65_6d00);
    let each = |r: &mut Rng| match r.below(3) {
        0 => Kem::Off,
        1 => Kem::Prefer,
        _ => Kem::Require,
    };
    match r.below(4) {
        0 => [Kem::Require; 4],
        1 => [Kem::Prefer; 4],
        _ => {
            let mut m = [each(&mut r), each(&mut r), each(&mut r), each(&mut r)];
            if m[..3].iter().all(|k| *k == Kem::Off) {
                // Three hosts all off would not be a run with the KEM.
                m[0] = Kem::Require;
            }
            m
        }
    }
}
