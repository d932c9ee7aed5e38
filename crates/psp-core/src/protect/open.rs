//! The receive side of a session: [`Opener`] checks, authenticates and decrypts the frames of
//! one sender and rebuilds the inner Ethernet frame in place ([`Opened`]).

use core::ops::Range;

use crate::crypto::sign::{SIGNATURE_LEN, VerifyingKey, signed_digest};
use crate::crypto::{CryptoError, SuiteId, SuiteKey};
use crate::replay::ReplayWindow;
use crate::time::{Duration, Instant};
use crate::wire::{
    ETHERNET_HEADER_LEN, Frame, Protocol, Repr, SECTION_HEADER_LEN, Section, SectionRepr,
    SecurityNumber, Seq,
};

use super::{ConfigError, DropReason, OpenError, OpenerConfig, to_mac};

/// A successfully opened frame: the inner Ethernet frame, rebuilt inside the received buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Opened<'b> {
    frame: &'b [u8],
    start: usize,
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

    /// Where [`frame`](Self::frame) lies in the buffer given to [`Opener::open`], for callers
    /// that keep the buffer and the offset rather than the borrow.
    pub fn range(&self) -> Range<usize> {
        self.start..self.start + self.frame.len()
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
    pub fn seq(&self) -> Seq {
        self.seq
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
    pub fn security_number(&self) -> Option<SecurityNumber> {
        self.security_number
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
    accept_unverified: bool,
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
    /// [`ConfigError::NoneRefused`] for [`SuiteId::None`] unless the config allows it;
    /// [`ConfigError::ReplayWindow`] for a window outside 1..=[`MAX_WINDOW`](crate::replay::MAX_WINDOW).
    pub fn new(key: SuiteKey, cfg: OpenerConfig) -> Result<Self, ConfigError> {
        if key.suite() == SuiteId::None && !cfg.allow_none() {
            return Err(ConfigError::NoneRefused);
        }
        let replay =
            ReplayWindow::new(cfg.replay_window()).map_err(|_| ConfigError::ReplayWindow {
                size: cfg.replay_window(),
            })?;
        Ok(Self {
            key,
            replay,
            verifier: None,
            accept_unverified: false,
            security_number: cfg.security_number(),
            previous_security_number: None,
            grace: cfg.security_number_grace(),
            require_timestamp: cfg.require_timestamp(),
            max_skew_ms: cfg.max_skew().total_millis(),
            max_frame_len: cfg.max_frame_len(),
        })
    }

    /// Requires every frame to carry a valid Ed25519 signature by `verifier`.
    #[must_use]
    pub fn with_verifier(mut self, verifier: VerifyingKey) -> Self {
        self.verifier = Some(verifier);
        self
    }

    /// Sets or clears the key signatures must verify under (trust on first use: a key learnt
    /// later); the replay window is kept.
    pub fn set_verifier(&mut self, verifier: Option<VerifyingKey>) {
        self.verifier = verifier;
    }

    /// Without a verifier, accepts signed frames without checking the signature (trust on
    /// first use, before the sender's key is known; [`Opened::signed`] is then `false`). Off by
    /// default: a signed frame without a verifier is [`DropReason::Unsupported`].
    pub fn set_accept_unverified(&mut self, accept: bool) {
        self.accept_unverified = accept;
    }

    /// Starts the replay window over so that `next_seq` and everything above it is accepted and
    /// everything below is too old: for a sender that restarted with lower sequence numbers and
    /// proved it is live over a fresh authenticated channel (a new session).
    pub fn restart_replay_window(&mut self, next_seq: u32) {
        self.replay.restart_at(next_seq);
    }

    /// Rotates the expected security number; the previous one stays valid until
    /// `now + security_number_grace`.
    pub fn set_security_number(&mut self, now: Instant, value: Option<SecurityNumber>) {
        self.previous_security_number = Some((self.security_number, now + self.grace));
        self.security_number = value;
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
        let unverified = repr.signed && self.verifier.is_none() && self.accept_unverified;
        if repr.signed != self.verifier.is_some() && !unverified {
            return Err(if repr.signed {
                DropReason::Unsupported
            } else {
                DropReason::BadSignature
            }
            .into());
        }

        // 2. Replay check, before any cryptography.
        self.replay.check(repr.seq.0)?;

        // 3. The ICV (and decryption), then the signature: a frame without the key costs one
        // hash and one ICV check, never an Ed25519 verification. The signature covers a digest
        // of the ciphertext, taken before decryption overwrites it.
        let signature = match (&self.verifier, view.signature()) {
            (Some(verifier), Some(sig)) => {
                let mut s = [0u8; SIGNATURE_LEN];
                s.copy_from_slice(sig);
                Some((*verifier, signed_digest(view.signed_part()), s))
            }
            _ => None,
        };
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

        if crate::plant::on(crate::plant::Bug::WindowBeforeSignature) {
            let _ = self.replay.commit(repr.seq.0);
        }
        if let Some((verifier, digest, sig)) = signature {
            verifier
                .verify(&digest, &sig)
                .map_err(|_| OpenError(DropReason::BadSignature))?;
        }

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
            start,
            protocol: srepr.protocol(),
            seq: repr.seq,
            security_number: repr.security_number,
            timestamp: repr.timestamp,
            signed: repr.signed && !unverified,
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
