//! The TAP offloads (TSO and USO cuts, checksum completion, TCP and UDP coalescing) never
//! panic and keep every segment and emitted header in bounds on hostile frames from the TAP
//! or the tunnel.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    psp_gateway::fuzzing::tap_offload(input);
});
