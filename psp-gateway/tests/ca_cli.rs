//! The network CA's command line (`ca init`, `ca sign`, `ca revoke`, `cert print`,
//! `cert verify`) as a user runs it: the real binary and real files. No root needed.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_psp-gateway"))
        .args(args)
        .output()
        .expect("run psp-gateway")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Succeeded; returns stdout.
fn ok(o: &Output) -> String {
    assert!(o.status.success(), "stderr: {}", stderr(o));
    stdout(o)
}

/// One line on stderr with exit `code`, no panic; returns the line.
fn one_line_error(o: &Output, code: i32) -> String {
    let e = stderr(o);
    assert_eq!(o.status.code(), Some(code), "stderr: {e}");
    assert_eq!(e.lines().count(), 1, "expected one line, got: {e:?}");
    assert!(e.starts_with("psp-gateway: error: "), "{e}");
    assert!(
        !e.contains("panicked") && !e.contains("internal error"),
        "{e}"
    );
    e
}

/// The value of the `key: value` line `key` in `text`.
fn field<'a>(text: &'a str, key: &str) -> &'a str {
    text.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(": "))
        .unwrap_or_else(|| panic!("no {key} in {text}"))
}

/// A fresh temporary directory, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        use core::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "psp-ca-cli-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        Self(dir)
    }

    /// `name` inside, as a string.
    fn path(&self, name: &str) -> String {
        self.0.join(name).to_str().expect("utf-8 path").to_owned()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn mode(path: &str) -> u32 {
    std::fs::metadata(path).expect("stat").permissions().mode() & 0o777
}

/// `ca init --dir DIR`; returns DIR.
fn init(t: &TempDir, name: &str) -> String {
    let dir = t.path(name);
    let out = ok(&run(&["ca", "init", "--dir", &dir, "--name", name]));
    assert_eq!(field(&out, "certificate"), format!("{dir}/ca.crt"));
    dir
}

/// A fresh host identity's public key (`keygen --identity`).
fn identity(t: &TempDir, name: &str) -> String {
    let out = ok(&run(&["keygen", "--identity", &t.path(name)]));
    out.trim().to_owned()
}

/// `ca sign` with one MAC and two addresses; returns stdout.
fn sign(dir: &str, name: &str, id: &str, out: &str, extra: &[&str]) -> String {
    let mut args = vec![
        "ca",
        "sign",
        "--dir",
        dir,
        "--name",
        name,
        "--identity",
        id,
        "--mac",
        "02:00:00:00:00:01",
        "--addr",
        "10.0.0.1/24",
        "--addr",
        "fd00::1/64",
        "--out",
        out,
    ];
    args.extend_from_slice(extra);
    ok(&run(&args))
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs()
}

#[test]
fn init_sign_print_verify() {
    let t = TempDir::new("flow");
    let dir = init(&t, "net-ca");
    let id = identity(&t, "h1.id");
    let crt = t.path("h1.crt");
    let signed = sign(&dir, "h1", &id, &crt, &["--priority", "10", "--days", "30"]);
    assert_eq!(field(&signed, "serial"), "1");
    assert_eq!(field(&signed, "file"), crt);
    assert_eq!(
        std::fs::read_to_string(format!("{dir}/next-serial")).unwrap(),
        "2\n"
    );
    let text = std::fs::read_to_string(&crt).unwrap();
    assert!(
        text.ends_with('\n') && text.lines().count() == 1,
        "{text:?}"
    );
    assert!(text.trim().bytes().all(|b| b.is_ascii_hexdigit()));
    assert_eq!(mode(&crt), 0o644);

    let printed = ok(&run(&["cert", "print", &crt]));
    assert_eq!(field(&printed, "kind"), "host");
    assert_eq!(field(&printed, "serial"), "1");
    assert_eq!(field(&printed, "name"), "h1");
    assert_eq!(field(&printed, "public_key"), id);
    assert_eq!(field(&printed, "macs"), "02:00:00:00:00:01");
    assert_eq!(field(&printed, "addrs"), "10.0.0.1/24 fd00::1/64");
    assert_eq!(field(&printed, "priority"), "10");
    assert_eq!(field(&printed, "fingerprint").len(), 16);
    // Valid from 1 hour back-dated for 30 days, as seconds and as UTC.
    let before: Vec<&str> = field(&printed, "not_before").split(' ').collect();
    let after: Vec<&str> = field(&printed, "not_after").split(' ').collect();
    let (nb, na): (u64, u64) = (before[0].parse().unwrap(), after[0].parse().unwrap());
    assert_eq!(na - nb, 30 * 86_400 + 3600);
    assert!(nb.abs_diff(now() - 3600) < 60, "{nb}");
    assert!(
        before[1].ends_with('Z') && before[1].len() == 20,
        "{before:?}"
    );

    let ca = ok(&run(&["cert", "print", &format!("{dir}/ca.crt")]));
    assert_eq!(field(&ca, "kind"), "ca");
    assert_eq!(field(&ca, "serial"), "0");
    assert_eq!(field(&ca, "name"), "net-ca");
    assert_eq!(field(&ca, "macs"), "none");

    let verified = ok(&run(&[
        "cert",
        "verify",
        "--ca",
        &format!("{dir}/ca.crt"),
        &crt,
    ]));
    assert_eq!(
        verified.trim(),
        format!("ok: h1 serial 1 valid until {}", after[1])
    );
    // A second certificate takes the next serial.
    let id2 = identity(&t, "h2.id");
    let second = sign(&dir, "h2", &id2, &t.path("h2.crt"), &[]);
    assert_eq!(field(&second, "serial"), "2");
}

#[test]
fn another_ca_does_not_verify() {
    let t = TempDir::new("other");
    let dir = init(&t, "ca-a");
    let other = init(&t, "ca-b");
    let id = identity(&t, "h.id");
    let crt = t.path("h.crt");
    sign(&dir, "h", &id, &crt, &[]);
    let e = one_line_error(
        &run(&["cert", "verify", "--ca", &format!("{other}/ca.crt"), &crt]),
        1,
    );
    assert!(e.contains("the CA's signature does not verify"), "{e}");
    // A host certificate is no CA.
    let e = one_line_error(&run(&["cert", "verify", "--ca", &crt, &crt]), 1);
    assert!(e.contains("not a CA's"), "{e}");
}

#[test]
fn expiry_and_skew() {
    let t = TempDir::new("expiry");
    let dir = init(&t, "ca");
    let id = identity(&t, "h.id");
    let crt = t.path("h.crt");
    sign(&dir, "h", &id, &crt, &["--days", "1"]);
    let printed = ok(&run(&["cert", "print", &crt]));
    let not_after: u64 = field(&printed, "not_after")
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let ca = format!("{dir}/ca.crt");
    let verify = |at: u64, skew: &str| {
        run(&[
            "cert",
            "verify",
            "--ca",
            &ca,
            &crt,
            "--at",
            &at.to_string(),
            "--skew",
            skew,
        ])
    };
    // Far in the future: expired, and the line says when.
    let e = one_line_error(&verify(not_after + 400 * 86_400, "3600"), 1);
    assert!(e.contains("expired at "), "{e}");
    // Just past the end: within the default skew it passes; beyond it, not.
    ok(&verify(not_after + 1800, "3600"));
    let e = one_line_error(&verify(not_after + 1800, "0"), 1);
    assert!(e.contains("expired at "), "{e}");
    // Before the start (1 hour back-dated): not yet valid, unless within the skew.
    let nb = not_after - 86_400 - 3600;
    let e = one_line_error(&verify(nb - 100, "0"), 1);
    assert!(e.contains("not valid before"), "{e}");
    ok(&verify(nb - 100, "3600"));
}

#[test]
fn revoke_then_verify_with_the_list() {
    let t = TempDir::new("revoke");
    let dir = init(&t, "ca");
    let ca = format!("{dir}/ca.crt");
    let h1 = t.path("h1.crt");
    let h2 = t.path("h2.crt");
    sign(&dir, "h1", &identity(&t, "h1.id"), &h1, &[]);
    sign(&dir, "h2", &identity(&t, "h2.id"), &h2, &[]);

    let out = t.path("out.crl");
    let first = ok(&run(&[
        "ca", "revoke", "--dir", &dir, "--cert", &h1, "--out", &out,
    ]));
    assert_eq!(field(&first, "number"), "1");
    assert_eq!(field(&first, "serials"), "1");
    let crl = format!("{dir}/crl");
    assert_eq!(
        std::fs::read_to_string(&crl).unwrap(),
        std::fs::read_to_string(&out).unwrap()
    );
    let e = one_line_error(
        &run(&["cert", "verify", "--ca", &ca, &h1, "--crl", &crl]),
        1,
    );
    assert!(e.contains("revoked by list 1"), "{e}");
    // h2 is not on it.
    ok(&run(&["cert", "verify", "--ca", &ca, &h2, "--crl", &crl]));

    // A second revocation: the next number, both serials.
    let second = ok(&run(&["ca", "revoke", "--dir", &dir, "--serial", "2"]));
    assert_eq!(field(&second, "number"), "2");
    assert_eq!(field(&second, "serials"), "1 2");
    assert_eq!(
        std::fs::read_to_string(format!("{dir}/revoked")).unwrap(),
        "1\n2\n"
    );
    let e = one_line_error(
        &run(&["cert", "verify", "--ca", &ca, &h2, "--crl", &crl]),
        1,
    );
    assert!(e.contains("revoked by list 2"), "{e}");
    let printed = ok(&run(&["cert", "print", &crl]));
    assert_eq!(field(&printed, "kind"), "revocation-list");
    assert_eq!(field(&printed, "number"), "2");
    assert_eq!(field(&printed, "serials"), "1 2");
    // Revoking an already revoked serial still issues a new list.
    let third = ok(&run(&["ca", "revoke", "--dir", &dir, "--serial", "1"]));
    assert_eq!(field(&third, "number"), "3");

    // A list from another CA is refused, and so are serials never issued.
    let other = init(&t, "ca-b");
    let e = one_line_error(&run(&["ca", "revoke", "--dir", &other, "--serial", "0"]), 2);
    assert!(e.contains("the CA's own"), "{e}");
    let id = identity(&t, "b.id");
    sign(&other, "b", &id, &t.path("b.crt"), &[]);
    ok(&run(&["ca", "revoke", "--dir", &other, "--serial", "1"]));
    let e = one_line_error(
        &run(&[
            "cert",
            "verify",
            "--ca",
            &ca,
            &h2,
            "--crl",
            &format!("{other}/crl"),
        ]),
        1,
    );
    assert!(e.contains("the CA's signature does not verify"), "{e}");
    one_line_error(&run(&["ca", "revoke", "--dir", &dir, "--serial", "99"]), 2);
    one_line_error(&run(&["ca", "revoke", "--dir", &dir]), 2);
    // Another CA's certificate cannot be revoked here.
    let e = one_line_error(
        &run(&["ca", "revoke", "--dir", &dir, "--cert", &t.path("b.crt")]),
        1,
    );
    assert!(e.contains("not issued by this CA"), "{e}");
}

#[test]
fn too_many_revocations_are_refused() {
    let t = TempDir::new("many");
    let dir = init(&t, "ca");
    // Pretend 200 certificates were issued, 128 of them revoked already.
    std::fs::write(format!("{dir}/next-serial"), "200\n").unwrap();
    let lines: String = (1..=128).map(|s| format!("{s}\n")).collect();
    std::fs::write(format!("{dir}/revoked"), lines).unwrap();
    ok(&run(&["ca", "revoke", "--dir", &dir, "--serial", "5"]));
    let e = one_line_error(&run(&["ca", "revoke", "--dir", &dir, "--serial", "150"]), 1);
    assert!(e.contains("at most 128"), "{e}");
}

#[test]
fn init_refuses_an_existing_ca_and_keeps_the_key_private() {
    let t = TempDir::new("init");
    let dir = init(&t, "ca");
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&format!("{dir}/ca.key")), 0o600);
    let key = std::fs::read_to_string(format!("{dir}/ca.key")).unwrap();
    assert_eq!(key.len(), 65, "{key:?}");
    assert!(key.ends_with('\n'));
    assert_eq!(
        std::fs::read_to_string(format!("{dir}/next-serial")).unwrap(),
        "1\n"
    );
    assert_eq!(
        std::fs::read_to_string(format!("{dir}/revoked")).unwrap(),
        ""
    );
    let e = one_line_error(&run(&["ca", "init", "--dir", &dir]), 1);
    assert!(e.contains("already holds a CA"), "{e}");
    assert_eq!(
        std::fs::read_to_string(format!("{dir}/ca.key")).unwrap(),
        key,
        "the key is untouched"
    );
    // sign refuses to overwrite without --force, and keeps the serial.
    let id = identity(&t, "h.id");
    let crt = t.path("h.crt");
    sign(&dir, "h", &id, &crt, &[]);
    let again = run(&[
        "ca",
        "sign",
        "--dir",
        &dir,
        "--name",
        "h",
        "--identity",
        &id,
        "--mac",
        "02:00:00:00:00:01",
        "--out",
        &crt,
    ]);
    let e = one_line_error(&again, 1);
    assert!(e.contains("--force"), "{e}");
    assert_eq!(
        std::fs::read_to_string(format!("{dir}/next-serial")).unwrap(),
        "2\n"
    );
    let forced = sign(&dir, "h", &id, &crt, &["--force"]);
    assert_eq!(field(&forced, "serial"), "2");
}

/// An Ed25519 public key encoding that is not a curve point.
fn not_a_point() -> String {
    (2u8..)
        .map(|y| {
            let mut k = [0u8; 32];
            k[0] = y;
            k
        })
        .find(|k| psp_core::handshake::identity::x25519_of(k).is_none())
        .map(hex::encode)
        .expect("some y is not on the curve")
}

#[test]
fn bad_identity_mac_addr_and_name_are_refused() {
    let t = TempDir::new("bad");
    let dir = init(&t, "ca");
    let id = identity(&t, "h.id");
    let out = t.path("h.crt");
    let sign_with = |id: &str, mac: &str, addr: &str, name: &str| {
        run(&[
            "ca",
            "sign",
            "--dir",
            &dir,
            "--name",
            name,
            "--identity",
            id,
            "--mac",
            mac,
            "--addr",
            addr,
            "--out",
            &out,
        ])
    };
    let mac = "02:00:00:00:00:01";
    let addr = "10.0.0.1/24";
    let mut odd = hex::decode(&id).unwrap();
    odd[31] |= 0x80;
    for bad_id in [
        "abcd".to_owned(),
        "zz".repeat(32),
        not_a_point(),
        hex::encode(odd),
    ] {
        let e = one_line_error(&sign_with(&bad_id, mac, addr, "h"), 2);
        assert!(e.contains("--identity"), "{e}");
    }
    for bad_mac in [
        "02:00:00:00:00",
        "01:00:5e:00:00:01",
        "00:00:00:00:00:00",
        "x",
    ] {
        let e = one_line_error(&sign_with(&id, bad_mac, addr, "h"), 2);
        assert!(e.contains("--mac"), "{e}");
    }
    for bad_addr in ["10.0.0.1", "10.0.0.1/33", "fd00::1/129", "host/24"] {
        let e = one_line_error(&sign_with(&id, mac, bad_addr, "h"), 2);
        assert!(e.contains("--addr"), "{e}");
    }
    for bad_name in ["a b", "", &"n".repeat(65)] {
        let e = one_line_error(&sign_with(&id, mac, addr, bad_name), 2);
        assert!(e.contains("--name"), "{e}");
    }
    // Nothing was written and no serial spent.
    assert!(!Path::new(&out).exists());
    assert_eq!(
        std::fs::read_to_string(format!("{dir}/next-serial")).unwrap(),
        "1\n"
    );
    // Bad priority and days are clap's (exit 2).
    one_line_error(
        &run(&[
            "ca",
            "sign",
            "--dir",
            &dir,
            "--name",
            "h",
            "--identity",
            &id,
            "--mac",
            mac,
            "--priority",
            "256",
            "--out",
            &out,
        ]),
        2,
    );
    one_line_error(
        &run(&["ca", "init", "--dir", &t.path("x"), "--days", "0"]),
        2,
    );
    // A directory with no CA.
    let e = one_line_error(
        &run(&[
            "ca",
            "sign",
            "--dir",
            &t.path("nothing"),
            "--name",
            "h",
            "--identity",
            &id,
            "--mac",
            mac,
            "--out",
            &out,
        ]),
        1,
    );
    assert!(e.contains("ca.key"), "{e}");
}

#[test]
fn bad_files_are_one_line() {
    let t = TempDir::new("files");
    let write = |name: &str, text: &str| {
        let p = t.path(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    for (name, text, says) in [
        ("empty", "", "no hex digits"),
        ("nothex", "xyz\n", "bad hex"),
        ("odd", "abc\n", "bad hex"),
        ("short", "0102\n", "certificate: wrong length"),
        ("version", "0902\n", "unknown format version 9"),
        ("kind", "0109\n", "kind byte 9"),
        ("list", "0103\n", "revocation list: wrong length"),
        ("one", "01\n", "too short"),
    ] {
        let p = write(name, text);
        let e = one_line_error(&run(&["cert", "print", &p]), 1);
        assert!(e.contains(says), "{name}: {e}");
    }
    let binary = t.path("binary");
    std::fs::write(&binary, [0xff, 0xfe, 0x00]).unwrap();
    one_line_error(&run(&["cert", "print", &binary]), 1);
    one_line_error(&run(&["cert", "print", &t.path("missing")]), 1);
    one_line_error(&run(&["cert", "print", &t.0.to_string_lossy()]), 1);
    let big = write("big", &"00".repeat(20_000));
    one_line_error(&run(&["cert", "print", &big]), 1);
    // Every truncation of a real certificate is a one-line error, never a panic.
    let dir = init(&t, "ca");
    let crt = t.path("h.crt");
    sign(&dir, "h", &identity(&t, "h.id"), &crt, &[]);
    let hex_text = std::fs::read_to_string(&crt).unwrap();
    let hex_text = hex_text.trim();
    for n in (2..hex_text.len()).step_by(14) {
        let p = write("cut", &hex_text[..n]);
        one_line_error(&run(&["cert", "print", &p]), 1);
    }
    // A key file is named as one, and its bytes are not shown.
    let e = one_line_error(&run(&["cert", "print", &format!("{dir}/ca.key")]), 1);
    assert!(e.contains("a key"), "{e}");
    // A list where a certificate is wanted, and the other way round.
    ok(&run(&["ca", "revoke", "--dir", &dir, "--serial", "1"]));
    let crl = format!("{dir}/crl");
    let e = one_line_error(&run(&["cert", "verify", "--ca", &crl, &crt]), 1);
    assert!(e.contains("not a certificate"), "{e}");
    let e = one_line_error(
        &run(&[
            "cert",
            "verify",
            "--ca",
            &format!("{dir}/ca.crt"),
            &crt,
            "--crl",
            &crt,
        ]),
        1,
    );
    assert!(e.contains("not a revocation list"), "{e}");
}

#[test]
fn print_json() {
    let t = TempDir::new("json");
    let dir = init(&t, "ca");
    let id = identity(&t, "h.id");
    let crt = t.path("h.crt");
    sign(&dir, "h", &id, &crt, &["--priority", "255"]);
    let text = ok(&run(&["cert", "print", "--json", &crt]));
    assert_eq!(text.lines().count(), 1, "{text}");
    let v: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(v["kind"], "host");
    assert_eq!(v["serial"], 1);
    assert_eq!(v["name"], "h");
    assert_eq!(v["public_key"], id.as_str());
    assert_eq!(v["macs"], serde_json::json!(["02:00:00:00:00:01"]));
    assert_eq!(v["addrs"], serde_json::json!(["10.0.0.1/24", "fd00::1/64"]));
    assert_eq!(v["priority"], 255);
    assert!(v["not_before"].as_u64().unwrap() < v["not_after"].as_u64().unwrap());
    assert!(v["not_after_utc"].as_str().unwrap().ends_with('Z'));
    assert_eq!(v["fingerprint"].as_str().unwrap().len(), 16);
    // The text form says what 255 means.
    let plain = ok(&run(&["cert", "print", &crt]));
    assert_eq!(field(&plain, "priority"), "255 (never the key server)");

    ok(&run(&["ca", "revoke", "--dir", &dir, "--serial", "1"]));
    let list = ok(&run(&["cert", "print", "--json", &format!("{dir}/crl")]));
    let v: serde_json::Value = serde_json::from_str(&list).expect("JSON");
    assert_eq!(v["kind"], "revocation-list");
    assert_eq!(v["number"], 1);
    assert_eq!(v["serials"], serde_json::json!([1]));
    assert!(v["issued"].as_u64().unwrap().abs_diff(now()) < 60);
}
