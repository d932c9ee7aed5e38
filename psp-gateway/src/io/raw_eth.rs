//! The raw Ethernet uplink: an AF_PACKET socket bound to one interface and EtherType 0x1982,
//! promiscuous (peers address frames to their protected MACs, not the uplink's), ignoring its
//! own outgoing frames, with batched `recvmmsg`/`sendmmsg`.

use std::io;

use super::Batch;

/// An AF_PACKET socket for PSP frames on one interface.
#[derive(Debug)]
pub struct RawSocket {
    interface: String,
}

impl RawSocket {
    /// Opens the socket on `interface` (which must exist), bound to EtherType 0x1982, in
    /// promiscuous mode.
    ///
    /// # Errors
    /// Without CAP_NET_RAW, or when the interface does not exist.
    pub fn open(interface: &str) -> io::Result<Self> {
        let _ = interface;
        Err(io::Error::other("raw: not implemented yet"))
    }

    /// The interface name.
    pub fn interface(&self) -> &str {
        &self.interface
    }

    /// See [`super::Uplink::recv_batch`].
    ///
    /// # Errors
    /// See [`super::Uplink::recv_batch`].
    pub async fn recv_batch(&self, batch: &mut Batch) -> io::Result<usize> {
        let _ = batch;
        Err(io::Error::other("raw: not implemented yet"))
    }

    /// See [`super::Uplink::send_batch`].
    ///
    /// # Errors
    /// See [`super::Uplink::send_batch`].
    pub async fn send_batch(&self, batch: &Batch) -> io::Result<usize> {
        let _ = batch;
        Err(io::Error::other("raw: not implemented yet"))
    }

    /// The interface MTU.
    ///
    /// # Errors
    /// ioctl failure.
    pub fn mtu(&self) -> io::Result<usize> {
        Err(io::Error::other("raw: not implemented yet"))
    }
}
