//! Inner frames into fixed-size outer payloads, and back.
//!
//! The data area after the [`feedback`](super::feedback) header is a sequence of segments,
//! followed by zero padding up to the fixed frame size:
//!
//! ```text
//! whole inner frame:   | 01 | len (14 bits) | frame bytes (len)                          |
//! fragment:            | 10 | len (14 bits) | id (BE16) | offset (BE16) | total (BE16) | bytes (len) |
//! end / padding:       | 00 | 0             | (zeros to the end of the payload)          |
//! ```
//!
//! The two top bits of the first big-endian `u16` are the kind (`11` is reserved); the low 14
//! bits the segment's data length (1..=16383). A data area shorter than 2 bytes, or a zero `u16`,
//! ends the list.
//!
//! * [`Packing::Single`] (faithful, seed 003 §IV-B): at most one whole inner frame per outer
//!   frame; an inner frame that does not fit is refused (the "slight reduction of the MTU").
//! * [`Packing::Packed`] (like RFC 9347 IP-TFS): whole frames are packed back to back; when the
//!   next frame does not fit the rest of the payload it is cut into fragments that fill the rest
//!   of this payload and the next ones, so no byte is wasted on padding while inner traffic is
//!   queued. Unlike IP-TFS each fragment names its frame (id), position and total length, so the
//!   receiver reassembles in any order and a lost outer frame loses only the inner frames that
//!   had a byte in it.
//!
//! Parsing never panics and never reads past the buffer (fuzzed:
//! `fuzz/fuzz_targets/normalize_packing.rs`).

use core::ops::Range;

use super::feedback::Error;

/// Bytes before a whole inner frame.
pub const WHOLE_HEADER_LEN: usize = 2;
/// Bytes before a fragment's data.
pub const FRAGMENT_HEADER_LEN: usize = 8;
/// The sender does not start a fragment with fewer data bytes than this (it pads instead).
pub const MIN_FRAGMENT_LEN: usize = 16;
/// The largest inner frame (14-bit length).
pub const MAX_INNER_LEN: usize = 0x3fff;
/// The most fragmented inner frames reassembled at once.
pub const MAX_SLOTS: usize = 8;
/// Bytes a frame in the delivery queue costs on top of its length (its length prefix).
pub const RING_RECORD_OVERHEAD: usize = 2;
/// Bytes a frame in the transmit queue costs on top of its length: the length prefix and its
/// enqueue instant (8 bytes, µs), the sojourn time CoDel needs.
pub const TX_RECORD_OVERHEAD: usize = RING_RECORD_OVERHEAD + STAMP_LEN;

const STAMP_LEN: usize = 8;

const KIND_END: u16 = 0;
const KIND_WHOLE: u16 = 1;
const KIND_FRAGMENT: u16 = 2;
const LEN_MASK: u16 = 0x3fff;

/// How inner frames are carried in outer payloads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Packing {
    /// Faithful: one inner frame per outer frame, padded; larger frames are refused.
    Single,
    /// Efficient: small frames aggregated, large ones fragmented across outer frames.
    #[default]
    Packed,
}

/// One segment of a data area.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Segment<'a> {
    /// A complete inner frame.
    Whole(&'a [u8]),
    /// A piece of an inner frame.
    Fragment(Fragment<'a>),
}

/// A piece of a fragmented inner frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fragment<'a> {
    /// The sender's identifier for the inner frame (wrapping counter).
    pub id: u16,
    /// Where `data` starts in the inner frame.
    pub offset: u16,
    /// The inner frame's length.
    pub total: u16,
    /// The bytes (non-empty, `offset + len <= total`).
    pub data: &'a [u8],
}

/// Iterates over the segments of a data area; yields at most one error, then stops.
#[derive(Clone, Debug)]
pub struct Segments<'a> {
    rest: &'a [u8],
    done: bool,
}

impl<'a> Segments<'a> {
    /// Segments of `data` (the payload after the header).
    pub fn new(data: &'a [u8]) -> Self {
        Self {
            rest: data,
            done: false,
        }
    }

    fn parse_one(&mut self) -> Result<Option<Segment<'a>>, Error> {
        let rest = self.rest;
        let Some((h, body)) = split_u16(rest) else {
            return Ok(None);
        };
        let len = usize::from(h & LEN_MASK);
        match h >> 14 {
            KIND_END if len == 0 => Ok(None),
            KIND_WHOLE if len > 0 => {
                let data = body.get(..len).ok_or(Error::Truncated)?;
                self.rest = &body[len..];
                Ok(Some(Segment::Whole(data)))
            }
            KIND_FRAGMENT if len > 0 => {
                let (id, body) = split_u16(body).ok_or(Error::Truncated)?;
                let (offset, body) = split_u16(body).ok_or(Error::Truncated)?;
                let (total, body) = split_u16(body).ok_or(Error::Truncated)?;
                let data = body.get(..len).ok_or(Error::Truncated)?;
                let end = usize::from(offset) + len;
                if end > usize::from(total) || usize::from(total) > MAX_INNER_LEN {
                    return Err(Error::BadSegment);
                }
                self.rest = &body[len..];
                Ok(Some(Segment::Fragment(Fragment {
                    id,
                    offset,
                    total,
                    data,
                })))
            }
            _ => Err(Error::BadSegment),
        }
    }
}

impl<'a> Iterator for Segments<'a> {
    type Item = Result<Segment<'a>, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.parse_one() {
            Ok(Some(s)) => Some(Ok(s)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

fn split_u16(b: &[u8]) -> Option<(u16, &[u8])> {
    match b {
        [x, y, rest @ ..] => Some((u16::from_be_bytes([*x, *y]), rest)),
        _ => None,
    }
}

/// Writes segments into a data area, then pads it with zeros.
#[derive(Debug)]
pub struct SegmentWriter<'a> {
    buf: &'a mut [u8],
    pos: usize,
}

impl<'a> SegmentWriter<'a> {
    /// A writer over the whole data area.
    pub fn new(buf: &'a mut [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    /// Bytes left.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Appends a whole frame; false (nothing written) if it is empty, too long or does not fit.
    pub fn push_whole(&mut self, frame: &[u8]) -> bool {
        let len = frame.len();
        if len == 0 || len > MAX_INNER_LEN || WHOLE_HEADER_LEN + len > self.remaining() {
            return false;
        }
        let h = (KIND_WHOLE << 14) | len as u16;
        let at = self.pos;
        self.buf[at..at + 2].copy_from_slice(&h.to_be_bytes());
        self.buf[at + 2..at + 2 + len].copy_from_slice(frame);
        self.pos += WHOLE_HEADER_LEN + len;
        true
    }

    /// Appends a fragment; false (nothing written) if it is malformed or does not fit.
    pub fn push_fragment(&mut self, f: Fragment<'_>) -> bool {
        let len = f.data.len();
        if len == 0
            || usize::from(f.offset) + len > usize::from(f.total)
            || usize::from(f.total) > MAX_INNER_LEN
            || FRAGMENT_HEADER_LEN + len > self.remaining()
        {
            return false;
        }
        let h = (KIND_FRAGMENT << 14) | len as u16;
        let at = self.pos;
        let b = &mut self.buf[at..at + FRAGMENT_HEADER_LEN + len];
        b[0..2].copy_from_slice(&h.to_be_bytes());
        b[2..4].copy_from_slice(&f.id.to_be_bytes());
        b[4..6].copy_from_slice(&f.offset.to_be_bytes());
        b[6..8].copy_from_slice(&f.total.to_be_bytes());
        b[8..].copy_from_slice(f.data);
        self.pos += FRAGMENT_HEADER_LEN + len;
        true
    }

    /// Zero-fills the rest (the end marker and padding); returns the bytes of segments written.
    pub fn finish(self) -> usize {
        self.buf[self.pos..].fill(0);
        self.pos
    }
}

/// A FIFO of variable-length frames in a caller-owned byte region, each stored contiguously as
/// `[len: BE16][bytes]`, or `[len: BE16][stamp: BE64][bytes]` in a [stamped](Self::stamped)
/// ring (a frame that does not fit before the end of the region starts over at its beginning).
/// The struct holds only indices; every call takes the same region.
#[derive(Clone, Debug, Default)]
pub(crate) struct FrameRing {
    // 0, or STAMP_LEN in a stamped ring.
    stamp_len: usize,
    read: usize,
    write: usize,
    // While wrapped, live records are in [read, watermark) and [0, write).
    watermark: usize,
    wrapped: bool,
    frames: usize,
    bytes: usize,
}

impl FrameRing {
    /// A ring whose records also carry a `u64` stamp (the enqueue instant in the tx queue).
    pub(crate) fn stamped() -> Self {
        Self {
            stamp_len: STAMP_LEN,
            ..Self::default()
        }
    }

    /// Bytes a record costs on top of its frame.
    fn overhead(&self) -> usize {
        RING_RECORD_OVERHEAD + self.stamp_len
    }

    /// Queued frames.
    pub(crate) fn frames(&self) -> usize {
        self.frames
    }

    /// Queued frame bytes (without length prefixes).
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Appends a frame of `len` bytes written by `fill`, with `stamp` if the ring is stamped;
    /// false (nothing changed) if full.
    pub(crate) fn push_with(
        &mut self,
        region: &mut [u8],
        len: usize,
        stamp: u64,
        fill: impl FnOnce(&mut [u8]),
    ) -> bool {
        if len > usize::from(u16::MAX) {
            return false;
        }
        let head = self.overhead();
        let need = len + head;
        let pos = if !self.wrapped {
            if self.write + need <= region.len() {
                self.write
            } else if need <= self.read {
                self.watermark = self.write;
                self.wrapped = true;
                0
            } else {
                return false;
            }
        } else if self.write + need <= self.read {
            self.write
        } else {
            return false;
        };
        region[pos..pos + 2].copy_from_slice(&(len as u16).to_be_bytes());
        if self.stamp_len == STAMP_LEN {
            region[pos + 2..pos + head].copy_from_slice(&stamp.to_be_bytes());
        }
        fill(&mut region[pos + head..pos + need]);
        self.write = pos + need;
        self.frames += 1;
        self.bytes += len;
        true
    }

    /// Appends a copy of `frame`; false if full.
    pub(crate) fn push(&mut self, region: &mut [u8], frame: &[u8]) -> bool {
        self.push_stamped(region, frame, 0)
    }

    /// Appends a copy of `frame` with `stamp` (stored only in a stamped ring); false if full.
    pub(crate) fn push_stamped(&mut self, region: &mut [u8], frame: &[u8], stamp: u64) -> bool {
        self.push_with(region, frame.len(), stamp, |b| b.copy_from_slice(frame))
    }

    /// The stamp of the oldest frame (0 in an unstamped ring).
    pub(crate) fn front_stamp(&self, region: &[u8]) -> Option<u64> {
        if self.frames == 0 {
            return None;
        }
        if self.stamp_len != STAMP_LEN {
            return Some(0);
        }
        let mut b = [0u8; STAMP_LEN];
        b.copy_from_slice(&region[self.read + 2..self.read + 2 + STAMP_LEN]);
        Some(u64::from_be_bytes(b))
    }

    /// The byte range of the oldest frame in the region.
    pub(crate) fn front(&self, region: &[u8]) -> Option<Range<usize>> {
        if self.frames == 0 {
            return None;
        }
        let len = usize::from(u16::from_be_bytes([
            region[self.read],
            region[self.read + 1],
        ]));
        let start = self.read + self.overhead();
        Some(start..start + len)
    }

    /// Removes the oldest frame.
    pub(crate) fn pop(&mut self, region: &[u8]) {
        let Some(r) = self.front(region) else {
            return;
        };
        self.read = r.end;
        self.frames -= 1;
        self.bytes -= r.len();
        if self.wrapped && self.read == self.watermark {
            self.read = 0;
            self.wrapped = false;
        }
        if !self.wrapped && self.read == self.write {
            self.read = 0;
            self.write = 0;
        }
    }
}

/// What [`Reassembler::insert`] did with a fragment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Inserted {
    /// Stored; the frame is still incomplete.
    Pending,
    /// The frame in this slot is complete: its bytes are `slot_range(slot, total)`.
    Complete { slot: usize, total: usize },
    /// Refused (longer than a slot).
    Refused,
}

#[derive(Clone, Copy, Debug, Default)]
struct Slot {
    active: bool,
    id: u16,
    total: u16,
    received: u16,
    newest_seq: u64,
}

/// Reassembly of fragmented inner frames in fixed slots of a caller-owned region.
///
/// A slot is freed when its frame completes, when the highest outer sequence number passes its
/// newest fragment by more than the reorder window (a fragment was lost), or when a new frame
/// needs a slot and all are busy (the stalest is dropped). Fragments are counted, not mapped:
/// the sender never sends overlapping pieces and the PSP replay window drops duplicate outer
/// frames, so "bytes received == total" means complete.
#[derive(Clone, Debug)]
pub(crate) struct Reassembler {
    slots: [Slot; MAX_SLOTS],
    n: usize,
    slot_len: usize,
    window: u64,
    highest: u64,
    dropped: u64,
}

impl Reassembler {
    /// `n` slots of `slot_len` bytes; partial frames older than `window` outer frames drop.
    pub(crate) fn new(n: usize, slot_len: usize, window: u64) -> Self {
        Self {
            slots: [Slot::default(); MAX_SLOTS],
            n: n.min(MAX_SLOTS),
            slot_len,
            window,
            highest: 0,
            dropped: 0,
        }
    }

    /// Incomplete frames dropped so far.
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped
    }

    /// The bytes of slot `slot`'s frame of `total` bytes in the region.
    pub(crate) fn slot_range(&self, slot: usize, total: usize) -> Range<usize> {
        let start = slot * self.slot_len;
        start..start + total
    }

    /// Notes an outer frame `seq` and drops partial frames that fell out of the window.
    pub(crate) fn advance(&mut self, seq: u64) {
        self.highest = self.highest.max(seq);
        for s in self.slots[..self.n].iter_mut() {
            if s.active && s.newest_seq.saturating_add(self.window) < self.highest {
                s.active = false;
                self.dropped += 1;
            }
        }
    }

    /// Stores a fragment that arrived in outer frame `seq`.
    pub(crate) fn insert(&mut self, region: &mut [u8], seq: u64, f: &Fragment<'_>) -> Inserted {
        let total = usize::from(f.total);
        if total > self.slot_len {
            return Inserted::Refused;
        }
        let slots = &mut self.slots[..self.n];
        let idx = match slots.iter().position(|s| s.active && s.id == f.id) {
            Some(i) if slots[i].total == f.total => i,
            Some(i) => {
                // Same id, other length: the old frame is gone (id reuse after loss).
                self.dropped += 1;
                slots[i] = new_slot(f, seq);
                i
            }
            None => {
                let i = match slots.iter().position(|s| !s.active) {
                    Some(i) => i,
                    None => {
                        // All busy: drop the stalest partial frame.
                        let mut oldest = 0;
                        for (i, s) in slots.iter().enumerate() {
                            if s.newest_seq < slots[oldest].newest_seq {
                                oldest = i;
                            }
                        }
                        self.dropped += 1;
                        oldest
                    }
                };
                slots[i] = new_slot(f, seq);
                i
            }
        };
        let base = idx * self.slot_len + usize::from(f.offset);
        region[base..base + f.data.len()].copy_from_slice(f.data);
        let s = &mut slots[idx];
        s.newest_seq = s.newest_seq.max(seq);
        // data.len() <= total <= MAX_INNER_LEN, so the sum fits in u32 and saturates in u16.
        s.received = s.received.saturating_add(f.data.len() as u16);
        if s.received >= s.total {
            s.active = false;
            Inserted::Complete { slot: idx, total }
        } else {
            Inserted::Pending
        }
    }
}

fn new_slot(f: &Fragment<'_>, seq: u64) -> Slot {
    Slot {
        active: true,
        id: f.id,
        total: f.total,
        received: 0,
        newest_seq: seq,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_roundtrip() {
        let mut area = [0xeeu8; 64];
        let mut w = SegmentWriter::new(&mut area);
        assert!(w.push_whole(b"hello"));
        assert!(w.push_fragment(Fragment {
            id: 7,
            offset: 3,
            total: 20,
            data: b"abc",
        }));
        assert!(!w.push_whole(&[1u8; 60]));
        assert!(!w.push_whole(b""));
        assert_eq!(w.finish(), 2 + 5 + 8 + 3);
        assert!(area[18..].iter().all(|&b| b == 0));
        let segs: Vec<_> = Segments::new(&area).collect();
        assert_eq!(
            segs,
            vec![
                Ok(Segment::Whole(b"hello")),
                Ok(Segment::Fragment(Fragment {
                    id: 7,
                    offset: 3,
                    total: 20,
                    data: b"abc"
                }))
            ]
        );
    }

    #[test]
    fn segments_errors() {
        // Reserved kind.
        assert_eq!(
            Segments::new(&[0xc0, 0x01, 0]).collect::<Vec<_>>(),
            vec![Err(Error::BadSegment)]
        );
        // Whole frame running past the end.
        assert_eq!(
            Segments::new(&[0x40, 0x05, 1, 2]).collect::<Vec<_>>(),
            vec![Err(Error::Truncated)]
        );
        // Fragment past its total.
        assert_eq!(
            Segments::new(&[0x80, 0x02, 0, 1, 0, 9, 0, 10, 1, 2]).collect::<Vec<_>>(),
            vec![Err(Error::BadSegment)]
        );
        // Empty whole frame, non-zero end marker.
        assert_eq!(
            Segments::new(&[0x40, 0x00]).collect::<Vec<_>>(),
            vec![Err(Error::BadSegment)]
        );
        assert_eq!(
            Segments::new(&[0x00, 0x01]).collect::<Vec<_>>(),
            vec![Err(Error::BadSegment)]
        );
        // One byte, or a zero header: end.
        assert_eq!(Segments::new(&[0x40]).count(), 0);
        assert_eq!(Segments::new(&[0, 0, 0x40, 1, 9]).count(), 0);
    }

    #[test]
    fn ring_fifo_with_wrap() {
        let mut region = [0u8; 16];
        let mut r = FrameRing::default();
        assert!(r.push(&mut region, b"abcdef")); // 8 bytes at 0
        assert!(r.push(&mut region, b"ghij")); // 6 bytes at 8
        assert!(!r.push(&mut region, b"klm")); // 5 > 2 left, read = 0
        assert_eq!(&region[r.front(&region).unwrap()], b"abcdef");
        r.pop(&region);
        assert!(r.push(&mut region, b"klm")); // wraps to 0..5 (<= read = 8)
        assert!(!r.push(&mut region, b"no")); // 5 + 4 > 8
        assert_eq!(r.frames(), 2);
        assert_eq!(r.bytes(), 7);
        assert_eq!(&region[r.front(&region).unwrap()], b"ghij");
        r.pop(&region);
        assert_eq!(&region[r.front(&region).unwrap()], b"klm");
        r.pop(&region);
        assert_eq!(r.front(&region), None);
        assert_eq!((r.read, r.write, r.frames(), r.bytes()), (0, 0, 0, 0));
        assert!(!r.push(&mut region, &[0u8; 15]));
        assert!(r.push(&mut region, &[0u8; 14]));
    }

    #[test]
    fn stamped_ring_keeps_stamps_and_wraps() {
        let mut region = [0u8; 32];
        let mut r = FrameRing::stamped();
        assert!(r.push_stamped(&mut region, b"abcd", 7)); // 14 bytes at 0
        assert!(r.push_stamped(&mut region, b"efgh", 8)); // 14 bytes at 14
        assert!(!r.push_stamped(&mut region, b"ij", 9)); // 12 > 4 left, read = 0
        assert_eq!(r.front_stamp(&region), Some(7));
        assert_eq!(&region[r.front(&region).unwrap()], b"abcd");
        r.pop(&region);
        assert!(r.push_stamped(&mut region, b"ij", 9)); // wraps to 0..12 (<= read = 14)
        assert_eq!(r.front_stamp(&region), Some(8));
        assert_eq!(&region[r.front(&region).unwrap()], b"efgh");
        r.pop(&region);
        assert_eq!(r.front_stamp(&region), Some(9));
        assert_eq!(&region[r.front(&region).unwrap()], b"ij");
        r.pop(&region);
        assert_eq!(r.front_stamp(&region), None);
        // The largest frame: the region minus the record overhead.
        assert!(!r.push_stamped(&mut region, &[0u8; 32 - TX_RECORD_OVERHEAD + 1], 1));
        assert!(r.push_stamped(&mut region, &[0u8; 32 - TX_RECORD_OVERHEAD], 1));
        // Unstamped rings report 0.
        let mut u = FrameRing::default();
        assert!(u.push_stamped(&mut region, b"x", 5));
        assert_eq!(u.front_stamp(&region), Some(0));
    }

    #[test]
    fn reassembly_out_of_order_and_loss() {
        let mut region = [0u8; 2 * 32];
        let mut ra = Reassembler::new(2, 32, 10);
        let frag = |id, offset, data: &'static [u8]| Fragment {
            id,
            offset,
            total: 6,
            data,
        };
        assert_eq!(
            ra.insert(&mut region, 2, &frag(1, 3, b"def")),
            Inserted::Pending
        );
        assert_eq!(
            ra.insert(&mut region, 1, &frag(1, 0, b"abc")),
            Inserted::Complete { slot: 0, total: 6 }
        );
        assert_eq!(&region[ra.slot_range(0, 6)], b"abcdef");
        // A frame whose second half is lost is dropped once the window passes.
        assert_eq!(
            ra.insert(&mut region, 3, &frag(2, 0, b"xyz")),
            Inserted::Pending
        );
        ra.advance(13);
        assert_eq!(ra.dropped(), 0);
        ra.advance(14);
        assert_eq!(ra.dropped(), 1);
        // All slots busy: the stalest is evicted.
        ra.insert(&mut region, 20, &frag(3, 0, b"a"));
        ra.insert(&mut region, 21, &frag(4, 0, b"b"));
        ra.insert(&mut region, 22, &frag(5, 0, b"c"));
        assert_eq!(ra.dropped(), 2);
        // Too long for a slot.
        let big = Fragment {
            id: 9,
            offset: 0,
            total: 33,
            data: b"z",
        };
        assert_eq!(ra.insert(&mut region, 23, &big), Inserted::Refused);
    }
}
