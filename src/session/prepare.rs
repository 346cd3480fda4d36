//! Prepare: everything before the clock starts — the CPU claim, the collector's placement,
//! the probes, the floor, the stall source and the interval log — and the banner.

use std::io::Write;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};

use super::pace::Budget;
use super::{check_startup, Console, RunPlan};
use crate::attribution::preview::{Preview, PreviewView};
use crate::model::Glimpse;
use crate::model::{Cpu, Decision, Nanos};
use crate::platform::affinity::{self, AffinityGuard};
use crate::platform::clock::{monotonic_ns, unix_ns};
use crate::probe::{
    AttachState, Gate, Glance, ProbeBatch, ProbeConfig, ProbeSession, ThreadRegistrar,
};
use crate::report::files::{file_stem, utc_stamp};
use crate::report::hlog::HlogWriter;
use crate::report::runfile::Floor;
use crate::system::claim::CpuClaim;
use crate::system::config::{Configured, Root};
use crate::system::cpus::{format_list, Topology};
use crate::units::fmt_ns;
use crate::workload::{ThreadStart, Workload, WorkloadConfig, WorkloadThread};

/// A run ready to record: what it holds until it ends.
pub(super) struct Prepared {
    pub _claim: CpuClaim,
    pub _affinity: AffinityGuard,
    pub cfg: WorkloadConfig,
    pub measured: Vec<Cpu>,
    pub topo: Topology,
    pub every_cpu_measured: bool,
    /// The collector's budget when it shares a measured CPU.
    pub budget: Option<Arc<Budget>>,
    pub probe: Option<(ProbeSession, std::sync::mpsc::Receiver<ProbeBatch>)>,
    /// Deciding at the end, the live preview the drain thread keeps (read by the live view).
    pub preview: Option<PreviewView>,
    pub workload: Workload,
    pub floor: Option<Floor>,
    /// The configured half of isolation for the measured CPUs, read before the run began.
    pub config: Option<Configured>,
    pub start_unix: u64,
    /// CLOCK_MONOTONIC at the interval log's start.
    pub base_mono: Nanos,
    pub stem: String,
    pub hlog: HlogWriter,
    pub hlog_path: std::path::PathBuf,
    pub record_from: Nanos,
    pub end: Nanos,
}

/// The probes' session and the channel of their record batches.
type Probe = (ProbeSession, std::sync::mpsc::Receiver<ProbeBatch>);

/// What jitterscope's own threads may take of one CPU when they share the producer's: several
/// times what a quiet run needs (`scripts/bench.sh`, "collector under the hrtimer storm"), a
/// fraction of what an interrupt storm would cost.
pub const COLLECTOR_BUDGET: f64 = 0.02;

pub(super) fn prepare(plan: &RunPlan, out: &mut Console) -> Result<Prepared> {
    check_startup()?;
    let mut cfg = plan.workload.clone();
    let measured: Vec<Cpu> = std::iter::once(cfg.producer_cpu)
        .chain(cfg.consumer_cpus.iter().copied())
        .collect();
    let claim = CpuClaim::acquire(&measured)?;
    let topo = Topology::read();
    if !cfg.pin && cfg.float_cpus.is_empty() {
        // Unpinned workload threads float over the whole process set, not the collector's.
        cfg.float_cpus = topo.allowed.clone();
    }
    let (housekeeping, guard) = place_collector(&cfg, &measured, &topo, plan.decision, out)?;
    let every_cpu_measured = topo.housekeeping(&measured).is_empty();
    // Read now, off the measured CPUs and before anything records: it walks all of /proc.
    let config = Configured::read(&Root::live(), &measured);
    note_fifo_unthrottled(&cfg, &config, out)?;
    // Probes first: attached before the workload starts its clock, and a run that cannot
    // load them (no root) fails before it leaves any file behind.
    // Sharing the producer's CPU, the collector keeps to a budget (see `Budget`). Deciding at
    // the end, the drain thread and the collector also learn from it when records may wait.
    let budget = match (every_cpu_measured, plan.decision.at_end()) {
        (true, _) => Some(Budget::new(COLLECTOR_BUDGET, plan.decision)),
        (false, true) => Some(Budget::new(0.0, plan.decision)),
        (false, false) => None,
    }
    .map(Arc::new);
    // Before the drain thread starts: the room it makes in its heap is kept.
    crate::system::keep_allocations_in_place();
    let (probe, preview) = match start_probes(
        plan,
        &measured,
        housekeeping,
        budget.clone(),
        every_cpu_measured,
    )? {
        Some((probe, view)) => (Some(probe), Some(view)),
        None => (None, None),
    };
    check_startup()?;
    // From here on, no page-table change of this address space may reach the workload's
    // CPUs as a TLB-shootdown IPI: memory is populated when mapped and never given back.
    if let Some(why) = crate::system::hold_memory_in_place() {
        writeln!(
            out,
            "note: jitterscope's memory is not locked ({why}): its page faults and freed memory can interrupt the workload's CPUs with TLB-shootdown IPIs (they show as `self`)"
        )?;
    }
    // The floor right before the workload takes the CPUs: on a VM it moves within seconds,
    // so each run carries its own and `compare` can say when it moved.
    let floor = measure_floor(&cfg);
    let kernel_tids = KernelTids::default();
    let on_start = probe
        .as_ref()
        .map(|(session, _)| register_with_probes(session.registrar(), kernel_tids.clone()));
    let mut workload = Workload::spawn(cfg.clone(), on_start)?;
    // The last moment a signal means "never mind": after it, a signal ends a run that has
    // files to write.
    check_startup()?;
    let start_unix = unix_ns() as u64;
    let base_mono = monotonic_ns();
    let stem = format!("{}-{}", file_stem(&plan.label), utc_stamp(start_unix));
    let (hlog, hlog_path) = open_interval_log(plan, &stem, start_unix, &measured)?;
    workload.release();
    let prepared = Prepared {
        _claim: claim,
        _affinity: guard,
        record_from: workload.record_from_ns(),
        end: workload.end_ns(),
        cfg,
        measured,
        topo,
        every_cpu_measured,
        budget,
        probe,
        preview,
        workload,
        floor,
        config: Some(config),
        start_unix,
        base_mono,
        stem,
        hlog,
        hlog_path,
    };
    print_banner(plan, &prepared, &kernel_tids.get(), out)?;
    Ok(prepared)
}

/// A SCHED_FIFO consumer where RT throttling is off (`kernel.sched_rt_runtime_us=-1`) never
/// leaves its CPU: one note that the CPU's own kernel threads starve for the run. Not refused:
/// it is what a user who turned throttling off measures.
fn note_fifo_unthrottled(
    cfg: &WorkloadConfig,
    config: &Configured,
    out: &mut Console,
) -> Result<()> {
    let Some(priority) = cfg.consumer_fifo else {
        return Ok(());
    };
    if config.sysctls.sched_rt_runtime_us == Some(-1) {
        writeln!(
            out,
            "note: RT throttling is off (kernel.sched_rt_runtime_us=-1): the SCHED_FIFO (priority {priority}) consumer on CPU {} will starve that CPU's own kernel threads (per-CPU kworkers, ksoftirqd, RCU) for the run",
            format_list(&cfg.consumer_cpus)
        )?;
    }
    Ok(())
}

/// Moves the collector (this thread) off the measured CPUs for the run; its CPUs come back
/// when the guard drops (a workshop runs several sessions from this thread). Returns the
/// CPUs jitterscope's own threads use.
fn place_collector(
    cfg: &WorkloadConfig,
    measured: &[Cpu],
    topo: &Topology,
    decision: Decision,
    out: &mut Console,
) -> Result<(Vec<Cpu>, AffinityGuard)> {
    let mut housekeeping = topo.housekeeping(measured);
    if housekeeping.is_empty() && cfg.pin {
        // Every CPU is measured: jitterscope's own threads share the producer's CPU, which
        // shares with the rest of the system anyway, and keep off the consumers' CPUs.
        housekeeping = vec![cfg.producer_cpu];
        let deciding = if decision.at_end_by_default() {
            "; so that they do the least there, the culprits are decided after the run, and meanwhile the live view shows the kernel's time by culprit (--attribution live decides them as the run goes)"
        } else {
            ""
        };
        writeln!(
            out,
            "note: every CPU is measured ({}); jitterscope's own threads run on the producer's CPU {} and show up there as class `self` (measure a subset of CPUs on a larger machine to avoid this){deciding}",
            format_list(measured),
            cfg.producer_cpu
        )?;
    }
    let guard = AffinityGuard::remember();
    if !housekeeping.is_empty() {
        affinity::set_current_thread_cpus(&housekeeping)
            .context("cannot move jitterscope's collector thread to the housekeeping CPUs")?;
    }
    Ok((housekeeping, guard))
}

fn start_probes(
    plan: &RunPlan,
    measured: &[Cpu],
    housekeeping: Vec<Cpu>,
    budget: Option<Arc<Budget>>,
    every_cpu_measured: bool,
) -> Result<Option<(Probe, PreviewView)>> {
    let Some(ringbuf_bytes) = plan.probes else {
        return Ok(None);
    };
    let mut pc = ProbeConfig::new(measured.to_vec());
    pc.ringbuf_bytes = ringbuf_bytes;
    pc.drain_cpus = housekeeping;
    pc.gate = budget.map(|b| b as Arc<dyn Gate>);
    pc.drain_interval = super::run::turn(every_cpu_measured, plan.decision);
    let quiet = super::run::quiet_turn(every_cpu_measured, plan.decision);
    pc.drain_idle = (quiet > pc.drain_interval).then_some(quiet);
    pc.attention = Some(attention);
    // Deciding at the end, the live view's feed of spikes: by the kernel time in each one's
    // window (the plain line has no feed).
    let spike_windows = plan.tui && plan.decision.at_end();
    let (preview, view) = Preview::new(measured, spike_windows);
    pc.glance = Some(preview as Arc<Mutex<dyn Glance>>);
    let probe = ProbeSession::start(pc)
        .context("cannot start the kernel probes (--no-probes measures without attribution)")?;
    Ok(Some((probe, view)))
}

/// Whether the collector must wake before the next drain: a signal came (its handler only
/// sets a flag) or a key of the live view waits. The turn then ends the run (`end_asked`) or
/// draws the frame at once (`LiveView::due`).
fn attention() -> bool {
    crate::signals::received().is_some() || crate::live::terminal::key_waiting()
}

/// The live preview is given the records the drain thread glances at.
impl Glance for Preview {
    fn record(&mut self, from_ns: Nanos, glimpse: &Glimpse<'_>) {
        self.add(from_ns, glimpse);
    }

    fn glanced(&mut self, complete_to_ns: Option<Nanos>) {
        Preview::glanced(self, complete_to_ns);
    }
}

fn open_interval_log(
    plan: &RunPlan,
    stem: &str,
    start_unix: u64,
    measured: &[Cpu],
) -> Result<(HlogWriter, std::path::PathBuf)> {
    let (hlog_path, hlog_file) = plan.output.create_stream(&format!("{stem}.hlog"))?;
    let hlog = HlogWriter::new(
        hlog_file,
        start_unix,
        &format!(
            "jitterscope {} run '{}' cpus {}",
            env!("CARGO_PKG_VERSION"),
            plan.label,
            format_list(measured)
        ),
        "values in nanoseconds; tags name <consumer>.<transit|inter_message>",
    )
    .with_context(|| format!("cannot write {}", hlog_path.display()))?;
    Ok((hlog, hlog_path))
}

fn print_banner(
    plan: &RunPlan,
    p: &Prepared,
    kernel_tids: &[(u32, u32)],
    out: &mut Console,
) -> Result<()> {
    let cfg = &p.cfg;
    writeln!(
        out,
        "jitterscope: producer on CPU {}, consumer{} on CPU {}{}; interval {}, warm-up {}, duration {}, stall threshold {}{}; {}",
        cfg.producer_cpu,
        if cfg.consumer_cpus.len() > 1 { "s" } else { "" },
        format_list(&cfg.consumer_cpus),
        if cfg.pin { "" } else { " (unpinned)" },
        fmt_ns(cfg.interval_ns),
        fmt_ns(cfg.warmup_ns),
        fmt_ns(cfg.duration_ns),
        fmt_ns(cfg.stall_threshold_ns),
        if plan.stall_threshold_auto { " (auto)" } else { "" },
        if p.probe.is_some() { "kernel probes attached" } else { "no kernel probes" },
    )?;
    writeln!(out, "{}", threads_line(p.workload.threads(), kernel_tids))?;
    if let Some((session, _)) = &p.probe {
        let missing: Vec<&str> = session
            .attach_report()
            .iter()
            .filter(|a| a.state != AttachState::Attached)
            .map(|a| a.tracepoint.as_str())
            .collect();
        if !missing.is_empty() {
            writeln!(
                out,
                "not available on this kernel (not traced): {}",
                missing.join(", ")
            )?;
        }
    }
    out.flush()?;
    Ok(())
}

/// Ping-pong rounds for a run's floor: ~20 ms on these machines.
const FLOOR_ROUNDS: u64 = 50_000;

/// The cross-core floor between the producer's and the first consumer's CPU, from a thread of
/// its own (the measurement pins itself). None when unpinned or on one CPU, or when it fails:
/// the run goes on without it.
fn measure_floor(cfg: &WorkloadConfig) -> Option<Floor> {
    let to = *cfg.consumer_cpus.first()?;
    let from = cfg.producer_cpu;
    if !cfg.pin || from == to {
        return None;
    }
    let h = std::thread::Builder::new()
        .name("js-floor".into())
        .spawn(move || crate::workload::pingpong::measure(from, to, FLOOR_ROUNDS))
        .ok()?
        .join()
        .ok()?
        .ok()?;
    Some(Floor {
        from_cpu: from,
        to_cpu: to,
        min_ns: h.min(),
        p50_ns: h.value_at_quantile(0.5),
        p99_ns: h.value_at_quantile(0.99),
        rounds: h.len(),
    })
}

/// Workload threads' ids in the kernel's numbering, as each learnt its own while registering
/// with the probes: (id in this PID namespace, kernel id).
#[derive(Clone, Default)]
struct KernelTids(Arc<Mutex<Vec<(u32, u32)>>>);

impl KernelTids {
    fn add(&self, local: u32, kernel: u32) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((local, kernel));
    }

    fn get(&self) -> Vec<(u32, u32)> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// The workload's start hook when probes run: each thread registers itself with them before
/// it can spin, so not one of its runs is taken for an interruption — not even the first.
fn register_with_probes(registrar: ThreadRegistrar, kernel_tids: KernelTids) -> ThreadStart {
    Arc::new(move |t: &WorkloadThread| {
        let kernel = registrar
            .register_current_thread()
            .map_err(|e| format!("cannot register it with the kernel probes: {e}"))?;
        kernel_tids.add(t.tid, kernel);
        Ok(())
    })
}

/// `threads: js-producer=18727 …` in the kernel's numbering, like every pid the probes report;
/// inside a PID namespace the local ids (what `taskset -p` takes there) follow.
fn threads_line(threads: &[WorkloadThread], kernel: &[(u32, u32)]) -> String {
    let kernel_of =
        |t: &WorkloadThread| kernel.iter().find(|k| k.0 == t.tid).map_or(t.tid, |k| k.1);
    let list = |id: &dyn Fn(&WorkloadThread) -> u32| {
        threads
            .iter()
            .map(|t| format!("{}={}", t.name, id(t)))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let mut line = format!("threads: {}", list(&kernel_of));
    if threads.iter().any(|t| kernel_of(t) != t.tid) {
        line += &format!(
            " (kernel tids; in this PID namespace: {})",
            list(&|t| t.tid)
        );
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ThreadRole;

    fn thread(role: ThreadRole, name: &str, tid: u32) -> WorkloadThread {
        WorkloadThread {
            role,
            cpu: Some(0),
            tid,
            name: name.into(),
        }
    }

    #[test]
    fn the_threads_line_gives_kernel_tids_and_the_local_ones_only_when_they_differ() {
        let threads = [
            thread(ThreadRole::Producer, "js-producer", 3),
            thread(ThreadRole::Consumer(0), "js-consumer-1", 4),
        ];
        assert_eq!(
            threads_line(&threads, &[(3, 18727), (4, 18728)]),
            "threads: js-producer=18727 js-consumer-1=18728 (kernel tids; in this PID namespace: js-producer=3 js-consumer-1=4)"
        );
        assert_eq!(
            threads_line(&threads, &[(3, 3), (4, 4)]),
            "threads: js-producer=3 js-consumer-1=4"
        );
        // Without probes nobody asked the kernel: the local ids are all there is.
        assert_eq!(
            threads_line(&threads, &[]),
            "threads: js-producer=3 js-consumer-1=4"
        );
    }
}
