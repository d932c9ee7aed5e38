//! Shared harness for the root-only network tests (`attacks.rs`, `three_gateways.rs`, and the
//! daemon-operation tests): real `psp-gateway run` processes (the debug binary cargo built for
//! this test run) in network namespaces built by `testbed/lib.sh`, so the tests and
//! `testbed/demo.sh` share one topology:
//!
//! ```text
//!   vm1-SFX: psp0 10.77.0.1 02:50:53:00:00:01   vm2-SFX: psp0 10.77.0.2 ...:02   (vm3-SFX ...:03)
//!            up0 02:50:53:00:01:01                       up0 02:50:53:00:01:02
//!             \                                          /
//!              +-- lan-SFX: bridge br0, ageing 0 (a hub) --+-- eve-SFX: up0 02:50:53:00:01:ee
//! ```
//!
//! Usage:
//! ```ignore
//! mod common;
//! use common::{Testbed, TestbedOptions};
//!
//! let tb = Testbed::up(TestbedOptions::default());   // vm1, vm2, eve; raw uplink; keys; configs
//! let vm1 = tb.start(1);                               // waits until the status socket answers
//! let vm2 = tb.start(2);
//! assert_eq!(tb.ping(1, 2, 3).received, 3);
//! let mbps = tb.iperf3(1, 2, 2, false);
//! let s = vm1.status_json();                          // serde_json::Value of `status --json`
//! vm1.reload();                                       // SIGHUP
//! let code = vm2.stop();                              // SIGTERM, waits, returns the exit status
//! // Drop: gateways killed, namespaces and the temp dir removed (also on panic).
//! ```
//!
//! * [`Testbed::up`] picks a unique suffix (`t<pid>n<counter>`), so tests in one binary and
//!   concurrent runs never collide. Setup failures panic with the script's output: these tests
//!   fail loudly, they never skip.
//! * Configs are `dir()/vmN.toml` (written by `tb_config`; rewrite one with
//!   [`Testbed::write_config`] or by hand, then [`Gateway::reload`]); keys are `dir()/group.key`
//!   and `dir()/vmA-vmB.key` (A < B), logs `dir()/vmN.log`, status sockets `dir()/vmN.sock`.
//! * [`Testbed::start_with`] takes extra `run` arguments (`--user`, `--log-format json`) and
//!   environment (`NOTIFY_SOCKET`), and [`Testbed::spawn`] does the same without waiting for
//!   readiness (for start-up failure tests).
//! * [`Testbed::ns_exec`] / [`Testbed::ns_cmd`] run anything in a namespace (`"vm1"`, `"eve"`,
//!   `"lan"`); [`Testbed::sh`] runs bash with `testbed/lib.sh` sourced and this testbed's
//!   variables set, so every `tb_*` function is available.
//!
//! Needs root, iproute2, ping and iperf3; when iperf3 or ping is missing it runs
//! `testbed/install-deps.sh` once (and panics if that fails).

#![allow(dead_code)] // each test binary uses a different part of the harness

use core::sync::atomic::{AtomicU32, Ordering};
use core::time::Duration;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::OnceLock;
use std::thread::sleep;
use std::time::Instant;

/// The gateway binary under test (the debug build of this package).
pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_psp-gateway");

/// How long [`Testbed::start`] waits for a gateway's status socket.
pub(crate) const READY_TIMEOUT: Duration = Duration::from_secs(15);

static COUNTER: AtomicU32 = AtomicU32::new(0);
static DEPS: OnceLock<()> = OnceLock::new();

/// The repository root.
pub(crate) fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("psp-gateway sits in the workspace root")
        .to_path_buf()
}

fn lib_sh() -> PathBuf {
    repo_root().join("testbed/lib.sh")
}

/// The uplink kind of a testbed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Uplink {
    /// PSP frames (EtherType 0x1982) on `up0`.
    Raw,
    /// PSP frames in UDP datagrams between 192.168.50.N:5198.
    Udp,
}

impl Uplink {
    fn as_str(self) -> &'static str {
        match self {
            Self::Raw => "raw",
            Self::Udp => "udp",
        }
    }
}

/// What [`Testbed::up`] builds.
#[derive(Clone, Debug)]
pub(crate) struct TestbedOptions {
    /// Number of gateway hosts (2 or 3).
    pub(crate) hosts: u8,
    /// Uplink kind.
    pub(crate) uplink: Uplink,
    /// Suite of every key (`[defaults] suite`).
    pub(crate) suite: String,
    /// Extra lines for every config's `[defaults]` table.
    pub(crate) defaults_extra: String,
    /// Extra TOML appended to every config (new tables).
    pub(crate) config_extra: String,
    /// Keep IPv6 on the TAPs (default: IPv6 off in every namespace, so no background traffic).
    pub(crate) ipv6: bool,
    /// Sessions (`[session]`, no per-peer key files).
    pub(crate) session: bool,
    /// Paths (1, or 2: a second bridge and `[[uplink]]` twice).
    pub(crate) paths: u8,
    /// `[session] smkex`.
    pub(crate) smkex: String,
    /// Identities (`keygen --identity`) made and pinned.
    pub(crate) identity: bool,
    /// With `identity`: peers are configured `identity = "tofu"` (pinned on first use) instead
    /// of with their key.
    pub(crate) tofu: bool,
    /// Extra `[session]` lines.
    pub(crate) session_extra: String,
}

impl Default for TestbedOptions {
    fn default() -> Self {
        Self {
            hosts: 2,
            uplink: Uplink::Raw,
            suite: "bf-cbc-hmac-sha1".into(),
            defaults_extra: String::new(),
            config_extra: String::new(),
            ipv6: false,
            session: false,
            paths: 1,
            smkex: "prefer".into(),
            identity: false,
            tofu: false,
            session_extra: String::new(),
        }
    }
}

/// A built topology; dropping it tears everything down.
#[derive(Debug)]
pub(crate) struct Testbed {
    sfx: String,
    dir: PathBuf,
    opts: TestbedOptions,
}

/// Installs the testbed's tools once per test binary if iperf3 or ping is missing.
pub(crate) fn ensure_deps() {
    DEPS.get_or_init(|| ensure_tools(&["ip", "iperf3", "ping"]));
}

/// Whether `tool` is on the PATH.
pub(crate) fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs `testbed/install-deps.sh` (it installs every tool the tests use) if one of `tools` is
/// missing, and panics, naming them, if they are still missing afterwards: a test never skips
/// for want of a tool.
pub(crate) fn ensure_tools(tools: &[&str]) {
    if tools.iter().all(|t| have(t)) {
        return;
    }
    let script = repo_root().join("testbed/install-deps.sh");
    let out = output_within(
        &mut Command::new(&script),
        Duration::from_secs(900),
        "testbed/install-deps.sh",
    );
    assert!(
        out.status.success() && tools.iter().all(|t| have(t)),
        "{tools:?} missing and {} did not install them:\n{}{}",
        script.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs `cmd` to completion with its output captured, like [`Command::output`], but kills it
/// and panics (naming `what`) if it has not finished after `timeout`: a stuck command fails the
/// test with a message instead of hanging CI, and the Drop guards still clean up.
pub(crate) fn output_within(cmd: &mut Command, timeout: Duration, what: &str) -> Output {
    try_output_within(cmd, timeout).unwrap_or_else(|partial| {
        panic!("{what}: no exit after {timeout:?}; output so far: {partial}")
    })
}

/// [`output_within`] that returns what the command had printed (`Err`) instead of panicking.
pub(crate) fn try_output_within(cmd: &mut Command, timeout: Duration) -> Result<Output, String> {
    use std::io::Read as _;
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
    let reader = |mut pipe: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = pipe.read_to_end(&mut buf);
            buf
        })
    };
    let out = reader(Box::new(child.stdout.take().expect("piped stdout")));
    let err = reader(Box::new(child.stderr.take().expect("piped stderr")));
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for a child") {
            break Some(status);
        }
        if start.elapsed() >= timeout {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        sleep(Duration::from_millis(10));
    };
    // The pipes close when the child (and anything it left holding them) is gone. A grandchild
    // that keeps them open would block these joins; our commands exec, they do not fork.
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    match status {
        Some(status) => Ok(Output {
            status,
            stdout,
            stderr,
        }),
        None => Err(format!(
            "{}{}",
            String::from_utf8_lossy(&stdout),
            String::from_utf8_lossy(&stderr)
        )),
    }
}

/// How long a command run by the harness may take unless a call says otherwise.
pub(crate) const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

/// How long `psp-gateway status` may take.
pub(crate) const STATUS_TIMEOUT: Duration = Duration::from_secs(5);

/// A completed `ping`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ping {
    /// Echo requests sent.
    pub(crate) sent: u32,
    /// Replies received.
    pub(crate) received: u32,
    /// Average RTT in ms (0 when nothing came back).
    pub(crate) avg_ms: f64,
}

impl Testbed {
    /// Builds lan, eve and vm1..vmN, generates keys (`psp-gateway keygen`) and writes a config
    /// per host. Panics (with the script's output) if anything fails; cleans up either way.
    pub(crate) fn up(opts: TestbedOptions) -> Self {
        assert!(
            opts.hosts == 2 || opts.hosts == 3,
            "the testbed has 2 or 3 hosts"
        );
        ensure_deps();
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let sfx = format!("t{}n{n}", std::process::id());
        let dir = std::env::temp_dir().join(format!("psp-tb-{sfx}"));
        // A leftover of an earlier run with the same pid would confuse us: start clean.
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("create the testbed dir");
        fs::write(dir.join(".tb-created"), b"").expect("mark the testbed dir");
        let tb = Self { sfx, dir, opts };
        let configs: String = (1..=tb.opts.hosts)
            .map(|i| format!(" && tb_config {i} \"$SUITE\" {}", tb.opts.uplink.as_str()))
            .collect();
        let path2 = if tb.opts.paths == 2 {
            " && tb_path2"
        } else {
            ""
        };
        let ids = if tb.opts.identity {
            " && tb_identities"
        } else {
            ""
        };
        let script = format!(
            "tb_init && tb_up {} {}{path2} && tb_keys \"$SUITE\"{ids}{configs}",
            tb.opts.hosts,
            tb.opts.uplink.as_str()
        );
        let out = output_within(
            tb.sh_cmd(&script).env("SUITE", &tb.opts.suite),
            COMMAND_TIMEOUT,
            "testbed setup",
        );
        assert!(
            out.status.success(),
            "testbed setup failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        tb
    }

    /// The unique suffix of this testbed's namespaces.
    pub(crate) fn sfx(&self) -> &str {
        &self.sfx
    }

    /// The per-run directory (configs, keys, logs, sockets).
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// The options it was built with.
    pub(crate) fn options(&self) -> &TestbedOptions {
        &self.opts
    }

    /// The namespace of `name` (`"vm1"`, `"eve"`, `"lan"`).
    pub(crate) fn ns(&self, name: &str) -> String {
        format!("{name}-{}", self.sfx)
    }

    /// vmN's config file.
    pub(crate) fn config_path(&self, n: u8) -> PathBuf {
        self.dir.join(format!("vm{n}.toml"))
    }

    /// vmN's status socket.
    pub(crate) fn socket_path(&self, n: u8) -> PathBuf {
        self.dir.join(format!("vm{n}.sock"))
    }

    /// vmN's gateway log (stderr and stdout of `run`).
    pub(crate) fn log_path(&self, n: u8) -> PathBuf {
        self.dir.join(format!("vm{n}.log"))
    }

    /// A key file's bytes (hex-decoded): `"group"` or `"vm1-vm2"`.
    pub(crate) fn key(&self, name: &str) -> Vec<u8> {
        let path = self.dir.join(format!("{name}.key"));
        let text =
            fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
        hex::decode(text.trim()).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    /// vmN's TAP MAC (02:50:53:00:00:0N).
    pub(crate) fn mac(n: u8) -> [u8; 6] {
        [0x02, 0x50, 0x53, 0x00, 0x00, n]
    }

    /// vmN's uplink MAC (02:50:53:00:01:0N).
    pub(crate) fn up_mac(n: u8) -> [u8; 6] {
        [0x02, 0x50, 0x53, 0x00, 0x01, n]
    }

    /// Eve's MAC.
    pub(crate) const EVE_MAC: [u8; 6] = [0x02, 0x50, 0x53, 0x00, 0x01, 0xee];

    /// vmN's protected address (10.77.0.N).
    pub(crate) fn ip(n: u8) -> String {
        format!("10.77.0.{n}")
    }

    /// Rewrites vmN's config with `tb_config` (e.g. after changing options for a reload test).
    pub(crate) fn write_config(&self, n: u8, suite: &str) {
        let out = output_within(
            self.sh_cmd(&format!(
                "tb_config {n} \"$SUITE\" {}",
                self.opts.uplink.as_str()
            ))
            .env("SUITE", suite),
            COMMAND_TIMEOUT,
            "tb_config",
        );
        assert!(
            out.status.success(),
            "tb_config: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Sets `[interface] offload` in both gateways' configs (before they start).
    pub(crate) fn set_offload(&self, offload: bool) {
        self.set_interface("offload", offload);
    }

    /// Sets `[interface] KEY = VALUE` in both gateways' configurations.
    pub(crate) fn set_interface(&self, key: &str, value: impl core::fmt::Display) {
        for n in 1..=2 {
            let path = self.config_path(n);
            let text = fs::read_to_string(&path).expect("read config");
            let text = text.replacen(
                "[interface]\n",
                &format!("[interface]\n{key} = {value}\n"),
                1,
            );
            fs::write(&path, text).expect("write config");
        }
    }

    /// A `bash` command with `testbed/lib.sh` sourced and this testbed's variables set; the
    /// script is `script`.
    pub(crate) fn sh_cmd(&self, script: &str) -> Command {
        let mut c = Command::new("bash");
        c.arg("-c")
            .arg(format!("set -u; source \"$TB_LIB\"; {script}"))
            .env("TB_LIB", lib_sh())
            .env("TB_SFX", &self.sfx)
            .env("TB_DIR", &self.dir)
            .env("TB_BIN", BIN)
            .env("TB_IPV6", if self.opts.ipv6 { "1" } else { "0" })
            .env("TB_DEFAULTS_EXTRA", &self.opts.defaults_extra)
            .env("TB_CONFIG_EXTRA", &self.opts.config_extra)
            .env("TB_SESSION", if self.opts.session { "1" } else { "0" })
            .env("TB_PATHS", self.opts.paths.to_string())
            .env("TB_SMKEX", &self.opts.smkex)
            .env("TB_IDENTITY", if self.opts.identity { "1" } else { "0" })
            .env("TB_TOFU", if self.opts.tofu { "1" } else { "0" })
            .env("TB_SESSION_EXTRA", &self.opts.session_extra)
            .stdin(Stdio::null());
        c
    }

    /// Runs `script` with lib.sh sourced; panics if it fails.
    pub(crate) fn sh(&self, script: &str) -> Output {
        let out = output_within(&mut self.sh_cmd(script), COMMAND_TIMEOUT, script);
        assert!(
            out.status.success(),
            "`{script}` failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    /// A command that runs `args` inside `name`'s namespace (`ip netns exec`).
    pub(crate) fn ns_cmd(&self, name: &str, args: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns(name)])
            .args(args)
            .stdin(Stdio::null());
        c
    }

    /// Runs `args` inside `name`'s namespace and returns its output (whatever the exit status);
    /// panics if it takes longer than [`COMMAND_TIMEOUT`].
    pub(crate) fn ns_exec(&self, name: &str, args: &[&str]) -> Output {
        self.ns_exec_within(name, args, COMMAND_TIMEOUT)
    }

    /// [`ns_exec`](Self::ns_exec) with its own time limit.
    pub(crate) fn ns_exec_within(&self, name: &str, args: &[&str], timeout: Duration) -> Output {
        output_within(
            &mut self.ns_cmd(name, args),
            timeout,
            &format!("in {name}: {args:?}"),
        )
    }

    /// Like [`ns_exec`](Self::ns_exec), but panics unless the command succeeds; returns stdout.
    pub(crate) fn ns_ok(&self, name: &str, args: &[&str]) -> String {
        let out = self.ns_exec(name, args);
        assert!(
            out.status.success(),
            "in {name}: {args:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Starts vmN's gateway with its config and waits until the status socket answers.
    pub(crate) fn start(&self, n: u8) -> Gateway {
        self.start_with(n, &[], &[])
    }

    /// [`start`](Self::start) with extra `run` arguments and environment variables.
    pub(crate) fn start_with(&self, n: u8, args: &[&str], envs: &[(&str, &str)]) -> Gateway {
        let mut gw = self.spawn(n, args, envs);
        gw.wait_ready(READY_TIMEOUT);
        gw
    }

    /// Spawns vmN's gateway without waiting for readiness.
    pub(crate) fn spawn(&self, n: u8, args: &[&str], envs: &[(&str, &str)]) -> Gateway {
        self.spawn_program(n, &[BIN], args, envs)
    }

    /// [`spawn`](Self::spawn) with another program than the debug binary: `program` is the
    /// command before `run --config …`, e.g. `["setpriv", …, "/usr/bin/psp-gateway"]`. It must
    /// exec the gateway (same pid), so signals reach it.
    pub(crate) fn spawn_program(
        &self,
        n: u8,
        program: &[&str],
        args: &[&str],
        envs: &[(&str, &str)],
    ) -> Gateway {
        let log_path = self.log_path(n);
        let log = File::options()
            .create(true)
            .append(true)
            .open(&log_path)
            .expect("open the gateway log");
        let _ = fs::remove_file(self.socket_path(n));
        let config = self.config_path(n);
        let vm = format!("vm{n}");
        let mut cmd = self.ns_cmd(&vm, program);
        cmd.args(["run", "--config"]);
        cmd.arg(&config)
            .args(args)
            .stdout(log.try_clone().expect("dup the log fd"))
            .stderr(log);
        for (k, v) in envs {
            cmd.env(k, v);
        }
        let child = cmd.spawn().expect("spawn psp-gateway run");
        Gateway {
            n,
            child: Some(child),
            socket: self.socket_path(n),
            log: log_path,
        }
    }

    /// `ping -c COUNT` from vmA to vmB's protected address (0.05 s apart, 1 s timeout per reply).
    pub(crate) fn ping(&self, from: u8, to: u8, count: u32) -> Ping {
        let out = self.ns_exec(
            &format!("vm{from}"),
            &[
                "ping",
                "-n",
                "-q",
                "-c",
                &count.to_string(),
                "-i",
                "0.05",
                "-W",
                "1",
                &Self::ip(to),
            ],
        );
        let text = String::from_utf8_lossy(&out.stdout);
        parse_ping(&text)
            .unwrap_or_else(|| panic!("cannot parse ping output: {text}{:?}", out.stderr))
    }

    /// Pings until one reply arrives (first ARP resolution, gateways just started) or panics
    /// after `timeout`.
    pub(crate) fn ping_until_up(&self, from: u8, to: u8, timeout: Duration) {
        let start = Instant::now();
        while start.elapsed() < timeout {
            if self.ping(from, to, 1).received == 1 {
                return;
            }
        }
        let logs: String = [from, to]
            .iter()
            .map(|n| {
                let log = fs::read_to_string(self.log_path(*n)).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(20).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                format!("--- vm{n} log (last 20 lines):\n{}\n", tail.join("\n"))
            })
            .collect();
        panic!("vm{from} cannot ping vm{to} within {timeout:?}\n{logs}");
    }

    /// iperf3 TCP for `secs` seconds from vmA to vmB (`reverse`: vmB sends); returns the
    /// receiver's Mbit/s. Starts a one-shot server in vmB.
    pub(crate) fn iperf3(&self, from: u8, to: u8, secs: u32, reverse: bool) -> f64 {
        let mut server = self
            .ns_cmd(
                &format!("vm{to}"),
                &["iperf3", "-s", "-1", "-B", &Self::ip(to)],
            )
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn iperf3 server");
        let secs_n = secs;
        let secs = secs.to_string();
        let to_ip = Self::ip(to);
        let mut args = vec!["iperf3", "-c", &to_ip, "-t", &secs, "-J"];
        args.extend(["--connect-timeout", "2000"]);
        if reverse {
            args.push("-R");
        }
        let mut last = String::new();
        let limit = Duration::from_secs(u64::from(secs_n) + 20);
        for _ in 0..20 {
            let out = self.ns_exec_within(&format!("vm{from}"), &args, limit);
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            // iperf3 3.12 exits 0 with -J even when it could not connect: look at "error".
            let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
            if out.status.success() && v.get("error").is_none() && v.get("end").is_some() {
                // The one-shot server exits after the test; never wait for it unbounded.
                let _ = server.kill();
                let _ = server.wait();
                let bps = v["end"]["sum_received"]["bits_per_second"].as_f64();
                return bps.unwrap_or_else(|| panic!("iperf3 reported no sum_received: {text}"))
                    / 1e6;
            }
            last = format!("{text}{}", String::from_utf8_lossy(&out.stderr));
            // The server may not listen yet (connection refused).
            sleep(Duration::from_millis(100));
        }
        let _ = server.kill();
        let _ = server.wait();
        panic!("iperf3 vm{from} -> vm{to} failed: {last}");
    }

    /// vmN's neighbour entry for `ip` on psp0 (`ip neigh show`), e.g.
    /// `10.77.0.2 lladdr 02:50:53:00:00:02 REACHABLE`.
    pub(crate) fn neigh(&self, n: u8, ip: &str) -> String {
        self.ns_ok(
            &format!("vm{n}"),
            &["ip", "neigh", "show", ip, "dev", "psp0"],
        )
        .trim()
        .to_owned()
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        let out = try_output_within(&mut self.sh_cmd("tb_teardown"), COMMAND_TIMEOUT);
        match out {
            Ok(o) if o.status.success() => {}
            Ok(o) => eprintln!(
                "testbed teardown ({}) failed: {}",
                self.sfx,
                String::from_utf8_lossy(&o.stderr)
            ),
            Err(partial) => eprintln!(
                "testbed teardown ({}) did not finish in {COMMAND_TIMEOUT:?}: {partial}",
                self.sfx
            ),
        }
    }
}

fn parse_ping(text: &str) -> Option<Ping> {
    // "3 packets transmitted, 3 received, 0% packet loss, time 102ms"
    let stats = text.lines().find(|l| l.contains("packets transmitted"))?;
    let mut words = stats.split_whitespace();
    let sent = words.next()?.parse().ok()?;
    let received = stats
        .split(", ")
        .nth(1)?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    // "rtt min/avg/max/mdev = 0.050/0.070/0.090/0.010 ms"
    let avg_ms = text
        .lines()
        .find(|l| l.starts_with("rtt"))
        .and_then(|l| l.split('=').nth(1)?.trim().split('/').nth(1)?.parse().ok())
        .unwrap_or(0.0);
    Some(Ping {
        sent,
        received,
        avg_ms,
    })
}

/// A running `psp-gateway run` in a namespace; dropping it kills the process.
#[derive(Debug)]
pub(crate) struct Gateway {
    n: u8,
    child: Option<Child>,
    socket: PathBuf,
    log: PathBuf,
}

impl Gateway {
    /// The host number.
    pub(crate) fn host(&self) -> u8 {
        self.n
    }

    /// The process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// The log so far.
    pub(crate) fn log(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until `status --json` answers; panics with the log if the process exits first or
    /// the time runs out.
    pub(crate) fn wait_ready(&mut self, timeout: Duration) {
        let start = Instant::now();
        loop {
            if let Some(code) = self.try_wait() {
                panic!(
                    "the vm{} gateway exited during start ({code}); log:\n{}",
                    self.n,
                    self.log()
                );
            }
            if self.socket.exists() && self.try_status_json().is_some() {
                return;
            }
            assert!(
                start.elapsed() < timeout,
                "the vm{} gateway was not ready after {timeout:?}; log:\n{}",
                self.n,
                self.log()
            );
            sleep(Duration::from_millis(50));
        }
    }

    /// The exit status if the process has exited.
    pub(crate) fn try_wait(&mut self) -> Option<ExitStatus> {
        self.child.as_mut()?.try_wait().ok().flatten()
    }

    /// `psp-gateway status --socket … --json`, parsed; `None` if it fails.
    pub(crate) fn try_status_json(&self) -> Option<serde_json::Value> {
        let out = try_output_within(
            Command::new(BIN)
                .args(["status", "--json", "--socket"])
                .arg(&self.socket)
                .stdin(Stdio::null()),
            STATUS_TIMEOUT,
        )
        .ok()?;
        if !out.status.success() {
            return None;
        }
        serde_json::from_slice(&out.stdout).ok()
    }

    /// `status --json`, parsed; panics (with the log) if it fails.
    pub(crate) fn status_json(&self) -> serde_json::Value {
        self.try_status_json().unwrap_or_else(|| {
            panic!(
                "status of the vm{} gateway failed or did not answer within {STATUS_TIMEOUT:?}; \
                 log:\n{}",
                self.n,
                self.log()
            )
        })
    }

    /// `status` as the table a user sees.
    pub(crate) fn status_table(&self) -> String {
        let out = output_within(
            Command::new(BIN)
                .args(["status", "--socket"])
                .arg(&self.socket)
                .stdin(Stdio::null()),
            STATUS_TIMEOUT,
            "psp-gateway status",
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Sends a signal by name (`"HUP"`, `"TERM"`, `"INT"`, `"KILL"`).
    pub(crate) fn signal(&self, name: &str) {
        let ok = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.pid().to_string())
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "kill -{name} {} failed", self.pid());
    }

    /// SIGHUP: reload peers and keys.
    pub(crate) fn reload(&self) {
        self.signal("HUP");
    }

    /// SIGTERM, then waits (10 s, then SIGKILL and a panic); returns the exit status.
    pub(crate) fn stop(mut self) -> ExitStatus {
        self.stop_signal("TERM")
    }

    /// Sends `signal` and waits for the exit (10 s, then SIGKILL and a panic).
    pub(crate) fn stop_signal(&mut self, signal: &str) -> ExitStatus {
        self.signal(signal);
        self.wait_exit(Duration::from_secs(10))
            .unwrap_or_else(|| panic!("the vm{} gateway ignored SIG{signal}", self.n))
    }

    /// Waits for the process to exit on its own; kills it and returns `None` after `timeout`.
    pub(crate) fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let start = Instant::now();
        while start.elapsed() < timeout {
            if let Some(s) = self.try_wait() {
                self.child = None;
                return Some(s);
            }
            sleep(Duration::from_millis(20));
        }
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        None
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A counter in a status document: `path` like `"drops_total"`, `"drops.unknown_peer"`,
/// `"ignored.not_for_us"`, or `"peer:vm2.drops.bad-icv"` / `"peer:vm2.rx_frames"` for a peer's
/// counters. Missing counters panic (the contract names every one).
pub(crate) fn counter(status: &serde_json::Value, path: &str) -> u64 {
    let (mut v, rest) = match path.strip_prefix("peer:") {
        Some(p) => {
            let (name, rest) = p.split_once('.').expect("peer:NAME.counter");
            let peer = status["peers"]
                .as_array()
                .and_then(|ps| ps.iter().find(|x| x["name"] == name))
                .unwrap_or_else(|| panic!("no peer {name} in {status}"));
            (peer, rest)
        }
        None => (status, path),
    };
    // Drop reason names contain '-', never '.': split on '.'.
    for key in rest.split('.') {
        v = &v[key];
    }
    v.as_u64()
        .unwrap_or_else(|| panic!("no counter {path} in {status}"))
}

/// Every non-zero counter of `after - before` (numbers only, recursively, peers by name), for
/// assertions on exactly what changed and readable failure messages.
pub(crate) fn delta(
    before: &serde_json::Value,
    after: &serde_json::Value,
) -> std::collections::BTreeMap<String, i64> {
    let mut out = std::collections::BTreeMap::new();
    diff_into(&mut out, String::new(), before, after);
    out
}

fn diff_into(
    out: &mut std::collections::BTreeMap<String, i64>,
    prefix: String,
    before: &serde_json::Value,
    after: &serde_json::Value,
) {
    use serde_json::Value;
    let join = |k: &str| {
        if prefix.is_empty() {
            k.to_owned()
        } else {
            format!("{prefix}.{k}")
        }
    };
    match after {
        Value::Number(a) => {
            let a = a.as_i64().unwrap_or(0);
            let b = before.as_i64().unwrap_or(0);
            if a != b {
                out.insert(prefix, a - b);
            }
        }
        Value::Object(map) => {
            for (k, v) in map {
                diff_into(out, join(k), &before[k], v);
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                // Peers are matched by name, so reordering is harmless.
                let name = v["name"]
                    .as_str()
                    .map_or_else(|| i.to_string(), str::to_owned);
                let b = before
                    .as_array()
                    .and_then(|bs| bs.iter().find(|x| x["name"] == v["name"]))
                    .or_else(|| before.get(i))
                    .unwrap_or(&Value::Null);
                diff_into(out, join(&format!("peer:{name}")), b, v);
            }
        }
        _ => {}
    }
}

/// Polls `gw`'s status until `done(status)` holds or `timeout` passes; returns the last status.
pub(crate) fn wait_status(
    gw: &Gateway,
    timeout: Duration,
    done: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let start = Instant::now();
    loop {
        let s = gw.status_json();
        if done(&s) || start.elapsed() >= timeout {
            return s;
        }
        sleep(Duration::from_millis(50));
    }
}

/// Eve's AF_PACKET socket, bound to one interface inside a network namespace.
pub(crate) struct PacketSocket(psp_gateway::io::sys::PacketSocket);

impl PacketSocket {
    /// Opens a raw packet socket for `proto` on `ifname` inside namespace `ns`. The socket is
    /// created by a short-lived thread that entered the namespace; it stays bound to that
    /// namespace's interface when used from any thread.
    pub(crate) fn open(ns: &str, ifname: &str, proto: u16) -> Self {
        let (ns_name, ifname) = (ns.to_owned(), ifname.to_owned());
        let sock = std::thread::spawn(move || {
            // This thread enters the namespace, creates the socket and ends.
            psp_gateway::io::sys::enter_netns(&ns_name)?;
            psp_gateway::io::sys::PacketSocket::open(&ifname, proto)
        })
        .join()
        .expect("socket thread")
        .unwrap_or_else(|e| panic!("AF_PACKET socket in {ns}: {e}"));
        Self(sock)
    }

    /// Sends one whole Ethernet frame.
    pub(crate) fn send(&self, frame: &[u8]) {
        match self.0.send(frame) {
            Ok(n) => assert_eq!(n, frame.len(), "short send of a {}-byte frame", frame.len()),
            Err(e) => panic!("send a {}-byte frame: {e}", frame.len()),
        }
    }

    /// Sends one frame, ignoring a full buffer or any other error (floods).
    pub(crate) fn try_send(&self, frame: &[u8]) -> bool {
        self.0.send(frame).is_ok()
    }

    /// The next frame this host did not send, within `timeout`, into `buf`.
    pub(crate) fn recv_incoming(&self, buf: &mut [u8], timeout: Duration) -> Option<usize> {
        match self.0.recv_timeout(buf, timeout) {
            Ok(Some(r)) if !r.outgoing => Some(r.len),
            _ => None,
        }
    }

    /// Receives every frame that arrives within `window` (incoming and outgoing).
    pub(crate) fn recv_for(&self, window: Duration) -> Vec<Captured> {
        let deadline = Instant::now() + window;
        let mut out = Vec::new();
        let mut buf = vec![0u8; 65_536];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.0.recv_timeout(&mut buf, left) {
                Ok(Some(r)) => out.push(Captured {
                    data: buf[..r.len].to_vec(),
                    outgoing: r.outgoing,
                }),
                // A pending socket error (read clears it) or nothing in time; stop at the
                // deadline either way.
                Ok(None) | Err(_) if left.is_zero() => return out,
                Ok(None) | Err(_) => {}
            }
        }
    }

    /// Discards whatever is queued.
    pub(crate) fn drain(&self) {
        let _ = self.recv_for(Duration::from_millis(20));
    }
}

/// A received frame, and whether this host sent it (`PACKET_OUTGOING`).
pub(crate) struct Captured {
    /// The frame.
    pub(crate) data: Vec<u8>,
    /// Sent by this host.
    pub(crate) outgoing: bool,
}

/// `len` deterministic filler bytes from `seed` (xorshift64): a lost, reordered or corrupted
/// stretch of a transfer shows, and an attack frame is the same on every run.
pub(crate) fn pseudo_random(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// `s` without ANSI colour sequences (`ESC [ ... m`), as the daemon's log has them.
pub(crate) fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut esc = false;
    for c in s.chars() {
        match (esc, c) {
            (false, '\x1b') => esc = true,
            (false, c) => out.push(c),
            (true, 'm') => esc = false,
            (true, _) => {}
        }
    }
    out
}

#[cfg(test)]
mod harness_tests {
    use super::*;

    #[test]
    fn parses_ping_output() {
        let p = parse_ping(
            "PING 10.77.0.2 (10.77.0.2) 56(84) bytes of data.\n\n--- 10.77.0.2 ping statistics ---\n\
             3 packets transmitted, 2 received, 33.3333% packet loss, time 103ms\n\
             rtt min/avg/max/mdev = 0.061/0.085/0.110/0.024 ms\n",
        )
        .unwrap();
        assert_eq!((p.sent, p.received), (3, 2));
        assert!((p.avg_ms - 0.085).abs() < 1e-9);
    }
}
