//! `jitterscope watch`: the same explanations for the user's own threads. The stall source is
//! the kernel itself — the probes, in watch mode, report what interrupted the watched threads
//! (`attribution::watch`); the engine, the ranking, the stall book, the live view and the run
//! file are the run's. Phases as a run's: start (target, probes, command) → record → finish.

mod finish;
pub mod target;

use std::io::Write;
use std::path::Path;
use std::sync::mpsc::Receiver;
use std::time::Duration;

use anyhow::{Context, Result};

use super::Console;
use crate::attribution::run::RunAttribution;
use crate::attribution::watch::WatchBook;
use crate::live::frontend::{Frontend, LiveView, PlainLines, Silent};
use crate::live::model::ConsumerView;
use crate::live::LiveModel;
use crate::model::{Cpu, Ended, Nanos};
use crate::platform::clock::{monotonic_ns, unix_ns};
use crate::platform::pace::Pacer;
use crate::probe::decode::Record;
use crate::probe::watch::TaskRow;
use crate::probe::{ProbeBatch, ProbeConfig, ProbeSession};
use crate::report::files::{file_stem, utc_stamp, OutputDir};
use crate::report::hlog::HlogWriter;
use crate::report::metrics::{Exposure, MetricsFile, Mode, ThreadSeries};
use crate::signals;
use crate::summary::Summary;
use target::{Found, Target, TargetError};

/// How far behind "now" interruptions are decided (records reach user space within a couple
/// of drain intervals).
const DECISION_LAG_NS: Nanos = 500_000_000;
/// One .hlog interval per thread and the live view's refresh.
const INTERVAL_NS: Nanos = 1_000_000_000;

/// Everything a watch needs, validated.
#[derive(Debug, Clone)]
pub struct WatchPlan {
    pub target: Target,
    /// The CPUs that count (every online CPU by default).
    pub cpus: Vec<Cpu>,
    /// None: until Ctrl-C or the target's exit.
    pub duration_ns: Option<Nanos>,
    pub label: String,
    pub output: OutputDir,
    pub keep_stalls: usize,
    pub progress: bool,
    pub tui: bool,
    pub colour: bool,
    pub ringbuf_bytes: u32,
    /// Where /proc is (tests give a fake one for target checks).
    pub proc_root: std::path::PathBuf,
    /// The metrics file for node_exporter, if asked for.
    pub metrics: Option<crate::report::metrics::MetricsPlan>,
}

/// Where the watch's files went.
#[derive(Debug, Clone)]
pub struct WatchOutcome {
    pub json_path: std::path::PathBuf,
    pub ended: Ended,
}

/// Checks the target against /proc: bad input is a usage error, before anything is loaded.
pub fn check_target(plan: &WatchPlan) -> Result<Vec<Found>, TargetError> {
    target::check(&plan.target, &plan.proc_root)
}

/// What is being watched, as it goes.
pub(super) struct Watched {
    /// The process followed for new threads (kernel tgid), and its id as the user sees it.
    follow: Option<(u32, u32)>,
    child: Option<std::process::Child>,
    /// Kernel tid → (pid, tid) as the user sees them, and the last schedstat read.
    pub(super) ids: std::collections::BTreeMap<u32, ThreadIds>,
}

#[derive(Debug, Clone, Copy, Default)]
pub(super) struct ThreadIds {
    pub(super) pid: u32,
    pub(super) tid: u32,
    /// schedstat at first sight and last read: (on CPU, waiting) ns.
    pub(super) first: Option<(Nanos, Nanos)>,
    pub(super) last: Option<(Nanos, Nanos)>,
    pub(super) exited: bool,
}

pub fn watch(plan: WatchPlan, found: Vec<Found>, out: &mut dyn Write) -> Result<WatchOutcome> {
    signals::install();
    let mut console = Console { out, error: None };
    let result = watch_phases(plan, found, &mut console);
    if let Some(e) = console.error {
        eprintln!("note: standard output went away during the watch ({e}); the report is in the watch's files");
    }
    result
}

/// The session's state while recording.
pub(super) struct Session {
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
}

fn watch_phases(plan: WatchPlan, found: Vec<Found>, out: &mut Console) -> Result<WatchOutcome> {
    let mut s = start(&plan, found, out)?;
    let mut frontend = frontend_for(&plan, s.record_from, out);
    let ended = record(&plan, &mut s, frontend.as_mut(), out)?;
    finish::finish(&plan, s, ended, out)
}

fn frontend_for(plan: &WatchPlan, from: Nanos, out: &mut Console) -> Box<dyn Frontend> {
    let end = plan.duration_ns.map_or(Nanos::MAX, |d| from + d);
    if plan.tui {
        match LiveView::enter(500_000_000, PlainLines::watch(from, end)) {
            Ok(view) => return Box::new(view),
            Err(e) => {
                let _ = writeln!(
                    out,
                    "note: cannot start the live view ({e}); plain output instead"
                );
            }
        }
    }
    if plan.progress {
        Box::new(PlainLines::watch(from, end))
    } else {
        Box::new(Silent)
    }
}

/// Starts the probes in watch mode, the command if there is one, and watches the target's
/// threads in the kernel's numbering.
fn start(plan: &WatchPlan, found: Vec<Found>, out: &mut Console) -> Result<Session> {
    // jitterscope's own threads (this one, and the probe drain it starts) keep off the
    // CPUs that count, when there are others.
    let housekeeping = crate::system::cpus::Topology::read().housekeeping(&plan.cpus);
    if !housekeeping.is_empty() {
        crate::platform::affinity::set_current_thread_cpus(&housekeeping)
            .context("cannot move jitterscope's watch thread off the watched CPUs")?;
    }
    let mut pc = ProbeConfig::new(plan.cpus.clone());
    pc.drain_cpus = housekeeping;
    pc.ringbuf_bytes = plan.ringbuf_bytes;
    pc.watch = true;
    let (session, rx) = ProbeSession::start(pc).context("cannot start the kernel probes")?;
    super::check_startup()?;
    let mut watched = Watched {
        follow: None,
        child: None,
        ids: Default::default(),
    };
    let mut found = found;
    if let Target::Command(argv) = &plan.target {
        let child = spawn(argv)?;
        found.push(Found {
            pid: child.id(),
            tid: child.id(),
            comm: argv[0].clone(),
        });
        watched.child = Some(child);
    }
    let rows = session.list_tasks()?;
    let mut book = WatchBook::new(plan.keep_stalls);
    let now = monotonic_ns();
    let mine: Vec<&TaskRow> = target::in_kernel(&found, &rows);
    if mine.is_empty() {
        anyhow::bail!(
            "{}: the threads found in /proc are gone (the target exited while the probes loaded)",
            plan.target.describe()
        );
    }
    if matches!(plan.target, Target::Pid(_) | Target::Command(_)) {
        watched.follow = Some((mine[0].kernel_tgid, mine[0].pid));
    }
    add_rows(&session, &mut watched, &mut book, &mine, plan, now)?;
    // Threads created between the list and the follow flag: list once more.
    if let Some((tgid, _)) = watched.follow {
        let again = session.list_tasks()?;
        let late: Vec<&TaskRow> = again
            .iter()
            .filter(|r| r.kernel_tgid == tgid && !watched.ids.contains_key(&r.kernel_tid))
            .collect();
        add_rows(&session, &mut watched, &mut book, &late, plan, now)?;
    }
    banner(plan, &watched, &book, out)?;
    let start_unix = unix_ns() as u64;
    let stem = format!("{}-{}", file_stem(&plan.label), utc_stamp(start_unix));
    let (hlog_path, file) = plan.output.create_stream(&format!("{stem}.hlog"))?;
    let hlog = HlogWriter::new(
        file,
        start_unix,
        &format!(
            "jitterscope {} watch '{}' {}",
            env!("CARGO_PKG_VERSION"),
            plan.label,
            plan.target.describe()
        ),
        "values in nanoseconds; tags name <thread name>[<tid>].<interruptions|wakeups>",
    )
    .with_context(|| format!("cannot write {}", hlog_path.display()))?;
    let steal_clock = session.steal_clock();
    for a in session.attach_report() {
        if let crate::probe::AttachState::Unavailable(why) = &a.state {
            writeln!(out, "note: {} is not traced here: {why}", a.tracepoint)?;
        }
    }
    let mut attr = RunAttribution::new(0, Vec::new(), plan.keep_stalls, true, steal_clock, now);
    if plan.metrics.is_some() {
        attr.keep_theft();
    }
    Ok(Session {
        attach: session.attach_report().to_vec(),
        probe: Some((session, rx)),
        attr,
        book,
        watched,
        record_from: now,
        start_unix,
        stem,
        hlog,
        hlog_path,
        hlog_error: None,
        cpu_first: None,
        cpu_last: None,
        stop_ns: Nanos::MAX,
        metrics: plan
            .metrics
            .clone()
            .map(|m| MetricsFile::new(m, Mode::Watch)),
    })
}

/// Rewrites the metrics file from the attribution and the threads' histograms.
pub(super) fn rewrite_metrics(plan: &WatchPlan, s: &mut Session, now: Nanos) -> Result<(), String> {
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
            .threads
            .values()
            .map(|t| ThreadSeries {
                tid: t.tid,
                name: &t.name,
                interruptions: &t.interruptions,
            })
            .collect(),
    };
    file.write(&e)
}

/// Starts the command to watch; a command that cannot be started is a usage error.
fn spawn(argv: &[String]) -> Result<std::process::Child> {
    std::process::Command::new(&argv[0])
        .args(&argv[1..])
        .spawn()
        .map_err(|e| {
            TargetError(format!(
                "-- {}: cannot start it: {e} (is it on PATH and executable?)",
                argv[0]
            ))
            .into()
        })
}

fn add_rows(
    session: &ProbeSession,
    watched: &mut Watched,
    book: &mut WatchBook,
    rows: &[&TaskRow],
    plan: &WatchPlan,
    now: Nanos,
) -> Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let tids: Vec<u32> = rows.iter().map(|r| r.kernel_tid).collect();
    session.watch_threads(&tids, watched.follow.map(|f| f.0))?;
    for r in rows {
        book.add_thread(r.kernel_tid, r.tid, r.pid, &r.comm, now);
        let ss = target::schedstat(&plan.proc_root, r.pid, r.tid);
        watched.ids.insert(
            r.kernel_tid,
            ThreadIds {
                pid: r.pid,
                tid: r.tid,
                first: ss,
                last: ss,
                exited: false,
            },
        );
    }
    Ok(())
}

fn banner(plan: &WatchPlan, w: &Watched, book: &WatchBook, out: &mut Console) -> Result<()> {
    let names: Vec<String> = book
        .threads
        .values()
        .map(|t| format!("{}[{}]", t.name, t.ns_tid))
        .collect();
    writeln!(
        out,
        "jitterscope {} watch {}: {} thread{} ({}){}; CPUs {}; {}",
        env!("CARGO_PKG_VERSION"),
        plan.target.describe(),
        names.len(),
        if names.len() == 1 { "" } else { "s" },
        if names.len() > 8 {
            format!("{}, …", names[..8].join(", "))
        } else {
            names.join(", ")
        },
        match w.follow {
            Some((_, pid)) => format!(", and the threads process {pid} creates"),
            None => String::new(),
        },
        crate::system::cpus::format_list(&plan.cpus),
        match plan.duration_ns {
            Some(d) => format!("for {:.0} s", d as f64 / 1e9),
            None => "until Ctrl-C or the target exits".to_string(),
        }
    )?;
    Ok(())
}

/// The loop: drain, attribute, log intervals, show; ends on the duration, a signal, the
/// view's quit, or the target's exit.
fn record(
    plan: &WatchPlan,
    s: &mut Session,
    frontend: &mut dyn Frontend,
    out: &mut Console,
) -> Result<(Ended, String)> {
    let mut live = LiveModel {
        label: plan.label.clone(),
        kernel: crate::system::kernel_release(),
        planned_ns: plan.duration_ns.unwrap_or(0),
        probes: true,
        watch: true,
        ..LiveModel::default()
    };
    let mut next_interval = s.record_from + INTERVAL_NS;
    let ended = loop {
        std::thread::sleep(Duration::from_millis(100));
        turn(plan, s);
        let now = monotonic_ns();
        if s.metrics.as_ref().is_some_and(|m| m.due(now)) {
            if let Err(why) = rewrite_metrics(plan, s, now) {
                if s.metrics.as_ref().is_some_and(|m| m.failures == 1) && !plan.tui {
                    writeln!(out, "WARNING: the metrics file was not rewritten: {why}; trying again every interval")?;
                }
            }
        }
        if now >= next_interval {
            write_intervals(s, next_interval - INTERVAL_NS, now);
            next_interval = now + INTERVAL_NS;
        }
        if let Some(why) = end_asked(plan, s, now) {
            frontend.close();
            if why.0 != Ended::Completed {
                writeln!(out, "{}", why.1)?;
            }
            break why;
        }
        if frontend.due(now) {
            update_live(&mut live, s, now);
            let asked = frontend.show(now, &live, out);
            if asked.quit {
                frontend.close();
                writeln!(out, "stopped from the live view, writing what was seen")?;
                break (Ended::Interrupted, "stopped from the live view".into());
            }
        }
    };
    frontend.close();
    Ok(ended)
}

/// Why the watch ends now, if it does: (how, why in words).
fn end_asked(plan: &WatchPlan, s: &mut Session, now: Nanos) -> Option<(Ended, String)> {
    if let Some(sig) = signals::received() {
        let name = signals::name(sig);
        return Some((
            Ended::Interrupted,
            format!("{name}: stopping, writing what was seen"),
        ));
    }
    if plan
        .duration_ns
        .is_some_and(|d| now >= s.record_from.saturating_add(d))
    {
        return Some((Ended::Completed, String::new()));
    }
    if let Some(child) = &mut s.watched.child {
        if let Ok(Some(status)) = child.try_wait() {
            return Some((
                Ended::TargetExited,
                format!("the command exited ({status}); writing what was seen"),
            ));
        }
    }
    let all_gone = !s.watched.ids.is_empty() && s.watched.ids.values().all(|t| t.exited);
    all_gone.then(|| {
        (
            Ended::TargetExited,
            "every watched thread exited; writing what was seen".to_string(),
        )
    })
}

/// One turn: the probes' records into the book and the engine, decisions, schedstat.
fn turn(plan: &WatchPlan, s: &mut Session) {
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
    let watermark = now.saturating_sub(DECISION_LAG_NS);
    s.book.close_before(&mut s.attr, watermark);
    let book = &mut s.book;
    s.attr.decide_with(watermark, &mut |v| book.decided(v));
    for ids in s.watched.ids.values_mut() {
        if !ids.exited {
            if let Some(ss) = target::schedstat(&plan.proc_root, ids.pid, ids.tid) {
                ids.first.get_or_insert(ss);
                ids.last = Some(ss);
            }
        }
    }
    let own = crate::system::cputime::process_cpu_ns();
    s.cpu_first.get_or_insert((now, own));
    s.cpu_last = Some((now, own));
}

/// The records of one drain; after the watch's end (`s.stop_ns`), only what began before it
/// (detaching the probes patches kernel text, which interrupts every CPU: not the watched
/// threads' noise).
pub(super) fn take(plan: &WatchPlan, s: &mut Session, batch: &mut Vec<Record>) {
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
            Record::Interruption(i) => s.book.interruption(&mut s.attr, i),
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

fn thread_event(plan: &WatchPlan, s: &mut Session, e: &crate::model::ThreadEvent) {
    let pid = s.watched.follow.map_or(0, |f| f.1);
    s.book.thread_event(e, pid);
    match e.created_by {
        Some(_) => {
            let ss = target::schedstat(&plan.proc_root, pid, e.ns_tid);
            s.watched.ids.entry(e.tid).or_insert(ThreadIds {
                pid,
                tid: e.ns_tid,
                first: ss,
                last: ss,
                exited: false,
            });
        }
        None => {
            if let Some(ids) = s.watched.ids.get_mut(&e.tid) {
                ids.exited = true;
            }
        }
    }
}

/// Each thread's interval histograms into the .hlog, then reset.
fn write_intervals(s: &mut Session, from: Nanos, now: Nanos) {
    let base = s.record_from;
    for t in s.book.threads.values_mut() {
        if t.interval_max.len() == crate::live::model::HISTORY {
            t.interval_max.pop_front();
        }
        let h = &t.interval_interruptions;
        t.interval_max
            .push_back(if h.is_empty() { 0 } else { h.max() });
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
            h.reset();
        }
    }
    let _ = s.hlog.flush();
}

/// The live model: threads instead of consumers.
fn update_live(live: &mut LiveModel, s: &Session, now: Nanos) {
    live.elapsed_ns = now.saturating_sub(s.record_from);
    live.stalls = s.attr.book.count();
    live.lost = s.attr.lost_records;
    live.consumers = s
        .book
        .threads
        .values()
        .map(|t| ConsumerView {
            name: format!("{}[{}]", t.name, t.ns_tid),
            cpu: t.cpus.last().copied().unwrap_or(0),
            interval: None,
            total: (!t.interruptions.is_empty()).then(|| Summary::brief(&t.interruptions)),
            max_history: t.interval_max.clone(),
        })
        .collect();
    live.culprits = super::record::culprit_rows(&s.attr, s.record_from, usize::MAX, &mut || {});
}

/// The path of /proc this process sees.
pub fn default_proc() -> &'static Path {
    Path::new("/proc")
}
