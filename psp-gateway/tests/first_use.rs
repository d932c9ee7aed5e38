//! What a first-time user meets, with real daemons in namespaces (root, in CI):
//!
//! * a freshly created raw uplink, IPv6 on as every distribution leaves it, sends nothing but
//!   EtherType 0x1982 (the daemon turns IPv6 off before the link comes up; a control interface
//!   without the daemon shows the kernel's own IPv6 frames);
//! * the README's `--user` recipe: key files the user does not own are named at start, a
//!   reload names the fix, and after the README's `chown` line reloads work;
//! * setup failures carry a hint: no capability, a TAP another daemon owns; a loopback uplink
//!   warns; logs written to a file have no colour codes;
//! * the default status socket of gateways in two named namespaces does not collide, and
//!   `status` finds each from inside its namespace; a socket it may not open gets the right hint;
//! * `status` answers a WireGuard user's questions: the public key, which path is up, the last
//!   handshake, and why a peer is not talking;
//! * with an identity, the TAP MTU is 1465, not 1412, and a full-size broadcast still crosses
//!   (as group copies under the session keys); `group_frames = "signed"` gives the thesis' 1412.

mod common;

use core::time::Duration;
use std::os::unix::fs::PermissionsExt as _;
use std::process::{Command, Stdio};
use std::thread::sleep;
use std::time::Instant;

use common::{BIN, PacketSocket, Testbed, TestbedOptions, output_within, repo_root};

/// ETH_P_ALL: every frame.
const ETH_P_ALL: u16 = 0x0003;

/// Polls `log()` until it contains `needle` (10 s), or panics with the log.
fn wait_for(log: impl Fn() -> String, needle: &str) {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(10) {
        if log().contains(needle) {
            return;
        }
        sleep(Duration::from_millis(50));
    }
    panic!("no {needle:?} in the log:\n{}", log());
}

/// The EtherType of a captured frame.
fn ethertype(frame: &[u8]) -> u16 {
    u16::from_be_bytes([frame[12], frame[13]])
}

/// Frames the far end of `lan_port` received from the host behind it within `window`.
fn sent_by(tb: &Testbed, lan_port: &str, window: Duration) -> Vec<Vec<u8>> {
    let sock = PacketSocket::open(&tb.ns("lan"), lan_port, ETH_P_ALL);
    sock.recv_for(window)
        .into_iter()
        .filter(|c| !c.outgoing)
        .map(|c| c.data)
        .collect()
}

#[test]
fn root_fresh_raw_uplink_sends_only_psp() {
    // IPv6 left on in the hosts' namespaces (the default everywhere); the testbed's own up0
    // has it off, so the uplink under test is a new one.
    let tb = Testbed::up(TestbedOptions {
        ipv6: true,
        ..TestbedOptions::default()
    });
    let fresh = |lan_end: &str, host_end: &str, mac: &str| {
        tb.sh(&format!(
            "ip -n $(tb_ns lan) link add {lan_end} type veth peer name {host_end} netns $(tb_ns vm1) \
             && ip -n $(tb_ns lan) link set {lan_end} master br0 up \
             && ip -n $(tb_ns vm1) link set {host_end} address {mac}"
        ));
        let v6 = tb.ns_ok(
            "vm1",
            &[
                "sysctl",
                "-n",
                &format!("net.ipv6.conf.{host_end}.disable_ipv6"),
            ],
        );
        assert_eq!(v6.trim(), "0", "{host_end} should start with IPv6 on");
    };

    // Control: without the daemon, a fresh interface's kernel speaks IPv6 in clear as soon as
    // the link is up (MLD reports, neighbour and router solicitations).
    fresh("ctl", "up8", "02:50:53:00:08:01");
    let capture = std::thread::scope(|s| {
        let cap = s.spawn(|| sent_by(&tb, "ctl", Duration::from_secs(3)));
        sleep(Duration::from_millis(200));
        tb.ns_ok("vm1", &["ip", "link", "set", "up8", "up"]);
        cap.join().expect("capture")
    });
    let clear: Vec<u16> = capture.iter().map(|f| ethertype(f)).collect();
    assert!(
        clear.contains(&0x86dd),
        "control: the kernel sent no IPv6 in 3 s ({clear:x?}); the check below would prove nothing"
    );
    tb.ns_ok("vm1", &["ip", "link", "del", "up8"]);

    // The gateway on a fresh uplink (down, IPv6 on): it turns IPv6 off, then brings the link
    // up, and says so. Everything up9 sends from before the start, for 10 s, with traffic
    // through the tunnel (ARP, ping; the TAP has IPv6 on, so its ND and MLD go sealed too).
    fresh("fresh", "up9", "02:50:53:00:09:01");
    let cfg = tb.config_path(1);
    let text = std::fs::read_to_string(&cfg).expect("read vm1.toml");
    std::fs::write(
        &cfg,
        text.replace("interface = \"up0\"", "interface = \"up9\""),
    )
    .expect("write");
    let (frames, ping, log) = std::thread::scope(|s| {
        let cap = s.spawn(|| sent_by(&tb, "fresh", Duration::from_secs(10)));
        sleep(Duration::from_millis(200));
        let vm1 = tb.start(1);
        let vm2 = tb.start(2);
        let ping = tb.ping(1, 2, 20);
        let frames = cap.join().expect("capture");
        drop(vm2);
        (frames, ping, strip(&vm1.log()))
    });
    assert!(
        log.contains("uplink up9: IPv6 was on; turned it off (net.ipv6.conf.up9.disable_ipv6=1)"),
        "{log}"
    );
    assert!(
        log.contains("uplink up9 was down; brought it up (with IPv6 off)"),
        "{log}"
    );
    let v6 = tb.ns_ok("vm1", &["sysctl", "-n", "net.ipv6.conf.up9.disable_ipv6"]);
    assert_eq!(v6.trim(), "1");
    assert!(ping.received > 0, "the tunnel carried nothing: {ping:?}");
    let types: std::collections::BTreeSet<u16> = frames.iter().map(|f| ethertype(f)).collect();
    assert!(!frames.is_empty(), "nothing captured");
    assert_eq!(
        types.into_iter().collect::<Vec<_>>(),
        [0x1982],
        "{} frames from a fresh uplink in 10 s",
        frames.len()
    );
    eprintln!(
        "fresh uplink: {} frames in 10 s, all EtherType 0x1982",
        frames.len()
    );
}

/// The log without colour codes (there should be none; [`root_setup_hints_and_plain_logs`]
/// checks that).
fn strip(s: &str) -> String {
    common::strip_ansi(s)
}

/// README, "Two real hosts": the line that gives the daemon's user its key files.
fn readme_chown_line() -> String {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).expect("README.md");
    let line = readme
        .lines()
        .find(|l| l.starts_with("chown psp-gateway: /etc/psp/"))
        .expect("README has a `chown psp-gateway: /etc/psp/...` line");
    line.split('#')
        .next()
        .and_then(|c| c.split("&&").next())
        .expect("a command")
        .trim()
        .to_owned()
}

#[test]
fn root_user_recipe_reloads() {
    // Sessions with an identity, as the README configures them: the identity file is a key
    // file too, read again on every reload.
    let tb = Testbed::up(TestbedOptions {
        suite: "aes128-gcm".into(),
        session: true,
        identity: true,
        ..TestbedOptions::default()
    });
    let dir = tb.dir().to_str().expect("utf-8").to_owned();
    // As /etc/psp: the directory and the config readable by all (the testbed makes it 0700),
    // the key files 0600.
    std::fs::set_permissions(tb.dir(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::fs::rename(tb.dir().join("vm1.id"), tb.dir().join("host.id")).expect("rename");
    let cfg = tb.config_path(1);
    let text = std::fs::read_to_string(&cfg).expect("read vm1.toml");
    std::fs::write(&cfg, text.replace("\"vm1.id\"", "\"host.id\"")).expect("write");

    // Root-owned keys and --user: named at start, and the reload says what to do.
    let vm1 = tb.start_with(1, &["--user", "nobody"], &[]);
    let _vm2 = tb.start(2);
    let log = strip(&vm1.log());
    assert!(
        log.contains("key files nobody does not own: ") && log.contains("Fix: chown nobody: "),
        "{log}"
    );
    vm1.reload();
    wait_for(|| vm1.log(), "reload failed");
    let log = strip(&vm1.log());
    assert!(
        log.contains("Permission denied")
            && log.contains("the daemon switched to uid 65534 (--user / daemon.user)")
            && log.contains("chown 65534 "),
        "{log}"
    );

    // The README's line, for this directory and user: every key file the daemon reads,
    // host.id included, is the user's; reloads work. The package tells the admin the same
    // (its example config's header, docs/PACKAGING.md).
    let line = readme_chown_line();
    for doc in ["psp-gateway/debian/gateway.toml", "docs/PACKAGING.md"] {
        let text = std::fs::read_to_string(repo_root().join(doc)).expect(doc);
        assert!(text.contains(&line), "{doc} lacks the README's `{line}`");
    }
    let chown = line
        .replace("psp-gateway:", "nobody:")
        .replace("/etc/psp/", &format!("{dir}/"));
    eprintln!("recipe: {chown}");
    let out = output_within(
        Command::new("sh").arg("-c").arg(&chown),
        Duration::from_secs(10),
        "chown",
    );
    assert!(
        out.status.success(),
        "{chown}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let before = vm1.log().matches("reloaded").count();
    vm1.reload();
    wait_for(
        || {
            let l = vm1.log();
            if l.matches("reloaded").count() > before {
                "RELOADED".to_owned()
            } else {
                l
            }
        },
        "RELOADED",
    );
    tb.ping_until_up(1, 2, Duration::from_secs(10));
}

/// A config in `dir` with a raw uplink on `uplink`, TAP `tap`, its status socket in `dir`, and
/// a group key there (owned by `owner`).
fn small_config(dir: &std::path::Path, uplink: &str, tap: &str, owner: u32) -> std::path::PathBuf {
    let key = dir.join("group.key");
    std::fs::write(&key, format!("{}\n", "42".repeat(16))).expect("key");
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    std::os::unix::fs::chown(&key, Some(owner), Some(owner)).expect("chown");
    let cfg = dir.join(format!("{tap}.toml"));
    std::fs::write(
        &cfg,
        format!(
            "[interface]\nname = \"{tap}\"\n[uplink]\nkind = \"raw\"\ninterface = \"{uplink}\"\n\
             [daemon]\nstatus_socket = \"{tap}.sock\"\nstate_directory = \"{tap}.state\"\n[defaults]\nsuite = \"aes128-gcm\"\n\
             [group]\nkey_file = \"group.key\"\n"
        ),
    )
    .expect("config");
    cfg
}

#[test]
fn root_setup_hints_and_plain_logs() {
    // Not root: the missing capability is named. Logs to a file carry no colour codes.
    let dir = std::env::temp_dir().join(format!("psp-first-use-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let cfg = small_config(&dir, "lo", "pspx0", 65534);
    let out = output_within(
        Command::new("setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                BIN,
                "run",
                "--config",
            ])
            .arg(&cfg)
            .stdin(Stdio::null()),
        Duration::from_secs(20),
        "psp-gateway run as nobody",
    );
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("scrambler kernels measured"),
        "no log line: {err}"
    );
    assert!(
        !err.contains('\x1b'),
        "colour codes in a log that is no terminal: {err:?}"
    );
    assert!(
        err.contains("psp-gateway: error: uplink lo: ")
            && err.contains("(a raw uplink needs CAP_NET_RAW: run as root"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).expect("cleanup");

    // A TAP another daemon owns, and a loopback uplink.
    let tb = Testbed::up(TestbedOptions::default());
    let _vm1 = tb.start(1);
    let cfg1 = tb.config_path(1);
    let second = tb.dir().join("second.toml");
    let text = std::fs::read_to_string(&cfg1).expect("read");
    std::fs::write(
        &second,
        text.replace("vm1.sock", "second.sock")
            .replace("vm1.state", "second.state"),
    )
    .expect("write");
    let out = tb.ns_exec(
        "vm1",
        &[BIN, "run", "--config", second.to_str().expect("utf-8")],
    );
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("psp-gateway: error: TAP psp0: ")
            && err.contains("(another psp-gateway, or another program, owns TAP psp0"),
        "{err}"
    );

    let lo = small_config(tb.dir(), "lo", "psplo", 0);
    let gw = tb
        .ns_cmd(
            "vm2",
            &[BIN, "run", "--config", lo.to_str().expect("utf-8")],
        )
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let sock = tb.dir().join("psplo.sock");
    let start = Instant::now();
    while !sock.exists() && start.elapsed() < Duration::from_secs(10) {
        sleep(Duration::from_millis(50));
    }
    let _ = Command::new("kill").arg(gw.id().to_string()).status();
    let out = gw.wait_with_output().expect("wait");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        err.contains("uplink lo is the loopback interface: sealed frames reach only this host"),
        "{err}"
    );
}

#[test]
fn root_status_socket_per_named_netns() {
    let tb = Testbed::up(TestbedOptions::default());
    let mut gws = Vec::new();
    for n in 1..=2 {
        let cfg = tb.config_path(n);
        let text = std::fs::read_to_string(&cfg).expect("read");
        let text: String = text
            .lines()
            .filter(|l| !l.starts_with("status_socket"))
            .map(|l| format!("{l}\n"))
            .collect();
        std::fs::write(&cfg, text).expect("write");
        gws.push(tb.spawn(n, &[], &[]));
    }
    for n in 1..=2u8 {
        let ns = tb.ns(&format!("vm{n}"));
        let expected = format!("/run/psp-gateway/psp0@{ns}.sock");
        let start = Instant::now();
        let doc = loop {
            let out = tb.ns_exec(&format!("vm{n}"), &[BIN, "status", "--json"]);
            if out.status.success() {
                break serde_json::from_slice::<serde_json::Value>(&out.stdout).expect("json");
            }
            assert!(
                start.elapsed() < Duration::from_secs(15),
                "vm{n}: `status` in its namespace found no daemon: {}; log:\n{}",
                String::from_utf8_lossy(&out.stderr),
                gws[usize::from(n) - 1].log()
            );
            sleep(Duration::from_millis(100));
        };
        assert_eq!(doc["mac"], format!("02:50:53:00:00:0{n}"), "vm{n}: {doc}");
        assert!(std::path::Path::new(&expected).exists(), "{expected}");
        // --config finds the same socket.
        let cfg = tb.config_path(n);
        let out = tb.ns_exec(
            &format!("vm{n}"),
            &[BIN, "status", "--config", cfg.to_str().expect("utf-8")],
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    for gw in gws {
        assert!(gw.stop().success());
    }
}

#[test]
fn root_status_permission_hint() {
    let dir = std::env::temp_dir().join(format!("psp-status-perm-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let path = dir.join("gw.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&path).expect("bind");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o660)).expect("chmod");
    let out = output_within(
        Command::new("setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                BIN,
                "status",
                "--socket",
            ])
            .arg(&path)
            .stdin(Stdio::null()),
        Duration::from_secs(10),
        "status as nobody",
    );
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("Permission denied")
            && err.contains("the daemon is running, but the socket (mode 0660) or its directory is not open to this user"),
        "{err}"
    );
    assert!(!err.contains("is the daemon running?"), "{err}");
    std::fs::remove_dir_all(&dir).expect("cleanup");
}

#[test]
fn root_status_answers_the_usual_questions() {
    let tb = Testbed::up(TestbedOptions {
        suite: "aes128-gcm".into(),
        session: true,
        paths: 2,
        smkex: "require".into(),
        identity: true,
        ..TestbedOptions::default()
    });
    let vm1 = tb.start(1);
    let _vm2 = tb.start(2);
    tb.ping_until_up(1, 2, Duration::from_secs(10));
    let pk = std::fs::read_to_string(tb.dir().join("vm1.pub")).expect("vm1.pub");
    let table = vm1.status_table();
    assert!(
        table.contains(&format!("public key {}", pk.trim())),
        "{table}"
    );
    assert!(
        table.contains("path 1 raw:up0 (link up), path 2 raw:up1 (link up)"),
        "{table}"
    );
    assert!(
        table.contains("LAST-HS") && table.contains("s ago"),
        "{table}"
    );
    assert!(!table.contains("hint vm2:"), "{table}");
    let doc = vm1.status_json();
    assert_eq!(doc["public_key"], pk.trim());
    // docs/GATEWAY.md, MTU: with an identity, a broadcast too large to go signed goes as group
    // copies (8 bytes more than unicast): 1465 instead of the sessions' 1473 (below), and not
    // the 1412 that signed full-size group frames would leave (`root_full_size_broadcasts_...`).
    assert_eq!(doc["mtu"], 1465, "{doc}");
    drop(vm1);
    drop(_vm2);

    // vm1 without an identity (TAP MTU 1473: the key id's 3 bytes only), and vm2 pins a wrong
    // identity for it (its own): the status says where to look.
    let cfg1 = tb.config_path(1);
    let text = std::fs::read_to_string(&cfg1).expect("read");
    std::fs::write(&cfg1, text.replace("identity_file = \"vm1.id\"\n", "")).expect("write");
    let cfg2 = tb.config_path(2);
    let pk2 = std::fs::read_to_string(tb.dir().join("vm2.pub")).expect("vm2.pub");
    let text = std::fs::read_to_string(&cfg2).expect("read");
    std::fs::write(&cfg2, text.replace(pk.trim(), pk2.trim())).expect("write");
    let vm1 = tb.start(1);
    let vm2 = tb.start(2);
    let doc = vm1.status_json();
    assert_eq!(doc["mtu"], 1473, "{doc}");
    assert!(doc["public_key"].is_null(), "{doc}");
    let _ = tb.ping(1, 2, 5);
    let start = Instant::now();
    let table = loop {
        let t = vm2.status_table();
        if t.contains("hint vm1:") || start.elapsed() > Duration::from_secs(20) {
            break t;
        }
        let _ = tb.ping(1, 2, 1);
    };
    let hint = table
        .lines()
        .find(|l| l.starts_with("hint vm1:"))
        .unwrap_or_else(|| panic!("no hint for vm1:\n{table}"));
    assert!(hint.contains("psp-gateway pubkey"), "{table}");
}

/// vm1 pings the subnet's broadcast address with `size` bytes of ICMP data (`ping -b`); returns
/// the replies from vm2 (vm1's own stack answers its looped-back broadcast too: not counted).
fn broadcast_ping_replies(tb: &Testbed, size: usize) -> usize {
    let out = tb.ns_exec(
        "vm1",
        &[
            "ping",
            "-n",
            "-b",
            "-c",
            "5",
            "-i",
            "0.2",
            "-W",
            "1",
            "-s",
            &size.to_string(),
            "10.77.0.255",
        ],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .filter(|l| l.contains(&format!("bytes from {}:", Testbed::ip(2))))
        .filter(|l| l.starts_with(&format!("{} bytes", size + 8)))
        .count()
}

#[test]
fn root_full_size_broadcasts_cross_with_an_identity() {
    let tb = Testbed::up(TestbedOptions {
        suite: "aes128-gcm".into(),
        session: true,
        smkex: "off".into(),
        identity: true,
        ..TestbedOptions::default()
    });
    tb.ns_ok(
        "vm2",
        &["sysctl", "-qw", "net.ipv4.icmp_echo_ignore_broadcasts=0"],
    );
    let vm1 = tb.start(1);
    let vm2 = tb.start(2);
    tb.ping_until_up(1, 2, Duration::from_secs(10));
    let doc = vm1.status_json();
    assert_eq!(doc["mtu"], 1465, "{doc}");
    // 1437 + 8 (ICMP) + 20 (IPv4) = 1465: a broadcast frame of the full MTU.
    assert_eq!(broadcast_ping_replies(&tb, 1437), 5, "{}", vm1.log());
    let copies = common::counter(&vm1.status_json(), "group.copies");
    assert!(copies >= 5, "group copies sent: {copies}");
    drop(vm1);
    drop(vm2);

    // The thesis' way: every group frame signed, so the MTU leaves room for a signed one.
    for n in [1, 2] {
        let cfg = tb.config_path(n);
        let text = std::fs::read_to_string(&cfg).expect("read");
        let text = text.replace("[session]\n", "[session]\ngroup_frames = \"signed\"\n");
        std::fs::write(&cfg, text).expect("write");
    }
    let vm1 = tb.start(1);
    let _vm2 = tb.start(2);
    tb.ping_until_up(1, 2, Duration::from_secs(10));
    let doc = vm1.status_json();
    assert_eq!(doc["mtu"], 1412, "{doc}");
    assert_eq!(broadcast_ping_replies(&tb, 1384), 5, "{}", vm1.log());
    assert_eq!(common::counter(&vm1.status_json(), "group.copies"), 0);
}
