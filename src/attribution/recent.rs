//! Deciding at the end (`--attribution end`), the kernel's episodes of the last seconds on
//! each measured CPU, as the tally took them from the records glanced at (`tally`): the live view explains
//! each spike by the kernel time inside its window within a turn of it, while its culprits
//! wait for the end. An episode's own time is its span less the episodes nested in it, as the
//! tally counts it: the enclosing episode is kept whole and each nested one is kept twice,
//! once for its own culprit and once taken off the culprit it was nested in.

use std::collections::VecDeque;

use crate::model::{Cpu, Nanos};

use super::tally::Naming;

/// How long an episode is kept after the record that brought it: a spike is explained at
/// the collector's turn after the glance that covered it, and one received as a glance
/// began waits for the next — two turns, of 3 s at most (`session::run`'s quiet turn), and
/// a second to spare.
pub const KEPT_NS: Nanos = 7_000_000_000;
/// Pieces kept per CPU at most (a storm brings more: the oldest go first, and a window that
/// begins before what is kept is said to be partly explained).
pub const PIECES_KEPT: usize = 1 << 16;
/// Pieces longer than this are kept apart, fewer (task runs, kworkers, kernel threads): a
/// window's scan of the others then stops this far past its end, however long a run was —
/// under a storm a second holds some 100,000 pieces.
pub const LONG_NS: Nanos = 50_000;
/// Long pieces kept per CPU at most.
pub const LONG_KEPT: usize = 1 << 12;

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

/// Pieces in the order their records came, at most `room` (the oldest go first).
#[derive(Debug, Default)]
struct Pieces {
    list: VecDeque<Piece>,
    room: usize,
    /// Pieces before this (`seen_ns`) were let go, for room or for age.
    dropped_to_ns: Nanos,
}

impl Pieces {
    fn with_room(room: usize) -> Pieces {
        Pieces {
            list: VecDeque::with_capacity(room),
            room,
            dropped_to_ns: 0,
        }
    }

    fn push(&mut self, mut p: Piece) {
        if let Some(last) = self.list.back() {
            p.seen_ns = p.seen_ns.max(last.seen_ns);
        }
        if self.list.len() == self.room {
            if let Some(gone) = self.list.pop_front() {
                self.dropped_to_ns = self.dropped_to_ns.max(gone.seen_ns);
            }
        }
        self.list.push_back(p);
    }

    /// Those whose record came at `lo` or after, until one came after `until`.
    fn from(&self, lo: Nanos, until: Nanos) -> impl Iterator<Item = &Piece> {
        let first = self.list.partition_point(|p| p.seen_ns < lo);
        self.list
            .range(first..)
            .take_while(move |p| p.seen_ns <= until)
    }

    fn forget_before(&mut self, old: Nanos) {
        while self.list.front().is_some_and(|p| p.seen_ns < old) {
            if let Some(gone) = self.list.pop_front() {
                self.dropped_to_ns = self.dropped_to_ns.max(gone.seen_ns);
            }
        }
    }
}

/// One measured CPU's recent pieces: the short ones and, apart, the long ones.
#[derive(Debug, Default)]
struct CpuPieces {
    short: Pieces,
    long: Pieces,
}

impl CpuPieces {
    /// The pieces that may overlap `[lo, hi)`: a short one came with a record that ended
    /// inside it or at most `LONG_NS` after it; a long one, any time after `lo`.
    fn around(&self, lo: Nanos, hi: Nanos) -> impl Iterator<Item = &Piece> {
        let short = self.short.from(lo, hi.saturating_add(LONG_NS));
        short.chain(self.long.from(lo, Nanos::MAX))
    }

    fn partial(&self, lo: Nanos) -> bool {
        self.short.dropped_to_ns > lo || self.long.dropped_to_ns > lo
    }
}

/// The kernel time inside a window, by culprit.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WindowTime {
    /// Culprit and time, the most first.
    pub culprits: Vec<(Naming, Nanos)>,
    /// The window begins before the oldest piece kept for its CPU (let go for room or for
    /// age): some of it is missing.
    pub partial: bool,
}

impl WindowTime {
    pub fn total_ns(&self) -> Nanos {
        self.culprits.iter().map(|(_, ns)| ns).sum()
    }
}

/// The pieces of the measured CPUs (see the module's text), shared by the drain thread that
/// adds them as it glances at the rings and the collector that asks about spike windows.
#[derive(Debug, Default)]
pub struct RecentKernel {
    /// By CPU number; None for a CPU not measured (its pieces are not kept).
    cpus: Vec<Option<CpuPieces>>,
    /// The culprits' namings, by the tally's index.
    names: Vec<Naming>,
    /// Every record committed before this (CLOCK_MONOTONIC) has been added.
    complete_to_ns: Nanos,
}

impl RecentKernel {
    /// Room for the pieces of the measured `cpus` made ahead, so that adding them allocates
    /// nothing while recording.
    pub fn with_room(cpus: &[Cpu]) -> RecentKernel {
        let slots = cpus.iter().max().map_or(0, |&c| c as usize + 1);
        RecentKernel {
            cpus: (0..slots)
                .map(|c| {
                    cpus.contains(&(c as Cpu)).then(|| CpuPieces {
                        short: Pieces::with_room(PIECES_KEPT),
                        long: Pieces::with_room(LONG_KEPT),
                    })
                })
                .collect(),
            names: Vec::with_capacity(super::tally::CULPRITS_KEPT + 16),
            complete_to_ns: 0,
        }
    }

    /// Adds a piece of `cpu` (nothing for a CPU not measured), kept with the long ones when
    /// `of_long` — its own episode's span, or for a debit that of the episode it is taken
    /// off, is longer than `LONG_NS` (they are found together).
    pub fn push(&mut self, cpu: Cpu, p: Piece, of_long: bool) {
        if let Some(Some(c)) = self.cpus.get_mut(cpu as usize) {
            match of_long {
                true => c.long.push(p),
                false => c.short.push(p),
            }
        }
    }

    /// Culprits named so far.
    pub fn named(&self) -> usize {
        self.names.len()
    }

    /// Names the next culprit (the tally's index `named()`).
    pub fn name(&mut self, naming: Naming) {
        self.names.push(naming);
    }

    /// A glance is over: `complete_to_ns` is when it began if it read every ring to its end
    /// (None if the budget cut it short). Pieces older than `KEPT_NS` before that go.
    pub fn glanced(&mut self, complete_to_ns: Option<Nanos>) {
        if let Some(to) = complete_to_ns {
            self.complete_to_ns = self.complete_to_ns.max(to);
        }
        let old = self.complete_to_ns.saturating_sub(KEPT_NS);
        for c in self.cpus.iter_mut().flatten() {
            c.short.forget_before(old);
            c.long.forget_before(old);
        }
    }

    /// Every record committed before this has been added (0: none yet).
    pub fn complete_to_ns(&self) -> Nanos {
        self.complete_to_ns
    }

    /// The kernel time on `cpu` inside `[lo, hi)`, by culprit, the most first.
    pub fn window(&self, cpu: Cpu, lo: Nanos, hi: Nanos) -> WindowTime {
        let mut out = WindowTime::default();
        let Some(Some(c)) = self.cpus.get(cpu as usize) else {
            return out;
        };
        out.partial = c.partial(lo);
        let mut sums: Vec<(u32, i64)> = Vec::new();
        for p in c.around(lo, hi) {
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
        let Some(Some(c)) = self.cpus.get(cpu as usize) else {
            return at;
        };
        // Each episode that begins soon enough after `until` carries it on; a nested one
        // comes before the one it is nested in, which carries it further anyway.
        let mut starts: Vec<(Nanos, Nanos)> = c
            .around(at, hi)
            .filter(|p| !p.debit && p.start_ns >= at && p.start_ns < hi)
            .map(|p| (p.start_ns, p.end_ns))
            .collect();
        starts.sort_unstable();
        let mut until = at;
        for (start, end) in starts {
            if start > until + HELD_SLACK_NS {
                break;
            }
            until = until.max(end.min(hi));
        }
        until
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Culprit, CulpritClass, Who};

    fn naming(name: &str) -> Naming {
        Culprit {
            class: CulpritClass::Kworker,
            who: Who::Kthread { comm: name.into() },
        }
    }

    /// `pieces` as the tally gives them: a piece with whether its episode (for a debit, the
    /// one it is taken off) is long.
    fn recent(pieces: &[(Cpu, Piece, bool)], names: &[&str], complete: Nanos) -> RecentKernel {
        let mut r = RecentKernel::with_room(&[0, 1]);
        names.iter().for_each(|n| r.name(naming(n)));
        for &(cpu, p, of_long) in pieces {
            r.push(cpu, p, of_long);
        }
        r.glanced(Some(complete));
        r
    }

    /// A piece of its own episode.
    fn own(cpu: Cpu, span: (Nanos, Nanos), culprit: u32) -> (Cpu, Piece, bool) {
        let p = Piece::new(span, span.1 - span.0, culprit, false);
        (cpu, p, span.1 - span.0 > LONG_NS)
    }

    /// A nested episode's span taken off the episode `of` it was nested in.
    fn debit(
        cpu: Cpu,
        span: (Nanos, Nanos),
        culprit: u32,
        of: (Nanos, Nanos),
    ) -> (Cpu, Piece, bool) {
        let p = Piece::new(span, span.1 - span.0, culprit, true);
        (cpu, p, of.1 - of.0 > LONG_NS)
    }

    fn names_of(w: &WindowTime) -> Vec<(String, Nanos)> {
        w.culprits
            .iter()
            .map(|(n, ns)| match &n.who {
                Who::Kthread { comm } => (comm.to_string(), *ns),
                other => (format!("{other:?}"), *ns),
            })
            .collect()
    }

    #[test]
    fn a_window_gets_each_culprits_own_time_inside_it() {
        // A kworker 1000–2000 with an IRQ 1100–1150 nested in it (kept twice: for the IRQ,
        // and taken off the kworker), a tick 2500–2520, and CPU 1's own episode.
        let r = recent(
            &[
                own(0, (1100, 1150), 1),
                own(0, (1000, 2000), 0),
                debit(0, (1100, 1150), 0, (1000, 2000)),
                own(0, (2500, 2520), 2),
                own(1, (1000, 3000), 0),
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
    fn a_long_episode_is_found_for_a_window_long_before_its_record_came() {
        // A kworker run of 5 ms with an IRQ at 1.00–1.01 ms nested in it, then a storm of
        // short episodes after it: a window at 1 ms finds the run, less the IRQ, and the IRQ.
        let run = (0, 5_000_000);
        let mut pieces = vec![
            own(0, (1_000_000, 1_010_000), 1),
            own(0, run, 0),
            debit(0, (1_000_000, 1_010_000), 0, run),
        ];
        pieces.extend(
            (0..1000u64).map(|k| own(0, (5_000_000 + k * 100, 5_000_000 + k * 100 + 10), 2)),
        );
        let r = recent(&pieces, &["kworker", "irq", "storm"], 10_000_000);
        assert_eq!(
            names_of(&r.window(0, 990_000, 1_100_000)),
            vec![("kworker".into(), 100_000), ("irq".into(), 10_000)]
        );
        assert_eq!(r.window(0, 5_000_000, 5_000_200).total_ns(), 20);
    }

    #[test]
    fn only_the_measured_cpus_pieces_are_kept() {
        let mut r = RecentKernel::with_room(&[1]);
        r.name(naming("k"));
        r.push(0, Piece::new((0, 10), 10, 0, false), false);
        r.push(1, Piece::new((0, 10), 10, 0, false), false);
        r.glanced(Some(100));
        assert!(r.cpus[0].is_none(), "no room made for CPU 0");
        assert!(r.window(0, 0, 10).culprits.is_empty());
        assert_eq!(names_of(&r.window(1, 0, 10)), vec![("k".into(), 10)]);
    }

    #[test]
    fn a_steal_record_counts_its_grown_clock_spread_over_its_span() {
        let steal = (0, Piece::new((1000, 2000), 100, 0, false), false);
        let r = recent(&[steal], &["host"], 3000);
        assert_eq!(
            names_of(&r.window(0, 1500, 3000)),
            vec![("host".into(), 50)]
        );
    }

    #[test]
    fn held_from_follows_episodes_that_run_on_without_a_break() {
        // From 10,000: a tick 10,050–10,090, then a kworker 10,300–14,000 (an IRQ nested in
        // it) and a task 14,500–80,000; after a gap, another tick. A run that began before
        // 10,000 (its end unseen: it holds the thread's own run) holds nothing.
        let r = recent(
            &[
                own(0, (2_000, 11_000), 3),
                own(0, (10_050, 10_090), 0),
                own(0, (11_100, 11_120), 1),
                own(0, (10_300, 14_000), 2),
                debit(0, (11_100, 11_120), 2, (10_300, 14_000)),
                own(0, (14_500, 80_000), 3),
                own(0, (90_000, 90_100), 0),
            ],
            &["tick", "irq", "kworker", "task"],
            100_000,
        );
        assert_eq!(r.held_from(0, 10_000, 100_000), 80_000);
        assert_eq!(
            r.held_from(0, 10_000, 12_000),
            12_000,
            "up to the window's end"
        );
        assert_eq!(
            r.held_from(0, 88_000, 100_000),
            88_000,
            "nothing began soon enough"
        );
        assert_eq!(r.held_from(0, 89_500, 100_000), 90_100);
    }

    #[test]
    fn old_pieces_go_and_a_window_among_those_let_go_is_partial() {
        let mut r = RecentKernel::with_room(&[0]);
        r.name(naming("k"));
        r.glanced(Some(0));
        for k in 0..PIECES_KEPT as u64 + 10 {
            r.push(0, Piece::new((k * 10, k * 10 + 5), 5, 0, false), false);
        }
        r.glanced(None);
        assert_eq!(r.cpus[0].as_ref().unwrap().short.list.len(), PIECES_KEPT);
        assert!(r.window(0, 0, 1000).partial);
        let late = PIECES_KEPT as u64 * 10;
        assert!(!r.window(0, late, late + 100).partial);
        assert_eq!(r.window(0, late, late + 100).total_ns(), 50);
        // Once the glances reach past KEPT_NS, everything older goes, and a window among
        // what went is partial.
        r.glanced(Some(KEPT_NS + late + 1000));
        assert!(r.cpus[0].as_ref().unwrap().short.list.is_empty());
        assert!(r.window(0, late, late + 100).partial);
        assert_eq!(r.complete_to_ns(), KEPT_NS + late + 1000);
    }

    #[test]
    fn a_piece_that_comes_out_of_order_still_sorts_after_the_ones_before_it() {
        let r = recent(
            &[own(0, (100, 500), 0), own(0, (200, 300), 1)],
            &["a", "b"],
            1000,
        );
        assert_eq!(r.cpus[0].as_ref().unwrap().short.list[1].seen_ns, 500);
        assert_eq!(r.window(0, 250, 260).total_ns(), 20, "both found");
    }
}
