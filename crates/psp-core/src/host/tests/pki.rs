//! Membership by certificate (`[pki]`): two hosts with no peer configured at all reach each
//! other on their certificates alone; a certificate from another CA, revoked, expired, for
//! another MAC or another key gets no session; a certified peer sends only from its
//! addresses; a reload keeps certified peers; a restart of either side starts again.

use alloc::vec;
use alloc::vec::Vec;

use super::*;
use crate::pki::{CertFields, Certificate, Kind, RevocationList};

const CA_SEED: [u8; 32] = [0xca; 32];
/// The wall clock at the hosts' Instant::ZERO (Opts' `host` uses the same).
const WALL: u64 = 1_800_000_000;

fn ca() -> SigningKey {
    SigningKey::from_seed(&CA_SEED).unwrap()
}

/// Host `me`'s certificate: its MAC and address, its identity, valid for a day around WALL.
fn cert(me: u8, serial: u64, signer: &SigningKey) -> Certificate {
    let mac = if me == 1 { MAC_A } else { MAC_B };
    let mut f = CertFields::new(
        Kind::Host,
        serial,
        identity(me).public_key(),
        &alloc::format!("vm{me}"),
    );
    f.not_before = WALL - 3600;
    f.not_after = WALL + 86_400;
    f.push_mac(mac);
    f.push_addr(ip(me), 24);
    Certificate::sign(&f, signer).unwrap()
}

/// Host `me` with only `[pki]`: no peer configured.
fn pki_host(me: u8, cert: Certificate, revoked: RevocationList) -> Host {
    pki_host_with(me, &identity(me), cert, revoked)
}

/// As [`pki_host`], with identity `id`.
fn pki_host_with(me: u8, id: &Identity, cert: Certificate, revoked: RevocationList) -> Host {
    let mut h = host(me, Opts::default());
    let mut cfg = h.config().clone();
    cfg.pki = Some(Pki {
        ca: ca().public_key(),
        certificate: cert,
        revoked,
        skew_secs: Pki::SKEW_SECS,
        max_certified: 8,
        rotate_every: Duration::from_secs(20),
    });
    if let Some(sess) = cfg.session.as_mut() {
        sess.handshake.static_key = Some(id.static_key());
    }
    let signer = id.signing_key().ok();
    h = Host::new(
        Instant::ZERO,
        cfg,
        group_spec(),
        signer,
        vec![],
        Resume::default(),
    )
    .unwrap();
    h
}

fn pair() -> Net {
    Net::with_hosts([
        pki_host(1, cert(1, 1, &ca()), RevocationList::empty()),
        pki_host(2, cert(2, 2, &ca()), RevocationList::empty()),
    ])
}

#[test]
fn two_hosts_with_no_peer_block_reach_each_other_on_their_certificates() {
    let mut n = pair();
    assert_eq!(n.send(0, &ping(1, 1)), TapResult::Queued);
    n.settle();
    assert_eq!(n.delivered[1], vec![ping(1, 1)]);
    assert!(matches!(n.send(1, &ping(2, 1)), TapResult::Sealed { .. }));
    n.settle();
    assert_eq!(n.delivered[0], vec![ping(2, 1)]);
    for i in 0..2 {
        assert_eq!(n.hosts[i].certified_peers(), 1);
        assert!(n.status(i).up, "host {i}");
        assert_eq!(n.counters(i).sessions, 1);
    }
    // The responder named its peer after the certificate; both pinned its key.
    let (_, spec) = n.hosts[1].peers().next().unwrap();
    assert_eq!(spec.name, "vm1");
    assert_eq!(
        n.hosts[0].peer(PeerId(0)).unwrap().pin(),
        Some(identity(2).public_key())
    );
    assert_eq!(
        n.hosts[1].peer(PeerId(0)).unwrap().pin(),
        Some(identity(1).public_key())
    );
}

/// Host 1 presents `c1`; host 2 must refuse it: no session, nothing delivered, counted.
fn refused(c1: Certificate, crl2: RevocationList) -> Net {
    let mut n = Net::with_hosts([
        pki_host(1, c1, RevocationList::empty()),
        pki_host(2, cert(2, 2, &ca()), crl2),
    ]);
    let _ = n.send(0, &ping(1, 1));
    n.settle();
    n.advance(2_000);
    assert!(n.delivered[1].is_empty());
    assert_eq!(n.hosts[1].certified_peers(), 0);
    assert!(n.hosts[1].counters().cert_refused >= 1);
    assert!(!n.status(0).up);
    n
}

#[test]
fn a_certificate_from_another_ca_gets_no_session() {
    let other = SigningKey::from_seed(&[0xcb; 32]).unwrap();
    refused(cert(1, 1, &other), RevocationList::empty());
}

#[test]
fn a_revoked_certificate_gets_no_session() {
    let crl = RevocationList::sign(1, WALL, &[1], &ca()).unwrap();
    refused(cert(1, 1, &ca()), crl);
}

#[test]
fn an_expired_certificate_gets_no_session_beyond_the_skew_allowance() {
    let mut f = *cert(1, 1, &ca()).fields();
    f.not_before = WALL - 86_400;
    f.not_after = WALL - Pki::SKEW_SECS - 1;
    refused(
        Certificate::sign(&f, &ca()).unwrap(),
        RevocationList::empty(),
    );
    // Within the allowance it is taken.
    f.not_after = WALL - Pki::SKEW_SECS + 100;
    let mut n = Net::with_hosts([
        pki_host(
            1,
            Certificate::sign(&f, &ca()).unwrap(),
            RevocationList::empty(),
        ),
        pki_host(2, cert(2, 2, &ca()), RevocationList::empty()),
    ]);
    let _ = n.send(0, &ping(1, 1));
    n.settle();
    assert_eq!(n.delivered[1], vec![ping(1, 1)]);
}

#[test]
fn a_certificate_for_another_mac_or_key_gets_no_session() {
    // Host 2's certificate presented by host 1: its MAC and key are not host 1's.
    refused(cert(2, 1, &ca()), RevocationList::empty());
    // Host 1's MAC and address, with another host's key.
    let mut f = *cert(1, 1, &ca()).fields();
    f.public_key = identity(3).public_key();
    refused(
        Certificate::sign(&f, &ca()).unwrap(),
        RevocationList::empty(),
    );
}

#[test]
fn an_accept_without_a_valid_certificate_is_ignored_and_counted() {
    // Host 2 presents a certificate for host 1's MAC: host 1, the initiator, ignores its
    // Accept, so no session comes up.
    let mut n = Net::with_hosts([
        pki_host(1, cert(1, 1, &ca()), RevocationList::empty()),
        pki_host(
            2,
            cert(2, 2, &SigningKey::from_seed(&[7; 32]).unwrap()),
            RevocationList::empty(),
        ),
    ]);
    let _ = n.send(0, &ping(1, 1));
    n.settle();
    n.advance(1_000);
    assert!(n.delivered[1].is_empty());
    assert!(!n.status(0).up);
    // Host 1 knows host 2 only by its MAC: a frame from it is taken only with a certificate
    // this host takes; the Accept's is not (another CA), so it is dropped and counted.
    assert!(n.hosts[0].counters().cert_refused >= 1);
    assert!(n.hosts[0].counters().unknown_peer >= 1);
    assert_eq!(n.counters(0).sessions, 0);
}

#[test]
fn a_peer_known_only_by_its_mac_takes_no_frame_without_a_certificate() {
    // Host 1 sends to host 2 before any announcement: a peer for a MAC, no pin. A frame under
    // the group key from that MAC with a far sequence number (an insider's) must not reach
    // the peer's replay window, nor be delivered.
    let mut n = pair();
    let _ = n.send(0, &ping(1, 1));
    n.wire.clear();
    let mut forger = forger(&[0x42; 16], 0x4000_0000);
    let mut out = vec![0u8; 2048];
    let f = forger.seal(n.now, &ping(2, 9), &mut out).unwrap().to_vec();
    let r = n.deliver(Wire {
        from: 2,
        path: PathId::FIRST,
        frame: f,
    });
    assert_eq!(r, Received::Dropped(RxDrop::UnknownPeer(MAC_B)));
    // Then the genuine handshake goes through.
    n.advance(3_000);
    let _ = n.send(0, &ping(1, 2));
    n.settle();
    assert!(n.delivered[1].contains(&ping(1, 2)));
}

#[test]
fn a_certified_peer_sends_only_from_its_addresses() {
    let mut n = pair();
    let _ = n.send(0, &ping(1, 1));
    n.settle();
    assert_eq!(n.delivered[1].len(), 1);
    // Host 1 claims host 9's address.
    let mut spoof = ping(1, 2);
    spoof[26..30].copy_from_slice(&[10, 77, 0, 9]);
    assert!(matches!(n.send(0, &spoof), TapResult::Sealed { .. }));
    n.settle();
    assert_eq!(n.delivered[1].len(), 1);
    assert_eq!(n.counters(1).spoofed_addr, 1);
    assert_eq!(n.counters(1).drops_total(), 1);
}

#[test]
fn a_reload_keeps_certified_peers_and_their_sessions() {
    let mut n = pair();
    let _ = n.send(0, &ping(1, 1));
    n.settle();
    n.hosts[1].reconfigure(n.now, group_spec(), vec![]).unwrap();
    assert_eq!(n.hosts[1].certified_peers(), 1);
    assert!(matches!(n.send(0, &ping(1, 2)), TapResult::Sealed { .. }));
    n.settle();
    assert_eq!(n.delivered[1], vec![ping(1, 1), ping(1, 2)]);
    assert_eq!(n.counters(1).sessions, 1);
}

#[test]
fn a_restart_of_either_side_starts_again_on_the_certificates() {
    for restarted in 0..2 {
        let mut n = pair();
        let _ = n.send(0, &ping(1, 1));
        n.settle();
        let me = restarted as u8 + 1;
        n.hosts[restarted] = pki_host(me, cert(me, u64::from(me), &ca()), RevocationList::empty());
        n.drain(restarted);
        n.advance(40_000);
        let _ = n.send(0, &ping(1, 2));
        let _ = n.send(1, &ping(2, 2));
        n.settle();
        n.advance(1_000);
        assert!(
            n.delivered[1].contains(&ping(1, 2)),
            "restarted {restarted}"
        );
        assert!(
            n.delivered[0].contains(&ping(2, 2)),
            "restarted {restarted}"
        );
    }
}

#[test]
fn the_table_of_certified_peers_is_bounded() {
    let mut n = pair();
    let h = &mut n.hosts[0];
    for i in 0..20u8 {
        let mut f = ping(1, 1);
        f[..6].copy_from_slice(&[2, 0, 0, 0, 1, i]);
        let mut out = vec![0u8; 2048];
        let mut jobs = [TapJob::new(&f, &mut out)];
        h.handle_tap(n.now, &mut jobs, &mut n.rng);
    }
    assert_eq!(h.certified_peers(), 8);
    assert_eq!(h.counters().certified_full, 12);
}

/// An ARP request from host `from` (sender address `sender`) to the other's address.
fn arp(from: u8, sender: [u8; 4]) -> Vec<u8> {
    let src = if from == 1 { MAC_A } else { MAC_B };
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&src);
    f.extend_from_slice(&[0x08, 0x06, 0, 1, 0x08, 0x00, 6, 4, 0, 1]);
    f.extend_from_slice(&src);
    f.extend_from_slice(&sender);
    f.extend_from_slice(&[0; 6]);
    f.extend_from_slice(&[10, 77, 0, 3 - from]);
    f
}

#[test]
fn hosts_learn_each_other_from_announcements_and_take_their_arp() {
    let mut n = pair();
    n.advance(10);
    // Each announced itself at start and asked for answers: both know the other, no session.
    for i in 0..2 {
        assert_eq!(n.hosts[i].certified_peers(), 1, "host {i}");
        assert!(n.hosts[i].counters().announces >= 1);
        assert!(!n.status(i).up);
    }
    // ARP under the group key is taken from the address the certificate names only.
    let _ = n.send(0, &arp(1, [10, 77, 0, 1]));
    n.settle();
    assert_eq!(n.delivered[1], vec![arp(1, [10, 77, 0, 1])]);
    let _ = n.send(0, &arp(1, [10, 77, 0, 2]));
    n.settle();
    assert_eq!(n.delivered[1].len(), 1);
    assert_eq!(n.counters(1).spoofed_addr, 1);
    // Announcements go on every ANNOUNCE_EVERY.
    let before = n.hosts[0].counters().announces;
    n.advance(ANNOUNCE_EVERY.total_millis());
    assert_eq!(n.hosts[0].counters().announces, before + 1);
}

/// Hosts 1 and 2 with a session.
fn connected() -> Net {
    let mut n = pair();
    let _ = n.send(0, &ping(1, 1));
    n.settle();
    assert!(n.status(0).up && n.status(1).up);
    n
}

#[test]
fn a_newer_list_given_to_one_host_reaches_its_peer_over_the_session() {
    let mut n = connected();
    let list = RevocationList::sign(4, WALL, &[77], &ca()).unwrap();
    assert_eq!(
        n.hosts[0].handle_revocation_list(n.now, list.clone(), &mut n.rng),
        Ok(true)
    );
    n.drain(0);
    n.settle();
    assert_eq!(n.hosts[1].revocation_list().number(), 4);
    assert!(n.events[1].contains(&HostEvent::RevocationList { number: 4 }));
    // Not newer: ignored; another CA's: refused and counted.
    assert_eq!(
        n.hosts[1].handle_revocation_list(n.now, list, &mut n.rng),
        Ok(false)
    );
    let forged =
        RevocationList::sign(9, WALL, &[1], &SigningKey::from_seed(&[5; 32]).unwrap()).unwrap();
    assert_eq!(
        n.hosts[1].handle_revocation_list(n.now, forged, &mut n.rng),
        Err(crate::pki::PkiError::Signature)
    );
    assert_eq!(n.hosts[1].counters().revocations_refused, 1);
    assert_eq!(n.hosts[1].revocation_list().number(), 4);
}

#[test]
fn revoking_a_peer_ends_its_session_at_once_and_none_starts_again() {
    let mut n = connected();
    let list = RevocationList::sign(1, WALL, &[2], &ca()).unwrap();
    n.hosts[0]
        .handle_revocation_list(n.now, list, &mut n.rng)
        .unwrap();
    n.drain(0);
    assert!(
        n.events[0]
            .iter()
            .any(|e| matches!(e, HostEvent::Revoked { serial: 2, .. }))
    );
    assert!(!n.status(0).up);
    // Host 2, keeping everything it had, sends under its old session, starts handshakes, and
    // announces: nothing reaches host 1's protected side, and no session comes up.
    let delivered = n.delivered[0].len();
    let _ = n.send(1, &ping(2, 5));
    let _ = n.send(1, &arp(2, [10, 77, 0, 2]));
    n.settle();
    n.advance(60_000);
    let _ = n.send(1, &ping(2, 6));
    n.settle();
    n.advance(5_000);
    assert_eq!(n.delivered[0].len(), delivered);
    assert!(!n.status(0).up);
    assert!(n.counters(0).revoked >= 2);
    assert_eq!(n.counters(0).sessions, 1);
}

#[test]
fn a_restarted_host_with_an_older_list_catches_up_at_its_next_session() {
    let mut n = connected();
    let list = RevocationList::sign(3, WALL, &[77], &ca()).unwrap();
    n.hosts[0]
        .handle_revocation_list(n.now, list, &mut n.rng)
        .unwrap();
    n.drain(0);
    n.settle();
    assert_eq!(n.hosts[1].revocation_list().number(), 3);
    // Host 2 restarts with the list it was configured with (none).
    n.hosts[1] = pki_host(2, cert(2, 2, &ca()), RevocationList::empty());
    n.drain(1);
    let _ = n.send(1, &ping(2, 1));
    n.settle();
    n.advance(2_000);
    assert_eq!(n.hosts[1].revocation_list().number(), 3);
}

/// Hosts 1 and 2 with a session, past the election: host 1 (the lower MAC, both priority 128)
/// is the key server and host 2 holds its key.
fn keyed() -> Net {
    let mut n = connected();
    n.advance(ELECT_AFTER.total_millis() + SWITCH_AFTER.total_millis() + 100);
    n
}

/// The key id in the security-number field of the last broadcast host `i` put on the wire.
fn last_broadcast_key_id(n: &Net, from: u8) -> Option<u32> {
    n.seen
        .iter()
        .rev()
        .filter(|w| {
            w.from == from && w.frame[0] == 0xff && w.frame.get(12..14) == Some(&[0x19, 0x82])
        })
        .find_map(|w| {
            Frame::new_checked(&w.frame[..], 0)
                .ok()
                .and_then(|f| f.security_number())
        })
        .map(|k| k.get())
}

#[test]
fn the_key_server_hands_its_broadcast_key_to_members_and_broadcasts_go_under_it() {
    let mut n = keyed();
    assert_eq!(n.hosts[0].counters().rotations, 1);
    assert_eq!(n.hosts[1].counters().keys_taken, 1);
    let (server, epoch, _) = n.hosts[1].broadcast_key(n.now).expect("host 2 holds a key");
    assert_eq!(server, MAC_A);
    assert_eq!(n.hosts[0].broadcast_key(n.now).map(|k| k.1), Some(epoch));
    for from in [1u8, 2] {
        let a = arp(from, [10, 77, 0, from]);
        let _ = n.send(usize::from(from - 1), &a);
        n.settle();
        assert_eq!(
            n.delivered[usize::from(2 - from)].last(),
            Some(&a),
            "from {from}"
        );
        let id = last_broadcast_key_id(&n, from).expect("a key id");
        assert_eq!(Some(id), n.hosts[0].shared.bkeys.newest().map(|k| k.key_id));
    }
}

#[test]
fn keys_rotate_on_the_timer_and_no_broadcast_is_lost_in_a_change() {
    let mut n = keyed();
    let mut sent = 0;
    let first = n.hosts[1].broadcast_key(n.now).unwrap().1;
    // 50 s at one ARP a host every 500 ms: two rotations (every 20 s).
    for _ in 0..100 {
        for from in [1u8, 2] {
            let _ = n.send(usize::from(from - 1), &arp(from, [10, 77, 0, from]));
            sent += 1;
        }
        n.settle();
        n.advance(500);
    }
    let got = n.delivered[0].len() + n.delivered[1].len() - 1; // the first ping
    assert_eq!(got, sent);
    assert!(n.hosts[0].counters().rotations >= 3);
    assert!(n.hosts[1].broadcast_key(n.now).unwrap().1 > first);
    assert_eq!(n.counters(1).unknown_key + n.counters(0).unknown_key, 0);
}

#[test]
fn a_revoked_member_gets_no_new_key_and_cannot_open_what_follows() {
    let mut n = keyed();
    let old = n.hosts[1].broadcast_key(n.now).unwrap().1;
    let list = RevocationList::sign(1, WALL, &[2], &ca()).unwrap();
    n.hosts[0]
        .handle_revocation_list(n.now, list, &mut n.rng)
        .unwrap();
    n.drain(0);
    n.settle();
    // The server made a new key at once; host 2 still holds only the old one.
    assert_eq!(n.hosts[0].counters().rotations, 2);
    n.advance(SWITCH_AFTER.total_millis() + 100);
    assert_eq!(n.hosts[1].broadcast_key(n.now).unwrap().1, old);
    let before = n.delivered[1].len();
    let _ = n.send(0, &arp(1, [10, 77, 0, 1]));
    n.settle();
    assert_eq!(
        n.delivered[1].len(),
        before,
        "host 2 opened a broadcast under the new key"
    );
    let new = n.hosts[0].shared.bkeys.newest().unwrap().key_id;
    assert_eq!(last_broadcast_key_id(&n, 1), Some(new));
    assert!(n.hosts[1].shared.bkeys.held.iter().all(|k| k.key_id != new));
}

#[test]
fn a_key_not_signed_by_the_server_it_names_is_refused() {
    let mut n = keyed();
    let held = n.hosts[1].shared.bkeys.held.len();
    let key = [9u8; 16];
    let mut m = crate::pki::message::KeyMessage {
        server: MAC_A,
        priority: 128,
        epoch: u32::MAX,
        key_id: 0x00_1234,
        suite: handshake::messages::suite_code(SuiteId::Aes128Gcm),
        use_in_ms: 0,
        key: &key,
        sig: [0; 64],
    };
    // Signed by host 2's own identity, not host 1's.
    identity(2)
        .signing_key()
        .unwrap()
        .sign(&m.signed_digest(), &mut m.sig);
    n.hosts[1].shared.bkeys.offered.push(bkeys::Offered::of(&m));
    n.hosts[1].take_offered_keys(n.now);
    assert_eq!(n.hosts[1].counters().keys_refused, 1);
    assert_eq!(n.hosts[1].shared.bkeys.held.len(), held);
}

#[test]
fn a_host_with_a_renewed_identity_and_certificate_is_taken_again_without_a_restart_of_others() {
    let mut n = connected();
    // Host 2 gets a new identity and a new certificate (serial 3) and restarts.
    let new_id = identity(9);
    let mut f = *cert(2, 3, &ca()).fields();
    f.public_key = new_id.public_key();
    let c = Certificate::sign(&f, &ca()).unwrap();
    n.hosts[1] = pki_host_with(2, &new_id, c, RevocationList::empty());
    n.drain(1);
    n.advance(100);
    let _ = n.send(1, &ping(2, 7));
    n.settle();
    n.advance(2_000);
    let _ = n.send(1, &ping(2, 8));
    n.settle();
    assert!(n.delivered[0].contains(&ping(2, 8)));
    assert_eq!(
        n.hosts[0].peer(PeerId(0)).unwrap().pin(),
        Some(new_id.public_key())
    );
}

#[test]
fn a_peer_block_pins_an_identity_beside_pki() {
    // Host 1 has [pki] and a [[peer]] block for host 2 pinning an identity; host 2 has [pki].
    let with_block = |pin: [u8; 32]| {
        let mut h = pki_host(1, cert(1, 1, &ca()), RevocationList::empty());
        let spec = PeerSpec {
            name: "vm2".into(),
            macs: vec![MAC_B],
            keying: Keying::Session {
                pin: Pin::Configured(pin),
                address: Some(ip(2)),
            },
            paths: 2,
            normalize: None,
        };
        h.reconfigure(Instant::ZERO, group_spec(), vec![spec])
            .unwrap();
        Net::with_hosts([h, pki_host(2, cert(2, 2, &ca()), RevocationList::empty())])
    };
    // The right key: a session, under the block (no peer learnt from a certificate).
    let mut n = with_block(identity(2).public_key());
    let _ = n.send(0, &ping(1, 1));
    n.settle();
    assert_eq!(n.delivered[1], vec![ping(1, 1)]);
    assert_eq!(n.hosts[0].certified_peers(), 0);
    // Another key pinned: host 2's valid certificate does not override the block.
    let mut n = with_block(identity(3).public_key());
    let _ = n.send(0, &ping(1, 1));
    n.settle();
    n.advance(2_000);
    assert!(n.delivered[1].is_empty());
    assert!(!n.status(0).up);
}
