//! Work in short slices. When jitterscope's own threads must share a measured CPU (every CPU
//! is measured), each stretch they run is a stall of the thread measured there: the collector
//! does its work in pieces and, once a slice is used up, sleeps so the measured thread runs
//! again before it goes on. The drain thread and the collector share one slice: the drain
//! wakes the collector when it has drained, and the collector, woken, preempted the drain and
//! ran a slice of its own on top of the drain's (140–165 µs stretches of the two under the
//! hrtimer storm, each thread's own under 100 µs).

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use super::clock::{monotonic_ns, own_thread_cpu_ns};

/// Longest stretch of work before a pause: the slice seen as `self` is this, the last piece
/// of work and the switches around it, and stays below 100 µs. Each pause costs the collector
/// a switch out, a timer and a switch back, and the pieces known to be long are announced
/// (`before`) and begin a slice of their own.
///
/// The last piece is what a VM makes long. Work done once a second finds its code and data
/// cold there (150–300 ns a cache line): copying the kernel's time by culprit for the view
/// took 8–16 µs, naming a new culprit 15–20 µs, and the last piece of a turn 35–230 µs where
/// it takes a few µs warm — and which piece is cold cannot be told from the last turns (a
/// pacer that learnt each call site's piece and filled the slice up to 75 µs made the longest
/// slices longer, 107–124 µs). Ten alternating quiet runs of each, deciding at the end: the
/// longest own slice 65–79 µs with 30 µs (one run 131) against 83–106 µs with 50 µs, the
/// threads' CPU 2.8–2.9 against 2.4–2.8 ms per 10 s (medians of five); live (five each),
/// 86–108 µs (one 196) against 97–116 µs (one 687), `self` 6.7 against 6.1 % of the stall
/// time; under the hrtimer storm deciding at the end (four each), 60–94 µs (one 232) against
/// 86–157 µs, the threads' CPU 23 against 19 ms.
pub const SLICE_NS: u64 = 30_000;
/// How long a pause lets the measured thread run (plus the timer slack of the sleep).
pub const PAUSE: Duration = Duration::from_micros(50);

/// How soon after one of the threads stopped working another may begin and still be in its
/// slice: the measured thread cannot have run much in between (a wake-up and a switch take
/// 5–20 µs here).
pub const HANDOFF_NS: u64 = 20_000;

/// The slice the enabled pacers of the process share: when it began, how many of them are at
/// work in it now, and when the last of them stopped.
#[derive(Debug, Default)]
pub struct SharedSlice {
    began_ns: AtomicU64,
    working: AtomicU32,
    stopped_ns: AtomicU64,
}

impl SharedSlice {
    /// The process's own, shared by every `Pacer::new`.
    pub fn process() -> Arc<SharedSlice> {
        static PROCESS: OnceLock<Arc<SharedSlice>> = OnceLock::new();
        PROCESS.get_or_init(Arc::default).clone()
    }

    /// A thread begins work at `now`: the slice under way if another is at work or stopped
    /// within `HANDOFF_NS`, else a new one. Returns when its slice began.
    fn join(&self, now: u64) -> u64 {
        let others = self.working.fetch_add(1, Ordering::AcqRel);
        let began = self.began_ns.load(Ordering::Acquire);
        if others > 0 || now.saturating_sub(self.stopped_ns.load(Ordering::Acquire)) < HANDOFF_NS {
            began.min(now)
        } else {
            self.began_ns.store(now, Ordering::Release);
            now
        }
    }

    /// A thread stops work (it pauses or waits) at `now`.
    fn leave(&self, now: u64) {
        self.stopped_ns.store(now, Ordering::Release);
        self.working.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Tracks the slice under way; a disabled pacer never pauses. Dropped while at work, it stops
/// (a pacer replaced at the end of a run must not hold the shared slice for the next one).
#[derive(Debug)]
pub struct Pacer {
    enabled: bool,
    slice_ns: u64,
    pause: Duration,
    began_ns: u64,
    shared: Arc<SharedSlice>,
    /// Between `begin` and `end` (or a pause): counted among the shared slice's workers.
    working: bool,
    /// Pauses taken so far.
    pub pauses: u64,
}

impl Drop for Pacer {
    fn drop(&mut self) {
        self.end();
    }
}

impl Pacer {
    /// A pacer of the process's shared slice.
    pub fn new(enabled: bool) -> Pacer {
        Pacer::sharing(enabled, SLICE_NS, PAUSE, SharedSlice::process())
    }

    /// A pacer with a slice of its own.
    pub fn with(enabled: bool, slice_ns: u64, pause: Duration) -> Pacer {
        Pacer::sharing(enabled, slice_ns, pause, Arc::default())
    }

    pub fn sharing(
        enabled: bool,
        slice_ns: u64,
        pause: Duration,
        shared: Arc<SharedSlice>,
    ) -> Pacer {
        Pacer {
            enabled,
            slice_ns,
            pause,
            began_ns: monotonic_ns(),
            shared,
            working: false,
            pauses: 0,
        }
    }

    /// Whether it paces at all (the thread shares a measured CPU).
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// The thread begins work (it just woke up): in the slice of another of the process's
    /// threads at work or just stopped, else in a new one.
    pub fn begin(&mut self) {
        if self.enabled {
            self.end();
            self.began_ns = self.shared.join(monotonic_ns());
            self.working = true;
        }
    }

    /// The thread stops work (it is about to wait for more).
    pub fn end(&mut self) {
        if self.working {
            self.shared.leave(monotonic_ns());
            self.working = false;
        }
    }

    /// Between two pieces of work: pauses if the slice is used up. True if it paused.
    pub fn between(&mut self) -> bool {
        self.before(0)
    }

    /// Before a piece of work known to take about `ns` in one go (a histogram's reset, an
    /// interval log's line): pauses first unless it fits in what is left of the slice. True
    /// if it paused.
    pub fn before(&mut self, ns: u64) -> bool {
        if !self.enabled
            || monotonic_ns()
                .saturating_sub(self.began_ns)
                .saturating_add(ns)
                < self.slice_ns
        {
            return false;
        }
        let working = self.working;
        self.end();
        std::thread::sleep(self.pause);
        self.pauses += 1;
        if working {
            self.begin();
        } else {
            self.began_ns = monotonic_ns();
        }
        true
    }
}

/// What the collector threads may spend of one CPU, shared between them: over each second,
/// at most `share` of it. Some work is always done (the workload's stalls are taken in, the
/// live view is shown): it is spent as `spend_always`, and the work that can wait keeps room
/// for as much of it as the last second had. When a storm brings more records than that buys, they hold back —
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
    /// Culprits are decided at the end of the run (`--attribution end`): the records wait in
    /// the rings until then, drained before only when a ring needs room or the collector asks.
    at_end: bool,
    /// The collector asks for a drain before the end (its undecided stalls pile up).
    records_wanted: AtomicBool,
    /// Deciding at the end, the drain thread drained before it: the collector takes the
    /// records in, with every stall before them (`take_records_delivered`).
    records_delivered: AtomicBool,
}

/// The budget window.
const WINDOW_NS: u64 = 1_000_000_000;

impl Budget {
    /// `share` of one CPU (0.01 = 1 %); 0 or less means no limit.
    pub fn new(share: f64) -> Budget {
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
            drained_at_ns: AtomicU64::new(u64::MAX),
            at_end: false,
            records_wanted: AtomicBool::new(false),
            records_delivered: AtomicBool::new(false),
        }
    }

    /// The same budget for a run that decides its culprits at the end: nothing is drained,
    /// so nothing may be decided, until a drain says so (`drained`).
    pub fn deciding_at_end(mut self) -> Budget {
        self.at_end = true;
        self.drained_at_ns = AtomicU64::new(0);
        self
    }

    /// Whether culprits wait for the end of the run (`deciding_at_end`).
    pub fn at_end(&self) -> bool {
        self.at_end
    }

    /// The collector asks the drain thread to drain at its next turn although no ring needs
    /// room (its undecided stalls would otherwise outgrow their bound).
    pub fn want_records(&self) {
        self.records_wanted.store(true, Ordering::Relaxed);
    }

    /// Whether a drain was asked for since the last call.
    pub fn take_records_wanted(&self) -> bool {
        self.records_wanted.swap(false, Ordering::Relaxed)
    }

    /// The drain thread drained before the end (its records are on their way).
    pub fn records_delivered(&self) {
        self.records_delivered.store(true, Ordering::Release);
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

    /// The drain thread emptied the ring in a drain that began at `ns`.
    pub fn drained(&self, ns: u64) {
        self.drained_at_ns.store(ns, Ordering::Relaxed);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_disabled_pacer_never_pauses() {
        let mut p = Pacer::with(false, 0, Duration::from_millis(50));
        p.begin();
        assert!(!p.between());
        assert!(!p.before(u64::MAX));
        assert_eq!(p.pauses, 0);
    }

    #[test]
    fn a_long_piece_announced_begins_a_slice_of_its_own() {
        let mut p = Pacer::with(true, 10_000_000, Duration::from_micros(10));
        p.begin();
        assert!(!p.before(1_000_000), "1 ms fits in a fresh 10 ms slice");
        assert_eq!(p.pauses, 0);
        assert!(p.before(10_000_000), "10 ms does not fit in what is left");
        assert_eq!(p.pauses, 1);
        // The slice began anew at the pause: the piece fits now, and so does an overflow.
        assert!(!p.before(9_000_000));
        assert!(!p.between());
        assert!(p.before(u64::MAX));
        assert_eq!(p.pauses, 2);
    }

    #[test]
    fn a_thread_woken_by_another_goes_on_in_its_slice() {
        let shared = Arc::new(SharedSlice::default());
        let pacer = || Pacer::sharing(true, 200_000, Duration::from_micros(10), shared.clone());
        let (mut drain, mut collector) = (pacer(), pacer());
        drain.begin();
        std::thread::sleep(Duration::from_micros(150));
        // Woken while the other works: 150 µs of the 200 µs slice are gone.
        collector.begin();
        std::thread::sleep(Duration::from_micros(100));
        assert!(collector.between(), "250 µs into the shared slice: pause");
        // The pause began a new slice for it; the other still works in the old one.
        assert!(
            drain.between(),
            "the old slice is used up for the other too"
        );
        drain.end();
        collector.end();
        // Begun right after the other stopped: still the same slice.
        let mut third = pacer();
        std::thread::sleep(Duration::from_micros(150));
        collector.begin();
        collector.end();
        third.begin();
        assert!(
            third.began_ns <= collector.began_ns,
            "begun within the hand-off of another's stop: its slice"
        );
        third.end();
        // Long after everyone stopped: a new slice.
        std::thread::sleep(Duration::from_nanos(2 * HANDOFF_NS));
        let before = monotonic_ns();
        third.begin();
        assert!(third.began_ns >= before);
        assert!(!third.between(), "a fresh slice has time left");
        // A pacer dropped at work leaves the slice: the next thread begins a new one.
        drop(third);
        std::thread::sleep(Duration::from_nanos(2 * HANDOFF_NS));
        let before = monotonic_ns();
        collector.begin();
        assert!(collector.began_ns >= before, "nobody is at work any more");
    }

    #[test]
    fn pauses_once_the_slice_is_used_up_and_starts_a_new_one() {
        let mut p = Pacer::with(true, 200_000, Duration::from_micros(10));
        p.begin();
        assert!(!p.between(), "a fresh slice has time left");
        std::thread::sleep(Duration::from_micros(300));
        assert!(p.between(), "300 µs of a 200 µs slice: pause");
        assert_eq!(p.pauses, 1);
    }

    #[test]
    fn a_budget_holds_back_once_spent_and_not_before() {
        let b = Budget::new(0.01);
        assert!(!b.hold_back());
        b.spend(5_000_000);
        assert!(!b.hold_back(), "5 ms of a 10 ms budget");
        b.spend(5_000_000);
        assert!(b.hold_back(), "10 ms of a 10 ms budget");
        assert_eq!(b.held_back(), 1);
        assert!(!Budget::new(0.0).hold_back(), "0 is no limit");
        let b = Budget::new(0.01);
        assert!(b.allows(9_000_000));
        assert!(!b.allows(10_000_000), "work under way counts");
    }

    #[test]
    fn the_exact_cpu_time_is_asked_for_only_when_the_wall_time_does_not_fit() {
        let b = Budget::new(0.01);
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
        let b = Budget::new(0.01);
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
        let b = Budget::new(0.01);
        assert_eq!(b.drained_at(), u64::MAX);
        b.drained(42);
        assert_eq!(b.drained_at(), 42);
    }
}
