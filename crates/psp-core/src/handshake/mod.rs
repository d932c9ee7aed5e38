//! Session establishment: the thesis' Session Establishment Protocol (SEP, §4.4.2) with the
//! SMKEX two-path key exchange (seed 002), sans-I/O.
//!
//! A [`Handshake`] is one run of SEP between two hosts, as initiator or responder. It consumes
//! and produces the *payloads* of PSP sub-protocol frames, each tagged with the [`PathId`] it
//! came from or must go on; the caller seals and opens those frames under the group key, moves
//! them over its paths, and feeds time in. An established handshake yields [`SessionKeys`]: one
//! key per direction for the negotiated suite, a 24-bit key id, the session id and the expiry,
//! ready for a [`KeyRing`] (previous / current / next keys of the data path, rekey triggers,
//! grace period). [`RequestLimiter`] is the per-source token bucket against request floods.
//!
//! | file | what it holds |
//! |---|---|
//! | `messages.rs` | the wire format ([`messages::Message`] view, [`messages::Repr`]) |
//! | `schedule.rs` | the crypto typestate chain (ephemeral → DH → secrets) and the key schedule |
//! | `kem.rs` | ML-KEM-768 for the hybrid post-quantum handshake ([`KemMode`]) |
//! | `machine.rs` | [`Handshake`]: the state machine, retransmission, SMKEX checks |
//! | `keyring.rs` | [`KeyRing`]: the data path's keys across rekeys |
//! | `limiter.rs` | [`RequestLimiter`]: per-source token buckets |
//! | `timestamp.rs` | [`Tai64n`], [`TimestampClock`], [`Freshness`]: Requests a replay cannot renew |
//!
//! This module does no I/O, reads no clock and owns no RNG: randomness comes from the caller's
//! [`rand_core::CryptoRngCore`], drawn once when a handshake is created. It does not store pins
//! or generate long-term keys (the gateway does), and it does not log: every failure ends in
//! exactly one [`Event::Failed`] whose [`FailReason::as_str`] is the counter name, so the driver
//! logs one line per failed handshake. See `docs/SESSIONS.md` for the message diagrams, the
//! state machine, the key schedule and what each attacker gets.

pub mod identity;
pub mod kem;
mod keyring;
mod limiter;
mod machine;
pub mod messages;
pub mod schedule;
mod timestamp;

use core::fmt;
use core::net::IpAddr;

pub use identity::Identity;
pub use keyring::{InstallError, KeyRing, KeyRingConfig, RingOpenError, RingSealError, Slot};
pub use limiter::RequestLimiter;
pub use machine::{Handshake, Ignored};
/// The RNG traits the constructors take (re-exported so callers need not depend on `rand_core`).
pub use rand_core;
pub use schedule::StaticKey;
pub use timestamp::{Freshness, Tai64n, TimestampClock};

use crate::crypto::{KeyError, SuiteId, SuiteKey};
use crate::time::{Duration, Instant};
use crate::wire::{Protocol, SecurityNumber};
use messages::{HandshakeId, KEY_LEN, SuiteList};
use zeroize::Zeroize;

/// One of the (at most two) paths between the hosts. SEP's single-path messages and SMKEX's
/// shares go on [`PathId::FIRST`]; SMKEX's nonces, hash and confirmation on [`PathId::SECOND`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct PathId(pub u8);

impl PathId {
    /// Path 1 (index 0).
    pub const FIRST: Self = Self(0);
    /// Path 2 (index 1).
    pub const SECOND: Self = Self(1);
}

/// Which side of the handshake a host is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// Sent the request (thesis: Alice).
    Initiator,
    /// Answered it (thesis: Bob).
    Responder,
}

/// Whether to run SMKEX over two paths.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum SmkexMode {
    /// Always single-path SEP, as in the thesis.
    Off,
    /// Two paths when both sides have them, else single-path (reported in
    /// [`SessionKeys::two_path`]). An active attacker can force single-path.
    #[default]
    Preferred,
    /// Two paths or no session ([`FailReason::TooFewPaths`]).
    Required,
}

/// Whether to add ML-KEM-768 (FIPS 203) to the key exchange beside X25519: the hybrid
/// post-quantum handshake (docs/SESSIONS.md, "Hybrid post-quantum sessions"). Offered and
/// refused like [`SmkexMode`]: it is used when both sides allow it and one offers it; a side that
/// requires it fails ([`FailReason::KemRequired`]) rather than run without it.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum KemMode {
    /// X25519 only; a Request does not offer the KEM (and a host from before the KEM, which
    /// drops a Request that does, still answers). The default.
    #[default]
    Off,
    /// Offer it, and use it when the peer offers or accepts it; without it if the peer is `Off`.
    Preferred,
    /// Offer it and refuse a session without it ([`FailReason::KemRequired`]).
    Required,
}

/// Handshake settings of one host.
#[derive(Clone, Debug)]
pub struct Config {
    /// Suites in order of preference; as responder, the suites allowed. `none` is chosen only if
    /// both lists hold it.
    pub suites: SuiteList,
    /// SMKEX policy.
    pub smkex: SmkexMode,
    /// ML-KEM-768 policy (the hybrid post-quantum key exchange); off by default.
    pub kem: KemMode,
    /// How many paths this host has to the peer (1 or 2 are used).
    pub paths: u8,
    /// This host's protected MAC address.
    pub local_mac: [u8; 6],
    /// This host's network address (thesis stage 1: the destination must be it).
    pub local_addr: IpAddr,
    /// The prefix length of this host's subnet (the initiator must be on it).
    pub prefix_len: u8,
    /// Session lifetime: the initiator's offer, the responder's maximum.
    pub lifetime: Duration,
    /// The shortest lifetime accepted.
    pub min_lifetime: Duration,
    /// This host's long-term key, if it has one (seed 002 §10.1).
    pub static_key: Option<StaticKey>,
    /// First retransmission timeout (doubles per retry, ±1/8 jitter).
    pub rto: Duration,
    /// The largest retransmission timeout.
    pub max_rto: Duration,
    /// Give up (and, as responder, forget a half-open handshake) after this long.
    pub timeout: Duration,
    /// One round trip instead of three (off: the thesis' flow). Applies only with
    /// [`SmkexMode::Required`] and two paths, and both sides must set it. The initiator sends
    /// its share and nonce with the request; the responder answers with Accept, its share and
    /// the SMKEX hash; and there is no Confirm/ConfirmAck. So [`Event::Established`] means the
    /// keys are derived (and, for the initiator, the SMKEX hash checked), **not** that the peer
    /// holds them, nor, for the responder, that they are secret: an attacker who replaced the
    /// initiator's share on path 1 and reads path 2 computes the responder's keys (the
    /// initiator then fails with `SmkexMismatch`). The caller must confirm the keys over path 2
    /// before it trusts data or sends any (psp-multipath's binding tags do). Meant for a
    /// reliable transport; it survives loss (the flights are
    /// repeated) but a responder answers repeats only until `timeout`.
    pub compact: bool,
    /// This host holds a live session with the peer, which the handshake replaces: the Request
    /// says so (flag 0x08), and a responder that finds it clear knows the initiator lost its
    /// keys (it restarted). Set per handshake by the caller; off by default.
    pub rekey: bool,
    /// This host's certificate (docs/MEMBERSHIP.md), sent in its Request and Accept (flag
    /// 0x10) beside [`static_key`](Self::static_key), if it has one. The handshake only carries
    /// it; the host verifies a peer's.
    pub certificate: Option<messages::CertBytes>,
}

impl Config {
    /// Defaults: aes128-gcm then chacha20-poly1305, SMKEX preferred, ML-KEM off, one path,
    /// lifetime 1 h (minimum 60 s), no long-term key, RTO 250 ms up to 4 s, timeout 15 s, the
    /// thesis' flow (not [`compact`](Self::compact)).
    pub fn new(local_mac: [u8; 6], local_addr: IpAddr, prefix_len: u8) -> Self {
        Self {
            suites: SuiteList::from_suites(&[SuiteId::Aes128Gcm, SuiteId::ChaCha20Poly1305]),
            smkex: SmkexMode::Preferred,
            kem: KemMode::Off,
            paths: 1,
            local_mac,
            local_addr,
            prefix_len,
            lifetime: Duration::from_secs(3600),
            min_lifetime: Duration::from_secs(60),
            static_key: None,
            rto: Duration::from_millis(250),
            max_rto: Duration::from_secs(4),
            timeout: Duration::from_secs(15),
            compact: false,
            rekey: false,
            certificate: None,
        }
    }

    /// Defaults as [`new`](Self::new), for a host on a **stream transport** (e.g.
    /// psp-multipath's TCP connections), where the peers are identified by their connections and
    /// there is no link-layer or network identity: the MACs are [`NO_MAC`], the addresses
    /// [`NO_ADDR`] with prefix length 0. A Request then carries the absent identities (both
    /// MACs all-zero, both addresses `04` and 16 zero bytes), and stage 1 accepts only such a
    /// Request: a responder with real identities refuses it with [`FailReason::NotForUs`] (no
    /// reply), and a stream-transport responder refuses a Request with real identities the same
    /// way. Pair with [`Peer::stream_transport`].
    pub fn stream_transport() -> Self {
        Self::new(NO_MAC, NO_ADDR, 0)
    }
}

/// The absent link-layer identity of a stream transport ([`Config::stream_transport`]).
pub const NO_MAC: [u8; 6] = [0; 6];
/// The absent network identity of a stream transport: the IPv4 unspecified address 0.0.0.0.
pub const NO_ADDR: IpAddr = IpAddr::V4(core::net::Ipv4Addr::UNSPECIFIED);

/// What a host knows about the peer before the handshake.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Peer {
    /// The peer's MAC address (as responder: the source MAC of the request's frame).
    pub mac: [u8; 6],
    /// The peer's network address (initiator only: the request's destination).
    pub addr: IpAddr,
    /// The **X25519 form** of the peer's pinned identity, if any: a different or missing key
    /// fails with [`FailReason::IdentityMismatch`]. Not the Ed25519 public key that
    /// [`Identity::public_key`] returns and `psp-gateway identity` prints: set it with
    /// [`pin_identity`](Self::pin_identity), which converts that key.
    pub pinned_x25519: Option<[u8; KEY_LEN]>,
}

impl Peer {
    /// A peer with MAC `mac` and address `addr`, no identity pinned yet.
    pub fn new(mac: [u8; 6], addr: IpAddr) -> Self {
        Self {
            mac,
            addr,
            pinned_x25519: None,
        }
    }

    /// Pins the peer's identity by its **Ed25519** public key (what [`Identity::public_key`]
    /// returns, what `psp-gateway identity` prints and what `[[peer]] identity` holds).
    ///
    /// # Errors
    /// [`identity::IdentityError::NotAKey`] if the bytes are not a point
    /// of the curve (no key of any host).
    pub fn pin_identity(
        mut self,
        ed25519_public: [u8; 32],
    ) -> Result<Self, identity::IdentityError> {
        self.pinned_x25519 =
            Some(identity::x25519_of(&ed25519_public).ok_or(identity::IdentityError::NotAKey)?);
        Ok(self)
    }

    /// The peer on a stream transport (see [`Config::stream_transport`]): no MAC or address,
    /// only the long-term key to require, if any.
    pub fn stream_transport(pinned_x25519: Option<[u8; KEY_LEN]>) -> Self {
        Self {
            mac: NO_MAC,
            addr: NO_ADDR,
            pinned_x25519,
        }
    }
}

/// Why a handshake produced no session. Each has a static name for counters.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FailReason {
    /// The SMKEX transcript hash on path 2 does not match path 1's view (an active attacker on
    /// one path, or tampering).
    SmkexMismatch,
    /// A key-confirmation tag did not verify (the peers derived different keys).
    ConfirmMismatch,
    /// No answer in time.
    Timeout,
    /// No suite allowed by both sides.
    NoCommonSuite,
    /// Two paths were required and are not available.
    TooFewPaths,
    /// A message with our ids broke the protocol.
    BadMessage,
    /// A long-term key differs from the pinned one, or is missing.
    IdentityMismatch,
    /// Too many requests from this source.
    RateLimited,
    /// The lifetime offer is outside what this host accepts.
    ExpiryRefused,
    /// A DH share is a low-order point.
    BadShare,
    /// Stage 1 refused the request: not on our segment, or not addressed to us (the thesis drops
    /// it without a reply).
    NotForUs,
    /// ML-KEM-768 was required ([`KemMode::Required`]) by one side and the other does not run
    /// it (its mode is [`KemMode::Off`], or it predates the KEM).
    KemRequired,
}

impl FailReason {
    /// The counter name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SmkexMismatch => "smkex_mismatch",
            Self::ConfirmMismatch => "confirm_mismatch",
            Self::Timeout => "timeout",
            Self::NoCommonSuite => "no_common_suite",
            Self::TooFewPaths => "too_few_paths",
            Self::BadMessage => "bad_message",
            Self::IdentityMismatch => "identity_mismatch",
            Self::RateLimited => "rate_limited",
            Self::ExpiryRefused => "expiry_refused",
            Self::BadShare => "bad_share",
            Self::NotForUs => "not_for_us",
            Self::KemRequired => "kem_required",
        }
    }
}

impl fmt::Display for FailReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl core::error::Error for FailReason {}

/// A message to send: `len` bytes at the start of the caller's buffer, as the payload of a PSP
/// sub-protocol frame of type `protocol`, on `path`.
#[must_use]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transmit {
    /// The path it must go on.
    pub path: PathId,
    /// Its length.
    pub len: usize,
    /// The sub-protocol to seal it under ([`Protocol::SessionEstablishment`], or
    /// [`Protocol::KeyExchange`] for the SMKEX second-path messages).
    pub protocol: Protocol,
}

/// The session id: both handshake ids (public; for logs and status).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionId {
    /// The initiator's random id.
    pub initiator: HandshakeId,
    /// The responder's random id.
    pub responder: HandshakeId,
}

/// The output of an established handshake. Keys are zeroized on drop; `Debug` prints no key.
pub struct SessionKeys {
    pub(crate) role: Role,
    pub(crate) suite: SuiteId,
    pub(crate) send: [u8; schedule::MAX_KEY_LEN],
    pub(crate) recv: [u8; schedule::MAX_KEY_LEN],
    pub(crate) key_id: SecurityNumber,
    pub(crate) session_id: SessionId,
    pub(crate) established_at: Instant,
    pub(crate) lifetime: Duration,
    pub(crate) two_path: bool,
    pub(crate) kem: bool,
    pub(crate) peer_static: Option<[u8; KEY_LEN]>,
}

impl SessionKeys {
    /// This host's role in the handshake.
    pub fn role(&self) -> Role {
        self.role
    }

    /// The negotiated suite.
    pub fn suite(&self) -> SuiteId {
        self.suite
    }

    /// The key this host seals under (initiator: `k_i2r`).
    ///
    /// # Errors
    /// As [`SuiteKey::new`] (never for a key from a handshake).
    pub fn send_key(&self) -> Result<SuiteKey, KeyError> {
        SuiteKey::new(self.suite, &self.send[..self.suite.key_len()])
    }

    /// The key this host opens under (initiator: `k_r2i`).
    ///
    /// # Errors
    /// As [`SuiteKey::new`] (never for a key from a handshake).
    pub fn recv_key(&self) -> Result<SuiteKey, KeyError> {
        SuiteKey::new(self.suite, &self.recv[..self.suite.key_len()])
    }

    /// The 24-bit key id both directions carry in the PSP security-number field, so a receiver
    /// picks the right key during a rekey without trial decryption.
    pub fn key_id(&self) -> SecurityNumber {
        self.key_id
    }

    /// The first sequence number to seal with: 0 (the keys are new, so no nonce can repeat).
    pub fn initial_seq(&self) -> crate::wire::Seq {
        crate::wire::Seq(0)
    }

    /// The session id.
    pub fn session_id(&self) -> SessionId {
        self.session_id
    }

    /// When the handshake completed on this host.
    pub fn established_at(&self) -> Instant {
        self.established_at
    }

    /// The negotiated lifetime.
    pub fn lifetime(&self) -> Duration {
        self.lifetime
    }

    /// When the session expires on this host's clock: nothing may be sealed under it after.
    pub fn expires_at(&self) -> Instant {
        self.established_at + self.lifetime
    }

    /// Whether SMKEX ran over two paths (`false`: single-path SEP, as in the thesis).
    pub fn two_path(&self) -> bool {
        self.two_path
    }

    /// Whether ML-KEM-768 was in the key schedule (a hybrid post-quantum session).
    pub fn kem(&self) -> bool {
        self.kem
    }

    /// The peer's long-term public key, if it announced one (for TOFU pinning by the caller).
    pub fn peer_static(&self) -> Option<[u8; KEY_LEN]> {
        self.peer_static
    }

    /// Derives `out.len()` bytes of keying material for another use of this session (e.g.
    /// psp-multipath's scrambler seeds), bound to `label`: HKDF-SHA-256 with salt
    /// `"psp-sep-v1 exporter"`, input `k_i2r || k_r2i` and info `label`. Both hosts get the same
    /// bytes for the same label; different labels give independent outputs, and the outputs do
    /// not reveal the session keys.
    ///
    /// # Errors
    /// [`ExportError::NoKey`] if the suite has no key (`none`: there is nothing secret to export
    /// from); [`ExportError::TooLong`] if `out` is longer than 255 * 32 bytes (HKDF's limit).
    pub fn export(&self, label: &[u8], out: &mut [u8]) -> Result<(), ExportError> {
        let len = self.suite.key_len();
        if len == 0 {
            return Err(ExportError::NoKey);
        }
        let (i2r, r2i) = match self.role {
            Role::Initiator => (&self.send[..len], &self.recv[..len]),
            Role::Responder => (&self.recv[..len], &self.send[..len]),
        };
        crate::crypto::hmac_sha256::Hkdf::extract(EXPORTER_SALT, &[i2r, r2i])
            .expand(&[label], out)
            .map_err(|_| ExportError::TooLong)
    }
}

impl Drop for SessionKeys {
    #[inline(never)]
    fn drop(&mut self) {
        self.send.zeroize();
        self.recv.zeroize();
    }
}

impl fmt::Debug for SessionKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SessionKeys")
            .field("role", &self.role)
            .field("suite", &self.suite)
            .field("key_id", &self.key_id)
            .field("session_id", &self.session_id)
            .field("two_path", &self.two_path)
            .field("kem", &self.kem)
            .finish_non_exhaustive()
    }
}

/// The HKDF salt of [`SessionKeys::export`].
const EXPORTER_SALT: &[u8] = b"psp-sep-v1 exporter";

/// Why [`SessionKeys::export`] produced nothing.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExportError {
    /// The session's suite (`none`) has no key to export from.
    NoKey,
    /// More than 255 * 32 bytes were asked for.
    TooLong,
}

impl fmt::Display for ExportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::NoKey => "the session has no key to export from",
            Self::TooLong => "too much keying material asked for",
        })
    }
}

impl core::error::Error for ExportError {}

/// What a handshake reports.
#[derive(Debug)]
pub enum Event {
    /// The session is established; install the keys (e.g. [`KeyRing::install`]).
    Established(SessionKeys),
    /// No session; the handshake is over. The driver counts `reason.as_str()` and logs one line.
    Failed(FailReason),
}
