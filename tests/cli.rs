//! The command line as users meet it: validation messages and exit codes, help, completions,
//! a real short run writing its files, and `report` on good and bad run files.

use std::sync::Mutex;

use assert_cmd::Command;
use predicates::prelude::*;

use jitterscope::report::runfile::{RunFile, SCHEMA};

static CPUS: Mutex<()> = Mutex::new(());

fn js() -> Command {
    Command::cargo_bin("jitterscope").unwrap()
}

fn nproc() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// One line on stderr that names the value and the fix, exit code 2.
fn usage_error(args: &[&str], expect: &str) {
    let out = js().args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(
        stderr.contains(expect),
        "{args:?}: expected {expect:?} in {stderr:?}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn invalid_cpu_lists_are_usage_errors_naming_the_value() {
    let d = tempfile::tempdir().unwrap();
    let o = d.path().to_str().unwrap();
    usage_error(&["--cpus", "", "--output", o], "--cpus '': no CPUs given");
    usage_error(
        &["--cpus", "1", "--output", o],
        "--cpus 1: one CPU is not enough",
    );
    usage_error(
        &["--cpus", "1,1", "--output", o],
        "--cpus 1,1: CPU 1 is given twice; the producer and each consumer need a CPU of their own",
    );
    usage_error(
        &["--cpus", "a,b", "--output", o],
        "--cpus a,b: 'a' is not a CPU number",
    );
    usage_error(
        &["--cpus", "1,99", "--output", o],
        "--cpus 1,99: CPU 99 does not exist; this machine has CPUs 0-",
    );
    usage_error(
        &["--cpus", "-1", "--output", o],
        "--cpus -1: '-1' is not a CPU number",
    );
    usage_error(
        &["--cpus", "1-", "--output", o],
        "--cpus 1-: '1-' is not a complete range",
    );
    usage_error(&["--output", o], "--cpus is required");
    // The same checks behind the explicit subcommand.
    usage_error(
        &["run", "--cpus", "1,1", "--output", o],
        "CPU 1 is given twice",
    );
}

#[test]
fn invalid_times_are_usage_errors() {
    usage_error(
        &["--cpus", "0,1", "--duration", "0s"],
        "zero is not a usable run duration",
    );
    usage_error(&["--cpus", "0,1", "--duration", "-5s"], "negative");
    usage_error(&["--cpus", "0,1", "--duration", "10"], "missing unit");
    usage_error(
        &["--cpus", "0,1", "--interval", "1h"],
        "above the largest message interval",
    );
    usage_error(
        &["--cpus", "0,1", "--interval", "10sec"],
        "unknown unit 'sec'",
    );
    usage_error(
        &["--cpus", "0,1", "--stall-threshold", "0us"],
        "zero is not a usable stall threshold",
    );
}

#[test]
fn an_unwritable_output_is_a_usage_error() {
    let d = tempfile::tempdir().unwrap();
    let file = d.path().join("a-file");
    std::fs::write(&file, b"x").unwrap();
    usage_error(
        &["--cpus", "0,1", "--output", file.to_str().unwrap()],
        "exists and is not a directory",
    );
    let below_file = file.join("sub");
    usage_error(
        &["--cpus", "0,1", "--output", below_file.to_str().unwrap()],
        "cannot create the directory",
    );
}

#[test]
fn help_shows_examples_and_completions_generate() {
    js().arg("--help")
        .assert()
        .success()
        .stdout(predicate::str::contains("Examples:").and(predicate::str::contains("--cpus 1,3")));
    js().args(["completions", "bash"])
        .assert()
        .success()
        .stdout(predicate::str::contains("_jitterscope()"));
}

#[test]
fn a_short_run_prints_both_blocks_and_writes_its_files() {
    if nproc() < 2 {
        eprintln!("skipped: needs 2 CPUs");
        return;
    }
    let _cpus = CPUS.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    let out = js()
        .args([
            "--cpus",
            "0,1",
            "--duration",
            "2s",
            "--warmup",
            "200ms",
            "--label",
            "ci run",
            "--no-tui",
        ])
        .arg("--output")
        .arg(d.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for needle in [
        "== Accumulator Message Transit Latency (ns) ==",
        "== Accumulator Inter-Message Latency (ns) ==",
        "99.9999%",
        "== Stalls (loop gaps over",
        "threads: js-producer=",
    ] {
        assert!(stdout.contains(needle), "missing {needle:?} in\n{stdout}");
    }
    // Non-TTY output has one progress line per second.
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("[") && l.contains("msg/s")),
        "{stdout}"
    );

    let files: Vec<_> = std::fs::read_dir(d.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    let json = files
        .iter()
        .find(|f| f.ends_with(".json") && !f.ends_with(".trace.json"))
        .expect("a run file");
    for suffix in [".md", ".svg", ".trace.json"] {
        assert_eq!(
            files.iter().filter(|f| f.ends_with(suffix)).count(),
            1,
            "{suffix}: {files:?}"
        );
    }
    assert!(json.starts_with("ci_run-"), "{json}");
    assert_eq!(
        files.iter().filter(|f| f.ends_with(".hgrm")).count(),
        2,
        "{files:?}"
    );
    assert_eq!(
        files.iter().filter(|f| f.ends_with(".hlog")).count(),
        1,
        "{files:?}"
    );
    assert!(
        !files.iter().any(|f| f.starts_with('.')),
        "temporary files left: {files:?}"
    );

    let path = d.path().join(json);
    let run = RunFile::read(&path).unwrap();
    assert_eq!(run.schema, SCHEMA);
    assert_eq!(run.run.label, "ci run");
    assert_eq!(
        (run.run.producer_cpu, run.run.consumer_cpus.clone()),
        (0, vec![1])
    );
    assert_eq!(run.histograms.len(), 1);
    let t = &run.histograms[0].transit;
    assert!(t.count > 1_000 && t.min <= t.max, "{t:?}");
    assert!(t.percentile("50").unwrap() <= t.percentile("99.9999").unwrap());
    assert!(run.stall_summary.count as usize >= run.stalls.len());
    // The raw JSON has the contract's keys.
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    for key in ["schema", "run", "histograms", "stalls", "culprits", "lost"] {
        assert!(v.get(key).is_some(), "run file lacks {key}");
    }
    assert!(v["histograms"][0]["transit"]["percentiles"]["99.99"].is_u64());
    assert!(v["lost"]["ring_buffer_drops"].is_u64());

    // And `report` renders it again without running anything.
    js().arg("report")
        .arg(&path)
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "== Accumulator Message Transit Latency (ns) ==",
        ));
}

#[test]
fn report_on_bad_run_files_fails_clearly() {
    let d = tempfile::tempdir().unwrap();
    let check = |name: &str, content: Option<&str>, expect: &str| {
        let p = d.path().join(name);
        if let Some(c) = content {
            std::fs::write(&p, c).unwrap();
        }
        let out = js().arg("report").arg(&p).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}: {stderr}");
        assert!(
            stderr.contains(expect),
            "{name}: expected {expect:?} in {stderr:?}"
        );
        assert!(!stderr.contains("panicked"));
    };
    check("missing.json", None, "No such file or directory");
    check("empty.json", Some(""), "it is empty");
    check(
        "truncated.json",
        Some("{\"schema\": \"jitterscope.run/1\", \"run\": {"),
        "truncated",
    );
    check(
        "other.json",
        Some("{\"schema\": \"jitterscope.run/9\"}"),
        "schema is \"jitterscope.run/9\"",
    );
    check("notours.json", Some("{\"hello\": 1}"), "no \"schema\" key");
    check(
        "garbage.json",
        Some("\u{0}\u{1}binary"),
        "not a jitterscope run file",
    );
}

#[test]
fn files_belong_to_the_invoking_user_under_sudo() {
    use std::os::unix::fs::MetadataExt;
    if nproc() < 2 || unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root (chown) and 2 CPUs");
        return;
    }
    let _cpus = CPUS.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("new/runs");
    js().args(["--cpus", "0,1", "--duration", "200ms", "--warmup", "0s"])
        .arg("--output")
        .arg(&dir)
        .env("SUDO_UID", "65534")
        .env("SUDO_GID", "65534")
        .assert()
        .success();
    for p in [d.path().join("new"), dir.clone()] {
        assert_eq!(
            std::fs::metadata(&p).unwrap().uid(),
            65534,
            "{}",
            p.display()
        );
    }
    for e in std::fs::read_dir(&dir).unwrap() {
        let m = e.unwrap().metadata().unwrap();
        assert_eq!((m.uid(), m.gid(), m.mode() & 0o777), (65534, 65534, 0o644));
    }
}

#[test]
fn without_privileges_the_probes_fail_clearly_and_leave_no_files() {
    use std::process::Command as Std;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 || Std::new("setpriv").arg("--version").output().is_err() {
        eprintln!("skipped: needs root and setpriv to drop privileges");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("runs");
    std::fs::create_dir(&dir).unwrap();
    std::os::unix::fs::chown(&dir, Some(65534), Some(65534)).unwrap();
    let out = Std::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
        ])
        .arg(env!("CARGO_BIN_EXE_jitterscope"))
        .args(["--cpus", "0,1", "--duration", "1s", "--output"])
        .arg(&dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("permission denied (EPERM)"), "{stderr}");
    assert!(stderr.contains("CAP_BPF+CAP_PERFMON"), "{stderr}");
    assert!(stderr.contains("--no-probes"), "{stderr}");
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        0,
        "files left behind"
    );
}
