//! Network interfaces: names, MTU, MAC, flags, index, driver, and the address list.
//!
//! `if_nametoindex` and `getifaddrs` go through `nix`. The netdevice ioctls (`SIOC[GS]IFMTU`,
//! `SIOC[GS]IFHWADDR`, `SIOC[GS]IFFLAGS`, `SIOCETHTOOL`) are hand-written: `nix` offers only
//! macros that generate `unsafe` ioctl functions, which would not remove a single `unsafe`
//! block, and no safe `ifreq`.

use core::ffi::{c_char, c_int, c_ulong};
use core::mem;
use core::net::IpAddr;
use core::ptr;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use nix::sys::socket::{AddressFamily, SockType};

use super::fd::{cvt, socket};

/// Longest interface name the kernel accepts (`IFNAMSIZ` minus the NUL).
const IFNAME_MAX: usize = libc::IFNAMSIZ - 1;

/// Checks an interface name: 1 to 15 bytes, no NUL, no `/`, not `.` or `..`.
///
/// # Errors
/// `InvalidInput` naming the problem.
pub(super) fn check_ifname(name: &str) -> io::Result<()> {
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

/// An `ifreq` naming `name`, the rest zero.
fn ifreq(name: &str) -> io::Result<libc::ifreq> {
    check_ifname(name)?;
    Ok(ifreq_unchecked(name))
}

/// An `ifreq` naming `name` (at most `IFNAMSIZ - 1` bytes are copied), the rest zero.
pub(super) fn ifreq_unchecked(name: &str) -> libc::ifreq {
    // SAFETY: ifreq is a C struct of a char array and a union of integers, sockaddrs and a
    // pointer; all-zero bytes are a valid value of each.
    let mut req: libc::ifreq = unsafe { mem::zeroed() };
    for (d, s) in req
        .ifr_name
        .iter_mut()
        .zip(name.as_bytes())
        .take(IFNAME_MAX)
    {
        *d = *s as c_char;
    }
    req
}

/// A socket for interface ioctls: AF_INET, or AF_PACKET / AF_UNIX where IPv4 is unavailable
/// (netdevice ioctls work on any of them).
fn control_socket() -> io::Result<OwnedFd> {
    let mut last = io::Error::from_raw_os_error(libc::EAFNOSUPPORT);
    for domain in [
        AddressFamily::Inet,
        AddressFamily::Packet,
        AddressFamily::Unix,
    ] {
        match socket(domain, SockType::Datagram) {
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
pub(crate) fn if_mtu(name: &str) -> io::Result<usize> {
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
pub(crate) fn set_if_mtu(name: &str, mtu: usize) -> io::Result<()> {
    let mut req = ifreq(name)?;
    req.ifr_ifru.ifru_mtu = c_int::try_from(mtu)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, format!("MTU {mtu} too large")))?;
    ifreq_ioctl(libc::SIOCSIFMTU, &mut req).map_err(|e| ctx(name, &format!("set MTU {mtu} on"), e))
}

/// The hardware (MAC) address of interface `name` (`SIOCGIFHWADDR`).
///
/// # Errors
/// Unknown interface or ioctl failure.
pub(crate) fn if_mac(name: &str) -> io::Result<[u8; 6]> {
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
pub(crate) fn set_if_mac(name: &str, mac: [u8; 6]) -> io::Result<()> {
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

/// Brings interface `name` up (`SIOCGIFFLAGS`, then `SIOCSIFFLAGS` with `IFF_UP` added).
///
/// # Errors
/// Unknown interface or no CAP_NET_ADMIN.
pub(crate) fn set_if_up(name: &str) -> io::Result<()> {
    let mut req = ifreq(name)?;
    ifreq_ioctl(libc::SIOCGIFFLAGS, &mut req).map_err(|e| ctx(name, "flags of", e))?;
    // SAFETY: SIOCGIFFLAGS filled the `ifru_flags` member of the union.
    let flags = unsafe { req.ifr_ifru.ifru_flags };
    req.ifr_ifru.ifru_flags = flags | libc::IFF_UP as libc::c_short;
    ifreq_ioctl(libc::SIOCSIFFLAGS, &mut req).map_err(|e| ctx(name, "bring up", e))
}

/// The index of interface `name` in the calling thread's network namespace.
///
/// Public for the integration tests (`tests/io_root.rs`).
///
/// # Errors
/// `NotFound` when there is no such interface; `InvalidInput` for a bad name.
pub fn if_index(name: &str) -> io::Result<u32> {
    check_ifname(name)?;
    nix::net::if_::if_nametoindex(name)
        .map_err(|_| io::Error::new(io::ErrorKind::NotFound, format!("no interface {name}")))
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
pub(crate) fn if_driver(name: &str) -> io::Result<String> {
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

/// One address of one interface, from `getifaddrs`.
#[derive(Debug, Clone)]
pub(crate) struct IfAddr {
    /// Interface name.
    pub(crate) name: String,
    /// `IFF_*` flags.
    pub(crate) flags: u32,
    /// The IPv4 or IPv6 address, if this entry has one (AF_PACKET entries do not).
    pub(crate) ip: Option<IpAddr>,
}

/// Every interface address of the host (`getifaddrs`), including one address-less entry per
/// interface (AF_PACKET). Allocates; not for hot paths.
///
/// # Errors
/// `getifaddrs` failure.
pub(crate) fn interfaces() -> io::Result<Vec<IfAddr>> {
    Ok(nix::ifaddrs::getifaddrs()?
        .map(|ifa| {
            let ip = ifa.address.as_ref().and_then(|a| {
                a.as_sockaddr_in()
                    .map(|sin| IpAddr::V4(sin.ip()))
                    .or_else(|| a.as_sockaddr_in6().map(|sin6| IpAddr::V6(sin6.ip())))
            });
            IfAddr {
                name: ifa.interface_name,
                // The kernel's flags are an unsigned int; nix keeps them as a c_int.
                flags: ifa.flags.bits() as u32,
                ip,
            }
        })
        .collect())
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
    fn loopback_is_listed() {
        let all = interfaces().unwrap();
        assert!(
            all.iter()
                .any(|i| i.name == "lo" && i.flags & libc::IFF_LOOPBACK as u32 != 0)
        );
        assert!(
            all.iter()
                .any(|i| i.name == "lo" && i.ip == Some(IpAddr::from([127, 0, 0, 1])))
        );
        assert!(if_mtu("lo").unwrap() >= 1280);
        assert!(if_index("lo").unwrap() >= 1);
        assert_eq!(
            if_index("nosuchif0").unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
    }
}
