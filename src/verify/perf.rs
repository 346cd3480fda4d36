//! The independent recorder's side of the check: the text `perf script --ns` prints for a
//! `perf record -k mono` of the measured CPUs, parsed into events and folded into **net
//! durations per cause** on one CPU — nested time counted once, to the innermost level (NMI
//! over hard IRQ, tick and IPI vectors, over softirq, over task level), like osnoise. Pure:
//! text in, totals out; nothing here knows jitterscope's probes or engine.
//!
//! Task-level time is switch-in to switch-out of a task that is neither idle nor one of the
//! workload's threads. perf on these machines silently loses the switch events of some
//! protected system tasks; an interval whose closing switch names another `prev_pid` than
//! the pid switched in is of **unknown** owner: its time is counted as unknown, never given
//! to either task.
//!
//! Wake-up delays of one thread (for `jitterscope watch`'s run files) come from the same
//! events: a `sched_wakeup` of the thread to the `sched_switch` that puts it on a CPU.

use std::collections::{BTreeMap, BTreeSet};

use crate::model::{vector, Cpu, CulpritClass, Nanos};
use crate::report::culprit::{softirq_name, vector_name};

/// The x86 system vectors with entry/exit tracepoints, named as jitterscope names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Vector {
    LocalTimer,
    Reschedule,
    CallFunction,
    CallFunctionSingle,
    IrqWork,
    Thermal,
    X86PlatformIpi,
    Spurious,
    ErrorApic,
}

impl Vector {
    pub const ALL: [Vector; 9] = [
        Vector::LocalTimer,
        Vector::Reschedule,
        Vector::CallFunction,
        Vector::CallFunctionSingle,
        Vector::IrqWork,
        Vector::Thermal,
        Vector::X86PlatformIpi,
        Vector::Spurious,
        Vector::ErrorApic,
    ];

    /// The tracepoint's name without `_entry`/`_exit` (`irq_vectors:local_timer_entry`).
    pub fn tracepoint(self) -> &'static str {
        match self {
            Vector::LocalTimer => "local_timer",
            Vector::Reschedule => "reschedule",
            Vector::CallFunction => "call_function",
            Vector::CallFunctionSingle => "call_function_single",
            Vector::IrqWork => "irq_work",
            Vector::Thermal => "thermal_apic",
            Vector::X86PlatformIpi => "x86_platform_ipi",
            Vector::Spurious => "spurious_apic",
            Vector::ErrorApic => "error_apic",
        }
    }

    /// The probes' vector number (`model::vector`, bpf/jitterscope.h `JS_VEC_*`), so that names
    /// come from the one table jitterscope uses.
    fn kind(self) -> u64 {
        match self {
            Vector::LocalTimer => vector::LOCAL_TIMER,
            Vector::Reschedule => vector::RESCHEDULE,
            Vector::CallFunction => vector::CALL_FUNCTION,
            Vector::CallFunctionSingle => vector::CALL_FUNCTION_SINGLE,
            Vector::IrqWork => vector::IRQ_WORK,
            Vector::Thermal => vector::THERMAL,
            Vector::X86PlatformIpi => vector::X86_PLATFORM_IPI,
            Vector::Spurious => vector::SPURIOUS,
            Vector::ErrorApic => vector::ERROR,
        }
    }

    pub fn name(self) -> &'static str {
        vector_name(self.kind())
    }

    pub fn class(self) -> CulpritClass {
        match self {
            Vector::LocalTimer => CulpritClass::TimerTick,
            Vector::Reschedule
            | Vector::CallFunction
            | Vector::CallFunctionSingle
            | Vector::IrqWork
            | Vector::Thermal
            | Vector::X86PlatformIpi
            | Vector::Spurious
            | Vector::ErrorApic => CulpritClass::Ipi,
        }
    }

    /// perf refuses `irq_vectors:irq_work_exit` for sampling events (the kernel's
    /// `TRACE_EVENT_PERF_PERM`: perf's own wake-ups are irq_work, tracing their end would
    /// recurse), so irq_work episodes have no end in a perf recording.
    pub fn recordable_by_perf(self) -> bool {
        !matches!(self, Vector::IrqWork)
    }
}

/// The tracepoints `perf record` needs for the check (`verify::available_tracepoints` keeps those
/// the kernel has).
pub fn perf_tracepoints() -> Vec<String> {
    let mut v: Vec<String> = [
        "sched:sched_switch",
        "sched:sched_wakeup",
        "irq:irq_handler_entry",
        "irq:irq_handler_exit",
        "irq:softirq_entry",
        "irq:softirq_exit",
        "workqueue:workqueue_execute_start",
        "workqueue:workqueue_execute_end",
        "nmi:nmi_handler",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for vector in Vector::ALL {
        if vector.recordable_by_perf() {
            for end in ["entry", "exit"] {
                v.push(format!("irq_vectors:{}_{end}", vector.tracepoint()));
            }
        }
    }
    v
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Task {
    pub comm: String,
    pub pid: u32,
}

/// One perf event on a CPU, CLOCK_MONOTONIC ns (`perf record -k mono`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub cpu: Cpu,
    pub ns: Nanos,
    pub kind: EventKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventKind {
    Switch {
        prev: Task,
        next: Task,
    },
    IrqEntry {
        irq: u32,
        name: String,
    },
    IrqExit {
        irq: u32,
    },
    SoftirqEntry {
        vec: u32,
    },
    SoftirqExit {
        vec: u32,
    },
    VectorEntry(Vector),
    VectorExit(Vector),
    WorkStart {
        function: String,
    },
    WorkEnd,
    /// `nmi:nmi_handler` fires after a handler, with its duration.
    Nmi {
        handler: String,
        delta_ns: Nanos,
    },
    /// `sched:sched_wakeup`, on the CPU of the waker (or of the IPI that queued the wake-up),
    /// not necessarily the CPU the woken task will run on.
    Wakeup {
        task: Task,
        target_cpu: Cpu,
    },
}

impl EventKind {
    /// The event marks who holds its CPU, or an episode on it: the net durations read only
    /// these (a wake-up on a CPU must not cut the workload's run there in two).
    fn holds_cpu_time(&self) -> bool {
        match self {
            EventKind::Switch { .. }
            | EventKind::IrqEntry { .. }
            | EventKind::IrqExit { .. }
            | EventKind::SoftirqEntry { .. }
            | EventKind::SoftirqExit { .. }
            | EventKind::VectorEntry(_)
            | EventKind::VectorExit(_)
            | EventKind::WorkStart { .. }
            | EventKind::WorkEnd
            | EventKind::Nmi { .. } => true,
            EventKind::Wakeup { .. } => false,
        }
    }
}

/// A line `perf script` printed that the check cannot read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("line {line}: perf printed times in microseconds ({time}); run `perf script --ns` so that times keep their nanoseconds")]
    NotNanoseconds { line: usize, time: String },
    #[error("line {line}: cannot read {event} from {text:?}")]
    Fields {
        line: usize,
        event: String,
        text: String,
    },
    #[error("line {line}: {event} without its fields: perf printed no trace fields (another perf version's layout, or -F without `trace`); run `perf script --ns -F cpu,time,event,trace`")]
    NoFields { line: usize, event: String },
    #[error("line {line}: {event} without perf's CPU and time columns (`[001] 100.000000001:`), and no line of the script has them (another perf version's layout, or -F without `cpu` or `time`): {text:?}; run `perf script --ns -F cpu,time,event,trace`")]
    NoColumns {
        line: usize,
        event: String,
        text: String,
    },
}

/// Parses `perf script --ns` output. Lines of other events, and lines that are not events
/// (perf's warnings), are skipped; an event of ours with unreadable fields is an error.
/// Works with the default field list and with `-F cpu,time,event,trace` (the CPU as `[001]`,
/// then the time, the event name and its fields).
/// A script where no line has the CPU and time columns but some name an event of ours is of
/// another layout, and the error names its first such line.
pub fn parse(text: &str) -> Result<Vec<Event>, ParseError> {
    let mut events = Vec::new();
    let mut without_columns = None;
    for (i, line) in text.lines().enumerate() {
        match parse_line(i + 1, line)? {
            Parsed::Event(e) => events.push(e),
            Parsed::Other => {}
            Parsed::NoColumns(event) => {
                without_columns.get_or_insert_with(|| ParseError::NoColumns {
                    line: i + 1,
                    event: event.to_string(),
                    text: line.trim().chars().take(120).collect(),
                });
            }
        }
    }
    match without_columns {
        Some(e) if events.is_empty() => Err(e),
        _ => Ok(events),
    }
}

/// What one line of a script is.
enum Parsed<'a> {
    Event(Event),
    /// Not an event of ours (another event, a warning).
    Other,
    /// An event of ours (named) without the CPU and time columns before it.
    NoColumns(&'a str),
}

/// The event of ours a line names (`sched:sched_switch:` as a word), if any.
fn names_our_event(line: &str) -> Option<&str> {
    line.split_whitespace()
        .filter_map(|w| w.strip_suffix(':'))
        .find(|w| {
            matches!(
                *w,
                "sched:sched_switch"
                    | "sched:sched_wakeup"
                    | "irq:irq_handler_entry"
                    | "irq:irq_handler_exit"
                    | "irq:softirq_entry"
                    | "irq:softirq_exit"
                    | "workqueue:workqueue_execute_start"
                    | "workqueue:workqueue_execute_end"
                    | "nmi:nmi_handler"
            ) || w.starts_with("irq_vectors:")
        })
}

fn parse_line(number: usize, line: &str) -> Result<Parsed<'_>, ParseError> {
    let Some((cpu, after_cpu)) = find_cpu(line) else {
        return Ok(names_our_event(line).map_or(Parsed::Other, Parsed::NoColumns));
    };
    let rest = after_cpu.trim_start();
    let Some((time, rest)) = rest.split_once(": ") else {
        return Ok(Parsed::Other);
    };
    let Some(ns) = parse_time(number, time)? else {
        return Ok(Parsed::Other);
    };
    let rest = rest.trim_start();
    let (event, fields) = match rest.split_once(": ") {
        Some((e, f)) => (e, f),
        None => (rest.trim_end().trim_end_matches(':'), ""),
    };
    let bad = || {
        if fields.trim().is_empty() {
            ParseError::NoFields {
                line: number,
                event: event.to_string(),
            }
        } else {
            ParseError::Fields {
                line: number,
                event: event.to_string(),
                text: fields.to_string(),
            }
        }
    };
    let kind = match event {
        "sched:sched_switch" => parse_switch(fields).ok_or_else(bad)?,
        "sched:sched_wakeup" => parse_wakeup(fields).ok_or_else(bad)?,
        "irq:irq_handler_entry" => {
            let irq = field(fields, "irq=").ok_or_else(bad)?;
            let name = fields
                .split_once(" name=")
                .map(|(_, n)| n.trim_end().to_string())
                .ok_or_else(bad)?;
            EventKind::IrqEntry { irq, name }
        }
        "irq:irq_handler_exit" => EventKind::IrqExit {
            irq: field(fields, "irq=").ok_or_else(bad)?,
        },
        "irq:softirq_entry" => EventKind::SoftirqEntry {
            vec: field(fields, "vec=").ok_or_else(bad)?,
        },
        "irq:softirq_exit" => EventKind::SoftirqExit {
            vec: field(fields, "vec=").ok_or_else(bad)?,
        },
        "workqueue:workqueue_execute_start" => EventKind::WorkStart {
            function: fields
                .split_once("function ")
                .map(|(_, f)| f.trim().to_string())
                .ok_or_else(bad)?,
        },
        "workqueue:workqueue_execute_end" => EventKind::WorkEnd,
        "nmi:nmi_handler" => {
            let (handler, rest) = fields.split_once(" delta_ns: ").ok_or_else(bad)?;
            let delta_ns = rest
                .split_whitespace()
                .next()
                .and_then(|d| d.parse::<i64>().ok())
                .ok_or_else(bad)?;
            EventKind::Nmi {
                handler: handler.trim_end_matches("()").to_string(),
                delta_ns: delta_ns.max(0) as u64,
            }
        }
        other => {
            let Some(tp) = other.strip_prefix("irq_vectors:") else {
                return Ok(Parsed::Other);
            };
            let found = Vector::ALL.iter().find_map(|&v| {
                let entry = tp.strip_suffix("_entry") == Some(v.tracepoint());
                let exit = tp.strip_suffix("_exit") == Some(v.tracepoint());
                match (entry, exit) {
                    (true, _) => Some(EventKind::VectorEntry(v)),
                    (_, true) => Some(EventKind::VectorExit(v)),
                    _ => None,
                }
            });
            match found {
                Some(k) => k,
                None => return Ok(Parsed::Other),
            }
        }
    };
    Ok(Parsed::Event(Event { cpu, ns, kind }))
}

/// The first `[NNN]` token followed by a time: perf's CPU column. (A comm before it may hold
/// brackets, so each candidate is checked for the time after it.)
fn find_cpu(line: &str) -> Option<(Cpu, &str)> {
    let mut from = 0;
    while let Some(open) = line[from..].find('[').map(|i| from + i) {
        let after = &line[open + 1..];
        if let Some(close) = after.find(']') {
            let digits = &after[..close];
            let rest = &after[close + 1..];
            if !digits.is_empty()
                && digits.bytes().all(|b| b.is_ascii_digit())
                && rest.starts_with(' ')
                && rest
                    .split_whitespace()
                    .next()
                    .and_then(|t| t.strip_suffix(':'))
                    .is_some_and(is_time)
            {
                if let Ok(cpu) = digits.parse() {
                    return Some((cpu, rest));
                }
            }
        }
        from = open + 1;
    }
    None
}

/// `691.684024478`, `691.684024`: digits, a dot, digits.
fn is_time(t: &str) -> bool {
    t.split_once('.').is_some_and(|(a, b)| {
        !a.is_empty()
            && !b.is_empty()
            && a.bytes().all(|c| c.is_ascii_digit())
            && b.bytes().all(|c| c.is_ascii_digit())
    })
}

/// `691.684024478` → ns. None when it is not a time; an error when it has fewer than nine
/// decimals (perf without `--ns`).
fn parse_time(line: usize, text: &str) -> Result<Option<Nanos>, ParseError> {
    let text = text.trim();
    let Some((secs, frac)) = text.split_once('.').filter(|_| is_time(text)) else {
        return Ok(None);
    };
    let not_ns = || ParseError::NotNanoseconds {
        line,
        time: text.to_string(),
    };
    if frac.len() != 9 {
        return Err(not_ns());
    }
    let s: u64 = secs.parse().map_err(|_| not_ns())?;
    let f: u64 = frac.parse().map_err(|_| not_ns())?;
    Ok(Some(s.saturating_mul(1_000_000_000).saturating_add(f)))
}

/// `irq=34 name=…` → 34.
fn field(fields: &str, key: &str) -> Option<u32> {
    let at = fields.find(key)? + key.len();
    let digits: String = fields[at..]
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    digits.parse().ok()
}

/// `prev_comm=lto cgu.11 prev_pid=1 prev_prio=120 prev_state=R ==> next_comm=x next_pid=2 …`
/// (a comm may hold spaces: fields are found by their keys).
fn parse_switch(fields: &str) -> Option<EventKind> {
    let (prev, next) = fields.split_once(" ==> ")?;
    let task = |side: &str, comm_key: &str, pid_key: &str| -> Option<Task> {
        let side = side.trim();
        let comm_start = side.strip_prefix(comm_key)?;
        let pid_at = comm_start.rfind(pid_key)?;
        let comm = comm_start[..pid_at].to_string();
        let pid = field(&comm_start[pid_at..], pid_key.trim_start())?;
        Some(Task { comm, pid })
    };
    Some(EventKind::Switch {
        prev: task(prev, "prev_comm=", " prev_pid=")?,
        next: task(next, "next_comm=", " next_pid=")?,
    })
}

/// `comm=my sleeper pid=4121 prio=120 target_cpu=001` (the comm may hold spaces, so the pid
/// is found from the end).
fn parse_wakeup(fields: &str) -> Option<EventKind> {
    let comm_start = fields.trim().strip_prefix("comm=")?;
    let pid_at = comm_start.rfind(" pid=")?;
    let after = &comm_start[pid_at..];
    let target_at = after.rfind(" target_cpu=")?;
    Some(EventKind::Wakeup {
        task: Task {
            comm: comm_start[..pid_at].to_string(),
            pid: field(after, "pid=")?,
        },
        target_cpu: field(&after[target_at..], "target_cpu=")?,
    })
}

/// The measured workload's own threads (named by jitterscope): their time is the workload's,
/// not a cause.
pub fn is_workload_comm(comm: &str) -> bool {
    comm == "js-producer" || comm.starts_with("js-consumer-")
}

/// The nesting level of an episode: the innermost wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Level {
    Softirq,
    Hardirq,
}

/// A cause on the CPU as perf sees it: its class, jitterscope's name for it, its net time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PerfCause {
    pub class: CulpritClass,
    /// `comm[pid]`, `kworker/1:2`, `36 virtio1-req.0`, `TIMER`, `local timer` …
    pub name: String,
    pub ns: Nanos,
    /// The pieces `ns` adds up: each lies between two of perf's events on the CPU, so each
    /// carries the attach order's bias once (`compare::Tolerances::handler_ns`).
    pub pieces: u64,
    /// Work functions a kworker ran; NMI handlers.
    pub details: BTreeSet<String>,
}

/// The net durations on one CPU, over the stalls of the window.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetDurations {
    pub cpu: Cpu,
    pub from_ns: Nanos,
    pub to_ns: Nanos,
    /// By name.
    pub causes: BTreeMap<String, PerfCause>,
    /// Task-level time of intervals whose closing switch named another pid.
    pub unknown_ns: Nanos,
    pub unknown_intervals: u64,
    /// The tasks switched in at the start of an unknown interval and those named at its
    /// end, `comm[pid]` (the workload's threads included).
    pub unknown_owners: BTreeSet<String>,
    /// Per cause (jitterscope's name for a task), the unknown time of the intervals it opened
    /// or closed: the most of the unknown time that can be that cause's.
    pub unknown_involving: BTreeMap<String, Nanos>,
    /// Stalls (spans away from the workload) counted, and those left out because they
    /// started before the window or after it.
    pub stalls: u64,
    pub stalls_outside: u64,
    /// Exits without an entry or entries without an exit (at the trace's edges, or lost).
    pub unpaired: u64,
    /// The first and last event perf recorded on the CPU (0 when none).
    pub first_event_ns: Nanos,
    pub last_event_ns: Nanos,
}

impl NetDurations {
    /// The recording covers the window (its events on the CPU start before it and end after
    /// it, give or take `slack_ns`).
    pub fn covers_window(&self, slack_ns: Nanos) -> bool {
        self.first_event_ns != 0
            && self.first_event_ns <= self.from_ns.saturating_add(slack_ns)
            && self.last_event_ns.saturating_add(slack_ns) >= self.to_ns
    }

    fn credit(&mut self, class: CulpritClass, name: &str, ns: Nanos) {
        let c = self
            .causes
            .entry(name.to_string())
            .or_insert_with(|| PerfCause {
                class,
                name: name.to_string(),
                ns: 0,
                pieces: 0,
                details: BTreeSet::new(),
            });
        c.ns += ns;
        c.pieces += 1;
    }
}

/// Who a piece of the CPU's time belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Owner {
    Cause(CulpritClass, String),
    /// The workload's own thread ran: no stall.
    Workload,
    /// The CPU idled: a stall with no cause.
    Idle,
    /// Task-level time of the unknown interval with this index.
    Unknown(usize),
}

/// A stretch of the CPU's time with one owner (nested time already taken out).
#[derive(Debug, Clone)]
struct Piece {
    start: Nanos,
    end: Nanos,
    owner: Owner,
}

/// An interval whose closing switch named another task: who opened and who closed it.
struct UnknownInterval {
    shown: [String; 2],
    causes: Vec<String>,
}

/// An open IRQ-level episode.
struct Open {
    level: Level,
    class: CulpritClass,
    name: String,
    /// What its exit must name.
    key: ExitKey,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ExitKey {
    Irq(u32),
    Softirq(u32),
    Vector(Vector),
}

/// The task-level interval under way: who was switched in, and its pieces so far (owned
/// once its closing switch confirms the owner).
struct TaskRun {
    /// None before the first switch: the owner is then the first switch's `prev`.
    owner: Option<Task>,
    pieces: Vec<(Nanos, Nanos)>,
    functions: BTreeSet<String>,
}

impl TaskRun {
    fn new(owner: Option<Task>) -> TaskRun {
        TaskRun {
            owner,
            pieces: Vec::new(),
            functions: BTreeSet::new(),
        }
    }
}

/// The cause a task's run is, in jitterscope's names; None for idle and the workload.
fn task_cause(t: &Task) -> Option<(CulpritClass, String)> {
    if t.pid == 0 || is_workload_comm(&t.comm) {
        return None;
    }
    if t.comm.starts_with("kworker/") {
        // jitterscope names a kworker by its comm (the pid says nothing more).
        return Some((CulpritClass::Kworker, t.comm.clone()));
    }
    Some((CulpritClass::Task, format!("{}[{}]", t.comm, t.pid)))
}

fn owner_of(t: &Task) -> Owner {
    match task_cause(t) {
        Some((class, name)) => Owner::Cause(class, name),
        None if t.pid == 0 => Owner::Idle,
        None => Owner::Workload,
    }
}

/// The CPU's time cut into owned pieces: nested time to the innermost level, task-level time
/// to the task a switch pair confirms.
struct Pieces {
    pieces: Vec<Piece>,
    unknown: Vec<UnknownInterval>,
    functions: BTreeMap<String, BTreeSet<String>>,
    nmi_handlers: BTreeSet<String>,
    unpaired: u64,
}

fn cut(events: &[&Event]) -> Pieces {
    let mut p = Pieces {
        pieces: Vec::new(),
        unknown: Vec::new(),
        functions: BTreeMap::new(),
        nmi_handlers: BTreeSet::new(),
        unpaired: 0,
    };
    let mut stack: Vec<Open> = Vec::new();
    let mut run = TaskRun::new(None);
    let mut last = events.first().map_or(0, |e| e.ns);
    // [a, b] to the innermost open episode, or to the task-level interval.
    let give = |p: &mut Pieces, run: &mut TaskRun, stack: &[Open], a: Nanos, b: Nanos| {
        if b <= a {
            return;
        }
        match stack.last() {
            Some(top) => p.pieces.push(Piece {
                start: a,
                end: b,
                owner: Owner::Cause(top.class, top.name.clone()),
            }),
            None => run.pieces.push((a, b)),
        }
    };
    for e in events {
        let now = e.ns.max(last);
        if let EventKind::Nmi { handler, delta_ns } = &e.kind {
            // The handler ran [now - delta, now]: that part of the gap is the NMI's.
            let split = now.saturating_sub(*delta_ns).max(last);
            give(&mut p, &mut run, &stack, last, split);
            if now > split {
                p.pieces.push(Piece {
                    start: split,
                    end: now,
                    owner: Owner::Cause(CulpritClass::Nmi, "nmi".into()),
                });
            }
            p.nmi_handlers.insert(handler.clone());
        } else {
            give(&mut p, &mut run, &stack, last, now);
        }
        last = now;
        match &e.kind {
            EventKind::Switch { prev, next } => {
                // No switch happens inside an IRQ or softirq: what is still open lost its exit.
                p.unpaired += stack.len() as u64;
                stack.clear();
                settle(&mut p, &mut run, Some(prev));
                run = TaskRun::new(Some(next.clone()));
            }
            EventKind::IrqEntry { irq, name } => open(
                &mut p,
                &mut stack,
                Open {
                    level: Level::Hardirq,
                    class: CulpritClass::Irq,
                    name: format!("{irq} {name}"),
                    key: ExitKey::Irq(*irq),
                },
            ),
            EventKind::SoftirqEntry { vec } => open(
                &mut p,
                &mut stack,
                Open {
                    level: Level::Softirq,
                    class: CulpritClass::Softirq,
                    name: softirq_name(u64::from(*vec)),
                    key: ExitKey::Softirq(*vec),
                },
            ),
            EventKind::VectorEntry(v) => open(
                &mut p,
                &mut stack,
                Open {
                    level: Level::Hardirq,
                    class: v.class(),
                    name: v.name().to_string(),
                    key: ExitKey::Vector(*v),
                },
            ),
            EventKind::IrqExit { irq } => close(&mut p, &mut stack, ExitKey::Irq(*irq)),
            EventKind::SoftirqExit { vec } => close(&mut p, &mut stack, ExitKey::Softirq(*vec)),
            EventKind::VectorExit(v) => close(&mut p, &mut stack, ExitKey::Vector(*v)),
            EventKind::WorkStart { function } => {
                run.functions.insert(function.clone());
            }
            // Wake-ups are filtered out before: they hold no CPU time.
            EventKind::WorkEnd | EventKind::Nmi { .. } | EventKind::Wakeup { .. } => {}
        }
    }
    p.unpaired += stack.len() as u64;
    settle(&mut p, &mut run, None);
    // Task-level pieces are owned at their closing switch, after the episodes inside them.
    p.pieces.sort_by_key(|x| x.start);
    p
}

/// Ends the task-level interval at a switch whose `prev` is `closing` (None: the trace
/// ended): its pieces go to its owner when the switch confirms it, to unknown otherwise.
fn settle(p: &mut Pieces, run: &mut TaskRun, closing: Option<&Task>) {
    if run.pieces.is_empty() {
        return;
    }
    let owner = match (&run.owner, closing) {
        (Some(o), Some(c)) if o.pid != c.pid => {
            p.unknown.push(UnknownInterval {
                shown: [o, c].map(|t| format!("{}[{}]", t.comm, t.pid)),
                causes: [o, c]
                    .iter()
                    .filter_map(|t| task_cause(t).map(|(_, n)| n))
                    .collect(),
            });
            Owner::Unknown(p.unknown.len() - 1)
        }
        (Some(o), _) => owner_of(o),
        (None, Some(c)) => owner_of(c),
        (None, None) => {
            // No switch on the CPU at all: who ran is not known.
            p.unknown.push(UnknownInterval {
                shown: [
                    "(before any switch)".into(),
                    "(end of the recording)".into(),
                ],
                causes: Vec::new(),
            });
            Owner::Unknown(p.unknown.len() - 1)
        }
    };
    if let Owner::Cause(CulpritClass::Kworker, name) = &owner {
        p.functions
            .entry(name.clone())
            .or_default()
            .extend(run.functions.iter().cloned());
    }
    p.pieces
        .extend(run.pieces.drain(..).map(|(start, end)| Piece {
            start,
            end,
            owner: owner.clone(),
        }));
}

/// Opens an episode. On x86 a hard IRQ or vector does not nest in another, and a softirq
/// runs after the hard IRQ's exit, never inside it: open episodes of the same or a deeper
/// level lost their exits.
fn open(p: &mut Pieces, stack: &mut Vec<Open>, episode: Open) {
    while stack.last().is_some_and(|o| o.level >= episode.level) {
        stack.pop();
        p.unpaired += 1;
    }
    stack.push(episode);
}

/// Pops the episode `key` names (and any opened after it, whose exits were lost).
fn close(p: &mut Pieces, stack: &mut Vec<Open>, key: ExitKey) {
    match stack.iter().rposition(|o| o.key == key) {
        Some(i) => {
            p.unpaired += (stack.len() - i - 1) as u64;
            stack.truncate(i);
        }
        None => p.unpaired += 1,
    }
}

/// Net durations per cause on `cpu` (other CPUs' events are ignored, any order), counted
/// the way jitterscope counts its window: over the **stalls** of the workload's thread — the
/// spans in which it did not run, workload pieces shorter than `stall_gap_ns` (its stall
/// threshold) not breaking a span — that start inside `[from_ns, to_ns)`, each whole (a stall
/// that began before the window is not recorded; one that began inside is, to its end).
pub fn net_durations(
    events: &[Event],
    cpu: Cpu,
    from_ns: Nanos,
    to_ns: Nanos,
    stall_gap_ns: Nanos,
) -> NetDurations {
    let mut mine: Vec<&Event> = events
        .iter()
        .filter(|e| e.cpu == cpu && e.kind.holds_cpu_time())
        .collect();
    mine.sort_by_key(|e| e.ns); // stable: events at the same ns keep perf's order
    let p = cut(&mine);
    let mut out = NetDurations {
        cpu,
        from_ns,
        to_ns,
        unpaired: p.unpaired,
        first_event_ns: mine.first().map_or(0, |e| e.ns),
        last_event_ns: mine.last().map_or(0, |e| e.ns),
        ..NetDurations::default()
    };
    let mut unknown_seen = BTreeSet::new();
    let mut span: Vec<&Piece> = Vec::new();
    let mut flush = |out: &mut NetDurations, span: &mut Vec<&Piece>| {
        let Some(first) = span.first() else {
            return;
        };
        if !(from_ns..to_ns).contains(&first.start) {
            out.stalls_outside += 1;
            span.clear();
            return;
        }
        out.stalls += 1;
        for piece in span.drain(..) {
            let ns = piece.end - piece.start;
            match &piece.owner {
                Owner::Cause(class, name) => out.credit(*class, name, ns),
                Owner::Unknown(i) => {
                    out.unknown_ns += ns;
                    let u = &p.unknown[*i];
                    if unknown_seen.insert(*i) {
                        out.unknown_intervals += 1;
                        out.unknown_owners.extend(u.shown.iter().cloned());
                    }
                    for c in &u.causes {
                        *out.unknown_involving.entry(c.clone()).or_default() += ns;
                    }
                }
                Owner::Idle | Owner::Workload => {}
            }
        }
    };
    for piece in &p.pieces {
        match piece.owner {
            Owner::Workload if piece.end - piece.start >= stall_gap_ns => {
                flush(&mut out, &mut span)
            }
            // The workload for less than a stall threshold: the kernel's way back in and
            // out, inside the same stall.
            Owner::Workload => {}
            _ => span.push(piece),
        }
    }
    // A span the workload's thread never came back from is no stall it could notice: the
    // thread left the CPU for good (it ended), and what ran after its last switch on the CPU
    // (the exiting process's own teardown, say) is nobody's stall. What came before it stays:
    // a switch-in of the thread perf lost still ended a stall there.
    if let Some(gone) = last_workload_switch(&mine) {
        span.retain(|piece| piece.start < gone);
    }
    flush(&mut out, &mut span);
    for (name, functions) in p.functions {
        if let Some(c) = out.causes.get_mut(&name) {
            c.details.extend(functions);
        }
    }
    if let Some(c) = out.causes.get_mut("nmi") {
        c.details.extend(p.nmi_handlers);
    }
    out
}

/// perf's time on one CPU cut into owned pieces once, for net durations over any windows
/// (the spikes' windows, `super::spikes`).
pub struct CpuTime {
    cpu: Cpu,
    /// In time order; pieces do not overlap.
    pieces: Vec<Piece>,
    /// The causes each unknown interval may be (`Owner::Unknown` indexes it).
    unknown: Vec<Vec<String>>,
    first_event_ns: Nanos,
    last_event_ns: Nanos,
}

impl CpuTime {
    pub fn of(events: &[Event], cpu: Cpu) -> CpuTime {
        let mut mine: Vec<&Event> = events
            .iter()
            .filter(|e| e.cpu == cpu && e.kind.holds_cpu_time())
            .collect();
        mine.sort_by_key(|e| e.ns);
        let cut = cut(&mine);
        let mut pieces = cut.pieces;
        pieces.sort_by_key(|p| p.start);
        CpuTime {
            cpu,
            pieces,
            unknown: cut.unknown.into_iter().map(|u| u.causes).collect(),
            first_event_ns: mine.first().map_or(0, |e| e.ns),
            last_event_ns: mine.last().map_or(0, |e| e.ns),
        }
    }

    /// Net durations per cause over `windows` (each `[from, to)`, clipped), away from the
    /// workload: what ran in them other than its threads. A piece cut by a window's edge
    /// counts as a piece. Time of unknown owner is counted, never given, and kept against
    /// the tasks that opened or closed its interval (`unknown_involving`).
    pub fn in_windows(&self, windows: &[(Nanos, Nanos)]) -> NetDurations {
        let (from_ns, to_ns) = windows
            .iter()
            .fold((Nanos::MAX, 0), |(a, b), &(lo, hi)| (a.min(lo), b.max(hi)));
        let mut out = NetDurations {
            cpu: self.cpu,
            from_ns: from_ns.min(to_ns),
            to_ns,
            first_event_ns: self.first_event_ns,
            last_event_ns: self.last_event_ns,
            ..NetDurations::default()
        };
        for &(lo, hi) in windows {
            let first = self.pieces.partition_point(|p| p.end <= lo);
            for p in self.pieces[first..].iter().take_while(|p| p.start < hi) {
                let ns = p.end.min(hi).saturating_sub(p.start.max(lo));
                match &p.owner {
                    Owner::Cause(class, name) if ns > 0 => out.credit(*class, name, ns),
                    Owner::Unknown(i) => {
                        out.unknown_ns += ns;
                        for c in self.unknown.get(*i).into_iter().flatten() {
                            *out.unknown_involving.entry(c.clone()).or_default() += ns;
                        }
                    }
                    _ => {}
                }
            }
        }
        out
    }
}

/// When a switch on the CPU last named one of the workload's threads (switched in or out).
fn last_workload_switch(events: &[&Event]) -> Option<Nanos> {
    events.iter().rev().find_map(|e| match &e.kind {
        EventKind::Switch { prev, next }
            if is_workload_comm(&prev.comm) || is_workload_comm(&next.comm) =>
        {
            Some(e.ns)
        }
        _ => None,
    })
}

/// One wake-up delay of a thread as perf saw it: from its `sched_wakeup` to the
/// `sched_switch` that put it on `cpu` (CLOCK_MONOTONIC ns).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WakeupDelay {
    pub woken_ns: Nanos,
    pub on_cpu_ns: Nanos,
    /// The CPU it was switched in on (a wake-up may be followed by a migration).
    pub cpu: Cpu,
}

impl WakeupDelay {
    pub fn delay_ns(&self) -> Nanos {
        self.on_cpu_ns.saturating_sub(self.woken_ns)
    }
}

/// The wake-up delays of thread `tid` that overlap `[from_ns, to_ns]` (woken by its end and
/// switched in from its start on), from every CPU's events (any order); a wake-up not yet
/// followed by a switch-in when the events end is none. A wake-up pairs with the next
/// switch-in of the thread, on whichever CPU. No delay is counted for a wake-up of a thread
/// that is on a CPU (switched in and not switched out since, as far as the events show; also a
/// wake-up followed by the thread's own switch-out): the kernel traces `sched_wakeup` for a
/// task still on its runqueue too. A second wake-up before the switch-in means perf lost that
/// switch-in: the later wake-up is the one paired.
pub fn wakeup_delays(events: &[Event], tid: u32, from_ns: Nanos, to_ns: Nanos) -> Vec<WakeupDelay> {
    let mut mine: Vec<(&Event, ThreadStep)> = events
        .iter()
        .filter_map(|e| thread_step(&e.kind, tid).map(|s| (e, s)))
        .collect();
    mine.sort_by_key(|(e, _)| e.ns); // stable: events at the same ns keep perf's order
    let mut on_cpu = false;
    let mut woken_ns: Option<Nanos> = None;
    let mut delays = Vec::new();
    for (e, step) in mine {
        if step.woken && !on_cpu {
            woken_ns = Some(e.ns);
        }
        if step.switched_out {
            // Still running when woken, or its switch-in was lost: no delay either way.
            on_cpu = false;
            woken_ns = None;
        }
        if step.switched_in {
            on_cpu = true;
            if let Some(w) = woken_ns.take().filter(|&w| w <= to_ns && e.ns >= from_ns) {
                delays.push(WakeupDelay {
                    woken_ns: w,
                    on_cpu_ns: e.ns,
                    cpu: e.cpu,
                });
            }
        }
    }
    delays
}

/// What an event does to one thread.
#[derive(Debug, Clone, Copy, Default)]
struct ThreadStep {
    woken: bool,
    switched_out: bool,
    switched_in: bool,
}

/// What the event does to thread `tid`; None when it does not name it.
fn thread_step(kind: &EventKind, tid: u32) -> Option<ThreadStep> {
    let step = match kind {
        EventKind::Wakeup { task, .. } => ThreadStep {
            woken: task.pid == tid,
            ..ThreadStep::default()
        },
        EventKind::Switch { prev, next } => ThreadStep {
            switched_out: prev.pid == tid,
            switched_in: next.pid == tid,
            ..ThreadStep::default()
        },
        EventKind::IrqEntry { .. }
        | EventKind::IrqExit { .. }
        | EventKind::SoftirqEntry { .. }
        | EventKind::SoftirqExit { .. }
        | EventKind::VectorEntry(_)
        | EventKind::VectorExit(_)
        | EventKind::WorkStart { .. }
        | EventKind::WorkEnd
        | EventKind::Nmi { .. } => ThreadStep::default(),
    };
    (step.woken || step.switched_out || step.switched_in).then_some(step)
}

/// perf's events name thread `tid` at all (woke it or switched it in or out).
pub fn names_thread(events: &[Event], tid: u32) -> bool {
    events.iter().any(|e| thread_step(&e.kind, tid).is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// perf script lines as `perf script --ns -F cpu,time,event,trace` prints them.
    const TRACE: &str = "\
[001]   100.000000000:                     sched:sched_switch: prev_comm=js-consumer-1 prev_pid=10 prev_prio=120 prev_state=R ==> next_comm=lto cgu.11 next_pid=20 next_prio=120
[001]   100.000100000:          irq_vectors:local_timer_entry: vector=236
[001]   100.000112000:           irq_vectors:local_timer_exit: vector=236
[001]   100.000113000:                      irq:softirq_entry: vec=1 [action=TIMER]
[001]   100.000115000:                  irq:irq_handler_entry: irq=36 name=virtio1-req.0
[001]   100.000120000:                   irq:irq_handler_exit: irq=36 ret=handled
[001]   100.000123000:                       irq:softirq_exit: vec=1 [action=TIMER]
[001]   100.001000000:                     sched:sched_switch: prev_comm=lto cgu.11 prev_pid=20 prev_prio=120 prev_state=R ==> next_comm=kworker/1:2 next_pid=30 next_prio=120
[001]   100.001010000:      workqueue:workqueue_execute_start: work struct 0xffff888627d275e0: function refresh_vm_stats
[001]   100.001015000:        workqueue:workqueue_execute_end: work struct 0xffff888627d275e0: function refresh_vm_stats
[001]   100.001020000:                     sched:sched_switch: prev_comm=kworker/1:2 prev_pid=30 prev_prio=120 prev_state=I ==> next_comm=js-consumer-1 next_pid=10 next_prio=120
[000]   100.001021000:          irq_vectors:local_timer_entry: vector=236
[001]   100.002000000:          irq_vectors:local_timer_entry: vector=236
[001]   100.002010000:           irq_vectors:local_timer_exit: vector=236
[001]   100.003000000:                     sched:sched_switch: prev_comm=js-consumer-1 prev_pid=10 prev_prio=120 prev_state=R ==> next_comm=tokio-rt-worker next_pid=68 next_prio=120
[001]   100.003050000:                     sched:sched_switch: prev_comm=sh prev_pid=77 prev_prio=120 prev_state=S ==> next_comm=js-consumer-1 next_pid=10 next_prio=120
[001]   100.004000000:                           nmi:nmi_handler: perf_event_nmi_handler() delta_ns: 3000 handled: 1
[001]   100.005000000:                     sched:sched_switch: prev_comm=js-consumer-1 prev_pid=10 prev_prio=120 prev_state=R ==> next_comm=swapper/1 next_pid=0 next_prio=120
";

    #[test]
    fn parses_every_event_kind() {
        let ev = parse(TRACE).unwrap();
        assert_eq!(ev.len(), 18);
        assert_eq!(
            ev[0],
            Event {
                cpu: 1,
                ns: 100_000_000_000,
                kind: EventKind::Switch {
                    prev: Task {
                        comm: "js-consumer-1".into(),
                        pid: 10
                    },
                    next: Task {
                        comm: "lto cgu.11".into(),
                        pid: 20
                    },
                },
            }
        );
        assert_eq!(ev[1].kind, EventKind::VectorEntry(Vector::LocalTimer));
        assert_eq!(ev[3].kind, EventKind::SoftirqEntry { vec: 1 });
        assert_eq!(
            ev[4].kind,
            EventKind::IrqEntry {
                irq: 36,
                name: "virtio1-req.0".into()
            }
        );
        assert_eq!(
            ev[8].kind,
            EventKind::WorkStart {
                function: "refresh_vm_stats".into()
            }
        );
        assert_eq!(
            ev[16].kind,
            EventKind::Nmi {
                handler: "perf_event_nmi_handler".into(),
                delta_ns: 3000
            }
        );
    }

    #[test]
    fn reads_the_default_field_list_and_skips_other_lines() {
        let text = "\
'trace' not valid for hardware events. Ignoring.
      sh [7] 77 [001]   100.000000001: sched:sched_switch: prev_comm=sh [7] prev_pid=77 prev_prio=120 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120
         swapper     0 [001]   100.000000100: power:cpu_idle: state=1 cpu_id=1
";
        let ev = parse(text).unwrap();
        assert_eq!(ev.len(), 1);
        assert_eq!(ev[0].ns, 100_000_000_001);
        let EventKind::Switch { prev, .. } = &ev[0].kind else {
            panic!("{ev:?}")
        };
        assert_eq!(prev.comm, "sh [7]");
    }

    #[test]
    fn a_script_of_another_layout_says_what_it_lacks() {
        // -F comm,tid,time,event,trace: no CPU column.
        let no_cpu = "\
      sh    77   100.000000001: sched:sched_switch: prev_comm=sh prev_pid=77 prev_prio=120 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120
      sh    77   100.000000100: irq:irq_handler_entry: irq=11 name=eth0
";
        let e = parse(no_cpu).unwrap_err().to_string();
        assert!(
            e.starts_with("line 1: sched:sched_switch without perf's CPU and time columns"),
            "{e}"
        );
        assert!(e.contains("-F cpu,time,event,trace"), "{e}");
        // -F cpu,event,trace: no time.
        let no_time =
            "[001] sched:sched_switch: prev_comm=sh prev_pid=77 ==> next_comm=x next_pid=0\n";
        let e = parse(no_time).unwrap_err().to_string();
        assert!(e.contains("without perf's CPU and time columns"), "{e}");
        // -F cpu,time,event: no trace fields.
        let no_trace = "[001]   100.000000001: sched:sched_switch:\n";
        let e = parse(no_trace).unwrap_err().to_string();
        assert!(
            e.starts_with(
                "line 1: sched:sched_switch without its fields: perf printed no trace fields"
            ),
            "{e}"
        );
        // Lines of other events only, in any layout: nothing of ours, not an error.
        assert_eq!(
            parse("  sh 77 100.000000001: power:cpu_idle: state=1\n").unwrap(),
            []
        );
    }

    #[test]
    fn refuses_microsecond_times_and_broken_fields() {
        let e =
            parse("[001]   100.000100:  irq_vectors:local_timer_entry: vector=236").unwrap_err();
        assert!(e.to_string().contains("--ns"), "{e}");
        let e = parse("[001]   100.000100000:  irq:irq_handler_entry: irq=x").unwrap_err();
        assert!(e.to_string().contains("line 1"), "{e}");
    }

    #[test]
    fn nested_time_goes_to_the_innermost_level_once() {
        let ev = parse(TRACE).unwrap();
        let d = net_durations(&ev, 1, 100_000_000_000, 100_005_000_000, 1_000);
        let ns = |name: &str| d.causes.get(name).map_or(0, |c| c.ns);
        // The tick inside the task's run: 12 µs + 10 µs later (workload's time around it).
        assert_eq!(ns("local timer"), 22_000);
        // TIMER softirq 113→123 µs minus the IRQ nested in it (115→120).
        assert_eq!(ns("TIMER"), 5_000);
        assert_eq!(ns("36 virtio1-req.0"), 5_000);
        // The task: 0→1000 µs minus the tick, softirq and IRQ inside it (22 µs).
        assert_eq!(ns("lto cgu.11[20]"), 1_000_000 - 12_000 - 5_000 - 5_000);
        // A kworker by its comm, with the work it ran.
        assert_eq!(ns("kworker/1:2"), 20_000);
        assert!(d.causes["kworker/1:2"].details.contains("refresh_vm_stats"));
        assert_eq!(d.causes["kworker/1:2"].class, CulpritClass::Kworker);
        // The NMI's 3 µs out of the workload's time: its own.
        assert_eq!(ns("nmi"), 3_000);
        // Idle and the workload are no causes; CPU 0's tick is not CPU 1's.
        assert!(!d
            .causes
            .keys()
            .any(|k| k.contains("swapper") || k.contains("js-")));
        assert_eq!(d.first_event_ns, 100_000_000_000);
        assert_eq!(d.unpaired, 0);
    }

    #[test]
    fn what_runs_after_the_workloads_thread_left_the_cpu_for_good_is_no_stall() {
        // verify.sh on 2026-11-25: the consumer's last switch back in from tokio-rt-worker
        // was lost, it ended, and the exiting process's BPF maps were freed by a kworker on
        // its CPU 1.3 s later: 1.97 ms credited to that kworker inside "the stall".
        let text = "\
[001]   1.000000000:  sched:sched_switch: prev_comm=js-consumer-1 prev_pid=3 prev_prio=120 prev_state=R ==> next_comm=kworker/1:0 next_pid=9 next_prio=120
[001]   1.000020000:  sched:sched_switch: prev_comm=kworker/1:0 prev_pid=9 prev_prio=120 prev_state=I ==> next_comm=js-consumer-1 next_pid=3 next_prio=120
[001]   1.000500000:  sched:sched_switch: prev_comm=js-consumer-1 prev_pid=3 prev_prio=120 prev_state=R ==> next_comm=tokio-rt-worker next_pid=75 next_prio=120
[001]   1.000900000:  sched:sched_switch: prev_comm=js-consumer-1 prev_pid=3 prev_prio=120 prev_state=X ==> next_comm=swapper/1 next_pid=0 next_prio=120
[001]   1.002000000:  sched:sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=kworker/u8:2 next_pid=11 next_prio=120
[001]   1.004000000:  sched:sched_switch: prev_comm=kworker/u8:2 prev_pid=11 prev_prio=120 prev_state=I ==> next_comm=swapper/1 next_pid=0 next_prio=120
";
        let ev = parse(text).unwrap();
        let d = net_durations(&ev, 1, 1_000_000_000, 1_001_000_000, 1_000);
        // The kworker's run before is a stall of its own; the span from 500 µs, which perf
        // could not split, is unknown up to the thread's last switch and nothing after it.
        assert_eq!(d.causes["kworker/1:0"].ns, 20_000);
        assert_eq!(d.unknown_ns, 400_000);
        assert!(!d.causes.contains_key("kworker/u8:2"), "{:?}", d.causes);
        assert_eq!(d.stalls, 2);
        // A trace in which the workload's thread never switches keeps its one span.
        let text = "\
[001]   1.000100000:  irq:softirq_entry: vec=7 [action=SCHED]
[001]   1.000500000:  irq:softirq_exit: vec=7 [action=SCHED]
";
        let d = net_durations(
            &parse(text).unwrap(),
            1,
            1_000_000_000,
            1_001_000_000,
            1_000,
        );
        assert_eq!(d.causes["SCHED"].ns, 400_000);
    }

    #[test]
    fn an_interval_closed_by_another_pid_is_unknown() {
        let ev = parse(TRACE).unwrap();
        let d = net_durations(&ev, 1, 100_000_000_000, 100_005_000_000, 1_000);
        // tokio-rt-worker[68] switched in, sh[77] switched out: 50 µs nobody is given.
        assert_eq!(d.unknown_ns, 50_000);
        assert_eq!(d.unknown_intervals, 1);
        assert!(!d.causes.contains_key("tokio-rt-worker[68]"));
        assert!(!d.causes.contains_key("sh[77]"));
        assert!(d.unknown_owners.contains("tokio-rt-worker[68]"));
        assert_eq!(d.unknown_involving["tokio-rt-worker[68]"], 50_000);
        assert_eq!(d.unknown_involving["sh[77]"], 50_000);
    }

    #[test]
    fn the_window_counts_whole_stalls_that_start_in_it() {
        let ev = parse(TRACE).unwrap();
        // From 500 µs: the stall of 0→1020 µs began before (jitterscope does not record it);
        // the tick at 2000 µs starts inside and counts whole though the window ends at 2005.
        let d = net_durations(&ev, 1, 100_000_500_000, 100_002_005_000, 1_000);
        let ns = |name: &str| d.causes.get(name).map_or(0, |c| c.ns);
        assert_eq!(ns("lto cgu.11[20]"), 0);
        assert_eq!(ns("kworker/1:2"), 0);
        assert_eq!(ns("local timer"), 10_000);
        assert_eq!((d.stalls, d.stalls_outside), (1, 3));
        assert!(d.covers_window(0));
        assert!(
            !net_durations(&ev, 1, 99_000_000_000, 100_000_000_000, 1_000).covers_window(1_000)
        );
    }

    #[test]
    fn a_short_return_to_the_workload_stays_inside_the_stall() {
        let text = "\
[001]   1.000000000:  irq_vectors:local_timer_entry: vector=236
[001]   1.000010000:  irq_vectors:local_timer_exit: vector=236
[001]   1.000010500:  irq:softirq_entry: vec=9 [action=RCU]
[001]   1.000012000:  irq:softirq_exit: vec=9 [action=RCU]
[001]   1.000100000:  sched:sched_switch: prev_comm=js-consumer-1 prev_pid=3 prev_prio=120 prev_state=R ==> next_comm=b next_pid=4 next_prio=120
";
        // The softirq 500 ns after the tick: one stall starting at the tick, which is before
        // the window, so neither counts; with a 100 ns threshold they are two stalls.
        let ev = parse(text).unwrap();
        let d = net_durations(&ev, 1, 1_000_000_001, 2_000_000_000, 1_000);
        assert!(d.causes.is_empty(), "{:?}", d.causes);
        let d = net_durations(&ev, 1, 1_000_000_001, 2_000_000_000, 100);
        assert_eq!(d.causes["RCU"].ns, 1_500);
        assert!(!d.causes.contains_key("local timer"));
    }

    #[test]
    fn a_mismatched_switch_with_nothing_before_it_owns_nothing() {
        let text = "\
[001]   1.000000000:  sched:sched_switch: prev_comm=a prev_pid=3 prev_prio=120 prev_state=R ==> next_comm=b next_pid=4 next_prio=120
[001]   1.000000000:  sched:sched_switch: prev_comm=c prev_pid=5 prev_prio=120 prev_state=R ==> next_comm=d next_pid=6 next_prio=120
[001]   1.000002000:  sched:sched_switch: prev_comm=d prev_pid=6 prev_prio=120 prev_state=R ==> next_comm=js-consumer-1 next_pid=7 next_prio=120
[001]   1.000003000:  sched:sched_switch: prev_comm=js-consumer-1 prev_pid=7 prev_prio=120 prev_state=R ==> next_comm=e next_pid=8 next_prio=120
";
        let d = net_durations(&parse(text).unwrap(), 1, 0, u64::MAX, 1_000);
        assert_eq!(d.unknown_intervals, 0);
        assert_eq!(d.causes["d[6]"].ns, 2_000);
    }

    #[test]
    fn lost_exits_are_counted_not_carried() {
        let text = "\
[001]   1.000000000:  irq:softirq_entry: vec=9 [action=RCU]
[001]   1.000001000:  irq:irq_handler_entry: irq=5 name=x
[001]   1.000002000:  irq:softirq_exit: vec=9 [action=RCU]
[001]   1.000003000:  irq:irq_handler_exit: irq=5 ret=handled
[001]   1.000004000:  sched:sched_switch: prev_comm=a prev_pid=3 prev_prio=120 prev_state=R ==> next_comm=b next_pid=4 next_prio=120
";
        let d = net_durations(&parse(text).unwrap(), 1, 0, u64::MAX, 1_000);
        // RCU's exit pops the IRQ whose exit was missing; the later IRQ exit has no entry.
        assert_eq!(d.unpaired, 2);
        assert_eq!(d.causes["RCU"].ns, 1_000);
        assert_eq!(d.causes["5 x"].ns, 1_000);
        // Before the first switch, the task is the one it names as prev.
        assert_eq!(d.causes["a[3]"].ns, 2_000);
    }

    #[test]
    fn the_tracepoint_list_leaves_out_what_perf_refuses() {
        let t = perf_tracepoints();
        assert!(t.contains(&"irq_vectors:local_timer_exit".to_string()));
        assert!(t.contains(&"sched:sched_wakeup".to_string()));
        assert!(!t.iter().any(|e| e.contains("irq_work")));
    }

    #[test]
    fn reads_sched_wakeup_in_both_field_lists() {
        // As perf 6.1 prints them on this machine: the default fields (a comm with a space,
        // one that looks like a field) and `-F cpu,time,event,trace`.
        let text = "\
           sleep 22591 [000]  8457.475486131: sched:sched_wakeup: comm=my sleeper pid=22589 prio=120 target_cpu=000
[001]  8451.326863844:       sched:sched_wakeup: comm=pid=7 x pid=18 prio=0 target_cpu=001
";
        let ev = parse(text).unwrap();
        assert_eq!(ev.len(), 2);
        assert_eq!(
            ev[0],
            Event {
                cpu: 0,
                ns: 8_457_475_486_131,
                kind: EventKind::Wakeup {
                    task: Task {
                        comm: "my sleeper".into(),
                        pid: 22589
                    },
                    target_cpu: 0
                },
            }
        );
        let EventKind::Wakeup { task, target_cpu } = &ev[1].kind else {
            panic!("{ev:?}")
        };
        assert_eq!(
            (task.comm.as_str(), task.pid, *target_cpu),
            ("pid=7 x", 18, 1)
        );
        let e = parse("[001]  1.000000000: sched:sched_wakeup: comm=a prio=120").unwrap_err();
        assert!(e.to_string().contains("sched:sched_wakeup"), "{e}");
    }

    #[test]
    fn wake_ups_leave_the_net_durations_as_they_were() {
        // A wake-up on the measured CPU every 500 ns would cut the workload's runs into
        // pieces shorter than the stall threshold if it were read as CPU time.
        let mut with = String::new();
        for line in TRACE.lines() {
            with.push_str(line);
            with.push('\n');
            let ns = line
                .split_whitespace()
                .nth(1)
                .unwrap()
                .trim_end_matches(':');
            let (s, f) = ns.split_once('.').unwrap();
            let t: u64 =
                s.parse::<u64>().unwrap() * 1_000_000_000 + f.parse::<u64>().unwrap() + 500;
            with.push_str(&format!(
                "[001] {}.{:09}: sched:sched_wakeup: comm=js-consumer-1 pid=10 prio=120 target_cpu=001\n",
                t / 1_000_000_000,
                t % 1_000_000_000
            ));
        }
        let plain = net_durations(
            &parse(TRACE).unwrap(),
            1,
            100_000_000_000,
            100_005_000_000,
            1_000,
        );
        let woken = net_durations(
            &parse(&with).unwrap(),
            1,
            100_000_000_000,
            100_005_000_000,
            1_000,
        );
        assert_eq!(plain, woken);
    }

    /// A thread 7 woken and switched in, on two CPUs.
    const WAKE: &str = "\
[000]   1.000000000:  sched:sched_wakeup: comm=my sleeper pid=7 prio=120 target_cpu=000
[000]   1.000010000:  sched:sched_switch: prev_comm=swapper/0 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=my sleeper next_pid=7 next_prio=120
[001]   1.000020000:  sched:sched_wakeup: comm=my sleeper pid=7 prio=120 target_cpu=000
[000]   1.000030000:  sched:sched_switch: prev_comm=my sleeper prev_pid=7 prev_prio=120 prev_state=S ==> next_comm=swapper/0 next_pid=0 next_prio=120
[001]   1.000100000:  sched:sched_wakeup: comm=my sleeper pid=7 prio=120 target_cpu=000
[000]   1.000105000:  sched:sched_wakeup: comm=other pid=8 prio=120 target_cpu=000
[001]   1.000140000:  sched:sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=my sleeper next_pid=7 next_prio=120
";

    #[test]
    fn a_wake_up_pairs_with_the_next_switch_in_on_any_cpu() {
        let d = wakeup_delays(&parse(WAKE).unwrap(), 7, 0, u64::MAX);
        assert_eq!(
            d,
            vec![
                WakeupDelay {
                    woken_ns: 1_000_000_000,
                    on_cpu_ns: 1_000_010_000,
                    cpu: 0
                },
                // Woken towards CPU 0, migrated, switched in on CPU 1.
                WakeupDelay {
                    woken_ns: 1_000_100_000,
                    on_cpu_ns: 1_000_140_000,
                    cpu: 1
                },
            ]
        );
        assert_eq!(d[1].delay_ns(), 40_000);
        // The wake-up at 20 µs came while it ran: no delay. Another thread's are not its.
        assert!(wakeup_delays(&parse(WAKE).unwrap(), 8, 0, u64::MAX).is_empty());
    }

    #[test]
    fn a_wake_up_then_its_own_switch_out_is_no_delay() {
        // No switch-in seen before: it was running when woken, as its switch-out shows.
        let text = "\
[000]   1.000000000:  sched:sched_wakeup: comm=a pid=7 prio=120 target_cpu=000
[000]   1.000005000:  sched:sched_switch: prev_comm=a prev_pid=7 prev_prio=120 prev_state=S ==> next_comm=swapper/0 next_pid=0 next_prio=120
[000]   1.000100000:  sched:sched_switch: prev_comm=swapper/0 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=a next_pid=7 next_prio=120
";
        assert!(wakeup_delays(&parse(text).unwrap(), 7, 0, u64::MAX).is_empty());
    }

    #[test]
    fn delays_that_overlap_the_window_count_whole() {
        let ev = parse(WAKE).unwrap();
        // Delays of 10 µs (woken at 0) and 40 µs (woken at 100 µs), counted whole when any
        // part of them lies in the window, ends included.
        let d = wakeup_delays(&ev, 7, 1_000_000_000, 1_000_100_000);
        assert_eq!(d.len(), 2);
        let d = wakeup_delays(&ev, 7, 1_000_010_000, 1_000_100_000);
        assert_eq!(d.len(), 2, "{d:?}");
        let d = wakeup_delays(&ev, 7, 1_000_010_001, 1_000_099_999);
        assert!(d.is_empty(), "{d:?}");
        let d = wakeup_delays(&ev, 7, 1_000_050_000, 1_000_120_000);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].on_cpu_ns, 1_000_140_000);
    }
}
