//! [`Connection`]: the data phase of one stream, sans-I/O.
//!
//! Send ([`write`](Connection::write)): the caller's bytes are protected in stream order
//! (scrambled as one stream, or each segment sealed), cut into segments of at most
//! `segment_len` bytes, and each segment is appended to one path's output as the
//! [`SharePolicy`] says (the first always on the trusted path). Receive
//! ([`read`](Connection::read)): each path delivers its segments in order (TCP), so the stream
//! is a merge of two ordered queues: the receiver keeps at most one parsed segment per path and
//! delivers the one whose number is next. A path whose head segment is not next asks for no
//! more input, which bounds reassembly to one receive buffer per path
//! (`2 * (HEADER_LEN + MAX_PAYLOAD)`) whatever the sender does.
//!
//! Path failure ([`OnPathFailure`]): the receiver acknowledges what it delivered (cumulative
//! acks every [`ACK_EVERY`] bytes and at end of stream), on the trusted path while it works, to
//! a peer that asked for acks (hello `RESEND`). Under `Continue` the sender keeps every
//! unacknowledged segment as sent (at most [`RETAIN_LIMIT`](crate::RETAIN_LIMIT) bytes, [`ENTRY_OVERHEAD`] charged
//! per segment; [`write`](Connection::write) takes nothing while full), and when a path fails
//! re-sends that path's kept segments, unchanged but for the path sequence, on the other path.
//! A receiver under its own `Continue` policy that lost a path, or whose peer re-sends and that
//! waited [`STALL`] for the next segment, reads a path whose head is not next ahead into an
//! out-of-order buffer (at most [`REORDER_LIMIT`], charged the same way), and drops segments
//! it already delivered. A `Close` receiver never reads ahead, whatever the peer's hello says.
//!
//! Call order: the I/O layer writes [`poll_transmit`](Connection::poll_transmit) on each path
//! and reports it with [`transmitted`](Connection::transmitted); for each path where
//! [`needs_input`](Connection::needs_input) is true it reads into
//! [`recv_buf`](Connection::recv_buf) and reports it with
//! [`handle_recv`](Connection::handle_recv), or reports the path's end or error with
//! [`handle_path_failed`](Connection::handle_path_failed); it calls
//! [`handle_timeout`](Connection::handle_timeout) at [`poll_timeout`](Connection::poll_timeout)
//! and takes [`poll_event`](Connection::poll_event)s (which half may now make progress). After
//! the first error every call returns an error of the same kind and message.

use std::collections::{BTreeMap, VecDeque};
use std::io;

use psp_core::SuiteKey;
use psp_core::scramble::{Descrambler, Scrambler};
use psp_core::time::{Duration, Instant};

use super::roles;
use super::setup::{Established, Keys};
use crate::wire::{
    self, AAD_LEN, CONTROL_TAG_LEN, Cipher, HEADER_LEN, Kind, MAX_PAYLOAD, PathRole, Repr, Segment,
};
use crate::{
    Error, OnPathFailure, Options, PathFailure, PathStats, SharePolicy, TRUSTED, UNTRUSTED,
};

/// The AEAD tag length.
const TAG_LEN: usize = CONTROL_TAG_LEN;
/// A path takes a new segment while less than this is queued for it.
pub(crate) const OUT_LIMIT: usize = 64 * 1024;
/// The receive buffer per path: two whole segments (one being delivered, one arriving).
const IN_LEN: usize = 2 * (HEADER_LEN + MAX_PAYLOAD);
/// The most bytes of segments (as sent, plus [`ENTRY_OVERHEAD`] each) a `Continue` sender keeps
/// unacknowledged.
pub(crate) const RETAIN_LIMIT: usize = 16 * 1024 * 1024;
/// The receiver acks after this many delivered bytes (and at end of stream).
pub(crate) const ACK_EVERY: u64 = 1024 * 1024;
/// How long a `Continue` receiver whose peer re-sends waits for the path holding the next
/// segment, while the other path's head is parked, before it reads that other path ahead.
pub(crate) const STALL: Duration = Duration::from_millis(100);
/// What one kept segment costs beyond its bytes (allocation, queue or map entry), charged
/// against [`RETAIN_LIMIT`](crate::RETAIN_LIMIT) by the sender and [`REORDER_LIMIT`] by the receiver.
pub(crate) const ENTRY_OVERHEAD: usize = 256;
/// The most a `Continue` receiver keeps out of order (segment bytes plus [`ENTRY_OVERHEAD`]
/// each): what an honest sender may have unacknowledged, plus the two receive buffers.
pub(crate) const REORDER_LIMIT: usize = RETAIN_LIMIT + 2 * (IN_LEN + ENTRY_OVERHEAD);

enum Tx {
    None,
    Scramble(Box<Scrambler>),
    Aead(Box<SuiteKey>),
}

enum Rx {
    None,
    Scramble(Box<Descrambler>),
    Aead(Box<SuiteKey>),
}

/// What [`Connection::read`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub enum Read {
    /// This many stream bytes were written to the caller's buffer.
    Data(usize),
    /// End of stream: every working path's fin agrees with what was delivered. An ack may be
    /// queued: write it before closing.
    End,
    /// Nothing to deliver until more input arrives on a path that
    /// [`needs_input`](Connection::needs_input), or the timer fires.
    Blocked,
}

/// Which half of a split stream may now make progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// A data segment or a fin was parsed, a path failed, or the stream failed.
    Readable,
    /// An ack freed kept segments, a path failed, or the stream failed.
    Writable,
}

const WAKE_READ: u8 = 1;
const WAKE_WRITE: u8 = 2;

/// One path's buffers and state.
struct PathState {
    role: PathRole,
    /// To send: `out[out_pos..]`.
    out: Vec<u8>,
    out_pos: usize,
    /// Receive buffer of at least [`IN_LEN`] bytes; `inb[in_start..in_end]` is unread.
    inb: Box<[u8]>,
    in_start: usize,
    in_end: usize,
    tx_seq: u32,
    rx_seq: u32,
    /// The parsed head data segment (at `inb[in_start..]`).
    head: Option<Head>,
    fin: Option<(u64, u32)>,
    /// Failed, and the stream goes on without it: no more input or output; complete segments
    /// still in `inb` are used.
    failed: bool,
    stats: PathStats,
}

#[derive(Clone, Copy)]
struct Head {
    repr: Repr,
    /// Payload bytes already delivered (after decoding).
    pos: usize,
    /// Plaintext length once decoded.
    plain_len: usize,
    decoded: bool,
}

/// A segment kept for re-sending until acknowledged.
struct Retained {
    seg: u32,
    /// The stream offset after its payload.
    end: u64,
    /// Its plaintext length.
    payload: u64,
    /// The path it was last sent on.
    path: usize,
    /// Header and protected payload, as sent.
    bytes: Vec<u8>,
}

/// A segment taken out of order from a path, waiting for its turn.
struct Spilled {
    head: Head,
    path: usize,
    bytes: Vec<u8>,
}

/// What [`Connection::advance`] found on a path.
enum Advance {
    /// A data segment is parsed at the head.
    Head,
    /// The path is finished (its fin, or failed and drained).
    Finished,
    /// More bytes are needed.
    NeedInput,
}

/// The data phase of a stream (see the module docs for the call order).
pub struct Connection {
    paths: Vec<PathState>,
    cipher: Cipher,
    tx: Tx,
    rx: Rx,
    share: SharePolicy,
    policy: OnPathFailure,
    segment_len: usize,
    tx_offset: u64,
    tx_seg: u32,
    sent_payload: Vec<u64>,
    fin_queued: bool,
    rx_offset: u64,
    rx_seg: u32,
    /// Stream offset and segment count at the end of the last wholly delivered segment.
    delivered: (u64, u32),
    /// The last ack sent.
    ack_sent: (u64, u32),
    /// Send acks (the peer keeps segments for re-sending: its hello's `RESEND` bit).
    send_acks: bool,
    /// Keep segments for re-sending (`Continue`, dispersal mode).
    retain: bool,
    retained: VecDeque<Retained>,
    retained_bytes: usize,
    /// Buffers of acknowledged segments, reused.
    pool: Vec<Vec<u8>>,
    /// The highest cumulative ack received (segments).
    acked_seg: u32,
    /// Out-of-order segments by number.
    reorder: BTreeMap<u32, Spilled>,
    reorder_bytes: usize,
    /// The segment being delivered from `reorder`.
    spill: Option<Spilled>,
    /// When the reader's wait for the next segment counts as a stall (armed while another
    /// path's head is parked).
    stall_at: Option<Instant>,
    /// The wait passed [`STALL`]: read ahead until the next in-order delivery from a path.
    stalled: bool,
    started: Instant,
    failed: Option<(io::ErrorKind, String)>,
    wake: u8,
}

impl core::fmt::Debug for Connection {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Connection")
            .field("cipher", &self.cipher)
            .field("tx_offset", &self.tx_offset)
            .field("rx_offset", &self.rx_offset)
            .finish_non_exhaustive()
    }
}

impl Connection {
    /// The data phase after `est`, with `options`' share policy, segment length and path
    /// failure policy.
    pub fn new(now: Instant, est: Established, options: &Options) -> Self {
        let roles = roles(est.mode);
        let dispersal = roles.len() == 2;
        let continues = matches!(options.on_path_failure, OnPathFailure::Continue { .. });
        let mut leftover = est.leftover.into_iter();
        let paths = roles
            .iter()
            .map(|&role| {
                // The peer sends no data before the binding tag, so set-up leaves at most a few
                // segments; a larger buffer only holds them.
                let left = leftover.next().unwrap_or_default();
                let mut inb = vec![0u8; IN_LEN.max(left.len())].into_boxed_slice();
                inb[..left.len()].copy_from_slice(&left);
                PathState {
                    role,
                    // One segment's room; it grows (to about 2 * OUT_LIMIT + a segment) with
                    // the first writes. Reserving all ~147 KiB here was an mmap and its page
                    // faults per path on every set-up's critical path (20-60 µs of the
                    // initiator's; docs/MULTIPATH.md, "Set-up cost").
                    out: Vec::with_capacity(HEADER_LEN + MAX_PAYLOAD),
                    out_pos: 0,
                    in_end: left.len(),
                    inb,
                    in_start: 0,
                    tx_seq: 0,
                    rx_seq: 0,
                    head: None,
                    fin: None,
                    failed: false,
                    stats: PathStats::new(role),
                }
            })
            .collect();
        let tx = match est.tx {
            Keys::None => Tx::None,
            Keys::Scramble(seed) => Tx::Scramble(Box::new(Scrambler::new(&seed))),
            Keys::Aead(k) => Tx::Aead(k),
        };
        let rx = match est.rx {
            Keys::None => Rx::None,
            Keys::Scramble(seed) => Rx::Scramble(Box::new(Descrambler::new(&seed))),
            Keys::Aead(k) => Rx::Aead(k),
        };
        Self {
            sent_payload: vec![0; roles.len()],
            paths,
            cipher: est.cipher,
            tx,
            rx,
            share: options.share,
            policy: options.on_path_failure,
            // The same cap for every cipher, so a segment never exceeds MAX_PAYLOAD with a tag.
            segment_len: options.segment_len.clamp(1, MAX_PAYLOAD - TAG_LEN),
            tx_offset: 0,
            tx_seg: 0,
            fin_queued: false,
            rx_offset: 0,
            rx_seg: 0,
            delivered: (0, 0),
            ack_sent: (0, 0),
            send_acks: dispersal && est.peer_wants_acks,
            retain: dispersal && continues,
            retained: VecDeque::new(),
            retained_bytes: 0,
            pool: Vec::new(),
            acked_seg: 0,
            reorder: BTreeMap::new(),
            reorder_bytes: 0,
            spill: None,
            stall_at: None,
            stalled: false,
            started: now,
            failed: None,
            wake: 0,
        }
    }

    /// The negotiated stream protection.
    pub fn cipher(&self) -> Cipher {
        self.cipher
    }

    /// The number of paths (2 in dispersal mode, 1 in kernel MPTCP mode).
    pub fn path_count(&self) -> usize {
        self.paths.len()
    }

    /// Path `i`'s counters (addresses and `TCP_INFO` are the I/O layer's).
    ///
    /// # Panics
    /// If `i` is not a path.
    pub fn path_stats(&self, i: usize) -> &PathStats {
        &self.paths[i].stats
    }

    /// The fraction of payload bytes sent so far on the untrusted path (kernel MPTCP mode: 0).
    pub fn untrusted_share(&self) -> f64 {
        let total: u64 = self.sent_payload.iter().sum();
        if total == 0 || self.paths.len() == 1 {
            0.0
        } else {
            self.sent_payload[UNTRUSTED] as f64 / total as f64
        }
    }

    /// Bytes of segments kept for re-sending, not yet acknowledged (`Continue` only).
    pub fn unacked_bytes(&self) -> usize {
        self.retained_bytes
    }

    /// The largest payload of one [`write`](Self::write).
    pub fn segment_len(&self) -> usize {
        self.segment_len
    }

    /// The stream's failure, if it failed.
    ///
    /// # Errors
    /// The first error, again.
    pub fn check(&self) -> io::Result<()> {
        match &self.failed {
            Some((k, m)) => Err(io::Error::new(*k, m.clone())),
            None => Ok(()),
        }
    }

    /// Whether path `i` failed and the stream went on without it.
    pub fn is_path_failed(&self, i: usize) -> bool {
        self.paths.get(i).is_some_and(|p| p.failed)
    }

    /// Whether fins are queued ([`close`](Self::close)).
    pub fn is_closed(&self) -> bool {
        self.fin_queued
    }

    /// Whether kept segments wait for the peer's acks (`Continue`).
    pub fn awaiting_acks(&self) -> bool {
        self.retain && !self.retained.is_empty()
    }

    /// Whether acks are sent to the peer (it asked for them).
    pub fn sends_acks(&self) -> bool {
        self.send_acks
    }

    /// Which half may now make progress (each event once).
    #[must_use]
    pub fn poll_event(&mut self) -> Option<Event> {
        if self.wake & WAKE_READ != 0 {
            self.wake &= !WAKE_READ;
            return Some(Event::Readable);
        }
        if self.wake & WAKE_WRITE != 0 {
            self.wake &= !WAKE_WRITE;
            return Some(Event::Writable);
        }
        None
    }

    /// When [`handle_timeout`](Self::handle_timeout) is due: the stall timer, armed by
    /// [`read`](Self::read) while it waits for a path with another path's head parked.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.stall_at
    }

    /// Runs the stall timer: past it, the reader reads ahead (see the module docs).
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.stall_at.is_some_and(|t| now >= t) {
            self.stall_at = None;
            self.stalled = true;
            self.wake |= WAKE_READ;
        }
    }

    fn fail(&mut self, e: Error) -> io::Error {
        let kind = e.io_kind();
        let msg = e.to_string();
        if self.failed.is_none() {
            self.failed = Some((kind, msg.clone()));
        }
        self.wake |= WAKE_READ | WAKE_WRITE;
        io::Error::new(kind, msg)
    }

    // ---- output -------------------------------------------------------------------------------

    /// The bytes to write on path `i` now (empty: nothing, or the path failed).
    pub fn poll_transmit(&self, i: usize) -> &[u8] {
        match self.paths.get(i) {
            Some(p) if !p.failed => &p.out[p.out_pos..],
            _ => &[],
        }
    }

    /// `n` bytes of [`poll_transmit`](Self::poll_transmit)`(i)` were written.
    pub fn transmitted(&mut self, i: usize, n: usize) {
        let Some(p) = self.paths.get_mut(i) else {
            return;
        };
        p.out_pos = (p.out_pos + n).min(p.out.len());
        p.stats.wire_bytes_sent += n as u64;
        if p.out_pos == p.out.len() {
            p.out.clear();
            p.out_pos = 0;
        }
    }

    /// Whether any working path has bytes to write.
    pub fn transmit_pending(&self) -> bool {
        self.paths
            .iter()
            .any(|p| !p.failed && p.out_pos < p.out.len())
    }

    /// Makes room at the end of path `i`'s output: drops what was written once that passes
    /// [`OUT_LIMIT`] (a copy of at most `OUT_LIMIT` bytes, every `OUT_LIMIT` bytes written).
    fn compact_out(p: &mut PathState) {
        if p.out_pos > OUT_LIMIT {
            p.out.drain(..p.out_pos);
            p.out_pos = 0;
        }
    }

    fn available(&self, i: usize) -> bool {
        !self.paths[i].failed && self.paths[i].out.len() - self.paths[i].out_pos < OUT_LIMIT
    }

    /// Whether keeping one more segment of `n` bytes would pass [`RETAIN_LIMIT`](crate::RETAIN_LIMIT): then
    /// [`write`](Self::write) takes nothing until acks arrive.
    pub fn retention_full(&self, n: usize) -> bool {
        let charged = self.retained_bytes + self.retained.len() * ENTRY_OVERHEAD;
        self.retain
            && !self.retained.is_empty()
            && charged + HEADER_LEN + n.min(self.segment_len) + TAG_LEN + ENTRY_OVERHEAD
                > RETAIN_LIMIT
    }

    /// Whether this side goes on after a path failure (its own policy, not the peer's).
    fn continues(&self) -> bool {
        matches!(self.policy, OnPathFailure::Continue { .. })
    }

    /// The path for the next segment of `n` bytes, if one can take it now.
    fn choose(&self, n: usize) -> Option<usize> {
        if self.paths.len() == 1 {
            // Kernel MPTCP mode: one socket, the kernel decides placement.
            return self.available(0).then_some(0);
        }
        if self.retention_full(n) {
            return None;
        }
        // After a failure (allowed by the policy), everything goes on the survivor.
        for (i, j) in [(UNTRUSTED, TRUSTED), (TRUSTED, UNTRUSTED)] {
            if self.paths[i].failed {
                return self.available(j).then_some(j);
            }
        }
        if self.tx_seg == 0 {
            // The first segment always goes on the trusted path (seed 001 §III).
            return self.available(TRUSTED).then_some(TRUSTED);
        }
        let (u, total) = (
            self.sent_payload[UNTRUSTED] + n as u64,
            self.sent_payload[0] + self.sent_payload[1] + n as u64,
        );
        let untrusted_ok = |permille: u16| u * 1000 <= u64::from(permille) * total;
        match self.share {
            SharePolicy::Fixed { untrusted_permille } => {
                let p = if untrusted_ok(untrusted_permille) {
                    UNTRUSTED
                } else {
                    TRUSTED
                };
                self.available(p).then_some(p)
            }
            SharePolicy::Adaptive {
                max_untrusted_permille,
            } => {
                let ok = untrusted_ok(max_untrusted_permille);
                match (self.available(UNTRUSTED) && ok, self.available(TRUSTED)) {
                    (true, _) => Some(UNTRUSTED),
                    (false, true) => Some(TRUSTED),
                    (false, false) => None,
                }
            }
        }
    }

    /// Protects the start of `data` (at most [`segment_len`](Self::segment_len) bytes) as one
    /// segment on the path the share policy picks; returns how many bytes it took (0: no path
    /// has room, or the kept segments are at [`RETAIN_LIMIT`](crate::RETAIN_LIMIT): write out
    /// [`poll_transmit`](Self::poll_transmit), read acks, and try again).
    ///
    /// # Errors
    /// After [`close`](Self::close) (`BrokenPipe`); the stream's failure.
    pub fn write(&mut self, _now: Instant, data: &[u8]) -> io::Result<usize> {
        self.check()?;
        if self.fin_queued {
            return Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "write after shutdown",
            ));
        }
        let n = data.len().min(self.segment_len);
        if n == 0 {
            return Ok(0);
        }
        let Some(i) = self.choose(n) else {
            return Ok(0);
        };
        self.push_segment(i, &data[..n])?;
        Ok(n)
    }

    /// Appends one data segment carrying `data` to path `i` (and keeps a copy under
    /// `Continue`).
    fn push_segment(&mut self, i: usize, data: &[u8]) -> io::Result<()> {
        let tag = if matches!(self.tx, Tx::Aead(_)) {
            TAG_LEN
        } else {
            0
        };
        let wire_len = data.len() + tag;
        let p = &mut self.paths[i];
        Self::compact_out(p);
        let repr = Repr {
            kind: Kind::Data,
            // segment_len is clamped so that this fits MAX_PAYLOAD < 2^16.
            len: u16::try_from(wire_len).unwrap_or(u16::MAX),
            path_seq: p.tx_seq,
            offset: self.tx_offset,
            seg: self.tx_seg,
        };
        let start = p.out.len();
        p.out.resize(start + HEADER_LEN + wire_len, 0);
        repr.emit(&mut p.out[start..start + HEADER_LEN]);
        let body = start + HEADER_LEN;
        p.out[body..body + data.len()].copy_from_slice(data);
        match &mut self.tx {
            Tx::None => {}
            Tx::Scramble(s) => s.scramble_in_place(&mut p.out[body..body + data.len()]),
            Tx::Aead(key) => {
                let aad = wire::aad(Kind::Data, &p.out[start..body]);
                let (section, icv) = p.out[body..].split_at_mut(data.len());
                if key.seal_in_place(repr.seg, &aad, section, icv).is_err() {
                    return Err(self.fail(Error::Protocol("AEAD seal failed")));
                }
            }
        }
        p.tx_seq = p.tx_seq.wrapping_add(1);
        p.stats.segments_sent += 1;
        p.stats.bytes_sent += data.len() as u64;
        if self.retain {
            let mut bytes = self.pool.pop().unwrap_or_default();
            bytes.clear();
            bytes.extend_from_slice(&p.out[start..]);
            self.retained_bytes += bytes.len();
            self.retained.push_back(Retained {
                seg: repr.seg,
                end: self.tx_offset + data.len() as u64,
                payload: data.len() as u64,
                path: i,
                bytes,
            });
        }
        self.sent_payload[i] += data.len() as u64;
        self.tx_offset += data.len() as u64;
        self.tx_seg = match self.tx_seg.checked_add(1) {
            Some(s) => s,
            None => return Err(self.fail(Error::Protocol("segment numbers exhausted"))),
        };
        Ok(())
    }

    /// Appends a control segment (fin or ack) to path `i`: sealed under an AEAD cipher (with
    /// the sending direction's key, nonce counter `seg`, the kind's AAD prefix), bare otherwise.
    fn push_control(&mut self, i: usize, kind: Kind, offset: u64, seg: u32) -> io::Result<()> {
        let tag = if matches!(self.tx, Tx::Aead(_)) {
            TAG_LEN
        } else {
            0
        };
        let p = &mut self.paths[i];
        Self::compact_out(p);
        let repr = Repr {
            kind,
            len: if tag == 0 { 0 } else { TAG_LEN as u16 },
            path_seq: p.tx_seq,
            offset,
            seg,
        };
        let start = p.out.len();
        p.out.resize(start + HEADER_LEN + tag, 0);
        repr.emit(&mut p.out[start..start + HEADER_LEN]);
        if let Tx::Aead(key) = &self.tx {
            let aad = wire::aad(kind, &p.out[start..start + HEADER_LEN]);
            let icv = &mut p.out[start + HEADER_LEN..];
            if key.seal_in_place(seg, &aad, &mut [], icv).is_err() {
                return Err(self.fail(Error::Protocol("AEAD seal failed")));
            }
        }
        p.tx_seq = p.tx_seq.wrapping_add(1);
        Ok(())
    }

    /// Ends the sending half: queues a fin (stream length, segment count) on every working
    /// path. Once; later calls do nothing.
    ///
    /// # Errors
    /// The stream's failure.
    pub fn close(&mut self, _now: Instant) -> io::Result<()> {
        self.check()?;
        if self.fin_queued {
            return Ok(());
        }
        for i in 0..self.paths.len() {
            if !self.paths[i].failed {
                self.push_control(i, Kind::Fin, self.tx_offset, self.tx_seg)?;
            }
        }
        self.fin_queued = true;
        Ok(())
    }

    /// Queues an ack of what was delivered if there is something new and `force` or
    /// [`ACK_EVERY`] bytes have passed: on the trusted path while it works.
    fn maybe_ack(&mut self, force: bool) -> io::Result<()> {
        let (offset, seg) = self.delivered;
        if !self.send_acks
            || seg == self.ack_sent.1
            || (!force && offset - self.ack_sent.0 < ACK_EVERY)
        {
            return Ok(());
        }
        let Some(i) = [TRUSTED, UNTRUSTED]
            .into_iter()
            .find(|&i| !self.paths[i].failed)
        else {
            return Ok(());
        };
        self.push_control(i, Kind::Ack, offset, seg)?;
        self.paths[i].stats.acks_sent += 1;
        self.ack_sent = (offset, seg);
        Ok(())
    }

    // ---- path failure -------------------------------------------------------------------------

    /// Path `i` failed (a socket error, a close before the stream's fin, a write refused).
    /// Under `Close` (or if the other path is gone too, or if going on would leave a
    /// scrambled/plain stream on the untrusted path alone without permission) the stream fails;
    /// under `Continue` the path is dropped and its unacknowledged segments are queued again on
    /// the other path. `Ok` means the stream goes on: close the path's connection.
    ///
    /// # Errors
    /// The stream's failure (this one, or an earlier one).
    pub fn handle_path_failed(&mut self, now: Instant, i: usize, e: Error) -> io::Result<()> {
        self.check()?;
        if self.paths.get(i).is_none_or(|p| p.failed) {
            return Ok(());
        }
        let reason = e.to_string();
        let after = core::time::Duration::from(now.saturating_since(self.started));
        let other = 1 - i.min(1);
        let allow_untrusted_only = match self.policy {
            OnPathFailure::Close => None,
            OnPathFailure::Continue {
                allow_untrusted_only,
            } => Some(allow_untrusted_only),
        };
        let unprotected = matches!(self.cipher, Cipher::Scramble | Cipher::None);
        let verdict = match allow_untrusted_only {
            _ if self.paths.len() != 2 || self.paths[other].failed => Err(e),
            None => Err(e),
            Some(false) if self.paths[i].role == PathRole::Trusted && unprotected => {
                Err(Error::UntrustedOnly {
                    cipher: self.cipher,
                    reason: reason.clone(),
                })
            }
            Some(_) => Ok(()),
        };
        self.paths[i].stats.failure = Some(PathFailure {
            after,
            reason,
            continued: verdict.is_ok(),
        });
        if let Err(e) = verdict {
            return Err(self.fail(e));
        }
        let p = &mut self.paths[i];
        p.failed = true;
        p.out.clear();
        p.out_pos = 0;
        for r in self.retained.iter_mut().filter(|r| r.path == i) {
            let q = &mut self.paths[other];
            let start = q.out.len();
            q.out.extend_from_slice(&r.bytes);
            q.out[start + 4..start + 8].copy_from_slice(&q.tx_seq.to_be_bytes());
            q.tx_seq = q.tx_seq.wrapping_add(1);
            q.stats.segments_resent += 1;
            q.stats.bytes_resent += r.payload;
            r.path = other;
        }
        // Ack again on the survivor (an ack queued on the failed path is gone).
        self.ack_sent = (0, 0);
        self.wake |= WAKE_READ | WAKE_WRITE;
        Ok(())
    }

    // ---- input --------------------------------------------------------------------------------

    /// Handles what is buffered on path `i` (acks and fins on the way to the next data
    /// segment) and says whether the path needs more bytes to go on: then read into
    /// [`recv_buf`](Self::recv_buf). False once a data segment waits at its head, or the path
    /// is finished or failed.
    ///
    /// # Errors
    /// The stream's failure (bad bytes, a forged control segment).
    pub fn needs_input(&mut self, i: usize) -> io::Result<bool> {
        self.check()?;
        Ok(matches!(self.advance(i)?, Advance::NeedInput))
    }

    /// Path `i`'s free receive space (non-empty whenever [`needs_input`](Self::needs_input)
    /// said so).
    ///
    /// # Panics
    /// If `i` is not a path.
    pub fn recv_buf(&mut self, i: usize) -> &mut [u8] {
        let p = &mut self.paths[i];
        &mut p.inb[p.in_end..]
    }

    /// `n` bytes were read into [`recv_buf`](Self::recv_buf)`(i)`.
    pub fn handle_recv(&mut self, i: usize, n: usize) {
        if let Some(p) = self.paths.get_mut(i) {
            p.in_end = (p.in_end + n).min(p.inb.len());
        }
    }

    /// Makes sure path `i` has a parsed head data segment if its bytes allow; fins and acks on
    /// the way are handled.
    fn advance(&mut self, i: usize) -> io::Result<Advance> {
        loop {
            let any_failed = self.paths.iter().any(|p| p.failed);
            let complete = (self.rx_offset, self.rx_seg);
            let awaiting_acks = self.awaiting_acks();
            let sealed = matches!(self.rx, Rx::Aead(_));
            let p = &mut self.paths[i];
            if p.head.is_some() {
                return Ok(Advance::Head);
            }
            // After a fin, go on only for acks we wait for, or if a path failed before the
            // stream was complete (segments re-sent from the failed path follow the fin).
            if p.fin
                .is_some_and(|f| !awaiting_acks && (!any_failed || f == complete))
            {
                return Ok(Advance::Finished);
            }
            let role = p.role;
            let avail = &p.inb[p.in_start..p.in_end];
            let parsed = match wire::segment_len(avail) {
                Err(e) => Err(e),
                Ok(None) => Ok(None),
                Ok(Some(len)) => {
                    Repr::parse(&Segment::new_unchecked(&avail[..len])).map(|r| Some((r, len)))
                }
            };
            let (repr, len) = match parsed {
                Err(error) => {
                    let e = Error::Wire {
                        path: Some(role),
                        error,
                    };
                    return Err(self.fail(e));
                }
                Ok(Some(r)) => r,
                Ok(None) => {
                    if p.failed {
                        return Ok(Advance::Finished);
                    }
                    // Compact, so the rest of a segment fits.
                    if p.in_start > 0 {
                        p.inb.copy_within(p.in_start..p.in_end, 0);
                        p.in_end -= p.in_start;
                        p.in_start = 0;
                    }
                    return Ok(Advance::NeedInput);
                }
            };
            if repr.path_seq != p.rx_seq {
                return Err(self.fail(Error::PathFailed {
                    path: role,
                    reason: "a segment is missing or repeated (path sequence)".into(),
                }));
            }
            p.rx_seq = p.rx_seq.wrapping_add(1);
            p.stats.wire_bytes_received += len as u64;
            if repr.kind == Kind::Data {
                if sealed && usize::from(repr.len) <= TAG_LEN {
                    return Err(self.fail(Error::Wire {
                        path: Some(role),
                        error: wire::Error::EmptyData,
                    }));
                }
                p.head = Some(Head {
                    repr,
                    pos: 0,
                    plain_len: usize::from(repr.len),
                    decoded: false,
                });
                self.wake |= WAKE_READ;
                return Ok(Advance::Head);
            }
            let at = p.in_start + HEADER_LEN;
            let mut payload = [0u8; TAG_LEN];
            let plen = usize::from(repr.len).min(TAG_LEN);
            payload[..plen].copy_from_slice(&p.inb[at..at + plen]);
            p.in_start += len;
            let checked = self
                .open_control(i, &repr, &payload[..plen])
                .and_then(|()| match repr.kind {
                    Kind::Ack => self.handle_ack(i, &repr),
                    _ => self.handle_fin(i, &repr),
                });
            if let Err(e) = checked {
                return Err(self.fail(e));
            }
        }
    }

    /// Verifies a fin or an ack's tag (sealed streams) or its emptiness (others).
    fn open_control(&self, i: usize, repr: &Repr, payload: &[u8]) -> Result<(), Error> {
        let path = self.paths[i].role;
        match &self.rx {
            Rx::Aead(key) => {
                let mut header = [0u8; HEADER_LEN];
                repr.emit(&mut header);
                if payload.len() != TAG_LEN
                    || key
                        .open_in_place(repr.seg, &wire::aad(repr.kind, &header), &mut [], payload)
                        .is_err()
                {
                    return Err(Error::Auth { path });
                }
            }
            _ if !payload.is_empty() => {
                return Err(Error::Protocol("a tag on an unsealed stream"));
            }
            _ => {}
        }
        Ok(())
    }

    fn handle_fin(&mut self, i: usize, repr: &Repr) -> Result<(), Error> {
        let f = (repr.offset, repr.seg);
        let p = &mut self.paths[i];
        if p.fin.is_some_and(|old| old != f) {
            return Err(Error::Protocol("two different fins on a path"));
        }
        p.fin = Some(f);
        self.wake |= WAKE_READ;
        Ok(())
    }

    /// Applies a verified ack from path `i`: forgets the segments it covers.
    fn handle_ack(&mut self, i: usize, repr: &Repr) -> Result<(), Error> {
        // Unprotected acks count only from the trusted path while it works: an attacker on
        // the untrusted path could forge them (and make us forget data we may need).
        if !matches!(self.rx, Rx::Aead(_))
            && self.paths[i].role == PathRole::Untrusted
            && !self.paths[TRUSTED].failed
        {
            self.paths[i].stats.acks_ignored += 1;
            return Ok(());
        }
        if repr.seg > self.tx_seg || repr.offset > self.tx_offset {
            return Err(Error::Protocol("an ack for data never sent"));
        }
        self.paths[i].stats.acks_received += 1;
        if repr.seg <= self.acked_seg {
            return Ok(());
        }
        self.acked_seg = repr.seg;
        let mut end = None;
        while let Some(r) = self.retained.front() {
            if r.seg >= repr.seg {
                break;
            }
            end = Some(r.end);
            if let Some(r) = self.retained.pop_front() {
                self.retained_bytes -= r.bytes.len();
                if self.pool.len() < 64 {
                    self.pool.push(r.bytes);
                }
            }
        }
        if self.retain && end.is_some_and(|e| e != repr.offset) {
            return Err(Error::Protocol("an ack that does not end at a segment"));
        }
        self.wake |= WAKE_WRITE;
        Ok(())
    }

    /// Handles what is buffered on every path (acks and fins up to each path's next data
    /// segment), without delivering: the writing half's way to learn of acks while nobody
    /// reads.
    ///
    /// # Errors
    /// As [`needs_input`](Self::needs_input).
    pub fn process_input(&mut self) -> io::Result<()> {
        for i in 0..self.paths.len() {
            self.needs_input(i)?;
        }
        Ok(())
    }

    // ---- delivery -----------------------------------------------------------------------------

    /// Delivers the next stream bytes into `buf`, or says why it cannot.
    ///
    /// # Errors
    /// The stream's failure: a gap, a forged or corrupted segment, paths that end the stream at
    /// different points, an out-of-order buffer over its bound.
    pub fn read(&mut self, now: Instant, buf: &mut [u8]) -> io::Result<Read> {
        self.check()?;
        if buf.is_empty() {
            return Ok(Read::Data(0));
        }
        'again: loop {
            if self.spill.is_none()
                && let Some(e) = self.reorder.first_entry()
                && *e.key() == self.rx_seg
            {
                let sp = e.remove();
                self.reorder_bytes -= sp.bytes.len();
                self.spill = Some(sp);
            }
            if self.spill.is_some() {
                let n = self.deliver_spill(buf)?;
                // Bytes were delivered: return them. An error here is kept and returned by
                // the next call.
                let _ = self.maybe_ack(false);
                return Ok(Read::Data(n));
            }
            let mut pending = false;
            let mut next = None;
            for i in 0..self.paths.len() {
                match self.advance(i)? {
                    Advance::NeedInput => pending = true,
                    Advance::Finished => {}
                    Advance::Head => {
                        if self.paths[i]
                            .head
                            .is_some_and(|h| h.repr.seg == self.rx_seg)
                        {
                            next = Some(i);
                        } else {
                            // Read ahead only under our own Continue policy (a Close stream
                            // ends on a failure and lets TCP push back instead): after a
                            // failure, or after a stall when the peer re-sends (its
                            // unacknowledged bytes, so our buffer, are bounded). A path that
                            // dies silently then never stalls the other one.
                            let ahead = self.continues()
                                && (self.paths.iter().any(|p| p.failed)
                                    || (self.send_acks && self.stalled));
                            if self.set_aside(i, ahead)? {
                                continue 'again;
                            }
                        }
                    }
                }
            }
            if let Some(i) = next {
                self.stall_at = None;
                self.stalled = false;
                let n = self.deliver_head(i, buf)?;
                let _ = self.maybe_ack(false);
                return Ok(Read::Data(n));
            }
            // No path holds the next segment. End of stream: every working path has its fin,
            // they agree with what was delivered, nothing waits out of order.
            let fins: Vec<_> = self
                .paths
                .iter()
                .filter(|p| !p.failed)
                .map(|p| p.fin)
                .collect();
            if fins.iter().all(Option::is_some) && !fins.is_empty() {
                if fins
                    .iter()
                    .all(|f| *f == Some((self.rx_offset, self.rx_seg)))
                    && self.reorder.is_empty()
                {
                    self.maybe_ack(true)?;
                    return Ok(Read::End);
                }
                if !pending {
                    return Err(self.fail(Error::Protocol(
                        "the paths end the stream at different points",
                    )));
                }
            }
            if pending {
                if self.continues()
                    && self.send_acks
                    && !self.stalled
                    && self.paths.iter().any(|p| p.head.is_some())
                {
                    let at = *self.stall_at.get_or_insert(now + STALL);
                    if now >= at {
                        self.stall_at = None;
                        self.stalled = true;
                        continue;
                    }
                }
                // No ack just for waiting: acks every ACK_EVERY bytes and at end of stream
                // are enough (a sender blocked on RETAIN_LIMIT has more than ACK_EVERY
                // delivered or in flight).
                return Ok(Read::Blocked);
            }
            // Every path has a head (or a fin) and none is next: a segment was lost or forged.
            return Err(self.fail(Error::Protocol("the next segment is on neither path")));
        }
    }

    /// Decodes a segment (`seg`: header and payload) that is next in the stream, in place.
    fn decode(&mut self, role: PathRole, seg: &mut [u8], head: &mut Head) -> Result<(), Error> {
        if head.decoded {
            return Ok(());
        }
        if head.repr.offset != self.rx_offset {
            return Err(Error::PathFailed {
                path: role,
                reason: "a segment's offset does not follow the stream".into(),
            });
        }
        let len = usize::from(head.repr.len);
        let (header, body) = seg.split_at_mut(HEADER_LEN);
        match &mut self.rx {
            Rx::None => {}
            Rx::Scramble(d) => d.descramble_in_place(&mut body[..len]),
            Rx::Aead(key) => {
                let Some(plain) = len.checked_sub(TAG_LEN) else {
                    return Err(Error::Auth { path: role });
                };
                let aad: [u8; AAD_LEN] = wire::aad(Kind::Data, header);
                let (section, icv) = body[..len].split_at_mut(plain);
                if key
                    .open_in_place(head.repr.seg, &aad, section, icv)
                    .is_err()
                {
                    return Err(Error::Auth { path: role });
                }
                head.plain_len = plain;
            }
        }
        head.decoded = true;
        Ok(())
    }

    /// Delivers from path `i`'s head (the next segment) into `buf`.
    fn deliver_head(&mut self, i: usize, buf: &mut [u8]) -> io::Result<usize> {
        let Some(mut head) = self.paths[i].head else {
            return Ok(0);
        };
        let role = self.paths[i].role;
        let start = self.paths[i].in_start;
        let end = start + HEADER_LEN + usize::from(head.repr.len);
        let mut inb = core::mem::take(&mut self.paths[i].inb);
        let r = self.decode(role, &mut inb[start..end], &mut head);
        self.paths[i].inb = inb;
        if let Err(e) = r {
            return Err(self.fail(e));
        }
        let p = &mut self.paths[i];
        let body = start + HEADER_LEN + head.pos;
        let n = (head.plain_len - head.pos).min(buf.len());
        buf[..n].copy_from_slice(&p.inb[body..body + n]);
        head.pos += n;
        p.stats.bytes_received += n as u64;
        self.rx_offset += n as u64;
        if head.pos == head.plain_len {
            p.in_start = end;
            p.head = None;
            p.stats.segments_received += 1;
            self.segment_done();
        } else {
            p.head = Some(head);
        }
        Ok(n)
    }

    /// Delivers from the segment taken out of order.
    fn deliver_spill(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let Some(mut sp) = self.spill.take() else {
            return Ok(0);
        };
        let role = self.paths[sp.path].role;
        if let Err(e) = self.decode(role, &mut sp.bytes, &mut sp.head) {
            return Err(self.fail(e));
        }
        let body = HEADER_LEN + sp.head.pos;
        let n = (sp.head.plain_len - sp.head.pos).min(buf.len());
        buf[..n].copy_from_slice(&sp.bytes[body..body + n]);
        sp.head.pos += n;
        let st = &mut self.paths[sp.path].stats;
        st.bytes_received += n as u64;
        self.rx_offset += n as u64;
        if sp.head.pos == sp.head.plain_len {
            st.segments_received += 1;
            self.segment_done();
        } else {
            self.spill = Some(sp);
        }
        Ok(n)
    }

    fn segment_done(&mut self) {
        self.rx_seg = self.rx_seg.wrapping_add(1);
        self.delivered = (self.rx_offset, self.rx_seg);
    }

    /// Path `i`'s head is not next: drops it if already delivered, or (`ahead`) moves it to
    /// the out-of-order buffer. `Ok(false)` if it must stay where it is.
    fn set_aside(&mut self, i: usize, ahead: bool) -> io::Result<bool> {
        let Some(head) = self.paths[i].head else {
            return Ok(false);
        };
        let p = &mut self.paths[i];
        let end = p.in_start + HEADER_LEN + usize::from(head.repr.len);
        if head.repr.seg < self.rx_seg {
            p.stats.duplicates_dropped += 1;
        } else if ahead {
            if self.reorder.contains_key(&head.repr.seg) {
                p.stats.duplicates_dropped += 1;
            } else {
                let len = end - p.in_start;
                let charged = self.reorder_bytes + len + (self.reorder.len() + 1) * ENTRY_OVERHEAD;
                if charged > REORDER_LIMIT {
                    return Err(self.fail(Error::Protocol(
                        "out-of-order buffer full: the peer has more unacknowledged than allowed",
                    )));
                }
                let bytes = p.inb[p.in_start..end].to_vec();
                self.reorder_bytes += bytes.len();
                self.reorder.insert(
                    head.repr.seg,
                    Spilled {
                        head,
                        path: i,
                        bytes,
                    },
                );
            }
        } else {
            return Ok(false);
        }
        let p = &mut self.paths[i];
        p.in_start = end;
        p.head = None;
        Ok(true)
    }
}

#[cfg(test)]
mod tests;
