//! Start-up checks around the daemon: a raw uplink is prepared (IPv6 off, so its own kernel
//! sends nothing in clear) and looked at (down, loopback, addresses), key files the daemon's
//! `--user` could not read on a reload are named, and setup errors get a hint at the likely
//! cause (a missing capability, a TAP another process owns, a port in use).
//!
//! Everything here runs once at start (or on a failed setup step), never per frame.

use core::net::IpAddr;
use std::io;
use std::path::{Path, PathBuf};

use crate::config::Config;

/// The IPv6 switch of `interface` in this network namespace (`/proc/sys/net` follows the
/// namespace of the process that opens it).
fn disable_ipv6_path(interface: &str) -> PathBuf {
    PathBuf::from(format!("/proc/sys/net/ipv6/conf/{interface}/disable_ipv6"))
}

/// `sysctl`'s name for the switch (a `.` in an interface name, e.g. a VLAN, is written `/`).
fn sysctl_name(interface: &str) -> String {
    format!("net.ipv6.conf.{}.disable_ipv6", interface.replace('.', "/"))
}

/// Prepares the raw uplink `interface` (`which`: `uplink` or `uplink[1]`, for messages), before
/// its socket is opened:
///
/// * IPv6 off. With IPv6 on, the uplink's own kernel sends MLD reports and neighbour and
///   router solicitations (EtherType 0x86dd) in clear on the protected segment, whatever the
///   daemon does. It writes `1` to `/proc/sys/net/ipv6/conf/IF/disable_ipv6` and logs it; if it
///   cannot (no CAP_NET_ADMIN, a read-only `/proc/sys` as under systemd's
///   `ProtectKernelTunables=`), the start fails with the `sysctl` command to run. The loopback
///   interface is left alone (it reaches no wire, and `::1` lives there).
/// * Up: an interface that is down is brought up (after IPv6 is off), with a warning.
/// * Warnings, not failures: the interface is the loopback (frames reach only this host), or
///   has an IPv4 or global IPv6 address (its kernel answers ARP and IP in clear on the
///   segment).
///
/// # Errors
/// IPv6 is on and could not be turned off: one line with the fix.
pub(crate) fn prepare_raw_uplink(which: &str, interface: &str) -> Result<(), String> {
    let entries = crate::io::sys::interfaces().unwrap_or_default();
    let mine: Vec<_> = entries.iter().filter(|e| e.name == interface).collect();
    let Some(flags) = mine.first().map(|e| e.flags) else {
        // No such interface: opening it says so.
        return Ok(());
    };
    let loopback = flags & libc::IFF_LOOPBACK as u32 != 0;
    if loopback {
        tracing::warn!(
            uplink = interface,
            "{which} {interface} is the loopback interface: sealed frames reach only this host"
        );
    } else {
        disable_ipv6(which, interface)?;
    }
    if flags & libc::IFF_UP as u32 == 0 {
        // After IPv6 is off, so the link comes up with nothing to say in clear; before the
        // packet socket is bound (one bound to a down interface reports ENETDOWN once, and a
        // raw uplink that is down refuses every send, which ends the daemon).
        match crate::io::sys::set_if_up(interface) {
            Ok(()) => tracing::warn!(
                uplink = interface,
                "{which} {interface} was down; brought it up (with IPv6 off)"
            ),
            Err(e) => tracing::warn!(
                uplink = interface,
                error = %e,
                "{which} {interface} is down and could not be brought up: nothing is sent or received until `ip link set {interface} up`"
            ),
        }
    }
    let addresses: Vec<IpAddr> = mine
        .iter()
        .filter_map(|e| e.ip)
        .filter(|ip| !loopback && !is_link_local(ip))
        .collect();
    if let Some(ip) = addresses.first() {
        tracing::warn!(
            uplink = interface,
            address = %ip,
            "{which} {interface} has an address ({ip}): its own kernel answers ARP and IP in clear on the protected segment; a raw uplink needs none (docs/CONFIG.md, \"Preparing an uplink\")"
        );
    }
    Ok(())
}

fn is_link_local(ip: &IpAddr) -> bool {
    match ip {
        IpAddr::V4(_) => false,
        IpAddr::V6(v6) => v6.segments()[0] & 0xffc0 == 0xfe80,
    }
}

/// Turns IPv6 off on `interface` unless it is off already (or the kernel has no IPv6).
fn disable_ipv6(which: &str, interface: &str) -> Result<(), String> {
    let path = disable_ipv6_path(interface);
    let Ok(now) = std::fs::read_to_string(&path) else {
        // No IPv6 in this kernel (or namespace), or no such interface (its open reported it).
        return Ok(());
    };
    if now.trim() != "0" {
        return Ok(());
    }
    let sysctl = sysctl_name(interface);
    match std::fs::write(&path, b"1") {
        Ok(()) => {
            tracing::warn!(
                uplink = interface,
                "{which} {interface}: IPv6 was on; turned it off ({sysctl}=1), so its kernel sends no MLD, neighbour or router solicitation in clear. Until now it could have: set it before the link comes up (/etc/sysctl.d/, docs/CONFIG.md \"Preparing an uplink\")"
            );
            Ok(())
        }
        Err(e) => Err(format!(
            "{which} {interface}: IPv6 is on, so its kernel sends MLD reports and neighbour and \
             router solicitations in clear on the protected segment, and the daemon cannot turn \
             it off ({path}: {e}); run `sysctl -w {sysctl}=1` (and put `{sysctl} = 1` in \
             /etc/sysctl.d/ to keep it), then start again",
            path = path.display()
        )),
    }
}

/// What a setup step was doing, for [`hint`].
#[derive(Debug, Clone, Copy)]
pub(crate) enum Step<'a> {
    /// Opening the raw uplink socket (AF_PACKET).
    RawUplink,
    /// Binding the UDP uplink.
    UdpUplink,
    /// Opening the TAP interface of this name.
    Tap(&'a str),
    /// Binding the status socket.
    StatusSocket,
}

/// A hint at the likely cause of `e` during `step`, to append to the error ("" if none).
pub(crate) fn hint(step: Step<'_>, e: &io::Error) -> String {
    // The I/O layer wraps some errors with context, keeping the kind but not the errno.
    let code = e.raw_os_error().unwrap_or(match e.kind() {
        io::ErrorKind::PermissionDenied => libc::EPERM,
        io::ErrorKind::ResourceBusy => libc::EBUSY,
        io::ErrorKind::AddrInUse => libc::EADDRINUSE,
        _ => 0,
    });
    match (step, code) {
        (Step::RawUplink, libc::EPERM | libc::EACCES) => {
            " (a raw uplink needs CAP_NET_RAW: run as root, or grant the capability, as the \
             packaged unit does with AmbientCapabilities=)"
                .to_owned()
        }
        (Step::UdpUplink, libc::EACCES) => {
            " (a port below 1024 needs CAP_NET_BIND_SERVICE, or root)".to_owned()
        }
        (Step::UdpUplink, libc::EADDRINUSE) => {
            " (another process, perhaps another psp-gateway, is bound to it)".to_owned()
        }
        (Step::Tap(_), libc::EACCES) => " (/dev/net/tun is not open to this user: it must be \
             mode 0666, as udev makes it, or run as root; docs/PACKAGING.md)"
            .to_owned(),
        (Step::Tap(_), libc::EPERM) => {
            " (creating a TAP needs CAP_NET_ADMIN: run as root, or grant the capability, as the \
             packaged unit does with AmbientCapabilities=)"
                .to_owned()
        }
        (Step::Tap(name), libc::EBUSY) => format!(
            " (another psp-gateway, or another program, owns TAP {name}: stop it, or give this \
             one another interface.name)"
        ),
        (Step::StatusSocket, libc::EACCES | libc::EPERM) => {
            " (this user cannot create it there: run as root, or set [daemon] status_socket to \
             a directory it can write)"
                .to_owned()
        }
        _ => String::new(),
    }
}

/// The key files (group, peers, identity) of `config` that `uid` does not own: after a drop to
/// that user (`--user`), a reload (SIGHUP) reads them as it and fails for these (mode 0600, so
/// only their owner may). Empty when `uid` is root.
pub(crate) fn keys_not_owned_by(config: &Config, uid: u32) -> Vec<PathBuf> {
    use std::os::unix::fs::MetadataExt as _;
    if uid == 0 {
        return Vec::new();
    }
    let mut paths: Vec<&Path> = vec![config.group.key.path.as_path()];
    paths.extend(config.peers.iter().map(|p| p.security.key.path.as_path()));
    if let Some(id) = config.session.as_ref().and_then(|s| s.identity.as_ref()) {
        paths.push(&id.path);
    }
    let mut out: Vec<PathBuf> = Vec::new();
    for p in paths {
        let theirs = std::fs::metadata(p).is_ok_and(|m| m.uid() == uid);
        if !theirs && !out.iter().any(|q| q == p) {
            out.push(p.to_path_buf());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sysctl_names() {
        assert_eq!(sysctl_name("eth1"), "net.ipv6.conf.eth1.disable_ipv6");
        assert_eq!(
            sysctl_name("eth0.100"),
            "net.ipv6.conf.eth0/100.disable_ipv6"
        );
        assert_eq!(
            disable_ipv6_path("eth0.100"),
            Path::new("/proc/sys/net/ipv6/conf/eth0.100/disable_ipv6")
        );
    }

    #[test]
    fn hints_name_the_cause() {
        let e = |c| io::Error::from_raw_os_error(c);
        assert!(hint(Step::RawUplink, &e(libc::EPERM)).contains("CAP_NET_RAW"));
        assert!(hint(Step::Tap("psp0"), &e(libc::EPERM)).contains("CAP_NET_ADMIN"));
        assert!(hint(Step::Tap("psp0"), &e(libc::EBUSY)).contains("owns TAP psp0"));
        assert!(hint(Step::Tap("psp0"), &e(libc::EACCES)).contains("/dev/net/tun"));
        assert!(hint(Step::UdpUplink, &e(libc::EADDRINUSE)).contains("another psp-gateway"));
        assert_eq!(hint(Step::RawUplink, &e(libc::ENODEV)), "");
    }

    #[test]
    fn link_local_is_not_an_address_to_warn_about() {
        assert!(is_link_local(&"fe80::1".parse().unwrap()));
        assert!(!is_link_local(&"2001:db8::1".parse().unwrap()));
        assert!(!is_link_local(&"10.0.0.1".parse().unwrap()));
    }
}
