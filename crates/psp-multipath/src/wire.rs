//! The bytes psp-multipath puts on each TCP connection: a [`Hello`], length-prefixed handshake
//! messages ([`HandshakeFrame`]), a 32-byte binding tag, then [`Segment`]s.
//!
//! Every parser here takes untrusted input and returns an [`Error`]; none panics. After
//! [`Segment::new_checked`] no accessor panics; `emit` functions panic only on buffers shorter
//! than the documented length (callers size them with the constants here).
//!
//! ```text
//! Segment header (20 bytes, big endian)
//!  0      1      2             4                  8                                16           20
//!  +------+------+-------------+------------------+---------------------------------+------------+
//!  | kind | 0    | payload len | path seq (u32)   | stream offset (u64)             | seg (u32)  |
//!  +------+------+-------------+------------------+---------------------------------+------------+
//! ```
//!
//! The same header serves three kinds: data (payload = stream bytes), fin (`offset` = stream
//! length, `seg` = data segments sent) and ack (`offset` = stream bytes delivered, `seg` =
//! segments delivered: cumulative). Fin and ack carry no payload, or a 16-byte AEAD tag when the
//! stream is sealed ([`CONTROL_TAG_LEN`]). docs/MULTIPATH.md is the normative description.

use core::fmt;
use core::ops::Range;

use psp_core::handshake::messages::MAX_MESSAGE_LEN;

/// Length of a segment header.
pub const HEADER_LEN: usize = 20;
/// The largest payload a segment may carry (16 KiB of data plus a 16-byte AEAD tag).
pub const MAX_PAYLOAD: usize = 16 * 1024 + 16;
/// Length of a [`Hello`].
pub const HELLO_LEN: usize = 16;
/// The hello's magic bytes.
pub const MAGIC: [u8; 4] = *b"PSMP";
/// The protocol version this crate speaks (docs/MULTIPATH.md).
pub const VERSION: u8 = 3;
/// The only nonzero payload length a fin or an ack may have: the AEAD tag.
pub const CONTROL_TAG_LEN: usize = 16;
/// The largest handshake message accepted inside a [`HandshakeFrame`]: psp-core's longest
/// message, a hybrid handshake's KemShare (1,238 bytes; docs/MULTIPATH.md, "Connections and
/// paths"). Before the KEM it was 512.
pub const MAX_HANDSHAKE_LEN: usize = MAX_MESSAGE_LEN;
/// The first two bytes of a binding-tag frame: a length no [`HandshakeFrame`] can have (above
/// [`MAX_HANDSHAKE_LEN`]), so a receiver tells the tag from a handshake message by them.
pub const TAG_MARKER: [u8; 2] = [0xff, 0xff];
/// Length of a binding tag.
pub const BINDING_TAG_LEN: usize = 32;
/// Length of a binding-tag frame: [`TAG_MARKER`] and the tag.
pub const BINDING_FRAME_LEN: usize = TAG_MARKER.len() + BINDING_TAG_LEN;
/// Length of a segment's AEAD associated data ([`aad`]).
pub const AAD_LEN: usize = 12 + HEADER_LEN;

mod field {
    use core::ops::Range;
    pub(super) const KIND: usize = 0;
    pub(super) const RESERVED: usize = 1;
    pub(super) const LEN: Range<usize> = 2..4;
    pub(super) const PATH_SEQ: Range<usize> = 4..8;
    pub(super) const OFFSET: Range<usize> = 8..16;
    pub(super) const SEG: Range<usize> = 16..20;
}

/// Why bytes from a peer were refused. Says nothing secret; `Copy`, no allocation.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// Fewer bytes than the header or the length field says.
    Truncated,
    /// The magic bytes are not `PSMP`.
    BadMagic,
    /// A protocol version this crate does not speak.
    BadVersion(u8),
    /// A segment kind other than data, fin or ack.
    BadKind(u8),
    /// A reserved field is not zero.
    Reserved,
    /// The payload length is larger than [`MAX_PAYLOAD`] (or, in a fin or an ack, neither 0
    /// nor [`CONTROL_TAG_LEN`]).
    TooLong,
    /// A field holds a value outside its range (path role, cipher).
    BadField(&'static str),
    /// A data segment with no payload (a sender never makes one; each would cost the receiver
    /// bookkeeping for nothing).
    EmptyData,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Truncated => f.write_str("truncated"),
            Self::BadMagic => f.write_str("not a psp-multipath peer (bad magic)"),
            Self::BadVersion(v) => write!(f, "unsupported version {v}"),
            Self::BadKind(k) => write!(f, "unknown segment kind {k:#04x}"),
            Self::Reserved => f.write_str("reserved field not zero"),
            Self::TooLong => f.write_str("length field too large"),
            Self::BadField(name) => write!(f, "bad {name} field"),
            Self::EmptyData => f.write_str("empty data segment"),
        }
    }
}

impl core::error::Error for Error {}

/// What a segment carries.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Stream bytes (scrambled, sealed or plain, per the session's cipher).
    Data,
    /// The sender's end of stream: `offset` is the stream length, `seg` the number of data
    /// segments sent in total; no payload (or a tag).
    Fin,
    /// The receiver's cumulative acknowledgement, sent on either path: `offset` stream bytes and
    /// `seg` segments have been delivered in order; the sender may forget them. No payload (or
    /// a tag).
    Ack,
}

impl Kind {
    /// The kind byte.
    pub fn code(self) -> u8 {
        match self {
            Self::Data => 0x01,
            Self::Fin => 0x02,
            Self::Ack => 0x03,
        }
    }

    /// The 12 constant bytes in front of the header in this kind's AEAD associated data
    /// ([`aad`]). Bytes 6..12 enter the AEAD nonce (psp-core's `SuiteKey` takes them as the
    /// "source MAC" of its nonce), so the three kinds have three nonce spaces under one key.
    pub fn aad_prefix(self) -> &'static [u8; 12] {
        match self {
            Self::Data => b"psp-mp\0aead\0",
            Self::Fin => b"psp-mp\0fin\0\0",
            Self::Ack => b"psp-mp\0ack\0\0",
        }
    }
}

/// A segment's AEAD associated data: its kind's [`Kind::aad_prefix`], then the 20-byte header
/// with the path sequence (bytes 4..8) zeroed, so a segment re-sent on the other path (new path
/// sequence) opens unchanged.
///
/// # Panics
/// If `header` is shorter than [`HEADER_LEN`].
pub fn aad(kind: Kind, header: &[u8]) -> [u8; AAD_LEN] {
    let mut a = [0u8; AAD_LEN];
    a[..12].copy_from_slice(kind.aad_prefix());
    a[12..].copy_from_slice(&header[..HEADER_LEN]);
    a[12 + field::PATH_SEQ.start..12 + field::PATH_SEQ.end].fill(0);
    a
}

/// A view of a segment header (and payload) in a buffer.
#[derive(Debug, Clone)]
pub struct Segment<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Segment<T> {
    /// Wraps a buffer without checks (accessors may panic on a short buffer).
    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// Wraps a buffer holding at least a header and the payload it announces.
    ///
    /// # Errors
    /// As [`check_len`](Self::check_len).
    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        let s = Self::new_unchecked(buffer);
        s.check_len()?;
        Ok(s)
    }

    /// Checks the buffer holds the header and the whole payload.
    ///
    /// # Errors
    /// [`Error::Truncated`] if it does not; [`Error::TooLong`] if the length field exceeds
    /// [`MAX_PAYLOAD`].
    pub fn check_len(&self) -> Result<(), Error> {
        let b = self.buffer.as_ref();
        if b.len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let len = self.payload_len();
        if len > MAX_PAYLOAD {
            return Err(Error::TooLong);
        }
        if b.len() < HEADER_LEN + len {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The raw kind byte.
    pub fn kind_code(&self) -> u8 {
        self.buffer.as_ref()[field::KIND]
    }

    /// The payload length field.
    pub fn payload_len(&self) -> usize {
        usize::from(u16::from_be_bytes(be(&self.buffer.as_ref()[field::LEN])))
    }

    /// This path's sequence number of the segment.
    pub fn path_seq(&self) -> u32 {
        u32::from_be_bytes(be(&self.buffer.as_ref()[field::PATH_SEQ]))
    }

    /// The stream offset of the payload's first byte (fin: the stream length).
    pub fn offset(&self) -> u64 {
        u64::from_be_bytes(be(&self.buffer.as_ref()[field::OFFSET]))
    }

    /// The segment number in the stream, over all paths (fin: the number of data segments).
    pub fn seg(&self) -> u32 {
        u32::from_be_bytes(be(&self.buffer.as_ref()[field::SEG]))
    }

    /// The header bytes.
    pub fn header(&self) -> &[u8] {
        &self.buffer.as_ref()[..HEADER_LEN]
    }

    /// The payload.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..HEADER_LEN + self.payload_len()]
    }

    /// Header plus payload length.
    pub fn total_len(&self) -> usize {
        HEADER_LEN + self.payload_len()
    }
}

fn be<const N: usize>(bytes: &[u8]) -> [u8; N] {
    let mut a = [0u8; N];
    a.copy_from_slice(&bytes[..N]);
    a
}

/// A parsed segment header: cannot hold an unknown kind or an oversized length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Repr {
    /// Data, fin or ack.
    pub kind: Kind,
    /// Payload length on the wire (AEAD: including the tag).
    pub len: u16,
    /// Per-path sequence number (0, 1, 2, ... on each path).
    pub path_seq: u32,
    /// Stream offset (fin: the stream length).
    pub offset: u64,
    /// Segment number over all paths (fin: the count of data segments).
    pub seg: u32,
}

impl Repr {
    /// Parses a checked view.
    ///
    /// # Errors
    /// [`Error::BadKind`], [`Error::Reserved`], [`Error::TooLong`] for a fin or an ack
    /// whose payload is neither empty nor one tag, [`Error::EmptyData`] for a data segment
    /// without payload.
    pub fn parse<T: AsRef<[u8]>>(s: &Segment<T>) -> Result<Self, Error> {
        s.check_len()?;
        let kind = match s.kind_code() {
            0x01 => Kind::Data,
            0x02 => Kind::Fin,
            0x03 => Kind::Ack,
            k => return Err(Error::BadKind(k)),
        };
        if s.buffer.as_ref()[field::RESERVED] != 0 {
            return Err(Error::Reserved);
        }
        let len = s.payload_len();
        if kind != Kind::Data && len != 0 && len != CONTROL_TAG_LEN {
            return Err(Error::TooLong);
        }
        if kind == Kind::Data && len == 0 {
            return Err(Error::EmptyData);
        }
        Ok(Self {
            kind,
            // check_len bounded it by MAX_PAYLOAD < 2^16.
            len: u16::try_from(len).map_err(|_| Error::TooLong)?,
            path_seq: s.path_seq(),
            offset: s.offset(),
            seg: s.seg(),
        })
    }

    /// Header length (the payload is written by the caller after it).
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header into `buf[..HEADER_LEN]`.
    ///
    /// # Panics
    /// If `buf` is shorter than [`HEADER_LEN`].
    pub fn emit(&self, buf: &mut [u8]) {
        buf[field::KIND] = self.kind.code();
        buf[field::RESERVED] = 0;
        buf[field::LEN].copy_from_slice(&self.len.to_be_bytes());
        buf[field::PATH_SEQ].copy_from_slice(&self.path_seq.to_be_bytes());
        buf[field::OFFSET].copy_from_slice(&self.offset.to_be_bytes());
        buf[field::SEG].copy_from_slice(&self.seg.to_be_bytes());
    }
}

/// How many bytes at the start of `buf` form one complete segment, if they do.
///
/// # Errors
/// [`Error::TooLong`] if the header announces more than [`MAX_PAYLOAD`].
pub fn segment_len(buf: &[u8]) -> Result<Option<usize>, Error> {
    if buf.len() < HEADER_LEN {
        return Ok(None);
    }
    let s = Segment::new_unchecked(buf);
    let len = s.payload_len();
    if len > MAX_PAYLOAD {
        return Err(Error::TooLong);
    }
    Ok((buf.len() >= HEADER_LEN + len).then_some(HEADER_LEN + len))
}

/// Which of the two paths a connection is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PathRole {
    /// The path the user trusts (the papers' Ethernet): carries the first segment and the SMKEX
    /// nonces, hash and confirmation.
    Trusted,
    /// The path an eavesdropper may read (the papers' WLAN): carries the SMKEX shares and the
    /// share policy's part of the stream.
    Untrusted,
}

/// The stream protection negotiated in the hello. The default is [`Cipher::Aes128Gcm`]:
/// [`Cipher::Scramble`] is the papers' mode, which a ciphertext-only analyst reads
/// (docs/SCRAMBLER.md), and must be chosen by name on both sides.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Cipher {
    /// No protection: the stream in clear (the papers' "plain" baseline).
    None,
    /// The papers' mode: psp-core's production scrambler over the whole stream before
    /// dispersal. Obfuscation, not encryption: no integrity, and an eavesdropper on one path
    /// recovers scrambled text from the ciphertext alone (`attack::ciphertext_only`).
    Scramble,
    /// AES-128-GCM on each segment, fin and ack (the default).
    #[default]
    Aes128Gcm,
    /// ChaCha20-Poly1305 on each segment, fin and ack (for CPUs without AES instructions).
    ChaCha20Poly1305,
}

impl Cipher {
    /// Every cipher, in code order.
    pub const ALL: &'static [Self] = &[
        Self::None,
        Self::Scramble,
        Self::Aes128Gcm,
        Self::ChaCha20Poly1305,
    ];

    /// The hello code.
    pub fn code(self) -> u8 {
        match self {
            Self::None => 0,
            Self::Scramble => 1,
            Self::Aes128Gcm => 2,
            Self::ChaCha20Poly1305 => 3,
        }
    }

    /// From a hello code (`None` for unknown codes).
    pub fn from_code(c: u8) -> Option<Self> {
        Self::ALL.iter().copied().find(|x| x.code() == c)
    }

    /// Whether each segment is sealed with an AEAD (a tag on every segment, fin and ack).
    pub fn is_aead(self) -> bool {
        matches!(self, Self::Aes128Gcm | Self::ChaCha20Poly1305)
    }

    /// A short name (`none`, `scramble`, `aes128-gcm`, `chacha20-poly1305`).
    pub fn name(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Scramble => "scramble",
            Self::Aes128Gcm => "aes128-gcm",
            Self::ChaCha20Poly1305 => "chacha20-poly1305",
        }
    }
}

impl fmt::Display for Cipher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Hello capability bits.
pub mod caps {
    /// The sender implements the scrambler (the papers' MP_CAPABLE scramble bit).
    pub const SCRAMBLE: u8 = 0x01;
    /// The sender implements per-segment AES-128-GCM. (ChaCha20-Poly1305 has no bit: an
    /// initiator asks for it by its cipher code, and a responder that does not know the code
    /// refuses the hello.)
    pub const AES128_GCM: u8 = 0x02;
    /// The sender accepts an unprotected stream.
    pub const ALLOW_PLAIN: u8 = 0x04;
    /// The connection is the only one (kernel MPTCP mode: the kernel spreads it over paths).
    pub const KERNEL_MPTCP: u8 = 0x08;
    /// The sender keeps its segments until acknowledged and re-sends them when a path fails
    /// (`OnPathFailure::Continue`): send it acks.
    pub const RESEND: u8 = 0x10;
    /// All defined bits.
    pub const ALL: u8 = SCRAMBLE | AES128_GCM | ALLOW_PLAIN | KERNEL_MPTCP | RESEND;
}

/// The responder's cipher code meaning "refused".
pub const CIPHER_REFUSED: u8 = 0xff;

/// The first 16 bytes on each connection, both directions.
///
/// ```text
///  0..4 "PSMP" | 4 version | 5 path role (0 untrusted, 1 trusted) | 6 caps | 7 cipher | 8..16 group id
/// ```
/// The initiator's `cipher` is the one it wants; the responder's is the one chosen, or
/// [`CIPHER_REFUSED`]. `group` ties a client's two connections together (random, chosen by the
/// initiator, echoed). Hellos are not secret; they are authenticated after the handshake by the
/// binding tag (see `docs/MULTIPATH.md`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hello {
    /// Which path this connection is.
    pub role: PathRole,
    /// Capability bits ([`caps`]).
    pub caps: u8,
    /// Wanted (initiator) or chosen (responder) cipher code.
    pub cipher: u8,
    /// The connection group id.
    pub group: [u8; 8],
}

impl Hello {
    /// Parses a hello.
    ///
    /// # Errors
    /// [`Error::Truncated`], [`Error::BadMagic`], [`Error::BadVersion`], or
    /// [`Error::BadField`] for a path role other than 0/1 or unknown capability bits.
    pub fn parse(b: &[u8]) -> Result<Self, Error> {
        let b = b.get(..HELLO_LEN).ok_or(Error::Truncated)?;
        if b[..4] != MAGIC {
            return Err(Error::BadMagic);
        }
        if b[4] != VERSION {
            return Err(Error::BadVersion(b[4]));
        }
        let role = match b[5] {
            0 => PathRole::Untrusted,
            1 => PathRole::Trusted,
            _ => return Err(Error::BadField("path role")),
        };
        if b[6] & !caps::ALL != 0 {
            return Err(Error::BadField("capabilities"));
        }
        if Cipher::from_code(b[7]).is_none() && b[7] != CIPHER_REFUSED {
            return Err(Error::BadField("cipher"));
        }
        Ok(Self {
            role,
            caps: b[6],
            cipher: b[7],
            group: be(&b[8..16]),
        })
    }

    /// The hello's bytes.
    pub fn emit(&self) -> [u8; HELLO_LEN] {
        let mut b = [0u8; HELLO_LEN];
        b[..4].copy_from_slice(&MAGIC);
        b[4] = VERSION;
        b[5] = match self.role {
            PathRole::Untrusted => 0,
            PathRole::Trusted => 1,
        };
        b[6] = self.caps;
        b[7] = self.cipher;
        b[8..].copy_from_slice(&self.group);
        b
    }
}

/// Handshake message framing: a 2-byte big-endian length, then that many bytes of a
/// psp-core handshake message.
pub struct HandshakeFrame;

impl HandshakeFrame {
    /// Length of the prefix.
    pub const PREFIX_LEN: usize = 2;

    /// If `buf` starts with a complete frame: the message's range in `buf` and the frame length.
    ///
    /// # Errors
    /// [`Error::TooLong`] if the prefix announces more than [`MAX_HANDSHAKE_LEN`], or
    /// [`Error::BadField`] for an empty message.
    pub fn parse(buf: &[u8]) -> Result<Option<(Range<usize>, usize)>, Error> {
        let Some(prefix) = buf.get(..Self::PREFIX_LEN) else {
            return Ok(None);
        };
        let len = usize::from(u16::from_be_bytes(be(prefix)));
        if len > MAX_HANDSHAKE_LEN {
            return Err(Error::TooLong);
        }
        if len == 0 {
            return Err(Error::BadField("handshake length"));
        }
        let end = Self::PREFIX_LEN + len;
        Ok((buf.len() >= end).then_some((Self::PREFIX_LEN..end, end)))
    }

    /// Appends a framed message to `out`.
    ///
    /// # Panics
    /// If `msg` is longer than [`MAX_HANDSHAKE_LEN`] (psp-core's messages never are: it is
    /// their maximum).
    pub fn emit(msg: &[u8], out: &mut Vec<u8>) {
        assert!(msg.len() <= MAX_HANDSHAKE_LEN, "handshake message too long");
        // Bounded by the assert above.
        let len = u16::try_from(msg.len()).unwrap_or(u16::MAX);
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(msg);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static SEGMENT: [u8; 23] = [
        0x01, 0x00, 0x00, 0x03, // kind data, len 3
        0x00, 0x00, 0x00, 0x07, // path seq 7
        0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, // offset 65536
        0x00, 0x00, 0x00, 0x05, // seg 5
        b'a', b'b', b'c',
    ];

    fn repr() -> Repr {
        Repr {
            kind: Kind::Data,
            len: 3,
            path_seq: 7,
            offset: 65536,
            seg: 5,
        }
    }

    #[test]
    fn deconstruct() {
        let s = Segment::new_checked(&SEGMENT[..]).unwrap();
        assert_eq!(s.kind_code(), 1);
        assert_eq!(s.payload_len(), 3);
        assert_eq!(s.path_seq(), 7);
        assert_eq!(s.offset(), 65536);
        assert_eq!(s.seg(), 5);
        assert_eq!(s.payload(), b"abc");
        assert_eq!(s.total_len(), 23);
    }

    #[test]
    fn construct() {
        let mut buf = [0u8; 23];
        repr().emit(&mut buf);
        buf[HEADER_LEN..].copy_from_slice(b"abc");
        assert_eq!(buf, SEGMENT);
    }

    #[test]
    fn check_len() {
        assert_eq!(
            Segment::new_checked(&SEGMENT[..19]).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(
            Segment::new_checked(&SEGMENT[..22]).unwrap_err(),
            Error::Truncated
        );
        let mut long = SEGMENT;
        long[2..4].copy_from_slice(&u16::MAX.to_be_bytes());
        assert_eq!(Segment::new_checked(&long[..]).unwrap_err(), Error::TooLong);
        assert_eq!(segment_len(&long), Err(Error::TooLong));
        assert_eq!(segment_len(&SEGMENT[..22]), Ok(None));
        assert_eq!(segment_len(&SEGMENT), Ok(Some(23)));
    }

    #[test]
    fn parse() {
        let s = Segment::new_checked(&SEGMENT[..]).unwrap();
        assert_eq!(Repr::parse(&s), Ok(repr()));
        let mut bad = SEGMENT;
        bad[0] = 9;
        assert_eq!(
            Repr::parse(&Segment::new_unchecked(&bad[..])),
            Err(Error::BadKind(9))
        );
        let mut bad = SEGMENT;
        bad[1] = 1;
        assert_eq!(
            Repr::parse(&Segment::new_unchecked(&bad[..])),
            Err(Error::Reserved)
        );
        let mut fin = SEGMENT;
        fin[0] = 2;
        assert_eq!(
            Repr::parse(&Segment::new_unchecked(&fin[..])),
            Err(Error::TooLong)
        );
        // A data segment carries at least one byte.
        let mut empty = [0u8; HEADER_LEN];
        empty.copy_from_slice(&SEGMENT[..HEADER_LEN]);
        empty[2..4].fill(0);
        assert_eq!(
            Repr::parse(&Segment::new_checked(&empty[..]).unwrap()),
            Err(Error::EmptyData)
        );
        assert_eq!(Error::EmptyData.to_string(), "empty data segment");
    }

    static ACK: [u8; 36] = [
        0x03, 0x00, 0x00, 0x10, // kind ack, len 16 (a tag)
        0x00, 0x00, 0x00, 0x02, // path seq 2
        0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, // 262144 bytes delivered
        0x00, 0x00, 0x00, 0x10, // 16 segments delivered
        0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, // tag
        0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa,
    ];

    #[test]
    fn ack_parse_emit_and_lengths() {
        let s = Segment::new_checked(&ACK[..]).unwrap();
        let r = Repr::parse(&s).unwrap();
        assert_eq!(
            r,
            Repr {
                kind: Kind::Ack,
                len: 16,
                path_seq: 2,
                offset: 262_144,
                seg: 16
            }
        );
        let mut out = [0u8; HEADER_LEN];
        r.emit(&mut out);
        assert_eq!(out[..], ACK[..HEADER_LEN]);
        // An unsealed ack: no payload.
        let mut bare = [0u8; HEADER_LEN];
        bare.copy_from_slice(&ACK[..HEADER_LEN]);
        bare[3] = 0;
        assert_eq!(
            Repr::parse(&Segment::new_checked(&bare[..]).unwrap()).map(|r| r.len),
            Ok(0)
        );
        // Anything else than nothing or one tag is refused.
        let mut long = ACK;
        long[3] = 15;
        assert_eq!(
            Repr::parse(&Segment::new_checked(&long[..]).unwrap()),
            Err(Error::TooLong)
        );
        assert_eq!(
            Segment::new_checked(&ACK[..35]).unwrap_err(),
            Error::Truncated
        );
    }

    #[test]
    fn buffer_len() {
        assert_eq!(repr().buffer_len(), HEADER_LEN);
    }

    #[test]
    fn hello_round_trip_and_errors() {
        let h = Hello {
            role: PathRole::Trusted,
            caps: caps::SCRAMBLE | caps::AES128_GCM,
            cipher: Cipher::Scramble.code(),
            group: [1, 2, 3, 4, 5, 6, 7, 8],
        };
        let b = h.emit();
        assert_eq!(&b[..8], b"PSMP\x03\x01\x03\x01");
        assert_eq!(Hello::parse(&b), Ok(h));
        assert_eq!(Hello::parse(&b[..15]), Err(Error::Truncated));
        let mut x = b;
        x[0] = b'X';
        assert_eq!(Hello::parse(&x), Err(Error::BadMagic));
        let mut x = b;
        x[4] = 2;
        assert_eq!(Hello::parse(&x), Err(Error::BadVersion(2)));
        let mut x = b;
        x[5] = 2;
        assert_eq!(Hello::parse(&x), Err(Error::BadField("path role")));
        let mut x = b;
        x[6] = 0x80;
        assert_eq!(Hello::parse(&x), Err(Error::BadField("capabilities")));
        let mut x = b;
        x[7] = 7;
        assert_eq!(Hello::parse(&x), Err(Error::BadField("cipher")));
    }

    #[test]
    fn handshake_frame() {
        let mut out = Vec::new();
        HandshakeFrame::emit(b"hello", &mut out);
        assert_eq!(out, b"\x00\x05hello");
        assert_eq!(HandshakeFrame::parse(&out), Ok(Some((2..7, 7))));
        assert_eq!(HandshakeFrame::parse(&out[..6]), Ok(None));
        assert_eq!(HandshakeFrame::parse(&out[..1]), Ok(None));
        assert_eq!(HandshakeFrame::parse(b"\xff\xff"), Err(Error::TooLong));
        // The bound is psp-core's longest message, a KemShare: 1238 is a frame, 1239 is not.
        assert_eq!(MAX_HANDSHAKE_LEN, 1238);
        let mut kem_share = vec![0x04, 0xd6];
        kem_share.resize(2 + 1238, 0xaa);
        assert_eq!(HandshakeFrame::parse(&kem_share), Ok(Some((2..1240, 1240))));
        assert_eq!(HandshakeFrame::parse(b"\x04\xd7"), Err(Error::TooLong));
        let mut out = Vec::new();
        HandshakeFrame::emit(&kem_share[2..], &mut out);
        assert_eq!(out, kem_share);
        assert_eq!(
            HandshakeFrame::parse(b"\x00\x00"),
            Err(Error::BadField("handshake length"))
        );
    }
}
