//! The two halves of the peer table the dataplane tasks own: which sealer seals a frame for a
//! destination MAC ([`TxPeers`]) and which opener checks a frame from a source MAC ([`RxPeers`])
//! (thesis §4.4.3, session key mapping).
//!
//! Each half is built complete, with fresh sealers and openers, by the peer set's fallible
//! build step ([`super::set`]). The task that owns a half then takes over, from the half it ran
//! with, the sealers (sequence numbers) and openers (replay windows) of keys whose settings did
//! not change: `carry_over`, a step that cannot fail. Neither task takes a lock per frame.

use std::collections::HashMap;
use std::sync::Arc;

use core::net::SocketAddr;

use psp_core::session::{Opener, Sealer};

use super::Mac;
use super::counters::PeerCounters;
use super::keys::{self, new_opener, new_sealer};
use super::normalize::NormPeer;
use crate::config::{Config, PeerSecurity};

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
    /// Builds the table for `config` with a fresh sealer per distinct key; `counters` and
    /// `norm` are parallel to `config.peers`.
    ///
    /// # Errors
    /// A key or setting the core refuses.
    pub(crate) fn build(
        config: &Config,
        counters: &[Arc<PeerCounters>],
        norm: &[Option<Arc<NormPeer>>],
    ) -> Result<Self, keys::Error> {
        let mut sealers = Vec::new();
        let mut settings: Vec<PeerSecurity> = Vec::new();
        let mut sealer_for = |name: &str, s: &PeerSecurity| -> Result<usize, keys::Error> {
            if let Some(i) = settings.iter().position(|t| *t.key.bytes == *s.key.bytes) {
                return Ok(i);
            }
            sealers.push(new_sealer(name, s)?);
            settings.push(s.clone());
            Ok(sealers.len() - 1)
        };
        sealer_for("group", &config.group)?;
        let mut peers = Vec::with_capacity(config.peers.len());
        let mut by_mac = HashMap::new();
        for (i, p) in config.peers.iter().enumerate() {
            let sealer = sealer_for(&p.name, &p.security)?;
            for mac in &p.macs {
                by_mac.insert(*mac, i);
            }
            peers.push(TxPeer {
                sealer,
                endpoint: p.endpoint,
                counters: Arc::clone(&counters[i]),
                norm: norm.get(i).cloned().flatten(),
            });
        }
        Ok(Self {
            peers,
            by_mac,
            sealers,
            settings,
        })
    }

    /// Takes over from `previous` (the table the transmit task ran with) the sealer of every
    /// key whose settings are unchanged, so its sequence numbers go on; keys that are new or
    /// changed keep their fresh sealer.
    #[must_use]
    pub(crate) fn carry_over(mut self, previous: Self) -> Self {
        let mut old: Vec<(PeerSecurity, Sealer)> = previous
            .settings
            .into_iter()
            .zip(previous.sealers)
            .collect();
        for (s, sealer) in self.settings.iter().zip(&mut self.sealers) {
            if let Some(i) = old.iter().position(|(t, _)| t == s) {
                *sealer = old.swap_remove(i).1;
            }
        }
        self
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
    /// Builds the table for `config` with fresh openers (empty replay windows); `counters` and
    /// `norm` are parallel to `config.peers`, `max_frame` is the largest frame the uplink
    /// carries.
    ///
    /// # Errors
    /// A key or setting the core refuses.
    pub(crate) fn build(
        config: &Config,
        counters: &[Arc<PeerCounters>],
        norm: &[Option<Arc<NormPeer>>],
        max_frame: usize,
    ) -> Result<Self, keys::Error> {
        let mut peers = Vec::with_capacity(config.peers.len());
        let mut by_mac = HashMap::new();
        for (i, p) in config.peers.iter().enumerate() {
            for mac in &p.macs {
                by_mac.insert(*mac, i);
            }
            peers.push(RxPeer {
                name: p.name.clone(),
                unicast: new_opener(&p.name, &p.security, max_frame)?,
                group: new_opener("group", &config.group, max_frame)?,
                counters: Arc::clone(&counters[i]),
                norm: norm.get(i).cloned().flatten(),
                settings: (p.security.clone(), config.group.clone()),
            });
        }
        Ok(Self { peers, by_mac })
    }

    /// Takes over from `previous` (the table the receive task ran with) the openers, and so
    /// the replay windows, of same-named peers whose unicast or group key settings are
    /// unchanged; the others keep their fresh opener.
    #[must_use]
    pub(crate) fn carry_over(mut self, previous: Self) -> Self {
        let mut old: HashMap<String, RxPeer> = previous
            .peers
            .into_iter()
            .map(|q| (q.name.clone(), q))
            .collect();
        for p in &mut self.peers {
            let Some(o) = old.remove(&p.name) else {
                continue;
            };
            if o.settings.0 == p.settings.0 {
                p.unicast = o.unicast;
            }
            if o.settings.1 == p.settings.1 {
                p.group = o.group;
            }
        }
        self
    }
}
