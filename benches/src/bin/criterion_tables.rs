//! Criterion's saved estimates as Markdown tables, one per bench file, with the run's machine,
//! date and command in a header; optionally written into BENCHMARKS.md between
//! `<!-- criterion-tables:begin -->` and `<!-- criterion-tables:end -->`.
//!
//! ```text
//! cargo run --profile bench -p psp-benches --bin criterion_tables -- [--dir DIR]
//!     [--durations FILE] [--mode full|quick] [--command CMD] [--write FILE]
//! ```
//!
//! `benches/run-criterion.sh` runs the benches and then this. The tables go to stdout;
//! `--write` also replaces the generated section of FILE. Any error is one line
//! `criterion_tables: …` and exit status 1.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use psp_benches::criterion_tables::{
    RunInfo, load, parse_durations, render, replace_between_markers,
};
use psp_benches::{civil_date, cpu_description};

const USAGE: &str = "usage: criterion_tables [--dir DIR] [--durations FILE] [--mode full|quick] \
                     [--command CMD] [--write FILE]\n\
                     \n  --dir DIR         criterion's output (default: $CRITERION_HOME, else target/criterion)\
                     \n  --durations FILE  `NAME SECONDS [LOAD_BEFORE LOAD_AFTER]` lines (build and bench wall times)\
                     \n  --mode MODE       full or quick, for the header (default: full)\
                     \n  --command CMD     the command of the run, for the header\
                     \n  --write FILE      also replace FILE's lines between the criterion-tables markers";

/// Command-line options.
#[derive(Debug, PartialEq)]
struct Opts {
    dir: PathBuf,
    durations: Option<PathBuf>,
    mode: String,
    command: String,
    write: Option<PathBuf>,
}

fn main() -> ExitCode {
    let default_dir = std::env::var_os("CRITERION_HOME")
        .map_or_else(|| PathBuf::from("target/criterion"), PathBuf::from);
    let opts = match parse_args(std::env::args().skip(1), default_dir) {
        Ok(Some(opts)) => opts,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("criterion_tables: {e}\n{USAGE}");
            return ExitCode::FAILURE;
        }
    };
    match run(&opts) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("criterion_tables: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `Ok(None)` means `--help`.
fn parse_args(
    args: impl Iterator<Item = String>,
    default_dir: PathBuf,
) -> Result<Option<Opts>, String> {
    let mut opts = Opts {
        dir: default_dir,
        durations: None,
        mode: "full".to_owned(),
        command: "benches/run-criterion.sh".to_owned(),
        write: None,
    };
    let mut args = args;
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("`{arg}` needs a value"));
        match arg.as_str() {
            "--dir" => opts.dir = value()?.into(),
            "--durations" => opts.durations = Some(value()?.into()),
            "--mode" => {
                opts.mode = value()?;
                if opts.mode != "full" && opts.mode != "quick" {
                    return Err(format!("--mode is full or quick, not `{}`", opts.mode));
                }
            }
            "--command" => opts.command = value()?,
            "--write" => opts.write = Some(value()?.into()),
            "-h" | "--help" => return Ok(None),
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    Ok(Some(opts))
}

fn run(opts: &Opts) -> Result<(), String> {
    let benches = load(&opts.dir)?;
    if benches.is_empty() {
        return Err(format!(
            "no criterion results under {} (no */new/benchmark.json)",
            opts.dir.display()
        ));
    }
    let durations = match &opts.durations {
        Some(path) => parse_durations(
            &std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?,
        )?,
        None => Vec::new(),
    };
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| cpu_description(&s))
        .unwrap_or_else(|| "unknown CPU".to_owned());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let (y, m, d) = civil_date(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
    );
    let info = RunInfo {
        machine: format!("{cpu}, {cores} cores"),
        rustc: rustc_version(),
        date: format!("{y:04}-{m:02}-{d:02}"),
        mode: opts.mode.clone(),
        command: opts.command.clone(),
        durations,
    };
    let body = render(&benches, &info);
    print!("{body}");
    if let Some(path) = &opts.write {
        let doc = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let new =
            replace_between_markers(&doc, &body).map_err(|e| format!("{}: {e}", path.display()))?;
        std::fs::write(path, new).map_err(|e| format!("{}: {e}", path.display()))?;
        eprintln!(
            "criterion_tables: wrote {} benchmarks into {}",
            benches.len(),
            path.display()
        );
    }
    Ok(())
}

fn rustc_version() -> String {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    std::process::Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> impl Iterator<Item = String> {
        a.iter()
            .map(|s| (*s).to_owned())
            .collect::<Vec<_>>()
            .into_iter()
    }

    #[test]
    fn parses_args() {
        let d = PathBuf::from("target/criterion");
        let opts = parse_args(args(&[]), d.clone())
            .expect("no args")
            .expect("not help");
        assert_eq!((opts.dir.clone(), opts.mode.as_str()), (d.clone(), "full"));
        let opts = parse_args(
            args(&[
                "--dir",
                "x",
                "--mode",
                "quick",
                "--write",
                "B.md",
                "--command",
                "c",
            ]),
            d.clone(),
        )
        .expect("valid")
        .expect("not help");
        assert_eq!(opts.dir, PathBuf::from("x"));
        assert_eq!(opts.mode, "quick");
        assert_eq!(opts.write, Some(PathBuf::from("B.md")));
        assert_eq!(opts.command, "c");
        assert_eq!(parse_args(args(&["--help"]), d.clone()), Ok(None));
        assert!(parse_args(args(&["--mode", "slow"]), d.clone()).is_err());
        assert!(parse_args(args(&["--dir"]), d.clone()).is_err());
        assert!(parse_args(args(&["--bogus"]), d).is_err());
    }
}
