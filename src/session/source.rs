//! The stall source: the seam between kinds of session. A source is what a session attributes
//! — in `run`, the workload's own clock gaps (`run::RunSource`); in `watch`, the interruptions
//! the kernel saw of the user's threads (`watch::WatchSource`). The one record loop
//! (`record`) and the one finish (`finish`) drive any source through these two traits; a new
//! kind of source (a cgroup, a container) is a new implementation of them, not a new loop.

use std::path::{Path, PathBuf};

use anyhow::Result;

use super::record::EndReason;
use super::Console;
use crate::live::frontend::Needs;
use crate::live::LiveModel;
use crate::model::Nanos;
use crate::platform::pace::Pacer;
use crate::report::files::{OutputDir, OutputError};
use crate::report::metrics::MetricsFile;
use crate::report::runfile::RunFile;

/// How a session speaks of itself in what it prints.
#[derive(Debug, Clone, Copy)]
pub(super) struct Words {
    /// What it is: "run" or "watch".
    pub noun: &'static str,
    /// What it did with what it reports: "measured" or "seen".
    pub verb: &'static str,
}

/// A source while it records: what each turn of the loop asks of it.
pub(super) trait StallSource: Sized {
    /// What the source becomes once it stopped: what the finish asks of it.
    type Stopped: StoppedSource;

    fn words(&self) -> Words;
    /// The live view is on (a failed metrics rewrite is then left for the end to say).
    fn tui(&self) -> bool;
    /// Waits for the next turn; `Some` when the source ended on its own meanwhile.
    fn wait_turn(&mut self) -> Option<EndReason>;
    /// One turn: what the source produced since the last one, into the attribution.
    fn turn(&mut self);
    /// The metrics file, if asked for.
    fn metrics(&self) -> Option<&MetricsFile>;
    /// Rewrites the metrics file from what the source holds at `now`.
    fn rewrite_metrics(&mut self, now: Nanos) -> Result<(), String>;
    /// Does `work`, whose CPU time the source counts as its own (see `run`'s budget).
    fn charged<R>(&mut self, work: impl FnOnce(&mut Self) -> R) -> R {
        work(self)
    }
    /// Why the session ends now, if it does, and what to say (nothing when empty).
    fn end_asked(&mut self, now: Nanos) -> Option<(EndReason, String)>;
    /// Asks the source's own threads to stop (the loop ended before the source did).
    fn request_stop(&self) {}
    /// The live model brought up to date at `now`, keeping up only what `needs` says, and the
    /// pacer its showing goes on with (the slice the turn began).
    fn live(&mut self, now: Nanos, needs: Needs) -> (&LiveModel, &mut Pacer);
    /// The live view asked for its totals to start again.
    fn reset_view(&mut self) {}
    /// The turns are over (before the frontend closes).
    fn turns_over(&mut self) {}
    /// Stops the source and takes whatever waited for the end.
    fn stop(self, ended: EndReason, out: &mut Console) -> Result<Self::Stopped>;
}

/// A source once it stopped: its run file, its own files and notes.
pub(super) trait StoppedSource {
    fn words(&self) -> Words;
    fn colour(&self) -> bool;
    fn output(&self) -> &OutputDir;
    /// The files' common name, before each one's suffix.
    fn stem(&self) -> &str;
    /// The files cost the run's CPU time: the first exporter that shows the overhead shows
    /// what they cost up to it (`overhead.files_cpu_ns`).
    fn files_costed(&self) -> bool {
        false
    }
    /// The run file and the `.hgrm` files written beside it (the first error in `error`).
    fn run_file(&mut self, error: &mut Option<OutputError>) -> (RunFile, Vec<PathBuf>);
    /// Notes on what went missing or late, after the report.
    fn notes(&self, _out: &mut Console) -> Result<()> {
        Ok(())
    }
    /// The interval log and its first error.
    fn interval_log(&self) -> (&Path, Option<&std::io::Error>);
    /// The metrics file, and why its last rewrite failed.
    fn metrics(&self) -> (Option<&MetricsFile>, Option<&str>);
}
