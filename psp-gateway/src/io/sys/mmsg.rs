//! Batched receive and send: one `recvmmsg`/`sendmmsg` moves up to [`MMSG_CHUNK`] frames
//! between a socket and a [`Batch`].
//!
//! Hand-written: `socket2` has no `mmsg` calls, and `nix`'s (`MultiHeaders`) allocates its
//! header arrays per batch size and hands results back through an iterator; the hot path
//! here fills stack arrays and moves kept frames down in place. Switching would need a
//! throughput measurement first (STYLE §1.8), which this change does not make.

use core::ffi::c_uint;
use core::mem;
use core::ptr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

use socket2::SockAddrStorage;

use super::fd::cvt;
use super::sockaddr::{socketaddr_to_storage, storage_to_socketaddr};
use crate::io::batch::{Batch, SLOT_LEN};

/// Messages per `recvmmsg`/`sendmmsg` call: the headers live in stack arrays of this size
/// (about 13 KiB), so no call allocates.
pub(crate) const MMSG_CHUNK: usize = 64;

const CHUNK: usize = MMSG_CHUNK;

/// What [`recv_mmsg`] does with each message's source address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RecvMode {
    /// Ignore it (AF_PACKET on kernels with `PACKET_IGNORE_OUTGOING`; TAP-like fds).
    Plain,
    /// AF_PACKET without `PACKET_IGNORE_OUTGOING`: drop frames whose `sll_pkttype` is
    /// `PACKET_OUTGOING` (our own transmissions).
    PacketSkipOutgoing,
    /// UDP: store each source as the slot's address (v4-mapped IPv6 sources become IPv4).
    Inet,
}

/// Receives up to `min(free slots, 64)` messages with one `recvmmsg(MSG_DONTWAIT)`, one
/// message per free slot of `batch` (each a whole [`SLOT_LEN`] buffer), and appends the kept
/// ones. Truncated messages (longer than a slot) and, with
/// [`RecvMode::PacketSkipOutgoing`], our own frames are dropped (later frames move down).
///
/// Returns `(received, kept)`: messages the kernel delivered (≥ 1, or 0 when the batch is
/// already full) and how many of them were appended.
///
/// Public for the integration tests (`tests/io_root.rs` checks the receive modes on a
/// [`PacketSocket`](super::PacketSocket)).
///
/// # Errors
/// `WouldBlock` when nothing is queued; other socket errors.
pub fn recv_mmsg(
    fd: BorrowedFd<'_>,
    batch: &mut Batch,
    mode: RecvMode,
) -> io::Result<(usize, usize)> {
    let start = batch.len();
    let want = (batch.capacity() - start).min(CHUNK);
    if want == 0 {
        return Ok((0, 0));
    }
    // SAFETY: iovec and mmsghdr are C structs of integers and raw pointers; all-zero (null
    // pointers, zero lengths) is a valid value of each.
    let (mut iovs, mut hdrs): ([libc::iovec; CHUNK], [libc::mmsghdr; CHUNK]) =
        unsafe { (mem::zeroed(), mem::zeroed()) };
    let mut names: [SockAddrStorage; CHUNK] = core::array::from_fn(|_| SockAddrStorage::zeroed());
    for (iov, slot) in iovs
        .iter_mut()
        .zip(batch.slots_mut().skip(start).take(want))
    {
        iov.iov_base = slot.as_mut_ptr().cast();
        iov.iov_len = slot.len();
    }
    let with_names = mode != RecvMode::Plain;
    for ((h, iov), name) in hdrs
        .iter_mut()
        .zip(iovs.iter_mut())
        .zip(names.iter_mut())
        .take(want)
    {
        h.msg_hdr.msg_iov = iov;
        h.msg_hdr.msg_iovlen = 1;
        if with_names {
            h.msg_hdr.msg_namelen = name.size_of();
            // SockAddrStorage is repr(transparent) over sockaddr_storage.
            h.msg_hdr.msg_name = ptr::from_mut(name).cast();
        }
    }
    // SAFETY: hdrs[..want] each point at one iovec covering a distinct SLOT_LEN-byte slot of
    // `batch` (exclusively borrowed by this function; the pointers are not used after the
    // call) and, if set, at a distinct sockaddr_storage whose size is in msg_namelen. All of
    // these locals outlive the call; `want` ≤ CHUNK = hdrs.len().
    let n = unsafe {
        libc::recvmmsg(
            fd.as_raw_fd(),
            hdrs.as_mut_ptr(),
            want as c_uint,
            libc::MSG_DONTWAIT,
            ptr::null_mut(),
        )
    };
    let n = usize::try_from(cvt(n)?).unwrap_or(0).min(want);
    let mut kept = 0;
    for (k, (h, name)) in hdrs.iter().zip(names.iter_mut()).take(n).enumerate() {
        if h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0 {
            continue;
        }
        let addr = match mode {
            RecvMode::Plain => None,
            RecvMode::PacketSkipOutgoing => {
                // SAFETY: for AF_PACKET the kernel stored a sockaddr_ll (a sockaddr type of
                // this platform) in this storage.
                let sll = unsafe { name.view_as::<libc::sockaddr_ll>() };
                if sll.sll_pkttype == libc::PACKET_OUTGOING {
                    continue;
                }
                None
            }
            RecvMode::Inet => {
                let s = mem::replace(name, SockAddrStorage::zeroed());
                // SAFETY: recvmmsg wrote this message's source address, msg_namelen bytes,
                // into the storage.
                unsafe { storage_to_socketaddr(s, h.msg_hdr.msg_namelen) }
            }
        };
        let (from, to) = (start + k, start + kept);
        let len = (h.msg_len as usize).min(SLOT_LEN);
        if from != to {
            batch.move_slot(from, to, len);
        }
        batch.set_frame_len(to, len);
        batch.set_addr(to, addr);
        kept += 1;
    }
    batch.set_len(start + kept);
    Ok((n, kept))
}

/// How [`send_mmsg`] addresses each message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SendMode {
    /// No address: the socket is bound (AF_PACKET: interface and protocol from `bind`).
    Bound,
    /// UDP: each frame to its slot address; frames without one, or with one the socket's
    /// family cannot reach (IPv6 on an IPv4 socket), are skipped. `v6_socket`: IPv4
    /// destinations are sent as v4-mapped IPv6.
    Inet {
        /// The socket is AF_INET6.
        v6_socket: bool,
    },
}

/// Progress of one [`send_mmsg`] call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SendProgress {
    /// Messages the kernel accepted.
    pub(crate) sent: usize,
    /// Index of the first frame not yet handled (sent or skipped); `batch.len()` when done.
    pub(crate) next: usize,
}

/// A failed [`send_mmsg`] call: nothing was sent and frame `at` is the one that failed.
#[derive(Debug)]
pub(crate) struct SendError {
    /// Index of the frame the error belongs to (the first sendable one from `from`).
    pub(crate) at: usize,
    /// The error.
    pub(crate) error: io::Error,
}

/// Sends frames `from..end` of `batch` (up to 64) with one `sendmmsg(MSG_DONTWAIT)`.
///
/// # Errors
/// The first message's error (`WouldBlock`, `ENOBUFS`, `EMSGSIZE`, …), with its index.
pub(crate) fn send_mmsg(
    fd: BorrowedFd<'_>,
    batch: &Batch,
    from: usize,
    end: usize,
    mode: SendMode,
) -> Result<SendProgress, SendError> {
    let end = end.min(batch.len());
    // SAFETY: as in recv_mmsg, all-zero is a valid value of these C structs.
    let (mut iovs, mut hdrs): ([libc::iovec; CHUNK], [libc::mmsghdr; CHUNK]) =
        unsafe { (mem::zeroed(), mem::zeroed()) };
    let mut names: [SockAddrStorage; CHUNK] = core::array::from_fn(|_| SockAddrStorage::zeroed());
    let mut index = [0usize; CHUNK];
    let mut m = 0;
    let mut i = from;
    while i < end && m < CHUNK {
        let namelen = match mode {
            SendMode::Bound => 0,
            SendMode::Inet { v6_socket } => {
                match batch
                    .addr(i)
                    .and_then(|a| socketaddr_to_storage(a, v6_socket, &mut names[m]))
                {
                    Some(len) => len,
                    None => {
                        i += 1;
                        continue;
                    }
                }
            }
        };
        let frame = batch.frame(i);
        // sendmmsg only reads through iov_base; the pointer is *mut by the C declaration.
        iovs[m].iov_base = frame.as_ptr().cast_mut().cast();
        iovs[m].iov_len = frame.len();
        hdrs[m].msg_hdr.msg_namelen = namelen;
        index[m] = i;
        m += 1;
        i += 1;
    }
    if m == 0 {
        return Ok(SendProgress { sent: 0, next: end });
    }
    for ((h, iov), name) in hdrs
        .iter_mut()
        .zip(iovs.iter_mut())
        .zip(names.iter_mut())
        .take(m)
    {
        h.msg_hdr.msg_iov = iov;
        h.msg_hdr.msg_iovlen = 1;
        if h.msg_hdr.msg_namelen != 0 {
            h.msg_hdr.msg_name = ptr::from_mut(name).cast();
        }
    }
    // SAFETY: hdrs[..m] each point at one iovec covering a frame of `batch` (borrowed for
    // this call; the kernel only reads it) and, when msg_namelen ≠ 0, at an initialised
    // sockaddr of that length. All of these locals outlive the call; m ≤ CHUNK = hdrs.len().
    let r = unsafe {
        libc::sendmmsg(
            fd.as_raw_fd(),
            hdrs.as_mut_ptr(),
            m as c_uint,
            libc::MSG_DONTWAIT,
        )
    };
    match cvt(r) {
        Err(error) => Err(SendError {
            at: index[0],
            error,
        }),
        Ok(sent) => {
            let sent = usize::try_from(sent).unwrap_or(0).min(m);
            let next = if sent < m { index[sent] } else { i };
            Ok(SendProgress { sent, next })
        }
    }
}
