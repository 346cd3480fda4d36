//! jitterscope: attribute every latency spike of a pinned busy-spin workload to the
//! kworker, IRQ or frequency change that caused it.

pub mod attribution;
pub mod check;
pub mod cli;
pub mod live;
pub mod model;
pub mod platform;
pub mod probe;
pub mod report;
pub mod session;
pub mod signals;
pub mod summary;
pub mod system;
pub mod units;
pub mod verify;
pub mod workload;
pub mod workshop;
