//! `check` on this machine for real: known noise on a CPU (1, or 0 where a disk's IRQ is
//! delivered to CPU 1: `checked_cpu`) — a competing task, the virtio-rng IRQ steered there,
//! writeback work confined there — comes out as broken (or not configured)
//! promises naming those culprits; under `tune --shield --irqs --kworkers --hold` the same
//! noise keeps going and the tasks, device-IRQ and unbound-work promises hold *by
//! observation*, while the tick (no nohz_full here) still does not.

mod common;

use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;

const WRITEBACK_CPUMASK: &str = "/sys/devices/virtual/workqueue/writeback/cpumask";

/// Threads of the test that raise the rng IRQ and queue writeback, until dropped.
struct Load {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Load {
    fn start(dir: &std::path::Path) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let rng = std::thread::spawn(move || {
            use std::io::Read;
            let mut f = std::fs::File::open("/dev/hwrng").expect("open /dev/hwrng");
            let mut buf = [0u8; 16];
            while !s.load(Ordering::Relaxed) {
                let _ = f.read(&mut buf);
                std::thread::sleep(Duration::from_millis(10));
            }
        });
        let s = stop.clone();
        let file = dir.join("dirty.bin");
        let writer = std::thread::spawn(move || {
            let data = vec![0x5au8; 64 << 10];
            while !s.load(Ordering::Relaxed) {
                let _ = std::fs::write(&file, &data);
                // SAFETY: sync takes no arguments.
                unsafe { libc::sync() };
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        Load {
            stop,
            threads: vec![rng, writer],
        }
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// The CPU the tuning test checks: CPU 1, unless a disk's queue IRQ is delivered there and
/// not to CPU 0. A blk-mq queue's IRQ is kernel-managed: no tune moves it (only
/// `isolcpus=managed_irq` at boot), and the test's own writeback raises it on the CPU it is
/// delivered to, which then holds no device-IRQ promise whatever the tune does.
fn checked_cpu() -> usize {
    let disk_cpus: Vec<Vec<usize>> = std::fs::read_to_string("/proc/interrupts")
        .unwrap_or_default()
        .lines()
        .filter(|l| ["-req.", "-request", "nvme"].iter().any(|n| l.contains(n)))
        .filter_map(|l| l.split(':').next()?.trim().parse::<u32>().ok())
        .filter_map(|irq| {
            let list =
                std::fs::read_to_string(format!("/proc/irq/{irq}/effective_affinity_list")).ok()?;
            Some(cpus_of(list.trim()))
        })
        .collect();
    let on = |cpu: usize| disk_cpus.iter().any(|c| c.contains(&cpu));
    if on(1) && !on(0) {
        0
    } else {
        1
    }
}

/// A CPU list (`0-1,3`) as its CPUs.
fn cpus_of(list: &str) -> Vec<usize> {
    let mut cpus = Vec::new();
    for part in list.split(',').filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        if let (Ok(a), Ok(b)) = (a.parse::<usize>(), b.parse::<usize>()) {
            cpus.extend(a..=b);
        }
    }
    cpus
}

/// `check --cpus CPU --duration 5s --format json`: its exit code and report.
fn check_on(cpu: usize) -> (Option<i32>, Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_jitterscope"))
        .args(["check", "--cpus", &cpu.to_string()])
        .args(["--duration", "5s", "--format", "json"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "check printed no JSON ({e}): {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code(), report)
}

fn finding<'a>(r: &'a Value, promise: &str) -> &'a Value {
    finding_on(r, 1, promise)
}

fn finding_on<'a>(r: &'a Value, cpu: usize, promise: &str) -> &'a Value {
    r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["cpu"] == cpu && f["promise"] == promise)
        .unwrap_or_else(|| panic!("no {promise} finding for CPU {cpu}: {r}"))
}

/// The promise did not hold on `cpu`, named a culprit matching `culprit`, and has a fix.
fn failed_with(r: &Value, cpu: usize, promise: &str, culprit: impl Fn(&Value) -> bool) {
    let f = finding_on(r, cpu, promise);
    assert!(
        matches!(
            f["verdict"].as_str(),
            Some("broken") | Some("not_configured")
        ),
        "{promise}: {f}"
    );
    assert!(
        f["seen"].as_array().unwrap().iter().any(culprit),
        "{promise}: the injected culprit is not named: {f}"
    );
    assert!(
        !f["fixes"].as_array().unwrap().is_empty(),
        "{promise}: no fix: {f}"
    );
}

fn start_tune(cpu: usize) -> Child {
    let child = Command::new(env!("CARGO_BIN_EXE_jitterscope"))
        .args([
            "tune",
            "--cpus",
            &cpu.to_string(),
            "--shield",
            "--irqs",
            "--kworkers",
            "--hold",
            "120s",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // `holding …` is printed once every change is made.
    let t = Instant::now();
    let journal = jitterscope::system::tuning::journal_path();
    while jitterscope::system::tuning::journal_owner(&journal) != Some(child.id())
        && t.elapsed() < Duration::from_secs(20)
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    // The shield is the last step: give it time to move every task.
    std::thread::sleep(Duration::from_secs(1));
    child
}

#[test]
fn known_noise_breaks_its_promises_and_a_held_tune_makes_them_hold_by_observation() {
    if skip_bpf("known_noise_breaks_its_promises_and_a_held_tune_makes_them_hold_by_observation")
        || fewer_cpus_than(
            "known_noise_breaks_its_promises_and_a_held_tune_makes_them_hold_by_observation",
            2,
        )
    {
        return;
    }
    let _cpus = exclusive();
    let (rng_irq, _) = jitterscope::workshop::noise::steerable_irq()
        .expect("this test needs the virtio-rng IRQ (a VM with virtio-rng)");
    let cpu = checked_cpu();
    let before = snapshot();
    let _irq = Restore::set(
        &format!("/proc/irq/{rng_irq}/smp_affinity_list"),
        &cpu.to_string(),
    )
    .unwrap();
    let _wb = Restore::set(WRITEBACK_CPUMASK, &format!("{:x}", 1u64 << cpu)).unwrap();
    let competitor = Competitor::start(cpu);
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let _load = Load::start(dir.path());

    let (code, r) = check_on(cpu);
    assert_eq!(code, Some(1), "{r}");
    assert_eq!(r["schema"], "jitterscope-check/1");
    let competitor_name = format!("sh[{}]", competitor.pid());
    failed_with(&r, cpu, "no_other_tasks", |s| {
        s["name"] == competitor_name.as_str()
    });
    failed_with(&r, cpu, "tick_stopped", |s| s["detail"] == "scheduler tick");
    let ticks = finding_on(&r, cpu, "tick_stopped")["count"]
        .as_u64()
        .unwrap();
    assert!(
        ticks as f64 / 5.0 > 50.0,
        "the tick of a CPU with a running task and no nohz_full: {ticks} in 5 s"
    );
    failed_with(&r, cpu, "no_device_irqs", |s| {
        s["irq"] == u64::from(rng_irq)
    });
    failed_with(&r, cpu, "no_unbound_work", |s| s["detail"] == "wb_workfn");

    let mut tune = start_tune(cpu);
    let held = check_on(cpu);
    // SAFETY: signalling our own child by its pid.
    unsafe { libc::kill(tune.id() as i32, libc::SIGINT) };
    assert!(tune.wait().unwrap().success());
    let (code, r) = held;
    for promise in ["no_other_tasks", "no_unbound_work"] {
        let f = finding_on(&r, cpu, promise);
        assert_eq!(
            f["verdict"], "held",
            "{promise} on CPU {cpu} under tune: {f}"
        );
        assert_eq!(f["count"], 0);
    }
    // An IRQ the tune moved that had not fired since still has its next interrupt here (x86
    // moves an IRQ as it fires): the check names each such one as that, and nothing else.
    let irqs = finding_on(&r, cpu, "no_device_irqs");
    if irqs["verdict"] != "held" {
        let settings = irqs["settings"].to_string();
        for s in irqs["seen"].as_array().unwrap() {
            let made_the_move = format!("IRQ {} (", s["irq"]);
            assert!(
                s["count"] == 1
                    && s["irq"] != u64::from(rng_irq)
                    && settings.contains(&made_the_move)
                    && settings.contains("had not fired since"),
                "no_device_irqs on CPU {cpu} under tune: {irqs}"
            );
        }
    }
    assert_ne!(
        finding_on(&r, cpu, "tick_stopped")["verdict"],
        "held",
        "{r}"
    );
    assert_eq!(code, Some(1), "the tick still breaks its promise: {r}");
    drop(competitor);
    drop(_load);
    drop(_wb);
    drop(_irq);
    assert_eq!(snapshot(), before, "a setting was left changed");
}

#[test]
fn the_checked_threads_of_a_process_are_left_out_of_what_is_seen() {
    if skip_bpf("the_checked_threads_of_a_process_are_left_out_of_what_is_seen")
        || fewer_cpus_than(
            "the_checked_threads_of_a_process_are_left_out_of_what_is_seen",
            2,
        )
    {
        return;
    }
    let _cpus = exclusive();
    let own = Competitor::start(1);
    let out = Command::new(env!("CARGO_BIN_EXE_jitterscope"))
        .args([
            "check",
            "--cpus",
            "1",
            "--duration",
            "2s",
            "--format",
            "json",
        ])
        .args(["--pid", &own.pid().to_string()])
        .output()
        .unwrap();
    let r: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no JSON ({e}): {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(r["held_by"], format!("process {}", own.pid()));
    let name = format!("sh[{}]", own.pid());
    let tasks = finding(&r, "no_other_tasks");
    assert!(
        !tasks["seen"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["name"] == name.as_str()),
        "the checked process itself was counted against it: {tasks}"
    );
    // It held the CPU, so its tick was seen.
    assert!(
        finding(&r, "tick_stopped")["count"].as_u64().unwrap() > 0,
        "{r}"
    );
}

/// `run --cpus 0,1 --duration 3s` into `dir`, labelled `label`: its run file.
fn run_into(dir: &std::path::Path, label: &str) -> std::path::PathBuf {
    let out = Command::new(env!("CARGO_BIN_EXE_jitterscope"))
        .args([
            "--cpus",
            "0,1",
            "--duration",
            "3s",
            "--no-tui",
            "--label",
            label,
        ])
        .arg("--output")
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{label}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            name.starts_with(&format!("{label}-")) && name.ends_with("Z.json")
        })
        .unwrap_or_else(|| panic!("no run file for {label}"))
}

#[test]
fn compare_shows_a_held_tunes_changes_beside_the_culprits_that_went_away() {
    if skip_bpf("compare_shows_a_held_tunes_changes_beside_the_culprits_that_went_away")
        || fewer_cpus_than(
            "compare_shows_a_held_tunes_changes_beside_the_culprits_that_went_away",
            2,
        )
    {
        return;
    }
    let _cpus = exclusive();
    let before_settings = snapshot();
    let competitor = Competitor::start(1);
    let dir = tempfile::tempdir().unwrap();
    let before = run_into(dir.path(), "before");
    let mut tune = start_tune(1);
    // Started inside the shield (the tune moved this test there), the run leaves it for the
    // CPUs it measures.
    let after = run_into(dir.path(), "after");
    // SAFETY: signalling our own child by its pid.
    unsafe { libc::kill(tune.id() as i32, libc::SIGINT) };
    assert!(tune.wait().unwrap().success());
    drop(competitor);
    assert_eq!(snapshot(), before_settings, "a setting was left changed");
    let out = Command::new(env!("CARGO_BIN_EXE_jitterscope"))
        .arg("compare")
        .args([&before, &after])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    let config: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("## Configuration"))
        .collect();
    let line = |what: &str| {
        config
            .iter()
            .find(|l| l.contains(what))
            .unwrap_or_else(|| panic!("no {what:?} line in the configuration section:\n{text}"))
            .to_string()
    };
    assert!(line("workqueue cpumask").contains("0-1 → 0"), "{text}");
    let tasks = line("tasks allowed on CPU 1");
    let sh = "sh SCHED_OTHER on CPU 1";
    assert!(
        tasks.contains(sh) && tasks.contains("/s → 0/s"),
        "the competitor is not shown gone beside the shield: {tasks}"
    );
}
