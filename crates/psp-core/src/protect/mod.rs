//! Frame protection: seal and open whole PSP layer-2 frames under one key (thesis §4.1–§4.5;
//! the thesis calls it the session key). Where the keys come from is not this module's:
//! [`crate::handshake`] establishes sessions (SEP, SMKEX), [`crate::host`] maps peers to keys.
//!
//! A [`Sealer`] turns an Ethernet II frame (or a PSP sub-protocol message) into a PSP frame: it
//! numbers it, adds the optional security number and timestamp, pads the section, encrypts it and
//! appends the ICV (and an Ed25519 signature if configured). An [`Opener`] does the reverse for
//! one sender, with the anti-replay window.
//!
//! | file | what it holds |
//! |---|---|
//! | `config.rs` | [`SealerConfig`], [`OpenerConfig`] (builders) and [`ConfigError`] |
//! | `seal.rs` | [`Sealer`], [`SealJob`], batching |
//! | `open.rs` | [`Opener`], [`Opened`] |
//! | `error.rs` | [`SealError`], [`OpenError`], [`DropReason`] |
//!
//! Which key belongs to which peer (session key mapping by source MAC, thesis §4.4.3), key
//! exchange, rekeying and I/O are the caller's. Both sides are allocation-free and never panic on
//! any input.
//!
//! Call order in [`Opener::open`] (each step only if the previous passed):
//! 1. parse the clear header (malformed → drop), check version, flags, suite, security number
//!    and timestamp;
//! 2. replay [`check`](crate::replay::ReplayWindow::check) (changes nothing);
//! 3. verify the signature if flagged, then the ICV in constant time, *before* decrypting;
//! 4. decrypt and parse the section (padding);
//! 5. replay [`commit`](crate::replay::ReplayWindow::commit);
//! 6. rebuild the inner Ethernet frame in place and return it.

mod config;
mod error;
mod open;
mod seal;

pub use config::{ConfigError, OpenerConfig, SealerConfig};
pub use error::{DropReason, OpenError, SealError};
pub use open::{Opened, Opener};
pub use seal::{MAX_BATCH, SealJob, Sealer};

/// The six bytes of a MAC address at the start of `bytes` (zeros where `bytes` is shorter).
fn to_mac(bytes: &[u8]) -> [u8; 6] {
    let mut mac = [0u8; 6];
    if let Some(src) = bytes.get(..6) {
        mac.copy_from_slice(src);
    }
    mac
}

#[cfg(test)]
mod tests;
