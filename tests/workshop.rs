//! The workshop's steps with real noise and real probes, graded; every setting back after.

mod common;

use std::process::Command;

use common::*;

fn step(name: &str) -> String {
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
    stdout
}

#[test]
fn baseline_pinned_and_shielded_find_and_remove_their_culprits() {
    if skip_bpf("baseline_pinned_and_shielded_find_and_remove_their_culprits") || nproc() < 2 {
        return;
    }
    let _cpus = exclusive();
    let irq = jitterscope::workshop::noise::steerable_irq();

    let out = step("baseline");
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

    let out = step("pinned");
    assert!(
        out.contains("expected culprit task js-noise-task found on CPU 1"),
        "{out}"
    );
    if let Some((n, name)) = &irq {
        assert!(
            out.contains(&format!("expected culprit IRQ {n} {name} found on CPU 1")),
            "{out}"
        );
    }

    let out = step("shielded");
    assert!(out.contains("tasks shielded into"), "{out}");
    assert!(
        out.contains("task js-noise-task is gone from CPU 1 ✓"),
        "{out}"
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
    if skip_bpf("irqs_moved_removes_the_steered_irq") || nproc() < 2 {
        return;
    }
    let Some((n, name)) = jitterscope::workshop::noise::steerable_irq() else {
        eprintln!("skipped: no steerable IRQ here (irqs_moved_removes_the_steered_irq)");
        return;
    };
    let _cpus = exclusive();
    let out = step("irqs-moved");
    assert!(
        out.contains(&format!("IRQ {n} {name} is gone from CPU 1 ✓")),
        "{out}"
    );
}
