//! Group copies: a broadcast too large for the signed group key goes to each peer under its own
//! key (sub-protocol 0x0006), so an identity no longer sets the MTU of all traffic.

use alloc::vec;
use alloc::vec::Vec;

use zeroize::Zeroizing;

use super::*;

/// An IPv4 broadcast (to 10.77.0.255) from host `from`, `len` bytes in all.
fn broadcast(from: u8, len: usize) -> Vec<u8> {
    let src = if from == 1 { MAC_A } else { MAC_B };
    let mut f = [0xff; 6].to_vec();
    f.extend_from_slice(&src);
    f.extend_from_slice(&[0x08, 0x00, 0x45, 0, 0, 0, 0, 0, 0, 0, 64, 17, 0, 0]);
    f.extend_from_slice(&[10, 77, 0, from, 10, 77, 0, 255]);
    f.resize(len, 0xa5);
    let l3 = u16::try_from(len - 14).unwrap().to_be_bytes();
    f[16..18].copy_from_slice(&l3);
    f
}

/// The largest inner frame host `i` takes from its protected side (what its MTU allows).
fn largest(n: &Net, i: usize) -> usize {
    1514 - n.hosts[i].max_overhead()
}

#[test]
fn an_identity_costs_unicast_8_bytes_of_mtu_not_64() {
    let with = Net::new(Opts::default());
    let without = Net::new(Opts {
        group_copies: false,
        ..Opts::default()
    });
    let unsigned = Net::new(Opts {
        identities: false,
        ..Opts::default()
    });
    // aes128-gcm sessions: 27 bytes (key id included); the signed group key: 24 + 64.
    assert_eq!(unsigned.hosts[0].max_overhead(), 27);
    assert_eq!(with.hosts[0].max_overhead(), 27 + GROUP_COPY_EXTRA);
    assert_eq!(without.hosts[0].max_overhead(), 24 + 64);
    // On a 1500-byte uplink: 1465, 1412 (the thesis' way), and 1473 without an identity.
    assert_eq!(largest(&with, 0) - 14, 1465);
    assert_eq!(largest(&without, 0) - 14, 1412);
    assert_eq!(largest(&unsigned, 0) - 14, 1473);
    assert_eq!(tap_overhead(88, 27, true), 35);
    assert_eq!(
        tap_overhead(24, 27, true),
        27,
        "copies never raise the overhead"
    );
}

#[test]
fn a_full_size_broadcast_arrives_whole_as_a_group_copy() {
    let mut n = Net::new(Opts::default());
    up(&mut n);
    let big = broadcast(1, largest(&n, 0));
    let before = n.seen.len();
    let signed = n.hosts[0].counters().group_tx_frames;
    assert_eq!(n.send(0, &big), TapResult::Queued);
    n.settle();
    assert_eq!(n.delivered[1].last(), Some(&big), "delivered byte for byte");
    let copies: Vec<_> = n.seen[before..].iter().filter(|w| w.from == 1).collect();
    assert_eq!(copies.len(), 1, "one copy for the one peer");
    let f = &copies[0].frame;
    assert_eq!(f.len(), 1514, "a full-size frame, within the uplink");
    assert_eq!(&f[..6], &MAC_B, "addressed to the peer, not the group");
    assert_eq!(f[14] & 0x02, 0, "not signed");
    assert_eq!(n.hosts[0].counters().group_copies, 1);
    assert_eq!(n.hosts[0].counters().group_tx_frames, signed);
    // A small broadcast still goes once, signed under the group key.
    let arp = [&[0xff; 6][..], &MAC_A, &[0x08, 0x06], &[0u8; 28]].concat();
    assert!(matches!(
        n.send(0, &arp),
        TapResult::Sealed {
            dest: Dest::Group,
            ..
        }
    ));
    n.settle();
    assert_eq!(n.delivered[1].last(), Some(&arp));
    assert_eq!(n.hosts[0].counters().group_tx_frames, signed + 1);
}

#[test]
fn without_group_copies_a_broadcast_beyond_the_signed_mtu_is_dropped_and_counted() {
    let mut n = Net::new(Opts {
        group_copies: false,
        ..Opts::default()
    });
    up(&mut n);
    let over = broadcast(1, largest(&n, 0) + 1);
    assert_eq!(n.send(0, &over), TapResult::Dropped(TapDrop::Unsupported));
    assert_eq!(n.hosts[0].counters().tx_unsupported, 1);
    let fits = broadcast(1, largest(&n, 0));
    assert!(matches!(n.send(0, &fits), TapResult::Sealed { .. }));
    n.settle();
    assert_eq!(n.delivered[1].last(), Some(&fits));
}

#[test]
fn a_large_broadcast_waits_for_the_session_as_unicast_frames_do() {
    let mut n = Net::new(Opts::default());
    let big = broadcast(1, largest(&n, 0));
    assert_eq!(n.send(0, &big), TapResult::Queued);
    assert_eq!(n.status(0).pending, 1);
    n.settle();
    assert!(n.status(0).up);
    assert_eq!(n.delivered[1], vec![big]);
    // The broadcast's destination was not taken for the peer's address: the next unicast
    // frame goes under the session as usual.
    assert!(matches!(n.send(0, &ping(1, 1)), TapResult::Sealed { .. }));
    n.settle();
    assert_eq!(n.delivered[1].last(), Some(&ping(1, 1)));
}

/// Seals `data` as a group copy from host 2 to host 1 under host 2's session.
fn copy_from_b(n: &mut Net, data: &[u8]) -> Vec<u8> {
    let now = n.now;
    let s = n.hosts[1].peers[0].session.as_deref_mut().unwrap();
    let mut out = vec![0u8; 2048];
    s.ring()
        .seal_sub(now, MAC_A, MAC_B, Protocol::GroupCopy, data, &mut out)
        .unwrap()
        .to_vec()
}

#[test]
fn a_group_copy_must_name_a_group_and_an_ethertype() {
    let mut n = Net::new(Opts::default());
    up(&mut n);
    let good = broadcast(2, 100);
    let data = [&good[..6], &good[12..]].concat();
    let f = copy_from_b(&mut n, &data);
    assert!(matches!(
        n.deliver(Wire {
            from: 2,
            path: PathId::FIRST,
            frame: f
        }),
        Received::Deliver { .. }
    ));
    assert_eq!(n.delivered[0].last(), Some(&good));
    let malformed = Received::Dropped(RxDrop::Open(PeerId(0), DropReason::Malformed));
    let mut unicast = data.clone();
    unicast[..6].copy_from_slice(&MAC_A);
    let mut length_field = data.clone();
    length_field[6..8].copy_from_slice(&[0x00, 0x2e]);
    for bad in [unicast, length_field, data[..7].to_vec(), Vec::new()] {
        let f = copy_from_b(&mut n, &bad);
        let r = n.deliver(Wire {
            from: 2,
            path: PathId::FIRST,
            frame: f,
        });
        assert_eq!(r, malformed, "{bad:02x?}");
    }
    assert_eq!(n.delivered[0].len(), 1);
    assert_eq!(n.counters(0).drops[1], 4);
}

/// A group copy of a small broadcast "from" host 2 to `dst`, sealed under `key` with sequence
/// number `seq` by someone who holds that key, delivered to host 1.
fn insider_copy(n: &mut Net, key: [u8; 16], seq: u32, dst: Mac) -> Received {
    let inner = broadcast(2, 100);
    let data = [&inner[..6], &inner[12..]].concat();
    let mut sealer = forger(&key, seq);
    let mut out = vec![0u8; 256];
    let f = sealer
        .seal_sub(n.now, dst, MAC_B, Protocol::GroupCopy, &data, &mut out)
        .unwrap()
        .to_vec();
    n.deliver(Wire {
        from: 2,
        path: PathId::FIRST,
        frame: f,
    })
}

/// An insider with the group key (no identities) cannot pass a group copy off as a peer's: a
/// copy counts only under the peer's own key.
#[test]
fn a_group_copy_under_the_group_key_is_not_delivered() {
    let mut n = Net::new(Opts {
        identities: false,
        ..Opts::default()
    });
    up(&mut n);
    let delivered = n.delivered[0].len();
    for (seq, dst) in [(u32::MAX - 10, MAC_A), (u32::MAX - 9, [0xff; 6])] {
        let r = insider_copy(&mut n, [0x42; 16], seq, dst);
        assert!(!matches!(r, Received::Deliver { .. }), "{r:?}");
    }
    assert_eq!(n.delivered[0].len(), delivered);
}

/// Host `me` with one static-key peer under `key`, an identity and group copies on.
pub(super) fn static_host(me: u8, key: &[u8]) -> Host {
    let (mac, other) = if me == 1 {
        (MAC_A, MAC_B)
    } else {
        (MAC_B, MAC_A)
    };
    let cfg = HostConfig {
        mac,
        subnets: vec![(ip(me), 24)],
        paths: 1,
        max_frame: 1514,
        session: None,
        wall_origin: Tai64n::from_unix(1_800_000_000, 0),
        group_copies: true,
        pki: None,
    };
    let peer = PeerSpec {
        name: alloc::format!("vm{}", 3 - me),
        macs: vec![other],
        keying: Keying::Static(KeySpec {
            suite: SuiteId::Aes128Gcm,
            key: Zeroizing::new(key.to_vec()),
            sealer: SealerConfig::new(),
            opener: OpenerConfig::new(),
        }),
        paths: 1,
        normalize: None,
    };
    let signer = identity(me).signing_key().unwrap();
    Host::new(
        Instant::ZERO,
        cfg,
        group_spec(),
        Some(signer),
        vec![peer],
        Resume::default(),
    )
    .unwrap()
}
/// Two hosts with static keys (`key_file` peers) and identities: copies go under the static
/// key.
#[test]
fn static_key_peers_take_group_copies_under_their_key() {
    let mut n = Net::with_hosts([static_host(1, &[0x17; 16]), static_host(2, &[0x17; 16])]);
    // Static aes128-gcm: 24 bytes, + 8 for a copy (the signed group key would need 88).
    assert_eq!(n.hosts[0].max_overhead(), 24 + GROUP_COPY_EXTRA);
    let big = broadcast(1, largest(&n, 0));
    assert_eq!(n.send(0, &big), TapResult::Queued);
    n.settle();
    assert_eq!(n.delivered[1], vec![big]);
}

/// A peer whose `key_file` is the group key seals its unicast frames under the group key: a copy
/// under it proves nothing about the sender, so it is not delivered (and none is sent to it).
#[test]
fn a_peer_on_the_group_key_neither_takes_nor_gives_group_copies() {
    let group = [0x42; 16];
    let mut n = Net::with_hosts([static_host(1, &group), static_host(2, &group)]);
    let r = insider_copy(&mut n, group, u32::MAX - 10, MAC_A);
    assert!(!matches!(r, Received::Deliver { .. }), "{r:?}");
    assert!(n.delivered[0].is_empty());
    let big = broadcast(1, 1514 - n.hosts[0].max_overhead());
    let before = n.hosts[0].counters().tx_unsupported;
    assert_eq!(n.send(0, &big), TapResult::Queued);
    n.settle();
    assert!(n.delivered[1].is_empty());
    assert_eq!(n.hosts[0].counters().tx_unsupported, before + 1);
}

/// Large broadcasts queued for a peer without a session take at most half its queue and do not
/// name its address, so the first unicast frame still gets in, names the address and starts
/// the session; everything queued then arrives.
#[test]
fn queued_broadcasts_never_keep_out_the_frame_that_starts_the_session() {
    let mut n = Net::new(Opts::default());
    let mut specs: Vec<PeerSpec> = n.hosts[0].peers().map(|(_, s)| s.clone()).collect();
    if let Keying::Session { address, .. } = &mut specs[0].keying {
        *address = None;
    }
    n.hosts[0].reconfigure(n.now, group_spec(), specs).unwrap();
    let big = broadcast(1, largest(&n, 0));
    for _ in 0..64 {
        assert_eq!(n.send(0, &big), TapResult::Queued);
    }
    n.settle();
    assert_eq!(n.status(0).pending, 32, "half of the 64-frame queue");
    assert_eq!(n.counters(0).no_session, 32);
    assert!(
        n.wire.is_empty() && !n.status(0).handshaking,
        "no address: no handshake yet"
    );
    assert_eq!(n.send(0, &ping(1, 1)), TapResult::Queued);
    n.settle();
    assert!(n.status(0).up);
    assert_eq!(n.delivered[1].len(), 33);
    assert_eq!(n.delivered[1].last(), Some(&ping(1, 1)));
}

/// A frame beyond the MTU that waited for a session is never sent (the uplink could not carry
/// it): counted `tx_unsupported`.
#[test]
fn an_oversize_frame_that_waited_for_the_session_is_not_sent() {
    let mut n = Net::new(Opts::default());
    let mut over = ping(1, 1);
    over.resize(largest(&n, 0) + 20, 0);
    let mut over_bcast = broadcast(1, largest(&n, 0));
    over_bcast.resize(largest(&n, 0) + 20, 0);
    assert_eq!(n.send(0, &over), TapResult::Queued);
    assert_eq!(
        n.send(0, &over_bcast),
        TapResult::Dropped(TapDrop::Unsupported)
    );
    assert_eq!(n.send(0, &ping(1, 2)), TapResult::Queued);
    n.settle();
    assert!(n.status(0).up);
    assert_eq!(n.delivered[1], vec![ping(1, 2)]);
    assert!(n.seen.iter().all(|w| w.frame.len() <= 1514));
    assert_eq!(n.hosts[0].counters().tx_unsupported, 2);
}

/// The lowest EtherType (0x0600) goes as group copies; a length field below it is refused once.
/// The group key's byte counter adds each broadcast's length.
#[test]
fn group_copies_take_the_lowest_ethertype_and_bytes_are_counted() {
    let mut n = Net::new(Opts::default());
    up(&mut n);
    let mut big = broadcast(1, largest(&n, 0));
    big[12..14].copy_from_slice(&0x0600u16.to_be_bytes());
    assert_eq!(n.send(0, &big), TapResult::Queued);
    big[12..14].copy_from_slice(&0x05ffu16.to_be_bytes());
    assert_eq!(n.send(0, &big), TapResult::Dropped(TapDrop::Unsupported));
    assert_eq!(n.hosts[0].counters().tx_unsupported, 1);
    let before = n.hosts[0].counters().group_tx_bytes;
    for len in [100, 200] {
        assert!(matches!(
            n.send(0, &broadcast(1, len)),
            TapResult::Sealed { .. }
        ));
    }
    assert_eq!(n.hosts[0].counters().group_tx_bytes, before + 300);
    // A broadcast cut inside its EtherType reaches the group key, which refuses it: malformed,
    // counted.
    let short = &broadcast(1, 100)[..13];
    let malformed = n.hosts[0].counters().malformed;
    assert_eq!(n.send(0, short), TapResult::Dropped(TapDrop::Malformed));
    assert_eq!(n.hosts[0].counters().malformed, malformed + 1);
}
