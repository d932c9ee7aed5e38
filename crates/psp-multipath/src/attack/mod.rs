//! On-path attackers for the tests and `testbed/multipath.sh` (`psp-mp proxy`): a TCP relay
//! that records what crosses it (an eavesdropper who sees one path) or replaces the SMKEX share
//! the initiator sends (an active attacker on one path). Not for production use.
//!
//! The relay terminates TCP, as a real man in the middle does; it parses only the hello and the
//! handshake framing of `crate::wire`, never trusting either.
//!
//! [`ciphertext_only`] is the passive analyst: it recovers scrambled runs with no key and no
//! known plaintext, and [`analyze_path`] applies it to everything one path carried.

use core::net::SocketAddr;
use std::sync::{Arc, Mutex};

use psp_core::handshake::kem::KemKeyPair;
use psp_core::handshake::messages::{Body, Repr};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::wire::{HELLO_LEN, HandshakeFrame};

pub mod ciphertext_only;

/// What the relay does to the client → server bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Mode {
    /// Forward unchanged (record only).
    Record,
    /// Replace the X25519 share in the initiator's SMKEX `Share` message with the attacker's
    /// (in a hybrid handshake's `KemShare`, also the ML-KEM-768 encapsulation key).
    ReplaceShare,
    /// Once [`INJECT_AFTER`] bytes went client → server, write one forged ack into the quiet
    /// server → client direction: the path's next sequence number (0: the server sent no
    /// segment on it) and an offset past everything the server can have received, with a made-up
    /// tag if the stream is sealed. It claims data the server never got was delivered.
    InjectAck,
}

/// After how many client → server bytes [`Mode::InjectAck`] forges its ack.
pub const INJECT_AFTER: usize = 1 << 20;

/// What a relay saw, shared with the caller while it runs.
#[derive(Clone, Debug, Default)]
pub struct Capture {
    inner: Arc<Mutex<CaptureInner>>,
}

#[derive(Debug, Default)]
struct CaptureInner {
    client_to_server: Vec<u8>,
    server_to_client: Vec<u8>,
    shares_replaced: u32,
    acks_injected: u32,
    /// Also append client → server bytes here (the testbed's recording eavesdropper).
    file: Option<std::fs::File>,
}

impl Capture {
    /// A capture that also appends the client → server bytes to `file`.
    pub fn with_file(file: std::fs::File) -> Self {
        let c = Self::default();
        c.lock().file = Some(file);
        c
    }

    /// The bytes the client sent through the relay (after any change).
    pub fn client_to_server(&self) -> Vec<u8> {
        self.lock().client_to_server.clone()
    }

    /// The bytes the server sent through the relay.
    pub fn server_to_client(&self) -> Vec<u8> {
        self.lock().server_to_client.clone()
    }

    /// How many shares were replaced.
    pub fn shares_replaced(&self) -> u32 {
        self.lock().shares_replaced
    }

    /// How many acks were forged.
    pub fn acks_injected(&self) -> u32 {
        self.lock().acks_injected
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, CaptureInner> {
        // A poisoned lock only means a relay task panicked mid-append; the bytes are still
        // what was captured.
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Relays every connection accepted on `listener` to `upstream`, forever (spawn it).
///
/// # Errors
/// An accept error.
pub async fn relay(
    listener: TcpListener,
    upstream: SocketAddr,
    mode: Mode,
    capture: Capture,
) -> std::io::Result<()> {
    loop {
        let (client, _) = listener.accept().await?;
        let capture = capture.clone();
        tokio::spawn(async move {
            if let Ok(server) = TcpStream::connect(upstream).await {
                relay_one(client, server, mode, capture).await;
            }
        });
    }
}

async fn relay_one(client: TcpStream, server: TcpStream, mode: Mode, capture: Capture) {
    let (mut cr, mut cw) = client.into_split();
    let (mut sr, mut sw) = server.into_split();
    let cap = capture.clone();
    let inject = Arc::new(tokio::sync::Notify::new());
    let armed = Arc::clone(&inject);
    let down = async move {
        let mut buf = vec![0u8; 64 * 1024];
        let mut pending = mode == Mode::InjectAck;
        loop {
            tokio::select! {
                r = sr.read(&mut buf) => {
                    let n = match r {
                        Ok(n) if n > 0 => n,
                        _ => break,
                    };
                    if cw.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                    cap.lock().server_to_client.extend_from_slice(&buf[..n]);
                }
                () = armed.notified(), if pending => {
                    pending = false;
                    // The server's hello says whether the stream is sealed (its cipher byte); the
                    // clear headers on the path give the next sequence number.
                    let (sealed, next) = {
                        let c = cap.lock();
                        let sealed = c
                            .server_to_client
                            .get(7)
                            .and_then(|&code| crate::Cipher::from_code(code))
                            .is_some_and(crate::Cipher::is_aead);
                        (sealed, segments(&c.server_to_client).len())
                    };
                    if cw.write_all(&forged_ack(sealed, next)).await.is_err() {
                        break;
                    }
                    cap.lock().acks_injected += 1;
                }
            }
        }
        let _ = cw.shutdown().await;
    };
    let up = async move {
        let mut buf = vec![0u8; 64 * 1024];
        // Pending bytes not yet forwarded while the relay still looks for the share.
        let mut held: Vec<u8> = Vec::new();
        let mut looking = mode == Mode::ReplaceShare;
        let mut parsed_hello = false;
        let mut forwarded = 0usize;
        while let Ok(n) = cr.read(&mut buf).await {
            if n == 0 {
                break;
            }
            forwarded += n;
            if mode == Mode::InjectAck && forwarded >= INJECT_AFTER && forwarded - n < INJECT_AFTER
            {
                inject.notify_one();
            }
            let mut out = buf[..n].to_vec();
            if looking {
                held.extend_from_slice(&out);
                out = Vec::new();
                loop {
                    if !parsed_hello {
                        if held.len() < HELLO_LEN {
                            break;
                        }
                        out.extend(held.drain(..HELLO_LEN));
                        parsed_hello = true;
                    }
                    match HandshakeFrame::parse(&held) {
                        Ok(Some((range, end))) => {
                            let msg = replace_share(&held[range]);
                            if let Some(m) = &msg {
                                HandshakeFrame::emit(m, &mut out);
                                capture.lock().shares_replaced += 1;
                                looking = false;
                            } else {
                                out.extend_from_slice(&held[..end]);
                            }
                            held.drain(..end);
                            if !looking {
                                out.append(&mut held);
                                break;
                            }
                        }
                        Ok(None) => break,
                        Err(_) => {
                            // Not our protocol: stop looking, pass everything on.
                            looking = false;
                            out.append(&mut held);
                            break;
                        }
                    }
                }
            }
            if sw.write_all(&out).await.is_err() {
                break;
            }
            let mut c = capture.lock();
            c.client_to_server.extend_from_slice(&out);
            if let Some(f) = c.file.as_mut() {
                use std::io::Write as _;
                let _ = f.write_all(&out);
            }
        }
        let _ = sw.shutdown().await;
    };
    tokio::join!(down, up);
}

/// A forged ack segment (see [`Mode::InjectAck`]).
fn forged_ack(sealed: bool, path_seq: usize) -> Vec<u8> {
    use crate::wire::{HEADER_LEN, Kind, Repr as Seg};
    let tag = if sealed { 16 } else { 0 };
    let repr = Seg {
        kind: Kind::Ack,
        len: tag,
        path_seq: u32::try_from(path_seq).unwrap_or(u32::MAX),
        offset: 1 << 40,
        seg: 1 << 30,
    };
    let mut out = vec![0x42u8; HEADER_LEN + usize::from(tag)];
    repr.emit(&mut out[..HEADER_LEN]);
    out
}

/// The message with its share replaced, if it is a `Share` or a `KemShare`.
fn replace_share(msg: &[u8]) -> Option<Vec<u8>> {
    let mut repr = Repr::parse_bytes(msg).ok()?;
    // The attacker's own share: any valid X25519 point works for the demonstration (this is
    // the public key of scalar 1... times the basepoint, i.e. the basepoint 9).
    let mut share = [0u8; 32];
    share[0] = 9;
    repr.body = match repr.body {
        Body::Share { expiry_secs, .. } => Body::Share { expiry_secs, share },
        // And its own ML-KEM-768 key, whose decapsulation key it would hold.
        Body::KemShare { expiry_secs, .. } => Body::KemShare {
            expiry_secs,
            share,
            kem_key: *KemKeyPair::from_seed(&[0x42; 32], &[0x43; 32]).encapsulation_key(),
        },
        _ => return None,
    };
    let mut out = vec![0u8; repr.buffer_len()];
    let n = repr.emit(&mut out);
    out.truncate(n);
    Some(out)
}

/// The data segments a client sent on one path, from the raw bytes of that connection
/// (client → server, as [`Capture::client_to_server`] or a reassembled TCP stream gives them):
/// `(stream offset, scrambled payload)` per segment. The hello, the handshake frames and the
/// clear segment headers are public, so a passive observer can do this.
pub fn segments_in_capture(bytes: &[u8]) -> Vec<(u64, Vec<u8>)> {
    use crate::wire::{Kind, Segment};
    segments(bytes)
        .into_iter()
        .filter(|(r, _)| r.kind == Kind::Data)
        .map(|(r, seg)| (r.offset, Segment::new_unchecked(seg).payload().to_vec()))
        .collect()
}

/// What a passive analyst made of one path's bytes ([`analyze_path`]).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct PathAnalysis {
    /// The cipher the client's hello asked for (`None`: no hello in the capture).
    pub cipher: Option<crate::Cipher>,
    /// Contiguous runs attacked: `(stream offset, guessed plaintext)`. Scrambled segments that
    /// follow each other in the stream form one run (the scrambler is one stream); each sealed
    /// segment is its own run (tag removed); plain segments are read as they are.
    pub guesses: Vec<(u64, Vec<u8>)>,
    /// How many runs each [`ciphertext_only::Model`] explained best.
    pub models: Vec<(ciphertext_only::Model, usize)>,
}

impl PathAnalysis {
    /// Stream bytes on the path (payload, tags excluded).
    pub fn bytes(&self) -> u64 {
        self.guesses.iter().map(|(_, g)| g.len() as u64).sum()
    }

    /// How many guessed bytes equal the real stream `truth` (the sent file), byte for byte at
    /// their offsets. Used only to score the attack, never by it.
    pub fn recovered(&self, truth: &[u8]) -> u64 {
        self.guesses
            .iter()
            .map(|(off, g)| {
                let start = usize::try_from(*off).unwrap_or(usize::MAX).min(truth.len());
                g.iter()
                    .zip(&truth[start..])
                    .filter(|(a, b)| a == b)
                    .count() as u64
            })
            .sum()
    }
}

/// The ciphertext-only analyst on one path (docs/SCRAMBLER.md, "Security"): from the client →
/// server bytes of one connection (as [`segments_in_capture`] takes them), with no key and no
/// known plaintext, guesses every stream byte the path carried. The hello says which cipher
/// (it is in clear): plain segments are read as they are; scrambled runs and sealed segments
/// (tag removed) go through [`ciphertext_only::recover`], which finds scrambled text and
/// recovers about 1/256 of sealed bytes, by chance.
pub fn analyze_path(bytes: &[u8]) -> PathAnalysis {
    use crate::Cipher;
    let cipher = crate::wire::Hello::parse(bytes)
        .ok()
        .and_then(|h| Cipher::from_code(h.cipher));
    let sealed = cipher.is_some_and(Cipher::is_aead);
    let tag = if sealed {
        crate::wire::CONTROL_TAG_LEN
    } else {
        0
    };
    // Runs: (offset, bytes), adjacent scrambled segments merged.
    let mut runs: Vec<(u64, Vec<u8>)> = Vec::new();
    for (off, payload) in segments_in_capture(bytes) {
        let data = &payload[..payload.len().saturating_sub(tag)];
        match runs.last_mut() {
            Some((start, run)) if !sealed && start.checked_add(run.len() as u64) == Some(off) => {
                run.extend_from_slice(data);
            }
            _ => runs.push((off, data.to_vec())),
        }
    }
    let mut models: Vec<(ciphertext_only::Model, usize)> = Vec::new();
    let guesses = runs
        .into_iter()
        .map(|(off, run)| {
            if cipher == Some(Cipher::None) {
                return (off, run);
            }
            let r = ciphertext_only::recover(&run);
            match models.iter_mut().find(|(m, _)| *m == r.model) {
                Some((_, n)) => *n += 1,
                None => models.push((r.model, 1)),
            }
            (off, r.plaintext)
        })
        .collect();
    PathAnalysis {
        cipher,
        guesses,
        models,
    }
}

/// Every whole segment (data, fin, ack) on one direction of a connection, after its hello,
/// handshake frames and binding tag: the parsed header and the segment's bytes.
fn segments(bytes: &[u8]) -> Vec<(crate::wire::Repr, &[u8])> {
    use crate::wire::{Segment, segment_len};
    let mut rest = bytes.get(HELLO_LEN..).unwrap_or_default();
    // Handshake frames while they hold handshake messages.
    while let Ok(Some((range, end))) = HandshakeFrame::parse(rest) {
        if Repr::parse_bytes(&rest[range]).is_err() {
            break;
        }
        rest = &rest[end..];
    }
    // The binding tag (trusted path).
    if rest.starts_with(&crate::wire::TAG_MARKER) {
        rest = rest
            .get(crate::wire::BINDING_FRAME_LEN..)
            .unwrap_or_default();
    }
    let mut out = Vec::new();
    while let Ok(Some(len)) = segment_len(rest) {
        match crate::wire::Repr::parse(&Segment::new_unchecked(&rest[..len])) {
            Ok(r) => out.push((r, &rest[..len])),
            Err(_) => break,
        }
        rest = &rest[len..];
    }
    out
}

/// The known-plaintext attack on one scrambled run (docs/SCRAMBLER.md): from 65 known
/// plaintext bytes at the start of `scrambled` (a contiguous run, e.g. one segment), recovers
/// the rest of the run with `b[i] = B[i] ^ B[i-1] ^ b[i-65]`, no key needed. Returns the whole
/// run's plaintext (the known bytes first); a run shorter than 65 bytes comes back as given.
pub fn recover_run(scrambled: &[u8], known: &[u8; 65]) -> Vec<u8> {
    if scrambled.len() <= known.len() {
        return known[..scrambled.len()].to_vec();
    }
    let mut b = Vec::with_capacity(scrambled.len());
    b.extend_from_slice(known);
    for i in known.len()..scrambled.len() {
        b.push(scrambled[i] ^ scrambled[i - 1] ^ b[i - 65]);
    }
    b
}

#[cfg(test)]
mod tests {
    use psp_core::scramble::{Scrambler, Seed};

    use super::*;

    /// Hostile captures (the fuzz target's job, one case here): segments at the end of the
    /// offset space do not overflow the run merge.
    #[test]
    fn analyze_path_survives_offsets_at_the_end_of_the_space() {
        use crate::wire::{HELLO_LEN, Hello, Kind, PathRole, Repr as Seg};
        let mut cap = Hello {
            role: PathRole::Untrusted,
            caps: 0,
            cipher: crate::Cipher::Scramble.code(),
            group: [0; 8],
        }
        .emit()
        .to_vec();
        assert_eq!(cap.len(), HELLO_LEN);
        for (i, offset) in [u64::MAX - 1, 0].into_iter().enumerate() {
            let start = cap.len();
            cap.resize(start + crate::wire::HEADER_LEN + 2, b'a');
            Seg {
                kind: Kind::Data,
                len: 2,
                path_seq: i as u32,
                offset,
                seg: i as u32,
            }
            .emit(&mut cap[start..]);
        }
        let a = analyze_path(&cap);
        assert_eq!((a.guesses.len(), a.bytes()), (2, 4));
        assert_eq!(
            a.recovered(b"xyz"),
            a.guesses[1]
                .1
                .iter()
                .zip(b"xy")
                .filter(|(p, q)| p == q)
                .count() as u64
        );
    }

    #[test]
    fn known_65_bytes_recover_a_run_without_the_key() {
        let plain: Vec<u8> = (0..5000u32).map(|i| (i * 31 + i / 7) as u8).collect();
        let mut s = Scrambler::new(&Seed::from_key(b"secret"));
        let mut scrambled = plain.clone();
        s.scramble_in_place(&mut scrambled);
        // A run in the middle of the stream, as one segment on the untrusted path.
        let run = &scrambled[1000..3000];
        let known: [u8; 65] = plain[1000..1065].try_into().unwrap();
        assert_eq!(recover_run(run, &known), &plain[1000..3000]);
        // 64 bytes are not enough to start: with a wrong 65th byte the output is wrong.
        let mut wrong = known;
        wrong[64] ^= 1;
        assert_ne!(recover_run(run, &wrong), &plain[1000..3000]);
    }
}
