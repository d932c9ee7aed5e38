//! A minimal reader for classic libpcap files (the format `tcpdump -w` writes): checked lengths,
//! both byte orders, micro- and nanosecond variants, never panics. pcapng is refused with a hint.

use core::fmt;

/// Link type 1: Ethernet.
pub const LINKTYPE_ETHERNET: u32 = 1;
/// The largest record we accept (jumbo frames with headroom).
pub const MAX_RECORD: u32 = 256 * 1024;

const GLOBAL_HEADER_LEN: usize = 24;
const RECORD_HEADER_LEN: usize = 16;

/// Why a capture file was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PcapError {
    /// Shorter than the 24-byte global header.
    TruncatedHeader,
    /// The magic number is not a classic pcap magic.
    BadMagic,
    /// The file is pcapng, which this reader does not parse.
    Pcapng,
    /// Record `n` (0-based) is cut short.
    TruncatedRecord(usize),
    /// Record `n` claims a length above [`MAX_RECORD`] or above its original length.
    BadRecordLength(usize),
}

impl fmt::Display for PcapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TruncatedHeader => f.write_str("file too short for a pcap header"),
            Self::BadMagic => f.write_str("not a pcap file (bad magic number)"),
            Self::Pcapng => f.write_str(
                "pcapng is not supported; convert with `tcpdump -r IN -w OUT` (writes classic pcap)",
            ),
            Self::TruncatedRecord(n) => write!(f, "record {n} is truncated"),
            Self::BadRecordLength(n) => write!(f, "record {n} has an impossible length"),
        }
    }
}

impl core::error::Error for PcapError {}

/// A parsed capture: the link type and an iterator over records.
#[derive(Debug)]
pub struct Capture<'a> {
    link_type: u32,
    big_endian: bool,
    rest: &'a [u8],
    index: usize,
    failed: bool,
}

/// One captured packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    /// Timestamp seconds.
    pub ts_sec: u32,
    /// Timestamp fraction (µs or ns, as the file says).
    pub ts_frac: u32,
    /// The original length on the wire.
    pub orig_len: u32,
    /// The captured bytes (may be shorter than `orig_len` with a snap length).
    pub data: &'a [u8],
}

impl<'a> Capture<'a> {
    /// Parses the global header of `file`.
    ///
    /// # Errors
    /// [`PcapError`] if the header is short, pcapng, or has an unknown magic.
    pub fn parse(file: &'a [u8]) -> Result<Self, PcapError> {
        let header = file
            .get(..GLOBAL_HEADER_LEN)
            .ok_or(PcapError::TruncatedHeader)?;
        let magic = [header[0], header[1], header[2], header[3]];
        let big_endian = match magic {
            [0xd4, 0xc3, 0xb2, 0xa1] | [0x4d, 0x3c, 0xb2, 0xa1] => false,
            [0xa1, 0xb2, 0xc3, 0xd4] | [0xa1, 0xb2, 0x3c, 0x4d] => true,
            [0x0a, 0x0d, 0x0d, 0x0a] => return Err(PcapError::Pcapng),
            _ => return Err(PcapError::BadMagic),
        };
        let link_type = read_u32(&header[20..24], big_endian);
        Ok(Self {
            link_type,
            big_endian,
            rest: &file[GLOBAL_HEADER_LEN..],
            index: 0,
            failed: false,
        })
    }

    /// The link type from the global header (1 = Ethernet).
    pub fn link_type(&self) -> u32 {
        self.link_type
    }
}

impl<'a> Iterator for Capture<'a> {
    type Item = Result<Record<'a>, PcapError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.rest.is_empty() {
            return None;
        }
        let n = self.index;
        self.index += 1;
        let Some(header) = self.rest.get(..RECORD_HEADER_LEN) else {
            self.failed = true;
            return Some(Err(PcapError::TruncatedRecord(n)));
        };
        let field = |i: usize| read_u32(&header[i..i + 4], self.big_endian);
        let (ts_sec, ts_frac, incl_len, orig_len) = (field(0), field(4), field(8), field(12));
        if incl_len > MAX_RECORD {
            self.failed = true;
            return Some(Err(PcapError::BadRecordLength(n)));
        }
        let end = RECORD_HEADER_LEN + incl_len as usize;
        let Some(data) = self.rest.get(RECORD_HEADER_LEN..end) else {
            self.failed = true;
            return Some(Err(PcapError::TruncatedRecord(n)));
        };
        self.rest = &self.rest[end..];
        Some(Ok(Record {
            ts_sec,
            ts_frac,
            orig_len,
            data,
        }))
    }
}

fn read_u32(b: &[u8], big_endian: bool) -> u32 {
    let a = [b[0], b[1], b[2], b[3]];
    if big_endian {
        u32::from_be_bytes(a)
    } else {
        u32::from_le_bytes(a)
    }
}

/// Writes a classic little-endian, microsecond pcap file of Ethernet frames (for tests and tools).
pub fn write(frames: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&4u16.to_le_bytes());
    out.extend_from_slice(&[0; 8]);
    out.extend_from_slice(&65535u32.to_le_bytes());
    out.extend_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
    for (i, f) in frames.iter().enumerate() {
        let len = u32::try_from(f.len()).unwrap_or(u32::MAX);
        out.extend_from_slice(&u32::try_from(i).unwrap_or(0).to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(f);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let file = write(&[b"abc", b"", b"0123456789"]);
        let cap = Capture::parse(&file).unwrap();
        assert_eq!(cap.link_type(), LINKTYPE_ETHERNET);
        let recs: Vec<_> = cap.map(Result::unwrap).collect();
        assert_eq!(recs.len(), 3);
        assert_eq!(recs[2].data, b"0123456789");
        assert_eq!(recs[1].ts_sec, 1);
    }

    #[test]
    fn big_endian_nanosecond() {
        let mut file = write(&[b"xy"]);
        // Re-encode as big-endian nanosecond pcap.
        file[..4].copy_from_slice(&[0xa1, 0xb2, 0x3c, 0x4d]);
        file[20..24].copy_from_slice(&1u32.to_be_bytes());
        file[24 + 8..24 + 12].copy_from_slice(&2u32.to_be_bytes());
        file[24..28].copy_from_slice(&0u32.to_be_bytes());
        let recs: Vec<_> = Capture::parse(&file).unwrap().collect();
        assert_eq!(recs[0].unwrap().data, b"xy");
    }

    #[test]
    fn rejects_bad_files() {
        assert_eq!(
            Capture::parse(b"short").unwrap_err(),
            PcapError::TruncatedHeader
        );
        assert_eq!(Capture::parse(&[0; 24]).unwrap_err(), PcapError::BadMagic);
        let mut ng = [0u8; 24];
        ng[..4].copy_from_slice(&[0x0a, 0x0d, 0x0d, 0x0a]);
        assert_eq!(Capture::parse(&ng).unwrap_err(), PcapError::Pcapng);
        let file = write(&[b"abcdef"]);
        for cut in 25..file.len() {
            let mut cap = Capture::parse(&file[..cut]).unwrap();
            assert_eq!(cap.next(), Some(Err(PcapError::TruncatedRecord(0))));
            assert_eq!(cap.next(), None);
        }
        let mut huge = write(&[b"a"]);
        huge[24 + 8..24 + 12].copy_from_slice(&u32::MAX.to_le_bytes());
        let mut cap = Capture::parse(&huge).unwrap();
        assert_eq!(cap.next(), Some(Err(PcapError::BadRecordLength(0))));
    }
}
