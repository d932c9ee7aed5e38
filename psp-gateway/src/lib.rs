//! # psp-gateway
//!
//! The psp gateway: the tokio daemon wiring a TAP interface and a raw-Ethernet or UDP uplink to
//! `psp-core` (`run`, `status`), and the command-line tools (`keygen`, `scramble`, `inspect`).
//! This crate does I/O; all protocol logic lives in `psp-core`.
//!
//! The library exists for the binary and for the tests: its public items are what
//! `src/main.rs`, the integration tests (`tests/`) and the fuzz targets use; the rest is
//! `pub(crate)`, so the dead-code lints see it.

pub(crate) mod checks;
pub(crate) mod civil;
pub mod cli;
pub mod config;
pub(crate) mod daemon;
pub(crate) mod driver;
pub mod io;
pub(crate) mod kernels;
pub(crate) mod metrics;
pub(crate) mod offload;
pub(crate) mod state;
pub(crate) mod status;
#[doc(hidden)]
#[cfg(feature = "testing")]
pub mod testing;
pub(crate) mod tofu;

/// Entry points for the fuzz targets into parsers that are otherwise private (not an API).
#[doc(hidden)]
pub mod fuzzing {
    /// The session driver's known-peers (trust on first use) file parser: pins and bad lines.
    pub fn known_peers(text: &str) -> (usize, Vec<usize>) {
        let (pins, bad) = crate::tofu::parse(text);
        (pins.len(), bad)
    }

    /// The address a session is started for, from the first frame waiting for it.
    pub fn peer_addr_from_frame(frame: &[u8]) -> Option<core::net::IpAddr> {
        psp_core::host::addr_from_frame(frame)
    }

    /// The TAP offloads on hostile input: `input` is a virtio-net header, one flag byte
    /// (bit 0: the frames are trusted) and a frame read from the TAP. The frame is planned and
    /// cut (TSO or USO) or checksummed as the TAP reader does, then it and its segments go
    /// through the coalescer (TCP and UDP) as a received batch would, and every group is
    /// emitted. Panics if a segment or an emitted header breaks its bounds.
    pub fn tap_offload(input: &[u8]) {
        crate::offload::fuzz_one(input);
    }
}
