//! The trust-on-first-use state file (`[session] known_peers`, default `known_peers` in the
//! state directory): one line per peer, `NAME HEX-ED25519-KEY`, like ssh's `known_hosts`. Only a
//! peer configured with `identity = "tofu"` is pinned here, after its first session; from then
//! on a different key is refused (`identity_mismatch`). A peer without `identity` is never
//! pinned (so no insider can claim it first). The file is rewritten whole with
//! [`crate::state::write_atomic`] and refused on load when another user owns it or others may
//! write it. A pin that cannot be written is not used: that session is refused
//! (`pin_unsaved`), so a restart never forgets a pin the peers relied on.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::config::Config;
use crate::state::{StateError, read_checked, write_atomic};

/// The pins read from, and written to, the state file.
#[derive(Debug)]
pub(crate) struct Tofu {
    path: PathBuf,
    pins: HashMap<String, [u8; 32]>,
}

/// Where `config` keeps its pins: `[session] known_peers`, or `known_peers` in the state
/// directory.
pub(crate) fn known_peers_path(config: &Config) -> PathBuf {
    config
        .session
        .as_ref()
        .and_then(|s| s.known_peers.clone())
        .unwrap_or_else(|| config.daemon.state_directory.join("known_peers"))
}

impl Tofu {
    /// Reads `path` (a missing file is empty). Malformed lines are skipped with a warning that
    /// says what that costs (a pin on such a line is lost: that peer is pinned on first use
    /// again).
    ///
    /// # Errors
    /// The file cannot be read, or another user owns it, or others may write it.
    pub(crate) fn load(path: &Path) -> Result<Self, StateError> {
        let pins = match read_checked(path)? {
            Some(text) => {
                let (pins, bad) = parse(&text);
                for line in bad {
                    tracing::warn!(
                        file = %path.display(),
                        line,
                        "known_peers: malformed line skipped; a pin it held is lost, and that \
                         peer is pinned again on first use (fix the line to keep the pin)"
                    );
                }
                pins
            }
            None => HashMap::new(),
        };
        Ok(Self {
            path: path.to_path_buf(),
            pins,
        })
    }

    /// The pinned key of `name`, if any.
    pub(crate) fn get(&self, name: &str) -> Option<[u8; 32]> {
        self.pins.get(name).copied()
    }

    /// Pins `key` for `name` and rewrites the file (atomically, durably). On error nothing is
    /// pinned, in memory or on disk.
    ///
    /// # Errors
    /// The file could not be written.
    pub(crate) fn pin(&mut self, name: &str, key: [u8; 32]) -> std::io::Result<()> {
        let mut pins = self.pins.clone();
        pins.insert(name.to_string(), key);
        let mut names: Vec<_> = pins.iter().collect();
        names.sort();
        let mut text =
            String::from("# psp-gateway known peers (trust on first use): NAME ED25519-KEY\n");
        for (n, k) in names {
            text.push_str(&format!("{n} {}\n", hex::encode(k)));
        }
        write_atomic(&self.path, text.as_bytes())?;
        self.pins = pins;
        Ok(())
    }
}

/// The pins in a state file's text, and the (1-based) numbers of the malformed lines.
pub(crate) fn parse(text: &str) -> (HashMap<String, [u8; 32]>, Vec<usize>) {
    let mut pins = HashMap::new();
    let mut bad = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let parsed = line.split_once(' ').and_then(|(name, key)| {
            let key: [u8; 32] = hex::decode(key.trim()).ok()?.try_into().ok()?;
            Some((name.to_string(), key))
        });
        match parsed {
            Some((name, key)) => {
                pins.insert(name, key);
            }
            None => bad.push(n + 1),
        }
    }
    (pins, bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_survive_a_reload_and_bad_lines_are_skipped() {
        let path = std::env::temp_dir().join(format!("psp-tofu-{}", std::process::id()));
        std::fs::write(&path, "junk\nb zz\n").unwrap();
        let mut t = Tofu::load(&path).unwrap();
        assert_eq!(t.get("b"), None);
        t.pin("b", [7; 32]).unwrap();
        t.pin("a", [1; 32]).unwrap();
        let t = Tofu::load(&path).unwrap();
        assert_eq!(t.get("b"), Some([7; 32]));
        assert_eq!(t.get("a"), Some([1; 32]));
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn a_pin_that_cannot_be_written_is_not_kept_and_unsafe_files_are_refused() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = std::env::temp_dir().join(format!("psp-tofu-dir-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        let path = dir.join("known_peers");
        let mut t = Tofu::load(&path).unwrap();
        std::fs::remove_dir(&dir).unwrap();
        assert!(t.pin("b", [7; 32]).is_err());
        assert_eq!(t.get("b"), None, "not pinned in memory either");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(
            &path,
            "b 0707070707070707070707070707070707070707070707070707070707070707\n",
        )
        .unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
        assert!(matches!(Tofu::load(&path), Err(StateError::Unsafe { .. })));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A malformed line is named (file, line) with what skipping it costs: a pin it held is
    /// lost, and that peer is pinned again on first use.
    #[test]
    fn a_malformed_line_is_named_with_what_it_costs() {
        #[derive(Clone, Default)]
        struct Log(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
        impl std::io::Write for Log {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let path = std::env::temp_dir().join(format!("psp-tofu-bad-{}", std::process::id()));
        std::fs::write(&path, "# header\nvm2 0707\n").unwrap();
        let log = Log::default();
        let w = log.clone();
        let sub = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(move || w.clone())
            .finish();
        let t = tracing::subscriber::with_default(sub, || Tofu::load(&path));
        std::fs::remove_file(&path).unwrap();
        assert_eq!(t.unwrap().get("vm2"), None);
        let text = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
        for want in [
            "WARN",
            path.to_str().unwrap(),
            "line=2",
            "pinned again on first use",
        ] {
            assert!(text.contains(want), "no `{want}` in {text}");
        }
    }
}
