//! Operating-system I/O for the daemon: the TAP device, the uplinks (raw Ethernet via
//! AF_PACKET, or UDP), batched receive/send, privilege dropping and systemd notification.
//!
//! All `unsafe` (ioctls, AF_PACKET, `recvmmsg`/`sendmmsg`) lives in [`sys`], one file per
//! concern; the other modules are safe wrappers driven by tokio's `AsyncFd`. Nothing here
//! knows about PSP. The TAP offload arithmetic (no I/O) is `crate::offload`.

pub mod batch;
pub mod busy;
pub mod notify;
pub mod raw_eth;
#[allow(unsafe_code)]
pub mod sys;
pub mod tap;
pub mod udp;

pub use batch::{BATCH, Batch, SLOT_LEN};

/// Bytes of an Ethernet II header (dst, src, EtherType).
pub(crate) const ETHERNET_HEADER_LEN: usize = 14;

/// An uplink: where sealed frames leave and arrive.
///
/// Public for the integration tests (`tests/io_root.rs` checks it is `Send + Sync`).
#[derive(Debug)]
pub enum Uplink {
    /// PSP frames (EtherType 0x1982) directly on an Ethernet interface.
    Raw(raw_eth::RawSocket),
    /// PSP frames inside UDP datagrams.
    Udp(udp::UdpLink),
}

impl Uplink {
    /// Waits until frames are readable, then receives up to `batch.capacity()` of them into
    /// `batch` (cleared first). Returns the number received (at least 1).
    ///
    /// # Errors
    /// Socket errors other than `WouldBlock`/`EINTR`.
    pub async fn recv_batch(&self, batch: &mut Batch) -> std::io::Result<usize> {
        match self {
            Self::Raw(s) => s.recv_batch(batch).await,
            Self::Udp(s) => s.recv_batch(batch).await,
        }
    }

    /// Sends every frame of `batch` (UDP: each to its `addr`), waiting for buffer space when
    /// needed. Returns the number of frames sent.
    ///
    /// # Errors
    /// Socket errors other than `WouldBlock`/`EINTR`/`ENOBUFS` (those frames are dropped
    /// and counted by the caller as the difference to `batch.len()`).
    pub async fn send_batch(&self, batch: &Batch) -> std::io::Result<usize> {
        match self {
            Self::Raw(s) => s.send_batch(batch).await,
            Self::Udp(s) => s.send_batch(batch).await,
        }
    }

    /// [`Self::send_batch`] for a thread outside the runtime (the normalizer's pacer): waits
    /// for buffer space with `poll`, at most 10 ms at a time, and drops what still does not
    /// fit. Returns the number of frames sent.
    ///
    /// # Errors
    /// As [`Self::send_batch`].
    pub(crate) fn send_batch_blocking(&self, batch: &Batch) -> std::io::Result<usize> {
        match self {
            Self::Raw(s) => s.send_batch_blocking(batch),
            Self::Udp(s) => s.send_batch_blocking(batch),
        }
    }

    /// Received frames the uplink dropped since the last call (longer than a batch slot:
    /// UDP datagrams, and raw frames from a receive ring).
    pub(crate) fn take_dropped(&self) -> u64 {
        match self {
            Self::Raw(s) => s.take_dropped(),
            Self::Udp(s) => s.take_dropped(),
        }
    }

    /// The MTU of the underlying path for PSP frames: the interface MTU (raw), or the
    /// interface MTU minus IP and UDP headers (UDP) — the largest PSP frame body that fits
    /// without fragmentation, **excluding** the 14-byte Ethernet header.
    ///
    /// # Errors
    /// If the MTU cannot be read.
    pub fn mtu(&self) -> std::io::Result<usize> {
        match self {
            Self::Raw(s) => s.mtu(),
            Self::Udp(s) => s.mtu(),
        }
    }

    /// A short description for logs and status (`raw:eth0`, `udp:0.0.0.0:5198`).
    pub fn describe(&self) -> String {
        match self {
            Self::Raw(s) => format!("raw:{}", s.interface()),
            Self::Udp(s) => format!("udp:{}", s.local_addr()),
        }
    }
}
