//! Faults a production run meets: signals at every stage, SIGKILL, a CPU taken away mid-run,
//! a second jitterscope on the same CPUs, a closed terminal, a full disk, and switch and
//! hrtimer storms on a measured CPU. Each test checks what is left behind: exit code, files
//! complete or absent, nothing attached in the kernel, settings restored.

mod common;

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use jitterscope::model::{CulpritClass, Ended};
use jitterscope::report::runfile::RunFile;

/// jitterscope with the default action for the signals it handles, whatever the test runner
/// inherited (a background job of a script starts with SIGINT ignored, and an ignored
/// signal stays ignored, see `signals_started_ignored_stay_ignored`).
fn js() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_jitterscope"));
    with_dispositions(
        &mut cmd,
        libc::SIG_DFL,
        &[libc::SIGINT, libc::SIGTERM, libc::SIGHUP],
    );
    cmd
}

/// Sets the child's action for `sigs` to `action` (SIG_DFL or SIG_IGN) before it executes.
fn with_dispositions(cmd: &mut Command, action: libc::sighandler_t, sigs: &[i32]) {
    let sigs = sigs.to_vec();
    // SAFETY: between fork and exec only signal(2), which is async-signal-safe, is called.
    unsafe {
        cmd.pre_exec(move || {
            for &sig in &sigs {
                libc::signal(sig, action);
            }
            Ok(())
        });
    }
}

fn root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// A measured run on CPUs 0,1 writing into `dir`, its output into `dir/../NAME.out/.err`.
fn start_run(dir: &Path, extra: &[&str]) -> Child {
    let parent = dir.parent().unwrap();
    js().args(["--cpus", "0,1", "--no-tui", "--output"])
        .arg(dir)
        .args(extra)
        .stdout(std::fs::File::create(parent.join("run.out")).unwrap())
        .stderr(std::fs::File::create(parent.join("run.err")).unwrap())
        .spawn()
        .unwrap()
}

fn output_of(dir: &Path) -> (String, String) {
    let parent = dir.parent().unwrap();
    (
        std::fs::read_to_string(parent.join("run.out")).unwrap_or_default(),
        std::fs::read_to_string(parent.join("run.err")).unwrap_or_default(),
    )
}

/// Waits until the run's standard output contains `needle`.
fn wait_for_output(dir: &Path, needle: &str, timeout: Duration) {
    let t = Instant::now();
    while !output_of(dir).0.contains(needle) {
        assert!(
            t.elapsed() < timeout,
            "no {needle:?} within {timeout:?}: {:?}",
            output_of(dir)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn signal(child: &Child, sig: i32) {
    // SAFETY: signalling our own child by its pid.
    unsafe { libc::kill(child.id() as i32, sig) };
}

fn wait_exit(child: &mut Child, timeout: Duration) -> Option<i32> {
    wait_status(child, timeout).code()
}

fn wait_status(child: &mut Child, timeout: Duration) -> std::process::ExitStatus {
    let t = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if t.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            panic!("jitterscope did not end within {timeout:?} (killed)");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Every file of a run is there, complete, with no temporary file left: the run file parses,
/// and the other formats and the histograms sit beside it.
fn complete_files(dir: &Path) -> RunFile {
    let names = names_in(dir);
    assert!(
        !names.iter().any(|n| n.starts_with('.')),
        "temporary files left: {names:?}"
    );
    for suffix in [
        ".md",
        ".svg",
        ".trace.json",
        ".transit.hgrm",
        ".inter_message.hgrm",
        ".hlog",
    ] {
        assert_eq!(
            names.iter().filter(|n| n.ends_with(suffix)).count(),
            1,
            "{suffix} in {names:?}"
        );
    }
    let run = RunFile::read(&run_file_in(dir)).expect("the run file parses");
    let trace: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            dir.join(names.iter().find(|n| n.ends_with(".trace.json")).unwrap()),
        )
        .unwrap(),
    )
    .expect("the Perfetto trace is complete JSON");
    assert!(trace.is_object() || trace.is_array());
    run
}

/// Kernel object ids a process holds: BPF programs, maps and links, from its fdinfo.
fn bpf_ids(pid: u32) -> Vec<(&'static str, u32)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(format!("/proc/{pid}/fdinfo"))
        .into_iter()
        .flatten()
        .flatten()
    {
        let text = std::fs::read_to_string(e.path()).unwrap_or_default();
        for line in text.lines() {
            for kind in ["prog_id", "map_id", "link_id"] {
                if let Some(v) = line.strip_prefix(&format!("{kind}:")) {
                    if let Ok(id) = v.trim().parse() {
                        out.push((kind, id));
                    }
                }
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// Whether a BPF object still exists in the kernel (held by anyone).
fn bpf_object_exists(kind: &str, id: u32) -> bool {
    // SAFETY: plain syscall wrappers; a returned fd is closed at once.
    let fd = unsafe {
        match kind {
            "prog_id" => libbpf_sys::bpf_prog_get_fd_by_id(id),
            "map_id" => libbpf_sys::bpf_map_get_fd_by_id(id),
            _ => libbpf_sys::bpf_link_get_fd_by_id(id),
        }
    };
    if fd >= 0 {
        unsafe { libc::close(fd) };
        true
    } else {
        false
    }
}

/// The kernel frees BPF objects asynchronously (RCU): allow it a moment.
fn assert_released(ids: &[(&str, u32)]) {
    let t = Instant::now();
    loop {
        let left: Vec<_> = ids
            .iter()
            .filter(|(k, id)| bpf_object_exists(k, *id))
            .collect();
        if left.is_empty() {
            return;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "still in the kernel after the process ended: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn pinned_bpf_entries() -> Vec<String> {
    names_in(Path::new("/sys/fs/bpf"))
        .into_iter()
        .filter(|n| n.contains("js_") || n.contains("jitterscope"))
        .collect()
}

#[test]
fn a_signal_at_any_stage_stops_the_run_cleanly() {
    if skip_bpf("a_signal_at_any_stage_stops_the_run_cleanly")
        || fewer_cpus_than("a_signal_at_any_stage_stops_the_run_cleanly", 2)
    {
        return;
    }
    assert!(root(), "this test loads BPF programs and needs root");
    let _cpus = exclusive();
    // From start-up (probe loading) through warm-up to the recorded part.
    let cases = [
        (0, libc::SIGINT),
        (10, libc::SIGTERM),
        (30, libc::SIGHUP),
        (80, libc::SIGINT),
        (200, libc::SIGTERM),
        (500, libc::SIGHUP),
        (1_300, libc::SIGINT),
    ];
    let (mut startup, mut written) = (0, 0);
    for (delay_ms, sig) in cases {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("runs");
        let mut child = start_run(&dir, &["--duration", "3s", "--warmup", "300ms"]);
        std::thread::sleep(Duration::from_millis(delay_ms));
        signal(&child, sig);
        let status = wait_status(&mut child, Duration::from_secs(20));
        let (out, err) = output_of(&dir);
        let case = format!("signal {sig} after {delay_ms}ms:\n{out}\n{err}");
        // A signal that lands before main's first instruction meets the default action: the
        // process dies of it having started nothing and written nothing.
        if std::os::unix::process::ExitStatusExt::signal(&status) == Some(sig) {
            assert!(out.is_empty(), "{case}");
            assert!(!dir.exists() || names_in(&dir).is_empty(), "{case}");
            continue;
        }
        assert_eq!(status.code(), Some(128 + sig), "{case}");
        assert!(!err.contains("panicked"), "{case}");
        if err.contains("stopped during start-up") {
            startup += 1;
            assert!(names_in(&dir).is_empty(), "{case}: {:?}", names_in(&dir));
        } else {
            written += 1;
            let run = complete_files(&dir);
            assert_eq!(run.run.ended, Ended::Interrupted, "{case}");
            assert!(run.run.end_reason.contains("received"), "{case}");
            assert!(out.contains("these figures are partial"), "{case}");
        }
    }
    // Both kinds of stop were exercised.
    assert!(
        startup > 0 && written > 0,
        "start-up {startup}, written {written}"
    );
    assert!(pinned_bpf_entries().is_empty());
}

/// `nohup jitterscope … &`: a signal ignored when jitterscope started (as nohup leaves SIGHUP,
/// and a script's background job SIGINT) stays ignored, and the run goes on to its end; the
/// ones not ignored still end it early.
#[test]
fn signals_started_ignored_stay_ignored() {
    if fewer_cpus_than("signals_started_ignored_stay_ignored", 2) {
        return;
    }
    let _cpus = exclusive();
    for sig in [libc::SIGHUP, libc::SIGINT] {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("runs");
        let mut cmd = js();
        cmd.args([
            "--cpus",
            "0,1",
            "--no-tui",
            "--no-probes",
            "--duration",
            "1500ms",
        ])
        .args(["--warmup", "100ms", "--output"])
        .arg(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        with_dispositions(&mut cmd, libc::SIG_IGN, &[sig]);
        let mut child = cmd.spawn().unwrap();
        std::thread::sleep(Duration::from_millis(600));
        signal(&child, sig);
        let code = wait_exit(&mut child, Duration::from_secs(20));
        let name = jitterscope::signals::name(sig);
        assert_eq!(code, Some(0), "{name} was ignored at the start");
        let run = complete_files(&dir);
        assert_eq!(run.run.ended, Ended::Completed);
    }
    // Ignoring one does not ignore the others: SIGTERM still ends a run started under nohup.
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("runs");
    let mut cmd = js();
    cmd.args([
        "--cpus",
        "0,1",
        "--no-tui",
        "--no-probes",
        "--duration",
        "5s",
    ])
    .args(["--warmup", "100ms", "--output"])
    .arg(&dir)
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    with_dispositions(&mut cmd, libc::SIG_IGN, &[libc::SIGHUP]);
    let mut child = cmd.spawn().unwrap();
    std::thread::sleep(Duration::from_millis(600));
    signal(&child, libc::SIGTERM);
    assert_eq!(
        wait_exit(&mut child, Duration::from_secs(20)),
        Some(128 + libc::SIGTERM)
    );
    assert_eq!(complete_files(&dir).run.ended, Ended::Interrupted);
}

#[test]
fn signals_while_the_report_is_written_do_not_cut_it_short() {
    if skip_bpf("signals_while_the_report_is_written_do_not_cut_it_short")
        || fewer_cpus_than("signals_while_the_report_is_written_do_not_cut_it_short", 2)
    {
        return;
    }
    let _cpus = exclusive();
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("runs");
    let mut child = start_run(&dir, &["--duration", "1s", "--warmup", "200ms"]);
    wait_for_output(&dir, "threads:", Duration::from_secs(10));
    // The first SIGTERM stops the run; the barrage after it lands while the files and the
    // report are written. It starts once the run said it stops: standard signals pending
    // together are taken lowest number first, so a SIGINT sent before the SIGTERM was taken
    // would be taken first (the test, not the program, would have decided the order).
    signal(&child, libc::SIGTERM);
    let t = Instant::now();
    while !output_of(&dir).0.contains("SIGTERM: stopping early") {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the run did not stop on SIGTERM: {:?}",
            output_of(&dir)
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let t = Instant::now();
    let mut sent = 0;
    while t.elapsed() < Duration::from_millis(400) && child.try_wait().unwrap().is_none() {
        signal(
            &child,
            [libc::SIGINT, libc::SIGHUP, libc::SIGTERM][sent % 3],
        );
        sent += 1;
        std::thread::sleep(Duration::from_millis(1));
    }
    let code = wait_exit(&mut child, Duration::from_secs(20));
    let (out, err) = output_of(&dir);
    // The first signal decides the exit code.
    assert_eq!(code, Some(128 + libc::SIGTERM), "{out}\n{err}");
    assert!(sent > 10, "only {sent} signals were sent");
    complete_files(&dir);
    assert!(out.contains("run file:"), "{out}");
}

#[test]
fn sigkill_leaves_nothing_attached_and_the_cpus_free() {
    if skip_bpf("sigkill_leaves_nothing_attached_and_the_cpus_free")
        || fewer_cpus_than("sigkill_leaves_nothing_attached_and_the_cpus_free", 2)
    {
        return;
    }
    assert!(root(), "this test loads BPF programs and needs root");
    let _cpus = exclusive();
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("runs");
    let mut child = start_run(&dir, &["--duration", "30s", "--warmup", "200ms"]);
    wait_for_output(&dir, "threads:", Duration::from_secs(10));
    let ids = bpf_ids(child.id());
    let progs = ids.iter().filter(|(k, _)| *k == "prog_id").count();
    assert!(progs >= 7, "the run holds {progs} BPF programs: {ids:?}");
    assert!(ids.iter().any(|(k, _)| *k == "link_id"), "{ids:?}");
    child.kill().unwrap();
    let _ = child.wait();
    assert_released(&ids);
    assert!(pinned_bpf_entries().is_empty());
    // The CPUs are free for the next run at once.
    let d2 = tempfile::tempdir().unwrap();
    let out = js()
        .args(["--cpus", "0,1", "--duration", "300ms", "--warmup", "0s"])
        .args(["--no-tui", "--no-probes", "--output"])
        .arg(d2.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}

#[test]
fn the_next_start_restores_what_a_killed_jitterscope_changed() {
    if skip_bpf("the_next_start_restores_what_a_killed_jitterscope_changed")
        || fewer_cpus_than(
            "the_next_start_restores_what_a_killed_jitterscope_changed",
            2,
        )
    {
        return;
    }
    assert!(root(), "this test changes a sysctl and needs root");
    let _cpus = exclusive();
    let stat = jitterscope::system::actions::STAT_INTERVAL;
    let before = std::fs::read_to_string(stat).unwrap().trim().to_string();
    assert_ne!(
        before, "7",
        "test assumes vm.stat_interval is not already 7"
    );
    // Put it back whatever happens below.
    let _guard = Restore::set(stat, &before).unwrap();
    let d = tempfile::tempdir().unwrap();
    let journal = d.path().join("restore.json");
    let mut tune = js()
        .args([
            "tune",
            "--cpus",
            "1",
            "--stat-interval",
            "7",
            "--hold",
            "60s",
        ])
        .env("JITTERSCOPE_JOURNAL", &journal)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while std::fs::read_to_string(stat).unwrap().trim() != "7" {
        assert!(t.elapsed() < Duration::from_secs(10), "tune never set it");
        std::thread::sleep(Duration::from_millis(20));
    }
    tune.kill().unwrap();
    let _ = tune.wait();
    assert_eq!(std::fs::read_to_string(stat).unwrap().trim(), "7");
    // The next run puts it back before it starts measuring.
    let out = js()
        .args(["--cpus", "0,1", "--duration", "200ms", "--warmup", "0s"])
        .args(["--no-tui", "--no-probes", "--output"])
        .arg(d.path().join("runs"))
        .env("JITTERSCOPE_JOURNAL", &journal)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("restored {stat} to {before}"))
            && stderr.contains("left changed by a killed jitterscope"),
        "{stderr}"
    );
    assert_eq!(std::fs::read_to_string(stat).unwrap().trim(), before);
    assert!(!journal.exists());
}

/// A cgroup v1 cpuset the test creates, with the given process in it; on drop its tasks go
/// back to the root cpuset and it is removed.
struct TestCpuset(PathBuf);

impl TestCpuset {
    fn create() -> Option<TestCpuset> {
        let root = Path::new("/sys/fs/cgroup/cpuset");
        if !root.join("cpuset.cpus").exists() {
            return None;
        }
        let dir = root.join(format!("jitterscope-test-{}", std::process::id()));
        std::fs::create_dir(&dir).ok()?;
        let set = TestCpuset(dir);
        std::fs::write(set.0.join("cpuset.cpus"), "0-1").ok()?;
        std::fs::write(set.0.join("cpuset.mems"), "0").ok()?;
        Some(set)
    }
}

impl Drop for TestCpuset {
    fn drop(&mut self) {
        let back = Path::new("/sys/fs/cgroup/cpuset/tasks");
        for _ in 0..50 {
            let tasks = std::fs::read_to_string(self.0.join("tasks")).unwrap_or_default();
            for t in tasks.lines() {
                let _ = std::fs::write(back, t);
            }
            if std::fs::remove_dir(&self.0).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        eprintln!("WARNING: could not remove {}", self.0.display());
    }
}

fn assert_ended_with_cpu_lost(dir: &Path, code: Option<i32>, cause: &str) {
    let (out, err) = output_of(dir);
    assert_eq!(code, Some(1), "{out}\n{err}");
    assert!(
        err.contains("the run ended early") && err.contains(cause),
        "{err}"
    );
    assert!(out.contains("stopping early"), "{out}");
    let run = complete_files(dir);
    assert_eq!(run.run.ended, Ended::CpuLost);
    assert!(
        run.run.end_reason.contains("was moved off CPU 1"),
        "{run:?}"
    );
}

#[test]
fn a_cpu_taken_out_of_the_cpuset_ends_the_run_with_an_explanation() {
    if skip_bpf("a_cpu_taken_out_of_the_cpuset_ends_the_run_with_an_explanation")
        || fewer_cpus_than(
            "a_cpu_taken_out_of_the_cpuset_ends_the_run_with_an_explanation",
            2,
        )
    {
        return;
    }
    assert!(root(), "this test creates a cpuset and needs root");
    let _cpus = exclusive();
    let Some(set) = TestCpuset::create() else {
        panic!("no cgroup v1 cpuset hierarchy at /sys/fs/cgroup/cpuset");
    };
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("runs");
    let procs = set.0.join("cgroup.procs");
    let mut cmd = js();
    cmd.args([
        "--cpus",
        "0,1",
        "--no-tui",
        "--duration",
        "20s",
        "--warmup",
        "200ms",
    ])
    .arg("--output")
    .arg(&dir)
    .stdout(std::fs::File::create(d.path().join("run.out")).unwrap())
    .stderr(std::fs::File::create(d.path().join("run.err")).unwrap());
    // Joins the cpuset before exec, so every thread it starts is inside.
    let procs_c = procs.clone();
    unsafe {
        cmd.pre_exec(move || std::fs::write(&procs_c, std::process::id().to_string()));
    }
    let mut child = cmd.spawn().unwrap();
    wait_for_output(&dir, "threads:", Duration::from_secs(10));
    std::thread::sleep(Duration::from_millis(500));
    std::fs::write(set.0.join("cpuset.cpus"), "0").unwrap();
    let code = wait_exit(&mut child, Duration::from_secs(20));
    assert_ended_with_cpu_lost(&dir, code, "taken out of this process's cpuset");
}

/// Brings a CPU back online on drop, also when the test fails, and gives every cgroup v1
/// cpuset back the CPUs it had: taking a CPU offline removes it from every cpuset of the v1
/// hierarchy, and only the root cpuset regains it when the CPU comes back (a container
/// runtime's parent cpuset left without it refuses its next container that CPU).
struct Online(u32, Vec<(PathBuf, String)>);

impl Online {
    /// Remembers every v1 cpuset's CPUs, parents before their children.
    fn remember(cpu: u32) -> Online {
        fn walk(dir: &Path, out: &mut Vec<(PathBuf, String)>) {
            if let Ok(cpus) = std::fs::read_to_string(dir.join("cpuset.cpus")) {
                out.push((dir.join("cpuset.cpus"), cpus.trim().to_string()));
            }
            let Ok(entries) = std::fs::read_dir(dir) else {
                return;
            };
            for e in entries.flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    walk(&e.path(), out);
                }
            }
        }
        let mut sets = Vec::new();
        walk(Path::new("/sys/fs/cgroup/cpuset"), &mut sets);
        Online(cpu, sets)
    }
}

impl Drop for Online {
    fn drop(&mut self) {
        let path = format!("/sys/devices/system/cpu/cpu{}/online", self.0);
        if std::fs::write(&path, "1").is_err() {
            eprintln!(
                "WARNING: could not bring CPU {} back online: echo 1 > {path}",
                self.0
            );
        }
        for (file, cpus) in &self.1 {
            // A cpuset removed meanwhile (a test's own) has nothing to restore.
            if file.exists() && std::fs::write(file, cpus).is_err() {
                eprintln!(
                    "WARNING: could not give {} back CPUs {cpus}",
                    file.display()
                );
            }
        }
    }
}

#[test]
fn a_cpu_going_offline_ends_the_run_with_an_explanation() {
    if skip_bpf("a_cpu_going_offline_ends_the_run_with_an_explanation")
        || fewer_cpus_than("a_cpu_going_offline_ends_the_run_with_an_explanation", 2)
    {
        return;
    }
    assert!(root(), "this test takes a CPU offline and needs root");
    let online = Path::new("/sys/devices/system/cpu/cpu1/online");
    if !online.exists() {
        panic!("CPU 1 cannot be taken offline on this machine (no {online:?})");
    }
    let _cpus = exclusive();
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("runs");
    let mut child = start_run(&dir, &["--duration", "20s", "--warmup", "200ms"]);
    wait_for_output(&dir, "threads:", Duration::from_secs(10));
    std::thread::sleep(Duration::from_millis(500));
    let back = Online::remember(1);
    std::fs::write(online, "0").expect("take CPU 1 offline");
    let code = wait_exit(&mut child, Duration::from_secs(30));
    drop(back);
    assert_eq!(std::fs::read_to_string(online).unwrap().trim(), "1");
    assert_ended_with_cpu_lost(&dir, code, "CPU 1 went offline");
}

#[test]
fn a_second_run_on_the_same_cpus_names_the_first_ones_pid() {
    if fewer_cpus_than("a_second_run_on_the_same_cpus_names_the_first_ones_pid", 2) {
        return;
    }
    let _cpus = exclusive();
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("runs");
    let mut first = start_run(
        &dir,
        &["--duration", "20s", "--warmup", "100ms", "--no-probes"],
    );
    wait_for_output(&dir, "threads:", Duration::from_secs(10));
    let out = js()
        .args([
            "--cpus",
            "1,0",
            "--duration",
            "1s",
            "--no-tui",
            "--no-probes",
        ])
        .arg("--output")
        .arg(d.path().join("second"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    signal(&first, libc::SIGINT);
    let _ = wait_exit(&mut first, Duration::from_secs(20));
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "CPU 1 is already measured by another jitterscope (pid {}",
            first.id()
        )),
        "{stderr}"
    );
    assert!(stderr.contains("choose other CPUs"), "{stderr}");
    assert!(names_in(&d.path().join("second")).is_empty());
}

#[test]
fn a_hung_up_terminal_still_leaves_complete_files() {
    if fewer_cpus_than("a_hung_up_terminal_still_leaves_complete_files", 2) {
        return;
    }
    let _cpus = exclusive();
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("runs");
    // Standard output is a pipe whose reader goes away, as a terminal does on hang-up.
    let mut child = js()
        .args(["--cpus", "0,1", "--no-tui", "--no-probes"])
        .args(["--duration", "20s", "--warmup", "100ms", "--output"])
        .arg(&dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 64];
    std::io::Read::read(&mut stdout, &mut first).unwrap();
    drop(stdout);
    std::thread::sleep(Duration::from_millis(1_500));
    signal(&child, libc::SIGHUP);
    let code = wait_exit(&mut child, Duration::from_secs(20));
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(code, Some(128 + libc::SIGHUP), "{err}");
    assert!(err.contains("standard output went away"), "{err}");
    let run = complete_files(&dir);
    assert_eq!(run.run.end_reason, "SIGHUP received");
    assert!(run.histograms[0].transit.count > 0);
}

/// A small tmpfs mounted by the test, unmounted on drop.
struct SmallDisk(tempfile::TempDir);

impl SmallDisk {
    fn mount(size: &str) -> SmallDisk {
        let d = tempfile::tempdir().unwrap();
        let ok = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size}"),
                "jitterscope-test",
            ])
            .arg(d.path())
            .status()
            .unwrap()
            .success();
        assert!(ok, "cannot mount a tmpfs");
        SmallDisk(d)
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0.path()).status();
    }
}

#[test]
fn a_full_disk_is_reported_with_the_fix_and_the_report_is_still_printed() {
    if fewer_cpus_than(
        "a_full_disk_is_reported_with_the_fix_and_the_report_is_still_printed",
        2,
    ) {
        return;
    }
    assert!(root(), "this test mounts a small tmpfs and needs root");
    let _cpus = exclusive();
    let disk = SmallDisk::mount("16k");
    let dir = disk.0.path().join("runs");
    let out = js()
        .args(["--cpus", "0,1", "--no-tui", "--no-probes"])
        .args(["--duration", "1s", "--warmup", "100ms", "--output"])
        .arg(&dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("No space left on device") && stderr.contains("free some space"),
        "{stderr}"
    );
    assert!(
        stderr.contains("the run's files are incomplete"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    // What was measured reached the terminal, and no temporary file is left.
    assert!(
        stdout.contains("== Accumulator Message Transit Latency (ns) =="),
        "{stdout}"
    );
    let names = names_in(&dir);
    assert!(!names.iter().any(|n| n.starts_with('.')), "{names:?}");
}

/// stress-ng pinned to CPU 1 in its own process group, ended by that group's id.
struct Storm(Child);

impl Storm {
    fn start(stressor: &str) -> Storm {
        let child = Command::new("stress-ng")
            .args([
                stressor,
                "1",
                "--taskset",
                "1",
                "--timeout",
                "60s",
                "--quiet",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("stress-ng (scripts/deps.sh installs it)");
        std::thread::sleep(Duration::from_millis(300));
        Storm(child)
    }
}

impl Drop for Storm {
    fn drop(&mut self) {
        // SAFETY: signalling the process group we created, by its id.
        unsafe { libc::kill(-(self.0.id() as i32), libc::SIGKILL) };
        let _ = self.0.wait();
    }
}

fn storm_run(stressor: &str) -> (RunFile, String) {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("runs");
    let storm = Storm::start(stressor);
    // The smallest record rings, so that the storm overflows it.
    let out = js()
        .args(["--cpus", "0,1", "--no-tui", "--ringbuf-size", "4K"])
        .args(["--duration", "2s", "--warmup", "200ms", "--output"])
        .arg(&dir)
        .output()
        .unwrap();
    drop(storm);
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stressor}: {stdout}\n{stderr}");
    (complete_files(&dir), stdout)
}

#[test]
fn storms_on_a_measured_cpu_count_drops_per_cpu_and_mark_stalls_incomplete() {
    if skip_bpf("storms_on_a_measured_cpu_count_drops_per_cpu_and_mark_stalls_incomplete")
        || fewer_cpus_than(
            "storms_on_a_measured_cpu_count_drops_per_cpu_and_mark_stalls_incomplete",
            2,
        )
    {
        return;
    }
    assert!(root(), "this test loads BPF programs and needs root");
    let _cpus = exclusive();
    for stressor in ["--switch", "--hrtimers"] {
        let (run, stdout) = storm_run(stressor);
        let probes = run.probes.as_ref().expect("probes ran");
        let cpu1 = probes
            .drops
            .iter()
            .find(|d| d.cpu == 1)
            .map_or(0, |d| d.count);
        assert!(
            cpu1 > 0,
            "{stressor}: no drops counted on CPU 1: {probes:?}"
        );
        assert_eq!(
            run.lost.ring_buffer_drops,
            probes.drops.iter().map(|d| d.count).sum::<u64>()
        );
        assert!(
            stdout.contains("kernel records were lost because their BPF record ring was full")
                && stdout.contains(&format!("CPU 1: {cpu1}")),
            "{stressor}: {stdout}"
        );
        // Stalls in windows of lost records are incomplete, their unknown time is `lost`,
        // never claimed as "no kernel event".
        assert!(probes.incomplete_stalls > 0, "{stressor}: {probes:?}");
        let incomplete: Vec<_> = run.stalls.iter().filter(|s| s.incomplete).collect();
        assert!(!incomplete.is_empty(), "{stressor}");
        for s in &incomplete {
            assert!(
                s.culprits
                    .iter()
                    .all(|c| c.class != CulpritClass::Unexplained),
                "{stressor}: {s:?}"
            );
        }
        // Under the storm something ran in every long stall of CPU 1: a record said so, or
        // it was lost. A window whose record had not arrived when the stall was decided (the
        // ring still full at the drain) once made such stalls "no kernel event".
        for s in run
            .stalls
            .iter()
            .filter(|s| s.cpu == 1 && s.duration_ns >= 1_000_000)
        {
            let unexplained: f64 = s
                .culprits
                .iter()
                .filter(|c| c.class == CulpritClass::Unexplained)
                .map(|c| c.share)
                .sum();
            assert!(
                unexplained < 0.5,
                "{stressor}: a {} ns stall on the storm's CPU is mostly \"no kernel event\": {s:?}",
                s.duration_ns
            );
        }
        assert!(
            run.culprits.iter().any(|c| c.class == CulpritClass::Lost),
            "{stressor}"
        );
        assert!(
            stdout.contains("[incomplete: kernel records were lost]"),
            "{stressor}"
        );
    }
}
