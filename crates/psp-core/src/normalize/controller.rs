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
    /// Algorithm 1 plus: counting only frames inside the observation interval, and a one-way
    /// queueing-delay target checked before every increase (hold near the target, drain above
    /// it). An optional minimum observation length ([`ControllerConfig::min_observation`]).
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
    /// loss among a handful of frames at a low rate does not read as a huge loss ratio. Off
    /// (1) by default: longer windows see a loss more often and, since only loss-free windows
    /// increase, lower the rate under random loss (the loss × RTT table: 5% loss, 10 ms RTT,
    /// 16 frames gives 1.53 Mbit/s against 2.16).
    pub min_observation: u64,
    /// Improved only: the one-way queueing delay the controller aims below. The queueing delay
    /// of an observation is the smallest one-way delay (arrival minus the sender's departure
    /// slot) among its frames minus the smallest seen over the last
    /// `BASE_BUCKETS × ROUNDS_PER_BUCKET` rounds. Above the target (at least two frame times)
    /// the controller drains instead of increasing; above half of it, it holds.
    pub delay_target: Duration,
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
            min_observation: 1,
            delay_target: Duration::from_millis(5),
        }
    }
}

/// What Algorithm 1 reads from one received frame (its header's fields).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet {
    /// SN_pkt: the frame's sequence number (the first frame is 1).
    pub sn: u64,
    /// R_rcnt: the highest round of ours the peer has received.
    pub r_rcnt: u32,
    /// S_current: the rate the peer reports sending at.
    pub s_current: Rate,
    /// The peer's departure slot, µs of its clock mod 2^32 (improved variant only).
    pub sent_at: u32,
}

/// Rounds per bucket of the base one-way-delay history (improved variant).
pub const ROUNDS_PER_BUCKET: u32 = 32;
/// Buckets of the base one-way-delay history: the base is the minimum over the last 4 × 32
/// rounds (tens of seconds), so clock skew between the hosts (tens of ppm) stays far below
/// the target while a route change is forgotten in bounded time.
pub const BASE_BUCKETS: usize = 4;

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
    /// Improved only: no loss but a queue above the delay target; S_suggested drains it.
    DelayDecrease,
    /// Improved only: no loss, a queue near the target; S_suggested stays at S_current.
    Hold,
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
    // Improved: frames received with SN_start < SN.
    n_window: u64,
    // Improved: one-way delays relative to the first frame's, in µs.
    owd_ref: Option<u32>,
    owd_window_min: i64,
    owd_buckets: [i64; BASE_BUCKETS],
    owd_bucket: usize,
    rounds_in_bucket: u32,
    last_queue: Duration,
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
            owd_ref: None,
            owd_window_min: i64::MAX,
            owd_buckets: [i64::MAX; BASE_BUCKETS],
            owd_bucket: 0,
            rounds_in_bucket: 0,
            last_queue: Duration::ZERO,
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

    /// Improved: the queueing delay of the latest completed observation.
    pub fn last_queueing_delay(&self) -> Duration {
        self.last_queue
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
    /// Reordered frames are fine: `SN_pkt` is the highest sequence number seen (§IV-C, step 2).
    pub fn on_packet(&mut self, now: Instant, pkt: Packet) -> Decision {
        let improved = self.cfg.variant == Variant::Improved;
        let s_current = pkt.s_current;
        // Line 1.
        self.n_recv += 1;
        if pkt.sn > self.sn_start {
            self.n_window += 1;
        }
        if pkt.sn > self.sn_high {
            self.sn_high = pkt.sn;
        }
        let sn_pkt = self.sn_high;
        if improved {
            self.note_delay(now, pkt.sent_at);
        }
        // Line 2: t_now is `now`.
        let mut decision = Decision::None;
        // Lines 3-10: the peer has seen our latest suggestion; start a new observation.
        if self.updating && pkt.r_rcnt == self.r_current {
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
            self.owd_window_min = i64::MAX;
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
            self.last_loss = Loss::from_counts(lost, expected);
            if received == expected && self.allow_dec {
                // Lines 13-18 (the improved variant checks the queueing delay first).
                decision = if improved {
                    self.delay_decision(s_current)
                } else {
                    self.s_suggested = s_current.saturating_add(self.cfg.s_step);
                    Decision::Increase
                };
                self.allow_dec = false;
                self.start_update(now);
            } else if received < expected && self.allow_inc {
                // Lines 19-25: S_suggested = max(S_min, S_current × (1 - p)).
                self.s_suggested =
                    core::cmp::max(self.cfg.s_min, s_current.scale(received, expected));
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
        self.rounds_in_bucket += 1;
        if self.rounds_in_bucket >= ROUNDS_PER_BUCKET {
            self.rounds_in_bucket = 0;
            self.owd_bucket = (self.owd_bucket + 1) % BASE_BUCKETS;
            self.owd_buckets[self.owd_bucket] = i64::MAX;
        }
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

    /// Improved: records one frame's one-way delay (relative to the first frame's, so the two
    /// clocks' offset cancels; wrapping arithmetic over 2^32 µs).
    fn note_delay(&mut self, now: Instant, sent_at: u32) {
        let raw = (now.total_micros() as u32).wrapping_sub(sent_at);
        let base = *self.owd_ref.get_or_insert(raw);
        let rel = i64::from(raw.wrapping_sub(base) as i32);
        self.owd_window_min = self.owd_window_min.min(rel);
        let b = &mut self.owd_buckets[self.owd_bucket];
        *b = (*b).min(rel);
    }

    /// Improved: lines 13-18 with a queueing-delay target. Increase by S_step below half the
    /// target, hold up to the target, above it step down by S_step + S_current/32 (a gentle
    /// drain with a proportional part for fairness; a faster drain, S × O / (O + q), over-reacted to the two-round feedback lag and
    /// oscillated more in the simulation).
    fn delay_decision(&mut self, s_current: Rate) -> Decision {
        let base = self.owd_buckets.iter().copied().min().unwrap_or(i64::MAX);
        let q = if self.owd_window_min == i64::MAX || base == i64::MAX {
            0
        } else {
            u64::try_from(self.owd_window_min - base).unwrap_or(0)
        };
        self.last_queue = Duration::from_micros(q);
        let two_frames = s_current
            .frame_time_ns(self.cfg.frame_bits)
            .saturating_mul(2)
            / 1000;
        let target = self.cfg.delay_target.total_micros().max(two_frames);
        if q > target {
            // S_step plus 1/32 of the rate: the proportional part makes tunnels that share a
            // bottleneck converge to equal rates (a purely additive decrease keeps their
            // difference for ever), the additive part keeps the drain gentle at low rates.
            let down = s_current
                .saturating_sub(self.cfg.s_step)
                .saturating_sub(s_current.scale(1, FAIR_SHARE_DIVISOR));
            self.s_suggested = core::cmp::max(self.cfg.s_min, down);
            Decision::DelayDecrease
        } else if 2 * q > target {
            self.s_suggested = core::cmp::max(self.cfg.s_min, s_current);
            Decision::Hold
        } else {
            self.s_suggested = s_current.saturating_add(self.cfg.s_step);
            Decision::Increase
        }
    }
}

/// Improved: a delay decrease also takes 1/this of the rate (AIMD-style fairness).
const FAIR_SHARE_DIVISOR: u64 = 32;

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
    const S: Rate = Rate::from_kbps(8000); // 1 ms per 1000-byte frame

    fn cfg(variant: Variant) -> ControllerConfig {
        ControllerConfig {
            variant,
            s_min: Rate::from_kbps(200),
            s_step: Rate::from_kbps(200),
            s_init: S,
            o_min: Duration::from_millis(40),
            w: Weight::new(1, 8),
            frame_bits: FRAME_BITS,
            min_observation: 16,
            delay_target: Duration::from_millis(5),
        }
    }

    fn ms(m: u64) -> Instant {
        Instant::from_millis(m)
    }

    /// Frame `sn` sent at `sn` ms (so a 10 ms one-way delay means arrival at sn + 10 ms).
    fn pkt(sn: u64, r_rcnt: u32) -> Packet {
        Packet {
            sn,
            r_rcnt,
            s_current: S,
            sent_at: (sn * 1000) as u32,
        }
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
        assert_eq!(c.suggested(), S);
        assert_eq!(c.round(), 0);
    }

    #[test]
    fn increase_without_loss_then_wait_for_echo() {
        let mut c = RateController::new(ms(0), cfg(Variant::Faithful));
        for sn in 1..40 {
            assert_eq!(c.on_packet(ms(sn), pkt(sn, 0)), Decision::None);
        }
        assert_eq!(c.on_packet(ms(40), pkt(40, 0)), Decision::Increase);
        assert_eq!(c.suggested(), Rate::from_kbps(8200));
        assert_eq!(c.round(), 1);
        assert!(c.is_updating());
        // No second increase while waiting (allow_dec is false).
        assert_eq!(c.on_packet(ms(41), pkt(41, 0)), Decision::None);
        // The echo of round 1 arrives 30 ms after the decision: O = max(40, 5 + 26.25).
        assert_eq!(c.on_packet(ms(70), pkt(42, 1)), Decision::NewInterval);
        assert_eq!(c.observation(), Duration::from_millis(40));
        assert_eq!(c.last_rtt_sample(), Duration::from_millis(30));
        // New threshold: 42 + 40 frames.
        assert_eq!(c.sn_thresh, 82);
        assert!(!c.is_updating());
    }

    #[test]
    fn proportional_decrease_and_floor() {
        let mut c = RateController::new(ms(0), cfg(Variant::Faithful));
        // 40 sequence numbers, 10 lost: p = 0.25.
        for sn in (1..=40).filter(|n| n % 4 != 1) {
            c.on_packet(ms(sn), pkt(sn, 0));
        }
        assert_eq!(c.suggested(), Rate::from_kbps(6000));
        assert_eq!(c.last_loss(), Loss(250_000));
        assert_eq!(c.round(), 1);
        // Both flags cleared: nothing more until the echo.
        assert_eq!(c.on_packet(ms(50), pkt(60, 0)), Decision::None);
        assert_eq!(c.suggested(), Rate::from_kbps(6000));
        // Heavy loss floors at S_min.
        let mut c = RateController::new(ms(0), cfg(Variant::Faithful));
        assert_eq!(c.on_packet(ms(1), pkt(1000, 0)), Decision::Decrease);
        assert_eq!(c.suggested(), Rate::from_kbps(200));
    }

    #[test]
    fn retro_correction_after_increase() {
        let mut c = RateController::new(ms(0), cfg(Variant::Faithful));
        for sn in 1..=40 {
            c.on_packet(ms(sn), pkt(sn, 0));
        }
        assert_eq!(c.suggested(), Rate::from_kbps(8200));
        // Frames 41-49 lost, 50 arrives before the echo: p over 1..50 = 9/50.
        assert_eq!(c.on_packet(ms(50), pkt(50, 0)), Decision::Decrease);
        assert_eq!(c.suggested(), Rate::from_kbps(6560));
        assert_eq!(c.round(), 2);
        // Waiting for round 2: an echo of round 1 does not end it.
        assert_eq!(c.on_packet(ms(60), pkt(51, 1)), Decision::None);
        assert!(c.is_updating());
        assert_eq!(c.on_packet(ms(61), pkt(52, 2)), Decision::NewInterval);
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
        // A late frame from before the interval start counts in n_recv (faithful), not in the
        // improved window count.
        for (variant, expect) in [
            (Variant::Faithful, Decision::Increase),
            (Variant::Improved, Decision::Decrease),
        ] {
            let mut c = RateController::new(ms(0), cfg(variant));
            for sn in 1..=40 {
                c.on_packet(ms(sn), pkt(sn, 0));
            }
            c.on_packet(ms(41), pkt(41, 1)); // echo: the interval starts at 41
            c.on_packet(ms(42), pkt(30, 1)); // a frame of the previous interval, late
            for sn in 42..=80 {
                if sn != 60 {
                    c.on_packet(ms(sn), pkt(sn, 1));
                }
            }
            // Faithful: n_recv - n_start = 40 over SN 41..81 = 40, p = 0: the late frame hides
            // the loss of 60. The improved count (SN > SN_start only) sees 39 of 40.
            assert_eq!(c.on_packet(ms(81), pkt(81, 1)), expect, "{variant:?}");
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

    /// Runs one improved observation (SN 41..=80 after an echo at 41) whose frames see
    /// `queue_ms` of extra one-way delay, after a first round without queue.
    fn improved_round(queue_ms: u64) -> (Decision, Rate) {
        let mut c = RateController::new(ms(0), cfg(Variant::Improved));
        for sn in 1..=40 {
            c.on_packet(ms(sn + 10), pkt(sn, 0));
        }
        c.on_packet(ms(51), pkt(41, 1));
        let mut last = Decision::None;
        for sn in 42..=81 {
            last = c.on_packet(ms(sn + 10 + queue_ms), pkt(sn, 1));
        }
        (last, c.suggested())
    }

    #[test]
    fn improved_delay_target() {
        assert_eq!(
            improved_round(0),
            (Decision::Increase, Rate::from_kbps(8200))
        );
        assert_eq!(improved_round(3), (Decision::Hold, S));
        // Above the target: one step down, plus 1/32 of the rate.
        assert_eq!(
            improved_round(20),
            (Decision::DelayDecrease, Rate::from_kbps(7800 - 250))
        );
    }

    #[test]
    fn one_way_delay_survives_clock_wrap() {
        // The sender's clock is near 2^32 µs and wraps; the receiver's is near 0.
        let mut c = RateController::new(ms(0), cfg(Variant::Improved));
        let off = u32::MAX - 20_000;
        for sn in 1..=40u64 {
            let p = Packet {
                sent_at: off.wrapping_add((sn * 1000) as u32),
                ..pkt(sn, 0)
            };
            c.on_packet(ms(sn + 10), p);
        }
        assert_eq!(c.last_queueing_delay(), Duration::ZERO);
        assert_eq!(c.suggested(), Rate::from_kbps(8200));
    }
}
