//! The one system call nothing safe wraps: `getsockopt(TCP_INFO)` for the per-path RTT and
//! retransmission counters. The only module with `unsafe`.
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
