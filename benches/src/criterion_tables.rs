//! Criterion's saved estimates as Markdown tables: the library side of `--bin criterion_tables`,
//! which `benches/run-criterion.sh` runs after the benches.
//!
//! Criterion saves every benchmark it ran under `<criterion home>/<id>/new/`:
//! `benchmark.json` (group, function, value, throughput) and `estimates.json` (point estimates
//! and bootstrap confidence intervals, in ns per iteration). [`load`] reads every such pair,
//! [`render`] prints one table per bench file of this crate ([`FILES`]), and
//! [`replace_between_markers`] puts the result into BENCHMARKS.md between [`BEGIN`] and
//! [`END`].
//!
//! Criterion does not record which bench binary a group came from, so [`FILES`] lists each bench
//! file's groups and the reference rows its ratio columns divide by; a group no file lists is
//! shown under "Other groups" rather than dropped.

use std::path::Path;

use serde::Deserialize;

use crate::{fmt_ratio, markdown_table};

/// The line that opens the generated section in BENCHMARKS.md.
pub const BEGIN: &str = "<!-- criterion-tables:begin -->";
/// The line that closes it.
pub const END: &str = "<!-- criterion-tables:end -->";

/// What one iteration processes, as criterion's `Throughput` saves it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
pub enum Throughput {
    /// Bytes (criterion reports binary multiples).
    Bytes(u64),
    /// Bytes (criterion reports decimal multiples).
    BytesDecimal(u64),
    /// Elements of any kind.
    Elements(u64),
}

impl Throughput {
    /// The count, and whether it counts bytes.
    fn units(self) -> (u64, bool) {
        match self {
            Self::Bytes(n) | Self::BytesDecimal(n) => (n, true),
            Self::Elements(n) => (n, false),
        }
    }
}

/// One benchmark's result.
#[derive(Clone, Debug, PartialEq)]
pub struct Bench {
    /// Criterion group.
    pub group: String,
    /// The function id without a trailing size, or the group for `group/size` ids.
    pub label: String,
    /// The message size in bytes, from the value (`group/function/1280`) or from a function id
    /// that ends in one (`seal/aes128-gcm/64`).
    pub size: Option<u64>,
    /// The throughput the bench declared.
    pub throughput: Option<Throughput>,
    /// Median time per iteration, ns.
    pub median_ns: f64,
    /// Lower bound of the median's confidence interval, ns.
    pub lower_ns: f64,
    /// Upper bound of the median's confidence interval, ns.
    pub upper_ns: f64,
    /// The interval's confidence level (0.95 unless the bench changed it).
    pub confidence: f64,
}

#[derive(Deserialize)]
struct BenchmarkJson {
    group_id: String,
    function_id: Option<String>,
    value_str: Option<String>,
    throughput: Option<Throughput>,
}

#[derive(Deserialize)]
struct EstimatesJson {
    median: EstimateJson,
}

#[derive(Deserialize)]
struct EstimateJson {
    confidence_interval: IntervalJson,
    point_estimate: f64,
}

#[derive(Deserialize)]
struct IntervalJson {
    confidence_level: f64,
    lower_bound: f64,
    upper_bound: f64,
}

/// Splits criterion's id parts into a row label and a size.
pub fn split_id(group: &str, function: Option<&str>, value: Option<&str>) -> (String, Option<u64>) {
    match (function, value) {
        (f, Some(v)) => match v.parse() {
            Ok(size) => (f.unwrap_or(group).to_owned(), Some(size)),
            Err(_) => (f.map_or_else(|| v.to_owned(), |f| format!("{f}/{v}")), None),
        },
        (Some(f), None) => match f.rsplit_once('/') {
            Some((label, tail)) if !label.is_empty() => match tail.parse() {
                Ok(size) => (label.to_owned(), Some(size)),
                Err(_) => (f.to_owned(), None),
            },
            _ => (f.to_owned(), None),
        },
        (None, None) => (group.to_owned(), None),
    }
}

/// Every benchmark under `dir` (a criterion home, e.g. `target/criterion`): each directory
/// named `new` that holds `benchmark.json` and `estimates.json`. Sorted by group, label, size.
pub fn load(dir: &Path) -> Result<Vec<Bench>, String> {
    let mut out = Vec::new();
    walk(dir, &mut out)?;
    out.sort_by(|a, b| {
        (&a.group, &a.label, a.size)
            .cmp(&(&b.group, &b.label, b.size))
            .then(a.median_ns.total_cmp(&b.median_ns))
    });
    Ok(out)
}

fn walk(dir: &Path, out: &mut Vec<Bench>) -> Result<(), String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut dirs = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| format!("{}: {e}", dir.display()))?;
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            dirs.push(entry.path());
        }
    }
    for path in dirs {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name == "new" {
            if path.join("benchmark.json").is_file() {
                out.push(read_bench(&path)?);
            }
        } else if name != "report" && name != "base" {
            // `report` holds criterion's HTML, `base` the previous run (and any other
            // baseline name holds no `new` directory), so only `new` results are read.
            walk(&path, out)?;
        }
    }
    Ok(())
}

fn read_bench(new_dir: &Path) -> Result<Bench, String> {
    let read = |name: &str| {
        let path = new_dir.join(name);
        std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))
    };
    let id: BenchmarkJson = serde_json::from_str(&read("benchmark.json")?)
        .map_err(|e| format!("{}/benchmark.json: {e}", new_dir.display()))?;
    let est: EstimatesJson = serde_json::from_str(&read("estimates.json")?)
        .map_err(|e| format!("{}/estimates.json: {e}", new_dir.display()))?;
    let (label, size) = split_id(
        &id.group_id,
        id.function_id.as_deref(),
        id.value_str.as_deref(),
    );
    let m = est.median;
    Ok(Bench {
        group: id.group_id,
        label,
        size,
        throughput: id.throughput,
        median_ns: m.point_estimate,
        lower_ns: m.confidence_interval.lower_bound,
        upper_ns: m.confidence_interval.upper_bound,
        confidence: m.confidence_interval.confidence_level,
    })
}

/// The row a ratio column divides by, at the same size as the row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RefKey {
    /// Its group; `None` is the row's own group.
    pub group: Option<&'static str>,
    /// Its label.
    pub label: &'static str,
}

/// A ratio column: a row's time per byte (or element, or iteration) over its reference's.
#[derive(Clone, Copy, Debug)]
pub struct Reference {
    /// The column header.
    pub column: &'static str,
    /// The reference of a row `(group, label)`; `None` leaves the cell empty.
    pub pick: fn(&str, &str) -> Option<RefKey>,
}

/// One bench file of `benches/benches/`: its criterion groups and ratio columns.
#[derive(Clone, Copy, Debug)]
pub struct FileSpec {
    /// The bench target (`cargo bench --bench NAME`).
    pub bench: &'static str,
    /// Its criterion groups, in display order.
    pub groups: &'static [&'static str],
    /// Its ratio columns.
    pub refs: &'static [Reference],
}

/// The bench files, in the order their tables appear.
pub const FILES: &[FileSpec] = &[
    FileSpec {
        bench: "scramble",
        groups: &["scramble"],
        refs: &[
            Reference {
                column: "time / AES-128-GCM seal",
                pick: |_, _| {
                    Some(RefKey {
                        group: None,
                        label: "aes128gcm_seal_ring",
                    })
                },
            },
            Reference {
                column: "time / memcpy",
                pick: |_, _| {
                    Some(RefKey {
                        group: None,
                        label: "memcpy",
                    })
                },
            },
        ],
    },
    FileSpec {
        bench: "primitives",
        groups: &[
            "memcpy",
            "des-ecb",
            "3des-ecb",
            "aes-128-ecb",
            "aes-192-ecb",
            "aes-256-ecb",
            "blowfish-cbc",
            "hmac-sha1",
            "ring-aes-128-gcm-seal",
            "ring-aes-256-gcm-seal",
            "ring-chacha20-poly1305-seal",
        ],
        refs: &[
            Reference {
                column: "time / AES-128-GCM seal",
                pick: |_, _| {
                    Some(RefKey {
                        group: Some("ring-aes-128-gcm-seal"),
                        label: "ring-aes-128-gcm-seal",
                    })
                },
            },
            Reference {
                column: "time / memcpy",
                pick: |_, _| {
                    Some(RefKey {
                        group: Some("memcpy"),
                        label: "memcpy",
                    })
                },
            },
        ],
    },
    FileSpec {
        bench: "seal_open",
        groups: &["seal", "open"],
        refs: &[Reference {
            column: "time / aes128-gcm",
            pick: |_, _| {
                Some(RefKey {
                    group: None,
                    label: "aes128-gcm",
                })
            },
        }],
    },
    FileSpec {
        bench: "blowfish",
        groups: &["blowfish-cbc-1496", "psp-bf-cbc-hmac-sha1-1500"],
        refs: &[Reference {
            column: "time / before",
            pick: blowfish_before,
        }],
    },
    FileSpec {
        bench: "handshake",
        groups: &["handshake"],
        refs: &[Reference {
            column: "time / plain DH",
            pick: |_, _| {
                Some(RefKey {
                    group: None,
                    label: "plain_x25519_dh",
                })
            },
        }],
    },
    FileSpec {
        bench: "replay",
        groups: &["replay"],
        refs: &[Reference {
            column: "time / in order",
            pick: |_, _| {
                Some(RefKey {
                    group: None,
                    label: "in_order_1024",
                })
            },
        }],
    },
];

/// Blowfish's "before": RustCrypto's CBC loop for the cipher rows (encrypt or decrypt), the
/// model of the old seal (and seal+open) for the PSP rows; `open` alone has no counterpart.
fn blowfish_before(group: &str, label: &str) -> Option<RefKey> {
    let label = match (group, label) {
        ("blowfish-cbc-1496", l) if l.contains("decrypt") => "rustcrypto-decrypt",
        ("blowfish-cbc-1496", _) => "rustcrypto-encrypt",
        (_, "open") => return None,
        (_, l) if l.contains("open") => "seal+open-before",
        _ => "seal-before",
    };
    Some(RefKey { group: None, label })
}

/// A bench file's wall time in one run, as `benches/run-criterion.sh` records it.
#[derive(Clone, Debug, PartialEq)]
pub struct FileTime {
    /// The bench target, or `build` for the build before them.
    pub name: String,
    /// Wall time, seconds.
    pub seconds: f64,
    /// The 1-minute load average before and after, from `/proc/loadavg`.
    pub load: Option<(f64, f64)>,
}

/// Parses the durations file: one `NAME SECONDS [LOAD_BEFORE LOAD_AFTER]` per line
/// (whitespace-separated; `#` comments and blank lines are skipped).
pub fn parse_durations(text: &str) -> Result<Vec<FileTime>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let f: Vec<&str> = line.split_whitespace().collect();
        let num = |s: &str| {
            s.parse::<f64>()
                .map_err(|_| format!("durations line {}: `{s}` is not a number", i + 1))
        };
        let (name, seconds, load) = match f.as_slice() {
            [name, s] => (*name, num(s)?, None),
            [name, s, a, b] => (*name, num(s)?, Some((num(a)?, num(b)?))),
            _ => {
                return Err(format!(
                    "durations line {}: expected `NAME SECONDS [LOAD_BEFORE LOAD_AFTER]`",
                    i + 1
                ));
            }
        };
        out.push(FileTime {
            name: name.to_owned(),
            seconds,
            load,
        });
    }
    Ok(out)
}

/// What the header of the generated section says about the run.
#[derive(Clone, Debug, PartialEq)]
pub struct RunInfo {
    /// CPU description and core count.
    pub machine: String,
    /// `rustc --version`.
    pub rustc: String,
    /// `YYYY-MM-DD` (UTC).
    pub date: String,
    /// `full` or `quick`.
    pub mode: String,
    /// The command that produced the run.
    pub command: String,
    /// Wall times of the build and of each bench file.
    pub durations: Vec<FileTime>,
}

/// Formats ns with a unit (ns, µs, ms, s) and 4 significant digits.
pub fn fmt_time(ns: f64) -> String {
    let (scale, unit) = time_unit(ns);
    format!("{} {unit}", fmt_sig4(ns / scale))
}

fn time_unit(ns: f64) -> (f64, &'static str) {
    let a = ns.abs();
    if a < 1e3 {
        (1.0, "ns")
    } else if a < 1e6 {
        (1e3, "µs")
    } else if a < 1e9 {
        (1e6, "ms")
    } else {
        (1e9, "s")
    }
}

fn fmt_sig4(v: f64) -> String {
    if !v.is_finite() {
        return "n/a".to_owned();
    }
    let a = v.abs();
    if a >= 1000.0 {
        format!("{v:.0}")
    } else if a >= 100.0 {
        format!("{v:.1}")
    } else if a >= 10.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// A confidence interval in the unit of its median: `2.849–2.890 ns`.
fn fmt_interval(b: &Bench) -> String {
    let (scale, unit) = time_unit(b.median_ns);
    format!(
        "{}–{} {unit}",
        fmt_sig4(b.lower_ns / scale),
        fmt_sig4(b.upper_ns / scale)
    )
}

/// Throughput at the median: GB/s (10^9 B/s) for bytes, Melem/s for elements.
fn fmt_throughput(b: &Bench) -> String {
    match b.throughput.map(Throughput::units) {
        Some((n, true)) => format!("{} GB/s", fmt_ratio(n as f64 / b.median_ns)),
        Some((n, false)) => format!("{} Melem/s", fmt_ratio(n as f64 / b.median_ns * 1e3)),
        None => String::new(),
    }
}

/// Formats seconds as `42 s` or `2 min 05 s`.
pub fn fmt_seconds(s: f64) -> String {
    if !s.is_finite() || s < 0.0 {
        return "n/a".to_owned();
    }
    if s < 10.0 {
        return format!("{s:.1} s");
    }
    let total = s.round() as u64;
    if total < 60 {
        format!("{total} s")
    } else {
        format!("{} min {:02} s", total / 60, total % 60)
    }
}

/// `row`'s time per unit of throughput over `reference`'s: per byte (or element) when both
/// declare the same kind of throughput, else per iteration.
fn ratio(row: &Bench, reference: &Bench) -> f64 {
    match (
        row.throughput.map(Throughput::units),
        reference.throughput.map(Throughput::units),
    ) {
        (Some((n, kind)), Some((m, ref_kind))) if kind == ref_kind && n > 0 && m > 0 => {
            (row.median_ns / n as f64) / (reference.median_ns / m as f64)
        }
        _ => row.median_ns / reference.median_ns,
    }
}

fn resolve(key: RefKey, row: &Bench) -> (&str, &'static str) {
    (key.group.unwrap_or(&row.group), key.label)
}

/// One bench file's table (rows: by size, then group, then reference rows first, then label).
fn file_table(spec: &FileSpec, rows: &[&Bench]) -> String {
    let group_rank = |b: &Bench| spec.groups.iter().position(|g| *g == b.group);
    let ref_rank = |b: &Bench| {
        spec.refs
            .iter()
            .position(|r| {
                (r.pick)(&b.group, &b.label)
                    .is_some_and(|k| resolve(k, b) == (b.group.as_str(), b.label.as_str()))
            })
            .unwrap_or(spec.refs.len())
    };
    let mut rows = rows.to_vec();
    rows.sort_by(|a, b| {
        (a.size, group_rank(a), ref_rank(a), &a.label).cmp(&(
            b.size,
            group_rank(b),
            ref_rank(b),
            &b.label,
        ))
    });
    let has_size = rows.iter().any(|b| b.size.is_some());
    let has_thrpt = rows.iter().any(|b| b.throughput.is_some());
    let confidence = rows.first().map_or(0.95, |b| b.confidence);
    let ci_header = format!(
        "{} % CI",
        fmt_ratio(confidence * 100.0).trim_end_matches(".0")
    );
    let mut header = vec!["benchmark"];
    if has_size {
        header.push("size (B)");
    }
    header.extend(["median", ci_header.as_str()]);
    if has_thrpt {
        header.push("throughput");
    }
    header.extend(spec.refs.iter().map(|r| r.column));
    let table: Vec<Vec<String>> = rows
        .iter()
        .map(|b| {
            let name = if b.label == b.group {
                b.group.clone()
            } else {
                format!("{}/{}", b.group, b.label)
            };
            let mut cells = vec![name];
            if has_size {
                cells.push(b.size.map(|s| s.to_string()).unwrap_or_default());
            }
            cells.extend([fmt_time(b.median_ns), fmt_interval(b)]);
            if has_thrpt {
                cells.push(fmt_throughput(b));
            }
            for r in spec.refs {
                let reference = (r.pick)(&b.group, &b.label).and_then(|k| {
                    let (group, label) = resolve(k, b);
                    rows.iter()
                        .find(|x| x.group == group && x.label == label && x.size == b.size)
                });
                cells.push(reference.map_or_else(String::new, |x| fmt_ratio(ratio(b, x))));
            }
            cells
        })
        .collect();
    markdown_table(&header, &table)
}

/// The generated section: the header, then one table per bench file with results, then any
/// group no bench file lists.
pub fn render(benches: &[Bench], info: &RunInfo) -> String {
    let mut out = String::new();
    let quick = if info.mode == "quick" {
        " (a smoke run: the numbers are meaningless)"
    } else {
        ""
    };
    out.push_str(&format!(
        "**Machine:** {} | **rustc:** {} | **date:** {} | **mode:** {}{quick}\n\n\
         **Command:** `{}`\n",
        info.machine, info.rustc, info.date, info.mode, info.command
    ));
    let seconds = |name: &str| info.durations.iter().find(|d| d.name == name);
    let benches_total: f64 = info
        .durations
        .iter()
        .filter(|d| d.name != "build")
        .map(|d| d.seconds)
        .sum();
    if !info.durations.is_empty() {
        out.push_str(&format!(
            "\n**Wall time:** {} for the benches",
            fmt_seconds(benches_total)
        ));
        if let Some(build) = seconds("build") {
            out.push_str(&format!(
                ", {} for the build before them",
                fmt_seconds(build.seconds)
            ));
        }
        out.push_str(".\n");
    }
    out.push_str(
        "\nMedian time per iteration and its bootstrap confidence interval (criterion's \
         `estimates.json`); throughput is the bench's `Throughput` at the median \
         (GB/s = 10^9 B/s); a ratio is the row's time per byte (or per iteration, without a \
         throughput) over the reference row's at the same size, in this run.\n",
    );
    let mut listed = vec![false; benches.len()];
    for spec in FILES {
        let rows: Vec<&Bench> = benches
            .iter()
            .zip(listed.iter_mut())
            .filter(|(b, _)| spec.groups.contains(&b.group.as_str()))
            .map(|(b, seen)| {
                *seen = true;
                b
            })
            .collect();
        if rows.is_empty() {
            continue;
        }
        out.push_str(&format!(
            "\n### `--bench {}`: {} benchmark{}",
            spec.bench,
            rows.len(),
            if rows.len() == 1 { "" } else { "s" }
        ));
        if let Some(d) = seconds(spec.bench) {
            out.push_str(&format!(", {}", fmt_seconds(d.seconds)));
            if let Some((before, after)) = d.load {
                out.push_str(&format!(" (load average {before:.2} → {after:.2})"));
            }
        }
        out.push_str("\n\n");
        out.push_str(&file_table(spec, &rows));
    }
    let others: Vec<&Bench> = benches
        .iter()
        .zip(&listed)
        .filter(|(_, seen)| !**seen)
        .map(|(b, _)| b)
        .collect();
    if !others.is_empty() {
        out.push_str("\n### Other groups (no bench file in `benches/src/criterion_tables.rs` lists them)\n\n");
        let spec = FileSpec {
            bench: "",
            groups: &[],
            refs: &[],
        };
        out.push_str(&file_table(&spec, &others));
    }
    out
}

/// Replaces what lies between the [`BEGIN`] and [`END`] lines of `doc` with `body`, keeping
/// the marker lines and everything outside them.
pub fn replace_between_markers(doc: &str, body: &str) -> Result<String, String> {
    let find = |marker: &str| {
        let mut at = None;
        let mut offset = 0;
        for line in doc.split_inclusive('\n') {
            if line.trim_end() == marker {
                if at.is_some() {
                    return Err(format!("`{marker}` appears more than once"));
                }
                at = Some((offset, offset + line.len()));
            }
            offset += line.len();
        }
        at.ok_or_else(|| format!("no line `{marker}`"))
    };
    let (_, body_start) = find(BEGIN)?;
    let (body_end, _) = find(END)?;
    if body_end < body_start {
        return Err(format!("`{END}` comes before `{BEGIN}`"));
    }
    let mut out = String::with_capacity(doc.len() + body.len());
    out.push_str(&doc[..body_start]);
    if !doc[..body_start].ends_with('\n') {
        out.push('\n');
    }
    out.push_str(body);
    if !body.is_empty() && !body.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(&doc[body_end..]);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn fixture() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/criterion")
    }

    fn info() -> RunInfo {
        RunInfo {
            machine: "AMD EPYC (family 25, model 1; AVX2), 2 cores".to_owned(),
            rustc: "rustc 1.95.0 (59807616e 2026-04-14)".to_owned(),
            date: "2026-12-01".to_owned(),
            mode: "full".to_owned(),
            command: "benches/run-criterion.sh --write".to_owned(),
            durations: parse_durations(
                "# name seconds load_before load_after\nbuild 330.4\nscramble 101.2 0.10 0.95\n\
                 seal_open 9.5\n",
            )
            .expect("valid durations"),
        }
    }

    #[test]
    fn split_ids() {
        assert_eq!(
            split_id("des-ecb", None, Some("64")),
            ("des-ecb".into(), Some(64))
        );
        assert_eq!(
            split_id("scramble", Some("memcpy"), Some("1280")),
            ("memcpy".into(), Some(1280))
        );
        assert_eq!(
            split_id("seal", Some("aes128-gcm/9000"), None),
            ("aes128-gcm".into(), Some(9000))
        );
        assert_eq!(
            split_id("handshake", Some("sep_single_path"), None),
            ("sep_single_path".into(), None)
        );
        assert_eq!(
            split_id("g", Some("a/b"), None),
            ("a/b".into(), None),
            "a non-numeric tail stays in the label"
        );
        assert_eq!(split_id("g", Some("f"), Some("x")), ("f/x".into(), None));
        assert_eq!(split_id("g", None, None), ("g".into(), None));
    }

    #[test]
    fn formats_times_and_seconds() {
        assert_eq!(fmt_time(2.8645), "2.865 ns");
        assert_eq!(fmt_time(197.21), "197.2 ns");
        assert_eq!(fmt_time(25_652.0), "25.65 µs");
        assert_eq!(fmt_time(353_620.0), "353.6 µs");
        assert_eq!(fmt_time(2.5e6), "2.500 ms");
        assert_eq!(fmt_time(3.0e9), "3.000 s");
        assert_eq!(fmt_time(4.2e12), "4200 s");
        assert_eq!(fmt_seconds(7.25), "7.2 s");
        assert_eq!(fmt_seconds(42.4), "42 s");
        assert_eq!(fmt_seconds(125.0), "2 min 05 s");
        assert_eq!(fmt_seconds(f64::NAN), "n/a");
    }

    #[test]
    fn parses_durations() {
        assert_eq!(
            parse_durations("a 1.5\n\n# c\nb 2 0.5 1.25 # trailing\n"),
            Ok(vec![
                FileTime {
                    name: "a".into(),
                    seconds: 1.5,
                    load: None
                },
                FileTime {
                    name: "b".into(),
                    seconds: 2.0,
                    load: Some((0.5, 1.25))
                },
            ])
        );
        assert!(parse_durations("a").is_err());
        assert!(parse_durations("a x").is_err());
        assert!(parse_durations("a 1 2").is_err());
    }

    #[test]
    fn loads_only_new_results() {
        let benches = load(&fixture()).expect("fixture loads");
        let ids: Vec<(&str, &str, Option<u64>)> = benches
            .iter()
            .map(|b| (b.group.as_str(), b.label.as_str(), b.size))
            .collect();
        assert_eq!(
            ids,
            [
                ("handshake", "plain_x25519_dh", None),
                ("handshake", "smkex_two_paths", None),
                ("old-group", "gone", None),
                ("scramble", "aes128gcm_seal_ring", Some(1280)),
                ("scramble", "avx2_scramble", Some(1280)),
                ("scramble", "memcpy", Some(1280)),
                ("scramble", "portable_scramble", Some(64)),
                ("seal", "aes128-gcm", Some(64)),
                ("seal", "bf-cbc-hmac-sha1", Some(64)),
            ]
        );
        let memcpy = &benches[5];
        assert_eq!(memcpy.throughput, Some(Throughput::Bytes(1280)));
        assert_eq!(memcpy.median_ns, 16.892);
        assert_eq!((memcpy.lower_ns, memcpy.upper_ns), (15.95, 18.238));
        assert_eq!(memcpy.confidence, 0.95);
    }

    #[test]
    fn fixture_renders_expected_markdown() {
        let benches = load(&fixture()).expect("fixture loads");
        let got = render(&benches, &info());
        let want = include_str!("../fixtures/criterion-tables.md");
        assert_eq!(
            got, want,
            "got:\n{got}\n(update benches/fixtures/criterion-tables.md if the change is wanted)"
        );
    }

    #[test]
    fn ratios_use_time_per_byte() {
        let b = |median_ns, throughput| Bench {
            group: "g".into(),
            label: "l".into(),
            size: None,
            throughput,
            median_ns,
            lower_ns: median_ns,
            upper_ns: median_ns,
            confidence: 0.95,
        };
        let one = b(10.0, Some(Throughput::Bytes(1000)));
        let eight = b(40.0, Some(Throughput::Bytes(8000)));
        assert_eq!(ratio(&eight, &one), 0.5);
        assert_eq!(ratio(&b(20.0, None), &one), 2.0);
        assert_eq!(ratio(&b(20.0, Some(Throughput::Elements(4))), &one), 2.0);
    }

    #[test]
    fn blowfish_references() {
        let r = |g, l| blowfish_before(g, l).map(|k| k.label);
        assert_eq!(
            r("blowfish-cbc-1496", "ours-decrypt-8-lanes"),
            Some("rustcrypto-decrypt")
        );
        assert_eq!(
            r("blowfish-cbc-1496", "ours-encrypt-x8-8-lanes"),
            Some("rustcrypto-encrypt")
        );
        assert_eq!(
            r("psp-bf-cbc-hmac-sha1-1500", "seal-batch-x8"),
            Some("seal-before")
        );
        assert_eq!(
            r("psp-bf-cbc-hmac-sha1-1500", "seal-batch+open-x8"),
            Some("seal+open-before")
        );
        assert_eq!(r("psp-bf-cbc-hmac-sha1-1500", "open"), None);
    }

    #[test]
    fn replaces_between_markers() {
        let doc = format!("# T\n\nintro\n{BEGIN}\nold\nlines\n{END}\nafter\n");
        assert_eq!(
            replace_between_markers(&doc, "new\n"),
            Ok(format!("# T\n\nintro\n{BEGIN}\nnew\n{END}\nafter\n"))
        );
        // A body without its last newline gets one; an empty body leaves the markers adjacent.
        assert_eq!(
            replace_between_markers(&doc, "new"),
            Ok(format!("# T\n\nintro\n{BEGIN}\nnew\n{END}\nafter\n"))
        );
        assert_eq!(
            replace_between_markers(&doc, ""),
            Ok(format!("# T\n\nintro\n{BEGIN}\n{END}\nafter\n"))
        );
        // Idempotent: rewriting with the same body changes nothing.
        let once = replace_between_markers(&doc, "x\n").expect("markers present");
        assert_eq!(replace_between_markers(&once, "x\n"), Ok(once.clone()));
        // Markers must be whole lines, present once each, in order.
        assert!(replace_between_markers("no markers\n", "x").is_err());
        assert!(replace_between_markers(&format!("{BEGIN}\n"), "x").is_err());
        assert!(replace_between_markers(&format!("{END}\n{BEGIN}\n"), "x").is_err());
        assert!(replace_between_markers(&format!("{BEGIN}\n{BEGIN}\n{END}\n"), "x").is_err());
        assert!(replace_between_markers(&format!("see {BEGIN} here\n{END}\n"), "x").is_err());
    }
}
