//! The hybrid post-quantum handshake through the host (docs/SESSIONS.md, "Hybrid post-quantum
//! sessions"): which pairs of modes get a session with ML-KEM-768, which get one without, which
//! get none, and that rekeys, restarts and normalized streams keep it.

use super::*;
use crate::handshake::messages::MAX_MESSAGE_LEN;
use alloc::collections::BTreeSet;

fn opts(kem: KemMode) -> Opts {
    Opts {
        kem,
        ..Opts::default()
    }
}

/// Two hosts, host 1 in `a`, host 2 in `b`.
fn pair(a: Opts, b: Opts) -> Net {
    Net::with_hosts([host(1, a), host(2, b)])
}

fn kem_of(n: &Net, i: usize) -> Option<bool> {
    n.status(i).last.map(|(_, info)| info.kem)
}

/// Pings both ways `times` times, 100 ms apart; how many arrived.
fn pings(n: &mut Net, times: u16, seq: &mut u16) -> usize {
    let before = n.delivered[0].len() + n.delivered[1].len();
    for _ in 0..times {
        *seq += 1;
        let _ = n.send(0, &ping(1, *seq));
        let _ = n.send(1, &ping(2, *seq));
        n.settle();
        n.advance(100);
    }
    n.delivered[0].len() + n.delivered[1].len() - before
}

fn kem_required(n: &Net, i: usize) -> u64 {
    let at = FAIL_REASONS
        .iter()
        .position(|r| *r == "kem_required")
        .unwrap();
    n.counters(i).handshake_failures[at]
}

#[test]
fn both_requiring_the_kem_get_a_hybrid_session_whose_largest_frame_fits_the_frame_limit() {
    let mut n = Net::new(opts(KemMode::Required));
    up(&mut n);
    assert_eq!((kem_of(&n, 0), kem_of(&n, 1)), (Some(true), Some(true)));
    // The KemShare (1,238 bytes of message) went sealed under the group key on path 1, in one
    // frame no longer than the host's frame limit.
    let largest = n
        .seen
        .iter()
        .map(|w| (w.frame.len(), w.path))
        .max()
        .unwrap();
    assert!(largest.0 > MAX_MESSAGE_LEN, "{largest:?}");
    assert!(
        largest.0 <= 1514 && largest.1 == PathId::FIRST,
        "{largest:?}"
    );
    let mut seq = 0;
    assert_eq!(pings(&mut n, 5, &mut seq), 10);
}

#[test]
fn the_modes_combine_as_smkex_modes_do() {
    use KemMode::{Off, Preferred, Required};
    // (host 1, host 2) -> a session, and whether it has the KEM.
    let table = [
        (Off, Off, Some(false)),
        (Off, Preferred, Some(false)),
        (Preferred, Off, Some(false)),
        (Preferred, Preferred, Some(true)),
        (Preferred, Required, Some(true)),
        (Required, Preferred, Some(true)),
        (Required, Required, Some(true)),
        (Required, Off, None),
        (Off, Required, None),
    ];
    for (a, b, want) in table {
        let mut n = pair(opts(a), opts(b));
        let _ = n.send(0, &ping(1, 0));
        n.settle();
        n.advance(3000);
        let got = n.status(0).up.then(|| kem_of(&n, 0).unwrap());
        assert_eq!(got, want, "{a:?} vs {b:?}");
        if want.is_some() {
            assert_eq!(kem_of(&n, 1), want, "{a:?} vs {b:?}: the responder agrees");
        } else {
            // The side that requires the KEM refuses, counts why, and nothing is delivered.
            assert!(!n.status(1).up);
            let refused = kem_required(&n, 0) + kem_required(&n, 1);
            assert!(refused >= 1, "{a:?} vs {b:?}: kem_required not counted");
            assert!(n.delivered[1].is_empty());
        }
    }
}

#[test]
fn rekeys_keep_the_kem_and_lose_nothing() {
    let o = Opts {
        rekey_after_s: 2,
        ..opts(KemMode::Required)
    };
    let mut n = Net::new(o);
    up(&mut n);
    let mut seq = 0;
    assert_eq!(pings(&mut n, 70, &mut seq), 140);
    let s = n.status(0);
    let (_, info) = s.last.unwrap();
    assert!(info.rekeys >= 2, "{info:?}");
    assert!(info.kem && kem_of(&n, 1) == Some(true));
}

#[test]
fn a_restart_of_either_side_comes_back_with_the_kem() {
    for i in 0..2 {
        let o = opts(KemMode::Required);
        let mut n = Net::new(o);
        up(&mut n);
        let mut seq = 0;
        assert_eq!(pings(&mut n, 3, &mut seq), 6);
        n.hosts[i] = host(i as u8 + 1, o);
        n.drain(i);
        // The restarted side starts over; within a few seconds both hold a hybrid session.
        let _ = pings(&mut n, 30, &mut seq);
        assert!(n.status(0).up && n.status(1).up, "restart of host {i}");
        assert_eq!((kem_of(&n, 0), kem_of(&n, 1)), (Some(true), Some(true)));
        assert_eq!(pings(&mut n, 5, &mut seq), 10, "restart of host {i}");
    }
}

#[test]
fn normalized_peers_rekey_with_the_kem_inside_their_streams() {
    let o = Opts {
        rekey_after_s: 2,
        normalize: true,
        ..opts(KemMode::Required)
    };
    let mut n = Net::new(o);
    up(&mut n);
    let mut seq = 0;
    assert_eq!(pings(&mut n, 50, &mut seq), 100);
    let (_, info) = n.status(0).last.unwrap();
    assert!(info.rekeys >= 1 && info.kem, "{info:?}");
    // One frame length on path 1 once the streams run, the KemShare included (the first
    // handshake went before). Path 2 carries probes and SMKEX's nonce and hash messages, whose
    // lengths the KEM does not change (docs/SESSIONS.md, "Two paths").
    let lens: BTreeSet<(u8, usize)> = n.seen[n.seen.len() / 2..]
        .iter()
        .map(|w| (w.path.0, w.frame.len()))
        .collect();
    let first: Vec<_> = lens.iter().filter(|(p, _)| *p == 0).collect();
    assert_eq!(first, [&(0, 600)], "{lens:?}");
    assert!(lens.iter().all(|&(p, l)| p == 0 || l < 200), "{lens:?}");
}
