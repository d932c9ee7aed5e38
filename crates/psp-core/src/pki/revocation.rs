//! The revocation list: layout, signing, parsing, verification.
//!
//! ```text
//! off  len  field
//!   0    1  version (1)
//!   1    1  kind: 0x03 revocation list
//!   2    8  number (the list's version: a member takes only a higher one)
//!  10    8  issued (Unix seconds)
//!  18    2  count n (0..=128)
//!  20   8n  revoked serials, strictly increasing
//!   +   64  Ed25519 signature by the CA over SHA-256("psp-crl-v1" || every byte above)
//! ```

use super::{PkiError, Reader, VERSION, Writer, digest, sign_labelled};
use crate::{SigningKey, VerifyingKey};

/// At most this many serials in one list (so a list fits one control message in a frame).
pub const MAX_REVOKED: usize = 128;
/// The longest encoded list.
pub const MAX_CRL_LEN: usize = FIXED + 8 * MAX_REVOKED + 64;

const FIXED: usize = 20;
const KIND: u8 = 3;
const LABEL: &[u8] = b"psp-crl-v1";

/// A revocation list as bytes, with its fields parsed (not verified: see
/// [`RevocationList::verify`]).
#[derive(Clone)]
pub struct RevocationList {
    bytes: [u8; MAX_CRL_LEN],
    len: u16,
    number: u64,
    issued: u64,
    serials: [u64; MAX_REVOKED],
    count: u16,
}

impl RevocationList {
    /// The list number `number`, issued at `issued` (Unix seconds), revoking `serials` (in any
    /// order; duplicates are merged), signed with the CA's key.
    ///
    /// # Errors
    /// [`PkiError::TooMany`] beyond [`MAX_REVOKED`] serials.
    pub fn sign(
        number: u64,
        issued: u64,
        serials: &[u64],
        ca: &SigningKey,
    ) -> Result<Self, PkiError> {
        let mut s = [0u64; MAX_REVOKED];
        let mut count = 0usize;
        for &x in serials {
            if s[..count].contains(&x) {
                continue;
            }
            if count == MAX_REVOKED {
                return Err(PkiError::TooMany);
            }
            s[count] = x;
            count += 1;
        }
        s[..count].sort_unstable();
        let mut bytes = [0u8; MAX_CRL_LEN];
        let mut w = Writer::new(&mut bytes);
        w.put(&[VERSION, KIND]);
        w.put(&number.to_be_bytes());
        w.put(&issued.to_be_bytes());
        w.put(&(count as u16).to_be_bytes());
        for x in &s[..count] {
            w.put(&x.to_be_bytes());
        }
        let body = w.at;
        let sig = sign_labelled(ca, LABEL, &bytes[..body]);
        bytes[body..body + 64].copy_from_slice(&sig);
        Ok(Self {
            bytes,
            len: (body + 64) as u16,
            number,
            issued,
            serials: s,
            count: count as u16,
        })
    }

    /// The empty list number 0: what a member holds before it has seen any.
    pub fn empty() -> Self {
        Self {
            bytes: [0; MAX_CRL_LEN],
            len: 0,
            number: 0,
            issued: 0,
            serials: [0; MAX_REVOKED],
            count: 0,
        }
    }

    /// Parses a list (every length and the serials' order checked; the signature is not).
    ///
    /// # Errors
    /// Any [`PkiError`] of the format.
    pub fn parse(input: &[u8]) -> Result<Self, PkiError> {
        if input.len() > MAX_CRL_LEN {
            return Err(PkiError::Length);
        }
        let mut r = Reader::new(input);
        if r.u8()? != VERSION {
            return Err(PkiError::Version);
        }
        if r.u8()? != KIND {
            return Err(PkiError::Kind);
        }
        let number = r.u64()?;
        let issued = r.u64()?;
        let count = usize::from(r.u16()?);
        if count > MAX_REVOKED {
            return Err(PkiError::TooMany);
        }
        let mut serials = [0u64; MAX_REVOKED];
        for i in 0..count {
            serials[i] = r.u64()?;
            if i > 0 && serials[i] <= serials[i - 1] {
                return Err(PkiError::Field);
            }
        }
        r.take(64)?;
        if r.at != input.len() {
            return Err(PkiError::Length);
        }
        let mut bytes = [0u8; MAX_CRL_LEN];
        bytes[..input.len()].copy_from_slice(input);
        Ok(Self {
            bytes,
            len: input.len() as u16,
            number,
            issued,
            serials,
            count: count as u16,
        })
    }

    /// Checks the CA's signature.
    ///
    /// # Errors
    /// [`PkiError::Signature`] (also for [`empty`](Self::empty), which has none).
    pub fn verify(&self, ca: &VerifyingKey) -> Result<(), PkiError> {
        let len = usize::from(self.len);
        if len < 64 {
            return Err(PkiError::Signature);
        }
        let d = digest(LABEL, &self.bytes[..len - 64]);
        ca.verify(&d, &self.bytes[len - 64..len])
            .map_err(|_| PkiError::Signature)
    }

    /// Whether the list revokes `serial`.
    pub fn revokes(&self, serial: u64) -> bool {
        self.serials().binary_search(&serial).is_ok()
    }

    /// The list's number (its version).
    pub fn number(&self) -> u64 {
        self.number
    }

    /// When the CA issued it (Unix seconds).
    pub fn issued(&self) -> u64 {
        self.issued
    }

    /// The revoked serials, increasing.
    pub fn serials(&self) -> &[u64] {
        &self.serials[..usize::from(self.count)]
    }

    /// The encoded list (empty for [`empty`](Self::empty)).
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

impl PartialEq for RevocationList {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes() && self.number == other.number
    }
}

impl Eq for RevocationList {}

impl core::fmt::Debug for RevocationList {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("RevocationList")
            .field("number", &self.number)
            .field("serials", &self.serials())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ca() -> SigningKey {
        SigningKey::from_seed(&[0xca; 32]).unwrap()
    }

    /// The vector docs/MEMBERSHIP.md prints: CA seed 0xca×32, list 2 issued at 1,800,000,000
    /// revoking serials 3 and 9.
    #[test]
    fn known_answer() {
        let l = RevocationList::sign(2, 1_800_000_000, &[9, 3, 9], &ca()).unwrap();
        assert_eq!(hex::encode(l.as_bytes()), VECTOR);
        let p = RevocationList::parse(l.as_bytes()).unwrap();
        assert_eq!(p, l);
        assert_eq!(p.serials(), &[3, 9]);
        p.verify(&ca().public_key()).unwrap();
        assert!(p.revokes(3) && p.revokes(9) && !p.revokes(4));
    }

    const VECTOR: &str = concat!(
        "01030000000000000002000000006b49d2000002000000000000000300000000",
        "000000091db2ccf70fae913bc567df40ecbe5134ac3ebe687e15c624ee7813c9",
        "5445be612d6c2999198848c672cec32fbd0024c1c4f08fcd003e4e540ffacd31",
        "c113c00d",
    );

    #[test]
    fn refuses_tampering_other_ca_order_and_size() {
        let l = RevocationList::sign(2, 1_800_000_000, &[3, 9], &ca()).unwrap();
        let b = l.as_bytes().to_vec();
        let other = SigningKey::from_seed(&[0xcb; 32]).unwrap().public_key();
        assert_eq!(l.verify(&other), Err(PkiError::Signature));
        for i in 0..b.len() {
            let mut t = b.clone();
            t[i] ^= 1;
            if let Ok(p) = RevocationList::parse(&t) {
                assert_eq!(
                    p.verify(&ca().public_key()),
                    Err(PkiError::Signature),
                    "{i}"
                );
            }
        }
        for n in 0..b.len() {
            assert!(RevocationList::parse(&b[..n]).is_err());
        }
        let mut swapped = b.clone();
        swapped[20..28].copy_from_slice(&9u64.to_be_bytes());
        swapped[28..36].copy_from_slice(&3u64.to_be_bytes());
        assert_eq!(RevocationList::parse(&swapped), Err(PkiError::Field));
        let many: Vec<u64> = (0..=MAX_REVOKED as u64).collect();
        assert_eq!(
            RevocationList::sign(1, 0, &many, &ca()).map(|_| ()),
            Err(PkiError::TooMany)
        );
        let full = RevocationList::sign(1, 0, &many[..MAX_REVOKED], &ca()).unwrap();
        assert_eq!(full.as_bytes().len(), MAX_CRL_LEN);
        assert_eq!(
            RevocationList::empty().verify(&ca().public_key()),
            Err(PkiError::Signature)
        );
    }
}
