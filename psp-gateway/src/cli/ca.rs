//! `psp-gateway ca`: the network CA's command line. `init` makes a CA directory (its key, its
//! self-signed certificate, the serial counter, the revoked serials), `sign` issues a host
//! certificate, `revoke` signs a new revocation list.
//!
//! The CA directory holds the network's one secret that no gateway needs: gateways carry only
//! `ca.crt`, their own certificate and the latest list, so the directory can (and should) live
//! on a machine that is offline. Certificates and lists are written as the hex of psp-core's
//! `pki` encoding, one line (`cli/cert.rs` reads them back). One command at a time per
//! directory: nothing here locks it.

use core::net::IpAddr;
use std::fs::{DirBuilder, OpenOptions};
use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use psp_core::SigningKey;
use psp_core::pki::{
    CertFields, Certificate, Kind, MAX_ADDRS, MAX_MACS, MAX_NAME_LEN, MAX_REVOKED, RevocationList,
};
use zeroize::Zeroizing;

use super::Failure;
use super::cert::{load_cert, load_list};
use crate::civil::{now, utc};

/// The CA's signing key (an Ed25519 seed, hex), mode 0600.
const KEY: &str = "ca.key";
/// The CA's self-signed certificate, hex.
const CERT: &str = "ca.crt";
/// The next serial `sign` gives, decimal.
const NEXT_SERIAL: &str = "next-serial";
/// The revoked serials, one per line.
const REVOKED: &str = "revoked";
/// The latest revocation list, hex.
const CRL: &str = "crl";

/// Certificates start this long before they are signed: the clock-skew allowance.
const BACKDATE: u64 = 3600;
const DAY: u64 = 86_400;

/// Arguments of `ca`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// What to do.
    #[command(subcommand)]
    command: Sub,
}

#[derive(Debug, clap::Subcommand)]
enum Sub {
    /// Create a CA directory: a fresh CA key and its self-signed certificate.
    ///
    /// Writes DIR/ca.key (the CA's Ed25519 seed, hex, mode 0600), DIR/ca.crt (its
    /// self-signed certificate, serial 0), DIR/next-serial ("1") and DIR/revoked (empty), and
    /// prints the certificate's path and the CA's public key. The CA key never needs to be on
    /// a gateway: gateways take ca.crt, their own certificate and the latest revocation list.
    /// Keep DIR on an offline machine.
    Init(InitArgs),
    /// Issue a host certificate under the next serial.
    ///
    /// Binds the host's identity public key to its name, MACs and addresses, signed by the CA
    /// key in DIR. Valid from 1 hour back-dated (the clock-skew allowance) to --days from now.
    /// Takes the serial from DIR/next-serial and counts it up; prints the serial and the file.
    Sign(SignArgs),
    /// Revoke certificates: sign a new revocation list.
    ///
    /// Adds the serials to DIR/revoked and signs a list of all of them, numbered one above the
    /// last (DIR/crl), for the gateways to take. At most 128 serials fit in a list.
    Revoke(RevokeArgs),
}

/// Arguments of `ca init`.
#[derive(Debug, clap::Args)]
struct InitArgs {
    /// The CA directory to create (mode 0700; an existing directory is used as it is, but
    /// none of its CA files may exist).
    #[arg(long, value_name = "DIR")]
    dir: PathBuf,
    /// The CA's name in its certificate: 1 to 64 letters, digits, '.', '-' or '_'.
    #[arg(long, value_name = "NAME", default_value = "psp-ca")]
    name: String,
    /// Days the CA certificate is valid, from 1 hour back-dated.
    #[arg(long, value_name = "N", default_value_t = 3650,
          value_parser = clap::value_parser!(u64).range(1..=36_500))]
    days: u64,
}

/// Arguments of `ca sign`.
#[derive(Debug, clap::Args)]
struct SignArgs {
    /// The CA directory (`ca init`); its ca.key must be mode 0600 and yours or root's.
    #[arg(long, value_name = "DIR")]
    dir: PathBuf,
    /// The host's name: 1 to 64 letters, digits, '.', '-' or '_'.
    #[arg(long, value_name = "NAME")]
    name: String,
    /// The host's identity public key, as `psp-gateway pubkey` or `keygen --identity` print it
    /// (Ed25519, 64 hex digits).
    #[arg(long, value_name = "HEX")]
    identity: String,
    /// A MAC the host sends from (aa:bb:cc:dd:ee:ff, unicast). Repeat for more (1 to 8).
    #[arg(long, value_name = "MAC", required = true)]
    mac: Vec<String>,
    /// An address the host uses, with its subnet's prefix length (10.0.0.1/24, fd00::1/64).
    /// Repeat for more (up to 8).
    #[arg(long, value_name = "ADDR/PREFIX")]
    addr: Vec<String>,
    /// Days the certificate is valid (from 1 hour back-dated).
    #[arg(long, value_name = "N", default_value_t = 365,
          value_parser = clap::value_parser!(u64).range(1..=36_500))]
    days: u64,
    /// Key-server priority: the lowest is elected (the lowest MAC breaks a tie); 255 = never
    /// the key server.
    #[arg(long, value_name = "P", default_value_t = 128)]
    priority: u8,
    /// Write the certificate here (hex, one line, mode 0644).
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    /// Replace FILE if it exists.
    #[arg(long)]
    force: bool,
}

/// Arguments of `ca revoke`.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("what").required(true).multiple(true).args(["serial", "cert"])))]
struct RevokeArgs {
    /// The CA directory (`ca init`).
    #[arg(long, value_name = "DIR")]
    dir: PathBuf,
    /// Revoke this serial (`cert print` shows a certificate's). Repeatable.
    #[arg(long, value_name = "N")]
    serial: Vec<u64>,
    /// Revoke this certificate (a file `ca sign` wrote; it must be this CA's). Repeatable.
    #[arg(long, value_name = "FILE")]
    cert: Vec<PathBuf>,
    /// Also write the new list here (hex, one line, mode 0644), besides DIR/crl.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
}

/// Runs `ca`.
pub(crate) fn run(args: &Args) -> Result<(), Failure> {
    match &args.command {
        Sub::Init(a) => init(a),
        Sub::Sign(a) => sign(a),
        Sub::Revoke(a) => revoke(a),
    }
}

fn init(args: &InitArgs) -> Result<(), Failure> {
    check_name("--name", &args.name)?;
    let dir = &args.dir;
    match DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && dir.is_dir() => {}
        Err(e) => return Err(Failure::input(format_args!("{}: {e}", dir.display()))),
    }
    for name in [KEY, CERT, NEXT_SERIAL, REVOKED, CRL] {
        let path = dir.join(name);
        if path.symlink_metadata().is_ok() {
            return Err(Failure::input(format_args!(
                "{} exists: {} already holds a CA (a new one needs an empty directory)",
                path.display(),
                dir.display()
            )));
        }
    }
    let mut seed = Zeroizing::new([0u8; 32]);
    getrandom::fill(&mut *seed).map_err(|e| Failure::input(format_args!("OS RNG: {e}")))?;
    let key = SigningKey::from_seed(&seed)
        .map_err(|e| Failure::input(format_args!("the CA key: {e}")))?;
    let public = *key.public_key().as_bytes();
    let now = now();
    let mut fields = CertFields::new(Kind::Ca, 0, public, &args.name);
    fields.not_before = now.saturating_sub(BACKDATE);
    fields.not_after = now.saturating_add(args.days * DAY);
    let cert = Certificate::sign(&fields, &key)
        .map_err(|e| Failure::input(format_args!("the CA certificate: {e}")))?;

    let mut text = Zeroizing::new(hex::encode(*seed));
    text.push('\n');
    create_new(&dir.join(KEY), text.as_bytes(), 0o600)?;
    let cert_path = dir.join(CERT);
    create_new(&cert_path, hex_line(cert.as_bytes()).as_bytes(), 0o644)?;
    create_new(&dir.join(NEXT_SERIAL), b"1\n", 0o600)?;
    create_new(&dir.join(REVOKED), b"", 0o600)?;
    println!("certificate: {}", cert_path.display());
    println!("public_key: {}", hex::encode(public));
    println!("not_after: {}", utc(fields.not_after));
    Ok(())
}

fn sign(args: &SignArgs) -> Result<(), Failure> {
    check_name("--name", &args.name)?;
    let identity = parse_identity(&args.identity)?;
    let mut fields = CertFields::new(Kind::Host, 0, identity, &args.name);
    fields.priority = args.priority;
    if args.mac.len() > MAX_MACS {
        return Err(Failure::usage(format_args!(
            "--mac: {} given; a certificate holds at most {MAX_MACS}",
            args.mac.len()
        )));
    }
    for text in &args.mac {
        let mac = parse_mac(text)?;
        if fields.names_mac(&mac) {
            return Err(Failure::usage(format_args!("--mac: {text} given twice")));
        }
        fields.push_mac(mac);
    }
    if args.addr.len() > MAX_ADDRS {
        return Err(Failure::usage(format_args!(
            "--addr: {} given; a certificate holds at most {MAX_ADDRS}",
            args.addr.len()
        )));
    }
    for text in &args.addr {
        let (addr, prefix) = parse_addr(text)?;
        if fields.names_addr(addr) {
            return Err(Failure::usage(format_args!("--addr: {addr} given twice")));
        }
        fields.push_addr(addr, prefix);
    }
    let out = &args.out;
    if !args.force && out.symlink_metadata().is_ok() {
        return Err(Failure::input(format_args!(
            "{} exists (--force replaces it)",
            out.display()
        )));
    }

    let (key, ca) = load_ca(&args.dir)?;
    let serial_path = args.dir.join(NEXT_SERIAL);
    let serial = read_serial(&serial_path)?;
    let now = now();
    fields.serial = serial;
    fields.not_before = now.saturating_sub(BACKDATE);
    fields.not_after = now.saturating_add(args.days * DAY);
    let cert = Certificate::sign(&fields, &key)
        .map_err(|e| Failure::input(format_args!("the certificate: {e}")))?;
    // The serial is spent before the certificate exists: a failure below wastes a number,
    // never gives one twice.
    replace(&serial_path, format!("{}\n", serial + 1).as_bytes(), 0o600)?;
    let text = hex_line(cert.as_bytes());
    if args.force {
        replace(out, text.as_bytes(), 0o644)?;
    } else {
        create_new(out, text.as_bytes(), 0o644)?;
    }
    if fields.not_after > ca.fields().not_after {
        eprintln!(
            "psp-gateway: warning: the certificate outlives the CA certificate (until {}): \
             it is valid only as long as ca.crt is",
            utc(ca.fields().not_after)
        );
    }
    println!("serial: {serial}");
    println!("file: {}", out.display());
    println!("not_after: {}", utc(fields.not_after));
    Ok(())
}

fn revoke(args: &RevokeArgs) -> Result<(), Failure> {
    let (key, _) = load_ca(&args.dir)?;
    let ca = key.public_key();
    let next = read_serial(&args.dir.join(NEXT_SERIAL))?;
    let mut added = args.serial.clone();
    for path in &args.cert {
        let cert = load_cert(path)?;
        cert.verify(&ca, 0, u64::MAX).map_err(|_| {
            Failure::input(format_args!("{}: not issued by this CA", path.display()))
        })?;
        added.push(cert.fields().serial);
    }
    for &s in &added {
        if s == 0 {
            return Err(Failure::usage(
                "serial 0 is the CA's own certificate: make a new CA instead",
            ));
        }
        if s >= next {
            return Err(Failure::usage(format_args!(
                "serial {s} was never issued (the next is {next})"
            )));
        }
    }

    let revoked_path = args.dir.join(REVOKED);
    let mut serials = read_revoked(&revoked_path)?;
    for s in added.iter().copied() {
        if !serials.contains(&s) {
            serials.push(s);
        }
    }
    serials.sort_unstable();
    if serials.len() > MAX_REVOKED {
        return Err(Failure::input(format_args!(
            "{} serials would be revoked; a revocation list holds at most {MAX_REVOKED}: \
             issue a new CA (or let expired certificates drop off {})",
            serials.len(),
            revoked_path.display()
        )));
    }
    let crl_path = args.dir.join(CRL);
    let number = match crl_path.symlink_metadata() {
        Ok(_) => {
            let last = load_list(&crl_path)?;
            last.verify(&ca).map_err(|e| {
                Failure::input(format_args!("{}: {e} (altered?)", crl_path.display()))
            })?;
            last.number().checked_add(1).ok_or_else(|| {
                Failure::input(format_args!("{}: no list number left", crl_path.display()))
            })?
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => 1,
        Err(e) => return Err(Failure::input(format_args!("{}: {e}", crl_path.display()))),
    };
    let list = RevocationList::sign(number, now(), &serials, &key)
        .map_err(|e| Failure::input(format_args!("the revocation list: {e}")))?;

    let lines: String = serials.iter().map(|s| format!("{s}\n")).collect();
    replace(&revoked_path, lines.as_bytes(), 0o600)?;
    let text = hex_line(list.as_bytes());
    replace(&crl_path, text.as_bytes(), 0o644)?;
    if let Some(out) = &args.out {
        replace(out, text.as_bytes(), 0o644)?;
    }
    let shown: Vec<String> = list.serials().iter().map(u64::to_string).collect();
    println!("number: {number}");
    println!("serials: {}", shown.join(" "));
    println!("file: {}", crl_path.display());
    if let Some(out) = &args.out {
        println!("file: {}", out.display());
    }
    Ok(())
}

/// The CA's key (DIR/ca.key, through the key-file rules) and its certificate (DIR/ca.crt),
/// checked to belong together.
fn load_ca(dir: &Path) -> Result<(SigningKey, Certificate), Failure> {
    let key_path = dir.join(KEY);
    let seed = crate::config::read_key_file(&key_path).map_err(Failure::input)?;
    let seed: &[u8; 32] = seed.as_slice().try_into().map_err(|_| {
        Failure::input(format_args!(
            "{} holds {} bytes; a CA key is 32 (psp-gateway ca init)",
            key_path.display(),
            seed.len()
        ))
    })?;
    let key = SigningKey::from_seed(seed)
        .map_err(|e| Failure::input(format_args!("{}: {e}", key_path.display())))?;
    let cert_path = dir.join(CERT);
    let cert = load_cert(&cert_path)?;
    if cert.fields().kind != Kind::Ca || cert.fields().public_key != *key.public_key().as_bytes() {
        return Err(Failure::input(format_args!(
            "{} is not the certificate of {}",
            cert_path.display(),
            key_path.display()
        )));
    }
    Ok((key, cert))
}

/// A name the format carries: 1 to 64 ASCII letters, digits, `.`, `-`, `_`.
fn check_name(flag: &str, name: &str) -> Result<(), Failure> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'-' | b'_'));
    if ok {
        Ok(())
    } else {
        Err(Failure::usage(format_args!(
            "{flag}: {name:?} is not 1 to {MAX_NAME_LEN} letters, digits, '.', '-' or '_'"
        )))
    }
}

/// A host identity's public key as `pubkey` prints it: 32 bytes, a curve point, sign bit clear
/// (what `Identity` requires, so a peer can recover it from the X25519 key).
fn parse_identity(text: &str) -> Result<[u8; 32], Failure> {
    let bytes =
        super::decode_hex(text).map_err(|e| Failure::usage(format_args!("--identity: {e}")))?;
    let key: [u8; 32] = bytes.as_slice().try_into().map_err(|_| {
        Failure::usage(format_args!(
            "--identity: {} bytes; an identity public key is 32 (64 hex digits, as \
             `psp-gateway pubkey` prints it)",
            bytes.len()
        ))
    })?;
    if psp_core::handshake::identity::x25519_of(&key).is_none() {
        return Err(Failure::usage(
            "--identity: not an Ed25519 public key (not a curve point)",
        ));
    }
    if key[31] & 0x80 != 0 {
        return Err(Failure::usage(
            "--identity: not an identity key made by `keygen --identity` (public key sign bit set)",
        ));
    }
    Ok(key)
}

/// A unicast MAC, `aa:bb:cc:dd:ee:ff`.
fn parse_mac(text: &str) -> Result<[u8; 6], Failure> {
    let mac = crate::config::parse_mac(text).ok_or_else(|| {
        Failure::usage(format_args!(
            "--mac: {text:?} is not a MAC (aa:bb:cc:dd:ee:ff)"
        ))
    })?;
    if mac[0] & 0x01 != 0 || mac == [0; 6] {
        return Err(Failure::usage(format_args!(
            "--mac: {text} is not a unicast address a host sends from"
        )));
    }
    Ok(mac)
}

/// `ADDR/PREFIX`, the prefix at most 32 (IPv4) or 128 (IPv6).
fn parse_addr(text: &str) -> Result<(IpAddr, u8), Failure> {
    let bad = || {
        Failure::usage(format_args!(
            "--addr: {text:?} is not ADDR/PREFIX (10.0.0.1/24, fd00::1/64)"
        ))
    };
    let (addr, prefix) = text.split_once('/').ok_or_else(bad)?;
    let addr: IpAddr = addr.parse().map_err(|_| bad())?;
    let prefix: u8 = prefix.parse().map_err(|_| bad())?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    if prefix > max {
        return Err(Failure::usage(format_args!(
            "--addr: {text}: the prefix length is at most {max}"
        )));
    }
    Ok((addr, prefix))
}

/// DIR/next-serial: a decimal serial ≥ 1 with room for one more.
fn read_serial(path: &Path) -> Result<u64, Failure> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Failure::input(format_args!("{}: {e}", path.display())))?;
    match text.trim().parse::<u64>() {
        Ok(n) if n != 0 && n != u64::MAX => Ok(n),
        _ => Err(Failure::input(format_args!(
            "{}: {:?} is not a serial number (1 or more, decimal)",
            path.display(),
            text.trim()
        ))),
    }
}

/// DIR/revoked: one decimal serial per line (blank lines and `#` comments skipped).
fn read_revoked(path: &Path) -> Result<Vec<u64>, Failure> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(Failure::input(format_args!("{}: {e}", path.display()))),
    };
    let mut serials = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let s = line.parse::<u64>().map_err(|_| {
            Failure::input(format_args!(
                "{} line {}: {line:?} is not a serial number",
                path.display(),
                i + 1
            ))
        })?;
        if !serials.contains(&s) {
            serials.push(s);
        }
    }
    Ok(serials)
}

/// `bytes` as hex, one line.
fn hex_line(bytes: &[u8]) -> String {
    let mut text = hex::encode(bytes);
    text.push('\n');
    text
}

/// Writes a new file (refusing an existing one), mode `mode` (less the umask's bits), synced.
fn create_new(path: &Path, bytes: &[u8], mode: u32) -> Result<(), Failure> {
    let shown = path.display();
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .map_err(|e| Failure::input(format_args!("{shown}: {e}")))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(|e| Failure::input(format_args!("{shown}: {e}")))
}

/// Replaces `path` atomically (a new file beside it, synced, renamed over it), then gives it
/// `mode`.
fn replace(path: &Path, bytes: &[u8], mode: u32) -> Result<(), Failure> {
    let shown = path.display();
    crate::state::write_atomic(path, bytes)
        .and_then(|()| std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)))
        .map_err(|e| Failure::input(format_args!("{shown}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses() {
        assert_eq!(
            parse_addr("10.0.0.1/24").unwrap(),
            ("10.0.0.1".parse().unwrap(), 24)
        );
        assert_eq!(
            parse_addr("fd00::1/128").unwrap(),
            ("fd00::1".parse().unwrap(), 128)
        );
        for bad in [
            "10.0.0.1",
            "10.0.0.1/33",
            "fd00::1/129",
            "x/1",
            "10.0.0.1/",
            "/8",
        ] {
            assert_eq!(parse_addr(bad).unwrap_err().code, 2, "{bad}");
        }
    }

    #[test]
    fn macs_and_names() {
        assert_eq!(parse_mac("02:00:00:00:00:01").unwrap(), [2, 0, 0, 0, 0, 1]);
        for bad in [
            "01:00:5e:00:00:01",
            "00:00:00:00:00:00",
            "02-00-00-00-00-01",
            "zz",
        ] {
            assert_eq!(parse_mac(bad).unwrap_err().code, 2, "{bad}");
        }
        assert!(check_name("--name", "host-1.lan_a").is_ok());
        for bad in ["", "a b", "h\u{e9}", &"x".repeat(65)] {
            assert!(check_name("--name", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn identities() {
        let id = psp_core::handshake::Identity::from_seed([7; 32])
            .or_else(|_| psp_core::handshake::Identity::from_seed([8; 32]))
            .unwrap();
        assert_eq!(
            parse_identity(&hex::encode(id.public_key())).unwrap(),
            id.public_key()
        );
        let mut odd = id.public_key();
        odd[31] |= 0x80;
        assert!(parse_identity(&hex::encode(odd)).is_err());
        assert!(parse_identity("abcd").is_err());
        assert!(parse_identity(&"zz".repeat(32)).is_err());
    }
}
