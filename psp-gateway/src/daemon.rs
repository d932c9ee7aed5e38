//! The daemon: opens the uplinks and the TAP, builds the host from the configuration, computes
//! the TAP MTU, serves the status socket (and the Prometheus endpoint when `[metrics]` is set),
//! drops privileges, runs the driver task, and handles signals (SIGHUP reloads peers and keys,
//! SIGINT/SIGTERM stop gracefully). The one place that reads the clock is the driver's
//! [`Clock`].

use std::os::unix::fs::FileTypeExt as _;
use std::path::PathBuf;
use std::sync::Arc;

use nix::fcntl::AT_FDCWD;
use psp_core::handshake::Tai64n;
use tokio::net::UnixListener;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::{mpsc, oneshot};

use crate::checks;
use crate::config::{Config, ConfigError, LogFormat, UplinkConfig};
use crate::driver::{Clock, Control, Driver, Parts, build};
use crate::io::notify::Notifier;
use crate::io::raw_eth::RawSocket;
use crate::io::sys::{FileKind, check_ancestors, drop_privileges, lookup_user, set_owner_mode};
use crate::io::tap::Tap;
use crate::io::udp::UdpLink;
use crate::io::{ETHERNET_HEADER_LEN, SLOT_LEN, Uplink};
use crate::metrics;
use crate::state::StateDir;
use crate::status::{self, Info};

/// Options given on the command line (override the config file).
#[derive(Debug, Clone, Default)]
pub(crate) struct Options {
    /// The config file.
    pub(crate) config: PathBuf,
    /// `--user`.
    pub(crate) user: Option<String>,
    /// `--log-format`.
    pub(crate) log_format: Option<LogFormat>,
    /// `--log-level`.
    pub(crate) log_level: Option<String>,
}

/// Why the daemon stopped with an error.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DaemonError {
    /// The configuration is wrong (exit 2).
    #[error("{0}")]
    Config(#[from] ConfigError),
    /// Setting up or running failed (exit 1).
    #[error("{0}")]
    Runtime(String),
}

fn runtime(what: impl core::fmt::Display, e: impl core::fmt::Display) -> DaemonError {
    DaemonError::Runtime(format!("{what}: {e}"))
}

/// Loads the configuration, sets up logging and runs the daemon until SIGINT/SIGTERM.
///
/// # Errors
/// A bad configuration, or a setup or I/O failure; the daemon has cleaned up (TAP removed).
pub(crate) fn run(opts: &Options) -> Result<(), DaemonError> {
    // Key files may belong to the user we drop to (`--user` here, or `[daemon] user`, read
    // on a first pass of the file).
    let run_as = match &opts.user {
        Some(u) => Some(u.clone()),
        None => crate::config::daemon_user(&opts.config),
    };
    if let Some(user) = &run_as
        && let Ok((uid, _)) = lookup_user(user)
    {
        crate::config::allow_key_owner(uid);
    }
    let config = Config::load(&opts.config)?;
    init_logging(&config, opts);
    if let Some(user) = &run_as
        && let Ok((uid, _)) = lookup_user(user)
    {
        let theirs_not = checks::keys_not_owned_by(&config, uid);
        if !theirs_not.is_empty() {
            let files: Vec<String> = theirs_not.iter().map(|p| p.display().to_string()).collect();
            tracing::warn!(
                user = %user,
                "key files {user} does not own: {files}; after the switch to {user} a reload (SIGHUP) reads them as {user} and fails (mode 0600: only the owner reads them). Fix: chown {user}: {files}",
                files = files.join(" ")
            );
        }
    }
    let cal = crate::kernels::calibrate_scrambler();
    tracing::info!(
        scramble = cal.choice.scramble.name(),
        descramble = cal.choice.descramble.name(),
        "scrambler kernels measured on this CPU"
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| runtime("tokio runtime", e))?;
    rt.block_on(serve(config, opts))
}

fn init_logging(config: &Config, opts: &Options) {
    let level = opts
        .log_level
        .clone()
        .unwrap_or_else(|| config.daemon.log_level.clone());
    let filter = tracing_subscriber::EnvFilter::try_new(&level)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // Colours only for a terminal: journald and log files get plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(std::io::stderr);
    // A second initialisation (tests) is harmless: the first subscriber stays.
    let _ = match opts.log_format.unwrap_or(config.daemon.log_format) {
        LogFormat::Json => builder.json().try_init(),
        LogFormat::Human => builder.try_init(),
    };
}

/// The largest PSP frame (Ethernet header included) the uplink carries unfragmented.
/// Capped at a batch slot ([`SLOT_LEN`], 9 KiB: a jumbo frame of MTU 9000 fits); a larger
/// uplink MTU (loopback) is used up to that size.
fn max_frame(uplink: &Uplink, mtu: usize) -> usize {
    let frame = match uplink {
        // The interface MTU counts what follows the Ethernet header.
        Uplink::Raw(_) => mtu + ETHERNET_HEADER_LEN,
        // The whole PSP frame, Ethernet header included, is the UDP payload.
        Uplink::Udp(_) => mtu,
    };
    frame.min(SLOT_LEN)
}

/// The TAP MTU: what is left of the largest frame after the inner Ethernet header and the PSP
/// overhead (see docs/GATEWAY.md, "MTU").
fn tap_mtu(max_frame: usize, overhead: usize) -> Option<usize> {
    max_frame
        .checked_sub(ETHERNET_HEADER_LEN + overhead)
        .filter(|m| *m >= 68)
}

async fn serve(config: Config, opts: &Options) -> Result<(), DaemonError> {
    let clock = Clock::start();
    let wall_origin = Tai64n::from_system_time(std::time::SystemTime::now());
    let uplink = open_uplink("uplink", &config.uplink)?;
    let uplink2 = config
        .uplink2
        .as_ref()
        .map(|u| open_uplink("uplink[1]", u))
        .transpose()?;
    let uplink_mtu = uplink.mtu().map_err(|e| runtime("uplink MTU", e))?;
    let max_frame = max_frame(&uplink, uplink_mtu);
    check_frame_sizes(&config, max_frame)?;
    check_kem_fits(&config, max_frame, uplink_mtu)?;
    let user = opts.user.clone().or_else(|| config.daemon.user.clone());
    let state = Arc::new(open_state(&config.daemon.state_directory, user.as_deref())?);
    let tofu = match crate::tofu::Tofu::load(&crate::tofu::known_peers_path(&config)) {
        Ok(t) => Some(t),
        Err(e) if config.peers.iter().any(|p| p.tofu) => {
            return Err(runtime("known_peers", e));
        }
        Err(e) => {
            // Unused for now; but a reload may add a peer that pins on first use, and its
            // sessions are then refused (`pin_unsaved`): say so now, not only then.
            if config.session.is_some() {
                tracing::warn!(
                    "known_peers: {e}; not used now (no peer has identity = \"tofu\"), but a \
                     peer a reload gives identity = \"tofu\" has its sessions refused until the \
                     file is fixed and the daemon restarted"
                );
            }
            None
        }
    };

    let overhead = build::max_overhead(&config, max_frame);
    let fit = tap_mtu(max_frame, overhead).ok_or_else(|| {
        runtime(
            "uplink MTU",
            format_args!(
                "{uplink_mtu} leaves no room for frames after {overhead} bytes of PSP overhead"
            ),
        )
    })?;
    let mtu = match config.interface.mtu {
        Some(m) if m > fit => {
            return Err(ConfigError {
                file: config.path.clone(),
                key: "interface.mtu".into(),
                problem: format!(
                    "{m} does not fit the uplink: at most {fit} (uplink {} frame bytes - 14 - {overhead} PSP overhead)",
                    max_frame
                ),
            }
            .into());
        }
        Some(m) => m,
        None => fit,
    };

    let name = &config.interface.name;
    let tap =
        Tap::open_with(name, config.interface.offload, config.interface.io_uring).map_err(|e| {
            let hint = checks::hint(checks::Step::Tap(name), &e);
            runtime(format_args!("TAP {name}"), format_args!("{e}{hint}"))
        })?;
    if let Some(mac) = config.interface.mac {
        tap.set_mac(mac)
            .map_err(|e| runtime(format_args!("TAP {name} MAC"), e))?;
    }
    let mac = tap
        .mac()
        .map_err(|e| runtime(format_args!("TAP {name} MAC"), e))?;

    let udp = matches!(uplink, Uplink::Udp(_));
    let (host, names, endpoints) = build::host(
        &config,
        (mac, max_frame, udp),
        (clock.now(), wall_origin),
        &state,
        tofu.as_ref(),
    )
    .map_err(|e| runtime("peers", e))?;
    // Faithful packing carries one inner frame per outer frame: the paper's smaller MTU.
    let mtu = match host.norm_max_inner_len() {
        Some(inner) if inner.saturating_sub(ETHERNET_HEADER_LEN) < mtu => {
            let limit = inner.saturating_sub(ETHERNET_HEADER_LEN);
            tracing::info!(mtu = limit, "TAP MTU lowered to fit normalized frames");
            limit
        }
        _ => mtu,
    };
    tap.set_mtu(mtu)
        .map_err(|e| runtime(format_args!("TAP {name} MTU"), e))?;
    tap.set_up()
        .map_err(|e| runtime(format_args!("TAP {name} up"), e))?;
    for addr in &config.interface.addresses {
        add_address(tap.name(), addr)?;
    }

    let notifier = Notifier::from_env().map_err(|e| runtime("systemd notification", e))?;
    let sock_path = config.daemon.status_socket.clone();
    let listener = bind_status(&sock_path, user.is_some())?;
    // Bound before the privilege drop, so a port below 1024 works with `--user`.
    let metrics_listener = match config.metrics {
        Some(m) => Some(
            tokio::net::TcpListener::bind(m.listen)
                .await
                .map_err(|e| runtime(format_args!("metrics listen {}", m.listen), e))?,
        ),
        None => None,
    };
    let info = Info {
        interface: tap.name().to_owned(),
        uplinks: core::iter::once(&uplink)
            .chain(uplink2.as_ref())
            .map(Uplink::describe)
            .collect(),
        mtu,
        mac,
        paths: core::iter::once(&config.uplink)
            .chain(config.uplink2.as_ref())
            .map(status::PathInfo::of)
            .collect(),
        public_key: config
            .session
            .as_ref()
            .and_then(|s| s.identity.as_ref())
            .map(|id| id.public_key),
    };
    let (ctl_tx, ctl_rx) = mpsc::channel(16);
    let mut uplinks = vec![Arc::new(uplink)];
    uplinks.extend(uplink2.map(Arc::new));
    // Before the privilege drop: the pacer thread (normalized peers) asks for real-time
    // priority as it starts.
    let driver = Driver::new(Parts {
        host,
        tap: Arc::new(tap),
        uplinks,
        endpoints,
        names,
        clock,
        state: Some(Arc::clone(&state)),
        tofu,
        pacer_thread: true,
        ctl: ctl_rx,
        rng: Box::new(rand_core::OsRng),
        max_frame,
    })
    .map_err(|e| runtime("pacer thread", e))?;
    if let Some(user) = &user {
        // The socket's directory may be that user's: the socket is changed as itself, never
        // through a link planted at its name (nor one above it: `bind_status`).
        let ids = lookup_user(user).map_err(|e| runtime(format_args!("--user {user}"), e))?;
        set_owner_mode(
            AT_FDCWD,
            &sock_path,
            &sock_path,
            Some(FileKind::Socket),
            Some(ids),
            None,
        )
        .map_err(|e| runtime("status socket", e))?;
        drop_privileges(user).map_err(|e| runtime(format_args!("--user {user}"), e))?;
    }
    let mut driver_task = tokio::spawn(driver.run());
    let status_task = tokio::spawn(status::serve(listener, info.clone(), ctl_tx.clone()));
    let metrics_task = metrics_listener.map(|l| {
        let source = Arc::new(metrics::Source::new(ctl_tx.clone()));
        tokio::spawn(metrics::serve(l, source, metrics::Limits::DEFAULT))
    });

    let mut hup = signal(SignalKind::hangup()).map_err(|e| runtime("SIGHUP handler", e))?;
    let mut term = signal(SignalKind::terminate()).map_err(|e| runtime("SIGTERM handler", e))?;
    let mut int = signal(SignalKind::interrupt()).map_err(|e| runtime("SIGINT handler", e))?;
    tracing::info!(
        interface = %info.interface,
        mac = %crate::config::format_mac(mac),
        uplinks = %info.uplinks.join(","),
        mtu,
        peers = config.peers.len(),
        sessions = %config.session.as_ref().map_or("off", |s| match s.smkex {
            psp_core::handshake::SmkexMode::Off => "sep",
            psp_core::handshake::SmkexMode::Required => "smkex-required",
            _ => "smkex-preferred",
        }),
        paths = 1 + usize::from(config.uplink2.is_some()),
        kem = config.session.as_ref().map_or("off", |s| match s.kem {
            psp_core::handshake::KemMode::Required => "require",
            psp_core::handshake::KemMode::Preferred => "prefer",
            _ => "off",
        }),
        user = user.as_deref().unwrap_or("root"),
        metrics = %config.metrics.map_or_else(|| "off".to_string(), |m| m.listen.to_string()),
        "ready"
    );
    warn_mixed_normalization(&config);
    warn_no_confidentiality(&config);
    let _ = notifier.notify("READY=1");

    let limit = overhead_limit(mtu, max_frame);
    let mut done = false;
    let result = loop {
        tokio::select! {
            _ = hup.recv() => reload(&config, &ctl_tx, limit, max_frame, &notifier).await,
            _ = term.recv() => break Ok(()),
            _ = int.recv() => break Ok(()),
            r = &mut driver_task => {
                done = true;
                break Err(task_error("driver", r));
            }
        }
    };
    let _ = notifier.notify("STOPPING=1");
    let (tx, rx) = oneshot::channel();
    let last = if ctl_tx.send(Control::Snapshot(tx)).await.is_ok() {
        rx.await.ok()
    } else {
        None
    };
    status_task.abort();
    if let Some(t) = &metrics_task {
        t.abort();
    }
    drop(ctl_tx);
    // The driver ends once every sender of its channel is gone; wait for it to drop its
    // handles on the TAP, so the TAP is gone when we return.
    if !done {
        let _ = driver_task.await;
    }
    let _ = status_task.await;
    if let Some(t) = metrics_task {
        let _ = t.await;
    }
    let _ = std::fs::remove_file(&sock_path);
    if let Some(snap) = last {
        tracing::info!(counters = %status::document(&info, &snap), "stopped");
    }
    result
}

/// A normalized peer's `frame_size` must fit the uplink.
fn check_frame_sizes(config: &Config, max_frame: usize) -> Result<(), DaemonError> {
    for (i, p) in config.peers.iter().enumerate() {
        if let Some(size) = p.normalize.and_then(|n| n.frame_size)
            && size > max_frame
        {
            return Err(ConfigError {
                file: config.path.clone(),
                key: format!("peer[{i}].normalize.frame_size"),
                problem: format!("{size} does not fit the uplink: at most {max_frame}"),
            }
            .into());
        }
    }
    Ok(())
}

/// `[session] kem` on an uplink too small for the KemShare's frame: refused at start, since
/// every hybrid handshake would fail.
fn check_kem_fits(config: &Config, max_frame: usize, uplink_mtu: usize) -> Result<(), DaemonError> {
    match build::kem_frame_len(config) {
        Some(need) if need > max_frame => Err(ConfigError {
            file: config.path.clone(),
            key: "session.kem".into(),
            problem: format!(
                "the KemShare (ML-KEM-768's key) needs {need}-byte frames on path 1 and the \
                 uplink carries {max_frame} (MTU {uplink_mtu}): raise the uplink MTU by {} or \
                 set kem = \"off\"",
                need - max_frame
            ),
        }
        .into()),
        _ => Ok(()),
    }
}

/// Some peers normalized, some not: broadcast and multicast frames for the others leave under
/// the group key at their natural size and time, next to the normalized stream (docs/GATEWAY.md,
/// "Traffic normalization"). Said once at start-up.
fn warn_mixed_normalization(config: &Config) {
    let normalized = config
        .peers
        .iter()
        .filter(|p| p.normalize.is_some())
        .count();
    if normalized > 0 && normalized < config.peers.len() {
        tracing::warn!(
            normalized,
            peers = config.peers.len(),
            "mixed normalization: broadcast frames to the other peers leave at their natural size and time under the group key, which an observer can tell apart from the normalized stream"
        );
    }
}

/// Says, for the group key, each peer and the session suites, when a suite written in the
/// config keeps nothing confidential (`none`, `null-hmac-sha1`, `scramble-hmac-sha1`).
fn warn_no_confidentiality(config: &Config) {
    let gap = status::protection_gap;
    if let Some(why) = gap(config.group.suite) {
        tracing::warn!(suite = %config.group.suite, "group key: {why}");
    }
    for p in &config.peers {
        if let Some(why) = gap(p.security.suite) {
            tracing::warn!(peer = %p.name, suite = %p.security.suite, "{why}");
        }
    }
    for &suite in config.session.iter().flat_map(|s| &s.suites) {
        if let Some(why) = gap(suite) {
            tracing::warn!(%suite, "[session] suites: if chosen, {why}");
        }
    }
}

/// The largest overhead a reloaded configuration may have without changing the TAP MTU.
fn overhead_limit(mtu: usize, max_frame: usize) -> usize {
    max_frame - ETHERNET_HEADER_LEN - mtu
}

fn task_error(which: &str, r: Result<std::io::Result<()>, tokio::task::JoinError>) -> DaemonError {
    match r {
        Ok(Ok(())) => runtime(which, "stopped"),
        Ok(Err(e)) => runtime(format_args!("{which} path"), e),
        Err(e) => runtime(format_args!("{which} task"), e),
    }
}

/// SIGHUP: reread the file and hand the driver the new peers and keys; it applies them in one
/// step that changes nothing on error, and a peer whose settings did not change keeps its
/// sessions, windows, sequence numbers and counters. Anything else that changed is reported and
/// ignored until a restart.
async fn reload(
    current: &Config,
    ctl: &mpsc::Sender<Control>,
    max_overhead: usize,
    max_frame: usize,
    notifier: &Notifier,
) {
    let _ = notifier.notify("RELOADING=1");
    match Config::load(&current.path) {
        Err(e) => tracing::error!(error = %e, "reload failed; keeping the running configuration"),
        Ok(new) => {
            if new.interface != current.interface
                || new.uplink != current.uplink
                || new.uplink2 != current.uplink2
                || new.session != current.session
                || new.daemon != current.daemon
                || new.metrics != current.metrics
            {
                tracing::warn!(
                    "reload: [interface], [uplink], [session], [daemon] and [metrics] changes need a restart; applying peers and keys only"
                );
            }
            let overhead = build::max_overhead(&new, max_frame);
            let peers = new.peers.len();
            if overhead > max_overhead {
                tracing::error!(
                    overhead,
                    max = max_overhead,
                    "reload failed: the new suites need more PSP overhead than the TAP MTU leaves; restart instead"
                );
            } else if let Err(e) = check_frame_sizes(&new, max_frame) {
                tracing::error!(error = %e, "reload failed; keeping the running configuration");
            } else {
                let (tx, rx) = oneshot::channel();
                if ctl.send(Control::Reload(Box::new(new), tx)).await.is_ok() {
                    match rx.await {
                        Ok(Ok(changed)) => tracing::info!(peers, changed, "reloaded"),
                        Ok(Err(e)) => {
                            tracing::error!(error = %e, "reload failed; keeping the running configuration")
                        }
                        Err(_) => {}
                    }
                }
            }
        }
    }
    let _ = notifier.notify("READY=1");
}

/// Opens (and locks) the state directory; with `--user`, hands it and its files to that user
/// first, so the daemon can still write them after dropping privileges. That user could have
/// planted links there: nothing is followed, and what looks planted stops the start
/// ([`StateDir::open_for`]).
fn open_state(dir: &std::path::Path, user: Option<&str>) -> Result<StateDir, DaemonError> {
    let owner = user
        .map(|u| lookup_user(u).map_err(|e| runtime(format_args!("--user {u}"), e)))
        .transpose()?;
    StateDir::open_for(dir, owner).map_err(|e| runtime("state directory", e))
}

fn add_address(dev: &str, addr: &str) -> Result<(), DaemonError> {
    let out = std::process::Command::new("ip")
        .args(["addr", "replace", addr, "dev", dev])
        .output()
        .map_err(|e| runtime(format_args!("ip addr replace {addr} dev {dev}"), e))?;
    if out.status.success() {
        return Ok(());
    }
    Err(runtime(
        format_args!("ip addr replace {addr} dev {dev}"),
        String::from_utf8_lossy(&out.stderr).trim(),
    ))
}

/// Opens one uplink (`which`: `uplink` or `uplink[1]`, for messages); a raw one is prepared
/// first ([`checks::prepare_raw_uplink`]: IPv6 off, then up; warnings).
fn open_uplink(which: &str, config: &UplinkConfig) -> Result<Uplink, DaemonError> {
    match config {
        UplinkConfig::Raw {
            interface,
            rx_ring,
            qdisc_bypass,
        } => {
            checks::prepare_raw_uplink(which, interface).map_err(DaemonError::Runtime)?;
            let socket =
                RawSocket::open_configured(interface, *rx_ring, *qdisc_bypass).map_err(|e| {
                    let hint = checks::hint(checks::Step::RawUplink, &e);
                    runtime(
                        format_args!("{which} {interface}"),
                        format_args!("{e}{hint}"),
                    )
                })?;
            Ok(Uplink::Raw(socket))
        }
        UplinkConfig::Udp { listen } => UdpLink::bind(*listen).map(Uplink::Udp).map_err(|e| {
            let hint = checks::hint(checks::Step::UdpUplink, &e);
            runtime(
                format_args!("{which} udp {listen}"),
                format_args!("{e}{hint}"),
            )
        }),
    }
}

/// Binds the status socket (mode 0660). `handing_over`: with `--user`, the socket goes to that
/// user later, so the directories above its parent must be root's ([`check_ancestors`]).
fn bind_status(path: &std::path::Path, handing_over: bool) -> Result<UnixListener, DaemonError> {
    let err = |e: std::io::Error| {
        let hint = checks::hint(checks::Step::StatusSocket, &e);
        runtime(
            format_args!("status socket {}", path.display()),
            format_args!("{e}{hint}"),
        )
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(err)?;
    }
    if handing_over {
        check_ancestors(path).map_err(|e| runtime("status socket", e))?;
    }
    // A stale socket from a crashed run: remove it, but never a live one, nor anything else
    // found at its name.
    if std::os::unix::net::UnixStream::connect(path).is_ok() {
        return Err(runtime(
            format_args!("status socket {}", path.display()),
            "another daemon is serving it (a psp-gateway with the same TAP name, perhaps in a \
             network namespace without a name that shares /run: set [daemon] status_socket)",
        ));
    }
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_socket() => std::fs::remove_file(path).map_err(err)?,
        Ok(_) => {
            return Err(runtime(
                format_args!("status socket {}", path.display()),
                "something other than a socket is there: move it away or set [daemon] \
                 status_socket",
            ));
        }
        Err(_) => {}
    }
    let listener = UnixListener::bind(path).map_err(err)?;
    // Set on the socket itself, never through a link someone put at its name meanwhile.
    set_owner_mode(
        AT_FDCWD,
        path,
        path,
        Some(FileKind::Socket),
        None,
        Some(0o660),
    )
    .map_err(err)?;
    Ok(listener)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mtu_arithmetic() {
        // 1500-byte raw uplink: 1514-byte frames; bf-cbc-hmac-sha1 adds at most 5 + 3 + 7 + 20.
        assert_eq!(tap_mtu(1514, 35), Some(1465));
        assert_eq!(overhead_limit(1465, 1514), 35);
        assert_eq!(tap_mtu(100, 35), None);
        // A jumbo raw uplink (MTU 9000) is used whole: its frame fits a slot.
        const { assert!(9000 + ETHERNET_HEADER_LEN <= SLOT_LEN) };
        assert_eq!(tap_mtu(9000 + ETHERNET_HEADER_LEN, 8), Some(8992));
        assert_eq!(tap_mtu(9000 + ETHERNET_HEADER_LEN, 24), Some(8976));
    }
}
