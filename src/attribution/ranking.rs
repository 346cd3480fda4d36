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
}

#[derive(Debug, Default, Clone)]
struct Tally {
    count: u64,
    total: Nanos,
    max: Nanos,
    per_cpu: HashMap<Cpu, Nanos>,
}

#[derive(Debug, Default, Clone)]
pub struct Ranking {
    by: HashMap<(CulpritClass, String, String), Tally>,
    stall_ns: Nanos,
    stalls: u64,
    incomplete: u64,
}

impl Ranking {
    pub fn add(&mut self, v: &Verdict) {
        self.stalls += 1;
        self.stall_ns += v.stall.duration_ns();
        if v.incomplete {
            self.incomplete += 1;
        }
        for c in &v.culprits {
            let t = self
                .by
                .entry((c.class, c.name.clone(), c.detail_key()))
                .or_default();
            t.count += 1;
            t.total += c.ns;
            t.max = t.max.max(c.ns);
            *t.per_cpu.entry(v.stall.cpu).or_default() += c.ns;
        }
    }

    /// The culprit with the most stolen time so far, as `class name detail`.
    pub fn top(&self) -> Option<String> {
        self.by
            .iter()
            .max_by_key(|(_, t)| t.total)
            .map(|((class, name, detail), t)| {
                format!(
                    "{class} {name}{}{} {}",
                    if detail.is_empty() { "" } else { " " },
                    detail,
                    crate::report::units::fmt_ns(t.total)
                )
            })
    }

    pub fn stalls(&self) -> u64 {
        self.stalls
    }

    pub fn incomplete(&self) -> u64 {
        self.incomplete
    }

    /// Culprits by stolen time, with advice for `machine`.
    pub fn ranked(&self, machine: &Machine) -> Vec<RankedCulprit> {
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
                    advice: advice(*class, name, detail, &cpus, machine),
                    cpus,
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
