//! Blowfish in CBC mode, written over `blowfish::Blowfish` (no `cbc` crate).
//!
//! The loop keeps the chaining value in a `u64` and works in place; decryption chains with the
//! previous *ciphertext* block, saved before the block is decrypted. Nothing is allocated.
//! Padding is the caller's job: lengths must be multiples of [`BLOCK_LEN`].

use blowfish::Blowfish;
use cipher::generic_array::GenericArray;
use cipher::{BlockDecrypt, BlockEncrypt, KeyInit};

use crate::crypto::{CryptoError, KeyError};

/// Blowfish block length in bytes.
pub const BLOCK_LEN: usize = 8;
/// Shortest Blowfish key in bytes.
pub const MIN_KEY_LEN: usize = 4;
/// Longest Blowfish key in bytes (448 bits).
pub const MAX_KEY_LEN: usize = 56;

/// An expanded Blowfish key schedule used for CBC and for single blocks.
#[derive(Clone)]
pub struct BlowfishCbc {
    bf: Blowfish,
}

impl BlowfishCbc {
    /// Expands `key` (4 to 56 bytes).
    ///
    /// # Errors
    /// [`KeyError::WrongLength`] outside 4..=56 bytes (`expected` is the maximum).
    pub fn new(key: &[u8]) -> Result<Self, KeyError> {
        let bf = Blowfish::new_from_slice(key).map_err(|_| KeyError::WrongLength {
            expected: MAX_KEY_LEN,
            got: key.len(),
        })?;
        Ok(Self { bf })
    }

    /// Encrypts one block in place (ECB).
    #[inline]
    pub fn encrypt_block(&self, block: &mut [u8; BLOCK_LEN]) {
        self.bf.encrypt_block(GenericArray::from_mut_slice(block));
    }

    /// Decrypts one block in place (ECB).
    #[inline]
    pub fn decrypt_block(&self, block: &mut [u8; BLOCK_LEN]) {
        self.bf.decrypt_block(GenericArray::from_mut_slice(block));
    }

    /// CBC-encrypts `buf` in place with `iv`.
    ///
    /// # Errors
    /// [`CryptoError::BadBlockLength`] if `buf.len()` is not a multiple of [`BLOCK_LEN`]; `buf`
    /// is untouched then.
    pub fn encrypt_in_place(
        &self,
        iv: &[u8; BLOCK_LEN],
        buf: &mut [u8],
    ) -> Result<(), CryptoError> {
        if !buf.len().is_multiple_of(BLOCK_LEN) {
            return Err(CryptoError::BadBlockLength);
        }
        let mut chain = u64::from_be_bytes(*iv);
        for chunk in buf.chunks_exact_mut(BLOCK_LEN) {
            let block: &mut [u8; BLOCK_LEN] =
                chunk.try_into().map_err(|_| CryptoError::Internal)?;
            *block = (u64::from_be_bytes(*block) ^ chain).to_be_bytes();
            self.encrypt_block(block);
            chain = u64::from_be_bytes(*block);
        }
        Ok(())
    }

    /// CBC-decrypts `buf` in place with `iv`.
    ///
    /// # Errors
    /// [`CryptoError::BadBlockLength`] if `buf.len()` is not a multiple of [`BLOCK_LEN`]; `buf`
    /// is untouched then.
    pub fn decrypt_in_place(
        &self,
        iv: &[u8; BLOCK_LEN],
        buf: &mut [u8],
    ) -> Result<(), CryptoError> {
        if !buf.len().is_multiple_of(BLOCK_LEN) {
            return Err(CryptoError::BadBlockLength);
        }
        let mut chain = u64::from_be_bytes(*iv);
        for chunk in buf.chunks_exact_mut(BLOCK_LEN) {
            let block: &mut [u8; BLOCK_LEN] =
                chunk.try_into().map_err(|_| CryptoError::Internal)?;
            let ciphertext = u64::from_be_bytes(*block);
            self.decrypt_block(block);
            *block = (u64::from_be_bytes(*block) ^ chain).to_be_bytes();
            chain = ciphertext;
        }
        Ok(())
    }

    /// The per-frame IV: `Blowfish_K(BIVN[0..8] XOR (0u32 || SN_be32))`.
    ///
    /// Distinct SNs give distinct IVs (Blowfish is a permutation) that cannot be predicted
    /// without the key.
    pub fn derive_iv(&self, bivn: &[u8; 20], seq: u32) -> [u8; BLOCK_LEN] {
        let mut iv = [0u8; BLOCK_LEN];
        iv.copy_from_slice(&bivn[..BLOCK_LEN]);
        let iv_word = u64::from_be_bytes(iv) ^ u64::from(seq);
        let mut iv = iv_word.to_be_bytes();
        self.encrypt_block(&mut iv);
        iv
    }
}

impl core::fmt::Debug for BlowfishCbc {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("BlowfishCbc(..)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_length_limits() {
        assert!(BlowfishCbc::new(&[0; 3]).is_err());
        assert!(BlowfishCbc::new(&[0; 4]).is_ok());
        assert!(BlowfishCbc::new(&[0; 56]).is_ok());
        assert_eq!(
            BlowfishCbc::new(&[0; 57]).unwrap_err(),
            KeyError::WrongLength {
                expected: 56,
                got: 57
            }
        );
    }

    #[test]
    fn cbc_round_trip_and_chaining() {
        let c = BlowfishCbc::new(&[7; 32]).unwrap();
        let iv = [1, 2, 3, 4, 5, 6, 7, 8];
        let plain = [0x42u8; 64];
        let mut buf = plain;
        c.encrypt_in_place(&iv, &mut buf).unwrap();
        // Identical plaintext blocks must give distinct ciphertext blocks under CBC.
        assert_ne!(buf[..8], buf[8..16]);
        c.decrypt_in_place(&iv, &mut buf).unwrap();
        assert_eq!(buf, plain);
    }

    #[test]
    fn cbc_matches_manual_ecb_chain() {
        let c = BlowfishCbc::new(b"0123456789abcdef").unwrap();
        let iv = [9u8; 8];
        let mut buf: [u8; 16] = core::array::from_fn(|i| i as u8);
        let plain = buf;
        c.encrypt_in_place(&iv, &mut buf).unwrap();
        let mut b0: [u8; 8] = core::array::from_fn(|i| plain[i] ^ iv[i]);
        c.encrypt_block(&mut b0);
        let mut b1: [u8; 8] = core::array::from_fn(|i| plain[8 + i] ^ b0[i]);
        c.encrypt_block(&mut b1);
        assert_eq!(buf[..8], b0);
        assert_eq!(buf[8..], b1);
    }

    #[test]
    fn bad_block_length() {
        let c = BlowfishCbc::new(&[7; 32]).unwrap();
        let mut buf = [5u8; 9];
        assert_eq!(
            c.encrypt_in_place(&[0; 8], &mut buf),
            Err(CryptoError::BadBlockLength)
        );
        assert_eq!(
            c.decrypt_in_place(&[0; 8], &mut buf),
            Err(CryptoError::BadBlockLength)
        );
        assert_eq!(buf, [5u8; 9]);
        let mut empty: [u8; 0] = [];
        assert_eq!(c.encrypt_in_place(&[0; 8], &mut empty), Ok(()));
    }
}
