//! Processing rules of docs/SESSIONS.md that the vectors do not show (they run without loss):
//! the initiator's retransmission schedule, how a responder tells a compact Share from a
//! thesis-flow one, and which Rejects an initiator acts on. Public API only.
#![allow(missing_docs)]

use core::net::{IpAddr, Ipv4Addr};

use psp_core::handshake::messages::{Body, HandshakeId, MAX_MESSAGE_LEN, RejectCode, Repr};
use psp_core::handshake::rand_core::{self, CryptoRng, RngCore};
use psp_core::handshake::{
    Config, Event, FailReason, Handshake, Ignored, PathId, Peer, SmkexMode, StaticKey, Tai64n,
    Transmit,
};
use psp_core::time::{Duration, Instant};

/// A deterministic RNG (an LCG): jitter and keys need no quality here.
struct Lcg(u64);

impl RngCore for Lcg {
    fn next_u32(&mut self) -> u32 {
        self.next_u64() as u32
    }
    fn next_u64(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0
    }
    fn fill_bytes(&mut self, dest: &mut [u8]) {
        for b in dest {
            *b = (self.next_u64() >> 33) as u8;
        }
    }
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand_core::Error> {
        self.fill_bytes(dest);
        Ok(())
    }
}

impl CryptoRng for Lcg {}

const MAC_A: [u8; 6] = [2, 0, 0, 0, 0, 1];
const MAC_B: [u8; 6] = [2, 0, 0, 0, 0, 2];

fn ip(x: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 77, 0, x))
}

fn cfg(mac: [u8; 6], host: u8) -> Config {
    let mut c = Config::new(mac, ip(host), 24);
    c.paths = 2;
    c
}

fn peer(mac: [u8; 6], host: u8) -> Peer {
    Peer {
        mac,
        addr: ip(host),
        pinned_x25519: None,
    }
}

/// Everything `hs` has to send now.
fn drain(hs: &mut Handshake, now: Instant) -> Vec<(Transmit, Vec<u8>)> {
    let mut buf = [0u8; MAX_MESSAGE_LEN];
    let mut out = Vec::new();
    while let Some(t) = hs.poll_transmit(now, &mut buf) {
        out.push((t, buf[..t.len].to_vec()));
    }
    out
}

/// Host A's Request answered by host B (configured `responder`) at `t0`: both handshakes, the
/// Request, and B's Accept with the path it went on.
struct Answered {
    a: Handshake,
    b: Handshake,
    request: Vec<u8>,
    accept: (Transmit, Vec<u8>),
}

fn answered(t0: Instant, rng: &mut Lcg, responder: Config) -> Answered {
    let mut a = Handshake::initiate(
        t0,
        cfg(MAC_A, 1),
        peer(MAC_B, 2),
        Tai64n::from_unix(1, 0),
        rng,
    );
    let (t, request) = drain(&mut a, t0).remove(0);
    let mut b = Handshake::respond(t0, responder, peer(MAC_A, 1), t.path, &request, rng).unwrap();
    let accept = drain(&mut b, t0).remove(0);
    Answered {
        a,
        b,
        request,
        accept,
    }
}

/// Retransmits until the deadline and checks each interval: in [7/8, 9/8) of an RTO that
/// starts at 250 ms and doubles up to 4 s, the whole flight again, byte for byte.
fn check_retransmissions(hs: &mut Handshake, start: Instant, sent_at: Instant, flight: &[Vec<u8>]) {
    let mut at = sent_at;
    let mut rto = 250_000u64;
    let deadline = start + Duration::from_secs(15);
    let mut n = 0;
    loop {
        let t = hs.poll_timeout().unwrap();
        if t >= deadline {
            assert_eq!(t, deadline);
            break;
        }
        let gap = t.saturating_since(at).total_micros();
        assert!(
            gap >= rto - rto / 8 && gap < rto + rto / 8,
            "retransmission {n}: {gap} µs for an RTO of {rto} µs"
        );
        hs.handle_timeout(t);
        let again: Vec<Vec<u8>> = drain(hs, t).into_iter().map(|(_, m)| m).collect();
        assert_eq!(again, flight, "retransmission {n} repeats the whole flight");
        at = t;
        rto = (rto * 2).min(4_000_000);
        n += 1;
    }
    assert!(n >= 6, "{n} retransmissions before the deadline");
    hs.handle_timeout(deadline);
    assert!(matches!(
        hs.poll_event(),
        Some(Event::Failed(FailReason::Timeout))
    ));
}

#[test]
fn the_initiator_retransmits_whole_flights_on_the_documented_schedule() {
    let t0 = Instant::from_secs(100);
    let mut rng = Lcg(1);
    // The Request, never answered.
    let mut a = Handshake::initiate(
        t0,
        cfg(MAC_A, 1),
        peer(MAC_B, 2),
        Tai64n::from_unix(1, 0),
        &mut rng,
    );
    let request: Vec<Vec<u8>> = drain(&mut a, t0).into_iter().map(|(_, m)| m).collect();
    assert_eq!(request.len(), 1);
    check_retransmissions(&mut a, t0, t0, &request);

    // Share and Nonce, sent one second in: the RTO starts again at 250 ms for the new flight,
    // the deadline stays 15 s after the start.
    let mut a = Handshake::initiate(
        t0,
        cfg(MAC_A, 1),
        peer(MAC_B, 2),
        Tai64n::from_unix(1, 0),
        &mut rng,
    );
    let (t, req) = drain(&mut a, t0).remove(0);
    let t1 = t0 + Duration::from_secs(1);
    let mut b =
        Handshake::respond(t1, cfg(MAC_B, 2), peer(MAC_A, 1), t.path, &req, &mut rng).unwrap();
    let (t, accept) = drain(&mut b, t1).remove(0);
    a.handle_message(t1, t.path, &accept).unwrap();
    let flight = drain(&mut a, t1);
    let paths: Vec<PathId> = flight.iter().map(|(t, _)| t.path).collect();
    assert_eq!(paths, [PathId::FIRST, PathId::SECOND], "Share, then Nonce");
    let flight: Vec<Vec<u8>> = flight.into_iter().map(|(_, m)| m).collect();
    check_retransmissions(&mut a, t0, t1, &flight);
}

/// A Share (or Nonce) with a zero responder id comes from a compact initiator: a responder not
/// configured compact (the gateway) ignores it as carrying the wrong ids; the same Share with the
/// responder's id is answered.
#[test]
fn a_thesis_flow_responder_ignores_a_compact_share() {
    let t0 = Instant::from_secs(100);
    let mut rng = Lcg(2);
    let mut ca = cfg(MAC_A, 1);
    ca.smkex = SmkexMode::Required;
    ca.compact = true;
    let mut a = Handshake::initiate(t0, ca, peer(MAC_B, 2), Tai64n::from_unix(1, 0), &mut rng);
    let flight = drain(&mut a, t0);
    assert_eq!(flight.len(), 3, "Request, Share, Nonce in one flight");
    let mut b = Handshake::respond(
        t0,
        cfg(MAC_B, 2),
        peer(MAC_A, 1),
        flight[0].0.path,
        &flight[0].1,
        &mut rng,
    )
    .unwrap();
    let (_, accept) = drain(&mut b, t0).remove(0);
    let accept = Repr::parse_bytes(&accept).unwrap();
    for (t, m) in &flight[1..] {
        assert_eq!(
            Repr::parse_bytes(m).unwrap().responder_id,
            HandshakeId::default()
        );
        assert_eq!(b.handle_message(t0, t.path, m), Err(Ignored::WrongIds));
    }
    assert!(drain(&mut b, t0).is_empty());
    // The same Share and Nonce with the responder's id: the thesis flow, answered.
    let mut buf = [0u8; MAX_MESSAGE_LEN];
    for (t, m) in &flight[1..] {
        let mut r = Repr::parse_bytes(m).unwrap();
        r.responder_id = accept.responder_id;
        let n = r.emit(&mut buf);
        b.handle_message(t0, t.path, &buf[..n]).unwrap();
    }
    let answer: Vec<Body> = drain(&mut b, t0)
        .iter()
        .map(|(_, m)| Repr::parse_bytes(m).unwrap().body)
        .collect();
    assert!(matches!(
        answer[..],
        [Body::ShareReply { .. }, Body::NonceReply { .. }]
    ));
}

/// An initiator acts on a Reject before the Accept (stage 1 and 2 refusals) and after it, while
/// it waits for the replies to its Share (the responder's 0x03, lifetime refused, answers the
/// Share) (docs/SESSIONS.md, "Processing rules").
#[test]
fn an_initiator_acts_on_a_reject_before_and_after_the_accept() {
    let t0 = Instant::from_secs(100);
    let mut rng = Lcg(3);
    let Answered {
        mut a,
        accept: (t, accept),
        ..
    } = answered(t0, &mut rng, cfg(MAC_B, 2));
    let reject = |code: RejectCode| {
        let mut r = Repr::parse_bytes(&accept).unwrap();
        r.body = Body::Reject(code);
        let mut buf = [0u8; MAX_MESSAGE_LEN];
        let n = r.emit(&mut buf);
        buf[..n].to_vec()
    };
    // Before the Accept: acted on.
    let mut early = Handshake::initiate(
        t0,
        cfg(MAC_A, 1),
        peer(MAC_B, 2),
        Tai64n::from_unix(1, 0),
        &mut Lcg(3),
    );
    let _ = drain(&mut early, t0);
    early
        .handle_message(t0, t.path, &reject(RejectCode::NoCommonSuite))
        .unwrap();
    assert!(matches!(
        early.poll_event(),
        Some(Event::Failed(FailReason::NoCommonSuite))
    ));
    // After it, answering the Share: acted on too.
    a.handle_message(t0, t.path, &accept).unwrap();
    let _ = drain(&mut a, t0);
    a.handle_message(t0, t.path, &reject(RejectCode::ExpiryRefused))
        .unwrap();
    assert!(matches!(
        a.poll_event(),
        Some(Event::Failed(FailReason::ExpiryRefused))
    ));
}

/// Runs two handshakes against each other (messages delivered at once, on the path they were
/// sent) until neither has anything to send; returns each side's event.
fn exchange(a: &mut Handshake, b: &mut Handshake, now: Instant) -> (Option<Event>, Option<Event>) {
    for _ in 0..10 {
        let from_a = drain(a, now);
        let from_b = drain(b, now);
        if from_a.is_empty() && from_b.is_empty() {
            break;
        }
        for (t, m) in from_a {
            let _ = b.handle_message(now, t.path, &m);
        }
        for (t, m) in from_b {
            let _ = a.handle_message(now, t.path, &m);
        }
    }
    (a.poll_event(), b.poll_event())
}

/// A compact initiator checks the responder's long-term key against its pin, as the thesis flow
/// does: the right key establishes, another fails with `IdentityMismatch`.
#[test]
fn a_compact_initiator_checks_the_pin() {
    let t0 = Instant::from_secs(100);
    let b_key = StaticKey::from_bytes([7; 32]);
    for (pin, established) in [(b_key.public_key(), true), ([9; 32], false)] {
        let mut rng = Lcg(4);
        let mut ca = cfg(MAC_A, 1);
        ca.smkex = SmkexMode::Required;
        ca.compact = true;
        let mut to_b = peer(MAC_B, 2);
        to_b.pinned_x25519 = Some(pin);
        let mut a = Handshake::initiate(t0, ca, to_b, Tai64n::from_unix(1, 0), &mut rng);
        let flight = drain(&mut a, t0);
        let mut cb = cfg(MAC_B, 2);
        cb.smkex = SmkexMode::Required;
        cb.compact = true;
        cb.static_key = Some(StaticKey::from_bytes([7; 32]));
        let mut b = Handshake::respond(
            t0,
            cb,
            peer(MAC_A, 1),
            flight[0].0.path,
            &flight[0].1,
            &mut rng,
        )
        .unwrap();
        for (t, m) in &flight[1..] {
            b.handle_message(t0, t.path, m).unwrap();
        }
        let (ea, _) = exchange(&mut a, &mut b, t0);
        if established {
            assert!(matches!(ea, Some(Event::Established(_))), "{ea:?}");
        } else {
            assert!(
                matches!(ea, Some(Event::Failed(FailReason::IdentityMismatch))),
                "{ea:?}"
            );
        }
    }
}

/// A responder whose maximum lifetime is below the offer answers with its own; the initiator
/// takes the shorter lifetime (it refuses only a longer one).
#[test]
fn the_initiator_takes_a_shorter_lifetime() {
    let t0 = Instant::from_secs(100);
    let mut rng = Lcg(5);
    let mut cb = cfg(MAC_B, 2);
    cb.lifetime = Duration::from_secs(600);
    let Answered {
        mut a,
        mut b,
        accept: (t, accept),
        ..
    } = answered(t0, &mut rng, cb);
    a.handle_message(t0, t.path, &accept).unwrap();
    let (ea, eb) = exchange(&mut a, &mut b, t0);
    for e in [ea, eb] {
        let Some(Event::Established(k)) = e else {
            panic!("{e:?}");
        };
        assert_eq!(k.lifetime(), Duration::from_secs(600));
        assert_eq!(k.initial_seq().0, 0);
        let shown = format!("{k:?}");
        assert!(shown.starts_with("SessionKeys") && shown.contains("two_path: true"));
    }
}

/// A failed handshake asks for no more timeouts; a handshake that is still running does.
#[test]
fn a_failed_handshake_needs_no_timer() {
    let t0 = Instant::from_secs(100);
    let mut rng = Lcg(6);
    let mut c = cfg(MAC_A, 1);
    c.smkex = SmkexMode::Required;
    c.paths = 1;
    let mut a = Handshake::initiate(t0, c, peer(MAC_B, 2), Tai64n::from_unix(1, 0), &mut rng);
    assert!(matches!(
        a.poll_event(),
        Some(Event::Failed(FailReason::TooFewPaths))
    ));
    assert_eq!(a.poll_timeout(), None);
    let a = Handshake::initiate(
        t0,
        cfg(MAC_A, 1),
        peer(MAC_B, 2),
        Tai64n::from_unix(1, 0),
        &mut rng,
    );
    assert!(a.poll_timeout().is_some());
}

/// A second copy of a message is a duplicate if it is the same and unexpected if it differs
/// (the first copy wins); a responder answers only duplicates of what it already took, never an
/// unrelated message.
#[test]
fn the_first_copy_wins_and_only_true_duplicates_are_answered() {
    let t0 = Instant::from_secs(100);
    let mut rng = Lcg(7);
    let Answered {
        mut a,
        mut b,
        request: req,
        accept: (t, accept),
    } = answered(t0, &mut rng, cfg(MAC_B, 2));
    a.handle_message(t0, t.path, &accept).unwrap();
    assert_eq!(
        a.handle_message(t0, t.path, &accept),
        Err(Ignored::Duplicate)
    );
    let mut other = Repr::parse_bytes(&accept).unwrap();
    let Body::Accept(ref mut acc) = other.body else {
        panic!("an Accept");
    };
    acc.two_path = !acc.two_path;
    let mut buf = [0u8; MAX_MESSAGE_LEN];
    let n = other.emit(&mut buf);
    assert_eq!(
        a.handle_message(t0, t.path, &buf[..n]),
        Err(Ignored::Unexpected)
    );
    // The responder: the Request again is answered (its Accept again) after half an RTO; an
    // altered Request is not.
    let later = t0 + Duration::from_millis(200);
    let mut altered = Repr::parse_bytes(&req).unwrap();
    let Body::Request(ref mut r) = altered.body else {
        panic!("a Request");
    };
    r.paths = 3;
    let n = altered.emit(&mut buf);
    assert_eq!(
        b.handle_message(later, PathId::FIRST, &buf[..n]),
        Err(Ignored::Unexpected)
    );
    assert!(drain(&mut b, later).is_empty());
    assert_eq!(
        b.handle_message(later, PathId::FIRST, &req),
        Err(Ignored::Duplicate)
    );
    assert_eq!(drain(&mut b, later).len(), 1, "the Accept again");
}

/// Retransmission jitter keeps changing: at the capped RTO (4 s) the offsets within the window
/// are not all equal, so two initiators that started together drift apart.
#[test]
fn retransmission_jitter_keeps_changing() {
    let t0 = Instant::from_secs(100);
    let mut rng = Lcg(8);
    let mut c = cfg(MAC_A, 1);
    c.timeout = Duration::from_secs(120);
    let mut a = Handshake::initiate(t0, c, peer(MAC_B, 2), Tai64n::from_unix(1, 0), &mut rng);
    let _ = drain(&mut a, t0);
    let mut at = t0;
    let mut offsets = Vec::new();
    for _ in 0..20 {
        let t = a.poll_timeout().unwrap();
        offsets.push(t.saturating_since(at).total_micros());
        a.handle_timeout(t);
        let _ = drain(&mut a, t);
        at = t;
    }
    let capped = &offsets[6..];
    assert!(
        capped.iter().any(|o| *o != capped[0]),
        "the same offset every time: {capped:?}"
    );
}

/// A responder that holds the initiator's Nonce but not yet its Share takes the same Nonce
/// again as a duplicate and a different one as unexpected: the first copy stays in the
/// transcript.
#[test]
fn a_responder_keeps_the_first_nonce() {
    let t0 = Instant::from_secs(100);
    let mut rng = Lcg(9);
    let Answered {
        mut a,
        mut b,
        accept: (t, accept),
        ..
    } = answered(t0, &mut rng, cfg(MAC_B, 2));
    a.handle_message(t0, t.path, &accept).unwrap();
    let flight = drain(&mut a, t0);
    let (nt, nonce) = flight
        .iter()
        .find(|(t, _)| t.path == PathId::SECOND)
        .cloned()
        .unwrap();
    b.handle_message(t0, nt.path, &nonce).unwrap();
    assert_eq!(
        b.handle_message(t0, nt.path, &nonce),
        Err(Ignored::Duplicate)
    );
    let mut other = Repr::parse_bytes(&nonce).unwrap();
    let Body::Nonce(ref mut n) = other.body else {
        panic!("a Nonce");
    };
    n[0] ^= 1;
    let mut buf = [0u8; MAX_MESSAGE_LEN];
    let len = other.emit(&mut buf);
    assert_eq!(
        b.handle_message(t0, nt.path, &buf[..len]),
        Err(Ignored::Unexpected)
    );
    // The Share completes the run with the first Nonce: both sides agree.
    let (st, share) = flight
        .iter()
        .find(|(t, _)| t.path == PathId::FIRST)
        .cloned()
        .unwrap();
    b.handle_message(t0, st.path, &share).unwrap();
    let (ea, eb) = exchange(&mut a, &mut b, t0);
    assert!(matches!(ea, Some(Event::Established(_))), "{ea:?}");
    assert!(matches!(eb, Some(Event::Established(_))), "{eb:?}");
}
