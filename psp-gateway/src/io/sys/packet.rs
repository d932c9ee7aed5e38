//! AF_PACKET sockets: creation and binding to one interface and EtherType, promiscuous mode,
//! the packet options, and [`PacketSocket`], a small safe socket for tools and tests.
//!
//! `socket`, `poll`, `send` and `recvfrom` (with the `sockaddr_ll` it returns) go through
//! `nix`. Hand-written `unsafe` is left for `bind` with a `sockaddr_ll` and for
//! `PACKET_ADD_MEMBERSHIP`: neither `nix` nor `socket2` can build a link-layer address or a
//! `packet_mreq` safely.

use core::ffi::{c_int, c_void};
use core::mem;
use core::time::Duration;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::socket::{self, AddressFamily, LinkAddr, MsgFlags, SockType};

use super::fd::{cvt, set_buffer_sizes, setsockopt_int, socket};
use super::netdev::if_index;

/// The PSP EtherType.
pub(crate) const ETH_P_PSP: u16 = 0x1982;

/// An AF_PACKET `SOCK_RAW` socket (non-blocking, close-on-exec) receiving only `ethertype`
/// frames on interface `ifindex`. It is created with protocol 0 (receives nothing) and then
/// bound, so no frame of another interface is ever queued on it.
///
/// # Errors
/// Without CAP_NET_RAW, or a bad interface index.
pub(crate) fn packet_socket(ifindex: u32, ethertype: u16) -> io::Result<OwnedFd> {
    let fd = socket(AddressFamily::Packet, SockType::Raw)?;
    // SAFETY: an all-zero sockaddr_ll is valid; it is then filled field by field.
    let mut sll: libc::sockaddr_ll = unsafe { mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = ethertype.to_be();
    sll.sll_ifindex = c_int::try_from(ifindex)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "interface index too large"))?;
    // SAFETY: `sll` is a live sockaddr_ll and its exact size is passed.
    cvt(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&raw const sll).cast::<libc::sockaddr>(),
            size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    })?;
    Ok(fd)
}

/// Puts the interface in promiscuous mode for as long as the socket lives
/// (`PACKET_ADD_MEMBERSHIP` / `PACKET_MR_PROMISC`; the kernel counts, so it is undone on
/// close and does not disturb others).
///
/// # Errors
/// `setsockopt` failure.
pub(crate) fn packet_add_promisc(fd: BorrowedFd<'_>, ifindex: u32) -> io::Result<()> {
    // SAFETY: an all-zero packet_mreq is valid; it is then filled field by field.
    let mut mreq: libc::packet_mreq = unsafe { mem::zeroed() };
    mreq.mr_ifindex = c_int::try_from(ifindex)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "interface index too large"))?;
    mreq.mr_type = libc::PACKET_MR_PROMISC as u16;
    // SAFETY: the option value points at a live packet_mreq whose size is passed alongside.
    cvt(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_ADD_MEMBERSHIP,
            (&raw const mreq).cast::<c_void>(),
            size_of::<libc::packet_mreq>() as libc::socklen_t,
        )
    })?;
    Ok(())
}

/// Stops the socket from receiving frames sent on the interface by this host
/// (`PACKET_IGNORE_OUTGOING`, Linux 4.20+).
///
/// Belt and braces for a socket bound to one EtherType: the kernel shows outgoing frames
/// only to `ETH_P_ALL` sockets and never loops a socket's own frames back to it; the option
/// matters if the socket is ever bound to `ETH_P_ALL`.
///
/// # Errors
/// `ENOPROTOOPT` on older kernels: filter on
/// [`RecvMode::PacketSkipOutgoing`](super::RecvMode::PacketSkipOutgoing) instead.
pub(crate) fn packet_ignore_outgoing(fd: BorrowedFd<'_>) -> io::Result<()> {
    setsockopt_int(fd, libc::SOL_PACKET, libc::PACKET_IGNORE_OUTGOING, 1)
}

/// Sends straight to the driver, skipping the qdisc layer (`PACKET_QDISC_BYPASS`).
/// Faster on real NICs, but traffic control (tbf, htb) on the interface no longer applies
/// and a full driver queue drops frames instead of queueing them.
///
/// # Errors
/// `setsockopt` failure.
pub(crate) fn packet_qdisc_bypass(fd: BorrowedFd<'_>, on: bool) -> io::Result<()> {
    setsockopt_int(
        fd,
        libc::SOL_PACKET,
        libc::PACKET_QDISC_BYPASS,
        c_int::from(on),
    )
}

/// A plain AF_PACKET socket bound to one interface and one EtherType (`0x0003`, `ETH_P_ALL`,
/// for every frame), non-blocking, close-on-exec; whole Ethernet frames in and out.
///
/// Public for tools and the root integration tests (eve's capture and injection socket in
/// `tests/attacks.rs` and `tests/leakage.rs`, the receive-mode checks in `tests/io_root.rs`),
/// so they carry no `unsafe` of their own. The daemon's uplink is
/// [`RawSocket`](crate::io::raw_eth::RawSocket), which adds promiscuous mode, batching and
/// tokio.
#[derive(Debug)]
pub struct PacketSocket {
    fd: OwnedFd,
}

/// One frame from [`PacketSocket::recv_timeout`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Received {
    /// Bytes of the frame written into the buffer (longer frames are cut to the buffer).
    pub len: usize,
    /// The frame was sent by this host (`PACKET_OUTGOING`); only `ETH_P_ALL` sockets see
    /// those.
    pub outgoing: bool,
}

impl PacketSocket {
    /// Opens the socket on interface `ifname` of the calling thread's network namespace (it
    /// stays bound to that interface when used from other threads).
    ///
    /// # Errors
    /// Unknown interface, or no CAP_NET_RAW.
    pub fn open(ifname: &str, ethertype: u16) -> io::Result<Self> {
        Self::open_index(if_index(ifname)?, ethertype)
    }

    /// Like [`open`](Self::open), by interface index.
    ///
    /// # Errors
    /// Bad index, or no CAP_NET_RAW.
    pub fn open_index(ifindex: u32, ethertype: u16) -> io::Result<Self> {
        Ok(Self {
            fd: packet_socket(ifindex, ethertype)?,
        })
    }

    /// Sends one whole Ethernet frame (destination, source, EtherType, body); returns the
    /// bytes sent.
    ///
    /// # Errors
    /// `WouldBlock` when the socket buffer is full; other socket errors.
    pub fn send(&self, frame: &[u8]) -> io::Result<usize> {
        Ok(socket::send(
            self.fd.as_raw_fd(),
            frame,
            MsgFlags::MSG_DONTWAIT,
        )?)
    }

    /// Waits up to `timeout` for a frame and receives it into `buf`; `Ok(None)` when none
    /// came in time.
    ///
    /// # Errors
    /// `poll` or `recvfrom` errors (a pending socket error is reported, and cleared, here).
    pub fn recv_timeout(&self, buf: &mut [u8], timeout: Duration) -> io::Result<Option<Received>> {
        let ms = u16::try_from(timeout.as_millis()).unwrap_or(u16::MAX);
        let mut fds = [PollFd::new(self.fd.as_fd(), PollFlags::POLLIN)];
        if poll(&mut fds, PollTimeout::from(ms))? == 0 {
            return Ok(None);
        }
        match socket::recvfrom::<LinkAddr>(self.fd.as_raw_fd(), buf) {
            Ok((len, from)) => Ok(Some(Received {
                len,
                outgoing: from.is_some_and(|a| a.pkttype() == libc::PACKET_OUTGOING),
            })),
            Err(nix::Error::EAGAIN) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Asks for `bytes` of receive and send buffer (forcing past `rmem_max` as root); returns
    /// the sizes the kernel reports.
    pub fn set_buffer_sizes(&self, bytes: usize) -> (usize, usize) {
        set_buffer_sizes(self.fd.as_fd(), bytes)
    }
}

impl AsFd for PacketSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl From<PacketSocket> for OwnedFd {
    fn from(s: PacketSocket) -> Self {
        s.fd
    }
}
