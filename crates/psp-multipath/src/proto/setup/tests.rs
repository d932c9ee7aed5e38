//! Set-up in memory on a virtual clock: both flows, cipher negotiation, and the attacks the
//! set-up must catch (a replaced share, a tampered hello, a pinned key), with no socket.
//! [`pair`] is also the data-phase tests' way to get two matching [`Established`].

use psp_core::handshake::rand_core::{CryptoRng, Error as RngError, RngCore};
use psp_core::handshake::{FailReason, Tai64n};
use psp_core::time::{Duration, Instant};

use super::*;
use crate::wire::PathRole;
use crate::{LongTermKey, OnPathFailure, TRUSTED, UNTRUSTED};

/// A deterministic RNG (an LCG: reproducible, not secure) for tests and vectors.
pub(crate) struct TestRng(pub(crate) u64);

impl RngCore for TestRng {
    fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
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
            *b = (self.next_u64() >> 56) as u8;
        }
    }
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), RngError> {
        self.fill_bytes(dest);
        Ok(())
    }
}

impl CryptoRng for TestRng {}

pub(crate) const T0: Instant = Instant::from_secs(1);

/// A chunk of bytes one side wrote on one slot.
#[derive(Clone, Debug)]
pub(crate) struct Chunk {
    pub(crate) from_initiator: bool,
    pub(crate) slot: usize,
    pub(crate) bytes: Vec<u8>,
}

/// Both sides' outcomes and every chunk that crossed.
pub(crate) struct Run {
    pub(crate) initiator: Result<Established, Error>,
    pub(crate) responder: Result<Established, Error>,
    pub(crate) chunks: Vec<Chunk>,
}

fn outcome(s: &mut Setup) -> Option<Result<Established, Error>> {
    match s.poll_event()? {
        SetupEvent::Established(e) => Some(Ok(*e)),
        SetupEvent::Failed(e) => Some(Err(e)),
    }
}

/// Runs a set-up between an initiator with `io` and a responder with `ro` in memory, each
/// side's output delivered whole to the other; `tamper` may change a chunk in transit.
pub(crate) fn run_with(
    io: &Options,
    ro: &Options,
    seed: u64,
    mut tamper: impl FnMut(&mut Chunk),
) -> Run {
    let mut init = Setup::initiate(
        T0,
        io,
        Tai64n::from_unix(1_700_000_000, 0),
        Box::new(TestRng(seed)),
    );
    let n = roles(io.mode).len();
    let mut chunks = Vec::new();
    let mut take = |s: &mut Setup, from_initiator: bool, chunks: &mut Vec<Chunk>| {
        let mut out = Vec::new();
        for slot in 0..n {
            let b = s.poll_transmit(slot).to_vec();
            s.transmitted(slot, b.len());
            if !b.is_empty() {
                let mut c = Chunk {
                    from_initiator,
                    slot,
                    bytes: b,
                };
                tamper(&mut c);
                chunks.push(c.clone());
                out.push(c);
            }
        }
        out
    };
    // The listener reads each connection's hello, pairs them, then hands over the rest.
    let first = take(&mut init, true, &mut chunks);
    let hellos: Vec<[u8; HELLO_LEN]> = first
        .iter()
        .map(|c| c.bytes[..HELLO_LEN].try_into().unwrap())
        .collect();
    let mut resp = Setup::respond(T0, ro, &hellos, Box::new(TestRng(seed ^ 0x5a5a)));
    for c in &first {
        resp.handle_recv(T0, c.slot, &c.bytes[HELLO_LEN..]);
    }
    let (mut a, mut b) = (None, None);
    let mut now = T0;
    for _ in 0..100 {
        for c in take(&mut resp, false, &mut chunks) {
            init.handle_recv(now, c.slot, &c.bytes);
        }
        for c in take(&mut init, true, &mut chunks) {
            resp.handle_recv(now, c.slot, &c.bytes);
        }
        a = a.or_else(|| outcome(&mut init));
        b = b.or_else(|| outcome(&mut resp));
        if a.is_some() && b.is_some() {
            break;
        }
        if a.is_some() || b.is_some() {
            // One side is over: nothing more will come from it; let the other time out.
            now += Duration::from_secs(60);
            init.handle_timeout(now);
            resp.handle_timeout(now);
        }
    }
    Run {
        initiator: a.unwrap_or(Err(Error::Timeout)),
        responder: b.unwrap_or(Err(Error::Timeout)),
        chunks,
    }
}

/// Two matching ends of an established stream (initiator, responder).
pub(crate) fn pair(io: &Options, ro: &Options) -> (Established, Established) {
    let r = run_with(io, ro, 7, |_| {});
    (r.initiator.unwrap(), r.responder.unwrap())
}

fn opts(cipher: Cipher) -> Options {
    Options {
        cipher,
        allow_plain: cipher == Cipher::None,
        ..Options::default()
    }
}

/// The messages of one chunk after `skip` bytes (a hello): each framed handshake message.
fn frames(bytes: &[u8]) -> Vec<core::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Ok(Some((r, end))) = HandshakeFrame::parse(&bytes[at..]) {
        out.push(at + r.start..at + r.end);
        at += end;
    }
    out
}

#[test]
fn both_flows_establish_with_each_cipher_and_agree() {
    for compact in [true, false] {
        for &cipher in Cipher::ALL {
            let io = Options {
                compact_handshake: compact,
                ..opts(cipher)
            };
            let r = run_with(&io, &opts(cipher), 1, |_| {});
            let (a, b) = (r.initiator.unwrap(), r.responder.unwrap());
            assert_eq!((a.cipher(), b.cipher()), (cipher, cipher));
            // Compact: one flight each way plus the initiator's tag; thesis: three round trips.
            let from_initiator = r.chunks.iter().filter(|c| c.from_initiator).count();
            assert_eq!(
                from_initiator,
                if compact { 3 } else { 6 },
                "{cipher} {compact}"
            );
        }
    }
}

/// A hello's first 16 bytes: magic, version 3, role, caps, cipher, the group echoed.
#[test]
fn hellos_carry_role_caps_cipher_and_the_echoed_group() {
    let io = Options {
        on_path_failure: OnPathFailure::Continue {
            allow_untrusted_only: false,
        },
        ..Options::default()
    };
    let r = run_with(&io, &Options::default(), 3, |_| {});
    let hello = |from_initiator, slot| {
        let c = r
            .chunks
            .iter()
            .find(|c| c.from_initiator == from_initiator && c.slot == slot)
            .unwrap();
        Hello::parse(&c.bytes).unwrap()
    };
    let (iu, it, ru, rt) = (
        hello(true, UNTRUSTED),
        hello(true, TRUSTED),
        hello(false, UNTRUSTED),
        hello(false, TRUSTED),
    );
    assert_eq!((iu.role, it.role), (PathRole::Untrusted, PathRole::Trusted));
    assert_eq!(iu.caps, caps::SCRAMBLE | caps::AES128_GCM | caps::RESEND);
    assert_eq!(ru.caps, caps::SCRAMBLE | caps::AES128_GCM);
    assert_eq!([iu.group, it.group, ru.group], [rt.group; 3]);
    assert_eq!(ru.cipher, Cipher::Aes128Gcm.code());
    assert!(r.responder.unwrap().peer_wants_acks);
    assert!(!r.initiator.unwrap().peer_wants_acks);
}

/// An attacker on the untrusted path replaces the initiator's share: the responder's hash on
/// the trusted path does not match, in both flows; neither side gets a stream.
#[test]
fn a_share_replaced_on_the_untrusted_path_fails_both_flows() {
    for compact in [true, false] {
        let io = Options {
            compact_handshake: compact,
            ..Options::default()
        };
        let r = run_with(&io, &Options::default(), 5, |c| {
            if !(c.from_initiator && c.slot == UNTRUSTED) {
                return;
            }
            let skip = if c.bytes.starts_with(b"PSMP") {
                HELLO_LEN
            } else {
                0
            };
            for range in frames(&c.bytes[skip..]) {
                let m = skip + range.start;
                // A Share: header (18 bytes, type at 1), lifetime (4), then the share.
                if c.bytes[m + 1] == 0x04 {
                    c.bytes[m + 22..m + 54].copy_from_slice(&[9; 32]);
                }
            }
        });
        assert!(
            matches!(
                r.initiator,
                Err(Error::Handshake(FailReason::SmkexMismatch))
            ),
            "{compact}: {:?}",
            r.initiator
        );
        assert!(r.responder.is_err(), "{compact}");
    }
}

/// A capability bit flipped in the responder's untrusted hello (one the initiator does not act
/// on) changes the hello hash: the binding tags differ and neither side gets a stream.
#[test]
fn a_tampered_hello_fails_the_binding_tags() {
    let r = run_with(&Options::default(), &Options::default(), 9, |c| {
        if !c.from_initiator && c.slot == UNTRUSTED && c.bytes.starts_with(b"PSMP") {
            c.bytes[6] ^= caps::ALLOW_PLAIN;
        }
    });
    assert!(
        matches!(r.initiator, Err(Error::BindMismatch)),
        "{:?}",
        r.initiator
    );
    assert!(r.responder.is_err());
}

/// The listener's cipher is a requirement: another is refused on both sides with the refusal
/// code, before any handshake message is answered.
#[test]
fn a_responder_refuses_another_cipher_with_the_refusal_code() {
    let r = run_with(
        &opts(Cipher::Scramble),
        &opts(Cipher::Aes128Gcm),
        11,
        |_| {},
    );
    assert!(
        matches!(
            r.responder,
            Err(Error::CipherRequired {
                wanted: Cipher::Scramble,
                required: Cipher::Aes128Gcm
            })
        ),
        "{:?}",
        r.responder
    );
    assert!(matches!(
        r.initiator,
        Err(Error::CipherRefused {
            wanted: Cipher::Scramble,
            chosen: None
        })
    ));
    let answers: Vec<_> = r.chunks.iter().filter(|c| !c.from_initiator).collect();
    assert_eq!(answers.len(), 2, "one hello per path and nothing else");
    assert!(answers.iter().all(|c| c.bytes.len() == HELLO_LEN));
    assert!(answers.iter().all(|c| c.bytes[7] == wire::CIPHER_REFUSED));
}

/// The papers' fallback: both ask for scramble, one side cannot, both allow plain.
#[test]
fn scramble_falls_back_to_plain_only_when_both_allow_it() {
    let no_scramble = Options {
        advertise_scramble: false,
        allow_plain: true,
        ..opts(Cipher::Scramble)
    };
    let plain_ok = Options {
        allow_plain: true,
        ..opts(Cipher::Scramble)
    };
    let (a, b) = pair(&plain_ok, &no_scramble);
    assert_eq!((a.cipher(), b.cipher()), (Cipher::None, Cipher::None));
    let r = run_with(&opts(Cipher::Scramble), &no_scramble, 2, |_| {});
    assert!(
        matches!(r.responder, Err(Error::Refused(_))),
        "{:?}",
        r.responder
    );
}

/// A pinned key other than the peer's fails the set-up (both flows).
#[test]
fn a_pinned_key_is_required() {
    let server = LongTermKey::from_bytes([7; 32]);
    let ro = Options {
        static_key: Some(server.clone()),
        ..Options::default()
    };
    for compact in [true, false] {
        let good = Options {
            pinned_peer: Some(server.public_key()),
            compact_handshake: compact,
            ..Options::default()
        };
        let (a, _) = pair(&good, &ro);
        assert_eq!(a.peer_static(), Some(server.public_key()));
        let bad = Options {
            pinned_peer: Some([1; 32]),
            ..good
        };
        let r = run_with(&bad, &ro, 4, |_| {});
        assert!(
            matches!(
                r.initiator,
                Err(Error::Handshake(FailReason::IdentityMismatch))
            ),
            "{:?}",
            r.initiator
        );
    }
}

/// Kernel MPTCP mode: one connection, single-path SEP, the tag on it.
#[test]
fn one_connection_in_kernel_mptcp_mode() {
    let o = Options {
        mode: Mode::KernelMptcp,
        ..Options::default()
    };
    let r = run_with(&o, &o, 6, |_| {});
    assert_eq!(r.initiator.unwrap().cipher(), Cipher::Aes128Gcm);
    assert!(r.responder.is_ok());
    assert!(r.chunks.iter().all(|c| c.slot == 0));
    assert!(Hello::parse(&r.chunks[0].bytes).unwrap().caps & caps::KERNEL_MPTCP != 0);
}

/// Bytes the peer sent right after its binding tag (data) are handed to the data phase.
#[test]
fn bytes_after_the_binding_tag_are_kept() {
    let r = run_with(&Options::default(), &Options::default(), 8, |c| {
        let n = c.bytes.len();
        if !c.from_initiator
            && c.slot == TRUSTED
            && n >= BINDING_FRAME_LEN
            && c.bytes[n - BINDING_FRAME_LEN..].starts_with(&TAG_MARKER)
        {
            c.bytes.extend_from_slice(b"early data");
        }
    });
    let e = r.initiator.unwrap();
    assert_eq!(e.leftover[TRUSTED], b"early data");
    assert!(e.leftover[UNTRUSTED].is_empty());
}

/// The negotiation table: the responder serves exactly its own cipher; plain only in the
/// papers' fallback (scramble asked and required, one side cannot scramble, both allow plain);
/// the initiator takes exactly what it asked for, or that fallback.
#[test]
fn a_side_gets_the_cipher_it_named_or_the_papers_fallback() {
    use Cipher::{Aes128Gcm as Aes, ChaCha20Poly1305 as Chacha, None as Plain, Scramble};
    const ALL: u8 = caps::SCRAMBLE | caps::AES128_GCM | caps::ALLOW_PLAIN;
    for &required in Cipher::ALL {
        for &wanted in Cipher::ALL {
            let got = responder_choice(required, ALL, wanted.code(), ALL);
            if wanted == required {
                assert_eq!(got.ok(), Some(wanted), "{required} {wanted}");
            } else {
                assert!(
                    matches!(got, Err(Error::CipherRequired { .. })),
                    "{required} {wanted}: {got:?}"
                );
            }
        }
    }
    let no_scramble = caps::AES128_GCM | caps::ALLOW_PLAIN;
    let no_aes = caps::SCRAMBLE | caps::ALLOW_PLAIN;
    let strict = caps::SCRAMBLE | caps::AES128_GCM;
    // The papers' fallback, and only it.
    assert_eq!(
        responder_choice(Scramble, no_scramble, Scramble.code(), ALL).ok(),
        Some(Plain)
    );
    assert!(responder_choice(Scramble, strict & !caps::SCRAMBLE, 1, ALL).is_err());
    assert!(responder_choice(Aes, ALL, Aes.code(), no_aes).is_err());
    assert_eq!(
        responder_choice(Chacha, ALL, Chacha.code(), no_aes).ok(),
        Some(Chacha)
    );
    assert!(responder_choice(Aes, ALL, 9, ALL).is_err());
    // The initiator.
    assert_eq!(initiator_check(Aes, ALL, Aes.code(), ALL).ok(), Some(Aes));
    assert!(matches!(
        initiator_check(Aes, ALL, Plain.code(), ALL),
        Err(Error::CipherRefused {
            wanted: Aes,
            chosen: Some(Plain)
        })
    ));
    assert!(matches!(
        initiator_check(Aes, ALL, wire::CIPHER_REFUSED, ALL),
        Err(Error::CipherRefused {
            wanted: Aes,
            chosen: None
        })
    ));
    assert_eq!(
        initiator_check(Scramble, ALL, Plain.code(), no_scramble).ok(),
        Some(Plain)
    );
    assert!(initiator_check(Scramble, ALL, Plain.code(), ALL).is_err());
    assert!(initiator_check(Scramble, strict, Plain.code(), no_scramble).is_err());
}

/// The handshake messages and binding tags in `chunks`, in order, as `"I Request"`,
/// `"R tag"`, ... (hellos left out).
fn message_names(chunks: &[Chunk]) -> Vec<String> {
    use psp_core::handshake::messages::Repr as HsRepr;
    let mut out = Vec::new();
    let mut seen_hello = [[false; 2]; 2];
    for c in chunks {
        let who = if c.from_initiator { "I" } else { "R" };
        let mut b = &c.bytes[..];
        let first = &mut seen_hello[usize::from(c.from_initiator)][c.slot];
        if !*first {
            *first = true;
            b = &b[HELLO_LEN..];
        }
        while !b.is_empty() {
            if b.starts_with(&TAG_MARKER) {
                out.push(format!("{who} tag"));
                b = &b[BINDING_FRAME_LEN..];
                continue;
            }
            let (range, end) = HandshakeFrame::parse(b).unwrap().unwrap();
            let m = HsRepr::parse_bytes(&b[range]).unwrap();
            out.push(format!("{who} {:?}", m.body.message_type()));
            b = &b[end..];
        }
    }
    out
}

/// Kernel MPTCP mode runs the thesis' flow as single-path SEP on the one connection, whatever
/// `compact_handshake` says (psp-core's compact flow needs two paths): Request → Accept,
/// Share and Nonce → ShareReply and NonceReply, Confirm → ConfirmAck and the responder's
/// binding tag, then the initiator's.
#[test]
fn kernel_mptcp_mode_runs_the_thesis_flow_on_one_path() {
    for compact in [true, false] {
        let o = Options {
            mode: Mode::KernelMptcp,
            compact_handshake: compact,
            ..Options::default()
        };
        let r = run_with(&o, &o, 6, |_| {});
        assert!(r.initiator.is_ok() && r.responder.is_ok());
        assert_eq!(
            message_names(&r.chunks),
            [
                "I Request",
                "R Accept",
                "I Share",
                "I Nonce",
                "R ShareReply",
                "R NonceReply",
                "I Confirm",
                "R ConfirmAck",
                "R tag",
                "I tag"
            ],
            "compact_handshake: {compact}"
        );
    }
}

/// Writes everything `from` has to send into `to`, slot by slot.
fn relay(from: &mut Setup, to: &mut Setup) {
    for slot in 0..2 {
        let out = from.poll_transmit(slot).to_vec();
        from.transmitted(slot, out.len());
        to.handle_recv(T0, slot, &out);
    }
}

/// The responder's two hellos are one answer: an initiator that gets two differing in more
/// than the role byte (here the caps of a responder that sent them so: its binding tag covers
/// them and verifies) ends the set-up with a protocol error, no stream. (Changed in transit,
/// the same difference fails the binding tags first: `a_tampered_hello_fails_the_binding_tags`.)
#[test]
fn an_initiator_refuses_responder_hellos_that_differ() {
    let o = Options::default();
    let ts = Tai64n::from_unix(1_700_000_000, 0);
    let mut init = Setup::initiate(T0, &o, ts, Box::new(TestRng(9)));
    let first: Vec<Vec<u8>> = (0..2).map(|i| init.poll_transmit(i).to_vec()).collect();
    let hellos: Vec<[u8; HELLO_LEN]> = first
        .iter()
        .map(|b| b[..HELLO_LEN].try_into().unwrap())
        .collect();
    let mut resp = Setup::respond(T0, &o, &hellos, Box::new(TestRng(10)));
    // This responder's trusted hello announces allow-plain, its untrusted one does not.
    resp.sent[TRUSTED][6] |= caps::ALLOW_PLAIN;
    resp.io[TRUSTED].out[6] |= caps::ALLOW_PLAIN;
    for (slot, b) in first.iter().enumerate() {
        init.transmitted(slot, b.len());
        resp.handle_recv(T0, slot, &b[HELLO_LEN..]);
    }
    let (mut a, mut b) = (None, None);
    for _ in 0..10 {
        relay(&mut resp, &mut init);
        relay(&mut init, &mut resp);
        a = a.or_else(|| outcome(&mut init));
        b = b.or_else(|| outcome(&mut resp));
    }
    match a {
        Some(Err(Error::Protocol(why))) => assert_eq!(why, "the peer's two hellos differ"),
        other => panic!("{other:?}"),
    }
    assert!(
        matches!(b, Some(Ok(_))),
        "the responder's own view is consistent"
    );
}
