//! The gateway's modules depend on each other in one direction only: no import cycle among the
//! crate's top-level modules (`crate::X` paths anywhere in a module's files). The same check on
//! the tree before the driver (docs/GATEWAY.md) reports `dataplane`, `sessions`, `daemon`,
//! `status` and `metrics` in one cycle. It prints the layers, lowest first.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

/// Top-level module name of a file under `src/` (`driver/mod.rs` and `driver/pacer.rs` are
/// `driver`; `lib.rs`, `main.rs` and `bin/` are left out: they are the roots).
fn module_of(rel: &Path) -> Option<String> {
    let first = rel.components().next()?.as_os_str().to_str()?;
    match first {
        "lib.rs" | "main.rs" | "bin" => None,
        f => Some(f.trim_end_matches(".rs").to_owned()),
    }
}

fn files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in fs::read_dir(dir).expect("src dir").flatten() {
        let p = e.path();
        if p.is_dir() {
            files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn no_import_cycle_between_the_gateways_modules() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut all = Vec::new();
    files(&src, &mut all);
    let mut deps: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in &all {
        let Some(m) = module_of(f.strip_prefix(&src).expect("under src")) else {
            continue;
        };
        let text = fs::read_to_string(f).expect("read source");
        let entry = deps.entry(m.clone()).or_default();
        for (i, _) in text.match_indices("crate::") {
            let rest = &text[i + "crate::".len()..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() && name != m {
                entry.insert(name);
            }
        }
    }
    let modules: BTreeSet<String> = deps.keys().cloned().collect();
    for d in deps.values_mut() {
        d.retain(|n| modules.contains(n));
    }
    // Peel off modules that depend on nothing left; what remains is in a cycle.
    let mut left = deps.clone();
    let mut layers = Vec::new();
    loop {
        let ready: Vec<String> = left
            .iter()
            .filter(|(_, d)| d.iter().all(|n| !left.contains_key(n)))
            .map(|(m, _)| m.clone())
            .collect();
        if ready.is_empty() {
            break;
        }
        for m in &ready {
            left.remove(m);
        }
        layers.push(ready);
    }
    for (i, l) in layers.iter().enumerate() {
        println!("layer {i}: {}", l.join(" "));
    }
    assert!(
        left.is_empty(),
        "modules in an import cycle: {:?}",
        left.iter()
            .map(|(m, d)| format!(
                "{m} -> {}",
                d.iter()
                    .filter(|n| left.contains_key(*n))
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(",")
            ))
            .collect::<Vec<_>>()
    );
}
