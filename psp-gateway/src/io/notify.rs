//! systemd readiness notification (`sd_notify` protocol over `$NOTIFY_SOCKET`).
//!
//! Dropping privileges lives in [`super::sys`] (`drop_privileges`, `chown_path`).

use std::ffi::OsStr;
use std::io;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::path::Path;

/// Sends `state` (e.g. `"READY=1"`, `"RELOADING=1"`, `"STOPPING=1"`) to systemd when
/// `$NOTIFY_SOCKET` is set; does nothing otherwise.
///
/// Public for the integration tests (`tests/io_root.rs`); the daemon uses `Notifier`.
///
/// # Errors
/// Socket errors.
pub fn sd_notify(state: &str) -> io::Result<()> {
    match std::env::var_os("NOTIFY_SOCKET") {
        Some(socket) if !socket.is_empty() => sd_notify_to(&socket, state),
        _ => Ok(()),
    }
}

/// A connection to `$NOTIFY_SOCKET`, made once while still privileged so notifications keep
/// working after [`drop_privileges`](super::sys::drop_privileges) (the socket's directory may not be reachable afterwards).
#[derive(Debug)]
pub(crate) struct Notifier {
    sock: Option<UnixDatagram>,
}

impl Notifier {
    /// Connects to `$NOTIFY_SOCKET` if it is set (a no-op notifier otherwise).
    ///
    /// # Errors
    /// An unsupported address or a failed connect.
    pub(crate) fn from_env() -> io::Result<Self> {
        let Some(socket) = std::env::var_os("NOTIFY_SOCKET").filter(|s| !s.is_empty()) else {
            return Ok(Self { sock: None });
        };
        let addr = notify_addr(&socket)?;
        let sock = UnixDatagram::unbound()?;
        sock.connect_addr(&addr).map_err(|e| {
            io::Error::new(e.kind(), format!("NOTIFY_SOCKET {}: {e}", socket.display()))
        })?;
        Ok(Self { sock: Some(sock) })
    }

    /// Sends `state` (`READY=1`, `RELOADING=1`, `STOPPING=1`, ...); nothing without a socket.
    ///
    /// # Errors
    /// Socket errors.
    pub(crate) fn notify(&self, state: &str) -> io::Result<()> {
        match &self.sock {
            Some(s) => s.send(state.as_bytes()).map(drop),
            None => Ok(()),
        }
    }
}

/// Sends `state` as one datagram to the `sd_notify` socket `socket`: a filesystem path, or
/// `@name` for the abstract namespace.
///
/// # Errors
/// An unsupported address (`vsock:`), or socket errors.
pub(crate) fn sd_notify_to(socket: &OsStr, state: &str) -> io::Result<()> {
    let addr = notify_addr(socket)?;
    let sock = UnixDatagram::unbound()?;
    let sent = sock
        .send_to_addr(state.as_bytes(), &addr)
        .map_err(|e| io::Error::new(e.kind(), format!("sd_notify to {}: {e}", socket.display())))?;
    if sent != state.len() {
        return Err(io::Error::other(format!(
            "sd_notify: short send ({sent} of {})",
            state.len()
        )));
    }
    Ok(())
}

/// The socket address of `$NOTIFY_SOCKET`: a filesystem path, or `@name` (abstract).
fn notify_addr(socket: &OsStr) -> io::Result<SocketAddr> {
    match socket.as_bytes().split_first() {
        Some((b'@', name)) => SocketAddr::from_abstract_name(name),
        Some((b'/', _)) => SocketAddr::from_pathname(Path::new(socket)),
        _ => Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!(
                "NOTIFY_SOCKET {}: only paths and @abstract names",
                socket.display()
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notify_to_path_and_abstract() {
        let dir = std::env::temp_dir().join(format!("psp-notify-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("notify.sock");
        let _ = std::fs::remove_file(&path);
        let rx = UnixDatagram::bind(&path).unwrap();
        sd_notify_to(path.as_os_str(), "READY=1").unwrap();
        let mut buf = [0; 64];
        let n = rx.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1");
        std::fs::remove_dir_all(&dir).unwrap();

        let name = format!("psp-notify-test-{}", std::process::id());
        let rx = UnixDatagram::bind_addr(&SocketAddr::from_abstract_name(name.as_bytes()).unwrap())
            .unwrap();
        sd_notify_to(OsStr::new(&format!("@{name}")), "STOPPING=1").unwrap();
        let n = rx.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"STOPPING=1");
    }

    #[test]
    fn notify_refuses_odd_addresses() {
        assert_eq!(
            sd_notify_to(OsStr::new("vsock:2:1234"), "READY=1")
                .unwrap_err()
                .kind(),
            io::ErrorKind::Unsupported
        );
        assert!(sd_notify_to(OsStr::new(""), "READY=1").is_err());
    }
}
