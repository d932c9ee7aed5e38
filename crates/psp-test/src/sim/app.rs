//! The protected hosts' traffic: IPv4 frames whose payload carries a tag (who made the frame,
//! a counter), so the invariants can tell every delivery's true origin and spot one delivered
//! twice.

use core::net::Ipv4Addr;

use psp_core::host::Mac;

/// Who made an inner frame: an honest host (its index), or the attacker.
pub(crate) const ATTACKER: u8 = 0xee;

const MAGIC: &[u8; 4] = b"SIMT";
const IP_HEADER: usize = 20;
/// Where the tag starts in an inner frame.
const TAG_AT: usize = 14 + IP_HEADER;

/// A frame's tag: its maker and a counter unique to that maker.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Tag {
    pub(crate) origin: u8,
    pub(crate) counter: u64,
}

/// The broadcast MAC.
pub(crate) const BROADCAST: Mac = [0xff; 6];

/// An IPv4 frame from `src` to `dst` (MACs and addresses) carrying `tag`, padded to `len`
/// bytes (at least the header and tag).
pub(crate) fn frame(
    (dst, dst_ip): (Mac, Ipv4Addr),
    (src, src_ip): (Mac, Ipv4Addr),
    tag: Tag,
    len: usize,
) -> Vec<u8> {
    let len = len.max(TAG_AT + 13);
    let mut f = Vec::with_capacity(len);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&[0x08, 0x00]);
    let total = (len - 14) as u16;
    f.extend_from_slice(&[0x45, 0]);
    f.extend_from_slice(&total.to_be_bytes());
    f.extend_from_slice(&[0, 0, 0, 0, 64, 17, 0, 0]);
    f.extend_from_slice(&src_ip.octets());
    f.extend_from_slice(&dst_ip.octets());
    f.extend_from_slice(MAGIC);
    f.push(tag.origin);
    f.extend_from_slice(&tag.counter.to_be_bytes());
    f.resize(len, 0x5a);
    f
}

/// The tag of an inner frame, if it has one.
pub(crate) fn tag_of(inner: &[u8]) -> Option<Tag> {
    let t = inner.get(TAG_AT..TAG_AT + 13)?;
    if &t[..4] != MAGIC {
        return None;
    }
    Some(Tag {
        origin: t[4],
        counter: u64::from_be_bytes(t[5..13].try_into().ok()?),
    })
}

/// Whether an inner frame is to a group MAC.
pub(crate) fn is_broadcast(inner: &[u8]) -> bool {
    inner.first().is_some_and(|b| b & 1 == 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_round_trip() {
        let t = Tag {
            origin: 2,
            counter: 77,
        };
        let f = frame(
            (BROADCAST, Ipv4Addr::BROADCAST),
            ([2, 0, 0, 0, 0, 1], Ipv4Addr::new(10, 0, 0, 1)),
            t,
            200,
        );
        assert_eq!(f.len(), 200);
        assert_eq!(tag_of(&f), Some(t));
        assert!(is_broadcast(&f));
        assert_eq!(tag_of(&f[..40]), None);
    }
}
