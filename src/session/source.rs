//! The stall source: what a run attributes. In `run` it is the workload's own clock gaps (its
//! spinning threads report their stalls, spikes and interval histograms); a watch will feed
//! kernel-observed interruptions of other threads through the same seam. Everything crosses
//! it by value — counters are read as totals, not shared atomics — so the source may one day
//! live in a process of its own.

use std::sync::atomic::Ordering::Relaxed;

use crate::model::{Nanos, Spike};
use crate::system::cputime;
use crate::workload::histograms::IntervalHistograms;
use crate::workload::{Output, Workload};

/// What went missing or was late on the source's side.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SourceCounters {
    /// Stalls and spikes that did not fit the source's queues.
    pub queue_drops: u64,
    /// Messages seen out of sequence (a ring bug if ever non-zero).
    pub sequence_errors: u64,
    /// Publishes that found the ring full (delayed, not lost).
    pub ring_full: u64,
    /// Interval histograms handed over late.
    pub rotations_missed: u64,
}

pub trait StallSource {
    /// Hands over everything produced since the last call; an interval's histograms come
    /// back through the sink's return value to be reused.
    fn drain(&mut self, sink: &mut dyn FnMut(Output) -> Option<Box<IntervalHistograms>>);
    /// `drain`, leaving the stalls and spikes queued unless `stalls` (see `queued`).
    fn drain_some(
        &mut self,
        _stalls: bool,
        sink: &mut dyn FnMut(Output) -> Option<Box<IntervalHistograms>>,
    ) {
        // A source that cannot hold its stalls hands them all over.
        self.drain(sink);
    }
    /// The share of its room the fullest of the source's stall queues holds (0 for a source
    /// that queues nothing).
    fn queued(&self) -> f64 {
        0.0
    }
    /// Stalls waiting in the source's queues.
    fn stalls_queued(&self) -> usize {
        0
    }
    /// Shows `each` the spikes the source holds since the last look (`seen`: where each
    /// queue's last look stopped), leaving them queued (a source that holds none shows
    /// nothing).
    fn peek_spikes(&self, _seen: &mut [usize], _each: &mut dyn FnMut(&Spike)) {}
    /// True once every thread of the source has ended.
    fn finished(&self) -> bool;
    fn request_stop(&self);
    /// Waits for the source's threads.
    fn join(&mut self);
    /// Why a thread cannot be measured where it was placed any more (moved off its CPU).
    fn lost_placement(&self) -> Option<String>;
    /// CPU time of the source's own threads; None once one has ended.
    fn cpu_ns(&self) -> Option<u64>;
    fn counters(&self) -> SourceCounters;
}

impl StallSource for Workload {
    fn drain(&mut self, sink: &mut dyn FnMut(Output) -> Option<Box<IntervalHistograms>>) {
        Workload::drain(self, sink);
    }

    fn drain_some(
        &mut self,
        stalls: bool,
        sink: &mut dyn FnMut(Output) -> Option<Box<IntervalHistograms>>,
    ) {
        Workload::drain_some(self, stalls, sink);
    }

    fn queued(&self) -> f64 {
        Workload::queued(self)
    }

    fn stalls_queued(&self) -> usize {
        Workload::stalls_queued(self)
    }

    fn peek_spikes(&self, seen: &mut [usize], each: &mut dyn FnMut(&Spike)) {
        Workload::peek_spikes(self, seen, each);
    }

    fn finished(&self) -> bool {
        Workload::finished(self)
    }

    fn request_stop(&self) {
        Workload::request_stop(self);
    }

    fn join(&mut self) {
        Workload::join(self);
    }

    fn lost_placement(&self) -> Option<String> {
        Workload::lost_placement(self)
    }

    fn cpu_ns(&self) -> Option<Nanos> {
        let mut ns = 0;
        for t in self.threads() {
            ns += cputime::thread_cpu_ns(t.tid)?;
        }
        Some(ns)
    }

    fn counters(&self) -> SourceCounters {
        let sum = |f: &dyn Fn(&crate::workload::ThreadCounters) -> u64| -> u64 {
            Workload::counters(self).iter().map(|(_, c)| f(c)).sum()
        };
        SourceCounters {
            queue_drops: sum(&|c| c.stalls_dropped.load(Relaxed) + c.spikes_dropped.load(Relaxed)),
            sequence_errors: sum(&|c| c.sequence_errors.load(Relaxed)),
            ring_full: sum(&|c| c.ring_full.load(Relaxed)),
            rotations_missed: sum(&|c| c.rotations_missed.load(Relaxed)),
        }
    }
}
