//! Seed 003's congestion experiment (§V-B, Table I, Fig 5): the results file written by
//! `testbed/congestion.sh`, its aggregation over repetitions, the Markdown report next to the
//! paper's numbers, and the `RESULT` lines. The PNG bar chart is in [`chart`].
//!
//! Everything here is pure (text in, text out); only [`chart`] touches files. It does not run
//! the experiment.
//!
//! The results file is TSV: `# key: value` metadata lines, blank lines, one header line starting
//! with `scenario<TAB>`, then one run per line with the ten fields of [`Run`], in that order.
//! `nan` marks a value that could not be measured; it is kept out of means and shown as `fail`
//! (no repetition measured it) or as a `[n/reps]` count (some did).

pub mod chart;

use core::fmt;
use std::collections::BTreeMap;

/// The header line's first field; the line itself is skipped.
const HEADER_START: &str = "scenario\t";
/// Names of the ten fields of a run line, in order (as in the header line).
const FIELDS: [&str; 10] = [
    "scenario",
    "cc",
    "flows",
    "rep",
    "goodput_kbps",
    "retr_pct",
    "rtt_ms",
    "consumed_kbps",
    "allowed_kbps",
    "bound_kbps",
];

/// The congestion setup of a run (seed 003 §V-B).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scenario {
    /// `none`: the paper's setup 0, only A↔B at a fixed 8.16 Mbit/s gross, no congestion.
    NoCongestion,
    /// `uni`: A→B and A→C compete for the 10 Mbit/s router link (B→A, C→A at 4.08 Mbit/s).
    Uni,
    /// `bi`: all four directions at 8.16 Mbit/s, both directions of the link congested.
    Bi,
}

impl Scenario {
    /// All scenarios, in report order.
    pub const ALL: [Self; 3] = [Self::NoCongestion, Self::Uni, Self::Bi];

    /// The name used in the results file.
    pub fn name(self) -> &'static str {
        match self {
            Self::NoCongestion => "none",
            Self::Uni => "uni",
            Self::Bi => "bi",
        }
    }

    /// A short description for tables.
    pub fn label(self) -> &'static str {
        match self {
            Self::NoCongestion => "none (setup 0)",
            Self::Uni => "unidirectional",
            Self::Bi => "bidirectional",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.name() == s)
    }
}

/// The tunnel's congestion control in a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Cc {
    /// `fixed`: no congestion control, the tunnel sends at S_goal (the paper's "disabled").
    Fixed,
    /// `faithful`: Algorithm 1 as printed (the paper's "enabled").
    Faithful,
    /// `improved`: our variant; the paper has no counterpart.
    Improved,
}

impl Cc {
    /// All modes, in report order.
    pub const ALL: [Self; 3] = [Self::Fixed, Self::Faithful, Self::Improved];

    /// The name used in the results file and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Self::Fixed => "fixed",
            Self::Faithful => "faithful",
            Self::Improved => "improved",
        }
    }

    /// A short description for tables and the chart legend.
    pub fn label(self) -> &'static str {
        match self {
            Self::Fixed => "fixed rate (no CC)",
            Self::Faithful => "faithful (Algorithm 1)",
            Self::Improved => "improved",
        }
    }

    /// The mode named `s` in the results file or on the command line.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.name() == s)
    }
}

/// One line of the results file: one iperf3 run from host A to host B.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Run {
    /// The congestion setup.
    pub scenario: Scenario,
    /// The tunnel's congestion control.
    pub cc: Cc,
    /// Parallel TCP streams (1 or 10).
    pub flows: u32,
    /// Repetition number, from 1.
    pub rep: u32,
    /// Receiver-side goodput summed over the streams, kbit/s.
    pub goodput_kbps: f64,
    /// Retransmitted segments / segments sent at host A, %.
    pub retr_pct: f64,
    /// Mean smoothed RTT of the streams, ms.
    pub rtt_ms: f64,
    /// Measured A→B tunnel rate on the wire during the run (T_consumed), kbit/s.
    pub consumed_kbps: f64,
    /// The goodput that tunnel rate allows (G_max = T_consumed × payload / wire), kbit/s.
    pub allowed_kbps: f64,
    /// The scenario's theoretical bound (ideal congestion control), kbit/s.
    pub bound_kbps: f64,
}

/// A parsed results file.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Results {
    /// The `# key: value` lines in file order, `# k1: v1; k2: v2` split into pairs (a `# text`
    /// line without `:` has an empty value).
    pub meta: Vec<(String, String)>,
    /// The runs in file order.
    pub runs: Vec<Run>,
}

/// Why a results file was rejected; `line` is 1-based, `None` for the file as a whole.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// The offending line, 1-based.
    pub line: Option<usize>,
    /// What is wrong with it.
    pub problem: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{line}: {}", self.problem),
            None => f.write_str(&self.problem),
        }
    }
}

impl core::error::Error for ParseError {}

/// Parses a results file.
///
/// # Errors
/// The first bad line: wrong field count, a number that does not parse (or is negative or
/// infinite), an unknown scenario or mode, a repeated (scenario, cc, flows, rep); or a file
/// without runs.
pub fn parse(text: &str) -> Result<Results, ParseError> {
    let mut results = Results::default();
    let mut seen: BTreeMap<(Scenario, Cc, u32, u32), usize> = BTreeMap::new();
    for (idx, raw) in text.lines().enumerate() {
        let lineno = idx + 1;
        let line = raw.trim_end_matches('\r');
        if line.trim().is_empty() || line.starts_with(HEADER_START) {
            continue;
        }
        if let Some(rest) = line.strip_prefix('#') {
            results.meta.extend(parse_meta(rest));
            continue;
        }
        let at = |problem: String| ParseError {
            line: Some(lineno),
            problem,
        };
        let run = parse_run(line).map_err(at)?;
        let key = (run.scenario, run.cc, run.flows, run.rep);
        if let Some(first) = seen.insert(key, lineno) {
            return Err(at(format!(
                "run {} {} {} flow(s) rep {} repeats line {first}",
                run.scenario.name(),
                run.cc.name(),
                run.flows,
                run.rep
            )));
        }
        results.runs.push(run);
    }
    if results.runs.is_empty() {
        return Err(ParseError {
            line: None,
            problem: "no runs (only metadata, header or blank lines)".to_owned(),
        });
    }
    Ok(results)
}

/// `key: value`, or `k1: v1; k2: v2; …` when every `;`-separated part has a key; a line
/// without `:` becomes a key with an empty value.
fn parse_meta(text: &str) -> Vec<(String, String)> {
    let pair = |part: &str| {
        let (key, value) = part.split_once(':').unwrap_or((part, ""));
        (key.trim().to_owned(), value.trim().to_owned())
    };
    let parts: Vec<&str> = text.split("; ").collect();
    if parts.len() > 1 && parts.iter().all(|p| p.contains(':')) {
        parts.into_iter().map(pair).collect()
    } else {
        vec![pair(text)]
    }
}

fn parse_run(line: &str) -> Result<Run, String> {
    let fields: Vec<&str> = line.split('\t').map(str::trim).collect();
    if fields.len() != FIELDS.len() {
        return Err(format!(
            "expected {} tab-separated fields ({}), found {}",
            FIELDS.len(),
            FIELDS.join(" "),
            fields.len()
        ));
    }
    let scenario = Scenario::parse(fields[0]).ok_or_else(|| {
        format!(
            "field 1 (scenario): unknown scenario `{}` (expected none, uni or bi)",
            fields[0]
        )
    })?;
    let cc = Cc::parse(fields[1]).ok_or_else(|| {
        format!(
            "field 2 (cc): unknown mode `{}` (expected fixed, faithful or improved)",
            fields[1]
        )
    })?;
    let count = |i: usize| -> Result<u32, String> {
        match fields[i].parse::<u32>() {
            Ok(n) if n >= 1 => Ok(n),
            _ => Err(format!(
                "field {} ({}): `{}` is not a positive integer",
                i + 1,
                FIELDS[i],
                fields[i]
            )),
        }
    };
    let value = |i: usize| -> Result<f64, String> {
        let s = fields[i];
        if s.eq_ignore_ascii_case("nan") {
            return Ok(f64::NAN);
        }
        match s.parse::<f64>() {
            Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
            Ok(_) => Err(format!(
                "field {} ({}): `{s}` is not a finite, non-negative number",
                i + 1,
                FIELDS[i]
            )),
            Err(_) => Err(format!(
                "field {} ({}): `{s}` is not a number (or `nan`)",
                i + 1,
                FIELDS[i]
            )),
        }
    };
    Ok(Run {
        scenario,
        cc,
        flows: count(2)?,
        rep: count(3)?,
        goodput_kbps: value(4)?,
        retr_pct: value(5)?,
        rtt_ms: value(6)?,
        consumed_kbps: value(7)?,
        allowed_kbps: value(8)?,
        bound_kbps: value(9)?,
    })
}

/// Mean, minimum and maximum of the measured (non-`nan`) values of one metric in a group.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stat {
    /// Arithmetic mean.
    pub mean: f64,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
    /// How many repetitions measured it.
    pub n: usize,
}

impl Stat {
    /// The statistics of the finite values; `None` if there are none.
    pub fn of(values: impl IntoIterator<Item = f64>) -> Option<Self> {
        let mut acc: Option<Self> = None;
        let mut sum = 0.0;
        for v in values.into_iter().filter(|v| v.is_finite()) {
            sum += v;
            acc = Some(match acc {
                None => Self {
                    mean: v,
                    min: v,
                    max: v,
                    n: 1,
                },
                Some(s) => Self {
                    mean: v,
                    min: s.min.min(v),
                    max: s.max.max(v),
                    n: s.n + 1,
                },
            });
        }
        acc.map(|s| Self {
            mean: sum / s.n as f64,
            ..s
        })
    }
}

/// All repetitions of one (scenario, cc, flows), aggregated.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Group {
    /// The congestion setup.
    pub scenario: Scenario,
    /// The tunnel's congestion control.
    pub cc: Cc,
    /// Parallel TCP streams.
    pub flows: u32,
    /// Repetitions in the file (measured or not).
    pub reps: usize,
    /// Goodput, kbit/s.
    pub goodput: Option<Stat>,
    /// Retransmissions, %.
    pub retr: Option<Stat>,
    /// RTT, ms.
    pub rtt: Option<Stat>,
    /// Tunnel rate on the wire, kbit/s.
    pub consumed: Option<Stat>,
    /// Allowed goodput, kbit/s.
    pub allowed: Option<Stat>,
    /// Theoretical bound, kbit/s.
    pub bound: Option<Stat>,
    /// Mean goodput / mean bound.
    pub of_bound: Option<f64>,
    /// Goodput / allowed goodput, both summed over the repetitions that measured both (the
    /// ratio of the means when every repetition did, as the paper's 3.99 / 4.49 = 89%).
    pub of_allowed: Option<f64>,
}

/// Groups runs by (scenario, flows, cc), in that order.
pub fn aggregate(runs: &[Run]) -> Vec<Group> {
    let mut by_key: BTreeMap<(Scenario, u32, Cc), Vec<&Run>> = BTreeMap::new();
    for run in runs {
        by_key
            .entry((run.scenario, run.flows, run.cc))
            .or_default()
            .push(run);
    }
    by_key
        .into_iter()
        .map(|((scenario, flows, cc), runs)| {
            let stat = |f: fn(&Run) -> f64| Stat::of(runs.iter().map(|r| f(r)));
            let goodput = stat(|r| r.goodput_kbps);
            let bound = stat(|r| r.bound_kbps);
            let of_bound = match (goodput, bound) {
                (Some(g), Some(b)) if b.mean > 0.0 => Some(g.mean / b.mean),
                _ => None,
            };
            let both = runs
                .iter()
                .filter(|r| r.goodput_kbps.is_finite() && r.allowed_kbps.is_finite());
            let (g_sum, a_sum) = both.fold((0.0, 0.0), |(g, a), r| {
                (g + r.goodput_kbps, a + r.allowed_kbps)
            });
            Group {
                scenario,
                cc,
                flows,
                reps: runs.len(),
                goodput,
                retr: stat(|r| r.retr_pct),
                rtt: stat(|r| r.rtt_ms),
                consumed: stat(|r| r.consumed_kbps),
                allowed: stat(|r| r.allowed_kbps),
                bound,
                of_bound,
                of_allowed: (a_sum > 0.0).then(|| g_sum / a_sum),
            }
        })
        .collect()
}

/// A published number: mean ± standard deviation, or min / mean / max.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Spread {
    /// Mean and standard deviation.
    Sd(f64, f64),
    /// Minimum, mean, maximum.
    Range(f64, f64, f64),
}

impl Spread {
    /// The mean.
    pub fn mean(self) -> f64 {
        match self {
            Self::Sd(mean, _) | Self::Range(_, mean, _) => mean,
        }
    }

    fn show(self) -> String {
        match self {
            Self::Sd(mean, sd) => format!("{mean} ± {sd}"),
            // The paper prints its ranges with two decimals (4.30, 4.49, 4.68).
            Self::Range(min, mean, max) => format!("{mean:.2} ({min:.2}–{max:.2})"),
        }
    }
}

/// What seed 003 reports for one (scenario, cc, flows) (§V-B, Table I, Fig 5).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Paper {
    /// Goodput, Mbit/s.
    pub goodput_mbps: Option<Spread>,
    /// Retransmissions, %.
    pub retr_pct: Option<Spread>,
    /// RTT, ms.
    pub rtt_ms: Option<Spread>,
    /// Allowed goodput (G_max), Mbit/s.
    pub allowed_mbps: Option<Spread>,
    /// The bound drawn in Fig 5 (or computed in the text for setup 0), Mbit/s.
    pub bound_mbps: Option<f64>,
    /// Why the paper has no number, where it says.
    pub note: Option<&'static str>,
}

/// Where the paper's numbers come from.
pub const PAPER_SOURCE: &str = "seed 003 §V-B, Table I, Fig 5";
/// The paper's Fig 5 bound under congestion ("ideal congestion control"), Mbit/s.
pub const PAPER_BOUND_CONGESTED_MBPS: f64 = 4.6;
/// The paper's no-CC single-flow goodput under unidirectional congestion, kbit/s.
pub const PAPER_NOCC_KBPS: f64 = 175.0;
/// The paper's no-CC retransmissions under unidirectional congestion, %.
pub const PAPER_NOCC_RETR_PCT: f64 = 24.4;

/// The paper's numbers for one (scenario, cc, flows); all `None` where it reports nothing.
/// The paper's "CC" is Algorithm 1, our [`Cc::Faithful`].
pub fn paper(scenario: Scenario, cc: Cc, flows: u32) -> Paper {
    use Scenario::{Bi, NoCongestion, Uni};
    let bound_mbps = Some(match scenario {
        NoCongestion => 7.36,
        Uni | Bi => PAPER_BOUND_CONGESTED_MBPS,
    });
    let base = Paper {
        bound_mbps,
        ..Paper::default()
    };
    match (scenario, cc, flows) {
        (NoCongestion, Cc::Fixed, 1) => Paper {
            goodput_mbps: Some(Spread::Sd(7.35, 0.01)),
            ..base
        },
        (Uni, Cc::Fixed, 1) => Paper {
            // Printed as "175 ± 0.013 kbit/s"; the deviation's unit is unclear.
            goodput_mbps: Some(Spread::Sd(PAPER_NOCC_KBPS / 1000.0, 0.013)),
            retr_pct: Some(Spread::Sd(PAPER_NOCC_RETR_PCT, 1.2)),
            rtt_ms: Some(Spread::Sd(44.5, 0.43)),
            ..base
        },
        (Uni, Cc::Faithful, 1) => Paper {
            goodput_mbps: Some(Spread::Sd(1.7, 0.04)),
            retr_pct: Some(Spread::Sd(1.9, 0.05)),
            rtt_ms: Some(Spread::Sd(42.49, 0.26)),
            ..base
        },
        (Bi, Cc::Faithful, 1) => Paper {
            goodput_mbps: Some(Spread::Sd(1.1, 0.06)),
            retr_pct: Some(Spread::Sd(1.87, 0.14)),
            rtt_ms: Some(Spread::Sd(70.75, 0.89)),
            ..base
        },
        (Bi, Cc::Fixed, 1) => Paper {
            note: Some("not reported: a 10 MB transfer did not finish in the measurement time"),
            ..base
        },
        (Bi, Cc::Faithful, 10) => Paper {
            goodput_mbps: Some(Spread::Range(3.59, 3.99, 4.16)),
            allowed_mbps: Some(Spread::Range(4.30, 4.49, 4.68)),
            ..base
        },
        _ => base,
    }
}

/// The (scenario, cc, flows) rows the paper reports something for, in report order.
const PAPER_ROWS: [(Scenario, Cc, u32); 6] = [
    (Scenario::NoCongestion, Cc::Fixed, 1),
    (Scenario::Uni, Cc::Fixed, 1),
    (Scenario::Uni, Cc::Faithful, 1),
    (Scenario::Bi, Cc::Fixed, 1),
    (Scenario::Bi, Cc::Faithful, 1),
    (Scenario::Bi, Cc::Faithful, 10),
];

/// The headline numbers of one congestion-control mode, all from the `uni` scenario.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Summary {
    /// The mode the `cc_*` values are for.
    pub cc: Cc,
    /// Single-flow goodput / bound.
    pub cc_1flow_of_bound: Option<f64>,
    /// Single-flow retransmissions, %.
    pub cc_retr_pct: Option<f64>,
    /// 10-flow goodput / allowed goodput.
    pub cc_10flow_of_allowed: Option<f64>,
    /// Single-flow goodput without congestion control, kbit/s.
    pub nocc_1flow_kbps: Option<f64>,
    /// Single-flow retransmissions without congestion control, %.
    pub nocc_retr_pct: Option<f64>,
}

impl Summary {
    /// The `TAG cc_1flow_of_bound=… … cc_algorithm=NAME` line; missing values are `n/a`.
    pub fn line(&self, tag: &str) -> String {
        format!(
            "{tag} cc_1flow_of_bound={} cc_retr_pct={} cc_10flow_of_allowed={} \
             nocc_1flow_kbps={} nocc_retr_pct={} cc_algorithm={}",
            opt(self.cc_1flow_of_bound, 3),
            opt(self.cc_retr_pct, 2),
            opt(self.cc_10flow_of_allowed, 3),
            opt(self.nocc_1flow_kbps, 0),
            opt(self.nocc_retr_pct, 2),
            self.cc.name()
        )
    }
}

/// The target thresholds for unidirectional congestion (docs/NORMALIZATION.md).
const TARGET_1FLOW_OF_BOUND: f64 = 0.80;
const TARGET_RETR_PCT: f64 = 1.0;
const TARGET_10FLOW_OF_ALLOWED: f64 = 0.95;
/// No-CC single-flow goodput below this share of the bound counts as the collapse (paper:
/// 175 kbit/s of 4.6 Mbit/s = 3.8%).
const COLLAPSE_OF_BOUND: f64 = 0.25;

/// An aggregated results file, ready to print.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// The file's metadata lines.
    pub meta: Vec<(String, String)>,
    /// Runs in the file.
    pub runs: usize,
    /// The groups, ordered by (scenario, flows, cc).
    pub groups: Vec<Group>,
}

impl Report {
    /// Aggregates parsed results.
    pub fn new(results: &Results) -> Self {
        Self {
            meta: results.meta.clone(),
            runs: results.runs.len(),
            groups: aggregate(&results.runs),
        }
    }

    /// The group of (scenario, cc, flows), if the file has runs for it.
    pub fn group(&self, scenario: Scenario, cc: Cc, flows: u32) -> Option<&Group> {
        self.groups
            .iter()
            .find(|g| g.scenario == scenario && g.cc == cc && g.flows == flows)
    }

    /// The modes that have at least one run, in report order.
    pub fn modes(&self) -> Vec<Cc> {
        Cc::ALL
            .into_iter()
            .filter(|&cc| self.groups.iter().any(|g| g.cc == cc))
            .collect()
    }

    /// The mode the `RESULT` line reports by default: `improved` if present, else `faithful`.
    pub fn default_result_cc(&self) -> Cc {
        if self.modes().contains(&Cc::Improved) {
            Cc::Improved
        } else {
            Cc::Faithful
        }
    }

    /// The headline numbers of `cc` (and of `fixed`) under unidirectional congestion.
    pub fn summary(&self, cc: Cc) -> Summary {
        let uni = |cc, flows| self.group(Scenario::Uni, cc, flows);
        let cc1 = uni(cc, 1);
        let nocc1 = uni(Cc::Fixed, 1);
        Summary {
            cc,
            cc_1flow_of_bound: cc1.and_then(|g| g.of_bound),
            cc_retr_pct: cc1.and_then(|g| g.retr).map(|s| s.mean),
            cc_10flow_of_allowed: uni(cc, 10).and_then(|g| g.of_allowed),
            nocc_1flow_kbps: nocc1.and_then(|g| g.goodput).map(|s| s.mean),
            nocc_retr_pct: nocc1.and_then(|g| g.retr).map(|s| s.mean),
        }
    }

    /// The Markdown fragment (headings start at `###`); target lines are for `result_cc` and,
    /// if it is another mode, also for `faithful`.
    pub fn markdown(&self, result_cc: Cc) -> String {
        let mut md = String::new();
        self.push_conditions(&mut md);
        self.push_table_i(&mut md);
        self.push_fig_5(&mut md);
        self.push_targets(&mut md, result_cc);
        md
    }

    fn push_conditions(&self, md: &mut String) {
        md.push_str("### Conditions\n\n");
        for (key, value) in &self.meta {
            if value.is_empty() {
                md.push_str(&format!("- {key}\n"));
            } else if matches!(key.as_str(), "command" | "commit") {
                md.push_str(&format!("- {key}: `{value}`\n"));
            } else {
                md.push_str(&format!("- {key}: {value}\n"));
            }
        }
        md.push_str(&format!(
            "- runs: {} in {} groups (scenario × CC × flows)\n\n",
            self.runs,
            self.groups.len()
        ));
        md.push_str(&format!(
            "Paper numbers: {PAPER_SOURCE}. The paper's \"CC\" is Algorithm 1, our `faithful`; \
             `improved` has no paper counterpart. Ours: mean over repetitions (min–max); \
             `fail` = no repetition measured it, `[n/N]` = only n of N did.\n\n"
        ));
    }

    /// The rows of both tables: every group in the file plus the paper's rows, ordered by
    /// (flows, cc, scenario) like the paper's Table I.
    fn rows(&self) -> Vec<(Scenario, Cc, u32)> {
        let mut rows: Vec<(u32, Cc, Scenario)> = self
            .groups
            .iter()
            .map(|g| (g.flows, g.cc, g.scenario))
            .chain(PAPER_ROWS.iter().map(|&(s, cc, f)| (f, cc, s)))
            .collect();
        rows.sort();
        rows.dedup();
        rows.into_iter().map(|(f, cc, s)| (s, cc, f)).collect()
    }

    fn push_table_i(&self, md: &mut String) {
        md.push_str("### Table I: retransmissions and RTT\n\n");
        let mut rows = Vec::new();
        for (scenario, cc, flows) in self.rows() {
            let group = self.group(scenario, cc, flows);
            let paper = paper(scenario, cc, flows);
            let reps = group.map_or(0, |g| g.reps);
            let paper_cell = |v: Option<Spread>, unit: &str| match (v, paper.note) {
                (Some(v), _) => format!("{}{unit}", v.show()),
                (None, Some(_)) => "not reported¹".to_owned(),
                (None, None) => "not reported".to_owned(),
            };
            rows.push(vec![
                cc.label().to_owned(),
                scenario.label().to_owned(),
                flows.to_string(),
                stat_cell(group.and_then(|g| g.retr), reps, 1.0, 2, " %"),
                paper_cell(paper.retr_pct, " %"),
                stat_cell(group.and_then(|g| g.rtt), reps, 1.0, 2, " ms"),
                paper_cell(paper.rtt_ms, " ms"),
                reps.to_string(),
            ]);
        }
        md.push_str(&crate::markdown_table(
            &[
                "CC",
                "Congestion",
                "Flows",
                "Retransmissions (ours)",
                "Paper",
                "RTT (ours)",
                "Paper",
                "Reps",
            ],
            &rows,
        ));
        md.push_str(
            "\n¹ Bidirectional congestion without CC: not reported, \"even the time required for \
             a transmission of 10 MB exceeded the time available for the measurement study\".\n\n",
        );
    }

    fn push_fig_5(&self, md: &mut String) {
        md.push_str("### Fig 5: goodput (Mbit/s)\n\n");
        let mut rows = Vec::new();
        for (scenario, cc, flows) in self.rows() {
            let group = self.group(scenario, cc, flows);
            let paper = paper(scenario, cc, flows);
            let reps = group.map_or(0, |g| g.reps);
            let paper_goodput = match (paper.goodput_mbps, paper.note) {
                (Some(v), _) if scenario == Scenario::Uni && cc == Cc::Fixed => {
                    format!("{}²", v.show())
                }
                (Some(v), _) => v.show(),
                (None, Some(_)) => "not reported¹".to_owned(),
                (None, None) => "not reported".to_owned(),
            };
            let paper_of_bound = match (paper.goodput_mbps, paper.bound_mbps) {
                (Some(g), Some(b)) => format!("{} of {b}", pct(g.mean() / b)),
                _ => "–".to_owned(),
            };
            let paper_of_allowed = match (paper.goodput_mbps, paper.allowed_mbps) {
                (Some(g), Some(a)) => format!("{} of {}", pct(g.mean() / a.mean()), a.show()),
                _ => "–".to_owned(),
            };
            let bound = group
                .and_then(|g| g.bound)
                .map_or_else(|| "n/a".to_owned(), |b| format!("{:.2}", b.mean / 1000.0));
            rows.push(vec![
                scenario.label().to_owned(),
                flows.to_string(),
                cc.label().to_owned(),
                stat_cell(group.and_then(|g| g.goodput), reps, 1e-3, 2, ""),
                bound,
                ratio_cell(group.and_then(|g| g.of_bound), reps),
                stat_cell(group.and_then(|g| g.allowed), reps, 1e-3, 2, ""),
                ratio_cell(group.and_then(|g| g.of_allowed), reps),
                paper_goodput,
                paper_of_bound,
                paper_of_allowed,
            ]);
        }
        md.push_str(&crate::markdown_table(
            &[
                "Congestion",
                "Flows",
                "CC",
                "Goodput (ours)",
                "Bound",
                "Of bound",
                "Allowed",
                "Of allowed",
                "Paper",
                "Paper of bound",
                "Paper of allowed",
            ],
            &rows,
        ));
        md.push_str(
            "\nBound: the scenario's goodput under ideal congestion control. Allowed: the goodput \
             the measured A→B tunnel rate allows, G_max = T_consumed × payload / wire bytes per \
             frame (the paper's 1318/1474).\n\
             ¹ Not reported, see Table I. ² Printed as \"175 ± 0.013 kbit/s\".\n\n",
        );
    }

    fn push_targets(&self, md: &mut String, result_cc: Cc) {
        md.push_str("### Targets (unidirectional congestion)\n\n");
        let main = self.summary(result_cc);
        let faithful = (result_cc != Cc::Faithful && self.modes().contains(&Cc::Faithful))
            .then(|| self.summary(Cc::Faithful));
        let other = |f: fn(&Summary) -> Option<f64>, show: fn(f64) -> String| {
            faithful.map_or_else(String::new, |s| {
                format!(
                    "; faithful {}",
                    f(&s).map_or_else(|| "n/a".to_owned(), show)
                )
            })
        };
        let name = result_cc.name();

        let line = verdict(
            main.cc_1flow_of_bound,
            |v| v >= TARGET_1FLOW_OF_BOUND,
            |v| format!("{:.1} points", (TARGET_1FLOW_OF_BOUND - v) * 100.0),
        );
        md.push_str(&format!(
            "- CC single-flow goodput ≥ 80% of the bound: {line} — {name} {}{}; paper {} \
             (1.7 of 4.6 Mbit/s).\n",
            opt_pct(main.cc_1flow_of_bound),
            other(|s| s.cc_1flow_of_bound, pct),
            pct(1.7 / PAPER_BOUND_CONGESTED_MBPS),
        ));

        let line = verdict(
            main.cc_retr_pct,
            |v| v <= TARGET_RETR_PCT,
            |v| format!("{:.2} points", v - TARGET_RETR_PCT),
        );
        md.push_str(&format!(
            "- CC retransmissions ≤ 1%: {line} — {name} {}{}; paper 1.9%.\n",
            opt_unit(main.cc_retr_pct, 2, "%"),
            other(|s| s.cc_retr_pct, |v| format!("{v:.2}%")),
        ));

        let line = verdict(
            main.cc_10flow_of_allowed,
            |v| v >= TARGET_10FLOW_OF_ALLOWED,
            |v| format!("{:.1} points", (TARGET_10FLOW_OF_ALLOWED - v) * 100.0),
        );
        md.push_str(&format!(
            "- CC 10 flows ≥ 95% of the allowed goodput: {line} — {name} {}{}; paper 89% \
             (bidirectional; 3.99 of 4.49 Mbit/s).\n",
            opt_pct(main.cc_10flow_of_allowed),
            other(|s| s.cc_10flow_of_allowed, pct),
        ));

        let nocc = self.group(Scenario::Uni, Cc::Fixed, 1);
        let nocc_of_bound = nocc.and_then(|g| g.of_bound);
        let line = match nocc_of_bound {
            None => "**n/a** (no measured fixed-rate single-flow run)".to_owned(),
            Some(v) if v < COLLAPSE_OF_BOUND => "**reproduced**".to_owned(),
            Some(_) => "**not reproduced**".to_owned(),
        };
        md.push_str(&format!(
            "- No-CC collapse (single-flow goodput below {} of the bound): {line} — {} kbit/s \
             ({} of the bound), {} retransmissions; paper {PAPER_NOCC_KBPS} kbit/s ({}), \
             {PAPER_NOCC_RETR_PCT}%.\n",
            pct(COLLAPSE_OF_BOUND),
            opt(main.nocc_1flow_kbps, 0),
            opt_pct(nocc_of_bound),
            opt_unit(main.nocc_retr_pct, 2, "%"),
            pct(PAPER_NOCC_KBPS / 1000.0 / PAPER_BOUND_CONGESTED_MBPS),
        ));
    }
}

/// `**met**`, `**missed** by …`, or `**n/a**`.
fn verdict(value: Option<f64>, ok: impl Fn(f64) -> bool, by: impl Fn(f64) -> String) -> String {
    match value {
        None => "**n/a**".to_owned(),
        Some(v) if ok(v) => "**met**".to_owned(),
        Some(v) => format!("**missed** by {}", by(v)),
    }
}

/// `mean (min–max) unit [n/reps]`, scaled; `fail` if no repetition measured it, `n/a` if
/// there are no runs.
fn stat_cell(stat: Option<Stat>, reps: usize, scale: f64, decimals: usize, unit: &str) -> String {
    let Some(s) = stat else {
        return if reps == 0 { "n/a" } else { "fail" }.to_owned();
    };
    let f = |v: f64| format!("{:.decimals$}", v * scale);
    let mut cell = f(s.mean);
    let (min, max) = (f(s.min), f(s.max));
    if min != max {
        cell = format!("{cell} ({min}–{max})");
    }
    cell.push_str(unit);
    if s.n < reps {
        cell = format!("{cell} [{}/{reps}]", s.n);
    }
    cell
}

fn ratio_cell(ratio: Option<f64>, reps: usize) -> String {
    match (ratio, reps) {
        (Some(r), _) => pct(r),
        (None, 0) => "n/a".to_owned(),
        (None, _) => "fail".to_owned(),
    }
}

/// A fraction as a percentage with one decimal.
fn pct(fraction: f64) -> String {
    format!("{:.1}%", fraction * 100.0)
}

fn opt_pct(v: Option<f64>) -> String {
    v.map_or_else(|| "n/a".to_owned(), pct)
}

fn opt_unit(v: Option<f64>, decimals: usize, unit: &str) -> String {
    v.map_or_else(|| "n/a".to_owned(), |v| format!("{v:.decimals$}{unit}"))
}

/// `v` with `decimals` decimals, or `n/a`.
fn opt(v: Option<f64>, decimals: usize) -> String {
    opt_unit(v, decimals, "")
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = include_str!("sample.tsv");
    const HEADER: &str = "scenario\tcc\tflows\trep\tgoodput_kbps\tretr_pct\trtt_ms\t\
                          consumed_kbps\tallowed_kbps\tbound_kbps";

    fn file(lines: &[&str]) -> String {
        let mut s = format!("# reps: 3\n\n{HEADER}\n");
        for l in lines {
            s.push_str(l);
            s.push('\n');
        }
        s
    }

    fn err(lines: &[&str]) -> String {
        parse(&file(lines)).unwrap_err().to_string()
    }

    #[test]
    fn parses_sample() {
        let r = parse(SAMPLE).unwrap();
        assert_eq!(r.runs.len(), 54);
        assert_eq!(r.meta[0], ("date".into(), "2026-05-01 12:00 UTC".into()));
        assert!(
            r.meta
                .contains(&("payload_per_frame".into(), "1340".into()))
        );
        let first = r.runs[0];
        assert_eq!(first.scenario, Scenario::NoCongestion);
        assert_eq!((first.cc, first.flows, first.rep), (Cc::Fixed, 1, 1));
        assert_eq!(first.goodput_kbps, 7273.8);
        assert_eq!(first.bound_kbps, 7418.2);
    }

    #[test]
    fn parses_metadata() {
        let text = "# reps: 3; duration_s: 20\n# kernel: 6.1; TCP cubic\n# note\n\
                    none\tfixed\t1\t1\t1\t0\t1\t1\t1\t1\n";
        let meta = parse(text).unwrap().meta;
        let pairs: Vec<(&str, &str)> = meta.iter().map(|(k, v)| (&k[..], &v[..])).collect();
        assert_eq!(
            pairs,
            [
                ("reps", "3"),
                ("duration_s", "20"),
                ("kernel", "6.1; TCP cubic"),
                ("note", ""),
            ]
        );
    }

    #[test]
    fn parses_nan_crlf_and_spaces() {
        let text = file(&["uni\tfixed\t1\t1\tnan\tNaN\t 44.5 \t8000\t7200\t4545\r"]);
        let run = parse(&text).unwrap().runs[0];
        assert!(run.goodput_kbps.is_nan() && run.retr_pct.is_nan());
        assert_eq!(run.rtt_ms, 44.5);
        assert_eq!(run.bound_kbps, 4545.0);
    }

    #[test]
    fn rejects_truncated_line() {
        // Line numbers count the metadata, blank and header lines.
        assert_eq!(
            err(&["uni\tfixed\t1\t1\t190\t24"]),
            "4: expected 10 tab-separated fields (scenario cc flows rep goodput_kbps retr_pct \
             rtt_ms consumed_kbps allowed_kbps bound_kbps), found 6"
        );
    }

    #[test]
    fn rejects_extra_field() {
        let e = err(&[
            "uni\tfixed\t1\t1\t190\t24\t44\t8000\t7200\t4545",
            "uni\tfixed\t1\t2\t190\t24\t44\t8000\t7200\t4545\t1",
        ]);
        assert!(e.starts_with("5: expected 10 tab-separated fields"), "{e}");
        assert!(e.ends_with("found 11"), "{e}");
    }

    #[test]
    fn rejects_garbage() {
        let cases = [
            (
                "uni fixed 1 1 190 24 44 8000 7200 4545",
                "4: expected 10 tab-separated fields (scenario cc flows rep goodput_kbps retr_pct \
             rtt_ms consumed_kbps allowed_kbps bound_kbps), found 1",
            ),
            (
                "uni\tfixed\t1\t1\t19O\t24\t44\t8000\t7200\t4545",
                "4: field 5 (goodput_kbps): `19O` is not a number (or `nan`)",
            ),
            (
                "uni\tfixed\t1\t1\t190\t-1\t44\t8000\t7200\t4545",
                "4: field 6 (retr_pct): `-1` is not a finite, non-negative number",
            ),
            (
                "uni\tfixed\t1\t1\t190\t24\tinf\t8000\t7200\t4545",
                "4: field 7 (rtt_ms): `inf` is not a finite, non-negative number",
            ),
            (
                "tri\tfixed\t1\t1\t190\t24\t44\t8000\t7200\t4545",
                "4: field 1 (scenario): unknown scenario `tri` (expected none, uni or bi)",
            ),
            (
                "uni\tcubic\t1\t1\t190\t24\t44\t8000\t7200\t4545",
                "4: field 2 (cc): unknown mode `cubic` (expected fixed, faithful or improved)",
            ),
            (
                "uni\tfixed\t0\t1\t190\t24\t44\t8000\t7200\t4545",
                "4: field 3 (flows): `0` is not a positive integer",
            ),
            (
                "uni\tfixed\t1\t1.5\t190\t24\t44\t8000\t7200\t4545",
                "4: field 4 (rep): `1.5` is not a positive integer",
            ),
        ];
        for (line, want) in cases {
            assert_eq!(err(&[line]), want, "{line:?}");
        }
        assert_eq!(err(&["\u{0}\u{ff}", "x"]).split(':').next(), Some("4"));
    }

    #[test]
    fn rejects_duplicates_and_empty() {
        assert_eq!(
            err(&[
                "uni\tfixed\t1\t1\t190\t24\t44\t8000\t7200\t4545",
                "uni\tfixed\t1\t1\t191\t24\t44\t8000\t7200\t4545",
            ]),
            "5: run uni fixed 1 flow(s) rep 1 repeats line 4"
        );
        assert_eq!(err(&[]), "no runs (only metadata, header or blank lines)");
        assert_eq!(parse("").unwrap_err().line, None);
    }

    #[test]
    fn stat_skips_nan() {
        assert_eq!(Stat::of([f64::NAN, f64::NAN]), None);
        assert_eq!(Stat::of([]), None);
        assert_eq!(
            Stat::of([2.0, f64::NAN, 4.0, 3.0]),
            Some(Stat {
                mean: 3.0,
                min: 2.0,
                max: 4.0,
                n: 3
            })
        );
    }

    #[test]
    fn aggregates_groups() {
        let text = file(&[
            "uni\tfaithful\t10\t1\t3600\t2\t40\t4800\t4000\t4500",
            "uni\tfaithful\t10\t2\t4000\t3\t44\t5200\t5000\t4500",
            "uni\tfaithful\t10\t3\tnan\tnan\t48\t5000\t4500\t4500",
            "uni\tfaithful\t1\t1\t1800\t1.5\t40\t4800\t4000\t4500",
            "bi\tfixed\t1\t1\tnan\tnan\tnan\t8000\t7000\t4500",
        ]);
        let report = Report::new(&parse(&text).unwrap());
        let keys: Vec<_> = report
            .groups
            .iter()
            .map(|g| (g.scenario, g.flows, g.cc))
            .collect();
        assert_eq!(
            keys,
            [
                (Scenario::Uni, 1, Cc::Faithful),
                (Scenario::Uni, 10, Cc::Faithful),
                (Scenario::Bi, 1, Cc::Fixed),
            ]
        );
        let g = report.group(Scenario::Uni, Cc::Faithful, 10).unwrap();
        assert_eq!(g.reps, 3);
        let goodput = g.goodput.unwrap();
        assert_eq!(
            (goodput.mean, goodput.min, goodput.max, goodput.n),
            (3800.0, 3600.0, 4000.0, 2)
        );
        assert_eq!(g.rtt.unwrap().n, 3);
        assert_eq!(g.rtt.unwrap().mean, 44.0);
        // Goodput and allowed over the two reps that measured both: 7600 / 9000.
        assert!((g.of_allowed.unwrap() - 7600.0 / 9000.0).abs() < 1e-12);
        assert!((g.of_bound.unwrap() - 3800.0 / 4500.0).abs() < 1e-12);
        let failed = report.group(Scenario::Bi, Cc::Fixed, 1).unwrap();
        assert_eq!(
            (failed.goodput, failed.of_bound, failed.of_allowed),
            (None, None, None)
        );
        assert_eq!(report.modes(), [Cc::Fixed, Cc::Faithful]);
        assert_eq!(report.default_result_cc(), Cc::Faithful);
        // No fixed-rate uni runs and no improved runs: n/a, never a panic.
        assert_eq!(
            report.summary(Cc::Faithful).line("RESULT"),
            "RESULT cc_1flow_of_bound=0.400 cc_retr_pct=1.50 cc_10flow_of_allowed=0.844 \
             nocc_1flow_kbps=n/a nocc_retr_pct=n/a cc_algorithm=faithful"
        );
        assert_eq!(
            report.summary(Cc::Improved).line("RESULT"),
            "RESULT cc_1flow_of_bound=n/a cc_retr_pct=n/a cc_10flow_of_allowed=n/a \
             nocc_1flow_kbps=n/a nocc_retr_pct=n/a cc_algorithm=improved"
        );
    }

    #[test]
    fn sample_summary_and_markdown() {
        let report = Report::new(&parse(SAMPLE).unwrap());
        assert_eq!(report.groups.len(), 18);
        assert_eq!(report.default_result_cc(), Cc::Improved);
        assert_eq!(
            report.summary(Cc::Improved).line("RESULT"),
            "RESULT cc_1flow_of_bound=0.857 cc_retr_pct=0.56 cc_10flow_of_allowed=0.969 \
             nocc_1flow_kbps=193 nocc_retr_pct=23.35 cc_algorithm=improved"
        );
        let md = report.markdown(Cc::Improved);
        assert!(
            md.starts_with("### Conditions\n\n- date: 2026-05-01 12:00 UTC\n"),
            "{md}"
        );
        assert!(
            md.contains("\n- command: `testbed/congestion.sh`\n"),
            "{md}"
        );
        assert!(!md.contains("\n# ") && !md.contains("\n## "), "{md}");
        // Table I: the paper's no-CC row, ours beside it.
        assert!(
            md.contains(
                "| fixed rate (no CC) | unidirectional | 1 | 23.35 (21.82–24.44) % | 24.4 ± 1.2 % \
                 | 43.77 (42.85–45.23) ms | 44.5 ± 0.43 ms | 3 |"
            ),
            "{md}"
        );
        // A failed group and a partly measured one.
        assert!(
            md.contains("| bidirectional | 1 | fixed rate (no CC) | fail | 4.55 | fail |"),
            "{md}"
        );
        assert!(
            md.contains("| fixed rate (no CC) | bidirectional | 1 | fail | not reported¹ | fail |"),
            "{md}"
        );
        assert!(md.contains("| 39.09 (38.92–39.27) ms [2/3] |"), "{md}");
        // Fig 5: the paper's 10-flow row with its allowed goodput.
        assert!(
            md.contains("| 3.99 (3.59–4.16) | 86.7% of 4.6 | 88.9% of 4.49 (4.30–4.68) |"),
            "{md}"
        );
        assert!(md.contains("- CC single-flow goodput ≥ 80% of the bound: **met** — improved 85.7%; faithful 41.0%"), "{md}");
        assert!(md.contains("- CC retransmissions ≤ 1%: **met**"), "{md}");
        assert!(
            md.contains(
                "- No-CC collapse (single-flow goodput below 25.0% of the bound): **reproduced**"
            ),
            "{md}"
        );
        // The faithful run misses the targets, and says by how much.
        let md = report.markdown(Cc::Faithful);
        assert!(
            md.contains("**missed** by 39.0 points — faithful 41.0%;"),
            "{md}"
        );
        assert!(
            md.contains("retransmissions ≤ 1%: **missed** by 0.73 points"),
            "{md}"
        );
    }
}
