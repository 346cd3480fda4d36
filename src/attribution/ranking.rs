//! The run-wide ranking: culprits grouped by who they are (`rank_key`) with count, stolen
//! time, the longest single theft and their share of all stall time, per CPU too.

use super::engine::Verdict;
use crate::model::{Cpu, Culprit, CulpritClass, Nanos, Who, ANY_PID};
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
    /// A command name's processes grouped in one row (`culprit` then names no pid,
    /// `model::ANY_PID`); None for one process alone and for culprits that are no task.
    pub processes: Option<Processes>,
}

/// The processes of one command name that a ranking row groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Processes {
    /// Processes (pids) told apart.
    pub count: u64,
    /// More processes took part than `count`: past the ranking's bound on processes told
    /// apart, their time is the row's but their pids are not told apart.
    pub more: bool,
    /// Each process told apart, the most stolen time first: at most `PROCESSES_LISTED`, and
    /// only from `Ranking::ranked` (the live view's look does not need them).
    pub each: Vec<ProcessTheft>,
}

/// One process's part of a grouped row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ProcessTheft {
    pub pid: u32,
    pub episodes: u64,
    pub measured_ns: Nanos,
    pub inferred_ns: Nanos,
    pub longest_ns: Nanos,
}

impl ProcessTheft {
    pub fn total_ns(&self) -> Nanos {
        self.measured_ns.saturating_add(self.inferred_ns)
    }
}

/// Processes of a grouped row listed one by one in the run file (`Processes::each`); the
/// rest are counted, not listed.
pub const PROCESSES_LISTED: usize = 20;

/// A culprit's theft on one CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct CpuTheft {
    pub cpu: Cpu,
    pub measured_ns: Nanos,
    pub inferred_ns: Nanos,
    pub host_ns: Nanos,
    /// Episodes on this CPU.
    pub episodes: u64,
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
    /// (measured, inferred, host, episodes) per CPU.
    per_cpu: FastMap<Cpu, (Nanos, Nanos, Nanos, u64)>,
    /// A task row (keyed by command name): its processes told apart, by pid.
    processes: FastMap<u32, ProcessTheft>,
    /// A task row: processes past the ranking's bound took part.
    more_processes: bool,
}

#[derive(Debug, Clone)]
pub struct Ranking {
    by: FastMap<Culprit, Tally>,
    stall_ns: Nanos,
    stalls: u64,
    incomplete: u64,
    /// Processes told apart in all task rows, and other culprits naming a pid, before pids
    /// are no longer told apart (`MAX_CULPRITS` by default).
    cap: usize,
    /// Processes told apart so far, in all task rows.
    processes: usize,
}

impl Default for Ranking {
    fn default() -> Self {
        Ranking::with_cap(MAX_CULPRITS)
    }
}

/// Processes told apart (and distinct culprits kept before a sleeper woken by its hrtimer is
/// folded by command name), so a long run full of fork/exec (a shell loop, a build) keeps
/// constant memory — reached within a minute on a busy machine, after which memory stays
/// flat — and the run file stays small.
pub const MAX_CULPRITS: usize = 1024;

/// A task culprit as its ranking row: its command name's row (any pid, `model::ANY_PID`) and
/// its pid. Tasks of one command name and class share a row — a shell loop's short-lived
/// processes, a cron job's runs — with each process told apart inside it. None for culprits
/// that are no task.
pub(crate) fn task_row(c: &Culprit) -> Option<(Culprit, u32)> {
    match &c.who {
        Who::Task {
            comm,
            pid,
            policy,
            container,
        } => Some((
            Culprit {
                class: c.class,
                who: Who::Task {
                    comm: comm.clone(),
                    pid: ANY_PID,
                    policy: *policy,
                    container: container.clone(),
                },
            },
            *pid,
        )),
        _ => None,
    }
}

/// A sleeper woken by its hrtimer with its pid folded (`model::ANY_PID`); None for any other
/// culprit.
fn fold_pid(c: &Culprit) -> Option<Culprit> {
    Some(Culprit {
        class: c.class,
        who: c.who.sleeper_folded()?,
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
    /// A ranking that tells apart `cap` processes (a watched thread's own ranking keeps fewer
    /// than the run's: many threads may be watched at once).
    pub fn with_cap(cap: usize) -> Self {
        Ranking {
            by: FastMap::default(),
            stall_ns: 0,
            stalls: 0,
            incomplete: 0,
            cap,
            processes: 0,
        }
    }

    pub fn add(&mut self, v: &Verdict) {
        self.stalls += 1;
        self.stall_ns += v.stall.duration_ns();
        if v.incomplete {
            self.incomplete += 1;
        }
        for c in &v.culprits {
            let (key, pid) = match task_row(&c.culprit) {
                Some((row, pid)) => (row, Some(pid)),
                None => {
                    let mut key = rank_key(&c.culprit);
                    if self.by.len() >= self.cap && !self.by.contains_key(&key) {
                        if let Some(folded) = fold_pid(&key) {
                            key = folded;
                        }
                    }
                    (key, None)
                }
            };
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
            cpu.3 += u64::from(c.episodes);
            if let Some(pid) = pid {
                let told_apart =
                    pid != ANY_PID && (t.processes.contains_key(&pid) || self.processes < self.cap);
                if !told_apart {
                    t.more_processes = true;
                    continue;
                }
                let p = t.processes.entry(pid).or_insert_with(|| {
                    self.processes += 1;
                    ProcessTheft {
                        pid,
                        ..ProcessTheft::default()
                    }
                });
                p.episodes += u64::from(c.episodes);
                p.measured_ns += c.measured_ns;
                p.inferred_ns += c.inferred_ns;
                p.longest_ns = p.longest_ns.max(c.longest_ns);
            }
        }
    }

    pub fn incomplete(&self) -> u64 {
        self.incomplete
    }

    /// Culprits by stolen time, each grouped row's processes listed (at most
    /// `PROCESSES_LISTED`); their advice is worded in `report::advice`.
    pub fn ranked(&self) -> Vec<RankedCulprit> {
        let mut v = self.brief();
        for c in &mut v {
            if let Some(p) = &mut c.processes {
                p.each = self.by.get(&c.culprit).map_or_else(Vec::new, listed);
            }
        }
        v
    }

    /// Culprits by stolen time, grouped rows' processes counted, not listed.
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
            .map(|(culprit, t)| self.row(culprit, t))
            .collect()
    }

    /// One ranking row: a task row of one process alone names it, as any other culprit.
    fn row(&self, key: &Culprit, t: &Tally) -> RankedCulprit {
        let mut cpus: Vec<CpuTheft> = t
            .per_cpu
            .iter()
            .map(
                |(&cpu, &(measured_ns, inferred_ns, host_ns, episodes))| CpuTheft {
                    cpu,
                    measured_ns,
                    inferred_ns,
                    host_ns,
                    episodes,
                },
            )
            .collect();
        cpus.sort_unstable();
        let (culprit, processes) = match (t.processes.values().next(), t.processes.len()) {
            (Some(only), 1) if !t.more_processes => (with_pid(key, only.pid), None),
            (_, 0) => (key.clone(), None),
            (_, count) => (
                key.clone(),
                Some(Processes {
                    count: count as u64,
                    more: t.more_processes,
                    each: Vec::new(),
                }),
            ),
        };
        RankedCulprit {
            culprit,
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
            processes,
        }
    }
}

/// A task row's culprit naming one process.
fn with_pid(row: &Culprit, pid: u32) -> Culprit {
    let mut c = row.clone();
    if let Who::Task { pid: p, .. } = &mut c.who {
        *p = pid;
    }
    c
}

/// The processes of a task row that stole the most, at most `PROCESSES_LISTED`, the most
/// first (ties by pid).
fn listed(t: &Tally) -> Vec<ProcessTheft> {
    let mut each: Vec<ProcessTheft> = t.processes.values().copied().collect();
    each.sort_unstable_by(|a, b| b.total_ns().cmp(&a.total_ns()).then(a.pid.cmp(&b.pid)));
    each.truncate(PROCESSES_LISTED);
    each
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attribution::engine::Share;
    use crate::model::{Stall, ThreadRole, TimerCallback, WorkItem};

    fn task(comm: &str, pid: u32) -> Culprit {
        Culprit {
            class: CulpritClass::Task,
            who: Who::Task {
                comm: comm.into(),
                pid,
                policy: 0,
                container: None,
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

    /// A verdict of one stall on CPU 1 with one task culprit.
    fn stolen_by(c: Culprit, ns: Nanos) -> Verdict {
        Verdict {
            stall: Stall {
                cpu: 1,
                thread: ThreadRole::Producer,
                start_ns: 0,
                end_ns: ns,
            },
            culprits: vec![Share {
                culprit: c,
                via: None,
                measured_ns: ns,
                inferred_ns: 0,
                host_ns: 0,
                episodes: 1,
                longest_ns: ns,
                share: 1.0,
            }],
            explained_share: 1.0,
            incomplete: false,
            timeline: vec![],
            hypervisor: vec![],
        }
    }

    #[test]
    fn short_lived_processes_of_one_command_name_are_one_row() {
        let mut r = Ranking::default();
        // A shell loop: 30 `taskset` processes of about 1 ms each, one of 1.01 ms.
        for pid in 0..30u32 {
            let ns = if pid == 7 { 1_010_000 } else { 1_000_000 };
            r.add(&stolen_by(task("taskset", 5000 + pid), ns));
        }
        // One long-lived shell.
        r.add(&stolen_by(task("bash", 4121), 40_000_000));
        r.add(&stolen_by(task("bash", 4121), 2_000_000));
        let all = r.ranked();
        assert_eq!(all.len(), 2, "{all:?}");
        assert_eq!(
            all[0].culprit,
            task("bash", 4121),
            "one process stays itself"
        );
        assert_eq!(all[0].processes, None);
        let t = &all[1];
        assert_eq!(t.culprit, task("taskset", ANY_PID));
        assert_eq!(
            (t.episodes, t.measured_ns, t.longest_ns),
            (30, 30_010_000, 1_010_000)
        );
        let p = t.processes.as_ref().expect("grouped");
        assert_eq!((p.count, p.more), (30, false));
        assert_eq!(
            p.each.len(),
            PROCESSES_LISTED,
            "the run file's list is bounded"
        );
        assert_eq!((p.each[0].pid, p.each[0].measured_ns), (5007, 1_010_000));
        // The live view's look counts them without listing them.
        assert_eq!(
            r.top(2)[1].processes.as_ref().map(|p| p.each.len()),
            Some(0)
        );
    }

    #[test]
    fn processes_past_the_bound_count_in_the_row_and_say_so() {
        let mut r = Ranking::with_cap(10);
        for pid in 0..15u32 {
            r.add(&stolen_by(task("sleep", pid + 1), 10));
        }
        let all = r.brief();
        assert_eq!(all.len(), 1);
        assert_eq!((all[0].episodes, all[0].measured_ns), (15, 150));
        let p = all[0].processes.as_ref().expect("grouped");
        assert_eq!((p.count, p.more), (10, true));
        // One process told apart, then others past the bound: still a group.
        let mut r = Ranking::with_cap(1);
        r.add(&stolen_by(task("a", 1), 10));
        r.add(&stolen_by(task("b", 2), 10));
        let b = &r.brief()[1];
        assert_eq!(b.culprit, task("b", ANY_PID));
        assert_eq!(b.processes.as_ref().map(|p| (p.count, p.more)), None);
    }

    #[test]
    fn tasks_group_by_class_and_policy_too() {
        let mut r = Ranking::default();
        let own = |pid| Culprit {
            class: CulpritClass::SelfNoise,
            who: task("x", pid).who,
        };
        let fifo = |pid| Culprit {
            class: CulpritClass::Task,
            who: Who::Task {
                comm: "x".into(),
                pid,
                policy: 1,
                container: None,
            },
        };
        for c in [task("x", 1), task("x", 2), own(3), fifo(4), fifo(5)] {
            r.add(&stolen_by(c, 10));
        }
        let mut rows: Vec<(Culprit, Option<u64>)> = r
            .brief()
            .into_iter()
            .map(|c| (c.culprit, c.processes.map(|p| p.count)))
            .collect();
        rows.sort();
        assert_eq!(
            rows,
            [
                (task("x", ANY_PID), Some(2)),
                (fifo(ANY_PID), Some(2)),
                (own(3), None)
            ]
        );
    }

    #[test]
    fn a_sleeper_named_by_its_timer_folds_once_the_ranking_is_full() {
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
        assert_eq!(fold_pid(&task("sleep", 7)), None);
        let mut r = Ranking::with_cap(4);
        for pid in 1..=10 {
            r.add(&stolen_by(wakeup(pid), 10));
        }
        assert_eq!(r.by.len(), 5);
        assert_eq!(r.by[&wakeup(ANY_PID)].episodes, 6);
        // Brackets in a comm are the comm's own: only the pid is set aside.
        assert_eq!(
            task_row(&task("foo[12]", 7)),
            Some((task("foo[12]", ANY_PID), 7))
        );
        let kthread = Culprit {
            class: CulpritClass::Kthread,
            who: Who::Kthread {
                comm: "x[3]".into(),
            },
        };
        assert_eq!((task_row(&kthread), fold_pid(&kthread)), (None, None));
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
