//! The independent check with real BPF and real perf: `perf record -k mono` of CPUs 0,1
//! around `jitterscope --cpus 0,1` while known noise runs on the consumer's CPU — a competing
//! task busy 2 ms every 40 ms, `stat_refresh` kworkers every 50 ms, and the tick, always
//! there — then `jitterscope::verify` compares the consumer's CPU. One recording (~15 s) is
//! shared by the tests; each asserts one cause's tolerance. Needs root and perf (Debian
//! package linux-perf, which scripts/deps.sh installs); outside CI, JITTERSCOPE_SKIP_BPF=1
//! skips each test by name.

mod common;

use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use common::perf::{Noise, PerfRecord, Tracefs};
use common::*;
use jitterscope::verify::compare::FirstAttached;
use jitterscope::verify::{self, Comparison, Grade, SpikeCheck, Tolerances};

const PRODUCER: usize = 0;
const CONSUMER: usize = 1;

struct Recorded {
    comparison: Comparison,
    /// The producer's CPU of the same recording.
    producer: Comparison,
    /// The kept spikes of the consumer's CPU against perf in their windows, and how many the
    /// run kept.
    spikes: SpikeCheck,
    kept: usize,
    hog: String,
}

/// Records once for every test of this file; a failure to record is every test's failure.
fn recorded() -> &'static Result<Recorded, String> {
    static ONCE: OnceLock<Result<Recorded, String>> = OnceLock::new();
    ONCE.get_or_init(|| {
        let _cpus = exclusive();
        record()
    })
}

fn record() -> Result<Recorded, String> {
    let perf_found = Command::new("perf")
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !perf_found {
        return Err("perf is not installed: the check records with it — install the Debian package linux-perf (scripts/deps.sh does)".into());
    }
    let _tracefs = Tracefs::ensure();
    let tracepoints = verify::available_tracepoints().map_err(|e| e.to_string())?;
    let dir = tempfile::tempdir().unwrap();
    // Another jitterscope (outside this test binary) may hold the CPUs: wait for it.
    for _ in 0..30 {
        let perf_data = dir.path().join("perf.data");
        let _ = std::fs::remove_file(&perf_data);
        let runs = dir.path().join("runs");
        let perf = PerfRecord::start(
            &perf_data,
            &tracepoints,
            Some(&format!("{PRODUCER},{CONSUMER}")),
            PRODUCER,
        );
        let noise = Noise::start(PRODUCER, CONSUMER);
        let out = Command::new(env!("CARGO_BIN_EXE_jitterscope"))
            .args([
                "--cpus",
                &format!("{PRODUCER},{CONSUMER}"),
                "--warmup",
                "1s",
            ])
            .args([
                "--duration",
                "8s",
                "--no-tui",
                "--label",
                "verify",
                "--output",
            ])
            .arg(&runs)
            .output()
            .expect("start jitterscope");
        let hog = format!("verify-hog[{}]", noise.hog_tid);
        drop(noise);
        let perf_log = perf.stop();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        if !out.status.success() {
            if stderr.contains("already measured by another jitterscope") {
                eprintln!("CPUs taken by another jitterscope; trying again in 10 s");
                std::thread::sleep(Duration::from_secs(10));
                continue;
            }
            return Err(format!("jitterscope failed:\n{stdout}\n{stderr}"));
        }
        let script = Command::new("perf")
            .args(["script", "--ns", "-F", "cpu,time,event,trace", "-i"])
            .arg(&perf_data)
            .stderr(Stdio::null())
            .output()
            .map_err(|e| format!("perf script: {e}"))?;
        let perf_text = String::from_utf8_lossy(&script.stdout);
        let run_text = std::fs::read_to_string(run_file_in(&runs)).unwrap();
        // perf was attached first at each tracepoint (started before jitterscope).
        let tolerances = Tolerances {
            first: Some(FirstAttached::Perf),
            ..Tolerances::default()
        };
        let (comparison, spikes, kept) =
            verify::check_with_spikes(&run_text, &perf_text, Some(CONSUMER as u32), &tolerances)
                .map_err(|e| format!("{e}\nperf record said: {perf_log}"))?;
        let producer = verify::check(&run_text, &perf_text, Some(PRODUCER as u32), &tolerances)
            .map_err(|e| format!("{e}\nperf record said: {perf_log}"))?;
        // Shown with --nocapture (and with the recording test's failure).
        eprintln!(
            "{}\n{}\n{}",
            comparison.to_markdown(),
            spikes.to_markdown(kept),
            producer.to_markdown()
        );
        return Ok(Recorded {
            comparison,
            producer,
            spikes,
            kept,
            hog,
        });
    }
    Err("CPUs 0,1 stayed taken by another jitterscope for 5 minutes".into())
}

/// The recording, or None when the test is skipped or the machine has one CPU.
fn comparison(test: &str) -> Option<&'static Recorded> {
    if skip_bpf(test) || fewer_cpus_than(test, 2) {
        return None;
    }
    match recorded() {
        Ok(r) => Some(r),
        Err(e) => panic!("{e}"),
    }
}

/// Every failure shows the whole table: a cause is read beside the others.
fn assert_within(c: &Comparison, row: &verify::compare::Row) {
    assert_eq!(
        row.grade,
        Grade::Within,
        "{}: jitterscope {:.2} ms, perf {:.2} ms, outside ±{:.0}% (or not graded)\n{}",
        row.name,
        row.js_ns as f64 / 1e6,
        row.perf_ns as f64 / 1e6,
        row.tolerance * 100.0,
        c.to_markdown()
    );
}

#[test]
fn a_competing_task_agrees_with_perf() {
    let Some(r) = comparison("a_competing_task_agrees_with_perf") else {
        return;
    };
    let c = &r.comparison;
    let row = c
        .row(&r.hog)
        .unwrap_or_else(|| panic!("{} is not in the table\n{}", r.hog, c.to_markdown()));
    assert_within(c, row);
}

#[test]
fn stat_refresh_kworkers_agree_with_perf() {
    let Some(r) = comparison("stat_refresh_kworkers_agree_with_perf") else {
        return;
    };
    let c = &r.comparison;
    let rows: Vec<_> = c
        .rows
        .iter()
        .filter(|row| {
            row.name.starts_with(&format!("kworker/{CONSUMER}:"))
                && row.details.iter().any(|d| d == "refresh_vm_stats")
        })
        .collect();
    assert!(
        rows.iter().any(|row| row.grade != Grade::BelowFloor),
        "no graded refresh_vm_stats kworker on CPU {CONSUMER}\n{}",
        c.to_markdown()
    );
    for row in rows.iter().filter(|row| row.grade != Grade::BelowFloor) {
        assert_within(c, row);
    }
}

#[test]
fn the_local_timer_agrees_with_perf() {
    let Some(r) = comparison("the_local_timer_agrees_with_perf") else {
        return;
    };
    let c = &r.comparison;
    let row = c
        .row("local timer")
        .unwrap_or_else(|| panic!("no local timer row\n{}", c.to_markdown()));
    assert_within(c, row);
}

/// Every graded cause of the table, background included (RCU, IRQs, woken kernel threads):
/// Every graded cause within its tolerance (perf attached first: widened under perf's by its
/// handlers' allowance, `Tolerances::handler_ns`). A task whose switches perf lost (graded
/// uncertain) is listed in the failure and may not be one of the injected causes or the tick:
/// those must be measured whole.
#[test]
fn every_graded_cause_agrees_with_perf() {
    let Some(r) = comparison("every_graded_cause_agrees_with_perf") else {
        return;
    };
    every_graded_cause_within(r, &r.comparison, 3);
}

/// The producer's CPU of the same recording, held to the same rules: its causes (perf's own
/// process, the kworkers, the tick, the background) against perf's.
#[test]
fn every_graded_cause_on_the_producers_cpu_agrees_with_perf() {
    let Some(r) = comparison("every_graded_cause_on_the_producers_cpu_agrees_with_perf") else {
        return;
    };
    let c = &r.producer;
    assert!(
        c.covered,
        "perf did not cover the window\n{}",
        c.to_markdown()
    );
    assert!(
        c.agreement >= c.tolerances.agreement,
        "overall agreement {:.3} on the producer's CPU\n{}",
        c.agreement,
        c.to_markdown()
    );
    every_graded_cause_within(r, c, 1);
}

/// Every graded cause of `c` within its tolerance (see `every_graded_cause_agrees_with_perf`),
/// and at least `least` of them graded.
fn every_graded_cause_within(r: &Recorded, c: &Comparison, least: usize) {
    let injected = |name: &str| {
        name == r.hog || name == "local timer" || name.starts_with(&format!("kworker/{}:", c.cpu))
    };
    let mut failures = Vec::new();
    let mut uncertain = Vec::new();
    let mut graded = 0;
    for row in &c.rows {
        let ratio = row.ratio().unwrap_or(0.0);
        match row.grade {
            Grade::Within => graded += 1,
            Grade::BelowFloor | Grade::NotRecordable => {}
            Grade::Uncertain => {
                uncertain.push(format!("{} {ratio:.2}×", row.name));
                if injected(&row.name) {
                    failures.push(format!("{}: perf lost its switches", row.name));
                }
            }
            Grade::Outside => failures.push(format!("{}: {ratio:.3}× perf", row.name)),
        }
    }
    assert!(
        failures.is_empty() && graded >= least,
        "{graded} causes graded within; outside: {failures:?}; perf lost the switches of {uncertain:?}\n{}",
        c.to_markdown()
    );
}

/// The whole table: perf covered the window and the overall agreement holds.
#[test]
fn the_overall_agreement_holds() {
    let Some(r) = comparison("the_overall_agreement_holds") else {
        return;
    };
    let c = &r.comparison;
    assert!(
        c.covered,
        "perf did not cover the window\n{}",
        c.to_markdown()
    );
    assert!(c.tolerances.agreement >= 0.97);
    assert!(
        c.agreement >= c.tolerances.agreement,
        "overall agreement {:.3}\n{}",
        c.agreement,
        c.to_markdown()
    );
}

/// The kept spikes: their culprits, each side's window against perf's events in it, agree
/// overall and name perf's first culprit on most sides; a run that kept spikes none of which
/// could be compared fails.
#[test]
fn the_spikes_culprits_agree_with_perf_in_their_windows() {
    let Some(r) = comparison("the_spikes_culprits_agree_with_perf_in_their_windows") else {
        return;
    };
    let s = &r.spikes;
    assert!(
        r.kept > 0,
        "the run kept no spike: nothing to compare\n{}",
        s.to_markdown(r.kept)
    );
    assert!(
        !s.sides.is_empty(),
        "no kept spike was compared\n{}",
        s.to_markdown(r.kept)
    );
    let failures = s.failures(r.kept);
    assert!(
        failures.is_empty(),
        "{failures:?}\n{}",
        s.to_markdown(r.kept)
    );
}
