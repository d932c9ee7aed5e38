//! `Config::load` as the daemon uses it: real files in a temp directory, real key files with
//! real modes. Each error class is checked for its exact one-line message (file, key, problem).

use core::net::SocketAddr;
use core::sync::atomic::{AtomicU32, Ordering};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use psp_core::crypto::SuiteId;
use psp_core::replay::MAX_WINDOW;
use psp_gateway::config::{Config, LogFormat, MetricsConfig, UplinkConfig, format_mac, parse_mac};

/// A unique temp directory, removed with everything in it on drop.
struct Dir(PathBuf);

impl Dir {
    fn new() -> Self {
        static N: AtomicU32 = AtomicU32::new(0);
        let path = std::env::temp_dir().join(format!(
            "psp-config-test-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir(&path).expect("create temp dir");
        Self(path)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    /// Writes a key file of `len` bytes (hex, as keygen prints it) with `mode`.
    fn key(&self, name: &str, len: usize, seed: u8, mode: u32) -> Vec<u8> {
        let key: Vec<u8> = (0..len).map(|i| seed.wrapping_add(i as u8)).collect();
        let path = self.path(name);
        std::fs::write(&path, format!("{}\n", hex::encode(&key))).expect("write key");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
        key
    }

    /// Writes the config and loads it.
    fn load(&self, text: &str) -> Result<Config, String> {
        let path = self.path("gw.toml");
        std::fs::write(&path, text).expect("write config");
        Config::load(&path).map_err(|e| e.to_string())
    }

    /// Loads `text`, which must fail, and returns the message after `FILE: `.
    fn error(&self, text: &str) -> String {
        let e = self.load(text).expect_err("config should be refused");
        assert_eq!(e.lines().count(), 1, "one line: {e:?}");
        let prefix = format!("{}: ", self.path("gw.toml").display());
        e.strip_prefix(&prefix)
            .unwrap_or_else(|| panic!("{e:?} does not start with {prefix:?}"))
            .to_string()
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// vm1's side of the two-host setup: raw uplink, group key, a per-peer key for vm2 and a third
/// host that uses the group key.
const VM1: &str = r#"
[interface]
name = "psp-vm1"
mac = "02:00:00:00:00:01"
mtu = 1400
addresses = ["10.77.0.1/24", "fd77::1/64"]

[uplink]
kind = "raw"
interface = "eth1"

[daemon]
status_socket = "run/gw.sock"
user = "nobody"
log_format = "json"
log_level = "info,psp_gateway=debug"

[defaults]
suite = "bf-cbc-hmac-sha1"
replay_window = 4096
timestamps = true
max_skew_ms = 5000

[group]
key_file = "group.key"
security_number = 7

[[peer]]
name = "vm2"
mac = "02:00:00:00:00:02"
key_file = "vm1-vm2.key"
suite = "aes128-gcm"
pad_to = 16

[[peer]]
name = "vm3"
macs = ["02:00:00:00:00:03", "02:00:00:00:01:03"]
endpoint = "192.0.2.3:5198"
replay_window = 64
"#;

#[test]
fn two_host_config_parses_to_the_expected_values() {
    let dir = Dir::new();
    let group_key = dir.key("group.key", 32, 1, 0o600);
    let pair_key = dir.key("vm1-vm2.key", 16, 100, 0o400);
    let c = dir.load(VM1).unwrap();

    assert_eq!(c.path, dir.path("gw.toml"));
    assert_eq!(c.interface.name, "psp-vm1");
    assert_eq!(c.interface.mac, Some([2, 0, 0, 0, 0, 1]));
    assert_eq!(c.interface.mtu, Some(1400));
    assert_eq!(c.interface.addresses, ["10.77.0.1/24", "fd77::1/64"]);
    assert_eq!(
        c.uplink,
        UplinkConfig::Raw {
            interface: "eth1".into(),
            rx_ring: false,
            qdisc_bypass: false,
        }
    );
    // Relative paths start at the config file's directory.
    assert_eq!(c.daemon.status_socket, dir.path("run/gw.sock"));
    assert_eq!(c.daemon.user.as_deref(), Some("nobody"));
    assert_eq!(c.daemon.log_format, LogFormat::Json);
    assert_eq!(c.daemon.log_level, "info,psp_gateway=debug");

    // [group]: [defaults] plus its own security number.
    let g = &c.group;
    assert_eq!(g.key.path, dir.path("group.key"));
    assert_eq!(&g.key.bytes[..], &group_key[..]);
    assert_eq!(g.suite, SuiteId::BfCbcHmacSha1);
    assert_eq!(g.replay_window, 4096);
    assert_eq!(g.security_number, sn(7));
    assert!(g.timestamps);
    assert_eq!(g.max_skew_ms, 5000);
    assert_eq!(g.pad_to, 8, "Blowfish block length");

    assert_eq!(c.peers.len(), 2);
    // vm2: its own key: [defaults] plus its overrides, not the group's security number.
    let vm2 = &c.peers[0];
    assert_eq!(vm2.name, "vm2");
    assert_eq!(vm2.macs, [[2, 0, 0, 0, 0, 2]]);
    assert_eq!(
        vm2.endpoint, None,
        "ignored with a raw uplink, and absent here"
    );
    let s = &vm2.security;
    assert_eq!(s.key.path, dir.path("vm1-vm2.key"));
    assert_eq!(&s.key.bytes[..], &pair_key[..]);
    assert_eq!(s.suite, SuiteId::Aes128Gcm);
    assert_eq!(s.replay_window, 4096);
    assert_eq!(s.security_number, None);
    assert!(s.timestamps);
    assert_eq!(s.max_skew_ms, 5000);
    assert_eq!(s.pad_to, 16);

    // vm3: no key_file, so the group key and the group's settings, plus its override.
    let vm3 = &c.peers[1];
    assert_eq!(vm3.name, "vm3");
    assert_eq!(vm3.macs, [[2, 0, 0, 0, 0, 3], [2, 0, 0, 0, 1, 3]]);
    assert_eq!(
        vm3.endpoint,
        Some("192.0.2.3:5198".parse::<SocketAddr>().unwrap())
    );
    let s = &vm3.security;
    assert_eq!(s.key, g.key);
    assert_eq!(s.suite, SuiteId::BfCbcHmacSha1);
    assert_eq!(s.security_number, sn(7));
    assert_eq!(s.replay_window, 64);
    assert_eq!(s.pad_to, 8);

    // What the daemon hands to psp-core.
    let sealer = vm2.security.sealer_config();
    assert!(sealer.timestamps());
    assert_eq!(sealer.pad_to(), 16);
    let opener = g.opener_config(1514);
    assert_eq!(opener.replay_window(), 4096);
    assert_eq!(opener.security_number(), sn(7));
    assert_eq!(opener.max_frame_len(), 1514);

    // Debug never shows key bytes.
    let debug = format!("{c:?}");
    assert!(!debug.contains(&hex::encode(&group_key)), "{debug}");
    assert!(debug.contains("KeyMaterial("), "{debug}");
}

#[test]
fn minimal_config_gets_the_documented_defaults() {
    let dir = Dir::new();
    dir.key("group.key", 32, 1, 0o600);
    let c = dir
        .load("[uplink]\nkind = \"raw\"\ninterface = \"eth0\"\n[group]\nkey_file = \"group.key\"\n")
        .unwrap();
    assert_eq!(c.interface.name, "psp0");
    assert_eq!(c.interface.mac, None);
    assert_eq!(c.interface.mtu, None);
    assert!(c.interface.addresses.is_empty());
    assert_eq!(
        c.daemon.status_socket,
        Path::new("/run/psp-gateway/psp0.sock")
    );
    assert_eq!(c.daemon.user, None);
    assert_eq!(c.daemon.log_format, LogFormat::Human);
    assert_eq!(c.daemon.log_level, "info");
    assert_eq!(c.group.suite, SuiteId::BfCbcHmacSha1);
    assert_eq!(c.group.replay_window, 8128);
    assert_eq!(c.group.security_number, None);
    assert!(!c.group.timestamps);
    assert_eq!(c.group.max_skew_ms, 30_000);
    assert_eq!(c.group.pad_to, 8);
    assert!(c.peers.is_empty());
    assert_eq!(c.metrics, None, "metrics are off by default");
}

#[test]
fn pad_to_defaults_to_the_block_length_of_each_suite() {
    let dir = Dir::new();
    dir.key("group.key", 32, 1, 0o600);
    dir.key("p.key", 16, 2, 0o600);
    let c = dir
        .load(
            "[uplink]\nkind = \"raw\"\ninterface = \"eth0\"\n\
             [defaults]\nsuite = \"chacha20-poly1305\"\n\
             [group]\nkey_file = \"group.key\"\n\
             [[peer]]\nname = \"a\"\nmac = \"02:00:00:00:00:0a\"\nkey_file = \"p.key\"\n\
             suite = \"aes128-gcm\"\n",
        )
        .unwrap();
    assert_eq!(c.group.pad_to, 1);
    assert_eq!(c.peers[0].security.pad_to, 1);
}

#[test]
fn udp_uplink_with_endpoints() {
    let dir = Dir::new();
    dir.key("group.key", 32, 1, 0o600);
    dir.key("vm1-vm2.key", 32, 9, 0o600);
    let c = dir
        .load(
            "[interface]\nname = \"psp0\"\n\
             [uplink]\nkind = \"udp\"\nlisten = \"[::]:5198\"\n\
             [group]\nkey_file = \"group.key\"\n\
             [[peer]]\nname = \"vm2\"\nmac = \"02:00:00:00:00:02\"\n\
             endpoint = \"[2001:db8::2]:5198\"\nkey_file = \"vm1-vm2.key\"\n",
        )
        .unwrap();
    assert_eq!(
        c.uplink,
        UplinkConfig::Udp {
            listen: "[::]:5198".parse().unwrap()
        }
    );
    assert_eq!(
        c.peers[0].endpoint,
        Some("[2001:db8::2]:5198".parse().unwrap())
    );
}

#[test]
fn reload_compares_peers_by_value() {
    let dir = Dir::new();
    dir.key("group.key", 32, 1, 0o600);
    dir.key("vm1-vm2.key", 16, 100, 0o600);
    let a = dir.load(VM1).unwrap();
    let b = dir.load(VM1).unwrap();
    assert_eq!(a, b);
    // A new key for vm2: vm2 changes, vm3 (group key) does not.
    dir.key("vm1-vm2.key", 16, 200, 0o600);
    let c = dir.load(VM1).unwrap();
    assert_ne!(a.peers[0], c.peers[0]);
    assert_eq!(a.peers[1], c.peers[1]);
    // A per-peer setting changes only that peer.
    let d = dir
        .load(&VM1.replace("replay_window = 64", "replay_window = 128"))
        .unwrap();
    assert_eq!(c.peers[0], d.peers[0]);
    assert_ne!(c.peers[1], d.peers[1]);
}

/// A valid base with `group.key` (32 bytes) and `vm2.key` (32 bytes) in place.
fn base_dir() -> Dir {
    let dir = Dir::new();
    dir.key("group.key", 32, 1, 0o600);
    dir.key("vm2.key", 32, 2, 0o600);
    dir
}

const RAW_HEAD: &str = "[interface]\nmac = \"02:00:00:00:00:01\"\n\
                        [uplink]\nkind = \"raw\"\ninterface = \"eth0\"\n\
                        [group]\nkey_file = \"group.key\"\n";

#[test]
fn base_config_is_valid() {
    let dir = base_dir();
    let c = dir
        .load(&format!(
            "{RAW_HEAD}[[peer]]\nname = \"vm2\"\nmac = \"02:00:00:00:00:02\"\nkey_file = \"vm2.key\"\n"
        ))
        .unwrap();
    assert_eq!(c.peers.len(), 1);
}

#[test]
fn error_bad_toml() {
    let dir = base_dir();
    assert_eq!(
        dir.error(&format!("{RAW_HEAD}[[peer]\nname = \"vm2\"\n")),
        "line 8, column 8: unclosed array table, expected `]`"
    );
    let e = dir.error("[interface]\nname = \"psp0\nmtu = 1400\n");
    assert!(e.starts_with("line 2, column "), "{e}");
}

#[test]
fn error_unknown_key() {
    let dir = base_dir();
    assert_eq!(
        dir.error(&format!(
            "{RAW_HEAD}[[peer]]\nname = \"vm2\"\nmac = \"02:00:00:00:00:02\"\nreplay = 5\n"
        )),
        "peer[0].replay: unknown key `replay` (valid keys: name, mac, macs, endpoint, \
         endpoint2, key_file, identity, address, suite, replay_window, security_number, timestamps, max_skew_ms, pad_to, \
         normalize)"
    );
    assert_eq!(
        dir.error(&format!("{RAW_HEAD}[deamon]\nuser = \"nobody\"\n")),
        "deamon: unknown key `deamon` (valid keys: interface, uplink, daemon, defaults, group, \
         peer, normalize, metrics, session, pki)"
    );
}

#[test]
fn error_bad_mac() {
    let dir = base_dir();
    assert_eq!(
        dir.error(&format!(
            "{RAW_HEAD}[[peer]]\nname = \"vm2\"\nmac = \"02:00:00:00:00:02\"\n\
             [[peer]]\nname = \"vm3\"\nmac = \"02:00:00:00:00:0g\"\n"
        )),
        "peer[1].mac: \"02:00:00:00:00:0g\" is not a MAC address (want aa:bb:cc:dd:ee:ff)"
    );
    assert_eq!(
        dir.error(&format!(
            "{RAW_HEAD}[[peer]]\nname = \"all\"\nmacs = [\"02:00:00:00:00:02\", \"ff:ff:ff:ff:ff:ff\"]\n"
        )),
        "peer[0].macs[1]: \"ff:ff:ff:ff:ff:ff\" is the broadcast address; want a unicast MAC"
    );
    assert_eq!(
        dir.error(&format!(
            "{RAW_HEAD}[[peer]]\nname = \"me\"\nmac = \"02:00:00:00:00:01\"\n"
        )),
        "peer[0].mac: 02:00:00:00:00:01 is interface.mac, our own address"
    );
}

#[test]
fn error_bad_suite() {
    let dir = base_dir();
    assert_eq!(
        dir.error(&format!("{RAW_HEAD}[defaults]\nsuite = \"aes-gcm\"\n")),
        "defaults.suite: unknown suite \"aes-gcm\"; want one of none, null-hmac-sha1, \
         bf-cbc-hmac-sha1, aes128-gcm, aes256-gcm, chacha20-poly1305, scramble-hmac-sha1"
    );
}

#[test]
fn error_wrong_key_length() {
    let dir = base_dir();
    let key = dir.path("vm2.key");
    assert_eq!(
        dir.error(&format!(
            "{RAW_HEAD}[[peer]]\nname = \"vm2\"\nmac = \"02:00:00:00:00:02\"\n\
             key_file = \"vm2.key\"\nsuite = \"aes128-gcm\"\n"
        )),
        format!(
            "peer[0].key_file: {}: wrong key length: expected 16 bytes, got 32 for suite \
             aes128-gcm",
            key.display()
        )
    );
}

#[test]
fn error_key_file_mode() {
    let dir = base_dir();
    dir.key("vm2.key", 32, 2, 0o644);
    let key = dir.path("vm2.key");
    assert_eq!(
        dir.error(&format!(
            "{RAW_HEAD}[[peer]]\nname = \"vm2\"\nmac = \"02:00:00:00:00:02\"\nkey_file = \"vm2.key\"\n"
        )),
        format!(
            "peer[0].key_file: {k} is mode 0644; want 0600 or stricter (chmod 600 {k})",
            k = key.display()
        )
    );
}

#[test]
fn error_missing_key_file() {
    let dir = base_dir();
    let key = dir.path("vm9.key");
    assert_eq!(
        dir.error(&format!(
            "{RAW_HEAD}[[peer]]\nname = \"vm2\"\nmac = \"02:00:00:00:00:02\"\nkey_file = \"vm9.key\"\n"
        )),
        format!(
            "peer[0].key_file: cannot open {}: No such file or directory (os error 2)",
            key.display()
        )
    );
    assert_eq!(
        dir.error("[uplink]\nkind = \"raw\"\ninterface = \"eth0\"\n[group]\n"),
        "group.key_file: missing (required)"
    );
}

#[test]
fn error_duplicate_peer() {
    let dir = base_dir();
    assert_eq!(
        dir.error(&format!(
            "{RAW_HEAD}[[peer]]\nname = \"vm2\"\nmac = \"02:00:00:00:00:02\"\n\
             [[peer]]\nname = \"vm2\"\nmac = \"02:00:00:00:00:03\"\n"
        )),
        "peer[1].name: \"vm2\" is already the name of peer[0]"
    );
    assert_eq!(
        dir.error(&format!(
            "{RAW_HEAD}[[peer]]\nname = \"vm2\"\nmac = \"02:00:00:00:00:02\"\n\
             [[peer]]\nname = \"vm3\"\nmacs = [\"02:00:00:00:00:03\", \"02:00:00:00:00:02\"]\n"
        )),
        "peer[1].macs[1]: 02:00:00:00:00:02 is already a MAC of peer[0]"
    );
}

#[test]
fn error_udp_without_endpoint() {
    let dir = base_dir();
    assert_eq!(
        dir.error(
            "[uplink]\nkind = \"udp\"\nlisten = \"0.0.0.0:5198\"\n[group]\nkey_file = \"group.key\"\n\
             [[peer]]\nname = \"vm2\"\nmac = \"02:00:00:00:00:02\"\n"
        ),
        "peer[0].endpoint: missing; required with uplink kind = \"udp\" (e.g. \"192.0.2.1:5198\")"
    );
}

#[test]
fn error_replay_window_too_large() {
    let dir = base_dir();
    assert_eq!(
        dir.error(&format!(
            "{RAW_HEAD}[defaults]\nreplay_window = {}\n",
            MAX_WINDOW + 1
        )),
        format!(
            "defaults.replay_window: {} is not in 1..={MAX_WINDOW} (frames)",
            MAX_WINDOW + 1
        )
    );
    assert_eq!(
        dir.error(&format!(
            "{RAW_HEAD}[[peer]]\nname = \"vm2\"\nmac = \"02:00:00:00:00:02\"\nreplay_window = 0\n"
        )),
        format!("peer[0].replay_window: 0 is not in 1..={MAX_WINDOW} (frames)")
    );
}

#[test]
fn error_other_ranges() {
    let dir = base_dir();
    let cases = [
        (
            "[defaults]\nsecurity_number = 16777216\n",
            "defaults.security_number: 16777216 is not a 24-bit number (0..=16777215)",
        ),
        (
            "[defaults]\npad_to = 65\n",
            "defaults.pad_to: 65 is not in 1..=64 (bytes)",
        ),
        (
            "[defaults]\npad_to = 36\n",
            "defaults.pad_to: 36 with suite bf-cbc-hmac-sha1 (blocks of 8 bytes) in group pads \
             to multiples of 72; want a granule of at most 64 (use a multiple of 8)",
        ),
        (
            "[defaults]\nmax_skew_ms = 0\n",
            "defaults.max_skew_ms: 0 is not in 1..=2147483647 (milliseconds)",
        ),
        (
            "[daemon]\nlog_format = \"xml\"\n",
            "daemon.log_format: \"xml\" is not a log format; want \"human\" or \"json\"",
        ),
    ];
    for (tail, want) in cases {
        assert_eq!(dir.error(&format!("{RAW_HEAD}{tail}")), want);
    }
    let cases = [
        (
            "[interface]\nname = \"psp-gateway-long0\"\n",
            "interface.name: \"psp-gateway-long0\" is 17 bytes; interface names are at most 15",
        ),
        (
            "[interface]\nmtu = 67\n",
            "interface.mtu: 67 is not in 68..=65535",
        ),
        (
            "[interface]\naddresses = [\"10.0.0.1\"]\n",
            "interface.addresses[0]: \"10.0.0.1\" is not ADDRESS/PREFIX (e.g. \"10.0.0.1/24\" or \
             \"fd00::1/64\")",
        ),
        (
            "[uplink]\nkind = \"tcp\"\n",
            "uplink.kind: \"tcp\" is not an uplink kind; want \"raw\" or \"udp\"",
        ),
        (
            "[uplink]\nkind = \"udp\"\nlisten = \"localhost:5198\"\n",
            "uplink.listen: \"localhost:5198\" is not IP:PORT (e.g. \"192.0.2.1:5198\" or \
             \"[2001:db8::1]:5198\"; no host names)",
        ),
    ];
    for (head, want) in cases {
        let text = format!(
            "{head}{}[group]\nkey_file = \"group.key\"\n",
            if head.contains("[uplink]") {
                ""
            } else {
                "[uplink]\nkind = \"raw\"\ninterface = \"eth0\"\n"
            }
        );
        assert_eq!(dir.error(&text), want);
    }
}

#[test]
fn error_peer_without_key_cannot_change_suite() {
    let dir = base_dir();
    assert_eq!(
        dir.error(&format!(
            "{RAW_HEAD}[[peer]]\nname = \"vm2\"\nmac = \"02:00:00:00:00:02\"\nsuite = \"aes256-gcm\"\n"
        )),
        "peer[0].suite: needs key_file: a peer without its own key uses the group key and the \
         group's suite"
    );
}

#[test]
fn error_key_content_never_printed() {
    let dir = base_dir();
    let path = dir.path("vm2.key");
    std::fs::write(&path, "s3cret passphrase\n").unwrap();
    let e = dir.error(&format!(
        "{RAW_HEAD}[[peer]]\nname = \"vm2\"\nmac = \"02:00:00:00:00:02\"\nkey_file = \"vm2.key\"\n"
    ));
    assert_eq!(
        e,
        format!(
            "peer[0].key_file: {} does not hold one hex key (as printed by `psp-gateway keygen`)",
            path.display()
        )
    );
}

#[test]
fn error_missing_config_file() {
    let dir = Dir::new();
    let path = dir.path("absent.toml");
    assert_eq!(
        Config::load(&path).unwrap_err().to_string(),
        format!(
            "{}: cannot open: No such file or directory (os error 2)",
            path.display()
        )
    );
}

#[test]
fn mac_helpers() {
    assert_eq!(
        parse_mac("02:00:5E:10:00:01"),
        Some([2, 0, 0x5e, 0x10, 0, 1])
    );
    assert_eq!(format_mac([2, 0, 0x5e, 0x10, 0, 1]), "02:00:5e:10:00:01");
    assert_eq!(parse_mac("02:00:5e:10:00"), None);
}

/// Every ```toml block of docs/CONFIG.md and README.md, and the packaged example config,
/// loads with the real loader: what a user copies works. Key files are made with the length
/// their suite needs (keygen's), identity files with `Identity::generate`; a fragment (a block
/// without an uplink) gets a minimal `[uplink]` and, if it has none, `[group]`.
#[test]
fn every_documented_toml_block_loads() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let mut blocks: Vec<(String, String)> = Vec::new();
    for doc in ["docs/CONFIG.md", "README.md"] {
        let text = std::fs::read_to_string(format!("{root}/{doc}")).expect(doc);
        for block in text.split("```toml\n").skip(1) {
            let toml = block.split("```").next().unwrap_or_default();
            blocks.push((doc.to_owned(), toml.to_owned()));
        }
    }
    let packaged = "psp-gateway/debian/gateway.toml";
    let text = std::fs::read_to_string(format!("{root}/{packaged}")).expect(packaged);
    blocks.push((packaged.to_owned(), text));
    let mut complete = 0;
    for (doc, text) in &blocks {
        let mut text = text.clone();
        if text.contains("[uplink]") || text.contains("[[uplink]]") {
            complete += 1;
        } else {
            text = format!("[uplink]\nkind = \"raw\"\ninterface = \"eth1\"\n{text}");
        }
        if !text.contains("[group]") {
            text.push_str("\n[group]\nkey_file = \"group.key\"\n");
        }
        let dir = Dir::new();
        make_key_files(&dir, &text);
        if let Err(e) = dir.load(&text) {
            panic!("a TOML block of {doc} is refused: {e}\n{text}");
        }
    }
    assert!(blocks.len() >= 9, "found {} blocks", blocks.len());
    assert!(complete >= 8, "found {complete} complete examples");
}

/// Writes the key files (`key_file`, sized for the key's suite) and identity files
/// (`identity_file`) that the config `text` names, relative to `dir`.
fn make_key_files(dir: &Dir, text: &str) {
    let table: toml::Table = text.parse().expect("a TOML block");
    let suite_of = |t: Option<&toml::Value>| {
        t.and_then(|t| t.get("suite"))
            .and_then(toml::Value::as_str)
            .map(str::to_owned)
    };
    let default = suite_of(table.get("defaults")).unwrap_or_else(|| "bf-cbc-hmac-sha1".into());
    let len = |suite: &str| if suite == "aes128-gcm" { 16 } else { 32 };
    let mut keys: Vec<(String, usize)> = Vec::new();
    if let Some(g) = table.get("group") {
        let suite = suite_of(Some(g)).unwrap_or_else(|| default.clone());
        if let Some(f) = g.get("key_file").and_then(toml::Value::as_str) {
            keys.push((f.to_owned(), len(&suite)));
        }
    }
    for p in table
        .get("peer")
        .and_then(toml::Value::as_array)
        .into_iter()
        .flatten()
    {
        let suite = suite_of(Some(p)).unwrap_or_else(|| default.clone());
        if let Some(f) = p.get("key_file").and_then(toml::Value::as_str) {
            keys.push((f.to_owned(), len(&suite)));
        }
    }
    for (i, (name, len)) in keys.into_iter().enumerate() {
        assert!(
            !name.contains('/'),
            "examples use relative key files: {name}"
        );
        // Distinct bytes per file: the loader refuses a normalized peer on the group's key.
        dir.key(&name, len, 3 + 40 * (i as u8), 0o600);
    }
    let id = table
        .get("session")
        .and_then(|s| s.get("identity_file"))
        .and_then(toml::Value::as_str);
    if let Some(name) = id {
        let mut n = 0u8;
        let identity = psp_core::handshake::Identity::generate(|seed| {
            n += 1;
            seed.fill(n);
        })
        .expect("an identity");
        let path = dir.path(name);
        std::fs::write(&path, hex::encode(identity.seed())).expect("write identity");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    }
}

#[test]
fn error_shared_key_with_other_sealing_settings_or_normalization() {
    let dir = base_dir();
    // Two peers on the group key with equal settings: fine (they share the group's sealer).
    dir.load(&format!(
        "{RAW_HEAD}[[peer]]\nname = \"vm2\"\nmac = \"02:00:00:00:00:02\"\n\
         [[peer]]\nname = \"vm3\"\nmac = \"02:00:00:00:00:03\"\nreplay_window = 64\n"
    ))
    .unwrap();
    assert_eq!(
        dir.error(&format!(
            "{RAW_HEAD}[[peer]]\nname = \"vm2\"\nmac = \"02:00:00:00:00:02\"\ntimestamps = true\n"
        )),
        "peer[0]: shares its key with [group] but not its suite, security_number, timestamps or \
         pad_to (one key is sealed by one sequence-number stream)"
    );
    assert_eq!(
        dir.error(&format!(
            "{RAW_HEAD}[[peer]]\nname = \"vm2\"\nmac = \"02:00:00:00:00:02\"\n\
             [peer.normalize]\nenabled = true\n"
        )),
        "peer[0].key_file: a normalized peer needs a key of its own; this key is also [group]'s"
    );
}

fn sn(value: u32) -> Option<psp_core::SecurityNumber> {
    psp_core::SecurityNumber::new(value).ok()
}

#[test]
fn metrics_listen_on_loopback_and_remote_only_when_allowed() {
    let dir = base_dir();
    let c = dir
        .load(&format!(
            "{RAW_HEAD}[metrics]\nlisten = \"127.0.0.1:9582\"\n"
        ))
        .unwrap();
    assert_eq!(
        c.metrics,
        Some(MetricsConfig {
            listen: "127.0.0.1:9582".parse::<SocketAddr>().unwrap(),
            allow_remote: false,
        })
    );
    let c = dir
        .load(&format!("{RAW_HEAD}[metrics]\nlisten = \"[::1]:9582\"\n"))
        .unwrap();
    assert!(c.metrics.is_some_and(|m| m.listen.ip().is_loopback()));
    let c = dir
        .load(&format!(
            "{RAW_HEAD}[metrics]\nlisten = \"0.0.0.0:9582\"\nallow_remote = true\n"
        ))
        .unwrap();
    assert!(c.metrics.is_some_and(|m| m.allow_remote));
}

#[test]
fn error_metrics() {
    let dir = base_dir();
    let err = |m: &str| dir.error(&format!("{RAW_HEAD}[metrics]\n{m}"));
    assert_eq!(
        err("listen = \"0.0.0.0:9582\"\n"),
        "metrics.listen: 0.0.0.0:9582 is not a loopback address; the counters show every peer's \
         traffic volume, so serving them beyond this host needs allow_remote = true"
    );
    assert!(
        err("listen = \"192.0.2.1:9582\"\nallow_remote = false\n")
            .starts_with("metrics.listen: 192.0.2.1:9582 is not a loopback address")
    );
    assert!(err("").starts_with("metrics.listen: missing;"));
    assert!(err("allow_remote = true\n").starts_with("metrics.listen: missing;"));
    assert_eq!(
        err("listen = \"127.0.0.1:0\"\n"),
        "metrics.listen: 127.0.0.1:0 has port 0; a scraper needs a fixed port"
    );
    assert!(err("listen = \"localhost:9582\"\n").starts_with("metrics.listen: "));
    assert!(err("port = 9582\n").starts_with("metrics.port: unknown key `port`"));
}

const TWO_PATHS: &str = "[interface]\nmac = \"02:00:00:00:00:01\"\naddresses = [\"10.0.0.1/24\"]\n\
                         [[uplink]]\nkind = \"raw\"\ninterface = \"eth0\"\n\
                         [[uplink]]\nkind = \"raw\"\ninterface = \"eth1\"\n\
                         [group]\nkey_file = \"group.key\"\n";

#[test]
fn sessions_two_paths_and_identities_parse() {
    let dir = base_dir();
    let id = "4786c404d90018ea406836463a55af790ffba150ede696ed9c5fe47f20e83255";
    let c = dir
        .load(&format!(
            "{TWO_PATHS}[session]\nsmkex = \"require\"\nrekey_after_s = 2\n\
             [[peer]]\nname = \"vm2\"\nmac = \"02:00:00:00:00:02\"\nidentity = \"{id}\"\n\
             address = \"10.0.0.2\"\n\
             [[peer]]\nname = \"old\"\nmac = \"02:00:00:00:00:03\"\nkey_file = \"vm2.key\"\n"
        ))
        .unwrap();
    let s = c.session.as_ref().expect("[session]");
    assert_eq!(s.smkex, psp_core::handshake::SmkexMode::Required);
    assert_eq!(s.rekey_after, psp_core::time::Duration::from_secs(2));
    assert_eq!(s.address, ("10.0.0.1".parse().unwrap(), 24));
    assert!(c.uplink2.is_some());
    assert!(
        c.peers[0].session && !c.peers[1].session,
        "key_file keeps a static key"
    );
    assert_eq!(hex::encode(c.peers[0].identity.unwrap()), id);
}

#[test]
fn session_errors_name_their_key() {
    let dir = base_dir();
    let peer = "[[peer]]\nname = \"vm2\"\nmac = \"02:00:00:00:00:02\"\n";
    assert_eq!(
        dir.error(&format!("{TWO_PATHS}{peer}")),
        "uplink[1]: a second path carries session establishment (SMKEX); it needs a [session] section"
    );
    assert_eq!(
        dir.error(&format!("{TWO_PATHS}[session]\nsmkex = \"maybe\"\n{peer}")),
        "session.smkex: \"maybe\" is not an SMKEX mode; want \"require\", \"prefer\" or \"off\""
    );
    assert_eq!(
        dir.error(&format!("{TWO_PATHS}[session]\nlifetime_s = 10\n{peer}")),
        "session.lifetime_s: 10 is not in 60..=86400"
    );
    assert!(
        dir.error(&format!("{TWO_PATHS}[session]\n{peer}identity = \"00\"\n"))
            .starts_with("peer[0].identity: \"00\" is not an identity")
    );
    assert!(
        dir.error(&format!("{RAW_HEAD}[session]\n{peer}"))
            .starts_with("session.address: missing;")
    );
    // An identity file must be a 32-byte key with the right sign (keygen --identity makes it).
    dir.key("id.key", 16, 9, 0o600);
    assert!(
        dir.error(&format!(
            "{TWO_PATHS}[session]\nidentity_file = \"id.key\"\n{peer}"
        ))
        .contains("an identity is 32 (psp-gateway keygen --identity)")
    );
    assert!(
        dir.error(&format!(
            "{TWO_PATHS}[[uplink]]\nkind = \"raw\"\ninterface = \"eth2\"\n[session]\n{peer}"
        ))
        .starts_with("uplink: 3 [[uplink]] tables")
    );
}

/// `[session] paths`, `probe_ms` and `path_down_ms`: the defaults, a valid choice, and errors
/// that name the key.
#[test]
fn the_two_paths_settings_load_and_their_errors_name_the_key() {
    use psp_core::host::PathMode;
    use psp_core::time::Duration;
    let dir = base_dir();
    let peer = "[[peer]]\nname = \"vm2\"\nmac = \"02:00:00:00:00:02\"\n";
    let c = dir.load(&format!("{TWO_PATHS}[session]\n{peer}")).unwrap();
    let s = c.session.unwrap();
    assert_eq!(
        (s.paths, s.probe_every, s.down_after),
        (
            PathMode::Failover,
            Duration::from_millis(25),
            Duration::from_millis(100)
        )
    );
    let c = dir
        .load(&format!(
            "{TWO_PATHS}[session]\npaths = \"both\"\nprobe_ms = 50\npath_down_ms = 200\n{peer}"
        ))
        .unwrap();
    let s = c.session.unwrap();
    assert_eq!(
        (s.paths, s.probe_every, s.down_after),
        (
            PathMode::Both,
            Duration::from_millis(50),
            Duration::from_millis(200)
        )
    );
    assert_eq!(
        dir.error(&format!(
            "{TWO_PATHS}[session]\npaths = \"sideways\"\n{peer}"
        )),
        "session.paths: \"sideways\" is not a way to use two paths; want \"failover\", \"both\" or \"thesis\""
    );
    assert_eq!(
        dir.error(&format!(
            "{TWO_PATHS}[session]\nprobe_ms = 50\npath_down_ms = 60\n{peer}"
        )),
        "session.path_down_ms: 60 is less than twice probe_ms (50): one late probe would take a working path down"
    );
}

/// `kem`: off by default; the three modes; anything else is refused with the choices.
#[test]
fn session_kem_modes_parse_and_others_are_refused() {
    use psp_core::handshake::KemMode;
    let dir = base_dir();
    let peer = "[[peer]]\nname = \"vm2\"\nmac = \"02:00:00:00:00:02\"\n";
    let kem = |line: &str| {
        dir.load(&format!("{TWO_PATHS}[session]\n{line}\n{peer}"))
            .unwrap()
            .session
            .unwrap()
            .kem
    };
    assert_eq!(kem(""), KemMode::Off);
    assert_eq!(kem("kem = \"off\""), KemMode::Off);
    assert_eq!(kem("kem = \"prefer\""), KemMode::Preferred);
    assert_eq!(kem("kem = \"require\""), KemMode::Required);
    assert_eq!(
        dir.error(&format!(
            "{TWO_PATHS}[session]\nkem = \"ml-kem-1024\"\n{peer}"
        )),
        "session.kem: \"ml-kem-1024\" is not a KEM mode; want \"require\", \"prefer\" or \"off\" \
         (ML-KEM-768 beside X25519)"
    );
}

/// `smkex = "require"` with one uplink could never set up a session (`too_few_paths` on every
/// handshake): refused at load, with the fix.
#[test]
fn smkex_require_with_one_uplink_is_refused() {
    let dir = base_dir();
    let head = "[interface]\nmac = \"02:00:00:00:00:01\"\naddresses = [\"10.0.0.1/24\"]\n\
                [uplink]\nkind = \"raw\"\ninterface = \"eth0\"\n[group]\nkey_file = \"group.key\"\n";
    let peer = "[[peer]]\nname = \"vm2\"\nmac = \"02:00:00:00:00:02\"\n";
    assert_eq!(
        dir.error(&format!("{head}[session]\nsmkex = \"require\"\n{peer}")),
        "session.smkex: \"require\" needs two paths and there is one uplink, so every handshake \
         would fail (too_few_paths); add a second [[uplink]] (path 2), or set smkex = \"prefer\" \
         (two paths when both hosts have them) or \"off\" (single-path SEP)"
    );
    for mode in ["prefer", "off"] {
        assert!(
            dir.load(&format!("{head}[session]\nsmkex = \"{mode}\"\n{peer}"))
                .is_ok()
        );
    }
    assert!(
        dir.load(&format!(
            "{TWO_PATHS}[session]\nsmkex = \"require\"\n{peer}"
        ))
        .is_ok()
    );
}

/// `[peer]` for `[[peer]]` (and the reverse for a single table) in our words, not serde's.
#[test]
fn bracket_mixups_say_which_brackets() {
    let dir = base_dir();
    assert_eq!(
        dir.error(&format!(
            "{RAW_HEAD}[peer]\nname = \"vm2\"\nmac = \"02:00:00:00:00:02\"\n"
        )),
        "peer: [peer] is a single table; write [[peer]] (double brackets), one per entry"
    );
    assert_eq!(
        dir.error(&format!("{RAW_HEAD}[[defaults]]\nsuite = \"aes128-gcm\"\n")),
        "defaults: [[defaults]] is an array of tables; write [defaults] (single brackets), once"
    );
}

/// `status --config` needs only the socket path: no key file is read (a user who cannot read
/// them, or a file mid-edit, still works), and only `interface.name` and `daemon.status_socket`
/// are checked.
#[test]
fn status_socket_of_reads_only_the_socket_keys() {
    use psp_gateway::config::{default_status_socket, status_socket_of};
    let dir = Dir::new();
    let path = dir.path("gw.toml");
    // No key files exist, a peer is half written, an unknown key sits in [defaults].
    std::fs::write(
        &path,
        "[interface]\nname = \"psp7\"\n[uplink]\nkind = \"raw\"\n[group]\nkey_file = \"nope.key\"\n\
         [defaults]\nsuite = \"aes128\"\nreplay_windw = 4\n[[peer]]\nname = \"half\"\n",
    )
    .unwrap();
    assert_eq!(
        status_socket_of(&path).unwrap(),
        default_status_socket("psp7")
    );
    std::fs::write(
        &path,
        "[daemon]\nstatus_socket = \"run/gw.sock\"\n[[peer]]\n",
    )
    .unwrap();
    assert_eq!(status_socket_of(&path).unwrap(), dir.path("run/gw.sock"));
    std::fs::write(&path, "[daemon]\nstatus_socket = 5\n").unwrap();
    assert!(
        status_socket_of(&path)
            .unwrap_err()
            .to_string()
            .ends_with("daemon.status_socket: invalid type: integer, expected a string"),
    );
    std::fs::write(&path, "[interface]\nname = \"a/b\"\n").unwrap();
    assert!(
        status_socket_of(&path)
            .unwrap_err()
            .to_string()
            .contains("interface.name: \"a/b\" is not a valid interface name")
    );
    std::fs::write(&path, "[daemon\n").unwrap();
    assert!(status_socket_of(&path).is_err());
}

/// Unknown suite names list the valid ones, in `[defaults]` and in `[session] suites`.
#[test]
fn unknown_suites_list_the_valid_ones() {
    let dir = base_dir();
    let all = "none, null-hmac-sha1, bf-cbc-hmac-sha1, aes128-gcm, aes256-gcm, \
               chacha20-poly1305, scramble-hmac-sha1";
    assert_eq!(
        dir.error(&format!("{RAW_HEAD}[defaults]\nsuite = \"aes128\"\n")),
        format!("defaults.suite: unknown suite \"aes128\"; want one of {all}")
    );
    assert_eq!(
        dir.error(&format!(
            "{TWO_PATHS}[session]\nsuites = [\"aes128\"]\n[[peer]]\nname = \"b\"\n\
             mac = \"02:00:00:00:00:02\"\n"
        )),
        format!("session.suites[0]: unknown suite \"aes128\"; want one of {all}")
    );
}

/// keygen makes aes128-gcm keys by default; under the daemon's built-in (thesis) suite such a
/// key is refused with the fix.
#[test]
fn a_keygen_default_key_under_the_thesis_suite_says_why() {
    let dir = Dir::new();
    dir.key("group.key", 16, 1, 0o600);
    let e = dir.error(
        "[uplink]\nkind = \"raw\"\ninterface = \"eth0\"\n[group]\nkey_file = \"group.key\"\n",
    );
    assert!(
        e.ends_with(
            "wrong key length: expected 32 bytes, got 16 for suite bf-cbc-hmac-sha1 (a 16-byte \
             key is what `psp-gateway keygen` makes for aes128-gcm, its default; the daemon's \
             built-in suite is the thesis' bf-cbc-hmac-sha1: write suite = \"aes128-gcm\" in \
             [defaults])"
        ),
        "{e}"
    );
}

/// The suites that keep nothing confidential (`none`, `null-hmac-sha1`,
/// `scramble-hmac-sha1`) are used only where the file names them: never a default, for static
/// keys or `[session] suites`; written, they load (that is the permission they need).
#[test]
fn integrity_only_suites_only_where_the_file_names_them() {
    let dir = base_dir();
    dir.key("s.key", 32, 3, 0o600);
    let c = dir
        .load(&format!(
            "{RAW_HEAD}[session]\naddress = \"10.0.0.1/24\"\n[[peer]]\nname = \"vm2\"\nmac = \"02:00:00:00:00:02\"\n\
             key_file = \"vm2.key\"\n"
        ))
        .unwrap();
    assert!(c.group.suite.is_confidential());
    assert!(c.peers[0].security.suite.is_confidential());
    let session = c.session.as_ref().expect("[session]");
    assert!(
        session.suites.iter().all(|s| s.is_confidential()),
        "{:?}",
        session.suites
    );
    for name in ["none", "null-hmac-sha1", "scramble-hmac-sha1"] {
        let c = dir
            .load(&format!(
                "{RAW_HEAD}[session]\naddress = \"10.0.0.1/24\"\nsuites = [\"aes128-gcm\", \"{name}\"]\n\
                 [[peer]]\nname = \"vm2\"\nmac = \"02:00:00:00:00:02\"\nkey_file = \"s.key\"\n\
                 suite = \"{name}\"\n"
            ))
            .unwrap();
        let id = SuiteId::from_name(name).unwrap();
        assert_eq!(c.peers[0].security.suite, id);
        assert!(!id.is_confidential(), "{name}");
        assert!(c.session.as_ref().unwrap().suites.contains(&id));
    }
}

/// `[pki]`: a host with a CA certificate, its own certificate and its identity needs no
/// `[[peer]]` block; every binding of the certificate to this host is checked at load.
#[test]
fn pki_needs_no_peer_block_and_checks_the_certificate_against_this_host() {
    use psp_core::handshake::Identity;
    use psp_core::pki::{CertFields, Certificate, Kind, RevocationList};
    let dir = base_dir();
    let ca = psp_core::SigningKey::from_seed(&[0xca; 32]).unwrap();
    let mut caf = CertFields::new(Kind::Ca, 0, *ca.public_key().as_bytes(), "net-ca");
    caf.not_after = 4_000_000_000;
    let write = |name: &str, bytes: &[u8]| {
        std::fs::write(dir.path(name), format!("{}\n", hex::encode(bytes))).unwrap();
    };
    write("ca.crt", Certificate::sign(&caf, &ca).unwrap().as_bytes());
    let id = Identity::generate(|s| s.fill(0x21)).unwrap();
    let path = dir.path("id.key");
    std::fs::write(&path, format!("{}\n", hex::encode(id.seed()))).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    let host_cert = |key: [u8; 32], mac: [u8; 6], serial: u64| {
        let mut f = CertFields::new(Kind::Host, serial, key, "vm1");
        f.not_after = 4_000_000_000;
        f.push_mac(mac);
        f.push_addr("10.0.0.1".parse().unwrap(), 24);
        Certificate::sign(&f, &ca).unwrap()
    };
    let me = [2, 0, 0, 0, 0, 1];
    write("vm1.crt", host_cert(id.public_key(), me, 1).as_bytes());
    let text = format!(
        "{TWO_PATHS}[session]\nidentity_file = \"id.key\"\n\
         [pki]\nca = \"ca.crt\"\ncertificate = \"vm1.crt\"\n"
    );
    let c = dir.load(&text).unwrap();
    assert!(c.peers.is_empty());
    let p = c.pki.as_ref().expect("[pki]");
    assert_eq!(p.certificate.fields().serial, 1);
    assert_eq!((p.skew_secs, p.max_peers), (3600, 4096));
    // Another key, another MAC: refused, naming the key.
    write("vm1.crt", host_cert([9; 32], me, 1).as_bytes());
    assert!(
        dir.error(&text)
            .starts_with("pki.certificate: names another key")
    );
    write(
        "vm1.crt",
        host_cert(id.public_key(), [2, 0, 0, 0, 0, 7], 1).as_bytes(),
    );
    assert_eq!(
        dir.error(&text),
        "pki.certificate: does not name interface.mac"
    );
    // Its own serial revoked: refused at load.
    write("vm1.crt", host_cert(id.public_key(), me, 1).as_bytes());
    write(
        "crl",
        RevocationList::sign(1, 0, &[1], &ca).unwrap().as_bytes(),
    );
    assert_eq!(
        dir.error(&format!("{text}revocation_list = \"crl\"\n")),
        "pki.certificate: serial 1 is revoked by list 1"
    );
    // Signed by another CA; no [session]; out-of-range knobs.
    let other = psp_core::SigningKey::from_seed(&[0xcb; 32]).unwrap();
    let mut f = *host_cert(id.public_key(), me, 1).fields();
    f.serial = 2;
    write("vm1.crt", Certificate::sign(&f, &other).unwrap().as_bytes());
    assert!(
        dir.error(&text)
            .contains("the CA's signature does not verify")
    );
    write("vm1.crt", host_cert(id.public_key(), me, 1).as_bytes());
    assert!(
        dir.error(&format!(
            "{RAW_HEAD}[pki]\nca = \"ca.crt\"\ncertificate = \"vm1.crt\"\n"
        ))
        .starts_with("pki: needs a [session] section")
    );
    assert_eq!(
        dir.error(&format!("{text}skew_s = -1\n")),
        "pki.skew_s: -1 is outside 0..=86400"
    );
}
