//! What the daemon says about its state directory's files (docs/GATEWAY.md, "State
//! directory"), with one in-memory gateway under tokio's paused clock, its log captured: a
//! sequence-number reservation the directory refuses is logged once per key, and once more when
//! it works again, however many times it is retried; a `request-clock` that cannot be used is
//! named in a warning that says what the daemon does instead.
//!
//! No root, no namespace: [`MemGateway`] runs the daemon's driver and host on an in-memory TAP
//! and segment (the configuration, keys and state directory are real files in a temporary
//! directory).

use core::time::Duration;
use std::fs;
use std::os::unix::fs::PermissionsExt as _;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use psp_gateway::config::Config;
use psp_gateway::io::mem::MemSegment;
use psp_gateway::testing::MemGateway;

/// A temporary directory with vm1's configuration (a group key and one `key_file` peer, vm2)
/// and keys; removed on drop.
struct Setup {
    dir: PathBuf,
    config: Config,
}

impl Setup {
    fn new(tag: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("psp-state-files-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("test directory");
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).expect("chmod");
        for name in ["group.key", "vm1-vm2.key"] {
            let mut key = [0u8; 16];
            getrandom::fill(&mut key).expect("OS RNG");
            let path = dir.join(name);
            fs::write(&path, hex::encode(key)).expect("write key");
            fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).expect("chmod key");
        }
        let text = format!(
            "[interface]\nname = \"psp0\"\nmac = \"02:50:53:00:00:01\"\n\n\
             [uplink]\nkind = \"raw\"\ninterface = \"up0\"\n\n\
             [daemon]\nstatus_socket = \"{0}/vm1.sock\"\nstate_directory = \"{0}/vm1.state\"\n\n\
             [defaults]\nsuite = \"aes128-gcm\"\n\n\
             [group]\nkey_file = \"group.key\"\n\n\
             [[peer]]\nname = \"vm2\"\nmac = \"02:50:53:00:00:02\"\nkey_file = \"vm1-vm2.key\"\n",
            dir.display()
        );
        let path = dir.join("vm1.toml");
        fs::write(&path, &text).expect("write config");
        let config = Config::parse(&path, &text).unwrap_or_else(|e| panic!("config: {e}"));
        Self { dir, config }
    }

    fn state(&self) -> PathBuf {
        self.dir.join("vm1.state")
    }

    fn start(&self) -> MemGateway {
        MemGateway::start(&self.config, vec![MemSegment::new().port(None)], 7)
            .unwrap_or_else(|e| panic!("vm1: {e}"))
    }

    /// The names of the sequence-number files in the state directory, sorted.
    fn seq_files(&self) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(self.state())
            .expect("state directory")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("seq-"))
            .collect();
        names.sort();
        names
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// The log lines of the gateways running on this thread (tokio's current-thread runtime runs
/// them here), while the guard lives.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl Logs {
    /// Captures the log (level `info` and up) until the guard drops.
    fn capture() -> (Self, tracing::subscriber::DefaultGuard) {
        let logs = Self::default();
        let w = logs.clone();
        let sub = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_max_level(tracing::Level::INFO)
            .with_writer(move || LogWriter(w.clone()))
            .finish();
        (logs, tracing::subscriber::set_default(sub))
    }

    /// The lines that contain `needle`.
    fn lines(&self, needle: &str) -> Vec<String> {
        String::from_utf8_lossy(&self.0.lock().expect("logs"))
            .lines()
            .filter(|l| l.contains(needle))
            .map(ToOwned::to_owned)
            .collect()
    }
}

struct LogWriter(Logs);

impl std::io::Write for LogWriter {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.0.lock().expect("logs").extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// `needle`'s lines, each naming one of `files`: exactly one per file.
fn one_line_per_file(logs: &Logs, needle: &str, files: &[String]) {
    let lines = logs.lines(needle);
    for f in files {
        let n = lines.iter().filter(|l| l.contains(f.as_str())).count();
        assert_eq!(
            n,
            1,
            "{f}: {n} lines with `{needle}`:\n{}",
            lines.join("\n")
        );
    }
    assert_eq!(lines.len(), files.len(), "{}", lines.join("\n"));
}

/// A reservation the state directory refuses is tried again every second; it is logged once
/// per key when it starts failing and once when it succeeds again, not at every retry.
#[tokio::test(start_paused = true)]
async fn a_refused_reservation_is_logged_once_and_its_end_once() {
    let setup = Setup::new("reserve");
    // A first run writes one reservation per static key: the group key's and vm2's.
    let g = setup.start();
    tokio::time::sleep(Duration::from_millis(100)).await;
    g.stop().await;
    let files = setup.seq_files();
    assert_eq!(files.len(), 2, "{files:?}");
    // A directory in place of each file: every claim under those keys fails.
    for f in &files {
        let path = setup.state().join(f);
        fs::remove_file(&path).expect("remove the reservation");
        fs::create_dir(&path).expect("a directory in its place");
    }
    let (logs, _guard) = Logs::capture();
    let g = setup.start();
    tokio::time::sleep(Duration::from_secs(5)).await;
    one_line_per_file(&logs, "sequence numbers not reserved", &files);
    assert!(logs.lines("reserved again").is_empty());
    // Writable again: the next retry succeeds, said once per key; nothing more after.
    for f in &files {
        fs::remove_dir(setup.state().join(f)).expect("remove the directory");
    }
    tokio::time::sleep(Duration::from_secs(5)).await;
    one_line_per_file(&logs, "sequence numbers reserved again", &files);
    one_line_per_file(&logs, "sequence numbers not reserved", &files);
    for f in &files {
        assert!(setup.state().join(f).is_file(), "{f} written");
    }
    g.stop().await;
}

/// A `request-clock` that cannot be used (not a TAI64N label in hex; a file others may write) is
/// named in a warning that says what is wrong and what the daemon does instead, and the gateway
/// starts; a good file, or none, is not mentioned.
#[tokio::test(start_paused = true)]
async fn a_bad_request_clock_is_named_in_a_warning() {
    let setup = Setup::new("clock");
    fs::create_dir_all(setup.state()).expect("state directory");
    fs::set_permissions(setup.state(), fs::Permissions::from_mode(0o700)).expect("chmod");
    let clock = setup.state().join("request-clock");
    let cases: [(&str, u32, &str); 3] = [
        ("not a clock\n", 0o600, "not 24 hex digits"),
        ("0123456789abcdef\n", 0o600, "not 24 hex digits"),
        (
            "400000006553f100000000aa\n",
            0o666,
            "lets group or others write it",
        ),
    ];
    for (text, mode, why) in cases {
        fs::write(&clock, text).expect("write request-clock");
        fs::set_permissions(&clock, fs::Permissions::from_mode(mode)).expect("chmod");
        let (logs, guard) = Logs::capture();
        let g = setup.start();
        tokio::time::sleep(Duration::from_millis(100)).await;
        g.stop().await;
        drop(guard);
        let lines = logs.lines("request-clock");
        assert_eq!(lines.len(), 1, "{text:?}: {}", lines.join("\n"));
        let line = &lines[0];
        for want in [
            " WARN ",
            clock.to_str().expect("UTF-8"),
            why,
            "without the last run's floor",
        ] {
            assert!(line.contains(want), "{text:?}: no `{want}` in {line}");
        }
    }
    // A good file, or none: not a word.
    for text in [Some("400000006553f100000000aa\n"), None] {
        match text {
            Some(t) => {
                fs::write(&clock, t).expect("write request-clock");
                fs::set_permissions(&clock, fs::Permissions::from_mode(0o600)).expect("chmod");
            }
            None => fs::remove_file(&clock).expect("remove request-clock"),
        }
        let (logs, guard) = Logs::capture();
        let g = setup.start();
        tokio::time::sleep(Duration::from_millis(100)).await;
        g.stop().await;
        drop(guard);
        assert!(logs.lines("request-clock").is_empty(), "{text:?}");
    }
}
