//! # psp-keyfile
//!
//! The one place that reads secret key files for psp's programs: the gateway daemon (`key_file`,
//! `identity_file`), its tools (`scramble`/`inspect --key-file`) and `psp-mp --key-file`. A key
//! file holds one hex key (surrounding whitespace allowed), in a **regular file of mode 0600 or
//! stricter, owned by root or by the process's effective user** (or one more owner the caller
//! names: the user a root daemon drops to). Anything else is refused with one line that names
//! the path, what is wrong and the command that fixes it; the key's bytes are zeroized when
//! dropped and never appear in a message.
//!
//! Layer: std file I/O only (no async, no psp protocol). It does not create key files (the
//! programs' `keygen` commands do) and does not protect a key once read.
//!
//! MSRV: the workspace's. No features. Unix only.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

use zeroize::Zeroizing;

/// The largest key file accepted: a 1024-byte key in hex with a newline is 2049 bytes.
pub const MAX_FILE_LEN: u64 = 4096;

/// What a program adds to the rules: an extra owner and the words of its messages.
#[derive(Clone, Copy, Debug)]
pub struct Rules<'a> {
    /// One more uid whose files are accepted besides root and the effective user (a root
    /// daemon's `--user`, who reads them after the privilege drop anyway).
    pub also_owner: Option<u32>,
    /// The command that prints such a key, for the "not hex" message (`psp-gateway keygen`).
    pub keygen: &'a str,
    /// The command that creates one, for the "empty" message (`psp-gateway keygen --suite
    /// SUITE`); the message appends `> PATH`.
    pub create: &'a str,
}

/// Reads the key in `path` under `rules`.
///
/// # Errors
/// One line naming `path`: it cannot be opened or read, is not a regular file, has group or
/// other permission bits, belongs to another user, is over [`MAX_FILE_LEN`] bytes, is empty, or
/// does not hold one hex key. The file's content is never quoted.
pub fn read(path: &Path, rules: &Rules<'_>) -> Result<Zeroizing<Vec<u8>>, String> {
    let shown = path.display();
    // O_NONBLOCK: opening a FIFO (refused below as not a regular file) must not hang.
    let mut file: File = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| format!("cannot open {shown}: {e}"))?;
    // The checks use the opened file, so the file checked is the file read.
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot stat {shown}: {e}"))?;
    if !meta.is_file() {
        return Err(format!("{shown} is not a regular file"));
    }
    check_mode(path, meta.permissions().mode())?;
    if rules.also_owner != Some(meta.uid()) {
        check_owner(path, meta.uid(), nix::unistd::geteuid().as_raw())?;
    }
    if meta.len() > MAX_FILE_LEN {
        return Err(format!(
            "{shown} is {} bytes; a key file holds one hex key (at most {MAX_FILE_LEN} bytes)",
            meta.len()
        ));
    }
    let mut text = Zeroizing::new(Vec::with_capacity(MAX_FILE_LEN as usize + 1));
    // Read one byte past the limit so a file that grew after the stat is still refused.
    (&mut file)
        .take(MAX_FILE_LEN + 1)
        .read_to_end(&mut text)
        .map_err(|e| format!("cannot read {shown}: {e}"))?;
    if text.len() as u64 > MAX_FILE_LEN {
        return Err(format!(
            "{shown} is over {MAX_FILE_LEN} bytes; a key file holds one hex key"
        ));
    }
    let hex = text.trim_ascii();
    if hex.is_empty() {
        return Err(format!(
            "{shown} is empty; create it with `{} > {shown}`",
            rules.create
        ));
    }
    let not_hex = || {
        format!(
            "{shown} does not hold one hex key (as printed by `{}`)",
            rules.keygen
        )
    };
    if hex.len() % 2 != 0 {
        return Err(not_hex());
    }
    let mut key = Zeroizing::new(vec![0u8; hex.len() / 2]);
    hex::decode_to_slice(hex, &mut key[..]).map_err(|_| not_hex())?;
    Ok(key)
}

/// The mode rule: no permission bits for group or others (0600 and 0400 are fine).
///
/// # Errors
/// One line with the mode and the `chmod` that fixes it.
pub fn check_mode(path: &Path, mode: u32) -> Result<(), String> {
    let mode = mode & 0o7777;
    if mode & 0o077 != 0 {
        let shown = path.display();
        return Err(format!(
            "{shown} is mode {mode:04o}; want 0600 or stricter (chmod 600 {shown})"
        ));
    }
    Ok(())
}

/// The owner rule: a key file belongs to root or to the effective user `euid` of the process.
/// A file another user owns could be rewritten by them (mode aside, they may `chmod` it back),
/// so its key is not ours to trust.
///
/// # Errors
/// One line naming the path, the owner and what is expected.
pub fn check_owner(path: &Path, owner: u32, euid: u32) -> Result<(), String> {
    if owner == 0 || owner == euid {
        return Ok(());
    }
    let shown = path.display();
    let want = if euid == 0 {
        "root (uid 0)".to_owned()
    } else {
        format!("root (uid 0) or uid {euid}, the user this runs as")
    };
    Err(format!(
        "{shown} is owned by uid {owner}; want {want} (chown {euid} {shown})"
    ))
}

#[cfg(test)]
mod tests {
    use core::sync::atomic::{AtomicU32, Ordering};
    use std::os::unix::fs::PermissionsExt;
    use std::path::PathBuf;

    use super::*;

    const RULES: Rules<'static> = Rules {
        also_owner: None,
        keygen: "psp-gateway keygen",
        create: "psp-gateway keygen --suite SUITE",
    };

    /// A temp file removed on drop.
    struct Temp(PathBuf);

    impl Temp {
        fn new(content: &[u8], mode: u32) -> Self {
            static N: AtomicU32 = AtomicU32::new(0);
            let path = std::env::temp_dir().join(format!(
                "psp-keyfile-crate-{}-{}.key",
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

    #[test]
    fn reads_keygen_output() {
        let t = Temp::new(b"  00112233445566778899aabbccddeeff\n\n", 0o600);
        assert_eq!(
            &read(&t.0, &RULES).unwrap()[..],
            &hex::decode("00112233445566778899aabbccddeeff").unwrap()[..]
        );
        let t = Temp::new(b"00112233445566778899AABBCCDDEEFF", 0o400);
        assert_eq!(read(&t.0, &RULES).unwrap().len(), 16);
    }

    #[test]
    fn refuses_group_or_other_bits() {
        for mode in [0o644, 0o640, 0o604, 0o660, 0o601] {
            let t = Temp::new(b"0011", mode);
            let e = read(&t.0, &RULES).unwrap_err();
            assert_eq!(
                e,
                format!(
                    "{} is mode {mode:04o}; want 0600 or stricter (chmod 600 {})",
                    t.0.display(),
                    t.0.display()
                )
            );
        }
    }

    #[test]
    fn refuses_bad_content_without_echoing_it() {
        for content in [&b"zz112233"[..], b"0011 2233", b"001", b"secret-words"] {
            let t = Temp::new(content, 0o600);
            let e = read(&t.0, &RULES).unwrap_err();
            assert!(
                e.ends_with("does not hold one hex key (as printed by `psp-gateway keygen`)"),
                "{e}"
            );
            assert!(!e.contains("secret") && !e.contains("0011"), "{e}");
        }
        let t = Temp::new(b" \n", 0o600);
        let e = read(&t.0, &RULES).unwrap_err();
        assert_eq!(
            e,
            format!(
                "{} is empty; create it with `psp-gateway keygen --suite SUITE > {}`",
                t.0.display(),
                t.0.display()
            )
        );
        let t = Temp::new(&[b'0'; 5000], 0o600);
        assert!(read(&t.0, &RULES).unwrap_err().contains("is 5000 bytes"));
    }

    #[test]
    fn owner_must_be_root_or_us() {
        let p = Path::new("/etc/psp/a.key");
        assert_eq!(check_owner(p, 0, 0), Ok(()));
        assert_eq!(check_owner(p, 0, 1000), Ok(()));
        assert_eq!(check_owner(p, 1000, 1000), Ok(()));
        assert_eq!(
            check_owner(p, 12345, 0).unwrap_err(),
            "/etc/psp/a.key is owned by uid 12345; want root (uid 0) (chown 0 /etc/psp/a.key)"
        );
        assert_eq!(
            check_owner(p, 12345, 1000).unwrap_err(),
            "/etc/psp/a.key is owned by uid 12345; want root (uid 0) or uid 1000, the user this \
             runs as (chown 1000 /etc/psp/a.key)"
        );
    }

    /// The rule applied by [`read`] (root-only: CI runs as root; it fails, never skips).
    #[test]
    fn refuses_a_file_of_another_user_unless_named() {
        assert_eq!(
            nix::unistd::geteuid().as_raw(),
            0,
            "this test chowns a file: run it as root"
        );
        let t = Temp::new(b"00112233445566778899aabbccddeeff", 0o600);
        std::os::unix::fs::chown(&t.0, Some(12345), None).unwrap();
        let e = read(&t.0, &RULES).unwrap_err();
        assert!(
            e.contains("is owned by uid 12345; want root (uid 0)"),
            "{e}"
        );
        assert!(!e.contains("0011"), "{e}");
        let named = Rules {
            also_owner: Some(12345),
            ..RULES
        };
        assert_eq!(read(&t.0, &named).unwrap().len(), 16);
        std::os::unix::fs::chown(&t.0, Some(0), None).unwrap();
        assert_eq!(read(&t.0, &RULES).unwrap().len(), 16);
    }

    #[test]
    fn refuses_missing_files_and_directories() {
        let e = read(Path::new("/nonexistent/psp.key"), &RULES).unwrap_err();
        assert!(e.starts_with("cannot open /nonexistent/psp.key: "), "{e}");
        let e = read(&std::env::temp_dir(), &RULES).unwrap_err();
        assert!(e.ends_with("is not a regular file"), "{e}");
    }
}
