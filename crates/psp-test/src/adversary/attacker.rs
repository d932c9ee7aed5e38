//! [`Attacker`]: a Dolev-Yao attacker restricted to the paths its [`Caps`] give it.
//!
//! It knows everything public (every host's MAC, address and long-term public key) and every
//! frame it saw or sent. It has its own long-term key and ephemeral secrets, and runs handshakes
//! of its own ("puppets": real psp-core [`Handshake`]s under any host's MAC and address, whose
//! ephemeral secrets it records). Its knowledge of keys is concrete: the [`SessionKeys`] of its
//! puppets, and whatever the **key oracle** ([`Attacker::try_derive`]) computes for an honest
//! host's session from the frames it has: for every transcript it can assemble from them with
//! the session's ids, it completes the Diffie-Hellman with one of its own ephemeral secrets
//! (when the host took one of its shares) and its own long-term key (when the host took its
//! long-term key for the peer's, or none), runs the key schedule and compares the keys. It does
//! not guess: a nonce it never saw, or an honest host's secret, stops it.

use std::collections::BTreeSet;
use std::sync::OnceLock;

use psp_core::handshake::messages::{Body, HandshakeId, Repr};
use psp_core::handshake::schedule::{Ephemeral, Transcript};
use psp_core::handshake::{
    Config, Event, Handshake, PathId, Peer, Role, SessionId, SessionKeys, SmkexMode, StaticKey,
    Tai64n,
};
use psp_core::time::Instant;
use psp_core::{Protocol, Sealer, SealerConfig, SecurityNumber, Seq, SuiteId, SuiteKey};

use super::gateway::HostSpec;
use super::party::{Frame, FrameBody, Mac, SessionView};
use super::world::Caps;
use super::{SimRng, digest};

/// How a puppet handshake is configured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PuppetKind {
    /// Two paths with SMKEX (else single-path SEP: SMKEX off, one path).
    pub two_path: bool,
    /// It announces the attacker's long-term key.
    pub with_static: bool,
    /// The compact flow (with `two_path`).
    pub compact: bool,
}

/// A rewrite of one handshake message in flight (on a path the attacker controls).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// Replace the X25519 share of a Share or ShareReply with one of the attacker's.
    SwapShare,
    /// Clear the two-path (and required) flags of a Request, or the two-path flag of an Accept:
    /// a downgrade to single-path SEP.
    StripTwoPath,
    /// Move a Request's timestamp one hour ahead.
    FutureTimestamp,
    /// Remove the long-term key from a Request or Accept.
    StaticNone,
    /// Put the attacker's long-term key into a Request or Accept.
    StaticEve,
    /// Put the genuine sender's long-term key into a Request or Accept (it is public).
    StaticClaim,
    /// Give the message the handshake ids of the logged frame with this index (a splice across
    /// sessions).
    SpliceIds(usize),
}

/// Keys the attacker holds.
#[derive(Debug)]
pub struct KnownKey {
    /// The session.
    pub id: SessionId,
    /// The honest host it can talk to under them (its peer's MAC is what it forges as source).
    pub holder: Mac,
    /// The host the holder believes it shares them with.
    pub holder_peer: Mac,
    /// The fingerprints of both directions (send, recv of the holder).
    pub fps: ([u8; 20], [u8; 20]),
    source: KeySource,
}

#[derive(Debug)]
enum KeySource {
    /// Derived by the oracle: the key the holder opens under, its suite and key id.
    Derived {
        suite: SuiteId,
        key_id: u32,
        holder_recv: Vec<u8>,
    },
    /// A puppet's session (the puppet's send key is what its honest peer opens under).
    Puppet(usize),
}

struct Puppet {
    hs: Handshake,
    local: Mac,
    peer: Mac,
    keys: Option<SessionKeys>,
    /// Digest of its creation and inputs (for state deduplication).
    hist: u64,
}

/// The attacker (see the module docs).
pub struct Attacker {
    caps: Caps,
    hosts: Vec<HostSpec>,
    log: BTreeSet<Frame>,
    /// The handshake frames honest hosts sent (for a replay flood).
    honest: Vec<Frame>,
    /// (public share, secret) of every ephemeral it owns.
    ephemerals: Vec<([u8; 32], [u8; 32])>,
    static_secret: [u8; 32],
    static_public: [u8; 32],
    puppets: Vec<Puppet>,
    known: Vec<KnownKey>,
    /// Frames for a puppet are absorbed (not delivered to the honest host they name).
    absorb: bool,
    forged: u32,
    wall_base: u64,
    seed: u64,
    buf: Vec<u8>,
}

/// The attacker's swap ephemeral.
const EVE_EPHEMERAL: [u8; 32] = [0xe5; 32];
const EVE_STATIC: [u8; 32] = [0xe7; 32];

impl Attacker {
    /// An attacker with `caps` against `hosts` (public knowledge).
    pub fn new(caps: Caps, hosts: Vec<HostSpec>, wall_base: u64, seed: u64) -> Self {
        static PUBLIC: OnceLock<([u8; 32], [u8; 32])> = OnceLock::new();
        let (eph, static_public) = *PUBLIC.get_or_init(|| {
            (
                Ephemeral::from_bytes(EVE_EPHEMERAL).public_share(),
                StaticKey::from_bytes(EVE_STATIC).public_key(),
            )
        });
        Self {
            caps,
            hosts,
            log: BTreeSet::new(),
            honest: Vec::new(),
            ephemerals: vec![(eph, EVE_EPHEMERAL)],
            static_secret: EVE_STATIC,
            static_public,
            puppets: Vec::new(),
            known: Vec::new(),
            absorb: false,
            forged: 0,
            wall_base,
            seed,
            buf: vec![0; 256],
        }
    }

    /// Its capabilities.
    pub fn caps(&self) -> Caps {
        self.caps
    }

    /// The frames it knows, in a fixed order.
    pub fn log(&self) -> impl Iterator<Item = &Frame> {
        self.log.iter()
    }

    /// How many frames it knows.
    pub fn log_len(&self) -> usize {
        self.log.len()
    }

    /// The `i`-th frame it knows.
    pub fn logged(&self, i: usize) -> Option<&Frame> {
        self.log.iter().nth(i)
    }

    /// The keys it holds.
    pub fn known(&self) -> &[KnownKey] {
        &self.known
    }

    /// How many puppets it runs.
    pub fn puppets(&self) -> usize {
        self.puppets.len()
    }

    /// Whether frames for puppets are absorbed.
    pub fn absorbing(&self) -> bool {
        self.absorb
    }

    /// From now on, frames for a puppet are not delivered to the host they name (on paths it
    /// controls): a man in the middle.
    pub fn set_absorb(&mut self) {
        self.absorb = true;
    }

    /// Whether it knows a key with fingerprint `fp`.
    pub fn knows_fp(&self, fp: &[u8; 20]) -> bool {
        self.known.iter().any(|k| k.fps.0 == *fp || k.fps.1 == *fp)
    }

    /// Whether it knows the keys of session `id`.
    pub fn knows_session(&self, id: SessionId) -> bool {
        self.known.iter().any(|k| k.id == id)
    }

    /// A frame it sees (`honest`: sent by an honest host) or sends: logged, fed to the puppets
    /// it is for. Returns whether it is absorbed.
    pub fn observe(&mut self, now: Instant, f: &Frame, honest: bool) -> bool {
        let FrameBody::Handshake(bytes) = &f.body else {
            self.log.insert(f.clone());
            return false;
        };
        if self.log.insert(f.clone()) && honest {
            self.honest.push(f.clone());
        }
        let Ok(repr) = Repr::parse_bytes(bytes) else {
            return false;
        };
        let mut matched = false;
        for p in &mut self.puppets {
            if f.dst == p.local
                && f.src == p.peer
                && repr.initiator_id == p.hs.session_id().initiator
            {
                let _ = p.hs.handle_message(now, f.path, bytes);
                p.hist = digest(&(p.hist, now.total_micros(), f));
                matched = true;
            }
        }
        matched && self.absorb && self.caps.control[usize::from(f.path.0)]
    }

    /// The `n`-th handshake frame an honest host sent (cycling), for a replay flood.
    pub fn honest_frame(&self, n: usize) -> Option<&Frame> {
        (!self.honest.is_empty()).then(|| &self.honest[n % self.honest.len()])
    }

    /// Drains the puppets: the frames they send (logged; the caller injects those on paths the
    /// attacker can inject on) and their keys.
    pub fn poll_puppets(&mut self, now: Instant, out: &mut Vec<Frame>) {
        for (i, p) in self.puppets.iter_mut().enumerate() {
            loop {
                if let Some(ev) = p.hs.poll_event() {
                    if let Event::Established(keys) = ev {
                        let fp = |k: Result<SuiteKey, _>| k.map_or([0; 20], |k| *k.bivn());
                        // The honest peer holds the mirror: it sends what the puppet receives.
                        self.known.push(KnownKey {
                            id: keys.session_id(),
                            holder: p.peer,
                            holder_peer: p.local,
                            fps: (fp(keys.recv_key()), fp(keys.send_key())),
                            source: KeySource::Puppet(i),
                        });
                        p.keys = Some(keys);
                    }
                    continue;
                }
                let Some(t) = p.hs.poll_transmit(now, &mut self.buf) else {
                    break;
                };
                let f = Frame {
                    src: p.local,
                    dst: p.peer,
                    path: t.path,
                    body: FrameBody::Handshake(self.buf[..t.len].to_vec()),
                };
                self.log.insert(f.clone());
                out.push(f);
            }
        }
    }

    /// Runs the puppets' timers.
    pub fn handle_timeout(&mut self, now: Instant) {
        for p in &mut self.puppets {
            if p.hs.poll_timeout().is_some_and(|t| t <= now) {
                p.hs.handle_timeout(now);
                p.hist = digest(&(p.hist, now.total_micros(), "timeout"));
            }
        }
    }

    /// The puppets' next timer.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.puppets
            .iter()
            .filter_map(|p| p.hs.poll_timeout())
            .min()
    }

    /// Stops: no more puppets (the keys they got stay known).
    pub fn stop(&mut self) {
        self.puppets.clear();
        self.absorb = false;
    }

    fn puppet_config(&self, host: &HostSpec, kind: PuppetKind) -> Config {
        let mut c = Config::new(host.mac, host.addr, 24);
        if kind.two_path {
            c.paths = 2;
            c.smkex = if kind.compact {
                SmkexMode::Required
            } else {
                SmkexMode::Preferred
            };
            c.compact = kind.compact;
        } else {
            c.paths = 1;
            c.smkex = SmkexMode::Off;
        }
        c.static_key = kind
            .with_static
            .then(|| StaticKey::from_bytes(self.static_secret));
        c
    }

    fn host(&self, mac: Mac) -> Option<&HostSpec> {
        self.hosts.iter().find(|h| h.mac == mac)
    }

    /// A timestamp for a Request in `as_mac`'s name: newer than every one it saw from that
    /// host, or an hour ahead with `future`.
    fn timestamp(&self, now: Instant, as_mac: Mac, future: bool) -> Tai64n {
        let us = now.total_micros();
        let wall = Tai64n::from_unix(
            self.wall_base + us / 1_000_000,
            (us % 1_000_000) as u32 * 1000,
        );
        let seen = self
            .log
            .iter()
            .filter(|f| f.src == as_mac)
            .filter_map(|f| match &f.body {
                FrameBody::Handshake(b) => match Repr::parse_bytes(b).ok()?.body {
                    Body::Request(r) => Some(r.timestamp),
                    _ => None,
                },
                FrameBody::Session(_) => None,
            })
            .max();
        let t = seen.map_or(wall, |s| wall.max(s.successor()));
        if future { t.plus_secs(3600) } else { t }
    }

    /// Starts a puppet initiator under `as_mac`'s MAC and address toward `to`.
    pub fn puppet_initiate(
        &mut self,
        now: Instant,
        as_mac: Mac,
        to: Mac,
        kind: PuppetKind,
        future: bool,
    ) {
        let (Some(me), Some(peer)) = (self.host(as_mac).cloned(), self.host(to).cloned()) else {
            return;
        };
        let cfg = self.puppet_config(&me, kind);
        let ts = self.timestamp(now, as_mac, future);
        let seed = digest(&(self.seed, self.puppets.len(), "initiate"));
        let mut rng = SimRng::recording(seed);
        let hs = Handshake::initiate(
            now,
            cfg,
            Peer {
                mac: peer.mac,
                addr: peer.addr,
                pinned_static: None,
            },
            ts,
            &mut rng,
        );
        self.add_puppet(
            hs,
            &rng,
            as_mac,
            to,
            digest(&(seed, now.total_micros(), kind, future)),
        );
    }

    /// Answers the logged Request `i` with a puppet under its destination's MAC and address.
    pub fn puppet_respond(&mut self, now: Instant, i: usize, kind: PuppetKind) {
        let Some(f) = self.logged(i).cloned() else {
            return;
        };
        let (FrameBody::Handshake(bytes), Some(me)) = (&f.body, self.host(f.dst).cloned()) else {
            return;
        };
        let Ok(Repr {
            body: Body::Request(req),
            ..
        }) = Repr::parse_bytes(bytes)
        else {
            return;
        };
        let cfg = self.puppet_config(&me, kind);
        let seed = digest(&(self.seed, self.puppets.len(), "respond"));
        let mut rng = SimRng::recording(seed);
        let peer = Peer {
            mac: f.src,
            addr: req.initiator_addr,
            pinned_static: None,
        };
        let Ok(hs) = Handshake::respond(now, cfg, peer, f.path, bytes, &mut rng) else {
            return;
        };
        self.add_puppet(
            hs,
            &rng,
            f.dst,
            f.src,
            digest(&(seed, now.total_micros(), kind, &f)),
        );
    }

    fn add_puppet(&mut self, hs: Handshake, rng: &SimRng, local: Mac, peer: Mac, hist: u64) {
        if let Some(secret) = rng.first_key() {
            let public = Ephemeral::from_bytes(secret).public_share();
            self.ephemerals.push((public, secret));
        }
        self.puppets.push(Puppet {
            hs,
            local,
            peer,
            keys: None,
            hist,
        });
    }

    /// Rewrites a handshake frame; `None` if `op` does not apply to it.
    pub fn rewrite(&self, f: &Frame, op: Op) -> Option<Frame> {
        let FrameBody::Handshake(bytes) = &f.body else {
            return None;
        };
        let mut r = Repr::parse_bytes(bytes).ok()?;
        let sender_static = self.host(f.src).and_then(HostSpec::static_public);
        match (&mut r.body, op) {
            (Body::Share { share, .. } | Body::ShareReply { share, .. }, Op::SwapShare) => {
                if *share == self.ephemerals[0].0 {
                    return None;
                }
                *share = self.ephemerals[0].0;
            }
            (Body::Request(q), Op::StripTwoPath) if q.flags.two_path => {
                q.flags.two_path = false;
                q.flags.smkex_required = false;
            }
            (Body::Accept(a), Op::StripTwoPath) if a.two_path => a.two_path = false,
            (Body::Request(q), Op::FutureTimestamp) => q.timestamp = q.timestamp.plus_secs(3600),
            (Body::Request(q), Op::StaticNone) if q.static_key.is_some() => q.static_key = None,
            (Body::Accept(a), Op::StaticNone) if a.static_key.is_some() => a.static_key = None,
            (Body::Request(q), Op::StaticEve) => q.static_key = Some(self.static_public),
            (Body::Accept(a), Op::StaticEve) => a.static_key = Some(self.static_public),
            (Body::Request(q), Op::StaticClaim) if sender_static.is_some() => {
                q.static_key = sender_static;
            }
            (Body::Accept(a), Op::StaticClaim) if sender_static.is_some() => {
                a.static_key = sender_static;
            }
            (_, Op::SpliceIds(j)) => {
                let FrameBody::Handshake(other) = &self.logged(j)?.body else {
                    return None;
                };
                let o = Repr::parse_bytes(other).ok()?;
                if (o.initiator_id, o.responder_id) == (r.initiator_id, r.responder_id) {
                    return None;
                }
                r.initiator_id = o.initiator_id;
                r.responder_id = o.responder_id;
            }
            _ => return None,
        }
        let mut buf = [0u8; 256];
        let n = r.emit(&mut buf);
        let out = Frame {
            body: FrameBody::Handshake(buf[..n].to_vec()),
            ..f.clone()
        };
        (out != *f).then_some(out)
    }

    /// A frame to `known[k]`'s holder on `path`, sealed under the keys it opens with, in its
    /// peer's name.
    pub fn forge_data(&mut self, now: Instant, k: usize, path: PathId) -> Option<Frame> {
        let key = self.known.get(k)?;
        self.forged += 1;
        let (suite_key, key_id) = match &key.source {
            KeySource::Derived {
                suite,
                key_id,
                holder_recv,
            } => (SuiteKey::new(*suite, holder_recv).ok()?, *key_id),
            KeySource::Puppet(i) => {
                let keys = self.puppets.get(*i)?.keys.as_ref()?;
                (keys.send_key().ok()?, keys.key_id().get())
            }
        };
        let cfg = SealerConfig::new().with_security_number(SecurityNumber::new(key_id).ok());
        // Far above what the holder's peer has sent, below the rekey threshold.
        let mut sealer = Sealer::new(suite_key, Seq(1 << 20 | self.forged), cfg).ok()?;
        let mut out = [0u8; 256];
        let f = sealer
            .seal_sub(
                now,
                key.holder,
                key.holder_peer,
                Protocol::Control,
                b"forged",
                &mut out,
            )
            .ok()?;
        Some(Frame {
            src: key.holder_peer,
            dst: key.holder,
            path,
            body: FrameBody::Session(f.to_vec()),
        })
    }

    /// The key oracle: whether the attacker can compute the keys of `view` (held by `holder`)
    /// from what it knows; if so they become known.
    pub fn try_derive(&mut self, holder: Mac, view: &SessionView) -> bool {
        if self.knows_fp(&view.send) || self.knows_fp(&view.recv) {
            return true;
        }
        let sid = view.id;
        let mut cands: [Vec<Repr>; 6] = Default::default();
        for f in &self.log {
            let FrameBody::Handshake(b) = &f.body else {
                continue;
            };
            let Ok(r) = Repr::parse_bytes(b) else {
                continue;
            };
            if r.initiator_id != sid.initiator {
                continue;
            }
            let zero = r.responder_id == HandshakeId::default();
            let ours = r.responder_id == sid.responder;
            let slot = match r.body {
                Body::Request(_) if zero => 0,
                Body::Accept(_) if ours => 1,
                Body::Share { .. } if ours || zero => 2,
                Body::Nonce(_) if ours || zero => 3,
                Body::ShareReply { .. } if ours => 4,
                Body::NonceReply { .. } if ours => 5,
                _ => continue,
            };
            let mut r = r;
            if let Body::NonceReply { hash, .. } = &mut r.body {
                *hash = [0; 32];
            }
            if !cands[slot].contains(&r) {
                cands[slot].push(r);
            }
        }
        let (own_slot, recv_slot) = match view.role {
            Role::Initiator => (2, 4),
            Role::Responder => (4, 2),
        };
        let share_of = |r: &Repr| match r.body {
            Body::Share { share, .. } | Body::ShareReply { share, .. } => Some(share),
            _ => None,
        };
        if cands.iter().any(Vec::is_empty)
            || !cands[recv_slot]
                .iter()
                .filter_map(share_of)
                .any(|s| self.ephemerals.iter().any(|(p, _)| *p == s))
        {
            return false;
        }
        // The long-term key the holder took for its peer's must be the attacker's, or none.
        let own_static = match view.peer_static {
            None => None,
            Some(k) if k == self.static_public => Some(StaticKey::from_bytes(self.static_secret)),
            Some(_) => return false,
        };
        let mirror = match view.role {
            Role::Initiator => Role::Responder,
            Role::Responder => Role::Initiator,
        };
        let p2 = if view.two_path {
            PathId::SECOND
        } else {
            PathId::FIRST
        };
        let paths = [
            PathId::FIRST,
            PathId::FIRST,
            PathId::FIRST,
            p2,
            PathId::FIRST,
            p2,
        ];
        let total: usize = cands.iter().map(Vec::len).product();
        for n in 0..total.min(4096) {
            let mut ix = [0usize; 6];
            let mut rest = n;
            for (s, c) in cands.iter().enumerate() {
                ix[s] = rest % c.len();
                rest /= c.len();
            }
            let pick = |s: usize| cands[s][ix[s]];
            let (Some(recv_share), Some(own_share)) =
                (share_of(&pick(recv_slot)), share_of(&pick(own_slot)))
            else {
                continue;
            };
            let Some((_, secret)) = self.ephemerals.iter().find(|(p, _)| *p == recv_share) else {
                continue;
            };
            let Ok(shared) = Ephemeral::from_bytes(*secret).complete(
                mirror,
                &own_share,
                own_static.as_ref(),
                view.own_static.as_ref(),
            ) else {
                continue;
            };
            let mut parts = [(pick(0), PathId::FIRST); 6];
            for (s, part) in parts.iter_mut().enumerate() {
                *part = (pick(s), paths[s]);
            }
            let th = Transcript { parts }.hash();
            let secrets = shared.derive(&th, view.suite.key_len());
            let fp = |k: &[u8]| SuiteKey::new(view.suite, k).map_or([0; 20], |k| *k.bivn());
            let (i2r, r2i) = (fp(secrets.i2r()), fp(secrets.r2i()));
            let (send, recv, holder_recv) = match view.role {
                Role::Initiator => (i2r, r2i, secrets.r2i()),
                Role::Responder => (r2i, i2r, secrets.i2r()),
            };
            if send == view.send && recv == view.recv {
                self.known.push(KnownKey {
                    id: sid,
                    holder,
                    holder_peer: view.peer,
                    fps: (send, recv),
                    source: KeySource::Derived {
                        suite: view.suite,
                        key_id: secrets.key_id(),
                        holder_recv: holder_recv.to_vec(),
                    },
                });
                return true;
            }
        }
        false
    }

    /// A digest of its state (log, puppets, keys, mode).
    pub fn digest(&self) -> u64 {
        let puppets: Vec<u64> = self.puppets.iter().map(|p| p.hist).collect();
        let known: Vec<_> = self.known.iter().map(|k| k.fps).collect();
        digest(&(&self.log, puppets, known, self.absorb, self.forged))
    }
}
