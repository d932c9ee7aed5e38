//! The host's routing and inspection: what it counts for frames it cannot route, what its
//! accessors give, and what a reload keeps (found missing by cargo-mutants: mutated, these went
//! unnoticed by the other tests).

use alloc::vec;
use alloc::vec::Vec;

use zeroize::Zeroizing;

use super::*;

/// A unicast IPv4 frame from `src` to `dst`.
fn frame(dst: Mac, src: Mac) -> Vec<u8> {
    let mut f = ping(1, 1);
    f[..6].copy_from_slice(&dst);
    f[6..12].copy_from_slice(&src);
    f
}

#[test]
fn frames_that_cannot_be_routed_are_counted_by_reason() {
    let mut n = Net::new(Opts::default());
    // From the protected side: too short, another source MAC, a MAC that is no peer's.
    assert_eq!(
        n.send(0, &[1, 2, 3]),
        TapResult::Dropped(TapDrop::Malformed)
    );
    assert_eq!(
        n.send(0, &frame(MAC_B, [2, 0, 0, 0, 0, 9])),
        TapResult::Dropped(TapDrop::SpoofedSrc)
    );
    assert_eq!(
        n.send(0, &frame([2, 0, 0, 0, 0, 9], MAC_A)),
        TapResult::Dropped(TapDrop::NoRoute)
    );
    let c = n.hosts[0].counters();
    assert_eq!((c.malformed, c.spoofed_src, c.no_route), (1, 1, 1));
    // From an uplink: too short, to another unicast MAC (path 1 and path 2), a broadcast on
    // path 2, from a MAC that is no peer's.
    let mut short = vec![0u8; 5];
    let r = n.hosts[0].handle_uplink(n.now, PathId::FIRST, &mut short, &mut n.rng);
    assert_eq!(r, Received::Dropped(RxDrop::Malformed));
    for (path, dst) in [
        (PathId::FIRST, [2, 0, 0, 0, 0, 9]),
        (PathId::SECOND, [2, 0, 0, 0, 0, 9]),
        (PathId::SECOND, [0xff; 6]),
    ] {
        let mut f = frame(dst, MAC_B);
        let r = n.hosts[0].handle_uplink(n.now, path, &mut f, &mut n.rng);
        assert_eq!(
            r,
            Received::Dropped(RxDrop::NotForUs),
            "{path:?} {dst:02x?}"
        );
    }
    let mut f = frame(MAC_A, [2, 0, 0, 0, 0, 9]);
    let r = n.hosts[0].handle_uplink(n.now, PathId::FIRST, &mut f, &mut n.rng);
    assert_eq!(
        r,
        Received::Dropped(RxDrop::UnknownPeer([2, 0, 0, 0, 0, 9]))
    );
    let c = n.hosts[0].counters();
    assert_eq!((c.malformed, c.not_for_us, c.unknown_peer), (2, 3, 1));
}

#[test]
fn the_accessors_show_the_peers_and_their_sessions() {
    let mut n = Net::new(Opts::default());
    let h = &n.hosts[0];
    assert_eq!(h.peer_by_mac(&MAC_B), Some(PeerId(0)));
    assert_eq!(h.peer_by_mac(&MAC_A), None);
    assert_eq!(
        h.peer(PeerId(0)).map(|p| p.spec().name.as_str()),
        Some("vm2")
    );
    assert!(h.peer(PeerId(1)).is_none());
    assert_eq!(h.key_slots(PeerId(0)).count(), 0);
    up(&mut n);
    let slots: Vec<_> = n.hosts[0].key_slots(PeerId(0)).map(|(k, _)| k).collect();
    assert_eq!(slots, vec![SlotKind::Current]);
    let (p, shared) = n.hosts[0].peer_mut(PeerId(0)).unwrap();
    assert_eq!(p.id(), PeerId(0));
    assert!(p.poll_timeout().is_some(), "a session sets timers");
    assert_eq!(shared.config().mac, MAC_A);
    assert!(p.session_status(Instant::ZERO).is_some());
}

#[test]
fn a_reload_keeps_what_did_not_change_and_renews_what_did() {
    let mut n = Net::new(Opts {
        normalize: true,
        ..Opts::default()
    });
    up(&mut n);
    let specs: Vec<PeerSpec> = n.hosts[0].peers().map(|(_, s)| s.clone()).collect();
    // Only S_goal changed: the stream and the session stay.
    let mut faster = specs.clone();
    if let Some(norm) = faster[0].normalize.as_mut() {
        norm.cfg.s_goal = crate::normalize::Rate::from_kbps(9000);
    }
    let sessions = n.counters(0).sessions;
    n.hosts[0].reconfigure(n.now, group_spec(), faster).unwrap();
    assert!(n.status(0).up, "the session stayed");
    assert_eq!(n.counters(0).sessions, sessions);
    assert_eq!(
        n.hosts[0].norm_status(PeerId(0)).unwrap().0.s_goal.kbps(),
        9000
    );
    // Another group key: the sessions stay (their keys do not depend on it), and the new key
    // asks for its numbers.
    while n.hosts[0].poll_event().is_some() {}
    let mut other = group_spec();
    other.key = Zeroizing::new(vec![0x43; 16]);
    n.hosts[0].reconfigure(n.now, other.clone(), specs).unwrap();
    assert!(n.status(0).up, "the session stayed");
    assert_eq!(n.hosts[0].group_suite(), SuiteId::Aes128Gcm);
    let asked = core::iter::from_fn(|| n.hosts[0].poll_event()).any(
        |e| matches!(e, HostEvent::Reserve { key, group: true, .. } if key == other.fingerprint()),
    );
    assert!(asked, "the new group key reserves its numbers");
}

/// A peer `vm3` at `mac` with a key of its own.
fn static_peer(mac: Mac) -> PeerSpec {
    PeerSpec {
        name: "vm3".into(),
        macs: vec![mac],
        keying: Keying::Static(KeySpec {
            key: Zeroizing::new(vec![0x33; 16]),
            ..group_spec()
        }),
        paths: 2,
        normalize: None,
    }
}

/// One call with frames for two peers: each frame is handled for its own destination (a run of
/// frames to one peer is handed to it together, and the run ends at the first frame to another).
#[test]
fn a_batch_for_two_peers_goes_to_each() {
    const MAC_C: Mac = [2, 0x50, 0x53, 0, 0, 3];
    let mut n = Net::new(Opts::default());
    let mut specs: Vec<PeerSpec> = n.hosts[0].peers().map(|(_, s)| s.clone()).collect();
    specs.push(static_peer(MAC_C));
    n.hosts[0].reconfigure(n.now, group_spec(), specs).unwrap();
    n.drain(0);
    let to_c = frame(MAC_C, MAC_A);
    let to_b = frame(MAC_B, MAC_A);
    let mut outs = [[0u8; 2048]; 4];
    let [o1, o2, o3, o4] = &mut outs;
    let mut jobs = [
        TapJob::new(&to_c, o1),
        TapJob::new(&to_c, o2),
        TapJob::new(&to_b, o3),
        TapJob::new(&to_c, o4),
    ];
    n.hosts[0].handle_tap(n.now, &mut jobs, &mut n.rng);
    let results: Vec<TapResult> = jobs.iter().map(|j| j.result).collect();
    let to_c_sealed = |r: &TapResult| {
        matches!(
            r,
            TapResult::Sealed {
                dest: Dest::Peer(PeerId(1)),
                ..
            }
        )
    };
    assert!(to_c_sealed(&results[0]) && to_c_sealed(&results[1]) && to_c_sealed(&results[3]));
    assert_eq!(
        results[2],
        TapResult::Queued,
        "vm2's frame waits for its session"
    );
}

/// A refused reservation is reported once, asked for again once per key after
/// [`RESERVE_RETRY`], and no more once it was made durable.
#[test]
fn a_refused_reservation_is_retried_until_it_is_made() {
    let mut n = Net::new(Opts::default());
    let key = group_spec().fingerprint();
    let h = &mut n.hosts[0];
    while h.poll_event().is_some() {}
    let t = n.now;
    h.handle_reserve_failed(t, key, true, None);
    h.handle_reserve_failed(t, key, true, None);
    let events: Vec<HostEvent> = core::iter::from_fn(|| h.poll_event()).collect();
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, HostEvent::ReserveRefused { .. }))
            .count(),
        1,
        "reported once: {events:?}"
    );
    let asked = |h: &mut Host| {
        core::iter::from_fn(|| h.poll_event())
            .filter(|e| matches!(e, HostEvent::Reserve { key: k, .. } if *k == key))
            .count()
    };
    assert!(h.poll_timeout().is_some_and(|at| at <= t + RESERVE_RETRY));
    h.handle_timeout(t + Duration::from_millis(999), &mut n.rng);
    assert_eq!(asked(h), 0, "not before RESERVE_RETRY");
    h.handle_timeout(t + RESERVE_RETRY, &mut n.rng);
    assert_eq!(asked(h), 1, "asked for again, once");
    h.handle_reserve_failed(t + RESERVE_RETRY, key, true, None);
    let _ = asked(h);
    h.handle_reserved(
        key,
        Claim {
            from: Seq(1000),
            limit: Seq(1 << 20),
        },
    );
    let later = t + RESERVE_RETRY + RESERVE_RETRY;
    h.handle_timeout(later, &mut n.rng);
    assert_eq!(asked(h), 0, "made durable: not asked for again");
}

/// The Request clock's floor is asked for again once the last one was saved (and the
/// timestamps issued came near it), and again after a write that failed.
#[test]
fn the_request_clock_floor_is_asked_for_again() {
    let mut n = Net::new(Opts {
        rekey_after_s: 20,
        ..Opts::default()
    });
    up(&mut n);
    n.advance(130_000);
    let floors = |n: &Net, i: usize| {
        n.events[i]
            .iter()
            .filter(|e| matches!(e, HostEvent::ClockFloor(_)))
            .count()
    };
    let total = floors(&n, 0) + floors(&n, 1);
    assert!(
        total >= 3,
        "{total} floors asked for in 130 s of 20 s rekeys"
    );
    // A failed write: asked for at the next Request.
    let h = &mut n.hosts[0];
    while h.poll_event().is_some() {}
    h.shared.clock.saving = Some((Tai64n::from_unix(1, 0), true));
    h.handle_clock_floor_saved(Tai64n::from_unix(1, 0), false);
    assert!(h.shared.clock.saving.is_none());
}

/// Broadcasts travel inside a normalized session peer's stream while its session is up (then it
/// needs no copy under the group key), not before.
#[test]
fn broadcasts_stream_to_a_normalized_peer_once_it_is_up() {
    let mut n = Net::new(Opts {
        normalize: true,
        ..Opts::default()
    });
    assert!(!n.hosts[0].streams_to(PeerId(0), n.now));
    up(&mut n);
    assert!(n.hosts[0].streams_to(PeerId(0), n.now));
    assert!(!n.hosts[0].streams_to(PeerId(5), n.now));
    let plain = Net::new(Opts::default());
    assert!(!plain.hosts[0].streams_to(PeerId(0), plain.now));
}

/// A reload that changes a normalized peer's stream settings (not only S_goal) gives it a
/// stream with the new settings; the handshakes that made the session went under the group key
/// and were counted.
#[test]
fn a_changed_stream_takes_the_new_settings() {
    let mut n = Net::new(Opts {
        normalize: true,
        ..Opts::default()
    });
    up(&mut n);
    assert!(
        n.hosts[0].counters().group_tx_frames >= 2,
        "the handshake's messages"
    );
    let mut specs: Vec<PeerSpec> = n.hosts[0].peers().map(|(_, s)| s.clone()).collect();
    if let Some(norm) = specs[0].normalize.as_mut() {
        norm.frame_size = 700;
    }
    n.hosts[0].reconfigure(n.now, group_spec(), specs).unwrap();
    n.advance(2_000);
    let (_, _, frame_size) = n.hosts[0].norm_status(PeerId(0)).unwrap();
    assert_eq!(frame_size, 700);
}

/// A session seals until its expiry, not at it; a frame under it is delivered as vouched for by
/// its ICV.
#[test]
fn a_session_is_down_at_its_expiry_and_its_frames_are_trusted() {
    let mut n = Net::new(Opts::default());
    up(&mut n);
    let _ = n.send(1, &ping(2, 1));
    let w = n.wire.pop().unwrap();
    let r = n.deliver(w);
    assert!(
        matches!(r, Received::Deliver { trusted: true, .. }),
        "{r:?}"
    );
    let expires = n.hosts[0]
        .key_slots(PeerId(0))
        .map(|(_, s)| s.expires_at())
        .max()
        .unwrap();
    let h = &n.hosts[0];
    assert!(h.session_status(PeerId(0), n.now).unwrap().up);
    assert!(!h.session_status(PeerId(0), expires).unwrap().up);
}

/// A frame on path 2 that opens under the group key but is no handshake message is dropped and
/// counted (path 2 carries only SMKEX's messages).
#[test]
fn data_on_path_2_is_ignored_and_counted() {
    let mut n = Net::new(Opts {
        identities: false,
        ..Opts::default()
    });
    let mut sealer = forger(&[0x42; 16], 5000);
    let mut out = vec![0u8; 256];
    let f = sealer.seal(n.now, &ping(2, 1), &mut out).unwrap().to_vec();
    let r = n.deliver(Wire {
        from: 2,
        path: PathId::SECOND,
        frame: f,
    });
    assert_eq!(r, Received::Dropped(RxDrop::Path2Ignored(PeerId(0))));
    assert_eq!(n.hosts[0].counters().path2_ignored, 1);
}
