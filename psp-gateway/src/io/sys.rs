//! The one module with `unsafe`: ioctls, AF_PACKET, `recvmmsg`/`sendmmsg`, privilege drop.
//! Every `unsafe` block carries a `// SAFETY:` comment.
//!
//! Each function is a thin, synchronous wrapper over one or a few libc calls on non-blocking
//! descriptors. Readiness (tokio), retry and drop policy live in the safe callers
//! ([`super::tap`], [`super::raw_eth`], [`super::udp`], [`super::notify`]). Linux only.

use core::ffi::CStr;
use core::ffi::{c_char, c_int, c_uint, c_ulong, c_void};
use core::mem;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use core::ptr;
use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use tokio::io::unix::AsyncFd;
use tun_tap::Iface;

use super::batch::{Batch, SLOT_LEN};

/// The PSP EtherType.
pub const ETH_P_PSP: u16 = 0x1982;

/// Messages per `recvmmsg`/`sendmmsg` call: the headers live in stack arrays of this size
/// (about 13 KiB), so no call allocates.
pub const MMSG_CHUNK: usize = 64;

const CHUNK: usize = MMSG_CHUNK;

/// Longest interface name the kernel accepts (`IFNAMSIZ` minus the NUL).
pub const IFNAME_MAX: usize = libc::IFNAMSIZ - 1;

/// Maps a `-1` return to the thread's `errno`.
fn cvt(r: c_int) -> io::Result<c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// Checks an interface name: 1 to 15 bytes, no NUL, no `/`, not `.` or `..`.
///
/// # Errors
/// `InvalidInput` naming the problem.
pub fn check_ifname(name: &str) -> io::Result<()> {
    let b = name.as_bytes();
    if b.is_empty() || b.len() > IFNAME_MAX || b.contains(&0) || b.contains(&b'/') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("bad interface name {name:?}: 1 to {IFNAME_MAX} bytes, no NUL or '/'"),
        ));
    }
    if name == "." || name == ".." || b.iter().any(u8::is_ascii_whitespace) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("bad interface name {name:?}"),
        ));
    }
    Ok(())
}

/// Adds the interface name to an error (`name: error`), keeping its kind.
fn ctx(name: &str, what: &str, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{what} {name}: {e}"))
}

// ---------------------------------------------------------------------------------------------
// File descriptors

/// Puts the descriptor of `fd` (e.g. a `tun_tap::Iface`, which offers only `AsRawFd`) in
/// non-blocking mode (`O_NONBLOCK`).
///
/// # Errors
/// `fcntl` failure.
pub fn set_nonblocking(fd: &impl AsRawFd) -> io::Result<()> {
    // SAFETY: F_GETFL takes no pointer argument; `fd` owns a live descriptor and is borrowed
    // for the duration of both calls.
    let flags = cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) })?;
    if flags & libc::O_NONBLOCK == 0 {
        // SAFETY: F_SETFL takes an integer argument; `fd` is live.
        cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK) })?;
    }
    Ok(())
}

/// Registers a descriptor with the current tokio runtime's reactor (`AsyncFd::register`).
///
/// # Errors
/// No reactor, or `epoll_ctl` failure.
///
/// # Panics
/// Outside a tokio runtime with I/O enabled.
pub fn register_fd(fd: OwnedFd) -> io::Result<AsyncFd<OwnedFd>> {
    // SAFETY: an OwnedFd owns its open descriptor until dropped and always returns the same
    // one from as_raw_fd; we never swap it out through `AsyncFd::get_mut`.
    Ok(unsafe { AsyncFd::register(fd) }?)
}

/// Registers a TAP with the current tokio runtime's reactor (`AsyncFd::register`).
///
/// # Errors
/// No reactor, or `epoll_ctl` failure.
///
/// # Panics
/// Outside a tokio runtime with I/O enabled.
pub fn register_tap(iface: Iface) -> io::Result<AsyncFd<Iface>> {
    // SAFETY: an Iface owns its `/dev/net/tun` File (a private field) until dropped and
    // always returns that File's descriptor from as_raw_fd; we never replace it through
    // `AsyncFd::get_mut`.
    Ok(unsafe { AsyncFd::register(iface) }?)
}

/// A new socket, close-on-exec and non-blocking.
fn socket(domain: c_int, ty: c_int, protocol: c_int) -> io::Result<OwnedFd> {
    // SAFETY: socket() takes no pointers.
    let fd = cvt(unsafe {
        libc::socket(
            domain,
            ty | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
            protocol,
        )
    })?;
    // SAFETY: `fd` was just returned by socket(), is open, and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Sets an integer socket option.
///
/// # Errors
/// `setsockopt` failure (e.g. `ENOPROTOOPT` on kernels without the option).
pub fn setsockopt_int(
    fd: BorrowedFd<'_>,
    level: c_int,
    name: c_int,
    value: c_int,
) -> io::Result<()> {
    // SAFETY: the option value points at a live c_int whose size is passed alongside.
    cvt(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&raw const value).cast::<c_void>(),
            size_of::<c_int>() as libc::socklen_t,
        )
    })?;
    Ok(())
}

/// Reads an integer socket option.
///
/// # Errors
/// `getsockopt` failure.
pub fn getsockopt_int(fd: BorrowedFd<'_>, level: c_int, name: c_int) -> io::Result<c_int> {
    let mut value: c_int = 0;
    let mut len = size_of::<c_int>() as libc::socklen_t;
    // SAFETY: value and len are live locals; len holds value's size.
    cvt(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&raw mut value).cast(),
            &raw mut len,
        )
    })?;
    Ok(value)
}

/// Asks for `bytes` of receive and send buffer: `SO_RCVBUFFORCE`/`SO_SNDBUFFORCE` (which pass
/// `net.core.rmem_max`, needing CAP_NET_ADMIN), falling back to the capped `SO_RCVBUF`/
/// `SO_SNDBUF`. Best effort: returns the receive and send sizes the kernel reports.
pub fn set_buffer_sizes(fd: BorrowedFd<'_>, bytes: usize) -> (usize, usize) {
    let v = c_int::try_from(bytes).unwrap_or(c_int::MAX);
    for (force, plain) in [
        (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF),
        (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF),
    ] {
        if setsockopt_int(fd, libc::SOL_SOCKET, force, v).is_err() {
            // Without CAP_NET_ADMIN: the kernel caps this at rmem_max/wmem_max.
            let _ = setsockopt_int(fd, libc::SOL_SOCKET, plain, v);
        }
    }
    let get = |opt| {
        getsockopt_int(fd, libc::SOL_SOCKET, opt).map_or(0, |n| usize::try_from(n).unwrap_or(0))
    };
    (get(libc::SO_RCVBUF), get(libc::SO_SNDBUF))
}

// ---------------------------------------------------------------------------------------------
// Interface ioctls

/// An `ifreq` naming `name`, the rest zero.
fn ifreq(name: &str) -> io::Result<libc::ifreq> {
    check_ifname(name)?;
    // SAFETY: ifreq is a C struct of a char array and a union of integers, sockaddrs and a
    // pointer; all-zero bytes are a valid value of each.
    let mut req: libc::ifreq = unsafe { mem::zeroed() };
    for (d, s) in req.ifr_name.iter_mut().zip(name.as_bytes()) {
        *d = *s as c_char;
    }
    Ok(req)
}

/// A socket for interface ioctls: AF_INET, or AF_PACKET / AF_UNIX where IPv4 is unavailable
/// (netdevice ioctls work on any of them).
fn control_socket() -> io::Result<OwnedFd> {
    let mut last = io::Error::from_raw_os_error(libc::EAFNOSUPPORT);
    for domain in [libc::AF_INET, libc::AF_PACKET, libc::AF_UNIX] {
        match socket(domain, libc::SOCK_DGRAM, 0) {
            Ok(fd) => return Ok(fd),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Runs one `SIOC*IF*` ioctl on `req`.
fn ifreq_ioctl(request: c_ulong, req: &mut libc::ifreq) -> io::Result<()> {
    let sock = control_socket()?;
    // SAFETY: every request used here (SIOC[GS]IF{MTU,HWADDR,FLAGS}) reads and/or writes
    // exactly one `struct ifreq`, and `req` is a valid, exclusively borrowed ifreq; for
    // SIOCETHTOOL the caller points `ifru_data` at a live buffer of the command's size.
    cvt(unsafe { libc::ioctl(sock.as_raw_fd(), request, ptr::from_mut(req)) })?;
    Ok(())
}

/// The MTU of interface `name` (`SIOCGIFMTU`).
///
/// # Errors
/// Unknown interface or ioctl failure.
pub fn if_mtu(name: &str) -> io::Result<usize> {
    let mut req = ifreq(name)?;
    ifreq_ioctl(libc::SIOCGIFMTU, &mut req).map_err(|e| ctx(name, "MTU of", e))?;
    // SAFETY: SIOCGIFMTU filled the `ifru_mtu` member of the union.
    let mtu = unsafe { req.ifr_ifru.ifru_mtu };
    usize::try_from(mtu).map_err(|_| io::Error::other(format!("MTU of {name}: {mtu}")))
}

/// Sets the MTU of interface `name` (`SIOCSIFMTU`).
///
/// # Errors
/// Unknown interface, MTU out of the device's range, or no CAP_NET_ADMIN.
pub fn set_if_mtu(name: &str, mtu: usize) -> io::Result<()> {
    let mut req = ifreq(name)?;
    req.ifr_ifru.ifru_mtu = c_int::try_from(mtu)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, format!("MTU {mtu} too large")))?;
    ifreq_ioctl(libc::SIOCSIFMTU, &mut req).map_err(|e| ctx(name, &format!("set MTU {mtu} on"), e))
}

/// The hardware (MAC) address of interface `name` (`SIOCGIFHWADDR`).
///
/// # Errors
/// Unknown interface or ioctl failure.
pub fn if_mac(name: &str) -> io::Result<[u8; 6]> {
    let mut req = ifreq(name)?;
    ifreq_ioctl(libc::SIOCGIFHWADDR, &mut req).map_err(|e| ctx(name, "MAC of", e))?;
    // SAFETY: SIOCGIFHWADDR filled the `ifru_hwaddr` member of the union.
    let sa = unsafe { req.ifr_ifru.ifru_hwaddr };
    let mut mac = [0; 6];
    for (d, s) in mac.iter_mut().zip(sa.sa_data) {
        *d = s as u8;
    }
    Ok(mac)
}

/// Sets the hardware (MAC) address of Ethernet interface `name` (`SIOCSIFHWADDR`).
///
/// # Errors
/// Unknown interface, a multicast address, or no CAP_NET_ADMIN.
pub fn set_if_mac(name: &str, mac: [u8; 6]) -> io::Result<()> {
    let mut req = ifreq(name)?;
    // SAFETY: an all-zero sockaddr is valid; it is then filled field by field.
    let mut sa: libc::sockaddr = unsafe { mem::zeroed() };
    sa.sa_family = libc::ARPHRD_ETHER;
    for (d, s) in sa.sa_data.iter_mut().zip(mac) {
        *d = s as c_char;
    }
    req.ifr_ifru.ifru_hwaddr = sa;
    ifreq_ioctl(libc::SIOCSIFHWADDR, &mut req).map_err(|e| ctx(name, "set MAC on", e))
}

/// The interface flags of `name` (`SIOCGIFFLAGS`, `IFF_*`).
///
/// # Errors
/// Unknown interface or ioctl failure.
pub fn if_flags(name: &str) -> io::Result<u32> {
    let mut req = ifreq(name)?;
    ifreq_ioctl(libc::SIOCGIFFLAGS, &mut req).map_err(|e| ctx(name, "flags of", e))?;
    // SAFETY: SIOCGIFFLAGS filled the `ifru_flags` member of the union.
    let flags = unsafe { req.ifr_ifru.ifru_flags };
    Ok(u32::from(flags as u16))
}

/// Brings interface `name` up (`SIOCGIFFLAGS`, then `SIOCSIFFLAGS` with `IFF_UP` added).
///
/// # Errors
/// Unknown interface or no CAP_NET_ADMIN.
pub fn set_if_up(name: &str) -> io::Result<()> {
    let mut req = ifreq(name)?;
    ifreq_ioctl(libc::SIOCGIFFLAGS, &mut req).map_err(|e| ctx(name, "flags of", e))?;
    // SAFETY: SIOCGIFFLAGS filled the `ifru_flags` member of the union.
    let flags = unsafe { req.ifr_ifru.ifru_flags };
    req.ifr_ifru.ifru_flags = flags | libc::IFF_UP as libc::c_short;
    ifreq_ioctl(libc::SIOCSIFFLAGS, &mut req).map_err(|e| ctx(name, "bring up", e))
}

/// The index of interface `name`.
///
/// # Errors
/// `NotFound` when there is no such interface.
pub fn if_index(name: &str) -> io::Result<u32> {
    check_ifname(name)?;
    let c = CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `c` is a NUL-terminated string that outlives the call.
    let index = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if index == 0 {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("no interface {name}"),
        ));
    }
    Ok(index)
}

/// `struct ethtool_drvinfo` from `<linux/ethtool.h>` (not in the libc crate).
#[repr(C)]
struct EthtoolDrvinfo {
    cmd: u32,
    driver: [u8; 32],
    version: [u8; 32],
    fw_version: [u8; 32],
    bus_info: [u8; 32],
    erom_version: [u8; 32],
    reserved2: [u8; 12],
    n_priv_flags: u32,
    n_stats: u32,
    testinfo_len: u32,
    eedump_len: u32,
    regdump_len: u32,
}

/// `ETHTOOL_GDRVINFO` from `<linux/ethtool.h>`.
const ETHTOOL_GDRVINFO: u32 = 0x0000_0003;

/// The driver name of interface `name` (`SIOCETHTOOL`/`ETHTOOL_GDRVINFO`): `"tun"` for TUN
/// and TAP devices, `"veth"`, `"e1000e"`, ….
///
/// # Errors
/// Unknown interface, or a device without driver information (`EOPNOTSUPP`, e.g. `lo`).
pub fn if_driver(name: &str) -> io::Result<String> {
    let mut req = ifreq(name)?;
    // SAFETY: EthtoolDrvinfo is plain integers and byte arrays; all-zero is valid.
    let mut info: EthtoolDrvinfo = unsafe { mem::zeroed() };
    info.cmd = ETHTOOL_GDRVINFO;
    req.ifr_ifru.ifru_data = (&raw mut info).cast();
    // SIOCETHTOOL with ETHTOOL_GDRVINFO writes one ethtool_drvinfo (whose layout
    // EthtoolDrvinfo mirrors) through ifru_data, which points at the live local `info`.
    ifreq_ioctl(libc::SIOCETHTOOL, &mut req).map_err(|e| ctx(name, "driver of", e))?;
    let end = info
        .driver
        .iter()
        .position(|&b| b == 0)
        .unwrap_or(info.driver.len());
    Ok(String::from_utf8_lossy(&info.driver[..end]).into_owned())
}

// ---------------------------------------------------------------------------------------------
// TAP devices

/// Opens `/dev/net/tun` and attaches it to the TAP interface `name` (created if missing; an
/// empty name or one with `%d` lets the kernel pick) with `IFF_TAP | IFF_NO_PI`, plus
/// `IFF_VNET_HDR` when `vnet_hdr` (every read and write then starts with a
/// `struct virtio_net_hdr`). Returns the descriptor, close-on-exec, and the interface name.
///
/// # Errors
/// No `/dev/net/tun`, no CAP_NET_ADMIN, a bad name, or `TUNSETIFF` failure.
pub fn open_tap(name: &str, vnet_hdr: bool) -> io::Result<(File, String)> {
    if !name.is_empty() {
        check_ifname(name)?;
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/net/tun")?;
    // SAFETY: ifreq is a C struct of a char array and a union of integers, sockaddrs and a
    // pointer; all-zero bytes are a valid value of each.
    let mut req: libc::ifreq = unsafe { mem::zeroed() };
    for (d, s) in req.ifr_name.iter_mut().zip(name.as_bytes()) {
        *d = *s as c_char;
    }
    let mut flags = libc::IFF_TAP | libc::IFF_NO_PI;
    if vnet_hdr {
        flags |= libc::IFF_VNET_HDR;
    }
    // The IFF_* TUN flags fit the 16-bit field.
    req.ifr_ifru.ifru_flags = flags as libc::c_short;
    // SAFETY: TUNSETIFF reads and writes one `struct ifreq`; `req` is a valid, exclusively
    // borrowed ifreq and `file` a live descriptor.
    cvt(unsafe { libc::ioctl(file.as_raw_fd(), libc::TUNSETIFF, ptr::from_mut(&mut req)) })?;
    let end = req
        .ifr_name
        .iter()
        .position(|&c| c == 0)
        .unwrap_or(req.ifr_name.len());
    let got: Vec<u8> = req.ifr_name[..end].iter().map(|&c| c as u8).collect();
    Ok((file, String::from_utf8_lossy(&got).into_owned()))
}

/// Registers an open file (a TAP from [`open_tap`]) with the current tokio runtime's reactor.
///
/// # Errors
/// No reactor, or `epoll_ctl` failure.
///
/// # Panics
/// Outside a tokio runtime with I/O enabled.
pub fn register_file(file: File) -> io::Result<AsyncFd<File>> {
    // SAFETY: a File owns its open descriptor until dropped and always returns the same one
    // from as_raw_fd; we never replace it through `AsyncFd::get_mut`.
    Ok(unsafe { AsyncFd::register(file) }?)
}

/// Sets the virtio-net header length of a TAP opened with `IFF_VNET_HDR`
/// (`TUNSETVNETHDRSZ`).
///
/// # Errors
/// `EINVAL` for a length under 10.
pub fn tap_set_vnet_hdr_len(fd: BorrowedFd<'_>, len: usize) -> io::Result<()> {
    let len = c_int::try_from(len).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: TUNSETVNETHDRSZ reads one int through the pointer, which points at `len`.
    cvt(unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETVNETHDRSZ, &raw const len) })?;
    Ok(())
}

/// Tells the TAP which offloads its reader handles (`TUNSETOFFLOAD`, `TUN_F_*` flags): the
/// kernel may then hand it partial checksums (`TUN_F_CSUM`) and TCP super-frames
/// (`TUN_F_TSO4`, `TUN_F_TSO6`, `TUN_F_TSO_ECN`).
///
/// # Errors
/// `EINVAL` when the kernel does not know a flag (or TSO without CSUM).
pub fn tap_set_offload(fd: BorrowedFd<'_>, flags: c_uint) -> io::Result<()> {
    // SAFETY: TUNSETOFFLOAD takes its argument by value (an unsigned long), no pointer.
    cvt(unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETOFFLOAD, c_ulong::from(flags)) })?;
    Ok(())
}

/// One address of one interface, from `getifaddrs`.
#[derive(Debug, Clone)]
pub struct IfAddr {
    /// Interface name.
    pub name: String,
    /// `IFF_*` flags.
    pub flags: u32,
    /// The IPv4 or IPv6 address, if this entry has one (AF_PACKET entries do not).
    pub ip: Option<IpAddr>,
}

/// Every interface address of the host (`getifaddrs`), including one address-less entry per
/// interface (AF_PACKET). Allocates; not for hot paths.
///
/// # Errors
/// `getifaddrs` failure.
pub fn interfaces() -> io::Result<Vec<IfAddr>> {
    let mut head: *mut libc::ifaddrs = ptr::null_mut();
    // SAFETY: `head` is a valid out-pointer; on success it owns a list freed below.
    cvt(unsafe { libc::getifaddrs(&raw mut head) })?;
    let mut out = Vec::new();
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list getifaddrs returned, not yet freed.
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        if ifa.ifa_name.is_null() {
            continue;
        }
        // SAFETY: ifa_name is a NUL-terminated string owned by the list.
        let name = unsafe { CStr::from_ptr(ifa.ifa_name) }
            .to_string_lossy()
            .into_owned();
        let ip = if ifa.ifa_addr.is_null() {
            None
        } else {
            // SAFETY: ifa_addr points at a sockaddr whose family field is always readable;
            // `sockaddr_to_ip` reads the longer sockaddr_in/_in6 only when the family says so.
            unsafe { sockaddr_ptr_to_ip(ifa.ifa_addr) }
        };
        out.push(IfAddr {
            name,
            flags: ifa.ifa_flags,
            ip,
        });
    }
    // SAFETY: `head` came from getifaddrs and is freed once; no reference into it survives.
    unsafe { libc::freeifaddrs(head) };
    Ok(out)
}

/// The IP of a sockaddr of any family (`None` unless AF_INET/AF_INET6).
///
/// # Safety
/// `sa` must point at a valid sockaddr whose actual size fits its `sa_family`.
unsafe fn sockaddr_ptr_to_ip(sa: *const libc::sockaddr) -> Option<IpAddr> {
    // SAFETY: the caller guarantees `sa` is valid; the family is in every sockaddr.
    match c_int::from(unsafe { (*sa).sa_family }) {
        libc::AF_INET => {
            // SAFETY: an AF_INET sockaddr is a sockaddr_in (caller's guarantee).
            let sin = unsafe { ptr::read_unaligned(sa.cast::<libc::sockaddr_in>()) };
            Some(IpAddr::V4(Ipv4Addr::from(
                sin.sin_addr.s_addr.to_ne_bytes(),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: an AF_INET6 sockaddr is a sockaddr_in6 (caller's guarantee).
            let sin6 = unsafe { ptr::read_unaligned(sa.cast::<libc::sockaddr_in6>()) };
            Some(IpAddr::V6(Ipv6Addr::from(sin6.sin6_addr.s6_addr)))
        }
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------------
// AF_PACKET

/// An AF_PACKET `SOCK_RAW` socket (non-blocking, close-on-exec) receiving only `ethertype`
/// frames on interface `ifindex`. It is created with protocol 0 (receives nothing) and then
/// bound, so no frame of another interface is ever queued on it.
///
/// # Errors
/// Without CAP_NET_RAW, or a bad interface index.
pub fn packet_socket(ifindex: u32, ethertype: u16) -> io::Result<OwnedFd> {
    let fd = socket(libc::AF_PACKET, libc::SOCK_RAW, 0)?;
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
pub fn packet_add_promisc(fd: BorrowedFd<'_>, ifindex: u32) -> io::Result<()> {
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
/// `ENOPROTOOPT` on older kernels: filter on [`RecvMode::PacketSkipOutgoing`] instead.
pub fn packet_ignore_outgoing(fd: BorrowedFd<'_>) -> io::Result<()> {
    setsockopt_int(fd, libc::SOL_PACKET, libc::PACKET_IGNORE_OUTGOING, 1)
}

/// Sends straight to the driver, skipping the qdisc layer (`PACKET_QDISC_BYPASS`).
/// Faster on real NICs, but traffic control (tbf, htb) on the interface no longer applies
/// and a full driver queue drops frames instead of queueing them.
///
/// # Errors
/// `setsockopt` failure.
pub fn packet_qdisc_bypass(fd: BorrowedFd<'_>, on: bool) -> io::Result<()> {
    setsockopt_int(
        fd,
        libc::SOL_PACKET,
        libc::PACKET_QDISC_BYPASS,
        c_int::from(on),
    )
}

// ---------------------------------------------------------------------------------------------
// Batched receive and send

/// What [`recv_mmsg`] does with each message's source address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RecvMode {
    /// Ignore it (AF_PACKET on kernels with `PACKET_IGNORE_OUTGOING`; TAP-like fds).
    Plain,
    /// AF_PACKET without `PACKET_IGNORE_OUTGOING`: drop frames whose `sll_pkttype` is
    /// `PACKET_OUTGOING` (our own transmissions).
    PacketSkipOutgoing,
    /// UDP: store each source as the slot's address (v4-mapped IPv6 sources become IPv4).
    Inet,
}

/// Receives up to `min(free slots, 64)` messages with one `recvmmsg(MSG_DONTWAIT)`, one
/// message per free slot of `batch` (each a whole [`SLOT_LEN`] buffer), and appends the kept
/// ones. Truncated messages (longer than a slot) and, with
/// [`RecvMode::PacketSkipOutgoing`], our own frames are dropped (later frames move down).
///
/// Returns `(received, kept)`: messages the kernel delivered (≥ 1, or 0 when the batch is
/// already full) and how many of them were appended.
///
/// # Errors
/// `WouldBlock` when nothing is queued; other socket errors.
pub fn recv_mmsg(
    fd: BorrowedFd<'_>,
    batch: &mut Batch,
    mode: RecvMode,
) -> io::Result<(usize, usize)> {
    let start = batch.len();
    let want = (batch.capacity() - start).min(CHUNK);
    if want == 0 {
        return Ok((0, 0));
    }
    // SAFETY: iovec, mmsghdr and sockaddr_storage are C structs of integers and raw
    // pointers; all-zero (null pointers, zero lengths) is a valid value of each.
    let (mut iovs, mut hdrs, mut names): (
        [libc::iovec; CHUNK],
        [libc::mmsghdr; CHUNK],
        [libc::sockaddr_storage; CHUNK],
    ) = unsafe { (mem::zeroed(), mem::zeroed(), mem::zeroed()) };
    for (iov, slot) in iovs
        .iter_mut()
        .zip(batch.slots_mut().skip(start).take(want))
    {
        iov.iov_base = slot.as_mut_ptr().cast();
        iov.iov_len = slot.len();
    }
    let with_names = mode != RecvMode::Plain;
    for ((h, iov), name) in hdrs
        .iter_mut()
        .zip(iovs.iter_mut())
        .zip(names.iter_mut())
        .take(want)
    {
        h.msg_hdr.msg_iov = iov;
        h.msg_hdr.msg_iovlen = 1;
        if with_names {
            h.msg_hdr.msg_name = ptr::from_mut(name).cast();
            h.msg_hdr.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        }
    }
    // SAFETY: hdrs[..want] each point at one iovec covering a distinct SLOT_LEN-byte slot of
    // `batch` (exclusively borrowed by this function; the pointers are not used after the
    // call) and, if set, at a distinct sockaddr_storage whose size is in msg_namelen. All of
    // these locals outlive the call; `want` ≤ CHUNK = hdrs.len().
    let n = unsafe {
        libc::recvmmsg(
            fd.as_raw_fd(),
            hdrs.as_mut_ptr(),
            want as c_uint,
            libc::MSG_DONTWAIT,
            ptr::null_mut(),
        )
    };
    let n = usize::try_from(cvt(n)?).unwrap_or(0).min(want);
    let mut kept = 0;
    for (k, (h, name)) in hdrs.iter().zip(names.iter()).take(n).enumerate() {
        if h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0 {
            continue;
        }
        let addr = match mode {
            RecvMode::Plain => None,
            RecvMode::PacketSkipOutgoing => {
                // SAFETY: for AF_PACKET the kernel stored a sockaddr_ll in this storage,
                // which is larger and at least as aligned.
                let sll = unsafe { &*ptr::from_ref(name).cast::<libc::sockaddr_ll>() };
                if sll.sll_pkttype == libc::PACKET_OUTGOING {
                    continue;
                }
                None
            }
            RecvMode::Inet => storage_to_socketaddr(name, h.msg_hdr.msg_namelen),
        };
        let (from, to) = (start + k, start + kept);
        let len = (h.msg_len as usize).min(SLOT_LEN);
        if from != to {
            batch.move_slot(from, to, len);
        }
        batch.set_frame_len(to, len);
        batch.set_addr(to, addr);
        kept += 1;
    }
    batch.set_len(start + kept);
    Ok((n, kept))
}

/// How [`send_mmsg`] addresses each message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SendMode {
    /// No address: the socket is bound (AF_PACKET: interface and protocol from `bind`).
    Bound,
    /// UDP: each frame to its slot address; frames without one, or with one the socket's
    /// family cannot reach (IPv6 on an IPv4 socket), are skipped. `v6_socket`: IPv4
    /// destinations are sent as v4-mapped IPv6.
    Inet {
        /// The socket is AF_INET6.
        v6_socket: bool,
    },
}

/// Progress of one [`send_mmsg`] call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SendProgress {
    /// Messages the kernel accepted.
    pub sent: usize,
    /// Index of the first frame not yet handled (sent or skipped); `batch.len()` when done.
    pub next: usize,
}

/// A failed [`send_mmsg`] call: nothing was sent and frame `at` is the one that failed.
#[derive(Debug)]
pub struct SendError {
    /// Index of the frame the error belongs to (the first sendable one from `from`).
    pub at: usize,
    /// The error.
    pub error: io::Error,
}

/// Sends frames `from..` of `batch` (up to 64) with one `sendmmsg(MSG_DONTWAIT)`.
///
/// # Errors
/// The first message's error (`WouldBlock`, `ENOBUFS`, `EMSGSIZE`, …), with its index.
pub fn send_mmsg(
    fd: BorrowedFd<'_>,
    batch: &Batch,
    from: usize,
    mode: SendMode,
) -> Result<SendProgress, SendError> {
    // SAFETY: as in recv_mmsg, all-zero is a valid value of these C structs.
    let (mut iovs, mut hdrs, mut names): (
        [libc::iovec; CHUNK],
        [libc::mmsghdr; CHUNK],
        [libc::sockaddr_storage; CHUNK],
    ) = unsafe { (mem::zeroed(), mem::zeroed(), mem::zeroed()) };
    let mut index = [0usize; CHUNK];
    let mut m = 0;
    let mut i = from;
    while i < batch.len() && m < CHUNK {
        let namelen = match mode {
            SendMode::Bound => 0,
            SendMode::Inet { v6_socket } => {
                match batch
                    .addr(i)
                    .and_then(|a| socketaddr_to_storage(a, v6_socket, &mut names[m]))
                {
                    Some(len) => len,
                    None => {
                        i += 1;
                        continue;
                    }
                }
            }
        };
        let frame = batch.frame(i);
        // sendmmsg only reads through iov_base; the pointer is *mut by the C declaration.
        iovs[m].iov_base = frame.as_ptr().cast_mut().cast();
        iovs[m].iov_len = frame.len();
        hdrs[m].msg_hdr.msg_namelen = namelen;
        index[m] = i;
        m += 1;
        i += 1;
    }
    if m == 0 {
        return Ok(SendProgress {
            sent: 0,
            next: batch.len(),
        });
    }
    for ((h, iov), name) in hdrs
        .iter_mut()
        .zip(iovs.iter_mut())
        .zip(names.iter_mut())
        .take(m)
    {
        h.msg_hdr.msg_iov = iov;
        h.msg_hdr.msg_iovlen = 1;
        if h.msg_hdr.msg_namelen != 0 {
            h.msg_hdr.msg_name = ptr::from_mut(name).cast();
        }
    }
    // SAFETY: hdrs[..m] each point at one iovec covering a frame of `batch` (borrowed for
    // this call; the kernel only reads it) and, when msg_namelen ≠ 0, at an initialised
    // sockaddr of that length. All of these locals outlive the call; m ≤ CHUNK = hdrs.len().
    let r = unsafe {
        libc::sendmmsg(
            fd.as_raw_fd(),
            hdrs.as_mut_ptr(),
            m as c_uint,
            libc::MSG_DONTWAIT,
        )
    };
    match cvt(r) {
        Err(error) => Err(SendError {
            at: index[0],
            error,
        }),
        Ok(sent) => {
            let sent = usize::try_from(sent).unwrap_or(0).min(m);
            let next = if sent < m { index[sent] } else { i };
            Ok(SendProgress { sent, next })
        }
    }
}

/// The socket address in `s` (`None` unless AF_INET/AF_INET6); v4-mapped IPv6 addresses
/// come back as IPv4.
fn storage_to_socketaddr(s: &libc::sockaddr_storage, len: libc::socklen_t) -> Option<SocketAddr> {
    let len = len as usize;
    match c_int::from(s.ss_family) {
        libc::AF_INET if len >= size_of::<libc::sockaddr_in>() => {
            // SAFETY: the family says the storage (larger, at least as aligned) holds a
            // sockaddr_in, and the kernel wrote at least its size.
            let sin = unsafe { &*ptr::from_ref(s).cast::<libc::sockaddr_in>() };
            Some(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes()),
                u16::from_be(sin.sin_port),
            )))
        }
        libc::AF_INET6 if len >= size_of::<libc::sockaddr_in6>() => {
            // SAFETY: as above, for sockaddr_in6.
            let sin6 = unsafe { &*ptr::from_ref(s).cast::<libc::sockaddr_in6>() };
            let ip = Ipv6Addr::from(sin6.sin6_addr.s6_addr);
            let port = u16::from_be(sin6.sin6_port);
            Some(match ip.to_ipv4_mapped() {
                Some(v4) => SocketAddr::V4(SocketAddrV4::new(v4, port)),
                None => SocketAddr::V6(SocketAddrV6::new(
                    ip,
                    port,
                    sin6.sin6_flowinfo,
                    sin6.sin6_scope_id,
                )),
            })
        }
        _ => None,
    }
}

/// Writes `addr` into `out` for a socket of the given family; returns the length, or `None`
/// when that socket cannot reach it (IPv6 on an IPv4 socket).
fn socketaddr_to_storage(
    addr: SocketAddr,
    v6_socket: bool,
    out: &mut libc::sockaddr_storage,
) -> Option<libc::socklen_t> {
    let v6 = match (addr, v6_socket) {
        (SocketAddr::V4(a), false) => {
            // SAFETY: an all-zero sockaddr_in is valid; it is then filled field by field.
            let mut sin: libc::sockaddr_in = unsafe { mem::zeroed() };
            sin.sin_family = libc::AF_INET as libc::sa_family_t;
            sin.sin_port = a.port().to_be();
            sin.sin_addr.s_addr = u32::from_ne_bytes(a.ip().octets());
            // SAFETY: sockaddr_storage is larger than and at least as aligned as sockaddr_in.
            unsafe { ptr::from_mut(out).cast::<libc::sockaddr_in>().write(sin) };
            return Some(size_of::<libc::sockaddr_in>() as libc::socklen_t);
        }
        (SocketAddr::V4(a), true) => SocketAddrV6::new(a.ip().to_ipv6_mapped(), a.port(), 0, 0),
        (SocketAddr::V6(a), true) => a,
        (SocketAddr::V6(a), false) => {
            let v4 = a.ip().to_ipv4_mapped()?;
            return socketaddr_to_storage(
                SocketAddr::V4(SocketAddrV4::new(v4, a.port())),
                false,
                out,
            );
        }
    };
    // SAFETY: an all-zero sockaddr_in6 is valid; it is then filled field by field.
    let mut sin6: libc::sockaddr_in6 = unsafe { mem::zeroed() };
    sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
    sin6.sin6_port = v6.port().to_be();
    sin6.sin6_flowinfo = v6.flowinfo();
    sin6.sin6_addr.s6_addr = v6.ip().octets();
    sin6.sin6_scope_id = v6.scope_id();
    // SAFETY: sockaddr_storage is larger than and at least as aligned as sockaddr_in6.
    unsafe { ptr::from_mut(out).cast::<libc::sockaddr_in6>().write(sin6) };
    Some(size_of::<libc::sockaddr_in6>() as libc::socklen_t)
}

// ---------------------------------------------------------------------------------------------
// Users, privileges, namespaces

/// The uid and primary gid of user `name` (`getpwnam_r`).
///
/// # Errors
/// `NotFound` for an unknown user; lookup failures.
pub fn lookup_user(name: &str) -> io::Result<(u32, u32)> {
    let c = CString::new(name).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("bad user name {name:?}"),
        )
    })?;
    let mut buf: Vec<u8> = vec![0; 1024];
    loop {
        // SAFETY: an all-zero passwd (null pointers, zero ids) is a valid value.
        let mut pwd: libc::passwd = unsafe { mem::zeroed() };
        let mut result: *mut libc::passwd = ptr::null_mut();
        // SAFETY: every pointer is to a live local; `buf` has the length passed; the strings
        // getpwnam_r stores in `pwd` point into `buf`, which we do not read.
        let rc = unsafe {
            libc::getpwnam_r(
                c.as_ptr(),
                &raw mut pwd,
                buf.as_mut_ptr().cast(),
                buf.len(),
                &raw mut result,
            )
        };
        if rc == libc::ERANGE && buf.len() < 1 << 20 {
            buf.resize(buf.len() * 4, 0);
            continue;
        }
        if rc != 0 {
            return Err(io::Error::new(
                io::Error::from_raw_os_error(rc).kind(),
                format!(
                    "looking up user {name}: {}",
                    io::Error::from_raw_os_error(rc)
                ),
            ));
        }
        if result.is_null() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("no user {name}"),
            ));
        }
        return Ok((pwd.pw_uid, pwd.pw_gid));
    }
}

/// Switches the whole process (glibc applies it to every thread) to `uid`/`gid` with no
/// supplementary groups: `setgroups(0)`, `setgid`, `setuid`, in that order, then checks that
/// `setuid(0)` fails. Open descriptors keep working.
///
/// # Errors
/// A failing call, or root still reachable afterwards.
pub fn switch_user(uid: u32, gid: u32) -> io::Result<()> {
    // SAFETY: setgroups with size 0 reads no memory (the null list is never dereferenced).
    cvt(unsafe { libc::setgroups(0, ptr::null()) })
        .map_err(|e| io::Error::new(e.kind(), format!("setgroups(0): {e}")))?;
    // SAFETY: setgid/setuid take plain integers.
    cvt(unsafe { libc::setgid(gid) })
        .map_err(|e| io::Error::new(e.kind(), format!("setgid({gid}): {e}")))?;
    // SAFETY: as above.
    cvt(unsafe { libc::setuid(uid) })
        .map_err(|e| io::Error::new(e.kind(), format!("setuid({uid}): {e}")))?;
    if uid != 0 {
        // SAFETY: as above; this must fail now that real, effective and saved uid are `uid`.
        if unsafe { libc::setuid(0) } == 0 {
            return Err(io::Error::other(format!(
                "setuid({uid}) left root reachable"
            )));
        }
    }
    Ok(())
}

/// The real and effective uid of the process.
pub fn current_uids() -> (u32, u32) {
    // SAFETY: getuid/geteuid take no arguments and cannot fail.
    unsafe { (libc::getuid(), libc::geteuid()) }
}

/// Moves the **calling thread** into the network namespace `/run/netns/NAME` (as made by
/// `ip netns add NAME`): sockets and TAP devices it creates afterwards live there. Other
/// threads are unaffected. For tests and test harnesses.
///
/// # Errors
/// Bad name, missing namespace, or no CAP_SYS_ADMIN.
pub fn enter_netns(name: &str) -> io::Result<()> {
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("bad namespace name {name:?}"),
        ));
    }
    let path = format!("/run/netns/{name}");
    let ns = File::open(&path).map_err(|e| io::Error::new(e.kind(), format!("{path}: {e}")))?;
    // SAFETY: setns takes a live descriptor (borrowed from `ns`) and a flag.
    cvt(unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) })
        .map_err(|e| io::Error::new(e.kind(), format!("setns {path}: {e}")))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ifname_checks() {
        assert!(check_ifname("eth0").is_ok());
        assert!(check_ifname("abcdefghijklmno").is_ok());
        assert!(check_ifname("abcdefghijklmnop").is_err());
        assert!(check_ifname("").is_err());
        assert!(check_ifname("a/b").is_err());
        assert!(check_ifname("a\0b").is_err());
        assert!(check_ifname("a b").is_err());
        assert!(ifreq("..").is_err());
    }

    #[test]
    fn sockaddr_round_trips() {
        // SAFETY: all-zero sockaddr_storage is valid.
        let mut s: libc::sockaddr_storage = unsafe { mem::zeroed() };
        let v4: SocketAddr = "192.0.2.7:5198".parse().unwrap();
        let v6: SocketAddr = "[2001:db8::1]:443".parse().unwrap();
        let len = socketaddr_to_storage(v4, false, &mut s).unwrap();
        assert_eq!(storage_to_socketaddr(&s, len), Some(v4));
        // IPv4 on an IPv6 socket goes v4-mapped and comes back as IPv4.
        let len = socketaddr_to_storage(v4, true, &mut s).unwrap();
        assert_eq!(c_int::from(s.ss_family), libc::AF_INET6);
        assert_eq!(storage_to_socketaddr(&s, len), Some(v4));
        let len = socketaddr_to_storage(v6, true, &mut s).unwrap();
        assert_eq!(storage_to_socketaddr(&s, len), Some(v6));
        // A real IPv6 address cannot go out of an IPv4 socket.
        assert_eq!(socketaddr_to_storage(v6, false, &mut s), None);
        // A short length is refused.
        assert_eq!(storage_to_socketaddr(&s, 4), None);
    }

    #[test]
    fn loopback_is_listed() {
        let all = interfaces().unwrap();
        assert!(
            all.iter()
                .any(|i| i.name == "lo" && i.flags & libc::IFF_LOOPBACK as u32 != 0)
        );
        assert!(if_mtu("lo").unwrap() >= 1280);
        assert!(if_index("lo").unwrap() >= 1);
        assert_eq!(
            if_index("nosuchif0").unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
    }

    #[test]
    fn unknown_user() {
        assert_eq!(
            lookup_user("no-such-user-psp").unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        assert_eq!(lookup_user("root").unwrap(), (0, 0));
    }
}
