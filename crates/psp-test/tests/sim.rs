//! The simulator in CI (docs/SESSIONS.md, "The simulator"): a bounded swarm sweep over
//! psp-core's real hosts that must find nothing, the runs it found on the host before the
//! fixes (shrunk, as regression tests), and the planted bugs it must find.

use psp_core::plant::{self, Bug};
use psp_test::sim::Action::*;
use psp_test::sim::DiskFate::*;
use psp_test::sim::ForgeKind::*;
use psp_test::sim::Target::*;
use psp_test::sim::search::{self, Report};
use psp_test::sim::*;

/// Seeds of the CI sweep and actions per run: about a minute of CPU in a debug build on the
/// CI machine (the long run: `cargo run --release -p psp-test --bin sim -- --seeds 20000`).
const SEEDS: u64 = 96;
const STEPS: usize = 50;
/// Seeds a planted bug may take to be found (the sweep's, and a few more: ResetWindowOnReload
/// needs a reload between a capture and its replay, first at seed 103).
const CATCH_SEEDS: u64 = 112;

fn report(what: &str, r: &Report) {
    eprintln!(
        "{what}: {} runs, {} events, {} s simulated, {} sessions ({} with ML-KEM-768), {} failing, {} handshakes failed kem_required",
        r.runs,
        r.events,
        r.sim_ms / 1000,
        r.sessions,
        r.kem_sessions,
        r.failures.len(),
        r.kem_refused
    );
}

/// The sweep: a random subset of faults, operator events and attackers per seed; no
/// invariant may break. A failure prints the run shrunk, as a test to paste below.
#[test]
fn the_swarm_sweep_finds_nothing() {
    plant::set(None);
    let r = search::sweep(0..SEEDS, STEPS, |_| true, false);
    report("sweep", &r);
    if let Some(f) = r.failures.first() {
        let short = search::shrink(&f.scenario, &f.actions, f.violation.kind, 150);
        panic!(
            "{}\n\n{}",
            f.violation,
            search::to_test(&f.scenario, &short, &f.violation)
        );
    }
    assert!(r.runs == SEEDS && r.sessions > SEEDS * 10, "the sweep ran");
    // And it ran the hybrid handshake: sessions with the KEM, and pairs refused for want of it.
    assert!(
        r.kem_sessions > 0 && r.kem_refused > 0,
        "the sweep ran the KEM"
    );
}

/// One planted bug: the sweep's seeds until the first violation; the seed, the events into
/// that run, the events of the whole search, and the invariant.
fn catch(bug: Bug) -> Option<(u64, u64, u64, Kind)> {
    plant::set(Some(bug));
    let mut events = 0;
    let mut found = None;
    for seed in 0..CATCH_SEEDS {
        let scen = Scenario::random(seed);
        let actions = swarm(&scen, STEPS);
        let o = search::run(&scen, &actions, false);
        if let Some(v) = o.violations.first() {
            found = Some((seed, v.events, events + v.events, v.kind));
            break;
        }
        events += o.stats.events;
    }
    plant::set(None);
    found
}

macro_rules! planted {
    ($($name:ident: $bug:ident,)*) => {$(
        /// The CI sweep finds this planted bug.
        #[test]
        fn $name() {
            let found = catch(Bug::$bug);
            eprintln!(
                "{:?}: {found:?} (seed, events into that run, events in all, invariant)",
                Bug::$bug
            );
            assert!(found.is_some(), "the sweep did not find {:?}", Bug::$bug);
        }
    )*};
}

planted! {
    finds_a_stale_request_taken: StaleRequest,
    finds_a_pin_skipped: SkipPin,
    finds_windows_reset_by_a_reload: ResetWindowOnReload,
    finds_a_reservation_reused: ReuseReservation,
    finds_crossings_without_a_tie_break: NoCrossingTieBreak,
    finds_keys_installed_one_way: OneWayInstall,
    finds_liveness_that_never_fires: NoLiveness,
    finds_a_window_moved_before_the_signature: WindowBeforeSignature,
    finds_a_stream_payload_under_the_group_key: StreamUnderGroupKey,
    finds_answers_in_a_stream_the_peer_cannot_read: AnswerInStream,
    finds_floors_forgotten_at_a_start: ForgetFloors,
    finds_a_certificate_from_another_ca_taken: AnyCa,
    finds_a_revocation_list_ignored: IgnoreRevocation,
    finds_data_that_stays_on_a_cut_path: NoFailover,
    finds_a_single_path_rekey_under_require: SinglePathUnderRequire,
    // Seed 18 (host 0 requires the KEM, hosts 1 and 2 have it off), 32 events into that run.
    finds_a_session_without_the_kem_under_require: KemDowngrade,
    finds_frames_the_reorder_buffer_released_but_nobody_polled: ReorderNotPolled,
}

// The simulator's findings on the host before the fixes of this round, shrunk. Each failed
// there (the runs are in docs/SESSIONS.md, "What the simulator found").

/// A keyless replay of a frame under the group key, after its receiver restarted (its windows
/// started empty): delivered twice.
#[test]
fn sim_seed_672() {
    let scenario = Scenario {
        seed: 672,
        hosts: 3,
        keying: KeyingMix::Mixed,
        ids: Ids::None,
        smkex: Smkex::Require,
        kem: [Kem::Off; 4],
        both: false,
        normalize: false,
        group_copies: true,
        rekey_after_s: 120,
        lifetime_s: 3600,
        ping_ms: 200,
        faults: Faults {
            loss: 0,
            dup: 20,
            delay_us: 300,
            jitter_us: 2000,
        },
        operator: Operator {
            restart: true,
            lose_state: false,
            crash_mid_reserve: true,
            reload: true,
            rotate: true,
            clock_jump: true,
            partition: false,
            retire: true,
        },
        attackers: Attackers {
            path1: true,
            path2_inject: false,
            insider: false,
            flood: false,
        },
        pki: false,
    };
    let actions = [
        Wait(1232),
        Wait(2193),
        Stop {
            host: 0,
            down_ms: 2858,
        },
        Wait(1152),
        Replay {
            path: 0,
            pick: 1253729042,
        },
    ];
    assert_eq!(search::first(&scenario, &actions), None);
    // And after a crash (floors written within ten seconds before it): the same replay.
    let crash = [
        Wait(1232),
        Wait(12193),
        Restart {
            host: 0,
            disk: Intact,
            down_ms: 2858,
        },
        Wait(1152),
        Replay {
            path: 0,
            pick: 1253729042,
        },
    ];
    assert_eq!(search::first(&scenario, &crash), None);
}

/// An insider with the group key writes into a normalized session peer's stream (sub-protocol
/// 0x0005 under the group key): its frame delivered as the peer's.
#[test]
fn sim_seed_318() {
    let scenario = Scenario {
        seed: 318,
        hosts: 3,
        keying: KeyingMix::Sessions,
        ids: Ids::None,
        smkex: Smkex::Prefer,
        kem: [Kem::Off; 4],
        both: false,
        normalize: true,
        group_copies: true,
        rekey_after_s: 120,
        lifetime_s: 90,
        ping_ms: 200,
        faults: Faults {
            loss: 0,
            dup: 20,
            delay_us: 50,
            jitter_us: 0,
        },
        operator: Operator {
            restart: true,
            lose_state: false,
            crash_mid_reserve: false,
            reload: true,
            rotate: true,
            clock_jump: false,
            partition: false,
            retire: false,
        },
        attackers: Attackers {
            path1: true,
            path2_inject: false,
            insider: true,
            flood: false,
        },
        pki: false,
    };
    let actions = [
        Wait(1482),
        Forge {
            from: 0,
            to: Host(1),
            kind: Normalized,
            far: false,
        },
    ];
    assert_eq!(search::first(&scenario, &actions), None);
}

/// A normalized peer restarts (a clock jump is a restart that sees the new clock): its peer
/// answered the new Request inside the stream, under keys the restarted host no longer had,
/// until the old session expired (an hour).
#[test]
fn sim_seed_1221() {
    let scenario = Scenario {
        seed: 1221,
        hosts: 3,
        keying: KeyingMix::Sessions,
        ids: Ids::None,
        smkex: Smkex::Require,
        kem: [Kem::Off; 4],
        both: false,
        normalize: true,
        group_copies: false,
        rekey_after_s: 120,
        lifetime_s: 3600,
        ping_ms: 200,
        faults: Faults {
            loss: 0,
            dup: 20,
            delay_us: 300,
            jitter_us: 0,
        },
        operator: Operator {
            restart: true,
            lose_state: false,
            crash_mid_reserve: false,
            reload: false,
            rotate: false,
            clock_jump: true,
            partition: true,
            retire: false,
        },
        attackers: Attackers {
            path1: true,
            path2_inject: false,
            insider: false,
            flood: false,
        },
        pki: false,
    };
    let actions = [
        Wait(1278),
        ClockJump {
            host: 0,
            ahead: true,
        },
    ];
    assert_eq!(search::first(&scenario, &actions), None);
}

/// A host stops for good: every peer that sends to it shows the session down within
/// [`DEAD_BOUND`] (the dead-peer invariant), and nothing else breaks.
#[test]
fn a_stopped_host_is_noticed_by_every_peer() {
    let scenario = Scenario::basic(5);
    let actions = [
        Wait(5000),
        Stop {
            host: 2,
            down_ms: 60_000,
        },
        Wait(60_000),
    ];
    let mut w = World::new(scenario);
    for a in &actions {
        w.apply(a);
    }
    assert_eq!(w.outcome().violations, vec![]);
    let dump = w.dump();
    assert_eq!(dump.matches("down: Some(Down").count(), 2, "{dump}");
    // Then it comes back: the liveness phase.
    w.apply(&Quiet);
    assert_eq!(w.outcome().violations, vec![]);
}

// The weaknesses the docs accept (docs/SESSIONS.md, "What each attacker gets"), as outcomes the
// simulator must see: an attacker that holds the group key and the paths the handshake runs
// over runs one handshake with each host, unless an identity is pinned or two paths are
// required and it lacks the second.

/// Puppet handshakes in each direction between hosts 0 and 1, then a while for them to run.
fn man_in_the_middle(ids: Ids, smkex: Smkex, attackers: Attackers) -> Vec<(u8, u8)> {
    let scenario = Scenario {
        ids,
        smkex,
        attackers,
        ..Scenario::basic(11)
    };
    let actions = [
        Wait(3000),
        Puppet { from: 1, to: 0 },
        Puppet { from: 0, to: 1 },
        Wait(3000),
    ];
    let mut w = World::new(scenario);
    for a in &actions {
        w.apply(a);
    }
    assert_eq!(
        w.outcome().violations,
        vec![],
        "a weakness the scenario permits"
    );
    w.compromised()
}

const ON_PATH_1: Attackers = Attackers {
    path1: true,
    path2_inject: false,
    insider: true,
    flood: false,
};
const ON_BOTH: Attackers = Attackers {
    path1: true,
    path2_inject: true,
    insider: true,
    flood: false,
};

#[test]
fn both_paths_without_pins_is_a_man_in_the_middle() {
    let c = man_in_the_middle(Ids::None, Smkex::Require, ON_BOTH);
    assert!(c.contains(&(0, 1)) && c.contains(&(1, 0)), "{c:?}");
}

#[test]
fn preferred_is_downgraded_by_an_attacker_on_path_1() {
    let c = man_in_the_middle(Ids::None, Smkex::Prefer, ON_PATH_1);
    assert!(c.contains(&(0, 1)) && c.contains(&(1, 0)), "{c:?}");
}

#[test]
fn required_two_paths_or_pinned_identities_stop_it() {
    assert_eq!(
        man_in_the_middle(Ids::None, Smkex::Require, ON_PATH_1),
        vec![]
    );
    assert_eq!(
        man_in_the_middle(Ids::Configured, Smkex::Prefer, ON_BOTH),
        vec![]
    );
    assert_eq!(
        man_in_the_middle(Ids::Configured, Smkex::Off, ON_PATH_1),
        vec![]
    );
}

/// Path 1 cut in the quiet phase of a normalized scenario that rekeys every 20 s: host 1's
/// frames did not reach host 0 over path 2.
#[test]
fn sim_seed_37() {
    let scenario = Scenario {
        seed: 37,
        hosts: 4,
        keying: KeyingMix::Sessions,
        ids: Ids::Configured,
        smkex: Smkex::Off,
        kem: [Kem::Off; 4],
        both: false,
        normalize: true,
        group_copies: true,
        rekey_after_s: 20,
        lifetime_s: 90,
        ping_ms: 200,
        faults: Faults {
            loss: 0,
            dup: 0,
            delay_us: 50,
            jitter_us: 2000,
        },
        operator: Operator {
            restart: true,
            lose_state: false,
            crash_mid_reserve: false,
            reload: false,
            rotate: true,
            clock_jump: false,
            partition: true,
            retire: false,
        },
        attackers: Attackers {
            path1: true,
            path2_inject: false,
            insider: false,
            flood: false,
        },
        pki: false,
    };
    let actions = [
        Drop { path: 0, count: 19 },
        Wait(2708),
        Wait(2098),
        Wait(1740),
        Wait(451),
        Wait(2734),
    ];
    assert_eq!(search::first(&scenario, &actions), None);
}

// The hybrid post-quantum handshake (docs/SESSIONS.md, "Hybrid post-quantum sessions") in the
// world: the modes decide each pair, and an insider on path 1 who strips the KEM gets no
// session without it.

/// Host 0 requires the KEM, host 1 has it off, host 2 prefers it: 0 and 2 get it, 1 and 2 do
/// not, 0 and 1 get no session and count `kem_required`; then the quiet phase (which expects
/// nothing of 0 and 1 but that count) finds nothing.
#[test]
fn the_kem_modes_decide_each_pair() {
    let scenario = Scenario {
        kem: [Kem::Require, Kem::Off, Kem::Prefer, Kem::Off],
        both: false,
        ..Scenario::basic(23)
    };
    let mut w = World::new(scenario);
    w.apply(&Wait(10_000));
    let kem = |w: &World, a, b| {
        let (s, refused) = w.session_status(a, b).expect("a session peer");
        (s.up.then(|| s.last.map(|(_, i)| i.kem)).flatten(), refused)
    };
    for (a, b) in [(0, 2), (2, 0)] {
        assert_eq!(kem(&w, a, b), (Some(true), 0), "{a} with {b}");
    }
    for (a, b) in [(1, 2), (2, 1)] {
        assert_eq!(kem(&w, a, b), (Some(false), 0), "{a} with {b}");
    }
    let (none, refused) = (kem(&w, 0, 1), kem(&w, 1, 0));
    assert_eq!((none.0, refused.0), (None, None));
    assert!(none.1 + refused.1 >= 1, "kem_required counted");
    assert_eq!(w.outcome().violations, vec![]);
    w.apply(&Quiet);
    let o = w.outcome();
    assert_eq!(o.violations, vec![]);
    assert!(
        o.stats.kem_sessions > 0 && o.stats.kem_refused > 0,
        "{:?}",
        o.stats
    );
}

/// An insider on path 1 strips the KEM from each of its four messages in turn, between hosts
/// that prefer it and hosts that require it, without pins (so the receivers take the rewritten
/// frames: only the handshake's bindings can tell). No session comes up without the KEM: a
/// stripped offer fails the handshake (`smkex_mismatch`: the Request is in the transcript hash
/// path 2 carries; `kem_required` where a side requires it), a stripped answer stalls it
/// (`timeout`; `kem_required` under `require`), and a KemShare sent as a Share or a
/// KemShareReply as a ShareReply is ignored (the retransmission completes the handshake with
/// the KEM).
#[test]
fn stripping_the_kem_gets_no_session_without_it() {
    use psp_test::sim::Rewrite as R;
    for kem in [Kem::Prefer, Kem::Require] {
        for op in [
            R::StripKemOffer,
            R::StripKemAnswer,
            R::StripKemKey,
            R::StripKemCiphertext,
        ] {
            let what = format!("{kem:?}, {op:?}");
            let scenario = Scenario {
                ids: Ids::None,
                kem: [kem; 4],
                both: false,
                attackers: ON_PATH_1,
                ..Scenario::basic(11)
            };
            let mut w = World::new(scenario);
            w.apply(&Rewrite(op));
            w.apply(&Wait(20_000));
            let o = w.outcome();
            assert_eq!(o.violations, vec![], "{what}");
            assert_eq!(o.stats.rewritten, 1, "{what}");
            assert!(o.stats.sessions >= 6, "{what}: {:?}", o.stats);
            assert_eq!(o.stats.kem_sessions, o.stats.sessions, "{what}");
            let refused = u64::from(kem == Kem::Require);
            let failed: u64 = match op {
                R::StripKemOffer | R::StripKemAnswer => 1,
                _ => 0,
            };
            assert!(o.stats.failures >= failed, "{what}: {:?}", o.stats);
            assert!(
                o.stats.kem_refused >= failed * refused,
                "{what}: {:?}",
                o.stats
            );
            // Why, as the hosts count it.
            let reason = match (kem, op) {
                (Kem::Prefer, R::StripKemOffer) => Some("smkex_mismatch"),
                (Kem::Prefer, R::StripKemAnswer) => Some("timeout"),
                (Kem::Require, R::StripKemOffer | R::StripKemAnswer) => Some("kem_required"),
                _ => None,
            };
            let dump = w.dump();
            if let Some(r) = reason {
                assert!(
                    dump.contains(&format!("handshake_failures.{r}=")),
                    "{what}: {dump}"
                );
            } else {
                assert!(!dump.contains("handshake_failures"), "{what}: {dump}");
            }
            w.apply(&Quiet);
            assert_eq!(w.outcome().violations, vec![], "{what}");
        }
    }
}

/// The KEM is not authentication (docs/SESSIONS.md, "What it does not protect"): an insider on
/// both paths, without pins, runs puppets that offer the KEM (half of them) and ones that do
/// not, twice each way between hosts 0 and 1. Under `prefer` both kinds get sessions, those
/// without the KEM too (the downgrade the docs accept where the attacker is a man in the middle
/// anyway); under `require` the ones without it are refused (`kem_required`) and the ones with
/// it get sessions: still a man in the middle, but with the KEM.
#[test]
fn the_kem_does_not_stop_a_man_in_the_middle_and_require_refuses_one_without_it() {
    for kem in [Kem::Prefer, Kem::Require] {
        let scenario = Scenario {
            ids: Ids::None,
            smkex: Smkex::Require,
            kem: [kem; 4],
            both: false,
            attackers: ON_BOTH,
            ..Scenario::basic(11)
        };
        let mut w = World::new(scenario);
        w.apply(&Wait(3000));
        for _ in 0..2 {
            w.apply(&Puppet { from: 1, to: 0 });
            w.apply(&Puppet { from: 0, to: 1 });
            w.apply(&Wait(3000));
        }
        let o = w.outcome();
        assert_eq!(o.violations, vec![], "{kem:?}");
        assert_eq!(w.compromised(), [(0, 1), (1, 0)], "{kem:?}");
        if kem == Kem::Prefer {
            assert!(o.stats.kem_sessions < o.stats.sessions, "{:?}", o.stats);
        } else {
            assert!(o.stats.kem_refused >= 2, "{:?}", o.stats);
            assert_eq!(o.stats.kem_sessions, o.stats.sessions, "{:?}", o.stats);
        }
    }
}
