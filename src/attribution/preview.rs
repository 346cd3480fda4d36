//! Deciding at the end (`--attribution end`), the live preview while the culprits wait for
//! the end: the kernel's time by culprit on the measured CPUs (`tally`) and, for the live
//! view's spike feed, their recent episodes (`recent`), kept from the records the probes'
//! drain thread glances at where they wait in the rings (the session hands them here
//! through `probe::Glance`). The drain thread adds and publishes; the collector reads.

use std::ops::Deref;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::model::{Cpu, Glimpse, Nanos};

use super::recent::RecentKernel;
use super::tally::{KernelTally, KernelTime, LISTED};

/// The accumulating side, shared behind one lock: the thread that glances takes it once a
/// step of records (a few), the collector for one look at the recent episodes.
#[derive(Debug)]
pub struct Preview {
    tally: KernelTally,
    recent: Option<RecentKernel>,
    shown: Arc<Mutex<Option<KernelTime>>>,
}

/// The reading side, for the collector.
#[derive(Debug, Clone)]
pub struct PreviewView {
    shown: Arc<Mutex<Option<KernelTime>>>,
    preview: Arc<Mutex<Preview>>,
}

/// The recent episodes, the preview's lock held for one look.
pub struct Recent<'a>(MutexGuard<'a, Preview>);

impl Deref for Recent<'_> {
    type Target = RecentKernel;

    fn deref(&self) -> &RecentKernel {
        // Made only for a preview that keeps them (`PreviewView::recent`).
        self.0
            .recent
            .as_ref()
            .expect("a preview keeping its recent episodes")
    }
}

impl Preview {
    /// A preview of the measured `cpus`; with `spike_windows`, their recent episodes are
    /// kept too, room for them made now (adding them allocates nothing while recording).
    pub fn new(cpus: &[Cpu], spike_windows: bool) -> (Arc<Mutex<Preview>>, PreviewView) {
        let shown = Arc::new(Mutex::new(None));
        let preview = Arc::new(Mutex::new(Preview {
            tally: KernelTally::default(),
            recent: spike_windows.then(|| RecentKernel::with_room(cpus)),
            shown: shown.clone(),
        }));
        let view = PreviewView {
            shown,
            preview: preview.clone(),
        };
        (preview, view)
    }

    /// Adds a record, its time counted from `from_ns` (the run's window).
    pub fn add(&mut self, from_ns: Nanos, glimpse: &Glimpse<'_>) {
        self.tally.add(glimpse, from_ns, self.recent.as_mut());
    }

    /// A glance, or a drain that took records in for the preview, is over: `complete_to_ns`
    /// is when it began if it read every ring to its end (`RecentKernel::glanced`). The
    /// culprits with the most time so far are published for the live view.
    pub fn glanced(&mut self, complete_to_ns: Option<Nanos>) {
        if let Some(r) = self.recent.as_mut() {
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
    pub fn recent(&self) -> Option<Recent<'_>> {
        let preview = self.preview.lock().ok()?;
        preview.recent.is_some().then_some(Recent(preview))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Culprit, CulpritClass, Glimpsed, Who};

    #[test]
    fn the_top_culprits_are_published_at_each_glance_and_recent_episodes_only_when_kept() {
        let culprit = Culprit {
            class: CulpritClass::Kthread,
            who: Who::Kthread {
                comm: "ksoftirqd/0".into(),
            },
        };
        let glimpse = Glimpse {
            cpu: 0,
            start_ns: 1000,
            end_ns: 1400,
            what: Glimpsed::Episode {
                class: CulpritClass::Kthread,
                parent: None,
                end_unseen: false,
                culprit: Some(&culprit),
                naming: 1,
            },
        };
        let (preview, view) = Preview::new(&[0], true);
        preview.lock().unwrap().add(0, &glimpse);
        assert_eq!(view.kernel_time(), None, "nothing before the first glance");
        preview.lock().unwrap().glanced(Some(2000));
        let shown = view.kernel_time().expect("published");
        assert_eq!(
            (shown.total_ns, shown.culprits[0].culprit.clone()),
            (400, culprit)
        );
        assert_eq!(view.recent().map(|r| r.complete_to_ns()), Some(2000));
        let (_, without) = Preview::new(&[0], false);
        assert!(without.recent().is_none());
    }
}
