//! The TAP device: layer-2 frames to and from the protected host's kernel.

use std::io;

use super::Batch;

/// An open TAP interface (`IFF_TAP | IFF_NO_PI`), non-blocking, registered with tokio.
/// The interface disappears when this is dropped (it is not persistent).
#[derive(Debug)]
pub struct Tap {
    name: String,
}

impl Tap {
    /// Creates (or attaches to) the TAP interface `name`.
    ///
    /// # Errors
    /// Without CAP_NET_ADMIN, or when `/dev/net/tun` is missing.
    pub fn open(name: &str) -> io::Result<Self> {
        let _ = name;
        Err(io::Error::other("tap: not implemented yet"))
    }

    /// The interface name the kernel gave.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Sets the interface MTU.
    ///
    /// # Errors
    /// ioctl failure.
    pub fn set_mtu(&self, mtu: usize) -> io::Result<()> {
        let _ = mtu;
        Err(io::Error::other("tap: not implemented yet"))
    }

    /// Sets the interface MAC address.
    ///
    /// # Errors
    /// ioctl failure.
    pub fn set_mac(&self, mac: [u8; 6]) -> io::Result<()> {
        let _ = mac;
        Err(io::Error::other("tap: not implemented yet"))
    }

    /// The interface MAC address.
    ///
    /// # Errors
    /// ioctl failure.
    pub fn mac(&self) -> io::Result<[u8; 6]> {
        Err(io::Error::other("tap: not implemented yet"))
    }

    /// Brings the interface up.
    ///
    /// # Errors
    /// ioctl failure.
    pub fn set_up(&self) -> io::Result<()> {
        Err(io::Error::other("tap: not implemented yet"))
    }

    /// Waits until readable, then reads up to `batch.capacity()` frames (one `read` each,
    /// stopping at `WouldBlock`) into `batch` (cleared first). Returns the count (≥ 1).
    ///
    /// # Errors
    /// Read errors other than `WouldBlock`/`EINTR`.
    pub async fn recv_batch(&self, batch: &mut Batch) -> io::Result<usize> {
        let _ = batch;
        Err(io::Error::other("tap: not implemented yet"))
    }

    /// Writes one frame to the kernel (waits for writability on `WouldBlock`).
    ///
    /// # Errors
    /// Write errors (e.g. the interface is down).
    pub async fn send(&self, frame: &[u8]) -> io::Result<()> {
        let _ = frame;
        Err(io::Error::other("tap: not implemented yet"))
    }
}
