//! The TAP device: layer-2 frames to and from the protected host's kernel.
//!
//! Opened with the `tun-tap` crate (`IFF_TAP | IFF_NO_PI`, no tokio-core), made non-blocking
//! and driven by tokio's [`AsyncFd`]. MTU, MAC and link state, which `tun-tap` cannot set,
//! go through netdevice ioctls in [`super::sys`]. One task may read while another writes:
//! every method takes `&self`.

use std::io;

use tokio::io::unix::AsyncFd;
use tun_tap::{Iface, Mode};

use super::{Batch, SLOT_LEN, sys};

/// Ethernet header bytes on top of the MTU in each TAP frame (no VLAN tag: the TAP is ours).
const ETH_HEADER_LEN: usize = 14;

/// An open TAP interface (`IFF_TAP | IFF_NO_PI`), non-blocking, registered with tokio.
/// The interface disappears when this is dropped (it is not persistent).
#[derive(Debug)]
pub struct Tap {
    name: String,
    fd: AsyncFd<Iface>,
}

impl Tap {
    /// Creates (or attaches to) the TAP interface `name`.
    ///
    /// Must be called inside a tokio runtime with I/O enabled. The interface is created in
    /// the calling thread's network namespace.
    ///
    /// # Errors
    /// Without CAP_NET_ADMIN, or when `/dev/net/tun` is missing.
    pub fn open(name: &str) -> io::Result<Self> {
        // tun-tap silently truncates long names; refuse them instead. An empty name (or one
        // with `%d`) lets the kernel pick; `name()` tells which.
        if !name.is_empty() {
            sys::check_ifname(name)?;
        }
        let iface = Iface::without_packet_info(name, Mode::Tap)
            .map_err(|e| io::Error::new(e.kind(), format!("TAP {name} (/dev/net/tun): {e}")))?;
        sys::set_nonblocking(&iface)?;
        let name = iface.name().to_owned();
        Ok(Self {
            name,
            fd: sys::register_tap(iface)?,
        })
    }

    /// The interface name the kernel gave.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Sets the interface MTU.
    ///
    /// # Errors
    /// ioctl failure, or `InvalidInput` when an MTU-sized frame (plus its 14-byte Ethernet
    /// header) would not fit a [`SLOT_LEN`] batch slot.
    pub fn set_mtu(&self, mtu: usize) -> io::Result<()> {
        if mtu + ETH_HEADER_LEN > SLOT_LEN {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "TAP MTU {mtu} too large (at most {})",
                    SLOT_LEN - ETH_HEADER_LEN
                ),
            ));
        }
        sys::set_if_mtu(&self.name, mtu)
    }

    /// The interface MTU.
    ///
    /// # Errors
    /// ioctl failure.
    pub fn mtu(&self) -> io::Result<usize> {
        sys::if_mtu(&self.name)
    }

    /// Sets the interface MAC address.
    ///
    /// # Errors
    /// ioctl failure.
    pub fn set_mac(&self, mac: [u8; 6]) -> io::Result<()> {
        sys::set_if_mac(&self.name, mac)
    }

    /// The interface MAC address.
    ///
    /// # Errors
    /// ioctl failure.
    pub fn mac(&self) -> io::Result<[u8; 6]> {
        sys::if_mac(&self.name)
    }

    /// Brings the interface up.
    ///
    /// # Errors
    /// ioctl failure.
    pub fn set_up(&self) -> io::Result<()> {
        sys::set_if_up(&self.name)
    }

    /// Waits until readable, then reads up to `batch.capacity()` frames (one `read` each,
    /// stopping at `WouldBlock`) into `batch` (cleared first). Returns the count (≥ 1).
    ///
    /// # Errors
    /// Read errors other than `WouldBlock`/`EINTR` (only when no frame was read; otherwise
    /// the frames are returned and the error comes back on the next call).
    pub async fn recv_batch(&self, batch: &mut Batch) -> io::Result<usize> {
        batch.clear();
        loop {
            let mut guard = self.fd.readable().await?;
            while !batch.is_full() {
                let i = batch.len();
                let slot = batch.slot_mut(i);
                match guard.try_io(|fd| fd.get_ref().recv(slot)) {
                    Ok(Ok(n)) => {
                        batch.set_frame_len(i, n.min(SLOT_LEN));
                        batch.set_addr(i, None);
                        batch.set_len(i + 1);
                    }
                    Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
                    Ok(Err(e)) => {
                        if batch.is_empty() {
                            return Err(e);
                        }
                        return Ok(batch.len());
                    }
                    // WouldBlock: try_io cleared the readiness.
                    Err(_would_block) => break,
                }
            }
            if !batch.is_empty() {
                return Ok(batch.len());
            }
        }
    }

    /// Writes one frame to the kernel (waits for writability on `WouldBlock`).
    ///
    /// # Errors
    /// Write errors (e.g. `EIO` while the interface is down, `EINVAL` for a frame shorter
    /// than an Ethernet header).
    pub async fn send(&self, frame: &[u8]) -> io::Result<()> {
        loop {
            match self.fd.get_ref().send(frame) {
                Ok(_) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    let mut guard = self.fd.writable().await?;
                    // Clear, then retry the write: an edge after this point sets it again.
                    guard.clear_ready();
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Writes every frame of `batch` (one `write` each). Frames the kernel refuses are
    /// dropped; returns the number written.
    ///
    /// # Errors
    /// When the first frame fails with an error that is not per-frame (`EIO`: the interface
    /// is down, `EBADFD`, …). Later failures end the batch early with the count so far.
    pub async fn send_batch(&self, batch: &Batch) -> io::Result<usize> {
        let mut sent = 0;
        for i in 0..batch.len() {
            match self.send(batch.frame(i)).await {
                Ok(()) => sent += 1,
                Err(e) if e.kind() == io::ErrorKind::InvalidInput => {}
                Err(e) if sent == 0 && i == 0 => return Err(e),
                Err(_) => break,
            }
        }
        Ok(sent)
    }
}
