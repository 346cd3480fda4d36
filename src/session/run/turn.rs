//! A run's turn: the workload's stalls, spikes and intervals and the probes' records taken in,
//! and what can be decided decided, in short slices within the collector's budget.

use crate::attribution::run::RunAttribution;
use crate::model::{Nanos, Stall};
use crate::platform::clock::{monotonic_ns, own_thread_cpu_ns};
use crate::platform::pace::Pacer;
use crate::probe::decode::Record;
use crate::system::cputime;
use crate::workload::histograms::RESET_NS;
use crate::workload::Output;

use super::super::containers::ContainerTags;
use super::super::prepare::Prepared;
use super::intervals::IntervalWork;
use super::{spend, spend_always, CpuSample, Recorder};

/// How far behind the last drain that emptied the rings stalls are decided. Every record
/// committed before that drain began is in: the margin covers a record whose slot was still
/// being written when the drain passed it, and the clocks read on either side of a stall.
pub(super) const DECISION_LAG_NS: Nanos = 100_000_000;

/// Stalls, and spikes, decided between two looks at the pacer: a stall takes under a µs, a
/// spike more (each stall piece in its window is swept again) — under an hrtimer storm, 12 of
/// each per step made 252 of the collector's slices overrun 50 µs in a 10 s run, 3 made 29.
pub(super) const DECIDE_STEP: usize = 3;

/// Steps between two looks at the budget when the pacer has not paused (the thread's CPU
/// clock is a system call: once a slice is enough).
pub(super) const BUDGET_LOOK_STEPS: usize = 96;
/// Stalls taken in between two looks at the pacer (a queue pop and an insert at the back).
pub(super) const INTAKE_STEP: usize = 16;
/// Stalls gathered before they are sorted and taken in (a quiet turn has a few hundred; a
/// storm's turn more, taken in batches of this many).
pub(super) const STALLS_KEPT: usize = 4096;
/// Undecided stalls and spikes beyond which the collector decides past its budget (a storm
/// that outlasts it must not grow memory without end).
pub(super) const MAX_PENDING: usize = 200_000;

/// `--attribution end`: undecided stalls and spikes past which the collector asks for a
/// drain before the end (a quiet run reaches it after about a minute, when the rings need
/// room about as often), so that the stalls are decided and memory stays bounded.
pub(super) const AT_END_PENDING: usize = MAX_PENDING / 2;
/// `--attribution end`: the share of the workload's stall queues (`AT_END_STALL_QUEUE`)
/// past which they are emptied before the end.
pub(super) const AT_END_QUEUED: f64 = 0.5;

/// Kernel records taken between two looks at the pacer (under a µs each).
pub(super) const TAKE_STEP: usize = 32;

impl Recorder {
    /// One turn of the loop: drain, attribute, trim, sample jitterscope's own CPU time.
    /// When every CPU is measured, it works in short slices (see `Pacer`).
    /// Over its budget (see `Budget`), it takes in the workload's stalls only: the records wait.
    pub(super) fn turn(&mut self, p: &mut Prepared) {
        // The slice first: its CPU clock is a system call, in the stretch the measured thread
        // waits through.
        self.pacer.begin();
        let intake_before = own_thread_cpu_ns();
        // Deciding at the end, the stalls stay in the workload's queues and the records in
        // the rings until they are needed: once the drain thread drained (a ring needed room,
        // or this thread asked), every stall before its records is taken in with them; and
        // the queues are emptied when half full. Nothing is decided, nor any record dropped
        // as too old, while stalls that could need it are still queued.
        // Once a run has outgrown its rings or queues, it decides as the run goes from then on,
        // each turn's records asked for: caught up only now and then, a noisy run's backlog
        // of undecided stalls kept its records in memory without bound (1.2 GB in a
        // 30-minute soak with noise injected).
        let catch_up = match p.budget.as_ref().filter(|b| b.at_end()) {
            Some(b) => {
                let full = p.workload.queued() >= AT_END_QUEUED;
                // The live view stops showing the run as deciding at the end once it outgrew.
                let outgrown = !self.live.at_end;
                if full || outgrown {
                    b.want_records();
                }
                let caught = b.take_records_delivered() || full;
                if caught && !outgrown {
                    self.outgrow(p);
                }
                caught
            }
            None => true,
        };
        self.drain(p, catch_up);
        // Room for what this turn and the next allocate, grown now a step at a time rather
        // than by the allocations themselves in one piece.
        self.keeper.keep(&mut self.pacer);
        spend_always(p, intake_before);
        // The wall clock first: the time since `now` bounds the CPU time since `cpu_before`.
        let now = monotonic_ns();
        let cpu_before = own_thread_cpu_ns();
        if catch_up && !p.budget.as_ref().is_some_and(|b| b.hold_back()) {
            if let Some((session, rx)) = &p.probe {
                while let Ok(mut batch) = rx.try_recv() {
                    take_records(
                        &mut self.attr,
                        &mut self.containers,
                        &mut batch,
                        &mut self.pacer,
                    );
                    session.recycle(batch);
                }
            }
            // Nothing is decided that records still waiting in the ring could reach.
            let drained = p.budget.as_ref().map_or(u64::MAX, |b| b.drained_at());
            let watermark = now.min(drained).saturating_sub(DECISION_LAG_NS);
            self.pacer.between();
            // Within the budget, unless what waits would outgrow memory.
            let budget = p.budget.as_deref();
            let mut steps = 0;
            while self.attr.decide_some(watermark, DECIDE_STEP, &mut |_| {}) {
                steps += 1;
                let look = self.pacer.between() || steps % BUDGET_LOOK_STEPS == 0;
                if look
                    && budget.is_some_and(|b| !b.allows_since(now, cpu_before))
                    && self.attr.engine.pending() < MAX_PENDING
                {
                    break;
                }
            }
            self.pacer.between();
        }
        spend(p, cpu_before);
        if let Some(b) = p.budget.as_ref().filter(|b| b.at_end()) {
            // The undecided stalls would outgrow their bound: their records, to decide them.
            if self.attr.engine.pending() >= AT_END_PENDING {
                b.want_records();
            }
        }
        self.sample_cpu(p, now);
    }

    /// The process's and the workload's CPU time at `now`, within the recording window: its
    /// first sample and its latest (what jitterscope's own threads took in between).
    pub(super) fn sample_cpu(&mut self, p: &Prepared, now: Nanos) {
        if now < p.record_from {
            return;
        }
        let sample = super::workload_cpu_ns(&p.workload).map(|workload_ns| CpuSample {
            at_ns: now,
            process_ns: cputime::process_cpu_ns(),
            workload_ns,
        });
        if self.cpu_first.is_none() {
            self.cpu_first = sample;
        }
        self.cpu_last = sample.or(self.cpu_last);
    }

    /// Deciding at the end, a ring or a stall queue needed room before the end: from now on
    /// the stalls are decided as the run goes, and the live view shows their culprits, as
    /// when deciding live — the glance at the records for their kernel time stops.
    pub(super) fn outgrow(&mut self, p: &Prepared) {
        if let Some((session, _)) = &p.probe {
            session.set_window_from(0);
        }
        let live = &mut self.live;
        live.at_end = false;
        live.kernel_total_ns = None;
        live.kernel_unseen = 0;
        live.culprits.clear();
        live.note = Some(
            "a record ring or a stall queue needed room before the end: the culprits are decided as the run goes from here on".to_string(),
        );
    }

    /// Everything the stall source produced since the last turn (its stalls and spikes only
    /// if `with_stalls`).
    pub(super) fn drain(&mut self, p: &mut Prepared, with_stalls: bool) {
        let (run_totals, intervals) = (self.needs.run_totals, self.needs.intervals);
        let (totals, attr, live, view_totals, hlog_error, pacer, buckets, stalls) = (
            &mut self.totals,
            &mut self.attr,
            &mut self.live,
            &mut self.view_totals,
            &mut self.hlog_error,
            &mut self.pacer,
            &mut self.buckets,
            &mut self.stalls,
        );
        let held = &mut self.held;
        let (hlog, base_mono) = (&mut p.hlog, p.base_mono);
        p.workload.drain_some(with_stalls, &mut |o| match o {
            Output::Stall(s) => {
                stalls.push(s);
                if stalls.len() >= STALLS_KEPT {
                    take_stalls(attr, stalls, pacer);
                } else if stalls.len().is_multiple_of(INTAKE_STEP) {
                    // Taking them off the workload's queues is work too (up to STALLS_KEPT).
                    pacer.between();
                }
                None
            }
            Output::Spike(s) => {
                take_stalls(attr, stalls, pacer);
                pacer.between();
                attr.spike(s);
                None
            }
            Output::Interval {
                consumer,
                mut hists,
            } => {
                take_stalls(attr, stalls, pacer);
                pacer.between();
                let mut work = IntervalWork {
                    totals,
                    view_totals,
                    live,
                    log: (&mut *hlog, base_mono, &mut *hlog_error),
                    buckets,
                    pacer,
                    run_totals,
                };
                work.glance(consumer, &hists);
                if held.holding() {
                    // Deciding at the end: the box waits for the end, and the consumer
                    // rotates into one made before recording; once the pool runs low the
                    // oldest held interval is taken now, as when deciding live. The live
                    // view still gets the second's percentiles.
                    if intervals || run_totals {
                        work.preview(consumer, &hists);
                    }
                    hists = held.hold(consumer, hists)?;
                    work.take(consumer, &hists, false);
                } else {
                    work.take(consumer, &hists, true);
                }
                hists.clear_paced(&mut || {
                    work.pacer.before(RESET_NS);
                });
                Some(hists)
            }
        });
        take_stalls(attr, stalls, pacer);
    }

    /// Deciding at the end, once the workload stopped: the intervals held for the end, in
    /// the order they began, and no more held.
    pub(super) fn take_held(&mut self, p: &mut Prepared) {
        let mut work = IntervalWork {
            totals: &mut self.totals,
            view_totals: &mut self.view_totals,
            live: &mut self.live,
            log: (&mut p.hlog, p.base_mono, &mut self.hlog_error),
            buckets: &mut self.buckets,
            pacer: &mut self.pacer,
            run_totals: self.needs.run_totals,
        };
        while let Some((consumer, hists)) = self.held.release() {
            work.take(consumer, &hists, false);
        }
    }
}

/// Hands the stalls gathered so far to the engine in time order. The workload hands them over
/// thread by thread, so the second thread's stalls of a turn fall between the first's: taken
/// as they came, each went into the middle of the engine's pending queue, shifting the rest of
/// its chunk (in a profile, a third of the collector's time went to those inserts). In time
/// order, nearly every one goes at the back.
pub(super) fn take_stalls(attr: &mut RunAttribution, stalls: &mut Vec<Stall>, pacer: &mut Pacer) {
    let mut n = 0usize;
    in_end_order(stalls, &mut |s| {
        if n > 0 && n.is_multiple_of(INTAKE_STEP) {
            pacer.between();
        }
        n += 1;
        attr.stall(s);
    });
    stalls.clear();
}

/// Sorted runs of stalls beyond which `in_end_order` sorts them all instead (not expected:
/// each thread's stalls are one run).
pub(super) const MERGED_RUNS: usize = 8;

/// Shows `stalls` to `each` in end order, equal ends in the order given (as a stable sort
/// would), by walking the sorted runs they come in — each thread's stalls, in end order —
/// side by side: no sort of the whole batch in one go, which for the thousands of stalls of
/// an hrtimer storm's turn would be one piece longer than a slice, that no look at the pacer
/// could cut.
pub(super) fn in_end_order(stalls: &[Stall], each: &mut dyn FnMut(Stall)) {
    // Where each run ends (exclusive).
    let mut ends = [0usize; MERGED_RUNS];
    let mut runs = 0;
    for i in 1..=stalls.len() {
        if i == stalls.len() || stalls[i].end_ns < stalls[i - 1].end_ns {
            if runs == MERGED_RUNS {
                let mut sorted = stalls.to_vec();
                sorted.sort_by_key(|s| s.end_ns);
                sorted.into_iter().for_each(each);
                return;
            }
            ends[runs] = i;
            runs += 1;
        }
    }
    // Each run begins where the one before it ends.
    let mut heads = [0usize; MERGED_RUNS];
    if runs > 1 {
        heads[1..runs].copy_from_slice(&ends[..runs - 1]);
    }
    loop {
        let mut first: Option<usize> = None;
        for r in 0..runs {
            if heads[r] < ends[r]
                && first.is_none_or(|f| stalls[heads[r]].end_ns < stalls[heads[f]].end_ns)
            {
                first = Some(r);
            }
        }
        let Some(r) = first else {
            return;
        };
        each(stalls[heads[r]]);
        heads[r] += 1;
    }
}

/// The probes' records into the attribution, a step at a time.
/// Empties `batch`, whose storage the caller can hand back (`ProbeSession::recycle`).
pub(super) fn take_records(
    attr: &mut RunAttribution,
    containers: &mut ContainerTags,
    batch: &mut Vec<Record>,
    pacer: &mut Pacer,
) {
    for (i, r) in batch.drain(..).enumerate() {
        if i % TAKE_STEP == 0 {
            pacer.between();
        }
        match r {
            Record::Interruption(mut i) => {
                containers.tag(&mut i);
                attr.interruption(i)
            }
            Record::Cause(c) => attr.cause(c),
            Record::Steal(s) => attr.steal(s),
            Record::Lost {
                cpu,
                start_ns,
                end_ns,
                count,
            } => attr.lost(cpu, start_ns, end_ns, count),
            // Watch mode only: the probes of a run never send them.
            Record::Wait(_) | Record::Thread(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Stall, ThreadRole};

    #[test]
    fn stalls_are_taken_in_end_order_as_a_stable_sort_gives_them() {
        let mut x = 7u64;
        let mut next = |m: u64| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) % m
        };
        for round in 0..400u64 {
            // A batch as the workload hands it over: a sorted run per thread, one after the
            // other (up to 12 of them, more than are merged); every fifth batch in no order.
            let runs = 1 + next(12);
            let mut batch = Vec::new();
            for t in 0..runs {
                let mut end = next(50);
                for _ in 0..next(40) {
                    if round % 5 == 4 {
                        end = next(200);
                    } else {
                        // Equal ends within and across runs test the order of ties.
                        end += next(3);
                    }
                    batch.push(Stall {
                        cpu: t as u32,
                        thread: ThreadRole::Consumer(t as _),
                        start_ns: batch.len() as u64,
                        end_ns: end,
                    });
                }
            }
            let mut sorted = batch.clone();
            sorted.sort_by_key(|s| s.end_ns);
            let mut taken = Vec::new();
            in_end_order(&batch, &mut |s| taken.push(s));
            assert_eq!(taken, sorted, "round {round}: {runs} runs");
        }
        in_end_order(&[], &mut |_| panic!("nothing to take"));
    }
}
