//! Membership messages (`[pki]`, docs/MEMBERSHIP.md): this host's certificate announced
//! under the group key (at start, then every [`ANNOUNCE_EVERY`], and to a host that asks),
//! and revocation lists: a newer list signed by the CA is put in force, every session with a
//! host it revokes ends at once, and it is handed on to every peer over its session.

use alloc::collections::VecDeque;

use rand_core::CryptoRngCore;

use super::peer::{OWE_KEY, OWE_LIST};
use super::{Dest, Host, HostEvent, HostTransmit, PeerId};
use crate::handshake::PathId;
use crate::pki::message::{Holding, Message};
use crate::pki::{PkiError, RevocationList};
use crate::time::{Duration, Instant};
use crate::wire::Protocol;

/// How often a host announces its certificate to the segment.
pub const ANNOUNCE_EVERY: Duration = Duration::from_secs(30);
/// At most this many answers (announcements to one host that asked) wait.
const ANSWERS: usize = 64;

/// What the host owes the segment.
#[derive(Debug, Default)]
pub(crate) struct Owed {
    /// When the next announcement is due (`None`: without `[pki]`).
    pub(crate) announce_at: Option<Instant>,
    /// An announcement waits for `poll_transmit`.
    pub(crate) announce: bool,
    /// No announcement sent yet: the first asks every host for an answer.
    pub(crate) first: bool,
    /// Hosts that asked for this host's announcement.
    pub(crate) answers: VecDeque<PeerId>,
    /// A revocation list a peer handed on, to consider after the call.
    pub(crate) offered: Option<RevocationList>,
}

impl Owed {
    pub(crate) fn new(now: Instant, pki: bool) -> Self {
        Self {
            announce_at: pki.then_some(now),
            first: true,
            ..Self::default()
        }
    }

    /// A host asked for this host's announcement.
    pub(crate) fn answer(&mut self, peer: PeerId) {
        if self.answers.len() < ANSWERS && !self.answers.contains(&peer) {
            self.answers.push_back(peer);
        }
    }
}

impl Host {
    /// The revocation list in force (`[pki]`; the empty list number 0 otherwise).
    pub fn revocation_list(&self) -> &RevocationList {
        &self.shared.revoked
    }

    /// A revocation list from the caller (a file, a command): put in force if the CA signed it
    /// and it is newer than the one in force; then it spreads to every peer.
    ///
    /// # Errors
    /// [`PkiError::Signature`] (counted `revocations_refused`), or [`PkiError::Kind`] without
    /// `[pki]`. `Ok(false)`: not newer (ignored).
    pub fn handle_revocation_list(
        &mut self,
        now: Instant,
        list: RevocationList,
        rng: &mut dyn CryptoRngCore,
    ) -> Result<bool, PkiError> {
        let pki = self.shared.cfg.pki.as_ref().ok_or(PkiError::Kind)?;
        if list.verify(&pki.ca).is_err() {
            self.shared.counters.revocations_refused += 1;
            return Err(PkiError::Signature);
        }
        if list.number() <= self.shared.revoked.number() {
            return Ok(false);
        }
        self.shared.revoked = list;
        self.shared.counters.revocations_adopted += 1;
        self.shared.events.push_back(HostEvent::RevocationList {
            number: self.shared.revoked.number(),
        });
        for i in 0..self.peers.len() {
            let p = &mut self.peers[i];
            let revoked = p
                .session
                .as_deref()
                .and_then(|s| s.cert_serial().filter(|_| !s.revoked))
                .filter(|serial| self.shared.revoked.revokes(*serial));
            match revoked {
                Some(serial) => {
                    p.with_session(now, &mut self.shared, rng, |s, cx| {
                        s.revoke(cx, serial);
                    });
                }
                None => {
                    if let Some(s) = p.session.as_deref_mut()
                        && s.seals(now)
                    {
                        s.member_due |= OWE_LIST;
                    }
                }
            }
            self.touch(PeerId(i), now);
        }
        // The members that remain get a key the revoked ones never had.
        self.rotate_if_server(now, rng);
        Ok(true)
    }

    /// After a call that may have received a list: considers it.
    pub(super) fn take_offered(&mut self, now: Instant, rng: &mut dyn CryptoRngCore) {
        if let Some(list) = self.shared.member.offered.take() {
            let _ = self.handle_revocation_list(now, list, rng);
        }
    }

    /// What this host holds, as its membership messages say.
    pub(crate) fn holding(&self) -> Holding {
        holding(&self.shared)
    }

    /// The announcement due, or an answer to a host that asked: under the group key, signed.
    pub(super) fn poll_announce(&mut self, now: Instant, out: &mut [u8]) -> Option<HostTransmit> {
        let pki = self.shared.cfg.pki.as_ref()?;
        let (dst, dest, answer_wanted) = if self.shared.member.announce {
            self.shared.member.announce = false;
            let first = core::mem::replace(&mut self.shared.member.first, false);
            ([0xff; 6], Dest::Group, first)
        } else {
            let pid = self.shared.member.answers.pop_front()?;
            let mac = *self.peers.get(pid.0)?.spec.macs.first()?;
            (mac, Dest::Peer(pid), false)
        };
        let mut buf = [0u8; crate::pki::message::MAX_MESSAGE_LEN];
        let cert = pki.certificate;
        let msg = Message::Announce {
            answer_wanted,
            holding: self.holding(),
            cert: cert.as_bytes(),
        };
        let n = msg.emit(&mut buf);
        let len = self
            .shared
            .seal_group_sub(now, dst, Protocol::Membership, &buf[..n], out)?;
        self.shared.counters.announces += 1;
        Some(HostTransmit {
            path: PathId::FIRST,
            dest,
            len,
            at: None,
        })
    }

    /// The announcement timer.
    pub(super) fn announce_due(&mut self, now: Instant) {
        if self.shared.member.announce_at.is_some_and(|t| t <= now) {
            self.shared.member.announce = true;
            self.shared.member.announce_at = Some(now + ANNOUNCE_EVERY);
        }
    }
}

/// What `shared` holds, as its membership messages say.
pub(crate) fn holding(shared: &super::Shared) -> Holding {
    let newest = shared.bkeys.newest();
    Holding {
        list: shared.revoked.number(),
        key_server: newest.map_or([0; 6], |k| k.server),
        key_epoch: newest.map_or(0, |k| k.epoch),
    }
}

/// A membership message from a peer (already opened; `under_group`: under the group key).
/// Returns whether it was taken.
pub(crate) fn handle(
    shared: &mut super::Shared,
    session: Option<&mut super::peer::Session>,
    id: PeerId,
    now: Instant,
    bytes: &[u8],
    under_group: bool,
) -> bool {
    let Ok(m) = Message::parse(bytes) else {
        return false;
    };
    match (m, under_group) {
        (
            Message::Announce {
                answer_wanted,
                holding: h,
                ..
            },
            true,
        ) => {
            if answer_wanted {
                shared.member.answer(id);
            }
            owe(shared, session, now, h);
            true
        }
        (Message::State(h), false) => {
            owe(shared, session, now, h);
            true
        }
        (Message::BroadcastKey(k), false) => {
            if shared.bkeys.offered.len() < 4 {
                shared.bkeys.offered.push(super::bkeys::Offered::of(&k));
            }
            true
        }
        (Message::Revocation(b), false) => {
            if let Ok(l) = RevocationList::parse(b)
                && l.number() > shared.revoked.number()
            {
                shared.member.offered = Some(l);
            }
            true
        }
        _ => false,
    }
}

/// A peer that holds an older list than ours is owed ours.
fn owe(
    shared: &super::Shared,
    session: Option<&mut super::peer::Session>,
    now: Instant,
    h: Holding,
) {
    let Some(s) = session.filter(|s| s.seals(now)) else {
        return;
    };
    if h.list < shared.revoked.number() {
        s.member_due |= OWE_LIST;
    }
    // A peer that holds another key server's key, or an older one of ours: ours (it keeps
    // the better one).
    if let Some(k) = shared.bkeys.newest()
        && (h.key_server != k.server || h.key_epoch < k.epoch)
    {
        s.member_due |= OWE_KEY;
    }
}
