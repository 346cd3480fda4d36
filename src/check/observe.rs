//! What the checked CPUs did, sorted by the promise each record breaks: the probes' records of
//! a census (`probe::census::collect`) folded into one row per culprit, with each record's
//! own time (its span less what nested inside it) and, for work and IPIs, who queued or sent
//! them.

use std::collections::{BTreeMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::model::{
    vector, Cause, CauseKind, Cpu, CulpritClass, Nanos, StealSample, TimerCallback, Who,
};
use crate::probe::decode::Record;
use crate::report::culprit::words_of;

/// A promise a latency-critical CPU is given, in the order the report lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Promise {
    /// No task but the checked one runs there.
    NoOtherTasks,
    /// The scheduler tick stops while one task runs.
    TickStopped,
    /// No device interrupts (nor their bottom halves) are delivered there.
    NoDeviceIrqs,
    /// No unbound workqueue work runs there.
    NoUnboundWork,
    /// No per-CPU deferred work: work queued for the CPU, timer callbacks armed there.
    NoPerCpuWork,
    /// No RCU callbacks or RCU threads run there.
    NoRcuCallbacks,
    /// No scheduler load balancing (SCHED softirq, the stopper thread).
    NoLoadBalancing,
    /// No IPIs or NMIs from other CPUs.
    NoCrossCpuInterrupts,
    /// A real-time spinner is not throttled.
    NoRtThrottling,
    /// The frequency does not change.
    SteadyFrequency,
    /// The CPU does not enter idle states it must wake from.
    NoDeepIdle,
    /// The host does not preempt the vCPU.
    NoHostPreemption,
    /// Nothing runs on the CPU's SMT sibling.
    QuietSibling,
}

impl Promise {
    pub const ALL: [Promise; 13] = [
        Promise::NoOtherTasks,
        Promise::TickStopped,
        Promise::NoDeviceIrqs,
        Promise::NoUnboundWork,
        Promise::NoPerCpuWork,
        Promise::NoRcuCallbacks,
        Promise::NoLoadBalancing,
        Promise::NoCrossCpuInterrupts,
        Promise::NoRtThrottling,
        Promise::SteadyFrequency,
        Promise::NoDeepIdle,
        Promise::NoHostPreemption,
        Promise::QuietSibling,
    ];

    /// The promise in words, as the report's first column shows it.
    pub fn title(self) -> &'static str {
        match self {
            Promise::NoOtherTasks => "no other tasks",
            Promise::TickStopped => "tick stopped while one task runs",
            Promise::NoDeviceIrqs => "no device interrupts",
            Promise::NoUnboundWork => "no unbound work",
            Promise::NoPerCpuWork => "no per-CPU deferred work",
            Promise::NoRcuCallbacks => "no RCU callbacks",
            Promise::NoLoadBalancing => "no load balancing",
            Promise::NoCrossCpuInterrupts => "no IPIs or NMIs",
            Promise::NoRtThrottling => "no throttling of a real-time spinner",
            Promise::SteadyFrequency => "steady frequency",
            Promise::NoDeepIdle => "no idle exits",
            Promise::NoHostPreemption => "no host preemption",
            Promise::QuietSibling => "nothing on the SMT sibling",
        }
    }
}

/// One culprit seen breaking a promise on one CPU.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Seen {
    pub class: Option<CulpritClass>,
    /// The culprit's name as reports show it (`kworker/u4:1`, `virtio0-requests`).
    pub name: String,
    /// Its detail (`wb_workfn`, `IRQ 24`), empty when none.
    pub detail: String,
    /// The kernel's IRQ number for a device IRQ (to join its configured affinity).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub irq: Option<u64>,
    pub count: u64,
    /// Its own time: its records' spans less what nested inside them (ns, measured).
    pub time_ns: Nanos,
    pub longest_ns: Nanos,
    /// Who queued the work or sent the IPI (`queued by kswapd0[97] on CPU 0`), most frequent
    /// first, at most `MAX_SENDERS`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub from: Vec<String>,
    /// The culprit as data, for its advice (not in the JSON: `class`, `name` and `detail` are).
    #[serde(skip)]
    pub who: Option<Who>,
}

/// What one CPU did over the check, by promise.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CpuSeen {
    pub cpu: Cpu,
    pub rows: BTreeMap<Promise, Vec<Seen>>,
    /// Scheduler ticks (the tick's hrtimer callback) on the CPU.
    pub ticks: u64,
    /// Frequency changes of the CPU.
    pub freq_changes: u64,
}

impl CpuSeen {
    /// The culprits of `p`, largest time first (none when it was quiet).
    pub fn of(&self, p: Promise) -> &[Seen] {
        self.rows.get(&p).map_or(&[], |v| v.as_slice())
    }
}

/// Senders listed per culprit.
const MAX_SENDERS: usize = 3;

/// Culprits listed per promise and CPU; the rest fold into one row.
pub const MAX_ROWS: usize = 12;

/// Records seen on the checked CPUs (and their SMT siblings), with the tasks that are the
/// checked ones (`own`: the spinners, or the user's threads) left out.
pub struct Inputs<'a> {
    pub records: &'a [Record],
    pub checked: &'a [Cpu],
    /// `(sibling, checked CPU)`: a sibling CPU probed for the checked CPU's sake.
    pub siblings: &'a [(Cpu, Cpu)],
    pub own: &'a HashSet<u32>,
}

/// The records of a census, by checked CPU and promise.
pub fn observe(inp: &Inputs) -> Vec<CpuSeen> {
    let own_ns = own_times(inp.records);
    let mut rows: BTreeMap<(Cpu, Promise, CulpritClass, Who), Seen> = BTreeMap::new();
    let mut seen: BTreeMap<Cpu, CpuSeen> = inp
        .checked
        .iter()
        .map(|&cpu| {
            (
                cpu,
                CpuSeen {
                    cpu,
                    ..Default::default()
                },
            )
        })
        .collect();
    for (idx, r) in inp.records.iter().enumerate() {
        match r {
            Record::Interruption(i) => {
                let (cpu, mut promise) = match place(i, inp) {
                    Some(p) => p,
                    None => continue,
                };
                if promise == Promise::TickStopped
                    && matches!(i.who, Who::LocalTimer { .. })
                    && !own_ns.tick_interrupts.contains(&idx)
                {
                    // A timer interrupt that ran no tick ran other timers' callbacks.
                    promise = Promise::NoPerCpuWork;
                }
                let s = seen.get_mut(&cpu).expect("placed on a checked CPU");
                if promise == Promise::TickStopped && matches!(i.who, Who::Hrtimer { .. }) {
                    s.ticks += 1;
                }
                if i.class == CulpritClass::FreqChange {
                    s.freq_changes += 1;
                }
                let ran_tick = own_ns.tick_interrupts.contains(&idx);
                let who = fold(&i.who, ran_tick);
                let row = rows.entry((cpu, promise, i.class, who)).or_default();
                row.class = Some(i.class);
                // The timer interrupt that ran the tick adds its own time to the tick's row;
                // the tick is counted once, by its callback.
                row.count += u64::from(!ran_tick);
                let t = own_ns.own.get(&idx).copied().unwrap_or(i.duration_ns());
                row.time_ns += t;
                row.longest_ns = row.longest_ns.max(t);
                if let Who::Irq { number, .. } = i.who {
                    row.irq = Some(number);
                }
            }
            Record::Steal(st) => steal_row(st, inp, &mut rows),
            _ => {}
        }
    }
    let causes: Vec<&Cause> = inp
        .records
        .iter()
        .filter_map(|r| match r {
            Record::Cause(c) => Some(c),
            _ => None,
        })
        .collect();
    for ((cpu, promise, _, who), mut row) in rows {
        let (name, detail) = words_of(&who);
        row.name = name;
        row.detail = detail;
        row.from = senders(&who, cpu, &causes);
        row.who = Some(who);
        let s = seen.get_mut(&cpu).expect("rows are of checked CPUs");
        s.rows.entry(promise).or_default().push(row);
    }
    for s in seen.values_mut() {
        for v in s.rows.values_mut() {
            v.sort_by(|a, b| b.time_ns.cmp(&a.time_ns).then(b.count.cmp(&a.count)));
            fold_tail(v);
        }
    }
    seen.into_values().collect()
}

/// The steal clock's growth on a checked CPU: the host's row.
fn steal_row(
    st: &StealSample,
    inp: &Inputs,
    rows: &mut BTreeMap<(Cpu, Promise, CulpritClass, Who), Seen>,
) {
    if !inp.checked.contains(&st.cpu) || st.steal_ns == 0 {
        return;
    }
    let key = (
        st.cpu,
        Promise::NoHostPreemption,
        CulpritClass::Hypervisor,
        Who::Host { cpu: st.cpu },
    );
    let row = rows.entry(key).or_default();
    row.class = Some(CulpritClass::Hypervisor);
    row.count += 1;
    row.time_ns += st.steal_ns;
    row.longest_ns = row.longest_ns.max(st.steal_ns);
}

/// Past `MAX_ROWS` culprits, one row sums the rest.
fn fold_tail(v: &mut Vec<Seen>) {
    if v.len() <= MAX_ROWS {
        return;
    }
    let rest = v.split_off(MAX_ROWS - 1);
    let mut others = Seen {
        name: crate::report::culprit::OTHERS_NAME.to_string(),
        detail: format!("{} culprits", rest.len()),
        ..Default::default()
    };
    for r in rest {
        others.count += r.count;
        others.time_ns += r.time_ns;
        others.longest_ns = others.longest_ns.max(r.longest_ns);
    }
    v.push(others);
}

/// The checked CPU and promise a record counts against; None for the checked tasks' own runs
/// and for what does not matter (a sibling's idle-time events).
fn place(i: &crate::model::Interruption, inp: &Inputs) -> Option<(Cpu, Promise)> {
    let own_task = matches!(i.class, CulpritClass::Task) && inp.own.contains(&i.pid);
    let own_timer = matches!(
        &i.who,
        Who::Hrtimer { callback: TimerCallback::Wakeup { pid, .. }, .. } if inp.own.contains(pid)
    );
    if own_task || own_timer || i.class == CulpritClass::Fault {
        return None;
    }
    if inp.checked.contains(&i.cpu) {
        return Some((i.cpu, promise_of(i)));
    }
    let (_, checked) = inp.siblings.iter().find(|(s, _)| *s == i.cpu)?;
    let takes_the_core = matches!(
        i.class,
        CulpritClass::Task
            | CulpritClass::Kthread
            | CulpritClass::Kworker
            | CulpritClass::Irq
            | CulpritClass::Softirq
    );
    takes_the_core.then_some((*checked, Promise::QuietSibling))
}

/// The promise an interruption on a checked CPU breaks.
fn promise_of(i: &crate::model::Interruption) -> Promise {
    match (&i.class, &i.who) {
        (CulpritClass::Task | CulpritClass::SelfNoise, _) => Promise::NoOtherTasks,
        (CulpritClass::Kthread, Who::Kthread { comm }) => kthread_promise(comm),
        (CulpritClass::Kworker, Who::Work { worker, .. }) if unbound_worker(worker) => {
            Promise::NoUnboundWork
        }
        (CulpritClass::Kworker, _) => Promise::NoPerCpuWork,
        (CulpritClass::Irq, _) => Promise::NoDeviceIrqs,
        (CulpritClass::Softirq, Who::Softirq { vector }) => match *vector {
            SOFTIRQ_TIMER | SOFTIRQ_HRTIMER => Promise::NoPerCpuWork,
            SOFTIRQ_SCHED => Promise::NoLoadBalancing,
            SOFTIRQ_RCU => Promise::NoRcuCallbacks,
            _ => Promise::NoDeviceIrqs,
        },
        (CulpritClass::TimerTick, Who::Hrtimer { callback, .. }) => match callback {
            TimerCallback::Tick => Promise::TickStopped,
            _ => Promise::NoPerCpuWork,
        },
        (CulpritClass::TimerTick, _) => Promise::TickStopped,
        (CulpritClass::FreqChange, _) => Promise::SteadyFrequency,
        (CulpritClass::Hypervisor, _) => Promise::NoHostPreemption,
        _ => Promise::NoCrossCpuInterrupts,
    }
}

/// The promise a kernel thread breaks: RCU's threads, the stopper, a threaded IRQ handler
/// (`irq/24-virtio0`), a CPU's own upkeep threads (`ksoftirqd/1`, `cpuhp/1`: they serve the
/// CPU itself and go with per-CPU work); any other kernel thread is another task.
fn kthread_promise(comm: &str) -> Promise {
    let per_cpu = |prefix: &str| {
        comm.strip_prefix(prefix)
            .is_some_and(|n| n.chars().all(|c| c.is_ascii_digit()))
    };
    if comm.starts_with("rcu") {
        Promise::NoRcuCallbacks
    } else if comm.starts_with("migration/") {
        Promise::NoLoadBalancing
    } else if comm.starts_with("irq/") {
        Promise::NoDeviceIrqs
    } else if ["ksoftirqd/", "cpuhp/", "idle_inject/", "watchdog/"]
        .iter()
        .any(|p| per_cpu(p))
    {
        Promise::NoPerCpuWork
    } else {
        Promise::NoOtherTasks
    }
}

/// Softirq vectors (`softirq_to_name`, include/linux/interrupt.h).
const SOFTIRQ_TIMER: u64 = 1;
const SOFTIRQ_SCHED: u64 = 7;
const SOFTIRQ_HRTIMER: u64 = 8;
const SOFTIRQ_RCU: u64 = 9;

/// An unbound workqueue's worker (`kworker/u8:2`) or a rescuer (`kworker/R-writeback`): its
/// work may run on any CPU of the workqueue cpumask. A per-CPU worker is `kworker/1:0`.
pub fn unbound_worker(name: &str) -> bool {
    name.starts_with("kworker/u") || name.starts_with("kworker/R-")
}

/// A culprit as the check's rows tell them apart: a task per pid and policy, sleepers per
/// name, the timer interrupt's own time with the tick when it ran the tick.
fn fold(who: &Who, ran_the_tick: bool) -> Who {
    match who {
        Who::LocalTimer { .. } if ran_the_tick => Who::Hrtimer {
            soft: false,
            callback: TimerCallback::Tick,
        },
        other => other.sleeper_folded().unwrap_or_else(|| other.clone()),
    }
}

/// Who queued the work or sent the IPIs of `who` on `cpu`, most frequent first.
fn senders(who: &Who, cpu: Cpu, causes: &[&Cause]) -> Vec<String> {
    // Which causes are this culprit's: work by its function; a reschedule IPI is sent with
    // no callback, a function-call IPI with one.
    let matches: &dyn Fn(&Cause) -> bool = match who {
        Who::Work {
            item: crate::model::WorkItem::Function(f),
            ..
        } => &|c: &Cause| {
            c.kind == CauseKind::QueueWork && c.what.split('+').next() == f.split('+').next()
        },
        Who::Vector {
            vector: vector::RESCHEDULE,
        } => &|c: &Cause| c.kind == CauseKind::Ipi && c.what.is_empty(),
        Who::Vector {
            vector: vector::CALL_FUNCTION | vector::CALL_FUNCTION_SINGLE,
        } => &|c: &Cause| c.kind == CauseKind::Ipi && !c.what.is_empty(),
        _ => return Vec::new(),
    };
    let mut by: BTreeMap<String, u64> = BTreeMap::new();
    for c in causes {
        let same = c.target_cpu == cpu && matches(c);
        if same {
            let words = crate::probe::census::sender_words(c);
            *by.entry(format!("{words} on CPU {}", c.sender_cpu))
                .or_default() += 1;
        }
    }
    let mut v: Vec<(String, u64)> = by.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    v.into_iter()
        .take(MAX_SENDERS)
        .map(|(s, n)| format!("{n}× from {s}"))
        .collect()
}

/// Each interruption's own time (its span less the spans directly nested in it), by index,
/// and the timer interrupts that ran the scheduler tick.
struct OwnTimes {
    own: std::collections::HashMap<usize, Nanos>,
    tick_interrupts: HashSet<usize>,
}

fn own_times(records: &[Record]) -> OwnTimes {
    let mut idx: Vec<usize> = (0..records.len())
        .filter(|&k| matches!(records[k], Record::Interruption(_)))
        .collect();
    let span = |k: usize| match &records[k] {
        Record::Interruption(i) => (i.cpu, i.start_ns, i.end_ns),
        _ => unreachable!("only interruptions are indexed"),
    };
    idx.sort_by_key(|&k| {
        let (cpu, start, end) = span(k);
        (cpu, start, std::cmp::Reverse(end))
    });
    let mut own: std::collections::HashMap<usize, Nanos> = std::collections::HashMap::new();
    let mut tick_interrupts = HashSet::new();
    let mut stack: Vec<usize> = Vec::new();
    for &k in &idx {
        let (cpu, start, end) = span(k);
        while let Some(&top) = stack.last() {
            let (tcpu, _, tend) = span(top);
            if tcpu != cpu || tend <= start {
                stack.pop();
            } else {
                break;
            }
        }
        own.insert(k, end.saturating_sub(start));
        if let Some(&top) = stack.last() {
            if end <= span(top).2 {
                let d = end.saturating_sub(start);
                let t = own.get_mut(&top).expect("pushed with its time");
                *t = t.saturating_sub(d);
                if is_tick(&records[k]) && is_local_timer(&records[top]) {
                    tick_interrupts.insert(top);
                }
            }
        }
        stack.push(k);
    }
    OwnTimes {
        own,
        tick_interrupts,
    }
}

fn is_tick(r: &Record) -> bool {
    matches!(r, Record::Interruption(i) if matches!(i.who, Who::Hrtimer { callback: TimerCallback::Tick, .. }))
}

fn is_local_timer(r: &Record) -> bool {
    matches!(r, Record::Interruption(i) if matches!(i.who, Who::LocalTimer { .. }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Interruption, WorkItem};

    fn int(cpu: Cpu, class: CulpritClass, start: Nanos, end: Nanos, who: Who) -> Record {
        Record::Interruption(Interruption {
            cpu,
            class,
            start_ns: start,
            end_ns: end,
            id: 0,
            pid: match &who {
                Who::Task { pid, .. } => *pid,
                _ => 0,
            },
            who,
            parent: None,
            victim: 0,
        })
    }

    fn task(comm: &str, pid: u32) -> Who {
        Who::Task {
            comm: comm.into(),
            pid,
            policy: 0,
            container: None,
        }
    }

    #[test]
    fn sorts_records_by_promise_with_own_time_and_leaves_the_checked_tasks_out() {
        let tick = Who::Hrtimer {
            soft: false,
            callback: TimerCallback::Tick,
        };
        let records = vec![
            // The spinner's run holds everything else on CPU 1.
            int(1, CulpritClass::Task, 0, 10_000, task("spin", 42)),
            int(
                1,
                CulpritClass::TimerTick,
                100,
                200,
                Who::LocalTimer { callbacks: true },
            ),
            int(1, CulpritClass::TimerTick, 120, 170, tick.clone()),
            int(
                1,
                CulpritClass::Kworker,
                1_000,
                1_500,
                Who::Work {
                    worker: "kworker/u4:1".into(),
                    item: WorkItem::Function("wb_workfn".into()),
                },
            ),
            int(
                1,
                CulpritClass::Irq,
                2_000,
                2_300,
                Who::Irq {
                    number: 24,
                    action: "virtio0".into(),
                },
            ),
            int(
                1,
                CulpritClass::Softirq,
                2_300,
                2_400,
                Who::Softirq {
                    vector: SOFTIRQ_RCU,
                },
            ),
            int(1, CulpritClass::Task, 3_000, 3_400, task("bash", 7)),
            // CPU 0 is not checked and not a sibling.
            int(0, CulpritClass::Task, 0, 500, task("bash", 7)),
        ];
        let own: HashSet<u32> = [42].into();
        let seen = observe(&Inputs {
            records: &records,
            checked: &[1],
            siblings: &[],
            own: &own,
        });
        assert_eq!(seen.len(), 1);
        let s = &seen[0];
        assert_eq!(s.ticks, 1);
        // The tick: its callback (50) and its interrupt's own time (100 - 50).
        let tick_rows = s.of(Promise::TickStopped);
        assert_eq!(tick_rows.len(), 1, "{tick_rows:?}");
        assert_eq!((tick_rows[0].count, tick_rows[0].time_ns), (1, 100));
        assert_eq!(s.of(Promise::NoUnboundWork)[0].detail, "wb_workfn");
        assert_eq!(s.of(Promise::NoDeviceIrqs)[0].irq, Some(24));
        assert_eq!(s.of(Promise::NoRcuCallbacks)[0].time_ns, 100);
        let tasks = s.of(Promise::NoOtherTasks);
        assert_eq!(tasks.len(), 1, "the spinner is left out: {tasks:?}");
        assert!(tasks[0].name.contains("bash"), "{tasks:?}");
        assert_eq!(tasks[0].time_ns, 400);
        assert!(s.of(Promise::NoPerCpuWork).is_empty());
    }

    #[test]
    fn a_siblings_tasks_count_against_the_checked_cpu() {
        let records = vec![
            int(3, CulpritClass::Task, 0, 1_000, task("make", 9)),
            int(
                3,
                CulpritClass::TimerTick,
                0,
                10,
                Who::LocalTimer { callbacks: false },
            ),
        ];
        let seen = observe(&Inputs {
            records: &records,
            checked: &[1],
            siblings: &[(3, 1)],
            own: &HashSet::new(),
        });
        let rows = seen[0].of(Promise::QuietSibling);
        assert_eq!(rows.len(), 1, "only what takes the core: {rows:?}");
        // Its own time: the timer interrupt nested in its run is not its.
        assert_eq!(rows[0].time_ns, 990);
    }

    #[test]
    fn kernel_threads_go_with_what_they_serve() {
        assert_eq!(kthread_promise("rcu_preempt"), Promise::NoRcuCallbacks);
        assert_eq!(kthread_promise("rcuc/1"), Promise::NoRcuCallbacks);
        assert_eq!(kthread_promise("migration/1"), Promise::NoLoadBalancing);
        assert_eq!(kthread_promise("irq/24-virtio0"), Promise::NoDeviceIrqs);
        assert_eq!(kthread_promise("ksoftirqd/1"), Promise::NoPerCpuWork);
        assert_eq!(kthread_promise("cpuhp/12"), Promise::NoPerCpuWork);
        assert_eq!(kthread_promise("kswapd0"), Promise::NoOtherTasks);
        assert_eq!(kthread_promise("ksoftirqd_x"), Promise::NoOtherTasks);
    }

    #[test]
    fn tells_unbound_workers_from_per_cpu_ones() {
        assert!(unbound_worker("kworker/u8:2"));
        assert!(unbound_worker("kworker/R-writeback"));
        assert!(!unbound_worker("kworker/1:0H"));
    }
}
