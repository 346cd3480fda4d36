//! One session in three named phases: **prepare** (claim the CPUs, place the collector, load
//! the probes, start the stall source, open the interval log) → **record** (drain, attribute,
//! show the running model to a `Frontend`; ends with an `EndReason`) → **finish** (the run
//! file, the files, the report). The stall source (`source::StallSource`) is the seam between
//! kinds of session: in `run`, the workload's own clock gaps (`run`); in `watch`, the
//! interruptions the kernel saw of the user's threads (`watch`). The record loop and the
//! finish are one for both.

mod finish;
mod prepare;
mod record;
mod rows;
mod run;
mod source;
pub mod watch;

use std::io::Write;

use anyhow::Result;

use crate::live::frontend::{Frontend, LiveView, PlainLines, Silent};
use crate::model::Nanos;
use crate::report::files::OutputDir;
use crate::report::metrics::MetricsPlan;
use crate::report::runfile::RunFile;
use crate::signals;
use crate::workload::WorkloadConfig;

pub use record::EndReason;

/// Everything a run needs, validated.
#[derive(Debug, Clone)]
pub struct RunPlan {
    pub workload: WorkloadConfig,
    pub label: String,
    pub output: OutputDir,
    pub stall_threshold_auto: bool,
    pub keep_stalls: usize,
    /// Print one progress line per second (when there is no terminal UI).
    pub progress: bool,
    /// Show the live terminal UI (stdout is a terminal and --no-tui was not given).
    pub tui: bool,
    /// ANSI colour in the report (stdout is a terminal).
    pub colour: bool,
    /// Kernel probes with record rings of this size (bytes), or none.
    pub probes: Option<u32>,
    /// The metrics file for node_exporter, if asked for.
    pub metrics: Option<MetricsPlan>,
    /// Decide the culprits after the workload stops (`--attribution end`): the records wait
    /// in the probes' rings and the stalls in the workload's queues, and only the intake of
    /// its histograms runs beside it (unless a ring or a queue needs room before the end).
    pub attribute_at_end: bool,
    /// Deciding at the end was not asked for but chosen (`--attribution auto`, the default):
    /// see `at_end_by_default`.
    pub at_end_by_default: bool,
}

/// The longest run that decides its culprits at the end when not told when to decide
/// (`--attribution auto`): what the rings and the workload's queues hold of a quiet run here
/// with room to spare (an 8 MiB ring fills in some two minutes, a stall queue half-fills in
/// about 90 s). A longer run would decide most of its stalls while it runs anyway — when a
/// ring or a queue needs room, in bursts — for about the `self` share of deciding live, and
/// its live view would show kernel time instead of culprits: it decides live.
pub const AT_END_BY_DEFAULT_UP_TO_NS: Nanos = 60_000_000_000;

/// Whether a run not told when to decide its culprits (`--attribution auto`) decides them at
/// the end: where every CPU is measured, jitterscope's threads must share them and each of
/// their slices stalls the workload, so only what the live view needs runs beside it —
/// unless there is nothing to decide (no probes), something needs the decisions while the run
/// goes on (the metrics file's culprit series), or the run is longer than the rings hold.
pub fn at_end_by_default(
    probes: bool,
    metrics: bool,
    every_cpu_measured: bool,
    duration_ns: Nanos,
) -> bool {
    probes && !metrics && every_cpu_measured && duration_ns <= AT_END_BY_DEFAULT_UP_TO_NS
}

/// Where the run's files went.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    pub run: RunFile,
    pub json_path: std::path::PathBuf,
    pub hgrm_paths: Vec<std::path::PathBuf>,
    pub hlog_path: std::path::PathBuf,
}

pub fn run(plan: RunPlan, out: &mut dyn Write) -> Result<RunOutcome> {
    signals::install();
    let mut console = Console { out, error: None };
    let result = run_phases(plan, &mut console);
    if let Some(e) = console.error {
        eprintln!("note: standard output went away during the run ({e}); the report is in the run's files");
    }
    result
}

fn run_phases(plan: RunPlan, out: &mut Console) -> Result<RunOutcome> {
    let prepared = prepare::prepare(&plan, out)?;
    // Every CPU measured: the view's own cost lands on the producer's CPU, so it draws less
    // often.
    let refresh_ns = if prepared.every_cpu_measured {
        1_000_000_000
    } else {
        250_000_000
    };
    let (from, end) = (prepared.record_from, prepared.end);
    let shown = Shown {
        tui: plan.tui,
        progress: plan.progress,
        refresh_ns,
    };
    let mut frontend = frontend_for(shown, &|| PlainLines::new(from, end), out);
    let source = run::RunSource::new(plan, prepared, frontend.needs());
    let f = record_and_finish(source, frontend.as_mut(), out)?;
    Ok(RunOutcome {
        run: f.run,
        json_path: f.json_path,
        hgrm_paths: f.hgrm_paths,
        hlog_path: f.hlog_path,
    })
}

/// The record and finish phases of any source.
fn record_and_finish<S: source::StallSource>(
    mut source: S,
    frontend: &mut dyn Frontend,
    out: &mut Console,
) -> Result<finish::Finished> {
    let ended = record::record(&mut source, frontend, out)?;
    let stopped = source.stop(ended, out)?;
    finish::finish(stopped, out)
}

/// How a session shows itself as it records.
#[derive(Debug, Clone, Copy)]
struct Shown {
    /// The live view (stdout is a terminal and --no-tui was not given).
    tui: bool,
    /// Plain progress lines when there is no live view.
    progress: bool,
    /// How often the live view draws.
    refresh_ns: Nanos,
}

/// The live view on a terminal, plain lines elsewhere, nothing for the workshop's steps.
fn frontend_for(
    shown: Shown,
    lines: &dyn Fn() -> PlainLines,
    out: &mut Console,
) -> Box<dyn Frontend> {
    if shown.tui {
        match LiveView::enter(shown.refresh_ns, lines()) {
            Ok(view) => return Box::new(view),
            Err(e) => {
                let _ = writeln!(
                    out,
                    "note: cannot start the live view ({e}); plain output instead"
                );
            }
        }
    }
    if shown.progress {
        Box::new(lines())
    } else {
        Box::new(Silent)
    }
}

/// A signal before the workload was released: stop here, nothing measured, no files.
fn check_startup() -> Result<()> {
    match signals::received() {
        Some(sig) => Err(signals::Interrupted(sig).into()),
        None => Ok(()),
    }
}

/// Standard output that may go away mid-run (the terminal closed with SIGHUP, a pipe whose
/// reader quit): the run goes on and its files are still written; the first error is kept
/// and reported on standard error at the end.
struct Console<'a> {
    out: &'a mut dyn Write,
    error: Option<std::io::Error>,
}

impl Write for Console<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.error.is_none() {
            if let Err(e) = self.out.write_all(buf) {
                self.error = Some(e);
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if self.error.is_none() {
            if let Err(e) = self.out.flush() {
                self.error = Some(e);
            }
        }
        Ok(())
    }
}
