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

#[test]
fn boot_advises_the_missing_parameters_from_what_check_saw_and_restores_everything() {
    if skip_bpf("boot_advises_the_missing_parameters_from_what_check_saw_and_restores_everything")
        || nproc() != 2
    {
        return;
    }
    let _cpus = exclusive();
    let out = step("boot");
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
