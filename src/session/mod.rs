//! One session in three named phases: **prepare** (claim the CPUs, place the collector, load
//! the probes, start the stall source, open the interval log) → **record** (drain, attribute,
//! show the running model to a `Frontend`; ends with an `EndReason`) → **finish** (the run
//! file, the files, the report). The stall source (`source::StallSource`) is the seam between
//! kinds of session: in `run`, the workload's own clock gaps (`run`); in `watch`, the
//! interruptions the kernel saw of the user's threads (`watch`). The record loop and the
//! finish are one for both.

mod containers;
mod decision;
mod finish;
mod pace;
mod prepare;
mod record;
mod rows;
mod run;
mod source;
pub mod watch;

use std::io::Write;

use anyhow::Result;

use crate::live::frontend::{Frontend, LiveView, PlainLines, Silent};
use crate::model::{Decision, Nanos};
use crate::report::files::OutputDir;
use crate::report::metrics::MetricsPlan;
use crate::report::runfile::RunFile;
use crate::signals;
use crate::workload::WorkloadConfig;

pub use decision::{by_default as decision_by_default, AT_END_BY_DEFAULT_UP_TO_NS};
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
    /// When the culprits are decided: deciding after the workload stops, only the intake of
    /// its histograms runs beside it (unless a ring or a queue needs room before the end).
    pub decision: Decision,
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
    // often: at each turn a second or more apart (the turns of a quiet run deciding at the
    // end are 3 s apart: `run::quiet_turn`).
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
