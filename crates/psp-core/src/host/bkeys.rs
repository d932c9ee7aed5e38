//! Broadcast keys (`[pki]`, docs/MEMBERSHIP.md): ARP, broadcast and multicast frames go under a
//! key that an elected key server makes and hands to every member over its session, renewed
//! every [`Pki::rotate_every`](super::Pki) and at once when a revocation list removes a member.
//!
//! * **Election** (MKA-like): among this host and the peers whose certificates it holds (not
//!   revoked), the lowest (priority, MAC) whose priority is not 255; each host decides from
//!   what it knows, and a key from a better server replaces one from a worse.
//! * **Overlap**: a member opens under a new key as soon as it has it and seals under it
//!   [`SWITCH_AFTER`] later; an older key still opens for [`KEEP_OLD`] after a newer one is in
//!   use, so no frame is lost in a change.
//! * **Catch-up**: each side's state (the key server and epoch it holds) goes over every new
//!   session; a side behind is sent the newest key, by any member (the server's signature
//!   travels with it).
//! * **Sequence numbers** of this host's broadcast sealer go on from key to key under one
//!   reservation ([`BKEY_SLOT`]), so (key, source MAC, number) never repeats, across restarts too.

use alloc::vec::Vec;

use rand_core::CryptoRngCore;
use zeroize::Zeroizing;

use super::keys::{Claim, Fingerprint, KeySpec, Reserved};
use super::peer::OWE_KEY;
use super::{Host, HostEvent, Mac, PeerId};
use crate::handshake::messages::suite_code;
use crate::pki::message::{KeyMessage, MAX_KEY_LEN};
use crate::time::{Duration, Instant};
use crate::wire::SecurityNumber;

/// The reservation slot of this host's broadcast sealer (a name, not a key's fingerprint).
pub const BKEY_SLOT: Fingerprint = Fingerprint(*b"psp broadcast k\0");
/// Members seal under a new key this long after they got it.
pub const SWITCH_AFTER: Duration = Duration::from_secs(2);
/// An older key still opens this long after a newer one is in use.
pub const KEEP_OLD: Duration = Duration::from_secs(60);
/// A host elects no key server (and makes no key) for this long after its start: the
/// announcements of the others arrive first.
pub const ELECT_AFTER: Duration = Duration::from_secs(3);
/// At most this many keys held.
const HELD: usize = 3;

/// One broadcast key as a member holds it.
#[derive(Clone)]
pub(crate) struct BKey {
    pub(crate) server: Mac,
    pub(crate) priority: u8,
    pub(crate) epoch: u32,
    pub(crate) key_id: u32,
    pub(crate) spec: KeySpec,
    pub(crate) sig: [u8; 64],
    /// When this host starts sealing under it.
    pub(crate) use_at: Instant,
    /// When this host got it.
    pub(crate) got: Instant,
}

impl core::fmt::Debug for BKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("BKey")
            .field("server", &self.server)
            .field("epoch", &self.epoch)
            .field("key_id", &self.key_id)
            .finish_non_exhaustive()
    }
}

impl BKey {
    fn rank(&self) -> (u8, Mac) {
        (self.priority, self.server)
    }

    /// The message that hands it on (the server's signature with it).
    pub(crate) fn message(&self, now: Instant) -> KeyMessage<'_> {
        KeyMessage {
            server: self.server,
            priority: self.priority,
            epoch: self.epoch,
            key_id: self.key_id,
            suite: suite_code(self.spec.suite),
            use_in_ms: self.use_at.saturating_since(now).total_millis() as u32,
            key: &self.spec.key,
            sig: self.sig,
        }
    }
}

/// A broadcast key received, owned until the host considers it.
#[derive(Clone)]
pub(crate) struct Offered {
    server: Mac,
    priority: u8,
    epoch: u32,
    key_id: u32,
    suite: u8,
    use_in_ms: u32,
    key: Zeroizing<[u8; MAX_KEY_LEN]>,
    len: usize,
    sig: [u8; 64],
}

impl core::fmt::Debug for Offered {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Offered")
            .field("server", &self.server)
            .field("epoch", &self.epoch)
            .finish_non_exhaustive()
    }
}

impl Offered {
    pub(crate) fn of(m: &KeyMessage<'_>) -> Self {
        let mut key = Zeroizing::new([0u8; MAX_KEY_LEN]);
        key[..m.key.len()].copy_from_slice(m.key);
        Self {
            server: m.server,
            priority: m.priority,
            epoch: m.epoch,
            key_id: m.key_id,
            suite: m.suite,
            use_in_ms: m.use_in_ms,
            key,
            len: m.key.len(),
            sig: m.sig,
        }
    }

    fn message(&self) -> KeyMessage<'_> {
        KeyMessage {
            server: self.server,
            priority: self.priority,
            epoch: self.epoch,
            key_id: self.key_id,
            suite: self.suite,
            use_in_ms: self.use_in_ms,
            key: &self.key[..self.len],
            sig: self.sig,
        }
    }
}

/// The broadcast keys a host holds, newest first, and its sealer.
#[derive(Debug, Default)]
pub(crate) struct BKeys {
    pub(crate) held: Vec<BKey>,
    sealer: Option<(u32, Reserved)>,
    /// As key server: when the next key is due.
    rotate_at: Option<Instant>,
    /// The host's start (no election before [`ELECT_AFTER`]).
    started: Option<Instant>,
    /// Keys received, to consider after the call.
    pub(crate) offered: Vec<Offered>,
}

impl BKeys {
    pub(crate) fn new(now: Instant, pki: bool) -> Self {
        Self {
            started: pki.then_some(now),
            rotate_at: pki.then_some(now + ELECT_AFTER),
            ..Self::default()
        }
    }

    /// The key of `key_id`, if held.
    pub(crate) fn spec_of(&self, key_id: SecurityNumber) -> Option<&KeySpec> {
        self.held
            .iter()
            .find(|k| k.key_id == key_id.get())
            .map(|k| &k.spec)
    }

    /// The newest key held.
    pub(crate) fn newest(&self) -> Option<&BKey> {
        self.held.first()
    }

    /// The next instant the host must look at its broadcast keys.
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        self.rotate_at
    }

    fn insert(&mut self, k: BKey) {
        self.held.insert(0, k);
        self.held.truncate(HELD);
    }

    /// Forgets keys older than [`KEEP_OLD`] past the use of a newer one.
    fn expire(&mut self, now: Instant) {
        let mut newer_in_use: Option<Instant> = None;
        self.held.retain(|k| {
            let keep = newer_in_use.is_none_or(|t| now < t + KEEP_OLD);
            if k.use_at <= now {
                newer_in_use = Some(newer_in_use.map_or(k.use_at, |t| t.min(k.use_at)));
            }
            keep
        });
    }
}

impl Host {
    /// The broadcast key this host seals under now (`[pki]`): the newest whose switch time
    /// has come. Its key server, epoch and when it came.
    pub fn broadcast_key(&self, now: Instant) -> Option<(Mac, u32, Instant)> {
        self.shared
            .bkeys
            .held
            .iter()
            .find(|k| k.use_at <= now)
            .map(|k| (k.server, k.epoch, k.got))
    }

    /// This host's rank in the election, if it may be key server.
    fn my_rank(&self) -> Option<(u8, Mac)> {
        let p = self.shared.cfg.pki.as_ref()?;
        let prio = p.certificate.fields().priority;
        (prio != crate::pki::NEVER_KEY_SERVER).then_some((prio, self.shared.cfg.mac))
    }

    /// The best rank among this host and the certified peers it knows (not revoked).
    fn best_rank(&self) -> Option<(u8, Mac)> {
        let peers = self.peers.iter().filter_map(|p| {
            let s = p.session.as_deref()?;
            let c = s.cert.as_ref()?;
            let prio = c.fields().priority;
            (!s.revoked && prio != crate::pki::NEVER_KEY_SERVER).then(|| (prio, p.spec.macs[0]))
        });
        peers.chain(self.my_rank()).min()
    }

    /// The rank of the peer at `server`, from its certificate, if it is one this host knows.
    fn rank_of(&self, server: Mac) -> Option<(u8, [u8; 32])> {
        let pid = self.by_mac.get(&server)?;
        let s = self.peers[pid.0].session.as_deref()?;
        let c = s.cert.as_ref().filter(|_| !s.revoked)?;
        Some((c.fields().priority, c.fields().public_key))
    }

    /// The key server's timer: a first key after [`ELECT_AFTER`], then one every
    /// `rotate_every`, while this host is the one elected.
    pub(super) fn bkeys_due(&mut self, now: Instant, rng: &mut dyn CryptoRngCore) {
        if self.shared.bkeys.rotate_at.is_some_and(|t| t <= now) {
            let every = self
                .shared
                .cfg
                .pki
                .as_ref()
                .map_or(Duration::from_secs(600), |p| p.rotate_every);
            self.shared.bkeys.rotate_at = Some(now + every);
            if self.my_rank().is_some() && self.my_rank() == self.best_rank() {
                self.rotate(now, rng);
            }
        }
        self.shared.bkeys.expire(now);
    }

    /// A revocation removed a member: the key server makes a new key at once.
    pub(super) fn rotate_if_server(&mut self, now: Instant, rng: &mut dyn CryptoRngCore) {
        let started = self
            .shared
            .bkeys
            .started
            .is_some_and(|t| now >= t + ELECT_AFTER);
        if started && self.my_rank().is_some() && self.my_rank() == self.best_rank() {
            self.rotate(now, rng);
        }
    }

    /// Makes a new key as key server and hands it to every peer with a session.
    fn rotate(&mut self, now: Instant, rng: &mut dyn CryptoRngCore) {
        let Some((priority, _)) = self.my_rank() else {
            return;
        };
        let group = self.shared.group.spec().clone();
        let len = group.key.len().min(MAX_KEY_LEN);
        let mut key = Zeroizing::new(alloc::vec![0u8; len]);
        rng.fill_bytes(&mut key);
        let key_id = loop {
            let id = rng.next_u32() & 0x00ff_ffff;
            let clash = id == 0
                || self.shared.group_sn().is_some_and(|s| s.get() == id)
                || self.shared.bkeys.held.iter().any(|k| k.key_id == id);
            if !clash {
                break id;
            }
        };
        let unix = self.shared.wall(now).to_unix().0 as u32;
        let last = self
            .shared
            .bkeys
            .held
            .iter()
            .filter(|k| k.server == self.shared.cfg.mac)
            .map(|k| k.epoch)
            .max()
            .unwrap_or(0);
        let epoch = unix.max(last.saturating_add(1));
        let Ok(sn) = SecurityNumber::new(key_id) else {
            return;
        };
        let spec = KeySpec {
            suite: group.suite,
            key,
            sealer: group.sealer.with_security_number(Some(sn)),
            opener: group.opener.with_security_number(Some(sn)),
        };
        let mut m = KeyMessage {
            server: self.shared.cfg.mac,
            priority,
            epoch,
            key_id,
            suite: suite_code(group.suite),
            use_in_ms: 0,
            key: &spec.key,
            sig: [0; 64],
        };
        let digest = m.signed_digest();
        let Some(signer) = self.shared.group.take_signer() else {
            return;
        };
        signer.sign(&digest, &mut m.sig);
        let sig = m.sig;
        self.shared.group.set_signer(Some(signer));
        self.shared.bkeys.insert(BKey {
            server: self.shared.cfg.mac,
            priority,
            epoch,
            key_id,
            spec,
            sig,
            use_at: now + SWITCH_AFTER,
            got: now,
        });
        self.shared.counters.rotations += 1;
        self.ensure_sealer();
        self.owe_key_to_all(now);
    }

    fn owe_key_to_all(&mut self, now: Instant) {
        for i in 0..self.peers.len() {
            if let Some(s) = self.peers[i].session.as_deref_mut()
                && s.seals(now)
                && !s.revoked
            {
                s.member_due |= OWE_KEY;
            }
            self.touch(PeerId(i), now);
        }
    }

    /// Considers the keys peers handed on during the last call: one signed by the key server
    /// it names (a peer whose certificate this host holds), in the group's suite, better
    /// than the newest held (a better server, or the same one's newer epoch) is taken.
    pub(super) fn take_offered_keys(&mut self, now: Instant) {
        let offered = core::mem::take(&mut self.shared.bkeys.offered);
        for o in offered {
            let m = o.message();
            if m.server == self.shared.cfg.mac {
                continue;
            }
            let Some((prio, public)) = self.rank_of(m.server) else {
                self.shared.counters.keys_refused += 1;
                continue;
            };
            let verifies = crate::VerifyingKey::from_bytes(public)
                .verify(&m.signed_digest(), &m.sig)
                .is_ok();
            let group = self.shared.group.spec();
            if !verifies
                || prio != m.priority
                || m.suite != suite_code(group.suite)
                || m.key.len() != group.key.len()
            {
                self.shared.counters.keys_refused += 1;
                continue;
            }
            let newer = self.shared.bkeys.newest().is_none_or(|n| {
                (m.priority, m.server) < n.rank() || (n.server == m.server && m.epoch > n.epoch)
            });
            if !newer || self.shared.bkeys.held.iter().any(|k| k.key_id == m.key_id) {
                continue;
            }
            let Ok(sn) = SecurityNumber::new(m.key_id) else {
                continue;
            };
            let spec = KeySpec {
                suite: group.suite,
                key: Zeroizing::new(m.key.to_vec()),
                sealer: group.sealer.with_security_number(Some(sn)),
                opener: group.opener.with_security_number(Some(sn)),
            };
            let use_in = Duration::from_millis(u64::from(m.use_in_ms.min(10_000)));
            self.shared.bkeys.insert(BKey {
                server: m.server,
                priority: m.priority,
                epoch: m.epoch,
                key_id: m.key_id,
                spec,
                sig: m.sig,
                use_at: now + use_in,
                got: now,
            });
            self.shared.counters.keys_taken += 1;
            self.ensure_sealer();
            self.shared.events.push_back(HostEvent::BroadcastKey {
                server: m.server,
                epoch: m.epoch,
            });
        }
    }

    /// Seals a broadcast under the broadcast key in use, signed with this host's identity;
    /// `None` if there is none or its sealer cannot seal (no reservation yet): the caller
    /// seals under the group key instead.
    pub(super) fn seal_bkey(
        &mut self,
        now: Instant,
        input: &[u8],
        out: &mut [u8],
    ) -> Option<usize> {
        let BKeys { held, sealer, .. } = &mut self.shared.bkeys;
        let key = held.iter().find(|k| k.use_at <= now)?;
        match sealer.as_mut() {
            Some((cur, _)) if *cur == key.key_id => {}
            // The key changed: the slot's sealer takes it (once per key, not per frame).
            Some((cur, r)) => {
                r.rekey(&key.spec).ok()?;
                *cur = key.key_id;
            }
            None => {
                self.ensure_sealer();
                return None;
            }
        }
        let (_, r) = self.shared.bkeys.sealer.as_mut()?;
        r.sealer.set_signer(self.shared.group.take_signer());
        let sealed = r.sealer.seal(now, input, out).map(<[u8]>::len);
        self.shared.group.set_signer(r.sealer.take_signer());
        if let Some(e) = r.due(true) {
            self.shared.events.push_back(e);
        }
        match sealed {
            Ok(len) if len <= self.shared.cfg.max_frame => Some(len),
            _ => None,
        }
    }

    /// The broadcast sealer's slot, asked for as soon as a first key is held (so its
    /// numbers are reserved before the key is used).
    fn ensure_sealer(&mut self) {
        let bk = &mut self.shared.bkeys;
        if bk.sealer.is_some() {
            return;
        }
        let Some(k) = bk.held.first() else {
            return;
        };
        let Ok(r) = Reserved::slot(&k.spec, BKEY_SLOT) else {
            return;
        };
        bk.sealer = Some((k.key_id, r));
        self.shared.events.push_back(HostEvent::Reserve {
            key: BKEY_SLOT,
            group: true,
            next: None,
        });
    }

    /// A reservation for the broadcast slot was made durable.
    pub(super) fn bkey_reserved(&mut self, claim: Claim) -> bool {
        match self.shared.bkeys.sealer.as_mut() {
            Some((_, r)) => {
                r.claimed(claim);
                true
            }
            None => false,
        }
    }
}
