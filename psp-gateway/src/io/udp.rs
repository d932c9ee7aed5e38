//! The UDP uplink: each datagram carries one whole PSP frame (Ethernet header included), so
//! two gateways can talk across routed networks.
//!
//! Segmentation offload through `quinn-udp` (its capability checks, control messages and
//! fallbacks): a run of equal-length frames to one peer (a TCP burst cut at the MSS) leaves as
//! one `sendmsg` with `UDP_SEGMENT` (GSO), copied into one buffer first; other frames go out
//! with one `sendmmsg` per batch as before. With `UDP_GRO` the kernel hands up several
//! datagrams of one sender in one buffer (up to [`GRO_BUFS`] per `recvmmsg`), split here into
//! the batch's slots; what does not fit waits for the next call. Where the kernel lacks GSO or
//! GRO, `quinn-udp` reports one segment and everything goes one datagram per message.
//!
//! One non-blocking socket, IPv4 or IPv6 (an IPv6 socket bound to `[::]` is dual-stack where
//! the host allows it: IPv4 peers then appear as plain IPv4 addresses, never v4-mapped).

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use core::sync::atomic::{AtomicU64, Ordering};
use std::io::{self, IoSliceMut};
use std::net::UdpSocket;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::{Mutex, MutexGuard};

use quinn_udp::{RecvMeta, Transmit, UdpSockRef, UdpSocketState};
use tokio::io::unix::AsyncFd;

use super::raw_eth;
use super::sys::{self, SendMode};
use super::{Batch, SLOT_LEN};

/// Receive buffers per `recvmmsg` with GRO (each holds one coalesced run, up to 64 KiB).
pub const GRO_BUFS: usize = 4;

/// Bytes of one GRO receive buffer (the largest UDP datagram, rounded up).
const GRO_BUF_LEN: usize = 64 * 1024;

/// The largest GSO send, bytes of UDP payload (the IP length field's limit, with headers).
const GSO_MAX_BYTES: usize = 65_000;

/// Socket buffer size asked for in each direction (the kernel doubles it for bookkeeping).
const SOCKET_BUFFER: usize = 4 << 20;

/// IPv4 + UDP header bytes.
const V4_OVERHEAD: usize = 20 + 8;

/// IPv6 + UDP header bytes.
const V6_OVERHEAD: usize = 40 + 8;

/// A bound UDP socket for PSP frames.
///
/// Public, with the methods `tests/io_root.rs` calls, for the integration tests; the rest is
/// `pub(crate)`.
pub struct UdpLink {
    local: SocketAddr,
    fd: AsyncFd<OwnedFd>,
    state: UdpSocketState,
    gro: Mutex<Box<GroRx>>,
    gso: Mutex<Box<[u8]>>,
    dropped: AtomicU64,
    coalesced: AtomicU64,
}

impl core::fmt::Debug for UdpLink {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("UdpLink")
            .field("local", &self.local)
            .field("gso_segments", &self.state.max_gso_segments())
            .field("gro_segments", &self.state.gro_segments())
            .finish_non_exhaustive()
    }
}

/// Datagrams received with GRO and not yet handed out: `meta[msg..n]`, the current one from
/// byte `off`.
struct GroRx {
    bufs: Box<[u8]>,
    meta: [RecvMeta; GRO_BUFS],
    n: usize,
    msg: usize,
    off: usize,
}

impl GroRx {
    fn new() -> Self {
        Self {
            bufs: vec![0; GRO_BUFS * GRO_BUF_LEN].into_boxed_slice(),
            meta: [RecvMeta::default(); GRO_BUFS],
            n: 0,
            msg: 0,
            off: 0,
        }
    }

    /// Moves pending datagrams into `batch` until it is full or none is left. Segments longer
    /// than a slot are dropped and counted in `dropped`.
    fn drain_into(&mut self, batch: &mut Batch, dropped: &AtomicU64) {
        while self.msg < self.n && !batch.is_full() {
            let m = self.meta[self.msg];
            let stride = if m.stride == 0 { m.len } else { m.stride };
            let buf = &self.bufs[self.msg * GRO_BUF_LEN..][..m.len.min(GRO_BUF_LEN)];
            let start = self.off.min(buf.len());
            let end = (start + stride).min(buf.len());
            let seg = &buf[start..end];
            self.off = end;
            if self.off >= buf.len() {
                self.msg += 1;
                self.off = 0;
            }
            if seg.len() > SLOT_LEN {
                dropped.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            let addr = SocketAddr::new(m.addr.ip().to_canonical(), m.addr.port());
            batch.push_with(Some(addr), |slot| {
                slot[..seg.len()].copy_from_slice(seg);
                Some(seg.len())
            });
        }
    }

    fn is_empty(&self) -> bool {
        self.msg >= self.n
    }
}

impl UdpLink {
    /// Binds to `listen` (IPv4 or IPv6; works on hosts with IPv6 disabled when `listen` is IPv4).
    ///
    /// Must be called inside a tokio runtime with I/O enabled. Port 0 picks a free port
    /// ([`local_addr`](Self::local_addr) tells which).
    ///
    /// # Errors
    /// Bind failure.
    pub fn bind(listen: SocketAddr) -> io::Result<Self> {
        let sock = UdpSocket::bind(listen)
            .map_err(|e| io::Error::new(e.kind(), format!("udp uplink: bind {listen}: {e}")))?;
        sock.set_nonblocking(true)?;
        let local = sock.local_addr()?;
        let fd = OwnedFd::from(sock);
        let (rcv, snd) = sys::set_buffer_sizes(fd.as_fd(), SOCKET_BUFFER);
        // Turns on UDP_GRO where the kernel has it and learns whether GSO works.
        let state = UdpSocketState::new(UdpSockRef::from(&fd))
            .map_err(|e| io::Error::new(e.kind(), format!("udp uplink: {local}: {e}")))?;
        tracing::debug!(
            %local,
            rcv,
            snd,
            gso_segments = state.max_gso_segments(),
            gro_segments = state.gro_segments(),
            "udp uplink open"
        );
        Ok(Self {
            local,
            fd: sys::register_fd_readable(fd)?,
            state,
            gro: Mutex::new(Box::new(GroRx::new())),
            gso: Mutex::new(vec![0; GRO_BUF_LEN].into_boxed_slice()),
            dropped: AtomicU64::new(0),
            coalesced: AtomicU64::new(0),
        })
    }

    /// Segments per GSO send the kernel takes (1: no GSO).
    pub fn gso_segments(&self) -> usize {
        self.state.max_gso_segments()
    }

    /// Datagrams the kernel may coalesce into one receive (1: no GRO).
    pub fn gro_segments(&self) -> usize {
        self.state.gro_segments()
    }

    /// Receives that carried more than one datagram (GRO at work), since the link opened.
    pub fn coalesced_receives(&self) -> u64 {
        self.coalesced.load(Ordering::Relaxed)
    }

    /// Received datagrams dropped since the last call (longer than a batch slot).
    pub(crate) fn take_dropped(&self) -> u64 {
        self.dropped.swap(0, Ordering::Relaxed)
    }

    fn gro_rx(&self) -> MutexGuard<'_, Box<GroRx>> {
        self.gro.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// See [`super::Uplink::recv_batch`]; each frame's `addr` is its source.
    ///
    /// # Errors
    /// See [`super::Uplink::recv_batch`].
    pub async fn recv_batch(&self, batch: &mut Batch) -> io::Result<usize> {
        batch.clear();
        self.gro_rx().drain_into(batch, &self.dropped);
        loop {
            if batch.is_full() {
                return Ok(batch.len());
            }
            // With frames in hand, only take what is already queued: never wait.
            let got = if batch.is_empty() {
                let mut guard = self.fd.readable().await?;
                match guard.try_io(|fd| self.recv_gro(fd.get_ref())) {
                    Ok(r) => r,
                    Err(_would_block) => continue,
                }
            } else {
                self.recv_gro(self.fd.get_ref())
            };
            match got {
                Ok(n) => {
                    self.gro_rx().drain_into(batch, &self.dropped);
                    // Short read: the queue is empty for now.
                    if n < GRO_BUFS && !batch.is_empty() {
                        return Ok(batch.len());
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if !batch.is_empty() {
                        return Ok(batch.len());
                    }
                }
                Err(e) => return batch.partial(e),
            }
        }
    }

    /// One `recvmmsg` into the GRO buffers (which must be drained). Returns the datagrams
    /// received.
    fn recv_gro(&self, fd: &OwnedFd) -> io::Result<usize> {
        let mut rx = self.gro_rx();
        debug_assert!(rx.is_empty());
        let GroRx {
            bufs,
            meta,
            n,
            msg,
            off,
            ..
        } = &mut **rx;
        let mut slices: [IoSliceMut<'_>; GRO_BUFS] = {
            let mut it = bufs.chunks_exact_mut(GRO_BUF_LEN).map(IoSliceMut::new);
            core::array::from_fn(|_| it.next().unwrap_or_else(|| IoSliceMut::new(&mut [])))
        };
        let got = self.state.recv(UdpSockRef::from(fd), &mut slices, meta)?;
        (*n, *msg, *off) = (got, 0, 0);
        let many = meta[..got]
            .iter()
            .filter(|m| m.stride > 0 && m.stride < m.len)
            .count();
        self.coalesced.fetch_add(many as u64, Ordering::Relaxed);
        Ok(got)
    }

    /// See [`super::Uplink::send_batch`]; each frame goes to its `addr` (frames without one
    /// are skipped).
    ///
    /// Frames to an address this socket cannot reach (IPv6 from an IPv4 socket), or refused
    /// one by one (`EMSGSIZE`, unreachable, firewall `EPERM`), are dropped as well.
    ///
    /// # Errors
    /// See [`super::Uplink::send_batch`]; only when nothing of the batch was sent.
    pub async fn send_batch(&self, batch: &Batch) -> io::Result<usize> {
        let mode = SendMode::Inet {
            v6_socket: self.local.is_ipv6(),
        };
        let max = self.state.max_gso_segments().min(batch.len());
        if max < 2 {
            return raw_eth::send_batch(&self.fd, batch, mode).await;
        }
        let mut sent = 0;
        let mut from = 0;
        while from < batch.len() {
            let end = gso_run_end(batch, from, max);
            if end - from >= 2 {
                sent += self.send_gso(batch, from..end).await?;
                from = end;
                continue;
            }
            // Frames that do not start a run go out together, in order.
            let mut stop = from + 1;
            while stop < batch.len() && gso_run_end(batch, stop, max) - stop < 2 {
                stop += 1;
            }
            sent += raw_eth::send_range(&self.fd, batch, from..stop, mode).await?;
            from = stop;
        }
        Ok(sent)
    }

    /// Sends frames `range` of `batch` (one destination, equal lengths but the last) as one
    /// GSO datagram. Returns the frames sent: all of them, or none when the kernel refused
    /// (counted by the caller; a full buffer is waited for).
    async fn send_gso(&self, batch: &Batch, range: core::ops::Range<usize>) -> io::Result<usize> {
        let Some(destination) = batch.addr(range.start) else {
            return Ok(0);
        };
        let segment = batch.frame(range.start).len();
        // Copied and sent under the lock, never held across an await.
        let send = |fd: &OwnedFd| {
            let mut buf = self.gso.lock().unwrap_or_else(|e| e.into_inner());
            let mut len = 0;
            for i in range.clone() {
                let f = batch.frame(i);
                buf[len..len + f.len()].copy_from_slice(f);
                len += f.len();
            }
            let t = Transmit {
                destination,
                ecn: None,
                contents: &buf[..len],
                segment_size: Some(segment),
                src_ip: None,
            };
            self.state.try_send(UdpSockRef::from(fd), &t)
        };
        loop {
            match send(self.fd.get_ref()) {
                Ok(()) => return Ok(range.len()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // Registered for readability only: wait for room only when there is none.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    sys::writable(self.fd.get_ref().as_fd()).await?;
                }
                Err(e) => {
                    // Unreachable, firewall, no buffer space, or GSO refused (quinn-udp then
                    // stops offering it): these frames are lost, counted by the caller.
                    tracing::debug!(error = %e, frames = range.len(), "uplink dropped a GSO send");
                    return Ok(0);
                }
            }
        }
    }

    /// [`Self::send_batch`] from a plain thread (see [`super::Uplink::send_batch_blocking`]).
    ///
    /// # Errors
    /// As [`Self::send_batch`].
    pub(crate) fn send_batch_blocking(&self, batch: &Batch) -> io::Result<usize> {
        let mode = SendMode::Inet {
            v6_socket: self.local.is_ipv6(),
        };
        raw_eth::send_batch_blocking(self.fd.get_ref().as_fd(), batch, mode)
    }

    /// The MTU of the route's interface minus IP and UDP headers (conservative: the smallest
    /// MTU among the host's up interfaces if the route is unknown, IPv6 header if bound to v6).
    ///
    /// Bound to a specific address: the MTU of the interface holding it. Bound to the
    /// unspecified address: the smallest MTU among up, non-loopback interfaces other than
    /// TUN/TAP devices (our own TAP must not feed back into its own MTU), or loopback's if
    /// there is nothing else.
    ///
    /// # Errors
    /// When no MTU can be determined.
    pub fn mtu(&self) -> io::Result<usize> {
        let ip = self.local.ip();
        let link = interface_mtu(ip)?;
        Ok(link.saturating_sub(overhead(ip)))
    }

    /// The path MTU towards `peer` minus IP and UDP headers: the kernel's route (and PMTU
    /// cache) MTU for that destination, read from a connected scratch socket (`IP_MTU`,
    /// `IPV6_MTU`; nothing is sent). Better than [`mtu`](Self::mtu) when the peer is known.
    ///
    /// # Errors
    /// No route to `peer`, or the socket calls fail.
    pub fn path_mtu(&self, peer: SocketAddr) -> io::Result<usize> {
        // Mirror our family: an IPv6 socket reaches IPv4 peers v4-mapped (IPv4 route).
        let (bind, peer, over): (SocketAddr, SocketAddr, usize) = match (self.local, peer) {
            (_, SocketAddr::V4(p)) => ((Ipv4Addr::UNSPECIFIED, 0).into(), p.into(), V4_OVERHEAD),
            (SocketAddr::V6(_), SocketAddr::V6(p)) => {
                ((Ipv6Addr::UNSPECIFIED, 0).into(), p.into(), V6_OVERHEAD)
            }
            (SocketAddr::V4(_), SocketAddr::V6(_)) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("path MTU to {peer}: an IPv4 uplink cannot reach IPv6 peers"),
                ));
            }
        };
        let sock = UdpSocket::bind(bind)?;
        sock.connect(peer)
            .map_err(|e| io::Error::new(e.kind(), format!("path MTU to {peer}: {e}")))?;
        let (level, name) = match peer {
            SocketAddr::V4(_) => (libc::IPPROTO_IP, libc::IP_MTU),
            SocketAddr::V6(_) => (libc::IPPROTO_IPV6, libc::IPV6_MTU),
        };
        let mtu = sys::getsockopt_int(sock.as_fd(), level, name)?;
        let mtu = usize::try_from(mtu).map_err(|_| io::Error::other(format!("path MTU {mtu}")))?;
        Ok(mtu.saturating_sub(over))
    }
}

/// The end of the GSO run from `from`: frames to one address, all as long as the first but the
/// last (which may be shorter), at most `max` frames and [`GSO_MAX_BYTES`] bytes.
fn gso_run_end(batch: &Batch, from: usize, max: usize) -> usize {
    let (Some(addr), seg) = (batch.addr(from), batch.frame(from).len()) else {
        return from + 1;
    };
    let mut end = from + 1;
    let mut bytes = seg;
    while end < batch.len() && end - from < max && seg > 0 {
        let len = batch.frame(end).len();
        if batch.addr(end) != Some(addr) || len > seg || bytes + len > GSO_MAX_BYTES {
            break;
        }
        bytes += len;
        end += 1;
        if len < seg {
            break;
        }
    }
    end
}

/// IP + UDP header bytes for a socket bound to `ip`.
fn overhead(ip: IpAddr) -> usize {
    match ip {
        IpAddr::V4(_) => V4_OVERHEAD,
        IpAddr::V6(_) => V6_OVERHEAD,
    }
}

/// The link MTU for a socket bound to `ip` (see [`UdpLink::mtu`]).
fn interface_mtu(ip: IpAddr) -> io::Result<usize> {
    let all = sys::interfaces()?;
    if !ip.is_unspecified()
        && let Some(i) = all.iter().find(|i| i.ip == Some(ip))
    {
        return sys::if_mtu(&i.name);
    }
    let up = libc::IFF_UP as u32;
    let loopback = libc::IFF_LOOPBACK as u32;
    let mut best: Option<usize> = None;
    let mut lo: Option<usize> = None;
    let mut seen: Vec<&str> = Vec::new();
    for i in &all {
        if i.flags & up == 0 || seen.contains(&i.name.as_str()) {
            continue;
        }
        seen.push(&i.name);
        let Ok(mtu) = sys::if_mtu(&i.name) else {
            continue;
        };
        if i.flags & loopback != 0 {
            lo = Some(lo.map_or(mtu, |m| m.min(mtu)));
        } else if sys::if_driver(&i.name).is_ok_and(|d| d == "tun") {
            // A TAP (ours or another tunnel's) sits on top of some uplink; skip it.
        } else {
            best = Some(best.map_or(mtu, |m| m.min(mtu)));
        }
    }
    best.or(lo)
        .ok_or_else(|| io::Error::other("udp uplink MTU: no interface is up"))
}
