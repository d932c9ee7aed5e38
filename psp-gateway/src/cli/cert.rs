//! `psp-gateway cert`: shows a certificate or revocation list (`print`) and checks a host
//! certificate against a network CA and, optionally, its revocation list (`verify`).
//!
//! The files are what `psp-gateway ca` writes: the hex of the encoded bytes on one line (the
//! layout is psp-core's `pki` module; docs/MEMBERSHIP.md gives it byte by byte). The helpers
//! that read them, and the UTC date format, are shared with `cli/ca.rs`. Nothing here needs the
//! CA's private key.

use std::io::Read as _;
use std::path::{Path, PathBuf};

use psp_core::VerifyingKey;
use psp_core::pki::{Certificate, Kind, NEVER_KEY_SERVER, PkiError, RevocationList};

use super::Failure;
use crate::civil::{now, utc};

/// Arguments of `cert`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// What to do.
    #[command(subcommand)]
    command: Sub,
}

#[derive(Debug, clap::Subcommand)]
enum Sub {
    /// Show a certificate's or a revocation list's fields.
    ///
    /// One `key: value` per line (or one JSON object with --json). No signature is checked:
    /// `cert verify` does that.
    Print(PrintArgs),
    /// Check a host certificate against the network CA (and a revocation list).
    ///
    /// Checks that CA_CRT is a self-signed CA certificate in force, that FILE carries the CA's
    /// signature and is in force at --at (now by default) give or take --skew, and with --crl
    /// that the list is the CA's and does not revoke FILE. Prints `ok: NAME serial N valid
    /// until TIME` and exits 0, or names the reason and exits 1.
    Verify(VerifyArgs),
}

/// Arguments of `cert print`.
#[derive(Debug, clap::Args)]
struct PrintArgs {
    /// A certificate (`ca.crt`, or what `ca sign --out` wrote) or a revocation list (`crl`),
    /// as hex text.
    #[arg(value_name = "FILE")]
    file: PathBuf,
    /// Print one JSON object instead of `key: value` lines.
    #[arg(long)]
    json: bool,
}

/// Arguments of `cert verify`.
#[derive(Debug, clap::Args)]
struct VerifyArgs {
    /// The network CA's certificate (`ca.crt` from `ca init`): self-signed, kind CA.
    #[arg(long, value_name = "CA_CRT")]
    ca: PathBuf,
    /// The host certificate to check.
    #[arg(value_name = "FILE")]
    file: PathBuf,
    /// A revocation list from the same CA (`crl` from `ca revoke`): FILE must not be on it.
    #[arg(long, value_name = "CRL_FILE")]
    crl: Option<PathBuf>,
    /// Check validity at this time (Unix seconds) instead of now.
    #[arg(long, value_name = "UNIX_SECONDS")]
    at: Option<u64>,
    /// Clock difference allowed either side of the validity window, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 3600)]
    skew: u64,
}

/// Runs `cert`.
pub(crate) fn run(args: &Args) -> Result<(), Failure> {
    match &args.command {
        Sub::Print(a) => print(a),
        Sub::Verify(a) => verify(a),
    }
}

fn print(args: &PrintArgs) -> Result<(), Failure> {
    let loaded = load(&args.file)?;
    let text = match (&loaded, args.json) {
        (Loaded::Cert(c), false) => cert_lines(c),
        (Loaded::List(l), false) => list_lines(l),
        (Loaded::Cert(c), true) => format!("{}\n", cert_json(c)),
        (Loaded::List(l), true) => format!("{}\n", list_json(l)),
    };
    print!("{text}");
    Ok(())
}

fn verify(args: &VerifyArgs) -> Result<(), Failure> {
    let at = args.at.unwrap_or_else(now);
    let ca = ca_key(&args.ca, at, args.skew)?;
    let shown = args.file.display();
    let cert = load_cert(&args.file)?;
    let f = cert.fields();
    if f.kind != Kind::Host {
        return Err(Failure::input(format_args!(
            "{shown}: a CA certificate, not a host's"
        )));
    }
    cert.verify(&ca, at, args.skew).map_err(|e| match e {
        PkiError::Expired => Failure::input(format_args!(
            "{shown}: expired at {} (checked at {} with {} s of skew)",
            utc(f.not_after),
            utc(at),
            args.skew
        )),
        PkiError::NotYetValid => Failure::input(format_args!(
            "{shown}: not valid before {} (checked at {} with {} s of skew)",
            utc(f.not_before),
            utc(at),
            args.skew
        )),
        e => Failure::input(format_args!(
            "{shown}: {e} (issued by another CA, or altered)"
        )),
    })?;
    if cert.x25519().is_none() || f.public_key[31] & 0x80 != 0 {
        return Err(Failure::input(format_args!(
            "{shown}: its public key is not a host identity (psp-gateway keygen --identity)"
        )));
    }
    if let Some(path) = &args.crl {
        let list = load_list(path)?;
        list.verify(&ca).map_err(|e| {
            Failure::input(format_args!(
                "{}: {e} (a list from another CA, or altered)",
                path.display()
            ))
        })?;
        if list.revokes(f.serial) {
            return Err(Failure::input(format_args!(
                "{shown}: serial {} revoked by list {} ({}, issued {})",
                f.serial,
                list.number(),
                path.display(),
                utc(list.issued())
            )));
        }
    }
    println!(
        "ok: {} serial {} valid until {}",
        f.name(),
        f.serial,
        utc(f.not_after)
    );
    Ok(())
}

/// The CA's key from its certificate at `path`, once the certificate is known to be a
/// self-signed CA certificate in force at `at` (with `skew`).
fn ca_key(path: &Path, at: u64, skew: u64) -> Result<VerifyingKey, Failure> {
    let shown = path.display();
    let ca = load_cert(path)?;
    let f = ca.fields();
    if f.kind != Kind::Ca {
        return Err(Failure::input(format_args!(
            "{shown}: a host certificate ({}), not a CA's",
            f.name()
        )));
    }
    let key = VerifyingKey::from_bytes(f.public_key);
    ca.verify(&key, at, skew).map_err(|e| match e {
        PkiError::Expired => Failure::input(format_args!(
            "{shown}: the CA certificate expired at {}",
            utc(f.not_after)
        )),
        PkiError::NotYetValid => Failure::input(format_args!(
            "{shown}: the CA certificate is not valid before {}",
            utc(f.not_before)
        )),
        _ => Failure::input(format_args!(
            "{shown}: the CA certificate's own signature does not verify (altered?)"
        )),
    })?;
    Ok(key)
}

/// What a certificate or revocation list file held (parsed, not verified).
pub(crate) enum Loaded {
    /// A CA or host certificate.
    Cert(Box<Certificate>),
    /// A revocation list.
    List(Box<RevocationList>),
}

/// The longest file `load` reads: the largest list as hex, with room for whitespace.
const MAX_FILE: u64 = 16 * 1024;

/// Reads and parses a certificate or revocation list file: hex text (whitespace, `:` and `-`
/// ignored), told apart by the kind byte (1 and 2: certificate, 3: list).
///
/// # Errors
/// An input failure (exit 1) naming the file and the problem.
pub(crate) fn load(path: &Path) -> Result<Loaded, Failure> {
    let shown = path.display();
    let bad = |e: &dyn core::fmt::Display| Failure::input(format_args!("{shown}: {e}"));
    let mut text = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_FILE + 1).read_to_end(&mut text))
        .map_err(|e| bad(&e))?;
    if text.len() as u64 > MAX_FILE {
        return Err(bad(&format_args!(
            "larger than {MAX_FILE} bytes: not a certificate or revocation list"
        )));
    }
    let text = core::str::from_utf8(&text)
        .map_err(|_| bad(&"not text: want the hex that `psp-gateway ca` writes"))?;
    let bytes = super::decode_hex(text).map_err(|e| bad(&format_args!("bad hex: {e}")))?;
    if bytes.len() == 32 {
        // Shorter than any certificate or list: most likely a key file. Say so, and do not
        // show its bytes.
        return Err(bad(
            &"32 bytes: a key (ca.key, an identity?), not a certificate or revocation list",
        ));
    }
    match (bytes.first(), bytes.get(1)) {
        (Some(&v), _) if v != psp_core::pki::VERSION => Err(bad(&format_args!(
            "unknown format version {v} (this build reads {})",
            psp_core::pki::VERSION
        ))),
        (_, Some(1 | 2)) => Certificate::parse(&bytes)
            .map(|c| Loaded::Cert(Box::new(c)))
            .map_err(|e| bad(&format_args!("certificate: {e}"))),
        (_, Some(3)) => RevocationList::parse(&bytes)
            .map(|l| Loaded::List(Box::new(l)))
            .map_err(|e| bad(&format_args!("revocation list: {e}"))),
        (_, Some(k)) => Err(bad(&format_args!(
            "kind byte {k}: neither a certificate (1, 2) nor a revocation list (3)"
        ))),
        (_, None) => Err(bad(&format_args!("{} bytes: too short", bytes.len()))),
    }
}

/// [`load`], requiring a certificate.
///
/// # Errors
/// As [`load`], and for a revocation list.
pub(crate) fn load_cert(path: &Path) -> Result<Certificate, Failure> {
    match load(path)? {
        Loaded::Cert(c) => Ok(*c),
        Loaded::List(_) => Err(Failure::input(format_args!(
            "{}: a revocation list, not a certificate",
            path.display()
        ))),
    }
}

/// [`load`], requiring a revocation list.
///
/// # Errors
/// As [`load`], and for a certificate.
pub(crate) fn load_list(path: &Path) -> Result<RevocationList, Failure> {
    match load(path)? {
        Loaded::List(l) => Ok(*l),
        Loaded::Cert(_) => Err(Failure::input(format_args!(
            "{}: a certificate, not a revocation list",
            path.display()
        ))),
    }
}

/// `aa:bb:cc:dd:ee:ff`.
fn mac_text(mac: &[u8; 6]) -> String {
    let parts: Vec<String> = mac.iter().map(|b| format!("{b:02x}")).collect();
    parts.join(":")
}

fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Ca => "ca",
        Kind::Host => "host",
    }
}

fn priority_text(p: u8) -> String {
    if p == NEVER_KEY_SERVER {
        format!("{p} (never the key server)")
    } else {
        p.to_string()
    }
}

fn joined_or_none(items: Vec<String>) -> String {
    if items.is_empty() {
        "none".to_owned()
    } else {
        items.join(" ")
    }
}

fn cert_lines(c: &Certificate) -> String {
    let f = c.fields();
    let macs = f.macs().iter().map(mac_text).collect();
    let addrs = f.addrs().iter().map(|(a, p)| format!("{a}/{p}")).collect();
    format!(
        "kind: {}\nserial: {}\nname: {}\npublic_key: {}\nnot_before: {} {}\nnot_after: {} {}\n\
         macs: {}\naddrs: {}\npriority: {}\nfingerprint: {}\n",
        kind_name(f.kind),
        f.serial,
        f.name(),
        hex::encode(f.public_key),
        f.not_before,
        utc(f.not_before),
        f.not_after,
        utc(f.not_after),
        joined_or_none(macs),
        joined_or_none(addrs),
        priority_text(f.priority),
        hex::encode(c.fingerprint()),
    )
}

fn list_lines(l: &RevocationList) -> String {
    let serials = l.serials().iter().map(u64::to_string).collect();
    format!(
        "kind: revocation-list\nnumber: {}\nissued: {} {}\nserials: {}\n",
        l.number(),
        l.issued(),
        utc(l.issued()),
        joined_or_none(serials)
    )
}

fn cert_json(c: &Certificate) -> serde_json::Value {
    let f = c.fields();
    serde_json::json!({
        "kind": kind_name(f.kind),
        "serial": f.serial,
        "name": f.name(),
        "public_key": hex::encode(f.public_key),
        "not_before": f.not_before,
        "not_before_utc": utc(f.not_before),
        "not_after": f.not_after,
        "not_after_utc": utc(f.not_after),
        "macs": f.macs().iter().map(mac_text).collect::<Vec<_>>(),
        "addrs": f.addrs().iter().map(|(a, p)| format!("{a}/{p}")).collect::<Vec<_>>(),
        "priority": f.priority,
        "fingerprint": hex::encode(c.fingerprint()),
    })
}

fn list_json(l: &RevocationList) -> serde_json::Value {
    serde_json::json!({
        "kind": "revocation-list",
        "number": l.number(),
        "issued": l.issued(),
        "issued_utc": utc(l.issued()),
        "serials": l.serials(),
    })
}
