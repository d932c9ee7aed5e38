//! File descriptors: `O_NONBLOCK`, new sockets, integer socket options, and registration with
//! tokio's reactor.
//!
//! `fcntl`, `socket` and the buffer-size options go through `nix`. Hand-written `unsafe` is
//! left for `AsyncFd::register_with_interest` (tokio's constructor is `unsafe` by design: it
//! cannot know that the descriptor stays the same) and for the generic integer `setsockopt`/`getsockopt`
//! that the AF_PACKET options (`PACKET_IGNORE_OUTGOING`, `PACKET_QDISC_BYPASS`) and `IP_MTU`
//! need, which `nix` has no typed option for.

use core::ffi::{c_int, c_void};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use nix::fcntl::{FcntlArg, OFlag, fcntl};
use nix::sys::socket::{self, AddressFamily, SockFlag, SockType, sockopt};
use tokio::io::unix::AsyncFd;

/// Maps a `-1` return to the thread's `errno`.
pub(super) fn cvt(r: c_int) -> io::Result<c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// Puts `fd` in non-blocking mode (`O_NONBLOCK`).
///
/// # Errors
/// `fcntl` failure.
pub(crate) fn set_nonblocking(fd: impl AsFd) -> io::Result<()> {
    let fd = fd.as_fd();
    let flags = OFlag::from_bits_retain(fcntl(fd, FcntlArg::F_GETFL)?);
    if !flags.contains(OFlag::O_NONBLOCK) {
        fcntl(fd, FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK))?;
    }
    Ok(())
}

/// Registers an uplink socket for readability (and errors) only. Interest in writability would make the
/// kernel poke the epoll registration each time a sent frame is freed (`sock_def_write_space`,
/// ~11 % of the kernel's time in the profile in BENCHMARKS.md); senders wait through
/// [`writable`] instead, on the rare full buffer.
///
/// # Errors
/// No reactor, or `epoll_ctl` failure.
///
/// # Panics
/// Outside a tokio runtime with I/O enabled.
pub(crate) fn register_fd_readable(fd: OwnedFd) -> io::Result<AsyncFd<OwnedFd>> {
    let interest = tokio::io::Interest::READABLE | tokio::io::Interest::ERROR;
    // SAFETY: an OwnedFd owns its open descriptor until dropped and always returns the same
    // one from as_raw_fd; we never swap it out through `AsyncFd::get_mut`.
    Ok(unsafe { AsyncFd::register_with_interest(fd, interest) }?)
}

/// Waits until `fd` (registered for readability only) is writable: registers a duplicate of it
/// for writability for the wait, then drops the duplicate.
///
/// # Errors
/// `dup` or `epoll_ctl` failure.
pub(crate) async fn writable(fd: BorrowedFd<'_>) -> io::Result<()> {
    let dup = fd.try_clone_to_owned()?;
    // SAFETY: as in register_fd_readable; the duplicate lives only for this wait.
    let afd = unsafe { AsyncFd::register_with_interest(dup, tokio::io::Interest::WRITABLE) }?;
    let _ = afd.writable().await?;
    Ok(())
}

/// Registers an open file (a TAP from [`super::open_tap`]) with the current tokio runtime's
/// reactor.
///
/// # Errors
/// No reactor, or `epoll_ctl` failure.
///
/// # Panics
/// Outside a tokio runtime with I/O enabled.
pub(crate) fn register_file(file: File) -> io::Result<AsyncFd<File>> {
    // SAFETY: a File owns its open descriptor until dropped and always returns the same one
    // from as_raw_fd; we never replace it through `AsyncFd::get_mut`.
    Ok(unsafe { AsyncFd::register(file) }?)
}

/// A new socket, close-on-exec and non-blocking.
pub(super) fn socket(domain: AddressFamily, ty: SockType) -> io::Result<OwnedFd> {
    Ok(socket::socket(
        domain,
        ty,
        SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
        None,
    )?)
}

/// Sets an integer socket option.
///
/// # Errors
/// `setsockopt` failure (e.g. `ENOPROTOOPT` on kernels without the option).
pub(super) fn setsockopt_int(
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
pub(crate) fn getsockopt_int(fd: BorrowedFd<'_>, level: c_int, name: c_int) -> io::Result<c_int> {
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
pub(crate) fn set_buffer_sizes(fd: BorrowedFd<'_>, bytes: usize) -> (usize, usize) {
    let v = bytes.min(c_int::MAX as usize);
    if socket::setsockopt(&fd, sockopt::RcvBufForce, &v).is_err() {
        // Without CAP_NET_ADMIN: the kernel caps this at rmem_max.
        let _ = socket::setsockopt(&fd, sockopt::RcvBuf, &v);
    }
    if socket::setsockopt(&fd, sockopt::SndBufForce, &v).is_err() {
        // Likewise, capped at wmem_max.
        let _ = socket::setsockopt(&fd, sockopt::SndBuf, &v);
    }
    (
        socket::getsockopt(&fd, sockopt::RcvBuf).unwrap_or(0),
        socket::getsockopt(&fd, sockopt::SndBuf).unwrap_or(0),
    )
}
