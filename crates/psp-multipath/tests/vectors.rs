//! End-to-end vectors of psp-mp (`tests/vectors/setup.json`): one complete set-up in each flow
//! (compact and the thesis' three round trips), every byte each side writes on each path (the
//! hellos, the handshake messages after their 2-byte length, the binding tags), the values in
//! between (the ephemeral secrets, the transcript hash, the session keys, the hello hash, the
//! exporter outputs) and, under each cipher, the first data segment, the fins and the ack.
//!
//! Three tests:
//! - `the_implementation_still_writes_the_vectors`: a deterministic run of psp-multipath's
//!   [`Setup`] and [`Connection`] (fixed RNG, clock and timestamp) must write exactly the bytes
//!   of the file;
//! - `the_vectors_follow_the_documented_formulas`: an independent computation from the
//!   formulas of docs/MULTIPATH.md and docs/SESSIONS.md with the primitive crates (x25519-dalek,
//!   sha2, hkdf, hmac/sha1, aes-gcm, chacha20poly1305; psp-core's scrambler for `scramble`),
//!   not psp-multipath's code, must give the file's bytes;
//! - `multipath_md_prints_the_vectors`: the bytes printed in docs/MULTIPATH.md are the file's.
//!
//! And the document's "Edge cases" against the code: its vectors (the untrusted connection's
//! handshake boundary, hellos that differ, allow-plain with an AEAD, the 16400 limit) and the
//! error texts it quotes.
//!
//! Regenerate (only when the wire format changes on purpose) with
//! `cargo test -p psp-multipath --test vectors -- --ignored --nocapture print_vectors` and paste
//! the output into the JSON file and docs/MULTIPATH.md ("Test vectors").
#![allow(missing_docs)]

use std::sync::{Arc, Mutex};

use aes_gcm::aead::{AeadInPlace, KeyInit};
use hkdf::Hkdf;
use hmac::{Hmac, Mac};
use psp_core::handshake::Tai64n;
use psp_core::handshake::messages::Repr as HsRepr;
use psp_core::handshake::rand_core::{CryptoRng, Error as RngError, RngCore};
use psp_core::time::Instant;
use psp_multipath::proto::{Connection, Established, Read, Setup, SetupEvent};
use psp_multipath::wire::{HELLO_LEN, HandshakeFrame, Segment, TAG_MARKER};
use psp_multipath::{Cipher, OnPathFailure, Options};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// What the initiator sends after set-up.
const PLAINTEXT: &[u8] = b"psp-mp test vector: the first segment of the stream.\n";
/// The Request's timestamp (TAI64N of 2023-11-14T22:13:20Z).
const UNIX_SECS: u64 = 1_700_000_000;
const T0: Instant = Instant::from_secs(1);
const PATHS: [&str; 2] = ["untrusted", "trusted"];

#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
struct File {
    description: String,
    plaintext: String,
    vectors: Vec<Vector>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
struct Vector {
    /// `compact` or `thesis`.
    name: String,
    /// The initiator's X25519 ephemeral secret (as drawn; X25519 clamps it).
    e_i: String,
    /// The responder's.
    e_r: String,
    /// Every item each side wrote, in order, with cipher `aes128-gcm` (the default).
    messages: Vec<Item>,
    /// SHA-256 over the six transcript messages (docs/SESSIONS.md "Key schedule").
    transcript_hash: String,
    k_i2r: String,
    k_r2i: String,
    /// Per cipher: the hellos (only their cipher byte differs), the hello hash, the binding
    /// tags, the stream keys and the first segments.
    ciphers: Vec<PerCipher>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
struct Item {
    /// `initiator` or `responder`.
    from: String,
    /// `untrusted` or `trusted`.
    path: String,
    /// `hello`, a handshake message's name (framed: the 2-byte length and the message),
    /// `binding tag` (the `ff ff` marker and the tag), `data`, `fin`, `ack`.
    what: String,
    hex: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
struct PerCipher {
    cipher: String,
    /// Initiator untrusted, initiator trusted, responder untrusted, responder trusted.
    hellos: Vec<String>,
    hello_hash: String,
    bind_initiator: String,
    bind_responder: String,
    /// The stream keys (AEAD) or scrambler seeds, per direction; empty for `none`.
    key_i2r: String,
    key_r2i: String,
    /// The data phase: initiator → trusted data segment 0, the fins on both paths, the
    /// responder's ack on the trusted path.
    segments: Vec<Item>,
}

/// A deterministic RNG (an LCG: reproducible, not secure) that records what it gave.
struct Recorder {
    state: u64,
    draws: Draws,
}

impl RngCore for Recorder {
    fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }
    fn next_u64(&mut self) -> u64 {
        self.state = self
            .state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.state
    }
    fn fill_bytes(&mut self, dest: &mut [u8]) {
        for b in dest.iter_mut() {
            *b = (self.next_u64() >> 56) as u8;
        }
        self.draws.lock().unwrap().push(dest.to_vec());
    }
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), RngError> {
        self.fill_bytes(dest);
        Ok(())
    }
}

impl CryptoRng for Recorder {}

/// What a [`Recorder`] gave, call by call.
type Draws = Arc<Mutex<Vec<Vec<u8>>>>;

fn recorder(seed: u64) -> (Box<Recorder>, Draws) {
    let draws = Arc::new(Mutex::new(Vec::new()));
    let r = Recorder {
        state: seed,
        draws: Arc::clone(&draws),
    };
    (Box::new(r), draws)
}

fn options(cipher: Cipher, compact: bool, initiator: bool) -> Options {
    Options {
        cipher,
        compact_handshake: compact,
        // The initiator keeps segments for re-sending, so the responder acks (hello RESEND).
        on_path_failure: if initiator {
            OnPathFailure::Continue {
                allow_untrusted_only: false,
            }
        } else {
            OnPathFailure::Close
        },
        ..Options::default()
    }
}

/// Splits what one side wrote on one path into items; `hello`: a hello is first.
fn items(from: &str, slot: usize, mut b: &[u8], hello: bool, out: &mut Vec<Item>) {
    let mut push = |what: &str, bytes: &[u8]| {
        out.push(Item {
            from: from.to_owned(),
            path: PATHS[slot].to_owned(),
            what: what.to_owned(),
            hex: hex::encode(bytes),
        })
    };
    if hello {
        push("hello", &b[..HELLO_LEN]);
        b = &b[HELLO_LEN..];
    }
    while !b.is_empty() {
        if b.starts_with(&TAG_MARKER) {
            push("binding tag", &b[..34]);
            b = &b[34..];
            continue;
        }
        if let Ok(Some((range, end))) = HandshakeFrame::parse(b)
            && let Ok(m) = HsRepr::parse_bytes(&b[range])
        {
            push(&format!("{:?}", m.body.message_type()), &b[..end]);
            b = &b[end..];
            continue;
        }
        let s = Segment::new_checked(b).expect("a segment");
        let what = match s.kind_code() {
            1 => "data",
            2 => "fin",
            _ => "ack",
        };
        push(what, &b[..s.total_len()]);
        b = &b[s.total_len()..];
    }
}

struct Run {
    messages: Vec<Item>,
    segments: Vec<Item>,
    e_i: Vec<u8>,
    e_r: Vec<u8>,
}

/// One deterministic set-up and data phase with psp-multipath's sans-I/O types.
fn run(cipher: Cipher, compact: bool) -> Run {
    let (io, ro) = (
        options(cipher, compact, true),
        options(cipher, compact, false),
    );
    let (rng_i, draws_i) = recorder(0x0123_4567_89ab_cdef);
    let (rng_r, draws_r) = recorder(0xfedc_ba98_7654_3210);
    let mut init = Setup::initiate(T0, &io, Tai64n::from_unix(UNIX_SECS, 0), rng_i);
    let mut messages = Vec::new();
    let mut first = [[true; 2]; 2];
    let mut drain = |s: &mut Setup, side: usize, messages: &mut Vec<Item>| -> Vec<Vec<u8>> {
        (0..2)
            .map(|slot| {
                let b = s.poll_transmit(slot).to_vec();
                s.transmitted(slot, b.len());
                if !b.is_empty() {
                    let from = ["initiator", "responder"][side];
                    items(from, slot, &b, first[side][slot], messages);
                    first[side][slot] = false;
                }
                b
            })
            .collect()
    };
    let out = drain(&mut init, 0, &mut messages);
    let hellos: Vec<[u8; HELLO_LEN]> = out
        .iter()
        .map(|b| b[..HELLO_LEN].try_into().unwrap())
        .collect();
    let mut resp = Setup::respond(T0, &ro, &hellos, rng_r);
    for (slot, b) in out.iter().enumerate() {
        resp.handle_recv(T0, slot, &b[HELLO_LEN..]);
    }
    let (mut a, mut b) = (None, None);
    for _ in 0..10 {
        for (slot, bytes) in drain(&mut resp, 1, &mut messages).iter().enumerate() {
            init.handle_recv(T0, slot, bytes);
        }
        for (slot, bytes) in drain(&mut init, 0, &mut messages).iter().enumerate() {
            resp.handle_recv(T0, slot, bytes);
        }
        a = a.or_else(|| init.poll_event());
        b = b.or_else(|| resp.poll_event());
    }
    let established = |e: Option<SetupEvent>| -> Established {
        match e {
            Some(SetupEvent::Established(e)) => *e,
            other => panic!("{other:?}"),
        }
    };
    let (a, b) = (established(a), established(b));
    // The data phase: the initiator sends PLAINTEXT and ends; the responder reads it and acks.
    let mut ci = Connection::new(T0, a, &io);
    let mut cr = Connection::new(T0, b, &ro);
    let mut segments = Vec::new();
    assert_eq!(ci.write(T0, PLAINTEXT).unwrap(), PLAINTEXT.len());
    ci.close(T0).unwrap();
    for slot in 0..2 {
        let bytes = ci.poll_transmit(slot).to_vec();
        ci.transmitted(slot, bytes.len());
        items("initiator", slot, &bytes, false, &mut segments);
        assert!(cr.needs_input(slot).unwrap());
        cr.recv_buf(slot)[..bytes.len()].copy_from_slice(&bytes);
        cr.handle_recv(slot, bytes.len());
    }
    let mut got = vec![0u8; 256];
    assert_eq!(cr.read(T0, &mut got).unwrap(), Read::Data(PLAINTEXT.len()));
    assert_eq!(&got[..PLAINTEXT.len()], PLAINTEXT);
    assert_eq!(cr.read(T0, &mut got).unwrap(), Read::End);
    for slot in 0..2 {
        let bytes = cr.poll_transmit(slot).to_vec();
        items("responder", slot, &bytes, false, &mut segments);
    }
    // The first 32-byte draw of each side is its ephemeral secret (the initiator draws its
    // 8-byte group id first).
    let secret = |d: &Draws| {
        d.lock()
            .unwrap()
            .iter()
            .find(|x| x.len() == 32)
            .cloned()
            .unwrap()
    };
    Run {
        messages,
        segments,
        e_i: secret(&draws_i),
        e_r: secret(&draws_r),
    }
}

// ---- the documented formulas, with the primitive crates ------------------------------------

fn sha256(parts: &[&[u8]]) -> [u8; 32] {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p);
    }
    h.finalize().into()
}

fn hkdf(salt: &[u8], ikm: &[u8], info: &[&[u8]], len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len];
    Hkdf::<Sha256>::new(Some(salt), ikm)
        .expand_multi_info(info, &mut out)
        .unwrap();
    out
}

fn unhex(s: &str) -> Vec<u8> {
    hex::decode(s).unwrap()
}

/// The message inside a framed handshake item (after the 2-byte length).
fn framed(item: &Item) -> Vec<u8> {
    let b = unhex(&item.hex);
    assert_eq!(
        usize::from(u16::from_be_bytes([b[0], b[1]])),
        b.len() - 2,
        "{}",
        item.what
    );
    b[2..].to_vec()
}

fn find<'a>(items: &'a [Item], what: &str) -> &'a Item {
    items
        .iter()
        .find(|i| i.what == what)
        .unwrap_or_else(|| panic!("no {what}"))
}

/// TH = SHA-256("psp-sep-v1 transcript" || per part: path byte || u16 length || message), the
/// parts Request, Accept, Share, Nonce, ShareReply, NonceReply, the NonceReply with its hash
/// zeroed; the path byte is 0 for path 1 (untrusted) and 1 for path 2 (trusted).
fn transcript_hash(messages: &[Item]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(b"psp-sep-v1 transcript");
    for (what, path) in [
        ("Request", 0u8),
        ("Accept", 0),
        ("Share", 0),
        ("Nonce", 1),
        ("ShareReply", 0),
        ("NonceReply", 1),
    ] {
        let item = find(messages, what);
        assert_eq!(item.path, PATHS[usize::from(path)], "{what} on its path");
        let mut m = framed(item);
        if what == "NonceReply" {
            // Header 18, nonce 32, hash 32.
            m[18 + 32..].fill(0);
        }
        h.update([path]);
        h.update(u16::try_from(m.len()).unwrap().to_be_bytes());
        h.update(&m);
    }
    h.finalize().into()
}

struct Derived {
    th: [u8; 32],
    k_i2r: Vec<u8>,
    k_r2i: Vec<u8>,
    per_cipher: Vec<PerCipher>,
}

/// Everything a stranger computes from the secrets and the messages.
fn derive(
    e_i: &[u8],
    e_r: &[u8],
    messages: &[Item],
    hellos_by_cipher: &[(Cipher, Vec<Vec<u8>>)],
) -> Derived {
    let th = transcript_hash(messages);
    // SMKEX: the responder's NonceReply carries SHA-256("psp-sep-v1 smkex" || TH).
    let nonce_reply = framed(find(messages, "NonceReply"));
    assert_eq!(nonce_reply[18 + 32..], sha256(&[b"psp-sep-v1 smkex", &th]));
    // DH: the shares in Share and ShareReply are X25519(e, 9); both sides get the same ikm.
    let si = x25519_dalek::StaticSecret::from(<[u8; 32]>::try_from(e_i).unwrap());
    let sr = x25519_dalek::StaticSecret::from(<[u8; 32]>::try_from(e_r).unwrap());
    let share_i = framed(find(messages, "Share"))[18 + 4..].to_vec();
    let share_r = framed(find(messages, "ShareReply"))[18 + 4..].to_vec();
    assert_eq!(
        x25519_dalek::PublicKey::from(&si).as_bytes()[..],
        share_i[..]
    );
    assert_eq!(
        x25519_dalek::PublicKey::from(&sr).as_bytes()[..],
        share_r[..]
    );
    let ikm = si.diffie_hellman(&x25519_dalek::PublicKey::from(&sr));
    // The session keys: aes128-gcm was negotiated in the handshake, so 16 bytes each.
    let k_i2r = hkdf(&th, ikm.as_bytes(), &[b"psp-sep-v1 key i2r", &th], 16);
    let k_r2i = hkdf(&th, ikm.as_bytes(), &[b"psp-sep-v1 key r2i", &th], 16);
    // The exporter: HKDF-SHA-256, salt "psp-sep-v1 exporter", input k_i2r || k_r2i, info
    // label || H.
    let exporter_ikm = [k_i2r.as_slice(), &k_r2i].concat();
    let export = |label: &[u8], h: &[u8], len: usize| {
        hkdf(b"psp-sep-v1 exporter", &exporter_ikm, &[label, h], len)
    };
    let mut per_cipher = Vec::new();
    for (cipher, hellos) in hellos_by_cipher {
        let h = sha256(&[
            b"psp-mp v1 hellos",
            &hellos[0],
            &hellos[1],
            &hellos[2],
            &hellos[3],
        ]);
        let (label, len): (&[u8], usize) = match cipher {
            Cipher::Scramble => (b"psp-mp v1 scramble ", 20),
            Cipher::Aes128Gcm => (b"psp-mp v1 aead ", 16),
            Cipher::ChaCha20Poly1305 => (b"psp-mp v1 chacha20-poly1305 ", 32),
            _ => (b"", 0),
        };
        let key = |dir: &[u8]| {
            if len == 0 {
                Vec::new()
            } else {
                export(&[label, dir].concat(), &h, len)
            }
        };
        let (key_i2r, key_r2i) = (key(b"i2r"), key(b"r2i"));
        per_cipher.push(PerCipher {
            cipher: cipher.name().to_owned(),
            hellos: hellos.iter().map(hex::encode).collect(),
            hello_hash: hex::encode(h),
            bind_initiator: hex::encode(export(b"psp-mp v1 bind initiator", &h, 32)),
            bind_responder: hex::encode(export(b"psp-mp v1 bind responder", &h, 32)),
            segments: stream_segments(*cipher, &key_i2r, &key_r2i),
            key_i2r: hex::encode(&key_i2r),
            key_r2i: hex::encode(&key_r2i),
        });
    }
    Derived {
        th,
        k_i2r,
        k_r2i,
        per_cipher,
    }
}

/// The 20-byte segment header.
fn header(kind: u8, len: u16, path_seq: u32, offset: u64, seg: u32) -> Vec<u8> {
    let mut h = vec![kind, 0];
    h.extend_from_slice(&len.to_be_bytes());
    h.extend_from_slice(&path_seq.to_be_bytes());
    h.extend_from_slice(&offset.to_be_bytes());
    h.extend_from_slice(&seg.to_be_bytes());
    h
}

/// Seals `body` (in place) and returns the tag: nonce = BIVN[0..12] XOR (aad[6..12] || 00 00 ||
/// counter), BIVN = HMAC-SHA1(key, "PSP-BIVN"), AAD = prefix || header with bytes 4..8 zeroed.
fn seal(
    cipher: Cipher,
    key: &[u8],
    prefix: &[u8; 12],
    hdr: &[u8],
    counter: u32,
    body: &mut [u8],
) -> Vec<u8> {
    let mut aad = prefix.to_vec();
    aad.extend_from_slice(hdr);
    aad[12 + 4..12 + 8].fill(0);
    let mut mac = <Hmac<sha1::Sha1> as Mac>::new_from_slice(key).unwrap();
    mac.update(b"PSP-BIVN");
    let bivn = mac.finalize().into_bytes();
    let mut nonce = [0u8; 12];
    nonce.copy_from_slice(&bivn[..12]);
    for (n, m) in nonce[..6].iter_mut().zip(&aad[6..12]) {
        *n ^= m;
    }
    for (n, m) in nonce[8..].iter_mut().zip(counter.to_be_bytes()) {
        *n ^= m;
    }
    match cipher {
        Cipher::Aes128Gcm => aes_gcm::Aes128Gcm::new_from_slice(key)
            .unwrap()
            .encrypt_in_place_detached(&nonce.into(), &aad, body)
            .unwrap()
            .to_vec(),
        _ => chacha20poly1305::ChaCha20Poly1305::new_from_slice(key)
            .unwrap()
            .encrypt_in_place_detached(&nonce.into(), &aad, body)
            .unwrap()
            .to_vec(),
    }
}

/// The data phase's segments under `cipher`: the fins (untrusted path_seq 0, trusted path_seq 1;
/// offset = stream length, seg = 1), data segment 0 (initiator, trusted, path_seq 0), the
/// responder's ack (trusted, path_seq 0). Sealed under the sender's direction key; plain under
/// `none`; the data scrambled under `scramble` (psp-core's scrambler, seeded with the key).
fn stream_segments(cipher: Cipher, key_i2r: &[u8], key_r2i: &[u8]) -> Vec<Item> {
    let n = PLAINTEXT.len() as u64;
    let aead = cipher.is_aead();
    let tag_len: u16 = if aead { 16 } else { 0 };
    let item = |from: &str, slot: usize, what: &str, bytes: Vec<u8>| Item {
        from: from.to_owned(),
        path: PATHS[slot].to_owned(),
        what: what.to_owned(),
        hex: hex::encode(bytes),
    };
    let fin = |slot: usize, path_seq: u32| {
        let hdr = header(2, tag_len, path_seq, n, 1);
        let tag = if aead {
            seal(cipher, key_i2r, b"psp-mp\0fin\0\0", &hdr, 1, &mut [])
        } else {
            Vec::new()
        };
        item("initiator", slot, "fin", [hdr, tag].concat())
    };
    // In the order written: the untrusted path's fin (its path_seq 0), then on the trusted path
    // data segment 0 (path_seq 0) and the fin (path_seq 1).
    let mut out = vec![fin(0, 0)];
    let hdr = header(1, PLAINTEXT.len() as u16 + tag_len, 0, 0, 0);
    let mut body = PLAINTEXT.to_vec();
    match cipher {
        Cipher::Scramble => {
            let seed = psp_core::scramble::Seed::from_bytes(key_i2r.try_into().unwrap());
            psp_core::scramble::Scrambler::new(&seed).scramble_in_place(&mut body);
        }
        c if c.is_aead() => {
            let tag = seal(c, key_i2r, b"psp-mp\0aead\0", &hdr, 0, &mut body);
            body.extend_from_slice(&tag);
        }
        _ => {}
    }
    out.push(item("initiator", 1, "data", [hdr, body].concat()));
    out.push(fin(1, 1));
    // The responder's ack of everything, under its own (r2i) key.
    let hdr = header(3, tag_len, 0, n, 1);
    let tag = if aead {
        seal(cipher, key_r2i, b"psp-mp\0ack\0\0", &hdr, 1, &mut [])
    } else {
        Vec::new()
    };
    out.push(item("responder", 1, "ack", [hdr, tag].concat()));
    out
}

// ---- the vector file --------------------------------------------------------------------------

fn generate() -> File {
    let mut vectors = Vec::new();
    for (name, compact) in [("compact", true), ("thesis", false)] {
        let base = run(Cipher::Aes128Gcm, compact);
        let mut hellos_by_cipher = Vec::new();
        let mut segments_by_cipher = Vec::new();
        for &cipher in Cipher::ALL {
            let r = run(cipher, compact);
            // Only the hellos' cipher byte and what the hellos feed (the binding tags) differ.
            let strip = |m: &[Item]| -> Vec<Item> {
                m.iter()
                    .filter(|i| i.what != "hello" && i.what != "binding tag")
                    .cloned()
                    .collect()
            };
            assert_eq!(strip(&r.messages), strip(&base.messages), "{cipher}");
            let hellos: Vec<Vec<u8>> = ["initiator", "responder"]
                .iter()
                .flat_map(|from| PATHS.iter().map(move |p| (*from, *p)))
                .map(|(from, path)| {
                    let h = r
                        .messages
                        .iter()
                        .find(|i| i.from == from && i.path == path && i.what == "hello")
                        .unwrap();
                    unhex(&h.hex)
                })
                .collect();
            hellos_by_cipher.push((cipher, hellos));
            segments_by_cipher.push(r.segments);
        }
        let d = derive(&base.e_i, &base.e_r, &base.messages, &hellos_by_cipher);
        let mut ciphers = d.per_cipher;
        // The data phase as the implementation wrote it (checked against the formulas by
        // `the_vectors_follow_the_documented_formulas`).
        for (c, segs) in ciphers.iter_mut().zip(segments_by_cipher) {
            c.segments = segs;
        }
        vectors.push(Vector {
            name: name.to_owned(),
            e_i: hex::encode(&base.e_i),
            e_r: hex::encode(&base.e_r),
            messages: base.messages,
            transcript_hash: hex::encode(d.th),
            k_i2r: hex::encode(&d.k_i2r),
            k_r2i: hex::encode(&d.k_r2i),
            ciphers,
        });
    }
    File {
        description: "psp-mp end-to-end vectors (docs/MULTIPATH.md, \"Test vectors\"): per set-up \
                      flow, every item each side writes on each path with cipher aes128-gcm, the \
                      ephemeral secrets, the transcript hash and session keys, and per cipher the \
                      hellos, hello hash, binding tags, stream keys and the data phase's first \
                      segments. All hex."
            .to_owned(),
        plaintext: hex::encode(PLAINTEXT),
        vectors,
    }
}

fn load() -> File {
    serde_json::from_str(include_str!("vectors/setup.json")).expect("vectors/setup.json parses")
}

#[test]
#[ignore = "generator: run by hand when the wire format changes on purpose"]
fn print_vectors() {
    println!("{}", serde_json::to_string_pretty(&generate()).unwrap());
}

#[test]
fn the_implementation_still_writes_the_vectors() {
    let file = load();
    assert_eq!(file.plaintext, hex::encode(PLAINTEXT));
    let now = generate();
    for (want, got) in file.vectors.iter().zip(&now.vectors) {
        for (w, g) in want.messages.iter().zip(&got.messages) {
            assert_eq!(w, g, "{}: {} → {} {}", want.name, w.from, w.path, w.what);
        }
        assert_eq!(want.messages.len(), got.messages.len(), "{}", want.name);
        for (w, g) in want.ciphers.iter().zip(&got.ciphers) {
            assert_eq!(w, g, "{} {}", want.name, w.cipher);
        }
        assert_eq!(want, got);
    }
    assert_eq!(file, now);
}

#[test]
fn the_vectors_follow_the_documented_formulas() {
    for v in &load().vectors {
        let hellos_by_cipher: Vec<(Cipher, Vec<Vec<u8>>)> = v
            .ciphers
            .iter()
            .map(|c| {
                let cipher = *Cipher::ALL.iter().find(|x| x.name() == c.cipher).unwrap();
                (cipher, c.hellos.iter().map(|h| unhex(h)).collect())
            })
            .collect();
        let d = derive(
            &unhex(&v.e_i),
            &unhex(&v.e_r),
            &v.messages,
            &hellos_by_cipher,
        );
        assert_eq!(hex::encode(d.th), v.transcript_hash, "{}", v.name);
        assert_eq!(hex::encode(&d.k_i2r), v.k_i2r, "{}", v.name);
        assert_eq!(hex::encode(&d.k_r2i), v.k_r2i, "{}", v.name);
        for (want, got) in v.ciphers.iter().zip(&d.per_cipher) {
            let what = format!("{} {}", v.name, want.cipher);
            assert_eq!(want.hello_hash, got.hello_hash, "{what}");
            assert_eq!(want.bind_initiator, got.bind_initiator, "{what}");
            assert_eq!(want.bind_responder, got.bind_responder, "{what}");
            assert_eq!(want.key_i2r, got.key_i2r, "{what}");
            assert_eq!(want.key_r2i, got.key_r2i, "{what}");
            assert_eq!(want.segments, got.segments, "{what}: segments");
        }
        // The binding tags on the wire (aes128-gcm set-up): the initiator's and the
        // responder's, each after the `ff ff` marker on the trusted path.
        let aes = v.ciphers.iter().find(|c| c.cipher == "aes128-gcm").unwrap();
        for (from, tag) in [
            ("initiator", &aes.bind_initiator),
            ("responder", &aes.bind_responder),
        ] {
            let item = v
                .messages
                .iter()
                .find(|i| i.from == from && i.what == "binding tag")
                .unwrap();
            assert_eq!(item.path, "trusted");
            assert_eq!(item.hex, format!("ffff{tag}"), "{} {from}", v.name);
        }
        // The hellos on the wire are the aes128-gcm set-up's.
        let on_wire: Vec<String> = v
            .messages
            .iter()
            .filter(|i| i.what == "hello")
            .map(|i| i.hex.clone())
            .collect();
        assert_eq!(on_wire.len(), 4);
        for h in &aes.hellos {
            assert!(on_wire.contains(h), "{}: hello {h}", v.name);
        }
    }
}

/// docs/MULTIPATH.md prints every item of the file (hex, 64 digits a line) under a line naming
/// it: the printed bytes must be the file's.
#[test]
fn multipath_md_prints_the_vectors() {
    let doc = include_str!("../../../docs/MULTIPATH.md");
    let file = load();
    let lines: Vec<&str> = file
        .plaintext
        .as_bytes()
        .chunks(64)
        .map(|l| core::str::from_utf8(l).unwrap())
        .collect();
    assert!(
        doc.contains(&format!("{}\n", lines.join("\n"))),
        "MULTIPATH.md prints the plaintext"
    );
    for v in &file.vectors {
        let head = format!("### Vectors: {} flow\n", v.name);
        let at = doc
            .find(&head)
            .unwrap_or_else(|| panic!("MULTIPATH.md has no section `{head}`"));
        let section = &doc[at + head.len()..];
        let section = &section[..section.find("\n### ").unwrap_or(section.len())];
        let mut labels = vec![
            ("e_i".to_owned(), v.e_i.clone()),
            ("e_r".to_owned(), v.e_r.clone()),
            ("transcript hash".to_owned(), v.transcript_hash.clone()),
            ("k_i2r".to_owned(), v.k_i2r.clone()),
            ("k_r2i".to_owned(), v.k_r2i.clone()),
        ];
        for (n, m) in v.messages.iter().enumerate() {
            labels.push((
                format!("{}. {} → {}: {}", n + 1, m.from, m.path, m.what),
                m.hex.clone(),
            ));
        }
        for c in &v.ciphers {
            let p = &c.cipher;
            labels.push((format!("{p}: hellos"), c.hellos.concat()));
            labels.push((format!("{p}: hello hash"), c.hello_hash.clone()));
            labels.push((
                format!("{p}: binding tag, initiator"),
                c.bind_initiator.clone(),
            ));
            labels.push((
                format!("{p}: binding tag, responder"),
                c.bind_responder.clone(),
            ));
            if !c.key_i2r.is_empty() {
                labels.push((format!("{p}: key i2r"), c.key_i2r.clone()));
                labels.push((format!("{p}: key r2i"), c.key_r2i.clone()));
            }
            for s in &c.segments {
                labels.push((
                    format!("{p}: {} → {}: {}", s.from, s.path, s.what),
                    s.hex.clone(),
                ));
            }
        }
        let mut rest = section;
        for (label, hex) in labels {
            let line = format!("{label} ({} bytes)\n", hex.len() / 2);
            let start = rest
                .find(&line)
                .unwrap_or_else(|| panic!("{}: no `{}` (in order)", v.name, line.trim()));
            let body = &rest[start + line.len()..];
            let printed: String = body
                .lines()
                .take_while(|l| !l.is_empty() && l.chars().all(|c| c.is_ascii_hexdigit()))
                .collect();
            assert_eq!(printed, hex, "{}: {label}", v.name);
            rest = &body[printed.len()..];
        }
    }
}

/// Prints the "Vectors" sections of docs/MULTIPATH.md from the vector file.
#[test]
#[ignore = "generator: run by hand after print_vectors"]
fn print_markdown() {
    fn block(out: &mut String, label: &str, hex: &str) {
        out.push_str(&format!("{label} ({} bytes)\n", hex.len() / 2));
        for line in hex.as_bytes().chunks(64) {
            out.push_str(core::str::from_utf8(line).unwrap());
            out.push('\n');
        }
    }
    let file = load();
    let mut out = String::new();
    for v in &file.vectors {
        out.push_str(&format!("### Vectors: {} flow\n\n", v.name));
        out.push_str(
            "The secrets each side drew, and the transcript hash and session keys they \
             derive:\n\n```text\n",
        );
        block(&mut out, "e_i", &v.e_i);
        block(&mut out, "e_r", &v.e_r);
        block(&mut out, "transcript hash", &v.transcript_hash);
        block(&mut out, "k_i2r", &v.k_i2r);
        block(&mut out, "k_r2i", &v.k_r2i);
        out.push_str(
            "```\n\nEvery item written, in order, with cipher aes128-gcm (each side writes \
             what it has for a connection in one go):\n\n```text\n",
        );
        for (n, m) in v.messages.iter().enumerate() {
            block(
                &mut out,
                &format!("{}. {} → {}: {}", n + 1, m.from, m.path, m.what),
                &m.hex,
            );
        }
        out.push_str(
            "```\n\nPer cipher: the four hellos (initiator untrusted, initiator trusted, \
             responder untrusted, responder trusted), `H`, the binding tags, the stream keys \
             (scrambler seeds for `scramble`) and the data phase (the plaintext below sent by \
             the initiator, then its fins, then the responder's ack), in the order written:\n\n```text\n",
        );
        for c in &v.ciphers {
            let p = &c.cipher;
            block(&mut out, &format!("{p}: hellos"), &c.hellos.concat());
            block(&mut out, &format!("{p}: hello hash"), &c.hello_hash);
            block(
                &mut out,
                &format!("{p}: binding tag, initiator"),
                &c.bind_initiator,
            );
            block(
                &mut out,
                &format!("{p}: binding tag, responder"),
                &c.bind_responder,
            );
            if !c.key_i2r.is_empty() {
                block(&mut out, &format!("{p}: key i2r"), &c.key_i2r);
                block(&mut out, &format!("{p}: key r2i"), &c.key_r2i);
            }
            for s in &c.segments {
                block(
                    &mut out,
                    &format!("{p}: {} → {}: {}", s.from, s.path, s.what),
                    &s.hex,
                );
            }
        }
        out.push_str("```\n\n");
    }
    print!("{out}");
}

// ---- "Edge cases (normative)": the document's bytes against the code ---------------------

/// The bytes docs/MULTIPATH.md prints under the line `label (N bytes)`.
fn doc_block(label: &str) -> Vec<u8> {
    let doc = include_str!("../../../docs/MULTIPATH.md");
    let head = format!("\n{label} (");
    let at = doc
        .find(&head)
        .unwrap_or_else(|| panic!("MULTIPATH.md prints no `{label}`"));
    let (n, rest) = doc[at + head.len()..].split_once(" bytes)\n").unwrap();
    let hex: String = rest
        .lines()
        .take_while(|l| !l.is_empty() && l.chars().all(|c| c.is_ascii_hexdigit()))
        .collect();
    let bytes = unhex(&hex);
    assert_eq!(bytes.len(), n.parse::<usize>().unwrap(), "{label}");
    bytes
}

fn compact() -> Vector {
    load()
        .vectors
        .into_iter()
        .find(|v| v.name == "compact")
        .unwrap()
}

fn item<'a>(items: &'a [Item], from: &str, path: &str, what: &str) -> Vec<u8> {
    let i: &'a Item = items
        .iter()
        .find(|i| i.from == from && i.path == path && i.what == what)
        .unwrap_or_else(|| panic!("no {from} → {path}: {what}"));
    unhex(&i.hex)
}

/// Case 1: nothing marks the end of the handshake on the untrusted connection. A responder
/// given the initiator's untrusted connection in one read (hello, Request, Share and, already,
/// a segment) stops parsing frames when its handshake has the keys and hands the rest to the
/// data phase, where it is the fin it is.
#[test]
fn the_untrusted_connection_turns_to_segments_after_the_last_handshake_frame() {
    let v = compact();
    let aes = v.ciphers.iter().find(|c| c.cipher == "aes128-gcm").unwrap();
    let whole = doc_block("initiator → untrusted, one byte string");
    let mut want = Vec::new();
    for what in ["hello", "Request", "Share"] {
        want.extend(item(&v.messages, "initiator", "untrusted", what));
    }
    assert_eq!(want.len(), 154, "the handshake ends after byte 154");
    want.extend(item(&aes.segments, "initiator", "untrusted", "fin"));
    assert_eq!(whole, want, "the document's byte string is the vector's");

    let ro = options(Cipher::Aes128Gcm, true, false);
    let (rng, _) = recorder(0xfedc_ba98_7654_3210);
    let trusted_hello = item(&v.messages, "initiator", "trusted", "hello");
    let hellos = [
        <[u8; HELLO_LEN]>::try_from(&whole[..HELLO_LEN]).unwrap(),
        <[u8; HELLO_LEN]>::try_from(&trusted_hello[..]).unwrap(),
    ];
    let mut resp = Setup::respond(T0, &ro, &hellos, rng);
    // The Nonce first, as causality has it (the fin exists only after the responder's keys).
    resp.handle_recv(T0, 1, &item(&v.messages, "initiator", "trusted", "Nonce"));
    resp.handle_recv(T0, 0, &whole[HELLO_LEN..]);
    for slot in 0..2 {
        let n = resp.poll_transmit(slot).len();
        resp.transmitted(slot, n);
    }
    resp.handle_recv(
        T0,
        1,
        &item(&v.messages, "initiator", "trusted", "binding tag"),
    );
    let est = match resp.poll_event() {
        Some(SetupEvent::Established(e)) => *e,
        other => panic!("{other:?}"),
    };
    let mut c = Connection::new(T0, est, &ro);
    let mut trusted = item(&aes.segments, "initiator", "trusted", "data");
    trusted.extend(item(&aes.segments, "initiator", "trusted", "fin"));
    assert!(c.needs_input(1).unwrap());
    c.recv_buf(1)[..trusted.len()].copy_from_slice(&trusted);
    c.handle_recv(1, trusted.len());
    let mut got = [0u8; 256];
    assert_eq!(c.read(T0, &mut got).unwrap(), Read::Data(PLAINTEXT.len()));
    assert_eq!(&got[..PLAINTEXT.len()], PLAINTEXT);
    assert_eq!(c.read(T0, &mut got).unwrap(), Read::End);
    assert_eq!(
        c.path_stats(0).wire_bytes_received,
        36,
        "the fin, as a segment"
    );
}

/// Case 6: a responder refuses two initiator hellos that differ in more than the role byte,
/// with refusal hellos on both connections.
#[test]
fn the_responder_refuses_initiator_hellos_that_differ() {
    let theirs = doc_block("hellos that differ: initiator");
    let hellos = [
        <[u8; HELLO_LEN]>::try_from(&theirs[..16]).unwrap(),
        <[u8; HELLO_LEN]>::try_from(&theirs[16..]).unwrap(),
    ];
    let (rng, _) = recorder(1);
    let mut resp = Setup::respond(T0, &Options::default(), &hellos, rng);
    let sent = [resp.poll_transmit(0), resp.poll_transmit(1)].concat();
    assert_eq!(
        sent,
        doc_block("hellos that differ: the responder's refusal")
    );
    match resp.poll_event() {
        Some(SetupEvent::Failed(e)) => {
            assert_eq!(
                e.to_string(),
                "protocol error: the peer's two hellos differ"
            );
        }
        other => panic!("{other:?}"),
    }
}

/// Case 9: allow-plain is announced whatever the cipher (caps `07` with aes128-gcm) and
/// changes nothing: the responder chooses aes128-gcm.
#[test]
fn allow_plain_with_an_aead_is_announced_and_changes_nothing() {
    let io = Options {
        allow_plain: true,
        ..Options::default()
    };
    let (rng, _) = recorder(0x0123_4567_89ab_cdef);
    let init = Setup::initiate(T0, &io, Tai64n::from_unix(UNIX_SECS, 0), rng);
    let hellos = [0, 1].map(|s| <[u8; HELLO_LEN]>::try_from(&init.poll_transmit(s)[..16]).unwrap());
    assert_eq!(
        hellos.concat(),
        doc_block("allow-plain with aes128-gcm: initiator")
    );
    let want = doc_block("allow-plain with aes128-gcm: responder");
    for ro in [Options::default(), io.clone()] {
        let (rng, _) = recorder(2);
        let mut resp = Setup::respond(T0, &ro, &hellos, rng);
        let answer = [&resp.poll_transmit(0)[..16], &resp.poll_transmit(1)[..16]].concat();
        let mut w = want.clone();
        if ro.allow_plain {
            // This responder announces allow-plain too; it still chooses aes128-gcm.
            w[6] |= 0x04;
            w[22] |= 0x04;
        }
        assert_eq!(answer, w);
        assert!(resp.poll_event().is_none(), "not refused");
    }
}

/// Case 8: a payload length of 16400 is a segment under every cipher, 16401 is refused from
/// the header alone.
#[test]
fn the_payload_length_field_stops_at_16400() {
    use psp_multipath::wire::{self, Repr, Segment};
    assert_eq!(wire::MAX_PAYLOAD, 16400);
    let mut seg = doc_block("largest header");
    seg.resize(20 + 16400, 0);
    assert_eq!(wire::segment_len(&seg), Ok(Some(16420)));
    let r = Repr::parse(&Segment::new_checked(&seg[..]).unwrap()).unwrap();
    assert_eq!(r.len, 16400);
    let long = doc_block("too long");
    assert_eq!(wire::segment_len(&long), Err(wire::Error::TooLong));
    assert_eq!(wire::Error::TooLong.to_string(), "length field too large");
}

/// Every error text docs/MULTIPATH.md quotes in backticks is the one the code prints.
#[test]
fn multipath_md_quotes_the_error_texts_the_code_prints() {
    use psp_multipath::{Error, PathRole, wire};
    let doc = include_str!("../../../docs/MULTIPATH.md");
    // The document wraps lines: compare with runs of white space made one space.
    let doc = doc.split_whitespace().collect::<Vec<_>>().join(" ");
    let texts = [
        Error::Auth {
            path: PathRole::Untrusted,
        }
        .to_string(),
        Error::CipherRequired {
            wanted: Cipher::Scramble,
            required: Cipher::Aes128Gcm,
        }
        .to_string(),
        Error::Protocol("the peer's two hellos differ").to_string(),
        Error::Protocol("the peer chose different ciphers on the two paths").to_string(),
        Error::Handshake(psp_core::handshake::FailReason::KemRequired).to_string(),
        wire::Error::BadVersion(2).to_string(),
        wire::Error::EmptyData.to_string(),
        wire::Error::TooLong.to_string(),
    ];
    for t in texts {
        assert!(
            doc.contains(&format!("`{t}`")),
            "MULTIPATH.md does not quote `{t}`"
        );
    }
    // Quoted with "..." for the rest.
    let refused = Error::CipherRefused {
        wanted: Cipher::Scramble,
        chosen: None,
    }
    .to_string();
    let quoted = "refused by the peer: it does not serve cipher scramble ...";
    assert!(doc.contains(&format!("`{quoted}`")));
    assert!(
        refused.starts_with(quoted.trim_end_matches(" ...")),
        "{refused}"
    );
    // The old text is gone.
    assert!(!doc.contains("authentication failed on"));
}
