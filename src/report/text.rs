//! The terminal report (colour when a terminal) and its Markdown twin: histogram blocks,
//! stall summary, top culprits, the worst stalls with their causes, lost-data warnings and
//! the advice. Both render a `RunFile`, so a saved run renders exactly as a live one did.

use std::fmt::Write as _;

use super::runfile::{CulpritEntry, Mode, RunFile, StallCulprit, StallEntry};
use super::seed;
use super::stalls::render_summary;
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
struct Paint(bool);

impl Paint {
    fn code(self, code: &str, s: &str) -> String {
        if self.0 {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    }
    fn bold(self, s: &str) -> String {
        self.code("1", s)
    }
    fn warn(self, s: &str) -> String {
        self.code("1;31", s)
    }
    /// `text` (the class, padded) in the class's colour from the one table of classes.
    fn class(self, class: CulpritClass, text: &str) -> String {
        self.code(class.info().ansi, text)
    }
}

fn pct(x: f64) -> String {
    format!("{:.0}%", x * 100.0)
}

/// The ranking row name of a culprit's inferred time (its own row, never added to the
/// measured one).
pub fn inferred_row_name(name: &str) -> String {
    format!("{name} — entry/exit, inferred")
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
    format!(
        "+{at:.6}s  CPU {}  {} stalled {}: {}",
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
        line.push_str(" [partly: older kernel records were let go for room]");
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

fn culprit_name(c: &CulpritEntry) -> String {
    if c.class == CulpritClass::Unexplained {
        format!("unexplained ({})", c.name)
    } else if c.class == CulpritClass::Lost {
        format!("unknown ({})", c.name)
    } else if c.detail.is_empty() {
        c.name.clone()
    } else {
        format!("{} {}", c.name, c.detail)
    }
}

/// The terminal report.
/// Watch mode: one block per watched thread — its share of wanted CPU time taken, its
/// interruptions and wake-up delays, its top culprits.
fn threads_block(run: &RunFile, p: &Paint) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{}",
        p.bold(&format!(
            "== Watched threads ({}) ==",
            run.watch.as_ref().map_or("", |w| w.target.as_str())
        ))
    );
    for t in &run.threads {
        let share = match (t.share, t.wanted_ns) {
            (Some(sh), Some(w)) => format!(
                "{} of the {} it wanted a CPU taken ({})",
                fmt_ns(t.taken_ns),
                fmt_ns(w),
                pct(sh)
            ),
            _ => format!("{} taken", fmt_ns(t.taken_ns)),
        };
        let exited = if t.exited_ns.is_some() {
            ", exited"
        } else {
            ""
        };
        let _ = writeln!(
            s,
            "{}[{}] (process {}, CPUs {}{exited}): {share}",
            t.name,
            t.tid,
            t.pid,
            crate::units::format_list(&t.cpus)
        );
        for (label, d) in [
            ("interruptions", &t.interruptions),
            ("wake-up delays", &t.wakeups),
        ] {
            if d.count == 0 {
                continue;
            }
            let pcts = d.summary.as_ref().map_or(String::new(), |su| {
                format!(
                    " p50 {} p99 {} p99.9 {}",
                    fmt_ns(su.percentile("50").unwrap_or(0)),
                    fmt_ns(su.percentile("99").unwrap_or(0)),
                    fmt_ns(su.percentile("99.9").unwrap_or(0))
                )
            });
            let _ = writeln!(
                s,
                "  {label:<15} {:>7} total {:>9}{pcts} max {}",
                d.count,
                fmt_ns(d.total_ns),
                fmt_ns(d.max_ns)
            );
        }
        let kinds: Vec<String> = t
            .kinds
            .iter()
            .filter(|k| k.count > 0)
            .map(|k| {
                format!(
                    "{} {} ({})",
                    k.kind.replace('_', " "),
                    fmt_ns(k.total_ns),
                    k.count
                )
            })
            .collect();
        if !kinds.is_empty() {
            let _ = writeln!(s, "  by kind: {}", kinds.join(", "));
        }
        for c in t.culprits.iter().take(5) {
            let what = if c.detail.is_empty() {
                c.name.clone()
            } else {
                format!("{} {}", c.name, c.detail)
            };
            let _ = writeln!(
                s,
                "  {:<11} {:<48} {:>9} {:>6}",
                c.class.as_str(),
                truncate(&what, 48),
                fmt_ns(c.total_ns()),
                pct(c.share)
            );
        }
    }
    s.push('\n');
    s
}

pub fn render(run: &RunFile, colour: bool) -> String {
    let p = Paint(colour);
    let mut s = histogram_blocks(run);
    if let Some(line) = floor_line(run) {
        let _ = writeln!(s, "{line}\n");
    }
    if run.mode == Mode::Watch {
        s.push_str(&threads_block(run, &p));
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
    let _ = writeln!(
        s,
        "{}",
        p.bold("== Top culprits (share of all stall time) ==")
    );
    if let Some(line) = explained_line(run) {
        let _ = writeln!(s, "{line}");
    }
    if run.culprits.is_empty() {
        s.push_str("no stalls, nothing to attribute\n");
    } else {
        let _ = writeln!(
            s,
            "{:<12} {:<40} {:>8} {:>10} {:>10} {:>6}",
            "class", "culprit", "episodes", "time", "longest", "share"
        );
        for r in culprit_rows(run).iter().take(15) {
            let class = format!("{:<12}", r.entry.class);
            let _ = writeln!(
                s,
                "{} {:<40} {:>8} {:>10} {:>10} {:>6}",
                p.class(r.entry.class, &class),
                truncate(&r.name(), 40),
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
        // A watch runs until it is stopped or its target ends: nothing is partial.
        (Mode::Watch, ended) => {
            let _ = writeln!(
                s,
                "note: the watch ended ({ended}{why}) after {}",
                fmt_ns(run.run.duration_ns)
            );
        }
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

/// The run-wide figure: how much stall time has a named kernel cause, measured or inferred,
/// how much the host took, and what stays unexplained.
pub fn explained_line(run: &RunFile) -> Option<String> {
    let total = run.stall_summary.total_ns;
    if total == 0 || !run.run.settings.probes {
        return None;
    }
    // Saturating: a run file's figures are not trusted to add up without overflow.
    let sum = |pick: &dyn Fn(&CulpritEntry) -> u64| -> u64 {
        run.culprits
            .iter()
            .fold(0u64, |s, c| s.saturating_add(pick(c)))
    };
    let of_class = |class: CulpritClass| sum(&|c| if c.class == class { c.total_ns() } else { 0 });
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
    let measured = named.saturating_sub(inferred);
    let incomplete = run.probes.as_ref().map_or(0, |p| p.incomplete_stalls);
    let steal_clock = run.probes.as_ref().is_some_and(|p| p.steal_clock);
    let pct = |ns: u64| 100.0 * ns as f64 / total as f64;
    let mut line = format!(
        "{:.1}% of all stall time ({} of {}) has a named kernel cause: {:.1}% measured inside kernel records, {:.1}% inferred (entry/exit next to them)",
        pct(named),
        fmt_ns(named),
        fmt_ns(total),
        pct(measured),
        pct(inferred),
    );
    if steal_clock {
        // Steal inside other causes' runs (given to `hypervisor`, taken from their time).
        let inside = sum(&|c| c.host_ns);
        let where_ = if inside > 0 {
            format!(
                ": {:.1} points of it inside other causes' runs",
                pct(inside)
            )
        } else {
            String::new()
        };
        let _ = write!(
            line,
            "; {:.1}% host preemption (KVM steal{where_}); {:.1}% is unexplained (no kernel event and no steal)",
            pct(host),
            pct(unexplained)
        );
    } else {
        let _ = write!(
            line,
            "; {:.1}% is unexplained (no kernel event; no steal clock to tell host preemption apart)",
            pct(unexplained)
        );
    }
    if incomplete > 0 {
        let _ = write!(
            line,
            "; {:.1}% is unknown: {incomplete} stalls are incomplete (kernel records lost)",
            pct(lost)
        );
    }
    Some(line)
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
    w
}

fn truncate(s: &str, n: usize) -> String {
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

fn md_escape(s: &str) -> String {
    s.replace('|', "\\|")
}

/// The Markdown report: the same content as the terminal report, as tables.
pub fn render_markdown(run: &RunFile) -> String {
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
    if r.settings.probes {
        s.push_str("\n## Top culprits\n\n");
        if let Some(line) = explained_line(run) {
            let _ = writeln!(s, "{line}.\n");
        }
        s.push_str("| class | culprit | episodes | time | longest | share |\n|---|---|---:|---:|---:|---:|\n");
        for r in culprit_rows(run) {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} |",
                r.entry.class,
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
        s.push_str("\n## Worst stalls\n\n");
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
}
