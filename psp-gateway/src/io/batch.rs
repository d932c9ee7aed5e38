//! A fixed arena of frame slots: the unit of batched I/O (one `recvmmsg` fills it, one
//! `sendmmsg` drains it). Allocated once per task; the hot path never allocates.

use core::net::SocketAddr;
use std::io;

/// Bytes per slot: a jumbo Ethernet frame (MTU 9000 plus its 14-byte header) plus room for
/// the PSP overhead, rounded up to 9 KiB. An uplink with a larger MTU is used up to this size.
pub const SLOT_LEN: usize = 9216;

/// Frames handled per wake-up and direction (the work cap).
pub const BATCH: usize = 64;

/// A fixed set of `capacity` frame buffers of [`SLOT_LEN`] bytes, the first `len()` in use.
///
/// Public, with the methods `tests/io_root.rs` calls, for the integration tests; the rest is
/// `pub(crate)`.
#[derive(Debug)]
pub struct Batch {
    data: Box<[u8]>,
    lens: Box<[usize]>,
    addrs: Box<[Option<SocketAddr>]>,
    count: usize,
}

impl Batch {
    /// A batch of `capacity` empty slots.
    pub fn new(capacity: usize) -> Self {
        Self {
            data: vec![0; capacity * SLOT_LEN].into_boxed_slice(),
            lens: vec![0; capacity].into_boxed_slice(),
            addrs: vec![None; capacity].into_boxed_slice(),
            count: 0,
        }
    }

    /// The number of slots.
    pub(crate) fn capacity(&self) -> usize {
        self.lens.len()
    }

    /// The number of frames in the batch.
    pub fn len(&self) -> usize {
        self.count
    }

    /// True when no frame is in the batch.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// What a receive loop returns after `e`: the frames already received (the next call meets
    /// a lasting error again), or `e` itself when there are none.
    pub(crate) fn partial(&self, e: io::Error) -> io::Result<usize> {
        if self.is_empty() {
            Err(e)
        } else {
            Ok(self.count)
        }
    }

    /// True when every slot is in use.
    pub(crate) fn is_full(&self) -> bool {
        self.count == self.capacity()
    }

    /// Empties the batch (the bytes stay; they are overwritten by the next fill).
    pub fn clear(&mut self) {
        self.count = 0;
    }

    /// Sets the number of frames in use (after an I/O call filled slots `0..n` via
    /// [`slots_mut`](Self::slots_mut) and [`set_frame_len`](Self::set_frame_len)).
    ///
    /// # Panics
    /// If `n > capacity()`.
    pub(crate) fn set_len(&mut self, n: usize) {
        assert!(n <= self.capacity(), "batch length beyond capacity");
        self.count = n;
    }

    /// Frame `i` (a prefix of its slot).
    ///
    /// # Panics
    /// If `i >= len()`.
    pub fn frame(&self, i: usize) -> &[u8] {
        assert!(i < self.count, "batch index out of range");
        &self.data[i * SLOT_LEN..][..self.lens[i]]
    }

    /// Frame `i`, mutable (for opening in place).
    ///
    /// # Panics
    /// If `i >= len()`.
    pub(crate) fn frame_mut(&mut self, i: usize) -> &mut [u8] {
        assert!(i < self.count, "batch index out of range");
        &mut self.data[i * SLOT_LEN..][..self.lens[i]]
    }

    /// The peer address of frame `i` (UDP uplinks: source on receive, destination on send).
    ///
    /// # Panics
    /// If `i >= capacity()`.
    pub fn addr(&self, i: usize) -> Option<SocketAddr> {
        self.addrs[i]
    }

    /// Sets the length of slot `i`'s frame (used by I/O code after filling a slot).
    ///
    /// # Panics
    /// If `i >= capacity()` or `len > SLOT_LEN`.
    pub(crate) fn set_frame_len(&mut self, i: usize, len: usize) {
        assert!(len <= SLOT_LEN, "frame longer than a slot");
        self.lens[i] = len;
    }

    /// Sets the peer address of slot `i`.
    ///
    /// # Panics
    /// If `i >= capacity()`.
    pub fn set_addr(&mut self, i: usize, addr: Option<SocketAddr>) {
        self.addrs[i] = addr;
    }

    /// Slot `i` as a whole `SLOT_LEN` buffer (for I/O code filling it before
    /// [`set_frame_len`](Self::set_frame_len) and [`set_len`](Self::set_len)).
    ///
    /// # Panics
    /// If `i >= capacity()`.
    pub(crate) fn slot_mut(&mut self, i: usize) -> &mut [u8] {
        &mut self.data[i * SLOT_LEN..][..SLOT_LEN]
    }

    /// Copies the first `len` bytes of slot `from` to slot `to` (I/O code compacting a
    /// receive after dropping a message).
    ///
    /// # Panics
    /// If either index is `>= capacity()` or `len > SLOT_LEN`.
    pub(crate) fn move_slot(&mut self, from: usize, to: usize, len: usize) {
        assert!(len <= SLOT_LEN, "frame longer than a slot");
        assert!(
            from < self.capacity() && to < self.capacity(),
            "slot index out of range"
        );
        self.data
            .copy_within(from * SLOT_LEN..from * SLOT_LEN + len, to * SLOT_LEN);
    }

    /// All slots as whole `SLOT_LEN` buffers, for I/O code that fills several at once.
    pub(crate) fn slots_mut(&mut self) -> impl Iterator<Item = &mut [u8]> {
        self.data.chunks_exact_mut(SLOT_LEN)
    }

    /// Slot `slot` as a whole (a frame written there but not committed yet starts it).
    ///
    /// # Panics
    /// If `slot >= capacity()`.
    pub(crate) fn slot(&self, slot: usize) -> &[u8] {
        &self.data[slot * SLOT_LEN..(slot + 1) * SLOT_LEN]
    }

    /// Appends the frame already written at the start of slot `slot` (`slot >= len()`, e.g.
    /// by a batch sealer writing into several free slots at once), moving it down to slot
    /// `len()` when earlier slots were left unused.
    ///
    /// # Panics
    /// If `slot < len()`, `slot >= capacity()` or `len > SLOT_LEN`.
    pub(crate) fn commit_slot(&mut self, slot: usize, len: usize, addr: Option<SocketAddr>) {
        assert!(slot >= self.count && slot < self.capacity() && len <= SLOT_LEN);
        let i = self.count;
        if slot != i {
            self.data
                .copy_within(slot * SLOT_LEN..slot * SLOT_LEN + len, i * SLOT_LEN);
        }
        self.lens[i] = len;
        self.addrs[i] = addr;
        self.count += 1;
    }

    /// Appends a frame written by `fill` into the next free slot (which gets the whole
    /// `SLOT_LEN` buffer and returns the length it wrote, or `None` to discard).
    /// Returns false, without calling `fill`, when the batch is full.
    pub fn push_with(
        &mut self,
        addr: Option<SocketAddr>,
        fill: impl FnOnce(&mut [u8]) -> Option<usize>,
    ) -> bool {
        if self.is_full() {
            return false;
        }
        let i = self.count;
        let slot = &mut self.data[i * SLOT_LEN..][..SLOT_LEN];
        if let Some(len) = fill(slot) {
            self.lens[i] = len.min(SLOT_LEN);
            self.addrs[i] = addr;
            self.count += 1;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_keeps_received_frames() {
        let mut b = Batch::new(2);
        let err = || io::Error::from(io::ErrorKind::ConnectionRefused);
        assert_eq!(
            b.partial(err()).unwrap_err().kind(),
            io::ErrorKind::ConnectionRefused
        );
        b.set_len(1);
        assert_eq!(b.partial(err()).unwrap(), 1);
    }

    #[test]
    fn push_and_read_back() {
        let mut b = Batch::new(2);
        assert!(b.push_with(None, |s| {
            s[..3].copy_from_slice(b"abc");
            Some(3)
        }));
        assert!(b.push_with(None, |_| None));
        assert_eq!(b.len(), 1);
        assert!(b.push_with(None, |s| {
            s[0] = 9;
            Some(1)
        }));
        assert!(b.is_full());
        assert!(!b.push_with(None, |_| Some(1)));
        assert_eq!(b.frame(0), b"abc");
        assert_eq!(b.frame(1), [9]);
        b.clear();
        assert!(b.is_empty());
    }

    #[test]
    fn commit_slot_closes_holes() {
        let mut b = Batch::new(3);
        for (i, s) in b.slots_mut().enumerate() {
            s[0] = i as u8;
        }
        b.commit_slot(0, 1, None);
        // Slot 1 failed; slot 2 moves down to 1.
        b.commit_slot(2, 1, None);
        assert_eq!(b.len(), 2);
        assert_eq!(b.frame(0), [0]);
        assert_eq!(b.frame(1), [2]);
    }
}
