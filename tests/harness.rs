//! The suite's own rules: a skip is a failure in CI unless the machine lacks hardware, every
//! skip is listed at the end of `scripts/test.sh`, `.ci/run` runs in CI mode, and a golden
//! test never passes while rewriting its file.

mod common;

use std::path::Path;
use std::process::Command;

use common::{ci_value, golden_at, skip_in, Lack};

#[test]
fn ci_is_true_or_1_in_any_case() {
    for v in ["true", "TRUE", "True", "1", " true\n"] {
        assert!(ci_value(Some(v)), "{v:?}");
    }
    for v in [None, Some(""), Some("false"), Some("0"), Some("yes")] {
        assert!(!ci_value(v), "{v:?}");
    }
}

fn log_of(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("skips.log")).unwrap_or_default()
}

#[test]
fn a_missing_piece_of_hardware_is_a_listed_skip_also_in_ci() {
    let d = tempfile::tempdir().unwrap();
    let log = d.path().join("skips.log");
    skip_in("t1", "1 CPU(s), needs 2", Lack::Hardware, true, Some(&log));
    skip_in(
        "t2",
        "no virtio-rng device",
        Lack::Hardware,
        false,
        Some(&log),
    );
    assert_eq!(
        log_of(d.path()),
        "harness::t1\t1 CPU(s), needs 2\nharness::t2\tno virtio-rng device\n"
    );
}

#[test]
fn a_missing_precondition_fails_in_ci_and_is_a_listed_skip_elsewhere() {
    let d = tempfile::tempdir().unwrap();
    let log = d.path().join("skips.log");
    let failed = std::panic::catch_unwind(|| {
        skip_in(
            "t",
            "`man` is not installed",
            Lack::Precondition,
            true,
            Some(&log),
        )
    })
    .expect_err("a missing precondition in CI fails the test");
    let message = failed.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(
        message.contains("harness::t: `man` is not installed"),
        "{message}"
    );
    assert_eq!(log_of(d.path()), "", "a failure is not a skip");
    skip_in(
        "t",
        "`man` is not installed",
        Lack::Precondition,
        false,
        Some(&log),
    );
    assert_eq!(log_of(d.path()), "harness::t\t`man` is not installed\n");
}

fn summary(log: &Path) -> String {
    let out = Command::new("bash")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/skips.sh"))
        .arg(log)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn test_sh_ends_with_every_skip_by_name_and_their_count() {
    let d = tempfile::tempdir().unwrap();
    let log = d.path().join("skips.log");
    assert_eq!(summary(&log), "test.sh: 0 skipped\n", "no log: no skip");
    std::fs::write(&log, "").unwrap();
    assert_eq!(summary(&log), "test.sh: 0 skipped\n");
    skip_in(
        "x",
        "no virtio-rng device",
        Lack::Hardware,
        true,
        Some(&log),
    );
    skip_in("y", "1 CPU(s), needs 2", Lack::Hardware, true, Some(&log));
    assert_eq!(
        summary(&log),
        "test.sh: 2 skipped: harness::x (no virtio-rng device), harness::y (1 CPU(s), needs 2)\n"
    );
    // test.sh prints it from an EXIT trap, so also after a failing check.
    let test_sh =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/test.sh")).unwrap();
    assert!(test_sh.contains("trap skips_summary EXIT"), "{test_sh}");
}

/// `.ci/run` runs `scripts/test.sh` with CI=true whatever the caller's environment says.
#[test]
fn ci_run_sets_ci_itself() {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join(".ci")).unwrap();
    std::fs::create_dir_all(d.path().join("scripts")).unwrap();
    std::fs::copy(
        concat!(env!("CARGO_MANIFEST_DIR"), "/.ci/run"),
        d.path().join(".ci/run"),
    )
    .unwrap();
    std::fs::write(
        d.path().join("scripts/test.sh"),
        "echo \"CI=${CI:-unset} args=$*\"\n",
    )
    .unwrap();
    let out = Command::new("bash")
        .arg(d.path().join(".ci/run"))
        .env_remove("CI")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "CI=true args=\n");
}

#[test]
fn a_golden_test_rewrites_its_file_and_fails_saying_so() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("out.txt");
    let path = path.to_str().unwrap();
    std::fs::write(path, "old\n").unwrap();
    golden_at(path, "old\n", false);
    let failed = std::panic::catch_unwind(|| golden_at(path, "new\n", true))
        .expect_err("a golden test fails when it rewrites its file");
    let message = failed.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(
        message.contains(&format!("UPDATE_GOLDEN is set: rewrote {path}")),
        "{message}"
    );
    assert_eq!(std::fs::read_to_string(path).unwrap(), "new\n");
    // Unchanged output fails just the same: the mode never passes.
    assert!(std::panic::catch_unwind(|| golden_at(path, "new\n", true)).is_err());
}
