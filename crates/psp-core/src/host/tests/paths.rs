//! Two paths (docs/SESSIONS.md, "Two paths"): per-path liveness, failover and back, `both`,
//! the thesis' mode, handshakes while a path is down, restarts during a cut.

use super::*;

/// Two hosts with a session, paths in `mode`, SMKEX `smkex`.
fn net(mode: PathMode, smkex: SmkexMode) -> Net {
    let mut n = Net::new(Opts {
        path_mode: mode,
        smkex,
        ..Opts::default()
    });
    up(&mut n);
    n.advance(100);
    n
}

/// Sends a ping each way `times` times, 10 ms apart; how many arrived, and on which paths the
/// data frames went (from the capture).
fn pings(n: &mut Net, times: u16) -> (usize, [usize; 2]) {
    let before = n.delivered[0].len() + n.delivered[1].len();
    let seen = n.seen.len();
    for s in 0..times {
        let _ = n.send(0, &ping(1, 100 + s));
        let _ = n.send(1, &ping(2, 100 + s));
        n.settle();
        n.advance(10);
    }
    let mut on = [0; 2];
    for w in &n.seen[seen..] {
        if w.frame.len() > 64 {
            on[usize::from(w.path.0)] += 1;
        }
    }
    (n.delivered[0].len() + n.delivered[1].len() - before, on)
}

fn path_events(n: &Net, i: usize) -> Vec<(u8, bool)> {
    n.events[i]
        .iter()
        .filter_map(|e| match e {
            HostEvent::PathChanged { path, up, .. } => Some((path.0, *up)),
            _ => None,
        })
        .collect()
}

#[test]
fn failover_moves_data_to_path_2_when_path_1_is_cut_and_back_when_it_returns() {
    let mut n = net(PathMode::Failover, SmkexMode::Required);
    assert_eq!(pings(&mut n, 5), (10, [10, 0]), "data on path 1");
    n.cut[0] = true;
    n.advance(150);
    assert_eq!(path_events(&n, 0), [(0, false)]);
    assert_eq!(path_events(&n, 1), [(0, false)]);
    assert!(!n.status(0).paths[0].unwrap().up && n.status(0).paths[1].unwrap().up);
    assert_eq!(pings(&mut n, 5), (10, [0, 10]), "every ping over path 2");
    // Path 1 back: the first frame on it (a probe) brings it up; data follows at once.
    n.cut[0] = false;
    n.advance(60);
    assert_eq!(path_events(&n, 0), [(0, false), (0, true)]);
    assert_eq!(
        pings(&mut n, 5),
        (10, [10, 0]),
        "back on path 1, nothing lost"
    );
    assert!(n.status(0).up && n.status(1).up);
}

#[test]
fn both_spreads_data_over_the_two_paths_and_keeps_going_on_one() {
    let mut n = net(PathMode::Both, SmkexMode::Required);
    let (got, on) = pings(&mut n, 10);
    assert_eq!(got, 20);
    assert!(on[0] >= 8 && on[1] >= 8, "{on:?}");
    n.cut[1] = true;
    n.advance(150);
    assert_eq!(pings(&mut n, 5), (10, [10, 0]));
}

#[test]
fn the_thesis_mode_never_moves_data_and_sends_no_probes() {
    let mut n = net(PathMode::Thesis, SmkexMode::Required);
    let seen = n.seen.len();
    n.advance(500);
    assert!(
        n.seen[seen..].iter().all(|w| w.path == PathId::FIRST),
        "no probes on path 2"
    );
    n.cut[0] = true;
    n.advance(150);
    assert_eq!(pings(&mut n, 3).0, 0, "path 1 cut: nothing crosses");
    assert!(path_events(&n, 0).is_empty());
}

#[test]
fn probes_go_only_on_the_idle_path_every_25_ms() {
    let mut n = net(PathMode::Failover, SmkexMode::Required);
    let seen = n.seen.len();
    n.advance(1000);
    let probes = |p: u8| {
        n.seen[seen..]
            .iter()
            .filter(|w| w.path.0 == p && w.frame.len() <= 64)
            .count()
    };
    // Each host probes each path it sent nothing on: up to 40 a second each (the test clock
    // moves in 10 ms steps, so a 25 ms timer fires every 30 ms).
    assert!((60..=90).contains(&probes(0)), "{}", probes(0));
    assert!((60..=90).contains(&probes(1)), "{}", probes(1));
    let data = pings(&mut n, 50);
    assert_eq!(data.0, 100);
    let seen = n.seen.len();
    n.advance(0);
    assert_eq!(n.seen.len(), seen);
}

#[test]
fn with_path_2_cut_require_never_rekeys_on_one_path_and_prefer_does() {
    for (smkex, single) in [(SmkexMode::Required, false), (SmkexMode::Preferred, true)] {
        let mut n = Net::new(Opts {
            smkex,
            rekey_after_s: 2,
            ..Opts::default()
        });
        up(&mut n);
        n.cut[1] = true;
        n.advance(4000);
        let single_path = n.events[0]
            .iter()
            .chain(&n.events[1])
            .any(|e| matches!(e, HostEvent::SessionUp { info, .. } if !info.two_path));
        assert_eq!(single_path, single, "{smkex:?}");
        // Either way the session in force still carries data.
        assert_eq!(pings(&mut n, 3).0, 6, "{smkex:?}");
    }
}

#[test]
fn with_path_1_cut_no_handshake_completes_and_the_session_goes_on() {
    let mut n = Net::new(Opts {
        rekey_after_s: 2,
        ..Opts::default()
    });
    up(&mut n);
    let sessions = n.counters(0).sessions + n.counters(1).sessions;
    n.cut[0] = true;
    n.advance(5000);
    assert_eq!(n.counters(0).sessions + n.counters(1).sessions, sessions);
    assert_eq!(pings(&mut n, 3).0, 6, "data over path 2 under the old keys");
    n.cut[0] = false;
    n.advance(20_000);
    assert!(
        n.counters(0).sessions + n.counters(1).sessions > sessions,
        "rekeyed once back"
    );
    assert_eq!(pings(&mut n, 3), (6, [6, 0]));
}

#[test]
fn a_restart_during_a_cut_of_path_1_recovers_when_it_returns() {
    for restarted in 0..2 {
        let mut n = net(PathMode::Failover, SmkexMode::Required);
        n.cut[0] = true;
        n.advance(150);
        n.hosts[restarted] = host(restarted as u8 + 1, Opts::default());
        n.drain(restarted);
        n.advance(2000);
        n.cut[0] = false;
        n.advance(40_000);
        assert_eq!(pings(&mut n, 3).0, 6, "restarted {restarted}");
    }
}

#[test]
fn a_frame_replayed_from_one_path_onto_the_other_is_refused() {
    let mut n = net(PathMode::Both, SmkexMode::Required);
    let seen = n.seen.len();
    let _ = pings(&mut n, 4);
    let captured: Vec<Wire> = n.seen[seen..]
        .iter()
        .filter(|w| w.frame.len() > 64)
        .cloned()
        .collect();
    let before = n.delivered[0].len() + n.delivered[1].len();
    for mut w in captured {
        w.path = PathId(1 - w.path.0);
        let _ = n.deliver(w);
    }
    assert_eq!(n.delivered[0].len() + n.delivered[1].len(), before);
}
