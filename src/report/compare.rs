//! `jitterscope compare A.json B.json …`: runs side by side — percentiles with ratios to the
//! first run, the culprits that appeared or disappeared, what changed in the configuration
//! (`config`) with the culprits that moved with it, and one chart overlaying the runs'
//! percentile curves.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::chart::{percentile_chart, Series};
use super::runfile::{Mode, RunFile};
use super::seed::{Summary, PERCENTILES};
use crate::units::fmt_ns;

mod config;

/// A culprit's identity across runs: pids differ from run to run, so `comm[pid]` compares as
/// `comm`.
pub(crate) fn identity(class: &str, name: &str, detail: &str) -> (String, String, String) {
    (
        class.to_string(),
        without_pid(name).to_string(),
        detail.to_string(),
    )
}

/// `sleep[4121]` → `sleep`: a task's name as a run file holds it, without its pid. Run files
/// hold culprits in words (older ones nothing else), so comparing two of them reads the
/// words back.
fn without_pid(name: &str) -> &str {
    match name.rfind('[') {
        Some(i) if name.ends_with(']') => &name[..i],
        _ => name,
    }
}

/// A culprit counts as present in a run from this share of the run's stall time: the long
/// tail of microsecond-sized visitors would otherwise fill the comparison with noise.
pub const PRESENT_SHARE: f64 = 0.01;

/// Stolen time per culprit identity in one run (unexplained included), for the culprits
/// that took at least `PRESENT_SHARE` of the stall time.
fn culprit_times(run: &RunFile) -> BTreeMap<(String, String, String), u64> {
    let mut m = BTreeMap::new();
    for c in &run.culprits {
        let ns: &mut u64 = m
            .entry(identity(c.class.as_str(), &c.name, &c.detail))
            .or_default();
        *ns = ns.saturating_add(c.measured_ns);
    }
    let floor = (run.stall_summary.total_ns as f64 * PRESENT_SHARE) as u64;
    m.retain(|_, ns| *ns >= floor.max(1));
    m
}

/// The floor moved between runs when their p50s differ by more than this factor: the bimodal
/// floor of these VMs flips by ×2–3; ordinary noise stays within ±15 %.
pub const FLOOR_MOVED: f64 = 1.3;

/// Each run's own cross-core floor, and a warning when it moved: a ratio of transit times
/// between runs is then the host's as much as the tuning's.
fn floors(runs: &[(String, RunFile)]) -> String {
    let mut s = String::new();
    let known: Vec<(usize, u64)> = runs
        .iter()
        .enumerate()
        .filter_map(|(i, (_, r))| r.run.floor.map(|f| (i, f.p50_ns.max(1))))
        .collect();
    if known.is_empty() {
        return s;
    }
    s.push_str("\n## Cross-core floor (measured right before each run)\n\n| run | CPUs | p50 | min | p99 |\n|---|---|---:|---:|---:|\n");
    for (i, (_, r)) in runs.iter().enumerate() {
        match r.run.floor {
            Some(f) => {
                let _ = writeln!(
                    s,
                    "| {} | {} → {} | {} | {} | {} |",
                    label(r, i),
                    f.from_cpu,
                    f.to_cpu,
                    fmt_ns(f.p50_ns),
                    fmt_ns(f.min_ns),
                    fmt_ns(f.p99_ns)
                );
            }
            None => {
                let _ = writeln!(s, "| {} | (not measured) | | | |", label(r, i));
            }
        }
    }
    let (lo, hi) = (
        known.iter().min_by_key(|k| k.1).copied(),
        known.iter().max_by_key(|k| k.1).copied(),
    );
    if let (Some(lo), Some(hi)) = (lo, hi) {
        let moved = hi.1 as f64 / lo.1 as f64;
        if moved > FLOOR_MOVED {
            let _ = writeln!(
                s,
                "\n**The floor moved between runs**: {} {} vs {} {} (×{moved:.2}). This machine's cross-core path changed under the runs (on a VM, the host); transit ratios below carry that change, not only the tuning's — compare runs with the same floor, or repeat them.",
                label(&runs[lo.0].1, lo.0),
                fmt_ns(lo.1),
                label(&runs[hi.0].1, hi.0),
                fmt_ns(hi.1)
            );
        }
    }
    s
}

fn label(run: &RunFile, i: usize) -> String {
    format!("#{} {}", i + 1, run.run.label)
}

/// The comparison as text (Markdown tables, readable on a terminal too).
pub fn render(runs: &[(String, RunFile)]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# jitterscope compare\n");
    for (i, (path, r)) in runs.iter().enumerate() {
        let _ = writeln!(
            s,
            "- {}: {path} — CPUs {:?}, {}{}, {}{}",
            label(r, i),
            r.run.cpus,
            match (&r.watch, r.run.settings.pinned) {
                (Some(w), _) => format!("watch {}", w.target),
                (None, true) => "pinned".to_string(),
                (None, false) => "unpinned".to_string(),
            },
            match r.run.settings.consumer_fifo {
                Some(priority) => format!(", consumers SCHED_FIFO {priority}"),
                None => String::new(),
            },
            fmt_ns(r.run.duration_ns),
            if r.run.settings.probes {
                ""
            } else {
                ", no probes"
            }
        );
    }
    let Some((_, first)) = runs.first() else {
        return s;
    };
    s.push_str(&floors(runs));
    let consumers: Vec<&str> = first
        .histograms
        .iter()
        .map(|h| h.consumer.as_str())
        .collect();
    for consumer in consumers {
        s.push_str(&percentile_table(
            &format!("{consumer} transit latency"),
            runs,
            &|r| {
                r.histograms
                    .iter()
                    .find(|h| h.consumer == consumer)
                    .map(|h| &h.transit)
            },
        ));
    }
    s.push_str(&thread_tables(runs));
    // A watch's time is the interruptions it saw, not every stall of a loop.
    let of = if runs.iter().all(|(_, r)| r.mode == Mode::Watch) {
        "the interruption time a watch saw"
    } else {
        "a run's stall time"
    };
    let _ = writeln!(
        s,
        "\n## Culprits between runs (those with at least {:.0}% of {of})\n",
        PRESENT_SHARE * 100.0
    );
    let times: Vec<_> = runs.iter().map(|(_, r)| culprit_times(r)).collect();
    let mut any = false;
    for i in 1..runs.len() {
        let (before, after) = (&times[i - 1], &times[i]);
        let gone: Vec<_> = before.keys().filter(|k| !after.contains_key(*k)).collect();
        let new: Vec<_> = after.keys().filter(|k| !before.contains_key(*k)).collect();
        let name = |k: &(String, String, String)| {
            if k.2.is_empty() {
                format!("{} {}", k.0, k.1)
            } else {
                format!("{} {} {}", k.0, k.1, k.2)
            }
        };
        for k in gone {
            any = true;
            let _ = writeln!(
                s,
                "- {} → {}: gone — {} (was {})",
                label(&runs[i - 1].1, i - 1),
                label(&runs[i].1, i),
                name(k),
                fmt_ns(before[k])
            );
        }
        for k in new {
            any = true;
            let _ = writeln!(
                s,
                "- {} → {}: appeared — {} ({})",
                label(&runs[i - 1].1, i - 1),
                label(&runs[i].1, i),
                name(k),
                fmt_ns(after[k])
            );
        }
    }
    if !any {
        s.push_str("the same culprits in every run\n");
    }
    s.push_str(&config::section(runs, label));
    s
}

/// The "Configuration" section alone: what changed in the configured half from the first run
/// to each later one, with the culprits that moved with each change.
pub fn configuration(runs: &[(String, RunFile)]) -> String {
    config::section(runs, label)
}

/// A percentile table across runs, ratios to the first run; `of` picks the distribution
/// (None: the run has none of it).
fn percentile_table(
    title: &str,
    runs: &[(String, RunFile)],
    of: &dyn Fn(&RunFile) -> Option<&Summary>,
) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "\n## {title} (ns; ratio to #1)\n");
    s.push_str("| run |");
    for (_, l, _) in PERCENTILES.iter() {
        let _ = write!(s, " {l} |");
    }
    s.push_str(" max | count |\n|---|");
    for _ in PERCENTILES.iter() {
        s.push_str("---:|");
    }
    s.push_str("---:|---:|\n");
    let base = runs.first().and_then(|(_, r)| of(r));
    for (i, (_, r)) in runs.iter().enumerate() {
        let Some(h) = of(r) else {
            let _ = writeln!(s, "| {} | (not in this run) |", label(r, i));
            continue;
        };
        let _ = write!(s, "| {} |", label(r, i));
        let cell = |v: u64, b: Option<u64>| match (i, b) {
            (0, _) | (_, None) => format!(" {v} |"),
            (_, Some(b)) => format!(" {v} ({:.2}×) |", v as f64 / b.max(1) as f64),
        };
        for (key, _, _) in PERCENTILES.iter() {
            let v = h.percentile(key).unwrap_or(0);
            s.push_str(&cell(v, base.and_then(|b| b.percentile(key))));
        }
        s.push_str(&cell(h.max, base.map(|b| b.max)));
        let _ = writeln!(s, " {} |", h.count);
    }
    s
}

/// Watch files: each watched thread, matched by name across runs (tids differ from run to
/// run) — the share of its wanted CPU time taken, then its interruptions and wake-up delays.
fn thread_tables(runs: &[(String, RunFile)]) -> String {
    let mut names: Vec<&str> = Vec::new();
    for (_, r) in runs {
        for t in &r.threads {
            if !names.contains(&t.name.as_str()) {
                names.push(&t.name);
            }
        }
    }
    let mut s = String::new();
    if names.is_empty() {
        return s;
    }
    s.push_str("\n## Watched threads: time taken of the time they wanted a CPU\n\n| thread |");
    for (i, (_, r)) in runs.iter().enumerate() {
        let _ = write!(s, " {} |", label(r, i));
    }
    s.push_str("\n|---|");
    s.push_str(&"---:|".repeat(runs.len()));
    s.push('\n');
    for name in &names {
        let _ = write!(s, "| {name} |");
        for (_, r) in runs {
            let cell = match r.threads.iter().find(|t| t.name == *name) {
                Some(t) => match t.share {
                    Some(sh) => format!(" {} ({:.3}%) |", fmt_ns(t.taken_ns), sh * 100.0),
                    None => format!(" {} |", fmt_ns(t.taken_ns)),
                },
                None => " – |".to_string(),
            };
            s.push_str(&cell);
        }
        s.push('\n');
    }
    for name in &names {
        fn pick<'r>(r: &'r RunFile, name: &str, wake: bool) -> Option<&'r Summary> {
            let t = r.threads.iter().find(|t| t.name == name)?;
            let d = if wake { &t.wakeups } else { &t.interruptions };
            d.summary.as_ref()
        }
        s.push_str(&percentile_table(
            &format!("{name} interruptions"),
            runs,
            &|r| pick(r, name, false),
        ));
        if runs.iter().any(|(_, r)| pick(r, name, true).is_some()) {
            s.push_str(&percentile_table(
                &format!("{name} wake-up delays"),
                runs,
                &|r| pick(r, name, true),
            ));
        }
    }
    s
}

/// One chart, one curve per run: the first consumer's transit latency, or in watch files the
/// first watched thread's interruptions.
pub fn chart(runs: &[(String, RunFile)]) -> String {
    let names: Vec<String> = runs
        .iter()
        .enumerate()
        .map(|(i, (_, r))| label(r, i))
        .collect();
    let series: Vec<Series> = runs
        .iter()
        .zip(&names)
        .filter_map(|((_, r), n)| {
            let curve = match r.histograms.first() {
                Some(h) => &h.transit.curve,
                None => &r.threads.first()?.interruptions.summary.as_ref()?.curve,
            };
            Some(Series {
                name: n,
                points: curve,
            })
        })
        .collect();
    let watch = runs.first().is_some_and(|(_, r)| r.histograms.is_empty());
    percentile_chart(
        if watch {
            "interruptions by percentile (first watched thread)"
        } else {
            "transit latency by percentile"
        },
        &series,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watch_files_compare_thread_by_thread_by_name() {
        use crate::report::runfile::{DelayStats, Mode, ThreadEntry};
        let watch = |tid: u32, p99: u64, taken: u64| {
            let mut r = crate::report::runfile::tests::sample();
            r.mode = Mode::Watch;
            r.histograms.clear();
            let mut summary = crate::report::runfile::tests::sample().histograms[0]
                .transit
                .clone();
            summary.percentiles.insert("99".into(), p99);
            summary.max = p99;
            r.threads = vec![ThreadEntry {
                tid,
                name: "md-spin".into(),
                taken_ns: taken,
                wanted_ns: Some(1_000_000),
                share: Some(taken as f64 / 1e6),
                interruptions: DelayStats {
                    count: 3,
                    total_ns: taken,
                    max_ns: p99,
                    summary: Some(summary),
                },
                ..Default::default()
            }];
            r
        };
        let runs = vec![
            ("a.json".to_string(), watch(41, 1_000, 5_000)),
            ("b.json".to_string(), watch(97, 3_000, 10_000)),
        ];
        let text = render(&runs);
        assert!(
            text.contains("| md-spin | 5.0µs (0.500%) | 10.0µs (1.000%) |"),
            "{text}"
        );
        assert!(text.contains("## md-spin interruptions"), "{text}");
        assert!(text.contains("3000 (3.00×)"), "{text}");
        assert!(!text.contains("wake-up delays"), "{text}");
        assert!(chart(&runs).contains("first watched thread"));
        assert!(
            text.contains("at least 1% of the interruption time a watch saw)")
                && !text.contains("stall time"),
            "{text}"
        );
    }
    fn culprit(name: &str, total_ns: u64) -> crate::report::runfile::CulpritEntry {
        crate::report::runfile::tests::culprit(crate::model::CulpritClass::Task, name, total_ns)
    }

    #[test]
    fn culprit_times_saturate_instead_of_wrapping() {
        // `spin[1]` and `spin[2]` are one identity; their times wrapped to 0 and the
        // culprit read as gone from the second run.
        let mut a = crate::report::runfile::tests::sample();
        a.stall_summary.total_ns = 100;
        a.culprits = vec![culprit("spin[1]", 100)];
        let mut b = a.clone();
        let half = u64::MAX / 2 + 1;
        b.culprits = vec![culprit("spin[1]", half), culprit("spin[2]", half)];
        assert_eq!(culprit_times(&b).values().collect::<Vec<_>>(), [&u64::MAX]);
        let text = render(&[("a".into(), a), ("b".into(), b)]);
        assert!(text.contains("the same culprits in every run"), "{text}");
    }

    #[test]
    fn a_moved_floor_is_said_and_a_steady_one_is_not() {
        let floor = |p50_ns| crate::report::runfile::Floor {
            from_cpu: 1,
            to_cpu: 3,
            min_ns: p50_ns - 5,
            p50_ns,
            p99_ns: p50_ns + 20,
            rounds: 50_000,
        };
        let mut a = crate::report::runfile::tests::sample();
        a.run.floor = Some(floor(58));
        let mut b = a.clone();
        b.run.floor = Some(floor(62));
        let steady = render(&[("a".into(), a.clone()), ("b".into(), b.clone())]);
        assert!(steady.contains("| #1 x | 1 → 3 | 58ns |"), "{steady}");
        assert!(!steady.contains("floor moved"), "{steady}");
        b.run.floor = Some(floor(152));
        let moved = render(&[("a".into(), a), ("b".into(), b)]);
        assert!(
            moved.contains("**The floor moved between runs**: #1 x 58ns vs #2 x 152ns (×2.62)"),
            "{moved}"
        );
    }
}
