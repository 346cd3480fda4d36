//! The run-wide ranking: culprits grouped by who they are (`rank_key`) with count, stolen
//! time, the longest single theft and their share of all stall time, per CPU too.

use super::engine::Verdict;
use crate::model::{Cpu, Culprit, CulpritClass, Nanos, TimerCallback, Who, ANY_PID};
use crate::platform::fast_hash::FastMap;

#[derive(Debug, Clone, PartialEq)]
pub struct RankedCulprit {
    pub culprit: Culprit,
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
    pub fn class(&self) -> CulpritClass {
        self.culprit.class
    }

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
    by: FastMap<Culprit, Tally>,
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

/// The same culprit with any pid it names folded (`model::ANY_PID`): a task, or a sleeper
/// woken by its hrtimer; None when it names no pid.
fn fold_pid(c: &Culprit) -> Option<Culprit> {
    let who = match &c.who {
        Who::Task { comm, policy, .. } => Who::Task {
            comm: comm.clone(),
            pid: ANY_PID,
            policy: *policy,
        },
        Who::Hrtimer {
            soft,
            callback: TimerCallback::Wakeup { comm, .. },
        } => Who::Hrtimer {
            soft: *soft,
            callback: TimerCallback::Wakeup {
                comm: comm.clone(),
                pid: ANY_PID,
            },
        },
        _ => return None,
    };
    Some(Culprit {
        class: c.class,
        who,
    })
}

/// What the ranking groups a stall's culprit by: frequency changes by the transition (not
/// its gap to the stall), the host's preemption by class alone (one row, not one per CPU).
fn rank_key(c: &Culprit) -> Culprit {
    let who = match &c.who {
        Who::Freq {
            cpu,
            old_khz,
            new_khz,
            ..
        } => Who::Freq {
            cpu: *cpu,
            old_khz: *old_khz,
            new_khz: *new_khz,
            before_ns: 0,
        },
        Who::Host { .. } => Who::AnyHost,
        other => other.clone(),
    };
    Culprit {
        class: c.class,
        who,
    }
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
            let mut key = rank_key(&c.culprit);
            if self.by.len() >= self.cap && !self.by.contains_key(&key) {
                if let Some(folded) = fold_pid(&key) {
                    key = folded;
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

    /// Culprits by stolen time (their advice is worded in `report::advice`).
    pub fn brief(&self) -> Vec<RankedCulprit> {
        self.top(usize::MAX)
    }

    /// The `n` culprits that stole the most, in ranking order: only those
    /// are copied (the live view's once-a-second look, on a CPU it may share with the
    /// workload).
    pub fn top(&self, n: usize) -> Vec<RankedCulprit> {
        let mut all: Vec<(&Culprit, &Tally)> = self.by.iter().collect();
        let order = |a: &(&Culprit, &Tally), b: &(&Culprit, &Tally)| {
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
            .map(|(culprit, t)| {
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
                    culprit: culprit.clone(),
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
                    cpus,
                    last_ns: t.last,
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attribution::engine::Share;
    use crate::model::{Stall, ThreadRole, WorkItem};

    fn task(comm: &str, pid: u32) -> Culprit {
        Culprit {
            class: CulpritClass::Task,
            who: Who::Task {
                comm: comm.into(),
                pid,
                policy: 0,
            },
        }
    }

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
                    culprit: task(&format!("t{}", k % 97), 1),
                    via: None,
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
                    culprit: Culprit {
                        class: CulpritClass::Kworker,
                        who: Who::Work {
                            worker: "kworker/1:1".into(),
                            item: WorkItem::Function("vmstat_update".into()),
                        },
                    },
                    via: None,
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
                    culprit: task("sleep", pid + 1),
                    via: None,
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
        let folded = &r.by[&task("sleep", ANY_PID)];
        assert_eq!(folded.episodes, 100);
    }

    #[test]
    fn a_sleeper_named_by_its_timer_folds_too_and_a_comm_with_brackets_stays_whole() {
        let wakeup = |pid| Culprit {
            class: CulpritClass::TimerTick,
            who: Who::Hrtimer {
                soft: false,
                callback: TimerCallback::Wakeup {
                    comm: "sleep".into(),
                    pid,
                },
            },
        };
        assert_eq!(fold_pid(&wakeup(4121)), Some(wakeup(ANY_PID)));
        // Brackets in a comm are the comm's own: only the pid is folded.
        assert_eq!(
            fold_pid(&task("foo[12]", 7)),
            Some(task("foo[12]", ANY_PID))
        );
        let kthread = Culprit {
            class: CulpritClass::Kthread,
            who: Who::Kthread {
                comm: "x[3]".into(),
            },
        };
        assert_eq!(fold_pid(&kthread), None);
    }

    #[test]
    fn frequency_changes_rank_by_transition_and_the_host_in_one_row() {
        let freq = |before_ns| Culprit {
            class: CulpritClass::FreqChange,
            who: Who::Freq {
                cpu: 1,
                old_khz: 3_000_000,
                new_khz: 1_200_000,
                before_ns,
            },
        };
        assert_eq!(rank_key(&freq(5_000)), freq(0));
        let host = |cpu| Culprit {
            class: CulpritClass::Hypervisor,
            who: Who::Host { cpu },
        };
        assert_eq!(rank_key(&host(0)), rank_key(&host(3)));
    }
}
