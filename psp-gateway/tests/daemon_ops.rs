//! Daemon operations as an administrator meets them (root, real namespaces, real processes):
//! SIGHUP reload without dropping traffic to unchanged peers, `--user`, systemd notification,
//! graceful stop, JSON logs, a host with IPv6 disabled.

mod common;

use core::time::Duration;
use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::net::UnixDatagram;
use std::process::Stdio;

use common::{Testbed, TestbedOptions, Uplink};

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
fn sighup_reload_changes_keys_without_dropping_unchanged_peers() {
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
    let steady = tb
        .ns_cmd(
            "vm1",
            &[
                "ping",
                "-n",
                "-q",
                "-c",
                "40",
                "-i",
                "0.05",
                &Testbed::ip(2),
            ],
        )
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn ping");
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

#[test]
fn user_notify_json_logs_and_graceful_stop() {
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

#[test]
fn starts_and_carries_traffic_with_ipv6_disabled() {
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
