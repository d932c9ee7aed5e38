//! The normalized payload header: the first bytes of every PSP section of sub-protocol
//! [`Protocol::Normalized`](crate::wire::Protocol::Normalized), real or dummy.
//!
//! ```text
//!  0        1        2                                         8
//! +--------+--------+-----------------------------------------+
//! | ver=1  | flags=0|       sequence number (BE48)            |
//! +--------+--------+-----------------------------------------+
//! |  S_current (BE32, kbit/s)       |  R_recent (BE32)        |   8..16
//! +---------------------------------+-------------------------+
//! |  S_suggested (BE32, kbit/s)     |  R_current (BE32)       |  16..24
//! +---------------------------------+-------------------------+
//! |  departure slot (BE32, µs, sender's clock, mod 2^32)      |  24..28
//! +-----------------------------------------------------------+
//! |  data: packed segments, then zero padding ...             |  28..
//! +-----------------------------------------------------------+
//! ```
//!
//! The four feedback values are seed 003's (§IV-C): the sender's S_current, the highest round
//! R_recent it received from the peer, the S_suggested it computed for the peer and the round
//! R_current of that suggestion. The sequence number counts outer frames (dummies included) from
//! 1; it never depends on inner traffic and never wraps (48 bits). The departure slot is the
//! pacer's scheduled time for this frame (not the actual send time, so it reveals nothing about
//! the sender's processing); the improved controller derives one-way queueing delay from it. An
//! observer sees the departure times anyway. The whole header is inside the PSP encrypted
//! section, so only the peer reads or changes it.
//!
//! Panic contract as in [`crate::wire`]: after [`Frame::check_len`] no accessor panics;
//! [`Repr::emit`] panics only on a buffer shorter than [`HEADER_LEN`]; [`Repr::parse`] never
//! panics.

use core::fmt;

use super::Rate;

/// The header version this implementation speaks.
pub const VERSION: u8 = 1;
/// The length of the header before the data area.
pub const HEADER_LEN: usize = field::DATA;
/// The largest sequence number (48 bits).
pub const MAX_SEQ: u64 = (1 << 48) - 1;

mod field {
    pub(super) type Field = core::ops::Range<usize>;

    pub(super) const VERSION: usize = 0;
    pub(super) const FLAGS: usize = 1;
    pub(super) const SEQ: Field = 2..8;
    pub(super) const S_CURRENT: Field = 8..12;
    pub(super) const R_RECENT: Field = 12..16;
    pub(super) const S_SUGGESTED: Field = 16..20;
    pub(super) const R_CURRENT: Field = 20..24;
    pub(super) const SENT_AT: Field = 24..28;
    pub(super) const DATA: usize = 28;
}

/// Why a normalized payload or segment was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Error {
    /// Shorter than the header, or a segment runs past the end.
    Truncated,
    /// The version byte is not [`VERSION`].
    BadVersion,
    /// A reserved flag bit is set.
    ReservedFlags,
    /// The sequence number is 0 (sequence numbers start at 1).
    BadSeq,
    /// A segment header is malformed (reserved kind, empty, or fragment out of bounds).
    BadSegment,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Truncated => "truncated normalized payload",
            Self::BadVersion => "unsupported normalized header version",
            Self::ReservedFlags => "reserved normalized header flag set",
            Self::BadSeq => "normalized sequence number 0",
            Self::BadSegment => "malformed normalized segment",
        })
    }
}

impl core::error::Error for Error {}

/// A read/write view of a normalized payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Frame<T> {
    /// Wraps a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// Wraps a buffer after [`check_len`](Self::check_len).
    ///
    /// # Errors
    /// [`Error::Truncated`] if the buffer is shorter than [`HEADER_LEN`].
    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        let f = Self::new_unchecked(buffer);
        f.check_len()?;
        Ok(f)
    }

    /// Checks that every header field is inside the buffer.
    ///
    /// # Errors
    /// [`Error::Truncated`] if the buffer is shorter than [`HEADER_LEN`].
    pub fn check_len(&self) -> Result<(), Error> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The version byte.
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VERSION]
    }

    /// The flags byte (reserved, 0).
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }

    /// The 48-bit sequence number.
    pub fn seq(&self) -> u64 {
        let b = &self.buffer.as_ref()[field::SEQ];
        let mut v = [0u8; 8];
        v[2..].copy_from_slice(b);
        u64::from_be_bytes(v)
    }

    /// The sender's current rate.
    pub fn s_current(&self) -> Rate {
        Rate::from_kbps(self.be32(field::S_CURRENT))
    }

    /// The highest round the sender received from us.
    pub fn r_recent(&self) -> u32 {
        self.be32(field::R_RECENT)
    }

    /// The rate the sender suggests for us.
    pub fn s_suggested(&self) -> Rate {
        Rate::from_kbps(self.be32(field::S_SUGGESTED))
    }

    /// The round of that suggestion.
    pub fn r_current(&self) -> u32 {
        self.be32(field::R_CURRENT)
    }

    /// The sender's departure slot in microseconds of its own clock, modulo 2^32.
    pub fn sent_at(&self) -> u32 {
        self.be32(field::SENT_AT)
    }

    /// The data area (segments and padding).
    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[field::DATA..]
    }

    fn be32(&self, f: field::Field) -> u32 {
        let b = &self.buffer.as_ref()[f];
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Frame<T> {
    /// Sets the version byte.
    pub fn set_version(&mut self, v: u8) {
        self.buffer.as_mut()[field::VERSION] = v;
    }

    /// Sets the flags byte.
    pub fn set_flags(&mut self, v: u8) {
        self.buffer.as_mut()[field::FLAGS] = v;
    }

    /// Sets the sequence number (the low 48 bits of `seq`).
    pub fn set_seq(&mut self, seq: u64) {
        let b = (seq & MAX_SEQ).to_be_bytes();
        self.buffer.as_mut()[field::SEQ].copy_from_slice(&b[2..]);
    }

    /// Sets S_current.
    pub fn set_s_current(&mut self, r: Rate) {
        self.set_be32(field::S_CURRENT, r.kbps());
    }

    /// Sets R_recent.
    pub fn set_r_recent(&mut self, r: u32) {
        self.set_be32(field::R_RECENT, r);
    }

    /// Sets S_suggested.
    pub fn set_s_suggested(&mut self, r: Rate) {
        self.set_be32(field::S_SUGGESTED, r.kbps());
    }

    /// Sets R_current.
    pub fn set_r_current(&mut self, r: u32) {
        self.set_be32(field::R_CURRENT, r);
    }

    /// Sets the departure slot.
    pub fn set_sent_at(&mut self, us: u32) {
        self.set_be32(field::SENT_AT, us);
    }

    /// The data area, writable.
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::DATA..]
    }

    fn set_be32(&mut self, f: field::Field, v: u32) {
        self.buffer.as_mut()[f].copy_from_slice(&v.to_be_bytes());
    }
}

/// The header's values: a sequence number and the four feedback values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Repr {
    /// The outer frame's sequence number (1..=[`MAX_SEQ`]).
    pub seq: u64,
    /// The sender's current rate, S_current.
    pub s_current: Rate,
    /// The highest round the sender received from its peer, R_recent.
    pub r_recent: u32,
    /// The rate the sender suggests for its peer, S_suggested.
    pub s_suggested: Rate,
    /// The round of that suggestion, R_current.
    pub r_current: u32,
    /// The sender's departure slot (µs of its clock, mod 2^32).
    pub sent_at: u32,
}

impl Repr {
    /// Parses a checked view.
    ///
    /// # Errors
    /// [`Error::Truncated`], [`Error::BadVersion`], [`Error::ReservedFlags`] or
    /// [`Error::BadSeq`].
    pub fn parse<T: AsRef<[u8]>>(frame: &Frame<T>) -> Result<Self, Error> {
        frame.check_len()?;
        if frame.version() != VERSION {
            return Err(Error::BadVersion);
        }
        if frame.flags() != 0 {
            return Err(Error::ReservedFlags);
        }
        let seq = frame.seq();
        if seq == 0 {
            return Err(Error::BadSeq);
        }
        Ok(Self {
            seq,
            s_current: frame.s_current(),
            r_recent: frame.r_recent(),
            s_suggested: frame.s_suggested(),
            r_current: frame.r_current(),
            sent_at: frame.sent_at(),
        })
    }

    /// The header's length.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header (version, zero flags, every field).
    ///
    /// # Panics
    /// If the buffer is shorter than [`HEADER_LEN`].
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, frame: &mut Frame<T>) {
        frame.set_version(VERSION);
        frame.set_flags(0);
        frame.set_seq(self.seq);
        frame.set_s_current(self.s_current);
        frame.set_r_recent(self.r_recent);
        frame.set_s_suggested(self.s_suggested);
        frame.set_r_current(self.r_current);
        frame.set_sent_at(self.sent_at);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static FIXTURE: [u8; 32] = [
        0x01, 0x00, // version, flags
        0x00, 0x00, 0x01, 0x02, 0x03, 0x04, // seq 0x01020304
        0x00, 0x00, 0x1f, 0xe0, // S_current 8160 kbit/s
        0x00, 0x00, 0x00, 0x07, // R_recent 7
        0x00, 0x00, 0x00, 0xcc, // S_suggested 204 kbit/s
        0x00, 0x00, 0x00, 0x09, // R_current 9
        0x00, 0x0f, 0x42, 0x40, // sent at 1 000 000 µs
        0x40, 0x02, 0xaa, 0xbb, // data: one whole segment of 2 bytes
    ];

    fn repr() -> Repr {
        Repr {
            seq: 0x0102_0304,
            s_current: Rate::from_kbps(8160),
            r_recent: 7,
            s_suggested: Rate::from_kbps(204),
            r_current: 9,
            sent_at: 1_000_000,
        }
    }

    #[test]
    fn deconstruct() {
        let f = Frame::new_checked(&FIXTURE[..]).unwrap();
        assert_eq!(f.version(), 1);
        assert_eq!(f.flags(), 0);
        assert_eq!(f.seq(), 0x0102_0304);
        assert_eq!(f.s_current(), Rate::from_kbps(8160));
        assert_eq!(f.r_recent(), 7);
        assert_eq!(f.s_suggested(), Rate::from_kbps(204));
        assert_eq!(f.r_current(), 9);
        assert_eq!(f.sent_at(), 1_000_000);
        assert_eq!(f.data(), &[0x40, 0x02, 0xaa, 0xbb]);
    }

    #[test]
    fn construct() {
        let mut buf = [0u8; 32];
        let mut f = Frame::new_unchecked(&mut buf[..]);
        f.set_version(1);
        f.set_flags(0);
        f.set_seq(0x0102_0304);
        f.set_s_current(Rate::from_kbps(8160));
        f.set_r_recent(7);
        f.set_s_suggested(Rate::from_kbps(204));
        f.set_r_current(9);
        f.set_sent_at(1_000_000);
        f.data_mut().copy_from_slice(&[0x40, 0x02, 0xaa, 0xbb]);
        assert_eq!(buf, FIXTURE);
    }

    #[test]
    fn check_len() {
        assert_eq!(
            Frame::new_checked(&FIXTURE[..HEADER_LEN - 1]).unwrap_err(),
            Error::Truncated
        );
        assert!(Frame::new_checked(&FIXTURE[..HEADER_LEN]).is_ok());
    }

    #[test]
    fn parse() {
        let f = Frame::new_checked(&FIXTURE[..]).unwrap();
        assert_eq!(Repr::parse(&f), Ok(repr()));
        let mut bad = FIXTURE;
        bad[0] = 2;
        assert_eq!(
            Repr::parse(&Frame::new_unchecked(&bad[..])),
            Err(Error::BadVersion)
        );
        bad = FIXTURE;
        bad[1] = 0x80;
        assert_eq!(
            Repr::parse(&Frame::new_unchecked(&bad[..])),
            Err(Error::ReservedFlags)
        );
        bad = FIXTURE;
        bad[2..8].fill(0);
        assert_eq!(
            Repr::parse(&Frame::new_unchecked(&bad[..])),
            Err(Error::BadSeq)
        );
        assert_eq!(
            Repr::parse(&Frame::new_unchecked(&FIXTURE[..3])),
            Err(Error::Truncated)
        );
    }

    #[test]
    fn emit_and_buffer_len() {
        let r = repr();
        assert_eq!(r.buffer_len(), HEADER_LEN);
        let mut buf = [0xffu8; 32];
        buf[28..].copy_from_slice(&[0x40, 0x02, 0xaa, 0xbb]);
        r.emit(&mut Frame::new_unchecked(&mut buf[..]));
        assert_eq!(buf, FIXTURE);
    }

    #[test]
    fn seq_is_48_bits() {
        let mut buf = [0u8; HEADER_LEN];
        let mut f = Frame::new_unchecked(&mut buf[..]);
        f.set_seq(MAX_SEQ);
        assert_eq!(f.seq(), MAX_SEQ);
        f.set_seq(MAX_SEQ + 2);
        assert_eq!(f.seq(), 1);
    }
}
