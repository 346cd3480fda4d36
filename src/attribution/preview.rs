//! Deciding at the end (`--attribution end`), the live preview while the culprits wait for
//! the end: the kernel's time by culprit on the measured CPUs (`tally`) and, for the live
//! view's spike feed, their recent episodes (`recent`), kept from the records the probes'
//! drain thread glances at where they wait in the rings (the session hands them here
//! through `probe::Glance`). The drain thread adds and publishes; the collector reads.

use std::sync::{Arc, Mutex, MutexGuard};

use crate::model::{Cpu, Glimpse, Nanos};

use super::recent::RecentKernel;
use super::tally::{KernelTally, KernelTime, LISTED};

/// The accumulating side, owned by the thread that glances.
#[derive(Debug)]
pub struct Preview {
    tally: KernelTally,
    recent: Option<Arc<Mutex<RecentKernel>>>,
    shown: Arc<Mutex<Option<KernelTime>>>,
}

/// The reading side, for the collector.
#[derive(Debug, Clone)]
pub struct PreviewView {
    shown: Arc<Mutex<Option<KernelTime>>>,
    recent: Option<Arc<Mutex<RecentKernel>>>,
}

impl Preview {
    /// A preview of the measured `cpus`; with `spike_windows`, their recent episodes are
    /// kept too, room for them made now (adding them allocates nothing while recording).
    pub fn new(cpus: &[Cpu], spike_windows: bool) -> (Preview, PreviewView) {
        let recent = spike_windows.then(|| Arc::new(Mutex::new(RecentKernel::with_room(cpus))));
        let shown = Arc::new(Mutex::new(None));
        let view = PreviewView {
            shown: shown.clone(),
            recent: recent.clone(),
        };
        let preview = Preview {
            tally: KernelTally::default(),
            recent,
            shown,
        };
        (preview, view)
    }

    /// Adds a step of records, their time counted from `from_ns` (the run's window); the
    /// recent episodes' lock is taken once for the step.
    pub fn add(&mut self, from_ns: Nanos, step: &[Glimpse]) {
        let mut recent = self.recent.as_ref().and_then(|m| m.lock().ok());
        for g in step {
            self.tally.add(g, from_ns, recent.as_deref_mut());
        }
    }

    /// A glance, or a drain that took records in for the preview, is over: `complete_to_ns`
    /// is when it began if it read every ring to its end (`RecentKernel::glanced`). The
    /// culprits with the most time so far are published for the live view.
    pub fn glanced(&mut self, complete_to_ns: Option<Nanos>) {
        if let Some(mut r) = self.recent.as_ref().and_then(|m| m.lock().ok()) {
            r.glanced(complete_to_ns);
        }
        let top = self.tally.top(LISTED);
        if let Ok(mut cell) = self.shown.lock() {
            *cell = Some(top);
        }
    }
}

impl PreviewView {
    /// The kernel's time by culprit at the latest glance; None before the first (or when
    /// the culprits are decided as the run goes).
    pub fn kernel_time(&self) -> Option<KernelTime> {
        self.shown.lock().ok().and_then(|k| k.clone())
    }

    /// The recent episodes, when they are kept: the lock is the caller's for one look.
    pub fn recent(&self) -> Option<MutexGuard<'_, RecentKernel>> {
        self.recent.as_ref()?.lock().ok()
    }
}
