//! `jitterscope check`: did the isolation take? For each promise that matters to a spinning or
//! latency-critical thread on the CPUs given — no other tasks, no tick, no device IRQs, no
//! unbound or per-CPU work, no RCU callbacks, no load balancing, no IPIs, no RT throttling,
//! steady frequency, no idle exits, no host preemption, a quiet SMT sibling — what the
//! configuration says (`system::config`) held against what the CPUs did while a thread held
//! them: jitterscope's own spinner on each CPU, or the user's process (`--pid`, `-- COMMAND`),
//! whose threads are then left out of what is seen.
//!
//! The spinners are processes of their own (`__spin`), not threads of this one: a spinner
//! sharing jitterscope's address space would take its TLB shootdowns.

pub mod judge;
pub mod kube;
pub mod observe;
pub mod render;

use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::model::{Cpu, Nanos, TickStops};
use crate::probe::census::{self, CensusConfig, NoObserver};
use crate::report::advice::{Machine, Tracer};
use crate::system::config::{Configured, Root};
use crate::system::container::{NameSources, Names};
use crate::system::counters::{CounterDelta, CpuCounters, IrqLine};
use crate::system::cpus::Topology;
use judge::{Checked, Counted, Finding, Judge, Verdict};
use observe::Inputs;

/// The JSON form's schema name; `docs/check.schema.json` describes it.
pub const SCHEMA: &str = "jitterscope-check/1";

/// What `check` holds the CPUs with while it looks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A spinner of jitterscope's on each CPU, SCHED_FIFO (priority 1) when `fifo`.
    Spinners { fifo: bool },
    /// A running process's threads.
    Pid(u32),
    /// A command started here, and its threads.
    Command(Vec<String>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
    Markdown,
}

/// A check's plan.
#[derive(Debug, Clone)]
pub struct CheckConfig {
    pub cpus: Vec<Cpu>,
    pub duration_ns: Nanos,
    pub target: Target,
    pub format: Format,
    pub ringbuf_bytes: u32,
    /// Write the JSON form here too.
    pub json_file: Option<PathBuf>,
    /// The kubelet's CPU manager checkpoint, where there is one: whose exclusive CPUs the
    /// checked CPUs are, and who broke them.
    pub kubelet: Option<kube::Kubelet>,
}

/// A check's result: its JSON form (`--format json`), and what the text forms render.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckReport {
    pub schema: String,
    pub host: String,
    pub kernel: String,
    pub cpus: Vec<Cpu>,
    /// SMT siblings of the checked CPUs probed for their sake.
    pub siblings: Vec<Cpu>,
    pub duration_ns: Nanos,
    /// How the CPUs were held: `spinners`, `fifo spinners`, `pid 4121`, `command …`.
    pub held_by: String,
    /// 0 when every promise held (or could not be told), 1 when one was broken or not
    /// configured while its culprits were seen, or something not of its pod ran on a
    /// container's exclusive CPU.
    pub exit_code: u8,
    pub findings: Vec<Finding>,
    /// Kernel records lost (rings full) per CPU: the culprits of those windows are unknown.
    pub lost: Vec<(Cpu, u64)>,
    pub tick_stops: Vec<TickStops>,
    /// The kernel's own counters' growth on the checked CPUs over the check (from just
    /// before the probes started to just after they stopped).
    #[serde(default)]
    pub counters: CounterDelta,
    pub config: Configured,
    /// On a Kubernetes node (the kubelet's CPU manager checkpoint read): who owns each
    /// checked CPU, and who broke a container's exclusive CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes: Option<kube::KubeReport>,
}

impl CheckReport {
    /// The promises broken or not configured while their culprits were seen.
    pub fn failed(&self) -> impl Iterator<Item = &Finding> {
        self.findings
            .iter()
            .filter(|f| matches!(f.verdict, Verdict::Broken | Verdict::NotConfigured))
    }
}

/// The command given after `--` could not be started (a usage error for the command line).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct NotStarted(pub String);

/// `jitterscope check`: hold the CPUs, watch them, judge every promise.
pub fn run(cfg: &CheckConfig) -> Result<CheckReport> {
    let topo = Topology::read();
    let config = Configured::read(&Root::live(), &cfg.cpus);
    let siblings: Vec<(Cpu, Cpu)> = cfg
        .cpus
        .iter()
        .flat_map(|&c| {
            config
                .cpu(c)
                .map(|cc| cc.siblings.clone())
                .unwrap_or_default()
                .into_iter()
                .filter(|s| !cfg.cpus.contains(s) && topo.online.contains(s))
                .map(move |s| (s, c))
        })
        .collect();
    let mut probed = cfg.cpus.clone();
    probed.extend(siblings.iter().map(|s| s.0));
    probed.sort_unstable();
    probed.dedup();
    let census_cfg = CensusConfig {
        drain_cpus: topo.housekeeping(&probed),
        cpus: probed,
        duration_ns: cfg.duration_ns,
        ringbuf_bytes: cfg.ringbuf_bytes,
        log: false,
        json: true,
        floor: crate::probe::Reference::Off,
        words: crate::report::culprit::words_of,
    };
    let mut held = Holders::start(&cfg.target, &cfg.cpus, &config)?;
    let first = CpuCounters::sample(&cfg.cpus);
    let result = census::collect(
        &census_cfg,
        &mut NoObserver,
        &mut std::io::sink(),
        &mut || held.poll(),
    );
    let counters = CpuCounters::sample(&cfg.cpus).since(&first);
    let own = held.tids.clone();
    let ended_early = held.stop();
    let collected = result?;
    let machine = Machine {
        online: topo.online.clone(),
        measured: cfg.cpus.clone(),
        virtual_machine: config.virtual_machine,
        tracer: Tracer::Watch,
    };
    let seen = observe::observe(&Inputs {
        records: &collected.records,
        checked: &cfg.cpus,
        siblings: &siblings,
        own: &own,
    });
    let judge = Judge {
        config: &config,
        machine: &machine,
        duration_ns: collected.duration_ns,
        checked: Checked {
            rt_spinners: cfg.target == Target::Spinners { fifo: true },
            spinners: matches!(cfg.target, Target::Spinners { .. }),
        },
        tick_stops: &collected.probes.tick_stops,
        steal_clock: collected.probes.steal_clock,
    };
    let findings: Vec<Finding> = seen
        .iter()
        .flat_map(|s| judge.cpu(s, &counted(&counters, s.cpu)))
        .collect();
    let mut report = CheckReport {
        schema: SCHEMA.to_string(),
        host: crate::system::host_name(),
        kernel: config.kernel.clone(),
        cpus: cfg.cpus.clone(),
        siblings: siblings.iter().map(|s| s.0).collect(),
        duration_ns: collected.duration_ns,
        held_by: describe(&cfg.target, ended_early),
        exit_code: 0,
        findings,
        lost: collected.probes.drops.clone(),
        tick_stops: collected.probes.tick_stops.clone(),
        counters,
        config,
        kubernetes: None,
    };
    report.kubernetes = cfg.kubelet.as_ref().map(|k| {
        let mut names = Names::new(NameSources::default());
        kube::report(
            k,
            &cfg.cpus,
            &report.findings,
            Path::new("/proc"),
            &mut names,
        )
    });
    let breached = report
        .kubernetes
        .as_ref()
        .is_some_and(|k| !k.breaches.is_empty());
    let failed = report.failed().next().is_some() || breached;
    report.exit_code = u8::from(failed);
    Ok(report)
}

/// What the kernel counted on `cpu` that a judgement uses: the time no task ran, the
/// entries into each idle state, the device interrupts delivered.
fn counted(counters: &CounterDelta, cpu: Cpu) -> Counted {
    let Some(d) = counters.cpu(cpu) else {
        return Counted::default();
    };
    Counted {
        idle_ns: d
            .task_run_ns
            .map(|run| counters.span_ns.saturating_sub(run)),
        idle_entries: d.idle.iter().map(|i| (i.name.clone(), i.entries)).collect(),
        irqs: d
            .interrupts
            .iter()
            .filter_map(|i| match i.line {
                IrqLine::Numbered(n) => Some((n, i.count)),
                IrqLine::System(_) => None,
            })
            .collect(),
        span_ns: counters.span_ns,
    }
}

fn describe(target: &Target, ended_early: Option<String>) -> String {
    let base = match target {
        Target::Spinners { fifo: false } => "a SCHED_OTHER spinner on each CPU".to_string(),
        Target::Spinners { fifo: true } => "a SCHED_FIFO spinner on each CPU".to_string(),
        Target::Pid(p) => format!("process {p}"),
        Target::Command(argv) => format!("the command {}", argv.join(" ")),
    };
    match ended_early {
        Some(why) => format!("{base} ({why})"),
        None => base,
    }
}

/// The threads that hold the checked CPUs while the probes look, and their kernel tids (left
/// out of what is seen).
struct Holders {
    children: Vec<Child>,
    /// The process whose threads are polled (`--pid`, or the command's).
    process: Option<u32>,
    tids: HashSet<u32>,
    /// Why the holding ended before the check did.
    ended: Option<String>,
}

impl Holders {
    fn start(target: &Target, cpus: &[Cpu], config: &Configured) -> Result<Holders> {
        let mut h = Holders {
            children: Vec::new(),
            process: None,
            tids: HashSet::new(),
            ended: None,
        };
        match target {
            Target::Spinners { fifo } => {
                let exe = std::env::current_exe()
                    .context("cannot find jitterscope's own executable to start its spinners")?;
                for &cpu in cpus {
                    let mut cmd = Command::new(&exe);
                    cmd.args(["__spin", "--cpu", &cpu.to_string()]);
                    if *fifo {
                        cmd.arg("--fifo");
                    }
                    if let Some(dir) = partition_of(config, cpu) {
                        cmd.arg("--cgroup").arg(dir);
                    }
                    let child = cmd
                        .stdin(std::process::Stdio::null())
                        .spawn()
                        .with_context(|| format!("cannot start the spinner for CPU {cpu}"))?;
                    h.tids.insert(child.id());
                    h.children.push(child);
                }
            }
            Target::Pid(pid) => h.process = Some(*pid),
            Target::Command(argv) => {
                let child = Command::new(&argv[0])
                    .args(&argv[1..])
                    .spawn()
                    .map_err(|e| {
                        NotStarted(format!(
                            "-- {}: cannot start it: {e} (is it on PATH and executable?)",
                            argv[0]
                        ))
                    })?;
                h.process = Some(child.id());
                h.children.push(child);
            }
        }
        h.poll();
        Ok(h)
    }

    /// Adds the process's new threads; false once the process has gone (or a spinner died).
    fn poll(&mut self) -> bool {
        if self.ended.is_some() {
            return false;
        }
        for c in &mut self.children {
            if let Ok(Some(status)) = c.try_wait() {
                self.ended = Some(format!("process {} ended early ({status})", c.id()));
                return false;
            }
        }
        let Some(pid) = self.process else { return true };
        match std::fs::read_dir(format!("/proc/{pid}/task")) {
            Ok(dir) => {
                for e in dir.flatten() {
                    if let Some(tid) = e.file_name().to_str().and_then(|t| t.parse().ok()) {
                        self.tids.insert(tid);
                    }
                }
                true
            }
            Err(_) => {
                self.ended = Some(format!("process {pid} ended"));
                false
            }
        }
    }

    /// Ends the spinners (and a command started here, which the check outlived), by pid;
    /// why the holding ended early, if it did.
    fn stop(mut self) -> Option<String> {
        self.ended.take()
    }
}

impl Drop for Holders {
    /// The children end with the holder, also when a later one could not start or the
    /// probes failed.
    fn drop(&mut self) {
        for c in &mut self.children {
            if matches!(c.try_wait(), Ok(None)) {
                let _ = c.kill();
            }
            let _ = c.wait();
        }
    }
}

/// `__spin`: a spinner pinned to `cpu` (SCHED_FIFO priority 1 when `fifo`), until killed.
pub fn spin(cpu: Cpu, fifo: bool, cgroup: Option<PathBuf>) -> ! {
    crate::platform::affinity::name_current_thread(&format!("js-spin-{cpu}"));
    if crate::platform::affinity::pin_current_thread(cpu).is_err() {
        // A cpuset that leaves the CPU out (a shield, a partition elsewhere): the spinner
        // moves to the cgroup that holds the CPU — a partition given, or the cpuset root.
        let moved = crate::system::actions::join_cpuset(cgroup.as_deref());
        if let Err(e) = crate::platform::affinity::pin_current_thread(cpu) {
            eprintln!(
                "spinner: cannot pin to CPU {cpu}: {e}{}",
                moved
                    .err()
                    .map(|m| format!(" (and {m})"))
                    .unwrap_or_default()
            );
            std::process::exit(1);
        }
    }
    if fifo {
        let param = libc::sched_param { sched_priority: 1 };
        // SAFETY: sets this thread's policy; `param` outlives the call.
        if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } != 0 {
            eprintln!(
                "spinner: cannot become SCHED_FIFO on CPU {cpu}: {}",
                std::io::Error::last_os_error()
            );
            std::process::exit(1);
        }
    }
    loop {
        std::hint::spin_loop();
    }
}

/// The cgroup that holds `cpu` for a spinner: a cpuset partition of it, where one is
/// configured (`Configured::cpusets`); None: the cpuset root.
fn partition_of(config: &Configured, cpu: Cpu) -> Option<PathBuf> {
    let (root, _, _) = crate::system::actions::cpuset_root()?;
    config
        .partition_holding(cpu)
        .map(|s| PathBuf::from(&root).join(s.path.trim_start_matches('/')))
}

/// Writes the report in `format`.
pub fn write(
    report: &CheckReport,
    format: Format,
    colour: bool,
    out: &mut dyn Write,
) -> Result<()> {
    match format {
        Format::Json => writeln!(out, "{}", serde_json::to_string_pretty(report)?)?,
        Format::Text => write!(out, "{}", render::text(report, colour))?,
        Format::Markdown => write!(out, "{}", render::markdown(report))?,
    }
    Ok(())
}
