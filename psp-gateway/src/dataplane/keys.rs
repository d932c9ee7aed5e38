//! Fresh keyed state: a sealer or an opener for one key's configured settings, and why the core
//! may refuse to make one. The peer tables ([`super::peers`]) and the peer set's build step
//! ([`super::set`]) make every sealer and opener here; carrying over running state (sequence
//! numbers, replay windows) is their business, not this module's.

use std::sync::Arc;

use psp_core::Seq;
use psp_core::crypto::{KeyError, SuiteKey};
use psp_core::session::{ConfigError, Opener, Sealer};

use crate::config::PeerSecurity;
use crate::state::{Claim, SeqReservation, StateDir, StateError};

/// Why a sealer or an opener could not be made.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    /// The key does not suit the suite.
    #[error("peer {peer}: key: {source}")]
    Key {
        /// Peer name (`group` for the group key).
        peer: String,
        /// The cause.
        source: KeyError,
    },
    /// The sealer refused the settings.
    #[error("peer {peer}: {source}")]
    Seal {
        /// Peer name.
        peer: String,
        /// The cause.
        source: ConfigError,
    },
    /// The state directory refused the sequence-number reservation.
    #[error("peer {peer}: sequence-number state: {source}")]
    State {
        /// Peer name.
        peer: String,
        /// The cause.
        source: StateError,
    },
    /// The opener refused the settings.
    #[error("peer {peer}: {source}")]
    Open {
        /// Peer name.
        peer: String,
        /// The cause.
        source: ConfigError,
    },
}

fn suite_key(name: &str, s: &PeerSecurity) -> Result<SuiteKey, Error> {
    SuiteKey::new(s.suite, &s.key.bytes).map_err(|source| Error::Key {
        peer: name.into(),
        source,
    })
}

/// A sealer of a static key (the group key, a `key_file` peer's key) with its persisted
/// sequence-number reservation ([`SeqReservation`]): it seals only numbers that were reserved
/// durably, so a restart continues above every number used. Derefs to the [`Sealer`]; call
/// [`keep_reserved`](Self::keep_reserved) after sealing.
#[derive(Debug)]
pub(crate) struct KeySealer {
    sealer: Sealer,
    /// `None` only in unit tests that build peer sets without a state directory.
    reservation: Option<SeqReservation>,
}

impl KeySealer {
    /// Claims the next block of sequence numbers when less than half of the current one is
    /// left. On a failed write the sealer stops at the old limit (frames then fail with
    /// `SealError::Unreserved`) rather than use numbers that are not durable.
    ///
    /// # Errors
    /// The state file could not be written.
    pub(crate) fn keep_reserved(&mut self) -> Result<(), StateError> {
        let Some(r) = self.reservation.as_mut() else {
            return Ok(());
        };
        let next = self.sealer.next_seq();
        if let (true, Some(n)) = (r.due(next), next) {
            let claim = r.extend(n)?;
            self.sealer.skip_to(claim.from);
            self.sealer.set_seq_limit(Some(claim.limit));
        }
        Ok(())
    }
}

impl core::ops::Deref for KeySealer {
    type Target = Sealer;
    fn deref(&self) -> &Sealer {
        &self.sealer
    }
}

impl core::ops::DerefMut for KeySealer {
    fn deref_mut(&mut self) -> &mut Sealer {
        &mut self.sealer
    }
}

/// A sealer for `s` (named `name` in errors): it starts where the state directory's
/// reservation for this key says (a key new to this host: a random number in the lower half of
/// the space, the thesis' random start), in blocks of `block` numbers.
///
/// # Errors
/// A key or setting the core refuses, or the state directory (a read or write failed, or the
/// OS RNG failed: the start is never predictable).
pub(crate) fn new_sealer(
    name: &str,
    s: &PeerSecurity,
    state: Option<&Arc<StateDir>>,
    block: u32,
) -> Result<KeySealer, Error> {
    let (reservation, start) = match state {
        Some(dir) => {
            let (r, claim) = SeqReservation::start(dir, s.suite.name(), &s.key.bytes, block)
                .map_err(|source| Error::State {
                    peer: name.into(),
                    source,
                })?;
            (Some(r), claim)
        }
        None => (
            None,
            Claim {
                from: Seq(0),
                limit: Seq(u32::MAX),
            },
        ),
    };
    let mut sealer =
        Sealer::new(suite_key(name, s)?, start.from, s.sealer_config()).map_err(|source| {
            Error::Seal {
                peer: name.into(),
                source,
            }
        })?;
    if reservation.is_some() {
        sealer.set_seq_limit(Some(start.limit));
    }
    Ok(KeySealer {
        sealer,
        reservation,
    })
}

/// An opener for `s` (named `name` in errors) with an empty replay window; `max_frame` is the
/// largest frame the uplink carries.
///
/// # Errors
/// A key or setting the core refuses.
pub(crate) fn new_opener(name: &str, s: &PeerSecurity, max_frame: usize) -> Result<Opener, Error> {
    Opener::new(suite_key(name, s)?, s.opener_config(max_frame)).map_err(|source| Error::Open {
        peer: name.into(),
        source,
    })
}
