//! A culprit in words: the name, detail and `via` that the report, the run file and the live
//! view show for a typed culprit (`model::Culprit`). The only place culprits become English;
//! nothing reads these words back to tell culprits apart.

use std::fmt::Write;

use crate::attribution::theft::Label;
pub use crate::model::{softirq_name, vector_name};
use crate::model::{
    vector, CauseKind, ContainerTag, Cpu, Culprit, FaultKind, OwnIpiWhy, Sender, SentFrom,
    TimerCallback, Via, Who, WorkItem, ANY_PID,
};
use crate::units::fmt_ns;

/// A kworker's detail when its work function could not be read, saying why (the only case
/// in which a worker goes unnamed).
pub const WORK_UNREADABLE: &str =
    "(no work item seen: the worker's current work function could not be read on this kernel)";
/// A kworker's detail when it ran and started no work item (woke, found nothing, slept).
pub const RAN_NO_WORK: &str = "(ran no work item)";

/// The hypervisor culprit's name (the KVM steal clock's growth).
pub const HYPERVISOR_NAME: &str = "host preemption";
pub const UNEXPLAINED_NAME: &str = "no kernel event";
pub const UNEXPLAINED_DETAIL: &str =
    "no kernel event and no steal: host interrupt handling, VM exits, SMI or hardware";
/// Said instead where the machine has no steal clock to tell host preemption apart.
pub const UNEXPLAINED_DETAIL_NO_STEAL: &str =
    "no kernel event (no steal clock here): hypervisor preemption, SMI or hardware";
pub const LOST_NAME: &str = "kernel records lost";
pub const LOST_DETAIL: &str = "a BPF record ring was full; cause unknown";
/// The row of a class's culprits past those a bounded list tells apart.
pub const OTHERS_NAME: &str = "others (past the culprits told apart)";

/// A `throttled` culprit's name: the scheduler held the thread off.
pub const THROTTLED_NAME: &str = "scheduler";

/// A `throttled` culprit's detail: which kind of throttling, told by the held thread's
/// policy — RT throttling applies to SCHED_FIFO/RR only, a CPU quota to the others.
pub fn throttled_detail(policy: u32) -> String {
    let name = policy_name(policy);
    match policy {
        1 | 2 => format!("RT throttling (sched_rt_runtime_us) of a {name} thread"),
        0 | 3 | 5 => format!("a cgroup CPU quota (cpu.max) of a {name} thread"),
        _ => format!("RT throttling or a cgroup CPU quota of a {name} thread"),
    }
}

/// The hypervisor culprit's detail for `cpu`.
pub fn hypervisor_detail(cpu: Cpu) -> String {
    format!("the host kept vCPU {cpu} off its physical CPU (KVM steal clock)")
}

/// A scheduling policy's name (`SCHED_*` of `sched.h`).
pub fn policy_name(p: u32) -> &'static str {
    match p {
        0 => "SCHED_OTHER",
        1 => "SCHED_FIFO",
        2 => "SCHED_RR",
        3 => "SCHED_BATCH",
        5 => "SCHED_IDLE",
        6 => "SCHED_DEADLINE",
        _ => "SCHED_?",
    }
}

/// A pid as shown: `*` for any (`model::ANY_PID`, a ranking's folded sleepers).
fn shown_pid(pid: u32) -> String {
    if pid == ANY_PID {
        "*".to_string()
    } else {
        pid.to_string()
    }
}

/// How a culprit is named: `kworker/3:1`, `36 virtio1-req.0`, `NET_RX`, `local timer`,
/// `java[4121]`, `cpu 3` …
pub fn name(who: &Who) -> String {
    match who {
        // A row of a command name's processes names no pid.
        Who::Task { comm, pid, .. } if *pid == ANY_PID => comm.to_string(),
        Who::Task { comm, pid, .. } => format!("{comm}[{pid}]"),
        Who::Kthread { comm } => comm.to_string(),
        Who::Work { worker, .. } => worker.to_string(),
        Who::Irq { number, action } => format!("{number} {action}"),
        Who::Softirq { vector } => softirq_name(*vector),
        Who::Vector { vector } => vector_name(*vector).to_string(),
        Who::LocalTimer { .. } => vector_name(vector::LOCAL_TIMER).to_string(),
        Who::Hrtimer { soft: true, .. } => "hrtimer (softirq)".to_string(),
        Who::Hrtimer { soft: false, .. } => vector_name(vector::LOCAL_TIMER).to_string(),
        Who::Nmi { .. } => "nmi".to_string(),
        Who::Freq { cpu, .. } => format!("cpu {cpu}"),
        Who::Fault { .. } => "page fault".to_string(),
        Who::Throttled { .. } => THROTTLED_NAME.to_string(),
        Who::OwnIpi { vector, .. } => format!("{} IPI", vector_name(*vector)),
        Who::Host { .. } | Who::AnyHost => HYPERVISOR_NAME.to_string(),
        Who::Unexplained { .. } => UNEXPLAINED_NAME.to_string(),
        Who::Lost => LOST_NAME.to_string(),
        Who::Others => OTHERS_NAME.to_string(),
    }
}

/// A row of one command name's tasks: `taskset — 31 tasks`, `sleep — 1024+ tasks` (the kernel's
/// tasks, told apart by pid: a shell loop's processes, or threads of one process sharing a name)
/// when more took part than were told apart.
pub fn grouped_name(name: &str, count: u64, more: bool) -> String {
    let plus = if more { "+" } else { "" };
    format!("{name} — {count}{plus} tasks")
}

/// Where a task ran: `in container js-noise (podman)`, on Kubernetes `in container engine of
/// pod prod/trader-7d9f`.
pub fn in_container(c: &ContainerTag) -> String {
    match &c.pod {
        Some(pod) => format!("in container {} of pod {pod}", c.name),
        None => format!("in container {} ({})", c.name, c.runtime),
    }
}

/// What a culprit did: the work function, the scheduling policy, `3000000→1200000 kHz` …;
/// empty when there is nothing to add to its name.
pub fn detail(who: &Who) -> String {
    match who {
        Who::Task {
            policy,
            container: Some(c),
            ..
        } => format!("{} {}", policy_name(*policy), in_container(c)),
        Who::Task { policy, .. } => policy_name(*policy).to_string(),
        Who::Kthread { .. }
        | Who::Irq { .. }
        | Who::Softirq { .. }
        | Who::Vector { .. }
        | Who::Others => String::new(),
        Who::Lost => LOST_DETAIL.to_string(),
        Who::Work { item, .. } => match item {
            WorkItem::Function(f) => f.to_string(),
            WorkItem::Unreadable => WORK_UNREADABLE.to_string(),
            WorkItem::NoItem => RAN_NO_WORK.to_string(),
        },
        Who::LocalTimer { callbacks: true } => "timer interrupt outside callbacks".to_string(),
        Who::LocalTimer { callbacks: false } => {
            "timer interrupt, no hrtimer callback seen".to_string()
        }
        Who::Hrtimer { callback, .. } => match callback {
            TimerCallback::Tick => "scheduler tick".to_string(),
            TimerCallback::Wakeup { comm, pid } => {
                format!("hrtimer_wakeup of {comm}[{}]", shown_pid(*pid))
            }
            TimerCallback::OwnSleep { comm } => {
                format!("hrtimer_wakeup of {comm} (jitterscope's own sleep)")
            }
            TimerCallback::Function(f) => f.to_string(),
        },
        Who::Nmi { handler } => handler.to_string(),
        Who::Freq {
            old_khz,
            new_khz,
            before_ns,
            ..
        } => {
            let mut s = if *old_khz == 0 {
                format!("?→{new_khz} kHz")
            } else {
                format!("{old_khz}→{new_khz} kHz")
            };
            if *before_ns > 0 {
                let _ = write!(s, ", {} before the stall", fmt_ns(*before_ns));
            }
            s
        }
        Who::Fault { kind } => match kind {
            FaultKind::Failed => "failed fault",
            FaultKind::Major => "major fault (waited for I/O)",
            FaultKind::Minor => "minor fault",
        }
        .to_string(),
        Who::OwnIpi { why, .. } => match why {
            OwnIpiWhy::TlbShootdown { sender } => format!("TLB shootdown from {sender}"),
            OwnIpiWhy::WakeUp { sender } => format!("wake-up sent by {sender}"),
            OwnIpiWhy::Callback { function, sender } => format!("{function} from {sender}"),
        },
        Who::Throttled { policy } => throttled_detail(*policy),
        Who::Host { cpu } => hypervisor_detail(*cpu),
        Who::AnyHost => "KVM steal clock".to_string(),
        Who::Unexplained { steal_clock: true } => UNEXPLAINED_DETAIL.to_string(),
        Who::Unexplained { steal_clock: false } => UNEXPLAINED_DETAIL_NO_STEAL.to_string(),
    }
}

/// `name` and `detail` of a culprit.
pub fn words(c: &Culprit) -> (String, String) {
    words_of(&c.who)
}

/// `name` and `detail` of who a culprit is.
pub fn words_of(who: &Who) -> (String, String) {
    (name(who), detail(who))
}

/// How the sender reads: `queued by kswapd0[97] on CPU 2`, `sent by bash[4121] on CPU 0
/// (flush_tlb_func)`, `queued from the TIMER softirq on CPU 1 (a timer expired: delayed
/// work)`, `; woke java[4121]` after it for a wake-up; empty when unknown.
pub fn via(v: Option<&Via>) -> String {
    let Some(v) = v else {
        return String::new();
    };
    let mut s = String::new();
    if let Some(k) = &v.sender {
        sender(&mut s, k);
    }
    if let Some(w) = &v.woke {
        if !s.is_empty() {
            s.push_str("; ");
        }
        s.push_str("woke ");
        s.push_str(&name(w));
    }
    s
}

/// `queued by comm[pid] on CPU n`, or `queued from <the interrupt> on CPU n`: the task current
/// under an interrupt is never named as the sender.
fn sender(s: &mut String, k: &Sender) {
    let verb = match k.kind {
        CauseKind::QueueWork => "queued",
        CauseKind::Ipi => "sent",
    };
    match sent_from(k.from) {
        None => {
            let _ = write!(s, "{verb} by {}[{}] on CPU {}", k.comm, k.pid, k.cpu);
        }
        Some(from) => {
            let _ = write!(s, "{verb} from {from} on CPU {}", k.cpu);
        }
    }
    if k.kind == CauseKind::Ipi && !k.function.is_empty() {
        let _ = write!(s, " ({})", k.function);
    }
    if k.kind == CauseKind::QueueWork
        && k.from
            == (SentFrom::Softirq {
                vector: Some(TIMER_SOFTIRQ),
            })
    {
        s.push_str(" (a timer expired: delayed work)");
    }
}

/// The TIMER softirq's vector: timer_list callbacks, delayed work's among them.
const TIMER_SOFTIRQ: u64 = 1;

/// The interrupt a cause was sent from, `None` for a task's own doing.
fn sent_from(from: SentFrom) -> Option<String> {
    Some(match from {
        SentFrom::Task => return None,
        SentFrom::Softirq { vector: Some(v) } => format!("the {} softirq", softirq_name(v)),
        SentFrom::Softirq { vector: None } => "a softirq".to_string(),
        SentFrom::SoftHrtimer => "an hrtimer callback (HRTIMER softirq)".to_string(),
        SentFrom::HardIrq => "a hard interrupt".to_string(),
        SentFrom::Irq { number } => format!("IRQ {number}"),
        SentFrom::Vector { vector: v } => format!("the {} interrupt", vector_name(v)),
        SentFrom::Hrtimer => "an hrtimer callback (timer interrupt)".to_string(),
        SentFrom::Nmi => "an NMI".to_string(),
    })
}

/// The container and pod labels of a culprit's metrics series: names, empty for a culprit
/// in no container (and for a container outside Kubernetes, its pod).
pub fn label_container(l: &Label) -> (String, String) {
    match l {
        Label::Contained { container, .. } => (
            container.name.clone(),
            container.pod.clone().unwrap_or_default(),
        ),
        _ => (String::new(), String::new()),
    }
}

/// A culprit as a metrics series names it (`attribution::theft::Label`).
pub fn label(l: &Label) -> String {
    match l {
        Label::Comm(comm) | Label::Contained { comm, .. } => comm.to_string(),
        Label::Work(WorkItem::Function(f)) => f.to_string(),
        Label::Work(WorkItem::Unreadable) => WORK_UNREADABLE.to_string(),
        Label::Work(WorkItem::NoItem) => RAN_NO_WORK.to_string(),
        Label::Irq { number, action } => format!("{number} {action}"),
        Label::Softirq(v) => softirq_name(*v),
        Label::Vector(v) => vector_name(*v).to_string(),
        Label::SoftHrtimer => "hrtimer (softirq)".to_string(),
        Label::Nmi => "nmi".to_string(),
        Label::Freq(cpu) => format!("cpu {cpu}"),
        Label::Fault => "page fault".to_string(),
        Label::Throttled(policy) => format!("{THROTTLED_NAME} ({})", policy_name(*policy)),
        Label::OwnIpi(v) => format!("{} IPI", vector_name(*v)),
        Label::Host => HYPERVISOR_NAME.to_string(),
        Label::Unexplained => UNEXPLAINED_NAME.to_string(),
        Label::Lost => LOST_NAME.to_string(),
        Label::Others => OTHERS_NAME.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::CulpritClass;

    fn text(s: &str) -> crate::model::Text {
        s.into()
    }

    fn contained(pod: Option<&str>) -> Who {
        Who::Task {
            comm: text("sh"),
            pid: 4121,
            policy: 0,
            container: Some(std::sync::Arc::new(ContainerTag {
                name: if pod.is_some() { "engine" } else { "js-noise" }.to_string(),
                runtime: "podman".to_string(),
                short_id: "3f2a9c1b7d4e".to_string(),
                pod: pod.map(str::to_string),
            })),
        }
    }

    #[test]
    fn a_task_in_a_container_is_named_by_its_container_and_pod() {
        assert_eq!(
            words_of(&contained(None)),
            (
                "sh[4121]".to_string(),
                "SCHED_OTHER in container js-noise (podman)".to_string()
            )
        );
        assert_eq!(
            detail(&contained(Some("prod/trader-7d9f"))),
            "SCHED_OTHER in container engine of pod prod/trader-7d9f"
        );
    }

    #[test]
    fn culprits_read_as_they_always_have() {
        let cases = [
            (
                Who::Task {
                    comm: text("java"),
                    pid: 4121,
                    policy: 0,
                    container: None,
                },
                "java[4121]",
                "SCHED_OTHER",
            ),
            (
                Who::Irq {
                    number: 36,
                    action: text("virtio1-req.0"),
                },
                "36 virtio1-req.0",
                "",
            ),
            (
                Who::Work {
                    worker: text("kworker/3:1"),
                    item: WorkItem::Function(text("vmstat_update")),
                },
                "kworker/3:1",
                "vmstat_update",
            ),
            (Who::Softirq { vector: 3 }, "NET_RX", ""),
            (
                Who::Freq {
                    cpu: 3,
                    old_khz: 3_000_000,
                    new_khz: 1_200_000,
                    before_ns: 0,
                },
                "cpu 3",
                "3000000→1200000 kHz",
            ),
            (Who::Lost, LOST_NAME, LOST_DETAIL),
        ];
        for (who, n, d) in cases {
            assert_eq!((name(&who).as_str(), detail(&who).as_str()), (n, d));
        }
    }

    #[test]
    fn a_comm_with_brackets_is_shown_as_it_is() {
        let c = Culprit {
            class: CulpritClass::Task,
            who: Who::Task {
                comm: text("foo[12]"),
                pid: 7,
                policy: 1,
                container: None,
            },
        };
        assert_eq!(words(&c), ("foo[12][7]".into(), "SCHED_FIFO".into()));
    }

    #[test]
    fn via_names_the_sender_and_the_woken_task() {
        let v = Via {
            sender: Some(Sender {
                kind: CauseKind::Ipi,
                cpu: 0,
                comm: text("bash"),
                pid: 4121,
                function: text(""),
                from: SentFrom::Task,
            }),
            woke: Some(Who::Task {
                comm: text("java"),
                pid: 9,
                policy: 0,
                container: None,
            }),
        };
        assert_eq!(via(Some(&v)), "sent by bash[4121] on CPU 0; woke java[9]");
        assert_eq!(via(None), "");
    }

    #[test]
    fn work_queued_from_an_interrupt_names_the_interrupt_not_the_task_it_interrupted() {
        let from = |from| {
            via(Some(&Via {
                sender: Some(Sender {
                    kind: CauseKind::QueueWork,
                    cpu: 1,
                    comm: text("js-consumer-1"),
                    pid: 7169,
                    function: text("gc_worker"),
                    from,
                }),
                woke: None,
            }))
        };
        assert_eq!(
            from(SentFrom::Softirq { vector: Some(1) }),
            "queued from the TIMER softirq on CPU 1 (a timer expired: delayed work)"
        );
        assert_eq!(
            from(SentFrom::Softirq { vector: None }),
            "queued from a softirq on CPU 1"
        );
        assert_eq!(
            from(SentFrom::Irq { number: 11 }),
            "queued from IRQ 11 on CPU 1"
        );
        assert_eq!(
            from(SentFrom::Vector {
                vector: vector::LOCAL_TIMER
            }),
            "queued from the local timer interrupt on CPU 1"
        );
        assert_eq!(from(SentFrom::Nmi), "queued from an NMI on CPU 1");
        assert_eq!(
            from(SentFrom::Task),
            "queued by js-consumer-1[7169] on CPU 1"
        );
    }
}
