//! The noise injector and the restore journal: each kind produces its documented
//! interruption on the chosen CPU (real BPF), and every setting it changes comes back — on a
//! normal end, on SIGTERM, and through `jitterscope restore` after SIGKILL.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use jitterscope::model::CulpritClass;
use jitterscope::probe::decode::Record;
use jitterscope::probe::{ProbeConfig, ProbeSession};
use jitterscope::system::tuning::{Change, Tuner};

const CPU: u32 = 1;

/// Runs `jitterscope noise --kind <kind>` on CPU 1 for 1.5 s under the probes.
fn census(kind: &str, journal: &std::path::Path) -> (Vec<Record>, String) {
    let mut cfg = ProbeConfig::new(vec![CPU]);
    cfg.drain_cpus = vec![0];
    let (session, rx) = ProbeSession::start(cfg).unwrap_or_else(|e| panic!("{e}"));
    let out = Command::new(env!("CARGO_BIN_EXE_jitterscope"))
        .args([
            "noise",
            "--cpu",
            "1",
            "--kind",
            kind,
            "--rate",
            "200",
            "--duration",
            "1500ms",
        ])
        .env("JITTERSCOPE_JOURNAL", journal)
        .output()
        .unwrap();
    session.stop().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "noise {kind} failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (rx.try_iter().flatten().collect(), stdout)
}

fn interruptions(r: &[Record]) -> impl Iterator<Item = &jitterscope::model::Interruption> {
    r.iter().filter_map(|r| match r {
        Record::Interruption(i) if i.cpu == CPU => Some(i),
        _ => None,
    })
}

#[test]
fn each_noise_kind_produces_its_interruption_on_the_chosen_cpu() {
    if skip_bpf("each_noise_kind_produces_its_interruption_on_the_chosen_cpu")
        || fewer_cpus_than(
            "each_noise_kind_produces_its_interruption_on_the_chosen_cpu",
            2,
        )
    {
        return;
    }
    let _cpus = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("restore.json");

    let (r, _) = census("kworker", &journal);
    let n = interruptions(&r)
        .filter(|i| i.class == CulpritClass::Kworker && &*i.detail() == "refresh_vm_stats")
        .count();
    assert!(
        n >= 100,
        "only {n} refresh_vm_stats kworker records for 300 injections"
    );

    let (r, _) = census("task", &journal);
    let n = interruptions(&r)
        .filter(|i| i.class == CulpritClass::Task && i.name().starts_with("js-noise-task["))
        .count();
    assert!(n >= 100, "only {n} js-noise-task episodes for 300 bursts");

    let (r, _) = census("timer", &journal);
    let sleeps = interruptions(&r)
        .filter(|i| i.class == CulpritClass::Task && i.name().starts_with("js-noise-timer["))
        .count();
    assert!(
        sleeps >= 100,
        "only {sleeps} js-noise-timer wake-ups for a 200/s hrtimer storm"
    );

    if let Some((irq, name)) =
        steerable_irq_or_skip("each_noise_kind_produces_its_interruption_on_the_chosen_cpu")
    {
        let before = std::fs::read_to_string(format!("/proc/irq/{irq}/smp_affinity_list")).unwrap();
        let (r, _) = census("irq", &journal);
        let n = interruptions(&r)
            .filter(|i| i.class == CulpritClass::Irq && i.id == irq as u64)
            .count();
        assert!(n >= 50, "only {n} records of IRQ {irq} {name} on CPU {CPU}");
        let after = std::fs::read_to_string(format!("/proc/irq/{irq}/smp_affinity_list")).unwrap();
        assert_eq!(before, after, "the IRQ's affinity was not restored");
    }

    // No cpufreq driver here: the freq kind says why it is skipped instead of failing.
    if !std::path::Path::new("/sys/devices/system/cpu/cpu1/cpufreq").exists() {
        let (_, out) = census("freq", &journal);
        assert!(
            out.contains("skipped: no cpufreq driver for CPU 1"),
            "{out}"
        );
    }
    assert!(
        !journal.exists(),
        "the journal is removed once everything is restored"
    );
}

/// A setting that is safe to change on any Linux machine for a moment.
const SETTING: &str = "/proc/sys/vm/stat_interval";

#[test]
fn the_tuner_journals_before_changing_and_restores_on_drop() {
    let _cpus = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("restore.json");
    let before = std::fs::read_to_string(SETTING).unwrap().trim().to_string();
    let new = if before == "7" { "9" } else { "7" };
    {
        let mut t = Tuner::with_journal(journal.clone());
        t.set(SETTING, new).unwrap();
        assert_eq!(std::fs::read_to_string(SETTING).unwrap().trim(), new);
        let journalled: Vec<Change> =
            serde_json::from_str(&std::fs::read_to_string(&journal).unwrap()).unwrap();
        assert_eq!(
            journalled,
            [Change::Write {
                path: SETTING.into(),
                old: before.clone(),
                new: new.into()
            }]
        );
        // A write the kernel refuses is not journalled and changes nothing.
        assert!(t.set("/proc/sys/vm/stat_interval", "not-a-number").is_err());
        assert_eq!(t.changes().len(), 1);
    }
    assert_eq!(std::fs::read_to_string(SETTING).unwrap().trim(), before);
    assert!(!journal.exists());
}

/// `jitterscope noise --kind irq` steers the IRQ; SIGTERM ends it with the affinity restored;
/// SIGKILL leaves it changed until `jitterscope restore`.
#[test]
fn settings_come_back_on_sigterm_and_through_restore_after_sigkill() {
    let test = "settings_come_back_on_sigterm_and_through_restore_after_sigkill";
    if skip_bpf(test) {
        return;
    }
    let Some((irq, _)) = steerable_irq_or_skip(test) else {
        return;
    };
    let _cpus = exclusive();
    let path = format!("/proc/irq/{irq}/smp_affinity_list");
    let read = || std::fs::read_to_string(&path).unwrap().trim().to_string();
    let before = read();
    let target = if before == "1" { "0" } else { "1" };
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("restore.json");
    let start = || {
        let child = Command::new(env!("CARGO_BIN_EXE_jitterscope"))
            .args([
                "noise",
                "--cpu",
                target,
                "--kind",
                "irq",
                "--rate",
                "50",
                "--duration",
                "60s",
            ])
            .env("JITTERSCOPE_JOURNAL", &journal)
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let t = Instant::now();
        while read() != target && t.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(read(), target, "the IRQ was not steered");
        assert!(
            journal.exists(),
            "the change is journalled while it is in force"
        );
        child
    };
    // SIGTERM: a normal way out.
    let mut child = start();
    // SAFETY: signalling our own child by its pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert!(child.wait().unwrap().success());
    assert_eq!(read(), before, "not restored after SIGTERM");
    assert!(!journal.exists());
    // SIGKILL: nothing can run; the journal remembers.
    let mut child = start();
    child.kill().unwrap();
    let _ = child.wait();
    assert_eq!(read(), target, "SIGKILL leaves the setting changed");
    let out = Command::new(env!("CARGO_BIN_EXE_jitterscope"))
        .arg("restore")
        .env("JITTERSCOPE_JOURNAL", &journal)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains(&format!("restored {path} to {before}")),
        "{stdout}"
    );
    assert_eq!(read(), before, "not restored by `jitterscope restore`");
    assert!(!journal.exists());
    // Nothing left: restore says so.
    let out = Command::new(env!("CARGO_BIN_EXE_jitterscope"))
        .arg("restore")
        .env("JITTERSCOPE_JOURNAL", &journal)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("nothing to restore"));
}

/// Each kind, injected during a real run, is attributed to itself in the run file.
#[test]
fn each_noise_kind_is_attributed_by_name_in_a_run() {
    if skip_bpf("each_noise_kind_is_attributed_by_name_in_a_run")
        || fewer_cpus_than("each_noise_kind_is_attributed_by_name_in_a_run", 2)
    {
        return;
    }
    let _cpus = exclusive();
    let irq = steerable_irq_or_skip("each_noise_kind_is_attributed_by_name_in_a_run");
    let mut kinds = vec!["kworker", "task", "timer"];
    if irq.is_some() {
        kinds.push("irq");
    }
    for kind in kinds {
        let dir = tempfile::tempdir().unwrap();
        let run = Command::new(env!("CARGO_BIN_EXE_jitterscope"))
            .args([
                "--cpus",
                "0,1",
                "--duration",
                "2s",
                "--warmup",
                "300ms",
                "--no-tui",
                "--output",
            ])
            .arg(dir.path())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(500));
        let noise = Command::new(env!("CARGO_BIN_EXE_jitterscope"))
            .args([
                "noise",
                "--cpu",
                "1",
                "--kind",
                kind,
                "--rate",
                "300",
                "--duration",
                "1500ms",
            ])
            .env("JITTERSCOPE_JOURNAL", dir.path().join("restore.json"))
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(noise.success());
        assert!(run.wait_with_output().unwrap().status.success());
        let r = jitterscope::report::runfile::RunFile::read(&run_file_in(dir.path())).unwrap();
        let on_cpu1 = |c: &&jitterscope::report::runfile::CulpritEntry| {
            c.cpus.iter().any(|x| x.cpu == CPU && x.measured_ns > 0)
        };
        let found = r.culprits.iter().filter(on_cpu1).any(|c| match kind {
            "kworker" => c.class == CulpritClass::Kworker && c.detail == "refresh_vm_stats",
            "task" => c.class == CulpritClass::Task && c.name.starts_with("js-noise-task["),
            "timer" => c.class == CulpritClass::Task && c.name.starts_with("js-noise-timer["),
            _ => {
                let (n, name) = irq.as_ref().unwrap();
                c.class == CulpritClass::Irq && c.name == format!("{n} {name}")
            }
        });
        let names: Vec<String> = r
            .culprits
            .iter()
            .filter(on_cpu1)
            .map(|c| format!("{} {} {}", c.class, c.name, c.detail))
            .collect();
        assert!(found, "{kind} noise not attributed on CPU {CPU}: {names:?}");
    }
}

#[test]
fn inject_runs_noise_inside_a_run() {
    if skip_bpf("inject_runs_noise_inside_a_run")
        || fewer_cpus_than("inject_runs_noise_inside_a_run", 2)
    {
        return;
    }
    let _cpus = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_jitterscope"))
        .args([
            "--cpus",
            "0,1",
            "--duration",
            "1500ms",
            "--warmup",
            "200ms",
            "--no-tui",
        ])
        .args(["--inject", "task@1:100", "--output"])
        .arg(dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains("injected Task noise: "), "{stdout}");
    assert!(
        stdout.contains("js-noise-task["),
        "the injected task is not among the culprits:\n{stdout}"
    );
}
