//! The invariants, checked after every event, and what breaking one looks like ([`Violation`]).
//!
//! - **Nonces**: no honest host seals two frames under one key with one (source MAC, sequence
//!   number), across restarts (every seal is recorded). Exempt: a static or group key after the
//!   sender's state directory was lost or rolled back (docs: rotate the key then).
//! - **Deliveries**: no inner frame is delivered twice to one host (across its restarts), or as
//!   coming from a peer other than the host that made it; no forged frame is delivered unless
//!   the attacker could legitimately seal it as that peer (the group key for a peer that has no
//!   key of its own or for an unpinned sender's broadcasts; session keys it holds). Exempt: a
//!   second delivery after the receiver's state directory was lost or rolled back.
//! - **Keys**: two hosts holding one session id hold mirrored keys in opposite roles and name
//!   each other; no third host holds it; an honest host holds keys the attacker knows only if it
//!   did not pin the claimed peer and the session is single-path or the attacker holds both
//!   paths; a host seals only under a session its peer held at some time (no one-way session).
//! - **Bounds**: frames waiting for a session per peer at most the queue, one handshake per peer.
//! - **KEM**: a session uses ML-KEM-768 as the two hosts' `kem` modes say (docs/SESSIONS.md,
//!   "Hybrid post-quantum sessions"): with it where one requires it or both allow it, without
//!   it where one has it off, and none between a host that requires it and one that has it off.
//!   A host that requires it holds no session without it, not even with the attacker's puppet;
//!   a host that has it off none with it. Read from the host's status (`SessionInfo::kem`) once
//!   per session. Exempt from the pair rule: a session whose keys the attacker holds (a puppet
//!   runs its own mode, as the docs accept under `prefer`).
//!
//! Liveness and the dead-peer bound are checked by the world ([`super::World`]).

use std::collections::{HashMap, HashSet};
use std::fmt;

use psp_core::handshake::{Role, SessionId};
use psp_core::host::{Keying, Mac, PeerId, Pin};
use psp_core::time::Instant;
use psp_core::wire::Frame;

use super::app::{self, ATTACKER, Tag};
use super::attacker::Attacker;
use super::node::{Node, PairKind, Roster};
use super::scenario::Kem;

/// Which invariant broke.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// A host panicked.
    Panic,
    /// Two frames sealed under one key with one source MAC and sequence number.
    NonceReuse,
    /// An inner frame delivered twice to one host.
    DuplicateDelivery,
    /// An honest host's frame delivered as coming from another peer.
    WrongOrigin,
    /// A forged frame delivered that the attacker could not have sealed legitimately.
    ForgedDelivered,
    /// Two hosts disagree about a session's keys or who holds it.
    KeyDisagreement,
    /// An honest host holds session keys the attacker knows, where the scenario forbids it.
    KeyCompromised,
    /// A host seals under a session its peer never held.
    OneWaySession,
    /// A per-peer bound exceeded.
    Unbounded,
    /// A host's timer did not act and woke it again at once, over and over.
    Spin,
    /// A host answered one Request (one initiator id) with two responder handshakes in one run:
    /// a replayed Request started a handshake.
    ReplayAnswered,
    /// Once attackers and faults stopped, a pair of hosts did not carry traffic again within
    /// the bound (or, for a pair whose `kem` modes forbid a session, neither host counted a
    /// `kem_required` failure).
    Liveness,
    /// In a quiet network, hosts restarted cleanly (one, then two at once) did not carry traffic
    /// with every peer within [`RECOVERY_BOUND`](super::world::RECOVERY_BOUND).
    SlowRecovery,
    /// A host shows a session `up` with a peer that has been down past the liveness bound while
    /// it sent traffic to it.
    DeadPeerUp,
    /// A host holds a session with a former member whose certificate its revocation list
    /// revokes (`[pki]`).
    RevokedSession,
    /// With path 1 cut, a pair with a session did not carry a frame each way over path 2 within
    /// the failover bound of the quiet phase (`paths = "failover"`; `world.rs`).
    Failover,
    /// A single-path session came up although both hosts require SMKEX
    /// (`smkex = "require"`): a downgrade.
    SinglePathSession,
    /// A session's use of ML-KEM-768 does not follow the hosts' `kem` modes: without it where
    /// one host requires it or both allow it (a downgrade), with it where one has it off, or a
    /// session at all between a host that requires it and one that has it off.
    KemDowngrade,
}

/// A broken invariant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// Which.
    pub kind: Kind,
    /// After how many events (frames handled, timers fired, actions).
    pub events: u64,
    /// At which (global, simulated) time.
    pub at: Instant,
    /// What exactly.
    pub detail: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} after {} events at {} ms: {}",
            self.kind,
            self.events,
            self.at.total_micros() / 1000,
            self.detail
        )
    }
}

/// The invariants' memory.
#[derive(Debug, Default)]
pub(crate) struct Checker {
    /// (key fingerprint, source MAC, sequence number) of every honest seal → sender's epoch.
    seals: HashMap<([u8; 20], Mac, u32), u32>,
    /// (receiver, tag) of every delivery → receiver's epoch, and when.
    delivered: HashMap<(u8, Tag), (u32, Instant)>,
    /// (session id, holder, its peer) of every session ever held.
    held: HashSet<([u8; 16], u8, u8)>,
    /// Pairs (holder, peer) whose session the attacker legitimately holds.
    pub(crate) compromised: HashSet<(u8, u8)>,
    /// Whether the attacker may hold a session's keys, decided when the holder was first seen
    /// with it (its pin then): (session id, holder).
    permitted: HashMap<([u8; 16], u8), bool>,
    /// The responder id each host answered each initiator id with, per run of the host.
    answers: HashMap<(u8, u32, [u8; 8]), [u8; 8]>,
    /// Sessions whose KEM use was checked: (holder, its run, its peer, when the session came
    /// up on the holder's clock).
    kem_checked: HashSet<(u8, u32, u8, u64)>,
}

fn sid(s: SessionId) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&s.initiator.0);
    b[8..].copy_from_slice(&s.responder.0);
    b
}

fn group_fp(spec: &psp_core::host::KeySpec) -> [u8; 20] {
    let mut b = [0u8; 20];
    b[..16].copy_from_slice(&spec.fingerprint().0);
    b
}

impl Checker {
    /// Records a frame `node` sealed; a repeated (key, source, sequence number) breaks the
    /// nonce invariant.
    pub(crate) fn seal(
        &mut self,
        node: &Node,
        roster: &Roster,
        frame: &[u8],
    ) -> Result<(), (Kind, String)> {
        let Ok(f) = Frame::new_checked(frame, 0) else {
            return Ok(());
        };
        let (src, dst, seq) = (f.src_addr(), f.dst_addr(), f.seq_number().0);
        let Some(host) = node.host.as_ref() else {
            return Ok(());
        };
        let (key, session) = if let Some(id) = f.security_number() {
            let Some(peer) = host.peer_by_mac(&dst) else {
                return Ok(());
            };
            let Some((_, slot)) = host.key_slots(peer).find(|(_, s)| s.key_id() == id) else {
                return Ok(());
            };
            (slot.fingerprints().0, true)
        } else if app::is_broadcast(&dst) {
            (group_fp(&Roster::group_key()), false)
        } else {
            match roster.host_of(&dst).map(|j| roster.pair(node.idx, j)) {
                Some(PairKind::Static) => {
                    let j = roster.host_of(&dst).unwrap_or(0);
                    (group_fp(&Roster::static_key(node.idx, j)), false)
                }
                _ => (group_fp(&Roster::group_key()), false),
            }
        };
        if !session && let Some((initiator, responder)) = answer(frame) {
            let k = (node.idx, node.boots, initiator);
            match self.answers.insert(k, responder) {
                Some(r) if r != responder => {
                    return Err((
                        Kind::ReplayAnswered,
                        format!(
                            "host {} answered the Request {initiator:02x?} twice in one run (a replayed Request started a handshake)",
                            node.idx
                        ),
                    ));
                }
                _ => {}
            }
        }
        match self.seals.insert((key, src, seq), node.epoch) {
            Some(e) if session || e == node.epoch => Err((
                Kind::NonceReuse,
                format!(
                    "host {} sealed sequence number {seq} twice under one {} key (dst {dst:02x?})",
                    node.idx,
                    if session { "session" } else { "static" }
                ),
            )),
            _ => Ok(()),
        }
    }

    /// Records a delivery of `inner` at `r` as coming from host `claimed`.
    pub(crate) fn deliver(
        &mut self,
        r: &Node,
        claimed: u8,
        inner: &[u8],
        roster: &Roster,
        attacker: &Attacker,
        now: Instant,
    ) -> Result<(), (Kind, String)> {
        let Some(tag) = app::tag_of(inner) else {
            return Ok(());
        };
        if claimed == 0xff {
            return Err((
                Kind::ForgedDelivered,
                format!("a frame delivered at host {} from a MAC no host has", r.idx),
            ));
        }
        let bcast = app::is_broadcast(inner);
        let resealed = attacker.resealed.contains(&(tag, claimed));
        let forged = tag.origin == ATTACKER || (tag.origin != claimed && resealed);
        if !forged && tag.origin != claimed {
            return Err((
                Kind::WrongOrigin,
                format!(
                    "host {}'s frame {} delivered at host {} as coming from host {claimed}",
                    tag.origin, tag.counter, r.idx
                ),
            ));
        }
        if forged {
            if !forgery_permitted(r, claimed, bcast, roster, attacker) {
                return Err((
                    Kind::ForgedDelivered,
                    format!(
                        "a forged {} frame ({tag:?}) delivered at host {} as coming from host {claimed}",
                        if bcast { "broadcast" } else { "unicast" },
                        r.idx
                    ),
                ));
            }
            return Ok(());
        }
        let first = self.delivered.get(&(r.idx, tag)).copied();
        if first.is_none() {
            self.delivered.insert((r.idx, tag), (r.epoch, now));
        }
        // Frames that opened after the receiver last wrote its replay floors and before it
        // crashed may open once more (docs: at most ten seconds' worth).
        let unsaved = |t1: Instant| {
            r.gaps
                .iter()
                .any(|(saved, crash)| *saved < t1 && t1 <= *crash)
        };
        match first {
            // The attacker re-sealed it in its maker's name: a copy it may send if it may seal.
            Some((e, t1))
                if e == r.epoch
                    && !unsaved(t1)
                    && !(resealed && forgery_permitted(r, claimed, bcast, roster, attacker)) =>
            {
                Err((
                    Kind::DuplicateDelivery,
                    format!(
                        "host {}'s frame {} delivered twice at host {}",
                        tag.origin, tag.counter, r.idx
                    ),
                ))
            }
            _ => Ok(()),
        }
    }

    /// The key invariants over every host's key ring.
    pub(crate) fn keys(
        &mut self,
        nodes: &[Node],
        attacker: &Attacker,
        roster: &Roster,
    ) -> Result<(), (Kind, String)> {
        let mut holders: HashMap<[u8; 16], Vec<Holding>> = HashMap::new();
        for n in nodes {
            let Some(host) = n.host.as_ref() else {
                continue;
            };
            for (pi, c) in n.peer_hosts.iter().enumerate() {
                let pid = PeerId(pi);
                if *c == 0xff {
                    // A peer with a MAC no host has (`[pki]`): a certificate the CA never made.
                    if host.key_slots(pid).next().is_some() {
                        return Err((
                            Kind::KeyCompromised,
                            format!("host {} holds a session with a MAC no host has", n.idx),
                        ));
                    }
                    continue;
                }
                // A revoked former member: no session once the host holds the list.
                let revoked = roster.retired[usize::from(*c)]
                    && (0..=roster.id_gen[usize::from(*c)])
                        .any(|g| host.revocation_list().revokes(Roster::serial(*c, g)));
                if revoked
                    && host
                        .key_slots(pid)
                        .any(|(k, _)| k == psp_core::host::SlotKind::Current)
                {
                    return Err((
                        Kind::RevokedSession,
                        format!(
                            "host {} holds a session with host {c}, whose certificate its list revokes",
                            n.idx
                        ),
                    ));
                }
                let mut count = 0;
                let mut puppet = false;
                for (kind, slot) in host.key_slots(pid) {
                    count += 1;
                    let id = sid(slot.session_id());
                    self.held.insert((id, n.idx, *c));
                    let (send, recv) = slot.fingerprints();
                    holders
                        .entry(id)
                        .or_default()
                        .push((n.idx, *c, slot.role(), (send, recv)));
                    let permitted = *self.permitted.entry((id, n.idx)).or_insert_with(|| {
                        let pin = host.session_status(pid, Instant::ZERO).and_then(|s| s.pin);
                        let configured = matches!(
                            host.peers().nth(pi).map(|(_, s)| &s.keying),
                            Some(Keying::Session {
                                pin: Pin::Configured(_),
                                ..
                            })
                        );
                        let genuine = pin.is_some_and(|k| genuine_identity(*c, &k, roster));
                        let paths_ok =
                            !slot.two_path() || (attacker.caps.see[1] && attacker.caps.inject[1]);
                        if roster.scen.pki {
                            // Certificates pin every identity: only a former member's keys
                            // (the attacker holds its identity) may be known.
                            return roster.retired[usize::from(*c)];
                        }
                        !configured && !genuine && paths_ok
                    });
                    if attacker.knows(&send) || attacker.knows(&recv) {
                        puppet = true;
                        if !permitted {
                            return Err((
                                Kind::KeyCompromised,
                                format!(
                                    "host {} holds a {} session with host {c} whose keys the attacker knows (pin {:?})",
                                    n.idx,
                                    if slot.two_path() {
                                        "two-path"
                                    } else {
                                        "single-path"
                                    },
                                    host.session_status(pid, Instant::ZERO)
                                        .and_then(|s| s.pin)
                                        .map(|k| k[0])
                                ),
                            ));
                        }
                        self.compromised.insert((n.idx, *c));
                    } else if kind == psp_core::host::SlotKind::Current
                        && !self.held.contains(&(id, *c, n.idx))
                    {
                        return Err((
                            Kind::OneWaySession,
                            format!(
                                "host {} seals to host {c} under a session host {c} never held",
                                n.idx
                            ),
                        ));
                    }
                }
                if count > 3 {
                    return Err((
                        Kind::Unbounded,
                        format!("host {} holds {count} sessions", n.idx),
                    ));
                }
                let status = host.session_status(pid, Instant::ZERO);
                if let Some(s) = status
                    && s.pending > 64
                {
                    return Err((
                        Kind::Unbounded,
                        format!("host {} queues {} frames for host {c}", n.idx, s.pending),
                    ));
                }
                // The newest session's KEM use, once per session (while its keys are held).
                if count > 0
                    && let Some((at, info)) = status.and_then(|s| s.last)
                    && self
                        .kem_checked
                        .insert((n.idx, n.boots, *c, at.total_micros()))
                {
                    let (mine, theirs) = (roster.kem(n.idx), roster.kem(*c));
                    if let Some(why) = kem_wrong(mine, theirs, info.kem, puppet) {
                        return Err((
                            Kind::KemDowngrade,
                            format!(
                                "host {} (kem {mine:?}) holds a session with host {c} (kem {theirs:?}) {why}",
                                n.idx
                            ),
                        ));
                    }
                }
            }
        }
        for (id, hs) in holders {
            if hs.len() > 2 {
                return Err((
                    Kind::KeyDisagreement,
                    format!("session {:02x?} held by {} slots", &id[..4], hs.len()),
                ));
            }
            if let [a, b] = hs[..] {
                let mirrored =
                    a.0 == b.1 && a.1 == b.0 && a.2 != b.2 && a.3.0 == b.3.1 && a.3.1 == b.3.0;
                if !mirrored {
                    return Err((
                        Kind::KeyDisagreement,
                        format!(
                            "session {:02x?}: host {} (peer {}, {:?}) and host {} (peer {}, {:?}) disagree",
                            &id[..4],
                            a.0,
                            a.1,
                            a.2,
                            b.0,
                            b.1,
                            b.2
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}

/// The initiator and responder ids of an Accept or Reject under the group key, if `frame` is
/// one.
fn answer(frame: &[u8]) -> Option<([u8; 8], [u8; 8])> {
    use psp_core::handshake::messages::{Body, Repr};
    let g = Roster::group_key();
    let key = psp_core::SuiteKey::new(g.suite, &g.key).ok()?;
    let mut o = psp_core::Opener::new(
        key,
        psp_core::OpenerConfig::new().with_max_frame_len(super::node::MAX_FRAME),
    )
    .ok()?;
    o.set_accept_unverified(true);
    let mut f = frame.to_vec();
    let opened = o.open(Instant::ZERO, &mut f).ok()?;
    if opened.protocol() != psp_core::Protocol::SessionEstablishment {
        return None;
    }
    let repr = Repr::parse_bytes(opened.payload()).ok()?;
    matches!(repr.body, Body::Accept(_) | Body::Reject(_))
        .then_some((repr.initiator_id.0, repr.responder_id.0))
}

/// What is wrong with a session of a host in mode `mine` with a peer in mode `theirs` that has
/// the KEM (`kem`) or not, if anything; `puppet`: the attacker holds keys of the peer's
/// sessions (the newest may be its own handshake, whatever host `theirs` says).
fn kem_wrong(mine: Kem, theirs: Kem, kem: bool, puppet: bool) -> Option<&'static str> {
    if mine == Kem::Require && !kem {
        return Some("without the KEM, which it requires");
    }
    if mine == Kem::Off && kem {
        return Some("with the KEM, which it has off");
    }
    if puppet {
        return None;
    }
    match Kem::session(mine, theirs) {
        None => Some("at all: one requires the KEM, the other has it off"),
        Some(true) if !kem => Some("without the KEM, which both allow"),
        Some(false) if kem => Some("with the KEM, which its peer has off"),
        _ => None,
    }
}

/// One host's hold on a session: the host, its peer, its role, its send and receive key
/// fingerprints.
type Holding = (u8, u8, Role, ([u8; 20], [u8; 20]));

/// Whether `key` is one of host `h`'s identities (any generation up to its current one).
fn genuine_identity(h: u8, key: &[u8; 32], roster: &Roster) -> bool {
    (0..=roster.id_gen[usize::from(h)]).any(|g| roster.public_key(h, g) == *key)
}

/// Whether the attacker could legitimately have sealed a frame that `r` delivers as coming
/// from `claimed`.
fn forgery_permitted(
    r: &Node,
    claimed: u8,
    bcast: bool,
    roster: &Roster,
    attacker: &Attacker,
) -> bool {
    let Some(host) = r.host.as_ref() else {
        return false;
    };
    let Some(pid) = r.peer_of(claimed) else {
        return false;
    };
    if roster.scen.pki {
        // Only a former member's identity signs as it, until the receiver's list revokes it
        // (after that nothing from it is taken).
        let revoked = (0..=roster.id_gen[usize::from(claimed)])
            .any(|g| host.revocation_list().revokes(Roster::serial(claimed, g)));
        if roster.retired[usize::from(claimed)]
            && attacker.identities.contains_key(&claimed)
            && !revoked
        {
            return true;
        }
    }
    match roster.pair(r.idx, claimed) {
        PairKind::Group => attacker.insider,
        PairKind::Static => attacker.insider && bcast,
        PairKind::Session => {
            if bcast {
                let pin = host.session_status(pid, Instant::ZERO).and_then(|s| s.pin);
                attacker.insider && pin.is_none_or(|k| !genuine_identity(claimed, &k, roster))
            } else {
                host.key_slots(pid).any(|(_, s)| {
                    let (a, b) = s.fingerprints();
                    attacker.knows(&a) || attacker.knows(&b)
                })
            }
        }
    }
}
