//! Static keys (the group key, `key_file` keys): one sealer per distinct key, and its
//! sequence-number reservations.
//!
//! A sealer of a static key seals only numbers below a limit the caller made durable first
//! ([`HostEvent::Reserve`](super::HostEvent::Reserve), [`Host::handle_reserved`](super::Host::handle_reserved)),
//! so a restart continues above every number used and no (key, nonce) pair repeats across runs.
//! Peers that share a key share its sealer: nonces derive from (key, source MAC, SN), and two
//! streams under one key from one host could repeat them.

use alloc::vec::Vec;

use sha2::Digest as _;
use zeroize::Zeroizing;

use super::{HostEvent, PeerSpec, SpecError};
use crate::crypto::{SigningKey, SuiteId, SuiteKey};
use crate::handshake;
use crate::protect::{Opener, OpenerConfig, Sealer, SealerConfig};
use crate::wire::Seq;

/// A static key and its settings.
#[derive(Clone, PartialEq, Eq)]
pub struct KeySpec {
    /// The suite.
    pub suite: SuiteId,
    /// The key bytes (wiped on drop).
    pub key: Zeroizing<Vec<u8>>,
    /// How frames are sealed.
    pub sealer: SealerConfig,
    /// How frames are opened.
    pub opener: OpenerConfig,
}

impl core::fmt::Debug for KeySpec {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("KeySpec")
            .field("suite", &self.suite)
            .field("key", &self.fingerprint())
            .finish_non_exhaustive()
    }
}

impl KeySpec {
    /// The key's name in state files and events: 16 bytes of SHA-256 over a label, the suite's
    /// name and the key. It names the key without revealing it.
    pub fn fingerprint(&self) -> Fingerprint {
        let mut h = sha2::Sha256::new();
        h.update(b"psp-gateway seq-state v1\0");
        h.update(self.suite.name().as_bytes());
        h.update([0]);
        h.update(&self.key[..]);
        let mut f = [0u8; 16];
        f.copy_from_slice(&h.finalize()[..16]);
        Fingerprint(f)
    }

    fn suite_key(&self, peer: &str) -> Result<SuiteKey, SpecError> {
        SuiteKey::new(self.suite, &self.key).map_err(|_| SpecError {
            peer: peer.into(),
            problem: "the key does not suit the suite",
        })
    }

    /// A sealer under this key that may seal nothing yet (its limit is its start, 0).
    pub(crate) fn sealer(&self, peer: &str) -> Result<Sealer, SpecError> {
        let mut s =
            Sealer::new(self.suite_key(peer)?, Seq(0), self.sealer).map_err(|_| SpecError {
                peer: peer.into(),
                problem: "the sealer refused the settings (none without allow_none, or padding)",
            })?;
        s.set_seq_limit(Some(Seq(0)));
        Ok(s)
    }

    /// An opener under this key with an empty window, for frames up to `max_frame` bytes.
    pub(crate) fn opener(&self, peer: &str, max_frame: usize) -> Result<Opener, SpecError> {
        Opener::new(
            self.suite_key(peer)?,
            self.opener.with_max_frame_len(max_frame),
        )
        .map_err(|_| SpecError {
            peer: peer.into(),
            problem: "the opener refused the settings",
        })
    }
}

/// A static key's name: see [`KeySpec::fingerprint`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Fingerprint(pub [u8; 16]);

/// Sequence numbers made durable for a sealer: it may use `from` up to (not including) `limit`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Claim {
    /// Where its numbers go on (it skips forward to here first).
    pub from: Seq,
    /// The first number it may not use.
    pub limit: Seq,
}

/// One sealer of a static key and where its reservations stand.
#[derive(Debug)]
pub(crate) struct Reserved {
    spec: KeySpec,
    fingerprint: Fingerprint,
    pub(crate) sealer: Sealer,
    /// The length of the last claim (when less than half is left, ask for the next).
    claim_len: u32,
    /// A reservation was asked for and not answered yet.
    asked: bool,
}

impl Reserved {
    fn new(spec: &KeySpec, sealer: Sealer) -> Self {
        Self {
            fingerprint: spec.fingerprint(),
            spec: spec.clone(),
            sealer,
            claim_len: 0,
            asked: true,
        }
    }

    fn reserved(&mut self, claim: Claim) {
        if !crate::plant::on(crate::plant::Bug::ReuseReservation) {
            self.sealer.skip_to(claim.from);
        }
        self.sealer.set_seq_limit(Some(claim.limit));
        self.claim_len = claim.limit.0.saturating_sub(claim.from.0);
        self.asked = false;
    }

    /// A sealer for one slot of sequence numbers named `fingerprint` rather than by its key:
    /// the broadcast keys' (their numbers go on from key to key, so a host never repeats one
    /// under any of them).
    pub(crate) fn slot(spec: &KeySpec, fingerprint: Fingerprint) -> Result<Self, SpecError> {
        let sealer = spec.sealer("broadcast key")?;
        Ok(Self {
            fingerprint,
            spec: spec.clone(),
            sealer,
            claim_len: 0,
            asked: true,
        })
    }

    /// The same slot under a new key: its numbers, limit and signer go on.
    pub(crate) fn rekey(&mut self, spec: &KeySpec) -> Result<(), SpecError> {
        let mut s = spec.sealer("broadcast key")?;
        if let Some(n) = self.sealer.next_seq() {
            s.skip_to(n);
        }
        s.set_seq_limit(self.sealer.seq_limit());
        s.set_signer(self.sealer.take_signer());
        self.sealer = s;
        self.spec = spec.clone();
        Ok(())
    }

    /// A reservation for this slot was made durable.
    pub(crate) fn claimed(&mut self, claim: Claim) {
        self.reserved(claim);
    }

    /// After sealing: asks for the next block when less than half of the last is left.
    pub(crate) fn due(&mut self, group: bool) -> Option<HostEvent> {
        if self.asked {
            return None;
        }
        let next = self.sealer.next_seq()?;
        let limit = self.sealer.seq_limit().map_or(u32::MAX, |l| l.0);
        if limit.saturating_sub(next.0) >= self.claim_len / 2 || limit == u32::MAX {
            return None;
        }
        self.asked = true;
        Some(HostEvent::Reserve {
            key: self.fingerprint,
            group,
            next: Some(next),
        })
    }
}

/// The group key's sealer (broadcasts, multicasts, handshake messages, peers without a key of
/// their own), signing with this host's identity when it has one.
#[derive(Debug)]
pub(crate) struct GroupSealer {
    pub(crate) r: Reserved,
}

impl GroupSealer {
    pub(crate) fn new(spec: &KeySpec, signer: Option<SigningKey>) -> Result<Self, SpecError> {
        let mut sealer = spec.sealer("group")?;
        sealer.set_signer(signer);
        Ok(Self {
            r: Reserved::new(spec, sealer),
        })
    }

    pub(crate) fn spec(&self) -> &KeySpec {
        &self.r.spec
    }

    pub(crate) fn fingerprint(&self) -> Fingerprint {
        self.r.fingerprint
    }

    pub(crate) fn take_signer(&mut self) -> Option<SigningKey> {
        self.r.sealer.take_signer()
    }

    pub(crate) fn set_signer(&mut self, signer: Option<SigningKey>) {
        self.r.sealer.set_signer(signer);
    }

    pub(crate) fn reserve_event(&self, next: Option<Seq>) -> HostEvent {
        HostEvent::Reserve {
            key: self.r.fingerprint,
            group: true,
            next,
        }
    }

    pub(crate) fn reserved(&mut self, claim: Claim) {
        self.r.reserved(claim);
    }

    pub(crate) fn overhead(&self) -> usize {
        self.r.sealer.overhead()
    }
}

/// Which sealer seals a peer's unicast frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KeyRef {
    /// The group key's.
    Group,
    /// `StaticKeys::keys[i]`.
    Static(usize),
}

/// One sealer per distinct static key other than the group key.
#[derive(Debug, Default)]
pub(crate) struct StaticKeys {
    keys: Vec<Reserved>,
}

impl StaticKeys {
    /// The sealers the peers in `specs` need: kept from this table for keys in use, new (and
    /// unreserved) for the others. Changes nothing here: [`adopt`](Self::adopt) does.
    pub(crate) fn rebuild(
        &mut self,
        specs: &[PeerSpec],
        group: &KeySpec,
    ) -> Result<Self, SpecError> {
        let mut keys: Vec<Reserved> = Vec::new();
        for p in specs {
            let super::Keying::Static(spec) = &p.keying else {
                continue;
            };
            if spec.key == group.key || keys.iter().any(|k| k.spec == *spec) {
                continue;
            }
            keys.push(Reserved::new(spec, spec.sealer(&p.name)?));
        }
        Ok(Self { keys })
    }

    /// Puts `new` (from [`rebuild`](Self::rebuild)) in force: a key that was in use hands its
    /// sealer over (sequence numbers and reservation go on); the others ask for a reservation.
    pub(crate) fn adopt(&mut self, mut new: Self) -> Vec<HostEvent> {
        let mut events = Vec::new();
        for k in &mut new.keys {
            match self
                .keys
                .iter()
                .position(|o| o.fingerprint == k.fingerprint)
            {
                Some(i) => {
                    let old = self.keys.swap_remove(i);
                    if old.spec == k.spec {
                        *k = old;
                    } else {
                        // Same key, other settings: a new sealer, same numbers.
                        if let Some(n) = old.sealer.next_seq() {
                            k.sealer.skip_to(n);
                        }
                        k.sealer.set_seq_limit(old.sealer.seq_limit());
                        k.claim_len = old.claim_len;
                        k.asked = old.asked;
                    }
                }
                None => events.push(HostEvent::Reserve {
                    key: k.fingerprint,
                    group: false,
                    next: None,
                }),
            }
        }
        *self = new;
        events
    }

    /// The sealer of `spec` (which [`rebuild`](Self::rebuild) made).
    pub(crate) fn find(&self, spec: &KeySpec, group: &KeySpec) -> KeyRef {
        if spec.key == group.key {
            return KeyRef::Group;
        }
        self.keys
            .iter()
            .position(|k| k.spec == *spec)
            .map_or(KeyRef::Group, KeyRef::Static)
    }

    pub(crate) fn get_mut(&mut self, i: usize) -> Option<&mut Reserved> {
        self.keys.get_mut(i)
    }

    /// The sealer `key` names (the group key's for [`KeyRef::Group`]).
    pub(crate) fn sealer_mut<'a>(
        &'a mut self,
        key: KeyRef,
        group: &'a mut GroupSealer,
    ) -> &'a mut Reserved {
        match key {
            KeyRef::Static(i) => match self.keys.get_mut(i) {
                Some(r) => r,
                None => &mut group.r,
            },
            KeyRef::Group => &mut group.r,
        }
    }

    /// The overhead of the sealer `key` names.
    pub(crate) fn overhead_of(&self, key: KeyRef, group: &GroupSealer) -> usize {
        match key {
            KeyRef::Static(i) => self.keys.get(i).map_or(0, |k| k.sealer.overhead()),
            KeyRef::Group => group.overhead(),
        }
    }

    pub(crate) fn reserved(&mut self, key: Fingerprint, claim: Claim) {
        if let Some(k) = self.keys.iter_mut().find(|k| k.fingerprint == key) {
            k.reserved(claim);
        }
    }

    pub(crate) fn max_overhead(&self) -> usize {
        self.keys
            .iter()
            .map(|k| k.sealer.overhead())
            .max()
            .unwrap_or(0)
    }
}

/// The largest overhead of a session suite (frames carry the key id as security number).
pub fn session_overhead(hs: &handshake::Config) -> usize {
    hs.suites
        .suites()
        .filter_map(|suite| {
            let key = SuiteKey::new(suite, &[0u8; 32][..suite.key_len()]).ok()?;
            let cfg = SealerConfig::new()
                .with_security_number(crate::wire::SecurityNumber::new(0).ok())
                .with_allow_none(true);
            Sealer::new(key, Seq(0), cfg).ok().map(|s| s.overhead())
        })
        .max()
        .unwrap_or(0)
}
