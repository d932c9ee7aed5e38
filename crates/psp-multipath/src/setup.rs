//! Connection set-up on the two TCP connections: hellos (capabilities, cipher, group id), the
//! SMKEX handshake of `psp_core::handshake` driven over both connections, the binding tags that
//! authenticate the hellos, and the per-direction stream keys.
//!
//! Path mapping: SMKEX's [`PathId::FIRST`] (the DH shares and SEP's messages) is the untrusted
//! connection, [`PathId::SECOND`] (nonces, transcript hash, key confirmation) the trusted one. An
//! attacker who replaces a share on the untrusted path changes the transcript; the responder's
//! hash arrives on the trusted path and no longer matches (`FailReason::SmkexMismatch`).

use core::net::{IpAddr, Ipv4Addr};
use std::io;
use std::time::Instant as StdInstant;

use psp_core::SuiteKey;
use psp_core::crypto::SuiteId;
use psp_core::handshake::messages::SuiteList;
use psp_core::handshake::{
    Config as HsConfig, Event, Handshake, PathId, Peer, Role, SessionKeys, SmkexMode, StaticKey,
};
use psp_core::scramble::{SEED_LEN, Seed};
use psp_core::time::{Duration as CoreDuration, Instant as CoreInstant};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use zeroize::Zeroize;

use crate::wire::{self, Cipher, HELLO_LEN, HandshakeFrame, Hello, PathRole, caps};
use crate::{Error, OnPathFailure, Options, TRUSTED, UNTRUSTED};

/// Stand-in link-layer addresses for SEP's stage-1 checks, which were written for a LAN: over
/// TCP the peers are identified by their connections, so both sides use these fixed values.
const INITIATOR_MAC: [u8; 6] = [0x02, 0x50, 0x4d, 0x50, 0x00, 0x01];
const RESPONDER_MAC: [u8; 6] = [0x02, 0x50, 0x4d, 0x50, 0x00, 0x02];
/// Stand-in network addresses (TEST-NET-1, RFC 5737) for the same checks.
const INITIATOR_ADDR: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));
const RESPONDER_ADDR: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2));

/// The prefix of the binding tag (a length no handshake frame can have).
const TAG_MARKER: [u8; 2] = [0xff, 0xff];
/// Marker plus tag.
const TAG_FRAME_LEN: usize = 2 + 32;

/// A connection with its receive buffer (bytes read past a message stay here for the next
/// phase: they may already be data segments).
pub(crate) struct Conn {
    pub(crate) stream: TcpStream,
    pub(crate) buf: Vec<u8>,
    /// Bytes queued for the peer, written in one go before this side waits: the hello, the
    /// handshake messages and the binding tag of one flight share a segment (each write on a
    /// local link costs the whole receive path, ~20 µs).
    out: Vec<u8>,
    /// Initiator: the responder's hello is read in front of the first handshake message, and
    /// checked at once against `(wanted cipher, our capabilities)`.
    expect_hello: Option<(Cipher, u8)>,
    peer_hello: Option<([u8; HELLO_LEN], Hello)>,
}

impl Conn {
    pub(crate) fn new(stream: TcpStream) -> Self {
        Self {
            stream,
            buf: Vec::with_capacity(4096),
            out: Vec::with_capacity(512),
            expect_hello: None,
            peer_hello: None,
        }
    }

    /// Writes the queued bytes, if any.
    async fn flush(&mut self, role: Option<PathRole>) -> Result<(), Error> {
        if !self.out.is_empty() {
            self.stream
                .write_all(&self.out)
                .await
                .map_err(|e| Error::io(role, e))?;
            self.out.clear();
        }
        Ok(())
    }

    /// Reads until `n` bytes are buffered. Cancel-safe: progress stays in `buf`.
    async fn fill(&mut self, n: usize) -> io::Result<()> {
        while self.buf.len() < n {
            if self.stream.read_buf(&mut self.buf).await? == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
        }
        Ok(())
    }

    pub(crate) async fn read_hello(&mut self) -> Result<([u8; HELLO_LEN], Hello), Error> {
        let role = None;
        self.fill(HELLO_LEN).await.map_err(|e| Error::io(role, e))?;
        let mut raw = [0u8; HELLO_LEN];
        raw.copy_from_slice(&self.buf[..HELLO_LEN]);
        self.buf.drain(..HELLO_LEN);
        let hello = Hello::parse(&raw).map_err(|e| Error::Wire {
            path: None,
            error: e,
        })?;
        Ok((raw, hello))
    }

    /// The next handshake message. Cancel-safe. If the peer's binding tag is next (the peer
    /// finished its handshake and the last message for us is on the other path), this waits
    /// forever and leaves the tag for [`finish`].
    async fn read_message(&mut self, role: PathRole) -> Result<Vec<u8>, Error> {
        loop {
            if let Some(msg) = self.buffered_message(role)? {
                return Ok(msg);
            }
            if self.tag_next() {
                core::future::pending::<()>().await;
            }
            let n = self
                .stream
                .read_buf(&mut self.buf)
                .await
                .map_err(|e| Error::io(Some(role), e))?;
            if n == 0 {
                return Err(Error::io(
                    Some(role),
                    io::Error::new(io::ErrorKind::UnexpectedEof, "peer closed during set-up"),
                ));
            }
        }
    }

    /// Whether the peer's binding tag is next in `buf` (after its hello).
    fn tag_next(&self) -> bool {
        (self.expect_hello.is_none() || self.peer_hello.is_some())
            && self.buf.starts_with(&TAG_MARKER)
    }

    /// The next handshake message if `buf` already holds all of it (the peer's hello in front
    /// of it is taken on the way).
    fn buffered_message(&mut self, role: PathRole) -> Result<Option<Vec<u8>>, Error> {
        if self.expect_hello.is_some() && self.peer_hello.is_none() && self.buf.len() >= HELLO_LEN {
            let mut raw = [0u8; HELLO_LEN];
            raw.copy_from_slice(&self.buf[..HELLO_LEN]);
            self.buf.drain(..HELLO_LEN);
            let h = Hello::parse(&raw).map_err(|e| Error::Wire {
                path: Some(role),
                error: e,
            })?;
            if let Some((wanted, mine)) = self.expect_hello {
                initiator_check(wanted, mine, h.cipher, h.caps)?;
            }
            self.peer_hello = Some((raw, h));
        }
        let hello_done = self.expect_hello.is_none() || self.peer_hello.is_some();
        if self.tag_next() {
            return Ok(None);
        }
        let framed = if hello_done {
            HandshakeFrame::parse(&self.buf).map_err(|e| Error::Wire {
                path: Some(role),
                error: e,
            })?
        } else {
            None
        };
        if let Some((range, end)) = framed {
            let msg = self.buf[range].to_vec();
            self.buf.drain(..end);
            return Ok(Some(msg));
        }
        Ok(None)
    }
}

/// Random bytes, or an error if the OS RNG fails.
pub(crate) fn random<const N: usize>() -> Result<[u8; N], Error> {
    let mut b = [0u8; N];
    getrandom::fill(&mut b).map_err(|_| Error::Config("the OS random number generator failed"))?;
    Ok(b)
}

/// Everything the data phase needs from set-up.
pub(crate) struct Established {
    pub(crate) cipher: Cipher,
    pub(crate) tx: TxKeys,
    pub(crate) rx: RxKeys,
    /// Time from the first hello sent to the binding tag verified.
    pub(crate) setup_time: core::time::Duration,
    /// Time from the first hello sent to the handshake's keys.
    pub(crate) handshake_time: core::time::Duration,
    /// The peer's long-term public key, if it sent one.
    pub(crate) peer_static: Option<[u8; 32]>,
    /// The peer keeps its segments for re-sending and wants our acks (its hello's
    /// [`caps::RESEND`]).
    pub(crate) peer_wants_acks: bool,
}

/// The send-direction key material.
pub(crate) enum TxKeys {
    None,
    Scramble(Seed),
    Aead(Box<SuiteKey>),
}

/// The receive-direction key material.
pub(crate) type RxKeys = TxKeys;

fn hs_config(role: Role, options: &Options) -> HsConfig {
    let (mac, addr) = match role {
        Role::Initiator => (INITIATOR_MAC, INITIATOR_ADDR),
        Role::Responder => (RESPONDER_MAC, RESPONDER_ADDR),
    };
    let mut cfg = HsConfig::new(mac, addr, 24);
    // aes128-gcm is only the key length here (16-byte keys into the exporter); the stream's
    // cipher is negotiated in the hellos.
    cfg.suites = SuiteList::from_suites(&[SuiteId::Aes128Gcm]);
    cfg.smkex = SmkexMode::Required;
    cfg.paths = 2;
    let timeout = CoreDuration::from(options.handshake_timeout);
    cfg.timeout = timeout;
    // TCP retransmits for us: a handshake retransmission would only duplicate a message.
    cfg.rto = timeout;
    cfg.max_rto = timeout;
    // The initiator chooses; a responder serves either flow (compact answers only a compact
    // initiator's share, which carries no responder id).
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
/// it by code is the announcement, and this crate implements it).
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
/// is the one this side requires (`required`, [`Options::cipher`]) and both capabilities allow
/// it, or plain in the papers' fallback ([`plain_fallback`], when this side requires
/// `scramble`). Anything else is refused: a listener never serves another cipher than its own.
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

/// The connections' slots and roles: `[untrusted, trusted]` in dispersal mode, `[trusted]` in
/// kernel MPTCP mode (one connection; the kernel spreads it over the paths).
fn roles(n: usize) -> &'static [(usize, PathRole)] {
    if n == 1 {
        &[(0, PathRole::Trusted)]
    } else {
        &[
            (UNTRUSTED, PathRole::Untrusted),
            (TRUSTED, PathRole::Trusted),
        ]
    }
}

/// The slot of the trusted connection.
fn trusted_slot(n: usize) -> usize {
    if n == 1 { 0 } else { TRUSTED }
}

/// The initiator's side: hellos out, handshake (the responder's hellos come in front of its
/// first message), binding. `conns`: as [`roles`].
pub(crate) async fn initiate(conns: &mut [Conn], options: &Options) -> Result<Established, Error> {
    let t0 = StdInstant::now();
    let group: [u8; 8] = random()?;
    let wanted = options.cipher;
    let mut mine = my_caps(options);
    if conns.len() == 1 {
        mine |= caps::KERNEL_MPTCP;
    }
    let mut sent = vec![[0u8; HELLO_LEN]; conns.len()];
    for &(i, role) in roles(conns.len()) {
        sent[i] = Hello {
            role,
            caps: mine,
            cipher: wanted.code(),
            group,
        }
        .emit();
        // Sent with the first handshake message.
        conns[i].out.extend_from_slice(&sent[i]);
    }
    // The responder's hellos come in front of its first handshake message on each path: the
    // handshake starts now, without waiting a round trip for them.
    for c in conns.iter_mut() {
        c.expect_hello = Some((wanted, mine));
    }
    let keys = run_handshake(Role::Initiator, conns, options, None).await?;
    let t_keys = t0.elapsed();
    let mut got = vec![[0u8; HELLO_LEN]; conns.len()];
    let mut chosen = vec![0u8; conns.len()];
    let mut peer_caps = 0;
    for &(i, role) in roles(conns.len()) {
        let Some((raw, h)) = conns[i].peer_hello else {
            return Err(Error::Protocol("no hello from the peer"));
        };
        if h.group != group || h.role != role {
            return Err(Error::Protocol("the peer's hello does not answer ours"));
        }
        got[i] = raw;
        chosen[i] = h.cipher;
        peer_caps |= h.caps;
    }
    if chosen.iter().any(|c| *c != chosen[0]) {
        return Err(Error::Protocol(
            "the peer chose different ciphers on the two paths",
        ));
    }
    let cipher = initiator_check(wanted, mine, chosen[0], peer_caps)?;
    let ctx = hello_context(&sent, &got);
    let mut est = finish(
        Role::Initiator,
        conns,
        options,
        &keys,
        &ctx,
        cipher,
        (t0, t_keys),
    )
    .await?;
    est.peer_wants_acks = peer_caps & caps::RESEND != 0;
    Ok(est)
}

/// The responder's side, after the listener read and paired both hellos (`hellos` by path).
pub(crate) async fn respond(
    conns: &mut [Conn],
    hellos: &[([u8; HELLO_LEN], Hello)],
    options: &Options,
) -> Result<Established, Error> {
    let t0 = StdInstant::now();
    let u = &hellos[0].1;
    if hellos
        .iter()
        .any(|(_, h)| h.caps != u.caps || h.cipher != u.cipher)
    {
        return Err(Error::Protocol("the two hellos differ"));
    }
    let mut mine = my_caps(options);
    if conns.len() == 1 {
        mine |= caps::KERNEL_MPTCP;
    }
    let choice = responder_choice(options.cipher, mine, u.cipher, u.caps);
    let mut sent = vec![[0u8; HELLO_LEN]; conns.len()];
    for &(i, role) in roles(conns.len()) {
        sent[i] = Hello {
            role,
            caps: mine,
            cipher: choice.as_ref().map_or(wire::CIPHER_REFUSED, |c| c.code()),
            group: u.group,
        }
        .emit();
        // Sent with our first handshake message (a refusal: at once, below).
        conns[i].out.extend_from_slice(&sent[i]);
    }
    let cipher = match choice {
        Ok(c) => c,
        Err(e) => {
            for &(i, role) in roles(conns.len()) {
                conns[i].flush(Some(role)).await?;
            }
            return Err(e);
        }
    };
    let got: Vec<[u8; HELLO_LEN]> = hellos.iter().map(|h| h.0).collect();
    // Hello context in the initiator's order: its hellos, then ours.
    let ctx = hello_context(&got, &sent);
    // The request comes on SMKEX path 1: slot 0 in both modes.
    let first_role = roles(conns.len())[0].1;
    let first = timed(options, conns[0].read_message(first_role)).await?;
    let keys = run_handshake(Role::Responder, conns, options, Some(first)).await?;
    let t_keys = t0.elapsed();
    let peer_caps = u.caps;
    let mut est = finish(
        Role::Responder,
        conns,
        options,
        &keys,
        &ctx,
        cipher,
        (t0, t_keys),
    )
    .await?;
    est.peer_wants_acks = peer_caps & caps::RESEND != 0;
    Ok(est)
}

async fn timed<T>(
    options: &Options,
    f: impl Future<Output = Result<T, Error>>,
) -> Result<T, Error> {
    tokio::time::timeout(options.handshake_timeout, f)
        .await
        .map_err(|_| Error::Timeout)?
}

/// `SHA-256("psp-mp v1 hellos" || initiator U, T || responder U, T)`.
fn hello_context(initiator: &[[u8; HELLO_LEN]], responder: &[[u8; HELLO_LEN]]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(b"psp-mp v1 hellos");
    for x in initiator.iter().chain(responder) {
        h.update(x);
    }
    h.finalize().into()
}

/// Drives psp-core's handshake until it reports. `first`: the responder's first message (the
/// request, already read from the untrusted path).
async fn run_handshake(
    role: Role,
    conns: &mut [Conn],
    options: &Options,
    first: Option<Vec<u8>>,
) -> Result<SessionKeys, Error> {
    let origin = StdInstant::now();
    let now = || CoreInstant::from_std(origin, StdInstant::now());
    let mut cfg = hs_config(role, options);
    if conns.len() == 1 {
        // Kernel MPTCP mode: one connection, so SMKEX cannot put shares and hash on different
        // paths; SEP runs single-path (safe against passive observers only).
        cfg.smkex = SmkexMode::Off;
        cfg.paths = 1;
    }
    let mut rng = rand_core::OsRng;
    let mut hs = match (role, first) {
        (Role::Initiator, _) => {
            let peer = Peer {
                mac: RESPONDER_MAC,
                addr: RESPONDER_ADDR,
                pinned_static: options.pinned_peer,
            };
            Handshake::initiate(
                now(),
                cfg,
                peer,
                psp_core::handshake::Tai64n::from_system_time(std::time::SystemTime::now()),
                &mut rng,
            )
        }
        (Role::Responder, first) => {
            let peer = Peer {
                mac: INITIATOR_MAC,
                addr: INITIATOR_ADDR,
                pinned_static: options.pinned_peer,
            };
            let msg = first.ok_or(Error::Protocol("no request"))?;
            Handshake::respond(now(), cfg, peer, PathId::FIRST, &msg, &mut rng)
                .map_err(Error::Handshake)?
        }
    };
    let mut buf = [0u8; psp_core::handshake::messages::MAX_MESSAGE_LEN];
    loop {
        while let Some(t) = hs.poll_transmit(now(), &mut buf) {
            let i = if conns.len() == 1 { 0 } else { index(t.path) };
            HandshakeFrame::emit(&buf[..t.len], &mut conns[i].out);
        }
        match hs.poll_event() {
            // What is queued goes with the binding tag.
            Some(Event::Established(keys)) => return Ok(keys),
            Some(Event::Failed(reason)) => {
                // A Reject still goes out.
                for &(i, role) in roles(conns.len()) {
                    let _ = conns[i].flush(Some(role)).await;
                }
                return Err(Error::Handshake(reason));
            }
            None => {}
        }
        // Messages already read are handled first, so a flight goes out whole (a compact
        // responder's Accept waits for the share and nonce that came with the request).
        let mut handled = false;
        for (i, &(slot, role)) in roles(conns.len()).iter().enumerate() {
            if let Some(m) = conns[slot].buffered_message(role)? {
                let path = if i == 0 {
                    PathId::FIRST
                } else {
                    PathId::SECOND
                };
                let _ = hs.handle_message(now(), path, &m);
                handled = true;
                break;
            }
        }
        if handled {
            continue;
        }
        for &(i, role) in roles(conns.len()) {
            conns[i].flush(Some(role)).await?;
        }
        let deadline = hs.poll_timeout().map_or(options.handshake_timeout, |t| {
            core::time::Duration::from(t.saturating_since(now()))
        });
        let sleep = tokio::time::sleep(deadline);
        match conns {
            [cu, ct] => tokio::select! {
                m = cu.read_message(PathRole::Untrusted) => {
                    // An ignored message (duplicate, wrong ids) changes nothing; the handshake
                    // reports real failures as events.
                    let _ = hs.handle_message(now(), PathId::FIRST, &m?);
                }
                m = ct.read_message(PathRole::Trusted) => {
                    let _ = hs.handle_message(now(), PathId::SECOND, &m?);
                }
                () = sleep => hs.handle_timeout(now()),
            },
            [c] => tokio::select! {
                m = c.read_message(PathRole::Trusted) => {
                    let _ = hs.handle_message(now(), PathId::FIRST, &m?);
                }
                () = sleep => hs.handle_timeout(now()),
            },
            _ => return Err(Error::Config("one or two connections")),
        }
    }
}

fn index(p: PathId) -> usize {
    if p == PathId::SECOND {
        TRUSTED
    } else {
        UNTRUSTED
    }
}

fn export(keys: &SessionKeys, label: &[u8], ctx: &[u8; 32], out: &mut [u8]) -> Result<(), Error> {
    let mut info = Vec::with_capacity(label.len() + 32);
    info.extend_from_slice(label);
    info.extend_from_slice(ctx);
    keys.export(&info, out)
        .map_err(|_| Error::Protocol("no keying material"))
}

/// Sends our binding tag on the trusted path, checks the peer's, derives the stream keys.
async fn finish(
    role: Role,
    conns: &mut [Conn],
    options: &Options,
    keys: &SessionKeys,
    ctx: &[u8; 32],
    cipher: Cipher,
    (t0, t_keys): (StdInstant, core::time::Duration),
) -> Result<Established, Error> {
    let (mine, theirs): (&[u8], &[u8]) = match role {
        Role::Initiator => (b"psp-mp v1 bind initiator", b"psp-mp v1 bind responder"),
        Role::Responder => (b"psp-mp v1 bind responder", b"psp-mp v1 bind initiator"),
    };
    let (mut tag, mut expected) = ([0u8; 32], [0u8; 32]);
    export(keys, mine, ctx, &mut tag)?;
    export(keys, theirs, ctx, &mut expected)?;
    let mut frame = [0u8; TAG_FRAME_LEN];
    frame[..2].copy_from_slice(&TAG_MARKER);
    frame[2..].copy_from_slice(&tag);
    conns[trusted_slot(conns.len())]
        .out
        .extend_from_slice(&frame);
    for &(i, role) in roles(conns.len()) {
        conns[i].flush(Some(role)).await?;
    }
    let trusted = &mut conns[trusted_slot(conns.len())];
    timed(options, async {
        trusted
            .fill(TAG_FRAME_LEN)
            .await
            .map_err(|e| Error::io(Some(PathRole::Trusted), e))
    })
    .await?;
    let ok = trusted.buf[..2] == TAG_MARKER
        && trusted.buf[2..TAG_FRAME_LEN]
            .iter()
            .zip(&expected)
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0;
    trusted.buf.drain(..TAG_FRAME_LEN);
    if !ok {
        return Err(Error::BindMismatch);
    }
    let (tx_label, rx_label): (&[u8], &[u8]) = match role {
        Role::Initiator => (b"i2r", b"r2i"),
        Role::Responder => (b"r2i", b"i2r"),
    };
    let make = |dir: &[u8]| -> Result<TxKeys, Error> {
        Ok(match cipher {
            Cipher::None => TxKeys::None,
            Cipher::Scramble => {
                let mut s = [0u8; SEED_LEN];
                export(
                    keys,
                    &[&b"psp-mp v1 scramble "[..], dir].concat(),
                    ctx,
                    &mut s,
                )?;
                let seed = Seed::from_bytes(s);
                s.zeroize();
                TxKeys::Scramble(seed)
            }
            Cipher::Aes128Gcm | Cipher::ChaCha20Poly1305 => {
                let (suite, label): (_, &[u8]) = if cipher == Cipher::Aes128Gcm {
                    (SuiteId::Aes128Gcm, b"psp-mp v1 aead ")
                } else {
                    (SuiteId::ChaCha20Poly1305, b"psp-mp v1 chacha20-poly1305 ")
                };
                let mut k = [0u8; 32];
                let k = &mut k[..suite.key_len()];
                export(keys, &[label, dir].concat(), ctx, k)?;
                let key =
                    SuiteKey::new(suite, k).map_err(|_| Error::Protocol("AEAD key refused"))?;
                k.zeroize();
                TxKeys::Aead(Box::new(key))
            }
        })
    };
    Ok(Established {
        cipher,
        tx: make(tx_label)?,
        rx: make(rx_label)?,
        setup_time: t0.elapsed(),
        handshake_time: t_keys,
        peer_static: keys.peer_static(),
        peer_wants_acks: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: u8 = caps::SCRAMBLE | caps::AES128_GCM | caps::ALLOW_PLAIN;

    /// The negotiation table: the responder serves exactly its own cipher; plain only in the
    /// papers' fallback (scramble asked and required, one side cannot scramble, both allow
    /// plain); the initiator takes exactly what it asked for, or that fallback.
    #[test]
    fn a_side_gets_the_cipher_it_named_or_the_papers_fallback() {
        use Cipher::{Aes128Gcm as Aes, ChaCha20Poly1305 as Chacha, None as Plain, Scramble};
        for &required in Cipher::ALL {
            for &wanted in Cipher::ALL {
                let got = responder_choice(required, ALL, wanted.code(), ALL);
                if wanted == required {
                    assert_eq!(got.ok(), Some(wanted), "{required} {wanted}");
                } else {
                    assert!(
                        matches!(got, Err(Error::CipherRequired { .. })),
                        "{required} {wanted}: {got:?}"
                    );
                }
            }
        }
        let no_scramble = caps::AES128_GCM | caps::ALLOW_PLAIN;
        let no_aes = caps::SCRAMBLE | caps::ALLOW_PLAIN;
        let strict = caps::SCRAMBLE | caps::AES128_GCM;
        // The papers' fallback, and only it.
        assert_eq!(
            responder_choice(Scramble, no_scramble, Scramble.code(), ALL).ok(),
            Some(Plain)
        );
        assert!(responder_choice(Scramble, strict & !caps::SCRAMBLE, 1, ALL).is_err());
        assert!(responder_choice(Aes, ALL, Aes.code(), no_aes).is_err());
        assert_eq!(
            responder_choice(Chacha, ALL, Chacha.code(), no_aes).ok(),
            Some(Chacha)
        );
        assert!(responder_choice(Aes, ALL, 9, ALL).is_err());
        // The initiator.
        assert_eq!(initiator_check(Aes, ALL, Aes.code(), ALL).ok(), Some(Aes));
        assert!(matches!(
            initiator_check(Aes, ALL, Plain.code(), ALL),
            Err(Error::CipherRefused {
                wanted: Aes,
                chosen: Some(Plain)
            })
        ));
        assert!(matches!(
            initiator_check(Aes, ALL, wire::CIPHER_REFUSED, ALL),
            Err(Error::CipherRefused {
                wanted: Aes,
                chosen: None
            })
        ));
        assert_eq!(
            initiator_check(Scramble, ALL, Plain.code(), no_scramble).ok(),
            Some(Plain)
        );
        assert!(initiator_check(Scramble, ALL, Plain.code(), ALL).is_err());
        assert!(initiator_check(Scramble, strict, Plain.code(), no_scramble).is_err());
    }
}
