//! Whole gateways in one process, without root: the daemon's driver and psp-core's host on
//! in-memory TAPs and segments, under tokio's paused (virtual) clock. These are the gateway's
//! main tests; the namespace tests (`root_*`) keep what only the kernel shows.

mod harness;

mod attacks;
mod drops;
mod normalized;
mod reload;
mod sessions;
mod static_keys;
mod status;
