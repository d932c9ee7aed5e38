//! Operating-system I/O for the daemon: the TAP device, the uplinks (raw Ethernet via
//! AF_PACKET, or UDP), batched receive/send, privilege dropping and systemd notification.
//!
//! All `unsafe` (ioctls, AF_PACKET, `recvmmsg`/`sendmmsg`) lives in [`sys`], one file per
//! concern; the other modules are safe wrappers driven by tokio's `AsyncFd`. Nothing here
//! knows about PSP. The TAP offload arithmetic (no I/O) is `crate::offload`.

pub mod batch;
pub mod mem;
pub mod notify;
pub mod raw_eth;
#[allow(unsafe_code)]
pub mod sys;
pub mod tap;
pub mod udp;

pub use batch::{BATCH, Batch, SLOT_LEN};

use core::future::Future;

/// The protected side: where inner Ethernet frames come from (the host's stack sends them) and
/// where opened ones go. [`tap::Tap`] (a real TAP device) and [`mem::MemTap`] (tests) are it.
pub trait TapIo: Send + Sync + 'static {
    /// Receive state of the one task that reads (with offloads: the rest of a TCP super-frame
    /// waits here for the next batch).
    type Reader: Send;
    /// Write state of the one task that writes (with offloads: the coalescing tables).
    type Writer: Send;

    /// A reader.
    fn reader(&self) -> Self::Reader;

    /// A writer.
    fn writer(&self) -> Self::Writer;

    /// Waits for frames and reads up to `batch`'s capacity (cleared first), each an ordinary
    /// Ethernet frame. Returns how many (at least 1).
    ///
    /// # Errors
    /// Read errors other than `WouldBlock`/`EINTR`.
    fn recv_batch(
        &self,
        batch: &mut Batch,
        reader: &mut Self::Reader,
    ) -> impl Future<Output = std::io::Result<usize>> + Send;

    /// Frames the reader dropped since the last call (nonsensical offload headers).
    fn take_dropped(reader: &mut Self::Reader) -> u64;

    /// Writes inner frames (each with whether an ICV vouches for its checksums; with offloads
    /// consecutive TCP segments are coalesced). Returns how many writes the TAP refused.
    fn write(
        &self,
        writer: &mut Self::Writer,
        frames: &[(&[u8], bool)],
    ) -> impl Future<Output = u64> + Send;
}

/// An uplink: where sealed frames leave and arrive. [`Uplink`] (raw Ethernet or UDP) and
/// [`mem::MemUplink`] (tests) are it.
pub trait UplinkIo: Send + Sync + 'static {
    /// Waits until frames are readable, then receives up to `batch.capacity()` of them into
    /// `batch` (cleared first). Returns the number received (at least 1).
    ///
    /// # Errors
    /// Socket errors other than `WouldBlock`/`EINTR`.
    fn recv_batch(&self, batch: &mut Batch) -> impl Future<Output = std::io::Result<usize>> + Send;

    /// Sends every frame of `batch` (UDP: each to its `addr`). Returns the number sent.
    ///
    /// # Errors
    /// An error no frame of the batch got past.
    fn send_batch(&self, batch: &Batch) -> impl Future<Output = std::io::Result<usize>> + Send;

    /// [`Self::send_batch`] for a thread outside the runtime (the normalizer's pacer).
    ///
    /// # Errors
    /// As [`Self::send_batch`].
    fn send_batch_blocking(&self, batch: &Batch) -> std::io::Result<usize>;

    /// Received frames the uplink dropped since the last call (longer than a batch slot).
    fn take_dropped(&self) -> u64;

    /// Whether frames are addressed per peer (UDP: a broadcast is one copy per peer endpoint)
    /// rather than put on a shared segment once.
    fn is_addressed(&self) -> bool;
}

impl UplinkIo for Uplink {
    fn recv_batch(&self, batch: &mut Batch) -> impl Future<Output = std::io::Result<usize>> + Send {
        Self::recv_batch(self, batch)
    }

    fn send_batch(&self, batch: &Batch) -> impl Future<Output = std::io::Result<usize>> + Send {
        Self::send_batch(self, batch)
    }

    fn send_batch_blocking(&self, batch: &Batch) -> std::io::Result<usize> {
        Self::send_batch_blocking(self, batch)
    }

    fn take_dropped(&self) -> u64 {
        Self::take_dropped(self)
    }

    fn is_addressed(&self) -> bool {
        matches!(self, Self::Udp(_))
    }
}

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
