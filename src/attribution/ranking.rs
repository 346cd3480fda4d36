//! The run-wide ranking: culprits grouped by (class, name, detail) with count, stolen time,
//! the longest single theft and their share of all stall time, per CPU too.

use super::advice::{advice, Machine};
use super::engine::Verdict;
use crate::model::{Cpu, CulpritClass, Nanos, Text};
use crate::platform::fast_hash::FastMap;

#[derive(Debug, Clone, PartialEq)]
pub struct RankedCulprit {
    pub class: CulpritClass,
    pub name: String,
    pub detail: String,
    /// Episodes (records) that stole time from a stall.
    pub episodes: u64,
    /// Time inside its records (net of nested ones); see `Share::measured_ns`.
    pub measured_ns: Nanos,
    /// Time given by the entry/exit rule next to its records.
    pub inferred_ns: Nanos,
    /// Steal inside its runs, given to `hypervisor` (see `Share::host_ns`).
    pub host_ns: Nanos,
    /// The longest single episode's theft.
    pub longest_ns: Nanos,
    /// Share of all stall time (measured and inferred).
    pub share: f64,
    /// Its time per CPU.
    pub cpus: Vec<CpuTheft>,
    pub advice: String,
    /// End of the latest stall it took part in (CLOCK_MONOTONIC).
    pub last_ns: Nanos,
}

/// A culprit's theft on one CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct CpuTheft {
    pub cpu: Cpu,
    pub measured_ns: Nanos,
    pub inferred_ns: Nanos,
    pub host_ns: Nanos,
}

impl RankedCulprit {
    pub fn total_ns(&self) -> Nanos {
        self.measured_ns.saturating_add(self.inferred_ns)
    }
}

#[derive(Debug, Default, Clone)]
struct Tally {
    episodes: u64,
    measured: Nanos,
    inferred: Nanos,
    host: Nanos,
    longest: Nanos,
    last: Nanos,
    /// (measured, inferred, host) per CPU.
    per_cpu: FastMap<Cpu, (Nanos, Nanos, Nanos)>,
}

#[derive(Debug, Clone)]
pub struct Ranking {
    by: FastMap<(CulpritClass, Text, Text), Tally>,
    stall_ns: Nanos,
    stalls: u64,
    incomplete: u64,
    /// Distinct culprits kept before pids are folded (`MAX_CULPRITS` by default).
    cap: usize,
}

impl Default for Ranking {
    fn default() -> Self {
        Ranking::with_cap(MAX_CULPRITS)
    }
}

/// Distinct culprits kept before short-lived tasks are folded by command name, so a long run
/// full of fork/exec (a shell loop, a build) keeps constant memory — reached within a minute
/// on a busy machine, after which memory stays flat — and the run file stays small.
pub const MAX_CULPRITS: usize = 1024;

/// `sleep[4121]` → `sleep[*]`, `hrtimer_wakeup of sleep[4121]` → `hrtimer_wakeup of
/// sleep[*]`; None when the text does not end in a `[pid]`.
fn fold_pid(text: &str) -> Option<String> {
    let i = text.rfind('[')?;
    let pid = text[i + 1..].strip_suffix(']')?;
    (!pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()))
        .then(|| format!("{}[*]", &text[..i]))
}

impl Ranking {
    /// A ranking that folds pids once it holds `cap` culprits (a watched thread's own ranking
    /// keeps fewer than the run's: many threads may be watched at once).
    pub fn with_cap(cap: usize) -> Self {
        Ranking {
            by: FastMap::default(),
            stall_ns: 0,
            stalls: 0,
            incomplete: 0,
            cap,
        }
    }

    pub fn add(&mut self, v: &Verdict) {
        self.stalls += 1;
        self.stall_ns += v.stall.duration_ns();
        if v.incomplete {
            self.incomplete += 1;
        }
        for c in &v.culprits {
            let mut key = (c.class, c.name.clone(), c.detail_key());
            // A task's name, or a detail that names one (a sleeper's hrtimer_wakeup).
            if self.by.len() >= self.cap && !self.by.contains_key(&key) {
                if let Some(name) = fold_pid(&key.1) {
                    key.1 = name.into();
                }
                if let Some(detail) = fold_pid(&key.2) {
                    key.2 = detail.into();
                }
            }
            let t = self.by.entry(key).or_default();
            t.episodes += u64::from(c.episodes);
            t.measured += c.measured_ns;
            t.inferred += c.inferred_ns;
            t.host += c.host_ns;
            t.longest = t.longest.max(c.longest_ns);
            t.last = t.last.max(v.stall.end_ns);
            let cpu = t.per_cpu.entry(v.stall.cpu).or_default();
            cpu.0 += c.measured_ns;
            cpu.1 += c.inferred_ns;
            cpu.2 += c.host_ns;
        }
    }

    pub fn incomplete(&self) -> u64 {
        self.incomplete
    }

    /// Culprits by stolen time, with advice for `machine`.
    pub fn ranked(&self, machine: &Machine) -> Vec<RankedCulprit> {
        let mut v = self.brief();
        for c in &mut v {
            let on: Vec<Cpu> = c.cpus.iter().map(|t| t.cpu).collect();
            c.advice = advice(c.class, &c.name, &c.detail, &on, machine);
        }
        v
    }

    /// Culprits by stolen time without advice.
    pub fn brief(&self) -> Vec<RankedCulprit> {
        self.top(usize::MAX)
    }

    /// The `n` culprits that stole the most, in ranking order, without advice: only those
    /// are copied (the live view's once-a-second look, on a CPU it may share with the
    /// workload).
    pub fn top(&self, n: usize) -> Vec<RankedCulprit> {
        let mut all: Vec<(&(CulpritClass, Text, Text), &Tally)> = self.by.iter().collect();
        let order = |a: &(&(CulpritClass, Text, Text), &Tally),
                     b: &(&(CulpritClass, Text, Text), &Tally)| {
            (b.1.measured.saturating_add(b.1.inferred), b.1.episodes)
                .cmp(&(a.1.measured.saturating_add(a.1.inferred), a.1.episodes))
                .then_with(|| a.0.cmp(b.0))
        };
        if n < all.len() {
            all.select_nth_unstable_by(n, order);
            all.truncate(n);
        }
        all.sort_unstable_by(order);
        all.into_iter()
            .map(|((class, name, detail), t)| {
                let mut cpus: Vec<CpuTheft> = t
                    .per_cpu
                    .iter()
                    .map(|(&cpu, &(measured_ns, inferred_ns, host_ns))| CpuTheft {
                        cpu,
                        measured_ns,
                        inferred_ns,
                        host_ns,
                    })
                    .collect();
                cpus.sort_unstable();
                RankedCulprit {
                    class: *class,
                    name: name.to_string(),
                    detail: detail.to_string(),
                    episodes: t.episodes,
                    measured_ns: t.measured,
                    inferred_ns: t.inferred,
                    host_ns: t.host,
                    longest_ns: t.longest,
                    share: if self.stall_ns == 0 {
                        0.0
                    } else {
                        (t.measured + t.inferred) as f64 / self.stall_ns as f64
                    },
                    advice: String::new(),
                    cpus,
                    last_ns: t.last,
                }
            })
            .collect()
    }
}

impl super::engine::Share {
    /// Frequency changes carry the gap to the stall in their detail; the ranking groups
    /// them by the transition only.
    fn detail_key(&self) -> Text {
        match self.class {
            CulpritClass::FreqChange => self.detail.split(", ").next().unwrap_or_default().into(),
            // One row per CPU's steal, not per stall (the text made once: most stalls of a
            // busy VM carry steal).
            CulpritClass::Hypervisor => {
                static STEAL: std::sync::OnceLock<Text> = std::sync::OnceLock::new();
                STEAL.get_or_init(|| "KVM steal clock".into()).clone()
            }
            CulpritClass::Kworker
            | CulpritClass::Kthread
            | CulpritClass::Task
            | CulpritClass::Irq
            | CulpritClass::Softirq
            | CulpritClass::TimerTick
            | CulpritClass::Ipi
            | CulpritClass::Nmi
            | CulpritClass::Fault
            | CulpritClass::SelfNoise
            | CulpritClass::Unexplained
            | CulpritClass::Lost => self.detail.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attribution::engine::Share;
    use crate::model::{Stall, ThreadRole};

    #[test]
    fn the_top_few_are_the_head_of_the_whole_ranking() {
        let mut r = Ranking::default();
        for k in 0..300u64 {
            r.add(&Verdict {
                stall: Stall {
                    cpu: (k % 2) as u32,
                    thread: ThreadRole::Producer,
                    start_ns: 0,
                    end_ns: 10,
                },
                culprits: vec![Share {
                    class: CulpritClass::Task,
                    name: format!("t{}", k % 97).into(),
                    detail: "SCHED_OTHER".into(),
                    via: String::new(),
                    // Ties on purpose: the order among equals must match too.
                    measured_ns: (k * 7) % 13,
                    inferred_ns: k % 3,
                    host_ns: 0,
                    episodes: 1,
                    longest_ns: 1,
                    share: 0.0,
                }],
                explained_share: 1.0,
                incomplete: false,
                timeline: vec![],
                hypervisor: vec![],
            });
        }
        let all = r.brief();
        assert_eq!(all.len(), 97);
        for n in [0, 1, 5, 50, 97, 200] {
            assert_eq!(r.top(n), all[..n.min(97)].to_vec(), "top {n}");
        }
    }

    #[test]
    fn the_hosts_time_inside_runs_adds_up_per_culprit_and_cpu() {
        let mut r = Ranking::default();
        for (cpu, host_ns) in [(1, 300), (1, 0), (0, 50)] {
            r.add(&Verdict {
                stall: Stall {
                    cpu,
                    thread: ThreadRole::Producer,
                    start_ns: 0,
                    end_ns: 1_000,
                },
                culprits: vec![Share {
                    class: CulpritClass::Kworker,
                    name: "kworker/1:1".into(),
                    detail: "vmstat_update".into(),
                    via: String::new(),
                    measured_ns: 100,
                    inferred_ns: 0,
                    host_ns,
                    episodes: 1,
                    longest_ns: 100,
                    share: 0.1,
                }],
                explained_share: 1.0,
                incomplete: false,
                timeline: vec![],
                hypervisor: vec![],
            });
        }
        let all = r.brief();
        assert_eq!((all[0].measured_ns, all[0].host_ns), (300, 350));
        let per_cpu: Vec<_> = all[0].cpus.iter().map(|t| (t.cpu, t.host_ns)).collect();
        assert_eq!(per_cpu, [(0, 50), (1, 300)]);
    }

    #[test]
    fn short_lived_tasks_fold_once_the_ranking_is_full() {
        let mut r = Ranking::default();
        for pid in 0..(MAX_CULPRITS as u32 + 100) {
            r.add(&Verdict {
                stall: Stall {
                    cpu: 1,
                    thread: ThreadRole::Producer,
                    start_ns: 0,
                    end_ns: 10,
                },
                culprits: vec![Share {
                    class: CulpritClass::Task,
                    name: format!("sleep[{pid}]").into(),
                    detail: "SCHED_OTHER".into(),
                    via: String::new(),
                    measured_ns: 10,
                    inferred_ns: 0,
                    host_ns: 0,
                    episodes: 1,
                    longest_ns: 10,
                    share: 1.0,
                }],
                explained_share: 1.0,
                incomplete: false,
                timeline: vec![],
                hypervisor: vec![],
            });
        }
        assert_eq!(r.by.len(), MAX_CULPRITS + 1);
        let folded = &r.by[&(CulpritClass::Task, "sleep[*]".into(), "SCHED_OTHER".into())];
        assert_eq!(folded.episodes, 100);
    }

    #[test]
    fn a_detail_naming_a_task_folds_too_and_other_text_stays() {
        assert_eq!(
            fold_pid("hrtimer_wakeup of sleep[4121]").as_deref(),
            Some("hrtimer_wakeup of sleep[*]")
        );
        assert_eq!(fold_pid("sleep[4121]").as_deref(), Some("sleep[*]"));
        for text in [
            "kworker/1:0",
            "SCHED_OTHER",
            "x[ab]",
            "x[]",
            "36 virtio1-req.0",
        ] {
            assert_eq!(fold_pid(text), None, "{text}");
        }
    }
}
