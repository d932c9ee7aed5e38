//! Users and privileges: looking a user up, dropping root, handing a file to a user.
//!
//! The daemon opens the TAP and its sockets as root, then calls [`drop_privileges`]: the open
//! descriptors keep working for the unprivileged user, nothing new can be opened. Files it
//! must still reach afterwards (the status socket) are handed over first with [`chown_path`].
//!
//! Everything here goes through `nix` (`getpwnam_r`, `setgroups`, `setgid`, `setuid`,
//! `getuid`, `geteuid`): no hand-written `unsafe`.

use std::io;
use std::path::Path;

use nix::unistd::{self, Gid, Uid, User};

/// The uid and primary gid of user `name` (`getpwnam_r`).
///
/// Public for the integration tests (`tests/io_root.rs`).
///
/// # Errors
/// `NotFound` for an unknown user; `InvalidInput` for a name with a NUL; lookup failures.
pub fn lookup_user(name: &str) -> io::Result<(u32, u32)> {
    if name.contains('\0') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("bad user name {name:?}"),
        ));
    }
    match User::from_name(name) {
        Ok(Some(user)) => Ok((user.uid.as_raw(), user.gid.as_raw())),
        Ok(None) => Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("no user {name}"),
        )),
        Err(e) => {
            let e = io::Error::from(e);
            Err(io::Error::new(
                e.kind(),
                format!("looking up user {name}: {e}"),
            ))
        }
    }
}

/// Switches the whole process (glibc applies it to every thread) to `uid`/`gid` with no
/// supplementary groups: `setgroups(0)`, `setgid`, `setuid`, in that order, then checks that
/// `setuid(0)` fails. Open descriptors keep working.
///
/// # Errors
/// A failing call, or root still reachable afterwards.
fn switch_user(uid: u32, gid: u32) -> io::Result<()> {
    let fail = |what: String| {
        move |e: nix::Error| io::Error::new(io::Error::from(e).kind(), format!("{what}: {e}"))
    };
    unistd::setgroups(&[]).map_err(fail("setgroups(0)".to_owned()))?;
    unistd::setgid(Gid::from_raw(gid)).map_err(fail(format!("setgid({gid})")))?;
    unistd::setuid(Uid::from_raw(uid)).map_err(fail(format!("setuid({uid})")))?;
    // This must fail now that real, effective and saved uid are `uid`.
    if uid != 0 && unistd::setuid(Uid::from_raw(0)).is_ok() {
        return Err(io::Error::other(format!(
            "setuid({uid}) left root reachable"
        )));
    }
    Ok(())
}

/// The real and effective uid of the process.
///
/// Public for the integration tests (`tests/io_root.rs`).
pub fn current_uids() -> (u32, u32) {
    (unistd::getuid().as_raw(), unistd::geteuid().as_raw())
}

/// Drops root: switches to user `name` (its uid, primary gid, no supplementary groups).
///
/// `setgroups(0)`, `setgid`, `setuid` in that order, for every thread of the process, then
/// checks that `setuid(0)` fails. Descriptors opened before keep working.
///
/// Public for the integration tests (`tests/io_root.rs`).
///
/// # Errors
/// Unknown user, a user with uid 0 (nothing would be dropped), or the switch fails.
pub fn drop_privileges(name: &str) -> io::Result<()> {
    let (uid, gid) = lookup_user(name)?;
    if uid == 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("--user {name}: uid 0, that drops no privilege"),
        ));
    }
    switch_user(uid, gid)
        .map_err(|e| io::Error::new(e.kind(), format!("dropping privileges to {name}: {e}")))
}

/// Gives `path` to user `user` (owner: its uid, group: its primary gid), e.g. the status
/// socket before [`drop_privileges`].
///
/// Public for the integration tests (`tests/io_root.rs`).
///
/// # Errors
/// Unknown user, or `chown` fails.
pub fn chown_path(path: &Path, user: &str) -> io::Result<()> {
    let (uid, gid) = lookup_user(user)?;
    std::os::unix::fs::chown(path, Some(uid), Some(gid))
        .map_err(|e| io::Error::new(e.kind(), format!("chown {} to {user}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_user() {
        assert_eq!(
            lookup_user("no-such-user-psp").unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        assert_eq!(
            lookup_user("a\0b").unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
        assert_eq!(lookup_user("root").unwrap(), (0, 0));
    }

    #[test]
    fn drop_to_root_or_unknown_is_refused() {
        assert_eq!(
            drop_privileges("root").unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
        assert_eq!(
            drop_privileges("no-such-user-psp").unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
    }
}
