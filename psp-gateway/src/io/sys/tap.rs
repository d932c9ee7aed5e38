//! TAP devices on `/dev/net/tun`: `TUNSETIFF`, `TUNSETVNETHDRSZ`, `TUNSETOFFLOAD`.
//!
//! Hand-written ioctls: neither `nix` nor `socket2` knows the TUN interface (the `tun-tap`
//! crate cannot ask for `IFF_VNET_HDR`).

use core::ffi::{c_int, c_uint, c_ulong};
use core::ptr;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

use super::fd::cvt;
use super::netdev::{check_ifname, ifreq_unchecked};

/// Opens `/dev/net/tun` and attaches it to the TAP interface `name` (created if missing; an
/// empty name or one with `%d` lets the kernel pick) with `IFF_TAP | IFF_NO_PI`, plus
/// `IFF_VNET_HDR` when `vnet_hdr` (every read and write then starts with a
/// `struct virtio_net_hdr`). Returns the descriptor, close-on-exec, and the interface name.
///
/// # Errors
/// No `/dev/net/tun`, no CAP_NET_ADMIN, a bad name, or `TUNSETIFF` failure.
pub(crate) fn open_tap(name: &str, vnet_hdr: bool) -> io::Result<(File, String)> {
    if !name.is_empty() {
        check_ifname(name)?;
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/net/tun")?;
    let mut req = ifreq_unchecked(name);
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

/// Sets the virtio-net header length of a TAP opened with `IFF_VNET_HDR`
/// (`TUNSETVNETHDRSZ`).
///
/// # Errors
/// `EINVAL` for a length under 10.
pub(crate) fn tap_set_vnet_hdr_len(fd: BorrowedFd<'_>, len: usize) -> io::Result<()> {
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
pub(crate) fn tap_set_offload(fd: BorrowedFd<'_>, flags: c_uint) -> io::Result<()> {
    // SAFETY: TUNSETOFFLOAD takes its argument by value (an unsigned long), no pointer.
    cvt(unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETOFFLOAD, c_ulong::from(flags)) })?;
    Ok(())
}
