//! HMAC-SHA-256 (RFC 2104) and HKDF-SHA-256 (RFC 5869) for the handshake's key schedule, with
//! every intermediate secret (padded-key states, PRK, output blocks) wiped: [`HmacState`] over
//! `sha2::compress256`. The `hmac` and `hkdf` crates keep these in states they never zeroize.

use sha2::digest::generic_array::GenericArray;
use zeroize::Zeroize;

use super::hmac_md::{BLOCK, Compress, HmacState};

/// Length of an HMAC-SHA-256 tag and of an HKDF-SHA-256 PRK in bytes.
pub(crate) const MAC_LEN: usize = 32;

/// SHA-256 as a compression function.
pub(crate) struct Sha256;

impl Compress<8> for Sha256 {
    /// FIPS 180-4 §5.3.3.
    const IV: [u32; 8] = [
        0x6a09_e667,
        0xbb67_ae85,
        0x3c6e_f372,
        0xa54f_f53a,
        0x510e_527f,
        0x9b05_688c,
        0x1f83_d9ab,
        0x5be0_cd19,
    ];

    #[inline(always)]
    fn compress(state: &mut [u32; 8], block: &[u8]) {
        debug_assert_eq!(block.len(), BLOCK);
        sha2::compress256(
            state,
            core::slice::from_ref(GenericArray::from_slice(block)),
        );
    }
}

/// An HMAC-SHA-256 key (the padded key blocks compressed once). Wiped on drop.
#[derive(Clone)]
pub(crate) struct HmacSha256Key(HmacState<8>);

impl HmacSha256Key {
    /// Keys HMAC-SHA-256 with `key` (any length).
    pub(crate) fn new(key: &[u8]) -> Self {
        Self(HmacState::new::<Sha256>(key))
    }

    /// HMAC-SHA-256 over the concatenation of `parts`.
    pub(crate) fn mac(&self, parts: &[&[u8]]) -> [u8; MAC_LEN] {
        let mut tag = [0u8; MAC_LEN];
        self.0.mac::<Sha256>(parts, &mut tag);
        tag
    }
}

impl core::fmt::Debug for HmacSha256Key {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("HmacSha256Key(..)")
    }
}

/// HKDF-SHA-256 after Extract: the PRK, held only as an HMAC key state. Wiped on drop.
#[derive(Debug)]
pub(crate) struct Hkdf(HmacSha256Key);

/// HKDF cannot expand to more than 255 blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TooLong;

impl Hkdf {
    /// HKDF-Extract(salt, ikm), with `ikm` the concatenation of `ikm_parts`.
    pub(crate) fn extract(salt: &[u8], ikm_parts: &[&[u8]]) -> Self {
        let mut prk = HmacSha256Key::new(salt).mac(ikm_parts);
        let key = HmacSha256Key::new(&prk);
        prk.zeroize();
        Self(key)
    }

    /// HKDF-Expand(PRK, info, out.len()), with `info` the concatenation of `info_parts`.
    ///
    /// # Errors
    /// [`TooLong`] if `out` is longer than 255 * 32 bytes (then `out` is unchanged).
    pub(crate) fn expand(&self, info_parts: &[&[u8]], out: &mut [u8]) -> Result<(), TooLong> {
        if out.len() > 255 * MAC_LEN {
            return Err(TooLong);
        }
        let mut t = [0u8; MAC_LEN];
        let mut t_len = 0;
        for (i, chunk) in out.chunks_mut(MAC_LEN).enumerate() {
            // T(i) = HMAC(PRK, T(i-1) || info || i), i from 1; the bound above keeps it a byte.
            let counter = [(i + 1) as u8];
            let mut parts: [&[u8]; 10] = [&[]; 10];
            parts[0] = &t[..t_len];
            let n = info_parts.len().min(8);
            parts[1..1 + n].copy_from_slice(&info_parts[..n]);
            parts[1 + n] = &counter;
            let next = self.0.mac(&parts[..2 + n]);
            t.copy_from_slice(&next);
            t_len = MAC_LEN;
            chunk.copy_from_slice(&t[..chunk.len()]);
        }
        t.zeroize();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use hmac::{Hmac, Mac};

    use super::*;

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn hmac_matches_the_hmac_crate_across_lengths_and_splits() {
        let data: Vec<u8> = (0..300u32).map(|i| (i * 31 + 7) as u8).collect();
        for key_len in [0, 1, 32, 63, 64, 65, 131] {
            let key = &data[..key_len];
            let k = HmacSha256Key::new(key);
            for len in (0..200).chain([255, 256, 299]) {
                let msg = &data[..len];
                let mut reference = <Hmac<sha2::Sha256> as Mac>::new_from_slice(key).unwrap();
                reference.update(msg);
                let expected: [u8; MAC_LEN] = reference.finalize().into_bytes().into();
                assert_eq!(k.mac(&[msg]), expected, "key {key_len} len {len}");
                let (a, b) = msg.split_at(len / 3);
                assert_eq!(k.mac(&[a, b]), expected, "key {key_len} len {len} split");
            }
        }
    }

    /// RFC 4231 test case 2.
    #[test]
    fn rfc4231_case_2() {
        let k = HmacSha256Key::new(b"Jefe");
        assert_eq!(
            k.mac(&[b"what do ya want ", b"for nothing?"]).to_vec(),
            unhex("5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
        );
    }

    /// RFC 5869 test cases 1 and 3 (A.1, A.3).
    #[test]
    fn rfc5869_vectors() {
        let ikm = unhex("0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b");
        let salt = unhex("000102030405060708090a0b0c");
        let info = unhex("f0f1f2f3f4f5f6f7f8f9");
        let mut okm = [0u8; 42];
        let (i1, i2) = info.split_at(4);
        Hkdf::extract(&salt, &[&ikm[..5], &ikm[5..]])
            .expand(&[i1, i2], &mut okm)
            .unwrap();
        assert_eq!(
            okm.to_vec(),
            unhex(
                "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865"
            )
        );
        let mut okm = [0u8; 42];
        Hkdf::extract(&[], &[&ikm]).expand(&[], &mut okm).unwrap();
        assert_eq!(
            okm.to_vec(),
            unhex(
                "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8"
            )
        );
        let mut big = [0u8; 255 * 32 + 1];
        assert_eq!(
            Hkdf::extract(&[], &[&ikm]).expand(&[], &mut big),
            Err(TooLong)
        );
    }

    #[test]
    fn matches_the_hkdf_crate_for_long_outputs() {
        let mut ours = [0u8; 200];
        let mut theirs = [0u8; 200];
        Hkdf::extract(b"salt", &[b"ikm"])
            .expand(&[b"in", b"fo"], &mut ours)
            .unwrap();
        hkdf::Hkdf::<sha2::Sha256>::new(Some(b"salt"), b"ikm")
            .expand(b"info", &mut theirs)
            .unwrap();
        assert_eq!(ours, theirs);
    }
}
