//! From the configuration to what the host runs with ([`psp_core::host`]): its settings, the
//! group key, the peers (keying, paths, normalization), and the UDP endpoints the driver sends
//! to. No I/O: the key files were read when the configuration was loaded; first-use pins come in
//! as an argument.

use core::net::SocketAddr;

use psp_core::handshake::{self, Identity, KeyRingConfig, Tai64n};
use psp_core::host::{
    self, Host, KeySpec, Keying, NormSpec, PeerSpec, Pin, ReplayFloor, Resume, SessionSettings,
    SpecError, session_overhead,
};
use psp_core::normalize;
use psp_core::time::Duration;

use crate::config::MAX_NORMALIZED_FRAME;
use crate::config::{Config, NormalizeConfig, PeerSecurity, UplinkConfig};

/// Bytes of the delivery queue of each normalized stream (inner frames waiting for the TAP).
const RX_QUEUE_BYTES: usize = 32 * 1024;

/// Where a peer's frames go over UDP: its endpoint on each path (`None` on a raw uplink).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Endpoints {
    /// Path 1.
    pub(crate) path1: Option<SocketAddr>,
    /// Path 2.
    pub(crate) path2: Option<SocketAddr>,
}

/// The group key's settings as the host takes them.
pub(crate) fn key_spec(s: &PeerSecurity, max_frame: usize) -> KeySpec {
    KeySpec {
        suite: s.suite,
        key: zeroize::Zeroizing::new(s.key.bytes.to_vec()),
        sealer: s.sealer_config(),
        opener: s.opener_config(max_frame),
    }
}

/// The host's settings for `config`: `mac` is the TAP's, `max_frame` the uplink's largest
/// frame, `wall_origin` the wall clock at the driver's clock origin.
pub(crate) fn host_config(
    config: &Config,
    mac: [u8; 6],
    max_frame: usize,
    wall_origin: Tai64n,
) -> host::HostConfig {
    let session = config.session.as_ref().map(|s| {
        let (addr, prefix) = s.address;
        let mut hs = handshake::Config::new(mac, addr, prefix);
        hs.suites = handshake::messages::SuiteList::from_suites(&s.suites);
        hs.smkex = s.smkex;
        hs.kem = s.kem;
        hs.lifetime = s.lifetime;
        hs.min_lifetime = Duration::from_secs(60).min(s.lifetime);
        hs.static_key = s
            .identity
            .as_ref()
            .and_then(|f| Identity::from_seed(*f.seed).ok())
            .map(|id| id.static_key());
        let mut ring = KeyRingConfig {
            grace: s.grace,
            rekey_seq: s.rekey_seq,
            // A quarter of the lifetime, at most a minute: the rekey starts well before expiry.
            rekey_margin: Duration::from_micros((s.lifetime.total_micros() / 4).min(60_000_000)),
            ..KeyRingConfig::default()
        };
        ring.opener = ring
            .opener
            .with_replay_window(config.group.replay_window)
            .with_max_frame_len(max_frame);
        SessionSettings {
            handshake: hs,
            address: s.address,
            rekey_after: s.rekey_after,
            ring,
            queue: s.queue,
            keepalive: SessionSettings::KEEPALIVE,
            dead_after: SessionSettings::DEAD_AFTER,
            paths: s.paths,
            probe_every: s.probe_every,
            down_after: s.down_after,
        }
    });
    host::HostConfig {
        mac,
        subnets: config
            .interface
            .addresses
            .iter()
            .filter_map(|a| crate::config::parse_prefix(a))
            .collect(),
        paths: 1 + u8::from(config.uplink2.is_some()),
        max_frame,
        session,
        wall_origin,
        group_copies: config.session.as_ref().is_some_and(|s| s.group_copies),
        pki: config.pki.as_ref().map(|p| host::Pki {
            ca: p.ca,
            certificate: p.certificate,
            revoked: p
                .revoked
                .clone()
                .unwrap_or_else(psp_core::pki::RevocationList::empty),
            skew_secs: p.skew_secs,
            max_certified: p.max_peers,
            rotate_every: p.rotate_every,
        }),
    }
}

/// The signing key of this host's identity, if it has one (it signs every group frame).
pub(crate) fn signer(config: &Config) -> Option<psp_core::crypto::SigningKey> {
    config
        .session
        .as_ref()
        .and_then(|s| s.identity.as_ref())
        .and_then(|f| Identity::from_seed(*f.seed).ok())
        .and_then(|id| id.signing_key().ok())
}

/// The peers as the host takes them, and their endpoints. `pinned(name)` is a first-use pin
/// stored before (`known_peers`), for peers configured `identity = "tofu"`.
pub(crate) fn peers(
    config: &Config,
    max_frame: usize,
    udp: bool,
    pinned: impl Fn(&str) -> Option<[u8; 32]>,
) -> (Vec<PeerSpec>, Vec<Endpoints>) {
    let udp2 = matches!(config.uplink2, Some(UplinkConfig::Udp { .. }));
    let two = config.uplink2.is_some();
    config
        .peers
        .iter()
        .map(|p| {
            let keying = if p.session {
                let pin = match (p.identity, p.tofu) {
                    (Some(k), _) => Pin::Configured(k),
                    (None, true) => Pin::Tofu(pinned(&p.name)),
                    (None, false) => Pin::None,
                };
                Keying::Session {
                    pin,
                    address: p.address,
                }
            } else if *p.security.key.bytes == *config.group.key.bytes {
                Keying::Group
            } else {
                Keying::Static(key_spec(&p.security, max_frame))
            };
            let paths = if two && (!udp2 || p.endpoint2.is_some()) {
                2
            } else {
                1
            };
            let spec = PeerSpec {
                name: p.name.clone(),
                macs: p.macs.clone(),
                keying,
                paths,
                normalize: p
                    .normalize
                    .map(|n| norm_spec(&n, max_frame, udp.then_some(p.endpoint).flatten())),
            };
            let ep = Endpoints {
                path1: p.endpoint,
                path2: p.endpoint2,
            };
            (spec, ep)
        })
        .unzip()
}

/// A normalized stream's settings: every outer frame `frame_size` bytes (default: the uplink's
/// largest), what a UDP uplink adds on the wire counted in the rates.
fn norm_spec(n: &NormalizeConfig, max_frame: usize, endpoint: Option<SocketAddr>) -> NormSpec {
    let frame_size = n.frame_size.unwrap_or(max_frame).min(max_frame);
    let wire_extra = match endpoint {
        None => 0,
        Some(SocketAddr::V6(_)) => 40 + 8 + crate::io::ETHERNET_HEADER_LEN,
        Some(SocketAddr::V4(_)) => 20 + 8 + crate::io::ETHERNET_HEADER_LEN,
    };
    let mut c = normalize::NormConfig::default();
    c.packing = n.packing;
    c.algorithm = n.algorithm;
    c.s_goal = n.s_goal;
    c.s_min = n.s_min;
    c.s_step = n.s_step;
    c.o_min = Duration::from_millis(u64::from(n.o_min_ms));
    c.w = n.weight();
    c.tx_queue_bytes = n.queue_bytes;
    c.aqm = n.aqm;
    c.max_inner_len = MAX_NORMALIZED_FRAME;
    c.rx_queue_bytes = RX_QUEUE_BYTES;
    NormSpec {
        cfg: c,
        frame_size,
        wire_extra,
        lead: Duration::from_micros(u64::from(n.lead_us)),
    }
}

/// The largest number of bytes sealing adds to an inner frame under `config`: the group key's
/// (with the 64-byte signature when this host has an identity), every `key_file` key's, and
/// every session suite's (their frames carry a key id); with group copies (`group_frames`), a
/// large broadcast costs a unicast frame's overhead plus 8 instead of the signed group key's
/// ([`psp_core::host::tap_overhead`]). The TAP MTU leaves room for it.
pub(crate) fn max_overhead(config: &Config, max_frame: usize) -> usize {
    let sealer_overhead = |s: &PeerSecurity, signed: bool| sealer_overhead(config, s, signed);
    let group = sealer_overhead(&config.group, true);
    let statics = config
        .peers
        .iter()
        .filter(|p| !p.session)
        .map(|p| sealer_overhead(&p.security, false))
        .max()
        .unwrap_or(0);
    let sessions = config.session.as_ref().map_or(0, |s| {
        let mut hs = handshake::Config::new([0; 6], s.address.0, s.address.1);
        hs.suites = handshake::messages::SuiteList::from_suites(&s.suites);
        session_overhead(&hs)
    });
    let _ = max_frame;
    let copies = config.session.as_ref().is_some_and(|s| s.group_copies);
    host::tap_overhead(group, statics.max(sessions), copies)
}

/// The overhead of a sealer with `s`'s suite and settings (signed with the host's identity when
/// `signed` and it has one); 0 for a key the sealer refuses.
fn sealer_overhead(config: &Config, s: &PeerSecurity, signed: bool) -> usize {
    use psp_core::crypto::SuiteKey;
    use psp_core::protect::Sealer;
    let Ok(key) = SuiteKey::new(s.suite, &s.key.bytes) else {
        return 0;
    };
    let Ok(sealer) = Sealer::new(key, psp_core::Seq(0), s.sealer_config()) else {
        return 0;
    };
    match signer(config).filter(|_| signed) {
        Some(k) => sealer.with_signer(k).overhead(),
        None => sealer.overhead(),
    }
}

/// With `[session] kem` on: the length of the frame that carries the KemShare (the longest
/// handshake message, sealed and signed under the group key on path 1), which the uplink must
/// carry unfragmented. `None` with the KEM off.
pub(crate) fn kem_frame_len(config: &Config) -> Option<usize> {
    let s = config.session.as_ref()?;
    (s.kem != handshake::KemMode::Off).then(|| {
        psp_core::wire::ETHERNET_HEADER_LEN
            + sealer_overhead(config, &config.group, true)
            + handshake::messages::MAX_MESSAGE_LEN
    })
}

/// The host of `config` (its TAP's MAC `mac`, uplinks carrying `max_frame`, `udp` endpoints),
/// started at `now` with the Request clock's floor from `state` and first-use pins from `tofu`;
/// with the peers' names and endpoints, in the host's order.
///
/// # Errors
/// A key or setting the host refuses.
pub(crate) fn host(
    config: &Config,
    (mac, max_frame, udp): ([u8; 6], usize, bool),
    (now, wall_origin): (psp_core::time::Instant, Tai64n),
    state: &crate::state::StateDir,
    tofu: Option<&crate::tofu::Tofu>,
) -> Result<(Host, Vec<String>, Vec<Endpoints>), SpecError> {
    let (specs, endpoints) = peers(config, max_frame, udp, |n| tofu.and_then(|t| t.get(n)));
    let names = specs.iter().map(|s| s.name.clone()).collect();
    let resume = Resume {
        clock: clock_floor(state),
        floors: replay_floors(state),
    };
    let host = Host::new(
        now,
        host_config(config, mac, max_frame, wall_origin),
        key_spec(&config.group, max_frame),
        signer(config),
        specs,
        resume,
    )?;
    Ok((host, names, endpoints))
}

/// The Request clock's floor the last run saved in `request-clock` (`None`: a first start).
///
/// A file that cannot be used (unreadable, others may write it, not a TAI64N label in hex) is
/// named in a warning and the host starts without a floor, rather than refusing to start. The
/// floor only keeps this host's Requests newer than the last run's when the wall clock went
/// back (docs/GATEWAY.md, "State directory"); without it, the worst case is that peers that
/// took a later Request from this host refuse the next ones as stale until the wall clock
/// passes it. That costs sessions for a while, never a key or a (key, nonce) pair (session
/// keys are new at every handshake), so a bad file is not worth an outage. The host asks for a
/// new floor at its first Request, which replaces the file. (A bad `seq-*` file is another
/// matter: there a lost mark could repeat sequence numbers, so its key stops instead.)
fn replay_floors(state: &crate::state::StateDir) -> Vec<ReplayFloor> {
    const FILE: &str = "replay-floors";
    let problem = match state.read(FILE) {
        Ok(None) => return Vec::new(),
        Ok(Some(text)) => match crate::state::parse_floors(&text) {
            Ok(f) => return f,
            Err(p) => format!("{}: {p}", state.path(FILE).display()),
        },
        Err(e) => e.to_string(),
    };
    tracing::warn!(
        "replay-floors: {problem}; starting without the last run's replay floors: a frame under \
         the group key or a key_file key captured before this start could open once more; the \
         file is rewritten within ten seconds"
    );
    Vec::new()
}

/// The Request clock's floor from the state directory (`request-clock`), if any; a file that
/// cannot be used is named in a warning and the host starts without it.
fn clock_floor(state: &crate::state::StateDir) -> Option<Tai64n> {
    const FILE: &str = "request-clock";
    let problem = match state.read(FILE) {
        Ok(None) => return None,
        Ok(Some(text)) => {
            let text = text.trim();
            match hex::decode(text)
                .ok()
                .and_then(|b| <[u8; 12]>::try_from(b).ok())
            {
                Some(label) => return Some(Tai64n(label)),
                None => format!(
                    "{}: {} bytes, not 24 hex digits (a TAI64N label)",
                    state.path(FILE).display(),
                    text.len()
                ),
            }
        }
        // The error names the file.
        Err(e) => e.to_string(),
    };
    tracing::warn!(
        "request-clock: {problem}; starting without the last run's floor: Requests carry the \
         wall clock alone, so if it went back, peers may refuse them as stale until it passes \
         the last one they took; the file is rewritten at the first Request"
    );
    None
}
