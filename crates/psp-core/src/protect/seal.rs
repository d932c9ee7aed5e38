//! The send side of a session: [`Sealer`] numbers, pads, encrypts and authenticates frames under
//! one key; [`Sealer::seal_batch`] does many at once and lets the suite interleave them.

use crate::crypto::sign::{SIGNATURE_LEN, SigningKey, signed_digest};
use crate::crypto::{SectionJob, SuiteId, SuiteKey};
use crate::time::Instant;
use crate::wire::{
    ETHERNET_HEADER_LEN, Frame, MAX_PADDING, MIN_FRAME_LEN, Protocol, Repr, SECTION_HEADER_LEN,
    Section, SectionRepr, SecurityNumber, Seq,
};

use super::{ConfigError, SealError, SealerConfig, to_mac};

/// The most frames [`Sealer::seal_batch`] handles as one group (longer batches are cut into
/// groups of this size): the framed plaintexts of a group stay in L1 between framing,
/// encryption and the ICV. A caller sizing job arrays needs no more than this.
pub const MAX_BATCH: usize = 16;

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
    /// No frame with this SN or above until the caller raises it (its persisted reservation).
    seq_limit: Option<u32>,
}

impl Sealer {
    /// A sealer whose first frame carries `initial_seq`.
    ///
    /// # Errors
    /// [`ConfigError::NoneRefused`] for [`SuiteId::None`] unless the config allows it;
    /// [`ConfigError::PaddingGranule`] if the padding granule (lcm of `pad_to` and the block
    /// length) exceeds 64.
    pub fn new(key: SuiteKey, initial_seq: Seq, cfg: SealerConfig) -> Result<Self, ConfigError> {
        let suite = key.suite();
        if suite == SuiteId::None && !cfg.allow_none() {
            return Err(ConfigError::NoneRefused);
        }
        let granule = lcm(suite.block_len().max(1), usize::from(cfg.pad_to()).max(1));
        if granule > MAX_PADDING {
            return Err(ConfigError::PaddingGranule { granule });
        }
        Ok(Self {
            key,
            next_seq: Some(initial_seq),
            security_number: cfg.security_number(),
            timestamps: cfg.timestamps(),
            granule,
            signer: None,
            seq_limit: None,
        })
    }

    /// Refuses every sequence number at or above `limit` ([`SealError::Unreserved`]) until the
    /// limit is raised: the caller persists a high-water mark before it lets the sealer use the
    /// numbers below it, so a restart under the same key continues above every number used and
    /// never repeats a (key, nonce) pair. `None` (the default): no limit.
    pub fn set_seq_limit(&mut self, limit: Option<Seq>) {
        self.seq_limit = limit.map(|s| s.0);
    }

    /// Moves the next sequence number forward to `seq` (never back: a lower `seq` changes
    /// nothing). For a caller whose reservations are not contiguous.
    pub fn skip_to(&mut self, seq: Seq) {
        if let Some(n) = self.next_seq
            && seq.0 > n.0
        {
            self.next_seq = Some(seq);
        }
    }

    /// Signs every frame from now on with `signer`, or no frame (`None`), keeping the sequence
    /// numbers (a reload that changes only the host's identity).
    pub fn set_signer(&mut self, signer: Option<SigningKey>) {
        self.signer = signer;
    }

    /// Takes the signer out (frames are no longer signed).
    pub fn take_signer(&mut self) -> Option<SigningKey> {
        self.signer.take()
    }

    /// The limit set by [`set_seq_limit`](Self::set_seq_limit).
    pub fn seq_limit(&self) -> Option<Seq> {
        self.seq_limit.map(Seq)
    }

    /// A random initial SN from 4 random bytes, in the lower half of the space so every key can
    /// send at least 2^31 frames.
    pub const fn random_initial_seq(rand: [u8; 4]) -> Seq {
        Seq(u32::from_be_bytes(rand) >> 1)
    }

    /// Signs every frame with `signer` (digital-signature flag, for broadcast / pre-session).
    #[must_use]
    pub fn with_signer(mut self, signer: SigningKey) -> Self {
        self.signer = Some(signer);
        self
    }

    /// Changes the security number sent from the next frame on (rotation).
    pub fn set_security_number(&mut self, value: Option<SecurityNumber>) {
        self.security_number = value;
    }

    /// The suite of this session.
    pub fn suite(&self) -> SuiteId {
        self.key.suite()
    }

    /// The sequence number of the next frame, or `None` once exhausted.
    pub fn next_seq(&self) -> Option<Seq> {
        self.next_seq
    }

    /// How many frames [`seal_batch`](Self::seal_batch) seals side by side for this suite (1
    /// when batching buys nothing): a caller grouping frames per peer gains nothing from longer
    /// runs.
    pub fn batch_len(&self) -> usize {
        self.key.batch_lanes().min(MAX_BATCH)
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

    /// The longest Ethernet II frame (header included) whose sealed frame fits in `frame_len`
    /// bytes, or `None` if not even an empty one does. For a sub-protocol payload subtract 14.
    ///
    /// This is exact (padding and the 60-byte minimum included), not the worst case of
    /// [`overhead`](Self::overhead).
    pub fn max_inner_len(&self, frame_len: usize) -> Option<usize> {
        let fits = |n: usize| self.sealed_len(n).is_some_and(|l| l <= frame_len);
        if !fits(ETHERNET_HEADER_LEN) {
            return None;
        }
        // `sealed_len` never decreases as the input grows, so bisect on `fits`:
        // fits(lo) holds and fits(hi) fails.
        let (mut lo, mut hi) = (ETHERNET_HEADER_LEN, frame_len.saturating_add(1));
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if fits(mid) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        Some(lo)
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
    /// The suite seals the frames of a group together ([`SuiteKey::seal_many`]): for
    /// `bf-cbc-hmac-sha1` that interleaves up to [`batch_len`](Self::batch_len) CBC chains,
    /// several times faster per frame. Nothing is allocated.
    pub fn seal_batch(&mut self, now: Instant, jobs: &mut [SealJob<'_>]) {
        for group in jobs.chunks_mut(MAX_BATCH) {
            self.seal_group(now, group);
        }
    }

    /// [`seal_batch`](Self::seal_batch) for at most [`MAX_BATCH`] jobs: frame every plaintext
    /// (taking the SNs in order), let the suite seal the sections, then sign.
    fn seal_group(&mut self, now: Instant, jobs: &mut [SealJob<'_>]) {
        let mut layouts = [None::<Layout>; MAX_BATCH];
        for (job, layout) in jobs.iter_mut().zip(&mut layouts) {
            match self.frame_eth_plaintext(now, job.input, job.out) {
                Ok(l) => *layout = Some(l),
                Err(e) => job.result = Err(e),
            }
        }
        let icv_len = self.key.suite().icv_len();
        let mut sealed = [Ok(()); MAX_BATCH];
        {
            let mut sections: [SectionJob<'_>; MAX_BATCH] = Default::default();
            let mut owner = [0usize; MAX_BATCH];
            let mut n = 0;
            for (i, (job, layout)) in jobs.iter_mut().zip(&layouts).enumerate() {
                let Some(l) = layout else { continue };
                // `frame_plaintext` checked that `out` holds `total` bytes.
                let Some(out) = job.out.get_mut(..l.total) else {
                    continue;
                };
                let (clear, rest) = out.split_at_mut(l.clear_len);
                let (section, icv) = rest.split_at_mut(l.section_len);
                sections[n] = SectionJob {
                    seq: l.seq.0,
                    clear,
                    section,
                    icv: icv.get_mut(..icv_len).unwrap_or_default(),
                    result: Ok(()),
                };
                owner[n] = i;
                n += 1;
            }
            self.key.seal_many(&mut sections[..n]);
            for (section, &i) in sections[..n].iter().zip(&owner) {
                sealed[i] = section.result;
            }
        }
        for ((job, layout), sealed) in jobs.iter_mut().zip(&layouts).zip(sealed) {
            let Some(l) = layout else { continue };
            job.result = sealed.map_err(SealError::Crypto).and_then(|()| {
                let out = job
                    .out
                    .get_mut(..l.total)
                    .ok_or(SealError::BufferTooSmall)?;
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
        if self.seq_limit.is_some_and(|l| seq.0 >= l) {
            return Err(SealError::Unreserved);
        }
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

    /// Writes the signature over the digest of everything before it
    /// ([`signed_digest`](crate::crypto::sign::signed_digest)), if this sealer signs.
    fn sign(&self, out: &mut [u8]) -> Result<(), SealError> {
        if let Some(signer) = &self.signer {
            let at = out
                .len()
                .checked_sub(SIGNATURE_LEN)
                .ok_or(SealError::BufferTooSmall)?;
            let (signed, sig) = out.split_at_mut(at);
            let sig: &mut [u8; SIGNATURE_LEN] =
                sig.try_into().map_err(|_| SealError::BufferTooSmall)?;
            signer.sign(&signed_digest(signed), sig);
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

fn round_up(n: usize, granule: usize) -> Option<usize> {
    Some(n.checked_add(granule - 1)? / granule * granule)
}

const fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}

const fn lcm(a: usize, b: usize) -> usize {
    a / gcd(a, b) * b
}
