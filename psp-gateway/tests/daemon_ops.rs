//! Daemon operations as an administrator meets them (root, real namespaces, real processes):
//! SIGHUP reload without dropping traffic to unchanged peers, `--user`, systemd notification,
//! graceful stop, JSON logs, a host with IPv6 disabled.

mod common;

use core::time::Duration;
use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::net::UnixDatagram;
use std::process::Stdio;

use common::{Testbed, TestbedOptions, Uplink, counter};

fn write_key(tb: &Testbed, name: &str) {
    let mut key = [0u8; 32];
    getrandom::fill(&mut key).expect("OS RNG");
    let path = tb.dir().join(name);
    std::fs::write(&path, hex::encode(key)).expect("write key");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
}

fn peer<'a>(status: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    status["peers"]
        .as_array()
        .and_then(|p| p.iter().find(|p| p["name"] == name))
        .unwrap_or_else(|| panic!("no peer {name} in {status}"))
}

fn wait_for_log(gw: &common::Gateway, needle: &str) {
    let start = std::time::Instant::now();
    while start.elapsed() < Duration::from_secs(10) {
        if gw.log().contains(needle) {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("no `{needle}` in the log:\n{}", gw.log());
}

#[test]
fn root_sighup_reload_changes_keys_without_dropping_unchanged_peers() {
    let tb = Testbed::up(TestbedOptions {
        hosts: 3,
        ..TestbedOptions::default()
    });
    let vm1 = tb.start(1);
    let _vm2 = tb.start(2);
    let vm3 = tb.start(3);
    tb.ping_until_up(1, 2, Duration::from_secs(5));
    tb.ping_until_up(1, 3, Duration::from_secs(5));

    // A steady ping vm1 -> vm2 runs across both reloads; it must not lose a reply.
    let steady = steady_ping(&tb, 40);
    std::thread::sleep(Duration::from_millis(300));
    let before = peer(&vm1.status_json(), "vm2")["tx_frames"]
        .as_u64()
        .unwrap_or(0);

    // New vm1-vm3 key on both ends; vm1-vm2 unchanged.
    write_key(&tb, "vm1-vm3.key");
    vm1.reload();
    vm3.reload();
    wait_for_log(&vm1, "reloaded");
    wait_for_log(&vm3, "reloaded");

    // A broken file is refused and the running configuration stays.
    let cfg = tb.config_path(1);
    let good = std::fs::read_to_string(&cfg).expect("read config");
    std::fs::write(&cfg, format!("{good}\nbogus = 1\n")).expect("break config");
    vm1.reload();
    wait_for_log(&vm1, "reload failed");
    std::fs::write(&cfg, good).expect("restore config");

    let out = steady.wait_with_output().expect("ping result");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("40 received"),
        "vm1 -> vm2 lost replies during the reloads:\n{text}"
    );
    // vm2's sealer and counters were kept: the counter kept growing, it did not restart.
    let after = peer(&vm1.status_json(), "vm2")["tx_frames"]
        .as_u64()
        .unwrap_or(0);
    assert!(after > before, "vm2 counters reset: {before} -> {after}");
    // vm1 <-> vm3 works under the new key.
    assert_eq!(
        tb.ping(1, 3, 5).received,
        5,
        "vm1 -> vm3 after the key change"
    );
    assert_eq!(
        vm1.status_json()["drops_total"],
        0,
        "{}",
        vm1.status_table()
    );
}

/// A reload that fails after some peers' new state was built changes nothing: vm1 has vm2
/// (plain, unchanged) and vm3 (normalized); the new file changes vm3's normalization (S_goal
/// and O_min: a new endpoint, which would take over vm3's sealer) and then adds a normalized
/// peer whose frame does not fit the uplink. The reload must be refused as a whole: vm3 keeps
/// pacing with its old endpoint and S_goal, vm2's traffic never stops, and the log says so.
#[test]
fn root_a_reload_that_fails_half_way_keeps_the_running_configuration() {
    let tb = Testbed::up(TestbedOptions {
        hosts: 3,
        ..TestbedOptions::default()
    });
    // Normalize the vm1 <-> vm3 pair only (vm3 is vm1's last peer, vm1 is vm3's first).
    let norm = "\n[peer.normalize]\nenabled = true\ns_goal_kbps = 1000\n";
    let cfg1 = tb.config_path(1);
    let base = std::fs::read_to_string(&cfg1).expect("read vm1.toml");
    let base = format!("{}{norm}", base.trim_end());
    std::fs::write(&cfg1, &base).expect("write vm1.toml");
    let cfg3 = tb.config_path(3);
    let text3 = std::fs::read_to_string(&cfg3).expect("read vm3.toml");
    let at = text3
        .find("\n[[peer]]\nname = \"vm2\"")
        .expect("vm3's peer vm2");
    std::fs::write(&cfg3, format!("{}{norm}{}", &text3[..at], &text3[at..])).expect("vm3.toml");

    let vm1 = tb.start(1);
    let _vm2 = tb.start(2);
    let vm3 = tb.start(3);
    tb.ping_until_up(1, 2, Duration::from_secs(5));
    tb.ping_until_up(1, 3, Duration::from_secs(5));
    let sent = |s: &serde_json::Value| counter(s, "peer:vm3.normalize.frames_sent");
    assert_eq!(
        counter(&vm1.status_json(), "peer:vm3.normalize.s_goal_kbps"),
        1000
    );

    // A steady ping vm1 -> vm2 runs across the reload; it must not lose a reply.
    let steady = steady_ping(&tb, 30);
    std::thread::sleep(Duration::from_millis(200));

    write_key(&tb, "ghost.key");
    let broken = base.replace(
        "s_goal_kbps = 1000\n",
        "s_goal_kbps = 2000\no_min_ms = 50\n\n\
         [[peer]]\nname = \"ghost\"\nmac = \"02:50:53:00:00:09\"\nkey_file = \"ghost.key\"\n\n\
         [peer.normalize]\nenabled = true\nframe_size = 2048\n",
    );
    assert_ne!(broken, base);
    std::fs::write(&cfg1, &broken).expect("write the failing vm1.toml");
    let before1 = vm1.status_json();
    let before3 = vm3.status_json();
    vm1.reload();
    wait_for_log(&vm1, "reload failed");
    let log = vm1.log();
    let line = log
        .lines()
        .find(|l| l.contains("reload failed"))
        .unwrap_or_default();
    assert!(
        line.contains("keeping the running configuration")
            && line.contains("peer[2].normalize.frame_size"),
        "{line}"
    );
    assert!(!log.contains("reloaded"), "{log}");

    // Nothing changed: the same peers, vm3's old S_goal, its endpoint still pacing.
    std::thread::sleep(Duration::from_millis(1000));
    let after1 = vm1.status_json();
    let names: Vec<_> = after1["peers"]
        .as_array()
        .map(|ps| ps.iter().map(|p| p["name"].clone()).collect())
        .unwrap_or_default();
    assert_eq!(names, ["vm2", "vm3"]);
    assert_eq!(counter(&after1, "peer:vm3.normalize.s_goal_kbps"), 1000);
    let paced = sent(&after1) - sent(&before1);
    // 1000 kbit/s of 1514-byte frames: about 80 a second.
    assert!(paced > 40, "vm3's endpoint sent {paced} frames in a second");
    assert_eq!(
        tb.ping(1, 3, 5).received,
        5,
        "vm1 -> vm3 after the failed reload"
    );
    let out = steady.wait_with_output().expect("ping result");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("30 received"),
        "vm1 -> vm2 lost replies:\n{text}"
    );
    // vm1's sealers went on: vm3 opened everything vm1 sent (no replay or too-old drops).
    let after3 = vm3.status_json();
    assert_eq!(
        counter(&after3, "peer:vm1.drops_total"),
        counter(&before3, "peer:vm1.drops_total"),
        "{}",
        vm3.status_table()
    );
    assert_eq!(counter(&after1, "drops_total"), 0, "{}", vm1.status_table());
    eprintln!(
        "failed reload: vm3 endpoint sent {paced} frames in the second after it, S_goal {} kbit/s",
        counter(&after1, "peer:vm3.normalize.s_goal_kbps")
    );

    // The same file without the bad peer applies: vm3 gets a new endpoint at 2000 kbit/s.
    let good = broken.replace("\nframe_size = 2048\n", "\n");
    std::fs::write(&cfg1, good).expect("write the good vm1.toml");
    vm1.reload();
    wait_for_log(&vm1, "reloaded");
    let s = vm1.status_json();
    assert_eq!(counter(&s, "peer:vm3.normalize.s_goal_kbps"), 2000);
}

#[test]
fn root_user_notify_json_logs_and_graceful_stop() {
    let tb = Testbed::up(TestbedOptions::default());
    let notify_path = tb.dir().join("notify.sock");
    let notify = UnixDatagram::bind(&notify_path).expect("bind notify socket");
    notify
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let path = notify_path.to_str().expect("utf-8");
    let vm1 = tb.start_with(
        1,
        &["--user", "nobody", "--log-format", "json"],
        &[("NOTIFY_SOCKET", path)],
    );
    let _vm2 = tb.start(2);
    let mut buf = [0u8; 256];
    let recv = |buf: &mut [u8]| -> String {
        let n = notify.recv(buf).expect("a notification");
        String::from_utf8_lossy(&buf[..n]).into_owned()
    };
    assert_eq!(recv(&mut buf), "READY=1");

    // Privileges are gone, and traffic still flows through the already-open descriptors.
    let proc_status =
        std::fs::read_to_string(format!("/proc/{}/status", vm1.pid())).expect("proc status");
    let uid = proc_status
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .unwrap_or_default();
    assert_eq!(
        uid.split_whitespace().skip(1).collect::<Vec<_>>(),
        ["65534"; 4],
        "{uid}"
    );
    tb.ping_until_up(1, 2, Duration::from_secs(5));
    assert!(tb.iperf3(1, 2, 1, false) > 1.0);

    // JSON logs: every line is an object; the ready line names the user.
    let log = vm1.log();
    let ready = log
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("a JSON log line"))
        .find(|v| v["fields"]["message"] == "ready")
        .unwrap_or_else(|| panic!("no ready line in {log}"));
    assert_eq!(ready["fields"]["user"], "nobody");

    vm1.reload();
    assert_eq!(recv(&mut buf), "RELOADING=1");
    assert_eq!(recv(&mut buf), "READY=1");

    let socket = tb.socket_path(1);
    let status = vm1.stop();
    assert!(status.success(), "exit status {status}");
    assert_eq!(recv(&mut buf), "STOPPING=1");
    // The TAP is gone, the status socket removed, the final counters logged.
    let link = tb.ns_exec("vm1", &["ip", "link", "show", "psp0"]);
    assert!(!link.status.success(), "psp0 still exists after SIGTERM");
    // As `nobody` the daemon cannot unlink a socket in root's directory; what matters is that
    // nothing answers there any more (the next start replaces a stale socket).
    assert!(
        std::os::unix::net::UnixStream::connect(&socket).is_err(),
        "status socket still answers"
    );
    let log = std::fs::read_to_string(tb.log_path(1)).expect("log");
    assert!(
        log.lines()
            .any(|l| l.contains("\"stopped\"") && l.contains("tx_frames")),
        "no final counters in the log:\n{log}"
    );
}

/// With `--user`, the daemon hands its state directory to that user at start, as root. A
/// symbolic link or a hard link that user planted there, naming a root-owned file, is refused
/// by name (the daemon does not start) and the file keeps its owner; without it the daemon
/// starts.
#[test]
fn root_user_refuses_links_planted_in_the_state_directory() {
    use std::os::unix::fs::MetadataExt as _;
    let tb = Testbed::up(TestbedOptions::default());
    let state = tb.dir().join("vm1.state");
    std::fs::create_dir_all(&state).expect("state directory");
    let target = tb.dir().join("root-only");
    std::fs::write(&target, "secret\n").expect("write the target");
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let planted = state.join("seq-00000000000000000000000000000000");
    type Plant = fn(&std::path::Path, &std::path::Path) -> std::io::Result<()>;
    let plants: [(&str, Plant); 2] = [
        ("is a symbolic link", |t, l| {
            std::os::unix::fs::symlink(t, l)
        }),
        ("has 2 hard links", |t, l| std::fs::hard_link(t, l)),
    ];
    for (why, plant) in plants {
        plant(&target, &planted).expect("plant the link");
        let mut vm1 = tb.spawn(1, &["--user", "nobody"], &[]);
        let status = vm1.wait_exit(Duration::from_secs(15));
        let log = vm1.log();
        let meta = std::fs::metadata(&target).expect("the target");
        assert_eq!(
            (meta.uid(), meta.gid()),
            (0, 0),
            "the target changed owner; log:\n{log}"
        );
        assert_eq!(status.and_then(|s| s.code()), Some(1), "log:\n{log}");
        assert!(
            log.contains(&format!("{} {why}", planted.display())),
            "no `{why}` in the log:\n{log}"
        );
        std::fs::remove_file(&planted).expect("remove the link");
    }
    let vm1 = tb.start_with(1, &["--user", "nobody"], &[]);
    let owner = std::fs::metadata(&state).expect("state directory").uid();
    assert_eq!(owner, 65534, "the state directory is nobody's");
    let socket = std::fs::symlink_metadata(tb.socket_path(1)).expect("status socket");
    assert_eq!((socket.uid(), socket.mode() & 0o777), (65534, 0o660));
    assert!(vm1.stop().success());
}

/// With `[session]` but no `identity = "tofu"` peer, a `known_peers` the daemon cannot use (here
/// writable by others) does not stop the start, but is named in a warning that says what a
/// reload adding such a peer would meet.
#[test]
fn root_an_unusable_known_peers_is_named_when_no_peer_needs_it() {
    let tb = Testbed::up(TestbedOptions {
        session: true,
        ..TestbedOptions::default()
    });
    let state = tb.dir().join("vm1.state");
    std::fs::create_dir_all(&state).expect("state directory");
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    let known = state.join("known_peers");
    std::fs::write(&known, "# nobody pinned\n").expect("write known_peers");
    std::fs::set_permissions(&known, std::fs::Permissions::from_mode(0o666)).expect("chmod");
    let vm1 = tb.start(1);
    wait_for_log(&vm1, "known_peers: ");
    let log = vm1.log();
    let line = log
        .lines()
        .find(|l| l.contains("known_peers: "))
        .unwrap_or_default();
    for want in [
        "WARN",
        known.to_str().expect("UTF-8"),
        "lets group or others write it",
        "identity = \"tofu\"",
    ] {
        assert!(line.contains(want), "no `{want}` in {line}");
    }
}

/// Something other than a socket at the status socket's path is left alone: the daemon does
/// not start, and says so (a stale socket from a crashed run is replaced, as before).
#[test]
fn root_a_file_at_the_status_socket_path_is_not_removed() {
    let tb = Testbed::up(TestbedOptions::default());
    let config = tb.config_path(1);
    let text = std::fs::read_to_string(&config).expect("vm1.toml");
    let old = format!("{}", tb.socket_path(1).display());
    let other = tb.dir().join("not-a-socket");
    std::fs::write(&other, "keep me\n").expect("write the file");
    std::fs::write(&config, text.replace(&old, other.to_str().expect("UTF-8"))).expect("config");
    let mut vm1 = tb.spawn(1, &[], &[]);
    let status = vm1.wait_exit(Duration::from_secs(15));
    let log = vm1.log();
    assert_eq!(
        std::fs::read_to_string(&other).ok().as_deref(),
        Some("keep me\n"),
        "log:\n{log}"
    );
    assert_eq!(status.and_then(|s| s.code()), Some(1), "log:\n{log}");
    assert!(
        log.contains("something other than a socket is there"),
        "log:\n{log}"
    );
}

#[test]
fn root_starts_and_carries_traffic_with_ipv6_disabled() {
    // The testbed disables IPv6 in every namespace; check that, then run a UDP uplink bound
    // to 0.0.0.0 (the case where a daemon might try an IPv6 socket).
    let tb = Testbed::up(TestbedOptions {
        uplink: Uplink::Udp,
        ..TestbedOptions::default()
    });
    let v6 = tb.ns_ok("vm1", &["sysctl", "-n", "net.ipv6.conf.all.disable_ipv6"]);
    assert_eq!(v6.trim(), "1");
    let _vm1 = tb.start(1);
    let _vm2 = tb.start(2);
    tb.ping_until_up(1, 2, Duration::from_secs(5));
    assert_eq!(tb.ping(2, 1, 5).received, 5);
}

/// A config that names `scramble-hmac-sha1` (the explicit permission it needs, like
/// `none`) runs, and the start-up log and `status` say that it keeps nothing confidential.
#[test]
fn root_an_integrity_only_suite_says_no_confidentiality() {
    let tb = Testbed::up(TestbedOptions {
        suite: "scramble-hmac-sha1".into(),
        ..TestbedOptions::default()
    });
    let vm1 = tb.start(1);
    let _vm2 = tb.start(2);
    tb.ping_until_up(1, 2, Duration::from_secs(5));
    wait_for_log(&vm1, "no confidentiality (integrity only");
    let s = vm1.status_json();
    assert_eq!(peer(&s, "vm2")["confidentiality"], false, "{s}");
    assert_eq!(s["group"]["confidentiality"], false, "{s}");
    let table = vm1.status_table();
    assert!(
        table.contains("vm2: suite scramble-hmac-sha1: no confidentiality"),
        "{table}"
    );
}

/// Starts `count` pings from vm1 to vm2 at 50 ms intervals, output captured: a steady flow that
/// must not lose a reply across what the test does meanwhile.
fn steady_ping(tb: &Testbed, count: u32) -> std::process::Child {
    tb.ns_cmd(
        "vm1",
        &[
            "ping",
            "-n",
            "-q",
            "-c",
            &count.to_string(),
            "-i",
            "0.05",
            &Testbed::ip(2),
        ],
    )
    .stdout(Stdio::piped())
    .spawn()
    .expect("spawn ping")
}

/// With two uplinks, the `ready` line and the `status` header name both (path 1 first), not
/// only the first.
#[test]
fn root_two_uplinks_are_named_in_the_ready_line_and_the_status_header() {
    let tb = Testbed::up(TestbedOptions {
        session: true,
        paths: 2,
        ..TestbedOptions::default()
    });
    let vm1 = tb.start_with(1, &["--log-format", "json"], &[]);
    let log = vm1.log();
    let ready = log
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["fields"]["message"] == "ready")
        .unwrap_or_else(|| panic!("no ready line in {log}"));
    assert_eq!(ready["fields"]["uplinks"], "raw:up0,raw:up1", "{ready}");
    let status = vm1.status_json();
    assert_eq!(
        status["uplinks"],
        serde_json::json!(["raw:up0", "raw:up1"]),
        "{status}"
    );
    let table = vm1.status_table();
    let header = table.lines().next().unwrap_or_default();
    assert!(header.contains("  uplinks raw:up0, raw:up1  "), "{table}");
}
