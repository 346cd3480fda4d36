//! One run, wired end to end: start the workload, drain it while it runs (stalls, interval
//! histograms into the .hlog), then print the report and write the run files.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use hdrhistogram::Histogram;

use crate::attribution::advice::Machine;
use crate::attribution::{Engine, EngineConfig, Ranking, SpikeVerdict, Verdict};
use crate::live::model::ConsumerView;
use crate::live::terminal::{Action, LiveTerminal};
use crate::live::{CulpritRow, LiveModel};
use crate::model::{Cpu, Nanos};
use crate::probe::decode::Record;
use crate::probe::{AttachState, ProbeConfig, ProbeSession, ThreadRegistrar};
use crate::report::files::{file_stem, utc_stamp, OutputDir};
use crate::report::hlog::HlogWriter;
use crate::report::runfile::{
    ConsumerHistograms, CpuCount, CpuSteal, CpuTheftEntry, CulpritEntry, Floor, Lost, Overhead,
    ProbeInfo, ProgramCostEntry, RunFile, RunInfo, Settings, SpikeEntry, StallCulprit, StallEntry,
    SCHEMA,
};
use crate::report::seed::Summary;
use crate::report::stalls::StallBook;
use crate::report::text::{self, inferred_row_name};
use crate::report::units::fmt_ns;
use crate::report::{export, hgrm};
use crate::signals;
use crate::system::claim::CpuClaim;
use crate::system::cpus::{format_list, Topology};
use crate::system::cputime;
use crate::workload::clock::{monotonic_ns, unix_ns};
use crate::workload::histograms::{new_histogram, IntervalHistograms};
use crate::workload::{affinity, Output, ThreadStart, Workload, WorkloadConfig, WorkloadThread};

/// Everything a run needs, validated.
#[derive(Debug, Clone)]
pub struct RunPlan {
    pub workload: WorkloadConfig,
    pub label: String,
    pub output: OutputDir,
    pub stall_threshold_auto: bool,
    pub keep_stalls: usize,
    /// Print one progress line per second (when there is no terminal UI).
    pub progress: bool,
    /// Show the live terminal UI (stdout is a terminal and --no-tui was not given).
    pub tui: bool,
    /// ANSI colour in the report (stdout is a terminal).
    pub colour: bool,
    /// Kernel probes with this ring-buffer size (bytes), or none.
    pub probes: Option<u32>,
}

/// Where the run's files went.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    pub run: RunFile,
    pub json_path: std::path::PathBuf,
    pub hgrm_paths: Vec<std::path::PathBuf>,
    pub hlog_path: std::path::PathBuf,
}

fn consumer_key(index: usize) -> String {
    crate::model::ThreadRole::Consumer(index as u32).display_name()
}

struct ConsumerTotals {
    transit: Histogram<u64>,
    inter_message: Histogram<u64>,
    /// The latest finished interval, for the progress line.
    last_transit: Option<Summary>,
    last_messages: u64,
    last_interval_ns: Nanos,
}

/// The attribution side of a run: engine, ranking and the worst stalls, fed by the
/// workload's stalls and the probes' records.
struct Attribution {
    engine: Engine,
    ranking: Ranking,
    book: StallBook,
    probes_on: bool,
    producer_cpu: Cpu,
    consumer_cpus: Vec<Cpu>,
    /// The worst spikes (bounded), and how many there were.
    spikes: Vec<SpikeVerdict>,
    spike_count: u64,
    keep: usize,
    /// Kernel records reported lost so far (from the probes' lost windows).
    lost_records: u64,
    /// Spikes decided since the live view last looked.
    fresh_spikes: Vec<SpikeVerdict>,
    /// Steal-clock growth per CPU seen by the probes since recording started.
    record_from: Nanos,
    steal_seen: std::collections::BTreeMap<Cpu, Nanos>,
}

impl Attribution {
    fn stall(&mut self, s: crate::model::Stall) {
        self.engine.push_stall(s);
    }

    fn spike(&mut self, s: crate::model::Spike) {
        let consumer_cpu = self
            .consumer_cpus
            .get(s.consumer as usize)
            .copied()
            .unwrap_or(self.producer_cpu);
        self.engine.push_spike(s, self.producer_cpu, consumer_cpu);
    }

    fn keep_spikes(&mut self) {
        let new = self.engine.take_spikes();
        self.spike_count += new.len() as u64;
        // The live feed shows the latest few; the rest only counts.
        let skip = new.len().saturating_sub(20);
        self.fresh_spikes.extend(new[skip..].iter().cloned());
        if self.fresh_spikes.len() > 40 {
            self.fresh_spikes.drain(..self.fresh_spikes.len() - 40);
        }
        self.spikes.extend(new);
        if self.spikes.len() > 2 * self.keep {
            self.trim_spikes();
        }
    }

    fn trim_spikes(&mut self) {
        self.spikes
            .sort_by_key(|v| std::cmp::Reverse(v.spike.transit_ns()));
        self.spikes.truncate(self.keep);
    }

    fn records(&mut self, batch: Vec<Record>) {
        for r in batch {
            match r {
                Record::Interruption(i) => self.engine.push_interruption(i),
                Record::Cause(c) => self.engine.push_cause(c),
                Record::Steal(s) => {
                    if s.to_ns >= self.record_from {
                        *self.steal_seen.entry(s.cpu).or_default() += s.steal_ns;
                    }
                    self.engine.push_steal(s)
                }
                Record::Lost {
                    cpu,
                    start_ns,
                    end_ns,
                    count,
                } => {
                    self.lost_records += count;
                    self.engine.mark_lost(cpu, start_ns, end_ns)
                }
            }
        }
    }

    fn decide(&mut self, watermark: Nanos) {
        for v in self.engine.advance(watermark) {
            self.keep(v);
        }
        self.keep_spikes();
        self.engine.set_timeline_from(self.book.admission_ns());
    }

    fn finish(&mut self) {
        for v in self.engine.finish() {
            self.keep(v);
        }
        self.keep_spikes();
        self.trim_spikes();
    }

    fn keep(&mut self, v: Verdict) {
        if self.probes_on {
            self.ranking.add(&v);
        }
        self.book.add(v);
    }
}

/// Standard output that may go away mid-run (the terminal closed with SIGHUP, a pipe whose
/// reader quit): the run goes on and its files are still written; the first error is kept
/// and reported on standard error at the end.
struct Console<'a> {
    out: &'a mut dyn Write,
    error: Option<std::io::Error>,
}

impl Write for Console<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.error.is_none() {
            if let Err(e) = self.out.write_all(buf) {
                self.error = Some(e);
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if self.error.is_none() {
            if let Err(e) = self.out.flush() {
                self.error = Some(e);
            }
        }
        Ok(())
    }
}

/// jitterscope's own CPU time beside the workload's, sampled from the collector.
#[derive(Debug, Clone, Copy)]
struct CpuSample {
    at_ns: Nanos,
    process_ns: u64,
    workload_ns: u64,
}

impl CpuSample {
    /// None once a workload thread has ended (its time is no longer readable).
    fn take(workload: &Workload, now: Nanos) -> Option<CpuSample> {
        let mut workload_ns = 0;
        for t in workload.threads() {
            workload_ns += cputime::thread_cpu_ns(t.tid)?;
        }
        Some(CpuSample {
            at_ns: now,
            process_ns: cputime::process_cpu_ns(),
            workload_ns,
        })
    }
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

/// Puts the calling thread's CPU affinity back on drop.
struct AffinityGuard(Option<Vec<Cpu>>);

impl Drop for AffinityGuard {
    fn drop(&mut self) {
        if let Some(cpus) = &self.0 {
            let _ = affinity::set_current_thread_cpus(cpus);
        }
    }
}

/// The terminal went away under the live view: carry on without it, in plain output.
fn leave_view(screen: &mut Option<LiveTerminal>, out: &mut Console, e: &dyn std::fmt::Display) {
    drop(screen.take());
    let _ = writeln!(
        out,
        "note: the live view stopped ({e}); plain output instead"
    );
}

/// How often the collector hands freed heap pages back to the system (see `give_back_memory`).
const TRIM_EVERY_NS: Nanos = 10_000_000_000;

/// After a burst of kernel records the collector's heap holds many freed small blocks (the
/// records' names); glibc keeps their pages until `malloc_trim` releases the free ones. Doing
/// it every few seconds, on the collector's housekeeping CPU, keeps a long run's resident
/// memory at what it holds, not at its worst moment.
fn give_back_memory() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only walks and releases the allocator's free memory.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// How far behind "now" stalls are decided: records reach user space within a couple of
/// drain intervals.
const DECISION_LAG_NS: Nanos = 500_000_000;

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

fn is_virtual_machine() -> bool {
    std::fs::read_to_string("/proc/cpuinfo")
        .map(|t| {
            t.lines()
                .any(|l| l.starts_with("flags") && l.contains(" hypervisor"))
        })
        .unwrap_or(false)
}

pub fn run(plan: RunPlan, out: &mut dyn Write) -> Result<RunOutcome> {
    signals::install();
    let mut console = Console { out, error: None };
    let result = run_on(plan, &mut console);
    if let Some(e) = console.error {
        eprintln!("note: standard output went away during the run ({e}); the report is in the run's files");
    }
    result
}

/// A signal before the workload was released: stop here, nothing measured, no files.
fn check_startup() -> Result<()> {
    match signals::received() {
        Some(sig) => Err(signals::Interrupted(sig).into()),
        None => Ok(()),
    }
}

fn run_on(plan: RunPlan, out: &mut Console) -> Result<RunOutcome> {
    check_startup()?;
    let mut cfg = plan.workload.clone();
    let measured: Vec<Cpu> = std::iter::once(cfg.producer_cpu)
        .chain(cfg.consumer_cpus.iter().copied())
        .collect();
    let _claim = CpuClaim::acquire(&measured)?;
    let topo = Topology::read();
    let mut housekeeping = topo.housekeeping(&measured);
    let every_cpu_measured = housekeeping.is_empty();
    if housekeeping.is_empty() && cfg.pin {
        // Every CPU is measured: jitterscope's own threads share the producer's CPU, which
        // shares with the rest of the system anyway, and keep off the consumers' CPUs.
        housekeeping = vec![cfg.producer_cpu];
        writeln!(
            out,
            "note: every CPU is measured ({}); jitterscope's own threads run on the producer's CPU {} and show up there as class `self` (measure a subset of CPUs on a larger machine to avoid this)",
            format_list(&measured),
            cfg.producer_cpu
        )?;
    }
    if !cfg.pin && cfg.float_cpus.is_empty() {
        // Unpinned workload threads float over the whole process set, not the collector's.
        cfg.float_cpus = topo.allowed.clone();
    }
    // The collector (this thread) stays off the measured (consumer) CPUs for the run and gets
    // its own CPUs back afterwards (a workshop runs several sessions from this thread).
    let _affinity = AffinityGuard(affinity::allowed_cpus().ok());
    if !housekeeping.is_empty() {
        affinity::set_current_thread_cpus(&housekeeping)
            .context("cannot move jitterscope's collector thread to the housekeeping CPUs")?;
    }

    // Probes first: attached before the workload starts its clock, and a run that cannot
    // load them (no root) fails before it leaves any file behind.
    let mut probe = match plan.probes {
        Some(ringbuf_bytes) => {
            let mut pc = ProbeConfig::new(measured.clone());
            pc.ringbuf_bytes = ringbuf_bytes;
            pc.drain_cpus = housekeeping.clone();
            Some(ProbeSession::start(pc).context(
                "cannot start the kernel probes (--no-probes measures without attribution)",
            )?)
        }
        None => None,
    };
    check_startup()?;
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
    let (hlog_path, hlog_file) = plan.output.create_stream(&format!("{stem}.hlog"))?;
    let mut hlog = HlogWriter::new(
        hlog_file,
        start_unix,
        &format!(
            "jitterscope {} run '{}' cpus {}",
            env!("CARGO_PKG_VERSION"),
            plan.label,
            format_list(&measured)
        ),
    )
    .with_context(|| format!("cannot write {}", hlog_path.display()))?;
    workload.release();
    let record_from = workload.record_from_ns();
    let end = workload.end_ns();
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
        if probe.is_some() { "kernel probes attached" } else { "no kernel probes" },
    )?;
    writeln!(
        out,
        "{}",
        threads_line(workload.threads(), &kernel_tids.get())
    )?;
    if let Some((session, _)) = &probe {
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

    let mut totals: Vec<ConsumerTotals> = cfg
        .consumer_cpus
        .iter()
        .map(|_| ConsumerTotals {
            transit: new_histogram(),
            inter_message: new_histogram(),
            last_transit: None,
            last_messages: 0,
            last_interval_ns: 0,
        })
        .collect();
    let mut attr = Attribution {
        engine: Engine::new(EngineConfig::default()),
        ranking: Ranking::default(),
        book: StallBook::new(plan.keep_stalls),
        probes_on: probe.is_some(),
        producer_cpu: cfg.producer_cpu,
        consumer_cpus: cfg.consumer_cpus.clone(),
        spikes: Vec::new(),
        spike_count: 0,
        keep: plan.keep_stalls,
        lost_records: 0,
        fresh_spikes: Vec::new(),
        record_from,
        steal_seen: Default::default(),
    };
    // With a steal clock, uncovered time without steal growth is "no kernel event and no
    // steal"; without one it cannot be told apart from host preemption.
    attr.engine
        .set_steal_clock(probe.as_ref().is_some_and(|(p, _)| p.steal_clock()));
    let mut live = LiveModel {
        label: plan.label.clone(),
        producer_cpu: cfg.producer_cpu,
        consumer_cpus: cfg.consumer_cpus.clone(),
        kernel: crate::system::kernel_release(),
        planned_ns: cfg.duration_ns,
        probes: probe.is_some(),
        consumers: cfg
            .consumer_cpus
            .iter()
            .enumerate()
            .map(|(i, &cpu)| ConsumerView {
                name: consumer_key(i),
                cpu,
                ..ConsumerView::default()
            })
            .collect(),
        note: every_cpu_measured.then(|| {
            "every CPU is measured: the display refreshes once a second and its cost shows under `self`".to_string()
        }),
        ..LiveModel::default()
    };
    // Histograms since the start, or since the last `r` in the live view.
    let mut view_totals: Vec<Histogram<u64>> =
        cfg.consumer_cpus.iter().map(|_| new_histogram()).collect();
    let mut screen = if plan.tui {
        match LiveTerminal::enter() {
            Ok(t) => Some(t),
            Err(e) => {
                writeln!(
                    out,
                    "note: cannot start the live view ({e}); plain output instead"
                )?;
                None
            }
        }
    } else {
        None
    };
    let refresh_ns: Nanos = if every_cpu_measured {
        1_000_000_000
    } else {
        250_000_000
    };
    let mut frozen: Option<LiveModel> = None;
    let mut hlog_error: Option<std::io::Error> = None;
    let mut drain = |workload: &mut Workload,
                     totals: &mut Vec<ConsumerTotals>,
                     attr: &mut Attribution,
                     hlog: &mut HlogWriter,
                     live: &mut LiveModel,
                     view_totals: &mut Vec<Histogram<u64>>| {
        workload.drain(|o| match o {
            Output::Stall(s) => {
                attr.stall(s);
                None
            }
            Output::Spike(s) => {
                attr.spike(s);
                None
            }
            Output::Interval { consumer, hists } => {
                let t = &mut totals[consumer];
                // Same bounds everywhere, so adding cannot fail.
                let _ = t.transit.add(&hists.transit);
                let _ = t.inter_message.add(&hists.inter_message);
                t.last_transit = Some(Summary::brief(&hists.transit));
                t.last_messages = hists.transit.len();
                t.last_interval_ns = hists.end_ns.saturating_sub(hists.start_ns);
                let _ = view_totals[consumer].add(&hists.transit);
                if !hists.transit.is_empty() {
                    live.push_max(consumer, hists.transit.max());
                }
                write_interval(hlog, consumer, &hists, base_mono, &mut hlog_error);
                Some(hists)
            }
        });
    };

    let mut next_progress = record_from + 1_000_000_000;
    let mut next_frame: Nanos = 0;
    let mut ended = "completed";
    let mut end_reason = String::new();
    // jitterscope's own CPU time: first sample once recording starts, last one while every
    // workload thread still runs.
    let mut cpu_first: Option<CpuSample> = None;
    let mut cpu_last: Option<CpuSample> = None;
    let mut next_trim = record_from + TRIM_EVERY_NS;
    while !workload.finished() {
        std::thread::sleep(Duration::from_millis(100));
        drain(
            &mut workload,
            &mut totals,
            &mut attr,
            &mut hlog,
            &mut live,
            &mut view_totals,
        );
        if let Some((_, rx)) = &probe {
            while let Ok(batch) = rx.try_recv() {
                attr.records(batch);
            }
        }
        let now = monotonic_ns();
        attr.decide(now.saturating_sub(DECISION_LAG_NS));
        if now >= next_trim {
            next_trim = now + TRIM_EVERY_NS;
            give_back_memory();
        }
        if now >= record_from {
            let sample = CpuSample::take(&workload, now);
            if cpu_first.is_none() {
                cpu_first = sample;
            }
            cpu_last = sample.or(cpu_last);
        }
        if let Some(sig) = signals::received() {
            drop(screen.take());
            writeln!(
                out,
                "{}: stopping early, writing what was measured",
                signals::name(sig)
            )?;
            workload.request_stop();
            ended = "interrupted";
            end_reason = format!("{} received", signals::name(sig));
            break;
        }
        if let Some(why) = workload.lost_placement() {
            drop(screen.take());
            writeln!(out, "stopping early: {why}")?;
            workload.request_stop();
            ended = "cpu_lost";
            end_reason = why;
            break;
        }
        let due_line = plan.progress && screen.is_none() && now >= next_progress && now < end;
        let due_frame = screen.is_some() && now >= next_frame;
        if !(due_line || due_frame) {
            continue;
        }
        update_live(
            &mut live,
            &attr,
            &totals,
            &view_totals,
            &workload,
            probe.as_ref().map(|p| &p.0),
            now,
            record_from,
        );
        if due_line {
            next_progress += 1_000_000_000;
            writeln!(out, "{}", live.plain_line())?;
            out.flush()?;
        }
        if let Some(term) = screen.as_mut() {
            next_frame = now + refresh_ns;
            let mut quit = false;
            let actions = match term.actions() {
                Ok(a) => a,
                Err(e) => {
                    leave_view(&mut screen, out, &e);
                    continue;
                }
            };
            for action in actions {
                match action {
                    Action::Quit => quit = true,
                    Action::TogglePause => {
                        live.paused = !live.paused;
                        frozen = live.paused.then(|| live.clone());
                    }
                    Action::NextSort => live.sort = live.sort.next(),
                    Action::Reset => view_totals.iter_mut().for_each(|h| h.reset()),
                    Action::ToggleHelp => live.help = !live.help,
                }
            }
            let shown = match &mut frozen {
                Some(f) => {
                    f.sort = live.sort;
                    f.help = live.help;
                    f.paused = true;
                    &*f
                }
                None => &live,
            };
            if let Err(e) = term.draw(shown) {
                leave_view(&mut screen, out, &e);
                continue;
            }
            if quit {
                drop(screen.take());
                writeln!(out, "stopped from the live view, writing what was measured")?;
                workload.request_stop();
                ended = "interrupted";
                end_reason = "stopped from the live view".into();
                break;
            }
        }
    }
    // Leave the alternate screen before the report is printed.
    drop(screen.take());
    workload.join();
    drain(
        &mut workload,
        &mut totals,
        &mut attr,
        &mut hlog,
        &mut live,
        &mut view_totals,
    );
    let _ = hlog.flush();
    let stop_ns = monotonic_ns().min(end);
    let probe_summary = match probe.take() {
        Some((session, rx)) => {
            let attach = session.attach_report().to_vec();
            // What was measured is still written when the probes end badly.
            let summary = session.stop().unwrap_or_else(|e| {
                let _ = writeln!(
                    out,
                    "WARNING: the kernel probes did not stop cleanly ({e}); their counters are missing from the report"
                );
                crate::probe::ProbeSummary::default()
            });
            while let Ok(batch) = rx.try_recv() {
                attr.records(batch);
            }
            Some((attach, summary))
        }
        None => None,
    };
    attr.finish();

    let counters = workload.counters();
    let sum = |f: &dyn Fn(&crate::workload::ThreadCounters) -> u64| -> u64 {
        counters.iter().map(|(_, c)| f(c)).sum()
    };
    use std::sync::atomic::Ordering::Relaxed;
    let lost = Lost {
        ring_buffer_drops: probe_summary.as_ref().map_or(0, |p| p.1.total_drops()),
        workload_queue_drops: sum(&|c| {
            c.stalls_dropped.load(Relaxed) + c.spikes_dropped.load(Relaxed)
        }),
        sequence_errors: sum(&|c| c.sequence_errors.load(Relaxed)),
    };
    let ring_full = sum(&|c| c.ring_full.load(Relaxed));
    let rotations_missed = sum(&|c| c.rotations_missed.load(Relaxed));
    let machine = Machine {
        online: topo.online.clone(),
        measured: measured.clone(),
        virtual_machine: is_virtual_machine(),
    };
    let probes_on = probe_summary.is_some();
    let (bpf_run_ns, bpf_events) = probe_summary.as_ref().map_or((0, 0), |(_, p)| {
        (
            p.costs.iter().map(|c| c.run_time_ns).sum(),
            p.costs.iter().map(|c| c.run_count).sum(),
        )
    });
    let overhead = match (cpu_first, cpu_last) {
        (Some(a), Some(b)) if b.at_ns > a.at_ns => Some(Overhead {
            window_ns: b.at_ns - a.at_ns,
            tracer_cpu_ns: b
                .process_ns
                .saturating_sub(a.process_ns)
                .saturating_sub(b.workload_ns.saturating_sub(a.workload_ns)),
            bpf_run_ns,
            bpf_events,
        }),
        _ => None,
    };

    let run = RunFile {
        schema: SCHEMA.to_string(),
        run: RunInfo {
            label: plan.label.clone(),
            cpus: measured.clone(),
            producer_cpu: cfg.producer_cpu,
            consumer_cpus: cfg.consumer_cpus.clone(),
            start_unix_ns: start_unix,
            record_from_ns: record_from,
            duration_ns: stop_ns.saturating_sub(record_from),
            kernel: crate::system::kernel_release(),
            host: crate::system::host_name(),
            ended: ended.to_string(),
            end_reason,
            floor,
            settings: Settings {
                pinned: cfg.pin,
                interval_ns: cfg.interval_ns,
                warmup_ns: cfg.warmup_ns,
                planned_duration_ns: cfg.duration_ns,
                stall_threshold_ns: cfg.stall_threshold_ns,
                spike_threshold_ns: cfg.spike_threshold_ns,
                stall_threshold_auto: plan.stall_threshold_auto,
                probes: probes_on,
            },
        },
        histograms: totals
            .iter()
            .enumerate()
            .map(|(i, t)| ConsumerHistograms {
                consumer: consumer_key(i),
                cpu: cfg.consumer_cpus[i],
                transit: Summary::of(&t.transit),
                inter_message: Summary::of(&t.inter_message),
            })
            .collect(),
        stall_summary: attr.book.summary(),
        stalls: attr
            .book
            .worst()
            .into_iter()
            .map(|v| stall_entry(v, probes_on))
            .collect(),
        culprits: attr
            .ranking
            .ranked(&machine)
            .into_iter()
            .map(|c| CulpritEntry {
                class: c.class.as_str().to_string(),
                name: c.name,
                detail: c.detail,
                episodes: c.episodes,
                measured_ns: c.measured_ns,
                inferred_ns: c.inferred_ns,
                longest_ns: c.longest_ns,
                share: c.share,
                advice: c.advice,
                cpus: c
                    .cpus
                    .into_iter()
                    .map(|t| CpuTheftEntry {
                        cpu: t.cpu,
                        measured_ns: t.measured_ns,
                        inferred_ns: t.inferred_ns,
                    })
                    .collect(),
            })
            .collect(),
        spike_count: attr.spike_count,
        spikes: attr
            .spikes
            .iter()
            .map(|v| spike_entry(v, probes_on))
            .collect(),
        lost,
        probes: probe_summary.map(|(attach, p)| ProbeInfo {
            unavailable: attach
                .iter()
                .filter(|a| a.state != AttachState::Attached)
                .map(|a| a.tracepoint.clone())
                .collect(),
            events: p
                .events
                .iter()
                .map(|&(cpu, count)| CpuCount { cpu, count })
                .collect(),
            drops: p
                .drops
                .iter()
                .map(|&(cpu, count)| CpuCount { cpu, count })
                .collect(),
            costs: p
                .costs
                .iter()
                .map(|c| ProgramCostEntry {
                    program: c.program.clone(),
                    run_count: c.run_count,
                    run_time_ns: c.run_time_ns,
                })
                .collect(),
            incomplete_stalls: attr.ranking.incomplete(),
            stats_enabled: p.stats_enabled,
            symbols: p.symbols,
            steal_clock: p.steal_clock,
            steal_note: p.steal_clock_note.clone().unwrap_or_default(),
            steal: attr
                .steal_seen
                .iter()
                .map(|(&cpu, &steal_ns)| CpuSteal { cpu, steal_ns })
                .collect(),
        }),
        overhead,
    };

    // The files first: a report that cannot be printed (standard output gone) or a signal
    // arriving now must not cost the run its files. A file that cannot be written (full
    // disk) does not stop the report from being printed.
    let mut file_error: Option<crate::report::files::OutputError> = None;
    let mut keep = |r: Result<std::path::PathBuf, crate::report::files::OutputError>| match r {
        Ok(p) => Some(p),
        Err(e) => {
            file_error.get_or_insert(e);
            None
        }
    };
    let mut hgrm_paths = Vec::new();
    for (i, t) in totals.iter().enumerate() {
        for (kind, h) in [("transit", &t.transit), ("inter_message", &t.inter_message)] {
            let name = format!("{stem}.{}.{kind}.hgrm", consumer_key(i));
            hgrm_paths.extend(keep(
                plan.output
                    .write(&name, hgrm::percentile_distribution(h, 1000.0).as_bytes()),
            ));
        }
    }
    // The run file last: its presence says the others were written before it.
    let mut written = Vec::new();
    for e in export::run_files() {
        written.extend(keep(
            plan.output
                .write(&format!("{stem}{}", e.suffix()), e.render(&run).as_bytes()),
        ));
    }

    write!(out, "\n{}", text::render(&run, plan.colour))?;
    if ring_full > 0 {
        writeln!(
            out,
            "note: the producer found the ring full {ring_full} times (a consumer fell a whole ring behind); those publishes were delayed, not lost"
        )?;
    }
    if rotations_missed > 0 {
        writeln!(
            out,
            "note: {rotations_missed} one-second interval histograms were handed over late (the collector lagged); those intervals are longer in the .hlog, nothing was lost"
        )?;
    }
    if let Some(e) = hlog_error {
        writeln!(
            out,
            "WARNING: the interval log {} is incomplete: {e}",
            hlog_path.display()
        )?;
    }

    if let Some(e) = file_error {
        return Err(anyhow::Error::new(e)
            .context("the run's files are incomplete (the report above is what was measured)"));
    }
    let json_path = written.last().cloned().unwrap_or_default();
    writeln!(out, "\nrun file:     {}", json_path.display())?;
    for p in &written[..written.len().saturating_sub(1)] {
        writeln!(out, "              {}", p.display())?;
    }
    for p in &hgrm_paths {
        writeln!(out, "              {} (HdrHistogram, µs)", p.display())?;
    }
    writeln!(out, "              {} (interval log)", hlog_path.display())?;
    Ok(RunOutcome {
        run,
        json_path,
        hgrm_paths,
        hlog_path,
    })
}

/// A spike verdict as the run file stores it.
fn spike_entry(v: &SpikeVerdict, probes_on: bool) -> SpikeEntry {
    SpikeEntry {
        consumer: consumer_key(v.spike.consumer as usize),
        producer_cpu: v.producer_cpu,
        consumer_cpu: v.consumer_cpu,
        publish_ns: v.spike.publish_ns,
        receive_ns: v.spike.receive_ns,
        transit_ns: v.spike.transit_ns(),
        producer_stalled_ns: v.producer_stalled_ns,
        consumer_stalled_ns: v.consumer_stalled_ns,
        producer_culprits: if probes_on {
            v.producer_culprits.iter().map(stall_culprit).collect()
        } else {
            Vec::new()
        },
        consumer_culprits: if probes_on {
            v.consumer_culprits.iter().map(stall_culprit).collect()
        } else {
            Vec::new()
        },
    }
}

fn stall_culprit(c: &crate::attribution::Share) -> StallCulprit {
    StallCulprit {
        class: c.class.as_str().to_string(),
        name: c.name.clone(),
        detail: c.detail.clone(),
        via: c.via.clone(),
        measured_ns: c.measured_ns,
        inferred_ns: c.inferred_ns,
        episodes: u64::from(c.episodes),
        share: c.share,
    }
}

/// A verdict as the run file stores it.
fn stall_entry(v: &Verdict, probes_on: bool) -> StallEntry {
    let s = &v.stall;
    StallEntry {
        cpu: s.cpu,
        thread: s.thread.display_name(),
        start_ns: s.start_ns,
        end_ns: s.end_ns,
        duration_ns: s.duration_ns(),
        explained_share: probes_on.then_some(v.explained_share),
        culprits: if probes_on {
            v.culprits.iter().map(stall_culprit).collect()
        } else {
            Vec::new()
        },
        incomplete: v.incomplete,
        timeline: v.timeline.clone(),
    }
}

fn write_interval(
    hlog: &mut HlogWriter,
    consumer: usize,
    h: &IntervalHistograms,
    base_mono: Nanos,
    error: &mut Option<std::io::Error>,
) {
    if error.is_some() || h.transit.is_empty() {
        return;
    }
    let offset = h.start_ns.saturating_sub(base_mono);
    let length = h.end_ns.saturating_sub(h.start_ns);
    let key = consumer_key(consumer);
    for (kind, hist) in [("transit", &h.transit), ("inter_message", &h.inter_message)] {
        if let Err(e) = hlog.write(&format!("{key}.{kind}"), hist, offset, length) {
            *error = Some(e);
            return;
        }
    }
}

/// Brings the live model up to date from the pipeline's state.
#[allow(clippy::too_many_arguments)]
fn update_live(
    live: &mut LiveModel,
    attr: &Attribution,
    totals: &[ConsumerTotals],
    view_totals: &[Histogram<u64>],
    workload: &Workload,
    probe: Option<&ProbeSession>,
    now: Nanos,
    record_from: Nanos,
) {
    live.elapsed_ns = now.saturating_sub(record_from).min(live.planned_ns);
    live.messages_per_s = totals
        .first()
        .filter(|t| t.last_interval_ns > 0)
        .map_or(0.0, |t| {
            t.last_messages as f64 * 1e9 / t.last_interval_ns as f64
        });
    live.stalls = attr.book.count();
    use std::sync::atomic::Ordering::Relaxed;
    let queue_drops: u64 = workload
        .counters()
        .iter()
        .map(|(_, c)| c.stalls_dropped.load(Relaxed) + c.spikes_dropped.load(Relaxed))
        .sum();
    live.lost = attr.lost_records + queue_drops;
    live.bpf_cost = probe
        .and_then(|p| p.live_cost())
        .filter(|c| c.events > 0)
        .map(|c| {
            (
                c.run_time_ns as f64 / c.events as f64,
                c.run_time_ns as f64 / now.saturating_sub(record_from).max(1) as f64,
            )
        });
    for (i, c) in live.consumers.iter_mut().enumerate() {
        c.interval = totals.get(i).and_then(|t| t.last_transit.clone());
        c.total = view_totals
            .get(i)
            .filter(|h| !h.is_empty())
            .map(Summary::brief);
    }
    if attr.probes_on {
        // Inferred time is a row of its own, never added to a culprit's measured time.
        let mut rows: Vec<CulpritRow> = Vec::new();
        for c in attr.ranking.brief().into_iter().take(50) {
            let all = c.total_ns().max(1) as f64;
            let row = |name: String, ns: Nanos| CulpritRow {
                class: c.class.as_str().to_string(),
                name,
                detail: c.detail.clone(),
                count: c.episodes,
                total_ns: ns,
                max_ns: c.longest_ns,
                last_seen_ns: c.last_ns.saturating_sub(record_from),
                share: c.share * ns as f64 / all,
            };
            if c.measured_ns > 0 || c.inferred_ns == 0 {
                rows.push(row(c.name.clone(), c.measured_ns));
            }
            if c.inferred_ns > 0 {
                rows.push(row(inferred_row_name(&c.name), c.inferred_ns));
            }
        }
        rows.sort_by_key(|r| std::cmp::Reverse(r.total_ns));
        live.culprits = rows;
    }
    for v in &attr.fresh_spikes {
        let line = text::spike_line(record_from, &spike_entry(v, attr.probes_on));
        if live.feed.back() != Some(&line) {
            live.push_feed(line);
        }
    }
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
