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

#[cfg(test)]
mod tests {
    use core::sync::atomic::{AtomicU32, Ordering};
    use std::os::unix::fs::PermissionsExt;
    use std::path::PathBuf;

    use super::*;

    /// A temp file removed on drop.
    struct Temp(PathBuf);

    impl Temp {
        fn new(content: &[u8], mode: u32) -> Self {
            static N: AtomicU32 = AtomicU32::new(0);
            let path = std::env::temp_dir().join(format!(
                "psp-keyfile-unit-{}-{}.key",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            std::fs::write(&path, content).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            Self(path)
        }
    }

    impl Drop for Temp {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    /// The gateway's words in the shared rules' messages (the rules themselves are tested in
    /// the `psp-keyfile` crate).
    #[test]
    fn refuses_bad_content_without_echoing_it() {
        for content in [&b"zz112233"[..], b"0011 2233", b"001", b"secret-words"] {
            let t = Temp::new(content, 0o600);
            let e = read(&t.0).unwrap_err();
            assert!(
                e.ends_with("does not hold one hex key (as printed by `psp-gateway keygen`)"),
                "{e}"
            );
            assert!(!e.contains("secret") && !e.contains("0011"), "{e}");
        }
        let t = Temp::new(b" \n", 0o600);
        assert!(
            read(&t.0)
                .unwrap_err()
                .contains("is empty; create it with `psp-gateway keygen --suite SUITE > ")
        );
        let t = Temp::new(&[b'0'; 5000], 0o600);
        assert!(read(&t.0).unwrap_err().contains("is 5000 bytes"));
    }

    /// A root daemon that drops to `--user` accepts that user's key files (and only those).
    #[test]
    fn accepts_the_run_as_users_files() {
        let t = Temp::new(b"00112233445566778899aabbccddeeff", 0o600);
        std::os::unix::fs::chown(&t.0, Some(23456), None).unwrap();
        assert!(read(&t.0).is_err());
        allow_owner(23456);
        assert_eq!(read(&t.0).unwrap().len(), 16);
        std::os::unix::fs::chown(&t.0, Some(23457), None).unwrap();
        assert!(read(&t.0).is_err());
    }
}
