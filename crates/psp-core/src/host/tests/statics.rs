//! Two hosts that are each other's peer under one `key_file` (a static key): what a changed
//! peer keeps, what each frame's ICV vouches for, what a normalized static peer's MTU is, and
//! sub-protocols that are not data (found missing by cargo-mutants).

use alloc::vec;
use alloc::vec::Vec;

use zeroize::Zeroizing;

use super::*;
use crate::wire::Protocol;

fn static_spec(other: Mac, suite: SuiteId, paths: u8) -> PeerSpec {
    let key = match suite {
        SuiteId::None => vec![],
        _ => vec![0x33; 16],
    };
    PeerSpec {
        name: "peer".into(),
        macs: vec![other],
        keying: Keying::Static(KeySpec {
            suite,
            key: Zeroizing::new(key),
            sealer: SealerConfig::new().with_allow_none(suite == SuiteId::None),
            opener: OpenerConfig::new().with_allow_none(suite == SuiteId::None),
        }),
        paths,
        normalize: None,
    }
}

/// Hosts 1 and 2 with each other as a static peer under `suite`.
fn static_pair(suite: SuiteId) -> Net {
    let mut n = Net::new(Opts {
        identities: false,
        ..Opts::default()
    });
    for (i, other) in [(0, MAC_B), (1, MAC_A)] {
        n.hosts[i]
            .reconfigure(n.now, group_spec(), vec![static_spec(other, suite, 2)])
            .unwrap();
        n.drain(i);
    }
    n
}

/// Sends a ping from host 1 and returns the sealed frame (not yet delivered).
fn sealed_ping(n: &mut Net, seq: u16) -> Wire {
    assert!(matches!(n.send(0, &ping(1, seq)), TapResult::Sealed { .. }));
    n.wire.pop().unwrap()
}

#[test]
fn a_frame_is_trusted_only_under_an_icv_and_counted() {
    for (suite, trusted) in [(SuiteId::Aes128Gcm, true), (SuiteId::None, false)] {
        let mut n = static_pair(suite);
        let w = sealed_ping(&mut n, 1);
        let r = n.deliver(w);
        assert!(
            matches!(r, Received::Deliver { trusted: t, .. } if t == trusted),
            "{suite:?}: {r:?}"
        );
        let c = n.counters(1);
        assert_eq!(
            (c.rx_frames, c.rx_bytes),
            (1, ping(1, 1).len() as u64),
            "{suite:?}"
        );
    }
}

/// A static peer whose settings changed but whose key did not keeps refusing the frames it
/// already took (its new window starts above the old one's highest number).
#[test]
fn a_changed_static_peer_with_the_same_key_refuses_old_frames() {
    let mut n = static_pair(SuiteId::Aes128Gcm);
    let frames: Vec<Wire> = (1..=3).map(|s| sealed_ping(&mut n, s)).collect();
    for w in &frames {
        assert!(matches!(n.deliver(w.clone()), Received::Deliver { .. }));
    }
    // Another setting (paths) keeps the opener whole; another opener setting (its window's
    // size) makes a new one that starts above the old one's highest number.
    n.hosts[1]
        .reconfigure(
            n.now,
            group_spec(),
            vec![static_spec(MAC_A, SuiteId::Aes128Gcm, 1)],
        )
        .unwrap();
    n.drain(1);
    for w in &frames {
        let r = n.deliver(w.clone());
        assert!(!matches!(r, Received::Deliver { .. }), "replayed: {r:?}");
    }
    let mut spec = static_spec(MAC_A, SuiteId::Aes128Gcm, 1);
    if let Keying::Static(k) = &mut spec.keying {
        k.opener = OpenerConfig::new().with_replay_window(256);
    }
    n.hosts[1]
        .reconfigure(n.now, group_spec(), vec![spec])
        .unwrap();
    n.drain(1);
    for w in frames {
        let r = n.deliver(w);
        assert!(!matches!(r, Received::Deliver { .. }), "replayed: {r:?}");
    }
    let w = sealed_ping(&mut n, 4);
    assert!(
        matches!(n.deliver(w), Received::Deliver { .. }),
        "a new frame"
    );
}

/// A sub-protocol other than data under a peer's own key (here a normalized payload to a peer
/// that is not normalized) never reaches the protected side as a frame.
#[test]
fn a_sub_protocol_under_a_peer_key_is_not_data() {
    let mut n = static_pair(SuiteId::Aes128Gcm);
    let mut sealer = forger(&[0x33; 16], 1 << 30);
    let mut out = vec![0u8; 256];
    let payload = ping(1, 7);
    let f = sealer
        .seal_sub(
            n.now,
            MAC_B,
            MAC_A,
            Protocol::Normalized,
            &payload,
            &mut out,
        )
        .unwrap()
        .to_vec();
    let r = n.deliver(Wire {
        from: 1,
        path: PathId::FIRST,
        frame: f,
    });
    assert!(!matches!(r, Received::Deliver { .. }), "{r:?}");
    assert!(n.delivered[1].is_empty());
    // The same sealer's data frame is delivered: only the sub-protocol made the difference.
    let f = sealer.seal(n.now, &payload, &mut out).unwrap().to_vec();
    let r = n.deliver(Wire {
        from: 1,
        path: PathId::FIRST,
        frame: f,
    });
    assert!(matches!(r, Received::Deliver { .. }), "{r:?}");
}

/// A normalized static peer's largest inner frame leaves room for its key's overhead.
#[test]
fn a_normalized_static_peer_leaves_room_for_its_overhead() {
    let mut n = static_pair(SuiteId::Aes128Gcm);
    let norm = NormSpec {
        cfg: crate::normalize::NormConfig::default(),
        frame_size: 600,
        wire_extra: 0,
        lead: Duration::ZERO,
    };
    let mut spec = static_spec(MAC_B, SuiteId::Aes128Gcm, 2);
    spec.normalize = Some(norm);
    n.hosts[0]
        .reconfigure(n.now, group_spec(), vec![spec])
        .unwrap();
    let overhead = forger(&[0x33; 16], 0).overhead();
    assert!(overhead > 0);
    let want = peer::Stream::endpoint_config(&norm, overhead)
        .unwrap()
        .max_sendable_inner_len();
    assert_eq!(n.hosts[0].norm_max_inner_len(), Some(want));
}

/// An inner frame too large for the uplink once sealed is dropped and counted, not sent; one
/// too short for an EtherType is malformed.
#[test]
fn frames_the_uplink_cannot_carry_are_refused_and_counted() {
    let mut n = static_pair(SuiteId::Aes128Gcm);
    let mut big = ping(1, 1);
    big.resize(1514, 0);
    assert_eq!(n.send(0, &big), TapResult::Dropped(TapDrop::Unsupported));
    assert_eq!(n.hosts[0].counters().tx_unsupported, 1);
    assert!(n.wire.is_empty());
    let short = &ping(1, 2)[..13];
    assert_eq!(n.send(0, short), TapResult::Dropped(TapDrop::Malformed));
    assert_eq!(n.hosts[0].counters().malformed, 1);
}
