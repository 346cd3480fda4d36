//! The scheduler tick's stops as the `timer:tick_stop` program counts them (`struct
//! js_tick_stops` in bpf/jitterscope.h): decoded into `model::TickStops`, the dependency
//! slots named by the kernel's `TICK_DEP_BIT_*` numbers (include/linux/tick.h).

use super::skel::types::js_tick_stops;
use crate::model::{Cpu, TickDependency, TickStops};

/// The tracepoint the counters come from, as the attach report names it.
pub const TRACEPOINT: &str = "tick_stop";

/// The dependency of `TICK_DEP_BIT_<bit>` (include/linux/tick.h); `Other` past the bits this
/// version names.
pub fn dependency_of_bit(bit: usize) -> TickDependency {
    match bit {
        0 => TickDependency::PosixTimer,
        1 => TickDependency::PerfEvents,
        2 => TickDependency::Sched,
        3 => TickDependency::ClockUnstable,
        4 => TickDependency::Rcu,
        5 => TickDependency::RcuExp,
        _ => TickDependency::Other,
    }
}

/// One CPU's counters: `kept[n]` counts the kept ticks whose dependency was bit `n`, the last
/// slot any other value. Only dependencies seen are listed; slots that name the same
/// dependency are added up.
pub fn decode(cpu: Cpu, stopped: u64, kept: &[u64]) -> TickStops {
    let last = kept.len().saturating_sub(1);
    let mut by: Vec<(TickDependency, u64)> = Vec::new();
    for (slot, &n) in kept.iter().enumerate().filter(|(_, &n)| n > 0) {
        let dep = if slot == last {
            TickDependency::Other
        } else {
            dependency_of_bit(slot)
        };
        match by.iter_mut().find(|(d, _)| *d == dep) {
            Some((_, total)) => *total += n,
            None => by.push((dep, n)),
        }
    }
    by.sort();
    TickStops {
        cpu,
        stopped,
        kept: by,
    }
}

/// The counters of `cpus` from the programs' .bss (`tick_stops`, a line per CPU).
pub(super) fn read(lines: &[js_tick_stops], cpus: &[Cpu]) -> Vec<TickStops> {
    cpus.iter()
        .filter_map(|&cpu| {
            let line = lines.get(cpu as usize)?;
            // SAFETY: reading plain integers the kernel may still be updating.
            let line = unsafe { std::ptr::read_volatile(line) };
            Some(decode(cpu, line.stopped, &line.kept))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_dependency_slot_is_the_kernels_bit_number() {
        // TICK_DEP_BIT_* of include/linux/tick.h, in the kernel's order.
        let bits = [
            TickDependency::PosixTimer,
            TickDependency::PerfEvents,
            TickDependency::Sched,
            TickDependency::ClockUnstable,
            TickDependency::Rcu,
            TickDependency::RcuExp,
        ];
        for (bit, dep) in bits.into_iter().enumerate() {
            assert_eq!(dependency_of_bit(bit), dep, "bit {bit}");
        }
        assert_eq!(dependency_of_bit(bits.len()), TickDependency::Other);
    }

    #[test]
    fn kept_ticks_are_listed_by_dependency_and_none_are_lost() {
        // sched 240, rcu 10, and 3 with a value this version does not name (the last slot).
        let kept = [0, 0, 240, 0, 10, 0, 3];
        let t = decode(2, 5, &kept);
        assert_eq!(t.cpu, 2);
        assert_eq!(t.stopped, 5);
        assert_eq!(
            t.kept,
            vec![
                (TickDependency::Sched, 240),
                (TickDependency::Rcu, 10),
                (TickDependency::Other, 3)
            ]
        );
        let total: u64 = t.kept.iter().map(|(_, n)| n).sum();
        assert_eq!(total, kept.iter().sum::<u64>());
    }

    #[test]
    fn an_unnamed_bit_below_the_last_slot_adds_to_other() {
        // A kernel with more slots than this version names: bit 6 and the catch-all add up.
        let t = decode(0, 0, &[1, 0, 0, 0, 0, 0, 4, 2]);
        assert_eq!(
            t.kept,
            vec![(TickDependency::PosixTimer, 1), (TickDependency::Other, 6)]
        );
    }

    #[test]
    fn each_dependency_is_shown_as_its_json_spells_it() {
        for bit in 0..8 {
            let dep = dependency_of_bit(bit);
            let json = serde_json::to_value(dep).unwrap();
            assert_eq!(json.as_str(), Some(dep.as_str()), "{dep:?}");
        }
    }

    #[test]
    fn an_idle_cpu_lists_no_kept_ticks() {
        let t = decode(1, 412, &[0; 7]);
        assert_eq!((t.stopped, t.kept.is_empty()), (412, true));
    }

    #[test]
    fn the_counters_line_holds_every_dependency_slot() {
        let line = js_tick_stops::default();
        assert_eq!(line.kept.len(), 7);
        assert_eq!(std::mem::size_of::<js_tick_stops>(), 64);
    }
}
