//! Restarts and liveness: a restarted peer (normalized or not) gets a new session at once, a
//! stopped peer's session goes down within the liveness bound, nothing captured before a
//! restart opens again after it, and an insider cannot write into a normalized stream.

use alloc::vec;
use alloc::vec::Vec;

use super::*;

/// Host `i` of `n` crashes and starts again with `o`; with `floors`, its state directory gave
/// back the replay floors it had written.
fn restart(n: &mut Net, i: usize, o: Opts, floors: bool) {
    let saved = if floors {
        n.hosts[i].replay_floors()
    } else {
        Vec::new()
    };
    let mut h = host(i as u8 + 1, o);
    if floors {
        h = resumed(i as u8 + 1, o, saved);
    }
    n.hosts[i] = h;
    n.drain(i);
}

fn resumed(me: u8, o: Opts, floors: Vec<ReplayFloor>) -> Host {
    let h = host(me, o);
    let cfg = h.config().clone();
    let specs: Vec<PeerSpec> = h.peers().map(|(_, s)| s.clone()).collect();
    let signer = o.identities.then(|| identity(me).signing_key().unwrap());
    Host::new(
        Instant::ZERO,
        cfg,
        group_spec(),
        signer,
        specs,
        Resume {
            clock: None,
            floors,
        },
    )
    .unwrap()
}

/// Pings both ways every 100 ms for `ms`; how many arrived.
fn pings(n: &mut Net, ms: u64, seq: &mut u16) -> usize {
    let before = n.delivered[0].len() + n.delivered[1].len();
    for _ in 0..ms / 100 {
        *seq += 1;
        let _ = n.send(0, &ping(1, *seq));
        let _ = n.send(1, &ping(2, *seq));
        n.settle();
        n.advance(100);
    }
    n.delivered[0].len() + n.delivered[1].len() - before
}

/// The review's HIGH finding: a normalized peer answered a restarted host's Request inside its
/// stream, under the old session's keys the restarted host no longer had (70 s without a ping,
/// the pair back only when the old session expired). The answer now goes the way the Request
/// came, and the Request says the initiator has no session.
#[test]
fn a_restarted_normalized_peer_gets_a_new_session_at_once() {
    let o = Opts {
        normalize: true,
        ..Opts::default()
    };
    let mut n = Net::new(o);
    up(&mut n);
    let mut seq = 0;
    assert!(pings(&mut n, 2000, &mut seq) > 30);
    restart(&mut n, 1, o, true);
    let got = pings(&mut n, 3000, &mut seq);
    assert!(got >= 50, "{got} pings in the 3 s after the restart");
    assert!(n.status(0).up && n.status(1).up);
    let (_, info) = n.status(0).last.unwrap();
    assert!(
        !info.rekey && info.rekeys == 0,
        "a new session, not a rekey: {info:?}"
    );
    assert_eq!(n.counters(0).rekeys, 0);
}

/// The same for a peer without normalization, and the restarted peer's own view.
#[test]
fn a_restarted_peer_shows_as_a_new_session() {
    let o = Opts {
        rekey_after_s: 2,
        ..Opts::default()
    };
    let mut n = Net::new(o);
    up(&mut n);
    let mut seq = 0;
    pings(&mut n, 5000, &mut seq);
    assert!(n.status(0).last.unwrap().1.rekeys >= 1, "rekeys ran");
    restart(&mut n, 1, o, true);
    assert!(pings(&mut n, 1500, &mut seq) >= 20);
    let (_, info) = n.status(0).last.unwrap();
    assert!(!info.rekey && info.rekeys == 0, "{info:?}");
}

/// A stopped peer: its session goes down within the liveness bound (the keepalive and the
/// bound are [`SessionSettings::KEEPALIVE`] and [`SessionSettings::DEAD_AFTER`]), status and an
/// event say since when and why, frames wait for the next session and a handshake starts.
#[test]
fn a_stopped_peer_goes_down_within_the_liveness_bound() {
    let mut n = Net::new(Opts::default());
    up(&mut n);
    let mut seq = 0;
    pings(&mut n, 1000, &mut seq);
    // Host 2 stops: nothing it sends, nothing delivered to it.
    let stopped_at = n.now;
    n.stopped[1] = true;
    let mut down_at = None;
    for _ in 0..400 {
        seq += 1;
        let _ = n.send(0, &ping(1, seq));
        n.advance(100);
        if down_at.is_none() && !n.status(0).up {
            down_at = Some(n.now);
            // Not sent into the void: it waits for the next session.
            seq += 1;
            assert_eq!(n.send(0, &ping(1, seq)), TapResult::Queued);
            assert!(n.status(0).pending > 0 && n.status(0).handshaking);
        }
    }
    let down_at = down_at.expect("the session went down");
    let after = down_at.saturating_since(stopped_at);
    assert!(
        after <= SessionSettings::DEAD_AFTER + Duration::from_millis(200),
        "down {} ms after the peer stopped",
        after.total_millis()
    );
    let st = n.status(0);
    let down = st.down.expect("status says why");
    assert!(down.silent >= SessionSettings::DEAD_AFTER);
    assert!(n.events[0].iter().any(
        |e| matches!(e, HostEvent::SessionDown { silent, .. } if *silent >= SessionSettings::DEAD_AFTER)
    ));
    assert!(n.counters(0).initiated >= 2, "a handshake started");
}

/// A peer that only receives keeps the session up: it answers with keepalives.
#[test]
fn one_way_traffic_keeps_the_session_up_with_keepalives() {
    let mut n = Net::new(Opts::default());
    up(&mut n);
    for i in 0..600 {
        let _ = n.send(0, &ping(1, i));
        n.settle();
        n.advance(100);
    }
    assert!(n.status(0).up && n.status(0).down.is_none());
    assert!(
        n.counters(0).rx_sub >= 5,
        "keepalives: {}",
        n.counters(0).rx_sub
    );
}

/// The review's MED finding: an insider with the group key (the peer pins no identity) opened
/// sub-protocol 0x0005 under the group opener for a unicast destination, so its forged
/// echoes (and a rate it suggested) went into a normalized session peer's stream. A stream
/// payload now counts only under the key that seals the peer's stream.
#[test]
fn an_insiders_stream_payload_under_the_group_key_is_refused() {
    let mut n = Net::new(Opts {
        normalize: true,
        identities: false,
        ..Opts::default()
    });
    up(&mut n);
    let mut seq = 0;
    pings(&mut n, 1000, &mut seq);
    let delivered = n.delivered[0].len();
    // The insider's payload: a real normalized payload carrying a ping "from host 2".
    let cfg = crate::normalize::NormConfig {
        frame_len: 500,
        wire_len: 600,
        ..crate::normalize::NormConfig::default()
    };
    let mut ep = crate::normalize::Endpoint::new(n.now, cfg, vec![0u8; cfg.storage_len()]).unwrap();
    ep.handle_inner(n.now, &ping(2, 999)).unwrap();
    let at = ep.poll_timeout().unwrap().max(n.now);
    let mut payload = vec![0u8; 600];
    let len = ep.poll_transmit(at, &mut payload).unwrap().payload.len();
    let mut sealer = forger(&[0x42; 16], u32::MAX - 100);
    let mut out = vec![0u8; 2048];
    let f = sealer
        .seal_sub(
            n.now,
            MAC_A,
            MAC_B,
            Protocol::Normalized,
            &payload[..len],
            &mut out,
        )
        .unwrap()
        .to_vec();
    let r = n.deliver(Wire {
        from: 2,
        path: PathId::FIRST,
        frame: f,
    });
    assert_eq!(r, Received::Dropped(RxDrop::GroupUnicast(PeerId(0))));
    n.settle();
    assert!(!n.delivered[0][delivered..].contains(&ping(2, 999)));
}

/// The review's MED finding: a captured frame under a `key_file` key or the group key opened
/// once more after the receiver restarted (its windows started empty). The windows now start
/// above the floors the host had written.
#[test]
fn a_captured_frame_does_not_open_again_after_a_restart() {
    let o = Opts::default();
    for floors in [false, true] {
        let mut n = Net::with_hosts([static_host(1, &[0x17; 16]), static_host(2, &[0x17; 16])]);
        assert!(matches!(n.send(1, &ping(2, 1)), TapResult::Sealed { .. }));
        let captured = n.wire.clone();
        n.settle();
        assert_eq!(n.delivered[0].len(), 1);
        // A broadcast under the group key, captured too.
        let bcast = [&[0xff; 6][..], &ping(2, 2)[6..]].concat();
        let _ = n.send(1, &bcast);
        let captured_bcast = n.wire.clone();
        n.settle();
        assert_eq!(n.delivered[0].len(), 2);
        let saved = n.hosts[0].replay_floors();
        let _ = o;
        n.hosts[0] = static_host_resumed(1, &[0x17; 16], if floors { saved } else { Vec::new() });
        n.drain(0);
        for w in captured.into_iter().chain(captured_bcast) {
            let _ = n.deliver(w);
        }
        n.settle();
        if floors {
            assert_eq!(n.delivered[0].len(), 2, "nothing opened twice");
        } else {
            assert_eq!(
                n.delivered[0].len(),
                4,
                "without floors the replays pass: the test can fail"
            );
        }
    }
}

/// Found by the simulator: a peer whose `key_file` is the group key, on a host with an
/// identity, had every unicast frame refused (`unsupported`: the group key's frames are signed,
/// and that peer's opener took no signatures).
#[test]
fn a_peer_on_the_group_key_reaches_a_host_with_an_identity() {
    let group = [0x42; 16];
    let mut n = Net::with_hosts([static_host(1, &group), static_host(2, &group)]);
    assert!(matches!(n.send(0, &ping(1, 1)), TapResult::Sealed { .. }));
    n.settle();
    assert_eq!(n.delivered[1], vec![ping(1, 1)]);
}

fn static_host(me: u8, key: &[u8]) -> Host {
    static_host_resumed(me, key, Vec::new())
}

fn static_host_resumed(me: u8, key: &[u8], floors: Vec<ReplayFloor>) -> Host {
    let h = group_copies::static_host(me, key);
    let cfg = h.config().clone();
    let specs: Vec<PeerSpec> = h.peers().map(|(_, s)| s.clone()).collect();
    Host::new(
        Instant::ZERO,
        cfg,
        group_spec(),
        Some(identity(me).signing_key().unwrap()),
        specs,
        Resume {
            clock: None,
            floors,
        },
    )
    .unwrap()
}
