//! The watched threads as a stall source: each turn takes the probes' records into the
//! watched-thread book and the engine, reads the threads' schedstat and writes each thread's
//! interval histograms; the live model shows threads instead of consumers; the watch ends
//! with its duration, a signal, or its target.

use std::io::Write;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Duration;

use anyhow::Result;

use super::super::containers::ContainerTags;
use super::runfile::WatchStopped;
use super::target;
use super::{ThreadIds, WatchPlan, Watched};
use crate::attribution::run::RunAttribution;
use crate::attribution::watch::WatchBook;
use crate::live::frontend::Needs;
use crate::live::model::ConsumerView;
use crate::live::LiveModel;
use crate::model::{Nanos, ThreadChange, ThreadEvent};
use crate::platform::clock::monotonic_ns;
use crate::platform::pace::Pacer;
use crate::probe::decode::Record;
use crate::probe::{ProbeBatch, ProbeSession, ProbeSummary};
use crate::report::hlog::HlogWriter;
use crate::report::metrics::{Exposure, MetricsFile, ThreadSeries};
use crate::session::record::EndReason;
use crate::session::source::{StallSource, Words};
use crate::session::Console;
use crate::signals;
use crate::summary::Summary;
use crate::system::config::Configured;

/// How far behind "now" interruptions are decided (records reach user space within a couple
/// of drain intervals).
const DECISION_LAG_NS: Nanos = 500_000_000;
/// One .hlog interval per thread and the live view's refresh.
const INTERVAL_NS: Nanos = 1_000_000_000;

/// What a watch holds while it records: the probes, the attribution, the watched-thread
/// book and the interval log.
pub(super) struct Watching {
    pub(super) probe: Option<(ProbeSession, Receiver<ProbeBatch>)>,
    pub(super) attach: Vec<crate::probe::AttachStatus>,
    pub(super) attr: RunAttribution,
    pub(super) book: WatchBook,
    pub(super) watched: Watched,
    pub(super) record_from: Nanos,
    pub(super) start_unix: u64,
    pub(super) stem: String,
    pub(super) hlog: HlogWriter,
    pub(super) hlog_path: std::path::PathBuf,
    pub(super) hlog_error: Option<std::io::Error>,
    pub(super) cpu_first: Option<(Nanos, u64)>,
    pub(super) cpu_last: Option<(Nanos, u64)>,
    /// When recording ended (Nanos::MAX while it goes on).
    pub(super) stop_ns: Nanos,
    pub(super) metrics: Option<MetricsFile>,
    /// The configured half of isolation for the watched CPUs, read before the watch began.
    pub(super) config: Option<Configured>,
    /// The containers of the task culprits taken in.
    pub(super) containers: ContainerTags,
}

/// A watch while it records.
pub(super) struct WatchSource {
    plan: WatchPlan,
    s: Watching,
    live: LiveModel,
    /// When the interval under way ends.
    next_interval: Nanos,
    /// Intervals written so far (the live view's chart counts back from it).
    intervals: u64,
    /// Batches received while waiting for the turn.
    pending: Vec<ProbeBatch>,
    /// The watcher keeps off the watched CPUs where it can: its showing is not paced.
    pacer: Pacer,
}

impl WatchSource {
    pub(super) fn new(plan: WatchPlan, s: Watching) -> Self {
        let live = LiveModel {
            label: plan.label.clone(),
            kernel: crate::system::kernel_release(),
            planned_ns: plan.duration_ns.unwrap_or(0),
            probes: true,
            watch: true,
            target: plan.target.describe(),
            ..LiveModel::default()
        };
        let next_interval = s.record_from + INTERVAL_NS;
        WatchSource {
            plan,
            s,
            live,
            next_interval,
            intervals: 0,
            pending: Vec::new(),
            pacer: Pacer::new(false),
        }
    }
}

pub(super) const WORDS: Words = Words {
    noun: "watch",
    verb: "seen",
};

impl StallSource for WatchSource {
    type Stopped = WatchStopped;

    fn words(&self) -> Words {
        WORDS
    }

    fn tui(&self) -> bool {
        self.plan.tui
    }

    /// The live view reads its keys ten times a second; otherwise the watch sleeps until the
    /// drain hands it records or something is due (an interval's end, the metrics file, the
    /// end of its duration): an idle watch wakes once a second. A signal or the command's
    /// exit is seen at the next wake.
    fn wait_turn(&mut self) -> Option<EndReason> {
        if self.plan.tui {
            std::thread::sleep(Duration::from_millis(100));
            return None;
        }
        let until = [
            Some(self.next_interval),
            self.s.metrics.as_ref().map(MetricsFile::next_due),
            (self.plan.duration_ns).map(|d| self.s.record_from.saturating_add(d)),
        ]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(self.next_interval);
        let wait = Duration::from_nanos(until.saturating_sub(monotonic_ns()));
        let got = match &self.s.probe {
            Some((_, rx)) => rx.recv_timeout(wait),
            None => Err(RecvTimeoutError::Disconnected),
        };
        match got {
            Ok(batch) => self.pending.push(batch),
            Err(RecvTimeoutError::Timeout) => {}
            // The drain thread is gone: its end is found by the turns, paced by the clock.
            Err(RecvTimeoutError::Disconnected) => std::thread::sleep(wait),
        }
        None
    }

    /// The records and the decisions; then, once a second, the threads' intervals.
    fn turn(&mut self) {
        for mut batch in std::mem::take(&mut self.pending) {
            take(&self.plan, &mut self.s, &mut batch);
            if let Some((session, _)) = &self.s.probe {
                session.recycle(batch);
            }
        }
        turn(&self.plan, &mut self.s);
        let now = monotonic_ns();
        if now >= self.next_interval {
            let from = self.next_interval - INTERVAL_NS;
            write_intervals(&mut self.s, from, now, self.intervals);
            self.intervals += 1;
            // On the second marks from the start (the plain lines' too), a late turn skipping
            // the marks it missed.
            let behind = (now - self.next_interval) / INTERVAL_NS;
            self.next_interval += (behind + 1) * INTERVAL_NS;
        }
    }

    fn metrics(&self) -> Option<&MetricsFile> {
        self.s.metrics.as_ref()
    }

    fn rewrite_metrics(&mut self, now: Nanos) -> Result<(), String> {
        rewrite_metrics(&self.plan, &mut self.s, now)
    }

    fn end_asked(&mut self, now: Nanos) -> Option<(EndReason, String)> {
        end_asked(&self.plan, &mut self.s, now)
    }

    fn live(&mut self, now: Nanos, _needs: Needs) -> (&LiveModel, &mut Pacer) {
        update_live(&mut self.live, &self.s, now, self.intervals);
        (&self.live, &mut self.pacer)
    }

    /// The probes' last records, every open interruption decided, the metrics file
    /// rewritten a last time.
    fn stop(self, ended: EndReason, out: &mut Console) -> Result<WatchStopped> {
        let WatchSource { plan, mut s, .. } = self;
        let stop_ns = monotonic_ns();
        s.stop_ns = stop_ns;
        // Its own CPU in the window: before the probes detach and their last records come.
        s.cpu_last = Some((stop_ns, crate::system::cputime::process_cpu_ns()));
        let summary = stop_probes(&plan, &mut s, out);
        schedstat_at_stop(&plan, &mut s);
        s.book.close_all(&mut s.attr);
        let book = &mut s.book;
        s.attr.finish_with(&mut |v| book.decided(v));
        let metrics_failed = rewrite_metrics(&plan, &mut s, stop_ns).err();
        if s.watched.cgroup.is_some() {
            names_now(&plan, &mut s);
        }
        if let Some(child) = &mut s.watched.child {
            // The command is the user's: it keeps running if the watch ended first; a finished
            // one is reaped.
            let _ = child.try_wait();
        }
        Ok(WatchStopped {
            plan,
            s,
            summary,
            ended,
            stop_ns,
            metrics_failed,
        })
    }
}

/// Watching a cgroup, the names of the threads still there, as they are now: a process moved
/// in (`podman exec`) is named by the runtime at its move (`runc:[2:INIT]`) and by what it ran
/// after (its exec).
fn names_now(plan: &WatchPlan, s: &mut Watching) {
    for (&id, ids) in &s.watched.ids {
        if ids.exited {
            continue;
        }
        let name = target::comm_of(&plan.proc_root, ids.pid, ids.tid);
        if !name.is_empty() {
            s.book.thread_mut(id).name = name;
        }
    }
}

/// Stops the probes and takes their last records; the counters are missing from the report
/// when they end badly.
fn stop_probes(plan: &WatchPlan, s: &mut Watching, out: &mut Console) -> ProbeSummary {
    let Some((session, rx)) = s.probe.take() else {
        return ProbeSummary::default();
    };
    let summary = session.stop().unwrap_or_else(|e| {
        let _ = writeln!(
            out,
            "WARNING: the kernel probes did not stop cleanly ({e}); their counters are missing from the report"
        );
        ProbeSummary::default()
    });
    let batches: Vec<_> = rx.try_iter().collect();
    for mut b in batches {
        take(plan, s, &mut b);
    }
    summary
}

/// Rewrites the metrics file from the attribution and the threads' histograms.
pub(super) fn rewrite_metrics(
    plan: &WatchPlan,
    s: &mut Watching,
    now: Nanos,
) -> Result<(), String> {
    let Some(file) = &mut s.metrics else {
        return Ok(());
    };
    let empty = Default::default();
    let e = Exposure {
        now_ns: now,
        elapsed_ns: now.saturating_sub(s.record_from),
        cpus: &plan.cpus,
        theft: s.attr.theft.as_ref().unwrap_or(&empty),
        steal_ns: &s.attr.steal_seen,
        lost: &s.attr.lost_per_cpu,
        own_cpu_ns: crate::system::cputime::process_cpu_ns(),
        consumers: Vec::new(),
        threads: s
            .book
            .threads()
            .into_iter()
            .map(|t| ThreadSeries {
                tid: t.tid,
                name: &t.name,
                interruptions: &t.interruptions,
            })
            .collect(),
    };
    file.write(&e)
}

/// Why the watch ends now, if it does, and what to say; the run file keeps the why alone
/// (`SIGINT`, `the command exited (exit status: 0)`), the report says it in its head.
fn end_asked(plan: &WatchPlan, s: &mut Watching, now: Nanos) -> Option<(EndReason, String)> {
    let said = |end: fn(String) -> EndReason, why: String, then: &str| {
        let say = format!("{why}{then}");
        (end(why), say)
    };
    if let Some(sig) = signals::received() {
        let why = signals::name(sig).to_string();
        return Some(said(
            EndReason::Interrupted,
            why,
            ": stopping, writing what was seen",
        ));
    }
    if plan
        .duration_ns
        .is_some_and(|d| now >= s.record_from.saturating_add(d))
    {
        return Some((EndReason::Completed, String::new()));
    }
    if let Some(child) = &mut s.watched.child {
        if let Ok(Some(status)) = child.try_wait() {
            let why = format!("the command exited ({status})");
            return Some(said(
                EndReason::TargetExited,
                why,
                "; writing what was seen",
            ));
        }
    }
    let all_gone = !s.watched.ids.is_empty() && s.watched.exited == s.watched.ids.len();
    all_gone.then(|| {
        let why = "every watched thread exited".to_string();
        said(EndReason::TargetExited, why, "; writing what was seen")
    })
}

/// One turn: the probes' records into the book and the engine, decisions, schedstat.
fn turn(plan: &WatchPlan, s: &mut Watching) {
    if let Some((_, rx)) = &s.probe {
        let batches: Vec<ProbeBatch> = rx.try_iter().collect();
        for mut batch in batches {
            take(plan, s, &mut batch);
            // Back to the drain thread to fill again: a new batch would grow its heap.
            if let Some((session, _)) = &s.probe {
                session.recycle(batch);
            }
        }
    }
    let now = monotonic_ns();
    let watermark = watermark(now, s.probe.as_ref().map(|(p, _)| p.emptied_at()));
    s.book.close_before(&mut s.attr, watermark);
    let book = &mut s.book;
    s.attr.decide_with(watermark, &mut |v| book.decided(v));
}

/// Up to where interruptions are decided at `now`: `DECISION_LAG_NS` behind it, and no later
/// than `DECISION_LAG_NS - DRAIN_INTERVAL` before the last drain that emptied the rings
/// (`emptied_at`): an idle watch's rings are looked at less often, and what began before
/// such a drain may still come with the next.
fn watermark(now: Nanos, emptied_at: Option<Nanos>) -> Nanos {
    let behind = DECISION_LAG_NS - crate::probe::DRAIN_INTERVAL.as_nanos() as Nanos;
    let lag = now.saturating_sub(DECISION_LAG_NS);
    emptied_at.map_or(lag, |e| lag.min(e.saturating_sub(behind)))
}

/// Each thread still there, its schedstat as the watch stops (an exited thread's came with
/// its exit).
fn schedstat_at_stop(plan: &WatchPlan, s: &mut Watching) {
    for ids in s.watched.ids.values_mut().filter(|i| !i.exited) {
        if let Some(ss) = target::schedstat(&plan.proc_root, ids.pid, ids.tid) {
            ids.first.get_or_insert(ss);
            ids.last = Some(ss);
        }
    }
}

/// The records of one drain; after the watch's end (`s.stop_ns`), only what began before it
/// (detaching the probes patches kernel text, which interrupts every CPU: not the watched
/// threads' noise).
fn take(plan: &WatchPlan, s: &mut Watching, batch: &mut Vec<Record>) {
    for r in batch.drain(..) {
        let begun = match &r {
            Record::Interruption(i) => i.start_ns,
            Record::Wait(w) => w.start_ns,
            Record::Steal(st) => st.from_ns,
            Record::Cause(c) => c.at_ns,
            Record::Lost { start_ns, .. } => *start_ns,
            Record::Thread(e) => e.at_ns,
        };
        if begun >= s.stop_ns {
            continue;
        }
        match r {
            Record::Interruption(mut i) => {
                s.containers.tag(&mut i);
                s.book.interruption(&mut s.attr, i)
            }
            Record::Cause(c) => s.attr.cause(c),
            Record::Steal(st) => s.book.steal(&mut s.attr, st),
            Record::Lost {
                cpu,
                start_ns,
                end_ns,
                count,
            } => s.attr.lost(cpu, start_ns, end_ns, count),
            Record::Wait(w) => s.book.wait(&mut s.attr, &w),
            Record::Thread(e) => thread_event(plan, s, &e),
        }
    }
}

/// A thread created, exited or exec'd: the book's accounts, then the ids and schedstat the
/// session keeps of each (by account: a kernel tid can be two threads' in one watch).
fn thread_event(plan: &WatchPlan, s: &mut Watching, e: &ThreadEvent) {
    // The process of a thread of any process (a cgroup's), from the record itself.
    let pid = match e.ns_pid {
        0 => s.watched.follow.map_or(0, |f| f.1),
        pid => pid,
    };
    let applied = s.book.thread_event(e, pid);
    // An account that gave up its id to another thread is an exited thread's (an exec
    // beside the main thread: the kernel ended that one first).
    if let Some(retired) = applied.retired {
        s.watched.exit(retired, None);
    }
    let Some(id) = applied.thread else {
        return;
    };
    match e.change {
        ThreadChange::Created { .. } => {
            let ss = target::schedstat(&plan.proc_root, pid, e.ns_tid);
            s.watched.ids.entry(id).or_insert(ThreadIds {
                pid,
                tid: e.ns_tid,
                first: ss,
                last: ss,
                exited: false,
            });
        }
        ThreadChange::Exited { sched } => s.watched.exit(id, Some(sched)),
        // The same thread under its new id: its schedstat goes on from the one read before.
        ThreadChange::Exec { .. } => {
            let ids = s.watched.ids.entry(id).or_insert(ThreadIds {
                pid,
                ..ThreadIds::default()
            });
            ids.tid = e.ns_tid;
        }
    }
}

/// An interval histogram that grew past this range is made anew rather than reset (a
/// histogram of `watch::new_histogram` holds up to it in 14 KiB, the whole hour in 36 KiB).
const REGROWN_FROM_NS: Nanos = 1_000_000;

/// Interval `n`'s histograms of each thread interrupted in it (`WatchBook::touched`) into the
/// .hlog, then reset: an interval's work is that of the threads it touched, not of every
/// thread watched.
fn write_intervals(s: &mut Watching, from: Nanos, now: Nanos, n: u64) {
    let base = s.record_from;
    let mut touched = std::mem::take(&mut s.book.touched);
    // The .hlog's tags of one interval in the threads' order.
    touched.sort_unstable();
    for &id in &touched {
        let t = s.book.thread_mut(id);
        t.interval_touched = false;
        while t
            .interval_max
            .front()
            .is_some_and(|&(i, _)| i + crate::live::model::HISTORY as u64 <= n)
        {
            t.interval_max.pop_front();
        }
        if !t.interval_interruptions.is_empty() {
            t.interval_max
                .push_back((n, t.interval_interruptions.max()));
        }
        for (kind, h) in [
            ("interruptions", &mut t.interval_interruptions),
            ("wakeups", &mut t.interval_wakeups),
        ] {
            if !h.is_empty() && s.hlog_error.is_none() {
                let tag = format!("{}[{}].{kind}", t.name.replace([' ', ','], "_"), t.ns_tid);
                if let Err(e) = s.hlog.write(
                    &tag,
                    h,
                    from.saturating_sub(base),
                    now - from,
                    &mut Pacer::new(false),
                ) {
                    s.hlog_error = Some(e);
                }
            }
            // One grown to a long duration starts small again: the next interval may not
            // need its range, and thousands of threads each kept one grown (a herd of
            // threads made runnable at once) would hold tens of KiB each for nothing.
            if h.high() > REGROWN_FROM_NS {
                *h = crate::attribution::watch::new_histogram();
            } else {
                h.reset();
            }
        }
    }
    touched.clear();
    // The same allocation for the next interval.
    s.book.touched = touched;
    let _ = s.hlog.flush();
}

/// A thread's chart: the longest interruption of each of the last `HISTORY` intervals (0
/// where it had none), the oldest first, up to interval `done` (not included).
fn max_history(
    kept: &std::collections::VecDeque<(u64, Nanos)>,
    done: u64,
) -> std::collections::VecDeque<Nanos> {
    let first = done.saturating_sub(crate::live::model::HISTORY as u64);
    let mut at = kept.iter().peekable();
    (first..done)
        .map(|i| {
            while at.next_if(|&&(k, _)| k < i).is_some() {}
            at.next_if(|&&(k, _)| k == i).map_or(0, |&(_, max)| max)
        })
        .collect()
}

/// The live model: threads instead of consumers.
fn update_live(live: &mut LiveModel, s: &Watching, now: Nanos, intervals: u64) {
    live.elapsed_ns = now.saturating_sub(s.record_from);
    live.stalls = s.attr.book.count();
    live.lost = s.attr.lost_records;
    live.consumers = s
        .book
        .threads()
        .into_iter()
        .map(|t| ConsumerView {
            name: format!("{}[{}]", t.name, t.ns_tid),
            cpu: t.cpus.last().copied().unwrap_or(0),
            interval: None,
            total: (!t.interruptions.is_empty()).then(|| Summary::brief(&t.interruptions)),
            max_history: max_history(&t.interval_max, intervals),
        })
        .collect();
    live.culprits =
        crate::session::rows::culprit_rows(&s.attr, s.record_from, usize::MAX, &mut || {});
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::live::model::HISTORY;

    #[test]
    fn a_threads_chart_has_a_zero_for_each_interval_without_an_interruption() {
        let kept: std::collections::VecDeque<_> = [(2, 40), (5, 70)].into_iter().collect();
        assert_eq!(max_history(&kept, 7), [0, 0, 40, 0, 0, 70, 0]);
        // Only the last HISTORY intervals are shown; the older ones kept are passed over.
        let done = HISTORY as u64 + 4;
        let chart = max_history(&kept, done);
        assert_eq!(chart.len(), HISTORY);
        assert_eq!(chart[1], 70, "interval 5 is the second shown");
        assert!(chart.iter().enumerate().all(|(i, &m)| i == 1 || m == 0));
        assert!(max_history(&Default::default(), 0).is_empty());
    }

    #[test]
    fn decisions_wait_for_the_drain_that_brings_their_records() {
        let second = 1_000_000_000;
        let lag = DECISION_LAG_NS;
        let behind = lag - crate::probe::DRAIN_INTERVAL.as_nanos() as Nanos;
        // Rings emptied just now: half a second behind, as before.
        assert_eq!(watermark(10 * second, Some(10 * second)), 10 * second - lag);
        // An idle watch's rings last emptied a second ago: behind that drain instead.
        assert_eq!(
            watermark(10 * second, Some(9 * second)),
            9 * second - behind
        );
        assert_eq!(watermark(10 * second, None), 10 * second - lag);
        assert_eq!(watermark(100, Some(50)), 0);
    }
}
