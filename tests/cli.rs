//! The command line as users meet it: validation messages and exit codes, help, completions,
//! a real short run writing its files, and `report` on good and bad run files.

mod common;

use std::sync::Mutex;

use assert_cmd::Command;
use predicates::prelude::*;

use common::usage_error;
use jitterscope::report::runfile::{RunFile, SCHEMA};

static CPUS: Mutex<()> = Mutex::new(());

fn js() -> Command {
    Command::cargo_bin("jitterscope").unwrap()
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
    if common::fewer_cpus_than("a_short_run_prints_both_blocks_and_writes_its_files", 2) {
        return;
    }
    let _cpus = CPUS.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    let out = js()
        .args([
            "--cpus",
            "0,1",
            "--duration",
            "4s",
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
    // Non-TTY output has a progress line each turn of the collector, at most one a second
    // (deciding at the end with every CPU measured, the turns are 1 s, then 2 s, then 3 s
    // apart: a 2 s run may end before its first line).
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
        "not a run file: it starts with byte 0x00, not '{' at offset 0",
    );
}

#[test]
fn verify_wakeups_prints_the_table_and_fails_saying_why() {
    let d = tempfile::tempdir().unwrap();
    let run = d.path().join("watch.json");
    let perf = d.path().join("perf.txt");
    let run_with = |total_ns: u64| {
        std::fs::write(
            &run,
            format!(
                r#"{{"schema": "jitterscope.run/2", "mode": "watch",
                  "run": {{"label": "w", "record_from_ns": 1000000000, "duration_ns": 1000000}},
                  "threads": [{{"tid": 7, "kernel_tid": 7, "pid": 7, "name": "sleeper",
                    "wakeups": {{"count": 1, "total_ns": {total_ns}, "max_ns": {total_ns}}}}}]}}"#
            ),
        )
        .unwrap()
    };
    std::fs::write(
        &perf,
        "\
[000]   1.000100000:  sched:sched_wakeup: comm=sleeper pid=7 prio=120 target_cpu=000
[001]   1.000140000:  sched:sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=sleeper next_pid=7 next_prio=120
[001]   1.000200000:  sched:sched_switch: prev_comm=sleeper prev_pid=7 prev_prio=120 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120
[000]   1.000990000:  sched:sched_wakeup: comm=sleeper pid=7 prio=120 target_cpu=001
[001]   1.001500000:  sched:sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=sleeper next_pid=7 next_prio=120
",
    )
    .unwrap();
    let verify = |tid: &str| {
        js().arg("verify")
            .arg("--run")
            .arg(&run)
            .arg("--perf-script")
            .arg(&perf)
            .args(["--wakeups", tid])
            .output()
            .unwrap()
    };
    // One delay of 40 µs inside the window (1 s to 1.001 s), one of 510 µs across its end:
    // either recorder may count that one, so the total passes from 0.037 ms (40 µs less 5 %,
    // less 1 µs for the delay) to 0.580 ms (550 µs plus 5 %, plus 1 µs for each delay).
    run_with(41_000);
    let out = verify("7");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("| total ms | 0.041 | 0.040 | 1.025 | 0.037–0.580 | ✓ |"),
        "{stdout}"
    );
    assert!(
        stdout.contains("| across the window's ends | | 1 (0.510 ms) | | | not graded |"),
        "{stdout}"
    );
    run_with(550_000);
    let out = verify("7");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    for total_ns in [36_000, 600_000] {
        run_with(total_ns);
        let out = verify("7");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        let why = format!(
            "Error: the independent check failed on thread 7 (sleeper): total wake-up delay: jitterscope {:.3} ms, perf 0.040 ms ({:.2}×), outside 0.037–0.580 ms (±5%, ±1.0µs a delay; perf's 1 delay across the window's ends, 0.510 ms, may be counted by either)",
            total_ns as f64 / 1e6,
            total_ns as f64 / 40_000.0
        );
        assert!(stderr.contains(&why), "{stderr}\nwanted: {why}");
        assert!(String::from_utf8_lossy(&out.stdout).contains("**verdict: FAIL**"));
    }

    let out = verify("8");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("cannot check the wake-up delays of thread 8 in "),
        "{stderr}"
    );
    assert!(
        stderr.contains("thread 8 is not in the run file (its watched threads: 7 sleeper)"),
        "{stderr}"
    );

    let (r, p) = (run.to_str().unwrap(), perf.to_str().unwrap());
    let base = ["verify", "--run", r, "--perf-script", p, "--wakeups", "7"];
    usage_error(&[&base[..], &["--cpu", "1"]].concat(), "--cpu");
    usage_error(
        &[&base[..], &["--wakeup-tolerance", "0.05"]].concat(),
        "not a percentage; give e.g. 5%",
    );
}

/// The same scenario recorded in both attach orders: a short cause outside its tolerance in
/// each order alone passes when the orders put it on either side of perf's, and fails when
/// they are on the sides the attach order does not explain.
#[test]
fn verify_across_both_attach_orders_grades_what_lies_between_them() {
    let d = tempfile::tempdir().unwrap();
    let run = |name: &str, sched_ns: u64| {
        let path = d.path().join(name);
        std::fs::write(
            &path,
            format!(
                r#"{{"schema": "jitterscope.run/2",
                  "run": {{"label": "v", "record_from_ns": 1000000000, "duration_ns": 1000000000,
                          "consumer_cpus": [1], "settings": {{"stall_threshold_ns": 1000}}}},
                  "culprits": [{{"class": "softirq", "name": "SCHED", "detail": "",
                    "measured_ns": {sched_ns}, "inferred_ns": 0,
                    "cpus": [{{"cpu": 1, "measured_ns": {sched_ns}, "inferred_ns": 0}}]}}]}}"#
            ),
        )
        .unwrap();
        path
    };
    // perf: three SCHED softirqs of 400 µs over the window [1 s, 2 s).
    let perf = d.path().join("perf.txt");
    std::fs::write(
        &perf,
        "\
[001]   1.000100000:  irq:softirq_entry: vec=7 [action=SCHED]
[001]   1.000500000:  irq:softirq_exit: vec=7 [action=SCHED]
[001]   1.500000000:  irq:softirq_entry: vec=7 [action=SCHED]
[001]   1.500400000:  irq:softirq_exit: vec=7 [action=SCHED]
[001]   1.990000000:  irq:softirq_entry: vec=7 [action=SCHED]
[001]   1.990400000:  irq:softirq_exit: vec=7 [action=SCHED]
",
    )
    .unwrap();
    // 0.942× of perf's with perf first, 1.058× with jitterscope first.
    let (pf, jf) = (run("pf.json", 1_130_000), run("jf.json", 1_270_000));
    let verify = |main: &std::path::Path, extra: &[&str]| {
        js().arg("verify")
            .arg("--run")
            .arg(main)
            .arg("--perf-script")
            .arg(&perf)
            .args(["--cpu", "1"])
            .args(extra)
            .output()
            .unwrap()
    };
    let alone = verify(&pf, &[]);
    assert_eq!(alone.status.code(), Some(1), "one order alone fails");
    let (jf_s, perf_s) = (jf.to_str().unwrap(), perf.to_str().unwrap());
    let both = ["--swapped-run", jf_s, "--swapped-perf-script", perf_s];
    let out = verify(&pf, &both);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    for want in [
        "##### perf attached first",
        "##### jitterscope attached first",
        "| SCHED | 0.942 | 1.058 | ±5% | ✓ (the handlers' difference) |",
        "**verdict: PASS** (both attach orders)",
    ] {
        assert!(stdout.contains(want), "{want:?} in\n{stdout}");
    }
    // Told the other way round, the ratios lie on the sides the attach order does not put
    // them: not the handlers, a failure.
    let out = verify(
        &pf,
        &[&both[..], &["--order", "jitterscope-first"]].concat(),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("SCHED: 1.06× with perf first, 0.94× with jitterscope first, outside ±5% and not between the two orders"),
        "{stderr}"
    );
    // Half the flags is a usage error.
    let (pf_s, jf_json) = (pf.to_str().unwrap(), jf.to_str().unwrap());
    let base = ["verify", "--run", pf_s, "--perf-script", perf_s];
    usage_error(
        &[&base[..], &["--swapped-run", jf_json]].concat(),
        "--swapped-perf-script",
    );
    // The order belongs to time per cause, not to wake-up delays.
    usage_error(
        &[
            &base[..],
            &["--order", "jitterscope-first", "--wakeups", "7"],
        ]
        .concat(),
        "--wakeups",
    );
}

#[test]
fn files_belong_to_the_invoking_user_under_sudo() {
    use std::os::unix::fs::MetadataExt;
    let test = "files_belong_to_the_invoking_user_under_sudo";
    if common::fewer_cpus_than(test, 2) || common::not_root(test) {
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
    let test = "without_privileges_the_probes_fail_clearly_and_leave_no_files";
    if common::not_root(test) || common::missing_tool(test, "setpriv", "--version") {
        return;
    }
    let _cpus = CPUS.lock().unwrap_or_else(|e| e.into_inner());
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

#[test]
fn cpus_outside_the_process_cpuset_name_the_allowed_ones() {
    let test = "cpus_outside_the_process_cpuset_name_the_allowed_ones";
    if common::fewer_cpus_than(test, 2) || common::missing_tool(test, "taskset", "-V") {
        return;
    }
    let out = std::process::Command::new("taskset")
        .args(["-c", "0", env!("CARGO_BIN_EXE_jitterscope")])
        .args(["--cpus", "0,1", "--no-probes"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--cpus 0,1: CPU 1 is not in this process's allowed CPUs (0)"),
        "{stderr}"
    );
}

#[test]
fn sizes_and_other_values_are_checked_with_the_fix() {
    usage_error(
        &["--cpus", "0,1", "--ringbuf-size", "8X"],
        "unknown unit 'X'; give e.g. 4M",
    );
    usage_error(
        &["--cpus", "0,1", "--ringbuf-size", "100"],
        "below one page",
    );
    usage_error(&["--cpus", "0,1", "--ringbuf-size", "2G"], "above 1G");
    usage_error(
        &["--cpus", "0,1", "--ringbuf-size", "-4M"],
        "--ringbuf-size <RINGBUF_SIZE>': negative",
    );
    usage_error(&["--cpus", "0,1", "--warmup", "2 weeks"], "unknown unit");
    usage_error(
        &["--cpus", "0,1", "--spike-threshold", "0s"],
        "zero is not a usable spike threshold",
    );
    usage_error(&["--cpus", "0,1", "--keep-stalls", "0"], "--keep-stalls");
    usage_error(&["--cpus", "0,1", "--inject", "kworker@1"], "--inject");
    usage_error(&["floor", "--cpus", "0"], "one CPU is not enough");
}

#[test]
fn a_ring_buffer_size_that_is_not_a_power_of_two_is_rounded_up_and_said() {
    if common::fewer_cpus_than(
        "a_ring_buffer_size_that_is_not_a_power_of_two_is_rounded_up_and_said",
        2,
    ) {
        return;
    }
    let _cpus = CPUS.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    // Rounding is decided before the probes load, so an unprivileged check suffices: the
    // note comes whatever happens next.
    let out = js()
        .args([
            "--cpus",
            "0,1",
            "--ringbuf-size",
            "5M",
            "--duration",
            "200ms",
        ])
        .args(["--warmup", "0s", "--no-tui", "--output"])
        .arg(d.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("note: --ringbuf-size 5242880 rounded up to 8388608"),
        "{stderr}"
    );
}

#[test]
fn report_and_compare_refuse_huge_and_bad_files_with_bounded_memory() {
    let d = tempfile::tempdir().unwrap();
    // A sparse file over the limit: refused from its size, never read into memory.
    let huge = d.path().join("huge.json");
    let f = std::fs::File::create(&huge).unwrap();
    f.set_len(jitterscope::report::runfile::MAX_RUN_FILE_BYTES + 1)
        .unwrap();
    let out = js().arg("report").arg(&huge).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("not a run file: more than 256 MiB read (the run-file limit)"),
        "{stderr}"
    );
    // compare names the bad file among good ones.
    let good = d.path().join("good.json");
    std::fs::write(&good, sample_run_json()).unwrap();
    let bad = d.path().join("bad.json");
    std::fs::write(&bad, "{\"schema\": \"jitterscope.run/1\", \"run\": ").unwrap();
    for args in [
        vec![good.clone(), bad.clone()],
        vec![good.clone(), huge.clone()],
        vec![good.clone(), d.path().join("missing.json")],
    ] {
        let out = js().arg("compare").args(&args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.contains(args[1].to_str().unwrap()),
            "{args:?}: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    js().args(["compare"])
        .arg(&good)
        .arg(&good)
        .assert()
        .success();
    // A directory given as a run file.
    let out = js().arg("report").arg(d.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read run file"));
}

/// A valid run file: the fuzz seed that `tests/props.rs` generates from the library's own
/// writer and checks like a golden file.
fn sample_run_json() -> String {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fuzz/seeds/run_file/valid_no_probes.json"
    );
    std::fs::read_to_string(path).unwrap()
}

#[test]
fn report_output_never_follows_a_planted_symlink() {
    let d = tempfile::tempdir().unwrap();
    let run = d.path().join("run.json");
    std::fs::write(&run, sample_run_json()).unwrap();
    let victim = d.path().join("victim");
    std::fs::write(&victim, b"keep").unwrap();
    let link = d.path().join("report.md");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    js().arg("report")
        .arg(&run)
        .args(["--format", "markdown", "-o"])
        .arg(&link)
        .assert()
        .success();
    // The link was replaced by the report; what it pointed at is untouched.
    assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
    let meta = std::fs::symlink_metadata(&link).unwrap();
    assert!(meta.file_type().is_file());
    assert!(std::fs::read_to_string(&link)
        .unwrap()
        .starts_with("# jitterscope run"));
    // An output path in a directory that does not exist: one clear error.
    let out = js()
        .arg("report")
        .arg(&run)
        .args(["-o"])
        .arg(d.path().join("no/such/dir/r.txt"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("cannot write"), "{stderr}");
}

/// jitterscope works with CAP_BPF + CAP_PERFMON (+ CAP_SYS_NICE for pinning) instead of full
/// root: every other capability dropped, as an unprivileged user.
#[test]
fn bpf_perfmon_and_sys_nice_are_enough_without_root() {
    use std::process::Command as Std;
    if common::skip_bpf("bpf_perfmon_and_sys_nice_are_enough_without_root")
        || common::fewer_cpus_than("bpf_perfmon_and_sys_nice_are_enough_without_root", 2)
    {
        return;
    }
    if unsafe { libc::geteuid() } != 0 || Std::new("setpriv").arg("--version").output().is_err() {
        panic!("this test needs root and setpriv (scripts/deps.sh installs util-linux)");
    }
    let _cpus = CPUS.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("runs");
    std::fs::create_dir(&dir).unwrap();
    std::os::unix::fs::chown(&dir, Some(65534), Some(65534)).unwrap();
    let caps = "+bpf,+perfmon,+sys_nice";
    let out = Std::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(format!("--inh-caps=-all,{caps}"))
        .arg(format!("--ambient-caps=-all,{caps}"))
        .arg("--bounding-set=-all,+bpf,+perfmon,+sys_nice")
        .arg(env!("CARGO_BIN_EXE_jitterscope"))
        .args(["--cpus", "0,1", "--duration", "1s", "--warmup", "200ms"])
        .args(["--no-tui", "--output"])
        .arg(&dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("kernel probes attached"), "{stdout}");
    // What these capabilities do not give is said, not shown as zero.
    assert!(
        stdout
            .contains("BPF run time unknown (the kernel's run-time statistics need CAP_SYS_ADMIN)"),
        "{stdout}"
    );
    let run = RunFile::read(&common::run_file_in(&dir)).unwrap();
    let probes = run.probes.unwrap();
    assert!(probes.events.iter().map(|e| e.count).sum::<u64>() > 0);
    assert!(!probes.stats_enabled);
    // A watch needs no more (its task iterator included).
    let mut target = Std::new("sleep").arg("30").spawn().unwrap();
    let wdir = d.path().join("watch");
    std::fs::create_dir(&wdir).unwrap();
    std::os::unix::fs::chown(&wdir, Some(65534), Some(65534)).unwrap();
    let out = Std::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(format!("--inh-caps=-all,{caps}"))
        .arg(format!("--ambient-caps=-all,{caps}"))
        .arg("--bounding-set=-all,+bpf,+perfmon,+sys_nice")
        .arg(env!("CARGO_BIN_EXE_jitterscope"))
        .args([
            "watch",
            "--pid",
            &target.id().to_string(),
            "--duration",
            "1s",
        ])
        .args(["--no-tui", "--output"])
        .arg(&wdir)
        .output()
        .unwrap();
    let _ = target.kill();
    let _ = target.wait();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let watch = RunFile::read(&common::run_file_in(&wdir)).unwrap();
    assert_eq!(watch.threads.len(), 1, "{:?}", watch.threads);
}

#[test]
fn attribution_at_the_end_refuses_what_it_cannot_serve() {
    let dir = tempfile::tempdir().unwrap();
    let o = dir.path().to_str().unwrap();
    usage_error(
        &[
            "--cpus",
            "0,1",
            "--attribution",
            "end",
            "--no-probes",
            "--output",
            o,
        ],
        "--attribution end with --no-probes: without probes nothing is attributed",
    );
    usage_error(
        &[
            "--cpus",
            "0,1",
            "--attribution",
            "end",
            "--metrics",
            "/tmp/js-cli-test.prom",
            "--output",
            o,
        ],
        "--attribution end with --metrics: the metrics file is rewritten while the run goes on",
    );
    usage_error(
        &["--cpus", "0,1", "--attribution", "later", "--output", o],
        "invalid value 'later' for '--attribution <ATTRIBUTION>'",
    );
}

#[test]
fn check_refuses_what_it_cannot_check_with_a_usage_error() {
    usage_error(&["check", "--cpus", "64"], "CPU 64 does not exist");
    usage_error(
        &["check", "--cpus", "1", "--pid", "4000000000"],
        "--pid 4000000000: no such process",
    );
    usage_error(&["check", "--cpus", "1", "--format", "xml"], "xml");
    usage_error(&["check", "--cpus", "1", "--fifo", "--pid", "1"], "--pid");
    usage_error(&["check", "--cpus", "1", "--duration", "0s"], "--duration");
}

#[test]
fn check_of_a_command_that_cannot_start_is_a_usage_error() {
    usage_error(
        &["check", "--cpus", "1", "--", "/nonexistent/bin"],
        "-- /nonexistent/bin: cannot start it",
    );
}

#[test]
fn after_reboot_is_only_for_the_boot_step() {
    if common::fewer_cpus_than("after_reboot_is_only_for_the_boot_step", 2) {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let o = d.path().to_str().unwrap();
    usage_error(
        &[
            "workshop",
            "--cpus",
            "0,1",
            "--after-reboot",
            "run.json",
            "--output",
            o,
        ],
        "--after-reboot compares runs of the BOOT step: give --step boot too",
    );
    usage_error(
        &[
            "workshop",
            "--cpus",
            "0,1",
            "--step",
            "pinned",
            "--after-reboot",
            "run.json",
            "--output",
            o,
        ],
        "give --step boot too",
    );
}

/// A run file of the BOOT step on CPUs 0,1 (`tests/golden/run_v1.json` reshaped) with
/// `config` and the culprits on CPU 1 `(class, name, episodes, ns)`.
fn boot_run_file(
    path: &std::path::Path,
    config: &jitterscope::system::config::Configured,
    culprits: &[(&str, &str, u64, u64)],
) {
    let golden = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/run_v1.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(golden).unwrap()).unwrap();
    v["run"]["label"] = "workshop-boot".into();
    v["run"]["cpus"] = serde_json::json!([0, 1]);
    v["run"]["producer_cpu"] = 0.into();
    v["run"]["consumer_cpus"] = serde_json::json!([1]);
    v["run"]["duration_ns"] = 1_000_000_000u64.into();
    v["culprits"] = culprits
        .iter()
        .map(|(class, name, n, ns)| {
            serde_json::json!({"class": class, "name": name, "detail": "", "episodes": n,
                "measured_ns": ns, "longest_ns": ns, "share": 0.1, "advice": "",
                "cpus": [{"cpu": 1, "measured_ns": ns, "episodes": n}]})
        })
        .collect();
    v["config"] = serde_json::to_value(config).unwrap();
    std::fs::write(path, v.to_string()).unwrap();
}

#[test]
fn after_reboot_compares_a_saved_pair_without_measuring() {
    if common::fewer_cpus_than("after_reboot_compares_a_saved_pair_without_measuring", 2) {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let before = jitterscope::system::config::Configured {
        kernel: "6.18.0".into(),
        cmdline: "console=ttyS0 quiet".into(),
        online: vec![0, 1],
        ..Default::default()
    };
    let mut after = before.clone();
    after.cmdline = "console=ttyS0 quiet nohz_full=1 rcu_nocbs=1".into();
    after.boot.nohz_full = Some(vec![1]);
    after.boot.rcu_nocbs = Some(vec![1]);
    after.nohz_full = Some(vec![1]);
    let (a, b) = (d.path().join("before.json"), d.path().join("after.json"));
    boot_run_file(
        &a,
        &before,
        &[("timer_tick", "scheduler tick", 250, 1_100_000)],
    );
    boot_run_file(&b, &after, &[]);
    let out = js()
        .args([
            "workshop",
            "--cpus",
            "0,1",
            "--step",
            "boot",
            "--after-reboot",
        ])
        .arg(&a)
        .arg(&b)
        .arg("--output")
        .arg(d.path().join("runs"))
        .env("JITTERSCOPE_JOURNAL", d.path().join("restore.json"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // isolcpus= and irqaffinity= were advised too and are not on the line after: exit 1.
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    for expected in [
        "nohz_full=1 added: scheduler tick on CPU 1 250/s → 0/s",
        "- gone: timer_tick scheduler tick — 250/s, 1.10ms/s → none",
        "- nohz_full=1 took ✓",
        "- isolcpus=managed_irq,domain,1 did not take ✗",
        "workshop: 2 of 4 checks passed",
    ] {
        assert!(stdout.contains(expected), "{expected:?} not in:\n{stdout}");
    }
    // Nothing was measured: no run file written.
    assert!(!stdout.contains("=== BOOT ==="), "{stdout}");
    assert!(
        stderr.contains("2 advised boot parameter(s) did not take"),
        "{stderr}"
    );
}

#[test]
fn after_reboot_names_a_file_it_cannot_read() {
    if common::fewer_cpus_than("after_reboot_names_a_file_it_cannot_read", 2) {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let missing = d.path().join("gone.json");
    let out = js()
        .args([
            "workshop",
            "--cpus",
            "0,1",
            "--step",
            "boot",
            "--after-reboot",
        ])
        .arg(&missing)
        .arg("--output")
        .arg(d.path().join("runs"))
        .env("JITTERSCOPE_JOURNAL", d.path().join("restore.json"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "--after-reboot {}: cannot read it as a run file",
            missing.display()
        )) && stderr.contains("No such file"),
        "{stderr}"
    );
}

/// `report run.json | head -1`: the reader going away ends the report quietly, with the
/// status a shell gives a tool SIGPIPE ended, not an error message.
#[test]
fn a_reader_that_goes_away_ends_the_report_quietly() {
    let run = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/run_v1.json");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_jitterscope"))
        .args(["report", run])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The only reading end closed before the report writes: its first write fails (EPIPE).
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(141), "{stderr}");
    assert_eq!(stderr, "");
}
