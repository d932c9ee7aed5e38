//! From the raw file to the typed [`Config`]: defaults filled in, every value checked, key files
//! read. The first problem wins and names its key.

use core::fmt;
use core::net::{IpAddr, SocketAddr};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use psp_core::crypto::{SuiteId, SuiteKey};
use psp_core::replay::{DEFAULT_WINDOW, MAX_WINDOW};
use psp_core::wire::{MAX_PADDING, SecurityNumber};

use super::normalize::NormSettings;
use super::raw::{
    RawConfig, RawDaemon, RawInterface, RawMetrics, RawPeer, RawSecurity, RawUplink, RawUplinks,
};
use super::session::{self, SessionConfig};
use super::{
    Config, ConfigError, DaemonConfig, InterfaceConfig, KeyMaterial, LogFormat, MetricsConfig,
    PeerConfig, PeerSecurity, UplinkConfig, format_mac, keyfile, parse_mac,
};

/// The default TAP name.
const DEFAULT_INTERFACE: &str = "psp0";
/// The default suite (the thesis' default).
const DEFAULT_SUITE: SuiteId = SuiteId::BfCbcHmacSha1;
/// The default clock-skew tolerance with timestamps on.
const DEFAULT_MAX_SKEW_MS: u64 = 30_000;
/// Timestamps are milliseconds modulo 2^32 and compared as a signed difference, so a larger skew
/// would accept every timestamp.
const MAX_SKEW_MS: i64 = (1 << 31) - 1;
/// Linux's IFNAMSIZ minus the terminating NUL.
const MAX_IFNAME: usize = 15;
/// `sun_path` holds 108 bytes including the terminating NUL.
const MAX_SOCKET_PATH: usize = 107;
/// The longest peer name.
const MAX_PEER_NAME: usize = 64;

/// Where problems are reported, and where relative paths start.
struct Ctx<'a> {
    file: &'a Path,
    base: PathBuf,
}

impl Ctx<'_> {
    fn err(&self, key: impl Into<String>, problem: impl fmt::Display) -> ConfigError {
        ConfigError::new(self.file, key.into(), problem.to_string())
    }

    /// `p` relative to the config file's directory unless absolute.
    fn resolve(&self, p: &str) -> PathBuf {
        self.base.join(p)
    }
}

/// Validates `raw`, read from `file`, and reads the key files it names.
pub(super) fn build(file: &Path, raw: RawConfig) -> Result<Config, ConfigError> {
    // Key paths are made absolute now so a reload after the daemon changed directory still finds
    // them; `absolute` only fails for an empty path or an unreadable working directory.
    let base = std::path::absolute(file)
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
        .unwrap_or_else(|| file.parent().map(Path::to_path_buf).unwrap_or_default());
    let ctx = Ctx { file, base };

    let interface = interface(&ctx, raw.interface)?;
    let (uplink, uplink2) = uplinks(&ctx, raw.uplink)?;
    let daemon = daemon(&ctx, raw.daemon, &interface.name)?;
    let metrics = raw.metrics.map(|m| metrics(&ctx, m)).transpose()?;
    let session = raw
        .session
        .map(|r| session::build(file, r, |p| ctx.resolve(p), &interface.addresses))
        .transpose()?;
    if uplink2.is_some() && session.is_none() {
        return Err(ctx.err(
            "uplink[1]",
            "a second path carries session establishment (SMKEX); it needs a [session] section",
        ));
    }
    if uplink2.is_none()
        && session
            .as_ref()
            .is_some_and(|s| s.smkex == psp_core::handshake::SmkexMode::Required)
    {
        return Err(ctx.err(
            "session.smkex",
            "\"require\" needs two paths and there is one uplink, so every handshake would fail \
             (too_few_paths); add a second [[uplink]] (path 2), or set smkex = \"prefer\" \
             (two paths when both hosts have them) or \"off\" (single-path SEP)",
        ));
    }

    let pki = match raw.pki {
        None => None,
        Some(r) => {
            let Some(s) = session.as_ref() else {
                return Err(ctx.err(
                    "pki",
                    "needs a [session] section (certificates are checked in handshakes)",
                ));
            };
            let raw_uplinks = [Some(&uplink), uplink2.as_ref()]
                .into_iter()
                .flatten()
                .all(|u| matches!(u, UplinkConfig::Raw { .. }));
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            let resolve = |p: &str| ctx.resolve(p);
            let host = super::pki::Host {
                identity: s.identity.as_ref().map(|i| i.public_key),
                mac: interface.mac,
                address: Some(s.address.0),
                raw_uplinks,
                now,
                resolve: &resolve,
            };
            Some(super::pki::build(file, r, &host)?)
        }
    };

    let mut defaults = Settings::builtin();
    defaults.apply(&ctx, "defaults", &raw.defaults)?;
    let mut norm_defaults = NormSettings::builtin();
    norm_defaults.apply(file, "normalize", &raw.normalize)?;
    norm_defaults.finish(file, "normalize")?;

    let Some(raw_group) = raw.group else {
        return Err(ctx.err(
            "group",
            "missing; a [group] section with key_file is required (the key for ARP, broadcast \
             and multicast, and for peers without their own key)",
        ));
    };
    let mut group_settings = defaults.clone();
    group_settings.apply(&ctx, "group", &raw_group.security())?;
    let Some(group_key_file) = raw_group.key_file.as_deref() else {
        return Err(ctx.err("group.key_file", "missing (required)"));
    };
    let group_key = read_key(&ctx, "group.key_file", group_key_file)?;
    let group = group_settings
        .clone()
        .finish(&ctx, "group", group_key, "group.key_file")?;

    let mut peers = Vec::with_capacity(raw.peer.len());
    let mut names: HashMap<String, usize> = HashMap::new();
    let mut macs: HashMap<[u8; 6], usize> = HashMap::new();
    for (i, p) in raw.peer.into_iter().enumerate() {
        let scope = format!("peer[{i}]");
        let peer = peer(
            &ctx,
            &scope,
            p,
            (&uplink, uplink2.as_ref(), session.as_ref()),
            (&defaults, &norm_defaults),
            (&group_settings, &group),
        )?;
        if let Some(j) = names.insert(peer.name.clone(), i) {
            return Err(ctx.err(
                format!("{scope}.name"),
                format_args!("{:?} is already the name of peer[{j}]", peer.name),
            ));
        }
        for (k, mac) in peer.macs.iter().enumerate() {
            let key = if peer.macs.len() == 1 {
                format!("{scope}.mac")
            } else {
                format!("{scope}.macs[{k}]")
            };
            if Some(*mac) == interface.mac {
                return Err(ctx.err(
                    key,
                    format_args!("{} is interface.mac, our own address", format_mac(*mac)),
                ));
            }
            if let Some(j) = macs.insert(*mac, i) {
                let whose = if j == i {
                    "this peer".to_string()
                } else {
                    format!("peer[{j}]")
                };
                return Err(ctx.err(
                    key,
                    format_args!("{} is already a MAC of {whose}", format_mac(*mac)),
                ));
            }
        }
        peers.push(peer);
    }
    check_shared_keys(&ctx, &group, &peers)?;

    Ok(Config {
        path: file.to_path_buf(),
        interface,
        uplink,
        uplink2,
        daemon,
        group,
        peers,
        metrics,
        session,
        pki,
    })
}

/// One sequence-number stream per (sender, key): nonces and IVs derive from the key and the SN,
/// so two sealers under one key on one host could repeat them. Peers that share a key (with the
/// group or each other) therefore share one sealer in the daemon, which needs the settings that
/// shape the sealed frame to agree; and a normalized peer with a static key needs a key nobody
/// else uses (its stream's frames are all it sends under it).
fn check_shared_keys(
    ctx: &Ctx<'_>,
    group: &PeerSecurity,
    peers: &[PeerConfig],
) -> Result<(), ConfigError> {
    let sealing = |s: &PeerSecurity| (s.suite, s.security_number, s.timestamps, s.pad_to);
    for (i, p) in peers.iter().enumerate() {
        let others = core::iter::once(("[group]".to_string(), group)).chain(
            peers
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .map(|(j, q)| (format!("peer[{j}]"), &q.security)),
        );
        for (who, other) in others {
            if *other.key.bytes != *p.security.key.bytes {
                continue;
            }
            // A session peer's stream is sealed under its session keys, not this key.
            if p.normalize.is_some() && !p.session {
                return Err(ctx.err(
                    format!("peer[{i}].key_file"),
                    format_args!(
                        "a normalized peer needs a key of its own; this key is also {who}'s"
                    ),
                ));
            }
            if sealing(other) != sealing(&p.security) {
                return Err(ctx.err(
                    format!("peer[{i}]"),
                    format_args!(
                        "shares its key with {who} but not its suite, security_number, \
                         timestamps or pad_to (one key is sealed by one sequence-number stream)"
                    ),
                ));
            }
        }
    }
    Ok(())
}

fn interface(ctx: &Ctx<'_>, raw: RawInterface) -> Result<InterfaceConfig, ConfigError> {
    let name = raw.name.unwrap_or_else(|| DEFAULT_INTERFACE.to_string());
    check_ifname(&name).map_err(|p| ctx.err("interface.name", p))?;
    let mac = raw
        .mac
        .map(|s| unicast_mac(&s))
        .transpose()
        .map_err(|p| ctx.err("interface.mac", p))?;
    let mtu = match raw.mtu {
        None => None,
        Some(m @ 68..=65_535) => usize::try_from(m).ok(),
        Some(m) => return Err(ctx.err("interface.mtu", format_args!("{m} is not in 68..=65535"))),
    };
    for (i, a) in raw.addresses.iter().enumerate() {
        let key = format!("interface.addresses[{i}]");
        check_prefix(a).map_err(|p| ctx.err(&key, p))?;
        if raw.addresses[..i].contains(a) {
            return Err(ctx.err(key, format_args!("{a:?} is listed twice")));
        }
    }
    Ok(InterfaceConfig {
        name,
        mac,
        mtu,
        addresses: raw.addresses,
        offload: raw.offload.unwrap_or(true),
        io_uring: raw.io_uring.unwrap_or(true),
    })
}

/// `[uplink]`, or one or two `[[uplink]]`: path 1 and, if present, path 2.
fn uplinks(
    ctx: &Ctx<'_>,
    raw: Option<RawUplinks>,
) -> Result<(UplinkConfig, Option<UplinkConfig>), ConfigError> {
    let missing = || {
        ctx.err(
            "uplink",
            "missing; add [uplink] with kind = \"raw\" and interface, or kind = \"udp\" and listen",
        )
    };
    match raw {
        None => Err(missing()),
        Some(RawUplinks::One(u)) => Ok((uplink(ctx, "uplink", u)?, None)),
        Some(RawUplinks::Many(list)) => {
            if list.len() > 2 {
                return Err(ctx.err(
                    "uplink",
                    format_args!("{} [[uplink]] tables; at most two paths", list.len()),
                ));
            }
            let mut it = list.into_iter();
            let first = uplink(ctx, "uplink[0]", it.next().ok_or_else(missing)?)?;
            let second = it.next().map(|u| uplink(ctx, "uplink[1]", u)).transpose()?;
            if second.as_ref() == Some(&first) {
                return Err(ctx.err(
                    "uplink[1]",
                    "is the same as uplink[0]; two paths need two uplinks",
                ));
            }
            Ok((first, second))
        }
    }
}

fn uplink(ctx: &Ctx<'_>, scope: &str, raw: RawUplink) -> Result<UplinkConfig, ConfigError> {
    let key = |k: &str| format!("{scope}.{k}");
    match raw.kind.as_deref() {
        Some("raw") => {
            if raw.listen.is_some() {
                return Err(ctx.err(key("listen"), "only for kind = \"udp\""));
            }
            let Some(interface) = raw.interface else {
                return Err(ctx.err(
                    key("interface"),
                    "missing; kind = \"raw\" needs the Ethernet interface (e.g. \"eth1\")",
                ));
            };
            check_ifname(&interface).map_err(|p| ctx.err(key("interface"), p))?;
            Ok(UplinkConfig::Raw {
                interface,
                rx_ring: raw.rx_ring.unwrap_or(false),
                qdisc_bypass: raw.qdisc_bypass.unwrap_or(false),
            })
        }
        Some("udp") => {
            if raw.interface.is_some() {
                return Err(ctx.err(key("interface"), "only for kind = \"raw\""));
            }
            for (k, v) in [("rx_ring", raw.rx_ring), ("qdisc_bypass", raw.qdisc_bypass)] {
                if v.is_some() {
                    return Err(ctx.err(key(k), "only for kind = \"raw\""));
                }
            }
            let Some(listen) = raw.listen else {
                return Err(ctx.err(
                    key("listen"),
                    "missing; kind = \"udp\" needs the local address (e.g. \"0.0.0.0:5198\")",
                ));
            };
            let listen = listen
                .parse::<SocketAddr>()
                .map_err(|_| ctx.err(key("listen"), not_socket_addr(&listen)))?;
            Ok(UplinkConfig::Udp { listen })
        }
        Some(other) => Err(ctx.err(
            key("kind"),
            format_args!("{other:?} is not an uplink kind; want \"raw\" or \"udp\""),
        )),
        None => Err(ctx.err(key("kind"), "missing; want \"raw\" (Ethernet) or \"udp\"")),
    }
}

/// `daemon.status_socket`: the configured path (relative to the config file's directory), or
/// the default for the TAP `ifname` ([`default_status_socket`]).
fn status_socket(ctx: &Ctx<'_>, raw: Option<&str>, ifname: &str) -> Result<PathBuf, ConfigError> {
    let status_socket = match raw {
        None => default_status_socket(ifname),
        Some("") => {
            return Err(ctx.err("daemon.status_socket", "is empty"));
        }
        Some(s) => ctx.resolve(s),
    };
    let len = status_socket.as_os_str().len();
    if len > MAX_SOCKET_PATH {
        return Err(ctx.err(
            "daemon.status_socket",
            format_args!(
                "{} is {len} bytes; unix socket paths are limited to {MAX_SOCKET_PATH}",
                status_socket.display()
            ),
        ));
    }
    Ok(status_socket)
}

/// The default status socket of the TAP `ifname`: `/run/psp-gateway/IFNAME.sock`, or, in a
/// named network namespace (`ip netns add NAME`), `/run/psp-gateway/IFNAME@NAME.sock`, so
/// gateways in two namespaces that share `/run` (each with its own `psp0`) do not collide.
/// `psp-gateway status` run in the same namespace finds the same path.
pub(super) fn default_status_socket(ifname: &str) -> PathBuf {
    let plain = PathBuf::from(format!("/run/psp-gateway/{ifname}.sock"));
    match netns_name() {
        Some(ns) => {
            let named = PathBuf::from(format!("/run/psp-gateway/{ifname}@{ns}.sock"));
            if named.as_os_str().len() <= MAX_SOCKET_PATH {
                named
            } else {
                plain
            }
        }
        None => plain,
    }
}

/// The name of this process's network namespace, as `ip netns identify` finds it: the entry
/// of `/run/netns` that is the same namespace file as `/proc/self/ns/net`. `None` in the
/// initial namespace and in namespaces without a name (containers), or when either cannot be
/// read.
fn netns_name() -> Option<String> {
    use std::os::unix::fs::MetadataExt as _;
    let me = std::fs::metadata("/proc/self/ns/net").ok()?;
    std::fs::read_dir("/run/netns")
        .ok()?
        .filter_map(Result::ok)
        .find(|e| {
            std::fs::metadata(e.path()).is_ok_and(|m| m.dev() == me.dev() && m.ino() == me.ino())
        })
        .and_then(|e| e.file_name().into_string().ok())
}

/// The status socket named by a config file's text, reading nothing else: no key file, no
/// other section, so it works for any user who can read the file and while the rest of it is
/// being edited. `psp-gateway status --config`.
pub(super) fn status_socket_only(file: &Path, text: &str) -> Result<PathBuf, ConfigError> {
    let base = std::path::absolute(file)
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
        .unwrap_or_else(|| file.parent().map(Path::to_path_buf).unwrap_or_default());
    let ctx = Ctx { file, base };
    let table: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| ctx.err("", super::raw::tidy(e.message())))?;
    let string = |section: &str, key: &str| -> Result<Option<String>, ConfigError> {
        match table.get(section).and_then(|t| t.get(key)) {
            None => Ok(None),
            Some(toml::Value::String(s)) => Ok(Some(s.clone())),
            Some(v) => Err(ctx.err(
                format!("{section}.{key}"),
                format_args!("invalid type: {}, expected a string", v.type_str()),
            )),
        }
    };
    let name = string("interface", "name")?.unwrap_or_else(|| DEFAULT_INTERFACE.to_string());
    check_ifname(&name).map_err(|p| ctx.err("interface.name", p))?;
    status_socket(&ctx, string("daemon", "status_socket")?.as_deref(), &name)
}

fn daemon(ctx: &Ctx<'_>, raw: RawDaemon, ifname: &str) -> Result<DaemonConfig, ConfigError> {
    let status_socket = status_socket(ctx, raw.status_socket.as_deref(), ifname)?;
    let state_directory = match raw.state_directory {
        // Like the status socket: one per TAP name and named network namespace.
        None => PathBuf::from(match netns_name() {
            Some(ns) => format!("/var/lib/psp-gateway/{ifname}@{ns}"),
            None => format!("/var/lib/psp-gateway/{ifname}"),
        }),
        Some(s) if s.is_empty() => {
            return Err(ctx.err("daemon.state_directory", "is empty"));
        }
        Some(s) => ctx.resolve(&s),
    };
    let user = match raw.user {
        Some(u) if u.is_empty() || u.contains(|c: char| c.is_whitespace() || c == ':') => {
            return Err(ctx.err("daemon.user", format_args!("{u:?} is not a user name")));
        }
        u => u,
    };
    let log_format = match raw.log_format.as_deref() {
        None | Some("human") => LogFormat::Human,
        Some("json") => LogFormat::Json,
        Some(other) => {
            return Err(ctx.err(
                "daemon.log_format",
                format_args!("{other:?} is not a log format; want \"human\" or \"json\""),
            ));
        }
    };
    let log_level = raw.log_level.unwrap_or_else(|| "info".to_string());
    if let Err(e) = tracing_subscriber::EnvFilter::try_new(&log_level) {
        return Err(ctx.err(
            "daemon.log_level",
            format_args!(
                "{log_level:?} is not a log filter ({e}); want e.g. \"info\" or \
                 \"warn,psp_gateway=debug\""
            ),
        ));
    }
    Ok(DaemonConfig {
        status_socket,
        state_directory,
        user,
        log_format,
        log_level,
    })
}

fn metrics(ctx: &Ctx<'_>, raw: RawMetrics) -> Result<MetricsConfig, ConfigError> {
    let Some(listen) = raw.listen else {
        return Err(ctx.err(
            "metrics.listen",
            "missing; [metrics] needs the address to serve on (e.g. \"127.0.0.1:9582\"), or \
             remove the section",
        ));
    };
    let listen = listen
        .parse::<SocketAddr>()
        .map_err(|_| ctx.err("metrics.listen", not_socket_addr(&listen)))?;
    if listen.port() == 0 {
        return Err(ctx.err(
            "metrics.listen",
            format_args!("{listen} has port 0; a scraper needs a fixed port"),
        ));
    }
    let allow_remote = raw.allow_remote.unwrap_or(false);
    if !allow_remote && !listen.ip().is_loopback() {
        return Err(ctx.err(
            "metrics.listen",
            format_args!(
                "{listen} is not a loopback address; the counters show every peer's traffic \
                 volume, so serving them beyond this host needs allow_remote = true"
            ),
        ));
    }
    Ok(MetricsConfig {
        listen,
        allow_remote,
    })
}

fn peer(
    ctx: &Ctx<'_>,
    scope: &str,
    raw: RawPeer,
    (uplink, uplink2, session): (&UplinkConfig, Option<&UplinkConfig>, Option<&SessionConfig>),
    (defaults, norm_defaults): (&Settings, &NormSettings),
    (group_settings, group): (&Settings, &PeerSecurity),
) -> Result<PeerConfig, ConfigError> {
    let name = match raw.name.as_deref() {
        None => return Err(ctx.err(format!("{scope}.name"), "missing (required)")),
        Some(n) => {
            check_peer_name(n).map_err(|p| ctx.err(format!("{scope}.name"), p))?;
            n.to_string()
        }
    };
    let macs = match (&raw.mac, &raw.macs) {
        (Some(_), Some(_)) => {
            return Err(ctx.err(format!("{scope}.macs"), "set either mac or macs, not both"));
        }
        (None, None) => {
            return Err(ctx.err(
                format!("{scope}.mac"),
                "missing; set mac = \"aa:bb:cc:dd:ee:ff\" or macs = [...]",
            ));
        }
        (Some(m), None) => {
            vec![unicast_mac(m).map_err(|p| ctx.err(format!("{scope}.mac"), p))?]
        }
        (None, Some(list)) if list.is_empty() => {
            return Err(ctx.err(
                format!("{scope}.macs"),
                "is empty; list at least one MAC address",
            ));
        }
        (None, Some(list)) => list
            .iter()
            .enumerate()
            .map(|(k, m)| unicast_mac(m).map_err(|p| ctx.err(format!("{scope}.macs[{k}]"), p)))
            .collect::<Result<Vec<_>, _>>()?,
    };
    let endpoint = match &raw.endpoint {
        None => None,
        Some(e) => Some(parse_endpoint(e).map_err(|p| ctx.err(format!("{scope}.endpoint"), p))?),
    };
    if endpoint.is_none() && matches!(uplink, UplinkConfig::Udp { .. }) {
        return Err(ctx.err(
            format!("{scope}.endpoint"),
            "missing; required with uplink kind = \"udp\" (e.g. \"192.0.2.1:5198\")",
        ));
    }

    let endpoint2 = match &raw.endpoint2 {
        None => None,
        Some(e) => Some(parse_endpoint(e).map_err(|p| ctx.err(format!("{scope}.endpoint2"), p))?),
    };
    if endpoint2.is_none() && matches!(uplink2, Some(UplinkConfig::Udp { .. })) {
        return Err(ctx.err(
            format!("{scope}.endpoint2"),
            "missing; required with a second uplink of kind = \"udp\"",
        ));
    }
    // `identity = "tofu"`: pinned on first use (only then: a peer without an identity is never
    // pinned, so nobody can claim it first).
    let tofu = raw.identity.as_deref() == Some("tofu");
    let identity = raw
        .identity
        .as_deref()
        .filter(|_| !tofu)
        .map(|h| parse_identity(h).map_err(|p| ctx.err(format!("{scope}.identity"), p)))
        .transpose()?;
    if tofu && session.is_none() {
        return Err(ctx.err(
            format!("{scope}.identity"),
            "\"tofu\" needs [session]: the identity is learnt from the peer's first session",
        ));
    }
    let address = raw
        .address
        .as_deref()
        .map(|a| {
            a.parse::<IpAddr>().map_err(|_| {
                ctx.err(
                    format!("{scope}.address"),
                    format_args!("{a:?} is not an IP address"),
                )
            })
        })
        .transpose()?;
    let sessions = session.is_some() && raw.key_file.is_none();
    let overrides = raw.security();
    let security = match raw.key_file.as_deref() {
        Some(key_file) => {
            let mut settings = defaults.clone();
            settings.apply(ctx, scope, &overrides)?;
            let key_name = format!("{scope}.key_file");
            let key = read_key(ctx, &key_name, key_file)?;
            settings.finish(ctx, scope, key, &key_name)?
        }
        None => {
            // The group key, so the group's suite: one key is never used under two algorithms.
            if overrides.suite.is_some() {
                return Err(ctx.err(
                    format!("{scope}.suite"),
                    "needs key_file: a peer without its own key uses the group key and the \
                     group's suite",
                ));
            }
            let mut settings = group_settings.clone();
            settings.apply(ctx, scope, &overrides)?;
            settings.finish(ctx, scope, group.key.clone(), "group.key_file")?
        }
    };
    let mut norm = norm_defaults.clone();
    let norm_scope = format!("{scope}.normalize");
    norm.apply(ctx.file, &norm_scope, &raw.normalize)?;
    let normalize = norm.finish(ctx.file, &norm_scope)?;
    Ok(PeerConfig {
        name,
        macs,
        endpoint,
        endpoint2,
        security,
        normalize,
        session: sessions,
        identity,
        tofu,
        address,
    })
}

/// Security settings while they are merged: built-in defaults, then `[defaults]`, then the
/// section's overrides.
#[derive(Clone)]
struct Settings {
    suite: SuiteId,
    replay_window: u32,
    security_number: Option<SecurityNumber>,
    timestamps: bool,
    max_skew_ms: u64,
    /// An explicit `pad_to` and the key that set it; the suite's block length otherwise.
    pad_to: Option<(u8, String)>,
}

impl Settings {
    fn builtin() -> Self {
        Self {
            suite: DEFAULT_SUITE,
            replay_window: DEFAULT_WINDOW,
            security_number: None,
            timestamps: false,
            max_skew_ms: DEFAULT_MAX_SKEW_MS,
            pad_to: None,
        }
    }

    /// Checks and applies the values present in `raw`, found in section `scope`.
    fn apply(&mut self, ctx: &Ctx<'_>, scope: &str, raw: &RawSecurity) -> Result<(), ConfigError> {
        let key = |field: &str| format!("{scope}.{field}");
        if let Some(s) = &raw.suite {
            self.suite = SuiteId::from_name(s).ok_or_else(|| {
                ctx.err(
                    key("suite"),
                    format_args!("unknown suite {s:?}; want one of {}", super::suite_names()),
                )
            })?;
        }
        if let Some(w) = raw.replay_window {
            self.replay_window = u32::try_from(w)
                .ok()
                .filter(|w| (1..=MAX_WINDOW).contains(w))
                .ok_or_else(|| {
                    ctx.err(
                        key("replay_window"),
                        format_args!("{w} is not in 1..={MAX_WINDOW} (frames)"),
                    )
                })?;
        }
        if let Some(n) = raw.security_number {
            let n = u32::try_from(n)
                .ok()
                .and_then(|n| SecurityNumber::new(n).ok())
                .ok_or_else(|| {
                    ctx.err(
                        key("security_number"),
                        format_args!("{n} is not a 24-bit number (0..={})", SecurityNumber::MAX),
                    )
                })?;
            self.security_number = Some(n);
        }
        if let Some(t) = raw.timestamps {
            self.timestamps = t;
        }
        if let Some(ms) = raw.max_skew_ms {
            if !(1..=MAX_SKEW_MS).contains(&ms) {
                return Err(ctx.err(
                    key("max_skew_ms"),
                    format_args!("{ms} is not in 1..={MAX_SKEW_MS} (milliseconds)"),
                ));
            }
            self.max_skew_ms = ms.unsigned_abs();
        }
        if let Some(p) = raw.pad_to {
            let p = u8::try_from(p)
                .ok()
                .filter(|p| (1..=MAX_PADDING).contains(&usize::from(*p)))
                .ok_or_else(|| {
                    ctx.err(
                        key("pad_to"),
                        format_args!("{p} is not in 1..={MAX_PADDING} (bytes)"),
                    )
                })?;
            self.pad_to = Some((p, key("pad_to")));
        }
        Ok(())
    }

    /// The final settings of section `scope` with `key` (named by `key_name` in messages).
    fn finish(
        self,
        ctx: &Ctx<'_>,
        scope: &str,
        key: KeyMaterial,
        key_name: &str,
    ) -> Result<PeerSecurity, ConfigError> {
        let block = self.suite.block_len();
        let pad_to = match self.pad_to {
            None => u8::try_from(block).unwrap_or(1),
            Some((p, origin)) => {
                let granule = lcm(block, usize::from(p));
                if granule > MAX_PADDING {
                    return Err(ctx.err(
                        origin,
                        format_args!(
                            "{p} with suite {} (blocks of {block} bytes) in {scope} pads to \
                             multiples of {granule}; want a granule of at most {MAX_PADDING} \
                             (use a multiple of {block})",
                            self.suite
                        ),
                    ));
                }
                p
            }
        };
        // The same check the sealer and opener make, with their message.
        if let Err(e) = SuiteKey::new(self.suite, &key.bytes) {
            // keygen's default is aes128-gcm (16 bytes); the built-in suite is the thesis'.
            let hint = if self.suite == DEFAULT_SUITE && key.bytes.len() == 16 {
                " (a 16-byte key is what `psp-gateway keygen` makes for aes128-gcm, its default; \
                 the daemon's built-in suite is the thesis' bf-cbc-hmac-sha1: write suite = \
                 \"aes128-gcm\" in [defaults])"
            } else {
                ""
            };
            return Err(ctx.err(
                key_name,
                format_args!("{}: {e} for suite {}{hint}", key.path.display(), self.suite),
            ));
        }
        Ok(PeerSecurity {
            key,
            suite: self.suite,
            replay_window: self.replay_window,
            security_number: self.security_number,
            timestamps: self.timestamps,
            max_skew_ms: self.max_skew_ms,
            pad_to,
        })
    }
}

fn read_key(ctx: &Ctx<'_>, key_name: &str, value: &str) -> Result<KeyMaterial, ConfigError> {
    if value.is_empty() {
        return Err(ctx.err(key_name, "is empty; want the path of a key file"));
    }
    let path = ctx.resolve(value);
    let bytes = keyfile::read(&path).map_err(|p| ctx.err(key_name, p))?;
    Ok(KeyMaterial { path, bytes })
}

fn lcm(a: usize, b: usize) -> usize {
    let (mut x, mut y) = (a.max(1), b.max(1));
    while y != 0 {
        (x, y) = (y, x % y);
    }
    a.max(1) / x * b.max(1)
}

/// A MAC a host can own: not group (multicast, broadcast), not all zeros.
fn unicast_mac(s: &str) -> Result<[u8; 6], String> {
    let mac = parse_mac(s)
        .ok_or_else(|| format!("{s:?} is not a MAC address (want aa:bb:cc:dd:ee:ff)"))?;
    if mac[0] & 1 != 0 {
        let what = if mac == [0xff; 6] {
            "the broadcast address"
        } else {
            "a group (multicast) address"
        };
        return Err(format!("{s:?} is {what}; want a unicast MAC"));
    }
    if mac == [0; 6] {
        return Err(format!("{s:?} is the all-zero address; want a unicast MAC"));
    }
    Ok(mac)
}

/// Linux's rules for interface names (`dev_valid_name`).
fn check_ifname(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("is empty; want an interface name".into());
    }
    if name.len() > MAX_IFNAME {
        return Err(format!(
            "{name:?} is {} bytes; interface names are at most {MAX_IFNAME}",
            name.len()
        ));
    }
    if name == "."
        || name == ".."
        || name.contains(|c: char| c == '/' || c == ':' || c.is_whitespace())
    {
        return Err(format!(
            "{name:?} is not a valid interface name (no '/', ':' or spaces)"
        ));
    }
    Ok(())
}

/// Peer names appear in status output and logs: keep them plain.
fn check_peer_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_PEER_NAME {
        return Err(format!("{name:?} must be 1 to {MAX_PEER_NAME} bytes long"));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        return Err(format!(
            "{name:?} has characters other than letters, digits, '-', '_' and '.'"
        ));
    }
    Ok(())
}

/// `ADDRESS/PREFIX` for `ip address add`.
fn check_prefix(s: &str) -> Result<(), String> {
    let bad = || format!("{s:?} is not ADDRESS/PREFIX (e.g. \"10.0.0.1/24\" or \"fd00::1/64\")");
    let (addr, prefix) = s.split_once('/').ok_or_else(bad)?;
    let addr: IpAddr = addr.parse().map_err(|_| bad())?;
    let prefix: u8 = prefix.parse().map_err(|_| bad())?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    if prefix > max {
        return Err(format!("{s:?}: prefix {prefix} is longer than {max}"));
    }
    Ok(())
}

/// A pinned identity: the 64 hex digits `psp-gateway keygen --identity` prints.
fn parse_identity(s: &str) -> Result<[u8; 32], String> {
    let bad = || {
        format!(
            "{s:?} is not an identity (64 hex digits from keygen --identity, or \"tofu\" to pin the key of the first session)"
        )
    };
    let bytes: [u8; 32] = hex::decode(s.trim())
        .map_err(|_| bad())?
        .try_into()
        .map_err(|_| bad())?;
    if psp_core::handshake::identity::x25519_of(&bytes).is_none() || bytes[31] & 0x80 != 0 {
        return Err(bad());
    }
    Ok(bytes)
}

fn parse_endpoint(s: &str) -> Result<SocketAddr, String> {
    let addr = s.parse::<SocketAddr>().map_err(|_| not_socket_addr(s))?;
    if addr.port() == 0 {
        return Err(format!("{s:?} has port 0; want the peer's port"));
    }
    if addr.ip().is_unspecified() || addr.ip().is_multicast() {
        return Err(format!("{s:?} is not a host address"));
    }
    Ok(addr)
}

fn not_socket_addr(s: &str) -> String {
    format!(
        "{s:?} is not IP:PORT (e.g. \"192.0.2.1:5198\" or \"[2001:db8::1]:5198\"; no host names)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lcm_of_block_and_pad() {
        assert_eq!(lcm(8, 12), 24);
        assert_eq!(lcm(1, 64), 64);
        assert_eq!(lcm(8, 36), 72);
        assert_eq!(lcm(8, 8), 8);
    }

    #[test]
    fn mac_classes() {
        assert_eq!(unicast_mac("02:00:00:00:00:01"), Ok([2, 0, 0, 0, 0, 1]));
        assert!(
            unicast_mac("ff:ff:ff:ff:ff:ff")
                .unwrap_err()
                .contains("broadcast")
        );
        assert!(
            unicast_mac("01:00:5e:00:00:01")
                .unwrap_err()
                .contains("multicast")
        );
        assert!(
            unicast_mac("33:33:00:00:00:01")
                .unwrap_err()
                .contains("multicast")
        );
        assert!(
            unicast_mac("00:00:00:00:00:00")
                .unwrap_err()
                .contains("all-zero")
        );
        assert_eq!(
            unicast_mac("02:00:00:00:00:0g").unwrap_err(),
            "\"02:00:00:00:00:0g\" is not a MAC address (want aa:bb:cc:dd:ee:ff)"
        );
    }

    #[test]
    fn interface_names() {
        assert!(check_ifname("psp0").is_ok());
        assert!(check_ifname("a23456789012345").is_ok());
        assert!(
            check_ifname("a234567890123456")
                .unwrap_err()
                .contains("at most 15")
        );
        for bad in ["", ".", "..", "a/b", "a b", "a:1"] {
            assert!(check_ifname(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn peer_names() {
        assert!(check_peer_name("vm2.lab-1_x").is_ok());
        for bad in ["", "a b", "a\nb", "é", &"x".repeat(65)] {
            assert!(check_peer_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn prefixes() {
        for good in ["10.0.0.1/24", "fd00::1/64", "192.0.2.1/32", "::1/128"] {
            assert!(check_prefix(good).is_ok(), "{good}");
        }
        for bad in [
            "10.0.0.1",
            "10.0.0.1/33",
            "fd00::1/129",
            "host/24",
            "10.0.0.1/x",
        ] {
            assert!(check_prefix(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn endpoints() {
        assert!(parse_endpoint("192.0.2.1:5198").is_ok());
        assert!(parse_endpoint("[2001:db8::1]:5198").is_ok());
        for bad in [
            "192.0.2.1",
            "gw.example:5198",
            "192.0.2.1:0",
            "0.0.0.0:5198",
            "[::]:1",
            "224.0.0.1:5",
        ] {
            assert!(parse_endpoint(bad).is_err(), "{bad}");
        }
    }
}
