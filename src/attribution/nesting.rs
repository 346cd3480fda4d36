//! The nesting rule, shared by the engine's sweep (`engine`) and the live preview's tally
//! (`tally`): nested time is counted once, to the innermost cause. At an instant covered by
//! several episodes the one of the deepest level wins it — its level never below that of the
//! episode it is nested in (jitterscope's own hrtimer, class `self`, runs inside the timer
//! interrupt and takes that time from it) — then the one that started last, then the one that
//! ends first (of two starting together at one level the shorter is inside the other, as a
//! work item resumed at its worker's switch-in). docs/reading-a-report.md, "Attribution",
//! says the same for users.

use std::cmp::Reverse;

use crate::model::{CulpritClass, Nanos};

/// An episode as the rule ranks it: of the episodes covering an instant, the greatest wins it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Nesting {
    level: u8,
    start_ns: Nanos,
    end_ns: Reverse<Nanos>,
}

impl Nesting {
    /// An episode of `class`, nested in one of `parent` (if any), over `[start_ns, end_ns]`.
    pub fn of(class: CulpritClass, parent: Option<CulpritClass>, span: (Nanos, Nanos)) -> Self {
        Nesting {
            level: class.level().max(parent.map_or(0, CulpritClass::level)),
            start_ns: span.0,
            end_ns: Reverse(span.1),
        }
    }

    /// Whether this episode lies inside `outer` and wins all of its span from it: that time
    /// is its own, not `outer`'s.
    pub fn inside(&self, outer: &Nesting) -> bool {
        self.start_ns >= outer.start_ns && self.end_ns.0 <= outer.end_ns.0 && self > outer
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use CulpritClass::*;

    #[test]
    fn the_deeper_then_the_later_then_the_shorter_episode_takes_the_time() {
        let worker = Nesting::of(Kworker, None, (1000, 2000));
        let irq = Nesting::of(Irq, Some(Kworker), (1100, 1150));
        let item = Nesting::of(Kworker, None, (1000, 1500));
        let tick = Nesting::of(TimerTick, Some(Kworker), (1500, 1520));
        let own = Nesting::of(SelfNoise, Some(TimerTick), (1505, 1515));
        assert!(irq.inside(&worker) && !worker.inside(&irq));
        assert!(item.inside(&worker), "same level and start: the shorter");
        assert!(own.inside(&tick), "at its parent's level, started later");
        assert!(!irq.inside(&tick), "not within its span");
        assert!(!worker.inside(&worker));
    }
}
