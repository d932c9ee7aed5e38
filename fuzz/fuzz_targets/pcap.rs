//! The pcap reader never panics and never yields data past the file.
#![no_main]

use libfuzzer_sys::fuzz_target;
use psp_gateway::cli::pcap::Capture;

fuzz_target!(|input: &[u8]| {
    if let Ok(cap) = Capture::parse(input) {
        let mut total = 0usize;
        for rec in cap {
            match rec {
                Ok(r) => total += r.data.len(),
                Err(_) => break,
            }
        }
        assert!(total <= input.len());
    }
});
