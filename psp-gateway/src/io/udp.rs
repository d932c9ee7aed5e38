//! The UDP uplink: each datagram carries one whole PSP frame (Ethernet header included), so
//! two gateways can talk across routed networks. Batched `recvmmsg`/`sendmmsg`.

use core::net::SocketAddr;
use std::io;

use super::Batch;

/// A bound UDP socket for PSP frames.
#[derive(Debug)]
pub struct UdpLink {
    local: SocketAddr,
}

impl UdpLink {
    /// Binds to `listen` (IPv4 or IPv6; works on hosts with IPv6 disabled when `listen` is IPv4).
    ///
    /// # Errors
    /// Bind failure.
    pub fn bind(listen: SocketAddr) -> io::Result<Self> {
        let _ = listen;
        Err(io::Error::other("udp: not implemented yet"))
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
        let _ = batch;
        Err(io::Error::other("udp: not implemented yet"))
    }

    /// See [`super::Uplink::send_batch`]; each frame goes to its `addr` (frames without one
    /// are skipped).
    ///
    /// # Errors
    /// See [`super::Uplink::send_batch`].
    pub async fn send_batch(&self, batch: &Batch) -> io::Result<usize> {
        let _ = batch;
        Err(io::Error::other("udp: not implemented yet"))
    }

    /// The MTU of the route's interface minus IP and UDP headers (conservative: the smallest
    /// MTU among the host's up interfaces if the route is unknown, IPv6 header if bound to v6).
    ///
    /// # Errors
    /// When no MTU can be determined.
    pub fn mtu(&self) -> io::Result<usize> {
        Err(io::Error::other("udp: not implemented yet"))
    }
}
