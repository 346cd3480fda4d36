//! A watch once it stopped: each thread's `.hgrm` files and the run file (mode `watch`, a
//! `threads` list), for the one finish.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::source::{Watching, WORDS};
use super::{ThreadIds, WatchPlan};
use crate::attribution::watch::{AccountId, InterruptionKind, ThreadAccount, JOIN_NS};
use crate::model::{Cpu, Nanos, ThreadRole};
use crate::probe::ProbeSummary;
use crate::report::advice::{Machine, Tracer};
use crate::report::build::{culprit_entry, probe_info, stall_entry};
use crate::report::files::{OutputDir, OutputError};
use crate::report::hgrm;
use crate::report::metrics::MetricsFile;
use crate::report::runfile::{
    Coverage, DelayStats, KindTotal, Lost, Mode, Overhead, RunFile, RunInfo, Settings, StallEntry,
    ThreadEntry, WatchInfo, WatchedContainer, SCHEMA,
};
use crate::session::record::EndReason;
use crate::session::source::{StoppedSource, Words};
use crate::summary::Summary;

/// Culprits listed per thread.
const THREAD_CULPRITS: usize = 10;

/// Processes listed per grouped culprit row of a thread (the run-wide rows list
/// `ranking::PROCESSES_LISTED`): a process may have tens of thousands of threads, each with
/// its rows, and the run file must stay within what `report` reads (`input::RUN_FILE`).
const THREAD_PROCESSES_LISTED: usize = 5;

/// A watch once its probes stopped and every interruption was decided.
pub(super) struct WatchStopped {
    pub(super) plan: WatchPlan,
    pub(super) s: Watching,
    pub(super) summary: ProbeSummary,
    pub(super) ended: EndReason,
    pub(super) stop_ns: Nanos,
    pub(super) metrics_failed: Option<String>,
}

impl StoppedSource for WatchStopped {
    fn words(&self) -> Words {
        WORDS
    }

    fn colour(&self) -> bool {
        self.plan.colour
    }

    fn output(&self) -> &OutputDir {
        &self.plan.output
    }

    fn stem(&self) -> &str {
        &self.s.stem
    }

    /// Each thread's `.hgrm` files first: the run file lists them.
    fn run_file(&mut self, error: &mut Option<OutputError>) -> (RunFile, Vec<PathBuf>) {
        let files = write_hgrms(&self.plan, &self.s, error);
        let run = run_file(self, &files);
        let paths = files.into_values().flatten().map(PathBuf::from).collect();
        (run, paths)
    }

    fn interval_log(&self) -> (&Path, Option<&std::io::Error>) {
        (&self.s.hlog_path, self.s.hlog_error.as_ref())
    }

    fn metrics(&self) -> (Option<&MetricsFile>, Option<&str>) {
        (self.s.metrics.as_ref(), self.metrics_failed.as_deref())
    }
}

/// Each thread's two .hgrm files (interruptions, wake-up delays), by account. Two threads
/// of one name and id (one exited, another took its id) get a file each: the later one's
/// name ends in `-2` (`-3`, …).
fn write_hgrms(
    plan: &WatchPlan,
    s: &Watching,
    error: &mut Option<OutputError>,
) -> BTreeMap<AccountId, Vec<String>> {
    let mut out = BTreeMap::new();
    let mut taken = std::collections::HashSet::new();
    for t in s.book.threads() {
        let mut names = Vec::new();
        let mut base = format!("{}.{}-{}", s.stem, safe(&t.name), t.ns_tid);
        let mut n = 1;
        while !taken.insert(base.clone()) {
            n += 1;
            base = format!("{}.{}-{}-{n}", s.stem, safe(&t.name), t.ns_tid);
        }
        for (kind, h) in [("interruptions", &t.interruptions), ("wakeups", &t.wakeups)] {
            if h.is_empty() {
                continue;
            }
            let name = format!("{base}.{kind}.hgrm");
            match plan
                .output
                .write(&name, hgrm::percentile_distribution(h, 1000.0).as_bytes())
            {
                Ok(p) => names.push(p.display().to_string()),
                Err(e) => {
                    error.get_or_insert(e);
                }
            }
        }
        out.insert(t.id, names);
    }
    out
}

/// A thread name as a file name part.
fn safe(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() {
        "thread".into()
    } else {
        s
    }
}

fn delay_stats(h: &hdrhistogram::Histogram<u64>, count: u64, total: Nanos) -> DelayStats {
    DelayStats {
        count,
        total_ns: total,
        max_ns: if h.is_empty() { 0 } else { h.max() },
        summary: (!h.is_empty()).then(|| Summary::of(h)),
    }
}

fn thread_entry(
    t: &ThreadAccount,
    ids: Option<&ThreadIds>,
    machine: &Machine,
    record_from: Nanos,
    files: Vec<String>,
) -> ThreadEntry {
    let kinds = [
        (InterruptionKind::OnCpu, "on_cpu"),
        (InterruptionKind::Preempted, "preempted"),
        (InterruptionKind::WakeupDelay, "wakeup_delay"),
        (InterruptionKind::Hypervisor, "hypervisor"),
    ];
    let (wake_n, wake_ns) = t.kind(InterruptionKind::WakeupDelay);
    let (int_n, int_ns) = kinds
        .iter()
        .filter(|(k, _)| *k != InterruptionKind::WakeupDelay)
        .map(|(k, _)| t.kind(*k))
        .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    let sched = ids.and_then(|i| Some((i.first?, i.last?)));
    let wanted = sched.map(|(a, b)| (b.0 + b.1).saturating_sub(a.0 + a.1));
    let taken = t.taken_ns();
    // A thread's own culprits are advised about the CPUs it ran on.
    let own = Machine {
        measured: t.cpus.clone(),
        ..machine.clone()
    };
    let machine = if t.cpus.is_empty() { machine } else { &own };
    ThreadEntry {
        tid: ids.map_or(t.ns_tid, |i| i.tid),
        pid: ids.map_or(t.ns_pid, |i| i.pid),
        kernel_tid: t.tid,
        name: t.name.clone(),
        cpus: t.cpus.clone(),
        created_ns: (t.first_seen_ns > record_from).then_some(t.first_seen_ns),
        exited_ns: t.exited_ns,
        wanted_ns: wanted,
        on_cpu_ns: sched.map(|(a, b)| b.0.saturating_sub(a.0)),
        taken_ns: taken,
        share: wanted
            .filter(|&w| w > 0)
            .map(|w| (taken as f64 / w as f64).min(1.0)),
        interruptions: delay_stats(&t.interruptions, int_n, int_ns),
        wakeups: delay_stats(&t.wakeups, wake_n, wake_ns),
        kinds: kinds
            .iter()
            .map(|&(k, name)| {
                let (count, total_ns) = t.kind(k);
                KindTotal {
                    kind: name.into(),
                    count,
                    total_ns,
                }
            })
            .collect(),
        culprits: t
            .ranking
            .ranked()
            .into_iter()
            .take(THREAD_CULPRITS)
            .map(|mut c| {
                if let Some(p) = &mut c.processes {
                    p.each.truncate(THREAD_PROCESSES_LISTED);
                }
                culprit_entry(c, machine)
            })
            .collect(),
        files,
    }
}

fn run_file(w: &WatchStopped, files: &BTreeMap<AccountId, Vec<String>>) -> RunFile {
    let (plan, s, p, stop_ns) = (&w.plan, &w.s, &w.summary, w.stop_ns);
    let online = crate::system::cpus::Topology::read().online;
    // Advice is about the CPUs the watched threads ran on, not every CPU watched.
    let ran_on: std::collections::BTreeSet<Cpu> = s
        .book
        .threads()
        .into_iter()
        .flat_map(|t| t.cpus.iter().copied())
        .collect();
    let machine = Machine {
        online,
        measured: if ran_on.is_empty() {
            plan.cpus.clone()
        } else {
            ran_on.into_iter().collect()
        },
        virtual_machine: crate::system::is_virtual_machine(),
        tracer: Tracer::Watch,
    };
    let probes = probe_info(&s.attach, p, &s.attr);
    let coverage = Coverage::of(
        machine.virtual_machine,
        probes.steal_clock,
        watched_cpus(&s.book),
    );
    RunFile {
        schema: SCHEMA.into(),
        mode: Mode::Watch,
        run: RunInfo {
            label: plan.label.clone(),
            cpus: plan.cpus.clone(),
            producer_cpu: 0,
            consumer_cpus: Vec::new(),
            start_unix_ns: s.start_unix,
            record_from_ns: s.record_from,
            duration_ns: stop_ns.saturating_sub(s.record_from),
            kernel: crate::system::kernel_release(),
            host: crate::system::host_name(),
            ended: w.ended.ended(),
            end_reason: w.ended.reason().to_string(),
            settings: Settings {
                pinned: false,
                interval_ns: 0,
                warmup_ns: 0,
                planned_duration_ns: plan.duration_ns.unwrap_or(0),
                stall_threshold_ns: JOIN_NS,
                spike_threshold_ns: 0,
                stall_threshold_auto: false,
                probes: true,
                consumer_fifo: None,
            },
            floor: None,
        },
        watch: Some(WatchInfo {
            target: plan.target.describe(),
            pid: s.watched.follow.map(|f| f.1),
            join_ns: JOIN_NS,
            coverage: Some(coverage),
            cgroup: plan.target.cgroup_path().map(str::to_string),
            container: plan.target.container().map(|c| WatchedContainer {
                name: c.name.clone(),
                runtime: c.runtime.clone(),
                id: c.id.clone(),
            }),
        }),
        threads: s
            .book
            .threads()
            .into_iter()
            .map(|t| {
                let f = files.get(&t.id).cloned().unwrap_or_default();
                thread_entry(t, s.watched.ids.get(&t.id), &machine, s.record_from, f)
            })
            .collect(),
        histograms: Vec::new(),
        stall_summary: s.attr.book.totals().into(),
        stalls: worst_stalls(s),
        culprits: s
            .attr
            .ranking
            .ranked()
            .into_iter()
            .map(|c| culprit_entry(c, &machine))
            .collect(),
        spike_count: 0,
        spikes: Vec::new(),
        lost: Lost {
            ring_buffer_drops: p.total_drops(),
            threads_not_watched: s.watched.left_out + p.watch_map_full,
            ..Lost::default()
        },
        probes: Some(probes),
        overhead: overhead(s, p),
        config: s.config.clone(),
    }
}

/// The worst interruptions, each named by the thread that had its kernel tid when it began
/// (another may have it since) and by its kind.
fn worst_stalls(s: &Watching) -> Vec<StallEntry> {
    s.attr
        .book
        .worst()
        .into_iter()
        .map(|v| {
            let mut e = stall_entry(v, true);
            if let ThreadRole::Watched(ktid) = v.stall.thread {
                let held = s.book.holder(ktid, v.stall.start_ns);
                let t = held.map(|id| s.book.thread(id));
                let kind = s.book.kind_of(&v.stall).map_or("", |k| k.as_str());
                e.thread = format!(
                    "{}[{}]{}",
                    t.map_or("thread", |t| t.name.as_str()),
                    t.map_or(ktid, |t| t.ns_tid),
                    if kind.is_empty() {
                        String::new()
                    } else {
                        format!(" ({kind})")
                    }
                );
            }
            e
        })
        .collect()
}

/// Every CPU a watched thread ran on, in order.
fn watched_cpus(book: &crate::attribution::watch::WatchBook) -> Vec<crate::model::Cpu> {
    let mut cpus: Vec<_> = book
        .threads()
        .into_iter()
        .flat_map(|t| t.cpus.iter().copied())
        .collect();
    cpus.sort_unstable();
    cpus.dedup();
    cpus
}

fn overhead(s: &Watching, p: &ProbeSummary) -> Option<Overhead> {
    let (a, b) = (s.cpu_first?, s.cpu_last?);
    (b.0 > a.0).then(|| Overhead {
        window_ns: b.0 - a.0,
        tracer_cpu_ns: b.1.saturating_sub(a.1),
        bpf_run_ns: p.costs.iter().map(|c| c.run_time_ns).sum(),
        bpf_events: p.costs.iter().map(|c| c.run_count).sum(),
        longest_self: crate::report::build::longest_self(&s.attr),
        // The watcher keeps off the watched CPUs where it can: no budget.
        collector_budget: None,
        held_back: 0,
        after_cpu_ns: 0,
        at_end: false,
        decided_in_run: 0,
        files_cpu_ns: 0,
    })
}
