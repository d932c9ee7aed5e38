//! The certificate: layout, signing, parsing, verification.
//!
//! ```text
//! off  len  field
//!   0    1  version (1)
//!   1    1  kind: 0x01 CA (self-signed), 0x02 host
//!   2    8  serial
//!  10    8  not before (Unix seconds)
//!  18    8  not after (Unix seconds)
//!  26   32  Ed25519 public key (the host's identity, or the CA's key)
//!  58    1  key-server priority (0 first .. 254; 255 never a key server)
//!  59    1  name length n (1..=64)
//!  60    n  name (ASCII letters, digits, '.', '-', '_')
//!  +0    1  MAC count m (0..=8; a host has at least one)
//!  +1   6m  MACs
//!   +    1  address count a (0..=8)
//!   +  a×…  per address: family (4 or 6), 4 or 16 bytes, prefix length
//!   +   64  Ed25519 signature by the CA over SHA-256("psp-cert-v1" || every byte above)
//! ```

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::{PkiError, Reader, VERSION, Writer, digest, sign_labelled};
use crate::{SigningKey, VerifyingKey};

/// At most this many bytes in a host's name.
pub const MAX_NAME_LEN: usize = 64;
/// At most this many MACs in a certificate.
pub const MAX_MACS: usize = 8;
/// At most this many addresses in a certificate.
pub const MAX_ADDRS: usize = 8;
/// The key-server priority of a host that must never be the key server.
pub const NEVER_KEY_SERVER: u8 = 255;
/// The longest encoded certificate.
pub const MAX_CERT_LEN: usize = FIXED + MAX_NAME_LEN + 1 + 6 * MAX_MACS + 1 + 18 * MAX_ADDRS + 64;

const FIXED: usize = 60;
const LABEL: &[u8] = b"psp-cert-v1";

/// What a certificate is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// The network CA's own, self-signed: its key signs host certificates and revocation lists.
    Ca,
    /// A host's: binds its identity key to its name, MACs and addresses.
    Host,
}

impl Kind {
    fn code(self) -> u8 {
        match self {
            Self::Ca => 1,
            Self::Host => 2,
        }
    }
}

/// A certificate's fields (what `ca sign` fills in and `cert print` shows).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CertFields {
    /// CA or host.
    pub kind: Kind,
    /// The CA's serial number for it (what a revocation names).
    pub serial: u64,
    /// Valid from (Unix seconds).
    pub not_before: u64,
    /// Valid until (Unix seconds, inclusive).
    pub not_after: u64,
    /// The subject's Ed25519 public key (a host's identity).
    pub public_key: [u8; 32],
    /// Key-server priority: the lowest value is elected, the lowest MAC breaks a tie;
    /// [`NEVER_KEY_SERVER`] is never elected.
    pub priority: u8,
    name: [u8; MAX_NAME_LEN],
    name_len: u8,
    macs: [[u8; 6]; MAX_MACS],
    mac_count: u8,
    addrs: [(IpAddr, u8); MAX_ADDRS],
    addr_count: u8,
}

impl CertFields {
    /// Fields with no MAC and no address, valid from 0 to `u64::MAX`, priority 128. `name` is
    /// cut to [`MAX_NAME_LEN`] bytes; [`Certificate::sign`] refuses a name that is not
    /// letters, digits, `.`, `-` or `_`.
    pub fn new(kind: Kind, serial: u64, public_key: [u8; 32], name: &str) -> Self {
        let mut n = [0u8; MAX_NAME_LEN];
        let len = name.len().min(MAX_NAME_LEN);
        n[..len].copy_from_slice(&name.as_bytes()[..len]);
        Self {
            kind,
            serial,
            not_before: 0,
            not_after: u64::MAX,
            public_key,
            priority: 128,
            name: n,
            name_len: len as u8,
            macs: [[0; 6]; MAX_MACS],
            mac_count: 0,
            addrs: [(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0); MAX_ADDRS],
            addr_count: 0,
        }
    }

    /// The subject's name.
    pub fn name(&self) -> &str {
        // Checked ASCII when parsed or signed; `new` may have cut a multi-byte character.
        core::str::from_utf8(&self.name[..usize::from(self.name_len)]).unwrap_or("?")
    }

    /// Adds a MAC (`false`: already [`MAX_MACS`]).
    pub fn push_mac(&mut self, mac: [u8; 6]) -> bool {
        let i = usize::from(self.mac_count);
        if i == MAX_MACS {
            return false;
        }
        self.macs[i] = mac;
        self.mac_count += 1;
        true
    }

    /// Adds an address with its prefix length (`false`: already [`MAX_ADDRS`]).
    pub fn push_addr(&mut self, addr: IpAddr, prefix: u8) -> bool {
        let i = usize::from(self.addr_count);
        if i == MAX_ADDRS {
            return false;
        }
        self.addrs[i] = (addr, prefix);
        self.addr_count += 1;
        true
    }

    /// The MACs the subject may send from.
    pub fn macs(&self) -> &[[u8; 6]] {
        &self.macs[..usize::from(self.mac_count)]
    }

    /// The addresses (with prefix lengths) the subject may send from.
    pub fn addrs(&self) -> &[(IpAddr, u8)] {
        &self.addrs[..usize::from(self.addr_count)]
    }

    /// Whether `mac` is one of the certificate's MACs.
    pub fn names_mac(&self, mac: &[u8; 6]) -> bool {
        self.macs().contains(mac)
    }

    /// Whether `addr` is one of the certificate's addresses (the address itself: the prefix
    /// length says which subnet it is on, not which addresses it may use).
    pub fn names_addr(&self, addr: IpAddr) -> bool {
        self.addrs().iter().any(|(a, _)| *a == addr)
    }

    /// Whether the certificate is in force at `now` (Unix seconds), allowing `skew` seconds of
    /// clock difference either way.
    ///
    /// # Errors
    /// [`PkiError::NotYetValid`] or [`PkiError::Expired`].
    pub fn check_time(&self, now: u64, skew: u64) -> Result<(), PkiError> {
        if now.saturating_add(skew) < self.not_before {
            Err(PkiError::NotYetValid)
        } else if now.saturating_sub(skew) > self.not_after {
            Err(PkiError::Expired)
        } else {
            Ok(())
        }
    }

    fn check(&self) -> Result<(), PkiError> {
        let name = &self.name[..usize::from(self.name_len)];
        if name.is_empty()
            || !name
                .iter()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'-' | b'_'))
            || self.not_after < self.not_before
            || (self.kind == Kind::Host && self.mac_count == 0)
            || (self.kind == Kind::Ca && self.mac_count != 0)
        {
            return Err(PkiError::Field);
        }
        let macs = self.macs();
        for (i, m) in macs.iter().enumerate() {
            // A host sends from a unicast MAC; each names it once.
            if m[0] & 1 != 0 || *m == [0; 6] || macs[..i].contains(m) {
                return Err(PkiError::Field);
            }
        }
        let addrs = self.addrs();
        for (i, (a, p)) in addrs.iter().enumerate() {
            let max = if a.is_ipv4() { 32 } else { 128 };
            // An IPv4-mapped IPv6 address would not match the IPv4 source it stands for.
            let mapped = matches!(a, IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some());
            if *p > max || mapped || addrs[..i].iter().any(|(b, _)| b == a) {
                return Err(PkiError::Field);
            }
        }
        Ok(())
    }

    fn body_len(&self) -> usize {
        FIXED
            + usize::from(self.name_len)
            + 1
            + 6 * usize::from(self.mac_count)
            + 1
            + self
                .addrs()
                .iter()
                .map(|(a, _)| if a.is_ipv4() { 6 } else { 18 })
                .sum::<usize>()
    }

    fn emit(&self, buf: &mut [u8]) -> usize {
        let mut w = Writer::new(buf);
        w.put(&[VERSION, self.kind.code()]);
        w.put(&self.serial.to_be_bytes());
        w.put(&self.not_before.to_be_bytes());
        w.put(&self.not_after.to_be_bytes());
        w.put(&self.public_key);
        w.put(&[self.priority, self.name_len]);
        w.put(&self.name[..usize::from(self.name_len)]);
        w.put(&[self.mac_count]);
        for m in self.macs() {
            w.put(m);
        }
        w.put(&[self.addr_count]);
        for (a, p) in self.addrs() {
            match a {
                IpAddr::V4(v4) => {
                    w.put(&[4]);
                    w.put(&v4.octets());
                }
                IpAddr::V6(v6) => {
                    w.put(&[6]);
                    w.put(&v6.octets());
                }
            }
            w.put(&[*p]);
        }
        w.at
    }
}

/// A certificate as bytes, with its fields parsed (not verified: see [`Certificate::verify`]).
#[derive(Clone, Copy)]
pub struct Certificate {
    bytes: [u8; MAX_CERT_LEN],
    len: u16,
    fields: CertFields,
}

impl Certificate {
    /// Encodes `fields` and signs them with the CA's key `ca` (for a [`Kind::Ca`] certificate,
    /// its own key: self-signed).
    ///
    /// # Errors
    /// [`PkiError::Field`] for fields the format cannot carry.
    pub fn sign(fields: &CertFields, ca: &SigningKey) -> Result<Self, PkiError> {
        fields.check()?;
        let mut bytes = [0u8; MAX_CERT_LEN];
        let body = fields.emit(&mut bytes);
        let sig = sign_labelled(ca, LABEL, &bytes[..body]);
        bytes[body..body + 64].copy_from_slice(&sig);
        Ok(Self {
            bytes,
            len: (body + 64) as u16,
            fields: *fields,
        })
    }

    /// Parses a certificate (every length and field checked; the signature is not).
    ///
    /// # Errors
    /// Any [`PkiError`] of the format.
    pub fn parse(input: &[u8]) -> Result<Self, PkiError> {
        if input.len() > MAX_CERT_LEN {
            return Err(PkiError::Length);
        }
        let mut r = Reader::new(input);
        if r.u8()? != VERSION {
            return Err(PkiError::Version);
        }
        let kind = match r.u8()? {
            1 => Kind::Ca,
            2 => Kind::Host,
            _ => return Err(PkiError::Kind),
        };
        let serial = r.u64()?;
        let mut f = CertFields::new(kind, serial, [0; 32], "");
        f.not_before = r.u64()?;
        f.not_after = r.u64()?;
        f.public_key = r.array()?;
        f.priority = r.u8()?;
        let n = usize::from(r.u8()?);
        if n > MAX_NAME_LEN {
            return Err(PkiError::Field);
        }
        f.name[..n].copy_from_slice(r.take(n)?);
        f.name_len = n as u8;
        let m = usize::from(r.u8()?);
        if m > MAX_MACS {
            return Err(PkiError::TooMany);
        }
        for _ in 0..m {
            f.push_mac(r.array()?);
        }
        let a = usize::from(r.u8()?);
        if a > MAX_ADDRS {
            return Err(PkiError::TooMany);
        }
        for _ in 0..a {
            let addr = match r.u8()? {
                4 => IpAddr::V4(Ipv4Addr::from(r.array::<4>()?)),
                6 => IpAddr::V6(Ipv6Addr::from(r.array::<16>()?)),
                _ => return Err(PkiError::Field),
            };
            f.push_addr(addr, r.u8()?);
        }
        r.take(64)?;
        if r.at != input.len() {
            return Err(PkiError::Length);
        }
        f.check()?;
        let mut bytes = [0u8; MAX_CERT_LEN];
        bytes[..input.len()].copy_from_slice(input);
        Ok(Self {
            bytes,
            len: input.len() as u16,
            fields: f,
        })
    }

    /// Checks the CA's signature with `ca`, then the validity window at `now` (Unix seconds)
    /// with `skew` seconds of allowance either way.
    ///
    /// # Errors
    /// [`PkiError::Signature`], [`PkiError::NotYetValid`], [`PkiError::Expired`].
    pub fn verify(&self, ca: &VerifyingKey, now: u64, skew: u64) -> Result<(), PkiError> {
        let body = usize::from(self.len) - 64;
        let d = digest(LABEL, &self.bytes[..body]);
        ca.verify(&d, &self.bytes[body..usize::from(self.len)])
            .map_err(|_| PkiError::Signature)?;
        self.fields.check_time(now, skew)
    }

    /// The encoded certificate.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }

    /// Its fields.
    pub fn fields(&self) -> &CertFields {
        &self.fields
    }

    /// The X25519 form of its public key, as a handshake announces it, or `None` if the key is
    /// not a curve point.
    pub fn x25519(&self) -> Option<[u8; 32]> {
        crate::handshake::identity::x25519_of(&self.fields.public_key)
    }

    /// A short fingerprint: the first 8 bytes of SHA-256 over the encoded certificate.
    pub fn fingerprint(&self) -> [u8; 8] {
        let d = digest(b"", self.as_bytes());
        let mut f = [0u8; 8];
        f.copy_from_slice(&d[..8]);
        f
    }

    /// The encoded length of `fields` once signed.
    pub fn encoded_len(fields: &CertFields) -> usize {
        fields.body_len() + 64
    }
}

impl PartialEq for Certificate {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for Certificate {}

impl core::fmt::Debug for Certificate {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Certificate")
            .field("name", &self.fields.name())
            .field("serial", &self.fields.serial)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ca() -> SigningKey {
        SigningKey::from_seed(&[0xca; 32]).unwrap()
    }

    fn host_fields() -> CertFields {
        let id = SigningKey::from_seed(&[0x01; 32]).unwrap().public_key();
        let mut f = CertFields::new(Kind::Host, 3, *id.as_bytes(), "host-1");
        f.not_before = 1_700_000_000;
        f.not_after = 1_900_000_000;
        f.priority = 10;
        f.push_mac([0x02, 0, 0, 0, 0, 0x01]);
        f.push_addr(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)), 24);
        f.push_addr("fd00::1".parse().unwrap(), 64);
        f
    }

    /// The vector docs/MEMBERSHIP.md prints: CA seed 0xca×32, host seed 0x01×32.
    #[test]
    fn known_answer() {
        let c = Certificate::sign(&host_fields(), &ca()).unwrap();
        assert_eq!(c.as_bytes().len(), Certificate::encoded_len(&host_fields()));
        assert_eq!(hex::encode(c.as_bytes()), VECTOR);
        let p = Certificate::parse(c.as_bytes()).unwrap();
        assert_eq!(p, c);
        assert_eq!(*p.fields(), host_fields());
        p.verify(&ca().public_key(), 1_800_000_000, 0).unwrap();
    }

    const VECTOR: &str = concat!(
        "01020000000000000003000000006553f10000000000713fb3008a88e3dd7409",
        "f195fd52db2d3cba5d72ca6709bf1d94121bf3748801b40f6f5c0a06686f7374",
        "2d310102000000000102040a0000011806fd0000000000000000000000000000",
        "01404fafc7ff4bf9e63ef761a6d4c91d407e69490538551dd7e69d0645bfd157",
        "aef0c6f9c38b74ac42b6e7c8c6d302c80a95fb29cced1133e52ee23063a41cc0",
        "ac0d",
    );

    #[test]
    fn verify_refuses_other_ca_tampering_and_time() {
        let c = Certificate::sign(&host_fields(), &ca()).unwrap();
        let other = SigningKey::from_seed(&[0xcb; 32]).unwrap().public_key();
        assert_eq!(c.verify(&other, 1_800_000_000, 0), Err(PkiError::Signature));
        let ca = ca().public_key();
        assert_eq!(c.verify(&ca, 1_699_999_000, 0), Err(PkiError::NotYetValid));
        assert_eq!(c.verify(&ca, 1_699_999_000, 1000), Ok(()));
        assert_eq!(c.verify(&ca, 1_900_000_001, 0), Err(PkiError::Expired));
        assert_eq!(c.verify(&ca, 1_900_000_001, 1), Ok(()));
        for i in 0..c.as_bytes().len() {
            let mut b = [0u8; MAX_CERT_LEN];
            let n = c.as_bytes().len();
            b[..n].copy_from_slice(c.as_bytes());
            b[i] ^= 0x01;
            if let Ok(t) = Certificate::parse(&b[..n]) {
                assert_eq!(
                    t.verify(&ca, 1_800_000_000, 0),
                    Err(PkiError::Signature),
                    "{i}"
                );
            }
        }
    }

    #[test]
    fn parse_refuses_bad_lengths_and_fields() {
        let c = Certificate::sign(&host_fields(), &ca()).unwrap();
        let b = c.as_bytes();
        for n in 0..b.len() {
            assert!(Certificate::parse(&b[..n]).is_err(), "{n}");
        }
        let mut long = [0u8; MAX_CERT_LEN];
        long[..b.len()].copy_from_slice(b);
        assert_eq!(
            Certificate::parse(&long[..b.len() + 1]),
            Err(PkiError::Length)
        );
        let mut v = long;
        v[0] = 2;
        assert_eq!(Certificate::parse(&v[..b.len()]), Err(PkiError::Version));
        let mut k = long;
        k[1] = 9;
        assert_eq!(Certificate::parse(&k[..b.len()]), Err(PkiError::Kind));
        let mut name = long;
        name[60] = b' ';
        assert_eq!(Certificate::parse(&name[..b.len()]), Err(PkiError::Field));
        let mut nomac = host_fields();
        nomac.mac_count = 0;
        assert_eq!(Certificate::sign(&nomac, &ca()), Err(PkiError::Field));
        // Group, zero and repeated MACs; repeated and IPv4-mapped addresses.
        for mac in [
            [0xff; 6],
            [1, 0, 0, 0, 0, 1],
            [0; 6],
            [0x02, 0, 0, 0, 0, 0x01],
        ] {
            let mut f = host_fields();
            f.push_mac(mac);
            assert_eq!(
                Certificate::sign(&f, &ca()),
                Err(PkiError::Field),
                "{mac:02x?}"
            );
        }
        for addr in ["10.0.0.1", "::ffff:10.0.0.9"] {
            let mut f = host_fields();
            f.push_addr(addr.parse().unwrap(), 24);
            assert_eq!(Certificate::sign(&f, &ca()), Err(PkiError::Field), "{addr}");
        }
    }

    #[test]
    fn time_allowance_saturates() {
        let mut f = host_fields();
        f.not_before = 0;
        f.not_after = u64::MAX;
        assert_eq!(f.check_time(0, u64::MAX), Ok(()));
        assert_eq!(f.check_time(u64::MAX, u64::MAX), Ok(()));
    }
}
