//! The layers as docs/design.md draws them, checked from the source: a module may use modules of
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
    ("verify", 5),
    ("check", 5),
    // The workshop's BOOT step runs `check`.
    ("workshop", 6),
    ("cli", 7),
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

/// Where a file of `src/session/` stands at the stall-source seam: the session's own parts
/// (the loop, the finish, the seam, what they share) name no source; each source's files name
/// no other source.
fn session_part(rel: &str) -> &str {
    match rel.split('/').next().unwrap_or("") {
        "run" | "prepare.rs" => "run",
        "watch" => "watch",
        "mod.rs" => "entry",
        _ => "shared",
    }
}

/// The sources of `src/session/` a file names, by the module paths that reach them.
fn sources_named(text: &str) -> Vec<&'static str> {
    let mut out = Vec::new();
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or("");
        for (source, paths) in [
            ("run", ["session::run", "super::run", "super::super::run"]),
            (
                "watch",
                ["session::watch", "super::watch", "super::super::watch"],
            ),
        ] {
            if paths.iter().any(|p| names_module(code, p)) && !out.contains(&source) {
                out.push(source);
            }
        }
    }
    out
}

/// `code` names the module `path` (not one whose name only begins with its last part).
fn names_module(code: &str, path: &str) -> bool {
    code.match_indices(path).any(|(i, _)| {
        let next = code[i + path.len()..].chars().next();
        !next.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

#[test]
fn the_session_loop_and_finish_name_no_source_and_no_source_names_another() {
    let session = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/session");
    let mut files = Vec::new();
    rust_files(&session, &mut files);
    let mut wrong = Vec::new();
    for f in &files {
        let rel = f
            .strip_prefix(&session)
            .unwrap()
            .to_string_lossy()
            .to_string();
        let part = session_part(&rel);
        if part == "entry" {
            // The entry points start each kind of session: they name both.
            continue;
        }
        let text = std::fs::read_to_string(f).unwrap();
        for named in sources_named(&text) {
            if named != part {
                wrong.push(format!("session/{rel} ({part}) names the {named} source"));
            }
        }
    }
    assert!(wrong.is_empty(), "across the stall-source seam: {wrong:#?}");
    assert!(
        files.iter().any(|f| f.ends_with("session/run/mod.rs"))
            && files.iter().any(|f| f.ends_with("session/watch/source.rs")),
        "the two sources are where this test looks for them"
    );
}

#[test]
fn the_seam_checker_sees_a_source_named() {
    assert_eq!(
        sources_named("use super::super::watch::Watched;"),
        ["watch"]
    );
    assert_eq!(
        sources_named("use crate::attribution::watch::WatchBook;"),
        Vec::<&str>::new()
    );
    assert_eq!(
        sources_named("use super::runfile::WatchStopped;"),
        Vec::<&str>::new()
    );
    assert_eq!(session_part("run/turn.rs"), "run");
    assert_eq!(session_part("record.rs"), "shared");
}
