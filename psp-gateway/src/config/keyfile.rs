//! Key files: one hex key (as `psp-gateway keygen` prints it), in a regular file of mode 0600 or
//! stricter, owned by root or by the process's effective user. The rules, their messages and the
//! zeroizing read are the `psp-keyfile` crate's (shared with `psp-mp --key-file`); this module
//! adds the user the daemon drops to. The daemon (`key_file` in the config) and the tools
//! (`scramble`/`inspect --key-file`) read keys through [`read`].

use std::path::Path;

use zeroize::Zeroizing;

/// Reads the key in `path`.
///
/// # Errors
/// The problem, as the `PROBLEM` part of a config error (it names `path`).
pub(crate) fn read(path: &Path) -> Result<Zeroizing<Vec<u8>>, String> {
    let run_as = RUN_AS.load(core::sync::atomic::Ordering::Relaxed);
    psp_keyfile::read(
        path,
        &psp_keyfile::Rules {
            also_owner: (run_as != NO_USER).then_some(run_as),
            keygen: "psp-gateway keygen",
            create: "psp-gateway keygen --suite SUITE",
        },
    )
    .map_err(|msg| match std::fs::File::open(path) {
        // After the switch to `--user`, say which file the user cannot open and the fix.
        Err(e) if msg.starts_with("cannot open") => format!("{msg}{}", dropped_hint(path, &e)),
        _ => msg,
    })
}

/// After the switch to `--user` (the effective uid is the one [`allow_owner`] named), a key
/// file it may not open is one still owned by root: say so, with the fix.
fn dropped_hint(path: &Path, e: &std::io::Error) -> String {
    let run_as = RUN_AS.load(core::sync::atomic::Ordering::Relaxed);
    if e.kind() != std::io::ErrorKind::PermissionDenied
        || run_as == NO_USER
        || crate::io::sys::current_uids().1 != run_as
    {
        return String::new();
    }
    format!(
        "; the daemon switched to uid {run_as} (--user / daemon.user) and reads key files as \
         that user on every reload: chown {run_as} {}",
        path.display()
    )
}

/// "No `--user`": no extra owner allowed.
const NO_USER: u32 = u32::MAX;

/// The uid the daemon drops to (`--user`, `[daemon] user`), whose key files are its own too.
static RUN_AS: core::sync::atomic::AtomicU32 = core::sync::atomic::AtomicU32::new(NO_USER);

/// Also accepts key files owned by `uid`: the user a root daemon drops to (`--user`), as the
/// packaged unit's `chown psp-gateway: /etc/psp/*.key` asks. That user reads them after the
/// drop on a reload anyway, so trusting them before it adds nothing.
pub(crate) fn allow_owner(uid: u32) {
    RUN_AS.store(uid, core::sync::atomic::Ordering::Relaxed);
}

/// The uid [`allow_owner`] named (the user a root daemon drops to), if any.
pub(crate) fn run_as() -> Option<u32> {
    let uid = RUN_AS.load(core::sync::atomic::Ordering::Relaxed);
    (uid != NO_USER).then_some(uid)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    /// A root daemon that drops to `--user` accepts that user's key files (and only those), and
    /// its messages name `psp-gateway keygen` (the rules themselves are tested in the
    /// `psp-keyfile` crate).
    #[test]
    fn accepts_the_run_as_users_files() {
        let path =
            std::env::temp_dir().join(format!("psp-keyfile-unit-{}.key", std::process::id()));
        std::fs::write(&path, b"00112233445566778899aabbccddeeff").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::os::unix::fs::chown(&path, Some(23456), None).unwrap();
        assert!(read(&path).is_err());
        allow_owner(23456);
        assert_eq!(read(&path).unwrap().len(), 16);
        std::os::unix::fs::chown(&path, Some(23457), None).unwrap();
        assert!(read(&path).is_err());
        std::fs::write(&path, b"secret-words").unwrap();
        std::os::unix::fs::chown(&path, Some(23456), None).unwrap();
        let e = read(&path).unwrap_err();
        assert!(
            e.ends_with("does not hold one hex key (as printed by `psp-gateway keygen`)"),
            "{e}"
        );
        std::fs::write(&path, b" \n").unwrap();
        let e = read(&path).unwrap_err();
        assert!(
            e.contains("is empty; create it with `psp-gateway keygen --suite SUITE > "),
            "{e}"
        );
        let _ = std::fs::remove_file(&path);
    }
}
