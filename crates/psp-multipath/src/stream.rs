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
//! per path (`2 * (HEADER_LEN + MAX_PAYLOAD)`) whatever the sender does.

use core::pin::Pin;
use core::task::{Context, Poll, ready};
use std::io;

use psp_core::SuiteKey;
use psp_core::scramble::{Descrambler, Scrambler};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use crate::setup::{Conn, Established, TxKeys};
use crate::wire::{self, Cipher, HEADER_LEN, Kind, MAX_PAYLOAD, PathRole, Repr, Segment};
use crate::{Error, PathStats, SharePolicy, TRUSTED, UNTRUSTED};

/// The AEAD tag length (AES-128-GCM).
const TAG_LEN: usize = 16;
/// AEAD associated data prefix: 12 constant bytes (bytes 6..12 enter psp-core's nonce
/// derivation, so they must not vary; the segment number is the nonce's counter).
const AAD_PREFIX: [u8; 12] = *b"psp-mp\0aead\0";
/// A path takes a new segment while less than this is queued in userspace for it.
const OUT_LIMIT: usize = 64 * 1024;
/// The receive buffer per path: two whole segments (one being delivered, one arriving).
const IN_LEN: usize = 2 * (HEADER_LEN + MAX_PAYLOAD);

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

/// A byte stream dispersed over a trusted and an untrusted path (see the crate docs).
///
/// Writes are buffered per path: call `flush` (or `shutdown`) before waiting for an answer,
/// as with a `BufWriter`. After an error, every call returns an error of the same kind.
pub struct MultipathStream {
    /// `[untrusted, trusted]` (dispersal) or `[trusted]` (kernel MPTCP: one socket).
    paths: Vec<PathState>,
    cipher: Cipher,
    tx: Tx,
    rx: Rx,
    share: SharePolicy,
    segment_len: usize,
    tx_offset: u64,
    tx_seg: u32,
    sent_payload: Vec<u64>,
    fin_queued: bool,
    rx_offset: u64,
    rx_seg: u32,
    failed: Option<(io::ErrorKind, String)>,
    /// Kernel MPTCP mode: the subflows as last seen at the end of the stream (the kernel
    /// forgets them once the connection closes).
    subflow_snapshot: Option<Vec<crate::Subflow>>,
    setup_time: core::time::Duration,
    handshake_time: core::time::Duration,
    connect_time: core::time::Duration,
    peer_static: Option<[u8; 32]>,
}

impl MultipathStream {
    pub(crate) fn new(
        conns: Vec<Conn>,
        roles: &[PathRole],
        est: Established,
        share: SharePolicy,
        segment_len: usize,
    ) -> Self {
        // The same cap for every cipher, so a segment never exceeds MAX_PAYLOAD with a tag.
        let max_plain = MAX_PAYLOAD - TAG_LEN;
        let mk = |c: Conn, role| {
            // Set-up reads at most one handshake frame or tag past what it needs, and the peer
            // sends no data before the binding tag, so leftovers are at most a few segments;
            // anything beyond IN_LEN would be a protocol violation caught at parse time.
            let (local, peer) = (c.stream.local_addr().ok(), c.stream.peer_addr().ok());
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
            share,
            segment_len: segment_len.clamp(1, max_plain),
            tx_offset: 0,
            tx_seg: 0,
            fin_queued: false,
            rx_offset: 0,
            rx_seg: 0,
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

    fn fail(&mut self, e: Error) -> io::Error {
        let kind = e.io_kind();
        let msg = e.to_string();
        if self.failed.is_none() {
            self.failed = Some((kind, msg.clone()));
        }
        io::Error::new(kind, msg)
    }

    fn check_failed(&self) -> io::Result<()> {
        match &self.failed {
            Some((k, m)) => Err(io::Error::new(*k, m.clone())),
            None => Ok(()),
        }
    }

    /// Writes queued bytes of every path until each is empty or its socket is full.
    fn flush_paths(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        for i in 0..self.paths.len() {
            loop {
                let p = &mut self.paths[i];
                if p.out_pos == p.out.len() {
                    p.out.clear();
                    p.out_pos = 0;
                    break;
                }
                match Pin::new(&mut p.stream).poll_write(cx, &p.out[p.out_pos..]) {
                    Poll::Ready(Ok(0)) => {
                        let role = p.role;
                        return Err(self.fail(Error::PathFailed {
                            path: role,
                            reason: "the connection accepts no more bytes".into(),
                        }));
                    }
                    Poll::Ready(Ok(n)) => {
                        p.out_pos += n;
                        p.stats.wire_bytes_sent += n as u64;
                    }
                    Poll::Ready(Err(e)) => {
                        let role = p.role;
                        return Err(self.fail(Error::io(Some(role), e)));
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
        Ok(())
    }

    fn available(&self, i: usize) -> bool {
        self.paths[i].out.len() - self.paths[i].out_pos < OUT_LIMIT
    }

    /// The path for the next segment of `n` bytes, if one can take it now.
    fn choose(&self, n: usize) -> Option<usize> {
        if self.paths.len() == 1 {
            // Kernel MPTCP mode: one socket, the kernel decides placement.
            return self.available(0).then_some(0);
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

    /// Appends one data segment carrying `data` to path `i`.
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
                let mut aad = [0u8; 12 + HEADER_LEN];
                aad[..12].copy_from_slice(&AAD_PREFIX);
                aad[12..].copy_from_slice(&p.out[start..body]);
                let (section, icv) = p.out[body..].split_at_mut(data.len());
                if key.seal_in_place(repr.seg, &aad, section, icv).is_err() {
                    return Err(self.fail(Error::Protocol("AEAD seal failed")));
                }
            }
        }
        p.tx_seq = p.tx_seq.wrapping_add(1);
        p.stats.segments_sent += 1;
        p.stats.bytes_sent += data.len() as u64;
        self.sent_payload[i] += data.len() as u64;
        self.tx_offset += data.len() as u64;
        self.tx_seg = match self.tx_seg.checked_add(1) {
            Some(s) => s,
            None => return Err(self.fail(Error::Protocol("segment numbers exhausted"))),
        };
        Ok(())
    }

    fn push_fin(&mut self) {
        for p in &mut self.paths {
            let repr = Repr {
                kind: Kind::Fin,
                len: 0,
                path_seq: p.tx_seq,
                offset: self.tx_offset,
                seg: self.tx_seg,
            };
            let start = p.out.len();
            p.out.resize(start + HEADER_LEN, 0);
            repr.emit(&mut p.out[start..]);
            p.tx_seq = p.tx_seq.wrapping_add(1);
        }
        self.fin_queued = true;
    }

    /// Makes sure path `i` has a parsed head segment, reading if needed.
    /// `Ready(Ok(true))`: a head is there; `Ready(Ok(false))`: the path is finished.
    fn poll_head(&mut self, cx: &mut Context<'_>, i: usize) -> Poll<io::Result<bool>> {
        loop {
            let p = &mut self.paths[i];
            if p.head.is_some() {
                return Poll::Ready(Ok(true));
            }
            if p.fin.is_some() {
                return Poll::Ready(Ok(false));
            }
            let avail = &p.inb[p.in_start..p.in_end];
            match wire::segment_len(avail) {
                Err(e) => {
                    let role = p.role;
                    return Poll::Ready(Err(self.fail(Error::Wire {
                        path: Some(role),
                        error: e,
                    })));
                }
                Ok(Some(len)) => {
                    let seg = Segment::new_unchecked(&avail[..len]);
                    let repr = match Repr::parse(&seg) {
                        Ok(r) => r,
                        Err(e) => {
                            let role = p.role;
                            return Poll::Ready(Err(self.fail(Error::Wire {
                                path: Some(role),
                                error: e,
                            })));
                        }
                    };
                    if repr.path_seq != p.rx_seq {
                        let role = p.role;
                        return Poll::Ready(Err(self.fail(Error::PathFailed {
                            path: role,
                            reason: "a segment is missing or repeated (path sequence)".into(),
                        })));
                    }
                    p.rx_seq = p.rx_seq.wrapping_add(1);
                    p.stats.wire_bytes_received += len as u64;
                    match repr.kind {
                        Kind::Fin => {
                            p.fin = Some((repr.offset, repr.seg));
                            p.in_start += len;
                            return Poll::Ready(Ok(false));
                        }
                        _ => {
                            p.head = Some(Head {
                                repr,
                                pos: 0,
                                plain_len: usize::from(repr.len),
                                decoded: false,
                            });
                            return Poll::Ready(Ok(true));
                        }
                    }
                }
                Ok(None) => {}
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
                    let role = p.role;
                    return Poll::Ready(Err(self.fail(Error::io(Some(role), e))));
                }
                Poll::Ready(Ok(())) if n == 0 => {
                    let role = p.role;
                    return Poll::Ready(Err(self.fail(Error::PathFailed {
                        path: role,
                        reason: "the connection closed before the end of the stream".into(),
                    })));
                }
                Poll::Ready(Ok(())) => {}
            }
        }
    }

    /// Decodes path `i`'s head (the next segment) in place.
    fn decode_head(&mut self, i: usize) -> io::Result<()> {
        let p = &mut self.paths[i];
        let Some(head) = p.head.as_mut() else {
            return Ok(());
        };
        if head.decoded {
            return Ok(());
        }
        if head.repr.offset != self.rx_offset {
            let role = p.role;
            return Err(self.fail(Error::PathFailed {
                path: role,
                reason: "a segment's offset does not follow the stream".into(),
            }));
        }
        let start = p.in_start;
        let body = start + HEADER_LEN;
        let len = usize::from(head.repr.len);
        match &mut self.rx {
            Rx::None => {}
            Rx::Scramble(d) => d.descramble_in_place(&mut p.inb[body..body + len]),
            Rx::Aead(key) => {
                let Some(plain) = len.checked_sub(TAG_LEN) else {
                    let role = p.role;
                    return Err(self.fail(Error::Auth { path: role }));
                };
                let mut aad = [0u8; 12 + HEADER_LEN];
                aad[..12].copy_from_slice(&AAD_PREFIX);
                aad[12..].copy_from_slice(&p.inb[start..body]);
                let (section, icv) = p.inb[body..body + len].split_at_mut(plain);
                if key
                    .open_in_place(head.repr.seg, &aad, section, icv)
                    .is_err()
                {
                    let role = p.role;
                    return Err(self.fail(Error::Auth { path: role }));
                }
                head.plain_len = plain;
            }
        }
        head.decoded = true;
        Ok(())
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
        loop {
            let mut pending = false;
            let mut next = None;
            for i in 0..this.paths.len() {
                match this.poll_head(cx, i) {
                    Poll::Pending => pending = true,
                    Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                    Poll::Ready(Ok(false)) => {}
                    Poll::Ready(Ok(true)) => {
                        if this.paths[i]
                            .head
                            .is_some_and(|h| h.repr.seg == this.rx_seg)
                        {
                            next = Some(i);
                        }
                    }
                }
            }
            if let Some(i) = next {
                this.decode_head(i)?;
                let p = &mut this.paths[i];
                let Some(head) = p.head.as_mut() else {
                    continue;
                };
                let body = p.in_start + HEADER_LEN + head.pos;
                let n = (head.plain_len - head.pos).min(buf.remaining());
                buf.put_slice(&p.inb[body..body + n]);
                head.pos += n;
                p.stats.bytes_received += n as u64;
                this.rx_offset += n as u64;
                if head.pos == head.plain_len {
                    p.in_start += HEADER_LEN + usize::from(head.repr.len);
                    p.head = None;
                    p.stats.segments_received += 1;
                    this.rx_seg = this.rx_seg.wrapping_add(1);
                }
                return Poll::Ready(Ok(()));
            }
            // No path holds the next segment.
            if this.paths.iter().all(|p| p.fin.is_some()) {
                let a = this.paths[0].fin;
                if this.paths.iter().all(|p| p.fin == a) && a == Some((this.rx_offset, this.rx_seg))
                {
                    this.snapshot_subflows();
                    return Poll::Ready(Ok(())); // end of stream
                }
                return Poll::Ready(Err(this.fail(Error::Protocol(
                    "the paths end the stream at different points",
                ))));
            }
            if pending {
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
        this.flush_paths(cx)?;
        let n = buf.len().min(this.segment_len);
        let Some(i) = this.choose(n) else {
            // Every path we may use has OUT_LIMIT bytes queued and its socket returned
            // Pending in flush_paths, which registered the waker.
            return Poll::Pending;
        };
        this.push_segment(i, &buf[..n])?;
        // Push the new segment towards the kernel now; Pending here is fine (queued).
        this.flush_paths(cx)?;
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.check_failed()?;
        this.flush_paths(cx)?;
        if this.paths.iter().any(|p| p.out_pos < p.out.len()) {
            return Poll::Pending;
        }
        for p in &mut this.paths {
            ready!(Pin::new(&mut p.stream).poll_flush(cx))?;
        }
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.check_failed()?;
        if !this.fin_queued {
            this.snapshot_subflows();
            this.push_fin();
        }
        this.flush_paths(cx)?;
        if this.paths.iter().any(|p| p.out_pos < p.out.len()) {
            return Poll::Pending;
        }
        for p in &mut this.paths {
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
