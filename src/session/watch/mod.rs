//! `jitterscope watch`: the same explanations for the user's own threads. The stall source is
//! the kernel itself — the probes, in watch mode, report what interrupted the watched threads
//! (`attribution::watch`); the engine, the ranking, the stall book, the record loop, the live
//! view, the finish and the run file are the session's. This module resolves the target
//! (`target`), starts the probes and the command (`start`), and is the watched threads as a
//! stall source (`source`, `runfile`).

mod runfile;
mod source;
mod start;
pub mod target;

use std::io::Write;
use std::path::Path;

use anyhow::Result;

use super::{Console, Shown};
use crate::attribution::watch::AccountId;
use crate::live::frontend::PlainLines;
use crate::model::{Cpu, Ended, Nanos};
use crate::report::files::OutputDir;
use crate::signals;
use source::WatchSource;
use target::{Found, Target, TargetError};

/// Everything a watch needs, validated.
#[derive(Debug, Clone)]
pub struct WatchPlan {
    pub target: Target,
    /// The CPUs that count (every online CPU by default).
    pub cpus: Vec<Cpu>,
    /// None: until Ctrl-C or the target's exit.
    pub duration_ns: Option<Nanos>,
    pub label: String,
    pub output: OutputDir,
    pub keep_stalls: usize,
    pub progress: bool,
    pub tui: bool,
    pub colour: bool,
    pub ringbuf_bytes: u32,
    /// Where /proc is (tests give a fake one for target checks).
    pub proc_root: std::path::PathBuf,
    /// The metrics file for node_exporter, if asked for.
    pub metrics: Option<crate::report::metrics::MetricsPlan>,
}

/// Where the watch's files went.
#[derive(Debug, Clone)]
pub struct WatchOutcome {
    pub json_path: std::path::PathBuf,
    pub ended: Ended,
}

/// Makes a `--container` the cgroup of that container and checks a `--cgroup` (bad input is a
/// `TargetError`), before anything is loaded.
pub fn resolve_target(plan: &mut WatchPlan) -> Result<()> {
    let asked = std::mem::replace(&mut plan.target, Target::Tids(Vec::new()));
    plan.target = target::resolve(asked)?;
    Ok(())
}

/// Checks the target against /proc: bad input is a usage error, before anything is loaded.
pub fn check_target(plan: &WatchPlan) -> Result<Vec<Found>, TargetError> {
    target::check(&plan.target, &plan.proc_root)
}

/// What is being watched, as it goes.
pub(super) struct Watched {
    /// The process followed for new threads (kernel tgid), and its id as the user sees it.
    follow: Option<(u32, u32)>,
    /// The cgroup followed for new threads (`--cgroup`, `--container`): its path.
    cgroup: Option<String>,
    child: Option<std::process::Child>,
    /// Each thread's (pid, tid) as the user sees them, and the last schedstat read, by its
    /// account in the book (a kernel tid can be two threads' in one watch: see
    /// `attribution::watch::AccountId`).
    pub(super) ids: std::collections::BTreeMap<AccountId, ThreadIds>,
    /// How many of `ids` exited (every one gone ends the watch: counted as they go, not
    /// looked for at every turn).
    pub(super) exited: usize,
    /// Threads of the target found at the start that did not fit the probes' thread map.
    pub(super) left_out: u64,
}

impl Watched {
    /// The thread of account `id` exited (`sched`: its schedstat then, when the kernel's
    /// record of its exit gave it); counted once.
    pub(super) fn exit(&mut self, id: AccountId, sched: Option<(Nanos, Nanos)>) {
        let Some(ids) = self.ids.get_mut(&id) else {
            return;
        };
        ids.last = sched.or(ids.last);
        if !std::mem::replace(&mut ids.exited, true) {
            self.exited += 1;
        }
    }
}

#[derive(Debug, Clone, Copy, Default)]
pub(super) struct ThreadIds {
    pub(super) pid: u32,
    pub(super) tid: u32,
    /// schedstat at first sight and last read: (on CPU, waiting) ns.
    pub(super) first: Option<(Nanos, Nanos)>,
    pub(super) last: Option<(Nanos, Nanos)>,
    pub(super) exited: bool,
}

pub fn watch(plan: WatchPlan, found: Vec<Found>, out: &mut dyn Write) -> Result<WatchOutcome> {
    signals::install();
    let mut console = Console { out, error: None };
    let result = watch_phases(plan, found, &mut console);
    if let Some(e) = console.error {
        eprintln!("note: standard output went away during the watch ({e}); the report is in the watch's files");
    }
    result
}

fn watch_phases(plan: WatchPlan, found: Vec<Found>, out: &mut Console) -> Result<WatchOutcome> {
    let watching = start::start(&plan, found, out)?;
    let from = watching.record_from;
    let end = plan.duration_ns.map_or(Nanos::MAX, |d| from + d);
    let shown = Shown {
        tui: plan.tui,
        progress: plan.progress,
        refresh_ns: 500_000_000,
    };
    let mut frontend = super::frontend_for(shown, &|| PlainLines::watch(from, end), out);
    let source = WatchSource::new(plan, watching);
    let f = super::record_and_finish(source, frontend.as_mut(), out)?;
    Ok(WatchOutcome {
        json_path: f.json_path,
        ended: f.run.run.ended,
    })
}

/// The path of /proc this process sees.
pub fn default_proc() -> &'static Path {
    Path::new("/proc")
}
