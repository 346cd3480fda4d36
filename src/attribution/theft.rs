//! Stolen time per CPU, class and culprit as running totals, and the distribution of a
//! class's part of one interruption — what the metrics file exposes. Culprits are named
//! without pids (`bash`, not `bash[4121]`; a kworker by its work function), so a series
//! follows a program, not one process; memory is bounded per CPU and class.

use std::collections::{BTreeMap, HashMap};

use super::engine::{Share, Verdict};
use crate::model::{vector, Container, Cpu, CulpritClass, Nanos, Text, Who, WorkItem};

/// Upper bounds (ns) of the buckets a class's part of one interruption is counted in:
/// 1–2.5–5 steps from 1 µs to 500 ms, then 1 s; longer ones fall in the last (open) bucket.
pub const THEFT_BUCKETS_NS: [Nanos; 18] = [
    1_000,
    2_500,
    5_000,
    10_000,
    25_000,
    50_000,
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    1_000_000_000,
];

/// Distinct culprits kept with totals of their own per CPU and class; later ones count in
/// the class's total only (the exposition keeps far fewer, see `report::metrics`).
pub const CULPRITS_TALLIED: usize = 256;

/// Episodes and stolen time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Theft {
    pub episodes: u64,
    pub stolen_ns: Nanos,
}

impl Theft {
    fn add(&mut self, episodes: u64, ns: Nanos) {
        self.episodes += episodes;
        self.stolen_ns += ns;
    }
}

/// Durations counted in the `THEFT_BUCKETS_NS` buckets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Distribution {
    /// Counts per bucket, the last one open-ended.
    pub buckets: [u64; THEFT_BUCKETS_NS.len() + 1],
    /// Sum of the observed durations.
    pub observed_ns: Nanos,
}

impl Distribution {
    fn observe(&mut self, ns: Nanos) {
        let i = THEFT_BUCKETS_NS.partition_point(|&b| b < ns);
        self.buckets[i] += 1;
        self.observed_ns += ns;
    }

    /// Observations so far.
    pub fn observations(&self) -> u64 {
        self.buckets.iter().sum()
    }
}

/// One CPU's and class's totals.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClassTheft {
    /// Every culprit of the class, those past `CULPRITS_TALLIED` included.
    pub total: Theft,
    pub culprits: HashMap<Label, Theft>,
    /// The class's part of each interruption it took part in.
    pub parts: Distribution,
}

/// Stolen time per (CPU, class) since the start, never decreasing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TheftTally {
    pub by: BTreeMap<(Cpu, CulpritClass), ClassTheft>,
    /// Whole stalls (run) or interruptions of watched threads (watch), per CPU.
    pub stalls: BTreeMap<Cpu, Distribution>,
}

/// A culprit as a series follows it: by what its name shows, without its pid (a program, not
/// one process), a kworker by the work it ran (its own name, `kworker/3:1`, changes as the
/// kernel adds and retires workers). Shown by `report::culprit::label`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Label {
    /// A task, kernel thread or own thread by its command name.
    Comm(Text),
    /// A task in a container by its command name and its container (whose name and pod the
    /// series carry as labels of their own).
    Contained {
        comm: Text,
        container: Container,
    },
    Work(WorkItem),
    Irq {
        number: u64,
        action: Text,
    },
    Softirq(u64),
    /// A system vector: the timer interrupt (its hrtimer callbacks too), an IPI …
    Vector(u64),
    /// An hrtimer callback run by the HRTIMER softirq.
    SoftHrtimer,
    Nmi,
    /// A frequency change of a CPU.
    Freq(Cpu),
    Fault,
    /// The scheduler held the thread off, by the thread's policy.
    Throttled(u32),
    /// An IPI jitterscope sent itself, by vector.
    OwnIpi(u64),
    Host,
    Unexplained,
    Lost,
    Others,
}

impl Label {
    pub fn of(who: &Who) -> Label {
        match who {
            Who::Task {
                comm,
                container: Some(container),
                ..
            } => Label::Contained {
                comm: comm.clone(),
                container: container.clone(),
            },
            Who::Task { comm, .. } | Who::Kthread { comm } => Label::Comm(comm.clone()),
            Who::Work { item, .. } => Label::Work(item.clone()),
            Who::Irq { number, action } => Label::Irq {
                number: *number,
                action: action.clone(),
            },
            Who::Softirq { vector } => Label::Softirq(*vector),
            Who::Vector { vector } => Label::Vector(*vector),
            Who::LocalTimer { .. } | Who::Hrtimer { soft: false, .. } => {
                Label::Vector(vector::LOCAL_TIMER)
            }
            Who::Hrtimer { soft: true, .. } => Label::SoftHrtimer,
            Who::Nmi { .. } => Label::Nmi,
            Who::Freq { cpu, .. } => Label::Freq(*cpu),
            Who::Fault { .. } => Label::Fault,
            Who::Throttled { policy } => Label::Throttled(*policy),
            Who::OwnIpi { vector, .. } => Label::OwnIpi(*vector),
            Who::Host { .. } | Who::AnyHost => Label::Host,
            Who::Unexplained { .. } => Label::Unexplained,
            Who::Lost => Label::Lost,
            Who::Others => Label::Others,
        }
    }
}

impl TheftTally {
    /// A decided stall (run) or watched-thread interruption (watch): each culprit's time
    /// into its totals, and each class's part of it, once, into the class's distribution.
    pub fn add(&mut self, v: &Verdict) {
        let cpu = v.stall.cpu;
        for c in &v.culprits {
            let ns = c.ns();
            if ns == 0 {
                continue;
            }
            let class = c.class();
            self.steal(
                cpu,
                class,
                Label::of(&c.culprit.who),
                u64::from(c.episodes),
                ns,
            );
        }
        // Each class's part once, at its first culprit (a stall has few: a scan, no map).
        for (i, c) in v.culprits.iter().enumerate() {
            let of_class = |o: &&Share| o.class() == c.class() && o.ns() > 0;
            if c.ns() == 0 || v.culprits[..i].iter().any(|o| of_class(&o)) {
                continue;
            }
            let ns = v.culprits[i..].iter().filter(of_class).map(Share::ns).sum();
            self.class(cpu, c.class()).parts.observe(ns);
        }
        self.stall(v);
    }

    /// The whole stall alone, into its CPU's distribution (a run without probes).
    pub fn stall(&mut self, v: &Verdict) {
        self.stalls
            .entry(v.stall.cpu)
            .or_default()
            .observe(v.stall.duration_ns());
    }

    /// One kernel record that held `cpu` for `ns` (`jitterscope probe`): one episode, one
    /// observation.
    pub fn record(&mut self, cpu: Cpu, class: CulpritClass, label: Label, ns: Nanos) {
        self.steal(cpu, class, label, 1, ns);
        self.class(cpu, class).parts.observe(ns);
    }

    fn class(&mut self, cpu: Cpu, class: CulpritClass) -> &mut ClassTheft {
        self.by.entry((cpu, class)).or_default()
    }

    fn steal(&mut self, cpu: Cpu, class: CulpritClass, label: Label, episodes: u64, ns: Nanos) {
        let t = self.class(cpu, class);
        t.total.add(episodes, ns);
        let room = t.culprits.len() < CULPRITS_TALLIED;
        match t.culprits.get_mut(&label) {
            Some(c) => c.add(episodes, ns),
            None if room => t.culprits.entry(label).or_default().add(episodes, ns),
            None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attribution::engine::Share;
    use crate::model::{Culprit, Stall, ThreadRole};

    fn task(comm: &str, pid: u32) -> Who {
        Who::Task {
            comm: comm.into(),
            pid,
            policy: 0,
            container: None,
        }
    }

    fn worker(worker: &str, function: &str) -> Who {
        Who::Work {
            worker: worker.into(),
            item: WorkItem::Function(function.into()),
        }
    }

    fn share(class: CulpritClass, who: Who, ns: Nanos) -> Share {
        Share {
            culprit: Culprit { class, who },
            via: None,
            measured_ns: ns,
            inferred_ns: 0,
            host_ns: 0,
            episodes: 1,
            longest_ns: ns,
            share: 0.0,
        }
    }

    fn verdict(cpu: Cpu, culprits: Vec<Share>) -> Verdict {
        Verdict {
            stall: Stall {
                cpu,
                thread: ThreadRole::Producer,
                start_ns: 0,
                end_ns: 1_000_000,
            },
            culprits,
            explained_share: 1.0,
            incomplete: false,
            timeline: vec![],
            hypervisor: vec![],
        }
    }

    #[test]
    fn culprits_lose_their_pids_and_kworkers_go_by_function() {
        assert_eq!(Label::of(&task("bash", 4121)), Label::Comm("bash".into()));
        assert_eq!(
            Label::of(&worker("kworker/3:1", "vmstat_update")),
            Label::Work(WorkItem::Function("vmstat_update".into()))
        );
        let irq = Who::Irq {
            number: 36,
            action: "virtio1-req.0".into(),
        };
        assert_eq!(
            Label::of(&irq),
            Label::Irq {
                number: 36,
                action: "virtio1-req.0".into()
            }
        );
    }

    #[test]
    fn kworkers_with_one_function_and_different_pids_fold_into_one_row() {
        let mut t = TheftTally::default();
        t.add(&verdict(
            0,
            vec![
                share(
                    CulpritClass::Kworker,
                    worker("kworker/0:1", "vmstat_update"),
                    2_000,
                ),
                share(
                    CulpritClass::Kworker,
                    worker("kworker/0:2", "vmstat_update"),
                    3_000,
                ),
                share(
                    CulpritClass::Kworker,
                    worker("kworker/0:2", "lru_add_drain"),
                    1_000,
                ),
            ],
        ));
        let k = &t.by[&(0, CulpritClass::Kworker)];
        assert_eq!(k.culprits.len(), 2);
        let vmstat = &k.culprits[&Label::Work(WorkItem::Function("vmstat_update".into()))];
        assert_eq!((vmstat.episodes, vmstat.stolen_ns), (2, 5_000));
    }

    #[test]
    fn a_comm_with_brackets_keeps_them_and_loses_only_its_pid() {
        let mut t = TheftTally::default();
        t.add(&verdict(
            0,
            vec![
                share(CulpritClass::Task, task("foo[12]", 7), 2_000),
                share(CulpritClass::Task, task("foo[12]", 8), 3_000),
                share(CulpritClass::Task, task("foo", 12), 1_000),
            ],
        ));
        let tasks = &t.by[&(0, CulpritClass::Task)].culprits;
        assert_eq!(tasks[&Label::Comm("foo[12]".into())].stolen_ns, 5_000);
        assert_eq!(tasks[&Label::Comm("foo".into())].stolen_ns, 1_000);
    }

    #[test]
    fn a_class_counts_once_per_interruption_and_every_culprit_in_its_total() {
        let mut t = TheftTally::default();
        t.add(&verdict(
            1,
            vec![
                share(CulpritClass::Task, task("a", 1), 3_000),
                share(CulpritClass::Task, task("a", 2), 4_000),
                share(
                    CulpritClass::Irq,
                    Who::Irq {
                        number: 36,
                        action: "x".into(),
                    },
                    20_000,
                ),
            ],
        ));
        let task = &t.by[&(1, CulpritClass::Task)];
        assert_eq!(task.total.stolen_ns, 7_000);
        assert_eq!(task.culprits[&Label::Comm("a".into())].episodes, 2);
        assert_eq!(task.parts.observations(), 1);
        // 7 µs lands in the 10 µs bucket.
        assert_eq!(task.parts.buckets[3], 1);
        // 20 µs in the 25 µs one.
        assert_eq!(t.by[&(1, CulpritClass::Irq)].parts.buckets[4], 1);
        // The whole stall (1 ms) once.
        assert_eq!(t.stalls[&1].buckets[9], 1);
    }

    #[test]
    fn culprits_past_the_tally_count_in_the_total_only() {
        let mut t = TheftTally::default();
        for i in 0..CULPRITS_TALLIED + 10 {
            t.record(
                2,
                CulpritClass::Task,
                Label::Comm(format!("t{i}").into()),
                1_000,
            );
        }
        let c = &t.by[&(2, CulpritClass::Task)];
        assert_eq!(c.culprits.len(), CULPRITS_TALLIED);
        assert_eq!(c.total.episodes, (CULPRITS_TALLIED + 10) as u64);
        // Exactly 1 µs is in the first bucket (upper bounds are inclusive).
        assert_eq!(c.parts.buckets[0], (CULPRITS_TALLIED + 10) as u64);
    }
}
