//! `jitterscope probe`: what else runs on the measured CPUs, without the workload — a
//! time-ordered log of every interruption and a per-class summary, the census the seed did
//! with `perf record -e sched:sched_stat_runtime -C 1` and `sort | uniq -c`. `run` is the
//! command: the probes started, every batch logged as it arrives, the summary at the end.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Duration;

use anyhow::Context;

use super::decode::Record;
use super::{
    AttachState, AttachStatus, ProbeBatch, ProbeConfig, ProbeSession, ProbeSummary, Reference,
};
use crate::model::{
    softirq_name, vector_name, Cause, CauseKind, Cpu, CulpritClass, Nanos, SentFrom, ThreadChange,
    TickStops, Who,
};
use crate::platform::affinity::set_current_thread_cpus;
use crate::platform::clock::monotonic_ns;
use crate::units::{fmt_ns, format_list};

/// What `jitterscope probe` watches, for how long, and how it reports.
#[derive(Debug, Clone)]
pub struct CensusConfig {
    pub cpus: Vec<Cpu>,
    pub duration_ns: Nanos,
    /// Each measured CPU's record ring, in bytes: a power of two (`super::ringbuf_size`).
    pub ringbuf_bytes: u32,
    /// Where the drain thread (and the calling thread) run: the CPUs not watched, or none
    /// when every CPU is watched.
    pub drain_cpus: Vec<Cpu>,
    /// Print every record as it arrives (never with `json`).
    pub log: bool,
    /// The summary as JSON, for scripts, instead of the table.
    pub json: bool,
    /// Also load the reference programs, and where they run (`ProbeConfig::floor`).
    pub floor: Reference,
    /// A culprit's name and detail in words (`report::culprit::words`, given by the command).
    pub words: Words,
}

/// A culprit's name and detail as the census prints them.
pub type Words = fn(&Who) -> (String, String);

/// Follows a census as it goes (the metrics file): the records kept, in batches, and the
/// time after each look at the probes.
pub trait CensusObserver {
    fn batch(&mut self, records: &[Record]);
    /// `now_ns` after a look at the probes; `start_ns` is when the census started.
    fn tick(&mut self, start_ns: Nanos, now_ns: Nanos);
    /// The census is over: every record has been shown.
    fn end(&mut self, start_ns: Nanos, now_ns: Nanos) -> anyhow::Result<()>;
}

/// Observes nothing.
pub struct NoObserver;

impl CensusObserver for NoObserver {
    fn batch(&mut self, _: &[Record]) {}
    fn tick(&mut self, _: Nanos, _: Nanos) {}
    fn end(&mut self, _: Nanos, _: Nanos) -> anyhow::Result<()> {
        Ok(())
    }
}

/// `jitterscope probe`: watches the CPUs until the time is up or a signal arrives, then
/// prints the summary of what interrupted them.
pub fn run(cfg: &CensusConfig, out: &mut dyn Write) -> anyhow::Result<()> {
    run_observed(cfg, &mut NoObserver, out)
}

/// `run`, showing the records and the time to `observer` as they come.
pub fn run_observed(
    cfg: &CensusConfig,
    observer: &mut dyn CensusObserver,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    if !cfg.json {
        writeln!(
            out,
            "watching CPU {} for {} (Ctrl-C ends early)",
            format_list(&cfg.cpus),
            fmt_ns(cfg.duration_ns)
        )?;
    }
    let collected = collect(cfg, observer, out, &mut || true)?;
    let records = &collected.records;
    if cfg.json {
        writeln!(
            out,
            "{}",
            summary_json(records, collected.duration_ns, &collected.probes)
        )?;
    } else {
        let text = summary(
            records,
            collected.duration_ns,
            &cfg.cpus,
            &collected.attach,
            &collected.probes,
            cfg.words,
        );
        write!(out, "\n{text}")?;
    }
    // The summary is printed even when the metrics file could not be written at the end.
    collected.metrics
}

/// What a census collected: its records in time order, from `start_ns` for `duration_ns`.
pub struct Collected {
    pub records: Vec<Record>,
    pub start_ns: Nanos,
    pub duration_ns: Nanos,
    pub attach: Vec<AttachStatus>,
    pub probes: ProbeSummary,
    /// The observer's end (the metrics file written, or why not).
    pub metrics: anyhow::Result<()>,
}

/// Watches `cfg.cpus` until the time is up, a signal arrives or `keep_going` (asked after each
/// look at the probes, off the watched CPUs) says no; every record is shown to `observer`
/// (and logged to `out` when `cfg.log`) as it comes.
pub fn collect(
    cfg: &CensusConfig,
    observer: &mut dyn CensusObserver,
    out: &mut dyn Write,
    keep_going: &mut dyn FnMut() -> bool,
) -> anyhow::Result<Collected> {
    let (session, batches) = start_probes(cfg)?;
    let start_ns = monotonic_ns();
    let end_ns = start_ns + cfg.duration_ns;
    let mut census = Census {
        start_ns,
        log: cfg.log && !cfg.json,
        words: cfg.words,
        records: Vec::new(),
    };
    while monotonic_ns() < end_ns && crate::signals::received().is_none() {
        match batches.recv_timeout(Duration::from_millis(100)) {
            Ok(mut b) => {
                census.take(&mut b, observer, out)?;
                // Back to the drain thread to fill again: a new batch would grow its heap.
                session.recycle(b);
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
        observer.tick(start_ns, monotonic_ns());
        if !keep_going() {
            break;
        }
    }
    let attach = session.attach_report().to_vec();
    // Detaching patches kernel text too: what starts from here on is jitterscope's own.
    let census_end_ns = monotonic_ns();
    let probes = session.stop().context("cannot stop the probes")?;
    while let Ok(mut b) = batches.try_recv() {
        b.retain(|r| matches!(r, Record::Lost { .. }) || at_ns(r) < census_end_ns);
        census.take(&mut b, observer, out)?;
    }
    let metrics = observer.end(start_ns, census_end_ns);
    Ok(Collected {
        records: census.records,
        start_ns,
        duration_ns: census_end_ns.min(end_ns) - start_ns,
        attach,
        probes,
        metrics,
    })
}

/// The probes on `cfg.cpus`, their drain thread (and this one) kept off them when the
/// machine has other CPUs.
fn start_probes(cfg: &CensusConfig) -> anyhow::Result<(ProbeSession, Receiver<ProbeBatch>)> {
    let mut pc = ProbeConfig::new(cfg.cpus.clone());
    pc.ringbuf_bytes = cfg.ringbuf_bytes;
    pc.drain_cpus = cfg.drain_cpus.clone();
    pc.floor = cfg.floor;
    if pc.drain_cpus.is_empty() {
        eprintln!(
            "note: every CPU is watched; jitterscope's own drain thread shows up as class `self`"
        );
    } else {
        // This thread too stays off the watched CPUs.
        let _ = set_current_thread_cpus(&pc.drain_cpus);
    }
    ProbeSession::start(pc).context("cannot start the probes")
}

/// The records of a census so far.
struct Census {
    start_ns: Nanos,
    log: bool,
    words: Words,
    records: Vec<Record>,
}

impl Census {
    /// Takes one batch: in time order, logged when asked, without what came before the
    /// census started — attaching patches kernel text, which sends call-function IPIs to
    /// every CPU: those records are not the CPUs' noise.
    fn take(
        &mut self,
        batch: &mut ProbeBatch,
        observer: &mut dyn CensusObserver,
        out: &mut dyn Write,
    ) -> std::io::Result<()> {
        batch.retain(|r| matches!(r, Record::Lost { .. }) || at_ns(r) >= self.start_ns);
        batch.sort_by_key(at_ns);
        observer.batch(batch);
        if self.log {
            for r in batch.iter() {
                writeln!(out, "{}", log_line(r, self.start_ns, self.words))?;
            }
        }
        self.records.append(batch);
        Ok(())
    }
}

/// When a record happened: an interruption's start, a cause's moment, the end of a steal
/// interval, the start of a lost window.
pub fn at_ns(r: &Record) -> Nanos {
    match r {
        Record::Interruption(i) => i.start_ns,
        Record::Cause(c) => c.at_ns,
        Record::Steal(st) => st.to_ns,
        Record::Lost { start_ns, .. } => *start_ns,
        Record::Wait(w) => w.start_ns,
        Record::Thread(t) => t.at_ns,
    }
}

/// A summary row's culprit: a task one row per task (its policy aside), a sleeper woken by
/// its hrtimer one row per comm, not per pid.
fn row_of(who: &Who) -> Who {
    match who {
        Who::Task {
            comm,
            pid,
            container,
            ..
        } => Who::Task {
            comm: comm.clone(),
            pid: *pid,
            policy: 0,
            container: container.clone(),
        },
        other => other.sleeper_folded().unwrap_or_else(|| other.clone()),
    }
}

/// One line of the log, times relative to `base_ns`.
pub fn log_line(r: &Record, base_ns: Nanos, words: Words) -> String {
    let at = |t: Nanos| t.saturating_sub(base_ns) as f64 / 1e9;
    match r {
        Record::Interruption(i) => {
            let (name, detail) = words(&i.who);
            let mut s = format!(
                "+{:.6}s  CPU {:<3} {:<11} {:>9}  {}",
                at(i.start_ns),
                i.cpu,
                i.class.as_str(),
                fmt_ns(i.duration_ns()),
                name
            );
            if !detail.is_empty() {
                let _ = write!(s, "  {detail}");
            }
            if let Some(p) = i.parent {
                let _ = write!(s, "  (inside {p})");
            }
            s
        }
        Record::Cause(c) => format!(
            "+{:.6}s  CPU {:<3} {:<11} {:>9}  {} from CPU {} {}{}",
            at(c.at_ns),
            c.target_cpu,
            match c.kind {
                CauseKind::QueueWork => "queue_work",
                CauseKind::Ipi => "ipi_send",
            },
            "",
            c.what,
            c.sender_cpu,
            sender_words(c),
            if c.callsite.is_empty() {
                String::new()
            } else {
                format!(" at {}", c.callsite)
            }
        ),
        Record::Steal(st) => format!(
            "+{:.6}s  CPU {:<3} {:<11} {:>9}  host kept the vCPU off its CPU (KVM steal) since +{:.6}s",
            at(st.to_ns),
            st.cpu,
            CulpritClass::Hypervisor.as_str(),
            fmt_ns(st.steal_ns),
            at(st.from_ns)
        ),
        Record::Lost {
            cpu,
            start_ns,
            end_ns,
            count,
        } if *count == 0 => format!(
            "+{:.6}s  CPU {:<3} LOST records, still at +{:.6}s (record ring full; counted when it has room)",
            at(*start_ns),
            cpu,
            at(*end_ns)
        ),
        Record::Lost {
            cpu,
            start_ns,
            end_ns,
            count,
        } => format!(
            "+{:.6}s  CPU {:<3} LOST {count} records until +{:.6}s (record ring full)",
            at(*start_ns),
            cpu,
            at(*end_ns)
        ),
        Record::Wait(w) => format!(
            "+{:.6}s  CPU {:<3} {:<11} {:>9}  {}[{}] waited ({:?}) from CPU {}",
            at(w.start_ns),
            w.cpu,
            "wait",
            fmt_ns(w.duration_ns()),
            w.name,
            w.tid,
            w.kind,
            w.from_cpu
        ),
        Record::Thread(t) => format!(
            "+{:.6}s  thread {}[{}] {}",
            at(t.at_ns),
            t.name,
            t.tid,
            match t.change {
                ThreadChange::Created { by } => format!("created by {by}"),
                ThreadChange::Exited { .. } => "exited".to_string(),
                ThreadChange::Exec { old_tid } => format!("exec'd, was {old_tid}"),
            }
        ),
    }
}

#[derive(Default)]
struct Tally {
    count: u64,
    total: Nanos,
    max: Nanos,
}

/// The per-class (and per-name) summary of a census, plus attach report and costs.
pub fn summary(
    records: &[Record],
    duration_ns: Nanos,
    cpus: &[Cpu],
    attach: &[AttachStatus],
    probes: &ProbeSummary,
    words: Words,
) -> String {
    let mut by: BTreeMap<(Cpu, CulpritClass, Who), Tally> = BTreeMap::new();
    let mut causes: BTreeMap<(Cpu, String, String), u64> = BTreeMap::new();
    for r in records {
        match r {
            Record::Interruption(i) => {
                let t = by.entry((i.cpu, i.class, row_of(&i.who))).or_default();
                t.count += 1;
                t.total += i.duration_ns();
                t.max = t.max.max(i.duration_ns());
            }
            Record::Cause(c) => {
                *causes
                    .entry((
                        c.target_cpu,
                        c.what.clone(),
                        format!("{} on CPU {}", sender_words(c), c.sender_cpu),
                    ))
                    .or_default() += 1;
            }
            Record::Steal(st) => {
                let t = by
                    .entry((st.cpu, CulpritClass::Hypervisor, Who::AnyHost))
                    .or_default();
                t.count += 1;
                t.total += st.steal_ns;
                t.max = t.max.max(st.steal_ns);
            }
            Record::Lost { .. } | Record::Wait(_) | Record::Thread(_) => {}
        }
    }
    let mut s = String::new();
    let _ = writeln!(
        s,
        "== Interruptions on CPU {} over {} ==",
        crate::units::format_list(cpus),
        fmt_ns(duration_ns)
    );
    let _ = writeln!(
        s,
        "{:<5} {:<11} {:<52} {:>8} {:>10} {:>10} {:>9}",
        "cpu", "class", "name", "count", "total", "max", "of time"
    );
    let mut rows: Vec<_> = by.into_iter().collect();
    rows.sort_by(|a, b| (a.0 .0, b.1.total).cmp(&(b.0 .0, a.1.total)));
    for ((cpu, class, who), t) in rows {
        let name = match words(&who) {
            // A task's detail is its policy, the host's its CPU: the name alone.
            (name, _) if matches!(class, CulpritClass::Task | CulpritClass::Hypervisor) => name,
            (name, detail) if detail.is_empty() => name,
            (name, detail) => format!("{name} {detail}"),
        };
        let share = if duration_ns > 0 {
            100.0 * t.total as f64 / duration_ns as f64
        } else {
            0.0
        };
        let _ = writeln!(
            s,
            "{:<5} {:<11} {:<52} {:>8} {:>10} {:>10} {:>8.3}%",
            cpu,
            class.as_str(),
            name.chars().take(52).collect::<String>(),
            t.count,
            fmt_ns(t.total),
            fmt_ns(t.max),
            share
        );
    }
    if !causes.is_empty() {
        let _ = writeln!(s, "\n== Work and IPIs sent to these CPUs ==");
        let mut c: Vec<_> = causes.into_iter().collect();
        c.sort_by_key(|e| std::cmp::Reverse(e.1));
        for ((cpu, what, who), n) in c.into_iter().take(20) {
            let _ = writeln!(s, "CPU {cpu:<3} {n:>7}× {what}  from {who}");
        }
    }
    s.push_str(&tick_stops(&probes.tick_stops));
    let missing: Vec<&str> = attach
        .iter()
        .filter(|a| a.state != AttachState::Attached)
        .map(|a| a.tracepoint.as_str())
        .collect();
    if !missing.is_empty() {
        let _ = writeln!(
            s,
            "\nnot available on this kernel (not traced): {}",
            missing.join(", ")
        );
    }
    s.push_str(&costs(probes));
    s.push_str(&steal_clock(probes));
    let drops = probes.total_drops();
    if drops > 0 {
        let per: Vec<String> = probes
            .drops
            .iter()
            .map(|(c, d)| format!("CPU {c}: {d}"))
            .collect();
        let _ = writeln!(
            s,
            "WARNING: {drops} records lost (record ring full; {}); raise --ringbuf-size",
            per.join(", ")
        );
    }
    s
}

/// The tick's stops on each measured CPU (`timer:tick_stop`), a line each: how often it was
/// stopped, how often the kernel kept it and why. Nothing when the tracepoint was not
/// attached (the attach report lists it).
pub fn tick_stops(stops: &[TickStops]) -> String {
    if stops.is_empty() {
        return String::new();
    }
    let mut s = String::from("\n== The scheduler tick (timer:tick_stop) ==\n");
    for t in stops {
        let kept: u64 = t.kept.iter().map(|(_, n)| n).sum();
        let why: Vec<String> = t
            .kept
            .iter()
            .map(|(dep, n)| format!("{} {n}", dep.as_str()))
            .collect();
        let _ = write!(
            s,
            "CPU {:<3} tick: stopped {}×; kept {kept}×",
            t.cpu, t.stopped
        );
        if !why.is_empty() {
            let _ = write!(s, " ({})", why.join(", "));
        }
        s.push('\n');
    }
    s
}

/// BPF cost per program, the busiest first.
pub fn costs(p: &ProbeSummary) -> String {
    if !p.stats_enabled {
        return "\nBPF cost: not available (the kernel refused BPF run-time statistics)\n".into();
    }
    let mut c: Vec<_> = p.costs.iter().filter(|c| c.run_count > 0).collect();
    c.sort_by_key(|x| std::cmp::Reverse(x.run_time_ns));
    let total_ns: u64 = c.iter().map(|c| c.run_time_ns).sum();
    let mut s = format!("\nBPF cost ({} in the probes):", fmt_ns(total_ns));
    for x in c.iter().take(8) {
        let _ = write!(
            s,
            " {} {:.0}ns×{}",
            x.program,
            x.ns_per_event().unwrap_or(0.0),
            x.run_count
        );
    }
    s.push('\n');
    if !p.floor.is_empty() {
        s.push_str(match p.floor_place {
            Reference::BeforeProbes => "Floor (reference programs, run before the probes'):",
            _ => "Floor (reference programs, run after the probes'):",
        });
        for x in &p.floor {
            let what = match x.program.as_str() {
                "empty" => "an empty program on sched_switch",
                "clock" => "a clock read alone on sched_switch",
                "timer_empty" => "an empty program on local_timer_entry",
                "timer_clock" => "a clock read alone on local_timer_entry",
                other => other,
            };
            let _ = write!(
                s,
                " {what} {:.0}ns×{}",
                x.ns_per_event().unwrap_or(0.0),
                x.run_count
            );
        }
        s.push('\n');
    }
    s
}

/// Whether host preemption can be told from the rest: the steal clock, read or why not.
pub fn steal_clock(p: &ProbeSummary) -> String {
    if let Some(note) = &p.steal_clock_note {
        return format!("{note}: host preemption cannot be told from other unexplained time\n");
    }
    if !p.steal_clock {
        return String::new();
    }
    let per: Vec<String> = p
        .steal_clock_ns
        .iter()
        .map(|(c, ns)| format!("CPU {c} {}", fmt_ns(*ns)))
        .collect();
    format!(
        "KVM steal clock: read at every probe event{}\n",
        if per.is_empty() {
            String::new()
        } else {
            format!(" (stolen since boot: {})", per.join(", "))
        }
    )
}

fn costs_json(costs: &[super::ProgramCost]) -> Vec<serde_json::Value> {
    costs
        .iter()
        .map(|c| {
            serde_json::json!({
                "program": c.program, "run_count": c.run_count, "run_time_ns": c.run_time_ns,
                "ns_per_event": c.ns_per_event(),
            })
        })
        .collect()
}

/// The census as JSON, for scripts (scripts/bench.sh): records per class, BPF cost per
/// program, drops per CPU, the tick's stops per CPU (`model::TickStops`; empty when
/// `timer:tick_stop` was not attached).
pub fn summary_json(records: &[Record], duration_ns: Nanos, probes: &ProbeSummary) -> String {
    let mut classes: BTreeMap<&str, (u64, Nanos)> = BTreeMap::new();
    for r in records {
        let (class, ns) = match r {
            Record::Interruption(i) => (i.class, i.duration_ns()),
            Record::Steal(st) => (CulpritClass::Hypervisor, st.steal_ns),
            Record::Cause(_) | Record::Lost { .. } | Record::Wait(_) | Record::Thread(_) => {
                continue
            }
        };
        let e = classes.entry(class.as_str()).or_default();
        e.0 += 1;
        e.1 += ns;
    }
    serde_json::json!({
        "duration_ns": duration_ns,
        "classes": classes.iter().map(|(k, (n, t))| (k.to_string(), serde_json::json!({"count": n, "total_ns": t}))).collect::<serde_json::Map<_, _>>(),
        "costs": costs_json(&probes.costs),
        "floor": costs_json(&probes.floor),
        "floor_place": match probes.floor_place {
            Reference::Off => serde_json::Value::Null,
            Reference::AfterProbes => "after_probes".into(),
            Reference::BeforeProbes => "before_probes".into(),
        },
        "stats_enabled": probes.stats_enabled,
        "steal_clock": probes.steal_clock,
        "steal_clock_note": probes.steal_clock_note,
        "drops": probes.drops.iter().map(|(c, d)| serde_json::json!({"cpu": c, "count": d})).collect::<Vec<_>>(),
        "events": probes.events.iter().map(|(c, d)| serde_json::json!({"cpu": c, "count": d})).collect::<Vec<_>>(),
        "tick_stops": probes.tick_stops,
    })
    .to_string()
}

/// Who sent a cause as the census lists it: `comm[pid]`, or the interrupt it was sent from
/// (`softirq 1`, `irq 11`, …) with the task it interrupted.
/// Who sent or queued `c`, as the census prints it: `kworker/0:2[3504]`, `TIMER softirq
/// (interrupting sh[14598])`.
pub fn sender_words(c: &Cause) -> String {
    let from = match c.sent_from {
        SentFrom::Task => return format!("{}[{}]", c.sender_comm, c.sender_pid),
        SentFrom::Softirq { vector: Some(v) } => format!("{} softirq", softirq_name(v)),
        SentFrom::Softirq { vector: None } => "softirq".to_string(),
        SentFrom::SoftHrtimer => "softirq hrtimer".to_string(),
        SentFrom::HardIrq => "hardirq".to_string(),
        SentFrom::Irq { number } => format!("irq {number}"),
        SentFrom::Vector { vector } => vector_name(vector).to_string(),
        SentFrom::Hrtimer => "hrtimer".to_string(),
        SentFrom::Nmi => "nmi".to_string(),
    };
    format!("{from} (interrupting {}[{}])", c.sender_comm, c.sender_pid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::TickDependency;

    #[test]
    fn the_tick_gets_a_line_per_cpu_with_why_it_was_kept() {
        let stops = [
            TickStops {
                cpu: 1,
                stopped: 412,
                kept: vec![],
            },
            TickStops {
                cpu: 3,
                stopped: 2,
                kept: vec![(TickDependency::Sched, 240), (TickDependency::Rcu, 10)],
            },
        ];
        let text = tick_stops(&stops);
        assert!(
            text.contains("CPU 1   tick: stopped 412×; kept 0×\n"),
            "{text}"
        );
        assert!(
            text.contains("CPU 3   tick: stopped 2×; kept 250× (sched 240, rcu 10)\n"),
            "{text}"
        );
        assert_eq!(tick_stops(&[]), "");
    }

    #[test]
    fn the_json_census_holds_the_ticks_stops() {
        let probes = ProbeSummary {
            tick_stops: vec![TickStops {
                cpu: 1,
                stopped: 7,
                kept: vec![(TickDependency::PosixTimer, 2)],
            }],
            ..Default::default()
        };
        let v: serde_json::Value = serde_json::from_str(&summary_json(&[], 1, &probes)).unwrap();
        assert_eq!(
            v["tick_stops"],
            serde_json::json!([{"cpu": 1, "stopped": 7, "kept": [["posix_timer", 2]]}])
        );
    }
}
