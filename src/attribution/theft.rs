//! Stolen time per CPU, class and culprit as running totals, and the distribution of a
//! class's part of one interruption — what the metrics file exposes. Culprits are named
//! without pids (`bash`, not `bash[4121]`; a kworker by its work function), so a series
//! follows a program, not one process; memory is bounded per CPU and class.

use std::collections::{BTreeMap, HashMap};

use super::engine::{Share, Verdict};
use crate::model::{without_pid, Cpu, CulpritClass, Nanos};

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
    pub culprits: HashMap<String, Theft>,
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

/// The culprit as a label: without its pid, and a kworker by the work it ran (its own name,
/// `kworker/3:1`, changes as the kernel adds and retires workers).
pub fn culprit_label(class: CulpritClass, name: &str, detail: &str) -> String {
    label_of(class, name, detail).to_string()
}

/// `culprit_label` borrowed from the culprit's texts (a stall's culprits are mostly known
/// already: no copy to look them up).
fn label_of<'a>(class: CulpritClass, name: &'a str, detail: &'a str) -> &'a str {
    match class {
        CulpritClass::Kworker => {
            let function = detail.split([',', ' ']).next().unwrap_or_default();
            if function.is_empty() {
                without_pid(name)
            } else {
                function
            }
        }
        CulpritClass::Kthread
        | CulpritClass::Task
        | CulpritClass::Irq
        | CulpritClass::Softirq
        | CulpritClass::TimerTick
        | CulpritClass::Ipi
        | CulpritClass::Nmi
        | CulpritClass::FreqChange
        | CulpritClass::Fault
        | CulpritClass::SelfNoise
        | CulpritClass::Hypervisor
        | CulpritClass::Unexplained
        | CulpritClass::Lost => without_pid(name),
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
            let label = label_of(c.class, &c.name, &c.detail);
            self.steal(cpu, c.class, label, u64::from(c.episodes), ns);
        }
        // Each class's part once, at its first culprit (a stall has few: a scan, no map).
        for (i, c) in v.culprits.iter().enumerate() {
            let of_class = |o: &&Share| o.class == c.class && o.ns() > 0;
            if c.ns() == 0 || v.culprits[..i].iter().any(|o| of_class(&o)) {
                continue;
            }
            let ns = v.culprits[i..].iter().filter(of_class).map(Share::ns).sum();
            self.class(cpu, c.class).parts.observe(ns);
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
    pub fn record(&mut self, cpu: Cpu, class: CulpritClass, label: String, ns: Nanos) {
        self.steal(cpu, class, &label, 1, ns);
        self.class(cpu, class).parts.observe(ns);
    }

    fn class(&mut self, cpu: Cpu, class: CulpritClass) -> &mut ClassTheft {
        self.by.entry((cpu, class)).or_default()
    }

    /// The label is copied only when it is new to the tally.
    fn steal(&mut self, cpu: Cpu, class: CulpritClass, label: &str, episodes: u64, ns: Nanos) {
        let t = self.class(cpu, class);
        t.total.add(episodes, ns);
        let room = t.culprits.len() < CULPRITS_TALLIED;
        match t.culprits.get_mut(label) {
            Some(c) => c.add(episodes, ns),
            None if room => t
                .culprits
                .entry(label.to_string())
                .or_default()
                .add(episodes, ns),
            None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attribution::engine::Share;
    use crate::model::{Stall, ThreadRole};

    fn share(class: CulpritClass, name: &str, detail: &str, ns: Nanos) -> Share {
        Share {
            class,
            name: name.into(),
            detail: detail.into(),
            via: String::new(),
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
        assert_eq!(culprit_label(CulpritClass::Task, "bash[4121]", ""), "bash");
        assert_eq!(
            culprit_label(CulpritClass::Kworker, "kworker/3:1", "vmstat_update"),
            "vmstat_update"
        );
        assert_eq!(
            culprit_label(CulpritClass::Kworker, "kworker/3:1", ""),
            "kworker/3:1"
        );
        assert_eq!(
            culprit_label(CulpritClass::Irq, "36 virtio1-req.0", ""),
            "36 virtio1-req.0"
        );
    }

    #[test]
    fn a_class_counts_once_per_interruption_and_every_culprit_in_its_total() {
        let mut t = TheftTally::default();
        t.add(&verdict(
            1,
            vec![
                share(CulpritClass::Task, "a[1]", "", 3_000),
                share(CulpritClass::Task, "a[2]", "", 4_000),
                share(CulpritClass::Irq, "36 x", "", 20_000),
            ],
        ));
        let task = &t.by[&(1, CulpritClass::Task)];
        assert_eq!(task.total.stolen_ns, 7_000);
        assert_eq!(task.culprits["a"].episodes, 2);
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
            t.record(2, CulpritClass::Task, format!("t{i}"), 1_000);
        }
        let c = &t.by[&(2, CulpritClass::Task)];
        assert_eq!(c.culprits.len(), CULPRITS_TALLIED);
        assert_eq!(c.total.episodes, (CULPRITS_TALLIED + 10) as u64);
        // Exactly 1 µs is in the first bucket (upper bounds are inclusive).
        assert_eq!(c.parts.buckets[0], (CULPRITS_TALLIED + 10) as u64);
    }
}
