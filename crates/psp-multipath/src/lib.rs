//! # psp-multipath
//!
//! One byte stream dispersed over a **trusted** and an **untrusted** path (seeds 000/001: their
//! Ethernet and WLAN), the first segment always on the trusted path, keyed by the SMKEX
//! two-path handshake of `psp_core::handshake` (seed 002) run over both paths, so no key ever
//! crosses one path. Each segment is sealed with AES-128-GCM ([`Cipher::Aes128Gcm`], the
//! default) or ChaCha20-Poly1305, or the whole stream is scrambled as the papers do
//! ([`Cipher::Scramble`], named on both sides; obfuscation without integrity, which a
//! ciphertext-only analyst on one path reads: docs/SCRAMBLER.md), or sent in clear.
//!
//! Layers:
//! - [`proto`]: the protocol, sans-I/O: [`proto::Setup`] (hellos, handshake, binding tags,
//!   stream keys) and [`proto::Connection`] (segments, share policy, acks, re-sending,
//!   reassembly). Bytes in and out per path, time as an argument, randomness from the caller.
//! - [`wire`]: the byte layouts (hello, handshake framing, segment header, AEAD associated
//!   data); normatively in docs/MULTIPATH.md, with end-to-end vectors.
//! - [`connect`], [`Listener`], [`MultipathStream`]: the tokio driver over TCP (one connection
//!   per path, or one MPTCP socket in [`Mode::KernelMptcp`]).
//!
//! All cryptography and the handshake state machine are psp-core's. A path that fails ends the
//! stream with [`Error::PathFailed`], unless [`Options::on_path_failure`] is
//! [`OnPathFailure::Continue`]: then the sender re-sends what the receiver has not
//! acknowledged on the remaining path (refused by default when that path is the untrusted one
//! and the stream is scrambled or plain: [`Error::UntrustedOnly`]).
//!
//! What it protects, and what not (docs/MULTIPATH.md has the threat model):
//! - with an AEAD cipher, an eavesdropper on one or both paths reads nothing but sizes, timing
//!   and the path share, and an active attacker on one path cannot change a byte undetected;
//! - with `scramble`, an eavesdropper on the untrusted path reads text-like data from its
//!   share of the stream without key or known plaintext, and an active attacker there can flip
//!   bits undetected;
//! - an active attacker on one path who replaces an SMKEX share is detected (the set-up fails)
//!   before any data flows;
//! - an active attacker on **both** paths can run the key exchange with each side and read
//!   everything, unless the peer's long-term key is pinned ([`Options::static_key`],
//!   [`Options::pinned_peer`]);
//! - a recording of both paths gives up the stream to an attacker who later breaks X25519 (a
//!   quantum computer), unless both sides set [`Options::kem`] (ML-KEM-768 beside X25519);
//! - in [`Mode::KernelMptcp`] the kernel places every byte, the key exchange's too: none of
//!   the two-path properties above is guaranteed there.
//!
//! The listener's cipher is a requirement: a client asking for another is refused on both
//! sides ([`Error::CipherRequired`], [`Error::CipherRefused`]); plain is chosen only in the
//! papers' fallback (`scramble` asked for, one side without the scramble capability, both
//! allowing plain).
//!
//! ```no_run
//! use psp_multipath::{Options, Path, connect};
//! use tokio::io::AsyncWriteExt;
//!
//! # async fn demo() -> Result<(), Box<dyn core::error::Error>> {
//! let paths = [
//!     Path::trusted("10.1.0.1:0".parse()?, "10.1.0.2:7000".parse()?),
//!     Path::untrusted("10.2.0.1:0".parse()?, "10.2.0.2:7001".parse()?),
//! ];
//! let mut stream = connect(&paths, &Options::default()).await?;
//! stream.write_all(b"0123456789").await?;
//! stream.shutdown().await?; // flushes both paths and ends the stream
//! # Ok(()) }
//! ```
//!
//! A runnable round trip on loopback:
//!
//! ```
//! use psp_multipath::{Listener, Options, Path, connect};
//! use tokio::io::{AsyncReadExt, AsyncWriteExt};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), psp_multipath::Error> {
//! let any = "127.0.0.1:0".parse().unwrap();
//! let mut listener = Listener::bind(&[Path::listen_trusted(any), Path::listen_untrusted(any)]).await?;
//! let paths = listener.connect_paths();
//! let server = tokio::spawn(async move {
//!     let mut s = listener.accept(&Options::default()).await?;
//!     let mut got = Vec::new();
//!     s.read_to_end(&mut got).await.map_err(|e| psp_multipath::Error::io(None, e))?;
//!     Ok::<_, psp_multipath::Error>(got)
//! });
//! let mut c = connect(&paths, &Options::default()).await?;
//! c.write_all(&b"0123456789".repeat(10_000)).await.unwrap();
//! c.shutdown().await.unwrap();
//! assert_eq!(server.await.unwrap()?, b"0123456789".repeat(10_000));
//! assert!(c.stats()[0].bytes_sent > 0 && c.stats()[1].bytes_sent > 0); // both paths used
//! # Ok(()) }
//! ```
//!
//! MSRV: the workspace's (`rust-version`). Needs `std` (tokio, sockets). Linux only for the
//! `TCP_INFO` and MPTCP counters (elsewhere they read `None`).
//!
//! | feature | what it adds |
//! |---|---|
//! | `attack` | `attack`: the on-path relays (record, replace a share, forge an ack), the 65-known-bytes recovery and the ciphertext-only analyst, for the tests, the fuzzer and `psp-mp`'s testbed commands; not part of the protocol |

use core::fmt;
use core::net::SocketAddr;
use core::time::Duration;
use std::io;

use psp_core::handshake::FailReason;
/// The ML-KEM-768 policy of [`Options::kem`] (psp-core's).
pub use psp_core::handshake::KemMode;

#[cfg(feature = "attack")]
pub mod attack;
mod clock;
pub mod proto;
mod rng;
mod stream;
mod sys;
mod tcp;
pub mod wire;

pub use stream::MultipathStream;
pub use tcp::{Listener, connect, listen};
pub use wire::{Cipher, PathRole};

/// Index of the untrusted path in `[_; 2]` arrays ([`MultipathStream::stats`]).
pub const UNTRUSTED: usize = 0;
/// Index of the trusted path in `[_; 2]` arrays.
pub const TRUSTED: usize = 1;

/// One path: its role and the addresses (local to bind, remote to connect to), optionally a
/// network interface to bind to (`SO_BINDTODEVICE`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Path {
    /// Trusted or untrusted.
    pub role: PathRole,
    /// The local address (connect: source, port 0 for any; listen: where to listen).
    pub local: Option<SocketAddr>,
    /// The peer's address (connect only).
    pub remote: Option<SocketAddr>,
    /// An interface to bind the socket to, e.g. `"wlan0"`.
    pub device: Option<String>,
}

impl Path {
    /// A trusted path from `local` to `remote`.
    pub fn trusted(local: SocketAddr, remote: SocketAddr) -> Self {
        Self::new(PathRole::Trusted, Some(local), Some(remote))
    }

    /// An untrusted path from `local` to `remote`.
    pub fn untrusted(local: SocketAddr, remote: SocketAddr) -> Self {
        Self::new(PathRole::Untrusted, Some(local), Some(remote))
    }

    /// A trusted path to listen on at `local`.
    pub fn listen_trusted(local: SocketAddr) -> Self {
        Self::new(PathRole::Trusted, Some(local), None)
    }

    /// An untrusted path to listen on at `local`.
    pub fn listen_untrusted(local: SocketAddr) -> Self {
        Self::new(PathRole::Untrusted, Some(local), None)
    }

    /// A path with the given parts and no device.
    pub fn new(role: PathRole, local: Option<SocketAddr>, remote: Option<SocketAddr>) -> Self {
        Self {
            role,
            local,
            remote,
            device: None,
        }
    }
}

/// How segments after the first are spread over the paths. The untrusted path's share is a
/// **security** parameter (what an eavesdropper there gets to see, scrambled) as much as a
/// throughput one; the first segment always goes on the trusted path.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SharePolicy {
    /// Exactly this many per mille of the payload bytes on the untrusted path (deficit round
    /// robin over segments); a slow path slows the stream.
    Fixed {
        /// Per mille of payload bytes on the untrusted path (0..=1000).
        untrusted_permille: u16,
    },
    /// Each segment goes on a path whose socket has room (as MPTCP's scheduler does), but the
    /// untrusted path never carries more than this share; a slow untrusted path carries less.
    Adaptive {
        /// The most per mille of payload bytes the untrusted path may carry (0..=1000).
        max_untrusted_permille: u16,
    },
}

impl Default for SharePolicy {
    /// Adaptive, at most half on the untrusted path.
    fn default() -> Self {
        Self::Adaptive {
            max_untrusted_permille: 500,
        }
    }
}

/// How the stream reaches the paths.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Mode {
    /// One TCP connection per path; this crate places every segment (the papers' guarantee:
    /// first segment trusted, share policy) and runs SMKEX over both paths.
    #[default]
    Dispersal,
    /// One `IPPROTO_MPTCP` socket whose initial subflow is bound to the trusted path; further
    /// subflows come from `ip mptcp endpoint`. **The kernel decides placement** (it cannot pin
    /// data to a subflow and may reinject on any), so neither the first-segment rule nor the
    /// share holds. The compact key exchange (default) runs SMKEX with both of its paths on
    /// the one connection, so its two-path check guards against nothing the kernel does not
    /// happen to split (docs/MULTIPATH.md, "Kernel MPTCP mode"); the thesis flow runs
    /// single-path SEP. Either is safe against passive observers only. See
    /// [`MultipathStream::subflows`].
    KernelMptcp,
}

/// What a stream does when one of its two paths fails (a reset, a close without the stream's
/// fin, a write error, or no answer within [`Options::path_timeout`]).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum OnPathFailure {
    /// End the stream with [`Error::PathFailed`] (default).
    #[default]
    Close,
    /// Go on over the other path: the sender keeps each segment until the receiver acknowledges
    /// it (at most [`RETAIN_LIMIT`] bytes; writes wait when full) and re-sends the unacknowledged
    /// ones on the remaining path; the receiver drops duplicates. No byte is lost or repeated.
    Continue {
        /// Whether the stream may go on over the **untrusted path alone** when the trusted one
        /// fails and the cipher is `scramble` or `none`. Off by default, because then every
        /// segment is in the untrusted path's view: with `none` the eavesdropper there reads the
        /// stream, with `scramble` it reads text-like data from the ciphertext alone and all of
        /// a segment from 65 known bytes. With an AEAD cipher going on is safe and this flag is
        /// not needed.
        allow_untrusted_only: bool,
    },
}

/// The most a sender keeps unacknowledged under [`OnPathFailure::Continue`] (16 MiB: segments
/// as sent, headers and tags included, plus 256 bytes charged per segment); also, plus two
/// receive buffers, the most a receiver under its own `Continue` policy holds out of order
/// (after a path failed, or stalled for 100 ms while its peer re-sends), charged the same way:
/// at most about 60,000 segments. A receiver under `Close` never holds any out of order.
pub const RETAIN_LIMIT: usize = proto::RETAIN_LIMIT;

/// A long-term X25519 secret ([`Options::static_key`]). Zeroized on drop; `Debug` prints no
/// key material.
#[derive(Clone)]
pub struct LongTermKey([u8; 32]);

impl LongTermKey {
    /// The key for 32 secret bytes (e.g. from the OS RNG, stored by the caller).
    pub fn from_bytes(secret: [u8; 32]) -> Self {
        Self(secret)
    }

    /// Its public key, for the peer to pin.
    pub fn public_key(&self) -> [u8; 32] {
        psp_core::handshake::StaticKey::from_bytes(self.0).public_key()
    }

    pub(crate) fn secret(&self) -> [u8; 32] {
        self.0
    }
}

impl Drop for LongTermKey {
    #[inline(never)]
    fn drop(&mut self) {
        zeroize::Zeroize::zeroize(&mut self.0);
    }
}

impl fmt::Debug for LongTermKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("LongTermKey(..)")
    }
}

/// Connection options (both sides).
#[derive(Clone, Debug)]
pub struct Options {
    /// Dispersal (default) or kernel MPTCP.
    pub mode: Mode,
    /// The stream protection to ask for (initiator) or to require (responder: a client asking
    /// for another is refused, [`Error::CipherRequired`]). Default [`Cipher::Aes128Gcm`];
    /// [`Cipher::Scramble`] is the papers' mode and must be named on both sides.
    pub cipher: Cipher,
    /// With `cipher: Scramble` on both sides: run the stream in clear when one side lacks the
    /// scramble capability (the papers' fallback; default: refuse). It never turns another
    /// cipher into plain. A side whose `cipher` is `None` announces it too.
    pub allow_plain: bool,
    /// Announce the scramble capability (the papers' MP_CAPABLE bit). Only `false` to play a
    /// peer without it, as the tests do.
    pub advertise_scramble: bool,
    /// How the stream is spread over the paths.
    pub share: SharePolicy,
    /// The largest segment payload in bytes (at most 16384).
    pub segment_len: usize,
    /// The longest set-up (connect, hellos, SMKEX, binding) may take.
    pub handshake_timeout: Duration,
    /// This host's long-term X25519 secret, mixed into the key exchange (seed 002 §10): with
    /// the peer pinning its public key, an active attacker on **both** paths is refused.
    pub static_key: Option<LongTermKey>,
    /// The peer's long-term public key to require (`Error::Handshake(IdentityMismatch)` for
    /// another or none). Learn it on first use from [`MultipathStream::peer_static`] (TOFU).
    pub pinned_peer: Option<[u8; 32]>,
    /// What to do when a path fails during the stream (default: close the stream).
    pub on_path_failure: OnPathFailure,
    /// Under [`OnPathFailure::Continue`]: how long sent data may stay unacknowledged by TCP on
    /// a path (`TCP_USER_TIMEOUT`; Linux counts a zero window too, so keep it above the longest
    /// pause of the reading application), and about how long an idle path may stay silent to
    /// keepalive probes, before the path counts as failed (dispersal mode; default 10 s).
    pub path_timeout: Duration,
    /// Initiator: the one-round-trip key exchange (default; `psp_core::handshake::Config::compact`:
    /// the SEP offer travels with the SMKEX share and nonce, the binding tags confirm the keys)
    /// instead of the thesis' three round trips (SEP Request/Accept, SMKEX, Confirm/ConfirmAck),
    /// kept for comparison. A responder serves both. In [`Mode::KernelMptcp`] the compact flow
    /// carries both SMKEX paths on the one connection and the thesis flow is single-path SEP.
    pub compact_handshake: bool,
    /// ML-KEM-768 beside X25519 in the key exchange (psp-core's hybrid post-quantum handshake,
    /// `psp_core::handshake::Config::kem`; docs/SESSIONS.md "Hybrid post-quantum sessions"):
    /// [`KemMode::Off`] (default), [`KemMode::Preferred`] (used when the peer runs it too),
    /// [`KemMode::Required`] (no stream without it: [`Error::Handshake`]`(KemRequired)`).
    /// [`MultipathStream::kem`] says whether a stream has it.
    pub kem: KemMode,
}

impl Default for Options {
    /// AES-128-GCM, refuse plain, default share policy, 16 KiB segments, 10 s set-up, no
    /// long-term keys, the one-round-trip key exchange, X25519 only (no ML-KEM).
    fn default() -> Self {
        Self {
            mode: Mode::Dispersal,
            cipher: Cipher::Aes128Gcm,
            allow_plain: false,
            advertise_scramble: true,
            share: SharePolicy::default(),
            segment_len: 16 * 1024,
            handshake_timeout: Duration::from_secs(10),
            static_key: None,
            pinned_peer: None,
            on_path_failure: OnPathFailure::Close,
            path_timeout: Duration::from_secs(10),
            compact_handshake: true,
            kem: KemMode::Off,
        }
    }
}

/// Counters of one path (per-path sequence numbers are checked on receive; a gap ends the
/// stream).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PathStats {
    /// Which path.
    pub role: PathRole,
    /// Our address on it.
    pub local: Option<SocketAddr>,
    /// The peer's address on it.
    pub peer: Option<SocketAddr>,
    /// Stream (payload) bytes sent on it.
    pub bytes_sent: u64,
    /// Stream bytes received on it and delivered.
    pub bytes_received: u64,
    /// Data segments sent.
    pub segments_sent: u64,
    /// Data segments delivered.
    pub segments_received: u64,
    /// Bytes handed to the socket (headers and tags included).
    pub wire_bytes_sent: u64,
    /// Bytes parsed from the socket (headers and tags included).
    pub wire_bytes_received: u64,
    /// The kernel's smoothed RTT in µs (`TCP_INFO`), when read.
    pub rtt_us: Option<u32>,
    /// The kernel's retransmitted segments (`TCP_INFO` total_retrans), i.e. loss on the path.
    pub retransmits: Option<u32>,
    /// Acks sent on this path.
    pub acks_sent: u64,
    /// Acks received on this path and applied.
    pub acks_received: u64,
    /// Acks received on this path and ignored: unprotected acks (`scramble`, `none`) on the
    /// untrusted path while the trusted one works, which an attacker there could have forged.
    pub acks_ignored: u64,
    /// Segments of the other (failed) path re-sent on this one.
    pub segments_resent: u64,
    /// Stream bytes of those segments.
    pub bytes_resent: u64,
    /// Segments received on this path that were already delivered (re-sent copies), dropped.
    pub duplicates_dropped: u64,
    /// If this path failed: when and why.
    pub failure: Option<PathFailure>,
}

/// When and why a path failed ([`PathStats::failure`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PathFailure {
    /// Time since the stream was set up.
    pub after: Duration,
    /// What happened (the socket error, or the peer's close).
    pub reason: String,
    /// Whether the stream went on over the other path.
    pub continued: bool,
}

impl PathStats {
    pub(crate) fn new(role: PathRole) -> Self {
        Self {
            role,
            local: None,
            peer: None,
            bytes_sent: 0,
            bytes_received: 0,
            segments_sent: 0,
            segments_received: 0,
            wire_bytes_sent: 0,
            wire_bytes_received: 0,
            rtt_us: None,
            retransmits: None,
            acks_sent: 0,
            acks_received: 0,
            acks_ignored: 0,
            segments_resent: 0,
            bytes_resent: 0,
            duplicates_dropped: 0,
            failure: None,
        }
    }
}

/// Where one side's set-up time went ([`MultipathStream::setup_profile`]), by the driver's
/// clock, each reading taken after the work it ends. `handshake` is `first_flight + reply +
/// keys`; what follows `binding` (building the stream) is in none of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SetupProfile {
    /// TCP (or MPTCP) connects, both paths in parallel (initiator; zero on the responder).
    pub connect: Duration,
    /// From the set-up's start to the handshake's keys (hellos, SEP, SMKEX).
    pub handshake: Duration,
    /// From the keys to the set-up's end: our binding tag written, the peer's read and checked,
    /// the stream keys derived. Zero-ish when the peer's tag came with its last handshake
    /// message (the compact flow's initiator): that work is then in `keys`.
    pub binding: Duration,
    /// From the start until this side's first write was handed to the socket(s) (initiator:
    /// the ephemeral keys, ML-KEM key generation included, and writing the hellos and the
    /// first flight).
    pub first_flight: Duration,
    /// From that write until the first bytes of the peer's answer were read (the network's
    /// round trip and the peer's work).
    pub reply: Duration,
    /// From those bytes until the read that completed the handshake was processed (the rest
    /// of the answer, parsing, DH, ML-KEM decapsulation, transcript hash, key schedule, our
    /// binding tag).
    pub keys: Duration,
}

/// One MPTCP subflow in kernel MPTCP mode, as the kernel reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Subflow {
    /// Its local address.
    pub local: Option<SocketAddr>,
    /// Its remote address.
    pub remote: Option<SocketAddr>,
    /// Bytes the peer acknowledged on it (`tcpi_bytes_acked`): what the kernel placed there.
    pub bytes_acked: u64,
    /// Bytes received on it.
    pub bytes_received: u64,
    /// Smoothed RTT in µs.
    pub rtt_us: u32,
    /// Retransmitted segments.
    pub retransmits: u32,
}

/// Why a connection could not be set up or a stream ended.
#[non_exhaustive]
#[derive(Debug)]
pub enum Error {
    /// A socket error (on a path, if known).
    Io {
        /// The path, if the error is tied to one.
        path: Option<PathRole>,
        /// The OS error.
        source: io::Error,
    },
    /// The peer sent bytes that do not parse.
    Wire {
        /// The path, if known.
        path: Option<PathRole>,
        /// What was wrong.
        error: wire::Error,
    },
    /// The SMKEX handshake failed (`smkex_mismatch`: an active attacker on one path).
    Handshake(FailReason),
    /// The hellos seen by the two sides differ (tampered in transit): the binding tag did not
    /// verify.
    BindMismatch,
    /// Negotiation refused the connection (e.g. the peer cannot scramble and plain is not
    /// allowed).
    Refused(&'static str),
    /// The peer broke the protocol.
    Protocol(&'static str),
    /// A segment, fin or ack did not authenticate (AEAD ciphers).
    Auth {
        /// The path it came on.
        path: PathRole,
    },
    /// A path failed during the stream.
    PathFailed {
        /// Which.
        path: PathRole,
        /// Why.
        reason: String,
    },
    /// The trusted path failed and going on over the untrusted path alone would show the whole
    /// stream to an eavesdropper there (cipher `scramble` or `none`, and
    /// [`OnPathFailure::Continue`]'s `allow_untrusted_only` is off).
    UntrustedOnly {
        /// The stream's cipher.
        cipher: Cipher,
        /// Why the trusted path failed.
        reason: String,
    },
    /// Responder: the initiator asked for another cipher than the one this side requires
    /// ([`Options::cipher`]); the initiator was told (refusal code in the hello).
    CipherRequired {
        /// What the initiator asked for.
        wanted: Cipher,
        /// What this side requires.
        required: Cipher,
    },
    /// Initiator: the responder refused the cipher we asked for (`chosen: None`), or chose
    /// another (never taken, whatever `allow_plain` says, except plain in the papers' fallback
    /// for `scramble`).
    CipherRefused {
        /// What we asked for.
        wanted: Cipher,
        /// What the peer chose instead, if it did not refuse.
        chosen: Option<Cipher>,
    },
    /// Set-up took longer than [`Options::handshake_timeout`].
    Timeout,
    /// The paths given are not one trusted and one untrusted, or lack an address.
    Config(&'static str),
}

impl Error {
    /// An I/O error on `path`.
    pub fn io(path: Option<PathRole>, source: io::Error) -> Self {
        Self::Io { path, source }
    }

    /// The `io::ErrorKind` the stream reports this as.
    fn io_kind(&self) -> io::ErrorKind {
        match self {
            Self::Io { source, .. } => source.kind(),
            Self::Timeout => io::ErrorKind::TimedOut,
            Self::PathFailed { .. } | Self::UntrustedOnly { .. } => {
                io::ErrorKind::ConnectionAborted
            }
            _ => io::ErrorKind::InvalidData,
        }
    }
}

fn path_name(p: Option<PathRole>) -> &'static str {
    match p {
        Some(PathRole::Trusted) => " on the trusted path",
        Some(PathRole::Untrusted) => " on the untrusted path",
        None => "",
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Io { path, source } => write!(f, "{source}{}", path_name(*path)),
            Self::Wire { path, error } => write!(f, "bad bytes{}: {error}", path_name(*path)),
            Self::Handshake(FailReason::KemRequired) => f.write_str(
                "key exchange failed: kem_required (one side requires ML-KEM-768 and the other \
                 runs without it: give both sides --kem prefer or require, or neither --kem \
                 require)",
            ),
            Self::Handshake(r) => write!(f, "key exchange failed: {r}"),
            Self::BindMismatch => f.write_str("hello binding tag mismatch (tampered set-up)"),
            Self::Refused(why) => write!(f, "refused: {why}"),
            Self::Protocol(why) => write!(f, "protocol error: {why}"),
            Self::Auth { path } => {
                write!(f, "segment failed authentication{}", path_name(Some(*path)))
            }
            Self::PathFailed { path, reason } => {
                write!(f, "path failed{}: {reason}", path_name(Some(*path)))
            }
            Self::UntrustedOnly { cipher, reason } => write!(
                f,
                "the trusted path failed ({reason}); refusing to go on over the untrusted path \
                 alone with cipher {}, where an eavesdropper would see the whole stream \
                 (allow_untrusted_only / --allow-untrusted-only, or use aes128-gcm)",
                cipher.name()
            ),
            Self::CipherRequired { wanted, required } => write!(
                f,
                "refused: the client asks for cipher {wanted}, this side requires {required} \
                 (give both sides the same --cipher)"
            ),
            Self::CipherRefused {
                wanted,
                chosen: None,
            } => write!(
                f,
                "refused by the peer: it does not serve cipher {wanted} (a listener serves only \
                 its own --cipher; give both sides the same)"
            ),
            Self::CipherRefused {
                wanted,
                chosen: Some(c),
            } => write!(
                f,
                "refused: we asked for cipher {wanted} and the peer chose {c} (give both sides \
                 the same --cipher)"
            ),
            Self::Timeout => f.write_str("set-up timed out"),
            Self::Config(why) => write!(f, "bad configuration: {why}"),
        }
    }
}

impl core::error::Error for Error {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            Self::Io { source, .. } => Some(source),
            Self::Wire { error, .. } => Some(error),
            Self::Handshake(r) => Some(r),
            _ => None,
        }
    }
}
