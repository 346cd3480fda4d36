//! The workload as a stall source (`jitterscope run`): its spinning threads hand over their
//! stalls, spikes and interval histograms; each turn takes them in with the probes' records,
//! decides what it can within the collector's budget, and keeps the interval log; the live
//! model shows its consumers, and the run file its histograms, stalls and spikes.

mod held;
mod intervals;
mod live;
mod metrics;
mod runfile;
mod turn;

use std::collections::VecDeque;
use std::io::Write;
use std::time::Duration;

use anyhow::Result;
use hdrhistogram::Histogram;

use super::containers::ContainerTags;
use super::prepare::Prepared;
use super::record::EndReason;
use super::source::{StallSource, Words};
use super::{Console, RunPlan};
use crate::attribution::run::RunAttribution;
use crate::live::frontend::Needs;
use crate::live::LiveModel;
use crate::model::{Decision, Nanos, Spike, Stall};
use crate::platform::clock::{monotonic_ns, own_thread_cpu_ns};
use crate::platform::heap::HeapKeeper;
use crate::platform::pace::Pacer;
use crate::probe::{AttachStatus, ProbeBatch, ProbeSession, ProbeSummary};
use crate::report::metrics::{MetricsFile, Mode};
use crate::signals;
use crate::system::cputime;
use crate::workload::histograms::{new_histogram, KEPT_FOR_ROTATION};
use crate::workload::Workload;
use held::HeldIntervals;
use intervals::{ConsumerTotals, IntervalBuckets};
use live::{initial_model, PEEKED_KEPT, WINDOWS_SHOWN};
pub(super) use runfile::RunStopped;
use turn::{take_records, STALLS_KEPT};

const WORDS: Words = Words {
    noun: "run",
    verb: "measured",
};

/// A run while it records: the prepared workload, probes and files, and the loop's state.
pub(super) struct RunSource {
    plan: RunPlan,
    p: Prepared,
    r: Recorder,
}

impl RunSource {
    /// Right before the workload's release is recorded: what the frontend `needs` is kept up.
    pub(super) fn new(plan: RunPlan, p: Prepared, needs: Needs) -> Self {
        let r = Recorder::new(&plan, &p, needs);
        RunSource { plan, p, r }
    }
}

impl StallSource for RunSource {
    type Stopped = RunStopped;

    fn words(&self) -> Words {
        WORDS
    }

    fn tui(&self) -> bool {
        self.plan.tui
    }

    fn wait_turn(&mut self) -> Option<EndReason> {
        let (plan, p) = (&self.plan, &self.p);
        if p.workload.finished() {
            return Some(EndReason::Completed);
        }
        let turn = turn(p.every_cpu_measured, plan.decision);
        self.r.pacer.end();
        match &p.probe {
            Some((session, _)) => {
                // The next drain, or the workload's end (with a margin for its threads to
                // see it): the run ends on time whatever the drain's wait. In a long wait the
                // drain thread wakes this one for a signal or a key (`attention`). The turns
                // of a short run may all fall outside its window: the window's CPU is also
                // sampled as it begins and just before it ends (`CpuSample`).
                let deadline = monotonic_ns()
                    + (quiet_turn(p.every_cpu_measured, plan.decision) + TURN_SLACK).as_nanos()
                        as Nanos;
                let deadline = deadline.min(p.end + END_MARGIN_NS);
                let samples = [p.record_from, p.end.saturating_sub(SAMPLED_BEFORE_END_NS)];
                loop {
                    let now = monotonic_ns();
                    let sample = samples.into_iter().find(|&at| at > now && at < deadline);
                    let until = sample.unwrap_or(deadline);
                    let drained =
                        session.wait_drained(Duration::from_nanos(until - now.min(until)));
                    if drained || sample.is_none() {
                        break;
                    }
                    self.r.sample_cpu(p, monotonic_ns());
                }
            }
            None => std::thread::sleep(turn),
        }
        // Deciding at the end, a workload that stopped while the collector waited leaves
        // everything to the end: a turn now would decide it paced, counted as decided while
        // the workload ran (and in the window's CPU) when it ran no longer.
        if plan.decision.at_end() && p.workload.finished() {
            return Some(EndReason::Completed);
        }
        None
    }

    fn turn(&mut self) {
        self.r.turn(&mut self.p);
    }

    fn metrics(&self) -> Option<&MetricsFile> {
        self.r.metrics.as_ref()
    }

    fn rewrite_metrics(&mut self, now: Nanos) -> Result<(), String> {
        self.r.rewrite_metrics(&self.p, now)
    }

    /// Work done whatever the budget, counted against it (the budget keeps room for it).
    fn charged<R>(&mut self, work: impl FnOnce(&mut Self) -> R) -> R {
        let cpu_before = own_thread_cpu_ns();
        let result = work(self);
        spend_always(&self.p, cpu_before);
        result
    }

    fn end_asked(&mut self, _now: Nanos) -> Option<(EndReason, String)> {
        stop_asked(&self.p.workload)
    }

    fn request_stop(&self) {
        self.p.workload.request_stop();
    }

    fn live(&mut self, now: Nanos, needs: Needs) -> (&LiveModel, &mut Pacer) {
        self.r.pacer.between();
        self.r.needs = needs;
        self.r.update_live(&self.p, now);
        (&self.r.live, &mut self.r.pacer)
    }

    fn reset_view(&mut self) {
        for t in self.r.view_totals.iter_mut().filter(|t| !t.is_empty()) {
            self.r.pacer.before(crate::workload::histograms::RESET_NS);
            t.reset();
        }
    }

    fn turns_over(&mut self) {
        self.r.decided_in_run = if self.plan.decision.at_end() {
            self.r.attr.book.count()
        } else {
            0
        };
        // The turns are over: the drain thread's slices no longer go on in the collector's (it
        // was counted at work through the workload's join and the memory given back).
        self.r.pacer.end();
    }

    fn stop(self, ended: EndReason, out: &mut Console) -> Result<RunStopped> {
        let RunSource { plan, mut p, mut r } = self;
        p.workload.join();
        // Only jitterscope's threads are left: the process's CPU from here on is theirs.
        let after_from = cputime::process_cpu_ns();
        // No workload thread runs in this address space any more: memory may move now.
        crate::system::release_memory();
        // Nothing measured shares a CPU with the collector any more.
        r.pacer = Pacer::new(false);
        // Whatever waited for the end: the held intervals, then every stall, spike and record.
        r.take_held(&mut p);
        r.drain(&mut p, true);
        let _ = p.hlog.flush();
        let stop_ns = monotonic_ns().min(p.end);
        let probes = stop_probes(p.probe.take(), &mut r.attr, &mut r.containers, out);
        r.attr.finish();
        let after_cpu_ns = cputime::process_cpu_ns().saturating_sub(after_from);
        let metrics_failed = match r.metrics.is_some() {
            true => r.rewrite_metrics(&p, stop_ns).err(),
            false => None,
        };
        let recorded = Recorded {
            metrics: r.metrics.take(),
            metrics_failed,
            counters: counters(&p.workload),
            cpu: r.cpu_first.zip(r.cpu_last),
            totals: r.totals,
            attr: r.attr,
            ended,
            stop_ns,
            probes,
            hlog_error: r.hlog_error,
            budget: p
                .budget
                .as_ref()
                .filter(|_| p.every_cpu_measured)
                .map(|b| (super::prepare::COLLECTOR_BUDGET, b.held_back())),
            after_cpu_ns,
            decision: plan.decision,
            decided_in_run: r.decided_in_run,
        };
        Ok(RunStopped {
            plan,
            p,
            r: recorded,
        })
    }
}

/// What went missing or was late on the workload's side.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct SourceCounters {
    /// Stalls and spikes that did not fit the workload's queues.
    pub queue_drops: u64,
    /// Messages seen out of sequence (a ring bug if ever non-zero).
    pub sequence_errors: u64,
    /// Publishes that found the ring full (delayed, not lost).
    pub ring_full: u64,
    /// Interval histograms handed over late.
    pub rotations_missed: u64,
}

/// The workload's counters, read as totals.
fn counters(workload: &Workload) -> SourceCounters {
    use std::sync::atomic::Ordering::Relaxed;
    let sum = |f: &dyn Fn(&crate::workload::ThreadCounters) -> u64| -> u64 {
        workload.counters().iter().map(|(_, c)| f(c)).sum()
    };
    SourceCounters {
        queue_drops: sum(&|c| c.stalls_dropped.load(Relaxed) + c.spikes_dropped.load(Relaxed)),
        sequence_errors: sum(&|c| c.sequence_errors.load(Relaxed)),
        ring_full: sum(&|c| c.ring_full.load(Relaxed)),
        rotations_missed: sum(&|c| c.rotations_missed.load(Relaxed)),
    }
}

/// CPU time of the workload's threads; None once one has ended.
fn workload_cpu_ns(workload: &Workload) -> Option<Nanos> {
    let mut ns = 0;
    for t in workload.threads() {
        ns += cputime::thread_cpu_ns(t.tid)?;
    }
    Some(ns)
}

/// jitterscope's own CPU time beside the workload's, sampled from the collector.
#[derive(Debug, Clone, Copy)]
struct CpuSample {
    pub at_ns: Nanos,
    pub process_ns: u64,
    pub workload_ns: u64,
}

/// What recording leaves for the finish.
struct Recorded {
    pub totals: Vec<ConsumerTotals>,
    pub attr: RunAttribution,
    pub ended: EndReason,
    pub stop_ns: Nanos,
    pub probes: Option<(Vec<AttachStatus>, ProbeSummary)>,
    /// First sample once recording started, last one while every workload thread still ran.
    pub cpu: Option<(CpuSample, CpuSample)>,
    pub hlog_error: Option<std::io::Error>,
    pub counters: SourceCounters,
    /// The collector's budget (share of one CPU) and how often it held back, when it had one.
    pub budget: Option<(f64, u64)>,
    /// The metrics file, rewritten a last time (its `error` says whether that worked).
    pub metrics: Option<MetricsFile>,
    /// The metrics file's last rewrite failed: why.
    pub metrics_failed: Option<String>,
    /// CPU time of jitterscope's threads after the workload stopped (the last records and
    /// the decisions still waiting).
    pub after_cpu_ns: u64,
    /// When the culprits were decided.
    pub decision: Decision,
    /// Deciding at the end: the stalls decided while the workload still ran.
    pub decided_in_run: u64,
}

/// The loop's state: totals, attribution, the model shown, and jitterscope's own CPU time.
struct Recorder {
    totals: Vec<ConsumerTotals>,
    attr: RunAttribution,
    /// Each consumer's transit since the start, or since the last reset in the live view.
    view_totals: Vec<Histogram<u64>>,
    live: LiveModel,
    hlog_error: Option<std::io::Error>,
    cpu_first: Option<CpuSample>,
    cpu_last: Option<CpuSample>,
    /// Short slices when the collector shares the producer's CPU.
    pacer: Pacer,
    /// Grows the heap ahead of a storm's backlog (`platform::heap`).
    keeper: HeapKeeper,
    metrics: Option<MetricsFile>,
    /// What the frontend shows: only that is kept up to date.
    needs: Needs,
    /// The recorded buckets of the interval under way (kept between intervals).
    buckets: IntervalBuckets,
    /// A turn's stalls, put in time order before the engine takes them (kept between turns).
    stalls: Vec<Stall>,
    /// Deciding at the end: the intervals held for the end.
    held: HeldIntervals,
    /// Deciding at the end: spikes seen in the workload's queues and not shown yet (they
    /// wait for a glance at the rings past their receipt), and the latest of those ready
    /// at a turn (its room kept between turns).
    peeked: VecDeque<Spike>,
    ready_spikes: VecDeque<Spike>,
    /// Where the last look at each consumer's spike queue stopped.
    spikes_seen: Vec<usize>,
    /// The containers of the task culprits taken in.
    containers: ContainerTags,
    /// Deciding at the end: the stalls decided while the workload still ran (set when the
    /// turns are over).
    decided_in_run: u64,
}

/// How often the collector takes its turn, and the probes' drain thread empties the rings:
/// the collector's turn follows each drain at once (`ProbeSession::wait_drained`), or comes
/// every turn without probes. When they share a measured CPU (every CPU measured), each
/// wake-up costs a switch and a cold cache there, so they come twice a second, together;
/// otherwise four times, for a livelier view. What the live view shows is then at most a turn plus
/// `DECISION_LAG_NS` old. Deciding at the end (`--attribution end`), a turn only takes the
/// second's histograms and looks at the stall queues and the rings: once a second, and
/// less often while that is all it has to do (`quiet_turn`).
pub(super) fn turn(every_cpu_measured: bool, decision: Decision) -> Duration {
    Duration::from_millis(match (decision.at_end(), every_cpu_measured) {
        (true, _) => 1000,
        (false, true) => 500,
        (false, false) => 250,
    })
}

/// The longest turn: deciding at the end with every CPU measured, the turns come every three
/// seconds while the rings fill slowly enough to wait for it (`probe::drain`'s `next_wait`),
/// and the live view is drawn as often. Each turn there is a wake-up on a measured CPU with
/// its code and data cold, which costs more than the records it looks at: every second, a
/// quiet run's `self` share of stall time was above 1 % (`scripts/bench.sh`, "`self` share
/// of stall time, quiet, `--attribution end`"). Elsewhere it is the turn.
pub(super) fn quiet_turn(every_cpu_measured: bool, decision: Decision) -> Duration {
    match decision.at_end() && every_cpu_measured {
        true => AT_END_QUIET_TURN,
        false => turn(every_cpu_measured, decision),
    }
}

const AT_END_QUIET_TURN: Duration = Duration::from_secs(3);
/// How long past its turn the collector waits for a drain (a drain held up by the budget or
/// the host still lets the workload's stalls be taken in on time).
const TURN_SLACK: Duration = Duration::from_millis(100);

/// How long past the workload's planned end the collector waits for its threads to stop.
const END_MARGIN_NS: Nanos = 10_000_000;

/// The window's last CPU sample comes this long before its end, while the workload's threads
/// (whose CPU clocks it reads) still run.
const SAMPLED_BEFORE_END_NS: Nanos = 2_000_000;

/// This thread's CPU time since `cpu_before`, on work that could wait, counts against the
/// collector's budget.
fn spend(p: &Prepared, cpu_before: u64) {
    if let Some(b) = &p.budget {
        b.spend(own_thread_cpu_ns().saturating_sub(cpu_before));
    }
}

/// Like `spend`, for work done whatever the budget (the budget keeps room for it).
fn spend_always(p: &Prepared, cpu_before: u64) {
    if let Some(b) = &p.budget {
        b.spend_always(own_thread_cpu_ns().saturating_sub(cpu_before));
    }
}

/// A signal, or a workload thread moved off its CPU: the run ends early (with what to say).
fn stop_asked(workload: &Workload) -> Option<(EndReason, String)> {
    if let Some(sig) = signals::received() {
        let name = signals::name(sig);
        return Some((
            EndReason::Interrupted(format!("{name} received")),
            format!("{name}: stopping early, writing what was measured"),
        ));
    }
    let why = workload.lost_placement()?;
    Some((
        EndReason::CpuLost(why.clone()),
        format!("stopping early: {why}"),
    ))
}

/// Stops the probes and takes their last records; what was measured is still written when
/// they end badly.
fn stop_probes(
    probe: Option<(ProbeSession, std::sync::mpsc::Receiver<ProbeBatch>)>,
    attr: &mut RunAttribution,
    containers: &mut ContainerTags,
    out: &mut Console,
) -> Option<(Vec<AttachStatus>, ProbeSummary)> {
    let (session, rx) = probe?;
    let attach = session.attach_report().to_vec();
    let summary = session.stop().unwrap_or_else(|e| {
        let _ = writeln!(
            out,
            "WARNING: the kernel probes did not stop cleanly ({e}); their counters are missing from the report"
        );
        ProbeSummary::default()
    });
    let mut unpaced = Pacer::new(false);
    while let Ok(mut batch) = rx.try_recv() {
        take_records(attr, containers, &mut batch, &mut unpaced);
    }
    Some((attach, summary))
}

impl Recorder {
    fn new(plan: &RunPlan, p: &Prepared, needs: Needs) -> Self {
        let cfg = &p.cfg;
        // Deciding at the end, the drain thread glances at the records for the live view's
        // culprits from here on: not when no culprit is shown.
        if let Some((session, _)) = p.probe.as_ref().filter(|_| needs.culprits > 0) {
            session.set_window_from(p.record_from);
        }
        let steal_clock = p.probe.as_ref().is_some_and(|(s, _)| s.steal_clock());
        let mut attr = RunAttribution::new(
            cfg.producer_cpu,
            cfg.consumer_cpus.clone(),
            plan.keep_stalls,
            p.probe.is_some(),
            steal_clock,
            p.record_from,
        );
        if plan.metrics.is_some() {
            attr.keep_theft();
        }
        // Right before recording (what is allocated below is small): the heap grows now,
        // populated (memory is locked), rather than in 128 KiB steps while it records, each a
        // 100 µs system call on the CPU the collector may share with the workload.
        crate::platform::heap::reserve_heap(crate::platform::heap::COLLECTOR_ROOM);
        Recorder {
            totals: cfg
                .consumer_cpus
                .iter()
                .map(|_| ConsumerTotals {
                    transit: new_histogram(),
                    inter_message: new_histogram(),
                    last_transit: None,
                    last_messages: 0,
                    last_interval_ns: 0,
                })
                .collect(),
            attr,
            view_totals: cfg
                .consumer_cpus
                .iter()
                .map(|_| crate::workload::histograms::new_histogram())
                .collect(),
            live: initial_model(plan, p),
            hlog_error: None,
            cpu_first: None,
            cpu_last: None,
            pacer: Pacer::new(p.every_cpu_measured),
            keeper: HeapKeeper::new(p.every_cpu_measured),
            metrics: plan.metrics.clone().map(|m| MetricsFile::new(m, Mode::Run)),
            needs,
            buckets: IntervalBuckets::default(),
            stalls: Vec::with_capacity(STALLS_KEPT),
            peeked: VecDeque::with_capacity(PEEKED_KEPT),
            ready_spikes: VecDeque::with_capacity(WINDOWS_SHOWN),
            spikes_seen: vec![0; cfg.consumer_cpus.len()],
            containers: match &p.probe {
                Some((session, _)) => {
                    ContainerTags::new("/proc".into(), session.kernel_pid() == std::process::id())
                }
                None => ContainerTags::off(),
            },
            decided_in_run: 0,
            held: HeldIntervals::new(
                cfg.consumer_cpus.len(),
                match plan.decision.at_end() {
                    true => cfg.interval_pool.saturating_sub(KEPT_FOR_ROTATION),
                    false => 0,
                },
            ),
        }
    }
}
