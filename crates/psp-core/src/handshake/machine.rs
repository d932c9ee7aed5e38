//! [`Handshake`]: one run of SEP (+ SMKEX) as initiator or responder.

use core::fmt;
use core::net::IpAddr;

use rand_core::CryptoRngCore;

use super::kem::{self, KemCoins, KemKeyPair, KemSeed};
use super::messages::{
    AcceptRepr, Body, Flags, HASH_LEN, HandshakeId, MessageType, RejectCode, Repr, RequestRepr,
    suite_code, suite_from_code,
};
use super::schedule::{self, Ephemeral, NonceBytes, Secrets, Transcript};
use super::{
    Config, Event, FailReason, KemMode, PathId, Peer, Role, SessionId, SessionKeys, SmkexMode,
    Tai64n, Transmit,
};
use crate::crypto::SuiteId;
use crate::time::{Duration, Instant};
use crate::wire::{Protocol, SecurityNumber};

/// Why [`Handshake::handle_message`] set a message aside without changing state. Local detail
/// for counters; none of these ends the handshake.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ignored {
    /// Not a well-formed handshake message.
    Malformed(super::messages::Error),
    /// Carries other handshake ids (another handshake's message, or a stale one).
    WrongIds,
    /// Arrived on a path the protocol does not send it on.
    WrongPath,
    /// Not expected in the current state (or different from the copy already received).
    Unexpected,
    /// A copy of a message already processed (answered again if the peer may have lost ours).
    Duplicate,
    /// The handshake is over.
    Closed,
}

impl Ignored {
    /// The counter name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Malformed(_) => "malformed",
            Self::WrongIds => "wrong_ids",
            Self::WrongPath => "wrong_path",
            Self::Unexpected => "unexpected",
            Self::Duplicate => "duplicate",
            Self::Closed => "closed",
        }
    }
}

impl fmt::Display for Ignored {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl core::error::Error for Ignored {}

/// Where the handshake is. The crypto state moves by value from one variant to the next.
///
/// `kem` is the ML-KEM-768 material of a hybrid handshake: the initiator's seed until the
/// Accept, then its key pair until the KemShareReply; the responder's encapsulation randomness.
enum State {
    /// Initiator: request sent, waiting for Accept.
    SentRequest {
        eph: Ephemeral,
        nonce: NonceBytes,
        kem: Option<KemSeed>,
    },
    /// Initiator: share and nonce sent, waiting for ShareReply and NonceReply.
    SentShare {
        eph: Ephemeral,
        kem: Option<KemKeyPair>,
    },
    /// Initiator, compact: request, share and nonce sent, waiting for Accept, ShareReply and
    /// NonceReply (in any order).
    SentCompact {
        eph: Ephemeral,
        kem: Option<KemKeyPair>,
    },
    /// Initiator: SMKEX hash verified, Confirm sent, waiting for ConfirmAck.
    SentConfirm { secrets: Secrets },
    /// Responder: Accept sent, waiting for Share and Nonce.
    Accepted {
        eph: Ephemeral,
        nonce: NonceBytes,
        kem: Option<KemCoins>,
    },
    /// Responder: ShareReply and NonceReply sent, waiting for Confirm.
    Replied { secrets: Secrets },
    /// Established. A responder lingers until the deadline to answer a repeated Confirm.
    Done,
    /// Failed (a Reject may still be queued).
    Failed,
}

/// One handshake, sans-I/O.
///
/// Call order (quinn-proto style): create with [`initiate`](Self::initiate) or
/// [`respond`](Self::respond); then, whenever something happens, feed
/// [`handle_message`](Self::handle_message) (a payload opened from a session-establishment or
/// key-exchange sub-protocol frame, with the path it came on) or
/// [`handle_timeout`](Self::handle_timeout) (at [`poll_timeout`](Self::poll_timeout)), and
/// after each call drain [`poll_transmit`](Self::poll_transmit) and
/// [`poll_event`](Self::poll_event). Drop it once [`is_closed`](Self::is_closed).
///
/// Randomness (ephemeral key, nonce, handshake id, retransmission jitter) is drawn from the
/// caller's RNG once, at creation.
pub struct Handshake {
    role: Role,
    cfg: Config,
    peer: Peer,
    ids: SessionId,
    state: State,
    two_path: bool,
    /// ML-KEM-768 is in the key exchange (the Accept said so).
    kem: bool,
    suite: SuiteId,
    lifetime_secs: u32,
    peer_static: Option<[u8; 32]>,
    /// Transcript parts in order: Request, Accept, Share, Nonce, ShareReply, NonceReply.
    parts: [Option<Repr>; 6],
    flight: [Option<(Repr, PathId)>; FLIGHT],
    pending: [bool; FLIGHT],
    rto: Duration,
    retransmit_at: Option<Instant>,
    deadline: Instant,
    event: Option<Event>,
    jitter: u64,
    /// When the current flight was last queued: a responder answers a repeat at most once per
    /// half RTO, so copies re-sealed by an insider cannot make it send more.
    answered_at: Option<Instant>,
}

/// The most messages one flight holds (a compact responder's Accept, ShareReply, NonceReply).
const FLIGHT: usize = 3;

const REQUEST: usize = 0;
const ACCEPT: usize = 1;
const SHARE: usize = 2;
const NONCE: usize = 3;
const SHARE_REPLY: usize = 4;
const NONCE_REPLY: usize = 5;

/// Fresh randomness for one handshake.
struct Draw {
    eph: Ephemeral,
    nonce: NonceBytes,
    id: HandshakeId,
    jitter: u64,
}

impl Draw {
    fn new(rng: &mut dyn CryptoRngCore) -> Self {
        let mut secret = [0u8; 32];
        rng.fill_bytes(&mut secret);
        let eph = Ephemeral::from_bytes(secret);
        zeroize::Zeroize::zeroize(&mut secret);
        let mut nonce = NonceBytes([0; 32]);
        rng.fill_bytes(&mut nonce.0);
        let mut id = [0u8; 8];
        // An all-zero id means "no responder id yet" on the wire.
        while id == [0; 8] {
            rng.fill_bytes(&mut id);
        }
        Self {
            eph,
            nonce,
            id: HandshakeId(id),
            jitter: rng.next_u64() | 1,
        }
    }
}

/// The initiator's ML-KEM-768 seed `d ‖ z`, drawn after [`Draw`]'s values if it offers the KEM.
fn draw_kem_seed(rng: &mut dyn CryptoRngCore) -> KemSeed {
    let mut seed = KemSeed([0; 64]);
    rng.fill_bytes(&mut seed.0);
    seed
}

/// The responder's encapsulation randomness `m`, drawn after [`Draw`]'s values if it takes the
/// KEM.
fn draw_kem_coins(rng: &mut dyn CryptoRngCore) -> KemCoins {
    let mut coins = KemCoins([0; 32]);
    rng.fill_bytes(&mut coins.0);
    coins
}

impl Handshake {
    /// Starts a handshake as initiator: queues the request (stage 1 and the stage 2 offer),
    /// stamped `timestamp` (from the host's [`TimestampClock`](super::TimestampClock): the
    /// responder refuses a Request that is not newer than the last it took from this host).
    ///
    /// If SMKEX is required and `cfg.paths < 2`, the handshake is born failed: no message, one
    /// [`Event::Failed`]`(`[`FailReason::TooFewPaths`]`)`.
    pub fn initiate(
        now: Instant,
        cfg: Config,
        peer: Peer,
        timestamp: Tai64n,
        rng: &mut dyn CryptoRngCore,
    ) -> Self {
        let d = Draw::new(rng);
        let kem_seed = (cfg.kem != KemMode::Off).then(|| draw_kem_seed(rng));
        let two_path = cfg.smkex != SmkexMode::Off && cfg.paths >= 2;
        let request = Repr {
            initiator_id: d.id,
            responder_id: HandshakeId::default(),
            body: Body::Request(RequestRepr {
                timestamp,
                flags: Flags {
                    two_path,
                    smkex_required: cfg.smkex == SmkexMode::Required,
                    rekey: cfg.rekey,
                    kem: kem_seed.is_some(),
                    kem_required: cfg.kem == KemMode::Required,
                },
                paths: cfg.paths.max(1),
                initiator_mac: cfg.local_mac,
                responder_mac: peer.mac,
                initiator_addr: cfg.local_addr,
                responder_addr: peer.addr,
                suites: cfg.suites,
                static_key: cfg.static_key.as_ref().map(|k| k.public_key()),
                cert: cfg.static_key.as_ref().and(cfg.certificate),
            }),
        };
        let required_fails = cfg.smkex == SmkexMode::Required && cfg.paths < 2;
        let compact = cfg.compact && cfg.smkex == SmkexMode::Required && cfg.paths >= 2;
        let mut hs = Self::new(Role::Initiator, now, cfg, peer, d.id, d.jitter);
        hs.parts[REQUEST] = Some(request);
        if compact {
            // The offer, the share and the nonce in one flight (the responder's id still zero).
            // The share leaves before the Accept, so it carries the KEM key if the KEM is
            // offered, whatever the answer.
            hs.two_path = true;
            let kem = kem_seed.map(|s| s.key_pair());
            let share = hs.repr(share_body(
                hs.lifetime_secs,
                d.eph.public_share(),
                kem.as_ref(),
            ));
            let nonce_msg = hs.repr(Body::Nonce(d.nonce.0));
            hs.parts[SHARE] = Some(share);
            hs.parts[NONCE] = Some(nonce_msg);
            hs.state = State::SentCompact { eph: d.eph, kem };
            hs.send_flight(
                now,
                &[
                    (request, PathId::FIRST),
                    (share, PathId::FIRST),
                    (nonce_msg, PathId::SECOND),
                ],
            );
            return hs;
        }
        hs.state = State::SentRequest {
            eph: d.eph,
            nonce: d.nonce,
            kem: kem_seed,
        };
        if required_fails {
            hs.fail(FailReason::TooFewPaths);
        } else {
            hs.send_flight(now, &[(request, PathId::FIRST)]);
        }
        hs
    }

    /// Answers a request as responder: runs the thesis' stage 1 checks (the request is for this
    /// host's MAC and address, from `peer.mac`, and the initiator is on this host's subnet),
    /// picks the suite and the mode, and queues Accept, or Reject (then the handshake reports
    /// [`Event::Failed`] and sends nothing else).
    ///
    /// # Errors
    /// [`FailReason::NotForUs`] if stage 1 refuses the request (the thesis drops it without a
    /// reply: no handshake is created); [`FailReason::BadMessage`] if `bytes` is not a request
    /// on path 1.
    pub fn respond(
        now: Instant,
        cfg: Config,
        peer: Peer,
        path: PathId,
        bytes: &[u8],
        rng: &mut dyn CryptoRngCore,
    ) -> Result<Self, FailReason> {
        let request = Repr::parse_bytes(bytes).map_err(|_| FailReason::BadMessage)?;
        Self::respond_parsed(now, cfg, peer, path, request, rng)
    }

    /// As [`respond`](Self::respond), with the request already parsed (a caller that looked
    /// at it first parses it once).
    ///
    /// # Errors
    /// As [`respond`](Self::respond).
    pub fn respond_parsed(
        now: Instant,
        cfg: Config,
        peer: Peer,
        path: PathId,
        request: Repr,
        rng: &mut dyn CryptoRngCore,
    ) -> Result<Self, FailReason> {
        let Body::Request(req) = request.body else {
            return Err(FailReason::BadMessage);
        };
        if path != PathId::FIRST {
            return Err(FailReason::BadMessage);
        }
        if req.responder_mac != cfg.local_mac
            || req.initiator_mac != peer.mac
            || req.responder_addr != cfg.local_addr
            || !same_subnet(req.initiator_addr, cfg.local_addr, cfg.prefix_len)
        {
            return Err(FailReason::NotForUs);
        }
        let d = Draw::new(rng);
        let use_kem = req.flags.kem && cfg.kem != KemMode::Off;
        let coins = use_kem.then(|| draw_kem_coins(rng));
        let mut hs = Self::new(
            Role::Responder,
            now,
            cfg,
            peer,
            request.initiator_id,
            d.jitter,
        );
        hs.ids.responder = d.id;
        hs.parts[REQUEST] = Some(request);
        hs.peer_static = req.static_key;
        if let Some(pinned) = peer.pinned_x25519
            && req.static_key != Some(pinned)
        {
            hs.reject(now, FailReason::IdentityMismatch);
            return Ok(hs);
        }
        let both_two_path = req.flags.two_path
            && req.paths >= 2
            && hs.cfg.paths >= 2
            && hs.cfg.smkex != SmkexMode::Off;
        let required = req.flags.smkex_required || hs.cfg.smkex == SmkexMode::Required;
        if required && !both_two_path {
            hs.reject(now, FailReason::TooFewPaths);
            return Ok(hs);
        }
        // ML-KEM-768: used if offered and allowed here; required by either side, or nothing.
        let required_here =
            hs.cfg.kem == KemMode::Required && !crate::plant::on(crate::plant::Bug::KemDowngrade);
        if (req.flags.kem_required || required_here) && !use_kem {
            hs.reject(now, FailReason::KemRequired);
            return Ok(hs);
        }
        // Stage 2: the first suite of the initiator's list that this host allows.
        let Some(suite) = req.suites.suites().find(|s| hs.cfg.suites.contains(*s)) else {
            hs.reject(now, FailReason::NoCommonSuite);
            return Ok(hs);
        };
        hs.two_path = both_two_path;
        hs.kem = use_kem;
        hs.suite = suite;
        let accept = hs.repr(Body::Accept(AcceptRepr {
            two_path: both_two_path,
            suite: suite_code(suite),
            static_key: hs.cfg.static_key.as_ref().map(|k| k.public_key()),
            cert: hs.cfg.static_key.as_ref().and(hs.cfg.certificate),
            kem: use_kem,
        }));
        hs.parts[ACCEPT] = Some(accept);
        hs.state = State::Accepted {
            eph: d.eph,
            nonce: d.nonce,
            kem: coins,
        };
        hs.send_flight(now, &[(accept, PathId::FIRST)]);
        // The responder does not retransmit; it answers repeats.
        hs.retransmit_at = None;
        Ok(hs)
    }

    fn new(
        role: Role,
        now: Instant,
        cfg: Config,
        peer: Peer,
        initiator: HandshakeId,
        jitter: u64,
    ) -> Self {
        let lifetime_secs =
            u32::try_from(cfg.lifetime.total_micros() / 1_000_000).map_or(u32::MAX, |s| s.max(1));
        Self {
            role,
            rto: cfg.rto,
            deadline: now + cfg.timeout,
            cfg,
            peer,
            ids: SessionId {
                initiator,
                responder: HandshakeId::default(),
            },
            state: State::Failed,
            two_path: false,
            kem: false,
            suite: SuiteId::None,
            lifetime_secs,
            peer_static: None,
            parts: [None; 6],
            flight: [None; FLIGHT],
            pending: [false; FLIGHT],
            retransmit_at: None,
            event: None,
            jitter,
            answered_at: None,
        }
    }

    /// This side's role.
    pub fn role(&self) -> Role {
        self.role
    }

    /// Requires the peer's long-term key to be `key` from now on (an initiator that learnt it
    /// from the certificate in the Accept it is about to handle): a different or missing key
    /// fails with [`FailReason::IdentityMismatch`].
    pub fn pin_peer(&mut self, key: [u8; 32]) {
        self.peer.pinned_x25519 = Some(key);
    }

    /// The session id (the responder half is zero until the initiator gets Accept).
    pub fn session_id(&self) -> SessionId {
        self.ids
    }

    /// Whether the peer has answered since the handshake began: as initiator, an Accept (or
    /// Reject) arrived; as responder, a Share or Nonce. A responder that never hears from its
    /// initiator again may be answering a replayed Request.
    pub fn progressed(&self) -> bool {
        match self.role {
            Role::Initiator => self.ids.responder != HandshakeId::default(),
            Role::Responder => self.parts[SHARE].is_some() || self.parts[NONCE].is_some(),
        }
    }

    /// Whether a message waits for [`poll_transmit`](Self::poll_transmit).
    pub fn has_transmit(&self) -> bool {
        self.pending.iter().any(|p| *p)
    }

    /// Whether the handshake is over and may be dropped (established or failed, nothing left to
    /// send, and a responder's linger time is up).
    pub fn is_closed(&self) -> bool {
        let idle = !self.pending.iter().any(|p| *p);
        match self.state {
            State::Failed => idle,
            State::Done => idle && (self.role == Role::Initiator || self.retransmit_at.is_none()),
            _ => false,
        }
    }

    /// Feeds one message payload that arrived on `path`.
    ///
    /// # Errors
    /// [`Ignored`] when the message changed nothing (for counters). Protocol failures are not
    /// errors here: they end the handshake with [`Event::Failed`].
    pub fn handle_message(
        &mut self,
        now: Instant,
        path: PathId,
        bytes: &[u8],
    ) -> Result<(), Ignored> {
        let repr = Repr::parse_bytes(bytes).map_err(Ignored::Malformed)?;
        self.handle_parsed(now, path, repr)
    }

    /// As [`handle_message`](Self::handle_message), with the message already parsed.
    ///
    /// # Errors
    /// As [`handle_message`](Self::handle_message), but for a malformed message.
    pub fn handle_parsed(&mut self, now: Instant, path: PathId, repr: Repr) -> Result<(), Ignored> {
        if repr.initiator_id != self.ids.initiator {
            return Err(Ignored::WrongIds);
        }
        let compact_learning = matches!(self.state, State::SentCompact { .. })
            && self.ids.responder == HandshakeId::default();
        let learning = self.role == Role::Initiator
            && (matches!(self.state, State::SentRequest { .. }) || compact_learning);
        // A compact initiator sends its share and nonce before it knows our id; a repeated
        // Request (our Accept was lost) never carries it.
        let early = self.role == Role::Responder
            && repr.responder_id == HandshakeId::default()
            && (matches!(repr.body, Body::Request(_))
                || (self.cfg.compact
                    && matches!(
                        repr.body,
                        Body::Share { .. } | Body::KemShare { .. } | Body::Nonce(_)
                    )));
        if !(learning || early) && repr.responder_id != self.ids.responder {
            return Err(Ignored::WrongIds);
        }
        let ty = repr.body.message_type();
        if path != self.expected_path(ty) {
            return Err(Ignored::WrongPath);
        }
        if compact_learning && repr.responder_id != HandshakeId::default() {
            // The first answer names the responder; every later one must carry the same id.
            self.ids.responder = repr.responder_id;
        }
        match self.role {
            Role::Initiator => self.initiator_message(now, repr),
            Role::Responder => self.responder_message(now, repr),
        }
    }

    fn initiator_message(&mut self, now: Instant, repr: Repr) -> Result<(), Ignored> {
        match (&self.state, repr.body) {
            // A Reject answers the Request, or (lifetime refused) the Share.
            (
                State::SentRequest { .. } | State::SentCompact { .. } | State::SentShare { .. },
                Body::Reject(code),
            ) => {
                self.ids.responder = repr.responder_id;
                self.fail(match code {
                    RejectCode::NoCommonSuite => FailReason::NoCommonSuite,
                    RejectCode::TooFewPaths => FailReason::TooFewPaths,
                    RejectCode::ExpiryRefused => FailReason::ExpiryRefused,
                    RejectCode::IdentityMismatch => FailReason::IdentityMismatch,
                    RejectCode::KemRequired => FailReason::KemRequired,
                    RejectCode::Unknown(_) => FailReason::BadMessage,
                });
                Ok(())
            }
            (State::SentRequest { .. }, Body::Accept(a)) => {
                self.on_accept(now, repr, a);
                Ok(())
            }
            (State::SentCompact { .. }, Body::Accept(a)) => {
                self.store(ACCEPT, repr)?;
                self.on_compact_accept(a);
                self.initiator_try_finish(now);
                Ok(())
            }
            (
                State::SentShare { .. } | State::SentCompact { .. },
                Body::ShareReply { .. } | Body::KemShareReply { .. },
            ) => {
                // The reply must match the Accept: a KemShareReply iff the KEM is in use (a
                // compact initiator may get it before the Accept; then the check is at the end).
                let with_kem = matches!(repr.body, Body::KemShareReply { .. });
                if self.parts[ACCEPT].is_some() && with_kem != self.kem {
                    return Err(Ignored::Unexpected);
                }
                self.store(SHARE_REPLY, repr)?;
                self.initiator_try_finish(now);
                Ok(())
            }
            (State::SentShare { .. } | State::SentCompact { .. }, Body::NonceReply { .. }) => {
                self.store(NONCE_REPLY, repr)?;
                self.initiator_try_finish(now);
                Ok(())
            }
            (State::SentConfirm { secrets }, Body::ConfirmAck(tag)) => {
                if !secrets.check_tag(Role::Responder, &tag) {
                    self.fail(FailReason::ConfirmMismatch);
                    return Ok(());
                }
                self.establish(now);
                Ok(())
            }
            (State::Done | State::Failed, _) => Err(Ignored::Closed),
            _ => Err(self.duplicate_or_unexpected(now, &repr)),
        }
    }

    fn on_accept(&mut self, now: Instant, repr: Repr, a: AcceptRepr) {
        self.ids.responder = repr.responder_id;
        let offered_two_path = self.offered().two_path;
        let Some(suite) = suite_from_code(a.suite).filter(|s| self.cfg.suites.contains(*s)) else {
            return self.fail(FailReason::BadMessage);
        };
        if a.two_path && !offered_two_path {
            return self.fail(FailReason::BadMessage);
        }
        if !a.two_path && self.cfg.smkex == SmkexMode::Required {
            return self.fail(FailReason::TooFewPaths);
        }
        if let Err(r) = self.check_kem_answer(a.kem) {
            return self.fail(r);
        }
        if let Some(pinned) = self.peer.pinned_x25519
            && a.static_key != Some(pinned)
        {
            return self.fail(FailReason::IdentityMismatch);
        }
        self.suite = suite;
        self.two_path = a.two_path;
        self.kem = a.kem;
        self.peer_static = a.static_key;
        self.parts[ACCEPT] = Some(repr);
        let State::SentRequest { eph, nonce, kem } =
            core::mem::replace(&mut self.state, State::Failed)
        else {
            return self.fail(FailReason::BadMessage);
        };
        // The key pair is made only now, when the responder took the KEM.
        let kem = if a.kem {
            let Some(seed) = kem else {
                return self.fail(FailReason::BadMessage);
            };
            Some(seed.key_pair())
        } else {
            None
        };
        let share = self.repr(share_body(
            self.lifetime_secs,
            eph.public_share(),
            kem.as_ref(),
        ));
        let nonce_msg = self.repr(Body::Nonce(nonce.0));
        self.parts[SHARE] = Some(share);
        self.parts[NONCE] = Some(nonce_msg);
        self.state = State::SentShare { eph, kem };
        let p2 = self.path2();
        self.rto = self.cfg.rto;
        self.send_flight(now, &[(share, PathId::FIRST), (nonce_msg, p2)]);
    }

    /// A compact initiator's checks of Accept (already stored): the same as [`Self::on_accept`]'s,
    /// but the share and nonce are already out.
    fn on_compact_accept(&mut self, a: AcceptRepr) {
        let Some(suite) = suite_from_code(a.suite).filter(|s| self.cfg.suites.contains(*s)) else {
            return self.fail(FailReason::BadMessage);
        };
        if !a.two_path {
            return self.fail(FailReason::TooFewPaths);
        }
        if let Err(r) = self.check_kem_answer(a.kem) {
            return self.fail(r);
        }
        if let Some(pinned) = self.peer.pinned_x25519
            && a.static_key != Some(pinned)
        {
            return self.fail(FailReason::IdentityMismatch);
        }
        self.suite = suite;
        self.kem = a.kem;
        self.peer_static = a.static_key;
    }

    /// The flags of this initiator's Request.
    fn offered(&self) -> Flags {
        match self.parts[REQUEST].map(|r| r.body) {
            Some(Body::Request(RequestRepr { flags, .. })) => flags,
            _ => Flags::default(),
        }
    }

    /// The initiator's check of the Accept's KEM flag: set only if offered (else the Accept is
    /// not an answer to our Request), and set if this host requires the KEM.
    fn check_kem_answer(&self, accepted: bool) -> Result<(), FailReason> {
        if accepted && !self.offered().kem {
            return Err(FailReason::BadMessage);
        }
        if !accepted && self.cfg.kem == KemMode::Required {
            return Err(FailReason::KemRequired);
        }
        Ok(())
    }

    fn initiator_try_finish(&mut self, now: Instant) {
        let (Some(_), Some(reply), Some(nonce_reply)) = (
            self.parts[ACCEPT],
            self.parts[SHARE_REPLY],
            self.parts[NONCE_REPLY],
        ) else {
            return;
        };
        let Body::NonceReply { hash, .. } = nonce_reply.body else {
            return self.fail(FailReason::BadMessage);
        };
        // A compact initiator may have taken the reply before the Accept: check it now.
        let (expiry_secs, share, ciphertext) = match reply.body {
            Body::ShareReply { expiry_secs, share } if !self.kem => (expiry_secs, share, None),
            Body::KemShareReply {
                expiry_secs,
                share,
                ciphertext,
            } if self.kem => (expiry_secs, share, Some(ciphertext)),
            _ => return self.fail(FailReason::BadMessage),
        };
        let Some(th) = self.transcript_hash() else {
            return self.fail(FailReason::BadMessage);
        };
        // SMKEX (seed 002 §4): the hash that came on path 2 must match what path 1 showed us.
        if !schedule::smkex_hash_eq(&schedule::smkex_hash(&th), &hash) {
            return self.fail(FailReason::SmkexMismatch);
        }
        if expiry_secs > self.lifetime_secs || !self.lifetime_ok(expiry_secs) {
            return self.fail(FailReason::ExpiryRefused);
        }
        self.lifetime_secs = expiry_secs;
        let compact = matches!(self.state, State::SentCompact { .. });
        let (State::SentShare { eph, kem } | State::SentCompact { eph, kem }) =
            core::mem::replace(&mut self.state, State::Failed)
        else {
            return self.fail(FailReason::BadMessage);
        };
        let kem_secret = match (ciphertext, &kem) {
            (Some(ct), Some(pair)) => Some(pair.decapsulate(&ct)),
            (None, _) => None,
            (Some(_), None) => return self.fail(FailReason::BadMessage),
        };
        drop(kem);
        let peer_static = self.peer_static;
        let shared = match eph.complete_hybrid(
            Role::Initiator,
            kem_secret.as_ref(),
            &share,
            self.cfg.static_key.as_ref(),
            peer_static.as_ref(),
        ) {
            Ok(s) => s,
            Err(r) => return self.fail(r),
        };
        let secrets = shared.derive(&th, self.suite.key_len());
        if compact {
            // No Confirm: the caller confirms the keys (see `Config::compact`).
            self.state = State::SentConfirm { secrets };
            return self.establish(now);
        }
        let confirm = self.repr(Body::Confirm(secrets.tag(Role::Initiator)));
        self.state = State::SentConfirm { secrets };
        self.rto = self.cfg.rto;
        let p2 = self.path2();
        self.send_flight(now, &[(confirm, p2)]);
    }

    fn responder_message(&mut self, now: Instant, repr: Repr) -> Result<(), Ignored> {
        match (&self.state, repr.body) {
            (
                State::Accepted { .. },
                Body::Share { expiry_secs, .. } | Body::KemShare { expiry_secs, .. },
            ) => {
                if !self.share_expected(&repr) {
                    return Err(Ignored::Unexpected);
                }
                self.store(SHARE, repr)?;
                let accepted = expiry_secs.min(self.lifetime_secs);
                if !self.lifetime_ok(accepted) {
                    self.reject(now, FailReason::ExpiryRefused);
                    return Ok(());
                }
                self.lifetime_secs = accepted;
                self.responder_try_reply(now);
                Ok(())
            }
            (State::Accepted { .. }, Body::Nonce(_)) => {
                self.store(NONCE, repr)?;
                self.responder_try_reply(now);
                Ok(())
            }
            (State::Replied { secrets }, Body::Confirm(tag)) => {
                if !secrets.check_tag(Role::Initiator, &tag) {
                    self.fail(FailReason::ConfirmMismatch);
                    return Ok(());
                }
                let ack = self.repr(Body::ConfirmAck(secrets.tag(Role::Responder)));
                self.establish(now);
                self.send_flight(now, &[(ack, PathId::FIRST)]);
                // Linger until the deadline to answer a repeated Confirm (our ack was lost).
                self.retransmit_at = Some(now + self.cfg.timeout);
                self.deadline = now + self.cfg.timeout;
                Ok(())
            }
            (State::Failed, _) => Err(Ignored::Closed),
            _ => Err(self.duplicate_or_unexpected(now, &repr)),
        }
    }

    /// Whether the responder takes this share message: a KemShare iff the KEM is in use, a
    /// Share otherwise; and a compact initiator's KemShare (sent before our Accept, whatever
    /// it said) when the Request offered the KEM: its key is hashed, not used.
    fn share_expected(&self, repr: &Repr) -> bool {
        let offered = match self.parts[REQUEST].map(|r| r.body) {
            Some(Body::Request(q)) => q.flags.kem,
            _ => false,
        };
        match repr.body {
            Body::Share { .. } => !self.kem,
            Body::KemShare { .. } => {
                self.kem || (offered && repr.responder_id == HandshakeId::default())
            }
            _ => false,
        }
    }

    fn responder_try_reply(&mut self, now: Instant) {
        let (peer_share, peer_kem_key) = match self.parts[SHARE].map(|r| r.body) {
            Some(Body::Share { share, .. }) => (share, None),
            Some(Body::KemShare { share, kem_key, .. }) => (share, Some(kem_key)),
            _ => return,
        };
        if self.parts[NONCE].is_none() {
            return;
        }
        let State::Accepted { eph, nonce, kem } =
            core::mem::replace(&mut self.state, State::Failed)
        else {
            return self.fail(FailReason::BadMessage);
        };
        let (reply_body, kem_secret) = if self.kem {
            let (Some(ek), Some(coins)) = (peer_kem_key, kem) else {
                return self.fail(FailReason::BadMessage);
            };
            let (ciphertext, secret) = kem::encapsulate(&ek, &coins.0);
            let body = Body::KemShareReply {
                expiry_secs: self.lifetime_secs,
                share: eph.public_share(),
                ciphertext,
            };
            (body, Some(secret))
        } else {
            let body = Body::ShareReply {
                expiry_secs: self.lifetime_secs,
                share: eph.public_share(),
            };
            (body, None)
        };
        let reply = self.repr(reply_body);
        self.parts[SHARE_REPLY] = Some(reply);
        self.parts[NONCE_REPLY] = Some(self.repr(Body::NonceReply {
            nonce: nonce.0,
            hash: [0; HASH_LEN],
        }));
        let Some(th) = self.transcript_hash() else {
            return self.fail(FailReason::BadMessage);
        };
        let nonce_reply = self.repr(Body::NonceReply {
            nonce: nonce.0,
            hash: schedule::smkex_hash(&th),
        });
        self.parts[NONCE_REPLY] = Some(nonce_reply);
        let peer_static = self.peer_static;
        let shared = match eph.complete_hybrid(
            Role::Responder,
            kem_secret.as_ref(),
            &peer_share,
            self.cfg.static_key.as_ref(),
            peer_static.as_ref(),
        ) {
            Ok(s) => s,
            Err(r) => return self.fail(r),
        };
        self.state = State::Replied {
            secrets: shared.derive(&th, self.suite.key_len()),
        };
        let p2 = self.path2();
        let compact = self.parts[SHARE].is_some_and(|r| r.responder_id == HandshakeId::default());
        if let (true, Some(accept)) = (compact, self.parts[ACCEPT]) {
            // A compact initiator waits for no Confirm round trip: established now. The flight
            // keeps Accept (already sent unless a repeat is due) for answering repeats.
            let accept_due = self.pending[0];
            self.establish(now);
            self.send_flight(
                now,
                &[
                    (accept, PathId::FIRST),
                    (reply, PathId::FIRST),
                    (nonce_reply, p2),
                ],
            );
            self.pending[0] = accept_due;
            self.retransmit_at = Some(now + self.cfg.timeout);
            self.deadline = now + self.cfg.timeout;
            return;
        }
        self.send_flight(now, &[(reply, PathId::FIRST), (nonce_reply, p2)]);
        self.retransmit_at = None;
    }

    /// Handles the timers: retransmission (initiator), the overall deadline, the responder's
    /// linger time.
    pub fn handle_timeout(&mut self, now: Instant) {
        match self.state {
            State::Failed => {}
            State::Done => {
                if self.retransmit_at.is_some_and(|t| now >= t) {
                    self.retransmit_at = None;
                }
            }
            _ if now >= self.deadline => self.fail(FailReason::Timeout),
            _ => {
                if self.retransmit_at.is_some_and(|t| now >= t) {
                    for (p, f) in self.pending.iter_mut().zip(&self.flight) {
                        *p = f.is_some();
                    }
                    self.rto = Duration::from_micros(self.rto.total_micros().saturating_mul(2))
                        .min(self.cfg.max_rto);
                    self.arm_retransmit(now);
                }
            }
        }
    }

    /// The next instant [`handle_timeout`](Self::handle_timeout) must be called at.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match self.state {
            State::Failed => None,
            State::Done => self.retransmit_at,
            _ => Some(
                self.retransmit_at
                    .map_or(self.deadline, |t| t.min(self.deadline)),
            ),
        }
    }

    /// Writes the next message to send into `buf` (a buffer of
    /// [`MAX_MESSAGE_LEN`](super::messages::MAX_MESSAGE_LEN) bytes always fits; one shorter
    /// than the message gets `None` and the message stays queued).
    #[must_use]
    pub fn poll_transmit(&mut self, _now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        let i = self.pending.iter().position(|p| *p)?;
        let (repr, path) = self.flight[i]?;
        if buf.len() < repr.buffer_len() {
            return None;
        }
        self.pending[i] = false;
        let len = repr.emit(buf);
        let protocol = match repr.body.message_type() {
            MessageType::Nonce | MessageType::NonceReply => Protocol::KeyExchange,
            _ => Protocol::SessionEstablishment,
        };
        Some(Transmit {
            path,
            len,
            protocol,
        })
    }

    /// The next event (at most one per handshake: established or failed).
    #[must_use]
    pub fn poll_event(&mut self) -> Option<Event> {
        self.event.take()
    }

    fn repr(&self, body: Body) -> Repr {
        Repr {
            initiator_id: self.ids.initiator,
            responder_id: self.ids.responder,
            body,
        }
    }

    fn path2(&self) -> PathId {
        if self.two_path {
            PathId::SECOND
        } else {
            PathId::FIRST
        }
    }

    fn expected_path(&self, ty: MessageType) -> PathId {
        match ty {
            MessageType::Nonce | MessageType::NonceReply | MessageType::Confirm => self.path2(),
            _ => PathId::FIRST,
        }
    }

    fn lifetime_ok(&self, secs: u32) -> bool {
        u64::from(secs) * 1_000_000 >= self.cfg.min_lifetime.total_micros()
    }

    /// Stores a transcript part; a different second copy is refused (first wins).
    fn store(&mut self, i: usize, repr: Repr) -> Result<(), Ignored> {
        match self.parts[i] {
            Some(have) if have == repr => Err(Ignored::Duplicate),
            Some(_) => Err(Ignored::Unexpected),
            None => {
                self.parts[i] = Some(repr);
                Ok(())
            }
        }
    }

    /// For a message that does not advance the state: if it repeats one we already answered
    /// (a responder's peer lost our answer), queue the answer again, at most once per half RTO
    /// (the initiator repeats after at least 7/8 of one).
    fn duplicate_or_unexpected(&mut self, now: Instant, repr: &Repr) -> Ignored {
        if !self.parts.iter().flatten().any(|p| p == repr) {
            // A repeated Confirm reaches a finished responder whose ack was lost.
            let is_confirm_repeat = self.role == Role::Responder
                && matches!(self.state, State::Done)
                && matches!(repr.body, Body::Confirm(_));
            if !is_confirm_repeat {
                return Ignored::Unexpected;
            }
        }
        let spacing = Duration::from_micros(self.cfg.rto.total_micros() / 2);
        if self.role == Role::Responder && self.answered_at.is_none_or(|t| now >= t + spacing) {
            for (p, f) in self.pending.iter_mut().zip(&self.flight) {
                *p = f.is_some();
            }
            self.answered_at = Some(now);
        }
        Ignored::Duplicate
    }

    fn transcript_hash(&self) -> Option<[u8; HASH_LEN]> {
        let p2 = self.path2();
        let paths = [
            PathId::FIRST,
            PathId::FIRST,
            PathId::FIRST,
            p2,
            PathId::FIRST,
            p2,
        ];
        let mut parts = [(self.parts[REQUEST]?, PathId::FIRST); 6];
        for (i, part) in parts.iter_mut().enumerate() {
            *part = (self.parts[i]?, paths[i]);
        }
        Some(Transcript { parts }.hash())
    }

    /// Queues `flight` (at most [`FLIGHT`] messages) and arms the retransmission timer.
    fn send_flight(&mut self, now: Instant, flight: &[(Repr, PathId)]) {
        self.flight = [None; FLIGHT];
        for (slot, m) in self.flight.iter_mut().zip(flight) {
            *slot = Some(*m);
        }
        self.pending = self.flight.map(|f| f.is_some());
        self.answered_at = Some(now);
        self.arm_retransmit(now);
    }

    fn arm_retransmit(&mut self, now: Instant) {
        // xorshift64: jitter needs no cryptographic quality, only independence between hosts.
        self.jitter ^= self.jitter << 13;
        self.jitter ^= self.jitter >> 7;
        self.jitter ^= self.jitter << 17;
        let rto = self.rto.total_micros();
        let spread = (rto / 4).max(1);
        let t = rto - rto / 8 + self.jitter % spread;
        self.retransmit_at = Some(now + Duration::from_micros(t));
    }

    fn reject(&mut self, now: Instant, reason: FailReason) {
        let code = match reason {
            FailReason::NoCommonSuite => RejectCode::NoCommonSuite,
            FailReason::TooFewPaths => RejectCode::TooFewPaths,
            FailReason::ExpiryRefused => RejectCode::ExpiryRefused,
            FailReason::KemRequired => RejectCode::KemRequired,
            _ => RejectCode::IdentityMismatch,
        };
        let reject = self.repr(Body::Reject(code));
        self.fail(reason);
        self.send_flight(now, &[(reject, PathId::FIRST)]);
        self.retransmit_at = None;
    }

    fn fail(&mut self, reason: FailReason) {
        if matches!(self.state, State::Failed | State::Done) && self.event.is_some() {
            return;
        }
        self.state = State::Failed;
        self.flight = [None; FLIGHT];
        self.pending = [false; FLIGHT];
        self.retransmit_at = None;
        self.event = Some(Event::Failed(reason));
    }

    fn establish(&mut self, now: Instant) {
        let state = core::mem::replace(&mut self.state, State::Done);
        let (State::SentConfirm { secrets } | State::Replied { secrets }) = state else {
            return self.fail(FailReason::BadMessage);
        };
        let (send, recv) = match self.role {
            Role::Initiator => (secrets.i2r(), secrets.r2i()),
            Role::Responder => (secrets.r2i(), secrets.i2r()),
        };
        let mut keys = SessionKeys {
            role: self.role,
            suite: self.suite,
            send: [0; schedule::MAX_KEY_LEN],
            recv: [0; schedule::MAX_KEY_LEN],
            // key_id is at most 24 bits by construction.
            key_id: SecurityNumber::new(secrets.key_id() & SecurityNumber::MAX)
                .unwrap_or(KEY_ID_ONE),
            session_id: self.ids,
            established_at: now,
            lifetime: Duration::from_secs(u64::from(self.lifetime_secs)),
            two_path: self.two_path,
            kem: self.kem,
            peer_static: self.peer_static,
        };
        keys.send[..send.len()].copy_from_slice(send);
        keys.recv[..recv.len()].copy_from_slice(recv);
        self.flight = [None; FLIGHT];
        self.pending = [false; FLIGHT];
        self.retransmit_at = None;
        self.event = Some(Event::Established(keys));
    }
}

/// The initiator's share message: a KemShare with the key pair's encapsulation key, or a Share.
fn share_body(expiry_secs: u32, share: [u8; 32], kem: Option<&KemKeyPair>) -> Body {
    match kem {
        Some(pair) => Body::KemShare {
            expiry_secs,
            share,
            kem_key: *pair.encapsulation_key(),
        },
        None => Body::Share { expiry_secs, share },
    }
}

/// The key schedule's ids are 24-bit and non-zero; this fallback is never used.
const KEY_ID_ONE: SecurityNumber = match SecurityNumber::new(1) {
    Ok(n) => n,
    Err(_) => panic!("1 fits in 24 bits"),
};

impl fmt::Debug for Handshake {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match self.state {
            State::SentRequest { .. } => "sent_request",
            State::SentShare { .. } => "sent_share",
            State::SentCompact { .. } => "sent_compact",
            State::SentConfirm { .. } => "sent_confirm",
            State::Accepted { .. } => "accepted",
            State::Replied { .. } => "replied",
            State::Done => "done",
            State::Failed => "failed",
        };
        f.debug_struct("Handshake")
            .field("role", &self.role)
            .field("state", &state)
            .field("session_id", &self.ids)
            .field("two_path", &self.two_path)
            .field("kem", &self.kem)
            .finish_non_exhaustive()
    }
}

/// Whether `a` is in `local`'s subnet of `prefix_len` bits (same family required).
fn same_subnet(a: IpAddr, local: IpAddr, prefix_len: u8) -> bool {
    let (a, b, bits): ([u8; 16], [u8; 16], u32) = match (a, local) {
        (IpAddr::V4(a), IpAddr::V4(b)) => {
            let (mut x, mut y) = ([0; 16], [0; 16]);
            x[..4].copy_from_slice(&a.octets());
            y[..4].copy_from_slice(&b.octets());
            (x, y, 32)
        }
        (IpAddr::V6(a), IpAddr::V6(b)) => (a.octets(), b.octets(), 128),
        _ => return false,
    };
    let prefix = u32::from(prefix_len).min(bits);
    let x = u128::from_be_bytes(a);
    let y = u128::from_be_bytes(b);
    let mask = if prefix == 0 {
        0
    } else {
        u128::MAX << (128 - prefix)
    };
    x & mask == y & mask
}

#[cfg(test)]
mod tests {
    use core::net::Ipv4Addr;

    use super::*;
    use crate::handshake::messages::MAX_MESSAGE_LEN;

    struct Counter(u64);

    impl rand_core::RngCore for Counter {
        fn next_u32(&mut self) -> u32 {
            self.next_u64() as u32
        }
        fn next_u64(&mut self) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            self.0
        }
        fn fill_bytes(&mut self, dest: &mut [u8]) {
            for b in dest {
                *b = (self.next_u64() >> 33) as u8;
            }
        }
        fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand_core::Error> {
            self.fill_bytes(dest);
            Ok(())
        }
    }

    impl rand_core::CryptoRng for Counter {}

    /// Copies of a Request (re-sealed by anyone with the group key, so the replay window does
    /// not stop them) get at most one answer per half RTO, however many arrive.
    #[test]
    fn a_responder_answers_repeats_at_most_once_per_half_rto() {
        let a = IpAddr::V4(Ipv4Addr::new(10, 77, 0, 1));
        let b = IpAddr::V4(Ipv4Addr::new(10, 77, 0, 2));
        let (ma, mb) = ([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
        let mut rng = Counter(7);
        let t0 = Instant::from_secs(1);
        let mut init = Handshake::initiate(
            t0,
            Config::new(ma, a, 24),
            Peer {
                mac: mb,
                addr: b,
                pinned_x25519: None,
            },
            Tai64n::from_unix(1, 0),
            &mut rng,
        );
        let mut buf = [0u8; MAX_MESSAGE_LEN];
        let t = init.poll_transmit(t0, &mut buf).unwrap();
        let request = buf[..t.len].to_vec();
        let peer_a = Peer {
            mac: ma,
            addr: a,
            pinned_x25519: None,
        };
        let mut resp = Handshake::respond(
            t0,
            Config::new(mb, b, 24),
            peer_a,
            t.path,
            &request,
            &mut rng,
        )
        .unwrap();
        let mut drain = |h: &mut Handshake, now: Instant| {
            let mut n = 0;
            while h.poll_transmit(now, &mut buf).is_some() {
                n += 1;
            }
            n
        };
        assert_eq!(drain(&mut resp, t0), 1, "the Accept");
        let mut answers = 0;
        for ms in 0..1000u64 {
            let now = t0 + Duration::from_millis(ms);
            for _ in 0..10 {
                let _ = resp.handle_message(now, PathId::FIRST, &request);
                answers += drain(&mut resp, now);
            }
        }
        // 10,000 copies over one second, RTO 250 ms: a repeat every 125 ms at most.
        assert!(answers <= 8, "{answers} answers");
        assert!(
            answers >= 7,
            "a genuine repeat is still answered: {answers}"
        );
    }

    /// A stream transport needs no MAC or address: the Request carries the absent identities
    /// (all-zero MACs, 0.0.0.0), a compact two-path handshake completes between two such hosts,
    /// and stage 1 keeps stream and link hosts apart in both directions.
    #[test]
    fn stream_transport_hosts_need_no_link_identity() {
        use super::super::messages::Message;
        let mut rng = Counter(11);
        let t0 = Instant::from_secs(1);
        let cfg = || {
            let mut c = Config::stream_transport();
            c.smkex = SmkexMode::Required;
            c.paths = 2;
            c.compact = true;
            c
        };
        let mut init = Handshake::initiate(
            t0,
            cfg(),
            Peer::stream_transport(None),
            Tai64n::from_unix(1, 0),
            &mut rng,
        );
        let mut buf = [0u8; MAX_MESSAGE_LEN];
        let mut flight = Vec::new();
        while let Some(t) = init.poll_transmit(t0, &mut buf) {
            flight.push((t.path, buf[..t.len].to_vec()));
        }
        let request = flight[0].1.clone();
        let Body::Request(q) = Repr::parse_bytes(&request).unwrap().body else {
            panic!("a Request first");
        };
        assert_eq!((q.initiator_mac, q.responder_mac), ([0; 6], [0; 6]));
        assert_eq!(
            (q.initiator_addr, q.responder_addr),
            (super::super::NO_ADDR, super::super::NO_ADDR)
        );
        // Bytes: 12 timestamp, flags, paths, then the two MACs and the two addresses.
        let body = Message::new_checked(&request[..]).unwrap().body().to_vec();
        assert_eq!(body[14..26], [0; 12]);
        assert_eq!(body[26], 4);
        assert_eq!(body[27..43], [0; 16]);
        assert_eq!(body[43], 4);
        assert_eq!(body[44..60], [0; 16]);

        // A link host refuses it, and a stream host refuses a link host's Request.
        let link = Config::new(
            [2, 0, 0, 0, 0, 2],
            IpAddr::V4(Ipv4Addr::new(10, 77, 0, 2)),
            24,
        );
        let link_peer = Peer {
            mac: [2, 0, 0, 0, 0, 1],
            addr: IpAddr::V4(Ipv4Addr::new(10, 77, 0, 1)),
            pinned_x25519: None,
        };
        assert_eq!(
            Handshake::respond(
                t0,
                link,
                Peer::stream_transport(None),
                PathId::FIRST,
                &request,
                &mut rng
            )
            .unwrap_err(),
            FailReason::NotForUs
        );
        let mut link_init = Handshake::initiate(
            t0,
            Config::new(link_peer.mac, link_peer.addr, 24),
            Peer {
                mac: [2, 0, 0, 0, 0, 2],
                addr: IpAddr::V4(Ipv4Addr::new(10, 77, 0, 2)),
                pinned_x25519: None,
            },
            Tai64n::from_unix(1, 0),
            &mut rng,
        );
        let t = link_init.poll_transmit(t0, &mut buf).unwrap();
        assert_eq!(
            Handshake::respond(
                t0,
                cfg(),
                Peer::stream_transport(None),
                t.path,
                &buf[..t.len],
                &mut rng
            )
            .unwrap_err(),
            FailReason::NotForUs
        );

        // Two stream hosts complete the handshake.
        let mut resp = Handshake::respond(
            t0,
            cfg(),
            Peer::stream_transport(None),
            PathId::FIRST,
            &request,
            &mut rng,
        )
        .unwrap();
        for (path, m) in &flight[1..] {
            resp.handle_message(t0, *path, m).unwrap();
        }
        while let Some(t) = resp.poll_transmit(t0, &mut buf) {
            let _ = init.handle_message(t0, t.path, &buf[..t.len]);
        }
        let (Some(Event::Established(a)), Some(Event::Established(b))) =
            (init.poll_event(), resp.poll_event())
        else {
            panic!("both sides established");
        };
        let (mut x, mut y) = ([0u8; 32], [0u8; 32]);
        a.export(b"check", &mut x).unwrap();
        b.export(b"check", &mut y).unwrap();
        assert_eq!(x, y);
        assert!(a.two_path() && b.two_path());
    }

    #[test]
    fn subnet_check() {
        let a = |x| IpAddr::V4(Ipv4Addr::new(10, 77, 0, x));
        assert!(same_subnet(a(1), a(2), 24));
        assert!(!same_subnet(
            IpAddr::V4(Ipv4Addr::new(10, 78, 0, 1)),
            a(2),
            24
        ));
        assert!(same_subnet(
            IpAddr::V4(Ipv4Addr::new(10, 78, 0, 1)),
            a(2),
            8
        ));
        assert!(!same_subnet(
            IpAddr::V6(core::net::Ipv6Addr::LOCALHOST),
            a(2),
            0
        ));
        assert!(same_subnet(a(200), a(2), 0));
    }

    /// Stage 1 refuses a Request when any one of its four checks fails, each alone (found by
    /// cargo-mutants: `||` turned into `&&` went unnoticed while every test changed all four).
    #[test]
    fn stage_one_refuses_each_mismatch_alone() {
        let v4 = |n: u8, c: u8| IpAddr::V4(Ipv4Addr::new(10, 77, c, n));
        let (ma, mb) = ([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
        let mut rng = Counter(3);
        let t0 = Instant::from_secs(1);
        let request = |from: IpAddr, rng: &mut Counter| {
            let mut init = Handshake::initiate(
                t0,
                Config::new(ma, from, 24),
                Peer {
                    mac: mb,
                    addr: v4(2, 0),
                    pinned_x25519: None,
                },
                Tai64n::from_unix(1, 0),
                rng,
            );
            let mut buf = [0u8; MAX_MESSAGE_LEN];
            let t = init.poll_transmit(t0, &mut buf).unwrap();
            buf[..t.len].to_vec()
        };
        let good = request(v4(1, 0), &mut rng);
        let outside = request(v4(1, 9), &mut rng);
        let from = |mac| Peer {
            mac,
            addr: v4(1, 0),
            pinned_x25519: None,
        };
        let answer = |cfg: Config, peer: Peer, req: &[u8], rng: &mut Counter| {
            Handshake::respond(t0, cfg, peer, PathId::FIRST, req, rng).map(|_| ())
        };
        let b = Config::new(mb, v4(2, 0), 24);
        assert_eq!(answer(b.clone(), from(ma), &good, &mut rng), Ok(()));
        let cases = [
            (
                "another responder MAC",
                Config::new([2, 0, 0, 0, 0, 3], v4(2, 0), 24),
                from(ma),
                &good,
            ),
            (
                "another initiator MAC",
                b.clone(),
                from([2, 0, 0, 0, 0, 3]),
                &good,
            ),
            (
                "another responder address",
                Config::new(mb, v4(3, 0), 24),
                from(ma),
                &good,
            ),
            ("an initiator outside the prefix", b, from(ma), &outside),
        ];
        for (what, cfg, peer, req) in cases {
            assert_eq!(
                answer(cfg, peer, req, &mut rng),
                Err(FailReason::NotForUs),
                "{what}"
            );
        }
    }

    /// `smkex = Required` with one path fails at once and sends nothing; with two or more it
    /// sends its Request.
    #[test]
    fn required_with_one_path_fails_before_sending() {
        let a = IpAddr::V4(Ipv4Addr::new(10, 77, 0, 1));
        let peer = Peer {
            mac: [2, 0, 0, 0, 0, 2],
            addr: IpAddr::V4(Ipv4Addr::new(10, 77, 0, 2)),
            pinned_x25519: None,
        };
        let mut rng = Counter(5);
        let t0 = Instant::from_secs(1);
        let mut buf = [0u8; MAX_MESSAGE_LEN];
        for paths in [1u8, 2, 3] {
            let mut cfg = Config::new([2, 0, 0, 0, 0, 1], a, 24);
            cfg.smkex = SmkexMode::Required;
            cfg.paths = paths;
            let mut hs = Handshake::initiate(t0, cfg, peer, Tai64n::from_unix(1, 0), &mut rng);
            if paths < 2 {
                assert!(hs.poll_transmit(t0, &mut buf).is_none());
                assert!(matches!(
                    hs.poll_event(),
                    Some(Event::Failed(FailReason::TooFewPaths))
                ));
            } else {
                assert!(hs.poll_transmit(t0, &mut buf).is_some(), "{paths} paths");
                assert!(hs.poll_event().is_none(), "{paths} paths");
            }
        }
    }

    /// Each reason for ignoring a message has its own counter name.
    #[test]
    fn ignored_reasons_name_distinct_counters() {
        let all = [
            Ignored::Malformed(crate::handshake::messages::Error::Truncated),
            Ignored::WrongIds,
            Ignored::WrongPath,
            Ignored::Unexpected,
            Ignored::Duplicate,
            Ignored::Closed,
        ];
        let names: Vec<&str> = all.iter().map(|i| i.as_str()).collect();
        assert_eq!(
            names,
            [
                "malformed",
                "wrong_ids",
                "wrong_path",
                "unexpected",
                "duplicate",
                "closed"
            ]
        );
    }

    /// The hybrid (ML-KEM-768) handshake's tests: two hosts whose messages pass through `edit`
    /// (an attacker on the path, or nobody), one clock step per quiet round.
    mod kem {
        use super::*;
        use crate::handshake::KemMode::{self, Off, Preferred, Required};
        use crate::handshake::messages::{KemCiphertext, MAX_MESSAGE_LEN};
        use crate::handshake::schedule::{Transcript, smkex_hash};

        const MA: [u8; 6] = [2, 0, 0, 0, 0, 1];
        const MB: [u8; 6] = [2, 0, 0, 0, 0, 2];

        fn ip(n: u8) -> IpAddr {
            IpAddr::V4(Ipv4Addr::new(10, 77, 0, n))
        }

        fn cfg(mac: [u8; 6], n: u8, kem: KemMode, paths: u8) -> Config {
            let mut c = Config::new(mac, ip(n), 24);
            c.kem = kem;
            c.paths = paths;
            c
        }

        /// What an exchange ended with: each side's event, and every message as it arrived.
        struct Outcome {
            init: Option<Event>,
            resp: Option<Event>,
            seen: Vec<(Role, PathId, Repr)>,
        }

        impl Outcome {
            fn keys(&self) -> (&SessionKeys, &SessionKeys) {
                match (&self.init, &self.resp) {
                    (Some(Event::Established(a)), Some(Event::Established(b))) => (a, b),
                    other => panic!("not established on both sides: {other:?}"),
                }
            }

            fn failures(&self) -> (Option<FailReason>, Option<FailReason>) {
                let f = |e: &Option<Event>| match e {
                    Some(Event::Failed(r)) => Some(*r),
                    _ => None,
                };
                (f(&self.init), f(&self.resp))
            }
        }

        /// Runs one handshake from `cfg_i` to `cfg_r`; `edit(sender, path, message)` may change
        /// each message in flight (returning `false` drops it).
        fn exchange(
            cfg_i: Config,
            cfg_r: Config,
            mut edit: impl FnMut(Role, PathId, &mut Repr) -> bool,
        ) -> Outcome {
            let mut rng = Counter(42);
            let t0 = Instant::from_secs(1);
            let mut now = t0;
            let mut init = Handshake::initiate(
                t0,
                cfg_i,
                Peer::new(MB, ip(2)),
                Tai64n::from_unix(1, 0),
                &mut rng,
            );
            let mut resp: Option<Handshake> = None;
            let mut out = Outcome {
                init: None,
                resp: None,
                seen: Vec::new(),
            };
            let mut buf = [0u8; MAX_MESSAGE_LEN];
            let mut wire = [0u8; MAX_MESSAGE_LEN];
            while now < t0 + Duration::from_secs(20) {
                let mut moved = false;
                while let Some(t) = init.poll_transmit(now, &mut buf) {
                    moved = true;
                    let mut repr = Repr::parse_bytes(&buf[..t.len]).unwrap();
                    if !edit(Role::Initiator, t.path, &mut repr) {
                        continue;
                    }
                    let n = repr.emit(&mut wire);
                    out.seen.push((Role::Initiator, t.path, repr));
                    match &mut resp {
                        None => {
                            let peer = Peer::new(MA, ip(1));
                            let r = Handshake::respond(
                                now,
                                cfg_r.clone(),
                                peer,
                                t.path,
                                &wire[..n],
                                &mut rng,
                            );
                            resp = r.ok();
                        }
                        Some(r) => {
                            let _ = r.handle_message(now, t.path, &wire[..n]);
                        }
                    }
                }
                if let Some(r) = &mut resp {
                    while let Some(t) = r.poll_transmit(now, &mut buf) {
                        moved = true;
                        let mut repr = Repr::parse_bytes(&buf[..t.len]).unwrap();
                        if !edit(Role::Responder, t.path, &mut repr) {
                            continue;
                        }
                        let n = repr.emit(&mut wire);
                        out.seen.push((Role::Responder, t.path, repr));
                        let _ = init.handle_message(now, t.path, &wire[..n]);
                    }
                    if out.resp.is_none() {
                        out.resp = r.poll_event();
                    }
                }
                if out.init.is_none() {
                    out.init = init.poll_event();
                }
                if out.init.is_some() && (out.resp.is_some() || resp.is_none()) {
                    break;
                }
                if !moved {
                    now += Duration::from_millis(500);
                    init.handle_timeout(now);
                    if let Some(r) = &mut resp {
                        r.handle_timeout(now);
                    }
                }
            }
            out
        }

        fn honest(_: Role, _: PathId, _: &mut Repr) -> bool {
            true
        }

        /// Both sides' modes, 3 × 3, over two paths and over one: the KEM is used when one side
        /// offers it and the other allows it; `require` against `off` fails with
        /// `KemRequired` on both sides (a Reject 0x05), never silently without the KEM.
        #[test]
        fn negotiation_matrix() {
            let modes = [Off, Preferred, Required];
            for paths in [1u8, 2] {
                for mi in modes {
                    for mr in modes {
                        let o = exchange(cfg(MA, 1, mi, paths), cfg(MB, 2, mr, paths), honest);
                        let what = format!("initiator {mi:?}, responder {mr:?}, {paths} paths");
                        if (mi == Required && mr == Off) || (mi == Off && mr == Required) {
                            assert_eq!(
                                o.failures(),
                                (Some(FailReason::KemRequired), Some(FailReason::KemRequired)),
                                "{what}"
                            );
                            let rejected = o
                                .seen
                                .iter()
                                .any(|(_, _, r)| r.body == Body::Reject(RejectCode::KemRequired));
                            assert!(rejected, "{what}: a Reject 0x05");
                            continue;
                        }
                        let (a, b) = o.keys();
                        let used = mi != Off && mr != Off;
                        assert_eq!((a.kem(), b.kem()), (used, used), "{what}");
                        assert_eq!(a.two_path(), paths == 2, "{what}");
                        let (mut x, mut y) = ([0u8; 32], [0u8; 32]);
                        a.export(b"kem", &mut x).unwrap();
                        b.export(b"kem", &mut y).unwrap();
                        assert_eq!(x, y, "{what}: the same keys");
                        // The KEM messages go exactly when it is in use (prefer × off: the
                        // initiator makes no key pair and sends a plain Share).
                        let kem_msgs = o
                            .seen
                            .iter()
                            .filter(|(_, p, r)| {
                                *p == PathId::FIRST
                                    && matches!(
                                        r.body,
                                        Body::KemShare { .. } | Body::KemShareReply { .. }
                                    )
                            })
                            .count();
                        assert_eq!(kem_msgs, if used { 2 } else { 0 }, "{what}");
                    }
                }
            }
        }

        /// With `kem = off` on both sides nothing of the KEM is on the wire: the Request's
        /// flags are those of before (the existing vectors stay byte-identical).
        #[test]
        fn off_sends_nothing_new() {
            let o = exchange(cfg(MA, 1, Off, 2), cfg(MB, 2, Preferred, 2), honest);
            let Body::Request(q) = o.seen[0].2.body else {
                panic!("a Request first")
            };
            assert!(!q.flags.kem && !q.flags.kem_required);
            let Body::Accept(a) = o.seen[1].2.body else {
                panic!("then an Accept")
            };
            assert!(!a.kem);
        }

        /// An attacker active on path 1 strips the offer from the Request of two hosts that
        /// both prefer the KEM. It cannot downgrade them silently: the Request is in the
        /// transcript, so over two paths the initiator's SMKEX hash fails; over one path, where
        /// it can also rewrite the (unkeyed) hash to match the initiator's view, the keys differ
        /// and the responder's key confirmation fails. No side ends with a session.
        #[test]
        fn stripping_the_offer_fails_the_handshake() {
            let o = exchange(
                cfg(MA, 1, Preferred, 2),
                cfg(MB, 2, Preferred, 2),
                strip_offer,
            );
            assert_eq!(o.failures().0, Some(FailReason::SmkexMismatch));
            assert!(!matches!(o.resp, Some(Event::Established(_))));

            // One path: the attacker also fixes H (it sees everything and H needs no key).
            let mut view: [Option<Repr>; 6] = [None; 6];
            let o = exchange(
                cfg(MA, 1, Preferred, 1),
                cfg(MB, 2, Preferred, 1),
                |from, path, m| {
                    let slot = match m.body {
                        Body::Request(_) => 0,
                        Body::Accept(_) => 1,
                        Body::Share { .. } | Body::KemShare { .. } => 2,
                        Body::Nonce(_) => 3,
                        Body::ShareReply { .. } | Body::KemShareReply { .. } => 4,
                        Body::NonceReply { .. } => 5,
                        _ => return true,
                    };
                    if slot == 0 {
                        view[0] = Some(*m); // the initiator's view keeps its offer
                        return strip_offer(from, path, m);
                    }
                    if let Body::NonceReply { nonce, .. } = m.body {
                        let zeroed = |hash| Repr {
                            body: Body::NonceReply { nonce, hash },
                            ..*m
                        };
                        view[5] = Some(zeroed([0; 32]));
                        let parts = view.map(|r| (r.unwrap(), PathId::FIRST));
                        *m = zeroed(smkex_hash(&Transcript { parts }.hash()));
                        return true;
                    }
                    view[slot] = Some(*m);
                    true
                },
            );
            // The responder refuses the Confirm; the initiator, without a ConfirmAck, times out.
            assert_eq!(
                o.failures(),
                (Some(FailReason::Timeout), Some(FailReason::ConfirmMismatch))
            );
        }

        fn strip_offer(_: Role, _: PathId, m: &mut Repr) -> bool {
            if let Body::Request(q) = &mut m.body {
                q.flags.kem = false;
                q.flags.kem_required = false;
            }
            true
        }

        /// Stripping the KEM later fails too: a ShareReply without the ciphertext (or an
        /// Accept without the flag, so the initiator sends a plain Share) is not what the other
        /// side waits for; it is ignored and the handshake times out, with no session.
        #[test]
        fn stripping_the_ciphertext_or_the_answer_gets_no_session() {
            let strip_ct = |_: Role, _: PathId, m: &mut Repr| {
                if let Body::KemShareReply {
                    expiry_secs, share, ..
                } = m.body
                {
                    m.body = Body::ShareReply { expiry_secs, share };
                }
                true
            };
            let o = exchange(cfg(MA, 1, Preferred, 2), cfg(MB, 2, Preferred, 2), strip_ct);
            assert_eq!(
                o.failures(),
                (Some(FailReason::Timeout), Some(FailReason::Timeout))
            );

            let strip_answer = |_: Role, _: PathId, m: &mut Repr| {
                if let Body::Accept(a) = &mut m.body {
                    a.kem = false;
                }
                true
            };
            let o = exchange(
                cfg(MA, 1, Preferred, 2),
                cfg(MB, 2, Preferred, 2),
                strip_answer,
            );
            assert_eq!(
                o.failures(),
                (Some(FailReason::Timeout), Some(FailReason::Timeout))
            );
            // Against `require`, the stripped answer is refused at once.
            let o = exchange(
                cfg(MA, 1, Required, 2),
                cfg(MB, 2, Preferred, 2),
                strip_answer,
            );
            assert_eq!(o.failures().0, Some(FailReason::KemRequired));
        }

        /// A ciphertext changed on path 1: over two paths the SMKEX hash catches it; over one
        /// path, with the hash rewritten to the initiator's view, the initiator's decapsulation
        /// gives another secret (implicit rejection), so the confirmation fails.
        #[test]
        fn a_tampered_ciphertext_fails() {
            let flip = |_: Role, _: PathId, m: &mut Repr| {
                if let Body::KemShareReply { ciphertext, .. } = &mut m.body {
                    ciphertext.0[7] ^= 0x40;
                }
                true
            };
            let o = exchange(cfg(MA, 1, Preferred, 2), cfg(MB, 2, Preferred, 2), flip);
            assert_eq!(o.failures().0, Some(FailReason::SmkexMismatch));

            // One path: the attacker fixes H over the transcript the initiator sees.
            let mut view: [Option<Repr>; 6] = [None; 6];
            let o = exchange(
                cfg(MA, 1, Preferred, 1),
                cfg(MB, 2, Preferred, 1),
                |from, path, m| {
                    let slot = match m.body {
                        Body::Request(_) => 0,
                        Body::Accept(_) => 1,
                        Body::KemShare { .. } => 2,
                        Body::Nonce(_) => 3,
                        Body::KemShareReply { .. } => 4,
                        Body::NonceReply { .. } => 5,
                        _ => return true,
                    };
                    flip(from, path, m);
                    if let Body::NonceReply { nonce, .. } = m.body {
                        let zeroed = |hash| Repr {
                            body: Body::NonceReply { nonce, hash },
                            ..*m
                        };
                        view[5] = Some(zeroed([0; 32]));
                        let parts = view.map(|r| (r.unwrap(), PathId::FIRST));
                        *m = zeroed(smkex_hash(&Transcript { parts }.hash()));
                        return true;
                    }
                    view[slot] = Some(*m);
                    true
                },
            );
            // The responder refuses the Confirm; the initiator, without a ConfirmAck, times out.
            assert_eq!(
                o.failures(),
                (Some(FailReason::Timeout), Some(FailReason::ConfirmMismatch))
            );
        }

        /// The compact flow: the initiator's KemShare leaves with the Request, before it knows
        /// the answer. A responder that takes the KEM answers with a KemShareReply; one that
        /// does not (`off`) still takes the KemShare (hashed, its key unused) and answers with
        /// a ShareReply; a compact initiator that requires the KEM refuses that answer.
        #[test]
        fn the_compact_flow_sends_the_key_with_the_request() {
            let compact = |mac, n, kem| {
                let mut c = cfg(mac, n, kem, 2);
                c.smkex = SmkexMode::Required;
                c.compact = true;
                c
            };
            let o = exchange(compact(MA, 1, Preferred), compact(MB, 2, Preferred), honest);
            let (a, b) = o.keys();
            assert!(a.kem() && b.kem());
            let first_flight: Vec<MessageType> = o.seen[..3]
                .iter()
                .map(|(_, _, r)| r.body.message_type())
                .collect();
            assert_eq!(
                first_flight,
                [
                    MessageType::Request,
                    MessageType::KemShare,
                    MessageType::Nonce
                ]
            );

            let o = exchange(compact(MA, 1, Preferred), compact(MB, 2, Off), honest);
            let (a, b) = o.keys();
            assert!(!a.kem() && !b.kem());
            assert!(
                o.seen
                    .iter()
                    .any(|(_, _, r)| matches!(r.body, Body::KemShare { .. }))
            );
            assert!(
                o.seen
                    .iter()
                    .any(|(_, _, r)| matches!(r.body, Body::ShareReply { .. }))
            );

            let o = exchange(compact(MA, 1, Required), compact(MB, 2, Off), honest);
            assert_eq!(o.failures().0, Some(FailReason::KemRequired));
        }

        /// The initiator refuses an Accept that takes a KEM it did not offer (`BadMessage`),
        /// and a ShareReply of the wrong kind is ignored, not taken.
        #[test]
        fn an_accept_with_an_unoffered_kem_is_refused() {
            let add = |_: Role, _: PathId, m: &mut Repr| {
                if let Body::Accept(a) = &mut m.body {
                    a.kem = true;
                }
                true
            };
            let o = exchange(cfg(MA, 1, Off, 2), cfg(MB, 2, Preferred, 2), add);
            assert_eq!(o.failures().0, Some(FailReason::BadMessage));
        }

        /// The KEM changes the keys: the same draws with and without it give other keys, and
        /// the KEM's messages have the documented sizes.
        #[test]
        fn the_kem_secret_is_in_the_keys_and_the_sizes_are_as_documented() {
            let with = exchange(cfg(MA, 1, Preferred, 2), cfg(MB, 2, Preferred, 2), honest);
            let without = exchange(cfg(MA, 1, Off, 2), cfg(MB, 2, Off, 2), honest);
            let (a, _) = with.keys();
            let (c, _) = without.keys();
            let (mut x, mut y) = ([0u8; 32], [0u8; 32]);
            a.export(b"k", &mut x).unwrap();
            c.export(b"k", &mut y).unwrap();
            assert_ne!(x, y);
            for (_, _, r) in &with.seen {
                match r.body {
                    Body::KemShare { .. } => assert_eq!(r.buffer_len(), 1238),
                    Body::KemShareReply { .. } => assert_eq!(r.buffer_len(), 1142),
                    Body::Request(_) => assert_eq!(r.buffer_len(), 81),
                    _ => {}
                }
            }
            let _ = KemCiphertext([0; 1088]);
        }
    }
}
