//! One run in three named phases: **prepare** (claim the CPUs, place the collector, load the
//! probes, start the stall source, open the interval log) → **record** (drain, attribute,
//! show the running model to a `Frontend`; ends with an `EndReason`) → **finish** (the run
//! file, the files, the report). The stall source is the seam between kinds of run: here the
//! workload's own clock gaps.

mod decision;
mod finish;
mod pace;
mod prepare;
mod record;
mod source;
pub mod watch;

use std::io::Write;

use anyhow::Result;

use crate::live::frontend::{Frontend, LiveView, PlainLines, Silent};
use crate::model::Decision;
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
    let mut prepared = prepare::prepare(&plan, out)?;
    let mut frontend = frontend_for(&plan, &prepared, out);
    let recorded = record::record(&plan, &mut prepared, frontend.as_mut(), out)?;
    finish::finish(&plan, prepared, recorded, out)
}

/// The live view on a terminal, plain lines elsewhere, nothing for the workshop's steps.
fn frontend_for(plan: &RunPlan, p: &prepare::Prepared, out: &mut Console) -> Box<dyn Frontend> {
    let lines = PlainLines::new(p.record_from, p.end);
    if plan.tui {
        // Every CPU measured: the view's own cost lands on the producer's CPU, so it draws
        // less often.
        let refresh_ns = if p.every_cpu_measured {
            1_000_000_000
        } else {
            250_000_000
        };
        match LiveView::enter(refresh_ns, PlainLines::new(p.record_from, p.end)) {
            Ok(view) => return Box::new(view),
            Err(e) => {
                let _ = writeln!(
                    out,
                    "note: cannot start the live view ({e}); plain output instead"
                );
            }
        }
    }
    if plan.progress {
        Box::new(lines)
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
