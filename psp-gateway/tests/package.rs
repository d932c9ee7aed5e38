//! The Debian package (root, in CI; about a minute once cargo-deb is installed): builds it with
//! `testbed/package.sh --dev`, installs it with `dpkg -i`, checks what landed, runs the installed
//! daemon the way `psp-gateway.service` does, purges it and checks that nothing is left.
//!
//! * Files: the binary answers `--version`; the man pages and the bash, zsh and fish completions
//!   are byte for byte what [`psp_gateway::cli::generate::write_all`] writes from the current
//!   clap definitions (so the package cannot ship pages that drift from `--help`).
//! * The unit passes `systemd-analyze verify` (which also runs `man` on its `Documentation=`) and
//!   `systemd-analyze security --offline=true` stays at or below [`MAX_EXPOSURE_TENTHS`], the score in
//!   docs/PACKAGING.md. systemd is not PID 1 on our CI machines, so the unit itself is not
//!   started: its privilege model is. The installed binary runs in a testbed namespace as the
//!   package's `psp-gateway` user with only `CAP_NET_ADMIN` and `CAP_NET_RAW` (ambient and
//!   bounding set, `no_new_privs`: `setpriv`, as `User=`, `AmbientCapabilities=`,
//!   `CapabilityBoundingSet=` and `NoNewPrivileges=` set them; `/dev/net/tun` mode 0666, as
//!   udev makes it), sends `READY=1`, forwards a ping and stops cleanly on SIGTERM.
//! * Docs: every document the man pages cite (by its installed path, /usr/share/doc/psp-gateway/)
//!   is installed. The same check without root or a package, from the asset list in
//!   psp-gateway/Cargo.toml: `deb_assets_install_every_doc_the_man_pages_cite`.
//! * Purge: every path `dpkg -L` listed that was not there before is gone, the user and group
//!   are gone, and a listing of the directories a package touches is the same as before.
//!
//! It fails loudly, never skips: not root, no dpkg or no systemd-analyze is a failure.

mod common;

use core::time::Duration;
use std::collections::BTreeSet;
use std::fs;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use common::{Testbed, TestbedOptions, output_within, repo_root};

/// The Debian package name.
const PACKAGE: &str = "psp-gateway";

/// The user and group the package creates (debian/psp-gateway.sysusers).
const USER: &str = "psp-gateway";

/// The unit as installed.
const UNIT: &str = "/usr/lib/systemd/system/psp-gateway.service";

/// `systemd-analyze security` exposure the unit may have at most, in tenths (its
/// `--threshold` scale, 0-100): 2.0, the score docs/PACKAGING.md records.
const MAX_EXPOSURE_TENTHS: u32 = 20;

/// Directories a package's files and maintainer scripts may touch, listed before the install
/// and after the purge. (Not /var/lib/dpkg, dpkg's own records, or /var/cache/man, man-db's
/// index, which its trigger rebuilds.)
const WATCHED: &[&str] = &[
    "/etc",
    "/usr/bin",
    "/usr/lib/systemd",
    "/usr/lib/sysusers.d",
    "/usr/share/man/man1",
    "/usr/share/man/man5",
    "/usr/share/doc",
    "/usr/share/bash-completion",
    "/usr/share/zsh",
    "/usr/share/fish",
    "/var/lib/systemd",
];

#[test]
fn root_deb_installs_runs_unprivileged_and_purges_clean() {
    require("dpkg");
    require("systemd-analyze");
    require("setpriv");
    assert!(
        nix::unistd::geteuid().is_root(),
        "the package test installs a .deb: run it as root (CI does)"
    );

    let deb = build_package();
    // A leftover of an interrupted run would make "before" wrong: start from no package.
    if installed() {
        eprintln!("package: purging a {PACKAGE} left installed by an earlier run");
        run_ok(Command::new("dpkg").args(["--purge", PACKAGE]));
    }
    assert!(
        !user_exists(),
        "user {USER} exists without the package: remove it (userdel {USER}) and run again"
    );
    let before = listing();
    // The package's paths that do not exist yet: each must be gone after the purge.
    let contents = run_ok(Command::new("dpkg-deb").arg("-c").arg(&deb));
    let new_paths: Vec<PathBuf> = contents
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .map(|p| PathBuf::from(p.trim_start_matches('.').trim_end_matches('/')))
        .filter(|p| !p.as_os_str().is_empty() && !p.exists())
        .collect();

    let guard = Installed;
    run_ok(Command::new("dpkg").arg("-i").arg(&deb));
    let files = run_ok(Command::new("dpkg").args(["-L", PACKAGE]));
    let files: Vec<PathBuf> = files.lines().map(PathBuf::from).collect();
    for p in &new_paths {
        assert!(
            p.exists(),
            "{} from the package is missing after dpkg -i",
            p.display()
        );
    }
    eprintln!(
        "package: {} paths installed, {} new",
        files.len(),
        new_paths.len()
    );

    check_files(&files);
    check_unit();
    run_unprivileged();

    drop(guard);
    assert!(!installed(), "{PACKAGE} still installed after dpkg --purge");
    let left: Vec<&PathBuf> = new_paths.iter().filter(|p| p.exists()).collect();
    assert!(left.is_empty(), "left after the purge: {left:?}");
    assert!(!user_exists(), "user {USER} left after the purge");
    assert!(!group_exists(), "group {USER} left after the purge");
    let after = listing();
    let added: Vec<&String> = after.difference(&before).collect();
    let removed: Vec<&String> = before.difference(&after).collect();
    assert!(
        added.is_empty() && removed.is_empty(),
        "install + purge changed the system: added {added:?}, removed {removed:?}"
    );
}

/// Purges the package when dropped, so a failing check does not leave it installed.
struct Installed;

impl Drop for Installed {
    fn drop(&mut self) {
        let out = Command::new("dpkg")
            .args(["--purge", PACKAGE])
            .stdin(Stdio::null())
            .output();
        match out {
            Ok(o) if o.status.success() => {}
            Ok(o) => eprintln!(
                "dpkg --purge {PACKAGE}: {}",
                String::from_utf8_lossy(&o.stderr)
            ),
            Err(e) => eprintln!("dpkg --purge {PACKAGE}: {e}"),
        }
    }
}

fn build_package() -> PathBuf {
    let out = output_within(
        Command::new(repo_root().join("testbed/package.sh"))
            .arg("--dev")
            .stdin(Stdio::null()),
        // A cold cargo-deb install plus a dev build; warm it is a few seconds.
        Duration::from_secs(900),
        "testbed/package.sh --dev",
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "testbed/package.sh --dev failed:\n{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let deb = PathBuf::from(stdout.lines().last().unwrap_or_default());
    assert!(deb.is_file(), "no .deb at {deb:?}");
    deb
}

fn check_files(files: &[PathBuf]) {
    let has = |p: &str| files.iter().any(|f| f == Path::new(p));
    for p in [
        "/usr/bin/psp-gateway",
        "/etc/psp/gateway.toml",
        UNIT,
        "/usr/lib/sysusers.d/psp-gateway.conf",
        "/usr/lib/systemd/network/73-psp-gateway.link",
        "/usr/share/man/man1/psp-gateway.1.gz",
        "/usr/share/man/man1/psp-gateway-run.1.gz",
        "/usr/share/man/man5/psp-gateway.toml.5.gz",
        "/usr/share/bash-completion/completions/psp-gateway",
        "/usr/share/zsh/vendor-completions/_psp-gateway",
        "/usr/share/fish/vendor_completions.d/psp-gateway.fish",
    ] {
        assert!(
            has(p),
            "the package does not install {p}; it lists {files:?}"
        );
        assert!(Path::new(p).exists(), "{p} is listed but missing");
    }
    let conffiles =
        run_ok(Command::new("dpkg-query").args(["--showformat=${Conffiles}", "--show", PACKAGE]));
    assert!(
        conffiles.contains("/etc/psp/gateway.toml"),
        "/etc/psp/gateway.toml is not a conffile: {conffiles:?}"
    );

    let version = run_ok(Command::new("/usr/bin/psp-gateway").arg("--version"));
    assert_eq!(
        version.trim(),
        format!("psp-gateway {}", env!("CARGO_PKG_VERSION"))
    );
    if Path::new("/usr/bin/man").exists() {
        let page = run_ok(Command::new("man").args(["-w", "psp-gateway"]));
        assert_eq!(page.trim(), "/usr/share/man/man1/psp-gateway.1.gz");
        let page = run_ok(Command::new("man").args(["-w", "5", "psp-gateway.toml"]));
        assert_eq!(page.trim(), "/usr/share/man/man5/psp-gateway.toml.5.gz");
    }
    assert!(user_exists(), "postinst did not create user {USER}");

    // The shipped pages and completions are what the current clap definitions give.
    let fresh = std::env::temp_dir().join(format!("psp-gen-{}", std::process::id()));
    let _ = fs::remove_dir_all(&fresh);
    let generated = psp_gateway::cli::generate::write_all(&fresh).expect("generate");
    let mut pages = 0;
    for path in &generated {
        let name = path.file_name().and_then(|n| n.to_str()).expect("a name");
        let (installed, bytes) = match name {
            "psp-gateway.bash" => {
                let p = "/usr/share/bash-completion/completions/psp-gateway";
                (p.to_owned(), fs::read(p).expect("read"))
            }
            "_psp-gateway" => {
                let p = "/usr/share/zsh/vendor-completions/_psp-gateway";
                (p.to_owned(), fs::read(p).expect("read"))
            }
            "psp-gateway.fish" => {
                let p = "/usr/share/fish/vendor_completions.d/psp-gateway.fish";
                (p.to_owned(), fs::read(p).expect("read"))
            }
            page => {
                pages += 1;
                let section = page.rsplit('.').next().unwrap_or("1");
                let p = format!("/usr/share/man/man{section}/{page}.gz");
                let out = run(Command::new("zcat").arg(&p));
                assert!(out.status.success(), "zcat {p}: missing or not gzip");
                (p, out.stdout)
            }
        };
        let want = fs::read(path).expect("read the fresh file");
        assert!(
            bytes == want,
            "{installed} differs from what the clap definitions give now ({}): \
             rebuild with testbed/package.sh",
            path.display()
        );
    }
    // Every document the pages cite is there.
    for doc in cited_docs(&generated) {
        assert!(
            has(&doc),
            "a man page cites {doc}, which the package does not install; it lists {files:?}"
        );
        assert!(Path::new(&doc).is_file(), "{doc} is listed but missing");
    }
    let _ = fs::remove_dir_all(&fresh);
    // psp-gateway, its eight subcommands, the five below `ca` and `cert` (psp-gateway-ca-init,
    // ...) and psp-gateway.toml(5).
    assert_eq!(pages, 15, "man pages generated: {generated:?}");
    let shipped_pages = files
        .iter()
        .filter(|f| {
            (f.starts_with("/usr/share/man/man1") || f.starts_with("/usr/share/man/man5"))
                && f.extension().is_some()
        })
        .count();
    assert_eq!(
        shipped_pages, pages,
        "stale or missing man pages in the package"
    );
}

/// Where the package installs the documents the man pages cite.
const DOC_DIR: &str = "/usr/share/doc/psp-gateway/";

/// Every document (`*.md`) the generated man pages among `files` cite, as they cite it.
fn cited_docs(files: &[PathBuf]) -> BTreeSet<String> {
    let mut docs = BTreeSet::new();
    for f in files
        .iter()
        .filter(|f| f.extension().is_some_and(|e| e == "1" || e == "5"))
    {
        // roff escapes every dash.
        let page = fs::read_to_string(f)
            .expect("read a page")
            .replace("\\-", "-");
        let mut rest = page.as_str();
        while let Some(at) = rest.find(".md") {
            let start = rest[..at]
                .rfind(|c: char| !(c.is_ascii_alphanumeric() || "_./-".contains(c)))
                .map_or(0, |i| i + 1);
            docs.insert(rest[start..at + 3].to_owned());
            rest = &rest[at + 3..];
        }
    }
    docs
}

/// The paths (from /) the package installs, from `[package.metadata.deb] assets` in
/// psp-gateway/Cargo.toml, with each source's file (a `*` in a file name matched here).
fn asset_targets() -> BTreeSet<String> {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = fs::read_to_string(crate_dir.join("Cargo.toml")).expect("read Cargo.toml");
    let manifest: toml::Table = text.parse().expect("Cargo.toml parses");
    let assets = manifest["package"]["metadata"]["deb"]["assets"]
        .as_array()
        .expect("[package.metadata.deb] assets");
    let mut out = BTreeSet::new();
    for a in assets {
        let a = a.as_array().expect("an asset is [source, target, mode]");
        let (src, dst) = (
            a[0].as_str().expect("source"),
            a[1].as_str().expect("target"),
        );
        // Built files (target/...) are not in the tree yet: their targets as written.
        if src.starts_with("target/") {
            out.insert(format!("/{dst}"));
            continue;
        }
        let src = crate_dir.join(src);
        let pattern = src
            .file_name()
            .and_then(|n| n.to_str())
            .expect("a file name");
        let sources: Vec<PathBuf> = match pattern.split_once('*') {
            None => vec![src.clone()],
            Some((pre, post)) => fs::read_dir(src.parent().expect("a directory"))
                .expect("the asset's directory")
                .map(|e| e.expect("an entry").path())
                .filter(|p| {
                    p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                        n.len() >= pre.len() + post.len() && n.starts_with(pre) && n.ends_with(post)
                    })
                })
                .collect(),
        };
        assert!(
            !sources.is_empty(),
            "asset {} matches no file",
            src.display()
        );
        for s in sources {
            assert!(s.is_file(), "asset {} is missing", s.display());
            let name = s.file_name().and_then(|n| n.to_str()).expect("a name");
            match dst.strip_suffix('/') {
                Some(dir) => out.insert(format!("/{dir}/{name}")),
                None => out.insert(format!("/{dst}")),
            };
        }
    }
    out
}

/// Without root or a package: the man pages cite documents only by their installed path, and
/// the package's asset list installs each of them (a page may not send a reader to a file
/// the package lacks, nor to a path in the source tree).
#[test]
fn deb_assets_install_every_doc_the_man_pages_cite() {
    let dir = std::env::temp_dir().join(format!("psp-gen-docs-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    let generated = psp_gateway::cli::generate::write_all(&dir).expect("generate");
    let cited = cited_docs(&generated);
    let _ = fs::remove_dir_all(&dir);
    assert!(
        cited.contains("/usr/share/doc/psp-gateway/GATEWAY.md"),
        "psp-gateway.toml(5) cites GATEWAY.md: {cited:?}"
    );
    let targets = asset_targets();
    for doc in &cited {
        assert!(
            doc.starts_with(DOC_DIR),
            "a man page cites {doc}: not where the package installs documents ({DOC_DIR})"
        );
        assert!(
            targets.contains(doc),
            "a man page cites {doc}, which no [package.metadata.deb] asset installs: \
             {targets:?}"
        );
    }
}

fn check_unit() {
    let verify = run(Command::new("systemd-analyze").args(["verify", UNIT]));
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&verify.stdout),
        String::from_utf8_lossy(&verify.stderr)
    );
    eprintln!("package: systemd-analyze verify {UNIT}: {:?}", said.trim());
    assert!(
        verify.status.success(),
        "systemd-analyze verify failed:\n{said}"
    );
    // verify only warns about some mistakes (unknown keys, bad values): none allowed.
    assert!(
        !said.contains(UNIT) && !said.contains("psp-gateway.service"),
        "systemd-analyze verify complained about the unit:\n{said}"
    );

    let security = run(Command::new("systemd-analyze").args([
        "security",
        "--offline=true",
        &format!("--threshold={MAX_EXPOSURE_TENTHS}"),
        "--no-pager",
        UNIT,
    ]));
    let table = String::from_utf8_lossy(&security.stdout);
    let overall = table
        .lines()
        .find(|l| l.contains("Overall exposure level"))
        .unwrap_or("(no overall line)");
    eprintln!("package: systemd-analyze security: {}", overall.trim());
    assert!(
        security.status.success(),
        "exposure above {MAX_EXPOSURE_TENTHS}/10:\n{table}{}",
        String::from_utf8_lossy(&security.stderr)
    );
}

/// The installed daemon as the unit runs it: the package's user, only CAP_NET_ADMIN and
/// CAP_NET_RAW (ambient, bounding), no_new_privs, `$NOTIFY_SOCKET`, no `--user`.
fn run_unprivileged() {
    let tb = Testbed::up(TestbedOptions::default());
    // Key files owned by the service user, mode 0600 (as /etc/psp/gateway.toml tells the admin),
    // and a directory it may create its status socket in (the unit's RuntimeDirectory=).
    let dir = tb.dir().to_str().expect("utf-8").to_owned();
    run_ok(Command::new("chown").args([&format!("{USER}:{USER}"), &dir]));
    run_ok(Command::new("sh").arg("-c").arg(format!(
        "chown {USER}:{USER} '{dir}'/*.key && chmod 0600 '{dir}'/*.key"
    )));
    let notify_path = tb.dir().join("notify.sock");
    let notify = UnixDatagram::bind(&notify_path).expect("bind the notify socket");
    notify
        .set_read_timeout(Some(Duration::from_secs(15)))
        .expect("timeout");
    run_ok(Command::new("chown").arg(USER).arg(&notify_path));
    // udev makes /dev/net/tun 0666 (50-udev-default.rules); on our CI machines, containers
    // without udev, it is 0600, which no unprivileged user can open. In a mount namespace of
    // its own, the daemon gets a 0666 node of the same device over /dev/net/tun: the host's
    // stays as it is.
    let dev = tb.dir().join("dev");
    fs::create_dir(&dev).expect("mkdir dev");
    let caps = "-all,+net_admin,+net_raw";
    let script = format!(
        "mount -t tmpfs tmpfs '{dev}' && mknod -m 0666 '{dev}/tun' c 10 200 \
         && mount --bind '{dev}/tun' /dev/net/tun \
         && exec setpriv --reuid {USER} --regid {USER} --clear-groups --inh-caps={caps} \
            --ambient-caps={caps} --bounding-set={caps} --no-new-privs \
            /usr/bin/psp-gateway \"$@\"",
        dev = dev.display()
    );
    let program = [
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        &script,
        "sh",
    ];
    let notify_str = notify_path.to_str().expect("utf-8");
    let mut vm1 = tb.spawn_program(1, &program, &[], &[("NOTIFY_SOCKET", notify_str)]);
    vm1.wait_ready(common::READY_TIMEOUT);
    let mut buf = [0_u8; 256];
    let n = notify
        .recv(&mut buf)
        .expect("READY=1 from the unprivileged daemon");
    assert_eq!(&buf[..n], b"READY=1");
    let status = fs::read_to_string(format!("/proc/{}/status", vm1.pid())).expect("status");
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(str::trim)
            .unwrap_or_default()
            .to_owned()
    };
    let uid = run_ok(Command::new("id").args(["-u", USER]));
    assert!(
        field("Uid:").starts_with(uid.trim()),
        "the daemon does not run as {USER}: Uid {}",
        field("Uid:")
    );
    // CAP_NET_ADMIN (12) and CAP_NET_RAW (13): 0x3000, and nothing else.
    assert_eq!(
        field("CapEff:"),
        "0000000000003000",
        "effective capabilities"
    );
    assert_eq!(field("CapBnd:"), "0000000000003000", "bounding set");
    assert_eq!(field("NoNewPrivs:"), "1");

    // The peer runs the same way: the key files it shares are the service user's now, which a
    // root daemon would refuse.
    let mut vm2 = tb.spawn_program(2, &program, &[], &[]);
    vm2.wait_ready(common::READY_TIMEOUT);
    tb.ping_until_up(1, 2, Duration::from_secs(10));
    let code = vm1.stop();
    assert!(code.success(), "SIGTERM: {code}; log:\n{}", vm1_log(&tb));
    let links = tb.ns_ok("vm1", &["ip", "-o", "link"]);
    assert!(
        !links.contains("psp0"),
        "the TAP outlived the daemon: {links}"
    );
}

fn vm1_log(tb: &Testbed) -> String {
    fs::read_to_string(tb.log_path(1)).unwrap_or_default()
}

fn listing() -> BTreeSet<String> {
    let mut cmd = Command::new("find");
    cmd.args(WATCHED.iter().filter(|d| Path::new(d).exists()))
        .arg("-xdev");
    run_ok(&mut cmd).lines().map(str::to_owned).collect()
}

fn installed() -> bool {
    let out = run(Command::new("dpkg-query").args(["--showformat=${Status}", "--show", PACKAGE]));
    out.status.success()
        && String::from_utf8_lossy(&out.stdout).contains("installed")
        && !String::from_utf8_lossy(&out.stdout).contains("not-installed")
}

fn user_exists() -> bool {
    run(Command::new("getent").args(["passwd", USER]))
        .status
        .success()
}

fn group_exists() -> bool {
    run(Command::new("getent").args(["group", USER]))
        .status
        .success()
}

fn require(tool: &str) {
    let found = run(Command::new("sh").args(["-c", &format!("command -v {tool}")]));
    assert!(
        found.status.success(),
        "{tool} is missing: the package test needs it (apt-get install {})",
        match tool {
            "systemd-analyze" => "systemd",
            "setpriv" => "util-linux",
            _ => tool,
        }
    );
}

fn run(cmd: &mut Command) -> Output {
    output_within(
        cmd.stdin(Stdio::null()),
        Duration::from_secs(120),
        "a command",
    )
}

fn run_ok(cmd: &mut Command) -> String {
    let what = format!("{cmd:?}");
    let out = run(cmd);
    assert!(
        out.status.success(),
        "{what} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
