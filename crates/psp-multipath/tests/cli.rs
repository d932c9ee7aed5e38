//! `psp-mp` as a user runs it: key files under the daemon's rules, and one-line errors.
#![allow(missing_docs)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn psp_mp(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_psp-mp"))
        .args(args)
        .output()
        .expect("run psp-mp")
}

/// A temp file with `content` and `mode`, removed on drop.
struct Temp(PathBuf);

impl Temp {
    fn new(name: &str, content: &[u8], mode: u32) -> Self {
        let path = std::env::temp_dir().join(format!("psp-mp-cli-{}-{name}", std::process::id()));
        std::fs::write(&path, content).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        Self(path)
    }

    fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Issue 21 item 10: a world-readable long-term secret is refused, as the daemon refuses such a
/// key file, with its message and fix; the secret is never echoed.
#[test]
fn a_world_readable_secret_is_refused_with_the_daemons_message() {
    let keygen = psp_mp(&["keygen"]);
    assert!(keygen.status.success(), "{}", stderr(&keygen));
    let secret = String::from_utf8(keygen.stdout).unwrap();
    assert_eq!(secret.trim().len(), 64, "{secret}");
    assert!(secret.trim().bytes().all(|b| b.is_ascii_hexdigit()));

    let open = Temp::new("open.key", secret.as_bytes(), 0o644);
    for args in [
        vec!["pubkey", "--key-file", open.path()],
        vec![
            "connect",
            "--path",
            "trusted,127.0.0.1:9",
            "--path",
            "untrusted,127.0.0.1:9",
            "--key-file",
            open.path(),
        ],
    ] {
        let o = psp_mp(&args);
        assert!(!o.status.success(), "{args:?} must fail");
        let e = stderr(&o);
        assert_eq!(
            e,
            format!(
                "psp-mp: --key-file: {p} is mode 0644; want 0600 or stricter (chmod 600 {p})\n",
                p = open.path()
            ),
            "{args:?}"
        );
        assert!(!e.contains(secret.trim()));
    }

    let ok = Temp::new("ok.key", secret.as_bytes(), 0o600);
    let o = psp_mp(&["pubkey", "--key-file", ok.path()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim().len(), 64);

    // Wrong length and a file of another user (CI runs as root: the chown works).
    let short = Temp::new("short.key", b"00112233", 0o600);
    let e = stderr(&psp_mp(&["pubkey", "--key-file", short.path()]));
    assert!(e.contains("holds a 4-byte key; want 32 bytes"), "{e}");
    std::os::unix::fs::chown(Path::new(ok.path()), Some(12345), None)
        .expect("chown a temp file: run as root");
    let e = stderr(&psp_mp(&["pubkey", "--key-file", ok.path()]));
    assert!(
        e.contains("is owned by uid 12345; want root (uid 0)"),
        "{e}"
    );
}
