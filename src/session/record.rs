//! Record: the loop from the workload's release to its end — drain the stall source and the
//! probes, attribute, keep the interval log, show the running model — ending with why it
//! ended.

use std::collections::VecDeque;
use std::io::Write;
use std::time::Duration;

use anyhow::Result;
use hdrhistogram::Histogram;

use super::prepare::Prepared;
use super::source::{SourceCounters, StallSource};
use super::{Console, RunPlan};
use crate::attribution::run::RunAttribution;
use crate::live::frontend::{Frontend, Needs};
use crate::live::model::ConsumerView;
use crate::live::{CulpritRow, LiveModel};
use crate::model::{Ended, Nanos, Spike, Stall};
use crate::platform::clock::monotonic_ns;
use crate::platform::clock::own_thread_cpu_ns;
use crate::platform::heap::HeapKeeper;
use crate::platform::pace::Pacer;
use crate::probe::decode::Record;
use crate::probe::{AttachStatus, ProbeBatch, ProbeSession, ProbeSummary};
use crate::report::build::{consumer_key, kernel_window_spike, spike_entry};
use crate::report::culprit;
use crate::report::hlog::HlogWriter;
use crate::report::metrics::{ConsumerSeries, Exposure, MetricsFile, Mode};
use crate::report::text::{self, inferred_row_name};
use crate::signals;
use crate::summary::{read_buckets, Buckets, Summary};
use crate::system::cputime;
use crate::workload::histograms::{
    add_buckets, new_histogram, IntervalHistograms, KEPT_FOR_ROTATION, RESET_NS,
};
use crate::workload::Output;

/// How far behind the last drain that emptied the rings stalls are decided. Every record
/// committed before that drain began is in: the margin covers a record whose slot was still
/// being written when the drain passed it, and the clocks read on either side of a stall.
const DECISION_LAG_NS: Nanos = 100_000_000;

/// Why a run ended (the run file's `ended`, and `end_reason` in words).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EndReason {
    Completed,
    /// A signal or the live view ended it early.
    Interrupted(String),
    /// A workload thread was moved off its CPU (offlined, cpuset changed).
    CpuLost(String),
}

impl EndReason {
    /// The run file's `ended`.
    pub fn ended(&self) -> Ended {
        match self {
            EndReason::Completed => Ended::Completed,
            EndReason::Interrupted(_) => Ended::Interrupted,
            EndReason::CpuLost(_) => Ended::CpuLost,
        }
    }

    /// Why, in words (empty when it completed).
    pub fn reason(&self) -> &str {
        match self {
            EndReason::Completed => "",
            EndReason::Interrupted(why) | EndReason::CpuLost(why) => why,
        }
    }
}

/// One consumer's histograms over the whole run.
pub(super) struct ConsumerTotals {
    pub transit: Histogram<u64>,
    pub inter_message: Histogram<u64>,
    /// The latest finished interval, for the progress line.
    last_transit: Option<Summary>,
    last_messages: u64,
    last_interval_ns: Nanos,
}

/// jitterscope's own CPU time beside the workload's, sampled from the collector.
#[derive(Debug, Clone, Copy)]
pub(super) struct CpuSample {
    pub at_ns: Nanos,
    pub process_ns: u64,
    pub workload_ns: u64,
}

/// What recording leaves for the finish.
pub(super) struct Recorded {
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
    /// The culprits were decided at the end (`--attribution end`).
    pub at_end: bool,
    /// Deciding at the end: the stalls decided while the workload still ran.
    pub decided_in_run: u64,
}

/// The loop's state: totals, attribution, the model shown, and jitterscope's own CPU time.
struct Recorder {
    totals: Vec<ConsumerTotals>,
    attr: RunAttribution,
    /// Histograms since the start, or since the last reset in the live view.
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
}

/// Deciding at the end, spikes the live view lists each turn by the kernel time in their
/// window: the latest, as many as its feed shows (each costs the collector 20–30 µs, cold,
/// on a CPU it shares with the workload).
const WINDOWS_SHOWN: usize = crate::live::view::FEED_ROWS as usize;
/// Spikes peeked at and waiting for a glance past their receipt, at most (the oldest go
/// first): those received between the glance's start and the collector's turn after it.
const PEEKED_KEPT: usize = 256;

/// Deciding at the end, each consumer's interval histograms held until the workload stops,
/// oldest first, at most `up_to` each: the boxes made before recording beyond those the
/// consumer needs to rotate into (`workload::histograms::interval_pool_at_end`).
struct HeldIntervals {
    queues: Vec<VecDeque<Box<IntervalHistograms>>>,
    /// 0: none held (deciding live, or the workload stopped).
    up_to: usize,
}

impl HeldIntervals {
    fn new(consumers: usize, up_to: usize) -> Self {
        HeldIntervals {
            queues: (0..consumers)
                .map(|_| VecDeque::with_capacity(up_to + 1))
                .collect(),
            up_to,
        }
    }

    fn holding(&self) -> bool {
        self.up_to > 0
    }

    /// Holds `consumer`'s interval `hists`; past `up_to`, gives back its oldest held one, to be
    /// taken now and its box returned to the consumer.
    fn hold(
        &mut self,
        consumer: usize,
        hists: Box<IntervalHistograms>,
    ) -> Option<Box<IntervalHistograms>> {
        let queue = &mut self.queues[consumer];
        queue.push_back(hists);
        if queue.len() > self.up_to {
            queue.pop_front()
        } else {
            None
        }
    }

    /// Holds no more; then gives back what it held, every consumer's together in the order
    /// the intervals began (the interval log's lines stay in time order).
    fn release(&mut self) -> Option<(usize, Box<IntervalHistograms>)> {
        self.up_to = 0;
        let (_, consumer) = (self.queues.iter().enumerate())
            .filter_map(|(c, q)| q.front().map(|h| (h.start_ns, c)))
            .min()?;
        Some((consumer, self.queues[consumer].pop_front()?))
    }
}

/// An interval's histograms as recorded buckets (`summary::read_buckets`).
#[derive(Default)]
struct IntervalBuckets {
    transit: Buckets,
    inter_message: Buckets,
}

/// How often the collector takes its turn, and the probes' drain thread empties the rings:
/// the collector's turn follows each drain at once (`ProbeSession::wait_drained`), or comes
/// every turn without probes. When they share a measured CPU (every CPU measured), each
/// wake-up costs a switch and a cold cache there, so they come twice a second (four times
/// before, each thread on its own: 25–30 % more of the collector's CPU); otherwise four
/// times, for a livelier view. What the live view shows is then at most a turn plus
/// `DECISION_LAG_NS` old. Deciding at the end (`--attribution end`), a turn only takes the
/// second's histograms and looks at the stall queues and the rings: once a second.
pub(super) fn turn(every_cpu_measured: bool, at_end: bool) -> Duration {
    Duration::from_millis(match (at_end, every_cpu_measured) {
        (true, _) => 1000,
        (false, true) => 500,
        (false, false) => 250,
    })
}
/// How long past its turn the collector waits for a drain (a drain held up by the budget or
/// the host still lets the workload's stalls be taken in on time).
const TURN_SLACK: Duration = Duration::from_millis(100);

/// Stalls, and spikes, decided between two looks at the pacer: a stall takes under a µs, a
/// spike more (each stall piece in its window is swept again) — under an hrtimer storm, 12 of
/// each per step made 252 of the collector's slices overrun 50 µs in a 10 s run, 3 made 29.
const DECIDE_STEP: usize = 3;
/// How far behind the attribution may be before the live view says so: in step, the oldest
/// undecided stall is at most a turn and the decision lag old (0.6 s).
const AWAITING_SHOWN_NS: Nanos = 1_000_000_000;

/// Steps between two looks at the budget when the pacer has not paused (the thread's CPU
/// clock is a system call: once a slice is enough).
const BUDGET_LOOK_STEPS: usize = 96;
/// Stalls taken in between two looks at the pacer (a queue pop and an insert at the back).
const INTAKE_STEP: usize = 16;
/// Stalls gathered before they are sorted and taken in (a quiet turn has a few hundred; a
/// storm's turn more, taken in batches of this many).
const STALLS_KEPT: usize = 4096;
/// Undecided stalls and spikes beyond which the collector decides past its budget (a storm
/// that outlasts it must not grow memory without end).
const MAX_PENDING: usize = 200_000;

/// `--attribution end`: undecided stalls and spikes past which the collector asks for a
/// drain before the end (a quiet run reaches it after about a minute, when the rings need
/// room about as often), so that the stalls are decided and memory stays bounded.
const AT_END_PENDING: usize = MAX_PENDING / 2;
/// `--attribution end`: the share of the workload's stall queues (`AT_END_STALL_QUEUE`)
/// past which they are emptied before the end.
const AT_END_QUEUED: f64 = 0.5;

/// Kernel records taken between two looks at the pacer (under a µs each).
const TAKE_STEP: usize = 32;

pub(super) fn record(
    plan: &RunPlan,
    p: &mut Prepared,
    frontend: &mut dyn Frontend,
    out: &mut Console,
) -> Result<Recorded> {
    let mut r = Recorder::new(plan, p, frontend.needs());
    let ended = loop {
        if StallSource::finished(&p.workload) {
            break EndReason::Completed;
        }
        let turn = turn(p.every_cpu_measured, plan.attribute_at_end);
        r.pacer.end();
        match &p.probe {
            Some((session, _)) => {
                session.wait_drained(turn + TURN_SLACK);
            }
            None => std::thread::sleep(turn),
        }
        // Deciding at the end, a workload that stopped while the collector waited leaves
        // everything to the end: a turn now would decide it paced, counted as decided while
        // the workload ran (and in the window's CPU) when it ran no longer.
        if plan.attribute_at_end && StallSource::finished(&p.workload) {
            break EndReason::Completed;
        }
        r.turn(p);
        let now = monotonic_ns();
        if r.metrics.as_ref().is_some_and(|m| m.due(now)) {
            let cpu_before = own_thread_cpu_ns();
            if let Err(why) = r.rewrite_metrics(p, now) {
                note_metrics_failure(&r.metrics, &why, plan.tui, out);
            }
            spend_always(p, cpu_before);
        }
        if let Some((end, message)) = stop_asked(&p.workload) {
            frontend.close();
            writeln!(out, "{message}")?;
            StallSource::request_stop(&p.workload);
            break end;
        }
        if !frontend.due(now) {
            continue;
        }
        let cpu_before = own_thread_cpu_ns();
        r.pacer.between();
        // The live view may have fallen back to plain lines.
        r.needs = frontend.needs();
        r.update_live(p, now);
        let asked = frontend.show(now, &r.live, out);
        spend_always(p, cpu_before);
        if asked.reset {
            r.view_totals.iter_mut().for_each(|h| h.reset());
        }
        if asked.quit {
            frontend.close();
            let end = EndReason::Interrupted("stopped from the live view".into());
            writeln!(out, "stopped from the live view, writing what was measured")?;
            StallSource::request_stop(&p.workload);
            break end;
        }
    };
    let decided_in_run = if plan.attribute_at_end {
        r.attr.book.count()
    } else {
        0
    };
    // The turns are over: the drain thread's slices no longer go on in the collector's (it
    // was counted at work through the workload's join and the memory given back).
    r.pacer.end();
    // Leave the alternate screen before the report is printed.
    frontend.close();
    StallSource::join(&mut p.workload);
    // Only jitterscope's threads are left: the process's CPU from here on is theirs.
    let after_from = cputime::process_cpu_ns();
    // No workload thread runs in this address space any more: memory may move now.
    crate::system::release_memory();
    // Nothing measured shares a CPU with the collector any more.
    r.pacer = Pacer::new(false);
    // Whatever waited for the end: the held intervals, then every stall, spike and record.
    r.take_held(p);
    r.drain(p, true);
    let _ = p.hlog.flush();
    let stop_ns = monotonic_ns().min(p.end);
    let probes = stop_probes(p.probe.take(), &mut r.attr, out);
    r.attr.finish();
    let after_cpu_ns = cputime::process_cpu_ns().saturating_sub(after_from);
    let metrics_failed = match r.metrics.is_some() {
        true => r.rewrite_metrics(p, stop_ns).err(),
        false => None,
    };
    Ok(Recorded {
        metrics: r.metrics.take(),
        metrics_failed,
        counters: StallSource::counters(&p.workload),
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
        at_end: plan.attribute_at_end,
        decided_in_run,
    })
}

/// A failed rewrite of the metrics file, said once (not over the live view: the end of the
/// run says it); later rewrites are tried on time.
fn note_metrics_failure(file: &Option<MetricsFile>, why: &str, tui: bool, out: &mut Console) {
    if file.as_ref().is_some_and(|m| m.failures == 1) && !tui {
        let _ = writeln!(
            out,
            "WARNING: the metrics file was not rewritten: {why}; trying again every interval"
        );
    }
}

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
fn stop_asked(source: &dyn StallSource) -> Option<(EndReason, String)> {
    if let Some(sig) = signals::received() {
        let name = signals::name(sig);
        return Some((
            EndReason::Interrupted(format!("{name} received")),
            format!("{name}: stopping early, writing what was measured"),
        ));
    }
    let why = source.lost_placement()?;
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
        take_records(attr, &mut batch, &mut unpaced);
    }
    Some((attach, summary))
}

/// Hands the stalls gathered so far to the engine in time order. The workload hands them over
/// thread by thread, so the second thread's stalls of a turn fall between the first's: taken
/// as they came, each went into the middle of the engine's pending queue, shifting the rest of
/// its chunk (in a profile, a third of the collector's time went to those inserts). In time
/// order, nearly every one goes at the back.
fn take_stalls(attr: &mut RunAttribution, stalls: &mut Vec<Stall>, pacer: &mut Pacer) {
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
const MERGED_RUNS: usize = 8;

/// Shows `stalls` to `each` in end order, equal ends in the order given (as a stable sort
/// would), by walking the sorted runs they come in — each thread's stalls, in end order —
/// side by side: no sort of the whole batch in one go, which for 4,096 stalls under an
/// hrtimer storm was a piece of 60–100 µs that no look at the pacer could cut.
fn in_end_order(stalls: &[Stall], each: &mut dyn FnMut(Stall)) {
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
fn take_records(attr: &mut RunAttribution, batch: &mut Vec<Record>, pacer: &mut Pacer) {
    for (i, r) in batch.drain(..).enumerate() {
        if i % TAKE_STEP == 0 {
            pacer.between();
        }
        match r {
            Record::Interruption(i) => attr.interruption(i),
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
            view_totals: cfg.consumer_cpus.iter().map(|_| new_histogram()).collect(),
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
            held: HeldIntervals::new(
                cfg.consumer_cpus.len(),
                match plan.attribute_at_end {
                    true => cfg.interval_pool.saturating_sub(KEPT_FOR_ROTATION),
                    false => 0,
                },
            ),
        }
    }

    /// Rewrites the metrics file from the totals, the attribution and jitterscope's own CPU
    /// time (the process's less the workload's, at the latest sample).
    fn rewrite_metrics(&mut self, p: &Prepared, now: Nanos) -> Result<(), String> {
        let Some(file) = &mut self.metrics else {
            return Ok(());
        };
        let empty = Default::default();
        let e = Exposure {
            now_ns: now,
            elapsed_ns: now.saturating_sub(p.record_from),
            cpus: &p.measured,
            theft: self.attr.theft.as_ref().unwrap_or(&empty),
            steal_ns: &self.attr.steal_seen,
            lost: &self.attr.lost_per_cpu,
            own_cpu_ns: self
                .cpu_last
                .map_or(0, |c| c.process_ns.saturating_sub(c.workload_ns)),
            consumers: self
                .totals
                .iter()
                .zip(&p.cfg.consumer_cpus)
                .enumerate()
                .map(|(i, (t, &cpu))| ConsumerSeries {
                    consumer: consumer_key(i),
                    cpu,
                    transit: &t.transit,
                })
                .collect(),
            threads: Vec::new(),
        };
        file.write(&e)
    }

    /// One turn of the loop: drain, attribute, trim, sample jitterscope's own CPU time.
    /// When every CPU is measured, it works in short slices (see `Pacer`).
    /// Over its budget (see `Budget`), it takes in the workload's stalls only: the records wait.
    fn turn(&mut self, p: &mut Prepared) {
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
                let full = StallSource::queued(&p.workload) >= AT_END_QUEUED;
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
                    take_records(&mut self.attr, &mut batch, &mut self.pacer);
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
        if now >= p.record_from {
            let sample = p.workload.cpu_ns().map(|workload_ns| CpuSample {
                at_ns: now,
                process_ns: cputime::process_cpu_ns(),
                workload_ns,
            });
            if self.cpu_first.is_none() {
                self.cpu_first = sample;
            }
            self.cpu_last = sample.or(self.cpu_last);
        }
    }

    /// Deciding at the end, a ring or a stall queue needed room before the end: from now on
    /// the stalls are decided as the run goes, and the live view shows their culprits, as
    /// when deciding live — the glance at the records for their kernel time stops.
    fn outgrow(&mut self, p: &Prepared) {
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
    fn drain(&mut self, p: &mut Prepared, with_stalls: bool) {
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
        StallSource::drain_some(&mut p.workload, with_stalls, &mut |o| match o {
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
                    if intervals {
                        work.percentiles(consumer, &hists);
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
    fn take_held(&mut self, p: &mut Prepared) {
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

    /// Brings the live model up to date.
    fn update_live(&mut self, p: &Prepared, now: Nanos) {
        let live = &mut self.live;
        let pacer = &mut self.pacer;
        live.elapsed_ns = now.saturating_sub(p.record_from).min(live.planned_ns);
        live.messages_per_s = self
            .totals
            .first()
            .filter(|t| t.last_interval_ns > 0)
            .map_or(0.0, |t| {
                t.last_messages as f64 * 1e9 / t.last_interval_ns as f64
            });
        live.stalls = self.attr.book.count();
        let (undecided, oldest) = self.attr.engine.undecided_stalls();
        live.awaiting = if live.at_end {
            // Most wait in the workload's queues, not yet taken in.
            let waiting = undecided + StallSource::stalls_queued(&p.workload);
            (waiting > 0).then_some((waiting as u64, 0))
        } else {
            oldest
                .map(|end| now.saturating_sub(end))
                .filter(|&behind| behind > AWAITING_SHOWN_NS)
                .map(|behind| (undecided as u64, behind))
        };
        live.lost = self.attr.lost_records + StallSource::counters(&p.workload).queue_drops;
        live.bpf_cost = p
            .probe
            .as_ref()
            .filter(|_| self.needs.bpf_cost)
            .and_then(|(s, _)| s.live_cost())
            .filter(|c| c.events > 0)
            .map(|c| {
                (
                    c.run_time_ns as f64 / c.events as f64,
                    c.run_time_ns as f64 / now.saturating_sub(p.record_from).max(1) as f64,
                )
            });
        for (i, c) in live.consumers.iter_mut().enumerate() {
            pacer.between();
            c.interval = self.totals.get(i).and_then(|t| t.last_transit.clone());
            if !self.needs.run_totals {
                continue;
            }
            c.total = self.view_totals.get(i).filter(|h| !h.is_empty()).map(|h| {
                Summary::brief_paced(h, &mut || {
                    pacer.between();
                })
            });
        }
        if live.at_end {
            // The stalls wait for the end: the kernel's time by culprit so far instead (its
            // rows a piece of their own).
            pacer.between();
            if let Some(k) = p.probe.as_ref().and_then(|(s, _)| s.kernel_time()) {
                live.kernel_total_ns = Some(k.total_ns);
                live.kernel_unseen = k.end_unseen;
                // Every lost-record window the glances and drains saw, in the rings or not.
                live.lost = k.lost + StallSource::counters(&p.workload).queue_drops;
                live.culprits = kernel_rows(&k, p.record_from);
            }
        } else if self.attr.probes_on {
            pacer.between();
            live.culprits =
                culprit_rows(&self.attr, p.record_from, self.needs.culprits, &mut || {
                    pacer.between();
                });
        }
        if live.at_end {
            self.kernel_window_spikes(p);
            return;
        }
        // Each spike once: those decided since the last look (the latest few).
        let fresh = std::mem::take(&mut self.attr.fresh_spikes);
        if !self.needs.feed {
            return;
        }
        let live = &mut self.live;
        for v in &fresh {
            self.pacer.between();
            let line = text::spike_line(p.record_from, &spike_entry(v, self.attr.probes_on));
            if live.feed.back() != Some(&line) {
                live.push_feed(line);
            }
        }
    }
}

impl Recorder {
    /// Deciding at the end, the latest spikes into the live view's feed, each by the kernel
    /// time in its window (`build::kernel_window_spike`) once the glances at the rings have
    /// gone past its receipt: within a turn of it.
    fn kernel_window_spikes(&mut self, p: &Prepared) {
        if !self.needs.feed {
            return;
        }
        // Each look is a piece of its own (cold, some 20 µs here): not in one with what came
        // before it.
        self.pacer.between();
        // The recent episodes' lock is taken for each look alone, never across a pause (the
        // drain thread takes it at each step of its glance).
        let recent = || p.probe.as_ref().and_then(|(s, _)| s.recent_kernel());
        let Some(complete) = recent().map(|r| r.complete_to_ns()) else {
            return;
        };
        // Those waiting from the last turn, then the new ones, in the order they came: a spike
        // received before the latest complete glance began is ready to be shown; the others
        // wait for the next (the few received since that glance began).
        let (waiting, ready) = (&mut self.peeked, &mut self.ready_spikes);
        let mut take = |s: Spike, waiting: &mut VecDeque<Spike>| {
            if s.receive_ns >= complete {
                if waiting.len() == PEEKED_KEPT {
                    waiting.pop_front();
                }
                waiting.push_back(s);
                return;
            }
            if ready.len() == WINDOWS_SHOWN {
                ready.pop_front();
            }
            ready.push_back(s);
        };
        for _ in 0..waiting.len() {
            if let Some(s) = waiting.pop_front() {
                take(s, waiting);
            }
        }
        StallSource::peek_spikes(&p.workload, &mut self.spikes_seen, &mut |s| {
            take(*s, waiting)
        });
        let cfg = &p.cfg;
        let cpus = |s: &Spike| {
            let consumer_cpu = cfg.consumer_cpus.get(s.consumer as usize)?;
            Some((cfg.producer_cpu, *consumer_cpu))
        };
        let ready = std::mem::take(&mut self.ready_spikes);
        for s in &ready {
            let Some(cpus) = cpus(s) else {
                continue;
            };
            self.pacer.between();
            let Some(spike) = recent().map(|r| kernel_window_spike(s, cpus, &r)) else {
                break;
            };
            self.live
                .push_feed(text::kernel_window_spike_line(p.record_from, &spike));
        }
        self.ready_spikes = ready;
        self.ready_spikes.clear();
    }
}

/// Culprits the live view is given (more than a terminal shows: it sorts them its own ways).
const LIVE_CULPRITS: usize = 50;

/// The first `limit` rows of the ranking as the live view lists it (all of them for
/// `usize::MAX`): inferred time is a row of its own, never added to a culprit's measured time.
/// `pace` is called between rows (see `Pacer`).
pub(super) fn culprit_rows(
    attr: &RunAttribution,
    record_from: Nanos,
    limit: usize,
    pace: &mut dyn FnMut(),
) -> Vec<CulpritRow> {
    // A culprit's rows never hold more than its total, and the ranking is by total: once the
    // `limit`-th row holds at least the last culprit taken's total, no culprit after it can
    // come before that row (ties keep ranking order). A few culprits answer the plain line.
    let mut n = limit.saturating_mul(2).clamp(4, LIVE_CULPRITS);
    loop {
        let top = attr.ranking.top(n);
        let last_total = top.last().map_or(0, |c| c.total_ns());
        let taken = top.len();
        let mut rows = rows_of(top, record_from, pace);
        let settled = rows
            .get(limit.saturating_sub(1))
            .is_some_and(|r| limit > 0 && r.total_ns >= last_total);
        if taken < n || n == LIVE_CULPRITS || settled {
            rows.truncate(limit);
            return rows;
        }
        n = n.saturating_mul(4).min(LIVE_CULPRITS);
    }
}

/// Deciding at the end, the live view's rows: each culprit's kernel time on the measured
/// CPUs so far (see `probe::tally`), its share of all of it.
fn kernel_rows(k: &crate::probe::tally::KernelTime, record_from: Nanos) -> Vec<CulpritRow> {
    let all = k.total_ns.max(1) as f64;
    k.culprits
        .iter()
        .map(|c| CulpritRow {
            class: c.culprit.class,
            name: culprit::name(&c.culprit.who),
            detail: culprit::detail(&c.culprit.who),
            count: c.episodes,
            total_ns: c.ns,
            max_ns: c.longest_ns,
            last_seen_ns: c.last_ns.saturating_sub(record_from),
            share: c.ns as f64 / all,
        })
        .collect()
}

/// Rows of `top` culprits, the most stolen time first.
fn rows_of(
    top: Vec<crate::attribution::ranking::RankedCulprit>,
    record_from: Nanos,
    pace: &mut dyn FnMut(),
) -> Vec<CulpritRow> {
    let mut rows: Vec<CulpritRow> = Vec::new();
    for c in top {
        pace();
        let all = c.total_ns().max(1) as f64;
        let (name, detail) = culprit::words(&c.culprit);
        let row = |name: String, ns: Nanos| CulpritRow {
            class: c.class(),
            name,
            detail: detail.clone(),
            count: c.episodes,
            total_ns: ns,
            max_ns: c.longest_ns,
            last_seen_ns: c.last_ns.saturating_sub(record_from),
            share: c.share * ns as f64 / all,
        };
        if c.measured_ns > 0 || c.inferred_ns == 0 {
            rows.push(row(name.clone(), c.measured_ns));
        }
        if c.inferred_ns > 0 {
            rows.push(row(inferred_row_name(&name), c.inferred_ns));
        }
    }
    rows.sort_by_key(|r| std::cmp::Reverse(r.total_ns));
    rows
}

fn initial_model(plan: &RunPlan, p: &Prepared) -> LiveModel {
    let cfg = &p.cfg;
    LiveModel {
        label: plan.label.clone(),
        producer_cpu: cfg.producer_cpu,
        consumer_cpus: cfg.consumer_cpus.clone(),
        kernel: crate::system::kernel_release(),
        planned_ns: cfg.duration_ns,
        probes: p.probe.is_some(),
        consumers: cfg
            .consumer_cpus
            .iter()
            .enumerate()
            .map(|(i, &cpu)| ConsumerView {
                name: consumer_key(i),
                cpu,
                ..ConsumerView::default()
            })
            .collect(),
        note: match (plan.attribute_at_end, p.every_cpu_measured) {
            (true, _) if plan.at_end_by_default => Some(
                "every CPU is measured, so culprits are decided at the end of the run (--attribution live decides them as it goes, at a cost under `self`): meanwhile, the kernel's time by culprit".to_string(),
            ),
            (true, _) => Some(
                "culprits are decided at the end of the run (--attribution end): the records wait in the kernel's rings meanwhile".to_string(),
            ),
            (false, true) => Some(
                "every CPU is measured: the display refreshes once a second and its cost shows under `self`".to_string(),
            ),
            (false, false) => None,
        },
        at_end: plan.attribute_at_end,
        ..LiveModel::default()
    }
}

/// The interval log, the base time its offsets count from, and its first error.
type IntervalLog<'a> = (&'a mut HlogWriter, Nanos, &'a mut Option<std::io::Error>);

/// What the collector does with each interval's histograms (the drain's part that is not
/// about stalls), over the recorder's parts it needs.
struct IntervalWork<'a> {
    totals: &'a mut [ConsumerTotals],
    view_totals: &'a mut [Histogram<u64>],
    live: &'a mut LiveModel,
    log: IntervalLog<'a>,
    buckets: &'a mut IntervalBuckets,
    pacer: &'a mut Pacer,
    run_totals: bool,
}

impl IntervalWork<'_> {
    /// What an interval shows live that costs nothing to read: its rate and largest transit
    /// (the histograms keep both as they record), as soon as it comes.
    fn glance(&mut self, consumer: usize, hists: &IntervalHistograms) {
        let t = &mut self.totals[consumer];
        t.last_messages = hists.transit.len();
        t.last_interval_ns = hists.end_ns.saturating_sub(hists.start_ns);
        if !hists.transit.is_empty() {
            self.live.push_max(consumer, hists.transit.max());
        }
    }

    /// The interval's transit percentiles for the live view, read without taking the
    /// interval in (deciding at the end, it is held for the end): one walk of its transit
    /// counts up to the highest percentile.
    fn percentiles(&mut self, consumer: usize, hists: &IntervalHistograms) {
        self.totals[consumer].last_transit = Some(Summary::percentiles_only(&hists.transit));
    }

    /// Everything else, which walks the histograms' counts: the run's totals, the interval
    /// log's lines and, for the interval that just came (`latest`), its percentiles for the
    /// live view.
    fn take(&mut self, consumer: usize, hists: &IntervalHistograms, latest: bool) {
        let pacer = &mut *self.pacer;
        // Each histogram's counts walked once; everything below reads its buckets.
        read_buckets(
            &hists.transit,
            &mut || {
                pacer.between();
            },
            &mut self.buckets.transit,
        );
        pacer.between();
        read_buckets(
            &hists.inter_message,
            &mut || {
                pacer.between();
            },
            &mut self.buckets.inter_message,
        );
        pacer.between();
        let (transit, inter_message) = (&self.buckets.transit, &self.buckets.inter_message);
        let t = &mut self.totals[consumer];
        add_buckets(&mut t.transit, transit, &mut || {
            pacer.between();
        });
        add_buckets(&mut t.inter_message, inter_message, &mut || {
            pacer.between();
        });
        pacer.between();
        // A held interval taken late is not the live view's latest, nor in what it counted
        // since its last reset.
        if latest {
            t.last_transit = Some(Summary::brief_of(&hists.transit, transit));
            if self.run_totals {
                add_buckets(&mut self.view_totals[consumer], transit, &mut || {
                    pacer.between();
                });
            }
        }
        let log = (&mut *self.log.0, self.log.1, &mut *self.log.2);
        write_interval(log, consumer, hists, self.buckets, pacer);
    }
}

fn write_interval(
    (hlog, base_mono, error): IntervalLog<'_>,
    consumer: usize,
    h: &IntervalHistograms,
    buckets: &IntervalBuckets,
    pacer: &mut Pacer,
) {
    if error.is_some() || h.transit.is_empty() {
        return;
    }
    let offset = h.start_ns.saturating_sub(base_mono);
    let length = h.end_ns.saturating_sub(h.start_ns);
    let key = consumer_key(consumer);
    for (kind, hist, b) in [
        ("transit", &h.transit, &buckets.transit),
        ("inter_message", &h.inter_message, &buckets.inter_message),
    ] {
        pacer.between();
        let w = hlog.write_buckets(&format!("{key}.{kind}"), hist, b, offset, length, pacer);
        if let Err(e) = w {
            *error = Some(e);
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attribution::engine::{Share, Verdict};
    use crate::model::{CulpritClass, Stall, ThreadRole};

    #[test]
    fn held_intervals_come_back_oldest_first_past_their_bound_and_in_time_order_at_the_end() {
        let boxed = |start_ns| {
            let mut h = IntervalHistograms::new();
            h.start_ns = start_ns;
            h
        };
        let mut held = HeldIntervals::new(2, 2);
        assert!(held.holding());
        assert!(held.hold(0, boxed(10)).is_none());
        assert!(held.hold(1, boxed(11)).is_none());
        assert!(held.hold(0, boxed(20)).is_none());
        // Past two for consumer 0: its oldest, to take now.
        assert_eq!(held.hold(0, boxed(30)).map(|h| h.start_ns), Some(10));
        assert!(held.hold(1, boxed(21)).is_none());
        assert_eq!(held.hold(1, boxed(31)).map(|h| h.start_ns), Some(11));
        // The rest at the end, both consumers' in the order they began.
        let mut order = Vec::new();
        while let Some((consumer, h)) = held.release() {
            order.push((consumer, h.start_ns));
        }
        assert_eq!(order, [(0, 20), (1, 21), (0, 30), (1, 31)]);
        assert!(!held.holding());
        // Deciding live, nothing is held.
        assert!(!HeldIntervals::new(1, 0).holding());
    }

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

    fn share((comm, pid): (&str, u32), measured_ns: Nanos, inferred_ns: Nanos) -> Share {
        Share {
            culprit: crate::model::Culprit {
                class: CulpritClass::Task,
                who: crate::model::Who::Task {
                    comm: comm.into(),
                    pid,
                    policy: 0,
                },
            },
            via: None,
            measured_ns,
            inferred_ns,
            host_ns: 0,
            episodes: 1,
            longest_ns: measured_ns,
            share: 0.0,
        }
    }

    /// Culprits whose totals fall in ranking order while their rows do not: the first
    /// culprits split into a measured and an inferred row each smaller than the rows of
    /// culprits ranked after them, with ties among the rows.
    fn attribution() -> RunAttribution {
        let mut attr = RunAttribution::new(0, vec![1], 10, true, true, 0);
        let parts: Vec<((&str, u32), Nanos, Nanos)> = (0..40u64)
            .map(|k| match k {
                0..=5 => (("split", k as u32), 60 - k, 60),
                _ => (("whole", k as u32), 100 - k.min(30), 0),
            })
            .collect();
        for (name, measured, inferred) in parts {
            attr.keep_verdict(Verdict {
                stall: Stall {
                    cpu: 0,
                    thread: ThreadRole::Producer,
                    start_ns: 0,
                    end_ns: measured + inferred,
                },
                culprits: vec![share(name, measured, inferred)],
                explained_share: 1.0,
                incomplete: false,
                timeline: vec![],
                hypervisor: vec![],
            });
        }
        attr
    }

    #[test]
    fn the_first_rows_are_the_head_of_all_rows() {
        let attr = attribution();
        let all = culprit_rows(&attr, 0, usize::MAX, &mut || {});
        assert_eq!(all.len(), 46, "6 split culprits give two rows each");
        assert_eq!(all[0].name, "whole[6]", "a later culprit's row comes first");
        for limit in 0..=all.len() + 2 {
            let head = culprit_rows(&attr, 0, limit, &mut || {});
            assert_eq!(head, all[..limit.min(all.len())].to_vec(), "limit {limit}");
        }
    }
}
