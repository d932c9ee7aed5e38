//! The receiver-side rate controller (seed 003, §IV-C, Algorithm 1) and the sender rule.
//!
//! Node B runs one [`RateController`] per incoming direction A→B. For every outer frame from A
//! (dummies included) it calls [`RateController::on_packet`] with the frame's sequence number,
//! the round number A echoes (`R_rcnt`) and the rate A reports (`S_current`). B sends
//! [`RateController::suggested`] and [`RateController::round`] back to A in every frame; A sets
//! its rate with [`sender_rate`].
//!
//! The controller sees only sequence numbers, echoed rounds, reported rates and arrival times of
//! outer frames: public network behaviour, never the protected traffic (§V-A).
//!
//! [`Variant::Faithful`] is Algorithm 1 line by line, with the two corrections listed in
//! `../shared/seeds/README.md` and the unit fix of line 8 (see docs/NORMALIZATION.md for every
//! interpretation). [`Variant::Improved`] adds three named changes, each documented on
//! [`ControllerConfig`].

use core::fmt;

use super::Rate;
use crate::time::{Duration, Instant};

/// The sender rule (§IV-C, corrected): `S_current = min(S_goal, S_suggested)`.
///
/// The paper prints `max`; with `max` a sender would never go below its administrative rate
/// (no congestion control at all) and would exceed S_goal whenever the peer suggested more. Its
/// own leakage argument (§V-A: "A will either set its sending rate to S_suggested or to
/// S_goal", and "whenever B decreases S_suggested, A simply accepts") needs `min`.
pub fn sender_rate(goal: Rate, suggested: Rate) -> Rate {
    core::cmp::min(goal, suggested)
}

/// A fraction `num / den` (the EWMA weight w).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Weight {
    /// Numerator.
    pub num: u32,
    /// Denominator (nonzero).
    pub den: u32,
}

impl Weight {
    /// The fraction `num / den`.
    pub const fn new(num: u32, den: u32) -> Self {
        Self { num, den }
    }
}

/// A loss ratio in parts per million.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Loss(pub u32);

impl Loss {
    /// The loss `lost / expected`, rounded to the nearest ppm (0 when `expected` is 0).
    pub const fn from_counts(lost: u64, expected: u64) -> Self {
        if expected == 0 {
            return Self(0);
        }
        let ppm = (lost as u128 * 1_000_000 + expected as u128 / 2) / expected as u128;
        if ppm > 1_000_000 {
            Self(1_000_000)
        } else {
            Self(ppm as u32)
        }
    }

    /// Parts per million.
    pub const fn ppm(self) -> u32 {
        self.0
    }
}

impl fmt::Display for Loss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:04}%", self.0 / 10_000, self.0 % 10_000)
    }
}

/// Which controller runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Variant {
    /// Algorithm 1 as printed (with the documented corrections).
    #[default]
    Faithful,
    /// Algorithm 1 plus: counting only frames inside the observation interval, a minimum
    /// observation length in frames, and a one-way queueing-delay check before every increase.
    Improved,
}

/// Parameters of a [`RateController`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ControllerConfig {
    /// Faithful or improved.
    pub variant: Variant,
    /// S_min: the lowest suggestion (line 20).
    pub s_min: Rate,
    /// S_step: the additive increase (line 14).
    pub s_step: Rate,
    /// S_init: the first suggestion and the rate assumed for the first threshold.
    pub s_init: Rate,
    /// O_min: the shortest observation interval (line 7).
    pub o_min: Duration,
    /// w: the weight of the old O in the EWMA (line 7).
    pub w: Weight,
    /// Bits of one outer frame as the rates count them (converts rate × time into frames).
    pub frame_bits: u64,
    /// Improved only: an observation spans at least this many sequence numbers, so that one
    /// loss among a handful of frames at a low rate does not read as a huge loss ratio.
    pub min_observation: u64,
    /// Improved only: the queueing delay that holds an increase. An observation whose frames
    /// arrived more than this (plus two frame intervals of arrival quantization) later than
    /// their paced sending spread means a queue is building on the A→B path; the controller
    /// then steps down instead of up.
    pub delay_margin: Duration,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        Self {
            variant: Variant::Faithful,
            s_min: Rate::from_kbps(204),
            s_step: Rate::from_kbps(204),
            s_init: Rate::from_kbps(8160),
            o_min: Duration::from_millis(40),
            w: Weight::new(1, 8),
            frame_bits: 1460 * 8,
            min_observation: 16,
            delay_margin: Duration::from_millis(2),
        }
    }
}

/// What a call to [`RateController::on_packet`] decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Decision {
    /// Nothing changed (observing, or waiting for the round echo).
    None,
    /// The peer's round echo arrived: a new observation interval starts (line 3-10).
    NewInterval,
    /// No loss: S_suggested increased (line 13-18).
    Increase,
    /// Loss: S_suggested decreased proportionally (line 19-25).
    Decrease,
    /// Improved only: no loss but a growing queue; S_suggested stepped down.
    DelayDecrease,
}

/// The receiver-side controller for one direction (Algorithm 1's state).
///
/// Call order: [`new`](Self::new) at connection establishment, then
/// [`on_packet`](Self::on_packet) for every authenticated outer frame from the peer, in arrival
/// order; read [`suggested`](Self::suggested) and [`round`](Self::round) whenever a frame to the
/// peer is built.
#[derive(Clone, Debug)]
pub struct RateController {
    cfg: ControllerConfig,
    // Algorithm 1 state, with the paper's names.
    o: Duration,
    s_suggested: Rate,
    sn_thresh: u64,
    sn_start: u64,
    n_start: u64,
    n_recv: u64,
    t_last: Instant,
    r_current: u32,
    updating: bool,
    allow_dec: bool,
    allow_inc: bool,
    // SN_pkt: the highest sequence number received so far (§IV-C, step 2).
    sn_high: u64,
    // Improved: frames received with SN_start < SN, and the arrival time of the interval start.
    n_window: u64,
    t_start: Instant,
    s_window: Rate,
    // Reporting.
    last_loss: Loss,
    last_sample: Duration,
    decisions: u64,
}

impl RateController {
    /// The initial state (Algorithm 1, "State"), `now` being the connection establishment.
    pub fn new(now: Instant, cfg: ControllerConfig) -> Self {
        let mut c = Self {
            cfg,
            o: cfg.o_min,
            s_suggested: cfg.s_init,
            sn_thresh: 0,
            sn_start: 0,
            n_start: 0,
            n_recv: 0,
            t_last: now,
            r_current: 0,
            updating: false,
            allow_dec: true,
            allow_inc: true,
            sn_high: 0,
            n_window: 0,
            t_start: now,
            s_window: cfg.s_init,
            last_loss: Loss(0),
            last_sample: Duration::ZERO,
            decisions: 0,
        };
        // SN_thresh = S_init × O_min / 1000 (packets/s × ms); sequence numbers start at 1.
        c.sn_thresh = c.observation_end(0, cfg.s_init);
        c
    }

    /// The parameters.
    pub fn config(&self) -> &ControllerConfig {
        &self.cfg
    }

    /// S_suggested: the rate to suggest to the peer.
    pub fn suggested(&self) -> Rate {
        self.s_suggested
    }

    /// R_current: the round number to send to the peer.
    pub fn round(&self) -> u32 {
        self.r_current
    }

    /// O: the current observation interval (an RTT estimate, at least O_min).
    pub fn observation(&self) -> Duration {
        self.o
    }

    /// The latest RTT sample (`t_now - t_last` at the round echo), zero before the first.
    pub fn last_rtt_sample(&self) -> Duration {
        self.last_sample
    }

    /// The loss ratio of the latest completed observation.
    pub fn last_loss(&self) -> Loss {
        self.last_loss
    }

    /// Whether the controller waits for the peer to echo the current round (phase 3).
    pub fn is_updating(&self) -> bool {
        self.updating
    }

    /// How many times S_suggested changed.
    pub fn decisions(&self) -> u64 {
        self.decisions
    }

    /// Algorithm 1, `ProcessPacket(SN_pkt, R_rcnt, S_current)`, for one received frame.
    ///
    /// `sn` is the frame's sequence number (the first frame is 1), `r_rcnt` the round it echoes
    /// and `s_current` the sending rate it reports. Reordered frames are fine: `SN_pkt` is the
    /// highest sequence number seen (§IV-C, step 2).
    pub fn on_packet(&mut self, now: Instant, sn: u64, r_rcnt: u32, s_current: Rate) -> Decision {
        let improved = self.cfg.variant == Variant::Improved;
        // Line 1.
        self.n_recv += 1;
        if sn > self.sn_start {
            self.n_window += 1;
        }
        if sn > self.sn_high {
            self.sn_high = sn;
        }
        let sn_pkt = self.sn_high;
        // Line 2: t_now is `now`.
        let mut decision = Decision::None;
        // Lines 3-10: the peer has seen our latest suggestion; start a new observation.
        if self.updating && r_rcnt == self.r_current {
            self.updating = false;
            self.allow_dec = true;
            self.allow_inc = true;
            let sample = now.saturating_since(self.t_last);
            self.last_sample = sample;
            self.o = core::cmp::max(self.cfg.o_min, ewma(self.o, sample, self.cfg.w));
            self.sn_thresh = self.observation_end(sn_pkt, s_current);
            self.n_start = self.n_recv;
            self.sn_start = sn_pkt;
            self.n_window = 0;
            self.t_start = now;
            self.s_window = s_current;
            decision = Decision::NewInterval;
        }
        // Line 11: the observation is complete.
        if sn_pkt >= self.sn_thresh {
            let expected = sn_pkt.saturating_sub(self.sn_start);
            let received = if improved {
                self.n_window
            } else {
                self.n_recv - self.n_start
            };
            if expected == 0 {
                // Unreachable: SN_thresh > SN_start always holds (observation_end).
                return decision;
            }
            // Line 12, corrected: p = 1 - (n_recv - n_start) / (SN_pkt - SN_start), kept as
            // the exact fraction (lost / expected). received > expected (p < 0) happens with
            // reordering across the interval start: neither branch applies, as printed.
            let lost = expected.saturating_sub(received);
            let no_loss = received == expected;
            self.last_loss = Loss::from_counts(lost, expected);
            if no_loss && self.allow_dec {
                // Lines 13-18 (the improved variant checks the queueing delay first).
                if improved && self.queue_building(now, expected) {
                    self.s_suggested = core::cmp::max(
                        self.cfg.s_min,
                        core::cmp::min(
                            s_current.saturating_sub(self.cfg.s_step),
                            self.delivery_rate(now, expected, s_current),
                        ),
                    );
                    decision = Decision::DelayDecrease;
                } else {
                    self.s_suggested = s_current.saturating_add(self.cfg.s_step);
                    decision = Decision::Increase;
                }
                self.allow_dec = false;
                self.start_update(now);
            } else if received < expected && self.allow_inc {
                // Lines 19-25: S_suggested = max(S_min, S_current × (1 - p)).
                self.s_suggested = core::cmp::max(
                    self.cfg.s_min,
                    s_current.scale(received.min(expected), expected),
                );
                self.allow_dec = false;
                self.allow_inc = false;
                self.start_update(now);
                decision = Decision::Decrease;
            }
        }
        decision
    }

    /// Lines 16-18 / 23-25: remember the time, open a new round, wait for its echo.
    fn start_update(&mut self, now: Instant) {
        self.t_last = now;
        self.r_current = self.r_current.wrapping_add(1);
        self.updating = true;
        self.decisions += 1;
    }

    /// Line 8: SN_thresh = SN_pkt + O × S_current, with O × S_current converted to frames
    /// (the printed line omits the `/1000` of the initial state; see docs/NORMALIZATION.md). At
    /// least one frame (the improved variant: `min_observation`) so that p is defined.
    fn observation_end(&self, sn_pkt: u64, s_current: Rate) -> u64 {
        let mut frames = s_current.frames_in(self.o, self.cfg.frame_bits).max(1);
        if self.cfg.variant == Variant::Improved {
            frames = frames.max(self.cfg.min_observation);
        }
        sn_pkt.saturating_add(frames)
    }

    /// Improved: whether the frames of this observation arrived spread over noticeably more time
    /// than the sender took to pace them out (a queue grew on the path A→B). One-way: the reverse
    /// path's queue does not enter.
    fn queue_building(&self, now: Instant, expected: u64) -> bool {
        let recv = now.saturating_since(self.t_start).total_micros();
        let send = self.send_spread_us(expected);
        let slack = self.cfg.delay_margin.total_micros() + 2 * self.send_spread_us(1);
        recv > send.saturating_add(slack)
    }

    /// Improved: the rate at which the path delivered this observation's frames.
    fn delivery_rate(&self, now: Instant, expected: u64, s_current: Rate) -> Rate {
        let recv = now.saturating_since(self.t_start).total_micros();
        let send = self.send_spread_us(expected);
        if recv == 0 {
            return s_current;
        }
        s_current.scale(send, recv)
    }

    /// Microseconds the peer needs to pace out `frames` frames at the observation's rate.
    fn send_spread_us(&self, frames: u64) -> u64 {
        let ns = self.s_window.frame_time_ns(self.cfg.frame_bits);
        (u128::from(ns) * u128::from(frames) / 1000).min(u128::from(u64::MAX)) as u64
    }
}

/// Line 7's average, `O × w + (1 - w) × sample`, in microseconds.
fn ewma(o: Duration, sample: Duration, w: Weight) -> Duration {
    if w.den == 0 {
        return sample;
    }
    let num = u128::from(w.num.min(w.den));
    let den = u128::from(w.den);
    let v = (u128::from(o.total_micros()) * num + u128::from(sample.total_micros()) * (den - num))
        / den;
    Duration::from_micros(v.min(u128::from(u64::MAX)) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FRAME_BITS: u64 = 1000 * 8;

    fn cfg(variant: Variant) -> ControllerConfig {
        ControllerConfig {
            variant,
            s_min: Rate::from_kbps(200),
            s_step: Rate::from_kbps(200),
            s_init: Rate::from_kbps(8000),
            o_min: Duration::from_millis(40),
            w: Weight::new(1, 8),
            frame_bits: FRAME_BITS,
            min_observation: 16,
            delay_margin: Duration::from_millis(2),
        }
    }

    fn ms(m: u64) -> Instant {
        Instant::from_millis(m)
    }

    #[test]
    fn sender_rule_is_min() {
        let goal = Rate::from_kbps(8160);
        assert_eq!(sender_rate(goal, Rate::from_kbps(9000)), goal);
        assert_eq!(
            sender_rate(goal, Rate::from_kbps(1000)),
            Rate::from_kbps(1000)
        );
    }

    #[test]
    fn initial_threshold() {
        // 8000 kbit/s × 40 ms / 8000 bits = 40 frames.
        let c = RateController::new(ms(0), cfg(Variant::Faithful));
        assert_eq!(c.sn_thresh, 40);
        assert_eq!(c.suggested(), Rate::from_kbps(8000));
        assert_eq!(c.round(), 0);
    }

    #[test]
    fn increase_without_loss_then_wait_for_echo() {
        let s = Rate::from_kbps(8000);
        let mut c = RateController::new(ms(0), cfg(Variant::Faithful));
        for sn in 1..40 {
            assert_eq!(c.on_packet(ms(sn), sn, 0, s), Decision::None);
        }
        assert_eq!(c.on_packet(ms(40), 40, 0, s), Decision::Increase);
        assert_eq!(c.suggested(), Rate::from_kbps(8200));
        assert_eq!(c.round(), 1);
        assert!(c.is_updating());
        // No second increase while waiting (allow_dec is false).
        assert_eq!(c.on_packet(ms(41), 41, 0, s), Decision::None);
        // The echo of round 1 arrives 30 ms after the decision: O = max(40, 5 + 26.25).
        assert_eq!(c.on_packet(ms(70), 42, 1, s), Decision::NewInterval);
        assert_eq!(c.observation(), Duration::from_millis(40));
        assert_eq!(c.last_rtt_sample(), Duration::from_millis(30));
        // New threshold: 42 + 40 frames.
        assert_eq!(c.sn_thresh, 82);
        assert!(!c.is_updating());
    }

    #[test]
    fn proportional_decrease_and_floor() {
        let s = Rate::from_kbps(8000);
        let mut c = RateController::new(ms(0), cfg(Variant::Faithful));
        // 40 sequence numbers, 10 lost: p = 0.25.
        for sn in (1..=40).filter(|n| n % 4 != 1) {
            c.on_packet(ms(sn), sn, 0, s);
        }
        assert_eq!(c.suggested(), Rate::from_kbps(6000));
        assert_eq!(c.last_loss(), Loss(250_000));
        assert_eq!(c.round(), 1);
        // Both flags cleared: nothing more until the echo.
        assert_eq!(c.on_packet(ms(50), 60, 0, s), Decision::None);
        assert_eq!(c.suggested(), Rate::from_kbps(6000));
        // Heavy loss floors at S_min.
        let mut c = RateController::new(ms(0), cfg(Variant::Faithful));
        assert_eq!(c.on_packet(ms(1), 1000, 0, s), Decision::Decrease);
        assert_eq!(c.suggested(), Rate::from_kbps(200));
    }

    #[test]
    fn retro_correction_after_increase() {
        let s = Rate::from_kbps(8000);
        let mut c = RateController::new(ms(0), cfg(Variant::Faithful));
        for sn in 1..=40 {
            c.on_packet(ms(sn), sn, 0, s);
        }
        assert_eq!(c.suggested(), Rate::from_kbps(8200));
        // Frames 41-49 lost, 50 arrives before the echo: p over 1..50 = 9/50.
        assert_eq!(c.on_packet(ms(50), 50, 0, s), Decision::Decrease);
        assert_eq!(c.suggested(), Rate::from_kbps(6560));
        assert_eq!(c.round(), 2);
        // Waiting for round 2: an echo of round 1 does not end it.
        assert_eq!(c.on_packet(ms(60), 51, 1, s), Decision::None);
        assert!(c.is_updating());
        assert_eq!(c.on_packet(ms(61), 52, 2, s), Decision::NewInterval);
    }

    #[test]
    fn ewma_uses_w_for_the_old_value() {
        // O × 1/8 + 7/8 × sample, as printed.
        let o = ewma(
            Duration::from_millis(80),
            Duration::from_millis(160),
            Weight::new(1, 8),
        );
        assert_eq!(o, Duration::from_millis(150));
    }

    #[test]
    fn reordering_faithful_vs_improved() {
        // A late frame from before the interval start counts in n_recv (faithful), not in
        // the improved window count.
        for (variant, expect) in [
            (Variant::Faithful, Decision::Increase),
            (Variant::Improved, Decision::Decrease),
        ] {
            let s = Rate::from_kbps(8000);
            let mut c = RateController::new(ms(0), cfg(variant));
            for sn in 1..=40 {
                c.on_packet(ms(sn), sn, 0, s);
            }
            c.on_packet(ms(41), 41, 1, s); // echo: interval starts at 41
            c.on_packet(ms(42), 30, 1, s); // a frame from the previous interval, late
            for sn in 42..=80 {
                if sn != 60 {
                    c.on_packet(ms(sn), sn, 1, s);
                }
            }
            // Faithful: n_recv - n_start = 40 over SN 41..81 = 40, p = 0: the late frame hides
            // the loss of 60. The improved count (SN > SN_start only) sees 39 of 40.
            let d = c.on_packet(ms(81), 81, 1, s);
            assert_eq!(d, expect, "{variant:?}");
        }
    }

    #[test]
    fn improved_minimum_observation() {
        let mut k = cfg(Variant::Improved);
        k.s_init = Rate::from_kbps(200);
        let c = RateController::new(ms(0), k);
        // 200 kbit/s × 40 ms = 1 frame; the improved variant observes 16.
        assert_eq!(c.sn_thresh, 16);
        let f = RateController::new(ms(0), cfg(Variant::Faithful));
        assert_eq!(f.sn_thresh, 40);
    }

    #[test]
    fn improved_delay_decrease() {
        let s = Rate::from_kbps(8000); // 1 ms per frame
        let mut c = RateController::new(ms(0), cfg(Variant::Improved));
        for sn in 1..=40 {
            c.on_packet(ms(sn), sn, 0, s);
        }
        c.on_packet(ms(41), 41, 1, s);
        // The next 40 frames arrive 1.5 ms apart: the queue grows by 20 ms.
        let mut last = Decision::None;
        for i in 1..=40u64 {
            last = c.on_packet(Instant::from_micros(41_000 + i * 1500), 41 + i, 1, s);
        }
        assert_eq!(last, Decision::DelayDecrease);
        // Delivery rate 8000 × 40 / 60 = 5333 kbit/s, below S_current - S_step.
        assert_eq!(c.suggested(), Rate::from_kbps(5333));
    }
}
