//! The ABI header's constants (bpf/jitterscope.h) in Rust: the record kinds, the episode
//! classes, the cause codes, `js_whoami`'s questions and the record flags. The header's types
//! come through the skeleton; its constants are written here once, and a test reads the header
//! and checks every one of them (the x86 vectors live in `model::vector`, which the engine
//! uses, and are checked here too).

/// `enum js_kind`: what a record is (its first field).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Kind {
    /// A completed episode on a measured CPU.
    Interruption = 1,
    /// Work queued or an IPI sent to a measured CPU.
    Cause = 2,
    /// Records of a CPU were lost in `[start_ns, end_ns]`.
    Lost = 3,
    /// The CPU's KVM steal clock grew.
    Steal = 4,
    /// Watch mode: a watched thread waited for a CPU until it ran.
    Wait = 5,
    /// Watch mode: a thread watched from now (created in the watched process or cgroup, or
    /// moved into that cgroup).
    ThreadNew = 6,
    /// Watch mode: a watched thread exited.
    ThreadExit = 7,
    /// Watch mode: a watched thread exec'd from beside its process's main thread and took
    /// that thread's id.
    ThreadExec = 8,
}

impl Kind {
    pub const ALL: [Kind; 8] = [
        Kind::Interruption,
        Kind::Cause,
        Kind::Lost,
        Kind::Steal,
        Kind::Wait,
        Kind::ThreadNew,
        Kind::ThreadExit,
        Kind::ThreadExec,
    ];

    /// None for a code the header does not define.
    pub fn from_code(code: u32) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| *k as u32 == code)
    }
}

/// `enum js_class`: the probes' class of an episode (`class_`, `parent`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u16)]
pub enum Class {
    /// No enclosing episode (`parent` only).
    None = 0,
    Task = 1,
    Kworker = 2,
    Kthread = 3,
    /// One of jitterscope's own threads.
    SelfNoise = 4,
    Irq = 5,
    Softirq = 6,
    TimerTick = 7,
    Ipi = 8,
    Nmi = 9,
    Freq = 10,
    /// One expired hrtimer's callback (`id`: its address).
    Hrtimer = 11,
    /// A page fault of a watched thread (flags `FAULT_*`).
    Fault = 12,
    /// The CPU idled while a workload (or watched) thread was runnable on it (`pid`, `name`:
    /// the thread; `aux`: its policy).
    Throttled = 13,
}

impl Class {
    pub const ALL: [Class; 14] = [
        Class::None,
        Class::Task,
        Class::Kworker,
        Class::Kthread,
        Class::SelfNoise,
        Class::Irq,
        Class::Softirq,
        Class::TimerTick,
        Class::Ipi,
        Class::Nmi,
        Class::Freq,
        Class::Hrtimer,
        Class::Fault,
        Class::Throttled,
    ];

    /// None for a code the header does not define.
    pub fn from_code(code: u16) -> Option<Class> {
        Class::ALL.into_iter().find(|c| *c as u16 == code)
    }
}

/// `enum js_cause`: what a cause record (`Kind::Cause`) reports, in its `class_`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u16)]
pub enum CauseCode {
    QueueWork = 1,
    Ipi = 2,
}

impl CauseCode {
    pub const ALL: [CauseCode; 2] = [CauseCode::QueueWork, CauseCode::Ipi];

    /// None for a code the header does not define.
    pub fn from_code(code: u16) -> Option<CauseCode> {
        CauseCode::ALL.into_iter().find(|c| *c as u16 == code)
    }
}

/// `enum js_whoami`: the question `js_whoami` answers (its args[0]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u64)]
pub enum Whoami {
    /// The calling thread's id.
    Tid = 0,
    /// The calling thread's process id.
    Tgid = 1,
    /// Records the caller's PID namespace for `js_tasks`; returns its level.
    Ns = 2,
}

/// `enum js_wait`: why a watched thread waited (a `Kind::Wait` record's `class_`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u16)]
pub enum WaitCode {
    Preempted = 1,
    Wakeup = 2,
    New = 3,
}

impl WaitCode {
    pub const ALL: [WaitCode; 3] = [WaitCode::Preempted, WaitCode::Wakeup, WaitCode::New];

    /// None for a code the header does not define.
    pub fn from_code(code: u16) -> Option<WaitCode> {
        WaitCode::ALL.into_iter().find(|c| *c as u16 == code)
    }
}

/// `enum js_thread_state`: a watched thread's state in the `watched` map.
pub const T_UNKNOWN: u16 = 0;
pub const T_RUNNING: u16 = 1;
pub const T_WAITING: u16 = 2;
pub const T_BLOCKED: u16 = 3;

/// Threads the `watched` map holds at once.
pub const WATCH_MAX: u32 = 16384;
/// The deepest cgroup a watch can follow (levels below the v2 root).
pub const CGROUP_LEVEL_MAX: u32 = 64;
/// Threads of a process moved into a watched cgroup that the programs add at the move.
pub const CGROUP_THREADS_MAX: u32 = 256;

/// Page-fault record: the fault needed I/O (`JS_FAULT_*`).
pub const FAULT_MAJOR: u32 = 1;
/// Page-fault record: the fault failed.
pub const FAULT_ERROR: u32 = 2;

/// Task episode: it replaced a workload thread that was still runnable (`JS_F_*`).
pub const F_PREEMPTED_WORKLOAD: u32 = 1;
/// Task episode: it replaced a workload thread that had blocked.
pub const F_BLOCKED_WORKLOAD: u32 = 2;
/// Kworker run: its current work function could not be read at switch-in.
pub const F_WORK_UNREAD: u32 = 4;
/// Cause: sent by one of jitterscope's own threads.
pub const F_SENDER_SELF: u32 = 8;
/// Task episode: the switch that ended it was not seen (the next one took another task off
/// the CPU); it ended by its end time, its length is not known.
pub const F_END_UNSEEN: u32 = 16;
/// A cause sent while serving a softirq.
pub const F_FROM_SOFTIRQ: u32 = 32;
/// A cause sent from a hard interrupt handler.
pub const F_FROM_HARDIRQ: u32 = 64;
/// A cause sent from an NMI.
pub const F_FROM_NMI: u32 = 128;

/// Hrtimer record: ran from the HRTIMER softirq, not from the timer interrupt (`JS_HRT_*`).
pub const HRT_SOFT: u32 = 1;
/// Hrtimer record: `hrtimer_wakeup` of a sleeping task; pid and name are the sleeper's.
pub const HRT_SLEEPER: u32 = 2;
/// Hrtimer record: that sleeper is one of jitterscope's own threads.
pub const HRT_SELF: u32 = 4;

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use super::*;
    use crate::model::vector;

    const HEADER: &str = include_str!("../../bpf/jitterscope.h");

    /// Sizes that reach Rust as the skeleton's array lengths, not as constants.
    const THROUGH_THE_SKELETON: [&str; 5] = [
        "JS_MAX_CPUS",
        "JS_COMM_LEN",
        "JS_NAME_LEN",
        "JS_TID_SLOTS",
        "JS_TICK_DEP_SLOTS",
    ];

    /// Every `JS_` enumerator and `#define` of the header with its value. The header's enums
    /// are one enumerator a line (`JS_X = 1, /* … */`).
    fn header_constants() -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        for line in HEADER.lines() {
            let code = line.split("/*").next().unwrap_or("").trim();
            let (name, value) = if let Some(define) = code.strip_prefix("#define ") {
                let mut f = define.split_whitespace();
                (f.next().unwrap_or(""), f.next().unwrap_or(""))
            } else if let Some((name, value)) = code.split_once('=') {
                (name.trim(), value.trim().trim_end_matches(','))
            } else {
                continue;
            };
            if let (true, Ok(value)) = (name.starts_with("JS_"), value.parse()) {
                assert!(
                    out.insert(name.to_string(), value).is_none(),
                    "{name} twice"
                );
            }
        }
        out
    }

    #[test]
    fn every_constant_of_the_abi_header_matches_its_rust_copy() {
        let rust: BTreeMap<String, u64> = [
            ("JS_REC_INTERRUPTION", Kind::Interruption as u64),
            ("JS_REC_CAUSE", Kind::Cause as u64),
            ("JS_REC_LOST", Kind::Lost as u64),
            ("JS_REC_STEAL", Kind::Steal as u64),
            ("JS_REC_WAIT", Kind::Wait as u64),
            ("JS_REC_THREAD_NEW", Kind::ThreadNew as u64),
            ("JS_REC_THREAD_EXIT", Kind::ThreadExit as u64),
            ("JS_REC_THREAD_EXEC", Kind::ThreadExec as u64),
            ("JS_CLASS_FAULT", Class::Fault as u64),
            ("JS_CLASS_THROTTLED", Class::Throttled as u64),
            ("JS_WAIT_PREEMPTED", WaitCode::Preempted as u64),
            ("JS_WAIT_WAKEUP", WaitCode::Wakeup as u64),
            ("JS_WAIT_NEW", WaitCode::New as u64),
            ("JS_T_UNKNOWN", T_UNKNOWN.into()),
            ("JS_T_RUNNING", T_RUNNING.into()),
            ("JS_T_WAITING", T_WAITING.into()),
            ("JS_T_BLOCKED", T_BLOCKED.into()),
            ("JS_WHOAMI_NS", Whoami::Ns as u64),
            ("JS_WATCH_MAX", WATCH_MAX.into()),
            ("JS_CGROUP_LEVEL_MAX", CGROUP_LEVEL_MAX.into()),
            ("JS_CGROUP_THREADS_MAX", CGROUP_THREADS_MAX.into()),
            ("JS_FAULT_MAJOR", FAULT_MAJOR.into()),
            ("JS_FAULT_ERROR", FAULT_ERROR.into()),
            ("JS_CLASS_NONE", Class::None as u64),
            ("JS_CLASS_TASK", Class::Task as u64),
            ("JS_CLASS_KWORKER", Class::Kworker as u64),
            ("JS_CLASS_KTHREAD", Class::Kthread as u64),
            ("JS_CLASS_SELF", Class::SelfNoise as u64),
            ("JS_CLASS_IRQ", Class::Irq as u64),
            ("JS_CLASS_SOFTIRQ", Class::Softirq as u64),
            ("JS_CLASS_TIMER_TICK", Class::TimerTick as u64),
            ("JS_CLASS_IPI", Class::Ipi as u64),
            ("JS_CLASS_NMI", Class::Nmi as u64),
            ("JS_CLASS_FREQ", Class::Freq as u64),
            ("JS_CLASS_HRTIMER", Class::Hrtimer as u64),
            ("JS_VEC_LOCAL_TIMER", vector::LOCAL_TIMER),
            ("JS_VEC_RESCHEDULE", vector::RESCHEDULE),
            ("JS_VEC_CALL_FUNCTION", vector::CALL_FUNCTION),
            ("JS_VEC_CALL_FUNCTION_SINGLE", vector::CALL_FUNCTION_SINGLE),
            ("JS_VEC_IRQ_WORK", vector::IRQ_WORK),
            ("JS_VEC_THERMAL", vector::THERMAL),
            ("JS_VEC_X86_PLATFORM_IPI", vector::X86_PLATFORM_IPI),
            ("JS_VEC_SPURIOUS", vector::SPURIOUS),
            ("JS_VEC_ERROR", vector::ERROR),
            ("JS_CAUSE_QUEUE_WORK", CauseCode::QueueWork as u64),
            ("JS_CAUSE_IPI", CauseCode::Ipi as u64),
            ("JS_WHOAMI_TID", Whoami::Tid as u64),
            ("JS_WHOAMI_TGID", Whoami::Tgid as u64),
            ("JS_F_PREEMPTED_WORKLOAD", F_PREEMPTED_WORKLOAD.into()),
            ("JS_F_BLOCKED_WORKLOAD", F_BLOCKED_WORKLOAD.into()),
            ("JS_F_WORK_UNREAD", F_WORK_UNREAD.into()),
            ("JS_F_SENDER_SELF", F_SENDER_SELF.into()),
            ("JS_F_END_UNSEEN", F_END_UNSEEN.into()),
            ("JS_F_FROM_SOFTIRQ", F_FROM_SOFTIRQ.into()),
            ("JS_F_FROM_HARDIRQ", F_FROM_HARDIRQ.into()),
            ("JS_F_FROM_NMI", F_FROM_NMI.into()),
            ("JS_HRT_SOFT", HRT_SOFT.into()),
            ("JS_HRT_SLEEPER", HRT_SLEEPER.into()),
            ("JS_HRT_SELF", HRT_SELF.into()),
        ]
        .into_iter()
        .map(|(n, v)| (n.to_string(), v))
        .collect();
        let mut header = header_constants();
        for name in THROUGH_THE_SKELETON {
            assert!(header.remove(name).is_some(), "{name} is not in the header");
        }
        // Both ways: a constant added to the header fails here until Rust has it.
        assert_eq!(header, rust);
    }

    #[test]
    fn the_code_tables_hold_every_code_of_the_header() {
        let header = header_constants();
        let codes = |prefix: &str| -> BTreeSet<u64> {
            header
                .iter()
                .filter(|(n, _)| n.starts_with(prefix))
                .map(|(_, &v)| v)
                .collect()
        };
        assert_eq!(codes("JS_REC_"), Kind::ALL.map(|k| k as u64).into());
        assert_eq!(codes("JS_CLASS_"), Class::ALL.map(|c| c as u64).into());
        assert_eq!(codes("JS_CAUSE_"), CauseCode::ALL.map(|c| c as u64).into());
        assert_eq!(codes("JS_WAIT_"), WaitCode::ALL.map(|c| c as u64).into());
        for k in Kind::ALL {
            assert_eq!(Kind::from_code(k as u32), Some(k));
        }
        for c in Class::ALL {
            assert_eq!(Class::from_code(c as u16), Some(c));
        }
        for c in CauseCode::ALL {
            assert_eq!(CauseCode::from_code(c as u16), Some(c));
        }
        assert_eq!(Kind::from_code(99), None);
        assert_eq!(Class::from_code(14), None);
        assert_eq!(CauseCode::from_code(0), None);
    }
}
