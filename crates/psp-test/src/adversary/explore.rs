//! Exploration: seeded random walks ([`Explorer::random`]) and an exhaustive search of every
//! sequence of enabled [`Action`]s up to a depth ([`Explorer::exhaustive`]), each run ended by
//! the liveness phase ([`World::finish`]).
//!
//! The exhaustive search is stateless (a [`Handshake`](psp_core::handshake::Handshake) cannot be
//! cloned): each node is rebuilt by replaying its actions from the start. States are
//! deduplicated by [`World::digest`]: two interleavings that give every host the same inputs
//! at the same times (deliveries to different hosts commute) are explored once.

use std::collections::HashMap;
use std::time::Instant as WallInstant;

use super::digest;
use super::world::{Action, Scenario, Violation, ViolationKind, World};
use crate::Rng;

/// How one run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunOutcome {
    /// A genuine session came up after the attacker stopped.
    pub live: bool,
    /// The attacker got keys of an honest host (where the scenario permits it).
    pub compromised: bool,
    /// Steps taken (the states checked).
    pub steps: u64,
}

/// Totals of random runs.
#[derive(Clone, Copy, Debug, Default)]
pub struct RandomStats {
    /// Runs.
    pub runs: u64,
    /// States checked (steps, including the liveness phase).
    pub states: u64,
    /// Runs that ended with a genuine session.
    pub live: u64,
    /// Runs where the attacker got keys (permitted).
    pub compromised: u64,
    /// Wall-clock seconds.
    pub secs: f64,
}

/// Totals of an exhaustive search.
#[derive(Clone, Copy, Debug, Default)]
pub struct ExhaustiveStats {
    /// Distinct states reached (after deduplication).
    pub states: u64,
    /// States skipped as already explored.
    pub deduplicated: u64,
    /// Leaves whose liveness phase ran.
    pub leaves: u64,
    /// Leaves that ended with a genuine session.
    pub live: u64,
    /// Leaves where the attacker got keys (permitted).
    pub compromised: u64,
    /// Steps executed in all (replays and liveness phases included).
    pub steps: u64,
    /// The search stopped at its state budget.
    pub truncated: bool,
    /// Wall-clock seconds.
    pub secs: f64,
}

/// Explores one [`Scenario`].
#[derive(Clone, Debug)]
pub struct Explorer {
    /// The scenario.
    pub scenario: Scenario,
}

impl Explorer {
    /// An explorer of `scenario`.
    pub fn new(scenario: Scenario) -> Self {
        Self { scenario }
    }

    /// Rebuilds the world of `seed` after `trace`.
    ///
    /// # Errors
    /// The violation the trace runs into.
    pub fn replay(&self, seed: u64, trace: &[Action]) -> Result<World, Violation> {
        let mut w = World::new(&self.scenario, seed);
        for a in trace {
            w.apply(a)?;
        }
        Ok(w)
    }

    /// Whether `trace` from `seed`, then the liveness phase, breaks invariant `kind`.
    pub fn breaks(&self, seed: u64, trace: &[Action], kind: ViolationKind) -> bool {
        match self.replay(seed, trace) {
            Err(v) => v.kind == kind,
            Ok(mut w) => w.finish().is_err_and(|v| v.kind == kind),
        }
    }

    /// A shorter trace that still breaks `v`'s invariant: actions are dropped one at a time
    /// while the run (then the liveness phase) still breaks it.
    pub fn shrink(&self, v: &Violation) -> Vec<Action> {
        let mut trace = v.trace.clone();
        loop {
            let before = trace.len();
            let mut i = trace.len();
            while i > 0 {
                i -= 1;
                let mut t = trace.clone();
                t.remove(i);
                if self.breaks(v.seed, &t, v.kind) {
                    trace = t;
                }
            }
            if trace.len() == before {
                return trace;
            }
        }
    }

    /// One random walk of at most `max_steps` actions (the attacker stops at a random step),
    /// then the liveness phase.
    ///
    /// # Errors
    /// The first violation.
    pub fn random_run(&self, seed: u64, max_steps: usize) -> Result<RunOutcome, Violation> {
        let mut w = World::new(&self.scenario, seed);
        let mut rng = Rng::new(digest(&(seed, "walk")));
        let stop = rng.range(1, max_steps.max(1) as u64) as usize;
        let mut actions = Vec::new();
        for _ in 0..stop {
            w.actions(&mut actions);
            let Some(a) = pick(&mut rng, &actions) else {
                break;
            };
            w.apply(&a)?;
        }
        let live = w.finish()?;
        Ok(RunOutcome {
            live,
            compromised: w.compromised(),
            steps: w.steps(),
        })
    }

    /// Random walks for every seed in `seeds`.
    ///
    /// # Errors
    /// The first violation.
    pub fn random(
        &self,
        seeds: core::ops::Range<u64>,
        max_steps: usize,
    ) -> Result<RandomStats, Violation> {
        let t0 = WallInstant::now();
        let mut s = RandomStats::default();
        for seed in seeds {
            let o = self.random_run(seed, max_steps)?;
            s.runs += 1;
            s.states += o.steps;
            s.live += u64::from(o.live);
            s.compromised += u64::from(o.compromised);
        }
        s.secs = t0.elapsed().as_secs_f64();
        Ok(s)
    }

    /// Every sequence of enabled actions up to `depth` from the world of `seed`, each ended by
    /// the liveness phase, until `max_states` distinct states.
    ///
    /// # Errors
    /// The first violation (its trace reproduces it with [`replay`](Self::replay)).
    pub fn exhaustive(
        &self,
        seed: u64,
        depth: usize,
        max_states: u64,
    ) -> Result<ExhaustiveStats, Violation> {
        let t0 = WallInstant::now();
        let mut s = ExhaustiveStats::default();
        let mut seen: HashMap<u64, usize> = HashMap::new();
        let root = World::new(&self.scenario, seed);
        seen.insert(root.digest(), depth);
        s.states = 1;
        let mut prefix = Vec::new();
        self.dfs(
            seed,
            root,
            &mut prefix,
            depth,
            max_states,
            &mut seen,
            &mut s,
        )?;
        s.secs = t0.elapsed().as_secs_f64();
        Ok(s)
    }

    #[allow(clippy::too_many_arguments)]
    fn dfs(
        &self,
        seed: u64,
        mut world: World,
        prefix: &mut Vec<Action>,
        left: usize,
        max_states: u64,
        seen: &mut HashMap<u64, usize>,
        s: &mut ExhaustiveStats,
    ) -> Result<(), Violation> {
        let mut actions = Vec::new();
        world.actions(&mut actions);
        if left == 0 || actions.is_empty() || s.states >= max_states {
            s.truncated |= s.states >= max_states;
            s.leaves += 1;
            let live = world.finish()?;
            s.steps += world.steps();
            s.live += u64::from(live);
            s.compromised += u64::from(world.compromised());
            return Ok(());
        }
        s.steps += world.steps();
        drop(world);
        for a in actions {
            prefix.push(a);
            let child = self.replay(seed, prefix)?;
            let d = child.digest();
            if seen.get(&d).is_some_and(|l| *l >= left - 1) {
                s.deduplicated += 1;
            } else {
                seen.insert(d, left - 1);
                s.states += 1;
                self.dfs(seed, child, prefix, left - 1, max_states, seen, s)?;
            }
            prefix.pop();
        }
        Ok(())
    }
}

/// A weighted random choice: deliveries first, then attacks, then the clock and the
/// environment. Within the attacks each kind (drop, copy, rewrite, replay, puppet, absorb,
/// forge) is equally likely, however many variants it has.
fn pick(rng: &mut Rng, actions: &[Action]) -> Option<Action> {
    let class = |a: &Action| match a {
        Action::Deliver(_) => 0,
        Action::Tick => 1,
        Action::Want { .. } | Action::Traffic { .. } => 2,
        Action::Drop(_) => 3,
        Action::Dup(_) => 4,
        Action::Modify(..) => 5,
        Action::Replay { .. } => 6,
        Action::PuppetInitiate { .. } | Action::PuppetRespond { .. } => 7,
        Action::Absorb => 8,
        Action::Forge(_) => 9,
    };
    // Deliver, tick, environment, then the attack kinds sharing 30.
    let weights = [50u64, 12, 8, 5, 5, 5, 5, 5, 2, 3];
    let mut present = [false; 10];
    for a in actions {
        present[class(a)] = true;
    }
    let total: u64 = (0..10).filter(|c| present[*c]).map(|c| weights[c]).sum();
    if total == 0 {
        return None;
    }
    let mut x = rng.below(total);
    let mut chosen = 0;
    for c in 0..10 {
        if !present[c] {
            continue;
        }
        if x < weights[c] {
            chosen = c;
            break;
        }
        x -= weights[c];
    }
    let of: Vec<&Action> = actions.iter().filter(|a| class(a) == chosen).collect();
    Some(of[rng.below(of.len() as u64) as usize].clone())
}
