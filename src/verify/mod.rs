//! The independent check of attribution (docs/accuracy.md): jitterscope's measured
//! stolen time per cause on a CPU against an independent recorder, `perf record -k mono` of
//! the same CPUs, folded into net durations per cause over the run's recorded window.
//! `perf` reads perf's events, `measured` the run file, `compare` joins and grades them.
//! `wakeups` grades a watched thread's wake-up delays (`jitterscope watch`) against perf's:
//! a `sched_wakeup` of the thread to the `sched_switch` that puts it on a CPU.
//! Pure apart from reading the two files: text in, a graded table out (`scripts/verify.sh`
//! and `tests/verify_bpf.rs` do the recording); `run` is the command that prints it.

pub mod compare;
pub mod measured;
pub mod perf;
pub mod spikes;
pub mod wakeups;

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::model::Cpu;
use crate::platform::input;

pub use compare::{compare, Comparison, Grade, Tolerances};
pub use spikes::SpikeCheck;
pub use wakeups::{compare_wakeups, PerfWakeups, WakeupComparison};

#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    #[error(transparent)]
    RunFile(#[from] measured::MeasuredError),
    #[error("cannot read perf's events: {0}")]
    Perf(#[from] perf::ParseError),
    #[error("the run file names no consumer CPU; give one with --cpu")]
    NoCpu,
    #[error("cannot read run file {path}: {cause}")]
    Io { path: String, cause: String },
    #[error("tracefs is not mounted (no {0}/events): perf's tracepoints need it — mount -t tracefs nodev /sys/kernel/tracing")]
    NoTracefs(String),
    #[error("perf's output holds no event of CPU {0}: was it recorded with -C including that CPU and the tracepoints `jitterscope verify --print-perf-events` lists?")]
    NoEvents(Cpu),
    #[error("perf's output holds no sched:sched_wakeup event: was it recorded with -a and the tracepoints `jitterscope verify --print-perf-events` lists?")]
    NoWakeups,
}

/// What `jitterscope verify` was asked to do.
#[derive(Debug, Clone)]
pub enum VerifyRequest {
    /// List the tracepoints perf must record, those this kernel has.
    PrintPerfEvents,
    Check(Box<CheckRequest>),
}

/// One check: a run file against perf's events of the same run.
#[derive(Debug, Clone)]
pub struct CheckRequest {
    pub run_file: PathBuf,
    pub perf_script: PerfSource,
    /// The CPU to compare; None: the run's first consumer CPU.
    pub cpu: Option<Cpu>,
    /// Compare this watched thread's wake-up delays instead (a watch run file; the id as
    /// the user sees it).
    pub wakeups: Option<u32>,
    pub tolerances: Tolerances,
    /// List every cause under the floor, not only the largest few.
    pub all: bool,
    /// The same scenario recorded with the other tracer attached first: graded across the
    /// two orders (`compare::across_orders`).
    pub swapped: Option<Swapped>,
}

/// The other attach order's recording of a `CheckRequest`'s scenario.
#[derive(Debug, Clone)]
pub struct Swapped {
    pub run_file: PathBuf,
    pub perf_script: PerfSource,
    /// perf was the tracer attached first in the main recording (so jitterscope was in this).
    pub perf_first: bool,
}

/// Where `perf script` output is read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PerfSource {
    Stdin,
    File(PathBuf),
}

/// `jitterscope verify`: the tracepoint list, or the check's table and then an error (exit
/// 1) when the check fails.
pub fn run(req: &VerifyRequest, out: &mut dyn Write) -> anyhow::Result<()> {
    match req {
        VerifyRequest::PrintPerfEvents => {
            for tp in available_tracepoints().map_err(|e| anyhow::anyhow!(e))? {
                writeln!(out, "{tp}")?;
            }
            Ok(())
        }
        VerifyRequest::Check(c) => run_check(c, out),
    }
}

fn read_perf(source: &PerfSource) -> anyhow::Result<String> {
    match source {
        PerfSource::Stdin => input::read_text(Path::new("-"), input::PERF_SCRIPT)
            .context("cannot read perf's events from standard input"),
        PerfSource::File(path) => input::read_text(path, input::PERF_SCRIPT)
            .with_context(|| format!("cannot read perf's events from {}", path.display())),
    }
}

fn run_check(req: &CheckRequest, out: &mut dyn Write) -> anyhow::Result<()> {
    let run = read_run_file(&req.run_file)?;
    let perf = read_perf(&req.perf_script)?;
    if let Some(tid) = req.wakeups {
        return run_wakeup_check(&req.run_file, &run, &perf, tid, &req.tolerances, out);
    }
    let (c, spikes, kept) = check_with_spikes(&run, &perf, req.cpu, &req.tolerances)?;
    let markdown = |c: &Comparison| match req.all {
        true => c.to_markdown_all(),
        false => c.to_markdown(),
    };
    let Some(swapped) = &req.swapped else {
        write!(out, "{}", markdown(&c))?;
        if kept > 0 {
            write!(out, "\n{}", spikes.to_markdown(kept))?;
        }
        let mut failures = c.failures();
        failures.extend(spikes.failures(kept));
        return fail_on(c.cpu, &failures);
    };
    let other_order = Tolerances {
        first: req.tolerances.first.map(compare::FirstAttached::other),
        ..req.tolerances.clone()
    };
    let other = check(
        &read_run_file(&swapped.run_file)?,
        &read_perf(&swapped.perf_script)?,
        Some(c.cpu),
        &other_order,
    )
    .with_context(|| format!("cannot check {}", swapped.run_file.display()))?;
    let (pf, jf) = match swapped.perf_first {
        true => (&c, &other),
        false => (&other, &c),
    };
    write!(out, "##### perf attached first\n\n{}", markdown(pf))?;
    write!(
        out,
        "\n##### jitterscope attached first\n\n{}",
        markdown(jf)
    )?;
    let (rows, failures) = compare::across_orders(pf, jf);
    write!(
        out,
        "\n{}",
        compare::across_orders_markdown(&rows, &failures)
    )?;
    fail_on(c.cpu, &failures)
}

/// An error (exit 1) naming `failures` when there are any.
fn fail_on(cpu: Cpu, failures: &[String]) -> anyhow::Result<()> {
    if !failures.is_empty() {
        anyhow::bail!(
            "the independent check failed on CPU {cpu}: {}",
            failures.join("; ")
        );
    }
    Ok(())
}

/// `--wakeups TID`: the thread's table, then an error (exit 1) when the check fails.
fn run_wakeup_check(
    path: &Path,
    run: &str,
    perf: &str,
    tid: u32,
    tolerances: &Tolerances,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let c = check_wakeups(run, perf, tid, tolerances).with_context(|| {
        format!(
            "cannot check the wake-up delays of thread {tid} in {}",
            path.display()
        )
    })?;
    write!(out, "{}", c.to_markdown())?;
    let failures = c.failures();
    if !failures.is_empty() {
        anyhow::bail!(
            "the independent check failed on thread {}: {}",
            c.thread_name(),
            failures.join("; ")
        );
    }
    Ok(())
}

/// The wake-up check of watched thread `tid` from a watch run file's text and `perf script
/// --ns` text.
pub fn check_wakeups(
    run_file: &str,
    perf_script: &str,
    tid: u32,
    tolerances: &Tolerances,
) -> Result<WakeupComparison, VerifyError> {
    let thread = measured::read_watched_thread(run_file, tid)?;
    let events = perf::parse(perf_script)?;
    if !events
        .iter()
        .any(|e| matches!(e.kind, perf::EventKind::Wakeup { .. }))
    {
        return Err(VerifyError::NoWakeups);
    }
    let to_ns = thread.record_from_ns.saturating_add(thread.duration_ns);
    let perf = PerfWakeups::from_events(&events, tid, thread.record_from_ns, to_ns);
    Ok(compare_wakeups(&thread, &perf, tolerances))
}

/// The check on `cpu` (default: the run's first consumer CPU) from a run file's text and
/// `perf script --ns` text.
pub fn check(
    run_file: &str,
    perf_script: &str,
    cpu: Option<Cpu>,
    tolerances: &Tolerances,
) -> Result<Comparison, VerifyError> {
    let cpu = cpu_or_first(run_file, cpu)?;
    let events = perf::parse(perf_script)?;
    Ok(check_events(run_file, &events, cpu, tolerances)?.0)
}

/// The check on `cpu` and the spikes of that consumer CPU (`spikes`), from a run file's text
/// and `perf script --ns` text: the per-cause comparison, the spikes' and how many spikes the
/// run kept.
pub fn check_with_spikes(
    run_file: &str,
    perf_script: &str,
    cpu: Option<Cpu>,
    tolerances: &Tolerances,
) -> Result<(Comparison, SpikeCheck, usize), VerifyError> {
    let cpu = cpu_or_first(run_file, cpu)?;
    let events = perf::parse(perf_script)?;
    let (c, js) = check_events(run_file, &events, cpu, tolerances)?;
    let kept = spikes::read_spikes(run_file, cpu)?;
    let s = spikes::check_spikes(&kept, &js, &events, tolerances);
    Ok((c, s, kept.len()))
}

/// `cpu`, or the run's first consumer CPU.
fn cpu_or_first(run_file: &str, cpu: Option<Cpu>) -> Result<Cpu, VerifyError> {
    match cpu {
        Some(c) => Ok(c),
        None => {
            let any = measured::read_measured(run_file, 0)?;
            Ok(*any.consumer_cpus.first().ok_or(VerifyError::NoCpu)?)
        }
    }
}

fn check_events(
    run_file: &str,
    events: &[perf::Event],
    cpu: Cpu,
    tolerances: &Tolerances,
) -> Result<(Comparison, measured::Measured), VerifyError> {
    let js = measured::read_measured(run_file, cpu)?;
    if !events.iter().any(|e| e.cpu == cpu) {
        return Err(VerifyError::NoEvents(cpu));
    }
    let to_ns = js.record_from_ns.saturating_add(js.duration_ns);
    // A threshold of 0 (an old run file) still keeps the kernel's entry and exit paths
    // inside their stall.
    let gap = if js.stall_threshold_ns > 0 {
        js.stall_threshold_ns
    } else {
        1_000
    };
    let net = perf::net_durations(events, cpu, js.record_from_ns, to_ns, gap);
    Ok((compare(&js, &net, tolerances), js))
}

/// A run file's text (`-`: standard input), at most `input::RUN_FILE` of it.
pub fn read_run_file(path: &Path) -> Result<String, VerifyError> {
    input::read_text(path, input::RUN_FILE).map_err(|e| VerifyError::Io {
        path: path.display().to_string(),
        cause: crate::report::runfile::not_a_run_file(&e),
    })
}

/// The tracepoints of `perf::perf_tracepoints()` this kernel has (from tracefs).
pub fn available_tracepoints() -> Result<Vec<String>, VerifyError> {
    let root = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]
        .into_iter()
        .find(|r| Path::new(r).join("events").is_dir())
        .ok_or_else(|| VerifyError::NoTracefs("/sys/kernel/tracing".into()))?;
    Ok(perf::perf_tracepoints()
        .into_iter()
        .filter(|tp| {
            let (system, event) = tp.split_once(':').unwrap_or((tp, ""));
            Path::new(root)
                .join("events")
                .join(system)
                .join(event)
                .is_dir()
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A watch run file: thread 4121 over [1.000 s, 1.001 s].
    fn watch_run(count: u64, total_ns: u64, max_ns: u64) -> String {
        format!(
            r#"{{"schema": "jitterscope.run/2", "mode": "watch",
              "run": {{"label": "w", "record_from_ns": 1000000000, "duration_ns": 1000000}},
              "threads": [{{"tid": 4121, "kernel_tid": 4121, "pid": 4120, "name": "my sleeper",
                "wakeups": {{"count": {count}, "total_ns": {total_ns}, "max_ns": {max_ns}}}}}]}}"#
        )
    }

    /// perf script's default fields. Thread 4121: a delay before the window; one woken on
    /// CPU 0 and switched in on CPU 1 (30 µs); a wake-up while it runs (none); 10 µs; one
    /// woken inside the window and switched in after it (60 µs, across its end); one after.
    const PERF: &str = "\
      my sleeper  4121 [001]     0.999000000: sched:sched_switch: prev_comm=my sleeper prev_pid=4121 prev_prio=120 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120
          waker  4000 [000]     0.999990000: sched:sched_wakeup: comm=my sleeper pid=4121 prio=120 target_cpu=001
        swapper     0 [001]     0.999995000: sched:sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=my sleeper next_pid=4121 next_prio=120
      my sleeper  4121 [001]     0.999999000: sched:sched_switch: prev_comm=my sleeper prev_pid=4121 prev_prio=120 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120
          waker  4000 [000]     1.000100000: sched:sched_wakeup: comm=my sleeper pid=4121 prio=120 target_cpu=000
        swapper     0 [001]     1.000130000: sched:sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=my sleeper next_pid=4121 next_prio=120
          waker  4000 [000]     1.000200000: sched:sched_wakeup: comm=my sleeper pid=4121 prio=120 target_cpu=001
      my sleeper  4121 [001]     1.000250000: sched:sched_switch: prev_comm=my sleeper prev_pid=4121 prev_prio=120 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120
          waker  4000 [000]     1.000500000: sched:sched_wakeup: comm=my sleeper pid=4121 prio=120 target_cpu=001
        swapper     0 [001]     1.000510000: sched:sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=my sleeper next_pid=4121 next_prio=120
      my sleeper  4121 [001]     1.000600000: sched:sched_switch: prev_comm=my sleeper prev_pid=4121 prev_prio=120 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120
          waker  4000 [000]     1.000990000: sched:sched_wakeup: comm=my sleeper pid=4121 prio=120 target_cpu=001
        swapper     0 [001]     1.001050000: sched:sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=my sleeper next_pid=4121 next_prio=120
      my sleeper  4121 [001]     1.001060000: sched:sched_switch: prev_comm=my sleeper prev_pid=4121 prev_prio=120 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120
          waker  4000 [000]     1.001100000: sched:sched_wakeup: comm=my sleeper pid=4121 prio=120 target_cpu=001
        swapper     0 [001]     1.001200000: sched:sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=my sleeper next_pid=4121 next_prio=120
";

    #[test]
    fn wake_up_delays_in_the_window_pass_within_tolerance() {
        let tol = Tolerances::default();
        let c = check_wakeups(&watch_run(3, 104_000, 61_000), PERF, 4121, &tol).unwrap();
        assert_eq!(
            c.perf.totals,
            measured::WakeupTotals {
                count: 2,
                total_ns: 40_000,
                max_ns: 30_000
            }
        );
        assert_eq!(
            c.perf.edges,
            measured::WakeupTotals {
                count: 1,
                total_ns: 60_000,
                max_ns: 60_000
            }
        );
        // Counted with the delay across the window's end (104 µs against 100 µs + 5 %).
        assert!(c.passed(), "{:?}", c.failures());
        let md = c.to_markdown();
        assert!(
            md.contains("| total ms | 0.104 | 0.040 | 2.600 | 0.036–0.108 | ✓ |"),
            "{md}"
        );
        assert!(md.contains("| count | 3 | 2 | 1.500 | 1–4 | ✓ |"), "{md}");
        assert!(md.contains("| max µs | 61.0 | 30.0 | 2.033 |"), "{md}");
        assert!(
            md.contains("| across the window's ends | | 1 (0.060 ms) | | | not graded |"),
            "{md}"
        );
        assert!(md.contains("**verdict: PASS**"), "{md}");
        // Or without it (41 µs against 40 µs).
        let c = check_wakeups(&watch_run(2, 41_000, 30_000), PERF, 4121, &tol).unwrap();
        assert!(c.passed(), "{:?}", c.failures());
    }

    #[test]
    fn totals_apart_by_more_than_the_tolerance_fail() {
        let tol = Tolerances::default();
        let c = check_wakeups(&watch_run(3, 110_000, 60_000), PERF, 4121, &tol).unwrap();
        assert_eq!(
            c.failures(),
            vec![
                "total wake-up delay: jitterscope 0.110 ms, perf 0.040 ms (2.75×), outside 0.036–0.108 ms (±5%, ±1.0µs a delay; perf's 1 delay across the window's ends, 0.060 ms, may be counted by either)"
                    .to_string()
            ]
        );
        assert!(c.to_markdown().contains("| 0.036–0.108 | ✗ |"));
        // 40 µs in 2 delays less 5 %, less 1 µs a delay: 36 µs.
        let c = check_wakeups(&watch_run(2, 36_000, 30_000), PERF, 4121, &tol).unwrap();
        assert!(c.passed(), "{:?}", c.failures());
        let c = check_wakeups(&watch_run(2, 35_900, 30_000), PERF, 4121, &tol).unwrap();
        assert!(!c.passed(), "35.9 µs is below 36 µs");
        // A delay lost by jitterscope fails on the count whatever the total.
        let c = check_wakeups(&watch_run(0, 40_000, 30_000), PERF, 4121, &tol).unwrap();
        assert_eq!(
            c.failures(),
            vec!["wake-up delays counted: jitterscope 0, perf 2, outside 1–4 (±5%; perf's 1 delay across the window's ends, 0.060 ms, may be counted by either): a recorder lost or invented delays".to_string()]
        );
        let loose = Tolerances {
            wakeup_total: 0.15,
            ..Tolerances::default()
        };
        assert!(
            check_wakeups(&watch_run(3, 110_000, 60_000), PERF, 4121, &loose)
                .unwrap()
                .passed()
        );
    }

    #[test]
    fn a_thread_perf_never_saw_fails_saying_how_to_record_it() {
        let tol = Tolerances::default();
        let run = watch_run(3, 100_000, 60_000).replace("4121", "4122");
        let c = check_wakeups(&run, PERF, 4122, &tol).unwrap();
        let f = c.failures();
        assert_eq!(f.len(), 2, "{f:?}");
        assert!(
            f[0].starts_with("wake-up delays counted: jitterscope 3, perf 0"),
            "{f:?}"
        );
        assert!(f[1].contains("(perf saw none)"), "{f:?}");
        assert!(
            f[1].contains("never name thread 4122: record every CPU (-a)"),
            "{f:?}"
        );
    }

    #[test]
    fn a_tid_the_run_file_does_not_hold_is_an_error() {
        let e = check_wakeups(&watch_run(3, 1, 1), PERF, 4122, &Tolerances::default()).unwrap_err();
        assert!(
            e.to_string().starts_with(
                "thread 4122 is not in the run file (its watched threads: 4121 my sleeper)"
            ),
            "{e}"
        );
    }

    #[test]
    fn perf_without_wake_ups_or_window_is_refused() {
        let tol = Tolerances::default();
        let switches: String = PERF
            .lines()
            .filter(|l| !l.contains("sched_wakeup"))
            .map(|l| format!("{l}\n"))
            .collect();
        let e = check_wakeups(&watch_run(3, 1, 1), &switches, 4121, &tol).unwrap_err();
        assert!(matches!(e, VerifyError::NoWakeups), "{e}");
        // perf stopped before the window's end (20 ms of slack): not covered.
        let late =
            watch_run(0, 0, 0).replace("\"duration_ns\": 1000000", "\"duration_ns\": 30000000");
        let c = check_wakeups(&late, PERF, 4121, &tol).unwrap();
        assert!(
            c.failures()[0].contains("not over the whole recorded window"),
            "{:?}",
            c.failures()
        );
    }
}
