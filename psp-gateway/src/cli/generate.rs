//! Man pages and shell completions, generated from the clap definitions (`Cli` in `cli/mod.rs`),
//! and the `psp-gateway.toml(5)` page, converted from docs/CONFIG.md.
//!
//! `psp-gateway-gen DIR` (src/bin/psp-gateway-gen.rs) writes them for the Debian package
//! (testbed/package.sh runs it right before `cargo deb`), and `tests/package.rs` regenerates
//! them to check that the installed files are byte for byte what the current definitions give.
//! Nothing here is written by hand, so the pages cannot drift from `--help` or from CONFIG.md.
//!
//! The pages cite other documents by the path the package installs them at ([`DOC_DIR`]: the
//! `[package.metadata.deb]` assets ship `docs/*.md` and BENCHMARKS.md there), never by a path
//! in the source tree, which an installed system does not have.

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

/// Where the Debian package installs the documents the pages cite (`docs/*.md`,
/// BENCHMARKS.md): psp-gateway/Cargo.toml, `[package.metadata.deb] assets`.
pub const DOC_DIR: &str = "/usr/share/doc/psp-gateway/";

/// docs/CONFIG.md, the source of `psp-gateway.toml(5)`.
const CONFIG_MD: &str = include_str!("../../../docs/CONFIG.md");

/// Writes `DIR/man/*.1` (one page for `psp-gateway`, one per subcommand:
/// `psp-gateway-run.1`, ...), `DIR/man/psp-gateway.toml.5` (the configuration file, from
/// docs/CONFIG.md) and `DIR/completions/{psp-gateway.bash, _psp-gateway, psp-gateway.fish}`,
/// and returns the files written, sorted.
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
    fs::write(man.join("psp-gateway.toml.5"), config_page())?;

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

/// `psp-gateway.toml(5)`: docs/CONFIG.md as a man page.
#[must_use]
pub fn config_page() -> String {
    markdown_to_man(
        CONFIG_MD,
        "psp-gateway.toml",
        "the configuration file of psp-gateway run",
        "psp-gateway(1), psp-gateway-run(1), psp-gateway-status(1), psp-gateway-keygen(1)",
    )
}

/// Converts the Markdown of our docs to a man page (section 5): `#` is the title, `##` a
/// section (`.SH`), `###` a subsection (`.SS`), paragraphs, `*`/`-`/`1.` lists, fenced code
/// (`.nf`), and tables as tagged paragraphs (the first cell is the tag, the others follow with
/// their column names). Inline code and bold become bold, links their text. A section named
/// "Contents" (links within the Markdown file) is left out.
fn markdown_to_man(md: &str, name: &str, what: &str, see_also: &str) -> String {
    let md = &installed_docs(md);
    let mut out = String::new();
    out.push_str(&format!(
        ".TH {} 5 \"\" \"psp-gateway {}\" \"File Formats\"\n",
        name.to_uppercase(),
        env!("CARGO_PKG_VERSION")
    ));
    out.push_str(&format!(
        ".SH NAME\n{} \\- {}\n.SH DESCRIPTION\n",
        escape(name),
        escape(what)
    ));
    let lines: Vec<&str> = md.lines().collect();
    let mut i = 0;
    let mut skipping = false;
    while i < lines.len() {
        let line = lines[i];
        if let Some(h) = line.strip_prefix("## ") {
            skipping = h.trim() == "Contents";
            if !skipping {
                out.push_str(&format!(".SH {}\n", inline(&h.to_uppercase())));
            }
            i += 1;
            continue;
        }
        if skipping || line.starts_with("# ") || line.trim().is_empty() {
            i += 1;
            continue;
        }
        if let Some(h) = line.strip_prefix("### ") {
            out.push_str(&format!(".SS {}\n", inline(h)));
            i += 1;
        } else if line.starts_with("```") {
            out.push_str(".PP\n.RS 4\n.nf\n");
            i += 1;
            while i < lines.len() && !lines[i].starts_with("```") {
                out.push_str(&escape_line(&escape(lines[i])));
                out.push('\n');
                i += 1;
            }
            out.push_str(".fi\n.RE\n");
            i += 1;
        } else if line.starts_with('|') {
            let mut rows = Vec::new();
            while i < lines.len() && lines[i].starts_with('|') {
                rows.push(cells(lines[i]));
                i += 1;
            }
            table(&mut out, &rows);
        } else if let Some((tag, first)) = list_item(line) {
            let mut text = first.to_owned();
            i += 1;
            while i < lines.len() && lines[i].starts_with("  ") && !lines[i].trim().is_empty() {
                text.push(' ');
                text.push_str(lines[i].trim());
                i += 1;
            }
            out.push_str(&format!(".IP {tag} 4\n{}\n", escape_line(&inline(&text))));
        } else {
            let mut text = line.trim().to_owned();
            i += 1;
            while i < lines.len() {
                let l = lines[i];
                if l.trim().is_empty()
                    || l.starts_with('#')
                    || l.starts_with("```")
                    || l.starts_with('|')
                    || list_item(l).is_some()
                {
                    break;
                }
                text.push(' ');
                text.push_str(l.trim());
                i += 1;
            }
            out.push_str(&format!(".PP\n{}\n", escape_line(&inline(&text))));
        }
    }
    out.push_str(&format!(".SH SEE ALSO\n{}\n", escape(see_also)));
    out
}

/// `text` with every document it names (`GATEWAY.md`, `docs/SESSIONS.md`,
/// `../BENCHMARKS.md#gateway-hot-path`) named by its installed path (`DOC_DIR` + the file name;
/// an anchor stays).
fn installed_docs(text: &str) -> String {
    let is_path = |c: char| c.is_ascii_alphanumeric() || "_./-".contains(c);
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(".md") {
        let end = at + ".md".len();
        let start = rest[..at].rfind(|c: char| !is_path(c)).map_or(0, |i| i + 1);
        let file = &rest[start..end];
        let name = file.rsplit('/').next().unwrap_or(file);
        let word_ends = !rest[end..].starts_with(|c: char| c.is_ascii_alphanumeric());
        out.push_str(&rest[..start]);
        if word_ends && name.len() > ".md".len() && !file.starts_with(DOC_DIR) {
            out.push_str(DOC_DIR);
            out.push_str(name);
        } else {
            out.push_str(file);
        }
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// `* x`, `- x` or `1. x`: the roff tag and the text.
fn list_item(line: &str) -> Option<(String, &str)> {
    if let Some(t) = line.strip_prefix("* ").or_else(|| line.strip_prefix("- ")) {
        return Some(("\\(bu".to_owned(), t));
    }
    let (n, rest) = line.split_once(". ")?;
    (!n.is_empty() && n.len() <= 2 && n.bytes().all(|b| b.is_ascii_digit()))
        .then(|| (format!("{n}."), rest))
}

/// The cells of a Markdown table row (a `\|` inside a cell stays a `|`).
fn cells(row: &str) -> Vec<String> {
    let row = row.trim().trim_start_matches('|').trim_end_matches('|');
    let mut out = vec![String::new()];
    let mut chars = row.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '|' {
            out.push(String::new());
            continue;
        }
        let c = if c == '\\' && chars.peek() == Some(&'|') {
            chars.next();
            '|'
        } else {
            c
        };
        if let Some(cell) = out.last_mut() {
            cell.push(c);
        }
    }
    out.into_iter().map(|c| c.trim().to_owned()).collect()
}

/// A table as tagged paragraphs: the header row names the columns; the separator row is
/// skipped; each row is `.TP`, its first cell, then the others as "column: value", the last
/// column (the meaning) without its name.
fn table(out: &mut String, rows: &[Vec<String>]) {
    let Some((header, body)) = rows.split_first() else {
        return;
    };
    for row in body {
        if row
            .iter()
            .all(|c| c.chars().all(|ch| matches!(ch, '-' | ':' | ' ')))
        {
            continue;
        }
        out.push_str(".TP 4\n");
        out.push_str(&escape_line(&inline(
            row.first().map_or("", String::as_str),
        )));
        out.push('\n');
        let n = row.len().min(header.len());
        let mut parts = Vec::new();
        for (k, cell) in row.iter().enumerate().take(n).skip(1) {
            if cell.is_empty() {
                continue;
            }
            if k + 1 == n {
                parts.push(inline(cell));
            } else {
                parts.push(format!("{}: {}", inline(&header[k]), inline(cell)));
            }
        }
        out.push_str(&escape_line(&parts.join(". ")));
        out.push('\n');
    }
}

/// Escapes roff's special characters in plain text; characters beyond ASCII become groff's
/// `\[uXXXX]`, so the page needs no input encoding.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\e"),
            '-' => out.push_str("\\-"),
            c if c.is_ascii() => out.push(c),
            c => out.push_str(&format!("\\[u{:04X}]", u32::from(c))),
        }
    }
    out
}

/// A text line must not start with `.` or `'` (a request to roff).
fn escape_line(s: &str) -> String {
    if s.starts_with('.') || s.starts_with('\'') {
        format!("\\&{s}")
    } else {
        s.to_owned()
    }
}

/// Inline Markdown: `code` and **bold** become bold, [text](link) its text, the rest escaped.
fn inline(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('`')
            && let Some(end) = r.find('`')
        {
            out.push_str(&format!("\\fB{}\\fR", escape(&r[..end])));
            rest = &r[end + 1..];
        } else if let Some(r) = rest.strip_prefix("**")
            && let Some(end) = r.find("**")
        {
            out.push_str(&format!("\\fB{}\\fR", inline(&r[..end])));
            rest = &r[end + 2..];
        } else if let Some(r) = rest.strip_prefix('[')
            && let Some(close) = r.find("](")
            && let Some(end) = r[close..].find(')')
        {
            out.push_str(&inline(&r[..close]));
            rest = &r[close + end + 1..];
        } else {
            let c = rest.chars().next().unwrap_or(' ');
            out.push_str(&escape(&c.to_string()));
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clap_definitions_are_consistent() {
        command().debug_assert();
    }

    /// The man page names of `cmd` and every subcommand below it (`psp-gateway-ca-init`), with
    /// their commands.
    fn pages(cmd: &clap::Command, name: &str, out: &mut Vec<(String, clap::Command)>) {
        out.push((name.to_owned(), cmd.clone()));
        for sub in cmd.get_subcommands().filter(|c| c.get_name() != "help") {
            pages(sub, &format!("{name}-{}", sub.get_name()), out);
        }
    }

    /// Every page exists (one per command and nested subcommand) and names every flag its
    /// command's `--help` lists.
    #[test]
    fn pages_cover_every_flag_of_help() {
        let dir = std::env::temp_dir().join(format!("psp-gen-unit-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let written = write_all(&dir).unwrap();
        let mut cmd = command();
        cmd.build();
        let mut commands = Vec::new();
        pages(&cmd, "psp-gateway", &mut commands);
        assert!(
            commands.iter().any(|(n, _)| n == "psp-gateway-ca-sign"),
            "nested subcommands get pages"
        );
        // The command pages, psp-gateway.toml.5 and three completions.
        assert_eq!(written.len(), commands.len() + 4, "{written:?}");
        for (name, c) in &mut commands {
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

    /// The configuration page names every key the reference tables list, every section of
    /// CONFIG.md, and nothing in it reads as a roff request.
    #[test]
    fn config_page_covers_config_md() {
        let page = config_page();
        assert!(
            page.starts_with(".TH PSP-GATEWAY.TOML 5 "),
            "{}",
            &page[..80]
        );
        for line in CONFIG_MD.lines() {
            if let Some(h) = line.strip_prefix("### ") {
                assert!(
                    page.contains(&format!(".SS {}", inline(&installed_docs(h)))),
                    "no .SS for {h}"
                );
            }
            // The first cell of a reference table row is `key`.
            if let Some(rest) = line.strip_prefix("| `")
                && let Some(key) = rest.split('`').next()
            {
                assert!(page.contains(&escape(key)), "key {key} missing");
            }
        }
        for l in page.lines() {
            let request = l.starts_with('.') || l.starts_with('\'');
            let known = [
                ".TH", ".SH", ".SS", ".PP", ".TP", ".IP", ".RS", ".RE", ".nf", ".fi",
            ];
            assert!(
                !request || known.iter().any(|k| l.starts_with(k)),
                "stray request: {l}"
            );
        }
        assert!(!page.contains("](#"), "a link survived");
    }

    #[test]
    fn documents_are_cited_by_their_installed_path() {
        assert_eq!(
            installed_docs(
                "see docs/SESSIONS.md, [GATEWAY.md, MTU](GATEWAY.md#mtu) and \
                 (../BENCHMARKS.md#hot); x.mdx, .md"
            ),
            "see /usr/share/doc/psp-gateway/SESSIONS.md, \
             [/usr/share/doc/psp-gateway/GATEWAY.md, MTU](/usr/share/doc/psp-gateway/GATEWAY.md#mtu) \
             and (/usr/share/doc/psp-gateway/BENCHMARKS.md#hot); x.mdx, .md"
        );
        let page = config_page();
        assert!(!page.contains("docs/"), "a source-tree path in the page");
        assert!(page.contains("/usr/share/doc/psp\\-gateway/GATEWAY.md"));
    }

    #[test]
    fn markdown_constructs() {
        let md = "# T\n\n## Contents\n\n1. [a](#a)\n\n## Keys\n\nSome `a-b` and **bold**, \
                  [link](x.md).\n.dot\n\n| key | type | meaning |\n|---|---|---|\n\
                  | `k` | int | what \\| it is |\n\n* one\n  two\n\n```toml\n.x = \\1\n```\n";
        let page = markdown_to_man(md, "x", "y", "z(1)");
        assert!(
            !page.contains("(#a)") && !page.contains("CONTENTS"),
            "{page}"
        );
        assert!(page.contains(".SH KEYS\n"), "{page}");
        assert!(
            page.contains(".PP\nSome \\fBa\\-b\\fR and \\fBbold\\fR, link. .dot\n"),
            "{page}"
        );
        assert!(
            page.contains(".TP 4\n\\fBk\\fR\ntype: int. what | it is\n"),
            "{page}"
        );
        assert!(page.contains(".IP \\(bu 4\none two\n"), "{page}");
        assert!(page.contains(".nf\n\\&.x = \\e1\n.fi\n"), "{page}");
        assert_eq!(escape("a\u{2192}b\u{b5}"), "a\\[u2192]b\\[u00B5]");
    }
}
