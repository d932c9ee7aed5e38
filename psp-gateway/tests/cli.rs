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
    assert_eq!(
        ka.trim().len(),
        32,
        "16 bytes (aes128-gcm, the default) as hex"
    );
    assert_ne!(ka, kb);
    let g = run(&["keygen", "--suite", "bf-cbc-hmac-sha1"], b"");
    assert_eq!(String::from_utf8(g.stdout).unwrap().trim().len(), 64);
    assert_one_line_error(&run(&["keygen", "--suite", "rot13"], b""), 2);
    // A near miss lists the valid names.
    let near = run(&["keygen", "--suite", "aes128"], b"");
    assert_one_line_error(&near, 2);
    assert!(
        stderr(&near).contains(
            "--suite: unknown suite `aes128`; want one of none, null-hmac-sha1, \
             bf-cbc-hmac-sha1, aes128-gcm, aes256-gcm, chacha20-poly1305, scramble-hmac-sha1"
        ),
        "{}",
        stderr(&near)
    );
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
    assert_one_line_error(&run(&["inspect", "--key-hex", "00"], b""), 2); // aes128-gcm: 16 bytes
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
            &"00".repeat(16),
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

/// The public key of the Ed25519-signed vectors' signer.
fn signer_public_hex() -> String {
    let text = include_str!("../../crates/psp-core/tests/vectors/psp_frames.json");
    let v: serde_json::Value = serde_json::from_str(text).expect("vectors parse");
    let seed = v["vectors"]
        .as_array()
        .expect("vector list")
        .iter()
        .find_map(|v| v["signer_seed"].as_str())
        .expect("a signed vector");
    let seed: [u8; 32] = hex::decode(seed).unwrap().try_into().unwrap();
    let pk = psp_core::crypto::sign::SigningKey::from_seed(&seed)
        .unwrap()
        .public_key();
    hex::encode(pk.as_bytes())
}

/// A signed group frame: without the signer's public key its ICV is still checked and it is
/// not an error; with several keys the right one is found; with only wrong ones it is a drop.
#[test]
fn inspect_signed_frames() {
    let (suite, key, sealed) = vector("null-hmac-sha1 Ed25519-signed ARP");
    let inspect = |extra: &[&str]| {
        let mut args = vec!["inspect", "--suite", &suite, "--key-hex", &key];
        args.extend_from_slice(extra);
        let o = run(&args, sealed.as_bytes());
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        (o, out)
    };
    let (o, out) = inspect(&[]);
    assert!(o.status.success(), "{out}{}", stderr(&o));
    assert!(
        out.contains("verdict    icv ok, signature not checked (signed; give --public-key-hex)"),
        "{out}"
    );
    assert!(out.contains("ARP request"), "{out}");
    assert!(stderr(&o).is_empty(), "{}", stderr(&o));

    let right = signer_public_hex();
    let wrong = "3b6a27bcceb6a42d62a3a8d02a6f0d73653215771de243a63ac048a18b59da29";
    let (o, out) = inspect(&["--public-key-hex", wrong, "--public-key-hex", &right]);
    assert!(o.status.success(), "{out}{}", stderr(&o));
    assert!(out.contains("icv ok, signature ok (public key 2)"), "{out}");
    let (o, out) = inspect(&["--public-key-hex", &format!("{wrong},{right}")]);
    assert!(
        o.status.success() && out.contains("signature ok (public key 2)"),
        "{out}"
    );

    let (o, out) = inspect(&["--public-key-hex", wrong]);
    assert_one_line_error(&o, 1);
    assert!(out.contains("DROP: bad-signature"), "{out}");
    assert_one_line_error(&inspect(&["--public-key-hex", "abcd"]).0, 2);
}

/// A unicast frame carrying a security number that no given key opens is reported as a
/// session frame (its key id), not an error; with `--config` the MACs say so for certain.
#[test]
fn inspect_session_frames_are_not_errors() {
    let (suite, _, sealed) = vector("chacha20-poly1305 security number + timestamp");
    let other = "11".repeat(32);
    let o = run(
        &["inspect", "--suite", &suite, "--key-hex", &other],
        sealed.as_bytes(),
    );
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "{out}{}", stderr(&o));
    assert!(out.contains("verdict    session key id 0x"), "{out}");
    assert!(
        out.contains("session keys are never stored, so it cannot be opened offline (or it is sealed under a key not given here)"),
        "{out}"
    );
    assert!(
        out.contains("1 frame(s): 0 opened, 1 under session keys"),
        "{out}"
    );
    assert!(!out.contains("DROP"), "{out}");

    // --config: the group key, the session peers' MACs, and public keys given beside it.
    let dir = TempDir::new("inspect-config");
    let (_, gkey, signed) = vector("null-hmac-sha1 Ed25519-signed ARP");
    dir.file("group.key", &gkey, 0o600);
    let cfg = dir.file(
        "gw.toml",
        "[interface]\nmac = \"02:00:00:00:00:01\"\naddresses = [\"10.0.0.1/24\"]\n\
         [uplink]\nkind = \"raw\"\ninterface = \"eth1\"\n[session]\n\
         [defaults]\nsuite = \"null-hmac-sha1\"\n[group]\nkey_file = \"group.key\"\n\
         [[peer]]\nname = \"b\"\nmac = \"02:00:00:00:00:02\"\n",
        0o644,
    );
    let right = signer_public_hex();
    let o = run(
        &["inspect", "--config", &cfg, "--public-key-hex", &right],
        format!("{signed}\n{sealed}\n").as_bytes(),
    );
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "{out}{}", stderr(&o));
    assert!(out.contains("icv ok, signature ok"), "{out}");
    assert!(
        out.contains("session keys are never stored, so it cannot be opened offline\n"),
        "{out}"
    );
    assert!(
        out.contains("2 frame(s): 1 opened, 1 under session keys"),
        "{out}"
    );
    // --suite belongs to --key-*, not to --config.
    assert_one_line_error(
        &run(&["inspect", "--config", &cfg, "--suite", "aes128-gcm"], b""),
        2,
    );
}

/// `pubkey` prints what `keygen --identity` printed, from the file or from a config.
#[test]
fn pubkey_prints_the_identity_public_key() {
    let dir = TempDir::new("pubkey");
    let id = dir.0.join("host.id");
    let made = run(&["keygen", "--identity", id.to_str().unwrap()], b"");
    assert!(made.status.success(), "{}", stderr(&made));
    let printed = String::from_utf8_lossy(&made.stdout).trim().to_owned();
    assert_eq!(printed.len(), 64);
    let o = run(&["pubkey", id.to_str().unwrap()], b"");
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), printed);

    dir.file("group.key", &"22".repeat(16), 0o600);
    let cfg = dir.file(
        "gw.toml",
        "[interface]\naddresses = [\"10.0.0.1/24\"]\n[uplink]\nkind = \"raw\"\ninterface = \"eth1\"\n\
         [session]\nidentity_file = \"host.id\"\n[defaults]\nsuite = \"aes128-gcm\"\n\
         [group]\nkey_file = \"group.key\"\n",
        0o644,
    );
    let o = run(&["pubkey", "--config", &cfg], b"");
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), printed);

    // The key-file rules apply.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&id, std::fs::Permissions::from_mode(0o644)).unwrap();
    let o = run(&["pubkey", id.to_str().unwrap()], b"");
    assert_one_line_error(&o, 1);
    assert!(
        stderr(&o).contains("is mode 0644; want 0600"),
        "{}",
        stderr(&o)
    );
    assert_one_line_error(&run(&["pubkey"], b""), 2);
}

/// `status --config` reads the socket path and nothing else: a config whose key files are
/// missing and whose peer is half written still names the socket, and the hint says what a
/// missing socket means.
#[test]
fn status_config_needs_only_the_socket_path() {
    let dir = TempDir::new("status-config");
    let sock = dir.0.join("gw.sock");
    let cfg = dir.file(
        "gw.toml",
        "[daemon]\nstatus_socket = \"gw.sock\"\n[group]\nkey_file = \"missing.key\"\n[[peer]]\nname = \"half\n",
        0o644,
    );
    // The half-written string is a TOML syntax error: reported as such, one line.
    assert_one_line_error(&run(&["status", "--config", &cfg], b""), 2);
    let cfg = dir.file(
        "gw.toml",
        "[daemon]\nstatus_socket = \"gw.sock\"\n[group]\nkey_file = \"missing.key\"\n[[peer]]\nname = \"half\"\n",
        0o644,
    );
    let o = run(&["status", "--config", &cfg], b"");
    assert_one_line_error(&o, 1);
    let e = stderr(&o);
    assert!(
        e.contains(&format!("status socket {}: ", sock.display()))
            && e.contains(
                "no daemon has created it: is the daemon running, in this network namespace?"
            ),
        "{e}"
    );
    assert!(!e.contains("missing.key"), "{e}");
}

/// `psp-gateway-gen --help` prints its usage and creates nothing; other options are errors.
#[test]
fn gen_help_creates_no_directory() {
    let dir = TempDir::new("gen");
    let gen_bin = env!("CARGO_BIN_EXE_psp-gateway-gen");
    let o = Command::new(gen_bin)
        .arg("--help")
        .current_dir(&dir.0)
        .output()
        .unwrap();
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("usage: psp-gateway-gen DIR"));
    let o = Command::new(gen_bin)
        .arg("--bogus")
        .current_dir(&dir.0)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        std::fs::read_dir(&dir.0).unwrap().count(),
        0,
        "created something"
    );
}

/// `psp-gateway.toml(5)` renders under groff with every warning on and none printed.
#[test]
fn config_man_page_renders_cleanly() {
    let dir = TempDir::new("man5");
    let o = Command::new(env!("CARGO_BIN_EXE_psp-gateway-gen"))
        .arg(&dir.0)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let page = dir.0.join("man/psp-gateway.toml.5");
    let o = Command::new("groff")
        .args(["-man", "-Tutf8", "-ww", "-z"])
        .arg(&page)
        .output()
        .expect("groff (Debian: groff-base, which man-db needs; testbed/install-deps.sh)");
    assert!(o.status.success());
    assert!(
        o.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}
