//! HMAC (RFC 2104) over a Merkle–Damgård hash given by its compression function, with every
//! secret state in arrays this crate owns and wipes.
//!
//! [`HmacState`] stores only the chaining values after the inner and outer padded key blocks
//! (`H(K ^ ipad)` and `H(K ^ opad)` before finalisation), so nothing about the key is processed
//! per message. The library hash types (`sha1::Sha1`, `sha2::Sha256`, `hmac::Hmac`) keep their
//! states in memory they never wipe; going through the bare compression functions
//! (`sha1::compress`, `sha2::compress256`, SHA-NI when the CPU has it) lets the key schedule, the
//! per-message state and the buffers be zeroized. HMAC-SHA1 ([`super::hmac_sha1`]) and
//! HMAC-SHA-256 ([`super::hmac_sha256`]) are this type with their compression function.

use zeroize::Zeroize;

/// The block length of SHA-1 and SHA-256 in bytes.
pub(crate) const BLOCK: usize = 64;

/// A Merkle–Damgård hash with 64-byte blocks and a `W`-word big-endian state (SHA-1: 5,
/// SHA-256: 8); the digest is the whole state.
pub(crate) trait Compress<const W: usize> {
    /// The initial chaining value.
    const IV: [u32; W];
    /// One compression of a [`BLOCK`]-byte block.
    fn compress(state: &mut [u32; W], block: &[u8]);
}

/// An HMAC key with its padded key blocks already compressed. Wiped on drop.
#[derive(Clone)]
pub(crate) struct HmacState<const W: usize> {
    inner: [u32; W],
    outer: [u32; W],
}

impl<const W: usize> HmacState<W> {
    /// Keys HMAC with `key` (any length; keys over a block are hashed first, RFC 2104).
    pub(crate) fn new<H: Compress<W>>(key: &[u8]) -> Self {
        let mut block = [0u8; BLOCK];
        if key.len() > BLOCK {
            let mut digest = hash::<H, W>(H::IV, 0, &[key]);
            write_words(&digest, &mut block);
            digest.zeroize();
        } else {
            block[..key.len()].copy_from_slice(key);
        }
        let mut inner = H::IV;
        let mut outer = H::IV;
        block.iter_mut().for_each(|b| *b ^= 0x36);
        H::compress(&mut inner, &block);
        block.iter_mut().for_each(|b| *b ^= 0x36 ^ 0x5c);
        H::compress(&mut outer, &block);
        block.zeroize();
        Self { inner, outer }
    }

    /// HMAC over the concatenation of `parts`, written into `out` (`4 * W` bytes, or its first
    /// bytes if shorter).
    #[inline]
    pub(crate) fn mac<H: Compress<W>>(&self, parts: &[&[u8]], out: &mut [u8]) {
        // The inner hash has already absorbed one block (the padded key).
        let mut inner = hash::<H, W>(self.inner, BLOCK as u64, parts);
        let mut digest = [0u8; 32];
        let digest = &mut digest[..4 * W];
        write_words(&inner, digest);
        let mut outer = hash::<H, W>(self.outer, BLOCK as u64, &[digest]);
        write_words(&outer, out);
        inner.zeroize();
        outer.zeroize();
        digest.zeroize();
    }
}

impl<const W: usize> Drop for HmacState<W> {
    #[inline(never)]
    fn drop(&mut self) {
        self.inner.zeroize();
        self.outer.zeroize();
    }
}

/// Continues a hash from `state` (after `done` bytes already compressed) over `parts` and
/// finishes it (MD padding: 0x80, zeros, the 64-bit big-endian bit length).
#[inline(always)]
fn hash<H: Compress<W>, const W: usize>(
    mut state: [u32; W],
    done: u64,
    parts: &[&[u8]],
) -> [u32; W] {
    let mut buf = [0u8; BLOCK];
    let mut buf_len = 0;
    let mut total = done;
    for part in parts {
        total += part.len() as u64;
        let mut data = *part;
        if buf_len > 0 {
            let take = data.len().min(BLOCK - buf_len);
            buf[buf_len..buf_len + take].copy_from_slice(&data[..take]);
            buf_len += take;
            data = &data[take..];
            if buf_len < BLOCK {
                continue;
            }
            H::compress(&mut state, &buf);
        }
        let mut blocks = data.chunks_exact(BLOCK);
        for block in &mut blocks {
            H::compress(&mut state, block);
        }
        let rest = blocks.remainder();
        buf[..rest.len()].copy_from_slice(rest);
        buf_len = rest.len();
    }
    buf[buf_len] = 0x80;
    buf[buf_len + 1..].fill(0);
    if buf_len + 1 > BLOCK - 8 {
        H::compress(&mut state, &buf);
        buf.fill(0);
    }
    buf[BLOCK - 8..].copy_from_slice(&(total * 8).to_be_bytes());
    H::compress(&mut state, &buf);
    buf.zeroize();
    state
}

/// Writes the state words big-endian into `out` (as many as fit).
#[inline(always)]
fn write_words<const W: usize>(words: &[u32; W], out: &mut [u8]) {
    for (chunk, word) in out.chunks_mut(4).zip(words) {
        chunk.copy_from_slice(&word.to_be_bytes()[..chunk.len()]);
    }
}
