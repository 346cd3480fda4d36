//! The probes' records (the skeleton's `js_record`) to the shared vocabulary: interruptions,
//! causes and lost-record windows, with names a person reads.

use super::abi::{self, CauseCode, Kind, F_WORK_UNREAD, HRT_SELF, HRT_SLEEPER, HRT_SOFT};
use super::kallsyms::Kallsyms;
use super::skel::types::js_record;
use std::collections::HashSet;

use crate::model::{
    vector, Cause, CauseKind, Culprit, CulpritClass, FaultKind, Interruption, SentFrom,
    StealSample, Text, ThreadChange, ThreadEvent, TimerCallback, Wait, WaitKind, Who, WorkItem,
};
use crate::platform::fast_hash::FastMap;

const _: () = assert!(std::mem::size_of::<js_record>() == 96);

/// One decoded record.
#[derive(Debug, Clone, PartialEq)]
pub enum Record {
    Interruption(Interruption),
    Cause(Cause),
    /// Watch mode: a watched thread waited for a CPU until it ran.
    Wait(Wait),
    /// Watch mode: a thread was created in, or exited from, the watched set, or took another
    /// id by an exec.
    Thread(ThreadEvent),
    /// The CPU's KVM steal clock grew (see `StealSample`).
    Steal(StealSample),
    /// `count` records of `cpu` were lost between `start_ns` and `end_ns`. A count of 0: the
    /// window was still open at a drain (its record, with the count, comes later).
    Lost {
        cpu: u32,
        start_ns: u64,
        end_ns: u64,
        count: u64,
    },
}

/// A task's run whose closing switch the probes did not see (`abi::F_END_UNSEEN`, a flag of
/// task-level interruption records only: other classes use those bits otherwise).
pub fn end_unseen(r: &js_record) -> bool {
    use abi::Class as K;
    Kind::from_code(r.kind) == Some(Kind::Interruption)
        && matches!(
            abi::Class::from_code(r.class_),
            Some(K::Task | K::Kworker | K::Kthread | K::SelfNoise)
        )
        && r.flags & abi::F_END_UNSEEN != 0
}

/// The culprit class of a probes' class code (`enum js_class`); None for `JS_CLASS_NONE` and
/// for a code the header does not define.
pub fn class_of(code: u16) -> Option<CulpritClass> {
    abi::Class::from_code(code).and_then(culprit_of)
}

fn culprit_of(class: abi::Class) -> Option<CulpritClass> {
    use abi::Class as K;
    Some(match class {
        K::None => return None,
        K::Task => CulpritClass::Task,
        K::Kworker => CulpritClass::Kworker,
        K::Kthread => CulpritClass::Kthread,
        K::SelfNoise => CulpritClass::SelfNoise,
        K::Irq => CulpritClass::Irq,
        K::Softirq => CulpritClass::Softirq,
        K::TimerTick => CulpritClass::TimerTick,
        K::Ipi => CulpritClass::Ipi,
        K::Nmi => CulpritClass::Nmi,
        K::Freq => CulpritClass::FreqChange,
        K::Fault => CulpritClass::Fault,
        K::Throttled => CulpritClass::Throttled,
        // An hrtimer callback: the timer interrupt's work (see `hrtimer`).
        K::Hrtimer => CulpritClass::TimerTick,
    })
}

fn c_string(raw: &[i8]) -> String {
    let bytes: Vec<u8> = raw
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The work item of a kworker record. A run with none has two readings, told apart because
/// they mean different things to whoever tunes the CPU: the worker's current function could
/// not be read when it was switched in (it may have been inside an item: unknown), or the
/// worker ran and started no item (it woke to manage its pool, to find the work already
/// taken by another worker, or to go idle again).
fn work_item(r: &js_record, syms: &mut Kallsyms, names: &mut Names) -> WorkItem {
    if r.detail != 0 {
        WorkItem::Function(names.text(&syms.name(r.detail)))
    } else if r.flags & F_WORK_UNREAD != 0 {
        WorkItem::Unreadable
    } else {
        WorkItem::NoItem
    }
}

/// One expired hrtimer's callback: the timer interrupt's work (class `timer_tick`, shown like
/// the timer interrupt that ran it, so that per-cause totals stay comparable with a
/// recorder's local_timer vector), or jitterscope's own sleep ending (`self`).
fn hrtimer(r: &js_record, syms: &mut Kallsyms, names: &mut Names) -> (CulpritClass, Who) {
    let soft = r.flags & HRT_SOFT != 0;
    let (class, callback) = if r.flags & HRT_SLEEPER != 0 {
        let comm = names.text(&c_string(&r.name));
        if r.flags & HRT_SELF != 0 {
            (CulpritClass::SelfNoise, TimerCallback::OwnSleep { comm })
        } else {
            let pid = r.pid;
            (CulpritClass::TimerTick, TimerCallback::Wakeup { comm, pid })
        }
    } else {
        let func = syms.name(r.id);
        // tick_sched_timer became tick_nohz_handler in Linux 6.9.
        let callback = match func.as_str() {
            "tick_nohz_handler" | "tick_sched_timer" => TimerCallback::Tick,
            _ => TimerCallback::Function(names.text(&func)),
        };
        (CulpritClass::TimerTick, callback)
    };
    (class, Who::Hrtimer { soft, callback })
}

/// One shared copy of each distinct name and detail the decoder produced, so that a record
/// costs no allocation that outlives its decoding (records of a storm are dropped by the
/// thousand on the collector, on a CPU it may share with the workload); and the texts of
/// each kind of record seen, so that a record like an earlier one (the next tick, the same
/// IRQ) is named without making its texts again.
#[derive(Debug, Default)]
pub struct Names {
    known: HashSet<Text>,
    made: FastMap<Made, Culprit>,
}

/// Every field of an interruption record that its class, name and detail are made from
/// (all of them but its times, nesting and victim, which are copied as they are).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Made {
    class: u16,
    cpu: u32,
    id: u64,
    detail: u64,
    pid: u32,
    aux: u32,
    flags: u32,
    name: [i8; 32],
}

impl Made {
    pub fn of(r: &js_record) -> Made {
        Made {
            class: r.class_,
            cpu: r.cpu,
            id: r.id,
            detail: r.detail,
            pid: r.pid,
            aux: r.aux,
            flags: r.flags,
            name: r.name,
        }
    }
}

/// Distinct texts kept before the set starts over (names carry pids: a long run of short
/// tasks would grow it without end — a shell loop forking ten times a second grew a soak's
/// memory 3 KiB a second with 65,536). Texts already handed out stay valid. The records'
/// texts start over at the same size.
const NAMES_KEPT: usize = 2048;

impl Names {
    pub fn text(&mut self, s: &str) -> Text {
        if let Some(t) = self.known.get(s) {
            return t.clone();
        }
        if self.known.len() >= NAMES_KEPT {
            self.known.clear();
            self.made.clear();
        }
        let t: Text = s.into();
        self.known.insert(t.clone());
        t
    }
}

pub fn decode(r: &js_record, syms: &mut Kallsyms) -> Option<Record> {
    decode_with(r, syms, &mut Names::default())
}

/// `decode`, with names and details taken from `names`.
pub fn decode_with(r: &js_record, syms: &mut Kallsyms, names: &mut Names) -> Option<Record> {
    match Kind::from_code(r.kind)? {
        Kind::Steal => Some(Record::Steal(StealSample {
            cpu: r.cpu,
            from_ns: r.start_ns,
            to_ns: r.end_ns.max(r.start_ns),
            steal_ns: r.id,
            victim: r.victim,
        })),
        Kind::Lost => Some(Record::Lost {
            cpu: r.cpu,
            start_ns: r.start_ns,
            end_ns: r.end_ns,
            count: r.id,
        }),
        Kind::Cause => Some(Record::Cause(Cause {
            target_cpu: r.cpu,
            at_ns: r.start_ns,
            kind: match CauseCode::from_code(r.class_)? {
                CauseCode::QueueWork => CauseKind::QueueWork,
                CauseCode::Ipi => CauseKind::Ipi,
            },
            sender_cpu: r.aux,
            sender_comm: c_string(&r.name),
            sender_pid: r.pid,
            sender_is_self: r.flags & abi::F_SENDER_SELF != 0,
            sent_from: sent_from(r.flags, r.parent),
            what: syms.name(r.id),
            callsite: syms.name(r.detail),
        })),
        Kind::Interruption => interruption(r, syms, names).map(Record::Interruption),
        Kind::Wait => Some(Record::Wait(Wait {
            tid: r.pid,
            name: c_string(&r.name),
            kind: match abi::WaitCode::from_code(r.class_)? {
                abi::WaitCode::Preempted => WaitKind::Preempted,
                abi::WaitCode::Wakeup => WaitKind::Wakeup,
                abi::WaitCode::New => WaitKind::New,
            },
            start_ns: r.start_ns,
            end_ns: r.end_ns.max(r.start_ns),
            from_cpu: r.aux,
            cpu: r.cpu,
            migrated_ns: (r.detail != 0).then_some(r.detail),
        })),
        Kind::ThreadNew => thread_event(
            r,
            ThreadChange::Created {
                by: r.detail as u32,
            },
        ),
        Kind::ThreadExit => thread_event(
            r,
            ThreadChange::Exited {
                sched: (r.detail, u64::from(r.victim) << 32 | u64::from(r.flags)),
            },
        ),
        Kind::ThreadExec => thread_event(
            r,
            ThreadChange::Exec {
                old_tid: r.detail as u32,
            },
        ),
    }
}

/// A watched thread's record: its ids, name and time, and what happened to it.
fn thread_event(r: &js_record, change: ThreadChange) -> Option<Record> {
    Some(Record::Thread(ThreadEvent {
        tid: r.pid,
        ns_tid: r.aux,
        ns_pid: r.id as u32,
        name: c_string(&r.name),
        at_ns: r.end_ns,
        change,
    }))
}

/// The context a cause was sent from (its `JS_F_FROM_*` flags) and what was open there: the
/// class in `parent`, the number + 1 in the flags' upper half (0: not known).
fn sent_from(flags: u32, parent: u16) -> SentFrom {
    let nr = (flags >> 16).checked_sub(1);
    let open = abi::Class::from_code(parent);
    if flags & abi::F_FROM_NMI != 0 {
        SentFrom::Nmi
    } else if flags & abi::F_FROM_HARDIRQ != 0 {
        match (open, nr) {
            (Some(abi::Class::Hrtimer), _) => SentFrom::Hrtimer,
            (Some(abi::Class::Irq), Some(n)) => SentFrom::Irq { number: n },
            (Some(abi::Class::TimerTick | abi::Class::Ipi), Some(v)) => {
                SentFrom::Vector { vector: v.into() }
            }
            _ => SentFrom::HardIrq,
        }
    } else if flags & abi::F_FROM_SOFTIRQ != 0 {
        match (open, nr) {
            (Some(abi::Class::Hrtimer), _) => SentFrom::SoftHrtimer,
            (Some(abi::Class::Softirq), Some(v)) => SentFrom::Softirq {
                vector: Some(v.into()),
            },
            _ => SentFrom::Softirq { vector: None },
        }
    } else {
        SentFrom::Task
    }
}

fn interruption(r: &js_record, syms: &mut Kallsyms, names: &mut Names) -> Option<Interruption> {
    let Culprit { class, who } = culprit_named(r, syms, names)?;
    Some(Interruption {
        cpu: r.cpu,
        class,
        start_ns: r.start_ns,
        end_ns: r.end_ns.max(r.start_ns),
        id: r.id,
        who,
        pid: r.pid,
        parent: class_of(r.parent),
        victim: r.victim,
    })
}

/// An interruption record's culprit (made once for each `Made`, then kept).
pub fn culprit_named(r: &js_record, syms: &mut Kallsyms, names: &mut Names) -> Option<Culprit> {
    let key = Made::of(r);
    match names.made.get(&key) {
        Some(made) => Some(made.clone()),
        None => {
            let made = named(r, syms, names)?;
            if names.made.len() >= NAMES_KEPT {
                names.made.clear();
            }
            names.made.insert(key, made.clone());
            Some(made)
        }
    }
}

/// An interruption record's class and who, made from its fields.
fn named(r: &js_record, syms: &mut Kallsyms, names: &mut Names) -> Option<Culprit> {
    let (class, who) = match abi::Class::from_code(r.class_)? {
        abi::Class::Hrtimer => hrtimer(r, syms, names),
        code => {
            let class = culprit_of(code)?;
            (class, who_of(class, r, syms, names)?)
        }
    };
    Some(Culprit { class, who })
}

/// Who an episode of `class` names: a kworker and its work item, an IRQ and its action, a
/// task and its pid …; None for the classes no record carries.
fn who_of(
    class: CulpritClass,
    r: &js_record,
    syms: &mut Kallsyms,
    names: &mut Names,
) -> Option<Who> {
    let mut comm = || names.text(&c_string(&r.name));
    Some(match class {
        CulpritClass::Kworker => {
            let worker = comm();
            Who::Work {
                worker,
                item: work_item(r, syms, names),
            }
        }
        CulpritClass::Kthread => Who::Kthread { comm: comm() },
        // The policy only: per-episode facts would split one task's ranking row.
        CulpritClass::Task | CulpritClass::SelfNoise => Who::Task {
            comm: comm(),
            pid: r.pid,
            policy: r.aux,
            container: None,
        },
        CulpritClass::Irq => Who::Irq {
            number: r.id,
            action: comm(),
        },
        CulpritClass::Softirq => Who::Softirq { vector: r.id },
        // The local timer's own time: its hrtimer callbacks (counted in `flags`) are
        // records of their own, nested in it.
        CulpritClass::TimerTick if r.id == vector::LOCAL_TIMER => Who::LocalTimer {
            callbacks: r.flags > 0,
        },
        CulpritClass::TimerTick | CulpritClass::Ipi => Who::Vector { vector: r.id },
        CulpritClass::Nmi => Who::Nmi {
            handler: names.text(&syms.name(r.detail)),
        },
        CulpritClass::FreqChange => Who::Freq {
            cpu: r.cpu,
            old_khz: r.detail,
            new_khz: r.id,
            before_ns: 0,
        },
        CulpritClass::Fault => Who::Fault {
            kind: match (
                r.flags & abi::FAULT_MAJOR != 0,
                r.flags & abi::FAULT_ERROR != 0,
            ) {
                (_, true) => FaultKind::Failed,
                (true, false) => FaultKind::Major,
                (false, false) => FaultKind::Minor,
            },
        },
        CulpritClass::Throttled => Who::Throttled { policy: r.aux },
        CulpritClass::Hypervisor | CulpritClass::Unexplained | CulpritClass::Lost => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(kind: Kind, class: u16) -> js_record {
        js_record {
            kind: kind as u32,
            cpu: 3,
            start_ns: 100,
            end_ns: 250,
            class_: class,
            ..Default::default()
        }
    }

    fn name(s: &str) -> [i8; 32] {
        let mut n = [0i8; 32];
        for (i, b) in s.bytes().enumerate() {
            n[i] = b as i8;
        }
        n
    }

    #[test]
    fn only_a_task_level_run_has_an_unseen_end() {
        let mut r = rec(Kind::Interruption, abi::Class::Task as u16);
        assert!(!end_unseen(&r));
        r.flags = abi::F_END_UNSEEN | abi::F_PREEMPTED_WORKLOAD;
        assert!(end_unseen(&r));
        // The local timer counts its hrtimer callbacks in the same field.
        let mut tick = rec(Kind::Interruption, abi::Class::TimerTick as u16);
        tick.flags = 16;
        assert!(!end_unseen(&tick));
        let mut cause = rec(Kind::Cause, 1);
        cause.flags = abi::F_END_UNSEEN;
        assert!(!end_unseen(&cause));
    }

    #[test]
    fn names_are_shared_not_copied() {
        let mut n = Names::default();
        let a = n.text("local timer");
        let b = n.text(&String::from("local timer"));
        assert!(std::sync::Arc::ptr_eq(&a, &b));
        assert_eq!(&*n.text("NET_RX"), "NET_RX");
    }

    #[test]
    fn a_record_like_an_earlier_one_is_named_alike_and_shares_its_texts() {
        let syms_text = "ffffffff81000100 t vmstat_update\nffffffff81000200 t tick_nohz_handler\n";
        let mut shared = Names::default();
        let mut shared_syms = Kallsyms::parse(syms_text);
        // Each field a name can be made from, changed alone: a warm cache must name the
        // changed record as a fresh decoder does (a field left out of the key would name it
        // like the one before).
        let changes: [fn(&mut js_record); 8] = [
            |_| {},
            |r| r.pid += 1,
            |r| r.aux += 1,
            |r| r.flags ^= HRT_SLEEPER | HRT_SELF,
            |r| r.id = 0xffffffff81000200,
            |r| r.detail = 0,
            |r| r.cpu += 1,
            |r| r.name = name("bash"),
        ];
        for class in 0..14u16 {
            for flags in [0, 1, HRT_SLEEPER, HRT_SOFT] {
                for change in changes {
                    let mut r = rec(Kind::Interruption, class);
                    (r.pid, r.aux, r.flags, r.id) = (41, 1, flags, 36);
                    (r.detail, r.name) = (0xffffffff81000100, name("kworker/3:1"));
                    let before = decode_with(&r, &mut shared_syms, &mut shared);
                    assert_eq!(before, decode(&r, &mut Kallsyms::parse(syms_text)));
                    change(&mut r);
                    r.start_ns += 1;
                    let fresh = decode(&r, &mut Kallsyms::parse(syms_text));
                    let warm = decode_with(&r, &mut shared_syms, &mut shared);
                    assert_eq!(warm, fresh, "class {class}, flags {flags}");
                    let again = decode_with(&r, &mut shared_syms, &mut shared);
                    if let (Some(Record::Interruption(a)), Some(Record::Interruption(b))) =
                        (&warm, &again)
                    {
                        if let (Some(x), Some(y)) = (a.who.text(), b.who.text()) {
                            assert!(std::sync::Arc::ptr_eq(x, y), "cached");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn a_thread_exit_carries_its_schedstat_and_a_new_thread_its_creator() {
        let mut syms = Kallsyms::parse("");
        let mut r = rec(Kind::ThreadExit, 0);
        (r.pid, r.aux, r.id) = (900, 12, 77 << 32 | 5);
        // 7 s on a CPU; 5 s plus 2^32 ns waiting: the wait's high half is in `victim`.
        (r.detail, r.flags, r.victim) = (7_000_000_000, 5_000_000_000u64 as u32, 1);
        let Some(Record::Thread(e)) = decode(&r, &mut syms) else {
            panic!()
        };
        let wait = (1u64 << 32) + u64::from(5_000_000_000u64 as u32);
        assert_eq!((e.tid, e.ns_tid, e.ns_pid), (900, 12, 5));
        assert_eq!(
            e.change,
            ThreadChange::Exited {
                sched: (7_000_000_000, wait)
            }
        );
        let mut r = rec(Kind::ThreadNew, 0);
        (r.pid, r.detail) = (901, 900);
        let Some(Record::Thread(e)) = decode(&r, &mut syms) else {
            panic!()
        };
        assert_eq!(e.change, ThreadChange::Created { by: 900 });
        // An exec beside the main thread: its new id in `pid`, the one it had in `detail`.
        let mut r = rec(Kind::ThreadExec, 0);
        (r.pid, r.detail, r.aux, r.id) = (77, 903, 5, 77 << 32 | 5);
        let Some(Record::Thread(e)) = decode(&r, &mut syms) else {
            panic!()
        };
        assert_eq!((e.tid, e.ns_tid, e.ns_pid), (77, 5, 5));
        assert_eq!(e.change, ThreadChange::Exec { old_tid: 903 });
    }

    #[test]
    fn a_thread_held_off_an_idle_cpu_decodes_as_throttled_with_its_policy() {
        let mut syms = Kallsyms::parse("");
        let mut r = rec(Kind::Interruption, abi::Class::Throttled as u16);
        r.name = name("js-consumer-1");
        r.pid = 4122;
        r.id = 4122;
        r.aux = 1;
        let Some(Record::Interruption(i)) = decode(&r, &mut syms) else {
            panic!()
        };
        assert_eq!(
            (i.class, i.who, i.pid, i.start_ns, i.end_ns),
            (
                CulpritClass::Throttled,
                Who::Throttled { policy: 1 },
                4122,
                100,
                250
            )
        );
        assert_eq!(
            i.class.level(),
            1,
            "a task-level stretch: interrupts nest in it"
        );
        // Its flags are not a task's: never a run whose end went unseen.
        r.flags = abi::F_END_UNSEEN;
        assert!(!end_unseen(&r));
    }

    #[test]
    fn decodes_each_class_readably() {
        let mut syms = Kallsyms::parse("ffffffff81000100 t vmstat_update\n");
        let mut k = rec(Kind::Interruption, 2);
        k.name = name("kworker/3:1");
        k.detail = 0xffffffff81000100;
        k.pid = 41;
        let Some(Record::Interruption(i)) = decode(&k, &mut syms) else {
            panic!()
        };
        assert_eq!(
            (i.class, i.who),
            (
                CulpritClass::Kworker,
                Who::Work {
                    worker: "kworker/3:1".into(),
                    item: WorkItem::Function("vmstat_update".into())
                }
            )
        );

        let mut irq = rec(Kind::Interruption, 5);
        irq.id = 36;
        irq.name = name("virtio1-req.0");
        irq.parent = 2;
        let Some(Record::Interruption(i)) = decode(&irq, &mut syms) else {
            panic!()
        };
        assert_eq!(
            i.who,
            Who::Irq {
                number: 36,
                action: "virtio1-req.0".into()
            }
        );
        assert_eq!(i.parent, Some(CulpritClass::Kworker));

        let mut t = rec(Kind::Interruption, 1);
        t.name = name("stress");
        t.pid = 4121;
        t.flags = 1;
        let Some(Record::Interruption(i)) = decode(&t, &mut syms) else {
            panic!()
        };
        assert_eq!(
            i.who,
            Who::Task {
                comm: "stress".into(),
                pid: 4121,
                policy: 0,
                container: None,
            }
        );

        let mut f = rec(Kind::Interruption, 10);
        f.id = 1_200_000;
        f.detail = 3_000_000;
        let Some(Record::Interruption(i)) = decode(&f, &mut syms) else {
            panic!()
        };
        assert_eq!(
            i.who,
            Who::Freq {
                cpu: 3,
                old_khz: 3_000_000,
                new_khz: 1_200_000,
                before_ns: 0
            }
        );

        let mut s = rec(Kind::Interruption, 6);
        s.id = 3;
        let Some(Record::Interruption(i)) = decode(&s, &mut syms) else {
            panic!()
        };
        assert_eq!(i.who, Who::Softirq { vector: 3 });

        let mut v = rec(Kind::Interruption, 7);
        v.id = 1;
        let Some(Record::Interruption(i)) = decode(&v, &mut syms) else {
            panic!()
        };
        assert_eq!(
            (i.class, i.who),
            (
                CulpritClass::TimerTick,
                Who::LocalTimer { callbacks: false }
            )
        );

        let mut l = rec(Kind::Lost, 0);
        l.id = 7;
        assert_eq!(
            decode(&l, &mut syms),
            Some(Record::Lost {
                cpu: 3,
                start_ns: 100,
                end_ns: 250,
                count: 7
            })
        );
        let unknown = js_record {
            kind: 99,
            ..rec(Kind::Lost, 1)
        };
        assert_eq!(decode(&unknown, &mut syms), None);
    }

    fn interruption(r: &js_record, syms: &mut Kallsyms) -> Interruption {
        match decode(r, syms) {
            Some(Record::Interruption(i)) => i,
            other => panic!("not an interruption: {other:?}"),
        }
    }

    #[test]
    fn steal_growth_decodes_to_a_steal_sample() {
        let mut syms = Kallsyms::parse("");
        let mut s = rec(Kind::Steal, 0);
        s.id = 612_000;
        s.detail = 9_000_000_000;
        assert_eq!(
            decode(&s, &mut syms),
            Some(Record::Steal(StealSample {
                cpu: 3,
                from_ns: 100,
                to_ns: 250,
                steal_ns: 612_000,
                victim: 0,
            }))
        );
    }

    #[test]
    fn a_kworker_run_without_a_function_says_why() {
        let mut syms = Kallsyms::parse("");
        let mut k = rec(Kind::Interruption, 2);
        k.name = name("kworker/3:1");
        let item = |r: &js_record, syms: &mut Kallsyms| match interruption(r, syms).who {
            Who::Work { item, .. } => item,
            other => panic!("not a work item: {other:?}"),
        };
        assert_eq!(item(&k, &mut syms), WorkItem::NoItem);
        k.flags = F_WORK_UNREAD;
        assert_eq!(item(&k, &mut syms), WorkItem::Unreadable);
    }

    #[test]
    fn hrtimers_decode_as_the_local_timer_with_what_they_ran() {
        let mut syms = Kallsyms::parse(
            "ffffffff81000100 t tick_nohz_handler\nffffffff81000200 t hrtimer_wakeup\nffffffff81000300 t it_real_fn\n",
        );
        let mut h = rec(Kind::Interruption, abi::Class::Hrtimer as u16);
        h.parent = 7;
        h.id = 0xffffffff81000100;
        let i = interruption(&h, &mut syms);
        let timer = |soft, callback| Who::Hrtimer { soft, callback };
        assert_eq!(
            (i.class, i.who, i.parent),
            (
                CulpritClass::TimerTick,
                timer(false, TimerCallback::Tick),
                Some(CulpritClass::TimerTick)
            )
        );

        h.id = 0xffffffff81000200;
        h.flags = HRT_SLEEPER;
        h.pid = 4121;
        h.name = name("sleep");
        let i = interruption(&h, &mut syms);
        let sleeper = TimerCallback::Wakeup {
            comm: "sleep".into(),
            pid: 4121,
        };
        assert_eq!(
            (i.class, i.who, i.pid),
            (CulpritClass::TimerTick, timer(false, sleeper), 4121)
        );

        h.flags = HRT_SLEEPER | HRT_SELF;
        h.name = name("js-collector");
        let i = interruption(&h, &mut syms);
        let own = TimerCallback::OwnSleep {
            comm: "js-collector".into(),
        };
        assert_eq!(
            (i.class, i.who),
            (CulpritClass::SelfNoise, timer(false, own))
        );

        h.flags = HRT_SOFT;
        h.id = 0xffffffff81000300;
        h.parent = 6;
        let i = interruption(&h, &mut syms);
        assert_eq!(
            (i.who, i.parent),
            (
                timer(true, TimerCallback::Function("it_real_fn".into())),
                Some(CulpritClass::Softirq)
            )
        );

        // A record nested in an hrtimer (an NMI) names the timer tick as its parent.
        let mut n = rec(Kind::Interruption, 9);
        n.parent = abi::Class::Hrtimer as u16;
        assert_eq!(
            interruption(&n, &mut syms).parent,
            Some(CulpritClass::TimerTick)
        );
    }

    #[test]
    fn the_local_timer_vector_keeps_the_time_outside_its_callbacks() {
        let mut syms = Kallsyms::parse("");
        let mut v = rec(Kind::Interruption, 7);
        v.id = 1;
        v.flags = 2;
        assert_eq!(
            interruption(&v, &mut syms).who,
            Who::LocalTimer { callbacks: true }
        );
        v.flags = 0;
        assert_eq!(
            interruption(&v, &mut syms).who,
            Who::LocalTimer { callbacks: false }
        );
        let mut ipi = rec(Kind::Interruption, 8);
        ipi.id = 2;
        ipi.flags = 0;
        let i = interruption(&ipi, &mut syms);
        assert_eq!(i.who, Who::Vector { vector: 2 });
    }
}
