//! Wire format of the handshake messages: a zero-copy view ([`Message`]) and a value type
//! ([`Repr`]) per message, in the smoltcp style of [`crate::wire`].
//!
//! Each message is the *payload* of a PSP sub-protocol frame (0x0001 session establishment, or
//! 0x0004 key exchange for the SMKEX second-path messages); the caller seals and opens those
//! frames under the group key. This module only knows byte layouts.
//!
//! Every message starts with an 18-byte header:
//!
//! ```text
//!  0        1        2                  10                 18
//! +--------+--------+------------------+------------------+----------- - -
//! | version|  type  | initiator id (8) | responder id (8) | body
//! +--------+--------+------------------+------------------+----------- - -
//! ```
//!
//! Panic contract as in [`crate::wire`]: after [`Message::new_checked`] no accessor panics;
//! [`Repr::parse`] never panics; [`Repr::emit`] panics only on a buffer shorter than
//! [`Repr::buffer_len`].

use core::fmt;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::Tai64n;
use crate::crypto::SuiteId;

use crate::wire::enum_with_unknown;

/// The handshake protocol version this implementation speaks.
pub const VERSION: u8 = 2;
/// Length of the common header.
pub const HEADER_LEN: usize = field::BODY;
/// The longest message: a [`MessageType::KemShare`] (1,238 bytes). The longest Request (an
/// offer of [`MAX_SUITES`] suites with a static key and a certificate) is 503.
pub const MAX_MESSAGE_LEN: usize = max(MAX_REQUEST_LEN, KEM_SHARE_LEN);
/// The longest Request: [`MAX_SUITES`] suites, a static key and a certificate of
/// [`MAX_CERT_LEN`] bytes.
pub const MAX_REQUEST_LEN: usize =
    HEADER_LEN + REQUEST_FIXED_LEN + MAX_SUITES + KEY_LEN + 2 + MAX_CERT_LEN;
/// The length of a [`MessageType::KemShare`]: header, lifetime, X25519 share, ML-KEM-768
/// encapsulation key.
pub const KEM_SHARE_LEN: usize = HEADER_LEN + 4 + KEY_LEN + KEM_KEY_LEN;
/// The length of a [`MessageType::KemShareReply`]: header, lifetime, X25519 share, ML-KEM-768
/// ciphertext.
pub const KEM_SHARE_REPLY_LEN: usize = HEADER_LEN + 4 + KEY_LEN + KEM_CIPHERTEXT_LEN;
/// Length of an ML-KEM-768 encapsulation key (FIPS 203, Table 3: 384·k + 32, k = 3).
pub const KEM_KEY_LEN: usize = 1184;
/// Length of an ML-KEM-768 ciphertext (FIPS 203, Table 3: 32·(d_u·k + d_v), d_u = 10, d_v = 4).
pub const KEM_CIPHERTEXT_LEN: usize = 1088;
/// The longest certificate a Request or Accept carries ([`crate::pki::MAX_CERT_LEN`]).
pub const MAX_CERT_LEN: usize = crate::pki::MAX_CERT_LEN;
/// At most this many suites in an offer.
pub const MAX_SUITES: usize = 8;
/// Length of an X25519 public key (a share or a long-term key).
pub const KEY_LEN: usize = 32;
/// Length of an SMKEX nonce.
pub const NONCE_LEN: usize = 32;
/// Length of the SMKEX transcript hash and of a confirmation tag (SHA-256).
pub const HASH_LEN: usize = 32;

// Request body before the suite list: timestamp, flags, paths, 2 MACs, 2 addresses, suite count.
const REQUEST_FIXED_LEN: usize = Tai64n::LEN + 1 + 1 + 6 + 6 + ADDR_LEN + ADDR_LEN + 1;
const ADDR_LEN: usize = 17;

const fn max(a: usize, b: usize) -> usize {
    if a > b { a } else { b }
}

mod field {
    use core::ops::Range;

    pub(super) const VERSION: usize = 0;
    pub(super) const TYPE: usize = 1;
    pub(super) const INITIATOR_ID: Range<usize> = 2..10;
    pub(super) const RESPONDER_ID: Range<usize> = 10..18;
    pub(super) const BODY: usize = 18;
}

/// A handshake message could not be parsed.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Error {
    /// Shorter than the header or than the body its type needs.
    Truncated,
    /// Longer than its type allows (trailing bytes are refused, so each message has one
    /// encoding and the transcript hash is well defined).
    TrailingBytes,
    /// A version other than [`VERSION`].
    BadVersion,
    /// An unknown message type.
    UnknownType,
    /// A field holds a value it may not (reserved flag bits, an unknown address family, a
    /// non-zero address pad, a suite count above [`MAX_SUITES`], a zero expiry, ...).
    BadValue,
}

impl Error {
    /// A short static description, for counters.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Truncated => "handshake message truncated",
            Self::TrailingBytes => "handshake message has trailing bytes",
            Self::BadVersion => "unsupported handshake version",
            Self::UnknownType => "unknown handshake message type",
            Self::BadValue => "bad value in handshake message",
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl core::error::Error for Error {}

/// Result alias for message parsing.
pub type Result<T> = core::result::Result<T, Error>;

enum_with_unknown! {
    /// The message type (second header byte).
    pub enum MessageType(u8) {
        /// Stage 1 + 2, initiator → responder, path 1: addresses, offered suites.
        Request = 0x01,
        /// Stage 1 + 2, responder → initiator, path 1: accepted, chosen suite.
        Accept = 0x02,
        /// Responder → initiator, path 1: refused with a reason code.
        Reject = 0x03,
        /// Stage 3, initiator → responder, path 1: expiry offer and X25519 share.
        Share = 0x04,
        /// Stage 3, responder → initiator, path 1: accepted expiry and X25519 share.
        ShareReply = 0x05,
        /// SMKEX, initiator → responder, path 2: the initiator's nonce.
        Nonce = 0x06,
        /// SMKEX, responder → initiator, path 2: the responder's nonce and the transcript hash.
        NonceReply = 0x07,
        /// Initiator → responder, path 2 (path 1 single-path): key confirmation.
        Confirm = 0x08,
        /// Responder → initiator, path 1: key confirmation; the session is established.
        ConfirmAck = 0x09,
        /// Stage 3 with ML-KEM-768, initiator → responder, path 1: a Share plus the
        /// initiator's encapsulation key (sent instead of a Share when the KEM is in use).
        KemShare = 0x0a,
        /// Stage 3 with ML-KEM-768, responder → initiator, path 1: a ShareReply plus the
        /// ciphertext encapsulated to the initiator's key (instead of a ShareReply).
        KemShareReply = 0x0b,
    }
}

enum_with_unknown! {
    /// Why a responder refused (the body of [`MessageType::Reject`]).
    pub enum RejectCode(u8) {
        /// No suite of the offer is allowed by the responder.
        NoCommonSuite = 0x01,
        /// Two paths were required by one side and are not available.
        TooFewPaths = 0x02,
        /// The offered expiry is below the responder's minimum.
        ExpiryRefused = 0x03,
        /// A pinned long-term key does not match.
        IdentityMismatch = 0x04,
        /// ML-KEM-768 was required by one side and the other does not run it.
        KemRequired = 0x05,
    }
}

/// The wire code of a suite in an offer (`Unknown` codes are carried but never chosen).
pub fn suite_code(suite: SuiteId) -> u8 {
    match suite {
        SuiteId::None => 0x00,
        SuiteId::NullHmacSha1 => 0x01,
        SuiteId::BfCbcHmacSha1 => 0x02,
        SuiteId::Aes128Gcm => 0x03,
        SuiteId::Aes256Gcm => 0x04,
        SuiteId::ChaCha20Poly1305 => 0x05,
        SuiteId::ScrambleHmacSha1 => 0x06,
    }
}

/// The suite for a wire code, if this implementation knows it.
pub fn suite_from_code(code: u8) -> Option<SuiteId> {
    SuiteId::ALL
        .iter()
        .copied()
        .find(|s| suite_code(*s) == code)
}

/// A random 8-byte handshake identifier chosen by one side (the session id is both).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HandshakeId(pub [u8; 8]);

/// An ordered list of suite wire codes (at most [`MAX_SUITES`]), most preferred first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SuiteList {
    len: u8,
    codes: [u8; MAX_SUITES],
}

impl SuiteList {
    /// An empty list.
    pub const fn new() -> Self {
        Self {
            len: 0,
            codes: [0; MAX_SUITES],
        }
    }

    /// The list of `suites` (the first [`MAX_SUITES`]).
    pub fn from_suites(suites: &[SuiteId]) -> Self {
        let mut l = Self::new();
        for s in suites.iter().take(MAX_SUITES) {
            l.push_code(suite_code(*s));
        }
        l
    }

    /// Appends a raw code; returns `false` (and changes nothing) when full.
    pub fn push_code(&mut self, code: u8) -> bool {
        let Some(slot) = self.codes.get_mut(usize::from(self.len)) else {
            return false;
        };
        *slot = code;
        self.len += 1;
        true
    }

    /// The raw codes.
    pub fn codes(&self) -> &[u8] {
        &self.codes[..usize::from(self.len).min(MAX_SUITES)]
    }

    /// The known suites, in order.
    pub fn suites(&self) -> impl Iterator<Item = SuiteId> + '_ {
        self.codes().iter().filter_map(|c| suite_from_code(*c))
    }

    /// Whether `suite` is in the list.
    pub fn contains(&self, suite: SuiteId) -> bool {
        self.codes().contains(&suite_code(suite))
    }
}

/// Request flags.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Flags {
    /// The sender can run SMKEX over two paths.
    pub two_path: bool,
    /// The sender refuses a single-path session.
    pub smkex_required: bool,
    /// The sender holds a live session with the responder: this handshake replaces it (a
    /// rekey). Clear: the sender has none (a first session, or it lost its keys, e.g. it
    /// restarted), so the responder's current session with it is dead.
    pub rekey: bool,
    /// The sender offers ML-KEM-768 beside X25519 (the hybrid post-quantum key exchange).
    pub kem: bool,
    /// The sender refuses a session without ML-KEM-768 (only with [`kem`](Self::kem)).
    pub kem_required: bool,
}

impl Flags {
    const TWO_PATH: u8 = 0x01;
    const REQUIRED: u8 = 0x02;
    const STATIC_KEY: u8 = 0x04;
    const REKEY: u8 = 0x08;
    const CERT: u8 = 0x10;
    const KEM: u8 = 0x20;
    const KEM_REQUIRED: u8 = 0x40;
    const KNOWN: u8 = Self::TWO_PATH
        | Self::REQUIRED
        | Self::STATIC_KEY
        | Self::REKEY
        | Self::CERT
        | Self::KEM
        | Self::KEM_REQUIRED;

    fn bits(self, static_key: bool) -> u8 {
        (if self.two_path { Self::TWO_PATH } else { 0 })
            | (if self.smkex_required {
                Self::REQUIRED
            } else {
                0
            })
            | (if static_key { Self::STATIC_KEY } else { 0 })
            | (if self.rekey { Self::REKEY } else { 0 })
            | (if self.kem { Self::KEM } else { 0 })
            | (if self.kem_required {
                Self::KEM_REQUIRED
            } else {
                0
            })
    }
}

/// Stage 1 and 2 of SEP (thesis Fig. 4.11 steps 1 and 3): who asks whom, and the suite offer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RequestRepr {
    /// When the initiator made the request (its [`TimestampClock`](super::TimestampClock)):
    /// a responder takes only Requests newer than the last it accepted from that peer.
    pub timestamp: Tai64n,
    /// Mode flags.
    pub flags: Flags,
    /// How many paths the initiator has to the responder (1 or more).
    pub paths: u8,
    /// The initiator's (protected) MAC address.
    pub initiator_mac: [u8; 6],
    /// The responder's MAC address as the initiator knows it.
    pub responder_mac: [u8; 6],
    /// The initiator's network address (the responder checks it is on its own subnet).
    pub initiator_addr: IpAddr,
    /// The destination network address (the responder checks it is its own).
    pub responder_addr: IpAddr,
    /// Offered suites, most preferred first.
    pub suites: SuiteList,
    /// The initiator's long-term X25519 public key, if it has one.
    pub static_key: Option<[u8; KEY_LEN]>,
    /// The initiator's certificate (flag 0x10; only with a static key), if it has one.
    pub cert: Option<CertBytes>,
}

/// A certificate as a Request or Accept carries it (docs/MEMBERSHIP.md): the bytes only; the
/// host parses and verifies them ([`crate::pki::Certificate`]).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct CertBytes {
    len: u16,
    bytes: [u8; MAX_CERT_LEN],
}

impl CertBytes {
    /// `bytes` as a carried certificate (`None`: empty or longer than [`MAX_CERT_LEN`]).
    pub fn new(bytes: &[u8]) -> Option<Self> {
        if bytes.is_empty() || bytes.len() > MAX_CERT_LEN {
            return None;
        }
        let mut b = [0u8; MAX_CERT_LEN];
        b[..bytes.len()].copy_from_slice(bytes);
        Some(Self {
            len: bytes.len() as u16,
            bytes: b,
        })
    }

    /// The bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

impl fmt::Debug for CertBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CertBytes({} bytes)", self.len)
    }
}

/// The responder's answer to a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AcceptRepr {
    /// Whether the session runs SMKEX over two paths.
    pub two_path: bool,
    /// The chosen suite's wire code.
    pub suite: u8,
    /// The responder's long-term X25519 public key, if it has one (seed 002 Fig. 15's `ls`).
    pub static_key: Option<[u8; KEY_LEN]>,
    /// The responder's certificate (flag 0x10; only with a static key), if it has one.
    pub cert: Option<CertBytes>,
    /// ML-KEM-768 is in the key exchange (flag 0x20; only if the Request offered it).
    pub kem: bool,
}

/// An ML-KEM-768 encapsulation key as a [`Body::KemShare`] carries it. Parsing refuses a key
/// that fails FIPS 203's modulus check (§7.2: every 12-bit coefficient below q = 3329), so a
/// `KemKey` is always a valid encapsulation key.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct KemKey(pub(crate) [u8; KEM_KEY_LEN]);

impl KemKey {
    /// The key for `bytes`, if it passes the modulus check.
    pub fn new(bytes: &[u8; KEM_KEY_LEN]) -> Option<Self> {
        modulus_check(bytes).then_some(Self(*bytes))
    }

    /// The bytes.
    pub fn as_bytes(&self) -> &[u8; KEM_KEY_LEN] {
        &self.0
    }
}

impl fmt::Debug for KemKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KemKey({:02x?}..)", &self.0[..4])
    }
}

/// FIPS 203 §7.2's modulus check of an encapsulation key: ByteEncode12(ByteDecode12(t̂)) = t̂,
/// i.e. every coefficient (12 bits, little-endian, two per three bytes) of the first 1,152
/// bytes is below q = 3329. The last 32 bytes (the seed ρ) are free.
fn modulus_check(bytes: &[u8; KEM_KEY_LEN]) -> bool {
    const Q: u16 = 3329;
    bytes[..KEM_KEY_LEN - 32].chunks_exact(3).all(|c| {
        let (b0, b1, b2) = (u16::from(c[0]), u16::from(c[1]), u16::from(c[2]));
        (b0 | (b1 & 0x0f) << 8) < Q && (b1 >> 4 | b2 << 4) < Q
    })
}

/// An ML-KEM-768 ciphertext as a [`Body::KemShareReply`] carries it (any 1,088 bytes: a
/// ciphertext that was not made for the key decapsulates to an unrelated secret, FIPS 203's
/// implicit rejection).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct KemCiphertext(pub [u8; KEM_CIPHERTEXT_LEN]);

impl fmt::Debug for KemCiphertext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KemCiphertext({:02x?}..)", &self.0[..4])
    }
}

/// One message body.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Body {
    /// See [`RequestRepr`].
    Request(RequestRepr),
    /// See [`AcceptRepr`].
    Accept(AcceptRepr),
    /// A refusal.
    Reject(RejectCode),
    /// The initiator's expiry offer (seconds, non-zero) and X25519 share.
    Share {
        /// Offered session lifetime in seconds.
        expiry_secs: u32,
        /// The X25519 public share.
        share: [u8; KEY_LEN],
    },
    /// The responder's accepted expiry and X25519 share.
    ShareReply {
        /// Accepted session lifetime in seconds (at most the offer).
        expiry_secs: u32,
        /// The X25519 public share.
        share: [u8; KEY_LEN],
    },
    /// The initiator's SMKEX nonce.
    Nonce([u8; NONCE_LEN]),
    /// The responder's SMKEX nonce and the hash of the whole transcript.
    NonceReply {
        /// The responder's nonce.
        nonce: [u8; NONCE_LEN],
        /// SHA-256 over the transcript as the responder saw it.
        hash: [u8; HASH_LEN],
    },
    /// The initiator's key confirmation tag.
    Confirm([u8; HASH_LEN]),
    /// The responder's key confirmation tag.
    ConfirmAck([u8; HASH_LEN]),
    /// A Share with the initiator's ML-KEM-768 encapsulation key (the KEM is in use).
    KemShare {
        /// Offered session lifetime in seconds.
        expiry_secs: u32,
        /// The X25519 public share.
        share: [u8; KEY_LEN],
        /// The initiator's ephemeral ML-KEM-768 encapsulation key.
        kem_key: KemKey,
    },
    /// A ShareReply with the ML-KEM-768 ciphertext to the initiator's key.
    KemShareReply {
        /// Accepted session lifetime in seconds (at most the offer).
        expiry_secs: u32,
        /// The X25519 public share.
        share: [u8; KEY_LEN],
        /// The ciphertext encapsulated to the KemShare's key.
        ciphertext: KemCiphertext,
    },
}

impl Body {
    /// The message type of this body.
    pub fn message_type(&self) -> MessageType {
        match self {
            Self::Request(_) => MessageType::Request,
            Self::Accept(_) => MessageType::Accept,
            Self::Reject(_) => MessageType::Reject,
            Self::Share { .. } => MessageType::Share,
            Self::ShareReply { .. } => MessageType::ShareReply,
            Self::Nonce(_) => MessageType::Nonce,
            Self::NonceReply { .. } => MessageType::NonceReply,
            Self::Confirm(_) => MessageType::Confirm,
            Self::ConfirmAck(_) => MessageType::ConfirmAck,
            Self::KemShare { .. } => MessageType::KemShare,
            Self::KemShareReply { .. } => MessageType::KemShareReply,
        }
    }
}

/// A read/write view of a handshake message.
#[derive(Debug, Clone)]
pub struct Message<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Message<T> {
    /// A view without checks (accessors may panic on a short buffer).
    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// A view after [`check_len`](Self::check_len).
    ///
    /// # Errors
    /// As [`check_len`](Self::check_len).
    pub fn new_checked(buffer: T) -> Result<Self> {
        let m = Self::new_unchecked(buffer);
        m.check_len()?;
        Ok(m)
    }

    /// Checks that the buffer holds the header; the body is checked by [`Repr::parse`].
    ///
    /// # Errors
    /// [`Error::Truncated`] if shorter than [`HEADER_LEN`].
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// The buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The version byte.
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VERSION]
    }

    /// The message type.
    pub fn message_type(&self) -> MessageType {
        MessageType::from(self.buffer.as_ref()[field::TYPE])
    }

    /// The initiator's handshake id.
    pub fn initiator_id(&self) -> HandshakeId {
        HandshakeId(take8(&self.buffer.as_ref()[field::INITIATOR_ID]))
    }

    /// The responder's handshake id (zero in a request).
    pub fn responder_id(&self) -> HandshakeId {
        HandshakeId(take8(&self.buffer.as_ref()[field::RESPONDER_ID]))
    }

    /// The body bytes.
    pub fn body(&self) -> &[u8] {
        &self.buffer.as_ref()[field::BODY..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Message<T> {
    /// Sets version and type.
    pub fn set_header(&mut self, ty: MessageType, initiator: HandshakeId, responder: HandshakeId) {
        let b = self.buffer.as_mut();
        b[field::VERSION] = VERSION;
        b[field::TYPE] = ty.into();
        b[field::INITIATOR_ID].copy_from_slice(&initiator.0);
        b[field::RESPONDER_ID].copy_from_slice(&responder.0);
    }

    /// The body bytes, writable.
    pub fn body_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::BODY..]
    }
}

/// A whole handshake message as a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Repr {
    /// The initiator's handshake id.
    pub initiator_id: HandshakeId,
    /// The responder's handshake id (zero in a request).
    pub responder_id: HandshakeId,
    /// The body.
    pub body: Body,
}

impl Repr {
    /// Parses a checked message. Every field is validated: the result is a legal message.
    ///
    /// # Errors
    /// Any [`Error`]; never panics.
    pub fn parse<T: AsRef<[u8]>>(msg: &Message<T>) -> Result<Self> {
        msg.check_len()?;
        if msg.version() != VERSION {
            return Err(Error::BadVersion);
        }
        let mut r = Reader(msg.body());
        let body = match msg.message_type() {
            MessageType::Request => Body::Request(parse_request(&mut r)?),
            MessageType::Accept => {
                let flags = r.u8()?;
                if flags & !(Flags::TWO_PATH | Flags::STATIC_KEY | Flags::CERT | Flags::KEM) != 0 {
                    return Err(Error::BadValue);
                }
                let suite = r.u8()?;
                let static_key = if flags & Flags::STATIC_KEY != 0 {
                    Some(r.array()?)
                } else {
                    None
                };
                let cert = parse_cert(&mut r, flags, static_key.is_some())?;
                Body::Accept(AcceptRepr {
                    two_path: flags & Flags::TWO_PATH != 0,
                    suite,
                    static_key,
                    cert,
                    kem: flags & Flags::KEM != 0,
                })
            }
            MessageType::Reject => Body::Reject(RejectCode::from(r.u8()?)),
            MessageType::Share => {
                let (expiry_secs, share) = parse_share(&mut r)?;
                Body::Share { expiry_secs, share }
            }
            MessageType::ShareReply => {
                let (expiry_secs, share) = parse_share(&mut r)?;
                Body::ShareReply { expiry_secs, share }
            }
            MessageType::Nonce => Body::Nonce(r.array()?),
            MessageType::NonceReply => Body::NonceReply {
                nonce: r.array()?,
                hash: r.array()?,
            },
            MessageType::Confirm => Body::Confirm(r.array()?),
            MessageType::ConfirmAck => Body::ConfirmAck(r.array()?),
            MessageType::KemShare => {
                let (expiry_secs, share) = parse_share(&mut r)?;
                let kem_key = KemKey::new(&r.array()?).ok_or(Error::BadValue)?;
                Body::KemShare {
                    expiry_secs,
                    share,
                    kem_key,
                }
            }
            MessageType::KemShareReply => {
                let (expiry_secs, share) = parse_share(&mut r)?;
                Body::KemShareReply {
                    expiry_secs,
                    share,
                    ciphertext: KemCiphertext(r.array()?),
                }
            }
            MessageType::Unknown(_) => return Err(Error::UnknownType),
        };
        if !r.0.is_empty() {
            return Err(Error::TrailingBytes);
        }
        let responder_id = msg.responder_id();
        // A request has no responder id yet; a compact initiator's share and nonce (sent with
        // the request) may have none; every other message has both.
        let zero = responder_id == HandshakeId::default();
        let may_be_zero = matches!(
            body,
            Body::Share { .. } | Body::KemShare { .. } | Body::Nonce(_)
        );
        if matches!(body, Body::Request(_)) != zero && !(zero && may_be_zero) {
            return Err(Error::BadValue);
        }
        Ok(Self {
            initiator_id: msg.initiator_id(),
            responder_id,
            body,
        })
    }

    /// Parses untrusted bytes: [`Message::new_checked`] then [`parse`](Self::parse).
    ///
    /// # Errors
    /// Any [`Error`]; never panics.
    pub fn parse_bytes(bytes: &[u8]) -> Result<Self> {
        Self::parse(&Message::new_checked(bytes)?)
    }

    /// The encoded length.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN
            + match &self.body {
                Body::Request(q) => {
                    REQUEST_FIXED_LEN
                        + q.suites.codes().len()
                        + if q.static_key.is_some() { KEY_LEN } else { 0 }
                        + cert_len(q.cert.as_ref())
                }
                Body::Accept(a) => {
                    2 + if a.static_key.is_some() { KEY_LEN } else { 0 } + cert_len(a.cert.as_ref())
                }
                Body::Reject(_) => 1,
                Body::Share { .. } | Body::ShareReply { .. } => 4 + KEY_LEN,
                Body::Nonce(_) => NONCE_LEN,
                Body::NonceReply { .. } => NONCE_LEN + HASH_LEN,
                Body::Confirm(_) | Body::ConfirmAck(_) => HASH_LEN,
                Body::KemShare { .. } => KEM_SHARE_LEN - HEADER_LEN,
                Body::KemShareReply { .. } => KEM_SHARE_REPLY_LEN - HEADER_LEN,
            }
    }

    /// Writes the message into the start of `buf` and returns its length.
    ///
    /// # Panics
    /// If `buf` is shorter than [`buffer_len`](Self::buffer_len).
    pub fn emit(&self, buf: &mut [u8]) -> usize {
        let len = self.buffer_len();
        let mut m = Message::new_unchecked(&mut buf[..len]);
        m.set_header(
            self.body.message_type(),
            self.initiator_id,
            self.responder_id,
        );
        let mut w = Writer(m.body_mut());
        match &self.body {
            Body::Request(q) => {
                w.put(&q.timestamp.0);
                let cert = if q.cert.is_some() { Flags::CERT } else { 0 };
                w.put(&[q.flags.bits(q.static_key.is_some()) | cert, q.paths]);
                w.put(&q.initiator_mac);
                w.put(&q.responder_mac);
                w.put(&encode_addr(q.initiator_addr));
                w.put(&encode_addr(q.responder_addr));
                let codes = q.suites.codes();
                w.put(&[codes.len() as u8]);
                w.put(codes);
                if let Some(k) = &q.static_key {
                    w.put(k);
                }
                put_cert(&mut w, q.cert.as_ref());
            }
            Body::Accept(a) => {
                let flags = (if a.two_path { Flags::TWO_PATH } else { 0 })
                    | (if a.static_key.is_some() {
                        Flags::STATIC_KEY
                    } else {
                        0
                    })
                    | (if a.cert.is_some() { Flags::CERT } else { 0 })
                    | (if a.kem { Flags::KEM } else { 0 });
                w.put(&[flags, a.suite]);
                if let Some(k) = &a.static_key {
                    w.put(k);
                }
                put_cert(&mut w, a.cert.as_ref());
            }
            Body::Reject(code) => w.put(&[u8::from(*code)]),
            Body::Share { expiry_secs, share } | Body::ShareReply { expiry_secs, share } => {
                w.put(&expiry_secs.to_be_bytes());
                w.put(share);
            }
            Body::Nonce(n) => w.put(n),
            Body::NonceReply { nonce, hash } => {
                w.put(nonce);
                w.put(hash);
            }
            Body::Confirm(t) | Body::ConfirmAck(t) => w.put(t),
            Body::KemShare {
                expiry_secs,
                share,
                kem_key,
            } => {
                w.put(&expiry_secs.to_be_bytes());
                w.put(share);
                w.put(kem_key.as_bytes());
            }
            Body::KemShareReply {
                expiry_secs,
                share,
                ciphertext,
            } => {
                w.put(&expiry_secs.to_be_bytes());
                w.put(share);
                w.put(&ciphertext.0);
            }
        }
        len
    }
}

fn parse_request(r: &mut Reader<'_>) -> Result<RequestRepr> {
    let timestamp = Tai64n(r.array()?);
    let flags = r.u8()?;
    // Reserved bits, and "KEM required" without "KEM offered" (one encoding per meaning).
    if flags & !Flags::KNOWN != 0
        || flags & (Flags::KEM | Flags::KEM_REQUIRED) == Flags::KEM_REQUIRED
    {
        return Err(Error::BadValue);
    }
    let paths = r.u8()?;
    if paths == 0 {
        return Err(Error::BadValue);
    }
    let initiator_mac = r.array()?;
    let responder_mac = r.array()?;
    let initiator_addr = decode_addr(&r.array()?)?;
    let responder_addr = decode_addr(&r.array()?)?;
    let n = usize::from(r.u8()?);
    if n == 0 || n > MAX_SUITES {
        return Err(Error::BadValue);
    }
    let mut suites = SuiteList::new();
    for &c in r.take(n)? {
        suites.push_code(c);
    }
    let static_key = if flags & Flags::STATIC_KEY != 0 {
        Some(r.array()?)
    } else {
        None
    };
    let cert = parse_cert(r, flags, static_key.is_some())?;
    Ok(RequestRepr {
        timestamp,
        flags: Flags {
            two_path: flags & Flags::TWO_PATH != 0,
            smkex_required: flags & Flags::REQUIRED != 0,
            rekey: flags & Flags::REKEY != 0,
            kem: flags & Flags::KEM != 0,
            kem_required: flags & Flags::KEM_REQUIRED != 0,
        },
        paths,
        initiator_mac,
        responder_mac,
        initiator_addr,
        responder_addr,
        suites,
        static_key,
        cert,
    })
}

/// The certificate after the static key when `flags` has 0x10: a 2-byte length (1 to
/// [`MAX_CERT_LEN`]), then the bytes. A certificate without a static key is refused.
fn parse_cert(r: &mut Reader<'_>, flags: u8, has_key: bool) -> Result<Option<CertBytes>> {
    if flags & Flags::CERT == 0 {
        return Ok(None);
    }
    if !has_key {
        return Err(Error::BadValue);
    }
    let [hi, lo] = r.array()?;
    let n = usize::from(u16::from_be_bytes([hi, lo]));
    CertBytes::new(r.take(n)?).map(Some).ok_or(Error::BadValue)
}

fn cert_len(c: Option<&CertBytes>) -> usize {
    c.map_or(0, |c| 2 + c.as_bytes().len())
}

fn put_cert(w: &mut Writer<'_>, c: Option<&CertBytes>) {
    if let Some(c) = c {
        w.put(&(c.as_bytes().len() as u16).to_be_bytes());
        w.put(c.as_bytes());
    }
}

fn parse_share(r: &mut Reader<'_>) -> Result<(u32, [u8; KEY_LEN])> {
    let expiry_secs = u32::from_be_bytes(r.array()?);
    if expiry_secs == 0 {
        return Err(Error::BadValue);
    }
    Ok((expiry_secs, r.array()?))
}

/// Family byte (4 or 6), then 16 address bytes; an IPv4 address is followed by 12 zero bytes.
fn encode_addr(addr: IpAddr) -> [u8; ADDR_LEN] {
    let mut out = [0u8; ADDR_LEN];
    match addr {
        IpAddr::V4(a) => {
            out[0] = 4;
            out[1..5].copy_from_slice(&a.octets());
        }
        IpAddr::V6(a) => {
            out[0] = 6;
            out[1..].copy_from_slice(&a.octets());
        }
    }
    out
}

fn decode_addr(b: &[u8; ADDR_LEN]) -> Result<IpAddr> {
    let (family, rest) = b.split_at(1);
    match family {
        [4] if rest[4..].iter().all(|&x| x == 0) => Ok(IpAddr::V4(Ipv4Addr::new(
            rest[0], rest[1], rest[2], rest[3],
        ))),
        [6] => {
            let mut o = [0u8; 16];
            o.copy_from_slice(rest);
            Ok(IpAddr::V6(Ipv6Addr::from(o)))
        }
        _ => Err(Error::BadValue),
    }
}

fn take8(b: &[u8]) -> [u8; 8] {
    let mut o = [0u8; 8];
    o.copy_from_slice(b);
    o
}

/// A cursor over untrusted bytes; every read is bounds-checked.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.0.len() < n {
            return Err(Error::Truncated);
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Ok(head)
    }

    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut o = [0u8; N];
        o.copy_from_slice(self.take(N)?);
        Ok(o)
    }
}

/// A cursor over a buffer already sized by `buffer_len`.
struct Writer<'a>(&'a mut [u8]);

impl Writer<'_> {
    fn put(&mut self, bytes: &[u8]) {
        let buf = core::mem::take(&mut self.0);
        let (head, tail) = buf.split_at_mut(bytes.len());
        head.copy_from_slice(bytes);
        self.0 = tail;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const I: HandshakeId = HandshakeId([1, 2, 3, 4, 5, 6, 7, 8]);
    const R: HandshakeId = HandshakeId([9, 10, 11, 12, 13, 14, 15, 16]);

    // A request from 10.77.0.1 (02:50:53:00:00:01) to 10.77.0.2, two paths, offering
    // aes128-gcm then chacha20-poly1305, no static key.
    static REQUEST_BYTES: [u8; 18 + 61 + 2] = [
        0x02, 0x01, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0, 0, 0, 0, 0, // header
        0x40, 0, 0, 0, 0x65, 0x53, 0xf1, 0x00, 0x07, 0x5b, 0xcd, 0x15, // TAI64N timestamp
        0x01, 0x02, // flags: two-path; 2 paths
        0x02, 0x50, 0x53, 0x00, 0x00, 0x01, // initiator MAC
        0x02, 0x50, 0x53, 0x00, 0x00, 0x02, // responder MAC
        4, 10, 77, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // initiator address
        4, 10, 77, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // responder address
        2, 0x03, 0x05, // suites
    ];

    fn request_repr() -> Repr {
        Repr {
            initiator_id: I,
            responder_id: HandshakeId::default(),
            body: Body::Request(RequestRepr {
                // 2023-11-14 22:13:20.123456789 UTC
                timestamp: Tai64n::from_unix(1_700_000_000, 123_456_789),
                flags: Flags {
                    two_path: true,
                    smkex_required: false,
                    rekey: false,
                    kem: false,
                    kem_required: false,
                },
                paths: 2,
                initiator_mac: [2, 0x50, 0x53, 0, 0, 1],
                responder_mac: [2, 0x50, 0x53, 0, 0, 2],
                initiator_addr: IpAddr::V4(Ipv4Addr::new(10, 77, 0, 1)),
                responder_addr: IpAddr::V4(Ipv4Addr::new(10, 77, 0, 2)),
                suites: SuiteList::from_suites(&[SuiteId::Aes128Gcm, SuiteId::ChaCha20Poly1305]),
                static_key: None,
                cert: None,
            }),
        }
    }

    fn all_reprs() -> [Repr; 14] {
        let b = |body| Repr {
            initiator_id: I,
            responder_id: R,
            body,
        };
        let mut with_key = request_repr();
        if let Body::Request(q) = &mut with_key.body {
            q.static_key = Some([7; 32]);
            q.initiator_addr = IpAddr::V6(Ipv6Addr::LOCALHOST);
            q.flags.smkex_required = true;
        }
        let mut with_cert = with_key;
        if let Body::Request(q) = &mut with_cert.body {
            q.cert = CertBytes::new(&[0xc3; MAX_CERT_LEN]);
        }
        [
            request_repr(),
            with_key,
            with_cert,
            b(Body::Accept(AcceptRepr {
                two_path: true,
                suite: 3,
                static_key: Some([5; 32]),
                cert: None,
                kem: false,
            })),
            b(Body::Accept(AcceptRepr {
                two_path: false,
                suite: 3,
                static_key: Some([5; 32]),
                cert: CertBytes::new(&[0xc4; 7]),
                kem: true,
            })),
            b(Body::Reject(RejectCode::NoCommonSuite)),
            b(Body::Share {
                expiry_secs: 3600,
                share: [3; 32],
            }),
            b(Body::ShareReply {
                expiry_secs: 60,
                share: [4; 32],
            }),
            b(Body::Nonce([6; 32])),
            b(Body::NonceReply {
                nonce: [8; 32],
                hash: [9; 32],
            }),
            b(Body::Confirm([10; 32])),
            b(Body::ConfirmAck([11; 32])),
            b(Body::KemShare {
                expiry_secs: 3600,
                share: [3; 32],
                kem_key: KemKey::new(&[0x11; KEM_KEY_LEN]).unwrap(),
            }),
            b(Body::KemShareReply {
                expiry_secs: 60,
                share: [4; 32],
                ciphertext: KemCiphertext([0xee; KEM_CIPHERTEXT_LEN]),
            }),
        ]
    }

    /// The KEM's flags: 0x20 offers ML-KEM-768, 0x40 requires it (only with 0x20), 0x80 stays
    /// reserved; the Accept's 0x20 says it is in use. The KEM messages have the documented
    /// sizes, and a KemShare's key must pass FIPS 203's modulus check.
    #[test]
    fn kem_flags_sizes_and_key_check() {
        let flags = |bits: u8| {
            let mut b = REQUEST_BYTES;
            b[30] = bits;
            Repr::parse_bytes(&b).map(|r| match r.body {
                Body::Request(q) => (q.flags.kem, q.flags.kem_required),
                _ => unreachable!(),
            })
        };
        assert_eq!(flags(0x01), Ok((false, false)));
        assert_eq!(flags(0x21), Ok((true, false)));
        assert_eq!(flags(0x61), Ok((true, true)));
        assert_eq!(
            flags(0x41),
            Err(Error::BadValue),
            "required without offered"
        );
        assert_eq!(flags(0x81), Err(Error::BadValue), "reserved");
        let mut q = request_repr();
        if let Body::Request(r) = &mut q.body {
            r.flags.kem = true;
            r.flags.kem_required = true;
        }
        let mut buf = [0u8; MAX_MESSAGE_LEN];
        let n = q.emit(&mut buf);
        assert_eq!(buf[30], 0x61);
        assert_eq!(n, REQUEST_BYTES.len(), "the flags cost no byte");

        // Accept: 0x20 parses, 0x02 and 0x40 do not.
        let accept = |flags: u8| {
            let mut m = [0u8; HEADER_LEN + 2];
            m[..HEADER_LEN]
                .copy_from_slice(&[2, 2, 1, 2, 3, 4, 5, 6, 7, 8, 9, 9, 9, 9, 9, 9, 9, 9]);
            m[HEADER_LEN] = flags;
            m[HEADER_LEN + 1] = 3;
            Repr::parse_bytes(&m).map(|r| matches!(r.body, Body::Accept(a) if a.kem))
        };
        assert_eq!(accept(0x21), Ok(true));
        assert_eq!(accept(0x01), Ok(false));
        assert_eq!(accept(0x41), Err(Error::BadValue));
        assert_eq!(accept(0x03), Err(Error::BadValue));

        let reprs = all_reprs();
        let (share, reply) = (reprs[12], reprs[13]);
        assert_eq!(share.buffer_len(), 1238);
        assert_eq!(reply.buffer_len(), 1142);
        assert_eq!(KEM_SHARE_LEN, 1238);
        assert_eq!(KEM_SHARE_REPLY_LEN, 1142);
        assert_eq!(MAX_MESSAGE_LEN, KEM_SHARE_LEN);
        assert_eq!(MAX_REQUEST_LEN, 503);

        // A coefficient of q (3329 = 0xd01) in the key: the message does not parse.
        let n = share.emit(&mut buf);
        let key_at = HEADER_LEN + 4 + KEY_LEN;
        buf[key_at] = 0x01;
        buf[key_at + 1] = 0xfd;
        assert_eq!(Repr::parse_bytes(&buf[..n]), Err(Error::BadValue));
        // A KemShare may have a zero responder id (compact), a KemShareReply may not.
        let mut zero = share;
        zero.responder_id = HandshakeId::default();
        let n = zero.emit(&mut buf);
        assert_eq!(Repr::parse_bytes(&buf[..n]), Ok(zero));
        let mut zero = reply;
        zero.responder_id = HandshakeId::default();
        let n = zero.emit(&mut buf);
        assert_eq!(Repr::parse_bytes(&buf[..n]), Err(Error::BadValue));
    }

    #[test]
    fn deconstruct() {
        let m = Message::new_checked(&REQUEST_BYTES[..]).unwrap();
        assert_eq!(m.version(), 2);
        assert_eq!(m.message_type(), MessageType::Request);
        assert_eq!(m.initiator_id(), I);
        assert_eq!(m.responder_id(), HandshakeId::default());
        assert_eq!(m.body().len(), 63);
    }

    #[test]
    fn parse_and_emit_fixture() {
        assert_eq!(Repr::parse_bytes(&REQUEST_BYTES), Ok(request_repr()));
        let mut buf = [0u8; MAX_MESSAGE_LEN];
        let n = request_repr().emit(&mut buf);
        assert_eq!(&buf[..n], &REQUEST_BYTES[..]);
        assert_eq!(request_repr().buffer_len(), REQUEST_BYTES.len());
    }

    #[test]
    fn every_message_round_trips_and_every_truncation_fails() {
        for repr in all_reprs() {
            let mut buf = [0u8; MAX_MESSAGE_LEN + 1];
            let n = repr.emit(&mut buf);
            assert_eq!(n, repr.buffer_len());
            assert!(n <= MAX_MESSAGE_LEN);
            assert_eq!(Repr::parse_bytes(&buf[..n]), Ok(repr));
            for cut in 0..n {
                assert!(
                    Repr::parse_bytes(&buf[..cut]).is_err(),
                    "{repr:?} cut at {cut}"
                );
            }
            assert_eq!(
                Repr::parse_bytes(&buf[..n + 1]),
                Err(Error::TrailingBytes),
                "{repr:?}"
            );
        }
    }

    #[test]
    fn check_len_and_bad_values() {
        assert_eq!(
            Message::new_checked(&REQUEST_BYTES[..17]).unwrap_err(),
            Error::Truncated
        );
        let mut b = REQUEST_BYTES;
        b[0] = 1;
        assert_eq!(Repr::parse_bytes(&b), Err(Error::BadVersion));
        let mut b = REQUEST_BYTES;
        b[1] = 0x42;
        assert_eq!(Repr::parse_bytes(&b), Err(Error::UnknownType));
        let mut b = REQUEST_BYTES;
        b[30] = 0x80; // reserved flag (0x20 and 0x40 are the KEM's)
        assert_eq!(Repr::parse_bytes(&b), Err(Error::BadValue));
        let mut b = REQUEST_BYTES;
        b[44] = 5; // address family
        assert_eq!(Repr::parse_bytes(&b), Err(Error::BadValue));
        let mut b = REQUEST_BYTES;
        b[52] = 1; // IPv4 pad
        assert_eq!(Repr::parse_bytes(&b), Err(Error::BadValue));
        let mut b = REQUEST_BYTES;
        b[10] = 1; // a request with a responder id
        assert_eq!(Repr::parse_bytes(&b), Err(Error::BadValue));
        let mut b = REQUEST_BYTES;
        b[78] = 9; // suite count above the maximum
        assert_eq!(Repr::parse_bytes(&b), Err(Error::BadValue));
    }

    #[test]
    fn suite_codes_round_trip() {
        for s in SuiteId::ALL {
            assert_eq!(suite_from_code(suite_code(*s)), Some(*s));
        }
        assert_eq!(suite_from_code(0x77), None);
        let mut l = SuiteList::from_suites(SuiteId::ALL);
        assert!(l.push_code(0x77));
        assert!(!l.push_code(0x78));
        assert_eq!(l.suites().count(), 7);
    }
}
