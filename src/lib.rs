//! jitterscope: attribute every latency spike of a pinned busy-spin workload to the
//! kworker, IRQ or frequency change that caused it.

pub mod model;
pub mod probe;
