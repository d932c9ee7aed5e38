//! Seal and open whole PSP layer-2 frames under one session key (thesis §4.1–§4.5).
//!
//! A [`Sealer`] turns an Ethernet II frame (or a PSP sub-protocol message) into a PSP frame: it
//! numbers it, adds the optional security number and timestamp, pads the section, encrypts it and
//! appends the ICV (and an Ed25519 signature if configured). An [`Opener`] does the reverse for
//! one sender, with the anti-replay window.
//!
//! Which key belongs to which peer (session key mapping by source MAC, thesis §4.4.3), key
//! exchange, rekeying and I/O are the caller's. Both sides are allocation-free and never panic on
//! any input.
//!
//! Call order in [`Opener::open`] (each step only if the previous passed):
//! 1. parse the clear header (malformed → drop), check version, flags, suite, security number
//!    and timestamp;
//! 2. replay [`check`](ReplayWindow::check) (changes nothing);
//! 3. verify the signature if flagged, then the ICV in constant time, *before* decrypting;
//! 4. decrypt and parse the section (padding);
//! 5. replay [`commit`](ReplayWindow::commit);
//! 6. rebuild the inner Ethernet frame in place and return it.

use core::fmt;

use crate::crypto::blowfish_cbc::CbcJob;
use crate::crypto::hmac_sha1;
use crate::crypto::sign::{SIGNATURE_LEN, SigningKey, VerifyingKey};
use crate::crypto::{CryptoError, SuiteId, SuiteKey};
use crate::replay::{DEFAULT_WINDOW, ReplayError, ReplayWindow};
use crate::time::{Duration, Instant};
use crate::wire::{
    self, ETHERNET_HEADER_LEN, Frame, MAX_PADDING, MIN_FRAME_LEN, Protocol, Repr,
    SECTION_HEADER_LEN, Section, SectionRepr, SecurityNumber, Seq,
};

/// Options of a [`Sealer`] that do not depend on the suite.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct SealerConfig {
    /// The 24-bit security number to send (flag 0x10), or none.
    pub security_number: Option<u32>,
    /// Send a timestamp (flag 0x08): the caller's `now` in milliseconds modulo 2^32.
    pub timestamps: bool,
    /// Pad the section to a multiple of this many bytes to hide exact lengths (0 = only what the
    /// block cipher needs). Combined with the suite's block length, the granule must be <= 64.
    pub pad_to: u8,
    /// Accept [`SuiteId::None`] (no encryption, no ICV; measurement mode only).
    pub allow_none: bool,
}

/// Options of an [`Opener`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct OpenerConfig {
    /// Replay window size in sequence numbers (1..=[`crate::replay::MAX_WINDOW`]).
    pub replay_window: u32,
    /// The security number frames must carry, or `None` for frames without one.
    pub security_number: Option<u32>,
    /// How long the previous security number stays valid after
    /// [`Opener::set_security_number`].
    pub security_number_grace: Duration,
    /// Drop frames without a timestamp.
    pub require_timestamp: bool,
    /// The largest accepted difference between a frame's timestamp and the opener's `now`.
    pub max_skew: Duration,
    /// Accept [`SuiteId::None`].
    pub allow_none: bool,
    /// Drop frames longer than this (bytes, whole layer-2 frame).
    pub max_frame_len: usize,
}

impl Default for OpenerConfig {
    fn default() -> Self {
        Self {
            replay_window: DEFAULT_WINDOW,
            security_number: None,
            security_number_grace: Duration::from_secs(5),
            require_timestamp: false,
            max_skew: Duration::from_secs(2),
            allow_none: false,
            max_frame_len: 65_535,
        }
    }
}

/// Why sealing failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SealError {
    /// The next sequence number would pass `u32::MAX`: install a new key.
    RekeyRequired,
    /// `out` is too short for the sealed frame.
    BufferTooSmall,
    /// The input is not an Ethernet II frame (shorter than 14 bytes).
    BadInput,
    /// The inner frame's type field is an IEEE 802.3 length (< 0x0600), which PSP cannot carry,
    /// or `seal_sub` was given a non-sub-protocol.
    BadProtocol,
    /// The suite is [`SuiteId::None`] and the config does not allow it.
    NoneRefused,
    /// An option is out of range (security number > 24 bits, padding granule > 64).
    BadConfig,
    /// The cipher suite failed.
    Crypto(CryptoError),
}

impl fmt::Display for SealError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::RekeyRequired => f.write_str("sequence numbers exhausted: rekey required"),
            Self::BufferTooSmall => f.write_str("output buffer too small"),
            Self::BadInput => f.write_str("input is not an Ethernet II frame"),
            Self::BadProtocol => f.write_str("protocol type cannot be carried"),
            Self::NoneRefused => f.write_str("suite \"none\" refused by configuration"),
            Self::BadConfig => f.write_str("sealer option out of range"),
            Self::Crypto(e) => write!(f, "crypto: {e}"),
        }
    }
}

impl core::error::Error for SealError {}

/// The local reason a frame was dropped (for counters and logs; the peer learns nothing).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DropReason {
    /// Shorter than its header, section sub-header and ICV.
    Truncated,
    /// Not a PSP frame (wrong EtherType) or otherwise malformed.
    Malformed,
    /// Unknown PSP version.
    BadVersion,
    /// The reserved flag is set.
    ReservedFlag,
    /// Longer than the configured maximum.
    Oversized,
    /// The encryption flag does not match the session's suite, or the section length does not
    /// fit the suite's block length.
    WrongSuite,
    /// A feature this opener is not set up for (a signature without a verifier), or a refused
    /// suite / option at construction.
    Unsupported,
    /// The ICV did not verify.
    BadIcv,
    /// The signature is missing or did not verify.
    BadSignature,
    /// The sequence number was already received.
    Replay,
    /// The sequence number is below the replay window.
    TooOld,
    /// The security number is missing, unexpected or wrong.
    SecurityNumber,
    /// The timestamp is missing (when required) or too far from the opener's clock.
    Timestamp,
    /// The decrypted padding size is larger than 64 or than the section.
    BadPadding,
}

impl DropReason {
    /// A short static name (for counters).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Truncated => "truncated",
            Self::Malformed => "malformed",
            Self::BadVersion => "bad-version",
            Self::ReservedFlag => "reserved-flag",
            Self::Oversized => "oversized",
            Self::WrongSuite => "wrong-suite",
            Self::Unsupported => "unsupported",
            Self::BadIcv => "bad-icv",
            Self::BadSignature => "bad-signature",
            Self::Replay => "replay",
            Self::TooOld => "too-old",
            Self::SecurityNumber => "security-number",
            Self::Timestamp => "timestamp",
            Self::BadPadding => "bad-padding",
        }
    }
}

impl fmt::Display for DropReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A frame could not be opened. Never tell the peer why; [`reason`](Self::reason) is for local
/// counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OpenError(DropReason);

impl OpenError {
    /// The local reason.
    pub const fn reason(self) -> DropReason {
        self.0
    }
}

impl From<DropReason> for OpenError {
    fn from(r: DropReason) -> Self {
        Self(r)
    }
}

impl From<wire::Error> for OpenError {
    fn from(e: wire::Error) -> Self {
        Self(match e {
            wire::Error::Truncated => DropReason::Truncated,
            wire::Error::BadVersion => DropReason::BadVersion,
            wire::Error::ReservedFlag => DropReason::ReservedFlag,
            wire::Error::BadPadding => DropReason::BadPadding,
            _ => DropReason::Malformed,
        })
    }
}

impl From<ReplayError> for OpenError {
    fn from(e: ReplayError) -> Self {
        Self(match e {
            ReplayError::TooOld => DropReason::TooOld,
            _ => DropReason::Replay,
        })
    }
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PSP frame dropped ({})", self.0)
    }
}

impl core::error::Error for OpenError {}

/// Frames per group in [`Sealer::seal_batch`]: the framed plaintexts of one group stay in L1
/// between framing, encryption and the ICV.
const BATCH_CHUNK: usize = 16;

/// One frame of [`Sealer::seal_batch`].
#[derive(Debug)]
pub struct SealJob<'a> {
    /// The Ethernet II frame to seal, as for [`Sealer::seal`].
    pub input: &'a [u8],
    /// Where the PSP frame is written, from offset 0.
    pub out: &'a mut [u8],
    /// After the call: the sealed frame's length in `out`, or why sealing failed.
    pub result: Result<usize, SealError>,
}

impl<'a> SealJob<'a> {
    /// A job sealing `input` into `out` (`result` is `Ok(0)` until sealed).
    pub fn new(input: &'a [u8], out: &'a mut [u8]) -> Self {
        Self {
            input,
            out,
            result: Ok(0),
        }
    }

    /// The sealed frame, a prefix of `out`, once `result` is `Ok`.
    pub fn sealed(&self) -> Option<&[u8]> {
        self.out.get(..*self.result.as_ref().ok()?)
    }
}

impl Default for SealJob<'_> {
    fn default() -> Self {
        Self::new(&[], &mut [])
    }
}

/// Where the parts of a framed (not yet sealed) PSP frame lie in the output buffer.
#[derive(Clone, Copy, Debug)]
struct Layout {
    seq: Seq,
    clear_len: usize,
    section_len: usize,
    total: usize,
}

/// Send side of a session: numbers, pads, encrypts and authenticates frames under one key.
#[derive(Debug)]
pub struct Sealer {
    key: SuiteKey,
    next_seq: Option<Seq>,
    security_number: Option<SecurityNumber>,
    timestamps: bool,
    granule: usize,
    signer: Option<SigningKey>,
}

impl Sealer {
    /// A sealer whose first frame carries `initial_seq`.
    ///
    /// # Errors
    /// [`SealError::NoneRefused`] for [`SuiteId::None`] unless `cfg.allow_none`;
    /// [`SealError::BadConfig`] if the security number exceeds 24 bits or the padding granule
    /// (lcm of `pad_to` and the block length) exceeds 64.
    pub fn new(key: SuiteKey, initial_seq: u32, cfg: SealerConfig) -> Result<Self, SealError> {
        let suite = key.suite();
        if suite == SuiteId::None && !cfg.allow_none {
            return Err(SealError::NoneRefused);
        }
        let security_number = cfg
            .security_number
            .map(SecurityNumber::new)
            .transpose()
            .map_err(|_| SealError::BadConfig)?;
        let granule = lcm(suite.block_len().max(1), usize::from(cfg.pad_to).max(1));
        if granule > MAX_PADDING {
            return Err(SealError::BadConfig);
        }
        Ok(Self {
            key,
            next_seq: Some(Seq(initial_seq)),
            security_number,
            timestamps: cfg.timestamps,
            granule,
            signer: None,
        })
    }

    /// A random initial SN from 4 random bytes, in the lower half of the space so every key can
    /// send at least 2^31 frames.
    pub const fn random_initial_seq(rand: [u8; 4]) -> u32 {
        u32::from_be_bytes(rand) >> 1
    }

    /// Signs every frame with `signer` (digital-signature flag, for broadcast / pre-session).
    #[must_use]
    pub fn with_signer(mut self, signer: SigningKey) -> Self {
        self.signer = Some(signer);
        self
    }

    /// Changes the security number sent from the next frame on (rotation).
    ///
    /// # Errors
    /// [`SealError::BadConfig`] if it exceeds 24 bits; nothing changes then.
    pub fn set_security_number(&mut self, value: Option<u32>) -> Result<(), SealError> {
        self.security_number = value
            .map(SecurityNumber::new)
            .transpose()
            .map_err(|_| SealError::BadConfig)?;
        Ok(())
    }

    /// The suite of this session.
    pub fn suite(&self) -> SuiteId {
        self.key.suite()
    }

    /// The sequence number of the next frame, or `None` once exhausted.
    pub fn next_seq(&self) -> Option<u32> {
        self.next_seq.map(|s| s.0)
    }

    /// The largest number of bytes sealing adds to an Ethernet II frame (for MTU arithmetic):
    /// PSP header, section sub-header, worst-case padding, ICV and signature.
    ///
    /// Short frames are padded so the sealed frame reaches [`MIN_FRAME_LEN`]: for an inner frame
    /// of `n` bytes the sealed frame is at most `max(n, MIN_FRAME_LEN) + overhead()` bytes.
    pub fn overhead(&self) -> usize {
        self.clear_len() - ETHERNET_HEADER_LEN
            + SECTION_HEADER_LEN
            + (self.granule - 1)
            + self.trailer_len()
    }

    /// The exact length of the sealed frame for an Ethernet II frame of `eth_len` bytes (or a
    /// sub-protocol payload of `eth_len - 14` bytes), or `None` on overflow / short input.
    pub fn sealed_len(&self, eth_len: usize) -> Option<usize> {
        let data_len = eth_len.checked_sub(ETHERNET_HEADER_LEN)?;
        let section = self.section_repr(Protocol::Dummy, data_len)?;
        self.clear_len()
            .checked_add(section.buffer_len())?
            .checked_add(self.trailer_len())
    }

    /// Seals an Ethernet II frame (dst, src, EtherType, payload) into `out` and returns the PSP
    /// frame, a prefix of `out`.
    ///
    /// # Errors
    /// [`SealError::BadInput`] if `eth_frame` is shorter than 14 bytes;
    /// [`SealError::BadProtocol`] for an 802.3 length frame; [`SealError::RekeyRequired`] once
    /// the SN space is used up; [`SealError::BufferTooSmall`]; [`SealError::Crypto`].
    /// Nothing is consumed on error except after a crypto failure (the SN is then skipped).
    pub fn seal<'b>(
        &mut self,
        now: Instant,
        eth_frame: &[u8],
        out: &'b mut [u8],
    ) -> Result<&'b [u8], SealError> {
        let layout = self.frame_eth_plaintext(now, eth_frame, out)?;
        self.seal_framed(layout, out)
    }

    /// Seals a PSP sub-protocol message (control, dummy, ...) from `src` to `dst`.
    ///
    /// # Errors
    /// [`SealError::BadProtocol`] if `proto` is not a sub-protocol; otherwise as
    /// [`seal`](Self::seal).
    pub fn seal_sub<'b>(
        &mut self,
        now: Instant,
        dst: [u8; 6],
        src: [u8; 6],
        proto: Protocol,
        payload: &[u8],
        out: &'b mut [u8],
    ) -> Result<&'b [u8], SealError> {
        if !proto.is_sub_protocol() {
            return Err(SealError::BadProtocol);
        }
        let layout = self.frame_plaintext(now, dst, src, proto, payload, out)?;
        self.seal_framed(layout, out)
    }

    /// Encrypts, authenticates and signs a frame laid out by
    /// [`frame_plaintext`](Self::frame_plaintext): the second half of sealing.
    fn seal_framed<'b>(&self, layout: Layout, out: &'b mut [u8]) -> Result<&'b [u8], SealError> {
        let out = out
            .get_mut(..layout.total)
            .ok_or(SealError::BufferTooSmall)?;
        let (clear, rest) = out.split_at_mut(layout.clear_len);
        let (section, rest) = rest.split_at_mut(layout.section_len);
        let icv = rest
            .get_mut(..self.key.suite().icv_len())
            .ok_or(SealError::BufferTooSmall)?;
        self.key
            .seal_in_place(layout.seq.0, clear, section, icv)
            .map_err(SealError::Crypto)?;
        self.sign(out)?;
        Ok(out)
    }

    /// Seals a batch of Ethernet II frames, as if [`seal`](Self::seal) were called on each job
    /// in order: the same sequence numbers, the same bytes, the same errors. Each job's `result`
    /// gets the sealed length in its `out` (or the error).
    ///
    /// For `bf-cbc-hmac-sha1` the Blowfish-CBC chains of up to
    /// [`ENCRYPT_LANES`](crate::crypto::blowfish_cbc::ENCRYPT_LANES) frames run interleaved,
    /// which is several times faster per frame than one at a time (CBC encryption is serial
    /// within a frame); other suites simply loop over `seal`. Nothing is allocated.
    pub fn seal_batch(&mut self, now: Instant, jobs: &mut [SealJob<'_>]) {
        if self.key.bf_cbc_hmac().is_none() {
            for job in jobs.iter_mut() {
                job.result = self.seal(now, job.input, job.out).map(<[u8]>::len);
            }
            return;
        }
        for chunk in jobs.chunks_mut(BATCH_CHUNK) {
            self.seal_chunk_bf(now, chunk);
        }
    }

    /// [`seal_batch`](Self::seal_batch) for `bf-cbc-hmac-sha1`, at most [`BATCH_CHUNK`] jobs:
    /// frame every plaintext (taking the SNs in order), encrypt the sections together, then
    /// write the ICVs (and signatures).
    fn seal_chunk_bf(&mut self, now: Instant, jobs: &mut [SealJob<'_>]) {
        let mut layouts = [None::<Layout>; BATCH_CHUNK];
        for (job, layout) in jobs.iter_mut().zip(&mut layouts) {
            match self.frame_eth_plaintext(now, job.input, job.out) {
                Ok(l) => *layout = Some(l),
                Err(e) => job.result = Err(e),
            }
        }
        let Some((cbc, mac)) = self.key.bf_cbc_hmac() else {
            return;
        };
        let bivn = self.key.bivn();

        let mut cbc_jobs: [CbcJob<'_>; BATCH_CHUNK] = Default::default();
        for ((job, layout), cbc_job) in jobs.iter_mut().zip(&mut layouts).zip(&mut cbc_jobs) {
            let Some(l) = *layout else { continue };
            // `frame_plaintext` checked that `out` holds `total` bytes, so this always succeeds.
            let Some(section) = job.out.get_mut(l.clear_len..l.clear_len + l.section_len) else {
                *layout = None;
                job.result = Err(SealError::BufferTooSmall);
                continue;
            };
            *cbc_job = CbcJob {
                iv: cbc.derive_iv(bivn, l.seq.0),
                buf: section,
            };
        }
        // Sections are whole blocks by construction (the granule is a multiple of the block);
        // if that ever failed, every framed job reports it, as `seal` would.
        let encrypted = cbc.encrypt_many_in_place(&mut cbc_jobs);

        for (job, layout) in jobs.iter_mut().zip(&layouts) {
            let Some(l) = layout else { continue };
            job.result = encrypted.map_err(SealError::Crypto).and_then(|()| {
                let out = job
                    .out
                    .get_mut(..l.total)
                    .ok_or(SealError::BufferTooSmall)?;
                let (data, icv) = out.split_at_mut(l.clear_len + l.section_len);
                let (clear, section) = data.split_at(l.clear_len);
                let icv = icv
                    .get_mut(..hmac_sha1::MAC_LEN)
                    .ok_or(SealError::BufferTooSmall)?;
                icv.copy_from_slice(&mac.mac(&[clear, section]));
                self.sign(out)?;
                Ok(l.total)
            });
        }
    }

    /// Checks an Ethernet II frame as [`seal`](Self::seal) does and frames it (see
    /// [`frame_plaintext`](Self::frame_plaintext)).
    fn frame_eth_plaintext(
        &mut self,
        now: Instant,
        eth_frame: &[u8],
        out: &mut [u8],
    ) -> Result<Layout, SealError> {
        let (Some(dst), Some(src), Some(ty), Some(payload)) = (
            eth_frame.get(0..6),
            eth_frame.get(6..12),
            eth_frame.get(12..14),
            eth_frame.get(ETHERNET_HEADER_LEN..),
        ) else {
            return Err(SealError::BadInput);
        };
        let protocol = Protocol::from(u16::from_be_bytes([ty[0], ty[1]]));
        if protocol.is_sub_protocol() {
            return Err(SealError::BadProtocol);
        }
        self.frame_plaintext(now, to_mac(dst), to_mac(src), protocol, payload, out)
    }

    /// Writes the clear header and the plaintext section into `out` and takes the SN: the
    /// first half of sealing. The SN is used from here on, even if the suite then fails:
    /// never reuse a nonce.
    fn frame_plaintext(
        &mut self,
        now: Instant,
        dst: [u8; 6],
        src: [u8; 6],
        protocol: Protocol,
        payload: &[u8],
        out: &mut [u8],
    ) -> Result<Layout, SealError> {
        let seq = self.next_seq.ok_or(SealError::RekeyRequired)?;
        let suite = self.key.suite();
        let repr = Repr {
            dst_addr: dst,
            src_addr: src,
            seq,
            security_number: self.security_number,
            // Milliseconds modulo 2^32: the truncation is the wire format.
            timestamp: self.timestamps.then_some(now.total_millis() as u32),
            signed: self.signer.is_some(),
            encrypted: suite.encrypts(),
        };
        let srepr = self
            .section_repr(protocol, payload.len())
            .ok_or(SealError::BufferTooSmall)?;
        let clear_len = repr.buffer_len();
        let section_len = srepr.buffer_len();
        let icv_len = suite.icv_len();
        let total = clear_len
            .checked_add(section_len)
            .and_then(|n| n.checked_add(repr.trailer_len(icv_len)))
            .ok_or(SealError::BufferTooSmall)?;
        let out = out.get_mut(..total).ok_or(SealError::BufferTooSmall)?;

        let mut frame = Frame::new_unchecked(&mut *out, icv_len);
        repr.emit(&mut frame);
        let mut section = Section::new_unchecked(frame.section_mut());
        srepr.emit(&mut section);
        section.data_mut().copy_from_slice(payload);

        self.next_seq = seq.next();
        Ok(Layout {
            seq,
            clear_len,
            section_len,
            total,
        })
    }

    /// Writes the signature over everything before it, if this sealer signs.
    fn sign(&self, out: &mut [u8]) -> Result<(), SealError> {
        if let Some(signer) = &self.signer {
            let at = out
                .len()
                .checked_sub(SIGNATURE_LEN)
                .ok_or(SealError::BufferTooSmall)?;
            let (signed, sig) = out.split_at_mut(at);
            let sig: &mut [u8; SIGNATURE_LEN] =
                sig.try_into().map_err(|_| SealError::BufferTooSmall)?;
            signer.sign(signed, sig);
        }
        Ok(())
    }

    /// The section for `data_len` bytes of data: padded to a multiple of the granule, and long
    /// enough that the whole frame reaches [`MIN_FRAME_LEN`], so no link pads it after the ICV.
    /// Where both cannot hold within 64 bytes of padding (tiny frames, large `pad_to`), the
    /// minimum length wins and the section is only block-aligned.
    fn section_repr(&self, protocol: Protocol, data_len: usize) -> Option<SectionRepr> {
        let base = data_len.checked_add(SECTION_HEADER_LEN)?;
        let fixed = self.clear_len() + self.trailer_len();
        let min = MIN_FRAME_LEN.saturating_sub(fixed).max(base);
        let mut len = round_up(min, self.granule)?;
        if len - base > MAX_PADDING {
            len = round_up(min, self.key.suite().block_len().max(1))?;
        }
        SectionRepr::new(protocol, data_len, len - base).ok()
    }

    fn clear_len(&self) -> usize {
        Repr {
            dst_addr: [0; 6],
            src_addr: [0; 6],
            seq: Seq(0),
            security_number: self.security_number,
            timestamp: self.timestamps.then_some(0),
            signed: false,
            encrypted: false,
        }
        .buffer_len()
    }

    fn trailer_len(&self) -> usize {
        let sig = if self.signer.is_some() {
            SIGNATURE_LEN
        } else {
            0
        };
        self.key.suite().icv_len() + sig
    }
}

/// A successfully opened frame: the inner Ethernet frame, rebuilt inside the received buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Opened<'b> {
    frame: &'b [u8],
    protocol: Protocol,
    seq: Seq,
    security_number: Option<SecurityNumber>,
    timestamp: Option<u32>,
    signed: bool,
}

impl<'b> Opened<'b> {
    /// The inner Ethernet II frame: dst, src, protocol type (the original EtherType, or the
    /// sub-protocol number), data.
    pub fn frame(&self) -> &'b [u8] {
        self.frame
    }

    /// The data after the 14-byte Ethernet header.
    pub fn payload(&self) -> &'b [u8] {
        self.frame.get(ETHERNET_HEADER_LEN..).unwrap_or_default()
    }

    /// The protocol type: an EtherType or a PSP sub-protocol.
    pub fn protocol(&self) -> Protocol {
        self.protocol
    }

    /// The frame's sequence number.
    pub fn seq(&self) -> u32 {
        self.seq.0
    }

    /// The destination MAC address.
    pub fn dst_addr(&self) -> [u8; 6] {
        to_mac(self.frame.get(0..6).unwrap_or_default())
    }

    /// The source MAC address.
    pub fn src_addr(&self) -> [u8; 6] {
        to_mac(self.frame.get(6..12).unwrap_or_default())
    }

    /// The security number the frame carried.
    pub fn security_number(&self) -> Option<u32> {
        self.security_number.map(SecurityNumber::get)
    }

    /// The timestamp the frame carried (milliseconds modulo 2^32).
    pub fn timestamp(&self) -> Option<u32> {
        self.timestamp
    }

    /// Whether the frame carried a verified signature.
    pub fn signed(&self) -> bool {
        self.signed
    }
}

/// Receive side of a session: checks, authenticates and decrypts frames from one sender.
#[derive(Debug)]
pub struct Opener {
    key: SuiteKey,
    replay: ReplayWindow,
    verifier: Option<VerifyingKey>,
    security_number: Option<SecurityNumber>,
    previous_security_number: Option<(Option<SecurityNumber>, Instant)>,
    grace: Duration,
    require_timestamp: bool,
    max_skew_ms: u64,
    max_frame_len: usize,
}

impl Opener {
    /// An opener for frames sealed under `key`.
    ///
    /// # Errors
    /// Reason [`DropReason::Unsupported`] for [`SuiteId::None`] unless `cfg.allow_none`, a
    /// replay window out of range, or a security number wider than 24 bits.
    pub fn new(key: SuiteKey, cfg: OpenerConfig) -> Result<Self, OpenError> {
        let unsupported = OpenError(DropReason::Unsupported);
        if key.suite() == SuiteId::None && !cfg.allow_none {
            return Err(unsupported);
        }
        let replay = ReplayWindow::new(cfg.replay_window).map_err(|_| unsupported)?;
        let security_number = cfg
            .security_number
            .map(SecurityNumber::new)
            .transpose()
            .map_err(|_| unsupported)?;
        Ok(Self {
            key,
            replay,
            verifier: None,
            security_number,
            previous_security_number: None,
            grace: cfg.security_number_grace,
            require_timestamp: cfg.require_timestamp,
            max_skew_ms: cfg.max_skew.total_millis(),
            max_frame_len: cfg.max_frame_len,
        })
    }

    /// Requires every frame to carry a valid Ed25519 signature by `verifier`.
    #[must_use]
    pub fn with_verifier(mut self, verifier: VerifyingKey) -> Self {
        self.verifier = Some(verifier);
        self
    }

    /// Rotates the expected security number; the previous one stays valid until
    /// `now + security_number_grace`.
    ///
    /// # Errors
    /// Reason [`DropReason::Unsupported`] if it exceeds 24 bits; nothing changes then.
    pub fn set_security_number(
        &mut self,
        now: Instant,
        value: Option<u32>,
    ) -> Result<(), OpenError> {
        let new = value
            .map(SecurityNumber::new)
            .transpose()
            .map_err(|_| OpenError(DropReason::Unsupported))?;
        self.previous_security_number = Some((self.security_number, now + self.grace));
        self.security_number = new;
        Ok(())
    }

    /// The suite of this session.
    pub fn suite(&self) -> SuiteId {
        self.key.suite()
    }

    /// The anti-replay window.
    pub fn replay_window(&self) -> &ReplayWindow {
        &self.replay
    }

    /// Opens a received PSP frame in place and returns the inner Ethernet frame as a sub-slice
    /// of `frame` (the MACs and protocol type are moved next to the data; no allocation).
    ///
    /// # Errors
    /// An [`OpenError`] whose [`reason`](OpenError::reason) says why; the window is unchanged
    /// then. After a failed ICV or padding check the section bytes are unspecified.
    pub fn open<'b>(&mut self, now: Instant, frame: &'b mut [u8]) -> Result<Opened<'b>, OpenError> {
        if frame.len() > self.max_frame_len {
            return Err(DropReason::Oversized.into());
        }
        let suite = self.key.suite();
        let icv_len = suite.icv_len();

        // 1. Clear header.
        let view = Frame::new_checked(&*frame, icv_len)?;
        let repr = Repr::parse(&view)?;
        if repr.encrypted != suite.encrypts() {
            return Err(DropReason::WrongSuite.into());
        }
        self.check_security_number(now, repr.security_number)?;
        self.check_timestamp(now, repr.timestamp)?;
        if repr.signed != self.verifier.is_some() {
            return Err(if repr.signed {
                DropReason::Unsupported
            } else {
                DropReason::BadSignature
            }
            .into());
        }

        // 2. Replay check, before any cryptography.
        self.replay.check(repr.seq.0)?;

        // 3. Signature (covers everything before it), then the ICV, before decrypting.
        if let (Some(verifier), Some(sig)) = (&self.verifier, view.signature()) {
            verifier
                .verify(view.signed_part(), sig)
                .map_err(|_| OpenError(DropReason::BadSignature))?;
        }
        let clear_len = view.header_len();
        let section_len = view.section_range().len();
        let (clear, rest) = frame.split_at_mut(clear_len);
        let (section, rest) = rest.split_at_mut(section_len);
        let icv = rest.get(..icv_len).ok_or(DropReason::Truncated)?;
        self.key
            .open_in_place(repr.seq.0, clear, section, icv)
            .map_err(|e| {
                OpenError(match e {
                    CryptoError::BadIcv => DropReason::BadIcv,
                    _ => DropReason::WrongSuite,
                })
            })?;

        // 4. Section.
        let srepr = SectionRepr::parse(&Section::new_unchecked(&*section))?;

        // 5. Only an authentic, well-formed frame moves the window.
        self.replay.commit(repr.seq.0)?;

        // 6. Rebuild dst | src | type | data just before the data. The data starts at
        // clear_len + 3 >= 22, so the 14-byte header fits in front of it.
        let data_start = clear_len + SECTION_HEADER_LEN;
        let data_end = data_start + srepr.data_len();
        let start = data_start - ETHERNET_HEADER_LEN;
        frame.copy_within(0..12, start);
        frame[data_start - 2..data_start]
            .copy_from_slice(&u16::from(srepr.protocol()).to_be_bytes());
        Ok(Opened {
            frame: &frame[start..data_end],
            protocol: srepr.protocol(),
            seq: repr.seq,
            security_number: repr.security_number,
            timestamp: repr.timestamp,
            signed: repr.signed,
        })
    }

    fn check_security_number(
        &self,
        now: Instant,
        got: Option<SecurityNumber>,
    ) -> Result<(), OpenError> {
        if got == self.security_number {
            return Ok(());
        }
        match self.previous_security_number {
            Some((previous, until)) if previous == got && now <= until => Ok(()),
            _ => Err(DropReason::SecurityNumber.into()),
        }
    }

    fn check_timestamp(&self, now: Instant, got: Option<u32>) -> Result<(), OpenError> {
        let Some(ts) = got else {
            return if self.require_timestamp {
                Err(DropReason::Timestamp.into())
            } else {
                Ok(())
            };
        };
        // Milliseconds modulo 2^32, compared with wrapping arithmetic (wraps every ~49.7 days).
        let ours = now.total_millis() as u32;
        let diff = ours.wrapping_sub(ts) as i32;
        if u64::from(diff.unsigned_abs()) > self.max_skew_ms {
            return Err(DropReason::Timestamp.into());
        }
        Ok(())
    }
}

fn to_mac(bytes: &[u8]) -> [u8; 6] {
    let mut mac = [0u8; 6];
    if let Some(src) = bytes.get(..6) {
        mac.copy_from_slice(src);
    }
    mac
}

fn round_up(n: usize, granule: usize) -> Option<usize> {
    Some(n.checked_add(granule - 1)? / granule * granule)
}

const fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}

const fn lcm(a: usize, b: usize) -> usize {
    a / gcd(a, b) * b
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: [u8; 32] = [0x42; 32];
    const DST: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
    const SRC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];

    fn key(suite: SuiteId) -> SuiteKey {
        SuiteKey::new(suite, &KEY[..suite.key_len()]).unwrap()
    }

    fn pair(suite: SuiteId, scfg: SealerConfig, ocfg: OpenerConfig) -> (Sealer, Opener) {
        (
            Sealer::new(key(suite), 1000, scfg).unwrap(),
            Opener::new(key(suite), ocfg).unwrap(),
        )
    }

    /// A sealer/opener pair that permits the `none` suite, the sealer padding to `pad_to`.
    fn pair_allowing_none(suite: SuiteId, pad_to: u8) -> (Sealer, Opener) {
        let scfg = SealerConfig {
            pad_to,
            allow_none: true,
            ..SealerConfig::default()
        };
        let ocfg = OpenerConfig {
            allow_none: true,
            ..OpenerConfig::default()
        };
        pair(suite, scfg, ocfg)
    }

    fn eth(payload: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&DST);
        v.extend_from_slice(&SRC);
        v.extend_from_slice(&0x0800u16.to_be_bytes());
        v.extend_from_slice(payload);
        v
    }

    #[test]
    fn roundtrip_every_suite() {
        let inner = eth(b"hello, layer two");
        for &suite in SuiteId::ALL {
            let (mut s, mut o) = pair_allowing_none(suite, SealerConfig::default().pad_to);
            let mut out = [0u8; 256];
            let sealed = s.seal(Instant::ZERO, &inner, &mut out).unwrap();
            assert!(
                sealed.len() <= (inner.len() + s.overhead()).max(60),
                "{suite}"
            );
            assert!(sealed.len() >= MIN_FRAME_LEN, "{suite}");
            assert_eq!(Some(sealed.len()), s.sealed_len(inner.len()));
            assert_eq!(sealed[14], u8::from(suite.encrypts()), "{suite}");
            let mut buf = sealed.to_vec();
            let opened = o.open(Instant::ZERO, &mut buf).unwrap();
            assert_eq!(opened.frame(), &inner[..], "{suite}");
            assert_eq!(opened.protocol(), Protocol::EtherType(0x0800));
            assert_eq!(opened.seq(), 1000);
        }
    }

    #[test]
    fn none_refused_by_default() {
        assert_eq!(
            Sealer::new(key(SuiteId::None), 0, SealerConfig::default()).unwrap_err(),
            SealError::NoneRefused
        );
        assert_eq!(
            Opener::new(key(SuiteId::None), OpenerConfig::default())
                .unwrap_err()
                .reason(),
            DropReason::Unsupported
        );
    }

    #[test]
    fn sn_never_wraps() {
        let mut s = Sealer::new(
            key(SuiteId::BfCbcHmacSha1),
            u32::MAX,
            SealerConfig::default(),
        )
        .unwrap();
        let mut out = [0u8; 128];
        assert!(s.seal(Instant::ZERO, &eth(b"x"), &mut out).is_ok());
        assert_eq!(
            s.seal(Instant::ZERO, &eth(b"x"), &mut out),
            Err(SealError::RekeyRequired)
        );
        assert_eq!(s.next_seq(), None);
    }

    #[test]
    fn random_initial_seq_lower_half() {
        assert_eq!(Sealer::random_initial_seq([0xff; 4]), 0x7fff_ffff);
        assert_eq!(Sealer::random_initial_seq([0; 4]), 0);
    }

    #[test]
    fn replay_and_tamper() {
        let (mut s, mut o) = pair(
            SuiteId::Aes128Gcm,
            SealerConfig::default(),
            OpenerConfig::default(),
        );
        let mut out = [0u8; 128];
        let sealed = s
            .seal(Instant::ZERO, &eth(b"abc"), &mut out)
            .unwrap()
            .to_vec();
        let mut bad = sealed.clone();
        bad[20] ^= 1;
        assert_eq!(
            o.open(Instant::ZERO, &mut bad).unwrap_err().reason(),
            DropReason::BadIcv
        );
        assert!(o.open(Instant::ZERO, &mut sealed.clone()).is_ok());
        assert_eq!(
            o.open(Instant::ZERO, &mut sealed.clone())
                .unwrap_err()
                .reason(),
            DropReason::Replay
        );
    }

    #[test]
    fn options_security_number_timestamp_padding() {
        let scfg = SealerConfig {
            security_number: Some(0xabcdef),
            timestamps: true,
            pad_to: 16,
            ..SealerConfig::default()
        };
        let ocfg = OpenerConfig {
            security_number: Some(0xabcdef),
            require_timestamp: true,
            ..OpenerConfig::default()
        };
        let (mut s, mut o) = pair(SuiteId::BfCbcHmacSha1, scfg, ocfg);
        let now = Instant::from_secs(1_700_000_000);
        let mut out = [0u8; 256];
        for n in 0..40 {
            let inner = eth(&vec![n as u8; n]);
            let sealed = s.seal(now, &inner, &mut out).unwrap();
            assert_eq!((sealed.len() - 26 - 20) % 16, 0);
            let mut buf = sealed.to_vec();
            let opened = o.open(now + Duration::from_millis(1999), &mut buf).unwrap();
            assert_eq!(opened.frame(), &inner[..]);
            assert_eq!(opened.security_number(), Some(0xabcdef));
            assert_eq!(opened.timestamp(), Some(now.total_millis() as u32));
        }
        // Skew.
        let mut buf = s.seal(now, &eth(b"late"), &mut out).unwrap().to_vec();
        assert_eq!(
            o.open(now + Duration::from_millis(2001), &mut buf)
                .unwrap_err()
                .reason(),
            DropReason::Timestamp
        );
    }

    #[test]
    fn security_number_rotation() {
        let scfg = SealerConfig {
            security_number: Some(0xabcdef),
            ..SealerConfig::default()
        };
        let ocfg = OpenerConfig {
            security_number: Some(0xabcdef),
            security_number_grace: Duration::from_secs(5),
            ..OpenerConfig::default()
        };
        let (mut s, mut o) = pair(SuiteId::BfCbcHmacSha1, scfg, ocfg);
        let now = Instant::from_secs(100);
        let mut out = [0u8; 256];
        let mut seal = |s: &mut Sealer| s.seal(now, &eth(b"x"), &mut out).unwrap().to_vec();
        let mut old = seal(&mut s);
        let mut old_late = seal(&mut s);
        s.set_security_number(Some(0x123456)).unwrap();
        let mut new = seal(&mut s);
        // The opener has not rotated yet.
        assert_eq!(
            o.open(now, &mut new.clone()).unwrap_err().reason(),
            DropReason::SecurityNumber
        );
        o.set_security_number(now, Some(0x123456)).unwrap();
        assert!(o.open(now, &mut new).is_ok());
        // The previous number is accepted during the grace, then refused.
        assert!(o.open(now + Duration::from_secs(5), &mut old).is_ok());
        assert_eq!(
            o.open(now + Duration::from_secs(6), &mut old_late)
                .unwrap_err()
                .reason(),
            DropReason::SecurityNumber
        );
        // A frame without a security number is refused when one is expected.
        let mut s2 = Sealer::new(key(SuiteId::BfCbcHmacSha1), 9, SealerConfig::default()).unwrap();
        let mut none = seal(&mut s2);
        assert_eq!(
            o.open(now, &mut none).unwrap_err().reason(),
            DropReason::SecurityNumber
        );
    }

    #[test]
    fn short_frames_reach_the_ethernet_minimum() {
        for suite in [SuiteId::BfCbcHmacSha1, SuiteId::Aes128Gcm, SuiteId::None] {
            for pad_to in [0u8, 8, 16, 40, 64] {
                let (mut s, mut o) = pair_allowing_none(suite, pad_to);
                for n in 0..80 {
                    let mut out = [0u8; 256];
                    let payload = [n as u8; 80];
                    let sealed = s
                        .seal_sub(
                            Instant::ZERO,
                            DST,
                            SRC,
                            Protocol::Dummy,
                            &payload[..n],
                            &mut out,
                        )
                        .unwrap();
                    assert!(sealed.len() >= MIN_FRAME_LEN, "{suite} {pad_to} {n}");
                    assert!(sealed.len() <= (n + 14).max(MIN_FRAME_LEN) + s.overhead());
                    assert_eq!(s.sealed_len(n + 14), Some(sealed.len()));
                    let mut buf = sealed.to_vec();
                    assert_eq!(
                        o.open(Instant::ZERO, &mut buf).unwrap().payload(),
                        &payload[..n]
                    );
                }
            }
        }
    }

    #[test]
    fn bad_config() {
        let cfg = SealerConfig {
            pad_to: 60,
            ..SealerConfig::default()
        };
        assert_eq!(
            Sealer::new(key(SuiteId::BfCbcHmacSha1), 0, cfg).unwrap_err(),
            SealError::BadConfig
        );
        let cfg = SealerConfig {
            security_number: Some(1 << 24),
            ..SealerConfig::default()
        };
        assert_eq!(
            Sealer::new(key(SuiteId::Aes128Gcm), 0, cfg).unwrap_err(),
            SealError::BadConfig
        );
    }

    #[test]
    fn signed_frames() {
        let signer = SigningKey::from_seed(&[7; 32]).unwrap();
        let vk = signer.public_key();
        let (s, o) = pair(
            SuiteId::NullHmacSha1,
            SealerConfig::default(),
            OpenerConfig::default(),
        );
        let mut s = s.with_signer(signer);
        let mut o = o.with_verifier(vk);
        let mut out = [0u8; 256];
        let sealed = s
            .seal(Instant::ZERO, &eth(b"broadcast"), &mut out)
            .unwrap()
            .to_vec();
        assert_eq!(sealed[14], 0x02);
        let mut bad = sealed.clone();
        let n = bad.len();
        bad[n - 1] ^= 0x80;
        assert_eq!(
            o.open(Instant::ZERO, &mut bad).unwrap_err().reason(),
            DropReason::BadSignature
        );
        let mut good = sealed.clone();
        assert!(o.open(Instant::ZERO, &mut good).unwrap().signed());
        // An opener without a verifier refuses signed frames.
        let mut plain = Opener::new(key(SuiteId::NullHmacSha1), OpenerConfig::default()).unwrap();
        assert_eq!(
            plain
                .open(Instant::ZERO, &mut sealed.clone())
                .unwrap_err()
                .reason(),
            DropReason::Unsupported
        );
    }

    #[test]
    fn sub_protocols_and_8023() {
        let (mut s, mut o) = pair(
            SuiteId::ChaCha20Poly1305,
            SealerConfig::default(),
            OpenerConfig::default(),
        );
        let mut out = [0u8; 128];
        let sealed = s
            .seal_sub(Instant::ZERO, DST, SRC, Protocol::Control, b"fb", &mut out)
            .unwrap();
        let mut buf = sealed.to_vec();
        let opened = o.open(Instant::ZERO, &mut buf).unwrap();
        assert_eq!(opened.protocol(), Protocol::Control);
        assert_eq!(opened.payload(), b"fb");
        assert_eq!(opened.dst_addr(), DST);
        assert_eq!(opened.src_addr(), SRC);
        let mut llc = eth(b"llc");
        llc[12..14].copy_from_slice(&3u16.to_be_bytes());
        assert_eq!(
            s.seal(Instant::ZERO, &llc, &mut out),
            Err(SealError::BadProtocol)
        );
        assert_eq!(
            s.seal_sub(
                Instant::ZERO,
                DST,
                SRC,
                Protocol::EtherType(0x0800),
                b"",
                &mut out
            ),
            Err(SealError::BadProtocol)
        );
        assert_eq!(
            s.seal(Instant::ZERO, &[0u8; 13], &mut out),
            Err(SealError::BadInput)
        );
        assert_eq!(
            s.seal(Instant::ZERO, &eth(&[0; 200]), &mut out),
            Err(SealError::BufferTooSmall)
        );
    }

    /// Seals `inputs` one by one with `seal` and as one `seal_batch`, from identical sealers,
    /// and checks that results, bytes and the next SN agree.
    fn check_batch_equals_sequential(
        make: &dyn Fn() -> Sealer,
        inputs: &[Vec<u8>],
        out_len: usize,
    ) {
        let now = Instant::from_secs(1_700_000_000);
        let mut seq_sealer = make();
        let mut expected = Vec::new();
        for input in inputs {
            let mut out = vec![0u8; out_len];
            let r = seq_sealer.seal(now, input, &mut out).map(<[u8]>::len);
            expected.push((r, out));
        }
        let mut batch_sealer = make();
        let mut outs: Vec<Vec<u8>> = inputs.iter().map(|_| vec![0u8; out_len]).collect();
        let mut jobs: Vec<SealJob<'_>> = inputs
            .iter()
            .zip(outs.iter_mut())
            .map(|(input, out)| SealJob::new(input, out))
            .collect();
        batch_sealer.seal_batch(now, &mut jobs);
        let results: Vec<_> = jobs.iter().map(|j| j.result).collect();
        drop(jobs);
        for (i, (((want_r, want), got_r), got)) in
            expected.iter().zip(&results).zip(&outs).enumerate()
        {
            assert_eq!(want_r, got_r, "job {i} of {}", inputs.len());
            if let Ok(n) = *want_r {
                assert_eq!(want[..n], got[..n], "job {i} of {}", inputs.len());
            }
        }
        assert_eq!(seq_sealer.next_seq(), batch_sealer.next_seq());
    }

    /// A mix of frame lengths and bad inputs (too short, 802.3 length, too long for `out`).
    fn batch_inputs(n: usize) -> Vec<Vec<u8>> {
        (0..n)
            .map(|i| match i % 11 {
                3 => vec![1u8; 13],
                5 => {
                    let mut f = eth(b"llc");
                    f[12..14].copy_from_slice(&3u16.to_be_bytes());
                    f
                }
                7 => eth(&vec![9u8; 2000]),
                _ => eth(&vec![i as u8; (i * 97) % 1500]),
            })
            .collect()
    }

    #[test]
    fn seal_batch_equals_sequential_seal() {
        let configs = [
            SealerConfig::default(),
            SealerConfig {
                security_number: Some(0x00ab_cdef),
                timestamps: true,
                pad_to: 16,
                ..SealerConfig::default()
            },
        ];
        for cfg in configs {
            for n in [0, 1, 2, 3, 5, 8, 16, 17, 40] {
                let make = || Sealer::new(key(SuiteId::BfCbcHmacSha1), 77, cfg).unwrap();
                check_batch_equals_sequential(&make, &batch_inputs(n), 1600);
            }
        }
        // Signed frames.
        let make = || {
            Sealer::new(key(SuiteId::BfCbcHmacSha1), 5, SealerConfig::default())
                .unwrap()
                .with_signer(SigningKey::from_seed(&[3; 32]).unwrap())
        };
        check_batch_equals_sequential(&make, &batch_inputs(20), 1700);
        // Every other suite loops over `seal`.
        for &suite in SuiteId::ALL {
            let cfg = SealerConfig {
                allow_none: true,
                ..SealerConfig::default()
            };
            let make = || Sealer::new(key(suite), 1, cfg).unwrap();
            check_batch_equals_sequential(&make, &batch_inputs(19), 1600);
        }
    }

    #[test]
    fn seal_batch_runs_out_of_sns_like_seal() {
        let make = || {
            Sealer::new(
                key(SuiteId::BfCbcHmacSha1),
                u32::MAX - 2,
                SealerConfig::default(),
            )
            .unwrap()
        };
        check_batch_equals_sequential(&make, &batch_inputs(6), 1600);
        let mut s = make();
        let input = eth(b"x");
        let mut outs = [[0u8; 128]; 5];
        let mut jobs: Vec<SealJob<'_>> = outs.iter_mut().map(|o| SealJob::new(&input, o)).collect();
        s.seal_batch(Instant::ZERO, &mut jobs);
        let results: Vec<_> = jobs.iter().map(|j| j.result.map(|_| ())).collect();
        assert_eq!(
            results,
            [
                Ok(()),
                Ok(()),
                Ok(()),
                Err(SealError::RekeyRequired),
                Err(SealError::RekeyRequired)
            ]
        );
    }

    #[test]
    fn seal_batch_frames_open() {
        let (mut s, mut o) = pair(
            SuiteId::BfCbcHmacSha1,
            SealerConfig::default(),
            OpenerConfig::default(),
        );
        let inputs: Vec<Vec<u8>> = (0..24).map(|i| eth(&vec![i as u8; i * 61])).collect();
        let mut outs = vec![[0u8; 1600]; inputs.len()];
        let mut jobs: Vec<SealJob<'_>> = inputs
            .iter()
            .zip(outs.iter_mut())
            .map(|(i, o)| SealJob::new(i, o))
            .collect();
        s.seal_batch(Instant::ZERO, &mut jobs);
        for (job, input) in jobs.iter().zip(&inputs) {
            let mut frame = job.sealed().unwrap().to_vec();
            let opened = o.open(Instant::ZERO, &mut frame).unwrap();
            assert_eq!(opened.frame(), &input[..]);
        }
        assert_eq!(SealJob::default().sealed(), Some(&[][..]));
    }
}
