//! The terminal report (colour when a terminal) and its Markdown twin: histogram blocks,
//! stall summary, top culprits, the worst stalls with their causes, lost-data warnings and
//! the advice. Both render a `RunFile`, so a saved run renders exactly as a live one did.

use std::fmt::Write as _;

use super::runfile::{CulpritEntry, Mode, RunFile, StallCulprit, StallEntry};
use super::seed;
use super::stalls::render_summary;
use super::watch;
use crate::model::{CulpritClass, Ended};
use crate::units::fmt_ns;

/// How many of the worst stalls the reports show (the run file may keep more).
pub const WORST_SHOWN: usize = 10;

/// The seed's consumer names, capitalised for its report titles.
pub fn consumer_title(index: usize) -> String {
    match index {
        0 => "Accumulator".into(),
        1 => "Journaller".into(),
        n => format!("Consumer-{}", n + 1),
    }
}

#[derive(Clone, Copy)]
pub(crate) struct Paint(pub(crate) bool);

impl Paint {
    fn code(self, code: &str, s: &str) -> String {
        if self.0 {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    }
    pub(crate) fn bold(self, s: &str) -> String {
        self.code("1", s)
    }
    pub(crate) fn warn(self, s: &str) -> String {
        self.code("1;31", s)
    }
    /// `text` (the class, padded) in the class's colour from the one table of classes.
    fn class(self, class: CulpritClass, text: &str) -> String {
        self.code(class.info().ansi, text)
    }
}

pub(super) fn pct(x: f64) -> String {
    format!("{:.0}%", x * 100.0)
}

/// The ranking row name of a culprit's inferred time (its own row, never added to the
/// measured one; its `how` column says `inferred`).
pub fn inferred_row_name(name: &str) -> String {
    format!("{name} — entry/exit")
}

/// What the `how` column of a culprit row says: how its time is known (`ClassInfo::how`), or
/// `inferred` for a culprit's entry/exit row. Never cut, so two rows whose names are cut
/// alike are still told apart.
pub fn how(class: CulpritClass, inferred: bool) -> &'static str {
    if inferred {
        "inferred"
    } else {
        class.info().how
    }
}

/// One culprit of a stall or spike in words: its measured part, and its inferred part
/// apart. `kworker/3:1 vmstat_update 171.0µs (94%)`, `local timer entry/exit 2.1µs (inferred)`.
fn culprit_phrases(c: &StallCulprit) -> Vec<String> {
    let what = if c.detail.is_empty() {
        c.name.clone()
    } else {
        format!("{} {}", c.name, c.detail)
    };
    let part = |ns: u64| c.share * ns as f64 / c.ns().max(1) as f64;
    match c.class {
        CulpritClass::Unexplained => return vec![format!("unexplained {}", fmt_ns(c.ns()))],
        CulpritClass::Lost => {
            return vec![format!("unknown (kernel records lost) {}", fmt_ns(c.ns()))]
        }
        CulpritClass::Hypervisor => {
            return vec![format!("host preemption {} (steal)", fmt_ns(c.ns()))]
        }
        CulpritClass::FreqChange if c.ns() == 0 => {
            return vec![format!("{what} (frequency change)")]
        }
        CulpritClass::FreqChange
        | CulpritClass::Kworker
        | CulpritClass::Kthread
        | CulpritClass::Task
        | CulpritClass::Irq
        | CulpritClass::Softirq
        | CulpritClass::TimerTick
        | CulpritClass::Ipi
        | CulpritClass::Nmi
        | CulpritClass::Fault
        | CulpritClass::Throttled
        | CulpritClass::SelfNoise => {}
    }
    let mut out = Vec::new();
    if c.measured_ns > 0 || c.inferred_ns == 0 {
        let mut p = format!(
            "{what} {} ({}",
            fmt_ns(c.measured_ns),
            pct(part(c.measured_ns))
        );
        if !c.via.is_empty() {
            p.push_str("; ");
            p.push_str(&c.via);
        }
        if c.host_ns > 0 {
            // Given to `hypervisor`, shown where it lay.
            let _ = write!(
                p,
                "; and {} of host preemption inside it",
                fmt_ns(c.host_ns)
            );
        }
        p.push(')');
        out.push(p);
    }
    if c.inferred_ns > 0 {
        out.push(format!(
            "{} entry/exit {} (inferred, {})",
            c.name,
            fmt_ns(c.inferred_ns),
            pct(part(c.inferred_ns))
        ));
    }
    out
}

fn causes_of(list: &[StallCulprit]) -> String {
    list.iter()
        .flat_map(culprit_phrases)
        .collect::<Vec<_>>()
        .join(", ")
}

/// `kworker/3:1 vmstat_update 171.0µs (94%), local timer 3.1µs (2%), unexplained 8.3µs`
pub fn causes_line(s: &StallEntry) -> String {
    if s.explained_share.is_none() {
        return "not attributed (no probes)".into();
    }
    let mut line = causes_of(&s.culprits);
    if s.incomplete {
        line.push_str(" [incomplete: kernel records were lost]");
    }
    line
}

/// `+12.345678s  CPU 3  accumulator stalled 182.4µs: …`
pub fn stall_line(run: &RunFile, s: &StallEntry) -> String {
    let at = s.start_ns.saturating_sub(run.run.record_from_ns) as f64 / 1e9;
    // A watch's entry names its kind (`oslat[4122] (preempted)`): no stall of a loop.
    let verb = match run.mode {
        Mode::Run => " stalled",
        Mode::Watch => "",
    };
    format!(
        "+{at:.6}s  CPU {}  {}{verb} {}: {}",
        s.cpu,
        s.thread,
        fmt_ns(s.duration_ns),
        causes_line(s)
    )
}

/// `+12.345678s  accumulator message 191.0µs in transit: producer CPU 1 held it 20.0µs: …;
/// consumer CPU 3 stalled 160.4µs: …`
pub fn spike_line(record_from_ns: u64, sp: &super::runfile::SpikeEntry) -> String {
    let at = sp.publish_ns.saturating_sub(record_from_ns) as f64 / 1e9;
    let mut sides = Vec::new();
    let side = |what: String, list: &[StallCulprit]| {
        if list.is_empty() {
            what
        } else {
            format!("{what}: {}", causes_of(list))
        }
    };
    if sp.producer_stalled_ns > 0 {
        sides.push(side(
            format!(
                "producer CPU {} held it {}",
                sp.producer_cpu,
                fmt_ns(sp.producer_stalled_ns)
            ),
            &sp.producer_culprits,
        ));
    }
    if sp.consumer_stalled_ns > 0 {
        sides.push(side(
            format!(
                "consumer CPU {} stalled {}",
                sp.consumer_cpu,
                fmt_ns(sp.consumer_stalled_ns)
            ),
            &sp.consumer_culprits,
        ));
    }
    if sides.is_empty() {
        sides.push("no stall on either CPU (queueing behind earlier messages)".into());
    }
    format!(
        "+{at:.6}s  {} message {} in transit: {}",
        sp.consumer,
        fmt_ns(sp.transit_ns),
        sides.join("; ")
    )
}

/// Deciding at the end, a spike by the kernel time in its window (`build::kernel_window_spike`;
/// the live view's feed says so in its title): `+4.598087s  accumulator message 4.05ms in
/// transit: kernel on consumer CPU 1 4.03ms: kdamond.0 4.01ms (99%), …`. The consumer's wait
/// that no record covers yet is said when it is a tenth of the window or more.
pub fn kernel_window_spike_line(
    record_from_ns: u64,
    sp: &super::build::KernelWindowSpike,
) -> String {
    let e = &sp.entry;
    let mut sides = Vec::new();
    if e.producer_stalled_ns > 0 {
        sides.push(format!(
            "producer CPU {} held it {}: {}",
            e.producer_cpu,
            fmt_ns(e.producer_stalled_ns),
            causes_of(&e.producer_culprits)
        ));
    }
    let uncovered = (sp.uncovered_ns >= 1_000 && sp.uncovered_ns * 10 >= e.transit_ns)
        .then(|| format!("no kernel record (yet) {}", fmt_ns(sp.uncovered_ns)));
    if e.consumer_stalled_ns > 0 || uncovered.is_some() {
        let causes = causes_of(&e.consumer_culprits);
        let all: Vec<&str> = [causes.as_str(), uncovered.as_deref().unwrap_or_default()]
            .into_iter()
            .filter(|c| !c.is_empty())
            .collect();
        sides.push(format!(
            "kernel on consumer CPU {} {}: {}",
            e.consumer_cpu,
            fmt_ns(e.consumer_stalled_ns),
            all.join(", ")
        ));
    }
    if sides.is_empty() {
        sides.push("no kernel time on either CPU in its window".into());
    }
    let mut line = format!(
        "+{:.6}s  {} message {} in transit: {}",
        e.publish_ns.saturating_sub(record_from_ns) as f64 / 1e9,
        e.consumer,
        fmt_ns(e.transit_ns),
        sides.join("; ")
    );
    if sp.partial {
        line.push_str(" [partly: older kernel records were let go (for room or age)]");
    }
    line
}

/// One row of the culprit tables: a culprit's measured time, or its inferred time on a row of
/// its own.
struct CulpritRow<'a> {
    entry: &'a CulpritEntry,
    inferred: bool,
    ns: u64,
    share: f64,
}

impl CulpritRow<'_> {
    fn name(&self) -> String {
        if self.inferred {
            inferred_row_name(&culprit_name(self.entry))
        } else {
            culprit_name(self.entry)
        }
    }

    /// Episodes and the longest theft belong to the measured row (`-` on an inferred one).
    fn episodes(&self) -> String {
        if self.inferred {
            "-".into()
        } else {
            self.entry.episodes.to_string()
        }
    }

    fn longest(&self) -> String {
        if self.inferred {
            "-".into()
        } else {
            fmt_ns(self.entry.longest_ns)
        }
    }
}

/// The run-wide culprits as rows, largest first: inferred time never joins measured time.
fn culprit_rows(run: &RunFile) -> Vec<CulpritRow<'_>> {
    let mut rows = Vec::new();
    for c in &run.culprits {
        let all = c.total_ns().max(1) as f64;
        let share = |ns: u64| c.share * ns as f64 / all;
        if c.measured_ns > 0 || c.inferred_ns == 0 {
            rows.push(CulpritRow {
                entry: c,
                inferred: false,
                ns: c.measured_ns,
                share: share(c.measured_ns),
            });
        }
        if c.inferred_ns > 0 {
            rows.push(CulpritRow {
                entry: c,
                inferred: true,
                ns: c.inferred_ns,
                share: share(c.inferred_ns),
            });
        }
    }
    rows.sort_by_key(|r| std::cmp::Reverse(r.ns));
    rows
}

/// A culprit's name, with the count of processes of a row that groups them.
pub(super) fn grouped_name(c: &CulpritEntry) -> String {
    match &c.processes {
        Some(p) => super::culprit::grouped_name(&c.name, p.count, p.more),
        None => c.name.clone(),
    }
}

fn culprit_name(c: &CulpritEntry) -> String {
    let name = grouped_name(c);
    if c.class == CulpritClass::Unexplained {
        format!("unexplained ({name})")
    } else if c.class == CulpritClass::Lost {
        format!("unknown ({name})")
    } else if c.detail.is_empty() {
        name
    } else {
        format!("{name} {}", c.detail)
    }
}

/// The terminal report.
pub fn render(run: &RunFile, colour: bool) -> String {
    let p = Paint(colour);
    let mut s = histogram_blocks(run);
    if let Some(line) = floor_line(run) {
        let _ = writeln!(s, "{line}\n");
    }
    if run.mode == Mode::Watch {
        s.push_str(&watch::head_text(run, &p));
        s.push_str(&watch::threads_text(run, &p));
        s.push_str(&watch::blind_text(run, &p));
        s.push_str(&render_summary(
            "Interruptions of the watched threads (per CPU)",
            &run.stall_summary,
            run.run.duration_ns,
        ));
    } else {
        s.push_str(&render_summary(
            &format!(
                "Stalls (loop gaps over {})",
                fmt_ns(run.run.settings.stall_threshold_ns)
            ),
            &run.stall_summary,
            run.run.duration_ns,
        ));
    }
    if run.run.settings.probes {
        s.push_str(&attribution_blocks(run, &p));
    } else if run.stall_summary.count > 0 {
        s.push_str("(stalls are not attributed: this run had no kernel probes)\n");
    }
    s.push_str(&closing_lines(run, &p));
    s
}

/// The seed's histogram blocks, two per consumer.
fn histogram_blocks(run: &RunFile) -> String {
    let mut s = String::new();
    for (i, h) in run.histograms.iter().enumerate() {
        let title = consumer_title(i);
        s.push_str(&seed::block(
            &format!("{title} Message Transit Latency"),
            &h.transit,
        ));
        s.push('\n');
        s.push_str(&seed::block(
            &format!("{title} Inter-Message Latency"),
            &h.inter_message,
        ));
        s.push('\n');
    }
    s
}

/// The ranking, the worst stalls and spikes, and what to do.
fn attribution_blocks(run: &RunFile, p: &Paint) -> String {
    let mut s = String::from("\n");
    let title = match run.mode {
        Mode::Run => "== Top culprits (share of all stall time) ==",
        Mode::Watch => "== Top culprits (share of the interruption time seen) ==",
    };
    let _ = writeln!(s, "{}", p.bold(title));
    if let Some(line) = explained_line(run) {
        let _ = writeln!(s, "{line}");
    }
    if run.culprits.is_empty() {
        s.push_str("no stalls, nothing to attribute\n");
    } else {
        let _ = writeln!(
            s,
            "{:<12} {:<8} {:<38} {:>8} {:>10} {:>10} {:>6}",
            "class", "how", "culprit", "episodes", "time", "longest", "share"
        );
        for r in culprit_rows(run).iter().take(15) {
            let class = format!("{:<12}", r.entry.class);
            let _ = writeln!(
                s,
                "{} {:<8} {:<38} {:>8} {:>10} {:>10} {:>6}",
                p.class(r.entry.class, &class),
                how(r.entry.class, r.inferred),
                truncate(&r.name(), 38),
                r.episodes(),
                fmt_ns(r.ns),
                r.longest(),
                pct(r.share)
            );
        }
    }
    if !run.stalls.is_empty() {
        let title = if run.mode == Mode::Watch {
            "== Worst interruptions =="
        } else {
            "== Worst stalls =="
        };
        let _ = writeln!(s, "\n{}", p.bold(title));
        for st in run.stalls.iter().take(WORST_SHOWN) {
            let _ = writeln!(s, "{}", stall_line(run, st));
        }
    }
    if !run.spikes.is_empty() {
        let _ = writeln!(
            s,
            "\n{}",
            p.bold(&format!(
                "== Worst transit spikes ({} over {}) ==",
                run.spike_count,
                fmt_ns(run.run.settings.spike_threshold_ns)
            ))
        );
        for sp in run.spikes.iter().take(WORST_SHOWN) {
            let _ = writeln!(s, "{}", spike_line(run.run.record_from_ns, sp));
        }
    }
    let advice = advice_list(run);
    if !advice.is_empty() {
        let _ = writeln!(s, "\n{}", p.bold("== What to do =="));
        for (who, a) in advice {
            let _ = writeln!(s, "{}: {a}", p.bold(&who));
        }
    }
    s
}

/// Costs, warnings, and how the run (or watch) ended when that was early.
fn closing_lines(run: &RunFile, p: &Paint) -> String {
    let mut s = String::new();
    if let Some(pr) = &run.probes {
        let _ = writeln!(s, "{}", probe_cost_line(pr, run.run.duration_ns));
    }
    if let Some(o) = &run.overhead {
        let _ = writeln!(s, "{}", overhead_line(run, o));
    }
    for w in warnings(run) {
        let _ = writeln!(s, "{}", p.warn(&format!("WARNING: {w}")));
    }
    let why = if run.run.end_reason.is_empty() {
        String::new()
    } else {
        format!(": {}", run.run.end_reason)
    };
    match (run.mode, run.run.ended) {
        (_, Ended::Completed) => {}
        // A watch runs until it is stopped or its target ends: nothing is partial, and its
        // head says how it ended.
        (Mode::Watch, _) => {}
        (Mode::Run, ended) => {
            let _ = writeln!(
                s,
                "note: the run ended early ({ended}{why}) after {} of its planned {}; these figures are partial",
                fmt_ns(run.run.duration_ns),
                fmt_ns(run.run.settings.planned_duration_ns)
            );
        }
    }
    s
}

/// `cross-core floor CPU 1 → 3 (right before recording): p50 58ns, min 52ns, p99 71ns`
pub fn floor_line(run: &RunFile) -> Option<String> {
    let f = run.run.floor?;
    Some(format!(
        "cross-core floor CPU {} → {} (right before recording): p50 {}, min {}, p99 {}",
        f.from_cpu,
        f.to_cpu,
        fmt_ns(f.p50_ns),
        fmt_ns(f.min_ns),
        fmt_ns(f.p99_ns)
    ))
}

/// The run-wide shares of stall (or, in a watch, interruption) time, saturating: a run
/// file's figures are not trusted to add up without overflow.
struct Shares {
    total: u64,
    named: u64,
    measured: u64,
    inferred: u64,
    host: u64,
    /// Steal inside other causes' runs (given to `hypervisor`, taken from their time).
    host_inside: u64,
    unexplained: u64,
    lost: u64,
}

impl Shares {
    fn of(run: &RunFile) -> Shares {
        let sum = |pick: &dyn Fn(&CulpritEntry) -> u64| -> u64 {
            run.culprits
                .iter()
                .fold(0u64, |s, c| s.saturating_add(pick(c)))
        };
        let of_class =
            |class: CulpritClass| sum(&|c| if c.class == class { c.total_ns() } else { 0 });
        let total = run.stall_summary.total_ns;
        let (unexplained, lost, host) = (
            of_class(CulpritClass::Unexplained),
            of_class(CulpritClass::Lost),
            of_class(CulpritClass::Hypervisor),
        );
        let inferred = sum(&|c| c.inferred_ns);
        let named = total
            .saturating_sub(unexplained)
            .saturating_sub(lost)
            .saturating_sub(host);
        Shares {
            total,
            named,
            measured: named.saturating_sub(inferred),
            inferred,
            host,
            host_inside: sum(&|c| c.host_ns),
            unexplained,
            lost,
        }
    }

    fn pct(&self, ns: u64) -> f64 {
        100.0 * ns as f64 / self.total.max(1) as f64
    }

    /// `96.2% measured inside kernel records, 0.3% inferred (entry/exit next to them)`
    fn named_parts(&self) -> String {
        format!(
            "{:.1}% measured inside kernel records, {:.1}% inferred (entry/exit next to them)",
            self.pct(self.measured),
            self.pct(self.inferred),
        )
    }

    /// `; 1.2% host preemption (KVM steal: 0.4 points of it inside other causes' runs)`
    fn host_part(&self) -> String {
        let where_ = if self.host_inside > 0 {
            format!(
                ": {:.1} points of it inside other causes' runs",
                self.pct(self.host_inside)
            )
        } else {
            String::new()
        };
        format!(
            "; {:.1}% host preemption (KVM steal{where_})",
            self.pct(self.host)
        )
    }
}

/// The run-wide figure: how much stall time has a named kernel cause, measured or inferred,
/// how much the host took, and what stays unexplained. In a watch, the same shares of the
/// interruptions it saw, never of every gap (`watch_explained_line`).
pub fn explained_line(run: &RunFile) -> Option<String> {
    if run.stall_summary.total_ns == 0 || !run.run.settings.probes {
        return None;
    }
    if run.mode == Mode::Watch {
        return Some(watch_explained_line(run));
    }
    let sh = Shares::of(run);
    let incomplete = run.probes.as_ref().map_or(0, |p| p.incomplete_stalls);
    let steal_clock = run.probes.as_ref().is_some_and(|p| p.steal_clock);
    let mut line = format!(
        "{:.1}% of all stall time ({} of {}) has a named kernel cause: {}",
        sh.pct(sh.named),
        fmt_ns(sh.named),
        fmt_ns(sh.total),
        sh.named_parts(),
    );
    if steal_clock {
        let _ = write!(
            line,
            "{}; {:.1}% is unexplained (no kernel event and no steal)",
            sh.host_part(),
            sh.pct(sh.unexplained)
        );
    } else {
        let _ = write!(
            line,
            "; {:.1}% is unexplained (no kernel event; no steal clock to tell host preemption apart)",
            sh.pct(sh.unexplained)
        );
    }
    incomplete_part(&mut line, &sh, incomplete, "stalls");
    Some(line)
}

/// The Markdown rows of a per-CPU stall (or interruption) table: CPU, count, total, longest.
pub(super) fn per_cpu_rows(s: &mut String, ss: &super::runfile::StallSummary) {
    for c in &ss.per_cpu {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} |",
            c.cpu,
            c.count,
            fmt_ns(c.total_ns),
            fmt_ns(c.longest_ns)
        );
    }
}

/// `; P% is unknown: N <what> are incomplete (kernel records lost)` when records were lost.
fn incomplete_part(line: &mut String, sh: &Shares, incomplete: u64, what: &str) {
    if incomplete > 0 {
        let _ = write!(
            line,
            "; {:.1}% is unknown: {incomplete} {what} are incomplete (kernel records lost)",
            sh.pct(sh.lost)
        );
    }
}

/// A watch's figure: shares of the interruptions the probes saw — a kernel event or the
/// steal clock marks each of them, so gaps nothing marks are in neither side of it.
fn watch_explained_line(run: &RunFile) -> String {
    let sh = Shares::of(run);
    let incomplete = run.probes.as_ref().map_or(0, |p| p.incomplete_stalls);
    let steal_clock = run.probes.as_ref().is_some_and(|p| p.steal_clock);
    let mut line = format!(
        "Of the interruptions the probes saw ({}, {} in all), {:.1}% of the time has a named kernel cause: {}",
        run.stall_summary.count,
        fmt_ns(sh.total),
        sh.pct(sh.named),
        sh.named_parts(),
    );
    if steal_clock {
        line.push_str(&sh.host_part());
    }
    if sh.unexplained > 0 {
        let _ = write!(
            line,
            "; {:.1}% has no cause named inside it",
            sh.pct(sh.unexplained)
        );
    }
    incomplete_part(&mut line, &sh, incomplete, "interruptions");
    line.push_str(
        "; gaps no kernel event marks are not among them (see what this watch cannot see)",
    );
    line
}

/// Culprits named beside one piece of advice; the rest are counted.
const ADVICE_NAMES: usize = 3;

/// Each distinct piece of advice once, for the culprits that matter (at least 1% of stall
/// time), beside the culprits it applies to (`a, b, c and 4 more`), in ranking order.
fn advice_list(run: &RunFile) -> Vec<(String, String)> {
    let mut groups: Vec<(Vec<String>, &str)> = Vec::new();
    for c in &run.culprits {
        if c.advice.is_empty() || c.share < 0.01 {
            continue;
        }
        if let Some((names, _)) = groups.iter_mut().find(|(_, a)| *a == c.advice) {
            names.push(culprit_name(c));
        } else if groups.len() < 8 {
            groups.push((vec![culprit_name(c)], &c.advice));
        }
    }
    groups
        .into_iter()
        .map(|(names, a)| {
            let mut who = names[..names.len().min(ADVICE_NAMES)].join(", ");
            if names.len() > ADVICE_NAMES {
                let _ = write!(who, " and {} more", names.len() - ADVICE_NAMES);
            }
            (who, a.to_string())
        })
        .collect()
}

/// `probes: 41230 records, 2.31ms of BPF run time (0.023% of one CPU); sched_switch 175ns/event …`
pub fn probe_cost_line(p: &super::runfile::ProbeInfo, duration_ns: u64) -> String {
    let events = p
        .events
        .iter()
        .fold(0u64, |sum, e| sum.saturating_add(e.count));
    let bpf_ns = p
        .costs
        .iter()
        .fold(0u64, |sum, c| sum.saturating_add(c.run_time_ns));
    let mut busiest: Vec<_> = p.costs.iter().filter(|c| c.run_count > 0).collect();
    busiest.sort_by_key(|c| std::cmp::Reverse(c.run_time_ns));
    let per: Vec<String> = busiest
        .iter()
        .take(3)
        .map(|c| {
            format!(
                "{} {:.0}ns/event",
                c.program,
                c.run_time_ns as f64 / c.run_count as f64
            )
        })
        .collect();
    let mut line = if p.stats_enabled {
        format!(
            "\nprobes: {events} records, {} of BPF run time ({:.3}% of one CPU)",
            fmt_ns(bpf_ns),
            if duration_ns > 0 {
                100.0 * bpf_ns as f64 / duration_ns as f64
            } else {
                0.0
            }
        )
    } else {
        format!("\nprobes: {events} records; BPF run time unknown (the kernel's run-time statistics need CAP_SYS_ADMIN)")
    };
    if !per.is_empty() {
        line.push_str(&format!("; {}", per.join(", ")));
    }
    if !p.unavailable.is_empty() {
        line.push_str(&format!(
            "; not on this kernel: {}",
            p.unavailable.join(", ")
        ));
    }
    line.push('\n');
    line.push_str(&steal_line(p));
    if !p.symbols {
        line.push_str("\nnote: work functions are shown as addresses: /proc/kallsyms hides them without CAP_SYSLOG (add that capability, or run as root, to name them)");
    }
    line
}

/// `steal clock: CPU 1 +41.0µs, CPU 3 +0ns over the run` — or why there is none.
fn steal_line(p: &super::runfile::ProbeInfo) -> String {
    if !p.steal_clock {
        let why = if p.steal_note.is_empty() {
            "not read"
        } else {
            p.steal_note.as_str()
        };
        return format!("steal clock: none ({why}); host preemption cannot be told apart from other unexplained time");
    }
    let per: Vec<String> = p
        .steal
        .iter()
        .map(|c| format!("CPU {} +{}", c.cpu, fmt_ns(c.steal_ns)))
        .collect();
    if per.is_empty() {
        "steal clock: read, no growth on the measured CPUs over the run".to_string()
    } else {
        format!(
            "steal clock: {} over the run (the host kept these vCPUs off their CPUs that long)",
            per.join(", ")
        )
    }
}

/// `jitterscope itself: 41.0ms CPU (0.137% of one CPU) in its own threads beside the
/// workload, 1.75ms in BPF programs (0.006%)`
pub fn overhead_line(run: &RunFile, o: &super::runfile::Overhead) -> String {
    let pct = |ns: u64| {
        if o.window_ns > 0 {
            100.0 * ns as f64 / o.window_ns as f64
        } else {
            0.0
        }
    };
    let bpf = match &run.probes {
        None => "no BPF programs".to_string(),
        Some(p) if !p.stats_enabled => "BPF program time unknown (no statistics)".to_string(),
        Some(_) => format!(
            "{} in BPF programs ({:.3}%)",
            fmt_ns(o.bpf_run_ns),
            pct(o.bpf_run_ns)
        ),
    };
    let slices: Vec<String> = o
        .longest_self
        .iter()
        .map(|l| format!("CPU {} {}", l.cpu, fmt_ns(l.ns)))
        .collect();
    let slices = if slices.is_empty() {
        String::new()
    } else {
        format!(
            "; its longest slice on a measured CPU: {}",
            slices.join(", ")
        )
    };
    let budget = match o.collector_budget {
        Some(share) if o.held_back > 0 => format!(
            "; it held back {} times to keep within its budget of {:.1}% of one CPU (records waited in the record rings)",
            o.held_back,
            100.0 * share
        ),
        Some(share) => format!("; within its budget of {:.1}% of one CPU", 100.0 * share),
        None => String::new(),
    };
    let after = if o.at_end && o.decided_in_run > 0 {
        format!(
            "; {} after the workload stopped, deciding the culprits (--attribution end); {} of the {} stalls were decided while it ran, as a record ring or a stall queue needed room (a larger --ringbuf-size holds more of a run)",
            fmt_ns(o.after_cpu_ns),
            o.decided_in_run,
            run.stall_summary.count
        )
    } else if o.at_end {
        format!(
            "; {} after the workload stopped, deciding the culprits (--attribution end)",
            fmt_ns(o.after_cpu_ns)
        )
    } else if o.after_cpu_ns > 0 {
        format!(
            "; {} after the workload stopped, deciding what was left and detaching the probes",
            fmt_ns(o.after_cpu_ns)
        )
    } else {
        String::new()
    };
    let files = if o.files_cpu_ns > 0 {
        format!(
            ", then {} writing the .hgrm, .svg and .trace.json files",
            fmt_ns(o.files_cpu_ns)
        )
    } else {
        String::new()
    };
    format!(
        "jitterscope itself: {} CPU ({:.3}% of one CPU) in its own threads beside the workload, {bpf}{slices}{budget}{after}{files}",
        fmt_ns(o.tracer_cpu_ns),
        pct(o.tracer_cpu_ns),
    )
}

/// Lost-data warnings, shared by every format.
pub fn warnings(run: &RunFile) -> Vec<String> {
    let l = &run.lost;
    let mut w = Vec::new();
    if l.ring_buffer_drops > 0 {
        let per_cpu: Vec<String> = run
            .probes
            .iter()
            .flat_map(|p| &p.drops)
            .filter(|d| d.count > 0)
            .map(|d| format!("CPU {}: {}", d.cpu, d.count))
            .collect();
        let incomplete = run.probes.as_ref().map_or(0, |p| p.incomplete_stalls);
        w.push(format!(
            "{} kernel records were lost because their BPF record ring was full{}; {incomplete} stalls in those windows are marked incomplete (their unknown time is class `lost`) — raise --ringbuf-size",
            l.ring_buffer_drops,
            if per_cpu.is_empty() {
                String::new()
            } else {
                format!(" ({})", per_cpu.join(", "))
            }
        ));
    }
    if l.workload_queue_drops > 0 {
        w.push(format!(
            "{} stalls did not fit the workload's stall queues and are missing from the counts above",
            l.workload_queue_drops
        ));
    }
    if l.sequence_errors > 0 {
        w.push(format!(
            "{} messages arrived out of sequence — a bug in jitterscope's ring, please report it",
            l.sequence_errors
        ));
    }
    if l.threads_not_watched > 0 {
        w.push(format!(
            "{} threads of the watched target were not watched: the probes' thread map was full (it is sized at the start to twice the target's threads, {} at least) — watch again once the target has its threads, or watch fewer of them (--tid, --comm)",
            l.threads_not_watched,
            crate::probe::abi::WATCH_MAX
        ));
    }
    w
}

pub(super) fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(n - 1).collect();
        t.push('…');
        t
    }
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

pub(super) fn md_escape(s: &str) -> String {
    s.replace('|', "\\|")
}

/// The Markdown head of a run: title, settings, latency table, stalls per CPU.
fn run_markdown_head(run: &RunFile) -> String {
    let mut s = String::new();
    let r = &run.run;
    let _ = writeln!(s, "# jitterscope run `{}`\n", md_escape(&r.label));
    let _ = writeln!(
        s,
        "Producer on CPU {}, consumers on CPUs {:?}, {} recorded ({}), interval {}, stall threshold {}, kernel {}, host {}.\n",
        r.producer_cpu,
        r.consumer_cpus,
        fmt_ns(r.duration_ns),
        r.ended,
        fmt_ns(r.settings.interval_ns),
        fmt_ns(r.settings.stall_threshold_ns),
        md_escape(&r.kernel),
        md_escape(&r.host)
    );
    if let Some(line) = floor_line(run) {
        let _ = writeln!(s, "{}.\n", capitalise(&line));
    }
    s.push_str("## Latency (ns)\n\n| consumer | measure | count | min | mean |");
    for (_, label, _) in seed::PERCENTILES {
        let _ = write!(s, " {label} |");
    }
    s.push_str(" max |\n|---|---|---:|---:|---:|");
    for _ in seed::PERCENTILES {
        s.push_str("---:|");
    }
    s.push_str("---:|\n");
    for h in &run.histograms {
        for (what, m) in [("transit", &h.transit), ("inter-message", &h.inter_message)] {
            let _ = write!(
                s,
                "| {} (CPU {}) | {what} | {} | {} | {:.0} |",
                h.consumer, h.cpu, m.count, m.min, m.mean
            );
            for (key, _, _) in seed::PERCENTILES {
                let _ = write!(s, " {} |", m.percentile(key).unwrap_or(0));
            }
            let _ = writeln!(s, " {} |", m.max);
        }
    }
    let ss = &run.stall_summary;
    let _ = writeln!(
        s,
        "\n## Stalls\n\n{} stalls over {}, {} in all, the longest {}.\n\n| CPU | count | total | longest |\n|---:|---:|---:|---:|",
        ss.count,
        fmt_ns(r.settings.stall_threshold_ns),
        fmt_ns(ss.total_ns),
        fmt_ns(ss.longest_ns)
    );
    per_cpu_rows(&mut s, ss);
    s
}

/// The Markdown report: the same content as the terminal report, as tables.
pub fn render_markdown(run: &RunFile) -> String {
    let mut s = match run.mode {
        Mode::Run => run_markdown_head(run),
        Mode::Watch => watch::markdown_head(run),
    };
    if run.run.settings.probes {
        s.push_str("\n## Top culprits\n\n");
        if let Some(line) = explained_line(run) {
            let _ = writeln!(s, "{line}.\n");
        }
        s.push_str("| class | how | culprit | episodes | time | longest | share |\n|---|---|---|---:|---:|---:|---:|\n");
        for r in culprit_rows(run) {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {} |",
                r.entry.class,
                how(r.entry.class, r.inferred),
                md_escape(&r.name()),
                r.episodes(),
                fmt_ns(r.ns),
                r.longest(),
                pct(r.share),
            );
        }
        let advice = advice_list(run);
        if !advice.is_empty() {
            s.push_str("\n## What to do\n\n");
            for (who, a) in advice {
                let _ = writeln!(s, "- **{}**: {}", md_escape(&who), md_escape(&a));
            }
        }
        s.push_str(match run.mode {
            Mode::Run => "\n## Worst stalls\n\n",
            Mode::Watch => "\n## Worst interruptions\n\n",
        });
        for st in run.stalls.iter().take(WORST_SHOWN) {
            let _ = writeln!(s, "- `{}`", stall_line(run, st).replace('`', "'"));
        }
        if !run.spikes.is_empty() {
            let _ = writeln!(
                s,
                "\n## Worst transit spikes\n\n{} messages over {}.\n",
                run.spike_count,
                fmt_ns(run.run.settings.spike_threshold_ns)
            );
            for sp in run.spikes.iter().take(WORST_SHOWN) {
                let _ = writeln!(
                    s,
                    "- `{}`",
                    spike_line(run.run.record_from_ns, sp).replace('`', "'")
                );
            }
        }
    } else {
        s.push_str("\nStalls are not attributed: this run had no kernel probes.\n");
    }
    if let Some(o) = &run.overhead {
        let _ = writeln!(s, "\n{}", overhead_line(run, o));
    }
    let w = warnings(run);
    if !w.is_empty() {
        s.push_str("\n## Lost data\n\n");
        for x in w {
            let _ = writeln!(s, "- **WARNING**: {x}");
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::runfile::{CpuCount, ProbeInfo, ProgramCostEntry};

    fn culprit(class: CulpritClass, total_ns: u64) -> CulpritEntry {
        crate::report::runfile::tests::culprit(class, "x", total_ns)
    }

    #[test]
    fn host_preemption_inside_a_run_is_said_where_it_lay() {
        let mut run = crate::report::runfile::tests::sample();
        let stall = &mut run.stalls[0];
        stall.culprits[0].host_ns = 700_000;
        let line = causes_line(stall);
        assert!(
            line.contains(
                "kworker/3:1 vmstat_update 3ns (75%; and 700.0µs of host preemption inside it)"
            ),
            "{line}"
        );
        stall.culprits[0].host_ns = 0;
        assert!(!causes_line(stall).contains("host preemption"));
    }

    #[test]
    fn the_explained_line_says_how_much_steal_lay_inside_runs() {
        let mut run = crate::report::runfile::tests::sample();
        run.stall_summary.total_ns = 1_000;
        run.probes
            .get_or_insert_with(ProbeInfo::default)
            .steal_clock = true;
        let mut kworker = culprit(CulpritClass::Kworker, 600);
        kworker.host_ns = 100;
        run.culprits = vec![kworker, culprit(CulpritClass::Hypervisor, 300)];
        let line = explained_line(&run).unwrap();
        assert!(
            line.contains(
                "30.0% host preemption (KVM steal: 10.0 points of it inside other causes' runs)"
            ),
            "{line}"
        );
        run.culprits[0].host_ns = 0;
        let line = explained_line(&run).unwrap();
        assert!(
            line.contains("30.0% host preemption (KVM steal); "),
            "{line}"
        );
    }

    #[test]
    fn explained_line_saturates_instead_of_wrapping() {
        // Two halves of u64::MAX + 1 wrap to 0: all stall time would read as explained.
        let mut run = crate::report::runfile::tests::sample();
        run.stall_summary.total_ns = u64::MAX;
        let half = u64::MAX / 2 + 1;
        run.culprits = vec![
            culprit(CulpritClass::Unexplained, half),
            culprit(CulpritClass::Unexplained, half),
        ];
        let line = explained_line(&run).unwrap();
        assert!(line.starts_with("0.0% of all stall time"), "{line}");
        assert!(line.contains("100.0% is unexplained"), "{line}");
    }

    #[test]
    fn probe_cost_line_saturates_instead_of_wrapping() {
        let p = ProbeInfo {
            events: vec![
                CpuCount {
                    cpu: 1,
                    count: u64::MAX,
                },
                CpuCount { cpu: 3, count: 1 },
            ],
            costs: vec![
                ProgramCostEntry {
                    program: "a".into(),
                    run_count: 1,
                    run_time_ns: u64::MAX,
                },
                ProgramCostEntry {
                    program: "b".into(),
                    run_count: 1,
                    run_time_ns: 1,
                },
            ],
            ..ProbeInfo::default()
        };
        let line = probe_cost_line(&p, 1);
        assert!(
            line.contains(&format!(
                "probes: {} records, {} of BPF",
                u64::MAX,
                fmt_ns(u64::MAX)
            )),
            "{line}"
        );
    }

    /// A watch's ranking: a shell loop's 30 `taskset` processes of about 1 ms (one of
    /// 1.01 ms), one long-lived `bash`, and the local timer's measured and inferred time.
    pub(crate) fn shell_loop_run() -> RunFile {
        use crate::attribution::engine::{Share, Verdict};
        use crate::attribution::Ranking;
        use crate::model::{Culprit, Stall, ThreadRole, Who};
        use crate::report::advice::{Machine, Tracer};
        let task = |comm: &str, pid: u32| Culprit {
            class: CulpritClass::Task,
            who: Who::Task {
                comm: comm.into(),
                pid,
                policy: 0,
                container: None,
            },
        };
        let verdict = |culprit: Culprit, measured_ns: u64, inferred_ns: u64| Verdict {
            stall: Stall {
                cpu: 1,
                thread: ThreadRole::Watched(7),
                start_ns: 0,
                end_ns: measured_ns + inferred_ns,
            },
            culprits: vec![Share {
                culprit,
                via: None,
                measured_ns,
                inferred_ns,
                host_ns: 0,
                episodes: 1,
                longest_ns: measured_ns,
                share: 1.0,
            }],
            explained_share: 1.0,
            incomplete: false,
            timeline: vec![],
            hypervisor: vec![],
        };
        let mut ranking = Ranking::default();
        for pid in 0..30u32 {
            let ns = if pid == 7 { 1_010_000 } else { 1_000_000 };
            ranking.add(&verdict(task("taskset", 5000 + pid), ns, 0));
        }
        ranking.add(&verdict(task("bash", 4121), 40_000_000, 0));
        let timer = Culprit {
            class: CulpritClass::TimerTick,
            who: Who::LocalTimer { callbacks: true },
        };
        ranking.add(&verdict(timer, 50_000_000, 45_000_000));
        let machine = Machine {
            online: vec![0, 1],
            measured: vec![1],
            virtual_machine: true,
            tracer: Tracer::Watch,
        };
        let mut run = crate::report::runfile::tests::sample();
        run.culprits = ranking
            .ranked()
            .into_iter()
            .map(|c| crate::report::build::culprit_entry(c, &machine))
            .collect();
        run
    }

    /// The culprit table's rows of `class` in a report.
    fn rows_of<'a>(report: &'a str, class: &str) -> Vec<&'a str> {
        report
            .lines()
            .filter(|l| l.trim_start_matches("| ").starts_with(class))
            .collect()
    }

    #[test]
    fn a_shell_loops_processes_are_one_row_and_one_process_stays_itself() {
        let run = shell_loop_run();
        let text = render(&run, false);
        let tasks = rows_of(&text, "task ");
        assert_eq!(tasks.len(), 2, "{text}");
        let words = |l: &str| l.split_whitespace().map(String::from).collect::<Vec<_>>();
        assert_eq!(
            words(tasks[0]),
            [
                "task",
                "measured",
                "bash[4121]",
                "SCHED_OTHER",
                "1",
                "40.00ms",
                "40.00ms",
                "24%"
            ]
        );
        assert_eq!(
            words(tasks[1]),
            [
                "task",
                "measured",
                "taskset",
                "—",
                "30",
                "tasks",
                "SCHED_OTHER",
                "30",
                "30.01ms",
                "1.01ms",
                "18%"
            ]
        );
        let md = render_markdown(&run);
        let tasks = rows_of(&md, "task |");
        assert_eq!(tasks.len(), 2, "{md}");
        assert!(
            tasks[1].starts_with(
                "| task | measured | taskset — 30 tasks SCHED_OTHER | 30 | 30.01ms | 1.01ms | 18% |"
            ),
            "{md}"
        );
        // The run file keeps the processes, bounded, and says how many it left out.
        let p = run.culprits[2].processes.as_ref().expect("grouped");
        assert_eq!((p.count, p.listed.len(), p.not_listed), (30, 20, 10));
        assert_eq!(p.listed[0].pid, 5007);
    }

    #[test]
    fn an_inferred_row_says_so_in_a_column_no_cut_removes() {
        let run = shell_loop_run();
        let text = render(&run, false);
        let timer = rows_of(&text, "timer_tick");
        assert_eq!(timer.len(), 2, "{text}");
        // Both names are cut alike; the column before them tells them apart.
        for (row, how) in timer.iter().zip(["measured", "inferred"]) {
            assert_eq!(row.split_whitespace().nth(1), Some(how), "{row}");
            assert!(
                row.contains("local timer timer interrupt outside c…"),
                "{row}"
            );
        }
        let md = render_markdown(&run);
        let timer = rows_of(&md, "timer_tick |");
        assert!(timer[0].starts_with("| timer_tick | measured | "), "{md}");
        assert!(timer[1].starts_with("| timer_tick | inferred | "), "{md}");
    }

    #[test]
    fn each_piece_of_advice_is_given_once_beside_its_culprits() {
        // A watch with a shell loop: 60 short-lived tasks with the same advice.
        let mut run = crate::report::runfile::tests::sample();
        let shield = "shield the CPUs: isolcpus=1; or pin the task away: taskset -pc 0 <pid>";
        run.culprits = (0..60)
            .map(|i| CulpritEntry {
                advice: shield.into(),
                share: 0.015,
                ..crate::report::runfile::tests::culprit(
                    CulpritClass::Task,
                    &format!("bash[{}]", 100 + i),
                    1_000,
                )
            })
            .collect();
        for out in [render_markdown(&run), render(&run, false)] {
            assert_eq!(out.matches(shield).count(), 1, "{out}");
            assert!(
                out.contains("bash[100], bash[101], bash[102] and 57 more"),
                "{out}"
            );
        }
    }

    #[test]
    fn threads_a_watch_had_no_room_for_are_a_warning_in_both_formats() {
        let mut run = crate::report::runfile::tests::sample();
        assert!(!render(&run, false).contains("were not watched"));
        run.lost.threads_not_watched = 617;
        let said =
            "617 threads of the watched target were not watched: the probes' thread map was full";
        for out in [render_markdown(&run), render(&run, false)] {
            assert_eq!(out.matches(said).count(), 1, "{out}");
        }
    }
}
