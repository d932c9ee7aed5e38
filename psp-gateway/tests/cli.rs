//! The command line as a user runs it: the real binary, real pipes, real files.

use std::io::Write;
use std::process::{Command, Output, Stdio};

fn run(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_psp-gateway"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn psp-gateway");
    let mut input = child.stdin.take().expect("stdin");
    let data = stdin.to_vec();
    let writer = std::thread::spawn(move || {
        // The child may exit before reading everything (bad arguments): ignore EPIPE.
        let _ = input.write_all(&data);
    });
    let out = child.wait_with_output().expect("wait");
    writer.join().expect("writer thread");
    out
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// One line on stderr, no panic, no backtrace.
fn assert_one_line_error(o: &Output, code: i32) {
    let e = stderr(o);
    assert_eq!(o.status.code(), Some(code), "stderr: {e}");
    assert_eq!(e.lines().count(), 1, "expected one line, got: {e:?}");
    assert!(e.starts_with("psp-gateway: error: "), "{e}");
    assert!(
        !e.contains("panicked") && !e.contains("internal error"),
        "{e}"
    );
}

/// A sealed frame from the checked-in vectors (bf-cbc-hmac-sha1, default options).
fn vector(name: &str) -> (String, String, String) {
    let text = include_str!("../../crates/psp-core/tests/vectors/psp_frames.json");
    let v: serde_json::Value = serde_json::from_str(text).expect("vectors parse");
    let v = v["vectors"]
        .as_array()
        .expect("vector list")
        .iter()
        .find(|v| v["name"] == name)
        .expect("vector present")
        .clone();
    let s = |k: &str| v[k].as_str().expect(k).to_owned();
    (s("suite"), s("key"), s("sealed"))
}

#[test]
fn keygen_lengths_and_randomness() {
    let a = run(&["keygen"], b"");
    let b = run(&["keygen"], b"");
    assert!(a.status.success());
    let ka = String::from_utf8(a.stdout).unwrap();
    let kb = String::from_utf8(b.stdout).unwrap();
    assert_eq!(ka.trim().len(), 64, "32 bytes as hex by default");
    assert_ne!(ka, kb);
    let g = run(&["keygen", "--suite", "aes128-gcm"], b"");
    assert_eq!(String::from_utf8(g.stdout).unwrap().trim().len(), 32);
    assert_one_line_error(&run(&["keygen", "--suite", "rot13"], b""), 2);
    assert_one_line_error(&run(&["keygen", "--bytes", "0"], b""), 2);
}

#[test]
fn scramble_round_trip_streams_any_size() {
    let key = "000102030405060708090a0b0c0d0e0f";
    // 3 MB + an odd tail: larger than the 64 KiB chunk, so chunk boundaries are crossed.
    let data: Vec<u8> = (0..3_000_017u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let s = run(&["scramble", "--key-hex", key], &data);
    assert!(s.status.success(), "{}", stderr(&s));
    assert_eq!(s.stdout.len(), data.len(), "length-preserving");
    assert_ne!(s.stdout, data);
    let d = run(&["scramble", "--key-hex", key, "--descramble"], &s.stdout);
    assert!(d.status.success());
    assert_eq!(d.stdout, data);
    // Same as the library in one call.
    let mut lib = data.clone();
    psp_core::scramble::Scrambler::new(&psp_core::scramble::Seed::from_key(
        &hex::decode(key).unwrap(),
    ))
    .scramble_in_place(&mut lib);
    assert_eq!(lib, s.stdout);
    let empty = run(&["scramble", "--key-hex", key], b"");
    assert!(empty.status.success() && empty.stdout.is_empty());
}

#[test]
fn bad_arguments_are_one_line() {
    assert_one_line_error(&run(&["scramble"], b""), 2);
    assert_one_line_error(&run(&["scramble", "--key-hex", "xyz"], b""), 2);
    assert_one_line_error(&run(&["scramble", "--key-hex", "abc"], b""), 2);
    assert_one_line_error(&run(&["--bogus"], b""), 2);
    assert_one_line_error(
        &run(&["inspect", "--key-hex", "00", "--suite", "rot13"], b""),
        2,
    );
    assert_one_line_error(&run(&["inspect", "--key-hex", "00"], b""), 2); // bf needs 32 bytes
}

/// A fresh temporary directory, removed on drop.
struct TempDir(std::path::PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        use core::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "psp-cli-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        Self(dir)
    }

    /// Writes `name` with `content` and `mode`; returns its path as a string.
    fn file(&self, name: &str, content: &str, mode: u32) -> String {
        use std::os::unix::fs::PermissionsExt;
        let path = self.0.join(name);
        std::fs::write(&path, content).expect("write key file");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
        path.to_str().expect("utf-8 temp path").to_owned()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn key_file_for_scramble_and_inspect() {
    let key = "000102030405060708090a0b0c0d0e0f";
    let dir = TempDir::new("keyfile");
    let good = dir.file("good.key", &format!("{key}\n"), 0o600);
    let data = b"the same bytes either way".repeat(100);
    let by_hex = run(&["scramble", "--key-hex", key], &data);
    let by_file = run(&["scramble", "--key-file", &good], &data);
    assert!(by_file.status.success(), "{}", stderr(&by_file));
    assert_eq!(by_file.stdout, by_hex.stdout);

    let (suite, vkey, sealed) = vector("bf-cbc-hmac-sha1 plain");
    let vfile = dir.file("vector.key", &vkey, 0o400);
    let ok = run(
        &["inspect", "--suite", &suite, "--key-file", &vfile],
        sealed.as_bytes(),
    );
    let out = String::from_utf8_lossy(&ok.stdout).into_owned();
    assert!(ok.status.success(), "{out}{}", stderr(&ok));
    assert!(out.contains("icv ok"), "{out}");

    // Exactly one of the two.
    for args in [
        &["scramble", "--key-hex", key, "--key-file", &good][..],
        &["inspect", "--suite", &suite],
    ] {
        assert_one_line_error(&run(args, b""), 2);
    }
    // A missing file.
    let missing = run(&["scramble", "--key-file", "/nonexistent/psp.key"], b"");
    assert_one_line_error(&missing, 2);
    assert!(stderr(&missing).contains("--key-file: cannot open /nonexistent/psp.key"));
}

#[test]
fn key_file_mode_0644_is_refused() {
    let key = "000102030405060708090a0b0c0d0e0f";
    let dir = TempDir::new("mode");
    let open = dir.file("open.key", key, 0o644);
    for cmd in ["scramble", "inspect"] {
        let o = run(&[cmd, "--key-file", &open], b"");
        assert_one_line_error(&o, 2);
        let e = stderr(&o);
        assert!(
            e.contains(&format!(
                "--key-file: {open} is mode 0644; want 0600 or stricter"
            )),
            "{e}"
        );
        assert!(!e.contains(key), "the key must not be echoed: {e}");
    }
}

/// Root-only (CI runs as root; it fails, never skips): a key file owned by another user.
#[test]
fn key_file_of_another_user_is_refused() {
    use std::os::unix::fs::MetadataExt;
    let key = "000102030405060708090a0b0c0d0e0f";
    let dir = TempDir::new("owner");
    let theirs = dir.file("theirs.key", key, 0o600);
    std::os::unix::fs::chown(&theirs, Some(12345), Some(12345))
        .expect("chown to uid 12345: run the tests as root");
    assert_eq!(std::fs::metadata(&theirs).unwrap().uid(), 12345);
    for cmd in ["scramble", "inspect"] {
        let o = run(&[cmd, "--key-file", &theirs], b"");
        assert_one_line_error(&o, 2);
        let e = stderr(&o);
        assert!(
            e.contains(&format!(
                "--key-file: {theirs} is owned by uid 12345; want root (uid 0)"
            )),
            "{e}"
        );
    }
    // Back to root: accepted.
    std::os::unix::fs::chown(&theirs, Some(0), Some(0)).expect("chown back");
    let o = run(&["scramble", "--key-file", &theirs], b"x");
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn inspect_hex_verdicts() {
    let (suite, key, sealed) = vector("bf-cbc-hmac-sha1 plain");
    let ok = run(
        &["inspect", "--suite", &suite, "--key-hex", &key],
        sealed.as_bytes(),
    );
    let out = String::from_utf8_lossy(&ok.stdout).into_owned();
    assert!(ok.status.success(), "{out}{}", stderr(&ok));
    assert!(
        out.contains("type 0x1982 (PSP)") && out.contains("icv ok"),
        "{out}"
    );
    assert!(
        out.contains("IPv4") && out.contains("10.0.0.1 -> 10.0.0.2"),
        "{out}"
    );

    // Flip one bit of the ciphertext: a verdict, exit 1.
    let mut bytes = hex::decode(&sealed).unwrap();
    bytes[30] ^= 0x04;
    let bad = run(
        &["inspect", "--suite", &suite, "--key-hex", &key],
        hex::encode(&bytes).as_bytes(),
    );
    assert_one_line_error(&bad, 1);
    assert!(String::from_utf8_lossy(&bad.stdout).contains("DROP: bad-icv"));

    // Wrong key.
    let other = "11".repeat(32);
    let wrong = run(
        &["inspect", "--suite", &suite, "--key-hex", &other],
        sealed.as_bytes(),
    );
    assert_eq!(wrong.status.code(), Some(1));

    // Garbage and truncation never panic.
    for input in ["zz\n", "00\n", "1982\n", &sealed[..40], "\n"] {
        let o = run(
            &["inspect", "--suite", &suite, "--key-hex", &key],
            input.as_bytes(),
        );
        assert_eq!(o.status.code(), Some(1), "input {input:?}: {}", stderr(&o));
        assert!(!stderr(&o).contains("panicked"));
    }
}

#[test]
fn inspect_pcap() {
    let (suite, key, sealed) = vector("aes128-gcm plain");
    let frame = hex::decode(&sealed).unwrap();
    let plain = hex::decode("ffffffffffff0200000000010806").unwrap();
    let file = psp_gateway::cli::pcap::write(&[&frame, &plain]);
    let dir = std::env::temp_dir().join(format!("psp-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("cap.pcap");
    std::fs::write(&path, file).unwrap();
    let o = run(
        &[
            "inspect",
            "--suite",
            &suite,
            "--key-hex",
            &key,
            "--pcap",
            path.to_str().unwrap(),
        ],
        b"",
    );
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(out.contains("icv ok"), "{out}");
    assert!(out.contains("not PSP"), "{out}");
    assert_one_line_error(&o, 1); // the clear frame does not verify
    std::fs::write(&path, b"not a pcap file at all, just text").unwrap();
    let o = run(
        &[
            "inspect",
            "--key-hex",
            &"00".repeat(32),
            "--pcap",
            path.to_str().unwrap(),
        ],
        b"",
    );
    assert_one_line_error(&o, 1);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn run_with_a_bad_config_is_one_line_and_exit_2() {
    let dir = std::env::temp_dir().join(format!("psp-cli-badcfg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let cfg = dir.join("gw.toml");
    std::fs::write(
        &cfg,
        "[interface]\nname = \"psp0\"\nmac = \"02:00:00:00:00:0g\"\n[uplink]\nkind = \"raw\"\ninterface = \"up0\"\n",
    )
    .expect("write config");
    let path = cfg.to_str().expect("utf-8 path");
    let o = run(&["run", "--config", path], b"");
    assert_one_line_error(&o, 2);
    let e = stderr(&o);
    assert!(e.contains(path) && e.contains("interface.mac"), "{e}");

    // A missing file is a config error too, naming the file.
    let missing = dir.join("missing.toml");
    let o = run(&["run", "--config", missing.to_str().expect("utf-8")], b"");
    assert_one_line_error(&o, 2);
    assert!(stderr(&o).contains("missing.toml"), "{}", stderr(&o));

    // `status` without a daemon: one line, exit 1.
    let sock = dir.join("none.sock");
    let o = run(&["status", "--socket", sock.to_str().expect("utf-8")], b"");
    assert_one_line_error(&o, 1);
    std::fs::remove_dir_all(&dir).expect("cleanup");
}
