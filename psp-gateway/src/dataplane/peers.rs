//! The two halves of the peer table the dataplane tasks own: which sealer seals a frame for a
//! destination MAC ([`TxPeers`]) and which opener checks a frame from a source MAC ([`RxPeers`])
//! (thesis §4.4.3, session key mapping).
//!
//! Each half is built complete, with fresh sealers and openers, by the peer set's fallible
//! build step ([`super::set`]). The task that owns a half then takes over, from the half it ran
//! with, the sealers (sequence numbers) and openers (replay windows) of keys whose settings did
//! not change: `carry_over`, a step that cannot fail. Neither task takes a lock per frame.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use core::net::SocketAddr;

use psp_core::crypto::VerifyingKey;
use psp_core::session::Opener;

use super::Mac;
use super::counters::PeerCounters;
use super::keys::{self, KeySealer, new_opener, new_sealer};
use super::normalize::NormPeer;
use crate::config::{Config, PeerSecurity};
use crate::sessions::PeerSession;
use crate::state::{StateDir, UNICAST_BLOCK};

/// The group key's sealer, shared by the transmit task (broadcast, multicast, peers keyed by the
/// group key) and the session driver (handshake messages): one sequence-number stream per key.
pub(crate) type GroupSealer = Arc<Mutex<KeySealer>>;

/// Locks the group sealer (a panic elsewhere cannot leave it half-updated: go on).
pub(crate) fn lock_group(g: &GroupSealer) -> MutexGuard<'_, KeySealer> {
    g.lock().unwrap_or_else(|e| e.into_inner())
}

/// One peer, transmit side.
#[derive(Debug)]
pub(crate) struct TxPeer {
    /// Index into [`TxPeers::sealers`] of the sealer for the peer's unicast key; `None`: the
    /// group key's (shared) sealer.
    pub(crate) sealer: Option<usize>,
    /// The UDP endpoint, if any.
    pub(crate) endpoint: Option<SocketAddr>,
    /// Counters.
    pub(crate) counters: Arc<PeerCounters>,
    /// The normalized endpoint, if the peer is normalized: its unicast frames go there and are
    /// sealed by its pacing task (with a key no one else uses), never by `sealer`.
    pub(crate) norm: Option<Arc<NormPeer>>,
    /// The peer's sessions, if it is a session peer: unicast frames are sealed under its key
    /// ring, never under `sealer`.
    pub(crate) session: Option<Arc<PeerSession>>,
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
    /// The sealers of the peers' own keys.
    pub(crate) sealers: Vec<KeySealer>,
    /// The group key's sealer (broadcast, multicast, peers without a key of their own).
    pub(crate) group: GroupSealer,
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
        group: &GroupSealer,
        sessions: &[Option<Arc<PeerSession>>],
        state: Option<&Arc<StateDir>>,
    ) -> Result<Self, keys::Error> {
        let mut sealers = Vec::new();
        let mut settings: Vec<PeerSecurity> = Vec::new();
        let mut sealer_for = |name: &str, s: &PeerSecurity| -> Result<Option<usize>, keys::Error> {
            if *s.key.bytes == *config.group.key.bytes {
                return Ok(None);
            }
            if let Some(i) = settings.iter().position(|t| *t.key.bytes == *s.key.bytes) {
                return Ok(Some(i));
            }
            sealers.push(new_sealer(name, s, state, UNICAST_BLOCK)?);
            settings.push(s.clone());
            Ok(Some(sealers.len() - 1))
        };
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
                session: sessions.get(i).cloned().flatten(),
            });
        }
        Ok(Self {
            peers,
            by_mac,
            sealers,
            group: Arc::clone(group),
            settings,
        })
    }

    /// Takes over from `previous` (the table the transmit task ran with) the sealer of every
    /// key whose settings are unchanged, so its sequence numbers go on; keys that are new or
    /// changed keep their fresh sealer.
    #[must_use]
    pub(crate) fn carry_over(mut self, previous: Self) -> Self {
        let mut old: Vec<(PeerSecurity, KeySealer)> = previous
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

    /// The sealer for broadcast and multicast frames (the group key), locked.
    pub(crate) fn group(&self) -> MutexGuard<'_, KeySealer> {
        lock_group(&self.group)
    }

    /// The largest number of bytes sealing adds to an inner frame, over all keys.
    pub(crate) fn max_overhead(&self) -> usize {
        self.sealers
            .iter()
            .map(|s| s.overhead())
            .chain(core::iter::once(self.group().overhead()))
            .max()
            .unwrap_or(0)
    }
}

/// A group-key opener for one peer's frames (path 1's group frames and handshake messages, or
/// path 2's messages), with its own replay window, that checks signatures against the peer's
/// pinned identity from the moment there is one.
#[derive(Debug)]
pub(crate) struct GroupOpener {
    opener: Opener,
    /// Whether `opener` checks signatures (a pinned identity).
    verifying: bool,
}

impl GroupOpener {
    /// A group-key opener: checks signatures against `pin`, or, without one, accepts signed
    /// frames unverified (a peer with no identity configured; or one pinned on first use, until
    /// the pin is learnt).
    ///
    /// # Errors
    /// A key or setting the core refuses.
    pub(crate) fn new(
        config: &Config,
        pin: Option<[u8; 32]>,
        max_frame: usize,
    ) -> Result<Self, keys::Error> {
        let mut o = new_opener("group", &config.group, max_frame)?;
        match pin {
            Some(k) => o.set_verifier(Some(VerifyingKey::from_bytes(k))),
            None => o.set_accept_unverified(true),
        }
        Ok(Self {
            opener: o,
            verifying: pin.is_some(),
        })
    }

    /// The opener, after applying a pin the session learnt since (trust on first use): the one
    /// place a pin reaches a group opener, so every opener of a peer (path 1 and path 2) checks
    /// it from the next frame on.
    #[inline]
    pub(crate) fn opener(&mut self, session: Option<&PeerSession>) -> &mut Opener {
        if !self.verifying
            && let Some(pin) = session.and_then(|s| s.pin.get())
        {
            self.opener
                .set_verifier(Some(VerifyingKey::from_bytes(*pin)));
            self.verifying = true;
        }
        &mut self.opener
    }

    /// Whether signatures are checked.
    pub(crate) fn is_verifying(&self) -> bool {
        self.verifying
    }
}

/// One peer, receive side: one opener (and so one replay window) per key it may use.
#[derive(Debug)]
pub(crate) struct RxPeer {
    /// The peer's name.
    pub(crate) name: String,
    /// Opens the peer's unicast frames.
    pub(crate) unicast: Opener,
    /// Opens the peer's group-key frames: broadcasts and handshake messages (the peer's own SN
    /// space; the peer's persisted sequence numbers keep it above this window across its
    /// restarts, so nothing ever resets it).
    pub(crate) group: GroupOpener,
    /// Counters.
    pub(crate) counters: Arc<PeerCounters>,
    /// The normalized endpoint, if the peer is normalized.
    pub(crate) norm: Option<Arc<NormPeer>>,
    /// The peer's sessions, if it is a session peer.
    pub(crate) session: Option<Arc<PeerSession>>,
    /// The handshake messages this peer may hand the driver.
    pub(crate) budget: crate::sessions::MessageBudget,
    settings: (PeerSecurity, PeerSecurity, Option<[u8; 32]>),
}

impl RxPeer {
    /// The security number group-key frames carry, if the group sets one.
    pub(crate) fn group_security_number(&self) -> Option<psp_core::wire::SecurityNumber> {
        self.settings.1.security_number
    }
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
        sessions: &[Option<Arc<PeerSession>>],
        max_frame: usize,
    ) -> Result<Self, keys::Error> {
        let mut peers = Vec::with_capacity(config.peers.len());
        let mut by_mac = HashMap::new();
        for (i, p) in config.peers.iter().enumerate() {
            for mac in &p.macs {
                by_mac.insert(*mac, i);
            }
            let session = sessions.get(i).cloned().flatten();
            let pin = p
                .identity
                .or_else(|| session.as_ref().and_then(|s| s.pin.get().copied()));
            peers.push(RxPeer {
                name: p.name.clone(),
                unicast: new_opener(&p.name, &p.security, max_frame)?,
                group: GroupOpener::new(config, pin, max_frame)?,
                counters: Arc::clone(&counters[i]),
                norm: norm.get(i).cloned().flatten(),
                session,
                budget: crate::sessions::MessageBudget::new(),
                settings: (p.security.clone(), config.group.clone(), pin),
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
            // The window is kept while the group key and the configured pin are (a pin learnt
            // on first use is in the session and reaches the kept opener by itself).
            if o.settings.1 == p.settings.1
                && (o.settings.2 == p.settings.2 || !p.group.is_verifying())
            {
                p.group = o.group;
            }
        }
        self
    }
}
