//! Seeded swarm runs ([`sweep`]), cutting a failing run down to a short one ([`shrink`]), and
//! printing it as a ready-to-paste unit test ([`to_test`]).

use core::fmt::Write as _;
use core::panic::AssertUnwindSafe;
use std::panic::catch_unwind;

use super::action::{Action, swarm};
use super::check::{Kind, Violation};
use super::scenario::Scenario;
use super::world::{Outcome, Stats, World};

/// Runs `actions` in a world of `scen`; a panic in a host is a [`Kind::Panic`] violation.
pub fn run(scen: &Scenario, actions: &[Action], keep_going: bool) -> Outcome {
    let mut world = World::new(*scen);
    if keep_going {
        world = world.keep_going();
    }
    let cell = core::cell::Cell::new(0u64);
    let r = catch_unwind(AssertUnwindSafe(|| {
        let mut w = world;
        let mut quiet = false;
        for a in actions {
            w.apply(a);
            cell.set(w.events());
            quiet |= *a == Action::Quiet;
            if !w.outcome().violations.is_empty() && !keep_going {
                return w.outcome();
            }
        }
        if !quiet {
            w.apply(&Action::Quiet);
        }
        w.outcome()
    }));
    match r {
        Ok(o) => o,
        Err(e) => {
            let msg = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_default();
            Outcome {
                violations: vec![Violation {
                    kind: Kind::Panic,
                    events: cell.get(),
                    at: psp_core::time::Instant::ZERO,
                    detail: msg,
                }],
                stats: Stats::default(),
            }
        }
    }
}

/// The first violation of a run, if any.
pub fn first(scen: &Scenario, actions: &[Action]) -> Option<Violation> {
    run(scen, actions, false).violations.into_iter().next()
}

/// A run that broke an invariant.
#[derive(Clone, Debug)]
pub struct Failure {
    /// Its scenario.
    pub scenario: Scenario,
    /// Its actions.
    pub actions: Vec<Action>,
    /// What broke.
    pub violation: Violation,
}

/// What a sweep did.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Runs.
    pub runs: u64,
    /// Events handled in all runs.
    pub events: u64,
    /// Simulated time in all runs, ms.
    pub sim_ms: u64,
    /// Sessions established in all runs.
    pub sessions: u64,
    /// Of those, sessions with ML-KEM-768 in their keys.
    pub kem_sessions: u64,
    /// Handshakes that failed `kem_required` in all runs.
    pub kem_refused: u64,
    /// The failing runs.
    pub failures: Vec<Failure>,
}

/// Runs one swarm run per seed of `seeds` (`steps` actions each) whose scenario `keep`
/// accepts; stops at the first failure unless `all`.
pub fn sweep(
    seeds: impl IntoIterator<Item = u64>,
    steps: usize,
    keep: impl Fn(&Scenario) -> bool,
    all: bool,
) -> Report {
    let mut r = Report::default();
    for seed in seeds {
        let scen = Scenario::random(seed);
        if !keep(&scen) {
            continue;
        }
        let actions = swarm(&scen, steps);
        let o = run(&scen, &actions, false);
        r.runs += 1;
        r.events += o.stats.events;
        r.sim_ms += o.stats.sim_ms;
        r.sessions += o.stats.sessions;
        r.kem_sessions += o.stats.kem_sessions;
        r.kem_refused += o.stats.kem_refused;
        if let Some(v) = o.violations.into_iter().next() {
            r.failures.push(Failure {
                scenario: scen,
                actions,
                violation: v,
            });
            if !all {
                break;
            }
        }
    }
    r
}

/// Cuts `actions` down while the run still breaks an invariant of `kind` (delta debugging:
/// remove chunks, then single actions, then shorten waits), within `budget` runs.
pub fn shrink(scen: &Scenario, actions: &[Action], kind: Kind, budget: usize) -> Vec<Action> {
    let mut best = actions.to_vec();
    let mut runs = 0;
    let fails = |a: &[Action], runs: &mut usize| {
        *runs += 1;
        first(scen, a).is_some_and(|v| v.kind == kind)
    };
    let mut chunk = best.len().div_ceil(2).max(1);
    while chunk >= 1 && runs < budget {
        let mut i = 0;
        let mut removed = false;
        while i < best.len() && runs < budget {
            let end = (i + chunk).min(best.len());
            let mut cand = best.clone();
            cand.drain(i..end);
            if fails(&cand, &mut runs) {
                best = cand;
                removed = true;
            } else {
                i += chunk;
            }
        }
        if chunk == 1 && !removed {
            break;
        }
        if !removed {
            chunk /= 2;
        }
    }
    for i in 0..best.len() {
        if runs >= budget {
            break;
        }
        if let Action::Wait(ms) = best[i]
            && ms > 10
        {
            let mut cand = best.clone();
            cand[i] = Action::Wait(ms / 2);
            if fails(&cand, &mut runs) {
                best = cand;
            }
        }
    }
    best
}

/// A failing run as a unit test to paste into `crates/psp-test/tests/sim.rs`.
pub fn to_test(scen: &Scenario, actions: &[Action], v: &Violation) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "/// Found by the simulator: {v}");
    let _ = writeln!(s, "#[test]");
    let _ = writeln!(s, "fn sim_seed_{}() {{", scen.seed);
    let _ = writeln!(s, "    let scenario = {scen:?};");
    let _ = writeln!(s, "    let actions = [");
    for a in actions {
        let _ = writeln!(s, "        {a:?},");
    }
    let _ = writeln!(s, "    ];");
    let _ = writeln!(
        s,
        "    assert_eq!(psp_test::sim::search::first(&scenario, &actions), None);"
    );
    let _ = writeln!(s, "}}");
    s
}
