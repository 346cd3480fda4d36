//! What the live view shows, as plain data.

use std::collections::VecDeque;

use crate::model::{Cpu, CulpritClass, Nanos};
use crate::summary::Summary;
use crate::units::fmt_ns;

/// How many interval maxima the latency chart keeps (one per second).
pub const HISTORY: usize = 300;
/// How many feed lines are kept.
pub const FEED: usize = 200;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SortKey {
    #[default]
    Total,
    Count,
    Max,
    LastSeen,
}

impl SortKey {
    pub fn next(self) -> SortKey {
        match self {
            SortKey::Total => SortKey::Count,
            SortKey::Count => SortKey::Max,
            SortKey::Max => SortKey::LastSeen,
            SortKey::LastSeen => SortKey::Total,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            SortKey::Total => "total",
            SortKey::Count => "count",
            SortKey::Max => "max",
            SortKey::LastSeen => "last seen",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct CulpritRow {
    pub class: CulpritClass,
    /// Its time was inferred by the entry/exit rule next to kernel records, not measured
    /// inside them (shown in a column of its own, never cut).
    pub inferred: bool,
    pub name: String,
    pub detail: String,
    pub count: u64,
    pub total_ns: Nanos,
    pub max_ns: Nanos,
    /// Run time (since recording started) of its latest stall.
    pub last_seen_ns: Nanos,
    pub share: f64,
}

impl CulpritRow {
    /// The `how` column, as the reports say it: how its time is known (`ClassInfo::how`),
    /// or `inferred` for a culprit's entry/exit row.
    pub fn how(&self) -> &'static str {
        if self.inferred {
            "inferred"
        } else {
            self.class.info().how
        }
    }

    /// ` (inferred)` after an inferred row's time in a one-line summary, nothing for a
    /// measured one (the usual case, which a line printed every second need not repeat).
    pub fn inferred_mark(&self) -> &'static str {
        if self.inferred {
            " (inferred)"
        } else {
            ""
        }
    }
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct ConsumerView {
    pub name: String,
    pub cpu: Cpu,
    /// The latest finished interval.
    pub interval: Option<Summary>,
    /// Since the start (or since the last reset with `r`).
    pub total: Option<Summary>,
    /// Maximum transit per interval, oldest first.
    pub max_history: VecDeque<Nanos>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct LiveModel {
    pub label: String,
    pub producer_cpu: Cpu,
    pub consumer_cpus: Vec<Cpu>,
    pub kernel: String,
    pub elapsed_ns: Nanos,
    pub planned_ns: Nanos,
    pub messages_per_s: f64,
    pub stalls: u64,
    /// Stalls taken in but not attributed yet, and how far behind the attribution is, when it
    /// is further behind than it ever is in step (under a storm the decisions wait for the
    /// collector's budget): the stall count and the culprits are then older than the
    /// histograms.
    pub awaiting: Option<(u64, Nanos)>,
    /// Culprits are decided at the end of the run (`--attribution end`): `awaiting` is then
    /// what waits for it, shown whenever there is any.
    pub at_end: bool,
    /// Kernel records lost + workload queue overflows so far.
    pub lost: u64,
    /// Deciding at the end: the kernel's time on the measured CPUs so far, all culprits
    /// together — `culprits` are then that time by culprit, not yet matched to stalls.
    pub kernel_total_ns: Option<Nanos>,
    /// Deciding at the end: task runs left out of that time because the kernel never
    /// reported their closing switch (their span holds the workload's own run).
    pub kernel_unseen: u64,
    /// BPF cost, when probes run and statistics are on: (ns per event, share of one CPU).
    pub bpf_cost: Option<(f64, f64)>,
    pub probes: bool,
    pub consumers: Vec<ConsumerView>,
    pub culprits: Vec<CulpritRow>,
    pub feed: VecDeque<String>,
    pub sort: SortKey,
    pub paused: bool,
    pub help: bool,
    /// A line the header always shows (e.g. every CPU measured, slow refresh).
    pub note: Option<String>,
    /// Watch mode: `consumers` are the watched threads, their `total` the interruptions.
    pub watch: bool,
    /// Watch mode: what is watched as the user gave it (`--pid 4121`, `-- ./engine`); empty
    /// in a run.
    pub target: String,
}

impl LiveModel {
    pub fn push_feed(&mut self, line: String) {
        if self.feed.len() == FEED {
            self.feed.pop_front();
        }
        self.feed.push_back(line);
    }

    pub fn push_max(&mut self, consumer: usize, max: Nanos) {
        if let Some(c) = self.consumers.get_mut(consumer) {
            if c.max_history.len() == HISTORY {
                c.max_history.pop_front();
            }
            c.max_history.push_back(max);
        }
    }

    /// Watch mode's line: time, each thread's interruptions so far, the top culprit.
    fn plain_watch_line(&self) -> String {
        let mut line = format!("[{:6.1}s]", self.elapsed_ns as f64 / 1e9);
        for c in self.consumers.iter().take(6) {
            if let Some(s) = &c.total {
                line.push_str(&format!(
                    " | {}: {} interruptions p99 {} max {}",
                    c.name,
                    s.count,
                    fmt_ns(s.percentile("99").unwrap_or(0)),
                    fmt_ns(s.max)
                ));
            }
        }
        if self.consumers.len() > 6 {
            line.push_str(&format!(" | +{} threads", self.consumers.len() - 6));
        }
        line.push_str(&format!(" | interruptions {}", self.stalls));
        if self.lost > 0 {
            line.push_str(&format!(" | LOST {}", self.lost));
        }
        if let Some(top) = self.sorted_culprits().first() {
            line.push_str(&format!(
                " | top culprit: {} {} {}{}",
                top.class,
                top.name,
                fmt_ns(top.total_ns),
                top.inferred_mark()
            ));
        }
        line
    }

    /// ` (+N awaiting attribution, 2.400s behind)`, or nothing while the attribution keeps up;
    /// ` (+N to attribute at the end)` when that is the plan.
    pub fn awaiting_text(&self) -> String {
        match self.awaiting {
            Some((n, _)) if self.at_end => format!(" (+{n} to attribute at the end)"),
            Some((n, behind)) => {
                format!(" (+{n} awaiting attribution, {} behind)", fmt_ns(behind))
            }
            None => String::new(),
        }
    }

    /// Culprits in the chosen order.
    pub fn sorted_culprits(&self) -> Vec<&CulpritRow> {
        let mut v: Vec<&CulpritRow> = self.culprits.iter().collect();
        match self.sort {
            SortKey::Total => v.sort_by_key(|c| std::cmp::Reverse(c.total_ns)),
            SortKey::Count => v.sort_by_key(|c| std::cmp::Reverse(c.count)),
            SortKey::Max => v.sort_by_key(|c| std::cmp::Reverse(c.max_ns)),
            SortKey::LastSeen => v.sort_by_key(|c| std::cmp::Reverse(c.last_seen_ns)),
        }
        v
    }

    /// The plain-text line printed once per second when there is no terminal UI.
    pub fn plain_line(&self) -> String {
        if self.watch {
            return self.plain_watch_line();
        }
        let mut line = format!(
            "[{:6.1}s/{:.0}s] {:.1}k msg/s",
            self.elapsed_ns as f64 / 1e9,
            self.planned_ns as f64 / 1e9,
            self.messages_per_s / 1e3
        );
        for c in &self.consumers {
            if let Some(s) = &c.interval {
                line.push_str(&format!(
                    " | {}: transit p50 {} p99 {} p99.99 {} max {}",
                    c.name,
                    fmt_ns(s.percentile("50").unwrap_or(0)),
                    fmt_ns(s.percentile("99").unwrap_or(0)),
                    fmt_ns(s.percentile("99.99").unwrap_or(0)),
                    fmt_ns(s.max)
                ));
            }
        }
        line.push_str(&format!(" | stalls {}", self.stalls));
        line.push_str(&self.awaiting_text());
        if self.lost > 0 {
            line.push_str(&format!(" | LOST {}", self.lost));
        }
        if let Some(top) = self.sorted_culprits().first() {
            line.push_str(&format!(
                " | {}: {} {}{}{} {}{}",
                match self.kernel_total_ns {
                    Some(_) => "top kernel time",
                    None => "top culprit",
                },
                top.class,
                top.name,
                if top.detail.is_empty() { "" } else { " " },
                top.detail,
                fmt_ns(top.total_ns),
                top.inferred_mark()
            ));
        }
        line
    }
}
