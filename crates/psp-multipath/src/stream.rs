//! [`MultipathStream`]: `AsyncRead + AsyncWrite` over the TCP connections of one stream. The
//! protocol is the sans-I/O [`Connection`]; this file moves its bytes between it and the
//! sockets, keeps the wakers and the stall timer, and reads the kernel's counters.
//!
//! Wakers: with the stream split into a reading and a writing task, both poll the same sockets
//! and a socket keeps one waker per direction. So each half stores its own waker and wakes the
//! other's when the connection reports that the other half may make progress
//! ([`Event`](crate::proto::Event)), or when it flushed bytes the other half waits for.

use core::net::SocketAddr;
use core::pin::Pin;
use core::task::{Context, Poll, Waker, ready};
use std::io;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use crate::clock::Clock;
use crate::proto::{Connection, Established, Event, Read};
use crate::wire::PathRole;
use crate::{Error, Mode, OnPathFailure, Options, PathStats};

/// Which half of the stream is being polled.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Read,
    Write,
}

/// A byte stream dispersed over a trusted and an untrusted path (see the crate docs).
///
/// Writes are buffered per path: call `flush` (or `shutdown`) before waiting for an answer,
/// as with a `BufWriter`. After an error, every call returns an error of the same kind.
/// Under [`OnPathFailure::Continue`], `shutdown` returns once the peer acknowledged every
/// segment (so nothing is left to re-send).
pub struct MultipathStream {
    conn: Connection,
    /// By slot: `[untrusted, trusted]` (dispersal) or `[trusted]` (kernel MPTCP).
    sockets: Vec<TcpStream>,
    /// Each socket's local and peer address.
    addrs: Vec<(Option<SocketAddr>, Option<SocketAddr>)>,
    clock: Clock,
    read_waker: Option<Waker>,
    write_waker: Option<Waker>,
    /// The connection's stall timer (one allocation, reset when its deadline moves).
    stall: Option<Pin<Box<tokio::time::Sleep>>>,
    stall_at: Option<psp_core::time::Instant>,
    /// The reader is at end of stream and waits for its last ack to be written.
    reader_waits_flush: bool,
    /// Kernel MPTCP mode: the subflows as last seen at the end of the stream (the kernel
    /// forgets them once the connection closes).
    subflow_snapshot: Option<Vec<crate::Subflow>>,
    setup_time: core::time::Duration,
    /// Where the set-up's time went, by the driver's clock.
    profile: crate::SetupProfile,
    peer_static: Option<[u8; 32]>,
    kem: bool,
    smkex: bool,
}

/// Applies the path-failure socket options (`Continue` only): `TCP_USER_TIMEOUT` (sent data
/// unacknowledged this long fails the connection; Linux counts a zero window that long too) and
/// keepalive probes (an idle path that stops answering fails in about `t`). Best effort: a
/// kernel without them still sees resets and closes.
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
        sockets: Vec<TcpStream>,
        est: Established,
        options: &Options,
        clock: Clock,
    ) -> Self {
        if options.mode == Mode::Dispersal
            && matches!(options.on_path_failure, OnPathFailure::Continue { .. })
        {
            for s in &sockets {
                set_path_timeouts(s, options.path_timeout);
            }
        }
        let addrs = sockets
            .iter()
            .map(|s| (s.local_addr().ok(), s.peer_addr().ok()))
            .collect();
        let (setup_time, handshake_time, peer_static) =
            (est.setup_time(), est.handshake_time(), est.peer_static());
        let zero = core::time::Duration::ZERO;
        let (kem, smkex) = (est.kem(), est.smkex());
        Self {
            conn: Connection::new(clock.now(), est, options),
            sockets,
            addrs,
            clock,
            read_waker: None,
            write_waker: None,
            stall: None,
            stall_at: None,
            reader_waits_flush: false,
            subflow_snapshot: None,
            setup_time,
            // The set-up's own view until the driver gives its profile.
            profile: crate::SetupProfile {
                connect: zero,
                handshake: handshake_time,
                binding: setup_time.saturating_sub(handshake_time),
                first_flight: zero,
                reply: zero,
                keys: handshake_time,
            },
            peer_static,
            kem,
            smkex,
        }
    }

    /// The negotiated stream protection.
    pub fn cipher(&self) -> crate::Cipher {
        self.conn.cipher()
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

    /// Whether the stream's keys hold an ML-KEM-768 secret beside X25519's (the hybrid
    /// handshake, [`Options::kem`](crate::Options::kem) on both sides): a recording of the
    /// set-up then yields nothing to an attacker who can break X25519 but not ML-KEM-768.
    pub fn kem(&self) -> bool {
        self.kem
    }

    /// Whether the key exchange ran SMKEX (the transcript hash checked across two paths) rather
    /// than single-path SEP. In kernel MPTCP mode both of SMKEX's paths were the one MPTCP
    /// connection (docs/MULTIPATH.md, "Kernel MPTCP mode": what that still guarantees).
    pub fn smkex(&self) -> bool {
        self.smkex
    }

    /// Where set-up time went on this side (see [`SetupProfile`](crate::SetupProfile)).
    pub fn setup_profile(&self) -> crate::SetupProfile {
        self.profile
    }

    pub(crate) fn set_profile(&mut self, profile: crate::SetupProfile) {
        self.profile = profile;
    }

    /// Per-path counters, `[untrusted, trusted]` (indexes [`UNTRUSTED`](crate::UNTRUSTED) and
    /// [`TRUSTED`](crate::TRUSTED)); in kernel MPTCP mode one entry for the MPTCP socket (see
    /// [`subflows`](Self::subflows)). With the kernel's RTT and retransmission counts
    /// (`TCP_INFO`) read now.
    pub fn stats(&self) -> Vec<PathStats> {
        (0..self.sockets.len())
            .map(|i| {
                let mut st = self.conn.path_stats(i).clone();
                (st.local, st.peer) = self.addrs[i];
                if let Some(info) = crate::sys::tcp_info(&self.sockets[i]) {
                    st.rtt_us = Some(info.rtt_us);
                    st.retransmits = Some(info.total_retrans);
                }
                st
            })
            .collect()
    }

    /// Kernel MPTCP mode: what the kernel did per subflow (addresses, bytes acknowledged and
    /// received, RTT, retransmissions), read now; `None` in dispersal mode or if the kernel
    /// does not say. Once the connection has ended, the snapshot taken at end of stream
    /// (reading or shutdown) is returned.
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
        if self.sockets.len() != 1 {
            return None;
        }
        let sfs = crate::sys::mptcp_subflows(&self.sockets[0])?;
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
        self.conn.untrusted_share()
    }

    /// Bytes of segments kept for re-sending, not yet acknowledged (`Continue` only).
    pub fn unacked_bytes(&self) -> usize {
        self.conn.unacked_bytes()
    }

    fn role(&self, i: usize) -> PathRole {
        crate::proto::roles(if self.sockets.len() == 1 {
            Mode::KernelMptcp
        } else {
            Mode::Dispersal
        })[i]
    }

    /// Wakes the other half for each event the connection reported.
    fn wake_for_events(&mut self, side: Side) {
        while let Some(ev) = self.conn.poll_event() {
            match ev {
                Event::Readable if side != Side::Read => self.wake(Side::Read),
                Event::Writable if side != Side::Write => self.wake(Side::Write),
                _ => {}
            }
        }
    }

    fn wake(&mut self, which: Side) {
        let w = match which {
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

    /// Path `i` failed with `e`: tells the connection, and closes the socket if the stream goes
    /// on without it (a reset or fin on a working link; nothing on a dead one).
    fn path_failed(&mut self, i: usize, e: Error) -> io::Result<()> {
        self.conn.handle_path_failed(self.clock.now(), i, e)?;
        let _ = socket2::SockRef::from(&self.sockets[i]).shutdown(std::net::Shutdown::Both);
        Ok(())
    }

    /// Writes the connection's queued bytes on every working path until each is empty or its
    /// socket is full.
    fn flush_paths(&mut self, cx: &mut Context<'_>, side: Side) -> io::Result<()> {
        let mut progress = false;
        loop {
            let mut again = false;
            for i in 0..self.sockets.len() {
                loop {
                    let out = self.conn.poll_transmit(i);
                    if out.is_empty() {
                        break;
                    }
                    match Pin::new(&mut self.sockets[i]).poll_write(cx, out) {
                        Poll::Ready(Ok(0)) => {
                            let e = Error::PathFailed {
                                path: self.role(i),
                                reason: "the connection accepts no more bytes".into(),
                            };
                            if let Err(e) = self.path_failed(i, e) {
                                self.wake_for_events(side);
                                return Err(e);
                            }
                            again = true;
                            break;
                        }
                        Poll::Ready(Ok(n)) => {
                            self.conn.transmitted(i, n);
                            progress = true;
                        }
                        Poll::Ready(Err(e)) => {
                            let e = Error::io(Some(self.role(i)), e);
                            if let Err(e) = self.path_failed(i, e) {
                                self.wake_for_events(side);
                                return Err(e);
                            }
                            again = true;
                            break;
                        }
                        Poll::Pending => break,
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
        self.wake_for_events(side);
        Ok(())
    }

    /// Reads from each socket whose path needs input, once. Whether anything happened (bytes,
    /// an end, an error).
    fn pump_input(&mut self, cx: &mut Context<'_>, side: Side) -> io::Result<bool> {
        let mut progress = false;
        for i in 0..self.sockets.len() {
            if self.conn.is_path_failed(i) || !self.conn.needs_input(i)? {
                continue;
            }
            let space = self.conn.recv_buf(i);
            if space.is_empty() {
                continue;
            }
            let mut rb = ReadBuf::new(space);
            let r = Pin::new(&mut self.sockets[i]).poll_read(cx, &mut rb);
            let n = rb.filled().len();
            match r {
                Poll::Pending => continue,
                Poll::Ready(Ok(())) if n > 0 => self.conn.handle_recv(i, n),
                Poll::Ready(Ok(())) => {
                    let e = Error::PathFailed {
                        path: self.role(i),
                        reason: "the connection closed before the end of the stream".into(),
                    };
                    self.path_failed(i, e)?;
                }
                Poll::Ready(Err(e)) => {
                    let e = Error::io(Some(self.role(i)), e);
                    self.path_failed(i, e)?;
                }
            }
            progress = true;
        }
        self.wake_for_events(side);
        Ok(progress)
    }

    /// Handles acks and fins waiting in front of each working path, reading as far as the
    /// sockets give (the writer's way to learn of acks and failures while nobody reads).
    fn poll_control(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        while self.pump_input(cx, Side::Write)? {}
        self.conn.process_input()?;
        self.wake_for_events(Side::Write);
        Ok(())
    }

    /// Polls the stall timer at `at`; `true` once it fired.
    fn stall_fired(&mut self, cx: &mut Context<'_>, at: psp_core::time::Instant) -> bool {
        let deadline = self.clock.deadline(at);
        let t = self
            .stall
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        if self.stall_at != Some(at) {
            t.as_mut().reset(deadline);
            self.stall_at = Some(at);
        }
        t.as_mut().poll(cx).is_ready()
    }
}

impl AsyncRead for MultipathStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.conn.check()?;
        if buf.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        loop {
            let r = this.conn.read(this.clock.now(), buf.initialize_unfilled());
            let r = match r {
                Ok(r) => r,
                Err(e) => {
                    this.wake_for_events(Side::Read);
                    return Poll::Ready(Err(e));
                }
            };
            match r {
                Read::Data(n) => {
                    buf.advance(n);
                    // Bytes were delivered: return them. A flush error is kept by the
                    // connection and returned by the next call.
                    let _ = this.flush_paths(cx, Side::Read);
                    return Poll::Ready(Ok(()));
                }
                Read::End => {
                    this.snapshot_subflows();
                    this.flush_paths(cx, Side::Read)?;
                    if this.conn.sends_acks() && this.conn.transmit_pending() {
                        // The last ack must leave: the sender waits for it.
                        this.reader_waits_flush = true;
                        this.park(cx, Side::Read);
                        return Poll::Pending;
                    }
                    this.reader_waits_flush = false;
                    return Poll::Ready(Ok(()));
                }
                Read::Blocked => {
                    if this.pump_input(cx, Side::Read)? {
                        continue;
                    }
                    if let Some(at) = this.conn.poll_timeout()
                        && this.stall_fired(cx, at)
                    {
                        this.conn.handle_timeout(this.clock.now());
                        continue;
                    }
                    this.park(cx, Side::Read);
                    return Poll::Pending;
                }
            }
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
        this.conn.check()?;
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        this.flush_paths(cx, Side::Write)?;
        if this.conn.retention_full(buf.len()) {
            // Learn of acks (and failures) even if nobody reads.
            this.poll_control(cx)?;
            this.flush_paths(cx, Side::Write)?;
        }
        let n = this.conn.write(this.clock.now(), buf)?;
        if n == 0 {
            // Every path we may use has its output full and its socket returned Pending in
            // flush_paths, or the kept segments are full and poll_control registered for the
            // acks (or the reader will wake us).
            this.park(cx, Side::Write);
            return Poll::Pending;
        }
        // Push the new segment towards the kernel now; Pending here is fine (queued).
        this.flush_paths(cx, Side::Write)?;
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.conn.check()?;
        this.flush_paths(cx, Side::Write)?;
        if this.conn.transmit_pending() {
            this.park(cx, Side::Write);
            return Poll::Pending;
        }
        for i in 0..this.sockets.len() {
            if !this.conn.is_path_failed(i) {
                ready!(Pin::new(&mut this.sockets[i]).poll_flush(cx))?;
            }
        }
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.conn.check()?;
        if !this.conn.is_closed() {
            this.snapshot_subflows();
            this.conn.close(this.clock.now())?;
        }
        this.flush_paths(cx, Side::Write)?;
        if this.conn.awaiting_acks() {
            // Keep the paths open until the peer has everything: a path may still fail.
            this.poll_control(cx)?;
            this.flush_paths(cx, Side::Write)?;
        }
        if this.conn.transmit_pending() || this.conn.awaiting_acks() {
            this.park(cx, Side::Write);
            return Poll::Pending;
        }
        let dispersal = this.sockets.len() == 2;
        for i in 0..this.sockets.len() {
            if this.conn.is_path_failed(i) {
                continue;
            }
            let s = Pin::new(&mut this.sockets[i]);
            // No TCP half-close in dispersal mode: our reader still sends acks after our fin,
            // and the fin segments already end the stream. The sockets close on drop.
            if dispersal {
                ready!(s.poll_flush(cx))?;
            } else {
                ready!(s.poll_shutdown(cx))?;
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl core::fmt::Debug for MultipathStream {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("MultipathStream")
            .field("conn", &self.conn)
            .finish_non_exhaustive()
    }
}
