//! # psp-test
//!
//! Test harness for psp-core's sans-I/O parts (not published): a virtual clock, a seeded RNG, a
//! simulated link (rate limit with a drop-tail queue, propagation delay, random loss, jitter)
//! and [`Pair`], two normalization [`Endpoint`](psp_core::normalize::Endpoint)s joined by two
//! links and fed by inner traffic sources.
//!
//! Everything is deterministic: the same seeds give the same run, bit for bit, on any machine
//! (integer arithmetic throughout; time is a [`psp_core::time::Instant`] advanced by the
//! harness, never read from a clock). It does no I/O and uses `std` freely.
//!
//! ```
//! use psp_core::normalize::NormConfig;
//! use psp_core::time::{Duration, Instant};
//! use psp_test::{LinkConfig, Pair, Silent};
//!
//! let link = LinkConfig::new(10_000_000, Duration::from_millis(10));
//! let mut pair = Pair::new(NormConfig::default(), NormConfig::default(), link, link, 1);
//! pair.set_sources(Box::new(Silent), Box::new(Silent));
//! pair.run_until(Instant::from_secs(1));
//! assert!(pair.a.ep.stats().frames_sent > 500);
//! ```

pub mod link;
pub mod pair;
pub mod rng;
pub mod sim;
pub mod traffic;

pub use link::{Link, LinkConfig, LinkStats};
pub use pair::{Pair, Sample, Side, TxRecord};
pub use rng::Rng;
pub use traffic::{Bursts, InnerSource, OnOff, Periodic, Silent};
