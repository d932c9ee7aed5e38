//! Membership by certificate (docs/MEMBERSHIP.md): a host configured with [`Pki`] takes a
//! session with any host whose handshake carries a certificate its CA signed, in force, not
//! revoked, naming the MAC the handshake comes from, the address it claims and the long-term
//! key it proves; such a peer may then send only from the addresses its certificate names.

use core::net::IpAddr;

use crate::VerifyingKey;
use crate::handshake::identity::x25519_of;
use crate::pki::{Certificate, RevocationList};
use crate::plant::{self, Bug};

/// A host's membership settings (`[pki]`).
#[derive(Clone, Debug)]
pub struct Pki {
    /// The network CA's public key (from its certificate).
    pub ca: VerifyingKey,
    /// This host's certificate, sent in its Requests and Accepts.
    pub certificate: Certificate,
    /// The revocation list in force at start (verified by the caller; [`RevocationList::empty`]
    /// if none).
    pub revoked: RevocationList,
    /// Clock-skew allowance, in seconds, on each side of a certificate's validity window.
    pub skew_secs: u64,
    /// At most this many peers learnt from certificates (beyond, a new host is refused and
    /// counted `certified_full`).
    pub max_certified: usize,
    /// As key server: a new broadcast key this often.
    pub rotate_every: crate::time::Duration,
}

impl Pki {
    /// The default clock-skew allowance: one hour (certificates from `ca sign` are back-dated
    /// by as much).
    pub const SKEW_SECS: u64 = 3600;
    /// The default bound on peers learnt from certificates.
    pub const MAX_CERTIFIED: usize = 4096;
    /// The default broadcast key lifetime at the key server: 10 minutes.
    pub const ROTATE_EVERY: crate::time::Duration = crate::time::Duration::from_secs(600);
}

/// Why a certificate in a handshake was refused (the `bad_certificate` counter's detail).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The message carries none.
    Missing,
    /// It does not parse, its signature does not verify, or it is out of its validity window.
    Invalid(crate::pki::PkiError),
    /// Not a host certificate.
    NotHost,
    /// The revocation list in force names its serial.
    Revoked,
    /// It does not name the MAC the handshake comes from (or the one it claims).
    Mac,
    /// It does not name the address the Request claims.
    Address,
    /// Its key is not the long-term key the handshake announces.
    Key,
}

impl Refusal {
    /// A short name for logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Missing => "cert_missing",
            Self::Invalid(e) => e.as_str(),
            Self::NotHost => "cert_not_host",
            Self::Revoked => "cert_revoked",
            Self::Mac => "cert_mac",
            Self::Address => "cert_address",
            Self::Key => "cert_key",
        }
    }
}

/// Checks a certificate a handshake message carries: from `mac`, announcing long-term key
/// `static_key`, claiming address `addr` (a Request; `None` for an Accept), at `unix` seconds.
///
/// # Errors
/// Why it is refused.
pub(crate) fn check(
    pki: &Pki,
    revoked: &RevocationList,
    unix: u64,
    bytes: Option<&[u8]>,
    mac: &[u8; 6],
    static_key: Option<[u8; 32]>,
    addr: Option<IpAddr>,
) -> Result<Certificate, Refusal> {
    let bytes = bytes.ok_or(Refusal::Missing)?;
    let cert = Certificate::parse(bytes).map_err(Refusal::Invalid)?;
    match cert.verify(&pki.ca, unix, pki.skew_secs) {
        Err(crate::pki::PkiError::Signature) if plant::on(Bug::AnyCa) => {}
        r => r.map_err(Refusal::Invalid)?,
    }
    let f = cert.fields();
    if f.kind != crate::pki::Kind::Host {
        return Err(Refusal::NotHost);
    }
    if revoked.revokes(f.serial) && !plant::on(Bug::IgnoreRevocation) {
        return Err(Refusal::Revoked);
    }
    if !f.names_mac(mac) {
        return Err(Refusal::Mac);
    }
    if addr.is_some_and(|a| !f.names_addr(a)) {
        return Err(Refusal::Address);
    }
    if static_key.is_none() || x25519_of(&f.public_key) != static_key {
        return Err(Refusal::Key);
    }
    Ok(cert)
}

/// Whether an inner frame from a certified peer comes from an address its certificate names:
/// the IPv4 or IPv6 source, or an ARP packet's sender address. Exempt: IPv4 0.0.0.0 (DHCP),
/// the IPv6 unspecified and link-local (fe80::/10) sources (duplicate address detection and
/// neighbour discovery use them), and frames with no IP source (other EtherTypes).
pub fn source_allowed(cert: &Certificate, inner: &[u8]) -> bool {
    use core::net::{Ipv4Addr, Ipv6Addr};
    let Some(ty) = inner.get(12..14) else {
        return true;
    };
    let v4 = |at: usize| -> Option<Ipv4Addr> {
        let b: [u8; 4] = inner.get(at..at + 4)?.try_into().ok()?;
        Some(Ipv4Addr::from(b))
    };
    let src = match u16::from_be_bytes([ty[0], ty[1]]) {
        0x0800 => v4(14 + 12).map(IpAddr::V4),
        0x0806 => v4(14 + 14).map(IpAddr::V4),
        0x86dd => inner
            .get(14 + 8..14 + 24)
            .and_then(|b| <[u8; 16]>::try_from(b).ok())
            .map(|b| IpAddr::V6(Ipv6Addr::from(b))),
        _ => return true,
    };
    match src {
        // Too short to name a source: nothing the kernel will take as one either.
        None => true,
        Some(IpAddr::V4(a)) if a.is_unspecified() => true,
        Some(IpAddr::V6(a)) if a.is_unspecified() || a.segments()[0] & 0xffc0 == 0xfe80 => true,
        Some(a) => cert.fields().names_addr(a),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SigningKey;
    use crate::handshake::identity::Identity;
    use crate::pki::{CertFields, Kind};
    use core::net::Ipv4Addr;

    fn pki_and_cert(serial: u64) -> (Pki, Certificate, Identity) {
        let ca = SigningKey::from_seed(&[0xca; 32]).unwrap();
        let id = Identity::from_seed([0x11; 32])
            .or_else(|_| Identity::from_seed([0x12; 32]))
            .unwrap();
        let mut f = CertFields::new(Kind::Host, serial, id.public_key(), "b");
        f.not_before = 1000;
        f.not_after = 2000;
        f.push_mac([2, 0, 0, 0, 0, 2]);
        f.push_addr(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)), 24);
        let cert = Certificate::sign(&f, &ca).unwrap();
        let pki = Pki {
            ca: ca.public_key(),
            certificate: cert,
            revoked: RevocationList::empty(),
            skew_secs: 10,
            max_certified: 4,
            rotate_every: Pki::ROTATE_EVERY,
        };
        (pki, cert, id)
    }

    #[test]
    fn every_binding_is_checked() {
        let (pki, cert, id) = pki_and_cert(5);
        let key = Some(id.static_key().public_key());
        let mac = [2, 0, 0, 0, 0, 2];
        let addr = Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)));
        let none = RevocationList::empty();
        let b = Some(cert.as_bytes());
        assert_eq!(check(&pki, &none, 1500, b, &mac, key, addr), Ok(cert));
        assert_eq!(check(&pki, &none, 1500, b, &mac, key, None), Ok(cert));
        assert_eq!(
            check(&pki, &none, 1500, None, &mac, key, addr),
            Err(Refusal::Missing)
        );
        assert_eq!(
            check(&pki, &none, 2011, b, &mac, key, addr),
            Err(Refusal::Invalid(crate::pki::PkiError::Expired))
        );
        assert_eq!(check(&pki, &none, 2010, b, &mac, key, addr), Ok(cert));
        assert_eq!(
            check(&pki, &none, 1500, b, &[2, 0, 0, 0, 0, 3], key, addr),
            Err(Refusal::Mac)
        );
        let other = Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 3)));
        assert_eq!(
            check(&pki, &none, 1500, b, &mac, key, other),
            Err(Refusal::Address)
        );
        assert_eq!(
            check(&pki, &none, 1500, b, &mac, Some([9; 32]), addr),
            Err(Refusal::Key)
        );
        assert_eq!(
            check(&pki, &none, 1500, b, &mac, None, addr),
            Err(Refusal::Key)
        );
        let ca = SigningKey::from_seed(&[0xca; 32]).unwrap();
        let crl = RevocationList::sign(1, 1500, &[5], &ca).unwrap();
        assert_eq!(
            check(&pki, &crl, 1500, b, &mac, key, addr),
            Err(Refusal::Revoked)
        );
        let mut forged = [0u8; crate::pki::MAX_CERT_LEN];
        let n = cert.as_bytes().len();
        forged[..n].copy_from_slice(cert.as_bytes());
        forged[n - 100] ^= 1;
        assert!(matches!(
            check(&pki, &none, 1500, Some(&forged[..n]), &mac, key, addr),
            Err(Refusal::Invalid(_))
        ));
    }

    #[test]
    fn sources_are_bound_to_the_certificate() {
        let (_, cert, _) = pki_and_cert(5);
        let mut v4 = [0u8; 34];
        v4[12..14].copy_from_slice(&[0x08, 0x00]);
        v4[26..30].copy_from_slice(&[10, 0, 0, 2]);
        assert!(source_allowed(&cert, &v4));
        v4[26..30].copy_from_slice(&[10, 0, 0, 9]);
        assert!(!source_allowed(&cert, &v4));
        v4[26..30].copy_from_slice(&[0, 0, 0, 0]);
        assert!(source_allowed(&cert, &v4));
        let mut arp = [0u8; 42];
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        arp[28..32].copy_from_slice(&[10, 0, 0, 7]);
        assert!(!source_allowed(&cert, &arp));
        arp[28..32].copy_from_slice(&[10, 0, 0, 2]);
        assert!(source_allowed(&cert, &arp));
        let mut v6 = [0u8; 54];
        v6[12..14].copy_from_slice(&[0x86, 0xdd]);
        v6[22..24].copy_from_slice(&[0xfe, 0x80]);
        assert!(source_allowed(&cert, &v6));
        v6[22..24].copy_from_slice(&[0xfd, 0x00]);
        assert!(!source_allowed(&cert, &v6));
    }
}
