//! Man pages and shell completions, generated from the clap definitions (`Cli` in `cli/mod.rs`).
//!
//! `psp-gateway-gen DIR` (src/bin/psp-gateway-gen.rs) writes them for the Debian package
//! (testbed/package.sh runs it right before `cargo deb`), and `tests/package.rs` regenerates
//! them to check that the installed files are byte for byte what the current definitions give.
//! Nothing here is written by hand, so the pages cannot drift from `--help`.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use clap::CommandFactory;
use clap_complete::Shell;

use super::Cli;

/// The command tree `--help` prints, as clap builds it.
#[must_use]
pub fn command() -> clap::Command {
    Cli::command()
}

/// Writes `DIR/man/*.1` (one page for `psp-gateway`, one per subcommand:
/// `psp-gateway-run.1`, ...) and `DIR/completions/{psp-gateway.bash, _psp-gateway,
/// psp-gateway.fish}`, and returns the files written, sorted.
///
/// The output depends only on the clap definitions and the crate version (no date, no
/// environment), so two runs give the same bytes.
///
/// # Errors
/// Creating the directories or writing a file failed.
pub fn write_all(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let man = dir.join("man");
    let completions = dir.join("completions");
    fs::create_dir_all(&man)?;
    fs::create_dir_all(&completions)?;

    // `generate_to` writes the page of the command and of every subcommand, named
    // `psp-gateway.1`, `psp-gateway-run.1`, ...; it skips hidden ones and `help`.
    clap_mangen::generate_to(command(), &man)?;

    let mut written = Vec::new();
    for entry in fs::read_dir(&man)? {
        written.push(entry?.path());
    }
    for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
        let mut cmd = command();
        written.push(clap_complete::generate_to(
            shell,
            &mut cmd,
            "psp-gateway",
            &completions,
        )?);
    }
    written.sort();
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clap_definitions_are_consistent() {
        command().debug_assert();
    }

    /// Every page exists and names every flag its command's `--help` lists.
    #[test]
    fn pages_cover_every_flag_of_help() {
        let dir = std::env::temp_dir().join(format!("psp-gen-unit-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let written = write_all(&dir).unwrap();
        let mut cmd = command();
        cmd.build();
        let mut commands = vec![cmd.clone()];
        commands.extend(
            cmd.get_subcommands()
                .filter(|c| c.get_name() != "help")
                .cloned(),
        );
        assert_eq!(written.len(), commands.len() + 3, "{written:?}");
        for c in &mut commands {
            let name = if c.get_name() == "psp-gateway" {
                "psp-gateway".to_owned()
            } else {
                format!("psp-gateway-{}", c.get_name())
            };
            let page = fs::read_to_string(dir.join("man").join(format!("{name}.1"))).unwrap();
            let help = c.render_long_help().to_string();
            for arg in c.get_arguments() {
                let Some(long) = arg.get_long() else { continue };
                assert!(
                    help.contains(&format!("--{long}")),
                    "{name}: --{long} not in --help"
                );
                // roff escapes every dash.
                let roff = format!("--{long}").replace('-', "\\-");
                assert!(page.contains(&roff), "{name}.1 lacks --{long}");
            }
        }
        let _ = fs::remove_dir_all(&dir);
    }
}
