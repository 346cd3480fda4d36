//! Deciding at the end (`--attribution end`), the kernel's episodes of the last seconds on
//! each measured CPU, as the tally took them from the rings (`tally`): the live view explains
//! each spike by the kernel time inside its window within a turn of it, while its culprits
//! wait for the end. An episode's own time is its span less the episodes nested in it, as the
//! tally counts it: the enclosing episode is kept whole and each nested one is kept twice,
//! once for its own culprit and once taken off the culprit it was nested in.

use std::collections::VecDeque;

use crate::model::{Cpu, Nanos};

use super::tally::Naming;

/// How long an episode is kept after the record that brought it: a spike is explained at
/// the collector's turn after the glance that covered it (a turn is a second).
pub const KEPT_NS: Nanos = 3_000_000_000;
/// Pieces kept per CPU at most (a storm brings more: the oldest go first, and a window that
/// begins before what is kept is said to be partly explained).
pub const PIECES_KEPT: usize = 1 << 16;

/// How soon after the clock read, or after the episode before it, an episode must begin to
/// have held the thread (`held_from`): between the producer's read and its publication there
/// are tens of ns of its own work, and between two episodes the kernel's entry and exit.
pub const HELD_SLACK_NS: Nanos = 1_000;

/// One episode's span, credited to (or, `debit`, taken off) a culprit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece {
    pub start_ns: Nanos,
    pub end_ns: Nanos,
    /// The time it stands for: its span, or a steal record's grown steal clock (spread
    /// over its span).
    pub ns: Nanos,
    /// Index into the culprits' namings (`RecentKernel::names`).
    pub culprit: u32,
    pub debit: bool,
    /// Where it sorts: the end of the record that brought it, never before an earlier
    /// piece's (a nested episode's debit comes with the episode enclosing it).
    seen_ns: Nanos,
}

impl Piece {
    pub fn new(span: (Nanos, Nanos), ns: Nanos, culprit: u32, debit: bool) -> Piece {
        Piece {
            start_ns: span.0,
            end_ns: span.1.max(span.0),
            ns,
            culprit,
            debit,
            seen_ns: span.1,
        }
    }

    /// Its time inside `[lo, hi)`: the overlap, or for a steal record the share of its
    /// grown clock that the overlap is of its span.
    fn inside(&self, lo: Nanos, hi: Nanos) -> Nanos {
        let (a, b) = (self.start_ns.max(lo), self.end_ns.min(hi));
        if b <= a {
            return 0;
        }
        let span = self.end_ns - self.start_ns;
        match self.ns == span {
            true => b - a,
            false => ((b - a) as u128 * self.ns as u128 / span.max(1) as u128) as Nanos,
        }
    }
}

/// One CPU's recent pieces, in the order their records came.
#[derive(Debug, Default)]
struct CpuPieces {
    pieces: VecDeque<Piece>,
    /// The longest piece kept so far (a scan for a window stops this far past its end).
    longest_ns: Nanos,
    /// Pieces before this (`seen_ns`) were let go for room, not for age.
    dropped_to_ns: Nanos,
}

/// The kernel time inside a window, by culprit.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WindowTime {
    /// Culprit and time, the most first.
    pub culprits: Vec<(Naming, Nanos)>,
    /// The window begins before the oldest piece kept for its CPU: some of it is missing.
    pub partial: bool,
}

impl WindowTime {
    pub fn total_ns(&self) -> Nanos {
        self.culprits.iter().map(|(_, ns)| ns).sum()
    }
}

/// The pieces of the measured CPUs (see the module's text), shared by the drain thread that
/// adds them and the collector that asks about spike windows.
#[derive(Debug, Default)]
pub struct RecentKernel {
    cpus: Vec<CpuPieces>,
    /// The culprits' namings, by the tally's index.
    names: Vec<Naming>,
    /// Every record committed before this (CLOCK_MONOTONIC) has been added.
    complete_to_ns: Nanos,
}

impl RecentKernel {
    /// Room for `cpus` (the largest measured CPU's number + 1) made ahead, so that adding
    /// pieces allocates nothing while recording.
    pub fn with_room(cpus: usize) -> RecentKernel {
        RecentKernel {
            cpus: (0..cpus)
                .map(|_| CpuPieces {
                    pieces: VecDeque::with_capacity(PIECES_KEPT),
                    ..Default::default()
                })
                .collect(),
            names: Vec::with_capacity(super::tally::CULPRITS_KEPT + 16),
            complete_to_ns: 0,
        }
    }

    /// Adds the pieces of a glance and the culprits named since the last; `complete_to_ns`
    /// is when the glance began if it read every ring to its end (None if the budget cut it
    /// short). Pieces older than `KEPT_NS` before that go.
    pub fn add(
        &mut self,
        pieces: &mut Vec<(Cpu, Piece)>,
        names: &mut Vec<Naming>,
        complete_to_ns: Option<Nanos>,
    ) {
        self.names.append(names);
        for (cpu, mut p) in pieces.drain(..) {
            let cpu = cpu as usize;
            if cpu >= self.cpus.len() {
                // A CPU past the room made: not a measured one.
                continue;
            }
            let c = &mut self.cpus[cpu];
            if let Some(last) = c.pieces.back() {
                p.seen_ns = p.seen_ns.max(last.seen_ns);
            }
            if c.pieces.len() == PIECES_KEPT {
                if let Some(gone) = c.pieces.pop_front() {
                    c.dropped_to_ns = c.dropped_to_ns.max(gone.seen_ns);
                }
            }
            c.longest_ns = c.longest_ns.max(p.end_ns - p.start_ns);
            c.pieces.push_back(p);
        }
        if let Some(to) = complete_to_ns {
            self.complete_to_ns = self.complete_to_ns.max(to);
        }
        let old = self.complete_to_ns.saturating_sub(KEPT_NS);
        for c in &mut self.cpus {
            while c.pieces.front().is_some_and(|p| p.seen_ns < old) {
                c.pieces.pop_front();
            }
        }
    }

    /// Culprits named so far.
    pub fn named(&self) -> usize {
        self.names.len()
    }

    /// Every record committed before this has been added (0: none yet).
    pub fn complete_to_ns(&self) -> Nanos {
        self.complete_to_ns
    }

    /// The kernel time on `cpu` inside `[lo, hi)`, by culprit, the most first.
    pub fn window(&self, cpu: Cpu, lo: Nanos, hi: Nanos) -> WindowTime {
        let mut out = WindowTime::default();
        let Some(c) = self.cpus.get(cpu as usize) else {
            return out;
        };
        out.partial = c.dropped_to_ns > lo;
        let mut sums: Vec<(u32, i64)> = Vec::new();
        // A piece that overlaps the window came with a record that ended inside it or after.
        let from = c.pieces.partition_point(|p| p.seen_ns < lo);
        for p in c.pieces.range(from..) {
            if p.seen_ns > hi.saturating_add(c.longest_ns) {
                break;
            }
            let ns = p.inside(lo, hi) as i64;
            if ns == 0 {
                continue;
            }
            let ns = if p.debit { -ns } else { ns };
            match sums.iter_mut().find(|(k, _)| *k == p.culprit) {
                Some((_, sum)) => *sum += ns,
                None => sums.push((p.culprit, ns)),
            }
        }
        sums.sort_by_key(|&(k, ns)| (std::cmp::Reverse(ns), k));
        out.culprits = sums
            .into_iter()
            .filter(|&(_, ns)| ns > 0)
            .filter_map(|(k, ns)| Some((self.names.get(k as usize)?.clone(), ns as Nanos)))
            .collect();
        out
    }

    /// Where the kernel held `cpu` from `at` on, when the thread there read the clock at `at`
    /// and was to act on it at once (the producer's publication): the end of an episode
    /// that began within `HELD_SLACK_NS` after it, and of those that follow it as closely,
    /// up to `hi`; `at` when none did. (The thread ran at `at`: nothing began before it.)
    pub fn held_from(&self, cpu: Cpu, at: Nanos, hi: Nanos) -> Nanos {
        let Some(c) = self.cpus.get(cpu as usize) else {
            return at;
        };
        let from = c.pieces.partition_point(|p| p.seen_ns < at);
        let mut until = at;
        // Pieces come in end order: each that begins soon enough after `until` carries it on.
        for p in c.pieces.range(from..) {
            if p.seen_ns > hi.saturating_add(c.longest_ns) {
                break;
            }
            if !p.debit && p.start_ns >= at && p.start_ns <= until + HELD_SLACK_NS {
                until = until.max(p.end_ns.min(hi));
            }
        }
        until
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::CulpritClass;

    fn naming(name: &str) -> Naming {
        (CulpritClass::Kworker, name.into(), "".into())
    }

    fn recent(pieces: &[(Cpu, Piece)], names: &[&str], complete: Nanos) -> RecentKernel {
        let mut r = RecentKernel::with_room(2);
        r.add(
            &mut pieces.to_vec(),
            &mut names.iter().map(|n| naming(n)).collect(),
            Some(complete),
        );
        r
    }

    fn names_of(w: &WindowTime) -> Vec<(String, Nanos)> {
        w.culprits
            .iter()
            .map(|(n, ns)| (n.1.to_string(), *ns))
            .collect()
    }

    #[test]
    fn a_window_gets_each_culprits_own_time_inside_it() {
        // A kworker 1000–2000 with an IRQ 1100–1150 nested in it (kept twice: for the IRQ,
        // and taken off the kworker), a tick 2500–2520, and CPU 1's own episode.
        let r = recent(
            &[
                (0, Piece::new((1100, 1150), 50, 1, false)),
                (0, Piece::new((1000, 2000), 1000, 0, false)),
                (0, Piece::new((1100, 1150), 50, 0, true)),
                (0, Piece::new((2500, 2520), 20, 2, false)),
                (1, Piece::new((1000, 3000), 2000, 0, false)),
            ],
            &["kworker", "irq", "tick"],
            5000,
        );
        let w = r.window(0, 1120, 2510);
        assert_eq!(
            names_of(&w),
            vec![
                ("kworker".into(), 2000 - 1150),
                ("irq".into(), 30),
                ("tick".into(), 10)
            ]
        );
        assert!(!w.partial);
        assert_eq!(w.total_ns(), 2510 - 1120 - (2500 - 2000));
        assert!(r.window(0, 3000, 4000).culprits.is_empty());
        assert_eq!(
            names_of(&r.window(1, 0, 1500)),
            vec![("kworker".into(), 500)]
        );
        assert!(r.window(7, 0, 1500).culprits.is_empty(), "no such CPU");
    }

    #[test]
    fn a_steal_record_counts_its_grown_clock_spread_over_its_span() {
        let r = recent(
            &[(0, Piece::new((1000, 2000), 100, 0, false))],
            &["host"],
            3000,
        );
        assert_eq!(
            names_of(&r.window(0, 1500, 3000)),
            vec![("host".into(), 50)]
        );
    }

    #[test]
    fn held_from_follows_episodes_that_run_on_without_a_break() {
        // From 10,000: a tick 10,050–10,090, then a kworker 10,300–14,000 (an IRQ nested in
        // it) and a task 14,500–20,000; after a gap, another tick. A run that began before
        // 10,000 (its end unseen: it holds the thread's own run) holds nothing.
        let r = recent(
            &[
                (0, Piece::new((2_000, 11_000), 9_000, 3, false)),
                (0, Piece::new((10_050, 10_090), 40, 0, false)),
                (0, Piece::new((11_100, 11_120), 20, 1, false)),
                (0, Piece::new((10_300, 14_000), 3_700, 2, false)),
                (0, Piece::new((11_100, 11_120), 20, 2, true)),
                (0, Piece::new((14_500, 20_000), 5_500, 3, false)),
                (0, Piece::new((30_000, 30_100), 100, 0, false)),
            ],
            &["tick", "irq", "kworker", "task"],
            50_000,
        );
        assert_eq!(r.held_from(0, 10_000, 50_000), 20_000);
        assert_eq!(
            r.held_from(0, 10_000, 12_000),
            12_000,
            "up to the window's end"
        );
        assert_eq!(
            r.held_from(0, 28_000, 50_000),
            28_000,
            "nothing began soon enough"
        );
        assert_eq!(r.held_from(0, 29_500, 50_000), 30_100);
    }

    #[test]
    fn old_pieces_go_and_a_window_past_those_let_go_for_room_is_partial() {
        let mut r = RecentKernel::with_room(1);
        r.add(&mut vec![], &mut vec![naming("k")], Some(0));
        let mut batch: Vec<(Cpu, Piece)> = (0..PIECES_KEPT as u64 + 10)
            .map(|k| (0, Piece::new((k * 10, k * 10 + 5), 5, 0, false)))
            .collect();
        r.add(&mut batch, &mut vec![], None);
        assert_eq!(r.cpus[0].pieces.len(), PIECES_KEPT);
        assert!(r.window(0, 0, 1000).partial);
        let late = PIECES_KEPT as u64 * 10;
        assert!(!r.window(0, late, late + 100).partial);
        assert_eq!(r.window(0, late, late + 100).total_ns(), 50);
        // Once the glances reach past KEPT_NS, everything older goes.
        r.add(&mut vec![], &mut vec![], Some(KEPT_NS + late + 1000));
        assert!(r.cpus[0].pieces.is_empty());
        assert_eq!(r.complete_to_ns(), KEPT_NS + late + 1000);
    }

    #[test]
    fn a_piece_that_comes_out_of_order_still_sorts_after_the_ones_before_it() {
        let r = recent(
            &[
                (0, Piece::new((100, 500), 400, 0, false)),
                (0, Piece::new((200, 300), 100, 1, false)),
            ],
            &["a", "b"],
            1000,
        );
        assert_eq!(r.cpus[0].pieces[1].seen_ns, 500);
        assert_eq!(r.window(0, 250, 260).total_ns(), 20, "both found");
    }
}
