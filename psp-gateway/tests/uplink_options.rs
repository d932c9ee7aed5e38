//! The raw uplink's options end to end (root-only; CI runs it): both gateways with
//! `[uplink] qdisc_bypass` and `rx_ring` on the raw uplink with TAP offloads, and the plain
//! driver over UDP without offloads (frame by frame TAP writes). Each way: the option took
//! effect (log), ping both ways, a TCP transfer of a few MB each way whose bytes arrive intact
//! and in order, and no drop counted.

mod common;

use core::time::Duration;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::mpsc;

use common::{Gateway, Testbed, TestbedOptions, Uplink, counter, delta};

/// Bytes sent each way.
const TRANSFER: usize = 4 << 20;

/// The TCP port vm2 listens on.
const PORT: u16 = 7411;

/// The first offset where `got` and `want` differ (or where one ends), for the message.
fn first_difference(got: &[u8], want: &[u8]) -> usize {
    got.iter()
        .zip(want)
        .position(|(a, b)| a != b)
        .unwrap_or(got.len().min(want.len()))
}

/// Reads until EOF with a deadline per read.
fn read_all(s: &mut TcpStream, what: &str) -> Vec<u8> {
    let mut got = Vec::with_capacity(TRANSFER);
    s.read_to_end(&mut got)
        .unwrap_or_else(|e| panic!("{what}: read after {} bytes: {e}", got.len()));
    got
}

/// vm1 sends [`TRANSFER`] bytes to vm2 over TCP and half-closes; vm2 checks them and sends
/// [`TRANSFER`] other bytes back, which vm1 checks. Each side is a thread in its namespace.
fn tcp_both_ways(tb: &Testbed, what: &str) {
    let up = common::pseudo_random(0x5eed_0001, TRANSFER);
    let down = common::pseudo_random(0x5eed_0002, TRANSFER);
    let timeout = Some(Duration::from_secs(20));
    let (ready_tx, ready_rx) = mpsc::channel();
    let server = {
        let (ns, up, down, what) = (tb.ns("vm2"), up.clone(), down.clone(), what.to_owned());
        std::thread::spawn(move || {
            psp_gateway::io::sys::enter_netns(&ns).expect("enter vm2");
            let l = TcpListener::bind((Testbed::ip(2).as_str(), PORT)).expect("listen in vm2");
            ready_tx.send(()).expect("signal the client");
            let (mut s, _) = l.accept().expect("accept in vm2");
            s.set_read_timeout(timeout).unwrap();
            s.set_write_timeout(timeout).unwrap();
            let got = read_all(&mut s, &format!("{what}: vm2"));
            assert!(
                got == up,
                "{what}: vm1 -> vm2: {} of {} bytes, first difference at {}",
                got.len(),
                up.len(),
                first_difference(&got, &up)
            );
            s.write_all(&down).expect("vm2 sends");
            s.shutdown(Shutdown::Write).expect("vm2 half-closes");
        })
    };
    ready_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("vm2 listens");
    let client = {
        let (ns, what) = (tb.ns("vm1"), what.to_owned());
        std::thread::spawn(move || {
            psp_gateway::io::sys::enter_netns(&ns).expect("enter vm1");
            let to = (Testbed::ip(2), PORT);
            let addr = format!("{}:{}", to.0, to.1).parse().unwrap();
            let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
                .expect("connect from vm1");
            s.set_read_timeout(timeout).unwrap();
            s.set_write_timeout(timeout).unwrap();
            s.write_all(&up).expect("vm1 sends");
            s.shutdown(Shutdown::Write).expect("vm1 half-closes");
            let got = read_all(&mut s, &format!("{what}: vm1"));
            assert!(
                got == down,
                "{what}: vm2 -> vm1: {} of {} bytes, first difference at {}",
                got.len(),
                down.len(),
                first_difference(&got, &down)
            );
        })
    };
    let c = client.join();
    let s = server.join();
    if let Err(e) = c.and(s) {
        std::panic::resume_unwind(e);
    }
}

/// Two gateways on `uplink` with `[interface] offload = offload` and `lines` added to their
/// `[uplink]`; `check` looks at each started gateway (its log).
fn run(uplink: Uplink, offload: bool, lines: &str, check: impl Fn(&Gateway)) {
    let what = format!("{uplink:?}, offload {offload}, {lines:?}");
    let tb = Testbed::up(TestbedOptions {
        uplink,
        suite: "aes128-gcm".into(),
        ..TestbedOptions::default()
    });
    tb.set_offload(offload);
    for n in 1..=2 {
        let path = tb.config_path(n);
        let text = std::fs::read_to_string(&path).expect("read config");
        let text = text.replacen(
            "interface = \"up0\"\n",
            &format!("interface = \"up0\"\n{lines}"),
            1,
        );
        std::fs::write(&path, text).expect("write config");
    }
    let gws = [tb.start(1), tb.start(2)];
    for g in &gws {
        check(g);
    }
    let start: Vec<_> = gws.iter().map(Gateway::status_json).collect();

    tb.ping_until_up(1, 2, Duration::from_secs(5));
    for (a, b) in [(1, 2), (2, 1)] {
        let p = tb.ping(a, b, 3);
        assert_eq!(p.received, 3, "{what}: vm{a} -> vm{b}: {p:?}");
    }
    tcp_both_ways(&tb, &what);

    for (i, g) in gws.iter().enumerate() {
        let s = g.status_json();
        let d = delta(&start[i], &s);
        assert_eq!(
            counter(&s, "drops_total"),
            0,
            "{what}: vm{} counted drops: {d:?}",
            i + 1
        );
        // Both directions carried the transfer (a few MB in 1500-byte frames or less).
        let (peer, frames) = (if i == 0 { "vm2" } else { "vm1" }, 2000);
        for dir in ["tx_frames", "rx_frames"] {
            let key = format!("peer:{peer}.{dir}");
            let got = counter(&s, &key) - counter(&start[i], &key);
            assert!(got > frames, "{what}: vm{} {key} {got}", i + 1);
        }
    }
}

#[test]
fn root_qdisc_bypass_and_rx_ring_raw_with_offloads() {
    run(
        Uplink::Raw,
        true,
        "qdisc_bypass = true\nrx_ring = true\n",
        |g| {
            let log = common::strip_ansi(&g.log());
            for line in [
                "qdisc_bypass: sends skip the qdisc",
                "rx_ring: receiving through a PACKET_MMAP ring",
            ] {
                assert!(log.contains(line), "vm{}: no {line:?} in {log}", g.host());
            }
        },
    );
}

#[test]
fn root_udp_without_offloads() {
    run(Uplink::Udp, false, "", |_| {});
}
