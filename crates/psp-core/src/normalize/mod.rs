//! Traffic normalization with covert-channel-free congestion control (seed 003, Byrenheid,
//! Rossberg, Schaefer, Dorn).
//!
//! Between two gateways every outer frame has the same size and frames leave at a paced rate
//! whether or not there is inner traffic (dummies fill the gaps). The rate changes only in
//! response to the public network (loss and RTT of the outer frames), never to the protected
//! traffic. Layer: between the TAP side (inner Ethernet frames) and the PSP sealer (outer frames
//! of sub-protocol [`crate::wire::Protocol::Normalized`]).
//!
//! | module | role |
//! |---|---|
//! | [`aqm`] | the inner transmit queue's drop policy: CoDel (RFC 8289) or drop-tail |
//! | [`controller`] | the receiver-side [`RateController`] (Algorithm 1) and the sender rule |
//! | [`feedback`] | the normalized payload header: sequence number and the four feedback values |
//! | [`pacer`] | the next departure instant for a rate and a fixed frame size |
//! | [`packing`] | inner frames into fixed-size outer payloads and back (faithful and packed) |
//! | [`endpoint`] | the sans-I/O [`Endpoint`] tying them together (`handle_*` / `poll_*`) |
//!
//! This module does no I/O, reads no clock (every call takes `now`), uses no RNG and does not
//! allocate: state is fixed-size and byte storage is a caller-owned buffer (see
//! [`NormConfig::storage_len`]). It does not encrypt: the gateway seals each payload from
//! [`Endpoint::poll_transmit`] as a PSP frame and passes each opened payload to
//! [`Endpoint::handle_payload`]. docs/NORMALIZATION.md explains the algorithm, every
//! interpretation of the paper and the wire format.

use core::fmt;

use crate::time::Duration;

pub mod aqm;
pub mod controller;
pub mod endpoint;
pub mod feedback;
pub mod pacer;
pub mod packing;

pub use aqm::{Aqm, CodelParams};
pub use controller::{
    ControllerConfig, Decision, Loss, Packet, RateController, Variant, Weight, sender_rate,
};
pub use endpoint::{Endpoint, NormEvent, NormTransmit, Stats};
pub use feedback::HEADER_LEN;
pub use pacer::Pacer;
pub use packing::Packing;

/// A sending rate with a resolution of 1 kbit/s (the unit on the wire).
///
/// Rates count the bytes of whole outer frames as configured by [`NormConfig::wire_len`].
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Rate(u32);

impl Rate {
    /// No rate.
    pub const ZERO: Self = Self(0);
    /// The largest representable rate (about 4.3 Tbit/s).
    pub const MAX: Self = Self(u32::MAX);

    /// `kbps` kilobits (1000 bits) per second.
    pub const fn from_kbps(kbps: u32) -> Self {
        Self(kbps)
    }

    /// `bps` bits per second, rounded down to whole kbit/s (saturating).
    pub const fn from_bps(bps: u64) -> Self {
        let k = bps / 1000;
        if k > u32::MAX as u64 {
            Self::MAX
        } else {
            Self(k as u32)
        }
    }

    /// The rate in kbit/s.
    pub const fn kbps(self) -> u32 {
        self.0
    }

    /// The rate in bit/s.
    pub const fn bps(self) -> u64 {
        self.0 as u64 * 1000
    }

    /// `self + other`, saturating.
    #[must_use]
    pub const fn saturating_add(self, other: Self) -> Self {
        Self(self.0.saturating_add(other.0))
    }

    /// `self - other`, saturating at zero.
    #[must_use]
    pub const fn saturating_sub(self, other: Self) -> Self {
        Self(self.0.saturating_sub(other.0))
    }

    /// `self * num / den` rounded down (saturating; `den == 0` gives `self`).
    #[must_use]
    pub const fn scale(self, num: u64, den: u64) -> Self {
        if den == 0 {
            return self;
        }
        let v = self.0 as u128 * num as u128 / den as u128;
        if v > u32::MAX as u128 {
            Self::MAX
        } else {
            Self(v as u32)
        }
    }

    /// How many frames of `frame_bits` bits this rate sends in `d` (rounded down).
    pub const fn frames_in(self, d: Duration, frame_bits: u64) -> u64 {
        if frame_bits == 0 {
            return 0;
        }
        // kbit/s * µs = mbit (millibits): divide by 1000 for bits.
        let bits = self.0 as u128 * d.total_micros() as u128 / 1000;
        let frames = bits / frame_bits as u128;
        if frames > u64::MAX as u128 {
            u64::MAX
        } else {
            frames as u64
        }
    }

    /// The time one frame of `frame_bits` bits takes at this rate, in nanoseconds (saturating;
    /// `u64::MAX` for a zero rate).
    pub const fn frame_time_ns(self, frame_bits: u64) -> u64 {
        if self.0 == 0 {
            return u64::MAX;
        }
        // bits / (kbit/s) = ms; * 1e6 for ns.
        let ns = frame_bits as u128 * 1_000_000 / self.0 as u128;
        if ns > u64::MAX as u128 {
            u64::MAX
        } else {
            ns as u64
        }
    }
}

impl fmt::Debug for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} kbit/s", self.0)
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} kbit/s", self.0)
    }
}

/// Which rate rule the sender follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Algorithm {
    /// No congestion control: always send at `S_goal` (static normalization; the paper's
    /// "disabled" baseline). Feedback is still sent so a peer may run its controller.
    Fixed,
    /// Algorithm 1 exactly as printed (with the two documented corrections).
    #[default]
    Faithful,
    /// Algorithm 1 with the improvements of [`Variant::Improved`].
    Improved,
}

/// Configuration of an [`Endpoint`] (one direction pair with one peer).
///
/// Defaults are the paper's testbed values (§V-B): S_min = S_step = 204 kbit/s, O_min = 40 ms,
/// w = 1/8, S_goal = 8.16 Mbit/s, 1460-byte outer packets (`wire_len`; the 1400-byte
/// `frame_len` is a placeholder: the gateway derives it from its uplink MTU and overheads).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct NormConfig {
    /// Bytes of every payload [`Endpoint::poll_transmit`] emits (normalized header + data).
    pub frame_len: usize,
    /// Bytes one outer frame occupies on the wire (payload plus PSP, UDP, IP, Ethernet overhead,
    /// as the gateway counts it); rates and the pacer count these. 0 means `frame_len`.
    pub wire_len: usize,
    /// How inner frames are packed into outer payloads.
    pub packing: Packing,
    /// Fixed rate, Algorithm 1 faithful, or improved.
    pub algorithm: Algorithm,
    /// The administrative sending rate S_goal (the sender never exceeds it).
    pub s_goal: Rate,
    /// The lowest rate the controller suggests (S_min).
    pub s_min: Rate,
    /// The additive increase per round (S_step).
    pub s_step: Rate,
    /// S_init: the rate suggested to the peer before the first round, and assumed from the peer
    /// before its first feedback. `None` means `s_goal`.
    pub s_init: Option<Rate>,
    /// The minimum observation interval O_min.
    pub o_min: Duration,
    /// The weight w of the old O in the EWMA (line 7).
    pub w: Weight,
    /// Extra frames the pacer may send back to back after a late wake-up (see [`Pacer`]).
    pub max_catch_up: u32,
    /// Bytes of the inner transmit queue, a hard memory bound: drop-tail beyond it whatever
    /// the [`Aqm`] (each frame costs [`packing::TX_RECORD_OVERHEAD`] extra bytes).
    pub tx_queue_bytes: usize,
    /// The inner transmit queue's drop policy below the byte cap: CoDel (default) or the
    /// paper's drop-tail only.
    pub aqm: Aqm,
    /// Bytes of the delivery queue drained by [`Endpoint::poll_event`].
    pub rx_queue_bytes: usize,
    /// The largest inner frame accepted (at most [`packing::MAX_INNER_LEN`]).
    pub max_inner_len: usize,
    /// Concurrent fragmented inner frames being reassembled (1..=[`packing::MAX_SLOTS`]).
    pub reassembly_slots: usize,
    /// A partial inner frame is dropped once the highest received outer sequence number is this
    /// far past its newest fragment (the reordering tolerated by reassembly).
    pub reorder_window: u64,
    /// How long before its slot the caller asks for each outer frame ([`Endpoint::poll_transmit`]
    /// at the slot, called this much earlier): a fixed wait in the caller's pipeline that the
    /// [`Aqm`] does not count as queueing (0: frames are asked for at their slot).
    pub aqm_lead: Duration,
}

impl Default for NormConfig {
    fn default() -> Self {
        Self {
            frame_len: 1460 - 60,
            wire_len: 1460,
            packing: Packing::Packed,
            algorithm: Algorithm::Faithful,
            s_goal: Rate::from_kbps(8160),
            s_min: Rate::from_kbps(204),
            s_step: Rate::from_kbps(204),
            s_init: None,
            o_min: Duration::from_millis(40),
            w: Weight::new(1, 8),
            max_catch_up: 4,
            tx_queue_bytes: 64 * 1024,
            aqm: Aqm::default(),
            rx_queue_bytes: 32 * 1024,
            max_inner_len: 1518,
            reassembly_slots: 4,
            reorder_window: 256,
            aqm_lead: Duration::ZERO,
        }
    }
}

impl NormConfig {
    /// The bytes of caller storage an [`Endpoint`] with this configuration needs.
    pub const fn storage_len(&self) -> usize {
        self.tx_queue_bytes + self.rx_queue_bytes + self.reassembly_slots * self.max_inner_len
    }

    /// `wire_len`, or `frame_len` if it is 0.
    pub const fn effective_wire_len(&self) -> usize {
        if self.wire_len == 0 {
            self.frame_len
        } else {
            self.wire_len
        }
    }

    /// The bytes of inner data one outer payload can carry.
    pub const fn data_len(&self) -> usize {
        self.frame_len.saturating_sub(HEADER_LEN)
    }

    /// The largest inner frame that can be sent: in [`Packing::Single`] what fits in one payload,
    /// in [`Packing::Packed`] `max_inner_len`.
    pub const fn max_sendable_inner_len(&self) -> usize {
        match self.packing {
            Packing::Single => {
                let fit = self.data_len().saturating_sub(packing::WHOLE_HEADER_LEN);
                if fit < self.max_inner_len {
                    fit
                } else {
                    self.max_inner_len
                }
            }
            Packing::Packed => self.max_inner_len,
        }
    }

    /// The controller part of this configuration.
    pub fn controller(&self) -> ControllerConfig {
        ControllerConfig {
            variant: match self.algorithm {
                Algorithm::Improved => Variant::Improved,
                Algorithm::Fixed | Algorithm::Faithful => Variant::Faithful,
            },
            s_min: self.s_min,
            s_step: self.s_step,
            s_init: self.initial_rate(),
            o_min: self.o_min,
            w: self.w,
            frame_bits: self.effective_wire_len() as u64 * 8,
            ..ControllerConfig::default()
        }
    }

    /// S_init, resolved.
    pub const fn initial_rate(&self) -> Rate {
        match self.s_init {
            Some(r) => r,
            None => self.s_goal,
        }
    }

    /// Checks that the values are usable together.
    ///
    /// # Errors
    /// The first problem found, as a [`NormConfigError`].
    pub fn validate(&self) -> Result<(), NormConfigError> {
        let min_frame = HEADER_LEN + packing::FRAGMENT_HEADER_LEN + packing::MIN_FRAGMENT_LEN;
        if self.frame_len < min_frame || self.frame_len > usize::from(u16::MAX) {
            return Err(NormConfigError::FrameLen);
        }
        if self.wire_len != 0 && self.wire_len < self.frame_len {
            return Err(NormConfigError::WireLen);
        }
        if self.s_min == Rate::ZERO || self.s_goal < self.s_min {
            return Err(NormConfigError::Rates);
        }
        if self.initial_rate() < self.s_min {
            return Err(NormConfigError::Rates);
        }
        if self.w.den == 0 || self.w.num > self.w.den {
            return Err(NormConfigError::Weight);
        }
        if self.max_inner_len == 0 || self.max_inner_len > packing::MAX_INNER_LEN {
            return Err(NormConfigError::MaxInnerLen);
        }
        if self.reassembly_slots == 0 || self.reassembly_slots > packing::MAX_SLOTS {
            return Err(NormConfigError::ReassemblySlots);
        }
        if self.tx_queue_bytes < self.max_inner_len + packing::TX_RECORD_OVERHEAD {
            return Err(NormConfigError::QueueLen);
        }
        if let Aqm::Codel(p) = self.aqm
            && !p.is_valid()
        {
            return Err(NormConfigError::Aqm);
        }
        // One payload can complete a fragmented frame and carry whole frames besides.
        if self.rx_queue_bytes < 2 * (self.max_inner_len + self.frame_len) {
            return Err(NormConfigError::QueueLen);
        }
        if self.reorder_window == 0 {
            return Err(NormConfigError::ReorderWindow);
        }
        Ok(())
    }
}

/// Why a [`NormConfig`] was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum NormConfigError {
    /// `frame_len` is too short for the header and one fragment, or above 65535.
    FrameLen,
    /// `wire_len` is nonzero and shorter than `frame_len`.
    WireLen,
    /// `s_min` is zero, or `s_goal` or `s_init` is below `s_min`.
    Rates,
    /// `w` is not a fraction in 0..=1.
    Weight,
    /// `max_inner_len` is zero or above [`packing::MAX_INNER_LEN`].
    MaxInnerLen,
    /// `reassembly_slots` is zero or above [`packing::MAX_SLOTS`].
    ReassemblySlots,
    /// A queue cannot hold the largest inner frame (rx: two frames and two payloads).
    QueueLen,
    /// `reorder_window` is zero.
    ReorderWindow,
    /// CoDel's parameters do not satisfy `0 < target <= interval`.
    Aqm,
    /// The storage buffer is shorter than [`NormConfig::storage_len`].
    Storage,
}

impl fmt::Display for NormConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::FrameLen => "normalized frame length out of range",
            Self::WireLen => "wire length shorter than the frame length",
            Self::Rates => "rates must satisfy 0 < s_min <= s_init, s_goal",
            Self::Weight => "RTT weight must be a fraction between 0 and 1",
            Self::MaxInnerLen => "largest inner frame length out of range",
            Self::ReassemblySlots => "reassembly slot count out of range",
            Self::QueueLen => "queue too small for the largest inner frame",
            Self::ReorderWindow => "reorder window must be positive",
            Self::Aqm => "CoDel parameters must satisfy 0 < target <= interval",
            Self::Storage => "storage buffer shorter than NormConfig::storage_len()",
        })
    }
}

impl core::error::Error for NormConfigError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_units() {
        let r = Rate::from_bps(8_160_999);
        assert_eq!(r.kbps(), 8160);
        assert_eq!(r.bps(), 8_160_000);
        // 1460-byte frames at 8.16 Mbit/s: 1.431372 ms each.
        assert_eq!(r.frame_time_ns(1460 * 8), 1_431_372);
        // 40 ms at 8.16 Mbit/s is 27.9 frames of 1460 bytes.
        assert_eq!(r.frames_in(Duration::from_millis(40), 1460 * 8), 27);
        assert_eq!(Rate::ZERO.frame_time_ns(8), u64::MAX);
        assert_eq!(Rate::from_bps(u64::MAX), Rate::MAX);
        assert_eq!(r.scale(1, 2).kbps(), 4080);
        assert_eq!(r.scale(1, 0), r);
    }

    #[test]
    fn default_config_is_valid() {
        let c = NormConfig::default();
        assert_eq!(c.validate(), Ok(()));
        assert_eq!(c.initial_rate(), c.s_goal);
        assert!(c.storage_len() > c.tx_queue_bytes);
    }

    #[test]
    fn config_errors() {
        let mut c = NormConfig {
            frame_len: 10,
            ..NormConfig::default()
        };
        assert_eq!(c.validate(), Err(NormConfigError::FrameLen));
        c = NormConfig::default();
        c.s_min = Rate::ZERO;
        assert_eq!(c.validate(), Err(NormConfigError::Rates));
        c = NormConfig::default();
        c.w = Weight::new(2, 1);
        assert_eq!(c.validate(), Err(NormConfigError::Weight));
        c = NormConfig::default();
        c.reassembly_slots = 0;
        assert_eq!(c.validate(), Err(NormConfigError::ReassemblySlots));
        c = NormConfig::default();
        c.tx_queue_bytes = 10;
        assert_eq!(c.validate(), Err(NormConfigError::QueueLen));
        c = NormConfig::default();
        c.tx_queue_bytes = c.max_inner_len + packing::TX_RECORD_OVERHEAD - 1;
        assert_eq!(c.validate(), Err(NormConfigError::QueueLen));
        c.tx_queue_bytes += 1;
        assert_eq!(c.validate(), Ok(()));
        c.aqm = Aqm::Codel(CodelParams {
            target: Duration::from_millis(200),
            interval: Duration::from_millis(100),
            ..CodelParams::default()
        });
        assert_eq!(c.validate(), Err(NormConfigError::Aqm));
        c.aqm = Aqm::DropTail;
        assert_eq!(c.validate(), Ok(()));
    }
}
