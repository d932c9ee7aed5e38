//! [`MultipathStream`]: the data phase of dispersal mode, a poll-driven `AsyncRead + AsyncWrite`
//! over the two TCP connections.
//!
//! Send: the caller's bytes are protected in stream order (scrambled as one stream, or each
//! segment sealed), cut into segments of at most `segment_len` bytes, and each segment is
//! appended to one path's output buffer as the [`SharePolicy`] says (the first always on the
//! trusted path). Receive: each path delivers its segments in order (TCP), so the stream is a
//! merge of two ordered queues: the receiver keeps at most one parsed segment per path and
//! delivers the one whose number is next. A path whose head segment is not next is not read
//! further (TCP's window pushes back), which bounds the reassembly memory to one receive buffer
//! per path (`2 * (HEADER_LEN + MAX_PAYLOAD)`) whatever the sender does. Data segments carry at
//! least one byte (an empty one is a wire error).
//!
//! Path failure ([`OnPathFailure`]): the receiver acknowledges what it delivered (cumulative
//! acks, every [`ACK_EVERY`] bytes and at end of stream), on the trusted path while it works.
//! Under `Continue` the sender keeps every unacknowledged segment as sent (at most
//! [`RETAIN_LIMIT`] bytes, [`ENTRY_OVERHEAD`] charged per segment; writes wait when full), and
//! when a path fails re-sends the failed path's kept segments, unchanged but for the path
//! sequence, on the other path. A receiver under its own `Continue` policy that lost a path, or
//! whose peer re-sends and that waited [`STALL`] for the next segment, reads a path whose head
//! is not next ahead into an out-of-order buffer (at most [`REORDER_LIMIT`], charged the same
//! way: an honest sender never has more unacknowledged), so a path dying silently never stalls
//! the other one, and drops segments it already delivered. A `Close` receiver never reads ahead,
//! whatever the peer's hello says.
//!
//! Wakers: with the stream split in a reading and a writing task, both poll the same sockets
//! and the socket keeps one waker per direction. So each side stores its own waker and wakes
//! the other side's whenever it made progress on a socket that side may be waiting for (acks
//! read by the writer, data read by the writer, bytes flushed by the reader).

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll, Waker, ready};
use std::collections::{BTreeMap, VecDeque};
use std::io;
use std::time::Instant;

use psp_core::SuiteKey;
use psp_core::scramble::{Descrambler, Scrambler};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use crate::setup::{Conn, Established, TxKeys};
use crate::wire::{self, Cipher, HEADER_LEN, Kind, MAX_PAYLOAD, PathRole, Repr, Segment};
use crate::{
    Error, OnPathFailure, Options, PathFailure, PathStats, SharePolicy, TRUSTED, UNTRUSTED,
};

/// The AEAD tag length (AES-128-GCM).
const TAG_LEN: usize = wire::CONTROL_TAG_LEN;
/// AEAD associated data prefix of data segments: 12 constant bytes. Bytes 6..12 enter
/// psp-core's nonce derivation with the counter, so each kind has its own: data segments count
/// by segment number, acks by segments delivered, fins by the segment count, and the three
/// prefixes keep these nonce spaces apart under one key.
const AAD_PREFIX: [u8; 12] = *b"psp-mp\0aead\0";
/// AAD prefix of acks (see [`AAD_PREFIX`]).
const ACK_PREFIX: [u8; 12] = *b"psp-mp\0ack\0\0";
/// AAD prefix of fins (see [`AAD_PREFIX`]).
const FIN_PREFIX: [u8; 12] = *b"psp-mp\0fin\0\0";
/// A path takes a new segment while less than this is queued in userspace for it.
const OUT_LIMIT: usize = 64 * 1024;
/// The receive buffer per path: two whole segments (one being delivered, one arriving).
const IN_LEN: usize = 2 * (HEADER_LEN + MAX_PAYLOAD);
/// The most bytes of segments (as sent) a `Continue` sender keeps unacknowledged: above what
/// loopback's socket buffers hold in flight (4 MiB cost a third of the throughput there).
pub(crate) const RETAIN_LIMIT: usize = 16 * 1024 * 1024;
/// The receiver acks after this many delivered bytes (and at end of stream).
pub(crate) const ACK_EVERY: u64 = 1024 * 1024;
/// How long a receiver waits for the path holding the next segment, while the other path's
/// head is parked, before it reads that other path ahead (when the peer re-sends): short
/// against `path_timeout`, long against a normal delay between the paths, so that reading ahead
/// (a copy per segment) happens only when a path stalls.
const STALL: core::time::Duration = core::time::Duration::from_millis(100);
/// What one kept segment costs beyond its bytes (its allocation, its queue or map entry and
/// bookkeeping), charged against [`RETAIN_LIMIT`] by the sender and [`REORDER_LIMIT`] by the
/// receiver, so that many tiny segments cannot hold more memory than few large ones.
pub(crate) const ENTRY_OVERHEAD: usize = 256;
/// The most a receiver keeps out of order (segment bytes plus [`ENTRY_OVERHEAD`] each), only
/// under its own `Continue` policy: an honest sender never has more than [`RETAIN_LIMIT`]
/// unacknowledged (charged the same way), plus the two segments in the receive buffers. So at
/// most `REORDER_LIMIT / (HEADER_LEN + 1 + ENTRY_OVERHEAD)` (about 60,000) entries.
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

/// Which half of the stream is being polled (for cross-waking, see the module docs).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Read,
    Write,
}

/// One path's connection and buffers.
struct PathState {
    role: PathRole,
    stream: TcpStream,
    out: Vec<u8>,
    out_pos: usize,
    /// Receive buffer of [`IN_LEN`] bytes; `inb[in_start..in_end]` is unread.
    inb: Box<[u8]>,
    in_start: usize,
    in_end: usize,
    tx_seq: u32,
    rx_seq: u32,
    /// The parsed head segment (at `inb[in_start..]`), decoded once it is the next one.
    head: Option<Head>,
    fin: Option<(u64, u32)>,
    /// The path failed and the stream goes on without it: no more reads or writes; complete
    /// segments still in `inb` are used.
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

/// A segment taken out of order from a path (after a path failed), waiting for its turn.
struct Spilled {
    head: Head,
    path: usize,
    bytes: Vec<u8>,
}

/// A byte stream dispersed over a trusted and an untrusted path (see the crate docs).
///
/// Writes are buffered per path: call `flush` (or `shutdown`) before waiting for an answer,
/// as with a `BufWriter`. After an error, every call returns an error of the same kind.
/// Under [`OnPathFailure::Continue`], `shutdown` returns once the peer acknowledged every
/// segment (so nothing is left to re-send).
pub struct MultipathStream {
    /// `[untrusted, trusted]` (dispersal) or `[trusted]` (kernel MPTCP: one socket).
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
    /// Segments kept for re-sending (`Continue` in dispersal mode only), oldest first.
    retain: bool,
    retained: VecDeque<Retained>,
    retained_bytes: usize,
    /// Buffers of acknowledged segments, reused.
    pool: Vec<Vec<u8>>,
    /// The highest cumulative ack received (segments).
    acked_seg: u32,
    /// Out-of-order segments by number (only after a path failed).
    reorder: BTreeMap<u32, Spilled>,
    reorder_bytes: usize,
    /// The segment being delivered from `reorder`.
    spill: Option<Spilled>,
    /// The stall timer (one allocation, reset when armed), armed while the reader waits for
    /// the next segment with another head parked.
    stall: Option<Pin<Box<tokio::time::Sleep>>>,
    stall_armed: bool,
    /// The wait passed [`STALL`]: read ahead until the next in-order delivery from a path.
    stalled: bool,
    read_waker: Option<Waker>,
    write_waker: Option<Waker>,
    /// The reader is at end of stream and waits for its last ack to be flushed.
    reader_waits_flush: bool,
    started: Instant,
    failed: Option<(io::ErrorKind, String)>,
    /// Kernel MPTCP mode: the subflows as last seen at the end of the stream (the kernel
    /// forgets them once the connection closes).
    subflow_snapshot: Option<Vec<crate::Subflow>>,
    setup_time: core::time::Duration,
    handshake_time: core::time::Duration,
    connect_time: core::time::Duration,
    peer_static: Option<[u8; 32]>,
}

/// The AEAD associated data of a segment: `prefix` and the header with the path sequence
/// zeroed, so a segment re-sent on another path (new path sequence) opens unchanged. The path
/// sequence needs no protection: the segment number (the nonce) and offset do the ordering.
fn aad(prefix: &[u8; 12], header: &[u8]) -> [u8; 12 + HEADER_LEN] {
    let mut a = [0u8; 12 + HEADER_LEN];
    a[..12].copy_from_slice(prefix);
    a[12..].copy_from_slice(&header[..HEADER_LEN]);
    a[12 + 4..12 + 8].fill(0);
    a
}

/// Applies the path-failure socket options (`Continue` only): `TCP_USER_TIMEOUT` (sent data
/// unacknowledged this long fails the connection; Linux counts a zero window that long too, so
/// a peer application that stops reading for longer than `t` fails the paths) and keepalive
/// probes (an idle path that stops answering fails in about `t`). Best effort: a kernel
/// without them still sees resets and closes.
fn set_path_timeouts(stream: &TcpStream, t: core::time::Duration) {
    let s = socket2::SockRef::from(stream);
    let sec = core::time::Duration::from_secs(1);
    let ka = socket2::TcpKeepalive::new()
        .with_time((t / 2).max(sec))
        .with_interval((t / 6).max(sec))
        .with_retries(3);
    let _ = s.set_tcp_user_timeout(Some(t.max(sec)));
    let _ = s.set_tcp_keepalive(&ka);
}

impl MultipathStream {
    pub(crate) fn new(
        conns: Vec<Conn>,
        roles: &[PathRole],
        est: Established,
        options: &Options,
    ) -> Self {
        // The same cap for every cipher, so a segment never exceeds MAX_PAYLOAD with a tag.
        let max_plain = MAX_PAYLOAD - TAG_LEN;
        let dispersal = roles.len() == 2;
        let mk = |c: Conn, role| {
            // Set-up reads at most one handshake frame or tag past what it needs, and the peer
            // sends no data before the binding tag, so leftovers are at most a few segments;
            // anything beyond IN_LEN would be a protocol violation caught at parse time.
            let (local, peer) = (c.stream.local_addr().ok(), c.stream.peer_addr().ok());
            if dispersal && matches!(options.on_path_failure, OnPathFailure::Continue { .. }) {
                set_path_timeouts(&c.stream, options.path_timeout);
            }
            let mut inb = vec![0u8; IN_LEN.max(c.buf.len())].into_boxed_slice();
            inb[..c.buf.len()].copy_from_slice(&c.buf);
            PathState {
                role,
                stream: c.stream,
                out: Vec::with_capacity(OUT_LIMIT + HEADER_LEN + MAX_PAYLOAD),
                out_pos: 0,
                in_end: c.buf.len(),
                inb,
                in_start: 0,
                tx_seq: 0,
                rx_seq: 0,
                head: None,
                fin: None,
                failed: false,
                stats: PathStats {
                    local,
                    peer,
                    ..PathStats::new(role)
                },
            }
        };
        let tx = match est.tx {
            TxKeys::None => Tx::None,
            TxKeys::Scramble(seed) => Tx::Scramble(Box::new(Scrambler::new(&seed))),
            TxKeys::Aead(k) => Tx::Aead(k),
        };
        let rx = match est.rx {
            TxKeys::None => Rx::None,
            TxKeys::Scramble(seed) => Rx::Scramble(Box::new(Descrambler::new(&seed))),
            TxKeys::Aead(k) => Rx::Aead(k),
        };
        Self {
            sent_payload: vec![0; conns.len()],
            paths: conns
                .into_iter()
                .zip(roles.iter().copied())
                .map(|(c, r)| mk(c, r))
                .collect(),
            cipher: est.cipher,
            tx,
            rx,
            share: options.share,
            policy: options.on_path_failure,
            segment_len: options.segment_len.clamp(1, max_plain),
            tx_offset: 0,
            tx_seg: 0,
            fin_queued: false,
            rx_offset: 0,
            rx_seg: 0,
            delivered: (0, 0),
            ack_sent: (0, 0),
            send_acks: dispersal && est.peer_wants_acks,
            retain: dispersal && matches!(options.on_path_failure, OnPathFailure::Continue { .. }),
            retained: VecDeque::new(),
            retained_bytes: 0,
            pool: Vec::new(),
            acked_seg: 0,
            reorder: BTreeMap::new(),
            reorder_bytes: 0,
            spill: None,
            stall: None,
            stall_armed: false,
            stalled: false,
            read_waker: None,
            write_waker: None,
            reader_waits_flush: false,
            started: Instant::now(),
            failed: None,
            subflow_snapshot: None,
            setup_time: est.setup_time,
            handshake_time: est.handshake_time,
            connect_time: core::time::Duration::ZERO,
            peer_static: est.peer_static,
        }
    }

    /// The negotiated stream protection.
    pub fn cipher(&self) -> Cipher {
        self.cipher
    }

    /// How long set-up took on this side (hellos, SMKEX, binding tags).
    pub fn setup_time(&self) -> core::time::Duration {
        self.setup_time
    }

    /// The peer's long-term public key, if it used one (pin it in
    /// [`Options::pinned_peer`](crate::Options::pinned_peer) for later connections: TOFU).
    pub fn peer_static(&self) -> Option<[u8; 32]> {
        self.peer_static
    }

    /// Where set-up time went on this side (for the set-up benchmark's profile).
    pub fn setup_profile(&self) -> crate::SetupProfile {
        crate::SetupProfile {
            connect: self.connect_time,
            handshake: self.handshake_time,
            binding: self.setup_time.saturating_sub(self.handshake_time),
        }
    }

    pub(crate) fn set_connect_time(&mut self, d: core::time::Duration) {
        self.connect_time = d;
    }

    /// Per-path counters, `[untrusted, trusted]` (indexes [`UNTRUSTED`](crate::UNTRUSTED) and
    /// [`TRUSTED`](crate::TRUSTED)); in kernel MPTCP mode one entry for the MPTCP socket (see
    /// [`subflows`](Self::subflows)). With the kernel's RTT and retransmission counts
    /// (`TCP_INFO`) read now.
    pub fn stats(&self) -> Vec<PathStats> {
        let mut s: Vec<PathStats> = self.paths.iter().map(|p| p.stats.clone()).collect();
        for (st, p) in s.iter_mut().zip(&self.paths) {
            if let Some(info) = crate::sys::tcp_info(&p.stream) {
                st.rtt_us = Some(info.rtt_us);
                st.retransmits = Some(info.total_retrans);
            }
        }
        s
    }

    /// Kernel MPTCP mode: what the kernel did per subflow (addresses, bytes acknowledged and
    /// received, RTT, retransmissions), read now; `None` in dispersal mode or if the kernel
    /// does not say.
    /// Once the connection has ended, the snapshot taken at end of stream (reading or
    /// shutdown) is returned.
    pub fn subflows(&self) -> Option<Vec<crate::Subflow>> {
        let live = self.live_subflows();
        let busy = |v: &Vec<crate::Subflow>| v.iter().any(|s| s.bytes_acked + s.bytes_received > 0);
        match (live, &self.subflow_snapshot) {
            (Some(l), _) if busy(&l) => Some(l),
            (_, Some(snap)) => Some(snap.clone()),
            (l, None) => l,
        }
    }

    fn snapshot_subflows(&mut self) {
        if let Some(l) = self.live_subflows()
            && l.iter().any(|s| s.bytes_acked + s.bytes_received > 0)
        {
            self.subflow_snapshot = Some(l);
        }
    }

    fn live_subflows(&self) -> Option<Vec<crate::Subflow>> {
        if self.paths.len() != 1 {
            return None;
        }
        let sfs = crate::sys::mptcp_subflows(&self.paths[0].stream)?;
        Some(
            sfs.into_iter()
                .map(|s| crate::Subflow {
                    local: s.local,
                    remote: s.remote,
                    bytes_acked: s.bytes_acked,
                    bytes_received: s.bytes_received,
                    rtt_us: s.rtt_us,
                    retransmits: s.total_retrans,
                })
                .collect(),
        )
    }

    /// The fraction of payload bytes sent so far on the untrusted path (kernel MPTCP mode: 0,
    /// as this layer does not know; see [`subflows`](Self::subflows)).
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

    fn fail(&mut self, e: Error) -> io::Error {
        let kind = e.io_kind();
        let msg = e.to_string();
        if self.failed.is_none() {
            self.failed = Some((kind, msg.clone()));
        }
        self.wake(Side::Read);
        self.wake(Side::Write);
        io::Error::new(kind, msg)
    }

    fn check_failed(&self) -> io::Result<()> {
        match &self.failed {
            Some((k, m)) => Err(io::Error::new(*k, m.clone())),
            None => Ok(()),
        }
    }

    /// Wakes the task waiting on the `other` half, if any.
    fn wake(&mut self, other: Side) {
        let w = match other {
            Side::Read => self.read_waker.take(),
            Side::Write => self.write_waker.take(),
        };
        if let Some(w) = w {
            w.wake();
        }
    }

    /// Remembers the waker of the half about to return `Pending`.
    fn park(&mut self, cx: &Context<'_>, side: Side) {
        let slot = match side {
            Side::Read => &mut self.read_waker,
            Side::Write => &mut self.write_waker,
        };
        match slot {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => *slot = Some(cx.waker().clone()),
        }
    }

    /// Path `i` failed with `e`. Under `Close` (or if the other path is gone too, or if going
    /// on would leave a scrambled/plain stream on the untrusted path alone without permission)
    /// the stream fails; under `Continue` the path is dropped and its unacknowledged segments
    /// are queued again on the other path.
    fn path_failed(&mut self, i: usize, e: Error) -> io::Result<()> {
        if self.paths[i].failed {
            return Ok(());
        }
        let reason = e.to_string();
        let after = self.started.elapsed();
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
        // Tell the peer at once (a reset or fin on a working link; nothing on a dead one).
        let _ = socket2::SockRef::from(&p.stream).shutdown(std::net::Shutdown::Both);
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
        self.wake(Side::Read);
        self.wake(Side::Write);
        Ok(())
    }

    /// Writes queued bytes of every working path until each is empty or its socket is full.
    fn flush_paths(&mut self, cx: &mut Context<'_>, side: Side) -> io::Result<()> {
        let mut progress = false;
        loop {
            let mut again = false;
            for i in 0..self.paths.len() {
                if self.paths[i].failed {
                    continue;
                }
                loop {
                    let p = &mut self.paths[i];
                    if p.out_pos == p.out.len() {
                        p.out.clear();
                        p.out_pos = 0;
                        break;
                    }
                    match Pin::new(&mut p.stream).poll_write(cx, &p.out[p.out_pos..]) {
                        Poll::Ready(Ok(0)) => {
                            let path = p.role;
                            self.path_failed(
                                i,
                                Error::PathFailed {
                                    path,
                                    reason: "the connection accepts no more bytes".into(),
                                },
                            )?;
                            again = true;
                            break;
                        }
                        Poll::Ready(Ok(n)) => {
                            p.out_pos += n;
                            p.stats.wire_bytes_sent += n as u64;
                            progress = true;
                        }
                        Poll::Ready(Err(e)) => {
                            let role = p.role;
                            self.path_failed(i, Error::io(Some(role), e))?;
                            again = true;
                            break;
                        }
                        Poll::Pending => {
                            if p.out_pos > OUT_LIMIT {
                                p.out.drain(..p.out_pos);
                                p.out_pos = 0;
                            }
                            break;
                        }
                    }
                }
            }
            // A failure queued segments on the other path: write them (or register) too.
            if !again {
                break;
            }
        }
        if progress {
            match side {
                Side::Read => self.wake(Side::Write),
                Side::Write if self.reader_waits_flush => self.wake(Side::Read),
                Side::Write => {}
            }
        }
        Ok(())
    }

    fn out_pending(&self) -> bool {
        self.paths
            .iter()
            .any(|p| !p.failed && p.out_pos < p.out.len())
    }

    fn available(&self, i: usize) -> bool {
        !self.paths[i].failed && self.paths[i].out.len() - self.paths[i].out_pos < OUT_LIMIT
    }

    /// Whether keeping one more segment of `n` bytes would pass [`RETAIN_LIMIT`] (segment
    /// bytes plus [`ENTRY_OVERHEAD`] per segment).
    fn retain_full(&self, n: usize) -> bool {
        let charged = self.retained_bytes + self.retained.len() * ENTRY_OVERHEAD;
        self.retain
            && !self.retained.is_empty()
            && charged + HEADER_LEN + n + TAG_LEN + ENTRY_OVERHEAD > RETAIN_LIMIT
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
        if self.retain_full(n) {
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
                    (true, true) => Some(if ok { UNTRUSTED } else { TRUSTED }),
                    (true, false) => Some(UNTRUSTED),
                    (false, true) => Some(TRUSTED),
                    (false, false) => None,
                }
            }
        }
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
                let aad = aad(&AAD_PREFIX, &p.out[start..body]);
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

    /// Appends a control segment (fin or ack) to path `i`: sealed under `aes128-gcm` (counter
    /// `seg`, the kind's own AAD prefix), bare otherwise.
    fn push_control(&mut self, i: usize, kind: Kind, offset: u64, seg: u32) -> io::Result<()> {
        let (tag, prefix) = match (&self.tx, kind) {
            (Tx::Aead(_), Kind::Ack) => (TAG_LEN, &ACK_PREFIX),
            (Tx::Aead(_), _) => (TAG_LEN, &FIN_PREFIX),
            _ => (0, &FIN_PREFIX),
        };
        let p = &mut self.paths[i];
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
            let aad = aad(prefix, &p.out[start..start + HEADER_LEN]);
            let icv = &mut p.out[start + HEADER_LEN..];
            if key.seal_in_place(seg, &aad, &mut [], icv).is_err() {
                return Err(self.fail(Error::Protocol("AEAD seal failed")));
            }
        }
        p.tx_seq = p.tx_seq.wrapping_add(1);
        Ok(())
    }

    fn push_fin(&mut self) -> io::Result<()> {
        for i in 0..self.paths.len() {
            if !self.paths[i].failed {
                self.push_control(i, Kind::Fin, self.tx_offset, self.tx_seg)?;
            }
        }
        self.fin_queued = true;
        Ok(())
    }

    /// Queues an ack of what was delivered if there is something new and `force` or
    /// [`ACK_EVERY`] bytes have passed, on the trusted path while it works, and flushes.
    fn maybe_ack(&mut self, cx: &mut Context<'_>, force: bool) -> io::Result<()> {
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
        self.flush_paths(cx, Side::Read)
    }

    /// Verifies a fin or an ack's tag (sealed streams) or its emptiness (others).
    fn open_control(&self, i: usize, repr: &Repr, payload: &[u8]) -> Result<(), Error> {
        let path = self.paths[i].role;
        match &self.rx {
            Rx::Aead(key) => {
                let prefix = if repr.kind == Kind::Ack {
                    &ACK_PREFIX
                } else {
                    &FIN_PREFIX
                };
                let mut header = [0u8; HEADER_LEN];
                repr.emit(&mut header);
                if payload.len() != TAG_LEN
                    || key
                        .open_in_place(repr.seg, &aad(prefix, &header), &mut [], payload)
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
        self.wake(Side::Write);
        Ok(())
    }

    /// Makes sure path `i` has a parsed head data segment, reading if needed; fins and acks on
    /// the way are handled. `Ready(Ok(true))`: a head is there; `Ready(Ok(false))`: the path is
    /// finished (its fin, or failed and drained).
    fn poll_head(&mut self, cx: &mut Context<'_>, i: usize, side: Side) -> Poll<io::Result<bool>> {
        loop {
            let any_failed = self.paths.iter().any(|p| p.failed);
            let complete = (self.rx_offset, self.rx_seg);
            let awaiting_acks = self.retain && !self.retained.is_empty();
            let sealed = matches!(self.rx, Rx::Aead(_));
            let p = &mut self.paths[i];
            if p.head.is_some() {
                return Poll::Ready(Ok(true));
            }
            // After a fin, read on only for acks we wait for, or if a path failed before the
            // stream was complete (segments re-sent from the failed path follow the fin).
            if p.fin
                .is_some_and(|f| !awaiting_acks && (!any_failed || f == complete))
            {
                return Poll::Ready(Ok(false));
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
            match parsed {
                Err(error) => {
                    let e = Error::Wire {
                        path: Some(role),
                        error,
                    };
                    return Poll::Ready(Err(self.fail(e)));
                }
                Ok(Some((repr, len))) => {
                    if repr.path_seq != p.rx_seq {
                        return Poll::Ready(Err(self.fail(Error::PathFailed {
                            path: role,
                            reason: "a segment is missing or repeated (path sequence)".into(),
                        })));
                    }
                    p.rx_seq = p.rx_seq.wrapping_add(1);
                    p.stats.wire_bytes_received += len as u64;
                    if repr.kind == Kind::Data {
                        if sealed && usize::from(repr.len) <= TAG_LEN {
                            return Poll::Ready(Err(self.fail(Error::Wire {
                                path: Some(role),
                                error: wire::Error::EmptyData,
                            })));
                        }
                        p.head = Some(Head {
                            repr,
                            pos: 0,
                            plain_len: usize::from(repr.len),
                            decoded: false,
                        });
                        if side == Side::Write {
                            self.wake(Side::Read);
                        }
                        return Poll::Ready(Ok(true));
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
                            _ => {
                                let f = (repr.offset, repr.seg);
                                let p = &mut self.paths[i];
                                if p.fin.is_some_and(|old| old != f) {
                                    return Err(Error::Protocol("two different fins on a path"));
                                }
                                p.fin = Some(f);
                                if side == Side::Write {
                                    self.wake(Side::Read);
                                }
                                Ok(())
                            }
                        });
                    if let Err(e) = checked {
                        return Poll::Ready(Err(self.fail(e)));
                    }
                    continue;
                }
                Ok(None) => {}
            }
            if p.failed {
                return Poll::Ready(Ok(false));
            }
            // Need more bytes: compact, then read at most one segment's worth ahead.
            if p.in_start > 0 {
                p.inb.copy_within(p.in_start..p.in_end, 0);
                p.in_end -= p.in_start;
                p.in_start = 0;
            }
            let mut rb = ReadBuf::new(&mut p.inb[p.in_end..]);
            let r = Pin::new(&mut p.stream).poll_read(cx, &mut rb);
            let n = rb.filled().len();
            p.in_end += n;
            match r {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(e)) => {
                    if let Err(e) = self.path_failed(i, Error::io(Some(role), e)) {
                        return Poll::Ready(Err(e));
                    }
                }
                Poll::Ready(Ok(())) if n == 0 => {
                    let e = Error::PathFailed {
                        path: role,
                        reason: "the connection closed before the end of the stream".into(),
                    };
                    if let Err(e) = self.path_failed(i, e) {
                        return Poll::Ready(Err(e));
                    }
                }
                Poll::Ready(Ok(())) => {}
            }
        }
    }

    /// Reads whatever fins and acks wait in front of each working path (the writer's way to
    /// learn of acks and failures while nobody reads).
    fn poll_control(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        for i in 0..self.paths.len() {
            if let Poll::Ready(Err(e)) = self.poll_head(cx, i, Side::Write) {
                return Err(e);
            }
        }
        Ok(())
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
                let aad = aad(&AAD_PREFIX, header);
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
    fn deliver_head(&mut self, i: usize, buf: &mut ReadBuf<'_>) -> io::Result<()> {
        let Some(mut head) = self.paths[i].head else {
            return Ok(());
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
        let n = (head.plain_len - head.pos).min(buf.remaining());
        buf.put_slice(&p.inb[body..body + n]);
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
        Ok(())
    }

    /// Delivers from the segment taken out of order, if any.
    fn deliver_spill(&mut self, buf: &mut ReadBuf<'_>) -> io::Result<()> {
        let Some(mut sp) = self.spill.take() else {
            return Ok(());
        };
        let role = self.paths[sp.path].role;
        if let Err(e) = self.decode(role, &mut sp.bytes, &mut sp.head) {
            return Err(self.fail(e));
        }
        let body = HEADER_LEN + sp.head.pos;
        let n = (sp.head.plain_len - sp.head.pos).min(buf.remaining());
        buf.put_slice(&sp.bytes[body..body + n]);
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
        Ok(())
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
            let bytes = p.inb[p.in_start..end].to_vec();
            if self.reorder.contains_key(&head.repr.seg) {
                p.stats.duplicates_dropped += 1;
            } else {
                self.reorder_bytes += bytes.len();
                let charged = self.reorder_bytes + (self.reorder.len() + 1) * ENTRY_OVERHEAD;
                if charged > REORDER_LIMIT {
                    return Err(self.fail(Error::Protocol(
                        "out-of-order buffer full: the peer has more unacknowledged than allowed",
                    )));
                }
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

impl AsyncRead for MultipathStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.check_failed()?;
        if buf.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        'again: loop {
            if this.spill.is_none()
                && let Some(e) = this.reorder.first_entry()
                && *e.key() == this.rx_seg
            {
                let sp = e.remove();
                this.reorder_bytes -= sp.bytes.len();
                this.spill = Some(sp);
            }
            if this.spill.is_some() {
                this.deliver_spill(buf)?;
                // Bytes were delivered: return them. An error here is kept (`failed`) and
                // returned by the next call.
                let _ = this.maybe_ack(cx, false);
                return Poll::Ready(Ok(()));
            }
            let mut pending = false;
            let mut next = None;
            let failed_before = this.paths.iter().filter(|p| p.failed).count();
            for i in 0..this.paths.len() {
                match this.poll_head(cx, i, Side::Read) {
                    Poll::Pending => pending = true,
                    Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                    Poll::Ready(Ok(false)) => {}
                    Poll::Ready(Ok(true)) => {
                        if this.paths[i]
                            .head
                            .is_some_and(|h| h.repr.seg == this.rx_seg)
                        {
                            next = Some(i);
                        } else {
                            // Read ahead only under our own Continue policy (a Close stream
                            // ends on a failure, and lets TCP push back instead): after a
                            // failure, or after a stall when the peer re-sends (its
                            // unacknowledged bytes, so our buffer, are bounded). A path that
                            // dies silently then never stalls the other one.
                            let ahead = this.continues()
                                && (this.paths.iter().any(|p| p.failed)
                                    || (this.send_acks && this.stalled));
                            if this.set_aside(i, ahead)? {
                                continue 'again;
                            }
                        }
                    }
                }
            }
            if let Some(i) = next {
                this.stall_armed = false;
                this.stalled = false;
                this.deliver_head(i, buf)?;
                // Bytes were delivered: return them. An error here is kept (`failed`) and
                // returned by the next call.
                let _ = this.maybe_ack(cx, false);
                return Poll::Ready(Ok(()));
            }
            // A path failed while polling: heads seen before may now be set aside.
            if this.paths.iter().filter(|p| p.failed).count() != failed_before {
                continue;
            }
            // No path holds the next segment. End of stream: every working path has its fin,
            // they agree with what was delivered, nothing waits out of order.
            let fins: Vec<_> = this
                .paths
                .iter()
                .filter(|p| !p.failed)
                .map(|p| p.fin)
                .collect();
            if fins.iter().all(Option::is_some) && !fins.is_empty() {
                if fins
                    .iter()
                    .all(|f| *f == Some((this.rx_offset, this.rx_seg)))
                    && this.reorder.is_empty()
                {
                    this.snapshot_subflows();
                    this.maybe_ack(cx, true)?;
                    if this.send_acks && this.out_pending() {
                        // The last ack must leave: the sender waits for it.
                        this.reader_waits_flush = true;
                        this.park(cx, Side::Read);
                        return Poll::Pending;
                    }
                    this.reader_waits_flush = false;
                    return Poll::Ready(Ok(())); // end of stream
                }
                if !pending {
                    return Poll::Ready(Err(this.fail(Error::Protocol(
                        "the paths end the stream at different points",
                    ))));
                }
            }
            if pending {
                if this.continues()
                    && this.send_acks
                    && !this.stalled
                    && this.paths.iter().any(|p| p.head.is_some())
                {
                    let deadline = tokio::time::Instant::now() + STALL;
                    let t = this
                        .stall
                        .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
                    if !this.stall_armed {
                        t.as_mut().reset(deadline);
                        this.stall_armed = true;
                    }
                    if t.as_mut().poll(cx).is_ready() {
                        this.stall_armed = false;
                        this.stalled = true;
                        continue;
                    }
                }
                // No ack just for waiting: acks every ACK_EVERY bytes and at end of stream
                // are enough (a sender blocked on RETAIN_LIMIT has more than ACK_EVERY
                // delivered or in flight), and an ack per wake-up costs the sender a wake-up.
                this.park(cx, Side::Read);
                return Poll::Pending;
            }
            // Both paths have a head (or a fin) and none is next: a segment was lost or forged.
            return Poll::Ready(Err(
                this.fail(Error::Protocol("the next segment is on neither path"))
            ));
        }
    }
}

impl AsyncWrite for MultipathStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.check_failed()?;
        if this.fin_queued {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "write after shutdown",
            )));
        }
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        this.flush_paths(cx, Side::Write)?;
        let n = buf.len().min(this.segment_len);
        if this.retain_full(n) {
            // Learn of acks (and failures) even if nobody reads.
            this.poll_control(cx)?;
            this.flush_paths(cx, Side::Write)?;
        }
        let Some(i) = this.choose(n) else {
            // Every path we may use has OUT_LIMIT bytes queued and its socket returned
            // Pending in flush_paths, or the kept segments are at RETAIN_LIMIT and
            // poll_control registered for the acks (or the reader will wake us).
            this.park(cx, Side::Write);
            return Poll::Pending;
        };
        this.push_segment(i, &buf[..n])?;
        // Push the new segment towards the kernel now; Pending here is fine (queued).
        this.flush_paths(cx, Side::Write)?;
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.check_failed()?;
        this.flush_paths(cx, Side::Write)?;
        if this.out_pending() {
            this.park(cx, Side::Write);
            return Poll::Pending;
        }
        for p in this.paths.iter_mut().filter(|p| !p.failed) {
            ready!(Pin::new(&mut p.stream).poll_flush(cx))?;
        }
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.check_failed()?;
        if !this.fin_queued {
            this.snapshot_subflows();
            this.push_fin()?;
        }
        this.flush_paths(cx, Side::Write)?;
        if this.retain && !this.retained.is_empty() {
            // Keep the paths open until the peer has everything: a path may still fail.
            this.poll_control(cx)?;
            this.flush_paths(cx, Side::Write)?;
        }
        if this.out_pending() || (this.retain && !this.retained.is_empty()) {
            this.park(cx, Side::Write);
            return Poll::Pending;
        }
        if this.paths.len() == 2 {
            // No TCP half-close in dispersal mode: our reader still sends acks after our fin,
            // and the fin segments already end the stream. The sockets close on drop.
            for p in this.paths.iter_mut().filter(|p| !p.failed) {
                ready!(Pin::new(&mut p.stream).poll_flush(cx))?;
            }
            return Poll::Ready(Ok(()));
        }
        for p in this.paths.iter_mut().filter(|p| !p.failed) {
            ready!(Pin::new(&mut p.stream).poll_shutdown(cx))?;
        }
        Poll::Ready(Ok(()))
    }
}

impl core::fmt::Debug for MultipathStream {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("MultipathStream")
            .field("cipher", &self.cipher)
            .field("tx_offset", &self.tx_offset)
            .field("rx_offset", &self.rx_offset)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use core::time::Duration;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    use super::*;

    /// Our ends `[untrusted, trusted]` of two loopback connections, and the peer's raw ends.
    async fn connections() -> (Vec<Conn>, Vec<TcpStream>) {
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        for _ in 0..2 {
            let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let peer = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
            ours.push(Conn::new(l.accept().await.unwrap().0));
            theirs.push(peer);
        }
        (ours, theirs)
    }

    /// A stream in clear whose peer's hello set `RESEND` (it asks for acks).
    async fn receiver(policy: OnPathFailure) -> (MultipathStream, Vec<TcpStream>) {
        let (conns, peer) = connections().await;
        let est = Established {
            cipher: Cipher::None,
            tx: TxKeys::None,
            rx: TxKeys::None,
            setup_time: Duration::ZERO,
            handshake_time: Duration::ZERO,
            peer_static: None,
            peer_wants_acks: true,
        };
        let options = Options {
            on_path_failure: policy,
            ..Options::default()
        };
        let roles = [PathRole::Untrusted, PathRole::Trusted];
        (MultipathStream::new(conns, &roles, est, &options), peer)
    }

    /// `n` consecutive data segments of `len` bytes each from segment number 1 on (segment 0,
    /// which the receiver needs next, is never sent).
    fn out_of_order(n: u32, len: u16) -> Vec<u8> {
        let mut out = Vec::new();
        for k in 0..n {
            let repr = Repr {
                kind: Kind::Data,
                len,
                path_seq: k,
                offset: u64::from(k + 1) * u64::from(len.max(1)),
                seg: k + 1,
            };
            let start = out.len();
            out.resize(start + HEADER_LEN + usize::from(len), b'x');
            repr.emit(&mut out[start..start + HEADER_LEN]);
        }
        out
    }

    /// Reads for `wait`; the read's result if it finished.
    async fn read_for(s: &mut MultipathStream, wait: Duration) -> Option<io::Result<usize>> {
        let mut buf = [0u8; 64];
        tokio::time::timeout(wait, s.read(&mut buf)).await.ok()
    }

    const CONTINUE: OnPathFailure = OnPathFailure::Continue {
        allow_untrusted_only: false,
    };

    /// Issue 18 item 7: a client whose hello sets `RESEND` made a `Close` server read ahead
    /// without bound. Now a `Close` receiver never reads ahead (TCP pushes back instead).
    #[tokio::test]
    async fn a_peer_asking_for_acks_cannot_make_a_close_receiver_read_ahead() {
        let (mut s, mut peer) = receiver(OnPathFailure::Close).await;
        let flood = out_of_order(50_000, 1);
        let mut untrusted = peer.remove(UNTRUSTED);
        tokio::spawn(async move {
            let _ = untrusted.write_all(&flood).await;
            untrusted
        });
        // Longer than the stall that lets a Continue receiver read ahead.
        assert!(
            read_for(&mut s, STALL * 5).await.is_none(),
            "nothing to read"
        );
        assert_eq!((s.reorder.len(), s.reorder_bytes), (0, 0));
    }

    /// A data segment without payload is a wire error, at once (before: one more entry of the
    /// out-of-order buffer, for free).
    #[tokio::test]
    async fn an_empty_data_segment_is_refused() {
        for policy in [OnPathFailure::Close, CONTINUE] {
            let (mut s, mut peer) = receiver(policy).await;
            peer[UNTRUSTED]
                .write_all(&out_of_order(1, 0))
                .await
                .unwrap();
            let r = read_for(&mut s, Duration::from_secs(5)).await;
            let e = r.expect("an answer, not a wait").unwrap_err();
            assert!(e.to_string().contains("empty data segment"), "{e}");
        }
    }

    /// A `Continue` receiver reads ahead, but each entry is charged its overhead: a flood of
    /// one-byte segments ends the stream after about `REORDER_LIMIT / 277` entries (before:
    /// 16 MiB / 21 bytes, 800,000 entries).
    #[tokio::test]
    async fn read_ahead_entries_are_charged_and_capped() {
        let (mut s, mut peer) = receiver(CONTINUE).await;
        let max_entries = REORDER_LIMIT / (HEADER_LEN + 1 + ENTRY_OVERHEAD);
        let flood = out_of_order(u32::try_from(max_entries).unwrap() + 10_000, 1);
        let mut untrusted = peer.remove(UNTRUSTED);
        tokio::spawn(async move {
            let _ = untrusted.write_all(&flood).await;
            untrusted
        });
        let r = read_for(&mut s, Duration::from_secs(30)).await;
        let e = r.expect("the stream must end, not wait").unwrap_err();
        assert!(e.to_string().contains("out-of-order buffer full"), "{e}");
        assert!(s.reorder.len() <= max_entries, "{}", s.reorder.len());
        assert!(s.reorder.len() > max_entries / 2, "{}", s.reorder.len());
    }
}
