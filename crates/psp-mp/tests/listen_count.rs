//! `psp-mp listen --count N`: every client's stream is delivered (to `--out-dir DIR` as
//! `DIR/1`, `DIR/2`, … in accept order), and `--count N > 1` with stdout as the output is
//! refused before anything is accepted. Real binary, loopback TCP, unprivileged, seconds.
#![allow(missing_docs)]

use core::time::Duration;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Instant;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_psp-mp"))
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Two free loopback ports (bound and released: another process could take them in between,
/// which would fail the test loudly, not wrongly).
fn free_ports() -> [u16; 2] {
    let a = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let b = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    [
        a.local_addr().unwrap().port(),
        b.local_addr().unwrap().port(),
    ]
}

/// A fresh directory under the temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let p = std::env::temp_dir().join(format!("psp-mp-count-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        Self(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Waits for `child` at most `limit`; kills it and returns `None` if it is still running.
fn wait_for(mut child: Child, limit: Duration) -> Option<Output> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if child.try_wait().unwrap().is_some() {
            return Some(child.wait_with_output().unwrap());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// Runs one client sending `data`, retrying while the listener is not up yet.
fn client(t: u16, u: u16, data: &[u8]) -> Output {
    for _ in 0..200 {
        let mut c = bin()
            .args(["connect", "--path", &format!("trusted,127.0.0.1:{t}")])
            .args(["--path", &format!("untrusted,127.0.0.1:{u}")])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // A client refused at connect exits before reading stdin: ignore the broken pipe.
        let _ = c.stdin.take().unwrap().write_all(data);
        let o = wait_for(c, Duration::from_secs(20)).expect("the client ends");
        if stderr(&o).contains("Connection refused") {
            std::thread::sleep(Duration::from_millis(25));
            continue;
        }
        return o;
    }
    panic!("the listener never came up");
}

/// Client `k`'s stream: distinct per client, several segments on both paths.
fn stream(k: u8) -> Vec<u8> {
    (0..300_000u32)
        .map(|i| (i % 251) as u8 ^ k.wrapping_mul(0x5b))
        .collect()
}

/// Three clients, one after another, each sending its own stream: each stream lands whole in
/// its own file, `DIR/1` … `DIR/3` in accept order, and no `.part` file is left.
#[test]
fn listen_count_delivers_every_clients_stream_to_its_own_file() {
    let [t, u] = free_ports();
    let dir = TempDir::new("three");
    let server = bin()
        .args(["listen", "--path", &format!("trusted,127.0.0.1:{t}")])
        .args(["--path", &format!("untrusted,127.0.0.1:{u}")])
        .args(["--count", "3", "--out-dir"])
        .arg(&dir.0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    for k in 1..=3u8 {
        let o = client(t, u, &stream(k));
        assert!(o.status.success(), "client {k}: {}", stderr(&o));
        assert!(
            o.stdout.is_empty(),
            "client {k} got bytes from the listener"
        );
    }
    let server = wait_for(server, Duration::from_secs(20)).expect("the listener ends");
    assert!(server.status.success(), "listener: {}", stderr(&server));
    assert!(server.stdout.is_empty(), "nothing on the listener's stdout");
    for k in 1..=3u8 {
        let got = std::fs::read(dir.0.join(k.to_string()))
            .unwrap_or_else(|e| panic!("{}/{k}: {e}", dir.0.display()));
        assert!(
            got == stream(k),
            "{k}: {} bytes, not client {k}'s",
            got.len()
        );
    }
    let mut names: Vec<String> = std::fs::read_dir(&dir.0)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["1", "2", "3"]);
}

/// Several streams into one stdout cannot be told apart: `--count 2` without `--out-dir` or
/// `--discard` is refused at once, one line, exit 2, before any client is accepted.
#[test]
fn listen_count_above_one_into_stdout_is_refused() {
    let [t, u] = free_ports();
    let server = bin()
        .args(["listen", "--path", &format!("trusted,127.0.0.1:{t}")])
        .args(["--path", &format!("untrusted,127.0.0.1:{u}")])
        .args(["--count", "2"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let o = wait_for(server, Duration::from_secs(5)).expect("refused at once, not waiting");
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(
        stderr(&o),
        "psp-mp: listen --count 2 would write 2 streams into one stdout; give --out-dir DIR \
         (one file per client: DIR/1, DIR/2, ...) or --discard\n"
    );
    let help =
        String::from_utf8(bin().args(["listen", "--help"]).output().unwrap().stdout).unwrap();
    assert!(help.contains("--out-dir"), "{help}");
}

/// An existing `DIR/N` is never overwritten: refused before anything is accepted.
#[test]
fn listen_out_dir_refuses_to_overwrite() {
    let [t, u] = free_ports();
    let dir = TempDir::new("exists");
    std::fs::create_dir_all(&dir.0).unwrap();
    std::fs::write(dir.0.join("2"), b"keep").unwrap();
    let server = bin()
        .args(["listen", "--path", &format!("trusted,127.0.0.1:{t}")])
        .args(["--path", &format!("untrusted,127.0.0.1:{u}")])
        .args(["--count", "2", "--out-dir"])
        .arg(&dir.0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let o = wait_for(server, Duration::from_secs(5)).expect("refused at once, not waiting");
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let p = Path::new(&dir.0).join("2");
    assert_eq!(
        stderr(&o),
        format!(
            "psp-mp: --out-dir: {} exists; give a directory without the files 1..2\n",
            p.display()
        )
    );
    assert_eq!(std::fs::read(&p).unwrap(), b"keep");
}

/// MULTIPATH.md "Edge cases" 12: `connect --setup-only N` against `listen --count N
/// --discard` prints N lines of seven integers (µs): TOTAL CONNECT HANDSHAKE BINDING, TOTAL at
/// least the sum of those three, then FIRST_FLIGHT REPLY KEYS, which add up to HANDSHAKE; both
/// sides exit 0.
#[test]
fn setup_only_prints_seven_columns_per_set_up() {
    let [t, u] = free_ports();
    let server = bin()
        .args(["listen", "--path", &format!("trusted,127.0.0.1:{t}")])
        .args(["--path", &format!("untrusted,127.0.0.1:{u}")])
        .args(["--count", "3", "--discard"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = None;
    for _ in 0..200 {
        let o = bin()
            .args(["connect", "--path", &format!("trusted,127.0.0.1:{t}")])
            .args(["--path", &format!("untrusted,127.0.0.1:{u}")])
            .args(["--setup-only", "3"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        if stderr(&o).contains("Connection refused") {
            std::thread::sleep(Duration::from_millis(25));
            continue;
        }
        out = Some(o);
        break;
    }
    let o = out.expect("the listener came up");
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8(o.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    for l in lines {
        let v: Vec<u64> = l.split(' ').map(|x| x.parse().unwrap()).collect();
        assert_eq!(v.len(), 7, "{l}");
        assert!(v[0] >= v[1] + v[2] + v[3], "{l}");
        assert_eq!(v[4] + v[5] + v[6], v[2], "{l}");
    }
    let server = wait_for(server, Duration::from_secs(20)).expect("the listener ends");
    assert!(server.status.success(), "{}", stderr(&server));
    assert!(server.stdout.is_empty());
}
