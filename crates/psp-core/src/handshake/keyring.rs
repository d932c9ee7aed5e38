//! [`KeyRing`]: the data path's keys for one peer across rekeys (previous / current / next).
//!
//! Modelled on WireGuard's keypairs (previous, current, next): the *initiator* of a handshake
//! seals under the new keys at once, keeping the old current as *previous* so frames in flight
//! under it still open for a grace period; the *responder* installs the new keys as *next*
//! (open only) and switches to sealing under them only when the first frame under them arrives
//! (proof that the initiator installed them: a Confirm alone is not). Every data frame
//! carries its session's 24-bit key id in the PSP security-number field, so the receiver picks
//! the key without trial decryption (an AEAD open that fails zeroes the section).
//!
//! Nothing is ever sealed or opened under an expired session. [`KeyRing::rekey_due`] asks for a
//! rekey once the sequence number reaches [`KeyRingConfig::rekey_seq`] or expiry is near; the
//! [`Sealer`] itself never wraps.

use core::fmt;

use super::{Role, SessionId, SessionKeys};
use crate::protect::{OpenError, Opened, Opener, OpenerConfig, SealError, Sealer, SealerConfig};
use crate::time::{Duration, Instant};
use crate::wire::{Frame, Protocol, SecurityNumber};

/// Key-ring settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyRingConfig {
    /// How long the previous session still opens frames after a switch (default 30 s; capped by
    /// its expiry).
    pub grace: Duration,
    /// Ask for a rekey once the next sequence number reaches this (default 2^31).
    pub rekey_seq: u32,
    /// Ask for a rekey this long before expiry (default 60 s; the responder of the current
    /// session waits half as long, so normally only one side starts the rekey).
    pub rekey_margin: Duration,
    /// Base sealer options (the security number is set to the key id).
    pub sealer: SealerConfig,
    /// Base opener options (the security number is set to the key id).
    pub opener: OpenerConfig,
}

impl Default for KeyRingConfig {
    fn default() -> Self {
        Self {
            grace: Duration::from_secs(30),
            rekey_seq: 1 << 31,
            rekey_margin: Duration::from_secs(60),
            sealer: SealerConfig::new(),
            opener: OpenerConfig::new(),
        }
    }
}

/// Why [`KeyRing::seal`] refused.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RingSealError {
    /// No session can seal (none yet, or expired: run a handshake; or, on the responder, the
    /// new keys wait for the initiator's first frame: see [`KeyRing::seal`]).
    NoSession,
    /// The sealer refused.
    Seal(SealError),
}

/// Why [`KeyRing::open`] refused.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RingOpenError {
    /// The frame carries no key id, or one of no live session.
    UnknownKey,
    /// The session's opener refused.
    Open(OpenError),
}

/// Why [`KeyRing::install`] refused.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InstallError {
    /// The new key id equals a live session's (probability 2^-24): run another handshake.
    KeyIdClash,
    /// The keys could not be expanded or the configuration refused them.
    Refused,
}

impl RingSealError {
    /// The counter name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NoSession => "no_session",
            Self::Seal(_) => "seal_error",
        }
    }
}

impl RingOpenError {
    /// The counter name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::UnknownKey => "unknown_key",
            Self::Open(_) => "open_error",
        }
    }
}

impl fmt::Display for RingSealError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for RingOpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for InstallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::KeyIdClash => "key id clash",
            Self::Refused => "keys refused",
        })
    }
}

impl core::error::Error for RingSealError {}
impl core::error::Error for RingOpenError {}
impl core::error::Error for InstallError {}

/// One session's sealer and opener.
#[derive(Debug)]
pub struct Slot {
    sealer: Sealer,
    opener: Opener,
    key_id: SecurityNumber,
    session_id: SessionId,
    role: Role,
    established_at: Instant,
    expires_at: Instant,
    /// When a previous session stops opening.
    retire_at: Option<Instant>,
    suite: crate::crypto::SuiteId,
    two_path: bool,
    peer_static: Option<[u8; 32]>,
    /// Public fingerprints ([`SuiteKey::bivn`](crate::crypto::SuiteKey::bivn)) of the send and
    /// receive keys.
    fingerprints: ([u8; 20], [u8; 20]),
}

impl Slot {
    /// The session id.
    pub fn session_id(&self) -> SessionId {
        self.session_id
    }

    /// The key id in the frames.
    pub fn key_id(&self) -> SecurityNumber {
        self.key_id
    }

    /// The next sequence number this session seals with.
    pub fn next_seq(&self) -> Option<crate::wire::Seq> {
        self.sealer.next_seq()
    }

    /// When the session expires.
    pub fn expires_at(&self) -> Instant {
        self.expires_at
    }

    /// This host's role in the handshake that made the session.
    pub fn role(&self) -> Role {
        self.role
    }

    /// The session's suite.
    pub fn suite(&self) -> crate::crypto::SuiteId {
        self.suite
    }

    /// Whether SMKEX ran over two paths.
    pub fn two_path(&self) -> bool {
        self.two_path
    }

    /// The peer's long-term public key the handshake took, if any.
    pub fn peer_static(&self) -> Option<[u8; 32]> {
        self.peer_static
    }

    /// Public fingerprints of the send and receive keys (their BIVN, which reveals nothing of
    /// the keys): two hosts hold the two ends of one session when one's send fingerprint is the
    /// other's receive fingerprint.
    pub fn fingerprints(&self) -> ([u8; 20], [u8; 20]) {
        self.fingerprints
    }

    fn live(&self, now: Instant) -> bool {
        now < self.expires_at && self.retire_at.is_none_or(|t| now < t)
    }
}

/// The keys of the data path toward one peer. Sans-I/O: `now` is an argument everywhere.
#[derive(Debug)]
pub struct KeyRing {
    cfg: KeyRingConfig,
    previous: Option<Slot>,
    current: Option<Slot>,
    next: Option<Slot>,
}

impl KeyRing {
    /// An empty ring.
    pub fn new(cfg: KeyRingConfig) -> Self {
        Self {
            cfg,
            previous: None,
            current: None,
            next: None,
        }
    }

    /// Installs an established session: as initiator it becomes current at once (the old
    /// current becomes previous for the grace period); as responder it becomes next.
    ///
    /// # Errors
    /// [`InstallError::KeyIdClash`] if a live session has the same key id;
    /// [`InstallError::Refused`] if the sealer or opener refuses the keys.
    pub fn install(&mut self, now: Instant, keys: &SessionKeys) -> Result<(), InstallError> {
        self.expire(now);
        let id = keys.key_id();
        if self.slots().any(|s| s.key_id == id) {
            return Err(InstallError::KeyIdClash);
        }
        let none = keys.suite() == crate::crypto::SuiteId::None;
        let send = keys.send_key().map_err(|_| InstallError::Refused)?;
        let recv = keys.recv_key().map_err(|_| InstallError::Refused)?;
        let fingerprints = (*send.bivn(), *recv.bivn());
        let sealer = Sealer::new(
            send,
            keys.initial_seq(),
            self.cfg
                .sealer
                .with_security_number(Some(id))
                .with_allow_none(none),
        )
        .map_err(|_| InstallError::Refused)?;
        let opener = Opener::new(
            recv,
            self.cfg
                .opener
                .with_security_number(Some(id))
                .with_allow_none(none),
        )
        .map_err(|_| InstallError::Refused)?;
        let slot = Slot {
            sealer,
            opener,
            key_id: id,
            session_id: keys.session_id(),
            role: keys.role(),
            established_at: keys.established_at(),
            expires_at: keys.expires_at(),
            retire_at: None,
            suite: keys.suite(),
            two_path: keys.two_path(),
            peer_static: keys.peer_static(),
            fingerprints,
        };
        match keys.role() {
            Role::Initiator => {
                // A waiting *next* is older than this session: it becomes *previous* (the peer
                // may still seal under it) and can no longer be promoted over the new one
                // (WireGuard's keypair rotation).
                if let Some(next) = self.next.take() {
                    self.promote(now, next);
                }
                self.promote(now, slot);
            }
            Role::Responder if crate::plant::on(crate::plant::Bug::OneWayInstall) => {
                self.promote(now, slot);
            }
            Role::Responder => self.next = Some(slot),
        }
        Ok(())
    }

    /// Seals an Ethernet II frame under the current session (see [`Sealer::seal`]).
    ///
    /// **The responder's first-send rule.** On the responder of a handshake, keys installed
    /// with [`install`](Self::install) only *open* until the first frame under them has opened
    /// here (the initiator's keepalive, which `host::Host` sends at once, or its first data
    /// frame): that frame proves the initiator holds them. Until then this returns
    /// [`RingSealError::NoSession`] on a fresh ring, or seals under the previous session during
    /// a rekey. An initiator's ring seals at once. A caller driving two rings by hand therefore
    /// sends from the initiator first.
    ///
    /// # Errors
    /// [`RingSealError::NoSession`] if no live session can seal (none yet, expired, or the
    /// responder's new keys before their first frame opened); [`RingSealError::Seal`].
    pub fn seal<'b>(
        &mut self,
        now: Instant,
        eth_frame: &[u8],
        out: &'b mut [u8],
    ) -> Result<&'b [u8], RingSealError> {
        self.sealer(now)?
            .seal(now, eth_frame, out)
            .map_err(RingSealError::Seal)
    }

    /// Seals a sub-protocol message under the current session (see [`Sealer::seal_sub`]).
    ///
    /// # Errors
    /// As [`seal`](Self::seal).
    pub fn seal_sub<'b>(
        &mut self,
        now: Instant,
        dst: [u8; 6],
        src: [u8; 6],
        proto: Protocol,
        payload: &[u8],
        out: &'b mut [u8],
    ) -> Result<&'b [u8], RingSealError> {
        self.sealer(now)?
            .seal_sub(now, dst, src, proto, payload, out)
            .map_err(RingSealError::Seal)
    }

    /// Opens a frame under the session its key id names; a frame opened under *next* makes it
    /// current (the peer has the keys).
    ///
    /// # Errors
    /// [`RingOpenError::UnknownKey`] if no live session has the frame's key id;
    /// [`RingOpenError::Open`] as [`Opener::open`].
    pub fn open<'b>(
        &mut self,
        now: Instant,
        frame: &'b mut [u8],
    ) -> Result<Opened<'b>, RingOpenError> {
        self.expire(now);
        let id = Frame::new_checked(&*frame, 0)
            .ok()
            .and_then(|f| f.security_number())
            .ok_or(RingOpenError::UnknownKey)?;
        let has = |s: &Option<Slot>| s.as_ref().is_some_and(|s| s.key_id == id && s.live(now));
        if has(&self.current) {
            let s = self.current.as_mut().ok_or(RingOpenError::UnknownKey)?;
            return s.opener.open(now, frame).map_err(RingOpenError::Open);
        }
        if has(&self.previous) {
            let s = self.previous.as_mut().ok_or(RingOpenError::UnknownKey)?;
            return s.opener.open(now, frame).map_err(RingOpenError::Open);
        }
        if has(&self.next) {
            let s = self.next.as_mut().ok_or(RingOpenError::UnknownKey)?;
            let opened = s.opener.open(now, frame).map_err(RingOpenError::Open)?;
            if let Some(next) = self.next.take() {
                self.promote(now, next);
            }
            return Ok(opened);
        }
        Err(RingOpenError::UnknownKey)
    }

    /// Whether a new handshake should start now: no live session, the sequence number reached
    /// [`KeyRingConfig::rekey_seq`], or expiry is near (the margin for the initiator of the
    /// current session, half of it for its responder). `false` while a next session waits.
    pub fn rekey_due(&self, now: Instant) -> bool {
        if self.next.as_ref().is_some_and(|s| s.live(now)) {
            return false;
        }
        let Some(cur) = self.current.as_ref().filter(|s| s.live(now)) else {
            return true;
        };
        cur.sealer
            .next_seq()
            .is_none_or(|s| s.0 >= self.cfg.rekey_seq)
            || now >= self.rekey_at(cur)
    }

    /// Drops sessions whose grace period or lifetime is over.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.expire(now);
    }

    /// The next instant something changes by time alone (a retirement, an expiry, the rekey
    /// time).
    pub fn poll_timeout(&self) -> Option<Instant> {
        let mut t: Option<Instant> = None;
        let mut at = |x: Instant| t = Some(t.map_or(x, |t| t.min(x)));
        for s in self.slots() {
            at(s.expires_at);
            if let Some(r) = s.retire_at {
                at(r);
            }
        }
        if let Some(cur) = &self.current {
            at(self.rekey_at(cur));
        }
        t
    }

    /// The next retirement or expiry (what [`handle_timeout`](Self::handle_timeout) acts on),
    /// without the rekey time.
    pub fn expiry_timeout(&self) -> Option<Instant> {
        self.slots()
            .flat_map(|s| [Some(s.expires_at), s.retire_at])
            .flatten()
            .min()
    }

    /// When the current session should be replaced (by time: expiry is near), if there is one.
    pub fn rekey_time(&self) -> Option<Instant> {
        self.current.as_ref().map(|c| self.rekey_at(c))
    }

    /// Whether a frame of the peer has opened under the current session: it has the keys and
    /// uses them. A new rekey waits for this (unless the old keys wear out), so the peer is never
    /// two sessions behind, with frames under keys this ring no longer holds.
    pub fn current_heard(&self) -> bool {
        self.current
            .as_ref()
            .is_some_and(|s| s.opener.replay_window().highest().is_some())
    }

    /// The session that seals now, if any.
    pub fn current(&self) -> Option<&Slot> {
        self.current.as_ref()
    }

    /// The previous session, while it still opens.
    pub fn previous(&self) -> Option<&Slot> {
        self.previous.as_ref()
    }

    /// The installed session waiting for the peer's first frame (responder side).
    pub fn next(&self) -> Option<&Slot> {
        self.next.as_ref()
    }

    fn rekey_at(&self, s: &Slot) -> Instant {
        let margin = match s.role {
            Role::Initiator => self.cfg.rekey_margin,
            Role::Responder => Duration::from_micros(self.cfg.rekey_margin.total_micros() / 2),
        };
        let life = s.expires_at.saturating_since(s.established_at);
        s.established_at
            + Duration::from_micros(life.total_micros().saturating_sub(margin.total_micros()))
    }

    /// The current session stops sealing (its peer fell silent): it becomes *previous* and
    /// still opens during its grace period; a waiting *next* stays.
    pub fn retire_current(&mut self, now: Instant) {
        if let Some(mut cur) = self.current.take() {
            cur.retire_at = Some((now + self.cfg.grace).min(cur.expires_at));
            self.previous = Some(cur);
        }
    }

    /// Drops every session (the peer lost its keys: nothing under them will come again, and
    /// nothing may be sealed under them).
    pub fn clear(&mut self) {
        self.previous = None;
        self.current = None;
        self.next = None;
    }

    /// The sealer of the current session (promoting a waiting *next* session if the current one
    /// is gone), for batch sealing with [`Sealer::seal_batch`].
    ///
    /// # Errors
    /// [`RingSealError::NoSession`] if no live session can seal.
    pub fn sealer(&mut self, now: Instant) -> Result<&mut Sealer, RingSealError> {
        self.expire(now);
        // A waiting *next* session is never promoted here, even with no current one: a Confirm
        // proves the initiator derived the keys, not that it still holds them (it may have
        // failed and dropped them, and a Confirm can be replayed into a later run). Only a frame
        // the initiator sealed under them does (`open`).
        match self.current.as_mut() {
            Some(s) => Ok(&mut s.sealer),
            None => Err(RingSealError::NoSession),
        }
    }

    fn promote(&mut self, now: Instant, slot: Slot) {
        if let Some(mut old) = self.current.take() {
            old.retire_at = Some((now + self.cfg.grace).min(old.expires_at));
            self.previous = Some(old);
        }
        self.current = Some(slot);
    }

    fn expire(&mut self, now: Instant) {
        for s in [&mut self.previous, &mut self.current, &mut self.next] {
            if s.as_ref().is_some_and(|x| !x.live(now)) {
                *s = None;
            }
        }
    }

    fn slots(&self) -> impl Iterator<Item = &Slot> {
        [&self.previous, &self.current, &self.next]
            .into_iter()
            .filter_map(Option::as_ref)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::SuiteId;
    use crate::handshake::messages::HandshakeId;

    fn keys(role: Role, id: u32, send: u8, recv: u8) -> SessionKeys {
        let mut k = SessionKeys {
            role,
            suite: SuiteId::Aes128Gcm,
            send: [0; super::super::schedule::MAX_KEY_LEN],
            recv: [0; super::super::schedule::MAX_KEY_LEN],
            key_id: SecurityNumber::new(id).unwrap(),
            session_id: SessionId {
                initiator: HandshakeId([1; 8]),
                responder: HandshakeId([2; 8]),
            },
            established_at: Instant::ZERO,
            lifetime: Duration::from_secs(600),
            two_path: true,
            kem: false,
            peer_static: None,
        };
        k.send[..16].fill(send);
        k.recv[..16].fill(recv);
        k
    }

    const A: [u8; 6] = [2, 0, 0, 0, 0, 1];
    const B: [u8; 6] = [2, 0, 0, 0, 0, 2];

    /// Keys from a Confirm are not used to seal until a frame under them proves the initiator
    /// installed them: a responder whose initiator failed after sending Confirm (or that was fed
    /// a replayed Confirm) never seals into a session nobody holds.
    #[test]
    fn a_responder_seals_under_new_keys_only_after_the_initiator_used_them() {
        let now = Instant::from_secs(1);
        let mut resp = KeyRing::new(KeyRingConfig::default());
        resp.install(now, &keys(Role::Responder, 7, 0xb, 0xa))
            .unwrap();
        assert!(resp.next().is_some());
        assert_eq!(
            resp.sealer(now).err(),
            Some(RingSealError::NoSession),
            "no current session: the waiting keys are not promoted by sealing"
        );
        let mut init = KeyRing::new(KeyRingConfig::default());
        init.install(now, &keys(Role::Initiator, 7, 0xa, 0xb))
            .unwrap();
        let mut out = [0u8; 128];
        let mut frame = init
            .seal_sub(now, B, A, Protocol::Control, b"keepalive", &mut out)
            .unwrap()
            .to_vec();
        assert!(resp.open(now, &mut frame).is_ok());
        assert!(
            resp.sealer(now).is_ok(),
            "promoted by the initiator's frame"
        );
        assert!(resp.next().is_none());
    }

    /// A session seals and opens until its expiry, not at it; the previous one opens until the
    /// end of its grace period, not at it; a key id already live is refused.
    #[test]
    fn sessions_live_until_their_expiry_and_grace_and_key_ids_stay_unique() {
        let t0 = Instant::ZERO;
        let mut ring = KeyRing::new(KeyRingConfig::default());
        let first = keys(Role::Initiator, 7, 0xa, 0xb);
        ring.install(t0, &first).unwrap();
        assert_eq!(ring.install(t0, &first), Err(InstallError::KeyIdClash));
        let c = ring.current().unwrap();
        assert_eq!(c.next_seq(), Some(crate::wire::Seq(0)));
        assert!(c.two_path() && c.peer_static().is_none());
        assert_eq!(c.role(), Role::Initiator);
        let (send, recv) = c.fingerprints();
        assert_ne!(send, recv);
        assert_eq!(
            send,
            *crate::crypto::SuiteKey::new(SuiteId::Aes128Gcm, &[0xa; 16])
                .unwrap()
                .bivn()
        );
        let expiry = t0 + Duration::from_secs(600);
        assert_eq!(ring.expiry_timeout(), Some(expiry));
        let just_before = Instant::from_micros(expiry.total_micros() - 1);
        assert!(ring.sealer(just_before).is_ok());
        assert_eq!(ring.sealer(expiry).err(), Some(RingSealError::NoSession));

        // A second session: the first becomes previous, opening for the 30 s grace only.
        let mut ring = KeyRing::new(KeyRingConfig::default());
        ring.install(t0, &first).unwrap();
        let mut out = [0u8; 128];
        let mut peer = KeyRing::new(KeyRingConfig::default());
        peer.install(t0, &keys(Role::Initiator, 7, 0xb, 0xa))
            .unwrap();
        let t1 = Instant::from_secs(10);
        ring.install(t1, &keys(Role::Initiator, 8, 0xc, 0xd))
            .unwrap();
        assert_eq!(ring.previous().map(|s| s.key_id().get()), Some(7));
        let grace_end = t1 + Duration::from_secs(30);
        let mut late = peer
            .seal_sub(t1, A, B, Protocol::Control, b"late", &mut out)
            .unwrap()
            .to_vec();
        let mut later = late.clone();
        assert!(
            ring.open(
                Instant::from_micros(grace_end.total_micros() - 1),
                &mut late
            )
            .is_ok(),
            "the previous session opens until its grace ends"
        );
        assert_eq!(
            ring.open(grace_end, &mut later).err(),
            Some(RingOpenError::UnknownKey),
            "and not at its end"
        );
        assert_eq!(RingSealError::NoSession.as_str(), "no_session");
        assert_eq!(RingOpenError::UnknownKey.as_str(), "unknown_key");
    }

    /// Retiring the current session moves it to previous (it opens, it does not seal); clearing
    /// drops everything.
    #[test]
    fn retire_and_clear() {
        let t0 = Instant::from_secs(1);
        let mut ring = KeyRing::new(KeyRingConfig::default());
        ring.install(t0, &keys(Role::Initiator, 7, 0xa, 0xb))
            .unwrap();
        ring.retire_current(t0);
        assert!(ring.current().is_none() && ring.previous().is_some());
        assert_eq!(ring.sealer(t0).err(), Some(RingSealError::NoSession));
        ring.clear();
        assert!(ring.previous().is_none() && ring.next().is_none());
        assert_eq!(ring.expiry_timeout(), None);
    }

    /// The current slot's next sequence number counts the frames sealed; the errors print their
    /// counter names.
    #[test]
    fn the_next_sequence_number_counts_seals_and_errors_print_their_names() {
        let now = Instant::from_secs(1);
        let mut init = KeyRing::new(KeyRingConfig::default());
        init.install(now, &keys(Role::Initiator, 9, 0xa, 0xb))
            .unwrap();
        assert_eq!(
            init.current().unwrap().next_seq(),
            Some(crate::wire::Seq(0))
        );
        let mut out = [0u8; 128];
        for _ in 0..3 {
            init.seal_sub(now, B, A, Protocol::Control, b"x", &mut out)
                .unwrap();
        }
        assert_eq!(
            init.current().unwrap().next_seq(),
            Some(crate::wire::Seq(3))
        );
        assert_eq!(
            alloc::format!("{}", RingOpenError::UnknownKey),
            "unknown_key"
        );
        assert_eq!(alloc::format!("{}", RingSealError::NoSession), "no_session");
    }
}
