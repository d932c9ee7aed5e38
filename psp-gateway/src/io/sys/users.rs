//! Users and privileges: looking a user up, dropping root, handing a file to a user.
//!
//! The daemon opens the TAP and its sockets as root, then calls [`drop_privileges`]: the open
//! descriptors keep working for the unprivileged user, nothing new can be opened. Files it
//! must still reach afterwards (the status socket, the state directory) are handed over first
//! with [`chown_path`] and [`set_owner_mode`].
//!
//! Those files sit in directories the unprivileged user may write (it owns the state directory
//! after the first start), so root never follows a path there: each file is opened as itself
//! (`O_PATH | O_NOFOLLOW`), checked through that descriptor (not a symbolic link, one hard link,
//! the kind expected, owned by root or that user) and changed through it, so what is checked is
//! what is changed. [`check_ancestors`] refuses a path whose directories above its parent others
//! than root could change.
//!
//! Everything here goes through `nix` (`getpwnam_r`, `setgroups`, `setgid`, `setuid`,
//! `getuid`, `geteuid`, `openat`, `fstat`, `fchownat`, `fchmodat`): no hand-written `unsafe`.

use std::io;
use std::os::fd::{AsFd, AsRawFd as _, OwnedFd};
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

use nix::fcntl::{AT_FDCWD, AtFlags, OFlag, openat};
use nix::sys::stat::{FchmodatFlags, FileStat, Mode, SFlag, fchmodat, fstat};
use nix::unistd::{self, Gid, Uid, User, fchownat};

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

/// Gives `path` to user `user` (owner: its uid, group: its primary gid) without following a
/// link: see `set_owner_mode`, which this is with any kind of file.
///
/// Public for the integration tests (`tests/io_root.rs`).
///
/// # Errors
/// Unknown user, a path `set_owner_mode` refuses, or `chown` fails.
pub fn chown_path(path: &Path, user: &str) -> io::Result<()> {
    let ids = lookup_user(user)?;
    set_owner_mode(AT_FDCWD, path, path, None, Some(ids), None)
        .map_err(|e| io::Error::new(e.kind(), format!("chown to {user}: {e}")))
}

/// What a file handed to the daemon's user is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FileKind {
    /// A regular file.
    Regular,
    /// A directory.
    Directory,
    /// A Unix socket.
    Socket,
}

impl FileKind {
    fn of(st: &FileStat) -> Option<Self> {
        match SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT {
            SFlag::S_IFREG => Some(Self::Regular),
            SFlag::S_IFDIR => Some(Self::Directory),
            SFlag::S_IFSOCK => Some(Self::Socket),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Regular => "a regular file",
            Self::Directory => "a directory",
            Self::Socket => "a socket",
        }
    }
}

/// Sets the owner (`owner`: uid, gid) and the permission bits (`mode`) of `name`, relative to
/// the directory `dir` (or [`AT_FDCWD`]), without ever following a link: the file is opened as
/// itself (`O_PATH | O_NOFOLLOW`), checked and changed through that descriptor. `shown` names
/// it in errors.
///
/// Refused, because the daemon's user could have planted it to have root change another file:
/// a symbolic link; a file with more than one hard link (another name may be outside); a file
/// owned by neither root, nor the new owner, nor the caller; a file of another kind than `kind`.
///
/// # Errors
/// What was refused, naming `shown` and the fix; or the calls fail (the mode is set through
/// `/proc/self/fd`, so without `/proc` it fails rather than follow a path).
pub(crate) fn set_owner_mode(
    dir: impl AsFd,
    name: &Path,
    shown: &Path,
    kind: Option<FileKind>,
    owner: Option<(u32, u32)>,
    mode: Option<u32>,
) -> io::Result<()> {
    let shown = shown.display();
    let fail = |e: nix::Error| io::Error::from(e);
    let fd: OwnedFd = openat(
        dir,
        name,
        OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| io::Error::new(fail(e).kind(), format!("{shown}: {e}")))?;
    let st = fstat(&fd).map_err(|e| io::Error::new(fail(e).kind(), format!("{shown}: {e}")))?;
    let refused = |problem: String| io::Error::new(io::ErrorKind::InvalidInput, problem);
    let is = FileKind::of(&st);
    if SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFLNK {
        return Err(refused(format!(
            "{shown} is a symbolic link; as root the daemon never follows one its user could have \
             planted: remove it"
        )));
    }
    match (kind, is) {
        (_, None) => {
            return Err(refused(format!(
                "{shown} is not a regular file, directory or socket: remove it"
            )));
        }
        (Some(want), Some(is)) if want != is => {
            return Err(refused(format!(
                "{shown} is {}, not {}: remove it",
                is.name(),
                want.name()
            )));
        }
        _ => {}
    }
    if is != Some(FileKind::Directory) && st.st_nlink > 1 {
        return Err(refused(format!(
            "{shown} has {} hard links; another name could be a file the daemon's user may not \
             change: remove it",
            st.st_nlink
        )));
    }
    let me = unistd::geteuid().as_raw();
    if st.st_uid != 0 && st.st_uid != me && owner.is_none_or(|(uid, _)| st.st_uid != uid) {
        return Err(refused(format!(
            "{shown} is owned by uid {}, neither root nor the daemon's user: refused",
            st.st_uid
        )));
    }
    if let Some((uid, gid)) = owner {
        fchownat(
            &fd,
            "",
            Some(Uid::from_raw(uid)),
            Some(Gid::from_raw(gid)),
            AtFlags::AT_EMPTY_PATH,
        )
        .map_err(|e| io::Error::new(fail(e).kind(), format!("chown {shown}: {e}")))?;
    }
    if let Some(mode) = mode {
        // No fchmod on an O_PATH descriptor: its /proc link names this very file.
        let at = PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()));
        fchmodat(
            AT_FDCWD,
            &at,
            Mode::from_bits_truncate(mode),
            FchmodatFlags::FollowSymlink,
        )
        .map_err(|e| io::Error::new(fail(e).kind(), format!("chmod {shown}: {e}")))?;
    }
    Ok(())
}

/// Refuses `path` if a directory above its parent could be changed by someone other than root:
/// one that is not root's, or that group or others may write without the sticky bit (with it,
/// the entry below must be root's). Whoever could, could swap the parent for a link to a
/// directory of root's, which root would then hand over. The parent itself may be anyone's: the
/// last name is opened without following a link. Directories not there yet are fine below a
/// root-only one (root creates them), refused in a sticky one (anyone could create them first).
///
/// # Errors
/// The first such directory, with what is wrong; or one cannot be read.
pub(crate) fn check_ancestors(path: &Path) -> io::Result<()> {
    let path = std::path::absolute(path)?;
    let Some(parent) = path.parent() else {
        return Ok(());
    };
    let mut above: Vec<&Path> = parent.ancestors().skip(1).collect();
    above.reverse();
    let refused = |problem: String| io::Error::new(io::ErrorKind::InvalidInput, problem);
    for (i, dir) in above.iter().enumerate() {
        // The directory as resolved: earlier ones were checked, so no one else moves it.
        let m = match std::fs::metadata(dir) {
            // Not there yet: root creates it and what is below, in a directory checked above.
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(io::Error::new(e.kind(), format!("{}: {e}", dir.display()))),
            Ok(m) => m,
        };
        if m.uid() != 0 {
            return Err(refused(format!(
                "{} is owned by uid {}, not root: whoever owns it could redirect {} (use a \
                 path whose directories above the last two are root's)",
                dir.display(),
                m.uid(),
                path.display()
            )));
        }
        if m.mode() & 0o022 == 0 {
            continue;
        }
        // Others may write it: only a sticky directory will do, whose entry below is root's
        // (and exists: anyone could create it first).
        let next = above.get(i + 1).copied().unwrap_or(parent);
        let next_is_roots = std::fs::symlink_metadata(next).is_ok_and(|n| n.uid() == 0);
        if m.mode() & 0o1000 == 0 || !next_is_roots {
            return Err(refused(format!(
                "{} may be written by group or others, and {} in it is not a root-owned entry of \
                 a sticky directory: whoever can write it could redirect {} (use a path whose \
                 directories above the last two are root's and not writable by others)",
                dir.display(),
                next.display(),
                path.display()
            )));
        }
    }
    Ok(())
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

    /// Run as root (as CI does): a directory above the parent that another user owns, or that
    /// others may write without the sticky bit, is refused; the parent itself may be anyone's;
    /// directories not there yet are fine below root's, not in a sticky one.
    #[test]
    fn ancestors_others_could_change_are_refused() {
        use std::os::unix::fs::PermissionsExt as _;
        let top = std::env::temp_dir().join(format!("psp-ancestors-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&top);
        let theirs = top.join("theirs");
        std::fs::create_dir_all(theirs.join("parent")).unwrap();
        std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
        let mine = top.join("mine");
        std::fs::create_dir_all(mine.join("parent")).unwrap();
        let by_owner = check_ancestors(&theirs.join("parent/state"));
        let parent_theirs = check_ancestors(&theirs.join("state"));
        let ok = check_ancestors(&mine.join("parent/state"));
        let not_yet = check_ancestors(&mine.join("a/b/parent/state"));
        std::fs::set_permissions(&mine, std::fs::Permissions::from_mode(0o777)).unwrap();
        let by_mode = check_ancestors(&mine.join("parent/state"));
        std::fs::set_permissions(&mine, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let sticky = check_ancestors(&mine.join("parent/state"));
        let sticky_not_yet = check_ancestors(&mine.join("a/parent/state"));
        std::fs::remove_dir_all(&top).unwrap();
        let e = by_owner.unwrap_err().to_string();
        assert!(e.contains("theirs is owned by uid 65534, not root"), "{e}");
        parent_theirs.unwrap();
        ok.unwrap();
        let e = by_mode.unwrap_err().to_string();
        assert!(e.contains("mine may be written by group or others"), "{e}");
        sticky.unwrap();
        not_yet.unwrap();
        let e = sticky_not_yet.unwrap_err().to_string();
        assert!(e.contains("a in it is not a root-owned entry"), "{e}");
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
