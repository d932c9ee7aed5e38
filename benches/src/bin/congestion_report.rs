//! Turns the results file of `testbed/congestion.sh` (seed 003's congestion experiment) into the
//! committed report: a Markdown fragment (conditions, Table I, Fig 5 as a table, the issue's
//! targets, the paper's numbers beside ours) and a Fig 5-style PNG bar chart.
//!
//! ```text
//! cargo run --release -p psp-benches --bin congestion_report -- --results R.tsv \
//!     [--markdown OUT.md] [--png OUT.png] [--font PATH] [--result-cc fixed|faithful|improved]
//! ```
//!
//! The last line of stdout is `RESULT cc_1flow_of_bound=… cc_retr_pct=… cc_10flow_of_allowed=…
//! nocc_1flow_kbps=… nocc_retr_pct=… cc_algorithm=NAME` (unidirectional congestion, means over
//! repetitions; `cc_*` for `--result-cc`, default `improved` if the file has it, else
//! `faithful`), preceded by `RESULT_FAITHFUL …` with the same keys for `faithful`.
//! Any error is one line `congestion_report: …` and exit status 2.

use std::path::PathBuf;
use std::process::ExitCode;

use psp_benches::congestion::{self, Cc, Report, chart};

const USAGE: &str = "usage: congestion_report --results R.tsv [--markdown OUT.md] [--png OUT.png] \
                     [--font PATH] [--result-cc fixed|faithful|improved]";

/// Command-line options.
#[derive(Debug, PartialEq)]
struct Opts {
    results: PathBuf,
    markdown: Option<PathBuf>,
    png: Option<PathBuf>,
    font: PathBuf,
    result_cc: Option<Cc>,
}

fn main() -> ExitCode {
    let opts = match parse_args(std::env::args().skip(1)) {
        Ok(Some(opts)) => opts,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("congestion_report: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(&opts) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("congestion_report: {e}");
            ExitCode::from(2)
        }
    }
}

/// `Ok(None)` means `--help`.
fn parse_args(args: impl Iterator<Item = String>) -> Result<Option<Opts>, String> {
    let mut results = None;
    let mut markdown = None;
    let mut png = None;
    let mut font = PathBuf::from(chart::DEFAULT_FONT);
    let mut result_cc = None;
    let mut args = args.peekable();
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) if flag.starts_with("--") => (flag.to_owned(), Some(value.into())),
            _ => (arg, None),
        };
        if matches!(flag.as_str(), "-h" | "--help") {
            return Ok(None);
        }
        let mut value = || {
            inline
                .clone()
                .or_else(|| args.next())
                .ok_or_else(|| format!("{flag} needs a value"))
        };
        match flag.as_str() {
            "--results" => results = Some(PathBuf::from(value()?)),
            "--markdown" => markdown = Some(PathBuf::from(value()?)),
            "--png" => png = Some(PathBuf::from(value()?)),
            "--font" => font = PathBuf::from(value()?),
            "--result-cc" => {
                let v = value()?;
                result_cc = Some(Cc::parse(&v).ok_or_else(|| {
                    format!(
                        "--result-cc: unknown mode `{v}` (expected fixed, faithful or improved)"
                    )
                })?);
            }
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    let results = results.ok_or("--results is required")?;
    Ok(Some(Opts {
        results,
        markdown,
        png,
        font,
        result_cc,
    }))
}

fn run(opts: &Opts) -> Result<(), String> {
    let name = opts.results.display();
    let text = std::fs::read_to_string(&opts.results).map_err(|e| format!("{name}: {e}"))?;
    let results = congestion::parse(&text).map_err(|e| format!("{name}:{e}"))?;
    let report = Report::new(&results);
    let result_cc = opts.result_cc.unwrap_or_else(|| report.default_result_cc());
    println!(
        "congestion_report: {} runs in {} groups from {name}",
        report.runs,
        report.groups.len()
    );

    // The font first: a missing font must fail before anything is written.
    if let Some(png) = &opts.png {
        chart::load_font(&opts.font)?;
        chart::render_png(&report, png)?;
        println!("congestion_report: wrote {}", png.display());
    }
    if let Some(md) = &opts.markdown {
        std::fs::write(md, report.markdown(result_cc))
            .map_err(|e| format!("{}: {e}", md.display()))?;
        println!("congestion_report: wrote {}", md.display());
    }

    if report.modes().contains(&Cc::Faithful) {
        println!("{}", report.summary(Cc::Faithful).line("RESULT_FAITHFUL"));
    }
    println!("{}", report.summary(result_cc).line("RESULT"));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args<'a>(a: &'a [&str]) -> impl Iterator<Item = String> + 'a {
        a.iter().map(|s| String::from(*s))
    }

    #[test]
    fn parses_arguments() {
        let opts = parse_args(args(&[
            "--results",
            "r.tsv",
            "--markdown=o.md",
            "--png",
            "o.png",
            "--result-cc",
            "faithful",
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(
            opts,
            Opts {
                results: "r.tsv".into(),
                markdown: Some("o.md".into()),
                png: Some("o.png".into()),
                font: chart::DEFAULT_FONT.into(),
                result_cc: Some(Cc::Faithful),
            }
        );
        assert_eq!(parse_args(args(&["--help"])), Ok(None));
        assert_eq!(
            parse_args(args(&[])),
            Err("--results is required".to_owned())
        );
        assert_eq!(
            parse_args(args(&["--results"])),
            Err("--results needs a value".to_owned())
        );
        assert!(parse_args(args(&["--results", "r", "--result-cc", "cubic"])).is_err());
        assert!(parse_args(args(&["--results", "r", "--svg", "x"])).is_err());
    }
}
