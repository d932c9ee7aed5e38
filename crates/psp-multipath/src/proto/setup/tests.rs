//! Set-up in memory on a virtual clock: both flows, cipher negotiation, and the attacks the
//! set-up must catch (a replaced share, a tampered hello, a pinned key), with no socket.
//! [`pair`] is also the data-phase tests' way to get two matching [`Established`].

use psp_core::handshake::rand_core::{CryptoRng, Error as RngError, RngCore};
use psp_core::handshake::{FailReason, Tai64n};
use psp_core::time::{Duration, Instant};

use super::*;
use crate::wire::PathRole;
use crate::{KemMode, LongTermKey, OnPathFailure, TRUSTED, UNTRUSTED};

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

/// Kernel MPTCP mode: one connection, the tag on it (the compact flow by default).
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
    messages(chunks).into_iter().map(|m| m.0).collect()
}

/// As [`message_names`], with each item's slot and length (without the frame's prefix).
fn messages(chunks: &[Chunk]) -> Vec<(String, usize, usize)> {
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
                out.push((format!("{who} tag"), c.slot, BINDING_TAG_LEN));
                b = &b[BINDING_FRAME_LEN..];
                continue;
            }
            let (range, end) = HandshakeFrame::parse(b).unwrap().unwrap();
            let m = HsRepr::parse_bytes(&b[range.clone()]).unwrap();
            out.push((
                format!("{who} {:?}", m.body.message_type()),
                c.slot,
                range.len(),
            ));
            b = &b[end..];
        }
    }
    out
}

/// Kernel MPTCP mode, compact flow (the default): SMKEX with both of its paths on the one
/// connection. The initiator's first flight is Request, Share and Nonce; the responder answers
/// Accept, ShareReply, NonceReply and its binding tag in one write; then the initiator's tag.
/// One round trip, as in dispersal mode; both sides report SMKEX.
#[test]
fn kernel_mptcp_mode_runs_the_compact_flow_on_one_connection() {
    let o = Options {
        mode: Mode::KernelMptcp,
        ..Options::default()
    };
    let r = run_with(&o, &o, 6, |_| {});
    assert!(r.chunks.iter().all(|c| c.slot == 0));
    let from_initiator = r.chunks.iter().filter(|c| c.from_initiator).count();
    let from_responder = r.chunks.len() - from_initiator;
    assert_eq!(
        (from_initiator, from_responder),
        (2, 1),
        "one flight each way and the tag"
    );
    assert_eq!(
        message_names(&r.chunks),
        [
            "I Request",
            "I Share",
            "I Nonce",
            "R Accept",
            "R ShareReply",
            "R NonceReply",
            "R tag",
            "I tag"
        ]
    );
    let (a, b) = (r.initiator.unwrap(), r.responder.unwrap());
    assert!(a.smkex() && b.smkex());
    assert!(!a.kem() && !b.kem());
}

/// Kernel MPTCP mode with `compact_handshake: false` (`--faithful-handshake`) runs the thesis'
/// flow as single-path SEP on the one connection: Request → Accept, Share and Nonce →
/// ShareReply and NonceReply, Confirm → ConfirmAck and the responder's binding tag, then the
/// initiator's. The same responder serves both flows.
#[test]
fn kernel_mptcp_mode_runs_the_thesis_flow_single_path() {
    let io = Options {
        mode: Mode::KernelMptcp,
        compact_handshake: false,
        ..Options::default()
    };
    let ro = Options {
        mode: Mode::KernelMptcp,
        ..Options::default()
    };
    let r = run_with(&io, &ro, 6, |_| {});
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
        ]
    );
    let (a, b) = (r.initiator.unwrap(), r.responder.unwrap());
    assert!(!a.smkex() && !b.smkex(), "single-path SEP");
}

/// `kem: Required` on both sides, in both modes and both flows: both ends' keys hold the
/// ML-KEM-768 secret (and agree: the binding tags verified). The share message is a KemShare
/// (1,238 bytes, psp-core's longest message, in one frame) on path 1 (slot 0: the untrusted
/// connection, or the one connection), and in the compact flow it is in the initiator's first
/// flight, before any answer; the reply is a KemShareReply on the same slot.
#[test]
fn kem_required_on_both_sides_gives_hybrid_keys_in_every_mode_and_flow() {
    use psp_core::handshake::messages::{KEM_SHARE_LEN, KEM_SHARE_REPLY_LEN, MAX_MESSAGE_LEN};
    assert_eq!(KEM_SHARE_LEN, MAX_MESSAGE_LEN);
    for mode in MODES {
        for compact in [true, false] {
            let o = kem_opts(mode, compact, KemMode::Required);
            let r = run_with(&o, &o, 21, |_| {});
            let msgs = messages(&r.chunks);
            let (a, b) = (r.initiator.unwrap(), r.responder.unwrap());
            assert!(a.kem() && b.kem(), "{mode:?} {compact}");
            let find = |name: &str| msgs.iter().position(|m| m.0 == name).unwrap();
            let share = find("I KemShare");
            assert_eq!(msgs[share].1, 0, "{mode:?} {compact}: path 1");
            assert_eq!(msgs[share].2, KEM_SHARE_LEN);
            let reply = find("R KemShareReply");
            assert_eq!((msgs[reply].1, msgs[reply].2), (0, KEM_SHARE_REPLY_LEN));
            assert!(
                !msgs
                    .iter()
                    .any(|m| m.0 == "I Share" || m.0 == "R ShareReply")
            );
            let first_answer = msgs.iter().position(|m| m.0.starts_with("R ")).unwrap();
            assert_eq!(
                share < first_answer,
                compact,
                "{mode:?} {compact}: {msgs:?}"
            );
            if compact {
                // The first flight is one write per connection: the KemShare is in it.
                let first = r.chunks.iter().position(|c| !c.from_initiator).unwrap();
                assert_eq!(first, roles(mode).len(), "{mode:?}");
            }
        }
    }
}

/// `prefer` against `off` (either way round) runs X25519 only, in every mode and flow. A
/// compact initiator that prefers the KEM sends its KemShare before it knows the answer; the
/// responder that does not run the KEM hashes it and answers a plain ShareReply.
#[test]
fn kem_preferred_against_off_runs_without_it() {
    for mode in MODES {
        for compact in [true, false] {
            let prefer = kem_opts(mode, compact, KemMode::Preferred);
            let off = kem_opts(mode, compact, KemMode::Off);
            for (io, ro) in [(&prefer, &off), (&off, &prefer)] {
                let r = run_with(io, ro, 22, |_| {});
                let names: Vec<String> = messages(&r.chunks).into_iter().map(|m| m.0).collect();
                let (a, b) = (r.initiator.unwrap(), r.responder.unwrap());
                assert!(!a.kem() && !b.kem(), "{mode:?} {compact}");
                assert!(names.contains(&"R ShareReply".to_owned()), "{names:?}");
                let kem_share = compact && io.kem == KemMode::Preferred;
                assert_eq!(
                    names.contains(&"I KemShare".to_owned()),
                    kem_share,
                    "{names:?}"
                );
            }
        }
    }
}

/// A side that requires the KEM against one that does not run it: no stream, in every mode
/// and flow, and both errors name the KEM. Initiator `require`, responder `off`: the Request
/// says "required" (flag 0x40), so the responder rejects (code 0x05) as it does when it
/// requires the KEM itself and the initiator is `off`; both fail `kem_required`, and the
/// initiator never sends its binding tag.
#[test]
fn kem_required_against_off_is_refused_naming_the_kem() {
    for mode in MODES {
        for compact in [true, false] {
            let require = kem_opts(mode, compact, KemMode::Required);
            let off = kem_opts(mode, compact, KemMode::Off);
            for (io, ro) in [(&require, &off), (&off, &require)] {
                let r = run_with(io, ro, 23, |_| {});
                let case = format!("{mode:?} {compact}, initiator {:?}", io.kem);
                for e in [r.initiator.unwrap_err(), r.responder.unwrap_err()] {
                    assert!(
                        matches!(e, Error::Handshake(FailReason::KemRequired)),
                        "{case}: {e:?}"
                    );
                    assert!(e.to_string().contains("kem_required"), "{e}");
                    assert!(e.to_string().contains("--kem"), "{e}");
                }
                let names = message_names(&r.chunks);
                assert!(names.contains(&"R Reject".to_owned()), "{case}: {names:?}");
                assert!(!names.contains(&"I tag".to_owned()), "{case}: {names:?}");
            }
        }
    }
}

/// An attacker on path 1 replaces the initiator's X25519 share in the KemShare: the
/// transcript differs and the SMKEX hash on path 2 does not match, in both flows (dispersal;
/// the same as for a plain Share).
#[test]
fn a_kem_share_replaced_on_the_untrusted_path_fails_both_flows() {
    for compact in [true, false] {
        let o = kem_opts(Mode::Dispersal, compact, KemMode::Required);
        let r = run_with(&o, &o, 25, |c| {
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
                // A KemShare: header (18 bytes, type at 1), lifetime (4), then the share.
                if c.bytes[m + 1] == 0x0a {
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

/// In kernel MPTCP mode a message's handshake path is its type's: Nonce, NonceReply and
/// Confirm on path 2 when the Request asked for two paths, everything else on path 1; with
/// two connections, the connection's.
#[test]
fn one_connection_maps_messages_to_paths_by_type() {
    let msg = |ty: u8| [2u8, ty];
    let types = [
        (0x06, true),
        (0x07, true),
        (0x08, true),
        (0x01, false),
        (0x02, false),
        (0x04, false),
        (0x05, false),
        (0x09, false),
        (0x0a, false),
        (0x0b, false),
    ];
    for (ty, two) in types {
        let want = if two { PathId::SECOND } else { PathId::FIRST };
        assert_eq!(path_of(1, true, 0, &msg(ty)), want, "{ty:#x}");
        assert_eq!(path_of(1, false, 0, &msg(ty)), PathId::FIRST, "{ty:#x}");
        assert_eq!(path_of(2, false, 1, &msg(ty)), PathId::SECOND);
        assert_eq!(path_of(2, true, 0, &msg(ty)), PathId::FIRST);
    }
}

/// Options with ML-KEM-768 set to `kem`, in `mode`, compact or not.
fn kem_opts(mode: Mode, compact: bool, kem: KemMode) -> Options {
    Options {
        mode,
        compact_handshake: compact,
        kem,
        ..Options::default()
    }
}

const MODES: [Mode; 2] = [Mode::Dispersal, Mode::KernelMptcp];

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

/// A refusing responder writes its Reject on the untrusted connection and closes both; the
/// initiator may read the trusted connection's close first. It then still reads the other
/// connection (for at most 250 ms) and reports the Reject's reason, not the close. A close with
/// nothing behind it fails after that wait, with an error that says when it came.
#[test]
fn a_close_on_one_connection_waits_briefly_for_the_others_last_words() {
    let off = Options::default();
    let require = Options {
        kem: KemMode::Required,
        ..Options::default()
    };
    let ts = Tai64n::from_unix(1_700_000_000, 0);
    let start = |io: &Options, ro: &Options| {
        let mut init = Setup::initiate(T0, io, ts, Box::new(TestRng(31)));
        let first: Vec<Vec<u8>> = (0..2).map(|i| init.poll_transmit(i).to_vec()).collect();
        let hellos: Vec<[u8; HELLO_LEN]> = first
            .iter()
            .map(|b| b[..HELLO_LEN].try_into().unwrap())
            .collect();
        let mut resp = Setup::respond(T0, ro, &hellos, Box::new(TestRng(32)));
        for (slot, b) in first.iter().enumerate() {
            init.transmitted(slot, b.len());
            resp.handle_recv(T0, slot, &b[HELLO_LEN..]);
        }
        (init, resp)
    };
    // The responder requires the KEM: hellos on both connections, a Reject on the untrusted.
    let (mut init, mut resp) = start(&off, &require);
    assert!(matches!(
        outcome(&mut resp),
        Some(Err(Error::Handshake(FailReason::KemRequired)))
    ));
    let trusted = resp.poll_transmit(TRUSTED).to_vec();
    let untrusted = resp.poll_transmit(UNTRUSTED).to_vec();
    init.handle_recv(T0, TRUSTED, &trusted);
    init.handle_eof(T0, TRUSTED);
    assert!(
        outcome(&mut init).is_none(),
        "still reading the untrusted connection"
    );
    assert!(!init.wants_input(TRUSTED) && init.wants_input(UNTRUSTED));
    assert_eq!(init.poll_timeout(), Some(T0 + Duration::from_millis(250)));
    init.handle_recv(T0, UNTRUSTED, &untrusted);
    assert!(matches!(
        outcome(&mut init),
        Some(Err(Error::Handshake(FailReason::KemRequired)))
    ));
    // Nothing behind the close: an error after the wait.
    let (mut init, _resp) = start(&off, &off);
    init.handle_eof(T0, TRUSTED);
    init.handle_timeout(T0 + Duration::from_millis(249));
    assert!(outcome(&mut init).is_none());
    init.handle_timeout(T0 + Duration::from_millis(250));
    match outcome(&mut init) {
        Some(Err(Error::Io { path, source })) => {
            assert_eq!(path, Some(PathRole::Trusted));
            assert_eq!(source.to_string(), "peer closed during set-up");
        }
        other => panic!("{other:?}"),
    }
    // Both connections closed: at once.
    let (mut init, _resp) = start(&off, &off);
    init.handle_eof(T0, TRUSTED);
    init.handle_eof(T0, UNTRUSTED);
    assert!(matches!(outcome(&mut init), Some(Err(Error::Io { .. }))));
}
