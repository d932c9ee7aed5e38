//! SEP + SMKEX handshakes over psp-test's simulated links (virtual clock, loss, delay,
//! reordering, duplication), attackers on one or both paths, and the key ring across rekeys.
#![allow(missing_docs)]

use core::net::{IpAddr, Ipv4Addr};

use psp_core::handshake::messages::{Body, Repr};
use psp_core::handshake::rand_core::{self, CryptoRng, RngCore};
use psp_core::handshake::schedule::{self, Ephemeral, Transcript};
use psp_core::handshake::{
    Config, Event, FailReason, Handshake, KeyRing, KeyRingConfig, PathId, Peer, RequestLimiter,
    Role, SessionKeys, SmkexMode, StaticKey, Tai64n,
};
use psp_core::time::{Duration, Instant};
use psp_core::wire::Protocol;
use psp_test::{Link, LinkConfig, Rng};

/// A seeded RNG standing in for the OS RNG in tests only (SplitMix64 is not cryptographic).
struct TestRng(Rng);

impl RngCore for TestRng {
    fn next_u32(&mut self) -> u32 {
        self.0.next_u64() as u32
    }
    fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }
    fn fill_bytes(&mut self, dest: &mut [u8]) {
        for b in dest {
            *b = self.0.next_u64() as u8;
        }
    }
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand_core::Error> {
        self.fill_bytes(dest);
        Ok(())
    }
}
impl CryptoRng for TestRng {}

const MAC_A: [u8; 6] = [2, 0x50, 0x53, 0, 0, 1];
const MAC_B: [u8; 6] = [2, 0x50, 0x53, 0, 0, 2];

fn addr(x: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 77, 0, x))
}

fn cfg(mac: [u8; 6], host: u8, paths: u8) -> Config {
    let mut c = Config::new(mac, addr(host), 24);
    c.paths = paths;
    c
}

/// What an on-path attacker does with a message: `None` passes it on unchanged.
type Tamper<'a> = dyn FnMut(PathId, bool, &Repr) -> Option<Vec<Repr>> + 'a;

/// Two hosts, A (initiator) and B (responder), joined by two paths, each a pair of links.
struct Sim {
    now: Instant,
    /// links[path][0] carries A→B, links[path][1] B→A.
    links: Vec<[Link; 2]>,
    rng: Rng,
    dup_ppm: u32,
    a: Handshake,
    b: Option<Handshake>,
    b_cfg: Config,
    b_peer: Peer,
    a_events: Vec<Event>,
    b_events: Vec<Event>,
    sent: usize,
}

impl Sim {
    fn new(a_cfg: Config, b_cfg: Config, link: LinkConfig, seed: u64) -> Self {
        Self::new_at(Instant::ZERO, a_cfg, b_cfg, link, seed)
    }

    fn new_at(start: Instant, a_cfg: Config, b_cfg: Config, link: LinkConfig, seed: u64) -> Self {
        let mut rng = TestRng(Rng::new(seed));
        let a_peer = Peer {
            mac: MAC_B,
            addr: addr(2),
            pinned_x25519: None,
        };
        let a = Handshake::initiate(start, a_cfg, a_peer, Tai64n::from_unix(1, 0), &mut rng);
        Self {
            now: start,
            links: (0..2)
                .map(|p| {
                    [
                        Link::new(link, seed * 10 + p * 2),
                        Link::new(link, seed * 10 + p * 2 + 1),
                    ]
                })
                .collect(),
            rng: Rng::new(seed ^ 0xdead),
            dup_ppm: 0,
            a,
            b: None,
            b_cfg,
            b_peer: Peer {
                mac: MAC_A,
                addr: addr(1),
                pinned_x25519: None,
            },
            a_events: Vec::new(),
            b_events: Vec::new(),
            sent: 0,
        }
    }

    fn drain(&mut self, tamper: &mut Tamper<'_>) {
        let mut buf = [0u8; 256];
        for from_a in [true, false] {
            loop {
                let hs = if from_a {
                    &mut self.a
                } else {
                    match self.b.as_mut() {
                        Some(b) => b,
                        None => break,
                    }
                };
                let Some(t) = hs.poll_transmit(self.now, &mut buf) else {
                    break;
                };
                let repr = Repr::parse_bytes(&buf[..t.len]).expect("own message parses");
                assert_eq!(
                    t.protocol == Protocol::KeyExchange,
                    matches!(repr.body, Body::Nonce(_) | Body::NonceReply { .. })
                );
                let out = tamper(t.path, from_a, &repr).unwrap_or_else(|| vec![repr]);
                for r in out {
                    let mut b = [0u8; 256];
                    let n = r.emit(&mut b);
                    self.send(t.path, from_a, &b[..n]);
                }
            }
            let hs = if from_a {
                Some(&mut self.a)
            } else {
                self.b.as_mut()
            };
            if let Some(hs) = hs {
                while let Some(e) = hs.poll_event() {
                    if from_a {
                        self.a_events.push(e);
                    } else {
                        self.b_events.push(e);
                    }
                }
            }
        }
    }

    fn send(&mut self, path: PathId, from_a: bool, bytes: &[u8]) {
        self.sent += 1;
        let link = &mut self.links[usize::from(path.0)][usize::from(!from_a)];
        link.send(self.now, bytes.len(), bytes);
        if self.dup_ppm > 0 && self.rng.chance_ppm(self.dup_ppm) {
            link.send(self.now, bytes.len(), bytes);
        }
    }

    /// Runs until both handshakes are over or `until`.
    fn run(&mut self, until: Instant, tamper: &mut Tamper<'_>) {
        let mut rng = TestRng(Rng::new(7));
        self.drain(tamper);
        loop {
            let mut next = self.a.poll_timeout();
            let mut consider = |t: Option<Instant>| {
                if let Some(t) = t {
                    next = Some(next.map_or(t, |n: Instant| n.min(t)));
                }
            };
            consider(self.b.as_ref().and_then(Handshake::poll_timeout));
            for l in self.links.iter().flatten() {
                consider(l.next_arrival());
            }
            let Some(t) = next.filter(|t| *t <= until) else {
                break;
            };
            self.now = self.now.max(t);
            for p in 0..self.links.len() {
                for dir in 0..2 {
                    while let Some(msg) = self.links[p][dir].poll_arrival(self.now) {
                        let path = PathId(p as u8);
                        if dir == 0 {
                            match self.b.as_mut() {
                                Some(b) => {
                                    let _ = b.handle_message(self.now, path, &msg);
                                }
                                None => {
                                    if let Ok(b) = Handshake::respond(
                                        self.now,
                                        self.b_cfg.clone(),
                                        self.b_peer,
                                        path,
                                        &msg,
                                        &mut rng,
                                    ) {
                                        self.b = Some(b);
                                    }
                                }
                            }
                        } else {
                            let _ = self.a.handle_message(self.now, path, &msg);
                        }
                    }
                }
            }
            self.a.handle_timeout(self.now);
            if let Some(b) = self.b.as_mut() {
                b.handle_timeout(self.now);
            }
            self.drain(tamper);
            if self.a.is_closed() && self.b.as_ref().is_none_or(Handshake::is_closed) {
                break;
            }
        }
    }

    fn keys(events: &[Event]) -> Option<&SessionKeys> {
        events.iter().find_map(|e| match e {
            Event::Established(k) => Some(k),
            Event::Failed(_) => None,
        })
    }

    fn failure(events: &[Event]) -> Option<FailReason> {
        events.iter().find_map(|e| match e {
            Event::Failed(r) => Some(*r),
            Event::Established(_) => None,
        })
    }
}

fn no_tamper() -> impl FnMut(PathId, bool, &Repr) -> Option<Vec<Repr>> {
    |_, _, _| None
}

fn lan() -> LinkConfig {
    LinkConfig::new(0, Duration::from_millis(5))
}

/// Both sides derived matching keys: A's sealed frame opens at B and back.
fn assert_keys_match(a: &SessionKeys, b: &SessionKeys) {
    assert_eq!(a.session_id(), b.session_id());
    assert_eq!(a.key_id(), b.key_id());
    assert_eq!(a.suite(), b.suite());
    assert_eq!(a.role(), Role::Initiator);
    assert_eq!(b.role(), Role::Responder);
    assert_eq!(a.send_key().unwrap().bivn(), b.recv_key().unwrap().bivn());
    assert_eq!(a.recv_key().unwrap().bivn(), b.send_key().unwrap().bivn());
    assert_ne!(a.send_key().unwrap().bivn(), a.recv_key().unwrap().bivn());
    let (mut ra, mut rb) = (
        KeyRing::new(KeyRingConfig::default()),
        KeyRing::new(KeyRingConfig::default()),
    );
    ra.install(a.established_at(), a).unwrap();
    rb.install(b.established_at(), b).unwrap();
    let t = a.established_at().max(b.established_at());
    let inner = [
        &MAC_B[..],
        &MAC_A,
        &[0x08, 0x00],
        b"hello over the new session",
    ]
    .concat();
    let mut out = [0u8; 256];
    let mut frame = ra.seal(t, &inner, &mut out).unwrap().to_vec();
    assert_eq!(rb.open(t, &mut frame).unwrap().frame(), &inner[..]);
}

#[test]
fn two_paths_establish_smkex_session() {
    let mut sim = Sim::new(cfg(MAC_A, 1, 2), cfg(MAC_B, 2, 2), lan(), 1);
    sim.run(Instant::from_secs(60), &mut no_tamper());
    let (a, b) = (
        Sim::keys(&sim.a_events).expect("A established"),
        Sim::keys(&sim.b_events).expect("B established"),
    );
    assert!(a.two_path() && b.two_path());
    assert_keys_match(a, b);
    assert_eq!(a.lifetime(), Duration::from_secs(3600));
    // 3 round trips on a 5 ms link.
    assert_eq!(a.established_at(), Instant::from_millis(30));
    assert_eq!(sim.a_events.len(), 1);
    assert_eq!(sim.b_events.len(), 1);
}

#[test]
fn exported_keying_material_matches_per_label() {
    let mut sim = Sim::new(cfg(MAC_A, 1, 2), cfg(MAC_B, 2, 2), lan(), 11);
    sim.run(Instant::from_secs(60), &mut no_tamper());
    let (a, b) = (
        Sim::keys(&sim.a_events).expect("A established"),
        Sim::keys(&sim.b_events).expect("B established"),
    );
    let (mut a1, mut b1, mut a2) = ([0u8; 20], [0u8; 20], [0u8; 20]);
    a.export(b"label one", &mut a1).unwrap();
    b.export(b"label one", &mut b1).unwrap();
    a.export(b"label two", &mut a2).unwrap();
    assert_eq!(a1, b1, "both hosts derive the same bytes");
    assert_ne!(a1, a2, "labels separate the outputs");
    assert_ne!(a1, [0; 20]);
    let mut long = vec![0u8; 255 * 32 + 1];
    assert_eq!(
        a.export(b"x", &mut long),
        Err(psp_core::handshake::ExportError::TooLong)
    );
}

#[test]
fn one_path_runs_thesis_sep_and_says_single_path() {
    let mut sim = Sim::new(cfg(MAC_A, 1, 1), cfg(MAC_B, 2, 2), lan(), 2);
    sim.run(Instant::from_secs(60), &mut no_tamper());
    let (a, b) = (
        Sim::keys(&sim.a_events).unwrap(),
        Sim::keys(&sim.b_events).unwrap(),
    );
    assert!(!a.two_path() && !b.two_path());
    assert_keys_match(a, b);
    // Nothing went on path 2.
    assert_eq!(
        sim.links[1][0].stats().sent + sim.links[1][1].stats().sent,
        0
    );
}

#[test]
fn smkex_required_with_too_few_paths_fails_closed() {
    let mut a_cfg = cfg(MAC_A, 1, 1);
    a_cfg.smkex = SmkexMode::Required;
    let mut sim = Sim::new(a_cfg, cfg(MAC_B, 2, 2), lan(), 3);
    sim.run(Instant::from_secs(60), &mut no_tamper());
    assert_eq!(Sim::failure(&sim.a_events), Some(FailReason::TooFewPaths));
    assert_eq!(sim.sent, 0);

    // The responder requires two paths, the initiator has one: Reject, both fail.
    let mut b_cfg = cfg(MAC_B, 2, 2);
    b_cfg.smkex = SmkexMode::Required;
    let mut sim = Sim::new(cfg(MAC_A, 1, 1), b_cfg, lan(), 4);
    sim.run(Instant::from_secs(60), &mut no_tamper());
    assert_eq!(Sim::failure(&sim.a_events), Some(FailReason::TooFewPaths));
    assert_eq!(Sim::failure(&sim.b_events), Some(FailReason::TooFewPaths));
    assert!(Sim::keys(&sim.a_events).is_none() && Sim::keys(&sim.b_events).is_none());
}

#[test]
fn suite_negotiation_first_common_and_none_only_if_both_allow() {
    use psp_core::SuiteId;
    use psp_core::handshake::messages::SuiteList;
    let run = |a: &[SuiteId], b: &[SuiteId]| {
        let (mut ac, mut bc) = (cfg(MAC_A, 1, 2), cfg(MAC_B, 2, 2));
        ac.suites = SuiteList::from_suites(a);
        bc.suites = SuiteList::from_suites(b);
        let mut sim = Sim::new(ac, bc, lan(), 5);
        sim.run(Instant::from_secs(60), &mut no_tamper());
        Sim::keys(&sim.a_events)
            .map(SessionKeys::suite)
            .ok_or(Sim::failure(&sim.a_events))
    };
    use SuiteId::*;
    assert_eq!(
        run(
            &[ChaCha20Poly1305, Aes128Gcm],
            &[Aes128Gcm, ChaCha20Poly1305]
        ),
        Ok(ChaCha20Poly1305)
    );
    assert_eq!(
        run(&[Aes256Gcm, BfCbcHmacSha1], &[BfCbcHmacSha1]),
        Ok(BfCbcHmacSha1)
    );
    assert_eq!(run(&[None, Aes128Gcm], &[Aes128Gcm]), Ok(Aes128Gcm));
    assert_eq!(run(&[None], &[None, Aes128Gcm]), Ok(None));
    assert_eq!(
        run(&[Aes128Gcm], &[ChaCha20Poly1305]),
        Err(Some(FailReason::NoCommonSuite))
    );
}

#[test]
fn stage_one_drops_requests_not_for_us_silently() {
    // B's subnet is 10.77.1.0/24: A (10.77.0.1) is not on it.
    let mut b_cfg = cfg(MAC_B, 2, 2);
    b_cfg.local_addr = IpAddr::V4(Ipv4Addr::new(10, 77, 1, 2));
    let mut sim = Sim::new(cfg(MAC_A, 1, 2), b_cfg, lan(), 6);
    sim.run(Instant::from_secs(60), &mut no_tamper());
    assert!(sim.b.is_none(), "no responder state, no reply");
    assert_eq!(Sim::failure(&sim.a_events), Some(FailReason::Timeout));
    // A retransmitted with backoff until its 15 s timeout: 250 ms doubling, capped at 4 s.
    assert!(
        (6..=10).contains(&sim.links[0][0].stats().sent),
        "{}",
        sim.links[0][0].stats().sent
    );
}

/// 40 handshakes with settings `a` and `b` over a link with 20 % loss, 30 ms jitter
/// (reordering) and 20 % duplication: both sides agree or the initiator times out.
fn agree_under_loss(a: &Config, b: &Config, seed0: u64) {
    let link = LinkConfig::new(0, Duration::from_millis(20))
        .with_loss_ppm(200_000)
        .with_jitter(Duration::from_millis(30));
    let mut established = 0;
    for seed in 0..40 {
        let mut sim = Sim::new(a.clone(), b.clone(), link, seed0 + seed);
        sim.dup_ppm = 200_000;
        sim.run(Instant::from_secs(60), &mut no_tamper());
        match (Sim::keys(&sim.a_events), Sim::keys(&sim.b_events)) {
            (Some(a), Some(b)) => {
                assert_keys_match(a, b);
                established += 1;
            }
            // The initiator never establishes without the responder (its last message, or
            // compact's answer, comes from the responder).
            (Some(_), None) => panic!("seed {seed}: initiator established alone"),
            // A responder may establish and its last message be lost for good: the initiator
            // then times out and the responder's unconfirmed keys sit in a ring's *next* slot,
            // unused. Any other failure is a bug.
            _ => assert_eq!(
                Sim::failure(&sim.a_events),
                Some(FailReason::Timeout),
                "seed {seed}"
            ),
        }
        assert!(sim.a_events.len() == 1, "exactly one event per handshake");
    }
    assert!(
        established >= 34,
        "{established}/40 established under 20% loss"
    );
}

#[test]
fn loss_reordering_and_duplication_still_agree() {
    agree_under_loss(&cfg(MAC_A, 1, 2), &cfg(MAC_B, 2, 2), 100);
}

/// Replaces the X25519 share in Share or ShareReply on path 1 (an active attacker there).
fn replace_share(target_from_a: bool) -> impl FnMut(PathId, bool, &Repr) -> Option<Vec<Repr>> {
    let evil = Ephemeral::from_bytes([0x66; 32]).public_share();
    move |path, from_a, r| {
        let mut r = *r;
        match &mut r.body {
            Body::Share { share, .. } if from_a && target_from_a && path == PathId::FIRST => {
                *share = evil;
            }
            Body::ShareReply { share, .. } if !from_a && !target_from_a => *share = evil,
            _ => return None,
        }
        Some(vec![r])
    }
}

#[test]
fn active_attacker_on_one_path_replacing_a_share_is_detected() {
    for target_from_a in [true, false] {
        let mut sim = Sim::new(cfg(MAC_A, 1, 2), cfg(MAC_B, 2, 2), lan(), 7);
        sim.run(Instant::from_secs(60), &mut replace_share(target_from_a));
        assert_eq!(Sim::failure(&sim.a_events), Some(FailReason::SmkexMismatch));
        assert!(Sim::keys(&sim.a_events).is_none());
        // The responder derived keys with the attacker but never gets a Confirm on path 2.
        assert!(Sim::keys(&sim.b_events).is_none());
        assert_eq!(Sim::failure(&sim.b_events), Some(FailReason::Timeout));
    }
}

#[test]
fn single_path_catches_only_a_naive_share_swap() {
    // Documented: without a second path the thesis' SEP (under the group key) cannot tell.
    let mut sim = Sim::new(cfg(MAC_A, 1, 1), cfg(MAC_B, 2, 1), lan(), 8);
    // Replacing only the share breaks key agreement, so the confirmation tags catch it...
    sim.run(Instant::from_secs(60), &mut replace_share(true));
    assert_eq!(Sim::failure(&sim.a_events), Some(FailReason::SmkexMismatch));
    // ...but a full man in the middle on the single path (below, both paths) is not detected.
}

#[test]
fn transcript_tampering_is_detected() {
    type Edit = fn(&mut Repr) -> bool;
    let edits: [Edit; 4] = [
        // The offer loses its first suite (a downgrade): the responder picks the second.
        |r| match &mut r.body {
            Body::Request(q) => {
                let mut l = psp_core::handshake::messages::SuiteList::new();
                for c in q.suites.codes().iter().skip(1) {
                    l.push_code(*c);
                }
                q.suites = l;
                true
            }
            _ => false,
        },
        // The lifetime offer is shortened.
        |r| match &mut r.body {
            Body::Share { expiry_secs, .. } => {
                *expiry_secs = 120;
                true
            }
            _ => false,
        },
        // The responder's nonce on path 2.
        |r| match &mut r.body {
            Body::NonceReply { nonce, .. } => {
                nonce[0] ^= 1;
                true
            }
            _ => false,
        },
        // The hash itself.
        |r| match &mut r.body {
            Body::NonceReply { hash, .. } => {
                hash[31] ^= 0x80;
                true
            }
            _ => false,
        },
    ];
    for (i, edit) in edits.into_iter().enumerate() {
        let mut a_cfg = cfg(MAC_A, 1, 2);
        a_cfg.suites = psp_core::handshake::messages::SuiteList::from_suites(&[
            psp_core::SuiteId::ChaCha20Poly1305,
            psp_core::SuiteId::Aes128Gcm,
        ]);
        let mut sim = Sim::new(a_cfg, cfg(MAC_B, 2, 2), lan(), 9);
        let mut tamper = |_p: PathId, _a: bool, r: &Repr| {
            let mut r = *r;
            edit(&mut r).then(|| vec![r])
        };
        sim.run(Instant::from_secs(60), &mut tamper);
        assert_eq!(
            Sim::failure(&sim.a_events),
            Some(FailReason::SmkexMismatch),
            "edit {i}"
        );
        assert!(Sim::keys(&sim.b_events).is_none(), "edit {i}");
    }
}

/// A man in the middle on *both* paths, synchronized (seed 002's A-A attacker): it runs one
/// handshake with each side and rewrites every keyed message. SMKEX cannot detect it.
#[test]
fn attacker_on_both_paths_is_not_detected() {
    let eve = Ephemeral::from_bytes([0x77; 32]).public_share();
    let eve_secret = [0x77; 32];
    // Eve's view of each side's transcript, filled as messages pass.
    let mut seen: [Option<Repr>; 6] = [None; 6];
    let mut forged: [Option<Repr>; 6] = [None; 6];
    let mut tamper = |path: PathId, from_a: bool, r: &Repr| -> Option<Vec<Repr>> {
        let mut out = *r;
        match &mut out.body {
            Body::Request(_) => {
                (seen[0], forged[0]) = (Some(*r), Some(*r));
            }
            Body::Accept(_) => {
                (seen[1], forged[1]) = (Some(*r), Some(*r));
            }
            Body::Share { share, .. } => {
                seen[2] = Some(*r);
                *share = eve;
                forged[2] = Some(out);
            }
            Body::Nonce(_) => {
                (seen[3], forged[3]) = (Some(*r), Some(*r));
            }
            Body::ShareReply { share, .. } => {
                forged[4] = Some(*r);
                *share = eve;
                seen[4] = Some(out);
            }
            Body::NonceReply { .. } => {
                forged[5] = Some(*r);
                seen[5] = Some(*r);
                // A's transcript: A's share, Eve's reply share; recompute the hash A expects.
                let th_a = transcript(&seen).hash();
                if let Body::NonceReply { hash, .. } = &mut out.body {
                    *hash = schedule::smkex_hash(&th_a);
                }
            }
            Body::Confirm(tag) => {
                // Re-tag for B: Eve knows both sides' keys.
                let th_b = transcript(&forged).hash();
                let Body::ShareReply { share: y, .. } = forged[4].unwrap().body else {
                    unreachable!()
                };
                let secrets_b = Ephemeral::from_bytes(eve_secret)
                    .complete(Role::Initiator, &y, None, None)
                    .unwrap()
                    .derive(&th_b, 16);
                *tag = secrets_b.tag(Role::Initiator);
            }
            Body::ConfirmAck(tag) => {
                let th_a = transcript(&seen).hash();
                let Body::Share { share: x, .. } = seen[2].unwrap().body else {
                    unreachable!()
                };
                let secrets_a = Ephemeral::from_bytes(eve_secret)
                    .complete(Role::Responder, &x, None, None)
                    .unwrap()
                    .derive(&th_a, 16);
                *tag = secrets_a.tag(Role::Responder);
            }
            // ML-KEM-768 is off in this test (its Config default): no KEM messages.
            Body::Reject(_) | Body::KemShare { .. } | Body::KemShareReply { .. } => {}
        }
        let _ = (path, from_a);
        Some(vec![out])
    };
    let mut sim = Sim::new(cfg(MAC_A, 1, 2), cfg(MAC_B, 2, 2), lan(), 10);
    sim.run(Instant::from_secs(60), &mut tamper);
    let a = Sim::keys(&sim.a_events).expect("A is fooled");
    let b = Sim::keys(&sim.b_events).expect("B is fooled");
    assert!(a.two_path() && b.two_path());
    // The two sides hold different keys (each shared with Eve): the session is Eve's.
    assert_ne!(a.send_key().unwrap().bivn(), b.recv_key().unwrap().bivn());
}

#[test]
fn pinned_long_term_keys_fig15() {
    let sk_b = StaticKey::from_bytes([0x42; 32]);
    let mut b_cfg = cfg(MAC_B, 2, 2);
    b_cfg.static_key = Some(sk_b.clone());
    // TOFU first contact: no pin; A learns B's key.
    let mut sim = Sim::new(cfg(MAC_A, 1, 2), b_cfg.clone(), lan(), 11);
    sim.run(Instant::from_secs(60), &mut no_tamper());
    let a = Sim::keys(&sim.a_events).unwrap();
    assert_eq!(a.peer_static(), Some(sk_b.public_key()));
    assert_keys_match(a, Sim::keys(&sim.b_events).unwrap());

    // Pinned and right.
    let pinned = |pin: [u8; 32], seed| {
        let mut rng = TestRng(Rng::new(seed));
        let peer = Peer {
            mac: MAC_B,
            addr: addr(2),
            pinned_x25519: Some(pin),
        };
        let mut sim = Sim::new(cfg(MAC_A, 1, 2), b_cfg.clone(), lan(), seed);
        sim.a = Handshake::initiate(
            Instant::ZERO,
            cfg(MAC_A, 1, 2),
            peer,
            Tai64n::from_unix(1, 0),
            &mut rng,
        );
        sim.run(Instant::from_secs(60), &mut no_tamper());
        (
            Sim::keys(&sim.a_events).is_some(),
            Sim::failure(&sim.a_events),
        )
    };
    assert_eq!(pinned(sk_b.public_key(), 12), (true, None));
    // Pinned and wrong (a key change, or an attacker's key): fail closed.
    let other = StaticKey::from_bytes([0x43; 32]).public_key();
    assert_eq!(
        pinned(other, 13),
        (false, Some(FailReason::IdentityMismatch))
    );
}

#[test]
fn no_key_nonce_pair_repeats_across_sessions_and_restarts() {
    use std::collections::HashSet;
    let mut bivns = HashSet::new();
    let mut pairs = HashSet::new();
    // Every handshake is a "restart": fresh state, fresh randomness, sequence numbers from 0.
    for seed in 0..12 {
        let mut sim = Sim::new(cfg(MAC_A, 1, 2), cfg(MAC_B, 2, 2), lan(), 200 + seed);
        sim.run(Instant::from_secs(60), &mut no_tamper());
        let (a, b) = (
            Sim::keys(&sim.a_events).unwrap(),
            Sim::keys(&sim.b_events).unwrap(),
        );
        for k in [a.send_key().unwrap(), b.send_key().unwrap()] {
            assert!(bivns.insert(*k.bivn()), "a key repeated");
        }
        let mut ring = KeyRing::new(KeyRingConfig::default());
        ring.install(a.established_at(), a).unwrap();
        let inner = [&MAC_B[..], &MAC_A, &[0x08, 0x00], b"x"].concat();
        let mut out = [0u8; 128];
        for _ in 0..50 {
            let f = ring.seal(a.established_at(), &inner, &mut out).unwrap();
            let seq = u32::from_be_bytes(f[15..19].try_into().unwrap());
            assert!(pairs.insert((*a.send_key().unwrap().bivn(), seq)));
        }
    }
    assert_eq!(pairs.len(), 12 * 50);
}

#[test]
fn request_flood_is_rate_limited_and_bounded() {
    let mut limiter = RequestLimiter::<64>::new();
    let mut rng = TestRng(Rng::new(1));
    let mut a_rng = TestRng(Rng::new(2));
    let peer = Peer {
        mac: MAC_B,
        addr: addr(2),
        pinned_x25519: None,
    };
    let mut buf = [0u8; 256];
    let mut created = 0;
    // 2000 requests in one second from one source.
    for i in 0..2000u64 {
        let now = Instant::from_micros(i * 500);
        let mut a = Handshake::initiate(
            now,
            cfg(MAC_A, 1, 2),
            peer,
            Tai64n::from_unix(i, 0),
            &mut a_rng,
        );
        let t = a.poll_transmit(now, &mut buf).unwrap();
        if limiter.check(now, MAC_A).is_err() {
            continue;
        }
        let b_peer = Peer {
            mac: MAC_A,
            addr: addr(1),
            pinned_x25519: None,
        };
        if Handshake::respond(
            now,
            cfg(MAC_B, 2, 2),
            b_peer,
            t.path,
            &buf[..t.len],
            &mut rng,
        )
        .is_ok()
        {
            created += 1;
        }
    }
    assert!(
        (20..=26).contains(&created),
        "{created} responder handshakes for 2000 requests"
    );
    // Another host is not affected.
    assert!(
        limiter
            .check(Instant::from_secs(1), [2, 0, 0, 0, 0, 3])
            .is_ok()
    );
}

/// Two hosts exchange a frame every millisecond each way over a reordering link while A rekeys
/// twice; every frame opens (none is lost to the rekey), none is sealed under an expired session.
#[test]
fn rekey_under_load_loses_no_frame() {
    let link = LinkConfig::new(0, Duration::from_millis(10)).with_jitter(Duration::from_millis(8));
    let mut ab = Link::new(link, 1);
    let mut ba = Link::new(link, 2);
    let ring_cfg = KeyRingConfig {
        rekey_margin: Duration::from_secs(20),
        ..KeyRingConfig::default()
    };
    let (mut ra, mut rb) = (KeyRing::new(ring_cfg), KeyRing::new(ring_cfg));
    let mut sessions = Vec::new();
    let mut now = Instant::ZERO;
    let mut handshake_at = |ra: &mut KeyRing, rb: &mut KeyRing, now: Instant, seed: u64| {
        let mut a_cfg = cfg(MAC_A, 1, 2);
        a_cfg.lifetime = Duration::from_secs(60);
        let mut sim = Sim::new_at(now, a_cfg, cfg(MAC_B, 2, 2), lan(), seed);
        sim.run(now + Duration::from_secs(60), &mut no_tamper());
        let (Some(Event::Established(a)), Some(Event::Established(b))) =
            (sim.a_events.pop(), sim.b_events.pop())
        else {
            panic!("handshake failed");
        };
        // The responder installs when it gets Confirm, the initiator one RTT later.
        rb.install(now, &b).unwrap();
        ra.install(now, &a).unwrap();
        sessions.push(a.session_id());
    };
    handshake_at(&mut ra, &mut rb, now, 1);
    let inner = [&MAC_B[..], &MAC_A, &[0x08, 0x00], &[0u8; 100]].concat();
    let (mut sent_ab, mut got_ab, mut sent_ba, mut got_ba) = (0u64, 0u64, 0u64, 0u64);
    let mut out = [0u8; 256];
    let mut pending_a_install: Option<Instant> = None;
    let mut rekeys = 0;
    while now < Instant::from_secs(110) {
        now += Duration::from_millis(1);
        if ra.rekey_due(now) && pending_a_install.is_none() && rekeys < 2 {
            pending_a_install = Some(now);
        }
        if let Some(t) = pending_a_install
            && now >= t
        {
            rekeys += 1;
            handshake_at(&mut ra, &mut rb, now, 10 + rekeys);
            pending_a_install = None;
        }
        if now < Instant::from_secs(100) {
            if let Ok(f) = ra.seal(now, &inner, &mut out) {
                ab.send(now, f.len(), f);
                sent_ab += 1;
            }
            if let Ok(f) = rb.seal(now, &inner, &mut out) {
                ba.send(now, f.len(), f);
                sent_ba += 1;
            }
        }
        while let Some(mut f) = ab.poll_arrival(now) {
            rb.open(now, &mut f).expect("B opens every frame");
            got_ab += 1;
        }
        while let Some(mut f) = ba.poll_arrival(now) {
            ra.open(now, &mut f).expect("A opens every frame");
            got_ba += 1;
        }
        for r in [&ra, &rb] {
            if let Some(c) = r.current() {
                assert!(now < c.expires_at(), "sealing under an expired session");
            }
        }
    }
    assert_eq!(rekeys, 2);
    assert_eq!(sessions.len(), 3);
    assert_eq!((got_ab, got_ba), (sent_ab, sent_ba));
    assert!(sent_ab > 99_000 && sent_ba > 99_000, "{sent_ab} {sent_ba}");
    // B switched to the newest session when A's first frame under it arrived.
    assert_eq!(rb.current().unwrap().session_id(), sessions[2]);
    assert_eq!(ra.current().unwrap().session_id(), sessions[2]);
}

#[test]
fn key_ring_never_seals_under_an_expired_session() {
    let mut a_cfg = cfg(MAC_A, 1, 2);
    a_cfg.lifetime = Duration::from_secs(120);
    let mut sim = Sim::new(a_cfg, cfg(MAC_B, 2, 2), lan(), 30);
    sim.run(Instant::from_secs(60), &mut no_tamper());
    let a = Sim::keys(&sim.a_events).unwrap();
    let mut ring = KeyRing::new(KeyRingConfig::default());
    ring.install(a.established_at(), a).unwrap();
    let inner = [&MAC_B[..], &MAC_A, &[0x08, 0x00], b"x"].concat();
    let mut out = [0u8; 128];
    let last = Instant::from_micros(a.expires_at().total_micros() - 1);
    assert!(!ring.rekey_due(a.established_at()));
    assert!(ring.rekey_due(last));
    assert!(ring.seal(last, &inner, &mut out).is_ok());
    assert_eq!(
        ring.seal(a.expires_at(), &inner, &mut out).unwrap_err(),
        psp_core::handshake::RingSealError::NoSession
    );
    assert!(ring.current().is_none());
}

/// The transcript of the six hashed messages as one side saw them, on the paths SMKEX puts
/// them: Request, Accept, Share on path 1, Nonce on path 2, ShareReply on path 1, NonceReply on
/// path 2.
fn transcript(messages: &[Option<Repr>; 6]) -> Transcript {
    const PATHS: [PathId; 6] = [
        PathId::FIRST,
        PathId::FIRST,
        PathId::FIRST,
        PathId::SECOND,
        PathId::FIRST,
        PathId::SECOND,
    ];
    Transcript {
        parts: core::array::from_fn(|i| (messages[i].unwrap(), PATHS[i])),
    }
}

fn compact_cfg(mac: [u8; 6], host: u8) -> Config {
    let mut c = cfg(mac, host, 2);
    c.smkex = SmkexMode::Required;
    c.compact = true;
    c
}

#[test]
fn compact_establishes_in_one_round_trip() {
    let mut sim = Sim::new(compact_cfg(MAC_A, 1), compact_cfg(MAC_B, 2), lan(), 21);
    sim.run(Instant::from_secs(60), &mut no_tamper());
    let (a, b) = (
        Sim::keys(&sim.a_events).expect("A established"),
        Sim::keys(&sim.b_events).expect("B established"),
    );
    assert!(a.two_path() && b.two_path());
    assert_keys_match(a, b);
    // One round trip on a 5 ms link (the thesis' flow takes 30 ms: three).
    assert_eq!(a.established_at(), Instant::from_millis(10));
    assert_eq!(b.established_at(), Instant::from_millis(5));
    // Request + Share + Nonce, then Accept + ShareReply + NonceReply: no Confirm, no ack.
    assert_eq!(sim.sent, 6);
    assert_eq!(sim.links[1][0].stats().sent, 1, "only the nonce on path 2");
}

#[test]
fn compact_responder_still_serves_the_thesis_flow() {
    // Only the responder allows compact: the initiator's ordinary flow runs (three round trips).
    let mut sim = Sim::new(cfg(MAC_A, 1, 2), compact_cfg(MAC_B, 2), lan(), 22);
    sim.run(Instant::from_secs(60), &mut no_tamper());
    let (a, b) = (
        Sim::keys(&sim.a_events).expect("A established"),
        Sim::keys(&sim.b_events).expect("B established"),
    );
    assert_keys_match(a, b);
    assert_eq!(a.established_at(), Instant::from_millis(30));
}

#[test]
fn compact_survives_loss_reordering_and_duplication() {
    agree_under_loss(&compact_cfg(MAC_A, 1), &compact_cfg(MAC_B, 2), 300);
}

#[test]
fn compact_detects_a_replaced_share_but_leaves_confirmation_to_the_caller() {
    for target_from_a in [true, false] {
        let mut sim = Sim::new(compact_cfg(MAC_A, 1), compact_cfg(MAC_B, 2), lan(), 23);
        sim.run(Instant::from_secs(60), &mut replace_share(target_from_a));
        // What compact protects: the initiator checks the hash from path 2 and refuses.
        assert_eq!(Sim::failure(&sim.a_events), Some(FailReason::SmkexMismatch));
        assert!(Sim::keys(&sim.a_events).is_none());
        // What it does not: the responder reports keys without any proof that the initiator
        // holds them (no Confirm). Its keys mix in both nonces from path 2, which an attacker
        // on path 1 never saw; still, the caller must confirm them before trusting data
        // (psp-multipath's binding tags fail here), as `Config::compact` says.
        assert!(Sim::keys(&sim.b_events).is_some());
    }
}
