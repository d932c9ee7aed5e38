//! `psp-mp`: netcat over two paths. `listen` or `connect` with two `--path` options copies
//! stdin to the stream and the stream to stdout; `proxy` is the testbed's on-path attacker;
//! `dh` is the one-path Diffie-Hellman baseline for set-up times. One-line errors, exit 1.

use core::net::SocketAddr;
use core::time::Duration;
use std::io::Write as _;
use std::process::ExitCode;
use std::time::Instant;

use clap::{Args, Parser, Subcommand, ValueEnum};
use psp_multipath::attack::{self, Capture};
use psp_multipath::{
    Cipher, KemMode, Listener, LongTermKey, Mode, MultipathStream, OnPathFailure, Options, Path,
    PathRole, SharePolicy,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

#[derive(Parser)]
#[command(
    name = "psp-mp",
    version,
    about = "A byte stream dispersed over a trusted and an untrusted path, sealed (or scrambled as in the papers), keyed by SMKEX (netcat-like)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Wait for a client on two paths (or --count of them); stream to stdout (or --out-dir),
    /// stdin to the stream.
    Listen {
        #[command(flatten)]
        common: Common,
        /// Serve this many clients one after another, then exit. Above 1 each client's stream
        /// goes to its own file (--out-dir) or nowhere (--discard), and stdin is not read: each
        /// client gets an empty stream (or --send-bytes); without either, refused (exit 2).
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
        count: u32,
        /// Write client k's stream (k = 1, 2, ... in accept order) to DIR/k instead of stdout:
        /// received into DIR/k.part, renamed to DIR/k once the stream ended cleanly. DIR is
        /// created if missing; existing DIR/k or DIR/k.part files are refused (exit 2).
        #[arg(long, value_name = "DIR", conflicts_with = "discard")]
        out_dir: Option<std::path::PathBuf>,
    },
    /// Connect on two paths; stdin to the stream, stream to stdout.
    Connect {
        #[command(flatten)]
        common: Common,
        /// Set up this many connections one after another, each sending an empty stream, and
        /// print one line per set-up: `TOTAL CONNECT HANDSHAKE BINDING FIRST_FLIGHT REPLY KEYS`
        /// in µs (from before the connects to the stream; both TCP connects; hellos and
        /// SEP/SMKEX to the keys; the binding tags; then HANDSHAKE's three parts: writing the
        /// first flight, waiting for the first bytes of the answer, the rest to the keys).
        /// Serve them with `listen --count N --discard`.
        #[arg(long)]
        setup_only: Option<u32>,
    },
    /// On-path attacker for the testbed: relay TCP from LISTEN to TO.
    Proxy {
        /// Where to accept.
        #[arg(long)]
        listen: SocketAddr,
        /// Where to relay to.
        #[arg(long)]
        to: SocketAddr,
        /// Replace the SMKEX share the initiator sends (an active attacker on one path).
        #[arg(long)]
        replace_share: bool,
        /// Append the client → server bytes to this file (a recording eavesdropper).
        #[arg(long)]
        record: Option<std::path::PathBuf>,
    },
    /// Known-plaintext attack (docs/SCRAMBLER.md): from a recorded untrusted path (`proxy
    /// --record`) and the sent file, take 65 bytes of the file at the start of the first
    /// untrusted segment and recover that segment without the key; the plaintext goes to
    /// stdout, `OFFSET LEN` to stderr.
    Recover {
        /// The recorded client → server bytes of the untrusted path.
        #[arg(long)]
        capture: std::path::PathBuf,
        /// The file whose 65 bytes the attacker knows.
        #[arg(long)]
        known_file: std::path::PathBuf,
    },
    /// Ciphertext-only attack (docs/SCRAMBLER.md): from the client → server bytes of one path
    /// (`proxy --record`, or a TCP stream reassembled from a capture), with no key and no known
    /// plaintext, guess every stream byte the path carried. Prints one line: `cipher=… runs=…
    /// bytes=… models=…`, and with `--truth` also `recovered=… pct=…`.
    Analyze {
        /// The recorded client → server bytes of one path.
        #[arg(long)]
        stream: std::path::PathBuf,
        /// The stream that was really sent, only to score the guesses (the attack never reads
        /// it).
        #[arg(long)]
        truth: Option<std::path::PathBuf>,
        /// Write the guessed bytes, run after run, to this file.
        #[arg(long)]
        write: Option<std::path::PathBuf>,
    },
    /// Print a new long-term secret (64 hex digits from the OS RNG) for `--key-file`; write it
    /// to a file only this user can read: `(umask 077; psp-mp keygen > server.key)`.
    Keygen,
    /// Print the public key of a `--key-file` secret (for the peer's `--pin`).
    Pubkey {
        /// The secret: 64 hex digits.
        #[arg(long)]
        key_file: std::path::PathBuf,
    },
    /// Baseline for set-up times: X25519 over one TCP connection (server with --listen); the
    /// client prints the µs of each exchange, connect included.
    Dh {
        /// Serve (else connect to ADDR).
        #[arg(long)]
        listen: bool,
        /// Address to listen on or connect to.
        addr: SocketAddr,
        /// Number of exchanges.
        #[arg(long, default_value_t = 1)]
        count: u32,
        /// Over an MPTCP connection (the baseline of `--mode kernel-mptcp`); give it on both
        /// sides.
        #[arg(long)]
        mptcp: bool,
        /// X25519 and ML-KEM-768 (the client sends its share and encapsulation key, the server
        /// its share and the ciphertext): the baseline of `--kem`. Give it on both sides.
        #[arg(long)]
        kem: bool,
        /// Client: print `TOTAL CONNECT FIRST_FLIGHT REPLY KEYS` (µs) per exchange, as
        /// `connect --setup-only` does: the connect; the keys drawn and the first message
        /// written; the whole answer read; the shared secret computed.
        #[arg(long)]
        profile: bool,
    },
}

#[derive(Args)]
struct Common {
    /// A path: `trusted,[LOCAL=]REMOTE` or `untrusted,...` (connect), `trusted,LOCAL` (listen);
    /// append `,dev=IFNAME` to bind to an interface. Give two, one of each role.
    #[arg(long = "path", required = true, num_args = 1)]
    paths: Vec<String>,
    /// Stream protection, required to match on both sides (a listener refuses a client that
    /// asks for another): aes128-gcm (default) or chacha20-poly1305 seal each segment;
    /// scramble is the papers' mode (obfuscation, no integrity: an eavesdropper on one path
    /// reads scrambled text from the ciphertext alone, `psp-mp analyze`); none is plain.
    #[arg(long, value_enum, default_value_t = CipherArg::Aes128Gcm)]
    cipher: CipherArg,
    /// dispersal (one TCP connection per path, this tool places the data) or kernel-mptcp (one
    /// MPTCP socket on the trusted path; subflows from `ip mptcp endpoint`; the kernel decides
    /// placement, also of the key exchange's two paths: docs/MULTIPATH.md).
    #[arg(long, value_enum, default_value_t = ModeArg::Dispersal)]
    mode: ModeArg,
    /// With --cipher scramble: run in clear if one side cannot scramble (the papers'
    /// fallback; psp-mp always can, so only against another implementation). Announced in the
    /// hello whatever the cipher; never turns another cipher into plain.
    #[arg(long)]
    allow_plain: bool,
    /// Per mille of the stream on the untrusted path: the most (adaptive) or exactly (--fixed).
    #[arg(long, default_value_t = 500)]
    share: u16,
    /// Exact share instead of adaptive.
    #[arg(long)]
    fixed: bool,
    /// Segment payload size in bytes: the most plaintext bytes one segment carries, 1 to 16384
    /// (a sealed segment adds a 16-byte tag).
    #[arg(
        long,
        default_value_t = 16384,
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=16384)
    )]
    segment: usize,
    /// Print progress and the rate on stderr every second, and per-path counters at the end.
    #[arg(long, short)]
    verbose: bool,
    /// Send this many bytes of "0123456789" repeated instead of stdin (iperf-style).
    #[arg(long)]
    send_bytes: Option<u64>,
    /// Discard what arrives instead of writing it to stdout.
    #[arg(long)]
    discard: bool,
    /// This host's long-term X25519 secret: a file holding 64 hex digits (`psp-mp keygen`;
    /// the raw 32-byte scalar, clamped at use as RFC 7748 says), mode 0600 or stricter, owned
    /// by root or this user; mixed into the key exchange (seed 002 §10).
    #[arg(long)]
    key_file: Option<std::path::PathBuf>,
    /// Require the peer's long-term public key (64 hex digits; `-v` prints the peer's, and
    /// `psp-mp pubkey` this host's): stops an active attacker on both paths.
    #[arg(long)]
    pin: Option<String>,
    /// When a path fails, go on over the other one (re-sending what the peer has not
    /// acknowledged) instead of ending the stream. Give it on both sides.
    #[arg(long)]
    continue_on_path_failure: bool,
    /// With --continue-on-path-failure and cipher scramble or none: allow the stream to go on
    /// over the untrusted path alone, where an eavesdropper then sees all of it.
    #[arg(long, requires = "continue_on_path_failure")]
    allow_untrusted_only: bool,
    /// Seconds a path may leave data unacknowledged (TCP_USER_TIMEOUT) or stay silent to
    /// keepalive probes before it counts as failed.
    #[arg(long, default_value_t = 10)]
    path_timeout: u64,
    /// Connect with the thesis' three-round-trip key exchange (SEP Request/Accept, SMKEX,
    /// Confirm) instead of the one-round-trip one, for comparison (in kernel-mptcp mode
    /// single-path SEP).
    #[arg(long)]
    faithful_handshake: bool,
    /// ML-KEM-768 beside X25519 in the key exchange (the hybrid post-quantum handshake: a
    /// recording of the set-up stays secret to an attacker who later breaks X25519): off
    /// (default), prefer (used when the peer runs it too), require (no stream without it).
    /// Both sides need this version once it is not off.
    #[arg(long, value_enum, default_value_t = KemArg::Off)]
    kem: KemArg,
}

#[derive(Clone, Copy, ValueEnum)]
enum KemArg {
    Off,
    Prefer,
    Require,
}

#[derive(Clone, Copy, ValueEnum)]
enum ModeArg {
    Dispersal,
    KernelMptcp,
}

#[derive(Clone, Copy, ValueEnum)]
enum CipherArg {
    #[value(name = "aes128-gcm")]
    Aes128Gcm,
    #[value(name = "chacha20-poly1305")]
    ChaCha20Poly1305,
    Scramble,
    None,
}

fn parse_path(s: &str, listen: bool) -> Result<Path, String> {
    let mut parts = s.split(',');
    let role = match parts.next() {
        Some("trusted") => PathRole::Trusted,
        Some("untrusted") => PathRole::Untrusted,
        _ => return Err(format!("path `{s}`: start with `trusted,` or `untrusted,`")),
    };
    let addrs = parts
        .next()
        .ok_or_else(|| format!("path `{s}`: no address"))?;
    let addr = |a: &str| {
        a.parse::<SocketAddr>()
            .map_err(|e| format!("path `{s}`: `{a}`: {e}"))
    };
    let (local, remote) = if listen {
        (Some(addr(addrs)?), None)
    } else if let Some((l, r)) = addrs.split_once('=') {
        let local = match l.parse::<core::net::IpAddr>() {
            Ok(ip) => SocketAddr::new(ip, 0),
            Err(_) => addr(l)?,
        };
        (Some(local), Some(addr(r)?))
    } else {
        (None, Some(addr(addrs)?))
    };
    let mut p = Path::new(role, local, remote);
    for extra in parts {
        match extra.split_once('=') {
            Some(("dev", d)) => p.device = Some(d.to_owned()),
            _ => return Err(format!("path `{s}`: unknown option `{extra}`")),
        }
    }
    Ok(p)
}

fn hex32(what: &str, text: &str) -> Result<[u8; 32], String> {
    let text = text.trim();
    let mut out = [0u8; 32];
    if text.len() != 64 {
        return Err(format!("{what}: want 64 hex digits, got {}", text.len()));
    }
    // ASCII only, so the slices below fall on character boundaries.
    if !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!("{what}: not hex"));
    }
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&text[2 * i..2 * i + 2], 16)
            .map_err(|_| format!("{what}: not hex"))?;
    }
    Ok(out)
}

/// A long-term secret from a key file, under the gateway daemon's rules (the `psp-keyfile`
/// crate: a regular file of mode 0600 or stricter, owned by root or this user, one hex key).
fn read_key(path: &std::path::Path) -> Result<LongTermKey, String> {
    let rules = psp_keyfile::Rules {
        also_owner: None,
        keygen: "psp-mp keygen",
        create: "psp-mp keygen",
    };
    let bytes = psp_keyfile::read(path, &rules).map_err(|e| format!("--key-file: {e}"))?;
    let secret: [u8; 32] = bytes.as_slice().try_into().map_err(|_| {
        format!(
            "--key-file: {} holds a {}-byte key; want 32 bytes (64 hex digits, `psp-mp keygen`)",
            path.display(),
            bytes.len()
        )
    })?;
    Ok(LongTermKey::from_bytes(secret))
}

fn to_hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

impl Common {
    fn options(&self) -> Result<Options, String> {
        let share = if self.fixed {
            SharePolicy::Fixed {
                untrusted_permille: self.share.min(1000),
            }
        } else {
            SharePolicy::Adaptive {
                max_untrusted_permille: self.share.min(1000),
            }
        };
        Ok(Options {
            mode: match self.mode {
                ModeArg::Dispersal => Mode::Dispersal,
                ModeArg::KernelMptcp => Mode::KernelMptcp,
            },
            cipher: match self.cipher {
                CipherArg::Scramble => Cipher::Scramble,
                CipherArg::Aes128Gcm => Cipher::Aes128Gcm,
                CipherArg::ChaCha20Poly1305 => Cipher::ChaCha20Poly1305,
                CipherArg::None => Cipher::None,
            },
            allow_plain: self.allow_plain || matches!(self.cipher, CipherArg::None),
            share,
            segment_len: self.segment,
            static_key: self.key_file.as_deref().map(read_key).transpose()?,
            pinned_peer: self.pin.as_deref().map(|p| hex32("--pin", p)).transpose()?,
            on_path_failure: if self.continue_on_path_failure {
                OnPathFailure::Continue {
                    allow_untrusted_only: self.allow_untrusted_only,
                }
            } else {
                OnPathFailure::Close
            },
            path_timeout: Duration::from_secs(self.path_timeout.max(1)),
            compact_handshake: !self.faithful_handshake,
            kem: match self.kem {
                KemArg::Off => KemMode::Off,
                KemArg::Prefer => KemMode::Preferred,
                KemArg::Require => KemMode::Required,
            },
            ..Options::default()
        })
    }

    fn paths(&self, listen: bool) -> Result<Vec<Path>, String> {
        self.paths.iter().map(|p| parse_path(p, listen)).collect()
    }
}

/// `listen`'s usage rules, checked before anything is bound (a refusal exits 2): several
/// streams never share stdout, and `--out-dir` never overwrites a file.
fn check_listen(
    count: u32,
    out_dir: Option<&std::path::Path>,
    discard: bool,
) -> Result<(), String> {
    if count > 1 && out_dir.is_none() && !discard {
        return Err(format!(
            "listen --count {count} would write {count} streams into one stdout; give --out-dir \
             DIR (one file per client: DIR/1, DIR/2, ...) or --discard"
        ));
    }
    let Some(dir) = out_dir else {
        return Ok(());
    };
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("--out-dir: {}: {e}", dir.display())),
    };
    let mut taken: Vec<(u32, String)> = entries
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            let stem = name.strip_suffix(".part").unwrap_or(&name);
            // Only the names this listener writes (`01` is not one).
            let k = stem.parse::<u32>().ok()?;
            ((1..=count).contains(&k) && k.to_string() == stem).then_some((k, name))
        })
        .collect();
    taken.sort_unstable();
    match taken.first() {
        Some((_, name)) => Err(format!(
            "--out-dir: {} exists; give a directory without the files 1..{count}",
            dir.join(name).display()
        )),
        None => Ok(()),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Command::Listen {
        common,
        count,
        out_dir,
    } = &cli.command
        && let Err(e) = check_listen(*count, out_dir.as_deref(), common.discard)
    {
        eprintln!("psp-mp: {e}");
        return ExitCode::from(2);
    }
    // One thread: every step of a set-up is a wake-up, and cross-thread wake-ups make set-ups
    // slower (docs/MULTIPATH.md, "Implementation notes").
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("psp-mp: tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("psp-mp: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> Result<(), String> {
    match cli.command {
        Command::Listen {
            common,
            count,
            out_dir,
        } => {
            let paths = common.paths(true)?;
            if let Some(dir) = &out_dir {
                std::fs::create_dir_all(dir)
                    .map_err(|e| format!("--out-dir: {}: {e}", dir.display()))?;
            }
            let mut l = match common.mode {
                ModeArg::Dispersal => Listener::bind(&paths).await,
                ModeArg::KernelMptcp => Listener::bind_kernel_mptcp(&paths).await,
            }
            .map_err(|e| e.to_string())?;
            // One client after another; each stream goes whole to its own place.
            for k in 1..=count {
                let s = l
                    .accept(&common.options()?)
                    .await
                    .map_err(|e| e.to_string())?;
                // Stdin is one stream: only a single client gets it.
                let input = if count == 1 {
                    Input::Stdin
                } else {
                    Input::Nothing
                };
                let Some(dir) = &out_dir else {
                    let out = if common.discard {
                        Output::Discard
                    } else {
                        Output::Stdout
                    };
                    pump(s, &common, input, out).await?;
                    continue;
                };
                let (part, done) = (dir.join(format!("{k}.part")), dir.join(k.to_string()));
                let file = tokio::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(&part)
                    .await
                    .map_err(|e| format!("{}: {e}", part.display()))?;
                pump(s, &common, input, Output::File(file, part.clone())).await?;
                // Complete: the stream ended cleanly and every byte is in the file.
                std::fs::rename(&part, &done)
                    .map_err(|e| format!("{} -> {}: {e}", part.display(), done.display()))?;
            }
            Ok(())
        }
        Command::Connect { common, setup_only } => {
            let paths = common.paths(false)?;
            let options = common.options()?;
            if let Some(n) = setup_only {
                let mut out = std::io::stdout().lock();
                for _ in 0..n {
                    let t = Instant::now();
                    let mut s = psp_multipath::connect(&paths, &options)
                        .await
                        .map_err(|e| e.to_string())?;
                    let us = t.elapsed().as_micros();
                    let p = s.setup_profile();
                    // total, then its parts: connects, hellos + SEP/SMKEX, binding tags; then
                    // the handshake's: first flight written, the answer's first bytes, keys.
                    let _ = writeln!(
                        out,
                        "{us} {} {} {} {} {} {}",
                        p.connect.as_micros(),
                        p.handshake.as_micros(),
                        p.binding.as_micros(),
                        p.first_flight.as_micros(),
                        p.reply.as_micros(),
                        p.keys.as_micros()
                    );
                    s.shutdown().await.map_err(|e| e.to_string())?;
                    let mut sink = Vec::new();
                    s.read_to_end(&mut sink).await.map_err(|e| e.to_string())?;
                }
                return Ok(());
            }
            let s = psp_multipath::connect(&paths, &options)
                .await
                .map_err(|e| e.to_string())?;
            let out = if common.discard {
                Output::Discard
            } else {
                Output::Stdout
            };
            pump(s, &common, Input::Stdin, out).await
        }
        Command::Keygen => {
            let mut secret = zeroize::Zeroizing::new([0u8; 32]);
            getrandom::fill(&mut secret[..]).map_err(|e| format!("OS RNG: {e}"))?;
            let text = zeroize::Zeroizing::new(to_hex(&secret[..]));
            println!("{}", text.as_str());
            Ok(())
        }
        Command::Pubkey { key_file } => {
            println!("{}", to_hex(&read_key(&key_file)?.public_key()));
            Ok(())
        }
        Command::Recover {
            capture,
            known_file,
        } => recover(&capture, &known_file),
        Command::Analyze {
            stream,
            truth,
            write,
        } => analyze(&stream, truth.as_deref(), write.as_deref()),
        Command::Proxy {
            listen,
            to,
            replace_share,
            record,
        } => {
            let l = TcpListener::bind(listen)
                .await
                .map_err(|e| format!("{listen}: {e}"))?;
            let mode = if replace_share {
                attack::Mode::ReplaceShare
            } else {
                attack::Mode::Record
            };
            let capture = match record {
                Some(p) => Capture::with_file(
                    std::fs::File::create(&p).map_err(|e| format!("{}: {e}", p.display()))?,
                ),
                None => Capture::default(),
            };
            attack::relay(l, to, mode, capture)
                .await
                .map_err(|e| e.to_string())
        }
        Command::Dh {
            listen,
            addr,
            count,
            mptcp,
            kem,
            profile,
        } => dh(listen, addr, count, mptcp, kem, profile).await,
    }
}

fn recover(capture: &std::path::Path, known_file: &std::path::Path) -> Result<(), String> {
    let cap = std::fs::read(capture).map_err(|e| format!("{}: {e}", capture.display()))?;
    let file = std::fs::read(known_file).map_err(|e| format!("{}: {e}", known_file.display()))?;
    let segs = attack::segments_in_capture(&cap);
    let (offset, payload) = segs
        .iter()
        .find(|(_, p)| p.len() > 65)
        .ok_or("no segment longer than 65 bytes in the capture")?;
    let start = usize::try_from(*offset).map_err(|e| e.to_string())?;
    let known: [u8; 65] = file
        .get(start..start + 65)
        .and_then(|k| k.try_into().ok())
        .ok_or("the known file is shorter than the segment's offset + 65")?;
    let plain = attack::recover_run(payload, &known);
    std::io::stdout()
        .write_all(&plain)
        .map_err(|e| format!("stdout: {e}"))?;
    eprintln!("{offset} {}", plain.len());
    Ok(())
}

fn analyze(
    stream: &std::path::Path,
    truth: Option<&std::path::Path>,
    write: Option<&std::path::Path>,
) -> Result<(), String> {
    let read = |p: &std::path::Path| std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()));
    let a = attack::analyze_path(&read(stream)?);
    let mut line = format!(
        "cipher={} runs={} bytes={} models={}",
        a.cipher.map_or("unknown", Cipher::name),
        a.guesses.len(),
        a.bytes(),
        a.models
            .iter()
            .map(|(m, n)| format!("{}:{n}", m.name()))
            .collect::<Vec<_>>()
            .join(",")
    );
    if let Some(t) = truth {
        let got = a.recovered(&read(t)?);
        let pct = if a.bytes() == 0 {
            0.0
        } else {
            got as f64 * 100.0 / a.bytes() as f64
        };
        line += &format!(" recovered={got} pct={pct:.2}");
    }
    if let Some(w) = write {
        let all: Vec<u8> = a
            .guesses
            .iter()
            .flat_map(|(_, g)| g.iter().copied())
            .collect();
        std::fs::write(w, all).map_err(|e| format!("{}: {e}", w.display()))?;
    }
    println!("{line}");
    Ok(())
}

/// CPU time this process's threads have run so far (`/proc/self/task/*/schedstat`, in ns), or
/// `None` where the kernel does not say.
fn cpu_time() -> Option<Duration> {
    let mut ns = 0u64;
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let stat = std::fs::read_to_string(task.ok()?.path().join("schedstat")).ok()?;
        ns += stat.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(Duration::from_nanos(ns))
}

/// What `pump` sends (`--send-bytes` replaces either).
enum Input {
    Stdin,
    /// An empty stream: the fins only.
    Nothing,
}

/// Where `pump` writes what arrives.
enum Output {
    Stdout,
    Discard,
    /// A file, and its name for errors.
    File(tokio::fs::File, std::path::PathBuf),
}

/// Input → stream and stream → output until both ends close.
async fn pump(
    s: MultipathStream,
    common: &Common,
    input: Input,
    output: Output,
) -> Result<(), String> {
    let (verbose, send_bytes) = (common.verbose, common.send_bytes);
    let cpu_start = cpu_time();
    if verbose {
        eprintln!(
            "psp-mp: connected, cipher {}, {}, {}, set-up {} µs",
            s.cipher().name(),
            if s.kem() {
                "kem on (x25519 + ml-kem-768)"
            } else {
                "kem off (x25519 only)"
            },
            match (s.smkex(), common.mode) {
                (true, ModeArg::Dispersal) => "smkex over both paths",
                (true, ModeArg::KernelMptcp) => "smkex on the one mptcp connection",
                (false, _) => "single-path sep",
            },
            s.setup_time().as_micros()
        );
        if let Some(k) = s.peer_static() {
            eprintln!(
                "psp-mp: peer's long-term key {} (pin it with --pin)",
                to_hex(&k)
            );
        }
    }
    let (mut r, mut w) = tokio::io::split(s);
    let up = async move {
        if let Some(mut left) = send_bytes {
            let buf: Vec<u8> = b"0123456789".iter().copied().cycle().take(64_000).collect();
            while left > 0 {
                let n = usize::try_from(left).map_or(buf.len(), |l| l.min(buf.len()));
                w.write_all(&buf[..n]).await.map_err(|e| e.to_string())?;
                left -= n as u64;
            }
        } else if matches!(input, Input::Stdin) {
            let mut stdin = tokio::io::stdin();
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                let n = stdin
                    .read(&mut buf)
                    .await
                    .map_err(|e| format!("stdin: {e}"))?;
                if n == 0 {
                    break;
                }
                w.write_all(&buf[..n]).await.map_err(|e| e.to_string())?;
            }
        }
        w.shutdown().await.map_err(|e| e.to_string())?;
        Ok::<_, String>(w)
    };
    let down = async move {
        let (mut out, name): (Option<Box<dyn tokio::io::AsyncWrite + Unpin>>, String) = match output
        {
            Output::Stdout => (Some(Box::new(tokio::io::stdout())), "stdout".into()),
            Output::Discard => (None, String::new()),
            Output::File(f, p) => (Some(Box::new(f)), p.display().to_string()),
        };
        let mut buf = vec![0u8; 64 * 1024];
        let start = Instant::now();
        let (mut total, mut last, mut last_t) = (0u64, 0u64, Instant::now());
        loop {
            let n = r.read(&mut buf).await.map_err(|e| e.to_string())?;
            if n == 0 {
                break;
            }
            if let Some(out) = &mut out {
                out.write_all(&buf[..n])
                    .await
                    .map_err(|e| format!("{name}: {e}"))?;
            }
            total += n as u64;
            if verbose && last_t.elapsed() >= Duration::from_secs(1) {
                let rate = (total - last) as f64 * 8.0 / last_t.elapsed().as_secs_f64() / 1e6;
                eprintln!(
                    "psp-mp: {} MB received, {rate:.1} Mbit/s",
                    total / 1_000_000
                );
                (last, last_t) = (total, Instant::now());
            }
        }
        if let Some(out) = &mut out {
            out.flush().await.map_err(|e| format!("{name}: {e}"))?;
        }
        if verbose && total > 0 {
            let secs = start.elapsed().as_secs_f64();
            eprintln!(
                "psp-mp: received {total} bytes in {secs:.3} s, {:.1} Mbit/s",
                total as f64 * 8.0 / secs / 1e6
            );
        }
        Ok::<_, String>(r)
    };
    let (w, r) = tokio::try_join!(up, down)?;
    let s = r.unsplit(w);
    if verbose && let (Some(a), Some(b)) = (cpu_start, cpu_time()) {
        // For the testbed's CPU cost per byte (client and server of one transfer).
        eprintln!(
            "psp-mp: cpu {} us for the stream ({})",
            b.saturating_sub(a).as_micros(),
            s.cipher().name()
        );
    }
    if verbose {
        for p in s.stats() {
            eprintln!(
                "psp-mp: path {:?} {}: sent {} B in {} segments, received {} B in {} segments, rtt {} µs, retransmits {}",
                p.role,
                p.peer.map_or_else(|| "?".to_owned(), |a| a.to_string()),
                p.bytes_sent,
                p.segments_sent,
                p.bytes_received,
                p.segments_received,
                p.rtt_us.map_or_else(|| "?".to_owned(), |v| v.to_string()),
                p.retransmits
                    .map_or_else(|| "?".to_owned(), |v| v.to_string()),
            );
            if let Some(f) = &p.failure {
                eprintln!(
                    "psp-mp: path {:?} FAILED after {:.3} s ({}); {}",
                    p.role,
                    f.after.as_secs_f64(),
                    f.reason,
                    if f.continued {
                        "the stream went on over the other path"
                    } else {
                        "the stream ended"
                    }
                );
            }
            if p.segments_resent + p.acks_sent + p.acks_received + p.duplicates_dropped > 0 {
                eprintln!(
                    "psp-mp: path {:?}: {} segments ({} B) re-sent here, {} acks sent, {} received, {} ignored, {} duplicates dropped",
                    p.role,
                    p.segments_resent,
                    p.bytes_resent,
                    p.acks_sent,
                    p.acks_received,
                    p.acks_ignored,
                    p.duplicates_dropped
                );
            }
        }
        for sf in s.subflows().unwrap_or_default() {
            let addr = |a: Option<SocketAddr>| a.map_or_else(|| "?".to_owned(), |a| a.to_string());
            eprintln!(
                "psp-mp: mptcp subflow {} -> {}: {} B acked, {} B received, rtt {} µs, retransmits {}",
                addr(sf.local),
                addr(sf.remote),
                sf.bytes_acked,
                sf.bytes_received,
                sf.rtt_us,
                sf.retransmits
            );
        }
    }
    Ok(())
}

/// One-path X25519 exchange: the client sends its share, the server answers with its own;
/// each side then computes the shared secret (the set-up seed 002 Fig 13 compares against).
/// With `kem` the client's share is followed by an ML-KEM-768 encapsulation key and the
/// server's by the ciphertext, and both secrets are combined as psp-core's hybrid handshake
/// does; with `mptcp` the connection is an MPTCP one.
async fn dh(
    listen: bool,
    addr: SocketAddr,
    count: u32,
    mptcp: bool,
    kem: bool,
    profile: bool,
) -> Result<(), String> {
    use psp_core::handshake::Role;
    use psp_core::handshake::kem::{KemKeyPair, encapsulate};
    use psp_core::handshake::messages::{KEM_CIPHERTEXT_LEN, KEM_KEY_LEN, KemCiphertext, KemKey};
    use psp_core::handshake::schedule::Ephemeral;
    let random = |out: &mut [u8]| getrandom::fill(out).map_err(|e| format!("OS RNG: {e}"));
    let ephemeral = || -> Result<Ephemeral, String> {
        let mut secret = [0u8; 32];
        random(&mut secret)?;
        Ok(Ephemeral::from_bytes(secret))
    };
    let proto = mptcp.then_some(socket2::Protocol::MPTCP);
    let (ask, answer) = if kem {
        (32 + KEM_KEY_LEN, 32 + KEM_CIPHERTEXT_LEN)
    } else {
        (32, 32)
    };
    if listen {
        let sock = socket2::Socket::new(
            socket2::Domain::for_address(addr),
            socket2::Type::STREAM,
            proto,
        )
        .map_err(|e| format!("{addr}: {e}"))?;
        sock.set_reuse_address(true)
            .map_err(|e| format!("{addr}: {e}"))?;
        sock.bind(&addr.into())
            .map_err(|e| format!("{addr}: {e}"))?;
        sock.listen(128).map_err(|e| format!("{addr}: {e}"))?;
        sock.set_nonblocking(true)
            .map_err(|e| format!("{addr}: {e}"))?;
        let l = TcpListener::from_std(sock.into()).map_err(|e| format!("{addr}: {e}"))?;
        for _ in 0..count {
            let (mut s, _) = l.accept().await.map_err(|e| e.to_string())?;
            s.set_nodelay(true).map_err(|e| e.to_string())?;
            let mut peer = vec![0u8; ask];
            s.read_exact(&mut peer).await.map_err(|e| e.to_string())?;
            let eph = ephemeral()?;
            let mut reply = eph.public_share().to_vec();
            let secret = if kem {
                let ek: &[u8; KEM_KEY_LEN] = peer[32..].try_into().map_err(|_| "short key")?;
                let ek =
                    KemKey::new(ek).ok_or("the client's ML-KEM key fails the modulus check")?;
                let mut m = [0u8; 32];
                random(&mut m)?;
                let (ct, k) = encapsulate(&ek, &m);
                reply.extend_from_slice(&ct.0);
                Some(k)
            } else {
                None
            };
            s.write_all(&reply).await.map_err(|e| e.to_string())?;
            let share: [u8; 32] = peer[..32].try_into().map_err(|_| "short share")?;
            eph.complete_hybrid(Role::Responder, secret.as_ref(), &share, None, None)
                .map_err(|e| e.to_string())?;
        }
        return Ok(());
    }
    let mut out = std::io::stdout().lock();
    for _ in 0..count {
        let t = Instant::now();
        let sock = socket2::Socket::new(
            socket2::Domain::for_address(addr),
            socket2::Type::STREAM,
            proto,
        )
        .map_err(|e| format!("{addr}: {e}"))?;
        sock.set_nonblocking(true)
            .map_err(|e| format!("{addr}: {e}"))?;
        let mut s = tokio::net::TcpSocket::from_std_stream(sock.into())
            .connect(addr)
            .await
            .map_err(|e| e.to_string())?;
        s.set_nodelay(true).map_err(|e| e.to_string())?;
        let connected = t.elapsed();
        let eph = ephemeral()?;
        let mut first = eph.public_share().to_vec();
        let pair = if kem {
            let mut seed = zeroize::Zeroizing::new([0u8; 64]);
            random(&mut seed[..])?;
            let d: &[u8; 32] = seed[..32].try_into().map_err(|_| "seed")?;
            let z: &[u8; 32] = seed[32..].try_into().map_err(|_| "seed")?;
            let pair = KemKeyPair::from_seed(d, z);
            first.extend_from_slice(pair.encapsulation_key().as_bytes());
            Some(pair)
        } else {
            None
        };
        s.write_all(&first).await.map_err(|e| e.to_string())?;
        let written = t.elapsed();
        let mut peer = vec![0u8; answer];
        s.read_exact(&mut peer).await.map_err(|e| e.to_string())?;
        let read = t.elapsed();
        let secret = match &pair {
            Some(p) => {
                let mut ct = KemCiphertext([0; KEM_CIPHERTEXT_LEN]);
                ct.0.copy_from_slice(&peer[32..]);
                Some(p.decapsulate(&ct))
            }
            None => None,
        };
        let share: [u8; 32] = peer[..32].try_into().map_err(|_| "short share")?;
        eph.complete_hybrid(Role::Initiator, secret.as_ref(), &share, None, None)
            .map_err(|e| e.to_string())?;
        let total = t.elapsed();
        let _ = if profile {
            writeln!(
                out,
                "{} {} {} {} {}",
                total.as_micros(),
                connected.as_micros(),
                (written - connected).as_micros(),
                (read - written).as_micros(),
                (total - read).as_micros()
            )
        } else {
            writeln!(out, "{}", total.as_micros())
        };
    }
    Ok(())
}
