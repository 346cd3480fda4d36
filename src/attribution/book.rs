//! Stall bookkeeping over a whole run: totals per CPU and the worst N stalls, in memory
//! that does not grow with run length.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

use super::engine::Verdict;
use crate::model::{Cpu, Nanos};
use crate::platform::fast_hash::FastMap;

/// Count, total and longest of a set of stalls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    pub count: u64,
    pub total_ns: Nanos,
    pub longest_ns: Nanos,
}

impl Tally {
    fn add(&mut self, d: Nanos) {
        self.count += 1;
        self.total_ns += d;
        self.longest_ns = self.longest_ns.max(d);
    }
}

/// All stalls, and per CPU (in CPU order).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StallTotals {
    pub all: Tally,
    pub per_cpu: Vec<(Cpu, Tally)>,
}

#[derive(Debug, Clone)]
pub struct StallBook {
    keep: usize,
    all: Tally,
    per_cpu: BTreeMap<Cpu, Tally>,
    /// Min-heap on (duration, arrival) over the `keep` longest stalls, whose verdicts sit in
    /// `kept` by arrival number.
    worst: BinaryHeap<Reverse<(u64, u64)>>,
    kept: FastMap<u64, Verdict>,
    seq: u64,
}

impl StallBook {
    pub fn new(keep: usize) -> Self {
        StallBook {
            keep,
            all: Tally::default(),
            per_cpu: BTreeMap::new(),
            worst: BinaryHeap::new(),
            kept: FastMap::default(),
            seq: 0,
        }
    }

    /// Counts the stall and keeps its verdict if it is among the longest; returns the verdict
    /// that is not kept (this one, or the one it displaced), so its storage can serve again.
    pub fn add(&mut self, v: Verdict) -> Option<Verdict> {
        let s = v.stall;
        let d = s.duration_ns();
        self.all.add(d);
        self.per_cpu.entry(s.cpu).or_default().add(d);
        // Among equal durations the earlier stall stays (larger key = earlier arrival).
        self.seq += 1;
        let key = (d, u64::MAX - self.seq);
        if self.worst.len() < self.keep {
            self.worst.push(Reverse(key));
            self.kept.insert(self.seq, v);
            return None;
        }
        match self.worst.peek() {
            Some(&Reverse(min)) if key > min => {
                self.worst.pop();
                let displaced = self.kept.remove(&(u64::MAX - min.1));
                self.worst.push(Reverse(key));
                self.kept.insert(self.seq, v);
                displaced
            }
            _ => Some(v),
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
        self.all.count
    }

    /// The kept verdicts, longest stall first.
    pub fn worst(&self) -> Vec<&Verdict> {
        let mut keys: Vec<(u64, u64)> = self.worst.iter().map(|Reverse(k)| *k).collect();
        keys.sort_unstable_by(|a, b| b.cmp(a));
        keys.iter()
            .filter_map(|k| self.kept.get(&(u64::MAX - k.1)))
            .collect()
    }

    pub fn totals(&self) -> StallTotals {
        StallTotals {
            all: self.all,
            per_cpu: self.per_cpu.iter().map(|(&c, &t)| (c, t)).collect(),
        }
    }
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
        let s = b.totals();
        assert_eq!(
            (s.all.count, s.all.total_ns, s.all.longest_ns),
            (6, 213, 90)
        );
        assert_eq!(
            s.per_cpu[0],
            (
                0,
                Tally {
                    count: 3,
                    total_ns: 13,
                    longest_ns: 7
                }
            )
        );
        assert_eq!(s.per_cpu[1].1.total_ns, 50 + 90 + 60);
    }
}
