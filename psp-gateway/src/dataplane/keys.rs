//! Fresh keyed state: a sealer or an opener for one key's configured settings, and why the core
//! may refuse to make one. The peer tables ([`super::peers`]) and the peer set's build step
//! ([`super::set`]) make every sealer and opener here; carrying over running state (sequence
//! numbers, replay windows) is their business, not this module's.

use psp_core::crypto::{KeyError, SuiteKey};
use psp_core::session::{ConfigError, Opener, Sealer};

use crate::config::PeerSecurity;

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

/// A sealer for `s` (named `name` in errors), starting at a random sequence number.
///
/// # Errors
/// A key or setting the core refuses.
pub(crate) fn new_sealer(name: &str, s: &PeerSecurity) -> Result<Sealer, Error> {
    let mut seed = [0u8; 4];
    // A failing OS RNG leaves 0: still a valid (if predictable) start; the thesis only asks
    // for a random start to make SN prediction harder, not for secrecy.
    let _ = getrandom::fill(&mut seed);
    Sealer::new(
        suite_key(name, s)?,
        Sealer::random_initial_seq(seed),
        s.sealer_config(),
    )
    .map_err(|source| Error::Seal {
        peer: name.into(),
        source,
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
