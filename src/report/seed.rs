//! The seed experiment's histogram blocks, as perf-workshop printed them:
//! `== Accumulator Message Transit Latency (ns) ==` then mean, min, the percentiles, max, count.

use std::fmt::Write as _;

pub use crate::summary::{Summary, PERCENTILES};

/// One block of the seed's report.
pub fn block(title: &str, s: &Summary) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "== {title} (ns) ==");
    let _ = writeln!(out, "{:<10}{:>14.0}", "mean", s.mean);
    let _ = writeln!(out, "{:<10}{:>14}", "min", s.min);
    for &(key, label, _) in &PERCENTILES {
        let v = s.percentile(key).unwrap_or(0);
        let _ = writeln!(out, "{label:<10}{v:>14}");
    }
    let _ = writeln!(out, "{:<10}{:>14}", "max", s.max);
    let _ = writeln!(out, "{:<10}{:>14}", "count", s.count);
    out
}
