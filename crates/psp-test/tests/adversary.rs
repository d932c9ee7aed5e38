//! The adversary harness (`psp_test::adversary`) in CI: bounded random and exhaustive sweeps
//! with every invariant checked after every step, the accepted weaknesses of
//! docs/SESSIONS.md as expected outcomes, the counterexamples that decided the responder's
//! freshness rule, and checks that the harness catches the defects it exists for.
//!
//! A failing sweep prints the violation with its seed and a shrunk trace;
//! `Explorer::replay(seed, &trace)` (with `World::debug` set) reproduces it step by step.
//! The longer run: `cargo run --release -p psp-test --bin adversary -- --states 2000000`.
#![allow(missing_docs)]

use psp_core::handshake::SmkexMode;
use psp_test::adversary::*;

/// Random walks per scenario and their longest length (CI sizes).
const SEEDS: u64 = 64;
const STEPS: usize = 60;

/// Runs `seeds` random walks of every scenario; panics with a shrunk trace on a violation.
fn sweep(scenarios: &[Scenario], seeds: u64) -> RandomStats {
    let mut total = RandomStats::default();
    for sc in scenarios {
        let ex = Explorer::new(sc.clone());
        match ex.random(0..seeds, STEPS) {
            Ok(s) => {
                total.runs += s.runs;
                total.states += s.states;
                total.live += s.live;
                total.compromised += s.compromised;
                total.secs += s.secs;
            }
            Err(v) => {
                let shrunk = ex.shrink(&v);
                panic!("{v}\nshrunk to {} actions: {shrunk:?}", shrunk.len());
            }
        }
    }
    println!(
        "{} runs, {} states, {} live, {} compromised (permitted), {:.0} states/s",
        total.runs,
        total.states,
        total.live,
        total.compromised,
        total.states as f64 / total.secs
    );
    total
}

fn matrix(f: impl Fn(&Scenario) -> bool) -> Vec<Scenario> {
    Scenario::matrix().into_iter().filter(|s| f(s)).collect()
}

#[test]
fn sweep_thesis_smkex_required() {
    let s = matrix(|s| s.flow == Flow::Thesis && s.smkex == SmkexMode::Required);
    let t = sweep(&s, SEEDS);
    assert!(t.live > 0);
}

#[test]
fn sweep_thesis_smkex_preferred_and_off() {
    let s = matrix(|s| s.flow == Flow::Thesis && s.smkex != SmkexMode::Required);
    let t = sweep(&s, SEEDS);
    // An attacker on path 1 downgrades `prefer` and owns `off` sessions without pins (the
    // attacker table); the invariants let it, and it happens.
    assert!(
        t.compromised > 0,
        "the sweep never reached a permitted compromise"
    );
}

#[test]
fn sweep_compact() {
    sweep(&matrix(|s| s.flow == Flow::Compact), SEEDS);
}

#[test]
fn sweep_three_hosts_and_rekeys() {
    let mut s = Vec::new();
    for flow in [Flow::Thesis, Flow::Compact] {
        for position in [Position::Path1 { path2_seen: true }, Position::BothPaths] {
            let mut sc = Scenario::three_hosts(flow, position);
            sc.env.kicks = 3;
            sc.env.traffic = 4;
            s.push(sc);
        }
    }
    sweep(&s, SEEDS);
}

/// The network's misbehaviour only (drop, copy, reorder, delay, replay), with rekeys, crossings
/// and data: cheap runs, so many of them.
#[test]
fn sweep_network_with_rekeys_and_crossings() {
    let mut s = Vec::new();
    for flow in [Flow::Thesis, Flow::Compact] {
        for position in [Position::Path1 { path2_seen: true }, Position::BothPaths] {
            let mut sc = Scenario::new("");
            sc.flow = flow;
            sc.position = position;
            sc.alphabet = Alphabet::network();
            sc.env = EnvBudget {
                kicks: 2,
                traffic: 4,
            };
            sc.name = format!("{} network", sc.describe());
            s.push(sc);
        }
    }
    sweep(&s, 4 * SEEDS);
}

/// The replay denial of service as a property: however the run went, an attacker that keeps replaying
/// every handshake frame the hosts sent does not stop the next genuine handshake. The thesis
/// flow (the gateway's); for the compact flow see
/// `known_compact_flow_livelock_under_a_replay_flood`.
#[test]
fn sweep_replay_flood() {
    let mut s = Vec::new();
    for flow in [Flow::Thesis] {
        for identities in [Identities::None, Identities::Unpinned, Identities::Pinned] {
            for position in [
                Position::Path1 { path2_seen: true },
                Position::Path2InjectOnly { path1_seen: true },
                Position::BothPaths,
            ] {
                let mut sc = Scenario::new("");
                sc.flow = flow;
                sc.identities = identities;
                sc.position = position;
                sc.flood = 2;
                sc.name = format!("{} flood", sc.describe());
                s.push(sc);
            }
        }
    }
    sweep(&s, SEEDS);
}

fn exhaustive(sc: Scenario, depth: usize) -> ExhaustiveStats {
    let ex = Explorer::new(sc);
    match ex.exhaustive(1, depth, 50_000) {
        Ok(s) => {
            println!(
                "{} depth {depth}: {} states ({} deduplicated), {} leaves, {:.0} states/s",
                ex.scenario.name,
                s.states,
                s.deduplicated,
                s.leaves,
                s.states as f64 / s.secs
            );
            assert!(!s.truncated, "raise the state budget");
            s
        }
        Err(v) => panic!("{v}"),
    }
}

/// Every interleaving of deliveries, timers, drops, copies and replays (of the last two frames,
/// to their destination) for the first five steps of one handshake (four of the compact flow,
/// whose first flight has three frames), each run then completed.
#[test]
fn exhaustive_network_misbehaviour() {
    for (flow, depth) in [(Flow::Thesis, 6), (Flow::Compact, 4)] {
        let mut sc = Scenario::new("");
        sc.flow = flow;
        sc.alphabet = Alphabet::network();
        sc.env = EnvBudget {
            kicks: 0,
            traffic: 0,
        };
        sc.name = format!("{} network", sc.describe());
        exhaustive(sc.clone(), depth);
        // A second session (a rekey, or the peer starting one: a crossing), one step less.
        sc.env.kicks = 1;
        exhaustive(sc, depth - 1);
    }
}

/// Every choice of the full attacker (rewrites, splices, puppets, forgeries) for two steps.
#[test]
fn exhaustive_attacker_two_steps() {
    for flow in [Flow::Thesis, Flow::Compact] {
        let mut sc = Scenario::new("");
        sc.flow = flow;
        sc.env = EnvBudget {
            kicks: 0,
            traffic: 0,
        };
        sc.name = format!("{} full", sc.describe());
        exhaustive(sc, 2);
    }
}

// ---- Scripted runs -------------------------------------------------------------------------

fn msg_type(f: &Frame) -> Option<u8> {
    match &f.body {
        FrameBody::Handshake(b) => b.get(1).copied(),
        FrameBody::Session(_) => None,
    }
}

const REQUEST: u8 = 0x01;
const SHARE: u8 = 0x04;

/// The index of the first frame in flight that matches.
fn find(w: &World, pred: impl Fn(&Frame, bool) -> bool) -> Option<usize> {
    w.flight().position(|(f, inj)| pred(f, inj))
}

/// Delivers everything in flight, in order.
fn deliver_all(w: &mut World) {
    while w.flight().next().is_some() {
        w.apply(&Action::Deliver(0)).unwrap();
    }
}

/// Delivers and lets time pass until `done` or the clock reaches `until` seconds.
fn run_until(w: &mut World, until: u64, done: impl Fn(&World) -> bool) {
    loop {
        deliver_all(w);
        if done(w) || w.now().total_micros() >= until * 1_000_000 {
            return;
        }
        let before = w.now();
        w.apply(&Action::Tick).unwrap();
        if w.now() == before && w.flight().next().is_none() {
            return;
        }
    }
}

fn two_path() -> PuppetKind {
    PuppetKind {
        two_path: true,
        with_static: false,
        compact: false,
    }
}

fn single_path() -> PuppetKind {
    PuppetKind {
        two_path: false,
        ..two_path()
    }
}

/// The index of a logged frame.
fn logged(w: &World, pred: impl Fn(&Frame) -> bool) -> usize {
    w.attacker().log().position(pred).expect("logged")
}

/// Runs the classic man in the middle with puppets: one answers host 0's Request as host 1,
/// one runs a handshake with host 1 as host 0, and the genuine frames they answer are absorbed.
fn puppet_mitm(sc: &Scenario, kind: PuppetKind) -> World {
    let mut w = World::new(sc, 7);
    let req = logged(&w, |f| msg_type(f) == Some(REQUEST) && f.src == w.mac(0));
    w.apply(&Action::PuppetRespond { log: req, kind }).unwrap();
    w.apply(&Action::PuppetInitiate {
        as_: 0,
        to: 1,
        kind,
        future: false,
    })
    .unwrap();
    w.apply(&Action::Absorb).unwrap();
    let genuine = find(&w, |f, inj| !inj && msg_type(f) == Some(REQUEST)).unwrap();
    w.apply(&Action::Drop(genuine)).unwrap();
    run_until(&mut w, 20, |w| {
        w.compromised() && w.observe(1).handshakes == 0
    });
    w
}

/// Whether `host` holds keys the attacker knows, of a session that ran over two paths or not.
fn held_by_attacker(w: &World, host: usize, two_path: bool) -> bool {
    w.observe(host)
        .sessions
        .iter()
        .any(|v| w.attacker().knows_fp(&v.send) && v.two_path == two_path)
}

/// EXPECTED (docs/SESSIONS.md, attacker table, A-A): an attacker active on both paths runs
/// one handshake with each host and is not detected without pinned long-term keys; with them
/// both hosts refuse.
#[test]
fn both_paths_without_pins_is_not_detected() {
    let mut sc = Scenario::new("A-A, no pins");
    sc.position = Position::BothPaths;
    let w = puppet_mitm(&sc, two_path());
    assert!(w.compromised());
    assert!(held_by_attacker(&w, 0, true) && held_by_attacker(&w, 1, true));

    sc.identities = Identities::Pinned;
    let w = puppet_mitm(&sc, two_path());
    assert!(!w.compromised());
}

/// EXPECTED (attacker table, last row): an attacker active on path 1 only forces single-path
/// SEP against `smkex = prefer` and then runs a full man in the middle; `require` refuses.
#[test]
fn preferred_is_downgraded_by_an_attacker_on_one_path() {
    let mut sc = Scenario::new("A-P, prefer");
    sc.smkex = SmkexMode::Preferred;
    let w = puppet_mitm(&sc, single_path());
    assert!(w.compromised());
    assert!(held_by_attacker(&w, 0, false) && held_by_attacker(&w, 1, false));

    sc.smkex = SmkexMode::Required;
    let w = puppet_mitm(&sc, single_path());
    assert!(!w.compromised());
    assert!(!held_by_attacker(&w, 0, false) && !held_by_attacker(&w, 1, false));
}

/// Whether host 1 answered a Request with `initiator`'s id (an Accept for it is in flight).
fn answered(w: &World, initiator: &[u8]) -> bool {
    w.flight().any(|(f, _)| match &f.body {
        FrameBody::Handshake(b) => b.get(1) == Some(&0x02) && b.get(2..10) == Some(initiator),
        FrameBody::Session(_) => false,
    })
}

/// EXPECTED (SESSIONS.md, Freshness): an insider with the group key mints Requests in a host's
/// name with fresh timestamps. Host 1 takes the minted one and then refuses the genuine, older
/// Request while the minted handshake runs; the genuine session comes up once the attacker
/// stops. Pinned keys do not help against this (the Request is not authenticated before
/// Confirm): only the gateway's signed group frames do, and with them the attacker has no such
/// action.
#[test]
fn an_insider_mints_fresh_requests() {
    for identities in [Identities::None, Identities::Pinned] {
        let mut sc = Scenario::new("insider");
        sc.identities = identities;
        let mut w = World::new(&sc, 11);
        let genuine = find(&w, |f, _| msg_type(f) == Some(REQUEST)).unwrap();
        let FrameBody::Handshake(g) = &w.flight().nth(genuine).unwrap().0.body else {
            unreachable!()
        };
        let genuine_id = g[2..10].to_vec();
        w.apply(&Action::PuppetInitiate {
            as_: 0,
            to: 1,
            kind: two_path(),
            future: false,
        })
        .unwrap();
        let minted = find(&w, |f, inj| inj && msg_type(f) == Some(REQUEST)).unwrap();
        if identities == Identities::Pinned {
            // The Request must carry host 0's (public) long-term key to pass the pin.
            w.apply(&Action::Modify(minted, Op::StaticClaim)).unwrap();
        }
        let minted = find(&w, |f, inj| inj && msg_type(f) == Some(REQUEST)).unwrap();
        w.apply(&Action::Deliver(minted)).unwrap();
        let genuine = find(&w, |f, inj| !inj && msg_type(f) == Some(REQUEST)).unwrap();
        w.apply(&Action::Deliver(genuine)).unwrap();
        assert!(
            !answered(&w, &genuine_id),
            "the genuine Request was refused"
        );
        assert!(
            w.finish().unwrap(),
            "a genuine session once the attacker stops"
        );
    }
    let mut sc = Scenario::new("insider, signed");
    sc.identities = Identities::Pinned;
    sc.signed = true;
    let w = World::new(&sc, 11);
    let mut actions = Vec::new();
    w.actions(&mut actions);
    assert!(
        !actions
            .iter()
            .any(|a| matches!(a, Action::PuppetInitiate { .. } | Action::Modify(..))),
        "signed frames: nothing in a pinned host's name"
    );
}

/// Future-dates host 0's Request to host 1; once host 1 forgot that handshake, has host 1
/// start one and future-dates its Request too, holding it back (and dropping host 1's genuine
/// copies) until host 0 is idle to take it. Then the liveness phase.
fn future_dated_both_ways(rule: FreshnessRule, identities: Identities) -> Result<bool, Violation> {
    let mut sc = Scenario::new("future-dated");
    sc.rules.freshness = rule;
    sc.identities = identities;
    let mut w = World::new(&sc, 5);
    let req = find(&w, |f, _| msg_type(f) == Some(REQUEST)).unwrap();
    w.apply(&Action::Modify(req, Op::FutureTimestamp))?;
    run_until(&mut w, 60, |w| {
        w.now().total_micros() > 2_000_000 && w.observe(1).handshakes == 0
    });
    w.apply(&Action::Want {
        p: 1,
        q: 0,
        rekey: false,
    })?;
    let from_b =
        |f: &Frame, inj: bool, w: &World| msg_type(f) == Some(REQUEST) && f.src == w.mac(1) && inj;
    loop {
        if let Some(i) = find(&w, |f, inj| {
            !inj && msg_type(f) == Some(REQUEST) && f.src == w.mac(1)
        }) {
            if find(&w, |f, inj| from_b(f, inj, &w)).is_none() {
                w.apply(&Action::Modify(i, Op::FutureTimestamp))?;
            } else {
                w.apply(&Action::Drop(i))?;
            }
            continue;
        }
        if let Some(i) = find(&w, |f, inj| from_b(f, inj, &w))
            && w.observe(0).handshakes == 0
        {
            w.apply(&Action::Deliver(i))?;
            break;
        }
        if let Some(i) = find(&w, |f, inj| !from_b(f, inj, &w)) {
            w.apply(&Action::Deliver(i))?;
        } else {
            w.apply(&Action::Tick)?;
        }
    }
    w.finish()
}

/// FINDING (for the gateway's rule): if the highest Request timestamp is raised when a
/// Request is *taken*, one future-dated Request in each direction (an insider on path 1 that
/// can rewrite frames) locks the two hosts out of each other until their clocks pass it, pins
/// or not; the attacker may stop at once. With signed group frames it cannot rewrite them.
/// The hybrid rule bounds the lockout to one handshake timeout.
#[test]
fn freshness_raised_on_take_lets_an_insider_lock_both_hosts_out() {
    for identities in [Identities::None, Identities::Pinned] {
        let v = future_dated_both_ways(FreshnessRule::OnTake, identities).unwrap_err();
        assert_eq!(v.kind, ViolationKind::Liveness, "{v}");
        assert!(future_dated_both_ways(FreshnessRule::Hybrid, identities).unwrap());
    }
}

/// FINDING (for the gateway's rule): if the highest timestamp is raised only when a handshake
/// is *established*, a Request that was taken but never completed stays "fresh", and its
/// replay makes the host with the higher MAC give up its own running handshake (the crossing
/// rule): an attacker that replays the hosts' own frames keeps them from ever completing.
/// Found by the random sweep, shrunk to these six steps.
#[test]
fn freshness_raised_on_establishment_lets_replays_win_crossings() {
    let k = two_path();
    let trace = [
        Action::Modify(0, Op::FutureTimestamp),
        Action::PuppetInitiate {
            as_: 0,
            to: 1,
            kind: k,
            future: true,
        },
        Action::Deliver(0),
        Action::Deliver(1),
        Action::Deliver(1),
        Action::Deliver(1),
    ];
    for (rule, live) in [
        (FreshnessRule::OnEstablish, false),
        (FreshnessRule::Hybrid, true),
    ] {
        let mut sc = Scenario::new("crossing");
        sc.position = Position::Path1 { path2_seen: false };
        sc.rules.freshness = rule;
        sc.flood = 2;
        let ex = Explorer::new(sc);
        assert_eq!(
            !ex.breaks(90, &trace, ViolationKind::Liveness),
            live,
            "{rule:?}"
        );
    }
}

/// Raised on take is the right rule when Requests are authenticated: with signed group frames
/// and pins the sweep (flood included) finds nothing.
#[test]
fn freshness_raised_on_take_holds_with_signed_frames() {
    let mut s = Vec::new();
    for position in [Position::Path1 { path2_seen: true }, Position::BothPaths] {
        let mut sc = Scenario::new("");
        sc.identities = Identities::Pinned;
        sc.signed = true;
        sc.position = position;
        sc.rules.freshness = FreshnessRule::OnTake;
        sc.flood = 2;
        sc.name = format!("{} signed on-take flood", sc.describe());
        s.push(sc);
    }
    sweep(&s, SEEDS);
}

// ---- The harness catches what it is for ----------------------------------------------------

/// Without freshness (the gateway before timestamps), the replay flood stops handshakes:
/// the replay denial of service, found by the sweep.
#[test]
fn the_harness_catches_requests_without_freshness() {
    let mut sc = Scenario::new("no freshness");
    sc.rules.freshness = FreshnessRule::Off;
    sc.flood = 2;
    let ex = Explorer::new(sc);
    let found = (0..SEEDS)
        .filter_map(|s| ex.random_run(s, STEPS).err())
        .next();
    let v = found.expect("the flood found nothing");
    assert_eq!(v.kind, ViolationKind::Liveness, "{v}");
}

/// A compact responder that took its keys as confirmed by a frame on path 1 would seal under
/// keys an attacker on path 1 (passive on path 2) computed: the secrecy invariant fires, in a
/// scripted run and in an exhaustive search of a small alphabet.
#[test]
fn the_harness_catches_compact_keys_confirmed_on_path_1() {
    let mut sc = Scenario::new("compact, confirmed anywhere");
    sc.flow = Flow::Compact;
    sc.rules.compact_confirm_on_path2 = false;
    let mut w = World::new(&sc, 3);
    let share = find(&w, |f, _| msg_type(f) == Some(SHARE)).unwrap();
    w.apply(&Action::Modify(share, Op::SwapShare)).unwrap();
    deliver_all(&mut w);
    assert_eq!(
        w.attacker().known().len(),
        1,
        "the oracle computed the responder's keys"
    );
    w.apply(&Action::Forge(0)).unwrap();
    let v = w.apply(&Action::Deliver(0)).unwrap_err();
    assert_eq!(v.kind, ViolationKind::Secrecy);

    sc.alphabet = Alphabet {
        ops: vec![Op::SwapShare],
        forge: true,
        budget: 2,
        ..Alphabet::none()
    };
    sc.env = EnvBudget {
        kicks: 0,
        traffic: 0,
    };
    let v = Explorer::new(sc.clone())
        .exhaustive(1, 6, 100_000)
        .unwrap_err();
    assert_eq!(v.kind, ViolationKind::Secrecy, "{v}");
    // The rule as built (path 2 only) survives the same search.
    sc.rules.compact_confirm_on_path2 = true;
    Explorer::new(sc).exhaustive(1, 6, 100_000).unwrap();
}

/// The key oracle computes only what follows from what the attacker saw: a share swapped on
/// path 1 gives it a compact responder's keys if it also saw path 2 (the nonces), not
/// otherwise.
#[test]
fn the_key_oracle_needs_the_nonces_of_path_2() {
    for seen in [true, false] {
        let mut sc = Scenario::new("oracle");
        sc.flow = Flow::Compact;
        sc.position = Position::Path1 { path2_seen: seen };
        let mut w = World::new(&sc, 3);
        let share = find(&w, |f, _| msg_type(f) == Some(SHARE)).unwrap();
        w.apply(&Action::Modify(share, Op::SwapShare)).unwrap();
        deliver_all(&mut w);
        let b = w.observe(1);
        let v = b
            .sessions
            .iter()
            .find(|v| v.slot == SlotKind::Unconfirmed)
            .unwrap();
        assert_eq!(w.attacker().knows_fp(&v.send), seen);
        // Either way the initiator caught the swap and nothing got confirmed.
        assert!(w.observe(0).sessions.is_empty());
        assert!(!w.compromised());
    }
}

/// The longer run (not in CI): `cargo test --release -p psp-test --test adversary -- --ignored`.
#[test]
#[ignore]
fn long_sweep() {
    let mut s = Scenario::matrix();
    s.extend(
        matrix(|s| s.flow == Flow::Thesis)
            .into_iter()
            .map(|mut sc| {
                sc.flood = 2;
                sc.name = format!("{} flood", sc.name);
                sc
            }),
    );
    sweep(&s, 500);
}

/// FOUND (psp-core `KeyRing`, fixed with tests/keyring_rotation.rs): host 0's keepalive of
/// session 1 is lost, so host 1 keeps it waiting as *next*; host 1 then starts session 2 and
/// host 0 answers. The late frames promoted each host's older waiting session over the newer
/// one: the two sealed under different sessions, opened each other's only during the grace
/// period, then nothing until a rekey. Random sweep with the network alphabet, shrunk.
#[test]
fn a_late_frame_under_an_older_session_does_not_swap_the_hosts() {
    use Action::*;
    let mut sc = Scenario::new("waiting next");
    sc.alphabet = Alphabet::network();
    sc.env.kicks = 2;
    let trace = [
        Deliver(0),
        Want {
            p: 1,
            q: 0,
            rekey: false,
        },
        Deliver(0),
        Drop(0),
        Deliver(0),
        Tick,
        Deliver(1),
        Deliver(0),
        Deliver(0),
        Replay { log: 4, to: 0 },
        Deliver(0),
        Deliver(1),
        Deliver(1),
        Drop(1),
        Drop(0),
        Tick,
        Deliver(0),
        Deliver(0),
        Deliver(1),
        Dup(0),
        Drop(0),
        Deliver(0),
        Deliver(0),
        Traffic { p: 0, q: 1 },
        Deliver(0),
        Deliver(1),
        Deliver(1),
    ];
    let mut w = Explorer::new(sc).replay(504, &trace).unwrap();
    assert!(w.finish().unwrap());
}

/// KNOWN (not fixed; the compact flow inside a gateway-like driver, which the project does not
/// run): the initiator's confirmation is delayed past the responder's timeout, an insider
/// future-dates one Request, and then a flood of the hosts' own old Requests keeps each host
/// answering the other's dead Requests (taken again once the hybrid rule's window is over),
/// so neither starts a handshake of its own and the initiator keeps sealing under keys its
/// peer never confirmed. Found by the long run (about 1 run in 1,000 of the compact flood
/// scenarios), shrunk. If this starts to pass, update docs/SESSIONS.md.
#[test]
fn known_compact_flow_livelock_under_a_replay_flood() {
    use Action::*;
    let mut sc = Scenario::new("compact flood");
    sc.flow = Flow::Compact;
    sc.position = Position::Path1 { path2_seen: false };
    sc.flood = 2;
    let trace = [
        Drop(0),
        Deliver(1),
        Deliver(0),
        Tick,
        Deliver(1),
        Deliver(0),
        Deliver(1),
        Deliver(0),
        Tick,
        Deliver(1),
        Deliver(2),
        Drop(0),
        Deliver(0),
        Tick,
        Deliver(0),
        Deliver(1),
        Deliver(6),
        Deliver(1),
        Dup(3),
        Deliver(3),
        Deliver(3),
        Traffic { p: 0, q: 1 },
        Modify(0, Op::FutureTimestamp),
        Deliver(0),
        Tick,
        Deliver(2),
        Drop(4),
        Deliver(2),
        Deliver(3),
    ];
    let ex = Explorer::new(sc);
    assert!(ex.breaks(312, &trace, ViolationKind::Liveness));
    // Without the flood the hosts recover.
    let mut sc = ex.scenario.clone();
    sc.flood = 0;
    assert!(!Explorer::new(sc).breaks(312, &trace, ViolationKind::Liveness));
}
