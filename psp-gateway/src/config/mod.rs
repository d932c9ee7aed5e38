//! The daemon's configuration: a TOML file, parsed and validated up front into typed values.
//!
//! Every problem is reported as one line naming the file, the key and what is wrong
//! ([`ConfigError`]); secrets come only from key files (mode 0600 or stricter) and are zeroized
//! when dropped. `docs/CONFIG.md` is the reference: every key, its default and its rules.
//!
//! Layers: `raw` (TOML into private structs that refuse unknown keys, toml errors mapped to key
//! paths), `validate` (defaults, ranges, cross-checks, key files) and `keyfile`. This module
//! does no I/O besides reading the config and key files; it opens no interface or socket.

use core::fmt;
use core::net::SocketAddr;
use std::path::{Path, PathBuf};

use psp_core::crypto::SuiteId;
use psp_core::protect::{OpenerConfig, SealerConfig};
use psp_core::time::Duration;
use psp_core::wire::SecurityNumber;
use zeroize::Zeroizing;

mod keyfile;
mod normalize;
mod pki;
mod raw;
mod session;
mod validate;

pub(crate) use keyfile::{allow_owner as allow_key_owner, read as read_key_file, run_as};
pub(crate) use normalize::MAX_FRAME_SIZE as MAX_NORMALIZED_FRAME;
pub use normalize::NormalizeConfig;
pub use pki::PkiConfig;
pub(crate) use session::parse_prefix;
pub use session::{IdentityFile, SessionConfig};

/// The whole configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The file it was read from.
    pub path: PathBuf,
    /// The TAP interface.
    pub interface: InterfaceConfig,
    /// The uplink (path 1: data, SEP, SMKEX shares).
    pub uplink: UplinkConfig,
    /// A second uplink (`[[uplink]]` twice; path 2: SMKEX nonces, hash and confirmation).
    pub uplink2: Option<UplinkConfig>,
    /// Daemon settings.
    pub daemon: DaemonConfig,
    /// The network-wide default pre-shared key (ARP, broadcast, multicast; unicast for peers
    /// without their own key) and its security settings.
    pub group: PeerSecurity,
    /// The peers.
    pub peers: Vec<PeerConfig>,
    /// The Prometheus metrics endpoint (`[metrics]`); `None` (the default) serves nothing.
    pub metrics: Option<MetricsConfig>,
    /// Sessions (`[session]`) for peers without `key_file`; `None`: static keys only.
    pub session: Option<SessionConfig>,
    /// Membership by certificate (`[pki]`): hosts with a certificate from the CA are peers
    /// without a `[[peer]]` block.
    pub pki: Option<PkiConfig>,
}

/// `[interface]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterfaceConfig {
    /// TAP name (`name`, default `psp0`).
    pub name: String,
    /// TAP MAC (`mac`); the kernel's random one if absent.
    pub mac: Option<[u8; 6]>,
    /// TAP MTU (`mtu`); computed from the uplink MTU minus PSP overhead if absent. A value
    /// larger than that is a config error at start.
    pub mtu: Option<usize>,
    /// Addresses to assign to the TAP (`addresses = ["10.0.0.1/24", "fd00::1/64"]`), with `ip`.
    pub addresses: Vec<String>,
    /// TAP offloads (`offload`, default true): TCP segmentation and checksums on transmit,
    /// coalescing (GRO) on receive, through the virtio-net header.
    pub offload: bool,
    /// TAP reads and writes through io_uring (`io_uring`, default true; only with `offload`):
    /// the frames waiting on a readable TAP in one system call, a batch of writes in one.
    pub io_uring: bool,
}

/// `[uplink]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UplinkConfig {
    /// `kind = "raw"`, `interface = "eth1"`.
    Raw {
        /// The Ethernet interface.
        interface: String,
        /// Receive through a `PACKET_MMAP` ring (`rx_ring`, default off: end to end through
        /// veth it measured 0.93-0.98x `recvmmsg`, BENCHMARKS.md).
        rx_ring: bool,
        /// Send straight to the driver, skipping the qdisc (`qdisc_bypass`, default off:
        /// 0.87-1.09x, noise; and tbf/htb on the uplink no longer apply, and packet taps on
        /// this host do not see the frames).
        qdisc_bypass: bool,
    },
    /// `kind = "udp"`, `listen = "0.0.0.0:5198"`.
    Udp {
        /// Local address to bind.
        listen: SocketAddr,
    },
}

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// Human-readable lines (default).
    #[default]
    Human,
    /// One JSON object per line.
    Json,
}

/// `[daemon]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DaemonConfig {
    /// The status socket (`status_socket`, default `/run/psp-gateway/<interface>.sock`).
    pub status_socket: PathBuf,
    /// What must survive a restart (`state_directory`, default
    /// `/var/lib/psp-gateway/<interface>`): sequence-number reservations of static keys, the
    /// Request clock, and by default `known_peers` (docs/GATEWAY.md, "State directory").
    pub state_directory: PathBuf,
    /// Drop privileges to this user after opening the TAP and sockets (`user`).
    pub user: Option<String>,
    /// Log format (`log_format = "human" | "json"`).
    pub log_format: LogFormat,
    /// Log filter (`log_level`, an `EnvFilter` directive, default `info`).
    pub log_level: String,
}

/// `[metrics]`: the Prometheus scrape endpoint (`GET /metrics` over HTTP).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetricsConfig {
    /// The TCP address to serve on (`listen = "127.0.0.1:9582"`). Validation refuses a
    /// non-loopback address unless [`allow_remote`](Self::allow_remote) is set: the counters
    /// tell anyone who can reach them how much traffic each peer exchanges, and when.
    pub listen: SocketAddr,
    /// Serve on a non-loopback address (`allow_remote`, default false).
    pub allow_remote: bool,
}

/// A key read from a key file: hex (as `psp-gateway keygen` prints), whitespace trimmed.
#[derive(Clone, PartialEq, Eq)]
pub struct KeyMaterial {
    /// Where it came from (for messages; never print the bytes).
    pub path: PathBuf,
    /// The key bytes.
    pub bytes: Zeroizing<Vec<u8>>,
}

impl fmt::Debug for KeyMaterial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "KeyMaterial({}, {} bytes)",
            self.path.display(),
            self.bytes.len()
        )
    }
}

/// The security settings of one key: `[defaults]` merged with per-peer overrides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerSecurity {
    /// The key (`key_file`).
    pub key: KeyMaterial,
    /// The suite (`suite`, default `bf-cbc-hmac-sha1`, the thesis' default).
    pub suite: SuiteId,
    /// Replay window in frames (`replay_window`, 1..=[`psp_core::replay::MAX_WINDOW`], default
    /// the largest, 8128).
    pub replay_window: u32,
    /// 24-bit security number to send and require (`security_number`), if any.
    pub security_number: Option<SecurityNumber>,
    /// Send and require timestamps (`timestamps`, default false).
    pub timestamps: bool,
    /// Largest accepted clock difference when timestamps are on (`max_skew_ms`, 1..=2^31-1,
    /// default 30000).
    pub max_skew_ms: u64,
    /// Pad the encrypted section to a multiple of this (`pad_to`, 1..=64, default: the suite's
    /// block length).
    pub pad_to: u8,
}

impl PeerSecurity {
    /// The sealer settings.
    pub fn sealer_config(&self) -> SealerConfig {
        SealerConfig::new()
            .with_security_number(self.security_number)
            .with_timestamps(self.timestamps)
            .with_pad_to(self.pad_to)
            .with_allow_none(true)
    }

    /// The opener settings, with `max_frame_len` (the largest frame the uplink can carry).
    pub fn opener_config(&self, max_frame_len: usize) -> OpenerConfig {
        OpenerConfig::new()
            .with_replay_window(self.replay_window)
            .with_security_number(self.security_number)
            .with_require_timestamp(self.timestamps)
            .with_max_skew(Duration::from_millis(self.max_skew_ms))
            .with_allow_none(true)
            .with_max_frame_len(max_frame_len)
    }
}

/// One `[[peer]]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerConfig {
    /// Name, unique (`name`), for status and logs.
    pub name: String,
    /// The peer's protected MAC addresses (`mac = "…"` or `macs = ["…", …]`), at least one,
    /// unique across peers and different from our own.
    pub macs: Vec<[u8; 6]>,
    /// UDP endpoint (`endpoint = "192.0.2.1:5198"`), required with a UDP uplink.
    pub endpoint: Option<SocketAddr>,
    /// Unicast key and settings (the group's key when `key_file` is absent).
    pub security: PeerSecurity,
    /// Traffic normalization towards this peer (`[normalize]`, `[peer.normalize]`), if enabled.
    pub normalize: Option<NormalizeConfig>,
    /// The UDP endpoint on the second uplink (`endpoint2`).
    pub endpoint2: Option<SocketAddr>,
    /// Keys come from sessions (`[session]` present and no `key_file`); `security` then holds
    /// the group key, used only for session establishment.
    pub session: bool,
    /// The peer's pinned identity (`identity`, an Ed25519 public key).
    pub identity: Option<[u8; 32]>,
    /// `identity = "tofu"`: the identity of the peer's first session is pinned (and kept in
    /// `known_peers`). Without it and without `identity`, the peer is never pinned.
    pub tofu: bool,
    /// The peer's network address (`address`), for SEP's stage 1; else taken from the frame
    /// that starts the session.
    pub address: Option<core::net::IpAddr>,
}

/// A configuration problem: one line naming the file, the key and the problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The config file (or key file) concerned.
    pub file: PathBuf,
    /// The key path, e.g. `peer[1].key_file` (empty for whole-file problems).
    pub key: String,
    /// What is wrong.
    pub problem: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.key.is_empty() {
            write!(f, "{}: {}", self.file.display(), self.problem)
        } else {
            write!(f, "{}: {}: {}", self.file.display(), self.key, self.problem)
        }
    }
}

impl core::error::Error for ConfigError {}

impl ConfigError {
    /// A problem with `key` of `file`; newlines in `problem` become spaces (one line, always).
    pub(crate) fn new(file: &Path, key: impl Into<String>, problem: impl Into<String>) -> Self {
        let problem: String = problem.into();
        Self {
            file: file.to_path_buf(),
            key: key.into(),
            problem: problem.replace(['\n', '\r'], " "),
        }
    }
}

impl Config {
    /// Reads, parses and validates `path` (and the key files it names).
    ///
    /// # Errors
    /// The first problem found, as a [`ConfigError`].
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = read_config(path).map_err(|p| ConfigError::new(path, "", p))?;
        Self::parse(path, &text)
    }

    /// Parses and validates `text` as if read from `path`: key files are read, relative to the
    /// directory of `path`.
    ///
    /// # Errors
    /// The first problem found, as a [`ConfigError`].
    pub fn parse(path: &Path, text: &str) -> Result<Self, ConfigError> {
        let raw = raw::parse(path, text)?;
        validate::build(path, raw)
    }
}

/// The status socket the file at `path` names (`daemon.status_socket`, or the default for its
/// `interface.name`), reading only those two keys: no key file, no other validation. What
/// `psp-gateway status --config` needs, for users who cannot read the key files and for files
/// being edited.
///
/// # Errors
/// The file cannot be read, is not TOML, or those two keys are wrong.
pub fn status_socket_of(path: &Path) -> Result<PathBuf, ConfigError> {
    let text = read_config(path).map_err(|p| ConfigError::new(path, "", p))?;
    validate::status_socket_only(path, &text)
}

/// The default status socket of the TAP `ifname` in this network namespace (docs/CONFIG.md,
/// `[daemon]`).
pub fn default_status_socket(ifname: &str) -> PathBuf {
    validate::default_status_socket(ifname)
}

/// The `[daemon] user` of the file at `path`, from the TOML alone (no validation, no key
/// files): the daemon needs it before the key files are read, to accept those its user owns.
pub(crate) fn daemon_user(path: &Path) -> Option<String> {
    let text = read_config(path).ok()?;
    raw::parse(path, &text).ok()?.daemon.user
}

/// The largest config file read; a real one is a few KiB.
const MAX_CONFIG_LEN: u64 = 1 << 20;

/// The text of the config file at `path`, or the problem.
fn read_config(path: &Path) -> Result<String, String> {
    use std::io::Read;

    let file = std::fs::File::open(path).map_err(|e| format!("cannot open: {e}"))?;
    let meta = file.metadata().map_err(|e| format!("cannot stat: {e}"))?;
    if !meta.is_file() {
        return Err("is not a regular file".into());
    }
    let mut text = String::new();
    file.take(MAX_CONFIG_LEN + 1)
        .read_to_string(&mut text)
        .map_err(|e| format!("cannot read: {e}"))?;
    if text.len() as u64 > MAX_CONFIG_LEN {
        return Err(format!("is larger than {MAX_CONFIG_LEN} bytes"));
    }
    Ok(text)
}

/// Every suite name, comma-separated, for messages that refuse an unknown one.
pub fn suite_names() -> String {
    SuiteId::ALL
        .iter()
        .map(|s| s.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Parses `aa:bb:cc:dd:ee:ff` (two hex digits per byte, either case, colons only).
pub fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let b = s.as_bytes();
    if b.len() != 17 {
        return None;
    }
    let digit = |c: u8| {
        char::from(c)
            .to_digit(16)
            .and_then(|d| u8::try_from(d).ok())
    };
    let mut mac = [0u8; 6];
    // b.len() == 17 = 6 * 3 - 1, so every index below is in bounds.
    for (i, octet) in mac.iter_mut().enumerate() {
        let at = i * 3;
        if i > 0 && b[at - 1] != b':' {
            return None;
        }
        *octet = (digit(b[at])? << 4) | digit(b[at + 1])?;
    }
    Some(mac)
}

/// Formats a MAC as `aa:bb:cc:dd:ee:ff` (lower case).
pub fn format_mac(mac: [u8; 6]) -> String {
    let [a, b, c, d, e, f] = mac;
    format!("{a:02x}:{b:02x}:{c:02x}:{d:02x}:{e:02x}:{f:02x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mac_round_trip() {
        let mac = [0x02, 0xab, 0x00, 0x10, 0xfe, 0x01];
        assert_eq!(format_mac(mac), "02:ab:00:10:fe:01");
        assert_eq!(parse_mac("02:ab:00:10:fe:01"), Some(mac));
        assert_eq!(parse_mac("02:AB:00:10:FE:01"), Some(mac));
    }

    #[test]
    fn mac_refuses_other_spellings() {
        for bad in [
            "",
            "02:ab:00:10:fe",
            "02:ab:00:10:fe:01:",
            "02-ab-00-10-fe-01",
            "02ab.0010.fe01",
            "2:ab:00:10:fe:01:0",
            "02:ab:00:10:fe:0g",
            "+2:ab:00:10:fe:01",
            "02:ab:00:10:fé:1",
        ] {
            assert_eq!(parse_mac(bad), None, "{bad}");
        }
    }

    #[test]
    fn error_is_one_line() {
        let e = ConfigError::new(Path::new("/etc/gw.toml"), "peer[0].mac", "a\nb");
        assert_eq!(e.to_string(), "/etc/gw.toml: peer[0].mac: a b");
        let e = ConfigError::new(Path::new("gw.toml"), "", "cannot open: x");
        assert_eq!(e.to_string(), "gw.toml: cannot open: x");
    }

    #[test]
    fn missing_file() {
        let e = Config::load(Path::new("/nonexistent/gw.toml")).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("/nonexistent/gw.toml: cannot open: No such file"),
            "{e}"
        );
    }
}
