//! The parts of a report only a watch has: its head (what was watched, its threads, how the
//! watch ended), a block per watched thread, and what a watch cannot see — in the terminal
//! report and in Markdown. A watch has no workload: no producer, consumers or interval.

use std::fmt::Write as _;

use super::runfile::{BlindSpot, Coverage, DelayStats, RunFile, ThreadEntry};
use super::text::{md_escape, pct, truncate, Paint};
use crate::model::{Cpu, Ended};
use crate::units::{fmt_ns, format_list};

/// Threads named in the head; the blocks below list every one.
const HEAD_THREADS: usize = 8;
/// Culprits per thread block.
const THREAD_CULPRITS: usize = 5;

/// `the command exited (exit status: 0)`, `the 10.0s asked for were reached`: how it ended.
pub fn ended_words(run: &RunFile) -> String {
    let why = &run.run.end_reason;
    match run.run.ended {
        Ended::Completed if run.run.settings.planned_duration_ns > 0 => format!(
            "the {} asked for (--duration) were reached",
            fmt_ns(run.run.settings.planned_duration_ns)
        ),
        Ended::Completed => "completed".into(),
        Ended::Interrupted if why.is_empty() => "interrupted".into(),
        Ended::Interrupted => format!("interrupted ({why})"),
        Ended::TargetExited if why.is_empty() => "the target exited".into(),
        Ended::TargetExited | Ended::CpuLost => why.clone(),
    }
}

fn target(run: &RunFile) -> &str {
    run.watch.as_ref().map_or("", |w| w.target.as_str())
}

/// `oslat[4122] on CPU 1, oslat[4121] on CPUs 0-1`, at most `HEAD_THREADS` of them.
fn threads_line(run: &RunFile) -> String {
    let mut named: Vec<String> = run
        .threads
        .iter()
        .take(HEAD_THREADS)
        .map(|t| format!("{}[{}] {}", t.name, t.tid, on_cpus(&t.cpus)))
        .collect();
    if run.threads.len() > HEAD_THREADS {
        named.push(format!("and {} more", run.threads.len() - HEAD_THREADS));
    }
    if named.is_empty() {
        "no thread was seen".into()
    } else {
        named.join(", ")
    }
}

/// The facts of the head, one sentence each: target and process, time and end, threads.
fn head_facts(run: &RunFile) -> [String; 3] {
    let r = &run.run;
    let process = match run.watch.as_ref().and_then(|w| w.pid) {
        Some(pid) => format!("Process {pid}, watched"),
        None => "Watched".into(),
    };
    [
        format!(
            "{process} {} on CPUs {}; ended: {}",
            fmt_ns(r.duration_ns),
            format_list(&r.cpus),
            ended_words(run)
        ),
        format!(
            "{} thread{}: {}",
            run.threads.len(),
            if run.threads.len() == 1 { "" } else { "s" },
            threads_line(run)
        ),
        format!("Kernel {}, host {}", r.kernel, r.host),
    ]
}

/// The terminal report's head: what was watched, then its facts.
pub(super) fn head_text(run: &RunFile, p: &Paint) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{}",
        p.bold(&format!("== Watch of `{}` ==", target(run)))
    );
    for fact in head_facts(run) {
        let _ = writeln!(s, "{fact}");
    }
    s.push('\n');
    s
}

/// `1502 total 12.0ms p50 2.1µs p99 40.0µs p99.9 1.1ms max 4.0ms`
fn delay_figures(d: &DelayStats) -> String {
    let pcts = d.summary.as_ref().map_or(String::new(), |su| {
        format!(
            " p50 {} p99 {} p99.9 {}",
            fmt_ns(su.percentile("50").unwrap_or(0)),
            fmt_ns(su.percentile("99").unwrap_or(0)),
            fmt_ns(su.percentile("99.9").unwrap_or(0))
        )
    });
    format!(
        "{:>7} total {:>9}{pcts} max {}",
        d.count,
        fmt_ns(d.total_ns),
        fmt_ns(d.max_ns)
    )
}

/// `1.2ms of the 10.0s it wanted a CPU taken (0%)`
fn taken_words(t: &ThreadEntry) -> String {
    match (t.share, t.wanted_ns) {
        (Some(sh), Some(w)) => format!(
            "{} of the {} it wanted a CPU taken ({})",
            fmt_ns(t.taken_ns),
            fmt_ns(w),
            pct(sh)
        ),
        _ => format!("{} taken", fmt_ns(t.taken_ns)),
    }
}

/// `on cpu 3.0ms (12), preempted 1.0ms (2)`
fn kinds_words(t: &ThreadEntry) -> String {
    t.kinds
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
        .collect::<Vec<_>>()
        .join(", ")
}

fn thread_title(t: &ThreadEntry) -> String {
    let exited = if t.exited_ns.is_some() {
        ", exited"
    } else {
        ""
    };
    format!(
        "{}[{}] (process {}, {}{exited})",
        t.name,
        t.tid,
        t.pid,
        on_cpus(&t.cpus)
    )
}

/// Where a thread ran: `on CPU 1`, `on CPUs 0-1`, `not seen on a CPU`.
fn on_cpus(cpus: &[Cpu]) -> String {
    match cpus {
        [] => "not seen on a CPU".to_string(),
        [one] => format!("on CPU {one}"),
        _ => format!("on CPUs {}", format_list(cpus)),
    }
}

fn culprit_what(c: &super::runfile::CulpritEntry) -> String {
    let name = super::text::grouped_name(c);
    if c.detail.is_empty() {
        name
    } else {
        format!("{name} {}", c.detail)
    }
}

/// One block per watched thread — its share of wanted CPU time taken, its interruptions and
/// wake-up delays, its top culprits.
pub(super) fn threads_text(run: &RunFile, p: &Paint) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{}", p.bold("== Watched threads =="));
    for t in &run.threads {
        let _ = writeln!(s, "{}: {}", thread_title(t), taken_words(t));
        for (label, d) in [
            ("interruptions", &t.interruptions),
            ("wake-up delays", &t.wakeups),
        ] {
            if d.count > 0 {
                let _ = writeln!(s, "  {label:<15} {}", delay_figures(d));
            }
        }
        let kinds = kinds_words(t);
        if !kinds.is_empty() {
            let _ = writeln!(s, "  by kind: {kinds}");
        }
        for c in t.culprits.iter().take(THREAD_CULPRITS) {
            let _ = writeln!(
                s,
                "  {:<11} {:<48} {:>9} {:>6}",
                c.class.as_str(),
                truncate(&culprit_what(c), 48),
                fmt_ns(c.total_ns()),
                pct(c.share)
            );
        }
    }
    s.push('\n');
    s
}

/// The coverage a file states, or for files written before it was kept, what every watch
/// misses on either kind of machine.
fn coverage(run: &RunFile) -> Coverage {
    if let Some(c) = run.watch.as_ref().and_then(|w| w.coverage.clone()) {
        return c;
    }
    let mut cpus: Vec<Cpu> = run.threads.iter().flat_map(|t| t.cpus.clone()).collect();
    cpus.sort_unstable();
    cpus.dedup();
    Coverage {
        blind_to: vec![
            BlindSpot::HostExits,
            BlindSpot::HostPreemption,
            BlindSpot::Smi,
        ],
        cpus,
    }
}

fn blind_words(b: BlindSpot) -> &'static str {
    match b {
        BlindSpot::HostExits => {
            "on a VM, VM exits and the host's interrupt handling while the vCPU runs (KVM steal does not count them)"
        }
        BlindSpot::HostPreemption => {
            "on a VM with no steal clock read, the host running something else on the vCPU's CPU"
        }
        BlindSpot::Smi => "on bare metal, system management interrupts (firmware)",
    }
}

/// What the steal clock told, if one was read.
fn steal_words(run: &RunFile) -> Option<String> {
    let p = run.probes.as_ref().filter(|p| p.steal_clock)?;
    let grew: Vec<String> = p
        .steal
        .iter()
        .filter(|c| c.steal_ns > 0)
        .map(|c| format!("CPU {} +{}", c.cpu, fmt_ns(c.steal_ns)))
        .collect();
    Some(if grew.is_empty() {
        "The KVM steal clock was read and did not grow: the host did not hold these vCPUs off their CPUs (its exits and interrupts are not in that clock)".into()
    } else {
        format!(
            "The KVM steal clock was read ({} over the watch): where it grew while a watched thread wanted its CPU, that time is counted, as host preemption",
            grew.join(", ")
        )
    })
}

/// How to measure every gap on the watched threads' CPUs.
fn how_to_see(cpus: &[Cpu]) -> String {
    if cpus.is_empty() {
        return "To measure every gap, time a loop on the same CPUs: a `jitterscope run` with its consumers there (`--cpus P,C`), or the program's own loop timing (oslat, cyclictest)".into();
    }
    let list = format_list(cpus);
    let each = cpus
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",");
    // A run measures every CPU it is given: the producer's loop on the first, its consumers'
    // on the rest. One CPU needs another for the producer; two or more hold both.
    let run = if cpus.len() == 1 {
        format!("`jitterscope run --cpus P,{each}` (its consumer's loop there, with the producer on another CPU P)")
    } else {
        format!("`jitterscope run --cpus {each}` (its producer's loop on CPU {}, its consumers' on the others)", cpus[0])
    };
    format!(
        "To measure every gap on CPU{} {list}: {run}, or the program's own loop timing on {} (`oslat --cpu-list {list}`, `cyclictest --affinity {list}`)",
        if cpus.len() == 1 { "" } else { "s" },
        if cpus.len() == 1 { "it" } else { "them" }
    )
}

/// What a watch cannot see and how to see it, as sentences (no full stops).
pub fn blind_sentences(run: &RunFile) -> Vec<String> {
    let c = coverage(run);
    let mut out = vec![
        "A watch counts a gap in a watched thread only where a kernel event (a switch, a wake-up, an IRQ, a softirq, a timer, an IPI, an NMI, a fault) or the KVM steal clock marks it: the thread runs no clock loop of jitterscope's, so a gap nothing marks is in none of these figures, and every share here is of the interruptions seen".to_string(),
    ];
    if !c.blind_to.is_empty() {
        let what: Vec<&str> = c.blind_to.iter().map(|b| blind_words(*b)).collect();
        out.push(format!("Not seen here: {}", what.join("; ")));
    }
    out.extend(steal_words(run));
    out.push(how_to_see(&c.cpus));
    out
}

/// The terminal report's block on what the watch cannot see.
pub(super) fn blind_text(run: &RunFile, p: &Paint) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{}", p.bold("== What this watch cannot see =="));
    for line in blind_sentences(run) {
        let _ = writeln!(s, "{line}.");
    }
    s.push('\n');
    s
}

/// The Markdown head of a watch: title, facts, a section per thread, what it cannot see,
/// the interruptions per CPU.
pub fn markdown_head(run: &RunFile) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# jitterscope watch `{}`\n", md_escape(target(run)));
    for fact in head_facts(run) {
        let _ = writeln!(s, "{}.", md_escape(&fact));
    }
    s.push_str("\n## Watched threads\n");
    for t in &run.threads {
        let _ = writeln!(s, "\n### {}\n", md_escape(&thread_title(t)));
        let _ = writeln!(s, "- {}", taken_words(t));
        for (label, d) in [
            ("interruptions", &t.interruptions),
            ("wake-up delays", &t.wakeups),
        ] {
            if d.count > 0 {
                let figures = delay_figures(d);
                let words: Vec<&str> = figures.split_whitespace().collect();
                let _ = writeln!(s, "- {label}: {}", words.join(" "));
            }
        }
        let kinds = kinds_words(t);
        if !kinds.is_empty() {
            let _ = writeln!(s, "- by kind: {kinds}");
        }
        let top: Vec<String> = t
            .culprits
            .iter()
            .take(THREAD_CULPRITS)
            .map(|c| {
                let what = md_escape(&culprit_what(c));
                format!("{what} {} ({})", fmt_ns(c.total_ns()), pct(c.share))
            })
            .collect();
        if !top.is_empty() {
            let _ = writeln!(s, "- culprits: {}", top.join(", "));
        }
    }
    s.push_str("\n## What this watch cannot see\n\n");
    for line in blind_sentences(run) {
        let _ = writeln!(s, "- {line}.");
    }
    let ss = &run.stall_summary;
    let _ = writeln!(
        s,
        "\n## Interruptions seen\n\n{} interruptions of the watched threads, {} in all, the longest {}.\n\n| CPU | count | total | longest |\n|---:|---:|---:|---:|",
        ss.count,
        fmt_ns(ss.total_ns),
        fmt_ns(ss.longest_ns)
    );
    super::text::per_cpu_rows(&mut s, ss);
    s
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::model::CulpritClass;
    use crate::report::runfile::{CpuSteal, ProbeInfo, WatchInfo};
    use crate::report::text::{render, render_markdown};

    /// A watch file as `watch -- oslat -c 1 -D 10` writes it on a VM with a steal clock: two
    /// threads, one interrupted on CPU 1, most of the time named and some not.
    pub(crate) fn sample() -> RunFile {
        let mut run = crate::report::runfile::tests::sample();
        run.mode = crate::report::runfile::Mode::Watch;
        run.run.label = "watch".into();
        run.run.producer_cpu = 0;
        run.run.consumer_cpus = Vec::new();
        run.run.cpus = vec![0, 1];
        run.run.duration_ns = 10_000_000_000;
        run.run.settings.interval_ns = 0;
        run.run.settings.planned_duration_ns = 0;
        run.run.ended = Ended::TargetExited;
        run.run.end_reason = "the command exited (exit status: 0)".into();
        run.histograms.clear();
        run.watch = Some(WatchInfo {
            target: "-- oslat -c 1 -D 10".into(),
            pid: Some(4121),
            join_ns: 2_000,
            coverage: Some(Coverage::of(true, true, vec![1])),
            ..WatchInfo::default()
        });
        let interruptions = DelayStats {
            count: 1502,
            total_ns: 12_000_000,
            max_ns: 4_035_000,
            summary: None,
        };
        run.threads = vec![
            ThreadEntry {
                tid: 4121,
                pid: 4121,
                name: "oslat".into(),
                cpus: vec![0],
                ..Default::default()
            },
            ThreadEntry {
                tid: 4122,
                pid: 4121,
                name: "oslat".into(),
                cpus: vec![1],
                taken_ns: 12_000_000,
                interruptions,
                culprits: vec![crate::report::runfile::tests::culprit(
                    CulpritClass::Kworker,
                    "kworker/1:1",
                    11_000_000,
                )],
                ..Default::default()
            },
        ];
        run.stall_summary.count = 1502;
        run.stall_summary.total_ns = 12_000_000;
        run.culprits = vec![
            crate::report::runfile::tests::culprit(
                CulpritClass::Kworker,
                "kworker/1:1",
                11_000_000,
            ),
            crate::report::runfile::tests::culprit(
                CulpritClass::Unexplained,
                "no event",
                1_000_000,
            ),
        ];
        run.probes = Some(ProbeInfo {
            steal_clock: true,
            steal: vec![CpuSteal {
                cpu: 1,
                steal_ns: 41_000,
            }],
            ..ProbeInfo::default()
        });
        run
    }

    /// The workload's fields as a run's reports show them.
    const WORKLOAD_WORDS: [&str; 6] = [
        "Producer on CPU",
        "producer CPU",
        "consumers on CPUs",
        "interval",
        "Transit",
        "Latency",
    ];

    #[test]
    fn a_watch_report_is_headed_by_its_target_and_threads_not_a_workload() {
        let run = sample();
        let text = render(&run, false);
        assert!(
            text.starts_with("== Watch of `-- oslat -c 1 -D 10` ==\nProcess 4121, watched 10.000s on CPUs 0-1; ended: the command exited (exit status: 0)\n2 threads: oslat[4121] on CPU 0, oslat[4122] on CPU 1\n"),
            "{text}"
        );
        let md = render_markdown(&run);
        assert!(
            md.starts_with("# jitterscope watch `-- oslat -c 1 -D 10`\n\nProcess 4121, watched 10.000s on CPUs 0-1; ended: the command exited (exit status: 0).\n2 threads: oslat[4121] on CPU 0, oslat[4122] on CPU 1.\n"),
            "{md}"
        );
        assert!(
            md.contains("\n### oslat[4122] (process 4121, on CPU 1)\n"),
            "{md}"
        );
        for out in [&text, &md] {
            for word in WORKLOAD_WORDS {
                assert!(!out.contains(word), "{word:?} in a watch report:\n{out}");
            }
        }
    }

    #[test]
    fn how_a_watch_ended_is_said_in_words() {
        let mut run = sample();
        run.run.ended = Ended::Completed;
        run.run.end_reason.clear();
        run.run.settings.planned_duration_ns = 10_000_000_000;
        assert!(ended_words(&run).contains("the 10.000s asked for (--duration) were reached"));
        run.run.ended = Ended::Interrupted;
        run.run.end_reason = "SIGINT".into();
        assert_eq!(ended_words(&run), "interrupted (SIGINT)");
        run.run.ended = Ended::TargetExited;
        run.run.end_reason = "every watched thread exited".into();
        assert!(render(&run, false).contains("; ended: every watched thread exited\n"));
    }

    #[test]
    fn the_run_that_measures_every_gap_names_cpus_a_run_accepts() {
        assert!(
            how_to_see(&[1]).contains("`jitterscope run --cpus P,1` (its consumer's loop there")
        );
        // Every CPU of a 2-CPU machine: no CPU is left for a P, and none is needed.
        let both = how_to_see(&[0, 1]);
        assert!(both.contains("`jitterscope run --cpus 0,1` (its producer's loop on CPU 0, its consumers' on the others)"), "{both}");
        assert!(!both.contains("P,"), "{both}");
    }

    #[test]
    fn a_watch_states_shares_of_what_it_saw_and_what_it_cannot_see() {
        let run = sample();
        let text = render(&run, false);
        let md = render_markdown(&run);
        for out in [&text, &md] {
            assert!(!out.contains("is unexplained"), "{out}");
            assert!(!out.contains("of all stall time"), "{out}");
            assert!(
                out.contains("Of the interruptions the probes saw (1502, 12.00ms in all), 91.7% of the time has a named kernel cause"),
                "{out}"
            );
            assert!(out.contains("8.3% has no cause named inside it"), "{out}");
            assert!(out.contains("What this watch cannot see"), "{out}");
            assert!(
                out.contains("Not seen here: on a VM, VM exits and the host's interrupt handling while the vCPU runs"),
                "{out}"
            );
            assert!(out.contains("CPU 1 +41.0µs over the watch"), "{out}");
            assert!(
                out.contains("`jitterscope run --cpus P,1`")
                    && out.contains("`oslat --cpu-list 1`"),
                "{out}"
            );
        }
    }

    #[test]
    fn a_watch_file_of_an_older_version_still_says_what_a_watch_cannot_see() {
        let mut run = sample();
        if let Some(w) = &mut run.watch {
            w.coverage = None;
        }
        let back = RunFile::from_json("t", &run.to_json()).unwrap();
        assert_eq!(back.watch.as_ref().unwrap().coverage, None);
        let text = render(&back, false);
        assert!(text.contains("system management interrupts"), "{text}");
        assert!(text.contains("`jitterscope run --cpus 0,1`"), "{text}");
    }

    #[test]
    fn the_run_file_says_what_the_watch_was_blind_to() {
        let json = sample().to_json();
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(
            v["watch"]["coverage"],
            serde_json::json!({"blind_to": ["host_exits"], "cpus": [1]})
        );
        assert_eq!(RunFile::from_json("t", &json).unwrap(), sample());
        let blind = |vm, steal| Coverage::of(vm, steal, vec![]).blind_to;
        assert_eq!(
            blind(true, false),
            [BlindSpot::HostExits, BlindSpot::HostPreemption]
        );
        assert_eq!(blind(false, false), [BlindSpot::Smi]);
    }
}
