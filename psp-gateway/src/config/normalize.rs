//! `[normalize]` (defaults for every peer) and `[peer.normalize]` (one peer's overrides): traffic
//! normalization settings, merged key by key (built-in → `[normalize]` → `[peer.normalize]`) and
//! checked here; the frame size is checked against the uplink when the daemon starts.

use psp_core::normalize::{Algorithm, Packing, Rate, Weight};
use serde::Deserialize;

use super::ConfigError;

/// The smallest `frame_size`: room for the PSP overhead, the normalized header and a fragment.
pub(crate) const MIN_FRAME_SIZE: usize = 128;
/// The largest `frame_size` (one buffer slot, [`crate::io::SLOT_LEN`]).
pub(crate) const MAX_FRAME_SIZE: usize = crate::io::SLOT_LEN;
/// The smallest inner queue (one largest inner frame and its record header).
pub(crate) const MIN_QUEUE_BYTES: usize = crate::io::SLOT_LEN + 2;
/// The largest inner queue.
pub(crate) const MAX_QUEUE_BYTES: usize = 64 << 20;
/// The largest rate accepted in the file (100 Gbit/s).
const MAX_KBPS: i64 = 100_000_000;
/// The largest O_min (one minute).
const MAX_O_MIN_MS: i64 = 60_000;

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
    /// Bytes of the inner transmit queue, drop-tail beyond (`queue_bytes`, default 65536).
    pub queue_bytes: usize,
}

impl NormalizeConfig {
    /// The EWMA weight as a fraction.
    pub fn weight(&self) -> Weight {
        Weight::new(self.w_milli, 1000)
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
}

/// Settings while they are merged.
#[derive(Debug, Clone)]
pub(super) struct NormSettings {
    enabled: bool,
    cfg: NormalizeConfig,
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
                queue_bytes: 64 * 1024,
            },
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
            self.cfg.queue_bytes = q;
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
        let c = self.cfg;
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
             packing = \"faithful\"\nqueue_bytes = 10000\n",
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
                "gw.toml: normalize.queue_bytes: 10 is not in 2050..=67108864 (bytes)",
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
