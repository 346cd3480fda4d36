//! The layers as DESIGN.md draws them, checked from the source: a module may use modules of
//! the layers below its own, never one above and never a sibling of its own layer.

use std::collections::BTreeMap;

/// Layer of each top-level module of `src/`, bottom first.
const LAYERS: &[(&str, u8)] = &[
    // The vocabulary, and beside it units and formatting, the latency summary and thin OS
    // primitives, which speak it.
    ("model", 0),
    ("units", 1),
    ("summary", 1),
    ("platform", 1),
    ("signals", 1),
    // Side by side and unaware of each other.
    ("workload", 2),
    ("probe", 2),
    ("attribution", 2),
    ("system", 2),
    // Both render verdicts.
    ("report", 3),
    ("live", 3),
    ("session", 4),
    ("workshop", 5),
    ("verify", 5),
    ("cli", 6),
];

fn layer(module: &str) -> Option<u8> {
    LAYERS.iter().find(|l| l.0 == module).map(|l| l.1)
}

/// `src/probe/decode.rs` → `probe`; `src/model.rs` → `model`.
fn module_of(path: &std::path::Path, src: &std::path::Path) -> String {
    let rel = path.strip_prefix(src).unwrap();
    let first = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy();
    first.trim_end_matches(".rs").to_string()
}

fn rust_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Every `crate::x` a file names (outside comments), as top-level module names.
fn uses(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(i) = rest.find("crate::") {
            let after = &rest[i + "crate::".len()..];
            let name: String = after
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            out.push(name);
            rest = after;
        }
    }
    out
}

#[test]
fn no_module_uses_a_layer_above_it_or_a_sibling() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut wrong: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for f in &files {
        let me = module_of(f, &src);
        if me == "lib" || me == "main" {
            continue;
        }
        let mine =
            layer(&me).unwrap_or_else(|| panic!("{me} ({}) has no layer in LAYERS", f.display()));
        let text = std::fs::read_to_string(f).unwrap();
        for used in uses(&text) {
            if used == me {
                continue;
            }
            let theirs = layer(&used).unwrap_or_else(|| {
                panic!("{} uses crate::{used}, which has no layer", f.display())
            });
            if theirs >= mine {
                wrong
                    .entry(format!("{} (layer {mine})", f.display()))
                    .or_default()
                    .push(format!("{used} (layer {theirs})"));
            }
        }
    }
    assert!(wrong.is_empty(), "imports against the layers: {wrong:#?}");
}

#[test]
fn the_checker_sees_a_wrong_import() {
    assert_eq!(
        uses("use crate::live::LiveModel; // crate::session"),
        ["live"]
    );
    assert!(layer("report") >= layer("attribution"));
}
