//! `[normalize]` (defaults for every peer) and `[peer.normalize]` (one peer's overrides): traffic
//! normalization settings, merged key by key (built-in → `[normalize]` → `[peer.normalize]`) and
//! checked here; the frame size is checked against the uplink when the daemon starts.

use psp_core::normalize::packing::TX_RECORD_OVERHEAD;
use psp_core::normalize::{Algorithm, Aqm, CodelParams, Packing, Rate, Weight};
use psp_core::time::Duration;
use serde::Deserialize;

use super::ConfigError;

/// The smallest `frame_size`: room for the PSP overhead, the normalized header and a fragment.
pub(crate) const MIN_FRAME_SIZE: usize = 128;
/// The largest `frame_size`: a standard Ethernet frame plus the largest PSP overhead, rounded
/// up (normalized frames stay below a standard 1500-byte MTU's frame; jumbo uplinks carry
/// them unchanged).
pub(crate) const MAX_FRAME_SIZE: usize = 2048;
/// The smallest inner queue (one largest inner frame and its record header).
pub(crate) const MIN_QUEUE_BYTES: usize = MAX_FRAME_SIZE + TX_RECORD_OVERHEAD;
/// The largest inner queue.
pub(crate) const MAX_QUEUE_BYTES: usize = 64 << 20;
/// The default inner queue with drop-tail: the byte cap is then also the delay bound.
const DROP_TAIL_QUEUE_BYTES: usize = 64 * 1024;
/// The default inner queue with CoDel, which bounds the delay: the cap is only a memory bound,
/// large enough for the slow-start bursts of ten TCP flows (10 × IW10 of ~1.4 kB segments is
/// 140 kB) so that CoDel, not overflow, answers them.
const CODEL_QUEUE_BYTES: usize = 256 * 1024;
/// The largest rate accepted in the file (100 Gbit/s).
const MAX_KBPS: i64 = 100_000_000;
/// The largest O_min (one minute).
const MAX_O_MIN_MS: i64 = 60_000;
/// The largest CoDel target (one second).
const MAX_CODEL_TARGET_MS: i64 = 1_000;
/// The largest CoDel interval (ten seconds).
const MAX_CODEL_INTERVAL_MS: i64 = 10_000;

/// The normalization settings of one peer (present only when enabled).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NormalizeConfig {
    /// Bytes of every sealed outer PSP frame, Ethernet header included (`frame_size`); `None`:
    /// the largest frame the uplink carries.
    pub frame_size: Option<usize>,
    /// S_goal (`s_goal_kbps`, default 8160).
    pub s_goal: Rate,
    /// S_min (`s_min_kbps`, default 204).
    pub s_min: Rate,
    /// S_step (`s_step_kbps`, default 204).
    pub s_step: Rate,
    /// O_min in milliseconds (`o_min_ms`, default 40).
    pub o_min_ms: u32,
    /// The EWMA weight of the old O, in thousandths (`w`, default 0.125).
    pub w_milli: u32,
    /// The rate rule (`algorithm = "fixed" | "faithful" | "improved"`, default faithful).
    pub algorithm: Algorithm,
    /// How inner frames are packed (`packing = "faithful" | "packed"`, default packed).
    pub packing: Packing,
    /// Bytes of the inner transmit queue, drop-tail beyond (`queue_bytes`, default 262144 with
    /// CoDel, 65536 with drop-tail).
    pub queue_bytes: usize,
    /// The inner queue's AQM below that cap (`aqm = "codel" | "drop-tail"`, default CoDel with
    /// `codel_target_ms = 5`, `codel_interval_ms = 100`, `codel_ecn = true`).
    pub aqm: Aqm,
    /// How far ahead of its departure slot each frame is sealed and handed to the pacer
    /// (`lead_ms`, in µs here): what it adds to the latency, and the head start that keeps
    /// departures on time while the daemon is busy.
    pub lead_us: u32,
}

impl NormalizeConfig {
    /// The EWMA weight as a fraction.
    pub fn weight(&self) -> Weight {
        Weight::new(self.w_milli, 1000)
    }
}

/// The default `lead_ms`, in µs (docs/CONFIG.md says how to choose it).
const DEFAULT_LEAD_US: u32 = 4_000;
/// The smallest `lead_ms`, in µs (0.1 ms).
const MIN_LEAD_US: f64 = 100.0;
/// The largest `lead_ms`, in µs (100 ms).
const MAX_LEAD_US: f64 = 100_000.0;

/// A number of milliseconds written as an integer or a decimal (`lead_ms = 4`, `= 0.5`).
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(untagged)]
enum Millis {
    Int(i64),
    Float(f64),
}

impl Millis {
    fn micros(self) -> f64 {
        match self {
            // Exact for every value the range check lets through.
            Self::Int(v) => v as f64 * 1000.0,
            Self::Float(v) => v * 1000.0,
        }
    }
}

impl core::fmt::Display for Millis {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Int(v) => write!(f, "{v}"),
            Self::Float(v) => write!(f, "{v}"),
        }
    }
}

/// `[normalize]` and `[peer.normalize]` as written.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawNormalize {
    enabled: Option<bool>,
    frame_size: Option<i64>,
    s_goal_kbps: Option<i64>,
    s_min_kbps: Option<i64>,
    s_step_kbps: Option<i64>,
    o_min_ms: Option<i64>,
    w: Option<f64>,
    algorithm: Option<String>,
    packing: Option<String>,
    queue_bytes: Option<i64>,
    aqm: Option<String>,
    codel_target_ms: Option<i64>,
    codel_interval_ms: Option<i64>,
    codel_ecn: Option<bool>,
    lead_ms: Option<Millis>,
}

/// Settings while they are merged.
#[derive(Debug, Clone)]
pub(super) struct NormSettings {
    enabled: bool,
    cfg: NormalizeConfig,
    // `aqm` and CoDel's parameters are merged separately: a `[peer.normalize]` may switch CoDel
    // on while `[normalize]` set its target. `finish` puts them together in `cfg.aqm`.
    codel: bool,
    codel_params: CodelParams,
    // `queue_bytes` as written; its default depends on the AQM (resolved in `finish`).
    queue_bytes: Option<usize>,
}

impl NormSettings {
    /// The built-in defaults (the paper's testbed values; disabled).
    pub(super) fn builtin() -> Self {
        Self {
            enabled: false,
            cfg: NormalizeConfig {
                frame_size: None,
                s_goal: Rate::from_kbps(8160),
                s_min: Rate::from_kbps(204),
                s_step: Rate::from_kbps(204),
                o_min_ms: 40,
                w_milli: 125,
                algorithm: Algorithm::Faithful,
                packing: Packing::Packed,
                queue_bytes: CODEL_QUEUE_BYTES,
                aqm: Aqm::default(),
                lead_us: DEFAULT_LEAD_US,
            },
            codel: true,
            codel_params: CodelParams::default(),
            queue_bytes: None,
        }
    }

    /// Applies the values present in `raw`, found in section `scope` of `file`.
    pub(super) fn apply(
        &mut self,
        file: &std::path::Path,
        scope: &str,
        raw: &RawNormalize,
    ) -> Result<(), ConfigError> {
        let err = |field: &str, p: String| ConfigError::new(file, format!("{scope}.{field}"), p);
        let kbps = |field: &str, v: i64, min: i64| -> Result<Rate, ConfigError> {
            if (min..=MAX_KBPS).contains(&v) {
                // In range of u32 by the check above.
                Ok(Rate::from_kbps(u32::try_from(v).unwrap_or(u32::MAX)))
            } else {
                Err(err(
                    field,
                    format!("{v} is not in {min}..={MAX_KBPS} (kbit/s)"),
                ))
            }
        };
        if let Some(e) = raw.enabled {
            self.enabled = e;
        }
        if let Some(f) = raw.frame_size {
            let ok = usize::try_from(f)
                .ok()
                .filter(|f| (MIN_FRAME_SIZE..=MAX_FRAME_SIZE).contains(f));
            let Some(f) = ok else {
                return Err(err(
                    "frame_size",
                    format!("{f} is not in {MIN_FRAME_SIZE}..={MAX_FRAME_SIZE} (bytes)"),
                ));
            };
            self.cfg.frame_size = Some(f);
        }
        if let Some(v) = raw.s_goal_kbps {
            self.cfg.s_goal = kbps("s_goal_kbps", v, 1)?;
        }
        if let Some(v) = raw.s_min_kbps {
            self.cfg.s_min = kbps("s_min_kbps", v, 1)?;
        }
        if let Some(v) = raw.s_step_kbps {
            self.cfg.s_step = kbps("s_step_kbps", v, 0)?;
        }
        if let Some(v) = raw.o_min_ms {
            if !(1..=MAX_O_MIN_MS).contains(&v) {
                return Err(err(
                    "o_min_ms",
                    format!("{v} is not in 1..={MAX_O_MIN_MS} (milliseconds)"),
                ));
            }
            self.cfg.o_min_ms = u32::try_from(v).unwrap_or(u32::MAX);
        }
        if let Some(v) = raw.lead_ms {
            let us = v.micros().round();
            if !(MIN_LEAD_US..=MAX_LEAD_US).contains(&us) {
                return Err(err(
                    "lead_ms",
                    format!("{v} is not in 0.1..=100 (milliseconds)"),
                ));
            }
            // In 100..=100_000 by the check above.
            self.cfg.lead_us = us as u32;
        }
        if let Some(w) = raw.w {
            if !(0.0..=1.0).contains(&w) {
                return Err(err("w", format!("{w} is not a weight in 0.0..=1.0")));
            }
            // In 0..=1000 by the check above.
            self.cfg.w_milli = (w * 1000.0).round() as u32;
        }
        if let Some(a) = &raw.algorithm {
            self.cfg.algorithm = match a.as_str() {
                "fixed" => Algorithm::Fixed,
                "faithful" => Algorithm::Faithful,
                "improved" => Algorithm::Improved,
                _ => {
                    return Err(err(
                        "algorithm",
                        format!(
                            "{a:?} is not an algorithm; want \"fixed\", \"faithful\" or \"improved\""
                        ),
                    ));
                }
            };
        }
        if let Some(p) = &raw.packing {
            self.cfg.packing = match p.as_str() {
                "faithful" | "single" => Packing::Single,
                "packed" => Packing::Packed,
                _ => {
                    return Err(err(
                        "packing",
                        format!("{p:?} is not a packing mode; want \"faithful\" or \"packed\""),
                    ));
                }
            };
        }
        if let Some(q) = raw.queue_bytes {
            let ok = usize::try_from(q)
                .ok()
                .filter(|q| (MIN_QUEUE_BYTES..=MAX_QUEUE_BYTES).contains(q));
            let Some(q) = ok else {
                return Err(err(
                    "queue_bytes",
                    format!("{q} is not in {MIN_QUEUE_BYTES}..={MAX_QUEUE_BYTES} (bytes)"),
                ));
            };
            self.queue_bytes = Some(q);
        }
        if let Some(a) = &raw.aqm {
            self.codel = match a.as_str() {
                "codel" => true,
                "drop-tail" => false,
                _ => {
                    return Err(err(
                        "aqm",
                        format!("{a:?} is not an AQM; want \"codel\" or \"drop-tail\""),
                    ));
                }
            };
        }
        let ms = |field: &str, v: i64, max: i64| -> Result<Duration, ConfigError> {
            match u64::try_from(v) {
                Ok(m) if (1..=max).contains(&v) => Ok(Duration::from_millis(m)),
                _ => Err(err(
                    field,
                    format!("{v} is not in 1..={max} (milliseconds)"),
                )),
            }
        };
        if let Some(v) = raw.codel_target_ms {
            self.codel_params.target = ms("codel_target_ms", v, MAX_CODEL_TARGET_MS)?;
        }
        if let Some(v) = raw.codel_interval_ms {
            self.codel_params.interval = ms("codel_interval_ms", v, MAX_CODEL_INTERVAL_MS)?;
        }
        if let Some(e) = raw.codel_ecn {
            self.codel_params.ecn = e;
        }
        Ok(())
    }

    /// The final settings of `scope` (`None` when disabled), after the cross-checks.
    pub(super) fn finish(
        &self,
        file: &std::path::Path,
        scope: &str,
    ) -> Result<Option<NormalizeConfig>, ConfigError> {
        if !self.enabled {
            return Ok(None);
        }
        let mut c = self.cfg;
        let p = self.codel_params;
        if p.target > p.interval {
            return Err(ConfigError::new(
                file,
                format!("{scope}.codel_target_ms"),
                format!(
                    "{} is above codel_interval_ms ({}); want codel_target_ms <= codel_interval_ms",
                    p.target.total_millis(),
                    p.interval.total_millis()
                ),
            ));
        }
        (c.aqm, c.queue_bytes) = if self.codel {
            (Aqm::Codel(p), self.queue_bytes.unwrap_or(CODEL_QUEUE_BYTES))
        } else {
            (
                Aqm::DropTail,
                self.queue_bytes.unwrap_or(DROP_TAIL_QUEUE_BYTES),
            )
        };
        if c.s_goal < c.s_min {
            return Err(ConfigError::new(
                file,
                format!("{scope}.s_goal_kbps"),
                format!(
                    "{} is below s_min_kbps ({}); want s_min_kbps <= s_goal_kbps",
                    c.s_goal.kbps(),
                    c.s_min.kbps()
                ),
            ));
        }
        Ok(Some(c))
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn raw(text: &str) -> RawNormalize {
        toml::from_str(text).unwrap()
    }

    fn apply(text: &str) -> Result<Option<NormalizeConfig>, String> {
        let mut s = NormSettings::builtin();
        let f = Path::new("gw.toml");
        s.apply(f, "normalize", &raw(text))
            .and_then(|()| s.finish(f, "normalize"))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn disabled_by_default() {
        assert_eq!(apply(""), Ok(None));
        assert_eq!(apply("s_goal_kbps = 1000"), Ok(None));
    }

    #[test]
    fn values_are_applied() {
        let c = apply(
            "enabled = true\nframe_size = 1000\ns_goal_kbps = 4080\ns_min_kbps = 100\n\
             s_step_kbps = 50\no_min_ms = 20\nw = 0.5\nalgorithm = \"improved\"\n\
             packing = \"faithful\"\nqueue_bytes = 10000\ncodel_target_ms = 10\n\
             codel_interval_ms = 200\ncodel_ecn = false\n",
        )
        .unwrap()
        .unwrap();
        assert_eq!(c.frame_size, Some(1000));
        assert_eq!(c.s_goal.kbps(), 4080);
        assert_eq!(c.s_min.kbps(), 100);
        assert_eq!(c.s_step.kbps(), 50);
        assert_eq!(c.o_min_ms, 20);
        assert_eq!(c.weight(), Weight::new(500, 1000));
        assert_eq!(c.algorithm, Algorithm::Improved);
        assert_eq!(c.packing, Packing::Single);
        assert_eq!(c.queue_bytes, 10000);
        assert_eq!(
            c.aqm,
            Aqm::Codel(CodelParams {
                target: Duration::from_millis(10),
                interval: Duration::from_millis(200),
                ecn: false,
            })
        );
    }

    #[test]
    fn lead_ms_defaults_to_4_and_is_bounded() {
        assert_eq!(apply("enabled = true").unwrap().unwrap().lead_us, 4000);
        for (text, us) in [("10", 10_000), ("0.5", 500), ("0.1", 100), ("100", 100_000)] {
            let c = apply(&format!("enabled = true\nlead_ms = {text}"));
            assert_eq!(c.unwrap().unwrap().lead_us, us, "lead_ms = {text}");
        }
        for bad in ["0", "101", "-1", "0.05", "100.5", "nan", "inf"] {
            let e = apply(&format!("enabled = true\nlead_ms = {bad}")).unwrap_err();
            assert!(e.to_string().contains("lead_ms"), "{e}");
        }
    }

    #[test]
    fn aqm_defaults_to_codel_and_drop_tail_is_named() {
        let c = apply("enabled = true").unwrap().unwrap();
        assert_eq!(c.aqm, Aqm::Codel(CodelParams::default()));
        assert_eq!(c.queue_bytes, 256 * 1024);
        let c = apply("enabled = true\naqm = \"drop-tail\"\ncodel_target_ms = 7")
            .unwrap()
            .unwrap();
        assert_eq!(c.aqm, Aqm::DropTail);
        assert_eq!(c.queue_bytes, 64 * 1024);
        // An explicit queue_bytes wins for either.
        let c = apply("enabled = true\naqm = \"drop-tail\"\nqueue_bytes = 9000")
            .unwrap()
            .unwrap();
        assert_eq!(c.queue_bytes, 9000);
    }

    #[test]
    fn aqm_merges_key_by_key() {
        // [normalize] sets the target and drop-tail, the peer switches CoDel on.
        let mut s = NormSettings::builtin();
        let f = Path::new("gw.toml");
        s.apply(
            f,
            "normalize",
            &raw("enabled = true\naqm = \"drop-tail\"\ncodel_target_ms = 8"),
        )
        .unwrap();
        s.apply(f, "peer[0].normalize", &raw("aqm = \"codel\""))
            .unwrap();
        let c = s.finish(f, "peer[0].normalize").unwrap().unwrap();
        assert_eq!(
            c.aqm,
            Aqm::Codel(CodelParams {
                target: Duration::from_millis(8),
                interval: Duration::from_millis(100),
                ecn: true,
            })
        );
    }

    #[test]
    fn errors_are_one_line_and_name_the_key() {
        for (text, want) in [
            (
                "frame_size = 64",
                "gw.toml: normalize.frame_size: 64 is not in 128..=2048 (bytes)",
            ),
            (
                "s_goal_kbps = 0",
                "gw.toml: normalize.s_goal_kbps: 0 is not in 1..=100000000 (kbit/s)",
            ),
            (
                "o_min_ms = 0",
                "gw.toml: normalize.o_min_ms: 0 is not in 1..=60000 (milliseconds)",
            ),
            (
                "w = 1.5",
                "gw.toml: normalize.w: 1.5 is not a weight in 0.0..=1.0",
            ),
            (
                "algorithm = \"fast\"",
                "gw.toml: normalize.algorithm: \"fast\" is not an algorithm; want \"fixed\", \"faithful\" or \"improved\"",
            ),
            (
                "packing = \"x\"",
                "gw.toml: normalize.packing: \"x\" is not a packing mode; want \"faithful\" or \"packed\"",
            ),
            (
                "queue_bytes = 10",
                "gw.toml: normalize.queue_bytes: 10 is not in 2058..=67108864 (bytes)",
            ),
            (
                "aqm = \"red\"",
                "gw.toml: normalize.aqm: \"red\" is not an AQM; want \"codel\" or \"drop-tail\"",
            ),
            (
                "codel_target_ms = 0",
                "gw.toml: normalize.codel_target_ms: 0 is not in 1..=1000 (milliseconds)",
            ),
            (
                "codel_interval_ms = 20000",
                "gw.toml: normalize.codel_interval_ms: 20000 is not in 1..=10000 (milliseconds)",
            ),
            (
                "enabled = true\ncodel_target_ms = 200",
                "gw.toml: normalize.codel_target_ms: 200 is above codel_interval_ms (100); want codel_target_ms <= codel_interval_ms",
            ),
            (
                "enabled = true\ns_goal_kbps = 100",
                "gw.toml: normalize.s_goal_kbps: 100 is below s_min_kbps (204); want s_min_kbps <= s_goal_kbps",
            ),
        ] {
            assert_eq!(apply(text).unwrap_err(), want, "{text}");
        }
    }
}
