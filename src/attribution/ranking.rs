//! The run-wide ranking: culprits grouped by (class, name, detail) with count, stolen time,
//! the longest single theft and their share of all stall time, per CPU too.

use std::collections::HashMap;

use super::advice::{advice, Machine};
use super::engine::Verdict;
use crate::model::{Cpu, CulpritClass, Nanos};

#[derive(Debug, Clone, PartialEq)]
pub struct RankedCulprit {
    pub class: CulpritClass,
    pub name: String,
    pub detail: String,
    /// Stalls it took part in.
    pub count: u64,
    pub total_ns: Nanos,
    pub max_ns: Nanos,
    /// Share of all stall time.
    pub share: f64,
    pub cpus: Vec<(Cpu, Nanos)>,
    pub advice: String,
    /// End of the latest stall it took part in (CLOCK_MONOTONIC).
    pub last_ns: Nanos,
}

#[derive(Debug, Default, Clone)]
struct Tally {
    count: u64,
    total: Nanos,
    max: Nanos,
    last: Nanos,
    per_cpu: HashMap<Cpu, Nanos>,
}

#[derive(Debug, Default, Clone)]
pub struct Ranking {
    by: HashMap<(CulpritClass, String, String), Tally>,
    stall_ns: Nanos,
    stalls: u64,
    incomplete: u64,
}

/// Distinct culprits kept before short-lived tasks are folded by command name, so a long run
/// full of fork/exec (a shell loop, a build) keeps constant memory — reached within a minute
/// on a busy machine, after which memory stays flat — and the run file stays small.
pub const MAX_CULPRITS: usize = 1024;

/// `sleep[4121]` → `sleep[*]`.
fn fold_pid(name: &str) -> String {
    format!("{}[*]", crate::model::without_pid(name))
}

impl Ranking {
    pub fn add(&mut self, v: &Verdict) {
        self.stalls += 1;
        self.stall_ns += v.stall.duration_ns();
        if v.incomplete {
            self.incomplete += 1;
        }
        for c in &v.culprits {
            let mut key = (c.class, c.name.clone(), c.detail_key());
            if self.by.len() >= MAX_CULPRITS
                && matches!(c.class, CulpritClass::Task | CulpritClass::SelfNoise)
                && !self.by.contains_key(&key)
            {
                key.1 = fold_pid(&key.1);
            }
            let t = self.by.entry(key).or_default();
            t.count += 1;
            t.total += c.ns;
            t.max = t.max.max(c.ns);
            t.last = t.last.max(v.stall.end_ns);
            *t.per_cpu.entry(v.stall.cpu).or_default() += c.ns;
        }
    }

    pub fn incomplete(&self) -> u64 {
        self.incomplete
    }

    /// Culprits by stolen time, with advice for `machine`.
    pub fn ranked(&self, machine: &Machine) -> Vec<RankedCulprit> {
        let mut v = self.brief();
        for c in &mut v {
            c.advice = advice(c.class, &c.name, &c.detail, &c.cpus, machine);
        }
        v
    }

    /// Culprits by stolen time without advice (cheap enough for the live view).
    pub fn brief(&self) -> Vec<RankedCulprit> {
        let mut v: Vec<RankedCulprit> = self
            .by
            .iter()
            .map(|((class, name, detail), t)| {
                let mut cpus: Vec<(Cpu, Nanos)> = t.per_cpu.iter().map(|(&c, &n)| (c, n)).collect();
                cpus.sort_unstable();
                RankedCulprit {
                    class: *class,
                    name: name.clone(),
                    detail: detail.clone(),
                    count: t.count,
                    total_ns: t.total,
                    max_ns: t.max,
                    share: if self.stall_ns == 0 {
                        0.0
                    } else {
                        t.total as f64 / self.stall_ns as f64
                    },
                    advice: String::new(),
                    cpus,
                    last_ns: t.last,
                }
            })
            .collect();
        v.sort_by(|a, b| {
            (b.total_ns, b.count)
                .cmp(&(a.total_ns, a.count))
                .then_with(|| (a.class, &a.name, &a.detail).cmp(&(b.class, &b.name, &b.detail)))
        });
        v
    }
}

impl super::engine::Share {
    /// Frequency changes carry the gap to the stall in their detail; the ranking groups
    /// them by the transition only.
    fn detail_key(&self) -> String {
        match self.class {
            CulpritClass::FreqChange => self
                .detail
                .split(", ")
                .next()
                .unwrap_or_default()
                .to_string(),
            _ => self.detail.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attribution::engine::Share;
    use crate::model::{Stall, ThreadRole};

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
                    name: format!("sleep[{pid}]"),
                    detail: "SCHED_OTHER".into(),
                    via: String::new(),
                    ns: 10,
                    share: 1.0,
                }],
                explained_share: 1.0,
                incomplete: false,
                timeline: vec![],
            });
        }
        assert_eq!(r.by.len(), MAX_CULPRITS + 1);
        let folded = &r.by[&(
            CulpritClass::Task,
            "sleep[*]".to_string(),
            "SCHED_OTHER".to_string(),
        )];
        assert_eq!(folded.count, 100);
    }
}
