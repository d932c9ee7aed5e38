//! [`Setup`]: one side's connection set-up, sans-I/O. In order, on each connection: the hello
//! (capabilities, cipher, group id), the SEP/SMKEX handshake of `psp_core::handshake` (each
//! message after a 2-byte length), then a binding tag on the trusted connection that
//! authenticates the four hellos and confirms the keys. It ends in [`Established`]: the
//! negotiated cipher and the per-direction stream keys, ready for a
//! [`Connection`](super::Connection).
//!
//! Path mapping: the handshake's [`PathId::FIRST`] (SEP's messages and the DH shares, and with
//! ML-KEM-768 the encapsulation key and ciphertext) is the untrusted connection,
//! [`PathId::SECOND`] (nonces, transcript hash, key confirmation) the trusted one. An attacker
//! who replaces a share on the untrusted path changes the transcript; the responder's hash
//! arrives on the trusted path and no longer matches (`FailReason::SmkexMismatch`). In kernel
//! MPTCP mode there is one connection: the compact flow carries both handshake paths on it (a
//! message's path is its type's, see `path_of`), the thesis flow runs single-path.
//!
//! Call order: create with [`Setup::initiate`] or [`Setup::respond`]; feed the bytes read on
//! each connection to [`handle_recv`](Setup::handle_recv) and call
//! [`handle_timeout`](Setup::handle_timeout) at [`poll_timeout`](Setup::poll_timeout); after
//! each call write out [`poll_transmit`](Setup::poll_transmit) (reporting it with
//! [`transmitted`](Setup::transmitted)), then take [`poll_event`](Setup::poll_event). A failed
//! set-up may still have bytes to send (a refusal hello, a Reject): write them, best effort,
//! before closing.

use core::time::Duration as StdDuration;

use psp_core::SuiteKey;
use psp_core::crypto::SuiteId;
use psp_core::handshake::messages::{
    Body as HsBody, MAX_MESSAGE_LEN, MessageType, Repr as HsRepr, SuiteList,
};
use psp_core::handshake::rand_core::CryptoRngCore;
use psp_core::handshake::{
    Config as HsConfig, Event as HsEvent, FailReason, Handshake, PathId, Peer, Role, SessionKeys,
    SmkexMode, StaticKey, Tai64n,
};
use psp_core::scramble::{SEED_LEN, Seed};
use psp_core::time::{Duration, Instant};
use sha2::{Digest, Sha256};
use zeroize::Zeroize;

use super::{roles, trusted_slot};
use crate::wire::{
    self, BINDING_FRAME_LEN, BINDING_TAG_LEN, Cipher, HELLO_LEN, HandshakeFrame, Hello, TAG_MARKER,
    caps,
};
use crate::{Error, Mode, OnPathFailure, Options};

/// The label of the hello hash `H` (see [`hello_hash`]).
const HELLOS_LABEL: &[u8] = b"psp-mp v1 hellos";
/// Exporter labels: the binding tags.
const BIND_INITIATOR: &[u8] = b"psp-mp v1 bind initiator";
const BIND_RESPONDER: &[u8] = b"psp-mp v1 bind responder";
/// Exporter labels of the stream keys, followed by `i2r` or `r2i`.
const SCRAMBLE_LABEL: &[u8] = b"psp-mp v1 scramble ";
const AES_LABEL: &[u8] = b"psp-mp v1 aead ";
const CHACHA_LABEL: &[u8] = b"psp-mp v1 chacha20-poly1305 ";

/// A side's two hellos differ in more than the role byte (docs/MULTIPATH.md, "Edge cases").
const HELLOS_DIFFER: &str = "the peer's two hellos differ";

/// How long the other connection is still read after the peer closed one during set-up.
const EOF_GRACE: Duration = Duration::from_millis(250);

/// What a [`Setup`] reports, once.
#[derive(Debug)]
#[non_exhaustive]
pub enum SetupEvent {
    /// Set-up is complete: start the data phase (bytes already received past the binding tag
    /// are in it).
    Established(Box<Established>),
    /// Set-up failed; write what [`Setup::poll_transmit`] still holds, then close.
    Failed(Error),
}

/// The stream keys of one direction.
pub(crate) enum Keys {
    None,
    Scramble(Seed),
    Aead(Box<SuiteKey>),
}

/// The outcome of a set-up: everything the data phase needs.
pub struct Established {
    pub(crate) mode: Mode,
    pub(crate) cipher: Cipher,
    pub(crate) tx: Keys,
    pub(crate) rx: Keys,
    pub(crate) setup_time: StdDuration,
    pub(crate) handshake_time: StdDuration,
    pub(crate) peer_static: Option<[u8; 32]>,
    pub(crate) kem: bool,
    pub(crate) smkex: bool,
    pub(crate) peer_wants_acks: bool,
    /// Bytes received past the set-up on each slot (they may already be data segments).
    pub(crate) leftover: Vec<Vec<u8>>,
}

impl Established {
    /// The negotiated stream protection.
    pub fn cipher(&self) -> Cipher {
        self.cipher
    }

    /// The peer's long-term public key, if it sent one.
    pub fn peer_static(&self) -> Option<[u8; 32]> {
        self.peer_static
    }

    /// From creation to the binding tag verified (by the caller's clock).
    pub fn setup_time(&self) -> StdDuration {
        self.setup_time
    }

    /// From creation to the handshake's keys.
    pub fn handshake_time(&self) -> StdDuration {
        self.handshake_time
    }

    /// Whether the session keys hold an ML-KEM-768 secret beside X25519's (the hybrid
    /// handshake: [`Options::kem`] on both sides).
    pub fn kem(&self) -> bool {
        self.kem
    }

    /// Whether the handshake ran SMKEX (the transcript hash checked across two paths), not
    /// single-path SEP. In kernel MPTCP mode both paths were one connection.
    pub fn smkex(&self) -> bool {
        self.smkex
    }
}

impl core::fmt::Debug for Established {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Established")
            .field("cipher", &self.cipher)
            .field("kem", &self.kem)
            .field("peer_static", &self.peer_static.is_some())
            .finish_non_exhaustive()
    }
}

/// One connection's bytes during set-up.
#[derive(Default)]
struct Io {
    /// Received, not yet consumed.
    inb: Vec<u8>,
    /// To send: `out[out_pos..]`.
    out: Vec<u8>,
    out_pos: usize,
    /// The peer's hello (the initiator's are given to [`Setup::respond`]).
    peer_hello: Option<([u8; HELLO_LEN], Hello)>,
    /// The peer closed this connection (TCP end of stream).
    closed: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Hellos and the handshake.
    Handshake,
    /// Our binding tag is out; waiting for the peer's on the trusted connection.
    Binding,
    /// Reported (established or failed).
    Over,
}

/// One side's set-up (see the module docs for the call order).
pub struct Setup {
    role: Role,
    mode: Mode,
    io: Vec<Io>,
    /// The cipher we ask for (initiator) or require (responder).
    wanted: Cipher,
    /// Our capability bits.
    mine: u8,
    group: [u8; 8],
    /// Our hellos by slot.
    sent: Vec<[u8; HELLO_LEN]>,
    /// The responder's choice (known at creation); the initiator's is checked at the keys.
    chosen: Option<Cipher>,
    peer_caps: u8,
    config: HsConfig,
    /// Kernel MPTCP mode: whether the one connection carries two handshake paths (the
    /// Request's two-path flag, with at least two paths; known to the initiator at creation
    /// and to the responder from the Request).
    two_paths_on_one: bool,
    pinned_peer: Option<[u8; 32]>,
    hs: Option<Handshake>,
    rng: Box<dyn CryptoRngCore + Send>,
    keys: Option<SessionKeys>,
    /// The hello hash `H`, once the handshake is done.
    hellos: [u8; 32],
    /// The peer's binding tag as it must be.
    expected_tag: [u8; BINDING_TAG_LEN],
    phase: Phase,
    started: Instant,
    keys_after: StdDuration,
    /// The handshake gave its keys.
    keyed: bool,
    /// A connection closed while another may still hold the peer's last words (a Reject, a
    /// refusal hello): when to stop waiting for them and fail.
    eof_deadline: Option<Instant>,
    event: Option<SetupEvent>,
}

impl core::fmt::Debug for Setup {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Setup")
            .field("role", &self.role)
            .field("mode", &self.mode)
            .field("handshake", &self.hs)
            .finish_non_exhaustive()
    }
}

impl Setup {
    /// Starts a set-up as initiator: draws the group id and the handshake's randomness from
    /// `rng`, and queues the hellos and the first flight of the handshake (stamped `timestamp`,
    /// the time of day) on every connection.
    pub fn initiate(
        now: Instant,
        options: &Options,
        timestamp: Tai64n,
        mut rng: Box<dyn CryptoRngCore + Send>,
    ) -> Self {
        let mut group = [0u8; 8];
        rng.fill_bytes(&mut group);
        let mut s = Self::new(Role::Initiator, now, options, group, rng);
        let cipher = options.cipher.code();
        s.queue_hellos(cipher);
        let hs = Handshake::initiate(
            now,
            s.config.clone(),
            Peer::stream_transport(s.pinned_peer),
            timestamp,
            &mut *s.rng,
        );
        s.hs = Some(hs);
        s.after_handshake_step(now);
        s
    }

    /// Starts a set-up as responder to the initiator's `hellos` (by slot; the listener read
    /// them to pair the connections): chooses the cipher and queues our hellos. A refusal is
    /// reported at once ([`SetupEvent::Failed`]) with the refusal hellos still to send.
    pub fn respond(
        now: Instant,
        options: &Options,
        hellos: &[[u8; HELLO_LEN]],
        rng: Box<dyn CryptoRngCore + Send>,
    ) -> Self {
        let group = hellos
            .first()
            .and_then(|h| Hello::parse(h).ok())
            .map_or([0; 8], |h| h.group);
        let mut s = Self::new(Role::Responder, now, options, group, rng);
        let parsed = s.take_initiator_hellos(hellos);
        let choice = parsed.and_then(|(cipher, theirs)| {
            s.peer_caps = theirs;
            responder_choice(s.wanted, s.mine, cipher, theirs)
        });
        s.queue_hellos(choice.as_ref().map_or(wire::CIPHER_REFUSED, |c| c.code()));
        match choice {
            Ok(c) => s.chosen = Some(c),
            Err(e) => s.fail(e),
        }
        s
    }

    fn new(
        role: Role,
        now: Instant,
        options: &Options,
        group: [u8; 8],
        rng: Box<dyn CryptoRngCore + Send>,
    ) -> Self {
        let n = roles(options.mode).len();
        let mut mine = my_caps(options);
        if options.mode == Mode::KernelMptcp {
            mine |= caps::KERNEL_MPTCP;
        }
        let config = hs_config(role, options);
        let two_paths_on_one =
            role == Role::Initiator && config.smkex != SmkexMode::Off && config.paths >= 2;
        Self {
            role,
            mode: options.mode,
            io: (0..n).map(|_| Io::default()).collect(),
            wanted: options.cipher,
            mine,
            group,
            sent: vec![[0; HELLO_LEN]; n],
            chosen: None,
            peer_caps: 0,
            config,
            two_paths_on_one,
            pinned_peer: options.pinned_peer,
            hs: None,
            rng,
            keys: None,
            hellos: [0; 32],
            expected_tag: [0; BINDING_TAG_LEN],
            phase: Phase::Handshake,
            started: now,
            keys_after: StdDuration::ZERO,
            keyed: false,
            eof_deadline: None,
            event: None,
        }
    }

    /// Parses and checks the initiator's hellos: one per slot, of the slot's role, with the
    /// same group, capabilities and cipher. Returns its cipher code and capabilities.
    fn take_initiator_hellos(&mut self, hellos: &[[u8; HELLO_LEN]]) -> Result<(u8, u8), Error> {
        let roles = roles(self.mode);
        if hellos.len() != roles.len() {
            return Err(Error::Protocol("a hello per connection"));
        }
        let mut first: Option<Hello> = None;
        for (slot, raw) in hellos.iter().enumerate() {
            let h = Hello::parse(raw).map_err(|error| Error::Wire {
                path: Some(roles[slot]),
                error,
            })?;
            if h.role != roles[slot] {
                return Err(Error::Protocol(
                    "a hello on the connection of the other role",
                ));
            }
            if first.is_some_and(|f| f.caps != h.caps || f.cipher != h.cipher || f.group != h.group)
            {
                return Err(Error::Protocol(HELLOS_DIFFER));
            }
            first = Some(h);
            self.io[slot].peer_hello = Some((*raw, h));
        }
        first
            .map(|h| (h.cipher, h.caps))
            .ok_or(Error::Protocol("no hello"))
    }

    fn queue_hellos(&mut self, cipher: u8) {
        for (slot, &role) in roles(self.mode).iter().enumerate() {
            let h = Hello {
                role,
                caps: self.mine,
                cipher,
                group: self.group,
            }
            .emit();
            self.sent[slot] = h;
            self.io[slot].out.extend_from_slice(&h);
        }
    }

    /// Bytes to write on `slot` now (empty: nothing).
    pub fn poll_transmit(&self, slot: usize) -> &[u8] {
        self.io.get(slot).map_or(&[], |io| &io.out[io.out_pos..])
    }

    /// `n` bytes of [`poll_transmit`](Self::poll_transmit)`(slot)` were written.
    pub fn transmitted(&mut self, slot: usize, n: usize) {
        if let Some(io) = self.io.get_mut(slot) {
            io.out_pos = (io.out_pos + n).min(io.out.len());
            if io.out_pos == io.out.len() {
                io.out.clear();
                io.out_pos = 0;
            }
        }
    }

    /// Whether to read `slot` now: every connection during the handshake, only the trusted one
    /// while waiting for the peer's binding tag (bytes past the set-up belong to the data
    /// phase, and a close there is the data phase's to report), none once over.
    pub fn wants_input(&self, slot: usize) -> bool {
        if self.io.get(slot).is_none_or(|io| io.closed) {
            return false;
        }
        match self.phase {
            Phase::Handshake => true,
            Phase::Binding => slot == trusted_slot(self.io.len()),
            Phase::Over => false,
        }
    }

    /// When [`handle_timeout`](Self::handle_timeout) is due (the handshake's deadline, or the
    /// end of the wait after a connection closed).
    pub fn poll_timeout(&self) -> Option<Instant> {
        match self.phase {
            Phase::Handshake => {
                let hs = self.hs.as_ref().and_then(Handshake::poll_timeout);
                match (hs, self.eof_deadline) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                }
            }
            _ => None,
        }
    }

    /// The peer closed `slot` (TCP end of stream) before the set-up was over. When no other
    /// connection can still bring what the set-up waits for, it fails at once; otherwise the
    /// others are read for up to `EOF_GRACE` (250 ms) more (a peer that refuses writes its Reject on
    /// one connection and closes both: the other's close may be read first), then it fails.
    /// The error says the most it can: a close after our answer or our keys means the peer
    /// gave up on the session (a pinned key it did not get, an SMKEX hash that did not match),
    /// and its own error says which.
    pub fn handle_eof(&mut self, now: Instant, slot: usize) {
        if self.phase == Phase::Over {
            return;
        }
        let Some(io) = self.io.get_mut(slot) else {
            return;
        };
        io.closed = true;
        if (0..self.io.len()).any(|s| self.wants_input(s)) {
            self.eof_deadline.get_or_insert(now + EOF_GRACE);
            return;
        }
        self.fail_closed(slot);
    }

    /// Fails the set-up for the peer's close of `slot`, with the error of the phase.
    fn fail_closed(&mut self, slot: usize) {
        let why = match self.phase {
            Phase::Binding => {
                "the peer closed the connection instead of sending its binding tag: it refused \
                 the session after the key exchange (its error says why, e.g. smkex_mismatch)"
            }
            _ if self.role == Role::Responder && self.hs.is_some() => {
                "the peer closed the connection during the key exchange: it refused our answer \
                 (its error says why, e.g. identity_mismatch)"
            }
            _ => "peer closed during set-up",
        };
        let path = roles(self.mode).get(slot).copied();
        self.fail(Error::io(
            path,
            std::io::Error::new(std::io::ErrorKind::UnexpectedEof, why),
        ));
    }

    /// Whether the handshake has given its keys (our binding tag is queued; the set-up may
    /// still wait for the peer's, or be over).
    pub fn has_keys(&self) -> bool {
        self.keyed
    }

    /// Runs the handshake's timers.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.phase != Phase::Handshake {
            return;
        }
        if self.eof_deadline.is_some_and(|t| now >= t) {
            let slot = self.io.iter().position(|io| io.closed).unwrap_or(0);
            return self.fail_closed(slot);
        }
        if let Some(hs) = &mut self.hs {
            hs.handle_timeout(now);
            self.after_handshake_step(now);
        }
    }

    /// The outcome, once: established or failed.
    #[must_use]
    pub fn poll_event(&mut self) -> Option<SetupEvent> {
        self.event.take()
    }

    /// Feeds bytes read on `slot` and processes everything that is complete on every slot.
    pub fn handle_recv(&mut self, now: Instant, slot: usize, bytes: &[u8]) {
        if self.phase == Phase::Over {
            return;
        }
        let Some(io) = self.io.get_mut(slot) else {
            return;
        };
        io.inb.extend_from_slice(bytes);
        self.process(now);
    }

    fn process(&mut self, now: Instant) {
        loop {
            let mut progress = false;
            for slot in 0..self.io.len() {
                if self.phase != Phase::Handshake {
                    break;
                }
                match self.next_message(slot) {
                    Err(e) => return self.fail(e),
                    Ok(None) => {}
                    Ok(Some(msg)) => {
                        progress = true;
                        if let Err(e) = self.handle_message(now, slot, &msg) {
                            return self.fail(e);
                        }
                    }
                }
            }
            if self.phase == Phase::Binding {
                self.check_binding(now);
                return;
            }
            if !progress {
                return;
            }
        }
    }

    /// The next handshake message on `slot` if it is all there (the responder's hello in front
    /// of it is taken and checked on the way, by the initiator). `None` while the peer's binding
    /// tag is next: it waits for [`Self::check_binding`].
    fn next_message(&mut self, slot: usize) -> Result<Option<Vec<u8>>, Error> {
        let role = roles(self.mode)[slot];
        let wire_error = |error| Error::Wire {
            path: Some(role),
            error,
        };
        let io = &mut self.io[slot];
        if io.peer_hello.is_none() {
            let Some(raw) = io.inb.get(..HELLO_LEN) else {
                return Ok(None);
            };
            let mut hello = [0u8; HELLO_LEN];
            hello.copy_from_slice(raw);
            io.inb.drain(..HELLO_LEN);
            let h = Hello::parse(&hello).map_err(wire_error)?;
            if h.group != self.group || h.role != role {
                return Err(Error::Protocol("the peer's hello does not answer ours"));
            }
            // A refusal or another cipher ends the set-up at once.
            initiator_check(self.wanted, self.mine, h.cipher, h.caps)?;
            io.peer_hello = Some((hello, h));
        }
        if io.inb.starts_with(&TAG_MARKER) {
            return Ok(None);
        }
        // The responder's handshake starts with the Request on slot 0; messages on the other
        // slot wait for it.
        if self.hs.is_none() && slot != 0 {
            return Ok(None);
        }
        match HandshakeFrame::parse(&io.inb).map_err(wire_error)? {
            None => Ok(None),
            Some((range, end)) => {
                let msg = io.inb[range].to_vec();
                io.inb.drain(..end);
                Ok(Some(msg))
            }
        }
    }

    fn handle_message(&mut self, now: Instant, slot: usize, msg: &[u8]) -> Result<(), Error> {
        match &mut self.hs {
            Some(hs) => {
                let path = path_of(self.io.len(), self.two_paths_on_one, slot, msg);
                // An ignored message (wrong ids, duplicate) changes nothing; real failures come
                // as events.
                let _ = hs.handle_message(now, path, msg);
            }
            None => {
                // The responder's first message, the Request, on slot 0 (path 1 either way).
                let request = HsRepr::parse_bytes(msg)
                    .map_err(|_| Error::Handshake(FailReason::BadMessage))?;
                if let HsBody::Request(r) = request.body {
                    self.two_paths_on_one = r.flags.two_path && r.paths >= 2;
                }
                let hs = Handshake::respond_parsed(
                    now,
                    self.config.clone(),
                    Peer::stream_transport(self.pinned_peer),
                    PathId::FIRST,
                    request,
                    &mut *self.rng,
                )
                .map_err(Error::Handshake)?;
                self.hs = Some(hs);
            }
        }
        self.after_handshake_step(now);
        Ok(())
    }

    /// Queues what the handshake wants to send and takes its event.
    fn after_handshake_step(&mut self, now: Instant) {
        let Some(hs) = &mut self.hs else {
            return;
        };
        let mut buf = [0u8; MAX_MESSAGE_LEN];
        while let Some(t) = hs.poll_transmit(now, &mut buf) {
            let slot = if self.io.len() == 1 || t.path == PathId::FIRST {
                0
            } else {
                1
            };
            HandshakeFrame::emit(&buf[..t.len], &mut self.io[slot].out);
        }
        match hs.poll_event() {
            Some(HsEvent::Established(keys)) => {
                self.keys_after = StdDuration::from(now.saturating_since(self.started));
                self.keyed = true;
                if let Err(e) = self.on_keys(keys) {
                    self.fail(e);
                }
            }
            Some(HsEvent::Failed(reason)) => self.fail(Error::Handshake(reason)),
            None => {}
        }
    }

    /// The handshake's keys: check the hellos (initiator), queue our binding tag on the trusted
    /// connection and wait for the peer's.
    fn on_keys(&mut self, keys: SessionKeys) -> Result<(), Error> {
        let got: Vec<[u8; HELLO_LEN]> = self
            .io
            .iter()
            .map(|io| io.peer_hello.map(|(raw, _)| raw))
            .collect::<Option<_>>()
            .ok_or(Error::Protocol("no hello from the peer"))?;
        if self.role == Role::Initiator {
            let hellos: Vec<Hello> = self
                .io
                .iter()
                .filter_map(|io| io.peer_hello)
                .map(|h| h.1)
                .collect();
            if hellos.iter().any(|h| h.cipher != hellos[0].cipher) {
                return Err(Error::Protocol(
                    "the peer chose different ciphers on the two paths",
                ));
            }
            // Differing caps are refused in `established`, once the responder's binding tag
            // verified: a hello changed in transit is reported as such (`BindMismatch`).
            self.peer_caps = hellos[0].caps;
            self.chosen = Some(initiator_check(
                self.wanted,
                self.mine,
                hellos[0].cipher,
                self.peer_caps,
            )?);
        }
        // The initiator's hellos first, then the responder's.
        self.hellos = match self.role {
            Role::Initiator => hello_hash(&self.sent, &got),
            Role::Responder => hello_hash(&got, &self.sent),
        };
        let (mine, theirs) = match self.role {
            Role::Initiator => (BIND_INITIATOR, BIND_RESPONDER),
            Role::Responder => (BIND_RESPONDER, BIND_INITIATOR),
        };
        let mut tag = [0u8; BINDING_TAG_LEN];
        export(&keys, mine, &self.hellos, &mut tag)?;
        export(&keys, theirs, &self.hellos, &mut self.expected_tag)?;
        let t = trusted_slot(self.io.len());
        let out = &mut self.io[t].out;
        out.extend_from_slice(&TAG_MARKER);
        out.extend_from_slice(&tag);
        self.keys = Some(keys);
        self.phase = Phase::Binding;
        Ok(())
    }

    /// Checks the peer's binding tag once it is on the trusted connection, and reports.
    fn check_binding(&mut self, now: Instant) {
        let t = trusted_slot(self.io.len());
        let io = &mut self.io[t];
        let Some(frame) = io.inb.get(..BINDING_FRAME_LEN) else {
            return;
        };
        let ok = frame[..2] == TAG_MARKER
            && frame[2..]
                .iter()
                .zip(&self.expected_tag)
                .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                == 0;
        io.inb.drain(..BINDING_FRAME_LEN);
        if !ok {
            return self.fail(Error::BindMismatch);
        }
        match self.established(now) {
            Ok(e) => {
                self.phase = Phase::Over;
                self.event = Some(SetupEvent::Established(Box::new(e)));
            }
            Err(e) => self.fail(e),
        }
    }

    fn established(&mut self, now: Instant) -> Result<Established, Error> {
        let (Some(keys), Some(cipher)) = (self.keys.take(), self.chosen) else {
            return Err(Error::Protocol("no keys"));
        };
        // The responder's two hellos are one answer: the same but for the role byte (group
        // and cipher were checked before). (The responder checked ours in `respond`.)
        let mut caps = self
            .io
            .iter()
            .filter_map(|io| io.peer_hello.map(|h| h.1.caps));
        let first = caps.next();
        if caps.any(|c| Some(c) != first) {
            return Err(Error::Protocol(HELLOS_DIFFER));
        }
        let (tx, rx): (&[u8], &[u8]) = match self.role {
            Role::Initiator => (b"i2r", b"r2i"),
            Role::Responder => (b"r2i", b"i2r"),
        };
        let tx = stream_keys(&keys, cipher, tx, &self.hellos)?;
        let rx = stream_keys(&keys, cipher, rx, &self.hellos)?;
        Ok(Established {
            mode: self.mode,
            cipher,
            tx,
            rx,
            setup_time: StdDuration::from(now.saturating_since(self.started)),
            handshake_time: self.keys_after,
            peer_static: keys.peer_static(),
            kem: keys.kem(),
            smkex: keys.two_path(),
            peer_wants_acks: self.peer_caps & caps::RESEND != 0,
            leftover: self
                .io
                .iter_mut()
                .map(|io| core::mem::take(&mut io.inb))
                .collect(),
        })
    }

    fn fail(&mut self, e: Error) {
        if self.phase == Phase::Over {
            return;
        }
        self.phase = Phase::Over;
        self.keys = None;
        self.event = Some(SetupEvent::Failed(e));
    }
}

/// The handshake path of message `msg` that arrived on `slot` of `n` connections. Dispersal:
/// the connection's (untrusted: path 1, trusted: path 2). One connection (kernel MPTCP mode):
/// the path its type goes on in the flow the Request chose (`two_paths`: its two-path flag
/// with at least two paths): Nonce, NonceReply and Confirm on path 2, every other message on
/// path 1; single-path, everything on path 1.
fn path_of(n: usize, two_paths: bool, slot: usize, msg: &[u8]) -> PathId {
    if n > 1 {
        return if slot == 0 {
            PathId::FIRST
        } else {
            PathId::SECOND
        };
    }
    let ty = msg.get(1).map(|&t| MessageType::from(t));
    match ty {
        Some(MessageType::Nonce | MessageType::NonceReply | MessageType::Confirm) if two_paths => {
            PathId::SECOND
        }
        _ => PathId::FIRST,
    }
}

/// `H = SHA-256("psp-mp v1 hellos" || initiator's hellos || responder's hellos)`, each side's
/// in slot order (untrusted, then trusted), as each side sent or received them.
pub(crate) fn hello_hash(initiator: &[[u8; HELLO_LEN]], responder: &[[u8; HELLO_LEN]]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(HELLOS_LABEL);
    for x in initiator.iter().chain(responder) {
        h.update(x);
    }
    h.finalize().into()
}

/// `SessionKeys::export(label || H)` into `out`.
fn export(
    keys: &SessionKeys,
    label: &[u8],
    hellos: &[u8; 32],
    out: &mut [u8],
) -> Result<(), Error> {
    let mut info = Vec::with_capacity(label.len() + hellos.len());
    info.extend_from_slice(label);
    info.extend_from_slice(hellos);
    keys.export(&info, out)
        .map_err(|_| Error::Protocol("no keying material"))
}

/// The stream keys of one direction (`dir`: `i2r` or `r2i`) for `cipher`.
fn stream_keys(
    keys: &SessionKeys,
    cipher: Cipher,
    dir: &[u8],
    hellos: &[u8; 32],
) -> Result<Keys, Error> {
    Ok(match cipher {
        Cipher::None => Keys::None,
        Cipher::Scramble => {
            let mut s = [0u8; SEED_LEN];
            export(keys, &[SCRAMBLE_LABEL, dir].concat(), hellos, &mut s)?;
            let seed = Seed::from_bytes(s);
            s.zeroize();
            Keys::Scramble(seed)
        }
        Cipher::Aes128Gcm | Cipher::ChaCha20Poly1305 => {
            let (suite, label) = if cipher == Cipher::Aes128Gcm {
                (SuiteId::Aes128Gcm, AES_LABEL)
            } else {
                (SuiteId::ChaCha20Poly1305, CHACHA_LABEL)
            };
            let mut k = [0u8; 32];
            let key = &mut k[..suite.key_len()];
            export(keys, &[label, dir].concat(), hellos, key)?;
            let key = SuiteKey::new(suite, key).map_err(|_| Error::Protocol("AEAD key refused"));
            k.zeroize();
            Keys::Aead(Box::new(key?))
        }
    })
}

fn hs_config(role: Role, options: &Options) -> HsConfig {
    let mut cfg = HsConfig::stream_transport();
    // aes128-gcm is only the key length here (16-byte session keys into the exporter); the
    // stream's cipher is negotiated in the hellos.
    cfg.suites = SuiteList::from_suites(&[SuiteId::Aes128Gcm]);
    (cfg.smkex, cfg.paths) = match (options.mode, role) {
        (Mode::Dispersal, _) => (SmkexMode::Required, 2),
        // One connection: the compact flow (psp-core's needs SMKEX over two paths) carries both
        // of SMKEX's paths on it, which the kernel may or may not spread over its subflows
        // (docs/MULTIPATH.md, "Kernel MPTCP mode"); the thesis flow is single-path SEP. Both
        // resist passive observers only.
        (Mode::KernelMptcp, Role::Initiator) if options.compact_handshake => {
            (SmkexMode::Required, 2)
        }
        (Mode::KernelMptcp, Role::Initiator) => (SmkexMode::Off, 1),
        // A responder serves both: the Request's flags choose.
        (Mode::KernelMptcp, Role::Responder) => (SmkexMode::Preferred, 2),
    };
    cfg.kem = options.kem;
    let timeout = Duration::from(options.handshake_timeout);
    cfg.timeout = timeout;
    // TCP retransmits: a handshake retransmission would only duplicate a message.
    cfg.rto = timeout;
    cfg.max_rto = timeout;
    // The initiator chooses; a responder serves either flow.
    cfg.compact = role == Role::Responder || options.compact_handshake;
    cfg.static_key = options
        .static_key
        .as_ref()
        .map(|k| StaticKey::from_bytes(k.secret()));
    cfg
}

fn my_caps(options: &Options) -> u8 {
    let mut c = caps::AES128_GCM;
    if options.advertise_scramble {
        c |= caps::SCRAMBLE;
    }
    if options.allow_plain || options.cipher == Cipher::None {
        c |= caps::ALLOW_PLAIN;
    }
    if matches!(options.on_path_failure, OnPathFailure::Continue { .. }) {
        c |= caps::RESEND;
    }
    c
}

/// Whether both sides' capabilities allow `cipher` (ChaCha20-Poly1305 has no bit: asking for
/// it by code is the announcement).
fn supported(cipher: Cipher, mine: u8, theirs: u8) -> bool {
    let need = match cipher {
        Cipher::None => caps::ALLOW_PLAIN,
        Cipher::Scramble => caps::SCRAMBLE,
        Cipher::Aes128Gcm => caps::AES128_GCM,
        Cipher::ChaCha20Poly1305 => return true,
    };
    mine & theirs & need != 0
}

/// The papers' fallback: a stream that asked for `scramble` runs in clear when one side lacks
/// the scramble capability and both allow plain. The only case where a side gets another cipher
/// than the one it named.
fn plain_fallback(wanted: Cipher, mine: u8, theirs: u8) -> bool {
    wanted == Cipher::Scramble
        && !supported(Cipher::Scramble, mine, theirs)
        && supported(Cipher::None, mine, theirs)
}

/// The responder's choice: the cipher the initiator asked for (`wanted`, a hello code) if it
/// is the one this side requires and both capabilities allow it, or plain in the papers'
/// fallback. Anything else is refused.
fn responder_choice(required: Cipher, mine: u8, wanted: u8, theirs: u8) -> Result<Cipher, Error> {
    let Some(wanted) = Cipher::from_code(wanted) else {
        return Err(Error::Protocol("the peer asks for an unknown cipher"));
    };
    if wanted != required {
        return Err(Error::CipherRequired { wanted, required });
    }
    if supported(wanted, mine, theirs) {
        return Ok(wanted);
    }
    if plain_fallback(wanted, mine, theirs) {
        return Ok(Cipher::None);
    }
    Err(if wanted == Cipher::Scramble {
        Error::Refused("one side lacks the scramble capability and plain is not allowed on both")
    } else {
        Error::Refused("the peer asks for a cipher its capabilities do not announce")
    })
}

/// The initiator's check of the responder's answer (`chosen`, a hello code, with the
/// responder's capabilities `theirs`): the cipher asked for, or plain in the papers' fallback.
fn initiator_check(wanted: Cipher, mine: u8, chosen: u8, theirs: u8) -> Result<Cipher, Error> {
    match Cipher::from_code(chosen) {
        Some(c) if c == wanted => Ok(c),
        Some(Cipher::None) if plain_fallback(wanted, mine, theirs) => Ok(Cipher::None),
        chosen => Err(Error::CipherRefused { wanted, chosen }),
    }
}

#[cfg(test)]
pub(crate) mod tests;
