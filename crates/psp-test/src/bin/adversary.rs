//! The adversary harness's long run: random walks over the scenario matrix (the full attacker,
//! the full attacker then a replay flood, and the network's misbehaviour only with rekeys and
//! crossings) until `--states N` states were checked, or an exhaustive search to
//! `--exhaustive DEPTH`; prints the states explored per second. Exits 1 on a violation, with
//! its seed and a shrunk trace.
//!
//! ```text
//! adversary [--states N] [--seed S] [--filter TEXT] [--rule hybrid|on-take|on-establish]
//!           [--steps N] [--exhaustive DEPTH] [--keep-going] [--no-rehandshake] [--with-known]
//! ```
//!
//! `--keep-going` counts violations per scenario (printing the first of each) instead of
//! stopping at the first; `--no-rehandshake` turns off `Rules::rehandshake_unheard` (the
//! gateway's rules as they are); `--with-known` adds the compact flow under a replay flood,
//! which has a known livelock.

use std::process::ExitCode;
use std::time::Instant;

use psp_test::adversary::{Alphabet, EnvBudget, Explorer, Flow, FreshnessRule, Position, Scenario};

struct Args {
    states: u64,
    seed: u64,
    filter: String,
    rule: FreshnessRule,
    steps: usize,
    exhaustive: Option<usize>,
    keep_going: bool,
    no_rehandshake: bool,
    with_known: bool,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        states: 200_000,
        seed: 0,
        filter: String::new(),
        rule: FreshnessRule::Hybrid,
        steps: 60,
        exhaustive: None,
        keep_going: false,
        no_rehandshake: false,
        with_known: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut v = || it.next().ok_or(format!("{k} needs a value"));
        match k.as_str() {
            "--states" => a.states = v()?.parse().map_err(|e| format!("--states: {e}"))?,
            "--seed" => a.seed = v()?.parse().map_err(|e| format!("--seed: {e}"))?,
            "--steps" => a.steps = v()?.parse().map_err(|e| format!("--steps: {e}"))?,
            "--filter" => a.filter = v()?,
            "--keep-going" => a.keep_going = true,
            "--no-rehandshake" => a.no_rehandshake = true,
            "--with-known" => a.with_known = true,
            "--exhaustive" => {
                a.exhaustive = Some(v()?.parse().map_err(|e| format!("--exhaustive: {e}"))?);
            }
            "--rule" => {
                a.rule = match v()?.as_str() {
                    "hybrid" => FreshnessRule::Hybrid,
                    "on-take" => FreshnessRule::OnTake,
                    "on-establish" => FreshnessRule::OnEstablish,
                    r => return Err(format!("unknown rule {r}")),
                }
            }
            "-h" | "--help" => {
                return Err("usage: adversary [--states N] [--seed S] [--filter TEXT] \
                            [--rule hybrid|on-take|on-establish] [--steps N] [--exhaustive DEPTH] \
                            [--keep-going] [--no-rehandshake] [--with-known]"
                    .into());
            }
            _ => return Err(format!("unknown argument {k}")),
        }
    }
    Ok(a)
}

fn scenarios(a: &Args) -> Vec<Scenario> {
    let mut all = Scenario::matrix();
    // The compact flow under a flood has a known livelock (tests/adversary.rs,
    // known_compact_flow_livelock_under_a_replay_flood): only with --with-known.
    let flooded: Vec<Scenario> = all
        .iter()
        .filter(|s| s.position.caps().inject.iter().any(|x| *x))
        .filter(|s| a.with_known || s.flow == Flow::Thesis)
        .cloned()
        .map(|mut s| {
            s.flood = 2;
            s.name = format!("{} flood", s.name);
            s
        })
        .collect();
    let network: Vec<Scenario> = all
        .iter()
        .filter(|s| s.position != Position::None)
        .cloned()
        .map(|mut s| {
            s.alphabet = Alphabet::network();
            s.env = EnvBudget {
                kicks: 2,
                traffic: 4,
            };
            s.name = format!("{} network", s.name);
            s
        })
        .collect();
    all.extend(flooded);
    all.extend(network);
    for s in &mut all {
        s.rules.freshness = a.rule;
        s.rules.rehandshake_unheard = !a.no_rehandshake;
    }
    all.retain(|s| s.name.contains(&a.filter));
    all
}

fn main() -> ExitCode {
    let a = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let list = scenarios(&a);
    if list.is_empty() {
        eprintln!("no scenario matches {:?}", a.filter);
        return ExitCode::from(2);
    }
    let t0 = Instant::now();
    let mut states = 0u64;
    if let Some(depth) = a.exhaustive {
        // The search uses the network alphabet for every scenario: the "network" copies would
        // repeat it.
        for mut sc in list.into_iter().filter(|s| !s.name.ends_with(" network")) {
            sc.env = EnvBudget {
                kicks: 0,
                traffic: 0,
            };
            sc.alphabet = Alphabet::network();
            let ex = Explorer::new(sc);
            match ex.exhaustive(a.seed, depth, a.states) {
                Ok(s) => {
                    states += s.states;
                    println!(
                        "{:<48} depth {depth}: {} states, {} deduplicated, {} leaves{}",
                        ex.scenario.name,
                        s.states,
                        s.deduplicated,
                        s.leaves,
                        if s.truncated { " (truncated)" } else { "" }
                    );
                }
                Err(v) => {
                    println!("{v}");
                    return ExitCode::FAILURE;
                }
            }
        }
    } else {
        let explorers: Vec<Explorer> = list.into_iter().map(Explorer::new).collect();
        let mut per = vec![(0u64, 0u64, 0u64); explorers.len()];
        let mut broken = vec![0u64; explorers.len()];
        let mut seed = a.seed;
        'outer: loop {
            for (i, ex) in explorers.iter().enumerate() {
                match ex.random_run(seed, a.steps) {
                    Ok(o) => {
                        states += o.steps;
                        per[i].0 += 1;
                        per[i].1 += u64::from(o.live);
                        per[i].2 += u64::from(o.compromised);
                    }
                    Err(v) => {
                        states += v.trace.len() as u64;
                        broken[i] += 1;
                        if broken[i] == 1 || !a.keep_going {
                            println!("{v}");
                            let t = ex.shrink(&v);
                            println!("shrunk to {} actions: {t:?}", t.len());
                        }
                        if !a.keep_going {
                            return ExitCode::FAILURE;
                        }
                    }
                }
                if states >= a.states {
                    break 'outer;
                }
            }
            seed += 1;
        }
        for ((ex, (runs, live, comp)), bad) in explorers.iter().zip(per).zip(&broken) {
            println!(
                "{:<48} runs {runs:>6}  live {live:>6}  compromised (permitted) {comp:>5}  \
                 violations {bad}",
                ex.scenario.name
            );
        }
        if broken.iter().any(|b| *b > 0) {
            let secs = t0.elapsed().as_secs_f64();
            println!("states explored: {states} in {secs:.1} s; violations found");
            return ExitCode::FAILURE;
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    println!(
        "states explored: {states} in {secs:.1} s = {:.0} states/s (rule {:?}, seed {})",
        states as f64 / secs,
        a.rule,
        a.seed
    );
    ExitCode::SUCCESS
}
