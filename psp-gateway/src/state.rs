//! The daemon's state directory (`[daemon] state_directory`): what must survive a restart for
//! the protocol to stay safe.
//!
//! | file | what it holds | why |
//! |---|---|---|
//! | `lock` | nothing (`flock`ed while the daemon runs) | two daemons never share the sequence numbers below |
//! | `seq-<fingerprint>` | the sequence-number high-water mark reserved under one static key (group key, `key_file` peers) | a restarted sender continues above every number it used: a (key, nonce) pair is never used twice, and receivers' replay windows never see it go back |
//! | `request-clock` | the floor of the next Request timestamp | Requests stay newer than the last run's even if the wall clock went back |
//! | `known_peers` (default place) | trust-on-first-use pins | see `sessions::tofu` |
//!
//! Every write is atomic and durable ([`write_atomic`]): a new file with a random name created
//! with `O_EXCL | O_NOFOLLOW` and mode 0600, written and `fsync`ed, renamed over the old one,
//! then the directory is `fsync`ed. A reservation is durable before a sequence number under it is
//! used ([`SeqReservation`]). Files are refused on load when another user owns them or when
//! group or others may write them.
//!
//! What this module does not do: choose keys, or protect against losing the directory (a host
//! restored from an old backup, or reinstalled with the same keys and MAC, can repeat sequence
//! numbers: rotate the group and `key_file` keys then; docs/GATEWAY.md "State directory").

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Write as _};
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use nix::fcntl::{Flock, FlockArg};
use psp_core::Seq;
use sha2::Digest as _;

/// Why the state directory (or a file in it) cannot be used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StateError {
    /// An I/O error on a path.
    #[error("{}: {source}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The cause.
        source: io::Error,
    },
    /// Another daemon holds the directory's lock.
    #[error(
        "{}: another psp-gateway uses this state directory (give each daemon its own [daemon] state_directory)",
        path.display()
    )]
    Locked {
        /// The directory.
        path: PathBuf,
    },
    /// The file or directory may be changed by someone other than the daemon's user.
    #[error("{}: {problem}", path.display())]
    Unsafe {
        /// The path.
        path: PathBuf,
        /// What is wrong, with the fix.
        problem: String,
    },
    /// A state file does not hold what it should.
    #[error("{}: {problem}; remove it only if you also rotate the keys it protects", path.display())]
    Corrupt {
        /// The path.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> StateError + '_ {
    move |source| StateError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The open, locked state directory.
#[derive(Debug)]
pub(crate) struct StateDir {
    dir: PathBuf,
    _lock: Flock<File>,
    /// Per sequence-number file: the first number no sealer of this process has claimed (the
    /// durable mark in the file).
    claims: Mutex<HashMap<String, u32>>,
}

impl StateDir {
    /// Creates `dir` (mode 0700) if needed, checks who may change it, and takes its lock.
    ///
    /// # Errors
    /// The directory cannot be created, may be written by others, or is locked by another
    /// daemon.
    pub(crate) fn open(dir: &Path) -> Result<Self, StateError> {
        if !dir.exists() {
            std::fs::create_dir_all(dir).map_err(io_err(dir))?;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
                .map_err(io_err(dir))?;
        }
        check_owner_and_mode(dir)?;
        let lock_path = dir.join("lock");
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&lock_path)
            .map_err(io_err(&lock_path))?;
        let lock = Flock::lock(file, FlockArg::LockExclusiveNonblock).map_err(|(_, e)| {
            if e == nix::errno::Errno::EWOULDBLOCK {
                StateError::Locked {
                    path: dir.to_path_buf(),
                }
            } else {
                StateError::Io {
                    path: lock_path.clone(),
                    source: e.into(),
                }
            }
        })?;
        Ok(Self {
            dir: dir.to_path_buf(),
            _lock: lock,
            claims: Mutex::new(HashMap::new()),
        })
    }

    /// The directory.
    pub(crate) fn path(&self) -> &Path {
        &self.dir
    }

    /// The contents of `name`, or `None` if it does not exist.
    ///
    /// # Errors
    /// It cannot be read, or others may write it.
    pub(crate) fn read(&self, name: &str) -> Result<Option<String>, StateError> {
        read_checked(&self.dir.join(name))
    }

    /// Replaces `name` with `contents`, atomically and durably ([`write_atomic`]).
    ///
    /// # Errors
    /// Any I/O error (the old contents are then unchanged).
    pub(crate) fn write(&self, name: &str, contents: &str) -> Result<(), StateError> {
        let path = self.dir.join(name);
        write_atomic(&path, contents.as_bytes()).map_err(io_err(&path))
    }
}

/// Reads a state file the daemon's user owns and only it may write; `None` if it is missing.
///
/// # Errors
/// It cannot be read, or is owned by another user, or group or others may write it.
pub(crate) fn read_checked(path: &Path) -> Result<Option<String>, StateError> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err(path)(e)),
        Ok(m) if !m.is_file() => {
            return Err(StateError::Unsafe {
                path: path.to_path_buf(),
                problem: "is not a regular file (a symbolic link?)".into(),
            });
        }
        Ok(_) => {}
    }
    check_owner_and_mode(path)?;
    std::fs::read_to_string(path)
        .map(Some)
        .map_err(io_err(path))
}

/// Refuses a path owned by a user other than us, root, or the user a root daemon drops to
/// (`--user`: the daemon hands it the directory before the switch), or writable by group or
/// others.
fn check_owner_and_mode(path: &Path) -> Result<(), StateError> {
    let m = std::fs::metadata(path).map_err(io_err(path))?;
    let me = nix::unistd::geteuid().as_raw();
    if m.uid() != me && m.uid() != 0 && crate::config::run_as() != Some(m.uid()) {
        return Err(StateError::Unsafe {
            path: path.to_path_buf(),
            problem: format!(
                "owned by uid {}, not by the daemon's user (uid {me}) or root: chown it",
                m.uid()
            ),
        });
    }
    if m.mode() & 0o022 != 0 {
        return Err(StateError::Unsafe {
            path: path.to_path_buf(),
            problem: format!(
                "mode {:o} lets group or others write it: chmod go-w",
                m.mode() & 0o7777
            ),
        });
    }
    Ok(())
}

/// Replaces `path` with `bytes` atomically and durably: a new file beside it with a random name
/// (`O_CREAT | O_EXCL | O_NOFOLLOW`, mode 0600 whatever the umask), written and `fsync`ed, renamed
/// over `path`, and the directory `fsync`ed so the rename survives a crash.
///
/// # Errors
/// Any I/O error; the temporary file is removed and `path` is unchanged.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no file name"))?;
    let mut tag = [0u8; 8];
    getrandom::fill(&mut tag).map_err(|e| io::Error::other(e.to_string()))?;
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        name.to_string_lossy(),
        hex::encode(tag)
    ));
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)?;
        f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        File::open(dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Sequence numbers one reservation of the group key covers: broadcasts and handshakes are few.
pub(crate) const GROUP_BLOCK: u32 = 1 << 16;
/// Sequence numbers one reservation of a `key_file` peer's key covers: one write per half a
/// million frames; each restart skips at most this many numbers, so a key survives at least
/// 4,096 restarts.
pub(crate) const UNICAST_BLOCK: u32 = 1 << 20;

/// The persisted sequence-number reservation of one sealer of a static key.
///
/// Numbers are handed out in blocks, each claimed from the key's file before the sealer may use
/// it: the file's mark is durable (written and `fsync`ed) before the claim returns, and every
/// claim in this process starts at or above the mark of the claim before, so two sealers of the
/// same key (a reload builds the new one while the old one still runs) get disjoint numbers,
/// and a restart starts above every number of every run before.
#[derive(Debug)]
pub(crate) struct SeqReservation {
    dir: Arc<StateDir>,
    name: String,
    block: u32,
    /// The end of this sealer's claimed range: it may use numbers below it.
    limit: u32,
}

/// A new block for a sealer: where its numbers start (ahead of the sealer's next number when
/// another sealer of the key claimed the numbers in between) and the new limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Claim {
    /// Skip forward to here first ([`psp_core::session::Sealer::skip_to`]).
    pub(crate) from: Seq,
    /// The new limit ([`psp_core::session::Sealer::set_seq_limit`]).
    pub(crate) limit: Seq,
}

impl SeqReservation {
    /// A reservation for a new sealer of `key` (its suite name and bytes), and
    /// its first block: from the persisted mark of the run before, or, for a key new to this
    /// host, from a random number in the lower half of the space (the thesis' random start).
    ///
    /// # Errors
    /// The state file cannot be read or written, or the OS RNG failed (never a predictable
    /// start).
    pub(crate) fn start(
        dir: &Arc<StateDir>,
        suite: &str,
        key: &[u8],
        block: u32,
    ) -> Result<(Self, Claim), StateError> {
        let mut r = Self {
            dir: Arc::clone(dir),
            name: format!("seq-{}", fingerprint(suite, key)),
            block: block.max(2),
            limit: 0,
        };
        let claim = r.claim(0)?;
        Ok((r, claim))
    }

    /// The limit to give the sealer.
    #[cfg(test)]
    pub(crate) fn limit(&self) -> Seq {
        Seq(self.limit)
    }

    /// Whether the sealer, about to use `next`, should claim its next block now (less than half
    /// a block left).
    pub(crate) fn due(&self, next: Option<Seq>) -> bool {
        next.is_some_and(|n| self.limit.saturating_sub(n.0) < self.block / 2)
            && self.limit < u32::MAX
    }

    /// Claims the next block for a sealer whose next number is `next`, durably.
    ///
    /// # Errors
    /// The write failed: the old limit stays (the sealer stops at it rather than repeat).
    pub(crate) fn extend(&mut self, next: Seq) -> Result<Claim, StateError> {
        self.claim(next.0)
    }

    fn claim(&mut self, next: u32) -> Result<Claim, StateError> {
        let mut claims = self.dir.claims.lock().unwrap_or_else(|e| e.into_inner());
        let mark = match claims.get(&self.name) {
            Some(m) => *m,
            None => self.persisted_or_random()?,
        };
        // Contiguous with this sealer's range when nobody claimed in between.
        let from = if mark == self.limit {
            next
        } else {
            mark.max(next)
        };
        let limit = mark.max(from).saturating_add(self.block);
        self.dir.write(&self.name, &format!("{limit}\n"))?;
        claims.insert(self.name.clone(), limit);
        self.limit = limit;
        Ok(Claim {
            from: Seq(from),
            limit: Seq(limit),
        })
    }

    fn persisted_or_random(&self) -> Result<u32, StateError> {
        let path = self.dir.path().join(&self.name);
        match self.dir.read(&self.name)? {
            Some(text) => text.trim().parse::<u32>().map_err(|_| StateError::Corrupt {
                path,
                problem: format!("{:?} is not a sequence number", text.trim()),
            }),
            None => {
                let mut seed = [0u8; 4];
                getrandom::fill(&mut seed).map_err(|e| StateError::Io {
                    path,
                    source: io::Error::other(format!("the OS random number generator: {e}")),
                })?;
                Ok(psp_core::session::Sealer::random_initial_seq(seed).0)
            }
        }
    }
}

/// The file-name fingerprint of a key: 16 bytes of SHA-256 over a label, the suite and the key.
/// It names the key without revealing it. (Not the source MAC, although the AEAD nonces hold
/// it: a host whose MAC changes keeps one counter per key, which is only more careful.)
fn fingerprint(suite: &str, key: &[u8]) -> String {
    let mut h = sha2::Sha256::new();
    h.update(b"psp-gateway seq-state v1\0");
    h.update(suite.as_bytes());
    h.update([0]);
    h.update(key);
    hex::encode(&h.finalize()[..16])
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use psp_core::crypto::{SuiteId, SuiteKey};
    use psp_core::session::{SealError, Sealer, SealerConfig};
    use psp_core::time::Instant;

    use super::*;

    fn temp_dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("psp-state-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    const KEY: [u8; 16] = [7; 16];

    /// A "run" of a sender: open the state, seal `frames` frames (reserving as it goes), then
    /// stop without any clean-up (a crash). Returns the sequence numbers used.
    fn run(dir: &Path, frames: u32, block: u32) -> Vec<u32> {
        let state = Arc::new(StateDir::open(dir).unwrap());
        let (mut res, claim) = SeqReservation::start(&state, "aes128-gcm", &KEY, block).unwrap();
        let key = SuiteKey::new(SuiteId::Aes128Gcm, &KEY).unwrap();
        let mut s = Sealer::new(key, claim.from, SealerConfig::default()).unwrap();
        s.set_seq_limit(Some(claim.limit));
        let frame = [0x02u8, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00, 0x45, 0];
        let mut out = [0u8; 128];
        let mut used = Vec::new();
        for _ in 0..frames {
            if res.due(s.next_seq()) {
                let c = res.extend(s.next_seq().unwrap()).unwrap();
                s.skip_to(c.from);
                s.set_seq_limit(Some(c.limit));
            }
            let seq = s.next_seq().unwrap().0;
            match s.seal(Instant::ZERO, &frame, &mut out) {
                Ok(_) => used.push(seq),
                Err(e) => panic!("{e}"),
            }
        }
        used
    }

    /// 100 restarts (each a crash after a random number of frames, some past a reservation):
    /// no sequence number, and so no (key, nonce) pair, is ever used twice.
    #[test]
    fn a_hundred_restarts_never_repeat_a_sequence_number() {
        let dir = temp_dir("restarts");
        let mut seen = HashSet::new();
        let mut x: u32 = 12345;
        for _ in 0..100 {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            let frames = (x >> 8) % 5_000;
            for seq in run(&dir, frames, 1_000) {
                assert!(seen.insert(seq), "sequence number {seq} used twice");
            }
        }
        assert!(seen.len() > 100_000, "{}", seen.len());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A reload builds a second sealer of the same key while the first still runs: their
    /// claims never overlap, whoever extends first.
    #[test]
    fn two_live_sealers_of_one_key_get_disjoint_numbers() {
        let dir = temp_dir("two");
        let state = Arc::new(StateDir::open(&dir).unwrap());
        let (mut a, ca) = SeqReservation::start(&state, "s", &KEY, 100).unwrap();
        let (mut b, cb) = SeqReservation::start(&state, "s", &KEY, 100).unwrap();
        assert!(cb.from >= ca.limit);
        // a extends after b claimed: it must jump past b's block.
        let ca2 = a.extend(Seq(ca.limit.0 - 10)).unwrap();
        assert!(ca2.from >= cb.limit, "{ca2:?} overlaps {cb:?}");
        let cb2 = b.extend(Seq(cb.limit.0 - 10)).unwrap();
        assert!(cb2.from >= ca2.limit);
        // Nobody claimed in between: contiguous.
        let cb3 = b.extend(Seq(cb2.limit.0 - 10)).unwrap();
        assert_eq!(cb3.from, Seq(cb2.limit.0 - 10));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_sealer_stops_at_an_unwritten_reservation() {
        let dir = temp_dir("stop");
        let state = Arc::new(StateDir::open(&dir).unwrap());
        let (res, claim) = SeqReservation::start(&state, "aes128-gcm", &KEY, GROUP_BLOCK).unwrap();
        let start = claim.from;
        let key = SuiteKey::new(SuiteId::Aes128Gcm, &KEY).unwrap();
        let mut s = Sealer::new(key, Seq(res.limit().0 - 1), SealerConfig::default()).unwrap();
        s.set_seq_limit(Some(res.limit()));
        let frame = [0x02u8, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00, 0x45, 0];
        let mut out = [0u8; 128];
        assert!(s.seal(Instant::ZERO, &frame, &mut out).is_ok());
        assert_eq!(
            s.seal(Instant::ZERO, &frame, &mut out),
            Err(SealError::Unreserved)
        );
        assert!(start.0 < 1 << 31, "a new key starts in the lower half");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn one_daemon_per_directory_and_unsafe_files_refused() {
        let dir = temp_dir("lock");
        let a = StateDir::open(&dir).unwrap();
        assert!(matches!(
            StateDir::open(&dir),
            Err(StateError::Locked { .. })
        ));
        drop(a);
        let b = StateDir::open(&dir).unwrap();
        b.write("x", "1\n").unwrap();
        assert_eq!(b.read("x").unwrap().as_deref(), Some("1\n"));
        let x = dir.join("x");
        assert_eq!(
            std::fs::metadata(&x).unwrap().mode() & 0o777,
            0o600,
            "mode whatever the umask"
        );
        std::fs::set_permissions(&x, std::fs::Permissions::from_mode(0o666)).unwrap();
        assert!(matches!(b.read("x"), Err(StateError::Unsafe { .. })));
        std::os::unix::fs::symlink("/etc/passwd", dir.join("y")).unwrap();
        assert!(matches!(b.read("y"), Err(StateError::Unsafe { .. })));
        // A symbolic link planted at the temporary name is never followed.
        b.write("y", "2\n").unwrap();
        assert!(std::fs::symlink_metadata(dir.join("y")).unwrap().is_file());
        std::fs::write(dir.join("seq-bad"), "x").unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
