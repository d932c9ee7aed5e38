//! `psp-mp` as a user runs it: key files under the daemon's rules, the listener's cipher as a
//! requirement, and one-line errors.
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

/// A world-readable long-term secret is refused, as the daemon refuses such a
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

/// `listen --cipher aes128-gcm` refuses a client that asks for scramble; both print
/// one line and exit 1. The default cipher is aes128-gcm on both sides.
#[test]
fn listen_cipher_is_a_requirement() {
    let [t, u] = free_ports();
    let srv_paths = [
        format!("trusted,127.0.0.1:{t}"),
        format!("untrusted,127.0.0.1:{u}"),
    ];
    let server = Command::new(env!("CARGO_BIN_EXE_psp-mp"))
        .args(["listen", "--path", &srv_paths[0], "--path", &srv_paths[1]])
        .args(["--cipher", "aes128-gcm"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let cli_paths = [
        format!("trusted,127.0.0.1:{t}"),
        format!("untrusted,127.0.0.1:{u}"),
    ];
    let mut client = None;
    for _ in 0..100 {
        let o = psp_mp(&[
            "connect",
            "--path",
            &cli_paths[0],
            "--path",
            &cli_paths[1],
            "--cipher",
            "scramble",
        ]);
        if !stderr(&o).contains("Connection refused") {
            client = Some(o);
            break;
        }
        std::thread::sleep(core::time::Duration::from_millis(50));
    }
    let client = client.expect("the listener came up");
    let server = server.wait_with_output().unwrap();
    assert!(!client.status.success() && !server.status.success());
    assert_eq!(
        stderr(&client),
        "psp-mp: refused by the peer: it does not serve cipher scramble (a listener serves only \
         its own --cipher; give both sides the same)\n"
    );
    assert_eq!(
        stderr(&server),
        "psp-mp: refused: the client asks for cipher scramble, this side requires aes128-gcm \
         (give both sides the same --cipher)\n"
    );
    let help = String::from_utf8(psp_mp(&["connect", "--help"]).stdout).unwrap();
    assert!(help.contains("[default: aes128-gcm]"), "{help}");
}

/// The bytes docs/MULTIPATH.md prints under the line `label (N bytes)`, as hex.
fn doc_block(label: &str) -> String {
    let doc = include_str!("../../../docs/MULTIPATH.md");
    let head = format!("\n{label} (");
    let at = doc
        .find(&head)
        .unwrap_or_else(|| panic!("MULTIPATH.md prints no `{label}`"));
    let (n, rest) = doc[at + head.len()..].split_once(" bytes)\n").unwrap();
    let hex: String = rest
        .lines()
        .take_while(|l| !l.is_empty() && l.chars().all(|c| c.is_ascii_hexdigit()))
        .collect();
    assert_eq!(hex.len(), 2 * n.parse::<usize>().unwrap(), "{label}");
    hex
}

/// MULTIPATH.md "Edge cases" 10: a key file holds the raw X25519 scalar as 64 hex digits
/// (either case, surrounding white space allowed); the public key is X25519(secret, 9), the
/// same for the clamped spelling (RFC 7748 §6.1's Alice). Anything else is refused.
#[test]
fn the_key_file_holds_a_raw_x25519_scalar() {
    let secret = doc_block("key file: secret");
    let clamped = doc_block("key file: the same secret, clamped");
    let public = doc_block("key file: public key");
    let spellings = [
        format!("{secret}\n"),
        format!("  {}\r\n\n", secret.to_uppercase()),
        clamped,
    ];
    for (i, text) in spellings.iter().enumerate() {
        let f = Temp::new(&format!("alice{i}.key"), text.as_bytes(), 0o600);
        let o = psp_mp(&["pubkey", "--key-file", f.path()]);
        assert!(o.status.success(), "{text:?}: {}", stderr(&o));
        assert_eq!(String::from_utf8(o.stdout).unwrap(), format!("{public}\n"));
    }
    for bad in [format!("0x{secret}\n"), format!("# alice\n{secret}\n")] {
        let f = Temp::new("bad.key", bad.as_bytes(), 0o600);
        let o = psp_mp(&["pubkey", "--key-file", f.path()]);
        assert!(!o.status.success(), "{bad:?} accepted");
        assert!(
            stderr(&o).contains("does not hold one hex key"),
            "{}",
            stderr(&o)
        );
    }
}

/// MULTIPATH.md "Edge cases" 11: psp-mp always announces the scrambler, so two psp-mp asked
/// for scramble run scrambled even when both allow plain (the fallback is for other peers).
#[test]
fn two_psp_mp_with_allow_plain_still_scramble() {
    let [t, u] = free_ports();
    let args = |role: &str| {
        [
            role.to_owned(),
            "--path".into(),
            format!("trusted,127.0.0.1:{t}"),
            "--path".into(),
            format!("untrusted,127.0.0.1:{u}"),
            "--cipher".into(),
            "scramble".into(),
            "--allow-plain".into(),
            "-v".into(),
        ]
    };
    let server = Command::new(env!("CARGO_BIN_EXE_psp-mp"))
        .args(args("listen"))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let client_args = args("connect");
    let client_args: Vec<&str> = client_args.iter().map(String::as_str).collect();
    let mut client = None;
    for _ in 0..100 {
        let o = Command::new(env!("CARGO_BIN_EXE_psp-mp"))
            .args(&client_args)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        if !stderr(&o).contains("Connection refused") {
            client = Some(o);
            break;
        }
        std::thread::sleep(core::time::Duration::from_millis(50));
    }
    let client = client.expect("the listener came up");
    let server = server.wait_with_output().unwrap();
    for (who, o) in [("client", &client), ("listener", &server)] {
        assert!(o.status.success(), "{who}: {}", stderr(o));
        assert!(
            stderr(o).contains("psp-mp: connected, cipher scramble,"),
            "{who}: {}",
            stderr(o)
        );
    }
}

/// Runs `listen` with `listen_args` and `connect` with `connect_args` on two free loopback
/// ports (both `-v`, stdin empty); returns (client, listener) outputs.
fn listen_and_connect(listen_args: &[&str], connect_args: &[&str]) -> (Output, Output) {
    let [t, u] = free_ports();
    let paths = [
        "--path".to_owned(),
        format!("trusted,127.0.0.1:{t}"),
        "--path".to_owned(),
        format!("untrusted,127.0.0.1:{u}"),
        "-v".to_owned(),
    ];
    let server = Command::new(env!("CARGO_BIN_EXE_psp-mp"))
        .arg("listen")
        .args(&paths)
        .args(listen_args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut client = None;
    for _ in 0..100 {
        let o = Command::new(env!("CARGO_BIN_EXE_psp-mp"))
            .arg("connect")
            .args(&paths)
            .args(connect_args)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        if !stderr(&o).contains("Connection refused") {
            client = Some(o);
            break;
        }
        std::thread::sleep(core::time::Duration::from_millis(50));
    }
    let client = client.expect("the listener came up");
    (client, server.wait_with_output().unwrap())
}

/// `--kem` on both subcommands: `require` on both sides gives a stream whose keys hold
/// ML-KEM-768 (the `-v` line says `kem on`), in both flows; `prefer` against `off` runs
/// without it (`kem off`); `require` against `off` (either side) ends both with one line
/// naming it (`kem_required` and the option to change); the default is off.
#[test]
fn kem_option_reaches_the_key_exchange_and_the_report() {
    for flow in [&[][..], &["--faithful-handshake"][..]] {
        let with = |kem: &'static str| [&["--kem", kem][..], flow].concat();
        let (client, server) = listen_and_connect(&["--kem", "require"], &with("require"));
        for (who, o) in [("client", &client), ("listener", &server)] {
            assert!(o.status.success(), "{who} {flow:?}: {}", stderr(o));
            assert!(
                stderr(o).contains(
                    "psp-mp: connected, cipher aes128-gcm, kem on (x25519 + ml-kem-768), \
                     smkex over both paths,"
                ),
                "{who} {flow:?}: {}",
                stderr(o)
            );
        }
        let (client, server) = listen_and_connect(&["--kem", "off"], &with("prefer"));
        for (who, o) in [("client", &client), ("listener", &server)] {
            assert!(o.status.success(), "{who} {flow:?}: {}", stderr(o));
            assert!(
                stderr(o).contains("kem off (x25519 only)"),
                "{who}: {}",
                stderr(o)
            );
        }
        for (listen_kem, connect_kem) in [("off", "require"), ("require", "off")] {
            let (client, server) = listen_and_connect(&["--kem", listen_kem], &with(connect_kem));
            for (who, o) in [("client", &client), ("listener", &server)] {
                assert!(!o.status.success(), "{who}: must fail");
                assert_eq!(
                    stderr(o),
                    "psp-mp: key exchange failed: kem_required (one side requires ML-KEM-768 \
                     and the other runs without it: give both sides --kem prefer or require, \
                     or neither --kem require)\n",
                    "{who} (listen {listen_kem}, connect {connect_kem}, {flow:?})"
                );
            }
        }
    }
    let help = String::from_utf8(psp_mp(&["listen", "--help"]).stdout).unwrap();
    assert!(help.contains("--kem <KEM>"), "{help}");
    assert!(help.contains("[default: off]"), "{help}");
}
