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

/// The ping numbers host 2 was handed from `from` on.
fn delivered_seqs(n: &Net, from: usize) -> Vec<u16> {
    n.delivered[1][from..]
        .iter()
        .map(|f| u16::from_be_bytes([f[40], f[41]]))
        .collect()
}

/// Host 1 sends `count` pings from `first`; the wire's frames are taken off it, path 1's first.
fn burst(n: &mut Net, first: u16, count: u16) -> (Vec<Wire>, Vec<Wire>) {
    for s in 0..count {
        let _ = n.send(0, &ping(1, first + s));
    }
    core::mem::take(&mut n.wire)
        .into_iter()
        .partition(|w| w.path == PathId::FIRST)
}

#[test]
fn both_puts_frames_that_crossed_paths_back_in_order() {
    let mut n = net(PathMode::Both, SmkexMode::Required);
    let before = n.delivered[1].len();
    // Path 2 is slower: all of path 1's frames arrive first.
    let (p1, p2) = burst(&mut n, 500, 20);
    assert!(p1.len() >= 9 && p2.len() >= 9, "{} {}", p1.len(), p2.len());
    for w in p1.into_iter().chain(p2) {
        let _ = n.deliver(w);
    }
    n.settle();
    assert_eq!(delivered_seqs(&n, before), (500..520).collect::<Vec<_>>());
    let c = n.counters(1);
    assert!(c.reorder_held >= 9, "{c:?}");
    assert_eq!(
        (c.reorder_gaps, c.reorder_late, c.reorder_overflow),
        (0, 0, 0)
    );
}

#[test]
fn both_gives_a_lost_frame_up_as_soon_as_the_other_path_carried_a_later_one() {
    let mut n = net(PathMode::Both, SmkexMode::Required);
    let before = n.delivered[1].len();
    let (p1, mut p2) = burst(&mut n, 600, 10);
    // The first frame on path 2 is lost; the rest come in turn, interleaved.
    let _lost = p2.remove(0);
    let mut p2 = p2.into_iter();
    for w in p1 {
        let _ = n.deliver(w);
        if let Some(w) = p2.next() {
            let _ = n.deliver(w);
        }
    }
    n.settle();
    let got = delivered_seqs(&n, before);
    assert_eq!(got.len(), 9, "{got:?}");
    assert!(got.windows(2).all(|p| p[0] < p[1]), "in order: {got:?}");
    assert_eq!(n.counters(1).reorder_gaps, 1);
}

#[test]
fn both_waits_for_a_silent_path_at_most_reorder_wait() {
    let mut n = net(PathMode::Both, SmkexMode::Required);
    let before = n.delivered[1].len();
    let (p1, _lost) = burst(&mut n, 700, 6);
    for w in p1 {
        let _ = n.deliver(w);
    }
    // Path 1's frames after the first wait: path 2 said nothing since.
    let waiting = n.delivered[1].len() - before;
    assert!(waiting <= 1, "{waiting}");
    n.advance(REORDER_WAIT.total_micros() / 1000 + 10);
    let got = delivered_seqs(&n, before);
    assert_eq!(got.len(), 3, "{got:?}");
    assert!(got.windows(2).all(|p| p[0] < p[1]), "{got:?}");
}

/// A probe on the idle path goes out under the session's next sequence number, while path 1
/// may still hold thousands of earlier data frames in a socket buffer (the gateway's raw and
/// UDP sockets take 4 MiB, about 3,600 full frames): the probe that overtakes them must not
/// push them out of the replay window.
#[test]
fn a_probe_that_overtakes_a_deep_queue_on_path_1_loses_none_of_it() {
    let mut n = net(PathMode::Failover, SmkexMode::Required);
    let queued = 6000;
    let before = n.delivered[1].len();
    for s in 0..queued {
        assert!(matches!(
            n.send(0, &ping(1, s)),
            TapResult::Sealed { path, .. } if path == PathId::FIRST
        ));
    }
    // Path 1 holds them; path 2 carried nothing from host 1 for 25 ms, so a probe goes on it
    // and arrives first.
    let held = core::mem::take(&mut n.wire);
    let seen = n.seen.len();
    n.advance(30);
    assert!(
        n.seen[seen..]
            .iter()
            .any(|w| w.from == 1 && w.path == PathId::SECOND),
        "a probe went on path 2 and was delivered"
    );
    for w in held {
        let _ = n.deliver(w);
    }
    n.settle();
    assert_eq!(n.delivered[1].len() - before, usize::from(queued));
    assert_eq!(n.counters(1).drops_total(), 0, "{:?}", n.counters(1).drops);
}
