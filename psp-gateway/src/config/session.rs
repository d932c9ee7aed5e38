//! `[session]`: per-session keys from the Session Establishment Protocol (SEP) with SMKEX, for
//! every peer without its own `key_file` (docs/SESSIONS.md). Absent: the legacy static keys.

use core::net::IpAddr;
use std::path::{Path, PathBuf};

use psp_core::crypto::SuiteId;
use psp_core::handshake::{KemMode, SmkexMode};
use psp_core::host::PathMode;
use psp_core::time::Duration;
use serde::Deserialize;
use zeroize::Zeroizing;

use super::ConfigError;

/// The raw `[session]` table.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSession {
    lifetime_s: Option<i64>,
    rekey_after_s: Option<i64>,
    rekey_seq: Option<i64>,
    grace_s: Option<i64>,
    smkex: Option<String>,
    kem: Option<String>,
    suites: Option<Vec<String>>,
    identity_file: Option<String>,
    known_peers: Option<String>,
    address: Option<String>,
    queue: Option<i64>,
    group_frames: Option<String>,
    paths: Option<String>,
    probe_ms: Option<i64>,
    path_down_ms: Option<i64>,
}

/// The host's identity key file (`identity_file`), as `psp-gateway keygen --identity` writes it.
#[derive(Clone, PartialEq, Eq)]
pub struct IdentityFile {
    /// The file.
    pub path: PathBuf,
    /// The Ed25519 seed.
    pub seed: Zeroizing<[u8; 32]>,
    /// Its public key: what the peers pin (`identity = "..."`), `keygen --identity` and
    /// `pubkey` print.
    pub public_key: [u8; 32],
}

impl core::fmt::Debug for IdentityFile {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "IdentityFile({})", self.path.display())
    }
}

/// `[session]`, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionConfig {
    /// Session lifetime offered and accepted (`lifetime_s`, 60..=86400, default 3600).
    pub lifetime: Duration,
    /// Start a new handshake this long after a session was established (`rekey_after_s`,
    /// 1..=86400; default: 120 s, as WireGuard, or sooner near expiry).
    pub rekey_after: Duration,
    /// Start a new handshake once a session's sequence number reaches this (`rekey_seq`,
    /// 16..=2^32-1, default 2^31).
    pub rekey_seq: u32,
    /// How long the previous session still opens frames after a switch (`grace_s`, default 30).
    pub grace: Duration,
    /// `smkex = "require" | "prefer" | "off"` (default `prefer`).
    pub smkex: SmkexMode,
    /// `kem = "require" | "prefer" | "off"` (default `off`): ML-KEM-768 beside X25519 in every
    /// handshake (docs/SESSIONS.md, "Hybrid post-quantum sessions"), offered and refused as
    /// `smkex` is.
    pub kem: KemMode,
    /// Suites offered in order, and allowed as responder (`suites`, default
    /// `["aes128-gcm", "chacha20-poly1305"]`).
    pub suites: Vec<SuiteId>,
    /// This host's identity (`identity_file`): signs group frames and enters the key schedule.
    pub identity: Option<IdentityFile>,
    /// The trust-on-first-use state file (`known_peers`): peers without a pinned `identity`
    /// are pinned here on first contact; a changed key is refused.
    pub known_peers: Option<PathBuf>,
    /// This host's address and prefix for SEP's same-segment check (`address`, default the
    /// first of `interface.addresses`).
    pub address: (IpAddr, u8),
    /// Frames held per peer while its session is set up (`queue`, 1..=1024, default 64).
    pub queue: usize,
    /// `group_frames = "copies" | "signed"` (default `copies`): whether a broadcast too large
    /// to go signed under the group key goes to each peer as a group copy under its own key
    /// (the TAP MTU then leaves room for unicast frames plus 8 bytes), or the TAP MTU leaves
    /// room for a full-size signed group frame (the thesis' way: 64 bytes less for all traffic
    /// with an identity).
    pub group_copies: bool,
    /// `paths = "failover" | "both" | "thesis"` (default `failover`): with two uplinks, data
    /// on path 1 and on path 2 while path 1 is down; on both in turn; or on path 1 only, path 2
    /// carrying SMKEX's messages alone (docs/SESSIONS.md, "Two paths").
    pub paths: PathMode,
    /// `probe_ms` (5..=10000, default 25): a path that carried nothing from this host for
    /// this long gets a probe.
    pub probe_every: Duration,
    /// `path_down_ms` (20..=60000, default 100, at least twice `probe_ms`): a path on which
    /// nothing of the peer opened for this long is down.
    pub down_after: Duration,
}

fn err(file: &Path, key: &str, problem: impl core::fmt::Display) -> ConfigError {
    ConfigError::new(file, format!("session.{key}"), problem.to_string())
}

fn range(
    file: &Path,
    key: &str,
    v: Option<i64>,
    lo: i64,
    hi: i64,
    default: i64,
) -> Result<i64, ConfigError> {
    match v {
        None => Ok(default),
        Some(v) if (lo..=hi).contains(&v) => Ok(v),
        Some(v) => Err(err(file, key, format_args!("{v} is not in {lo}..={hi}"))),
    }
}

/// Parses an `ADDRESS/PREFIX` string.
pub(crate) fn parse_prefix(s: &str) -> Option<(IpAddr, u8)> {
    let (a, p) = s.split_once('/')?;
    let a: IpAddr = a.parse().ok()?;
    let p: u8 = p.parse().ok()?;
    (p <= if a.is_ipv4() { 32 } else { 128 }).then_some((a, p))
}

/// Validates `[session]`; `resolve` makes paths relative to the config file, `addresses` are
/// `interface.addresses`.
pub(super) fn build(
    file: &Path,
    raw: RawSession,
    resolve: impl Fn(&str) -> PathBuf,
    addresses: &[String],
) -> Result<SessionConfig, ConfigError> {
    let lifetime = range(file, "lifetime_s", raw.lifetime_s, 60, 86_400, 3600)?;
    let rekey_after = range(file, "rekey_after_s", raw.rekey_after_s, 1, 86_400, 120)?;
    let rekey_seq = range(
        file,
        "rekey_seq",
        raw.rekey_seq,
        16,
        i64::from(u32::MAX),
        1 << 31,
    )?;
    let grace = range(file, "grace_s", raw.grace_s, 1, 3600, 30)?;
    let queue = range(file, "queue", raw.queue, 1, 1024, 64)?;
    let smkex = match raw.smkex.as_deref() {
        None | Some("prefer") => SmkexMode::Preferred,
        Some("require") => SmkexMode::Required,
        Some("off") => SmkexMode::Off,
        Some(o) => {
            return Err(err(
                file,
                "smkex",
                format_args!("{o:?} is not an SMKEX mode; want \"require\", \"prefer\" or \"off\""),
            ));
        }
    };
    let kem = match raw.kem.as_deref() {
        None | Some("off") => KemMode::Off,
        Some("prefer") => KemMode::Preferred,
        Some("require") => KemMode::Required,
        Some(o) => {
            return Err(err(
                file,
                "kem",
                format_args!(
                    "{o:?} is not a KEM mode; want \"require\", \"prefer\" or \"off\" \
                     (ML-KEM-768 beside X25519)"
                ),
            ));
        }
    };
    let group_copies = match raw.group_frames.as_deref() {
        None | Some("copies") => true,
        Some("signed") => false,
        Some(o) => {
            return Err(err(
                file,
                "group_frames",
                format_args!(
                    "{o:?} is not a way to send group frames; want \"copies\" or \"signed\""
                ),
            ));
        }
    };
    let paths = match raw.paths.as_deref() {
        None => PathMode::default(),
        Some(name) => PathMode::from_name(name).ok_or_else(|| {
            err(
                file,
                "paths",
                format_args!(
                    "{name:?} is not a way to use two paths; want \"failover\", \"both\" or \"thesis\""
                ),
            )
        })?,
    };
    let probe_ms = range(file, "probe_ms", raw.probe_ms, 5, 10_000, 25)?;
    let down_ms = range(file, "path_down_ms", raw.path_down_ms, 20, 60_000, 100)?;
    if down_ms < 2 * probe_ms {
        return Err(err(
            file,
            "path_down_ms",
            format_args!(
                "{down_ms} is less than twice probe_ms ({probe_ms}): one late probe would take a working path down"
            ),
        ));
    }
    let suites = match raw.suites {
        None => vec![SuiteId::Aes128Gcm, SuiteId::ChaCha20Poly1305],
        Some(list) if list.is_empty() => return Err(err(file, "suites", "is empty")),
        Some(list) => {
            let mut out = Vec::new();
            for (i, s) in list.iter().enumerate() {
                let id = SuiteId::from_name(s).ok_or_else(|| {
                    err(
                        file,
                        &format!("suites[{i}]"),
                        format_args!("unknown suite {s:?}; want one of {}", super::suite_names()),
                    )
                })?;
                if out.contains(&id) {
                    return Err(err(
                        file,
                        &format!("suites[{i}]"),
                        format_args!("{s:?} is listed twice"),
                    ));
                }
                out.push(id);
            }
            out
        }
    };
    let identity = match raw.identity_file.as_deref() {
        None => None,
        Some("") => return Err(err(file, "identity_file", "is empty")),
        Some(p) => {
            let path = resolve(p);
            let bytes = super::keyfile::read(&path).map_err(|e| err(file, "identity_file", e))?;
            let seed: [u8; 32] = bytes.as_slice().try_into().map_err(|_| {
                err(
                    file,
                    "identity_file",
                    format_args!(
                        "{} holds {} bytes; an identity is 32 (psp-gateway keygen --identity)",
                        path.display(),
                        bytes.len()
                    ),
                )
            })?;
            let id = psp_core::handshake::Identity::from_seed(seed).map_err(|e| {
                err(
                    file,
                    "identity_file",
                    format_args!("{}: {e}", path.display()),
                )
            })?;
            Some(IdentityFile {
                path,
                seed: Zeroizing::new(seed),
                public_key: id.public_key(),
            })
        }
    };
    let known_peers = match raw.known_peers.as_deref() {
        None => None,
        Some("") => return Err(err(file, "known_peers", "is empty")),
        Some(p) => Some(resolve(p)),
    };
    let address = match (&raw.address, addresses.first()) {
        (Some(a), _) => parse_prefix(a).ok_or_else(|| {
            err(
                file,
                "address",
                format_args!("{a:?} is not ADDRESS/PREFIX (e.g. \"10.0.0.1/24\")"),
            )
        })?,
        (None, Some(a)) => parse_prefix(a).ok_or_else(|| {
            err(
                file,
                "address",
                "interface.addresses[0] is not ADDRESS/PREFIX",
            )
        })?,
        (None, None) => {
            return Err(err(
                file,
                "address",
                "missing; SEP checks that peers are on this host's segment: set session.address \
                 = \"ADDRESS/PREFIX\" or interface.addresses",
            ));
        }
    };
    let secs = |s: i64| Duration::from_secs(s.unsigned_abs());
    Ok(SessionConfig {
        lifetime: secs(lifetime),
        rekey_after: secs(rekey_after),
        rekey_seq: u32::try_from(rekey_seq).unwrap_or(u32::MAX),
        grace: secs(grace),
        smkex,
        kem,
        suites,
        identity,
        known_peers,
        address,
        queue: usize::try_from(queue).unwrap_or(64),
        group_copies,
        paths,
        probe_every: Duration::from_millis(probe_ms.unsigned_abs()),
        down_after: Duration::from_millis(down_ms.unsigned_abs()),
    })
}
