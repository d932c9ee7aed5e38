//! Root, CI: `testbed/multipath.sh --quick` with this build's `psp-mp`, in network namespaces
//! (client with a trusted and an untrusted link, eve routing both and capturing the untrusted
//! one, server). Checks the security half of the RESULT line (the papers' "0 known-text hits",
//! and the ciphertext-only analyst who reads the scrambled file anyway but not the sealed one)
//! and that a stream outlives its untrusted link going down (`--continue-on-path-failure`), and
//! the hybrid key exchange (`--kem require`: a stream in each mode, a replaced KemShare caught);
//! the timing half of a debug build means nothing and is not checked (the set-ups of every kind
//! must still succeed). Fails loudly (never skips)
//! when it cannot set up.
#![allow(missing_docs)]

use std::path::Path;
use std::process::Command;

fn field<'a>(result: &'a str, key: &str) -> &'a str {
    result
        .split_whitespace()
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
        .unwrap_or_else(|| panic!("no {key}= in {result}"))
}

#[test]
fn root_quick_testbed_run_eve_reads_scrambled_text_not_sealed_and_mitm_is_detected() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new("bash")
        .arg(root.join("testbed/multipath.sh"))
        .args(["--quick", "--no-build"])
        .env("MP_BIN", env!("CARGO_BIN_EXE_psp-mp"))
        .output()
        .expect("run testbed/multipath.sh (needs bash)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "multipath.sh --quick failed ({}):\n{stderr}\n{stdout}",
        out.status
    );
    let result = stdout
        .lines()
        .last()
        .filter(|l| l.starts_with("RESULT "))
        .unwrap_or_else(|| panic!("no RESULT line:\n{stdout}\n{stderr}"));
    let n = |k| field(result, k).parse::<u64>().unwrap();
    assert!(n("eve_hits_plain") > 1000, "{result}");
    assert_eq!(n("eve_hits_scrambled"), 0, "{result}");
    let pct = |k| field(result, k).parse::<f64>().unwrap();
    assert!(pct("eve_recovered_pct_scrambled") >= 90.0, "{result}");
    assert!(pct("eve_recovered_pct_aes") < 1.0, "{result}");
    assert!(pct("eve_recovered_pct_plain") >= 99.9, "{result}");
    assert!(pct("eve_recovered_pct_digits_aes") < 1.0, "{result}");
    assert_eq!(n("mitm_one_path_detected"), 1, "{result}");
    // ML-KEM-768 (`--kem require` on both sides): a replaced KemShare is caught as a replaced
    // Share is, and a stream in each mode reports its keys hold the KEM secret.
    assert_eq!(n("kem_mitm_one_path_detected"), 1, "{result}");
    assert_eq!(n("kem_stream_ok"), 1, "{result}");
    assert!(n("eve_both_paths_hits") > 1000, "{result}");
    assert_eq!(n("pinned_both_paths_refused"), 1, "{result}");
    assert!(n("known_plaintext_recovered_bytes") > 65, "{result}");
    assert_eq!(n("continue_after_path_loss_ok"), 1, "{result}");
}
