//! The peer table: which key seals a frame for a destination MAC, which opener checks a frame
//! from a source MAC (thesis §4.4.3, session key mapping), rebuilt on reload while keeping the
//! state (sequence numbers, replay windows, counters) of peers whose settings did not change.
//!
//! The transmit and receive tasks each own their half ([`TxPeers`], [`RxPeers`]); neither takes
//! a lock per frame.

use std::collections::HashMap;
use std::sync::Arc;

use core::net::SocketAddr;

use psp_core::crypto::{KeyError, SuiteKey};
use psp_core::session::{ConfigError, Opener, Sealer};

use super::counters::PeerCounters;
use super::normalize::NormPeer;
use crate::config::{Config, PeerSecurity};

/// A MAC address.
pub(crate) type Mac = [u8; 6];

/// The peers of one configuration, with their counters: what reload publishes to the tasks
/// and what `status` reads.
#[derive(Debug)]
pub(crate) struct PeerSet {
    /// The configuration.
    pub(crate) config: Config,
    /// Counters, parallel to `config.peers`.
    pub(crate) counters: Vec<Arc<PeerCounters>>,
    /// Normalized peers, parallel to `config.peers` (filled by [`super::normalize::attach`]).
    pub(crate) norm: Vec<Option<Arc<NormPeer>>>,
}

impl PeerSet {
    /// A set for `config`, reusing counters of same-named peers in `previous`.
    pub(crate) fn new(config: Config, previous: Option<&Self>) -> Self {
        let counters = config
            .peers
            .iter()
            .map(|p| {
                previous
                    .and_then(|prev| {
                        prev.config
                            .peers
                            .iter()
                            .position(|q| q.name == p.name)
                            .map(|i| Arc::clone(&prev.counters[i]))
                    })
                    .unwrap_or_default()
            })
            .collect();
        let norm = vec![None; config.peers.len()];
        Self {
            config,
            counters,
            norm,
        }
    }
}

/// Why a peer table could not be built.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BuildError {
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

fn suite_key(name: &str, s: &PeerSecurity) -> Result<SuiteKey, BuildError> {
    SuiteKey::new(s.suite, &s.key.bytes).map_err(|source| BuildError::Key {
        peer: name.into(),
        source,
    })
}

fn new_sealer(name: &str, s: &PeerSecurity) -> Result<Sealer, BuildError> {
    let mut seed = [0u8; 4];
    // A failing OS RNG leaves 0: still a valid (if predictable) start; the thesis only asks
    // for a random start to make SN prediction harder, not for secrecy.
    let _ = getrandom::fill(&mut seed);
    Sealer::new(
        suite_key(name, s)?,
        Sealer::random_initial_seq(seed),
        s.sealer_config(),
    )
    .map_err(|source| BuildError::Seal {
        peer: name.into(),
        source,
    })
}

fn new_opener(name: &str, s: &PeerSecurity, max_frame: usize) -> Result<Opener, BuildError> {
    Opener::new(suite_key(name, s)?, s.opener_config(max_frame)).map_err(|source| {
        BuildError::Open {
            peer: name.into(),
            source,
        }
    })
}

/// One peer, transmit side.
#[derive(Debug)]
pub(crate) struct TxPeer {
    /// Index into [`TxPeers::sealers`] of the sealer for the peer's unicast key.
    pub(crate) sealer: usize,
    /// The UDP endpoint, if any.
    pub(crate) endpoint: Option<SocketAddr>,
    /// Counters.
    pub(crate) counters: Arc<PeerCounters>,
    /// The normalized endpoint, if the peer is normalized: its unicast frames go there and are
    /// sealed by its pacing task (with a key no one else uses), never by `sealer`.
    pub(crate) norm: Option<Arc<NormPeer>>,
}

/// The transmit half of the peer table.
///
/// There is one sealer, and so one sequence-number stream, per distinct key: the group key and
/// every peer key. Peers keyed by the group key (no `key_file`), or sharing a key file, share
/// the sealer, because nonces and IVs derive from (key, SN) and two streams under one key
/// could repeat them (the config validation guarantees that sharers agree on the settings).
#[derive(Debug)]
pub(crate) struct TxPeers {
    /// Peers, in configuration order.
    pub(crate) peers: Vec<TxPeer>,
    /// Destination MAC → index into `peers`.
    pub(crate) by_mac: HashMap<Mac, usize>,
    /// The sealers; index 0 seals broadcast and multicast frames under the group key.
    pub(crate) sealers: Vec<Sealer>,
    settings: Vec<PeerSecurity>,
}

impl TxPeers {
    /// Builds the table for `set`, keeping the sealers (and so the sequence numbers) of keys
    /// in `previous` whose settings are unchanged.
    ///
    /// # Errors
    /// A key or setting the core refuses.
    pub(crate) fn build(set: &PeerSet, previous: Option<Self>) -> Result<Self, BuildError> {
        let cfg = &set.config;
        let mut old: Vec<(PeerSecurity, Sealer)> = previous
            .map(|p| p.settings.into_iter().zip(p.sealers).collect())
            .unwrap_or_default();
        let mut sealers = Vec::new();
        let mut settings: Vec<PeerSecurity> = Vec::new();
        let mut sealer_for = |name: &str, s: &PeerSecurity| -> Result<usize, BuildError> {
            if let Some(i) = settings.iter().position(|t| *t.key.bytes == *s.key.bytes) {
                return Ok(i);
            }
            let sealer = match old.iter().position(|(t, _)| t == s) {
                Some(i) => old.swap_remove(i).1,
                None => new_sealer(name, s)?,
            };
            sealers.push(sealer);
            settings.push(s.clone());
            Ok(sealers.len() - 1)
        };
        sealer_for("group", &cfg.group)?;
        let mut peers = Vec::with_capacity(cfg.peers.len());
        let mut by_mac = HashMap::new();
        for (i, p) in cfg.peers.iter().enumerate() {
            let sealer = sealer_for(&p.name, &p.security)?;
            for mac in &p.macs {
                by_mac.insert(*mac, i);
            }
            peers.push(TxPeer {
                sealer,
                endpoint: p.endpoint,
                counters: Arc::clone(&set.counters[i]),
                norm: set.norm.get(i).cloned().flatten(),
            });
        }
        Ok(Self {
            peers,
            by_mac,
            sealers,
            settings,
        })
    }

    /// The sealer for broadcast and multicast frames (the group key).
    pub(crate) fn group_mut(&mut self) -> &mut Sealer {
        &mut self.sealers[0]
    }

    /// The largest number of bytes sealing adds to an inner frame, over all keys.
    pub(crate) fn max_overhead(&self) -> usize {
        self.sealers.iter().map(Sealer::overhead).max().unwrap_or(0)
    }
}

/// One peer, receive side: one opener (and so one replay window) per key it may use.
#[derive(Debug)]
pub(crate) struct RxPeer {
    /// The peer's name.
    pub(crate) name: String,
    /// Opens the peer's unicast frames.
    pub(crate) unicast: Opener,
    /// Opens the peer's broadcast/multicast frames (group key, the peer's own SN space).
    pub(crate) group: Opener,
    /// Counters.
    pub(crate) counters: Arc<PeerCounters>,
    /// The normalized endpoint, if the peer is normalized.
    pub(crate) norm: Option<Arc<NormPeer>>,
    settings: (PeerSecurity, PeerSecurity),
}

/// The receive half of the peer table.
#[derive(Debug)]
pub(crate) struct RxPeers {
    /// Peers, in configuration order.
    pub(crate) peers: Vec<RxPeer>,
    /// Source MAC → index into `peers`.
    pub(crate) by_mac: HashMap<Mac, usize>,
}

impl RxPeers {
    /// Builds the table for `set`, keeping the openers (and so the replay windows) of peers in
    /// `previous` whose name and settings are unchanged. `max_frame` is the largest frame the
    /// uplink carries.
    ///
    /// # Errors
    /// A key or setting the core refuses.
    pub(crate) fn build(
        set: &PeerSet,
        previous: Option<Self>,
        max_frame: usize,
    ) -> Result<Self, BuildError> {
        let cfg = &set.config;
        let mut old: HashMap<String, RxPeer> = previous
            .map(|p| p.peers.into_iter().map(|q| (q.name.clone(), q)).collect())
            .unwrap_or_default();
        let mut peers = Vec::with_capacity(cfg.peers.len());
        let mut by_mac = HashMap::new();
        for (i, p) in cfg.peers.iter().enumerate() {
            let settings = (p.security.clone(), cfg.group.clone());
            let (unicast, group) = match old.remove(&p.name) {
                Some(o) if o.settings == settings => (o.unicast, o.group),
                Some(o) if o.settings.1 == settings.1 => {
                    (new_opener(&p.name, &p.security, max_frame)?, o.group)
                }
                Some(o) if o.settings.0 == settings.0 => {
                    (o.unicast, new_opener("group", &cfg.group, max_frame)?)
                }
                _ => (
                    new_opener(&p.name, &p.security, max_frame)?,
                    new_opener("group", &cfg.group, max_frame)?,
                ),
            };
            for mac in &p.macs {
                by_mac.insert(*mac, i);
            }
            peers.push(RxPeer {
                name: p.name.clone(),
                unicast,
                group,
                counters: Arc::clone(&set.counters[i]),
                norm: set.norm.get(i).cloned().flatten(),
                settings,
            });
        }
        Ok(Self { peers, by_mac })
    }
}
