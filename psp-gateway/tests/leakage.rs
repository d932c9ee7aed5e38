//! Leakage of a normalized tunnel (root-only, CI runs it): two gateways
//! vm1 and vm2 with `[normalize] enabled` on a raw uplink; an insider in vm1 signals a bit
//! pattern to eve, who captures the wire from the hub:
//!
//! 1. **timing**: heavy UDP traffic to vm2 during the 1-seconds, silence during the 0-seconds;
//! 2. **sizes**: the same packet rate all the time, 1200-byte packets during the 1-seconds and
//!    32-byte packets during the 0-seconds.
//!
//! Eve's view must not depend on the bits: every PSP frame on the wire has the same length, and
//! the number of frames per 100 ms in each direction does not differ between 1-seconds and
//! 0-seconds beyond pacing jitter (Welch's t, printed). The test also prints eve's best
//! estimate of the timing channel's capacity (a threshold detector on per-second counts, as a
//! binary symmetric channel) and checks that the sending rate stayed at S_goal (the path has no
//! loss, so the controller never lowers it).
//!
//! A third phase checks departure *timing*, which counts per 100 ms cannot see: vm1's outer
//! frames to vm2, timestamped by the kernel as they leave vm1's uplink (tcpdump, ns), must have
//! the same inter-departure distribution while the insider is silent and while it saturates
//! the tunnel (two-sample Kolmogorov-Smirnov at α = 0.001; docs/GATEWAY.md has the figures).

mod common;

use core::sync::atomic::{AtomicBool, Ordering};
use core::time::Duration;

use std::io;
use std::net::UdpSocket;
use std::sync::Arc;
use std::thread::{self, sleep};
use std::time::Instant;

use psp_gateway::io::sys::PacketSocket;

use common::{Testbed, TestbedOptions, counter};

const ETH_P_PSP: u16 = 0x1982;
/// The insider's bit pattern, one bit per second (as many ones as zeros).
const BITS: [bool; 10] = [
    true, false, true, true, false, false, true, false, true, false,
];
/// S_goal of both directions.
const S_GOAL_KBPS: u64 = 4000;
/// The bin width eve counts frames in.
const BIN: Duration = Duration::from_millis(100);
/// |Welch t| above this fails the test (p < 1e-3 under no difference).
const T_LIMIT: f64 = 4.0;

/// Enters namespace `ns` on this thread.
fn enter(ns: &str) -> io::Result<()> {
    psp_gateway::io::sys::enter_netns(ns)
}

/// One captured frame: when, how long, source and destination MAC.
#[derive(Clone, Copy, Debug)]
struct Frame {
    at: Instant,
    len: usize,
    src: [u8; 6],
    dst: [u8; 6],
}

/// Captures PSP frames on `ifname` in namespace `ns` until `stop` is set.
fn capture(
    ns: String,
    ifname: &'static str,
    stop: Arc<AtomicBool>,
) -> thread::JoinHandle<Vec<Frame>> {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let h = thread::spawn(move || {
        let sock =
            open_packet(&ns, ifname).unwrap_or_else(|e| panic!("AF_PACKET socket in {ns}: {e}"));
        ready_tx.send(()).expect("ready");
        let mut out = Vec::with_capacity(100_000);
        let mut buf = vec![0u8; 65_536];
        while !stop.load(Ordering::Relaxed) {
            let Ok(Some(r)) = sock.recv_timeout(&mut buf, Duration::from_millis(50)) else {
                continue;
            };
            let at = Instant::now();
            if r.len < 14 || r.outgoing {
                continue;
            }
            out.push(Frame {
                at,
                len: r.len,
                dst: buf[0..6].try_into().expect("6 bytes"),
                src: buf[6..12].try_into().expect("6 bytes"),
            });
        }
        out
    });
    ready_rx
        .recv_timeout(Duration::from_secs(5))
        .expect("capture socket ready");
    h
}

fn open_packet(ns: &str, ifname: &str) -> io::Result<PacketSocket> {
    enter(ns)?;
    let sock = PacketSocket::open(ifname, ETH_P_PSP)?;
    // A large receive buffer: eve must not lose frames while the test process is busy.
    sock.set_buffer_sizes(8 << 20);
    Ok(sock)
}

/// How the insider encodes a bit.
#[derive(Clone, Copy, Debug)]
enum Mode {
    /// 1: ~20 Mbit/s of 1200-byte packets; 0: nothing.
    OnOff,
    /// Always 2000 packets/s; 1: 1200 bytes, 0: 32 bytes.
    Sizes,
}

/// Sends the pattern from namespace `ns` to `dst`; returns the instant the first bit started.
fn insider(ns: String, dst: String, mode: Mode) -> thread::JoinHandle<Instant> {
    thread::spawn(move || {
        enter(&ns).expect("insider enters vm1");
        let sock = UdpSocket::bind("0.0.0.0:0").expect("insider socket");
        let big = [0x5au8; 1200];
        let small = [0x5au8; 32];
        let gap = Duration::from_micros(500);
        let start = Instant::now();
        for (i, &bit) in BITS.iter().enumerate() {
            let end = start + Duration::from_secs(i as u64 + 1);
            let mut next = Instant::now();
            while Instant::now() < end {
                let payload: &[u8] = match (mode, bit) {
                    (Mode::OnOff, false) => {
                        sleep(end.saturating_duration_since(Instant::now()));
                        break;
                    }
                    (_, true) => &big,
                    (Mode::Sizes, false) => &small,
                };
                // A full socket buffer or an ICMP error from vm2 is fine: keep the pattern.
                let _ = sock.send_to(payload, &dst);
                next += gap;
                sleep(next.saturating_duration_since(Instant::now()));
            }
        }
        start
    })
}

fn mean_var(x: &[f64]) -> (f64, f64) {
    let n = x.len() as f64;
    let m = x.iter().sum::<f64>() / n;
    let v = x.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (n - 1.0);
    (m, v)
}

/// Welch's t statistic of `a` against `b`.
fn welch_t(a: &[f64], b: &[f64]) -> f64 {
    let (ma, va) = mean_var(a);
    let (mb, vb) = mean_var(b);
    let se = (va / a.len() as f64 + vb / b.len() as f64).sqrt();
    if se == 0.0 {
        if ma == mb { 0.0 } else { f64::INFINITY }
    } else {
        (ma - mb) / se
    }
}

/// The standard normal CDF (Abramowitz-Stegun 7.1.26 for erf, |error| < 1.5e-7).
fn phi(x: f64) -> f64 {
    let z = x.abs() / core::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * z);
    let poly = t
        * (0.254_829_592
            + t * (-0.284_496_736
                + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    let erf = 1.0 - poly * (-z * z).exp();
    if x >= 0.0 {
        0.5 * (1.0 + erf)
    } else {
        0.5 * (1.0 - erf)
    }
}

fn binary_entropy(p: f64) -> f64 {
    if p <= 0.0 || p >= 1.0 {
        return 0.0;
    }
    -p * p.log2() - (1.0 - p) * (1.0 - p).log2()
}

/// Eve's capacity estimate in bits/s: one bit per second; she decides with a threshold on the
/// frame count of the second, so the channel is binary symmetric with the error rate of the
/// best threshold between two normal distributions (means and variances from the data).
fn capacity(ones: &[f64], zeros: &[f64]) -> f64 {
    let (m1, v1) = mean_var(ones);
    let (m0, v0) = mean_var(zeros);
    let sd = ((v1 + v0) / 2.0).sqrt().max(0.5);
    let d = (m1 - m0).abs() / sd;
    let p = phi(-d / 2.0);
    1.0 - binary_entropy(p)
}

/// The capacity estimate under every relabeling of the seconds with as many ones as `BITS`
/// (the estimator's noise floor: what it reports when the counts carry no bit at all); returns
/// the median and the fraction at or above `observed`.
fn null_capacity(per_second: &[f64], observed: f64) -> (f64, f64) {
    let n = per_second.len();
    let ones = BITS.iter().filter(|b| **b).count();
    let mut all = Vec::new();
    for mask in 0u32..(1 << n) {
        if mask.count_ones() as usize != ones {
            continue;
        }
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for (i, c) in per_second.iter().enumerate() {
            if mask & (1 << i) != 0 { &mut a } else { &mut b }.push(*c);
        }
        all.push(capacity(&a, &b));
    }
    all.sort_by(f64::total_cmp);
    let at_least = all.iter().filter(|c| **c >= observed - 1e-12).count();
    (all[all.len() / 2], at_least as f64 / all.len() as f64)
}

/// Frame counts per bin for frames from `src` to `dst`, split by the bit of the bin's second.
/// The first bin of each second is left out (the insider's switch may straddle it).
fn bins(frames: &[Frame], start: Instant, src: [u8; 6], dst: [u8; 6]) -> (Vec<f64>, Vec<f64>) {
    let per_sec = (Duration::from_secs(1).as_micros() / BIN.as_micros()) as usize;
    let mut counts = vec![0u32; BITS.len() * per_sec];
    for f in frames
        .iter()
        .filter(|f| f.src == src && f.dst == dst && f.at >= start)
    {
        let i = (f.at - start).as_micros() / BIN.as_micros();
        if let Some(c) = counts.get_mut(i as usize) {
            *c += 1;
        }
    }
    let (mut ones, mut zeros) = (Vec::new(), Vec::new());
    for (i, c) in counts.iter().enumerate() {
        if i % per_sec == 0 {
            continue;
        }
        if BITS[i / per_sec] {
            &mut ones
        } else {
            &mut zeros
        }
        .push(f64::from(*c));
    }
    (ones, zeros)
}

/// Frames per whole second, split by bit.
fn seconds(frames: &[Frame], start: Instant, src: [u8; 6], dst: [u8; 6]) -> (Vec<f64>, Vec<f64>) {
    let mut counts = vec![0u32; BITS.len()];
    for f in frames
        .iter()
        .filter(|f| f.src == src && f.dst == dst && f.at >= start)
    {
        if let Some(c) = counts.get_mut((f.at - start).as_secs() as usize) {
            *c += 1;
        }
    }
    let (mut ones, mut zeros) = (Vec::new(), Vec::new());
    for (i, c) in counts.iter().enumerate() {
        if BITS[i] { &mut ones } else { &mut zeros }.push(f64::from(*c));
    }
    (ones, zeros)
}

fn run(tb: &Testbed, mode: Mode, vm1: &common::Gateway) {
    let stop = Arc::new(AtomicBool::new(false));
    let cap = capture(tb.ns("eve"), "up0", Arc::clone(&stop));
    let before = vm1.status_json();
    let start = insider(tb.ns("vm1"), format!("{}:9", Testbed::ip(2)), mode)
        .join()
        .expect("insider");
    sleep(Duration::from_millis(100));
    stop.store(true, Ordering::Relaxed);
    let frames = cap.join().expect("capture");
    let after = vm1.status_json();

    let mut lens: Vec<usize> = frames.iter().map(|f| f.len).collect();
    lens.sort_unstable();
    lens.dedup();
    println!(
        "{mode:?}: {} PSP frames captured, lengths {lens:?}",
        frames.len()
    );
    assert_eq!(
        lens.len(),
        1,
        "{mode:?}: PSP frames of different lengths on the wire: {lens:?}"
    );

    let sent = counter(&after, "peer:vm2.tx_frames") - counter(&before, "peer:vm2.tx_frames");
    let real = counter(&after, "peer:vm2.normalize.real_frames_sent")
        - counter(&before, "peer:vm2.normalize.real_frames_sent");
    let drops = counter(&after, "peer:vm2.normalize.inner_drops")
        - counter(&before, "peer:vm2.normalize.inner_drops");
    println!(
        "{mode:?}: vm1 queued {sent} inner frames, sent {real} real outer frames, dropped {drops} (queue full)"
    );
    assert!(
        real > 100,
        "{mode:?}: the insider's traffic did not go through the tunnel"
    );
    for (what, src, dst) in [
        ("vm1->vm2", Testbed::mac(1), Testbed::mac(2)),
        ("vm2->vm1", Testbed::mac(2), Testbed::mac(1)),
    ] {
        let (ones, zeros) = bins(&frames, start, src, dst);
        let (m1, v1) = mean_var(&ones);
        let (m0, v0) = mean_var(&zeros);
        let t = welch_t(&ones, &zeros);
        let (s1, s0) = seconds(&frames, start, src, dst);
        let c = capacity(&s1, &s0);
        let all: Vec<f64> = {
            let (mut i1, mut i0) = (s1.iter(), s0.iter());
            BITS.iter()
                .map(|b| *if *b { i1.next() } else { i0.next() }.expect("one count per second"))
                .collect()
        };
        let (floor, p) = null_capacity(&all, c);
        println!(
            "{mode:?} {what}: frames/100ms bit 1: {m1:.2} (sd {:.2}, n {}), bit 0: {m0:.2} (sd {:.2}, n {}); Welch t = {t:.2}; per second 1: {s1:?} 0: {s0:?}; capacity estimate {c:.4} bit/s (noise floor: median {floor:.4} over all relabelings of the seconds, {:.0}% of them at least as high)",
            v1.sqrt(),
            ones.len(),
            v0.sqrt(),
            zeros.len(),
            p * 100.0
        );
        // The pacer's expected count per bin (frames of the captured length at S_goal).
        let expect = S_GOAL_KBPS as f64 * 1000.0 * BIN.as_secs_f64() / (lens[0] as f64 * 8.0);
        assert!(
            (m1 - expect).abs() < 2.0 && (m0 - expect).abs() < 2.0,
            "{mode:?} {what}: {m1:.2} and {m0:.2} frames per bin, want about {expect:.2}"
        );
        assert!(
            t.abs() < T_LIMIT,
            "{mode:?} {what}: frame counts differ between 1- and 0-seconds: Welch t = {t:.2}"
        );
    }
    for (vm, path) in [
        (1, "peer:vm2.normalize.s_current_kbps"),
        (1, "peer:vm2.normalize.s_goal_kbps"),
    ] {
        let _ = vm;
        assert_eq!(
            counter(&after, path),
            S_GOAL_KBPS,
            "{path} after the {mode:?} run"
        );
    }
}

/// The pacing test's phases: idle and saturated, alternating (drift in either cancels, and a
/// transient disturbance from outside falls on both kinds).
const TIMING_PHASES: [bool; 16] = [
    false, true, false, true, false, true, false, true, false, true, false, true, false, true,
    false, true,
];
/// The length of a phase.
const TIMING_PHASE: Duration = Duration::from_millis(500);
/// Left out at the start of each phase (the queue fills or drains then).
const TIMING_SETTLE: Duration = Duration::from_millis(100);
/// The resolution the KS test compares inter-departure times at, µs. Below it, an idle and a
/// busy CPU differ by a few µs in timer, cache and interrupt effects (the unrounded statistic is
/// printed too): a residual the test does not cover, stated in docs/GATEWAY.md.
const KS_RESOLUTION_US: f64 = 25.0;
/// The KS test's significance level: the false-positive rate if both samples came from one
/// distribution of independent intervals.
const KS_ALPHA: f64 = 0.001;

/// Starts tcpdump in `ns` on `ifname`'s transmit side (kernel timestamps in nanoseconds, taken
/// as the frame leaves the interface), writing PSP frames to `file`.
fn start_tcpdump(ns: &str, ifname: &str, file: &std::path::Path) -> std::process::Child {
    let child = std::process::Command::new("ip")
        .args([
            "netns", "exec", ns, "tcpdump", "-i", ifname, "-Q", "out", "-n", "-s", "64",
        ])
        .args([
            "-B",
            "16384",
            "--immediate-mode",
            "--time-stamp-precision",
            "nano",
            "-w",
        ])
        .arg(file)
        .args(["ether", "proto", "0x1982"])
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(file.with_extension("log")).expect("tcpdump log"))
        .spawn()
        .expect("tcpdump (testbed/install-deps.sh installs it)");
    // tcpdump writes the file header once it listens.
    let deadline = Instant::now() + Duration::from_secs(5);
    while std::fs::metadata(file).map_or(true, |m| m.len() < 24) {
        assert!(Instant::now() < deadline, "tcpdump did not start");
        sleep(Duration::from_millis(20));
    }
    child
}

/// (timestamp ns, destination MAC) of every frame in a nanosecond pcap file.
fn read_pcap_ns(file: &std::path::Path) -> Vec<(u64, [u8; 6])> {
    let b = std::fs::read(file).expect("read pcap");
    assert!(
        b.len() >= 24 && b[..4] == 0xa1b2_3c4du32.to_le_bytes(),
        "not a little-endian nanosecond pcap"
    );
    let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
    let mut out = Vec::new();
    let mut i = 24;
    while i + 16 <= b.len() {
        let (sec, ns, incl) = (u32_at(i), u32_at(i + 4), u32_at(i + 8) as usize);
        let data = &b[i + 16..(i + 16 + incl).min(b.len())];
        if let Some(dst) = data.get(..6) {
            let at = u64::from(sec) * 1_000_000_000 + u64::from(ns);
            out.push((at, dst.try_into().expect("6 bytes")));
        }
        i += 16 + incl;
    }
    out
}

/// The two-sample Kolmogorov-Smirnov statistic: the largest gap between the samples' CDFs.
fn ks_statistic(a: &[f64], b: &[f64]) -> f64 {
    let (mut a, mut b) = (a.to_vec(), b.to_vec());
    a.sort_by(f64::total_cmp);
    b.sort_by(f64::total_cmp);
    let (mut i, mut j, mut d) = (0usize, 0usize, 0f64);
    while i < a.len() && j < b.len() {
        let x = a[i].min(b[j]);
        while i < a.len() && a[i] <= x {
            i += 1;
        }
        while j < b.len() && b[j] <= x {
            j += 1;
        }
        d = d.max((i as f64 / a.len() as f64 - j as f64 / b.len() as f64).abs());
    }
    d
}

/// The KS critical value at level `alpha` for samples of `n` and `m` (asymptotic).
fn ks_critical(alpha: f64, n: usize, m: usize) -> f64 {
    let (n, m) = (n as f64, m as f64);
    (-(alpha / 2.0).ln() / 2.0).sqrt() * ((n + m) / (n * m)).sqrt()
}

fn percentiles(x: &[f64]) -> String {
    let mut x = x.to_vec();
    x.sort_by(f64::total_cmp);
    let at = |q: f64| x[((x.len() - 1) as f64 * q).round() as usize];
    format!(
        "p1 {:.1} p50 {:.1} p99 {:.1} max {:.1} µs",
        at(0.01),
        at(0.5),
        at(0.99),
        at(1.0)
    )
}

/// The pacer's departure times must not follow the protected traffic: vm1's outer frames to
/// vm2, timestamped by the kernel as they leave vm1's uplink, have the same inter-departure
/// distribution while the insider is silent and while it saturates the tunnel (two-sample
/// Kolmogorov-Smirnov at level [`KS_ALPHA`]). Frame counts per 100 ms (above) cannot see
/// jitter or catch-up bursts; this can.
/// CPU time (clock ticks) of the thread named `name` of process `pid`.
fn thread_ticks(pid: u32, name: &str) -> Option<u64> {
    for t in std::fs::read_dir(format!("/proc/{pid}/task"))
        .ok()?
        .flatten()
    {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if comm.trim() != name {
            continue;
        }
        let stat = std::fs::read_to_string(t.path().join("stat")).ok()?;
        // Fields after the parenthesised name: state is field 3, utime 14, stime 15.
        let rest = stat.rsplit_once(')')?.1;
        let f: Vec<&str> = rest.split_whitespace().collect();
        return Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?);
    }
    None
}

/// The departure-timing check: a second, independent measurement when the first fails (an
/// outside disturbance lands on one phase of one measurement; a pacer that follows the load
/// fails both). Under equal distributions the chance that both fail is at most α² = 1e-6.
fn departure_timing(tb: &Testbed, vm1: &common::Gateway) {
    let (d, crit) = measure_departures(tb, vm1);
    if d < crit {
        return;
    }
    println!("KS D {d:.4} >= {crit:.4}: measuring again");
    let (d, crit) = measure_departures(tb, vm1);
    assert!(
        d < crit,
        "the pacer's departure times follow the protected traffic: KS D = {d:.4} >= {crit:.4}, twice"
    );
}

/// Busy loops at `SCHED_IDLE` on every CPU (`chrt --idle`), for as long as they live: they
/// run only when nothing else wants the CPU, so no virtual CPU ever halts. A halted virtual
/// CPU wakes when the hypervisor gets to it, up to milliseconds late, and halts only when the
/// guest is idle: that delay follows the load of the whole machine, which the gateway cannot
/// hide (docs/GATEWAY.md, "Departure timing"). With the spinners both kinds of phase see
/// running CPUs, and the test measures what the gateway controls.
struct IdleSpinners(Vec<std::process::Child>);

impl IdleSpinners {
    fn start() -> Self {
        let cpus = thread::available_parallelism().map_or(2, |n| n.get());
        Self(
            (0..cpus)
                .map(|_| {
                    std::process::Command::new("chrt")
                        .args(["--idle", "0", "sh", "-c", "while :; do :; done"])
                        .spawn()
                        .expect("chrt (util-linux)")
                })
                .collect(),
        )
    }
}

impl Drop for IdleSpinners {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// One measurement: returns the KS statistic and its critical value.
fn measure_departures(tb: &Testbed, vm1: &common::Gateway) -> (f64, f64) {
    let _spinners = IdleSpinners::start();
    let ticks0 = thread_ticks(vm1.pid(), "psp-pacer");
    let wall0 = Instant::now();
    let file = tb.dir().join("departures.pcap");
    let _ = std::fs::remove_file(&file);
    let mut dump = start_tcpdump(&tb.ns("vm1"), "up0", &file);
    sleep(Duration::from_millis(300));
    let dst = format!("{}:9", Testbed::ip(2));
    let ns = tb.ns("vm1");
    let t0 = std::time::SystemTime::now();
    let blaster = thread::spawn(move || {
        enter(&ns).expect("insider enters vm1");
        let sock = UdpSocket::bind("0.0.0.0:0").expect("insider socket");
        let big = [0x5au8; 1200];
        let start = Instant::now();
        for (i, &busy) in TIMING_PHASES.iter().enumerate() {
            let end = start + TIMING_PHASE * (i as u32 + 1);
            if !busy {
                sleep(end.saturating_duration_since(Instant::now()));
                continue;
            }
            // As fast as the socket takes them: far above S_goal.
            while Instant::now() < end {
                for _ in 0..16 {
                    let _ = sock.send_to(&big, &dst);
                }
                thread::yield_now();
            }
        }
    });
    blaster.join().expect("blaster");
    sleep(Duration::from_millis(200));
    // SIGINT: tcpdump flushes its buffer and exits.
    let _ = std::process::Command::new("kill")
        .args(["-INT", &dump.id().to_string()])
        .status();
    let _ = dump.wait();
    let log = std::fs::read_to_string(file.with_extension("log")).unwrap_or_default();
    println!("tcpdump: {}", log.trim().replace('\n', "; "));
    let start_ns = t0
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_nanos() as u64;
    let frames: Vec<u64> = read_pcap_ns(&file)
        .into_iter()
        .filter(|(_, d)| *d == Testbed::mac(2))
        .map(|(t, _)| t)
        .collect();
    let (mut idle, mut busy) = (Vec::new(), Vec::new());
    let (mut idle_q, mut busy_q) = (Vec::new(), Vec::new());
    for w in frames.windows(2) {
        let Some(since) = w[0].checked_sub(start_ns) else {
            continue;
        };
        let len = TIMING_PHASE.as_nanos() as u64;
        let (phase, into) = (since / len, since % len);
        let Some(&b) = TIMING_PHASES.get(phase as usize) else {
            continue;
        };
        if into < TIMING_SETTLE.as_nanos() as u64 {
            continue;
        }
        let gap_us = (w[1] - w[0]) as f64 / 1000.0;
        if b { &mut busy } else { &mut idle }.push(gap_us);
        if b { &mut busy_q } else { &mut idle_q }.push((gap_us / KS_RESOLUTION_US).round());
    }
    assert!(
        idle.len() > 200 && busy.len() > 200,
        "too few departures captured: {} idle, {} saturated",
        idle.len(),
        busy.len()
    );
    if let (Some(a), Some(b)) = (ticks0, thread_ticks(vm1.pid(), "psp-pacer")) {
        // USER_HZ is 100 on Linux.
        let cpu = (b - a) as f64 / 100.0 / wall0.elapsed().as_secs_f64();
        println!(
            "vm1's pacer thread used {:.1} % of a core (realtime: {})",
            cpu * 100.0,
            vm1.status_json()["pacer_realtime"]
        );
    }
    let d = ks_statistic(&idle_q, &busy_q);
    let crit = ks_critical(KS_ALPHA, idle.len(), busy.len());
    println!(
        "departures vm1->vm2, inter-departure times: idle n {} {}; saturated n {} {}; KS D = {d:.4} at {KS_RESOLUTION_US} µs ({:.4} unrounded), critical {crit:.4} (alpha {KS_ALPHA})",
        idle.len(),
        percentiles(&idle),
        busy.len(),
        percentiles(&busy),
        ks_statistic(&idle, &busy)
    );
    (d, crit)
}

/// The rate does change when the path does: a 2 Mbit/s bottleneck towards vm2 makes vm2's
/// controller see loss and vm1 slow down below it.
fn path_change(tb: &Testbed, vm1: &common::Gateway) {
    let lan = tb.ns("lan");
    let tbf = [
        "tc", "qdisc", "add", "dev", "vm2", "root", "tbf", "rate", "2mbit", "burst", "3028",
        "limit", "30280",
    ];
    let out = tb.ns_exec("lan", &tbf);
    assert!(
        out.status.success(),
        "tc in {lan}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let path = "peer:vm2.normalize.s_current_kbps";
    let deadline = Instant::now() + Duration::from_secs(8);
    let rate = loop {
        let s = vm1.status_json();
        let r = counter(&s, path);
        if r < 2000 || Instant::now() > deadline {
            break r;
        }
        sleep(Duration::from_millis(100));
    };
    let _ = tb.ns_exec("lan", &["tc", "qdisc", "del", "dev", "vm2", "root"]);
    println!(
        "bottleneck 2 Mbit/s towards vm2: vm1's S_current fell from {S_GOAL_KBPS} to {rate} kbit/s"
    );
    assert!(
        rate < 2000,
        "vm1 kept sending at {rate} kbit/s into a 2 Mbit/s bottleneck"
    );
}

/// SIGHUP with a new S_goal: vm1's endpoint is rebuilt (its sealer carried over, so vm2's replay
/// window keeps accepting) and the tunnel keeps working at the new rate.
fn reload_keeps_the_tunnel(tb: &Testbed, vm1: &common::Gateway, vm2: &common::Gateway) {
    let path = tb.config_path(1);
    let text = std::fs::read_to_string(&path).expect("vm1 config");
    let new = text.replace(
        &format!("s_goal_kbps = {S_GOAL_KBPS}"),
        "s_goal_kbps = 3000",
    );
    assert_ne!(text, new, "vm1's config sets s_goal_kbps");
    std::fs::write(&path, new).expect("rewrite vm1 config");
    vm1.reload();
    let deadline = Instant::now() + Duration::from_secs(10);
    while counter(&vm1.status_json(), "peer:vm2.normalize.s_current_kbps") != 3000 {
        assert!(
            Instant::now() < deadline,
            "vm1 did not apply S_goal 3000 after SIGHUP: {}\n{}",
            vm1.status_json(),
            vm1.log()
        );
        sleep(Duration::from_millis(100));
    }
    assert_eq!(tb.ping(1, 2, 3).received, 3, "ping after the reload");
    let s = vm2.status_json();
    assert_eq!(counter(&s, "peer:vm1.drops_total"), 0, "{s}");
    println!("after SIGHUP: S_goal 3000, ping ok, vm2 dropped none of vm1's frames");
}

#[test]
fn root_insider_cannot_signal_through_a_normalized_tunnel() {
    // With sessions rekeyed every 2 s: the handshakes ride inside the streams, and every
    // measurement below runs across several rekeys.
    let tb = Testbed::up(TestbedOptions {
        suite: "aes128-gcm".into(),
        config_extra: format!("[normalize]\nenabled = true\ns_goal_kbps = {S_GOAL_KBPS}\n"),
        session: true,
        session_extra: "rekey_after_s = 2".into(),
        ..TestbedOptions::default()
    });
    let vm1 = tb.start(1);
    let vm2 = tb.start(2);
    tb.ping_until_up(1, 2, Duration::from_secs(10));
    // The gateway started first saw the other's first frames as a loss burst and lowered its
    // suggestion; wait for both directions to climb back to S_goal (S_step per round).
    let deadline = Instant::now() + Duration::from_secs(15);
    for gw in [&vm1, &vm2] {
        let peer = if gw.host() == 1 { "vm2" } else { "vm1" };
        let path = format!("peer:{peer}.normalize.s_current_kbps");
        while counter(&gw.status_json(), &path) != S_GOAL_KBPS {
            assert!(
                Instant::now() < deadline,
                "vm{}: {path} never reached S_goal",
                gw.host()
            );
            sleep(Duration::from_millis(100));
        }
    }
    println!("{}", vm1.status_table());
    run(&tb, Mode::OnOff, &vm1);
    run(&tb, Mode::Sizes, &vm1);
    departure_timing(&tb, &vm1);
    path_change(&tb, &vm1);
    reload_keeps_the_tunnel(&tb, &vm1, &vm2);
    println!("{}", vm1.status_table());
    let s = vm1.status_json();
    let rekeys = counter(&s, "peer:vm2.session.rekeys");
    assert!(rekeys >= 10, "only {rekeys} rekeys while measuring: {s}");
    println!("rekeys during the measurements: {rekeys}");
}
