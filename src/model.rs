//! The vocabulary every layer shares: CPUs, nanosecond times, the workload's stalls, the
//! kernel's interruptions and the culprit classes. Nothing here knows about BPF, the terminal
//! or files; it is plain data.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A logical CPU number as the kernel numbers it.
pub type Cpu = u32;

/// CLOCK_MONOTONIC nanoseconds; the one clock of the whole tool (see docs/design.md).
pub type Nanos = u64;

/// Which spinning thread of the workload a stall belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "role", content = "index")]
pub enum ThreadRole {
    Producer,
    /// The n-th consumer (0 = accumulator, 1 = journaller, …).
    Consumer(u32),
    /// A thread `jitterscope watch` watches, by its kernel thread id.
    Watched(u32),
}

impl ThreadRole {
    /// The seed's names: the first consumer is the accumulator, the second the journaller.
    pub fn display_name(self) -> String {
        match self {
            ThreadRole::Producer => "producer".to_string(),
            ThreadRole::Consumer(0) => "accumulator".to_string(),
            ThreadRole::Consumer(1) => "journaller".to_string(),
            ThreadRole::Consumer(n) => format!("consumer-{}", n + 1),
            ThreadRole::Watched(tid) => format!("thread {tid}"),
        }
    }
}

impl fmt::Display for ThreadRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.display_name())
    }
}

/// A window `[start_ns, end_ns]` during which a spinning thread's loop did not run:
/// two consecutive clock reads were further apart than the stall threshold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Stall {
    /// The CPU the thread was running on when it noticed the stall.
    pub cpu: Cpu,
    pub thread: ThreadRole,
    pub start_ns: Nanos,
    pub end_ns: Nanos,
}

impl Stall {
    pub fn duration_ns(&self) -> Nanos {
        self.end_ns.saturating_sub(self.start_ns)
    }
}

/// Culprit classes; the strings are stable (they appear in the JSON run file).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CulpritClass {
    Kworker,
    Kthread,
    Task,
    Irq,
    Softirq,
    TimerTick,
    Ipi,
    Nmi,
    FreqChange,
    /// A page fault of a watched thread: its own time in the kernel's fault path.
    Fault,
    /// The CPU idled while a workload (or watched) thread was runnable on it: the scheduler
    /// held the thread off (RT throttling, a cgroup's CPU quota). Measured between the two
    /// context switches.
    Throttled,
    #[serde(rename = "self")]
    SelfNoise,
    /// Uncovered time during which the CPU's KVM steal clock grew: the host kept the vCPU off
    /// its physical CPU.
    Hypervisor,
    Unexplained,
    /// Time of a stall whose kernel records were lost (a record ring was full): its cause is
    /// unknown, which is not the same as "no kernel event".
    Lost,
}

impl CulpritClass {
    pub const ALL: [CulpritClass; 15] = [
        CulpritClass::Kworker,
        CulpritClass::Kthread,
        CulpritClass::Task,
        CulpritClass::Irq,
        CulpritClass::Softirq,
        CulpritClass::TimerTick,
        CulpritClass::Ipi,
        CulpritClass::Nmi,
        CulpritClass::FreqChange,
        CulpritClass::Fault,
        CulpritClass::Throttled,
        CulpritClass::SelfNoise,
        CulpritClass::Hypervisor,
        CulpritClass::Unexplained,
        CulpritClass::Lost,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            CulpritClass::Kworker => "kworker",
            CulpritClass::Kthread => "kthread",
            CulpritClass::Task => "task",
            CulpritClass::Irq => "irq",
            CulpritClass::Softirq => "softirq",
            CulpritClass::TimerTick => "timer_tick",
            CulpritClass::Ipi => "ipi",
            CulpritClass::Nmi => "nmi",
            CulpritClass::FreqChange => "freq_change",
            CulpritClass::Fault => "fault",
            CulpritClass::Throttled => "throttled",
            CulpritClass::SelfNoise => "self",
            CulpritClass::Hypervisor => "hypervisor",
            CulpritClass::Unexplained => "unexplained",
            CulpritClass::Lost => "lost",
        }
    }
}

/// How a class nests and shows: the one table every layer reads (matched exhaustively, so a
/// new class fails to compile until it has its row).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClassInfo {
    /// Nesting level: at an instant covered by several records the deepest wins (NMI 4, hard
    /// IRQ / tick / IPI 3, softirq 2, task level 1); 0 for what is not a record.
    pub level: u8,
    /// Terminal colour (ANSI SGR parameters).
    pub ansi: &'static str,
    pub tone: Tone,
    /// Named `comm[pid]` (a task's episode): pids differ from run to run.
    pub per_pid: bool,
    /// A cause was named (false for `unexplained` and `lost`).
    pub named: bool,
    /// How its time is known, as the reports' `how` column says it: `measured` inside kernel
    /// records, `steal` from the KVM steal clock, `residual` for what no record covers (a
    /// culprit's inferred row says `inferred` instead).
    pub how: &'static str,
}

/// How strongly a class is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    Normal,
    /// Not a cause of its own: shown faint.
    Faint,
    /// Should not happen (the tracer's own time, lost records): shown as an alarm.
    Alarm,
}

impl CulpritClass {
    pub const fn info(self) -> ClassInfo {
        use CulpritClass as C;
        let (level, ansi, tone, per_pid, named) = match self {
            C::Kworker | C::Kthread => (1, "33", Tone::Normal, false, true),
            C::Task => (1, "34", Tone::Normal, true, true),
            C::SelfNoise => (1, "1;31", Tone::Alarm, true, true),
            C::Irq | C::Ipi => (3, "35", Tone::Normal, false, true),
            C::TimerTick => (3, "36", Tone::Normal, false, true),
            C::Softirq => (2, "35", Tone::Normal, false, true),
            C::Nmi => (4, "35", Tone::Normal, false, true),
            C::FreqChange => (0, "32", Tone::Normal, false, true),
            // The thread's own kernel time: anything nesting in it (an IRQ) is deeper.
            C::Fault => (1, "32", Tone::Normal, false, true),
            // Nothing ran: a task-level stretch between two context switches.
            C::Throttled => (1, "1;33", Tone::Normal, false, true),
            C::Hypervisor => (0, "2;36", Tone::Normal, false, true),
            C::Unexplained => (0, "2", Tone::Faint, false, false),
            C::Lost => (0, "1;31", Tone::Alarm, false, false),
        };
        let how = match self {
            C::Hypervisor => "steal",
            C::Unexplained | C::Lost => "residual",
            C::Kworker
            | C::Kthread
            | C::Task
            | C::SelfNoise
            | C::Irq
            | C::Ipi
            | C::TimerTick
            | C::Softirq
            | C::Nmi
            | C::FreqChange
            | C::Fault
            | C::Throttled => "measured",
        };
        ClassInfo {
            level,
            ansi,
            tone,
            per_pid,
            named,
            how,
        }
    }

    pub const fn level(self) -> u8 {
        self.info().level
    }
}

impl fmt::Display for CulpritClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// x86 system vectors as the probes number them (`Interruption::id` of `ipi` and
/// `timer_tick` records): `enum js_vector` of bpf/jitterscope.h, which a test in `probe::abi`
/// checks these against.
pub mod vector {
    pub const LOCAL_TIMER: u64 = 1;
    pub const RESCHEDULE: u64 = 2;
    pub const CALL_FUNCTION: u64 = 3;
    pub const CALL_FUNCTION_SINGLE: u64 = 4;
    pub const IRQ_WORK: u64 = 5;
    pub const THERMAL: u64 = 6;
    pub const X86_PLATFORM_IPI: u64 = 7;
    pub const SPURIOUS: u64 = 8;
    pub const ERROR: u64 = 9;
}

/// Softirq vector names as the kernel names them's `softirq_to_name`.
pub fn softirq_name(vec: u64) -> String {
    const NAMES: [&str; 10] = [
        "HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER",
        "RCU",
    ];
    NAMES
        .get(vec as usize)
        .map(|s| s.to_string())
        .unwrap_or_else(|| format!("softirq {vec}"))
}

/// A system vector's name as the probes and the kernel's tracepoints call it.
pub fn vector_name(kind: u64) -> &'static str {
    match kind {
        vector::LOCAL_TIMER => "local timer",
        vector::RESCHEDULE => "reschedule",
        vector::CALL_FUNCTION => "call-function",
        vector::CALL_FUNCTION_SINGLE => "call-function-single",
        vector::IRQ_WORK => "irq_work",
        vector::THERMAL => "thermal",
        vector::X86_PLATFORM_IPI => "x86-platform-ipi",
        vector::SPURIOUS => "spurious",
        vector::ERROR => "error-apic",
        _ => "vector",
    }
}

/// How a run ended (the run file's `ended`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ended {
    Completed,
    /// A signal or the live view ended it early.
    Interrupted,
    /// A workload thread was moved off its CPU (offlined, cpuset changed).
    CpuLost,
    /// Watch mode: every watched thread (or the command started) exited.
    TargetExited,
}

impl Ended {
    pub fn as_str(self) -> &'static str {
        match self {
            Ended::Completed => "completed",
            Ended::Interrupted => "interrupted",
            Ended::CpuLost => "cpu_lost",
            Ended::TargetExited => "target_exited",
        }
    }
}

impl fmt::Display for Ended {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// When a run decides its culprits (`--attribution`): live, as the stalls come, or after the
/// workload stops — the records waiting in the probes' rings and the stalls in the workload's
/// queues meanwhile (unless a ring or a queue needs room before the end). One value from the
/// command line to every place that acts on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Live,
    /// `chosen_by_default`: not asked for, but chosen (`--attribution auto`).
    AtEnd {
        chosen_by_default: bool,
    },
}

impl Decision {
    /// Whether culprits wait for the end of the run.
    pub fn at_end(self) -> bool {
        matches!(self, Decision::AtEnd { .. })
    }

    /// Deciding at the end was chosen, not asked for.
    pub fn at_end_by_default(self) -> bool {
        matches!(
            self,
            Decision::AtEnd {
                chosen_by_default: true
            }
        )
    }
}

/// A kernel name (a task's comm, an IRQ action, a symbol): shared, not copied — the decoder
/// hands out one copy per distinct text and every record, sweep and verdict points at it.
pub type Text = std::sync::Arc<str>;

/// Who a culprit is, as data: the identity that culprits are compared, merged and grouped by.
/// Its words are made where it is shown (`report::culprit`), never parsed back.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Who {
    /// A task named with its pid (`task`, and `self` for jitterscope's own threads), and the
    /// container it ran in, where the session found one while the task was alive.
    Task {
        comm: Text,
        pid: u32,
        policy: u32,
        container: Option<Container>,
    },
    /// A kernel thread, by its name alone.
    Kthread {
        comm: Text,
    },
    /// A kworker and the work item it ran.
    Work {
        worker: Text,
        item: WorkItem,
    },
    Irq {
        number: u64,
        action: Text,
    },
    /// A softirq vector (`softirq_to_name` order: HI, TIMER, NET_TX …).
    Softirq {
        vector: u64,
    },
    /// A system vector's own time (`model::vector`): the timer interrupt, an IPI, irq_work …
    Vector {
        vector: u64,
    },
    /// The local timer interrupt's own time; `callbacks`: it ran hrtimer callbacks (records of
    /// their own, nested in it).
    LocalTimer {
        callbacks: bool,
    },
    /// One expired hrtimer's callback, in the timer interrupt or (`soft`) the HRTIMER softirq.
    Hrtimer {
        soft: bool,
        callback: TimerCallback,
    },
    Nmi {
        handler: Text,
    },
    /// A frequency change of `cpu` (kHz, `old_khz` 0 when unknown), `before_ns` before the
    /// stall it is listed with (0 inside it).
    Freq {
        cpu: Cpu,
        old_khz: u64,
        new_khz: u64,
        before_ns: Nanos,
    },
    Fault {
        kind: FaultKind,
    },
    /// The scheduler held a runnable thread of this `policy` (`SCHED_*`) off its idle CPU:
    /// RT throttling for SCHED_FIFO/RR, a cgroup's CPU quota for the others.
    Throttled {
        policy: u32,
    },
    /// An IPI jitterscope sent itself (`vector`), and why.
    OwnIpi {
        vector: u64,
        why: OwnIpiWhy,
    },
    /// The host kept vCPU `cpu` off its physical CPU (the KVM steal clock grew).
    Host {
        cpu: Cpu,
    },
    /// The host's preemption of any vCPU (the run-wide ranking's one row).
    AnyHost,
    /// No kernel record; `steal_clock`: the machine has a steal clock (host preemption is
    /// told apart).
    Unexplained {
        steal_clock: bool,
    },
    /// Kernel records of the window were lost.
    Lost,
    /// The rest of a class's culprits, past the number a bounded list tells apart.
    Others,
}

impl Who {
    /// A sleeper woken by its hrtimer, its pid folded (`ANY_PID`): one culprit per comm, not
    /// per pid, wherever culprits are grouped. None for any other culprit.
    pub fn sleeper_folded(&self) -> Option<Who> {
        match self {
            Who::Hrtimer {
                soft,
                callback: TimerCallback::Wakeup { comm, .. },
            } => Some(Who::Hrtimer {
                soft: *soft,
                callback: TimerCallback::Wakeup {
                    comm: comm.clone(),
                    pid: ANY_PID,
                },
            }),
            _ => None,
        }
    }

    /// The culprit with its pid folded (`ANY_PID`) for a task or a sleeper woken by its
    /// hrtimer, the culprits that name a pid: one per command name where a bounded list no
    /// longer tells pids apart. None for any other culprit, and for one already folded.
    pub fn pid_folded(&self) -> Option<Who> {
        match self {
            Who::Task {
                comm,
                pid,
                policy,
                container,
            } if *pid != ANY_PID => Some(Who::Task {
                comm: comm.clone(),
                pid: ANY_PID,
                policy: *policy,
                container: container.clone(),
            }),
            Who::Hrtimer {
                callback: TimerCallback::Wakeup { pid, .. },
                ..
            } if *pid != ANY_PID => self.sleeper_folded(),
            _ => None,
        }
    }

    /// A kernel name it holds (a comm, an action, a symbol), if any: the first one.
    pub fn text(&self) -> Option<&Text> {
        match self {
            Who::Task { comm, .. } | Who::Kthread { comm } => Some(comm),
            Who::Work { worker, .. } => Some(worker),
            Who::Irq { action, .. } => Some(action),
            Who::Nmi { handler } => Some(handler),
            Who::Hrtimer { callback, .. } => match callback {
                TimerCallback::Wakeup { comm, .. } | TimerCallback::OwnSleep { comm } => Some(comm),
                TimerCallback::Function(f) => Some(f),
                TimerCallback::Tick => None,
            },
            Who::OwnIpi { why, .. } => match why {
                OwnIpiWhy::TlbShootdown { sender }
                | OwnIpiWhy::WakeUp { sender }
                | OwnIpiWhy::Callback { sender, .. } => Some(sender),
            },
            Who::Softirq { .. }
            | Who::Vector { .. }
            | Who::LocalTimer { .. }
            | Who::Freq { .. }
            | Who::Fault { .. }
            | Who::Throttled { .. }
            | Who::Host { .. }
            | Who::AnyHost
            | Who::Unexplained { .. }
            | Who::Lost
            | Who::Others => None,
        }
    }
}

/// The work a kworker ran.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WorkItem {
    /// The work function, symbolised (`vmstat_update`).
    Function(Text),
    /// The worker's current work function could not be read on this kernel.
    Unreadable,
    /// The worker ran and started no item (woke, found nothing, slept).
    NoItem,
}

/// What an expired hrtimer ran.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TimerCallback {
    /// The scheduler tick (`tick_nohz_handler`, `tick_sched_timer` before Linux 6.9).
    Tick,
    /// The wake-up of a sleeping task.
    Wakeup { comm: Text, pid: u32 },
    /// The wake-up of one of jitterscope's own sleeps.
    OwnSleep { comm: Text },
    /// Any other callback, symbolised.
    Function(Text),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FaultKind {
    Minor,
    /// Waited for I/O.
    Major,
    Failed,
}

/// Why jitterscope sent an IPI to a measured CPU, and which of its threads sent it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OwnIpiWhy {
    TlbShootdown { sender: Text },
    WakeUp { sender: Text },
    Callback { function: Text, sender: Text },
}

/// The container a task culprit ran in, as its runtime and (on Kubernetes) its pod name it:
/// names, looked up once per container while the task was alive; shared by every record of
/// that container's tasks.
pub type Container = std::sync::Arc<ContainerTag>;

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ContainerTag {
    /// The container's name (its short id when no source named it).
    pub name: String,
    /// `podman`, `docker`, `containerd`, `cri-o`.
    pub runtime: String,
    /// The id's first 12 hex digits, as `podman ps` and `docker ps` show it.
    pub short_id: String,
    /// `namespace/name` of its pod on Kubernetes (its UID when no source named it).
    pub pod: Option<String>,
}

/// A pid standing for any: culprits folded by command name (a long run's ranking once full).
/// Linux pids stay below 2^22 (`PID_MAX_LIMIT`), so no task has it.
pub const ANY_PID: u32 = u32::MAX;

/// A culprit's identity: its class and who.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Culprit {
    pub class: CulpritClass,
    pub who: Who,
}

/// Who queued the work or sent the IPI that brought a culprit to a measured CPU.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Sender {
    pub kind: CauseKind,
    pub cpu: Cpu,
    pub comm: Text,
    pub pid: u32,
    /// The IPI's callback, symbolised; empty when none (a reschedule IPI).
    pub function: Text,
    /// Where `comm[pid]` is only the task an interrupt interrupted, the interrupt.
    pub from: SentFrom,
}

/// How a culprit came to the CPU: its sender, and the task a wake-up IPI woke.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Via {
    pub sender: Option<Sender>,
    pub woke: Option<Who>,
}

/// One completed episode during which something other than the workload held a CPU (or a
/// frequency change on it), as the probes report it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interruption {
    pub cpu: Cpu,
    pub class: CulpritClass,
    pub start_ns: Nanos,
    /// Equal to `start_ns` for instantaneous events (a frequency change).
    pub end_ns: Nanos,
    /// Class-specific number: IRQ number, softirq vector, pid, IPI vector, new frequency (kHz).
    pub id: u64,
    /// Who held the CPU: a kworker and its work item, an IRQ and its action, a task …
    pub who: Who,
    /// The task involved (kworker, task, kthread), 0 when none.
    pub pid: u32,
    /// The enclosing episode's class when this one is nested (an IRQ inside a kworker run).
    pub parent: Option<CulpritClass>,
    /// Watch mode: the watched thread (kernel tid) that was on the CPU when this happened —
    /// an interruption of its own run; 0 when none (always in a run).
    pub victim: u32,
}

impl Interruption {
    /// The culprit this record names.
    pub fn culprit(&self) -> Culprit {
        Culprit {
            class: self.class,
            who: self.who.clone(),
        }
    }
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}

impl Interruption {
    pub fn duration_ns(&self) -> Nanos {
        self.end_ns.saturating_sub(self.start_ns)
    }
}

/// Why something arrived on a measured CPU: work queued to it, or an IPI sent to it, by
/// another task or CPU. A hint attached to kworker and IPI culprits ("queued by …").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cause {
    /// The measured CPU the work or IPI was for.
    pub target_cpu: Cpu,
    pub at_ns: Nanos,
    pub kind: CauseKind,
    /// The CPU, task and pid that queued or sent it.
    pub sender_cpu: Cpu,
    pub sender_comm: String,
    pub sender_pid: u32,
    /// Sent by one of jitterscope's own threads.
    #[serde(default)]
    pub sender_is_self: bool,
    /// The context it was sent from on the sender's CPU: the task named above, or an
    /// interrupt that only interrupted that task.
    #[serde(default, skip_serializing_if = "SentFrom::is_task")]
    pub sent_from: SentFrom,
    /// The work function or IPI callback, symbolised (`vmstat_update`), and the IPI's
    /// callsite where known.
    pub what: String,
    pub callsite: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CauseKind {
    QueueWork,
    Ipi,
}

/// The context work was queued or an IPI sent from, on the sender's CPU (its preempt count).
/// Outside `Task` the current task there had nothing to do with it: it was only interrupted.
/// What was open is known when the sender's CPU is measured; elsewhere only the level.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum SentFrom {
    /// The current task's own doing (a system call, a kernel thread's work).
    #[default]
    Task,
    /// A softirq being served: its vector when known (TIMER: a timer expired, e.g. delayed
    /// work's).
    Softirq {
        vector: Option<u64>,
    },
    /// An hrtimer callback run from the HRTIMER softirq.
    SoftHrtimer,
    /// A hard interrupt: which, when known.
    HardIrq,
    Irq {
        number: u32,
    },
    /// A system vector (the local timer, an IPI; `vector::*`).
    Vector {
        vector: u64,
    },
    /// An hrtimer callback run from the timer interrupt.
    Hrtimer,
    Nmi,
}

impl SentFrom {
    pub fn is_task(&self) -> bool {
        *self == SentFrom::Task
    }
}

/// Growth of a CPU's KVM steal clock seen by the probes: between `from_ns` (the previous
/// probe event on that CPU, when the clock was last read) and `to_ns` (this read), the host
/// kept the vCPU off its physical CPU for `steal_ns` in all. Where in that window is not
/// known; guest code ran at both ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StealSample {
    pub cpu: Cpu,
    pub from_ns: Nanos,
    pub to_ns: Nanos,
    pub steal_ns: Nanos,
    /// Watch mode: the watched thread on the CPU at both ends of the window (its kernel tid),
    /// 0 when none.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub victim: u32,
}

/// A message that took longer than the spike threshold from publish to receive: explained
/// through the stalls of the producer's and the consumer's CPUs inside `[publish, receive]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spike {
    /// Consumer index (0 = accumulator).
    pub consumer: u32,
    pub publish_ns: Nanos,
    pub receive_ns: Nanos,
}

impl Spike {
    pub fn transit_ns(&self) -> Nanos {
        self.receive_ns.saturating_sub(self.publish_ns)
    }
}

/// Watch mode: why a watched thread waited for a CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WaitKind {
    /// Switched out while still runnable: preempted, until it ran again.
    Preempted,
    /// Woken from sleep, until it ran: the wake-up delay.
    Wakeup,
    /// Created, until it first ran.
    New,
}

/// Watch mode: a watched thread wanted a CPU it did not have, from `start_ns` until it ran on
/// `cpu` at `end_ns` — where it waited first is `from_cpu`, and if it was moved while waiting,
/// the last move was at `migrated_ns`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Wait {
    /// Kernel thread id.
    pub tid: u32,
    pub name: String,
    pub kind: WaitKind,
    pub start_ns: Nanos,
    pub end_ns: Nanos,
    pub from_cpu: Cpu,
    pub cpu: Cpu,
    pub migrated_ns: Option<Nanos>,
}

impl Wait {
    pub fn duration_ns(&self) -> Nanos {
        self.end_ns.saturating_sub(self.start_ns)
    }
}

/// Watch mode: a thread of the watched process was created, a watched thread exited, or one
/// took another id by an exec.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadEvent {
    /// Kernel thread id (after an exec, its new one).
    pub tid: u32,
    /// Its id in jitterscope's PID namespace (what the user sees), 0 when it has none there.
    pub ns_tid: u32,
    /// Its process's id in jitterscope's PID namespace, 0 when it has none there.
    pub ns_pid: u32,
    pub name: String,
    pub at_ns: Nanos,
    pub change: ThreadChange,
}

/// What happened to a watched thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ThreadChange {
    /// Watched from now: created by this kernel thread id (0: moved into the watched cgroup).
    Created { by: u32 },
    /// Exited; its schedstat as it left, (on a CPU, waiting for one) ns, from the kernel's
    /// record of the exit (the thread is gone before /proc could be read).
    Exited { sched: (Nanos, Nanos) },
    /// It called exec beside its process's main thread and the kernel gave it that thread's
    /// id (`tid`; the main thread exited first): it was this kernel thread id until then.
    Exec { old_tid: u32 },
}

/// Deciding at the end, a record the probes' drain thread glanced at where it waits in the
/// rings (or took in before the end), as the live preview is given it: its CPU, its span,
/// and what it is. Its culprit is lent, not copied: it is made once per naming.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Glimpse<'a> {
    pub cpu: Cpu,
    pub start_ns: Nanos,
    pub end_ns: Nanos,
    pub what: Glimpsed<'a>,
}

/// What a glanced-at record is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Glimpsed<'a> {
    /// An episode that held the CPU.
    Episode {
        /// The record's class (an hrtimer callback's is the timer tick's, as the decoder
        /// gives it) and that of the episode it is nested in, if any.
        class: CulpritClass,
        parent: Option<CulpritClass>,
        /// A task's run whose closing switch the probes did not see: its span holds the
        /// workload's own run too.
        end_unseen: bool,
        /// Its culprit, as the decoder names it (None: the record could not be named).
        culprit: Option<&'a Culprit>,
        /// The decoder's number for the record's naming: records with equal numbers name
        /// the same culprit (one culprit may have several), told again without its names.
        naming: u64,
    },
    /// The host's steal clock grew `grown_ns` over the span.
    Steal { grown_ns: Nanos },
    /// `count` records were lost over the span.
    Lost { count: u64 },
}

/// Why the kernel kept the scheduler tick running on a CPU, in its own words: the
/// dependency of a `timer:tick_stop` event that did not stop it (`TICK_DEP_BIT_*`,
/// include/linux/tick.h). Fires only on `nohz_full` CPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TickDependency {
    /// A POSIX CPU timer is armed.
    PosixTimer,
    /// A perf event needs the tick (frequency-based sampling, multiplexing).
    PerfEvents,
    /// More than one task is runnable (or a deadline/RT task needs it).
    Sched,
    /// The TSC is not yet stable.
    ClockUnstable,
    /// RCU needs a quiescent state from the CPU.
    Rcu,
    /// An expedited RCU grace period.
    RcuExp,
    /// A dependency this version does not name (a bit a newer kernel added, or a value that
    /// is not one bit): counted, not dropped.
    Other,
}

impl TickDependency {
    /// The kernel's name for it (`TICK_DEP_BIT_SCHED` → `sched`), as its JSON spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            TickDependency::PosixTimer => "posix_timer",
            TickDependency::PerfEvents => "perf_events",
            TickDependency::Sched => "sched",
            TickDependency::ClockUnstable => "clock_unstable",
            TickDependency::Rcu => "rcu",
            TickDependency::RcuExp => "rcu_exp",
            TickDependency::Other => "other",
        }
    }
}

/// The tick's stops on one CPU over a probe session (`timer:tick_stop`): how often the kernel
/// stopped it, and how often it tried and kept it, by the dependency that kept it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TickStops {
    pub cpu: Cpu,
    /// `tick_stop` events with `success=1` (idle, or a nohz_full CPU with one task).
    pub stopped: u64,
    /// `tick_stop` events with `success=0`, by dependency (only those seen).
    pub kept: Vec<(TickDependency, u64)>,
}
