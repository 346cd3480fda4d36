//! The man pages in docs/man/ are the clap definitions' own: regenerated here, they must be
//! byte for byte the committed ones, and every long flag a command's `--help` shows must be
//! in its page. `man -l` must render them where `man` is installed.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use assert_cmd::Command;

fn committed_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/man")
}

fn pages(dir: &Path) -> BTreeMap<String, String> {
    std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}; run scripts/man.sh", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "1"))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&p).unwrap())
        })
        .collect()
}

fn generated() -> BTreeMap<String, String> {
    let d = tempfile::tempdir().unwrap();
    jitterscope::cli::man::write_pages(d.path()).unwrap();
    pages(d.path())
}

/// The visible subcommands, as `jitterscope --help` lists them.
fn subcommands() -> Vec<String> {
    use clap::CommandFactory;
    jitterscope::cli::Cli::command()
        .get_subcommands()
        .filter(|c| !c.is_hide_set())
        .map(|c| c.get_name().to_string())
        .collect()
}

/// The long flags of a help text: `--name` at the start of a word.
fn long_flags(help: &str) -> Vec<String> {
    let mut flags = Vec::new();
    for (i, _) in help.match_indices("--") {
        let before = help[..i].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '-') {
            continue;
        }
        let name: String = help[i + 2..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect();
        if name.starts_with(|c: char| c.is_ascii_alphabetic()) && !flags.contains(&name) {
            flags.push(name);
        }
    }
    flags
}

#[test]
fn committed_pages_are_the_generated_ones() {
    let committed = pages(&committed_dir());
    let fresh = generated();
    let names = |m: &BTreeMap<String, String>| m.keys().cloned().collect::<Vec<_>>();
    assert_eq!(
        names(&committed),
        names(&fresh),
        "docs/man/ holds other pages than the clap definitions make: run scripts/man.sh"
    );
    for (name, text) in &fresh {
        assert!(
            committed[name] == *text,
            "docs/man/{name} differs from the clap definitions: run scripts/man.sh"
        );
    }
}

#[test]
fn every_command_has_a_page_with_every_long_flag_of_its_help() {
    let fresh = generated();
    let mut commands: Vec<Option<String>> = vec![None];
    commands.extend(subcommands().into_iter().map(Some));
    assert!(commands.len() > 5, "too few subcommands: {commands:?}");
    for sub in commands {
        let page = match &sub {
            None => "jitterscope.1".to_string(),
            Some(s) => format!("jitterscope-{s}.1"),
        };
        let text = fresh
            .get(&page)
            .unwrap_or_else(|| panic!("no page {page}: run scripts/man.sh"))
            .replace("\\-", "-");
        let mut cmd = Command::cargo_bin("jitterscope").unwrap();
        if let Some(s) = &sub {
            cmd.arg(s);
        }
        let out = cmd.arg("--help").output().unwrap();
        assert!(out.status.success(), "{sub:?} --help failed");
        let help = String::from_utf8(out.stdout).unwrap();
        let flags = long_flags(&help);
        assert!(flags.contains(&"help".to_string()), "{page}: {help}");
        for flag in flags {
            assert!(
                text.contains(&format!("--{flag}")),
                "{page} lacks --{flag}, which `--help` shows: run scripts/man.sh"
            );
        }
    }
}

#[test]
fn man_renders_the_pages() {
    if common::missing_tool("man_renders_the_pages", "man", "--version") {
        return;
    }
    for name in ["jitterscope.1", "jitterscope-watch.1"] {
        let path = committed_dir().join(name);
        let out = std::process::Command::new("man")
            .arg("-l")
            .arg(&path)
            .env("MANPAGER", "cat")
            .env("MANWIDTH", "80")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && text.contains("jitterscope"),
            "man -l {} did not render it: {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
