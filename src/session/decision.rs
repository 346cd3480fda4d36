//! When a run decides its culprits (`crate::model::Decision`), and the rule for a run not
//! told (`--attribution auto`).

use crate::model::{Decision, Nanos};

/// The longest run that decides its culprits at the end when not told when to decide
/// (`--attribution auto`): what the rings and the workload's queues hold of a quiet run with
/// room to spare (an 8 MiB ring fills in some two minutes, a stall queue half-fills in
/// about 90 s). A longer run would decide most of its stalls while it runs anyway — when a
/// ring or a queue needs room, in bursts — for about the `self` share of deciding live, and
/// its live view would show kernel time instead of culprits: it decides live.
pub const AT_END_BY_DEFAULT_UP_TO_NS: Nanos = 60_000_000_000;

/// When a run not told when to decide its culprits (`--attribution auto`) decides them: at
/// the end where every CPU is measured (jitterscope's threads must share them and each of
/// their slices stalls the workload, so only what the live view needs runs beside it) —
/// unless there is nothing to decide (no probes), something needs the decisions while the run
/// goes on (the metrics file's culprit series), or the run is longer than the rings hold.
pub fn by_default(
    probes: bool,
    metrics: bool,
    every_cpu_measured: bool,
    duration_ns: Nanos,
) -> Decision {
    if probes && !metrics && every_cpu_measured && duration_ns <= AT_END_BY_DEFAULT_UP_TO_NS {
        Decision::AtEnd {
            chosen_by_default: true,
        }
    } else {
        Decision::Live
    }
}
