//! The trust-on-first-use state file (`[session] known_peers`): one line per peer,
//! `NAME HEX-ED25519-KEY`, like ssh's `known_hosts`. A peer without a pinned `identity` is
//! pinned here after its first session; from then on a different key is refused
//! (`identity_mismatch`, logged as an error). Rewritten whole (temporary file, rename), 0600.

use std::collections::HashMap;
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::PathBuf;

/// The pins read from, and written to, the state file.
#[derive(Debug)]
pub(crate) struct Tofu {
    path: PathBuf,
    pins: HashMap<String, [u8; 32]>,
}

impl Tofu {
    /// Reads `path` (a missing file is empty). Malformed lines are skipped with a warning.
    pub(crate) fn load(path: PathBuf) -> Self {
        let pins = match std::fs::read_to_string(&path) {
            Ok(text) => {
                let (pins, bad) = parse(&text);
                for line in bad {
                    tracing::warn!(file = %path.display(), line, "known_peers: malformed line skipped");
                }
                pins
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => HashMap::new(),
            Err(e) => {
                tracing::warn!(file = %path.display(), error = %e, "known_peers: cannot read");
                HashMap::new()
            }
        };
        Self { path, pins }
    }

    /// The pinned key of `name`, if any.
    pub(crate) fn get(&self, name: &str) -> Option<[u8; 32]> {
        self.pins.get(name).copied()
    }

    /// Pins `key` for `name` and rewrites the file.
    ///
    /// # Errors
    /// The file could not be written (the pin still holds in memory).
    pub(crate) fn pin(&mut self, name: &str, key: [u8; 32]) -> std::io::Result<()> {
        self.pins.insert(name.to_string(), key);
        let mut names: Vec<_> = self.pins.iter().collect();
        names.sort();
        let mut text =
            String::from("# psp-gateway known peers (trust on first use): NAME ED25519-KEY\n");
        for (n, k) in names {
            text.push_str(&format!("{n} {}\n", hex::encode(k)));
        }
        let tmp = self.path.with_extension("tmp");
        {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&tmp)?;
            f.write_all(text.as_bytes())?;
            f.sync_all()?;
        }
        std::fs::rename(&tmp, &self.path)
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
        let mut t = Tofu::load(path.clone());
        assert_eq!(t.get("b"), None);
        t.pin("b", [7; 32]).unwrap();
        t.pin("a", [1; 32]).unwrap();
        let t = Tofu::load(path.clone());
        assert_eq!(t.get("b"), Some([7; 32]));
        assert_eq!(t.get("a"), Some([1; 32]));
        std::fs::remove_file(&path).unwrap();
    }
}
