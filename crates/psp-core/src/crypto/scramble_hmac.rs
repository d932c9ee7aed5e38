//! The `scramble-hmac-sha1` suite: a per-frame byte scrambler plus HMAC-SHA1.
//!
//! Each frame gets a fresh scrambler seeded with `HMAC-SHA1(K = key, M = BIVN || SN_be32)`, so a
//! lost frame never desynchronises the next one. This is obfuscation, not encryption: the
//! scrambler is not a cipher with a security proof. Integrity comes from the HMAC alone.

use crate::crypto::hmac_sha1::HmacSha1Key;
use crate::scramble::{Descrambler, Scrambler, Seed};

/// The per-frame scrambler seed: `HMAC-SHA1(K = key, M = BIVN || SN_be32)`.
pub(crate) fn frame_seed(mac: &HmacSha1Key, bivn: &[u8; 20], seq: u32) -> Seed {
    Seed::from_bytes(mac.mac(&[bivn, &seq.to_be_bytes()]))
}

/// Scrambles `section` in place for frame `seq`.
pub(crate) fn scramble(mac: &HmacSha1Key, bivn: &[u8; 20], seq: u32, section: &mut [u8]) {
    Scrambler::new(&frame_seed(mac, bivn, seq)).scramble_in_place(section);
}

/// Descrambles `section` in place for frame `seq`.
pub(crate) fn descramble(mac: &HmacSha1Key, bivn: &[u8; 20], seq: u32, section: &mut [u8]) {
    Descrambler::new(&frame_seed(mac, bivn, seq)).descramble_in_place(section);
}
