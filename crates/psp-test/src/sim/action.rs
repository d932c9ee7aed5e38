//! [`Action`]: one input to the simulated world, and [`swarm`], which draws a run's actions from
//! a seed within what its [`Scenario`] allows.
//!
//! Actions name hosts and paths by index and captured frames by a number taken modulo what the
//! attacker holds, so a run with some actions removed (shrinking) still means something.

use super::scenario::{Ids, Kem, Scenario};
use crate::Rng;

/// What happens to a restarted host's state directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DiskFate {
    /// Kept.
    Intact,
    /// Lost (a reinstall with the same keys).
    Lost,
    /// Rolled back to a copy at least ten seconds old (a restored backup).
    Rollback,
}

/// Where a forged frame goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    /// To one host.
    Host(u8),
    /// To every host (a broadcast).
    Broadcast,
}

/// What an attacker with the group key forges, in another host's name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ForgeKind {
    /// A data frame (to a broadcast target: a genuine group payload, an IPv4 broadcast).
    Data,
    /// A normalized stream payload (sub-protocol 0x0005) carrying a data frame.
    Normalized,
    /// A group copy (sub-protocol 0x0006) carrying a broadcast.
    GroupCopy,
    /// A unicast IPv4 packet inside a broadcast frame.
    WrappedUnicast,
    /// A keepalive (sub-protocol 0x0002).
    Control,
    /// A fresh Request.
    Request,
    /// A Request dated an hour ahead.
    FutureRequest,
}

/// A rewrite of the next matching handshake message on path 1 (the attacker controls path 1
/// and holds the group key: it takes the frame off the wire and sends its own version).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rewrite {
    /// A Request's timestamp an hour ahead.
    FutureTimestamp,
    /// A Request's two-path and required flags, or an Accept's two-path flag, cleared.
    StripTwoPath,
    /// The long-term key removed from a Request or Accept.
    StaticNone,
    /// The attacker's long-term key in a Request or Accept.
    StaticEve,
    /// A Share's or ShareReply's X25519 share replaced by the attacker's (or a KemShare's or
    /// KemShareReply's).
    SwapShare,
    /// The KEM stripped from a Request: its offer and demand flags cleared.
    StripKemOffer,
    /// The KEM stripped from an Accept: its answer flag cleared.
    StripKemAnswer,
    /// A KemShare sent as a Share with the same X25519 share (no encapsulation key).
    StripKemKey,
    /// A KemShareReply sent as a ShareReply with the same X25519 share (no ciphertext).
    StripKemCiphertext,
}

/// One input to the world.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// Time passes (ms): frames arrive, timers fire, background traffic flows.
    Wait(u32),
    /// Host `from`'s protected side sends a unicast frame to host `to`.
    Send {
        /// The sender.
        from: u8,
        /// The receiver.
        to: u8,
    },
    /// Host `from`'s protected side sends a broadcast (`big`: as large as its MTU allows).
    Broadcast {
        /// The sender.
        from: u8,
        /// As large as its MTU allows.
        big: bool,
    },
    /// A host stops at once (no clean shutdown) and starts `down_ms` later.
    Restart {
        /// The host.
        host: u8,
        /// Its state directory's fate.
        disk: DiskFate,
        /// How long it is down.
        down_ms: u32,
    },
    /// A host stops cleanly (it writes its replay floors) and starts `down_ms` later.
    Stop {
        /// The host.
        host: u8,
        /// How long it is down.
        down_ms: u32,
    },
    /// The host crashes right after its next reservation is written, before its sealer uses
    /// it, and starts again at once.
    CrashMidReserve {
        /// The host.
        host: u8,
    },
    /// The host reloads its configuration: unchanged, or with one peer changed.
    Reload {
        /// The host.
        host: u8,
        /// One peer's settings change (a normalized peer's rate, else a session peer's
        /// configured address is added or removed).
        changed: bool,
    },
    /// The host gets a new identity (it restarts with it) and its peers are reconfigured with
    /// it one after another within `spread_ms`.
    RotateIdentity {
        /// The host.
        host: u8,
        /// Over how long its peers learn the new identity.
        spread_ms: u32,
    },
    /// The host's wall clock jumps a day ahead or back; it restarts (state intact) and sees it.
    ClockJump {
        /// The host.
        host: u8,
        /// Ahead (else back).
        ahead: bool,
    },
    /// A path carries nothing for `ms`.
    Partition {
        /// The path (0 or 1).
        path: u8,
        /// For how long.
        ms: u32,
    },
    /// A path goes down and up every `period_ms`, `times` times.
    Flap {
        /// The path.
        path: u8,
        /// Half a cycle.
        period_ms: u32,
        /// Cycles.
        times: u8,
    },
    /// The host is removed from every other host's configuration (it keeps running with its
    /// own, a former peer with the group key).
    Retire {
        /// The host.
        host: u8,
    },
    /// The attacker sends again a frame it captured on `path`.
    Replay {
        /// The path.
        path: u8,
        /// Which frame (modulo the number it holds).
        pick: u32,
    },
    /// The attacker (with the group key) opens a captured frame and sends its inner frame
    /// again, sealed in host `from`'s name.
    Reseal {
        /// The path it was captured on.
        path: u8,
        /// Which frame (modulo the number it holds).
        pick: u32,
        /// The host it claims to be.
        from: u8,
    },
    /// The attacker drops the next `count` frames on `path` (path 1: it controls it).
    Drop {
        /// The path.
        path: u8,
        /// How many.
        count: u8,
    },
    /// The attacker holds every frame on `path` for `ms`, then lets them go at once.
    Hold {
        /// The path.
        path: u8,
        /// For how long.
        ms: u32,
    },
    /// The attacker forges a frame in host `from`'s name with the group key.
    Forge {
        /// The host it claims to be.
        from: u8,
        /// Where it goes.
        to: Target,
        /// What it is.
        kind: ForgeKind,
        /// With a sequence number far ahead of the host's (else just after its last).
        far: bool,
    },
    /// The attacker rewrites the next matching handshake message on path 1.
    Rewrite(Rewrite),
    /// The attacker starts its own handshake with host `to` in host `from`'s name.
    Puppet {
        /// The host it claims to be.
        from: u8,
        /// The host it talks to.
        to: u8,
    },
    /// Attackers and faults stop, every host is up and configured: the liveness phase.
    Quiet,
}

/// Draws `steps` actions for `s` from its seed (then [`Action::Quiet`]): waits of up to three
/// seconds between inputs, traffic always, and only the faults, operator events and attacks the
/// scenario has.
pub fn swarm(s: &Scenario, steps: usize) -> Vec<Action> {
    let mut r = Rng::new(s.seed ^ 0xac71_0a5e);
    let n = u64::from(s.hosts);
    let host = |r: &mut Rng| r.below(n) as u8;
    let other = |r: &mut Rng, h: u8| ((u64::from(h) + 1 + r.below(n - 1)) % n) as u8;
    let mut kinds: Vec<u8> = vec![0, 0, 0, 1, 1, 2];
    let o = s.operator;
    let a = s.attackers;
    let mut add = |on: bool, k: u8, weight: usize| {
        if on {
            kinds.extend(core::iter::repeat_n(k, weight));
        }
    };
    add(o.restart || o.lose_state, 3, 2);
    add(o.crash_mid_reserve, 4, 1);
    add(o.reload, 5, 2);
    add(o.rotate && s.ids != Ids::None, 6, 1);
    add(o.clock_jump, 7, 1);
    add(o.partition, 8, 2);
    add(o.retire, 9, 1);
    add(a.path1 || a.path2_inject, 10, 3);
    add(a.path1, 11, 2);
    add(a.insider, 12, 4);
    add(a.insider && a.path1, 13, 2);
    add(a.insider, 14, 2);
    let kem = s.kem[..usize::from(s.hosts)].iter().any(|k| *k != Kem::Off);
    let mut out = Vec::with_capacity(steps + 1);
    let mut retired = false;
    for _ in 0..steps {
        if r.below(2) == 0 {
            out.push(Action::Wait(r.range(20, 3000) as u32));
            continue;
        }
        let k = kinds[r.below(kinds.len() as u64) as usize];
        let h = host(&mut r);
        let act = match k {
            0 => Action::Send {
                from: h,
                to: other(&mut r, h),
            },
            1 => Action::Broadcast {
                from: h,
                big: r.below(3) == 0,
            },
            2 => Action::Wait(r.range(3000, 20_000) as u32),
            3 => {
                let disk = if o.lose_state && r.below(3) == 0 {
                    if r.below(2) == 0 {
                        DiskFate::Lost
                    } else {
                        DiskFate::Rollback
                    }
                } else {
                    DiskFate::Intact
                };
                let down_ms = if r.below(5) == 0 {
                    r.range(20_000, 60_000)
                } else {
                    r.range(0, 3000)
                } as u32;
                if disk == DiskFate::Intact && r.below(3) == 0 {
                    Action::Stop { host: h, down_ms }
                } else {
                    Action::Restart {
                        host: h,
                        disk,
                        down_ms,
                    }
                }
            }
            4 => Action::CrashMidReserve { host: h },
            5 => Action::Reload {
                host: h,
                changed: r.below(2) == 0,
            },
            6 => Action::RotateIdentity {
                host: h,
                spread_ms: r.range(0, 10_000) as u32,
            },
            7 => Action::ClockJump {
                host: h,
                ahead: r.below(2) == 0,
            },
            8 => {
                let path = r.below(2) as u8;
                if r.below(2) == 0 {
                    Action::Partition {
                        path,
                        ms: r.range(500, 30_000) as u32,
                    }
                } else {
                    Action::Flap {
                        path,
                        period_ms: r.range(200, 3000) as u32,
                        times: r.range(2, 8) as u8,
                    }
                }
            }
            9 if !retired => {
                retired = true;
                Action::Retire { host: h }
            }
            9 => Action::Wait(100),
            10 => {
                let path = if a.path1 && (!a.path2_inject || r.below(2) == 0) {
                    0
                } else {
                    1
                };
                Action::Replay {
                    path,
                    pick: r.next_u64() as u32,
                }
            }
            11 => {
                if r.below(2) == 0 {
                    Action::Drop {
                        path: 0,
                        count: r.range(1, 20) as u8,
                    }
                } else {
                    Action::Hold {
                        path: 0,
                        ms: r.range(100, 5000) as u32,
                    }
                }
            }
            12 => {
                let to = if r.below(3) == 0 {
                    Target::Broadcast
                } else {
                    Target::Host(other(&mut r, h))
                };
                let kind = match r.below(7) {
                    0 => ForgeKind::Data,
                    1 => ForgeKind::Normalized,
                    2 => ForgeKind::GroupCopy,
                    3 => ForgeKind::WrappedUnicast,
                    4 => ForgeKind::Control,
                    5 => ForgeKind::Request,
                    _ => ForgeKind::FutureRequest,
                };
                Action::Forge {
                    from: h,
                    to,
                    kind,
                    far: r.below(8) == 0,
                }
            }
            // A run with the KEM strips it half the time, from one of its four messages
            // (drawn only then: the other runs' actions stay as they were).
            13 if kem && r.below(2) == 0 => Action::Rewrite(match r.below(4) {
                0 => Rewrite::StripKemOffer,
                1 => Rewrite::StripKemAnswer,
                2 => Rewrite::StripKemKey,
                _ => Rewrite::StripKemCiphertext,
            }),
            13 => Action::Rewrite(match r.below(5) {
                0 => Rewrite::FutureTimestamp,
                1 => Rewrite::StripTwoPath,
                2 => Rewrite::StaticNone,
                3 => Rewrite::StaticEve,
                _ => Rewrite::SwapShare,
            }),
            14 if r.below(3) == 0 => Action::Reseal {
                path: 0,
                pick: r.next_u64() as u32,
                from: h,
            },
            _ => Action::Puppet {
                from: h,
                to: other(&mut r, h),
            },
        };
        out.push(act);
    }
    out.push(Action::Quiet);
    out
}
