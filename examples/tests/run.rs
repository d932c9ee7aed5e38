//! Every example runs and exits 0 (`cargo test -p psp-examples`, so CI runs them all), and the
//! quick-path example stays within the 30 lines README promises.
#![allow(missing_docs)]

use std::process::Command;

fn run(exe: &str) {
    let out = Command::new(exe).output().expect("the example starts");
    assert!(
        out.status.success(),
        "{exe} failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn loopback_runs() {
    run(env!("CARGO_BIN_EXE_loopback"));
}

#[test]
fn scramble_pair_runs() {
    run(env!("CARGO_BIN_EXE_scramble_pair"));
}

#[test]
fn session_runs() {
    run(env!("CARGO_BIN_EXE_session"));
}

#[test]
fn normalized_runs() {
    run(env!("CARGO_BIN_EXE_normalized"));
}

/// Lines of code: neither blank nor only a comment.
#[test]
fn the_quick_path_example_takes_at_most_30_lines() {
    let src = include_str!("../src/bin/session.rs");
    let code = src
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("//"))
        .count();
    assert!(code <= 30, "session.rs has {code} lines of code");
}
