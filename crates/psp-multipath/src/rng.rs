//! [`SetupRng`]: the OS random number generator for one set-up, read once. A set-up draws its
//! randomness in a handful of small pieces (group id, ephemeral secret, nonce, handshake id,
//! jitter, the ML-KEM seed or coins); on a kernel and libc without a vDSO `getrandom` each
//! piece was a system call on the set-up's critical path. This reads 256 bytes at once and
//! hands them out, zeroizing each piece in the buffer as it goes and the rest on drop.

use rand_core::{CryptoRng, Error as RngError, RngCore};
use zeroize::Zeroize;

/// Bytes read from the OS at a time: more than a set-up draws (at most about 150).
const BUF_LEN: usize = 256;

/// Bytes from the OS RNG, read [`BUF_LEN`] at a time (see the module docs).
pub(crate) struct SetupRng {
    buf: [u8; BUF_LEN],
    pos: usize,
}

impl SetupRng {
    /// A generator with its first bytes read.
    ///
    /// # Errors
    /// The OS generator's failure (checked here, so the handshake never meets it).
    pub(crate) fn new() -> Result<Self, getrandom::Error> {
        let mut r = Self {
            buf: [0; BUF_LEN],
            pos: 0,
        };
        getrandom::fill(&mut r.buf)?;
        Ok(r)
    }

    fn take(&mut self, dest: &mut [u8]) -> Result<(), getrandom::Error> {
        let mut done = 0;
        while done < dest.len() {
            if self.pos == BUF_LEN {
                getrandom::fill(&mut self.buf)?;
                self.pos = 0;
            }
            let n = (dest.len() - done).min(BUF_LEN - self.pos);
            let src = &mut self.buf[self.pos..self.pos + n];
            dest[done..done + n].copy_from_slice(src);
            // A piece handed out is not kept.
            src.zeroize();
            self.pos += n;
            done += n;
        }
        Ok(())
    }
}

impl RngCore for SetupRng {
    fn next_u32(&mut self) -> u32 {
        rand_core::impls::next_u32_via_fill(self)
    }

    fn next_u64(&mut self) -> u64 {
        rand_core::impls::next_u64_via_fill(self)
    }

    /// # Panics
    /// If the OS generator fails on a refill (as `rand_core::OsRng` does); [`SetupRng::new`]
    /// already read once, and a set-up never needs a refill.
    fn fill_bytes(&mut self, dest: &mut [u8]) {
        if let Err(e) = self.take(dest) {
            panic!("the OS random number generator failed: {e}");
        }
    }

    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), RngError> {
        self.take(dest).map_err(|e| {
            RngError::from(
                core::num::NonZeroU32::new(e.raw_os_error().map_or(1, |c| c.unsigned_abs()))
                    .unwrap_or(core::num::NonZeroU32::MIN),
            )
        })
    }
}

impl CryptoRng for SetupRng {}

impl Drop for SetupRng {
    #[inline(never)]
    fn drop(&mut self) {
        self.buf.zeroize();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hands_out_fresh_bytes_and_keeps_none() {
        let mut r = SetupRng::new().unwrap();
        let (mut a, mut b) = ([0u8; 200], [0u8; 200]);
        r.fill_bytes(&mut a);
        // Past the buffer's end: a refill.
        r.fill_bytes(&mut b);
        assert_ne!(a, b);
        assert_ne!(a, [0; 200]);
        assert!(
            r.buf[..r.pos].iter().all(|&x| x == 0),
            "handed-out bytes zeroized"
        );
        assert_eq!(r.pos, 400 - BUF_LEN);
    }
}
