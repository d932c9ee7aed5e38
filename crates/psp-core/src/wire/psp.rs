//! The PSP frame (thesis §4.1, Fig 4.2) as it appears on an Ethernet link.
//!
//! ```text
//!  0                   6                  12        14   15          19
//! +-------------------+-------------------+---------+----+-----------+
//! |  destination MAC  |    source MAC     | 0x1982  | VF | SN (BE32) |
//! +-------------------+-------------------+---------+----+-----------+
//! | [security number (BE24) if VF & 0x10] | [timestamp (BE32) if VF & 0x08] |
//! +---------------------------------------+----------------------------------+
//! | encrypted section: protocol (BE16) | pad size (1) | data ... | padding |
//! +---------------------------------------------------------------------------+
//! | ICV (suite ICV length) | [Ed25519 signature (64) if VF & 0x02]          |
//! +---------------------------------------------------------------------------+
//! ```
//!
//! `VF` = version (top 3 bits, must be 0) | flags (low 5 bits). The ICV length is not on the wire:
//! the receiver knows the suite from the sender's MAC (session key mapping, thesis §4.4.3), so the
//! views take it as a parameter.

use core::fmt;

use super::{Error, Result};

/// The EtherType that marks a PSP frame (thesis §4.1).
pub const ETHERTYPE_PSP: u16 = 0x1982;
/// Length of an Ethernet II header (dst, src, EtherType).
pub const ETHERNET_HEADER_LEN: usize = 14;
/// Length of the shortest clear part: Ethernet header, version/flags byte and SN.
pub const HEADER_LEN: usize = field::SEQ.end;
/// Length of the longest clear part (security number and timestamp present).
pub const MAX_HEADER_LEN: usize = HEADER_LEN + field::SECNUM_LEN + field::TIMESTAMP_LEN;
/// Length of the sub-header at the start of the encrypted section (protocol type, pad size).
pub const SECTION_HEADER_LEN: usize = field::SECTION_DATA;
/// The shortest frame a sealer emits: the Ethernet minimum without FCS. Shorter frames would be
/// padded by the link *after* the ICV, which the receiver cannot tell from the frame.
pub const MIN_FRAME_LEN: usize = 60;
/// The largest legal padding (thesis: "up to 512 bits").
pub const MAX_PADDING: usize = 64;
/// Length of the Ed25519 signature appended when the digital-signature flag is set.
pub const SIGNATURE_LEN: usize = 64;

mod field {
    pub(super) type Field = core::ops::Range<usize>;

    pub(super) const DST: Field = 0..6;
    pub(super) const SRC: Field = 6..12;
    pub(super) const ETHERTYPE: Field = 12..14;
    pub(super) const VER_FLAGS: usize = 14;
    pub(super) const SEQ: Field = 15..19;
    // Optional fields follow SEQ in this order when their flag is set.
    pub(super) const SECNUM_LEN: usize = 3;
    pub(super) const TIMESTAMP_LEN: usize = 4;

    // Offsets inside the encrypted section.
    pub(super) const PROTOCOL: Field = 0..2;
    pub(super) const PAD_LEN: usize = 2;
    pub(super) const SECTION_DATA: usize = 3;
}

enum_with_unknown! {
    /// The PSP version (top 3 bits of the first header byte). Only version 0 exists.
    #[non_exhaustive]
    pub enum Version(u8) {
        /// Version 0, the thesis' protocol.
        V0 = 0,
    }
}

/// The five security flags (low 5 bits of the first header byte).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Flags(u8);

impl Flags {
    /// A 24-bit security number follows the SN.
    pub const SECURITY_NUMBER: Self = Self(0x10);
    /// A 32-bit timestamp follows the SN (and the security number, if any).
    pub const TIMESTAMP: Self = Self(0x08);
    /// Reserved: must be 0 on send; frames with it set are rejected.
    pub const RESERVED: Self = Self(0x04);
    /// An Ed25519 signature follows the suite ICV.
    pub const SIGNATURE: Self = Self(0x02);
    /// The section is encrypted (thesis default: set).
    pub const ENCRYPTION: Self = Self(0x01);
    /// No flag.
    pub const EMPTY: Self = Self(0);

    /// The flags in the low 5 bits of `bits`; the version bits are ignored.
    pub const fn from_bits_truncate(bits: u8) -> Self {
        Self(bits & 0x1f)
    }

    /// The raw 5 bits.
    pub const fn bits(self) -> u8 {
        self.0
    }

    /// Whether every flag of `other` is set in `self`.
    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }

    /// `self` with the flags of `other` set or cleared.
    #[must_use]
    pub const fn with(self, other: Self, on: bool) -> Self {
        if on {
            Self(self.0 | other.0)
        } else {
            Self(self.0 & !other.0)
        }
    }
}

impl fmt::Debug for Flags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Flags({:#04x})", self.0)
    }
}

/// A 32-bit PSP sequence number. It never wraps: arithmetic is checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Seq(pub u32);

impl Seq {
    /// The following sequence number, or `None` at `u32::MAX` (the key must be replaced).
    pub const fn next(self) -> Option<Self> {
        match self.0.checked_add(1) {
            Some(n) => Some(Self(n)),
            None => None,
        }
    }

    /// `self + n`, or `None` on overflow.
    pub const fn checked_add(self, n: u32) -> Option<Self> {
        match self.0.checked_add(n) {
            Some(v) => Some(Self(v)),
            None => None,
        }
    }

    /// `self - other`, or `None` if `other` is larger.
    pub const fn checked_sub(self, other: Self) -> Option<u32> {
        self.0.checked_sub(other.0)
    }
}

impl fmt::Display for Seq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// A 24-bit security number (thesis §4.1: a shared, periodically changed replay guard).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SecurityNumber(u32);

impl SecurityNumber {
    /// The largest security number.
    pub const MAX: u32 = 0x00ff_ffff;

    /// `value` if it fits 24 bits.
    ///
    /// # Errors
    /// [`Error::BadValue`] if `value > 0xff_ffff`.
    pub const fn new(value: u32) -> Result<Self> {
        if value > Self::MAX {
            return Err(Error::BadValue);
        }
        Ok(Self(value))
    }

    /// The number.
    pub const fn get(self) -> u32 {
        self.0
    }
}

/// What the encrypted section carries: the inner frame's EtherType or a PSP sub-protocol.
///
/// Sub-protocol numbers are below 0x0600: no EtherType uses them (they are IEEE 802.3 length
/// values), so they cannot collide with a protected frame's type. `u16 -> Protocol -> u16` is
/// lossless. `EtherType(x)` with `x < 0x0600` is representable but never produced by parsing and
/// refused by the sealer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Protocol {
    /// A protected Ethernet II frame with this EtherType (>= 0x0600).
    EtherType(u16),
    /// 0x0001: session establishment (thesis §4.4.2).
    SessionEstablishment,
    /// 0x0002: control and feedback (rate control).
    Control,
    /// 0x0003: dummy frame for traffic normalization; receivers discard it.
    Dummy,
    /// 0x0004: key exchange messages (multipath).
    KeyExchange,
    /// 0x0005: a normalized payload (traffic normalization: feedback header, then packed inner
    /// frames or padding; see `crate::normalize`).
    Normalized,
    /// 0x0006: a group copy: a broadcast or multicast frame sent to one peer under its unicast
    /// key (its session key), whose data is the inner frame's destination MAC (6 bytes), its
    /// EtherType (2) and its payload (the source MAC is the PSP frame's).
    GroupCopy,
    /// 0x0007: a membership message (docs/MEMBERSHIP.md): a certificate announced under the
    /// group key, a revocation list or a member's state under a session key.
    Membership,
    /// Another value below 0x0600.
    UnknownSub(u16),
}

impl Protocol {
    /// The smallest value that is an EtherType rather than an 802.3 length / sub-protocol.
    pub const MIN_ETHERTYPE: u16 = 0x0600;

    /// Whether this is a PSP sub-protocol rather than a protected frame.
    pub const fn is_sub_protocol(self) -> bool {
        !matches!(self, Self::EtherType(_))
    }
}

impl From<u16> for Protocol {
    fn from(v: u16) -> Self {
        match v {
            0x0001 => Self::SessionEstablishment,
            0x0002 => Self::Control,
            0x0003 => Self::Dummy,
            0x0004 => Self::KeyExchange,
            0x0005 => Self::Normalized,
            0x0006 => Self::GroupCopy,
            0x0007 => Self::Membership,
            v if v >= Self::MIN_ETHERTYPE => Self::EtherType(v),
            v => Self::UnknownSub(v),
        }
    }
}

impl From<Protocol> for u16 {
    fn from(p: Protocol) -> Self {
        match p {
            Protocol::EtherType(v) | Protocol::UnknownSub(v) => v,
            Protocol::SessionEstablishment => 0x0001,
            Protocol::Control => 0x0002,
            Protocol::Dummy => 0x0003,
            Protocol::KeyExchange => 0x0004,
            Protocol::Normalized => 0x0005,
            Protocol::GroupCopy => 0x0006,
            Protocol::Membership => 0x0007,
        }
    }
}

/// A read/write view of a whole PSP layer-2 frame.
///
/// `icv_len` is the cipher suite's ICV length (without the signature, whose presence the
/// digital-signature flag tells).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame<T: AsRef<[u8]>> {
    buffer: T,
    icv_len: usize,
}

impl<T: AsRef<[u8]>> Frame<T> {
    /// A view without any length check (see the module's panic contract).
    pub const fn new_unchecked(buffer: T, icv_len: usize) -> Self {
        Self { buffer, icv_len }
    }

    /// A view after [`check_len`](Self::check_len).
    ///
    /// # Errors
    /// [`Error::Truncated`] if the buffer cannot hold the header, section sub-header and ICV.
    pub fn new_checked(buffer: T, icv_len: usize) -> Result<Self> {
        let frame = Self::new_unchecked(buffer, icv_len);
        frame.check_len()?;
        Ok(frame)
    }

    /// Checks that every accessor can run without panicking: the clear header (as sized by the
    /// flags), a section of at least [`SECTION_HEADER_LEN`] bytes and the trailer fit.
    ///
    /// # Errors
    /// [`Error::Truncated`] otherwise.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let min = self
            .header_len()
            .checked_add(SECTION_HEADER_LEN)
            .and_then(|n| n.checked_add(self.trailer_len()?))
            .ok_or(Error::Truncated)?;
        if len < min {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The suite ICV length this view was made with.
    pub const fn icv_len(&self) -> usize {
        self.icv_len
    }

    /// The destination MAC address.
    pub fn dst_addr(&self) -> [u8; 6] {
        read_array(&self.buffer.as_ref()[field::DST])
    }

    /// The source MAC address.
    pub fn src_addr(&self) -> [u8; 6] {
        read_array(&self.buffer.as_ref()[field::SRC])
    }

    /// The EtherType (0x1982 for PSP).
    pub fn ethertype(&self) -> u16 {
        u16::from_be_bytes(read_array(&self.buffer.as_ref()[field::ETHERTYPE]))
    }

    /// The raw version/flags byte.
    pub fn ver_flags(&self) -> u8 {
        self.buffer.as_ref()[field::VER_FLAGS]
    }

    /// The version (top 3 bits).
    pub fn version(&self) -> Version {
        Version::from(self.ver_flags() >> 5)
    }

    /// The flags (low 5 bits).
    pub fn flags(&self) -> Flags {
        Flags::from_bits_truncate(self.ver_flags())
    }

    /// The sequence number.
    pub fn seq_number(&self) -> Seq {
        Seq(u32::from_be_bytes(read_array(
            &self.buffer.as_ref()[field::SEQ],
        )))
    }

    /// The security number, if the flag is set.
    pub fn security_number(&self) -> Option<SecurityNumber> {
        let at = self.secnum_offset()?;
        let b = &self.buffer.as_ref()[at..at + field::SECNUM_LEN];
        Some(SecurityNumber(u32::from_be_bytes([0, b[0], b[1], b[2]])))
    }

    /// The timestamp (milliseconds modulo 2^32), if the flag is set.
    pub fn timestamp(&self) -> Option<u32> {
        let at = self.timestamp_offset()?;
        Some(u32::from_be_bytes(read_array(
            &self.buffer.as_ref()[at..at + field::TIMESTAMP_LEN],
        )))
    }

    /// Length of the clear part (Ethernet header + PSP clear header), from the flags.
    pub fn header_len(&self) -> usize {
        let flags = self.flags();
        let mut len = HEADER_LEN;
        if flags.contains(Flags::SECURITY_NUMBER) {
            len += field::SECNUM_LEN;
        }
        if flags.contains(Flags::TIMESTAMP) {
            len += field::TIMESTAMP_LEN;
        }
        len
    }

    /// Length of the trailer: the suite ICV plus the signature if flagged (`None` on overflow).
    pub fn trailer_len(&self) -> Option<usize> {
        let sig = if self.flags().contains(Flags::SIGNATURE) {
            SIGNATURE_LEN
        } else {
            0
        };
        self.icv_len.checked_add(sig)
    }

    /// The clear part: everything before the encrypted section (the AAD / MAC prefix).
    pub fn clear(&self) -> &[u8] {
        &self.buffer.as_ref()[..self.header_len()]
    }

    /// The (encrypted) section.
    pub fn section(&self) -> &[u8] {
        &self.buffer.as_ref()[self.section_range()]
    }

    /// The suite ICV.
    pub fn icv(&self) -> &[u8] {
        let end = self.section_range().end;
        &self.buffer.as_ref()[end..end + self.icv_len]
    }

    /// The Ed25519 signature, if the flag is set.
    pub fn signature(&self) -> Option<&[u8]> {
        if !self.flags().contains(Flags::SIGNATURE) {
            return None;
        }
        let buf = self.buffer.as_ref();
        Some(&buf[buf.len() - SIGNATURE_LEN..])
    }

    /// Everything the signature covers: clear part, section and suite ICV.
    pub fn signed_part(&self) -> &[u8] {
        let end = self.section_range().end + self.icv_len;
        &self.buffer.as_ref()[..end]
    }

    /// The byte range of the section inside the buffer.
    pub fn section_range(&self) -> core::ops::Range<usize> {
        let len = self.buffer.as_ref().len();
        let trailer = self.trailer_len().unwrap_or(usize::MAX);
        let end = len.saturating_sub(trailer);
        self.header_len()..end.max(self.header_len())
    }

    fn secnum_offset(&self) -> Option<usize> {
        self.flags()
            .contains(Flags::SECURITY_NUMBER)
            .then_some(HEADER_LEN)
    }

    fn timestamp_offset(&self) -> Option<usize> {
        let flags = self.flags();
        if !flags.contains(Flags::TIMESTAMP) {
            return None;
        }
        Some(if flags.contains(Flags::SECURITY_NUMBER) {
            HEADER_LEN + field::SECNUM_LEN
        } else {
            HEADER_LEN
        })
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Frame<T> {
    /// Sets the destination MAC address.
    pub fn set_dst_addr(&mut self, addr: [u8; 6]) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&addr);
    }

    /// Sets the source MAC address.
    pub fn set_src_addr(&mut self, addr: [u8; 6]) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&addr);
    }

    /// Sets the EtherType.
    pub fn set_ethertype(&mut self, value: u16) {
        self.buffer.as_mut()[field::ETHERTYPE].copy_from_slice(&value.to_be_bytes());
    }

    /// Sets the version/flags byte. Changes the layout of everything after the SN.
    pub fn set_ver_flags(&mut self, version: Version, flags: Flags) {
        self.buffer.as_mut()[field::VER_FLAGS] = (u8::from(version) << 5) | flags.bits();
    }

    /// Sets the sequence number.
    pub fn set_seq_number(&mut self, seq: Seq) {
        self.buffer.as_mut()[field::SEQ].copy_from_slice(&seq.0.to_be_bytes());
    }

    /// Sets the security number; does nothing unless its flag is set.
    pub fn set_security_number(&mut self, value: SecurityNumber) {
        if let Some(at) = self.secnum_offset() {
            let b = value.0.to_be_bytes();
            self.buffer.as_mut()[at..at + field::SECNUM_LEN].copy_from_slice(&b[1..]);
        }
    }

    /// Sets the timestamp; does nothing unless its flag is set.
    pub fn set_timestamp(&mut self, value: u32) {
        if let Some(at) = self.timestamp_offset() {
            self.buffer.as_mut()[at..at + field::TIMESTAMP_LEN]
                .copy_from_slice(&value.to_be_bytes());
        }
    }

    /// The section, mutably.
    pub fn section_mut(&mut self) -> &mut [u8] {
        let range = self.section_range();
        &mut self.buffer.as_mut()[range]
    }

    /// The suite ICV, mutably.
    pub fn icv_mut(&mut self) -> &mut [u8] {
        let end = self.section_range().end;
        let icv_len = self.icv_len;
        &mut self.buffer.as_mut()[end..end + icv_len]
    }

    /// The signature, mutably, if the flag is set.
    pub fn signature_mut(&mut self) -> Option<&mut [u8]> {
        if !self.flags().contains(Flags::SIGNATURE) {
            return None;
        }
        let buf = self.buffer.as_mut();
        let len = buf.len();
        Some(&mut buf[len - SIGNATURE_LEN..])
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for Frame<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// A read/write view of a decrypted section: protocol type, pad size, data, padding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Section<T> {
    /// A view without any check (see the module's panic contract).
    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// A view after [`check_len`](Self::check_len).
    ///
    /// # Errors
    /// As [`check_len`](Self::check_len).
    pub fn new_checked(buffer: T) -> Result<Self> {
        let section = Self::new_unchecked(buffer);
        section.check_len()?;
        Ok(section)
    }

    /// Checks that the sub-header fits and the padding fits both its 64-byte limit and the buffer.
    ///
    /// # Errors
    /// [`Error::Truncated`] if the sub-header does not fit; [`Error::BadPadding`] if the pad size
    /// exceeds [`MAX_PADDING`] or the bytes after the sub-header.
    pub fn check_len(&self) -> Result<()> {
        let buf = self.buffer.as_ref();
        if buf.len() < SECTION_HEADER_LEN {
            return Err(Error::Truncated);
        }
        let pad = usize::from(buf[field::PAD_LEN]);
        if pad > MAX_PADDING || SECTION_HEADER_LEN + pad > buf.len() {
            return Err(Error::BadPadding);
        }
        Ok(())
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The raw protocol type.
    pub fn protocol_raw(&self) -> u16 {
        u16::from_be_bytes(read_array(&self.buffer.as_ref()[field::PROTOCOL]))
    }

    /// The protocol type.
    pub fn protocol(&self) -> Protocol {
        Protocol::from(self.protocol_raw())
    }

    /// The pad size in bytes.
    pub fn pad_len(&self) -> u8 {
        self.buffer.as_ref()[field::PAD_LEN]
    }

    /// The data.
    pub fn data(&self) -> &[u8] {
        let buf = self.buffer.as_ref();
        &buf[field::SECTION_DATA..buf.len() - usize::from(self.pad_len())]
    }

    /// The byte range of the data inside the section.
    pub fn data_range(&self) -> core::ops::Range<usize> {
        let buf = self.buffer.as_ref();
        field::SECTION_DATA..buf.len() - usize::from(self.pad_len())
    }

    /// The padding (its value is ignored by receivers).
    pub fn padding(&self) -> &[u8] {
        let buf = self.buffer.as_ref();
        &buf[buf.len() - usize::from(self.pad_len())..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Section<T> {
    /// Sets the protocol type.
    pub fn set_protocol(&mut self, protocol: Protocol) {
        self.buffer.as_mut()[field::PROTOCOL].copy_from_slice(&u16::from(protocol).to_be_bytes());
    }

    /// Sets the pad size. Changes where the data ends.
    pub fn set_pad_len(&mut self, value: u8) {
        self.buffer.as_mut()[field::PAD_LEN] = value;
    }

    /// The data, mutably.
    pub fn data_mut(&mut self) -> &mut [u8] {
        let range = self.data_range();
        &mut self.buffer.as_mut()[range]
    }

    /// The padding, mutably.
    pub fn padding_mut(&mut self) -> &mut [u8] {
        let pad = usize::from(self.pad_len());
        let buf = self.buffer.as_mut();
        let len = buf.len();
        &mut buf[len - pad..]
    }
}

/// The clear part of a PSP frame as a value: addresses, SN and the optional fields.
///
/// The version is always 0 and the reserved flag always clear, so neither is stored; the
/// optional-field flags follow from the `Option`s.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Destination MAC address.
    pub dst_addr: [u8; 6],
    /// Source MAC address.
    pub src_addr: [u8; 6],
    /// Sequence number.
    pub seq: Seq,
    /// Security number (sets flag 0x10).
    pub security_number: Option<SecurityNumber>,
    /// Timestamp in milliseconds modulo 2^32 (sets flag 0x08).
    pub timestamp: Option<u32>,
    /// An Ed25519 signature follows the ICV (flag 0x02).
    pub signed: bool,
    /// The section is encrypted (flag 0x01).
    pub encrypted: bool,
}

impl Repr {
    /// Parses the clear part of a checked frame.
    ///
    /// # Errors
    /// [`Error::Truncated`], [`Error::NotPsp`], [`Error::BadVersion`] or [`Error::ReservedFlag`].
    pub fn parse<T: AsRef<[u8]> + ?Sized>(frame: &Frame<&T>) -> Result<Self> {
        frame.check_len()?;
        if frame.ethertype() != ETHERTYPE_PSP {
            return Err(Error::NotPsp);
        }
        if frame.version() != Version::V0 {
            return Err(Error::BadVersion);
        }
        let flags = frame.flags();
        if flags.contains(Flags::RESERVED) {
            return Err(Error::ReservedFlag);
        }
        Ok(Self {
            dst_addr: frame.dst_addr(),
            src_addr: frame.src_addr(),
            seq: frame.seq_number(),
            security_number: frame.security_number(),
            timestamp: frame.timestamp(),
            signed: flags.contains(Flags::SIGNATURE),
            encrypted: flags.contains(Flags::ENCRYPTION),
        })
    }

    /// The flags this header emits.
    pub const fn flags(&self) -> Flags {
        Flags::EMPTY
            .with(Flags::SECURITY_NUMBER, self.security_number.is_some())
            .with(Flags::TIMESTAMP, self.timestamp.is_some())
            .with(Flags::SIGNATURE, self.signed)
            .with(Flags::ENCRYPTION, self.encrypted)
    }

    /// Length of the clear part (Ethernet header + PSP clear header).
    pub const fn buffer_len(&self) -> usize {
        let mut len = HEADER_LEN;
        if self.security_number.is_some() {
            len += field::SECNUM_LEN;
        }
        if self.timestamp.is_some() {
            len += field::TIMESTAMP_LEN;
        }
        len
    }

    /// Length of the trailer for a suite ICV of `icv_len` bytes.
    pub const fn trailer_len(&self, icv_len: usize) -> usize {
        if self.signed {
            icv_len + SIGNATURE_LEN
        } else {
            icv_len
        }
    }

    /// Writes the clear part into `frame`.
    ///
    /// # Panics
    /// If the buffer is shorter than [`buffer_len`](Self::buffer_len).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, frame: &mut Frame<T>) {
        frame.set_dst_addr(self.dst_addr);
        frame.set_src_addr(self.src_addr);
        frame.set_ethertype(ETHERTYPE_PSP);
        frame.set_ver_flags(Version::V0, self.flags());
        frame.set_seq_number(self.seq);
        if let Some(sn) = self.security_number {
            frame.set_security_number(sn);
        }
        if let Some(ts) = self.timestamp {
            frame.set_timestamp(ts);
        }
    }
}

/// The decrypted section's sub-header as a value: protocol, data length and pad size (<= 64).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SectionRepr {
    protocol: Protocol,
    data_len: usize,
    pad_len: u8,
}

impl SectionRepr {
    /// A section carrying `data_len` bytes and `pad_len` bytes of padding.
    ///
    /// # Errors
    /// [`Error::BadPadding`] if `pad_len > 64`; [`Error::BadValue`] if the total overflows.
    pub fn new(protocol: Protocol, data_len: usize, pad_len: usize) -> Result<Self> {
        if pad_len > MAX_PADDING {
            return Err(Error::BadPadding);
        }
        data_len
            .checked_add(SECTION_HEADER_LEN + pad_len)
            .ok_or(Error::BadValue)?;
        Ok(Self {
            protocol,
            data_len,
            // `pad_len <= 64` was checked above.
            pad_len: pad_len as u8,
        })
    }

    /// A section carrying `data_len` bytes, padded to the smallest length that is a multiple of
    /// `granule` (1 = no padding; 0 is treated as 1).
    ///
    /// # Errors
    /// [`Error::BadPadding`] if that needs more than 64 bytes of padding (`granule > 65`).
    pub fn padded(protocol: Protocol, data_len: usize, granule: usize) -> Result<Self> {
        let granule = granule.max(1);
        let base = data_len
            .checked_add(SECTION_HEADER_LEN)
            .ok_or(Error::BadValue)?;
        let pad = (granule - base % granule) % granule;
        Self::new(protocol, data_len, pad)
    }

    /// Parses a decrypted section.
    ///
    /// # Errors
    /// As [`Section::check_len`].
    pub fn parse<T: AsRef<[u8]> + ?Sized>(section: &Section<&T>) -> Result<Self> {
        section.check_len()?;
        Ok(Self {
            protocol: section.protocol(),
            data_len: section.data().len(),
            pad_len: section.pad_len(),
        })
    }

    /// The protocol type.
    pub const fn protocol(&self) -> Protocol {
        self.protocol
    }

    /// The data length.
    pub const fn data_len(&self) -> usize {
        self.data_len
    }

    /// The pad size.
    pub const fn pad_len(&self) -> usize {
        self.pad_len as usize
    }

    /// The section length: sub-header, data and padding.
    pub const fn buffer_len(&self) -> usize {
        SECTION_HEADER_LEN + self.data_len + self.pad_len as usize
    }

    /// Writes the sub-header and zero padding into `section` (the data is the caller's), whose
    /// length must be exactly [`buffer_len`](Self::buffer_len).
    ///
    /// # Panics
    /// If the buffer is shorter than [`buffer_len`](Self::buffer_len).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, section: &mut Section<T>) {
        section.set_protocol(self.protocol);
        section.set_pad_len(self.pad_len);
        section.padding_mut().fill(0);
    }
}

fn read_array<const N: usize>(bytes: &[u8]) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(bytes);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    // Thesis default (Fig 4.3): flags 0x01, no optional fields; security number and timestamp
    // added here to cover every field. Suite ICV of 4 bytes for brevity.
    static FRAME_BYTES: [u8; 42] = [
        0x02, 0x00, 0x00, 0x00, 0x00, 0x02, // dst
        0x02, 0x00, 0x00, 0x00, 0x00, 0x01, // src
        0x19, 0x82, // EtherType
        0x19, // version 0, flags SN|TS|ENC
        0x12, 0x34, 0x56, 0x78, // SN
        0xab, 0xcd, 0xef, // security number
        0x00, 0x01, 0x02, 0x03, // timestamp
        0x08, 0x00, 0x02, // section: protocol IPv4, pad 2
        0xde, 0xad, 0xbe, 0xef, 0x01, 0x02, 0x03, 0x04, 0x05, // data
        0x00, 0x00, // padding
        0xc1, 0xc2, // ICV (first 2 of 4)
    ];

    fn fixture() -> [u8; 44] {
        let mut out = [0u8; 44];
        out[..42].copy_from_slice(&FRAME_BYTES);
        out[42] = 0xc3;
        out[43] = 0xc4;
        out
    }

    fn repr() -> Repr {
        Repr {
            dst_addr: [2, 0, 0, 0, 0, 2],
            src_addr: [2, 0, 0, 0, 0, 1],
            seq: Seq(0x1234_5678),
            security_number: Some(SecurityNumber::new(0xab_cdef).unwrap()),
            timestamp: Some(0x0001_0203),
            signed: false,
            encrypted: true,
        }
    }

    #[test]
    fn deconstruct() {
        let bytes = fixture();
        let frame = Frame::new_checked(&bytes[..], 4).unwrap();
        assert_eq!(frame.dst_addr(), [2, 0, 0, 0, 0, 2]);
        assert_eq!(frame.src_addr(), [2, 0, 0, 0, 0, 1]);
        assert_eq!(frame.ethertype(), ETHERTYPE_PSP);
        assert_eq!(frame.version(), Version::V0);
        assert_eq!(frame.flags().bits(), 0x19);
        assert_eq!(frame.seq_number(), Seq(0x1234_5678));
        assert_eq!(frame.security_number().unwrap().get(), 0xab_cdef);
        assert_eq!(frame.timestamp(), Some(0x0001_0203));
        assert_eq!(frame.header_len(), 26);
        assert_eq!(frame.clear().len(), 26);
        assert_eq!(frame.section().len(), 14);
        assert_eq!(frame.icv(), &[0xc1, 0xc2, 0xc3, 0xc4]);
        assert_eq!(frame.signature(), None);
        let section = Section::new_checked(frame.section()).unwrap();
        assert_eq!(section.protocol(), Protocol::EtherType(0x0800));
        assert_eq!(section.pad_len(), 2);
        assert_eq!(section.data(), &FRAME_BYTES[29..38]);
        assert_eq!(section.padding(), &[0, 0]);
    }

    #[test]
    fn construct() {
        let mut bytes = [0xffu8; 44];
        let mut frame = Frame::new_unchecked(&mut bytes[..], 4);
        frame.set_dst_addr([2, 0, 0, 0, 0, 2]);
        frame.set_src_addr([2, 0, 0, 0, 0, 1]);
        frame.set_ethertype(ETHERTYPE_PSP);
        frame.set_ver_flags(Version::V0, Flags::from_bits_truncate(0x19));
        frame.set_seq_number(Seq(0x1234_5678));
        frame.set_security_number(SecurityNumber::new(0xab_cdef).unwrap());
        frame.set_timestamp(0x0001_0203);
        {
            let mut section = Section::new_unchecked(frame.section_mut());
            section.set_protocol(Protocol::EtherType(0x0800));
            section.set_pad_len(2);
            section
                .data_mut()
                .copy_from_slice(&[0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5]);
            section.padding_mut().fill(0);
        }
        frame.icv_mut().copy_from_slice(&[0xc1, 0xc2, 0xc3, 0xc4]);
        assert_eq!(frame.into_inner(), &fixture()[..]);
    }

    #[test]
    fn check_len() {
        let bytes = fixture();
        assert_eq!(
            Frame::new_checked(&bytes[..HEADER_LEN - 1], 0),
            Err(Error::Truncated)
        );
        // Header (26) + section sub-header (3) + ICV (4) = 33 is the minimum.
        assert!(Frame::new_checked(&bytes[..33], 4).is_ok());
        assert_eq!(Frame::new_checked(&bytes[..32], 4), Err(Error::Truncated));
        assert_eq!(
            Frame::new_checked(&bytes[..], usize::MAX),
            Err(Error::Truncated)
        );
        for n in 0..bytes.len() {
            // Never panics, whatever the ICV length.
            for icv in [0, 4, 20, 64, 200] {
                if let Ok(f) = Frame::new_checked(&bytes[..n], icv) {
                    let _ = (f.section(), f.icv(), f.signature(), f.signed_part());
                    let _ = Repr::parse(&f);
                }
            }
        }
        assert_eq!(
            Section::new_checked(&[0x08, 0x00][..]),
            Err(Error::Truncated)
        );
        assert_eq!(
            Section::new_checked(&[0x08, 0x00, 1][..]),
            Err(Error::BadPadding)
        );
        let mut big = [0u8; 80];
        big[2] = 65;
        assert_eq!(Section::new_checked(&big[..]), Err(Error::BadPadding));
        big[2] = 64;
        assert!(Section::new_checked(&big[..67]).is_ok());
    }

    #[test]
    fn parse() {
        let bytes = fixture();
        let frame = Frame::new_checked(&bytes[..], 4).unwrap();
        assert_eq!(Repr::parse(&frame), Ok(repr()));
        let section = Section::new_checked(frame.section()).unwrap();
        let srepr = SectionRepr::parse(&section).unwrap();
        assert_eq!(srepr.protocol(), Protocol::EtherType(0x0800));
        assert_eq!(srepr.data_len(), 9);
        assert_eq!(srepr.pad_len(), 2);
    }

    #[test]
    fn parse_rejects() {
        let mut bytes = fixture();
        bytes[14] = 0x39; // version 1
        assert_eq!(
            Repr::parse(&Frame::new_unchecked(&bytes[..], 4)),
            Err(Error::BadVersion)
        );
        bytes[14] = 0x1d; // reserved flag
        assert_eq!(
            Repr::parse(&Frame::new_unchecked(&bytes[..], 4)),
            Err(Error::ReservedFlag)
        );
        bytes[14] = 0x19;
        bytes[13] = 0x83;
        assert_eq!(
            Repr::parse(&Frame::new_unchecked(&bytes[..], 4)),
            Err(Error::NotPsp)
        );
        assert_eq!(
            Repr::parse(&Frame::new_unchecked(&bytes[..20], 4)),
            Err(Error::Truncated)
        );
    }

    #[test]
    fn emit() {
        let mut bytes = [0u8; 44];
        let r = repr();
        let mut frame = Frame::new_unchecked(&mut bytes[..], 4);
        r.emit(&mut frame);
        let srepr = SectionRepr::padded(Protocol::EtherType(0x0800), 9, 14).unwrap();
        assert_eq!(srepr.pad_len(), 2);
        let mut section = Section::new_unchecked(frame.section_mut());
        srepr.emit(&mut section);
        section
            .data_mut()
            .copy_from_slice(&[0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5]);
        frame.icv_mut().copy_from_slice(&[0xc1, 0xc2, 0xc3, 0xc4]);
        assert_eq!(bytes, fixture());
    }

    #[test]
    fn buffer_len() {
        let mut r = repr();
        assert_eq!(r.buffer_len(), 26);
        r.security_number = None;
        assert_eq!(r.buffer_len(), 23);
        r.timestamp = None;
        assert_eq!(r.buffer_len(), HEADER_LEN);
        assert_eq!(r.flags().bits(), 0x01);
        r.signed = true;
        assert_eq!(r.trailer_len(20), 84);
        let s = SectionRepr::new(Protocol::Dummy, 10, 3).unwrap();
        assert_eq!(s.buffer_len(), 16);
        assert_eq!(
            SectionRepr::new(Protocol::Dummy, 10, 65),
            Err(Error::BadPadding)
        );
        assert_eq!(
            SectionRepr::padded(Protocol::Control, 5, 8)
                .unwrap()
                .buffer_len(),
            8
        );
        assert_eq!(
            SectionRepr::padded(Protocol::Control, 5, 0)
                .unwrap()
                .buffer_len(),
            8
        );
        assert_eq!(
            SectionRepr::padded(Protocol::Control, 6, 1)
                .unwrap()
                .buffer_len(),
            9
        );
        assert!(SectionRepr::padded(Protocol::Control, 0, 200).is_err());
    }

    #[test]
    fn signed_layout() {
        let mut bytes = [0u8; HEADER_LEN + 3 + 20 + SIGNATURE_LEN];
        let mut r = repr();
        r.security_number = None;
        r.timestamp = None;
        r.signed = true;
        let mut frame = Frame::new_unchecked(&mut bytes[..], 20);
        r.emit(&mut frame);
        frame.signature_mut().unwrap().fill(0xee);
        frame.icv_mut().fill(0x11);
        let frame = Frame::new_checked(&bytes[..], 20).unwrap();
        assert_eq!(frame.section().len(), 3);
        assert_eq!(frame.icv(), &[0x11; 20]);
        assert_eq!(frame.signature(), Some(&[0xee; 64][..]));
        assert_eq!(frame.signed_part().len(), HEADER_LEN + 3 + 20);
        assert_eq!(Repr::parse(&frame), Ok(r));
    }

    #[test]
    fn protocol_and_version_roundtrip() {
        for v in [
            0u16, 1, 2, 3, 4, 5, 6, 7, 0x05ff, 0x0600, 0x0800, 0x0806, 0x8100, 0xffff,
        ] {
            assert_eq!(u16::from(Protocol::from(v)), v);
        }
        assert_eq!(Protocol::from(0x0806), Protocol::EtherType(0x0806));
        assert_eq!(Protocol::from(0x0005), Protocol::Normalized);
        assert_eq!(Protocol::from(0x0006), Protocol::GroupCopy);
        assert_eq!(Protocol::from(0x0007), Protocol::Membership);
        assert_eq!(u16::from(Protocol::Membership), 0x0007);
        assert_eq!(Protocol::from(0x0008), Protocol::UnknownSub(8));
        assert!(Protocol::Dummy.is_sub_protocol());
        for v in 0..8u8 {
            assert_eq!(u8::from(Version::from(v)), v);
        }
        assert_eq!(Version::from(3), Version::Unknown(3));
        assert!(SecurityNumber::new(0x0100_0000).is_err());
        assert_eq!(Seq(u32::MAX).next(), None);
        assert_eq!(Seq(1).next(), Some(Seq(2)));
    }
}
