//! The PSP frame view and `Repr::parse` never panic on any bytes, for every ICV length, and a
//! parsed header emits back to the same clear bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use psp_core::wire::{Frame, Repr, Section};

fuzz_target!(|input: &[u8]| {
    let Some((&sel, bytes)) = input.split_first() else {
        return;
    };
    let icv_len = [0usize, 16, 20, 32, 64][usize::from(sel % 5)];
    let Ok(frame) = Frame::new_checked(bytes, icv_len) else {
        return;
    };
    // Every accessor is safe after new_checked.
    let _ = (
        frame.dst_addr(),
        frame.src_addr(),
        frame.seq_number(),
        frame.timestamp(),
    );
    let _ = (
        frame.security_number(),
        frame.icv(),
        frame.signature(),
        frame.signed_part(),
    );
    let section = frame.section();
    if let Ok(s) = Section::new_checked(section) {
        let _ = (s.protocol(), s.data(), s.padding(), s.pad_len());
    }
    if let Ok(repr) = Repr::parse(&frame) {
        let clear_len = repr.buffer_len();
        assert_eq!(clear_len, frame.header_len());
        let mut out = vec![0u8; clear_len];
        let mut view = Frame::new_unchecked(&mut out[..], icv_len);
        repr.emit(&mut view);
        assert_eq!(&out[..], &bytes[..clear_len]);
    }
});
