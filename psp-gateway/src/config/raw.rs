//! The TOML layer: the file as written, before validation, and toml's errors turned into one
//! line naming the key (`peer[1].mac`) or, for syntax errors, the line and column.
//!
//! Every field is optional here (and integers are `i64`, TOML's integer type) so that missing and
//! out-of-range values are reported by the validation in `validate.rs`, in our words; serde only
//! refuses unknown keys and wrong types.

use core::ops::Range;
use std::path::Path;

use serde::Deserialize;
use toml::de::{DeTable, DeValue};

use super::ConfigError;
use super::normalize::RawNormalize;
use super::pki::RawPki;
use super::session::RawSession;

/// The whole file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawConfig {
    #[serde(default)]
    pub(super) interface: RawInterface,
    pub(super) uplink: Option<RawUplinks>,
    #[serde(default)]
    pub(super) daemon: RawDaemon,
    #[serde(default)]
    pub(super) defaults: RawSecurity,
    pub(super) group: Option<RawGroup>,
    #[serde(default)]
    pub(super) peer: Vec<RawPeer>,
    #[serde(default)]
    pub(super) normalize: RawNormalize,
    pub(super) metrics: Option<RawMetrics>,
    pub(super) session: Option<RawSession>,
    pub(super) pki: Option<RawPki>,
}

/// `[interface]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawInterface {
    pub(super) name: Option<String>,
    pub(super) mac: Option<String>,
    pub(super) mtu: Option<i64>,
    #[serde(default)]
    pub(super) addresses: Vec<String>,
    pub(super) offload: Option<bool>,
    pub(super) io_uring: Option<bool>,
}

/// `[uplink]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawUplink {
    pub(super) kind: Option<String>,
    pub(super) interface: Option<String>,
    pub(super) listen: Option<String>,
    pub(super) rx_ring: Option<bool>,
    pub(super) qdisc_bypass: Option<bool>,
}

/// `[uplink]` (one path), or `[[uplink]]` once or twice (two paths: SMKEX).
#[derive(Debug)]
pub(super) enum RawUplinks {
    /// `[uplink]`.
    One(RawUplink),
    /// `[[uplink]]`.
    Many(Vec<RawUplink>),
}

impl<'de> Deserialize<'de> for RawUplinks {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = RawUplinks;
            fn expecting(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                f.write_str("an [uplink] table or [[uplink]] tables")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<RawUplinks, A::Error> {
                RawUplink::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(RawUplinks::One)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                seq: A,
            ) -> Result<RawUplinks, A::Error> {
                Vec::<RawUplink>::deserialize(serde::de::value::SeqAccessDeserializer::new(seq))
                    .map(RawUplinks::Many)
            }
        }
        d.deserialize_any(Visitor)
    }
}

/// `[daemon]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDaemon {
    pub(super) status_socket: Option<String>,
    pub(super) state_directory: Option<String>,
    pub(super) user: Option<String>,
    pub(super) log_format: Option<String>,
    pub(super) log_level: Option<String>,
}

/// `[metrics]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMetrics {
    pub(super) listen: Option<String>,
    pub(super) allow_remote: Option<bool>,
}

/// `[defaults]`, and the overrides in `[group]` and `[[peer]]`.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSecurity {
    pub(super) suite: Option<String>,
    pub(super) replay_window: Option<i64>,
    pub(super) security_number: Option<i64>,
    pub(super) timestamps: Option<bool>,
    pub(super) max_skew_ms: Option<i64>,
    pub(super) pad_to: Option<i64>,
}

/// `[group]`: the key file plus the `[defaults]` fields as overrides.
// `#[serde(flatten)]` cannot be combined with `deny_unknown_fields`, so the security fields are
// spelled out again here and in `RawPeer`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawGroup {
    pub(super) key_file: Option<String>,
    suite: Option<String>,
    replay_window: Option<i64>,
    security_number: Option<i64>,
    timestamps: Option<bool>,
    max_skew_ms: Option<i64>,
    pad_to: Option<i64>,
}

impl RawGroup {
    /// The overrides.
    pub(super) fn security(&self) -> RawSecurity {
        RawSecurity {
            suite: self.suite.clone(),
            replay_window: self.replay_window,
            security_number: self.security_number,
            timestamps: self.timestamps,
            max_skew_ms: self.max_skew_ms,
            pad_to: self.pad_to,
        }
    }
}

/// One `[[peer]]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPeer {
    pub(super) name: Option<String>,
    pub(super) mac: Option<String>,
    pub(super) macs: Option<Vec<String>>,
    pub(super) endpoint: Option<String>,
    pub(super) endpoint2: Option<String>,
    pub(super) key_file: Option<String>,
    pub(super) identity: Option<String>,
    pub(super) address: Option<String>,
    suite: Option<String>,
    replay_window: Option<i64>,
    security_number: Option<i64>,
    timestamps: Option<bool>,
    max_skew_ms: Option<i64>,
    pad_to: Option<i64>,
    #[serde(default)]
    pub(super) normalize: RawNormalize,
}

impl RawPeer {
    /// The overrides.
    pub(super) fn security(&self) -> RawSecurity {
        RawSecurity {
            suite: self.suite.clone(),
            replay_window: self.replay_window,
            security_number: self.security_number,
            timestamps: self.timestamps,
            max_skew_ms: self.max_skew_ms,
            pad_to: self.pad_to,
        }
    }
}

/// Parses `text` (read from `file`) into the raw structs.
///
/// # Errors
/// Syntax errors as `FILE: line L, column C: PROBLEM`; unknown keys and wrong types as
/// `FILE: KEY: PROBLEM`, the key found from the position toml reports.
pub(super) fn parse(file: &Path, text: &str) -> Result<RawConfig, ConfigError> {
    let doc = DeTable::parse(text).map_err(|e| {
        let key = e
            .span()
            .map(|s| line_col(text, s.start))
            .unwrap_or_default();
        let mut problem = tidy(e.message());
        // "duplicate key" alone does not say which: the span is the key.
        let culprit = e.span().and_then(|s| text.get(s)).unwrap_or_default();
        if problem == "duplicate key" && !culprit.is_empty() && culprit.len() <= 64 {
            problem = match repeated_array_header(text, e.span().unwrap_or_default()) {
                // `[uplink]` twice: the writer wanted two entries of an array of tables.
                Some(table) => format!(
                    "[{table}] written twice; for two {table}s write [[{table}]] (double \
                     brackets) before each"
                ),
                None => format!("duplicate key `{}`", culprit.escape_debug()),
            };
        }
        ConfigError::new(file, key, problem)
    })?;
    let de = toml::de::Deserializer::from(doc.clone());
    RawConfig::deserialize(de).map_err(|e| {
        let key = e
            .span()
            .and_then(|s| key_at(doc.get_ref(), &s))
            .or_else(|| e.span().map(|s| line_col(text, s.start)))
            .unwrap_or_default();
        let (key, problem) = brackets(key, tidy(e.message()));
        ConfigError::new(file, key, problem)
    })
}

/// The tables a file may repeat as `[[name]]`.
const ARRAYS: [&str; 2] = ["uplink", "peer"];

/// `Some(name)` when the duplicate key at `span` is the name in a single-bracket header
/// (`[uplink]`) of a table that may be written as an array of tables (`[[uplink]]`).
fn repeated_array_header(text: &str, span: Range<usize>) -> Option<&'static str> {
    let name = text.get(span.clone())?.trim();
    let table = ARRAYS.into_iter().find(|t| *t == name)?;
    let before = text.get(..span.start)?.trim_end_matches([' ', '\t']);
    let after = text.get(span.end..)?.trim_start_matches([' ', '\t']);
    let single = before.ends_with('[') && !before.ends_with("[[");
    (single && after.starts_with(']')).then_some(table)
}

/// Our words for the two bracket mix-ups: `[peer]` where the file needs `[[peer]]` (serde:
/// "invalid type: map, expected a sequence"), and `[[interface]]` where it needs `[interface]`.
fn brackets(key: String, problem: String) -> (String, String) {
    // `peer[0].normalize` is written `[peer.normalize]`.
    let mut table = String::with_capacity(key.len());
    let mut in_index = false;
    for c in key.chars() {
        match c {
            '[' => in_index = true,
            ']' => in_index = false,
            c if !in_index => table.push(c),
            _ => {}
        }
    }
    // serde reads `[[interface]]` as a struct written as a sequence: its first element, a map,
    // is refused as the struct's first field (`interface[0]: invalid type: map, ...`).
    const SINGLE: [&str; 8] = [
        "pki",
        "interface",
        "daemon",
        "defaults",
        "group",
        "metrics",
        "session",
        "normalize",
    ];
    let single = key
        .strip_suffix("[0]")
        .is_some_and(|k| SINGLE.contains(&k) || k.ends_with(".normalize"));
    if problem.starts_with("invalid type: map, expected a sequence") {
        let problem = format!(
            "[{table}] is a single table; write [[{table}]] (double brackets), one per entry"
        );
        (key, problem)
    } else if single && problem.starts_with("invalid type: map") {
        let problem =
            format!("[[{table}]] is an array of tables; write [{table}] (single brackets), once");
        let key = key.strip_suffix("[0]").unwrap_or(&key).to_owned();
        (key, problem)
    } else {
        (key, problem)
    }
}

/// `line L, column C` (1-based) of byte offset `at`.
fn line_col(text: &str, at: usize) -> String {
    let mut at = at.min(text.len());
    // Offsets from the parser are char boundaries; step back to one if not (0 always is).
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    format!("line {line}, column {column}")
}

/// The dotted key path (`peer[1].mac`, `interface.addresses[0]`) of the innermost key or value
/// whose span contains `span`.
fn key_at(table: &DeTable<'_>, span: &Range<usize>) -> Option<String> {
    let mut path = String::new();
    walk_table(table, span, &mut path).then_some(path)
}

fn walk_table(table: &DeTable<'_>, span: &Range<usize>, path: &mut String) -> bool {
    for (k, v) in table {
        let len = path.len();
        if !path.is_empty() {
            path.push('.');
        }
        path.push_str(k.get_ref());
        // An error on the key itself (unknown key) stops here; otherwise the innermost value
        // wins. Implicit tables (`[a.b]` creates `a`) carry no useful span: look inside anyway.
        if contains(&k.span(), span)
            || walk_value(v.get_ref(), span, path)
            || contains(&v.span(), span)
        {
            return true;
        }
        path.truncate(len);
    }
    false
}

fn walk_value(value: &DeValue<'_>, span: &Range<usize>, path: &mut String) -> bool {
    match value {
        DeValue::Table(t) => walk_table(t, span, path),
        DeValue::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                if walk_value(item.get_ref(), span, path) || contains(&item.span(), span) {
                    return true;
                }
                path.truncate(len);
            }
            false
        }
        _ => false,
    }
}

/// Whether `outer` (non-empty) covers the start of `inner`.
fn contains(outer: &Range<usize>, inner: &Range<usize>) -> bool {
    outer.start < outer.end && outer.start <= inner.start && inner.start < outer.end
}

/// toml's message in our words, on one line: `unknown field` becomes `unknown key` with the
/// valid keys listed plainly.
pub(super) fn tidy(message: &str) -> String {
    let one_line = message.split_whitespace().collect::<Vec<_>>().join(" ");
    if let Some(rest) = one_line.strip_prefix("unknown field ") {
        let (name, expected) = rest.split_once(", expected ").unwrap_or((rest, ""));
        let expected = expected.trim_start_matches("one of ").replace('`', "");
        return if expected.is_empty() {
            format!("unknown key {name}")
        } else {
            format!("unknown key {name} (valid keys: {expected})")
        };
    }
    // serde's names for TOML's integer type.
    one_line
        .replace(" as i128, expected i64", ", out of range")
        .replace("expected i64", "expected an integer")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        parse(Path::new("/x/gw.toml"), text)
            .unwrap_err()
            .to_string()
    }

    /// Asserts that `text` is refused with an error starting with `prefix`; the error.
    #[track_caller]
    fn err_starts(text: &str, prefix: &str) -> String {
        let e = err(text);
        assert!(e.starts_with(prefix), "{e}");
        e
    }

    /// Asserts that `text` is refused with an error ending with `suffix`.
    #[track_caller]
    fn err_ends(text: &str, suffix: &str) {
        let e = err(text);
        assert!(e.ends_with(suffix), "{e}");
    }

    #[test]
    fn empty_document_parses() {
        let raw = parse(Path::new("gw.toml"), "").unwrap();
        assert!(raw.uplink.is_none() && raw.peer.is_empty());
    }

    #[test]
    fn offload_is_a_boolean() {
        let raw = parse(Path::new("gw.toml"), "[interface]\noffload = false\n").unwrap();
        assert_eq!(raw.interface.offload, Some(false));
        let raw = parse(Path::new("gw.toml"), "").unwrap();
        assert_eq!(raw.interface.offload, None);
        err_starts(
            "[interface]\noffload = \"yes\"\n",
            "/x/gw.toml: interface.offload: invalid type",
        );
    }

    #[test]
    fn io_uring_is_a_boolean() {
        let raw = parse(Path::new("gw.toml"), "[interface]\nio_uring = false\n").unwrap();
        assert_eq!(raw.interface.io_uring, Some(false));
        let raw = parse(Path::new("gw.toml"), "").unwrap();
        assert_eq!(raw.interface.io_uring, None);
        err_starts(
            "[interface]\nio_uring = 1\n",
            "/x/gw.toml: interface.io_uring: invalid type",
        );
    }

    #[test]
    fn syntax_error_names_line_and_column() {
        let e = err_starts(
            "[interface]\nname = \"psp0\"\nmtu = = 3\n",
            "/x/gw.toml: line 3, column 7: ",
        );
        assert_eq!(e.lines().count(), 1, "{e}");
    }

    #[test]
    fn unterminated_string_is_one_line() {
        let e = err_starts(
            "[interface]\nname = \"psp0\n",
            "/x/gw.toml: line 2, column ",
        );
        assert_eq!(e.lines().count(), 1, "{e}");
    }

    #[test]
    fn duplicate_key_is_a_syntax_error() {
        let e = err_starts(
            "[interface]\nname = \"a\"\nname = \"b\"\n",
            "/x/gw.toml: line 3, column 1: ",
        );
        assert!(e.ends_with(": duplicate key `name`"), "{e}");
        err_ends(
            "[interface]\nname = \"a\"\n[interface]\n",
            ": duplicate key `interface`",
        );
    }

    #[test]
    fn repeated_single_bracket_table_says_to_double_the_brackets() {
        let e = err_starts(
            "[uplink]\nkind = \"raw\"\ninterface = \"eth0\"\n\
             [uplink]\nkind = \"raw\"\ninterface = \"eth1\"\n",
            "/x/gw.toml: line 4, column 2: ",
        );
        assert!(
            e.ends_with(
                ": [uplink] written twice; for two uplinks write [[uplink]] (double brackets) \
                 before each"
            ),
            "{e}"
        );
        err_ends(
            "[peer]\nname = \"a\"\n[peer]\nname = \"b\"\n",
            ": [peer] written twice; for two peers write [[peer]] (double brackets) before each",
        );
        // A key written twice inside a table is still just a duplicate key.
        err_ends(
            "[[uplink]]\nkind = \"raw\"\nkind = \"udp\"\n",
            ": duplicate key `kind`",
        );
    }

    #[test]
    fn unknown_key_in_peer_names_the_index() {
        err_starts(
            "[[peer]]\nname = \"a\"\n[[peer]]\nname = \"b\"\nmacc = \"02:00:00:00:00:01\"\n",
            "/x/gw.toml: peer[1].macc: unknown key `macc` (valid keys: name, mac,",
        );
    }

    #[test]
    fn unknown_section_is_named() {
        err_starts(
            "[[peers]]\nname = \"a\"\n",
            "/x/gw.toml: peers: unknown key `peers`",
        );
    }

    #[test]
    fn unknown_key_in_dotted_and_inline_tables() {
        err_starts(
            "interface.nmae = \"x\"\n",
            "/x/gw.toml: interface.nmae: unknown key",
        );
        err_starts(
            "uplink = { kind = \"raw\", iface = \"eth0\" }\n",
            "/x/gw.toml: uplink.iface: unknown key",
        );
    }

    #[test]
    fn wrong_type_names_the_key() {
        err_starts(
            "[interface]\nmtu = \"1500\"\n",
            "/x/gw.toml: interface.mtu: invalid type",
        );
        err_starts(
            "[interface]\naddresses = [\"10.0.0.1/24\", 5]\n",
            "/x/gw.toml: interface.addresses[1]: invalid type",
        );
        err_ends(
            "[interface]\nmtu = 1500.0\n",
            "interface.mtu: invalid type: floating point `1500.0`, expected an integer",
        );
        err_ends(
            "[interface]\nmtu = 99999999999999999999\n",
            "interface.mtu: invalid type: integer `99999999999999999999`, out of range",
        );
        assert_eq!(
            err("[peer]\nname = \"a\"\n"),
            "/x/gw.toml: peer: [peer] is a single table; write [[peer]] (double brackets), one \
             per entry"
        );
        assert_eq!(
            err("[[interface]]\nname = \"a\"\n"),
            "/x/gw.toml: interface: [[interface]] is an array of tables; write [interface] \
             (single brackets), once"
        );
        assert_eq!(
            err("[[peer]]\nname = \"a\"\n[[peer.normalize]]\nenabled = true\n"),
            "/x/gw.toml: peer[0].normalize: [[peer.normalize]] is an array of tables; write \
             [peer.normalize] (single brackets), once"
        );
    }

    #[test]
    fn line_col_handles_multibyte_text() {
        assert_eq!(line_col("é\nab", 4), "line 2, column 2");
        assert_eq!(line_col("ab", 99), "line 1, column 3");
    }
}
