//! The stall summary as the reports show it (the bookkeeping that fills it during a run is
//! `attribution::book`).

use std::fmt::Write as _;

use super::runfile::{CpuStalls, StallSummary};
use crate::attribution::book::StallTotals;
use crate::units::fmt_ns;

impl From<StallTotals> for StallSummary {
    fn from(t: StallTotals) -> Self {
        StallSummary {
            count: t.all.count,
            total_ns: t.all.total_ns,
            longest_ns: t.all.longest_ns,
            per_cpu: t
                .per_cpu
                .into_iter()
                .map(|(cpu, c)| CpuStalls {
                    cpu,
                    count: c.count,
                    total_ns: c.total_ns,
                    longest_ns: c.longest_ns,
                })
                .collect(),
        }
    }
}

/// The stall summary block of the text report, under `title`.
pub fn render_summary(title: &str, s: &StallSummary, duration_ns: u64) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "== {title} ==");
    let share = |t: u64| {
        if duration_ns == 0 {
            0.0
        } else {
            100.0 * t as f64 / duration_ns as f64
        }
    };
    let _ = writeln!(
        out,
        "{:<8}{:>10}{:>14}{:>12}{:>12}",
        "cpu", "count", "total", "of time", "longest"
    );
    for c in &s.per_cpu {
        let _ = writeln!(
            out,
            "{:<8}{:>10}{:>14}{:>11.4}%{:>12}",
            c.cpu,
            c.count,
            fmt_ns(c.total_ns),
            share(c.total_ns),
            fmt_ns(c.longest_ns)
        );
    }
    let _ = writeln!(
        out,
        "{:<8}{:>10}{:>14}{:>12}{:>12}",
        "all",
        s.count,
        fmt_ns(s.total_ns),
        "",
        fmt_ns(s.longest_ns)
    );
    out
}
