//! The raw Ethernet uplink: an AF_PACKET socket bound to one interface and EtherType 0x1982,
//! promiscuous (peers address frames to their protected MACs, not the uplink's), ignoring its
//! own outgoing frames, with batched `recvmmsg`/`sendmmsg`.
//!
//! Our own frames never come back: a socket bound to one EtherType sees only incoming frames
//! (the kernel shows outgoing ones to `ETH_P_ALL` sockets alone), and `PACKET_IGNORE_OUTGOING`
//! is set as well (or, on kernels before 4.20, outgoing frames are filtered on receive).
//!
//! Frames are received and sent whole (`SOCK_RAW`: destination and source MAC, EtherType,
//! body). This is AF_PACKET directly rather than pnet's `datalink`, whose one frame per
//! syscall costs throughput (figures in `BENCHMARKS.md`).

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use tokio::io::unix::AsyncFd;

use super::Batch;
use super::sys::{self, RecvMode, SendMode};

/// Socket buffer size asked for in each direction (the kernel doubles it for bookkeeping).
const SOCKET_BUFFER: usize = 4 << 20;

/// An AF_PACKET socket for PSP frames on one interface.
///
/// Public, with the methods `tests/io_root.rs` calls, for the integration tests; the rest is
/// `pub(crate)`.
#[derive(Debug)]
pub struct RawSocket {
    interface: String,
    fd: AsyncFd<OwnedFd>,
    recv_mode: RecvMode,
    // The PACKET_MMAP receive ring, when the kernel gave one (`recvmmsg` otherwise).
    ring: Option<std::sync::Mutex<sys::RxRing>>,
}

/// Slots of the receive ring (4 KiB each: 4 MiB, the size of the socket buffer it replaces).
const RING_FRAMES: usize = 1024;

impl RawSocket {
    /// Opens the socket on `interface` (which must exist), bound to EtherType 0x1982, in
    /// promiscuous mode.
    ///
    /// Must be called inside a tokio runtime with I/O enabled; `interface` is looked up in
    /// the calling thread's network namespace.
    ///
    /// # Errors
    /// Without CAP_NET_RAW, or when the interface does not exist.
    pub fn open(interface: &str) -> io::Result<Self> {
        Self::open_ethertype(interface, sys::ETH_P_PSP)
    }

    /// Like [`open`](Self::open), for another EtherType (tests, tools).
    ///
    /// # Errors
    /// See [`open`](Self::open).
    pub fn open_ethertype(interface: &str, ethertype: u16) -> io::Result<Self> {
        Self::open_inner(interface, ethertype, false)
    }

    /// Like [`open`](Self::open), with the `[[uplink]]` options `rx_ring` (see
    /// [`open_with_rx_ring`](Self::open_with_rx_ring)) and `qdisc_bypass` (see
    /// [`set_qdisc_bypass`](Self::set_qdisc_bypass); a refusal is logged, not an error).
    ///
    /// # Errors
    /// See [`open`](Self::open).
    pub fn open_configured(interface: &str, rx_ring: bool, qdisc_bypass: bool) -> io::Result<Self> {
        let sock = Self::open_inner(interface, sys::ETH_P_PSP, rx_ring)?;
        if qdisc_bypass {
            match sock.set_qdisc_bypass(true) {
                Ok(()) => tracing::info!(interface, "qdisc_bypass: sends skip the qdisc"),
                Err(e) => tracing::warn!(interface, error = %e, "qdisc_bypass refused"),
            }
        }
        Ok(sock)
    }

    /// Like [`open`](Self::open), receiving through a `PACKET_MMAP` ring where the kernel gives
    /// one (the `[[uplink]]` option `rx_ring`).
    ///
    /// # Errors
    /// See [`open`](Self::open).
    pub fn open_with_rx_ring(interface: &str) -> io::Result<Self> {
        Self::open_inner(interface, sys::ETH_P_PSP, true)
    }

    fn open_inner(interface: &str, ethertype: u16, want_ring: bool) -> io::Result<Self> {
        let ctx = |what: &str, e: io::Error| {
            io::Error::new(e.kind(), format!("raw uplink {interface}: {what}: {e}"))
        };
        let index = sys::if_index(interface)?;
        let fd = sys::packet_socket(index, ethertype).map_err(|e| ctx("AF_PACKET socket", e))?;
        sys::packet_add_promisc(fd.as_fd(), index).map_err(|e| ctx("promiscuous mode", e))?;
        let recv_mode = match sys::packet_ignore_outgoing(fd.as_fd()) {
            Ok(()) => RecvMode::Plain,
            // Kernels before 4.20: filter our own frames by packet type on receive.
            Err(_) => RecvMode::PacketSkipOutgoing,
        };
        let (rcv, snd) = sys::set_buffer_sizes(fd.as_fd(), SOCKET_BUFFER);
        // A receive ring (PACKET_MMAP) costs the receiver less CPU per frame than recvmmsg,
        // but the kernel then copies each frame into the ring in the *sender's* context: on
        // one machine (veth) end-to-end TCP was 0.93-0.98x recvmmsg (BENCHMARKS.md), so it is
        // opt-in. Only where the kernel drops our own frames for us: the ring path does not
        // look at packet types.
        let ring = if want_ring && recv_mode == RecvMode::Plain {
            match sys::RxRing::new(fd.as_fd(), RING_FRAMES) {
                Ok(r) => {
                    tracing::info!(interface, "rx_ring: receiving through a PACKET_MMAP ring");
                    Some(std::sync::Mutex::new(r))
                }
                Err(e) => {
                    tracing::warn!(interface, error = %e, "rx_ring refused; receiving with recvmmsg");
                    None
                }
            }
        } else {
            None
        };
        tracing::debug!(
            interface,
            rcv,
            snd,
            ?recv_mode,
            ring = ring.is_some(),
            "raw uplink open"
        );
        Ok(Self {
            interface: interface.to_owned(),
            fd: sys::register_fd_readable(fd)?,
            recv_mode,
            ring,
        })
    }

    /// The interface name.
    pub fn interface(&self) -> &str {
        &self.interface
    }

    /// Turns `PACKET_QDISC_BYPASS` on or off (off by default): sends skip the interface's
    /// qdisc, so traffic control on the uplink no longer applies.
    ///
    /// # Errors
    /// `setsockopt` failure.
    pub fn set_qdisc_bypass(&self, on: bool) -> io::Result<()> {
        sys::packet_qdisc_bypass(self.fd.get_ref().as_fd(), on)
    }

    /// See [`super::Uplink::recv_batch`].
    ///
    /// # Errors
    /// See [`super::Uplink::recv_batch`] (e.g. `ENETDOWN` when the interface goes down).
    pub async fn recv_batch(&self, batch: &mut Batch) -> io::Result<usize> {
        match &self.ring {
            Some(ring) => self.recv_ring(ring, batch).await,
            None => recv_batch(&self.fd, batch, self.recv_mode).await,
        }
    }

    /// Whether frames arrive through a `PACKET_MMAP` ring.
    pub fn has_rx_ring(&self) -> bool {
        self.ring.is_some()
    }

    /// [`Self::recv_batch`] through the receive ring: takes what the kernel has put there;
    /// when nothing, waits for readiness (cleared first, so a frame that lands after the
    /// check wakes us again) and reports a pending socket error (`ENETDOWN`, …).
    async fn recv_ring(
        &self,
        ring: &std::sync::Mutex<sys::RxRing>,
        batch: &mut Batch,
    ) -> io::Result<usize> {
        batch.clear();
        let drain = |batch: &mut Batch| {
            let mut r = ring.lock().unwrap_or_else(|e| e.into_inner());
            r.drain(batch)
        };
        loop {
            if drain(batch) > 0 {
                return Ok(batch.len());
            }
            // ERROR too: the ring makes the kernel signal a device going down as EPOLLERR
            // alone, which readability never sees.
            let interest = tokio::io::Interest::READABLE | tokio::io::Interest::ERROR;
            let mut guard = self.fd.ready(interest).await?;
            guard.clear_ready();
            drop(guard);
            if drain(batch) > 0 {
                return Ok(batch.len());
            }
            let err =
                sys::getsockopt_int(self.fd.get_ref().as_fd(), libc::SOL_SOCKET, libc::SO_ERROR)?;
            if err != 0 {
                return Err(io::Error::from_raw_os_error(err));
            }
        }
    }

    /// Frames the receive ring dropped (longer than a batch slot) since the last call.
    pub(crate) fn take_dropped(&self) -> u64 {
        self.ring.as_ref().map_or(0, |r| {
            let mut r = r.lock().unwrap_or_else(|e| e.into_inner());
            core::mem::take(&mut r.truncated)
        })
    }

    /// See [`super::Uplink::send_batch`].
    ///
    /// Frames the kernel refuses one by one (`EMSGSIZE`: longer than the interface MTU plus
    /// the Ethernet header; `EINVAL`: shorter than an Ethernet header) are dropped.
    ///
    /// # Errors
    /// See [`super::Uplink::send_batch`] (e.g. `ENETDOWN`, `ENXIO` while the interface is
    /// down); only when nothing of the batch was sent.
    pub async fn send_batch(&self, batch: &Batch) -> io::Result<usize> {
        send_batch(&self.fd, batch, SendMode::Bound).await
    }

    /// [`Self::send_batch`] from a plain thread (see [`super::Uplink::send_batch_blocking`]).
    ///
    /// # Errors
    /// As [`Self::send_batch`].
    pub(crate) fn send_batch_blocking(&self, batch: &Batch) -> io::Result<usize> {
        send_batch_blocking(self.fd.get_ref().as_fd(), batch, SendMode::Bound)
    }

    /// The interface MTU.
    ///
    /// # Errors
    /// ioctl failure.
    pub fn mtu(&self) -> io::Result<usize> {
        sys::if_mtu(&self.interface)
    }
}

/// Shared by the raw and UDP uplinks: waits for readability, then `recvmmsg` until the batch
/// is full, a call returns fewer messages than asked (the queue is drained), or `WouldBlock`.
pub(super) async fn recv_batch(
    fd: &AsyncFd<OwnedFd>,
    batch: &mut Batch,
    mode: RecvMode,
) -> io::Result<usize> {
    batch.clear();
    loop {
        let mut guard = fd.readable().await?;
        while !batch.is_full() {
            let asked = batch.capacity() - batch.len();
            match guard.try_io(|fd| sys::recv_mmsg(fd.get_ref().as_fd(), batch, mode)) {
                // Short read: the queue is empty for now; a next call finds out with one
                // `WouldBlock` (readiness is cleared only then).
                Ok(Ok((received, _))) if received < asked.min(sys::MMSG_CHUNK) => break,
                Ok(Ok(_)) => {}
                Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
                Ok(Err(e)) => return batch.partial(e),
                // WouldBlock: try_io cleared the readiness.
                Err(_would_block) => break,
            }
        }
        if !batch.is_empty() {
            return Ok(batch.len());
        }
    }
}

/// Shared by the raw and UDP uplinks, for a plain thread (the normalizer's pacer): like
/// [`send_batch`], but waits for writability with `poll` (at most 10 ms per wait) instead of
/// the reactor. Returns the number of frames the kernel accepted.
pub(super) fn send_batch_blocking(
    fd: BorrowedFd<'_>,
    batch: &Batch,
    mode: SendMode,
) -> io::Result<usize> {
    let mut sent = 0;
    let mut from = 0;
    let mut nobufs = false;
    while from < batch.len() {
        match sys::send_mmsg(fd, batch, from, batch.len(), mode) {
            Ok(p) => {
                sent += p.sent;
                from = p.next;
            }
            Err(e) => match after_send_error(e, &mut nobufs, sent)? {
                Next::Retry => {}
                Next::WaitForRoom => {
                    if !sys::wait_writable(fd, 10)? {
                        break;
                    }
                }
                Next::Pause => std::thread::yield_now(),
                Next::SkipTo(at) => from = at,
                Next::Stop => break,
            },
        }
    }
    Ok(sent)
}

/// Shared by the raw and UDP uplinks: `sendmmsg` until every frame is handled. Waits for
/// writability on `WouldBlock`; on `ENOBUFS` yields once and retries, then drops the rest;
/// per-frame errors drop that frame. Returns the number of frames the kernel accepted.
pub(super) async fn send_batch(
    fd: &AsyncFd<OwnedFd>,
    batch: &Batch,
    mode: SendMode,
) -> io::Result<usize> {
    send_range(fd, batch, 0..batch.len(), mode).await
}

/// [`send_batch`] for frames `range` of `batch` only.
pub(super) async fn send_range(
    fd: &AsyncFd<OwnedFd>,
    batch: &Batch,
    range: core::ops::Range<usize>,
    mode: SendMode,
) -> io::Result<usize> {
    let mut sent = 0;
    let mut from = range.start;
    let end = range.end.min(batch.len());
    let mut nobufs = false;
    while from < end {
        // The socket is registered for readability only (sys::register_fd_readable): send
        // straight away, and wait for room only when the kernel says there is none.
        let step = sys::send_mmsg(fd.get_ref().as_fd(), batch, from, end, mode);
        if let Err(e) = &step
            && e.error.kind() == io::ErrorKind::WouldBlock
        {
            sys::writable(fd.get_ref().as_fd()).await?;
            continue;
        }
        match step {
            Ok(p) => {
                sent += p.sent;
                from = p.next;
            }
            Err(e) => match after_send_error(e, &mut nobufs, sent)? {
                Next::Retry => {}
                // WouldBlock was handled above.
                Next::WaitForRoom => sys::writable(fd.get_ref().as_fd()).await?,
                Next::Pause => tokio::task::yield_now().await,
                Next::SkipTo(at) => from = at,
                Next::Stop => break,
            },
        }
    }
    Ok(sent)
}

/// What a send loop does after `sendmmsg` failed.
enum Next {
    /// Call again (`EINTR`).
    Retry,
    /// Wait until the socket has room, then call again (`EAGAIN`).
    WaitForRoom,
    /// The device queue is full (`ENOBUFS`, the first time): give the other side a moment.
    Pause,
    /// The frame failed on its own: go on from this index.
    SkipTo(usize),
    /// Drop the rest of the batch.
    Stop,
}

/// The shared policy of both send loops for a failed `sendmmsg`: an error of the whole socket
/// is returned only when nothing of the batch went out (`sent == 0`).
fn after_send_error(e: sys::SendError, nobufs: &mut bool, sent: usize) -> io::Result<Next> {
    Ok(match e.error.raw_os_error() {
        Some(libc::EINTR) => Next::Retry,
        Some(libc::EAGAIN) => Next::WaitForRoom,
        Some(libc::ENOBUFS) if !*nobufs => {
            *nobufs = true;
            Next::Pause
        }
        Some(libc::ENOBUFS) => Next::Stop,
        Some(code) if per_frame_error(code) => {
            tracing::debug!(frame = e.at, error = %e.error, "uplink dropped a frame");
            Next::SkipTo(e.at + 1)
        }
        _ if sent == 0 => return Err(e.error),
        _ => Next::Stop,
    })
}

/// Errors that concern one frame (its size, its destination), not the socket.
fn per_frame_error(code: i32) -> bool {
    matches!(
        code,
        libc::EMSGSIZE
            | libc::EINVAL
            | libc::EHOSTUNREACH
            | libc::ENETUNREACH
            | libc::EHOSTDOWN
            | libc::EACCES
            | libc::EPERM
            | libc::EAFNOSUPPORT
            | libc::EADDRNOTAVAIL
            | libc::ECONNREFUSED
            | libc::EDESTADDRREQ
    )
}
