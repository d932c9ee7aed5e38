//! The daemon's state directory (`[daemon] state_directory`): what must survive a restart for
//! the protocol to stay safe.
//!
//! | file | what it holds | why |
//! |---|---|---|
//! | `lock` | nothing (`flock`ed while the daemon runs) | two daemons never share the sequence numbers below |
//! | `seq-<fingerprint>` | the sequence-number high-water mark reserved under one static key (group key, `key_file` peers) | a restarted sender continues above every number it used: a (key, nonce) pair is never used twice, and receivers' replay windows never see it go back |
//! | `request-clock` | the floor of the next Request timestamp | Requests stay newer than the last run's even if the wall clock went back |
//! | `replay-floors` | each group-key and `key_file` window's floor (every 10 s while they move, and at a clean stop) | a frame captured before a restart does not open again after it |
//! | `known_peers` (default place) | trust-on-first-use pins | see `tofu.rs` |
//!
//! Every write is atomic and durable ([`write_atomic`]): a new file with a random name created
//! with `O_EXCL | O_NOFOLLOW` and mode 0600, written and `fsync`ed, renamed over the old one,
//! then the directory is `fsync`ed. A reservation is durable before a sequence number under it is
//! used ([`StateDir::claim`]). Files are refused on load when another user owns them or when
//! group or others may write them.
//!
//! What this module does not do: choose keys, or protect against losing the directory (a host
//! restored from an old backup, or reinstalled with the same keys and MAC, can repeat sequence
//! numbers: rotate the group and `key_file` keys then; docs/GATEWAY.md "State directory").

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{self, Write as _};
use std::os::fd::OwnedFd;
use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use nix::fcntl::{AT_FDCWD, Flock, FlockArg, OFlag, openat, renameat};
use nix::sys::stat::Mode;
use nix::unistd::{UnlinkatFlags, unlinkat};
use psp_core::Seq;
use psp_core::host::{Claim, Fingerprint};

use crate::io::sys::{FileKind, check_ancestors, set_owner_mode};

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
    /// A file root would hand to the user it drops to (`--user`), refused: a link that user
    /// could have planted, say (the message names the file and the fix).
    #[error("{0}")]
    HandOver(io::Error),
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

/// The open, locked state directory. Files are read and written relative to its open
/// descriptor, so the daemon keeps using it after dropping privileges even when a directory
/// above it is closed to its user.
#[derive(Debug)]
pub(crate) struct StateDir {
    dir: PathBuf,
    fd: OwnedFd,
    _lock: Flock<File>,
    /// Per sequence-number file: the first number no sealer of this process has claimed (the
    /// durable mark in the file).
    claims: Mutex<HashMap<String, u32>>,
    /// The sequence-number files whose last claim failed ([`StateDir::set_refused`]): kept
    /// with the claims, since the driver's retry takes a refused key off its list first.
    refused: Mutex<HashSet<String>>,
}

impl StateDir {
    /// Creates `dir` (mode 0700) if needed, checks who may change it, and takes its lock.
    ///
    /// # Errors
    /// The directory cannot be created, is a symbolic link, may be written by others, or is
    /// locked by another daemon.
    #[cfg(any(test, feature = "testing"))]
    pub(crate) fn open(dir: &Path) -> Result<Self, StateError> {
        Self::open_for(dir, None)
    }

    /// [`open`](Self::open) for a root daemon that drops to the user `owner` (uid, gid) after
    /// start (`--user`): first hands the directory (mode 0700) and its files to that user.
    ///
    /// That user owns the directory from the first start on, so it could have planted links
    /// there for root to follow at the next one. Nothing is followed: the directory is opened
    /// once without following a final link, and each file is checked and changed through a
    /// descriptor of its own ([`set_owner_mode`]). A symbolic link, a file with a second hard
    /// link, anything but a regular file, a file owned by neither root nor that user, and a
    /// directory whose ancestors someone other than root could change ([`check_ancestors`]) are
    /// refused by name: the daemon does not start.
    ///
    /// # Errors
    /// As [`open`](Self::open), or a refused file.
    pub(crate) fn open_for(dir: &Path, owner: Option<(u32, u32)>) -> Result<Self, StateError> {
        if owner.is_some() {
            check_ancestors(dir).map_err(StateError::HandOver)?;
        }
        let created = matches!(
            std::fs::symlink_metadata(dir),
            Err(e) if e.kind() == io::ErrorKind::NotFound
        );
        if created {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(io_err(dir))?;
        }
        let fd = open_dir(dir).map_err(|e| {
            // O_NOFOLLOW | O_DIRECTORY fails on a link with ELOOP or ENOTDIR: say which it was.
            if std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_symlink()) {
                return StateError::Unsafe {
                    path: dir.to_path_buf(),
                    problem: "is a symbolic link, not a directory (not followed): give the \
                              directory's own path"
                        .into(),
                };
            }
            io_err(dir)(e)
        })?;
        if let Some(ids) = owner {
            hand_over(&fd, dir, ids)?;
        }
        if created || owner.is_some() {
            nix::sys::stat::fchmod(&fd, Mode::from_bits_truncate(0o700))
                .map_err(|e| io_err(dir)(e.into()))?;
        }
        let st = nix::sys::stat::fstat(&fd).map_err(|e| io_err(dir)(e.into()))?;
        check_owner_and_mode(dir, st.st_uid, st.st_mode)?;
        let lock_path = dir.join("lock");
        let file = openat(
            &fd,
            "lock",
            OFlag::O_RDWR | OFlag::O_CREAT | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(0o600),
        )
        .map(File::from)
        .map_err(|e| io_err(&lock_path)(e.into()))?;
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
            fd,
            _lock: lock,
            claims: Mutex::new(HashMap::new()),
            refused: Mutex::new(HashSet::new()),
        })
    }

    /// The contents of `name`, or `None` if it does not exist.
    ///
    /// # Errors
    /// It cannot be read, or others may write it.
    pub(crate) fn read(&self, name: &str) -> Result<Option<String>, StateError> {
        read_checked_in(&self.fd, &self.dir, name)
    }

    /// Where `name` is (for messages: files are read and written through the open directory).
    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Replaces `name` with `contents`, atomically and durably ([`write_atomic`]).
    ///
    /// # Errors
    /// Any I/O error (the old contents are then unchanged).
    pub(crate) fn write(&self, name: &str, contents: &str) -> Result<(), StateError> {
        write_atomic_in(&self.fd, name, contents.as_bytes()).map_err(io_err(&self.dir.join(name)))
    }
}

/// Gives the open directory `fd` (at `dir`) and every file in it to `uid`/`gid`, as
/// [`StateDir::open_for`] says: nothing followed, anything but a regular file refused.
fn hand_over(fd: &OwnedFd, dir: &Path, ids: (u32, u32)) -> Result<(), StateError> {
    let dot = Path::new(".");
    set_owner_mode(fd, dot, dir, Some(FileKind::Directory), Some(ids), None)
        .map_err(StateError::HandOver)?;
    // The names only: each is then opened relative to `fd`, never by this path.
    for entry in std::fs::read_dir(dir).map_err(io_err(dir))? {
        let name = entry.map_err(io_err(dir))?.file_name();
        let shown = dir.join(&name);
        set_owner_mode(
            fd,
            Path::new(&name),
            &shown,
            Some(FileKind::Regular),
            Some(ids),
            None,
        )
        .map_err(StateError::HandOver)?;
    }
    Ok(())
}

/// Opens a directory for `*at` calls (not following a final symbolic link).
fn open_dir(dir: &Path) -> io::Result<OwnedFd> {
    Ok(openat(
        AT_FDCWD,
        dir,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?)
}

/// `(directory, file name)` of `path`.
fn split(path: &Path) -> io::Result<(&Path, &std::ffi::OsStr)> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no file name"))?;
    Ok((dir, name))
}

/// Reads a state file the daemon's user owns and only it may write; `None` if it is missing.
///
/// # Errors
/// It cannot be read, or is owned by another user, or group or others may write it.
pub(crate) fn read_checked(path: &Path) -> Result<Option<String>, StateError> {
    let (dir, name) = split(path).map_err(io_err(path))?;
    match open_dir(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_err(dir)(e)),
        Ok(fd) => read_checked_in(&fd, dir, name),
    }
}

fn read_checked_in(
    fd: &OwnedFd,
    dir: &Path,
    name: impl AsRef<std::ffi::OsStr>,
) -> Result<Option<String>, StateError> {
    let name = name.as_ref();
    let path = dir.join(name);
    let file = match openat(
        fd,
        name,
        OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC | OFlag::O_NONBLOCK,
        Mode::empty(),
    ) {
        Err(nix::errno::Errno::ENOENT) => return Ok(None),
        Err(nix::errno::Errno::ELOOP) => {
            return Err(StateError::Unsafe {
                path,
                problem: "is a symbolic link, not a regular file".into(),
            });
        }
        Err(e) => return Err(io_err(&path)(e.into())),
        Ok(fd) => File::from(fd),
    };
    let m = file.metadata().map_err(io_err(&path))?;
    if !m.is_file() {
        return Err(StateError::Unsafe {
            path,
            problem: "is not a regular file".into(),
        });
    }
    check_owner_and_mode(&path, m.uid(), m.mode())?;
    io::read_to_string(file).map(Some).map_err(io_err(&path))
}

/// Refuses a path owned by a user other than us, root, or the user a root daemon drops to
/// (`--user`: the daemon hands it the directory before the switch), or writable by group or
/// others. The message ends with the command that fixes it (`chown -R USER: DIR` for the
/// directory, whose files are checked the same way; `chown USER: FILE` for a file).
fn check_owner_and_mode(path: &Path, uid: u32, mode: u32) -> Result<(), StateError> {
    let me = nix::unistd::geteuid().as_raw();
    let run_as = crate::config::run_as();
    if uid != me && uid != 0 && run_as != Some(uid) {
        // The owner it needs: the user a root daemon drops to, else the one it runs as.
        let owner = run_as.unwrap_or(me);
        let recursive = if mode & libc::S_IFMT == libc::S_IFDIR {
            "-R "
        } else {
            ""
        };
        let fix = format!(
            "chown {recursive}{} {}",
            owner_spec(owner),
            shell_word(path)
        );
        return Err(StateError::Unsafe {
            path: path.to_path_buf(),
            problem: format!(
                "owned by uid {uid}, not by the daemon's user (uid {owner}) or root; fix: {fix}"
            ),
        });
    }
    if mode & 0o022 != 0 {
        return Err(StateError::Unsafe {
            path: path.to_path_buf(),
            problem: format!(
                "mode {:o} lets group or others write it; fix: chmod go-w {}",
                mode & 0o7777,
                shell_word(path)
            ),
        });
    }
    Ok(())
}

/// `chown`'s owner argument for `uid`: `NAME:` (the user and its login group), or the bare
/// number for a uid with no account.
fn owner_spec(uid: u32) -> String {
    match nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)) {
        Ok(Some(u)) => format!("{}:", u.name),
        _ => uid.to_string(),
    }
}

/// `path` as one shell word, quoted only when it needs to be (for a command to copy).
fn shell_word(path: &Path) -> String {
    let s = path.to_string_lossy();
    let plain = |c: char| c.is_ascii_alphanumeric() || "/._-+@%=:,".contains(c);
    if !s.is_empty() && s.chars().all(plain) {
        s.into_owned()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// Replaces `path` with `bytes` atomically and durably: a new file beside it with a random name
/// (`O_CREAT | O_EXCL | O_NOFOLLOW`, mode 0600 whatever the umask), written and `fsync`ed, renamed
/// over `path`, and the directory `fsync`ed so the rename survives a crash.
///
/// # Errors
/// Any I/O error; the temporary file is removed and `path` is unchanged.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let (dir, name) = split(path)?;
    write_atomic_in(&open_dir(dir)?, name, bytes)
}

/// [`write_atomic`] of `name` in the open directory `dir`.
fn write_atomic_in(
    dir: &OwnedFd,
    name: impl AsRef<std::ffi::OsStr>,
    bytes: &[u8],
) -> io::Result<()> {
    let name = name.as_ref();
    let mut tag = [0u8; 8];
    getrandom::fill(&mut tag).map_err(|e| io::Error::other(e.to_string()))?;
    let tmp = format!(".{}.{}.tmp", name.to_string_lossy(), hex::encode(tag));
    let result = (|| {
        let mut f = File::from(openat(
            dir,
            tmp.as_str(),
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(0o600),
        )?);
        f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        f.write_all(bytes)?;
        f.sync_all()?;
        renameat(dir, tmp.as_str(), dir, name)?;
        nix::unistd::fsync(dir)?;
        Ok(())
    })();
    if result.is_err() {
        let _ = unlinkat(dir, tmp.as_str(), UnlinkatFlags::NoRemoveDir);
    }
    result
}

/// The file holding the reservations of the static key `key`: `seq-<fingerprint in hex>`.
pub(crate) fn seq_file(key: Fingerprint) -> String {
    format!("seq-{}", hex::encode(key.0))
}

/// Sequence numbers one reservation of the group key covers: broadcasts and handshakes are few.
/// The revocation list in force when it is newer than the configured one (`[pki]`; hex).
pub(crate) const REVOCATION_FILE: &str = "revocation-list";

pub(crate) const GROUP_BLOCK: u32 = 1 << 16;
/// Sequence numbers one reservation of a `key_file` peer's key covers: one write per half a
/// million frames; each restart skips at most this many numbers, so a key survives at least
/// 4,096 restarts.
pub(crate) const UNICAST_BLOCK: u32 = 1 << 20;

impl StateDir {
    /// Claims the next block of sequence numbers for the sealer of the static key `key`, whose
    /// next number is `next` (`None`: a new sealer), and makes it durable: the mark in the
    /// key's file (`seq-<fingerprint>`) is written and `fsync`ed before this returns. A new
    /// sealer starts at the persisted mark of the run before, or, for a key new to this host,
    /// at a random number in the lower half of the space (the thesis' random start); a running
    /// one continues at `next`.
    ///
    /// # Errors
    /// The file cannot be read or written (the sealer then stops at its old limit rather than
    /// repeat a number), or the OS RNG failed (never a predictable start).
    pub(crate) fn claim(
        &self,
        key: Fingerprint,
        block: u32,
        next: Option<Seq>,
    ) -> Result<Claim, StateError> {
        let name = seq_file(key);
        let mut claims = self.claims.lock().unwrap_or_else(|e| e.into_inner());
        let mark = match claims.get(&name) {
            Some(m) => *m,
            None => self.persisted_or_random(&name)?,
        };
        let from = next.map_or(mark, |n| n.0);
        let limit = mark.max(from).saturating_add(block.max(2));
        self.write(&name, &format!("{limit}\n"))?;
        claims.insert(name, limit);
        Ok(Claim {
            from: Seq(from),
            limit: Seq(limit),
        })
    }

    /// Records whether the last [`claim`](Self::claim) for `key` failed, and returns whether
    /// that changed: `true` for the first failure after a success (or none yet), and for the
    /// first success after failures. The driver retries a refused claim every second and logs
    /// only these changes.
    pub(crate) fn set_refused(&self, key: Fingerprint, refused: bool) -> bool {
        let mut set = self.refused.lock().unwrap_or_else(|e| e.into_inner());
        if refused {
            set.insert(seq_file(key))
        } else {
            set.remove(&seq_file(key))
        }
    }

    fn persisted_or_random(&self, name: &str) -> Result<u32, StateError> {
        let path = self.dir.join(name);
        match self.read(name)? {
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
                Ok(psp_core::protect::Sealer::random_initial_seq(seed).0)
            }
        }
    }
}

/// The replay floors as the state directory keeps them (`replay-floors`): one line per window,
/// `<mac> <key fingerprint> <path> <next>` (hex, hex, 0 or 1, decimal).
pub(crate) fn format_floors(floors: &[psp_core::host::ReplayFloor]) -> String {
    let mut s = String::new();
    for f in floors {
        s.push_str(&format!(
            "{} {} {} {}\n",
            hex::encode(f.mac),
            hex::encode(f.key.0),
            f.path,
            f.next
        ));
    }
    s
}

/// Reads what [`format_floors`] wrote.
///
/// # Errors
/// A line that is not four fields of the right form (named by its number).
pub(crate) fn parse_floors(text: &str) -> Result<Vec<psp_core::host::ReplayFloor>, String> {
    let mut out = Vec::new();
    for (n, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let bad = || format!("line {}: not `<mac> <key> <path> <next>`", n + 1);
        let mut it = line.split_whitespace();
        let (Some(mac), Some(key), Some(path), Some(next), None) =
            (it.next(), it.next(), it.next(), it.next(), it.next())
        else {
            return Err(bad());
        };
        let mac = hex::decode(mac)
            .ok()
            .and_then(|b| <[u8; 6]>::try_from(b).ok())
            .ok_or_else(bad)?;
        let key = hex::decode(key)
            .ok()
            .and_then(|b| <[u8; 16]>::try_from(b).ok())
            .ok_or_else(bad)?;
        let path = path.parse::<u8>().ok().filter(|p| *p < 2).ok_or_else(bad)?;
        let next = next.parse::<u32>().map_err(|_| bad())?;
        out.push(psp_core::host::ReplayFloor {
            mac,
            key: Fingerprint(key),
            path,
            next,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use nix::unistd::{Gid, Uid};
    use psp_core::crypto::{SuiteId, SuiteKey};
    use psp_core::protect::{SealError, Sealer, SealerConfig};
    use psp_core::time::Instant;

    use super::*;

    fn temp_dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("psp-state-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    const KEY: [u8; 16] = [7; 16];
    const FP: Fingerprint = Fingerprint([9; 16]);

    /// A "run" of a sender: open the state, seal `frames` frames (claiming as it goes, as the
    /// host asks), then stop without any clean-up (a crash). Returns the sequence numbers used.
    fn run(dir: &Path, frames: u32, block: u32) -> Vec<u32> {
        let state = StateDir::open(dir).unwrap();
        let claim = state.claim(FP, block, None).unwrap();
        let key = SuiteKey::new(SuiteId::Aes128Gcm, &KEY).unwrap();
        let mut s = Sealer::new(key, claim.from, SealerConfig::default()).unwrap();
        s.set_seq_limit(Some(claim.limit));
        let mut len = claim.limit.0 - claim.from.0;
        let frame = [0x02u8, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00, 0x45, 0];
        let mut out = [0u8; 128];
        let mut used = Vec::new();
        for _ in 0..frames {
            let next = s.next_seq().unwrap();
            if s.seq_limit().unwrap().0 - next.0 < len / 2 {
                let c = state.claim(FP, block, Some(next)).unwrap();
                s.skip_to(c.from);
                s.set_seq_limit(Some(c.limit));
                len = c.limit.0 - c.from.0;
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
    fn replay_floors_round_trip_and_bad_lines_are_named() {
        let f = psp_core::host::ReplayFloor {
            mac: [2, 0, 0, 0, 0, 7],
            key: FP,
            path: 1,
            next: 4_000_000_000,
        };
        let text = format_floors(&[f, f]);
        assert_eq!(parse_floors(&text), Ok(vec![f, f]));
        assert_eq!(parse_floors(""), Ok(vec![]));
        assert_eq!(
            parse_floors("020000000007 00 1 5\n"),
            Err("line 1: not `<mac> <key> <path> <next>`".into())
        );
        assert!(parse_floors(&text.replace(" 1 ", " 2 ")).is_err());
    }

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

    #[test]
    fn a_sealer_stops_at_an_unwritten_reservation() {
        let dir = temp_dir("stop");
        let state = StateDir::open(&dir).unwrap();
        let claim = state.claim(FP, GROUP_BLOCK, None).unwrap();
        assert!(claim.from.0 < 1 << 31, "a new key starts in the lower half");
        let key = SuiteKey::new(SuiteId::Aes128Gcm, &KEY).unwrap();
        let mut s = Sealer::new(key, Seq(claim.limit.0 - 1), SealerConfig::default()).unwrap();
        s.set_seq_limit(Some(claim.limit));
        let frame = [0x02u8, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00, 0x45, 0];
        let mut out = [0u8; 128];
        assert!(s.seal(Instant::ZERO, &frame, &mut out).is_ok());
        assert_eq!(
            s.seal(Instant::ZERO, &frame, &mut out),
            Err(SealError::Unreserved)
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// With `--user` (root hands the directory over), what the user could have planted is
    /// refused by name and keeps its owner: the directory as a symbolic link, a FIFO, a
    /// subdirectory. (Links to files: `root_user_refuses_links_planted_in_the_state_directory`.)
    #[test]
    fn hand_over_refuses_what_the_user_could_have_planted() {
        let dir = temp_dir("handover");
        std::fs::create_dir_all(&dir).unwrap();
        let link = dir.with_extension("link");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        let nobody = (65534, 65534);
        let by_link = StateDir::open_for(&link, Some(nobody)).map(drop);
        nix::unistd::mkfifo(&dir.join("fifo"), Mode::from_bits_truncate(0o600)).unwrap();
        let by_fifo = StateDir::open_for(&dir, Some(nobody)).map(drop);
        std::fs::remove_file(dir.join("fifo")).unwrap();
        std::fs::create_dir(dir.join("sub")).unwrap();
        let by_dir = StateDir::open_for(&dir, Some(nobody)).map(drop);
        let owner = std::fs::metadata(dir.join("sub")).unwrap().uid();
        std::fs::remove_file(&link).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let e = by_link.unwrap_err().to_string();
        assert!(e.contains("is a symbolic link, not a directory"), "{e}");
        let e = by_fifo.unwrap_err().to_string();
        assert!(
            e.contains("fifo is not a regular file, directory or socket"),
            "{e}"
        );
        let e = by_dir.unwrap_err().to_string();
        assert!(e.contains("sub is a directory, not a regular file"), "{e}");
        assert_eq!(owner, nix::unistd::geteuid().as_raw());
    }

    /// A directory (or a file in it) another user owns is refused with the command that fixes
    /// it, for the user the daemon runs as (root here).
    #[test]
    fn root_state_owned_by_another_user_names_the_fix_command() {
        // The owner to give it: root, or the `--user` another test of this process may have
        // set meanwhile (it is only ever set, never cleared).
        let fixed = |e: &str, command: &str, path: &Path| {
            [Some(0), crate::config::run_as()]
                .into_iter()
                .flatten()
                .any(|u| {
                    e.ends_with(&format!(
                        "fix: {command} {} {}",
                        owner_spec(u),
                        path.display()
                    ))
                })
        };
        let dir = temp_dir("owner");
        let a = StateDir::open(&dir).unwrap();
        a.write("x", "1\n").unwrap();
        drop(a);
        let nobody = (Some(Uid::from_raw(65534)), Some(Gid::from_raw(65534)));
        nix::unistd::chown(&dir.join("x"), nobody.0, nobody.1).unwrap();
        let e = StateDir::open(&dir)
            .unwrap()
            .read("x")
            .unwrap_err()
            .to_string();
        assert!(fixed(&e, "chown", &dir.join("x")), "{e}");
        nix::unistd::chown(&dir, nobody.0, nobody.1).unwrap();
        let e = StateDir::open(&dir).unwrap_err().to_string();
        assert!(fixed(&e, "chown -R", &dir), "{e}");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        nix::unistd::chown(&dir, Some(Uid::from_raw(0)), None).unwrap();
        let e = StateDir::open(&dir).unwrap_err().to_string();
        let want = format!("fix: chmod go-w {}", dir.display());
        assert!(e.ends_with(&want), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn fix_commands_quote_paths_for_the_shell() {
        assert_eq!(
            shell_word(Path::new("/var/lib/psp-gateway/psp0@ns")),
            "/var/lib/psp-gateway/psp0@ns"
        );
        assert_eq!(
            shell_word(Path::new("/tmp/a b/it's")),
            "'/tmp/a b/it'\\''s'"
        );
        assert_eq!(owner_spec(0), "root:");
        assert_eq!(owner_spec(4_000_000_000), "4000000000");
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
        // A symbolic link planted at the name is replaced, never followed.
        b.write("y", "2\n").unwrap();
        assert!(std::fs::symlink_metadata(dir.join("y")).unwrap().is_file());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
