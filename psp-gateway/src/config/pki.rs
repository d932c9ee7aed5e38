//! `[pki]`: membership by certificate (docs/MEMBERSHIP.md). With it, any host whose handshake
//! carries a certificate the network CA signed becomes a peer with no `[[peer]]` block; the
//! files are the hex text `psp-gateway ca init/sign/revoke` write.

use std::path::{Path, PathBuf};

use psp_core::VerifyingKey;
use psp_core::pki::{Certificate, Kind, RevocationList};
use serde::Deserialize;

use super::ConfigError;

/// The raw `[pki]` table.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPki {
    ca: Option<String>,
    certificate: Option<String>,
    revocation_list: Option<String>,
    skew_s: Option<i64>,
    max_peers: Option<i64>,
    rotate_s: Option<i64>,
}

/// `[pki]`, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PkiConfig {
    /// The CA certificate file (`ca`).
    pub ca_file: PathBuf,
    /// The CA's public key (from its self-signed certificate).
    pub ca: VerifyingKey,
    /// This host's certificate (`certificate`), signed by the CA, naming `interface.mac`, the
    /// session address and the identity's key.
    pub certificate: Certificate,
    /// The revocation list (`revocation_list`), if given: signed by the CA.
    pub revoked: Option<RevocationList>,
    /// Clock-skew allowance on each side of a certificate's validity (`skew_s`, 0..=86400,
    /// default 3600).
    pub skew_secs: u64,
    /// At most this many peers learnt from certificates (`max_peers`, 1..=65536, default 4096).
    pub max_peers: usize,
    /// As key server, a new broadcast key this often (`rotate_s`, 5..=86400, default 600).
    pub rotate_every: psp_core::time::Duration,
}

fn err(file: &Path, key: &str, problem: impl core::fmt::Display) -> ConfigError {
    ConfigError {
        file: file.to_path_buf(),
        key: format!("pki.{key}"),
        problem: problem.to_string(),
    }
}

fn read_hex(file: &Path, key: &str, path: &Path) -> Result<Vec<u8>, ConfigError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| err(file, key, format_args!("{}: {e}", path.display())))?;
    hex::decode(text.trim()).map_err(|e| {
        err(
            file,
            key,
            format_args!(
                "{}: not hex ({e}); expected a file from `psp-gateway ca`",
                path.display()
            ),
        )
    })
}

/// What `[pki]` is checked against: this host's identity key, MAC, session address and
/// uplinks, and the time now (Unix seconds).
pub(super) struct Host<'a> {
    pub(super) identity: Option<[u8; 32]>,
    pub(super) mac: Option<[u8; 6]>,
    pub(super) address: Option<core::net::IpAddr>,
    pub(super) raw_uplinks: bool,
    pub(super) now: u64,
    pub(super) resolve: &'a dyn Fn(&str) -> PathBuf,
}

pub(super) fn build(file: &Path, raw: RawPki, host: &Host<'_>) -> Result<PkiConfig, ConfigError> {
    let skew_secs = match raw.skew_s {
        None => psp_core::host::Pki::SKEW_SECS,
        Some(s @ 0..=86_400) => s as u64,
        Some(s) => {
            return Err(err(
                file,
                "skew_s",
                format_args!("{s} is outside 0..=86400"),
            ));
        }
    };
    let max_peers = match raw.max_peers {
        None => psp_core::host::Pki::MAX_CERTIFIED,
        Some(n @ 1..=65_536) => n as usize,
        Some(n) => {
            return Err(err(
                file,
                "max_peers",
                format_args!("{n} is outside 1..=65536"),
            ));
        }
    };
    let rotate_every = match raw.rotate_s {
        None => psp_core::host::Pki::ROTATE_EVERY,
        Some(s @ 5..=86_400) => psp_core::time::Duration::from_secs(s as u64),
        Some(s) => {
            return Err(err(
                file,
                "rotate_s",
                format_args!("{s} is outside 5..=86400"),
            ));
        }
    };
    let Some(ca_name) = raw.ca.as_deref() else {
        return Err(err(
            file,
            "ca",
            "missing (the CA certificate, from `psp-gateway ca init`)",
        ));
    };
    let ca_file = (host.resolve)(ca_name);
    let ca_cert = Certificate::parse(&read_hex(file, "ca", &ca_file)?)
        .map_err(|e| err(file, "ca", format_args!("{}: {e}", ca_file.display())))?;
    let ca = VerifyingKey::from_bytes(ca_cert.fields().public_key);
    if ca_cert.fields().kind != Kind::Ca {
        return Err(err(file, "ca", "is a host certificate, not the CA's"));
    }
    ca_cert
        .verify(&ca, host.now, skew_secs)
        .map_err(|e| err(file, "ca", format_args!("{}: {e}", ca_file.display())))?;
    let Some(cert_name) = raw.certificate.as_deref() else {
        return Err(err(
            file,
            "certificate",
            "missing (this host's, from `psp-gateway ca sign`)",
        ));
    };
    let cert_file = (host.resolve)(cert_name);
    let certificate =
        Certificate::parse(&read_hex(file, "certificate", &cert_file)?).map_err(|e| {
            err(
                file,
                "certificate",
                format_args!("{}: {e}", cert_file.display()),
            )
        })?;
    certificate.verify(&ca, host.now, skew_secs).map_err(|e| {
        err(
            file,
            "certificate",
            format_args!("{}: {e}", cert_file.display()),
        )
    })?;
    let f = certificate.fields();
    if f.kind != Kind::Host {
        return Err(err(
            file,
            "certificate",
            "is a CA certificate, not a host's",
        ));
    }
    match host.identity {
        None => {
            return Err(err(
                file,
                "certificate",
                "[pki] needs [session] identity_file (the key the certificate names)",
            ));
        }
        Some(k) if k != f.public_key => {
            return Err(err(
                file,
                "certificate",
                "names another key than session.identity_file's (sign the key `psp-gateway pubkey` prints)",
            ));
        }
        Some(_) => {}
    }
    match host.mac {
        None => {
            return Err(err(
                file,
                "certificate",
                "[pki] needs interface.mac (the certificate names it)",
            ));
        }
        Some(m) if !f.names_mac(&m) => {
            return Err(err(file, "certificate", "does not name interface.mac"));
        }
        Some(_) => {}
    }
    if let Some(a) = host.address
        && !f.names_addr(a)
    {
        return Err(err(
            file,
            "certificate",
            format_args!("does not name the session address {a}"),
        ));
    }
    if !host.raw_uplinks {
        return Err(err(
            file,
            "",
            "[pki] works over raw uplinks only (a UDP uplink needs each peer's endpoint in a [[peer]] block)",
        ));
    }
    let revoked = match raw.revocation_list.as_deref() {
        None => None,
        Some(name) => {
            let path = (host.resolve)(name);
            let l =
                RevocationList::parse(&read_hex(file, "revocation_list", &path)?).map_err(|e| {
                    err(
                        file,
                        "revocation_list",
                        format_args!("{}: {e}", path.display()),
                    )
                })?;
            l.verify(&ca).map_err(|e| {
                err(
                    file,
                    "revocation_list",
                    format_args!("{}: {e}", path.display()),
                )
            })?;
            if l.revokes(f.serial) {
                return Err(err(
                    file,
                    "certificate",
                    format_args!("serial {} is revoked by list {}", f.serial, l.number()),
                ));
            }
            Some(l)
        }
    };
    Ok(PkiConfig {
        ca_file,
        ca,
        certificate,
        revoked,
        skew_secs,
        max_peers,
        rotate_every,
    })
}
