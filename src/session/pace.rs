//! The collector's and the drain thread's budget (what they may spend of a CPU they share
//! with the measured threads) and, deciding at the end, the few signals between them: the
//! collector asks for records before the end, the drain thread says it delivered some. The
//! drain thread sees it through `probe::Gate`; the slices of work themselves are
//! `platform::pace::Pacer`'s.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::model::Decision;
use crate::platform::clock::{monotonic_ns, own_thread_cpu_ns};
use crate::probe::Gate;

/// What the collector threads may spend of one CPU, shared between them: over each second,
/// at most `share` of it. Some work is always done (the workload's stalls are taken in, the
/// live view is shown): it is spent as `spend_always`, and the work that can wait keeps room
/// for as much of it as the last second had. When a storm brings more records than that
/// buys, they hold back —
/// the drain thread leaves the records in the probes' per-CPU rings (which hold them, or drop
/// and count them per CPU: the stalls there are marked incomplete), and the collector decides
/// nothing newer than what was drained — rather than take the measured thread's CPU.
#[derive(Debug)]
pub struct Budget {
    limit_ns: u64,
    window_start_ns: AtomicU64,
    spent_ns: AtomicU64,
    /// This window's spending on work that is always done (part of `spent_ns`).
    always_ns: AtomicU64,
    /// The last window's: the room kept for it in this one.
    reserve_ns: AtomicU64,
    /// Times a thread held back because the budget was spent.
    held_back: AtomicU64,
    /// When the last drain that emptied the ring began (CLOCK_MONOTONIC): every record
    /// committed before it has reached user space.
    drained_at_ns: AtomicU64,
    /// When culprits are decided: at the end, the records wait in the rings until then,
    /// drained before only when a ring needs room or the collector asks.
    decision: Decision,
    /// The collector asks for a drain before the end (its undecided stalls pile up).
    records_wanted: AtomicBool,
    /// Deciding at the end, the drain thread drained before it: the collector takes the
    /// records in, with every stall before them (`take_records_delivered`).
    records_delivered: AtomicBool,
}

/// The budget window.
const WINDOW_NS: u64 = 1_000_000_000;

impl Budget {
    /// `share` of one CPU (0.01 = 1 %); 0 or less means no limit. Deciding at the end,
    /// nothing is drained, so nothing may be decided, until a drain says so (`Gate::delivered`).
    pub fn new(share: f64, decision: Decision) -> Budget {
        let limit_ns = if share > 0.0 {
            (share * WINDOW_NS as f64) as u64
        } else {
            u64::MAX
        };
        Budget {
            limit_ns,
            window_start_ns: AtomicU64::new(monotonic_ns()),
            spent_ns: AtomicU64::new(0),
            always_ns: AtomicU64::new(0),
            reserve_ns: AtomicU64::new(0),
            held_back: AtomicU64::new(0),
            drained_at_ns: AtomicU64::new(match decision.at_end() {
                true => 0,
                false => u64::MAX,
            }),
            decision,
            records_wanted: AtomicBool::new(false),
            records_delivered: AtomicBool::new(false),
        }
    }

    /// Whether culprits wait for the end of the run.
    pub fn at_end(&self) -> bool {
        self.decision.at_end()
    }

    /// The collector asks the drain thread to drain at its next turn although no ring needs
    /// room (its undecided stalls would otherwise outgrow their bound).
    pub fn want_records(&self) {
        self.records_wanted.store(true, Ordering::Relaxed);
    }

    /// Whether records were drained before the end since the last call.
    pub fn take_records_delivered(&self) -> bool {
        self.records_delivered.swap(false, Ordering::Acquire)
    }

    /// Adds a thread's CPU time on work that can wait (a new window starts every second).
    pub fn spend(&self, ns: u64) {
        self.roll();
        self.spent_ns.fetch_add(ns, Ordering::Relaxed);
    }

    /// Adds a thread's CPU time on work that is always done, whatever the budget.
    pub fn spend_always(&self, ns: u64) {
        self.roll();
        self.spent_ns.fetch_add(ns, Ordering::Relaxed);
        self.always_ns.fetch_add(ns, Ordering::Relaxed);
    }

    /// True when this window's budget is spent, less the room kept for what is always done;
    /// counted as a hold-back.
    pub fn hold_back(&self) -> bool {
        let over = !self.allows(0);
        if over {
            self.held_back.fetch_add(1, Ordering::Relaxed);
        }
        over
    }

    /// True while this window's spending plus `more` (work under way, not yet spent) leaves
    /// the room kept for what is always done.
    pub fn allows(&self, more: u64) -> bool {
        self.roll();
        let kept = self
            .reserve_ns
            .load(Ordering::Relaxed)
            .saturating_sub(self.always_ns.load(Ordering::Relaxed));
        self.spent_ns
            .load(Ordering::Relaxed)
            .saturating_add(more)
            .saturating_add(kept)
            < self.limit_ns
    }

    /// `allows(more)` for work under way whose CPU time, `exact()` (a system call), is at
    /// most `upper` — the wall time since it began, which one thread's CPU time cannot
    /// outgrow: the exact figure is asked for only when `upper` does not fit (in a quiet run,
    /// never).
    pub fn allows_within(&self, upper: u64, exact: impl FnOnce() -> u64) -> bool {
        self.allows(upper) || self.allows(exact())
    }

    /// `allows_within` for the calling thread's work since `wall_from` (CLOCK_MONOTONIC) and
    /// `cpu_from` (its CPU clock), both read when the work began — the wall clock first.
    pub fn allows_since(&self, wall_from: u64, cpu_from: u64) -> bool {
        self.allows_within(monotonic_ns().saturating_sub(wall_from), || {
            own_thread_cpu_ns().saturating_sub(cpu_from)
        })
    }

    pub fn held_back(&self) -> u64 {
        self.held_back.load(Ordering::Relaxed)
    }

    /// Records committed before this time have all been drained (`u64::MAX` before any drain
    /// reported: without probes nothing waits for one).
    pub fn drained_at(&self) -> u64 {
        self.drained_at_ns.load(Ordering::Relaxed)
    }

    fn roll(&self) {
        let now = monotonic_ns();
        let start = self.window_start_ns.load(Ordering::Relaxed);
        if now.saturating_sub(start) >= WINDOW_NS
            && self
                .window_start_ns
                .compare_exchange(start, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            self.spent_ns.store(0, Ordering::Relaxed);
            let always = self.always_ns.swap(0, Ordering::Relaxed);
            self.reserve_ns.store(always, Ordering::Relaxed);
        }
    }
}

impl Gate for Budget {
    fn deciding_at_end(&self) -> bool {
        self.at_end()
    }

    fn take_records_wanted(&self) -> bool {
        self.records_wanted.swap(false, Ordering::Relaxed)
    }

    fn hold_back(&self) -> bool {
        Budget::hold_back(self)
    }

    fn allows_since(&self, wall_from: u64, cpu_from: u64) -> bool {
        Budget::allows_since(self, wall_from, cpu_from)
    }

    fn spend(&self, ns: u64) {
        Budget::spend(self, ns)
    }

    fn delivered(&self, emptied_at: Option<u64>) {
        if self.at_end() {
            self.records_delivered.store(true, Ordering::Release);
        }
        // Only an emptied ring vouches for every record committed before the drain began.
        if let Some(ns) = emptied_at {
            self.drained_at_ns.store(ns, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_holds_back_once_spent_and_not_before() {
        let b = Budget::new(0.01, Decision::Live);
        assert!(!b.hold_back());
        b.spend(5_000_000);
        assert!(!b.hold_back(), "5 ms of a 10 ms budget");
        b.spend(5_000_000);
        assert!(b.hold_back(), "10 ms of a 10 ms budget");
        assert_eq!(b.held_back(), 1);
        assert!(
            !Budget::new(0.0, Decision::Live).hold_back(),
            "0 is no limit"
        );
        let b = Budget::new(0.01, Decision::Live);
        assert!(b.allows(9_000_000));
        assert!(!b.allows(10_000_000), "work under way counts");
    }

    #[test]
    fn the_exact_cpu_time_is_asked_for_only_when_the_wall_time_does_not_fit() {
        let b = Budget::new(0.01, Decision::Live);
        b.spend(5_000_000);
        let mut asked = 0;
        // 1 ms of wall time fits in the 5 ms left: no need to know the CPU time.
        assert!(b.allows_within(1_000_000, || {
            asked += 1;
            1_000_000
        }));
        assert_eq!(asked, 0);
        // 6 ms of wall time does not: the CPU time decides, either way.
        assert!(b.allows_within(6_000_000, || {
            asked += 1;
            2_000_000
        }));
        assert!(!b.allows_within(6_000_000, || {
            asked += 1;
            5_000_000
        }));
        assert_eq!(asked, 2);
    }

    #[test]
    fn room_is_kept_for_what_is_always_done() {
        let b = Budget::new(0.01, Decision::Live);
        b.spend_always(3_000_000);
        assert!(b.allows(6_000_000), "no reserve in the first window");
        // The next window keeps room for the last one's 3 ms, less what it already spent.
        b.window_start_ns.store(0, Ordering::Relaxed);
        assert!(b.allows(6_000_000));
        assert!(!b.allows(7_000_000), "6 + 3 kept + 7 > 10 ms");
        b.spend_always(1_000_000);
        assert!(b.allows(6_000_000), "1 + 2 kept + 6 < 10");
        assert!(!b.allows(7_000_000));
        b.spend(6_500_000);
        assert!(!b.hold_back(), "7.5 spent + 2 kept: room for 0.5 ms");
        b.spend(500_000);
        assert!(b.hold_back(), "8 spent + 2 kept: no room for more");
    }

    #[test]
    fn the_drain_time_is_unknown_until_reported() {
        let b = Budget::new(0.01, Decision::Live);
        assert_eq!(b.drained_at(), u64::MAX);
        b.delivered(Some(42));
        assert_eq!(b.drained_at(), 42);
        assert!(
            !b.take_records_delivered(),
            "deciding live: nothing to take in apart"
        );
        b.delivered(None);
        assert_eq!(
            b.drained_at(),
            42,
            "a drain that did not empty the rings vouches for none"
        );
    }

    #[test]
    fn deciding_at_end_the_collector_asks_and_the_drain_thread_delivers() {
        let b = Budget::new(
            0.0,
            Decision::AtEnd {
                chosen_by_default: false,
            },
        );
        assert!(b.at_end() && b.deciding_at_end());
        assert_eq!(b.drained_at(), 0, "nothing may be decided before a drain");
        assert!(!b.take_records_wanted());
        b.want_records();
        assert!(b.take_records_wanted());
        assert!(!b.take_records_wanted(), "taken once");
        b.delivered(None);
        assert!(b.take_records_delivered());
        assert!(!b.take_records_delivered(), "taken once");
        assert_eq!(b.drained_at(), 0);
    }
}
