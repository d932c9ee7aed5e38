//! A kernel that refuses io_uring (root-only; CI runs it): with `kernel.io_uring_disabled = 2`
//! the gateways log it, read and write the TAP one frame at a time, and carry ping and TCP as
//! before. Its own test binary: the sysctl is machine-wide, and cargo runs test binaries one
//! at a time, so no other gateway sees it (tests in one binary run in parallel).

mod common;

use core::time::Duration;
use std::fs;

use common::{Testbed, TestbedOptions};

const SYSCTL: &str = "/proc/sys/kernel/io_uring_disabled";

/// Sets the sysctl for its life and puts the old value back when dropped (also on a panic).
struct Disabled(String);

impl Disabled {
    fn new() -> Option<Self> {
        let old = fs::read_to_string(SYSCTL).ok()?;
        fs::write(SYSCTL, "2").ok()?;
        Some(Self(old))
    }
}

impl Drop for Disabled {
    fn drop(&mut self) {
        let _ = fs::write(SYSCTL, self.0.trim());
    }
}

#[test]
fn root_a_kernel_that_refuses_io_uring_gets_plain_tap_reads_and_writes() {
    let tb = Testbed::up(TestbedOptions::default());
    let Some(_disabled) = Disabled::new() else {
        eprintln!("skipped: no writable {SYSCTL}");
        return;
    };
    let gws = [tb.start(1), tb.start(2)];
    for g in &gws {
        let log = common::strip_ansi(&g.log());
        assert!(
            log.contains("io_uring refused: one read per TAP frame")
                && log.contains("io_uring refused: one write per TAP frame"),
            "vm{}: no fallback in the log: {log}",
            g.host()
        );
    }
    tb.ping_until_up(1, 2, Duration::from_secs(5));
    for (a, b) in [(1, 2), (2, 1)] {
        let p = tb.ping(a, b, 3);
        assert_eq!(p.received, 3, "vm{a} -> vm{b}: {p:?}");
    }
    let mbps = tb.iperf3(1, 2, 2, false);
    assert!(mbps > 10.0, "TCP vm1 -> vm2: {mbps} Mbit/s");
}
