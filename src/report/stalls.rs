//! Stall bookkeeping over a whole run: totals per CPU and the worst N stalls, in memory
//! that does not grow with run length.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::fmt::Write as _;

use super::runfile::{CpuStalls, StallSummary};
use super::units::fmt_ns;
use crate::attribution::Verdict;
use crate::model::Cpu;

#[derive(Debug, Clone)]
pub struct StallBook {
    keep: usize,
    count: u64,
    total_ns: u64,
    longest_ns: u64,
    per_cpu: BTreeMap<Cpu, CpuStalls>,
    /// Min-heap on (duration, arrival) over the `keep` longest stalls, whose verdicts sit in
    /// `kept` by arrival number.
    worst: BinaryHeap<Reverse<(u64, u64)>>,
    kept: std::collections::HashMap<u64, Verdict>,
    seq: u64,
}

impl StallBook {
    pub fn new(keep: usize) -> Self {
        StallBook {
            keep,
            count: 0,
            total_ns: 0,
            longest_ns: 0,
            per_cpu: BTreeMap::new(),
            worst: BinaryHeap::new(),
            kept: std::collections::HashMap::new(),
            seq: 0,
        }
    }

    pub fn add(&mut self, v: Verdict) {
        let s = v.stall;
        let d = s.duration_ns();
        self.count += 1;
        self.total_ns += d;
        self.longest_ns = self.longest_ns.max(d);
        let c = self.per_cpu.entry(s.cpu).or_insert_with(|| CpuStalls {
            cpu: s.cpu,
            ..CpuStalls::default()
        });
        c.count += 1;
        c.total_ns += d;
        c.longest_ns = c.longest_ns.max(d);
        // Among equal durations the earlier stall stays (larger key = earlier arrival).
        self.seq += 1;
        let key = (d, u64::MAX - self.seq);
        if self.worst.len() < self.keep {
            self.worst.push(Reverse(key));
            self.kept.insert(self.seq, v);
        } else if let Some(&Reverse(min)) = self.worst.peek() {
            if key > min {
                self.worst.pop();
                self.kept.remove(&(u64::MAX - min.1));
                self.worst.push(Reverse(key));
                self.kept.insert(self.seq, v);
            }
        }
    }

    /// The shortest stall that would still be kept (0 while the book is not full).
    pub fn admission_ns(&self) -> u64 {
        if self.worst.len() < self.keep {
            0
        } else {
            self.worst.peek().map_or(0, |r| r.0 .0)
        }
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    /// The kept verdicts, longest stall first.
    pub fn worst(&self) -> Vec<&Verdict> {
        let mut keys: Vec<(u64, u64)> = self.worst.iter().map(|Reverse(k)| *k).collect();
        keys.sort_unstable_by(|a, b| b.cmp(a));
        keys.iter()
            .filter_map(|k| self.kept.get(&(u64::MAX - k.1)))
            .collect()
    }

    pub fn summary(&self) -> StallSummary {
        StallSummary {
            count: self.count,
            total_ns: self.total_ns,
            longest_ns: self.longest_ns,
            per_cpu: self.per_cpu.values().cloned().collect(),
        }
    }
}

/// The stall summary block of the text report.
pub fn render_summary(s: &StallSummary, threshold_ns: u64, duration_ns: u64) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "== Stalls (loop gaps over {}) ==",
        fmt_ns(threshold_ns)
    );
    let share = |t: u64| {
        if duration_ns == 0 {
            0.0
        } else {
            100.0 * t as f64 / duration_ns as f64
        }
    };
    let _ = writeln!(
        out,
        "{:<8}{:>10}{:>14}{:>12}{:>12}",
        "cpu", "count", "total", "of time", "longest"
    );
    for c in &s.per_cpu {
        let _ = writeln!(
            out,
            "{:<8}{:>10}{:>14}{:>11.4}%{:>12}",
            c.cpu,
            c.count,
            fmt_ns(c.total_ns),
            share(c.total_ns),
            fmt_ns(c.longest_ns)
        );
    }
    let _ = writeln!(
        out,
        "{:<8}{:>10}{:>14}{:>12}{:>12}",
        "all",
        s.count,
        fmt_ns(s.total_ns),
        "",
        fmt_ns(s.longest_ns)
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Stall, ThreadRole};

    fn stall(cpu: Cpu, start: u64, d: u64) -> Verdict {
        Verdict {
            stall: Stall {
                cpu,
                thread: ThreadRole::Producer,
                start_ns: start,
                end_ns: start + d,
            },
            culprits: vec![],
            explained_share: 0.0,
            incomplete: false,
            hypervisor: vec![],
            timeline: vec![],
        }
    }

    #[test]
    fn keeps_the_longest_and_counts_all() {
        let mut b = StallBook::new(3);
        for (i, d) in [5, 50, 7, 90, 1, 60].into_iter().enumerate() {
            b.add(stall((i % 2) as Cpu, i as u64 * 1000, d));
        }
        let worst: Vec<u64> = b.worst().iter().map(|v| v.stall.duration_ns()).collect();
        assert_eq!(worst, [90, 60, 50]);
        let s = b.summary();
        assert_eq!((s.count, s.total_ns, s.longest_ns), (6, 213, 90));
        assert_eq!(s.per_cpu[0].count, 3);
        assert_eq!(s.per_cpu[1].total_ns, 50 + 90 + 60);
    }
}
