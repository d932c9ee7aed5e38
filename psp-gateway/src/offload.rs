//! TAP offloads: the virtio-net header (`IFF_VNET_HDR`) and the work it hands to us.
//!
//! With `TUNSETOFFLOAD` (`TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6 | TUN_F_TSO_ECN`) the kernel
//! gives the TAP reader TCP super-frames of up to 64 KiB (TSO) and frames whose transport
//! checksum is left partial (`NEEDS_CSUM`). On transmit we cut a super-frame into MTU-sized
//! Ethernet frames ([`Tso::segment`]) or complete the checksum ([`complete_csum`]); on receive
//! we coalesce consecutive in-order segments of one TCP flow back into one super-frame
//! ([`Gro`]), so the protected host's stack handles one packet where the wire carried dozens.
//! The coalescing rules follow the kernel's `tcp_gro_receive` and wireguard-go's
//! `tcp_offload_linux.go`: same L2/L3 header, same ports, ACK, window and options, contiguous
//! sequence numbers, only ACK (and PSH on the last) set, no IP options or fragments.
//!
//! Pure functions over byte slices: no I/O, no allocation per frame (a [`Gro`] allocates its
//! tables once). Untrusted input never panics: every offset is checked first.

use core::fmt;

/// Bytes of the virtio-net header in front of every TAP frame (`struct virtio_net_hdr`, the
/// kernel's default `TUNSETVNETHDRSZ`).
pub(crate) const VNET_HDR_LEN: usize = 10;
/// `VIRTIO_NET_HDR_F_NEEDS_CSUM`: the checksum at `csum_start + csum_offset` is partial (it
/// holds the pseudo-header sum); whoever sends the frame completes it.
pub(crate) const F_NEEDS_CSUM: u8 = 1;
/// `VIRTIO_NET_HDR_F_DATA_VALID`: the transport checksum is known good; the stack need not
/// verify it.
pub(crate) const F_DATA_VALID: u8 = 2;
/// `VIRTIO_NET_HDR_GSO_NONE`.
pub(crate) const GSO_NONE: u8 = 0;
/// `VIRTIO_NET_HDR_GSO_TCPV4`.
pub(crate) const GSO_TCPV4: u8 = 1;
/// `VIRTIO_NET_HDR_GSO_TCPV6`.
pub(crate) const GSO_TCPV6: u8 = 4;
/// `VIRTIO_NET_HDR_GSO_UDP_L4`: a UDP super-frame (USO), cut into datagrams of `gso_size`.
pub(crate) const GSO_UDP_L4: u8 = 5;
/// `VIRTIO_NET_HDR_GSO_ECN` (a flag on the type: the super-frame carries CWR).
pub(crate) const GSO_ECN: u8 = 0x80;
/// The largest frame one TAP read returns with TSO on: a 64 KiB IP packet behind an Ethernet
/// header with up to two VLAN tags.
pub(crate) const MAX_GSO_FRAME: usize = 65_535 + 14 + 8;
/// Frames one [`Gro`] takes per batch.
pub(crate) const GRO_MAX: usize = 64;
/// The longest header [`Gro`] rewrites: Ethernet with two VLAN tags, IPv6, TCP with 40 bytes
/// of options.
pub(crate) const MAX_HDR: usize = 22 + 40 + 60;

const ETH_P_IPV4: u16 = 0x0800;
const ETH_P_IPV6: u16 = 0x86dd;
const IPPROTO_TCP: u8 = 6;
const IPPROTO_UDP: u8 = 17;
/// The UDP checksum's offset in the UDP header.
const UDP_CSUM: usize = 6;
const TCP_FIN: u8 = 0x01;
const TCP_PSH: u8 = 0x08;
const TCP_ACK: u8 = 0x10;
const TCP_CWR: u8 = 0x80;
/// The TCP checksum's offset in the TCP header.
const TCP_CSUM: usize = 16;

/// Why a frame read from the TAP could not be handled. Such frames are dropped (the kernel
/// never produces them with the offloads we enable).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub(crate) enum OffloadError {
    /// Shorter than its virtio-net header or its own headers say.
    Truncated,
    /// A header field is inconsistent (offsets outside the frame, wrong IP version, ...).
    BadHeader,
    /// A GSO type we did not ask for (UDP, ...).
    Unsupported,
}

impl fmt::Display for OffloadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Truncated => "truncated offload frame",
            Self::BadHeader => "inconsistent offload header",
            Self::Unsupported => "unsupported GSO type",
        })
    }
}

impl core::error::Error for OffloadError {}

/// The virtio-net header (`struct virtio_net_hdr`), in the host's byte order (the TAP's
/// default: legacy virtio, native endian).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct VnetHdr {
    /// `F_NEEDS_CSUM`, `F_DATA_VALID`.
    pub(crate) flags: u8,
    /// `GSO_NONE`, `GSO_TCPV4`, `GSO_TCPV6` (possibly `| GSO_ECN`), `GSO_UDP_L4`.
    pub(crate) gso_type: u8,
    /// Bytes of headers (L2 to L4) in front of the payload.
    pub(crate) hdr_len: u16,
    /// Payload bytes per segment.
    pub(crate) gso_size: u16,
    /// Where checksumming starts (the L4 header), from the start of the frame.
    pub(crate) csum_start: u16,
    /// Where the checksum goes, from `csum_start`.
    pub(crate) csum_offset: u16,
}

impl VnetHdr {
    /// Reads a header from the first [`VNET_HDR_LEN`] bytes of `b`.
    pub(crate) fn parse(b: &[u8]) -> Option<Self> {
        let b: &[u8; VNET_HDR_LEN] = b.get(..VNET_HDR_LEN)?.try_into().ok()?;
        let u = |i: usize| u16::from_ne_bytes([b[i], b[i + 1]]);
        Some(Self {
            flags: b[0],
            gso_type: b[1],
            hdr_len: u(2),
            gso_size: u(4),
            csum_start: u(6),
            csum_offset: u(8),
        })
    }

    /// The header's bytes.
    pub(crate) fn emit(&self) -> [u8; VNET_HDR_LEN] {
        let mut b = [0; VNET_HDR_LEN];
        b[0] = self.flags;
        b[1] = self.gso_type;
        b[2..4].copy_from_slice(&self.hdr_len.to_ne_bytes());
        b[4..6].copy_from_slice(&self.gso_size.to_ne_bytes());
        b[6..8].copy_from_slice(&self.csum_start.to_ne_bytes());
        b[8..10].copy_from_slice(&self.csum_offset.to_ne_bytes());
        b
    }
}

// ---------------------------------------------------------------------------------------------
// Checksums (RFC 1071)

/// Adds `data` to a ones'-complement sum accumulator (big-endian 16-bit words; an odd last
/// byte is padded with zero). Sum 32-bit words into 64 bits: the compiler vectorizes this,
/// and 2^32 ≡ 2^16 ≡ 1 (mod 0xffff), so folding gives the 16-bit sum.
pub(crate) fn checksum_add(data: &[u8], acc: u64) -> u64 {
    let mut chunks = data.chunks_exact(4);
    let mut sum = acc;
    for c in chunks.by_ref() {
        sum += u64::from(u32::from_be_bytes([c[0], c[1], c[2], c[3]]));
    }
    match *chunks.remainder() {
        [a] => sum += u64::from(a) << 8,
        [a, b] => sum += u64::from(u16::from_be_bytes([a, b])),
        [a, b, c] => sum += u64::from(u16::from_be_bytes([a, b])) + (u64::from(c) << 8),
        _ => {}
    }
    sum
}

/// Folds an accumulator to 16 bits (not complemented).
pub(crate) fn checksum_fold(acc: u64) -> u16 {
    let mut s = (acc & 0xffff_ffff) + (acc >> 32);
    s = (s & 0xffff) + (s >> 16);
    s = (s & 0xffff) + (s >> 16);
    s = (s & 0xffff) + (s >> 16);
    // Three folds bring any 33-bit value under 2^16.
    s as u16
}

/// The TCP pseudo-header sum of the IP header at `ip` (IPv4 or IPv6, by its version) for an
/// L4 segment of `l4_len` bytes. `ip` must hold the whole fixed header.
fn pseudo_sum(ip: &[u8], v6: bool, l4_len: usize) -> u64 {
    pseudo_sum_of(ip, v6, IPPROTO_TCP, l4_len)
}

/// [`pseudo_sum`] for the transport protocol `proto` (TCP or UDP).
fn pseudo_sum_of(ip: &[u8], v6: bool, proto: u8, l4_len: usize) -> u64 {
    let addrs = if v6 { &ip[8..40] } else { &ip[12..20] };
    checksum_add(addrs, u64::from(proto) + l4_len as u64)
}

/// Writes the IPv4 header checksum of the `ihl`-byte header at the start of `ip`.
fn ipv4_fix_checksum(ip: &mut [u8], ihl: usize) {
    ip[10..12].fill(0);
    let c = !checksum_fold(checksum_add(&ip[..ihl], 0));
    ip[10..12].copy_from_slice(&c.to_be_bytes());
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn be32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// The L3 offset and EtherType of an Ethernet frame, skipping up to two VLAN tags.
fn l3_of(frame: &[u8]) -> Option<(usize, u16)> {
    let mut at = 12;
    let mut et = be16(frame, at)?;
    for _ in 0..2 {
        if et != 0x8100 && et != 0x88a8 {
            break;
        }
        at += 4;
        et = be16(frame, at)?;
    }
    Some((at + 2, et))
}

// ---------------------------------------------------------------------------------------------
// Transmit: TAP -> us

/// What a frame read from the TAP needs before it can be sealed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TxPlan {
    /// Nothing: the frame is complete.
    Plain,
    /// Its transport checksum is partial: [`complete_csum`] with these offsets.
    Csum {
        /// `csum_start`.
        start: usize,
        /// `csum_offset`.
        offset: usize,
    },
    /// A TCP or UDP super-frame: cut it with [`Tso::segment`].
    Tso(Tso),
}

/// Decides what the frame `frame` (without its virtio-net header `hdr`) needs.
///
/// # Errors
/// Offsets outside the frame, an IP header that does not match the GSO type, or a GSO type
/// other than TCP and UDP.
pub(crate) fn plan_tx(hdr: &VnetHdr, frame: &[u8]) -> Result<TxPlan, OffloadError> {
    if hdr.gso_type == GSO_NONE {
        if hdr.flags & F_NEEDS_CSUM == 0 {
            return Ok(TxPlan::Plain);
        }
        let (start, offset) = (usize::from(hdr.csum_start), usize::from(hdr.csum_offset));
        if start + offset + 2 > frame.len() {
            return Err(OffloadError::Truncated);
        }
        return Ok(TxPlan::Csum { start, offset });
    }
    let (v6, udp) = match hdr.gso_type & !GSO_ECN {
        GSO_TCPV4 => (false, false),
        GSO_TCPV6 => (true, false),
        // The IP version comes from the frame.
        GSO_UDP_L4 if hdr.gso_type == GSO_UDP_L4 => {
            let (_, et) = l3_of(frame).ok_or(OffloadError::Truncated)?;
            (et == ETH_P_IPV6, true)
        }
        _ => return Err(OffloadError::Unsupported),
    };
    let (l3, et) = l3_of(frame).ok_or(OffloadError::Truncated)?;
    let l4 = usize::from(hdr.csum_start);
    let ip = frame.get(l3..).ok_or(OffloadError::Truncated)?;
    if v6 {
        if et != ETH_P_IPV6 || ip.len() < 40 || ip[0] >> 4 != 6 || l4 < l3 + 40 {
            return Err(OffloadError::BadHeader);
        }
        // UDP right after the fixed header (the kernel's USO does not pass extension headers).
        if udp && (ip[6] != IPPROTO_UDP || l4 != l3 + 40) {
            return Err(OffloadError::BadHeader);
        }
    } else {
        let ihl = usize::from(ip.first().ok_or(OffloadError::Truncated)? & 0x0f) * 4;
        if et != ETH_P_IPV4 || ip[0] >> 4 != 4 || ihl < 20 || l4 != l3 + ihl || ip.len() < ihl {
            return Err(OffloadError::BadHeader);
        }
        if ip[9] != if udp { IPPROTO_UDP } else { IPPROTO_TCP } {
            return Err(OffloadError::BadHeader);
        }
    }
    let hdr_len = if udp {
        l4 + 8
    } else {
        let doff = usize::from(frame.get(l4 + 12).ok_or(OffloadError::Truncated)? >> 4) * 4;
        if doff < 20 {
            return Err(OffloadError::Truncated);
        }
        l4 + doff
    };
    if hdr_len > frame.len() {
        return Err(OffloadError::Truncated);
    }
    let mss = usize::from(hdr.gso_size);
    if mss == 0 {
        return Err(OffloadError::BadHeader);
    }
    let payload = frame.len() - hdr_len;
    Ok(TxPlan::Tso(Tso {
        l3,
        l4,
        hdr_len,
        mss,
        v6,
        udp,
        len: frame.len(),
        segments: payload.div_ceil(mss).max(1),
    }))
}

/// Completes a partial transport checksum in place: the field at `start + offset` holds the
/// pseudo-header sum; the checksum covers everything from `start` to the end of the frame.
/// A result of zero is sent as 0xffff (the same value in ones' complement; UDP needs it).
///
/// # Errors
/// `Truncated` when the field lies outside the frame.
pub(crate) fn complete_csum(
    frame: &mut [u8],
    start: usize,
    offset: usize,
) -> Result<(), OffloadError> {
    let at = start + offset;
    if at + 2 > frame.len() {
        return Err(OffloadError::Truncated);
    }
    let mut c = !checksum_fold(checksum_add(&frame[start..], 0));
    if c == 0 {
        c = 0xffff;
    }
    frame[at..at + 2].copy_from_slice(&c.to_be_bytes());
    Ok(())
}

/// A checked TCP or UDP super-frame (see [`plan_tx`]), cut into segments one at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tso {
    l3: usize,
    l4: usize,
    hdr_len: usize,
    mss: usize,
    v6: bool,
    udp: bool,
    len: usize,
    segments: usize,
}

impl Tso {
    /// The number of segments (at least 1).
    pub(crate) fn segments(&self) -> usize {
        self.segments
    }

    /// The longest segment: headers plus one `gso_size` of payload.
    pub(crate) fn max_segment_len(&self) -> usize {
        self.hdr_len + self.mss
    }

    /// Writes segment `k` of the super-frame `frame` (the one given to [`plan_tx`]) into
    /// `out`: the headers with IP length, IPv4 id and header checksum, TCP sequence number
    /// and flags (FIN and PSH only on the last segment, CWR only on the first) or UDP length
    /// fixed, the payload, and the full TCP or UDP checksum (a UDP sum of zero is sent as
    /// 0xffff). Returns its length, or `None` when `k` is out of range, `frame` is not that
    /// frame, or `out` is too short.
    pub(crate) fn segment(&self, frame: &[u8], k: usize, out: &mut [u8]) -> Option<usize> {
        if k >= self.segments || frame.len() != self.len {
            return None;
        }
        let start = self.hdr_len + k * self.mss;
        let end = (start + self.mss).min(self.len);
        let seg_len = self.hdr_len + (end - start);
        let out = out.get_mut(..seg_len)?;
        out[..self.hdr_len].copy_from_slice(&frame[..self.hdr_len]);
        out[self.hdr_len..].copy_from_slice(&frame[start..end]);
        let (l3, l4) = (self.l3, self.l4);
        if self.v6 {
            let plen = u16::try_from(seg_len - l3 - 40).ok()?;
            out[l3 + 4..l3 + 6].copy_from_slice(&plen.to_be_bytes());
        } else {
            let total = u16::try_from(seg_len - l3).ok()?;
            out[l3 + 2..l3 + 4].copy_from_slice(&total.to_be_bytes());
            let id = be16(frame, l3 + 4)?.wrapping_add(k as u16);
            out[l3 + 4..l3 + 6].copy_from_slice(&id.to_be_bytes());
            ipv4_fix_checksum(&mut out[l3..], l4 - l3);
        }
        if self.udp {
            let ulen = u16::try_from(seg_len - l4).ok()?;
            out[l4 + 4..l4 + 6].copy_from_slice(&ulen.to_be_bytes());
            out[l4 + UDP_CSUM..l4 + UDP_CSUM + 2].fill(0);
            let acc = pseudo_sum_of(&out[l3..], self.v6, IPPROTO_UDP, seg_len - l4);
            let mut c = !checksum_fold(checksum_add(&out[l4..], acc));
            if c == 0 {
                c = 0xffff;
            }
            out[l4 + UDP_CSUM..l4 + UDP_CSUM + 2].copy_from_slice(&c.to_be_bytes());
            return Some(seg_len);
        }
        let seq = be32(frame, l4 + 4)?.wrapping_add((k * self.mss) as u32);
        out[l4 + 4..l4 + 8].copy_from_slice(&seq.to_be_bytes());
        if k + 1 < self.segments {
            out[l4 + 13] &= !(TCP_FIN | TCP_PSH);
        }
        if k > 0 {
            out[l4 + 13] &= !TCP_CWR;
        }
        out[l4 + TCP_CSUM..l4 + TCP_CSUM + 2].fill(0);
        let acc = pseudo_sum(&out[l3..], self.v6, seg_len - l4);
        let c = !checksum_fold(checksum_add(&out[l4..], acc));
        out[l4 + TCP_CSUM..l4 + TCP_CSUM + 2].copy_from_slice(&c.to_be_bytes());
        Some(seg_len)
    }
}

// ---------------------------------------------------------------------------------------------
// Receive: us -> TAP

/// A TCP segment or UDP datagram that may be coalesced: offsets of its headers and the
/// fields that matter.
#[derive(Debug, Clone, Copy)]
struct Seg {
    l3: usize,
    l4: usize,
    hdr_len: usize,
    payload: usize,
    seq: u32,
    flags: u8,
    v6: bool,
    /// A UDP datagram (`seq` and `flags` are 0).
    udp: bool,
}

/// The layout of `frame` if it is IPv4 without options or fragments, or IPv6 with `proto`
/// right after the fixed header, carrying `proto`, with an IP length exactly the frame's:
/// (L3 offset, IPv6, L4 offset).
fn plain_ip(frame: &[u8], proto: u8) -> Option<(usize, bool, usize)> {
    let (l3, et) = l3_of(frame)?;
    let ip = frame.get(l3..)?;
    match et {
        ETH_P_IPV4 => {
            let ok = ip.len() >= 20
                && ip[0] == 0x45
                && ip[9] == proto
                && usize::from(be16(ip, 2)?) == ip.len()
                && be16(ip, 6)? & 0x3fff == 0;
            ok.then_some((l3, false, l3 + 20))
        }
        ETH_P_IPV6 => {
            let ok = ip.len() >= 40
                && ip[0] >> 4 == 6
                && ip[6] == proto
                && usize::from(be16(ip, 4)?) + 40 == ip.len();
            ok.then_some((l3, true, l3 + 40))
        }
        _ => None,
    }
}

/// `frame` as a UDP coalescing candidate: IPv4 without options or fragments, or IPv6 with UDP
/// right after the fixed header; IP and UDP lengths exactly the frame's; some payload.
fn udp_candidate(frame: &[u8]) -> Option<Seg> {
    let (l3, v6, l4) = plain_ip(frame, IPPROTO_UDP)?;
    let hdr_len = l4 + 8;
    if usize::from(be16(frame, l4 + 4)?) != frame.len() - l4 || hdr_len >= frame.len() {
        return None;
    }
    // A checksum field of 0 (IPv4: no checksum, kept that way; IPv6: invalid, left for the
    // receiving stack to refuse) is never replaced by a computed one: not coalesced.
    if be16(frame, l4 + UDP_CSUM)? == 0 {
        return None;
    }
    Some(Seg {
        l3,
        l4,
        hdr_len,
        payload: frame.len() - hdr_len,
        seq: 0,
        flags: 0,
        v6,
        udp: true,
    })
}

/// `frame` as a coalescing candidate: IPv4 without options or fragments, or IPv6 with TCP
/// right after the fixed header; IP length exactly the frame's; only ACK or ACK|PSH set; some
/// payload.
fn tcp_candidate(frame: &[u8]) -> Option<Seg> {
    let (l3, v6, l4) = plain_ip(frame, IPPROTO_TCP)?;
    let flags = *frame.get(l4 + 13)?;
    if flags != TCP_ACK && flags != TCP_ACK | TCP_PSH {
        return None;
    }
    let doff = usize::from(frame[l4 + 12] >> 4) * 4;
    let hdr_len = l4 + doff;
    if doff < 20 || hdr_len >= frame.len() || hdr_len > MAX_HDR {
        return None;
    }
    Some(Seg {
        l3,
        l4,
        hdr_len,
        payload: frame.len() - hdr_len,
        seq: be32(frame, l4 + 4)?,
        flags,
        v6,
        udp: false,
    })
}

/// True when the full TCP or UDP checksum of candidate `frame` is right.
fn checksum_ok(frame: &[u8], s: &Seg) -> bool {
    let proto = if s.udp { IPPROTO_UDP } else { IPPROTO_TCP };
    let acc = pseudo_sum_of(&frame[s.l3..], s.v6, proto, frame.len() - s.l4);
    checksum_fold(checksum_add(&frame[s.l4..], acc)) == 0xffff
}

/// True when `a` and `b` (headers of the same length and layout `s`) belong to one flow and
/// may share a super-frame: equal except for the IP length, id and checksum, the TCP
/// sequence number, flags (both are ACK or ACK|PSH) and checksum, or the UDP length and
/// checksum.
fn same_flow(a: &[u8], b: &[u8], s: &Seg) -> bool {
    let (l3, l4) = (s.l3, s.l4);
    let eq = |r: core::ops::Range<usize>| a[r.clone()] == b[r];
    if !eq(0..l3) {
        return false;
    }
    let ip_ok = if s.v6 {
        eq(l3..l3 + 4) && eq(l3 + 6..l3 + 40)
    } else {
        eq(l3..l3 + 2) && eq(l3 + 6..l3 + 10) && eq(l3 + 12..l3 + 20)
    };
    if s.udp {
        return ip_ok && eq(l4..l4 + 4);
    }
    ip_ok && eq(l4..l4 + 4) && eq(l4 + 8..l4 + 13) && eq(l4 + 14..l4 + 16) && {
        eq(l4 + 18..s.hdr_len)
    }
}

/// One output frame: a single input frame, or several coalesced.
#[derive(Debug, Clone)]
struct Group {
    /// First and last member (input index); members are linked through `Gro::next`.
    first: usize,
    last: usize,
    count: usize,
    /// The first member's layout, when the group is a TCP or UDP flow that may still grow.
    seg: Option<Seg>,
    /// True while the next in-order segment may join.
    open: bool,
    /// The checksums are known good (DATA_VALID for a single frame).
    valid: bool,
    /// Payload bytes so far, and the sequence number the next member must have.
    payload: usize,
    next_seq: u32,
    /// Whether the last member had PSH.
    psh: bool,
    /// The first member's headers.
    hdr: [u8; MAX_HDR],
}

/// Coalesces the inner frames of one received batch (GRO): in-order TCP segments of a flow,
/// and (when the TAP takes UDP super-frames, [`with_udp`](Self::with_udp)) UDP datagrams of a
/// flow of one size, the last possibly shorter. Push every frame in order with
/// [`push`](Self::push), then write each of [`groups`](Self::groups) with
/// [`emit`](Self::emit) and [`members`](Self::members), in order: per flow, the order of the
/// input is kept. Call [`clear`](Self::clear) before the next batch.
#[derive(Debug)]
pub(crate) struct Gro {
    groups: Vec<Group>,
    next: [u8; GRO_MAX],
    items: usize,
    /// UDP datagrams may be coalesced (the TAP accepts `GSO_UDP_L4`).
    udp: bool,
}

impl Default for Gro {
    fn default() -> Self {
        Self::new()
    }
}

/// How to write one group (see [`Gro::emit`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Emit {
    /// Bytes of `head` to write first: the virtio-net header, then for a coalesced group the
    /// rewritten headers of the super-frame.
    pub(crate) head_len: usize,
    /// `None`: write the single member frame whole after `head`. `Some(off)`: write
    /// `frame[off..]` of every member, in order.
    pub(crate) payload_offset: Option<usize>,
}

impl Gro {
    /// An empty coalescer of TCP segments (allocates its tables once).
    pub(crate) fn new() -> Self {
        Self::with_udp(false)
    }

    /// An empty coalescer of TCP segments and, if `udp`, of UDP datagrams (for a TAP whose
    /// kernel took `TUN_F_USO4 | TUN_F_USO6`: one that accepts UDP super-frames).
    pub(crate) fn with_udp(udp: bool) -> Self {
        Self {
            groups: Vec::with_capacity(GRO_MAX),
            next: [u8::MAX; GRO_MAX],
            items: 0,
            udp,
        }
    }

    /// Forgets the last batch.
    pub(crate) fn clear(&mut self) {
        self.groups.clear();
        self.items = 0;
    }

    /// True when [`GRO_MAX`] frames were pushed.
    pub(crate) fn is_full(&self) -> bool {
        self.items == GRO_MAX
    }

    /// The number of output frames so far.
    pub(crate) fn groups(&self) -> usize {
        self.groups.len()
    }

    /// Adds the next frame (it gets index [`len`](Self::len)). `trusted`: its content was
    /// authenticated end to end (a PSP ICV), so its checksum, computed by the sender, is
    /// believed; otherwise a TCP or UDP checksum is verified before the frame may be
    /// coalesced, and other frames get no `DATA_VALID`. Returns false (and ignores the frame)
    /// when full.
    pub(crate) fn push(&mut self, frame: &[u8], trusted: bool) -> bool {
        if self.is_full() {
            return false;
        }
        let i = self.items;
        self.items += 1;
        self.next[i] = u8::MAX;
        let cand = tcp_candidate(frame)
            .or_else(|| udp_candidate(frame).filter(|_| self.udp))
            .filter(|s| trusted || checksum_ok(frame, s));
        let Some(s) = cand else {
            self.new_group(i, None, trusted, frame);
            return true;
        };
        // The newest open group of this flow, if any (searching newest first keeps the
        // search short for the common single-flow batch).
        let found = self.groups.iter().rposition(|g| {
            g.open
                && g.seg.is_some_and(|f| {
                    f.hdr_len == s.hdr_len && f.l4 == s.l4 && f.v6 == s.v6 && f.udp == s.udp
                })
                && same_flow(&g.hdr, frame, &s)
        });
        if let Some(gi) = found {
            let g = &mut self.groups[gi];
            let gso = g.seg.map_or(0, |f| f.payload);
            let ip_len = s.hdr_len - s.l3 + g.payload + s.payload;
            let in_order = s.udp || s.seq == g.next_seq;
            if in_order && s.payload <= gso && ip_len <= 65_535 {
                self.next[g.last] = i as u8;
                g.last = i;
                g.count += 1;
                g.payload += s.payload;
                g.next_seq = s.seq.wrapping_add(s.payload as u32);
                g.psh = s.flags & TCP_PSH != 0;
                g.open = !g.psh && s.payload == gso;
                return true;
            }
            // Out of order or a different size: this group is done; the frame starts the
            // next one (written after it, so the flow's order is kept).
            g.open = false;
        }
        self.new_group(i, Some(s), true, frame);
        true
    }

    fn new_group(&mut self, i: usize, seg: Option<Seg>, valid: bool, frame: &[u8]) {
        let mut hdr = [0; MAX_HDR];
        let (open, payload, next_seq, psh) = match seg {
            Some(s) => {
                hdr[..s.hdr_len].copy_from_slice(&frame[..s.hdr_len]);
                let psh = s.flags & TCP_PSH != 0;
                (!psh, s.payload, s.seq.wrapping_add(s.payload as u32), psh)
            }
            None => (false, 0, 0, false),
        };
        self.groups.push(Group {
            first: i,
            last: i,
            count: 1,
            seg,
            open,
            valid,
            payload,
            next_seq,
            psh,
            hdr,
        });
    }

    /// The input indices of group `g`'s members, in order.
    ///
    /// # Panics
    /// If `g >= groups()`.
    pub(crate) fn members(&self, g: usize) -> impl Iterator<Item = usize> + '_ {
        let mut at = Some(self.groups[g].first);
        core::iter::from_fn(move || {
            let i = at?;
            let n = self.next[i];
            at = (n != u8::MAX).then_some(usize::from(n));
            Some(i)
        })
    }

    /// Writes into `head` what goes in front of group `g`: the virtio-net header, and for a
    /// coalesced group the super-frame's headers (IP length and IPv4 header checksum fixed,
    /// PSH if the last TCP segment had it, the UDP length, the pseudo-header sum in the TCP or
    /// UDP checksum field with `NEEDS_CSUM`, `gso_size` = the first member's payload), as the
    /// kernel expects GSO input. A single frame gets `DATA_VALID` when its checksum is trusted or verified.
    ///
    /// # Panics
    /// If `g >= groups()`.
    pub(crate) fn emit(&self, g: usize, head: &mut [u8; VNET_HDR_LEN + MAX_HDR]) -> Emit {
        let grp = &self.groups[g];
        let seg = match grp.seg {
            Some(s) if grp.count > 1 => s,
            _ => {
                let flags = if grp.valid { F_DATA_VALID } else { 0 };
                head[..VNET_HDR_LEN].copy_from_slice(
                    &VnetHdr {
                        flags,
                        ..VnetHdr::default()
                    }
                    .emit(),
                );
                return Emit {
                    head_len: VNET_HDR_LEN,
                    payload_offset: None,
                };
            }
        };
        let (l3, l4, hl) = (seg.l3, seg.l4, seg.hdr_len);
        let h = &mut head[VNET_HDR_LEN..VNET_HDR_LEN + hl];
        h.copy_from_slice(&grp.hdr[..hl]);
        let total = hl + grp.payload;
        // push() kept the IP length at most 65 535.
        let ip_len = (total - l3) as u16;
        if seg.v6 {
            h[l3 + 4..l3 + 6].copy_from_slice(&(ip_len - 40).to_be_bytes());
        } else {
            h[l3 + 2..l3 + 4].copy_from_slice(&ip_len.to_be_bytes());
            ipv4_fix_checksum(&mut h[l3..], 20);
        }
        let (proto, csum_at, gso_type) = if seg.udp {
            // push() kept the IP length, so the UDP length, at most 65 535.
            h[l4 + 4..l4 + 6].copy_from_slice(&((total - l4) as u16).to_be_bytes());
            (IPPROTO_UDP, UDP_CSUM, GSO_UDP_L4)
        } else {
            if grp.psh {
                h[l4 + 13] |= TCP_PSH;
            }
            let t = if seg.v6 { GSO_TCPV6 } else { GSO_TCPV4 };
            (IPPROTO_TCP, TCP_CSUM, t)
        };
        let pseudo = checksum_fold(pseudo_sum_of(&h[l3..], seg.v6, proto, total - l4));
        h[l4 + csum_at..l4 + csum_at + 2].copy_from_slice(&pseudo.to_be_bytes());
        let vh = VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type,
            // MAX_HDR < 2^16, and the payload of one segment is under 64 KiB.
            hdr_len: hl as u16,
            gso_size: seg.payload as u16,
            csum_start: l4 as u16,
            csum_offset: csum_at as u16,
        };
        head[..VNET_HDR_LEN].copy_from_slice(&vh.emit());
        Emit {
            head_len: VNET_HDR_LEN + hl,
            payload_offset: Some(hl),
        }
    }
}

/// See [`crate::fuzzing::tap_offload`].
pub(crate) fn fuzz_one(input: &[u8]) {
    let (Some(hdr), Some(&flags)) = (VnetHdr::parse(input), input.get(VNET_HDR_LEN)) else {
        return;
    };
    let trusted = flags & 1 != 0;
    let frame = &input[VNET_HDR_LEN + 1..];
    let mut segs: Vec<Vec<u8>> = Vec::new();
    match plan_tx(&hdr, frame) {
        Ok(TxPlan::Tso(t)) => {
            let mut out = vec![0; t.max_segment_len()];
            for k in 0..t.segments().min(GRO_MAX) {
                if let Some(n) = t.segment(frame, k, &mut out) {
                    assert!(n <= t.max_segment_len());
                    segs.push(out[..n].to_vec());
                }
            }
        }
        Ok(TxPlan::Csum { start, offset }) => {
            let mut f = frame.to_vec();
            let _ = complete_csum(&mut f, start, offset);
            segs.push(f);
        }
        Ok(TxPlan::Plain) | Err(_) => segs.push(frame.to_vec()),
    }
    let mut gro = Gro::with_udp(true);
    for f in &segs {
        if !gro.push(f, trusted) {
            break;
        }
    }
    let mut head = [0; VNET_HDR_LEN + MAX_HDR];
    for g in 0..gro.groups() {
        let e = gro.emit(g, &mut head);
        assert!(e.head_len <= head.len());
        for i in gro.members(g) {
            assert!(e.payload_offset.is_none_or(|off| off <= segs[i].len()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator for the property tests (xorshift64*).
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    /// An Ethernet + IP + TCP frame as the kernel's TSO hands it to the TAP: IP length over
    /// the whole frame, the pseudo-header sum (of the whole TCP length) in the checksum field.
    fn super_frame(v6: bool, opts: &[u8], flags: u8, payload: &[u8]) -> (Vec<u8>, usize) {
        let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];
        let l3 = 14;
        if v6 {
            f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0, 0, 0, IPPROTO_TCP, 64]);
            f.extend_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
            f.extend_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        } else {
            f.extend_from_slice(&[0x08, 0x00, 0x45, 0, 0, 0, 0x12, 0x34, 0x40, 0, 64]);
            f.extend_from_slice(&[IPPROTO_TCP, 0, 0, 10, 77, 0, 1, 10, 77, 0, 2]);
        }
        let l4 = f.len();
        let doff = (20 + opts.len()) / 4;
        f.extend_from_slice(&[0x9c, 0x40, 0x14, 0x51, 0xff, 0xff, 0xf0, 0x00]); // ports, seq
        f.extend_from_slice(&[0, 0, 0x10, 0x01, (doff << 4) as u8, flags, 0x01, 0xf6]);
        f.extend_from_slice(&[0, 0, 0, 0]);
        f.extend_from_slice(opts);
        f.extend_from_slice(payload);
        let len = f.len();
        if v6 {
            let p = (len - l3 - 40) as u16;
            f[l3 + 4..l3 + 6].copy_from_slice(&p.to_be_bytes());
        } else {
            let t = (len - l3) as u16;
            f[l3 + 2..l3 + 4].copy_from_slice(&t.to_be_bytes());
            ipv4_fix_checksum(&mut f[l3..], 20);
        }
        let ps = checksum_fold(pseudo_sum(&f[l3..], v6, len - l4));
        f[l4 + 16..l4 + 18].copy_from_slice(&ps.to_be_bytes());
        (f, l4)
    }

    fn tso_hdr(v6: bool, l4: usize, mss: usize) -> VnetHdr {
        VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: if v6 { GSO_TCPV6 } else { GSO_TCPV4 },
            hdr_len: 0,
            gso_size: mss as u16,
            csum_start: l4 as u16,
            csum_offset: 16,
        }
    }

    /// An Ethernet + IP + UDP super-frame as the kernel's USO hands it to the TAP (IP and UDP
    /// lengths over the whole frame, the pseudo-header sum in the checksum field), and its
    /// virtio-net header for datagrams of `gso` payload bytes.
    fn udp_super_frame(v6: bool, payload: &[u8], gso: usize) -> (Vec<u8>, VnetHdr) {
        let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];
        let l3 = 14;
        if v6 {
            f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0, 0, 0, IPPROTO_UDP, 64]);
            f.extend_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
            f.extend_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        } else {
            f.extend_from_slice(&[0x08, 0x00, 0x45, 0, 0, 0, 0x12, 0x34, 0x40, 0, 64]);
            f.extend_from_slice(&[IPPROTO_UDP, 0, 0, 10, 77, 0, 1, 10, 77, 0, 2]);
        }
        let l4 = f.len();
        f.extend_from_slice(&[0x13, 0xc4, 0x14, 0x51, 0, 0, 0, 0]); // ports 5060 -> 5201
        f.extend_from_slice(payload);
        let len = f.len();
        if v6 {
            f[l3 + 4..l3 + 6].copy_from_slice(&((len - l3 - 40) as u16).to_be_bytes());
        } else {
            f[l3 + 2..l3 + 4].copy_from_slice(&((len - l3) as u16).to_be_bytes());
            ipv4_fix_checksum(&mut f[l3..], 20);
        }
        f[l4 + 4..l4 + 6].copy_from_slice(&((len - l4) as u16).to_be_bytes());
        let ps = checksum_fold(pseudo_sum_of(&f[l3..], v6, IPPROTO_UDP, len - l4));
        f[l4 + 6..l4 + 8].copy_from_slice(&ps.to_be_bytes());
        let h = VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_UDP_L4,
            hdr_len: (l4 + 8) as u16,
            gso_size: gso as u16,
            csum_start: l4 as u16,
            csum_offset: 6,
        };
        (f, h)
    }

    /// Cuts a UDP super-frame with its header into its datagrams.
    fn cut(h: &VnetHdr, f: &[u8]) -> Vec<Vec<u8>> {
        let Ok(TxPlan::Tso(t)) = plan_tx(h, f) else {
            panic!("a UDP super-frame: {:?}", plan_tx(h, f));
        };
        (0..t.segments())
            .map(|k| {
                let mut out = vec![0; t.max_segment_len()];
                let n = t.segment(f, k, &mut out).expect("segment");
                out.truncate(n);
                out
            })
            .collect()
    }

    fn udp_ok(f: &[u8]) -> bool {
        udp_candidate(f).is_some_and(|s| checksum_ok(f, &s))
    }

    #[test]
    fn uso_cuts_a_udp_super_frame_into_checked_datagrams() {
        for v6 in [false, true] {
            let payload: Vec<u8> = (0..3000u32).map(|i| (i * 7 + 3) as u8).collect();
            let (f, h) = udp_super_frame(v6, &payload, 1000);
            let (f2, h2) = udp_super_frame(v6, &payload[..2500], 1000);
            for (f, h, sizes) in [
                (&f, &h, vec![1000, 1000, 1000]),
                (&f2, &h2, vec![1000, 1000, 500]),
            ] {
                let d = cut(h, f);
                assert_eq!(
                    d.iter()
                        .map(|x| x.len() - udp_candidate(x).unwrap().hdr_len)
                        .collect::<Vec<_>>(),
                    sizes,
                    "v6 {v6}"
                );
                let mut back = Vec::new();
                for (k, x) in d.iter().enumerate() {
                    assert!(udp_ok(x), "v6 {v6}: datagram {k} has a bad UDP checksum");
                    if !v6 {
                        assert!(ipv4_ok(x), "datagram {k}: IPv4 header checksum");
                        assert_eq!(be16(x, 18), Some(0x1234 + k as u16), "IPv4 id");
                    }
                    back.extend_from_slice(&x[udp_candidate(x).unwrap().hdr_len..]);
                }
                assert_eq!(
                    back,
                    payload[..back.len()],
                    "v6 {v6}: the payload, in order"
                );
            }
        }
        // UDP_L4 over a TCP header, or with ECN, is refused.
        let (mut f, h) = udp_super_frame(false, &[1; 100], 50);
        f[23] = IPPROTO_TCP;
        assert_eq!(plan_tx(&h, &f), Err(OffloadError::BadHeader));
        let (f, mut h) = udp_super_frame(false, &[1; 100], 50);
        h.gso_type |= GSO_ECN;
        assert_eq!(plan_tx(&h, &f), Err(OffloadError::Unsupported));
    }

    /// Writes what `gro` emits for group `g` as one frame and its virtio-net header.
    fn emitted(gro: &Gro, g: usize, frames: &[Vec<u8>]) -> (VnetHdr, Vec<u8>) {
        let mut head = [0; VNET_HDR_LEN + MAX_HDR];
        let e = gro.emit(g, &mut head);
        let h = VnetHdr::parse(&head).unwrap();
        let mut f = head[VNET_HDR_LEN..e.head_len].to_vec();
        for i in gro.members(g) {
            match e.payload_offset {
                Some(off) => f.extend_from_slice(&frames[i][off..]),
                None => f.extend_from_slice(&frames[i]),
            }
        }
        (h, f)
    }

    #[test]
    fn udp_datagrams_of_a_flow_coalesce_into_what_cuts_back_to_them() {
        for v6 in [false, true] {
            for trusted in [false, true] {
                let payload: Vec<u8> = (0..(20 * 172 + 100) as u32).map(|i| i as u8).collect();
                let (f, h) = udp_super_frame(v6, &payload, 172);
                let d = cut(&h, &f);
                assert_eq!(d.len(), 21);
                let mut gro = Gro::with_udp(true);
                for x in &d {
                    assert!(gro.push(x, trusted));
                }
                assert_eq!(
                    gro.groups(),
                    1,
                    "v6 {v6}, trusted {trusted}: one flow, one write"
                );
                let (eh, ef) = emitted(&gro, 0, &d);
                assert_eq!(eh.gso_type, GSO_UDP_L4);
                assert_eq!(usize::from(eh.gso_size), 172);
                assert_eq!(
                    cut(&eh, &ef),
                    d,
                    "v6 {v6}: cutting the super-frame gives them back"
                );
            }
        }
    }

    #[test]
    fn the_fuzz_entry_takes_super_frames_and_garbage() {
        let (f, h) = udp_super_frame(true, &[9; 3000], 1000);
        let (t, l4) = super_frame(false, &[], TCP_ACK, &[1; 3000]);
        let th = tso_hdr(false, l4, 1000);
        for (h, f) in [(h, f), (th, t)] {
            for flag in [0u8, 1] {
                let mut input = h.emit().to_vec();
                input.push(flag);
                input.extend_from_slice(&f);
                fuzz_one(&input);
                input.truncate(input.len() / 2);
                fuzz_one(&input);
            }
        }
        fuzz_one(&[]);
        fuzz_one(&[0xff; 40]);
    }

    #[test]
    fn udp_coalescing_keeps_flows_sizes_and_checksums_apart() {
        let payload: Vec<u8> = (0..1000u32).map(|i| i as u8).collect();
        let (f, h) = udp_super_frame(false, &payload, 200);
        let d = cut(&h, &f);
        // Without USO on the TAP, UDP is written datagram by datagram.
        let mut gro = Gro::new();
        for x in &d {
            gro.push(x, true);
        }
        assert_eq!(gro.groups(), d.len());
        // Another port, a longer datagram after a shorter one, a bad checksum (untrusted):
        // each starts a group of its own; the flow's order is kept.
        let mut other = d[1].clone();
        other[14 + 20 + 1] ^= 1; // source port
        let mut bad = d[3].clone();
        bad[14 + 20 + 8] ^= 0xff;
        let (short_f, short_h) = udp_super_frame(false, &payload[..100], 200);
        let short = cut(&short_h, &short_f).remove(0);
        let frames = vec![d[0].clone(), other, d[2].clone(), short, d[4].clone(), bad];
        let mut gro = Gro::with_udp(true);
        for x in &frames {
            gro.push(x, false);
        }
        let groups: Vec<Vec<usize>> = (0..gro.groups())
            .map(|g| gro.members(g).collect())
            .collect();
        assert_eq!(groups, [vec![0, 2, 3], vec![1], vec![4], vec![5]]);
        // A datagram with a zero checksum field stays alone, so it keeps it (IPv4: none;
        // IPv6: invalid, for the receiving stack to refuse).
        for v6 in [false, true] {
            let (f, h) = udp_super_frame(v6, &payload, 200);
            let mut zero = cut(&h, &f).remove(0);
            let l4 = if v6 { 14 + 40 } else { 14 + 20 };
            zero[l4 + 6..l4 + 8].fill(0);
            let mut gro = Gro::with_udp(true);
            gro.push(&zero, true);
            gro.push(&zero, true);
            assert_eq!(gro.groups(), 2, "v6 {v6}");
        }
    }

    fn ipv4_ok(f: &[u8]) -> bool {
        checksum_fold(checksum_add(&f[14..34], 0)) == 0xffff
    }

    fn tcp_ok(f: &[u8]) -> bool {
        tcp_candidate(f).is_some_and(|s| checksum_ok(f, &s))
    }

    #[test]
    fn vnet_hdr_round_trip() {
        let h = VnetHdr {
            flags: 1,
            gso_type: 4,
            hdr_len: 66,
            gso_size: 1448,
            csum_start: 54,
            csum_offset: 16,
        };
        assert_eq!(VnetHdr::parse(&h.emit()), Some(h));
        assert_eq!(VnetHdr::parse(&[0; 9]), None);
    }

    #[test]
    fn checksum_known_answer() {
        // RFC 1071 section 3 example: the sum of these words is 0xddf2.
        let d = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(checksum_fold(checksum_add(&d, 0)), 0xddf2);
        // Odd length: the last byte is the high half of a word.
        assert_eq!(checksum_fold(checksum_add(&[0x12, 0x34, 0x56], 0)), 0x6834);
        // A real IPv4 header (Wikipedia's example) verifies and recomputes to 0xb861.
        let mut ip = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(checksum_fold(checksum_add(&ip, 0)), 0xffff);
        ip[10..12].fill(0);
        ipv4_fix_checksum(&mut ip, 20);
        assert_eq!(ip[10..12], [0xb8, 0x61]);
    }

    #[test]
    fn plain_and_partial_checksum() {
        let (f, l4) = super_frame(false, &[], TCP_ACK | TCP_PSH, b"hello, world");
        assert_eq!(plan_tx(&VnetHdr::default(), &f), Ok(TxPlan::Plain));
        let h = VnetHdr {
            flags: F_NEEDS_CSUM,
            csum_start: l4 as u16,
            csum_offset: 16,
            ..VnetHdr::default()
        };
        let TxPlan::Csum { start, offset } = plan_tx(&h, &f).unwrap() else {
            panic!("not a checksum plan");
        };
        let mut g = f.clone();
        complete_csum(&mut g, start, offset).unwrap();
        assert!(tcp_ok(&g));
        let bad = VnetHdr {
            csum_start: f.len() as u16,
            ..h
        };
        assert_eq!(plan_tx(&bad, &f), Err(OffloadError::Truncated));
    }

    #[test]
    fn bad_gso_headers_are_refused() {
        let (f, l4) = super_frame(false, &[], TCP_ACK, &[7; 3000]);
        let h = tso_hdr(false, l4, 1000);
        assert!(matches!(plan_tx(&h, &f), Ok(TxPlan::Tso(_))));
        let udp = VnetHdr { gso_type: 3, ..h };
        assert_eq!(plan_tx(&udp, &f), Err(OffloadError::Unsupported));
        let v6 = VnetHdr {
            gso_type: GSO_TCPV6,
            ..h
        };
        assert_eq!(plan_tx(&v6, &f), Err(OffloadError::BadHeader));
        let zero = VnetHdr { gso_size: 0, ..h };
        assert_eq!(plan_tx(&zero, &f), Err(OffloadError::BadHeader));
        let off = VnetHdr {
            csum_start: l4 as u16 + 4,
            ..h
        };
        assert!(plan_tx(&off, &f).is_err());
        assert!(plan_tx(&h, &f[..40]).is_err());
        for cut in 0..60 {
            let _ = plan_tx(&h, &f[..cut]);
        }
    }

    #[test]
    fn segments_fix_every_field() {
        let payload: Vec<u8> = (0..2500u32).map(|i| (i * 7) as u8).collect();
        let flags = TCP_ACK | TCP_PSH | TCP_FIN | TCP_CWR;
        let (f, l4) = super_frame(false, &[], flags, &payload);
        let TxPlan::Tso(t) = plan_tx(&tso_hdr(false, l4, 1000), &f).unwrap() else {
            panic!("not TSO");
        };
        assert_eq!(t.segments(), 3);
        let mut out = [0u8; 2048];
        let mut data = Vec::new();
        for k in 0..3 {
            let n = t.segment(&f, k, &mut out).unwrap();
            let s = &out[..n];
            assert_eq!(n, 54 + [1000, 1000, 500][k]);
            assert!(ipv4_ok(s), "segment {k}: IPv4 checksum");
            assert_eq!(be16(s, 16), Some((n - 14) as u16));
            assert_eq!(be16(s, 18), Some(0x1234 + k as u16));
            assert_eq!(
                be32(s, 38),
                Some(0xfffff000u32.wrapping_add(1000 * k as u32))
            );
            let fl = s[l4 + 13];
            assert_eq!(fl & TCP_CWR != 0, k == 0, "CWR only on the first");
            assert_eq!(
                fl & (TCP_FIN | TCP_PSH),
                if k == 2 { TCP_FIN | TCP_PSH } else { 0 }
            );
            let acc = pseudo_sum(&s[14..], false, n - l4);
            assert_eq!(checksum_fold(checksum_add(&s[l4..], acc)), 0xffff);
            data.extend_from_slice(&s[54..]);
        }
        assert_eq!(data, payload);
        assert_eq!(t.segment(&f, 3, &mut out), None);
        assert_eq!(t.segment(&f, 0, &mut out[..100]), None);
    }

    /// segment -> coalesce gives back the super-frame, over random sizes, options, IP
    /// versions and flags; every checksum is verified by recomputation on the way.
    #[test]
    fn segment_then_coalesce_round_trips() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for case in 0..300 {
            let v6 = rng.below(2) == 1;
            let opts: &[u8] = match rng.below(3) {
                0 => &[],
                1 => &[1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2],
                _ => &[1, 1, 8, 10, 0xaa, 0xbb, 0xcc, 0xdd, 0, 0, 0, 9, 1, 1, 1, 0],
            };
            let mss = 500 + rng.below(1000);
            let len = 1 + rng.below(60_000);
            let payload: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            let psh = rng.below(2) == 1;
            let flags = if psh { TCP_ACK | TCP_PSH } else { TCP_ACK };
            let (f, l4) = super_frame(v6, opts, flags, &payload);
            let hdr = tso_hdr(v6, l4, mss);
            let TxPlan::Tso(t) = plan_tx(&hdr, &f).unwrap() else {
                panic!("case {case}: not TSO");
            };
            let mut segs = Vec::new();
            for k in 0..t.segments() {
                let mut out = vec![0u8; t.max_segment_len()];
                let n = t.segment(&f, k, &mut out).unwrap();
                out.truncate(n);
                assert!(tcp_ok(&out), "case {case} segment {k}: TCP checksum");
                if !v6 {
                    assert!(ipv4_ok(&out), "case {case} segment {k}: IPv4 checksum");
                }
                segs.push(out);
            }
            // Coalesce in batches of GRO_MAX, untrusted so checksums are verified again.
            let mut rebuilt = Vec::new();
            let mut gro = Gro::new();
            for chunk in segs.chunks(GRO_MAX) {
                gro.clear();
                for s in chunk {
                    assert!(gro.push(s, false));
                }
                assert_eq!(gro.groups(), 1, "case {case}: one flow, one super-frame");
                let mut head = [0; VNET_HDR_LEN + MAX_HDR];
                let e = gro.emit(0, &mut head);
                let vh = VnetHdr::parse(&head).unwrap();
                let mut sf = head[VNET_HDR_LEN..e.head_len].to_vec();
                match e.payload_offset {
                    None => {
                        assert_eq!(chunk.len(), 1);
                        assert_eq!(vh.flags, F_DATA_VALID);
                        sf = chunk[0].clone();
                    }
                    Some(off) => {
                        assert_eq!(vh.flags, F_NEEDS_CSUM);
                        assert_eq!(usize::from(vh.gso_size), mss);
                        assert_eq!(usize::from(vh.csum_start), l4);
                        assert_eq!(gro.members(0).count(), chunk.len());
                        for i in gro.members(0) {
                            sf.extend_from_slice(&chunk[i][off..]);
                        }
                        // The kernel would complete the checksum; so do we, and check it.
                        complete_csum(&mut sf, l4, 16).unwrap();
                        assert!(tcp_ok(&sf), "case {case}: super-frame checksum");
                    }
                }
                if !v6 {
                    assert!(ipv4_ok(&sf));
                }
                rebuilt.push(sf);
            }
            if rebuilt.len() == 1 {
                // One batch: the very super-frame we started from, checksum completed.
                let mut want = f.clone();
                complete_csum(&mut want, l4, 16).unwrap();
                assert_eq!(rebuilt[0], want, "case {case}");
            }
            let data: Vec<u8> = rebuilt
                .iter()
                .flat_map(|s| s[l4 + 20 + opts.len()..].to_vec())
                .collect();
            assert_eq!(data, payload, "case {case}");
        }
    }

    fn segs_of(v6: bool, flags: u8, len: usize, mss: usize) -> Vec<Vec<u8>> {
        let (f, l4) = super_frame(v6, &[], flags, &vec![5; len]);
        let TxPlan::Tso(t) = plan_tx(&tso_hdr(v6, l4, mss), &f).unwrap() else {
            panic!("not TSO");
        };
        (0..t.segments())
            .map(|k| {
                let mut out = vec![0; 2048];
                let n = t.segment(&f, k, &mut out).unwrap();
                out.truncate(n);
                out
            })
            .collect()
    }

    fn groups_of(frames: &[Vec<u8>], trusted: bool) -> Vec<Vec<usize>> {
        let mut gro = Gro::new();
        for f in frames {
            gro.push(f, trusted);
        }
        (0..gro.groups())
            .map(|g| gro.members(g).collect())
            .collect()
    }

    #[test]
    fn coalescing_rules() {
        let s = segs_of(false, TCP_ACK, 4000, 1000);
        // In order: one group.
        assert_eq!(groups_of(&s, true), [vec![0, 1, 2, 3]]);
        // A gap: two groups, order kept.
        let gap = [s[0].clone(), s[2].clone(), s[3].clone()];
        assert_eq!(groups_of(&gap, true), [vec![0], vec![1, 2]]);
        // Reordered: no merge backwards.
        let rev = [s[1].clone(), s[0].clone()];
        assert_eq!(groups_of(&rev, true), [vec![0], vec![1]]);
        // A short segment ends the group.
        let short = segs_of(false, TCP_ACK, 2500, 1000);
        let mut after = short.clone();
        after.push(s[3].clone());
        assert_eq!(groups_of(&after, true)[0], vec![0, 1, 2]);
        // PSH on the last one joins and closes.
        let psh = segs_of(false, TCP_ACK | TCP_PSH, 3000, 1000);
        assert_eq!(groups_of(&psh, true), [vec![0, 1, 2]]);
        // FIN on the last: not coalesced. CWR on the first: not coalesced.
        let fin = segs_of(false, TCP_ACK | TCP_FIN, 3000, 1000);
        assert_eq!(groups_of(&fin, true), [vec![0, 1], vec![2]]);
        let cwr = segs_of(false, TCP_ACK | TCP_CWR, 3000, 1000);
        assert_eq!(groups_of(&cwr, true), [vec![0], vec![1, 2]]);
        // A different ACK number, window or TTL: different groups.
        for (at, what) in [
            (14 + 20 + 8, "ack"),
            (14 + 20 + 14, "window"),
            (14 + 8, "ttl"),
        ] {
            let mut t = s[..2].to_vec();
            t[1][at] ^= 1;
            assert_eq!(groups_of(&t, true).len(), 2, "{what}");
        }
        // A bad checksum: not coalesced and not DATA_VALID when untrusted.
        let mut bad = s[..3].to_vec();
        bad[1][60] ^= 0xff;
        assert_eq!(groups_of(&bad, false), [vec![0], vec![1], vec![2]]);
        let mut gro = Gro::new();
        gro.push(&bad[1], false);
        let mut head = [0; VNET_HDR_LEN + MAX_HDR];
        gro.emit(0, &mut head);
        assert_eq!(head[0], 0);
        // Two interleaved flows: two groups, each in order.
        let v6 = segs_of(true, TCP_ACK, 3000, 1000);
        let mixed = [
            s[0].clone(),
            v6[0].clone(),
            s[1].clone(),
            v6[1].clone(),
            v6[2].clone(),
        ];
        assert_eq!(groups_of(&mixed, true), [vec![0, 2], vec![1, 3, 4]]);
        // Non-TCP frames pass through alone, DATA_VALID when trusted.
        let arp = vec![0xff; 60];
        let mut gro = Gro::new();
        gro.push(&arp, true);
        gro.push(&arp, true);
        assert_eq!(gro.groups(), 2);
        assert_eq!(gro.emit(1, &mut head).payload_offset, None);
        assert_eq!(head[0], F_DATA_VALID);
    }

    #[test]
    fn coalescing_stops_at_64k() {
        let s = segs_of(false, TCP_ACK, 1400 * 50, 1400);
        let g = groups_of(&s, true);
        assert_eq!(g.len(), 2);
        assert_eq!(g[0].len(), 46); // 20 + 20 + 46 x 1400 = 64 440 <= 65 535
    }

    #[test]
    fn garbage_never_panics() {
        let mut rng = Rng(7);
        let mut gro = Gro::new();
        let (f, l4) = super_frame(
            false,
            &[1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2],
            TCP_ACK,
            &[1; 3000],
        );
        for _ in 0..2000 {
            let mut g = f.clone();
            for _ in 0..1 + rng.below(4) {
                let at = rng.below(g.len().min(80));
                g[at] = rng.next() as u8;
            }
            g.truncate(rng.below(g.len() + 1));
            let h = VnetHdr {
                gso_size: rng.below(3000) as u16,
                ..tso_hdr(rng.below(2) == 1, l4, 1000)
            };
            if let Ok(TxPlan::Tso(t)) = plan_tx(&h, &g) {
                let mut out = [0; 2048];
                for k in 0..t.segments().min(4) {
                    let _ = t.segment(&g, k, &mut out);
                }
            }
            if gro.is_full() {
                gro.clear();
            }
            gro.push(&g, rng.below(2) == 1);
        }
        let mut head = [0; VNET_HDR_LEN + MAX_HDR];
        for g in 0..gro.groups() {
            let _ = gro.emit(g, &mut head);
            assert!(gro.members(g).count() >= 1);
        }
    }
}
