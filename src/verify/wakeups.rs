//! A watched thread's wake-up delays as jitterscope measured them (`jitterscope watch`)
//! against perf's over the same window: count, total and longest by each, their ratios, and
//! the total graded within a tolerance relative to perf's. A delay that straddles an end of
//! the window (woken before its start, or on a CPU only after its end) may be counted by one
//! recorder and not the other: the total passes anywhere from perf's delays inside the window
//! to those plus the straddling ones, each bound widened by the tolerance. Pure: the run
//! file's figures and perf's events in, a graded table out.

use std::fmt::Write as _;

use super::compare::Tolerances;
use super::measured::{WakeupTotals, WatchedThread};
use super::perf::{names_thread, wakeup_delays, Event, WakeupDelay};
use crate::model::Nanos;
use crate::units::fmt_ns;

impl WakeupTotals {
    /// perf's delays folded as jitterscope folds its own.
    pub fn of(delays: &[WakeupDelay]) -> WakeupTotals {
        WakeupTotals {
            count: delays.len() as u64,
            total_ns: delays.iter().map(WakeupDelay::delay_ns).sum(),
            max_ns: delays.iter().map(WakeupDelay::delay_ns).max().unwrap_or(0),
        }
    }
}

/// perf's side of one thread's wake-up delays over the window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PerfWakeups {
    /// The delays wholly inside the window.
    pub totals: WakeupTotals,
    /// The delays that straddle its start or its end (at most one at each).
    pub edges: WakeupTotals,
    /// perf's events woke the thread or switched it in or out at all.
    pub saw_thread: bool,
    /// The first and last event perf recorded, on any CPU (0 when none).
    pub first_event_ns: Nanos,
    pub last_event_ns: Nanos,
}

impl PerfWakeups {
    /// Thread `tid`'s delays that overlap `[from_ns, to_ns]`, inside it and across its ends.
    pub fn from_events(events: &[Event], tid: u32, from_ns: Nanos, to_ns: Nanos) -> PerfWakeups {
        let (inner, edges): (Vec<WakeupDelay>, Vec<WakeupDelay>) =
            wakeup_delays(events, tid, from_ns, to_ns)
                .into_iter()
                .partition(|d| d.woken_ns >= from_ns && d.on_cpu_ns <= to_ns);
        PerfWakeups {
            totals: WakeupTotals::of(&inner),
            edges: WakeupTotals::of(&edges),
            saw_thread: names_thread(events, tid),
            first_event_ns: events.iter().map(|e| e.ns).min().unwrap_or(0),
            last_event_ns: events.iter().map(|e| e.ns).max().unwrap_or(0),
        }
    }
}

/// The comparison of one watched thread.
#[derive(Debug, Clone, PartialEq)]
pub struct WakeupComparison {
    pub thread: WatchedThread,
    pub perf: PerfWakeups,
    /// How far jitterscope's total may lie from perf's, relative to perf's.
    pub tolerance: f64,
    /// How far perf's first and last events may lie inside the window.
    pub coverage_slack_ns: Nanos,
    /// How far one delay's figures by the two recorders may differ.
    pub stamp_ns: Nanos,
}

/// Joins the thread's figures and perf's.
pub fn compare_wakeups(
    thread: &WatchedThread,
    perf: &PerfWakeups,
    tol: &Tolerances,
) -> WakeupComparison {
    WakeupComparison {
        thread: thread.clone(),
        perf: perf.clone(),
        tolerance: tol.wakeup_total,
        coverage_slack_ns: tol.coverage_slack_ns,
        stamp_ns: tol.wakeup_stamp_ns,
    }
}

fn ms(ns: Nanos) -> String {
    format!("{:.3}", ns as f64 / 1e6)
}

fn us(ns: Nanos) -> String {
    format!("{:.1}", ns as f64 / 1e3)
}

fn ratio(js: u64, perf: u64) -> Option<f64> {
    (perf > 0).then(|| js as f64 / perf as f64)
}

fn ratio_text(js: u64, perf: u64) -> String {
    ratio(js, perf).map_or("–".to_string(), |q| format!("{q:.3}"))
}

impl WakeupComparison {
    fn to_ns(&self) -> Nanos {
        self.thread
            .record_from_ns
            .saturating_add(self.thread.duration_ns)
    }

    /// perf's events run over the whole recorded window, give or take the slack.
    pub fn covered(&self) -> bool {
        let p = &self.perf;
        p.first_event_ns != 0
            && p.first_event_ns <= self.thread.record_from_ns + self.coverage_slack_ns
            && p.last_event_ns + self.coverage_slack_ns >= self.to_ns()
    }

    /// The range jitterscope's total may lie in: perf's delays inside the window less the
    /// tolerance, to those and the delays across its ends plus the tolerance, each bound
    /// widened by the stamp allowance once per delay it holds.
    pub fn total_range(&self) -> (f64, f64) {
        let (inner, edges) = (&self.perf.totals, &self.perf.edges);
        let stamp = self.stamp_ns as f64;
        let outer = (inner.total_ns + edges.total_ns) as f64;
        let outer_count = (inner.count + edges.count) as f64;
        (
            inner.total_ns as f64 * (1.0 - self.tolerance) - inner.count as f64 * stamp,
            outer * (1.0 + self.tolerance) + outer_count * stamp,
        )
    }

    /// The totals agree within the tolerance (both none is agreement).
    pub fn total_within(&self) -> bool {
        let (low, high) = self.total_range();
        (low..=high).contains(&(self.thread.wakeups.total_ns as f64))
    }

    /// The range jitterscope's count may lie in: perf's delays inside the window less the
    /// tolerance, to those and the delays across its ends plus the tolerance.
    pub fn count_range(&self) -> (u64, u64) {
        let inner = self.perf.totals.count as f64;
        let outer = inner + self.perf.edges.count as f64;
        (
            (inner * (1.0 - self.tolerance)).floor() as u64,
            (outer * (1.0 + self.tolerance)).ceil() as u64,
        )
    }

    /// The counts agree within the tolerance.
    pub fn count_within(&self) -> bool {
        let (low, high) = self.count_range();
        (low..=high).contains(&self.thread.wakeups.count)
    }

    /// Why the check fails; empty when it passes.
    pub fn failures(&self) -> Vec<String> {
        let mut f = Vec::new();
        if !self.covered() {
            f.push(format!(
                "perf's events run from {} to {} ns, not over the whole recorded window {} to {} ns: start perf before jitterscope watch and stop it after",
                self.perf.first_event_ns,
                self.perf.last_event_ns,
                self.thread.record_from_ns,
                self.to_ns()
            ));
        }
        if !self.count_within() {
            let (low, high) = self.count_range();
            f.push(format!(
                "wake-up delays counted: jitterscope {}, perf {}, outside {low}–{high} (±{:.0}%{}): a recorder lost or invented delays",
                self.thread.wakeups.count,
                self.perf.totals.count,
                self.tolerance * 100.0,
                self.edges_text()
            ));
        }
        if !self.total_within() {
            let (js, perf) = (self.thread.wakeups.total_ns, self.perf.totals.total_ns);
            let (low, high) = self.total_range();
            let mut why = format!(
                "total wake-up delay: jitterscope {} ms, perf {} ms ({}), outside {}–{} ms (±{:.0}%, ±{} a delay{})",
                ms(js),
                ms(perf),
                ratio(js, perf).map_or("perf saw none".to_string(), |q| format!("{q:.2}×")),
                ms(low.max(0.0) as Nanos),
                ms(high as Nanos),
                self.tolerance * 100.0,
                fmt_ns(self.stamp_ns),
                self.edges_text()
            );
            if !self.perf.saw_thread {
                let _ = write!(
                    why,
                    "; perf's events never name thread {}: record every CPU (-a) with the tracepoints `jitterscope verify --print-perf-events` lists, in the thread's pid namespace",
                    self.thread.tid
                );
            }
            f.push(why);
        }
        f
    }

    /// The straddling delays, as the messages mention them: empty when there are none.
    fn edges_text(&self) -> String {
        let e = &self.perf.edges;
        if e.count == 0 {
            return String::new();
        }
        format!(
            "; perf's {} delay{} across the window's ends, {} ms, may be counted by either",
            e.count,
            if e.count == 1 { "" } else { "s" },
            ms(e.total_ns)
        )
    }

    pub fn passed(&self) -> bool {
        self.failures().is_empty()
    }

    /// The thread as the messages name it: `4121 (sleeper)`.
    pub fn thread_name(&self) -> String {
        format!("{} ({})", self.thread.tid, self.thread.name)
    }

    /// A header, the table (count, total, longest), a note on how perf's delays are
    /// counted, and the verdict.
    pub fn to_markdown(&self) -> String {
        let t = &self.thread;
        let (js, perf) = (&t.wakeups, &self.perf.totals);
        let mut s = String::new();
        let _ = writeln!(
            s,
            "### Thread {} `{}` (pid {}): wake-up delays, jitterscope against perf (run `{}`, {}, {} recorded from {} ns)\n",
            t.tid,
            t.name.replace('`', "'"),
            t.pid,
            t.label,
            t.schema,
            fmt_ns(t.duration_ns),
            t.record_from_ns
        );
        s.push_str("| wake-up delays | jitterscope | perf | ratio | tolerance | within |\n");
        s.push_str("|---|---:|---:|---:|---:|---|\n");
        let (low, high) = self.count_range();
        let _ = writeln!(
            s,
            "| count | {} | {} | {} | {low}–{high} | {} |",
            js.count,
            perf.count,
            ratio_text(js.count, perf.count),
            if self.count_within() { "✓" } else { "✗" }
        );
        let (low, high) = self.total_range();
        let _ = writeln!(
            s,
            "| total ms | {} | {} | {} | {}–{} | {} |",
            ms(js.total_ns),
            ms(perf.total_ns),
            ratio_text(js.total_ns, perf.total_ns),
            ms(low.max(0.0) as Nanos),
            ms(high as Nanos),
            if self.total_within() { "✓" } else { "✗" }
        );
        let _ = writeln!(
            s,
            "| max µs | {} | {} | {} | | not graded |",
            us(js.max_ns),
            us(perf.max_ns),
            ratio_text(js.max_ns, perf.max_ns)
        );
        let _ = writeln!(
            s,
            "| across the window's ends | | {} ({} ms) | | | not graded |",
            self.perf.edges.count,
            ms(self.perf.edges.total_ns)
        );
        s.push_str("\n- perf's delay: a `sched_wakeup` of the thread to the `sched_switch` that put it on a CPU (any CPU), counted when both lie in the recorded window; a wake-up while the thread was on a CPU is none\n");
        let _ = writeln!(
            s,
            "- a delay across the window's start or end may be counted by either recorder: the count and total pass from perf's less {tol:.0}% to perf's with the delays across the ends plus {tol:.0}%; the total's bounds also allow {stamp} a delay, as each recorder stamps a delay's two ends in its own handler of the same tracepoint",
            tol = self.tolerance * 100.0,
            stamp = fmt_ns(self.stamp_ns)
        );
        self.write_verdict(&mut s);
        s
    }

    fn write_verdict(&self, s: &mut String) {
        let failures = self.failures();
        if failures.is_empty() {
            let _ = writeln!(
                s,
                "\n**verdict: PASS** — the wake-up delays of thread {}, counted and summed, within ±{:.0}% (±{} a delay on the sum)",
                self.thread_name(),
                self.tolerance * 100.0,
                fmt_ns(self.stamp_ns)
            );
        } else {
            let _ = writeln!(s, "\n**verdict: FAIL** — {}", failures.join("; "));
        }
    }
}
