//! The socket calls nothing safe wraps: `getsockopt(TCP_INFO)` for the per-path RTT and
//! retransmission counters, the MPTCP subflow report, and `IP_BIND_ADDRESS_NO_PORT`. The only
//! module with `unsafe`.
#![allow(unsafe_code)]

use std::os::fd::AsRawFd;

use tokio::net::TcpStream;

/// The `TCP_INFO` fields psp-multipath reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TcpInfo {
    /// Smoothed RTT in µs.
    pub(crate) rtt_us: u32,
    /// Retransmitted segments over the connection's life.
    pub(crate) total_retrans: u32,
}

/// Reads `TCP_INFO`, or `None` if the kernel refuses.
#[cfg(target_os = "linux")]
pub(crate) fn tcp_info(s: &TcpStream) -> Option<TcpInfo> {
    // SAFETY: an all-zero `tcp_info` is a valid value (plain integers).
    let mut info: libc::tcp_info = unsafe { core::mem::zeroed() };
    let mut len = libc::socklen_t::try_from(size_of::<libc::tcp_info>()).ok()?;
    // SAFETY: `s` owns a valid socket fd for the call's duration; `info` and `len` are valid,
    // writable and `len` holds the buffer's size, so the kernel writes at most that much.
    let rc = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&raw mut info).cast(),
            &raw mut len,
        )
    };
    (rc == 0).then_some(TcpInfo {
        rtt_us: info.tcpi_rtt,
        total_retrans: info.tcpi_total_retrans,
    })
}

/// Not Linux: no counters.
#[cfg(not(target_os = "linux"))]
pub(crate) fn tcp_info(_: &TcpStream) -> Option<TcpInfo> {
    None
}

/// Sets `IP_BIND_ADDRESS_NO_PORT` on a socket about to be bound to a local address with port 0
/// and connected: the kernel then picks the port at connect, by the whole 4-tuple, instead of a
/// port free for every destination at bind (a search through the bound ports, which thousands
/// of `TIME_WAIT` sockets of earlier set-ups make slow). Best effort: `false` where refused.
#[cfg(target_os = "linux")]
pub(crate) fn bind_address_no_port(s: &impl AsRawFd) -> bool {
    let on: libc::c_int = 1;
    let Ok(len) = libc::socklen_t::try_from(size_of::<libc::c_int>()) else {
        return false;
    };
    // SAFETY: `s` owns a valid socket fd for the call's duration; `on` is a readable c_int and
    // `len` its size.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_BIND_ADDRESS_NO_PORT,
            (&raw const on).cast(),
            len,
        )
    };
    rc == 0
}

/// Not Linux: nothing.
#[cfg(not(target_os = "linux"))]
pub(crate) fn bind_address_no_port(_: &impl AsRawFd) -> bool {
    false
}

/// `SOL_MPTCP` and its options (linux/mptcp.h; not in the libc crate).
#[cfg(target_os = "linux")]
const SOL_MPTCP: libc::c_int = 284;
#[cfg(target_os = "linux")]
const MPTCP_TCPINFO: libc::c_int = 2;
#[cfg(target_os = "linux")]
const MPTCP_SUBFLOW_ADDRS: libc::c_int = 3;
/// `struct mptcp_subflow_data`: the header of both answers.
const SUBFLOW_HEADER_LEN: usize = 16;
/// `struct mptcp_subflow_addrs`: two `sockaddr_storage`-sized unions.
const SUBFLOW_ADDRS_LEN: usize = 256;
/// The most subflows asked for.
const MAX_SUBFLOWS: usize = 8;

/// One MPTCP subflow as the kernel reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Subflow {
    pub(crate) local: Option<core::net::SocketAddr>,
    pub(crate) remote: Option<core::net::SocketAddr>,
    pub(crate) bytes_acked: u64,
    pub(crate) bytes_received: u64,
    pub(crate) rtt_us: u32,
    pub(crate) total_retrans: u32,
}

/// `getsockopt(SOL_MPTCP, opt)` with a `mptcp_subflow_data` header asking for `entry_len`
/// bytes per subflow; returns (subflow count, entries).
#[cfg(target_os = "linux")]
fn subflow_query(fd: i32, opt: libc::c_int, entry_len: usize) -> Option<(usize, Vec<u8>)> {
    let mut buf = vec![0u8; SUBFLOW_HEADER_LEN + MAX_SUBFLOWS * entry_len];
    let header_len = u32::try_from(SUBFLOW_HEADER_LEN).ok()?;
    let user_len = u32::try_from(entry_len).ok()?;
    buf[0..4].copy_from_slice(&header_len.to_ne_bytes());
    buf[12..16].copy_from_slice(&user_len.to_ne_bytes());
    let mut len = libc::socklen_t::try_from(buf.len()).ok()?;
    // SAFETY: `fd` is a valid socket for the call; `buf` is writable for `len` bytes and `len`
    // is its size, so the kernel writes at most that much.
    let rc = unsafe { libc::getsockopt(fd, SOL_MPTCP, opt, buf.as_mut_ptr().cast(), &raw mut len) };
    if rc != 0 {
        return None;
    }
    let n = usize::try_from(u32::from_ne_bytes(buf[4..8].try_into().ok()?)).ok()?;
    let size_kernel = usize::try_from(u32::from_ne_bytes(buf[8..12].try_into().ok()?)).ok()?;
    let stride = entry_len.min(size_kernel.max(1));
    let n = n.min(MAX_SUBFLOWS);
    let mut entries = vec![0u8; n * entry_len];
    for i in 0..n {
        let src = SUBFLOW_HEADER_LEN + i * stride;
        let take = stride.min(buf.len().saturating_sub(src));
        entries[i * entry_len..i * entry_len + take].copy_from_slice(&buf[src..src + take]);
    }
    Some((n, entries))
}

/// A `sockaddr_in`/`sockaddr_in6` in kernel layout, or `None`.
fn sockaddr(b: &[u8]) -> Option<core::net::SocketAddr> {
    let family = i32::from(u16::from_ne_bytes(b.get(0..2)?.try_into().ok()?));
    let port = u16::from_be_bytes(b.get(2..4)?.try_into().ok()?);
    if family == libc::AF_INET {
        let ip: [u8; 4] = b.get(4..8)?.try_into().ok()?;
        Some((core::net::Ipv4Addr::from(ip), port).into())
    } else if family == libc::AF_INET6 {
        let ip: [u8; 16] = b.get(8..24)?.try_into().ok()?;
        Some((core::net::Ipv6Addr::from(ip), port).into())
    } else {
        None
    }
}

/// The MPTCP socket's subflows (addresses and per-subflow `TCP_INFO`), or `None` if `s` is not
/// an MPTCP socket or the kernel refuses.
#[cfg(target_os = "linux")]
pub(crate) fn mptcp_subflows(s: &TcpStream) -> Option<Vec<Subflow>> {
    let fd = s.as_raw_fd();
    let info_len = size_of::<libc::tcp_info>();
    let (n, addrs) = subflow_query(fd, MPTCP_SUBFLOW_ADDRS, SUBFLOW_ADDRS_LEN)?;
    let (m, infos) = subflow_query(fd, MPTCP_TCPINFO, info_len)?;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let a = &addrs[i * SUBFLOW_ADDRS_LEN..(i + 1) * SUBFLOW_ADDRS_LEN];
        let mut sf = Subflow {
            local: sockaddr(&a[..128]),
            remote: sockaddr(&a[128..]),
            bytes_acked: 0,
            bytes_received: 0,
            rtt_us: 0,
            total_retrans: 0,
        };
        if i < m {
            // SAFETY: an all-zero `tcp_info` is valid; the copy below fills it from `infos`,
            // which holds `info_len` bytes for entry `i` (zero-padded if the kernel's is shorter).
            let mut info: libc::tcp_info = unsafe { core::mem::zeroed() };
            let src = &infos[i * info_len..(i + 1) * info_len];
            // SAFETY: `info` is `info_len` bytes of plain integers; `src` has exactly that length
            // and does not overlap it.
            unsafe {
                core::ptr::copy_nonoverlapping(
                    src.as_ptr(),
                    (&raw mut info).cast::<u8>(),
                    info_len,
                );
            }
            sf.bytes_acked = info.tcpi_bytes_acked;
            sf.bytes_received = info.tcpi_bytes_received;
            sf.rtt_us = info.tcpi_rtt;
            sf.total_retrans = info.tcpi_total_retrans;
        }
        out.push(sf);
    }
    Some(out)
}

/// Not Linux: no MPTCP.
#[cfg(not(target_os = "linux"))]
pub(crate) fn mptcp_subflows(_: &TcpStream) -> Option<Vec<Subflow>> {
    None
}
