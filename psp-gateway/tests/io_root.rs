//! Root-only tests of the OS I/O layer: TAP, AF_PACKET and UDP uplinks, sd_notify and the
//! privilege drop. Each network test runs in a fresh, uniquely named namespace (`ip netns
//! add`, entered by a dedicated thread with `setns`) removed by a Drop guard. CI runs these
//! as root; they fail loudly, never skip, when they cannot set up.
//!
//! `bench_raw_veth` (ignored) is the ad-hoc AF_PACKET measurement behind BENCHMARKS.md:
//! `cargo test --release -p psp-gateway --test io_root -- --ignored --nocapture bench_raw_veth`.
//! The `child_*` tests are ignored too: each runs only in the process its parent test starts
//! (`run_child`), so a normal run lists them as ignored instead of passing them unchecked.

use core::future::Future;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use core::time::Duration;
use std::io;
use std::os::fd::AsFd;
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::{SocketAddr as UnixAddr, UnixDatagram};
use std::process::Command;
use std::time::Instant;

use psp_gateway::io::raw_eth::RawSocket;
use psp_gateway::io::sys::{self, PacketSocket};
use psp_gateway::io::tap::Tap;
use psp_gateway::io::udp::UdpLink;
use psp_gateway::io::{Batch, SLOT_LEN, notify};

/// Environment variable that turns a `child_*` test on in a re-executed test binary.
const CHILD_ENV: &str = "PSP_IO_ROOT_CHILD";

/// Per-process counter for unique namespace names.
static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// A fresh network namespace, deleted on drop (also when the test panics).
struct Netns {
    name: String,
}

impl Netns {
    fn new() -> Self {
        let name = format!(
            "pspio{}_{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::SeqCst)
        );
        run("ip", &["netns", "add", &name]);
        let ns = Self { name };
        ns.ip(&["link", "set", "lo", "up"]);
        ns
    }

    /// `ip -n NAME ARGS…`; panics with its stderr on failure.
    fn ip(&self, args: &[&str]) -> String {
        let mut all = vec!["-n", &self.name];
        all.extend_from_slice(args);
        run("ip", &all)
    }

    /// `ip -j link show dev IF` in this namespace, parsed.
    fn link(&self, dev: &str) -> serde_json::Value {
        let out = self.ip(&["-j", "link", "show", "dev", dev]);
        let v: serde_json::Value = serde_json::from_str(&out).expect("ip -j output is JSON");
        v[0].clone()
    }

    /// Creates the veth pair `pva`/`pvb` with `mtu`, brings it up and waits until both ends
    /// can send.
    fn veth_pair(&self, mtu: &str) {
        self.ip(&["link", "add", "pva", "type", "veth", "peer", "name", "pvb"]);
        for dev in ["pva", "pvb"] {
            self.ip(&["link", "set", dev, "mtu", mtu]);
            self.ip(&["link", "set", dev, "up"]);
        }
        self.wait_ready("pva");
        self.wait_ready("pvb");
    }

    /// Waits (up to 5 s) until `dev` is operationally up with a real qdisc: the kernel
    /// activates a device asynchronously (linkwatch) once its carrier is on, and until then
    /// its `noop` qdisc silently drops what is sent.
    fn wait_ready(&self, dev: &str) {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let link = self.link(dev);
            let up = link["operstate"] == "UP" || link["operstate"] == "UNKNOWN";
            if up && link["qdisc"] != "noop" {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{dev} never became ready: {link}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Runs `f` to completion on a current-thread tokio runtime in a thread that has entered
    /// this namespace (sockets and TAPs it creates live there).
    fn block_on<F, Fut, R>(&self, f: F) -> R
    where
        F: FnOnce() -> Fut + Send,
        Fut: Future<Output = R>,
        R: Send,
    {
        std::thread::scope(|s| {
            let h = s.spawn(|| {
                sys::enter_netns(&self.name).expect("setns into the test namespace");
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("tokio runtime");
                rt.block_on(f())
            });
            match h.join() {
                Ok(r) => r,
                Err(panic) => std::panic::resume_unwind(panic),
            }
        })
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let out = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
        if !matches!(&out, Ok(o) if o.status.success()) {
            eprintln!("warning: could not delete namespace {}: {out:?}", self.name);
        }
    }
}

/// Runs a command; panics with its output when it cannot run or fails.
fn run(cmd: &str, args: &[&str]) -> String {
    let out = Command::new(cmd).args(args).output().unwrap_or_else(|e| {
        panic!("cannot run {cmd} {args:?}: {e} (these tests need root and iproute2)")
    });
    assert!(
        out.status.success(),
        "{cmd} {args:?} failed ({}): {} (these tests need root)",
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// An Ethernet frame of `len` bytes: `dst`, `src`, `ethertype`, then a pattern seeded by `tag`.
fn frame(dst: [u8; 6], src: [u8; 6], ethertype: u16, tag: u32, len: usize) -> Vec<u8> {
    let mut f = Vec::with_capacity(len);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(&tag.to_be_bytes());
    let mut x = tag.wrapping_mul(2_654_435_761).wrapping_add(1);
    while f.len() < len {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        f.push(x as u8);
    }
    f.truncate(len);
    f
}

/// A batch holding `frames`, each with address `addr`.
fn batch_of(frames: &[Vec<u8>], addr: Option<SocketAddr>) -> Batch {
    let mut b = Batch::new(frames.len());
    for f in frames {
        assert!(b.push_with(addr, |slot| {
            slot[..f.len()].copy_from_slice(f);
            Some(f.len())
        }));
    }
    b
}

/// Frames of a received batch, with addresses.
fn contents(b: &Batch) -> Vec<(Vec<u8>, Option<SocketAddr>)> {
    (0..b.len())
        .map(|i| (b.frame(i).to_vec(), b.addr(i)))
        .collect()
}

/// Receives with `$recv` (which fills `$batch`) until `$want` frames passing `$keep`
/// arrived (2 s budget); evaluates to them with their addresses.
macro_rules! collect {
    ($want:expr, $batch:ident, $recv:expr) => {
        collect!($want, $batch, $recv, |_: &[u8]| true)
    };
    ($want:expr, $batch:ident, $recv:expr, $keep:expr) => {{
        let mut got: Vec<(Vec<u8>, Option<SocketAddr>)> = Vec::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
        while got.len() < $want {
            match tokio::time::timeout_at(deadline, $recv).await {
                Ok(r) => {
                    let n = r.expect("recv_batch");
                    assert!(n >= 1 && n == $batch.len());
                    got.extend(contents(&$batch).into_iter().filter(|(f, _)| $keep(f)));
                }
                Err(_) => panic!("timed out with {} of {} frames", got.len(), $want),
            }
        }
        got
    }};
}

/// The frames of `got`, without addresses.
fn frames_of(got: &[(Vec<u8>, Option<SocketAddr>)]) -> Vec<Vec<u8>> {
    got.iter().map(|g| g.0.clone()).collect()
}

const MAC_A: [u8; 6] = [0x02, 0x50, 0x53, 0x50, 0x00, 0x0a];
const MAC_B: [u8; 6] = [0x02, 0x50, 0x53, 0x50, 0x00, 0x0b];
const PSP: u16 = 0x1982;

#[test]
fn root_tap_configure_and_exchange_frames() {
    let ns = Netns::new();
    ns.block_on(|| async {
        let tap = Tap::open("psptap0").expect("open TAP");
        assert_eq!(tap.name(), "psptap0");
        tap.set_mtu(1400).unwrap();
        tap.set_mac(MAC_A).unwrap();
        tap.set_up().unwrap();
        assert_eq!(tap.mac().unwrap(), MAC_A);
        assert_eq!(tap.mtu().unwrap(), 1400);
        assert!(
            tap.set_mtu(SLOT_LEN).is_err(),
            "an MTU beyond a batch slot is refused"
        );

        ns.wait_ready("psptap0");
        let link = ns.link("psptap0");
        assert_eq!(link["mtu"], 1400, "{link}");
        assert_eq!(link["address"], "02:50:53:50:00:0a", "{link}");
        let flags = link["flags"].as_array().expect("flags");
        assert!(flags.iter().any(|f| f == "UP"), "{link}");

        // TAP -> kernel: frames written to the TAP arrive at a packet socket on it.
        let raw = RawSocket::open("psptap0").expect("packet socket on the TAP");
        let into_kernel: Vec<_> = (0..16)
            .map(|i| frame([0xff; 6], MAC_B, PSP, i, 60 + 80 * i as usize))
            .collect();
        for f in &into_kernel {
            tap.send(f).await.unwrap();
        }
        let mut rb = Batch::new(64);
        let got = collect!(16, rb, raw.recv_batch(&mut rb));
        assert_eq!(frames_of(&got), into_kernel);

        // Kernel -> TAP: frames sent on the TAP interface come out of the TAP fd, in a batch.
        // (The kernel also sends IPv6 router solicitations and the like; skip those.)
        let out_of_kernel: Vec<_> = (0..16)
            .map(|i| frame(MAC_B, MAC_A, PSP, 100 + i, 1414 - 50 * i as usize))
            .collect();
        assert_eq!(
            raw.send_batch(&batch_of(&out_of_kernel, None))
                .await
                .unwrap(),
            16
        );
        let mut tb = Batch::new(64);
        let is_psp = |f: &[u8]| f[12..14] == PSP.to_be_bytes();
        let got = collect!(16, tb, tap.recv_batch(&mut tb), is_psp);
        assert_eq!(frames_of(&got), out_of_kernel);
        assert!(got.iter().all(|g| g.1.is_none()));
    });
    // The TAP is gone with its descriptor.
    let out = Command::new("ip")
        .args(["-n", &ns.name, "link", "show", "psptap0"])
        .output()
        .unwrap();
    assert!(!out.status.success(), "TAP still exists after drop");
}

#[test]
fn handles_are_send_and_sync() {
    // The TAP and the uplink are read by one task and written by another.
    fn check<T: Send + Sync>() {}
    check::<Tap>();
    check::<RawSocket>();
    check::<UdpLink>();
    check::<psp_gateway::io::Uplink>();
}

#[test]
fn root_tap_refuses_bad_names() {
    let ns = Netns::new();
    ns.block_on(|| async {
        assert!(Tap::open("a-name-longer-than-15").is_err());
        assert!(Tap::open("bad/name").is_err());
        let auto = Tap::open("psp%d").unwrap();
        assert_eq!(auto.name(), "psp0");
        let auto = Tap::open("").unwrap();
        assert!(auto.name().starts_with("tap"), "{}", auto.name());
    });
}

#[test]
fn root_raw_veth_exchange() {
    let ns = Netns::new();
    ns.veth_pair("1500");
    ns.block_on(|| async {
        let a = RawSocket::open("pva").expect("packet socket on pva");
        let b = RawSocket::open("pvb").expect("packet socket on pvb");
        assert_eq!(a.interface(), "pva");
        assert_eq!(a.mtu().unwrap(), 1500);
        assert!(RawSocket::open("nosuchif0").is_err());

        let a_to_b: Vec<_> = (0..64)
            .map(|i| frame(MAC_B, MAC_A, PSP, i, 60 + 23 * i as usize))
            .collect();
        let b_to_a: Vec<_> = (0..64)
            .map(|i| frame(MAC_A, MAC_B, PSP, 1000 + i, 1514 - 19 * i as usize))
            .collect();
        let (mut ra, mut rb) = (Batch::new(64), Batch::new(64));

        assert_eq!(a.send_batch(&batch_of(&a_to_b, None)).await.unwrap(), 64);
        let got = collect!(64, rb, b.recv_batch(&mut rb));
        assert_eq!(frames_of(&got), a_to_b);

        assert_eq!(b.send_batch(&batch_of(&b_to_a, None)).await.unwrap(), 64);
        let got = collect!(64, ra, a.recv_batch(&mut ra));
        assert_eq!(frames_of(&got), b_to_a);
        let bytes = |v: &[Vec<u8>]| v.iter().map(Vec::len).sum::<usize>();
        assert_eq!(bytes(&a_to_b), (0..64).map(|i| 60 + 23 * i).sum::<usize>());
        assert_eq!(
            bytes(&b_to_a),
            (0..64).map(|i| 1514 - 19 * i).sum::<usize>()
        );

        // Neither socket sees its own frames: nothing more is queued on either.
        for (s, r) in [(&a, &mut ra), (&b, &mut rb)] {
            let more = tokio::time::timeout(Duration::from_millis(200), s.recv_batch(r)).await;
            assert!(
                more.is_err(),
                "{} received extra frames: {:?}",
                s.interface(),
                r.len()
            );
        }

        // Other EtherTypes do not reach a PSP socket.
        let arp = RawSocket::open_ethertype("pva", 0x0806).unwrap();
        let noise = [frame(MAC_B, MAC_A, 0x0806, 7, 60)];
        assert_eq!(arp.send_batch(&batch_of(&noise, None)).await.unwrap(), 1);
        let more = tokio::time::timeout(Duration::from_millis(100), b.recv_batch(&mut rb)).await;
        assert!(more.is_err(), "a PSP socket received an ARP frame");

        // An oversized frame is dropped alone; the rest of the batch goes out.
        ns.ip(&["link", "set", "pva", "mtu", "1400"]);
        assert_eq!(a.mtu().unwrap(), 1400);
        let mixed = [
            frame(MAC_B, MAC_A, PSP, 1, 100),
            frame(MAC_B, MAC_A, PSP, 2, 1400 + 14 + 100),
            frame(MAC_B, MAC_A, PSP, 3, 1400 + 14),
        ];
        assert_eq!(a.send_batch(&batch_of(&mixed, None)).await.unwrap(), 2);
        let got = collect!(2, rb, b.recv_batch(&mut rb));
        assert_eq!(frames_of(&got), [mixed[0].clone(), mixed[2].clone()]);
    });
}

/// The raw uplink can receive through a PACKET_MMAP ring on this kernel, and a ring still reports
/// the interface going down as an error (the daemon's receive task ends on it), instead of
/// waiting forever.
#[test]
fn root_raw_ring_and_interface_down() {
    let ns = Netns::new();
    ns.veth_pair("1500");
    ns.block_on(|| async {
        let a = RawSocket::open("pva").unwrap();
        let b = RawSocket::open_with_rx_ring("pvb").unwrap();
        assert!(b.has_rx_ring(), "no PACKET_MMAP ring on this kernel");
        let frames: Vec<_> = (0..200)
            .map(|i| frame(MAC_B, MAC_A, PSP, i, 60 + 7 * i as usize))
            .collect();
        for chunk in frames.chunks(64) {
            assert_eq!(
                a.send_batch(&batch_of(chunk, None)).await.unwrap(),
                chunk.len()
            );
        }
        let mut rb = Batch::new(64);
        let got = collect!(200, rb, b.recv_batch(&mut rb));
        assert_eq!(frames_of(&got), frames);
        ns.ip(&["link", "set", "pvb", "down"]);
        let r = tokio::time::timeout(Duration::from_secs(2), b.recv_batch(&mut rb)).await;
        let err = r.expect("recv_batch hung after the interface went down");
        assert_eq!(
            err.expect_err("a frame after the interface went down")
                .raw_os_error(),
            Some(libc::ENETDOWN)
        );
    });
}

#[test]
fn root_raw_drops_truncated_and_own_frames() {
    let ns = Netns::new();
    ns.veth_pair("10000");
    ns.block_on(|| async {
        let b = RawSocket::open("pvb").unwrap();
        // A plain bound packet socket on pva: it sees its own frames (no
        // PACKET_IGNORE_OUTGOING), and `write` sends frames longer than a batch slot.
        let raw = PacketSocket::open("pva", PSP).unwrap();

        // A frame longer than a slot is dropped on receive; the frames after it move down.
        let frames = [
            frame(MAC_B, MAC_A, PSP, 1, 100),
            frame(MAC_B, MAC_A, PSP, 2, SLOT_LEN + 500),
            frame(MAC_B, MAC_A, PSP, 3, 200),
            frame(MAC_B, MAC_A, PSP, 4, SLOT_LEN),
        ];
        for f in &frames {
            assert_eq!(raw.send(f).unwrap(), f.len());
        }
        let mut rb = Batch::new(8);
        let got = collect!(3, rb, b.recv_batch(&mut rb));
        assert_eq!(
            frames_of(&got),
            [frames[0].clone(), frames[2].clone(), frames[3].clone()]
        );

        // A socket bound to one EtherType never sees outgoing frames (only ETH_P_ALL taps
        // do), and the kernel never loops a socket's own frames back to it. An ETH_P_ALL
        // socket sees what others send: RecvMode::PacketSkipOutgoing (the fallback where
        // PACKET_IGNORE_OUTGOING is missing, kernels before 4.20) drops those.
        let a = RawSocket::open("pva").unwrap();
        let tap_all = PacketSocket::open("pva", 0x0003).unwrap();
        let drain = |mode| {
            let mut all = Vec::new();
            let mut own = Batch::new(8);
            loop {
                match sys::recv_mmsg(tap_all.as_fd(), &mut own, mode) {
                    Ok(_) => all.extend(contents(&own).into_iter().map(|c| c.0)),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return all,
                    Err(e) => panic!("{e}"),
                }
                own.clear();
            }
        };
        let is_psp = |f: &Vec<u8>| f[12..14] == PSP.to_be_bytes();
        drain(sys::RecvMode::Plain);
        assert_eq!(
            a.send_batch(&batch_of(&frames[2..], None)).await.unwrap(),
            2
        );
        assert!(
            !drain(sys::RecvMode::PacketSkipOutgoing).iter().any(is_psp),
            "outgoing kept"
        );
        assert_eq!(
            a.send_batch(&batch_of(&frames[..1], None)).await.unwrap(),
            1
        );
        let seen: Vec<_> = drain(sys::RecvMode::Plain)
            .into_iter()
            .filter(is_psp)
            .collect();
        assert_eq!(seen, [frames[0].clone()]);
        let got = collect!(3, rb, b.recv_batch(&mut rb));
        assert_eq!(
            frames_of(&got),
            [frames[2].clone(), frames[3].clone(), frames[0].clone()]
        );
    });
}

/// Sends `frames` from `tx` to `rx` and checks they arrive whole, from `tx`'s address.
async fn udp_exchange(tx: &UdpLink, rx: &UdpLink, to: SocketAddr, from: SocketAddr, tag: u32) {
    let frames: Vec<_> = (0..64)
        .map(|i| frame(MAC_B, MAC_A, PSP, tag + i, 60 + 29 * i as usize))
        .collect();
    assert_eq!(
        tx.send_batch(&batch_of(&frames, Some(to))).await.unwrap(),
        64
    );
    let mut rb = Batch::new(64);
    let got = collect!(64, rb, rx.recv_batch(&mut rb));
    assert_eq!(frames_of(&got), frames);
    assert!(
        got.iter().all(|g| g.1 == Some(from)),
        "sources {:?}, want {from}",
        got[0].1
    );
}

#[test]
fn root_udp_exchange_and_mtu() {
    let ns = Netns::new();
    // The IPv4 uplink must not need IPv6 (hosts with IPv6 disabled).
    run(
        "ip",
        &[
            "netns",
            "exec",
            &ns.name,
            "sysctl",
            "-qw",
            "net.ipv6.conf.all.disable_ipv6=1",
            "net.ipv6.conf.default.disable_ipv6=1",
            "net.ipv6.conf.lo.disable_ipv6=1",
        ],
    );
    assert_eq!(
        ns.ip(&["-6", "addr"]).trim(),
        "",
        "IPv6 still has addresses"
    );
    ns.block_on(|| async {
        let lo4 = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0);
        let a = UdpLink::bind(lo4).expect("bind a");
        let b = UdpLink::bind(lo4).expect("bind b");
        assert_ne!(a.local_addr().port(), 0);
        udp_exchange(&a, &b, b.local_addr(), a.local_addr(), 0).await;
        udp_exchange(&b, &a, a.local_addr(), b.local_addr(), 100).await;

        // Loopback's MTU minus IPv4 and UDP headers, bound to 127.0.0.1 or to 0.0.0.0 (the
        // namespace has nothing but lo), and by route.
        assert_eq!(a.mtu().unwrap(), 65536 - 28);
        let any = UdpLink::bind(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0)).unwrap();
        assert_eq!(any.mtu().unwrap(), 65536 - 28);
        // The route's MTU is capped at the largest IPv4 packet, 65535 bytes.
        assert_eq!(a.path_mtu(b.local_addr()).unwrap(), 65535 - 28);

        // Frames without an address are skipped, the others sent.
        let frames = [
            frame(MAC_B, MAC_A, PSP, 1, 80),
            frame(MAC_B, MAC_A, PSP, 2, 90),
        ];
        let mut batch = batch_of(&frames, Some(b.local_addr()));
        batch.set_addr(0, None);
        assert_eq!(a.send_batch(&batch).await.unwrap(), 1);
        let mut rb = Batch::new(8);
        b.recv_batch(&mut rb).await.unwrap();
        assert_eq!(contents(&rb), [(frames[1].clone(), Some(a.local_addr()))]);

        // An IPv6 destination cannot leave an IPv4 socket: dropped, not an error.
        let v6dst = SocketAddr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), 9);
        assert_eq!(
            a.send_batch(&batch_of(&frames, Some(v6dst))).await.unwrap(),
            0
        );
    });
}

/// GSO and GRO: runs of equal-length frames to one address leave as one segmented send and
/// arrive coalesced; whatever the mix, every frame arrives once, whole, in order, from the
/// sender's address.
#[test]
fn root_udp_gso_and_gro() {
    let ns = Netns::new();
    ns.block_on(|| async {
        let lo4 = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0);
        let a = UdpLink::bind(lo4).expect("bind a");
        let b = UdpLink::bind(lo4).expect("bind b");
        let c = UdpLink::bind(lo4).expect("bind c");
        if a.gso_segments() < 2 || b.gro_segments() < 2 {
            eprintln!(
                "SKIP GSO/GRO checks: this kernel offers {} GSO segments and {} GRO segments",
                a.gso_segments(),
                b.gro_segments()
            );
        }
        // 30 of 1400 bytes, a 700-byte tail, 5 of mixed sizes, 20 of 1000 bytes to c, 8 of
        // 1400 to b again.
        let mut frames: Vec<(Vec<u8>, SocketAddr)> = Vec::new();
        let mut tag = 0;
        let mut add = |n: usize, len: usize, to: SocketAddr| {
            for _ in 0..n {
                frames.push((frame(MAC_B, MAC_A, PSP, tag, len), to));
                tag += 1;
            }
        };
        add(30, 1400, b.local_addr());
        add(1, 700, b.local_addr());
        for len in [100, 1400, 90, 1400, 1200] {
            add(1, len, b.local_addr());
        }
        add(20, 1000, c.local_addr());
        add(8, 1400, b.local_addr());
        let mut batch = Batch::new(64);
        for (f, to) in &frames {
            batch.push_with(Some(*to), |s| {
                s[..f.len()].copy_from_slice(f);
                Some(f.len())
            });
        }
        assert_eq!(a.send_batch(&batch).await.unwrap(), frames.len());
        let want = |to: SocketAddr| -> Vec<Vec<u8>> {
            frames
                .iter()
                .filter(|(_, t)| *t == to)
                .map(|(f, _)| f.clone())
                .collect()
        };
        for (rx, n) in [(&b, 44), (&c, 20)] {
            let mut rb = Batch::new(64);
            let got = collect!(n, rb, rx.recv_batch(&mut rb));
            assert_eq!(frames_of(&got), want(rx.local_addr()));
            assert!(got.iter().all(|g| g.1 == Some(a.local_addr())));
        }
        if a.gso_segments() >= 2 && b.gro_segments() >= 2 {
            assert!(
                b.coalesced_receives() >= 1 && c.coalesced_receives() >= 1,
                "no coalesced receive: GSO or GRO did not happen ({} and {})",
                b.coalesced_receives(),
                c.coalesced_receives()
            );
        }
        // A small receive batch takes part of a coalesced run; the rest comes next call.
        let run: Vec<Vec<u8>> = (0..40)
            .map(|i| frame(MAC_B, MAC_A, PSP, 500 + i, 1200))
            .collect();
        assert_eq!(
            a.send_batch(&batch_of(&run, Some(b.local_addr())))
                .await
                .unwrap(),
            40
        );
        let mut rb = Batch::new(7);
        let got = collect!(40, rb, b.recv_batch(&mut rb));
        assert_eq!(frames_of(&got), run);
    });
}

#[test]
fn root_udp_ipv6_and_dual_stack() {
    assert!(
        std::path::Path::new("/proc/net/if_inet6").exists(),
        "this kernel has no IPv6; the IPv6 uplink cannot be tested"
    );
    let ns = Netns::new();
    ns.block_on(|| async {
        let lo6 = SocketAddr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), 0);
        let a = UdpLink::bind(lo6).expect("bind [::1]");
        let b = UdpLink::bind(lo6).expect("bind [::1]");
        udp_exchange(&a, &b, b.local_addr(), a.local_addr(), 0).await;
        assert_eq!(a.mtu().unwrap(), 65536 - 48);
        assert_eq!(a.path_mtu(b.local_addr()).unwrap(), 65536 - 48);

        // A dual-stack [::] socket talks to an IPv4 one; peers show as plain IPv4.
        let dual = UdpLink::bind(SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 0)).unwrap();
        let v4 = UdpLink::bind(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0)).unwrap();
        let dual_at_v4 = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), dual.local_addr().port());
        udp_exchange(&v4, &dual, dual_at_v4, v4.local_addr(), 200).await;
        udp_exchange(&dual, &v4, v4.local_addr(), dual_at_v4, 300).await;
    });
}

#[test]
fn sd_notify_from_environment() {
    let name = format!("psp-io-root-notify-{}", std::process::id());
    let rx = UnixDatagram::bind_addr(
        &<UnixAddr as std::os::linux::net::SocketAddrExt>::from_abstract_name(name.as_bytes())
            .unwrap(),
    )
    .unwrap();
    rx.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    run_child("child_sd_notify", &[("NOTIFY_SOCKET", &format!("@{name}"))]);
    let mut buf = [0; 64];
    let n = rx.recv(&mut buf).expect("the child's notification");
    assert_eq!(&buf[..n], b"READY=1");
}

#[test]
#[ignore = "runs only in the child process its parent test starts"]
fn child_sd_notify() {
    if !in_child("child_sd_notify") {
        return;
    }
    notify::sd_notify("READY=1").unwrap();
}

#[test]
fn chown_path_to_nobody() {
    let path = std::env::temp_dir().join(format!("psp-io-root-chown-{}", std::process::id()));
    std::fs::write(&path, b"x").unwrap();
    let r = sys::chown_path(&path, "nobody");
    let meta = std::fs::metadata(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    r.unwrap();
    assert_eq!(
        (meta.uid(), meta.gid()),
        sys::lookup_user("nobody").unwrap()
    );
    assert!(sys::chown_path(&path, "no-such-user-psp").is_err());
}

/// `chown_path` never follows a link the daemon's user could have planted: a symbolic link or
/// a hard link to a root-owned file is refused, by name, and the file keeps its owner.
#[test]
fn chown_path_refuses_links_to_a_root_owned_file() {
    let dir = std::env::temp_dir().join(format!("psp-io-root-links-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir(&dir).unwrap();
    let target = dir.join("root-only");
    std::fs::write(&target, b"secret").unwrap();
    let (soft, hard) = (dir.join("soft"), dir.join("hard"));
    std::os::unix::fs::symlink(&target, &soft).unwrap();
    std::fs::hard_link(&target, &hard).unwrap();
    let by_soft = sys::chown_path(&soft, "nobody");
    let by_hard = sys::chown_path(&hard, "nobody");
    let meta = std::fs::metadata(&target).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!((meta.uid(), meta.gid()), (0, 0), "the target changed owner");
    let e = by_soft
        .expect_err("a symbolic link was followed")
        .to_string();
    assert!(e.contains("soft is a symbolic link"), "{e}");
    let e = by_hard.expect_err("a hard link was followed").to_string();
    assert!(e.contains("hard has 2 hard links"), "{e}");
}

#[test]
fn drop_privileges_keeps_open_sockets() {
    run_child("child_drop_privileges", &[]);
}

#[test]
#[ignore = "runs only in the child process its parent test starts"]
fn child_drop_privileges() {
    if !in_child("child_drop_privileges") {
        return;
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let lo4 = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0);
        let a = UdpLink::bind(lo4).unwrap();
        let b = UdpLink::bind(lo4).unwrap();
        assert_eq!(sys::current_uids(), (0, 0), "the child must start as root");

        sys::drop_privileges("nobody").expect("drop to nobody");

        let (uid, gid) = sys::lookup_user("nobody").unwrap();
        assert_eq!(sys::current_uids(), (uid, uid));
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = |k: &str| {
            status
                .lines()
                .find(|l| l.starts_with(k))
                .unwrap()
                .to_owned()
        };
        assert_eq!(
            line("Uid:").split_whitespace().skip(1).collect::<Vec<_>>(),
            [
                uid.to_string(),
                uid.to_string(),
                uid.to_string(),
                uid.to_string()
            ]
        );
        assert_eq!(
            line("Gid:").split_whitespace().skip(1).collect::<Vec<_>>(),
            [
                gid.to_string(),
                gid.to_string(),
                gid.to_string(),
                gid.to_string()
            ]
        );
        assert_eq!(line("Groups:").trim(), "Groups:");
        assert_eq!(
            line("CapEff:").split_whitespace().nth(1),
            Some("0000000000000000")
        );

        // Open descriptors keep working; nothing privileged can be opened any more.
        udp_exchange(&a, &b, b.local_addr(), a.local_addr(), 0).await;
        let err = PacketSocket::open_index(1, PSP).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::PermissionDenied, "{err}");
        assert!(sys::drop_privileges("root").is_err());
    });
}

/// Whether this process is the child [`run_child`] started for the test `name`. The `child_*`
/// tests are `#[ignore]`d, so a normal run lists them as ignored rather than counting a test
/// that checked nothing as passed; their parent runs them with `--ignored`. Run by hand with
/// `--ignored` (the benchmarks, say), they return at once: outside their parent they have no
/// set-up to check.
fn in_child(name: &str) -> bool {
    std::env::var(CHILD_ENV).as_deref() == Ok(name)
}

/// Re-runs this test binary for the single ignored test `name` with `CHILD_ENV=name` and
/// `env`, and checks that it ran and passed (a process of its own: a privilege drop or
/// environment change must not touch the other tests).
fn run_child(name: &str, env: &[(&str, &str)]) {
    let exe = std::env::current_exe().unwrap();
    let out = Command::new(exe)
        .args([
            name,
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, name)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "child {name} failed:\n{text}");
    assert!(
        text.contains("test result: ok. 1 passed"),
        "child {name} ran no test:\n{text}"
    );
}

/// Ad-hoc measurement (not in CI): raw AF_PACKET frames/s across a veth pair, batches of 64
/// against batches of 1 (one frame per syscall, as pnet's datalink does), with
/// PACKET_QDISC_BYPASS off and on. Sender and receiver run on their own threads.
#[test]
#[ignore = "benchmark: run with --release --ignored --nocapture"]
fn bench_raw_veth() {
    let secs: f64 = std::env::var("PSP_BENCH_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2.0);
    let ns = Netns::new();
    ns.veth_pair("1500");
    // Wall-clock rates suffer when other work shares the CPUs; the CPU time each thread
    // spends per frame (from /proc/thread-self/schedstat) does much less.
    println!(
        "frame_len batch bypass   sent_fps   recv_fps recv_gbps  tx_ns/frame rx_ns/frame rx_frames/call"
    );
    for len in [1514usize, 128] {
        for batch in [64usize, 1] {
            for bypass in [false, true] {
                let r = bench_one(&ns, len, batch, bypass, secs);
                println!(
                    "{len:>9} {batch:>5} {bypass:>6} {:>10.0} {:>10.0} {:>9.2} {:>12.0} {:>11.0} {:>14.1}",
                    r.sent_fps,
                    r.recv_fps,
                    r.recv_fps * len as f64 * 8.0 / 1e9,
                    r.tx_ns_per_frame,
                    r.rx_ns_per_frame,
                    r.rx_frames_per_call,
                );
            }
        }
    }
}

/// The benchmarks' rounds (`PSP_BENCH_ROUNDS`, default 100) and a namespace with the veth
/// pair `pva`/`pvb` at MTU 1500.
fn bench_setup() -> (usize, Netns) {
    let rounds = std::env::var("PSP_BENCH_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100);
    let ns = Netns::new();
    ns.veth_pair("1500");
    (rounds, ns)
}

/// Ad-hoc measurement (not in CI): CPU cost per frame of raw `send_batch` and `recv_batch`
/// alone, batches of 64 against batches of 1, on one thread: send 1 920 frames across the
/// veth pair (the kernel delivers them to the peer's socket queue within the send), then
/// drain them.
#[test]
#[ignore = "benchmark: run with --release --ignored --nocapture"]
fn bench_raw_costs() {
    const ROUND: usize = 1920;
    let (rounds, ns) = bench_setup();
    println!("frame_len batch bypass  send_ns/frame recv_ns/frame  lost");
    for len in [1514usize, 128] {
        for (batch, bypass) in [(64usize, false), (64, true), (1, false), (1, true)] {
            let (send, recv, lost) = ns.block_on(|| async {
                let a = RawSocket::open("pva").unwrap();
                a.set_qdisc_bypass(bypass).unwrap();
                let b = RawSocket::open("pvb").unwrap();
                let frames: Vec<_> = (0..batch)
                    .map(|i| frame(MAC_B, MAC_A, PSP, i as u32, len))
                    .collect();
                let tb = batch_of(&frames, None);
                let mut rb = Batch::new(batch);
                let (mut send_ns, mut recv_ns, mut got_all) = (0, 0, 0);
                for _ in 0..rounds {
                    let t0 = thread_cpu_ns();
                    for _ in 0..ROUND / batch {
                        a.send_batch(&tb).await.unwrap();
                    }
                    let t1 = thread_cpu_ns();
                    let mut got = 0;
                    while got < ROUND {
                        let r =
                            tokio::time::timeout(Duration::from_millis(20), b.recv_batch(&mut rb));
                        match r.await {
                            Ok(n) => got += n.unwrap(),
                            Err(_) => break,
                        }
                    }
                    let t2 = thread_cpu_ns();
                    send_ns += t1 - t0;
                    recv_ns += t2 - t1;
                    got_all += got;
                }
                let n = (rounds * ROUND) as f64;
                (
                    send_ns as f64 / n,
                    recv_ns as f64 / got_all.max(1) as f64,
                    rounds * ROUND - got_all,
                )
            });
            println!("{len:>9} {batch:>5} {bypass:>6} {send:>14.0} {recv:>13.0} {lost:>5}");
        }
    }
}

/// Ad-hoc measurement (not in CI; PACKET_MMAP): CPU cost per received frame of the
/// raw uplink's `recvmmsg` (64 per call) against a TPACKET_V2 receive ring (`sys::RxRing`),
/// both copying into a batch as the daemon needs: send 1 920 frames across the veth pair, then
/// drain them, on one thread.
#[test]
#[ignore = "benchmark: run with --release --ignored --nocapture"]
fn bench_rx_ring() {
    const ROUND: usize = 1920;
    let (rounds, ns) = bench_setup();
    // The kernel fills the ring (or queues on the socket) inside the sender's call: with the
    // ring, the copy into user memory moves from the receive to the send column, so compare
    // the sums.
    println!("frame_len method    send_ns/frame recv_ns/frame sum_ns/frame  lost");
    for len in [1514usize, 128] {
        for ring in [false, true, false, true] {
            let (send, recv, lost) = ns.block_on(|| async {
                let a = RawSocket::open("pva").unwrap();
                let b = PacketSocket::open("pvb", PSP).unwrap();
                b.set_buffer_sizes(16 << 20);
                let mut rx = ring.then(|| sys::RxRing::new(b.as_fd(), 2 * ROUND).unwrap());
                let frames: Vec<_> = (0..64)
                    .map(|i| frame(MAC_B, MAC_A, PSP, i as u32, len))
                    .collect();
                let tb = batch_of(&frames, None);
                let mut rb = Batch::new(64);
                let (mut recv_ns, mut send_ns, mut got_all) = (0u64, 0u64, 0usize);
                for _ in 0..rounds {
                    let t0 = thread_cpu_ns();
                    for _ in 0..ROUND / 64 {
                        a.send_batch(&tb).await.unwrap();
                    }
                    let t1 = thread_cpu_ns();
                    send_ns += t1 - t0;
                    let mut got = 0;
                    let mut idle = 0;
                    while got < ROUND && idle < 1000 {
                        rb.clear();
                        let n = match rx.as_mut() {
                            Some(r) => r.drain(&mut rb),
                            None => sys::recv_mmsg(b.as_fd(), &mut rb, sys::RecvMode::Plain)
                                .map_or(0, |(n, _)| n),
                        };
                        if n == 0 {
                            idle += 1;
                        }
                        got += n;
                    }
                    recv_ns += thread_cpu_ns() - t1;
                    got_all += got;
                }
                (
                    send_ns as f64 / (rounds * ROUND) as f64,
                    recv_ns as f64 / got_all.max(1) as f64,
                    rounds * ROUND - got_all,
                )
            });
            let method = if ring { "rx-ring" } else { "recvmmsg" };
            println!(
                "{len:>9} {method:<9} {send:>13.0} {recv:>13.0} {:>13.0} {lost:>5}",
                send + recv
            );
        }
    }
}

/// Figures of one [`bench_raw_veth`] run.
struct BenchResult {
    sent_fps: f64,
    recv_fps: f64,
    tx_ns_per_frame: f64,
    rx_ns_per_frame: f64,
    rx_frames_per_call: f64,
}

/// CPU time of the calling thread so far, in ns.
fn thread_cpu_ns() -> u64 {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").expect("schedstat");
    s.split_whitespace()
        .next()
        .and_then(|v| v.parse().ok())
        .expect("schedstat runtime")
}

/// A thread's (CPU ns, frames) at the start and end of the measured window.
#[derive(Default)]
struct Window {
    start: Option<(u64, u64)>,
    end: Option<(u64, u64)>,
    /// Receive calls in the window (receiver only).
    calls: u64,
}

impl Window {
    /// Records the thread's position when `phase` (0 settle, 1 measure, 2 done) moves on.
    fn observe(&mut self, phase: usize, frames: u64) {
        if phase >= 1 && self.start.is_none() {
            self.start = Some((thread_cpu_ns(), frames));
        }
        if phase >= 2 && self.end.is_none() {
            self.end = Some((thread_cpu_ns(), frames));
        }
    }

    /// CPU ns per frame over the window.
    fn ns_per_frame(&self) -> f64 {
        let ((c0, f0), (c1, f1)) = (self.start.unwrap(), self.end.unwrap());
        (c1 - c0) as f64 / (f1 - f0).max(1) as f64
    }
}

/// One run of [`bench_raw_veth`].
fn bench_one(ns: &Netns, len: usize, batch: usize, bypass: bool, secs: f64) -> BenchResult {
    let phase = AtomicUsize::new(0);
    let rx_done = AtomicBool::new(false);
    let ready = std::sync::Barrier::new(3);
    std::thread::scope(|s| {
        let rx = s.spawn(|| {
            ns.block_on(|| async {
                let b = RawSocket::open("pvb").unwrap();
                let mut rb = Batch::new(batch);
                let (mut frames, mut calls, mut w) = (0u64, 0u64, Window::default());
                ready.wait();
                // No timer per call: the sender keeps sending after the window until we
                // are done.
                loop {
                    let p = phase.load(Ordering::SeqCst);
                    w.observe(p, frames);
                    if p >= 2 {
                        break;
                    }
                    frames += b.recv_batch(&mut rb).await.unwrap() as u64;
                    if w.start.is_some() {
                        calls += 1;
                    }
                }
                rx_done.store(true, Ordering::SeqCst);
                w.calls = calls;
                w
            })
        });
        let tx = s.spawn(|| {
            ns.block_on(|| async {
                let a = RawSocket::open("pva").unwrap();
                a.set_qdisc_bypass(bypass).unwrap();
                let frames: Vec<_> = (0..batch)
                    .map(|i| frame(MAC_B, MAC_A, PSP, i as u32, len))
                    .collect();
                let tb = batch_of(&frames, None);
                let (mut sent, mut w) = (0u64, Window::default());
                ready.wait();
                loop {
                    let p = phase.load(Ordering::Relaxed);
                    w.observe(p, sent);
                    if p >= 2 {
                        break;
                    }
                    sent += a.send_batch(&tb).await.unwrap() as u64;
                }
                while !rx_done.load(Ordering::SeqCst) {
                    a.send_batch(&tb).await.unwrap();
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                w
            })
        });
        ready.wait();
        // Let both sides settle, then measure over `secs`.
        std::thread::sleep(Duration::from_millis(200));
        phase.store(1, Ordering::SeqCst);
        std::thread::sleep(Duration::from_secs_f64(secs));
        phase.store(2, Ordering::SeqCst);
        let (tw, rw) = (tx.join().unwrap(), rx.join().unwrap());
        let frames = |w: &Window| (w.end.unwrap().1 - w.start.unwrap().1) as f64 / secs;
        BenchResult {
            sent_fps: frames(&tw),
            recv_fps: frames(&rw),
            tx_ns_per_frame: tw.ns_per_frame(),
            rx_ns_per_frame: rw.ns_per_frame(),
            rx_frames_per_call: frames(&rw) * secs / rw.calls.max(1) as f64,
        }
    })
}
