//! The start of a watch: the probes in watch mode, the command if there is one, the target's
//! threads in the kernel's numbering, the banner and the interval log.

use std::io::Write;

use anyhow::{Context, Result};

use super::source::Watching;
use super::target::{self, Found, Target, TargetError};
use super::{ThreadIds, WatchPlan, Watched};
use crate::attribution::run::RunAttribution;
use crate::attribution::watch::WatchBook;
use crate::model::{Cpu, Nanos};
use crate::platform::clock::{monotonic_ns, unix_ns};
use crate::probe::watch::TaskRow;
use crate::probe::{ProbeConfig, ProbeSession};
use crate::report::files::{file_stem, utc_stamp};
use crate::report::hlog::HlogWriter;
use crate::report::metrics::{MetricsFile, Mode};
use crate::session::Console;
use crate::system::config::{Configured, Root};

/// Starts the probes in watch mode, the command if there is one, and watches the target's
/// threads in the kernel's numbering.
pub(super) fn start(plan: &WatchPlan, found: Vec<Found>, out: &mut Console) -> Result<Watching> {
    // jitterscope's own threads (this one, and the probe drain it starts) keep off the
    // CPUs that count, when there are others.
    let housekeeping = crate::system::cpus::Topology::read().housekeeping(&plan.cpus);
    // The CPUs a command started here gets: the ones jitterscope itself was started with.
    let users_cpus = crate::platform::affinity::allowed_cpus()
        .context("cannot read the CPUs jitterscope may run on (sched_getaffinity)")?;
    if !housekeeping.is_empty() {
        crate::platform::affinity::set_current_thread_cpus(&housekeeping)
            .context("cannot move jitterscope's watch thread off the watched CPUs")?;
    }
    // Read now, off the watched CPUs and before anything records: it walks all of /proc.
    let config = Configured::read(&Root::live(), &plan.cpus);
    let pc = probe_config(plan, housekeeping, &found);
    let (session, rx) = ProbeSession::start(pc).context("cannot start the kernel probes")?;
    crate::session::check_startup()?;
    let mut watched = Watched {
        follow: None,
        cgroup: None,
        child: None,
        ids: Default::default(),
        exited: 0,
        left_out: 0,
    };
    let mut found = found;
    if plan.target.cgroup_path().is_some() {
        // The kernel filter first, then the threads already there: none falls between.
        let cg = target::cgroup_of(&plan.target)?;
        session.watch_cgroup(cg.id, cg.level)?;
        found = target::threads_in(&plan.proc_root, &cg.dir);
        watched.cgroup = Some(cg.path);
    }
    if let Target::Command(argv) = &plan.target {
        let child = spawn(argv, &users_cpus)?;
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
    // A cgroup may be empty at the start: the threads that join it later are watched.
    if mine.is_empty() && watched.cgroup.is_none() {
        anyhow::bail!(
            "{}: the threads found in /proc are gone (the target exited while the probes loaded)",
            plan.target.describe()
        );
    }
    if matches!(plan.target, Target::Pid(_) | Target::Command(_)) {
        watched.follow = Some((mine[0].kernel_tgid, mine[0].pid));
    }
    add_rows(&session, &mut watched, &mut book, &mine, plan, now, out)?;
    // Threads created between the list and the follow flag: list once more.
    if let Some((tgid, _)) = watched.follow {
        let again = session.list_tasks()?;
        let late: Vec<&TaskRow> = again
            .iter()
            .filter(|r| r.kernel_tgid == tgid && book.current(r.kernel_tid).is_none())
            .collect();
        add_rows(&session, &mut watched, &mut book, &late, plan, now, out)?;
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
    let containers = super::super::containers::ContainerTags::new(
        plan.proc_root.clone(),
        session.kernel_pid() == std::process::id(),
    );
    Ok(Watching {
        attach: session.attach_report().to_vec(),
        containers,
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
        // The watch's own CPU is read where it begins and where it stops: nothing between
        // needs it (the metrics file reads its own).
        cpu_first: Some((now, crate::system::cputime::process_cpu_ns())),
        cpu_last: None,
        stop_ns: Nanos::MAX,
        config: Some(config),
        metrics: plan
            .metrics
            .clone()
            .map(|m| MetricsFile::new(m, Mode::Watch)),
    })
}

/// The line saying which threads are not watched: the count, the map's size, and the first
/// few threads by name and id.
fn left_out_note(rows: &[&&TaskRow], capacity: u32) -> String {
    const NAMED: usize = 10;
    let named: Vec<String> = rows
        .iter()
        .take(NAMED)
        .map(|r| format!("{}[{}]", r.comm, r.tid))
        .collect();
    let more = match rows.len().saturating_sub(NAMED) {
        0 => String::new(),
        n => format!(" and {n} more"),
    };
    format!(
        "note: {} threads are not watched: the probes' thread map is full at {capacity} threads; left out: {}{more}",
        rows.len(),
        named.join(", ")
    )
}

/// Starts the command to watch on `cpus` (the CPUs jitterscope was started with); a command that cannot be started is a usage error.
/// The probes of a watch: its drain on the housekeeping CPUs, its rings, its thread map
/// sized from the target.
fn probe_config(plan: &WatchPlan, housekeeping: Vec<Cpu>, found: &[Found]) -> ProbeConfig {
    let mut pc = ProbeConfig::new(plan.cpus.clone());
    pc.drain_cpus = housekeeping;
    pc.ringbuf_bytes = plan.ringbuf_bytes;
    pc.watch = true;
    // Nothing to take, the rings are looked at less often (see `ProbeConfig::drain_idle`).
    pc.drain_idle = Some(WATCH_DRAIN_IDLE);
    pc.watch_capacity = crate::probe::watch::capacity_for(expected_threads(plan, found));
    pc
}

/// The longest a watch's rings wait for a look while they stay empty: an idle watch wakes about
/// once a second, not four times. A ring of the watch's default size (2 MiB, some 21,000
/// records) fills in that second only under more than 21,000 records a second of its CPU's
/// watched threads, and the drain is back at `DRAIN_INTERVAL` from the first record it finds.
const WATCH_DRAIN_IDLE: std::time::Duration = std::time::Duration::from_secs(1);

fn spawn(argv: &[String], cpus: &[Cpu]) -> Result<std::process::Child> {
    let mut cmd = std::process::Command::new(&argv[0]);
    cmd.args(&argv[1..]);
    crate::platform::affinity::spawn_on(&mut cmd, cpus).map_err(|e| {
        TargetError(format!(
            "-- {}: cannot start it: {e} (is it on PATH and executable?)",
            argv[0]
        ))
        .into()
    })
}

/// How many threads the target has now: the `watched` map is sized from it.
fn expected_threads(plan: &WatchPlan, found: &[Found]) -> usize {
    match target::cgroup_of(&plan.target) {
        Ok(cg) if plan.target.cgroup_path().is_some() => {
            target::threads_in(&plan.proc_root, &cg.dir).len()
        }
        _ => found.len(),
    }
}

fn add_rows(
    session: &ProbeSession,
    watched: &mut Watched,
    book: &mut WatchBook,
    rows: &[&TaskRow],
    plan: &WatchPlan,
    now: Nanos,
    out: &mut Console,
) -> Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let tids: Vec<u32> = rows.iter().map(|r| r.kernel_tid).collect();
    let added = session.watch_threads(&tids, watched.follow.map(|f| f.0))?;
    let left_out: std::collections::BTreeSet<u32> = added.left_out.iter().copied().collect();
    watched.left_out += left_out.len() as u64;
    if !left_out.is_empty() {
        let rows: Vec<&&TaskRow> = rows
            .iter()
            .filter(|r| left_out.contains(&r.kernel_tid))
            .collect();
        writeln!(out, "{}", left_out_note(&rows, added.capacity))?;
    }
    let rows: Vec<&&TaskRow> = rows
        .iter()
        .filter(|r| !left_out.contains(&r.kernel_tid))
        .collect();
    for r in rows {
        let id = book.add_thread(r.kernel_tid, r.tid, r.pid, &r.comm, now);
        let ss = target::schedstat(&plan.proc_root, r.pid, r.tid);
        watched.ids.insert(
            id,
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
        .threads()
        .into_iter()
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
        match (&w.follow, &w.cgroup) {
            (Some((_, pid)), _) => format!(", and the threads process {pid} creates"),
            (None, Some(path)) => format!(", and the threads created in or moved into {path}"),
            (None, None) => String::new(),
        },
        crate::system::cpus::format_list(&plan.cpus),
        match plan.duration_ns {
            Some(d) => format!("for {:.0} s", d as f64 / 1e9),
            None => "until Ctrl-C or the target exits".to_string(),
        }
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_left_out_are_counted_and_the_first_named() {
        let rows: Vec<TaskRow> = (0..12)
            .map(|i| TaskRow {
                kernel_tid: 100 + i,
                kernel_tgid: 100,
                tid: 100 + i,
                pid: 100,
                comm: format!("w{i}"),
            })
            .collect();
        let refs: Vec<&TaskRow> = rows.iter().collect();
        let refs: Vec<&&TaskRow> = refs.iter().collect();
        assert_eq!(
            left_out_note(&refs, 16384),
            "note: 12 threads are not watched: the probes' thread map is full at 16384 threads; \
             left out: w0[100], w1[101], w2[102], w3[103], w4[104], w5[105], w6[106], w7[107], \
             w8[108], w9[109] and 2 more"
        );
    }
}
