//! A key ring that holds a session waiting as *next* (this host answered the peer's handshake;
//! the peer's first frame under it has not arrived) and then installs a newer session it
//! initiated itself. Found by the adversary harness that preceded the simulator: a late frame under the
//! older session promoted it over the newer one, and with the peer doing the mirror image the
//! two hosts sealed under different sessions for good (each opened the other's only while it
//! was *previous*, then a blackhole until the next rekey).
#![allow(missing_docs)]

use core::net::{IpAddr, Ipv4Addr};

use psp_core::Protocol;
use psp_core::handshake::messages::MAX_MESSAGE_LEN;
use psp_core::handshake::{
    Config, Event, Handshake, KeyRing, KeyRingConfig, Peer, SessionKeys, Tai64n,
};
use psp_core::time::Instant;
use psp_test::sim::SimRng;

const MAC_A: [u8; 6] = [2, 0x50, 0x53, 0, 0, 1];
const MAC_B: [u8; 6] = [2, 0x50, 0x53, 0, 0, 2];

fn addr(mac: [u8; 6]) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 77, 0, mac[5]))
}

/// One handshake from `from` to `to` over a perfect link: (initiator's keys, responder's keys).
fn handshake(now: Instant, from: [u8; 6], to: [u8; 6], seed: u64) -> (SessionKeys, SessionKeys) {
    let mut rng = SimRng::new(seed);
    let peer = |mac| Peer {
        mac,
        addr: addr(mac),
        pinned_x25519: None,
    };
    let cfg = |mac| {
        let mut c = Config::new(mac, addr(mac), 24);
        c.paths = 2;
        c
    };
    let mut i = Handshake::initiate(
        now,
        cfg(from),
        peer(to),
        Tai64n::from_unix(seed, 0),
        &mut rng,
    );
    let mut r: Option<Handshake> = None;
    let (mut ki, mut kr) = (None, None);
    let mut buf = [0u8; MAX_MESSAGE_LEN];
    for _ in 0..20 {
        while let Some(t) = i.poll_transmit(now, &mut buf) {
            let msg = buf[..t.len].to_vec();
            match r.as_mut() {
                Some(r) => {
                    let _ = r.handle_message(now, t.path, &msg);
                }
                None => {
                    r = Some(
                        Handshake::respond(now, cfg(to), peer(from), t.path, &msg, &mut rng)
                            .unwrap(),
                    );
                }
            }
        }
        if let Some(r) = r.as_mut() {
            while let Some(t) = r.poll_transmit(now, &mut buf) {
                let msg = buf[..t.len].to_vec();
                let _ = i.handle_message(now, t.path, &msg);
            }
            if let Some(Event::Established(k)) = r.poll_event() {
                kr = Some(k);
            }
        }
        if let Some(Event::Established(k)) = i.poll_event() {
            ki = Some(k);
        }
    }
    (
        ki.expect("initiator established"),
        kr.expect("responder established"),
    )
}

fn keepalive(ring: &mut KeyRing, now: Instant, dst: [u8; 6], src: [u8; 6]) -> Vec<u8> {
    let mut out = [0u8; 256];
    ring.seal_sub(now, dst, src, Protocol::Control, b"keepalive", &mut out)
        .unwrap()
        .to_vec()
}

#[test]
fn an_initiators_new_session_is_not_displaced_by_an_older_waiting_one() {
    let now = Instant::from_secs(10);
    // Session 1: A initiates; B answers and waits for A's first frame (A's keepalive is lost).
    let (a1, b1) = handshake(now, MAC_A, MAC_B, 1);
    // Session 2: B initiates (traffic waits and it has nothing to seal with); A answers.
    let (b2, a2) = handshake(now, MAC_B, MAC_A, 2);
    let (mut ra, mut rb) = (
        KeyRing::new(KeyRingConfig::default()),
        KeyRing::new(KeyRingConfig::default()),
    );
    ra.install(now, &a1).unwrap();
    rb.install(now, &b1).unwrap();
    rb.install(now, &b2).unwrap();
    ra.install(now, &a2).unwrap();
    let s2 = b2.session_id();
    assert_eq!(rb.current().map(|s| s.session_id()), Some(s2));

    // A's frame under session 1 (its current) reaches B and still opens there...
    let mut f = keepalive(&mut ra, now, MAC_B, MAC_A);
    assert!(
        rb.open(now, &mut f).is_ok(),
        "the peer's frames under the older session open"
    );
    // ... but does not put the older session back in front of the newer one.
    assert_eq!(
        rb.current().map(|s| s.session_id()),
        Some(s2),
        "B must keep sealing under the session it initiated"
    );
    // B's frame under session 2 moves A over: both seal under session 2.
    let mut g = keepalive(&mut rb, now, MAC_A, MAC_B);
    assert!(ra.open(now, &mut g).is_ok());
    assert_eq!(ra.current().map(|s| s.session_id()), Some(s2));
}
