//! The run file: the JSON written at the end of every run, read back by `jitterscope
//! report`. A stable interface (docs/run-file.md): keys may be added, none renamed
//! without bumping `SCHEMA`.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::culprit::policy_name;
use super::seed::Summary;
use crate::model::{
    softirq_name, vector, vector_name, ContainerTag, Cpu, CulpritClass, Ended, FaultKind,
    Interruption, Nanos, TimerCallback, Who, WorkItem, ANY_PID,
};
use crate::platform::input::{self, InputError};
use crate::system::config::Configured;

pub const SCHEMA: &str = "jitterscope.run/2";
/// The first schema, still read: its culprit times (`ns`, `total_ns`, `max_ns`,
/// `cpus[].count`) are read as measured time, its stall counts as episodes, and its spikes'
/// mixed culprit list as the consumer side.
pub const SCHEMA_V1: &str = "jitterscope.run/1";

/// Files larger than this are refused by the reader (bounded memory; a run file holds
/// bounded lists, so a real one is far smaller): `input::RUN_FILE`.
pub const MAX_RUN_FILE_BYTES: u64 = input::RUN_FILE.bytes;

/// What produced a run file: jitterscope's own workload, or a watch of the user's threads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    #[default]
    Run,
    Watch,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunFile {
    pub schema: String,
    /// `run` (the workload; files without the key) or `watch`.
    #[serde(default)]
    pub mode: Mode,
    pub run: RunInfo,
    /// Watch mode: what was watched; absent in runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watch: Option<WatchInfo>,
    /// Watch mode: every watched thread (exited ones too), in place of the workload's
    /// histograms; empty in runs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub threads: Vec<ThreadEntry>,
    pub histograms: Vec<ConsumerHistograms>,
    pub stall_summary: StallSummary,
    /// The worst stalls (bounded list), longest first.
    pub stalls: Vec<StallEntry>,
    /// The culprit ranking over the whole run (empty when the run had no probes).
    pub culprits: Vec<CulpritEntry>,
    /// Messages whose transit exceeded the spike threshold (one per delay episode).
    #[serde(default)]
    pub spike_count: u64,
    /// The worst of them (bounded list), longest transit first, explained through the stalls
    /// of both CPUs inside their window.
    #[serde(default)]
    pub spikes: Vec<SpikeEntry>,
    pub lost: Lost,
    /// What the kernel probes attached and what they cost; absent without probes.
    #[serde(default)]
    pub probes: Option<ProbeInfo>,
    /// What jitterscope itself cost while it recorded; absent in files of older versions.
    #[serde(default)]
    pub overhead: Option<Overhead>,
    /// The configured half of isolation, read for the run's CPUs (`run.cpus`) before it
    /// recorded; absent in files of older versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<Configured>,
}

/// Watch mode: what was asked for.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WatchInfo {
    /// `--pid 4121`, `--tid 4122,4123`, `--comm md-*`, `-- ./engine --fast`.
    pub target: String,
    /// The process followed for new threads (its id as the user sees it), if any.
    #[serde(default)]
    pub pid: Option<u32>,
    /// Records of a thread's run closer than this were joined into one interruption.
    pub join_ns: Nanos,
    /// What the watch could not see, and where every gap is measured; absent in older files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coverage: Option<Coverage>,
    /// `--cgroup`, `--container`: the cgroup v2 path watched, as `/proc/PID/cgroup` shows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<String>,
    /// `--container`: the container it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<WatchedContainer>,
}

/// A watched container: its name, its runtime (`podman`, `docker`, `containerd`, `cri-o`,
/// `crictl`) and its full id.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WatchedContainer {
    pub name: String,
    pub runtime: String,
    pub id: String,
}

/// A watch sees an interruption only where a kernel event (a switch, a wake-up, an IRQ, a
/// softirq, a timer, an IPI, an NMI, a fault) or the KVM steal clock marks it: the watched
/// thread runs no clock loop of jitterscope's, so a gap with no such mark is not in its
/// figures. Its shares are of what it saw.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Coverage {
    /// The kinds of gap this watch could not see on this machine.
    pub blind_to: Vec<BlindSpot>,
    /// The CPUs the watched threads ran on: where a run's own loop (`jitterscope run` with a
    /// consumer there) or the program's own loop timing measures every gap.
    pub cpus: Vec<Cpu>,
}

/// A kind of gap no kernel event marks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BlindSpot {
    /// On a VM: VM exits and the host's interrupt handling while the vCPU is nominally
    /// running (KVM steal counts only the vCPU thread's run-queue delay).
    HostExits,
    /// On a VM without a steal clock: the host running something else on the vCPU's CPU.
    HostPreemption,
    /// On bare metal: system management interrupts (firmware; no kernel event).
    Smi,
}

impl Coverage {
    /// What a watch cannot see on a VM (`virtual_machine`) or bare metal, with or without a
    /// KVM steal clock read.
    pub fn of(virtual_machine: bool, steal_clock: bool, cpus: Vec<Cpu>) -> Coverage {
        let blind_to = match (virtual_machine, steal_clock) {
            (true, true) => vec![BlindSpot::HostExits],
            (true, false) => vec![BlindSpot::HostExits, BlindSpot::HostPreemption],
            (false, _) => vec![BlindSpot::Smi],
        };
        Coverage { blind_to, cpus }
    }
}

/// Watch mode: one watched thread.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ThreadEntry {
    /// Thread and process id as the user sees them (this PID namespace's).
    pub tid: u32,
    pub pid: u32,
    /// The kernel's thread id (differs inside a container).
    pub kernel_tid: u32,
    pub name: String,
    /// CPUs where it was interrupted or ran after waiting.
    pub cpus: Vec<Cpu>,
    /// Seen created after the watch began / exited before it ended (CLOCK_MONOTONIC).
    #[serde(default)]
    pub created_ns: Option<Nanos>,
    #[serde(default)]
    pub exited_ns: Option<Nanos>,
    /// Time it ran plus time it waited runnable over the watch (the kernel's schedstat);
    /// absent where the kernel does not keep it.
    #[serde(default)]
    pub wanted_ns: Option<Nanos>,
    #[serde(default)]
    pub on_cpu_ns: Option<Nanos>,
    /// Interrupted time of every kind, wake-up delays included.
    pub taken_ns: Nanos,
    /// `taken_ns / wanted_ns`.
    #[serde(default)]
    pub share: Option<f64>,
    /// Interruptions while it wanted its CPU: on-CPU, preempted, host preemption.
    pub interruptions: DelayStats,
    /// Woken (or created) until on a CPU.
    pub wakeups: DelayStats,
    /// Per kind: `on_cpu`, `preempted`, `wakeup_delay`, `hypervisor`.
    pub kinds: Vec<KindTotal>,
    /// Its own culprit ranking (the top ones).
    pub culprits: Vec<CulpritEntry>,
    /// Its .hgrm files.
    #[serde(default)]
    pub files: Vec<String>,
}

/// Counts and a distribution of durations.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DelayStats {
    pub count: u64,
    pub total_ns: Nanos,
    pub max_ns: Nanos,
    #[serde(default)]
    pub summary: Option<Summary>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct KindTotal {
    pub kind: String,
    pub count: u64,
    pub total_ns: Nanos,
}

/// The tracer's own cost over the recorded window, beside the workload it measures.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Overhead {
    /// The window the figures cover (the recorded part of the run).
    pub window_ns: Nanos,
    /// CPU time of jitterscope's own threads — collector, probe drain, live view — in that
    /// window; the workload's spinning threads are not counted.
    pub tracer_cpu_ns: u64,
    /// Run time of the BPF programs (kernel statistics; 0 when they were unavailable or the
    /// run had no probes).
    pub bpf_run_ns: u64,
    /// BPF program runs.
    pub bpf_events: u64,
    /// The longest single theft by jitterscope's own threads (class `self`) per measured CPU
    /// where there was one: what sharing a measured CPU cost the workload at worst.
    #[serde(default)]
    pub longest_self: Vec<CpuLongest>,
    /// When jitterscope shared a measured CPU: the share of one CPU its threads kept to
    /// (`collector_budget`), and how often they held back because it was spent — the probes'
    /// record rings held the records meanwhile, or dropped them (`probes.drops`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collector_budget: Option<f64>,
    #[serde(default)]
    pub held_back: u64,
    /// CPU time of jitterscope's threads after the workload stopped, outside the window: the
    /// last records drained and the decisions still waiting (all of them with `at_end`), the
    /// probes detached, the memory unlocked.
    #[serde(default)]
    pub after_cpu_ns: u64,
    /// CPU time to write the run's files that do not show this figure (.hgrm, .svg,
    /// .trace.json), after `after_cpu_ns`. Not in it: the Markdown report and this run file,
    /// rendered once it is known, and the printed report.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub files_cpu_ns: u64,
    /// The culprits were decided after the workload stopped (`--attribution end`), the
    /// records waiting in the probes' rings meanwhile.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub at_end: bool,
    /// With `at_end`: the stalls decided while the workload still ran, because a ring or a
    /// queue needed room before the end (0 when the rings held the whole run).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub decided_in_run: u64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuLongest {
    pub cpu: Cpu,
    pub ns: Nanos,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeInfo {
    /// Tracepoints not available on this kernel (not traced).
    pub unavailable: Vec<String>,
    /// Records per measured CPU.
    pub events: Vec<CpuCount>,
    /// Records dropped because a record ring was full, per CPU.
    pub drops: Vec<CpuCount>,
    /// BPF run time per program (kernel run-time statistics).
    pub costs: Vec<ProgramCostEntry>,
    /// Stalls whose window overlapped lost records.
    pub incomplete_stalls: u64,
    /// False when the kernel refused BPF run-time statistics (they need CAP_SYS_ADMIN): the
    /// costs are then unknown, not zero.
    #[serde(default = "yes")]
    pub stats_enabled: bool,
    /// False when /proc/kallsyms hid its addresses (no CAP_SYSLOG): work functions are shown
    /// as addresses.
    #[serde(default = "yes")]
    pub symbols: bool,
    /// True when the probes read a KVM steal clock (`steal_time`): uncovered time is then
    /// split into `hypervisor` and `unexplained`.
    #[serde(default)]
    pub steal_clock: bool,
    /// Why there is no steal clock (empty when there is one).
    #[serde(default)]
    pub steal_note: String,
    /// Steal-clock growth per measured CPU over the recorded window.
    #[serde(default)]
    pub steal: Vec<CpuSteal>,
}

fn yes() -> bool {
    true
}

impl Default for ProbeInfo {
    /// Nothing measured yet, with statistics and symbols available (as in older files).
    fn default() -> Self {
        ProbeInfo {
            unavailable: Vec::new(),
            events: Vec::new(),
            drops: Vec::new(),
            costs: Vec::new(),
            incomplete_stalls: 0,
            stats_enabled: true,
            symbols: true,
            steal_clock: false,
            steal_note: String::new(),
            steal: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuCount {
    pub cpu: Cpu,
    pub count: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProgramCostEntry {
    pub program: String,
    pub run_count: u64,
    pub run_time_ns: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunInfo {
    pub label: String,
    pub cpus: Vec<Cpu>,
    pub producer_cpu: Cpu,
    pub consumer_cpus: Vec<Cpu>,
    pub start_unix_ns: u64,
    /// CLOCK_MONOTONIC time recording started (after warm-up): stall and event times count
    /// from here in reports.
    #[serde(default)]
    pub record_from_ns: Nanos,
    /// Recorded time (warm-up excluded).
    pub duration_ns: Nanos,
    pub kernel: String,
    pub host: String,
    /// `completed`; `interrupted` when a signal or the live view ended the run early;
    /// `cpu_lost` when a workload thread was moved off its CPU (offlined, cpuset changed).
    pub ended: Ended,
    /// Why the run ended early, in words (empty when it completed).
    #[serde(default)]
    pub end_reason: String,
    pub settings: Settings,
    /// The cross-core floor between the producer's and the first consumer's CPU, measured
    /// right before recording (absent when unpinned or on one CPU, and in older files).
    #[serde(default)]
    pub floor: Option<Floor>,
}

/// One-way cache-line transfer time between two CPUs (ping-pong), the physical floor of a
/// message hop. On VMs it moves with the host: runs are compared against their own floor.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Floor {
    pub from_cpu: Cpu,
    pub to_cpu: Cpu,
    pub min_ns: Nanos,
    pub p50_ns: Nanos,
    pub p99_ns: Nanos,
    pub rounds: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    pub pinned: bool,
    pub interval_ns: Nanos,
    pub warmup_ns: Nanos,
    pub planned_duration_ns: Nanos,
    pub stall_threshold_ns: Nanos,
    #[serde(default)]
    pub spike_threshold_ns: Nanos,
    /// True when the threshold was derived from the measured loop period.
    pub stall_threshold_auto: bool,
    /// True when kernel probes ran, i.e. stalls were attributed.
    pub probes: bool,
    /// The consumers' SCHED_FIFO priority (`--fifo`); absent: SCHED_OTHER (and older files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumer_fifo: Option<u8>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConsumerHistograms {
    /// `accumulator`, `journaller`, `consumer-3` …
    pub consumer: String,
    pub cpu: Cpu,
    pub transit: Summary,
    pub inter_message: Summary,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StallSummary {
    pub count: u64,
    pub total_ns: Nanos,
    pub longest_ns: Nanos,
    pub per_cpu: Vec<CpuStalls>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuStalls {
    pub cpu: Cpu,
    pub count: u64,
    pub total_ns: Nanos,
    pub longest_ns: Nanos,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StallEntry {
    pub cpu: Cpu,
    /// `producer`, `accumulator`, `journaller`, `consumer-3` …
    pub thread: String,
    pub start_ns: Nanos,
    pub end_ns: Nanos,
    pub duration_ns: Nanos,
    /// Share of the stall covered by kernel events; null when the run had no probes.
    pub explained_share: Option<f64>,
    pub culprits: Vec<StallCulprit>,
    /// True when kernel records for this window were lost (the verdict may be partial).
    #[serde(default)]
    pub incomplete: bool,
    /// The kernel's interruption records around the stall (for timelines and traces).
    #[serde(default)]
    pub timeline: Vec<TimelineRecord>,
}

/// One kernel interruption record of a stall's timeline, in words.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimelineRecord {
    pub cpu: Cpu,
    pub class: CulpritClass,
    pub start_ns: Nanos,
    pub end_ns: Nanos,
    /// Class-specific number: IRQ number, softirq vector, pid, IPI vector, new frequency (kHz).
    pub id: u64,
    /// `kworker/3:1`, `36 virtio1-req.0`, `NET_RX`, `local timer`, `cpu 3` …
    pub name: String,
    /// Work function, scheduling policy, `3000000→1200000 kHz` …; empty when none.
    pub detail: String,
    /// The task involved (kworker, task, kthread), 0 when none.
    pub pid: u32,
    /// The enclosing episode's class when this one is nested.
    pub parent: Option<CulpritClass>,
    /// Watch mode: the watched thread (kernel tid) that was on the CPU, 0 when none.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub victim: u32,
}

impl TimelineRecord {
    pub fn of(i: &Interruption) -> TimelineRecord {
        TimelineRecord {
            cpu: i.cpu,
            class: i.class,
            start_ns: i.start_ns,
            end_ns: i.end_ns,
            id: i.id,
            name: super::culprit::name(&i.who),
            detail: super::culprit::detail(&i.who),
            pid: i.pid,
            parent: i.parent,
            victim: i.victim,
        }
    }

    pub fn duration_ns(&self) -> Nanos {
        self.end_ns.saturating_sub(self.start_ns)
    }
}

fn is_zero_u32(v: &u32) -> bool {
    *v == 0
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpikeEntry {
    /// `accumulator`, `journaller` …
    pub consumer: String,
    pub producer_cpu: Cpu,
    pub consumer_cpu: Cpu,
    pub publish_ns: Nanos,
    pub receive_ns: Nanos,
    pub transit_ns: Nanos,
    pub producer_stalled_ns: Nanos,
    pub consumer_stalled_ns: Nanos,
    /// Why the producer held the message after its publish time; `share` is of the transit.
    #[serde(default)]
    pub producer_culprits: Vec<StallCulprit>,
    /// Why the consumer did not take it once visible; `share` is of the transit.
    #[serde(default, alias = "culprits")]
    pub consumer_culprits: Vec<StallCulprit>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StallCulprit {
    pub class: CulpritClass,
    pub name: String,
    pub detail: String,
    /// Who queued the work or sent the IPI, where the probes saw it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub via: String,
    /// Time inside its kernel records (for `hypervisor`: steal-clock growth; for
    /// `unexplained`/`lost`: the uncovered time).
    #[serde(alias = "ns")]
    pub measured_ns: Nanos,
    /// Time given to it by the entry/exit rule (uncovered, next to its records).
    #[serde(default)]
    pub inferred_ns: Nanos,
    /// Steal inside its task-level runs, given to `hypervisor` (the host held the vCPU while
    /// it was current): part of its runs' span, not of `measured_ns`. Written when not zero.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub host_ns: Nanos,
    /// Its episodes (records) in this stall.
    #[serde(default = "one")]
    pub episodes: u64,
    /// (measured + inferred) / stall (or transit) time.
    pub share: f64,
    /// The container a task ran in (as `who.container` of a `culprits` row); absent for a
    /// task in none, for other culprits, and in files written before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<ContainerEntry>,
}

fn one() -> u64 {
    1
}

fn is_zero(n: &Nanos) -> bool {
    *n == 0
}

impl StallCulprit {
    pub fn ns(&self) -> Nanos {
        self.measured_ns.saturating_add(self.inferred_ns)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CulpritEntry {
    pub class: CulpritClass,
    pub name: String,
    pub detail: String,
    /// Episodes (records) that stole time from a stall.
    #[serde(alias = "count")]
    pub episodes: u64,
    /// Stolen time inside its kernel records (see `StallCulprit::measured_ns`).
    #[serde(alias = "total_ns")]
    pub measured_ns: Nanos,
    /// Stolen time inferred by the entry/exit rule, never part of `measured_ns`.
    #[serde(default)]
    pub inferred_ns: Nanos,
    /// Steal inside its runs, given to `hypervisor` (see `StallCulprit::host_ns`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub host_ns: Nanos,
    /// The longest single episode's theft.
    #[serde(alias = "max_ns")]
    pub longest_ns: Nanos,
    /// Share of all stall time (measured and inferred).
    pub share: f64,
    pub advice: String,
    /// Stolen time per CPU.
    #[serde(default)]
    pub cpus: Vec<CpuTheftEntry>,
    /// An IPI jitterscope sent itself (class `self`): its system vector, by the kernel's name
    /// (`reschedule`, `call-function`), as a recorder names the vector's own time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vector: Option<String>,
    /// A row of one command name's processes (more than one: a shell loop's, a cron job's);
    /// `name` is then the command name alone. Absent for one process and for other culprits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes: Option<ProcessesEntry>,
    /// Who it is, as data (`model::Who`): what programs match rows on. Absent in files
    /// written before it (read through `CulpritEntry::who`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub who: Option<WhoEntry>,
}

/// The processes a culprit row groups.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessesEntry {
    /// Processes (pids) told apart.
    pub count: u64,
    /// More took part than `count`: past the bound on processes told apart in one run
    /// (`attribution::ranking::MAX_CULPRITS`), their time is the row's but their pids are not
    /// told apart.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub more: bool,
    /// The processes that stole the most, at most `attribution::ranking::PROCESSES_LISTED`,
    /// the most first.
    pub listed: Vec<ProcessEntry>,
    /// Processes told apart but not listed (`count` minus the listed).
    pub not_listed: u64,
}

/// One process of a grouped row.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessEntry {
    pub pid: u32,
    pub episodes: u64,
    pub measured_ns: Nanos,
    pub inferred_ns: Nanos,
    pub longest_ns: Nanos,
}

/// A culprit's identity in the run file: the fields of `model::Who` that name it, each
/// present only where that kind of culprit has it — a task `{comm, pid}`, a kernel thread
/// `{comm}`, a kworker `{worker, function}`, an IRQ `{irq, action}`, a softirq `{softirq}`,
/// a system vector `{vector}`, an hrtimer `{timer, function | comm, pid}`, an NMI
/// `{handler}`, a CPU's frequency or host preemption `{cpu}`, a page fault `{fault}`, a
/// throttled thread's policy `{policy}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WhoEntry {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comm: Option<String>,
    /// A task's pid; absent for culprits folded by command name (`model::ANY_PID`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<String>,
    /// A work item's or an hrtimer's function, symbolised.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub irq: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    /// The softirq vector by the kernel's name (`NET_RX`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub softirq: Option<String>,
    /// A system vector by the kernel's name (`local timer`, `reschedule`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vector: Option<String>,
    /// What an expired hrtimer ran: `tick`, `wakeup`, `own_sleep`, `function`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timer: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handler: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<Cpu>,
    /// `minor`, `major`, `failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fault: Option<String>,
    /// The scheduling policy of the thread a `throttled` row held off (`SCHED_FIFO`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    /// The container a task ran in (found while it was alive); absent for a task in none,
    /// for other culprits, and in files written before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<ContainerEntry>,
}

/// A task's container as the run file stores it (`model::ContainerTag`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerEntry {
    /// The container's name (its short id when no source named it).
    pub name: String,
    /// `podman`, `docker`, `containerd`, `cri-o`.
    pub runtime: String,
    /// The first 12 hex digits of its id.
    pub id: String,
    /// `namespace/name` of its pod on Kubernetes (the pod's UID when nothing named it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
}

impl ContainerEntry {
    pub fn of(c: &ContainerTag) -> ContainerEntry {
        ContainerEntry {
            name: c.name.clone(),
            runtime: c.runtime.clone(),
            id: c.short_id.clone(),
            pod: c.pod.clone(),
        }
    }
}

impl WhoEntry {
    /// The run file's form of `who`.
    pub fn of(who: &Who) -> WhoEntry {
        let t = |s: &crate::model::Text| Some(s.to_string());
        let pid = |p: u32| (p != ANY_PID).then_some(p);
        let mut e = WhoEntry::default();
        match who {
            Who::Task {
                comm,
                pid: p,
                container,
                ..
            } => {
                (e.comm, e.pid) = (t(comm), pid(*p));
                e.container = container.as_deref().map(ContainerEntry::of);
            }
            Who::Kthread { comm } => e.comm = t(comm),
            Who::Work { worker, item } => {
                e.worker = t(worker);
                if let WorkItem::Function(f) = item {
                    e.function = t(f);
                }
            }
            Who::Irq { number, action } => (e.irq, e.action) = (Some(*number), t(action)),
            Who::Softirq { vector } => e.softirq = Some(softirq_name(*vector)),
            Who::Vector { vector } | Who::OwnIpi { vector, .. } => {
                e.vector = Some(vector_name(*vector).to_string())
            }
            Who::LocalTimer { .. } => e.vector = Some(vector_name(vector::LOCAL_TIMER).into()),
            Who::Hrtimer { callback, .. } => {
                let kind = match callback {
                    TimerCallback::Tick => "tick",
                    TimerCallback::Wakeup { comm, pid: p } => {
                        (e.comm, e.pid) = (t(comm), pid(*p));
                        "wakeup"
                    }
                    TimerCallback::OwnSleep { comm } => {
                        e.comm = t(comm);
                        "own_sleep"
                    }
                    TimerCallback::Function(f) => {
                        e.function = t(f);
                        "function"
                    }
                };
                e.timer = Some(kind.to_string());
            }
            Who::Nmi { handler } => e.handler = t(handler),
            Who::Freq { cpu, .. } | Who::Host { cpu } => e.cpu = Some(*cpu),
            Who::Fault { kind } => {
                let k = match kind {
                    FaultKind::Minor => "minor",
                    FaultKind::Major => "major",
                    FaultKind::Failed => "failed",
                };
                e.fault = Some(k.to_string());
            }
            Who::Throttled { policy } => e.policy = Some(policy_name(*policy).to_string()),
            Who::AnyHost | Who::Unexplained { .. } | Who::Lost | Who::Others => {}
        }
        e
    }

    /// The identity of a row written before `who` was (`jitterscope.run/1`, and `/2` files
    /// of earlier versions), from its words: the one place the run file's words are read
    /// back — a task's `comm[pid]`, an IRQ's `number action`, a kworker's worker and work
    /// function, a kernel thread's comm, a softirq's name.
    fn from_words(class: CulpritClass, name: &str, detail: &str) -> WhoEntry {
        let mut e = WhoEntry::default();
        match class {
            CulpritClass::Task | CulpritClass::SelfNoise => {
                match name.rsplit_once('[').filter(|_| name.ends_with(']')) {
                    Some((comm, pid)) => {
                        e.comm = Some(comm.to_string());
                        e.pid = pid.trim_end_matches(']').parse().ok();
                    }
                    None => e.comm = Some(name.to_string()),
                }
            }
            CulpritClass::Kthread => e.comm = Some(name.to_string()),
            CulpritClass::Kworker => {
                e.worker = Some(name.to_string());
                e.function =
                    (!detail.is_empty() && !detail.starts_with('(')).then(|| detail.to_string());
            }
            CulpritClass::Irq => {
                if let Some((n, action)) = name.split_once(' ') {
                    e.irq = n.parse().ok();
                    e.action = Some(action.to_string());
                }
            }
            CulpritClass::Softirq => e.softirq = Some(name.to_string()),
            _ => {}
        }
        e
    }
}

impl CulpritEntry {
    pub fn total_ns(&self) -> Nanos {
        self.measured_ns.saturating_add(self.inferred_ns)
    }

    /// Who the row is: its `who`, or for a file written before that key, what its words
    /// say (`WhoEntry::from_words`).
    pub fn who(&self) -> WhoEntry {
        self.who
            .clone()
            .unwrap_or_else(|| WhoEntry::from_words(self.class, &self.name, &self.detail))
    }

    /// Measured and inferred time on `cpu`.
    pub fn on_cpu(&self, cpu: Cpu) -> Nanos {
        self.cpus
            .iter()
            .filter(|c| c.cpu == cpu)
            .fold(0u64, |s, c| {
                s.saturating_add(c.measured_ns)
                    .saturating_add(c.inferred_ns)
            })
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuTheftEntry {
    pub cpu: Cpu,
    #[serde(alias = "count")]
    pub measured_ns: Nanos,
    #[serde(default)]
    pub inferred_ns: Nanos,
    /// Steal inside its runs on this CPU, given to `hypervisor`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub host_ns: Nanos,
    /// Its episodes on this CPU; absent in files of older versions (and then 0).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub episodes: u64,
}

/// Steal-clock growth seen on a CPU over the recorded window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuSteal {
    pub cpu: Cpu,
    pub steal_ns: Nanos,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Lost {
    pub ring_buffer_drops: u64,
    /// Stalls that did not fit the workload's queues.
    pub workload_queue_drops: u64,
    /// Messages seen out of sequence by a consumer (a ring bug if ever non-zero).
    #[serde(default)]
    pub sequence_errors: u64,
    /// A watch: threads of its target the probes' thread map had no room for, found at the
    /// start or created (or moved into the watched cgroup) during the watch; absent when 0
    /// and in older files.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub threads_not_watched: u64,
}

/// Why a run file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum RunFileError {
    #[error("cannot read run file {path}: {}", not_a_run_file(source))]
    Input { path: String, source: InputError },
    #[error("cannot read run file {path}: it is empty; a run writes it at its end — was the run killed before that?")]
    Empty { path: String },
    #[error("cannot read run file {path}: schema is {found:?}, this jitterscope reads {SCHEMA:?} and {SCHEMA_V1:?}; use the jitterscope version that wrote it")]
    Schema { path: String, found: String },
    #[error("cannot read run file {path}: not a jitterscope run file ({detail})")]
    Invalid { path: String, detail: String },
}

impl RunFile {
    pub fn to_json(&self) -> String {
        // Serialising plain data structs cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// Parses a run file, checking the schema before the rest so that a file of another
    /// version gets the right message.
    pub fn from_json(path: &str, text: &str) -> Result<RunFile, RunFileError> {
        if text.trim().is_empty() {
            return Err(RunFileError::Empty { path: path.into() });
        }
        // serde reads a struct from a JSON array too (`[1]` would be "schema 1"): a run file
        // is an object.
        if !text.trim_start().starts_with('{') {
            return Err(RunFileError::Invalid {
                path: path.into(),
                detail: "the text is not a JSON object".into(),
            });
        }
        #[derive(Deserialize)]
        struct Head {
            schema: Option<serde_json::Value>,
        }
        let head: Head = serde_json::from_str(text).map_err(|e| RunFileError::Invalid {
            path: path.into(),
            detail: describe_json_error(&e),
        })?;
        match head.schema {
            Some(serde_json::Value::String(s)) if s == SCHEMA || s == SCHEMA_V1 => {}
            Some(other) => {
                let found = match other {
                    serde_json::Value::String(s) => s,
                    v => v.to_string(),
                };
                return Err(RunFileError::Schema {
                    path: path.into(),
                    found,
                });
            }
            None => {
                return Err(RunFileError::Invalid {
                    path: path.into(),
                    detail: "no \"schema\" key".into(),
                })
            }
        }
        serde_json::from_str(text).map_err(|e| RunFileError::Invalid {
            path: path.into(),
            detail: describe_json_error(&e),
        })
    }

    /// Reads a run file (`-`: standard input), at most `input::RUN_FILE` of it.
    pub fn read(path: &Path) -> Result<RunFile, RunFileError> {
        let shown = match input::is_stdin(path) {
            true => "(standard input)".to_string(),
            false => path.display().to_string(),
        };
        let text =
            input::read_text(path, input::RUN_FILE).map_err(|source| RunFileError::Input {
                path: shown.clone(),
                source,
            })?;
        RunFile::from_json(&shown, &text)
    }
}

/// What an input error says about a run file: too large or not text, it is not one.
pub fn not_a_run_file(e: &InputError) -> String {
    match e {
        InputError::TooLarge(_) | InputError::NotText { .. } | InputError::Refused { .. } => {
            format!("not a run file: {e}")
        }
        _ => e.to_string(),
    }
}

fn describe_json_error(e: &serde_json::Error) -> String {
    use serde_json::error::Category;
    match e.classify() {
        Category::Eof => format!(
            "the JSON ends early at line {} column {}: the file is truncated",
            e.line(),
            e.column()
        ),
        Category::Syntax => format!("invalid JSON: {e}"),
        Category::Data => format!("unexpected content: {e}"),
        Category::Io => format!("{e}"),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// A run-wide culprit with only its class, name and stolen time set (renderers' tests).
    pub(crate) fn culprit(class: CulpritClass, name: &str, total_ns: u64) -> CulpritEntry {
        CulpritEntry {
            class,
            name: name.into(),
            detail: String::new(),
            episodes: 1,
            measured_ns: total_ns,
            inferred_ns: 0,
            host_ns: 0,
            longest_ns: total_ns,
            share: 0.5,
            advice: String::new(),
            cpus: vec![],
            vector: None,
            processes: None,
            who: None,
        }
    }

    /// A small valid run file, for the renderers' tests too.
    pub(crate) fn sample() -> RunFile {
        let summary = Summary {
            count: 3,
            min: 10,
            mean: 20.5,
            max: 40,
            percentiles: BTreeMap::from([("50".to_string(), 20), ("99.9999".to_string(), 40)]),
            curve: vec![(0.0, 10), (0.5, 20), (1.0, 40)],
        };
        RunFile {
            schema: SCHEMA.into(),
            mode: crate::report::runfile::Mode::Run,
            watch: None,
            threads: Vec::new(),
            run: RunInfo {
                label: "x".into(),
                cpus: vec![1, 3],
                producer_cpu: 1,
                consumer_cpus: vec![3],
                start_unix_ns: 1,
                record_from_ns: 0,
                duration_ns: 2,
                kernel: "k".into(),
                host: "h".into(),
                ended: Ended::Completed,
                end_reason: String::new(),
                settings: Settings {
                    pinned: true,
                    interval_ns: 10_000,
                    warmup_ns: 0,
                    planned_duration_ns: 2,
                    stall_threshold_ns: 1_000,
                    spike_threshold_ns: 10_000,
                    stall_threshold_auto: true,
                    probes: true,
                    consumer_fifo: None,
                },
                floor: None,
            },
            histograms: vec![ConsumerHistograms {
                consumer: "accumulator".into(),
                cpu: 3,
                transit: summary.clone(),
                inter_message: summary,
            }],
            stall_summary: StallSummary::default(),
            stalls: vec![StallEntry {
                cpu: 3,
                thread: "accumulator".into(),
                start_ns: 5,
                end_ns: 9,
                duration_ns: 4,
                explained_share: Some(0.75),
                culprits: vec![StallCulprit {
                    class: CulpritClass::Kworker,
                    name: "kworker/3:1".into(),
                    detail: "vmstat_update".into(),
                    via: String::new(),
                    measured_ns: 3,
                    inferred_ns: 0,
                    host_ns: 0,
                    episodes: 1,
                    share: 0.75,
                    container: None,
                }],
                incomplete: false,
                timeline: vec![],
            }],
            culprits: vec![],
            spike_count: 0,
            spikes: vec![],
            lost: Lost::default(),
            probes: None,
            overhead: None,
            config: None,
        }
    }

    #[test]
    fn the_configured_half_round_trips_and_files_without_it_read() {
        let mut r = sample();
        let json = r.to_json();
        assert!(
            !json.contains("\"config\""),
            "no key without a configuration"
        );
        assert_eq!(RunFile::from_json("t", &json).unwrap().config, None);
        r.config = Some(Configured {
            kernel: "6.18.0".into(),
            nohz_full: Some(vec![3]),
            workqueue_cpumask: Some(vec![0]),
            ..Configured::default()
        });
        let back = RunFile::from_json("t", &r.to_json()).unwrap();
        assert_eq!(back.config, r.config);
    }

    #[test]
    fn round_trips() {
        let r = sample();
        assert_eq!(RunFile::from_json("t", &r.to_json()).unwrap(), r);
    }

    #[test]
    fn refuses_other_schemas_and_truncation() {
        let json = sample().to_json();
        let other = json.replace(SCHEMA, "jitterscope.run/3");
        assert!(matches!(
            RunFile::from_json("t", &other),
            Err(RunFileError::Schema { .. })
        ));
        let fields: Vec<serde_json::Value> =
            serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(&json)
                .unwrap()
                .into_iter()
                .map(|(_, v)| v)
                .collect();
        let as_array = serde_json::to_string(&fields).unwrap();
        let e = RunFile::from_json("t", &as_array).unwrap_err().to_string();
        assert!(e.contains("not a JSON object"), "{e}");
        let cut = &json[..json.len() / 2];
        let e = RunFile::from_json("t", cut).unwrap_err().to_string();
        assert!(e.contains("truncated"), "{e}");
    }

    #[test]
    fn a_culprit_row_carries_who_it_is_and_older_rows_read_from_their_words() {
        use crate::model::Who;
        let irq = Who::Irq {
            number: 11,
            action: "virtio0".into(),
        };
        let e = WhoEntry::of(&irq);
        let json = serde_json::to_string(&e).unwrap();
        assert_eq!(json, r#"{"irq":11,"action":"virtio0"}"#);
        let work = WhoEntry::of(&Who::Work {
            worker: "kworker/1:1".into(),
            item: crate::model::WorkItem::Function("vmstat_update".into()),
        });
        assert_eq!(
            serde_json::to_string(&work).unwrap(),
            r#"{"worker":"kworker/1:1","function":"vmstat_update"}"#
        );
        let mut row = culprit(CulpritClass::Irq, "11 virtio0", 1);
        assert_eq!(row.who(), e);
        row.who = Some(WhoEntry::default());
        assert_eq!(row.who(), WhoEntry::default());
        let mut run = sample();
        run.culprits = vec![CulpritEntry {
            who: Some(e.clone()),
            ..culprit(CulpritClass::Irq, "11 virtio0", 1)
        }];
        let back = RunFile::from_json("t", &run.to_json()).unwrap();
        assert_eq!(back.culprits[0].who, Some(e));
    }

    #[test]
    fn a_task_in_a_container_carries_it_and_rows_without_one_read_as_before() {
        use crate::model::{ContainerTag, Who};
        let task = |container| Who::Task {
            comm: "sh".into(),
            pid: 4121,
            policy: 0,
            container,
        };
        let plain = serde_json::to_string(&WhoEntry::of(&task(None))).unwrap();
        assert_eq!(plain, r#"{"comm":"sh","pid":4121}"#);
        let tag = ContainerTag {
            name: "engine".into(),
            runtime: "containerd".into(),
            short_id: "3f2a9c1b7d4e".into(),
            pod: Some("prod/trader-7d9f".into()),
        };
        let e = WhoEntry::of(&task(Some(std::sync::Arc::new(tag))));
        assert_eq!(
            serde_json::to_string(&e).unwrap(),
            r#"{"comm":"sh","pid":4121,"container":{"name":"engine","runtime":"containerd","id":"3f2a9c1b7d4e","pod":"prod/trader-7d9f"}}"#
        );
        let mut run = sample();
        run.culprits = vec![CulpritEntry {
            who: Some(e.clone()),
            ..culprit(CulpritClass::Task, "sh[4121]", 1)
        }];
        let back = RunFile::from_json("t", &run.to_json()).unwrap();
        assert_eq!(back.culprits[0].who, Some(e));
        // A row written before containers were: no container, as it always read.
        let old: WhoEntry = serde_json::from_str(r#"{"comm":"sh","pid":4121}"#).unwrap();
        assert_eq!(old.container, None);
        assert_eq!(old, WhoEntry::of(&task(None)));
    }
}
