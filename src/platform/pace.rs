//! Work in short slices. When jitterscope's own threads must share a measured CPU (every CPU
//! is measured), each stretch they run is a stall of the thread measured there: the collector
//! does its work in pieces and, once a slice is used up, sleeps so the measured thread runs
//! again before it goes on. The drain thread and the collector share one slice: the drain
//! wakes the collector when it has drained, and the collector, woken, preempted the drain and
//! ran a slice of its own on top of the drain's: stretches of the two together, each thread's
//! own under the slice.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use super::clock::monotonic_ns;

/// Longest stretch of work before a pause: the slice seen as `self` is this, the last piece
/// of work and the switches around it, and stays below 100 µs. Each pause costs the collector
/// a switch out, a timer and a switch back, and the pieces known to be long are announced
/// (`before`) and begin a slice of their own.
///
/// The last piece is what a VM makes long: work done once a second finds its code and data
/// cold, and which piece is cold cannot be told from the turns before, so the slice leaves
/// room for a cold last piece rather than filling itself up to a target. 30 µs keeps the
/// longest own slice under 100 µs (`scripts/bench.sh`, "longest own slice on a measured CPU")
/// for a little more of the threads' CPU than longer slices.
pub const SLICE_NS: u64 = 30_000;
/// How long a pause lets the measured thread run (plus the timer slack of the sleep).
pub const PAUSE: Duration = Duration::from_micros(50);

/// How soon after one of the threads stopped working another may begin and still be in its
/// slice: the measured thread cannot have run much in between (a wake-up and a switch take
/// about that long on a VM).
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
}
