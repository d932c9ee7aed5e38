//! psp-multipath's parsers never panic on any bytes: the segment view and `Repr::parse` (a
//! parsed header emits back to the same bytes; data, fin and ack kinds; a fin or an ack carries
//! nothing or exactly one tag), the hello (same), the handshake framing, and the capture walker
//! and ciphertext-only analysis an eavesdropper uses (a guess per stream byte, never more).
#![no_main]

use libfuzzer_sys::fuzz_target;
use psp_multipath::attack::{analyze_path, segments_in_capture};
use psp_multipath::wire::{
    CONTROL_TAG_LEN, HEADER_LEN, HandshakeFrame, Hello, Kind, Repr, Segment, segment_len,
};

fuzz_target!(|input: &[u8]| {
    if let Ok(seg) = Segment::new_checked(input) {
        let _ = (
            seg.path_seq(),
            seg.offset(),
            seg.seg(),
            seg.payload(),
            seg.total_len(),
        );
        if let Ok(repr) = Repr::parse(&seg) {
            let mut out = [0u8; HEADER_LEN];
            repr.emit(&mut out);
            assert_eq!(&out[..], &input[..HEADER_LEN]);
            if repr.kind != Kind::Data {
                let len = usize::from(repr.len);
                assert!(len == 0 || len == CONTROL_TAG_LEN, "control payload {len}");
            }
        }
    }
    if let Ok(Some(len)) = segment_len(input) {
        assert!(len <= input.len());
    }
    if let Ok(h) = Hello::parse(input) {
        assert_eq!(&h.emit()[..], &input[..psp_multipath::wire::HELLO_LEN]);
    }
    if let Ok(Some((range, end))) = HandshakeFrame::parse(input) {
        assert!(range.end == end && end <= input.len());
    }
    let segs = segments_in_capture(input);
    let a = analyze_path(input);
    let payload: usize = segs.iter().map(|(_, p)| p.len()).sum();
    assert!(a.bytes() <= payload as u64);
});
