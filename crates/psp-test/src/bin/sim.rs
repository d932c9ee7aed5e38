//! The simulator's long run: seeded swarm runs over psp-core's real hosts, the invariants after
//! every event, a failing run shrunk and printed as a unit test.
//!
//! ```text
//! cargo run --release -p psp-test --bin sim -- --seeds 2000
//! cargo run --release -p psp-test --bin sim -- --seed 17 --trace
//! ```
//!
//! Options: `--seeds N` (runs, default 200), `--start S` (first seed), `--steps K` (actions per
//! run, default 80), `--seed S` (one run), `--trace` (print every event of that run),
//! `--keep-going` (count every failing run instead of stopping at the first; each run records
//! the first violation of each kind), `--no-shrink`, `--where WORD` (only scenarios whose
//! description contains WORD, e.g. `normalize: true`), `--kem` (only scenarios where a host
//! uses ML-KEM-768), `--plant BUG` (with `--features plant`: one of psp-core's planted bugs,
//! `psp_core::plant::Bug`).

use std::time::Instant as Wall;

use psp_test::sim::{Kem, Scenario, World, search, swarm};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let value = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .and_then(|v| v.parse::<u64>().ok())
    };
    let flag = |name: &str| args.iter().any(|a| a == name);
    let word = args
        .iter()
        .position(|a| a == "--where")
        .and_then(|i| args.get(i + 1))
        .cloned();
    let steps = value("--steps").unwrap_or(80) as usize;
    #[cfg(feature = "plant")]
    if let Some(name) = args
        .iter()
        .position(|a| a == "--plant")
        .and_then(|i| args.get(i + 1))
    {
        let bug = psp_core::plant::Bug::ALL
            .into_iter()
            .find(|b| format!("{b:?}") == *name)
            .expect("a planted bug's name (psp_core::plant::Bug)");
        psp_core::plant::set(Some(bug));
    }
    if let Some(seed) = value("--seed") {
        let scen = Scenario::random(seed);
        let actions = swarm(&scen, steps);
        println!("{scen:?}");
        let mut w = World::new(scen).keep_going();
        w.trace = flag("--trace");
        let (o, w) = w.run_world(&actions);
        println!("{:?}", o.stats);
        if flag("--dump") {
            println!("{}", w.dump());
        }
        for v in &o.violations {
            println!("{v}");
        }
        return;
    }
    let start = value("--start").unwrap_or(0);
    let n = value("--seeds").unwrap_or(200);
    let keep_going = flag("--keep-going");
    let t0 = Wall::now();
    let kem = flag("--kem");
    let keep = |s: &Scenario| {
        word.as_ref()
            .is_none_or(|w| format!("{s:?}").contains(w.as_str()))
            && (!kem || s.kem[..usize::from(s.hosts)].iter().any(|k| *k != Kem::Off))
    };
    let mut runs = 0u64;
    let mut events = 0u64;
    let mut sim_ms = 0u64;
    let mut failing = 0u64;
    let mut first_failure = None;
    let mut by_kind: std::collections::BTreeMap<String, Vec<(u64, u64)>> = Default::default();
    for seed in start..start + n {
        let scen = Scenario::random(seed);
        if !keep(&scen) {
            continue;
        }
        let actions = swarm(&scen, steps);
        let o = search::run(&scen, &actions, keep_going);
        runs += 1;
        events += o.stats.events;
        sim_ms += o.stats.sim_ms;
        if !o.violations.is_empty() {
            failing += 1;
            for v in &o.violations {
                println!("seed {seed}: {v}");
                let key = match v.kind {
                    psp_test::sim::Kind::Liveness => format!(
                        "{:?} {}",
                        v.kind,
                        v.detail
                            .split("crossed ")
                            .nth(1)
                            .unwrap_or("")
                            .split(" (from")
                            .next()
                            .unwrap_or("")
                    ),
                    k => format!("{k:?}"),
                };
                by_kind.entry(key).or_default().push((v.events, seed));
            }
            if first_failure.is_none() {
                first_failure = Some((scen, actions, o.violations[0].clone()));
            }
            if !keep_going {
                break;
            }
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    println!(
        "{runs} runs, {events} events, {:.0} s simulated, {failing} failing, {secs:.1} s: {:.0} events/s",
        sim_ms as f64 / 1000.0,
        events as f64 / secs
    );
    for (k, mut v) in by_kind {
        v.sort_unstable();
        println!(
            "  {k}: {} runs; events to detection min {} (seed {}), median {}",
            v.len(),
            v[0].0,
            v[0].1,
            v[v.len() / 2].0
        );
    }
    if let Some((scen, actions, v)) = first_failure
        && !flag("--no-shrink")
    {
        let short = search::shrink(&scen, &actions, v.kind, 400);
        let v = search::first(&scen, &short).unwrap_or(v);
        println!(
            "shrunk from {} to {} actions:\n",
            actions.len(),
            short.len()
        );
        println!("{}", search::to_test(&scen, &short, &v));
    }
}
