//! The UDP uplink: each datagram carries one whole PSP frame (Ethernet header included), so
//! two gateways can talk across routed networks. Batched `recvmmsg`/`sendmmsg`.
//!
//! One non-blocking socket, IPv4 or IPv6 (an IPv6 socket bound to `[::]` is dual-stack where
//! the host allows it: IPv4 peers then appear as plain IPv4 addresses, never v4-mapped).

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::io;
use std::net::UdpSocket;
use std::os::fd::{AsFd, OwnedFd};

use tokio::io::unix::AsyncFd;

use super::Batch;
use super::raw_eth;
use super::sys::{self, RecvMode, SendMode};

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
#[derive(Debug)]
pub struct UdpLink {
    local: SocketAddr,
    fd: AsyncFd<OwnedFd>,
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
        tracing::debug!(%local, rcv, snd, "udp uplink open");
        Ok(Self {
            local,
            fd: sys::register_fd(fd)?,
        })
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
        raw_eth::recv_batch(&self.fd, batch, RecvMode::Inet).await
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
        raw_eth::send_batch(&self.fd, batch, mode).await
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
