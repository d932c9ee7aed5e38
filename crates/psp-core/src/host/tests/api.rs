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
        |e| matches!(e, Event::Reserve { key, group: true, .. } if key == other.fingerprint()),
    );
    assert!(asked, "the new group key reserves its numbers");
}
