//! TAP offloads end to end (root-only; CI runs it): two gateways on the raw uplink, with
//! `[interface] offload` on (the default) and off. Each way: ping, iperf3 TCP in both
//! directions, no drop counted. With offloads the TAP counters prove the work moved: the
//! sender's kernel handed its TAP TCP super-frames (far fewer TAP packets than PSP frames
//! sent), and the receiving gateway wrote coalesced super-frames (far fewer TAP packets than
//! PSP frames received). With `aes128-gcm` the receiver trusts the sender's checksums (the ICV
//! covers them); with `none` it verifies each one before coalescing. With offloads the TAP is
//! read and written through io_uring (the default) and, once, without.

mod common;

use core::time::Duration;

use common::{Testbed, TestbedOptions, counter, delta};

/// The TAP's kernel counters in vmN: (rx packets, tx packets). "tx" is what the kernel sent
/// into the TAP (our reads), "rx" what we wrote.
fn tap_packets(tb: &Testbed, n: u8) -> (u64, u64) {
    let out = tb.ns_ok(
        &format!("vm{n}"),
        &["ip", "-j", "-s", "link", "show", "psp0"],
    );
    let v: serde_json::Value = serde_json::from_str(&out).expect("ip -j output is JSON");
    let stats = &v[0]["stats64"];
    let get = |dir: &str| stats[dir]["packets"].as_u64().expect("packet counter");
    (get("rx"), get("tx"))
}

fn run(suite: &str, offload: bool, io_uring: bool) {
    let tb = Testbed::up(TestbedOptions {
        suite: suite.into(),
        ..TestbedOptions::default()
    });
    tb.set_offload(offload);
    tb.set_interface("io_uring", io_uring);
    let gws = [tb.start(1), tb.start(2)];
    for g in &gws {
        let log = common::strip_ansi(&g.log());
        assert_eq!(
            log.contains("TAP offloads"),
            offload,
            "vm{}: offload {offload} in the log: {log}",
            g.host()
        );
        assert_eq!(
            log.contains("TAP reads through io_uring")
                && log.contains("TAP writes through io_uring"),
            offload && io_uring,
            "vm{}: offload {offload}, io_uring {io_uring} in the log: {log}",
            g.host()
        );
        if offload {
            assert!(
                log.contains("tso=true"),
                "vm{}: the kernel refused TSO on the TAP: {log}",
                g.host()
            );
        }
    }
    let start: Vec<_> = gws.iter().map(|g| g.status_json()).collect();

    tb.ping_until_up(1, 2, Duration::from_secs(5));
    for (a, b) in [(1, 2), (2, 1)] {
        let p = tb.ping(a, b, 3);
        assert_eq!(
            p.received, 3,
            "{suite}, offload {offload}: vm{a} -> vm{b}: {p:?}"
        );
    }

    for reverse in [false, true] {
        // `reverse`: vm2 sends, vm1 receives.
        let (tx, rx) = if reverse { (2, 1) } else { (1, 2) };
        let tap_tx0 = tap_packets(&tb, tx).1;
        let tap_rx0 = tap_packets(&tb, rx).0;
        let s_tx0 = gws[usize::from(tx) - 1].status_json();
        let s_rx0 = gws[usize::from(rx) - 1].status_json();
        let mbps = tb.iperf3(1, 2, 1, reverse);
        assert!(
            mbps > 0.0,
            "{suite}, offload {offload}: vm{tx} -> vm{rx}: {mbps} Mbit/s"
        );
        // iperf3 returns when the client has its report; the sending socket may still be
        // draining. Let the path go quiet before sampling, or a frame read from the TAP after
        // one counter was sampled and before the other skews the comparison (CI saw 108 frames
        // of skew at 700 Mbit/s).
        std::thread::sleep(Duration::from_millis(500));
        let sent = counter(
            &gws[usize::from(tx) - 1].status_json(),
            &format!("peer:vm{rx}.tx_frames"),
        ) - counter(&s_tx0, &format!("peer:vm{rx}.tx_frames"));
        let got = counter(
            &gws[usize::from(rx) - 1].status_json(),
            &format!("peer:vm{tx}.rx_frames"),
        ) - counter(&s_rx0, &format!("peer:vm{tx}.rx_frames"));
        // Gateway counters first, TAP counters second: any frame still moving only makes the
        // TAP side larger, which is the side the no-offload bound below allows for.
        let tap_tx = tap_packets(&tb, tx).1 - tap_tx0;
        let tap_rx = tap_packets(&tb, rx).0 - tap_rx0;
        eprintln!(
            "{suite}, offload {offload}: vm{tx} -> vm{rx} {mbps:.0} Mbit/s; sender TAP {tap_tx} \
             packets -> {sent} PSP frames; {got} PSP frames -> receiver TAP {tap_rx} packets"
        );
        assert!(
            sent > 1000 && got > 1000,
            "bulk traffic: {sent} sent, {got} received"
        );
        if offload {
            assert!(
                tap_tx * 3 < sent,
                "TSO: {tap_tx} TAP reads for {sent} frames"
            );
            assert!(
                tap_rx * 3 < got,
                "GRO: {tap_rx} TAP writes for {got} frames"
            );
        } else {
            // One TAP packet per frame (plus the odd ARP or ping).
            assert!(
                tap_tx + 50 >= sent,
                "no TSO: {tap_tx} TAP reads for {sent} frames"
            );
            assert!(
                tap_rx + 50 >= got,
                "no GRO: {tap_rx} TAP writes for {got} frames"
            );
        }
    }

    for (i, g) in gws.iter().enumerate() {
        let s = g.status_json();
        assert_eq!(
            counter(&s, "drops_total"),
            0,
            "{suite}, offload {offload}: vm{} counted drops: {:?}",
            i + 1,
            delta(&start[i], &s)
        );
    }
}

#[test]
fn root_offload_on_aes128_gcm() {
    run("aes128-gcm", true, true);
}

#[test]
fn root_offload_on_without_io_uring() {
    run("aes128-gcm", true, false);
}

#[test]
fn root_offload_on_none_verifies_checksums() {
    run("none", true, true);
}

#[test]
fn root_offload_off() {
    run("aes128-gcm", false, true);
}

/// A jumbo segment (MTU 9000 on every port): the TAP MTU follows the uplink (9000 minus the
/// 8 bytes of `none`'s overhead), a ping that fills it crosses unfragmented both ways, TSO
/// super-frames are cut into jumbo frames, and nothing is dropped.
#[test]
fn root_jumbo_uplink_gives_a_jumbo_tap() {
    let tb = Testbed::up(TestbedOptions {
        suite: "none".into(),
        ..TestbedOptions::default()
    });
    let out = tb.sh(
        "for h in vm1 vm2 eve; do ip -n \"$(tb_ns lan)\" link set $h mtu 9000; \
         ip -n \"$(tb_ns $h)\" link set up0 mtu 9000; done",
    );
    assert!(out.status.success(), "MTU 9000: {out:?}");
    let gws = [tb.start(1), tb.start(2)];
    for n in [1u8, 2] {
        let mtu = tb.ns_ok(&format!("vm{n}"), &["cat", "/sys/class/net/psp0/mtu"]);
        assert_eq!(mtu.trim(), "8992", "vm{n}: TAP MTU");
    }
    tb.ping_until_up(1, 2, Duration::from_secs(5));
    for (a, b) in [(1u8, 2u8), (2, 1)] {
        // 8992 - 20 (IP) - 8 (ICMP): the largest ping the TAP takes, don't fragment.
        let out = tb.ns_ok(
            &format!("vm{a}"),
            &[
                "ping",
                "-c",
                "3",
                "-i",
                "0.2",
                "-W",
                "2",
                "-M",
                "do",
                "-s",
                "8964",
                &Testbed::ip(b),
            ],
        );
        assert!(out.contains(" 0% packet loss"), "vm{a} -> vm{b}: {out}");
    }
    let s0 = gws[0].status_json();
    let mbps = tb.iperf3(1, 2, 1, false);
    assert!(mbps > 0.0, "TCP over the jumbo uplink: {mbps} Mbit/s");
    let s1 = gws[0].status_json();
    let frames = counter(&s1, "peer:vm2.tx_frames") - counter(&s0, "peer:vm2.tx_frames");
    let bytes = counter(&s1, "peer:vm2.tx_bytes") - counter(&s0, "peer:vm2.tx_bytes");
    eprintln!(
        "jumbo: {mbps:.0} Mbit/s, {frames} frames of {} bytes on average",
        bytes / frames.max(1)
    );
    assert!(
        bytes / frames.max(1) > 4000,
        "TSO cut at the jumbo MTU: {bytes} bytes in {frames} frames"
    );
    for (i, g) in gws.iter().enumerate() {
        let s = g.status_json();
        assert_eq!(
            counter(&s, "drops_total"),
            0,
            "vm{}: {:?}",
            i + 1,
            delta(&s0, &s)
        );
    }
}

/// UDP segmentation offload (USO, kernel 6.2 and later): a sender's UDP GSO batches
/// (`UDP_SEGMENT`) reach the gateway as super-frames (far fewer TAP reads than datagrams), are
/// cut into checked datagrams; the receiver gets every datagram with its size and bytes.
#[test]
fn root_udp_gso_batches_cross_the_tunnel_as_super_frames() {
    let tb = Testbed::up(TestbedOptions {
        suite: "aes128-gcm".into(),
        ..TestbedOptions::default()
    });
    let gws = [tb.start(1), tb.start(2)];
    if !common::strip_ansi(&gws[0].log()).contains("uso=true") {
        eprintln!("skipped: the kernel refused USO on the TAP (before 6.2)");
        return;
    }
    tb.ping_until_up(1, 2, Duration::from_secs(5));
    let s0 = gws[1].status_json();
    let (reads0, writes0) = (tap_packets(&tb, 1).1, tap_packets(&tb, 2).0);
    // 40 sends of 20 datagrams of 1000 bytes (the last of each 600), a counter in each.
    const RECEIVER: &str = r#"
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("10.77.0.2", 7000)); s.settimeout(3); print("ready", flush=True)
n = 0; bad = 0
try:
    while True:
        d = s.recv(2000)
        k = int.from_bytes(d[:4], "big")
        want = 600 if k % 20 == 19 else 1000
        if len(d) != want or d[4:] != bytes([k % 251]) * (want - 4):
            bad += 1
        n += 1
except socket.timeout:
    pass
print(n, bad)
"#;
    const SENDER: &str = r#"
import socket, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(17, 103, 1000)  # SOL_UDP, UDP_SEGMENT
for b in range(40):
    buf = b"".join(
        (k).to_bytes(4, "big") + bytes([k % 251]) * ((600 if k % 20 == 19 else 1000) - 4)
        for k in range(b * 20, b * 20 + 20))
    s.sendto(buf, ("10.77.0.2", 7000))
    time.sleep(0.005)
"#;
    let mut rx = tb
        .ns_cmd("vm2", &["python3", "-c", RECEIVER])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3 receiver");
    let mut line = String::new();
    let mut out = std::io::BufReader::new(rx.stdout.take().expect("stdout"));
    std::io::BufRead::read_line(&mut out, &mut line).expect("receiver ready");
    tb.ns_ok("vm1", &["python3", "-c", SENDER]);
    let mut result = String::new();
    std::io::Read::read_to_string(&mut out, &mut result).expect("receiver result");
    let _ = rx.wait();
    let got: Vec<u64> = result
        .split_whitespace()
        .map(|x| x.parse().expect("two numbers"))
        .collect();
    let (reads, writes) = (
        tap_packets(&tb, 1).1 - reads0,
        tap_packets(&tb, 2).0 - writes0,
    );
    eprintln!(
        "USO: 800 datagrams sent in 40 GSO sends; received {got:?} (count, bad); sender TAP {reads} reads, receiver TAP {writes} writes"
    );
    assert_eq!(got, [800, 0], "every datagram, whole and in its size");
    assert!(
        reads < 200,
        "USO on the TAP: {reads} reads for 800 datagrams"
    );
    // Received datagrams are written one by one (tap.rs `COALESCE_UDP` is off).
    assert!(writes >= 800, "{writes} TAP writes for 800 datagrams");
    let s = gws[1].status_json();
    assert_eq!(counter(&s, "drops_total"), 0, "{:?}", delta(&s0, &s));
}
