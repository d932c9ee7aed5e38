//! Socket addresses for `recvmmsg`/`sendmmsg`: `SocketAddr` ↔ C `sockaddr_in`/`sockaddr_in6`,
//! through `socket2::SockAddr` (which lays them out and reads them back).
//!
//! The one `unsafe` left is `SockAddr::new` on storage the kernel filled: only the caller of
//! `recvmmsg` knows that the kernel wrote an address of the given length there.

use core::net::{SocketAddr, SocketAddrV4, SocketAddrV6};

use socket2::{SockAddr, SockAddrStorage};

/// The socket address the kernel stored in `s` (`len` bytes); `None` unless AF_INET/AF_INET6
/// of at least the full struct size. v4-mapped IPv6 addresses come back as IPv4.
///
/// # Safety
/// The first `len` bytes of `s` must be an address the kernel wrote (e.g. a `msg_name` after
/// `recvmmsg`), or all zero.
pub(super) unsafe fn storage_to_socketaddr(
    s: SockAddrStorage,
    len: libc::socklen_t,
) -> Option<SocketAddr> {
    // SAFETY: the caller guarantees the first `len` bytes are a kernel-written address of the
    // family in the storage.
    let addr = unsafe { SockAddr::new(s, len) };
    let full = match i32::from(addr.family()) {
        libc::AF_INET => size_of::<libc::sockaddr_in>(),
        libc::AF_INET6 => size_of::<libc::sockaddr_in6>(),
        _ => return None,
    };
    if (len as usize) < full {
        return None;
    }
    match addr.as_socket()? {
        SocketAddr::V6(a) => Some(match a.ip().to_ipv4_mapped() {
            Some(v4) => SocketAddr::V4(SocketAddrV4::new(v4, a.port())),
            None => SocketAddr::V6(a),
        }),
        v4 => Some(v4),
    }
}

/// Writes `addr` into `out` for a socket of the given family; returns the length, or `None`
/// when that socket cannot reach it (IPv6 on an IPv4 socket). IPv4 on an IPv6 socket goes
/// v4-mapped.
pub(super) fn socketaddr_to_storage(
    addr: SocketAddr,
    v6_socket: bool,
    out: &mut SockAddrStorage,
) -> Option<libc::socklen_t> {
    let target = match (addr, v6_socket) {
        (SocketAddr::V4(a), false) => SocketAddr::V4(a),
        (SocketAddr::V4(a), true) => {
            SocketAddr::V6(SocketAddrV6::new(a.ip().to_ipv6_mapped(), a.port(), 0, 0))
        }
        (SocketAddr::V6(a), true) => SocketAddr::V6(a),
        (SocketAddr::V6(a), false) => {
            SocketAddr::V4(SocketAddrV4::new(a.ip().to_ipv4_mapped()?, a.port()))
        }
    };
    let sa = SockAddr::from(target);
    let len = sa.len();
    *out = sa.as_storage();
    Some(len)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Encodes then decodes through a copy of the storage, as the kernel would hand it back.
    fn round(addr: SocketAddr, v6_socket: bool) -> Option<SocketAddr> {
        let mut s = SockAddrStorage::zeroed();
        let len = socketaddr_to_storage(addr, v6_socket, &mut s)?;
        // SAFETY: `s` was written by socketaddr_to_storage with exactly `len` bytes.
        unsafe { storage_to_socketaddr(s, len) }
    }

    #[test]
    fn sockaddr_round_trips() {
        let v4: SocketAddr = "192.0.2.7:5198".parse().unwrap();
        let v6: SocketAddr = "[2001:db8::1]:443".parse().unwrap();
        assert_eq!(round(v4, false).unwrap(), v4);
        // IPv4 on an IPv6 socket goes v4-mapped and comes back as IPv4.
        let mut s = SockAddrStorage::zeroed();
        let len = socketaddr_to_storage(v4, true, &mut s).unwrap();
        assert_eq!(len as usize, size_of::<libc::sockaddr_in6>());
        // SAFETY: written just above with `len` bytes.
        assert_eq!(unsafe { storage_to_socketaddr(s, len) }, Some(v4));
        assert_eq!(round(v6, true).unwrap(), v6);
        // A real IPv6 address cannot go out of an IPv4 socket.
        let mut s = SockAddrStorage::zeroed();
        assert_eq!(socketaddr_to_storage(v6, false, &mut s), None);
        // A short length is refused.
        let len = socketaddr_to_storage(v6, true, &mut s).unwrap();
        assert!(len > 4);
        // SAFETY: the storage holds a valid sockaddr_in6; only 4 bytes are claimed.
        assert_eq!(unsafe { storage_to_socketaddr(s, 4) }, None);
        // All zero (AF_UNSPEC) is no address.
        let zero = SockAddrStorage::zeroed();
        // SAFETY: all-zero storage, no bytes claimed.
        assert_eq!(unsafe { storage_to_socketaddr(zero, 0) }, None);
    }
}
