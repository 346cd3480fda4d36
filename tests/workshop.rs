//! The workshop's steps with real noise and real probes, graded; every setting back after.

mod common;

use std::process::Command;

use common::*;

/// Runs one step in a fresh output directory: its output and that directory.
fn step(name: &str) -> (String, tempfile::TempDir) {
    let every_cpu_measured = nproc() == 2;
    let dir = tempfile::tempdir().unwrap();
    let before = snapshot();
    let out = Command::new(env!("CARGO_BIN_EXE_jitterscope"))
        .args([
            "workshop",
            "--cpus",
            "0,1",
            "--step",
            name,
            "--duration",
            "2s",
            "--output",
        ])
        .arg(dir.path())
        .env("JITTERSCOPE_JOURNAL", dir.path().join("restore.json"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "workshop --step {name} failed:\n{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        snapshot(),
        before,
        "workshop --step {name} left settings changed"
    );
    assert!(!dir.path().join("restore.json").exists());
    // Nothing is shown while a step runs: where every CPU is measured, the step decides its
    // culprits after its workload stops, as a run does by default.
    let run = jitterscope::report::runfile::RunFile::read(&run_file_in(dir.path()))
        .unwrap_or_else(|e| panic!("{e}"));
    let at_end = run.overhead.as_ref().is_some_and(|o| o.at_end);
    assert_eq!(
        at_end, every_cpu_measured,
        "workshop --step {name}: at the end {at_end}"
    );
    (stdout, dir)
}

/// The run file of `dir` whose name starts with `label`, as JSON — read directly, not through
/// the workshop's own grading.
fn run_json(dir: &std::path::Path, label: &str) -> serde_json::Value {
    let path = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            name.starts_with(&format!("{label}-2"))
                && name.ends_with(".json")
                && !name.ends_with(".trace.json")
        })
        .unwrap_or_else(|| panic!("no run file {label}-*.json in {}", dir.display()));
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// Time and episodes on `cpu` of the culprit rows `pick` chooses, in `label`'s run file.
fn on_cpu(
    dir: &std::path::Path,
    label: &str,
    cpu: u64,
    pick: &dyn Fn(&serde_json::Value) -> bool,
) -> (u64, u64) {
    let run = run_json(dir, label);
    let mut total = (0, 0);
    for c in run["culprits"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| pick(c))
    {
        for x in c["cpus"].as_array().unwrap() {
            if x["cpu"].as_u64() == Some(cpu) {
                total.0 += x["measured_ns"].as_u64().unwrap_or(0);
                total.1 += x["episodes"].as_u64().unwrap_or(0);
            }
        }
    }
    total
}

/// The CLOCK_MONOTONIC window `label`'s run recorded: from `record_from_ns` for `duration_ns`.
fn window(dir: &std::path::Path, label: &str) -> (u64, u64) {
    let run = run_json(dir, label);
    let from = run["run"]["record_from_ns"]
        .as_u64()
        .expect("record_from_ns");
    (
        from,
        from + run["run"]["duration_ns"].as_u64().expect("duration_ns"),
    )
}

/// /proc/interrupts' count of IRQ `irq` on `cpu`, read every 10 ms with the time of each
/// read while the thread runs: the kernel's own accounting, beside the probes'.
struct IrqCounts {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    handle: std::thread::JoinHandle<Vec<(u64, u64)>>,
}

impl IrqCounts {
    fn start(irq: u32, cpu: usize) -> IrqCounts {
        use std::sync::atomic::Ordering;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let s = stop.clone();
        let handle = std::thread::spawn(move || {
            pin(0, 0);
            let mut reads = Vec::new();
            while !s.load(Ordering::Relaxed) {
                let t = jitterscope::workload::clock::monotonic_ns();
                reads.push((t, interrupts(&irq.to_string(), cpu)));
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            reads
        });
        IrqCounts { stop, handle }
    }

    fn stop(self) -> Vec<(u64, u64)> {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        self.handle.join().unwrap()
    }
}

/// How many times the count in `reads` grew from the last read before `from` to the first
/// read after `to` (all of the window, and up to 10 ms more at each end).
fn grew_in(reads: &[(u64, u64)], (from, to): (u64, u64)) -> u64 {
    let first = reads
        .iter()
        .rev()
        .find(|r| r.0 <= from)
        .expect("a read before the window");
    let last = reads
        .iter()
        .find(|r| r.0 >= to)
        .expect("a read after the window");
    last.1 - first.1
}

#[test]
fn baseline_pinned_and_shielded_find_and_remove_their_culprits() {
    if skip_bpf("baseline_pinned_and_shielded_find_and_remove_their_culprits")
        || fewer_cpus_than(
            "baseline_pinned_and_shielded_find_and_remove_their_culprits",
            2,
        )
    {
        return;
    }
    let _cpus = exclusive();
    let irq = jitterscope::workshop::noise::steerable_irq();

    let (out, _dir) = step("baseline");
    assert!(out.contains("=== BASELINE ==="), "{out}");
    assert!(out.contains("unpinned"), "{out}");
    assert!(
        out.contains("expected culprit task js-noise-task found on CPU 1"),
        "{out}"
    );
    assert!(
        out.contains("expected culprit kworker refresh_vm_stats found on CPU 1"),
        "{out}"
    );

    let (out, dir) = step("pinned");
    // Pinned, the consumer stalls on its own CPU only; the competing task pinned there keeps
    // its share, which pinning cannot take away: it remains, and is said to.
    let after = run_json(dir.path(), "workshop-pinned-after");
    let elsewhere = after["stalls"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["thread"] != "producer" && s["cpu"].as_u64() != Some(1))
        .count();
    assert_eq!(elsewhere, 0, "{out}");
    let task = |c: &serde_json::Value| c["who"]["comm"] == "js-noise-task";
    assert!(
        on_cpu(dir.path(), "workshop-pinned-after", 1, &task).0 > 0,
        "{out}"
    );
    assert!(out.contains("remains: task js-noise-task["), "{out}");
    if let Some((n, name)) = &irq {
        let irq = |c: &serde_json::Value| {
            c["who"]["irq"].as_u64() == Some(u64::from(*n)) && c["who"]["action"] == name.as_str()
        };
        assert!(
            on_cpu(dir.path(), "workshop-pinned-after", 1, &irq).0 > 0,
            "{out}"
        );
    }

    let (out, dir) = step("shielded");
    assert!(out.contains("tasks shielded into"), "{out}");
    let before = on_cpu(dir.path(), "workshop-shielded-before", 1, &task);
    let after = on_cpu(dir.path(), "workshop-shielded-after", 1, &task);
    assert!(
        before.0 > 0 && after == (0, 0),
        "{before:?} → {after:?}\n{out}"
    );
    let checks = out
        .lines()
        .find(|l| l.starts_with("workshop: ") && l.ends_with("checks passed"))
        .unwrap_or_default()
        .to_string();
    let (passed, total) = checks
        .trim_start_matches("workshop: ")
        .split_once(" of ")
        .map(|(a, b)| {
            (
                a.to_string(),
                b.split_whitespace().next().unwrap_or("").to_string(),
            )
        })
        .unwrap();
    assert_eq!(passed, total, "{out}");
}

#[test]
fn irqs_moved_removes_the_steered_irq() {
    if skip_bpf("irqs_moved_removes_the_steered_irq")
        || fewer_cpus_than("irqs_moved_removes_the_steered_irq", 2)
    {
        return;
    }
    let Some((n, name)) = steerable_irq_or_skip("irqs_moved_removes_the_steered_irq") else {
        return;
    };
    let _cpus = exclusive();
    let counts = IrqCounts::start(n, 1);
    let (out, dir) = step("irqs-moved");
    let reads = counts.stop();
    let irq = |c: &serde_json::Value| {
        c["who"]["irq"].as_u64() == Some(u64::from(n)) && c["who"]["action"] == name.as_str()
    };
    let before = on_cpu(dir.path(), "workshop-irqs-moved-before", 1, &irq);
    let after = on_cpu(dir.path(), "workshop-irqs-moved-after", 1, &irq);
    assert!(
        before.0 > 0 && after == (0, 0),
        "{before:?} → {after:?}\n{out}"
    );
    // The kernel's own count agrees: the IRQ was taken on CPU 1 during the run before the
    // move, and not once during the run after it.
    let kernel = (
        grew_in(&reads, window(dir.path(), "workshop-irqs-moved-before")),
        grew_in(&reads, window(dir.path(), "workshop-irqs-moved-after")),
    );
    println!("/proc/interrupts: IRQ {n} on CPU 1: {kernel:?} (before, after the move)");
    assert!(
        kernel.0 > 0 && kernel.1 == 0,
        "/proc/interrupts: IRQ {n} on CPU 1 {} times before the move, {} after\n{out}",
        kernel.0,
        kernel.1
    );
    assert!(out.contains(&format!("IRQ {n} {name} on CPU 1:")), "{out}");
}

#[test]
fn kworkers_moved_takes_the_injected_unbound_work_off_the_cpu() {
    if skip_bpf("kworkers_moved_takes_the_injected_unbound_work_off_the_cpu")
        || fewer_cpus_than(
            "kworkers_moved_takes_the_injected_unbound_work_off_the_cpu",
            2,
        )
    {
        return;
    }
    let _cpus = exclusive();
    let _tracefs = perf::Tracefs::ensure();
    let data = tempfile::tempdir().unwrap();
    let data = data.path().join("perf.data");
    let record = perf::PerfRecord::start(
        &data,
        &["workqueue:workqueue_execute_start".to_string()],
        Some("1"),
        0,
    );
    let (out, dir) = step("kworkers-moved");
    record.stop();
    let unbound = |c: &serde_json::Value| {
        c["class"] == "kworker" && c["name"].as_str().unwrap_or("").starts_with("kworker/u")
    };
    let writeback = |c: &serde_json::Value| unbound(c) && c["who"]["function"] == "wb_workfn";
    let before = on_cpu(
        dir.path(),
        "workshop-kworkers-moved-after-stat-interval",
        1,
        &writeback,
    );
    let after = on_cpu(
        dir.path(),
        "workshop-kworkers-moved-after-wq-cpumask",
        1,
        &unbound,
    );
    assert!(
        before.0 > 0 && after == (0, 0),
        "{before:?} → {after:?}\n{out}"
    );
    // perf's record of the work items started on CPU 1 agrees: unbound writeback there
    // during the run before the workqueue cpumask took CPU 1 away, no unbound work after.
    let executed = unbound_work_on_cpu_1(&data);
    let count = |(from, to): (u64, u64), function: Option<&str>| {
        executed
            .iter()
            .filter(|(t, f)| (from..=to).contains(t) && function.is_none_or(|x| x == f))
            .count()
    };
    let perf = (
        count(
            window(dir.path(), "workshop-kworkers-moved-after-stat-interval"),
            Some("wb_workfn"),
        ),
        count(
            window(dir.path(), "workshop-kworkers-moved-after-wq-cpumask"),
            None,
        ),
    );
    println!("perf: on CPU 1 unbound wb_workfn before, unbound work after: {perf:?}");
    assert!(
        perf.0 > 0 && perf.1 == 0,
        "perf: unbound wb_workfn on CPU 1 {} times before the cpumask, unbound work {} times after\n{out}",
        perf.0,
        perf.1
    );
    // The per-CPU work queued on every CPU by name stays, and is said to.
    assert!(out.contains("remains: kworker kworker/1:"), "{out}");
    assert!(out.contains("refresh_vm_stats"), "{out}");
}

/// The work items unbound kworkers (`kworker/u…`) started on CPU 1 in perf's recording of
/// `workqueue:workqueue_execute_start` on that CPU: the time (CLOCK_MONOTONIC, as perf's
/// `-k mono` records it) and the function of each.
fn unbound_work_on_cpu_1(data: &std::path::Path) -> Vec<(u64, String)> {
    let out = Command::new("perf")
        .args(["script", "--ns", "-F", "comm,cpu,time,trace", "-i"])
        .arg(data)
        .output()
        .expect("perf script");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut executed = Vec::new();
    // `kworker/u4:2-flush-8:0 [001] 1234.567890123: work struct 0x…: function wb_workfn`
    for line in text.lines() {
        let Some((comm, rest)) = line.trim_start().split_once(" [") else {
            continue;
        };
        let Some((cpu, rest)) = rest.split_once("] ") else {
            continue;
        };
        let Some((time, trace)) = rest.split_once(": ") else {
            continue;
        };
        if cpu.trim().parse::<u32>() != Ok(1) || !comm.starts_with("kworker/u") {
            continue;
        }
        let Some(function) = trace.split("function ").nth(1) else {
            continue;
        };
        let (s, ns) = time.trim().split_once('.').unwrap_or((time.trim(), "0"));
        let t = s.parse::<u64>().unwrap() * 1_000_000_000 + ns.parse::<u64>().unwrap();
        executed.push((t, function.trim().to_string()));
    }
    assert!(
        out.status.success(),
        "perf script: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    executed
}

#[test]
fn boot_advises_the_missing_parameters_from_what_check_saw_and_restores_everything() {
    if skip_bpf("boot_advises_the_missing_parameters_from_what_check_saw_and_restores_everything")
        || cpus_other_than(
            "boot_advises_the_missing_parameters_from_what_check_saw_and_restores_everything",
            2,
        )
    {
        return;
    }
    let _cpus = exclusive();
    let (out, _dir) = step("boot");
    assert!(out.contains("=== BOOT ==="), "{out}");
    assert!(
        out.contains("check: CPU 1 only — every CPU is measured, and the kernel keeps boot CPU 0 for housekeeping"),
        "{out}"
    );
    let config = jitterscope::system::config::Configured::read(
        &jitterscope::system::config::Root::live(),
        &[1],
    );
    if !config.nohz_full.as_ref().is_some_and(|l| l.contains(&1)) {
        // The tick's line: `nohz_full=1` (never 0-1), with the rate check saw.
        let line = out
            .lines()
            .find(|l| l.trim_start().starts_with("nohz_full="))
            .unwrap_or_else(|| panic!("no nohz_full advice in:\n{out}"));
        assert!(
            line.trim_start()
                .starts_with("nohz_full=1: the scheduler tick, "),
            "{line}"
        );
        let rate: f64 = line
            .split("the scheduler tick, ")
            .nth(1)
            .and_then(|r| r.split("/s").next())
            .and_then(|r| r.parse().ok())
            .unwrap_or_else(|| panic!("no tick rate in {line}"));
        assert!(rate > 1.5, "{line}");
        assert!(
            out.contains("grubby --update-kernel=ALL --args=\""),
            "{out}"
        );
        assert!(out.contains("GRUB: in /etc/default/grub"), "{out}");
        assert!(
            out.contains("kernel command line after the reboot: "),
            "{out}"
        );
        assert!(
            out.contains("remains: the scheduler tick on CPU 1")
                && out.contains("only a reboot with nohz_full=1 removes it"),
            "{out}"
        );
    }
    assert!(
        out.contains("--step boot --after-reboot ") && out.contains("this step's run file: "),
        "{out}"
    );
    assert!(
        out.contains("check ran on CPU 1 and the boot advice is above"),
        "{out}"
    );
}

#[test]
fn rt_finds_the_fifo_consumer_throttled_and_removes_it() {
    if skip_bpf("rt_finds_the_fifo_consumer_throttled_and_removes_it")
        || fewer_cpus_than("rt_finds_the_fifo_consumer_throttled_and_removes_it", 2)
    {
        return;
    }
    let runtime = std::fs::read_to_string("/proc/sys/kernel/sched_rt_runtime_us").unwrap();
    assert_ne!(
        runtime.trim(),
        "-1",
        "RT throttling is off on this machine: the RT step has nothing to show"
    );
    let _cpus = exclusive();
    let (out, dir) = step("rt");
    let throttled = |c: &serde_json::Value| c["class"] == "throttled";
    let before = on_cpu(dir.path(), "workshop-rt-before", 1, &throttled);
    let after = on_cpu(dir.path(), "workshop-rt-after", 1, &throttled);
    // The default budget (950000 of each 1000000 µs) leaves up to 50 ms of each second
    // throttled: over the step's 2 s, more than a few ms is that, not a stray record.
    assert!(
        before.0 > 10_000_000 && after == (0, 0),
        "{before:?} → {after:?}\n{out}"
    );
    // `step` checked every setting (sched_rt_runtime_us included) is back.
}
