//! A `PACKET_MMAP` receive ring (TPACKET_V2) on an AF_PACKET socket: the raw uplink's optional
//! receive path (`[uplink] rx_ring = true`; off by default, BENCHMARKS.md "Gateway speed and
//! timing" says why).
//!
//! The kernel writes each frame into the next free slot of a shared mapping and flips the
//! slot's status to `TP_STATUS_USER`; we copy the frame out and hand the slot back with
//! `TP_STATUS_KERNEL`. Hand-written `unsafe`: `nix` has no typed option for `PACKET_RX_RING`,
//! and the ring is raw shared memory.

use core::ffi::{c_int, c_void};
use core::ptr::{self, NonNull};
use core::sync::atomic::{Ordering, fence};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

use super::fd::{cvt, setsockopt_int};
use crate::io::{Batch, SLOT_LEN};

/// Bytes per ring slot: the TPACKET_V2 header, the `sockaddr_ll`, and a slot's worth of frame.
const FRAME_SIZE: usize = 4096;
/// `TPACKET_V2` of `enum tpacket_versions` (libc has it only as an enum).
const TPACKET_V2: c_int = 1;
/// Slots per 64 KiB block.
const PER_BLOCK: usize = (64 * 1024) / FRAME_SIZE;

/// A TPACKET_V2 receive ring mapped from an AF_PACKET socket.
#[derive(Debug)]
pub struct RxRing {
    base: NonNull<u8>,
    len: usize,
    frames: usize,
    next: usize,
    /// Frames longer than a batch slot (or than a ring slot), dropped.
    pub truncated: u64,
}

// SAFETY: the mapping is owned by this value and touched only through &mut self.
unsafe impl Send for RxRing {}

impl RxRing {
    /// Sets up a ring of about `frames` slots (rounded up to whole 64 KiB blocks) on `fd`, an
    /// AF_PACKET socket that has received nothing yet.
    ///
    /// # Errors
    /// `setsockopt` (e.g. a ring already set) or `mmap` failure.
    pub fn new(fd: BorrowedFd<'_>, frames: usize) -> io::Result<Self> {
        setsockopt_int(fd, libc::SOL_PACKET, libc::PACKET_VERSION, TPACKET_V2)?;
        let blocks = frames.div_ceil(PER_BLOCK).max(1);
        let req = libc::tpacket_req {
            tp_block_size: (PER_BLOCK * FRAME_SIZE) as u32,
            tp_block_nr: blocks as u32,
            tp_frame_size: FRAME_SIZE as u32,
            tp_frame_nr: (blocks * PER_BLOCK) as u32,
        };
        // SAFETY: `req` is a live tpacket_req and its exact size is passed.
        cvt(unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_RX_RING,
                (&raw const req).cast::<c_void>(),
                size_of::<libc::tpacket_req>() as libc::socklen_t,
            )
        })?;
        let len = blocks * PER_BLOCK * FRAME_SIZE;
        // SAFETY: a fresh shared mapping of the ring the kernel just allocated for `fd`; the
        // pointer is checked below and unmapped in Drop.
        let p = unsafe {
            libc::mmap(
                ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::other("mmap: null"))?;
        Ok(Self {
            base,
            len,
            frames: blocks * PER_BLOCK,
            next: 0,
            truncated: 0,
        })
    }

    /// Copies the frames the kernel has placed in the ring into `batch` (appending) until it is
    /// full or the next slot is the kernel's. Returns the number appended.
    pub fn drain(&mut self, batch: &mut Batch) -> usize {
        let mut n = 0;
        while !batch.is_full() {
            // SAFETY: slot `next` lies inside the mapping (next < frames, frames * FRAME_SIZE
            // = len).
            let hdr = unsafe { self.base.as_ptr().add(self.next * FRAME_SIZE) };
            let h = hdr.cast::<libc::tpacket2_hdr>();
            // SAFETY: the slot starts with a tpacket2_hdr (page-aligned slots), read volatile
            // because the kernel changes it concurrently.
            let status = unsafe { ptr::read_volatile(&raw const (*h).tp_status) };
            if status & libc::TP_STATUS_USER == 0 {
                break;
            }
            // Acquire: the frame bytes were written before the status.
            fence(Ordering::Acquire);
            // SAFETY: as above; the kernel does not touch a slot while its status is USER.
            let (mac, snap, len) = unsafe {
                (
                    (*h).tp_mac as usize,
                    (*h).tp_snaplen as usize,
                    (*h).tp_len as usize,
                )
            };
            // A frame the slot truncated (snap < len) is dropped like a longer-than-slot one.
            if mac + snap <= FRAME_SIZE && snap <= SLOT_LEN && snap == len {
                // SAFETY: mac + snap ≤ FRAME_SIZE keeps the slice inside this slot.
                let frame = unsafe { core::slice::from_raw_parts(hdr.add(mac), snap) };
                batch.push_with(None, |slot| {
                    slot[..snap].copy_from_slice(frame);
                    Some(snap)
                });
                n += 1;
            } else {
                self.truncated += 1;
            }
            // Release: we are done with the bytes before the kernel may reuse the slot.
            fence(Ordering::Release);
            // SAFETY: as above.
            unsafe { ptr::write_volatile(&raw mut (*h).tp_status, libc::TP_STATUS_KERNEL) };
            self.next = (self.next + 1) % self.frames;
        }
        n
    }
}

impl Drop for RxRing {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once.
        unsafe { libc::munmap(self.base.as_ptr().cast::<c_void>(), self.len) };
    }
}
